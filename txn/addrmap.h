/* addrmap.h - a volatile open-addressing map from addresses to 64-bit
 * values, cleared in O(1) between transactions by a generation counter.
 * Undo uses it for ranges already logged, redo for each object's latest
 * record. */
#ifndef PMTX_ADDRMAP_H
#define PMTX_ADDRMAP_H

#include <stddef.h>
#include <stdint.h>

/* A key, its value and its generation side by side: a probe of a map far
 * larger than the caches costs one miss, not one per array. */
struct addrmap_slot {
    uint64_t key;
    uint64_t val;
    uint32_t gen; /* the entry is live when gen == the map's gen */
};

struct addrmap {
    struct addrmap_slot *slots;
    size_t cap; /* power of two */
    size_t n;   /* live entries */
    uint32_t gen;
};

int addrmap_init(struct addrmap *m, size_t cap);
void addrmap_free(struct addrmap *m);
void addrmap_clear(struct addrmap *m);
/* Insert or update; TXN_E_NOMEM when it cannot grow. */
int addrmap_put(struct addrmap *m, uint64_t key, uint64_t val);
/* Doubles the capacity: 0, or nonzero when out of memory. */
int addrmap_grow(struct addrmap *m);

/* The lookups are inline: undo probes its map of objects logged whole at
 * every open and way fill, and the call's register saves cost about as
 * much as the probe (docs/access.md). */
static inline size_t addrmap__at(const struct addrmap *m, uint64_t key)
{
    return (size_t)(((key >> 3) * 0x9e3779b97f4a7c15ull) >> 17) & (m->cap - 1);
}

/* The value slot of `key`, or NULL. */
static inline uint64_t *addrmap_find(const struct addrmap *m, uint64_t key)
{
    if (!m->n)
        return NULL;
    for (size_t i = addrmap__at(m, key);; i = (i + 1) & (m->cap - 1)) {
        struct addrmap_slot *e = &m->slots[i];
        if (e->gen != m->gen)
            return NULL;
        if (e->key == key)
            return &e->val;
    }
}

/* The value slot of `key`, inserted with value 0 when missing (one hash
 * for a lookup that usually updates); NULL when it cannot grow. */
static inline uint64_t *addrmap_slot(struct addrmap *m, uint64_t key)
{
    if ((m->n + 1) * 2 > m->cap && addrmap_grow(m))
        return NULL;
    size_t i = addrmap__at(m, key);
    struct addrmap_slot *e;
    while ((e = &m->slots[i])->gen == m->gen && e->key != key)
        i = (i + 1) & (m->cap - 1);
    if (e->gen != m->gen) {
        e->gen = m->gen;
        e->key = key;
        e->val = 0;
        m->n++;
    }
    return &e->val;
}

#endif
