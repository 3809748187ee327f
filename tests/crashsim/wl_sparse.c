/* wl_sparse.c - the crash simulator's "sparse" workload (built for incll,
 * which logs large objects by granule): scattered writes into two large
 * objects of each thread's part, one in an allocator run (its block is not
 * granule aligned, so its first and last granules are cut) and one in a
 * chunk of its own. Words, and runs of bytes that span granules; some
 * read back and changed before the commit (the transaction's own held
 * writes); now and then an object opened TXN_RW first (logged whole); one
 * transaction in eight aborts. The mirror is every byte of both objects. */
#include <string.h>

#include "sim.h"

enum { SP_A = 5000, SP_B = 40000, SP_ROOT = 16, SP_RUN = 300 };
static const size_t sp_size[2] = {SP_A, SP_B};

struct sp_state {
    uint8_t a[SP_A], b[SP_B];
};
static struct sp_state sp[SIM_THREADS];
static txn_obj *sp_obj[SIM_THREADS][2];

static uint8_t *bytes_of(struct sp_state *s, int i)
{
    return i ? s->b : s->a;
}

static uint64_t sp_digest(const struct sp_state *s)
{
    return sim_hash(sim_hash(11, s->a, SP_A), s->b, SP_B);
}

static uint64_t sp_mirror(int t)
{
    return sp_digest(&sp[t]);
}

static int sp_setup(txn_pool *p, int t)
{
    txn *tx;
    uint64_t rng = 91 + (uint64_t)t;
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < sp_size[i]; k++)
            bytes_of(&sp[t], i)[k] = (uint8_t)sim_rand(&rng);
    TRY(txn_begin(p, &tx));
    txn_obj *part = sim_part(tx, p, t);
    for (int i = 0; i < 2; i++) {
        TRY(txn_alloc(tx, sp_size[i], &sp_obj[t][i]));
        TRY(txn_write(tx, sp_obj[t][i], 0, bytes_of(&sp[t], i), sp_size[i]));
        TRY(txn_write(tx, part, 8 * (size_t)i, &sp_obj[t][i], 8));
    }
    return sim_commit(tx, t, sp_mirror(t));
}

/* One change of object i, in tx and in its mirror m. */
static int sp_change(txn *tx, txn_obj *o, uint8_t *m, size_t size, uint64_t *rng)
{
    unsigned kind = (unsigned)(sim_rand(rng) % 8);
    if (kind < 2) { /* a run of bytes anywhere, across granules */
        size_t n = 1 + sim_rand(rng) % SP_RUN, at = sim_rand(rng) % (size - n + 1);
        for (size_t k = at; k < at + n; k++)
            m[k] = (uint8_t)sim_rand(rng);
        return txn_write(tx, o, at, m + at, n);
    }
    if (kind < 4) { /* read back what the transaction may have written */
        uint8_t buf[SP_RUN];
        size_t n = 1 + sim_rand(rng) % SP_RUN, at = sim_rand(rng) % (size - n + 1);
        int rc = txn_read(tx, o, at, buf, n);
        for (size_t k = 0; !rc && k < n; k++)
            m[at + k] = (uint8_t)(buf[k] + 1); /* a wrong read shows in the digest */
        return rc ? rc : txn_write(tx, o, at, m + at, n);
    }
    uint64_t v = sim_rand(rng);
    size_t at = 8 * (sim_rand(rng) % (size / 8));
    memcpy(m + at, &v, 8);
    return txn_write_u64(tx, o, at, v);
}

static int sp_step(txn_pool *p, int t, uint64_t *rng)
{
    static struct sp_state next_of[SIM_THREADS];
    struct sp_state *next = &next_of[t];
    txn *tx;
    memcpy(next, &sp[t], sizeof *next);
    TRY(txn_begin(p, &tx));
    if (sim_rand(rng) % 32 == 0 && !txn_open(tx, sp_obj[t][sim_rand(rng) % 2], TXN_RW))
        TRY(txn_last_error(tx) ? txn_last_error(tx) : TXN_E_STATE);
    unsigned m = 1 + (unsigned)(sim_rand(rng) % 12);
    for (unsigned j = 0; j < m; j++) {
        int i = (int)(sim_rand(rng) % 2);
        TRY(sp_change(tx, sp_obj[t][i], bytes_of(next, i), sp_size[i], rng));
    }
    int done, rc = sim_finish(tx, t, rng, sp_digest(next), &done);
    if (done)
        memcpy(&sp[t], next, sizeof *next);
    return rc;
}

static int sp_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    static struct sp_state got_of[SIM_THREADS];
    struct sp_state *got = &got_of[t];
    txn *tx;
    TRY(txn_begin(p, &tx));
    for (int i = 0; i < 2; i++) {
        txn_obj *o = NULL;
        TRY(txn_read(tx, sim_part(tx, p, t), 8 * (size_t)i, &o, 8));
        if (!o || txn_obj_size(p, o) < sp_size[i] || reach_add(r, o)) {
            txn_abort(tx);
            return 1;
        }
        TRY(txn_read(tx, o, 0, bytes_of(got, i), sp_size[i]));
    }
    txn_abort(tx);
    *digest = sp_digest(got);
    return 0;
}

/* 8 MiB: an epoch of four transactions logs at most about 160 KB (both
 * objects whole, 115 KB with 64-byte granules, and the runs of bytes),
 * below 1/16 of the heap, so epochs end only at txn_sync
 * (sim_epoch_exact). */
const struct workload wl_sparse = {"sparse", 8u << 20, SP_ROOT, sp_setup, sp_step, sp_mirror,
                                   sp_read, WL_BY_NAME, NULL};
