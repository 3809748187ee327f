/* trace_diff.c - trace.h for an engine whose stores cannot be traced: the
 * pmdk engine, where libpmemobj writes its pool with plain stores and only
 * its flushes and drains (libpmem's functions, which
 * baseline/pmdk/pmdk_libpmem.c defines) reach the persist layer. The
 * stores are inferred from memory.
 *
 * The model keeps the persisted contents of the region. A flush saves the
 * lines it covers as they are in memory at that moment; a fence by the
 * same thread makes those saved lines persisted. At a crash, every 8-byte
 * word holds one of: its persisted value, a value a flush saw since (the
 * last few), or its value in memory now; each word independently. That is
 * weaker than the store-prefix model of trace.c (no order between words of
 * one line, and stores made and overwritten between two flushes are not
 * seen) and it is what PMDK itself assumes: 8-byte failure atomicity and
 * no order among stores not yet flushed and fenced. Every store is seen as
 * memory, so none goes untraced: trace_audit reports 0.
 *
 * Events are the traced stores of pm_store helpers (pmdk_libpmem.c copies
 * with them), flushes and fences. A region attached with its persisted
 * contents (a pool about to be opened and recovered) is mapped where mmap
 * puts it: it is located at the first flush, as the mapping holding the
 * flushed address, and has no events before.
 */
#include "trace.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE 64u
#define LWORDS (LINE / 8)
#define MAXV 4 /* values a word may take: persisted, flushed ones, memory */

struct snap { /* a line as a flush saw it */
    size_t line;
    pthread_t owner;
    uint64_t w[LWORDS];
};

struct cand { /* a word with more than one possible value */
    size_t word;
    unsigned n, now; /* values; the index of memory's */
    uint64_t v[MAXV]; /* distinct; v[0] persisted */
};

static struct {
    char *base;
    size_t size, nwords, nlines;
    int located;
    uint64_t *durable;
    struct snap *snaps; /* since their owner's last fence, in order */
    size_t nsnaps, capsnaps;
    size_t *order; /* snaps sorted by line (scratch) */
    size_t caporder;
    struct cand *cands;
    size_t ncands, capcands;
    uint64_t cands_at; /* events count when cands was made, +1 (0: none) */
} tr;

static void *grow(void *a, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return a;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *b = realloc(a, c * elem);
    if (!b) {
        fputs("trace: out of memory\n", stderr);
        abort(); /* test tool only: never linked into the libraries */
    }
    *cap = c;
    return b;
}

static void detach_locked(void)
{
    trace_buf_free(tr.durable, tr.nwords * 8 + 8);
    free(tr.snaps);
    free(tr.order);
    free(tr.cands);
    memset(&tr, 0, sizeof tr);
    trace_events_reset();
}

void trace_discard_locked(const void *addr, size_t n)
{
    (void)addr; /* libpmemobj's pools give nothing back */
    (void)n;
}

void trace_set_live(const size_t *live)
{
    (void)live; /* libpmemobj's pools do not grow */
}

/* Under the lock stores are traced under, as in trace.c: a thread of the
 * engine's own must find the model whole or absent. */
int trace_attach(void *base, size_t size, const void *durable)
{
    trace_lock();
    detach_locked();
    tr.base = base;
    tr.size = size;
    tr.nwords = size / 8;
    tr.nlines = (tr.nwords + LWORDS - 1) / LWORDS;
    tr.located = durable == NULL;
    tr.durable = trace_buf_alloc(tr.nwords * 8 + 8);
    int rc = 0;
    if (!tr.durable) {
        detach_locked();
        rc = -1;
    } else {
        memcpy(tr.durable, durable ? durable : base, size);
    }
    trace_unlock();
    return rc;
}

void trace_detach(void)
{
    trace_lock();
    detach_locked();
    trace_unlock();
}

static int in_region(const void *a, size_t n)
{
    uintptr_t x = (uintptr_t)a, b = (uintptr_t)tr.base;
    return tr.located && x >= b && x < b + tr.size && n <= b + tr.size - x;
}

/* The region is the mapping that holds `addr`. */
static void locate(const void *addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    uintptr_t a = (uintptr_t)addr, lo, hi;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && lo <= a && a < hi) {
            tr.base = (char *)lo;
            tr.located = hi - lo >= tr.size;
            break;
        }
    }
    if (f)
        fclose(f);
}

static uint64_t mem_word(size_t w)
{
    return __atomic_load_n((const uint64_t *)tr.base + w, __ATOMIC_RELAXED);
}

void trace_store_unlock(const void *dst, size_t n)
{
    if (n && in_region(dst, n))
        trace_event();
    trace_unlock();
}

void trace_flush(const void *addr, size_t n)
{
    trace_lock();
    if (tr.base && !tr.located && n)
        locate(addr);
    if (n && in_region(addr, n)) {
        size_t pos = (size_t)((const char *)addr - tr.base);
        size_t first = pos / LINE, last = (pos + n - 1) / LINE;
        tr.snaps = grow(tr.snaps, &tr.capsnaps, tr.nsnaps + last - first + 1, sizeof *tr.snaps);
        for (size_t li = first; li <= last; li++) {
            struct snap *s = &tr.snaps[tr.nsnaps++];
            s->line = li;
            s->owner = pthread_self();
            for (size_t k = 0; k < LWORDS; k++)
                s->w[k] = li * LWORDS + k < tr.nwords ? mem_word(li * LWORDS + k) : 0;
        }
    }
    if (tr.located)
        trace_event();
    trace_unlock();
}

void trace_fence(void)
{
    trace_lock();
    if (!tr.located) {
        trace_unlock();
        return;
    }
    pthread_t self = pthread_self();
    size_t keep = 0;
    for (size_t i = 0; i < tr.nsnaps; i++) {
        struct snap *s = &tr.snaps[i];
        if (pthread_equal(s->owner, self)) {
            for (size_t k = 0; k < LWORDS && s->line * LWORDS + k < tr.nwords; k++)
                tr.durable[s->line * LWORDS + k] = s->w[k];
        } else {
            tr.snaps[keep++] = *s;
        }
    }
    tr.nsnaps = keep;
    trace_event();
    trace_unlock();
}

static const struct snap *cmp_base;

static int by_line(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    size_t lx = cmp_base[x].line, ly = cmp_base[y].line;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void add_value(struct cand *c, uint64_t v, unsigned limit)
{
    for (unsigned i = 0; i < c->n; i++)
        if (c->v[i] == v)
            return;
    if (c->n < limit)
        c->n++;
    c->v[c->n - 1] = v; /* full: the newest replaces the last kept */
}

/* The words a crash may leave otherwise than persisted, with their
 * values; made once per event. */
static void collect(void)
{
    if (tr.cands_at == trace_events() + 1)
        return;
    tr.ncands = 0;
    tr.order = grow(tr.order, &tr.caporder, tr.nsnaps + 1, sizeof *tr.order);
    for (size_t i = 0; i < tr.nsnaps; i++)
        tr.order[i] = i;
    cmp_base = tr.snaps;
    qsort(tr.order, tr.nsnaps, sizeof *tr.order, by_line);
    size_t o = 0;
    const size_t page = 4096 / LINE;
    for (size_t li = 0; li < tr.nlines; li++) {
        size_t w0 = li * LWORDS, nw = tr.nwords - w0 < LWORDS ? tr.nwords - w0 : LWORDS;
        int snapped = o < tr.nsnaps && tr.snaps[tr.order[o]].line == li;
        if (!snapped && li % page == 0 && (tr.nlines - li) >= page &&
            (o == tr.nsnaps || tr.snaps[tr.order[o]].line >= li + page) &&
            !memcmp(tr.base + w0 * 8, tr.durable + w0, 4096)) {
            li += page - 1; /* a clean page */
            continue;
        }
        if (!snapped && !memcmp(tr.base + w0 * 8, tr.durable + w0, nw * 8))
            continue;
        size_t o_end = o;
        while (o_end < tr.nsnaps && tr.snaps[tr.order[o_end]].line == li)
            o_end++;
        for (size_t k = 0; k < nw; k++) {
            struct cand c = {.word = w0 + k, .n = 1, .v = {tr.durable[w0 + k]}};
            for (size_t j = o; j < o_end; j++)
                add_value(&c, tr.snaps[tr.order[j]].w[k], MAXV - 1);
            uint64_t m = mem_word(w0 + k);
            add_value(&c, m, MAXV);
            while (c.v[c.now] != m)
                c.now++;
            if (c.n > 1) {
                tr.cands = grow(tr.cands, &tr.capcands, tr.ncands + 1, sizeof *tr.cands);
                tr.cands[tr.ncands++] = c;
            }
        }
        o = o_end;
    }
    tr.cands_at = trace_events() + 1;
}

/* Images mix four ways of choosing: each word at random; each line all
 * persisted or all in memory; mostly persisted; mostly in memory. */
size_t trace_image(void *out, uint64_t seed)
{
    collect();
    memcpy(out, tr.durable, tr.size);
    uint64_t *img = out;
    unsigned mode = (unsigned)(trace_mix(&seed) % 4);
    size_t line = SIZE_MAX;
    int line_new = 0;
    for (size_t i = 0; i < tr.ncands; i++) {
        const struct cand *c = &tr.cands[i];
        uint64_t r = trace_mix(&seed);
        unsigned k;
        if (mode == 1) {
            if (c->word / LWORDS != line) {
                line = c->word / LWORDS;
                line_new = (int)(r & 1);
            }
            k = line_new ? c->now : 0;
        } else if (mode == 0 || r % 8 == 0) {
            k = (unsigned)((r >> 8) % c->n);
        } else {
            k = mode == 2 ? 0 : c->now;
        }
        img[c->word] = c->v[k];
    }
    return tr.ncands;
}

uint64_t trace_combos(uint64_t cap)
{
    collect();
    uint64_t n = 1;
    for (size_t i = 0; i < tr.ncands && n <= cap; i++)
        n *= tr.cands[i].n;
    return n > cap ? cap + 1 : n;
}

void trace_image_nth(void *out, uint64_t idx)
{
    collect();
    memcpy(out, tr.durable, tr.size);
    uint64_t *img = out;
    for (size_t i = 0; i < tr.ncands; i++) {
        const struct cand *c = &tr.cands[i];
        img[c->word] = c->v[idx % c->n];
        idx /= c->n;
    }
}

size_t trace_audit(const char *where)
{
    (void)where;
    return 0;
}
