/* ctxreg.h - per-thread transaction contexts, one per (thread, pool),
 * shared by every engine library. A thread finds its context for a pool
 * in a thread-local cache without a lock; it gets one at its first
 * txn_begin on the pool and keeps it until it exits or the pool closes.
 * A pool's `gen` (unique per open) tells a cached context of a closed
 * pool from a new pool at the same address. */
#ifndef PMTX_CTXREG_H
#define PMTX_CTXREG_H

#include <stdint.h>

struct ctxreg_ops {
    /* A new context of the calling thread for `pool`, or NULL and *err. */
    void *(*create)(void *pool, int *err);
    /* Give a context back; called with the registry locked. */
    void (*release)(void *ctx);
};

/* A pool opens: returns its generation (0 when out of memory). */
uint64_t ctxreg_open(void *pool, const struct ctxreg_ops *ops);

/* A pool closes: calls release_all(pool) with the registry locked, after
 * which no thread can reach the pool's contexts. */
void ctxreg_close(void *pool, uint64_t gen, void (*release_all)(void *pool));

/* The calling thread's context for the pool, created when missing. */
void *ctxreg_get(void *pool, uint64_t gen, int *err);

/* Give back a context that create() made but its caller must drop. */
void ctxreg_drop(void *pool, uint64_t gen, void *ctx);

/* Give back the calling thread's contexts now, as its exit would: for a
 * caller that must see the release's stores happen at a point of its
 * choosing (the -check library's scheduler, at a thread's end). */
void ctxreg_thread_end(void);

#endif
