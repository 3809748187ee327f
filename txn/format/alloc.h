/* alloc.h - the persistent allocator shared by every engine.
 *
 * The heap is cut into CHUNK_SIZE chunks, each described by one 8-byte
 * entry of the chunk table: FREE, a RUN of one size class (a bitmap in the
 * chunk's first 512 bytes, then equal blocks), the head of a LARGE object that
 * spans n chunks (then CONT entries), or a LOG segment.
 *
 * Persistence protocol (see the engines for where each step sits):
 *  - reserving a block is volatile only (per-thread caches, shadow bitmaps);
 *  - the engine logs ALLOC/FREE records and, once they are durable, calls
 *    alloc_apply() to set/clear the persistent bits; a barrier the engine
 *    issues anyway makes them durable. There is no barrier per alloc or
 *    free.
 *  - recovery rolls an uncommitted ALLOC/FREE back (alloc_apply with the
 *    inverse op) or replays a committed one; both are idempotent.
 *  - turning a FREE chunk into a RUN or a LOG segment costs one barrier
 *    (its bitmap or header must be clean before the entry says what it is).
 *  - a RUN none of whose blocks is in use turns back into a FREE chunk when
 *    FREE chunks run out, one barrier each (alloc.c, A1-A4).
 */
#ifndef PMTX_ALLOC_H
#define PMTX_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h" /* alloc_block_size */
#include "pool.h"

#define ALLOC_CLASSES 36
#define ALLOC_CACHE 64 /* blocks per class in a thread cache */

/* Per-thread cache of free blocks, one stack per class. */
struct alloc_cache {
    uint32_t n[ALLOC_CLASSES];
    unsigned drain; /* the allocator's request to give blocks back, last seen */
    void *blk[ALLOC_CLASSES][ALLOC_CACHE];
};

enum alloc_op { ALLOC_SET = 1, ALLOC_CLEAR = 2 };

/* Pool creation: the chunk table says every chunk is FREE (persisted). */
void alloc_format(txn_pool *p);

/* Open: check the chunk table (TXN_E_CORRUPT when it is not sane); writes
 * nothing. */
int alloc_check(txn_pool *p);

/* Open, after recovery: mark the chunks of log chains (`segs`, addresses)
 * as LOG and every other LOG chunk FREE, then build the volatile state. */
int alloc_open(txn_pool *p, const struct vec *segs);
void alloc_close(txn_pool *p);

/* Reserve a block of at least n bytes (volatile only), zero-filled but not
 * flushed. Returns 0, *blk and its usable size, or TXN_E_NOSPACE. With no
 * FREE chunk left, c's blocks go back to the pool, and every other cache's
 * at its own next reserve. `spare_ok`: the caller's transaction frees more
 * than it reserves and may take the pool's last FREE chunks (A5, alloc.c). */
int alloc_reserve(txn_pool *p, struct alloc_cache *c, size_t n, int spare_ok, void **blk,
                  size_t *usable);

/* Give a block back to the volatile free lists (after an aborted
 * reservation, or once a committed free is durable). */
void alloc_release(txn_pool *p, struct alloc_cache *c, void *blk);

/* Volatile marks of the blocks open transactions hold (A6 in alloc.c):
 * what tx.c asks per block instead of searching its lists. */
enum alloc_mark { MARK_NEW = 1, MARK_FREED = 2 };

/* Set mark m of the block at blk; 1 if it was set already (or blk is no
 * place a block can start), else 0. Any thread; atomic. */
int alloc_mark(txn_pool *p, const void *blk, enum alloc_mark m);
void alloc_unmark(txn_pool *p, const void *blk, enum alloc_mark m);
/* Whether any of the marks m (MARK_* or'ed) of blk is set. */
int alloc_marked(txn_pool *p, const void *blk, unsigned m);

/* Return a thread cache's blocks to the pool (thread exit). */
void alloc_cache_drain(txn_pool *p, struct alloc_cache *c);

/* Set (ALLOC_SET) or clear the persistent "allocated" state of the block
 * at blk of `size` usable bytes, and flush it if `flush` (no fence).
 * Idempotent. */
void alloc_apply(txn_pool *p, uint64_t blk, uint64_t size, enum alloc_op op,
                 int flush);

/* Flush the persistent metadata alloc_apply() changes for that block. */
void alloc_flush_meta(txn_pool *p, uint64_t blk, uint64_t size);

/* A new LOG segment chunk with a zeroed, durable seg_hdr (one barrier). */
int alloc_log_chunk(txn_pool *p, void **seg);

/* Call fn for every persistently allocated block (start, usable size);
 * crash-simulator oracles compare them with what is reachable. */
void alloc_foreach_live(txn_pool *p, void (*fn)(void *blk, size_t size, void *arg),
                        void *arg);

/* The heap's use in info (txn_pool_inspect): heap size, used, free and
 * log bytes, live objects and free bytes by size class, the bytes of FREE
 * chunks and of the longest stretch of them. Reads only; TXN_E_CORRUPT
 * (and the words) for a run whose bitmap marks blocks it does not have. */
int alloc_describe(txn_pool *p, txn_pool_info *info);

/* Every FREE chunk's bytes given back to the filesystem (pool_discard),
 * the empty runs turned FREE first, TRIM_STEP chunks at a time under the
 * lock; the other threads are asked for their cached blocks, which their
 * next trim finds. 0 or <0. */
int alloc_trim(txn_pool *p);

#endif
