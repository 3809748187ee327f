/* growpause.c - how long a pool's growth stops the other threads: one
 * thread allocates and frees objects of 100 KiB (each takes the
 * allocator's lock: objects past the size classes come from whole
 * chunks), one transaction each, and records its slowest; meanwhile the
 * main thread makes one object of --mb MiB (default 1024), which grows
 * the pool by at least that much. Prints the growth's time, the other
 * thread's slowest allocation and free during it and before it, and how
 * many it made during the growth.
 *
 * growpause-<engine> [--mb N] [--pool PATH]; the pool (default
 * /dev/shm/growpause-<pid>.pool) is removed at the end. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "txn.h"

#define OBJ (100u << 10)

static txn_pool *pool;
static _Atomic int phase; /* 0: before the growth, 1: during it, 2: stop */
static double worst[2];   /* the worker's slowest alloc + free, by phase */
static long during;       /* the worker's allocations during the growth */
static int failed;        /* the worker's first error, or 0 */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int one(void)
{
    txn *tx;
    txn_obj *o;
    int rc = txn_begin(pool, &tx);
    if (rc)
        return rc;
    if ((rc = txn_alloc(tx, OBJ, &o)) || (rc = txn_write_u64(tx, o, 0, 1))) {
        txn_abort(tx);
        return rc;
    }
    if ((rc = txn_commit(tx)) || (rc = txn_begin(pool, &tx)))
        return rc;
    if ((rc = txn_free(tx, o))) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

static void *worker(void *arg)
{
    (void)arg;
    int ph;
    while ((ph = atomic_load(&phase)) < 2) {
        double t0 = now();
        int rc = one();
        double dt = now() - t0;
        if (rc) {
            failed = rc;
            return NULL;
        }
        int ph2 = atomic_load(&phase); /* an operation that saw the growth start */
        int at = ph2 >= 1 ? 1 : ph;
        if (dt > worst[at])
            worst[at] = dt;
        during += at == 1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    size_t mb = 1024;
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/growpause-%d.pool", (int)getpid());
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) {
            mb = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--pool") && i + 1 < argc) {
            snprintf(path, sizeof path, "%s", argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--mb N] [--pool PATH]\n", argv[0]);
            return 2;
        }
    }
    /* room for the worker's objects from the start: only the main thread
     * grows the pool */
    txn_pool_opts o = {.size = (size_t)64 << 20, .threads = 4};
    int rc = txn_pool_create(path, "growpause", &o, &pool);
    if (rc) {
        fprintf(stderr, "growpause: create %s: %s\n", path, txn_pool_strerror(rc));
        return 1;
    }
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    usleep(200000);
    size_t before, after;
    txn_pool_size(pool, &before, NULL);
    atomic_store(&phase, 1);
    double t0 = now();
    txn *tx;
    txn_obj *big;
    if (!(rc = txn_begin(pool, &tx))) {
        if ((rc = txn_alloc(tx, mb << 20, &big)))
            txn_abort(tx);
        else
            rc = txn_commit(tx);
    }
    double grew = now() - t0;
    atomic_store(&phase, 2);
    pthread_join(th, NULL);
    txn_pool_size(pool, &after, NULL);
    txn_pool_close(pool);
    unlink(path);
    if (rc || failed) {
        fprintf(stderr, "growpause: %s\n", txn_strerror(rc ? rc : failed));
        return 1;
    }
    printf("growpause %s: pool %zu -> %zu MiB; the object of %zu MiB took %.1f ms; the other "
           "thread's slowest alloc+free of 100 KiB: %.2f ms during it (%ld made), %.2f ms "
           "before\n",
           txn_engine_name(), before >> 20, after >> 20, mb, grew * 1e3, worst[1] * 1e3, during,
           worst[0] * 1e3);
    return 0;
}
