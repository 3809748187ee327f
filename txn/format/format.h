/* format.h - pmtx's pool format (this folder): the per-thread
 * transaction context that every engine extends, and the helpers engines
 * share for allocation and deferred work. */
#ifndef PMTX_FORMAT_H
#define PMTX_FORMAT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "addrmap.h"
#include "alloc.h"
#include "common.h"
#include "log.h"
#include "pool.h"
#include "util.h"

/* pmtx's format's part of a context (TX_FMT(tx): allocated with it by
 * the front end, eng_tx_fmt_size): used by its thread only. */
struct fmt_tx {
    struct slot_hdr *slot;
    struct log log;           /* write position in the slot's log */
    uint64_t version;         /* of the running (or last) transaction */
    uint64_t version_end;     /* versions below it are ours to use */
    struct vec allocs;        /* struct tx_block */
    struct vec frees;         /* struct tx_block */
    struct alloc_cache cache;
    size_t reserved_bytes;    /* of the blocks in allocs */
    size_t freed_bytes;       /* of the blocks in frees (A5 in alloc.c) */
};

/* Next transaction version of this context; claims a fresh range (one
 * barrier) when the current one is used up. */
void tx_claim_versions(struct txn *tx); /* the fresh range, durably */
static inline uint64_t tx_next_version(struct txn *tx)
{
    if (TX_FMT(tx)->version + 1 >= TX_FMT(tx)->version_end)
        tx_claim_versions(tx);
    return ++TX_FMT(tx)->version;
}

#endif
