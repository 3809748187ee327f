/* mirror/mirror.c - the mirror store's writes (mt_store.h): each change
 * of a node a DRAM store and a txn_write to the node's mirror object; the
 * DRAM nodes an operation changed saved before their first change and put
 * back when it fails (op_put_back).
 *
 * Invariants (what a reader of the DRAM tree and of the mirrors relies on):
 *  M1 A write goes to the mirror first; the DRAM store is made only when
 *     the mirror's took (after an error the DRAM tree changes no more).
 *  M2 Every existing node an operation changes is opened to write
 *     (node_will_change) and saved before its first change, so that an
 *     error after it, or a failed commit, can put the DRAM tree back.
 *  M3 Pointers readers follow without a version mark (the top root, a
 *     layer's entry above its new root, an unlinked leaf's left
 *     neighbour's next) reach DRAM only once the operation committed.
 */
#include "mt_node.h"

#include <string.h>

static inline uint64_t *word(struct node *n, size_t off)
{
    return (uint64_t *)(BODY(n) + off);
}

static inline txn_obj *mirror_of(uint64_t p)
{
    return p ? ((struct node *)p)->pobj : NULL;
}

static void mirror_write(struct op *o, struct node *n, size_t off, const void *src, size_t len)
{
    if (o->tx && !o->err)
        o->err = txn_write(o->tx, n->pobj, off, src, len);
}

/* The word writes: the mirror first, the DRAM store only when it took
 * (after an error the DRAM tree changes no more: a failure before any
 * change leaves it as it was). */
void w_u64(struct op *o, struct node *n, size_t off, uint64_t v)
{
    mirror_write(o, n, off, &v, 8);
    if (!o->err)
        ST(*word(n, off), v);
}

void w_ptr(struct op *o, struct node *n, size_t off, void *p)
{
    txn_obj *h = mirror_of((uint64_t)p);
    mirror_write(o, n, off, &h, 8);
    if (!o->err)
        __atomic_store_n(word(n, off), (uint64_t)p, __ATOMIC_RELEASE);
}

void w_ptr_at_commit(struct op *o, struct node *n, size_t off, void *p)
{
    txn_obj *h = mirror_of((uint64_t)p);
    mirror_write(o, n, off, &h, 8);
    if (o->err)
        return;
    if (o->st.nlater == 2) { /* cannot happen: an unlink's, or a new root's */
        o->err = TXN_E_INVAL;
        return;
    }
    o->st.later[o->st.nlater].w = word(n, off);
    o->st.later[o->st.nlater++].v = (uint64_t)p;
}

void root_at_commit(struct op *o, struct node *q)
{
    if (!o->err)
        o->st.new_top = q;
}

void w_layer_root(struct op *o, struct leaf *ul, unsigned s, struct node *q)
{
    w_ptr_at_commit(o, &ul->h, LB_VAL + 8 * (size_t)s, q);
}

void op_committed(struct op *o)
{
    for (int i = 0; i < o->st.nlater; i++)
        __atomic_store_n(o->st.later[i].w, o->st.later[i].v, __ATOMIC_RELEASE);
    if (o->st.new_top)
        atomic_store_explicit(&o->t->root, o->st.new_top, memory_order_release);
    if (o->st.gone)
        node_retire(o->st.gone);
}

void w_u8(struct op *o, struct node *n, size_t off, uint8_t v)
{
    mirror_write(o, n, off, &v, 1);
    if (!o->err)
        __atomic_store_n((uint8_t *)BODY(n) + off, v, __ATOMIC_RELAXED);
}

void w_range(struct op *o, struct node *n, size_t off, unsigned count)
{
    if (count)
        mirror_write(o, n, off, word(n, off), 8 * (size_t)count);
}

void w_range_ptr(struct op *o, struct node *n, size_t off, unsigned count)
{
    uint64_t h[IWIDTH + 1];
    if (!o->tx || !count)
        return;
    for (unsigned i = 0; i < count; i++)
        h[i] = (uint64_t)mirror_of(word(n, off)[i]);
    mirror_write(o, n, off, h, 8 * (size_t)count);
}

static struct node *node_new(struct op *o, uint64_t kind, size_t body)
{
    struct node *n = node_alloc();
    if (!n) {
        o->err = o->err ? o->err : TXN_E_NOMEM;
        return NULL;
    }
    if (o->tx) {
        int rc = txn_alloc(o->tx, body, &n->pobj);
        if (rc) {
            node_free_now(n);
            o->err = o->err ? o->err : rc;
            return NULL;
        }
    }
    *word(n, 0) = kind;
    op_made(o, n, kind == KIND_LEAF);
    return n;
}

/* Never seen by a reader: back to the free list at once; its object goes
 * with the aborted transaction. */
void node_drop(struct op *o, struct node *n)
{
    (void)o;
    node_free_now(n);
}

struct leaf *leaf_new(struct op *o)
{
    struct leaf *l = (struct leaf *)node_new(o, KIND_LEAF, LEAF_BODY);
    if (l)
        l->perm = PERM_EMPTY;
    return l;
}

struct inode *inode_new(struct op *o)
{
    return (struct inode *)node_new(o, KIND_INODE, INODE_BODY);
}

void w_image(struct op *o, struct node *n)
{
    uint64_t img[LEAF_BODY / 8];
    if (!o->tx || o->err)
        return;
    if (is_leaf(n)) {
        struct leaf *l = (struct leaf *)n;
        memcpy(img, BODY(n), LEAF_BODY);
        img[LB_NEXT / 8] = (uint64_t)mirror_of((uint64_t)l->next);
        img[LB_PREV / 8] = (uint64_t)mirror_of((uint64_t)l->prev);
        for (unsigned s = 0; s < LWIDTH; s++)
            if (l->klen[s] == KLEN_LAYER)
                img[LB_VAL / 8 + s] = (uint64_t)mirror_of(l->val[s]);
        o->err = txn_write(o->tx, n->pobj, 0, img, LEAF_BODY);
    } else {
        struct inode *in = (struct inode *)n;
        memcpy(img, BODY(n), INODE_BODY);
        for (unsigned i = 0; i <= IWIDTH; i++)
            img[IB_CHILD / 8 + i] = (uint64_t)mirror_of((uint64_t)in->child[i]);
        o->err = txn_write(o->tx, n->pobj, 0, img, INODE_BODY);
    }
}

void node_discard(struct op *o, struct node *n)
{
    (void)o, (void)n; /* freed at node_gone: the remove writes to n still */
}

/* After the remove's last write to n (cow: a freed object takes no
 * writes); the DRAM node is retired once o committed (op_committed). */
void node_gone(struct op *o, struct node *n)
{
    if (o->tx && !o->err)
        o->err = txn_free(o->tx, n->pobj); /* fails only for memory */
    o->st.gone = n;
}

void w_anchor(struct op *o, struct node *root)
{
    if (o->tx && !o->err)
        o->err = txn_write(o->tx, o->t->anchor, o->t->anchor_off, &root->pobj, 8);
}

/* Opened to write before anything changes: an engine that copies to
 * write (cow) makes its copy here, where a full pool fails the operation
 * alone; undo logs the object whole, once. */
static void open_rw(struct op *o, txn_obj *h)
{
    if (o->tx && !o->err && !txn_open(o->tx, h, TXN_RW)) {
        int rc = txn_last_error(o->tx);
        o->err = rc ? rc : TXN_E_STATE;
    }
}

/* What an operation changes in DRAM, saved before its first change: the
 * body and the root and deleted bits of each node it readied (every
 * existing node it changes, node_will_change), a root's parent pointer
 * (NULL: new_root sets it). The top root changes only once the
 * operation committed (root_at_commit). A thread runs one operation at a
 * time. */
struct saved {
    struct node *n;
    struct inode *parent;
    uint64_t bits;
    uint64_t body[NODE_BYTES / 8]; /* a leaf's or an inode's */
};
static __thread struct saved t_saved[OP_LOCKS];

static void op_save(struct op *o, struct node *n)
{
    if (!o->tx || o->st.nsaved < 0)
        return; /* transient: its errors come before any change */
    for (int i = 0; i < o->st.nsaved; i++)
        if (t_saved[i].n == n)
            return;
    if (o->st.nsaved == OP_LOCKS) {
        o->st.nsaved = -1; /* cannot happen: OP_LOCKS bounds its locks too */
        return;
    }
    struct saved *sv = &t_saved[o->st.nsaved++];
    sv->n = n;
    sv->parent = __atomic_load_n(&n->parent, __ATOMIC_RELAXED);
    sv->bits = atomic_load_explicit(&n->version, memory_order_relaxed) & (V_ROOT | V_DELETED);
    memcpy(sv->body, BODY(n), is_leaf(n) ? LEAF_BODY : INODE_BODY); /* locked: no writer */
}

void node_will_change(struct op *o, struct node *n)
{
    op_save(o, n); /* even after an error: insert_up's stores go on */
    open_rw(o, n->pobj);
}

void anchor_will_change(struct op *o)
{
    open_rw(o, o->t->anchor);
}

/* After an error that came once the operation had changed the tree, or
 * a failed commit (its transaction rolled back: the mirrors are as
 * before it), the DRAM tree as before it too, under its locks: an
 * update's value word; each saved node marked as split (a reader that
 * read it starts again at its unlock), its body and bits back (a root's
 * parent too); the children of the internal nodes put back pointed at
 * them again (an internal split had moved some); the nodes it made
 * marked deleted (no reader validates a read through them: their parents
 * changed too) and retired; the counts. 0, or -1 if it saved too many
 * nodes to put back (the tree is then unusable). */
int op_put_back(struct op *o)
{
    if (o->st.nsaved < 0)
        return -1;
    if (o->st.upd_word) /* an update (readers may have read it: as of
                         * any update before its commit) */
        __atomic_store_n(o->st.upd_word, o->st.upd_old, __ATOMIC_RELEASE);
    for (int i = o->st.nsaved - 1; i >= 0; i--) {
        struct saved *sv = &t_saved[i];
        struct node *n = sv->n;
        node_mark(n, V_SPLITTING);
        size_t words = (is_leaf(n) ? LEAF_BODY : INODE_BODY) / 8;
        uint64_t *b = (uint64_t *)BODY(n);
        for (size_t w = 0; w < words; w++) /* only what changed: a leaf's
                                              * low key is read unlocked */
            if (b[w] != sv->body[w])
                __atomic_store_n(&b[w], sv->body[w], __ATOMIC_RELAXED);
        if (sv->bits & V_ROOT) /* new_root gave it a parent; a non-root's
                                * parent changes under its parent's lock */
            PST(n->parent, sv->parent);
        uint64_t v = atomic_load_explicit(&n->version, memory_order_relaxed);
        atomic_store_explicit(&n->version, (v & ~(V_ROOT | V_DELETED)) | sv->bits,
                              memory_order_release);
    }
    for (int i = 0; i < o->st.nsaved; i++) {
        struct node *n = t_saved[i].n;
        if (is_leaf(n))
            continue;
        struct inode *in = (struct inode *)n;
        for (unsigned c = 0; c <= in->nkeys && c <= IWIDTH; c++)
            if (in->child[c])
                PST(in->child[c]->parent, in);
    }
    while (o->nnew > 0) { /* locked since made: unlocked with the others */
        struct node *n = o->made_new[--o->nnew];
        node_mark(n, V_DELETED | V_SPLITTING);
        node_retire(n);
    }
    atomic_fetch_sub_explicit(&o->t->splits, o->splits, memory_order_relaxed);
    atomic_fetch_sub_explicit(&o->t->unlinked, o->unlinks, memory_order_relaxed);
    o->st.gone = NULL;
    return 0;
}

void node_set_root(struct op *o, struct node *n, int root)
{
    (void)o;
    if (root)
        atomic_fetch_or_explicit(&n->version, V_ROOT, memory_order_relaxed);
    else
        atomic_fetch_and_explicit(&n->version, ~V_ROOT, memory_order_release);
}

void w_value(struct op *o, struct leaf *l, unsigned s, uint64_t v)
{
    w_u64(o, &l->h, LB_VAL + 8 * (size_t)s, v);
}

int w_value_try(struct op *o, struct leaf *l, unsigned s, uint64_t v)
{
    if (o->err)
        return -1;
    if (o->tx) { /* a failed commit puts it back (op_put_back) */
        o->st.upd_word = word(&l->h, LB_VAL + 8 * (size_t)s);
        o->st.upd_old = *o->st.upd_word;
    }
    w_value(o, l, s, v);
    o->clean = o->err != 0; /* an update's one write: nothing changed */
    return -1;
}

void w_move_begin(struct op *o, struct leaf *l)
{
    (void)o, (void)l; /* never called: w_value_try moves nothing here */
}

/* An insert or a remove opens its leaf before it changes it. */
static void leaf_will_change(struct op *o, struct leaf *l)
{
    if (!o->err) {
        node_will_change(o, &l->h);
        o->clean = o->err != 0;
    }
    node_mark(&l->h, V_INSERTING);
}

void w_insert_begin(struct op *o, struct leaf *l)
{
    leaf_will_change(o, l);
}

void w_remove_begin(struct op *o, struct leaf *l)
{
    leaf_will_change(o, l);
}

void w_entry(struct op *o, struct leaf *l, unsigned s, uint64_t ik, unsigned kl, uint64_t v)
{
    w_u64(o, &l->h, LB_IKEY + 8 * (size_t)s, ik);
    w_u8(o, &l->h, LB_KLEN + s, (uint8_t)kl);
    if (kl == KLEN_LAYER)
        w_ptr(o, &l->h, LB_VAL + 8 * (size_t)s, (void *)v);
    else
        w_u64(o, &l->h, LB_VAL + 8 * (size_t)s, v);
}

void w_perm(struct op *o, struct leaf *l, uint64_t perm)
{
    w_u64(o, &l->h, LB_PERM, perm);
}
