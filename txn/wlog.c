/* wlog.c - the DRAM write log of txn.h's inline paths (wlog.h). */
#include "wlog.h"

#include <stdlib.h>
#include <string.h>

#include "handle.h"

/* The inline paths append a word entry (2 words) while wl < wl_end. */
static void publish(struct txn *tx, struct wlog *l, size_t used)
{
    tx->hot.wl = l->a + used;
    tx->hot.wl0 = l->a;
    tx->hot.wl_end = l->a + l->cap - 1;
}

int wlog_init(struct txn *tx, struct wlog *l, size_t words)
{
    l->cap = words < 16 ? 16 : words;
    if (!(l->a = malloc(l->cap * sizeof *l->a)))
        return TXN_E_NOMEM;
    publish(tx, l, 0);
    return 0;
}

void wlog_free(struct wlog *l)
{
    free(l->a);
    l->a = NULL;
    l->cap = 0;
}

int wlog_reserve(struct txn *tx, struct wlog *l, size_t words)
{
    size_t used = wlog_used(tx, l);
    if (l->cap - used >= words)
        return 0;
    size_t cap = l->cap * 2;
    while (cap - used < words)
        cap *= 2;
    uint64_t *a = realloc(l->a, cap * sizeof *a);
    if (!a)
        return TXN_E_NOMEM;
    l->a = a;
    l->cap = cap;
    publish(tx, l, used);
    return 0;
}

int wlog_append(struct txn *tx, struct wlog *l, char *a, const void *src, size_t n)
{
    if (n == 8 && !((uintptr_t)a & 7)) {
        if (wlog_reserve(tx, l, 2))
            return TXN_E_NOMEM;
        uint64_t *e = tx->hot.wl;
        e[0] = (uint64_t)(uintptr_t)a;
        memcpy(&e[1], src, 8);
        tx->hot.wl = e + 2;
        return 0;
    }
    for (size_t done = 0; done < n;) {
        size_t len = n - done < WL_MAX_RANGE ? n - done : WL_MAX_RANGE;
        size_t words = 2 + (len + 7) / 8;
        if (wlog_reserve(tx, l, words))
            return TXN_E_NOMEM;
        uint64_t *e = tx->hot.wl;
        e[0] = WL_RANGE | len;
        e[1] = (uint64_t)(uintptr_t)(a + done);
        e[words - 1] = 0; /* the padding: the log may be copied whole */
        memcpy(&e[2], (const char *)src + done, len);
        tx->hot.wl = e + words;
        done += len;
    }
    return 0;
}
