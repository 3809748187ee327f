/* incll.c - fine-grain checkpointing (Cohen et al., ASPLOS'19): execution
 * cut into epochs, one global flush per epoch, and an external object log
 * that lets recovery take the pool back to the end of the last complete
 * epoch. Transactions are failure-atomic at once and durable at their
 * epoch's end (txn_sync waits for it).
 *
 * Objects carry an 8-byte epoch tag in front of their payload: the epoch
 * in which the whole block's pre-epoch bytes were logged (or it was
 * allocated). A small block (at most LARGE_BLOCK bytes) is logged whole;
 * a large one granule by granule (L1), each granule's epoch kept in a
 * volatile mark. The log of a slot holds records tagged with the epoch
 * number as their version; it is truncated by the epoch store alone.
 *
 * Durable pool words (pool_hdr.eng_words): [0] current epoch, [1] failed
 * epochs so far, [2..7] the last six failed epochs (a ring).
 *
 * Crash invariants
 *  I1 Before a byte of a block changes in place during epoch E, the bytes
 *     it had at the start of E are in a valid record of E's log, durable:
 *     for a small block the whole block (tag + payload) in one record; for
 *     a large block the granule that holds the byte, in a record of its
 *     own (or every granule, when it is logged whole: txn_open(RW),
 *     incll_log_object). The first write of a block (large: of a granule)
 *     in E appends the record; writes are held in a volatile buffer until
 *     the barrier that ends the batch; only then is it changed in place.
 *  I2 A block's tag says E only after I1 holds for all of it: the tag is
 *     stored after that barrier, by the thread that issued it. A writer
 *     finding tag == E writes in place and logs nothing. A block allocated
 *     in E gets tag E at once: its bytes at E's start do not matter (I4).
 *  L1 Granule g of a large block is the g-th GRANULE-aligned window of the
 *     address space that the block meets, cut to the block. Each record of
 *     a large block holds exactly one granule, so every record of the same
 *     address covers the same bytes and records of different addresses
 *     cover different bytes (a small block: one record, at its start).
 *  L2 A granule's mark (a volatile bit) is set in E only after a record
 *     of E holding the granule's bytes from E's start is durable: it is
 *     set after the barrier, by the thread that issued it. A writer
 *     finding the mark set (or tag == E) changes the granule in place and
 *     logs nothing. Marks are cleared when E ends, at quiescence (I5), so
 *     none outlives its epoch; a crash forgets them all; a block's marks
 *     are dropped when an epoch that freed it ends.
 *  L3 Every in-place change of a large block's granule in E comes after
 *     (release fence) a mark or tag of E that its writer set or read.
 *     A record's copy is taken with atomic loads and then (acquire fence)
 *     the mark and the tag are read again: a copy that finds neither saw
 *     no change of E and holds the granule's bytes from E's start; one
 *     that finds either is dropped (a durable record exists). So all of a
 *     granule's records of E hold the same bytes, however many threads
 *     or transactions append one (threads writing different granules of
 *     one block, or the same one; a batch aborted before its barrier and
 *     logged again), and recovery may restore them in any order.
 *  R  Recovery restores the records of one address in one thread, each
 *     log's newest first, so that the first one a thread logged, the bytes
 *     from the epoch's start, is the one that stays, should two of one log
 *     ever differ (across logs, L3 makes them equal). InCLL nodes are the
 *     exception to "from the epoch's start" (incll.h N8): they are logged
 *     once per epoch, under the tag.
 *  I3 ALLOC/FREE records are appended by txn_alloc/txn_free; the allocator
 *     bits change at commit, after a barrier covered the records.
 *  I4 A block freed in E returns to the volatile allocator only after E is
 *     durable (and, under a grace, incll_set_grace, once the structure's
 *     readers are past it), so a block allocated in E was free at E's
 *     start. Recovery of E: a block with an ALLOC record of E is free, one with only FREE
 *     records of E is allocated (all FREEs set, then all ALLOCs cleared).
 *  T  Tracking: when a block's tag becomes E (logged, or allocated in E),
 *     its first TRACK_HEAD bytes (or all of it, if smaller) join the
 *     epoch's dirty ranges at once, without a lookup; so an in-place write
 *     within them needs no tracking (most writes: one hash lookup less per
 *     write), and only writes beyond them are merged per block in a map.
 *     When a granule's mark becomes E, the whole granule joins the ranges
 *     of the thread that marked it: in-place writes into marked granules,
 *     by any thread, need no tracking (a merged range per block would
 *     flush the hull of a large block's scattered writes).
 *  I5 Epoch end: no transaction runs (quiescence); every line written in E
 *     (tracked ranges and allocator words, or the whole used heap) is
 *     flushed -> barrier (1); epoch := E+1, flushed -> barrier (2). Until
 *     (2) is durable recovery restores E's records (the pool is at the end
 *     of E-1); after it E's records are stale and ignored.
 *  I6 Epoch numbers are never reused: records of an older epoch never pass
 *     for records of the current one.
 *  I7 Recovery of a crash in E (E's log has records): failed ring += E ->
 *     barrier; epoch := E+1 -> barrier; then every record of a failed
 *     epoch is restored (idempotent: a crash during recovery finds E in the
 *     ring and restores again); pool.c fences and invalidates the logs.
 *  I8 Abort writes nothing that matters durably: in-place writes are undone
 *     from DRAM copies (a crash before the epoch's flush restores I1's
 *     records anyway), buffered writes are dropped, records, tags and
 *     marks stay (they tell of records of pre-epoch bytes).
 *  I9 InCLL (incll.h, incll_prim.c) changes objects in place without a
 *     record of their own: before a thread's first such change in E, an
 *     empty record of E in its log is durable (incll__mark), so a crash in
 *     E still fails E (I7) and the objects' in-line undo words apply.
 *
 * Barriers
 *   transaction (TXN_LOG_BATCH=0, the paper: one (a) per object logged, or
 *   per txn_write that logged granules): one, (a), before the first
 *   in-place change after a batch of records (at commit for writes
 *   buffered behind records, at a txn_open of a buffered object, or for
 *   allocator bits); none when every object (large: every granule) it
 *   writes was logged earlier in the epoch. Abort: 0.
 *   epoch end: (1), (2). Recovery: 2 more than pool.c's.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h> /* its fences: GCC's TSan build refuses the builtin's */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "addrmap.h"
#include "engine.h"
#include "incll.h"
#include "incll_int.h"
#include "persist.h"

const char eng_name[] = PMTX_ENGINE_NAME;
const int eng_persistent = 1;

#define OBJ_HDR 8u   /* the epoch tag */
_Static_assert(OBJ_HDR == INCLL_OBJ_HDR, "incll.h knows where payloads start");
#define W_EPOCH 0    /* tx_pool_eng_words */
#define W_NFAILED 1
#define W_FAILED 2
#define FAILED_RING 6
#define NONE UINT32_MAX
#define DEF_EPOCH_MS 64u
#define TRACK_HEAD 256u /* T */
#define PIN_POLL_US 50  /* P: an epoch end looks at the pins again */
/* L: blocks above LARGE_BLOCK bytes are logged by granule, GRANULE bytes
 * of the address space each (docs/incll.md says why these sizes; a build
 * may set INCLL_GRANULE to measure another) */
#define LARGE_BLOCK 4096u
#ifndef INCLL_GRANULE
#define INCLL_GRANULE 64u
#endif
#define GRANULE ((size_t)INCLL_GRANULE)
_Static_assert(INCLL_GRANULE >= 64 && INCLL_GRANULE <= LARGE_BLOCK &&
                   (INCLL_GRANULE & (INCLL_GRANULE - 1)) == 0,
               "a granule is a power of two from a line to LARGE_BLOCK");

/* A range written in place during the epoch: block offsets [lo, hi). */
struct dirty {
    char *blk;
    size_t lo, hi;
};

/* Per log slot: what the epoch's global flush needs. A slot outlives the
 * contexts that hold it, so a thread taking over a slot mid-epoch appends
 * after its predecessor's records instead of overwriting them. Touched
 * only inside a transaction of the slot's owner or at quiescence. */
struct islot {
    struct log *log;     /* the epoch's log, rewound at each epoch end */
    struct vec dirty;    /* struct dirty */
    struct addrmap dmap; /* block -> index + 1 in dirty */
    struct vec metas;    /* struct tx_block: allocator words to flush */
    struct vec frees;    /* struct tx_block: freed, released after flush */
    struct vec grans;    /* struct gran *: marked in the epoch, cleared at its end */
};

/* A slot's pin: nonzero while a transaction of the slot runs. Each in its
 * own line, so that beginning and ending a transaction write no line that
 * another thread writes (P, below eng_begin). */
struct pin {
    _Alignas(64) unsigned in;
};

/* L: a large block written by granule, and a mark per granule: set when
 * the epoch's log durably holds the granule's bytes from the epoch's
 * start, cleared when the epoch ends. Volatile: made at the block's first
 * such write, dropped when an epoch that freed the block ends. */
struct gran {
    char *blk;
    size_t size;     /* of the block */
    uint64_t used;   /* the last epoch that marked a granule (atomic) */
    uint64_t mark[]; /* a bit per granule (atomic) */
};

/* Words of gr->mark, for a block of `size` bytes at blk (L1's windows). */
static size_t mark_words(const char *blk, size_t size)
{
    return (((uintptr_t)blk + size - 1) / GRANULE - (uintptr_t)blk / GRANULE) / 64 + 1;
}

struct ipool {
    txn_pool *p;
    pthread_mutex_t glk;  /* gmap */
    struct addrmap gmap;  /* large block -> struct gran * (0: none) */
    int gran_lost;        /* a slot could not list a marked gran: clear all (atomic) */
    pthread_mutex_t lk;
    pthread_cond_t cv;    /* advancing cleared, or a pin dropped while set */
    pthread_cond_t tcv;   /* wakes the epoch thread to stop */
    uint64_t epoch;       /* current; equals the durable word (atomic: P) */
    uint64_t first;       /* epoch when this state was made (incll__first_epoch) */
    struct pin *pins;     /* per slot: transactions running */
    int advancing;        /* an epoch end is in progress (atomic: P) */
    int work;             /* the epoch changed or logged something (atomic) */
    int overflow;         /* dirty tracking ran out of memory: flush all */
    size_t held;          /* bytes freed in the epoch, not yet released (atomic) */
    int stop, has_thread;
    pthread_t thread;
    unsigned nctx, users; /* lifetime (g_lock) */
    unsigned epoch_ms;
    int whole, stats;
    struct islot **slots; /* per slot, created by its first transaction */
    struct alloc_cache *rel; /* to hand deferred frees back */
    struct vec limbo;       /* struct limbo: freed, durable, awaiting the grace */
    size_t limbo_head;      /* of the oldest still waiting */
    uint64_t n_epochs, flush_ns, flush_ns_max, flush_lines;
    uint64_t t_start, n_early; /* TXN_INCLL_STATS: since the state exists;
                                  epochs a commit ended (log size, frees) */
    uint64_t t_last;           /* TXN_INCLL_STATS=2: the last epoch's end */
    int early;            /* a commit asks the epoch thread for an end (lk) */
};

/* A write held back until its object's record is fenced. */
struct bwrite {
    uint32_t pend;  /* index in pend */
    uint32_t next;  /* next write of the same object, or NONE */
    size_t off, len, data;
};

/* An object logged by this transaction whose record is not fenced yet,
 * or (gran) a large object with granules logged so. */
struct pend {
    txn_obj *o;
    size_t size;          /* of its block */
    uint32_t first, last; /* its buffered writes (gran: per granule) */
    int opened;           /* txn_open handed out its address */
    int gran;             /* its writes wait per granule, in gpend */
    uint32_t nbw;         /* writes in first..last (not gran) */
};

/* Writes one object may hold back before the batch is drained: a read of
 * the object walks its chain, so a transaction that writes one object
 * many times (a segment of many buckets) would read in O(writes); a drain
 * costs one barrier per PEND_CHAIN_MAX writes at most. */
#define PEND_CHAIN_MAX 16u

/* A granule of a large object logged by this transaction, its record not
 * fenced yet, and the writes held back behind it. */
struct gpend {
    struct gran *gr;
    size_t g;             /* its index in gr */
    uint32_t first, last; /* its buffered writes */
};

/* An in-place write: old bytes in DRAM, for abort. */
struct old {
    char *a;
    size_t len, data;
};

struct itx {
    struct ipool *st;
    struct islot *isl;
    uint64_t epoch;
    int unfenced;        /* records appended since the last barrier */
    int touched;         /* the transaction logged or changed something */
    uint64_t marked;     /* epoch of this context's last epoch marker */
    struct vec pend;     /* struct pend */
    struct addrmap pmap; /* object -> index + 1 in pend */
    struct vec bw;       /* struct bwrite */
    struct vec bbytes;   /* bytes of buffered writes */
    struct vec olds;     /* struct old */
    struct vec obytes;   /* old bytes */
    struct vec gp;       /* struct gpend */
    struct addrmap gpmap; /* granule address -> index + 1 in gp */
    struct addrmap gcache; /* large block -> struct gran *, in epoch gc_epoch */
    uint64_t gc_epoch;
    struct gran *last_gr; /* the last one found, also of gc_epoch */
};

/* A freed block whose epoch has ended, held back from reuse until the
 * structure's readers are past it (incll_set_grace). */
struct limbo {
    void *blk;
    uint64_t token;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* Read-held by an epoch end for as long as it uses the grace, so that
 * incll_set_grace returns only when no epoch thread still calls the one it
 * replaces (its arg may be freed next). */
static pthread_rwlock_t g_grace_lock = PTHREAD_RWLOCK_INITIALIZER;
static incll_grace g_grace; /* g_grace_lock; now == NULL: none */
static _Atomic uint64_t g_epochs_ended; /* in this process (incll_stats) */
static char recovered; /* p->eng while recovery has run and no state exists */

static inline uint64_t *tag_of(txn_obj *o) { return (uint64_t *)o; }
static inline char *payload(txn_obj *o) { return (char *)o + OBJ_HDR; }

size_t eng_obj_size(txn_pool *p, const txn_obj *o)
{
    return tx_block_payload(p, o, OBJ_HDR);
}

int eng_obj_blocks(txn_pool *p, const txn_obj *o, void *blk[2])
{
    (void)p;
    blk[0] = (void *)o;
    return 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the epoch's global flush (I5) */

static void flush_live(void *blk, size_t size, void *arg)
{
    txn_pool *p = arg;
    pm_flush(blk, size);
    tx_block_flush_meta(p, (uint64_t)(uintptr_t)blk, size);
}

static void flush_epoch_data(struct ipool *st)
{
    txn_pool *p = st->p;
#ifndef PMTX_TRACE
    if (pm_cfg.pdom == 2)
        return; /* eADR: the caches are persistent; the crash simulator's
                   build still flushes, its model has no eADR */
#endif
    int whole = st->whole || st->overflow;
    if (whole)
        tx_foreach_live(p, flush_live, p);
    for (size_t s = 0; s < tx_pool_slots(p); s++) {
        struct islot *isl = st->slots[s];
        if (!isl)
            continue;
        for (size_t i = 0; !whole && i < isl->dirty.n; i++) {
            struct dirty *d = vec_at(&isl->dirty, i);
            pm_flush(d->blk + d->lo, d->hi - d->lo);
        }
        /* bits cleared by frees are in no live block's words */
        for (size_t i = 0; i < isl->metas.n; i++) {
            struct tx_block *b = vec_at(&isl->metas, i);
            tx_block_flush_meta(p, (uint64_t)(uintptr_t)b->blk, b->size);
        }
    }
}

/* A block freed in the epoch that ends: back to the allocator, or, under
 * a grace, into the limbo (no room there: it stays out of use until the
 * pool is opened again, where the allocator finds it free). */
static void release_later(struct ipool *st, void *blk, int grace, uint64_t token)
{
    struct limbo *l = grace ? vec_push(&st->limbo) : NULL;
    if (l)
        *l = (struct limbo){blk, token};
    else if (!grace)
        tx_cache_release(st->p, st->rel, blk);
}

/* Blocks of the limbo whose grace has passed (all of them: `all`, when
 * the pool's last context goes, or no grace is set any more), oldest
 * first, back to the allocator. */
static void release_limbo(struct ipool *st, const incll_grace *g, int all)
{
    all |= !g || !g->passed;
    while (st->limbo_head < st->limbo.n) {
        struct limbo *l = vec_at(&st->limbo, st->limbo_head);
        if (!all && !g->passed(g->arg, l->token))
            break; /* tokens grow: the later ones wait too */
        tx_cache_release(st->p, st->rel, l->blk);
        st->limbo_head++;
    }
    if (st->limbo_head == st->limbo.n) {
        st->limbo.n = st->limbo_head = 0;
    } else if (st->limbo_head > st->limbo.n / 2) { /* compact */
        memmove(st->limbo.a, vec_at(&st->limbo, st->limbo_head),
                (st->limbo.n - st->limbo_head) * sizeof(struct limbo));
        st->limbo.n -= st->limbo_head;
        st->limbo_head = 0;
    }
}

/* L: a freed large block's granules are forgotten when its epoch ends,
 * before the block can be allocated again; no context still holds them
 * (gran_of finds them anew in each epoch). */
static void gran_drop(struct ipool *st, void *blk, size_t size)
{
    if (size <= LARGE_BLOCK)
        return;
    pthread_mutex_lock(&st->glk);
    uint64_t *at = addrmap_find(&st->gmap, (uint64_t)(uintptr_t)blk);
    if (at && *at) {
        free((struct gran *)(uintptr_t)*at);
        *at = 0;
    }
    pthread_mutex_unlock(&st->glk);
}

/* L2: the marks of the epoch that ends, at quiescence, before a freed
 * block's granules are dropped (gran_drop). */
static void clear_marks(struct ipool *st)
{
    int all = __atomic_load_n(&st->gran_lost, __ATOMIC_RELAXED);
    for (size_t s = 0; s < tx_pool_slots(st->p); s++) {
        struct islot *isl = st->slots[s];
        for (size_t i = 0; isl && !all && i < isl->grans.n; i++) {
            struct gran *gr = *(struct gran **)vec_at(&isl->grans, i);
            memset(gr->mark, 0, mark_words(gr->blk, gr->size) * sizeof gr->mark[0]);
        }
        if (isl)
            isl->grans.n = 0;
    }
    for (size_t i = 0; all && i < st->gmap.cap; i++) {
        struct gran *gr = (struct gran *)(uintptr_t)st->gmap.slots[i].val;
        if (st->gmap.slots[i].gen == st->gmap.gen && gr)
            memset(gr->mark, 0, mark_words(gr->blk, gr->size) * sizeof gr->mark[0]);
    }
    __atomic_store_n(&st->gran_lost, 0, __ATOMIC_RELAXED);
}

/* Called at quiescence by the one thread that set `advancing`. */
static void end_epoch(struct ipool *st)
{
    txn_pool *p = st->p;
    uint64_t t0 = now_ns(), l0 = pm_ctr.lines_flushed;
    flush_epoch_data(st);
    pm_barrier(); /* (1) */
    pm_store64(&tx_pool_eng_words(p)[W_EPOCH], st->epoch + 1);
    pm_persist(&tx_pool_eng_words(p)[W_EPOCH], 8); /* (2): the log is truncated */
    uint64_t dt = now_ns() - t0;
    st->n_epochs++;
    st->flush_ns += dt;
    st->flush_ns_max = dt > st->flush_ns_max ? dt : st->flush_ns_max;
    st->flush_lines += pm_ctr.lines_flushed - l0;
    if (st->stats > 1) { /* one line per epoch: length, flush, lines */
        fprintf(stderr, "incll-epoch: %.3f ms, flush %.1f us, %llu lines\n",
                (double)(t0 - st->t_last) / 1e6, dt / 1e3,
                (unsigned long long)(pm_ctr.lines_flushed - l0));
        st->t_last = t0;
    }
    clear_marks(st);
    pthread_rwlock_rdlock(&g_grace_lock);
    incll_grace g = g_grace;
    uint64_t token = g.now ? g.now(g.arg) : 0;
    for (size_t s = 0; s < tx_pool_slots(p); s++) {
        struct islot *isl = st->slots[s];
        if (!isl)
            continue;
        for (size_t i = 0; i < isl->frees.n; i++) { /* I4: durable now */
            struct tx_block *b = vec_at(&isl->frees, i);
            gran_drop(st, b->blk, b->size);
            release_later(st, b->blk, g.now != NULL, token);
        }
        isl->dirty.n = isl->metas.n = isl->frees.n = 0;
        addrmap_clear(&isl->dmap);
        tx_slot_log_rewind(isl->log);
    }
    release_limbo(st, &g, 0);
    pthread_rwlock_unlock(&g_grace_lock);
    tx_cache_drain(p, st->rel);
    g_epochs_ended++;
    st->overflow = 0;
}

/* Whether a transaction runs (P); lk held, advancing set. */
static int pinned(struct ipool *st)
{
    for (size_t s = 0; s < tx_pool_slots(st->p); s++)
        if (__atomic_load_n(&st->pins[s].in, __ATOMIC_SEQ_CST))
            return 1;
    return 0;
}

/* Wait (lk held) for a transaction to leave: woken by unpin, or after
 * PIN_POLL_US when unpin read `advancing` before it was set (P). */
static void wait_unpinned(struct ipool *st)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += PIN_POLL_US * 1000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&st->cv, &st->lk, &ts);
}

/* The end of an epoch is done (st->lk held): the next one runs. */
static void epoch_done(struct ipool *st)
{
    __atomic_store_n(&st->held, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&st->work, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&st->epoch, st->epoch + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&st->advancing, 0, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&st->cv);
}

/* Return once epoch `e` has ended (durably). */
static void advance_past(struct ipool *st, uint64_t e)
{
    pthread_mutex_lock(&st->lk);
    while (st->epoch <= e) {
        if (st->advancing) {
            pthread_cond_wait(&st->cv, &st->lk);
            continue;
        }
        /* P: new transactions wait in eng_begin; running ones end */
        __atomic_store_n(&st->advancing, 1, __ATOMIC_SEQ_CST);
        while (pinned(st))
            wait_unpinned(st);
        pthread_mutex_unlock(&st->lk);
        end_epoch(st);
        pthread_mutex_lock(&st->lk);
        epoch_done(st);
    }
    pthread_mutex_unlock(&st->lk);
}

/* What a commit that frees much or logged much does: advance_past(e), but
 * only while no transaction of another slot runs. One may be waiting for
 * a lock the committing thread still holds (an application commits before
 * it unlocks: the kvstore's stripes), and it would never leave; then, or
 * when an end is already under way, the epoch thread is woken to end the
 * epoch and the commit returns. */
static void advance_unless_pinned(struct ipool *st, uint64_t e)
{
    pthread_mutex_lock(&st->lk);
    int later = st->epoch <= e && (st->advancing || pinned(st));
    if (!later && st->epoch <= e) {
        __atomic_store_n(&st->advancing, 1, __ATOMIC_SEQ_CST);
        if ((later = pinned(st))) { /* began before it saw `advancing` (P) */
            __atomic_store_n(&st->advancing, 0, __ATOMIC_RELEASE);
            pthread_cond_broadcast(&st->cv);
        }
    }
    if (later) {
        st->early = 1;
        pthread_cond_signal(&st->tcv);
        pthread_mutex_unlock(&st->lk);
        return;
    }
    int mine = st->epoch <= e; /* `advancing` is ours: nothing is pinned */
    pthread_mutex_unlock(&st->lk);
    if (!mine)
        return;
    end_epoch(st);
    pthread_mutex_lock(&st->lk);
    epoch_done(st);
    pthread_mutex_unlock(&st->lk);
}

/* Advance only when the epoch did something: an idle pool costs nothing. */
static void end_if_work(struct ipool *st)
{
    pthread_mutex_lock(&st->lk);
    uint64_t e = st->epoch;
    int work = __atomic_load_n(&st->work, __ATOMIC_RELAXED) || st->advancing;
    pthread_mutex_unlock(&st->lk);
    if (work)
        advance_past(st, e);
}

static void *epoch_main(void *arg)
{
    struct ipool *st = arg;
    pthread_mutex_lock(&st->lk);
    while (!st->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)st->epoch_ms * 1000000ull;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        int rc = 0;
        while (!st->stop && !st->early && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&st->tcv, &st->lk, &ts);
        if (st->stop)
            break;
        st->early = 0;
        pthread_mutex_unlock(&st->lk);
        end_if_work(st);
        pthread_mutex_lock(&st->lk);
    }
    pthread_mutex_unlock(&st->lk);
    return NULL;
}

/* ---- per-pool state: created by the pool's first context, destroyed
 * (after a final epoch end) when the last one goes; g_lock held. */

static struct ipool *state_new(txn_pool *p)
{
    struct ipool *st = calloc(1, sizeof *st);
    if (!st || !(st->slots = calloc(tx_pool_slots(p), sizeof *st->slots)) ||
        !(st->pins = aligned_alloc(sizeof(struct pin), tx_pool_slots(p) * sizeof(struct pin)))) {
        if (st)
            free(st->slots);
        free(st);
        return NULL;
    }
    memset(st->pins, 0, tx_pool_slots(p) * sizeof(struct pin));
    if (addrmap_init(&st->gmap, 16) || !(st->rel = tx_cache_new())) {
        addrmap_free(&st->gmap);
        free(st->pins);
        free(st->slots);
        free(st);
        return NULL;
    }
    st->p = p;
    pthread_mutex_init(&st->glk, NULL);
    pthread_mutex_init(&st->lk, NULL);
    pthread_cond_init(&st->cv, NULL);
    pthread_cond_init(&st->tcv, NULL);
    st->epoch_ms = setting_get(SET_EPOCH_MS, DEF_EPOCH_MS);
    st->whole = setting_get(SET_INCLL_FLUSH, 0) == 1; /* "whole" */
    st->stats = (int)setting_get(SET_INCLL_STATS, 0);
    st->t_start = st->t_last = now_ns();
    vec_init(&st->limbo, sizeof(struct limbo));
    uint64_t *w = tx_pool_eng_words(p);
    if (w[W_EPOCH] == 0) { /* a new pool: epoch 0 never tags a record */
        pm_store64(&w[W_EPOCH], 1);
        pm_persist(&w[W_EPOCH], 8);
    }
    st->epoch = st->first = w[W_EPOCH];
    /* the epoch thread takes no signal of the process: a SIGTERM that an
     * application waits for (sigwait, signalfd) in its own threads would
     * otherwise kill it there, with the default action */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (st->epoch_ms && !pthread_create(&st->thread, NULL, epoch_main, st))
        st->has_thread = 1;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return st;
}

static void islot_free(struct islot *isl)
{
    vec_free(&isl->dirty);
    vec_free(&isl->metas);
    vec_free(&isl->frees);
    vec_free(&isl->grans);
    addrmap_free(&isl->dmap);
    tx_slot_log_free(isl->log);
    free(isl);
}

static void state_destroy(struct ipool *st)
{
    txn_pool *p = st->p;
    if (st->has_thread) {
        pthread_mutex_lock(&st->lk);
        st->stop = 1;
        pthread_cond_signal(&st->tcv);
        pthread_mutex_unlock(&st->lk);
        pthread_join(st->thread, NULL);
    }
    end_if_work(st);
    release_limbo(st, NULL, 1); /* the structure's readers are gone */
    tx_cache_free(p, st->rel);
    vec_free(&st->limbo);
    if (st->stats && st->n_epochs) {
        double n = (double)st->n_epochs, run = (double)(now_ns() - st->t_start);
        fprintf(stderr, "incll: %llu epochs (%llu ended early by log size or frees), "
                "epoch %.2f ms avg, flush %.1f us avg, %.1f us max, %.0f lines avg, "
                "flush %.2f%% of the time (%s)\n", (unsigned long long)st->n_epochs,
                (unsigned long long)st->n_early, run / 1e6 / n, st->flush_ns / 1e3 / n,
                st->flush_ns_max / 1e3, (double)st->flush_lines / n,
                100.0 * (double)st->flush_ns / run, st->whole ? "whole" : "tracked");
    }
    for (size_t s = 0; s < tx_pool_slots(p); s++)
        if (st->slots[s])
            islot_free(st->slots[s]);
    for (size_t i = 0; i < st->gmap.cap; i++)
        if (st->gmap.slots[i].gen == st->gmap.gen)
            free((struct gran *)(uintptr_t)st->gmap.slots[i].val);
    addrmap_free(&st->gmap);
    free(st->slots);
    free(st->pins);
    pthread_mutex_destroy(&st->glk);
    pthread_mutex_destroy(&st->lk);
    pthread_cond_destroy(&st->cv);
    pthread_cond_destroy(&st->tcv);
    p->eng = NULL;
    free(st);
}

static struct ipool *state_of(txn_pool *p)
{
    return p->eng == &recovered ? NULL : p->eng;
}

/* ---- contexts and transactions */

static void itx_free(struct itx *t)
{
    vec_free(&t->pend);
    vec_free(&t->bw);
    vec_free(&t->bbytes);
    vec_free(&t->olds);
    vec_free(&t->obytes);
    vec_free(&t->gp);
    addrmap_free(&t->pmap);
    addrmap_free(&t->gpmap);
    addrmap_free(&t->gcache);
    free(t);
}

int eng_tx_init(struct txn *tx)
{
    struct itx *t = calloc(1, sizeof *t);
    if (!t || addrmap_init(&t->pmap, 64) || addrmap_init(&t->gpmap, 64) ||
        addrmap_init(&t->gcache, 16)) {
        if (t)
            itx_free(t);
        return TXN_E_NOMEM;
    }
    vec_init(&t->gp, sizeof(struct gpend));
    vec_init(&t->pend, sizeof(struct pend));
    vec_init(&t->bw, sizeof(struct bwrite));
    vec_init(&t->bbytes, 1);
    vec_init(&t->olds, sizeof(struct old));
    vec_init(&t->obytes, 1);
    pthread_mutex_lock(&g_lock);
    struct ipool *st = state_of(tx->p);
    if (!st && (st = state_new(tx->p)))
        tx->p->eng = st;
    if (st)
        st->nctx++;
    pthread_mutex_unlock(&g_lock);
    if (!st) {
        itx_free(t);
        return TXN_E_NOMEM;
    }
    t->st = st;
    tx->eng = t;
    return 0;
}

void eng_tx_fini(struct txn *tx)
{
    struct itx *t = tx->eng;
    struct ipool *st = t->st;
    itx_free(t);
    tx->eng = NULL;
    pthread_mutex_lock(&g_lock);
    if (--st->nctx == 0 && st->users == 0)
        state_destroy(st);
    pthread_mutex_unlock(&g_lock);
}

/* The slot's state, made on its first transaction (in flight, so never
 * while an epoch end reads the slots). */
static __attribute__((noinline)) struct islot *islot_get(struct txn *tx, struct ipool *st)
{
    struct islot *isl = st->slots[tx->slot_idx];
    if (isl)
        return isl;
    isl = calloc(1, sizeof *isl);
    if (!isl || addrmap_init(&isl->dmap, 64)) {
        free(isl);
        return NULL;
    }
    vec_init(&isl->dirty, sizeof(struct dirty));
    vec_init(&isl->metas, sizeof(struct tx_block));
    vec_init(&isl->frees, sizeof(struct tx_block));
    vec_init(&isl->grans, sizeof(struct gran *));
    if (!(isl->log = tx_slot_log_new(tx->p, tx->slot_idx))) {
        islot_free(isl);
        return NULL;
    }
    st->slots[tx->slot_idx] = isl;
    return isl;
}

/* Wakes the threads waiting for an epoch end or for pins to drop. */
static __attribute__((noinline)) void wake(struct ipool *st)
{
    pthread_mutex_lock(&st->lk);
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->lk);
}

/* P: a transaction pins its slot (a store and a load, no lock): it sets
 * its pin, then reads `advancing`; an epoch end sets `advancing`, then
 * reads every pin (all four sequentially consistent). One of the two sees
 * the other: either the epoch end waits for the transaction, or the
 * transaction drops its pin and waits for the epoch end. So no
 * transaction spans an epoch boundary, and t->epoch, read while pinned
 * with `advancing` clear, is the epoch it runs in. Leaving drops the pin
 * (a release store: no fence, which would wait for the transaction's
 * stores on the commit path), then reads `advancing`: when set, it wakes
 * the epoch end. That read may pass the store, and then the epoch end,
 * which saw the pin still set, is not woken: it looks again after
 * PIN_POLL_US (wait_unpinned). One context at a time holds a slot, so a
 * pin is 0 or 1. */
static void unpin(struct ipool *st, struct pin *pn)
{
    __atomic_store_n(&pn->in, 0, __ATOMIC_RELEASE);
    if (__atomic_load_n(&st->advancing, __ATOMIC_RELAXED))
        wake(st);
}

/* The transaction leaves its epoch. */
static void leave(struct ipool *st, struct pin *pn, int touched, size_t freed)
{
    if (touched && !__atomic_load_n(&st->work, __ATOMIC_RELAXED))
        __atomic_store_n(&st->work, 1, __ATOMIC_RELAXED);
    if (freed)
        __atomic_fetch_add(&st->held, freed, __ATOMIC_RELAXED);
    unpin(st, pn);
}

/* eng_begin's pin found an epoch end in progress: wait for it, pin again
 * (apart from eng_begin, whose common path then saves no registers). */
static __attribute__((noinline)) void pin_after_end(struct ipool *st, struct pin *pn)
{
    do {
        unpin(st, pn); /* never span an epoch boundary */
        pthread_mutex_lock(&st->lk);
        while (st->advancing)
            pthread_cond_wait(&st->cv, &st->lk);
        pthread_mutex_unlock(&st->lk);
        __atomic_store_n(&pn->in, 1, __ATOMIC_SEQ_CST);
    } while (__atomic_load_n(&st->advancing, __ATOMIC_SEQ_CST));
}

int eng_begin(struct txn *tx)
{
    struct itx *t = tx->eng;
    struct ipool *st = t->st;
    struct pin *pn = &st->pins[tx->slot_idx];
    __atomic_store_n(&pn->in, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&st->advancing, __ATOMIC_SEQ_CST))
        pin_after_end(st, pn);
    t->epoch = __atomic_load_n(&st->epoch, __ATOMIC_ACQUIRE);
    if (!(t->isl = st->slots[tx->slot_idx]) && !(t->isl = islot_get(tx, st))) {
        leave(st, pn, 0, 0);
        return TXN_E_NOMEM;
    }
    return 0;
}

int eng_sync(txn_pool *p)
{
    pthread_mutex_lock(&g_lock);
    struct ipool *st = state_of(p);
    if (st)
        st->users++;
    pthread_mutex_unlock(&g_lock);
    if (!st)
        return 0; /* no context: every epoch ended when the last one went */
    end_if_work(st);
    pthread_mutex_lock(&g_lock);
    if (--st->users == 0 && st->nctx == 0)
        state_destroy(st);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* ---- logging and writing */

/* Remember that [lo, hi) of blk changes in place this epoch. */
static void track(struct itx *t, char *blk, size_t lo, size_t hi)
{
    struct islot *isl = t->isl;
    if (t->st->whole)
        return;
    uint64_t *at = addrmap_slot(&isl->dmap, (uint64_t)(uintptr_t)blk);
    if (at && *at) {
        struct dirty *d = vec_at(&isl->dirty, *at - 1);
        d->lo = lo < d->lo ? lo : d->lo;
        d->hi = hi > d->hi ? hi : d->hi;
        return;
    }
    struct dirty *d = at ? vec_push(&isl->dirty) : NULL;
    if (!d) {
        t->st->overflow = 1; /* out of memory: this epoch flushes it all */
        return;
    }
    *d = (struct dirty){blk, lo, hi};
    *at = isl->dirty.n;
}

/* [lo, hi) of blk as a range of its own, without the lookup that merges
 * ranges (a range tracked twice is flushed twice, nothing worse): for
 * ranges tracked once per block, or granule, and epoch. */
static void track_new(struct itx *t, char *blk, size_t lo, size_t hi)
{
    if (t->st->whole)
        return;
    struct dirty *d = vec_push(&t->isl->dirty);
    if (!d) {
        t->st->overflow = 1; /* out of memory: this epoch flushes it all */
        return;
    }
    *d = (struct dirty){blk, lo, hi};
}

/* T: the head of a block whose tag just became the epoch's. */
static void track_head(struct itx *t, char *blk, size_t size)
{
    track_new(t, blk, 0, size < TRACK_HEAD ? size : TRACK_HEAD);
}

/* I1: a small object's whole block into the epoch's log (not fenced), one
 * record, copied word by word with atomic loads: other threads read the
 * words of a node its owner logs and may try to lock it (a
 * compare-and-swap on its version word) meanwhile. Block sizes are
 * multiples of 16. */
_Static_assert(LARGE_BLOCK <= LOG_MAX_PAYLOAD && LARGE_BLOCK % 8 == 0, "one record");

static int log_small(struct itx *t, txn_obj *o, size_t size)
{
    uint64_t buf[LARGE_BLOCK / 8];
    const uint64_t *w = (const uint64_t *)o;
    for (size_t i = 0; i < size / 8; i++)
        buf[i] = __atomic_load_n(&w[i], __ATOMIC_RELAXED);
    int rc = tx_slot_log_append(t->isl->log, t->epoch, LOG_DATA, (uint64_t)(uintptr_t)o, 0, buf,
                                (uint32_t)size);
    if (!rc)
        t->unfenced = t->touched = 1;
    return rc;
}

/* L1: granule g of a large block is the g-th GRANULE-aligned window of
 * the address space that the block meets, cut to the block: the same
 * bytes, at the same record address, each time it is logged. */
static size_t gran_index(const char *blk, size_t at)
{
    return ((uintptr_t)blk + at) / GRANULE - (uintptr_t)blk / GRANULE;
}

/* Block offsets [*lo, *hi) of granule g of gr. */
static void gran_bounds(const struct gran *gr, size_t g, size_t *lo, size_t *hi)
{
    uintptr_t b = (uintptr_t)gr->blk, w = ((uintptr_t)gr->blk / GRANULE + g) * GRANULE;
    *lo = w > b ? w - b : 0;
    *hi = w + GRANULE - b < gr->size ? w + GRANULE - b : gr->size;
}

/* The pool's granules of large block o, made at its first write. */
static struct gran *gran_get(struct ipool *st, txn_obj *o, size_t size)
{
    pthread_mutex_lock(&st->glk);
    uint64_t *at = addrmap_slot(&st->gmap, (uint64_t)(uintptr_t)o);
    struct gran *gr = at ? (struct gran *)(uintptr_t)*at : NULL;
    if (at && !gr) {
        size_t n = mark_words((char *)o, size);
        if ((gr = calloc(1, sizeof *gr + n * sizeof gr->mark[0]))) {
            gr->blk = (char *)o;
            gr->size = size;
            *at = (uint64_t)(uintptr_t)gr;
        }
    }
    pthread_mutex_unlock(&st->glk);
    return gr;
}

/* gran_get through the context's cache, which it empties when the epoch
 * changes: a freed block's granules are dropped at an epoch's end
 * (gran_drop), and the block may then hold another object. */
static struct gran *gran_of(struct itx *t, txn_obj *o, size_t size)
{
    if (t->gc_epoch != t->epoch) {
        addrmap_clear(&t->gcache);
        t->last_gr = NULL;
        t->gc_epoch = t->epoch;
    }
    if (t->last_gr && t->last_gr->blk == (char *)o)
        return t->last_gr;
    uint64_t *at = addrmap_slot(&t->gcache, (uint64_t)(uintptr_t)o);
    if (at && !*at)
        *at = (uint64_t)(uintptr_t)gran_get(t->st, o, size);
    return t->last_gr = at ? (struct gran *)(uintptr_t)*at : NULL;
}

/* The block size of o, known without the allocator when o is the large
 * block this context wrote last in this epoch (a cache of an older epoch
 * may name a block freed since: not read). */
static size_t block_size(struct txn *tx, struct itx *t, txn_obj *o)
{
    if (t->gc_epoch == t->epoch && t->last_gr && t->last_gr->blk == (char *)o)
        return t->last_gr->size;
    return alloc_block_size(tx->p, o, 0);
}

/* L2: granule g's bytes from the epoch's start are durable in a log of
 * the epoch: its mark says so, or the block's tag (logged whole, I2). */
static int gran_logged(const struct itx *t, struct gran *gr, size_t g)
{
    return (__atomic_load_n(&gr->mark[g / 64], __ATOMIC_ACQUIRE) >> g % 64 & 1) ||
           __atomic_load_n(tag_of((txn_obj *)gr->blk), __ATOMIC_ACQUIRE) == t->epoch;
}

/* L2: granule g into the epoch's log (not fenced), copied with atomic
 * loads, then its mark and the tag read again. Every in-place change in
 * the epoch comes after a mark or the tag (L3), so a copy that finds
 * neither after it holds the granule's bytes from the epoch's start; one
 * found logged meanwhile (by another thread: its record is durable) is
 * not appended, and *added says so. */
static int log_granule(struct itx *t, struct gran *gr, size_t g, int *added)
{
    size_t lo, hi;
    uint64_t buf[GRANULE / 8];
    gran_bounds(gr, g, &lo, &hi);
    const uint64_t *w = (const uint64_t *)(gr->blk + lo);
    for (size_t i = 0; i < (hi - lo) / 8; i++)
        buf[i] = __atomic_load_n(&w[i], __ATOMIC_RELAXED);
    atomic_thread_fence(memory_order_acquire); /* the copy before the marks */
    *added = !gran_logged(t, gr, g);
    if (!*added)
        return 0;
    int rc = tx_slot_log_append(t->isl->log, t->epoch, LOG_DATA,
                                (uint64_t)(uintptr_t)(gr->blk + lo), 0, buf, (uint32_t)(hi - lo));
    if (!rc)
        t->unfenced = t->touched = 1;
    return rc;
}

/* I1: o's whole block into the epoch's log (not fenced); a large one
 * granule by granule, but for the granules logged already (L1). */
static int log_whole(struct itx *t, txn_obj *o, size_t *sizep)
{
    size_t size = *sizep = alloc_block_size(t->st->p, o, 0);
    if (size <= LARGE_BLOCK)
        return log_small(t, o, size);
    struct gran *gr = gran_of(t, o, size);
    int added, rc = gr ? 0 : TXN_E_NOMEM;
    for (size_t g = 0, n = gr ? gran_index(gr->blk, size - 1) + 1 : 0; !rc && g < n; g++)
        if (!gran_logged(t, gr, g))
            rc = log_granule(t, gr, g, &added);
    t->touched = 1;
    return rc;
}

static int new_pend(struct itx *t, txn_obj *o, size_t size, int opened, int gran,
                    struct pend **out)
{
    uint64_t *at = addrmap_slot(&t->pmap, (uint64_t)(uintptr_t)o);
    struct pend *pe = at ? vec_push(&t->pend) : NULL;
    if (!pe)
        return TXN_E_NOMEM;
    *pe = (struct pend){o, size, NONE, NONE, opened, gran, 0};
    *at = t->pend.n;
    *out = pe;
    return 0;
}

static struct pend *find_pend(struct itx *t, txn_obj *o)
{
    if (!t->pend.n)
        return NULL;
    uint64_t *at = addrmap_find(&t->pmap, (uint64_t)(uintptr_t)o);
    return at && *at ? vec_at(&t->pend, *at - 1) : NULL;
}

/* The granule's start address names it in gpmap: granules of different
 * blocks never share one (L1 cuts them to their block). */
static uint64_t gran_key(const struct gran *gr, size_t g)
{
    size_t lo, hi;
    gran_bounds(gr, g, &lo, &hi);
    return (uint64_t)(uintptr_t)(gr->blk + lo);
}

static struct gpend *find_gpend(struct itx *t, const struct gran *gr, size_t g)
{
    if (!t->gp.n)
        return NULL;
    uint64_t *at = addrmap_find(&t->gpmap, gran_key(gr, g));
    return at && *at ? vec_at(&t->gp, *at - 1) : NULL;
}

static struct gpend *new_gpend(struct itx *t, struct gran *gr, size_t g)
{
    uint64_t *at = addrmap_slot(&t->gpmap, gran_key(gr, g));
    struct gpend *q = at ? vec_push(&t->gp) : NULL;
    if (q) {
        *q = (struct gpend){gr, g, NONE, NONE};
        *at = t->gp.n;
    }
    return q;
}

/* Room for n more old bytes and one more entry: reserved before anything
 * changes, so an in-place write never fails halfway. */
static int reserve_old(struct itx *t, size_t entries, size_t bytes)
{
    return vec_reserve(&t->olds, entries) || vec_reserve(&t->obytes, bytes) ? TXN_E_NOMEM : 0;
}

/* Store in place; the old bytes go to DRAM when `save` (for abort). A
 * store into a logged granule needs no tracking: the granule was tracked
 * when it was marked (T), by whichever context marked it. */
static void write_in_place(struct itx *t, txn_obj *o, size_t off, const void *src,
                           size_t n, int save, int granule)
{
    char *a = payload(o) + off;
    if (save) {
        struct old *u = vec_push(&t->olds); /* reserved */
        *u = (struct old){a, n, t->obytes.n};
        memcpy(t->obytes.a + t->obytes.n, a, n);
        t->obytes.n += n;
    }
    pm_memcpy(a, src, n);
    if (!granule && OBJ_HDR + off + n > TRACK_HEAD) /* T */
        track(t, (char *)o, OBJ_HDR + off, OBJ_HDR + off + n);
    t->touched = 1;
}

/* L2: granule g's record is durable. The first context to mark a block's
 * granule in the epoch lists the block for the marks' clearing at the
 * epoch's end (no room in the list: every block's marks are cleared). */
static void mark_granule(struct itx *t, struct gran *gr, size_t g)
{
    __atomic_fetch_or(&gr->mark[g / 64], 1ull << g % 64, __ATOMIC_RELAXED);
    if (__atomic_load_n(&gr->used, __ATOMIC_RELAXED) == t->epoch ||
        __atomic_exchange_n(&gr->used, t->epoch, __ATOMIC_RELAXED) == t->epoch)
        return;
    struct gran **at = vec_push(&t->isl->grans);
    if (at)
        *at = gr;
    else
        __atomic_store_n(&t->st->gran_lost, 1, __ATOMIC_RELAXED);
}

/* End of a batch: barrier (a), then tags and marks, then the buffered
 * writes. */
static int drain(struct txn *tx, struct itx *t, int save)
{
    if (save && reserve_old(t, t->bw.n, t->bbytes.n))
        return TXN_E_NOMEM;
    if (t->unfenced) {
        tx_slot_log_flush(t->isl->log); /* once: see log.h */
        pm_barrier(); /* (a) I1, L2 */
        t->unfenced = 0;
    }
    for (size_t i = 0; i < t->pend.n; i++) {
        struct pend *pe = vec_at(&t->pend, i);
        if (pe->gran)
            continue;
        pm_store64_shared(tag_of(pe->o), t->epoch); /* I2 */
        track_head(t, (char *)pe->o, pe->size);
    }
    for (size_t i = 0; i < t->gp.n; i++) {
        struct gpend *q = vec_at(&t->gp, i);
        size_t lo, hi;
        gran_bounds(q->gr, q->g, &lo, &hi);
        mark_granule(t, q->gr, q->g); /* L2 */
        track_new(t, q->gr->blk, lo, hi); /* T */
    }
    atomic_thread_fence(memory_order_release); /* L3: the marks before the stores */
    for (size_t i = 0; i < t->bw.n; i++) {
        struct bwrite *w = vec_at(&t->bw, i);
        struct pend *pe = vec_at(&t->pend, w->pend);
        write_in_place(t, pe->o, w->off, t->bbytes.a + w->data, w->len, save, pe->gran);
    }
    (void)tx;
    t->pend.n = t->bw.n = t->bbytes.n = t->gp.n = 0;
    addrmap_clear(&t->pmap);
    addrmap_clear(&t->gpmap);
    return 0;
}

/* Hold back a write of pend entry pi behind its record, at the end of the
 * chain *first..*last (of the object, or of one of its granules). */
static int buffer_write(struct itx *t, uint32_t pi, uint32_t *first, uint32_t *last,
                        size_t off, const void *src, size_t n)
{
    if (vec_reserve(&t->bbytes, n))
        return TXN_E_NOMEM;
    struct bwrite *w = vec_push(&t->bw);
    if (!w)
        return TXN_E_NOMEM;
    uint32_t idx = (uint32_t)(t->bw.n - 1);
    *w = (struct bwrite){pi, NONE, off, n, t->bbytes.n};
    memcpy(t->bbytes.a + t->bbytes.n, src, n);
    t->bbytes.n += n;
    if (*last != NONE)
        ((struct bwrite *)vec_at(&t->bw, *last))->next = idx;
    else
        *first = idx;
    *last = idx;
    return 0;
}

static uint32_t pend_index(const struct itx *t, const struct pend *pe)
{
    return (uint32_t)(pe - (const struct pend *)t->pend.a);
}

/* A write to a large object whose tag is not the epoch's (L), piece by
 * piece, one piece per granule: in place when its granule is logged in
 * the epoch and no write of this transaction waits behind its record;
 * else behind the granule's record, appended now if there is none. */
static int write_granules(struct txn *tx, struct itx *t, txn_obj *o, struct pend *pe,
                          size_t size, size_t off, const void *src, size_t n)
{
    struct gran *gr = gran_of(t, o, size);
    size_t lo = OBJ_HDR + off, hi = lo + n;
    size_t g0 = gran_index((char *)o, lo), g1 = gran_index((char *)o, hi - 1);
    int rc = gr ? reserve_old(t, g1 - g0 + 1, n) : TXN_E_NOMEM, logged = 0;
    uint32_t pi = pe ? pend_index(t, pe) : NONE;
    for (size_t g = g0; !rc && g <= g1; g++) {
        size_t a, b;
        int added = 0;
        gran_bounds(gr, g, &a, &b);
        a = a > lo ? a : lo;
        b = b < hi ? b : hi;
        const char *s = (const char *)src + (a - lo);
        struct gpend *q = find_gpend(t, gr, g);
        if (!q && !gran_logged(t, gr, g) && !(rc = log_granule(t, gr, g, &added)) && added &&
            !(q = new_gpend(t, gr, g)))
            rc = TXN_E_NOMEM;
        logged |= added;
        if (!rc && q && pi == NONE && !(rc = new_pend(t, o, size, 0, 1, &pe)))
            pi = pend_index(t, pe);
        if (rc)
            break;
        if (q)
            rc = buffer_write(t, pi, &q->first, &q->last, a - OBJ_HDR, s, b - a);
        else
            write_in_place(t, o, a - OBJ_HDR, s, b - a, 1, 1);
    }
    if (!rc && logged && !txn_cfg.log_batch)
        rc = drain(tx, t, 1); /* the paper's order: a fence per write that logged */
    return rc;
}

/* txn_open(TXN_RW) of an object not logged whole in the epoch (I1). */
static int open_rw(struct txn *tx, struct itx *t, txn_obj *o)
{
    struct pend *pe;
    size_t size;
    int rc = log_whole(t, o, &size);
    if (!rc)
        rc = new_pend(t, o, size, 1, 0, &pe);
    if (!rc && !txn_cfg.log_batch)
        rc = drain(tx, t, 1); /* the paper: a fence per logged object */
    return rc;
}

void *eng_open(struct txn *tx, txn_obj *o, int mode)
{
    struct itx *t = tx->eng;
    struct pend *pe = find_pend(t, o);
    int rc = 0, gran = pe && pe->gran;
    if (pe && (gran || pe->first != NONE))
        rc = drain(tx, t, 1); /* its address must show its writes */
    else if (pe)
        pe->opened = 1;
    if (!rc && (!pe || gran) && mode == TXN_RW &&
        __atomic_load_n(tag_of(o), __ATOMIC_RELAXED) != t->epoch)
        rc = open_rw(tx, t, o);
    if (rc) {
        tx->err = tx->err ? tx->err : rc;
        return NULL;
    }
    return payload(o);
}

/* The buffered writes of the chain from i over dst, which holds payload
 * bytes [off, off + n). */
static void overlay(const struct itx *t, uint32_t i, size_t off, void *dst, size_t n)
{
    while (i != NONE) {
        const struct bwrite *w = vec_at(&t->bw, i);
        size_t lo = w->off > off ? w->off : off;
        size_t hi = w->off + w->len < off + n ? w->off + w->len : off + n;
        if (lo < hi)
            memcpy((char *)dst + (lo - off), t->bbytes.a + w->data + (lo - w->off), hi - lo);
        i = w->next;
    }
}

/* The held writes of a large object's granules over dst (out of line:
 * the common read finds no pend). */
static __attribute__((noinline)) void overlay_granules(struct itx *t, const struct pend *pe,
                                                       size_t off, void *dst, size_t n)
{
    struct gran *gr = gran_of(t, pe->o, pe->size);
    size_t g1 = gran_index((char *)pe->o, OBJ_HDR + off + n - 1);
    for (size_t g = gran_index((char *)pe->o, OBJ_HDR + off); gr && n && g <= g1; g++) {
        const struct gpend *q = find_gpend(t, gr, g);
        if (q)
            overlay(t, q->first, off, dst, n);
    }
}

int eng_read(struct txn *tx, txn_obj *o, size_t off, void *dst, size_t n)
{
    struct itx *t = tx->eng;
    memcpy(dst, payload(o) + off, n);
    struct pend *pe = find_pend(t, o);
    if (pe && pe->gran)
        overlay_granules(t, pe, off, dst, n);
    else if (pe)
        overlay(t, pe->first, off, dst, n);
    return 0;
}

int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    struct itx *t = tx->eng;
    struct pend *pe = find_pend(t, o);
    size_t size;
    int rc;
    if (pe && pe->gran)
        return write_granules(tx, t, o, pe, pe->size, off, src, n);
    if (pe && !pe->opened && pe->nbw < PEND_CHAIN_MAX) {
        rc = buffer_write(t, pend_index(t, pe), &pe->first, &pe->last, off, src, n);
        pe->nbw += !rc;
        return rc;
    }
    if (pe && (rc = drain(tx, t, 1))) /* opened, or its chain is long */
        return rc;
    if (!pe && __atomic_load_n(tag_of(o), __ATOMIC_RELAXED) != t->epoch) {
        size = block_size(tx, t, o);
        if (size > LARGE_BLOCK)
            return write_granules(tx, t, o, NULL, size, off, src, n);
        if ((rc = log_small(t, o, size)) || (rc = new_pend(t, o, size, 0, 0, &pe)) ||
            (rc = buffer_write(t, pend_index(t, pe), &pe->first, &pe->last, off, src, n)))
            return rc;
        pe->nbw = 1;
        return txn_cfg.log_batch ? 0 : drain(tx, t, 1); /* the paper's order */
    }
    if ((rc = reserve_old(t, 1, n)))
        return rc;
    write_in_place(t, o, off, src, n, 1, 0);
    return 0;
}

/* I2, I3: a new block is tagged at once; its record is fenced before the
 * bits change at commit. */
int eng_alloc(struct txn *tx, size_t n, txn_obj **out)
{
    struct itx *t = tx->eng;
    struct tx_block b;
    if (n > SIZE_MAX - OBJ_HDR)
        return TXN_E_NOSPACE;
    if (vec_reserve(&t->isl->metas, tx_block_count(tx) + 1))
        return TXN_E_NOMEM;
    int rc = tx_reserve(tx, n + OBJ_HDR, &b);
    if (rc)
        return rc;
    rc = tx_slot_log_append(t->isl->log, t->epoch, LOG_ALLOC, (uint64_t)(uintptr_t)b.blk, b.size,
                            NULL, 0);
    if (rc) {
        tx_unreserve(tx);
        return rc;
    }
    t->unfenced = t->touched = 1;
    pm_store64(b.blk, t->epoch);
    track_head(t, b.blk, b.size); /* T: its zeroes must reach the media too */
    if (b.size > TRACK_HEAD)
        track(t, b.blk, TRACK_HEAD, b.size);
    *out = b.blk;
    return 0;
}

int eng_free(struct txn *tx, txn_obj *o)
{
    struct itx *t = tx->eng;
    struct islot *isl = t->isl;
    struct tx_block b;
    size_t nf;
    tx_frees(tx, &nf);
    if (vec_reserve(&isl->metas, tx_block_count(tx) + 1) || vec_reserve(&isl->frees, nf + 1))
        return TXN_E_NOMEM;
    int rc = tx_mark_free(tx, o, &b);
    if (!rc && (rc = tx_slot_log_append(isl->log, t->epoch, LOG_FREE,
                                        (uint64_t)(uintptr_t)b.blk, b.size, NULL, 0)))
        tx_unmark_free(tx);
    if (!rc)
        t->unfenced = t->touched = 1;
    return rc;
}

static void reset(struct itx *t)
{
    t->unfenced = t->touched = 0;
    t->pend.n = t->bw.n = t->bbytes.n = t->olds.n = t->obytes.n = t->gp.n = 0;
    addrmap_clear(&t->pmap);
    addrmap_clear(&t->gpmap);
}

/* I3, I4: bits now (flushed again at the epoch's end), frees held back. */
static size_t commit_allocs(struct txn *tx, struct itx *t)
{
    struct islot *isl = t->isl;
    size_t freed = 0;
    size_t na, nf;
    const struct tx_block *al = tx_allocs(tx, &na), *fr = tx_frees(tx, &nf);
    tx_apply_allocs(tx, 1);
    for (size_t i = 0; i < na + nf; i++)
        *(struct tx_block *)vec_push(&isl->metas) = i < na ? al[i] : fr[i - na]; /* reserved */
    for (size_t i = 0; i < nf; i++) {
        *(struct tx_block *)vec_push(&isl->frees) = fr[i]; /* reserved */
        freed += fr[i].size;
    }
    tx_take_blocks(tx); /* frees released at the epoch's end, not by end_tx */
    return freed;
}

/* eng_commit of a transaction that allocated, freed, logged or wrote. */
static __attribute__((noinline)) int commit_changes(struct txn *tx)
{
    struct itx *t = tx->eng;
    struct ipool *st = t->st;
    int allocs = tx_block_count(tx) != 0;
    size_t freed = 0;
    if (t->pend.n || (allocs && t->unfenced))
        drain(tx, t, 0); /* cannot fail without `save` */
    if (allocs)
        freed = commit_allocs(tx, t);
    int touched = t->touched;
    uint64_t sixteenth = tx_pool_heap_bytes(tx->p) / 16; /* of the heap it has */
    int log_big = tx_slot_log_used(t->isl->log) > sixteenth;
    reset(t);
    leave(st, &st->pins[tx->slot_idx], touched, freed);
    /* a pool being created is durable on return (the root allocation);
     * frees or a log beyond 1/16 of the heap end the epoch, so that the
     * space they hold comes back now rather than 64 ms later (a log that
     * grew without bound would fill the pool) */
    int creating = !eng_pool_root(tx->p);
    int now = creating || __atomic_load_n(&st->held, __ATOMIC_RELAXED) > sixteenth ||
              log_big;
    if (now) {
        pthread_mutex_lock(&st->lk);
        st->n_early++;
        pthread_mutex_unlock(&st->lk);
        if (creating)
            advance_past(st, t->epoch);
        else
            advance_unless_pinned(st, t->epoch);
    }
    return 0;
}

int eng_commit(struct txn *tx)
{
    struct itx *t = tx->eng;
    if (tx_block_count(tx) || t->touched)
        return commit_changes(tx);
    leave(t->st, &t->st->pins[tx->slot_idx], 0, 0); /* InCLL changes only, or none */
    return 0;
}

/* I8 */
void eng_abort(struct txn *tx)
{
    struct itx *t = tx->eng;
    for (size_t i = t->olds.n; i-- > 0;) {
        struct old *u = vec_at(&t->olds, i);
        pm_memcpy(u->a, t->obytes.a + u->data, u->len);
    }
    int touched = t->touched;
    reset(t);
    leave(t->st, &t->st->pins[tx->slot_idx], touched, 0);
}

/* ---- recovery (I4, I7) */

static int is_failed(const uint64_t *w, uint64_t v)
{
    uint64_t n = w[W_NFAILED] < FAILED_RING ? w[W_NFAILED] : FAILED_RING;
    for (uint64_t i = 0; i < n; i++)
        if (w[W_FAILED + i] == v)
            return 1;
    return 0;
}

static int relevant(txn_pool *p, uint64_t v)
{
    const uint64_t *w = tx_pool_eng_words(p);
    return v == w[W_EPOCH] || is_failed(w, v);
}

int eng_rec_valid(txn_pool *p, const struct log_rec *r)
{
    struct tx_rec t;
    tx_rec_get(r, &t);
    if (!relevant(p, t.version))
        return 0; /* stale: an ended epoch's record, never applied */
    return tx_rec_valid(p, r);
}

/* I7: mark the crashed epoch failed, then move past it. */
static void fail_epoch(txn_pool *p, uint64_t e)
{
    uint64_t *w = tx_pool_eng_words(p);
    pm_store64(&w[W_FAILED + w[W_NFAILED] % FAILED_RING], e);
    pm_store64(&w[W_NFAILED], w[W_NFAILED] + 1);
    pm_flush(w, 8 * 8);
    pm_barrier();
    pm_store64(&w[W_EPOCH], e + 1);
    pm_persist(&w[W_EPOCH], 8);
}

/* Data records of failed epochs whose addresses are in one range (every
 * record of one address in one part, in the log's order): each target
 * read first (in the pool's fresh mapping, a read fault maps the pages
 * around it too, the kernel's fault-around; a write fault only its own
 * page), then restored, newest first, so that an address's first record
 * is the one that stays (R), and written back (pm_memcpy_flush: at PDOM 0
 * and 1 non-temporal stores, so that a target's lines between its first
 * and its last are not read before they are overwritten). */
struct restore_part {
    struct log_rec **r; /* the part's records */
    size_t n;
    uint64_t count, bytes; /* restored */
};

static void restore_range(void *arg)
{
    struct restore_part *q = arg;
    struct tx_rec t;
    for (size_t i = 0; i < q->n; i++) {
        tx_rec_get(q->r[i], &t);
        if (t.len) {
            const volatile char *a = (const char *)(uintptr_t)t.addr;
            (void)a[0];
            (void)a[t.len - 1];
        }
    }
    for (size_t i = q->n; i-- > 0;) {
        tx_rec_get(q->r[i], &t);
        pm_memcpy_flush((void *)(uintptr_t)t.addr, t.payload, t.len);
        q->count += t.len > 0;
        q->bytes += t.len;
    }
    pm_order(); /* before the part is handed back: recover()'s barrier
                   runs in the opening thread */
}

/* Restore threads for n records, taking parts from a counter: 8 ranges of
 * addresses per thread (a range's pages its own but at its ends). The
 * records of one address restore in one thread, newest first (R); those
 * of different addresses cover different bytes (a small block is logged
 * whole, a large one by granule, the same way each time, L1, and a block
 * freed in the epoch is not reused in it, I4), so they restore in any
 * order, in parallel (Cohen et al.: the log entries have no
 * dependencies). One thread for a small log; one in the crash
 * simulator's build, whose store trace is one thread's. */
#define RESTORE_PER_THREAD 8192
#define RESTORE_THREADS 4
#define RESTORE_PARTS (8 * RESTORE_THREADS)

static int failed_data(txn_pool *p, const struct log_rec *r)
{
    struct tx_rec t;
    tx_rec_get(r, &t);
    return t.type == LOG_DATA && is_failed(tx_pool_eng_words(p), t.version);
}

/* A failed epoch's record, as the one pass over the log's headers found it. */
struct failed_rec {
    uint64_t addr;
    struct log_rec *r;
};

/* The failed epochs' records of a log of n: the data records from the
 * front of f (nd of them, addresses in [lo, hi]), the allocation records
 * from the back (f[na..n)), each group in the log's order. */
struct failed_list {
    struct failed_rec *f;
    size_t n, nd, na;
    uint64_t lo, hi;
};

/* The one pass over the log's headers (records scattered over megabytes). */
static void list_failed(txn_pool *p, struct log_rec **r, struct failed_list *l)
{
    l->nd = 0;
    l->na = l->n;
    l->lo = UINT64_MAX;
    l->hi = 0;
    const uint64_t *w = tx_pool_eng_words(p);
    for (size_t i = 0; i < l->n; i++) {
        struct tx_rec t;
        tx_rec_get(r[i], &t);
        if (!is_failed(w, t.version))
            continue;
        if (t.type == LOG_DATA) {
            l->f[l->nd++] = (struct failed_rec){t.addr, r[i]};
            l->lo = t.addr < l->lo ? t.addr : l->lo;
            l->hi = t.addr > l->hi ? t.addr : l->hi;
        } else if (t.type == LOG_ALLOC || t.type == LOG_FREE) {
            l->f[--l->na] = (struct failed_rec){0, r[i]};
        }
    }
}

/* Part k: the data records in the k-th of np equal address ranges, in
 * the log's order, one part after another in `mine`. */
static void make_parts(const struct failed_list *l, unsigned np, struct log_rec **mine,
                       struct restore_part *q)
{
    uint64_t span = l->nd ? (l->hi - l->lo) / np + 1 : 1;
    size_t at[RESTORE_PARTS + 1] = {0};
    for (size_t i = 0; i < l->nd; i++)
        at[(l->f[i].addr - l->lo) / span + 1]++;
    for (unsigned k = 0; k < np; k++) {
        at[k + 1] += at[k];
        q[k].r = mine + at[k];
    }
    for (size_t i = 0; i < l->nd; i++) {
        struct restore_part *part = &q[(l->f[i].addr - l->lo) / span];
        part->r[part->n++] = l->f[i].r;
    }
}

/* No memory for the lists: the failed data records one by one, in the
 * opening thread, newest first (R). */
static void restore_in_order(txn_pool *p, struct log_rec **r, size_t n, struct restore_part *q)
{
    for (size_t i = n; i-- > 0;)
        if (failed_data(p, r[i])) {
            struct restore_part one = {&r[i], 1, 0, 0};
            restore_range(&one);
            q->count += one.count;
            q->bytes += one.bytes;
        }
}

/* I4: a FREE-only block was allocated at the epoch's start, one with an
 * ALLOC was free: all sets first, then all clears, each in the log's
 * order (from the list when there is one). */
static void undo_allocs(txn_pool *p, struct log_rec **r, const struct failed_list *l)
{
    size_t n = l->f ? l->n - l->na : l->n;
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < n; k++) {
            struct log_rec *a = l->f ? l->f[l->n - 1 - k].r : r[k];
            struct tx_rec t;
            tx_rec_get(a, &t);
            if (t.type == (pass ? LOG_ALLOC : LOG_FREE) &&
                is_failed(tx_pool_eng_words(p), t.version))
                tx_undo_alloc_rec(p, a);
        }
}

/* Returns the number of data records restored, their bytes in *bytes:
 * the failed epochs' records listed in one pass, their data restored by
 * address range in parallel, then their allocations undone. */
static uint64_t restore(txn_pool *p, struct log_rec **r, size_t n, uint64_t *bytes)
{
    struct restore_part q[RESTORE_PARTS] = {{0}};
    struct failed_list l = {malloc((n ? n : 1) * sizeof *l.f), n, 0, 0, 0, 0};
    struct log_rec **mine = malloc((n ? n : 1) * sizeof *mine);
    unsigned np = 1;
    if (l.f && mine) {
        list_failed(p, r, &l);
        unsigned nt = par_threads(n, RESTORE_PER_THREAD, RESTORE_THREADS);
        np = nt > 1 ? 8 * nt : 1;
        make_parts(&l, np, mine, q);
        par_run(restore_range, q, sizeof q[0], np, nt);
    } else {
        free(l.f);
        l.f = NULL;
        restore_in_order(p, r, n, &q[0]);
    }
    uint64_t count = 0;
    *bytes = 0;
    for (unsigned k = 0; k < np; k++) {
        count += q[k].count;
        *bytes += q[k].bytes;
    }
    undo_allocs(p, r, &l);
    free(l.f);
    free(mine);
    return count;
}

/* The first call recovers every slot at once (I4 needs all of an epoch's
 * allocation records together), from the records pool.c validated
 * (open_recs; scanned again without them); later calls of the same open
 * find it done. */
int eng_recover(txn_pool *p, struct slot_hdr *slot, struct log_rec **recs, size_t n)
{
    (void)slot;
    (void)recs;
    (void)n;
    if (p->eng == &recovered)
        return 0;
    struct vec all;
    vec_init(&all, sizeof(struct log_rec *));
    int rc = 0;
    uint64_t t0 = now_ns(), t1 = 0, failed = 0, bytes = 0;
    for (size_t s = 0; !rc && s < tx_pool_slots(p); s++)
        rc = tx_slot_recs(p, s, &all);
    if (!rc) {
        uint64_t e = tx_pool_eng_words(p)[W_EPOCH];
        for (size_t i = 0; i < all.n; i++) {
            struct tx_rec t;
            tx_rec_get(*(struct log_rec **)vec_at(&all, i), &t);
            if (t.version == e) {
                fail_epoch(p, e);
                break;
            }
        }
        t1 = now_ns();
        failed = restore(p, (struct log_rec **)all.a, all.n, &bytes);
        p->eng = &recovered;
    }
    if (!rc && setting_get(SET_INCLL_STATS, 0)) /* what the replay took */
        fprintf(stderr, "incll-recover: %zu records gathered in %.2f ms, %llu restored "
                "(%llu bytes) in %.2f ms\n", all.n, (double)(t1 - t0) / 1e6,
                (unsigned long long)failed, (unsigned long long)bytes,
                (double)(now_ns() - t1) / 1e6);
    vec_free(&all);
    return rc;
}

/* ---- what the InCLL primitives need (incll_int.h, incll_prim.c) */

uint64_t incll__epoch(txn *tx)
{
    return ((struct itx *)tx->eng)->epoch;
}

const int *incll_waiting_word(txn *tx)
{
    return &((struct itx *)tx->eng)->st->advancing;
}

int incll_epoch_waiting(txn *tx)
{
    return incll_waiting(incll_waiting_word(tx));
}

uint64_t incll__first_epoch(txn *tx)
{
    return ((struct itx *)tx->eng)->st->first;
}

/* The ring holds the last FAILED_RING failures: every failure after its
 * oldest entry is in it; before that, only the ones still in it. */
int incll__epoch_failed(txn *tx, uint64_t e)
{
    const uint64_t *w = tx_pool_eng_words(tx->p);
    if (is_failed(w, e))
        return 1;
    if (w[W_NFAILED] <= FAILED_RING)
        return 0;
    uint64_t oldest = UINT64_MAX;
    for (unsigned i = 0; i < FAILED_RING; i++)
        oldest = w[W_FAILED + i] < oldest ? w[W_FAILED + i] : oldest;
    return e > oldest ? 0 : TXN_E_CORRUPT;
}

/* An empty DATA record of the epoch: recovery fails the epoch (I7) and
 * restores nothing from it. */
int incll__mark(txn *tx)
{
    struct itx *t = tx->eng;
    if (t->marked == t->epoch)
        return 0;
    int rc = tx_slot_log_append(t->isl->log, t->epoch, LOG_DATA,
                                (uint64_t)(uintptr_t)tx_pool_heap(tx->p), 0, NULL, 0);
    if (rc)
        return rc;
    tx_slot_log_flush(t->isl->log);
    pm_barrier();
    t->marked = t->epoch;
    t->touched = 1;
    return 0;
}

/* I1, I2 for an object whose InCLL words may already have changed in
 * this epoch: its record then holds them, and lazy recovery applies them
 * after the record is restored (incll.h N8). */
int incll__log(txn *tx, txn_obj *o)
{
    struct itx *t = tx->eng;
    if (*tag_of(o) == t->epoch)
        return 0;
    struct pend *pe = find_pend(t, o);
    int rc = 0, gran = pe && pe->gran;
    if (gran) /* its granules' writes first; then it is logged whole */
        rc = drain(tx, t, 1);
    if (!rc && (!pe || gran))
        rc = open_rw(tx, t, o);
    return rc ? rc : drain(tx, t, 1);
}

/* Called once per node and epoch (its first touch, or its creation): a
 * range of its own, without the lookup that merges ranges (a range
 * tracked twice is flushed twice, nothing worse). */
void incll__dirty(txn *tx, txn_obj *o, size_t n)
{
    struct itx *t = tx->eng;
    t->touched = 1;
    track_new(t, (char *)o, 0, OBJ_HDR + n);
}

/* ---- reuse of freed blocks, epochs (incll.h) */

void incll_set_grace(const incll_grace *g)
{
    pthread_rwlock_wrlock(&g_grace_lock);
    g_grace = g && g->now && g->passed ? *g : (incll_grace){0};
    pthread_rwlock_unlock(&g_grace_lock);
}

uint64_t incll__epochs_ended(void)
{
    return g_epochs_ended;
}
