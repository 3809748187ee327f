/* hash.h - hashes in the store (hash.c): read and changed inside the
 * caller's kv_txn, with no client or reply in sight; the hash commands
 * (t_hash.c) and the crash simulator's workload call them.
 *
 * The thresholds are arguments (struct hash_limits): the commands pass
 * CONFIG's hash-max-listpack-entries and -value, read once a command; a
 * test may pass its own.
 *
 * Results: as each call says, or a negative error (TXN_E_*, KV_E_*;
 * KV_E_WRONGTYPE for a key of another type), after which the caller's
 * transaction must roll back. */
#ifndef KV_HASH_H
#define KV_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct hash_limits {
    long long entries; /* hash-max-listpack-entries */
    long long value;   /* hash-max-listpack-value */
};

struct hash_field {
    struct kv_slice f, v;
};

/* A hash read out of the store: its fields point into `raw` or, once
 * changed, into the caller's slices. A table's (d) fields stay in the
 * pool; only the calls that give every field read them out (hash_all). */
struct hash {
    char *raw;
    struct hash_field *e;
    size_t n, cap;
    txn_obj *d; /* the element table, or NULL: packed */
    txn *tx;    /* the transaction d is read and written in */
};

/* ---- a hash whole (the reads) */

/* Load key's hash: 1 (h filled), 0 missing (h empty), <0. hash_free it
 * after, whatever the result. */
int hash_load(kv_txn *t, struct kv_slice key, struct hash *h);
void hash_free(struct hash *h);
/* Every field of a table into h->e (a packed hash has them already). */
int hash_all(struct hash *h);
/* The table's fields of the buckets from `cursor` on (at least `count`,
 * or to the end: dict_scan) into h->e; *next: dict_scan's. */
int hash_collect(struct hash *h, uint64_t cursor, uint64_t count, uint64_t *next);
/* Its field count: 0 or <0. */
int hash_count(const struct hash *h, uint64_t *n);
/* Field f's value in *v: 1 found, 0 missing, <0. A table's is a malloc'd
 * copy (*copy: free it after; NULL for a packed hash's). */
int hash_get(const struct hash *h, struct kv_slice f, struct kv_slice *v, char **copy);
/* A random field of a table (seed: a random number) in *f, a malloc'd
 * copy: 1, 0 empty, <0. */
int hash_random(const struct hash *h, uint64_t seed, struct kv_slice *f);

/* ---- the changes (HSET, HSETNX, HDEL, HINCRBY, HINCRBYFLOAT) */

/* HSET (nx: HSETNX, a field present left alone): fv[0..2k) as field,
 * value pairs; how many fields were new in *added. A packed hash past the
 * limits becomes an element table (the conversion, in the caller's
 * transaction). 0 or <0. */
int hash_set_fields(kv_txn *t, struct kv_slice key, const struct hash_limits *lim,
                    const struct kv_slice *fv, size_t k, int nx, uint64_t *added);
/* HDEL: f[0..k) removed, how many were there in *removed (the key goes
 * with its last field): 0 or <0. */
int hash_del_fields(kv_txn *t, struct kv_slice key, const struct hash_limits *lim,
                    const struct kv_slice *f, size_t k, uint64_t *removed);
/* Field f's new value from fn(arg, its value or NULL when missing, *to):
 * fn returns 0 (*to is written; its bytes are fn's) or a positive code
 * (nothing written), which hash_update returns; else <0. */
typedef int (*hash_update_fn)(void *arg, const struct kv_slice *from, struct kv_slice *to);
int hash_update(kv_txn *t, struct kv_slice key, const struct hash_limits *lim, struct kv_slice f,
                hash_update_fn fn, void *arg);
/* HINCRBY: field f (0 when missing) plus by, the sum in *now: 0,
 * HASH_NOT_INT (the field is not an integer), HASH_OVERFLOW, or <0. */
enum { HASH_NOT_INT = 1, HASH_OVERFLOW = 2 };
int hash_incr(kv_txn *t, struct kv_slice key, const struct hash_limits *lim, struct kv_slice f,
              long long by, long long *now);

#endif
