/* migrate.c - the manual model's migration (P-Retain): every node copied
 * into the new layout, in heap order, in steps of BATCH nodes.
 *
 * The old nodes, found by walking the structure, are copied in the order
 * of their addresses, so the new nodes lie in the heap as the old ones did
 * (a PMDK program would walk POBJ_FOREACH, which goes in heap order too):
 * P-Manual then runs on the original's heap, and the paper's overhead
 * compares the structs, not a defragmented heap (docs/retention.md).
 * Three phases, BATCH nodes a transaction: copy each node (its children
 * still the old nodes; the copies' handles in a forwarding array, a
 * migration object), then point the copies' children at the children's
 * copies, then the new entry (bucket array, root, head). A copy is
 * written whole in the transaction that allocates it, which logs nothing
 * for it; the second pass logs and writes only child words. The old
 * structure is read-only throughout, so a resumed migration walks it
 * again and finds the same order. */
#include <stdlib.h>

#include "retain.h"

/* The scratch object: the migration's progress, in the pool. */
struct conv {
    txn_obj *entry;         /* the new structure (at the end: the root's word) */
    txn_obj *fwd;           /* forwarding array: the copy of old node i */
    uint64_t started, done; /* done: the last phase ended */
    uint64_t phase, next;   /* phase 0 copies, 1 child words, 2 entry; next index */
    uint64_t count;         /* old nodes */
    uint64_t steps;         /* steps committed */
};
_Static_assert(sizeof(struct conv) == 64, "the scratch object is eight words");

/* DRAM: the walk, made again by a resumed step. */
struct heap_order {
    txn_obj *scratch;
    txn_pool *p;
    uint64_t steps; /* the scratch's count once its last step commits:
                       another means that step was rolled back */
    size_t n, cap;
    txn_obj **old; /* old nodes by address */
    txn_obj **fwd; /* copies of the nodes allocated so far */
};

/* --interrupt K: steps run in this process, to fail every K-th. */
static unsigned g_steps_run;

static int cmp_obj(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (txn_obj *const *)a, y = (uintptr_t) * (txn_obj *const *)b;
    return x < y ? -1 : x > y;
}

static void order_drop(struct heap_order *h)
{
    free(h->old);
    free(h->fwd);
    *h = (struct heap_order){0};
}

static int order_push(struct heap_order *h, txn_obj *o)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? 2 * h->cap : 1024;
        txn_obj **a = realloc(h->old, nc * sizeof *a);
        if (!a)
            return TXN_E_NOMEM;
        h->old = a;
        h->cap = nc;
    }
    h->old[h->n++] = o;
    return 0;
}

static int walk_hash(txn *tx, const struct migration *g, const struct instance *ok,
                     txn_obj *buckets, struct heap_order *h)
{
    struct node d;
    for (uint64_t b = 0; buckets && b < g->nb; b++) {
        txn_obj *c;
        TRY(txn_read(tx, buckets, 8 * b, &c, sizeof c));
        for (; c; c = d.child[0]) {
            TRY(order_push(h, c));
            TRY(node_load(tx, ok, c, &d));
        }
    }
    return 0;
}

static int walk_skip(txn *tx, const struct instance *ok, txn_obj *head, struct heap_order *h)
{
    struct node d;
    for (txn_obj *c = head; c; c = d.child[0]) {
        TRY(order_push(h, c));
        TRY(node_load(tx, ok, c, &d));
    }
    return 0;
}

/* The walked part of h->old is the stack. */
static int walk_btree(txn *tx, const struct instance *ok, txn_obj *root, struct heap_order *h)
{
    struct node d;
    if (!root)
        return 0;
    TRY(order_push(h, root));
    for (size_t i = 0; i < h->n; i++) {
        TRY(node_load(tx, ok, h->old[i], &d));
        for (unsigned j = 0; !d.leaf && j <= d.n; j++)
            TRY(order_push(h, d.child[j]));
    }
    return 0;
}

/* Every old node (the skip list's head included; not the hash table's
 * bucket array), by address. */
static int order_walk(txn *tx, const struct migration *g, const struct instance *ok,
                      struct heap_order *h)
{
    txn_obj *e;
    TRY(entry_get(tx, ok, &e));
    if (g->from->kind == HASH)
        TRY(walk_hash(tx, g, ok, e, h));
    else if (g->from->kind == SKIP)
        TRY(walk_skip(tx, ok, e, h));
    else
        TRY(walk_btree(tx, ok, e, h));
    if (h->n)
        qsort(h->old, h->n, sizeof *h->old, cmp_obj);
    return 0;
}

/* The copy of old node o (NULL stays NULL). */
static int forward(const struct heap_order *h, txn_obj *o, txn_obj **out)
{
    if (!o) {
        *out = NULL;
        return 0;
    }
    txn_obj **at = bsearch(&o, h->old, h->n, sizeof *h->old, cmp_obj);
    if (!at)
        return TXN_E_CORRUPT; /* a child outside the structure */
    *out = h->fwd[at - h->old];
    return 0;
}

/* The DRAM walk of this migration, made on its first step in this
 * process (a new migration, or one resumed after a crash). */
static int order_get(txn *tx, const struct migration *g, const struct instance *ok,
                     txn_obj *scratch, const struct conv *c, struct heap_order **out)
{
    struct heap_order *h = g->order;
    txn_pool *p = txn_pool_of(tx);
    if (h->old && h->scratch == scratch && h->p == p && h->steps == c->steps) {
        *out = h;
        return 0;
    }
    order_drop(h);
    int rc = order_walk(tx, g, ok, h);
    if (!rc && c->started && h->n != c->count)
        rc = TXN_E_CORRUPT; /* the old structure changed under the migration */
    if (!rc && !(h->fwd = calloc(h->n ? h->n : 1, sizeof *h->fwd)))
        rc = TXN_E_NOMEM;
    size_t have = !c->started ? 0 : c->phase > 0 ? h->n : c->next;
    if (!rc && have) /* resumed: the copies made so far */
        rc = txn_read(tx, c->fwd, 0, h->fwd, have * sizeof *h->fwd);
    if (rc) {
        order_drop(h);
        return rc;
    }
    h->scratch = scratch;
    h->p = p;
    *out = h;
    return 0;
}

static int conv_start(txn_migrate *m, txn *tx, const struct migration *g,
                      const struct instance *ok, const struct heap_order *h, struct conv *c)
{
    txn_obj *e;
    c->started = 1;
    c->count = h->n;
    TRY(txn_migrate_alloc(m, tx, 8 * (h->n ? h->n : 1), &c->fwd));
    TRY(entry_get(tx, ok, &e));
    if (g->from->kind != HASH)
        return 0;
    TRY(txn_migrate_retire(m, tx, e)); /* the old bucket array */
    return txn_migrate_alloc(m, tx, 8 * (size_t)g->nb, &c->entry);
}

/* Children of a loaded node: a chain's next, a skip-list node's levels,
 * an internal B-tree node's n + 1. */
static unsigned children(const struct node_layout *L, const struct node *d)
{
    unsigned nc = L->kind == HASH ? 1 : L->kind == SKIP ? d->leaf : d->leaf ? 0 : d->n + 1;
    return nc < L->C ? nc : L->C;
}

/* Phase 0: old node i copied, its children still the old nodes. */
static int copy_node(txn_migrate *m, txn *tx, const struct migration *g,
                     const struct instance *ok, const struct instance *nk, struct heap_order *h,
                     uint64_t i)
{
    struct node d;
    TRY(node_load(tx, ok, h->old[i], &d));
    for (unsigned j = children(g->from, &d); j < CMAX; j++) /* stale words, cleared */
        d.child[j] = NULL;
    TRY(node_alloc(tx, nk, &h->fwd[i]));
    TRY(node_store(tx, nk, h->fwd[i], &d, W_NEW));
    return txn_migrate_retire(m, tx, h->old[i]);
}

/* Phase 1: the copy of old node i pointed at its children's copies. */
static int point_children(txn *tx, const struct migration *g, const struct instance *ok,
                          const struct instance *nk, const struct heap_order *h, uint64_t i)
{
    struct node d;
    TRY(node_load(tx, ok, h->old[i], &d));
    unsigned nc = children(g->from, &d);
    int any = 0;
    for (unsigned j = 0; j < nc; j++) {
        TRY(forward(h, d.child[j], &d.child[j]));
        any |= d.child[j] != NULL;
    }
    return any ? txn_write(tx, h->fwd[i], nk->L->off_child, d.child, 8 * nc) : 0;
}

/* Phase 2: the new entry; the hash table's buckets BATCH at a time. */
static int point_entry(txn *tx, const struct migration *g, const struct instance *ok,
                       const struct heap_order *h, struct conv *c)
{
    txn_obj *e;
    TRY(entry_get(tx, ok, &e));
    if (g->from->kind != HASH) {
        TRY(forward(h, e, &c->entry));
    } else {
        txn_obj *heads[BATCH];
        uint64_t end = c->next + BATCH < g->nb ? c->next + BATCH : g->nb;
        TRY(txn_read(tx, e, 8 * c->next, heads, 8 * (end - c->next)));
        for (uint64_t b = 0; b < end - c->next; b++)
            TRY(forward(h, heads[b], &heads[b]));
        TRY(txn_write(tx, c->entry, 8 * c->next, heads, 8 * (end - c->next)));
        c->next = end;
    }
    c->done = g->from->kind != HASH || c->next == g->nb; /* the last phase ended */
    return 0;
}

/* Up to BATCH units of the current phase. */
static int conv_batch(txn_migrate *m, txn *tx, const struct migration *g,
                      const struct instance *ok, const struct instance *nk, struct heap_order *h,
                      struct conv *c)
{
    if (c->phase == 2)
        return point_entry(tx, g, ok, h, c);
    uint64_t end = c->next + BATCH;
    if (end > h->n)
        end = h->n;
    for (uint64_t i = c->next; i < end; i++)
        TRY(c->phase == 0 ? copy_node(m, tx, g, ok, nk, h, i)
                          : point_children(tx, g, ok, nk, h, i));
    if (c->phase == 0 && end > c->next)
        TRY(txn_write(tx, c->fwd, 8 * c->next, &h->fwd[c->next], 8 * (end - c->next)));
    c->next = end;
    if (end == h->n) {
        c->phase++;
        c->next = 0;
    }
    return 0;
}

static int conv_step(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg)
{
    const struct migration *g = arg;
    txn_pool *p = txn_pool_of(tx);
    struct conv c;
    struct heap_order *h;
    struct instance ok = {g->from, txn_root(p), 0, NULL, g->nb};
    struct instance nk = {g->to, scratch, offsetof(struct conv, entry), m, g->nb};
    TRY(txn_read(tx, scratch, 0, &c, sizeof c));
    if (c.done)
        return 0;
    TRY(order_get(tx, g, &ok, scratch, &c, &h));
    if (!c.started)
        TRY(conv_start(m, tx, g, &ok, h, &c));
    TRY(conv_batch(m, tx, g, &ok, &nk, h, &c));
    c.steps++;
    TRY(txn_write(tx, scratch, 0, &c, sizeof c));
    h->steps = c.steps;
    /* --interrupt: the step fails after its work; the library rolls it
     * back and the open fails, and P-Retain opens the pool again */
    if (g_opt.interrupt && ++g_steps_run % g_opt.interrupt == 0)
        return TXN_E_IO;
    return c.done ? 0 : TXN_MIGRATE_MORE;
}

static int conv_finish(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg)
{
    const struct migration *g = arg;
    struct conv c;
    order_drop(g->order);
    TRY(txn_read(tx, scratch, 0, &c, sizeof c));
    TRY(txn_migrate_retire(m, tx, c.fwd)); /* a migration object, freed with the old */
    return txn_write(tx, txn_root(txn_pool_of(tx)), 0, &c.entry, sizeof c.entry);
}

int migration_init(struct migration *g, const struct node_layout *from,
                   const struct node_layout *to, unsigned nb)
{
    *g = (struct migration){from, to, nb, calloc(1, sizeof(struct heap_order))};
    return g->order ? 0 : TXN_E_NOMEM;
}

void migration_release(struct migration *g)
{
    if (g->order)
        order_drop(g->order);
    free(g->order);
    g->order = NULL;
}

txn_migration migration_step(struct migration *g)
{
    return (txn_migration){1, sizeof(struct conv), conv_step, conv_finish, g};
}
