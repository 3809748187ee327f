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

/* Append n items from src (items of v's size); 0, or -1 when out of memory. */
static inline int vec_append(struct vec *v, const void *src, size_t n)
{
    if (n && vec_reserve(v, n))
        return -1;
    if (n)
        memcpy(v->a + v->isz * v->n, src, n * v->isz);
    v->n += n;
    return 0;
}

/* A 64-bit checksum over 8-byte words; detects torn and stale records.
 * Two independent lanes (even and odd words) keep the multiplier busy:
 * checksums sit on the undo log's hot path. Its steps are apart so that a
 * caller can sum words as it stores them (the log's records) and get the
 * same value as csum64 of the stored bytes. */
struct csum {
    uint64_t a, c; /* the lanes */
};

/* The state before the first word of n bytes, after h. */
static inline struct csum csum_start(uint64_t h, size_t n)
{
    return (struct csum){h ^ n, ~h};
}

/* Words w, v: the next 16 bytes, none of them the last, partial 16. */
static inline void csum_step(struct csum *s, uint64_t w, uint64_t v)
{
    s->a = (s->a ^ w) * 0x9e3779b97f4a7c15ull;
    s->c = (s->c ^ v) * 0xc2b2ae3d27d4eb4full;
    s->a ^= s->a >> 29;
    s->c ^= s->c >> 31;
}

/* The last 1-15 bytes, zero-padded to the words w, v. */
static inline void csum_tail(struct csum *s, uint64_t w, uint64_t v)
{
    s->a = (s->a ^ w) * 0x9e3779b97f4a7c15ull;
    s->c = (s->c ^ v) * 0xc2b2ae3d27d4eb4full;
}

static inline uint64_t csum_end(struct csum s)
{
    uint64_t a = s.a ^ (s.c ^ (s.c >> 29)) * 0xff51afd7ed558ccdull;
    return a ^ (a >> 32);
}

static inline uint64_t csum64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    struct csum s = csum_start(h, n);
    uint64_t w, v;
    for (; n >= 16; n -= 16, b += 16) {
        memcpy(&w, b, 8);
        memcpy(&v, b + 8, 8);
        csum_step(&s, w, v);
    }
    if (n) {
        unsigned char tail[16] = {0};
        memcpy(tail, b, n);
        memcpy(&w, tail, 8);
        memcpy(&v, tail + 8, 8);
        csum_tail(&s, w, v);
    }
    return csum_end(s);
}

#endif
