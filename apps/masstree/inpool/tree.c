/* inpool/tree.c - the in-pool store's tree: create, open (nothing is
 * rebuilt: each node is recovered at its first access, inpool.c), close;
 * and the thread's transaction shared by its operations (mt_opts.batch,
 * mt_flush).
 */
#include "mt_node.h"

#include <stdlib.h>

__thread struct mt_batch t_batch;

/* Commit the shared transaction, if any. */
static int batch_end(void)
{
    txn *tx = t_batch.tx;
    mt_tree *t = t_batch.t;
    t_batch.tx = NULL;
    t_batch.n = 0;
    int rc = tx ? t->commit(tx, t->commit_arg) : 0;
    if (rc)
        atomic_store(&t->broken, 1);
    return rc;
}

int rd_batch(mt_tree *t)
{
    if (incll_waiting(t_batch.wait))
        return batch_end();
    t_tx = t_batch.pool == t->pool ? t_batch.tx : NULL;
    return 0;
}

int mt_flush(mt_tree *t)
{
    return t_batch.tx && t_batch.t == t ? batch_end() : 0;
}

int op_begin_tx(struct op *o, mt_tree *t)
{
    int rc = 0;
    if (t_batch.tx && t_batch.t != t) /* another tree's */
        rc = batch_end();
    if (!rc && !(rc = txn_begin(t->pool, &o->tx))) {
        o->st.epoch = incll_epoch(o->tx);
        o->st.wait = incll_waiting_word(o->tx);
    }
    return rc;
}

/* The readers' grace for blocks the engine holds back (incll_grace): gets
 * and scans run in no transaction and may still be on a freed leaf. The
 * engine calls these while ending its epoch: they never wait. */
static uint64_t grace_now(void *arg)
{
    (void)arg;
    return epoch_grace_now();
}

static int grace_passed(void *arg, uint64_t token)
{
    (void)arg;
    return epoch_grace_passed(token);
}

static void use_grace(void)
{
    static const incll_grace g = {grace_now, grace_passed, NULL};
    incll_set_grace(&g);
}

/* ---- the tree's life */

static int first_epoch(mt_tree *t)
{
    txn *tx;
    int rc = txn_begin(t->pool, &tx);
    if (rc)
        return rc;
    t->first = incll_first_epoch(tx);
    txn_abort(tx);
    return 0;
}

int mt_create(const mt_opts *opts, mt_tree **out)
{
    mt_tree *t;
    struct op o;
    int rc = tree_new_pooled(opts, &t); /* this store keeps its nodes in a pool */
    if (rc)
        return rc;
    use_grace();
    rc = first_epoch(t);
    if (!rc)
        rc = op_begin(&o, t);
    if (rc) {
        free(t);
        return rc;
    }
    struct leaf *l = leaf_new(&o);
    if (l) {
        node_set_root(&o, &l->h, 1);
        w_anchor(&o, &l->h);
        atomic_store(&t->root, &l->h);
    }
    rc = op_end(&o);
    if (rc) {
        free(t);
        return rc;
    }
    t->ready = 1;
    *out = t;
    return 0;
}

int mt_open(const mt_opts *opts, mt_tree **out)
{
    mt_tree *t;
    int rc = tree_new_pooled(opts, &t);
    if (rc)
        return rc;
    use_grace();
    rc = first_epoch(t);
    txn *tx = NULL;
    txn_obj *h = NULL;
    if (!rc)
        rc = txn_begin(t->pool, &tx);
    if (!rc) {
        rc = txn_read(tx, t->anchor, t->anchor_off, &h, sizeof h);
        if (!rc && (!h || txn_obj_size(t->pool, h) < INCLL_NODE_ALLOC(sizeof(struct leaf))))
            rc = TXN_E_CORRUPT;
        txn_abort(tx);
    }
    if (rc) {
        free(t);
        return rc;
    }
    atomic_store(&t->root, (struct node *)incll_node(h));
    *out = t;
    return 0;
}

void mt_close(mt_tree *t)
{
    if (!t)
        return;
    mt_flush(t);
    free(t); /* the nodes are the pool's */
}

