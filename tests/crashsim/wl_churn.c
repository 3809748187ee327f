/* wl_churn.c - the "churn" workload: each thread fills the pool with
 * objects of one size until it is full, frees them all, and fills it
 * again at the next size (6,000, 100,000, 10,000, 7,000 and 16,000
 * bytes: four classes and large objects). Every new size needs chunks
 * that runs of the last one held: the allocator turns emptied runs back
 * into FREE chunks and hands them to another class or a large object,
 * and the logs keep records naming blocks of chunks that have changed
 * since (issue #41, item 1). Between two sizes, with nothing of its own
 * left, a thread gives the pool's free space back to the filesystem
 * (txn_pool_trim: holes punched in the file, issue #42). Runs only when
 * named (--workload churn). */
#include <string.h>

#include "sim.h"

enum { C_SLOTS = 256, C_ROOT = 8 * C_SLOTS, C_ALLOCS = 16, C_FREES = 32 };
static const size_t churn_sizes[] = {6000, 100000, 10000, 7000, 16000};
#define C_NSIZES (sizeof churn_sizes / sizeof *churn_sizes)

static uint64_t ch_val[SIM_THREADS][C_SLOTS], ch_size[SIM_THREADS][C_SLOTS];
static unsigned ch_phase[SIM_THREADS];
static int ch_draining[SIM_THREADS];

static uint64_t churn_digest_of(const uint64_t *val, const uint64_t *size)
{
    uint64_t h = 5;
    for (unsigned i = 0; i < C_SLOTS; i++) {
        h = sim_hash(h, &size[i], 8);
        if (size[i])
            h = sim_hash(h, &val[i], 8);
    }
    return h;
}

static uint64_t churn_mirror(int t)
{
    return churn_digest_of(ch_val[t], ch_size[t]);
}

static int churn_setup(txn_pool *p, int t)
{
    (void)p;
    memset(ch_val[t], 0, sizeof ch_val[t]);
    memset(ch_size[t], 0, sizeof ch_size[t]);
    ch_phase[t] = (unsigned)t; /* threads start at different sizes */
    ch_draining[t] = 0;
    return 0;
}

/* An object of `size` bytes holding v: v and its size first, v ^ size in
 * its last word. A full pool aborts the transaction (CTRY): cow commits
 * the wrapper of an allocation that failed for its payload (a leak the
 * oracle reports; docs/allocator.md). */
static int put_obj(txn *tx, txn_obj *root, unsigned i, uint64_t size, uint64_t v)
{
    txn_obj *o;
    int rc = txn_alloc(tx, size, &o);
    uint64_t head[2] = {v, size};
    if (rc || (rc = txn_write(tx, o, 0, head, sizeof head)) ||
        (rc = txn_write_u64(tx, o, size - 8, v ^ size)))
        return rc;
    return txn_write(tx, root, 8 * (size_t)i, &o, sizeof o);
}

/* A full pool (no room for a block, a copy or the log) ends the
 * transaction, rolled back, and the filling: not the run. */
static int full_pool(int t, int rc)
{
    if (rc != TXN_E_NOSPACE && rc != TXN_E_LOGFULL)
        return rc;
    ch_draining[t] = 1;
    return 0;
}

#define CTRY(x)                                                                \
    do {                                                                       \
        int rc_ = (x);                                                         \
        if (rc_) {                                                             \
            txn_abort(tx);                                                     \
            return full_pool(t, rc_);                                          \
        }                                                                      \
    } while (0)

static int churn_step(txn_pool *p, int t, uint64_t *rng)
{
    txn *tx;
    uint64_t val[C_SLOTS], size[C_SLOTS];
    memcpy(val, ch_val[t], sizeof val);
    memcpy(size, ch_size[t], sizeof size);
    CTRY(txn_begin(p, &tx));
    txn_obj *root = sim_part(tx, p, t);
    if (ch_draining[t]) { /* free the last size's objects, a batch a transaction */
        unsigned n = 0;
        for (unsigned i = 0; i < C_SLOTS && n < C_FREES; i++) {
            if (!size[i])
                continue;
            txn_obj *o, *none = NULL;
            CTRY(txn_read(tx, root, 8 * (size_t)i, &o, sizeof o));
            CTRY(txn_free(tx, o));
            CTRY(txn_write(tx, root, 8 * (size_t)i, &none, sizeof none));
            size[i] = val[i] = 0;
            n++;
        }
        if (n == 0) { /* all gone: the next size, after the free space
                       * goes back to the filesystem (txn_pool_trim, out
                       * of any transaction; another thread may be in one) */
            ch_draining[t] = 0;
            ch_phase[t]++;
            txn_abort(tx);
            int rc = txn_pool_trim(p, NULL);
            if (rc && rc != TXN_E_NOTSUP)
                return rc;
            CTRY(txn_begin(p, &tx));
            root = sim_part(tx, p, t);
        }
    }
    if (!ch_draining[t]) {
        uint64_t s = churn_sizes[ch_phase[t] % C_NSIZES];
        for (unsigned i = 0, n = 0; i < C_SLOTS && n < C_ALLOCS; i++) {
            if (size[i])
                continue;
            uint64_t v = sim_rand(rng);
            CTRY(put_obj(tx, root, i, s, v));
            size[i] = s;
            val[i] = v;
            n++;
        }
        unsigned used = 0;
        for (unsigned i = 0; i < C_SLOTS; i++)
            used += size[i] != 0;
        if (used == C_SLOTS)
            ch_draining[t] = 1;
    }
    if (sim_rand(rng) % 4 == 0) { /* rewrite one object's value */
        unsigned i = (unsigned)(sim_rand(rng) % C_SLOTS);
        if (size[i]) {
            txn_obj *o;
            CTRY(txn_read(tx, root, 8 * (size_t)i, &o, sizeof o));
            val[i] = sim_rand(rng);
            CTRY(txn_write_u64(tx, o, 0, val[i]));
            CTRY(txn_write_u64(tx, o, size[i] - 8, val[i] ^ size[i]));
        }
    }
    int done, rc = sim_finish(tx, t, rng, churn_digest_of(val, size), &done);
    if (done) {
        memcpy(ch_val[t], val, sizeof val);
        memcpy(ch_size[t], size, sizeof size);
    }
    return full_pool(t, rc);
}

static int churn_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    txn *tx;
    uint64_t val[C_SLOTS], size[C_SLOTS];
    TRY(txn_begin(p, &tx));
    txn_obj *root = sim_part(tx, p, t);
    for (unsigned i = 0; i < C_SLOTS; i++) {
        txn_obj *o;
        uint64_t head[2], tail;
        TRY(txn_read(tx, root, 8 * (size_t)i, &o, sizeof o));
        val[i] = size[i] = 0;
        if (!o)
            continue;
        if (txn_obj_size(p, o) < 16 || reach_add(r, o)) {
            txn_abort(tx);
            return 1;
        }
        TRY(txn_read(tx, o, 0, head, sizeof head));
        if (head[1] < 16 || txn_obj_size(p, o) < head[1]) {
            txn_abort(tx);
            return 1;
        }
        TRY(txn_read(tx, o, head[1] - 8, &tail, sizeof tail));
        if (tail != (head[0] ^ head[1])) { /* a torn object */
            txn_abort(tx);
            return 1;
        }
        val[i] = head[0];
        size[i] = head[1];
    }
    txn_abort(tx);
    *digest = churn_digest_of(val, size);
    return 0;
}

const struct workload wl_churn = {"churn", 3u << 20, C_ROOT, churn_setup, churn_step,
                                  churn_mirror, churn_read, WL_BY_NAME, NULL};

/* churn-grow: the same in a pool that starts at the least a pool may be
 * and grows to three times that as the first fill goes (issue #42):
 * crashes fall in growths, and the later fills run in the grown pool. */
const struct workload wl_churn_grow = {"churn-grow", 2u << 20, C_ROOT, churn_setup, churn_step,
                                       churn_mirror, churn_read, WL_BY_NAME | WL_GROWS, NULL};
