/* none.c - the zero line: the same API with no persistence at all.
 *
 * Writes store in place; the old bytes are kept in DRAM only so that
 * txn_abort() can restore them. Nothing is logged to the pool, flushed or
 * fenced, and nothing survives a crash intact (a clean close does keep the
 * data, since the pool file is still a shared mapping).
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "persist.h"

const char eng_name[] = PMTX_ENGINE_NAME;
const int eng_persistent = 0;

struct saved {
    char *a;
    size_t n;
    size_t at; /* offset of the old bytes in `bytes` */
};

struct none_tx {
    struct vec saved; /* struct saved */
    struct vec bytes; /* char */
};

size_t eng_obj_size(txn_pool *p, const txn_obj *o)
{
    return tx_block_payload(p, o, 0);
}

int eng_tx_init(struct txn *tx)
{
    struct none_tx *t = calloc(1, sizeof *t);
    if (!t)
        return TXN_E_NOMEM;
    vec_init(&t->saved, sizeof(struct saved));
    vec_init(&t->bytes, 1);
    tx->eng = t;
    return 0;
}

void eng_tx_fini(struct txn *tx)
{
    struct none_tx *t = tx->eng;
    vec_free(&t->saved);
    vec_free(&t->bytes);
    free(t);
    tx->eng = NULL;
}

int eng_begin(struct txn *tx)
{
    struct none_tx *t = tx->eng;
    t->saved.n = t->bytes.n = 0;
    return 0;
}

void *eng_open(struct txn *tx, txn_obj *o, int mode)
{
    (void)tx;
    (void)mode;
    return o;
}

static int save(struct none_tx *t, char *a, size_t n)
{
    if (vec_reserve(&t->bytes, n))
        return TXN_E_NOMEM;
    struct saved *s = vec_push(&t->saved);
    if (!s)
        return TXN_E_NOMEM;
    *s = (struct saved){a, n, t->bytes.n};
    memcpy(t->bytes.a + t->bytes.n, a, n);
    t->bytes.n += n;
    return 0;
}

int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    char *a = (char *)o + off;
    if (!tx_is_new(tx, o)) {
        int rc = save(tx->eng, a, n);
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

int eng_commit(struct txn *tx)
{
    tx_apply_allocs(tx, 0);
    return 0;
}

void eng_abort(struct txn *tx)
{
    struct none_tx *t = tx->eng;
    for (size_t i = t->saved.n; i-- > 0;) {
        struct saved *s = vec_at(&t->saved, i);
        pm_memcpy(s->a, t->bytes.a + s->at, s->n);
    }
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
