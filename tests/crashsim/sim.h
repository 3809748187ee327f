/* sim.h - what the crash simulator's driver and its workloads share.
 *
 * A workload runs transactions against txn.h and keeps a volatile mirror
 * of what the pool must hold; with several threads, each thread `t` has
 * its own part: an object of root_size bytes whose handle the root holds
 * (cow allows one writer per object), and its own mirror. Before each commit it announces the digest
 * the pool will have if the commit takes effect (sim_commit); the driver
 * records, for every crash image, the digests a correct recovery may
 * produce: the last committed one, or the announced one while a commit is
 * in flight. After recovery the workload reads the pool back through
 * txn.h into a digest, checks its own invariants, and lists the objects it
 * reaches so that the driver can compare them with the allocator.
 */
#ifndef PMTX_SIM_H
#define PMTX_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "txn.h"

#define SIM_THREADS 4 /* most threads a run may have */

/* The objects a recovered pool reaches. */
struct reach {
    txn_obj **o;
    size_t n, cap;
};

int reach_add(struct reach *r, txn_obj *o);

/* Each thread's part (`threads` objects of `size` bytes, their handles in
 * the root), allocated in one transaction before the workload starts. */
int sim_make_parts(txn_pool *p, size_t size, int threads);

struct workload {
    const char *name;
    size_t pool_size;
    size_t root_size; /* bytes of each thread's part */
    /* build thread t's initial, committed state and its mirror */
    int (*setup)(txn_pool *p, int t);
    /* one transaction of thread t (it may abort); 0 or a TXN_E_* that
     * ends the run */
    int (*step)(txn_pool *p, int t, uint64_t *rng);
    /* digest of thread t's mirror as committed */
    uint64_t (*mirror_digest)(int t);
    /* read thread t's part of a recovered pool: digest, invariants
     * (nonzero = broken), and every object reached (root excluded) */
    int (*read_back)(txn_pool *p, int t, uint64_t *digest, struct reach *r);
    unsigned flags; /* WL_* */
    /* optional: thread t ran its last step (e.g. commit what it keeps
     * open); 0 or a TXN_E_* */
    int (*finish)(int t);
};

#define WL_BY_NAME 1u    /* runs only when --workload names it */
#define WL_ONE_THREAD 2u /* pool-wide state: one thread only */
/* All threads work on the same objects (one part, thread 0's, and one
 * mirror): the driver runs them under the baton scheduler (sched.c), one
 * at a time, and checks one global commit order: setup, mirror_digest and
 * read_back are called for t = 0 only, and sim_commit takes every
 * thread's commit into that order. */
#define WL_SHARED 4u
/* Its pool starts at pool_size and may grow to WL_GROWTH times that. */
#define WL_GROWS 8u
#define WL_GROWTH 3u

extern const struct workload wl_slots, wl_list, wl_mix, wl_migrate, wl_extend;
extern const struct workload wl_masstree, wl_masstree_shared; /* masstree.c */
extern const struct workload wl_shared;   /* wl_shared.c */
extern const struct workload wl_churn, wl_churn_grow; /* wl_churn.c */
/* Built for incll only (weak: NULL elsewhere): wl_leaf.c, wl_sparse.c. */
extern const struct workload wl_leaf __attribute__((weak));
extern const struct workload wl_sparse __attribute__((weak));
/* Built where SQLite is (weak: NULL elsewhere): wl_sqlite.c. */
extern const struct workload wl_sqlite __attribute__((weak));
/* Built with the key-value store's source (weak): wl_kv.c. */
extern const struct workload wl_kv __attribute__((weak));
extern const struct workload wl_kv_shared __attribute__((weak));
extern const struct workload wl_kv_reserve __attribute__((weak));
/* Optional, from a workload file (weak): the first access to thread t's
 * part after recovery, for a workload whose structure recovers lazily; the
 * driver runs it, and crashes it, as part of recovery. */
int sim_touch(const struct workload *w, txn_pool *p, int t) __attribute__((weak));
/* Optional (weak): nonzero when no commit of workload w ends an epoch by
 * itself (no frees, small logs, TXN_EPOCH_MS=0); a one-thread run with
 * --sync-every K > 1 then accepts only the state of the last completed
 * txn_sync (or, during a sync, the last commit): the end of the last
 * completed epoch. */
int sim_epoch_exact(const struct workload *w) __attribute__((weak));
/* Checks of the crash image file at `path` made before the driver opens
 * it, which must leave every byte of it as it was (retain.c: the
 * verdicts of txn_layout_open for the migrate workload); nonzero,
 * reported on stderr, when one fails. */
int sim_file_check(const struct workload *w, const char *path);
/* The Masstree workload's first access to every node of thread t's tree
 * (masstree.c; lazy recovery of the incll build's in-pool nodes). */
int mt_sim_touch(txn_pool *p, int t);

/* Commit thread t's `tx`; `next` is the mirror's digest if it takes
 * effect. */
int sim_commit(txn *tx, int t, uint64_t next);

/* The end of a workload's update: abort `tx` one time in eight, else
 * sim_commit it; *committed says whether the mirror is to take `next`. */
int sim_finish(txn *tx, int t, uint64_t *rng, uint64_t next, int *committed);

/* In a function holding `txn *tx`: on an error, abort tx and return it. */
#define TRY(x)                                                                 \
    do {                                                                       \
        int rc_ = (x);                                                         \
        if (rc_) {                                                             \
            txn_abort(tx);                                                     \
            return rc_;                                                        \
        }                                                                      \
    } while (0)

/* Thread t's part of the pool, read in `tx` (never NULL in a run). */
txn_obj *sim_part(txn *tx, txn_pool *p, int t);

/* The engine's side: sim_pool.c for the shared pool format, sim_<engine>.c
 * for an engine with a pool format of its own. */

/* Bytes to create a pool with, for a workload of `size` bytes a part,
 * `parts` parts, run by `threads` threads at once (a shared workload: one
 * part). */
size_t sim_pool_size(size_t size, int parts, int threads);

/* Where the open pool `p` is mapped: the region the crash model follows;
 * nonzero (reported on stderr) when it cannot be followed. */
int sim_region(txn_pool *p, void **base, size_t *size);

/* The allocator oracle on a recovered pool: every object of r is
 * allocated, once, and the allocator holds nothing else (the root and the
 * engine's own objects aside). Nonzero, reported on stderr, otherwise. */
int sim_check_alloc(txn_pool *p, const struct reach *r);

/* ---- the baton scheduler of shared workloads (sched.c) */

#define SIM_LOCKS 64 /* sim_lock's locks: 0 .. SIM_LOCKS-1 */

/* Switch points: the baton may pass to another thread here. sim_point
 * outside transactions; sim_point_txn inside one (not taken on an engine
 * whose txn_sync or commit waits for running transactions: incll). Both
 * return at once in a thread the scheduler does not run. */
void sim_point(void);
void sim_point_txn(void);
/* Volatile locks that know the scheduler: a thread that finds lock i held
 * passes the baton until it is free. Both are switch points. Take them
 * outside transactions (incll's txn_sync waits for running ones). */
void sim_lock(int i);
void sim_unlock(int i);

/* The driver's side: a run of `threads` threads from `seed`; `inside`:
 * take sim_point_txn. A thread enters before its first step and exits
 * after its last; with `joined`, it keeps the baton until the driver's
 * sched_reap has joined it (`join(t)`, returned) and passed the baton on;
 * the driver reaps each thread so. sched_end returns how many times the
 * baton moved. */
void sched_begin(int threads, uint64_t seed, int inside);
void sched_enter(int t);
void sched_exit(int t, int joined);
int sched_reap(int (*join)(int t));
uint64_t sched_end(void);

/* The run's workload threads (a shared workload's finish may want to
 * know which thread ends last). */
int sim_threads(void);

/* Helpers for workloads. */
uint64_t sim_rand(uint64_t *s);
/* n bytes from the generator at *s (a value made again from its seed) */
void sim_bytes(uint64_t *s, void *out, size_t n);
uint64_t sim_hash(uint64_t h, const void *p, size_t n);

#endif
