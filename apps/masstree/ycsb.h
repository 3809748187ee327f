/* ycsb.h - the YCSB driver (ycsb.c) and its node store's half
 * (mirror/ycsb_mirror.c, inpool/ycsb_inpool.c, picked by CMake with the
 * store): where value buffers live, the store's counters, and the
 * crash-recovery run. Internal to ycsb-<engine>. */
#ifndef PMTX_YCSB_H
#define PMTX_YCSB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "masstree.h"

#define VAL_BYTES 32

struct ycsb_cfg {
    char workload;
    int zipf, threads, check, restart, op_times;
    size_t keys, ops, crash_logged;
    uint64_t seed;
    unsigned batch;
};
extern struct ycsb_cfg cfg;
extern mt_tree *tree;
extern txn_pool *pool;
extern pthread_barrier_t start_line;
extern char made_pool[256]; /* the pool file this run made, if any */

/* a worker thread of the run (or of the crash-recovery run) */
struct worker {
    int id;
    char *vals; /* DRAM: the buffers of its updates and inserts */
    uint64_t sink;
    double start, end; /* of its run: the main thread may not be scheduled */
};
/* a loading thread's share of the keys */
struct range {
    size_t from, to;
};

/* ---- the driver's helpers (ycsb.c) */
double clock_s(clockid_t c);
double now(void);
uint64_t mix64(uint64_t x);
uint64_t rnd(uint64_t *s);
void key_of(uint64_t i, uint8_t k[8]); /* key number i as 8 bytes */
/* fn on each thread's share of keys 0..keys-1 */
void load_keys(void *(*fn)(void *));
/* an mt_scan callback counting keys into *(size_t *)arg */
int count_cb(const void *key, size_t len, uint64_t val, void *arg);
/* remove the pool file named by a pool path (relative: txn_pool_path) */
void pool_unlink(const char *path);
/* print "ycsb: what: error", remove the run's pool, exit 1 */
_Noreturn void fail(const char *what, int rc);

/* ---- the store's half */
struct ycsb_store {
    const char *name;   /* the JSON line's storage: "txn" or "incll" */
    int crash_recovery; /* --crash-recovery runs with this store */
};
extern const struct ycsb_store ycsb_store;
/* Pool bytes the value buffers of n puts take (0: they are in DRAM). */
size_t vals_pool_bytes(size_t n);
/* DRAM for n value buffers (NULL: they are in the pool). */
char *vals_dram(size_t n);
/* static inline char *new_val(char *dram, size_t i, int fill): a new
 * value buffer, filled with `fill` and used once: buffer i of dram, or
 * the next of the thread's in the pool (the store's ycsb_vals.h). */
/* The store's counters: reset by each run thread at its start, added up
 * at its end (first: the thread that adds process-wide ones), then
 * printed as one "# " line and appended to the JSON line's fields in
 * extra (cap bytes; what it wrote is returned). */
void store_stats_reset(void);
void store_stats_add(int first);
size_t store_stats_report(char *extra, size_t cap, double ops);
/* --crash-recovery (ycsb_store.crash_recovery): 0 when recovery checked */
int crash_recovery(const char *engine);

#include "ycsb_vals.h"

#endif
