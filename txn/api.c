/* api.c - the front end: every call of txn.h, defined once, on the engine
 * contract (engine.h): argument checks, the pool handle and its per-thread
 * contexts, a new pool's root and meta objects, deferred actions,
 * statistics; and the inline access path's ways (txn.h): which objects a
 * transaction may read and write without calling the library. */
#define TXN_NO_INLINE /* the exported txn_read, txn_write, ... are here */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "ctxreg.h"
#include "engine.h"
#include "persist.h"
#include "txn.h"

#define DEF_SIZE ((size_t)64 << 20)
#define DEF_ROOT 64u
#define DEF_THREADS 64u
#define DEF_LOG ((size_t)64 << 10)

/* ---- the ways of txn.h's inline paths. A way caches an object the
 * engine lets the inline paths reach (eng_inline); it is asked after every
 * txn_open and every read that called the library, and the way is
 * forgotten after a write that did (the next read asks) or a txn_free. At
 * the end of a transaction each way takes the mode the engine said it
 * keeps, or is emptied; a failed call empties them all. Engines whose
 * every access calls them (eng_inlines 0: redo, incll, pmdk) get no ways
 * and pay for none of this.
 *
 * R1 A way never outlives its object. A way kept across transactions was
 *    filled for one life of a heap block; once the block is freed (by any
 *    thread) and reserved again, the engine's answer for it differs
 *    (redo1: a block of the transaction is written in place, not logged,
 *    Q3; any engine: its size). So txn_alloc drops the caller's way for
 *    the block it returns, and txn_begin drops every kept way of the
 *    thread when blocks went back to the allocator since its last check
 *    (p->freed, counted before a freed block can be reserved again).
 *    Within one transaction a way filled before another thread's free
 *    stays: the program reaches the block's next life only through the
 *    lock that other thread released, and the object it then reads was
 *    committed by it, for which every engine's kept mode is the same;
 *    txn_open and the library's calls refill the way anyway. */

static void ways_clear(struct txn *tx)
{
    tx->hot.ways = (uint32_t)eng_inlines;
    tx->ways_kept = 0;
    for (unsigned i = 0; i < TXN__WAYS; i++)
        tx->hot.way[i] = (struct txn__way){TXN__NO_OBJ, NULL, 0, TXN__W_SLOW};
}

/* R1 at a transaction's start: the thread's kept ways are of the blocks'
 * current lives. */
static void ways_check(struct txn *tx)
{
    uint64_t f = atomic_load_explicit(&tx->p->freed, memory_order_acquire);
    if (f != tx->freed_seen) {
        tx->freed_seen = f;
        if (tx->ways_kept)
            ways_clear(tx);
    }
}

static void way_end(struct txn *tx, unsigned i)
{
    struct txn__way *w = &tx->hot.way[i];
    if (tx->way_keep[i] < 0)
        w->obj = TXN__NO_OBJ;
    else
        w->wmode = (uint8_t)tx->way_keep[i];
}

/* Only the ways listed as moving are visited: with 129 ways, a walk of
 * them all at each commit cost more than it saved. */
static void ways_end(struct txn *tx)
{
    if (tx->ways_move > TXN__MOVED) {
        for (unsigned i = 0; i < TXN__WAYS; i++)
            way_end(tx, i);
    } else {
        for (int k = 0; k < tx->ways_move; k++)
            way_end(tx, tx->moved[k]);
        way_end(tx, 0);
    }
    tx->ways_move = 0;
}

/* The way o has, or the one of its set it is given. */
static unsigned way_index(struct txn *tx, const txn_obj *o, int take)
{
    unsigned i = (unsigned)(txn__set(&tx->hot, o) - tx->hot.way), set = (i - 1) / 2;
    if (tx->hot.way[i].obj == (const void *)o)
        return i;
    if (tx->hot.way[i + 1].obj == (const void *)o)
        return i + 1;
    if (!take)
        return 0;
    i += tx->way_next[set]; /* the ways of a set are filled in turn */
    tx->way_next[set] ^= 1;
    return i;
}

/* o (of `size` payload bytes) was just reached by a call of the front end:
 * its way, and way 0, say what the engine lets the inline paths do with
 * it. */
static int way_same(const struct txn__way *a, const struct txn__way *b)
{
    return a->obj == b->obj && a->base == b->base && a->lim == b->lim &&
           a->wmode == b->wmode;
}

/* Field by field: a copy of the whole struct would load words that the
 * engine's narrower stores just wrote (no store forwarding). */
static void way_set(struct txn__way *w, const struct txn__way *from)
{
    w->obj = from->obj;
    w->base = from->base;
    w->lim = from->lim;
    w->wmode = from->wmode;
}

/* Nothing is stored when the ways hold the answer already: after an
 * engine's barrier a store waits for its write-backs, which the caller's
 * next loads would otherwise overlap (undo's write, paper logging). */
static void way_fill(struct txn *tx, txn_obj *o, size_t size)
{
    if (tx->err) {
        ways_clear(tx);
        return;
    }
    struct txn__way nw = {TXN__NO_OBJ, NULL, size - 8, TXN__W_SLOW};
    int k = size < 8 ? ENG_WAY_NONE : eng_inline(tx, o, &nw);
    if (k == ENG_WAY_NONE) {
        unsigned i = way_index(tx, o, 0);
        if (i)
            tx->hot.way[i].obj = TXN__NO_OBJ;
        if (tx->hot.way[0].obj == (const void *)o)
            tx->hot.way[0].obj = TXN__NO_OBJ;
        return;
    }
#ifdef PMTX_TRACE
    /* the crash simulator traces every store to the pool: the library's */
    if (nw.wmode == TXN__W_DIRECT || nw.wmode == TXN__W_SAVE)
        nw.wmode = TXN__W_SLOW;
    if (k == TXN__W_DIRECT || k == TXN__W_SAVE)
        k = TXN__W_SLOW;
#endif
    nw.obj = o;
    unsigned i = way_index(tx, o, 1);
    if (way_same(&tx->hot.way[i], &nw) && way_same(&tx->hot.way[0], &nw) &&
        tx->way_keep[i] == k && tx->way_keep[0] == k)
        return;
    way_set(&tx->hot.way[i], &nw);
    way_set(&tx->hot.way[0], &nw);
    if (k != nw.wmode && tx->ways_move++ < TXN__MOVED)
        tx->moved[tx->ways_move - 1] = (uint8_t)i;
    tx->way_keep[i] = tx->way_keep[0] = (signed char)k;
    tx->ways_kept |= k >= 0;
}

static void way_forget(struct txn *tx, const txn_obj *o)
{
    unsigned i = way_index(tx, o, 0);
    if (i)
        tx->hot.way[i].obj = TXN__NO_OBJ;
    if (tx->hot.way[0].obj == (const void *)o)
        tx->hot.way[0].obj = TXN__NO_OBJ;
}

/* ---- per-thread contexts (ctxreg.h): each holds one of the pool's
 * context indices (pmtx: a log slot) */

static void release_ctx(void *ctx);
static void *new_ctx(void *pool, int *err);
static const struct ctxreg_ops ctx_ops = {new_ctx, release_ctx};

static int claim_idx(txn_pool *p)
{
    for (unsigned i = 0; i < p->max_ctx; i++)
        if (!p->ctx_used[i]) {
            p->ctx_used[i] = 1;
            return (int)i;
        }
    return -1;
}

static void *new_ctx(void *pool, int *err)
{
    txn_pool *p = pool;
    struct txn *tx = calloc(1, sizeof *tx + eng_tx_fmt_size); /* TX_FMT */
    if (!tx) {
        *err = TXN_E_NOMEM;
        return NULL;
    }
    ways_clear(tx);
    tx->p = p;
    tx->owner = pthread_self();
    vec_init(&tx->defers, sizeof(struct tx_defer));
    pthread_mutex_lock(&p->ctx_lock);
    int idx = claim_idx(p);
    if (idx >= 0) {
        tx->next_ctx = p->ctxs;
        p->ctxs = tx;
    }
    pthread_mutex_unlock(&p->ctx_lock);
    if (idx < 0) {
        free(tx);
        *err = TXN_E_THREADS;
        return NULL;
    }
    tx->slot_idx = (unsigned)idx;
    if ((*err = eng_pool_attach(tx)) || (*err = eng_tx_init(tx))) {
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
    eng_pool_detach(tx);
    pthread_mutex_lock(&p->ctx_lock);
    for (struct txn **pp = &p->ctxs; *pp; pp = &(*pp)->next_ctx)
        if (*pp == tx) {
            *pp = tx->next_ctx;
            break;
        }
    p->ctx_used[tx->slot_idx] = 0;
    pthread_mutex_unlock(&p->ctx_lock);
    vec_free(&tx->defers);
    free(tx);
}

static void release_all(void *pool)
{
    txn_pool *p = pool;
    while (p->ctxs)
        release_ctx(p->ctxs);
}

/* ---- pools */

static txn_pool *pool_new(void)
{
    /* `freed` has a line (sizeof *p is a multiple of it); the format's
     * part follows (POOL_FMT), the whole rounded up as aligned_alloc wants */
    size_t n = (sizeof(txn_pool) + eng_pool_fmt_size + 63) & ~(size_t)63;
    txn_pool *p = aligned_alloc(64, n);
    if (p) {
        memset(p, 0, n);
        pthread_mutex_init(&p->ctx_lock, NULL);
    }
    return p;
}

/* The format's pool is open: contexts can be made for it. */
static int pool_start(txn_pool *p)
{
    if (!(p->ctx_used = calloc(p->max_ctx ? p->max_ctx : 1, 1)))
        return TXN_E_NOMEM;
    p->gen = ctxreg_open(p, &ctx_ops);
    return p->gen ? 0 : TXN_E_NOMEM;
}

/* A handle the format holds nothing of: gone. */
static void pool_drop(txn_pool *p)
{
    free(p->ctx_used);
    pthread_mutex_destroy(&p->ctx_lock);
    free(p);
}

/* Every context released, then the format's side; `p` is gone. */
static void pool_end(txn_pool *p)
{
    if (p->gen)
        ctxreg_close(p, p->gen, release_all);
    eng_pool_close(p);
    pool_drop(p);
}

/* A layout name a pool can have: 1 to TXN_LAYOUT_MAX bytes. */
static int layout_ok(const char *layout)
{
    size_t n = strnlen(layout, TXN_LAYOUT_MAX + 1);
    return n > 0 && n <= TXN_LAYOUT_MAX;
}

static int params_of(const txn_pool_opts *o, struct pool_params *out)
{
    *out = (struct pool_params){DEF_SIZE, 0, DEF_ROOT, DEF_THREADS, DEF_LOG};
    if (o && o->size)
        out->size = o->size;
    if (out->size > TXN_POOL_MAX)
        return REFUSE(TXN_E_INVAL, "pool size %zu: at most %zu bytes", out->size, TXN_POOL_MAX);
    out->max_size = o ? o->max_size : 0; /* 0: the format's default */
    if (out->max_size && (out->max_size < out->size || out->max_size > TXN_POOL_MAX))
        return REFUSE(TXN_E_INVAL, "max_size %zu: from size (%zu) to %zu bytes", out->max_size,
                      out->size, TXN_POOL_MAX);
    if (o && o->root_size)
        out->root_size = o->root_size;
    if (o && o->threads)
        out->threads = o->threads;
    if (o && o->log_size)
        out->log_size = o->log_size;
    if (out->threads > TXN_MAX_THREADS)
        return REFUSE(TXN_E_INVAL, "%u threads: at most %u", out->threads, TXN_MAX_THREADS);
    return 0;
}

/* The root and the meta object of a new pool, in one transaction, then
 * recorded by the format. */
static int make_roots(txn_pool *p, size_t root_size)
{
    int rc = 0;
    txn *tx;
    txn_obj *root, *meta;
    if ((rc = txn_begin(p, &tx)))
        return rc;
    if ((rc = txn_alloc(tx, root_size, &root)) || (rc = txn_alloc(tx, TXN_META_SIZE, &meta))) {
        txn_abort(tx);
        return rc;
    }
    if ((rc = txn_commit(tx)))
        return rc;
    return eng_pool_seal(p, root, root_size, meta);
}

static int pool_create(const char *path, const char *layout, const txn_pool_opts *opts,
                       txn_pool **out)
{
    char file[PATH_MAX];
    struct pool_params o;
    if (!path || !layout || !out)
        return TXN_E_INVAL;
    if (!layout_ok(layout))
        return REFUSE(TXN_E_INVAL, "layout name of %zu bytes: 1 to %u", strlen(layout),
                      TXN_LAYOUT_MAX);
    int rc = params_of(opts, &o);
    if (rc || (rc = txn_pool_path(path, file, sizeof file)) || (rc = persist_init()))
        return rc;
    txn_pool *p = pool_new();
    if (!p)
        return TXN_E_NOMEM;
    if ((rc = eng_pool_create(p, file, layout, &o))) {
        pool_drop(p);
        return rc;
    }
    if ((rc = pool_start(p)) || (rc = make_roots(p, o.root_size))) {
        pool_end(p); /* the format removes a pool it has not named yet */
        return rc;
    }
    *out = p;
    return 0;
}

static int pool_open(const char *path, const char *layout, int view, txn_pool **out)
{
    char file[PATH_MAX];
    if (!path || !layout || !out)
        return TXN_E_INVAL;
    if (!layout_ok(layout)) /* no pool can have been created with it */
        return REFUSE(TXN_E_LAYOUT, "layout name of %zu bytes: 1 to %u", strlen(layout),
                      TXN_LAYOUT_MAX);
    int rc = txn_pool_path(path, file, sizeof file);
    if (rc || (rc = persist_init()))
        return rc;
    txn_pool *p = pool_new();
    if (!p)
        return TXN_E_NOMEM;
    if ((rc = eng_pool_open(p, file, layout, view))) {
        pool_drop(p);
        return rc;
    }
    if ((rc = pool_start(p))) {
        pool_end(p);
        return rc;
    }
    *out = p;
    return 0;
}

void txn_pool_size(txn_pool *p, size_t *size, size_t *max_size)
{
    if (size)
        *size = p ? __atomic_load_n(&p->size, __ATOMIC_ACQUIRE) : 0;
    if (max_size)
        *max_size = p ? p->max_size : 0;
}

size_t txn_pool_min_size(const txn_pool_opts *opts)
{
    struct pool_params o;
    return params_of(opts, &o) ? 0 : eng_pool_min_size(&o);
}

/* Each pool call starts with no problem recorded and records the one it
 * fails with (txn_pool_strerror). */
int txn_pool_create(const char *path, const char *layout, const txn_pool_opts *opts,
                    txn_pool **out)
{
    pool_problem("%s", "");
    return pool_refused(pool_create(path, layout, opts, out));
}

int txn_pool_open(const char *path, const char *layout, txn_pool **out)
{
    pool_problem("%s", "");
    return pool_refused(pool_open(path, layout, 0, out));
}

int txn_pool_view(const char *path, const char *layout, txn_pool **out)
{
    pool_problem("%s", "");
    return pool_refused(pool_open(path, layout, 1, out));
}

void txn_pool_close(txn_pool *p)
{
    if (!p)
        return;
    eng_sync(p);
    pool_end(p);
}

txn_obj *txn_root(txn_pool *p)
{
    return p ? eng_pool_root(p) : NULL;
}

txn_obj *txn_meta_root(txn_pool *p)
{
    return p ? eng_pool_meta(p) : NULL;
}

static int by_size(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b; /* .size first */
    return (x > y) - (x < y);
}

int txn_pool_inspect(const char *path, txn_pool_info *info)
{
    char file[PATH_MAX];
    if (!path || !info)
        return TXN_E_INVAL;
    memset(info, 0, sizeof *info);
    pool_problem("%s", "");
    int rc = txn_pool_path(path, file, sizeof file);
    if (!rc && !(rc = persist_init()))
        rc = eng_pool_inspect(file, info);
    qsort(info->classes, info->nclasses, sizeof info->classes[0], by_size);
    const char *why = pool_problem_text();
    snprintf(info->problem, sizeof info->problem, "%s",
             *why ? why : rc < 0 ? txn_strerror(rc) : "");
    return pool_refused(rc);
}

/* ---- transactions */

static struct txn *get_ctx(txn_pool *p, int *err)
{
    return ctxreg_get(p, p->gen, err);
}

int txn_pool_trim(txn_pool *p, size_t *returned)
{
    size_t back = 0;
    int rc = p ? 0 : TXN_E_INVAL;
    struct txn *tx = rc ? NULL : get_ctx(p, &rc);
    if (tx && tx->active)
        rc = TXN_E_STATE; /* its transaction may hold free blocks */
    if (!rc)
        rc = eng_pool_trim(tx, &back);
    if (returned)
        *returned = back;
    return rc;
}

static void end_tx(struct txn *tx, int committed)
{
    if (tx->ways_move)
        ways_end(tx);
    eng_pool_end(tx, committed);
    tx->active = 0;
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
    eng_pool_begin(tx);
    if (tx->hot.ways)
        ways_check(tx);
    tx->active = 1;
    tx->err = 0;
    tx->last_obj = NULL; /* and NULL has size 0 */
    tx->last_size = 0;
    err = eng_begin(tx);
    if (err) {
        eng_pool_end(tx, 0);
        tx->active = 0;
        return err;
    }
    *out = tx;
    return 0;
}

/* A transaction belongs to the thread that began it (pmdk's state is the
 * thread's; every engine keeps the rule). */
static int mine(const struct txn *tx)
{
    return tx && tx->active && pthread_equal(tx->owner, pthread_self());
}

int txn_commit(txn *tx)
{
    if (!mine(tx))
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
    if (!mine(tx))
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

/* Record the first error: after it the transaction can only abort, and
 * nothing of it runs inline. */
static int fail(struct txn *tx, int rc)
{
    if (rc && !tx->err)
        tx->err = rc;
    if (rc && tx->hot.ways)
        ways_clear(tx);
    return rc;
}

int txn__fail(txn *tx, int err)
{
    return tx ? fail(tx, err) : err;
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
        fail(tx, TXN_E_INVAL);
        return NULL;
    }
    void *at = eng_open(tx, o, mode);
    if (tx->hot.ways) /* what the engine lets through may have changed */
        way_fill(tx, o, tx->last_size);
    return at;
}

int txn__read(txn *tx, txn_obj *o, size_t off, void *dst, size_t n)
{
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!dst || !range_ok(tx, o, off, n))
        return TXN_E_INVAL;
    rc = eng_read(tx, o, off, dst, n);
    if (tx->hot.ways)
        way_fill(tx, o, tx->last_size);
    return rc;
}

int txn__write(txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!src || !range_ok(tx, o, off, n))
        return fail(tx, TXN_E_INVAL);
    if (n && (rc = fail(tx, eng_write(tx, o, off, src, n))))
        return rc;
    if (tx->hot.ways) /* the engine's answer may change: the next read asks */
        way_forget(tx, o);
    return 0;
}

/* The documented calls as functions, for what cannot use txn.h's inline
 * ones (bindings); C programs get those. */
int txn_read(txn *tx, txn_obj *o, size_t off, void *dst, size_t n)
{
    return txn__read(tx, o, off, dst, n);
}

int txn_write(txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    return txn__write(tx, o, off, src, n);
}

int txn_read_u64(txn *tx, txn_obj *o, size_t off, uint64_t *v)
{
    if (off % 8)
        return TXN_E_INVAL;
    return txn__read(tx, o, off, v, sizeof *v);
}

int txn_write_u64(txn *tx, txn_obj *o, size_t off, uint64_t v)
{
    if (off % 8)
        return txn__fail(tx, TXN_E_INVAL);
    return txn__write(tx, o, off, &v, sizeof v);
}

int txn_alloc(txn *tx, size_t n, txn_obj **out)
{
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!out || n == 0)
        return TXN_E_INVAL;
    if (n > tx->p->max_size)
        return TXN_E_NOSPACE;
    rc = eng_alloc(tx, n, out);
    if (!rc && tx->hot.ways) { /* R1: the block's new life */
        way_forget(tx, *out);
        assert(!txn__find(&tx->hot, *out) && "R1: no way of the block's previous life");
    }
    return rc;
}

int txn_free(txn *tx, txn_obj *o)
{
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!o || o == eng_pool_root(tx->p) || o == eng_pool_meta(tx->p))
        return TXN_E_INVAL;
    tx->last_obj = NULL; /* pmdk releases the transaction's own at once */
    if (tx->hot.ways)
        way_forget(tx, o);
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

