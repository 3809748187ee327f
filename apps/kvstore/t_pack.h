/* t_pack.h - the 4-byte little-endian lengths and counts of the packed
 * records of hashes (hash.c), sets (set.c), lists (list.c) and sorted
 * sets (zset.c), the growth of the arrays their records are decoded
 * into, a record read whole, Redis's integer syntax (an intset's
 * members, HINCRBY's fields, the commands' arguments) and its index
 * ranges (LRANGE, LTRIM, ZRANGE, ZREMRANGEBYRANK), in one place. */
#ifndef KV_T_PACK_H
#define KV_T_PACK_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

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

/* Redis's (start, end) over n items, negative counted from the end, as
 * LRANGE, LTRIM, ZRANGE and ZREMRANGEBYRANK read them: 0 none, 1 with
 * [*lo, *hi] inside [0, n). (GETRANGE clamps differently: t_string.c.) */
static inline int pack_span(long long start, long long end, size_t n, size_t *lo, size_t *hi)
{
    long long len = (long long)n;
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (start > end || start >= len)
        return 0;
    *lo = (size_t)start;
    *hi = (size_t)(end >= len ? len - 1 : end);
    return 1;
}

/* A value read whole by pack_read: its bytes (malloc'd: free p). */
struct pack_val {
    char *p;
    size_t n;
    int oom;
};

static inline void pack_val_cb(void *arg, const char *v, size_t n)
{
    struct pack_val *x = arg;
    x->n = n;
    if (v && !(x->p = malloc(n ? n : 1)))
        x->oom = 1;
    else if (v)
        memcpy(x->p, v, n);
}

/* key's value of any type into *x and *type: 1 found, 0 missing, <0. */
static inline int pack_read(kv_txn *t, struct kv_slice key, struct pack_val *x, unsigned *type)
{
    memset(x, 0, sizeof *x);
    int rc = kv_txn_read(t, key, pack_val_cb, x, type);
    return rc > 0 && x->oom ? TXN_E_NOMEM : rc;
}

/* Redis's integer syntax (its string2ll: strict decimal within the type,
 * an optional '-' then 1-9, or "0" alone; no "-0", "007", "+5" or
 * spaces, which strtoll takes): 0 and *out, or -1. */
static inline int pack_ll(const char *p, size_t n, long long *out)
{
    char s[24];
    if (n == 0 || n >= sizeof s)
        return -1;
    memcpy(s, p, n);
    s[n] = 0;
    const char *d = s + (s[0] == '-');
    if ((*d < '1' || *d > '9') && !(n == 1 && s[0] == '0'))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

#endif
