/* elems.h - what sets (set.c) and hashes (hash.c) share: a key's value
 * loaded as an element table (t_dict.h) or a packed record, and a
 * table's elements read out, picked and removed, inside the caller's
 * kv_txn. A set's member is an element with an empty value. */
#ifndef KV_ELEMS_H
#define KV_ELEMS_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "t_pack.h"

/* key's value, which must be of `type`: 2 an element table (*d, and *tx
 * the transaction it is read and written in), 1 a packed record (*raw:
 * free raw->p, whatever the result), 0 missing, <0 (KV_E_WRONGTYPE for
 * another type). */
int elems_load(kv_txn *t, struct kv_slice key, unsigned type, txn_obj **d, txn **tx,
               struct pack_val *raw);

/* A table's elements copied out: per element its two lengths, the field
 * and the value, one after another (free p). */
struct elems_bag {
    char *p;
    size_t n, cap, count;
    int oom;
};
/* The elements of the buckets from `cursor` on (at least `count`, or to
 * the end: dict_scan) into *b, which starts empty; *next: dict_scan's. 0
 * or <0. */
int elems_scan(txn *tx, txn_obj *d, uint64_t cursor, uint64_t count, struct elems_bag *b,
               uint64_t *next);
/* The element at *off of b into *f and *v (pointing into b), *off moved
 * past it: 1, or 0 at the end. */
int elems_next(const struct elems_bag *b, size_t *off, struct kv_slice *f, struct kv_slice *v);
/* A random element's field (seed: a random number), a malloc'd copy in
 * *f: 1, 0 the table is empty, <0. */
int elems_random(txn *tx, txn_obj *d, uint64_t seed, struct kv_slice *f);
/* f[0..k) removed from the table key holds, how many were there in
 * *removed; the key goes with its last element: 0 or <0. */
int elems_del(kv_txn *t, struct kv_slice key, txn *tx, txn_obj *d, const struct kv_slice *f,
              size_t k, uint64_t *removed);

#endif
