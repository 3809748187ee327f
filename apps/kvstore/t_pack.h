/* t_pack.h - the 4-byte little-endian lengths and counts of the packed
 * records of hashes (t_hash.c), sets (t_set.c) and lists (list.c), in one
 * place. */
#ifndef KV_T_PACK_H
#define KV_T_PACK_H

#include <stdint.h>

static inline uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static inline void put32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}

#endif
