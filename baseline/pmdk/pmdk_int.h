/* pmdk_int.h - what the files of the pmdk engine share: its per-pool and
 * per-thread state, handles, and the volatile map of live objects.
 *
 * Handles
 * -------
 * PMDK maps a pool wherever mmap puts it, so a persistent pointer must not
 * be an address. A txn_obj * is HANDLE_BASE + the object's offset in its
 * pool (PMEMoid.off): the same in every run, and never dereferenced (txn.h
 * forbids it). The handle holds no pool: every call that takes one also
 * knows the pool (txn_obj_size(p, o), and the transaction's pool for
 * txn_open/read/write/free), so any number of pools can be open at once.
 * The price: a handle of another open pmdk pool that happens to name a
 * live offset of this one cannot be told apart from a handle of this pool.
 *
 * Handles are checked exactly: the pool keeps a volatile map with 2 bits
 * per 16-byte granule (PMDK object offsets are 16-byte aligned) saying
 * whether an object starts there, built at open by walking PMDK's heap.
 */
#ifndef PMTX_PMDK_INT_H
#define PMTX_PMDK_INT_H

#include <libpmemobj.h>
#include <stdint.h>

#include "atomics.h"
#include "engine.h"

#define HANDLE_BASE ((uintptr_t)1 << 44) /* 16 TiB: keeps NULL and small
                                             integers invalid handles */
#define GRAIN 16u                          /* PMDK object offset alignment */

/* PMDK type numbers: user objects (the root and the meta object are of
 * this type too), and the internal objects that iteration tells apart. */
#define TYPE_OBJ 0u
#define TYPE_META 0x4154454d58544d50ull    /* "PMTXMETA": struct meta */
#define TYPE_RESERVE 0x5652535258544d50ull /* "PMTXRSRV": the reserve */
#define TYPE_LAYOUT 0x5459414c58544d50ull  /* "PMTXLAYT": the meta object
                                              of pools made before seal */

/* Set by a thread while it opens a pool on a private view only to check it
 * (pmdk_pool.c): libpmemobj's flushes and fences reach nothing durable
 * then, so the libpmem functions (pmdk_libpmem.c) pass none of them on,
 * and a tracer never takes that mapping for the pool's. */
extern _Thread_local int pmdk_private_open;

/* What a pool keeps that PMDK does not: an internal object of its own. */
struct meta {
    uint64_t magic;     /* META_SEALED once eng_pool_seal ran; META_V1 in
                           pools of earlier versions (PMDK's root object is
                           their root, the TYPE_LAYOUT object their meta) */
    uint32_t threads;   /* txn_pool_opts.threads */
    uint32_t unused;
    uint64_t root_off;  /* the root object (META_SEALED) */
    uint64_t root_size; /* its payload bytes */
    uint64_t meta_off;  /* txn_meta_root() */
};
#define META_V1 0x3141544d4b444d50ull     /* "PMDKMTA1" */
#define META_SEALED 0x3241544d4b444d50ull /* "PMDKMTA2" */

/* p->eng: one open pool. p->base is the mapping (PMEMoid offsets count
 * from it), p->size its length, p->max_ctx the meta's threads. */
struct pmdk_pool {
    PMEMobjpool *pop;
    uint64_t uuid_lo;      /* PMEMoid.pool_uuid_lo of this pool */
    uint64_t meta_obj;     /* struct meta's offset, 0 if none */
    uint64_t root_off;
    size_t root_size;
    uint64_t meta_off;     /* txn_meta_root(), 0 if none */
    uint64_t reserve_off;  /* the intent log reserve, 0 if none */
    size_t reserve_size;
    uint64_t reserve_busy; /* a transaction holds it */
    uint64_t *state;       /* 2 bits per granule: ST_* */
    struct pool_birth *birth; /* a new pool's names until seal renames it
                                 into place (birth->fd: an fd of the file,
                                 not locked: PMDK holds the lock), then NULL */
};

/* tx->eng: one thread's context. */
struct pmdk_tx {
    int has_reserve;   /* holds the pool's reserve */
    struct vec allocs; /* uint64_t offsets allocated by it */
    struct vec frees;  /* uint64_t offsets it frees at commit */
};

static inline struct pmdk_pool *pmdk_of(const txn_pool *p)
{
    return p->eng;
}

static inline txn_obj *handle_of(uint64_t off)
{
    return (txn_obj *)(HANDLE_BASE + (uintptr_t)off);
}

/* The offset named by `o`, if it lies in the pool at all. */
static inline int offset_of(const txn_pool *p, const txn_obj *o, uint64_t *off)
{
    uintptr_t h = (uintptr_t)o;
    if (h < HANDLE_BASE || h - HANDLE_BASE >= p->size)
        return 0;
    *off = h - HANDLE_BASE;
    return 1;
}

static inline PMEMoid oid_of(const txn_pool *p, uint64_t off)
{
    return (PMEMoid){pmdk_of(p)->uuid_lo, off};
}

/* ---- the map of objects: 2 bits per GRAIN bytes of the pool */

enum {
    ST_FREE = 0,    /* no object starts here */
    ST_LIVE = 1,    /* a committed object */
    ST_NEW = 2,     /* allocated by a running transaction */
    ST_FREEING = 3, /* committed, freed by a running transaction */
};

static inline uint64_t *st_word(const txn_pool *p, uint64_t off, unsigned *shift)
{
    uint64_t g = off / GRAIN;
    *shift = (unsigned)(g % 32) * 2;
    return &pmdk_of(p)->state[g / 32];
}

static inline unsigned st_get(const txn_pool *p, uint64_t off)
{
    unsigned sh;
    uint64_t w = at_load(st_word(p, off, &sh));
    return (unsigned)(w >> sh) & 3u;
}

/* Moves `off` from state `from` to `to`; 0 if it was not in `from`. */
int st_move(txn_pool *p, uint64_t off, unsigned from, unsigned to);

/* Payload bytes of object `off`, or 0 when no object starts there. */
size_t obj_size_at(const txn_pool *p, uint64_t off);

#endif
