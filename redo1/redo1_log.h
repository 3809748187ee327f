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
#include <string.h>

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

/* A 64-bit checksum of n bytes (a multiple of 8) in four independent
 * lanes, so that the multiplier is not waited on word after word: it is
 * computed at every commit over the whole log. */
static inline uint64_t r1_mix(uint64_t l, const unsigned char *b, uint64_t k)
{
    uint64_t w;
    memcpy(&w, b, 8);
    l = (l ^ w) * k;
    return l ^ l >> 29;
}

static inline uint64_t r1_csum(uint64_t h, const void *p, size_t n)
{
    const uint64_t k0 = 0x9e3779b97f4a7c15ull, k1 = 0xc2b2ae3d27d4eb4full,
                   k2 = 0xff51afd7ed558ccdull, k3 = 0xc4ceb9fe1a85ec53ull;
    const unsigned char *b = (const unsigned char *)p, *end = b + n;
    uint64_t l0 = h ^ n, l1 = ~h, l2 = h * k0, l3 = h ^ k1;
    for (; end - b >= 32; b += 32) {
        l0 = r1_mix(l0, b, k0);
        l1 = r1_mix(l1, b + 8, k1);
        l2 = r1_mix(l2, b + 16, k2);
        l3 = r1_mix(l3, b + 24, k3);
    }
    if (end - b >= 8)
        l0 = r1_mix(l0, b, k0);
    if (end - b >= 16)
        l1 = r1_mix(l1, b + 8, k1);
    if (end - b >= 24)
        l2 = r1_mix(l2, b + 16, k2);
    uint64_t x = l0 ^ l1 * k2 ^ l2 * k3 ^ l3 * k0;
    x ^= x >> 31;
    return x * k1 ^ x >> 29;
}

/* Over the head's first 40 bytes and the entries. */
static inline uint64_t r1_part_csum(const struct r1_part *h, const void *entries)
{
    return r1_csum(r1_csum(R1_PART_MAGIC, h, offsetof(struct r1_part, csum)), entries, h->len);
}

#endif
