/* inpool/inpool.c - the in-pool store's nodes (mt_store.h): the write
 * calls on the InCLL primitives of incll.h, new and freed nodes, and the
 * first access to a node in an execution. The tree's life and the
 * thread's shared transaction: inpool/tree.c.
 *
 * Which primitive each change takes (Cohen et al., section 5):
 *  - the value of a key in use: incll_update_try (the line's value
 *    InCLL); when the InCLL cannot take it (it holds another slot this
 *    epoch, or the old value is no aligned 48-bit word), the entry moves
 *    to a slot free since the start of the epoch instead (incll_move_begin,
 *    its key, length and value stored, incll_perm_store naming it where
 *    the old slot was); with no such slot the node is logged;
 *  - an insert into a free slot: incll_insert_begin, the slot's key,
 *    length and value stored, then incll_perm_store (the permutation
 *    InCLL); a remove: incll_remove_begin, incll_perm_store;
 *  - anything else (splits, internal nodes, the root flag, next
 *    pointers, unlinking an empty leaf): incll_log first
 *    (node_will_change), then stores.
 * An unlinked leaf is freed in its unlinking transaction (node_discard);
 * the engine gives its block back for reuse once the epoch is durable
 * and the readers' epochs of mt_node.c have moved on (incll_set_grace).
 * Durability: at the end of the epoch (txn_sync), as for the engine.
 *
 * After a restart nothing is rebuilt: mt_open reads the anchor. Each node
 * is recovered at its first access (node_ready -> node_recover): under a
 * hashed lock, its version word is reset from its kind and root bytes,
 * its parent forgotten, then incll_node_prepare rolls its InCLLs back to
 * the end of the last completed epoch (nodes logged in the failed epoch
 * came back from the external log when the pool was opened), and checks
 * it (leaf_check, inode_check: a damaged node stays unrecovered, and
 * the walk that met it stops with TXN_E_CORRUPT). A parent that is not
 * known is found again from the layer's root (find_parent, masstree.c).
 */
#include "mt_node.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

__thread txn *t_tx;
__thread uint64_t t_first;
__thread int t_ready;
__thread int t_err;
__thread txn_pool *t_pool;

/* ---- a node's structure, checked at its first access after a restart
 * (incll_layout.check): what one node shows. The walks bound the rest
 * (cycles: masstree.c). */

/* A node pointer in a node of pool p: an object block of p (by the
 * allocator's chunk table and size class: a block freed and not reused
 * passes), a node's size, on a line of its own, not the node itself. Its
 * kind is checked at its own first access. */
static int node_ptr_ok(txn_pool *p, const void *x, const void *self)
{
    uintptr_t h = (uintptr_t)x - INCLL_OBJ_HDR;
    return x && x != self && h % INCLL_LINE == 0 &&
           txn_obj_size(p, (txn_obj *)h) >= INCLL_NODE_ALLOC(sizeof(struct leaf));
}

static int kind_ok(const void *node, uint8_t kind)
{
    const uint8_t *b = node;
    return b[NB_KIND] == kind && b[NB_ROOT] <= 1;
}

/* the permutation, its entries in order, none below the leaf's low key,
 * each layer's root a node, the next leaf a node */
static int leaf_check(txn_pool *p, const void *node)
{
    const struct leaf *l = node;
    uint64_t perm = l->perm;
    if (!kind_ok(node, KIND_LEAF) || !leaf_entries_ok(l, perm, l->lowkey, 0, 0) ||
        (l->next && !node_ptr_ok(p, l->next, l)))
        return TXN_E_CORRUPT;
    for (unsigned i = 0; i < perm_count(perm); i++) {
        unsigned s = perm_slot(perm, i);
        if (l->klen[s] == KLEN_LAYER && !node_ptr_ok(p, (const void *)(uintptr_t)l->val[s], l))
            return TXN_E_CORRUPT;
    }
    return 0;
}

/* the key count, the keys in order, every child a node */
static int inode_check(txn_pool *p, const void *node)
{
    const struct inode *in = node;
    uint64_t nk = in->nkeys;
    if (!kind_ok(node, KIND_INODE) || nk > IWIDTH)
        return TXN_E_CORRUPT;
    for (unsigned i = 0; i <= nk; i++)
        if ((i && i < nk && in->ikey[i] <= in->ikey[i - 1]) || !node_ptr_ok(p, in->child[i], in))
            return TXN_E_CORRUPT;
    return 0;
}

const incll_layout mt_leaf_layout = {
    .size = sizeof(struct leaf),
    .perm_off = offsetof(struct leaf, pepoch),
    .vals_off = offsetof(struct leaf, val),
    .nslots = LWIDTH,
    .ngroups = 2,
    .group_off = {offsetof(struct leaf, vlog1), offsetof(struct leaf, vlog2)},
    .check = leaf_check,
};

const incll_layout mt_inode_layout = {
    .size = sizeof(struct inode),
    .perm_off = offsetof(struct inode, pepoch),
    .vals_off = offsetof(struct inode, nkeys),
    .nslots = 1,
    .ngroups = 1,
    .group_off = {offsetof(struct inode, vlog)},
    .check = inode_check,
};

static inline uint8_t kind_of(struct node *n)
{
    return __atomic_load_n((uint8_t *)n + NB_KIND, __ATOMIC_RELAXED);
}

static inline const incll_layout *layout_of(struct node *n)
{
    return kind_of(n) == KIND_LEAF ? &mt_leaf_layout : &mt_inode_layout;
}

/* The InCLL calls that start a change fail before they change anything:
 * the operation fails alone (o->clean, op_finish). */
static void fail_clean(struct op *o, int rc)
{
    if (rc && !o->err) {
        o->err = rc;
        o->clean = 1;
    }
}

void pst8(uint8_t *p, uint8_t v)
{
    uint64_t *w = (uint64_t *)((uintptr_t)p & ~(uintptr_t)7);
    unsigned sh = 8 * (unsigned)((uintptr_t)p & 7);
    uint64_t x = __atomic_load_n(w, __ATOMIC_RELAXED);
    incll_store_shared(w, (x & ~(0xffull << sh)) | (uint64_t)v << sh);
}

/* ---- first access in this execution */

#define REC_LOCKS 64
static pthread_mutex_t rec_lock[REC_LOCKS] = {[0 ... REC_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER};

void node_recover(struct node *n)
{
    pthread_mutex_t *lk = &rec_lock[((uintptr_t)n * 0x9e3779b97f4a7c15ull) >> 58];
    int own = !t_tx; /* a read: begun before the lock (txn_begin may wait
                      * for an epoch end, which waits for the threads
                      * that this lock may hold up) */
    if (own) {
        int rc = t_pool ? txn_begin(t_pool, &t_tx) : TXN_E_STATE;
        if (rc) {
            t_tx = NULL;
            t_err = t_err ? t_err : rc;
            return;
        }
    }
    pthread_mutex_lock(lk);
    struct leaf *l = (struct leaf *)n;
    if ((__atomic_load_n(&l->pepoch, __ATOMIC_ACQUIRE) >> INCLL_EPOCH_SHIFT) < t_first) {
        uint8_t kind = kind_of(n), root = *((uint8_t *)n + NB_ROOT);
        VSTORE(n, (kind == KIND_LEAF ? V_LEAF : 0) | (root ? V_ROOT : 0));
        PST(n->parent, 0);
        int rc = (kind == KIND_LEAF || kind == KIND_INODE) && t_tx
                     ? incll_node_prepare(t_tx, node_obj(n), layout_of(n))
                     : TXN_E_CORRUPT;
        if (rc && !t_err)
            t_err = rc;
    }
    pthread_mutex_unlock(lk);
    if (own) {
        int rc = txn_commit(t_tx);
        t_tx = NULL;
        if (rc && !t_err)
            t_err = rc;
    }
}

/* ---- writes */

void node_will_change(struct op *o, struct node *n)
{
    if (!o->err)
        op_fail(o, incll_log(o->tx, node_obj(n), layout_of(n)));
}

static inline uint64_t *word(struct node *n, size_t off)
{
    return (uint64_t *)(BODY(n) + off);
}

void w_u64(struct op *o, struct node *n, size_t off, uint64_t v)
{
    node_will_change(o, n);
    if (!o->err)
        incll_store_shared(word(n, off), v);
}

void w_ptr(struct op *o, struct node *n, size_t off, void *p)
{
    w_u64(o, n, off, (uint64_t)p);
}

void w_ptr_at_commit(struct op *o, struct node *n, size_t off, void *p)
{
    w_ptr(o, n, off, p); /* an error after it leaves the tree unusable */
}

void root_at_commit(struct op *o, struct node *q)
{
    if (!o->err)
        atomic_store_explicit(&o->t->root, q, memory_order_release);
}

void w_u8(struct op *o, struct node *n, size_t off, uint8_t v)
{
    node_will_change(o, n);
    if (!o->err)
        pst8((uint8_t *)BODY(n) + off, v);
}

/* the callers stored these after node_will_change */
void w_range(struct op *o, struct node *n, size_t off, unsigned count)
{
    (void)o, (void)n, (void)off, (void)count;
}

void w_range_ptr(struct op *o, struct node *n, size_t off, unsigned count)
{
    (void)o, (void)n, (void)off, (void)count;
}

void w_image(struct op *o, struct node *n)
{
    (void)o, (void)n;
}

void w_value(struct op *o, struct leaf *l, unsigned s, uint64_t v)
{
    if (!o->err)
        op_fail(o, incll_update(o->tx, node_obj(&l->h), &mt_leaf_layout, s, v));
}

int w_value_try(struct op *o, struct leaf *l, unsigned s, uint64_t v)
{
    if (o->err)
        return -1;
    txn_obj *h = node_obj(&l->h);
    int rc = incll_update_try_in(o->tx, h, &mt_leaf_layout, s, v, o->st.epoch);
    if (rc != INCLL_MOVE) {
        if (rc < 0)
            fail_clean(o, rc);
        return -1;
    }
    /* psaved: the start-of-epoch perm (the node is touched in this epoch) */
    int f = perm_free_since(l->perm, l->psaved);
    if (f < 0)
        fail_clean(o, incll_update(o->tx, h, &mt_leaf_layout, s, v)); /* logs the node */
    return f;
}

void w_move_begin(struct op *o, struct leaf *l)
{
    if (!o->err)
        fail_clean(o, incll_move_begin(o->tx, node_obj(&l->h), &mt_leaf_layout));
    node_mark(&l->h, V_INSERTING);
}

void w_insert_begin(struct op *o, struct leaf *l)
{
    if (!o->err)
        fail_clean(o, incll_insert_begin(o->tx, node_obj(&l->h), &mt_leaf_layout));
    node_mark(&l->h, V_INSERTING);
}

void w_remove_begin(struct op *o, struct leaf *l)
{
    if (!o->err)
        fail_clean(o, incll_remove_begin(o->tx, node_obj(&l->h), &mt_leaf_layout));
    node_mark(&l->h, V_INSERTING);
}

/* after w_insert_begin, w_move_begin or node_will_change */
void w_entry(struct op *o, struct leaf *l, unsigned s, uint64_t ik, unsigned kl, uint64_t v)
{
    if (o->err)
        return;
    PST(l->ikey[s], ik);
    PST8(l->klen[s], kl);
    PST(l->val[s], v);
}

void w_layer_root(struct op *o, struct leaf *ul, unsigned s, struct node *q)
{
    w_value(o, ul, s, (uint64_t)q);
}

void w_perm(struct op *o, struct leaf *l, uint64_t perm)
{
    if (!o->err)
        incll_perm_store(node_obj(&l->h), &mt_leaf_layout, perm);
}

void node_set_root(struct op *o, struct node *n, int root)
{
    uint64_t v = atomic_load_explicit(&n->version, memory_order_relaxed);
    if (!root) /* new nodes are logged already */
        node_will_change(o, n);
    if (o->err)
        return;
    pst8((uint8_t *)n + NB_ROOT, root ? 1 : 0);
    VSTORE(n, root ? v | V_ROOT : v & ~V_ROOT);
}

/* A node allocated in o's transaction, zeroed but for its InCLL words,
 * locked and held by o. */
static struct node *node_new(struct op *o, uint8_t kind)
{
    const incll_layout *lay = kind == KIND_LEAF ? &mt_leaf_layout : &mt_inode_layout;
    txn_obj *h;
    if (o->err)
        return NULL;
    o->st.made = 1;
    int rc = txn_alloc(o->tx, INCLL_NODE_ALLOC(lay->size), &h);
    if (!rc && (rc = incll_node_init(o->tx, h, lay, kind == KIND_LEAF ? PERM_EMPTY : 0)))
        (void)txn_free(o->tx, h); /* unreachable: a failed free leaves a leak */
    if (rc) {
        op_fail(o, rc);
        return NULL;
    }
    struct node *n = incll_node(h);
    uint64_t *w = (uint64_t *)n;
    for (size_t off = 0; off < lay->size; off += 8) {
        size_t g = lay->group_off[0], g2 = lay->ngroups > 1 ? lay->group_off[1] : g;
        if ((off >= lay->perm_off && off < lay->perm_off + sizeof(incll_perm)) || off == g ||
            off == g2)
            continue;
        incll_store_shared(&w[off / 8], 0);
    }
    pst8((uint8_t *)n + NB_KIND, kind);
    op_made(o, n, kind == KIND_LEAF);
    return n;
}

/* Freed in the operation's transaction, which commits (op_finish). A
 * free that fails leaves the error unclean. */
void node_drop(struct op *o, struct node *n)
{
    if (txn_free(o->tx, node_obj(n)))
        o->clean = 0;
}

struct leaf *leaf_new(struct op *o)
{
    return (struct leaf *)node_new(o, KIND_LEAF);
}

struct inode *inode_new(struct op *o)
{
    return (struct inode *)node_new(o, KIND_INODE);
}

/* An unlinked leaf: freed with the unlink (one transaction, so a crash
 * keeps both or neither, I4 of incll.c). Its block returns to the
 * allocator after its epoch, and after the readers' grace (tree.c,
 * use_grace): gets and scans run in no transaction and may still be on
 * it. */
void node_discard(struct op *o, struct node *n)
{
    o->st.made = 1;
    if (!o->err)
        op_fail(o, txn_free(o->tx, node_obj(n)));
}

void node_gone(struct op *o, struct node *n)
{
    (void)o, (void)n; /* the node is its object, freed with the transaction */
}

void anchor_will_change(struct op *o)
{
    if (!o->err)
        op_fail(o, incll_log_object(o->tx, o->t->anchor));
}

void w_anchor(struct op *o, struct node *root)
{
    txn_obj *h = node_obj(root);
    o->st.made = 1;
    if (!o->err)
        op_fail(o, txn_write(o->tx, o->t->anchor, o->t->anchor_off, &h, 8));
}

/* InCLL changes stand once made: nothing to put back */
int op_put_back(struct op *o)
{
    (void)o;
    return -1;
}

void op_committed(struct op *o)
{
    (void)o; /* every store was made at once */
}
