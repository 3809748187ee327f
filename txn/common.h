/* common.h - helpers every engine library shares (common.c). */
#ifndef PMTX_COMMON_H
#define PMTX_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* The first 8 bytes of a pool of pmtx's own format (pool.h). */
#define POOL_MAGIC 0x31585448544d5050ull /* "PPMTHTX1" */

/* A deferred action (txn_defer). */
struct tx_defer {
    int when;
    void (*fn)(void *);
    void *arg;
};

/* Run the actions of `defers` registered for `outcome` (TXN_ON_COMMIT or
 * TXN_ON_ABORT; TXN_ON_END matches both), in order, and empty the list.
 * The actions may begin new transactions that defer more: those land in a
 * fresh list and are not run here. */
void defers_run(struct vec *defers, int outcome);

/* Threads for `units` of work, one per `per` units (at least one), at
 * most `max` and the cores online; 1 in the crash simulator's build (its
 * store trace is one thread's). */
unsigned par_threads(size_t units, size_t per, unsigned max);

/* fn on each of the n parts (consecutive, `size` bytes each), by up to
 * `threads` threads, the caller one of them, that take the parts in order
 * from a counter: a thread that starts late (waiting for a core) takes
 * fewer, and the caller takes any no thread could be started for. Returns
 * once all ended. */
void par_run(void (*fn)(void *part), void *parts, size_t size, size_t n, unsigned threads);

/* The first bytes of a libpmemobj pool file (PMDK's signature): pools of
 * the pmdk engine start with them, ours with POOL_MAGIC. */
#define PMDK_POOL_SIG "PMEMOBJ"

#endif
