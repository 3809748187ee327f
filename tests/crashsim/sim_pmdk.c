/* sim_pmdk.c - the crash simulator's side of the pmdk engine: its pool is
 * a libpmemobj pool file, followed by the diff model (trace_diff.c),
 * and the allocator oracle reads PMDK's own heap (pmemobj_first/next). */
#include <libpmem.h>
#include <stdio.h>
#include <stdlib.h>

#include "pmdk.h"
#include "sim.h"

/* PMDK's lanes and headers take 4 MiB of a pool, and its heap keeps a run
 * of chunks per allocation class in use, in each thread's arena: a small
 * pool runs out early, and sooner the more threads allocate (a shared
 * workload's threads allocate for its one part: "pool is full" in 20 of
 * 310 images when it was sized by parts). */
size_t sim_pool_size(size_t size, int parts, int threads)
{
    size_t n = ((size_t)4 << 20) + 3 * size * (size_t)(threads > parts ? threads : parts);
    return n < txn_pool_min_size(NULL) ? txn_pool_min_size(NULL) : n; /* what create takes */
}

int sim_region(txn_pool *p, void **base, size_t *size)
{
    pmdk_region(p, base, size);
    /* otherwise PMDK msyncs, which the model does not see */
    if (!pmem_is_pmem(*base, *size)) {
        fputs("crashsim: PMDK must take the pool for persistent memory "
              "(PMEM_IS_PMEM_FORCE=1)\n",
              stderr);
        return -1;
    }
    return 0;
}

struct heap {
    uintptr_t *obj; /* user objects, sorted */
    size_t n, cap;
    unsigned root, meta, reserve;
    int nomem;
};

static void on_object(txn_obj *o, enum pmdk_kind k, void *arg)
{
    struct heap *h = arg;
    if (k == PMDK_ROOT) {
        h->root++;
    } else if (k == PMDK_META) {
        h->meta++;
    } else if (k == PMDK_RESERVE) {
        h->reserve++;
    } else {
        if (h->n == h->cap) {
            size_t cap = h->cap ? 2 * h->cap : 64;
            uintptr_t *a = realloc(h->obj, cap * sizeof *a);
            if (!a) {
                h->nomem = 1;
                return;
            }
            h->obj = a;
            h->cap = cap;
        }
        h->obj[h->n++] = (uintptr_t)o;
    }
}

static int cmp_uptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

/* Reached objects = PMDK's user objects, each reached once; the root and
 * the engine's two internal objects once each. */
int sim_check_alloc(txn_pool *p, const struct reach *r)
{
    struct heap h = {0};
    pmdk_foreach_object(p, on_object, &h);
    uintptr_t *reached = malloc((r->n + 1) * sizeof *reached);
    if (h.nomem || !reached) {
        free(h.obj);
        free(reached);
        return 1;
    }
    for (size_t i = 0; i < r->n; i++)
        reached[i] = (uintptr_t)r->o[i];
    qsort(reached, r->n, sizeof *reached, cmp_uptr);
    qsort(h.obj, h.n, sizeof *h.obj, cmp_uptr);
    int bad = 0;
    if (h.root > 1 || h.meta != 1 || h.reserve != 1) {
        fprintf(stderr, "  PMDK's heap holds %u roots, %u metas, %u reserves\n", h.root,
                h.meta, h.reserve);
        bad = 1;
    }
    size_t i = 0, j = 0, shown = 0;
    while (i < r->n || j < h.n) {
        if (i + 1 < r->n && reached[i] == reached[i + 1]) {
            if (shown++ < 3)
                fprintf(stderr, "  object %#lx reached twice\n", (unsigned long)reached[i]);
            bad = 1;
            i++;
        } else if (j == h.n || (i < r->n && reached[i] < h.obj[j])) {
            if (shown++ < 3)
                fprintf(stderr, "  reachable object %#lx is free\n", (unsigned long)reached[i]);
            bad = 1;
            i++;
        } else if (i == r->n || h.obj[j] < reached[i]) {
            if (shown++ < 3)
                fprintf(stderr, "  leaked object %#lx\n", (unsigned long)h.obj[j]);
            bad = 1;
            j++;
        } else {
            i++;
            j++;
        }
    }
    free(reached);
    free(h.obj);
    return bad;
}
