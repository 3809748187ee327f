/* wl_leaf.c - the crash simulator's "leaf" workload (incll engine only):
 * the paper's insert, remove and update on test leaves (tests/incll/leaf.h)
 * through the InCLL primitives, with now and then a change under the
 * external log (incll_log: a key in use rewritten, as a split would). The
 * mirror models the slots exactly; after recovery every leaf is read
 * through its lazy recovery, which the driver also crashes (touch). */
#include <stdlib.h>
#include <string.h>

#include "incll_int.h"
#include "leaf.h"
#include "sim.h"

enum { NL = 6, LF_ROOT = 8 * NL, FILL = 6 };

struct mleaf {
    uint64_t perm, keys[LEAF_WIDTH], vals[LEAF_WIDTH];
};
static struct mleaf lf[SIM_THREADS][NL];
static txn_obj *lf_obj[SIM_THREADS][NL];

static uint64_t leaf_digest(const struct mleaf m[NL])
{
    uint64_t h = 7;
    for (int i = 0; i < NL; i++) {
        h = sim_hash(h, &m[i].perm, 8);
        for (int s = 0; s < LEAF_WIDTH; s++)
            if (m[i].perm >> s & 1) {
                h = sim_hash(h, &m[i].keys[s], 8);
                h = sim_hash(h, &m[i].vals[s], 8);
            }
    }
    return h;
}

static uint64_t leaf_mirror(int t)
{
    return leaf_digest(lf[t]);
}

/* Mostly 16-byte aligned 48-bit words (an InCLL can save them), one in
 * eight not (the next update of the slot logs). */
static uint64_t new_val(uint64_t *rng)
{
    uint64_t v = sim_rand(rng);
    return v % 8 ? v & INCLL_PTR_MASK : v;
}

static int m_find(const struct mleaf *m, uint64_t key)
{
    for (int s = 0; s < LEAF_WIDTH; s++)
        if (m->perm >> s & 1 && m->keys[s] == key)
            return s;
    return -1;
}

static uint64_t new_key(const struct mleaf *m, uint64_t *rng)
{
    uint64_t k;
    do
        k = 1 + sim_rand(rng) % 4096;
    while (m_find(m, k) >= 0);
    return k;
}

/* A random slot in use, or -1. */
static int m_pick(const struct mleaf *m, uint64_t *rng)
{
    int n = __builtin_popcountll(m->perm);
    if (!n)
        return -1;
    for (int s = 0, k = (int)(sim_rand(rng) % (uint64_t)n);; s++)
        if (m->perm >> s & 1 && k-- == 0)
            return s;
}

static int m_insert(struct mleaf *m, uint64_t key, uint64_t val)
{
    int s = 0;
    while (s < LEAF_WIDTH && m->perm >> s & 1)
        s++;
    if (s == LEAF_WIDTH)
        return -1;
    m->keys[s] = key;
    m->vals[s] = val;
    m->perm |= 1ull << s;
    return s;
}

static int leaf_wl_setup(txn_pool *p, int t)
{
    txn *tx;
    uint64_t rng = 77 + (uint64_t)t;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    txn_obj *part = sim_part(tx, p, t);
    memset(lf[t], 0, sizeof lf[t]);
    for (int i = 0; i < NL && !rc; i++) {
        rc = tleaf_new(tx, &lf_obj[t][i]);
        if (!rc)
            rc = txn_write(tx, part, 8 * (size_t)i, &lf_obj[t][i], 8);
        for (int k = 0; k < FILL && !rc; k++) {
            uint64_t key = new_key(&lf[t][i], &rng), val = new_val(&rng);
            m_insert(&lf[t][i], key, val);
            rc = tleaf_insert(tx, lf_obj[t][i], key, val);
        }
    }
    if (rc) {
        txn_abort(tx);
        return rc;
    }
    return sim_commit(tx, t, leaf_mirror(t));
}

/* One change to leaf i and its mirror m. */
static int leaf_op(txn *tx, txn_obj *o, struct mleaf *m, uint64_t *rng)
{
    unsigned op = (unsigned)(sim_rand(rng) % 16);
    int s = m_pick(m, rng);
    if (op < 5 || s < 0) { /* insert, or remove when full */
        uint64_t key = new_key(m, rng), val = new_val(rng);
        if (m_insert(m, key, val) >= 0)
            return tleaf_insert(tx, o, key, val);
        op = 5;
    }
    if (op < 9) { /* remove */
        m->perm &= ~(1ull << s);
        return tleaf_remove(tx, o, m->keys[s]);
    }
    if (op < 15) { /* update */
        m->vals[s] = new_val(rng);
        return tleaf_update(tx, o, m->keys[s], m->vals[s]);
    }
    /* under the log: a key in use changes */
    struct leaf *n = incll_node(o);
    int rc = incll_log(tx, o, &leaf_layout);
    if (!rc) {
        m->keys[s] = new_key(m, rng);
        incll_store(&n->keys[s], m->keys[s]);
    }
    return rc;
}

static int leaf_wl_step(txn_pool *p, int t, uint64_t *rng)
{
    txn *tx;
    struct mleaf next[NL];
    memcpy(next, lf[t], sizeof next);
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    if (sim_rand(rng) % 8 == 0) { /* a reader; it may abort */
        struct leaf *n;
        rc = tleaf_open(tx, lf_obj[t][sim_rand(rng) % NL], &n);
        txn_abort(tx);
        return rc;
    }
    unsigned m = 1 + (unsigned)(sim_rand(rng) % 3);
    for (unsigned j = 0; j < m && !rc; j++) {
        unsigned i = (unsigned)(sim_rand(rng) % NL);
        rc = leaf_op(tx, lf_obj[t][i], &next[i], rng);
    }
    if (rc) { /* only a full log: the run ends */
        txn_abort(tx);
        return rc;
    }
    rc = sim_commit(tx, t, leaf_digest(next));
    if (!rc)
        memcpy(lf[t], next, sizeof next);
    return rc;
}

/* Epochs end only at txn_sync: no frees, logs far below 1/16 of the pool
 * (the leaves here; the large objects of wl_sparse.c; the Masstree with
 * its nodes in the pool, which frees none). */
int sim_epoch_exact(const struct workload *w)
{
    const char *ms = getenv("TXN_EPOCH_MS");
    return (w == &wl_leaf || w == &wl_sparse || w == &wl_masstree) && ms && !strcmp(ms, "0");
}

/* First access of every leaf of thread t's part (lazy recovery); of every
 * node of the Masstree (mt_sim_touch, masstree.c). */
int sim_touch(const struct workload *w, txn_pool *p, int t)
{
    txn *tx;
    if (w == &wl_masstree)
        return mt_sim_touch(p, t);
    if (w != &wl_leaf)
        return 0;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    txn_obj *part = sim_part(tx, p, t);
    for (int i = 0; part && i < NL && !rc; i++) {
        txn_obj *o = NULL;
        struct leaf *n;
        rc = txn_read(tx, part, 8 * (size_t)i, &o, 8);
        if (!rc)
            rc = o ? tleaf_open(tx, o, &n) : TXN_E_CORRUPT;
    }
    if (rc) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

static int leaf_wl_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    txn *tx;
    struct mleaf m[NL];
    int bad = 0;
    if (txn_begin(p, &tx))
        return 1;
    txn_obj *part = sim_part(tx, p, t);
    for (int i = 0; i < NL && !bad; i++) {
        txn_obj *o = NULL;
        struct leaf *n;
        if (!part || txn_read(tx, part, 8 * (size_t)i, &o, 8) || !o ||
            txn_obj_size(p, o) < sizeof *n || tleaf_open(tx, o, &n) || reach_add(r, o)) {
            bad = 1;
            break;
        }
        m[i].perm = n->p.perm;
        memcpy(m[i].keys, n->keys, sizeof m[i].keys);
        memcpy(m[i].vals, n->vals, sizeof m[i].vals);
        /* invariants: slots in use only, distinct keys, a current epoch */
        bad |= (m[i].perm >> LEAF_WIDTH) != 0 ||
               incll_node_epoch(&n->p) > incll__epoch(tx);
        for (int s = 0; s < LEAF_WIDTH && !bad; s++)
            if (m[i].perm >> s & 1) {
                uint64_t k = m[i].keys[s];
                m[i].perm &= ~(1ull << s);
                bad |= k == 0 || m_find(&m[i], k) >= 0;
                m[i].perm |= 1ull << s;
            }
    }
    if (bad || txn_commit(tx)) {
        if (bad)
            txn_abort(tx);
        return 1;
    }
    *digest = leaf_digest(m);
    return 0;
}

const struct workload wl_leaf = {"leaf", 2u << 20, LF_ROOT, leaf_wl_setup, leaf_wl_step,
                                 leaf_mirror, leaf_wl_read, 0, NULL};
