/* store.c - the persistent hash table of the key-value store, on txn.h.
 *
 * Layout (every field a u64 or a txn_obj handle)
 *   root     {magic, version, stripes, seg_buckets, table, old}
 *   table    {bits, sdir[STRIPES]}: 2^bits buckets; written only when made
 *   sdir     {migrated, seg[per_stripe / SEG_BUCKETS]}: one per stripe and
 *            table; a NULL seg is a segment of empty buckets not made yet
 *   segment  {bucket[SEG_BUCKETS]}, bucket = {head, n}: n = chain length
 *   node     {next, hash, klen, vlen, val, key bytes, value bytes}: the
 *            value sits in the node if it is at most INLINE_MAX bytes
 *            (val == NULL), else in an object of its own (val)
 *
 * Hashing and locks. A key's bucket is the top `bits` bits of its 64-bit
 * hash and its stripe the top STRIPE_BITS bits, so every stripe owns a
 * contiguous run of buckets in every table, and doubling a table splits
 * old bucket i into new buckets 2i and 2i+1 of the same stripe. One
 * volatile mutex per stripe guards everything of the stripe in both tables
 * (its sdirs, segments, nodes), held from before the first access until
 * the transaction has committed (txn_defer ON_END): two-phase locking, as
 * undo's in-place writes need; readers lock too, so nobody reads a write
 * that may still roll back. Several stripes are locked in ascending order.
 *
 * Why objects are cut this small. Under cow an object has one writer at a
 * time and a write copies the whole object, so nothing that two stripes
 * write may share an object, and what one write touches should be small:
 * hence per-stripe sdirs, 512-byte segments, and chain lengths kept next to
 * the heads instead of a key count in the root that every insert would
 * write (the root's "counts" are the buckets' n fields; the total lives in
 * DRAM). A value over INLINE_MAX gets its own object so that relinking a
 * chain never copies a large value. The root and a table object change
 * only under all stripe locks (resize start and finish).
 *
 * Incremental resize. When keys exceed the bucket count, one transaction
 * under all locks allocates the doubled table with empty sdirs (STRIPES +
 * 1 small objects, whatever the size) and moves the current table to
 * `old`. From then on, every write transaction on a stripe first moves its
 * key's old bucket, then up to MIGRATE_SCAN old buckets from the stripe's
 * cursor (sdir.migrated) into the new table; a stripe whose cursor reaches
 * its end frees its old segments and old sdir in that same transaction.
 * When all stripes are done, one transaction under all locks frees the old
 * table object and clears `old`. No request ever moves more than
 * 1 + MIGRATE_SCAN buckets.
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
 * Reads inside a transaction that may have written the same bytes go
 * through txn_read (redo's rule); pointers from txn_open are used only for
 * bytes no write touches in that transaction (values of read-only calls).
 */
#include "store.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LAYOUT "pmtx-kvstore"
#define KV_MAGIC 0x31766b78746d70ULL /* "pmtxkv1" */
#define KV_VERSION 1                 /* of this layout and kv_hash */

#define STRIPE_BITS 8
#define STRIPES (1u << STRIPE_BITS)
#define SEG_BITS 5
#define SEG_BUCKETS (1u << SEG_BITS)
#define BUCKET_BYTES 16
#define SEG_BYTES (SEG_BUCKETS * BUCKET_BYTES)
#define MIN_BITS (STRIPE_BITS + SEG_BITS) /* one segment per stripe */
#define MAX_BITS 40
#define INLINE_MAX 256
#define MIGRATE_SCAN 8
#define WORDS (STRIPES / 64)

/* root */
enum { R_MAGIC = 0, R_VERSION = 8, R_STRIPES = 16, R_SEG = 24, R_TABLE = 32, R_OLD = 40,
       ROOT_SIZE = 48 };
/* table */
enum { T_BITS = 0, T_SDIR = 8, TABLE_SIZE = T_SDIR + 8 * STRIPES };
/* sdir */
enum { D_MIGRATED = 0, D_SEG = 8 };

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
    size_t pool_size;
    struct stripe_lock lock[STRIPES];
    struct view v;
    pthread_mutex_t resize; /* one resize start or finish at a time */
    _Atomic uint64_t keys, bytes;
    _Atomic unsigned bits, resizing, stripes_done; /* mirrors, for lock-free checks */
};

/* One call's transaction and what it holds. */
struct op {
    kv_store *s;
    txn *tx;
    uint64_t locked[WORDS]; /* stripes held */
    int64_t dkeys, dbytes;  /* applied to the DRAM totals after commit */
    unsigned done;          /* stripes whose migration this call finished */
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

/* Lock the stripes of `want` in ascending order (no deadlock between
 * calls that lock several) and release them when the transaction ends. */
static int op_lock(struct op *o, const uint64_t want[WORDS])
{
    for (unsigned w = 0; w < WORDS; w++)
        for (uint64_t m = want[w]; m; m &= m - 1)
            pthread_mutex_lock(&o->s->lock[w * 64 + (unsigned)__builtin_ctzll(m)].m);
    memcpy(o->locked, want, sizeof o->locked);
    int rc = txn_defer(o->tx, TXN_ON_END, unlock_all, o);
    if (rc)
        unlock_all(o);
    return rc;
}

static int op_lock_keys(struct op *o, size_t n, const struct kv_slice *k, size_t stride)
{
    uint64_t want[WORDS] = {0};
    for (size_t i = 0; i < n; i += stride) {
        unsigned s = stripe_of(kv_hash(k[i].p, k[i].n));
        want[s / 64] |= 1ULL << (s % 64);
    }
    return op_lock(o, want);
}

static void maybe_resize(kv_store *s);

/* Commit (rc == 0) or abort, then account for what the call changed. */
static int op_end(struct op *o, int rc)
{
    if (rc < 0) {
        txn_abort(o->tx);
        return rc;
    }
    if ((rc = txn_commit(o->tx)))
        return rc;
    kv_store *s = o->s;
    atomic_fetch_add(&s->keys, (uint64_t)o->dkeys);
    atomic_fetch_add(&s->bytes, (uint64_t)o->dbytes);
    if (o->done)
        atomic_fetch_add(&s->stripes_done, o->done);
    if (o->dkeys > 0 || o->done)
        maybe_resize(s);
    return 0;
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
static int key_equal(struct op *o, txn_obj *node, struct kv_slice k)
{
    char buf[256];
    for (size_t i = 0; i < k.n; i += sizeof buf) {
        size_t n = k.n - i < sizeof buf ? k.n - i : sizeof buf;
        int rc = rd(o, node, HDR + i, buf, n);
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

/* Search bucket b for (hash, key). Returns 1 (found, *hit), 0 or <0. */
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
        if (hit->h.hash == hash && hit->h.klen == k.n) {
            rc = key_equal(o, cur, k);
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

/* A new node for (hash, k, v) whose next is `next`. */
static int node_make(struct op *o, uint64_t hash, struct kv_slice k, struct kv_slice v,
                     txn_obj *next, txn_obj **out)
{
    int sep = v.n > INLINE_MAX;
    struct node_hdr h = {next, hash, k.n, v.n, NULL};
    txn_obj *node;
    int rc = alloc(o, HDR + k.n + (sep ? 0 : v.n), &node);
    if (!rc && sep && !(rc = alloc(o, v.n, &h.val)))
        rc = wr(o, h.val, 0, v.p, v.n);
    if (!rc)
        rc = wr(o, node, 0, &h, sizeof h);
    if (!rc)
        rc = wr(o, node, HDR, k.p, k.n);
    if (!rc && !sep)
        rc = wr(o, node, HDR + k.n, v.p, v.n);
    if (!rc) {
        *out = node;
        o->dbytes += (int64_t)obj_bytes(o->s, node, h.val);
    }
    return rc;
}

static int node_free(struct op *o, txn_obj *node, txn_obj *val)
{
    o->dbytes -= (int64_t)obj_bytes(o->s, node, val);
    int rc = val ? txn_free(o->tx, val) : 0;
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

/* Move every node of old bucket i into the new table (buckets 2i, 2i+1). */
static int move_bucket(struct op *o, unsigned s, uint64_t i)
{
    struct view *v = &o->s->v;
    struct bref ob;
    uint64_t n;
    txn_obj *cur;
    int rc = bucket_ref(o, v->old_sdir[s], v->bits - 1, i, &ob);
    if (!rc)
        rc = bucket_get(o, &ob, &cur, &n);
    if (rc || !cur)
        return rc;
    while (cur && !rc) {
        struct node_hdr h;
        struct bref nb;
        txn_obj *head;
        uint64_t hn;
        if ((rc = node_hdr(o, cur, &h)) ||
            (rc = bucket_ref(o, v->sdir[s], v->bits, h.hash >> (64 - v->bits), &nb)) ||
            (rc = bucket_make(o, &nb)) || (rc = bucket_get(o, &nb, &head, &hn)) ||
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

/* Before a write to a key of hash h: if a resize runs and h's stripe is
 * not drained, move the key's old bucket and the next few at the cursor. */
static int migrate(struct op *o, uint64_t h)
{
    struct view *v = &o->s->v;
    if (!v->old)
        return 0;
    unsigned s = stripe_of(h);
    uint64_t per = per_stripe(v->bits - 1), m, m0;
    int rc = rd(o, v->sdir[s], D_MIGRATED, &m, sizeof m);
    if (rc || m == per)
        return rc;
    uint64_t base = (uint64_t)s * per, own = (h >> (64 - (v->bits - 1))) - base;
    if (own >= m && (rc = move_bucket(o, s, base + own)))
        return rc;
    for (m0 = m; m < per && m - m0 < MIGRATE_SCAN && !rc; m++)
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

/* The new-table bucket of h, after migrate(). */
static int bucket_of(struct op *o, uint64_t h, struct bref *b)
{
    struct view *v = &o->s->v;
    return bucket_ref(o, v->sdir[stripe_of(h)], v->bits, h >> (64 - v->bits), b);
}

/* Find a key for reading: in its old bucket while that is not drained,
 * else in the new table. */
static int lookup(struct op *o, struct kv_slice k, struct hit *hit)
{
    struct view *v = &o->s->v;
    uint64_t h = kv_hash(k.p, k.n);
    struct bref b;
    int rc;
    if (v->old) {
        unsigned s = stripe_of(h);
        uint64_t per = per_stripe(v->bits - 1), m, i = h >> (64 - (v->bits - 1));
        if ((rc = rd(o, v->sdir[s], D_MIGRATED, &m, sizeof m)))
            return rc;
        if (m < per && i - (uint64_t)s * per >= m) {
            if ((rc = bucket_ref(o, v->old_sdir[s], v->bits - 1, i, &b)) ||
                (rc = chain_find(o, &b, h, k, hit)))
                return rc;
        }
    }
    if ((rc = bucket_of(o, h, &b)))
        return rc;
    return chain_find(o, &b, h, k, hit);
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
    int rc = rd(o, table, T_BITS, &bits, sizeof bits);
    if (rc || bits < MIN_BITS || bits > MAX_BITS)
        return rc ? rc : TXN_E_CORRUPT;
    v->table = table;
    v->bits = (unsigned)bits;
    v->old = old;
    if ((rc = rd(o, table, T_SDIR, v->sdir, sizeof v->sdir)))
        return rc;
    if (!old)
        return 0;
    if ((rc = rd(o, old, T_BITS, &bits, sizeof bits)) || bits + 1 != v->bits)
        return rc ? rc : TXN_E_CORRUPT;
    return rd(o, old, T_SDIR, v->old_sdir, sizeof v->old_sdir);
}

struct view_swap {
    kv_store *s;
    struct view v;
};

/* ON_COMMIT of a resize start/finish, registered before the unlock so it
 * runs while every stripe is still locked. */
static void view_install(void *arg)
{
    struct view_swap *w = arg;
    w->s->v = w->v;
    atomic_store(&w->s->bits, w->v.bits);
    atomic_store(&w->s->stripes_done, 0);
    atomic_store(&w->s->resizing, w->v.old != NULL);
}

static void lock_all(uint64_t want[WORDS])
{
    memset(want, 0xff, WORDS * sizeof *want);
}

