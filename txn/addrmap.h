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
/* The value slot of `key`, or NULL. */
uint64_t *addrmap_find(const struct addrmap *m, uint64_t key);
/* Insert or update; TXN_E_NOMEM when it cannot grow. */
int addrmap_put(struct addrmap *m, uint64_t key, uint64_t val);

/* The value slot of `key`, inserted with value 0 when missing (one hash
 * for a lookup that usually updates); NULL when it cannot grow. */
uint64_t *addrmap_slot(struct addrmap *m, uint64_t key);

#endif
