/* mirror/rebuild.c - the mirror store's tree: create, rebuild from its
 * persistent mirrors (checking their structure), close.
 *
 * What the mirrors hold after every committed operation (each put or
 * remove is one transaction, so a recovered pool holds them too), and
 * what mt_open() checks:
 *  P1 The anchor names the top layer's root; a layer entry (klen
 *     KLEN_LAYER) names its layer's root: both are rewritten in the
 *     transaction that splits a root.
 *  P2 A leaf's permutation is a permutation of its slots, its live entries
 *     strictly ascending by (slice, klen), klen <= KLEN_LAYER.
 *  P3 An internal node's keys ascend strictly; every key below child i
 *     lies in [key i-1, key i) of its parent, and so on up the layer.
 *  P4 The leaves of a layer, left to right, form the next/prev chain.
 *  P5 Every node object is reached exactly once (the crash simulator
 *     compares mt_objects() with the allocator's live blocks).
 * Parents and version words are not persistent: derived on rebuild.
 */
#include "mt_node.h"
#include <stdlib.h>
#include <string.h>

static void free_node(struct node *n, void *arg)
{
    (void)arg;
    node_free_now(n);
}

int mt_create(const mt_opts *opts, mt_tree **out)
{
    mt_tree *t = tree_new(opts);
    struct op o;
    if (!t)
        return TXN_E_NOMEM;
    int rc = op_begin(&o, t);
    if (rc) {
        free(t);
        return rc;
    }
    struct leaf *l = leaf_new(&o);
    if (l) {
        atomic_fetch_or_explicit(&l->h.version, V_ROOT, memory_order_relaxed);
        w_image(&o, &l->h);
        w_anchor(&o, &l->h);
        atomic_store(&t->root, &l->h);
    }
    rc = op_end(&o);
    if (rc) {
        if (l)
            node_free_now(l);
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void mt_close(mt_tree *t)
{
    if (!t)
        return;
    tree_walk(atomic_load(&t->root), free_node, NULL);
    free(t);
}

int mt_flush(mt_tree *t)
{
    (void)t; /* every operation committed its own transaction */
    return 0;
}

/* ---- rebuild */

struct rebuild {
    txn *tx;
    txn_pool *pool;
    int err;
    unsigned depth;  /* layers */
    unsigned height; /* internal nodes above, in this layer */
};

/* one layer's leaves in order, for the chain */
struct chain {
    struct leaf *last;
    txn_obj *last_next; /* the last leaf's mirror's next handle */
};

static struct node *build(struct rebuild *rb, txn_obj *h, struct inode *parent, uint64_t lo,
                          uint64_t hi, int has_hi, struct chain *ch);

static struct node *build_layer(struct rebuild *rb, txn_obj *h)
{
    struct chain ch = {NULL, NULL};
    if (++rb->depth > MT_MAX_KEY / 8 + 1) {
        rb->err = TXN_E_CORRUPT;
        return NULL;
    }
    unsigned height = rb->height;
    rb->height = 0;
    struct node *root = build(rb, h, NULL, 0, 0, 0, &ch);
    rb->height = height;
    rb->depth--;
    if (ch.last_next)
        rb->err = TXN_E_CORRUPT;
    return root;
}

static void build_leaf(struct rebuild *rb, struct leaf *l, const uint64_t *b, uint64_t lo,
                       uint64_t hi, int has_hi, struct chain *ch)
{
    memcpy(&l->kind, b, LEAF_BODY);
    l->next = l->prev = NULL;
    uint64_t perm = l->perm;
    if (l->lowkey < lo || !leaf_entries_ok(l, perm, lo, hi, has_hi)) {
        rb->err = TXN_E_CORRUPT;
        l->perm = PERM_EMPTY;
        return;
    }
    for (unsigned i = 0; i < perm_count(perm); i++) {
        unsigned s = perm_slot(perm, i);
        if (l->klen[s] == KLEN_LAYER) {
            txn_obj *sub = (txn_obj *)l->val[s];
            l->val[s] = (uint64_t)build_layer(rb, sub);
            if (!l->val[s]) { /* keep the walk safe: drop the entry */
                l->klen[s] = 0;
                rb->err = rb->err ? rb->err : TXN_E_CORRUPT;
            }
        }
    }
    txn_obj *prev_h = (txn_obj *)b[LB_PREV / 8];
    if (ch->last) {
        if (ch->last_next != l->h.pobj || prev_h != ch->last->h.pobj)
            rb->err = TXN_E_CORRUPT;
        ch->last->next = l;
        l->prev = ch->last;
    } else if (prev_h) {
        rb->err = TXN_E_CORRUPT;
    }
    ch->last = l;
    ch->last_next = (txn_obj *)b[LB_NEXT / 8];
}

static struct node *build(struct rebuild *rb, txn_obj *h, struct inode *parent, uint64_t lo,
                          uint64_t hi, int has_hi, struct chain *ch)
{
    if (rb->err)
        return NULL;
    const uint64_t *b = h ? txn_open(rb->tx, h, TXN_RO) : NULL;
    size_t size = b ? txn_obj_size(rb->pool, h) : 0;
    if (!b || size < INODE_BODY || (b[0] == KIND_LEAF && size < LEAF_BODY) ||
        (b[0] != KIND_LEAF && b[0] != KIND_INODE)) {
        rb->err = TXN_E_CORRUPT;
        return NULL;
    }
    struct node *n = node_alloc();
    if (!n) {
        rb->err = TXN_E_NOMEM;
        return NULL;
    }
    n->pobj = h;
    n->parent = parent;
    uint64_t v = (b[0] == KIND_LEAF ? V_LEAF : 0) | (parent ? 0 : V_ROOT);
    atomic_store(&n->version, v);
    if (b[0] == KIND_LEAF) {
        ((struct leaf *)n)->perm = PERM_EMPTY;
        build_leaf(rb, (struct leaf *)n, b, lo, hi, has_hi, ch);
        return n;
    }
    struct inode *in = (struct inode *)n;
    in->kind = KIND_INODE;
    uint64_t nk = b[IB_NKEYS / 8];
    if (nk > IWIDTH || rb->height >= MT_MAX_HEIGHT) {
        rb->err = TXN_E_CORRUPT;
        return n;
    }
    for (unsigned i = 0; i < nk; i++) {
        uint64_t k = b[IB_IKEY / 8 + i];
        if (k < lo || (has_hi && k >= hi) || (i && k <= in->ikey[i - 1])) {
            rb->err = TXN_E_CORRUPT;
            return n;
        }
        in->ikey[i] = k;
    }
    in->nkeys = nk; /* walk() skips children not built */
    rb->height++;
    for (unsigned i = 0; i <= nk; i++) {
        uint64_t clo = i ? in->ikey[i - 1] : lo, chi = i < nk ? in->ikey[i] : hi;
        int chas = i < nk ? 1 : has_hi;
        in->child[i] = build(rb, (txn_obj *)b[IB_CHILD / 8 + i], in, clo, chi, chas, ch);
        if (!in->child[i])
            break;
    }
    rb->height--;
    return n;
}

int mt_open(const mt_opts *opts, mt_tree **out)
{
    mt_tree *t;
    int rc = tree_new_pooled(opts, &t);
    if (rc)
        return rc;
    struct rebuild rb = {.pool = opts->pool};
    rc = txn_begin(opts->pool, &rb.tx);
    if (rc) {
        free(t);
        return rc;
    }
    txn_obj *h = NULL;
    rc = txn_read(rb.tx, t->anchor, t->anchor_off, &h, sizeof h);
    struct node *root = rc ? NULL : build_layer(&rb, h);
    txn_abort(rb.tx);
    atomic_store(&t->root, root);
    if (!rc)
        rc = rb.err;
    if (rc) {
        mt_close(t);
        return rc;
    }
    *out = t;
    return 0;
}
