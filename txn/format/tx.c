/* tx.c - pmtx's format for contexts and transactions (engine.h's
 * eng_pool_attach/detach/begin/end), and the helpers its engines share:
 * versions, block bookkeeping, ALLOC/FREE records and their recovery. */
#include "format.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "persist.h"

struct txn_config txn_cfg;

/* The front end puts a context's struct fmt_tx right after its struct txn
 * (api.c, TX_FMT), which is aligned enough only if its size is a multiple. */
_Static_assert(sizeof(struct txn) % _Alignof(struct fmt_tx) == 0, "fmt_tx after txn");
const size_t eng_tx_fmt_size = sizeof(struct fmt_tx);

#define VERSION_RANGE (1ull << 32)

void tx_claim_versions(struct txn *tx)
{
    /* versions are never reused, so a stale record can never pass for one
     * of a later transaction */
    uint64_t v = TX_FMT(tx)->slot->next_version ? TX_FMT(tx)->slot->next_version : 1;
    pm_store64(&TX_FMT(tx)->slot->next_version, v + VERSION_RANGE);
    pm_persist(&TX_FMT(tx)->slot->next_version, 8);
    TX_FMT(tx)->version = v - 1;
    TX_FMT(tx)->version_end = v + VERSION_RANGE;
}

int eng_pool_attach(struct txn *tx)
{
    TX_FMT(tx)->slot = pool_slot(tx->p, tx->slot_idx);
    log_attach(&TX_FMT(tx)->log, tx->p, TX_FMT(tx)->slot);
    vec_init(&TX_FMT(tx)->allocs, sizeof(struct tx_block));
    vec_init(&TX_FMT(tx)->frees, sizeof(struct tx_block));
    return 0;
}

void eng_pool_detach(struct txn *tx)
{
    alloc_cache_drain(tx->p, &TX_FMT(tx)->cache);
    vec_free(&TX_FMT(tx)->allocs);
    vec_free(&TX_FMT(tx)->frees);
}

void eng_pool_begin(struct txn *tx)
{
    if (eng_persistent)
        tx_next_version(tx);
}

/* The transaction's marks cleared (A6 in alloc.c), and the blocks it gives
 * back, its frees or its allocations, released: a block's marks before its
 * release, as a released block may be taken by any thread (the list it
 * does not give back first: a block it allocated and freed is on both). */
static __attribute__((noinline)) void settle(struct txn *tx, struct vec *v, enum alloc_mark m,
                                             int give)
{
    for (size_t i = 0; i < v->n; i++) {
        void *blk = ((struct tx_block *)vec_at(v, i))->blk;
        alloc_unmark(tx->p, blk, m);
        if (give)
            alloc_release(tx->p, &TX_FMT(tx)->cache, blk);
    }
}

/* Its blocks and log, when the transaction had any. */
static __attribute__((noinline)) void pool_end_blocks(struct txn *tx, int committed)
{
    struct vec *give = committed ? &TX_FMT(tx)->frees : &TX_FMT(tx)->allocs;
    struct vec *keep = committed ? &TX_FMT(tx)->allocs : &TX_FMT(tx)->frees;
    if (keep->n)
        settle(tx, keep, committed ? MARK_NEW : MARK_FREED, 0);
    if (give->n)
        settle(tx, give, committed ? MARK_FREED : MARK_NEW, 1);
    TX_FMT(tx)->allocs.n = TX_FMT(tx)->frees.n = 0;
    TX_FMT(tx)->reserved_bytes = TX_FMT(tx)->freed_bytes = 0;
    if (TX_FMT(tx)->log.used) /* else where log_rewind would put it */
        log_rewind(&TX_FMT(tx)->log);
}

/* The common end, a transaction that reserved, freed and logged nothing,
 * returns at once: the selects, stores and saved registers of the general
 * end were a fifth of none's commit (docs/access.md). Its byte counts are
 * 0 then, as they count the blocks of the lists. */
void eng_pool_end(struct txn *tx, int committed)
{
    if (TX_FMT(tx)->allocs.n || TX_FMT(tx)->frees.n || TX_FMT(tx)->log.used) {
        pool_end_blocks(tx, committed);
        return;
    }
    assert(!TX_FMT(tx)->reserved_bytes && !TX_FMT(tx)->freed_bytes);
}

void tx_take_blocks(struct txn *tx)
{
    settle(tx, &TX_FMT(tx)->allocs, MARK_NEW, 0);
    settle(tx, &TX_FMT(tx)->frees, MARK_FREED, 0);
    TX_FMT(tx)->allocs.n = TX_FMT(tx)->frees.n = 0;
    TX_FMT(tx)->reserved_bytes = TX_FMT(tx)->freed_bytes = 0;
}

#ifndef NDEBUG
#define A6_CHECK_MAX 64 /* blocks: a debug build checks a mark against a list this short */

static int listed(const struct vec *v, const void *blk)
{
    for (size_t i = 0; i < v->n; i++)
        if (((struct tx_block *)vec_at(v, i))->blk == blk)
            return 1;
    return 0;
}
#endif

int tx_reserve(struct txn *tx, size_t n, struct tx_block *out)
{
    struct tx_block *b = vec_push(&TX_FMT(tx)->allocs);
    if (!b)
        return TXN_E_NOMEM;
    int spare_ok = TX_FMT(tx)->freed_bytes >= TX_FMT(tx)->reserved_bytes + n;
    int rc = alloc_reserve(tx->p, &TX_FMT(tx)->cache, n, spare_ok, &b->blk, &b->size);
    if (rc) {
        TX_FMT(tx)->allocs.n--;
        return rc;
    }
    int was = alloc_mark(tx->p, b->blk, MARK_NEW);
    assert(!was && "A6: a block just reserved is marked by no transaction");
    (void)was;
    TX_FMT(tx)->reserved_bytes += b->size;
    *out = *b;
    return 0;
}

void tx_unreserve(struct txn *tx)
{
    struct tx_block *b = vec_at(&TX_FMT(tx)->allocs, --TX_FMT(tx)->allocs.n);
    TX_FMT(tx)->reserved_bytes -= b->size;
    alloc_unmark(tx->p, b->blk, MARK_NEW);
    alloc_release(tx->p, &TX_FMT(tx)->cache, b->blk);
}

void tx_unmark_free(struct txn *tx)
{
    struct tx_block *b = vec_at(&TX_FMT(tx)->frees, --TX_FMT(tx)->frees.n);
    TX_FMT(tx)->freed_bytes -= b->size;
    alloc_unmark(tx->p, b->blk, MARK_FREED);
}

/* A6: a block marked NEW was reserved by an open transaction, and one
 * reserved by another is reachable by none but that one until it commits
 * (the program's isolation), so an engine asks only about its own. */
int tx_is_new(const struct txn *tx, const void *blk)
{
    if (!TX_FMT(tx)->allocs.n)
        return 0;
    int is = alloc_marked(tx->p, blk, MARK_NEW);
    assert((TX_FMT(tx)->allocs.n > A6_CHECK_MAX || is == listed(&TX_FMT(tx)->allocs, blk)) &&
           "A6: the mark NEW of a block this transaction touches says whether it reserved it");
    return is;
}

int tx_mark_free(struct txn *tx, void *blk, struct tx_block *out)
{
    /* a block reserved here has no persistent bit yet: any block start of
     * the heap; else one whose bit is set */
    int mine = tx_is_new(tx, blk);
    size_t size = alloc_block_size(tx->p, blk, !mine);
    if (!size)
        return TXN_E_INVAL;
    if (alloc_mark(tx->p, blk, MARK_FREED))
        return TXN_E_INVAL; /* A6: freed twice, here or by another open transaction */
    struct tx_block *b = vec_push(&TX_FMT(tx)->frees);
    if (!b) {
        alloc_unmark(tx->p, blk, MARK_FREED);
        return TXN_E_NOMEM;
    }
    b->blk = blk;
    b->size = size;
    TX_FMT(tx)->freed_bytes += size;
    if (out)
        *out = *b;
    return 0;
}

/* The atomic updates first, then the flushes: a locked instruction waits
 * for every write-back in flight, so interleaving them serialises both. */
static __attribute__((noinline)) void apply_allocs(struct txn *tx, int flush)
{
    for (size_t i = 0; i < TX_FMT(tx)->allocs.n; i++) {
        struct tx_block *b = vec_at(&TX_FMT(tx)->allocs, i);
        alloc_apply(tx->p, (uint64_t)(uintptr_t)b->blk, b->size, ALLOC_SET, 0);
    }
    for (size_t i = 0; i < TX_FMT(tx)->frees.n; i++) {
        struct tx_block *b = vec_at(&TX_FMT(tx)->frees, i);
        alloc_apply(tx->p, (uint64_t)(uintptr_t)b->blk, b->size, ALLOC_CLEAR, 0);
    }
    for (size_t i = 0; flush && i < TX_FMT(tx)->allocs.n + TX_FMT(tx)->frees.n; i++) {
        struct tx_block *b = i < TX_FMT(tx)->allocs.n ? vec_at(&TX_FMT(tx)->allocs, i)
                                              : vec_at(&TX_FMT(tx)->frees, i - TX_FMT(tx)->allocs.n);
        alloc_flush_meta(tx->p, (uint64_t)(uintptr_t)b->blk, b->size);
    }
}

/* Without blocks it returns before saving any register (none's commit). */
void tx_apply_allocs(struct txn *tx, int flush)
{
    if (TX_FMT(tx)->allocs.n || TX_FMT(tx)->frees.n)
        apply_allocs(tx, flush);
}

void tx_set_state(struct txn *tx, unsigned state)
{
    struct slot_hdr *slot = TX_FMT(tx)->slot;
    /* tx_slot_state relies on a slot's versions only growing */
    assert(slot->state >> 2 <= TX_FMT(tx)->version && "a slot's state word goes back in version");
    pm_store64(&slot->state, slot_state(TX_FMT(tx)->version, state));
    pm_persist(&slot->state, sizeof slot->state);
}

int tx_slot_state(const struct slot_hdr *slot, uint64_t version)
{
    /* Records older than the state word's transaction are settled (R2): a
     * later one that aborted stored IDLE without flushing its records, so
     * a crash can leave the old ones at the log's head. */
    if (version < slot->state >> 2)
        return SLOT_IDLE;
    if (slot->state == slot_state(version, SLOT_IDLE))
        return SLOT_IDLE;
    return slot->state == slot_state(version, SLOT_COMMITTED) ? (int)SLOT_COMMITTED : -1;
}

int tx_log(struct txn *tx, uint32_t type, uint64_t addr, uint64_t aux, const void *src,
           uint32_t len, struct log_rec **out)
{
    return log_append(&TX_FMT(tx)->log, TX_FMT(tx)->version, type, addr, aux, src, len, out);
}

void tx_log_flush(struct txn *tx)
{
    log_flush(&TX_FMT(tx)->log);
}

void tx_log_set_tail(struct txn *tx)
{
    log_set_tail(&TX_FMT(tx)->log, TX_FMT(tx)->version);
}

size_t tx_log_used(const struct txn *tx)
{
    return TX_FMT(tx)->log.used;
}

int tx_slot_bits(const struct slot_hdr *slot, uint64_t version)
{
    return slot->state >> 2 == version ? (int)(slot->state & 3) : -1;
}

int tx_rec_current(const struct txn *tx, const struct log_rec *r)
{
    return r->sentinel == LOG_SENTINEL && r->version == TX_FMT(tx)->version;
}

void tx_unapply_allocs(struct txn *tx)
{
    for (size_t i = 0; i < TX_FMT(tx)->allocs.n; i++) {
        struct tx_block *b = vec_at(&TX_FMT(tx)->allocs, i);
        alloc_apply(tx->p, (uint64_t)(uintptr_t)b->blk, b->size, ALLOC_CLEAR, 1);
    }
    for (size_t i = 0; i < TX_FMT(tx)->frees.n; i++) {
        struct tx_block *b = vec_at(&TX_FMT(tx)->frees, i);
        alloc_apply(tx->p, (uint64_t)(uintptr_t)b->blk, b->size, ALLOC_SET, 1);
    }
}

void tx_rec_get(const struct log_rec *r, struct tx_rec *out)
{
    *out = (struct tx_rec){r->version, r->type, r->len, r->addr, r->aux, r + 1};
}

int tx_pool_contains(txn_pool *p, const void *a, size_t n)
{
    return pool_contains(p, a, n);
}

uint64_t tx_pool_boot(txn_pool *p)
{
    return POOL_FMT(p)->hdr->boot;
}

size_t tx_block_count(const struct txn *tx)
{
    return TX_FMT(tx)->allocs.n + TX_FMT(tx)->frees.n;
}

void tx_flush_new_blocks(struct txn *tx)
{
    for (size_t i = 0; i < TX_FMT(tx)->allocs.n; i++) {
        struct tx_block *b = vec_at(&TX_FMT(tx)->allocs, i);
        pm_flush(b->blk, b->size);
    }
}

int tx_log_block(struct txn *tx, uint32_t type, const struct tx_block *b)
{
    return log_append(&TX_FMT(tx)->log, TX_FMT(tx)->version, type, (uint64_t)(uintptr_t)b->blk,
                      b->size, NULL, 0, NULL);
}

static int log_blocks(struct txn *tx, const struct vec *v, uint32_t type)
{
    for (size_t i = 0; i < v->n; i++) {
        int rc = tx_log_block(tx, type, vec_at(v, i));
        if (rc)
            return rc;
    }
    return 0;
}

int tx_log_allocs(struct txn *tx)
{
    int rc = log_blocks(tx, &TX_FMT(tx)->allocs, LOG_ALLOC);
    return rc ? rc : log_blocks(tx, &TX_FMT(tx)->frees, LOG_FREE);
}

void tx_redo_alloc_rec(txn_pool *p, const struct log_rec *r)
{
    alloc_apply(p, r->addr, r->aux, r->type == LOG_ALLOC ? ALLOC_SET : ALLOC_CLEAR, 1);
}

void tx_undo_alloc_rec(txn_pool *p, const struct log_rec *r)
{
    alloc_apply(p, r->addr, r->aux, r->type == LOG_ALLOC ? ALLOC_CLEAR : ALLOC_SET, 1);
}

int tx_alloc_rec_valid(txn_pool *p, const struct log_rec *r)
{
    return r->len == 0 && alloc_record_valid(p, r->addr, r->aux);
}

int tx_rec_valid(txn_pool *p, const struct log_rec *r)
{
    switch (r->type) {
    case LOG_DATA:
        return pool_contains(p, (void *)(uintptr_t)r->addr, r->len) ? 0 : TXN_E_CORRUPT;
    case LOG_ALLOC:
    case LOG_FREE:
        return tx_alloc_rec_valid(p, r) ? 0 : TXN_E_CORRUPT;
    default:
        return TXN_E_CORRUPT;
    }
}

__attribute__((constructor)) static void tx_config(void)
{
    txn_cfg.alloc_eager = (int)setting_get(SET_ALLOC_EAGER, 0);
    txn_cfg.log_batch = (int)setting_get(SET_LOG_BATCH, 1);
}

void tx_join_seq(const struct txn *tx, struct join_ref *ref)
{
    /* versions are never reused in a slot (tx_claim_versions), and the
     * slot's index tells slots apart; kept apart, not packed in one word
     * (a version shifted up lost its high bits once a slot had claimed
     * 2^54 versions) */
    ref->seq = TX_FMT(tx)->version;
    ref->ctx = tx->slot_idx;
}

int tx_log_prepare(struct txn *tx, const struct join_ref *ref)
{
    char buf[JOIN_NAMES_MAX];
    size_t n = join_names_put(ref, buf);
    if (!n)
        return TXN_E_INVAL;
    assert(ref->seq == TX_FMT(tx)->version && ref->ctx == tx->slot_idx);
    return log_append(&TX_FMT(tx)->log, TX_FMT(tx)->version, LOG_PREPARE, ref->uuid, ref->ctx,
                      buf, (uint32_t)n, NULL);
}

int tx_prepare_rec_get(const struct log_rec *r, struct join_ref *ref)
{
    if (r->type != LOG_PREPARE || !r->addr || !r->version || r->aux >= TXN_MAX_THREADS)
        return 0;
    *ref = (struct join_ref){r->addr, r->version, (uint32_t)r->aux, NULL, NULL};
    return join_names_get((const char *)(r + 1), r->len, ref);
}

/* ---- the block lists, the allocator and the slots' raw logs, for the
 * engines that keep logs of their own (engine.h) */

const struct tx_block *tx_allocs(const struct txn *tx, size_t *n)
{
    *n = TX_FMT(tx)->allocs.n;
    return (const struct tx_block *)TX_FMT(tx)->allocs.a;
}

const struct tx_block *tx_frees(const struct txn *tx, size_t *n)
{
    *n = TX_FMT(tx)->frees.n;
    return (const struct tx_block *)TX_FMT(tx)->frees.a;
}

size_t tx_pool_slots(txn_pool *p)
{
    return POOL_FMT(p)->hdr->nslots;
}

uint64_t *tx_pool_eng_words(txn_pool *p)
{
    return POOL_FMT(p)->hdr->eng_words;
}

char *tx_pool_heap(txn_pool *p)
{
    return p->base + POOL_FMT(p)->hdr->heap_off;
}

size_t tx_pool_heap_bytes(txn_pool *p)
{
    return pool_heap_chunks(p) * (size_t)CHUNK_SIZE;
}

void tx_recovered_slot(txn_pool *p)
{
    POOL_FMT(p)->recovered_slots++;
}

struct alloc_cache *tx_cache(struct txn *tx)
{
    return &TX_FMT(tx)->cache;
}

struct alloc_cache *tx_cache_new(void)
{
    return calloc(1, sizeof(struct alloc_cache));
}

void tx_cache_free(txn_pool *p, struct alloc_cache *c)
{
    if (c)
        alloc_cache_drain(p, c);
    free(c);
}

void tx_cache_release(txn_pool *p, struct alloc_cache *c, void *blk)
{
    alloc_release(p, c, blk);
}

void tx_cache_drain(txn_pool *p, struct alloc_cache *c)
{
    alloc_cache_drain(p, c);
}

void tx_block_apply(txn_pool *p, uint64_t blk, uint64_t size, int set, int flush)
{
    alloc_apply(p, blk, size, set ? ALLOC_SET : ALLOC_CLEAR, flush);
}

void tx_block_flush_meta(txn_pool *p, uint64_t blk, uint64_t size)
{
    alloc_flush_meta(p, blk, size);
}

void tx_foreach_live(txn_pool *p, void (*fn)(void *blk, size_t size, void *arg), void *arg)
{
    alloc_foreach_live(p, fn, arg);
}

const size_t tx_seg_chunk_cap = CHUNK_SIZE - sizeof(struct seg_hdr);

char *tx_slot_seg(txn_pool *p, size_t idx, size_t *cap)
{
    char *sh = (char *)pool_slot(p, idx) + sizeof(struct slot_hdr);
    *cap = POOL_FMT(p)->hdr->slot_size - sizeof(struct slot_hdr) - sizeof(struct seg_hdr);
    return sh + sizeof(struct seg_hdr);
}

char *tx_seg_next(const char *seg)
{
    const struct seg_hdr *h = (const struct seg_hdr *)seg - 1;
    return h->next ? (char *)(uintptr_t)h->next + sizeof(struct seg_hdr) : NULL;
}

int tx_seg_new(txn_pool *p, char **seg)
{
    void *chunk;
    int rc = alloc_log_chunk(p, &chunk);
    if (!rc)
        *seg = (char *)chunk + sizeof(struct seg_hdr);
    return rc;
}

void tx_seg_link(char *seg, const char *next)
{
    struct seg_hdr *h = (struct seg_hdr *)seg - 1;
    pm_store64(&h->next, (uint64_t)(uintptr_t)(next - sizeof(struct seg_hdr)));
    pm_flush(&h->next, sizeof h->next);
}

struct log *tx_slot_log_new(txn_pool *p, size_t idx)
{
    struct log *l = calloc(1, sizeof *l);
    if (l)
        log_attach(l, p, pool_slot(p, idx));
    return l;
}

void tx_slot_log_free(struct log *l)
{
    free(l);
}

int tx_slot_log_append(struct log *l, uint64_t v, uint32_t type, uint64_t addr, uint64_t aux,
                       const void *src, uint32_t len)
{
    return log_append(l, v, type, addr, aux, src, len, NULL);
}

void tx_slot_log_flush(struct log *l)
{
    log_flush(l);
}

void tx_slot_log_rewind(struct log *l)
{
    log_rewind(l);
}

size_t tx_slot_log_used(const struct log *l)
{
    return l->used;
}

int tx_slot_recs(txn_pool *p, size_t idx, struct vec *recs)
{
    const struct vec *v = POOL_FMT(p)->open_recs ? &POOL_FMT(p)->open_recs[idx] : NULL;
    if (!v)
        return log_scan(p, pool_slot(p, idx), recs);
    return vec_append(recs, v->a, v->n) ? TXN_E_NOMEM : 0;
}
