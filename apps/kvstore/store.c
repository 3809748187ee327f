/* store.c - the persistent hash table of the key-value store, on txn.h.
 *
 * Layout (every field a u64 or a txn_obj handle)
 *   root     {magic, version, stripes, seg_buckets, table, old}: the
 *            pool's root, or the object a program hosting the store in a
 *            pool of its own gave kv_adopt
 *   table    {bits, sdir[STRIPES]}: 2^bits buckets; written only when made
 *   sdir     {migrated, seg[per_stripe / SEG_BUCKETS]}: one per stripe and
 *            table; a NULL seg is a segment of empty buckets not made yet
 *   segment  {bucket[SEG_BUCKETS]}, bucket = {head, n}: n = chain length
 *   node     {next, hash, klen, vlen, val, [expire,] key bytes, value
 *            bytes}: the value sits in the node if it is at most INLINE_MAX
 *            bytes (val == NULL), else in an object of its own (val). The
 *            top bit of klen (KF_TTL) says that an expiry time follows the
 *            header: ms since the Unix epoch (version 2; a version 1 store,
 *            whose nodes never have it, is a valid version 2 one and is
 *            marked 2 when a program of version 2 opens it for writing).
 *            Bits 61-62 of klen (KF_TYPE) are the value's type (enum
 *            kv_type: 0 a string, 1 a hash, 2 an item: version 3, whose
 *            stores of earlier versions hold only strings and are marked
 *            3 in the same way; 3 a list: version 5). Bit 60 (KF_PIECES):
 *            val is a piece table (version 4, stores of earlier versions
 *            marked 4 in the same way). Bit 59 (KF_TYPE_HI) is the type's
 *            third bit, for types past 3 (a set, 4, a sorted set, 5:
 *            version 5; earlier stores have it clear, and are marked 5 in
 *            the same way). Bit 58 (KF_DICT): val is an element table
 *            (t_dict.c) of a hash or a set past its packed size, and vlen
 *            is 0 (version 6; earlier stores have it clear, and are marked
 *            6 in the same way). Bit 57 (KF_LAZY): the node is
 *            buried (lazy free, below): no key any more, its value freed
 *            in steps (version 7; earlier stores have it clear, and are
 *            marked 7 in the same way). Bit 56 (KF_GRAVE): a grave
 *            (below; version 8, marked in the same way)
 *   pieces   a string (or a list: list.c) kv_txn_splice made longer
 *            than PIECE bytes: val = piece table {n, piece[capacity]}
 *            (capacity from the object's size, made a power of two), n =
 *            ceil(vlen / PIECE); piece i holds bytes [i * PIECE, (i + 1) *
 *            PIECE), so all but the last are full and only the last has
 *            room ("strings in pieces")
 *
 * Hashing and locks. A key's bucket is the top `bits` bits of its 64-bit
 * hash and its stripe the top STRIPE_BITS bits, so every stripe owns a
 * contiguous run of buckets in every table, and doubling a table splits
 * old bucket i into new buckets 2i and 2i+1 of the same stripe. One
 * volatile mutex per stripe guards everything of the stripe in both tables
 * (its sdirs, segments, nodes), held from before the first access until
 * the transaction has committed (txn_defer ON_END): two-phase locking, as
 * undo's in-place writes need; readers lock too, so nobody reads a write
 * that may still roll back. Several stripes are locked in ascending order,
 * and before the transaction begins (op_begin_locked says why).
 *
 * Why objects are cut this small. Under cow an object has one writer at a
 * time and a write copies the whole object, so nothing that two stripes
 * write may share an object, and what one write touches should be small:
 * hence per-stripe sdirs, 512-byte segments, and chain lengths kept next to
 * the heads instead of a key count in the root that every insert would
 * write (the root's "counts" are the buckets' n fields; the total lives in
 * DRAM). A value over INLINE_MAX gets its own object so that relinking a
 * chain never copies a large value, and a string that grows past PIECE is
 * cut into pieces so that an APPEND or SETRANGE copies at most the pieces
 * it writes. The root and a table object change only under all stripe
 * locks (resize start and finish).
 *
 * Incremental resize. When keys exceed the bucket count, one transaction
 * under all locks allocates the doubled table with empty sdirs (STRIPES +
 * 1 small objects, whatever the size) and moves the current table to
 * `old`. From then on, every write that may insert a key first moves its
 * key's old bucket, then up to resize_step (default MIGRATE_SCAN) old
 * buckets from the stripe's cursor (sdir.migrated) into the new table; a
 * stripe whose cursor reaches its end frees its old segments and old sdir
 * in that same transaction. When all stripes are done, one transaction
 * under all locks frees the old table object and clears `old`. No request
 * ever moves more than 1 + resize_step buckets. A call that only frees (a
 * delete, an expiry, an eviction) moves none: it needs no room, so a full
 * pool mid-resize can always be emptied. A command about to add many keys
 * (MSET) first grows the table to their number (kv_reserve), draining
 * each doubling in transactions of one stripe, as Redis grows its dict
 * inside such a command instead of walking chains many keys long.
 *
 * Invariants (kv_check verifies each)
 *  K1 Every node of bucket j of a table with `bits` bits has hash >>
 *     (64 - bits) == j, and hash == kv_hash(key); bucket.n is the length
 *     of its chain; chains are acyclic and share no node.
 *  K2 A key is in at most one chain. During a resize, writes insert only
 *     into the new table, after moving the key's old bucket.
 *  K3 Old buckets of stripe s below new sdir[s].migrated are empty; when
 *     migrated == old buckets per stripe, the old sdir and its segments are
 *     freed and never read again.
 *  K4 root.old != NULL exactly while a resize runs, and then the old table
 *     has bits - 1 bits.
 *
 * Lazy free. A key whose value is an element table or in pieces (a big
 * hash, set, list or sorted set) is not freed by the DEL, expiry or
 * overwrite that drops it, which would cost O(its elements) under its
 * stripe lock: that transaction only marks its node buried (KF_LAZY) and
 * leaves it in its chain, where no lookup, scan or count sees it, as
 * Redis's lazy free unlinks first and frees later. kv_lazy_free then
 * frees it in steps, each a transaction of its own stripe that frees at
 * most a given number of objects and leaves the value whole (t_dict.h's
 * dict_free_some; a pieced value loses its last pieces and the length
 * that names them), the last one unlinking the node. Why no list from
 * the root: the root's 48 bytes fill its size class, and one list for
 * the whole store would be one lock every writer of a big key takes
 * inside its transaction; a chain is under the stripe's lock already,
 * and survives resizes (move_bucket moves buried nodes as any other).
 * Which nodes are buried is kept in DRAM (a queue of their hashes), made
 * at commit and, at open, from the walk that counts the keys (tally), so
 * freeing resumes after a crash.
 *  L1 A buried node's hash is in the queue (kv_check: no more buried
 *     nodes than queued hashes); a buried node is no key (not in counts).
 *
 * Graves (FLUSHALL ASYNC, version 8). kv_flush_async swaps in a new,
 * empty table in one transaction under every lock, and keeps the old one
 * (and the one a resize was draining) reachable through a grave: a
 * buried node (KF_LAZY | KF_GRAVE, bit 56 of klen; no key, GRAVE_HASH,
 * val the flushed table) in bucket 0 of the new table. The root has no
 * spare word, and a grave, being a buried node, is found by the walk at
 * open, queued, moved by resizes and seen by kv_check and kv_objects
 * as lazy free's nodes are. Its steps (grave_chunk) free the table from
 * its first stripe on, NULLing each freed segment and directory where
 * the table named it, so every step leaves a smaller, whole table.
 *  G1 A flushed table holds no grave: kv_flush_async moves the graves of
 *     the tables it buries into the new one (kv_objects checks, the steps
 *     assert).
 *
 * Reads inside a transaction that may have written the same bytes go
 * through txn_read (redo's rule); pointers from txn_open are used only for
 * bytes no write touches in that transaction (values of read-only calls).
 */
#include "store.h"
#include "t_dict.h"

#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#define LAYOUT "pmtx-kvstore"
#define KV_MAGIC 0x31766b78746d70ULL /* "pmtxkv1" */
#define KV_VERSION 8                 /* of this layout and kv_hash */
#define KF_TTL (1ULL << 63)          /* node.klen: an expiry time follows */
#define KF_TYPE_SHIFT 61             /* node.klen: the value's kv_type */
#define KF_TYPE (3ULL << KF_TYPE_SHIFT)
#define KF_PIECES (1ULL << 60)       /* node.klen: val is a piece table */
#define KF_TYPE_HI (1ULL << 59)      /* node.klen: the kv_type's bit 2 */
#define KF_DICT (1ULL << 58)         /* node.klen: val is an element table */
#define KF_LAZY (1ULL << 57)         /* node.klen: buried, freed in steps */
#define KF_GRAVE (1ULL << 56)        /* node.klen: a grave, val a flushed table */
#define KF_ALL (KF_TTL | KF_TYPE | KF_PIECES | KF_TYPE_HI | KF_DICT | KF_LAZY | KF_GRAVE)
#define GRAVE_HASH 0 /* every grave's: bucket 0 of stripe 0 in any table */

#define STRIPE_BITS 8
#define STRIPES (1u << STRIPE_BITS)
#define SEG_BITS 5
#define SEG_BUCKETS (1u << SEG_BITS)
#define BUCKET_BYTES 16
#define SEG_BYTES (SEG_BUCKETS * BUCKET_BYTES)
#define MIN_BITS (STRIPE_BITS + SEG_BITS) /* one segment per stripe */
#define MAX_BITS 40
#define INLINE_MAX 256
#define PIECE 65536 /* bytes of a full piece of a pieced string (version 4):
                       one allocator chunk (docs/kvstore.md, section 19a) */
#define POOL_START ((size_t)4 << 20) /* a new pool's first size: kv_opts.pool_start */
#define MIGRATE_SCAN 8 /* default of kv_opts.resize_step */
#define WORDS (STRIPES / 64)
#define REF_BITS 20 /* kv_evict's CLOCK: 2^20 slices of the hash space */
_Static_assert(REF_BITS >= STRIPE_BITS, "a slice lies in one stripe (kv_store.lfu)");
#define REF_SEEN (1u << 31)     /* a slice's CLOCK bit */
#define REF_CLOCK 0xffffffu     /* a slice's seconds: 24 bits, as Redis's LRU clock */

/* root */
enum { R_MAGIC = 0, R_VERSION = 8, R_STRIPES = 16, R_SEG = 24, R_TABLE = 32, R_OLD = 40,
       ROOT_SIZE = 48 };
_Static_assert(ROOT_SIZE == KV_ROOT_SIZE, "store.h's KV_ROOT_SIZE");
/* table */
enum { T_BITS = 0, T_SDIR = 8, TABLE_SIZE = T_SDIR + 8 * STRIPES };
/* sdir */
enum { D_MIGRATED = 0, D_SEG = 8 };
/* piece table: {n, piece[capacity]}, capacity from the object's size */
enum { P_N = 0, P_PIECE = 8 };

/* A node's fixed header, as stored. */
struct node_hdr {
    txn_obj *next;
    uint64_t hash;
    uint64_t klen;
    uint64_t vlen;
    txn_obj *val; /* NULL: the value follows the key */
};
_Static_assert(sizeof(struct node_hdr) == 40, "node header layout");
enum { N_NEXT = 0, N_VLEN = 24, HDR = 40 };

static inline uint64_t klen_of(const struct node_hdr *h)
{
    return h->klen & ~KF_ALL;
}

static inline unsigned type_of(const struct node_hdr *h)
{
    return (unsigned)((h->klen & KF_TYPE) >> KF_TYPE_SHIFT) | (h->klen & KF_TYPE_HI ? 4u : 0u);
}

/* A kv_type's bits in node.klen (KF_TYPE and KF_TYPE_HI) */
static inline uint64_t type_bits(unsigned type)
{
    return (uint64_t)(type & 3) << KF_TYPE_SHIFT | (type & 4 ? KF_TYPE_HI : 0);
}

static inline int pieced(const struct node_hdr *h)
{
    return (h->klen & KF_PIECES) != 0;
}

static inline int dicted(const struct node_hdr *h)
{
    return (h->klen & KF_DICT) != 0;
}

static inline int buried(const struct node_hdr *h)
{
    return (h->klen & KF_LAZY) != 0;
}

static inline int grave(const struct node_hdr *h)
{
    return (h->klen & KF_GRAVE) != 0;
}

/* A value whose freeing costs more than a few objects: freed lazily. */
static inline int lazy_worth(const struct node_hdr *h)
{
    return dicted(h) || pieced(h);
}

static inline int has_ttl(const struct node_hdr *h)
{
    return (h->klen & KF_TTL) != 0;
}

static inline size_t key_off(const struct node_hdr *h)
{
    return HDR + (has_ttl(h) ? 8 : 0);
}

static inline size_t val_off(const struct node_hdr *h)
{
    return key_off(h) + (size_t)klen_of(h);
}

/* The tables as the root names them; changed only under all stripe
 * locks, so any one stripe lock makes it safe to read. */
struct view {
    txn_obj *table;     /* the current table */
    unsigned bits;      /* of `table` */
    txn_obj *old;       /* the table being drained, or NULL */
    txn_obj *sdir[STRIPES], *old_sdir[STRIPES];
};

struct stripe_lock {
    _Alignas(64) pthread_mutex_t m; /* a line each: no false sharing */
};

struct kv_store {
    txn_pool *p;
    txn_obj *root; /* txn_root(p), or what kv_adopt was given */
    int own;       /* kv_open opened p: kv_close closes it */
    int (*commit)(txn *tx, void *arg); /* kv_opts.commit, or NULL */
    void *commit_arg;
    void (*evicted)(const char *k, size_t n, void *arg); /* kv_opts.evicted, or NULL */
    struct stripe_lock lock[STRIPES];
    struct view v;
    pthread_mutex_t resize; /* one resize start or finish at a time; kv_reserve
                               holds it across its whole drain */
    unsigned resize_step;   /* old buckets a write moves past its own */
    _Atomic uint64_t keys, bytes, commits, expires;
    int view;
    int no_refs; /* kv_opts.no_refs */
    _Atomic uint64_t version[STRIPES]; /* writing commits per stripe (DRAM) */
    _Atomic unsigned bits, resizing, stripes_done; /* mirrors, for lock-free checks */
    /* per slice of the hash space, what every lookup sets (DRAM: written
     * by any thread, relaxed, no lock): REF_SEEN, eviction's CLOCK bit
     * (kv_evict, which clears it), and the store's clock (REF_CLOCK bits)
     * at the lookup, OBJECT IDLETIME's (kv_txn_idle); the hand */
    _Atomic uint32_t ref[1u << REF_BITS];
    /* per slice, Redis's LFU counter (kv_lfu_set; DRAM): the counter in
     * the low 8 bits, the store's minutes (lfu_minutes) at its last count
     * in the 16 above. Guarded by the lock of the stripe the slice lies
     * in: lookups (lfu_count, OBJECT FREQ) and eviction's samples
     * (scan_range) hold it. Relaxed atomics besides, as ref[]. */
    _Atomic uint32_t lfu[1u << REF_BITS];
    _Atomic unsigned lfu_on, lfu_log, lfu_decay; /* kv_lfu_set's (relaxed) */
    time_t t0; /* CLOCK_MONOTONIC_COARSE seconds at open, less one
                  (kv_clock_advance moves it; else set once at open) */
    _Atomic uint64_t hand, evictions;
    uint64_t id; /* this store's number in the process, from 1 (set at
                    kv_adopt, then only read): rnd64's seed is a store's */
    /* lazy free: the hashes of buried nodes, oldest first, each with a
     * hint where its table's freeing goes on (dict_free_some) */
    pthread_mutex_t lazy_m; /* guards lq, lq_head, lq_n, lq_cap */
    struct lazy_ent {
        uint64_t hash, cursor;
    } *lq;
    size_t lq_head, lq_n, lq_cap; /* entries [lq_head, lq_head + lq_n) */
    pthread_mutex_t lazy_step;    /* one kv_lazy_free at a time */
    _Atomic uint64_t lazy_pending, lazy_freed; /* mirrors of lq_n; values freed */
    /* nodes of flushed tables (graves) not freed yet: atomic, no lock; an
     * estimate for INFO, set by kv_flush_async and tally, lowered by the
     * graves' steps, zeroed with the last grave */
    _Atomic uint64_t grave_left;
};

/* A key a scan found, with its expiry time (0: none). */
typedef void (*timed_fn)(void *arg, const char *k, size_t n, uint64_t at);

/* One call's transaction and what it holds. */
struct op {
    kv_store *s;
    txn *tx;
    uint64_t locked[WORDS]; /* stripes held */
    int64_t dkeys, dbytes, dexp; /* applied to the DRAM totals after commit */
    int no_touch;           /* lookups leave the slices' marks (kv_txn_no_touch) */
    unsigned done;          /* stripes whose migration this call finished */
    kv_key_fn expired;      /* scans: where expired keys go (NULL: nowhere) */
    void *expired_arg;
    timed_fn timed;         /* scans: where live keys go with their expiry
                               times (eviction's samples), instead of fn */
    struct kv_slice hk;     /* the key of this kv_txn call, hashed by txn_holds */
    uint64_t hv;            /* kv_hash(hk) */
    uint64_t *lazy;         /* hashes of the nodes this call buried (malloc'd) */
    size_t nlazy;
    uint64_t lfu_seen[4];   /* keys (hashes) this call counted (lfu_count) */
    unsigned nlfu_seen;
};

/* ---- hashing: part of the persistent layout (KV_VERSION) */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ULL;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dULL;
    x ^= x >> 33;
    return x;
}

static uint64_t kv_hash(const char *p, size_t n)
{
    uint64_t h = 0x6a09e667f3bcc909ULL ^ ((uint64_t)n * 0x9e3779b97f4a7c15ULL);
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = mix64(h ^ w);
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return mix64(h ^ w ^ ((uint64_t)n << 56));
}

/* kv_hash(k), once per kv_txn call: txn_holds hashed the call's key. */
static inline uint64_t op_hash(const struct op *o, struct kv_slice k)
{
    return k.p && k.p == o->hk.p && k.n == o->hk.n ? o->hv : kv_hash(k.p, k.n);
}

static inline unsigned stripe_of(uint64_t h)
{
    return (unsigned)(h >> (64 - STRIPE_BITS));
}

static inline uint64_t per_stripe(unsigned bits)
{
    return (uint64_t)1 << (bits - STRIPE_BITS);
}

/* ---- transactions and locks */

static int op_begin(struct op *o, kv_store *s)
{
    memset(o, 0, sizeof *o);
    o->s = s;
    return txn_begin(s->p, &o->tx);
}

static void unlock_all(void *arg)
{
    struct op *o = arg;
    for (unsigned w = 0; w < WORDS; w++)
        for (uint64_t m = o->locked[w]; m; m &= m - 1)
            pthread_mutex_unlock(&o->s->lock[w * 64 + (unsigned)__builtin_ctzll(m)].m);
    memset(o->locked, 0, sizeof o->locked);
}

/* ON_COMMIT of a writing call, before its unlock: whoever sees the write
 * sees it counted (kv_commits), and its stripes' versions moved
 * (kv_key_version). */
static void count_commit(void *arg)
{
    struct op *o = arg;
    kv_store *s = o->s;
    atomic_fetch_add(&s->commits, 1);
    for (unsigned w = 0; w < WORDS; w++)
        for (uint64_t m = o->locked[w]; m; m &= m - 1)
            atomic_fetch_add(&s->version[w * 64 + (unsigned)__builtin_ctzll(m)], 1);
}

/* Begin a transaction holding the stripes of `want`, taken in ascending
 * order (no deadlock between calls that lock several) and released when
 * it ends; `first` (if not NULL) runs on commit before the release. The
 * locks come before the transaction: a thread waiting for one is inside
 * no transaction, so a commit that waits for every running transaction
 * to end (incll ends its epoch early once frees pile up) while it holds
 * locks never waits for a thread that waits for them. On an error
 * nothing is held and no transaction is open. */
static int op_begin_locked(struct op *o, kv_store *s, const uint64_t want[WORDS], int write,
                           void (*first)(void *), void *arg)
{
    memset(o, 0, sizeof *o);
    o->s = s;
    for (unsigned w = 0; w < WORDS; w++)
        for (uint64_t m = want[w]; m; m &= m - 1)
            pthread_mutex_lock(&s->lock[w * 64 + (unsigned)__builtin_ctzll(m)].m);
    memcpy(o->locked, want, sizeof o->locked);
    int rc = txn_begin(s->p, &o->tx);
    if (rc) {
        unlock_all(o);
        return rc;
    }
    if ((first && (rc = txn_defer(o->tx, TXN_ON_COMMIT, first, arg))) ||
        (write && (rc = txn_defer(o->tx, TXN_ON_COMMIT, count_commit, o))) ||
        (rc = txn_defer(o->tx, TXN_ON_END, unlock_all, o))) {
        txn_abort(o->tx); /* the release was not registered */
        unlock_all(o);
    }
    return rc;
}

static void want_keys(size_t n, const struct kv_slice *k, uint64_t want[WORDS])
{
    memset(want, 0, WORDS * sizeof *want);
    for (size_t i = 0; i < n; i++) {
        unsigned s = stripe_of(kv_hash(k[i].p, k[i].n));
        want[s / 64] |= 1ULL << (s % 64);
    }
}

static void maybe_resize(kv_store *s);

/* Commit (rc == 0) or abort, then account for what the call changed. */
static void lazy_push(kv_store *s, const uint64_t *h, size_t n);

static int op_end(struct op *o, int rc)
{
    /* the element tables' objects this transaction made and freed
     * (t_dict.h): counted with the keys' bytes, or dropped with it */
    int64_t dict_bytes = dict_bytes_taken();
    if (rc < 0) {
        txn_abort(o->tx);
        free(o->lazy);
        return rc;
    }
    kv_store *s = o->s;
    rc = s->commit ? s->commit(o->tx, s->commit_arg) : txn_commit(o->tx);
    if (!rc && o->nlazy)
        lazy_push(s, o->lazy, o->nlazy);
    free(o->lazy);
    if (rc)
        return rc;
    o->dbytes += dict_bytes;
    /* every thread's counters: not touched when unchanged (reads, same-size
     * overwrites), or each GET would bounce their line between the workers */
    if (o->dkeys)
        atomic_fetch_add(&s->keys, (uint64_t)o->dkeys);
    if (o->dbytes)
        atomic_fetch_add(&s->bytes, (uint64_t)o->dbytes);
    if (o->dexp)
        atomic_fetch_add(&s->expires, (uint64_t)o->dexp);
    if (o->done)
        atomic_fetch_add(&s->stripes_done, o->done);
    if (o->dkeys > 0 || o->done)
        maybe_resize(s);
    return 0;
}

/* What the last refused kv_open of this thread found wrong in the store,
 * for kv_strerror. */
static _Thread_local char why[256];
static _Thread_local int why_rc;

static int refuse(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    why_rc = rc;
    return rc;
}

const char *kv_strerror(int rc)
{
    static _Thread_local char text[sizeof why + 64];
    if (rc == 0 || rc != why_rc)
        return txn_pool_strerror(rc);
    snprintf(text, sizeof text, "%s: %s", txn_strerror(rc), why);
    return text;
}

static int rd(struct op *o, txn_obj *obj, size_t off, void *dst, size_t n)
{
    return txn_read(o->tx, obj, off, dst, n);
}

static int rd_obj(struct op *o, txn_obj *obj, size_t off, txn_obj **out)
{
    return rd(o, obj, off, out, sizeof *out);
}

static int wr(struct op *o, txn_obj *obj, size_t off, const void *src, size_t n)
{
    return txn_write(o->tx, obj, off, src, n);
}

static int alloc(struct op *o, size_t n, txn_obj **out)
{
    return txn_alloc(o->tx, n, out);
}

/* ---- buckets */

/* Where bucket j of a table lives: seg (NULL if not made yet) and the
 * bucket's offset in it. */
struct bref {
    txn_obj *sdir;
    size_t seg_off; /* of the segment handle in sdir */
    txn_obj *seg;
    size_t off;
};

static int bucket_ref(struct op *o, txn_obj *sdir, unsigned bits, uint64_t j, struct bref *b)
{
    uint64_t local = j & (per_stripe(bits) - 1);
    b->sdir = sdir;
    b->seg_off = D_SEG + 8 * (size_t)(local >> SEG_BITS);
    b->off = BUCKET_BYTES * (size_t)(local & (SEG_BUCKETS - 1));
    return rd_obj(o, sdir, b->seg_off, &b->seg);
}

/* Make the bucket's segment if it does not exist (write paths). */
static int bucket_make(struct op *o, struct bref *b)
{
    if (b->seg)
        return 0;
    int rc = alloc(o, SEG_BYTES, &b->seg);
    return rc ? rc : wr(o, b->sdir, b->seg_off, &b->seg, sizeof b->seg);
}

/* Read {head, n} of a bucket (empty if its segment is not made). */
static int bucket_get(struct op *o, const struct bref *b, txn_obj **head, uint64_t *n)
{
    if (!b->seg) {
        *head = NULL;
        *n = 0;
        return 0;
    }
    uint64_t w[2];
    int rc = rd(o, b->seg, b->off, w, sizeof w);
    *head = (txn_obj *)(uintptr_t)w[0];
    *n = w[1];
    return rc;
}

static int bucket_put(struct op *o, const struct bref *b, txn_obj *head, uint64_t n)
{
    uint64_t w[2] = {(uint64_t)(uintptr_t)head, n};
    return wr(o, b->seg, b->off, w, sizeof w);
}

/* ---- nodes */

static int node_hdr(struct op *o, txn_obj *node, struct node_hdr *h)
{
    return rd(o, node, 0, h, sizeof *h);
}

/* Compare node's key with k through txn_read (the node may be new in this
 * transaction). Returns 1 equal, 0 not, <0 error. */
static int key_equal(struct op *o, txn_obj *node, size_t off, struct kv_slice k)
{
    char buf[256];
    for (size_t i = 0; i < k.n; i += sizeof buf) {
        size_t n = k.n - i < sizeof buf ? k.n - i : sizeof buf;
        int rc = rd(o, node, off + i, buf, n);
        if (rc)
            return rc;
        if (memcmp(buf, k.p + i, n))
            return 0;
    }
    return 1;
}

/* A node found: its header and the link that points at it (the bucket's
 * head or the previous node's next). */
struct hit {
    txn_obj *node;
    struct node_hdr h;
    txn_obj *link_obj;
    size_t link_off;
};

/* Search bucket b for (hash, key), buried nodes skipped; k.p NULL: the
 * first buried node of that hash. Returns 1 (found, *hit), 0 or <0. */
static int chain_find(struct op *o, const struct bref *b, uint64_t hash, struct kv_slice k,
                      struct hit *hit)
{
    uint64_t n;
    txn_obj *cur;
    int rc = bucket_get(o, b, &cur, &n);
    hit->link_obj = b->seg;
    hit->link_off = b->off;
    for (; !rc && cur; cur = hit->h.next) {
        if ((rc = node_hdr(o, cur, &hit->h)))
            break;
        if (!k.p && buried(&hit->h) && hit->h.hash == hash) { /* lazy free's */
            hit->node = cur;
            return 1;
        }
        if (hit->h.hash == hash && klen_of(&hit->h) == k.n && k.p && !buried(&hit->h)) {
            rc = key_equal(o, cur, key_off(&hit->h), k);
            if (rc) {
                hit->node = cur;
                return rc;
            }
        }
        hit->link_obj = cur;
        hit->link_off = N_NEXT;
    }
    return rc;
}

static uint64_t obj_bytes(kv_store *s, txn_obj *node, txn_obj *val)
{
    return txn_obj_size(s->p, node) + (val ? txn_obj_size(s->p, val) : 0);
}

/* Write n zero bytes at off of obj. */
static int wr_zeros(struct op *o, txn_obj *obj, uint64_t off, uint64_t n)
{
    static const char zeros[4096];
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i += sizeof zeros)
        rc = wr(o, obj, (size_t)(off + i), zeros,
                n - i < sizeof zeros ? (size_t)(n - i) : sizeof zeros);
    return rc;
}

/* ---- strings in pieces (version 4)
 *
 * A string that kv_txn_splice grows past PIECE bytes is kept as a piece
 * table {n, piece[capacity]} (node.val, KF_PIECES in klen) and n =
 * ceil(vlen / PIECE) pieces: piece i holds bytes [i * PIECE, (i + 1) *
 * PIECE) of the string, so every piece but the last is full and only the
 * last has room to grow. A write copies at most the pieces it touches
 * under cow, and the table only when a piece is added. */

static inline uint64_t pieces_of(uint64_t len)
{
    return (len + PIECE - 1) / PIECE;
}

/* Bytes of piece i of a string of len bytes. */
static inline uint64_t piece_len(uint64_t len, uint64_t i)
{
    return len - i * PIECE < PIECE ? len - i * PIECE : PIECE;
}

/* An object for a string end of `need` bytes (at most PIECE): room for
 * as many again, so that appends copy it O(1) times a byte appended. */
static inline uint64_t piece_room(uint64_t need)
{
    return need >= PIECE / 2 ? PIECE : 2 * need;
}

/* The handles of pieces [first, first + count) of a pieced value (fewer
 * past its last; malloc'd, *n of them), each known to be an object of the
 * bytes it holds. TXN_E_CORRUPT (with kv_strerror's text) if the table or
 * a piece is not. */
static int piece_range(struct op *o, txn_obj *node, const struct node_hdr *h, uint64_t first,
                       uint64_t count, txn_obj ***out, uint64_t *n)
{
    size_t tsize = h->val ? txn_obj_size(o->s->p, h->val) : 0;
    uint64_t want = pieces_of(h->vlen);
    *out = NULL;
    *n = 0;
    if (tsize < P_PIECE || (tsize - P_PIECE) / 8 < want)
        return refuse(TXN_E_CORRUPT, "node %p: piece table %p is no object of %llu pieces",
                      (void *)node, (void *)h->val, (unsigned long long)want);
    uint64_t have;
    int rc = rd(o, h->val, P_N, &have, sizeof have);
    if (rc)
        return rc;
    if (have != want)
        return refuse(TXN_E_CORRUPT, "node %p: %llu pieces for %llu bytes", (void *)node,
                      (unsigned long long)have, (unsigned long long)h->vlen);
    if (first > want)
        first = want;
    if (count > want - first)
        count = want - first;
    txn_obj **list = malloc((count ? count : 1) * sizeof *list);
    if (!list)
        return TXN_E_NOMEM;
    if (count && (rc = rd(o, h->val, P_PIECE + 8 * first, list, count * sizeof *list))) {
        free(list);
        return rc;
    }
    for (uint64_t i = 0; i < count; i++)
        if (!list[i] || txn_obj_size(o->s->p, list[i]) < piece_len(h->vlen, first + i)) {
            txn_obj *bad = list[i];
            free(list);
            return refuse(TXN_E_CORRUPT, "node %p: piece %llu (%p) is no object of %llu bytes",
                          (void *)node, (unsigned long long)(first + i), (void *)bad,
                          (unsigned long long)piece_len(h->vlen, first + i));
        }
    *out = list;
    *n = count;
    return 0;
}

/* All the pieces of a pieced value: piece_range. */
static int piece_list(struct op *o, txn_obj *node, const struct node_hdr *h, txn_obj ***out,
                      uint64_t *n)
{
    return piece_range(o, node, h, 0, UINT64_MAX, out, n);
}

/* Bytes [off, off + len) of a pieced value (within its vlen) into dst:
 * only the pieces that hold them are read. */
static int pieces_read(struct op *o, txn_obj *node, const struct node_hdr *h, uint64_t off,
                       uint64_t len, char *dst)
{
    txn_obj **list;
    uint64_t n, first = off / PIECE, end = off + len;
    int rc = piece_range(o, node, h, first, len ? (end - 1) / PIECE - first + 1 : 0, &list, &n);
    for (uint64_t i = 0; i < n && !rc; i++) {
        uint64_t base = (first + i) * PIECE, a = off > base ? off : base;
        uint64_t b = end < base + PIECE ? end : base + PIECE;
        rc = rd(o, list[i], (size_t)(a - base), dst + (a - off), (size_t)(b - a));
    }
    free(list);
    return rc;
}

/* Free a pieced value's pieces (not its table). */
static int pieces_free(struct op *o, txn_obj *node, const struct node_hdr *h)
{
    txn_obj **list;
    uint64_t n;
    int rc = piece_list(o, node, h, &list, &n);
    for (uint64_t i = 0; i < n && !rc; i++) {
        if (!buried(h)) /* a buried node's bytes left the count when it was */
            o->dbytes -= (int64_t)txn_obj_size(o->s->p, list[i]);
        rc = txn_free(o->tx, list[i]);
    }
    free(list);
    return rc;
}

/* A new object of `room` bytes for piece i in the table, holding the
 * first `keep` bytes of `old` (then freed), if there was one. */
static int piece_new(struct op *o, txn_obj *table, uint64_t i, txn_obj *old, uint64_t keep,
                     uint64_t room, txn_obj **out)
{
    txn_obj *pc;
    int rc = alloc(o, room, &pc);
    if (rc)
        return rc;
    o->dbytes += (int64_t)txn_obj_size(o->s->p, pc);
    if (old && keep) {
        char *buf = malloc(keep);
        if (!buf)
            return TXN_E_NOMEM;
        if (!(rc = rd(o, old, 0, buf, keep)))
            rc = wr(o, pc, 0, buf, keep);
        free(buf);
    }
    if (!rc && old) {
        o->dbytes -= (int64_t)txn_obj_size(o->s->p, old);
        rc = txn_free(o->tx, old);
    }
    if (!rc)
        rc = wr(o, table, P_PIECE + 8 * i, &pc, sizeof pc);
    *out = pc;
    return rc;
}

/* A piece table for n pieces: room for a power of two of them, so that a
 * string growing by appends replaces its table O(log n) times. */
static int table_new(struct op *o, uint64_t n, txn_obj **out)
{
    uint64_t cap = 4;
    while (cap < n)
        cap *= 2;
    int rc = alloc(o, P_PIECE + 8 * cap, out);
    if (!rc)
        o->dbytes += (int64_t)txn_obj_size(o->s->p, *out);
    return rc;
}

/* Write src at off of the pieced string of `hit` (now `want` bytes long),
 * zeros between its end and off: only the pieces in [min(off, vlen),
 * off + src.n) are written, each at most once copied into a larger object
 * (the last) or made; the table is written when pieces are added. */
static int pieces_splice(struct op *o, const struct hit *hit, uint64_t off, struct kv_slice src,
                         uint64_t want)
{
    const struct node_hdr *h = &hit->h;
    uint64_t have = h->vlen, n = pieces_of(have), n2 = pieces_of(want), got;
    uint64_t lo = off < have ? off : have, hi = off + src.n, first = lo / PIECE;
    txn_obj **list, *table = h->val;
    int rc = 0, grow = n2 > (txn_obj_size(o->s->p, table) - P_PIECE) / 8;
    /* the handles of the pieces written (all of them when the table
     * grows, which copies them): a write into a large value (a big list,
     * a large sorted set) costs what it touches */
    if (grow)
        first = 0;
    rc = piece_range(o, hit->node, h, first, grow ? n : (hi - 1) / PIECE - first + 1, &list, &got);
    if (rc)
        return rc;
    if (grow) { /* a table twice as large */
        if (!(rc = table_new(o, n2 > 2 * n ? n2 : 2 * n, &table)) &&
            !(rc = wr(o, table, P_PIECE, list, n * sizeof *list))) {
            o->dbytes -= (int64_t)txn_obj_size(o->s->p, h->val);
            if (!(rc = txn_free(o->tx, h->val)))
                rc = wr(o, hit->node, offsetof(struct node_hdr, val), &table, sizeof table);
        }
    }
    for (uint64_t i = lo / PIECE; i * PIECE < hi && !rc; i++) {
        uint64_t base = i * PIECE, end = piece_len(want, i);
        txn_obj *pc = i < first + got ? list[i - first] : NULL;
        int fresh = 0; /* made here: its bytes are zeros (txn_alloc) */
        if (!pc || txn_obj_size(o->s->p, pc) < end) {
            uint64_t keep = i < n ? piece_len(have, i) : 0;
            if ((rc = piece_new(o, table, i, pc, keep, end == PIECE ? PIECE : piece_room(end),
                                &pc)))
                break;
            fresh = keep == 0;
        }
        /* piece i's part of [lo, hi): zeros before off, then src */
        uint64_t a = lo > base ? lo : base, b = hi < base + PIECE ? hi : base + PIECE;
        uint64_t z = off < b ? off : b, s0 = off > a ? off : a;
        if (a < z && !fresh)
            rc = wr_zeros(o, pc, a - base, z - a);
        if (!rc && s0 < b)
            rc = wr(o, pc, (size_t)(s0 - base), src.p + (s0 - off), (size_t)(b - s0));
    }
    free(list);
    if (!rc && n2 != n)
        rc = wr(o, table, P_N, &n2, sizeof n2);
    return rc || want == have ? rc : wr(o, hit->node, N_VLEN, &want, sizeof want);
}

/* The string v of len (> PIECE) bytes as a new piece table and pieces. */
static int pieces_make(struct op *o, const char *v, uint64_t len, txn_obj **out)
{
    uint64_t n = pieces_of(len);
    txn_obj *table, *pc;
    int rc = table_new(o, n, &table);
    for (uint64_t i = 0; i < n && !rc; i++) {
        uint64_t plen = piece_len(len, i);
        if (!(rc = piece_new(o, table, i, NULL, 0, i + 1 < n ? PIECE : piece_room(plen), &pc)))
            rc = wr(o, pc, 0, v + i * PIECE, plen);
    }
    if (!rc)
        rc = wr(o, table, P_N, &n, sizeof n);
    *out = table;
    return rc;
}

/* A new node for (hash, k, v) of `type` whose next is `next`, expiring at
 * `at` ms (0: never). */
static int node_make(struct op *o, uint64_t hash, struct kv_slice k, struct kv_slice v,
                     uint64_t at, unsigned type, txn_obj *next, txn_obj **out)
{
    int sep = v.n > INLINE_MAX;
    struct node_hdr h = {next, hash,
                         k.n | (at ? KF_TTL : 0) | type_bits(type), v.n, NULL};
    txn_obj *node;
    size_t size = key_off(&h) + k.n + (sep ? 0 : v.n);
    int rc = alloc(o, size, &node);
    if (!rc && sep && !(rc = alloc(o, v.n, &h.val)))
        rc = wr(o, h.val, 0, v.p, v.n);
    /* a small node is put together here and written once: one pass
     * through the engine per key instead of one per field */
    char img[HDR + 8 + 2 * INLINE_MAX];
    if (!rc && size <= sizeof img) {
        memcpy(img, &h, sizeof h);
        if (at)
            memcpy(img + HDR, &at, sizeof at);
        if (k.n)
            memcpy(img + key_off(&h), k.p, k.n);
        if (!sep && v.n)
            memcpy(img + val_off(&h), v.p, v.n);
        rc = wr(o, node, 0, img, size);
    } else if (!rc) {
        rc = wr(o, node, 0, &h, sizeof h);
        if (!rc && at)
            rc = wr(o, node, HDR, &at, sizeof at);
        if (!rc)
            rc = wr(o, node, key_off(&h), k.p, k.n);
        if (!rc && !sep)
            rc = wr(o, node, val_off(&h), v.p, v.n);
    }
    if (!rc) {
        *out = node;
        o->dbytes += (int64_t)obj_bytes(o->s, node, h.val);
        o->dexp += at != 0;
    }
    return rc;
}

static int node_free(struct op *o, txn_obj *node, const struct node_hdr *h)
{
    txn_obj *val = h->val;
    if (!buried(h)) {
        o->dexp -= has_ttl(h);
        o->dbytes -= (int64_t)obj_bytes(o->s, node, dicted(h) ? NULL : val);
    }
    int rc = pieced(h) ? pieces_free(o, node, h) : 0;
    if (dicted(h)) { /* the table and its elements, in this transaction */
        rc = dict_free(o->tx, val);
        val = NULL;
    }
    if (!rc && val)
        rc = txn_free(o->tx, val);
    return rc ? rc : txn_free(o->tx, node);
}

/* Point the link of `hit` at `to`, keeping the bucket's n + dn. Allocations
 * and frees come before this write: undo then needs no extra barrier for
 * their records (see undo.c). */
static int relink(struct op *o, const struct bref *b, const struct hit *hit, txn_obj *to,
                  int dn)
{
    uint64_t n;
    txn_obj *head;
    int rc = bucket_get(o, b, &head, &n);
    if (rc)
        return rc;
    if (hit->link_obj == b->seg && hit->link_off == b->off)
        return bucket_put(o, b, to, n + (uint64_t)dn);
    if ((rc = wr(o, hit->link_obj, hit->link_off, &to, sizeof to)))
        return rc;
    return dn ? bucket_put(o, b, head, n + (uint64_t)dn) : 0;
}

/* ---- incremental resize */

/* Move every node of old bucket i into the new table (buckets 2i, 2i+1).
 * Both lie in one new segment, made before the first write. 0 or <0. */
static int move_bucket(struct op *o, unsigned s, uint64_t i)
{
    struct view *v = &o->s->v;
    struct bref ob, nb;
    uint64_t n;
    txn_obj *cur;
    int rc = bucket_ref(o, v->old_sdir[s], v->bits - 1, i, &ob);
    if (!rc)
        rc = bucket_get(o, &ob, &cur, &n);
    if (rc || !cur)
        return rc;
    if ((rc = bucket_ref(o, v->sdir[s], v->bits, 2 * i, &nb)))
        return rc;
    if ((rc = bucket_make(o, &nb)))
        return rc;
    txn_obj *seg = nb.seg;
    (void)seg; /* for the assert only */
    while (cur && !rc) {
        struct node_hdr h;
        txn_obj *head;
        uint64_t hn;
        if ((rc = node_hdr(o, cur, &h)) ||
            (rc = bucket_ref(o, v->sdir[s], v->bits, h.hash >> (64 - v->bits), &nb)))
            break;
        assert(nb.seg == seg); /* 2i and 2i+1 share a segment: no allocation here */
        if ((rc = bucket_get(o, &nb, &head, &hn)) ||
            (rc = wr(o, cur, N_NEXT, &head, sizeof head)))
            break;
        rc = bucket_put(o, &nb, cur, hn + 1);
        cur = h.next;
    }
    return rc ? rc : bucket_put(o, &ob, NULL, 0);
}

/* The old segments and sdir of a stripe whose buckets all moved. */
static int free_old_stripe(struct op *o, unsigned s)
{
    txn_obj *sdir = o->s->v.old_sdir[s];
    uint64_t nseg = per_stripe(o->s->v.bits - 1) / SEG_BUCKETS;
    int rc = 0;
    for (uint64_t q = 0; q < nseg && !rc; q++) {
        txn_obj *seg;
        if (!(rc = rd_obj(o, sdir, D_SEG + 8 * q, &seg)) && seg)
            rc = txn_free(o->tx, seg);
    }
    return rc ? rc : txn_free(o->tx, sdir);
}

/* Move old buckets of stripe s from its cursor m on, at most `steps` of
 * them, and record the new cursor; the stripe's old objects go when the
 * cursor reaches the end. */
static int advance(struct op *o, unsigned s, uint64_t m, uint64_t steps)
{
    struct view *v = &o->s->v;
    uint64_t per = per_stripe(v->bits - 1), base = (uint64_t)s * per, m0 = m;
    int rc = 0;
    for (; m < per && m - m0 < steps && !rc; m++)
        rc = move_bucket(o, s, base + m);
    if (rc || m == m0)
        return rc;
    if ((rc = wr(o, v->sdir[s], D_MIGRATED, &m, sizeof m)))
        return rc;
    if (m == per) {
        o->done++;
        rc = free_old_stripe(o, s);
    }
    return rc;
}

/* Before a write that may insert a key of hash h: if a resize runs and
 * h's stripe is not drained, move the key's old bucket and the next few
 * at the cursor. A call that only frees (a delete, an expiry, an
 * eviction) moves nothing: it unlinks its node from whichever table holds
 * it (locate), needs no room, as on a full pool, and a DEL of many keys
 * during a resize does not first move every node of the old table (each
 * move a logged write). Inserts finish the resize; until then lookups
 * look in both tables, as during any resize (K3). */
static int migrate(struct op *o, uint64_t h)
{
    struct view *v = &o->s->v;
    if (!v->old)
        return 0;
    unsigned s = stripe_of(h);
    uint64_t per = per_stripe(v->bits - 1), m;
    int rc = rd(o, v->sdir[s], D_MIGRATED, &m, sizeof m);
    if (rc || m == per)
        return rc;
    uint64_t base = (uint64_t)s * per, own = (h >> (64 - (v->bits - 1))) - base;
    if (own >= m && (rc = move_bucket(o, s, base + own)))
        return rc;
    return advance(o, s, m, o->s->resize_step);
}

/* The new-table bucket of h, after migrate(). */
static int bucket_of(struct op *o, uint64_t h, struct bref *b)
{
    struct view *v = &o->s->v;
    return bucket_ref(o, v->sdir[stripe_of(h)], v->bits, h >> (64 - v->bits), b);
}

/* Find a key for reading: in its old bucket while that is not drained,
 * else in the new table. */
/* The store's clock: seconds since it opened, from 1 (0 in a slice: not
 * looked up since), wrapping at REF_CLOCK. The coarse clock reads the
 * kernel's tick without a system call or a TSC read: a lookup can afford
 * it. */
static inline uint32_t ref_now(const kv_store *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)(ts.tv_sec - s->t0) & REF_CLOCK;
}

/* A lookup of a key of hash h: its slice was referenced (kv_evict) now
 * (kv_txn_idle). The word is read first and written only when it changes,
 * at most once a second, so that a hot slice's line is not written again
 * by every lookup. */
static inline void ref_mark(const struct op *o, uint64_t h)
{
    if (o->s->no_refs || o->no_touch)
        return;
    _Atomic uint32_t *r = &o->s->ref[h >> (64 - REF_BITS)];
    uint32_t want = ref_now(o->s) | REF_SEEN;
    if (atomic_load_explicit(r, memory_order_relaxed) != want)
        atomic_store_explicit(r, want, memory_order_relaxed);
}

/* Stores this process adopted: each store's number (kv_store.id) */
static _Atomic uint64_t stores_adopted;

/* A thread's random numbers (xorshift64*): eviction's random order, LFU's
 * increments; nothing depends on them beyond the odds. Seeded by
 * getrandom(2), which a program may define, again for each store the
 * thread works on: the crash simulator's runs draw from their seed, and
 * a run's evictions replay when its store is made again. */
static uint64_t rnd64(const kv_store *s)
{
    static _Thread_local uint64_t x, id;
    if (id != s->id) {
        id = s->id;
        if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            x = mix64((uint64_t)(uintptr_t)&x ^ (uint64_t)ts.tv_nsec);
        }
    }
    x |= !x;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545f4914f6cdd1dULL;
}

#define LFU_INIT 5 /* Redis's LFU_INIT_VAL: a new key's counter */

/* LFU's clock: the store's minutes, 16 bits, as Redis's */
static uint32_t lfu_minutes(const kv_store *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)((ts.tv_sec - s->t0) / 60) & 0xffff;
}

/* A slice's counter less one per lfu_decay minutes since it was last
 * counted (Redis's LFUDecrAndReturn); reads only. */
static unsigned lfu_decayed(const kv_store *s, uint32_t w, uint32_t now)
{
    unsigned c = w & 0xff;
    uint32_t then = w >> 8 & 0xffff, d = atomic_load_explicit(&s->lfu_decay, memory_order_relaxed);
    uint32_t elapsed = now >= then ? now - then : 65535 - then + now;
    uint32_t periods = d ? elapsed / d : 0;
    return periods >= c ? 0 : c - periods;
}

/* A lookup that found the key of hash h (created: a new key) counts in its
 * slice's LFU counter, when kv_lfu_set turned counting on: Redis's
 * updateLFU, logarithmic (LFULogIncr). Written only when it changes. A
 * command's kv_txn counts each key once, as Redis's one lookup a key does,
 * however many calls it makes on the key (HSET: find, open, set). */
static void lfu_count(struct op *o, uint64_t h, int created)
{
    kv_store *s = o->s;
    if (!atomic_load_explicit(&s->lfu_on, memory_order_relaxed) || s->no_refs || o->no_touch)
        return;
    for (unsigned i = 0; i < o->nlfu_seen; i++)
        if (o->lfu_seen[i] == h)
            return;
    if (o->nlfu_seen < sizeof o->lfu_seen / sizeof o->lfu_seen[0])
        o->lfu_seen[o->nlfu_seen++] = h;
    _Atomic uint32_t *w = &s->lfu[h >> (64 - REF_BITS)];
    uint32_t old = atomic_load_explicit(w, memory_order_relaxed), now = lfu_minutes(s);
    unsigned c = lfu_decayed(s, old, now);
    if (created) {
        c = c > LFU_INIT ? c : LFU_INIT;
    } else if (c < 255) {
        unsigned base = c > LFU_INIT ? c - LFU_INIT : 0;
        double p = 1.0 / ((double)base * atomic_load_explicit(&s->lfu_log, memory_order_relaxed)
                          + 1);
        c += (double)(rnd64(s) >> 11) * 0x1.0p-53 < p;
    }
    uint32_t want = now << 8 | c;
    if (want != old)
        atomic_store_explicit(w, want, memory_order_relaxed);
}

void kv_lfu_set(kv_store *s, int on, unsigned log_factor, unsigned decay_minutes)
{
    atomic_store(&s->lfu_log, log_factor);
    atomic_store(&s->lfu_decay, decay_minutes);
    atomic_store(&s->lfu_on, on != 0);
}

void kv_clock_advance(kv_store *s, unsigned secs)
{
    s->t0 -= secs;
}

/* Find (h, k): in its old bucket while that is not drained, else in the
 * new table. *b is the bucket it was found in, else its new-table one. */
static int locate(struct op *o, uint64_t h, struct kv_slice k, struct bref *b, struct hit *hit)
{
    struct view *v = &o->s->v;
    int rc;
    if (v->old) {
        unsigned s = stripe_of(h);
        uint64_t per = per_stripe(v->bits - 1), m, i = h >> (64 - (v->bits - 1));
        if ((rc = rd(o, v->sdir[s], D_MIGRATED, &m, sizeof m)))
            return rc;
        if (m < per && i - (uint64_t)s * per >= m) {
            if ((rc = bucket_ref(o, v->old_sdir[s], v->bits - 1, i, b)) ||
                (rc = chain_find(o, b, h, k, hit)))
                return rc;
        }
    }
    if ((rc = bucket_of(o, h, b)))
        return rc;
    return chain_find(o, b, h, k, hit);
}

static int lookup(struct op *o, struct kv_slice k, struct hit *hit)
{
    uint64_t h = op_hash(o, k);
    ref_mark(o, h);
    struct bref b;
    int rc = locate(o, h, k, &b, hit);
    if (rc > 0)
        lfu_count(o, h, 0);
    return rc;
}

/* Make the table of 2^bits buckets with empty sdirs. */
static int table_make(struct op *o, unsigned bits, txn_obj **out)
{
    txn_obj *t, *sd[STRIPES];
    uint64_t b = bits;
    size_t sdir_size = D_SEG + 8 * (size_t)(per_stripe(bits) / SEG_BUCKETS);
    int rc = alloc(o, TABLE_SIZE, &t);
    for (unsigned s = 0; s < STRIPES && !rc; s++)
        rc = alloc(o, sdir_size, &sd[s]);
    if (!rc)
        rc = wr(o, t, T_BITS, &b, sizeof b);
    if (!rc)
        rc = wr(o, t, T_SDIR, sd, sizeof sd);
    *out = t;
    return rc;
}

/* Fill a view from a table object (and the old one). */
static int view_load(struct op *o, txn_obj *table, txn_obj *old, struct view *v)
{
    uint64_t bits;
    txn_pool *p = o->s->p;
    if (txn_obj_size(p, table) < TABLE_SIZE || (old && txn_obj_size(p, old) < TABLE_SIZE))
        return refuse(TXN_E_CORRUPT, "root: table %p or old table %p is no table", (void *)table,
                      (void *)old);
    int rc = rd(o, table, T_BITS, &bits, sizeof bits);
    if (rc || bits < MIN_BITS || bits > MAX_BITS)
        return rc ? rc : refuse(TXN_E_CORRUPT, "table %p: %llu bits", (void *)table,
                                (unsigned long long)bits);
    v->table = table;
    v->bits = (unsigned)bits;
    v->old = old;
    if ((rc = rd(o, table, T_SDIR, v->sdir, sizeof v->sdir)))
        return rc;
    size_t need = D_SEG + 8 * (size_t)(per_stripe(v->bits) / SEG_BUCKETS);
    for (unsigned st = 0; st < STRIPES; st++)
        if (txn_obj_size(p, v->sdir[st]) < need)
            return refuse(TXN_E_CORRUPT, "table %p: stripe %u's directory %p is no object",
                          (void *)table, st, (void *)v->sdir[st]);
    if (!old)
        return 0;
    if ((rc = rd(o, old, T_BITS, &bits, sizeof bits)) || bits + 1 != v->bits)
        return rc ? rc : refuse(TXN_E_CORRUPT, "old table %p: %llu bits beside %u",
                                (void *)old, (unsigned long long)bits, v->bits);
    return rd(o, old, T_SDIR, v->old_sdir, sizeof v->old_sdir);
}

/* A view to install when a resize transaction commits (apply != 0). */
struct view_swap {
    kv_store *s;
    int apply;
    struct view v;
};

/* ON_COMMIT of a resize start or finish, registered before the unlock so
 * that it runs while every stripe is still locked. */
static void view_install(void *arg)
{
    struct view_swap *w = arg;
    if (!w->apply)
        return;
    w->s->v = w->v;
    atomic_store(&w->s->bits, w->v.bits);
    atomic_store(&w->s->stripes_done, 0);
    atomic_store(&w->s->resizing, w->v.old != NULL);
}

/* Begin a transaction holding every stripe, with `w` installed on commit. */
static int op_begin_all(struct op *o, kv_store *s, struct view_swap *w)
{
    uint64_t all[WORDS];
    memset(all, 0xff, sizeof all);
    return op_begin_locked(o, s, all, 1, view_install, w);
}

/* Double the table if it holds fewer buckets than keys + `extra`:
 * O(STRIPES) allocations, whatever its size; the keys move later, a few
 * buckets per write (migrate). */
static int resize_start(kv_store *s, uint64_t extra)
{
    struct op o;
    struct view_swap w = {.s = s};
    int rc = op_begin_all(&o, s, &w);
    if (rc)
        return rc;
    struct view *v = &s->v;
    if (!v->old && v->bits < MAX_BITS && atomic_load(&s->keys) + extra > ((uint64_t)1 << v->bits)) {
        txn_obj *tabs[2] = {NULL, v->table}; /* R_TABLE, R_OLD */
        if (!(rc = table_make(&o, v->bits + 1, &tabs[0])) &&
            !(rc = wr(&o, s->root, R_TABLE, tabs, sizeof tabs)) &&
            !(rc = view_load(&o, tabs[0], v->table, &w.v)))
            w.apply = 1;
    }
    return op_end(&o, rc);
}

/* Drop the old table once every stripe has moved its buckets. */
static int resize_finish(kv_store *s)
{
    struct op o;
    struct view_swap w = {.s = s};
    int rc = op_begin_all(&o, s, &w);
    if (rc)
        return rc;
    struct view *v = &s->v;
    uint64_t per = v->old ? per_stripe(v->bits - 1) : 0;
    for (unsigned st = 0; st < STRIPES && v->old && !rc; st++) {
        uint64_t m;
        if (!(rc = rd(&o, v->sdir[st], D_MIGRATED, &m, sizeof m)) && m != per)
            return op_end(&o, 0); /* not drained yet */
    }
    txn_obj *none = NULL;
    if (v->old && !rc && !(rc = wr(&o, s->root, R_OLD, &none, sizeof none)) &&
        !(rc = txn_free(o.tx, v->old))) {
        w.v = *v;
        w.v.old = NULL;
        w.apply = 1;
    }
    return op_end(&o, rc);
}

/* After a call that added keys or drained a stripe. A failed resize (a
 * full pool) leaves the table correct, with longer chains, and is tried
 * again by a later write. */
static void maybe_resize(kv_store *s)
{
    if (atomic_load(&s->resizing)) {
        if (atomic_load(&s->stripes_done) < STRIPES)
            return;
    } else if (atomic_load(&s->keys) <= ((uint64_t)1 << atomic_load(&s->bits))) {
        return;
    }
    if (pthread_mutex_trylock(&s->resize))
        return; /* another thread is at it */
    if (atomic_load(&s->resizing))
        resize_finish(s);
    else
        resize_start(s, 0);
    pthread_mutex_unlock(&s->resize);
}

/* Drain the running resize: every stripe's old buckets moved, a batch of
 * DRAIN_STEP buckets per transaction holding that stripe alone, so that
 * other clients are served between them; then the old table goes. */
#define DRAIN_STEP 256
static int drain(kv_store *s)
{
    int rc = 0;
    for (unsigned st = 0; st < STRIPES && !rc && atomic_load(&s->resizing); st++) {
        uint64_t want[WORDS] = {0}, m = 0, per = 0;
        want[st / 64] = 1ULL << (st % 64);
        do {
            struct op o;
            if ((rc = op_begin_locked(&o, s, want, 1, NULL, NULL)))
                break;
            per = per_stripe(s->v.bits - 1);
            if (!(rc = rd(&o, s->v.sdir[st], D_MIGRATED, &m, sizeof m)) && m < per)
                rc = advance(&o, st, m, DRAIN_STEP);
            rc = op_end(&o, rc);
            m += DRAIN_STEP; /* advance moved that many, or reached the end */
        } while (!rc && m < per);
    }
    return rc || !atomic_load(&s->resizing) ? rc : resize_finish(s);
}

/* Best effort: a failure (a full pool) leaves the table as it was, correct,
 * and the command runs on longer chains. */
void kv_reserve(kv_store *s, uint64_t n)
{
    pthread_mutex_lock(&s->resize);
    uint64_t keys = atomic_load(&s->keys);
    unsigned bits = atomic_load(&s->bits);
    if (keys + n > (uint64_t)2 << bits) { /* else the usual doubling keeps up */
        int rc = drain(s); /* a resize under way */
        while (!rc && bits < MAX_BITS && keys + n > (uint64_t)1 << bits) {
            if ((rc = resize_start(s, n)) || !atomic_load(&s->resizing) || (rc = drain(s)) ||
                atomic_load(&s->resizing) || atomic_load(&s->bits) == bits)
                break; /* no room, or no progress */
            bits = atomic_load(&s->bits);
            keys = atomic_load(&s->keys);
        }
    }
    pthread_mutex_unlock(&s->resize);
}

/* ---- the calls */

/* Expiry times are wall-clock ms since the Unix epoch: they mean the same
 * after a restart. */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int node_expiry(struct op *o, const struct hit *hit, uint64_t *at)
{
    *at = 0;
    return has_ttl(&hit->h) ? rd(o, hit->node, HDR, at, sizeof *at) : 0;
}

/* Write a node's expiry word if it changes (the node has KF_TTL). */
static int set_expiry_word(struct op *o, const struct hit *hit, uint64_t at)
{
    uint64_t old;
    int rc = rd(o, hit->node, HDR, &old, sizeof old);
    return rc || old == at ? rc : wr(o, hit->node, HDR, &at, sizeof at);
}

static int insert(struct op *o, struct bref *b, uint64_t h, struct kv_slice k,
                  struct kv_slice v, uint64_t at, unsigned type)
{
    txn_obj *head, *node;
    uint64_t n;
    int rc = bucket_make(o, b);
    if (!rc)
        rc = bucket_get(o, b, &head, &n);
    if (!rc)
        rc = node_make(o, h, k, v, at, type, head, &node);
    if (!rc)
        lfu_count(o, h, 1);
    if (!rc)
        rc = bucket_put(o, b, node, n + 1);
    if (!rc)
        o->dkeys++;
    return rc;
}

/* Bury the node of `hit` (lazy free): it stays where it is, no key any
 * more, its bytes and expiry out of the counts, its hash queued once the
 * transaction commits. */
static int bury(struct op *o, const struct hit *hit)
{
    const struct node_hdr *h = &hit->h;
    int64_t bytes = (int64_t)obj_bytes(o->s, hit->node, dicted(h) ? NULL : h->val);
    int rc = 0;
    if (pieced(h)) {
        txn_obj **list;
        uint64_t n;
        if ((rc = piece_list(o, hit->node, h, &list, &n)))
            return rc;
        for (uint64_t i = 0; i < n; i++)
            bytes += (int64_t)txn_obj_size(o->s->p, list[i]);
        free(list);
    }
    uint64_t *q = realloc(o->lazy, (o->nlazy + 1) * sizeof *q), klen = h->klen | KF_LAZY;
    if (!q)
        return TXN_E_NOMEM;
    o->lazy = q;
    if ((rc = wr(o, hit->node, offsetof(struct node_hdr, klen), &klen, sizeof klen)))
        return rc;
    o->lazy[o->nlazy++] = h->hash;
    o->dbytes -= bytes;
    o->dexp -= has_ttl(h);
    return 0;
}

/* The bytes a[0..n) and b[0..n) have in common at their start, and at
 * their end: compared a word at a time. */
static size_t same_head(const char *a, const char *b, size_t n)
{
    size_t i = 0;
    for (uint64_t x, y; i + 8 <= n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y)
            break;
    }
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

static size_t same_tail(const char *a, const char *b, size_t n)
{
    size_t i = 0;
    for (uint64_t x, y; i + 8 <= n; i += 8) {
        memcpy(&x, a + n - i - 8, 8);
        memcpy(&y, b + n - i - 8, 8);
        if (x != y)
            break;
    }
    while (i < n && a[n - i - 1] == b[n - i - 1])
        i++;
    return i;
}

/* The value object of `hit` (not in pieces) takes v in place: only the
 * bytes that differ from its old ones are written, and the length if it
 * changed. A packed hash's HSET changes a few bytes of its record: they
 * are what the engine logs, instead of a new object, the whole record
 * and the old object's free (docs/kvstore.md, section 41). */
static int overwrite(struct op *o, const struct hit *hit, struct kv_slice v, uint64_t at)
{
    size_t old = hit->h.vlen < v.n ? (size_t)hit->h.vlen : v.n, lo = 0, hi = v.n;
    char small[512], *p = old <= sizeof small ? small : malloc(old);
    if (!p)
        return TXN_E_NOMEM;
    int rc = rd(o, hit->h.val, 0, p, old);
    if (!rc) {
        lo = same_head(p, v.p, old);
        if (v.n <= hit->h.vlen) /* not grown: a common end is not written */
            hi -= same_tail(p + lo, v.p + lo, old - lo);
        if (hi > lo)
            rc = wr(o, hit->h.val, lo, v.p + lo, hi - lo);
    }
    if (p != small)
        free(p);
    uint64_t n = v.n;
    if (!rc && n != hit->h.vlen)
        rc = wr(o, hit->node, N_VLEN, &n, sizeof n);
    return rc || !at ? rc : set_expiry_word(o, hit, at);
}

/* A new value of `type` (and expiry `at`, 0: none) for the node of `hit`,
 * by the cheapest way that logs least: in place if it is inline and as
 * long as the old one and the node keeps its kind (type, with or without
 * an expiry); in its value object if that has room and stays at least half
 * full (overwrite); a new value object if both are large (and the old one
 * is not in pieces); else a new node in the old one's place. */
static int replace(struct op *o, const struct bref *b, const struct hit *hit,
                   struct kv_slice k, struct kv_slice v, uint64_t at, unsigned type)
{
    const struct node_hdr *h = &hit->h;
    int sep = v.n > INLINE_MAX, rc;
    int same = has_ttl(h) == (at != 0) && type_of(h) == type;
    if (same && !h->val && !sep && h->vlen == v.n) {
        rc = wr(o, hit->node, val_off(h), v.p, v.n);
        return rc || !at ? rc : set_expiry_word(o, hit, at);
    }
    /* the old value object when it has room and would not be more than
     * half empty (a shrunk value keeps its object, as a splice's does) */
    if (same && h->val && sep && !pieced(h) && !dicted(h) && v.n <= PIECE) {
        size_t room = txn_obj_size(o->s->p, h->val);
        if (v.n <= room && 2 * v.n >= room)
            return overwrite(o, hit, v, at);
    }
    if (same && h->val && sep && !pieced(h) && !dicted(h)) {
        txn_obj *nv;
        if ((rc = alloc(o, v.n, &nv)) || (rc = wr(o, nv, 0, v.p, v.n)))
            return rc;
        o->dbytes += (int64_t)txn_obj_size(o->s->p, nv) - (int64_t)txn_obj_size(o->s->p, h->val);
        if ((rc = txn_free(o->tx, h->val)))
            return rc;
        uint64_t w[2] = {v.n, (uint64_t)(uintptr_t)nv}; /* vlen, val */
        if ((rc = wr(o, hit->node, N_VLEN, w, sizeof w)))
            return rc;
        return at ? set_expiry_word(o, hit, at) : 0;
    }
    txn_obj *node;
    if (lazy_worth(h)) { /* the new node goes before the buried old one */
        if ((rc = node_make(o, h->hash, k, v, at, type, hit->node, &node)) ||
            (rc = bury(o, hit)))
            return rc;
        return relink(o, b, hit, node, 1);
    }
    if ((rc = node_make(o, h->hash, k, v, at, type, h->next, &node)) ||
        (rc = node_free(o, hit->node, h)))
        return rc;
    return relink(o, b, hit, node, 0);
}

static int del_hit(struct op *o, const struct bref *b, const struct hit *hit)
{
    if (lazy_worth(&hit->h)) {
        int rc = bury(o, hit);
        if (!rc)
            o->dkeys--;
        return rc;
    }
    int rc = node_free(o, hit->node, &hit->h);
    if (!rc && !(rc = relink(o, b, hit, hit->h.next, -1)))
        o->dkeys--;
    return rc;
}

/* Find k on a writing path: a call that may insert (!lean) moves the
 * key's old bucket first (migrate), so that *b is its new-table bucket;
 * a lean caller only changes or unlinks a node found, never inserts, and
 * *b may be its old bucket. A key whose time has come is deleted here, in
 * the transaction that found it, and reads as missing (passive expiry).
 * 1 found, 0 missing, <0 an error. */
static int find_w(struct op *o, struct kv_slice k, uint64_t *h, struct bref *b, struct hit *hit,
                  int lean)
{
    *h = op_hash(o, k);
    ref_mark(o, *h);
    int rc = lean ? 0 : migrate(o, *h);
    if (!rc)
        rc = locate(o, *h, k, b, hit);
    if (rc > 0 && has_ttl(&hit->h)) {
        uint64_t at;
        if ((rc = node_expiry(o, hit, &at)))
            return rc;
        if (at <= now_ms())
            return del_hit(o, b, hit);
        rc = 1;
    }
    if (rc > 0)
        lfu_count(o, *h, 0);
    return rc;
}

/* Set k to v of `type` expiring at `at` (0: never; KV_KEEPTTL: as it
 * was). */
static int set_one(struct op *o, struct kv_slice k, struct kv_slice v, uint64_t at,
                   unsigned type)
{
    uint64_t h;
    struct bref b;
    struct hit hit;
    int found = find_w(o, k, &h, &b, &hit, 0), rc;
    if (found < 0)
        return found;
    if (at == KV_KEEPTTL) {
        at = 0;
        if (found && (rc = node_expiry(o, &hit, &at)))
            return rc;
    }
    return found ? replace(o, &b, &hit, k, v, at, type) : insert(o, &b, h, k, v, at, type);
}

/* The node of `hit` again, with expiry `at` (0: none) instead of its own:
 * a new node of the other kind holding the same key, value (a large value
 * object is kept) and next. */
static int retag(struct op *o, const struct bref *b, const struct hit *hit, uint64_t at)
{
    struct node_hdr nh = hit->h;
    nh.klen = (hit->h.klen & ~KF_TTL) | (at ? KF_TTL : 0); /* the type stays */
    size_t body = (size_t)klen_of(&nh) + (nh.val ? 0 : (size_t)nh.vlen);
    char small[512], *p = body <= sizeof small ? small : malloc(body);
    txn_obj *node;
    if (!p)
        return TXN_E_NOMEM;
    int rc = rd(o, hit->node, key_off(&hit->h), p, body);
    if (!rc)
        rc = alloc(o, key_off(&nh) + body, &node);
    if (!rc)
        rc = wr(o, node, 0, &nh, sizeof nh);
    if (!rc && at)
        rc = wr(o, node, HDR, &at, sizeof at);
    if (!rc)
        rc = wr(o, node, key_off(&nh), p, body);
    if (p != small)
        free(p);
    if (rc)
        return rc;
    o->dbytes += (int64_t)txn_obj_size(o->s->p, node) - (int64_t)txn_obj_size(o->s->p, hit->node);
    o->dexp += (at != 0) - has_ttl(&hit->h);
    if ((rc = txn_free(o->tx, hit->node)))
        return rc;
    return relink(o, b, hit, node, 0);
}

/* The value of a node found by a read-only call: read in place (nothing
 * was written in this transaction). */
static const char *value_ptr(struct op *o, const struct hit *hit)
{
    if (hit->h.val)
        return txn_open(o->tx, hit->h.val, TXN_RO);
    const char *p = txn_open(o->tx, hit->node, TXN_RO);
    return p ? p + val_off(&hit->h) : NULL;
}

/* ---- a transaction over chosen keys */

struct kv_txn {
    struct op o;
    int write;   /* begun for changes */
    int changed; /* a read-only one deleted an expired key */
    uint64_t calls; /* kv_txn calls made so far: a kv_val opened before
                       the last one may hold a stale node header */
};

int kv_txn_begin(kv_store *s, size_t n, const struct kv_slice *keys, int write, kv_txn **out)
{
    kv_txn *t = malloc(sizeof *t);
    if (!t)
        return TXN_E_NOMEM;
    t->write = write;
    t->changed = 0;
    t->calls = 0;
    uint64_t want[WORDS];
    want_keys(n, keys, want);
    int rc = op_begin_locked(&t->o, s, want, write, NULL, NULL);
    if (rc) {
        free(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* A key the transaction did not lock would race with other calls. Every
 * kv_txn call begins here: its key's hash is kept for the rest of it. */
static int txn_holds(kv_txn *t, struct kv_slice k)
{
    t->calls++;
    t->o.hk = k;
    t->o.hv = kv_hash(k.p, k.n);
    unsigned s = stripe_of(t->o.hv);
    return t->o.locked[s / 64] >> (s % 64) & 1;
}

/* Look key up; an expired one is deleted, even by a read-only transaction
 * (which then counts as a writing one: kv_commits, kv_key_version). */
static int find(kv_txn *t, struct kv_slice key, struct hit *hit)
{
    int rc = lookup(&t->o, key, hit);
    uint64_t at, h;
    if (rc <= 0 || !has_ttl(&hit->h))
        return rc;
    if ((rc = node_expiry(&t->o, hit, &at)))
        return rc;
    if (at > now_ms())
        return 1;
    if (!t->write && !t->changed) {
        if ((rc = txn_defer(t->o.tx, TXN_ON_COMMIT, count_commit, &t->o)))
            return rc;
        t->changed = 1;
    }
    struct bref b;
    rc = find_w(&t->o, key, &h, &b, hit, 1); /* deletes it */
    return rc < 0 ? rc : 0;
}

int kv_txn_read(kv_txn *t, struct kv_slice key, kv_value_fn fn, void *arg, unsigned *type)
{
    if (!txn_holds(t, key))
        return TXN_E_STATE;
    struct hit hit;
    int rc = find(t, key, &hit);
    if (rc <= 0) {
        if (!rc && fn)
            fn(arg, NULL, 0);
        return rc;
    }
    size_t skip = 0; /* an item read as a string: without its header */
    if (type)
        *type = type_of(&hit.h);
    else if (type_of(&hit.h) == KV_ITEM)
        skip = hit.h.vlen >= KV_ITEM_HDR ? KV_ITEM_HDR : (size_t)hit.h.vlen;
    else if (fn && type_of(&hit.h) != KV_STRING)
        return KV_E_WRONGTYPE;
    if (!fn)
        return 1;
    if (dicted(&hit.h)) { /* its elements: kv_txn_dict */
        fn(arg, "", 0);
        return 1;
    }
    if (pieced(&hit.h)) { /* a string (skip 0), gathered */
        char *v = malloc(hit.h.vlen);
        if (!v)
            return TXN_E_NOMEM;
        if (!(rc = pieces_read(&t->o, hit.node, &hit.h, 0, hit.h.vlen, v)))
            fn(arg, v, hit.h.vlen);
        free(v);
        return rc ? rc : 1;
    }
    if (!t->write && !t->changed) { /* nothing written: read in place */
        const char *v = value_ptr(&t->o, &hit);
        if (!v)
            return txn_last_error(t->o.tx);
        fn(arg, v + skip, hit.h.vlen - skip);
        return 1;
    }
    /* this transaction may have written it: through txn_read */
    char small[INLINE_MAX], *v = hit.h.vlen <= sizeof small ? small : malloc(hit.h.vlen);
    if (!v)
        return TXN_E_NOMEM;
    rc = hit.h.val ? rd(&t->o, hit.h.val, 0, v, hit.h.vlen)
                   : rd(&t->o, hit.node, val_off(&hit.h), v, hit.h.vlen);
    if (!rc)
        fn(arg, v + skip, hit.h.vlen - skip);
    if (v != small)
        free(v);
    return rc ? rc : 1;
}

int kv_txn_getrange(kv_txn *t, struct kv_slice key, uint64_t off, uint64_t n, kv_value_fn fn,
                    void *arg, uint64_t *len)
{
    return kv_txn_getrange_as(t, key, KV_STRING, off, n, fn, arg, len);
}

/* as: KV_STRING (a string or an item) or the one type the key must
 * hold */
static int type_ok(unsigned type, unsigned as)
{
    return as == KV_STRING ? type == KV_STRING || type == KV_ITEM : type == as;
}

int kv_txn_getrange_as(kv_txn *t, struct kv_slice key, unsigned as, uint64_t off, uint64_t n,
                       kv_value_fn fn, void *arg, uint64_t *len)
{
    *len = 0;
    if (!txn_holds(t, key))
        return TXN_E_STATE;
    struct hit hit;
    int rc = find(t, key, &hit);
    if (rc <= 0) {
        if (!rc && fn)
            fn(arg, NULL, 0);
        return rc;
    }
    unsigned type = type_of(&hit.h);
    if (!type_ok(type, as))
        return KV_E_WRONGTYPE;
    /* an item reads as its string: without its header */
    uint64_t skip = type == KV_ITEM ? (hit.h.vlen < KV_ITEM_HDR ? hit.h.vlen : KV_ITEM_HDR) : 0;
    uint64_t have = hit.h.vlen - skip;
    *len = have;
    off = off < have ? off : have;
    n = n < have - off ? n : have - off;
    if (!fn)
        return 1;
    if (!pieced(&hit.h) && !t->write && !t->changed) { /* nothing written: in place */
        const char *v = value_ptr(&t->o, &hit);
        if (!v)
            return txn_last_error(t->o.tx);
        fn(arg, v + skip + off, n);
        return 1;
    }
    char small[INLINE_MAX], *v = n <= sizeof small ? small : malloc(n);
    if (!v)
        return TXN_E_NOMEM;
    if (pieced(&hit.h)) /* a string or a list: skip 0 */
        rc = pieces_read(&t->o, hit.node, &hit.h, off, n, v);
    else if (n)
        rc = hit.h.val ? rd(&t->o, hit.h.val, (size_t)(skip + off), v, n)
                       : rd(&t->o, hit.node, val_off(&hit.h) + skip + off, v, n);
    if (!rc)
        fn(arg, v, n);
    if (v != small)
        free(v);
    return rc ? rc : 1;
}

int kv_txn_ttl(kv_txn *t, struct kv_slice key, uint64_t *at)
{
    if (!txn_holds(t, key))
        return TXN_E_STATE;
    struct hit hit;
    int rc = find(t, key, &hit);
    *at = 0;
    if (rc > 0 && (rc = node_expiry(&t->o, &hit, at)) == 0)
        rc = 1;
    return rc;
}

int kv_txn_get(kv_txn *t, struct kv_slice key, kv_value_fn fn, void *arg)
{
    return kv_txn_read(t, key, fn, arg, NULL);
}

int kv_txn_write(kv_txn *t, struct kv_slice key, struct kv_slice value, uint64_t at,
                 unsigned type)
{
    if (!t->write || !txn_holds(t, key) || type > KV_TYPE_MAX)
        return TXN_E_STATE;
    return set_one(&t->o, key, value, at, type);
}

int kv_txn_put(kv_txn *t, struct kv_slice key, struct kv_slice value, uint64_t at)
{
    return kv_txn_write(t, key, value, at, KV_STRING);
}

/* The node of key for a change by a writing transaction: 1, 0, <0. */
static int find_change(kv_txn *t, struct kv_slice key, struct bref *b, struct hit *hit,
                       int lean)
{
    uint64_t h;
    if (!t->write || !txn_holds(t, key))
        return TXN_E_STATE;
    return find_w(&t->o, key, &h, b, hit, lean);
}

int kv_txn_expire(kv_txn *t, struct kv_slice key, uint64_t at)
{
    struct bref b;
    struct hit hit;
    int rc = find_change(t, key, &b, &hit, 1);
    if (rc <= 0)
        return rc;
    if (has_ttl(&hit.h) && at)
        rc = set_expiry_word(&t->o, &hit, at);
    else if (has_ttl(&hit.h) || at)
        rc = retag(&t->o, &b, &hit, at);
    return rc ? rc : 1;
}

/* The bucket's cache miss is a large part of a many-key DEL's time on
 * every engine; issued some keys ahead, it overlaps with the work on the
 * keys before. A handle is a plain address (txn.h): the payload starts at
 * it (undo, redo1, none) or 8 bytes on (redo, incll), so the line of the
 * handle's offset + 8 holds the bucket's start on all of these; on cow
 * the hint is useless, not wrong. Only the address is used: reading the
 * bucket here to load its first node too went through redo1's and
 * incll's write sets, a map probe per key, and gained nothing measurable
 * on the others. */
void kv_txn_prefetch(kv_txn *t, struct kv_slice key)
{
    uint64_t h = kv_hash(key.p, key.n);
    unsigned s = stripe_of(h);
    struct bref b;
    if ((t->o.locked[s / 64] >> (s % 64) & 1) && !bucket_of(&t->o, h, &b) && b.seg)
        __builtin_prefetch((const char *)b.seg + b.off + 8);
}

int kv_txn_del(kv_txn *t, struct kv_slice key)
{
    struct bref b;
    struct hit hit;
    int rc = find_change(t, key, &b, &hit, 1);
    if (rc <= 0)
        return rc;
    return (rc = del_hit(&t->o, &b, &hit)) ? rc : 1;
}

void kv_txn_no_touch(kv_txn *t)
{
    t->o.no_touch = 1;
}

int kv_txn_idle(kv_txn *t, struct kv_slice key, uint64_t *secs)
{
    if (!txn_holds(t, key))
        return TXN_E_STATE;
    kv_store *s = t->o.s;
    uint32_t now = ref_now(s);
    uint32_t at = atomic_load_explicit(&s->ref[t->o.hv >> (64 - REF_BITS)],
                                       memory_order_relaxed) & REF_CLOCK;
    /* not looked up since the store opened: idle since then (as Redis's
     * keys loaded at start); else the seconds since, the clock wrapped */
    *secs = (at ? now - at : now - 1) & REF_CLOCK;
    return 0;
}

int kv_txn_freq(kv_txn *t, struct kv_slice key, unsigned *freq)
{
    if (!txn_holds(t, key))
        return TXN_E_STATE;
    kv_store *s = t->o.s;
    uint32_t w = atomic_load_explicit(&s->lfu[t->o.hv >> (64 - REF_BITS)], memory_order_relaxed);
    *freq = lfu_decayed(s, w, lfu_minutes(s));
    return 0;
}

txn *kv_txn_tx(kv_txn *t)
{
    return t->o.tx;
}

int kv_txn_dict(kv_txn *t, struct kv_slice key, unsigned *type, txn_obj **dict)
{
    struct hit hit;
    *dict = NULL;
    if (!txn_holds(t, key))
        return TXN_E_STATE;
    int rc = find(t, key, &hit);
    if (rc <= 0 || !dicted(&hit.h))
        return rc < 0 ? rc : 0;
    *type = type_of(&hit.h);
    *dict = hit.h.val;
    return 1;
}

int kv_txn_put_dict(kv_txn *t, struct kv_slice key, txn_obj *dict, uint64_t at, unsigned type)
{
    uint64_t h;
    struct bref b;
    struct hit hit;
    int found = find_change(t, key, &b, &hit, 0), rc;
    if (found < 0)
        return found;
    if (found && dicted(&hit.h) && hit.h.val == dict && at == KV_KEEPTTL &&
        type_of(&hit.h) == type)
        return 0;
    if (at == KV_KEEPTTL) {
        at = 0;
        if (found && (rc = node_expiry(&t->o, &hit, &at)))
            return rc;
    }
    h = t->o.hv;
    txn_obj *head = NULL, *node;
    uint64_t n = 0;
    /* an old value of its own, big, is buried behind the new node */
    int bury_old = found && lazy_worth(&hit.h) && !(dicted(&hit.h) && hit.h.val == dict);
    if (!found && ((rc = bucket_make(&t->o, &b)) || (rc = bucket_get(&t->o, &b, &head, &n))))
        return rc;
    if ((rc = node_make(&t->o, h, key, (struct kv_slice){NULL, 0}, at, type,
                        bury_old ? hit.node : found ? hit.h.next : head, &node)))
        return rc;
    if (!found)
        lfu_count(&t->o, h, 1); /* a new key, as insert's */
    /* the node made as for an empty value, then marked as the table's */
    uint64_t w[3] = {key.n | (at ? KF_TTL : 0) | type_bits(type) | KF_DICT, 0,
                     (uint64_t)(uintptr_t)dict}; /* klen, vlen, val */
    if ((rc = wr(&t->o, node, 16, w, sizeof w)))
        return rc;
    if (found && dicted(&hit.h) && hit.h.val == dict) { /* the same table: keep it */
        t->o.dexp -= has_ttl(&hit.h);
        t->o.dbytes -= (int64_t)txn_obj_size(t->o.s->p, hit.node);
        if ((rc = txn_free(t->o.tx, hit.node)))
            return rc;
    } else if (bury_old && (rc = bury(&t->o, &hit))) {
        return rc;
    } else if (found && !bury_old && (rc = node_free(&t->o, hit.node, &hit.h))) {
        return rc;
    }
    if (found)
        return relink(&t->o, &b, &hit, node, bury_old);
    t->o.dkeys++;
    return bucket_put(&t->o, &b, node, n + 1);
}

int kv_txn_move(kv_txn *t, struct kv_slice src, struct kv_slice dst)
{
    struct bref b, bd;
    struct hit hit;
    uint64_t hd;
    int rc = find_change(t, src, &b, &hit, 1);
    if (rc <= 0 || (src.n == dst.n && !memcmp(src.p, dst.p, src.n)))
        return rc;
    /* dst's old value goes, its bucket moved to the new table (an insert) */
    if ((rc = find_change(t, dst, &bd, &hit, 0)) < 0 ||
        (rc && (rc = del_hit(&t->o, &bd, &hit))))
        return rc;
    hd = t->o.hv;
    if ((rc = bucket_of(&t->o, hd, &bd)) || (rc = bucket_make(&t->o, &bd)))
        return rc;
    /* src again: the deletion may have relinked its chain */
    if ((rc = find_change(t, src, &b, &hit, 1)) <= 0)
        return rc < 0 ? rc : TXN_E_STATE;
    struct node_hdr nh = hit.h;
    size_t extra = has_ttl(&nh) ? 8 : 0, inl = nh.val ? 0 : (size_t)nh.vlen;
    size_t size = HDR + extra + dst.n + inl;
    char *img = malloc(size);
    txn_obj *node, *head;
    uint64_t n;
    if (!img)
        return TXN_E_NOMEM;
    nh.hash = hd;
    nh.klen = dst.n | (hit.h.klen & KF_ALL);
    memcpy(img, &nh, sizeof nh);
    memcpy(img + HDR + extra, dst.p, dst.n);
    rc = extra ? rd(&t->o, hit.node, HDR, img + HDR, 8) : 0;
    if (!rc && inl)
        rc = rd(&t->o, hit.node, val_off(&hit.h), img + HDR + extra + dst.n, inl);
    if (!rc)
        rc = alloc(&t->o, size, &node);
    int64_t was = (int64_t)txn_obj_size(t->o.s->p, hit.node);
    if (!rc)
        rc = txn_free(t->o.tx, hit.node); /* its value objects stay: node's now */
    if (!rc)
        rc = relink(&t->o, &b, &hit, hit.h.next, -1);
    if (!rc)
        rc = bucket_get(&t->o, &bd, &head, &n);
    if (!rc) {
        memcpy(img, &head, sizeof head); /* node.next */
        rc = wr(&t->o, node, 0, img, size);
    }
    free(img);
    if (!rc)
        rc = bucket_put(&t->o, &bd, node, n + 1);
    if (!rc)
        t->o.dbytes += (int64_t)txn_obj_size(t->o.s->p, node) - was;
    return rc ? rc : 1;
}

int kv_txn_splice(kv_txn *t, struct kv_slice key, uint64_t off, struct kv_slice src,
                  uint64_t max, uint64_t *len)
{
    return kv_txn_splice_as(t, key, KV_STRING, off, src, max, len);
}

int kv_txn_splice_as(kv_txn *t, struct kv_slice key, unsigned as, uint64_t off,
                     struct kv_slice src, uint64_t max, uint64_t *len)
{
    struct bref b;
    struct hit hit;
    int found = find_change(t, key, &b, &hit, 0), rc, append = off == KV_SPLICE_END;
    if (found < 0)
        return found;
    struct op *o = &t->o;
    unsigned type = found ? type_of(&hit.h) : KV_STRING;
    *len = 0;
    if (!found && as != KV_STRING)
        return 0; /* only a string is made here */
    if (!type_ok(type, as))
        return KV_E_WRONGTYPE;
    /* an item reads as its string: without its header */
    uint64_t skip = type == KV_ITEM ? (hit.h.vlen < KV_ITEM_HDR ? hit.h.vlen : KV_ITEM_HDR) : 0;
    uint64_t have = found ? hit.h.vlen - skip : 0;
    *len = have;
    if (src.n == 0 && (found || !append))
        return found; /* nothing to write (an empty APPEND makes the key) */
    if (append)
        off = have;
    if (off > max || src.n > max - off)
        return KV_E_TOOBIG;
    uint64_t want = off + src.n > have ? off + src.n : have;
    *len = want;
    if (found && pieced(&hit.h)) /* a string or a list (skip 0) */
        return (rc = pieces_splice(o, &hit, off, src, want)) ? rc : 1;
    /* in place: a value object with room, which keeps its node and
     * expiry; only the new bytes and the length are written */
    if (found && type == as && hit.h.val && want <= txn_obj_size(o->s->p, hit.h.val) &&
        want <= PIECE) {
        if ((off > have && (rc = wr_zeros(o, hit.h.val, have, off - have))) ||
            (rc = wr(o, hit.h.val, (size_t)off, src.p, src.n)))
            return rc;
        return want == hit.h.vlen ? 1 : (rc = wr(o, hit.node, N_VLEN, &want, sizeof want)) ? rc : 1;
    }
    /* else a copy: the old string, then src, zeros between */
    char *v = calloc(1, want ? want : 1);
    if (!v)
        return TXN_E_NOMEM;
    rc = !have      ? 0
         : hit.h.val ? rd(o, hit.h.val, (size_t)skip, v, have)
                     : rd(o, hit.node, val_off(&hit.h) + skip, v, have);
    if (!rc)
        memcpy(v + off, src.p, src.n);
    if (!rc && (!found || want <= INLINE_MAX)) {
        /* a new key is made as SET makes it; a short value stays inline */
        rc = set_one(o, key, (struct kv_slice){v, want}, KV_KEEPTTL, as);
    } else if (!rc) {
        /* a value object with room to grow (up to PIECE bytes), or pieces
         * past that, in the node's header (its key, expiry and place in
         * the chain stay) */
        txn_obj *nv;
        uint64_t cap = piece_room(want), flags = type_bits(as);
        if (cap > max)
            cap = max; /* >= want */
        if (want > PIECE) {
            rc = pieces_make(o, v, want, &nv);
            flags |= KF_PIECES;
        } else if (!(rc = alloc(o, cap, &nv)) && !(rc = wr(o, nv, 0, v, want))) {
            o->dbytes += (int64_t)txn_obj_size(o->s->p, nv);
        }
        if (!rc && hit.h.val) {
            o->dbytes -= (int64_t)txn_obj_size(o->s->p, hit.h.val);
            rc = txn_free(o->tx, hit.h.val);
        }
        /* klen (its type becomes `as`: an item's a string's), vlen, val */
        uint64_t w[3] = {(hit.h.klen & ~(KF_TYPE | KF_TYPE_HI | KF_PIECES)) | flags, want,
                         (uint64_t)(uintptr_t)nv};
        if (!rc)
            rc = wr(o, hit.node, offsetof(struct node_hdr, klen), w, sizeof w);
    }
    free(v);
    return rc ? rc : found;
}

/* ---- a value found once (kv_val): its node's header and the handles of
 * the pieces it touched are kept, so that a read or write by offset costs
 * the txn_read or txn_write of its bytes, not a key lookup each (a large
 * sorted set's B-tree nodes: zbtree.c) */

struct kv_val {
    kv_txn *t;
    struct kv_slice key;
    unsigned as;
    uint64_t calls; /* t->calls when hit was found: another kv_txn call
                       since may have moved or changed the node */
    struct hit hit;
    uint64_t skip;  /* an item's header, read past */
    txn_obj **pc;   /* handles of the pieces read so far (NULL: not yet),
                       one a piece when pieced */
};

/* (Re)find v's key: 1, 0 missing, KV_E_WRONGTYPE, or an error. */
static int val_find(kv_val *v)
{
    kv_txn *t = v->t;
    struct bref b;
    int rc = t->write ? find_change(t, v->key, &b, &v->hit, 1)
             : txn_holds(t, v->key) ? find(t, v->key, &v->hit)
                                    : TXN_E_STATE;
    v->calls = t->calls;
    free(v->pc);
    v->pc = NULL;
    if (rc <= 0)
        return rc;
    unsigned type = type_of(&v->hit.h);
    if (!type_ok(type, v->as))
        return KV_E_WRONGTYPE;
    v->skip = type == KV_ITEM ? (v->hit.h.vlen < KV_ITEM_HDR ? v->hit.h.vlen : KV_ITEM_HDR) : 0;
    if (pieced(&v->hit.h) && type == KV_ITEM) /* kv_txn_splice_as makes strings of them */
        return refuse(TXN_E_CORRUPT, "node %p: an item in pieces", (void *)v->hit.node);
    if (pieced(&v->hit.h) && !(v->pc = calloc(pieces_of(v->hit.h.vlen) + 1, sizeof *v->pc)))
        return TXN_E_NOMEM;
    return 1;
}

int kv_txn_open_as(kv_txn *t, struct kv_slice key, unsigned as, kv_val **out, uint64_t *len)
{
    *out = NULL;
    *len = 0;
    kv_val *v = calloc(1, sizeof *v);
    if (!v)
        return TXN_E_NOMEM;
    v->t = t;
    v->key = key;
    v->as = as;
    int rc = val_find(v);
    if (rc <= 0) {
        kv_val_close(v);
        return rc;
    }
    *len = v->hit.h.vlen - v->skip;
    *out = v;
    return 1;
}

void kv_val_close(kv_val *v)
{
    if (v)
        free(v->pc);
    free(v);
}

/* The handle of piece i (< the value's pieces), checked once by
 * piece_range. */
static int val_piece(kv_val *v, uint64_t i, txn_obj **out)
{
    if (!v->pc[i]) {
        txn_obj **list;
        uint64_t got;
        int rc = piece_range(&v->t->o, v->hit.node, &v->hit.h, i, 1, &list, &got);
        if (rc)
            return rc;
        v->pc[i] = got ? list[0] : NULL;
        free(list);
        if (!got)
            return TXN_E_CORRUPT;
    }
    *out = v->pc[i];
    return 0;
}

/* Bytes [off, off + n) of v's value, inside it: into r, or from w. */
static int val_io(kv_val *v, uint64_t off, char *r, const char *w, size_t n)
{
    int rc;
    if (v->calls != v->t->calls && (rc = val_find(v)) <= 0)
        return rc < 0 ? rc : TXN_E_STATE; /* deleted since it was opened */
    struct op *o = &v->t->o;
    const struct node_hdr *h = &v->hit.h;
    uint64_t have = h->vlen - v->skip;
    if (off > have || n > have - off)
        return TXN_E_INVAL;
    if (!pieced(h)) {
        txn_obj *obj = h->val ? h->val : v->hit.node;
        size_t at = (h->val ? 0 : val_off(h)) + (size_t)(v->skip + off);
        return w ? wr(o, obj, at, w, n) : rd(o, obj, at, r, n);
    }
    for (uint64_t p = off, end = off + n; p < end;) { /* skip is 0 (val_find) */
        uint64_t i = p / PIECE, base = i * PIECE, e = end < base + PIECE ? end : base + PIECE;
        txn_obj *pc;
        if ((rc = val_piece(v, i, &pc)))
            return rc;
        rc = w ? wr(o, pc, (size_t)(p - base), w + (p - off), (size_t)(e - p))
               : rd(o, pc, (size_t)(p - base), r + (p - off), (size_t)(e - p));
        if (rc)
            return rc;
        p = e;
    }
    return 0;
}

int kv_val_read(kv_val *v, uint64_t off, void *dst, size_t n)
{
    return val_io(v, off, dst, NULL, n);
}

int kv_val_write(kv_val *v, uint64_t off, const void *src, size_t n)
{
    int rc;
    if (!v->t->write)
        return TXN_E_STATE;
    if (v->calls != v->t->calls && (rc = val_find(v)) <= 0)
        return rc < 0 ? rc : TXN_E_STATE;
    uint64_t have = v->hit.h.vlen - v->skip, len;
    if (type_of(&v->hit.h) == v->as && off <= have && n <= have - off)
        return val_io(v, off, NULL, src, n);
    /* past its end (or an item written as a string): the splice, after
     * which the next call finds the node again (t->calls moved) */
    rc = kv_txn_splice_as(v->t, v->key, v->as, off, (struct kv_slice){src, n}, UINT64_MAX, &len);
    return rc < 0 ? rc : rc == 0 ? TXN_E_STATE : 0;
}

int kv_txn_end(kv_txn *t, int rc)
{
    rc = op_end(&t->o, rc < 0 ? rc : 0);
    free(t);
    return rc;
}

/* Free every chain of segment q of a stripe's sdir, and the segment: its
 * handle becomes NULL (empty buckets, as before it was made). One 8-byte
 * write, after the frees: under cow the one copy it costs is of the small
 * sdir, not of the 512-byte segment, which a full pool may have no room
 * for. */
static int flush_seg(struct op *o, txn_obj *sdir, uint64_t q)
{
    txn_obj *seg, *none = NULL;
    int rc = rd_obj(o, sdir, D_SEG + 8 * q, &seg);
    if (rc || !seg)
        return rc;
    uint64_t kept = 0, emptied = 0; /* buckets whose nodes all went */
    for (unsigned i = 0; !rc && i < SEG_BUCKETS; i++) {
        struct bref b = {sdir, D_SEG + 8 * q, seg, BUCKET_BYTES * i};
        txn_obj *cur, *graves = NULL;
        uint64_t n, ng = 0;
        if ((rc = bucket_get(o, &b, &cur, &n)))
            break;
        while (cur && !rc) {
            struct node_hdr h;
            if ((rc = node_hdr(o, cur, &h)))
                break;
            if (grave(&h)) { /* an ASYNC flush's: its steps free it, the
                                chain keeps it (and the segment stays) */
                if (!(rc = wr(o, cur, N_NEXT, &graves, sizeof graves))) {
                    graves = cur;
                    ng++;
                }
                cur = h.next;
                continue;
            }
            if ((rc = node_free(o, cur, &h)))
                break;
            o->dkeys -= !buried(&h); /* a buried one stays queued: its step finds
                                        nothing and drops it */
            cur = h.next;
        }
        if (!rc && ng)
            rc = bucket_put(o, &b, graves, ng);
        else if (n)
            emptied |= 1ULL << i;
        kept += ng;
    }
    /* a segment that keeps a grave stays, its other chains emptied */
    for (unsigned i = 0; !rc && kept && i < SEG_BUCKETS; i++)
        if (emptied >> i & 1)
            rc = bucket_put(o, &(struct bref){sdir, D_SEG + 8 * q, seg, BUCKET_BYTES * i},
                            NULL, 0);
    if (!rc && !kept && !(rc = txn_free(o->tx, seg)))
        rc = wr(o, sdir, D_SEG + 8 * q, &none, sizeof none);
    return rc;
}

/* One transaction per segment: bounded logs, so FLUSHALL works on a full
 * pool too (it frees; it must not need room to do so). Its log may still
 * need a chunk of the heap, and under incll the blocks it freed come back
 * only when their epoch ends: a segment that finds the pool full is tried
 * again once after a txn_sync, which ends the epoch, so one call empties
 * the store on every engine. */
int kv_flush(kv_store *s)
{
    for (unsigned st = 0; st < STRIPES; st++) {
        uint64_t want[WORDS] = {0};
        want[st / 64] = 1ULL << (st % 64);
        for (uint64_t q = 0, again = 0;; q++) {
            struct op o;
            int rc = op_begin_locked(&o, s, want, 1, NULL, NULL);
            if (rc)
                return rc;
            struct view *v = &s->v;
            if (q >= per_stripe(v->bits) / SEG_BUCKETS) {
                op_end(&o, 0);
                break;
            }
            rc = flush_seg(&o, v->sdir[st], q);
            if (!rc && v->old && q < per_stripe(v->bits - 1) / SEG_BUCKETS) {
                uint64_t m;
                if (!(rc = rd(&o, v->sdir[st], D_MIGRATED, &m, sizeof m)) &&
                    m < per_stripe(v->bits - 1))
                    rc = flush_seg(&o, v->old_sdir[st], q);
            }
            if ((rc = op_end(&o, rc)) && (rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL) &&
                !again && !(rc = txn_sync(s->p))) {
                again = 1;
                q--; /* this segment once more */
                continue;
            }
            if (rc)
                return rc;
            again = 0;
        }
    }
    return 0;
}

/* Call fn for each key of bucket b whose hash has `bits` top bits == j. */
static int emit_chain(struct op *o, const struct bref *b, unsigned bits, uint64_t j,
                      kv_key_fn fn, void *arg)
{
    uint64_t now = now_ms(); /* expired keys are not listed */
    txn_obj *cur;
    uint64_t n;
    int rc = bucket_get(o, b, &cur, &n);
    while (cur && !rc) {
        struct node_hdr h;
        if ((rc = node_hdr(o, cur, &h)))
            break;
        if (h.hash >> (64 - bits) == j && !buried(&h)) {
            const char *p = txn_open(o->tx, cur, TXN_RO);
            uint64_t at = 0;
            if (!p)
                return txn_last_error(o->tx);
            if (has_ttl(&h))
                memcpy(&at, p + HDR, sizeof at);
            if ((!at || at > now) && o->timed)
                o->timed(arg, p + key_off(&h), klen_of(&h), at);
            else if (!at || at > now)
                fn(arg, p + key_off(&h), klen_of(&h), type_of(&h));
            else if (o->expired)
                o->expired(o->expired_arg, p + key_off(&h), klen_of(&h), type_of(&h));
        }
        cur = h.next;
    }
    return rc;
}

/* The keys of new bucket j of stripe st: its chain, and the part of its
 * old bucket (j / 2) that has not moved yet. */
static int scan_bucket(struct op *o, unsigned st, uint64_t j, kv_key_fn fn, void *arg)
{
    struct view *v = &o->s->v;
    struct bref b;
    int rc = bucket_ref(o, v->sdir[st], v->bits, j, &b);
    if (!rc)
        rc = emit_chain(o, &b, v->bits, j, fn, arg);
    if (rc || !v->old)
        return rc;
    uint64_t m, per = per_stripe(v->bits - 1);
    if ((rc = rd(o, v->sdir[st], D_MIGRATED, &m, sizeof m)) || m == per ||
        (j >> 1) - (uint64_t)st * per < m)
        return rc;
    if (!(rc = bucket_ref(o, v->old_sdir[st], v->bits - 1, j >> 1, &b)))
        rc = emit_chain(o, &b, v->bits, j, fn, arg);
    return rc;
}

/* kv_scan's walk; expired keys go to `expired` (NULL: skipped) */
static int scan_range(kv_store *s, uint64_t cursor, size_t buckets, kv_key_fn fn, void *arg,
                      kv_key_fn expired, void *expired_arg, timed_fn timed, uint64_t *next)
{
    size_t seen = 0;
    uint64_t c = cursor;
    do {
        struct op o;
        unsigned st = stripe_of(c);
        uint64_t want[WORDS] = {0};
        want[st / 64] = 1ULL << (st % 64);
        int rc = op_begin_locked(&o, s, want, 0, NULL, NULL);
        if (rc)
            return rc;
        o.expired = expired;
        o.expired_arg = expired_arg;
        o.timed = timed; /* then fn is not called: arg is timed's */
        unsigned bits = s->v.bits;
        uint64_t j = c >> (64 - bits), end = ((uint64_t)st + 1) * per_stripe(bits);
        for (; j < end && (seen < buckets || seen == 0) && !rc; j++, seen++)
            rc = scan_bucket(&o, st, j, fn, arg);
        if ((rc = op_end(&o, rc)))
            return rc;
        c = j << (64 - bits); /* wraps to 0 past the last bucket */
    } while (c && seen < buckets);
    *next = c;
    return 0;
}

int kv_scan(kv_store *s, uint64_t cursor, size_t buckets, kv_key_fn fn, void *arg,
            uint64_t *next)
{
    return scan_range(s, cursor, buckets, fn, arg, NULL, NULL, NULL, next);
}

/* The expired keys a cycle found, copied out of the pool. */
struct key_bag {
    struct kv_slice *k;
    size_t n, cap;
    int oom;
};

static void bag_add(void *arg, const char *k, size_t n, unsigned type)
{
    (void)type;
    struct key_bag *b = arg;
    char *copy = malloc(n ? n : 1);
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        struct kv_slice *nk = realloc(b->k, cap * sizeof *nk);
        if (!nk) {
            free(copy);
            b->oom = 1;
            return;
        }
        b->k = nk;
        b->cap = cap;
    }
    if (!copy) {
        b->oom = 1;
        return;
    }
    memcpy(copy, k, n);
    b->k[b->n++] = (struct kv_slice){copy, n};
}

static void count_key(void *arg, const char *k, size_t n, unsigned type)
{
    (void)k, (void)n, (void)type;
    ++*(uint64_t *)arg;
}

int kv_expire_cycle(kv_store *s, uint64_t *cursor, size_t buckets, uint64_t *deleted,
                    uint64_t *seen)
{
    struct key_bag bag = {0};
    uint64_t live = 0;
    int rc = scan_range(s, *cursor, buckets, count_key, &live, bag_add, &bag, NULL, cursor);
    *deleted = 0;
    *seen = live + bag.n;
    for (size_t i = 0; i < bag.n; i++) {
        kv_txn *t;
        /* deleted by the lookup itself if its time still has come (it may
         * have been set again since the scan) */
        if (!rc && !(rc = kv_txn_begin(s, 1, &bag.k[i], 1, &t))) {
            uint64_t at;
            int found = kv_txn_ttl(t, bag.k[i], &at);
            rc = kv_txn_end(t, found < 0 ? found : 0);
            *deleted += !rc && found == 0;
        }
        free((void *)bag.k[i].p);
    }
    free(bag.k);
    return rc ? rc : bag.oom ? TXN_E_NOMEM : 0;
}

/* The keys of one slice of the hash space, copied out of the pool; next:
 * the first slice after it that holds one of the keys seen */
struct slice_bag {
    struct key_bag bag;
    uint64_t slice, next;
};

static void slice_add(void *arg, const char *k, size_t n, unsigned type)
{
    struct slice_bag *sb = arg;
    uint64_t slice = kv_hash(k, n) >> (64 - REF_BITS);
    if (slice == sb->slice)
        bag_add(&sb->bag, k, n, type);
    else if (slice > sb->slice && slice < sb->next)
        sb->next = slice;
}

/* Evict key k, in a transaction of its own (a crash leaves it whole or
 * gone); volatile: only if it has an expiry time (it may have lost it
 * since it was sampled). 1 evicted, 0 not, or an error. */
static int evict_key(kv_store *s, struct kv_slice k, int volatile_only)
{
    kv_txn *t;
    int rc = kv_txn_begin(s, 1, &k, 1, &t), found;
    if (rc)
        return rc;
    uint64_t at = 0;
    found = volatile_only ? kv_txn_ttl(t, k, &at) : 1;
    if (found > 0 && (!volatile_only || at))
        found = kv_txn_del(t, k);
    else if (found > 0)
        found = 0;
    if (found > 0 && s->evicted)
        s->evicted(k.p, k.n, s->commit_arg);
    rc = kv_txn_end(t, found < 0 ? found : 0);
    return rc ? rc : found > 0;
}

/* An evicted big value was only buried: freed here, as Redis's eviction
 * frees (lazyfree-lazy-eviction no), before more keys go. */
static int evict_lazy(kv_store *s, uint64_t limit)
{
    uint64_t f;
    int more = 1;
    while (more > 0 && atomic_load(&s->bytes) > limit && atomic_load(&s->lazy_pending))
        if ((more = kv_lazy_free(s, 1024, &f)) < 0)
            return more;
    return 0;
}

/* Are the bytes still past the limit? *room set when they are not: the
 * eviction got there (kv_evict_admit's rule) */
static int above(kv_store *s, uint64_t limit, int *room)
{
    if (atomic_load(&s->bytes) > limit)
        return 1;
    *room = 1;
    return 0;
}

/* kv_evict's CLOCK: KV_EVICT_LRU over all keys */
static int evict_clock(kv_store *s, uint64_t limit, uint64_t *evicted, int *room)
{
    int rc = 0;
    /* two turns of the hand: the first may only clear reference bytes */
    for (uint64_t turn = 0; !rc && above(s, limit, room) && turn < 2u << REF_BITS;
         turn++) {
        uint64_t j = atomic_fetch_add(&s->hand, 1) & ((1u << REF_BITS) - 1);
        if (atomic_fetch_and_explicit(&s->ref[j], ~REF_SEEN, memory_order_relaxed) & REF_SEEN)
            continue; /* the clock stays: IDLETIME's */
        unsigned bits = atomic_load(&s->bits);
        size_t buckets = bits > REF_BITS ? (size_t)1 << (bits - REF_BITS) : 1;
        struct slice_bag sb = {{0}, j, UINT64_MAX};
        uint64_t next;
        rc = scan_range(s, j << (64 - REF_BITS), buckets, slice_add, &sb, slice_add, &sb, NULL,
                        &next);
        /* a table smaller than the slices: the bucket just read holds the
         * next slices too, and those it showed no key of are passed over
         * (unless the hand or the table moved meanwhile), else a small
         * store's turn is 2^20 scans; docs/kvstore.md section 39 */
        if (!rc && bits < REF_BITS && atomic_load(&s->bits) == bits) {
            uint64_t end = (j | ((1u << (REF_BITS - bits)) - 1)) + 1;
            uint64_t to = sb.next < end ? sb.next : end, at = j + 1;
            uint64_t raw = atomic_load(&s->hand);
            if (to > at && (raw & ((1u << REF_BITS) - 1)) == (at & ((1u << REF_BITS) - 1)) &&
                atomic_compare_exchange_strong(&s->hand, &raw, raw + (to - at)))
                turn += to - at;
        }
        for (size_t i = 0; i < sb.bag.n; i++) {
            int one = rc ? 0 : evict_key(s, sb.bag.k[i], 0);
            rc = one < 0 ? one : 0;
            *evicted += one > 0;
            free((void *)sb.bag.k[i].p);
        }
        free(sb.bag.k);
        if (!rc && sb.bag.oom)
            rc = TXN_E_NOMEM;
        if (!rc)
            rc = evict_lazy(s, limit);
        atomic_fetch_and_explicit(&s->ref[j], ~REF_SEEN, memory_order_relaxed); /* the
                                                                        deletes' lookups */
    }
    return rc;
}

/* A sample's candidate: its key (a copy) and its rank, least evicted first */
struct cand {
    char *k;
    size_t n;
    uint64_t rank;
};

struct sample {
    kv_store *s;
    unsigned how;
    struct cand *c;
    size_t n, cap;
    int oom;
};

static void sample_add(void *arg, const char *k, size_t n, uint64_t at)
{
    struct sample *sm = arg;
    if ((sm->how & KV_EVICT_VOLATILE) && !at)
        return;
    if (sm->n == sm->cap) {
        size_t cap = sm->cap ? 2 * sm->cap : 64;
        struct cand *c = realloc(sm->c, cap * sizeof *c);
        if (!c) {
            sm->oom = 1;
            return;
        }
        sm->c = c;
        sm->cap = cap;
    }
    char *copy = malloc(n ? n : 1);
    if (!copy) {
        sm->oom = 1;
        return;
    }
    memcpy(copy, k, n);
    uint64_t slice = kv_hash(k, n) >> (64 - REF_BITS), rank;
    switch (sm->how & ~KV_EVICT_VOLATILE) {
    case KV_EVICT_LRU: { /* the slice's last lookup: the oldest first */
        uint32_t r = atomic_load_explicit(&sm->s->ref[slice], memory_order_relaxed) & REF_CLOCK;
        rank = (ref_now(sm->s) - r) & REF_CLOCK; /* 0 (never since open): the oldest */
        rank = r ? REF_CLOCK - rank : 0;
        break;
    }
    case KV_EVICT_LFU:
        rank = lfu_decayed(sm->s, atomic_load_explicit(&sm->s->lfu[slice], memory_order_relaxed),
                           lfu_minutes(sm->s));
        break;
    case KV_EVICT_TTL:
        rank = at;
        break;
    default:
        rank = rnd64(sm->s);
    }
    sm->c[sm->n++] = (struct cand){copy, n, rank};
}

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

#define SAMPLE_BUCKETS ((uint64_t)1 << MIN_BITS) /* a small store's whole table */
#define SAMPLE_KEYS 16
#define SAMPLE_WINDOW_BITS 5 /* a sample's windows: 32 buckets, one stripe's
                                segment in a small store's table */

/* kv_evict's sampled orders: every one but KV_EVICT_LRU over all keys */
static int evict_sampled(kv_store *s, uint64_t limit, unsigned how, uint64_t *evicted,
                         int *room)
{
    int rc = 0, idle = 0;
    int vol = (how & KV_EVICT_VOLATILE) != 0;
    /* rounds that evicted nothing (their candidates went meanwhile): a few */
    while (!rc && idle < 8 && above(s, limit, room)) {
        if (vol && !atomic_load(&s->expires))
            break; /* no candidate: the caller refuses the write */
        struct sample sm = {.s = s, .how = how};
        unsigned bits = atomic_load(&s->bits);
        /* whole windows, each at a random place, every key in exactly one
         * of the table's windows: every key is as likely to be sampled.
         * (Scanning on from one random place until enough keys are seen
         * samples a key after a stretch without keys as many times more
         * often as the stretch is longer: docs/kvstore.md section 45.) The
         * windows w0 + i * step, step odd, pass every window once: past
         * SAMPLE_BUCKETS only while none found, up to the whole table. */
        unsigned wbits = bits > SAMPLE_WINDOW_BITS ? bits - SAMPLE_WINDOW_BITS : 0;
        uint64_t wins = (uint64_t)1 << wbits, w0 = rnd64(s), step = rnd64(s) | 1, next;
        for (uint64_t i = 0; !rc && sm.n < SAMPLE_KEYS && i < wins &&
                             ((i << (bits - wbits)) < SAMPLE_BUCKETS || !sm.n);
             i++) {
            uint64_t w = (w0 + i * step) & (wins - 1);
            rc = scan_range(s, wbits ? w << (64 - wbits) : 0, (size_t)1 << (bits - wbits), NULL,
                            &sm, NULL, NULL, sample_add, &next);
        }
        if (!rc && sm.oom)
            rc = TXN_E_NOMEM;
        qsort(sm.c, sm.n, sizeof *sm.c, cand_cmp);
        size_t quota = sm.n / 4 ? sm.n / 4 : 1;
        uint64_t before = *evicted;
        for (size_t i = 0; i < sm.n; i++) {
            if (!rc && i < quota && above(s, limit, room)) {
                int one = evict_key(s, (struct kv_slice){sm.c[i].k, sm.c[i].n}, vol);
                rc = one < 0 ? one : 0;
                *evicted += one > 0;
            }
            free(sm.c[i].k);
        }
        free(sm.c);
        if (!sm.n)
            break; /* the whole table holds no candidate */
        idle = *evicted > before ? 0 : idle + 1;
        if (!rc)
            rc = evict_lazy(s, limit);
    }
    return rc;
}

static int evict_to(kv_store *s, uint64_t limit, unsigned how, uint64_t *evicted, int *room)
{
    *evicted = 0;
    int rc = how == KV_EVICT_LRU ? evict_clock(s, limit, evicted, room)
                                 : evict_sampled(s, limit, how, evicted, room);
    atomic_fetch_add(&s->evictions, *evicted);
    return rc;
}

int kv_evict(kv_store *s, uint64_t limit, unsigned how, uint64_t *evicted)
{
    int room = 0;
    return evict_to(s, limit, how, evicted, &room);
}

int kv_evict_admit(kv_store *s, uint64_t limit, unsigned how)
{
    uint64_t n;
    int room = 0;
    /* the eviction saw the bytes at the limit once: the room is this
     * write's, though other workers' writes may have filled it since (a
     * refusal must not depend on their timing); it stops short only when
     * the policy has nothing left, after its own rounds that found
     * nothing (its retries): then refused, as Redis's EVICT_FAIL, even
     * if it took keys. docs/kvstore.md section 39 */
    int rc = evict_to(s, limit, how, &n, &room);
    return rc ? rc : room;
}

/* ---- lazy free */

/* Queue n hashes of buried nodes. A queue that cannot grow drops them:
 * their nodes then wait for the next open, which finds them (tally). */
static void lazy_push(kv_store *s, const uint64_t *h, size_t n)
{
    pthread_mutex_lock(&s->lazy_m);
    if (s->lq_head && s->lq_head + s->lq_n + n > s->lq_cap) { /* slide to the front */
        memmove(s->lq, s->lq + s->lq_head, s->lq_n * sizeof *s->lq);
        s->lq_head = 0;
    }
    if (s->lq_n + n > s->lq_cap) {
        size_t cap = s->lq_cap ? s->lq_cap : 64;
        while (cap < s->lq_n + n)
            cap *= 2;
        struct lazy_ent *q = realloc(s->lq, cap * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&s->lazy_m);
            return;
        }
        s->lq = q;
        s->lq_cap = cap;
    }
    for (size_t i = 0; i < n; i++)
        s->lq[s->lq_head + s->lq_n++] = (struct lazy_ent){h[i], 0};
    atomic_store(&s->lazy_pending, s->lq_n);
    pthread_mutex_unlock(&s->lazy_m);
}

/* One step on the buried node of `hit`: at most `budget` objects of its
 * value freed (*freed), the value left whole; 1 when the node itself went
 * (unlinked and freed) too. */
static int lazy_chunk(struct op *o, const struct bref *b, const struct hit *hit,
                      uint64_t budget, uint64_t *cursor, uint64_t *freed)
{
    const struct node_hdr *h = &hit->h;
    int rc = 0;
    *freed = 0;
    if (dicted(h)) {
        if ((rc = dict_free_some(o->tx, h->val, cursor, budget, freed)) <= 0)
            return rc;
        rc = 0; /* the table is gone: the node goes next */
    } else if (pieced(h)) {
        /* the last pieces, at least two kept (a pieced value is longer
         * than one piece): the table's count and the length say so */
        uint64_t n = pieces_of(h->vlen), k = n <= budget + 1 ? n : budget, got;
        txn_obj **list;
        if ((rc = piece_range(o, hit->node, h, n - k, k, &list, &got)))
            return rc;
        for (uint64_t i = 0; i < got && !rc; i++)
            rc = txn_free(o->tx, list[i]);
        free(list);
        *freed = got;
        if (!rc && k < n) {
            uint64_t left = n - k, len = left * PIECE;
            if (!(rc = wr(o, h->val, P_N, &left, sizeof left)))
                rc = wr(o, hit->node, N_VLEN, &len, sizeof len);
            return rc;
        }
        if (!rc)
            rc = txn_free(o->tx, h->val);
    } else if (h->val) {
        rc = txn_free(o->tx, h->val);
    }
    if (!rc)
        rc = txn_free(o->tx, hit->node);
    if (!rc)
        rc = relink(o, b, hit, h->next, -1);
    return rc ? rc : 1;
}

/* A flushed table's shape, as its grave names it: the bits (if bitsp),
 * each stripe's directory (NULL once freed) and how many segment handles
 * one holds. */
static int grave_table(struct op *o, txn_obj *t, txn_obj *sd[STRIPES], uint64_t *nseg,
                       unsigned *bitsp)
{
    uint64_t bits = 0;
    int rc = txn_obj_size(o->s->p, t) < TABLE_SIZE ? TXN_E_INVAL
                                                   : rd(o, t, T_BITS, &bits, sizeof bits);
    if (!rc && (bits < MIN_BITS || bits > MAX_BITS))
        return refuse(TXN_E_CORRUPT, "grave: table %p of %llu bits", (void *)t,
                      (unsigned long long)bits);
    if (bitsp)
        *bitsp = (unsigned)bits;
    *nseg = rc ? 0 : per_stripe((unsigned)bits) / SEG_BUCKETS;
    return rc ? rc : rd(o, t, T_SDIR, sd, STRIPES * sizeof *sd);
}

/* One step on the grave of `hit` (kv_flush_async): at most about `budget`
 * objects of its table freed, first to last stripe, each chain from its
 * head (a big value in lazy_chunk's steps), a segment when its chains are
 * empty, a directory when its segments are gone, each NULLed where it was
 * named, so that every step leaves a smaller table that a crash, the next
 * step or the next open finds whole. 1 when the table and the grave went
 * too. *nodes counts the flushed nodes freed. */
static int grave_chunk(struct op *o, const struct bref *gb, const struct hit *gh,
                       uint64_t budget, uint64_t *cursor, uint64_t *freed, uint64_t *nodes)
{
    txn_obj *t = gh->h.val, *sd[STRIPES], *none = NULL, **segs;
    uint64_t nseg;
    int rc = grave_table(o, t, sd, &nseg, NULL);
    *freed = *nodes = 0;
    if (rc)
        return rc;
    if (!(segs = malloc(nseg * sizeof *segs)))
        return TXN_E_NOMEM;
    for (unsigned st = 0; st < STRIPES && !rc && *freed < budget; st++) {
        if (!sd[st])
            continue;
        if ((rc = rd(o, sd[st], D_SEG, segs, nseg * sizeof *segs)))
            break;
        uint64_t q = 0;
        for (; q < nseg && !rc && *freed < budget; q++) {
            unsigned i = 0;
            while (segs[q] && i < SEG_BUCKETS && !rc && *freed < budget) {
                struct bref b = {sd[st], D_SEG + 8 * q, segs[q], BUCKET_BYTES * i};
                struct hit hit = {.link_obj = segs[q], .link_off = b.off};
                uint64_t n, f = 0;
                if ((rc = bucket_get(o, &b, &hit.node, &n)) || !hit.node) {
                    i++;
                    continue;
                }
                if ((rc = node_hdr(o, hit.node, &hit.h)))
                    break;
                /* G1: kv_flush_async moved every grave out of the tables
                 * it buried, so a flushed table holds none */
                assert(!grave(&hit.h));
                if (lazy_worth(&hit.h)) {
                    rc = lazy_chunk(o, &b, &hit, budget - *freed, cursor, &f);
                } else {
                    f = hit.h.val != NULL;
                    if ((!hit.h.val || !(rc = txn_free(o->tx, hit.h.val))) &&
                        !(rc = txn_free(o->tx, hit.node)) &&
                        !(rc = bucket_put(o, &b, hit.h.next, n - 1)))
                        rc = 1;
                }
                if (rc == 1) { /* the node went */
                    f++;
                    (*nodes)++;
                    *cursor = 0;
                    rc = 0;
                }
                *freed += f;
            }
            if (rc || !segs[q])
                continue;
            if (i < SEG_BUCKETS)
                break; /* the budget ran out inside it */
            if (!(rc = txn_free(o->tx, segs[q])))
                rc = wr(o, sd[st], D_SEG + 8 * q, &none, sizeof none);
            segs[q] = NULL;
            (*freed)++;
        }
        if (rc || q < nseg || (q && segs[q - 1]))
            break;
        if (!(rc = txn_free(o->tx, sd[st])))
            rc = wr(o, t, T_SDIR + 8 * (size_t)st, &none, sizeof none);
        sd[st] = NULL;
        (*freed)++;
    }
    free(segs);
    /* its element tables' objects left the keys' bytes at the flush */
    (void)dict_bytes_taken();
    unsigned left = 0;
    for (unsigned st = 0; st < STRIPES; st++)
        left += sd[st] != NULL;
    if (rc || left)
        return rc;
    if (!(rc = txn_free(o->tx, t)) && !(rc = txn_free(o->tx, gh->node)))
        rc = relink(o, gb, gh, gh->h.next, -1);
    return rc ? rc : 1;
}

int kv_lazy_free(kv_store *s, uint64_t budget, uint64_t *freed)
{
    *freed = 0;
    if (!atomic_load(&s->lazy_pending) || pthread_mutex_trylock(&s->lazy_step))
        return 0;
    pthread_mutex_lock(&s->lazy_m);
    struct lazy_ent e = s->lq_n ? s->lq[s->lq_head] : (struct lazy_ent){0, 0};
    size_t n = s->lq_n;
    pthread_mutex_unlock(&s->lazy_m);
    int rc = 0, gone = 0, found = 0, was_grave = 0;
    uint64_t nodes = 0;
    if (n) {
        uint64_t want[WORDS] = {0};
        unsigned st = stripe_of(e.hash);
        struct op o;
        struct bref b;
        struct hit hit;
        want[st / 64] = 1ULL << (st % 64);
        if (!(rc = op_begin_locked(&o, s, want, 1, NULL, NULL))) {
            rc = locate(&o, e.hash, (struct kv_slice){NULL, 0}, &b, &hit);
            /* none found: a flush freed it; the entry goes */
            gone = rc == 0;
            if (rc > 0 && grave(&hit.h)) {
                was_grave = 1;
                gone = found = rc = grave_chunk(&o, &b, &hit, budget ? budget : 1, &e.cursor,
                                                freed, &nodes);
            } else if (rc > 0) {
                assert(buried(&hit.h)); /* L1: the queue names buried nodes */
                gone = found = rc = lazy_chunk(&o, &b, &hit, budget ? budget : 1, &e.cursor,
                                               freed);
            }
            rc = op_end(&o, rc < 0 ? rc : 0);
        }
        /* a flush's keys count as Redis counts them: one object each */
        if (!rc && nodes)
            atomic_fetch_add(&s->lazy_freed, nodes);
        uint64_t gl = atomic_load(&s->grave_left);
        while (!rc && nodes && !atomic_compare_exchange_weak(&s->grave_left, &gl,
                                                             gl > nodes ? gl - nodes : 0))
            ;
        pthread_mutex_lock(&s->lazy_m);
        if (!rc && gone) {
            s->lq_head++;
            s->lq_n--;
            atomic_store(&s->lazy_pending, s->lq_n);
            atomic_fetch_add(&s->lazy_freed, was_grave ? 0 : (uint64_t)found);
            size_t i = 0; /* the last grave gone: no estimate left over */
            while (was_grave && i < s->lq_n && s->lq[s->lq_head + i].hash != GRAVE_HASH)
                i++;
            if (was_grave && i == s->lq_n)
                atomic_store(&s->grave_left, 0);
        } else if (!rc) {
            s->lq[s->lq_head].cursor = e.cursor;
        }
        pthread_mutex_unlock(&s->lazy_m);
    }
    pthread_mutex_unlock(&s->lazy_step);
    return rc ? rc : atomic_load(&s->lazy_pending) > 0;
}

/* Move every grave of bucket b (graves have GRAVE_HASH: bucket 0 of
 * stripe 0 in any table) onto the chain *head of *n nodes. */
static int graves_move(struct op *o, const struct bref *b, txn_obj **head, uint64_t *n)
{
    txn_obj *cur, *first, *link_obj = NULL; /* NULL: the bucket's head */
    size_t link_off = 0;
    uint64_t bn, moved = 0;
    int rc = bucket_get(o, b, &cur, &bn);
    for (first = cur; cur && !rc;) {
        struct node_hdr h;
        if ((rc = node_hdr(o, cur, &h)))
            break;
        if (grave(&h)) {
            if (!link_obj)
                first = h.next;
            else
                rc = wr(o, link_obj, link_off, &h.next, sizeof h.next);
            if (!rc && !(rc = wr(o, cur, N_NEXT, head, sizeof *head))) {
                *head = cur;
                (*n)++;
                moved++;
            }
        } else {
            link_obj = cur;
            link_off = N_NEXT;
        }
        cur = h.next;
    }
    return rc || !moved ? rc : bucket_put(o, b, first, bn - moved);
}

int kv_flush_async(kv_store *s)
{
    pthread_mutex_lock(&s->resize); /* no kv_reserve drain between its steps */
    struct op o;
    struct view_swap w = {.s = s};
    int rc = op_begin_all(&o, s, &w);
    if (rc) {
        pthread_mutex_unlock(&s->resize);
        return rc;
    }
    struct view *v = &s->v;
    txn_obj *nt, *sd0, *head = NULL, *none = NULL, *tabs[2] = {NULL, NULL};
    txn_obj *gone[2] = {v->table, v->old};
    uint64_t n = 0, per = v->old ? per_stripe(v->bits - 1) : 0, m0 = per;
    uint64_t left = atomic_load(&s->keys) + atomic_load(&s->lazy_pending);
    struct bref nb, ob;
    if ((rc = table_make(&o, MIN_BITS, &nt)) || (rc = rd_obj(&o, nt, T_SDIR, &sd0)) ||
        (rc = bucket_ref(&o, sd0, MIN_BITS, 0, &nb)) || (rc = bucket_make(&o, &nb)))
        goto out;
    /* the old table names the directories of its drained stripes, freed
     * (K3): NULL now, so its grave sees only what is left of it */
    for (unsigned st = 0; v->old && st < STRIPES && !rc; st++) {
        uint64_t m;
        if (!(rc = rd(&o, v->sdir[st], D_MIGRATED, &m, sizeof m)) && st == 0)
            m0 = m;
        if (!rc && m == per)
            rc = wr(&o, v->old, T_SDIR + 8 * (size_t)st, &none, sizeof none);
    }
    /* G1: the graves of earlier flushes move to the new table */
    if (!rc && !(rc = bucket_ref(&o, v->sdir[0], v->bits, 0, &ob)))
        rc = graves_move(&o, &ob, &head, &n);
    if (!rc && v->old && m0 == 0 && !(rc = bucket_ref(&o, v->old_sdir[0], v->bits - 1, 0, &ob)))
        rc = graves_move(&o, &ob, &head, &n);
    for (int i = 0; i < 2 && !rc && gone[i]; i++) { /* a grave per table */
        struct node_hdr g = {head, GRAVE_HASH, KF_LAZY | KF_GRAVE, 0, gone[i]};
        txn_obj *node;
        uint64_t *q = realloc(o.lazy, (o.nlazy + 1) * sizeof *q);
        if (!q) {
            rc = TXN_E_NOMEM;
            break;
        }
        o.lazy = q;
        if (!(rc = alloc(&o, HDR, &node)) && !(rc = wr(&o, node, 0, &g, sizeof g))) {
            head = node;
            n++;
            o.lazy[o.nlazy++] = GRAVE_HASH;
        }
    }
    tabs[0] = nt;
    if (!rc && !(rc = bucket_put(&o, &nb, head, n)) &&
        !(rc = wr(&o, s->root, R_TABLE, tabs, sizeof tabs)) &&
        !(rc = view_load(&o, nt, NULL, &w.v))) {
        w.apply = 1;
        /* under every lock: nobody changes the counts meanwhile */
        o.dkeys = -(int64_t)atomic_load(&s->keys);
        o.dbytes = -(int64_t)atomic_load(&s->bytes);
        o.dexp = -(int64_t)atomic_load(&s->expires);
    }
out:
    if (!(rc = op_end(&o, rc)))
        atomic_fetch_add(&s->grave_left, left);
    pthread_mutex_unlock(&s->resize);
    return rc;
}

void kv_info(kv_store *s, struct kv_info *out)
{
    out->lazy_pending = atomic_load(&s->lazy_pending) + atomic_load(&s->grave_left);
    out->lazy_freed = atomic_load(&s->lazy_freed);
    out->evictions = atomic_load(&s->evictions);
    out->keys = atomic_load(&s->keys);
    out->expires = atomic_load(&s->expires);
    out->bytes = atomic_load(&s->bytes);
    out->buckets = (uint64_t)1 << atomic_load(&s->bits);
    out->resizing = (int)atomic_load(&s->resizing);
    txn_pool_size(s->p, &out->pool_size, &out->pool_max_size);
}

uint64_t kv_key_version(kv_store *s, struct kv_slice key)
{
    return atomic_load(&s->version[stripe_of(kv_hash(key.p, key.n))]);
}

uint64_t kv_commits(kv_store *s)
{
    return atomic_load(&s->commits);
}

txn_pool *kv_pool(kv_store *s)
{
    return s->p;
}

/* ---- open, close */

static int root_init(struct op *o)
{
    txn_obj *t;
    int rc = table_make(o, MIN_BITS, &t);
    uint64_t r[ROOT_SIZE / 8] = {KV_MAGIC, KV_VERSION, STRIPES, SEG_BUCKETS,
                                 (uint64_t)(uintptr_t)t, 0};
    return rc ? rc : wr(o, o->s->root, 0, r, sizeof r);
}

/* dict_objects' fn for tally: an element table's bytes. */
struct sizing {
    txn_pool *p;
    size_t n;
};

static int add_size(txn_obj *o, void *arg)
{
    struct sizing *z = arg;
    z->n += txn_obj_size(z->p, o);
    return 0;
}

/* The nodes a flushed table still holds, from its buckets' counts (INFO's
 * estimate of what its grave has left to free). */
static int grave_count(struct op *o, txn_obj *t, uint64_t *nodes)
{
    txn_obj *sd[STRIPES], *seg;
    uint64_t nseg, b[2 * SEG_BUCKETS];
    int rc = grave_table(o, t, sd, &nseg, NULL);
    for (unsigned st = 0; st < STRIPES && !rc; st++)
        for (uint64_t q = 0; sd[st] && q < nseg && !rc; q++)
            if (!(rc = rd_obj(o, sd[st], D_SEG + 8 * q, &seg)) && seg &&
                !(rc = rd(o, seg, 0, b, sizeof b)))
                for (unsigned i = 0; i < SEG_BUCKETS; i++)
                    *nodes += b[2 * i + 1];
    return rc;
}

/* Count keys and bytes, and the stripes a running resize has drained. */
static int tally(struct op *o, uint64_t *keys, uint64_t *bytes, uint64_t *expires,
                 unsigned *done)
{
    struct view *v = &o->s->v;
    int rc = 0;
    *keys = *bytes = *expires = *done = 0;
    for (int t = 0; t < (v->old ? 2 : 1); t++) {
        unsigned bits = t ? v->bits - 1 : v->bits;
        for (unsigned st = 0; st < STRIPES && !rc; st++) {
            uint64_t m = 0, per = per_stripe(bits);
            if (v->old && (rc = rd(o, v->sdir[st], D_MIGRATED, &m, sizeof m)))
                break;
            if (t && m == per) {
                (*done)++;
                continue;
            }
            for (uint64_t j = (uint64_t)st * per; j < (uint64_t)(st + 1) * per && !rc; j++) {
                struct bref b;
                txn_obj *cur;
                uint64_t n;
                if ((rc = bucket_ref(o, t ? v->old_sdir[st] : v->sdir[st], bits, j, &b)))
                    break;
                if (b.seg && txn_obj_size(o->s->p, b.seg) < SEG_BYTES)
                    return refuse(TXN_E_CORRUPT, "%u-bit table, bucket %llu: segment %p is no "
                                  "object", bits, (unsigned long long)j, (void *)b.seg);
                if ((rc = bucket_get(o, &b, &cur, &n)))
                    break;
                *keys += n;
                uint64_t len = 0;
                for (struct node_hdr h; cur; cur = h.next) {
                    size_t nsize = txn_obj_size(o->s->p, cur), vsize;
                    if (nsize < HDR)
                        return refuse(TXN_E_CORRUPT, "%u-bit table, bucket %llu: node %p is "
                                      "no object", bits, (unsigned long long)j, (void *)cur);
                    if ((rc = node_hdr(o, cur, &h)))
                        break;
                    if (++len > n) /* a damaged chain: do not walk a cycle */
                        return refuse(TXN_E_CORRUPT, "%u-bit table, bucket %llu: more nodes "
                                      "than its count %llu", bits, (unsigned long long)j,
                                      (unsigned long long)n);
                    vsize = h.val && !dicted(&h) ? txn_obj_size(o->s->p, h.val) : 0;
                    /* a table's objects (a damaged one's, as far as they go:
                     * kv_check reports the damage) */
                    struct sizing z = {o->s->p, 0};
                    if (dicted(&h))
                        (void)dict_objects(o->tx, h.val, add_size, &z);
                    vsize += z.n;
                    if (pieced(&h)) {
                        txn_obj **list;
                        uint64_t np;
                        if ((rc = piece_list(o, cur, &h, &list, &np)))
                            return rc;
                        for (uint64_t i = 0; i < np; i++)
                            vsize += txn_obj_size(o->s->p, list[i]);
                        free(list);
                    } else if (h.val && vsize < h.vlen)
                        return refuse(TXN_E_CORRUPT, "node %p: value %p is no object of %llu "
                                      "bytes", (void *)cur, (void *)h.val,
                                      (unsigned long long)h.vlen);
                    if (buried(&h)) { /* no key: queued to be freed (L1) */
                        (*keys)--;
                        lazy_push(o->s, &h.hash, 1);
                        uint64_t gn = 0;
                        if (grave(&h) && (rc = grave_count(o, h.val, &gn)))
                            return rc;
                        atomic_fetch_add(&o->s->grave_left, gn);
                        /* as before the reopen: a buried table's objects
                         * count until its steps free them (dfree), the
                         * rest left the count when the node was buried */
                        *bytes += z.n;
                        continue;
                    }
                    *bytes += nsize + vsize; /* obj_bytes, from the sizes checked */
                    *expires += has_ttl(&h);
                }
            }
        }
    }
    return rc;
}

static int load(kv_store *s)
{
    struct op o;
    uint64_t r[ROOT_SIZE / 8], keys = 0, bytes = 0, expires = 0;
    unsigned done = 0;
    txn_obj *root = s->root;
    if (txn_obj_size(s->p, root) < ROOT_SIZE)
        return refuse(TXN_E_CORRUPT, "root object of %zu bytes", txn_obj_size(s->p, root));
    int rc = op_begin(&o, s);
    if (!rc && !(rc = rd(&o, root, 0, r, sizeof r)) && r[0] == 0 && !(rc = root_init(&o)))
        rc = rd(&o, root, 0, r, sizeof r); /* a new pool, or one whose first
                                              transaction never committed */
    /* the pool's layout name is the store's: another root is damage */
    if (!rc && r[0] != KV_MAGIC)
        rc = refuse(TXN_E_CORRUPT, "root: magic %#llx, not a store's", (unsigned long long)r[0]);
    else if (!rc && (r[1] < 1 || r[1] > KV_VERSION || r[2] != STRIPES ||
                     r[3] != SEG_BUCKETS))
        rc = refuse(TXN_E_LAYOUTVER, "store version %llu (%llu stripes, %llu buckets a segment), "
                    "this program's is %u (%u, %u)", (unsigned long long)r[1],
                    (unsigned long long)r[2], (unsigned long long)r[3], KV_VERSION, STRIPES,
                    SEG_BUCKETS);
    if (!rc)
        rc = view_load(&o, (txn_obj *)(uintptr_t)r[4], (txn_obj *)(uintptr_t)r[5], &s->v);
    if (!rc && r[1] < KV_VERSION && !s->view) { /* an earlier store is a valid one of
                                                   this version */
        uint64_t ver = KV_VERSION;
        rc = wr(&o, root, R_VERSION, &ver, sizeof ver);
    }
    if (!rc)
        rc = tally(&o, &keys, &bytes, &expires, &done);
    if (rc == TXN_E_INVAL) /* every read above is of a handle the store holds */
        rc = refuse(TXN_E_CORRUPT, "a handle the store holds is no object of its size");
    if ((rc = op_end(&o, rc)))
        return rc;
    atomic_store(&s->keys, keys);
    atomic_store(&s->bytes, bytes);
    atomic_store(&s->expires, expires);
    atomic_store(&s->bits, s->v.bits);
    atomic_store(&s->resizing, s->v.old != NULL);
    atomic_store(&s->stripes_done, done);
    if (s->v.old && done == STRIPES)
        return resize_finish(s); /* crashed between the last stripe and the end */
    return 0;
}

int kv_adopt(txn_pool *p, txn_obj *root, const struct kv_opts *opt, kv_store **out)
{
    kv_store *s = aligned_alloc(64, (sizeof *s + 63) & ~(size_t)63);
    if (!s)
        return TXN_E_NOMEM;
    memset(s, 0, sizeof *s);
    why_rc = 0;
    s->p = p;
    s->root = root;
    s->commit = opt->commit;
    s->commit_arg = opt->commit_arg;
    s->evicted = opt->evicted;
    s->id = atomic_fetch_add(&stores_adopted, 1) + 1;
    for (unsigned i = 0; i < STRIPES; i++)
        pthread_mutex_init(&s->lock[i].m, NULL);
    pthread_mutex_init(&s->resize, NULL);
    pthread_mutex_init(&s->lazy_m, NULL);
    pthread_mutex_init(&s->lazy_step, NULL);
    s->resize_step = opt->resize_step ? opt->resize_step : MIGRATE_SCAN;
    s->view = opt->view;
    s->no_refs = opt->no_refs;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    s->t0 = ts.tv_sec - 1;
    int rc = load(s);
    if (rc) {
        kv_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int kv_open(const char *path, const struct kv_opts *opt, kv_store **out)
{
    txn_pool *p;
    why_rc = 0;
    int rc = opt->view ? txn_pool_view(path, LAYOUT, &p) : txn_pool_open(path, LAYOUT, &p);
    if (rc == TXN_E_NOENT && !opt->no_create && !opt->view) {
        /* small, growing as keys come, up to pool_size */
        txn_pool_opts po = {.size = opt->pool_start, .root_size = ROOT_SIZE,
                            .threads = opt->threads, .max_size = opt->pool_size};
        txn_pool_opts lo = {.root_size = ROOT_SIZE, .threads = opt->threads};
        size_t least = txn_pool_min_size(&lo);
        if (!po.size)
            po.size = least > POOL_START ? least : POOL_START;
        if (po.size > po.max_size)
            po.size = po.max_size;
        rc = txn_pool_create(path, LAYOUT, &po, &p);
    }
    if (rc)
        return rc;
    if ((rc = kv_adopt(p, txn_root(p), opt, out))) {
        txn_pool_close(p);
        return rc;
    }
    (*out)->own = 1;
    return 0;
}

void kv_close(kv_store *s)
{
    if (s->own)
        txn_pool_close(s->p);
    for (unsigned i = 0; i < STRIPES; i++)
        pthread_mutex_destroy(&s->lock[i].m);
    pthread_mutex_destroy(&s->resize);
    pthread_mutex_destroy(&s->lazy_m);
    pthread_mutex_destroy(&s->lazy_step);
    free(s->lq);
    free(s);
}

/* ---- kv_check */

/* A set of node addresses: a chain that loops, or two chains that share a
 * node, show up as a second insertion. */
struct pset {
    uintptr_t *a;
    size_t cap, n;
};

static int pset_add(struct pset *s, uintptr_t x)
{
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        uintptr_t *a = calloc(cap, sizeof *a);
        if (!a)
            return -1;
        for (size_t i = 0; i < s->cap; i++)
            for (size_t k = mix64(s->a[i]) & (cap - 1); s->a[i]; k = (k + 1) & (cap - 1))
                if (!a[k]) {
                    a[k] = s->a[i];
                    break;
                }
        free(s->a);
        s->a = a;
        s->cap = cap;
    }
    size_t k = mix64(x) & (s->cap - 1);
    for (; s->a[k]; k = (k + 1) & (s->cap - 1))
        if (s->a[k] == x)
            return 0;
    s->a[k] = x;
    s->n++;
    return 1;
}

struct checker {
    struct op o;
    FILE *out;
    uint64_t problems, keys, buried;
    struct pset seen;
};

static void problem(struct checker *c, const char *fmt, ...)
{
    if (c->problems++ >= 50)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("check: ", c->out);
    vfprintf(c->out, fmt, ap);
    fputc('\n', c->out);
    va_end(ap);
}

static int obj_ok(struct checker *c, txn_obj *o, size_t n)
{
    return o && txn_obj_size(c->o.s->p, o) >= n;
}

/* Is the node's shape sound: lengths within its objects, value inline
 * exactly when short? */
static int node_ok(struct checker *c, txn_obj *node, const struct node_hdr *h)
{
    size_t size = txn_obj_size(c->o.s->p, node);
    if (size < key_off(h) || klen_of(h) > size - key_off(h) || type_of(h) > KV_TYPE_MAX)
        return 0;
    if (dicted(h)) /* its table: check_chain */
        return !pieced(h) && !h->vlen && (type_of(h) == KV_HASH || type_of(h) == KV_SET);
    if (!h->val)
        return !pieced(h) && h->vlen <= INLINE_MAX && h->vlen <= size - val_off(h);
    if (pieced(h)) /* its table and pieces: check_pieces */
        return h->vlen > PIECE && (type_of(h) == KV_STRING || type_of(h) == KV_LIST);
    return h->vlen > INLINE_MAX && obj_ok(c, h->val, h->vlen);
}

/* A pieced value's table and pieces: objects of their bytes (piece_list),
 * each reached once in the whole store. */
static int check_pieces(struct checker *c, txn_obj *node, const struct node_hdr *h)
{
    txn_obj **list;
    uint64_t n;
    int rc = piece_list(&c->o, node, h, &list, &n);
    if (rc == TXN_E_CORRUPT) {
        problem(c, "%s", why);
        return 0;
    }
    int added = rc ? 1 : pset_add(&c->seen, (uintptr_t)h->val);
    for (uint64_t i = 0; i < n && added == 1; i++)
        added = pset_add(&c->seen, (uintptr_t)list[i]);
    free(list);
    if (added < 0)
        return TXN_E_NOMEM;
    if (!added)
        problem(c, "node %p: a piece or its table is reached twice", (void *)node);
    return rc;
}

/* dict_objects' fn for kv_check: each object of a table reached once. */
static int seen_once(txn_obj *obj, void *arg)
{
    struct checker *c = arg;
    int added = pset_add(&c->seen, (uintptr_t)obj);
    return added < 0 ? TXN_E_NOMEM : added ? 0 : TXN_E_CORRUPT;
}

static int check_grave(struct checker *c, txn_obj *node, const struct node_hdr *h);

/* Check bucket j of a table of `bits` bits (K1; K2 within the chain and,
 * for an old bucket, against the new table). */
static int check_chain(struct checker *c, txn_obj *sdir, unsigned bits, uint64_t j, int old)
{
    struct op *o = &c->o;
    struct bref b;
    txn_obj *cur;
    uint64_t n, len = 0;
    int rc = bucket_ref(o, sdir, bits, j, &b);
    if (rc)
        return rc;
    if (b.seg && !obj_ok(c, b.seg, SEG_BYTES)) {
        problem(c, "%u-bit table, bucket %llu: bad segment handle", bits, (unsigned long long)j);
        return 0;
    }
    if ((rc = bucket_get(o, &b, &cur, &n)))
        return rc;
    for (; cur; len++) {
        struct node_hdr h;
        struct hit hit;
        int added = obj_ok(c, cur, HDR) ? pset_add(&c->seen, (uintptr_t)cur) : 2;
        if (added != 1) {
            if (added < 0)
                return TXN_E_NOMEM;
            problem(c, "%u-bit table, bucket %llu: node %p is %s", bits, (unsigned long long)j,
                    (void *)cur, added ? "no object" : "reached twice (cycle or shared)");
            return 0;
        }
        if ((rc = node_hdr(o, cur, &h)))
            return rc;
        if (grave(&h)) { /* no key: its flushed table is checked whole */
            if (h.klen != (KF_LAZY | KF_GRAVE) || h.hash != GRAVE_HASH || j || h.vlen)
                problem(c, "node %p: a grave, but klen %#llx, hash %#llx, bucket %llu",
                        (void *)cur, (unsigned long long)h.klen, (unsigned long long)h.hash,
                        (unsigned long long)j);
            else if ((rc = check_grave(c, cur, &h)))
                return rc;
            c->buried++;
            cur = h.next;
            continue;
        }
        if (!node_ok(c, cur, &h)) {
            problem(c, "node %p: lengths do not fit its objects", (void *)cur);
            cur = h.next;
            continue;
        }
        if (pieced(&h) && (rc = check_pieces(c, cur, &h)))
            return rc;
        if (dicted(&h) && (rc = dict_objects(o->tx, h.val, seen_once, c)) == TXN_E_CORRUPT)
            problem(c, "node %p: its element table %p is damaged or shared", (void *)cur,
                    (void *)h.val);
        else if (dicted(&h) && rc)
            return rc;
        if (buried(&h)) { /* no key: its objects were checked above */
            c->buried++;
            cur = h.next;
            continue;
        }
        const char *key = txn_open(o->tx, cur, TXN_RO);
        if (!key)
            return txn_last_error(o->tx);
        struct kv_slice k = {key + key_off(&h), klen_of(&h)};
        if (kv_hash(k.p, k.n) != h.hash)
            problem(c, "node %p: stored hash is not its key's", (void *)cur);
        if (h.hash >> (64 - bits) != j)
            problem(c, "node %p: in bucket %llu of the %u-bit table, its hash says %llu",
                    (void *)cur, (unsigned long long)j, bits,
                    (unsigned long long)(h.hash >> (64 - bits)));
        /* the search stops at the first node with this key, at the latest
         * at cur itself: it never walks into an unchecked part */
        if ((rc = chain_find(o, &b, h.hash, k, &hit)) < 0)
            return rc;
        if (hit.node != cur)
            problem(c, "node %p: its key is also in node %p", (void *)cur, (void *)hit.node);
        if (old) {
            struct bref nb;
            if ((rc = bucket_of(o, h.hash, &nb)) || (rc = chain_find(o, &nb, h.hash, k, &hit)) < 0)
                return rc;
            if (rc)
                problem(c, "node %p: its key is in the new table too", (void *)cur);
        }
        c->keys++;
        cur = h.next;
    }
    if (len != n)
        problem(c, "%u-bit table, bucket %llu: n = %llu but %llu nodes", bits,
                (unsigned long long)j, (unsigned long long)n, (unsigned long long)len);
    return 0;
}

/* The old table's stripe st, unless drained: buckets below the cursor
 * must be empty (K3), the others sound and disjoint from the new table. */
static int check_old_stripe(struct checker *c, unsigned st)
{
    struct view *v = &c->o.s->v;
    uint64_t m, per = per_stripe(v->bits - 1);
    int rc = rd(&c->o, v->sdir[st], D_MIGRATED, &m, sizeof m);
    if (rc || m == per)
        return rc;
    if (m > per || !obj_ok(c, v->old_sdir[st], D_SEG + 8 * (per / SEG_BUCKETS))) {
        problem(c, "stripe %u: migrated %llu of %llu, old sdir %p", st, (unsigned long long)m,
                (unsigned long long)per, (void *)v->old_sdir[st]);
        return 0;
    }
    for (uint64_t i = 0; i < per && !rc; i++) {
        if (i >= m) {
            rc = check_chain(c, v->old_sdir[st], v->bits - 1, (uint64_t)st * per + i, 1);
            continue;
        }
        struct bref b;
        txn_obj *head;
        uint64_t n;
        if (!(rc = bucket_ref(&c->o, v->old_sdir[st], v->bits - 1, (uint64_t)st * per + i, &b)) &&
            b.seg && !(rc = bucket_get(&c->o, &b, &head, &n)) && (head || n))
            problem(c, "stripe %u: old bucket %llu below the cursor is not empty", st,
                    (unsigned long long)i);
    }
    return rc;
}

int kv_check(kv_store *s, FILE *out)
{
    struct checker c = {.out = out};
    struct view *v = &s->v;
    uint64_t per = per_stripe(v->bits);
    int rc = op_begin(&c.o, s);
    if (!obj_ok(&c, v->table, TABLE_SIZE) || (v->old && !obj_ok(&c, v->old, TABLE_SIZE)))
        problem(&c, "bad table handle");
    for (unsigned st = 0; st < STRIPES && !rc && !c.problems; st++)
        if (!obj_ok(&c, v->sdir[st], D_SEG + 8 * (per / SEG_BUCKETS)))
            problem(&c, "stripe %u: bad sdir handle", st);
    for (uint64_t j = 0; j < ((uint64_t)1 << v->bits) && !rc && !c.problems; j++)
        rc = check_chain(&c, v->sdir[j / per], v->bits, j, 0);
    /* only against a sound new table: its chains are then known finite */
    for (unsigned st = 0; v->old && st < STRIPES && !rc && !c.problems; st++)
        rc = check_old_stripe(&c, st);
    rc = op_end(&c.o, rc);
    free(c.seen.a);
    if (rc) {
        fprintf(out, "check: cannot read the store: %s\n", txn_strerror(rc));
        return rc;
    }
    pthread_mutex_lock(&s->lazy_m);
    size_t queued = s->lq_n;
    pthread_mutex_unlock(&s->lazy_m);
    if (c.buried > queued) /* L1: one would never be freed */
        problem(&c, "%llu buried nodes, but %zu queued to be freed",
                (unsigned long long)c.buried, queued);
    if (!c.problems && c.keys != atomic_load(&s->keys))
        problem(&c, "%llu keys in chains, but the buckets' counts say %llu",
                (unsigned long long)c.keys, (unsigned long long)atomic_load(&s->keys));
    fprintf(out, "check: %s: %llu keys, %llu buckets%s, %llu buried\n",
            c.problems ? "FAILED" : "ok", (unsigned long long)c.keys,
            (unsigned long long)1 << v->bits, v->old ? " (resizing)" : "",
            (unsigned long long)c.buried);
    return c.problems ? TXN_E_CORRUPT : 0;
}

/* ---- kv_objects */

struct objwalk {
    struct op o;
    int (*fn)(txn_obj *o, void *arg);
    void *arg;
    int in_grave; /* walking a flushed table, which holds no grave (G1) */
};

static int visit_grave(struct objwalk *w, txn_obj *node, const struct node_hdr *h);

/* fn on a handle the store holds, once it is known to be an object of at
 * least n bytes. */
static int visit(struct objwalk *w, txn_obj *obj, size_t n, const char *what)
{
    if (!obj || txn_obj_size(w->o.s->p, obj) < n)
        return refuse(TXN_E_CORRUPT, "%s %p is no object of %zu bytes", what, (void *)obj, n);
    return w->fn(obj, w->arg);
}

/* A pieced value's table and pieces. */
static int visit_pieces(struct objwalk *w, txn_obj *node, const struct node_hdr *h)
{
    txn_obj **list;
    uint64_t n;
    int rc = piece_list(&w->o, node, h, &list, &n);
    if (!rc)
        rc = visit(w, h->val, P_PIECE + 8 * n, "piece table");
    for (uint64_t i = 0; i < n && !rc; i++)
        rc = visit(w, list[i], piece_len(h->vlen, i), "piece");
    free(list);
    return rc;
}

/* An element table's objects (t_dict.c). */
static int visit_dict(struct objwalk *w, txn_obj *node, const struct node_hdr *h)
{
    int rc = dict_objects(w->o.tx, h->val, w->fn, w->arg);
    if (rc == TXN_E_CORRUPT)
        return refuse(rc, "node %p: element table %p is damaged", (void *)node, (void *)h->val);
    return rc;
}

/* The nodes and values of the chains of one segment (K1: as many as the
 * bucket's count, which also stops a cycle). */
static int visit_chains(struct objwalk *w, txn_obj *seg)
{
    for (unsigned i = 0; i < SEG_BUCKETS; i++) {
        uint64_t b[2], len = 0; /* {head, n} */
        int rc = rd(&w->o, seg, BUCKET_BYTES * i, b, sizeof b);
        if (rc)
            return rc;
        for (txn_obj *cur = (txn_obj *)(uintptr_t)b[0]; cur; len++) {
            struct node_hdr h;
            if (len == b[1])
                return refuse(TXN_E_CORRUPT, "segment %p, bucket %u: more nodes than its count "
                              "%llu", (void *)seg, i, (unsigned long long)b[1]);
            if ((rc = visit(w, cur, HDR, "node")) || (rc = node_hdr(&w->o, cur, &h)) ||
                (grave(&h) && (rc = visit_grave(w, cur, &h))) ||
                (h.val && !pieced(&h) && !dicted(&h) && !grave(&h) &&
                 (rc = visit(w, h.val, h.vlen, "value"))) ||
                (dicted(&h) && (rc = visit_dict(w, cur, &h))) ||
                (pieced(&h) && (rc = visit_pieces(w, cur, &h))))
                return rc;
            cur = h.next;
        }
        if (len != b[1])
            return refuse(TXN_E_CORRUPT, "segment %p, bucket %u: %llu nodes, its count says "
                          "%llu", (void *)seg, i, (unsigned long long)len,
                          (unsigned long long)b[1]);
    }
    return 0;
}

/* One stripe of a table of `bits` bits: its directory, segments, chains. */
static int visit_stripe(struct objwalk *w, txn_obj *sdir, unsigned bits)
{
    uint64_t nseg = per_stripe(bits) / SEG_BUCKETS;
    int rc = visit(w, sdir, D_SEG + 8 * (size_t)nseg, "stripe directory");
    for (uint64_t q = 0; q < nseg && !rc; q++) {
        txn_obj *seg;
        if (!(rc = rd_obj(&w->o, sdir, D_SEG + 8 * q, &seg)) && seg &&
            !(rc = visit(w, seg, SEG_BYTES, "segment")))
            rc = visit_chains(w, seg);
    }
    return rc;
}

/* A grave's flushed table: the table, what is left of its stripes. */
static int visit_grave(struct objwalk *w, txn_obj *node, const struct node_hdr *h)
{
    txn_obj *sd[STRIPES];
    uint64_t nseg;
    unsigned bits;
    if (w->in_grave)
        return refuse(TXN_E_CORRUPT, "grave %p inside a flushed table (G1)", (void *)node);
    int rc = visit(w, h->val, TABLE_SIZE, "flushed table");
    if (!rc)
        rc = grave_table(&w->o, h->val, sd, &nseg, &bits);
    w->in_grave = 1;
    for (unsigned st = 0; st < STRIPES && !rc; st++)
        if (sd[st])
            rc = visit_stripe(w, sd[st], bits);
    w->in_grave = 0;
    return rc;
}

/* kv_check's look at a grave: its objects sound and reached once. */
static int check_grave(struct checker *c, txn_obj *node, const struct node_hdr *h)
{
    struct objwalk w = {.o = c->o, .fn = seen_once, .arg = c};
    int rc = visit_grave(&w, node, h);
    if (rc == TXN_E_CORRUPT) {
        problem(c, "grave %p: %s", (void *)node, why_rc == rc ? why : "an object reached twice");
        rc = 0;
    }
    return rc;
}

int kv_objects(kv_store *s, int (*fn)(txn_obj *o, void *arg), void *arg)
{
    struct objwalk w = {.fn = fn, .arg = arg};
    struct view *v = &s->v;
    int rc = op_begin(&w.o, s);
    if (rc)
        return rc;
    if (!(rc = visit(&w, v->table, TABLE_SIZE, "table")) && v->old)
        rc = visit(&w, v->old, TABLE_SIZE, "old table");
    for (unsigned st = 0; st < STRIPES && !rc; st++) {
        uint64_t m;
        /* K3: a drained stripe's old directory and segments are freed */
        if (!(rc = visit_stripe(&w, v->sdir[st], v->bits)) && v->old &&
            !(rc = rd(&w.o, v->sdir[st], D_MIGRATED, &m, sizeof m)) &&
            m != per_stripe(v->bits - 1))
            rc = visit_stripe(&w, v->old_sdir[st], v->bits - 1);
    }
    if (rc) { /* fn's own return may be positive: op_end would commit */
        txn_abort(w.o.tx);
        return rc;
    }
    return op_end(&w.o, 0);
}
