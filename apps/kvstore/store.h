/* store.h - the persistent key-value store: a concurrent hash table with
 * chaining, in a pool, reached only through txn.h (see store.c for the
 * layout and its invariants).
 *
 * Every call is thread-safe and runs its own transaction(s). A call that
 * changes the store returns 0 only once its transaction committed, that is
 * (txn.h, Durability) once it is durable for undo, redo, cow and pmdk;
 * incll needs a txn_sync(kv_pool(s)) before the change may be acknowledged.
 * Errors are negative TXN_E_* codes (txn_strerror) or the KV_E_* below; a
 * failed call changed nothing. */
#ifndef KV_STORE_H
#define KV_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "txn.h"


typedef struct kv_store kv_store;

struct kv_slice {
    const char *p;
    size_t n;
};

struct kv_opts {
    size_t pool_size;     /* the most a new pool grows to */
    size_t pool_start;    /* what a new pool starts with (0: 4 MiB, or the
                             least its threads' logs need; at most
                             pool_size) */
    unsigned threads;     /* log slots for a new pool */
    unsigned resize_step; /* old buckets each write moves during a resize,
                             besides its own key's (0: 8) */
    int no_create;        /* a missing pool file is TXN_E_NOENT */
    int view;             /* open a private view (txn_pool_view): nothing
                             this process does reaches the file */
    int no_refs;          /* lookups leave the slices' marks alone
                             (kv_evict's recency, kv_txn_idle's clock):
                             saves a cache miss a key (kv_evict still
                             works, without recency) */
    /* when not NULL, ends each transaction the store commits instead of
     * txn_commit, and must end it as txn_commit does (reads' too): how the
     * crash simulator (tests/crashsim/wl_kv.c) announces what a commit
     * makes of the store */
    int (*commit)(txn *tx, void *arg);
    void *commit_arg;
    /* when not NULL, told (with commit_arg) each key kv_evict deletes,
     * inside that key's transaction, before its commit: how the crash
     * simulator's mirror learns exactly which keys an eviction took */
    void (*evicted)(const char *k, size_t n, void *arg);
};

/* Open the store in the pool file `path`, creating pool and store if the
 * file does not exist (unless no_create); opening recovers the pool. */
int kv_open(const char *path, const struct kv_opts *o, kv_store **out);

/* ---- a store in a pool its program opened itself (the crash simulator,
 * whose pool holds other objects too; kv_open is this on txn_root). */

#define KV_ROOT_SIZE 48 /* bytes the store's root object needs at least */

/* Open the store whose root is `root`, an object of the open pool p of
 * at least KV_ROOT_SIZE bytes: all zero, it gets a new, empty store (in
 * one transaction). Of `o`, only resize_step, view, no_refs, commit and
 * evicted are read. kv_close leaves p open; kv_info's pool sizes are p's. Errors as
 * kv_open's after the pool opened: TXN_E_CORRUPT, TXN_E_LAYOUTVER
 * (kv_strerror). */
int kv_adopt(txn_pool *p, txn_obj *root, const struct kv_opts *o, kv_store **out);

/* What to print for an error of kv_open or kv_adopt: the pool's refusal
 * (txn_pool_strerror) or what the store found damaged in it. */
const char *kv_strerror(int rc);

/* Close the store, and its pool if kv_open opened it: no call may be
 * running. */
void kv_close(kv_store *s);

txn_pool *kv_pool(kv_store *s);

/* Verify the whole table: chains well-formed, every key in its bucket and
 * unique, counts and resize state consistent. Problems go to `out`.
 * Returns 0 if the store is sound, else TXN_E_CORRUPT. Single-threaded. */
int kv_check(kv_store *s, FILE *out);

/* Call fn on every persistent object the store holds, its root
 * excepted: the table (and the old one during a resize), the stripes'
 * directories, the segments, the nodes and the values kept apart, each
 * once, checking on the way that each handle is an object of its size
 * and that each chain is as long as its bucket's count. Returns 0, fn's
 * nonzero return, or TXN_E_CORRUPT (kv_strerror says where). For the
 * allocator's audit (crash simulator). Single-threaded, like kv_check. */
int kv_objects(kv_store *s, int (*fn)(txn_obj *o, void *arg), void *arg);

/* What a value is: the store keeps the type with the key; a hash, a list,
 * a set and a sorted set are strings the server encodes (t_hash.c,
 * t_list.c, t_set.c, t_zset.c); an item is a string stored by memcached's
 * protocol (memcache.c), after KV_ITEM_HDR bytes of its flags and CAS
 * value, and reads as a string without them. */
enum kv_type { KV_STRING = 0, KV_HASH = 1, KV_ITEM = 2, KV_LIST = 3,
               KV_SET = 4,
               KV_ZSET = 5,
};
#define KV_TYPE_MAX 7 /* the store keeps 3 bits of type */
#define KV_ITEM_HDR 12 /* 4 bytes of flags, 8 of CAS, little endian */

/* A call that wants a string found a value of another type. */
#define KV_E_WRONGTYPE (-1000)

/* Called with a value while its bucket is locked: copy it, do not keep it. */
typedef void (*kv_value_fn)(void *arg, const char *v, size_t n);
/* A key and the type of its value. */
typedef void (*kv_key_fn)(void *arg, const char *k, size_t n, unsigned type);

/* Before a command that may add up to n keys (MSET): grow the table to
 * about that many buckets when they would more than double its load,
 * moving the keys it holds in transactions of one stripe each. Best
 * effort (a full pool leaves the table as it was); never call it inside a
 * kv_txn, whose locks it would wait for. */
void kv_reserve(kv_store *s, uint64_t n);

/* ---- a transaction over chosen keys: what a command that reads and
 * writes (GETSET, APPEND, ...) and a MULTI/EXEC block need. kv_txn_begin
 * locks the stripes of the n keys (write: for changes) and begins one
 * txn.h transaction; each call inside names one of those keys
 * (TXN_E_STATE otherwise), sees the transaction's own writes, and changes
 * nothing durable until kv_txn_end commits it. */
typedef struct kv_txn kv_txn;
int kv_txn_begin(kv_store *s, size_t n, const struct kv_slice *keys, int write, kv_txn **out);
/* fn(arg, value) (NULL, 0 for a missing key; fn may be NULL): 1 found, 0
 * missing, or an error; an item reads as its string, a value of another
 * type is KV_E_WRONGTYPE (with fn NULL: found, whatever its type) */
int kv_txn_get(kv_txn *t, struct kv_slice key, kv_value_fn fn, void *arg);
/* kv_txn_get for a value of any type, which goes to *type when found (an
 * item with its header) */
int kv_txn_read(kv_txn *t, struct kv_slice key, kv_value_fn fn, void *arg, unsigned *type);
/* Bytes [off, off + n) of key's string (fewer past its end) to fn(arg,
 * bytes) (NULL, 0 for a missing key; fn may be NULL), its length to *len
 * (0 if missing): 1 found, 0 missing, KV_E_WRONGTYPE, or an error. An
 * item reads as its string. A string in pieces (store.c) is read only in
 * the pieces the range touches: STRLEN, GETRANGE, GETBIT. */
int kv_txn_getrange(kv_txn *t, struct kv_slice key, uint64_t off, uint64_t n, kv_value_fn fn,
                    void *arg, uint64_t *len);
/* Set key to value, expiring at `at` (ms since the Unix epoch; 0: never;
 * KV_KEEPTTL: when it expired before, if it existed). */
#define KV_KEEPTTL UINT64_MAX
int kv_txn_put(kv_txn *t, struct kv_slice key, struct kv_slice value, uint64_t at);
/* kv_txn_put of a value of `type` (enum kv_type) */
int kv_txn_write(kv_txn *t, struct kv_slice key, struct kv_slice value, uint64_t at,
                 unsigned type);
/* 1 deleted, 0 missing, or an error */
int kv_txn_del(kv_txn *t, struct kv_slice key);
/* A hint for a command of many keys, KV_PREFETCH_AHEAD keys ahead of the
 * one it works on: start loading key's bucket. Changes nothing; does
 * nothing for a key the transaction does not hold. */
void kv_txn_prefetch(kv_txn *t, struct kv_slice key);
#define KV_PREFETCH_AHEAD 8
/* Its expiry in *at (0: none): 1 found, 0 missing, or an error. */
int kv_txn_ttl(kv_txn *t, struct kv_slice key, uint64_t *at);
/* Make key expire at `at` (0: never): 1 done, 0 missing, or an error. */
int kv_txn_expire(kv_txn *t, struct kv_slice key, uint64_t at);
/* Write src at byte `off` of key's string (KV_SPLICE_END: at its end),
 * zeros between its old end and off, making the key if it is missing:
 * APPEND and SETRANGE. The string's length goes to *len; an empty src
 * changes nothing, save at KV_SPLICE_END (APPEND), where it makes a
 * missing key. A value
 * grown past INLINE_MAX bytes gets room to grow (store.c), so that a
 * write that fits changes only its bytes and the length: n appends cost
 * O(bytes appended) amortized; a long one is cut into pieces, of which a
 * write copies (cow) only those it touches. The expiry stays; an item becomes a
 * string. 1 the key existed, 0 made, KV_E_TOOBIG if the string would
 * pass `max` bytes (nothing changed), KV_E_WRONGTYPE, or an error. */
#define KV_SPLICE_END UINT64_MAX
#define KV_E_TOOBIG (-1001)
int kv_txn_splice(kv_txn *t, struct kv_slice key, uint64_t off, struct kv_slice src,
                  uint64_t max, uint64_t *len);
/* kv_txn_getrange and kv_txn_splice on a value of type `as`, which the key
 * must hold (KV_STRING: a string or an item, as the calls above): a
 * list's record (list.c) is read and written in the pieces a range
 * touches, its type kept. kv_txn_splice_as makes only strings: with
 * another type a missing key is 0 and nothing is written. */
int kv_txn_getrange_as(kv_txn *t, struct kv_slice key, unsigned as, uint64_t off, uint64_t n,
                       kv_value_fn fn, void *arg, uint64_t *len);
int kv_txn_splice_as(kv_txn *t, struct kv_slice key, unsigned as, uint64_t off,
                     struct kv_slice src, uint64_t max, uint64_t *len);
/* ---- a value found once and then read and written by offset: what a
 * command that touches many parts of one large value needs (a sorted
 * set's B-tree nodes), paying the key's lookup once instead of at every
 * kv_txn_getrange_as / kv_txn_splice_as. kv_txn_open_as finds key, which
 * must hold type `as` (as kv_txn_getrange_as): 1 (*out, its length to
 * *len), 0 missing, KV_E_WRONGTYPE, or an error. The handle lives inside
 * its transaction, and another kv_txn call on it makes the next use
 * look the key up again (TXN_E_STATE if it is gone by then). */
typedef struct kv_val kv_val;
int kv_txn_open_as(kv_txn *t, struct kv_slice key, unsigned as, kv_val **out, uint64_t *len);
/* Bytes [off, off + n), inside the value (TXN_E_INVAL past its end), to
 * dst: 0 or an error. */
int kv_val_read(kv_val *v, uint64_t off, void *dst, size_t n);
/* Write src at off (a writing transaction): inside the value only its
 * bytes are written; past its end it grows as kv_txn_splice_as grows it.
 * 0 or an error. */
int kv_val_write(kv_val *v, uint64_t off, const void *src, size_t n);
void kv_val_close(kv_val *v);
/* OBJECT's lookups: the transaction's reads from now on leave the keys'
 * access marks alone (eviction's recency, kv_txn_idle's clock), as Redis's
 * LOOKUP_NOTOUCH. */
void kv_txn_no_touch(kv_txn *t);
/* Seconds since key was last looked up (OBJECT IDLETIME), in *secs,
 * whether it exists or not: the store keeps, in DRAM, a 24-bit clock of
 * seconds per 2^-20 slice of the hash space (kv_evict's slices), which
 * every lookup sets, so a key answers for the most recent lookup of its
 * slice (one key a slice or so at the table's load; fewer keys, fewer
 * sharing); a restart starts every slice at the open. 0 or TXN_E_STATE
 * (a key the transaction does not hold). Nothing with kv_opts.no_refs. */
int kv_txn_idle(kv_txn *t, struct kv_slice key, uint64_t *secs);
/* ---- hashes and sets past their packed size: the key's value is an
 * element table (t_dict.h) that the commands change through the
 * transaction's txn (kv_txn_tx); deleting or replacing the key frees it.
 * kv_txn_read gives such a value as empty bytes. */
txn *kv_txn_tx(kv_txn *t);
/* 1 key holds a table (its type to *type, the table to *dict), 0 it is
 * missing or holds packed bytes (*dict NULL), or an error */
int kv_txn_dict(kv_txn *t, struct kv_slice key, unsigned *type, txn_obj **dict);
/* key's value becomes the table `dict` of `type` (the old value freed,
 * unless it is that table), expiring at `at` (KV_KEEPTTL as
 * kv_txn_write) */
int kv_txn_put_dict(kv_txn *t, struct kv_slice key, txn_obj *dict, uint64_t at, unsigned type);
/* RENAME: dst gets src's value, whatever it is, and its expiry, its old
 * one deleted; src is gone. The value's objects are not copied. 1 moved, 0
 * src missing (nothing changed), or an error. */
int kv_txn_move(kv_txn *t, struct kv_slice src, struct kv_slice dst);
/* Expiry is passive and exact: a key whose time has come reads as missing
 * and is deleted by the transaction that finds it (a read-only one too);
 * kv_expire_cycle reclaims the keys nobody asks for. */
/* rc >= 0: commit, and return its result (0 once durable, as the calls
 * above say); rc < 0: roll back and return rc. Frees t. */
int kv_txn_end(kv_txn *t, int rc);

/* Delete every key, on a full pool too. Not atomic as a whole (a crash
 * may leave a subset of the keys), each bucket's deletion is. */
int kv_flush(kv_store *s);

/* FLUSHALL ASYNC: every key gone in one transaction of O(STRIPES)
 * objects, whatever the store holds (a new, empty table; the old one
 * kept whole as a "grave" in it), its objects then freed by kv_lazy_free's
 * steps, after a crash too (store.c, graves). Needs that room: on
 * TXN_E_NOSPACE or TXN_E_LOGFULL nothing changed, and kv_flush still
 * empties the store. */
int kv_flush_async(kv_store *s);

/* Visit the keys whose hash lies in a range starting at `cursor`, covering
 * at least `buckets` buckets; *next is where to go on, 0 at the end. Every
 * key present during a whole scan (cursor 0 to 0) is seen exactly once,
 * resizes included, since cursors are positions in hash space. */
int kv_scan(kv_store *s, uint64_t cursor, size_t buckets, kv_key_fn fn, void *arg,
            uint64_t *next);

/* Delete the expired keys of at least `buckets` buckets from *cursor on
 * (a transaction a stripe), moving *cursor (0 again after the end);
 * *deleted counts them, *seen the keys looked at, expired or not. The
 * background reclaim of keys nobody reads. */
int kv_expire_cycle(kv_store *s, uint64_t *cursor, size_t buckets, uint64_t *deleted,
                    uint64_t *seen);

/* Which keys kv_evict deletes first: Redis's maxmemory-policy orders, an
 * order or'ed with KV_EVICT_VOLATILE (only keys with an expiry time are
 * candidates) */
enum kv_evict_order {
    KV_EVICT_LRU = 0,    /* least recently looked up */
    KV_EVICT_LFU = 1,    /* least frequently (kv_lfu_set's counters) */
    KV_EVICT_RANDOM = 2, /* any */
    KV_EVICT_TTL = 3,    /* the nearest expiry time (with KV_EVICT_VOLATILE) */
};
#define KV_EVICT_VOLATILE 4u

/* Delete keys until the keys' bytes (kv_info) are at most `limit`, in the
 * order `how` says, roughly. KV_EVICT_LRU over all keys: CLOCK over 2^20
 * slices of the hash space, whose reference bytes every lookup sets
 * (DRAM: a restart starts with none set); stops after two turns of the
 * hand (everything looked at) even if still above. Every other order
 * samples: from a random place, the candidate keys of windows of 32
 * buckets until 16 candidates or 8,192 buckets (the whole table of a
 * small store), and deletes the best quarter of them (at least one), then
 * samples again; stops when a sample of the whole table finds no
 * candidate (KV_EVICT_VOLATILE and no key with an expiry time). One
 * transaction per key, so a crash leaves each key whole or gone.
 * *evicted counts them. */
int kv_evict(kv_store *s, uint64_t limit, unsigned how, uint64_t *evicted);

/* A write's memory check (Redis's CMD_DENYOOM) past `limit`, with several
 * writers: kv_evict down to it in the order `how`; 1 when the write is
 * admitted (the eviction saw the bytes at most at the limit: the room
 * it made is the write's, even if another writer's keys took it since),
 * 0 when it is refused (the order had nothing left to evict before the
 * limit), or an error of kv_evict. */
int kv_evict_admit(kv_store *s, uint64_t limit, unsigned how);

/* Redis's LFU counters: with `on`, every lookup of a key that exists
 * counts in its slice's 8-bit logarithmic counter (incremented with
 * probability 1 / ((counter - 5) * log_factor + 1); a new key's slice
 * starts at 5 at least), which loses one every decay_minutes minutes
 * since the slice was last counted (0: never). DRAM only, one 32-bit
 * word per 2^-20 slice of the hash space (4 MiB a store, IDLETIME's
 * slices): no pool write. Off at open. */
void kv_lfu_set(kv_store *s, int on, unsigned log_factor, unsigned decay_minutes);
/* OBJECT FREQ: key's slice's counter, decayed to now, in *freq: 0 or
 * TXN_E_STATE (a key the transaction does not hold). */
int kv_txn_freq(kv_txn *t, struct kv_slice key, unsigned *freq);
/* For tests: the store's clock (IDLETIME's seconds, LFU's minutes) moves
 * on by secs at once. Single-threaded: no other call may run. */
void kv_clock_advance(kv_store *s, unsigned secs);

/* Lazy free: a DEL, expiry or overwrite of a key whose value is big (an
 * element table, or in pieces) only unlinks the key, in its transaction;
 * the value is freed here, one step a call: a transaction of its stripe
 * freeing at most `budget` objects (*freed counts them). A crash between
 * steps loses nothing: the next open queues the rest again. 1 more is
 * pending, 0 nothing is (or another thread is stepping), or an error. */
int kv_lazy_free(kv_store *s, uint64_t budget, uint64_t *freed);

/* Keys, bytes of persistent objects the keys use, buckets; kept in DRAM. */
struct kv_info {
    uint64_t keys;
    uint64_t expires; /* keys with an expiry time (expired ones included
                         until they are deleted) */
    uint64_t bytes;
    uint64_t buckets;
    int resizing;
    size_t pool_size;     /* bytes the pool has now */
    size_t pool_max_size; /* the most it may grow to */
    uint64_t evictions; /* keys kv_evict deleted since the store opened */
    uint64_t lazy_pending; /* values dropped, not freed yet (kv_lazy_free) */
    uint64_t lazy_freed;   /* values kv_lazy_free finished since the store opened */
};
void kv_info(kv_store *s, struct kv_info *out);

/* A number that moves whenever a transaction that may have changed `key`
 * commits (it counts the writing commits of the key's stripe, so others'
 * move it too): WATCH's first test. */
uint64_t kv_key_version(kv_store *s, struct kv_slice key);

/* Writing transactions committed so far, counted before their locks are
 * released: a reply to a call that may have read one of them is
 * acknowledged only after a txn_sync() that started once the count was
 * read (what incll needs; free for the engines durable at commit). */
uint64_t kv_commits(kv_store *s);

#endif
