/* mirror/mt_store_impl.h - the inline half of the mirror store's
 * contract (mt_store.h): each put or remove one transaction of its own. */
#ifndef PMTX_MT_STORE_IMPL_H
#define PMTX_MT_STORE_IMPL_H

static inline int store_puts_back(void) { return 1; }
static inline int store_parents_exact(void) { return 1; }
static inline int store_leaf_prev(void) { return 1; }

static inline void op_store_reset(struct op *o)
{
    o->st.gone = NULL;
    o->st.nsaved = 0;
    o->st.upd_word = NULL;
    o->st.nlater = 0;
    o->st.new_top = NULL;
}

static inline int op_store_begin(struct op *o, mt_tree *t)
{
    return t->pool ? txn_begin(t->pool, &o->tx) : 0;
}

static inline int op_end(struct op *o) { return op_finish(o); }

static inline int store_retry(mt_tree *t, int rc)
{
    (void)t, (void)rc; /* an operation's errors are its own */
    return 0;
}

static inline int rd_begin(mt_tree *t)
{
    return atomic_load_explicit(&t->broken, memory_order_relaxed) ? TXN_E_STATE : 0;
}

static inline int rd_end(mt_tree *t)
{
    (void)t;
    return 0;
}

static inline struct leaf *leaf_prev(struct leaf *l) { return l->prev; }
static inline void leaf_prev_init(struct leaf *r, struct leaf *l) { r->prev = l; }
static inline void w_prev(struct op *o, struct leaf *nx, struct leaf *p)
{
    w_ptr(o, &nx->h, LB_PREV, p);
}

#endif
