/* mt_tree.c - what both stores' trees share: a new tree's fields, and
 * walks over every node (mt_objects, mt_stats_get). The tree's life
 * (create, open, close) is the store's: mirror/rebuild.c, inpool/recover.c.
 */
#include "mt_node.h"
#include <stdlib.h>
#include <string.h>

static int default_commit(txn *tx, void *arg)
{
    (void)arg;
    return txn_commit(tx);
}

mt_tree *tree_new(const mt_opts *opts)
{
    mt_tree *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->pool = opts->pool;
    t->anchor = opts->anchor ? opts->anchor : (opts->pool ? txn_root(opts->pool) : NULL);
    t->anchor_off = opts->anchor_off;
    t->commit = opts->commit ? opts->commit : default_commit;
    t->commit_arg = opts->commit_arg;
    t->batch = opts->batch;
    return t;
}

int tree_new_pooled(const mt_opts *opts, mt_tree **out)
{
    if (!opts->pool)
        return TXN_E_INVAL;
    *out = tree_new(opts);
    return *out ? 0 : TXN_E_NOMEM;
}

void tree_walk(struct node *n, void (*fn)(struct node *, void *), void *arg)
{
    if (!n)
        return;
    node_ready(n);
    if (node_err())
        return;
    if (is_leaf(n)) {
        struct leaf *l = (struct leaf *)n;
        for (unsigned i = 0; i < perm_count(l->perm) && i < LWIDTH; i++) {
            unsigned s = perm_slot(l->perm, i);
            if (l->klen[s] == KLEN_LAYER)
                tree_walk((struct node *)l->val[s], fn, arg);
        }
    } else {
        struct inode *in = (struct inode *)n;
        for (unsigned i = 0; i <= in->nkeys && i <= IWIDTH; i++)
            tree_walk(in->child[i], fn, arg);
    }
    fn(n, arg);
}

struct obj_walk {
    void (*fn)(txn_obj *, void *);
    void *arg;
};

static void obj_of(struct node *n, void *arg)
{
    struct obj_walk *w = arg;
    if (node_obj(n))
        w->fn(node_obj(n), w->arg);
}

void mt_objects(mt_tree *t, void (*fn)(txn_obj *o, void *arg), void *arg)
{
    struct obj_walk w = {fn, arg};
    if (rd_begin(t))
        return;
    tree_walk(atomic_load(&t->root), obj_of, &w);
    rd_end(t);
}

static void count_node(struct node *n, void *arg)
{
    mt_stats *st = arg;
    if (!is_leaf(n)) {
        st->inodes++;
        return;
    }
    st->leaves++;
    if (atomic_load(&n->version) & V_ROOT)
        st->layers++;
}

void mt_stats_get(mt_tree *t, mt_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!rd_begin(t)) {
        tree_walk(atomic_load(&t->root), count_node, out);
        rd_end(t);
    }
    out->splits = atomic_load(&t->splits);
    out->unlinked = atomic_load(&t->unlinked);
}
