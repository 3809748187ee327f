/* t_dict.h - a persistent table of elements (field and value; a set's
 * member is a field with no value) for the hashes and sets past their
 * packed size (hash.c, set.c): every call works inside the caller's
 * transaction tx and costs O(1) pool writes, whatever the table's size
 * (t_dict.c says how). The store (store.c) frees and walks a table a key
 * holds; the commands reach it through kv_txn_dict (store.h).
 *
 * Results: 1 / 0 as each call says, or a negative TXN_E_* code (the
 * transaction must then roll back). */
#ifndef KV_T_DICT_H
#define KV_T_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "txn.h"

/* Bytes of pool objects this thread's table calls allocated, less those
 * they freed, since the last call of it: how the store counts the tables'
 * objects in the keys' bytes (kv_info), per element added or removed,
 * without walking a table. Every call on a table runs on the thread of its
 * transaction, between the store's begin and end of it. */
int64_t dict_bytes_taken(void);

/* Called with an element: copy it, do not keep it. */
typedef void (*dict_elem_fn)(void *arg, const char *f, size_t fn, const char *v, size_t vn);

/* A new, empty table in *out. */
int dict_new(txn *tx, txn_obj **out);
/* Its element count. */
int dict_count(txn *tx, txn_obj *d, uint64_t *n);
/* Element f to fn (fn may be NULL): 1 found, 0 missing. */
int dict_get(txn *tx, txn_obj *d, const char *f, size_t fn, dict_elem_fn cb, void *arg);
/* Set f to v: 1 added, 0 replaced (nx: 0 and left alone when present). */
int dict_set(txn *tx, txn_obj *d, const char *f, size_t fn, const char *v, size_t vn, int nx);
/* Remove f: 1 removed, 0 missing. */
int dict_del(txn *tx, txn_obj *d, const char *f, size_t fn);
/* The elements of the buckets from `cursor` on to fn, until at least
 * `count` were given or the table ends; *next is where to go on (0: the
 * end). Every element present during a whole scan is given at least
 * once (a split only moves elements to buckets above the one split). */
int dict_scan(txn *tx, txn_obj *d, uint64_t cursor, uint64_t count, dict_elem_fn cb, void *arg,
              uint64_t *next);
/* A random element (r: a random number) to fn: 1, or 0 if empty. */
int dict_random(txn *tx, txn_obj *d, uint64_t r, dict_elem_fn cb, void *arg);
/* A copy of d in *out (COPY). */
int dict_copy(txn *tx, txn_obj *d, txn_obj **out);
/* Free the table and its elements. */
int dict_free(txn *tx, txn_obj *d);
/* Free at most `budget` elements, from bucket *cursor on (a hint kept
 * between calls: any value is safe), the count kept exact, so that each
 * call is a transaction of bounded size and the table stays whole between
 * calls (lazy free, store.c); *freed counts them. 1 the table is gone
 * (its last elements, segments and header freed), 0 elements remain. */
int dict_free_some(txn *tx, txn_obj *d, uint64_t *cursor, uint64_t budget, uint64_t *freed);
/* fn on every object of the table (its header first), each checked to be
 * an object of its size, and the element count checked: TXN_E_CORRUPT
 * when it is not so; else 0 or fn's first nonzero return. For the
 * store's kv_check and kv_objects. */
int dict_objects(txn *tx, txn_obj *d, int (*fn)(txn_obj *o, void *arg), void *arg);

#endif
