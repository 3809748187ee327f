/* inpool/mt_store_impl.h - the inline half of the in-pool store's
 * contract (mt_store.h): operations in the thread's shared transaction of
 * the epoch (mt_opts.batch), reads in none. */
#ifndef PMTX_MT_STORE_IMPL_H
#define PMTX_MT_STORE_IMPL_H

static inline int store_puts_back(void) { return 0; }
static inline int store_parents_exact(void) { return 0; }
static inline int store_leaf_prev(void) { return 0; }

/* The calling thread's shared transaction (opts.batch): its tree, pool,
 * epoch and epoch-end word, and the operations it has run. */
struct mt_batch {
    mt_tree *t;
    txn *tx;
    txn_pool *pool;
    uint64_t epoch;
    const int *wait;
    unsigned n;
};
extern __thread struct mt_batch t_batch;
extern __thread txn_pool *t_pool; /* of a read: recover in a txn of its own */
/* rd_begin's rest: the shared transaction committed (its result) when an
 * epoch end waits for it; else t_tx is it if it is on t's pool (a node's
 * first access after a restart recovers in it), or NULL */
int rd_batch(mt_tree *t);
/* Reads enter no transaction: only a node's first access after a restart
 * writes (node_recover begins one for it, or uses the thread's shared
 * one). An epoch end waiting for the shared transaction ends it here too. */
static inline int rd_begin(mt_tree *t)
{
    if (atomic_load_explicit(&t->broken, memory_order_relaxed))
        return TXN_E_STATE;
    t_pool = t->pool;
    t_first = t->first;
    t_ready = t->ready;
    t_err = 0;
    t_tx = NULL;
    if (!t_batch.tx)
        return 0;
    if (!incll_waiting(t_batch.wait) && t_batch.pool == t->pool) {
        t_tx = t_batch.tx;
        return 0;
    }
    return rd_batch(t);
}
static inline int rd_end(mt_tree *t)
{
    (void)t;
    t_pool = NULL;
    return t_err;
}

static inline void op_store_reset(struct op *o) { o->st.made = 0; }

/* the thread's shared transaction on another tree is committed first */
int op_begin_tx(struct op *o, mt_tree *t);
static inline int op_store_begin(struct op *o, mt_tree *t)
{
    int rc = 0;
    if (t_batch.tx && t_batch.t == t) {
        o->tx = t_batch.tx;
        o->st.epoch = t_batch.epoch;
        o->st.wait = t_batch.wait;
    } else {
        rc = op_begin_tx(o, t);
    }
    t_tx = o->tx;
    t_first = t->first;
    t_ready = t->ready;
    t_err = 0;
    return rc;
}

static inline int op_end(struct op *o)
{
    if (t_err && !o->err)
        o->err = t_err;
    t_tx = NULL;
    /* commits cover whole operations: an epoch end waiting for this
     * transaction has it after this operation (a commit hook announces
     * the state after it) */
    if (o->tx && !o->err && !o->st.made && ++t_batch.n < o->t->batch &&
        !incll_waiting(o->st.wait)) {
        t_batch.t = o->t; /* the next operation goes on in it */
        t_batch.tx = o->tx;
        t_batch.pool = o->t->pool;
        t_batch.epoch = o->st.epoch;
        t_batch.wait = o->st.wait;
        while (o->nheld > 0)
            node_unlock(o->held[--o->nheld]);
        return 0;
    }
    t_batch.tx = NULL; /* o's transaction ends here */
    t_batch.n = 0;
    return op_finish(o);
}

/* A full pool met before any change: the epoch's log may have needed
 * another chunk, or blocks freed in the epoch wait for its end. End it
 * (the thread holds no transaction now), and try once more. */
static inline int store_retry(mt_tree *t, int rc)
{
    return rc == TXN_E_NOSPACE && !atomic_load(&t->broken) && txn_sync(t->pool) == 0;
}

/* no prev pointers: the left neighbour is found in the parent */
static inline struct leaf *leaf_prev(struct leaf *l)
{
    (void)l;
    return NULL;
}
static inline void leaf_prev_init(struct leaf *r, struct leaf *l) { (void)r, (void)l; }
static inline void w_prev(struct op *o, struct leaf *nx, struct leaf *p)
{
    (void)o, (void)nx, (void)p;
}

#endif
