/* demo.c - runs small transactions on one engine and prints, per number of
 * writes, the barriers and the median time per transaction. The README's
 * main command runs it for every engine at PDOM 0, 1 and 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "txn.h"

#define NOBJ 4096      /* objects of 32 bytes */
#define OBJ_BYTES 32
#define BATCHES 31
#define DEFAULT_TX 2000 /* transactions per batch */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int die(const char *what, int rc)
{
    fprintf(stderr, "demo: %s: %s\n", what, txn_pool_strerror(rc));
    return 1;
}

/* One transaction: `writes` consecutive objects from `first`, each read,
 * incremented and written back with one txn_write (32 bytes). */
static int one_tx(txn_pool *p, txn_obj **objs, unsigned first, unsigned writes)
{
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    for (unsigned w = 0; w < writes; w++) {
        txn_obj *o = objs[(first + w) % NOBJ];
        uint64_t v[OBJ_BYTES / 8];
        const uint64_t *cur = txn_open(tx, o, TXN_RO);
        if (!cur) {
            rc = txn_last_error(tx);
            txn_abort(tx);
            return rc;
        }
        for (unsigned i = 0; i < OBJ_BYTES / 8; i++)
            v[i] = cur[i] + 1;
        if ((rc = txn_write(tx, o, 0, v, sizeof v))) {
            txn_abort(tx);
            return rc;
        }
    }
    return txn_commit(tx);
}

static int setup(txn_pool *p, txn_obj **objs)
{
    txn *tx;
    txn_obj *root = txn_root(p);
    for (unsigned i = 0; i < NOBJ; i += 256) {
        int rc = txn_begin(p, &tx);
        for (unsigned j = i; !rc && j < i + 256; j++)
            if (!(rc = txn_alloc(tx, OBJ_BYTES, &objs[j])))
                rc = txn_write(tx, root, j * sizeof(txn_obj *), &objs[j], sizeof objs[j]);
        if (rc) {
            txn_abort(tx);
            return rc;
        }
        if ((rc = txn_commit(tx)))
            return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    unsigned ntx = argc > 1 ? (unsigned)atoi(argv[1]) : DEFAULT_TX;
    if (ntx == 0)
        ntx = DEFAULT_TX;
    char name[64];
    snprintf(name, sizeof name, "pmtx-demo-%s-%d.pool", txn_engine_name(), (int)getpid());
    printf("# engine %s, PDOM %d (%u ns per barrier), flush %s\n", txn_engine_name(),
           txn_pdom(), txn_pdom_ns(), txn_flush_name());
    txn_pool *p;
    txn_pool_opts o = {.size = 32u << 20, .root_size = NOBJ * sizeof(txn_obj *)};
    int rc = txn_pool_create(name, "demo", &o, &p);
    if (rc)
        return die("create", rc);
    static txn_obj *objs[NOBJ];
    if ((rc = setup(p, objs)))
        return die("setup", rc);
    static const unsigned writes[] = {1, 5, 20};
    printf("%-6s %4s %10s %12s %10s\n", "engine", "pdom", "writes/tx", "barriers/tx", "ns/tx");
    for (unsigned k = 0; k < sizeof writes / sizeof *writes; k++) {
        double ns[BATCHES];
        txn_stats s0, s1;
        one_tx(p, objs, 0, writes[k]); /* warm-up */
        txn_stats_get(&s0);
        unsigned seed = 1;
        for (unsigned b = 0; b < BATCHES; b++) {
            uint64_t t0 = now_ns();
            for (unsigned i = 0; i < ntx; i++) {
                seed = seed * 1103515245u + 12345u;
                if ((rc = one_tx(p, objs, seed >> 8, writes[k])))
                    return die("transaction", rc);
            }
            ns[b] = (double)(now_ns() - t0) / ntx;
        }
        txn_stats_get(&s1);
        qsort(ns, BATCHES, sizeof *ns, cmp_double);
        printf("%-6s %4d %10u %12.2f %10.0f\n", txn_engine_name(), txn_pdom(), writes[k],
               (double)(s1.barriers - s0.barriers) / ((double)ntx * BATCHES),
               ns[BATCHES / 2]);
    }
    txn_pool_close(p);
    char path[4096];
    if (!txn_pool_path(name, path, sizeof path))
        unlink(path);
    return 0;
}
