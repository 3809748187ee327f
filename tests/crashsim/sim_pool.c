/* sim_pool.c - the crash simulator's side of the shared pool format
 * (undo, redo, cow, incll): the pool's mapping, and the allocator oracle
 * on the runtime's allocator. */
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "engine.h"
#include "pool.h"
#include "sim.h"
#include "trace.h"

size_t sim_pool_size(size_t size, int parts, int threads)
{
    (void)threads;
    return size * (size_t)parts;
}

/* The pool's whole range, up to what it may grow to; what is mapped of
 * it follows p->size. */
int sim_region(txn_pool *p, void **base, size_t *size)
{
    *base = p->base;
    *size = p->max_size;
    trace_set_live(&p->size);
    return 0;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

struct blocks {
    void **b;
    size_t n, cap, live, stray;
};

static void on_live(void *blk, size_t size, void *arg)
{
    (void)size;
    struct blocks *s = arg;
    if (bsearch(&blk, s->b, s->n, sizeof *s->b, cmp_ptr))
        s->live++;
    else if (s->stray++ < 3)
        fprintf(stderr, "  leaked block %p\n", blk);
}

/* Reachable blocks = live blocks, each once. */
int sim_check_alloc(txn_pool *p, const struct reach *r)
{
    struct blocks s = {0};
    s.cap = 2 * (r->n + 1);
    s.b = malloc(s.cap * sizeof *s.b);
    if (!s.b)
        return 1;
    s.n = (size_t)eng_obj_blocks(p, txn_root(p), s.b);
    for (size_t i = 0; i < r->n; i++)
        s.n += (size_t)eng_obj_blocks(p, r->o[i], s.b + s.n);
    qsort(s.b, s.n, sizeof *s.b, cmp_ptr);
    int bad = 0;
    for (size_t i = 1; i < s.n; i++)
        if (s.b[i] == s.b[i - 1]) {
            fprintf(stderr, "  block %p reached twice\n", s.b[i]);
            bad = 1;
        }
    alloc_foreach_live(p, on_live, &s);
    if (s.live != s.n) {
        fprintf(stderr, "  %zu reachable blocks, %zu of them allocated\n", s.n, s.live);
        for (size_t i = 0; i < s.n; i++)
            if (!alloc_block_size(p, s.b[i], 1))
                fprintf(stderr, "  reachable block %p (pool offset %#zx) is free\n", s.b[i],
                        (size_t)((char *)s.b[i] - p->base));
        bad = 1;
    }
    free(s.b);
    return bad || s.stray;
}
