/* undo.c - the checksummed single-barrier undo log engine.
 *
 * Crash invariants
 *  U1 The old bytes of a range are durable in a valid record (sentinel,
 *     version, checksum) before any new byte of the range may reach the
 *     media: txn_write appends the record, issues ONE barrier, then stores.
 *  U2 The slot's tail hint is stored after that barrier and flushed, not
 *     fenced, so it lags the real end by at most one record; recovery finds
 *     the real end by checksum and rejects a log that ends before the hint.
 *  U3 All written ranges (and new blocks) are durable before the commit
 *     record can be: barrier (1) precedes the commit record.
 *  U4 An ALLOC/FREE record is appended when txn_alloc/txn_free is called
 *     and is durable before the allocator bits change: a later record's
 *     barrier covers it, or commit adds one barrier if none came after it.
 *     The bits are then stored with the written ranges, so they are durable
 *     at barrier (1), before the commit record exists: a crash before the
 *     commit record rolls them back from the records; a committed log is
 *     never replayed (lazy mode), so a stale record left in a log can never
 *     undo another thread's later allocation.
 *  U5 Versions are never reused (tx_next_version), so records left from an
 *     older transaction never join the log of a newer one.
 *  U6 An aborted transaction restores its ranges (and, when prepared, its
 *     allocator bits), fences, then marks its version settled in the state word and fences again: its records can
 *     never be rolled back later over data that other transactions changed
 *     since, even if a torn first record of the next transaction makes
 *     them look valid again (so the state word, not the log, says it).
 *  U7 The commit record is the slot's state word (version and state in one
 *     8-byte store in the slot header), not a record in the log: the next
 *     transaction reuses the log from its start, and a crash can leave the
 *     committed transaction's records half overwritten. Recovery reads
 *     "committed" from the state word, so a damaged committed log is never
 *     mistaken for an uncommitted one and rolled back.
 *
 * Barriers of a commit (N = distinct ranges written to existing objects):
 *   per write:  record -> barrier                         N
 *   commit:     [lazy, if an ALLOC/FREE record came after the last
 *               barrier: barrier (0)]
 *               [lazy: set/clear allocator bits, flushed]
 *               flush ranges + new blocks -> barrier      (1)
 *               commit record (state word) -> barrier     (2)
 *   eager allocator mode (TXN_ALLOC_EAGER=1), only if it allocated/freed:
 *               set/clear bits -> barrier (3); state IDLE -> barrier (4)
 *   => N + 2 (lazy; N + 3 when the last alloc/free follows the last
 *   logged write), N + 4 (eager, with allocations); read-only: 0.
 * Abort: restore ranges -> barrier; state settled -> barrier (only the
 * second when it logged ALLOC/FREE records alone and was not prepared,
 * none when it logged nothing). Writes to blocks allocated by the same transaction log nothing.
 *
 * A participant of a transaction over several pools (txn_join) commits in
 * two phases. eng_prepare: as commit up to barrier (1), the allocator bits
 * applied whatever TXN_ALLOC_EAGER says, and a LOG_PREPARE record naming
 * the coordinator appended before that barrier; eng_finish: the commit
 * record (2). Its barriers are those of a lazy commit.
 *  U8 A prepared transaction's log is whole and durable, ending with its
 *     LOG_PREPARE record, and its data and allocator bits are those of its
 *     commit: recovery that finds it unsettled asks join_decide, keeps
 *     everything when the coordinator committed it, else rolls it back
 *     from the records as any unsettled transaction.
 *
 * Batched logging (default; TXN_LOG_BATCH=0 gives the paper's log at each
 * write): txn_open(TXN_RW) of an existing object appends a record of the
 * whole object and flushes it without a fence; the first write after a
 * batch of such records fences them all at once (U1 still holds: no byte
 * of an opened object changes before its record is durable), and writes
 * to an object logged whole log nothing. A transaction that opens its N
 * objects and then writes them pays 1 + 2 barriers instead of N + 2.
 *  U9 An object opened TXN_RW waits in u->opened_objs for its record,
 *     which the next fence appends, for all of them in one pass (their
 *     lines fetched at once, not one miss per open); tx->hot.gate is set
 *     while one waits, so every write (txn.h's direct ones included)
 *     reaches eng_write, whose fence appends the records before the first
 *     change (U1). An object still waiting at commit or abort was never
 *     changed and needs no record.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "addrmap.h"
#include "engine.h"
#include "persist.h"

const char eng_name[] = PMTX_ENGINE_NAME;
const int eng_inlines = 1;
const int eng_persistent = 1;

/* An object opened TXN_RW, its record not appended yet (U9). */
struct span {
    char *a;
    size_t len;
};

/* A DATA record of the running transaction and the range it saved. */
struct urec {
    struct log_rec *r;
    char *a;
    size_t len;
};

struct undo_tx {
    struct vec recs;       /* struct urec: DATA records: the ranges to
                              flush at commit, to restore at abort */
    struct addrmap logged; /* LOGGED_SPAN-aligned address -> a bit per 8-byte
                              word of that span whose old bytes a record
                              of this transaction holds (LG1) */
    struct addrmap whole;  /* objects logged whole by txn_open(TXN_RW) */
    const void *opened;    /* the last of them: txn_open's way fill asks
                              right after, and skips the map */
    struct vec opened_objs; /* struct span: objects logged whole whose
                               records are not appended yet (U9) */
    int prepared;          /* eng_prepare ran: the allocator bits are
                              applied (an abort reverts them) */
#ifndef NDEBUG
    struct vec before;     /* char: per record, the bytes its range held
                              when it was appended (the debug check of
                              rollback_matches) */
#endif
};

size_t eng_obj_size(txn_pool *p, const txn_obj *o)
{
    return tx_block_payload(p, o, 0);
}

int eng_tx_init(struct txn *tx)
{
    struct undo_tx *u = calloc(1, sizeof *u);
    if (!u || addrmap_init(&u->logged, 64) || addrmap_init(&u->whole, 64)) {
        if (u)
            addrmap_free(&u->logged);
        free(u);
        return TXN_E_NOMEM;
    }
    vec_init(&u->recs, sizeof(struct urec));
    vec_init(&u->opened_objs, sizeof(struct span));
#ifndef NDEBUG
    vec_init(&u->before, 1);
#endif
    tx->eng = u;
    return 0;
}

void eng_tx_fini(struct txn *tx)
{
    struct undo_tx *u = tx->eng;
    vec_free(&u->recs);
    vec_free(&u->opened_objs);
    addrmap_free(&u->logged);
    addrmap_free(&u->whole);
#ifndef NDEBUG
    vec_free(&u->before);
#endif
    free(u);
    tx->eng = NULL;
}

/* tx->hot.gate, set while a record awaits its barrier, holds txn.h's
 * direct writes back (U1): they call eng_write, which fences first. */
static void reset(struct txn *tx, struct undo_tx *u)
{
    tx->hot.gate = 0;
    u->recs.n = 0;
    u->opened_objs.n = 0; /* U9: never changed */
#ifndef NDEBUG
    u->before.n = 0;
#endif
    addrmap_clear(&u->logged);
    addrmap_clear(&u->whole);
    u->opened = NULL;
    u->prepared = 0;
}

/* LG1 A word's bit in u->logged is set only once a record holding every
 *     byte the word had before the transaction is appended and fenced: a
 *     write whose words all have their bit logs nothing (U1 holds by the
 *     earlier record). Only words a logged range covers whole get a bit.
 *     A debug build checks it before each commit (assert_rollback: the
 *     records give back every byte the transaction wrote).
 * One entry per span of 64 words, not per range written: a DEL of many
 * keys writes a range per key at scattered addresses, and a map with an
 * entry each outgrew the caches (a miss per probe); the buckets it writes
 * lie in few segments, so their spans are few and the map stays small
 * (docs/kvstore.md, section 18d). */
#define LOGGED_SPAN 512u

/* The bits of the words of [a, a+n) within the span at g: touched (any
 * byte) or, with whole, covered entirely. */
static uint64_t span_words(uintptr_t g, uintptr_t a, uintptr_t end, int whole)
{
    uintptr_t lo = a > g ? a : g, hi = end < g + LOGGED_SPAN ? end : g + LOGGED_SPAN;
    size_t first = whole ? (lo - g + 7) / 8 : (lo - g) / 8;
    size_t last = whole ? (hi - g) / 8 : (hi - g + 7) / 8; /* one past */
    if (last <= first)
        return 0;
    uint64_t upto = last == 64 ? ~0ull : (1ull << last) - 1;
    return upto & ~((1ull << first) - 1);
}

/* 1 when every word [a, a+n) touches is logged (LG1), else 0. */
static int logged_all(struct undo_tx *u, uintptr_t a, size_t n)
{
    for (uintptr_t g = a & ~(uintptr_t)(LOGGED_SPAN - 1); g < a + n; g += LOGGED_SPAN) {
        uint64_t *bits = addrmap_find(&u->logged, g);
        uint64_t want = span_words(g, a, a + n, 0);
        if (!bits || (*bits & want) != want)
            return 0;
    }
    return 1;
}

/* LG1: the words [a, a+n) covers whole, now logged. */
static int logged_set(struct undo_tx *u, uintptr_t a, size_t n)
{
    for (uintptr_t g = a & ~(uintptr_t)(LOGGED_SPAN - 1); g < a + n; g += LOGGED_SPAN) {
        uint64_t w = span_words(g, a, a + n, 1);
        uint64_t *bits = w ? addrmap_slot(&u->logged, g) : NULL;
        if (w && !bits)
            return TXN_E_NOMEM;
        if (w)
            *bits |= w;
    }
    return 0;
}

/* Records of [a, a+n), one per LOG_MAX_PAYLOAD piece, not fenced. Inlined
 * into the loop of fence_records, which runs it for each object opened
 * TXN_RW: as a call it saved six registers a record (docs/access.md). */
static inline __attribute__((always_inline)) int append_old(struct txn *tx, struct undo_tx *u,
                                                            char *a, size_t n)
{
    for (size_t done = 0; done < n;) {
        uint32_t len = (uint32_t)(n - done < LOG_MAX_PAYLOAD ? n - done : LOG_MAX_PAYLOAD);
        struct log_rec *r;
        int rc = tx_log(tx, LOG_DATA, (uint64_t)(uintptr_t)(a + done), 0, a + done, len, &r);
        struct urec *slot = rc ? NULL : vec_push(&u->recs);
        if (rc || !slot)
            return rc ? rc : TXN_E_NOMEM;
        *slot = (struct urec){r, a + done, len};
#ifndef NDEBUG
        if (!vec_reserve(&u->before, u->before.n + len)) { /* else: not checked */
            memcpy((char *)u->before.a + u->before.n, a + done, len);
            u->before.n += len;
        } else {
            u->before.n = SIZE_MAX;
        }
#endif
        done += len;
    }
    tx->hot.gate = 1;
    return 0;
}

/* U9, U1, U2: the records of the objects waiting appended, every record
 * appended so far durable, then the tail hint. */
static int fence_records(struct txn *tx, struct undo_tx *u)
{
    assert((!u->opened_objs.n || tx->hot.gate) && "U9: an object waits for its record, the gate open");
    const struct span *o = (const struct span *)(void *)u->opened_objs.a;
    size_t n = u->opened_objs.n;
    for (size_t i = 0; i < n; i++)
        __builtin_prefetch(o[i].a);
    for (size_t i = 0; i < n; i++) {
        int rc = append_old(tx, u, o[i].a, o[i].len);
        if (rc)
            return rc; /* the transaction fails: nothing was changed */
    }
    u->opened_objs.n = 0;
    tx_log_flush(tx);
    pm_barrier();
    tx->hot.gate = 0;
    tx_log_set_tail(tx);
    return 0;
}

/* eng_open's TXN_RW part, out of line: the TXN_RO opens (the index pages
 * a program walks) then save no registers. */
static __attribute__((noinline)) void *open_rw(struct txn *tx, txn_obj *o)
{
    struct undo_tx *u = tx->eng;
    if (tx_is_new(tx, o))
        return o;
    uint64_t *whole = addrmap_slot(&u->whole, (uint64_t)(uintptr_t)o);
    int rc = whole ? 0 : TXN_E_NOMEM;
    size_t size = tx->last_obj == o ? tx->last_size : tx_block_payload(tx->p, o, 0);
    struct span *w = whole && !*whole ? vec_push(&u->opened_objs) : NULL;
    if (w) { /* U9 */
        *w = (struct span){(char *)o, size};
        *whole = 1;
        tx->hot.gate = 1;
    } else if (whole && !*whole) {
        rc = TXN_E_NOMEM;
    }
    if (rc) {
        tx->err = tx->err ? tx->err : rc;
        return NULL;
    }
    u->opened = o;
    return o;
}

void *eng_open(struct txn *tx, txn_obj *o, int mode)
{
    if (mode != TXN_RW || !txn_cfg.log_batch)
        return o;
    return open_rw(tx, o);
}

/* Writes store in place where nothing is left to log: a block of this
 * transaction, an object logged whole (behind the gate until a barrier
 * covers its record). */
int eng_inline(struct txn *tx, txn_obj *o, struct txn__way *w)
{
    struct undo_tx *u = tx->eng;
    w->base = (char *)o;
    if (o == u->opened) { /* logged whole, not a block of this transaction */
        w->wmode = TXN__W_DIRECT;
        return TXN__W_SLOW;
    }
    uint64_t *whole = u->whole.n ? addrmap_find(&u->whole, (uint64_t)(uintptr_t)o) : NULL;
    int mine = tx_is_new(tx, o);
    w->wmode = (whole && *whole) || mine ? TXN__W_DIRECT : TXN__W_SLOW;
    return mine ? ENG_WAY_DROP : TXN__W_SLOW;
}

int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    struct undo_tx *u = tx->eng;
    char *a = (char *)o + off;
    uint64_t *whole = u->whole.n ? addrmap_find(&u->whole, (uint64_t)(uintptr_t)o) : NULL;
    int rc;
    if (whole && *whole) {
        if (tx->hot.gate && (rc = fence_records(tx, u))) /* the batch, before its first change */
            return rc;
    } else if (!tx_is_new(tx, o)) {
        if (!logged_all(u, (uintptr_t)a, n)) {
            if ((rc = append_old(tx, u, a, n)) || (rc = fence_records(tx, u)))
                return rc;
            if ((rc = logged_set(u, (uintptr_t)a, n)))
                return rc;
        }
    }
    pm_memcpy(a, src, n);
    return 0;
}

/* U4: the record now, the bits at commit. */
int eng_alloc(struct txn *tx, size_t n, txn_obj **out)
{
    struct tx_block b;
    int rc = tx_reserve(tx, n, &b);
    if (!rc && (rc = tx_log_block(tx, LOG_ALLOC, &b)))
        tx_unreserve(tx);
    if (rc)
        return rc;
    tx->hot.gate = 1;
    *out = b.blk;
    return 0;
}

int eng_free(struct txn *tx, txn_obj *o)
{
    struct tx_block b;
    int rc = tx_mark_free(tx, o, &b);
    if (!rc && (rc = tx_log_block(tx, LOG_FREE, &b)))
        tx_unmark_free(tx);
    if (!rc)
        tx->hot.gate = 1;
    return rc;
}

/* U6. With `bits`, the allocator bits were applied and are reverted. */
static void rollback(struct txn *tx, struct undo_tx *u, int bits)
{
    for (size_t i = u->recs.n; i-- > 0;) {
        const struct urec *e = vec_at(&u->recs, i);
        struct tx_rec r;
        tx_rec_get(e->r, &r);
        pm_memcpy(e->a, r.payload, e->len);
        pm_flush(e->a, e->len);
    }
    if (bits)
        tx_unapply_allocs(tx);
    if (u->recs.n || bits)
        pm_barrier(); /* restored data and bits durable before the log goes */
    if (tx_log_used(tx)) /* U6: settled, whatever its records look like */
        tx_set_state(tx, SLOT_IDLE);
    reset(tx, u);
}

#ifndef NDEBUG
/* U1 in a debug build, before the commit record: rolling a copy of the
 * written ranges back from the records, as recovery would read them
 * (newest first), gives the bytes the ranges held before the transaction.
 * Each byte ends with the oldest record's copy of it, so that copy must be
 * what the range held at its append, and every record must still be
 * whole: nothing wrote over the log since. */
static void assert_rollback(struct txn *tx, struct undo_tx *u)
{
    if (u->before.n == SIZE_MAX)
        return; /* out of memory for the copies */
    const char *b = u->before.a;
    for (size_t i = 0; i < u->recs.n; i++) {
        const struct urec *e = vec_at(&u->recs, i);
        struct tx_rec r;
        tx_rec_get(e->r, &r);
        assert(tx_rec_current(tx, e->r) && r.type == LOG_DATA &&
               "U1: a record was written over before the commit");
        assert(!memcmp(r.payload, b, r.len) &&
               "U1: rolling back does not give the bytes from before the transaction");
        b += r.len;
    }
}
#endif

int eng_commit(struct txn *tx)
{
    struct undo_tx *u = tx->eng;
    int allocs = tx_block_count(tx) != 0;
    if (!u->recs.n && !allocs) {
        reset(tx, u); /* objects opened TXN_RW may wait unchanged (U9) */
        return 0;     /* read-only: nothing to make durable */
    }
    int eager = txn_cfg.alloc_eager && allocs;
#ifndef NDEBUG
    assert_rollback(tx, u);
#endif
    tx_log_flush(tx); /* ALLOC/FREE records */
    if (!eager && allocs) {
        if (tx->hot.gate)
            pm_barrier(); /* (0) U4 */
        tx_apply_allocs(tx, 1);
    }
    for (size_t i = 0; i < u->recs.n; i++) {
        const struct urec *e = vec_at(&u->recs, i);
        pm_flush(e->a, e->len);
    }
    tx_flush_new_blocks(tx);
    pm_barrier(); /* (1) U3, U4 */
    /* (2) the commit record: eager mode still owes the allocator bits */
    tx_set_state(tx, eager ? SLOT_COMMITTED : SLOT_IDLE);
    if (eager) {
        tx_apply_allocs(tx, 1);
        pm_barrier();                                /* (3) */
        tx_set_state(tx, SLOT_IDLE); /* (4) */
    }
    reset(tx, u);
    return 0;
}

void eng_abort(struct txn *tx)
{
    struct undo_tx *u = tx->eng;
    rollback(tx, u, u->prepared);
}

const int eng_joins = 1;

int eng_prepare(struct txn *tx, struct join_ref *ref)
{
    struct undo_tx *u = tx->eng;
    ref->seq = 0;
    if (!u->recs.n && !tx_block_count(tx))
        return 0; /* read-only: nothing to decide */
#ifndef NDEBUG
    assert_rollback(tx, u);
#endif
    tx_join_seq(tx, ref);
    int rc = tx_log_prepare(tx, ref);
    if (rc) {
        ref->seq = 0;
        return rc;
    }
    tx_log_flush(tx); /* ALLOC/FREE records and the LOG_PREPARE one */
    if (tx_block_count(tx)) {
        pm_barrier(); /* U4: the records before the bits */
        tx_apply_allocs(tx, 1);
    }
    for (size_t i = 0; i < u->recs.n; i++) {
        const struct urec *e = vec_at(&u->recs, i);
        pm_flush(e->a, e->len);
    }
    tx_flush_new_blocks(tx);
    pm_barrier(); /* (1) U3, U8 */
    u->prepared = 1;
    return 0;
}

void eng_finish(struct txn *tx)
{
    struct undo_tx *u = tx->eng;
    if (u->prepared)
        tx_set_state(tx, SLOT_IDLE); /* (2) */
    reset(tx, u);
}

int eng_rec_valid(txn_pool *p, const struct log_rec *r)
{
    struct join_ref ref;
    struct tx_rec t;
    tx_rec_get(r, &t);
    if (t.type == LOG_PREPARE)
        return tx_prepare_rec_get(r, &ref) ? 0 : TXN_E_CORRUPT;
    return tx_rec_valid(p, r);
}

int eng_recover(txn_pool *p, struct slot_hdr *slot, struct log_rec **recs, size_t n)
{
    struct tx_rec r;
    tx_rec_get(recs[0], &r);
    int bits = tx_slot_bits(slot, r.version);
    if (bits >= 0) {
        /* committed (U7): only an eager commit may still owe its bits */
        if (bits == SLOT_COMMITTED)
            for (size_t i = 0; i < n; i++) {
                tx_rec_get(recs[i], &r);
                if (r.type == LOG_ALLOC || r.type == LOG_FREE)
                    tx_redo_alloc_rec(p, recs[i]);
            }
        return 0;
    }
    /* U8: a prepared transaction is its coordinator's to decide; its
     * LOG_PREPARE record is its last */
    struct join_ref ref;
    if (tx_prepare_rec_get(recs[n - 1], &ref)) {
        int rc = join_decide(p, &ref);
        if (rc < 0)
            return rc;
        if (rc == 1)
            return 0; /* committed: data and bits are in place */
    }
    for (size_t i = n; i-- > 0;) {
        tx_rec_get(recs[i], &r);
        if (r.type == LOG_DATA) {
            pm_memcpy((void *)(uintptr_t)r.addr, r.payload, r.len);
            pm_flush((void *)(uintptr_t)r.addr, r.len);
        } else if (r.type == LOG_ALLOC || r.type == LOG_FREE) {
            tx_undo_alloc_rec(p, recs[i]);
        }
    }
    return 0;
}
