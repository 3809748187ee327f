/* redo1_log.h - the on-media format of redo1's log, for the engine and
 * for what reads pools from outside it (tests).
 *
 * A log slot's first segment and the heap chunks chained to it (pool.h's
 * seg_hdr) hold the parts of transactions' logs, each at a 64-byte
 * boundary after the segment's header: a head, then `len` bytes of
 * entries in wlog.h's format (word, range, ALLOC and FREE entries). A
 * transaction's log is parts 0 .. nparts-1 of one version, all in one
 * slot; it is committed when every part is valid. */
#ifndef PMTX_REDO1_LOG_H
#define PMTX_REDO1_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define R1_PART_MAGIC 0x7265646f31706172ull /* "redo1par" */

struct r1_part {
    uint64_t magic;   /* R1_PART_MAGIC */
    uint64_t version; /* the transaction's, in the pool's one order */
    uint64_t water;   /* every transaction of version <= water had its
                         data durable when this part was written */
    uint32_t idx;     /* this part, of */
    uint32_t nparts;  /* the transaction's parts */
    uint64_t len;     /* bytes of entries */
    uint64_t csum;    /* r1_part_csum() */
};
_Static_assert(sizeof(struct r1_part) == 48, "part head size");

/* Over the head's first 40 bytes and the entries. */
static inline uint64_t r1_part_csum(const struct r1_part *h, const void *entries)
{
    return csum64(csum64(R1_PART_MAGIC, h, offsetof(struct r1_part, csum)), entries, h->len);
}

#endif
