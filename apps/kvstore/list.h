/* list.h - lists in the store (list.c): read and changed inside the
 * caller's kv_txn, with no client or reply in sight; the list commands
 * (t_list.c) and the crash simulator's workload call them.
 *
 * `max` is list-max-listpack-size as Redis reads it for a quicklist node:
 * -1 to -5 (and below) 4, 8, 16, 32, 64 KB of packed record; a positive N,
 * at most N elements within 8 KB. Past it a list is big; a big one is
 * packed again at half of it. The caller reads its setting once a call.
 *
 * Results: as each call says, or a negative error (TXN_E_*, KV_E_*;
 * KV_E_WRONGTYPE for a key of another type), after which the caller's
 * transaction must roll back. */
#ifndef KV_LIST_H
#define KV_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* A list read out whole: its elements point into `raw` or into the
 * caller's slices (list_insert_at). */
struct list {
    char *raw;
    size_t rawn;
    struct kv_slice *e;
    size_t n, cap;
    int big; /* read from a big list */
};

/* A list opened by list_probe: its value's handle, what it is (0
 * missing, 1 packed, 2 big, -1 written again since: probe it again), the
 * bytes of its value and a big list's header. */
struct list_handle {
    kv_val *v;
    int kind;
    int defer, dirty; /* a rotation (list_move): a pop leaves its header's
                         write to the push that follows (dirty: owed) */
    long long max;    /* list-max-listpack-size, as the probe got it */
    uint64_t count, head, end, size;
};

/* Elements a pop took: each malloc'd, in the order they left. */
struct list_popped {
    struct kv_slice *e;
    size_t n;
};
void list_popped_free(struct list_popped *x);

/* ---- a list whole: the commands that change the middle (LSET, LINSERT,
 * LREM, LTRIM), as Redis's are O(n) too */

/* Load key's list: 1 (l filled), 0 missing (l empty), <0. */
int list_load(kv_txn *t, struct kv_slice key, struct list *l);
void list_free(struct list *l);
/* Put v before position i (0: the head, l->n: the tail); take n elements
 * away from position i. */
int list_insert_at(struct list *l, size_t i, struct kv_slice v);
void list_remove_at(struct list *l, size_t i, size_t n);
/* Write the list back (its expiry kept), packed or big by its size, or
 * delete the key if it is empty: 0 or <0. */
int list_store(kv_txn *t, struct kv_slice key, const struct list *l, long long max);

/* An index as LINDEX and LSET read it, from the tail if negative: the
 * position, or -1 outside a list of n elements. */
long long list_position(long long index, size_t n);
/* Redis's (start, end) of LRANGE and LTRIM on a list of n elements: the
 * first and last index kept, or *first > *last for none. */
void list_clamp(long long start, long long end, size_t n, long long *first, long long *last);
/* LSET: element `index` (list_position's) becomes v: 1, 0 key missing,
 * 2 index out of range. */
int list_set(kv_txn *t, struct kv_slice key, long long max, long long index, struct kv_slice v);
/* LINSERT: v before (after: after) the first element equal to pivot, the
 * new length in *len: 1, 0 key missing, 2 no such pivot. */
int list_insert(kv_txn *t, struct kv_slice key, long long max, int after, struct kv_slice pivot,
                struct kv_slice v, uint64_t *len);
/* LREM: the elements equal to v taken out, at most count from the head
 * (count > 0) or -count from the tail (count < 0), or all (0); their
 * number in *removed: 1, or 0 key missing. */
int list_rem(kv_txn *t, struct kv_slice key, long long max, long long count, struct kv_slice v,
             uint64_t *removed);
/* LTRIM: only elements [start, end] (list_clamp's) kept, the key gone
 * when none is: 1, or 0 key missing. */
int list_trim(kv_txn *t, struct kv_slice key, long long max, long long start, long long end);

/* ---- a list opened once a command: its ends and ranges read and written
 * in place */

/* Open key's list into *b (list_close it after): its kind, 0 nothing, 1
 * a packed list, 2 a big one (its header read, b->count its length), or
 * <0 (nothing open). */
int list_probe(kv_txn *t, struct kv_slice key, long long max, struct list_handle *b);
void list_close(struct list_handle *b);
/* The list list_probe opened (packed or big) into l, whole: 1, or <0. */
int list_read(struct list_handle *b, struct list *l);
/* Elements [first, last] of a big list (first <= last < b->count), each
 * to fn(arg, bytes, length) in order: 0 or <0. */
int list_range(struct list_handle *b, uint64_t first, uint64_t last,
               void (*fn)(void *arg, const char *p, size_t n), void *arg);

/* ---- pushes, pops and moves at the ends (LPUSH ... BLMPOP) */

/* Push e[0..k) at an end of key's list (at the head each in turn, so the
 * last ends first, as LPUSH; only_existing: not onto a missing key); its
 * new length in *len. 1 pushed, 0 not (only_existing), <0. */
int list_push(kv_txn *t, struct kv_slice key, long long max, int tail, const struct kv_slice *e,
              size_t k, int only_existing, uint64_t *len);
/* Take up to count elements off an end of key's list into *x
 * (list_popped_free it after, whatever the result): 1 found, 0 missing,
 * <0. The key goes with its last element. */
int list_pop(kv_txn *t, struct kv_slice key, long long max, int tail, uint64_t count,
             struct list_popped *x);
/* Move one element from src's `from` end to dst's `to` end (0 the head,
 * 1 the tail; the same key: a rotation), LMOVE's: 1 moved (the element
 * malloc'd in *e), 0 src missing, <0. dst's type is checked before
 * anything is taken, as Redis does. */
int list_move(kv_txn *t, struct kv_slice src, struct kv_slice dst, long long max, int from,
              int to, struct kv_slice *e);

#endif
