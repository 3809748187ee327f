/* wlog.h - the write log in DRAM that txn.h's inline paths append to.
 *
 * A transaction's write log is a run of 8-byte words in DRAM whose next
 * free word is struct txn__hot's `wl`: the inline paths append word
 * entries there (TXN__W_SAVE, TXN__W_LOG), the engine appends range
 * entries, and the entries stay in the order of the writes:
 *
 *   word entry   address | 8 bytes            (address < 2^60)
 *   range entry  WL_RANGE | length | address | bytes, padded to 8
 *   block entry  WL_ALLOC or WL_FREE | size | address (an engine's log
 *                records of allocations, in the same format: redo1)
 *
 * none keeps the old bytes of each write there (txn_abort restores them,
 * newest first); redo1 keeps the new ones and copies the entries into its
 * persistent log at commit.
 */
#ifndef PMTX_WLOG_H
#define PMTX_WLOG_H

#include <stddef.h>
#include <stdint.h>

#include "handle.h"
#include "txn.h"

#define WL_RANGE TXN__WL_RANGE
#define WL_ALLOC (1ull << 62)
#define WL_FREE (1ull << 61)
#define WL_LEN_MASK ((1ull << 48) - 1)
#define WL_MAX_RANGE (16u * 1024u) /* longer writes take several entries */

struct wlog {
    uint64_t *a;  /* the first word */
    size_t cap;   /* words */
};

/* One entry, as wlog_next() reads it. */
struct wl_ent {
    uint64_t type; /* 0 (word or range: bytes at addr), WL_ALLOC, WL_FREE */
    char *addr;
    size_t len;    /* bytes, or the block's size */
    const void *bytes;
};

/* The log of context tx, `words` long at first; the inline paths append
 * from its start. 0 or TXN_E_NOMEM. */
int wlog_init(struct txn *tx, struct wlog *l, size_t words);
void wlog_free(struct wlog *l);

/* Empty again (the end of a transaction). */
static inline void wlog_rewind(struct txn *tx, struct wlog *l)
{
    tx->hot.wl = tx->hot.wl0 = l->a;
    tx->hot.wl_end = l->a + l->cap - 1;
}

/* Words in use. */
static inline size_t wlog_used(const struct txn *tx, const struct wlog *l)
{
    return (size_t)(tx->hot.wl - l->a);
}

/* Room for `words` more words (the log grows when needed): 0 or
 * TXN_E_NOMEM. */
int wlog_reserve(struct txn *tx, struct wlog *l, size_t words);

/* Append the entries of a write of n bytes at a (any alignment; several
 * range entries beyond WL_MAX_RANGE), their bytes from src. 0 or
 * TXN_E_NOMEM. */
int wlog_append(struct txn *tx, struct wlog *l, char *a, const void *src, size_t n);

/* The entry at p (a word of the log at an entry's start): fills e and
 * returns the next entry's first word. */
static inline const uint64_t *wlog_next(const uint64_t *p, struct wl_ent *e)
{
    e->type = p[0] & (WL_ALLOC | WL_FREE);
    if (!(p[0] & (WL_RANGE | WL_ALLOC | WL_FREE))) {
        e->addr = (char *)(uintptr_t)p[0];
        e->len = 8;
        e->bytes = &p[1];
        return p + 2;
    }
    e->len = (size_t)(p[0] & WL_LEN_MASK);
    e->addr = (char *)(uintptr_t)p[1];
    e->bytes = &p[2];
    return p + 2 + (e->type ? 0 : (e->len + 7) / 8);
}

/* Words of the entry starting with `head`, or 0 when it cannot be one
 * (a check of a log read back from media: at most `room` words). */
static inline size_t wlog_entry_words(const uint64_t *p, size_t room)
{
    if (room < 2)
        return 0;
    uint64_t tag = p[0] & (WL_RANGE | WL_ALLOC | WL_FREE);
    if (!tag)
        return p[0] >> 60 ? 0 : 2;
    if (tag != WL_RANGE && tag != WL_ALLOC && tag != WL_FREE)
        return 0;
    if (p[0] & ~(tag | WL_LEN_MASK))
        return 0;
    size_t len = (size_t)(p[0] & WL_LEN_MASK);
    size_t words = 2 + (tag == WL_RANGE ? (len + 7) / 8 : 0);
    return words <= room ? words : 0;
}

#endif
