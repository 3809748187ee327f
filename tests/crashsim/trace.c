/* trace.c - the store-prefix crash model behind the crash simulator. */
#include "trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE 64u

struct unit {
    uint8_t off, len; /* within the line */
    uint8_t bytes[8];
};

struct line {
    struct unit *u;
    uint32_t n, cap;
    uint32_t flushed; /* units [0, flushed) are made durable by a fence */
    uint32_t dirty_pos; /* index in tr.dirty + 1, 0 if not listed */
};

/* A traced region: region 0 is trace_attach's, region 1 trace_attach_more's
 * (a second pool); a fence is global, as on the processor. */
struct region {
    char *base;
    size_t size, nlines;
    uint8_t *durable; /* persisted bytes */
    uint8_t *view;    /* persisted + every pending store: what memory
                         should hold if every store was traced */
    struct line *lines;
    uint32_t *dirty; /* lines with pending stores */
    size_t ndirty;
};

static struct region regions[TRACE_REGIONS];
#define tr regions[0]

static void region_free(struct region *g)
{
    if (g->lines)
        for (size_t i = 0; i < g->nlines; i++)
            free(g->lines[i].u);
    trace_buf_free(g->durable, g->size);
    trace_buf_free(g->view, g->size);
    free(g->lines);
    free(g->dirty);
    memset(g, 0, sizeof *g);
}

static void detach_locked(void)
{
    for (int r = 0; r < TRACE_REGIONS; r++)
        region_free(&regions[r]);
    trace_events_reset();
}

static const size_t *live_size; /* trace_set_live */

void trace_set_live(const size_t *live)
{
    live_size = live;
}

/* The bytes of the region that memory holds now. */
static size_t live_bytes(void)
{
    size_t n = live_size ? __atomic_load_n(live_size, __ATOMIC_ACQUIRE) : tr.size;
    return n < tr.size ? n : tr.size;
}

/* Under the lock stores are traced under: an engine's own thread (incll's
 * epoch thread) may store at any time, and must find the model whole or
 * absent, never half built or half freed. */
/* `primary`: region 0, of which only live_bytes() are mapped now. */
static int region_init(struct region *g, void *base, size_t size, const void *durable,
                       int primary)
{
    g->base = base;
    g->size = size;
    g->nlines = (size + LINE - 1) / LINE;
    g->durable = trace_buf_alloc(size);
    g->view = trace_buf_alloc(size);
    g->lines = calloc(g->nlines, sizeof *g->lines);
    g->dirty = malloc(g->nlines * sizeof *g->dirty);
    if (!g->durable || !g->view || !g->lines || !g->dirty)
        return -1;
    if (durable) /* trace_buf_alloc's pages read zero */
        memcpy(g->durable, durable, size);
    else
        memcpy(g->durable, base, primary ? live_bytes() : size);
    memcpy(g->view, g->durable, size);
    return 0;
}

int trace_attach(void *base, size_t size, const void *durable)
{
    trace_lock();
    detach_locked();
    int rc = region_init(&tr, base, size, durable, 1);
    if (rc)
        detach_locked();
    trace_unlock();
    return rc;
}

int trace_attach_more(void *base, size_t size, const void *durable)
{
    trace_lock();
    int rc = -1;
    for (int r = 1; r < TRACE_REGIONS && rc; r++)
        if (!regions[r].base && tr.base &&
            !(rc = region_init(&regions[r], base, size, durable, 0)))
            break;
    trace_unlock();
    return rc;
}

int trace_grow(void *base, size_t size, const void *tail)
{
    trace_lock();
    size_t old = tr.size, nl = (size + LINE - 1) / LINE;
    int rc = 0;
    if (!tr.base || size <= old) {
        rc = -1;
        goto out;
    }
    uint8_t *d = trace_buf_alloc(size), *v = trace_buf_alloc(size);
    struct line *l = realloc(tr.lines, nl * sizeof *l);
    if (l)
        tr.lines = l;
    uint32_t *dirty = l ? realloc(tr.dirty, nl * sizeof *dirty) : NULL;
    if (dirty)
        tr.dirty = dirty;
    if (!d || !v || !l || !dirty) {
        trace_buf_free(d, size);
        trace_buf_free(v, size);
        rc = -1;
        goto out;
    }
    /* a last line cut short by the old end keeps its stores: they stay
     * within it */
    memset(tr.lines + tr.nlines, 0, (nl - tr.nlines) * sizeof *tr.lines);
    memcpy(d, tr.durable, old);
    memcpy(v, tr.view, old);
    if (tail) {
        memcpy(d + old, tail, size - old);
        memcpy(v + old, tail, size - old);
    }
    trace_buf_free(tr.durable, old);
    trace_buf_free(tr.view, old);
    tr.durable = d;
    tr.view = v;
    tr.base = base;
    tr.size = size;
    tr.nlines = nl;
out:
    trace_unlock();
    return rc;
}

void trace_detach(void)
{
    trace_lock();
    live_size = NULL; /* its pool's handle may go with it */
    detach_locked();
    trace_unlock();
}

/* The region [a, a + n) lies in, or NULL. */
static struct region *in_region(const void *a, size_t n)
{
    for (int r = 0; r < TRACE_REGIONS; r++) {
        struct region *g = &regions[r];
        uintptr_t x = (uintptr_t)a, b = (uintptr_t)g->base;
        if (g->base && x >= b && x < b + g->size && n <= b + g->size - x)
            return g;
    }
    return NULL;
}

static void add_unit(struct region *g, size_t li, size_t off, size_t len, const uint8_t *src)
{
    struct line *l = &g->lines[li];
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 8;
        struct unit *u = realloc(l->u, cap * sizeof *u);
        if (!u) {
            fputs("trace: out of memory\n", stderr);
            abort(); /* test tool only: never linked into the libraries */
        }
        l->u = u;
        l->cap = cap;
    }
    struct unit *u = &l->u[l->n++];
    u->off = (uint8_t)off;
    u->len = (uint8_t)len;
    memcpy(u->bytes, src, len);
    if (!l->dirty_pos) {
        g->dirty[g->ndirty++] = (uint32_t)li;
        l->dirty_pos = (uint32_t)g->ndirty;
    }
}

void trace_store_unlock(const void *dst, size_t n)
{
    struct region *g = n ? in_region(dst, n) : NULL;
    if (!g) {
        trace_unlock();
        return;
    }
    size_t pos = (size_t)((const char *)dst - g->base), end = pos + n;
    memcpy(g->view + pos, dst, n);
    while (pos < end) {
        size_t next = (pos & ~(size_t)7) + 8; /* units never cross a word */
        if (next > end)
            next = end;
        add_unit(g, pos / LINE, pos % LINE, next - pos, g->view + pos);
        pos = next;
    }
    trace_event();
    trace_unlock();
}

void trace_flush(const void *addr, size_t n)
{
    trace_lock();
    struct region *g = n ? in_region(addr, n) : NULL;
    if (g) {
        size_t pos = (size_t)((const char *)addr - g->base);
        for (size_t li = pos / LINE; li <= (pos + n - 1) / LINE; li++)
            g->lines[li].flushed = g->lines[li].n;
    }
    if (tr.base)
        trace_event();
    trace_unlock();
}

void trace_discard_locked(const void *addr, size_t n)
{
    struct region *g = n ? in_region(addr, n) : NULL;
    if (g) {
        size_t pos = (size_t)((const char *)addr - g->base);
        for (size_t li = pos / LINE; li <= (pos + n - 1) / LINE; li++)
            g->lines[li].n = g->lines[li].flushed = 0; /* a fence unlists it */
        memset(g->durable + pos, 0, n);
        memset(g->view + pos, 0, n);
    }
}

static size_t audit_region(struct region *g, size_t live, const char *where);

static void apply(uint8_t *img, size_t li, const struct unit *u, uint32_t k)
{
    for (uint32_t i = 0; i < k; i++)
        memcpy(img + li * LINE + u[i].off, u[i].bytes, u[i].len);
}

void trace_fence(void)
{
    trace_lock();
    if (!tr.base) {
        trace_unlock();
        return;
    }
    for (int r = 0; r < TRACE_REGIONS; r++) {
        struct region *g = &regions[r];
        size_t keep = 0;
        for (size_t d = 0; d < g->ndirty; d++) {
            size_t li = g->dirty[d];
            struct line *l = &g->lines[li];
            if (l->flushed) {
                apply(g->durable, li, l->u, l->flushed);
                memmove(l->u, l->u + l->flushed, (l->n - l->flushed) * sizeof *l->u);
                l->n -= l->flushed;
                l->flushed = 0;
            }
            if (l->n) {
                g->dirty[keep++] = (uint32_t)li;
                l->dirty_pos = (uint32_t)keep;
            } else {
                l->dirty_pos = 0;
            }
        }
        g->ndirty = keep;
    }
    trace_event();
    trace_unlock();
}

size_t trace_image_of(int region, void *out, uint64_t seed)
{
    const struct region *g = &regions[region];
    memcpy(out, g->durable, g->size);
    for (size_t d = 0; d < g->ndirty; d++) {
        size_t li = g->dirty[d];
        struct line *l = &g->lines[li];
        uint64_t r = trace_mix(&seed);
        uint32_t k = r % 4 == 0 ? 0 : r % 4 == 1 ? l->n : (uint32_t)((r >> 8) % (l->n + 1));
        apply(out, li, l->u, k);
    }
    return g->ndirty;
}

size_t trace_image(void *out, uint64_t seed)
{
    return trace_image_of(0, out, seed);
}

uint64_t trace_combos(uint64_t cap)
{
    uint64_t n = 1;
    for (size_t d = 0; d < tr.ndirty && n <= cap; d++)
        n *= (uint64_t)tr.lines[tr.dirty[d]].n + 1;
    return n > cap ? cap + 1 : n;
}

void trace_image_nth(void *out, uint64_t idx)
{
    memcpy(out, tr.durable, tr.size);
    for (size_t d = 0; d < tr.ndirty; d++) {
        size_t li = tr.dirty[d];
        struct line *l = &tr.lines[li];
        apply(out, li, l->u, (uint32_t)(idx % (l->n + 1)));
        idx /= l->n + 1;
    }
}

size_t trace_audit(const char *where)
{
    size_t bad = 0;
    for (int r = 0; r < TRACE_REGIONS; r++)
        if (regions[r].base)
            bad += audit_region(&regions[r], r ? regions[r].size : live_bytes(), where);
    return bad;
}

static size_t audit_region(struct region *g, size_t live, const char *where)
{
    size_t bad = 0;
    for (size_t pos = 0; pos < live; pos += LINE) {
        size_t len = live - pos < LINE ? live - pos : LINE;
        if (!memcmp(g->view + pos, g->base + pos, len))
            continue;
        for (size_t w = pos; w < pos + len; w += 8) {
            size_t wl = pos + len - w < 8 ? pos + len - w : 8;
            if (memcmp(g->view + w, g->base + w, wl)) {
                if (bad < 5 && where)
                    fprintf(stderr, "untraced store at pool offset %#zx (%s)\n", w, where);
                bad++;
            }
        }
        /* take memory as it is, as if it had been stored and persisted */
        memcpy(g->view + pos, g->base + pos, len);
        memcpy(g->durable + pos, g->base + pos, len);
    }
    return bad;
}
