/* pool.h - on-media layout of a pool file and the format's part of the
 * volatile pool handle.
 *
 * A pool file, mapped at the address recorded in its header:
 *
 *   [0, 4096)            pool_hdr: immutable after creation, checksummed
 *   [slots_off, +n*sz)   one log slot per thread: slot_hdr, seg_hdr, records
 *   [ctab_off, ...)      chunk table: one 8-byte entry per heap chunk
 *   [heap_off, ...)      heap: CHUNK_SIZE chunks (runs, large objects, logs)
 *
 * A pool grows (format 4): `size` and `nchunks` are what it may grow to,
 * `heap_chunks` the chunks it has. The chunk table has room for every
 * chunk it may have; the file ends with its last chunk, and the table's
 * part past the chunks it has is a hole of the file (nothing written, no
 * space taken). Its range of addresses is its own from creation; while
 * open it reserves the 1 GiB slots of it that its bytes touch (pool.c's
 * window), the file mapped over the part it has: growing reserves the
 * next slots, if no other open pool holds them, and maps more of the file
 * after it, so objects never move. A growth's one commit point is heap_chunks's
 * store: a crash before it leaves the pool at its old size (a longer file
 * whose tail is ignored), after it at the new one, whose chunks are FREE
 * (their entries read zero, G1). A format 3 pool has heap_chunks ==
 * nchunks and never grows.
 *
 * G1 Chunk table entries past heap_chunks are zero: nothing writes them
 *    (a chunk is handed out only after the growth that adds it commits).
 *    pool_grow checks the entries it adds and refuses to grow over a
 *    nonzero one.
 *
 * Why a fixed address, not offsets: persistent structures (hash chains,
 * Masstree nodes) then hold plain pointers, and reading one costs a load,
 * as in the runtimes we compare against. The pool is mapped with
 * MAP_FIXED_NOREPLACE at a base chosen at creation in a range that the
 * kernel's mmap area and the sanitizers' shadow memory leave alone; if the
 * range is taken when the pool is opened, open fails with TXN_E_BUSY
 * instead of relocating anything.
 */
#ifndef PMTX_POOL_H
#define PMTX_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "engine.h" /* SLOT_* */
#include "handle.h"
#include "txn.h"
#include "util.h"

#define POOL_FORMAT 4u /* 2: the layout record; 3: slot tags, run headers zeroed;
                          4: pools that grow (heap_chunks) */
#define POOL_FORMAT_FIXED 3u /* still read: a pool that does not grow */
#define POOL_FORMAT_UNTAGGED 2u /* still read: its slots have no tags */
#define CHUNK_SIZE (64u * 1024u)
/* The smallest heap of a new pool: each size class in use takes a chunk
 * of its own, so fewer chunks leave a pool that takes the root and little
 * else (4 chunks: the key-value store's first SET failed). */
#define MIN_CHUNKS 16u
#define LAYOUT_MAX 64u
#define ENGINE_MAX POOL_ENGINE_MAX

struct pool_hdr {
    uint64_t magic;            /* POOL_MAGIC */
    uint32_t format;           /* POOL_FORMAT */
    uint32_t hdr_size;         /* sizeof(struct pool_hdr) */
    char layout[LAYOUT_MAX];   /* NUL-terminated layout name */
    char engine[ENGINE_MAX];   /* engine that writes this pool */
    uint64_t size;             /* bytes of the pool (= file size) */
    uint64_t base;             /* address the pool is mapped at */
    uint64_t uuid;             /* random at creation */
    uint64_t nslots;           /* log slots */
    uint64_t slot_size;        /* bytes per slot (hdr + first segment) */
    uint64_t slots_off;        /* offset of slot 0 */
    uint64_t ctab_off;         /* offset of the chunk table */
    uint64_t nchunks;          /* heap chunks */
    uint64_t heap_off;         /* offset of chunk 0, CHUNK_SIZE aligned */
    uint64_t root;             /* address of the root object */
    uint64_t root_size;        /* its payload bytes */
    uint64_t layout_rec;       /* address of the layout record object
                                  (layout/layout.c): the meta object,
                                  txn_meta_root(), made with the root */
    uint64_t checksum;         /* csum64 of every byte before this field */
    /* mutable, not checksummed: */
    uint64_t boot;             /* opens so far; tags volatile-only fields
                                  that engines keep in objects */
    uint64_t eng_words[8];     /* mutable words owned by the engine (incll:
                                  durable epoch, failed epochs) */
    uint64_t heap_chunks;      /* format 4: chunks the heap has, <= nchunks */
    uint8_t pad[POOL_HDR_SIZE - 280];
};
_Static_assert(sizeof(struct pool_hdr) == POOL_HDR_SIZE, "pool_hdr size");
_Static_assert(offsetof(struct pool_hdr, engine) == POOL_ENGINE_OFF, "pool_hdr engine");

/* The slot's transaction state word: version and state in one 8-byte
 * store, so no crash can pair a state with another transaction. */
static inline uint64_t slot_state(uint64_t version, unsigned state)
{
    return version << 2 | state;
}

/* First line of a log slot. */
struct slot_hdr {
    uint64_t next_version; /* versions below it may appear in old records */
    uint64_t tail;         /* byte offset of the log's end, lagging <= 1
                              record; a hint recovery checks, see log.c */
    uint64_t tail_version; /* the transaction `tail` belongs to */
    uint64_t state;        /* slot_state(version, SLOT_*) of redo and cow */
    uint64_t tag;          /* slot_tag(): written at creation, never 0, so
                              that a zeroed or overwritten slot header is
                              told from a slot never used */
    uint64_t pad[3];
};
_Static_assert(sizeof(struct slot_hdr) == 64, "slot_hdr is one line");

static inline uint64_t slot_tag(const struct pool_hdr *h, uint64_t i)
{
    return csum64(h->uuid, &i, sizeof i) | 1;
}

/* First line of a log segment (the slot's first one or a heap chunk). */
struct seg_hdr {
    uint64_t next; /* address of the next segment, 0 at the end */
    uint64_t pad[7];
};
_Static_assert(sizeof(struct seg_hdr) == 64, "seg_hdr is one line");

struct alloc_state;

/* pmtx's format's part of an open pool (POOL_FMT(p): allocated with it
 * by the front end, eng_pool_fmt_size). "open" means set
 * by the open or create, before any context exists, and only read until
 * the close, which runs when no other call is in progress. */
struct fmt_pool {
    int fd;                   /* open: kept open, holds the flock */
    struct pool_birth *birth; /* open: a new pool's names until its seal
                                 renames it into place, then NULL */
    struct pool_hdr *hdr;     /* open: = base */
    struct alloc_state *al;   /* open (its fields: alloc.c's lock) */
    struct vec *open_recs;    /* open only: while txn_pool_open recovers:
                                 each slot's validated records (nslots
                                 vectors of struct log_rec *), for an
                                 engine that recovers all slots at once */
    unsigned recovered_slots; /* open only: slots whose transaction open
                                 recovered */
    size_t reserved;          /* bytes of addresses reserved at base: set
                                 at open, then extended by a growth, one
                                 at a time (pool_grow), read by the close */
    int view;                 /* open: a private view (txn_pool_view) */
};

static inline struct slot_hdr *pool_slot(txn_pool *p, size_t i)
{
    return (struct slot_hdr *)(p->base + POOL_FMT(p)->hdr->slots_off +
                               i * POOL_FMT(p)->hdr->slot_size);
}

/* Bytes of the pool mapped now: p->size, which a growth raises while
 * other threads run (pool_grow). */
static inline size_t pool_size_now(const txn_pool *p)
{
    return __atomic_load_n(&p->size, __ATOMIC_ACQUIRE);
}

static inline int pool_contains(const txn_pool *p, const void *a, size_t n)
{
    uintptr_t x = (uintptr_t)a, b = (uintptr_t)p->base, size = pool_size_now(p);
    return x >= b + POOL_FMT(p)->hdr->heap_off && x <= b + size && n <= b + size - x;
}

/* The chunks the heap has (format 3: all of nchunks). */
static inline size_t pool_heap_chunks(const txn_pool *p)
{
    const struct pool_hdr *h = POOL_FMT(p)->hdr;
    return h->format > POOL_FORMAT_FIXED ? __atomic_load_n(&h->heap_chunks, __ATOMIC_ACQUIRE)
                                         : h->nchunks;
}

/* Grow the heap by `want` chunks or more (doubling it when it may), up to
 * nchunks (fewer than `want` when that is all that is left); one call at
 * a time (alloc.c's grow: its `growing`, under the allocator's lock, which
 * is let go during the call). Returns the chunks added, or 0: the pool is
 * at its maximum, the filesystem is full, another pool's addresses
 * follow, or G1 does not hold. */
size_t pool_grow(txn_pool *p, size_t want);

/* Give the bytes of heap chunks [ci, ci + n), FREE, back to the
 * filesystem (a hole in the file; they read zero); the caller holds the
 * allocator's lock, so that no one takes them meanwhile. 0, or
 * TXN_E_NOTSUP (a view; a filesystem that punches no holes), TXN_E_IO. */
int pool_discard(txn_pool *p, size_t ci, size_t n);

/* The bytes of heap chunks [ci, ci + n) taken from the filesystem again
 * (they may be holes: pool_discard, or a trim before the open). 0, or
 * <0 when the filesystem has no room. */
int pool_fill(txn_pool *p, size_t ci, size_t n);

#endif
