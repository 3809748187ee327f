/* set.h - sets in the store (set.c): read and changed inside the caller's
 * kv_txn, with no client or reply in sight; the set commands (t_set.c)
 * and the crash simulator's workload call them.
 *
 * The thresholds are arguments (struct set_limits): the commands pass
 * CONFIG's set-max-intset-entries, read once a command, and
 * SET_PACKED_MAX; a test may pass its own.
 *
 * Results: as each call says, or a negative error (TXN_E_*, KV_E_*;
 * KV_E_WRONGTYPE for a key of another type), after which the caller's
 * transaction must roll back. */
#ifndef KV_SET_H
#define KV_SET_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* The encoding Redis would give a packed set (OBJECT ENCODING's answer). */
enum { SET_INTSET = 0, SET_HASHTABLE = 1 };
/* A hashtable set's most members packed: past it, an element table.
 * Redis 7.0 has no parameter for this step (7.2's
 * set-max-listpack-entries is 128). */
#define SET_PACKED_MAX 128

struct set_limits {
    long long intset_max; /* set-max-intset-entries */
    size_t packed_max;    /* SET_PACKED_MAX, or a test's */
};

/* A set read out of the store (or being built): members point into the
 * record read (raw) or into the caller's slices. */
struct set {
    char *raw;
    int enc;
    struct kv_slice *e;
    size_t n, cap;
    txn_obj *d; /* the element table, or NULL: packed (members in e) */
    txn *tx;    /* the transaction d is read and written in */
};

/* Members taken by set_pop, each malloc'd, in the order they were picked. */
struct set_popped {
    struct kv_slice *e;
    size_t n;
};
void set_popped_free(struct set_popped *x);

/* OBJECT ENCODING's answer for a set's stored record v of n bytes:
 * "intset" or "hashtable", as Redis 7.0 would answer for the same set */
const char *set_encoding(const char *v, size_t n);

/* ---- a set whole (the reads, the set operations) */

/* Load key's set: 1 (s filled: a packed set's members in s->e, a table's
 * in the pool), 0 missing (s empty), <0. set_free it after, whatever the
 * result. */
int set_load(kv_txn *t, struct kv_slice key, struct set *s);
void set_free(struct set *s);
/* Room for n members in s->e: 0 or TXN_E_NOMEM. */
int set_room(struct set *s, size_t n);
/* Every member of a table into s->e (a packed set has them already). */
int set_all(struct set *s);
/* The table's members of the buckets from `cursor` on (at least `count`,
 * or to the end: dict_scan) into s->e; *next: dict_scan's. */
int set_collect(struct set *s, uint64_t cursor, uint64_t count, uint64_t *next);
/* Is m a member: 1, 0, <0. */
int set_has(const struct set *s, struct kv_slice m);
/* Its member count: 0 or <0. */
int set_count(const struct set *s, uint64_t *n);
/* A random member of a table (seed: a random number), a malloc'd copy in
 * *m: 1, 0 empty, <0. */
int set_random(const struct set *s, uint64_t seed, struct kv_slice *m);
/* Move n distinct random members of s->e to its front (seed: a random
 * number). */
void set_pick(struct set *s, size_t n, uint64_t seed);
/* A new packed set's encoding, from its first member (setTypeCreate's). */
void set_start(struct set *s, struct kv_slice first);
/* Add m (not in packed s) to s, the encoding changed as Redis's
 * setTypeAdd changes it: 0 or <0. */
int set_insert(struct set *s, struct kv_slice m, const struct set_limits *lim);
/* Write the packed set s (expiry: `at`, KV_KEEPTTL to keep it), or as a
 * new table past lim->packed_max (the conversion, in the caller's
 * transaction), or delete the key if s is empty: 0 or <0. */
int set_store(kv_txn *t, struct kv_slice key, const struct set *s, uint64_t at,
              const struct set_limits *lim);

/* ---- the changes (SADD, SREM, SPOP, SMOVE) */

/* SADD: m[0..k) added, how many were new in *added: 0 or <0. */
int set_add(kv_txn *t, struct kv_slice key, const struct set_limits *lim,
            const struct kv_slice *m, size_t k, uint64_t *added);
/* SREM: m[0..k) removed, how many were there in *removed (the key goes
 * with its last member): 0 or <0. */
int set_rem(kv_txn *t, struct kv_slice key, const struct set_limits *lim,
            const struct kv_slice *m, size_t k, uint64_t *removed);
/* SPOP: one random member (many == 0), or up to count of them, into *x
 * (set_popped_free it after, whatever the result); seed: a random number.
 * As Redis 7.0's spopWithCountCommand: when what remains is at most a
 * fifth of what goes, the rest is made a new set (packed again when it is
 * small enough: the conversion back), else the members go one by one.
 * 1 found, 0 missing, <0. */
int set_pop(kv_txn *t, struct kv_slice key, const struct set_limits *lim, int many,
            uint64_t count, uint64_t seed, struct set_popped *x);
/* SMOVE: m from src to dst: 1 moved (or src == dst and m in it), 0 src
 * missing or m not in it, <0 (KV_E_WRONGTYPE for src, and for dst when
 * src is there, as Redis checks them). */
int set_move(kv_txn *t, struct kv_slice src, struct kv_slice dst, const struct set_limits *lim,
             struct kv_slice m);

#endif
