/* leaf.h - a small persistent leaf node on the InCLL primitives (incll.h),
 * laid out as the durable Masstree leaf of the paper's Figure 1: 14 key
 * slots, the permutation InCLL in the first line (with the engine's tag),
 * and one value InCLL in each of the two lines that hold the values.
 * perm is a bitmap of the slots in use. Operations: the paper's insert,
 * remove and update, plus lookup. The caller runs them inside its
 * transaction and holds the node (one writer per node). */
#ifndef PMTX_TEST_LEAF_H
#define PMTX_TEST_LEAF_H

#include <stdint.h>

#include "incll.h"

#define LEAF_WIDTH 14

/* Block lines (the payload starts INCLL_OBJ_HDR bytes into line 0):
 *   0: tag | p (perm InCLL) | keys[0..3]
 *   1-2: keys[4..13] | pad
 *   3: incll1 | vals[0..6]
 *   4: vals[7..13] | incll2 */
struct leaf {
    incll_perm p;              /* which slots are in use, and its InCLL */
    uint64_t keys[LEAF_WIDTH]; /* key of each slot */
    uint64_t pad[6];           /* to put incll1 at the start of line 3 */
    incll_val incll1;          /* saves one of vals[0..6] per epoch */
    uint64_t vals[LEAF_WIDTH]; /* value of each slot */
    incll_val incll2;          /* saves one of vals[7..13] per epoch */
};
_Static_assert(INCLL_IN_ONE_LINE(struct leaf, p), "perm InCLL in one line");
_Static_assert(INCLL_LINE_OF(struct leaf, p) == 0, "perm InCLL in the tag's line");
_Static_assert(INCLL_SAME_LINE(struct leaf, incll1, vals[0]) &&
                   INCLL_SAME_LINE(struct leaf, incll1, vals[6]),
               "incll1 shares the line of vals[0..6]");
_Static_assert(INCLL_SAME_LINE(struct leaf, incll2, vals[7]) &&
                   INCLL_SAME_LINE(struct leaf, incll2, vals[13]),
               "incll2 shares the line of vals[7..13]");
_Static_assert(INCLL_LINE_OF(struct leaf, incll1) != INCLL_LINE_OF(struct leaf, incll2),
               "one value InCLL per line");
_Static_assert(INCLL_NODE_ALLOC(sizeof(struct leaf)) == 5 * 64 - INCLL_OBJ_HDR,
               "a leaf is five lines");

extern const incll_layout leaf_layout;

/* A new empty leaf, allocated in tx. */
int tleaf_new(txn *tx, txn_obj **out);

/* The leaf, recovered if this is its first access since a restart. */
int tleaf_open(txn *tx, txn_obj *o, struct leaf **out);

/* Slot of `key`, or -1. */
int tleaf_find(const struct leaf *n, uint64_t key);

/* Insert a new key: TXN_E_INVAL if it is there, TXN_E_NOSPACE when the
 * leaf is full. */
int tleaf_insert(txn *tx, txn_obj *o, uint64_t key, uint64_t val);

/* Remove `key` (TXN_E_INVAL if absent). */
int tleaf_remove(txn *tx, txn_obj *o, uint64_t key);

/* Set the value of `key` (TXN_E_INVAL if absent). */
int tleaf_update(txn *tx, txn_obj *o, uint64_t key, uint64_t val);

#endif
