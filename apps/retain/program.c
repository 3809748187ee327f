/* program.c - one program of the evaluation on its pool: the original
 * building it, or an update program running its input, one transaction
 * an operation, timed from cold caches in thread CPU and wall time. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "retain.h"

static double clock_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The run is one thread, and the machine's other processes then cost it
 * nothing (barrier spins and page faults count), except through the
 * caches they share. Wall time is reported beside it. */
double now_s(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static struct stamp stamp_now(void)
{
    return (struct stamp){now_s(), clock_s(CLOCK_MONOTONIC)};
}

static struct stamp stamp_since(struct stamp t0)
{
    struct stamp t = stamp_now();
    return (struct stamp){t.cpu - t0.cpu, t.wall - t0.wall};
}

uint64_t stored(void)
{
    txn_stats s;
    txn_stats_get(&s);
    return s.bytes_stored;
}

static uint64_t val_of(uint64_t key)
{
    return key * 2 + 1;
}

/* One operation per transaction: delete the key if there, else insert
 * it; *found_n: how many were there. */
static int run_ops(txn_pool *p, const struct instance *k, const uint32_t *keys, size_t n,
                   size_t *found_n)
{
    const struct kernel *kn = kernel_of(k->L->kind);
    size_t f = 0;
    for (size_t i = 0; i < n; i++) {
        txn *tx;
        int found = 0;
        TRY(txn_begin(p, &tx));
        int rc = kn->lookup(tx, k, keys[i], &found);
        if (!rc)
            rc = found ? kn->remove(tx, k, keys[i]) : kn->insert(tx, k, keys[i], val_of(keys[i]));
        if (rc) {
            txn_abort(tx);
            return rc;
        }
        TRY(txn_commit(tx));
        f += (size_t)found;
    }
    *found_n = f;
    return 0;
}

/* Untimed: allocate (zero-filled) and abort `n` node-sized objects, so
 * that the timed program does not pay first touches of pool pages that
 * another program's pool had touched already (P-Retain's frees leave
 * P-Manual warm pages; a fresh copy, with --block, has none). */
static int warm_heap(txn_pool *p, size_t size, size_t n)
{
    for (size_t done = 0; done < n;) {
        txn *tx;
        TRY(txn_begin(p, &tx));
        for (unsigned i = 0; i < 1000 && done < n; i++, done++) {
            txn_obj *o;
            int rc = txn_alloc(tx, size, &o);
            if (rc) {
                txn_abort(tx);
                return rc == TXN_E_NOSPACE ? 0 : rc;
            }
        }
        txn_abort(tx);
    }
    return 0;
}

static int create_structure(txn_pool *p, const struct instance *k)
{
    txn *tx;
    TRY(txn_begin(p, &tx));
    int rc = kernel_of(k->L->kind)->create(tx, k);
    if (rc) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

void p_original(const struct node_layout *L, const uint32_t *keys, size_t n, double *t,
                uint64_t *bytes)
{
    static const txn_layout v1 = {"retain-bench", 1, NULL, 0, NULL, 0, 0};
    /* a pool of --pool-size, as the other programs' (warm_heap fills it) */
    txn_pool_opts opts = {.size = g_opt.pool_size, .root_size = 64, .max_size = g_opt.pool_size};
    txn_pool *p;
    const char *path = pool_file(POOL_ORIG);
    unlink(path);
    int rc = txn_layout_open(path, &v1, &opts, TXN_LAYOUT_CREATE, &p);
    if (rc)
        die("create", rc);
    struct instance k = {L, txn_root(p), 0, NULL, hash_buckets(g_opt.n)};
    size_t f;
    uint64_t b0 = stored();
    double t0 = now_s();
    if ((rc = create_structure(p, &k)) || (rc = run_ops(p, &k, keys, n, &f)))
        die("P-Original", rc);
    *t = now_s() - t0;
    *bytes = stored() - b0;
    txn_pool_close(p);
}

void prog_open(struct prog *g, const char *what, const char *path, const txn_layout *lay,
               const struct node_layout *L, unsigned nb)
{
    int rc;
    *g = (struct prog){.what = what};
    if ((rc = txn_layout_open(path, lay, NULL, 0, &g->p)))
        die(what, rc);
    g->k = (struct instance){L, txn_root(g->p), 0, NULL, nb};
    if ((rc = warm_heap(g->p, node_bytes(L), 2 * g_opt.n)))
        die("warm", rc);
}

/* Every program starts its timed operations with nothing of its pool in
 * the caches: P-Manual's pool comes from the migration, which has just
 * touched every node, the others' from a file copy that evicted them, and
 * a shared last-level cache still holding the structure for P-Manual
 * alone made P-Auto against P-Manual depend on what other work took of
 * that cache (docs/retention.md). Writes over a buffer of twice the
 * last-level cache, evicting the TLB's entries too; --no-evict skips it,
 * for runs that check results and do not compare times. */
static void evict_caches(void)
{
    static unsigned char *buf;
    static size_t n;
    if (!g_opt.evict)
        return;
    if (!buf) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        n = 2 * (l3 > 0 ? (size_t)l3 : (size_t)32 << 20);
        if (!(buf = malloc(n)))
            return;
    }
    for (size_t i = 0; i < n; i += 64)
        buf[i]++;
}

void prog_ops(struct prog *g, const uint32_t *keys, size_t from, size_t to)
{
    size_t f;
    int rc;
    evict_caches();
    uint64_t b0 = stored();
    struct stamp t0 = stamp_now();
    if ((rc = run_ops(g->p, &g->k, keys + from, to - from, &f)))
        die(g->what, rc);
    struct stamp t = stamp_since(t0);
    g->bytes += stored() - b0;
    g->t.cpu += t.cpu;
    g->t.wall += t.wall;
    g->found += f;
}

void prog_close(struct prog *g, size_t want)
{
    if (g->found != want) {
        fprintf(stderr, "retain: %s found %zu keys, expected %zu\n", g->what, g->found, want);
        fail_exit();
    }
    txn_pool_close(g->p);
}
