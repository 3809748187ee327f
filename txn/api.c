/* api.c - txn.h on top of engine.h: argument checks, per-thread contexts,
 * deferred actions, statistics, error strings. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ctxreg.h"
#include "engine.h"
#include "persist.h"
#include "txn.h"

/* ---- per-thread contexts (ctxreg.h): each holds a log slot */

static void release_ctx(void *ctx);
static void *new_ctx(void *pool, int *err);
static const struct ctxreg_ops ctx_ops = {new_ctx, release_ctx};

int api_register_pool(txn_pool *p)
{
    p->gen = ctxreg_open(p, &ctx_ops);
    return p->gen ? 0 : TXN_E_NOMEM;
}

static void release_all(void *pool)
{
    txn_pool *p = pool;
    while (p->ctxs)
        release_ctx(p->ctxs);
}

/* Pool close: forget the pool and free every context it has. */
void api_unregister_pool(txn_pool *p)
{
    ctxreg_close(p, p->gen, release_all);
}

static int claim_slot(txn_pool *p)
{
    for (unsigned i = 0; i < p->hdr->nslots; i++)
        if (!p->slot_used[i]) {
            p->slot_used[i] = 1;
            return (int)i;
        }
    return -1;
}

static void *new_ctx(void *pool, int *err)
{
    txn_pool *p = pool;
    struct txn *tx = calloc(1, sizeof *tx);
    if (!tx) {
        *err = TXN_E_NOMEM;
        return NULL;
    }
    tx->p = p;
    tx->owner = pthread_self();
    vec_init(&tx->allocs, sizeof(struct tx_block));
    vec_init(&tx->frees, sizeof(struct tx_block));
    vec_init(&tx->defers, sizeof(struct tx_defer));
    pthread_mutex_lock(&p->ctx_lock);
    int slot = claim_slot(p);
    if (slot >= 0) {
        tx->next_ctx = p->ctxs;
        p->ctxs = tx;
    }
    pthread_mutex_unlock(&p->ctx_lock);
    if (slot < 0) {
        free(tx);
        *err = TXN_E_THREADS;
        return NULL;
    }
    tx->slot_idx = (unsigned)slot;
    tx->slot = pool_slot(p, (size_t)slot);
    log_attach(&tx->log, p, tx->slot);
    *err = eng_tx_init(tx);
    if (*err) {
        ctxreg_drop(p, p->gen, tx);
        return NULL;
    }
    return tx;
}

static void end_tx(struct txn *tx, int committed);

/* Called with the registry locked. A transaction still running (its
 * thread ended in it) is rolled back first, so that it holds up nobody
 * (incll: its pin). */
static void release_ctx(void *ctx)
{
    struct txn *tx = ctx;
    txn_pool *p = tx->p;
    if (tx->active && tx->eng) {
        eng_abort(tx);
        end_tx(tx, 0);
    }
    if (tx->eng)
        eng_tx_fini(tx);
    alloc_cache_drain(p, &tx->cache);
    pthread_mutex_lock(&p->ctx_lock);
    for (struct txn **pp = &p->ctxs; *pp; pp = &(*pp)->next_ctx)
        if (*pp == tx) {
            *pp = tx->next_ctx;
            break;
        }
    p->slot_used[tx->slot_idx] = 0;
    pthread_mutex_unlock(&p->ctx_lock);
    vec_free(&tx->allocs);
    vec_free(&tx->frees);
    vec_free(&tx->defers);
    free(tx);
}

static struct txn *get_ctx(txn_pool *p, int *err)
{
    return ctxreg_get(p, p->gen, err);
}

/* Used by pool creation for the root allocation. */
struct txn *api_ctx(txn_pool *p, int *err)
{
    return get_ctx(p, err);
}

/* ---- transactions */

/* Blocks a transaction gives back: its frees, or its allocations. */
static __attribute__((noinline)) void give_back(struct txn *tx, struct vec *give)
{
    for (size_t i = 0; i < give->n; i++)
        alloc_release(tx->p, &tx->cache, ((struct tx_block *)vec_at(give, i))->blk);
}

static void end_tx(struct txn *tx, int committed)
{
    struct vec *give = committed ? &tx->frees : &tx->allocs;
    if (give->n)
        give_back(tx, give);
    tx->allocs.n = tx->frees.n = 0;
    tx->active = 0;
    if (tx->log.used) /* else where log_rewind would put it */
        log_rewind(&tx->log);
    if (committed)
        pm_ctr.commits++;
    else
        pm_ctr.aborts++;
    if (tx->defers.n)
        defers_run(&tx->defers, committed ? TXN_ON_COMMIT : TXN_ON_ABORT);
}

int txn_begin(txn_pool *p, txn **out)
{
    if (!p || !out)
        return TXN_E_INVAL;
    int err = 0;
    struct txn *tx = get_ctx(p, &err);
    if (!tx)
        return err;
    if (tx->active)
        return TXN_E_NESTED;
    if (eng_persistent)
        tx_next_version(tx);
    tx->active = 1;
    tx->err = 0;
    tx->last_obj = NULL; /* and NULL has size 0 */
    tx->last_size = 0;
    err = eng_begin(tx);
    if (err) {
        tx->active = 0;
        return err;
    }
    *out = tx;
    return 0;
}

int txn_commit(txn *tx)
{
    if (!tx || !tx->active)
        return TXN_E_INVAL;
    if (tx->err) { /* txn_last_error() still says what failed */
        eng_abort(tx);
        end_tx(tx, 0);
        return TXN_E_STATE;
    }
    int rc = eng_commit(tx);
    end_tx(tx, rc == 0);
    return rc;
}

void txn_abort(txn *tx)
{
    if (!tx || !tx->active)
        return;
    eng_abort(tx);
    end_tx(tx, 0);
}

txn_pool *txn_pool_of(const txn *tx)
{
    return tx ? tx->p : NULL;
}

int txn_last_error(const txn *tx)
{
    return tx ? tx->err : TXN_E_INVAL;
}

/* Record the first error: after it the transaction can only abort. */
static int fail(struct txn *tx, int rc)
{
    if (rc && !tx->err)
        tx->err = rc;
    return rc;
}

static int usable(struct txn *tx)
{
    if (!tx || !tx->active)
        return TXN_E_INVAL;
    return tx->err ? TXN_E_STATE : 0;
}

size_t txn_obj_size(txn_pool *p, const txn_obj *o)
{
    if (!p || !o)
        return 0;
    return eng_obj_size(p, o);
}

/* An object's size, remembered for the next call of the transaction: a
 * program usually opens, reads and writes the same object in a row. Sizes
 * change only at commit (cow swaps payloads; frees take effect). */
static size_t obj_size(struct txn *tx, const txn_obj *o)
{
    if (o != tx->last_obj) {
        tx->last_size = txn_obj_size(tx->p, o);
        tx->last_obj = o;
    }
    return tx->last_size;
}

static int range_ok(struct txn *tx, txn_obj *o, size_t off, size_t n)
{
    size_t s = obj_size(tx, o);
    return s && off <= s && n <= s - off;
}

void *txn_open(txn *tx, txn_obj *o, int mode)
{
    int rc = usable(tx);
    if (rc)
        return NULL;
    if (!o || (mode != TXN_RO && mode != TXN_RW) || !obj_size(tx, o)) {
        tx->err = tx->err ? tx->err : TXN_E_INVAL;
        return NULL;
    }
    return eng_open(tx, o, mode);
}

int txn_read(txn *tx, txn_obj *o, size_t off, void *dst, size_t n)
{
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!dst || !range_ok(tx, o, off, n))
        return TXN_E_INVAL;
    return eng_read(tx, o, off, dst, n);
}

int txn_write(txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!src || !range_ok(tx, o, off, n))
        return fail(tx, TXN_E_INVAL);
    if (n == 0)
        return 0;
    return fail(tx, eng_write(tx, o, off, src, n));
}

int txn_read_u64(txn *tx, txn_obj *o, size_t off, uint64_t *v)
{
    if (off % 8)
        return TXN_E_INVAL;
    return txn_read(tx, o, off, v, sizeof *v);
}

int txn_write_u64(txn *tx, txn_obj *o, size_t off, uint64_t v)
{
    if (off % 8)
        return tx ? fail(tx, TXN_E_INVAL) : TXN_E_INVAL;
    return txn_write(tx, o, off, &v, sizeof v);
}

int txn_alloc(txn *tx, size_t n, txn_obj **out)
{
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!out || n == 0)
        return TXN_E_INVAL;
    if (n > tx->p->size)
        return TXN_E_NOSPACE;
    return eng_alloc(tx, n, out);
}

int txn_free(txn *tx, txn_obj *o)
{
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!o)
        return TXN_E_INVAL;
    return eng_free(tx, o);
}

int txn_defer(txn *tx, int when, void (*fn)(void *), void *arg)
{
    if (!tx || !tx->active || !fn || when < TXN_ON_COMMIT || when > TXN_ON_END)
        return TXN_E_INVAL;
    struct tx_defer *d = vec_push(&tx->defers);
    if (!d)
        return TXN_E_NOMEM;
    *d = (struct tx_defer){when, fn, arg};
    return 0;
}

int txn_sync(txn_pool *p)
{
    return p ? eng_sync(p) : TXN_E_INVAL;
}

const char *txn_engine_name(void)
{
    return eng_name;
}

