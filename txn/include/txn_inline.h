/* txn_inline.h - the private half of txn.h: the inline access path.
 * Included by txn.h only (its types and TXN__API come from there); no
 * program includes it. The manual is txn.h. */
#ifndef PMTX_TXN_INLINE_H
#define PMTX_TXN_INLINE_H
#ifndef PMTX_TXN_H
#error "include txn.h, not txn_inline.h"
#endif

/* ---- the inline access path
 *
 * The common case of txn_read, txn_write and their _u64 forms runs here,
 * in the caller: a few loads of the transaction's state, then the load or
 * store itself with the engine's bookkeeping for it, short enough that the
 * processor overlaps the cache misses of consecutive accesses. Anything
 * else (an object not cached yet, bounds that fail, a log that must grow,
 * an engine with more to do, the crash simulator's tracing) calls the
 * library, which does what the calls above document.
 *
 * Everything below is private to the library: its layout is part of the
 * library's ABI (the soname changes with it); programs never use it. */

#define TXN__SET_BITS 6 /* objects cached: 2 ways in each of 1 << TXN__SET_BITS
                           sets by hash, */
#define TXN__WAYS (1 + (2 << TXN__SET_BITS)) /* and way 0: the last one */
#define TXN__NO_OBJ ((const void *)~(uintptr_t)0) /* an empty way's obj */

/* A write log entry of several words: this tag | length, the address,
 * the bytes (a word entry is the address, then the word). */
#define TXN__WL_RANGE (1ull << 63)

/* How a cached object's writes are done inline. */
#define TXN__W_SLOW 0   /* call the library */
#define TXN__W_DIRECT 1 /* store in place, nothing to record (unless the
                           transaction's gate is set) */
#define TXN__W_SAVE 2   /* record (address, old word) in the write log, store */
#define TXN__W_LOG 3    /* record (address, new word) and mark its filter byte */

/* The inline path stores words to the pool and the write log as uint64_t
 * and never through a character type, and the state it reads between
 * those stores has types such a store cannot alias (pointers, uint32_t and
 * this one, which is not uint64_t's type where uint64_t is unsigned long):
 * so the compiler keeps that state in registers across the stores instead
 * of reloading it after each one. */
typedef unsigned long long txn__ull;

/* One cached object: accessible inline until the library refills the way
 * or the transaction ends or fails. */
struct txn__way {
    const void *obj;  /* the txn_obj, or TXN__NO_OBJ */
    char *base;       /* its payload as this transaction reads it */
    txn__ull lim;     /* payload bytes - 8 (payloads have at least 8) */
    uint32_t wmode;   /* TXN__W_*; with TXN__W_LOG, a read of a word the filter
                         marks calls the library */
};

/* The start of every transaction (`txn *` points here). */
struct txn__hot {
    struct txn__way way[TXN__WAYS];
    uint64_t *wl;     /* the write log: next free word */
    uint64_t *wl_end; /* while wl < wl_end there is room for a word entry */
    uint8_t *filter;  /* a byte per hash of the words written (TXN__W_LOG):
                         nonzero when one of them may be the word */
    uint64_t fmask;   /* bytes of the filter - 1 */
    uint32_t gate;    /* nonzero: direct writes call the library (undo: a
                         record awaits its barrier) */
    uint32_t ways;    /* nonzero: the engine fills ways */
    txn__ull stored;  /* bytes stored to pools inline by this transaction;
                         where the write log holds SAVE entries (none), 4 a
                         word of the log are added to it at the end, so an
                         inline word write counts nothing (its entry's two
                         words are its 8 bytes) and the log's other entries
                         subtract theirs. The library adds the total to
                         txn__stored_inline when the transaction ends (a
                         field: no thread-local access per store) */
    uint64_t *wl0;    /* the write log's first word (where a commit rewinds) */
    txn__ull freed_seen; /* the pool's `freed` when the library last looked */
    uint32_t active;  /* a transaction runs on this context */
    uint32_t quick;   /* TXN__Q_*: whether txn_begin and txn_commit run inline */
    /* K1: way 0's obj where its mode lets the access run with no test of
     * the mode, else TXN__NO_OBJ: a read when the mode is not LOG (rkey),
     * a write when it is SAVE (skey) or LOG (lkey). The library sets them
     * whenever way 0 changes (api.c), so one compare finds both the object
     * and what to do with it. */
    const void *rkey, *skey, *lkey;
};

/* hot.quick. Q1 IDLE: no transaction runs, and the next one needs nothing
 * of the library at its begin and, while it calls nothing of the library,
 * nothing at its commit but a rewind of the write log and the counts (the
 * engine says so: none; never under PMTX_TRACE). Q2 RUN: such a
 * transaction runs and has called nothing of the library since it began
 * (every library call of a running transaction sets 0). IDLE_LIB: as IDLE
 * for the begin, but the commit is the library's (redo1): the inline
 * begin leaves 0. The inline begin maps IDLE to RUN and IDLE_LIB to 0 by
 * (quick & IDLE) << 1. */
#define TXN__Q_NO 0
#define TXN__Q_IDLE 1
#define TXN__Q_RUN 2
#define TXN__Q_IDLE_LIB 4
#ifndef __cplusplus
_Static_assert(TXN__Q_RUN == TXN__Q_IDLE << 1 &&
                   ((TXN__Q_IDLE_LIB & TXN__Q_IDLE) << 1) == TXN__Q_NO,
               "the inline begin's map of the idle states");
#endif

/* The start of every txn_pool, read by the inline txn_begin. */
struct txn__pool_hot {
    txn__ull gen;   /* unique per open of a pool, never 0 */
    txn__ull freed; /* blocks given back to the allocator so far (atomic:
                       __atomic builtins) */
};

/* The calling thread's context of the pool it began a transaction on
 * last, and that pool's gen: valid while a pool of that gen is open. */
struct txn__cur {
    txn__ull gen;
    struct txn__hot *tx;
};
extern __thread struct txn__cur txn__cur __attribute__((tls_model("initial-exec")));
/* Transactions the calling thread committed inline (txn_stats). */
extern __thread uint64_t txn__commits_inline __attribute__((tls_model("initial-exec")));

/* Bytes the calling thread stored to pools inline (txn_stats). */
extern __thread uint64_t txn__stored_inline __attribute__((tls_model("initial-exec")));

/* The library's side: the documented calls, out of line. */
int txn__read(txn *tx, txn_obj *o, size_t off, void *dst, size_t n);
int txn__write(txn *tx, txn_obj *o, size_t off, const void *src, size_t n);
int txn__fail(txn *tx, int err); /* records err as the transaction's error */
int txn__write_u64(txn *tx, txn_obj *o, size_t off, uint64_t v);
int txn__begin(txn_pool *p, txn **tx);
int txn__commit(txn *tx);

/* The first of the two ways of o's set. */
static inline struct txn__way *txn__set(struct txn__hot *h, const txn_obj *o)
{
    return &h->way[1 + 2 * ((uint64_t)(uintptr_t)o * 0x9e3779b97f4a7c15ull >> (64 - TXN__SET_BITS))];
}

/* o's way: way 0 when o is the object the library saw last, else one of
 * its set's; NULL when o is not cached. */
static inline struct txn__way *txn__find(struct txn__hot *h, const txn_obj *o)
{
    struct txn__way *w = &h->way[0];
    if (__builtin_expect(w->obj != (const void *)o, 0)) {
        if (!h->ways)
            return (struct txn__way *)0;
        w = txn__set(h, o);
        if (w->obj != (const void *)o && (++w)->obj != (const void *)o)
            return (struct txn__way *)0;
    }
    return w;
}

/* The filter byte of the word at a. */
static inline uint8_t *txn__mark(const struct txn__hot *h, const void *a)
{
    return &h->filter[(uint64_t)(uintptr_t)a >> 3 & h->fmask];
}

/* Whether a word of [a, a+n) may have been written (TXN__W_LOG): reads
 * must then see the write log. Ranges past 64 bytes are left to the
 * library. */
static inline int txn__written(const struct txn__hot *h, const char *a, size_t n)
{
    if (n > 64)
        return 1;
    const char *end = a + n;
    for (a = (const char *)((uintptr_t)a & ~(uintptr_t)7); a < end; a += 8)
        if (*txn__mark(h, a))
            return 1;
    return 0;
}

#ifndef TXN_NO_INLINE
/* The word accesses are inlined wherever they are called when optimizing:
 * their common case is a few instructions, and a call of them would put
 * the caller's variables on the stack (GCC judged txn_write_u64 too long
 * to inline once its K1 paths were added). */
#ifdef __OPTIMIZE__
#define TXN__INL static inline __attribute__((always_inline))
#else
#define TXN__INL static inline
#endif

/* The library stores the transaction into a variable of this function, not
 * the caller's: the caller's `tx` then does not escape, and the compiler
 * keeps it in a register across the stores and calls of the accesses
 * (else it reloads it from the stack before each). */
static inline int txn_begin(txn_pool *p, txn **tx)
{
    struct txn__hot *h = txn__cur.tx;
    const struct txn__pool_hot *ph = (const struct txn__pool_hot *)(const void *)p;
    /* Q1; the gen first: a context of a closed pool is never read; the
     * kept ways are of the blocks' current lives (api.c's R1) */
    if (p && tx && txn__cur.gen == ph->gen && h->quick & (TXN__Q_IDLE | TXN__Q_IDLE_LIB) &&
        h->freed_seen == __atomic_load_n(&ph->freed, __ATOMIC_ACQUIRE)) {
        h->active = 1;
        h->quick = (h->quick & TXN__Q_IDLE) << 1;
        *tx = (txn *)h;
        return 0;
    }
    txn *t = (txn *)0;
    if (!tx)
        return txn__begin(p, tx); /* TXN_E_INVAL */
    int rc = txn__begin(p, &t);
    *tx = t; /* NULL after a failure: a txn_abort of it does nothing */
    return rc;
}

static inline int txn_read(txn *tx, txn_obj *o, size_t off, void *dst, size_t n)
{
    struct txn__hot *h = (struct txn__hot *)tx;
    const struct txn__way *w;
    if (h && dst && (w = txn__find(h, o)) && n <= w->lim + 8 && off <= w->lim + 8 - n) {
        const char *a = w->base + off;
        if (w->wmode != TXN__W_LOG || !txn__written(h, a, n)) {
            __builtin_memcpy(dst, a, n);
            return 0;
        }
    }
    return txn__read(tx, o, off, dst, n);
}

TXN__INL int txn_read_u64(txn *tx, txn_obj *o, size_t off, uint64_t *v)
{
    struct txn__hot *h = (struct txn__hot *)tx;
    const struct txn__way *w;
    if (off & 7)
        return TXN_E_INVAL;
    if (__builtin_expect(h && v && h->rkey == (const void *)o && off <= h->way[0].lim, 1)) { /* K1 */
        *v = *(const uint64_t *)(const void *)(h->way[0].base + off);
        return 0;
    }
    if (h && v && h->lkey == (const void *)o && off <= h->way[0].lim &&
        !*txn__mark(h, h->way[0].base + off)) {
        *v = *(const uint64_t *)(const void *)(h->way[0].base + off);
        return 0;
    }
    if (h && v && (w = txn__find(h, o)) && off <= w->lim) {
        const char *a = w->base + off;
        if (w->wmode != TXN__W_LOG || !*txn__mark(h, a)) {
            *v = *(const uint64_t *)(const void *)a;
            return 0;
        }
    }
    /* through a variable of its own, so that the caller's *v does not
     * escape and stays in a register */
    uint64_t t;
    int rc = txn__read(tx, o, off, &t, 8);
    if (!rc)
        *v = t;
    return rc;
}

/* A word write's entry at e (the log has room): SAVE, then the store. */
static inline void txn__save_word(struct txn__hot *h, uint64_t *e, char *a, uint64_t v)
{
    uint64_t *p = (uint64_t *)(void *)a;
    e[0] = (uint64_t)(uintptr_t)a;
    e[1] = *p;
    *p = v;
    h->wl = e + 2; /* its 8 bytes stored: counted from the log */
}

/* LOG: the new word, and its filter byte marked. */
static inline void txn__log_word(struct txn__hot *h, uint64_t *e, char *a, uint64_t v)
{
    e[0] = (uint64_t)(uintptr_t)a;
    e[1] = v;
    h->wl = e + 2;
    *txn__mark(h, a) = 1;
}

/* The inline write of the 8 bytes at src to a, an aligned word of w's
 * object: 0 when done, else the library must do it. */
static inline int txn__write_word(struct txn__hot *h, const struct txn__way *w, char *a,
                                  uint64_t v)
{
    uint64_t *e = h->wl, *p = (uint64_t *)(void *)a;
    if (w->wmode == TXN__W_SAVE) {
        if (e >= h->wl_end)
            return 1;
        txn__save_word(h, e, a, v);
        return 0;
    }
    if (w->wmode == TXN__W_LOG) {
        if (e >= h->wl_end)
            return 1;
        txn__log_word(h, e, a, v);
        return 0;
    }
    if (w->wmode == TXN__W_DIRECT && !h->gate) {
        *p = v;
        h->stored += 8;
        return 0;
    }
    return 1;
}

/* The same for n bytes (a multiple of 8, at most 64) at an aligned a:
 * one entry of the write log for them all. */
static inline int txn__write_words(struct txn__hot *h, const struct txn__way *w, char *a,
                                   const void *src, size_t n)
{
    uint64_t *e = h->wl;
    size_t k = 2 + n / 8;
    if ((w->wmode != TXN__W_LOG && w->wmode != TXN__W_SAVE) || (size_t)(h->wl_end - e) + 1 < k)
        return 1;
    e[0] = TXN__WL_RANGE | n;
    e[1] = (uint64_t)(uintptr_t)a;
    if (w->wmode == TXN__W_SAVE) {
        __builtin_memcpy(&e[2], a, n);
        __builtin_memcpy(a, src, n);
        h->stored += n - 4 * k; /* the log's 4 a word are added at the end */
    } else {
        __builtin_memcpy(&e[2], src, n);
        for (size_t i = 0; i < n; i += 8)
            *txn__mark(h, a + i) = 1;
    }
    h->wl = e + k;
    return 0;
}

static inline int txn_write(txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    struct txn__hot *h = (struct txn__hot *)tx;
    const struct txn__way *w;
    if (h && src && (w = txn__find(h, o)) && n <= w->lim + 8 && off <= w->lim + 8 - n) {
        char *a = w->base + off;
        if (n == 8 && !(off & 7)) {
            uint64_t v;
            __builtin_memcpy(&v, src, 8);
            if (!txn__write_word(h, w, a, v))
                return 0;
        } else if (w->wmode == TXN__W_DIRECT && !h->gate) {
            __builtin_memcpy(a, src, n);
            h->stored += n;
            return 0;
        } else if (!(off & 7) && !(n & 7) && n && n <= 64 &&
                   !txn__write_words(h, w, a, src, n)) {
            return 0;
        }
    }
    return txn__write(tx, o, off, src, n);
}

TXN__INL int txn_write_u64(txn *tx, txn_obj *o, size_t off, uint64_t v)
{
    struct txn__hot *h = (struct txn__hot *)tx;
    const struct txn__way *w;
    if (off & 7)
        return txn__fail(tx, TXN_E_INVAL);
    if (__builtin_expect(h && h->skey == (const void *)o && off <= h->way[0].lim && h->wl < h->wl_end, 1)) { /* K1 */
        txn__save_word(h, h->wl, h->way[0].base + off, v);
        return 0;
    }
    if (h && h->lkey == (const void *)o && off <= h->way[0].lim && h->wl < h->wl_end) {
        txn__log_word(h, h->wl, h->way[0].base + off, v);
        return 0;
    }
    if (h && (w = txn__find(h, o)) && off <= w->lim && !txn__write_word(h, w, w->base + off, v))
        return 0;
    return txn__write_u64(tx, o, off, v); /* v by value: no spill on the inline path */
}

#ifdef TXN__QUICK
/* Q2: what the library's commit would do for such a transaction. */
static inline int txn_commit(txn *tx)
{
    struct txn__hot *h = (struct txn__hot *)tx;
    if (h && h->quick == TXN__Q_RUN && h == txn__cur.tx) {
        /* the log's entries are SAVE's (none): 4 bytes stored a word */
        txn__stored_inline += h->stored + 4 * (txn__ull)(h->wl - h->wl0);
        h->wl = h->wl0;
        txn__commits_inline++;
        h->stored = 0;
        h->active = 0;
        h->quick = TXN__Q_IDLE;
        return 0;
    }
    return txn__commit(tx);
}
#endif
#endif /* TXN_NO_INLINE */

#endif /* PMTX_TXN_INLINE_H */
