/* addrmap.c - see addrmap.h. */
#include "addrmap.h"

#include <stdlib.h>
#include <string.h>

#include "txn.h"

static inline size_t slot_of(const struct addrmap *m, uint64_t key)
{
    return (size_t)(((key >> 3) * 0x9e3779b97f4a7c15ull) >> 17) & (m->cap - 1);
}

int addrmap_init(struct addrmap *m, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->cap = cap < 16 ? 16 : cap;
    m->keys = malloc(m->cap * sizeof *m->keys);
    m->vals = malloc(m->cap * sizeof *m->vals);
    m->gens = calloc(m->cap, sizeof *m->gens);
    m->gen = 1;
    if (!m->keys || !m->vals || !m->gens) {
        addrmap_free(m);
        return TXN_E_NOMEM;
    }
    return 0;
}

void addrmap_free(struct addrmap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->gens);
    memset(m, 0, sizeof *m);
}

void addrmap_clear(struct addrmap *m)
{
    m->n = 0;
    if (++m->gen == 0) {
        memset(m->gens, 0, m->cap * sizeof *m->gens);
        m->gen = 1;
    }
}

uint64_t *addrmap_find(const struct addrmap *m, uint64_t key)
{
    if (!m->n)
        return NULL;
    for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (m->gens[i] != m->gen)
            return NULL;
        if (m->keys[i] == key)
            return &m->vals[i];
    }
}

static int grow(struct addrmap *m)
{
    struct addrmap big;
    if (addrmap_init(&big, m->cap * 2))
        return TXN_E_NOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->gens[i] == m->gen)
            addrmap_put(&big, m->keys[i], m->vals[i]);
    addrmap_free(m);
    *m = big;
    return 0;
}

uint64_t *addrmap_slot(struct addrmap *m, uint64_t key)
{
    if ((m->n + 1) * 2 > m->cap && grow(m))
        return NULL;
    size_t i = slot_of(m, key);
    while (m->gens[i] == m->gen && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    if (m->gens[i] != m->gen) {
        m->gens[i] = m->gen;
        m->keys[i] = key;
        m->vals[i] = 0;
        m->n++;
    }
    return &m->vals[i];
}

int addrmap_put(struct addrmap *m, uint64_t key, uint64_t val)
{
    uint64_t *v = addrmap_slot(m, key);
    if (!v)
        return TXN_E_NOMEM;
    *v = val;
    return 0;
}
