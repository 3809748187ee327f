/* redo1.c - a redo log with one persist barrier per transaction.
 *
 * Writes go to the transaction's write log in DRAM (wlog.h): txn.h's
 * inline paths append (address, new word) and set the word's bit in a
 * DRAM filter, and a read of a word whose bit is set looks the log up;
 * other reads are plain loads. At commit the log is copied into the
 * slot's persistent log as one or more parts, each with a checksum,
 * flushed, and fenced ONCE: the transaction is durable. Then it is applied
 * in place; the lines it changed are flushed at the slot's next commit
 * and become durable at that commit's barrier. No commit record and no
 * second barrier: a part is valid when its checksum holds, and a
 * transaction is committed when all its parts are valid.
 *
 * Transactions take versions from one counter per pool, in the order
 * their commits begin: a transaction that depends on another (it took a
 * lock the other released after its commit) has a higher version. Each
 * log carries a watermark: every transaction of version <= watermark had
 * its data durable when the log's barrier completed. Recovery replays, in
 * version order, the committed logs above the highest watermark it finds.
 *
 * Crash invariants
 *  Q1 Nothing in place changes before the transaction's whole log is
 *     durable: its parts are written and flushed, then barrier (1), then
 *     the log is applied.
 *  Q2 A transaction is committed iff every part of its log is valid
 *     (magic, checksum over head and entries): a torn log reads as
 *     uncommitted, and nothing of it was applied (Q1).
 *  Q3 Blocks allocated by the transaction are written in place, and
 *     their contents go into the log whole (an ALLOC record, then a range
 *     of the block): a valid log may reach the media before (1) completes,
 *     and recovery then writes them from it. When they exceed NEW_LOGGED
 *     bytes they are flushed and fenced instead, before the parts are
 *     written: barrier (0). Their allocator bits are set only when the
 *     log is applied, so a crash before it leaves them free.
 *  Q4 A slot's log space is a ring over its chain of segments; a segment
 *     is written over only when every part in it has a version at most the
 *     watermark of the slot's latest durable log. So every log of a version
 *     above some durable watermark is still in its ring, and replaying
 *     the committed logs above the highest watermark in version order
 *     gives each location its last committed value.
 *  Q5 A watermark W in the log of version v claims only what was durable
 *     when it was taken, before v's parts were written, so a valid part
 *     tells the truth whether its barrier completed or not: W is below
 *     every slot's `low` (its own included) and below v. A slot whose
 *     `low` holds the watermarks back is helped (its pending lines
 *     flushed by this thread under its lock, made durable by this
 *     barrier, its `low` cleared after it): later watermarks pass it.
 *  Q6 A slot's `low` is at most the version of any of its transactions
 *     whose data may not be durable, from before the version is taken
 *     (set under the slot's lock, before the counter's increment) until
 *     a barrier after its lines were flushed; its transactions below
 *     `low` are durable (0: all of them).
 *  Q7 Versions are never reused: the pool header's floor word holds at
 *     least every version found in a valid part at the last recovery, or
 *     the counter when the last context of the pool ended, and the counter
 *     starts there.
 *  Q8 Replay is idempotent (stores of logged bytes, allocator bits set
 *     or cleared), and the floor is raised only after its barrier: a crash
 *     during recovery recovers again.
 *  Q9 A block a transaction frees goes back to the allocator only once
 *     the slot's durable watermark has passed the transaction: until then
 *     recovery may replay its FREE record, which must not undo what a
 *     later owner of the space made durable outside any log (a run's
 *     format, a large block's chunk entries).
 *  Q10 A participant of a transaction over several pools (txn_join;
 *     docs/join.md) is prepared by step (1) of a commit whose log's last
 *     part is a prepare part naming the coordinator (redo1_log.h); its slot
 *     stays locked, its `low` at its version, until eng_finish or
 *     eng_abort, so no watermark passes it (Q5, Q6) and no helper flushes
 *     for it. eng_finish makes a done part of its version durable (one
 *     barrier) and applies the log; from then on recovery replays it
 *     without asking its coordinator, whose table may have dropped its
 *     entry (api.c's J3). eng_abort makes the prepare part invalid (one
 *     barrier): the log then reads as incomplete. Recovery replays an
 *     unsettled prepared log (above the watermark, no done part) when
 *     join_decide says committed, else drops it, and the floor then
 *     passes its version (Q7), so it is never asked about again.
 *
 * Barriers of a commit, whatever the number of writes: (1). Read-only: 0.
 * Abort: 0. One more, (0), when the blocks it allocated exceed NEW_LOGGED
 * bytes (Q3), and one when the ring grows into a new heap chunk (the
 * chunk table entry, tx_seg_new). A context's end: 1 (its pending
 * lines); the pool's last context: 1 more (the floor). A joined part:
 * prepare (1), finish 1, abort of a prepared part 1 (Q10).
 */
#include <assert.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "atomics.h"
#include "engine.h"
#include "persist.h"
#include "redo1_log.h"
#include "wlog.h"

const char eng_name[] = PMTX_ENGINE_NAME;
const int eng_inlines = 1;
/* a begin needs nothing (versions are taken at commit, from st->clock):
 * txn.h begins inline, the commit is the library's */
const int eng_quick = ENG_QUICK_BEGIN;
const int eng_persistent = 1;

#define W_FLOOR 0                        /* tx_pool_eng_words */
#define FIRST_LOG_WORDS 1024u
#define FILTER_PER_WORD 2u /* filter bytes per word of the DRAM log */
#define MIN_PART 256u      /* a segment with less room left is not begun */
#define NEW_LOGGED 4096u   /* Q3: new blocks' bytes logged, not fenced */
#define INDEX_FROM 128u    /* log words past which reads use the index */

/* ---- per-pool state (volatile) */

/* A segment of a slot's chain, in chain order. */
struct seg {
    char *at;     /* its first usable byte (tx_slot_seg) */
    size_t cap;   /* usable bytes */
    uint64_t top; /* highest version of a part written in it, this open */
};

/* A range whose lines a transaction changed: flushed at the next commit. */
struct range {
    char *a;
    size_t n;
    int meta; /* allocator metadata of the block a, n */
};

/* A log slot's volatile state. Shared: its own context commits through
 * it, and any committing thread may help it (Q5) or settle it. "busy"
 * means: only by the thread holding the slot's lock, `busy`. */
struct rslot {
    _Alignas(64) _Atomic uint64_t low; /* Q6; 0: nothing pending. Written
                                          under busy; read by any thread */
    atomic_int busy;                   /* the slot's lock: its commit, or a
                                          helper, runs */
    struct vec segs;                   /* busy: struct seg */
    size_t cur, off;                   /* busy: where the next part goes */
    uint64_t water;                    /* busy: of its latest durable log;
                                          only grows */
    const uint64_t *plo, *phi;         /* busy: its latest transaction's
                                          entries (in its context's DRAM
                                          log): the lines to flush at its
                                          next commit */
    struct vec pend;                   /* busy: struct range: and its blocks' */
    struct vec held;                   /* busy: struct held: freed, not yet
                                          given back (Q9), oldest first */
    size_t held_head;                  /* busy: of the first still held */
};

/* A block freed by the transaction of version v. */
struct held {
    void *blk;
    uint64_t v;
};

/* Per pool, shared by its contexts. */
struct rpool {
    _Alignas(64) _Atomic uint64_t clock; /* atomic: the last version taken */
    atomic_uint hi;                      /* atomic, only grows: slots used:
                                            highest index + 1 */
    unsigned nslots;                     /* set by state_get, then read only */
    unsigned users;                      /* g_lock: contexts of the pool */
    struct rslot *slots;                 /* set by state_get; each: its busy */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* p->eng's life */

/* A part of a transaction's log, placed: where it goes, its entries. */
struct cut {
    char *at;        /* its head */
    size_t from, to; /* its entries: offsets into the entries' bytes */
};

/* The index of the words a long transaction wrote, keyed by 64-byte line:
 * a read of a bucket or a node header is one probe, and the words of a
 * line written together (a bucket's two) share one slot, where a map by
 * word took a probe, a miss in a map of megabytes, per word (a DEL of
 * 200,000 keys: docs/kvstore.md 18e). Open addressing, emptied in O(1) by
 * a generation, as txn/addrmap.c's maps. */
#define LINE_WORDS 8u
struct lslot {
    uint64_t line;           /* its address / 64 */
    uint32_t gen;            /* live when gen == the index's gen */
    uint32_t at[LINE_WORDS]; /* per word: 0 when not written */
};

struct lindex {
    struct lslot *slots;
    size_t cap; /* power of two */
    size_t n;   /* live lines */
    uint32_t gen;
};

/* A log made durable (step (1)): its version, watermark, entries and
 * blocks. */
struct logged {
    uint64_t v, water;
    const char *ent;
    size_t len;
    size_t blocks; /* the transaction's allocated and freed blocks */
};

/* Per context. */
struct rtx {
    struct rpool *st;
    struct rslot *sl;
    struct wlog logs[2];   /* the transaction's writes (new bytes), and the
                              last commit's: the lines its slot flushes at
                              the next commit */
    struct wlog *wl;       /* of the running transaction */
    uint8_t *filter;       /* bytes of the words written (txn.h) */
    size_t fsize;          /* its bytes */
    struct vec helped;     /* struct rslot *: slots whose lines we flushed */
    struct vec image;      /* char: the parts, built in DRAM */
    struct vec cuts;       /* struct cut: where they go */
    struct lindex index;   /* per line, per word: its latest entry's word in
                              the log + 1, or IMG | an index into `imgs`
                              when entries write the word in part */
    size_t indexed;        /* words of the log in the index */
    struct vec imgs;       /* struct wimg */
    int prepared;          /* eng_prepare ran (Q10): its slot is locked */
    struct logged plog;    /* the prepared log: its entries stay where they
                              are (the DRAM log, or `image`) until applied */
    char *done;            /* where its done part goes */
};

/* A word that entries of the log write in part: the bytes they wrote (the
 * latest of each), and which. */
struct wimg {
    uint64_t bytes;
    uint8_t mask; /* bit i: byte i written */
};
#define IMG (1u << 31)
#define AT_MAX (IMG - 1) /* log positions an index entry can hold: a longer
                            log is read without the index (overlay) */

static int lindex_init(struct lindex *m, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->cap = cap < 16 ? 16 : cap;
    m->slots = calloc(m->cap, sizeof *m->slots);
    m->gen = 1;
    return m->slots ? 0 : TXN_E_NOMEM;
}

static void lindex_free(struct lindex *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static void lindex_clear(struct lindex *m)
{
    m->n = 0;
    if (++m->gen == 0) {
        for (size_t i = 0; i < m->cap; i++)
            m->slots[i].gen = 0;
        m->gen = 1;
    }
}

static inline size_t lindex_hash(const struct lindex *m, uint64_t line)
{
    return (size_t)((line * 0x9e3779b97f4a7c15ull) >> 17) & (m->cap - 1);
}

/* The slot of line, or NULL. */
static const struct lslot *lindex_find(const struct lindex *m, uint64_t line)
{
    if (!m->n)
        return NULL;
    for (size_t i = lindex_hash(m, line);; i = (i + 1) & (m->cap - 1)) {
        const struct lslot *e = &m->slots[i];
        if (e->gen != m->gen)
            return NULL;
        if (e->line == line)
            return e;
    }
}

/* The slot of line, made (no word written) when missing; NULL when the
 * index cannot grow. A slot from an earlier call is stale after it. */
static struct lslot *lindex_slot(struct lindex *m, uint64_t line)
{
    if ((m->n + 1) * 2 > m->cap) {
        struct lindex big;
        if (lindex_init(&big, m->cap * 2))
            return NULL;
        for (size_t i = 0; i < m->cap; i++) {
            const struct lslot *e = &m->slots[i];
            if (e->gen != m->gen)
                continue;
            size_t j = lindex_hash(&big, e->line);
            while (big.slots[j].gen == big.gen)
                j = (j + 1) & (big.cap - 1);
            big.slots[j] = *e;
            big.slots[j].gen = big.gen;
            big.n++;
        }
        lindex_free(m);
        *m = big;
    }
    size_t i = lindex_hash(m, line);
    struct lslot *e;
    while ((e = &m->slots[i])->gen == m->gen && e->line != line)
        i = (i + 1) & (m->cap - 1);
    if (e->gen != m->gen) {
        memset(e, 0, sizeof *e);
        e->gen = m->gen;
        e->line = line;
        m->n++;
    }
    return e;
}

static uint64_t *floor_word(txn_pool *p)
{
    return &tx_pool_eng_words(p)[W_FLOOR];
}

static void slot_free(struct rslot *sl)
{
    vec_free(&sl->segs);
    vec_free(&sl->pend);
    vec_free(&sl->held);
}

/* Q9: the blocks freed by transactions of version <= water, back to the
 * allocator through cache c. */
static void release_held(txn_pool *p, struct rslot *sl, struct alloc_cache *c, uint64_t water)
{
    while (sl->held_head < sl->held.n) {
        struct held *h = vec_at(&sl->held, sl->held_head);
        if (h->v > water)
            break;
        tx_cache_release(p, c, h->blk);
        sl->held_head++;
    }
    if (sl->held_head == sl->held.n)
        sl->held.n = sl->held_head = 0;
}

/* The slot's segments, from its chain (built at its first use). */
static int slot_segments(txn_pool *p, struct rslot *sl, size_t idx)
{
    if (sl->segs.n)
        return 0;
    size_t cap;
    for (char *g = tx_slot_seg(p, idx, &cap); g; g = tx_seg_next(g), cap = tx_seg_chunk_cap) {
        struct seg *s = vec_push(&sl->segs);
        if (!s)
            return TXN_E_NOMEM;
        *s = (struct seg){g, cap, 0};
    }
    return 0;
}

static struct rpool *state_get(txn_pool *p)
{
    pthread_mutex_lock(&g_lock);
    struct rpool *st = p->eng;
    if (!st && (st = aligned_alloc(64, sizeof *st))) { /* its counter has a line */
        memset(st, 0, sizeof *st);
        st->nslots = p->max_ctx;
        st->slots = aligned_alloc(64, st->nslots * sizeof *st->slots);
        if (!st->slots) {
            free(st);
            st = NULL;
        } else {
            memset(st->slots, 0, st->nslots * sizeof *st->slots);
            for (unsigned i = 0; i < st->nslots; i++) {
                vec_init(&st->slots[i].segs, sizeof(struct seg));
                vec_init(&st->slots[i].pend, sizeof(struct range));
                vec_init(&st->slots[i].held, sizeof(struct held));
            }
            atomic_store(&st->clock, *floor_word(p)); /* Q7 */
            p->eng = st;
        }
    }
    if (st)
        st->users++;
    pthread_mutex_unlock(&g_lock);
    return st;
}

/* The last context is gone: every slot's lines were made durable by its
 * context's end, so every version taken is settled (Q7). */
static void state_put(txn_pool *p, struct rpool *st)
{
    pthread_mutex_lock(&g_lock);
    if (--st->users == 0) {
        pm_store64(floor_word(p), atomic_load(&st->clock));
        pm_persist(floor_word(p), 8);
        struct alloc_cache *c = tx_cache_new();
        for (unsigned i = 0; i < st->nslots; i++) {
            if (c) /* settled by the floor; out of memory, back at the next open */
                release_held(p, &st->slots[i], c, UINT64_MAX);
            slot_free(&st->slots[i]);
        }
        tx_cache_free(p, c);
        free(st->slots);
        free(st);
        p->eng = NULL;
    }
    pthread_mutex_unlock(&g_lock);
}

/* ---- objects */

size_t eng_obj_size(txn_pool *p, const txn_obj *o)
{
    return tx_block_payload(p, o, 0);
}

/* Reads inline unless the filter marks the word; writes append to the
 * DRAM log, or store in place in a block of this transaction (Q3). */
int eng_inline(struct txn *tx, txn_obj *o, struct txn__way *w)
{
    int mine = tx_is_new(tx, o);
    w->base = (char *)o;
    w->wmode = mine ? TXN__W_DIRECT : TXN__W_LOG;
    return mine ? ENG_WAY_DROP : TXN__W_LOG;
}

/* ---- contexts */

static int filter_make(struct txn *tx, struct rtx *t, size_t bytes)
{
    uint8_t *f = calloc(bytes, 1);
    if (!f)
        return TXN_E_NOMEM;
    free(t->filter);
    t->filter = f;
    t->fsize = bytes;
    tx->hot.filter = f;
    tx->hot.fmask = bytes - 1;
    return 0;
}

static void mark(uint8_t *f, size_t fmask, const char *a, size_t n)
{
    for (uintptr_t w = (uintptr_t)a & ~(uintptr_t)7; w < (uintptr_t)a + n; w += 8)
        f[(uint64_t)w >> 3 & fmask] = 1;
}

/* The filter covers the log at FILTER_PER_WORD bytes a word: grown (and
 * made again from the log) when the log grew past it. */
static int filter_fit(struct txn *tx, struct rtx *t)
{
    size_t bytes = t->fsize;
    while (bytes < t->wl->cap * FILTER_PER_WORD)
        bytes *= 2;
    if (bytes == t->fsize)
        return 0;
    int rc = filter_make(tx, t, bytes);
    if (rc)
        return rc;
    struct wl_ent e;
    for (const uint64_t *p = t->wl->a; p < tx->hot.wl;) {
        p = wlog_next(p, &e);
        if (!e.type)
            mark(t->filter, bytes - 1, e.addr, e.len);
    }
    return 0;
}

int eng_tx_init(struct txn *tx)
{
    struct rtx *t = calloc(1, sizeof *t);
    if (!t)
        return TXN_E_NOMEM;
    vec_init(&t->helped, sizeof(struct rslot *));
    vec_init(&t->image, 1);
    vec_init(&t->cuts, sizeof(struct cut));
    vec_init(&t->imgs, sizeof(struct wimg));
    if (lindex_init(&t->index, 64)) {
        free(t);
        return TXN_E_NOMEM;
    }
    t->st = state_get(tx->p);
    int rc = t->st ? 0 : TXN_E_NOMEM;
    if (!rc) {
        t->sl = &t->st->slots[tx->slot_idx];
        rc = slot_segments(tx->p, t->sl, tx->slot_idx);
    }
    if (!rc)
        rc = wlog_init(tx, &t->logs[1], FIRST_LOG_WORDS);
    if (!rc) /* the running one's, last: it is the one txn.h appends to */
        rc = wlog_init(tx, t->wl = &t->logs[0], FIRST_LOG_WORDS);
    if (!rc)
        rc = filter_make(tx, t, FIRST_LOG_WORDS * FILTER_PER_WORD);
    if (rc) {
        if (t->st)
            state_put(tx->p, t->st);
        wlog_free(&t->logs[0]);
        wlog_free(&t->logs[1]);
        lindex_free(&t->index);
        free(t->filter);
        free(t);
        return rc;
    }
    unsigned hi = atomic_load(&t->st->hi);
    while (hi <= tx->slot_idx && !atomic_compare_exchange_weak(&t->st->hi, &hi, tx->slot_idx + 1))
        ;
    tx->eng = t;
    return 0;
}

/* Flush the lines of sl's latest transaction (its commit's, or a
 * helper's, barrier makes them durable). */
static void flush_pending(txn_pool *p, struct rslot *sl)
{
    assert(atomic_load_explicit(&sl->busy, memory_order_relaxed) &&
           "Q5: a slot's pending lines are flushed under its lock");
    struct wl_ent e;
    struct pm_flusher f = pm_flusher_begin();
    for (const uint64_t *w = sl->plo, *end = sl->phi; w < end;) {
        if (!(w[0] & WL_RANGE)) { /* a word entry */
            pm_flusher_word(&f, (const void *)(uintptr_t)w[0]);
            w += 2;
            continue;
        }
        w = wlog_next(w, &e);
        pm_flush(e.addr, e.len);
    }
    pm_flusher_end(&f);
    sl->plo = sl->phi = NULL;
    for (size_t i = 0; i < sl->pend.n; i++) {
        struct range *r = vec_at(&sl->pend, i);
        if (r->meta)
            tx_block_flush_meta(p, (uint64_t)(uintptr_t)r->a, r->n);
        else
            pm_flush(r->a, r->n);
    }
    sl->pend.n = 0;
}

static void lock_slot(struct rslot *sl)
{
    while (atomic_exchange_explicit(&sl->busy, 1, memory_order_acquire))
        while (atomic_load_explicit(&sl->busy, memory_order_relaxed))
            __builtin_ia32_pause();
}

static void unlock_slot(struct rslot *sl)
{
    atomic_store_explicit(&sl->busy, 0, memory_order_release);
}

/* The slot is given back: its lines durable, nothing of it pending. */
void eng_tx_fini(struct txn *tx)
{
    struct rtx *t = tx->eng;
    struct rslot *sl = t->sl;
    lock_slot(sl);
    if (sl->pend.n || sl->plo < sl->phi) {
        flush_pending(tx->p, sl);
        pm_barrier();
    }
    atomic_store(&sl->low, 0);
    unlock_slot(sl);
    state_put(tx->p, t->st);
    wlog_free(&t->logs[0]);
    wlog_free(&t->logs[1]);
    lindex_free(&t->index);
    vec_free(&t->imgs);
    free(t->filter);
    vec_free(&t->helped);
    vec_free(&t->image);
    vec_free(&t->cuts);
    free(t);
    tx->eng = NULL;
}

/* ---- reads and writes */

/* Whether the filter marks a word of [a, a+n). */
static int marked(const struct rtx *t, const char *a, size_t n)
{
    for (uintptr_t w = (uintptr_t)a & ~(uintptr_t)7; w < (uintptr_t)a + n; w += 8)
        if (t->filter[(uint64_t)w >> 3 & (t->fsize - 1)])
            return 1;
    return 0;
}

/* [a, a+n) as this transaction wrote it: the bytes in place, then every
 * entry of the log over them, oldest first. */
/* Lay the log's entries over [a, a+n) in dst, oldest first; from the
 * entry at `from` only when given (a word's latest). */
static void overlay(struct txn *tx, struct rtx *t, const char *a, char *dst, size_t n)
{
    struct wl_ent e;
    for (const uint64_t *p = t->wl->a; p < tx->hot.wl;) {
        p = wlog_next(p, &e);
        if (e.addr >= a + n || e.addr + e.len <= a)
            continue;
        const char *lo = e.addr > a ? e.addr : a;
        const char *hi = e.addr + e.len < a + n ? e.addr + e.len : a + n;
        memcpy(dst + (lo - a), (const char *)e.bytes + (lo - e.addr), (size_t)(hi - lo));
    }
}

/* Word w (8-aligned) of the index after entry e (at: its word + 1) wrote
 * it: e's when e covers it whole, else an image of the bytes written so
 * far, e's over those of the word's previous entry or image. */
static int index_word(struct rtx *t, uintptr_t w, const struct wl_ent *e, uint64_t at)
{
    const char *lo = (const char *)w > e->addr ? (const char *)w : e->addr;
    const char *hi = (const char *)w + 8 < e->addr + e->len ? (const char *)w + 8 : e->addr + e->len;
    struct lslot *ls = lindex_slot(&t->index, (uint64_t)w / 64);
    if (!ls || at > AT_MAX || t->imgs.n >= AT_MAX)
        return TXN_E_NOMEM; /* the caller reads the log without the index */
    uint32_t *v = &ls->at[w / 8 % LINE_WORDS];
    if (lo == (const char *)w && hi == (const char *)w + 8) {
        *v = (uint32_t)at;
        return 0;
    }
    struct wimg *img;
    if (*v & IMG) {
        img = vec_at(&t->imgs, *v & ~IMG);
    } else {
        struct wimg *fresh = vec_push(&t->imgs);
        if (!fresh)
            return TXN_E_NOMEM; /* *v is as it was, or 0 (inserted): not written */
        *fresh = (struct wimg){0, 0};
        if (*v) { /* the word's previous entry covers it whole */
            struct wl_ent prev;
            wlog_next(t->wl->a + *v - 1, &prev);
            memcpy(&fresh->bytes, (const char *)prev.bytes + ((const char *)w - prev.addr), 8);
            fresh->mask = 0xff;
        }
        *v = IMG | (uint32_t)(t->imgs.n - 1);
        img = fresh;
    }
    memcpy((char *)&img->bytes + (lo - (const char *)w), (const char *)e->bytes + (lo - e->addr),
           (size_t)(hi - lo));
    for (const char *b = lo; b < hi; b++)
        img->mask |= (uint8_t)(1u << (b - (const char *)w));
    return 0;
}

/* The index (per line and word: its latest entry, or its image) caught up
 * with the log. */
static int index_log(struct txn *tx, struct rtx *t)
{
    struct wl_ent e;
    for (const uint64_t *p = t->wl->a + t->indexed; p < tx->hot.wl;) {
        uint64_t at = (uint64_t)(p - t->wl->a) + 1;
        p = wlog_next(p, &e);
        for (uintptr_t w = (uintptr_t)e.addr & ~(uintptr_t)7; !e.type && w < (uintptr_t)e.addr + e.len;
             w += 8)
            if (index_word(t, w, &e, at)) {
                /* a word half done: the index is made again from the start */
                lindex_clear(&t->index);
                t->indexed = 0;
                t->imgs.n = 0;
                return TXN_E_NOMEM;
            }
        t->indexed = (size_t)(p - t->wl->a);
    }
    return 0;
}

/* [a, a+n) as this transaction wrote it: the bytes in place, then the
 * log's entries over them. A long log is looked up in an index of each
 * word's latest entry, or of the bytes entries wrote in a word they cover
 * in part, a probe per line: O(n / 64) probes, whatever the log's length. */
int eng_read(struct txn *tx, txn_obj *o, size_t off, void *dst, size_t n)
{
    struct rtx *t = tx->eng;
    char *a = (char *)o + off;
    memcpy(dst, a, n);
    /* a block of this transaction too: its reads must see the log even if
     * something broke Q3 and logged a write to it */
    if (tx->hot.wl == t->wl->a || !marked(t, a, n))
        return 0;
    pm_ctr.raw_lookups++;
    if (wlog_used(tx, t->wl) <= INDEX_FROM || index_log(tx, t)) {
        overlay(tx, t, a, dst, n);
        return 0;
    }
    const struct lslot *ls = NULL;
    for (uintptr_t w = (uintptr_t)a & ~(uintptr_t)7; w < (uintptr_t)a + n; w += 8) {
        if (!ls || ls->line != (uint64_t)w / 64)
            ls = lindex_find(&t->index, (uint64_t)w / 64);
        if (!ls) { /* no word of the line written: on to the next line */
            w = (w | 63) - 7;
            continue;
        }
        const uint32_t *at = &ls->at[w / 8 % LINE_WORDS];
        if (!*at)
            continue;
        assert((*at & IMG ? (*at & ~IMG) < t->imgs.n : *at <= t->indexed) &&
               "the index names an entry of the log it indexed");
        const char *lo = (const char *)w > a ? (const char *)w : a;
        const char *hi = (const char *)w + 8 < a + n ? (const char *)w + 8 : a + n;
        if (*at & IMG) {
            const struct wimg *img = vec_at(&t->imgs, *at & ~IMG);
            for (const char *b = lo; b < hi; b++)
                if (img->mask >> (b - (const char *)w) & 1)
                    ((char *)dst)[b - a] = ((const char *)&img->bytes)[b - (const char *)w];
            continue;
        }
        struct wl_ent e;
        wlog_next(t->wl->a + *at - 1, &e);
        memcpy((char *)dst + (lo - a), (const char *)e.bytes + (lo - e.addr), (size_t)(hi - lo));
    }
    return 0;
}

int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    struct rtx *t = tx->eng;
    char *a = (char *)o + off;
    if (tx_is_new(tx, o)) { /* Q3 */
        pm_memcpy(a, src, n);
        return 0;
    }
    int rc = wlog_append(tx, t->wl, a, src, n);
    if (!rc)
        rc = filter_fit(tx, t);
    if (!rc)
        mark(t->filter, t->fsize - 1, a, n);
    return rc;
}

static uint64_t settle(struct txn *tx, struct rtx *t, uint64_t inflight);

/* A full pool may have room held back (Q9): settled, and tried again. */
int eng_alloc(struct txn *tx, size_t n, txn_obj **out)
{
    struct rtx *t = tx->eng;
    struct tx_block b;
    int rc = tx_reserve(tx, n, &b);
    if (rc == TXN_E_NOSPACE) {
        lock_slot(t->sl);
        settle(tx, t, 0);
        unlock_slot(t->sl);
        rc = tx_reserve(tx, n, &b);
    }
    if (!rc)
        *out = b.blk;
    return rc;
}

int eng_free(struct txn *tx, txn_obj *o)
{
    return tx_mark_free(tx, o, NULL);
}

/* ---- commit */

/* The index of a long log emptied (its next transaction starts none). */
static void index_clear(struct rtx *t)
{
    if (t->indexed) {
        lindex_clear(&t->index);
        t->indexed = 0;
        t->imgs.n = 0;
    }
}

/* Whether the filter is emptied entry by entry (a store or two an entry)
 * rather than whole (a store per 32 bytes of filter). */
static inline int filter_by_entry(const struct txn *tx, const struct rtx *t)
{
    return wlog_used(tx, t->wl) * 32 <= t->fsize;
}

/* The filter bytes of the range entry's words [a, a+len) cleared: they
 * follow each other in the filter and are cleared 8 at a time; bytes past
 * them are cleared too, which is harmless (every byte is 0 after the
 * commit). */
static inline void filter_clear_range(uint8_t *f, uint64_t mask, uint64_t a, uint64_t len)
{
    for (uint64_t w = a >> 3, last = (a + len + 7) >> 3; w < last; w += 8) {
        if ((w & mask) + 8 <= mask + 1) {
            const uint64_t zero = 0;
            memcpy(&f[w & mask], &zero, 8);
        } else { /* at the filter's end: byte by byte, wrapping */
            for (uint64_t k = w; k < w + 8; k++)
                f[k & mask] = 0;
        }
    }
}

/* One pass over the DRAM log's entries [p, end): with `store`, each
 * entry's bytes stored in place (a commit, after (1)); with `clear`, its
 * filter bytes cleared (in the commit's pass: a pass of its own cost about
 * 10 instructions an entry, docs/access.md). */
static inline __attribute__((always_inline)) void walk_log(const uint64_t *p,
                                                           const uint64_t *const end, uint8_t *f,
                                                           const uint64_t mask, const int store,
                                                           const int clear)
{
    while (p < end) {
        if (!(p[0] & WL_RANGE)) { /* a word entry */
            if (store)
                pm_store64((void *)(uintptr_t)p[0], p[1]);
            if (clear)
                f[p[0] >> 3 & mask] = 0;
            p += 2;
            continue;
        }
        assert(!(p[0] & (WL_ALLOC | WL_FREE)) && "the DRAM log holds data entries only");
        const uint64_t len = p[0] & WL_LEN_MASK;
        if (store)
            pm_memcpy((void *)(uintptr_t)p[1], &p[2], len);
        if (clear)
            filter_clear_range(f, mask, p[1], len);
        p += 2 + (len + 7) / 8;
    }
}

/* The filter empty again (an abort: a commit empties it as it applies):
 * entry by entry for a short log, else whole. */
static void filter_clear(struct txn *tx, struct rtx *t)
{
    index_clear(t);
    if (filter_by_entry(tx, t))
        walk_log(t->wl->a, tx->hot.wl, t->filter, t->fsize - 1, 0, 1);
    else
        memset(t->filter, 0, t->fsize);
}

/* Q5: the watermark of version v's log: below every slot's `low`. The
 * slots that hold it at or below `want` (the versions the ring must get
 * past to move on) are helped when their lock can be had without waiting,
 * so that the next watermark passes them. */
static uint64_t watermark(struct txn *tx, struct rtx *t, uint64_t v, uint64_t want)
{
    struct rpool *st = t->st;
    uint64_t water = v - 1;
    unsigned hi = atomic_load(&st->hi);
    t->helped.n = 0;
    for (unsigned i = 0; i < hi; i++) {
        struct rslot *s = &st->slots[i];
        uint64_t low = atomic_load(&s->low);
        if (!low)
            continue;
        if (low - 1 < water)
            water = low - 1;
        if (s == t->sl || low > want ||
            atomic_exchange_explicit(&s->busy, 1, memory_order_acquire))
            continue;
        struct rslot **h = vec_push(&t->helped);
        if (h && atomic_load(&s->low) == low) {
            *h = s;
            flush_pending(tx->p, s);
        } else {
            if (h)
                t->helped.n--;
            unlock_slot(s);
        }
    }
    return water;
}

/* The next segment this slot may write over (Q4), growing the chain when
 * none may. Its top becomes v. */
static int reuse_segment(struct rslot *sl, uint64_t v)
{
    size_t n = sl->segs.n;
    for (size_t k = 1; k <= n; k++) {
        size_t i = (sl->cur + k) % n;
        struct seg *s = vec_at(&sl->segs, i);
        if (s->top <= sl->water) {
            sl->cur = i;
            sl->off = 0;
            s->top = v;
            return 1;
        }
    }
    return 0;
}

static uint64_t settle(struct txn *tx, struct rtx *t, uint64_t inflight);

#define SETTLE_WAITS 1000 /* yields a commit waits for its ring to wrap */

static int next_segment(struct txn *tx, struct rtx *t, uint64_t v)
{
    struct rslot *sl = t->sl;
    size_t n = sl->segs.n;
    if (reuse_segment(sl, v))
        return 0;
    struct seg *last = vec_at(&sl->segs, n - 1), *s = vec_push(&sl->segs);
    char *chunk;
    if (!s)
        return TXN_E_NOMEM;
    int rc = tx_seg_new(tx->p, &chunk);
    if (rc) {
        sl->segs.n--;
        /* the pool is full: settle, reuse. Another thread's transaction in
         * flight holds the watermark below this ring's segments (settle's
         * Q6) until it commits, which takes microseconds: waited for, a
         * while, rather than a full pool refused for a log that can wrap */
        for (unsigned k = 0; rc == TXN_E_NOSPACE && k < SETTLE_WAITS; k++) {
            settle(tx, t, v);
            if (reuse_segment(sl, v))
                return 0;
            sched_yield();
        }
        return rc;
    }
    last = vec_at(&sl->segs, n - 1); /* the push may have moved it */
    tx_seg_link(last->at, chunk); /* durable at (1), with the part */
    *s = (struct seg){chunk, tx_seg_chunk_cap, v};
    sl->cur = n;
    sl->off = 0;
    return 0;
}

/* The log's entries as parts: each part a head and whole entries, cut
 * where the slot's segments end (struct cut). */
static int place_parts(struct txn *tx, struct rtx *t, const char *ent, size_t len, uint64_t v,
                       struct vec *cuts)
{
    struct rslot *sl = t->sl;
    size_t from = 0;
    for (;;) {
        struct seg *s = vec_at(&sl->segs, sl->cur);
        size_t room = s->cap > sl->off ? s->cap - sl->off : 0;
        if (room >= sizeof(struct r1_part) + (len - from)) { /* the rest in one part */
            struct cut *c = vec_push(cuts);
            if (!c)
                return TXN_E_NOMEM;
            *c = (struct cut){s->at + sl->off, from, len};
            sl->off += (sizeof(struct r1_part) + (len - from) + 63) & ~(size_t)63;
            s->top = v;
            return 0;
        }
        if (from == 0 && sl->segs.n == 1 && sl->off && sizeof(struct r1_part) + len <= s->cap) {
            /* a ring of one segment cannot hold a split log: the whole of
             * it at the segment's start once settled, or in a new one */
            int rc = next_segment(tx, t, v);
            if (rc)
                return rc;
            continue;
        }
        if (room < sizeof(struct r1_part) + (len - from < MIN_PART ? len - from : MIN_PART) ||
            room < sizeof(struct r1_part) + 16) {
            int rc = next_segment(tx, t, v);
            if (rc)
                return rc;
            continue;
        }
        /* whole entries that fit */
        size_t to = from;
        while (to < len) {
            size_t w = wlog_entry_words((const uint64_t *)(ent + to), (len - to) / 8) * 8;
            if (sizeof(struct r1_part) + (to + w - from) > room)
                break;
            to += w;
        }
        if (to == from && to < len) { /* not even one: a fresh segment */
            if (sl->off == 0 && s->cap >= tx_seg_chunk_cap)
                return TXN_E_LOGFULL;
            int rc = next_segment(tx, t, v);
            if (rc)
                return rc;
            continue;
        }
        struct cut *c = vec_push(cuts);
        if (!c)
            return TXN_E_NOMEM;
        *c = (struct cut){s->at + sl->off, from, to};
        sl->off += (sizeof(struct r1_part) + (to - from) + 63) & ~(size_t)63;
        s->top = v;
        from = to;
        if (from == len)
            return 0;
    }
}

/* Write and flush one part (not fenced). */
static void write_part(char *at, uint64_t magic, uint64_t v, uint64_t water, size_t idx,
                       size_t nparts, const char *bytes, size_t len)
{
    struct r1_part h = {magic, v, water, (uint32_t)idx, (uint32_t)nparts, len, 0};
    h.csum = r1_part_csum(&h, bytes);
    if (len)
        pm_memcpy(at + sizeof h, bytes, len);
    pm_memcpy(at, &h, sizeof h);
    pm_flush(at, sizeof h + len);
    pm_ctr.log_bytes += sizeof h + len;
}

/* Write and flush the parts of version v (not fenced); with `prep`, the
 * last cut is the prepare part, of prep's bytes. */
static void write_parts(const char *ent, const char *prep, const struct vec *cuts, uint64_t v,
                        uint64_t water)
{
    for (size_t i = 0; i < cuts->n; i++) {
        const struct cut *c = vec_at(cuts, i);
        int last = prep && i == cuts->n - 1;
        write_part(c->at, last ? R1_PREP_MAGIC : R1_PART_MAGIC, v, water, i, cuts->n,
                   (last ? prep : ent) + c->from, c->to - c->from);
    }
}

/* Bytes of the blocks the transaction allocated. */
static size_t new_bytes(const struct txn *tx)
{
    size_t n = 0, na;
    const struct tx_block *a = tx_allocs(tx, &na);
    for (size_t i = 0; i < na; i++)
        n += a[i].size;
    return n;
}

#ifndef NDEBUG
/* Q3: no entry of the DRAM log lies in a block the transaction allocated
 * (they are written in place; R1 of txn/api.c keeps a way of the block's
 * previous life from logging into it). */
#define Q3_CHECK_MAX (1u << 20) /* log words times blocks: the check is quadratic */

static void assert_q3(struct txn *tx, struct rtx *t)
{
    struct wl_ent e;
    size_t na;
    const struct tx_block *a = tx_allocs(tx, &na);
    if ((uint64_t)wlog_used(tx, t->wl) * na > Q3_CHECK_MAX)
        return; /* a big transaction: unchecked, as assert_replay does */
    for (const uint64_t *p = t->wl->a; p < tx->hot.wl;) {
        p = wlog_next(p, &e);
        for (size_t i = 0; i < na; i++) {
            const struct tx_block *b = &a[i];
            assert((e.addr + e.len <= (char *)b->blk || e.addr >= (char *)b->blk + b->size) &&
                   "Q3: a write to a block of the transaction was logged");
        }
    }
}
#endif

/* The entries of the log, in the order apply() makes them take effect:
 * a record per block the transaction allocated (with its contents when
 * `whole`, Q3: in memory already), the DRAM log's entries, then a record
 * per block it freed. Replay then writes what apply() wrote, in its
 * order. */
static int entries(struct txn *tx, struct rtx *t, size_t blocks, int whole, const char **ent,
                   size_t *len)
{
    size_t logged = wlog_used(tx, t->wl), words = 0;
    if (!blocks) {
        *ent = (const char *)t->wl->a;
        *len = logged * 8;
        return 0;
    }
    size_t na, nf;
    const struct tx_block *al = tx_allocs(tx, &na), *fr = tx_frees(tx, &nf);
    assert(blocks == na + nf && "tx_block_count counts the lists");
#ifndef NDEBUG
    assert_q3(tx, t);
#endif
    size_t need = logged + 2 * blocks + (whole ? 2 * na + new_bytes(tx) / 8 : 0);
    t->image.n = 0;
    if (vec_reserve(&t->image, need * 8))
        return TXN_E_NOMEM;
    uint64_t *w = (uint64_t *)t->image.a;
    for (size_t i = 0; i < na; i++) {
        const struct tx_block *b = &al[i];
        w[words++] = WL_ALLOC | b->size;
        w[words++] = (uint64_t)(uintptr_t)b->blk;
        if (whole) { /* sizes are multiples of 16 */
            w[words++] = WL_RANGE | b->size;
            w[words++] = (uint64_t)(uintptr_t)b->blk;
            memcpy(&w[words], b->blk, b->size);
            words += b->size / 8;
        }
    }
    memcpy(&w[words], t->wl->a, logged * 8);
    words += logged;
    for (size_t i = 0; i < nf; i++) {
        const struct tx_block *b = &fr[i];
        w[words++] = WL_FREE | b->size;
        w[words++] = (uint64_t)(uintptr_t)b->blk;
    }
    assert(words == need && "entries(): the reservation is exact");
    *ent = (const char *)w;
    *len = words * 8;
    return 0;
}

/* In place, after (1): the log's bytes, the allocator bits, the filter
 * emptied. The lines they change are flushed at the slot's next commit:
 * the log's entries stay where they are, in the DRAM log the next
 * transaction does not use, and the blocks' ranges are listed (out of
 * memory, flushed now). */
static void apply(struct txn *tx, struct rtx *t, size_t blocks)
{
    struct rslot *sl = t->sl;
    index_clear(t);
    if (filter_by_entry(tx, t)) {
        walk_log(t->wl->a, tx->hot.wl, t->filter, t->fsize - 1, 1, 1);
    } else {
        walk_log(t->wl->a, tx->hot.wl, NULL, 0, 1, 0);
        memset(t->filter, 0, t->fsize);
    }
    sl->plo = t->wl->a;
    sl->phi = tx->hot.wl;
    if (!blocks)
        return;
    size_t na, nf;
    const struct tx_block *al = tx_allocs(tx, &na), *fr = tx_frees(tx, &nf);
    assert(blocks == na + nf && "the blocks counted at step (1) are those applied");
    int keep = !vec_reserve(&sl->pend, 2 * na + nf);
    tx_apply_allocs(tx, !keep);
    for (size_t i = 0; i < blocks; i++) {
        const struct tx_block *b = i < na ? &al[i] : &fr[i - na];
        if (!keep) {
            if (i < na)
                pm_flush(b->blk, b->size);
            continue;
        }
        *(struct range *)vec_push(&sl->pend) = (struct range){b->blk, b->size, 1};
        if (i < na) /* its contents, when they were logged (Q3) */
            *(struct range *)vec_push(&sl->pend) = (struct range){b->blk, b->size, 0};
    }
}

#ifndef NDEBUG
#define REPLAY_CHECK_MAX 1024u /* entries: the check is quadratic */

/* Q8 in a debug build, after apply(): what replaying the log would write
 * equals memory. Each byte of a data entry that no later entry writes
 * again must be in place (the transaction's locks still keep other
 * threads away from them). */
static void assert_replay(const char *ent, size_t len)
{
    const uint64_t *w = (const uint64_t *)ent, *end = w + len / 8;
    struct wl_ent e[REPLAY_CHECK_MAX];
    size_t n = 0;
    while (w < end && n < REPLAY_CHECK_MAX)
        w = wlog_next(w, &e[n++]);
    if (w < end)
        return;
    for (size_t i = 0; i < n; i++) {
        if (e[i].type)
            continue;
        for (size_t b = 0; b < e[i].len; b++) {
            const char *a = e[i].addr + b;
            int later = 0;
            for (size_t j = i + 1; j < n && !later; j++)
                later = !e[j].type && a >= e[j].addr && a < e[j].addr + e[j].len;
            assert((later || *a == ((const char *)e[i].bytes)[b]) &&
                   "Q8: replaying the log writes what apply() wrote");
        }
    }
}
#endif

/* The next transaction writes the other DRAM log. */
static void switch_log(struct txn *tx, struct rtx *t)
{
    t->wl = t->wl == &t->logs[0] ? &t->logs[1] : &t->logs[0];
    wlog_rewind(tx, t->wl);
}

/* Q9: the transaction's frees are held, not given back by the front end
 * (out of memory, one is lost until the next open). */
static void hold_frees(struct txn *tx, struct rslot *sl, uint64_t v)
{
    size_t nf;
    const struct tx_block *fr = tx_frees(tx, &nf);
    for (size_t i = 0; i < nf; i++) {
        struct held *h = vec_push(&sl->held);
        if (h)
            *h = (struct held){fr[i].blk, v};
    }
    tx_take_blocks(tx);
}

/* The prepare part's one range entry (redo1_log.h) for ref, into buf;
 * its bytes, or 0 when ref's names are too long. */
#define PREP_MAX (3 * 8 + JOIN_NAMES_MAX + 8)
static size_t prep_entry(const struct join_ref *ref, uint64_t *buf)
{
    size_t n = join_names_put(ref, (char *)&buf[3]);
    if (!n)
        return 0;
    buf[0] = WL_RANGE | (8 + n);
    buf[1] = ref->uuid;
    buf[2] = ref->ctx;
    size_t words = 3 + (n + 7) / 8;
    memset((char *)&buf[3] + n, 0, words * 8 - (24 + n));
    return words * 8;
}

/* Step (1) of a commit: the log of the transaction durable as version *v
 * (Q1), with `ref`'s prepare part last when a participant (Q10); the slot
 * stays locked. On an error the transaction is rolled back (eng_abort),
 * the slot unlocked. */
static int log_durable(struct txn *tx, struct rtx *t, const struct join_ref *ref,
                       struct logged *out)
{
    struct rslot *sl = t->sl;
    const char *ent;
    size_t len, plen = 0;
    uint64_t prep[PREP_MAX / 8];
    struct vec *cuts = &t->cuts;
    cuts->n = 0;
    if (ref && !(plen = prep_entry(ref, prep))) {
        eng_abort(tx);
        return TXN_E_INVAL;
    }
    size_t blocks = tx_block_count(tx);
    int whole = !blocks || new_bytes(tx) <= NEW_LOGGED;
    int rc = entries(tx, t, blocks, whole, &ent, &len);
    if (rc) {
        eng_abort(tx);
        return rc;
    }
    lock_slot(sl);
    uint64_t low = atomic_load_explicit(&sl->low, memory_order_relaxed);
    if (!low) /* Q6 */
        atomic_store_explicit(&sl->low, atomic_load(&t->st->clock) + 1, memory_order_release);
    uint64_t v = atomic_fetch_add(&t->st->clock, 1) + 1;
    struct seg *cur = vec_at(&sl->segs, sl->cur);
    size_t sc = sl->cur, so = sl->off;
    uint64_t top = cur->top;
    rc = place_parts(tx, t, ent, len, v, cuts);
    if (!rc && ref) {
        /* the prepare part whole in one part (one entry), then the room of
         * the done part, so that eng_finish cannot fail (Q10) */
        struct vec done;
        vec_init(&done, sizeof(struct cut));
        rc = place_parts(tx, t, (const char *)prep, plen, v, cuts);
        if (!rc)
            rc = place_parts(tx, t, NULL, 0, v, &done);
        if (!rc)
            t->done = ((struct cut *)vec_at(&done, 0))->at;
        vec_free(&done);
    }
    if (rc) { /* nothing written: the ring as it was */
        sl->cur = sc;
        sl->off = so;
        ((struct seg *)vec_at(&sl->segs, sc))->top = top;
        atomic_store(&sl->low, low);
        unlock_slot(sl);
        eng_abort(tx);
        return rc;
    }
    /* not (cur + 1) % n: a divide takes longer than this whole step */
    struct seg *next = vec_at(&sl->segs, sl->cur + 1 < sl->segs.n ? sl->cur + 1 : 0);
    uint64_t water = watermark(tx, t, v, next->top);
    flush_pending(tx->p, sl);
    if (!whole) {
        tx_flush_new_blocks(tx);
        pm_barrier(); /* (0) Q3 */
    }
    write_parts(ent, ref ? (const char *)prep : NULL, cuts, v, water);
    pm_barrier(); /* (1) Q1 */
    for (size_t i = 0; i < t->helped.n; i++) {
        struct rslot *s = *(struct rslot **)vec_at(&t->helped, i);
        atomic_store_explicit(&s->low, 0, memory_order_release);
        unlock_slot(s);
    }
    assert(water >= sl->water && "Q4: a slot's watermark only grows");
    assert(water < v && "Q5: a watermark claims only versions before its log's");
    sl->water = water;
    /* not a locked instruction: that would wait here for the write-backs
     * the barrier ordered, which the stores below may overlap */
    atomic_store_explicit(&sl->low, v, memory_order_release);
    *out = (struct logged){v, water, ent, len, blocks};
    return 0;
}

/* After (1): the log applied in place, its frees held (Q9), the slot
 * unlocked. */
static void applied(struct txn *tx, struct rtx *t, const struct logged *l)
{
    struct rslot *sl = t->sl;
    uint64_t v = l->v, water = l->water;
    apply(tx, t, l->blocks);
#ifndef NDEBUG
    assert_replay(l->ent, l->len);
#endif
    if (l->blocks) /* else the front end's lists are empty already */
        hold_frees(tx, sl, v);
    release_held(tx->p, sl, tx_cache(tx), water);
    unlock_slot(sl);
    switch_log(tx, t);
}

int eng_commit(struct txn *tx)
{
    struct rtx *t = tx->eng;
    if (tx->hot.wl == t->wl->a && !tx_block_count(tx))
        return 0; /* read-only */
    struct logged l;
    int rc = log_durable(tx, t, NULL, &l);
    if (!rc)
        applied(tx, t, &l);
    return rc;
}

void eng_abort(struct txn *tx)
{
    struct rtx *t = tx->eng;
    if (t->prepared) { /* Q10: its prepare part no longer valid, then settled */
        const struct cut *c = vec_at(&t->cuts, t->cuts.n - 1);
        pm_store64(c->at, 0);
        pm_persist(c->at, 8);
        atomic_store(&t->sl->low, 0); /* nothing of it in place */
        unlock_slot(t->sl);
        t->prepared = 0;
    }
    filter_clear(tx, t);
    wlog_rewind(tx, t->wl);
}

/* ---- one transaction over several pools (txn_join): Q10 */

const int eng_joins = 1;

int eng_prepare(struct txn *tx, struct join_ref *ref)
{
    struct rtx *t = tx->eng;
    ref->seq = 0;
    if (tx->hot.wl == t->wl->a && !tx_block_count(tx))
        return 0; /* wrote nothing: not prepared */
    ref->ctx = (uint32_t)tx->slot_idx;
    int rc = log_durable(tx, t, ref, &t->plog);
    if (rc)
        return rc; /* rolled back: the front end's abort finds nothing */
    ref->seq = t->plog.v; /* Q7: never reused in the pool */
    t->prepared = 1;
    return 0;
}

void eng_finish(struct txn *tx)
{
    struct rtx *t = tx->eng;
    if (!t->prepared) {
        eng_abort(tx); /* it wrote nothing */
        return;
    }
    assert(atomic_load(&t->sl->busy) && atomic_load(&t->sl->low) == t->plog.v &&
           "Q10: a prepared log's slot stays locked, its low at the log's version");
    static const char none[8];
    write_part(t->done, R1_DONE_MAGIC, t->plog.v, t->plog.water, 0, 1, none, 0);
    pm_barrier(); /* Q10: the done part durable */
    t->prepared = 0;
    applied(tx, t, &t->plog);
}

/* Q4, Q9 on demand, when the pool is full and room may be held back:
 * every slot whose lock can be had (the caller holds its own) has its
 * lines flushed, barrier; the floor is raised to a watermark that passes
 * them (below `inflight`, a version this slot has taken and not
 * committed, or else below every version taken), flushed, barrier. Then
 * the slot's ring may write over what the watermark settles, and the
 * blocks those slots hold back below it go to the allocator. Returns the
 * watermark. */
static uint64_t settle(struct txn *tx, struct rtx *t, uint64_t inflight)
{
    struct rpool *st = t->st;
    struct rslot *own = t->sl;
    unsigned hi = atomic_load(&st->hi);
    t->helped.n = 0;
    for (unsigned i = 0; i < hi; i++) {
        struct rslot *s = &st->slots[i];
        if (s != own && atomic_exchange_explicit(&s->busy, 1, memory_order_acquire))
            continue;
        struct rslot **h = vec_push(&t->helped);
        if (h) {
            *h = s;
            flush_pending(tx->p, s);
        } else if (s != own) {
            unlock_slot(s);
        }
    }
    pm_barrier();
    uint64_t water = inflight ? inflight - 1 : atomic_load(&st->clock);
    for (size_t i = 0; i < t->helped.n; i++) { /* Q6: all but `inflight` durable */
        struct rslot *s = *(struct rslot **)vec_at(&t->helped, i);
        atomic_store(&s->low, s == own ? inflight : 0);
    }
    for (unsigned i = 0; i < hi; i++) {
        uint64_t low = atomic_load(&st->slots[i].low);
        if (low && low - 1 < water)
            water = low - 1;
    }
    uint64_t *f = floor_word(tx->p), cur = at_load(f);
    while (cur < water && !pm_cas64(f, cur, water))
        cur = at_load(f);
    pm_persist(f, 8);
    if (water > own->water)
        own->water = water;
    for (size_t i = 0; i < t->helped.n; i++) {
        struct rslot *s = *(struct rslot **)vec_at(&t->helped, i);
        release_held(tx->p, s, tx_cache(tx), water);
        if (s != own)
            unlock_slot(s);
    }
    t->helped.n = 0;
    return water;
}

/* ---- recovery */

/* A valid part found in a slot's segments. */
struct found {
    const struct r1_part *h;
    size_t slot;
};

int eng_rec_valid(txn_pool *p, const struct log_rec *r)
{
    (void)p;
    (void)r;
    return TXN_E_CORRUPT; /* no log.c records are ever written */
}

int eng_recover(txn_pool *p, struct slot_hdr *slot, struct log_rec **recs, size_t n)
{
    (void)p;
    (void)slot;
    (void)recs;
    (void)n;
    return TXN_E_CORRUPT;
}

static int part_valid(const struct r1_part *h, size_t room)
{
    return (h->magic == R1_PART_MAGIC || h->magic == R1_PREP_MAGIC || h->magic == R1_DONE_MAGIC) &&
           h->nparts && h->idx < h->nparts && h->len % 8 == 0 &&
           h->len <= room - sizeof *h && h->csum == r1_part_csum(h, h + 1);
}

/* Every valid part in the segments of slot s. */
static int scan_slot(txn_pool *p, size_t s, struct vec *found)
{
    struct rslot sl;
    vec_init(&sl.segs, sizeof(struct seg));
    int rc = slot_segments(p, &sl, s);
    for (size_t i = 0; !rc && i < sl.segs.n; i++) {
        struct seg *g = vec_at(&sl.segs, i);
        char *d = g->at;
        for (size_t off = 0; off + sizeof(struct r1_part) <= g->cap; off += 64) {
            const struct r1_part *h = (const struct r1_part *)(d + off);
            if (!part_valid(h, g->cap - off))
                continue;
            struct found *f = vec_push(found);
            if (!f) {
                rc = TXN_E_NOMEM;
                break;
            }
            *f = (struct found){h, s};
        }
    }
    vec_free(&sl.segs);
    return rc;
}

static int by_version(const void *x, const void *y)
{
    const struct r1_part *a = ((const struct found *)x)->h, *b = ((const struct found *)y)->h;
    if (a->version != b->version)
        return a->version < b->version ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* The entries of a part, checked before anything is written. */
static int part_entries_valid(txn_pool *p, const struct r1_part *h, size_t slot)
{
    const uint64_t *w = (const uint64_t *)(h + 1), *end = w + h->len / 8;
    for (size_t k = 0; w < end; k++) {
        size_t n = wlog_entry_words(w, (size_t)(end - w));
        struct wl_ent e;
        if (n)
            wlog_next(w, &e);
        int ok = n && (e.type ? alloc_record_valid(p, (uint64_t)(uintptr_t)e.addr, e.len)
                              : tx_pool_contains(p, e.addr, e.len));
        if (!ok)
            return REFUSE(TXN_E_CORRUPT, "log slot %zu: entry %zu of transaction %llu "
                          "(part %u of %u) is not one this engine wrote", slot, k,
                          (unsigned long long)h->version, h->idx + 1, h->nparts);
        w += n;
    }
    return 0;
}

static void replay(txn_pool *p, const struct r1_part *h)
{
    const uint64_t *w = (const uint64_t *)(h + 1), *end = w + h->len / 8;
    struct wl_ent e;
    while (w < end) {
        w = wlog_next(w, &e);
        if (e.type) {
            tx_block_apply(p, (uint64_t)(uintptr_t)e.addr, e.len, e.type == WL_ALLOC, 1);
        } else {
            pm_memcpy(e.addr, e.bytes, e.len);
            pm_flush(e.addr, e.len);
        }
    }
}

/* Q10: whether the coordinator committed the prepared log whose prepare
 * part is f (1, 0), or why it cannot tell (join_decide). Checked first. */
static int prep_decide(txn_pool *p, const struct found *f)
{
    const struct r1_part *h = f->h;
    const uint64_t *w = (const uint64_t *)(h + 1);
    size_t n = wlog_entry_words(w, h->len / 8);
    struct join_ref ref = {0};
    if (n * 8 != h->len || w[0] & (WL_ALLOC | WL_FREE) || !(w[0] & WL_RANGE) ||
        (w[0] & WL_LEN_MASK) < 8 + 4 || !w[1] || w[2] != f->slot ||
        !join_names_get((const char *)&w[3], (w[0] & WL_LEN_MASK) - 8, &ref))
        return REFUSE(TXN_E_CORRUPT, "log slot %zu: the prepare part of transaction %llu is not "
                      "one this engine wrote", f->slot, (unsigned long long)h->version);
    ref.uuid = w[1];
    ref.ctx = (uint32_t)f->slot;
    ref.seq = h->version;
    return join_decide(p, &ref);
}

/* Q4, Q8: the committed logs above the highest watermark, in version
 * order; then the floor (Q7). */
int eng_recover_logs(txn_pool *p)
{
    struct vec found;
    vec_init(&found, sizeof(struct found));
    int rc = 0;
    for (size_t s = 0; !rc && s < tx_pool_slots(p); s++)
        rc = scan_slot(p, s, &found);
    uint64_t water = *floor_word(p), top = water;
    for (size_t i = 0; !rc && i < found.n; i++) {
        const struct r1_part *h = ((struct found *)vec_at(&found, i))->h;
        water = h->water > water ? h->water : water;
        top = h->version > top ? h->version : top;
    }
    if (!rc)
        qsort(found.a, found.n, sizeof(struct found), by_version);
    /* committed: parts 0 .. n-1 of one version, all found, in one slot;
     * a prepared one (Q10): its last part a prepare part, committed when
     * its done part is found too or its coordinator says so */
    size_t logs = 0;
    for (size_t i = 0; !rc && i < found.n;) {
        struct found *f = vec_at(&found, i);
        size_t k = 0, data = 0, nprep = 0, ndone = 0;
        const struct found *prep = NULL;
        for (; i + k < found.n; k++) {
            const struct found *g = vec_at(&found, i + k);
            if (g->h->version != f->h->version)
                break;
            if (g->h->magic == R1_DONE_MAGIC) {
                ndone += g->slot == f->slot;
                continue;
            }
            if (g->h->magic == R1_PREP_MAGIC) {
                prep = g;
                nprep++;
            }
            data++;
        }
        int whole = data && nprep <= 1 && f->h->version > water;
        /* the data parts and the prepare part, in idx order (the done
         * part sorts among them: it is skipped) */
        for (size_t j = 0, idx = 0; whole && j < k; j++) {
            const struct found *g = vec_at(&found, i + j);
            if (g->h->magic == R1_DONE_MAGIC)
                continue;
            whole = g->h->idx == idx++ && g->h->nparts == data && g->slot == f->slot &&
                    (g->h->magic == R1_PART_MAGIC || g->h->idx == data - 1);
        }
        for (size_t j = 0; whole && !rc && j < k; j++) {
            const struct found *g = vec_at(&found, i + j);
            if (g->h->magic == R1_PART_MAGIC)
                rc = part_entries_valid(p, g->h, g->slot);
        }
        if (whole && !rc && prep && !ndone) {
            rc = prep_decide(p, prep);
            whole = rc == 1;
            rc = rc < 0 ? rc : 0;
        }
        /* only the committed ones' data parts stay, in order */
        for (size_t j = 0; whole && j < k; j++) {
            const struct found *g = vec_at(&found, i + j);
            if (g->h->magic == R1_PART_MAGIC)
                *(struct found *)vec_at(&found, logs++) = *g;
        }
        i += k;
    }
    if (!rc && logs) {
        uint8_t *slots = calloc(tx_pool_slots(p), 1);
        for (size_t i = 0; i < logs; i++) {
            const struct found *f = vec_at(&found, i);
            replay(p, f->h);
            if (slots && !slots[f->slot]++)
                tx_recovered_slot(p);
        }
        free(slots);
        pm_barrier(); /* Q8: replayed data durable before the floor */
    }
    if (!rc && top > *floor_word(p)) {
        pm_store64(floor_word(p), top);
        pm_persist(floor_word(p), 8);
    }
    vec_free(&found);
    return rc;
}
