/* redo1_log.h - the on-media format of redo1's log, for the engine and
 * for what reads pools from outside it (tests).
 *
 * A log slot's first segment and the heap chunks chained to it (pool.h's
 * seg_hdr) hold the parts of transactions' logs, each at a 64-byte
 * boundary after the segment's header: a head, then `len` bytes of
 * entries in wlog.h's format (word, range, ALLOC and FREE entries). A
 * transaction's log is parts 0 .. nparts-1 of one version, all in one
 * slot; it is committed when every part is valid, or, when its last part
 * is a prepare part (R1_PREP_MAGIC), when its slot also holds its done
 * part or its coordinator says so. */
#ifndef PMTX_REDO1_LOG_H
#define PMTX_REDO1_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define R1_PART_MAGIC 0x7265646f31706172ull /* "redo1par" */

/* A prepared transaction (txn_join; docs/join.md): its log's last part,
 * idx nparts - 1, has this magic and one range entry whose address word
 * is the coordinator's uuid and whose bytes are the context's index (8
 * bytes) then the coordinator's file and layout, each NUL-ended
 * (engine.h: join_names_put). Its other parts are R1_PART_MAGIC ones, so
 * a library that knows no prepared parts finds the log incomplete. */
#define R1_PREP_MAGIC 0x7265646f31707270ull /* "redo1prp" */

/* A prepared transaction committed (its coordinator did): a part of no
 * entries (idx 0 of 1) of the prepared version, written after it in the
 * same slot's ring. */
#define R1_DONE_MAGIC 0x7265646f31646f6eull /* "redo1don" */

struct r1_part {
    uint64_t magic;   /* R1_PART_MAGIC, R1_PREP_MAGIC or R1_DONE_MAGIC */
    uint64_t version; /* the transaction's, in the pool's one order */
    uint64_t water;   /* every transaction of version <= water had its
                         data durable when this part was written */
    uint32_t idx;     /* this part, of */
    uint32_t nparts;  /* the transaction's parts */
    uint64_t len;     /* bytes of entries */
    uint64_t csum;    /* r1_part_csum() */
};
_Static_assert(sizeof(struct r1_part) == 48, "part head size");

/* The checksum of a part: its head's words seed four lanes, then each
 * 16 bytes of entries go to one lane, the lanes taking them in turn so
 * that the multiplier is not waited on (it runs at every commit over the
 * whole log). 64 bits: a torn part, whose lines hold a mix of its bytes
 * and older ones, passes with a chance of about 2^-64. */
static inline uint64_t r1_word(const unsigned char *b)
{
    uint64_t w;
    memcpy(&w, b, 8);
    return w;
}

/* Each word through its own multiply (Q2: no change of entries passes).
 * One multiply of l ^ w ^ rot32(x) lost a pair of equal words of a fill
 * (0x0404...) torn back to zeros: rot32 maps such a word to itself, the
 * changes cancelled, and recovery replayed a torn log (joinsim-redo1
 * --seed 1796594719). */
static inline uint64_t r1_mix(uint64_t l, uint64_t w, uint64_t x, uint64_t k)
{
    l = (l ^ w) * k;
    l ^= l >> 29;
    l = (l ^ x) * k;
    return l ^ l >> 29;
}

static inline uint64_t r1_part_csum(const struct r1_part *h, const void *entries)
{
    const uint64_t k0 = 0x9e3779b97f4a7c15ull, k1 = 0xc2b2ae3d27d4eb4full,
                   k2 = 0xff51afd7ed558ccdull, k3 = 0xc4ceb9fe1a85ec53ull;
    uint64_t l0 = r1_mix(h->magic, h->version, h->len, k0);
    uint64_t l1 = r1_mix(~h->magic, h->water, (uint64_t)h->idx << 32 | h->nparts, k1);
    uint64_t l2 = k2, l3 = k3;
    const unsigned char *b = (const unsigned char *)entries, *end = b + h->len;
    for (; end - b >= 64; b += 64) {
        l0 = r1_mix(l0, r1_word(b), r1_word(b + 8), k0);
        l1 = r1_mix(l1, r1_word(b + 16), r1_word(b + 24), k1);
        l2 = r1_mix(l2, r1_word(b + 32), r1_word(b + 40), k2);
        l3 = r1_mix(l3, r1_word(b + 48), r1_word(b + 56), k3);
    }
    for (; end - b >= 16; b += 16)
        l0 = r1_mix(l0, r1_word(b), r1_word(b + 8), k0);
    if (end > b) /* lengths are multiples of 8 */
        l1 = r1_mix(l1, r1_word(b), 0, k1);
    uint64_t x = l0 ^ l1 * k2 ^ l2 * k3 ^ l3 * k0;
    x ^= x >> 31;
    return x * k1 ^ x >> 29;
}

#endif
