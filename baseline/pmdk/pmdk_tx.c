/* pmdk_tx.c - the `pmdk` engine: txn.h's transactions on PMDK's
 * libpmemobj (1.12), so that every app and benchmark also runs on PMDK's
 * own transactions. The front end (txn/api.c) checks arguments and runs
 * deferred actions; this file maps each engine call onto PMDK:
 *
 * eng_begin  = pmemobj_tx_begin(pop, NULL, TX_PARAM_NONE) (no setjmp: PMDK
 *              only longjmps when given a jmp_buf) with the failure
 *              behaviour POBJ_TX_FAILURE_RETURN, so a failed call returns
 *              its error and leaves the transaction to us.
 * eng_write  = pmemobj_tx_add_range_direct + store (PMDK undo-logs the old
 *              bytes; the paper's PMDK baseline). Reads and eng_open are
 *              plain loads from the object in place.
 * eng_alloc  = pmemobj_tx_xalloc(ZERO), eng_free = pmemobj_tx_free.
 * eng_commit = pmemobj_tx_commit + pmemobj_tx_end.
 *
 * Invariants
 * ----------
 * 1. A block leaves the object map (FREE) before PMDK can hand it to
 *    another allocation: at commit before pmemobj_tx_commit for freed
 *    objects, at abort before pmemobj_tx_abort for allocated ones, and at
 *    once when a transaction frees what it allocated itself (PMDK cancels
 *    that reservation at once). So another thread's new object at the
 *    same offset is never taken off the map.
 * 2. Deferred actions run after eng_commit/eng_abort returned, when PMDK
 *    has no transaction on the thread, so they may begin new ones.
 * 3. Only the thread that began a transaction reaches PMDK's state for it
 *    (PMDK's state is per thread and it aborts the process otherwise).
 *
 * Barriers: what PMDK 1.12 issues, measured at every PDOM, is in
 * barriers.h beside this file; pmdk_libpmem.c is how they are counted.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "persist.h"
#include "pmdk_int.h"

const char eng_name[] = PMTX_ENGINE_NAME;
const int eng_persistent = 1;

/* ---- the pool format's share of contexts and transactions: PMDK keeps
 * its lanes and logs itself */

int eng_pool_attach(struct txn *tx)
{
    (void)tx;
    return 0;
}

void eng_pool_detach(struct txn *tx)
{
    (void)tx;
}

void eng_pool_begin(struct txn *tx)
{
    (void)tx;
}

void eng_pool_end(struct txn *tx, int committed)
{
    (void)tx;
    (void)committed;
}

/* ---- contexts */

int eng_tx_init(struct txn *tx)
{
    struct pmdk_tx *t = calloc(1, sizeof *t);
    if (!t)
        return TXN_E_NOMEM;
    vec_init(&t->allocs, sizeof(uint64_t));
    vec_init(&t->frees, sizeof(uint64_t));
    tx->eng = t;
    return 0;
}

void eng_tx_fini(struct txn *tx)
{
    struct pmdk_tx *t = tx->eng;
    vec_free(&t->allocs);
    vec_free(&t->frees);
    free(t);
    tx->eng = NULL;
}

static int mine(const struct txn *tx)
{
    return pthread_equal(tx->owner, pthread_self());
}

/* An error number of a PMDK transaction call. */
static int tx_error(int e)
{
    return e == ENOMEM ? TXN_E_NOSPACE : e == EINVAL ? TXN_E_INVAL : TXN_E_STATE;
}

/* ---- transactions */

int eng_begin(struct txn *tx)
{
    /* PMDK flattens nested transactions and cannot nest across pools:
     * one transaction per thread, whatever the pool */
    if (pmemobj_tx_stage() != TX_STAGE_NONE)
        return TXN_E_NOTSUP;
    int rc = pmemobj_tx_begin(pmdk_of(tx->p)->pop, NULL, TX_PARAM_NONE);
    if (rc) {
        pmemobj_tx_end();
        return rc == ENOMEM ? TXN_E_NOMEM : TXN_E_IO;
    }
    pmemobj_tx_set_failure_behavior(POBJ_TX_FAILURE_RETURN);
    struct pmdk_tx *t = tx->eng;
    t->allocs.n = t->frees.n = 0;
    return 0;
}

void *eng_open(struct txn *tx, txn_obj *o, int mode)
{
    (void)mode;
    /* the front end checked that o names an object: in place, as PMDK
     * undo-logs */
    return tx->p->base + ((uintptr_t)o - HANDLE_BASE);
}

int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    if (!mine(tx))
        return TXN_E_INVAL;
    if (pmemobj_tx_stage() != TX_STAGE_WORK)
        return TXN_E_STATE;
    char *a = (char *)eng_open(tx, o, TXN_RW) + off;
    int rc = pmemobj_tx_add_range_direct(a, n);
    if (rc)
        return tx_error(rc);
    pm_memcpy(a, src, n);
    return 0;
}

int eng_alloc(struct txn *tx, size_t n, txn_obj **out)
{
    struct pmdk_tx *t = tx->eng;
    if (!mine(tx))
        return TXN_E_INVAL;
    if (n > PMEMOBJ_MAX_ALLOC_SIZE)
        return TXN_E_NOSPACE;
    if (pmemobj_tx_stage() != TX_STAGE_WORK)
        return TXN_E_STATE;
    if (vec_reserve(&t->allocs, 1))
        return TXN_E_NOMEM;
    PMEMoid o = pmemobj_tx_xalloc(n, TYPE_OBJ, POBJ_XALLOC_ZERO | POBJ_XALLOC_NO_ABORT);
    if (OID_IS_NULL(o))
        return errno == ENOMEM ? TXN_E_NOSPACE : tx_error(errno);
    st_move(tx->p, o.off, ST_FREE, ST_NEW);
    *(uint64_t *)vec_push(&t->allocs) = o.off;
    *out = handle_of(o.off);
    return 0;
}

/* pmemobj_tx_free, with the reserve appended to the intent log when PMDK
 * cannot grow the log itself (a full pool: pmdk_pool.c). */
static int pmdk_free(struct txn *tx, uint64_t off)
{
    struct pmdk_pool *d = pmdk_of(tx->p);
    struct pmdk_tx *t = tx->eng;
    int rc = pmemobj_tx_free(oid_of(tx->p, off));
    if (rc != ENOMEM || t->has_reserve || !d->reserve_off || !at_cas(&d->reserve_busy, 0, 1))
        return rc;
    t->has_reserve = 1;
    if (pmemobj_tx_xlog_append_buffer(TX_LOG_TYPE_INTENT, tx->p->base + d->reserve_off,
                                      d->reserve_size, POBJ_XLOG_APPEND_BUFFER_NO_ABORT))
        return rc;
    return pmemobj_tx_free(oid_of(tx->p, off));
}

/* Frees an object this transaction allocated: PMDK releases it at once,
 * so it leaves the map first (invariant 1) and the allocs list too. */
static int free_new(struct txn *tx, uint64_t off)
{
    struct vec *a = &((struct pmdk_tx *)tx->eng)->allocs;
    size_t i = a->n;
    while (i > 0 && *(uint64_t *)vec_at(a, i - 1) != off)
        i--;
    if (i == 0 || !st_move(tx->p, off, ST_NEW, ST_FREE))
        return TXN_E_INVAL; /* another transaction's */
    *(uint64_t *)vec_at(a, i - 1) = *(uint64_t *)vec_at(a, a->n - 1);
    a->n--;
    int rc = pmdk_free(tx, off);
    if (rc) { /* still reserved by us: nobody took it */
        st_move(tx->p, off, ST_FREE, ST_NEW);
        *(uint64_t *)vec_push(a) = off;
        return tx_error(rc);
    }
    return 0;
}

int eng_free(struct txn *tx, txn_obj *o)
{
    struct pmdk_tx *t = tx->eng;
    uint64_t off;
    if (!mine(tx) || !offset_of(tx->p, o, &off) || off % GRAIN)
        return TXN_E_INVAL;
    if (pmemobj_tx_stage() != TX_STAGE_WORK)
        return TXN_E_STATE;
    if (st_get(tx->p, off) == ST_NEW)
        return free_new(tx, off);
    if (vec_reserve(&t->frees, 1))
        return TXN_E_NOMEM;
    /* LIVE -> FREEING: a second free of it, by us or anyone, fails here */
    if (!st_move(tx->p, off, ST_LIVE, ST_FREEING))
        return TXN_E_INVAL;
    int rc = pmdk_free(tx, off);
    if (rc) {
        st_move(tx->p, off, ST_FREEING, ST_LIVE);
        return tx_error(rc);
    }
    *(uint64_t *)vec_push(&t->frees) = off;
    return 0;
}

static void set_states(txn_pool *p, const struct vec *v, unsigned from, unsigned to)
{
    for (size_t i = 0; i < v->n; i++)
        st_move(p, *(uint64_t *)vec_at(v, i), from, to);
}

/* The transaction is over: PMDK let go of the reserve at pmemobj_tx_end. */
static void ended(struct txn *tx)
{
    struct pmdk_tx *t = tx->eng;
    if (t->has_reserve) {
        t->has_reserve = 0;
        at_store(&pmdk_of(tx->p)->reserve_busy, 0);
    }
    t->allocs.n = t->frees.n = 0;
}

int eng_commit(struct txn *tx)
{
    txn_pool *p = tx->p;
    struct pmdk_tx *t = tx->eng;
    set_states(p, &t->frees, ST_FREEING, ST_FREE); /* invariant 1 */
    if (pmemobj_tx_stage() == TX_STAGE_WORK)
        pmemobj_tx_commit();
    enum pobj_tx_stage stage = pmemobj_tx_stage();
    int e = pmemobj_tx_end(), rc = 0;
    if (stage == TX_STAGE_ONCOMMIT && e == 0) {
        set_states(p, &t->allocs, ST_NEW, ST_LIVE);
    } else {
        /* PMDK rolled it back itself. Its commit does not fail in 1.12
         * (it returns nothing), so this is a safety net: allocations it
         * already released are unmapped only now. */
        set_states(p, &t->frees, ST_FREE, ST_LIVE);
        set_states(p, &t->allocs, ST_NEW, ST_FREE);
        rc = e ? tx_error(e) : TXN_E_STATE;
    }
    ended(tx);
    return rc;
}

/* Roll back in PMDK, the map first (invariant 1). From another thread (a
 * pool closed under a context whose thread ended in a transaction) PMDK's
 * state is out of reach: only the map is put back. */
void eng_abort(struct txn *tx)
{
    struct pmdk_tx *t = tx->eng;
    set_states(tx->p, &t->allocs, ST_NEW, ST_FREE);
    set_states(tx->p, &t->frees, ST_FREEING, ST_LIVE);
    if (mine(tx)) {
        if (pmemobj_tx_stage() == TX_STAGE_WORK)
            pmemobj_tx_abort(ECANCELED);
        pmemobj_tx_end();
    }
    ended(tx);
}
