/* t_pack.h - the 4-byte little-endian lengths and counts of the packed
 * records of hashes (t_hash.c), sets (t_set.c), lists (list.c) and sorted
 * sets (zset.c), and the growth of the arrays their records are decoded
 * into, in one place. */
#ifndef KV_T_PACK_H
#define KV_T_PACK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "txn.h"

/* On a little-endian host the fields are copied as they are (byte loops
 * showed in a ZADD's time: docs/kvstore.md, section 24). */
static inline uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t v;
    memcpy(&v, u, sizeof v);
    return v;
#else
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
#endif
}

static inline void put32(char *p, uint32_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, sizeof v);
#else
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
#endif
}

/* Room for n elements of `size` bytes in the array *e of *cap elements,
 * its capacity doubled from 8: 0, or TXN_E_NOMEM (*e and *cap as they
 * were). */
static inline int pack_room(void **e, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap ? *cap : 8;
    while (c < n)
        c *= 2;
    void *p = realloc(*e, c * size);
    if (!p)
        return TXN_E_NOMEM;
    *e = p;
    *cap = c;
    return 0;
}

#endif
