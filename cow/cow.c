/* cow.c - the copy-on-write engine: objects are wrappers around payloads.
 *
 * A txn_obj is a 32-byte wrapper (struct wrap). txn_open(RW) claims the
 * wrapper for the transaction (one writer per object: a second one gets
 * TXN_E_CONFLICT), copies the payload into a new block and returns the
 * copy; writes land in the copy; other transactions keep reading the old
 * payload. Payloads that hold other objects hold their wrappers, which
 * never move, so a plain byte copy is always a correct copy.
 *
 * The writer id is tagged with the pool's boot count, so an id left in a
 * wrapper by a crashed run means nothing after the next open: recovery
 * needs only the log, never a scan of the objects.
 *
 * Crash invariants
 *  C1 A wrapper's committed payload changes only after the state word says
 *     COMMITTED, which follows the barrier that made the write set (OBJ
 *     records), the copies, new blocks and ALLOC/FREE records durable.
 *  C2 The old payload is freed only through the transaction's FREE record
 *     (the paper's old_backup): a crash between the swap and the free
 *     replays both from the committed log, so nothing leaks.
 *  C3 Copies are allocated like any block: their bits are set only in
 *     step (3) of a committed transaction, so an uncommitted copy is free
 *     space after a crash.
 *  C4 A free is a write: it claims the wrapper as txn_open(RW) does (an
 *     OBJ record whose "copy" is the payload itself, so the commit's swap
 *     changes nothing) and keeps the claim until the transaction ends, so
 *     a write or free of the same object by another transaction gets
 *     TXN_E_CONFLICT instead of releasing its blocks a second time.
 *  C5 A participant of a transaction over several pools (txn_join) is
 *     prepared by step (1) with a LOG_PREPARE record naming its
 *     coordinator last in its log, and finished by steps (2) to (4); its
 *     wrappers stay claimed until then. An unsettled log ending with that
 *     record is committed by recovery (swaps and allocator records) when
 *     join_decide says the coordinator committed it, else rolled back as
 *     any unsettled one; a prepared transaction that aborts stores IDLE
 *     (one barrier more when it claimed no wrapper), so its log is never
 *     taken for an undecided one.
 *  C6 A committed transaction's blocks stop counting as reserved or freed
 *     by it (tx_take_blocks) before its claims are released: another
 *     transaction claiming a wrapper next may free its payload, the block
 *     this one swapped in, and must not find it still marked new by this
 *     one (A6 of txn/format/tx.c). Out of memory for the list, the front
 *     end's end does it, after the claims went (as before). An abort
 *     unmarks its frees before it releases its claims, for the same
 *     reason: the next writer frees the payload this one marked (found
 *     as TXN_E_INVAL by join-cow's threads, every run on an idle host).
 *
 * Barriers: commit = write set + copies -> (1); COMMITTED -> (2); swap,
 * allocator bits -> (3); IDLE -> (4). Abort of a transaction that opened
 * objects for writing: reset their wrappers -> (3); IDLE -> (4), as in the
 * paper. Read-only: 0. A joined part (C5): prepare (1); finish (2) to
 * (4); abort of a prepared part (3), (4).
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "atomics.h"
#include "persist.h"

const char eng_name[] = PMTX_ENGINE_NAME;
const int eng_inlines = 1;
const int eng_persistent = 1;

struct wrap {
    uint64_t payload;    /* the committed payload block */
    uint64_t copy;       /* the writer's copy ("new"), while it writes */
    uint64_t old_backup; /* the payload the copy replaces */
    uint64_t writer;     /* boot << 16 | (slot + 1) of the writer, or 0 */
};
_Static_assert(sizeof(struct wrap) == 32, "wrapper size");

struct cow_tx {
    uint64_t me;       /* our writer id in this boot */
    struct vec wset;   /* struct wrap *: wrappers we opened for writing */
    int prepared;      /* eng_prepare ran (C5) */
    struct vec freed;  /* void *: the committed transaction's frees (C6) */
};

static inline struct wrap *W(txn_obj *o)
{
    return (struct wrap *)o;
}

static inline void *P(uint64_t a)
{
    return (void *)(uintptr_t)a;
}

size_t eng_obj_size(txn_pool *p, const txn_obj *o)
{
    if (tx_block_payload(p, o, 0) != sizeof(struct wrap))
        return 0;
    /* an atomic load: another transaction's commit may swap it meanwhile
     * (a writer of the object whose claim this caller's will then meet) */
    return tx_block_payload(p, P(at_load(&((const struct wrap *)o)->payload)), 0);
}

int eng_obj_blocks(txn_pool *p, const txn_obj *o, void *blk[2])
{
    (void)p;
    blk[0] = (void *)o;
    blk[1] = P(((const struct wrap *)o)->payload);
    return 2;
}

int eng_tx_init(struct txn *tx)
{
    struct cow_tx *c = calloc(1, sizeof *c);
    if (!c)
        return TXN_E_NOMEM;
    c->me = tx_pool_boot(tx->p) << 16 | (tx->slot_idx + 1);
    vec_init(&c->wset, sizeof(struct wrap *));
    vec_init(&c->freed, sizeof(void *));
    tx->eng = c;
    return 0;
}

void eng_tx_fini(struct txn *tx)
{
    struct cow_tx *c = tx->eng;
    vec_free(&c->wset);
    vec_free(&c->freed);
    free(c);
    tx->eng = NULL;
}

/* A writer id of this boot that is not ours: somebody else writes. */
static int foreign(txn_pool *p, uint64_t writer, uint64_t me)
{
    return writer && writer != me && writer >> 16 == tx_pool_boot(p);
}

static void *open_rw(struct txn *tx, struct wrap *w)
{
    struct cow_tx *c = tx->eng;
    if (at_load(&w->writer) == c->me)
        return P(w->copy);
    if (tx_is_new(tx, w))
        return P(w->payload); /* nobody else can see it: write in place */
    uint64_t cur = at_load(&w->writer);
    if (foreign(tx->p, cur, c->me) || !pm_cas64(&w->writer, cur, c->me)) {
        tx->err = TXN_E_CONFLICT;
        return NULL;
    }
    struct wrap **slot = vec_push(&c->wset);
    struct tx_block copy;
    size_t size = tx_block_payload(tx->p, P(w->payload), 0);
    int rc = slot ? tx_reserve(tx, size, &copy) : TXN_E_NOMEM;
    if (!rc)
        rc = tx_mark_free(tx, P(w->payload), NULL);
    if (!rc)
        rc = tx_log(tx, LOG_OBJ, (uint64_t)(uintptr_t)w, (uint64_t)(uintptr_t)copy.blk,
                    NULL, 0, NULL);
    if (rc) {
        if (slot)
            c->wset.n--;
        pm_store64_shared(&w->writer, cur);
        tx->err = rc;
        return NULL;
    }
    *slot = w;
    pm_memcpy(copy.blk, P(w->payload), size);
    pm_store64(&w->copy, (uint64_t)(uintptr_t)copy.blk);
    pm_store64(&w->old_backup, w->payload);
    return copy.blk;
}

void *eng_open(struct txn *tx, txn_obj *o, int mode)
{
    struct wrap *w = W(o);
    if (mode == TXN_RW)
        return open_rw(tx, w);
    struct cow_tx *c = tx->eng;
    return P(at_load(&w->writer) == c->me ? w->copy : w->payload);
}

/* The committed payload (a writer's copy is not, until its commit swaps
 * it in): what a participant's recovery reads its coordinator's join
 * table through (api.c, J2). */
void eng_read_committed(txn_pool *p, txn_obj *o, size_t off, void *dst, size_t n)
{
    (void)p;
    memcpy(dst, (const char *)P(at_load(&W(o)->payload)) + off, n);
}

/* Writes land in place in our copy, or in an object of this transaction. */
int eng_inline(struct txn *tx, txn_obj *o, struct txn__way *w)
{
    struct cow_tx *c = tx->eng;
    struct wrap *wr = W(o);
    int copied = at_load(&wr->writer) == c->me;
    w->base = P(copied ? wr->copy : wr->payload);
    w->wmode = copied || tx_is_new(tx, wr) ? TXN__W_DIRECT : TXN__W_SLOW;
    return ENG_WAY_DROP; /* a commit moves payloads */
}

int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    char *dst = open_rw(tx, W(o));
    if (!dst)
        return tx->err;
    pm_memcpy(dst + off, src, n);
    return 0;
}

int eng_alloc(struct txn *tx, size_t n, txn_obj **out)
{
    struct tx_block w, pl;
    int rc = tx_reserve(tx, sizeof(struct wrap), &w);
    if (rc)
        return rc;
    if ((rc = tx_reserve(tx, n, &pl))) {
        tx_unreserve(tx); /* the wrapper: a commit would leave it allocated */
        return rc;
    }
    pm_store64(&W(w.blk)->payload, (uint64_t)(uintptr_t)pl.blk);
    *out = w.blk;
    return 0;
}

/* C4: the claim of a free (no copy: the payload goes). */
static int claim_free(struct txn *tx, struct cow_tx *c, struct wrap *w)
{
    uint64_t cur = at_load(&w->writer);
    if (foreign(tx->p, cur, c->me) || !pm_cas64(&w->writer, cur, c->me))
        return TXN_E_CONFLICT;
    struct wrap **slot = vec_push(&c->wset);
    int rc = slot ? tx_log(tx, LOG_OBJ, (uint64_t)(uintptr_t)w, w->payload, NULL, 0, NULL)
                  : TXN_E_NOMEM;
    if (rc) {
        if (slot)
            c->wset.n--;
        pm_store64_shared(&w->writer, cur);
        return rc;
    }
    *slot = w;
    pm_store64(&w->copy, w->payload);
    return 0;
}

int eng_free(struct txn *tx, txn_obj *o)
{
    struct cow_tx *c = tx->eng;
    struct wrap *w = W(o);
    int rc;
    if (at_load(&w->writer) == c->me) /* opened for writing: its old payload
                                         is freed already, the copy goes too;
                                         the claim stays (C4) */
        rc = tx_mark_free(tx, P(w->copy), NULL);
    else if (tx_is_new(tx, w)) /* nobody else can see it */
        rc = tx_mark_free(tx, P(w->payload), NULL);
    else if (!(rc = claim_free(tx, c, w)))
        rc = tx_mark_free(tx, P(w->payload), NULL);
    return rc ? rc : tx_mark_free(tx, w, NULL);
}

/* Forget the transaction's claims on its wrappers (volatile meaning). */
static void release(struct cow_tx *c, int flush)
{
    for (size_t i = 0; i < c->wset.n; i++) {
        struct wrap *w = *(struct wrap **)vec_at(&c->wset, i);
        pm_store64(&w->copy, 0);
        pm_store64(&w->old_backup, 0);
        pm_store64_shared(&w->writer, 0);
        if (flush)
            pm_flush(w, sizeof *w);
    }
    c->wset.n = 0;
}

/* Step (1): the write set, the copies and new blocks durable, with
 * `ref`'s LOG_PREPARE record last when a participant (C5). On an error
 * the transaction is rolled back. */
static int log_durable(struct txn *tx, const struct join_ref *ref)
{
    int rc = tx_log_allocs(tx);
    if (!rc && ref)
        rc = tx_log_prepare(tx, ref);
    if (rc) {
        eng_abort(tx);
        return rc;
    }
    tx_log_flush(tx);
    tx_flush_new_blocks(tx);
    pm_barrier();                     /* (1) C1 */
    return 0;
}

/* Steps (2) to (4) of a commit whose step (1) is done. */
static void commit_logged(struct txn *tx, struct cow_tx *c)
{
    c->prepared = 0;
    tx_set_state(tx, SLOT_COMMITTED); /* (2) */
    tx_apply_allocs(tx, 1); /* C2, C3; its atomics before the flushes */
    for (size_t i = 0; i < c->wset.n; i++) {
        struct wrap *w = *(struct wrap **)vec_at(&c->wset, i);
        pm_store64(&w->payload, w->copy);
        pm_store64(&w->copy, 0);
        pm_flush(w, sizeof *w);
    }
    pm_barrier();                /* (3) */
    tx_set_state(tx, SLOT_IDLE); /* (4) */
    /* C6: the blocks' marks cleared before the claims go, the freed
     * blocks back to the allocator after */
    size_t nf;
    const struct tx_block *fr = tx_frees(tx, &nf);
    int take = !vec_reserve(&c->freed, nf);
    for (size_t i = 0; take && i < nf; i++)
        ((void **)c->freed.a)[i] = fr[i].blk;
    if (take)
        tx_take_blocks(tx);
    release(c, 0);
    for (size_t i = 0; take && i < nf; i++)
        tx_cache_release(tx->p, tx_cache(tx), ((void **)c->freed.a)[i]);
}

int eng_commit(struct txn *tx)
{
    struct cow_tx *c = tx->eng;
    if (!c->wset.n && !tx_block_count(tx))
        return 0;
    int rc = log_durable(tx, NULL);
    if (!rc)
        commit_logged(tx, c);
    return rc;
}

void eng_abort(struct txn *tx)
{
    struct cow_tx *c = tx->eng;
    int prepared = c->prepared;
    c->prepared = 0;
    if (!c->wset.n && !prepared)
        return;
    /* C6: its frees unmarked before the claims go (the next writer of a
     * wrapper frees the same payload); the copies go back at the end */
    size_t nf;
    tx_frees(tx, &nf);
    while (nf--)
        tx_unmark_free(tx);
    release(c, 1);
    pm_barrier();                                /* (3) */
    tx_set_state(tx, SLOT_IDLE); /* (4); C5: a prepared one settled */
}

const int eng_joins = 1;

int eng_prepare(struct txn *tx, struct join_ref *ref)
{
    struct cow_tx *c = tx->eng;
    ref->seq = 0;
    if (!c->wset.n && !tx_block_count(tx))
        return 0; /* wrote nothing: not prepared */
    tx_join_seq(tx, ref);
    int rc = log_durable(tx, ref);
    if (rc) {
        ref->seq = 0;
        return rc;
    }
    c->prepared = 1;
    return 0;
}

void eng_finish(struct txn *tx)
{
    struct cow_tx *c = tx->eng;
    if (c->prepared)
        commit_logged(tx, c);
    else
        eng_abort(tx); /* it wrote nothing */
}

int eng_rec_valid(txn_pool *p, const struct log_rec *rec)
{
    struct tx_rec r;
    tx_rec_get(rec, &r);
    switch (r.type) {
    case LOG_OBJ:
        return r.len == 0 && alloc_record_valid(p, r.addr, sizeof(struct wrap)) &&
                       tx_pool_contains(p, P(r.aux), 1) ? 0 : TXN_E_CORRUPT;
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
    /* R2: settled (an abort of a writer says IDLE too): its wrappers may
     * be free, or other objects' blocks by now. An unsettled one still
     * claims its wrappers, so nobody else can have freed them. */
    struct tx_rec r;
    tx_rec_get(recs[0], &r);
    int state = tx_slot_state(slot, r.version);
    if (state == SLOT_IDLE)
        return 0;
    int committed = state == SLOT_COMMITTED;
    struct join_ref ref;
    if (state < 0 && tx_prepare_rec_get(recs[n - 1], &ref)) {
        int rc = join_decide(p, &ref); /* C5 */
        if (rc < 0)
            return rc;
        committed = rc == 1;
    }
    for (size_t i = 0; i < n; i++) {
        tx_rec_get(recs[i], &r);
        if (r.type == LOG_PREPARE)
            continue;
        if (r.type == LOG_OBJ) {
            struct wrap *w = P(r.addr);
            if (committed)
                pm_store64(&w->payload, r.aux);
            pm_store64(&w->copy, 0);
            pm_store64(&w->old_backup, 0);
            pm_store64_shared(&w->writer, 0);
            pm_flush(w, sizeof *w);
        } else if (committed) {
            tx_redo_alloc_rec(p, recs[i]);
        }
    }
    return 0;
}
