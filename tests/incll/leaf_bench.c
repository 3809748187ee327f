/* leaf_bench.c - the test leaf's updates, removes and inserts through the
 * InCLL primitives against the same operations with every node logged
 * first (incll_log: the external log alone), side by side in one run:
 * operations per second and barriers per operation. Not a CI test.
 *
 *   leaf_bench [leaves] [ops] [rounds]   (defaults 20000, 400000, 3)
 * Epochs as configured (TXN_EPOCH_MS, default 64 ms); TXN_PDOM as usual.
 * Barriers are the calling thread's: the epoch ends (the same for both)
 * run in the engine's epoch thread and are not in them. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../common.h" /* the pool's name and removal */
#include "leaf.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One operation on leaf o (keys 1..12, about 8 present): an update (8 in
 * 10), else a removal of a present key or an insert of an absent one. */
static int op(txn *tx, txn_obj *o, uint64_t *s, int log_first)
{
    struct leaf *n;
    int rc = tleaf_open(tx, o, &n);
    if (!rc && log_first)
        rc = incll_log(tx, o, &leaf_layout);
    if (rc)
        return rc;
    uint64_t key = 1 + rnd(s) % 12, r = rnd(s) % 10;
    int there = tleaf_find(n, key) >= 0;
    if (there && r < 8)
        return tleaf_update(tx, o, key, rnd(s) & INCLL_PTR_MASK);
    if (there && __builtin_popcountll(n->p.perm) > 4)
        return tleaf_remove(tx, o, key);
    return there ? 0 : tleaf_insert(tx, o, key, 16 * key);
}

static int run(txn_pool *p, txn_obj **leaves, size_t n, size_t ops, int log_first,
               double *sec, double *bpo)
{
    uint64_t s = 42;
    txn_stats a, b;
    txn_stats_reset();
    txn_stats_get(&a);
    double t0 = now();
    for (size_t i = 0; i < ops; i++) {
        txn *tx;
        int rc = txn_begin(p, &tx);
        if (!rc && (rc = op(tx, leaves[rnd(&s) % n], &s, log_first))) {
            txn_abort(tx);
            return rc;
        }
        if (rc || (rc = txn_commit(tx)))
            return rc;
    }
    int rc = txn_sync(p);
    *sec = now() - t0;
    txn_stats_get(&b);
    *bpo = (double)(b.barriers - a.barriers) / (double)ops;
    return rc;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
    size_t ops = argc > 2 ? strtoul(argv[2], NULL, 10) : 400000;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    char name[TEST_NAME_LEN];
    int rc = test_pool_name("leaf-bench", name, sizeof name);
    txn_pool_opts po = {.size = (size_t)256 << 20, .threads = 2};
    txn_pool *p = NULL;
    txn_obj **leaves = malloc(n * sizeof *leaves);
    if (!rc)
        rc = leaves ? txn_pool_create(name, "leaf-bench", &po, &p) : TXN_E_NOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        txn *tx;
        if ((rc = txn_begin(p, &tx)))
            break;
        rc = tleaf_new(tx, &leaves[i]);
        for (uint64_t k = 1; !rc && k <= 8; k++)
            rc = tleaf_insert(tx, leaves[i], k, 16 * k);
        rc = rc ? (txn_abort(tx), rc) : txn_commit(tx);
    }
    if (!rc)
        rc = txn_sync(p);
    printf("engine %s, PDOM %d, %zu leaves, %zu ops per run\n", txn_engine_name(), txn_pdom(),
           n, ops);
    for (int r = 0; !rc && r < rounds; r++)
        for (int mode = 0; !rc && mode < 2; mode++) {
            double sec, bpo;
            rc = run(p, leaves, n, ops, mode, &sec, &bpo);
            if (!rc)
                printf("%-7s %10.0f ops/s  %.3f barriers/op\n", mode ? "log" : "incll",
                       (double)ops / sec, bpo);
        }
    if (rc)
        fprintf(stderr, "leaf_bench: %s\n", txn_strerror(rc));
    if (p) /* created */
        txn_pool_close(p);
    test_pool_remove(name);
    free(leaves);
    return rc != 0;
}
