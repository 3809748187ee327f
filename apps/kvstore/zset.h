/* zset.h - sorted sets in the store (zset.c): read and changed inside
 * the caller's kv_txn, with no client or reply in sight; the sorted set
 * commands (t_zset.c) and the crash simulator's workload call them.
 *
 * A set is packed (one record a key: a 4-byte member count, then per
 * member its score, the 8 bytes of an IEEE double, a 4-byte length and
 * its bytes, little endian, in (score, member) order) or, past the
 * thresholds of struct zset_max, in its large form (zbtree.h), which it
 * keeps until the key is deleted or written over whole (zset_replace).
 *
 * Results: as each call says, or a negative error (TXN_E_*, KV_E_*;
 * KV_E_WRONGTYPE for a key of another type), after which the caller's
 * transaction must roll back. */
#ifndef KV_ZSET_H
#define KV_ZSET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zbtree.h"

/* zset-max-listpack-entries and zset-max-listpack-value, as the caller
 * read them once a call: past either a set is written in the large form. */
struct zset_max {
    long long entries, value;
};

/* A sorted set read out whole: its members point into `raw` or, once
 * changed, into memory of the caller's. */
struct zset {
    char *raw;
    size_t rawn; /* the packed record (the large form: exported as one) */
    struct zent *e;
    size_t n, cap;
    int big; /* read from the large form, so written back in it */
};

/* Load key's sorted set: 1 (z filled), 0 missing (z empty), <0. */
int zset_load(kv_txn *t, struct kv_slice key, struct zset *z);
void zset_free(struct zset *z);
/* Write the set back (expiry `at`: KV_KEEPTTL keeps the key's), or delete
 * the key if it is empty: in the large form if it was read in it or
 * passes max. 0, or <0. */
int zset_store(kv_txn *t, struct kv_slice key, const struct zset *z, uint64_t at,
               struct zset_max max);
/* Write e[0..n) (any order, sorted here) over key as a new set, no
 * expiry, packed unless it passes max; the key deleted when n is 0: as
 * ZRANGESTORE and ZUNIONSTORE write their destination. 0, or <0. */
int zset_replace(kv_txn *t, struct kv_slice key, struct zent *e, size_t n, struct zset_max max);
/* member m's index in z, or -1 */
ssize_t zset_find(const struct zset *z, struct kv_slice m);
/* members compared as bytes; entries in the set's order (for qsort) */
int zset_mcmp(struct kv_slice a, struct kv_slice b);
int zset_cmp(const void *a, const void *b);

/* ---- ZADD and ZINCRBY */

#define Z_NX 1
#define Z_XX 2
#define Z_GT 4
#define Z_LT 8
#define Z_CH 16 /* the reply's only */
#define Z_INCR 32

/* What a ZADD did: members added, changed, processed (changed or not);
 * nan: it stopped at a score that would be NaN; score: the last
 * processed member's score after. */
struct zset_added {
    long long added, changed, processed;
    int nan;
    double score;
};

/* ZADD key's members e[0..k) (their scores: the increments with Z_INCR)
 * under flags fl (Z_*; the caller has refused their bad mixes), member by
 * member as Redis's zsetAdd: 0 (*o filled; with Z_XX a missing key stays
 * missing), or <0. */
int zset_add(kv_txn *t, struct kv_slice key, struct zset_max max, int fl, const struct zent *e,
             size_t k, struct zset_added *o);

/* ---- removals */

/* ZREM: members m[0..k) taken out, their number in *removed; the key
 * goes with its last member. 0, or <0. */
int zset_rem(kv_txn *t, struct kv_slice key, struct zset_max max, const struct kv_slice *m,
             size_t k, uint64_t *removed);

/* Members a pop took, in the order they left, each member malloc'd. */
struct zset_popped {
    struct zent *e;
    size_t n;
};
void zset_popped_free(struct zset_popped *x);
/* ZPOPMIN (top: ZPOPMAX): up to count members (-1: all) off key into *x
 * (zset_popped_free it after, whatever the result): 1 the key was there
 * (count 0: nothing taken), 0 missing, <0. */
int zset_pop(kv_txn *t, struct kv_slice key, struct zset_max max, int top, long long count,
             struct zset_popped *x);

/* ---- ranges of scores or of members */

enum { LEX_MINUS = -1, LEX_STR = 0, LEX_PLUS = 1 };

struct zset_range {
    int lex;
    double min, max;            /* by score */
    int lmin, lmax;             /* by member: LEX_* */
    struct kv_slice smin, smax; /* ... and the strings of LEX_STR */
    int minex, maxex;
};

/* Is x at or past r's min bound, at or before its max? */
int zset_gte_min(const struct zset_range *r, const struct zent *x);
int zset_lte_max(const struct zset_range *r, const struct zent *x);
/* The first member in r, as Redis's zzlFirstInRange and
 * zzlFirstInLexRange find it, and the last (as zzlLastIn*): its index, or
 * -1 */
ssize_t zset_first_in(const struct zset *z, const struct zset_range *r);
ssize_t zset_last_in(const struct zset *z, const struct zset_range *r);
/* The run of members in r from the first one on: [*from, *to) */
void zset_run_in(const struct zset *z, const struct zset_range *r, size_t *from, size_t *to);
/* The ranks [*from, *to) of r's members in the large set b: 0, or <0 */
int zset_big_span(zb *b, const struct zset_range *r, uint64_t *from, uint64_t *to);

/* The members picked by a range */
struct zset_pick {
    struct zent *e;
    size_t n;
    int owned; /* each member malloc'd (picked from a large set) */
};
void zset_pick_free(struct zset_pick *p);
/* count members of b from rank `first` on, up (dir 1) or down (-1) */
int zset_big_pick(zb *b, uint64_t first, size_t count, int dir, struct zset_pick *p);

/* ZREMRANGEBYRANK (by_rank: [start, end] as pack_span reads them),
 * ZREMRANGEBYSCORE and ZREMRANGEBYLEX (r): the members removed, their
 * number in *removed. 0, or <0. */
int zset_remrange(kv_txn *t, struct kv_slice key, struct zset_max max, int by_rank,
                  long long start, long long end, const struct zset_range *r,
                  uint64_t *removed);

#endif
