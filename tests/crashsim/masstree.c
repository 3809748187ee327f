/* masstree.c - the crash simulator's Masstree workload: each thread's
 * part anchors a Masstree on txn.h; setup loads PRELOAD keys (several
 * leaves under an internal root), then each step is one put or remove,
 * i.e. one transaction of the tree, with long keys going down layers.
 * The oracle is a sorted array of the completed operations; a recovered
 * pool must rebuild (mt_open checks the structure) into a tree whose full
 * scan has the digest of one acceptable state, and whose nodes are exactly
 * the live blocks beyond the parts. Built for incll, the tree keeps its
 * nodes in the pool (MT_INCLL): mt_open checks nothing, recovery is the
 * first access of each node (mt_sim_touch, crashed too), and with one
 * thread the oracle is exact: the tree at the last completed txn_sync.
 * CRASHSIM_MT_BATCH=B (the in-pool build): up to B operations share a
 * transaction (mt_opts.batch); the commit hook then announces the state
 * after the batch, and the sync every K commits runs after such a commit.
 * Setup and each thread's last step commit what they keep (mt_flush). */
#include <stdlib.h>
#include <string.h>

#include "masstree.h"
#include "sim.h"

enum { KEYS = 600, PRELOAD = 220, KLEN_MAX = 20, MAXN = KEYS };

struct kv {
    uint8_t k[KLEN_MAX];
    size_t len;
    uint64_t v;
};

static struct kv ref[SIM_THREADS][MAXN];
static size_t nref[SIM_THREADS];
static mt_tree *tree[SIM_THREADS];
static uint64_t next_digest[SIM_THREADS];

static int kcmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* key number i of the universe: 8 bytes for most, longer (layers) for
 * one in four, sharing their first slice in groups */
static size_t key_of(unsigned i, uint8_t *k)
{
    uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull;
    if (i % 4) {
        memcpy(k, &x, 8);
        return 8;
    }
    memcpy(k, "prefix::", 8);
    memcpy(k + 8, &x, 8);
    size_t len = 9 + i % 11;
    if (len > 16)
        memcpy(k + 16, "tail", len - 16);
    return len;
}

static uint64_t digest_of(const struct kv *e, size_t n)
{
    uint64_t h = 3;
    for (size_t i = 0; i < n; i++) {
        h = sim_hash(h, &e[i].len, sizeof e[i].len);
        h = sim_hash(h, e[i].k, e[i].len);
        h = sim_hash(h, &e[i].v, 8);
    }
    return sim_hash(h, &n, sizeof n);
}

static uint64_t mt_mirror(int t)
{
    return digest_of(ref[t], nref[t]);
}

/* apply put (del 0) or remove to thread t's reference; 1 if it changed
 * the key set (insert/remove), as the tree must report */
static int ref_apply(int t, const uint8_t *k, size_t len, uint64_t v, int del)
{
    struct kv *e = ref[t];
    size_t i = 0;
    while (i < nref[t] && kcmp(e[i].k, e[i].len, k, len) < 0)
        i++;
    int found = i < nref[t] && !kcmp(e[i].k, e[i].len, k, len);
    if (del) {
        if (found)
            memmove(e + i, e + i + 1, (--nref[t] - i) * sizeof *e);
        return found;
    }
    if (found) {
        e[i].v = v;
        return 0;
    }
    memmove(e + i + 1, e + i, (nref[t]++ - i) * sizeof *e);
    memcpy(e[i].k, k, len);
    e[i].len = len;
    e[i].v = v;
    return 1;
}

/* sim_commit's error after a commit that took (its txn_sync) would have
 * the tree put back an operation the pool holds (masstree.h); the
 * simulator stops at the error, and no operation follows on the tree */
static int commit_hook(txn *tx, void *arg)
{
    int t = (int)(intptr_t)arg;
    return sim_commit(tx, t, next_digest[t]);
}

static int opts_of(txn_pool *p, int t, mt_opts *o)
{
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    const char *b = getenv("CRASHSIM_MT_BATCH");
    *o = (mt_opts){.pool = p, .anchor = sim_part(tx, p, t), .commit = commit_hook,
                   .commit_arg = (void *)(intptr_t)t,
                   .batch = b ? (unsigned)strtoul(b, NULL, 10) : 0};
    txn_abort(tx);
    return 0;
}

/* one operation on tree and reference; the tree's answer must match */
static int op_key(int t, const uint8_t *k, size_t len, uint64_t v, int del)
{
    int want = ref_apply(t, k, len, v, del);
    next_digest[t] = mt_mirror(t);
    int rc = del ? mt_remove(tree[t], k, len) : mt_put(tree[t], k, len, v);
    if (rc < 0)
        return rc;
    return rc == want ? 0 : TXN_E_STATE;
}

/* a value: half of them 16-byte aligned words below 2^48 (what a value
 * InCLL of the in-pool tree can save, as the pointers of ycsb-incll), the
 * others any 64-bit word (the node is logged or the entry moved) */
static uint64_t mt_value(uint64_t *rng)
{
    uint64_t v = sim_rand(rng);
    return v & 1 ? v & 0x0000fffffffffff0ull : v;
}

static int op(int t, unsigned key, uint64_t v, int del)
{
    uint8_t k[KLEN_MAX];
    size_t len = key_of(key, k);
    return op_key(t, k, len, v, del);
}

static int mt_setup(txn_pool *p, int t)
{
    mt_opts o;
    int rc = opts_of(p, t, &o);
    if (rc)
        return rc;
    mt_close(tree[t]); /* the previous run's */
    nref[t] = 0;
    next_digest[t] = mt_mirror(t);
    if ((rc = mt_create(&o, &tree[t])))
        return rc;
    uint64_t rng = 99 + (uint64_t)t;
    for (unsigned i = 0; i < PRELOAD && !rc; i++) {
        unsigned key = (unsigned)(sim_rand(&rng) % KEYS);
        rc = op(t, key, mt_value(&rng), 0);
    }
    return rc ? rc : mt_flush(tree[t]);
}

static int mt_finish(int t)
{
    return mt_flush(tree[t]);
}

/* puts and removes of random keys; three steps in ten remove the key
 * three quarters into the key order (past the long keys' layer), so that
 * those removes sweep through neighbouring keys and empty leaves (which
 * are unlinked and freed) */
static int mt_step(txn_pool *p, int t, uint64_t *rng)
{
    (void)p;
    unsigned key = (unsigned)(sim_rand(rng) % KEYS), dice = (unsigned)(sim_rand(rng) % 10);
    uint64_t v = mt_value(rng);
    if (dice < 3 && nref[t] > 0) {
        struct kv e = ref[t][nref[t] * 3 / 4];
        return op_key(t, e.k, e.len, 0, 1);
    }
    return op(t, key, v, dice < 4);
}

struct rb {
    uint64_t h;
    size_t n;
    struct reach *r;
    int bad;
};

static int digest_cb(const void *key, size_t len, uint64_t val, void *arg)
{
    struct rb *b = arg;
    b->h = sim_hash(b->h, &len, sizeof len);
    b->h = sim_hash(b->h, key, len);
    b->h = sim_hash(b->h, &val, 8);
    b->n++;
    return 0;
}

static void reach_cb(txn_obj *o, void *arg)
{
    struct rb *b = arg;
    b->bad |= reach_add(b->r, o) != 0;
}

static int mt_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    mt_opts o;
    mt_tree *tr;
    if (opts_of(p, t, &o) || mt_open(&o, &tr))
        return 1;
    struct rb b = {3, 0, r, 0}; /* digest_of() of what the scan sees */
    mt_scan(tr, NULL, 0, (size_t)-1, digest_cb, &b);
    mt_objects(tr, reach_cb, &b);
    mt_close(tr);
    *digest = sim_hash(b.h, &b.n, sizeof b.n);
    return b.bad;
}

static int count_cb(const void *key, size_t len, uint64_t val, void *arg)
{
    (void)key, (void)len, (void)val, (void)arg;
    return 0;
}

static void no_obj(txn_obj *o, void *arg)
{
    (void)o, (void)arg;
}

int mt_sim_touch(txn_pool *p, int t)
{
    mt_opts o;
    mt_tree *tr;
    int rc = opts_of(p, t, &o);
    if (rc || (rc = mt_open(&o, &tr)))
        return rc;
    long n = mt_scan(tr, NULL, 0, (size_t)-1, count_cb, NULL);
    mt_objects(tr, no_obj, NULL); /* every node, internal ones too */
    mt_close(tr);
    return n < 0 ? (int)n : 0;
}

/* run when named (--workload masstree): it has its own ctest entries */
const struct workload wl_masstree = {"masstree", 4u << 20, 8, mt_setup, mt_step, mt_mirror,
                                     mt_read, WL_BY_NAME, mt_finish};

/* ---- masstree-shared: every thread's puts and removes on one tree (thread
 * 0's), under the baton scheduler (WL_SHARED). An operation is one
 * transaction of the tree, with no switch point inside it (the tree's
 * locks are never held across one); the threads' operations interleave
 * between them, each in its own context: nodes one thread frees are
 * reused by the others (TXN_ALLOC_CACHE), and every thread reads nodes
 * the others change. One reference, one commit order. */

static int mts_step(txn_pool *p, int t, uint64_t *rng)
{
    (void)t;
    sim_point(); /* before the operation's txn_begin */
    int rc = mt_step(p, 0, rng);
    sim_point(); /* after its commit */
    return rc;
}

static int mts_setup(txn_pool *p, int t)
{
    return getenv("CRASHSIM_MT_BATCH") ? TXN_E_NOTSUP : mt_setup(p, t);
}

static int mts_finish(int t)
{
    (void)t;
    return mt_finish(0);
}

const struct workload wl_masstree_shared = {"masstree-shared", 4u << 20, 8, mts_setup,
                                            mts_step, mt_mirror, mt_read,
                                            WL_BY_NAME | WL_SHARED, mts_finish};
