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

/* K1 (txn.h): way 0's keys from its obj and mode. Stored only when they
 * change, as way_fill's fields (after undo's barrier a store waits). */
static inline void keys_of(struct txn *tx, const void *obj, uint32_t wmode)
{
    const void *r = wmode != TXN__W_LOG ? obj : TXN__NO_OBJ;
    const void *s = wmode == TXN__W_SAVE ? obj : TXN__NO_OBJ;
    const void *l = wmode == TXN__W_LOG ? obj : TXN__NO_OBJ;
    if (tx->hot.rkey != r)
        tx->hot.rkey = r;
    if (tx->hot.skey != s)
        tx->hot.skey = s;
    if (tx->hot.lkey != l)
        tx->hot.lkey = l;
}

static void keys_set(struct txn *tx)
{
    keys_of(tx, tx->hot.way[0].obj, tx->hot.way[0].wmode);
}

/* Whether K1 holds: what the inline path relied on up to this call. */
static __attribute__((unused)) int keys_ok(const struct txn *tx)
{
    const struct txn__way *w = &tx->hot.way[0];
    return tx->hot.rkey == (w->wmode != TXN__W_LOG ? w->obj : TXN__NO_OBJ) &&
           tx->hot.skey == (w->wmode == TXN__W_SAVE ? w->obj : TXN__NO_OBJ) &&
           tx->hot.lkey == (w->wmode == TXN__W_LOG ? w->obj : TXN__NO_OBJ);
}

/* Only the ways filled since the last clear are emptied: a program that
 * frees a block in most transactions (a key-value store replacing
 * records) clears them at most of its begins, and a walk of all 129 ways there was
 * 8% of such a server's time (docs/access.md). */
static void ways_clear(struct txn *tx)
{
    tx->hot.ways = (uint32_t)eng_inlines;
    tx->ways_kept = 0;
    for (unsigned k = 0; k < sizeof tx->ways_filled / sizeof *tx->ways_filled; k++) {
        for (uint64_t b = tx->ways_filled[k]; b; b &= b - 1) {
            unsigned i = k * 64 + (unsigned)__builtin_ctzll(b);
            tx->hot.way[i] = (struct txn__way){TXN__NO_OBJ, NULL, 0, TXN__W_SLOW};
        }
        tx->ways_filled[k] = 0;
    }
    keys_set(tx);
}

/* R1 at a transaction's start: the thread's kept ways are of the blocks'
 * current lives. */
static void ways_check(struct txn *tx)
{
    uint64_t f = __atomic_load_n(&tx->p->hot.freed, __ATOMIC_ACQUIRE);
    if (f != tx->hot.freed_seen) {
        tx->hot.freed_seen = f;
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
        w->wmode = (uint32_t)tx->way_keep[i];
}

/* Only the ways listed as moving are visited: with 129 ways, a walk of
 * them all at each commit cost more than it saved. */
static __attribute__((noinline)) void ways_end(struct txn *tx)
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
    keys_set(tx);
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
 * next loads would otherwise overlap (undo's write, paper logging).
 * Inlined into its two callers: it runs at every txn_open, and as a call
 * it saved and restored four registers there (docs/access.md). */
static inline __attribute__((always_inline)) void way_fill(struct txn *tx, txn_obj *o,
                                                           size_t size)
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
        if (tx->hot.way[0].obj == (const void *)o) {
            tx->hot.way[0].obj = TXN__NO_OBJ;
            keys_of(tx, TXN__NO_OBJ, TXN__W_SLOW);
        }
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
    tx->ways_filled[i / 64] |= 1ull << i % 64;
    tx->ways_filled[0] |= 1;
    keys_of(tx, nw.obj, nw.wmode);
    if (k != (int)nw.wmode && tx->ways_move++ < TXN__MOVED)
        tx->moved[tx->ways_move - 1] = (uint8_t)i;
    tx->way_keep[i] = tx->way_keep[0] = (signed char)k;
    tx->ways_kept |= k >= 0;
}

static void way_forget(struct txn *tx, const txn_obj *o)
{
    unsigned i = way_index(tx, o, 0);
    if (i)
        tx->hot.way[i].obj = TXN__NO_OBJ;
    if (tx->hot.way[0].obj == (const void *)o) {
        tx->hot.way[0].obj = TXN__NO_OBJ;
        keys_of(tx, TXN__NO_OBJ, TXN__W_SLOW);
    }
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
    for (unsigned i = 0; i < TXN__WAYS; i++) /* then ways_clear keeps them so */
        tx->hot.way[i] = (struct txn__way){TXN__NO_OBJ, NULL, 0, TXN__W_SLOW};
    ways_clear(tx);
    tx->p = p;
    tx->owner = pthread_self();
    vec_init(&tx->defers, sizeof(struct tx_defer));
    vec_init(&tx->parts, sizeof(struct txn *));
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
        ctxreg_drop(p, p->hot.gen, tx);
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
    /* a joined transaction's other contexts are released on their own
     * (the thread ended, or their pool closes): they are no concern here */
    tx->parts.n = 0;
    tx->coord = NULL;
    if (txn__cur.tx == &tx->hot) /* this thread's: never read again */
        txn__cur = (struct txn__cur){0, NULL};
    if (tx->hot.active && tx->eng) {
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
    vec_free(&tx->parts);
    free(tx);
}

static void release_all(void *pool)
{
    txn_pool *p = pool;
    while (p->ctxs)
        release_ctx(p->ctxs);
}

/* ---- pools */

/* The pools this process has open, for a recovery that asks a
 * coordinator (join_decide). */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static txn_pool *open_pools; /* open_lock */

/* Whether the pool being opened by this thread is a view: a coordinator
 * its recovery opens is one too (nothing written). */
static __thread int opening_view;

static txn_pool *pool_new(void)
{
    /* `freed` has a line (sizeof *p is a multiple of it); the format's
     * part follows (POOL_FMT), the whole rounded up as aligned_alloc wants */
    size_t n = (sizeof(txn_pool) + eng_pool_fmt_size + 63) & ~(size_t)63;
    txn_pool *p = aligned_alloc(64, n);
    if (p) {
        memset(p, 0, n);
        pthread_mutex_init(&p->ctx_lock, NULL);
        pthread_mutex_init(&p->join_lock, NULL);
    }
    return p;
}

/* The format's pool is open: contexts can be made for it, and a recovery
 * may ask it about its joined transactions. */
static int pool_start(txn_pool *p, const char *file, const char *layout)
{
    if (!(p->ctx_used = calloc(p->max_ctx ? p->max_ctx : 1, 1)) || !(p->file = strdup(file)) ||
        !(p->layout = strdup(layout)))
        return TXN_E_NOMEM;
    p->uuid = eng_pool_uuid(p);
    p->hot.gen = ctxreg_open(p, &ctx_ops);
    if (!p->hot.gen)
        return TXN_E_NOMEM;
    pthread_mutex_lock(&open_lock);
    p->next_open = open_pools;
    open_pools = p;
    pthread_mutex_unlock(&open_lock);
    return 0;
}

/* A handle the format holds nothing of: gone. */
static void pool_drop(txn_pool *p)
{
    free(p->ctx_used);
    free(p->file);
    free(p->layout);
    free(p->join_marks);
    pthread_mutex_destroy(&p->ctx_lock);
    pthread_mutex_destroy(&p->join_lock);
    free(p);
}

/* Every context released, then the format's side; `p` is gone. */
static void pool_end(txn_pool *p)
{
    pthread_mutex_lock(&open_lock);
    for (txn_pool **pp = &open_pools; *pp; pp = &(*pp)->next_open)
        if (*pp == p) {
            *pp = p->next_open;
            break;
        }
    pthread_mutex_unlock(&open_lock);
    if (p->hot.gen)
        ctxreg_close(p, p->hot.gen, release_all);
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
    if ((rc = pool_start(p, file, layout)) || (rc = make_roots(p, o.root_size))) {
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
    p->view = view;
    int was_view = opening_view;
    opening_view = view;
    rc = eng_pool_open(p, file, layout, view);
    opening_view = was_view;
    if (rc) {
        pool_drop(p);
        return rc;
    }
    if ((rc = pool_start(p, file, layout))) {
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

static void join_tidy(txn_pool *p);

void txn_pool_close(txn_pool *p)
{
    if (!p)
        return;
    join_tidy(p);
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
    if (!rc && !(rc = persist_init())) {
        int was_view = opening_view;
        opening_view = 1;
        rc = eng_pool_inspect(file, info);
        opening_view = was_view;
    }
    qsort(info->classes, info->nclasses, sizeof info->classes[0], by_size);
    const char *why = pool_problem_text();
    snprintf(info->problem, sizeof info->problem, "%s",
             *why ? why : rc < 0 ? txn_strerror(rc) : "");
    return pool_refused(rc);
}

/* ---- transactions */

static struct txn *get_ctx(txn_pool *p, int *err)
{
    return ctxreg_get(p, p->hot.gen, err);
}

int txn_pool_trim(txn_pool *p, size_t *returned)
{
    size_t back = 0;
    int rc = p ? 0 : TXN_E_INVAL;
    struct txn *tx = rc ? NULL : get_ctx(p, &rc);
    if (tx && tx->hot.active)
        rc = TXN_E_STATE; /* its transaction may hold free blocks */
    if (!rc)
        rc = eng_pool_trim(tx, &back);
    if (returned)
        *returned = back;
    return rc;
}

/* What Q1 and Q2 (txn.h) promise of a context whose transaction the
 * library has not seen: nothing that a commit would have to do. */
static inline int quick_clean(const struct txn *tx)
{
    return !tx->err && !tx->parts.n && !tx->coord && !tx->defers.n && !tx->ways_move &&
           !tx->last_obj;
}

/* Whether the context, no transaction running on it, holds Q1: the next
 * transaction may begin inline. */
static uint32_t quick_idle(const struct txn *tx)
{
#ifdef PMTX_TRACE
    (void)tx;
    return TXN__Q_NO; /* every begin and commit seen by the library */
#else
    int q = !tx->hot.active && quick_clean(tx) && !tx->hot.stored && tx->hot.wl == tx->hot.wl0;
    return !q ? TXN__Q_NO : eng_quick == ENG_QUICK_ALL ? TXN__Q_IDLE : TXN__Q_IDLE_LIB;
#endif
}

/* A library call of a running transaction: its commit is the library's
 * from now on (Q2), and what Q2 promised still holds at the first. */
static inline void quick_seen(struct txn *tx)
{
    assert(tx->hot.quick != TXN__Q_RUN || quick_clean(tx));
    tx->hot.quick = TXN__Q_NO;
}

static void end_tx(struct txn *tx, int committed)
{
    if (eng_quick) /* (the other engines' contexts stay at TXN__Q_NO) */
        tx->hot.quick = TXN__Q_NO;
    if (tx->ways_move)
        ways_end(tx);
    txn__stored_inline += tx->hot.stored;
    tx->hot.stored = 0;
    eng_pool_end(tx, committed);
    tx->hot.active = 0;
    if (committed)
        pm_ctr.commits++;
    else
        pm_ctr.aborts++;
    if (tx->defers.n)
        defers_run(&tx->defers, committed ? TXN_ON_COMMIT : TXN_ON_ABORT);
    if (eng_quick && !tx->hot.active) { /* (an action may begin the next) */
        tx->last_obj = NULL; /* as txn_begin sets it: Q1 */
        tx->last_size = 0;
        tx->hot.quick = quick_idle(tx);
    }
}

int txn__begin(txn_pool *p, txn **out)
{
    if (!p || !out)
        return TXN_E_INVAL;
    int err = 0;
    struct txn *tx = get_ctx(p, &err);
    if (!tx)
        return err;
    if (eng_quick) { /* for the inline txn_begin (txn.h) */
        txn__cur.gen = p->hot.gen;
        txn__cur.tx = &tx->hot;
    }
    if (tx->hot.active)
        return TXN_E_NESTED;
    eng_pool_begin(tx);
    if (tx->hot.ways)
        ways_check(tx);
    tx->hot.active = 1;
    tx->err = 0;
    tx->last_obj = NULL; /* and NULL has size 0 */
    tx->last_size = 0;
    err = eng_begin(tx);
    if (err) {
        eng_pool_end(tx, 0);
        tx->hot.active = 0;
        tx->hot.quick = TXN__Q_NO;
        return err;
    }
#ifndef PMTX_TRACE
    /* Q2: begun, the library called for nothing else yet */
    tx->hot.quick = eng_quick == ENG_QUICK_ALL ? TXN__Q_RUN : TXN__Q_NO;
#endif
    *out = tx;
    return 0;
}

/* A transaction belongs to the thread that began it (pmdk's state is the
 * thread's; every engine keeps the rule). */
static int mine(const struct txn *tx)
{
    return tx && tx->hot.active && pthread_equal(tx->owner, pthread_self());
}

static int commit_joined(struct txn *tx);
static void abort_parts(struct txn *tx);
static size_t obj_size(struct txn *tx, const txn_obj *o);

/* A commit's rare ways, out of line: inlined into txn_commit, they made
 * every commit save and restore six registers (docs/access.md). */
static __attribute__((noinline, cold)) int commit_rare(struct txn *tx)
{
    if (tx->parts.n)
        return commit_joined(tx);
    /* tx->err: txn_last_error() still says what failed */
    eng_abort(tx);
    end_tx(tx, 0);
    return TXN_E_STATE;
}

int txn__commit(txn *tx)
{
    if (!mine(tx) || tx->coord)
        return TXN_E_INVAL;
    if (__builtin_expect(tx->parts.n || tx->err, 0))
        return commit_rare(tx);
    int rc = eng_commit(tx);
    end_tx(tx, rc == 0);
    return rc;
}

/* The exported call, for bindings and wrappers; txn.h's inline one
 * calls txn__commit when it cannot commit inline. */
int txn_commit(txn *tx)
{
    return txn__commit(tx);
}

void txn_abort(txn *tx)
{
    if (!mine(tx) || tx->coord)
        return;
    abort_parts(tx);
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
    if (rc)
        quick_seen(tx);
    if (rc && !tx->err)
        tx->err = rc;
    if (rc && tx->hot.ways)
        ways_clear(tx);
    return rc;
}

/* ---- one transaction over several pools (txn_join; docs/join.md).
 *
 * J1 A coordinator pool's join table holds, per participant context
 *    (pool uuid and context index), the seq of the last joined
 *    transaction of that context the coordinator committed. An entry
 *    changes only in a commit of the coordinator that names a newer
 *    prepared transaction of the same context, or that drops it under J3;
 *    that context runs one transaction at a time, and its prepared one is
 *    settled (its eng_finish, or its pool's recovery) before the next can
 *    prepare. So while a prepared transaction is unsettled its entry holds
 *    its seq exactly when its coordinator committed it.
 * J2 The table is read and written only under the coordinator's
 *    join_lock, held from the read through the coordinator's commit or
 *    abort: every entry in place is a committed one when the lock is free,
 *    and two commits never take one free entry.
 * J3 An entry is dropped (cleared, or given to another participant
 *    context) only when the part its seq names is settled durably, so that
 *    no recovery can ask for it again: either this handle's commit wrote
 *    it and the part's eng_finish has returned since (JOIN_SETTLED, the
 *    entry unchanged), or the participant pool is open in this process as
 *    a real pool, whose open recovered every part prepared before it, and
 *    no commit of this handle wrote the entry (so it is not one whose part
 *    is still finishing). Settled entries this handle knows of are cleared
 *    by its next joined commit, so that a restart finds them free. */

/* The table of tx's pool, read into e (all zero when it has none yet),
 * and its handle in *t (NULL then). */
static int join_table(struct txn *tx, txn_obj **t, struct join_entry *e)
{
    memset(e, 0, JOIN_ENTRIES * sizeof *e);
    int rc = txn__read(tx, eng_pool_meta(tx->p), JOIN_META_OFF, t, sizeof *t);
    if (!rc && *t)
        rc = txn__read(tx, *t, 0, e, JOIN_ENTRIES * sizeof *e);
    return rc;
}

/* The entry of participant `uuid`'s context ctx, else a free one; -1
 * when the table is full. */
static int join_find(const struct join_entry *e, uint64_t uuid, uint64_t ctx, int free_ok)
{
    int spare = -1;
    for (int k = 0; k < JOIN_ENTRIES; k++) {
        if (e[k].uuid == uuid && e[k].ctx == ctx)
            return k;
        if (spare < 0 && !e[k].uuid && free_ok)
            spare = k;
    }
    return spare;
}

/* The uuids of the real pools open in this process (J3), taken before
 * the coordinator's join_lock: join_decide holds open_lock while it
 * takes a join_lock. */
struct open_set {
    uint64_t *uuid;
    size_t n;
};

static int open_set_take(struct open_set *o)
{
    o->n = 0;
    o->uuid = NULL;
    pthread_mutex_lock(&open_lock);
    size_t n = 0;
    for (txn_pool *q = open_pools; q; q = q->next_open)
        n++;
    if (n && (o->uuid = malloc(n * sizeof *o->uuid)))
        for (txn_pool *q = open_pools; q; q = q->next_open)
            if (!q->view && q->uuid)
                o->uuid[o->n++] = q->uuid;
    pthread_mutex_unlock(&open_lock);
    return n && !o->uuid ? TXN_E_NOMEM : 0;
}

/* Whether entry k of p's table (holding e) may be dropped (J3); under
 * p's join_lock. */
static int join_droppable(const txn_pool *p, int k, const struct join_entry *e,
                          const struct open_set *o)
{
    const struct join_mark *m = &p->join_marks[k];
    int same = !memcmp(&m->e, e, sizeof *e);
    if (same && m->state == JOIN_SETTLED)
        return 1;
    if (same && m->state == JOIN_PENDING)
        return 0;
    for (size_t i = 0; i < o->n; i++)
        if (o->uuid[i] == e->uuid)
            return 1;
    return 0;
}

/* In the coordinator's transaction tx (J2: its join_lock held): each
 * prepared part's seq into its entry (at[i] its index), and the entries
 * this handle knows settled cleared (J3). */
static int join_record(struct txn *tx, const struct join_ref *refs, int *at,
                       const struct open_set *o)
{
    txn_pool *p = tx->p;
    txn_obj *t;
    /* malloc'ed: thread-local buffers took the static TLS that a dlopen'ed
     * library (the SQLite extension) has, and the shell could not load it */
    struct join_entry *e = malloc(JOIN_ENTRIES * sizeof *e);
    if (!e)
        return TXN_E_NOMEM;
    if (!p->join_marks && !(p->join_marks = calloc(JOIN_ENTRIES, sizeof *p->join_marks))) {
        free(e);
        return TXN_E_NOMEM;
    }
    int rc = join_table(tx, &t, e);
    if (!rc && !t &&
        !(rc = txn_alloc(tx, JOIN_ENTRIES * sizeof e[0], &t)))
        rc = txn__write(tx, eng_pool_meta(p), JOIN_META_OFF, &t, sizeof t);
    /* taken[k]: written by this commit, neither cleared nor given again */
    unsigned char taken[JOIN_ENTRIES] = {0};
    for (size_t i = 0; !rc && i < tx->parts.n; i++) {
        at[i] = -1;
        if (!refs[i].seq)
            continue; /* it wrote nothing */
        struct txn *part = *(struct txn **)vec_at(&tx->parts, i);
        int k = join_find(e, part->p->uuid, refs[i].ctx, 1);
        for (int j = 0; k < 0 && j < JOIN_ENTRIES; j++)
            if (!taken[j] && join_droppable(p, j, &e[j], o))
                k = j;
        if (k < 0) {
            rc = TXN_E_NOSPACE;
            break;
        }
        int same = e[k].uuid == part->p->uuid && e[k].ctx == refs[i].ctx;
        (void)same; /* read by the asserts only (none under NDEBUG) */
        assert((!same || refs[i].seq > e[k].seq) && "J1: an entry only moves to a newer transaction");
        assert((same || !e[k].uuid || join_droppable(p, k, &e[k], o)) &&
               "J3: an entry is given to another context only once its part settled");
        e[k] = (struct join_entry){part->p->uuid, refs[i].ctx, refs[i].seq};
        taken[k] = 1;
        at[i] = k;
        rc = txn__write(tx, t, (size_t)k * sizeof e[0], &e[k], sizeof e[k]);
    }
    for (int k = 0; !rc && k < JOIN_ENTRIES; k++) {
        const struct join_mark *m = &p->join_marks[k];
        if (taken[k] || m->state != JOIN_SETTLED || memcmp(&m->e, &e[k], sizeof e[k]))
            continue;
        assert(join_droppable(p, k, &e[k], o) && "J3: only a settled part's entry is cleared");
        static const struct join_entry none;
        rc = txn__write(tx, t, (size_t)k * sizeof e[0], &none, sizeof none);
    }
    free(e);
    return rc;
}

/* After the coordinator's commit of join_record's writes (J2: its
 * join_lock held): the marks follow the table. */
static void join_marks_committed(txn_pool *p, struct txn *tx, const struct join_ref *refs,
                                 const int *at)
{
    unsigned char taken[JOIN_ENTRIES] = {0};
    for (size_t i = 0; i < tx->parts.n; i++)
        if (at[i] >= 0) {
            struct txn *part = *(struct txn **)vec_at(&tx->parts, i);
            p->join_marks[at[i]] = (struct join_mark){
                {part->p->uuid, refs[i].ctx, refs[i].seq}, JOIN_PENDING};
            taken[at[i]] = 1;
        }
    for (int k = 0; k < JOIN_ENTRIES; k++)
        if (!taken[k] && p->join_marks[k].state == JOIN_SETTLED)
            p->join_marks[k].state = JOIN_UNKNOWN; /* cleared, or changed by hand */
}

/* At the close of a coordinator: the entries this handle knows settled
 * cleared in one transaction (J3), so that the next open finds them free
 * (it knows nothing of them). A failure leaves them: an entry kept is
 * never wrong, only not free. */
static void join_tidy(txn_pool *p)
{
    txn *tx;
    txn_obj *t;
    int n = 0;
    if (!p->join_marks || p->view)
        return;
    for (int k = 0; k < JOIN_ENTRIES; k++)
        n += p->join_marks[k].state == JOIN_SETTLED;
    if (!n || txn_begin(p, &tx))
        return;
    pthread_mutex_lock(&p->join_lock);
    struct join_entry e, none = {0, 0, 0};
    int rc = txn__read(tx, eng_pool_meta(p), JOIN_META_OFF, &t, sizeof t);
    for (int k = 0; !rc && t && k < JOIN_ENTRIES; k++) {
        const struct join_mark *m = &p->join_marks[k];
        if (m->state != JOIN_SETTLED)
            continue;
        rc = txn__read(tx, t, (size_t)k * sizeof e, &e, sizeof e);
        if (!rc && !memcmp(&m->e, &e, sizeof e))
            rc = txn__write(tx, t, (size_t)k * sizeof e, &none, sizeof none);
    }
    if (rc)
        txn_abort(tx);
    else if (!txn_commit(tx))
        for (int k = 0; k < JOIN_ENTRIES; k++)
            if (p->join_marks[k].state == JOIN_SETTLED)
                p->join_marks[k].state = JOIN_UNKNOWN;
    pthread_mutex_unlock(&p->join_lock);
}

/* Whether coordinator c committed ref (J1). Read in place with no
 * transaction, under c's join_lock (J2: every entry is a committed one
 * then): a transaction of this thread on c might not be had (all of c's
 * contexts in use, or this thread's running one failed already). */
static int join_committed(txn_pool *c, uint64_t me, const struct join_ref *ref)
{
    txn_obj *table;
    size_t n = JOIN_ENTRIES * sizeof(struct join_entry);
    int rc = 0;
    struct join_entry *e = malloc(n);
    if (!e)
        return TXN_E_NOMEM;
    pthread_mutex_lock(&c->join_lock);
    eng_read_committed(c, eng_pool_meta(c), JOIN_META_OFF, &table, sizeof table);
    if (table && eng_obj_size(c, table) < n)
        rc = REFUSE(TXN_E_CORRUPT, "%s: its join table %p is not one", c->file, (void *)table);
    else if (table)
        eng_read_committed(c, table, 0, e, n);
    pthread_mutex_unlock(&c->join_lock);
    if (!rc && table) {
        int k = join_find(e, me, ref->ctx, 0);
        rc = k >= 0 && e[k].seq == ref->seq;
    }
    free(e);
    return rc;
}

int join_decide(txn_pool *p, const struct join_ref *ref)
{
    uint64_t me = eng_pool_uuid(p);
    int rc;
    pthread_mutex_lock(&open_lock);
    /* a view's table may hold what its own private commits put there: a
     * real pool's recovery must not take its word (a view's recovery,
     * private too, may) */
    txn_pool *c = open_pools;
    while (c && (c->uuid != ref->uuid || (c->view && !opening_view)))
        c = c->next_open;
    if (c) { /* open here: recovered at its open */
        rc = join_committed(c, me, ref);
        pthread_mutex_unlock(&open_lock);
    } else {
        pthread_mutex_unlock(&open_lock);
        rc = pool_open(ref->file, ref->layout, opening_view, &c);
        if (!rc && c->uuid != ref->uuid)
            rc = REFUSE(TXN_E_INDOUBT, "%s is not the pool it was (uuid %016llx, not %016llx)",
                        ref->file, (unsigned long long)c->uuid, (unsigned long long)ref->uuid);
        if (!rc)
            rc = join_committed(c, me, ref);
        if (c)
            txn_pool_close(c);
    }
    if (rc < 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", *pool_problem_text() ? pool_problem_text() : txn_strerror(rc));
        return REFUSE(TXN_E_INDOUBT, "a transaction prepared in this pool waits for the decision "
                      "of its coordinator pool %s (uuid %016llx, layout %s), which cannot be "
                      "opened: %s", ref->file, (unsigned long long)ref->uuid, ref->layout, why);
    }
    return rc;
}

size_t join_names_put(const struct join_ref *ref, char *buf)
{
    size_t nf = strlen(ref->file) + 1, nl = strlen(ref->layout) + 1;
    if (nf > PATH_MAX || nl > TXN_LAYOUT_MAX + 1 || nf + nl > JOIN_NAMES_MAX)
        return 0;
    memcpy(buf, ref->file, nf);
    memcpy(buf + nf, ref->layout, nl);
    return nf + nl;
}

int join_names_get(const char *s, size_t len, struct join_ref *ref)
{
    size_t nf = len ? strnlen(s, len) : 0;
    if (nf == 0 || nf + 2 > len || s[len - 1] || strlen(s + nf + 1) + nf + 2 != len ||
        s[0] != '/')
        return 0;
    ref->file = s;
    ref->layout = s + nf + 1;
    return 1;
}

int txn_join(txn *tx, txn_pool *other, txn **part)
{
    if (!tx || !other)
        return TXN_E_INVAL;
    /* a view's prepared part or table entry would never reach its file,
     * while the real pool's seqs go on: nothing of a view is joined */
    if (!eng_joins || !tx->p->uuid || !other->uuid || tx->p->view || other->view)
        return TXN_E_NOTSUP;
    if (!mine(tx) || tx->coord || other == tx->p)
        return TXN_E_INVAL;
    if (tx->err)
        return TXN_E_STATE;
    quick_seen(tx); /* a joined commit */
    for (size_t i = 0; i < tx->parts.n; i++) {
        struct txn *t = *(struct txn **)vec_at(&tx->parts, i);
        if (t->p == other) {
            if (part)
                *part = t;
            return 0;
        }
    }
    struct txn **slot = vec_push(&tx->parts);
    if (!slot)
        return TXN_E_NOMEM;
    txn *t;
    int rc = txn_begin(other, &t);
    if (rc) {
        tx->parts.n--;
        return rc;
    }
    t->coord = tx;
    t->hot.quick = TXN__Q_NO; /* a part commits with its coordinator */
    *slot = t;
    if (part)
        *part = t;
    return 0;
}

/* The parts rolled back and ended (their TXN_ON_ABORT actions run). */
static void abort_parts(struct txn *tx)
{
    for (size_t i = 0; i < tx->parts.n; i++) {
        struct txn *t = *(struct txn **)vec_at(&tx->parts, i);
        eng_abort(t);
        t->coord = NULL;
        end_tx(t, 0);
    }
    tx->parts.n = 0;
}

/* Phase one: every part prepared; the coordinator commits with their
 * seqs in its table (J1, J2); phase two: the parts commit. A crash
 * anywhere: recovery of each part asks the coordinator (join_decide). */
static int commit_joined(struct txn *tx)
{
    size_t n = tx->parts.n;
    struct join_ref *refs = calloc(n, sizeof *refs);
    int *at = calloc(n, sizeof *at);
    struct open_set open = {NULL, 0};
    int rc = refs && at ? 0 : TXN_E_NOMEM;
    if (!rc && tx->err)
        rc = TXN_E_STATE;
    for (size_t i = 0; !rc && i < n; i++) {
        struct txn *t = *(struct txn **)vec_at(&tx->parts, i);
        refs[i] = (struct join_ref){tx->p->uuid, 0, 0, tx->p->file, tx->p->layout};
        rc = t->err ? TXN_E_STATE : eng_prepare(t, &refs[i]);
    }
    if (!rc)
        rc = open_set_take(&open);
    if (!rc) {
        pthread_mutex_lock(&tx->p->join_lock);
        if ((rc = join_record(tx, refs, at, &open)))
            eng_abort(tx);
        else if (!(rc = eng_commit(tx))) /* the joined transaction's commit point */
            join_marks_committed(tx->p, tx, refs, at);
        pthread_mutex_unlock(&tx->p->join_lock);
    } else {
        eng_abort(tx);
    }
    free(open.uuid);
    if (rc) {
        free(refs);
        free(at);
        abort_parts(tx);
        end_tx(tx, 0);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        struct txn *t = *(struct txn **)vec_at(&tx->parts, i);
        eng_finish(t); /* durable when it returns: the part is settled */
        if (at[i] >= 0) { /* J3: only now may its entry be dropped */
            pthread_mutex_lock(&tx->p->join_lock);
            struct join_mark *m = &tx->p->join_marks[at[i]];
            assert(m->state == JOIN_PENDING && m->e.seq == refs[i].seq);
            m->state = JOIN_SETTLED;
            pthread_mutex_unlock(&tx->p->join_lock);
        }
        t->coord = NULL;
        end_tx(t, 1);
    }
    free(refs);
    free(at);
    tx->parts.n = 0;
    end_tx(tx, 1);
    return 0;
}

/* The part of tx that o is an object of, when it is none of tx's pool. */
static __attribute__((noinline)) struct txn *part_find(struct txn *tx, const txn_obj *o)
{
    if (!o || obj_size(tx, o))
        return NULL;
    for (size_t i = 0; i < tx->parts.n; i++) {
        struct txn *t = *(struct txn **)vec_at(&tx->parts, i);
        if (txn_obj_size(t->p, o))
            return t;
    }
    return NULL;
}

/* The participant of a joined transaction that o belongs to, else NULL.
 * The test for no participant is inline: as a call that saved four
 * registers it was a tenth of incll's instructions on Array, paid by
 * every transaction for the rare joined one (docs/access.md). */
static inline struct txn *part_of(struct txn *tx, const txn_obj *o)
{
    return __builtin_expect(tx->parts.n != 0, 0) ? part_find(tx, o) : NULL;
}

int txn__fail(txn *tx, int err)
{
    return tx ? fail(tx, err) : err;
}

static int usable(struct txn *tx)
{
    if (!tx || !tx->hot.active)
        return TXN_E_INVAL;
    assert(keys_ok(tx) && "K1");
    quick_seen(tx);
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
        /* not through txn_obj_size: an exported function is called
         * through the PLT even from inside the library */
        tx->last_size = o ? eng_obj_size(tx->p, o) : 0;
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
    struct txn *part = part_of(tx, o);
    if (part) {
        void *at = txn_open(part, o, mode);
        if (!at)
            fail(tx, part->err ? part->err : TXN_E_INVAL);
        return at;
    }
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
    struct txn *part = part_of(tx, o);
    if (part)
        return txn__read(part, o, off, dst, n);
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
    struct txn *part = part_of(tx, o);
    if (part) /* a failed write fails the whole joined transaction */
        return fail(tx, txn__write(part, o, off, src, n));
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

/* txn.h's slow path of txn_write_u64 (its alignment checked already) */
int txn__write_u64(txn *tx, txn_obj *o, size_t off, uint64_t v)
{
    return txn__write(tx, o, off, &v, sizeof v);
}

int txn_begin(txn_pool *p, txn **tx)
{
    return txn__begin(p, tx);
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
    struct txn *part = part_of(tx, o);
    if (part)
        return txn_free(part, o);
    if (!o || o == eng_pool_root(tx->p) || o == eng_pool_meta(tx->p))
        return TXN_E_INVAL;
    tx->last_obj = NULL; /* pmdk releases the transaction's own at once */
    if (tx->hot.ways)
        way_forget(tx, o);
    return eng_free(tx, o);
}

int txn_defer(txn *tx, int when, void (*fn)(void *), void *arg)
{
    if (!tx || !tx->hot.active || !fn || when < TXN_ON_COMMIT || when > TXN_ON_END)
        return TXN_E_INVAL;
    quick_seen(tx); /* its commit runs the action */
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

