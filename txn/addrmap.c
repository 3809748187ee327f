/* addrmap.c - see addrmap.h. */
#include "addrmap.h"

#include <stdlib.h>
#include <string.h>

#include "txn.h"

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

int addrmap_grow(struct addrmap *m)
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

int addrmap_put(struct addrmap *m, uint64_t key, uint64_t val)
{
    uint64_t *v = addrmap_slot(m, key);
    if (!v)
        return TXN_E_NOMEM;
    *v = val;
    return 0;
}
