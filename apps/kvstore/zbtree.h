/* zbtree.h - a large sorted set's form (zbtree.c): two B-trees in the
 * key's one value, one by (score, member) with subtree counts, one by
 * member, read and written a node at a time inside the caller's kv_txn.
 * zset.c decides when a set takes this form (docs/kvstore.md, section
 * 27). Calls return 0 or 1 as said, else a negative TXN_E_* code. */
#ifndef KV_ZBTREE_H
#define KV_ZBTREE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* A member and its score; m points into memory the caller owns. */
struct zent {
    double s;
    struct kv_slice m;
};

/* Is the stored sorted set v (n bytes) in the large form? */
int zb_is_big(const char *v, size_t n);

/* Write the sorted set e[0..n) (in (score, member) order, n > 0) to key
 * as a large one (expiry `at`, as kv_txn_write's) in one write. */
int zb_write(kv_txn *t, struct kv_slice key, const struct zent *e, size_t n, uint64_t at);

typedef struct zb zb;
/* Open key's sorted set if it is in the large form: 1 (*out set), 0 when
 * the key is missing or packed, KV_E_WRONGTYPE for another type. */
int zb_open(kv_txn *t, struct kv_slice key, zb **out);
/* Write what changed (rc >= 0), free z; returns rc or the write's error.
 * An emptied set deletes the key. */
int zb_close(zb *z, int rc);

uint64_t zb_card(const zb *z);
/* m's score: 1 found, 0 not a member */
int zb_score(zb *z, struct kv_slice m, double *s);
/* m's score and its rank from the lowest (0 the first): 1, or 0 */
int zb_rank(zb *z, struct kv_slice m, double *s, uint64_t *rank);
/* Add m (not a member) with score s */
int zb_insert(zb *z, double s, struct kv_slice m);
/* Give member m (whose score is old) the score s */
int zb_rescore(zb *z, struct kv_slice m, double old, double s);
/* Remove m: 1 removed (its score to *old), 0 not a member */
int zb_remove(zb *z, struct kv_slice m, double *old);
/* The member of rank r (< zb_card): its score, and its bytes in *m
 * (malloc'd, for the caller to free) */
int zb_at(zb *z, uint64_t r, double *s, char **m, size_t *mn);
/* The members before a bound, which is their rank in the order: those
 * scored below s (at most s, with after); by member (lex, meaningful when
 * the scores are equal, as Redis's) those below m (at most m) */
int zb_rank_of_score(zb *z, double s, int after, uint64_t *rank);
int zb_rank_of_member(zb *z, struct kv_slice m, int after, uint64_t *rank);
/* A walk over the members in order from the one of rank r (< zb_card):
 * zb_walk_get gives the member it is at (as zb_at gives it),
 * zb_walk_step moves it to the next (dir 1) or previous (-1) one: 0, 1
 * past the end, or an error. O(log n) to open, O(1) a step on average.
 * The set must not change while a walk is open. */
typedef struct zb_walk zb_walk;
int zb_walk_open(zb *z, uint64_t r, zb_walk **out);
int zb_walk_get(zb_walk *w, double *s, char **m, size_t *mn);
int zb_walk_step(zb_walk *w, int dir);
void zb_walk_free(zb_walk *w);
/* The whole set as zset.c's packed record (a 4-byte count, then score,
 * length and bytes per member, in order), malloc'd */
int zb_export(zb *z, char **p, size_t *n);
/* Verify both trees: in order, balanced, counts that add up, every node
 * inside the value: 0, or TXN_E_CORRUPT */
int zb_check(zb *z);

#endif
