/* btree.c - the B-tree kernel: order 8 (CLRS, minimum degree 4), keys
 * and values in every node, splits on the way down an insert, fills on
 * the way down a delete. */
#include "retain.h"

static int btree_lookup(txn *tx, const struct instance *k, uint64_t key, int *found)
{
    txn_obj *x;
    struct node d;
    TRY(entry_get(tx, k, &x));
    *found = 0;
    while (x) {
        TRY(node_load(tx, k, x, &d));
        unsigned i = 0;
        while (i < d.n && d.key[i] < key)
            i++;
        if (i < d.n && d.key[i] == key) {
            *found = 1;
            return 0;
        }
        x = d.leaf ? NULL : d.child[i];
    }
    return 0;
}

/* Split full child y (child i of x). */
static int btree_split(txn *tx, const struct instance *k, txn_obj *xo, struct node *x, unsigned i,
                       txn_obj *yo, struct node *y)
{
    struct node z = {.n = BT_T - 1, .leaf = y->leaf};
    txn_obj *zo;
    for (unsigned j = 0; j < BT_T - 1; j++) {
        z.key[j] = y->key[j + BT_T];
        z.val[j] = y->val[j + BT_T];
    }
    if (!y->leaf)
        for (unsigned j = 0; j < BT_T; j++)
            z.child[j] = y->child[j + BT_T];
    y->n = BT_T - 1;
    for (unsigned j = x->n + 1; j > i + 1; j--)
        x->child[j] = x->child[j - 1];
    for (unsigned j = x->n; j > i; j--) {
        x->key[j] = x->key[j - 1];
        x->val[j] = x->val[j - 1];
    }
    TRY(node_alloc(tx, k, &zo));
    x->child[i + 1] = zo;
    x->key[i] = y->key[BT_T - 1];
    x->val[i] = y->val[BT_T - 1];
    x->n++;
    TRY(node_store(tx, k, zo, &z, W_NEW));
    TRY(node_store(tx, k, yo, y, W_HDR));
    return node_store(tx, k, xo, x, W_ALL);
}

/* Put a leaf in an empty tree, or a new root above a full one (split);
 * *xo, *x: where the insert goes down from (NULL: done). */
static int btree_insert_top(txn *tx, const struct instance *k, uint64_t key, uint64_t val,
                            txn_obj **xo, struct node *x)
{
    txn_obj *ro;
    TRY(entry_get(tx, k, &ro));
    if (!ro) {
        struct node d = {.n = 1, .leaf = 1, .key = {key}, .val = {val}};
        TRY(node_alloc(tx, k, &ro));
        TRY(node_store(tx, k, ro, &d, W_NEW));
        *xo = NULL;
        return entry_set(tx, k, ro);
    }
    struct node r;
    TRY(node_load(tx, k, ro, &r));
    *xo = ro;
    *x = r;
    if (r.n < 2 * BT_T - 1)
        return 0;
    struct node s = {.n = 0, .leaf = 0, .child = {ro}};
    txn_obj *so;
    TRY(node_alloc(tx, k, &so));
    TRY(node_store(tx, k, so, &s, W_NEW));
    TRY(entry_set(tx, k, so));
    TRY(btree_split(tx, k, so, &s, 0, ro, &r));
    *xo = so;
    *x = s;
    return 0;
}

static int btree_insert(txn *tx, const struct instance *k, uint64_t key, uint64_t val)
{
    txn_obj *xo;
    struct node x;
    TRY(btree_insert_top(tx, k, key, val, &xo, &x));
    while (xo) {
        unsigned i = x.n;
        if (x.leaf) {
            while (i > 0 && x.key[i - 1] > key) {
                x.key[i] = x.key[i - 1];
                x.val[i] = x.val[i - 1];
                i--;
            }
            x.key[i] = key;
            x.val[i] = val;
            x.n++;
            return node_store(tx, k, xo, &x, W_HDR | W_KEYS | W_VALS);
        }
        while (i > 0 && x.key[i - 1] > key)
            i--;
        txn_obj *co = x.child[i];
        struct node c;
        TRY(node_load(tx, k, co, &c));
        if (c.n == 2 * BT_T - 1) {
            TRY(btree_split(tx, k, xo, &x, i, co, &c));
            if (key > x.key[i]) {
                co = x.child[i + 1];
                TRY(node_load(tx, k, co, &c));
            }
        }
        xo = co;
        x = c;
    }
    return 0;
}

/* Merge child i+1 of x into child i, with key i of x between them. */
static int btree_merge(txn *tx, const struct instance *k, txn_obj *xo, struct node *x, unsigned i,
                       txn_obj **yo_out, struct node *y)
{
    txn_obj *yo = x->child[i], *zo = x->child[i + 1];
    struct node z;
    TRY(node_load(tx, k, yo, y));
    TRY(node_load(tx, k, zo, &z));
    y->key[y->n] = x->key[i];
    y->val[y->n] = x->val[i];
    for (unsigned j = 0; j < z.n; j++) {
        y->key[y->n + 1 + j] = z.key[j];
        y->val[y->n + 1 + j] = z.val[j];
    }
    if (!y->leaf)
        for (unsigned j = 0; j <= z.n; j++)
            y->child[y->n + 1 + j] = z.child[j];
    y->n += z.n + 1;
    for (unsigned j = i; j + 1 < x->n; j++) {
        x->key[j] = x->key[j + 1];
        x->val[j] = x->val[j + 1];
    }
    for (unsigned j = i + 1; j < x->n; j++)
        x->child[j] = x->child[j + 1];
    x->n--;
    TRY(node_store(tx, k, yo, y, W_ALL));
    TRY(node_store(tx, k, xo, x, W_ALL));
    TRY(node_free(tx, k, zo, &z));
    *yo_out = yo;
    return 0;
}

/* Child i of x (co, c) takes key i - 1 of x, x the left sibling s's last. */
static int btree_borrow_left(txn *tx, const struct instance *k, txn_obj *xo, struct node *x,
                             unsigned i, txn_obj *co, struct node *c, struct node *s)
{
    for (unsigned j = c->n; j > 0; j--) {
        c->key[j] = c->key[j - 1];
        c->val[j] = c->val[j - 1];
    }
    if (!c->leaf)
        for (unsigned j = c->n + 1; j > 0; j--)
            c->child[j] = c->child[j - 1];
    c->key[0] = x->key[i - 1];
    c->val[0] = x->val[i - 1];
    c->child[0] = s->child[s->n];
    c->n++;
    x->key[i - 1] = s->key[s->n - 1];
    x->val[i - 1] = s->val[s->n - 1];
    s->n--;
    TRY(node_store(tx, k, x->child[i - 1], s, W_HDR));
    TRY(node_store(tx, k, co, c, W_ALL));
    return node_store(tx, k, xo, x, W_KEYS | W_VALS);
}

/* Child i of x (co, c) takes key i of x, x the right sibling s's first. */
static int btree_borrow_right(txn *tx, const struct instance *k, txn_obj *xo, struct node *x,
                              unsigned i, txn_obj *co, struct node *c, struct node *s)
{
    c->key[c->n] = x->key[i];
    c->val[c->n] = x->val[i];
    c->child[c->n + 1] = s->child[0];
    c->n++;
    x->key[i] = s->key[0];
    x->val[i] = s->val[0];
    for (unsigned j = 0; j + 1 < s->n; j++) {
        s->key[j] = s->key[j + 1];
        s->val[j] = s->val[j + 1];
    }
    for (unsigned j = 0; j < s->n; j++)
        s->child[j] = s->child[j + 1];
    s->n--;
    TRY(node_store(tx, k, x->child[i + 1], s, W_ALL));
    TRY(node_store(tx, k, co, c, W_ALL));
    return node_store(tx, k, xo, x, W_KEYS | W_VALS);
}

/* Make child i of x hold at least BT_T keys; *ci, *co, c: the child to go
 * to. */
static int btree_fill(txn *tx, const struct instance *k, txn_obj *xo, struct node *x, unsigned *ci,
                      txn_obj **co, struct node *c)
{
    unsigned i = *ci;
    if (c->n >= BT_T)
        return 0;
    struct node s;
    if (i > 0) {
        TRY(node_load(tx, k, x->child[i - 1], &s));
        if (s.n >= BT_T)
            return btree_borrow_left(tx, k, xo, x, i, *co, c, &s);
    }
    if (i < x->n) {
        TRY(node_load(tx, k, x->child[i + 1], &s));
        if (s.n >= BT_T)
            return btree_borrow_right(tx, k, xo, x, i, *co, c, &s);
        return btree_merge(tx, k, xo, x, i, co, c);
    }
    *ci = i - 1;
    return btree_merge(tx, k, xo, x, i - 1, co, c);
}

/* The leaf at the left (right: the right) end of the subtree under d. */
static int btree_edge_leaf(txn *tx, const struct instance *k, const struct node *d, int right,
                           struct node *leaf)
{
    *leaf = *d;
    while (!leaf->leaf)
        TRY(node_load(tx, k, leaf->child[right ? leaf->n : 0], leaf));
    return 0;
}

/* Key i of internal node x (xo) is the one to delete: it takes its
 * predecessor's or successor's place when a child can spare a key, which
 * becomes the key to delete below, else the two children merge around it.
 * *xo, x: the node to go down to. */
static int btree_remove_internal(txn *tx, const struct instance *k, txn_obj **xo, struct node *x,
                                 unsigned i, uint64_t *key)
{
    txn_obj *yo = x->child[i], *zo = x->child[i + 1];
    struct node y, z, leaf;
    TRY(node_load(tx, k, yo, &y));
    if (y.n >= BT_T) { /* the predecessor */
        TRY(btree_edge_leaf(tx, k, &y, 1, &leaf));
        x->key[i] = *key = leaf.key[leaf.n - 1];
        x->val[i] = leaf.val[leaf.n - 1];
        TRY(node_store(tx, k, *xo, x, W_KEYS | W_VALS));
        *xo = yo;
        *x = y;
        return 0;
    }
    TRY(node_load(tx, k, zo, &z));
    if (z.n >= BT_T) { /* the successor */
        TRY(btree_edge_leaf(tx, k, &z, 0, &leaf));
        x->key[i] = *key = leaf.key[0];
        x->val[i] = leaf.val[0];
        TRY(node_store(tx, k, *xo, x, W_KEYS | W_VALS));
        *xo = zo;
        *x = z;
        return 0;
    }
    TRY(btree_merge(tx, k, *xo, x, i, &yo, &y));
    *xo = yo;
    *x = y;
    return 0;
}

/* The root may have emptied: its only child (or nothing) replaces it. */
static int btree_shrink_root(txn *tx, const struct instance *k)
{
    txn_obj *ro;
    struct node r;
    TRY(entry_get(tx, k, &ro));
    TRY(node_load(tx, k, ro, &r));
    if (r.n != 0)
        return 0;
    TRY(entry_set(tx, k, r.leaf ? NULL : r.child[0]));
    return node_free(tx, k, ro, &r);
}

static int btree_remove(txn *tx, const struct instance *k, uint64_t key)
{
    txn_obj *xo;
    struct node x;
    TRY(entry_get(tx, k, &xo));
    if (!xo)
        return 0;
    TRY(node_load(tx, k, xo, &x));
    for (;;) {
        unsigned i = 0;
        while (i < x.n && x.key[i] < key)
            i++;
        if (i < x.n && x.key[i] == key && x.leaf) {
            for (unsigned j = i; j + 1 < x.n; j++) {
                x.key[j] = x.key[j + 1];
                x.val[j] = x.val[j + 1];
            }
            x.n--;
            TRY(node_store(tx, k, xo, &x, W_HDR | W_KEYS | W_VALS));
            break;
        }
        if (i < x.n && x.key[i] == key) {
            TRY(btree_remove_internal(tx, k, &xo, &x, i, &key));
            continue;
        }
        if (x.leaf)
            break; /* not there */
        txn_obj *co = x.child[i];
        struct node c;
        TRY(node_load(tx, k, co, &c));
        TRY(btree_fill(tx, k, xo, &x, &i, &co, &c));
        xo = co;
        x = c;
    }
    return btree_shrink_root(tx, k);
}

/* An empty B-tree is a NULL root: nothing to make. */
static int btree_create(txn *tx, const struct instance *k)
{
    (void)tx;
    (void)k;
    return 0;
}

const struct kernel btree_kernel = {"btree", btree_create, btree_lookup, btree_insert,
                                    btree_remove};
