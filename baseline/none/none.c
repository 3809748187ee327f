/* none.c - the zero line: the same API with no persistence at all.
 *
 * Writes store in place; the old bytes go to the DRAM write log (wlog.h)
 * only so that txn_abort() can restore them: txn.h's inline paths append
 * a word's old bytes there and store (TXN__W_SAVE), and writes to blocks
 * the transaction allocated store directly. Nothing is logged to the pool,
 * flushed or fenced, and nothing survives a crash intact (a clean close
 * does keep the data, since the pool file is still a shared mapping).
 */
#include <stdlib.h>

#include "engine.h"
#include "persist.h"
#include "wlog.h"

const char eng_name[] = PMTX_ENGINE_NAME;
const int eng_inlines = 1;
const int eng_persistent = 0;
const int eng_quick = ENG_QUICK_ALL; /* begin: nothing; commit: eng_commit's rewind */

#define FIRST_LOG_WORDS 4096u

struct none_tx {
    struct wlog wl;  /* old bytes, in the order of the writes */
    struct vec undo; /* const uint64_t *: entries, for abort to walk back */
};

size_t eng_obj_size(txn_pool *p, const txn_obj *o)
{
    return tx_block_payload(p, o, 0);
}

int eng_tx_init(struct txn *tx)
{
    struct none_tx *t = calloc(1, sizeof *t);
    if (!t || wlog_init(tx, &t->wl, FIRST_LOG_WORDS)) {
        free(t);
        return TXN_E_NOMEM;
    }
    vec_init(&t->undo, sizeof(const uint64_t *));
    tx->eng = t;
    return 0;
}

void eng_tx_fini(struct txn *tx)
{
    struct none_tx *t = tx->eng;
    wlog_free(&t->wl);
    vec_free(&t->undo);
    free(t);
    tx->eng = NULL;
}

int eng_inline(struct txn *tx, txn_obj *o, struct txn__way *w)
{
    int mine = tx_is_new(tx, o);
    w->base = (char *)o;
    w->wmode = mine ? TXN__W_DIRECT : TXN__W_SAVE;
    return mine ? ENG_WAY_DROP : TXN__W_SAVE;
}

int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    struct none_tx *t = tx->eng;
    char *a = (char *)o + off;
    if (!tx_is_new(tx, o)) {
        size_t used = wlog_used(tx, &t->wl);
        int rc = wlog_append(tx, &t->wl, a, a, n);
        /* stored_count() takes 4 a word of the log: not for this entry */
        tx->hot.stored -= 4 * (wlog_used(tx, &t->wl) - used);
        if (rc)
            return rc;
    }
    pm_memcpy(a, src, n);
    return 0;
}

int eng_alloc(struct txn *tx, size_t n, txn_obj **out)
{
    struct tx_block b;
    int rc = tx_reserve(tx, n, &b);
    if (!rc)
        *out = b.blk;
    return rc;
}

int eng_free(struct txn *tx, txn_obj *o)
{
    return tx_mark_free(tx, o, NULL);
}

/* The bytes the inline path stored: a word write's two words of log are
 * its 8 bytes (txn.h, stored); to do before each rewind. */
static void stored_count(struct txn *tx, const struct none_tx *t)
{
    tx->hot.stored += 4 * wlog_used(tx, &t->wl);
}

int eng_commit(struct txn *tx)
{
    struct none_tx *t = tx->eng;
    stored_count(tx, t);
    wlog_rewind(tx, &t->wl); /* first: nothing of t is live across the call */
    tx_apply_allocs(tx, 0);
    return 0;
}

static void restore(const uint64_t *p)
{
    struct wl_ent e;
    wlog_next(p, &e);
    pm_memcpy(e.addr, e.bytes, e.len);
}

/* The old bytes back, newest first (entries differ in length: their
 * starts are listed first; out of memory, each is found again from the
 * log's start). */
void eng_abort(struct txn *tx)
{
    struct none_tx *t = tx->eng;
    const uint64_t *p, *end = tx->hot.wl;
    struct wl_ent e;
    size_t n = 0;
    for (p = t->wl.a; p < end; p = wlog_next(p, &e))
        n++;
    t->undo.n = 0;
    if (!vec_reserve(&t->undo, n)) {
        for (p = t->wl.a; p < end; p = wlog_next(p, &e))
            *(const uint64_t **)vec_push(&t->undo) = p;
        for (size_t i = n; i-- > 0;)
            restore(*(const uint64_t **)vec_at(&t->undo, i));
    } else {
        for (size_t i = n; i-- > 0;) {
            p = t->wl.a;
            for (size_t k = 0; k < i; k++)
                p = wlog_next(p, &e);
            restore(p);
        }
    }
    stored_count(tx, t);
    wlog_rewind(tx, &t->wl);
}

int eng_rec_valid(txn_pool *p, const struct log_rec *r)
{
    (void)p;
    (void)r;
    return TXN_E_CORRUPT; /* this engine never writes a log */
}

int eng_recover(txn_pool *p, struct slot_hdr *slot, struct log_rec **recs, size_t n)
{
    (void)p;
    (void)slot;
    (void)recs;
    (void)n;
    return 0;
}
