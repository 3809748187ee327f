/* masstree.c - Masstree operations: get, put, remove, scan, and splits.
 *
 * A layer is a B+tree on 8-byte slices of the key; an entry whose key
 * goes on past its slice holds the root of the next layer (klen
 * KLEN_LAYER), where the key's next 8 bytes are the slice. Entries of one
 * leaf are ordered by (slice, klen), which is the keys' byte order. Keys
 * of one slice never straddle two leaves, so internal nodes route on the
 * slice alone. Every key longer than 8 bytes goes down a layer (no key
 * suffixes kept in leaves).
 *
 * Concurrency (after Mao, Kohler and Morris, EuroSys 2012). Readers lock
 * nothing: they take a node's version when no writer marks it dirty, read,
 * and check the version again; a split sends them right along the leaf
 * chain (a leaf's lowkey says where it begins) or back to the root, a
 * deleted node back to the root. Writers lock one leaf, and for a split
 * its right neighbour and parents, bottom-up; all locks are held until the
 * operation's transaction has committed. Lock order: child before parent,
 * left leaf before right; leftward only by trylock (unlinking a leaf).
 *
 * Structure changes. A leaf splits at a slice boundary near its middle;
 * the right half goes into a new leaf that is linked into the chain and
 * then into the parent, which splits in turn when full. A new root of the
 * top layer is written to the anchor, a new root of a lower layer to the
 * entry of the layer above. A leaf that becomes empty is unlinked if it is
 * not its parent's first child and its left neighbour's lock is free;
 * otherwise it stays for later inserts. Internal nodes and layers are
 * never removed. An unlinked leaf is freed in the unlinking transaction;
 * its memory is reused only when no reader can still hold it (the
 * transient node pool's epochs; in the pool, the engine holds the freed
 * block back for the same epochs: inpool/tree.c). Where the store can put
 * changes back (mirror), an operation that fails after its first change
 * has its transaction aborted and the DRAM nodes it changed put back
 * (op_put_back).
 *
 * The nodes are the store's (mt_store.h): every change of a node goes
 * through its calls, and the algorithm asks it the few questions where
 * the two stores differ (store_puts_back, store_parents_exact,
 * store_leaf_prev: constants the compiler folds).
 */
#include <stdlib.h>
#include <string.h>

#include "mt_node.h"

#define LDA(x) __atomic_load_n(&(x), __ATOMIC_ACQUIRE)

static inline uint64_t slice_of(const uint8_t *k, size_t len)
{
    uint64_t x = 0;
    if (len) /* k may be NULL for the empty key */
        memcpy(&x, k, len < 8 ? len : 8);
    return __builtin_bswap64(x);
}

static inline unsigned klen_of(size_t len)
{
    return len > 8 ? KLEN_LAYER : (unsigned)len;
}

static inline int ent_cmp(uint64_t ia, unsigned la, uint64_t ib, unsigned lb)
{
    if (ia != ib)
        return ia < ib ? -1 : 1;
    return la < lb ? -1 : la > lb;
}

/* Ask for all of a node's lines at once: the search reads most of them,
 * and one miss at a time would serialise (Masstree does the same). */
static inline void prefetch_node(const void *n)
{
    for (unsigned off = 0; off < NODE_BYTES; off += 64)
        __builtin_prefetch((const char *)n + off);
}

#define STABLE(n) (ready ? node_wait(n) : node_stable(n))
/* The leaf of layer `layer` whose range holds slice ik, and its stable
 * version. `ready`: no node needs node_ready (nodes_trusted), a constant
 * in each of reach_leaf's two copies. Without it, NULL when a node on the way is
 * refused (node_err) or the way is longer than any layer's (a cycle). */
static inline __attribute__((always_inline)) struct leaf *
reach_leaf_in(struct node *layer, uint64_t ik, uint64_t *vout, int ready)
{
    struct node *n;
    uint64_t v;
    unsigned height;
retry:
    n = layer;
    height = 0;
    v = STABLE(n);
    if (!ready && node_err())
        return NULL;
    while (!(v & V_ROOT)) { /* the layer grew a root above it */
        struct inode *p = LDA(n->parent);
        if (!p) {
            if (!ready) { /* a restart forgot the parents: a layer's start
                           * that is no root is a damaged root byte */
                node_fail(TXN_E_CORRUPT);
                return NULL;
            }
            goto retry;
        }
        n = &p->h;
        v = STABLE(n);
    }
    while (!(v & V_LEAF)) {
        struct inode *in = (struct inode *)n;
        unsigned nk = (unsigned)LD(in->nkeys), i = 0;
        if (nk > IWIDTH)
            nk = IWIDTH;
        while (i < nk && ik >= LD(in->ikey[i]))
            i++;
        struct node *c = LDA(in->child[i]);
        if (c)
            prefetch_node(c);
        uint64_t vc = c ? STABLE(c) : 0;
        if (!ready && node_err()) {
            if (!node_changed(n, v))
                return NULL; /* c is on the way */
            node_err_clear(); /* n changed under the read: c may be off
                               * the way; n again */
            c = NULL;
        }
        if (c && !node_changed(n, v)) {
            /* a root below a node (damaged root byte), or a cycle */
            if (!ready && ((vc & V_ROOT) || ++height > MT_MAX_HEIGHT)) {
                node_fail(TXN_E_CORRUPT);
                return NULL;
            }
            n = c;
            v = vc;
            continue;
        }
        uint64_t v2 = STABLE(n);
        if ((v2 ^ v) >= V_SPLIT_ONE || (v2 & V_DELETED))
            goto retry;
        v = v2;
    }
    *vout = v;
    return (struct leaf *)n;
}

static struct leaf *reach_leaf(struct node *layer, uint64_t ik, uint64_t *vout)
{
    if (!nodes_trusted())
        return reach_leaf_in(layer, ik, vout, 0);
    return reach_leaf_in(layer, ik, vout, 1);
}

#undef STABLE

/* Whether leaf nx, l's next, is refused or is not right of l (a cycle of
 * next pointers): low keys grow along the chain (a split's new leaf
 * starts at a slice above all that stay, an unlink keeps both
 * neighbours' low keys). Checked in an execution that did not make the
 * tree only. */
static int next_bad(struct leaf *l, struct leaf *nx)
{
    node_ready(&nx->h);
    if (node_err() || (!nodes_trusted() && LD(nx->lowkey) <= LD(l->lowkey))) {
        node_fail(TXN_E_CORRUPT);
        return 1;
    }
    return 0;
}

/* From leaf l (version *v), the leaf right of it that holds slice ik;
 * NULL if next_bad. */
static struct leaf *walk_right(struct leaf *l, uint64_t ik, uint64_t *v)
{
    while (!(*v & V_DELETED)) {
        struct leaf *nx = LDA(l->next);
        if (nx && next_bad(l, nx))
            return NULL;
        if (!nx || ik < LD(nx->lowkey))
            break;
        l = nx;
        *v = node_stable(&l->h);
    }
    return l;
}

/* Slot of (ik, kl) in l under permutation perm, or -1; *pos is its sorted
 * position or where it would go. */
static int leaf_find(struct leaf *l, uint64_t perm, uint64_t ik, unsigned kl, unsigned *pos)
{
    unsigned n = perm_count(perm), i;
    if (n > LWIDTH)
        n = LWIDTH;
    for (i = 0; i < n; i++) {
        unsigned s = perm_slot(perm, i);
        int c = ent_cmp(LD(l->ikey[s]), LD(l->klen[s]), ik, kl);
        if (c >= 0) {
            *pos = i;
            return c == 0 ? (int)s : -1;
        }
    }
    *pos = n;
    return -1;
}

int mt_get(mt_tree *t, const void *key, size_t len, uint64_t *val)
{
    const uint8_t *k = key;
    int rc;
    if (len > MT_MAX_KEY || (!key && len))
        return TXN_E_INVAL;
    if ((rc = rd_begin(t)))
        return rc;
    epoch_enter();
    struct node *layer = atomic_load_explicit(&t->root, memory_order_acquire);
    for (;;) {
        uint64_t ik = slice_of(k, len), v, x = 0;
        unsigned kl = klen_of(len), pos;
        int s;
        struct leaf *l = reach_leaf(layer, ik, &v);
        for (;;) {
            if (!l)
                break;
            if (v & V_DELETED) {
                l = reach_leaf(layer, ik, &v);
                continue;
            }
            s = leaf_find(l, LD(l->perm), ik, kl, &pos);
            if (s >= 0)
                x = LDA(l->val[s]);
            if (!node_changed(&l->h, v))
                break;
            v = node_stable(&l->h);
            l = walk_right(l, ik, &v);
        }
        if (!l) { /* a refused node (rd_end answers node_err) */
            rc = TXN_E_CORRUPT;
            break;
        }
        if (s < 0) {
            rc = 1;
            break;
        }
        if (kl != KLEN_LAYER) {
            *val = x;
            rc = 0;
            break;
        }
        layer = (struct node *)x;
        k += 8;
        len -= 8;
    }
    epoch_exit();
    int rrc = rd_end(t);
    return rrc ? rrc : rc;
}

/* Lock and return the leaf of `layer` that holds slice ik. reach_leaf's
 * leaf held ik at its version v (a split keeps a leaf dirty until its
 * parent has the new sibling); only a split moves part of a leaf's range
 * away (an unlink marks the leaf deleted, a neighbour's unlink widens
 * it), so with its split count as in v the locked leaf holds ik still, and
 * the next leaf's low key, a cache miss, is read only after a split. */
static struct leaf *leaf_locked(struct op *o, struct node *layer, uint64_t ik)
{
    for (;;) {
        uint64_t v;
        struct leaf *l = reach_leaf(layer, ik, &v);
        if (!l) {
            o->err = o->err ? o->err : node_err();
            return NULL;
        }
        op_lock(o, &l->h);
        uint64_t w = atomic_load_explicit(&l->h.version, memory_order_relaxed);
        if (!(w & V_DELETED) && (w ^ v) < V_SPLIT_ONE)
            return l;
        for (;;) {
            if (atomic_load_explicit(&l->h.version, memory_order_relaxed) & V_DELETED)
                break;
            struct leaf *nx = l->next;
            if (nx && next_bad(l, nx)) {
                op_unlock(o, &l->h);
                o->err = o->err ? o->err : node_err();
                return NULL;
            }
            if (!nx || ik < nx->lowkey)
                return l;
            op_lock(o, &nx->h);
            op_unlock(o, &l->h);
            l = nx;
        }
        op_unlock(o, &l->h);
    }
}

static unsigned child_index(struct inode *p, struct node *n);
static void set_parent(struct node *c, struct inode *p);

/* The parent of n (locked by o, not a root), found from its layer's root
 * by o's key, whose way (reach_leaf's) goes through n (o's leaf or one
 * of its parents): locked, and checked to hold n. For a parent pointer
 * forgotten at a restart or stale (!store_parents_exact). NULL, and
 * o->err, if a node on the way is refused or the way is longer than any
 * layer's. */
static struct inode *find_parent(struct op *o, struct node *n)
{
    uint64_t key = o->ik[o->depth];
    for (;;) {
        struct node *c = o->layer[o->depth];
        uint64_t v = node_stable(c);
        while (!(v & V_ROOT)) { /* a root split in this execution knows its parent */
            struct inode *p = LDA(c->parent);
            if (!p)
                break;
            c = &p->h;
            v = node_stable(c);
        }
        unsigned height = 0;
        while (c != n && !(node_stable(c) & V_LEAF)) {
            if (node_err() || ++height > MT_MAX_HEIGHT)
                break;
            struct inode *in = (struct inode *)c;
            unsigned nk = (unsigned)LD(in->nkeys), i = 0;
            if (nk > IWIDTH)
                nk = IWIDTH;
            while (i < nk && key >= LD(in->ikey[i]))
                i++;
            struct node *d = LDA(in->child[i]);
            if (d == n) {
                op_lock(o, &in->h);
                unsigned j = child_index(in, n);
                if (j <= in->nkeys && in->child[j] == n &&
                    !(atomic_load_explicit(&in->h.version, memory_order_relaxed) & V_DELETED)) {
                    set_parent(n, in);
                    return in;
                }
                op_unlock(o, &in->h);
                break;
            }
            if (!d)
                break;
            c = d;
        }
        if (node_err() || height > MT_MAX_HEIGHT) {
            node_fail(TXN_E_CORRUPT);
            o->err = o->err ? o->err : node_err();
            return NULL;
        }
        __builtin_ia32_pause();
    }
}

/* The parent of n (locked by o), locked, or NULL if n is a root (or on a
 * refused node: node_err). */
static struct inode *locked_parent(struct op *o, struct node *n)
{
    for (;;) {
        if (atomic_load_explicit(&n->version, memory_order_relaxed) & V_ROOT)
            return NULL;
        struct inode *p = LDA(n->parent);
        if (!p) /* forgotten at a restart */
            return find_parent(o, n);
        op_lock(o, &p->h);
        if (LDA(n->parent) == p) {
            if (store_parents_exact())
                return p;
            unsigned j = child_index(p, n); /* it may be stale (insert_up) */
            if (j <= p->nkeys && p->child[j] == n)
                return p;
            op_unlock(o, &p->h);
            return find_parent(o, n);
        }
        op_unlock(o, &p->h);
    }
}

static void set_parent(struct node *c, struct inode *p)
{
    PST(c->parent, p);
}

/* An internal node that split_prepare made for this split. */
static struct inode *spare_inode(struct op *o)
{
    return o->nspare ? o->spare[--o->nspare] : inode_new(o);
}

/* A new root above old root n (split into n and r at key): the anchor or
 * the entry of the layer above names it. */
static void new_root(struct op *o, struct node *n, struct node *r, uint64_t key, int depth)
{
    struct inode *q = spare_inode(o);
    if (!q)
        return;
    node_set_root(o, &q->h, 1);
    PST(q->nkeys, 1);
    PST(q->ikey[0], key);
    PST(q->child[0], n);
    PST(q->child[1], r);
    w_image(o, &q->h);
    set_parent(n, q);
    set_parent(r, q);
    node_set_root(o, n, 0);
    if (depth == 0) { /* no operation starts at q before it committed
                       * (op_put_back retires it; a reader reaches it
                       * from n by the parent pointer, as n is no root) */
        w_anchor(o, &q->h);
        root_at_commit(o, &q->h);
        return;
    }
    struct leaf *ul = o->upper; /* split_prepare locked and readied it */
    unsigned pos;
    int s = leaf_find(ul, ul->perm, o->ik[depth - 1], KLEN_LAYER, &pos);
    if (s >= 0) /* the entry is there: its layer is never removed */
        w_layer_root(o, ul, (unsigned)s, &q->h);
}

static unsigned child_index(struct inode *p, struct node *n)
{
    unsigned i = 0;
    while (i < p->nkeys && p->child[i] != n)
        i++;
    return i;
}

/* Insert key and its right child r at position i of p (locked, readied,
 * not full). */
static void inode_insert(struct op *o, struct inode *p, unsigned i, uint64_t key, struct node *r)
{
    unsigned nk = (unsigned)p->nkeys;
    node_mark(&p->h, V_INSERTING);
    for (unsigned j = nk; j > i; j--) {
        PST(p->ikey[j], p->ikey[j - 1]);
        PST(p->child[j + 1], p->child[j]);
    }
    PST(p->ikey[i], key);
    set_parent(r, p);
    PST(p->child[i + 1], r);
    PST(p->nkeys, nk + 1);
    w_range(o, &p->h, IB_IKEY + 8 * i, nk + 1 - i);
    w_range_ptr(o, &p->h, IB_CHILD + 8 * (i + 1), nk + 1 - i);
    w_u64(o, &p->h, IB_NKEYS, nk + 1);
}

/* Split full p (locked, readied) adding key and its right child r at
 * position i: 16 keys and 17 children, 8 keys stay, 1 goes up (*up) with
 * the new right node, returned; NULL if there is none (o->err). */
static struct inode *inode_split(struct op *o, struct inode *p, unsigned i, uint64_t key,
                                 struct node *r, uint64_t *up)
{
    enum { LEFT = 8 };
    uint64_t K[IWIDTH + 1];
    struct node *C[IWIDTH + 2];
    for (unsigned j = 0, a = 0; j <= IWIDTH; j++)
        K[j] = j == i ? key : p->ikey[a++];
    for (unsigned j = 0, a = 0; j <= IWIDTH + 1; j++)
        C[j] = j == i + 1 ? r : p->child[a++];
    struct inode *q = spare_inode(o);
    if (!q)
        return NULL;
    node_mark(&p->h, V_SPLITTING);
    PST(q->nkeys, IWIDTH - LEFT);
    for (unsigned j = 0; j < IWIDTH - LEFT; j++)
        PST(q->ikey[j], K[LEFT + 1 + j]);
    for (unsigned j = 0; j <= IWIDTH - LEFT; j++) {
        PST(q->child[j], C[LEFT + 1 + j]);
        /* without exact parents, only nodes o holds: another thread may
         * be logging the others whole (their stale pointer is found out
         * by locked_parent) */
        if (store_parents_exact() || op_holds(o, q->child[j]))
            set_parent(q->child[j], q);
    }
    w_image(o, &q->h);
    for (unsigned j = 0; j < LEFT; j++)
        PST(p->ikey[j], K[j]);
    for (unsigned j = 0; j <= LEFT; j++) {
        PST(p->child[j], C[j]);
        if (C[j] == r)
            set_parent(r, p);
    }
    PST(p->nkeys, LEFT);
    w_range(o, &p->h, IB_IKEY, LEFT);
    w_range_ptr(o, &p->h, IB_CHILD, LEFT + 1);
    w_u64(o, &p->h, IB_NKEYS, LEFT);
    *up = K[LEFT];
    return q;
}

/* Link r, the new right sibling of n (both locked), under n's parent at
 * key, splitting parents as they fill. */
static void insert_up(struct op *o, struct node *n, struct node *r, uint64_t key, int depth)
{
    for (;;) {
        struct inode *p = locked_parent(o, n);
        if (!p) {
            if (!node_err())
                new_root(o, n, r, key, depth);
            return;
        }
        unsigned i = child_index(p, n);
        node_will_change(o, &p->h);
        if (p->nkeys < IWIDTH) {
            inode_insert(o, p, i, key, r);
            return;
        }
        struct inode *q = inode_split(o, p, i, key, r, &key);
        if (!q)
            return;
        n = &p->h;
        r = &q->h;
    }
}

/* Encode a permutation: count n, slots a[0..n-1] in key order, then the
 * free slots of a leaf (those < LWIDTH not in a), then unused slot 14. */
static uint64_t perm_of(const unsigned *a, unsigned n)
{
    unsigned used[PERM_SLOTS] = {0}, all[PERM_SLOTS], m = 0;
    for (unsigned j = 0; j < n; j++) {
        all[m++] = a[j];
        used[a[j]] = 1;
    }
    for (unsigned s = 0; s < PERM_SLOTS; s++)
        if (!used[s])
            all[m++] = s;
    uint64_t p = n;
    for (unsigned j = 0; j < PERM_SLOTS; j++)
        p |= (uint64_t)all[j] << (4 * j + 4);
    return p;
}

/* Before a split of leaf l changes anything: lock the parents it will
 * change (each full one, and the first with room), have l and them logged
 * (inpool) or opened to write (mirror: node_will_change), and make the new
 * leaf and the internal nodes (one per full parent, one for a new root).
 * A new root of a layer below the top one changes the layer's entry in
 * the leaf above (new_root): that leaf is locked and logged here too, so
 * its value store cannot fail; a new top root, the anchor. A full
 * pool then fails the put alone, with the tree as it was (o->clean).
 * Exact: a locked parent keeps its keys, and its child keeps it as
 * parent. */
static struct leaf *split_prepare(struct op *o, struct leaf *l)
{
    unsigned need = 0;
    struct node *n = &l->h;
    node_will_change(o, n);
    for (;;) {
        struct inode *p = locked_parent(o, n);
        if (node_err()) {
            o->err = o->err ? o->err : node_err();
            break;
        }
        if (!p) {
            need++;
            if (o->depth > 0) { /* for new_root, locked from here on */
                o->upper = leaf_locked(o, o->layer[o->depth - 1], o->ik[o->depth - 1]);
                if (o->upper)
                    node_will_change(o, &o->upper->h);
            } else
                anchor_will_change(o);
            break;
        }
        node_will_change(o, &p->h);
        if (p->nkeys < IWIDTH)
            break;
        need++;
        n = &p->h;
    }
    if (need > OP_SPARE)
        o->err = o->err ? o->err : TXN_E_INVAL;
    struct leaf *r = o->err ? NULL : leaf_new(o);
    for (unsigned i = 0; r && i < need && !o->err; i++) {
        struct inode *q = inode_new(o);
        if (q)
            o->spare[o->nspare++] = q;
    }
    if (!o->err)
        return r;
    o->clean = 1;
    return NULL;
}

/* A split's entries: l's in key order with the new one at pos. */
struct split {
    uint64_t K[LWIDTH + 1], V[LWIDTH + 1];
    unsigned L[LWIDTH + 1], S[LWIDTH + 1]; /* klen; slot in l */
};

/* The entries of full leaf l and (ik, kl, v) at pos, and the split point
 * nearest the middle between two slices (there is one: a slice has at
 * most 10 entries, klen 0-9); 0 if none. */
static unsigned split_point(const struct leaf *l, unsigned pos, uint64_t ik, unsigned kl,
                            uint64_t v, struct split *e)
{
    enum { N = LWIDTH + 1, MID = N / 2 };
    uint64_t perm = l->perm;
    for (unsigned j = 0, i = 0; j < N; j++) {
        if (j == pos) { /* new: no slot yet */
            e->K[j] = ik, e->L[j] = kl, e->V[j] = v, e->S[j] = PERM_SLOTS;
            continue;
        }
        unsigned s = perm_slot(perm, i++);
        e->K[j] = l->ikey[s], e->L[j] = l->klen[s], e->V[j] = l->val[s], e->S[j] = s;
    }
    for (unsigned d = 0; d < N; d++) {
        if (MID + d < N && e->K[MID + d - 1] != e->K[MID + d])
            return MID + d;
        if (d < MID && e->K[MID - d - 1] != e->K[MID - d])
            return MID - d;
    }
    return 0;
}

/* Split full leaf l, adding (ik, kl, v) at sorted position pos. */
static void leaf_split(struct op *o, struct leaf *l, unsigned pos, uint64_t ik, unsigned kl,
                       uint64_t v)
{
    enum { N = LWIDTH + 1 };
    struct split e;
    unsigned a[N], p = split_point(l, pos, ik, kl, v, &e);
    if (!p) {
        o->err = o->err ? o->err : TXN_E_INVAL;
        return;
    }
    struct leaf *nx = l->next;
    if (nx && store_leaf_prev()) { /* before the parents: left to right, then up */
        op_lock(o, &nx->h);
        node_will_change(o, &nx->h); /* its prev pointer */
    }
    struct leaf *r = split_prepare(o, l);
    if (!r)
        return;
    node_mark(&l->h, V_SPLITTING);
    PST(r->lowkey, e.K[p]);
    for (unsigned j = p; j < N; j++) {
        PST(r->ikey[j - p], e.K[j]);
        PST8(r->klen[j - p], e.L[j]);
        PST(r->val[j - p], e.V[j]);
        a[j - p] = j - p;
    }
    PST(r->perm, perm_of(a, N - p));
    PST(r->next, nx);
    leaf_prev_init(r, l);
    /* r's parent stays NULL until insert_up links r under the parent it
     * has locked: l's parent may change until then (an internal split) */
    w_image(o, &r->h);
    if (nx)
        w_prev(o, nx, r);
    w_ptr(o, &l->h, LB_NEXT, r);
    /* l keeps entries 0..p-1 in their slots; the new one, if it is among
     * them, takes the first slot no kept entry uses */
    if (pos < p) {
        unsigned used[PERM_SLOTS] = {0}, s = 0;
        for (unsigned j = 0; j < p; j++)
            if (j != pos)
                used[e.S[j]] = 1;
        while (used[s])
            s++;
        e.S[pos] = s;
        w_entry(o, l, s, ik, kl, v);
    }
    w_u64(o, &l->h, LB_PERM, perm_of(e.S, p));
    atomic_fetch_add_explicit(&o->t->splits, 1, memory_order_relaxed);
    o->splits++;
    insert_up(o, &l->h, &r->h, e.K[p], o->depth);
}

/* A new layer holding only key k (len bytes) with value v: a chain of
 * one-entry leaves, returned as its root. */
static struct leaf *layer_chain(struct op *o, const uint8_t *k, size_t len, uint64_t v)
{
    unsigned kl = klen_of(len);
    if (kl == KLEN_LAYER) {
        struct leaf *sub = layer_chain(o, k + 8, len - 8, v);
        if (!sub)
            return NULL;
        v = (uint64_t)sub;
    }
    struct leaf *l = leaf_new(o);
    if (!l)
        return NULL;
    node_set_root(o, &l->h, 1);
    PST(l->ikey[0], slice_of(k, len));
    PST8(l->klen[0], kl);
    PST(l->val[0], v);
    PST(l->perm, perm_insert(PERM_EMPTY, 0));
    w_image(o, &l->h);
    return l;
}

/* Unlinking empty leaf l: its parent p (l is its child i of nk keys),
 * its neighbours pv (left) and nx (right). */
struct unlink {
    struct inode *p;
    struct leaf *pv, *nx;
    unsigned i, nk;
};

static int is_deleted(struct node *n)
{
    return (atomic_load_explicit(&n->version, memory_order_relaxed) & V_DELETED) != 0;
}

/* The unlink's locks by l's prev pointer (store_leaf_prev): pv without
 * waiting (leftward), then nx and the parent. 1 and *u, or 0: nothing
 * held but l. */
static int unlink_lock_by_prev(struct op *o, struct leaf *l, struct unlink *u)
{
    struct leaf *pv = leaf_prev(l);
    if (!pv || !op_trylock(o, &pv->h))
        return 0;
    if (pv->next != l || is_deleted(&pv->h)) {
        op_unlock(o, &pv->h);
        return 0;
    }
    struct leaf *nx = l->next;
    if (nx)
        op_lock(o, &nx->h);
    struct inode *p = locked_parent(o, &l->h);
    unsigned i = p ? child_index(p, &l->h) : 0;
    if (i == 0) { /* l's range would have to move into another parent */
        if (p)
            op_unlock(o, &p->h);
        if (nx)
            op_unlock(o, &nx->h);
        op_unlock(o, &pv->h);
        return 0;
    }
    *u = (struct unlink){p, pv, nx, i, (unsigned)p->nkeys};
    return 1;
}

/* The unlink's locks without prev pointers: l's left neighbour is the
 * child left of it in their parent (l is never a first child here); the
 * parent first (child before parent), then the neighbour without
 * waiting. 1 and *u; 0: nothing held but l; -1: a node on the way was
 * refused (node_err), nothing held but l. */
static int unlink_lock_by_parent(struct op *o, struct leaf *l, struct unlink *u)
{
    struct inode *p = locked_parent(o, &l->h);
    if (!p)
        return -1;
    unsigned i = child_index(p, &l->h), nk = (unsigned)p->nkeys;
    struct leaf *pv = i > 0 && i <= nk ? (struct leaf *)p->child[i - 1] : NULL;
    if (!pv || !op_trylock(o, &pv->h)) {
        op_unlock(o, &p->h);
        return node_err() ? -1 : 0; /* pv refused */
    }
    int got = node_err() ? -1 : pv->next == l && !is_deleted(&pv->h);
    if (got <= 0) {
        op_unlock(o, &pv->h);
        op_unlock(o, &p->h);
        return got;
    }
    *u = (struct unlink){p, pv, l->next, i, nk};
    return 1;
}

/* Ready what the unlink changes (logged, or opened to write), and l's
 * object to be freed with the transaction, before any change. 1, or 0 if
 * that failed: where the store puts back, before the remove changed
 * anything, which then fails alone (cow: the copies need room); else
 * after the remove, which stands: l stays, empty. */
static int unlink_ready(struct op *o, struct leaf *l, const struct unlink *u)
{
    node_will_change(o, &u->p->h);  /* logged whole before its keys move */
    node_will_change(o, &u->pv->h); /* and pv before its next pointer */
    if (u->nx && store_leaf_prev())
        node_will_change(o, &u->nx->h); /* its prev pointer */
    node_discard(o, &l->h);
    if (!o->err)
        return 1;
    if (store_puts_back()) {
        o->clean = 1;
        return 0;
    }
    o->err = 0;
    op_unlock(o, &u->pv->h);
    op_unlock(o, &u->p->h);
    return 0;
}

/* Ready the unlink of leaf l (locked), which its remove empties, if that
 * takes no waiting to the left: 1, unlink_do follows, and nothing in it
 * fails for want of room; 0, l stays, empty. */
static int unlink_prepare(struct op *o, struct leaf *l, struct unlink *u)
{
    if (atomic_load_explicit(&l->h.version, memory_order_relaxed) & V_ROOT)
        return 0;
    int got = store_leaf_prev() ? unlink_lock_by_prev(o, l, u) : unlink_lock_by_parent(o, l, u);
    if (got < 0) { /* refused on the way: l stays, the remove stands and
                    * answers; the damage shows where it is in the way */
        node_err_clear();
        o->err = 0;
        return 0;
    }
    return got && unlink_ready(o, l, u);
}

static void unlink_do(struct op *o, struct leaf *l, const struct unlink *u)
{
    struct inode *p = u->p;
    unsigned i = u->i, nk = u->nk;
    node_mark(&l->h, V_DELETED | V_SPLITTING);
    node_mark(&p->h, V_INSERTING);
    for (unsigned j = i; j < nk; j++) {
        PST(p->ikey[j - 1], p->ikey[j]);
        PST(p->child[j], p->child[j + 1]);
    }
    PST(p->nkeys, nk - 1);
    w_range(o, &p->h, IB_IKEY + 8 * (i - 1), nk - i);
    w_range_ptr(o, &p->h, IB_CHILD + 8 * i, nk - i);
    w_u64(o, &p->h, IB_NKEYS, nk - 1);
    if (u->nx)
        w_prev(o, u->nx, u->pv);
    /* pv is not marked (its readers go on): in DRAM once committed, so
     * that no scan passes l by for a remove that then fails */
    w_ptr_at_commit(o, &u->pv->h, LB_NEXT, u->nx);
    node_gone(o, &l->h);
    atomic_fetch_add_explicit(&o->t->unlinked, 1, memory_order_relaxed);
    o->unlinks++;
}

enum { PUT, REMOVE };

/* Remove the entry at sorted position pos of leaf l (locked, permutation
 * perm); unlink l if that empties it and unlink_prepare readies it. */
static void remove_entry(struct op *o, struct leaf *l, uint64_t perm, unsigned pos)
{
    struct unlink u;
    int last = perm_count(perm) == 1, go = 0;
    w_remove_begin(o, l);
    if (store_puts_back()) /* before the remove changes anything */
        go = !o->err && last && unlink_prepare(o, l, &u);
    w_perm(o, l, perm_remove(perm, pos));
    if (!store_puts_back()) /* after it: a failure leaves the remove done */
        go = !o->err && last && unlink_prepare(o, l, &u);
    if (go && !o->err)
        unlink_do(o, l, &u);
}

/* The value of the entry in slot s (sorted position pos): one word,
 * readers need not retry (they may read it before its transaction
 * commits). */
static void update_entry(struct op *o, struct leaf *l, uint64_t perm, unsigned pos, unsigned s,
                         uint64_t ik, unsigned kl, uint64_t val)
{
    int f = w_value_try(o, l, s, val);
    if (f >= 0) { /* inpool, INCLL_MOVE: rather than log the node, the
                   * entry moves to a slot free since the start of the
                   * epoch, an insert and a removal in one permutation store
                   * (the epoch's rollback of it brings the old slot back) */
        w_move_begin(o, l);
        w_entry(o, l, perm_slot(perm, (unsigned)f), ik, kl, val);
        w_perm(o, l, perm_swap(perm, pos, (unsigned)f));
    }
}

/* Insert key k (len bytes from the slice ik, kl) with value val at sorted
 * position pos of leaf l: a new layer below it first when the key goes
 * on past the slice, a split when l is full. 1, or 0 when it made new
 * nodes only (o->err, o->clean). */
static int insert_entry(struct op *o, struct leaf *l, uint64_t perm, unsigned pos, uint64_t ik,
                        unsigned kl, const uint8_t *k, size_t len, uint64_t val)
{
    uint64_t ev = val;
    if (kl == KLEN_LAYER) {
        struct leaf *sub = layer_chain(o, k + 8, len - 8, val);
        if (!sub) {
            o->clean = 1;
            return 0;
        }
        ev = (uint64_t)sub;
    }
    if (perm_count(perm) < LWIDTH) {
        w_insert_begin(o, l);
        w_entry(o, l, perm_slot(perm, perm_count(perm)), ik, kl, ev);
        w_perm(o, l, perm_insert(perm, pos));
    } else {
        leaf_split(o, l, pos, ik, kl, ev);
    }
    return 1;
}

/* One put or remove: 1 inserted/removed, 0 updated/absent, or an error. */
static int modify_once(mt_tree *t, int what, const void *key, size_t len, uint64_t val)
{
    const uint8_t *k = key;
    struct op o;
    int ret = 0, rc;
    if (len > MT_MAX_KEY || (!key && len))
        return TXN_E_INVAL;
    epoch_enter();
    rc = op_begin(&o, t);
    if (rc) {
        epoch_exit();
        return rc;
    }
    struct node *layer = atomic_load_explicit(&t->root, memory_order_acquire);
    for (;;) {
        uint64_t ik = slice_of(k, len);
        unsigned kl = klen_of(len), pos;
        o.layer[o.depth] = layer;
        o.ik[o.depth] = ik;
        struct leaf *l = leaf_locked(&o, layer, ik);
        if (!l) { /* a node refused on the way (o.err): nothing changed */
            o.clean = 1;
            break;
        }
        uint64_t perm = l->perm;
        int s = leaf_find(l, perm, ik, kl, &pos);
        if (s >= 0 && kl == KLEN_LAYER) { /* on to the next layer */
            layer = (struct node *)l->val[s];
            op_unlock(&o, &l->h);
            o.depth++;
            k += 8;
            len -= 8;
            continue;
        }
        if (what == REMOVE) {
            if (s >= 0)
                remove_entry(&o, l, perm, pos);
            ret = s >= 0;
        } else if (s >= 0) {
            update_entry(&o, l, perm, pos, (unsigned)s, ik, kl, val);
        } else {
            ret = insert_entry(&o, l, perm, pos, ik, kl, k, len, val);
        }
        break;
    }
    if (o.err && o.clean)
        op_drop_new(&o);
    rc = op_end(&o);
    epoch_exit();
    return rc ? rc : ret;
}

static int modify(mt_tree *t, int what, const void *key, size_t len, uint64_t val)
{
    int rc = modify_once(t, what, key, len, val);
    if (store_retry(t, rc)) /* the thread holds no transaction now */
        rc = modify_once(t, what, key, len, val);
    return rc;
}

int mt_put(mt_tree *t, const void *key, size_t len, uint64_t val)
{
    return modify(t, PUT, key, len, val);
}

int mt_remove(mt_tree *t, const void *key, size_t len)
{
    return modify(t, REMOVE, key, len, 0);
}

/* ---- scans */

struct scan {
    mt_scan_fn fn;
    void *arg;
    size_t max, count;
    int stop, err;
    uint8_t key[MT_MAX_KEY + 8];
};

/* A consistent copy of a leaf's entries in key order. */
struct snap {
    unsigned n;
    uint64_t ik[LWIDTH], val[LWIDTH];
    unsigned kl[LWIDTH];
    struct leaf *next;
};

static struct leaf *snapshot(struct node *layer, struct leaf *l, uint64_t v, uint64_t cik,
                             struct snap *sn)
{
    for (;;) {
        if (!l) /* refused (reach_leaf, walk_right) */
            return NULL;
        if (v & V_DELETED) {
            l = reach_leaf(layer, cik, &v);
            continue;
        }
        uint64_t perm = LD(l->perm);
        sn->n = perm_count(perm) > LWIDTH ? LWIDTH : perm_count(perm);
        for (unsigned i = 0; i < sn->n; i++) {
            unsigned s = perm_slot(perm, i);
            sn->ik[i] = LD(l->ikey[s]);
            sn->kl[i] = LD(l->klen[s]);
            sn->val[i] = LDA(l->val[s]);
        }
        sn->next = LDA(l->next);
        if (!node_changed(&l->h, v))
            return l;
        v = node_stable(&l->h);
        l = walk_right(l, cik, &v);
    }
}

static void scan_fail(struct scan *s, int rc)
{
    s->err = rc;
    s->stop = 1;
}

/* Keys of `layer` from (start, slen) on (start NULL: all), under the
 * `depth` bytes of prefix already in s->key. A layer below a key's
 * MT_MAX_KEY bytes, a leaf that is not right of the one before (a cycle)
 * or a refused node (in-pool store): TXN_E_CORRUPT. */
static void scan_layer(struct scan *s, struct node *layer, size_t depth, const uint8_t *start,
                       size_t slen)
{
    uint64_t cik = start ? slice_of(start, slen) : 0, v;
    unsigned ckl = start ? klen_of(slen) : 0;
    int inclusive = 1;
    struct snap sn;
    struct leaf *l = reach_leaf(layer, cik, &v);
    for (;;) {
        l = snapshot(layer, l, v, cik, &sn);
        if (!l) {
            scan_fail(s, TXN_E_CORRUPT);
            return;
        }
        for (unsigned i = 0; i < sn.n; i++) {
            int c = ent_cmp(sn.ik[i], sn.kl[i], cik, ckl);
            if (c < 0 || (c == 0 && !inclusive))
                continue;
            uint64_t be = __builtin_bswap64(sn.ik[i]);
            memcpy(s->key + depth, &be, 8);
            if (sn.kl[i] == KLEN_LAYER) {
                int from = start && inclusive && c == 0;
                if (depth + 8 >= MT_MAX_KEY) {
                    scan_fail(s, TXN_E_CORRUPT);
                    return;
                }
                scan_layer(s, (struct node *)sn.val[i], depth + 8, from ? start + 8 : NULL,
                           from ? slen - 8 : 0);
            } else {
                s->count++;
                if (s->fn(s->key, depth + sn.kl[i], sn.val[i], s->arg) || s->count >= s->max)
                    s->stop = 1;
            }
            if (s->stop)
                return;
            cik = sn.ik[i];
            ckl = sn.kl[i];
            inclusive = 0;
        }
        if (!sn.next)
            return;
        if (next_bad(l, sn.next)) {
            scan_fail(s, TXN_E_CORRUPT);
            return;
        }
        l = sn.next;
        v = node_stable(&l->h);
    }
}

long mt_scan(mt_tree *t, const void *start, size_t len, size_t max, mt_scan_fn fn, void *arg)
{
    if (len > MT_MAX_KEY || !fn)
        return TXN_E_INVAL;
    if (!max)
        return 0;
    struct scan s = {.fn = fn, .arg = arg, .max = max};
    int rc = rd_begin(t);
    if (rc)
        return rc;
    epoch_enter();
    scan_layer(&s, atomic_load_explicit(&t->root, memory_order_acquire), 0, start, len);
    epoch_exit();
    rc = rd_end(t);
    return rc ? rc : s.err ? s.err : (long)s.count;
}
