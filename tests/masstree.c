/* masstree.c - the Masstree against a reference ordered map, and under
 * threads; built per engine, each test run on the transient tree and on
 * the tree on txn.h (whose persistent mirrors are also rebuilt by mt_open
 * and compared). Suites: "reference" and "stress" (CK_RUN_SUITE).
 */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "masstree.h"
#include "mt_node.h"

#define KMAX 28

/* ---- pools */

static char pool_name[TEST_NAME_LEN];

static txn_pool *new_pool(void)
{
    txn_pool *p;
    txn_pool_opts o = {.size = (size_t)64 << 20, .threads = 16};
    ck_assert_int_eq(test_pool_name("masstree", pool_name, sizeof pool_name), 0);
    int rc = txn_pool_create(pool_name, "pmtx-masstree-test", &o, &p);
    ck_assert_msg(rc == 0, "pool create: %s", txn_strerror(rc));
    return p;
}

#ifdef MT_INCLL
/* Close the pool and open it again (the in-pool tree: a restart, after
 * which every node is recovered at its first access). */
static txn_pool *reopen_pool(txn_pool *p)
{
    txn_pool_close(p);
    int rc = txn_pool_open(pool_name, "pmtx-masstree-test", &p);
    ck_assert_msg(rc == 0, "pool open: %s", txn_strerror(rc));
    return p;
}
#endif

static void drop_pool(txn_pool *p)
{
    txn_pool_close(p);
    test_pool_remove(pool_name);
}

/* ---- the reference: a sorted array */

struct ent {
    uint8_t k[KMAX];
    size_t len;
    uint64_t v;
};

struct ref {
    struct ent *e;
    size_t n, cap;
};

static int kcmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* index of the first entry >= key; *found if equal */
static size_t ref_find(struct ref *r, const uint8_t *k, size_t len, int *found)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (kcmp(r->e[mid].k, r->e[mid].len, k, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < r->n && !kcmp(r->e[lo].k, r->e[lo].len, k, len);
    return lo;
}

static int ref_put(struct ref *r, const uint8_t *k, size_t len, uint64_t v)
{
    int f;
    size_t i = ref_find(r, k, len, &f);
    if (f) {
        r->e[i].v = v;
        return 0;
    }
    if (r->n == r->cap) { /* doubling: ASan's realloc always copies */
        r->cap = r->cap ? 2 * r->cap : 1024;
        r->e = realloc(r->e, r->cap * sizeof *r->e);
        ck_assert_ptr_nonnull(r->e);
    }
    memmove(r->e + i + 1, r->e + i, (r->n - i) * sizeof *r->e);
    memcpy(r->e[i].k, k, len);
    r->e[i].len = len;
    r->e[i].v = v;
    r->n++;
    return 1;
}

static int ref_remove(struct ref *r, const uint8_t *k, size_t len)
{
    int f;
    size_t i = ref_find(r, k, len, &f);
    if (!f)
        return 0;
    memmove(r->e + i, r->e + i + 1, (r->n - i - 1) * sizeof *r->e);
    r->n--;
    return 1;
}

/* ---- scans compared with the reference */

struct cmp_scan {
    struct ref *r;
    size_t at;
    int bad;
};

static int cmp_cb(const void *key, size_t len, uint64_t val, void *arg)
{
    struct cmp_scan *c = arg;
    if (c->at >= c->r->n || kcmp(key, len, c->r->e[c->at].k, c->r->e[c->at].len) ||
        val != c->r->e[c->at].v)
        c->bad = 1;
    c->at++;
    return c->bad;
}

static void check_scan(mt_tree *t, struct ref *r, const uint8_t *k, size_t len, size_t max)
{
    int f;
    struct cmp_scan c = {r, k ? ref_find(r, k, len, &f) : 0, 0};
    size_t want = r->n - c.at < max ? r->n - c.at : max;
    long n = mt_scan(t, k, len, max, cmp_cb, &c);
    ck_assert_msg(!c.bad, "scan differs from the reference at entry %zu", c.at);
    ck_assert_int_eq(n, (long)want);
}

/* key k's get answers as the reference */
static void check_key(mt_tree *t, struct ref *r, const uint8_t *k, size_t len)
{
    int f;
    uint64_t got = 0;
    size_t at = ref_find(r, k, len, &f);
    int rc = mt_get(t, k, len, &got);
    ck_assert_int_eq(rc, f ? 0 : 1);
    if (f)
        ck_assert_uint_eq(got, r->e[at].v);
}

/* keys from {0, 1, 'a', 0xff}, 0-KMAX bytes, mostly sharing prefixes:
 * many keys per slice, layers several deep, lengths differing only in
 * trailing zero bytes */
static size_t rand_key(unsigned *seed, uint8_t *k, int shortkeys)
{
    static const uint8_t alpha[] = {0, 1, 'a', 0xff};
    size_t len = (size_t)(rand_r(seed) % (KMAX + 1));
    if (shortkeys) { /* 0-8 arbitrary bytes: one layer, leaves can empty */
        len = (size_t)(rand_r(seed) % 9);
        for (size_t i = 0; i < len; i++)
            k[i] = (uint8_t)rand_r(seed);
        return len;
    }
    if (rand_r(seed) % 3 == 0)
        len = (size_t)(rand_r(seed) % 9);
    for (size_t i = 0; i < len; i++)
        k[i] = alpha[i < 6 ? rand_r(seed) % 2 : rand_r(seed) % 4];
    return len;
}

#define POOL_KEYS 3000 /* the keys a run draws from, so removes hit */

/* ---- errors part way through an operation. The test programs link with
 * --wrap=txn_write,--wrap=txn_free,--wrap=txn_commit: with t_faults set,
 * one put or remove in two has its k-th such call (k from 1 to 14) fail
 * with TXN_E_NOSPACE, as a log that cannot grow from a full pool would
 * (a failed commit rolled back, as txn_commit's). */
int __real_txn_write(txn *tx, txn_obj *o, size_t off, const void *src, size_t n);
int __real_txn_free(txn *tx, txn_obj *o);
static __thread int t_faults, t_fail_in, t_calls, t_failed;
static __thread unsigned t_fault_seed;
static __thread long t_failed_ops, t_failed_late; /* late: after a write took */

/* Or, for the races with readers, every write to t_fail_obj (a split's
 * new top root in the anchor), every free (an unlink's) or every commit
 * fails, after a pause of 2 ms: what the operation changed before is
 * seen by readers for that long. */
static __thread txn_obj *t_fail_obj;
static __thread int t_fail_frees, t_fail_commits;

static int fault_now(int slow)
{
    t_calls++;
    if (!slow && (t_fail_in <= 0 || --t_fail_in > 0))
        return 0;
    if (slow)
        usleep(2000);
    t_failed = 1;
    return 1;
}

int __wrap_txn_write(txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    return fault_now(t_fail_obj && o == t_fail_obj) ? TXN_E_NOSPACE
                                                    : __real_txn_write(tx, o, off, src, n);
}

int __wrap_txn_free(txn *tx, txn_obj *o)
{
    return fault_now(t_fail_frees) ? TXN_E_NOSPACE : __real_txn_free(tx, o);
}

/* a failed commit: rolled back, as txn_commit's are */
int __real_txn_commit(txn *tx);
int __wrap_txn_commit(txn *tx)
{
    if (!fault_now(t_fail_commits))
        return __real_txn_commit(tx);
    txn_abort(tx);
    return TXN_E_NOSPACE;
}

#ifndef MT_INCLL
/* The DRAM tree's links, which its readers and writers trust: no node
 * locked, dirty or deleted; the root bit on each layer's root only; each
 * node's parent pointer names its parent; the leaves of a layer in key
 * order form the next/prev chain. */
struct links {
    struct leaf *last; /* of the layer being walked */
};

static void check_node(struct node *n, struct inode *parent, struct links *lk);

static void check_layer(struct node *root)
{
    struct links lk = {NULL};
    ck_assert_msg(atomic_load(&root->version) & V_ROOT, "a layer's root without its root bit");
    check_node(root, NULL, &lk);
    ck_assert_msg(lk.last && !lk.last->next, "a layer's last leaf has a next");
}

static void check_node(struct node *n, struct inode *parent, struct links *lk)
{
    uint64_t v = atomic_load(&n->version);
    ck_assert_msg(!(v & (V_LOCKED | V_DIRTY | V_DELETED)), "a node locked, dirty or deleted");
    ck_assert_msg(!parent == !!(v & V_ROOT), "root bit %d with parent %p", !!(v & V_ROOT),
                  (void *)parent);
    ck_assert_msg(n->parent == parent, "parent pointer %p, not %p", (void *)n->parent,
                  (void *)parent);
    if (!is_leaf(n)) {
        struct inode *in = (struct inode *)n;
        ck_assert_uint_le(in->nkeys, IWIDTH);
        for (unsigned i = 0; i <= in->nkeys; i++)
            check_node(in->child[i], in, lk);
        return;
    }
    struct leaf *l = (struct leaf *)n;
    ck_assert_msg(l->prev == lk->last, "prev pointer");
    ck_assert_msg(!lk->last || lk->last->next == l, "next pointer");
    lk->last = l;
    for (unsigned i = 0; i < perm_count(l->perm); i++) {
        unsigned sl = perm_slot(l->perm, i);
        if (l->klen[sl] == KLEN_LAYER)
            check_layer((struct node *)l->val[sl]);
    }
}

static void check_links(mt_tree *t)
{
    check_layer(atomic_load(&t->root));
}
#endif

/* before a put or remove */
static void fault_arm(void)
{
    t_calls = t_failed = 0;
    t_fail_in = t_faults && rand_r(&t_fault_seed) % 2 ? 1 + rand_r(&t_fault_seed) % 14 : 0;
}

/* after it: 1 if it failed by fault_arm's doing (then with TXN_E_NOSPACE) */
static int fault_hit(int rc)
{
    int hit = t_failed;
    t_fail_in = 0;
    if (hit) {
        ck_assert_msg(rc == TXN_E_NOSPACE, "an operation failed part way: %s", txn_strerror(rc));
        t_failed_ops++;
        t_failed_late += t_calls > 1;
    }
    return hit;
}

static void run_reference(mt_tree **tp, struct ref *r, unsigned seed, int ops,
                          mt_opts *reopen, int shortkeys)
{
    static uint8_t keys[POOL_KEYS][KMAX];
    static size_t lens[POOL_KEYS];
    for (int i = 0; i < POOL_KEYS; i++)
        lens[i] = rand_key(&seed, keys[i], shortkeys);
    for (int i = 0; i < ops; i++) {
        unsigned pick = (unsigned)rand_r(&seed) % POOL_KEYS;
        const uint8_t *k = keys[pick];
        size_t len = lens[pick];
        unsigned dice = (unsigned)rand_r(&seed) % 100;
        /* phases: grow, then shrink (empty leaves get unlinked) */
        int grow = (i / (ops / 4)) % 2 == 0;
        uint64_t v = ((uint64_t)rand_r(&seed) << 16) | (uint64_t)i;
        if (dice < (grow ? 55u : 15u)) {
            int f;
            ref_find(r, k, len, &f);
            fault_arm();
            int rc = mt_put(*tp, k, len, v);
            if (!fault_hit(rc)) {
                ck_assert_int_eq(rc, !f);
                ref_put(r, k, len, v);
            } else {
                check_key(*tp, r, k, len); /* as before it */
            }
        } else if (dice < 85) {
            int f;
            ref_find(r, k, len, &f);
            fault_arm();
            int rc = mt_remove(*tp, k, len);
            if (!fault_hit(rc)) {
                ck_assert_int_eq(rc, f);
                ref_remove(r, k, len);
            } else {
                check_key(*tp, r, k, len);
            }
        } else {
            check_key(*tp, r, k, len);
        }
        if (i % 97 == 0)
            check_scan(*tp, r, k, len, 1 + (size_t)rand_r(&seed) % 40);
        if (i % 1999 == 0) {
            check_scan(*tp, r, NULL, 0, (size_t)-1);
#ifndef MT_INCLL
            check_links(*tp);
#endif
            if (reopen) { /* the mirrors hold the same tree */
                mt_tree *t2;
#ifdef MT_INCLL /* the pool holds the tree itself: close and reopen it */
                mt_close(*tp);
                *tp = NULL;
                reopen->pool = reopen_pool(reopen->pool);
#endif
                int rc = mt_open(reopen, &t2);
                ck_assert_msg(rc == 0, "mt_open: %s", txn_strerror(rc));
                check_scan(t2, r, NULL, 0, (size_t)-1);
                mt_close(*tp);
                *tp = t2; /* go on with the rebuilt tree */
            }
        }
    }
    check_scan(*tp, r, NULL, 0, (size_t)-1);
}

#ifndef MT_INCLL /* no transient tree in the in-pool build */
START_TEST(reference_transient)
{
    mt_opts o = {0};
    mt_tree *t;
    struct ref r = {0};
    ck_assert_int_eq(mt_create(&o, &t), 0);
    run_reference(&t, &r, 7, 40000, NULL, _i);
    mt_stats st;
    mt_stats_get(t, &st);
    /* what the run must have gone through: layers (long keys), or
     * internal nodes and unlinked leaves (short keys) */
    if (_i)
        ck_assert_msg(st.unlinked > 0 && st.splits > 100, "%llu unlinked, %llu splits",
                      (unsigned long long)st.unlinked, (unsigned long long)st.splits);
    else
        ck_assert_msg(st.layers > 100 && st.inodes > 0, "%llu layers, %llu inodes",
                      (unsigned long long)st.layers, (unsigned long long)st.inodes);
    mt_close(t);
    free(r.e);
}
END_TEST

#endif

/* _i: 0 and 1 long and short keys, one transaction per operation; 2
 * and 3 the same with up to 7 operations per transaction (mt_opts.batch:
 * the in-pool build only) */
START_TEST(reference_txn)
{
    txn_pool *p = new_pool();
    mt_opts o = {.pool = p, .anchor_off = 8, .batch = _i >= 2 ? 7 : 0};
    mt_tree *t;
    struct ref r = {0};
    ck_assert_int_eq(mt_create(&o, &t), 0);
    run_reference(&t, &r, 11, 12000, &o, _i & 1);
#ifdef MT_INCLL /* what the run went through (unlinking: reuse_txn) */
    mt_stats st;
    mt_stats_get(t, &st);
    if (_i & 1)
        ck_assert_msg(st.inodes > 0, "%llu inodes", (unsigned long long)st.inodes);
    else
        ck_assert_msg(st.layers > 100 && st.inodes > 0, "%llu layers, %llu inodes",
                      (unsigned long long)st.layers, (unsigned long long)st.inodes);
#endif
    mt_close(t);
    drop_pool(o.pool);
    free(r.e);
}
END_TEST

#ifndef MT_INCLL
/* _i: long or short keys. Puts and removes that fail part way (in a
 * split, an unlink, a new layer or root): each fails alone with the
 * error, the tree in DRAM (its links checked) and in the pool (mt_open)
 * as before it, and the run goes on with the same tree. */
START_TEST(failed_ops)
{
    txn_pool *p = new_pool();
    mt_opts o = {.pool = p, .anchor_off = 8};
    mt_tree *t;
    struct ref r = {0};
    ck_assert_int_eq(mt_create(&o, &t), 0);
    t_faults = 1;
    t_fault_seed = 5 + (unsigned)_i;
    t_failed_ops = t_failed_late = 0;
    run_reference(&t, &r, 11, 12000, &o, _i);
    t_faults = 0;
    check_links(t);
    ck_assert_msg(t_failed_late > 200, "%ld of %ld failed after a write", t_failed_late,
                  t_failed_ops);
    mt_close(t);
    drop_pool(o.pool);
    free(r.e);
}
END_TEST
#endif

#ifndef MT_INCLL
/* A put (or remove) of k that fails at its first txn_write or txn_free,
 * then at its second, and so on until it goes through: after each
 * failure the key and the tree's links are as before it. */
static void each_failure(mt_tree *t, struct ref *r, const uint8_t *k, size_t len, int put,
                         uint64_t v, long *failed)
{
    mt_stats a, b;
    mt_stats_get(t, &a);
    for (int at = 1;; at++) {
        t_calls = t_failed = 0;
        t_fail_in = at;
        int rc = put ? mt_put(t, k, len, v) : mt_remove(t, k, len);
        t_fail_in = 0;
        if (!t_failed) {
            ck_assert_int_eq(rc, put ? ref_put(r, k, len, v) : ref_remove(r, k, len));
            return;
        }
        ck_assert_int_eq(rc, TXN_E_NOSPACE);
        check_key(t, r, k, len);
        check_links(t);
        mt_stats_get(t, &b); /* nodes and counts as before */
        ck_assert(!memcmp(&a, &b, sizeof a));
        (*failed)++;
    }
}

/* Every write of every put and remove fails once, in turn: leaf splits
 * up to new top roots, unlinks of every leaf, new layers and their roots'
 * splits; then new keys take the nodes freed meanwhile. The tree, then
 * and rebuilt from the pool, equals the reference. */
START_TEST(failed_writes)
{
    txn_pool *p = new_pool();
    mt_opts o = {.pool = p};
    mt_tree *t, *t2;
    struct ref r = {0};
    long failed = 0;
    uint8_t k[16];
    ck_assert_int_eq(mt_create(&o, &t), 0);
    for (uint64_t i = 0; i < 700; i++) { /* 8-byte keys */
        uint64_t be = __builtin_bswap64(i * 7919 % 700 * 2);
        each_failure(t, &r, (const uint8_t *)&be, 8, 1, 16 * (i + 1), &failed);
    }
    for (uint64_t i = 0; i < 700; i++) { /* all but every 50th, in order */
        uint64_t be = __builtin_bswap64(i * 2);
        if (i % 50)
            each_failure(t, &r, (const uint8_t *)&be, 8, 0, 0, &failed);
    }
    for (uint64_t i = 0; i < 300; i++) { /* 16-byte keys in 3 layers */
        uint64_t hi = __builtin_bswap64(i % 3 * 2 + 1), lo = __builtin_bswap64(i * 7);
        memcpy(k, &hi, 8);
        memcpy(k + 8, &lo, 8);
        each_failure(t, &r, k, 16, 1, 16 * (i + 3), &failed);
    }
    mt_stats st;
    mt_stats_get(t, &st);
    ck_assert_msg(st.unlinked > 20 && st.inodes > 3 && failed > 2000,
                  "%llu unlinked, %llu inodes, %ld failures", (unsigned long long)st.unlinked,
                  (unsigned long long)st.inodes, failed);
    for (uint64_t i = 0; i < 1500; i++) { /* the freed nodes in use again */
        uint64_t be = __builtin_bswap64(i * 2 + 1);
        ck_assert_int_eq(mt_put(t, &be, 8, 16), ref_put(&r, (const uint8_t *)&be, 8, 16));
    }
    check_links(t);
    check_scan(t, &r, NULL, 0, (size_t)-1);
    ck_assert_int_eq(mt_open(&o, &t2), 0);
    check_scan(t2, &r, NULL, 0, (size_t)-1);
    mt_close(t2);
    mt_close(t);
    drop_pool(p);
    free(r.e);
}
END_TEST
#endif

#ifndef MT_INCLL
/* Readers while operations fail after their first change or at their
 * commit (each failure 2 ms into the call): every key present all along
 * is found by every get and every scan, and none waits for ever (a
 * split's new top root, once published, would send a reader round a
 * deleted leaf). */
struct race {
    mt_tree *t;
    const uint64_t *keys; /* present all along, ascending */
    size_t n;
    _Atomic int done, bad;
};

static int race_cb(const void *key, size_t len, uint64_t val, void *arg)
{
    (void)key, (void)len, (void)val;
    (*(size_t *)arg)++;
    return 0;
}

static void *race_reader(void *arg)
{
    struct race *r = arg;
    while (!atomic_load(&r->done) && !atomic_load(&r->bad)) {
        for (size_t i = 0; i < r->n; i++) {
            uint64_t be = __builtin_bswap64(r->keys[i]), v;
            if (mt_get(r->t, &be, 8, &v) != 0 || v != 16 * r->keys[i] + 16)
                atomic_store(&r->bad, 1);
            /* a scan from this key: every present key from it on */
            size_t seen = 0;
            long got = mt_scan(r->t, &be, 8, (size_t)-1, race_cb, &seen);
            if (got < 0 || (size_t)got < r->n - i)
                atomic_store(&r->bad, 1);
            /* outside the tree now and then: a failing operation's
             * writer has most readers blocked on its locked nodes, but
             * one that starts while it changes the tree must not stray */
            for (int w = 0; w < 500; w++)
                __builtin_ia32_pause();
        }
    }
    return NULL;
}

START_TEST(failed_ops_readers)
{
    enum { N = 3000, KEEP = 60 };
    txn_pool *p = new_pool();
    mt_opts o = {.pool = p};
    mt_tree *t;
    static uint64_t keys[N];
    ck_assert_int_eq(mt_create(&o, &t), 0);
    struct race r = {.t = t, .keys = keys};
    pthread_t th[2];
    /* a root leaf of 15 keys, whose split (the 16th key) fails at the
     * anchor's write or at the commit, 100 times */
    for (uint64_t i = 0; i < 15; i++) {
        uint64_t be = __builtin_bswap64(keys[r.n++] = 2 * i);
        ck_assert_int_eq(mt_put(t, &be, 8, 16 * keys[i] + 16), 1);
    }
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_reader, &r), 0);
    uint64_t be31 = __builtin_bswap64(31), v;
    for (int i = 0; i < 100 && !atomic_load(&r.bad); i++) {
        t_fail_obj = i % 2 ? txn_root(p) : NULL;
        t_fail_commits = !(i % 2);
        ck_assert_int_eq(mt_put(t, &be31, 8, 1), TXN_E_NOSPACE);
        ck_assert_int_eq(mt_get(t, &be31, 8, &v), 1);
    }
    t_fail_obj = NULL;
    t_fail_commits = 0;
    atomic_store(&r.done, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_msg(!atomic_load(&r.bad), "a reader missed a key during a failing root split");
    check_links(t);
    /* N keys, then all but every KEEP-th removed (most leaves unlinked):
     * leaves holding one key, whose removes unlink them and fail at the
     * unlink's free; those keys stay present for the readers */
    for (uint64_t i = 15; i < N; i++) {
        uint64_t be = __builtin_bswap64(2 * i);
        ck_assert_int_eq(mt_put(t, &be, 8, 32 * i + 16), 1);
    }
    r.n = 0;
    for (uint64_t i = 0; i < N; i++) {
        uint64_t be = __builtin_bswap64(2 * i);
        if (i % KEEP)
            ck_assert_int_eq(mt_remove(t, &be, 8), 1);
    }
    size_t lone = 0;
    t_fail_frees = 1;
    for (uint64_t i = 0; i < N; i += KEEP) {
        uint64_t be = __builtin_bswap64(2 * i);
        t_failed = 0;
        int rc = mt_remove(t, &be, 8);
        if (t_failed) { /* an unlink: failed, the key back */
            ck_assert_int_eq(rc, TXN_E_NOSPACE);
            lone++;
        } else { /* none tried (a first child): the key goes */
            ck_assert_int_eq(rc, 1);
            continue;
        }
        keys[r.n++] = 2 * i;
    }
    t_fail_frees = 0;
    ck_assert_msg(lone > 10, "%zu leaves to unlink", lone);
    atomic_store(&r.done, 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_reader, &r), 0);
    for (int round = 0; round < 4 && !atomic_load(&r.bad); round++) {
        t_fail_frees = round % 2; /* the unlink's free, or its commit */
        t_fail_commits = !(round % 2);
        for (size_t i = 0; i < r.n; i++) {
            uint64_t be = __builtin_bswap64(keys[i]);
            ck_assert_int_eq(mt_remove(t, &be, 8), TXN_E_NOSPACE);
        }
    }
    t_fail_frees = t_fail_commits = 0;
    atomic_store(&r.done, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_msg(!atomic_load(&r.bad), "a reader missed a key during a failing unlink");
    check_links(t);
    mt_close(t);
    drop_pool(p);
}
END_TEST
#endif

START_TEST(bad_arguments)
{
    mt_opts o = {0};
    mt_tree *t;
    uint8_t big[MT_MAX_KEY + 1] = {0};
    uint64_t v;
#ifdef MT_INCLL /* no transient tree in this build */
    ck_assert_int_eq(mt_create(&o, &t), TXN_E_INVAL);
    txn_pool *p = new_pool();
    mt_opts po = {.pool = p};
    ck_assert_int_eq(mt_create(&po, &t), 0);
#else
    ck_assert_int_eq(mt_create(&o, &t), 0);
#endif
    ck_assert_int_eq(mt_put(t, big, sizeof big, 1), TXN_E_INVAL);
    ck_assert_int_eq(mt_get(t, big, sizeof big, &v), TXN_E_INVAL);
    ck_assert_int_eq(mt_put(t, big, MT_MAX_KEY, 5), 1);
    ck_assert_int_eq(mt_get(t, big, MT_MAX_KEY, &v), 0);
    ck_assert_uint_eq(v, 5);
    ck_assert_int_eq(mt_get(t, big, MT_MAX_KEY - 1, &v), 1);
    ck_assert_int_eq(mt_put(t, NULL, 0, 7), 1); /* the empty key */
    ck_assert_int_eq(mt_get(t, NULL, 0, &v), 0);
    ck_assert_uint_eq(v, 7);
    ck_assert_int_eq(mt_remove(t, NULL, 0), 1);
    ck_assert_int_eq(mt_get(t, NULL, 0, &v), 1);
    ck_assert_int_eq(mt_open(&o, &t), TXN_E_INVAL); /* transient: nothing to open */
    mt_close(t);
#ifdef MT_INCLL
    drop_pool(p);
#endif
}
END_TEST

/* ---- stress: T writers on interleaved keys of their own, checking their
 * own keys exactly, and a scanner checking order */

#define T 3
#define SKEYS 3000

struct stress {
    mt_tree *t;
    int id, ops;
    _Atomic int *done;
    int bad;
    int faults; /* puts and removes fail part way (fault_arm) */
    long failed, late; /* how many did, how many after a write took */
};

/* key of id i: 8 bytes for even ids, 12 (a layer below) for odd ones */
static size_t skey(unsigned i, uint8_t k[12])
{
    uint32_t be = __builtin_bswap32(i);
    memcpy(k, &be, 4);
    memcpy(k + 4, &be, 4);
    memcpy(k + 8, "tail", 4);
    return i % 2 ? 12 : 8;
}

static void *writer(void *arg)
{
    struct stress *s = arg;
    static __thread uint64_t mine[SKEYS / T + 1];
    unsigned seed = (unsigned)s->id * 77 + 1;
    memset(mine, 0, sizeof mine);
    t_faults = s->faults;
    t_fault_seed = seed + 3;
    for (int i = 0; i < s->ops && !s->bad; i++) {
        unsigned j = (unsigned)rand_r(&seed) % (SKEYS / T), id = j * T + (unsigned)s->id;
        uint8_t k[12];
        uint64_t v = ((uint64_t)id << 32) | (uint64_t)(i + 1), got;
        size_t len = skey(id, k);
        switch (rand_r(&seed) % 4) {
        case 0:
        case 1: {
            fault_arm();
            int rc = mt_put(s->t, k, len, v);
            if (t_failed) { /* as before it */
                s->bad |= rc != TXN_E_NOSPACE || mt_get(s->t, k, len, &got) != (mine[j] ? 0 : 1) ||
                          (mine[j] && got != mine[j]);
                s->failed++;
                s->late += t_calls > 1;
                break;
            }
            if (rc != !mine[j])
                s->bad = 1;
            mine[j] = v;
            break;
        }
        case 2: {
            fault_arm();
            int rc = mt_remove(s->t, k, len);
            if (t_failed) {
                s->bad |= rc != TXN_E_NOSPACE || mt_get(s->t, k, len, &got) != (mine[j] ? 0 : 1) ||
                          (mine[j] && got != mine[j]);
                s->failed++;
                s->late += t_calls > 1;
                break;
            }
            if (rc != !!mine[j])
                s->bad = 1;
            mine[j] = 0;
            break;
        }
        default:
            if (mt_get(s->t, k, len, &got) != (mine[j] ? 0 : 1) || (mine[j] && got != mine[j]))
                s->bad = 1;
        }
    }
    t_fail_in = t_faults = 0;
    if (mt_flush(s->t)) /* a shared transaction (mt_opts.batch) */
        s->bad = 1;
    atomic_fetch_add(s->done, 1);
    return NULL;
}

struct order {
    uint8_t last[MT_MAX_KEY];
    size_t len;
    int bad, any;
};

static int order_cb(const void *key, size_t len, uint64_t val, void *arg)
{
    struct order *o = arg;
    if ((o->any && kcmp(o->last, o->len, key, len) >= 0) || (val >> 32) >= SKEYS)
        o->bad = 1;
    memcpy(o->last, key, len);
    o->len = len;
    o->any = 1;
    return 0;
}

static void *scanner(void *arg)
{
    struct stress *s = arg;
    unsigned seed = 5;
    while (atomic_load(s->done) < T && !s->bad) {
        struct order o = {.any = 0};
        uint8_t k[12];
        size_t len = skey((unsigned)rand_r(&seed) % SKEYS, k);
        mt_scan(s->t, k, len, 50, order_cb, &o);
        s->bad |= o.bad;
    }
    return NULL;
}

/* T writers and a scanner; with `faults`, the writers' operations fail
 * part way now and then: returns how many did after a write took */
static long run_stress(mt_tree *t, int ops, int faults)
{
    pthread_t th[T + 1];
    struct stress s[T + 1];
    _Atomic int done = 0;
    long late = 0;
    for (int i = 0; i <= T; i++) {
        s[i] = (struct stress){t, i, ops, &done, 0, faults && i < T, 0, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, i < T ? writer : scanner, &s[i]), 0);
    }
    for (int i = 0; i <= T; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(!s[i].bad, "thread %d saw a wrong result", i);
        late += s[i].late;
    }
    struct order o = {.any = 0};
    mt_scan(t, NULL, 0, (size_t)-1, order_cb, &o);
    ck_assert(!o.bad);
#ifndef MT_INCLL
    check_links(t);
#endif
    return late;
}

static int stress_ops(void)
{
    const char *e = getenv("MT_STRESS_OPS");
    return e ? atoi(e) : 20000;
}

#ifndef MT_INCLL
START_TEST(stress_transient)
{
    mt_opts o = {0};
    mt_tree *t;
    ck_assert_int_eq(mt_create(&o, &t), 0);
    run_stress(t, stress_ops(), 0);
    mt_close(t);
}
END_TEST

#endif

/* _i 1: the writers' operations share transactions (mt_opts.batch); 2
 * (txn.h storage): their puts and removes fail part way now and then */
START_TEST(stress_txn)
{
    txn_pool *p = new_pool();
    mt_opts o = {.pool = p, .batch = _i == 1 ? 16 : 0};
    mt_tree *t, *t2;
    ck_assert_int_eq(mt_create(&o, &t), 0);
    long late = run_stress(t, stress_ops() / 4, _i == 2);
    if (_i == 2)
        ck_assert_msg(late > 100, "%ld operations failed after a write", late);
    ck_assert_int_eq(mt_open(&o, &t2), 0); /* mirrors well-formed */
    struct order a = {.any = 0};
    long n1 = mt_scan(t, NULL, 0, (size_t)-1, order_cb, &a);
    long n2 = mt_scan(t2, NULL, 0, (size_t)-1, order_cb, &(struct order){.any = 0});
    ck_assert_int_eq(n1, n2);
    mt_close(t2);
    mt_close(t);
    drop_pool(p);
}
END_TEST

/* ---- reuse: keys removed give their leaves back, and the next keys'
 * leaves take their memory (in the pool: after the epoch and the readers'
 * grace, inpool/tree.c) */

static int hcmp(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

struct handles {
    uintptr_t *h;
    size_t n, cap;
};

static void add_handle(txn_obj *o, void *arg)
{
    struct handles *hs = arg;
    if (hs->n == hs->cap) {
        hs->cap = hs->cap ? 2 * hs->cap : 1024;
        hs->h = realloc(hs->h, hs->cap * sizeof *hs->h);
        ck_assert_ptr_nonnull(hs->h);
    }
    hs->h[hs->n++] = (uintptr_t)o;
}

static int has_handle(const struct handles *hs, uintptr_t o)
{
    return bsearch(&o, hs->h, hs->n, sizeof *hs->h, hcmp) != NULL;
}

static void handles_of(mt_tree *t, struct handles *hs)
{
    hs->n = 0;
    mt_objects(t, add_handle, hs);
    qsort(hs->h, hs->n, sizeof *hs->h, hcmp);
}

/* an epoch with work ends (incll: the frees' epoch, then one that gives
 * them back); immediate elsewhere */
static void settle(mt_tree *t, txn_pool *p)
{
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(mt_put(t, "settle", 6, 16), 1);
        ck_assert_int_eq(mt_remove(t, "settle", 6), 1);
        ck_assert_int_eq(txn_sync(p), 0);
    }
}

START_TEST(reuse_txn)
{
    enum { ROUNDS = 4, N = 6000 };
    txn_pool *p = new_pool();
    mt_opts o = {.pool = p};
    mt_tree *t;
    struct handles ins = {0}, rem = {0}, freed = {0};
    uint64_t stay = 0; /* empty leaves kept by the rounds before */
    ck_assert_int_eq(mt_create(&o, &t), 0);
    for (unsigned r = 0; r < ROUNDS; r++) {
        for (unsigned i = 0; i < N; i++) { /* keys new in each round */
            uint64_t k = __builtin_bswap64((uint64_t)r * N + i + 1);
            ck_assert_int_eq(mt_put(t, &k, 8, 16 * (uint64_t)i), 1);
        }
        mt_stats full, empty;
        mt_stats_get(t, &full);
        handles_of(t, &ins);
        if (r > 0 && strcmp(txn_engine_name(), "pmdk")) { /* most of the freed
            * nodes hold new keys (pmdk's allocator hands out others first) */
            size_t reused = 0;
            for (size_t i = 0; i < freed.n; i++)
                reused += has_handle(&ins, freed.h[i]);
            ck_assert_msg(reused * 4 >= freed.n * 3, "round %u: %zu of %zu freed nodes reused",
                          r, reused, freed.n);
        }
        for (unsigned i = 0; i < N; i++) {
            uint64_t k = __builtin_bswap64((uint64_t)r * N + i + 1);
            ck_assert_int_eq(mt_remove(t, &k, 8), 1);
        }
        mt_stats_get(t, &empty);
        handles_of(t, &rem);
        freed.n = 0;
        for (size_t i = 0; i < ins.n; i++)
            if (!has_handle(&rem, ins.h[i]))
                add_handle((txn_obj *)ins.h[i], &freed);
        /* the round's empty leaves went, but first children (internal
         * nodes stay) */
        uint64_t grown = full.leaves - stay, kept = empty.leaves - stay;
        ck_assert_msg(kept * 3 < grown && empty.unlinked > 0 && freed.n >= grown - kept,
                      "round %u: %llu of %llu new leaves stay, %zu nodes freed", r,
                      (unsigned long long)kept, (unsigned long long)grown, freed.n);
        stay = empty.leaves;
        settle(t, p);
    }
    mt_close(t);
    drop_pool(o.pool);
    free(ins.h), free(rem.h), free(freed.h);
}
END_TEST

/* A full pool: a put that needs new nodes fails with TXN_E_NOSPACE and
 * nothing else changes: the tree keeps every key put before and not the
 * failed one, and stays usable (updates, removes, then puts again once
 * removes made room); it opens again with the same keys. On cow, whose
 * writes allocate copies, the pool may fill part way through a put: the
 * tree is then unusable (TXN_E_STATE) until mt_open brings back the
 * committed one; so is it after a remove that found no room for its
 * copy. Keys of 8 bytes, and every 50th of 20 (a layer each:
 * a layer's entry stays in its leaf for good, so few of them, for the
 * removes to empty leaves). */
static int ent_cmp(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    return kcmp(x->k, x->len, y->k, y->len);
}

/* Removes mark their entries, and the reference drops them in one pass
 * (ref_remove shifts the array each time: slow under ASan at this size). */
#define GONE UINT64_MAX
static void ref_compact(struct ref *r)
{
    size_t m = 0;
    for (size_t j = 0; j < r->n; j++)
        if (r->e[j].v != GONE)
            r->e[m++] = r->e[j];
    r->n = m;
}

static uint64_t full_slice(uint64_t i)
{
    return i * 2654435761u % 1000003u;
}

/* Key i of full_pool's run `full_layers`: 0, 8-byte keys and every 50th
 * a 20-byte one (a layer each); 1, 16-byte keys in FULL_LAYERS layers,
 * filled in turn: the layers' roots split in runs, each split changing
 * the layer's entry in the leaf above. */
#define FULL_LAYERS 64
static int full_layers;

static size_t full_key(uint64_t i, uint8_t k[20])
{
    if (full_layers) {
        uint64_t hi = __builtin_bswap64(i % FULL_LAYERS + 1);
        uint64_t lo = __builtin_bswap64(full_slice(i / FULL_LAYERS));
        memcpy(k, &hi, 8);
        memcpy(k + 8, &lo, 8);
        return 16;
    }
    uint64_t be = __builtin_bswap64(full_slice(i));
    memcpy(k, &be, 8);
    memcpy(k + 8, "layer-layer-", 12);
    return i % 50 == 0 ? 20 : 8;
}

START_TEST(full_pool)
{
    full_layers = _i;
    txn_pool *p;
    int pmdk = !strcmp(txn_engine_name(), "pmdk"), cow = !strcmp(txn_engine_name(), "cow");
    /* a pool that does not grow: the test fills it */
    size_t size = (size_t)(pmdk ? 16 : 3) << 20;
    txn_pool_opts po = {.size = size, .max_size = size, .threads = 4};
    snprintf(pool_name, sizeof pool_name, "pmtx-masstree-full-%d.pool", (int)getpid());
    ck_assert_int_eq(txn_pool_create(pool_name, "pmtx-masstree-test", &po, &p), 0);
    mt_opts o = {.pool = p};
    mt_tree *t;
    ck_assert_int_eq(mt_create(&o, &t), 0);
    struct ref r = {0};
    uint8_t k[20];
    uint64_t n = 0, v;
    size_t len;
    int rc;
    for (;; n++) {
        len = full_key(n, k);
        if ((rc = mt_put(t, k, len, 16 * (n + 1))) != 1)
            break;
        ck_assert_msg(n < 1000003, "the pool never filled"); /* keys distinct below */
        if (r.n == r.cap) { /* appended, sorted once (ASan: no quadratic copying) */
            r.cap = r.cap ? 2 * r.cap : 1024;
            r.e = realloc(r.e, r.cap * sizeof *r.e);
            ck_assert_ptr_nonnull(r.e);
        }
        memcpy(r.e[r.n].k, k, len);
        r.e[r.n].len = len;
        r.e[r.n++].v = 16 * (n + 1);
    }
    qsort(r.e, r.n, sizeof *r.e, ent_cmp);
    ck_assert_msg(rc == TXN_E_NOSPACE, "put %llu: %s", (unsigned long long)n, txn_strerror(rc));
    ck_assert_msg(n > 1000, "full after %llu keys", (unsigned long long)n);
    len = full_key(n, k);
    ck_assert_int_eq(mt_get(t, k, len, &v), 1); /* the failed put left nothing */
    ck_assert_int_eq(mt_put(t, k, len, 16), TXN_E_NOSPACE); /* and fails again */
    check_scan(t, &r, NULL, 0, (size_t)-1);
    for (uint64_t i = 0; i < n; i += 7) { /* updates need no room */
        len = full_key(i, k);
        rc = mt_put(t, k, len, 16 * (i + 2));
        if (cow && rc == TXN_E_NOSPACE) { /* but cow's copies do: it fails alone */
            int f;
            size_t at = ref_find(&r, k, len, &f);
            ck_assert(f);
            ck_assert_int_eq(mt_get(t, k, len, &v), 0);
            ck_assert_uint_eq(v, r.e[at].v);
            break;
        }
        ck_assert_int_eq(rc, 0);
        ref_put(&r, k, len, 16 * (i + 2));
    }
    for (uint64_t i = 0; i < n; i++) /* removes: the keys above the lowest tenth */
        if (full_slice(i) >= 100000) {
            len = full_key(i, k);
            rc = mt_remove(t, k, len);
            if (cow && rc == TXN_E_NOSPACE) { /* copies need room */
                ck_assert_int_eq(mt_get(t, k, len, &v), 0); /* still there */
                ref_compact(&r);
                check_scan(t, &r, NULL, 0, (size_t)-1);
                mt_tree *t2;
                ck_assert_int_eq(mt_open(&o, &t2), 0); /* the committed tree */
                check_scan(t2, &r, NULL, 0, (size_t)-1);
                mt_close(t2);
                mt_close(t);
                drop_pool(p);
                free(r.e);
                return;
            }
            ck_assert_int_eq(rc, 1);
            int f;
            size_t at = ref_find(&r, k, len, &f);
            ck_assert(f);
            r.e[at].v = GONE;
        }
    ref_compact(&r);
    check_scan(t, &r, NULL, 0, (size_t)-1);
    ck_assert_int_eq(txn_sync(p), 0);
    ck_assert_int_eq(txn_sync(p), 0); /* incll: the frees' epoch is durable */
    for (uint64_t i = n; i < n + n / 4; i++) { /* room again */
        len = full_key(i, k);
        rc = mt_put(t, k, len, 16 * (i + 1));
        ck_assert_msg(rc == 1, "put %llu after removes: %s", (unsigned long long)i,
                      rc < 0 ? txn_strerror(rc) : "not new");
        ref_put(&r, k, len, 16 * (i + 1));
    }
    check_scan(t, &r, NULL, 0, (size_t)-1);
    ck_assert_int_eq(txn_sync(p), 0);
    mt_tree *t2;
#ifdef MT_INCLL
    mt_close(t);
    t = NULL;
    o.pool = reopen_pool(p);
#endif
    ck_assert_int_eq(mt_open(&o, &t2), 0);
    check_scan(t2, &r, NULL, 0, (size_t)-1);
    mt_close(t2);
    mt_close(t);
    drop_pool(o.pool);
    free(r.e);
}
END_TEST

/* The handle stored at off in object o. */
static txn_obj *handle_at(txn_pool *p, txn_obj *o, size_t off)
{
    txn *tx;
    txn_obj *h = NULL;
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    ck_assert_int_eq(txn_read(tx, o, off, &h, sizeof h), 0);
    txn_abort(tx);
    ck_assert_ptr_nonnull(h);
    return h;
}

/* key i of the damage tests, big-endian: slice order = i's */
static uint64_t dkey(uint64_t i)
{
    return __builtin_bswap64(i * 7919 + 1);
}

/* A new tree in a new pool (*p) holding keys dkey(0..n-1), value of key i
 * 16 * (i + 1), closed; the same in r. */
static void damage_tree(txn_pool **p, uint64_t n, struct ref *r)
{
    *p = new_pool();
    mt_opts o = {.pool = *p};
    mt_tree *t;
    ck_assert_int_eq(mt_create(&o, &t), 0);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = dkey(i);
        ck_assert_int_eq(mt_put(t, &k, 8, 16 * (i + 1)), 1);
        ref_put(r, (const uint8_t *)&k, 8, 16 * (i + 1));
    }
    mt_close(t);
}

#ifndef MT_INCLL
/* Write n bytes into o (a mirror) in a transaction of its own; the bytes
 * there before go to `old` when given. */
static void poke(txn_pool *p, txn_obj *o, size_t off, const void *src, size_t n, void *old)
{
    txn *tx;
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    if (old)
        ck_assert_int_eq(txn_read(tx, o, off, old, n), 0);
    ck_assert_int_eq(txn_write(tx, o, off, src, n), 0);
    ck_assert_int_eq(txn_commit(tx), 0);
}

/* A damaged tree in the pool: mt_open answers TXN_E_CORRUPT (never loops,
 * never runs off the stack), and opens the tree again once the damage is
 * undone. The damages: the root (internal) node keyless and its own only
 * child; two children the same leaf; a leaf's permutation naming a slot
 * twice; the anchor naming no object. */
START_TEST(damaged_tree)
{
    txn_pool *p;
    struct ref r = {0};
    damage_tree(&p, 100, &r); /* a root over leaves only */
    mt_opts o = {.pool = p};
    mt_tree *t;
    txn_obj *root = handle_at(p, txn_root(p), 0);
    txn_obj *c0 = handle_at(p, root, IB_CHILD), *c1 = handle_at(p, root, IB_CHILD + 8);
    uint64_t zero = 0, old[2], kind[2];
    txn *tx;
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    ck_assert_int_eq(txn_read(tx, root, 0, &kind[0], 8), 0);
    ck_assert_int_eq(txn_read(tx, c1, 0, &kind[1], 8), 0);
    txn_abort(tx);
    ck_assert_uint_eq(kind[0], KIND_INODE);
    ck_assert_uint_eq(kind[1], KIND_LEAF);
    poke(p, root, IB_NKEYS, &zero, 8, &old[0]); /* keyless, its own child */
    poke(p, root, IB_CHILD, &root, 8, NULL);
    ck_assert_int_eq(mt_open(&o, &t), TXN_E_CORRUPT);
    poke(p, root, IB_NKEYS, &old[0], 8, NULL);
    poke(p, root, IB_CHILD, &c0, 8, NULL);
    poke(p, root, IB_CHILD + 8, &c0, 8, NULL); /* one leaf twice */
    ck_assert_int_eq(mt_open(&o, &t), TXN_E_CORRUPT);
    poke(p, root, IB_CHILD + 8, &c1, 8, NULL);
    uint64_t perm;
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    ck_assert_int_eq(txn_read(tx, c1, LB_PERM, &perm, 8), 0);
    txn_abort(tx);
    uint64_t twice = (perm & ~(uint64_t)0xf00) | (perm >> 4 & 0xf) << 8; /* position 1 = 0 */
    poke(p, c1, LB_PERM, &twice, 8, NULL);
    ck_assert_int_eq(mt_open(&o, &t), TXN_E_CORRUPT);
    poke(p, c1, LB_PERM, &perm, 8, NULL);
    uint64_t wild = 0x1234000;
    poke(p, txn_root(p), 0, &wild, 8, &old[1]);
    ck_assert_int_eq(mt_open(&o, &t), TXN_E_CORRUPT);
    poke(p, txn_root(p), 0, &old[1], 8, NULL);
    ck_assert_int_eq(mt_open(&o, &t), 0); /* undone: the tree as it was */
    check_scan(t, &r, NULL, 0, (size_t)-1);
    mt_close(t);
    drop_pool(p);
    free(r.e);
}
END_TEST
#endif

#ifdef MT_INCLL
/* ---- a damaged in-pool tree: bytes of nodes changed in the pool between
 * two executions (damage, not a torn write: crashes are the epochs') */

/* the leaf of slice ik under node n, read as it is in the pool */
static struct leaf *raw_leaf(struct node *n, uint64_t ik)
{
    while (((uint8_t *)n)[NB_KIND] == KIND_INODE) {
        struct inode *in = (struct inode *)n;
        unsigned i = 0;
        while (i < in->nkeys && ik >= in->ikey[i])
            i++;
        n = in->child[i];
    }
    return (struct leaf *)n;
}

static int count_cb(const void *key, size_t len, uint64_t val, void *arg)
{
    (void)key, (void)len, (void)val;
    ++*(size_t *)arg;
    return 0;
}

struct poke {
    uint64_t *at, old;
};

static void poke_word(struct poke *d, uint64_t *at, uint64_t v)
{
    d->at = at;
    d->old = *at;
    *at = v;
}

/* byte off of node n set to b, by its word */
static void poke_byte(struct poke *d, void *n, size_t off, uint8_t b)
{
    uint64_t *w = (uint64_t *)((char *)n + (off & ~(size_t)7));
    unsigned sh = 8 * (unsigned)(off & 7);
    poke_word(d, w, (*w & ~(0xffull << sh)) | (uint64_t)b << sh);
}

enum { D_WILD_CHILD, D_NKEYS, D_IKEY_ORDER, D_CYCLE, D_CHILD_ROOT, D_TOP_NOT_ROOT, D_PERM, D_KLEN, D_WILD_NEXT, D_KIND,
       D_LAYER, D_NEXT_CYCLE, D_LOWKEY, D_LAYER_CYCLE, D_CASES };

/* After a restart the in-pool tree checks each node at its first access.
 * Each case damages one node of a tree of several internal levels and
 * restarts: every operation whose way goes through the damaged node
 * answers TXN_E_CORRUPT (a wild child, a key count over 15, keys out of
 * order, a child marked root, a top root not marked root, a permutation
 * naming a slot twice, a key length over 9, a wild next pointer, a bad
 * kind byte, a wild layer root); a cycle through
 * internal nodes, or of next pointers, stops the walk that goes round it
 * (TXN_E_CORRUPT, no endless loop), and so does a scan at a layer entry
 * naming the top layer's root (it would recurse for ever); a leaf whose
 * low key is wrong still splits (its parent is found by the key's way,
 * not by the low key) and the scan refuses the chain. Keys elsewhere are
 * served, and a scan (which goes by the leaves) serves all keys past a
 * damaged internal node; the refused operations change nothing; once the
 * damage is undone the tree is the reference's. */
START_TEST(damaged_nodes)
{
    txn_pool *p;
    struct ref r = {0};
    damage_tree(&p, 3000, &r);
    mt_opts o = {.pool = p};
    mt_tree *t;
    ck_assert_int_eq(mt_open(&o, &t), 0);
    uint8_t lk[20]; /* three 20-byte keys: a layer under one entry */
    uint64_t lslice = dkey(1500) + (1ull << 56); /* between keys 1500 and 1501 */
    memset(lk, 'x', sizeof lk);
    memcpy(lk, &lslice, 8);
    for (unsigned j = 0; j < 3; j++) {
        lk[19] = (uint8_t)j;
        ck_assert_int_eq(mt_put(t, lk, 20, 32 * (j + 1)), 1);
        ref_put(&r, lk, 20, 32 * (j + 1));
    }
    mt_close(t);
    struct node *root = incll_node(handle_at(p, txn_root(p), 0));
    ck_assert_uint_eq(((uint8_t *)root)[NB_KIND], KIND_INODE);
    struct inode *R = (struct inode *)root, *C = (struct inode *)R->child[1];
    ck_assert_uint_eq(((uint8_t *)C)[NB_KIND], KIND_INODE); /* internal levels: 2 or more */
    struct leaf *L = raw_leaf(C->child[1], 0), *first = raw_leaf(root, 0);
    ck_assert_uint_eq(((uint8_t *)L)[NB_KIND], KIND_LEAF);
    uint64_t K = L->ikey[perm_slot(L->perm, 0)], kb = __builtin_bswap64(K), ko = dkey(0), v;
    struct leaf *LL = raw_leaf(root, __builtin_bswap64(lslice)); /* the layer entry's leaf */
    uint64_t lperm = LL->perm;
    unsigned ls = 0;
    for (unsigned i = 0; i < perm_count(lperm); i++)
        if (LL->klen[perm_slot(lperm, i)] == KLEN_LAYER)
            ls = perm_slot(lperm, i) + 1;
    ck_assert_uint_ne(ls, 0);
    ls--;
    for (int c = 0; c < D_CASES; c++) {
        p = reopen_pool(p); /* a restart: every node unrecovered */
        o.pool = p;
        struct poke d;
        uint64_t perm = L->perm;
        switch (c) {
        case D_WILD_CHILD: poke_word(&d, (uint64_t *)&C->child[1], 0x1234000); break;
        case D_NKEYS: poke_word(&d, &C->nkeys, IWIDTH + 1); break;
        case D_IKEY_ORDER: poke_word(&d, &C->ikey[1], C->ikey[0]); break;
        case D_CYCLE: poke_word(&d, (uint64_t *)&C->child[1], (uint64_t)R); break;
        case D_PERM: /* position 1 names position 0's slot */
            poke_word(&d, &L->perm, (perm & ~(uint64_t)0xf00) | (perm >> 4 & 0xf) << 8);
            break;
        case D_CHILD_ROOT: poke_byte(&d, C, NB_ROOT, 1); break;
        case D_TOP_NOT_ROOT: poke_byte(&d, R, NB_ROOT, 0); break;
        case D_KLEN: /* the length of position 1's slot */
            poke_byte(&d, L, offsetof(struct leaf, klen) + perm_slot(perm, 1), 10);
            break;
        case D_WILD_NEXT: poke_word(&d, (uint64_t *)&L->next, 0x1234000); break;
        case D_KIND: poke_byte(&d, L, NB_KIND, 7); break;
        case D_LAYER: poke_word(&d, &LL->val[ls], 0x1234000); break;
        case D_NEXT_CYCLE: poke_word(&d, (uint64_t *)&L->next, (uint64_t)first); break;
        case D_LOWKEY: poke_word(&d, &L->lowkey, 0); break;
        case D_LAYER_CYCLE: poke_word(&d, &LL->val[ls], (uint64_t)R); break;
        }
        ck_assert_int_eq(mt_open(&o, &t), 0); /* reads the anchor only */
        if (c == D_LAYER) {
            lk[19] = 1;
            ck_assert_int_eq(mt_get(t, lk, 20, &v), TXN_E_CORRUPT);
            ck_assert_int_eq(mt_put(t, lk, 20, 1), TXN_E_CORRUPT);
            ck_assert_int_eq(mt_get(t, &kb, 8, &v), 0);
        } else if (c == D_NEXT_CYCLE || c == D_LAYER_CYCLE) {
            ck_assert_int_eq(mt_get(t, &kb, 8, &v), 0);
        } else if (c == D_LOWKEY) {
            for (uint64_t j = 1; j <= 20; j++) { /* L splits: its parent is looked for */
                uint64_t k = __builtin_bswap64(K + j);
                ck_assert_int_eq(mt_put(t, &k, 8, 48 * j), 1);
                ref_put(&r, (const uint8_t *)&k, 8, 48 * j);
            }
        } else {
            ck_assert_int_eq(mt_get(t, &kb, 8, &v), TXN_E_CORRUPT);
            ck_assert_int_eq(mt_put(t, &kb, 8, 8), TXN_E_CORRUPT);
            ck_assert_int_eq(mt_remove(t, &kb, 8), TXN_E_CORRUPT);
            uint64_t kn = __builtin_bswap64(K + 1);
            ck_assert_int_eq(mt_put(t, &kn, 8, 8), TXN_E_CORRUPT);
        }
        if (c <= D_CHILD_ROOT) { /* the scan goes by the leaves: all there */
            check_scan(t, &r, NULL, 0, (size_t)-1);
        } else { /* a callback that never stops it */
            size_t seen = 0;
            long n = mt_scan(t, NULL, 0, (size_t)-1, count_cb, &seen);
            ck_assert_msg(n == TXN_E_CORRUPT, "case %d: the scan: %ld", c, n);
        }
        if (c != D_TOP_NOT_ROOT) { /* elsewhere: served */
            ck_assert_int_eq(mt_get(t, &ko, 8, &v), 0);
            ck_assert_uint_eq(v, 16);
        }
        mt_close(t);
        *d.at = d.old;
        p = reopen_pool(p);
        o.pool = p;
        ck_assert_int_eq(mt_open(&o, &t), 0);
        check_scan(t, &r, NULL, 0, (size_t)-1);
        mt_close(t);
    }
    drop_pool(p);
    free(r.e);
}
END_TEST
#endif

/* The permutation helpers that moves use (inpool/inpool.c), against plain
 * decoding: perm_swap exchanges two positions' slots, perm_free_since
 * finds the first free position whose slot `from` does not use. */
START_TEST(permutation)
{
    uint64_t seed = 88172645463325252ull;
    for (int round = 0; round < 20000; round++) {
        uint64_t p = PERM_EMPTY, from = PERM_EMPTY;
        for (int k = 0; k < 40; k++) { /* random inserts and removes */
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            unsigned n = perm_count(p);
            if (k == 20)
                from = p;
            if (n < LWIDTH && (n == 0 || seed % 3))
                p = perm_insert(p, (unsigned)(seed >> 8) % (n + 1));
            else
                p = perm_remove(p, (unsigned)(seed >> 8) % n);
        }
        unsigned n = perm_count(p), i = (unsigned)(seed >> 20) % PERM_SLOTS,
                 f = (unsigned)(seed >> 30) % PERM_SLOTS;
        uint64_t q = perm_swap(p, i, f);
        ck_assert_uint_eq(perm_count(q), n);
        for (unsigned j = 0; j < PERM_SLOTS; j++)
            ck_assert_uint_eq(perm_slot(q, j),
                              perm_slot(p, j == i ? f : j == f ? i : j));
        int want = -1;
        for (unsigned j = n; j < LWIDTH && want < 0; j++) {
            int used = 0;
            for (unsigned u = 0; u < perm_count(from); u++)
                used |= perm_slot(from, u) == perm_slot(p, j);
            if (!used)
                want = (int)j;
        }
        ck_assert_int_eq(perm_free_since(p, from), want);
    }
}
END_TEST

#ifdef MT_INCLL
/* mt_opts.batch: puts share a thread's transaction (fewer commits); a
 * thread that ends without mt_flush holds up no epoch end (its context's
 * release rolls the transaction back: InCLL changes stay), and its puts
 * are in the tree. */
static void *batch_putter(void *arg)
{
    mt_tree *t = arg;
    for (uint64_t i = 0; i < 5; i++)
        if (mt_put(t, &i, 8, 160 + 16 * i) != 0) /* updates */
            return (void *)1;
    return NULL; /* no mt_flush */
}

START_TEST(batch)
{
    txn_pool *p = new_pool();
    mt_opts o = {.pool = p, .batch = 8};
    mt_tree *t;
    ck_assert_int_eq(mt_create(&o, &t), 0);
    for (uint64_t i = 0; i < 10; i++) /* one leaf: no split */
        ck_assert_int_eq(mt_put(t, &i, 8, 16 * i), 1);
    ck_assert_int_eq(mt_flush(t), 0);
    txn_stats st;
    txn_stats_reset();
    for (uint64_t j = 0; j < 40; j++) {
        uint64_t i = j % 10;
        ck_assert_int_eq(mt_put(t, &i, 8, 16 * (i + j)), 0);
    }
    ck_assert_int_eq(mt_flush(t), 0);
    txn_stats_get(&st);
    ck_assert_msg(st.commits >= 5 && st.commits <= 20, "%llu commits for 40 puts",
                  (unsigned long long)st.commits);
    pthread_t th;
    void *bad;
    ck_assert_int_eq(pthread_create(&th, NULL, batch_putter, t), 0);
    pthread_join(th, &bad);
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(txn_sync(p), 0); /* would wait for the thread's pin */
    for (uint64_t i = 0; i < 5; i++) {
        uint64_t v;
        ck_assert_int_eq(mt_get(t, &i, 8, &v), 0);
        ck_assert_uint_eq(v, 160 + 16 * i);
    }
    mt_close(t);
    drop_pool(p);
}
END_TEST
#endif

int main(void)
{
    Suite *ref = suite_create("reference"), *st = suite_create("stress");
    TCase *tr = tcase_create("reference"), *ts = tcase_create("stress");
#ifndef MT_INCLL /* a reader that waits for ever fails it in a minute */
    TCase *tf = tcase_create("races");
    tcase_add_test(tf, failed_ops_readers);
    tcase_set_timeout(tf, 60);
    suite_add_tcase(st, tf);
#endif
#ifndef MT_INCLL
    tcase_add_loop_test(tr, reference_transient, 0, 2);
    tcase_add_test(ts, stress_transient);
#endif
    tcase_add_loop_test(tr, reference_txn, 0, 4);
    tcase_add_test(tr, bad_arguments);
    tcase_add_test(tr, permutation);
    tcase_add_test(tr, reuse_txn);
    tcase_add_loop_test(tr, full_pool, 0, 2);
#ifndef MT_INCLL
    tcase_add_test(tr, damaged_tree);
#endif
#ifdef MT_INCLL
    tcase_add_loop_test(ts, stress_txn, 0, 2);
#else
    tcase_add_loop_test(ts, stress_txn, 0, 3);
    tcase_add_loop_test(tr, failed_ops, 0, 2);
    tcase_add_test(tr, failed_writes);
#endif
#ifdef MT_INCLL
    tcase_add_test(tr, batch);
    tcase_add_test(tr, damaged_nodes);
#endif
    tcase_set_timeout(tr, 300);
    tcase_set_timeout(ts, 300);
    suite_add_tcase(ref, tr);
    suite_add_tcase(st, ts);
    test_run_pid();
    SRunner *sr = srunner_create(ref); /* CK_RUN_SUITE picks one */
    srunner_add_suite(sr, st);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    test_pool_sweep("masstree");
    return failed ? 1 : 0;
}
