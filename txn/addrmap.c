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
    m->slots = calloc(m->cap, sizeof *m->slots);
    m->gen = 1;
    if (!m->slots)
        return TXN_E_NOMEM;
    return 0;
}

void addrmap_free(struct addrmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

void addrmap_clear(struct addrmap *m)
{
    m->n = 0;
    if (++m->gen == 0) {
        for (size_t i = 0; i < m->cap; i++)
            m->slots[i].gen = 0;
        m->gen = 1;
    }
}

uint64_t *addrmap_find(const struct addrmap *m, uint64_t key)
{
    if (!m->n)
        return NULL;
    for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
        struct addrmap_slot *e = &m->slots[i];
        if (e->gen != m->gen)
            return NULL;
        if (e->key == key)
            return &e->val;
    }
}

static int grow(struct addrmap *m)
{
    struct addrmap big;
    if (addrmap_init(&big, m->cap * 2))
        return TXN_E_NOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].gen == m->gen)
            addrmap_put(&big, m->slots[i].key, m->slots[i].val);
    addrmap_free(m);
    *m = big;
    return 0;
}

uint64_t *addrmap_slot(struct addrmap *m, uint64_t key)
{
    if ((m->n + 1) * 2 > m->cap && grow(m))
        return NULL;
    size_t i = slot_of(m, key);
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

int addrmap_put(struct addrmap *m, uint64_t key, uint64_t val)
{
    uint64_t *v = addrmap_slot(m, key);
    if (!v)
        return TXN_E_NOMEM;
    *v = val;
    return 0;
}
