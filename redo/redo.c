/* redo.c - the hashed redo log engine.
 *
 * Objects carry an 8-byte writers bitmap in front of their payload: bit i
 * is set while the transaction of log slot i (i < 64) has written the
 * object. A read of an object without the reader's bit is a plain load;
 * with it, the transaction's hash (object -> latest record, each record
 * linked to the previous one of the same object) gives the new bytes
 * without walking unrelated records. Slots >= 64 own no bit and always
 * look up. The bitmap is volatile information kept in the object; stale
 * bits after a crash only cost a lookup, and recovery clears the ones of
 * the interrupted transaction.
 *
 * Crash invariants
 *  R1 Nothing in place changes before the state word says COMMITTED for
 *     this version, and that store follows the barrier that made the whole
 *     log (DATA, ALLOC, FREE records) durable.
 *  R2 The state word holds version and state in one 8-byte store: a crash
 *     can never pair COMMITTED with another transaction's records.
 *  R3 A committed log is replayed (data and allocator bits) until IDLE is
 *     durable; replay is idempotent, and no other transaction can touch
 *     the objects in between (their locks are released after commit).
 *  R4 Blocks allocated by the transaction are written in place (nobody
 *     sees them before commit; a crash frees them) and made durable by the
 *     log barrier (1) before COMMITTED.
 *
 *  R5 A participant of a transaction over several pools (txn_join) is
 *     prepared by step (1) of a commit with a LOG_PREPARE record naming its
 *     coordinator last in its log, and finished by steps (2) to (4). An
 *     unsettled log ending with that record is replayed by recovery when
 *     join_decide says the coordinator committed it, else dropped; a
 *     prepared transaction that aborts marks its version settled (one
 *     barrier), so that its log is never taken for an undecided one.
 *
 * Barriers of a commit, whatever the number of writes:
 *   log + new blocks -> (1); COMMITTED -> (2); apply data and allocator
 *   bits -> (3); IDLE -> (4). Read-only: 0. Abort: 0 (nothing in place
 *   changed, and the state never said COMMITTED for this version).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "addrmap.h"
#include "engine.h"
#include "atomics.h"
#include "persist.h"

const char eng_name[] = PMTX_ENGINE_NAME;
const int eng_persistent = 1;

#define OBJ_HDR 8u /* the writers bitmap */
#define NO_REC (~0ull)

/* A write of this transaction: where its bytes go, where they lie in the
 * log (its record's payload: reads take them from there, with no call into
 * the format), its object, and the previous write of the same object
 * (index into `writes`, or NO_REC). */
struct write {
    uint64_t addr;
    const char *bytes;
    uint64_t obj;
    uint64_t prev;
    uint32_t len;
};

struct redo_tx {
    uint64_t bit;          /* this slot's writer bit, 0 beyond 64 slots */
    struct vec writes;     /* struct write */
    struct vec objs;       /* uint64_t *: bitmaps we set */
    struct addrmap latest; /* object -> index of its latest write */
    struct addrmap words;  /* 8-byte word -> index of the latest write over
                              it, once a read walked more than WALK_MAX
                              writes back (`indexed` of them entered) */
    int windex;            /* `words` is in use */
    size_t indexed;
    int prepared;          /* eng_prepare ran (R5) */
};

/* Writes of one object a read walks back before the transaction indexes
 * its writes by word: a transaction that wrote n words of one object and
 * reads them back would otherwise walk O(n) writes a read. */
#define WALK_MAX 16u

static inline uint64_t *writers(txn_obj *o)
{
    return (uint64_t *)o;
}

static inline char *payload(txn_obj *o)
{
    return (char *)o + OBJ_HDR;
}

size_t eng_obj_size(txn_pool *p, const txn_obj *o)
{
    return tx_block_payload(p, o, OBJ_HDR);
}

int eng_tx_init(struct txn *tx)
{
    struct redo_tx *r = calloc(1, sizeof *r);
    if (!r || addrmap_init(&r->latest, 64) || addrmap_init(&r->words, 64)) {
        if (r)
            addrmap_free(&r->latest);
        free(r);
        return TXN_E_NOMEM;
    }
    r->bit = tx->slot_idx < 64 ? 1ull << tx->slot_idx : 0;
    vec_init(&r->writes, sizeof(struct write));
    vec_init(&r->objs, sizeof(uint64_t *));
    tx->eng = r;
    return 0;
}

void eng_tx_fini(struct txn *tx)
{
    struct redo_tx *r = tx->eng;
    vec_free(&r->writes);
    vec_free(&r->objs);
    addrmap_free(&r->latest);
    addrmap_free(&r->words);
    free(r);
    tx->eng = NULL;
}

/* End of a transaction either way: drop our writer bits (not flushed:
 * they are volatile information) and the volatile state. */
static void finish(struct redo_tx *r)
{
    for (size_t i = 0; i < r->objs.n; i++)
        pm_and64(*(uint64_t **)vec_at(&r->objs, i), ~r->bit);
    r->writes.n = r->objs.n = 0;
    r->prepared = 0;
    addrmap_clear(&r->latest);
    if (r->windex) {
        addrmap_clear(&r->words);
        r->windex = 0;
        r->indexed = 0;
    }
}

void *eng_open(struct txn *tx, txn_obj *o, int mode)
{
    (void)tx;
    (void)mode;
    return payload(o);
}

static struct write *rec_at(struct redo_tx *r, uint64_t i)
{
    return vec_at(&r->writes, i);
}

/* Lay o's writes over [lo, hi) in dst (which holds the bytes in place),
 * walking o's chain back from write `from`: the overlapping writes from
 * the oldest to the newest. The walk stops at a write that covers the
 * whole range; after `max` writes it gives up, 1, having changed nothing. */
static int overlay_chain(struct redo_tx *r, txn_obj *o, uint64_t from, uint64_t lo, uint64_t hi,
                         char *dst, size_t max)
{
    uint64_t hits[64], nh = 0, i = from;
    size_t steps = 0;
    for (; i != NO_REC; i = rec_at(r, i)->prev) {
        const struct write *rec = rec_at(r, i);
        if (++steps > max)
            return 1;
        if (rec->addr >= hi || rec->addr + rec->len <= lo)
            continue;
        if (nh == 64) /* too many to stack: apply what we have, restart */
            break;
        hits[nh++] = i;
        if (rec->addr <= lo && rec->addr + rec->len >= hi)
            break;
    }
    if (i != NO_REC && nh == 64) {
        /* a long chain of partial overlaps: fall back to applying every
         * record of the object up to `from` in order */
        for (size_t k = 0; k <= from; k++) {
            const struct write *rec = rec_at(r, k);
            if (rec->obj == (uint64_t)(uintptr_t)o && rec->addr < hi && rec->addr + rec->len > lo) {
                uint64_t s = rec->addr > lo ? rec->addr : lo;
                uint64_t e = rec->addr + rec->len < hi ? rec->addr + rec->len : hi;
                memcpy(dst + (s - lo), rec->bytes + (s - rec->addr), e - s);
            }
        }
        return 0;
    }
    while (nh--) {
        const struct write *rec = rec_at(r, hits[nh]);
        uint64_t s = rec->addr > lo ? rec->addr : lo;
        uint64_t e = rec->addr + rec->len < hi ? rec->addr + rec->len : hi;
        memcpy(dst + (s - lo), rec->bytes + (s - rec->addr), e - s);
    }
    return 0;
}

/* `words` caught up with the writes; TXN_E_NOMEM leaves it in use but
 * behind (the caller then walks chains). */
static int index_words(struct redo_tx *r)
{
    r->windex = 1;
    for (; r->indexed < r->writes.n; r->indexed++) {
        const struct write *rec = rec_at(r, r->indexed);
        for (uint64_t w = rec->addr & ~7ull; w < rec->addr + rec->len; w += 8)
            if (addrmap_put(&r->words, w, r->indexed))
                return TXN_E_NOMEM;
    }
    return 0;
}

/* Read [a, a+n) of o as this transaction wrote it: the in-place bytes,
 * then the overlapping writes of o from the oldest to the newest, found
 * by walking o's chain back from its latest write, or, once a walk was
 * long, word by word through `words` (a word the latest write over it
 * covers only in part: by a walk from that write). */
static int lookup(struct redo_tx *r, txn_obj *o, char *a, void *dst, size_t n)
{
    pm_ctr.raw_lookups++;
    uint64_t *head = addrmap_find(&r->latest, (uint64_t)(uintptr_t)o);
    uint64_t lo = (uint64_t)(uintptr_t)a, hi = lo + n;
    memcpy(dst, a, n);
    if (!head)
        return 0;
    if ((!r->windex && !overlay_chain(r, o, *head, lo, hi, dst, WALK_MAX)) || index_words(r)) {
        if (r->windex) /* out of memory for the index */
            overlay_chain(r, o, *head, lo, hi, dst, SIZE_MAX);
        return 0;
    }
    for (uint64_t w = lo & ~7ull; w < hi; w += 8) {
        uint64_t *at = addrmap_find(&r->words, w);
        if (!at)
            continue; /* not written by this transaction */
        const struct write *rec = rec_at(r, *at);
        uint64_t s = w > lo ? w : lo, e = w + 8 < hi ? w + 8 : hi;
        if (rec->addr <= s && rec->addr + rec->len >= e)
            memcpy((char *)dst + (s - lo), rec->bytes + (s - rec->addr), e - s);
        else
            overlay_chain(r, o, *at, s, e, (char *)dst + (s - lo), SIZE_MAX);
    }
    return 0;
}

/* Applied at every commit before its IDLE: in place is committed. */
void eng_read_committed(txn_pool *p, txn_obj *o, size_t off, void *dst, size_t n)
{
    (void)p;
    memcpy(dst, payload(o) + off, n);
}

int eng_read(struct txn *tx, txn_obj *o, size_t off, void *dst, size_t n)
{
    struct redo_tx *r = tx->eng;
    char *a = payload(o) + off;
    if (r->bit && !(at_load(writers(o)) & r->bit)) {
        memcpy(dst, a, n); /* we have not written o: a plain load */
        return 0;
    }
    return lookup(r, o, a, dst, n);
}

static int log_write(struct txn *tx, struct redo_tx *r, txn_obj *o, char *a,
                     const char *src, size_t n)
{
    uint64_t key = (uint64_t)(uintptr_t)o;
    for (size_t done = 0; done < n;) {
        uint32_t len = (uint32_t)(n - done < LOG_MAX_PAYLOAD ? n - done : LOG_MAX_PAYLOAD);
        struct write *w = vec_push(&r->writes);
        if (!w)
            return TXN_E_NOMEM;
        struct log_rec *rec;
        int rc = tx_log(tx, LOG_DATA, (uint64_t)(uintptr_t)(a + done), key, src + done, len,
                        &rec);
        uint64_t *head = rc ? NULL : addrmap_find(&r->latest, key);
        if (!rc) {
            struct tx_rec t;
            tx_rec_get(rec, &t);
            *w = (struct write){t.addr, t.payload, key, head ? *head : NO_REC, len};
            rc = addrmap_put(&r->latest, key, r->writes.n - 1);
        }
        if (rc) {
            r->writes.n--;
            return rc;
        }
        done += len;
    }
    return 0;
}

int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    struct redo_tx *r = tx->eng;
    char *a = payload(o) + off;
    if (tx_is_new(tx, o)) { /* R4: the whole block is flushed at commit */
        pm_memcpy(a, src, n);
        return 0;
    }
    if (r->bit && !(at_load(writers(o)) & r->bit)) {
        uint64_t **slot = vec_push(&r->objs);
        if (!slot)
            return TXN_E_NOMEM;
        *slot = writers(o);
        pm_or64(writers(o), r->bit);
    }
    return log_write(tx, r, o, a, src, n);
}

int eng_alloc(struct txn *tx, size_t n, txn_obj **out)
{
    struct tx_block b;
    int rc = tx_reserve(tx, n + OBJ_HDR, &b);
    if (!rc)
        *out = b.blk;
    return rc;
}

int eng_free(struct txn *tx, txn_obj *o)
{
    return tx_mark_free(tx, o, NULL);
}

/* Replay a record (recovery: DATA, ALLOC, FREE) or a write (commit). */
static void apply_data(uint64_t addr, const void *bytes, size_t len)
{
    pm_memcpy((void *)(uintptr_t)addr, bytes, len);
    pm_flush((void *)(uintptr_t)addr, len);
}

static void apply(txn_pool *p, const struct log_rec *rec)
{
    struct tx_rec t;
    tx_rec_get(rec, &t);
    if (t.type == LOG_DATA)
        apply_data(t.addr, t.payload, t.len);
    else if (t.type == LOG_ALLOC || t.type == LOG_FREE)
        tx_redo_alloc_rec(p, rec);
}

#ifndef NDEBUG
#define REPLAY_CHECK_MAX 1024u /* records: the check is quadratic */

/* R3 in a debug build, after the log was applied: replaying it writes
 * what is in place. Each byte of a DATA record that no later record
 * writes again must be there (the transaction's locks still keep other
 * threads away), and a block of the transaction is never logged (R4). */
static void assert_replay(struct txn *tx, struct redo_tx *r)
{
    if (r->writes.n > REPLAY_CHECK_MAX)
        return;
    for (size_t i = 0; i < r->writes.n; i++) {
        const struct write *rec = rec_at(r, i);
        const char *bytes = rec->bytes;
        assert(!tx_is_new(tx, (const void *)(uintptr_t)rec->obj) &&
               "R4: a write to a block of the transaction was logged");
        for (uint64_t b = 0; b < rec->len; b++) {
            uint64_t a = rec->addr + b;
            int later = 0;
            for (size_t j = i + 1; j < r->writes.n && !later; j++) {
                const struct write *q = rec_at(r, j);
                later = a >= q->addr && a < q->addr + q->len;
            }
            assert((later || *(const char *)(uintptr_t)a == bytes[b]) &&
                   "R3: replaying the log writes what the commit applied");
        }
    }
}
#endif

/* Steps (2) to (4) of a commit whose log is durable. */
static void commit_logged(struct txn *tx, struct redo_tx *r)
{
    tx_set_state(tx, SLOT_COMMITTED); /* (2) */
    tx_apply_allocs(tx, 1); /* its atomics before any flush of (3) */
    for (size_t i = 0; i < r->writes.n; i++) {
        const struct write *w = rec_at(r, i);
        apply_data(w->addr, w->bytes, w->len);
    }
#ifndef NDEBUG
    assert_replay(tx, r);
#endif
    pm_barrier();                                  /* (3) */
    tx_set_state(tx, SLOT_IDLE);   /* (4) */
    finish(r);
}

static int nothing_written(struct txn *tx, struct redo_tx *r)
{
    return !r->writes.n && !tx_block_count(tx);
}

/* Step (1): the log (with `ref`'s LOG_PREPARE record when a participant)
 * and the new blocks durable. */
static int log_durable(struct txn *tx, const struct join_ref *ref)
{
    int rc = tx_log_allocs(tx);
    if (!rc && ref)
        rc = tx_log_prepare(tx, ref);
    if (rc)
        return rc;
    tx_log_flush(tx);
    tx_flush_new_blocks(tx);
    pm_barrier();                                  /* (1) R1 */
    return 0;
}

int eng_commit(struct txn *tx)
{
    struct redo_tx *r = tx->eng;
    int rc = nothing_written(tx, r) ? 0 : log_durable(tx, NULL);
    if (rc || nothing_written(tx, r)) {
        finish(r);
        return rc;
    }
    commit_logged(tx, r);
    return 0;
}

void eng_abort(struct txn *tx)
{
    struct redo_tx *r = tx->eng;
    if (r->prepared)
        tx_set_state(tx, SLOT_IDLE); /* R5: settled */
    finish(r);
}

const int eng_joins = 1;

int eng_prepare(struct txn *tx, struct join_ref *ref)
{
    struct redo_tx *r = tx->eng;
    ref->seq = 0;
    if (nothing_written(tx, r))
        return 0;
    tx_join_seq(tx, ref);
    int rc = log_durable(tx, ref);
    if (rc) {
        ref->seq = 0;
        return rc;
    }
    r->prepared = 1;
    return 0;
}

void eng_finish(struct txn *tx)
{
    struct redo_tx *r = tx->eng;
    if (r->prepared)
        commit_logged(tx, r);
    else
        finish(r);
}

int eng_rec_valid(txn_pool *p, const struct log_rec *rec)
{
    struct tx_rec r;
    tx_rec_get(rec, &r);
    switch (r.type) {
    case LOG_DATA:
        /* aux: the object whose writers bitmap recovery clears */
        return tx_pool_contains(p, (void *)(uintptr_t)r.addr, r.len) && r.aux % 8 == 0 &&
                       tx_pool_contains(p, (void *)(uintptr_t)r.aux, OBJ_HDR) ? 0 : TXN_E_CORRUPT;
    case LOG_ALLOC:
    case LOG_FREE:
        return tx_alloc_rec_valid(p, rec) ? 0 : TXN_E_CORRUPT;
    case LOG_PREPARE: {
        struct join_ref ref;
        return tx_prepare_rec_get(rec, &ref) ? 0 : TXN_E_CORRUPT;
    }
    default:
        return TXN_E_CORRUPT;
    }
}

int eng_recover(txn_pool *p, struct slot_hdr *slot, struct log_rec **recs, size_t n)
{
    struct tx_rec r;
    tx_rec_get(recs[0], &r);
    int state = tx_slot_state(slot, r.version);
    int replay = state == (int)SLOT_COMMITTED; /* R3 */
    struct join_ref ref;
    if (state < 0 && tx_prepare_rec_get(recs[n - 1], &ref)) {
        int rc = join_decide(p, &ref); /* R5 */
        if (rc < 0)
            return rc;
        replay = rc == 1;
    }
    if (replay)
        for (size_t i = 0; i < n; i++)
            apply(p, recs[i]);
    /* R2: a writers word is cleared only where the record's object still
     * starts a live block: an abort leaves no state, so records of a
     * settled transaction look unsettled, and their object may have been
     * freed since (its chunk a run now, its first word the run's bitmap) */
    for (size_t i = 0; i < n; i++) {
        tx_rec_get(recs[i], &r);
        if (r.type == LOG_DATA && alloc_block_size(p, (const void *)(uintptr_t)r.aux, 1))
            pm_store64((void *)(uintptr_t)r.aux, 0);
    }
    return 0;
}
