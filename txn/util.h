/* util.h - small volatile helpers: a growable array, a 64-bit checksum. */
#ifndef PMTX_UTIL_H
#define PMTX_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A growable array of fixed-size items. */
struct vec {
    char *a;
    size_t n, cap, isz;
};

static inline void vec_init(struct vec *v, size_t isz)
{
    v->a = NULL;
    v->n = v->cap = 0;
    v->isz = isz;
}

static inline void vec_free(struct vec *v)
{
    free(v->a);
    vec_init(v, v->isz);
}

/* Room for `extra` more items; 0, or -1 when out of memory. */
static inline int vec_reserve(struct vec *v, size_t extra)
{
    if (v->cap - v->n >= extra)
        return 0;
    size_t cap = v->cap ? v->cap * 2 : 16;
    while (cap - v->n < extra)
        cap *= 2;
    char *a = realloc(v->a, cap * v->isz);
    if (!a)
        return -1;
    v->a = a;
    v->cap = cap;
    return 0;
}

/* Returns a pointer to a new item at the end, or NULL when out of memory. */
static inline void *vec_push(struct vec *v)
{
    if (vec_reserve(v, 1))
        return NULL;
    return v->a + v->isz * v->n++;
}

static inline void *vec_at(const struct vec *v, size_t i)
{
    return v->a + v->isz * i;
}

/* A 64-bit checksum over 8-byte words; detects torn and stale records. */
static inline uint64_t csum64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t w;
    for (; n >= 8; n -= 8, b += 8) {
        memcpy(&w, b, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    if (n) {
        w = 0;
        memcpy(&w, b, n);
        h = (h ^ w ^ ((uint64_t)n << 56)) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return h ^ (h >> 32);
}

#endif
