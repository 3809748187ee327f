/* api.c - txn.h on top of engine.h: argument checks, per-thread contexts,
 * deferred actions, statistics, error strings. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "persist.h"
#include "txn.h"

/* ---- per-thread contexts
 * A thread gets one context per pool at its first txn_begin and keeps it,
 * with its log slot, until it exits or the pool closes. A small TLS cache
 * finds it without a lock; `gen` tells a cached entry of a closed pool
 * from a new pool at the same address. */

struct tls_entry {
    txn_pool *p;
    uint64_t gen;
    struct txn *tx;
};

struct tls_state {
    struct tls_entry *e; /* this thread's contexts, one per pool */
    unsigned n, cap;
};

static __thread struct tls_state tls;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vec open_pools = {NULL, 0, 0, sizeof(struct tls_entry)};
static uint64_t next_gen = 1;

static void release_ctx(struct txn *tx);

static int pool_is_open(txn_pool *p, uint64_t gen)
{
    for (size_t i = 0; i < open_pools.n; i++) {
        struct tls_entry *e = vec_at(&open_pools, i);
        if (e->p == p && e->gen == gen)
            return 1;
    }
    return 0;
}

/* Thread exit: give back this thread's contexts of pools still open. */
static void tls_exit(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&reg_lock);
    for (unsigned i = 0; i < tls.n; i++) {
        struct tls_entry *e = &tls.e[i];
        if (pool_is_open(e->p, e->gen))
            release_ctx(e->tx);
    }
    tls.n = 0;
    pthread_mutex_unlock(&reg_lock);
    free(tls.e);
    tls.e = NULL;
    tls.cap = 0;
}

static void tls_setup(void)
{
    pthread_key_create(&tls_key, tls_exit);
}

int api_register_pool(txn_pool *p)
{
    pthread_mutex_lock(&reg_lock);
    struct tls_entry *e = vec_push(&open_pools);
    if (e) {
        p->gen = next_gen++;
        *e = (struct tls_entry){p, p->gen, NULL};
    }
    pthread_mutex_unlock(&reg_lock);
    return e ? 0 : TXN_E_NOMEM;
}

/* Pool close: forget the pool and free every context it has. */
void api_unregister_pool(txn_pool *p)
{
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < open_pools.n; i++) {
        struct tls_entry *e = vec_at(&open_pools, i);
        if (e->p == p && e->gen == p->gen) {
            *e = *(struct tls_entry *)vec_at(&open_pools, --open_pools.n);
            break;
        }
    }
    while (p->ctxs)
        release_ctx(p->ctxs);
    pthread_mutex_unlock(&reg_lock);
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

static struct txn *new_ctx(txn_pool *p, int *err)
{
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
        pthread_mutex_lock(&reg_lock);
        release_ctx(tx);
        pthread_mutex_unlock(&reg_lock);
        return NULL;
    }
    return tx;
}

/* Caller holds reg_lock. */
static void release_ctx(struct txn *tx)
{
    txn_pool *p = tx->p;
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
    for (unsigned i = 0; i < tls.n; i++)
        if (tls.e[i].p == p && tls.e[i].gen == p->gen)
            return tls.e[i].tx;
    pthread_once(&tls_once, tls_setup);
    pthread_setspecific(tls_key, &tls);
    /* drop cached entries of pools closed since */
    pthread_mutex_lock(&reg_lock);
    unsigned k = 0;
    for (unsigned i = 0; i < tls.n; i++)
        if (pool_is_open(tls.e[i].p, tls.e[i].gen))
            tls.e[k++] = tls.e[i];
    tls.n = k;
    pthread_mutex_unlock(&reg_lock);
    if (tls.n == tls.cap) {
        unsigned cap = tls.cap ? tls.cap * 2 : 4;
        struct tls_entry *e = realloc(tls.e, cap * sizeof *e);
        if (!e) {
            *err = TXN_E_NOMEM;
            return NULL;
        }
        tls.e = e;
        tls.cap = cap;
    }
    struct txn *tx = new_ctx(p, err);
    if (tx)
        tls.e[tls.n++] = (struct tls_entry){p, p->gen, tx};
    return tx;
}

/* Used by pool creation for the root allocation. */
struct txn *api_ctx(txn_pool *p, int *err)
{
    return get_ctx(p, err);
}

/* ---- transactions */

/* The actions may begin new transactions on this thread: they run from a
 * list taken out of the context first. */
static void run_defers(struct txn *tx, int outcome)
{
    struct vec run = tx->defers;
    if (!run.n)
        return;
    vec_init(&tx->defers, sizeof(struct tx_defer));
    for (size_t i = 0; i < run.n; i++) {
        struct tx_defer *d = vec_at(&run, i);
        if (d->when & outcome)
            d->fn(d->arg);
    }
    if (tx->defers.cap == 0) { /* keep the memory for the next one */
        run.n = 0;
        tx->defers = run;
    } else {
        vec_free(&run);
    }
}

static void end_tx(struct txn *tx, int committed)
{
    struct vec *give = committed ? &tx->frees : &tx->allocs;
    for (size_t i = 0; i < give->n; i++)
        alloc_release(tx->p, &tx->cache, ((struct tx_block *)vec_at(give, i))->blk);
    tx->allocs.n = tx->frees.n = 0;
    tx->active = 0;
    log_rewind(&tx->log);
    if (committed)
        pm_ctr.commits++;
    else
        pm_ctr.aborts++;
    run_defers(tx, committed ? TXN_ON_COMMIT : TXN_ON_ABORT);
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

static int range_ok(struct txn *tx, txn_obj *o, size_t off, size_t n)
{
    size_t s = txn_obj_size(tx->p, o);
    return s && off <= s && n <= s - off;
}

void *txn_open(txn *tx, txn_obj *o, int mode)
{
    int rc = usable(tx);
    if (rc)
        return NULL;
    if (!o || (mode != TXN_RO && mode != TXN_RW) || !txn_obj_size(tx->p, o)) {
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

