/* wl_kv.c - the crash simulator's key-value store workload: the store of
 * apps/kvstore (store.h) kept in the driver's own pool, each step one
 * kv_txn, as the server's MULTI/EXEC runs its queued commands.
 *
 * The pool: thread t's part (KV_ROOT_SIZE bytes) is the store's root
 * (kv_adopt). Every transaction the store commits ends in sim_commit (the
 * store's commit hook, kv_opts.commit), announcing next_digest[t]: the
 * digest of the store as the step leaves it if it commits, and as it was
 * before for every other commit (reads, a resize: they change no key).
 *
 * The keys: KEYS names of 7 to 36 bytes, PRELOAD of them set by setup.
 * Each step locks 1 to MAX_OPS random keys (kv_txn_begin) and runs one
 * command on each, a key may come twice: puts of 1 to SMALL bytes (kept
 * in the node) or of BIG_MIN to BIG_MAX (a value object of their own),
 * never expiring, expiring far in the future or keeping their expiry
 * (KV_KEEPTTL); deletes; expiry set far ahead or removed (kv_txn_expire);
 * reads of a value or an expiry, checked against the transaction's own
 * writes; 1 to 6 list commands on one key through list.c, the code
 * t_list.c's commands call (list_op: pushes of 1 to 6 elements of 1 to
 * 900 bytes and pops of 1 to 7 or all at either end, rotations, LSET,
 * LINSERT, LREM, LTRIM, at thresholds lowered so that lists change form
 * both ways often; on every key, and at 80 in 100 on one key in LEVERY;
 * the mirror digests a list's elements in order, whatever its form); a
 * sorted set's 1 to 4 commands on one key in ZEVERY through zset.c, the
 * code t_zset.c's commands call (zset_op: ZADD and its flags, INCR, ZREM,
 * pops, ZREMRANGEBYRANK and -SCORE, ZRANGESTORE onto the key, at
 * thresholds lowered so that sets pass to the large form and are packed
 * again often; the mirror digests members and scores in order, whatever
 * the form); a
 * set's 1 to 4 commands through set.c, the code t_set.c's commands call
 * (dict_op: SADD, SREM, SPOP of one or of a count, SMOVE, at thresholds
 * lowered so that intsets become hashtable sets, packed sets become
 * element tables, some past the 64 members where a table splits buckets,
 * and SPOP's rebuild packs tables again; on every key, and at 80 in 100
 * on one key in SEVERY; the mirror digests a set's members and form,
 * whatever its record); a hash's HSET, HSETNX, HINCRBY, HDEL through
 * hash.c, the code t_hash.c's commands call, or a DEL, on one key in
 * HEVERY (hash_op: packed, the
 * conversion to a table past the workload's thresholds, the table's
 * changes, the key gone with its last field). A delete or an overwrite
 * of a table (or of a value in pieces) only buries its node (store.c,
 * lazy free); one step in four, while some are pending, is a
 * kv_lazy_free of LAZY_BUDGET objects, which changes no key, so crashes
 * fall between and inside the steps that free a table.
 *
 * CRASHSIM_KV_LONG=1: the first LONG keys are strings that only APPEND
 * and SETRANGE (kv_txn_splice) write, of up to SPLICE_MAX bytes each (the
 * third is a list's value, which kv_txn_splice_as writes as a big list's
 * ends are written, list.c, after a kv_txn_write makes it);
 * setup makes them about as long as a piece of the store (LONG_START),
 * and every other step's first key is one of them, so that runs cross the
 * length where the store cuts a string into pieces, and piece boundaries;
 * their bytes are mirrored in full (lval) to know each splice's result. Then it rolls back one time in eight (kv_txn_end with rc < 0),
 * else commits. Expiry times lie in the year 2100 or later: no key expires
 * during a run or a check, so the oracle does not depend on the clock.
 *
 * The oracle: per key present, its value's length and hash and its expiry
 * time, digested in key order. After recovery kv_adopt loads the store
 * (counting its keys), kv_check must pass (the workload's invariant), a
 * kv_scan lists the keys, each read in a read-only kv_txn (value, expiry)
 * gives the digest; then every pending lazy free runs to its end, and
 * kv_check and the digest again must agree: the objects reached are
 * kv_objects' (table, stripes' directories, segments, nodes, values)
 * after that drain, so that a value freed twice, or one never freed
 * (not found again at open: kv_check's L1), shows.
 *
 * CRASHSIM_KV_RESIZE=1: RESIZE_KEYS keys more, setup sets as many keys as
 * the table has buckets (8,192, small values), and the first step of a
 * run adds one more: its commit starts the incremental resize, whose
 * migrations the later writes carry on (kv_opts.resize_step buckets
 * each), so crashes fall into them and recovery meets a store with two
 * tables. (The run is too short to drain every stripe: the resize's last
 * transaction is not reached.) Workload kv-reserve: the same, in a
 * larger pool, and the step after it calls kv_reserve as an MSET of
 * RESERVE keys would: the running resize drained and two more doublings,
 * each drained, in transactions of one stripe, so that crashes fall into
 * those.
 *
 * With several threads, each has its own store in its own part.
 * Run when named (--workload kv).
 *
 * One step in FLUSH_EVERY is a FLUSHALL ASYNC (kv_flush_async): one
 * transaction empties the store (the empty digest announced), its old
 * table kept as a grave that the lazy free steps above then free, so that
 * crashes fall into the flush and between and inside its frees; a flush
 * that finds no room changes nothing.
 *
 * Eviction (evict_step): one step in EVICT_EVERY sets a limit EVICT_BYTES
 * below the store's bytes and calls kv_evict down to it, EVICT_CHUNKS
 * times, in allkeys-lru, volatile-ttl or allkeys-random order;
 * kv-shared's other threads run between the calls, on the same keys.
 * Each evicted key goes in a transaction of its own, and the store names
 * it (kv_opts.evicted) before that commit: the mirror drops it then, so
 * the commit announces the store without it, and a recovery must show
 * every key but those of committed evictions. The store's random order
 * draws from the run's seed (the simulator's getrandom). CRASHSIM_KV_EVICT=0
 * leaves evictions out (txn-crashcheck's program: there every transaction,
 * each window an eviction samples too, costs a comparison of the pool). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "list.h"
#include "set.h"
#include "sim.h"
#include "store.h"
#include "t_dict.h"
#include "zset.h"

enum { KEYS = 200, PRELOAD = 100, BATCH = 64, MAX_OPS = 10, KEY_MAX = 40, SMALL = 200,
       BIG_MIN = 300, BIG_MAX = 3000, TABLE = 8192, RESIZE_KEYS = TABLE + KEYS,
       RESERVE = 4 * TABLE };
enum { LAZY_BUDGET = 8 }; /* objects a lazy free step frees: a table takes several */
enum { FLUSH_EVERY = 200 }; /* steps per FLUSHALL ASYNC, on average */
enum { MEMBERS = 192, MASK_WORDS = MEMBERS / 64 }; /* a set's members: member_of */
enum { LONG = 3, LONG_MAX = 192 << 10, SPLICE_MAX = 16000, LONG_START = 56000,
       SBUF = LONG_START + 6000 };
#define FAR_MS 4102444800000ull /* 2100-01-01 00:00 UTC, in ms since the epoch */
#define SPREAD_MS 31536000000ull /* expiry times: up to a year later */
#define ROLLBACK (-1)           /* kv_txn_end: any rc < 0 rolls back */

struct entry {
    int present;
    uint32_t len, type; /* type: enum kv_type, kept in the node's header */
    uint64_t vh, at; /* the value's hash; its expiry (0: none) */
};

static struct entry cur[SIM_THREADS][RESIZE_KEYS];  /* committed */
static struct entry next[SIM_THREADS][RESIZE_KEYS]; /* the transaction's */
static uint64_t next_digest[SIM_THREADS];           /* announced at a commit */
static kv_store *store[SIM_THREADS];
static char vbuf[SIM_THREADS][BIG_MAX]; /* a value's bytes */
static char lval[SIM_THREADS][2][LONG][LONG_MAX]; /* long keys' strings: [0]
                                                     committed, [1] the
                                                     transaction's */
static char sbuf[SIM_THREADS][SBUF];     /* a splice's bytes */
/* A set's mirror (dict_op): its members' bits, then its form (SF_*):
 * [0] committed, [1] the transaction's. */
enum { SF_NONE, SF_INTSET, SF_PACKED, SF_TABLE, DWORDS = MASK_WORDS + 1 };
static uint64_t dmask[SIM_THREADS][2][RESIZE_KEYS][DWORDS];
/* A hash's mirror (hash_op): per field its value, a number (HINCRBY's) or
 * letters made from a seed; the packed record's field order. */
enum { HFIELDS = 96, HPACK_ENTRIES = 16, HPACK_VALUE = 24, HEVERY = 20, HKEY = 13, HVMAX = 60,
       HSLOTS = RESIZE_KEYS / HEVERY + 1 };
struct hfield {
    int64_t num;
    uint32_t seed;
    uint8_t len;
    uint8_t kind; /* 0 absent, 1 a number, 2 letters */
};
struct hmir {
    uint8_t valid; /* the key holds the hash hash_op made (not a put's bytes) */
    uint8_t table; /* kept as an element table */
    uint16_t n;
    uint8_t order[HFIELDS]; /* the packed record's fields, first added first */
    struct hfield f[HFIELDS];
};
static struct hmir hm[SIM_THREADS][2][HSLOTS]; /* [0] committed, [1] the
                                                  transaction's, by key / HEVERY */
static unsigned nkeys = KEYS;           /* keys of the run */
static unsigned nlong;                  /* long keys of the run: 0 or LONG */
static int grow[SIM_THREADS];           /* the next step adds the key that
                                           starts the resize */
static int reserve[SIM_THREADS];        /* the step after it: kv_reserve */

static int reserve_run; /* the workload is kv-reserve */
static int no_evict;    /* CRASHSIM_KV_EVICT=0: no evict_step */

/* CRASHSIM_KV_RESIZE=1 (mode 1), kv-reserve (mode 2), CRASHSIM_KV_LONG=1
 * and CRASHSIM_KV_EVICT=0: read by setup and by each recovery's process. */
static int resize_mode(void)
{
    const char *e = getenv("CRASHSIM_KV_EVICT");
    no_evict = e && *e == '0';
    const char *l = getenv("CRASHSIM_KV_LONG");
    nlong = l && *l == '1' ? LONG : 0;
    const char *r = getenv("CRASHSIM_KV_RESIZE");
    int mode = reserve_run ? 2 : r && *r == '1';
    nkeys = mode ? RESIZE_KEYS : KEYS;
    return mode;
}

/* ---- keys, values, digests */

/* Key k's name into buf (KEY_MAX bytes): "key:<k>:" and 0 to 28 letters. */
static struct kv_slice key_of(unsigned k, char *buf)
{
    int n = snprintf(buf, KEY_MAX, "key:%u:", k);
    unsigned pad = k * 7 % 29;
    for (unsigned j = 0; j < pad; j++)
        buf[(unsigned)n + j] = (char)('a' + (k + j) % 26);
    return (struct kv_slice){buf, (size_t)n + pad};
}

/* The number of the key named p[0..n), or -1 for no key of the workload. */
static int key_index(const char *p, size_t n)
{
    char buf[KEY_MAX];
    unsigned k = 0;
    for (size_t i = 4; i < n && p[i] >= '0' && p[i] <= '9' && k < nkeys; i++)
        k = k * 10 + (unsigned)(p[i] - '0');
    if (k >= nkeys)
        return -1;
    struct kv_slice s = key_of(k, buf);
    return s.n == n && !memcmp(s.p, p, n) ? (int)k : -1;
}

static uint64_t value_hash(const void *v, size_t len)
{
    return sim_hash(23, v, len);
}

static uint64_t digest_of(const struct entry *e)
{
    uint64_t d = 11, n = 0;
    for (unsigned k = 0; k < nkeys; k++)
        if (e[k].present) {
            d = sim_hash(d, &k, sizeof k);
            d = sim_hash(d, &e[k].len, sizeof e[k].len);
            d = sim_hash(d, &e[k].vh, sizeof e[k].vh);
            d = sim_hash(d, &e[k].at, sizeof e[k].at);
            d = sim_hash(d, &e[k].type, sizeof e[k].type);
            n++;
        }
    return sim_hash(d, &n, sizeof n);
}

static uint64_t kv_mirror(int t)
{
    return digest_of(cur[t]);
}

/* An expiry time for a put: none, far ahead, or (keep) KV_KEEPTTL. */
static uint64_t pick_at(uint64_t *rng, int keep)
{
    unsigned dice = (unsigned)(sim_rand(rng) % 20);
    if (dice < 11)
        return 0;
    if (keep && dice < 15)
        return KV_KEEPTTL;
    return FAR_MS + sim_rand(rng) % SPREAD_MS;
}

/* ---- the commands of a step, each checked against the mirror */

static int drift(int t, unsigned k, const char *what)
{
    fprintf(stderr, "crashsim: kv: thread %d, key %u: %s differs from the mirror\n", t, k, what);
    return TXN_E_CORRUPT;
}

/* An APPEND or SETRANGE of long key k (n0 bytes appended: setup's first
 * value; 0: a random splice). Nothing if the string would pass LONG_MAX. */
static int splice_long(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng,
                       size_t n0)
{
    struct entry *e = &next[t][k];
    char *v = lval[t][1][k];
    uint64_t have = e->present ? e->len : 0, len;
    size_t n = n0 ? n0 : 1 + (size_t)(sim_rand(rng) % SPLICE_MAX);
    int append = n0 || sim_rand(rng) % 10 < 7;
    uint64_t off = append ? have : sim_rand(rng) % (have + 4000);
    if (off + n > LONG_MAX)
        return 0;
    sim_bytes(rng, sbuf[t], n);
    if (off > have)
        memset(v + have, 0, off - have);
    memcpy(v + off, sbuf[t], n);
    unsigned type = k == 2 ? KV_LIST : KV_STRING; /* preloaded, as key 0 */
    int rc;
    if (type == KV_LIST && !e->present) { /* kv_txn_splice_as makes no list */
        len = off + n;
        rc = kv_txn_write(x, key, (struct kv_slice){v, (size_t)len}, 0, KV_LIST);
    } else {
        rc = kv_txn_splice_as(x, key, type, append ? KV_SPLICE_END : off,
                              (struct kv_slice){sbuf[t], n}, LONG_MAX, &len);
        if (rc >= 0 && rc != e->present)
            return drift(t, k, "a splice's answer");
    }
    if (rc < 0)
        return rc;
    if (!e->present)
        e->at = 0; /* made as SET makes it */
    e->present = 1;
    e->type = type;
    e->len = (uint32_t)(off + n > have ? off + n : have);
    e->vh = value_hash(v, e->len);
    return len == e->len ? 0 : drift(t, k, "a splice's length");
}

/* Set key k to a new value of the transaction's mirror (a long key: a
 * splice). */
static int put(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng, int big)
{
    if (k < nlong)
        return splice_long(t, x, k, key, rng, 0);
    struct entry *e = &next[t][k];
    uint64_t at = pick_at(rng, 1);
    e->len = big ? BIG_MIN + (uint32_t)(sim_rand(rng) % (BIG_MAX - BIG_MIN + 1))
                 : 1 + (uint32_t)(sim_rand(rng) % SMALL);
    sim_bytes(rng, vbuf[t], e->len);
    e->vh = value_hash(vbuf[t], e->len);
    e->at = at != KV_KEEPTTL ? at : e->present ? e->at : 0;
    e->present = 1;
    hm[t][1][k / HEVERY].valid &= k % HEVERY != HKEY; /* a hash's key: bytes now */
    /* a string, a hash, an item, a set, a sorted set (the last two: the
     * node's third type bit); lists: list_op */
    static const uint32_t types[] = {KV_STRING, KV_HASH, KV_ITEM, KV_SET, KV_ZSET};
    e->type = types[sim_rand(rng) % 5];
    return kv_txn_write(x, key, (struct kv_slice){vbuf[t], e->len}, at, e->type);
}

/* A list's commands on key k through list.c (list.h), as t_list.c runs
 * them: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP and RPOP with a count, LMOVE of
 * a key onto itself, LSET, LINSERT, LREM, LTRIM. The list is read first
 * (list_load) as a packed record (a 4-byte count, then a 4-byte length
 * and the bytes of each element, head first), whose length and hash are
 * the mirror's whatever the list's form; each command's answer (a new
 * length, the elements popped or moved) is checked against that record,
 * changed as the command changes the list. list-max-listpack-size is 8
 * elements (big past 8, packed again at 4) on half the keys, 4 KB (big
 * past it, packed again at 2 KB; half the elements pushed there are 200
 * to 900 bytes long, one in 8 elsewhere) on the others; pushes are
 * likelier below 6 elements (10 on the others), pops above, so that lists
 * cross both ways. A list passing list_cap() bytes only pops.
 * A key of another type is left alone (WRONGTYPE), but one key in LEVERY
 * deletes it first, as a DEL would. */
enum { LEVERY = 40, LKEY = 4, LREC = 16384, LELEM = 900, LPUSH_MAX = 6 };
static char lrec[SIM_THREADS][LREC];               /* the list as the mirror has it */
static char lelem[SIM_THREADS][LPUSH_MAX][LELEM]; /* a push's elements */

/* The most bytes key k's list record may take: LREC on the list keys,
 * BIG_MAX (the old workload's) on the others, so that the pool of the
 * largest engine (pmdk) still holds the other keys' lists. */
static uint32_t list_cap(unsigned k)
{
    return k % LEVERY == LKEY ? LREC : BIG_MAX;
}

static uint32_t get_le32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static void put_le32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}

/* key's list as a packed record into rec (cap bytes), its length to
 * *len (4: missing): list_load's 1 or 0, or an error (TXN_E_CORRUPT: it
 * passes cap). */
static int list_record(kv_txn *x, struct kv_slice key, char *rec, size_t cap, uint32_t *len)
{
    struct list l;
    int rc = list_load(x, key, &l);
    size_t n = 4;
    put_le32(rec, rc > 0 ? (uint32_t)l.n : 0);
    for (size_t i = 0; rc > 0 && i < l.n; n += 4 + l.e[i].n, i++) {
        if (n + 4 + l.e[i].n > cap) {
            rc = TXN_E_CORRUPT;
            break;
        }
        put_le32(rec + n, (uint32_t)l.e[i].n);
        memcpy(rec + n + 4, l.e[i].p, l.e[i].n);
    }
    list_free(&l);
    *len = (uint32_t)n;
    return rc;
}

/* The record's element at an end (tail: the last). */
static char *rec_end(char *rec, int tail)
{
    char *at = rec + 4;
    for (uint32_t i = 0, n = get_le32(rec); tail && i + 1 < n; i++)
        at += 4 + get_le32(at);
    return at;
}

static void rec_push(char *rec, uint32_t *len, int tail, struct kv_slice v)
{
    char *at = tail ? rec + *len : rec + 4;
    memmove(at + 4 + v.n, at, (size_t)(rec + *len - at));
    put_le32(at, (uint32_t)v.n);
    memcpy(at + 4, v.p, v.n);
    *len += 4 + (uint32_t)v.n;
    put_le32(rec, get_le32(rec) + 1);
}

/* Take the element at an end off the record, checking that it is v. */
static int rec_pop(char *rec, uint32_t *len, int tail, struct kv_slice v)
{
    char *at = rec_end(rec, tail);
    uint32_t n = get_le32(at);
    if (!get_le32(rec) || n != v.n || memcmp(at + 4, v.p, n))
        return -1;
    memmove(at, at + 4 + n, (size_t)(rec + *len - at - 4 - n));
    *len -= 4 + n;
    put_le32(rec, get_le32(rec) - 1);
    return 0;
}

/* One push (LPUSH, RPUSH; 1 in 8 the X form) of random elements, checked
 * against the mirror's record rec (len bytes) and applied to it. */
static int list_push_op(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng,
                        long long max, char *rec, uint32_t *len)
{
    struct kv_slice e[LPUSH_MAX];
    size_t n = 1 + (size_t)(sim_rand(rng) % LPUSH_MAX), need = 0;
    int tail = (int)(sim_rand(rng) % 2), only = sim_rand(rng) % 8 == 0;
    for (size_t i = 0; i < n; i++) {
        int large = sim_rand(rng) % (max < 0 ? 2 : 8) == 0; /* by bytes: more of them */
        size_t m = large ? 200 + sim_rand(rng) % (LELEM - 199) : 1 + sim_rand(rng) % 40;
        sim_bytes(rng, lelem[t][i], m);
        e[i] = (struct kv_slice){lelem[t][i], m};
        need += 4 + m;
    }
    if (*len + need > list_cap(k))
        return 1; /* too long: the caller pops */
    uint32_t had = get_le32(rec);
    uint64_t got;
    int rc = list_push(x, key, max, tail, e, n, only, &got);
    if (rc < 0)
        return rc;
    if (rc != (!only || had))
        return drift(t, k, "a push's answer");
    for (size_t i = 0; rc && i < n; i++)
        rec_push(rec, len, tail, e[i]);
    return rc && got != get_le32(rec) ? drift(t, k, "a push's length") : 0;
}

/* One of LSET, LINSERT, LREM, LTRIM (list.c's whole-list changes) with
 * random arguments (a pivot or an element to remove mostly one that is
 * there), checked and applied to the mirror's record as the push is. */
enum { LMAXN = LREC / 4 };
static char lcopy[SIM_THREADS][LREC];
static struct kv_slice lslice[SIM_THREADS][LMAXN];

static int list_mid_op(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng,
                       long long max, char *rec, uint32_t *len)
{
    struct kv_slice *e = lslice[t], v = {lelem[t][0], 1 + (size_t)(sim_rand(rng) % 40)};
    long long n = get_le32(rec), m = n, a = (long long)(sim_rand(rng) % (2 * (uint64_t)n + 5)) - n - 2,
              b = (long long)(sim_rand(rng) % (2 * (uint64_t)n + 5)) - n - 2;
    const char *p = lcopy[t] + 4;
    memcpy(lcopy[t], rec, *len);
    for (long long i = 0; i < n; p += 4 + e[i].n, i++)
        e[i] = (struct kv_slice){p + 4, get_le32(p)};
    sim_bytes(rng, lelem[t][0], v.n);
    struct kv_slice pick = n && sim_rand(rng) % 4 ? e[sim_rand(rng) % (uint64_t)n] : v;
    unsigned what = (unsigned)(sim_rand(rng) % 4);
    long long j = 0, at = -1;
    uint64_t got = 0;
    int rc, want = n > 0;
    if (*len + 8 + v.n > list_cap(k))
        return 0;
    while (j < n && (e[j].n != pick.n || memcmp(e[j].p, pick.p, pick.n)))
        j++;
    if (what == 0) { /* LSET a v */
        rc = list_set(x, key, max, a, v);
        at = a < 0 ? a + n : a;
        if (n && (at < 0 || at >= n))
            want = 2;
        else if (n)
            e[at] = v;
    } else if (what == 1) { /* LINSERT BEFORE|AFTER pick v */
        int after = (int)(sim_rand(rng) % 2);
        rc = list_insert(x, key, max, after, pick, v, &got);
        if (n && j == n)
            want = 2;
        else if (n)
            memmove(&e[j + after + 1], &e[j + after], (size_t)(n - j - after) * sizeof *e),
                e[j + after] = v, m++;
        if (rc == 1 && (long long)got != m)
            rc = drift(t, k, "an insert's length");
    } else if (what == 2) { /* LREM a pick: a in -2 .. 2 */
        long long count = a % 3, done = 0;
        rc = list_rem(x, key, max, count, pick, &got);
        for (long long i = count < 0 ? n - 1 : 0, s = count < 0 ? -1 : 1; i >= 0 && i < n; i += s)
            if (e[i].n == pick.n && !memcmp(e[i].p, pick.p, pick.n) &&
                (!count || done < (count < 0 ? -count : count)))
                e[i].p = NULL, done++;
        m = 0;
        for (long long i = 0; i < n; i++)
            if (e[i].p)
                e[m++] = e[i];
        if (rc == 1 && (long long)got != done)
            rc = drift(t, k, "a removal's count");
    } else { /* LTRIM a b */
        rc = list_trim(x, key, max, a, b);
        a += a < 0 ? n : 0, b += b < 0 ? n : 0;
        a = a < 0 ? 0 : a;
        if (a > b || a >= n)
            m = 0;
        else
            m = (b >= n ? n - 1 : b) - a + 1, memmove(e, e + a, (size_t)m * sizeof *e);
    }
    if (rc < 0)
        return rc;
    if (rc != want)
        return drift(t, k, "a whole-list change's answer");
    put_le32(rec, (uint32_t)m);
    *len = 4;
    for (long long i = 0; i < m; i++) {
        put_le32(rec + *len, (uint32_t)e[i].n);
        memcpy(rec + *len + 4, e[i].p, e[i].n);
        *len += 4 + (uint32_t)e[i].n;
    }
    return 0;
}

static int list_op(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng)
{
    struct entry *e = &next[t][k];
    char *rec = lrec[t];
    uint32_t len;
    long long max = k / LEVERY % 2 ? -1 : 8;
    int rc = list_record(x, key, rec, LREC, &len);
    if (rc == KV_E_WRONGTYPE) {
        if (!e->present || e->type == KV_LIST)
            return drift(t, k, "a list's type");
        if (k % LEVERY != LKEY)
            return 0;
        if ((rc = kv_txn_del(x, key)) != 1)
            return rc < 0 ? rc : drift(t, k, "a delete's answer");
        e->present = 0;
        put_le32(rec, 0), len = 4;
        rc = 0;
    }
    if (rc < 0)
        return rc;
    if (rc != e->present ||
        (rc && (e->type != KV_LIST || len != e->len || value_hash(rec, len) != e->vh)))
        return drift(t, k, "a list's elements");
    uint64_t at = e->present ? e->at : 0;
    unsigned ops = 1 + (unsigned)(sim_rand(rng) % 6);
    for (unsigned j = 0; j < ops && rc >= 0; j++) {
        uint32_t n = get_le32(rec);
        unsigned dice = (unsigned)(sim_rand(rng) % 100);
        int tail = (int)(sim_rand(rng) % 2);
        if (dice < (n < (max > 0 ? 6u : 10u) ? 50u : 30u) && (rc = list_push_op(t, x, k, key, rng, max, rec, &len)) <= 0) {
            ; /* pushed, or an error */
        } else if (dice < 80) { /* LPOP, RPOP with a count; 1 in 20 all */
            struct list_popped p;
            uint64_t count = sim_rand(rng) % 20 ? 1 + sim_rand(rng) % 7 : (uint64_t)n + 1;
            rc = list_pop(x, key, max, tail, count, &p);
            if (rc >= 0 && (rc != (n > 0) || p.n != (count < n ? count : n)))
                rc = drift(t, k, "a pop's answer");
            for (size_t i = 0; rc > 0 && i < p.n; i++)
                if (rec_pop(rec, &len, tail, p.e[i]))
                    rc = drift(t, k, "a popped element");
            list_popped_free(&p);
        } else if (dice < 88) { /* LMOVE key key: a rotation */
            struct kv_slice v;
            int to = (int)(sim_rand(rng) % 2);
            rc = list_move(x, key, key, max, tail, to, &v);
            if (rc >= 0 && rc != (n > 0))
                rc = drift(t, k, "a move's answer");
            if (rc > 0 && rec_pop(rec, &len, tail, v))
                rc = drift(t, k, "a moved element");
            if (rc > 0)
                rec_push(rec, &len, to, v);
            free((char *)v.p);
        } else {
            rc = list_mid_op(t, x, k, key, rng, max, rec, &len);
        }
        if (!get_le32(rec))
            at = 0; /* gone: a push makes it again, as new */
    }
    if (rc < 0)
        return rc;
    e->present = get_le32(rec) != 0;
    e->type = KV_LIST;
    e->at = at;
    e->len = len;
    e->vh = value_hash(rec, len);
    return 0;
}

struct got {
    int found;
    uint32_t len;
    uint64_t vh;
};

static struct kv_slice member_of(unsigned i, char *buf);
static int hash_table(kv_txn *x, txn_obj *d, uint32_t *n, uint64_t *vh);
static int read_key(kv_txn *x, struct kv_slice key, struct entry *e);

/* A set's commands on key k through set.c (set.h), as t_set.c runs them:
 * SADD and SREM of 1 to 8 members (half the SADDs integers only; one SADD
 * in ten 20 to 79 members, which a conversion puts in a table at once,
 * often past 64 members where its buckets split), SPOP of one or of a
 * count (0 to 4 from a packed set; from a table all but 1 to a sixth of
 * it, so that what remains is made a new set: mostly a table packed
 * again), SMOVE of the key onto itself. The thresholds are lowered (an
 * intset past SINTSET_MAX members becomes a packed hashtable set, which
 * becomes an element table past SPACKED_MAX); adds are likelier below
 * SGROW members than above. Members are member_of's 192, of 2 to 60 bytes,
 * a third of them integers. The store is read first (read_key, which reads
 * a set through set.c) and checked against the mirror: its members' bits
 * and its form, whatever the record; each answer (the count added or
 * removed, each member popped, SMOVE's) is checked against the mirror
 * changed as Redis changes the set. A put's bytes of type set are deleted
 * first, as a DEL would, and so is a value of another type on the key in
 * SEVERY; other keys' are left alone. */
enum { SEVERY = 40, SKEY = 17, SINTSET_MAX = 5, SPACKED_MAX = 10, SGROW = 72, SARGS = 8,
       SBIG = 80 };
static const struct set_limits slim = {SINTSET_MAX, SPACKED_MAX};

static int member_index(struct kv_slice m)
{
    for (unsigned i = 0; i < MEMBERS; i++) {
        char buf[64];
        struct kv_slice o = member_of(i, buf);
        if (o.n == m.n && !memcmp(o.p, m.p, m.n))
            return (int)i;
    }
    return -1;
}

static int has_member(const uint64_t *mask, unsigned i)
{
    return mask[i / 64] >> (i % 64) & 1;
}

static unsigned members(const uint64_t *mask)
{
    unsigned n = 0;
    for (unsigned w = 0; w < MASK_WORDS; w++)
        n += (unsigned)__builtin_popcountll(mask[w]);
    return n;
}

/* The form a new set of mask's members gets (SPOP's rebuild). */
static uint64_t fresh_form(const uint64_t *mask)
{
    unsigned n = members(mask), ints = 1;
    for (unsigned i = 0; i < MEMBERS; i++)
        ints &= !has_member(mask, i) || i % 3 == 0;
    return ints && n <= SINTSET_MAX ? SF_INTSET : n > SPACKED_MAX ? SF_TABLE : SF_PACKED;
}

static int set_cmd(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng)
{
    struct entry *e = &next[t][k], seen = {0};
    uint64_t *mask = dmask[t][1][k];
    int rc = read_key(x, key, &seen);
    if (rc < 0)
        return rc;
    if (seen.present != e->present ||
        (e->present && (seen.len != e->len || seen.vh != e->vh || seen.at != e->at ||
                        seen.type != e->type)))
        return drift(t, k, "a set's value");
    if (e->present && e->type != KV_SET && k % SEVERY != SKEY)
        return 0;
    if (e->present && (e->type != KV_SET || mask[MASK_WORDS] == SF_NONE ||
                       e->len != members(mask) ||
                       e->vh != value_hash(mask, DWORDS * sizeof *mask))) {
        if ((rc = kv_txn_del(x, key)) != 1) /* a put's bytes, another type's value */
            return rc < 0 ? rc : drift(t, k, "a set's delete");
        e->present = 0;
    }
    if (!e->present)
        memset(mask, 0, DWORDS * sizeof *mask);
    char bufs[SBIG][64];
    struct kv_slice m[SBIG];
    unsigned idx[SBIG], nargs = 1 + (unsigned)(sim_rand(rng) % SARGS), n = members(mask);
    unsigned dice = (unsigned)(sim_rand(rng) % 100), ints = sim_rand(rng) % 2;
    int add = dice < (n < SGROW ? 50 : 30);
    if (add && sim_rand(rng) % 10 == 0) /* a big SADD: a table at once, past 64 */
        nargs = SBIG / 4 + (unsigned)(sim_rand(rng) % (SBIG * 3 / 4)), ints = 0;
    for (unsigned j = 0; j < nargs; j++) {
        idx[j] = (unsigned)(sim_rand(rng) % MEMBERS);
        if (add && ints)
            idx[j] -= idx[j] % 3; /* an integer */
        else if (!add && n && sim_rand(rng) % 4) /* mostly a member that is there */
            for (unsigned at = (unsigned)(sim_rand(rng) % n);;)
                if (has_member(mask, idx[j] = (idx[j] + 1) % MEMBERS) && !at--)
                    break;
        m[j] = member_of(idx[j], bufs[j]);
    }
    uint64_t got = 0, want = 0;
    if (add || dice < 75) { /* SADD, SREM */
        rc = add ? set_add(x, key, &slim, m, nargs, &got) : set_rem(x, key, &slim, m, nargs, &got);
        if (add && !e->present)
            mask[MASK_WORDS] = idx[0] % 3 ? SF_PACKED : SF_INTSET;
        for (unsigned j = 0; j < nargs && rc >= 0; j++) {
            if (has_member(mask, idx[j]) == add)
                continue;
            mask[idx[j] / 64] ^= 1ULL << (idx[j] % 64);
            want++;
            if (add && mask[MASK_WORDS] == SF_INTSET &&
                (idx[j] % 3 || members(mask) > SINTSET_MAX))
                mask[MASK_WORDS] = SF_PACKED;
        }
        if (add && mask[MASK_WORDS] == SF_PACKED && members(mask) > SPACKED_MAX)
            mask[MASK_WORDS] = SF_TABLE;
    } else if (dice < 95) { /* SPOP, of a count one in two */
        struct set_popped p;
        int many = sim_rand(rng) % 2;
        uint64_t count = !many ? 1 : n <= SPACKED_MAX ? sim_rand(rng) % 5
                                   : n - 1 - sim_rand(rng) % (n / 6);
        rc = set_pop(x, key, &slim, many, count, sim_rand(rng), &p);
        got = p.n;
        want = count < n ? count : n;
        for (size_t j = 0; j < p.n && rc >= 0; j++) {
            int i = member_index(p.e[j]);
            if (i < 0 || !has_member(mask, (unsigned)i))
                rc = TXN_E_CORRUPT;
            else
                mask[i / 64] ^= 1ULL << (i % 64);
        }
        set_popped_free(&p);
        unsigned rest = members(mask);
        if (rc >= 0 && rc != e->present)
            return drift(t, k, "a pop's answer");
        if (rc >= 0 && many && rest && rest * 5 <= want)
            mask[MASK_WORDS] = fresh_form(mask);
    } else { /* SMOVE onto itself: 1 when a member */
        rc = set_move(x, key, key, &slim, m[0]);
        got = rc < 0 ? 0 : (uint64_t)rc;
        want = has_member(mask, idx[0]);
    }
    if (rc == TXN_E_CORRUPT || (rc >= 0 && got != want))
        return drift(t, k, "a set's answer");
    if (rc < 0)
        return rc;
    if (!members(mask)) { /* the key goes with its last member */
        e->present = 0;
        return 0;
    }
    if (!e->present)
        e->at = 0;
    e->present = 1;
    e->type = KV_SET;
    e->len = members(mask);
    e->vh = value_hash(mask, DWORDS * sizeof *mask);
    return 0;
}

/* 1 to 4 set commands on key k (set_cmd). */
static int dict_op(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng)
{
    int rc = 0;
    for (unsigned n = 1 + (unsigned)(sim_rand(rng) % 4); n-- && !rc;)
        rc = set_cmd(t, x, k, key, rng);
    return rc;
}

static void got_value(void *arg, const char *v, size_t n)
{
    struct got *g = arg;
    g->found = v != NULL;
    g->len = (uint32_t)n;
    g->vh = v ? value_hash(v, n) : 0;
}

/* A set's member i: an integer as Redis writes one (a third of them:
 * intsets), a number with a leading zero (not one), or "m<i>" and letters,
 * 2 to 60 bytes. */
static struct kv_slice member_of(unsigned i, char *buf)
{
    if (i % 3 == 0)
        return (struct kv_slice){buf, (size_t)snprintf(buf, 64, "%d", (int)(i / 3) * 1009 - 30000)};
    if (i % 7 == 0)
        return (struct kv_slice){buf, (size_t)snprintf(buf, 64, "0%u", i)};
    unsigned n = (unsigned)snprintf(buf, 64, "m%u", i), len = 2 + (i * 13) % 59;
    for (; n < len; n++)
        buf[n] = (char)('a' + (i + n) % 26);
    return (struct kv_slice){buf, n};
}

/* A set as the mirror keeps it, read through set.c: its count in *n, the
 * hash of its members' bits and form in *vh. 1, or 0 when the record is
 * not a set's (a put's bytes), or <0. */
static int set_digest(kv_txn *x, struct kv_slice key, uint32_t *n, uint64_t *vh)
{
    struct set s;
    uint64_t mask[DWORDS] = {0}, count = 0;
    int rc = set_load(x, key, &s), ok = rc > 0;
    if (rc == TXN_E_CORRUPT && !s.d)
        rc = 0; /* a put's bytes */
    if (ok)
        rc = set_count(&s, &count);
    for (unsigned i = 0; i < MEMBERS && ok && !rc; i++) {
        char buf[64];
        if ((rc = set_has(&s, member_of(i, buf))) > 0)
            mask[i / 64] |= 1ULL << (i % 64);
        rc = rc < 0 ? rc : 0;
    }
    mask[MASK_WORDS] = s.d ? SF_TABLE : s.enc == SET_INTSET ? SF_INTSET : SF_PACKED;
    set_free(&s);
    *n = (uint32_t)count;
    *vh = value_hash(mask, sizeof mask);
    return rc < 0 ? rc : ok;
}

struct zmodel;
static int zset_digest(kv_txn *x, struct kv_slice key, struct zmodel *m, uint32_t *len,
                       uint64_t *vh, int *big);

/* 1 found, 0 missing or an error; the value and expiry into *e (a table:
 * its count and the hash of its members' mask; a sorted set: zset_op's
 * record of it, whatever its form). */
static int read_key(kv_txn *x, struct kv_slice key, struct entry *e)
{
    struct got g = {0};
    unsigned type = 0;
    txn_obj *d;
    int rc = kv_txn_read(x, key, got_value, &g, &type), ttl;
    if (rc <= 0)
        return rc;
    if (type == KV_LIST && key_index(key.p, key.n) >= (int)nlong) { /* list_op's: its elements */
        char *rec = malloc(LREC);
        rc = rec ? list_record(x, key, rec, LREC, &g.len) : TXN_E_NOMEM;
        g.vh = rec ? value_hash(rec, g.len) : 0;
        free(rec);
        if (rc <= 0)
            return rc < 0 ? rc : TXN_E_CORRUPT;
    }
    if (type == KV_ZSET) { /* put's bytes (no set) are hashed as they are */
        int big;
        uint32_t zl;
        uint64_t zh;
        if ((rc = zset_digest(x, key, NULL, &zl, &zh, &big)) > 0)
            g.len = zl, g.vh = zh;
        else if (rc < 0 && rc != TXN_E_CORRUPT)
            return rc;
    }
    if ((rc = kv_txn_dict(x, key, &type, &d)) < 0)
        return rc;
    if (rc && type == KV_HASH) {
        if ((rc = hash_table(x, d, &g.len, &g.vh)))
            return rc;
    } else if (type == KV_SET) {
        struct got s = g;
        if ((rc = set_digest(x, key, &s.len, &s.vh)) < 0)
            return rc;
        g = rc ? s : g;
    }
    if ((ttl = kv_txn_ttl(x, key, &e->at)) <= 0)
        return ttl < 0 ? ttl : TXN_E_CORRUPT; /* the key went */
    e->present = 1;
    e->len = g.len;
    e->vh = g.vh;
    e->type = type;
    return 1;
}

/* A sorted set's commands on key k (one key in ZEVERY) through zset.c
 * (zset.h), the code t_zset.c's commands call: 1 to 6 of ZADD of 1 to 4
 * members (NX, XX, GT, LT, CH as the command allows them), ZADD INCR,
 * ZREM, ZPOPMIN and ZPOPMAX with a count (0 to 5, or all),
 * ZREMRANGEBYRANK, ZREMRANGEBYSCORE, and ZRANGESTORE of the key onto
 * itself (a few of its members written over it as a new set, packed
 * again: one command in two on a large set). zset-max-listpack-entries
 * is ZPACK_ENTRIES and -value ZPACK_VALUE, so that sets pass to the
 * large form (zbtree.c) by count or by a long member, and back, often.
 * Scores from zscores: equal ones, -inf, inf (an INCR of inf by -inf is
 * NaN, refused). The mirror is the set's packed record (zset_load's,
 * whatever its form: members and scores in order), which the commands'
 * answers (counts, INCR's score, the members popped) are checked against
 * and changed as the commands change the set, then compared with the
 * store's. A key of another type, or a sorted set of put's bytes, is
 * deleted first, as a DEL would; one set in three gets an expiry (1 in 4:
 * loses it) first, as EXPIRE would, which the changes must keep. */
enum { ZNAMES = 40, ZEVERY = 20, ZKEY = 7, ZNAME_MAX = 48, ZREC = 4 + ZNAMES * (12 + ZNAME_MAX),
       ZPACK_ENTRIES = 8, ZPACK_VALUE = 24 };
static const double zscores[] = {-INFINITY, -2, -0.5, 0, 0, 1, 1, 1, 2.5, 3, 1e9, INFINITY};

/* Member j: "m<j>" and 0 to 16 bytes more; one in 10 past ZPACK_VALUE */
static struct kv_slice zname(unsigned j, char *buf)
{
    int n = snprintf(buf, ZNAME_MAX, "m%02u", j);
    unsigned more = j % 10 == 0 ? 30 : j * 7 % 17;
    for (unsigned i = 0; i < more; i++)
        buf[n++] = (char)('a' + (j + i) % 26);
    return (struct kv_slice){buf, (size_t)n};
}

/* The mirror's set: members in order, each copied */
struct zmodel {
    size_t n;
    struct {
        double s;
        size_t len;
        char m[ZNAME_MAX];
    } e[ZNAMES];
};

static int zm_cmp(double s, struct kv_slice m, double s2, const char *m2, size_t n2)
{
    if (s != s2)
        return s < s2 ? -1 : 1;
    int c = memcmp(m.p, m2, m.n < n2 ? m.n : n2);
    return c ? c : m.n < n2 ? -1 : m.n > n2;
}

static ssize_t zm_find(const struct zmodel *z, struct kv_slice m)
{
    for (size_t i = 0; i < z->n; i++)
        if (z->e[i].len == m.n && !memcmp(z->e[i].m, m.p, m.n))
            return (ssize_t)i;
    return -1;
}

static void zm_remove(struct zmodel *z, size_t i, size_t n)
{
    memmove(&z->e[i], &z->e[i + n], (z->n - i - n) * sizeof z->e[0]);
    z->n -= n;
}

static void zm_insert(struct zmodel *z, double s, struct kv_slice m)
{
    size_t i = 0;
    while (i < z->n && zm_cmp(s, m, z->e[i].s, z->e[i].m, z->e[i].len) > 0)
        i++;
    memmove(&z->e[i + 1], &z->e[i], (z->n - i) * sizeof z->e[0]);
    z->e[i].s = s;
    z->e[i].len = m.n;
    memcpy(z->e[i].m, m.p, m.n);
    z->n++;
}

/* The mirror's set as its packed record: its length */
static uint32_t zm_record(const struct zmodel *z, char *rec)
{
    uint32_t n = 4;
    put_le32(rec, (uint32_t)z->n);
    for (size_t i = 0; i < z->n; i++) {
        uint64_t u;
        memcpy(&u, &z->e[i].s, sizeof u);
        for (int b = 0; b < 8; b++)
            rec[n + b] = (char)(u >> (8 * b));
        put_le32(rec + n + 8, (uint32_t)z->e[i].len);
        memcpy(rec + n + 12, z->e[i].m, z->e[i].len);
        n += 12 + (uint32_t)z->e[i].len;
    }
    return n;
}

/* Key's sorted set as zset_load reads it into the mirror's form (z may
 * be NULL), its record's hash and length, its form to *big: zset_load's
 * 1 or 0, or an error (TXN_E_CORRUPT: not a set of the workload's). */
static int zset_digest(kv_txn *x, struct kv_slice key, struct zmodel *m, uint32_t *len,
                       uint64_t *vh, int *big)
{
    struct zset z;
    int rc = zset_load(x, key, &z);
    if (rc >= 0 && (z.n > ZNAMES || (rc && z.rawn > ZREC)))
        rc = TXN_E_CORRUPT;
    for (size_t i = 0; rc > 0 && i < z.n; i++)
        if (z.e[i].m.n > ZNAME_MAX)
            rc = TXN_E_CORRUPT;
    if (rc >= 0) {
        *len = rc ? (uint32_t)z.rawn : 0;
        *vh = rc ? value_hash(z.raw, z.rawn) : 0;
        *big = z.big;
    }
    if (rc >= 0 && m) {
        m->n = z.n;
        for (size_t i = 0; i < z.n; i++) {
            m->e[i].s = z.e[i].s;
            m->e[i].len = z.e[i].m.n;
            memcpy(m->e[i].m, z.e[i].m.p, z.e[i].m.n);
        }
    }
    zset_free(&z);
    return rc;
}

/* A run's sets changed from the packed form to the large one, back, and
 * zset_op's calls (CRASHSIM_KV_ZSTATS=1 prints them) */
static unsigned long zconv[SIM_THREADS][3];

/* Key's form: 0 missing, 1 packed, 2 large, or <0 */
static int zform(kv_txn *x, struct kv_slice key)
{
    zb *b;
    int rc = zb_open(x, key, &b);
    if (rc > 0)
        return (rc = zb_close(b, 0)) < 0 ? rc : 2;
    return rc < 0 ? rc : kv_txn_ttl(x, key, &(uint64_t){0}) > 0;
}

/* One ZADD (INCR: one member), checked against the mirror and applied */
static int zadd_op(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng,
                   struct zmodel *zm)
{
    static const int flags[] = {0, Z_NX, Z_XX, Z_GT, Z_LT, Z_XX | Z_GT, Z_XX | Z_LT, Z_CH,
                                Z_CH | Z_GT, Z_INCR, Z_INCR | Z_XX, Z_INCR | Z_GT};
    int fl = flags[sim_rand(rng) % (sizeof flags / sizeof *flags)];
    size_t n = fl & Z_INCR ? 1 : 1 + (size_t)(sim_rand(rng) % 4);
    char names[4][ZNAME_MAX];
    struct zent e[4];
    for (size_t i = 0; i < n; i++) {
        e[i].m = zname((unsigned)(sim_rand(rng) % ZNAMES), names[i]);
        e[i].s = zscores[sim_rand(rng) % (sizeof zscores / sizeof *zscores)];
    }
    struct zset_added o;
    int rc = zset_add(x, key, (struct zset_max){ZPACK_ENTRIES, ZPACK_VALUE}, fl, e, n, &o);
    if (rc < 0)
        return rc;
    long long added = 0, changed = 0, processed = 0;
    int nan = 0;
    double score = 0;
    for (size_t i = 0; i < n && !nan; i++) {
        ssize_t j = zm_find(zm, e[i].m);
        double s = e[i].s;
        if (j < 0) {
            if (!(fl & Z_XX))
                zm_insert(zm, s, e[i].m), added++, processed++, score = s;
            continue;
        }
        double cur = zm->e[j].s;
        if (fl & Z_NX)
            continue;
        if (fl & Z_INCR)
            s += cur;
        if (s != s) {
            nan = 1;
            break;
        }
        if (((fl & Z_LT) && s >= cur) || ((fl & Z_GT) && s <= cur))
            continue;
        processed++, score = s;
        if (s != cur) {
            zm_remove(zm, (size_t)j, 1);
            zm_insert(zm, s, e[i].m);
            changed++;
        }
    }
    if (o.added != added || o.changed != changed || o.processed != processed || o.nan != nan ||
        (processed && !nan && o.score != score))
        return drift(t, k, "a ZADD's answer");
    return 0;
}

static int zset_op(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng)
{
    const struct zset_max max = {ZPACK_ENTRIES, ZPACK_VALUE};
    struct entry *e = &next[t][k], seen = {0};
    int rc = read_key(x, key, &seen), big = 0, was;
    if (rc < 0)
        return rc;
    if (seen.present != e->present ||
        (e->present && (seen.len != e->len || seen.vh != e->vh || seen.at != e->at)))
        return drift(t, k, "a sorted set's value");
    static struct zmodel zms[SIM_THREADS];
    static char zrec[SIM_THREADS][ZREC];
    struct zmodel *zm = &zms[t];
    uint32_t len;
    uint64_t vh;
    zm->n = 0;
    if (rc && seen.type == KV_ZSET && (rc = zset_digest(x, key, zm, &len, &vh, &big)) < 0 &&
        rc != TXN_E_CORRUPT)
        return rc;
    if (rc && (seen.type != KV_ZSET || rc == TXN_E_CORRUPT)) {
        if ((rc = kv_txn_del(x, key)) != 1) /* another type, or put's bytes */
            return rc < 0 ? rc : drift(t, k, "a delete's answer");
        e->present = 0;
        zm->n = 0;
    }
    uint64_t at = e->present ? e->at : 0;
    if (e->present && sim_rand(rng) % 3 == 0) { /* EXPIRE: the changes below keep it */
        at = sim_rand(rng) % 4 ? FAR_MS + sim_rand(rng) % SPREAD_MS : 0;
        if ((rc = kv_txn_expire(x, key, at)) != 1)
            return rc < 0 ? rc : drift(t, k, "an expire's answer");
    }
    was = e->present ? 1 + big : 0;
    zconv[t][2]++;
    unsigned ops = 1 + (unsigned)(sim_rand(rng) % 6);
    for (unsigned i = 0; i < ops && rc >= 0; i++) {
        unsigned dice = (unsigned)(sim_rand(rng) % 100);
        uint64_t got;
        if (was == 2 && dice % 2 == 0)
            dice = 99; /* a large set: packed again oftener */
        if (dice < 46) {
            rc = zadd_op(t, x, k, key, rng, zm);
        } else if (dice < 58) { /* ZREM */
            char names[3][ZNAME_MAX];
            struct kv_slice m[3];
            size_t n = 1 + (size_t)(sim_rand(rng) % 3), want = 0;
            for (size_t j = 0; j < n; j++)
                m[j] = zname((unsigned)(sim_rand(rng) % ZNAMES), names[j]);
            rc = zset_rem(x, key, max, m, n, &got);
            for (size_t j = 0; j < n; j++) {
                ssize_t at_ = zm_find(zm, m[j]);
                if (at_ >= 0)
                    zm_remove(zm, (size_t)at_, 1), want++;
            }
            if (rc >= 0 && got != want)
                rc = drift(t, k, "a ZREM's answer");
        } else if (dice < 70) { /* ZPOPMIN, ZPOPMAX */
            struct zset_popped p;
            int top = (int)(sim_rand(rng) % 2);
            unsigned c = (unsigned)(sim_rand(rng) % 8);
            long long count = c == 7 ? -1 : (long long)c; /* 6: 0, 7: all */
            count = c == 6 ? 0 : count;
            size_t want = count < 0 || (size_t)count > zm->n ? zm->n : (size_t)count;
            rc = zset_pop(x, key, max, top, count, &p);
            if (rc >= 0 && (rc != (zm->n > 0) || p.n != want))
                rc = drift(t, k, "a pop's answer");
            for (size_t j = 0; rc >= 0 && j < p.n; j++) {
                size_t at_ = top ? zm->n - 1 : 0;
                if (p.e[j].s != zm->e[at_].s || p.e[j].m.n != zm->e[at_].len ||
                    memcmp(p.e[j].m.p, zm->e[at_].m, p.e[j].m.n))
                    rc = drift(t, k, "a popped member");
                zm_remove(zm, at_, 1);
            }
            zset_popped_free(&p);
        } else if (dice < 76) { /* ZREMRANGEBYRANK */
            long long a = (long long)(sim_rand(rng) % 13) - 6;
            long long b = (long long)(sim_rand(rng) % 13) - 6;
            long long n = (long long)zm->n, s = a < 0 ? a + n : a, d = b < 0 ? b + n : b;
            size_t want = 0;
            s = s < 0 ? 0 : s;
            if (s <= d && s < n) {
                d = d >= n ? n - 1 : d;
                want = (size_t)(d - s + 1);
                zm_remove(zm, (size_t)s, want);
            }
            rc = zset_remrange(x, key, max, 1, a, b, NULL, &got);
            if (rc >= 0 && got != want)
                rc = drift(t, k, "a ZREMRANGEBYRANK's answer");
        } else if (dice < 83) { /* ZREMRANGEBYSCORE */
            const size_t ns = sizeof zscores / sizeof *zscores;
            struct zset_range r = {0};
            r.min = zscores[sim_rand(rng) % ns];
            r.max = zscores[sim_rand(rng) % ns];
            r.minex = sim_rand(rng) % 3 == 0;
            r.maxex = sim_rand(rng) % 3 == 0;
            size_t want = 0;
            for (size_t j = 0; j < zm->n;) {
                double s = zm->e[j].s;
                if ((r.minex ? s > r.min : s >= r.min) && (r.maxex ? s < r.max : s <= r.max))
                    zm_remove(zm, j, 1), want++;
                else
                    j++;
            }
            rc = zset_remrange(x, key, max, 0, 0, 0, &r, &got);
            if (rc >= 0 && got != want)
                rc = drift(t, k, "a ZREMRANGEBYSCORE's answer");
        } else { /* ZRANGESTORE key key from (from + 1 to 4 members): a new set */
            struct zset z;
            size_t from = (size_t)(sim_rand(rng) % 4), n = 1 + (size_t)(sim_rand(rng) % 4);
            from = from < zm->n ? from : zm->n;
            n = from + n < zm->n ? n : zm->n - from;
            if ((rc = zset_load(x, key, &z)) >= 0 && z.n != zm->n)
                rc = drift(t, k, "a sorted set's count");
            if (rc >= 0)
                rc = zset_replace(x, key, n ? z.e + from : NULL, n, max);
            zset_free(&z);
            memmove(&zm->e[0], &zm->e[from], n * sizeof zm->e[0]);
            zm->n = n;
            at = 0; /* written as new */
        }
        if (!zm->n)
            at = 0; /* gone: a ZADD makes it again, as new */
        if (rc >= 0 && (rc = zform(x, key)) >= 0) {
            zconv[t][0] += was < 2 && rc == 2;
            zconv[t][1] += was == 2 && rc == 1;
            was = rc;
        }
    }
    if (rc < 0)
        return rc;
    uint64_t want_vh;
    uint32_t want_len = zm_record(zm, zrec[t]);
    want_vh = value_hash(zrec[t], want_len);
    if ((rc = zset_digest(x, key, NULL, &len, &vh, &big)) < 0)
        return rc;
    if (rc != (zm->n > 0) || (rc && (len != want_len || vh != want_vh)))
        return drift(t, k, "a sorted set's members");
    e->present = rc;
    e->type = KV_ZSET;
    e->at = at;
    e->len = want_len;
    e->vh = want_vh;
    if (rc && ((rc = kv_txn_ttl(x, key, &vh)) <= 0 || vh != at))
        return rc < 0 ? rc : drift(t, k, "a sorted set's expiry");
    return 0;
}

/* A hash's command on key k (one key in HEVERY) through hash.c (hash.h),
 * as t_hash.c runs HSET, HSETNX, HINCRBY, HDEL (DEL: the store's), checked
 * against the mirror first; each answer (fields added or removed,
 * HINCRBY's sum or its refusal of letters) checked against the mirror
 * changed as Redis changes the hash. Packed (a record of the fields in
 * the order they came, which the mirror digests byte for byte), a change
 * writes the record again; past HPACK_ENTRIES fields or with a field or
 * value longer than HPACK_VALUE bytes (the workload's hash-max-listpack-*,
 * passed to hash.c) the record becomes an element table (t_dict.h): made,
 * filled and linked, the record freed, in the command's transaction; from
 * then on fields are set and deleted in the table, which stays one below
 * the thresholds (as in Redis: no conversion back), and the key goes with
 * its last field. HFIELDS fields: tables pass the 64 elements where
 * buckets split. A put's bytes of type hash (no record) are deleted first,
 * as a DEL would; other types are left alone. */
static struct kv_slice hfield_of(unsigned i, char *buf)
{
    int n = snprintf(buf, 48, "f%u", i);
    if (i % 31 == 7) /* a long one: past HPACK_VALUE */
        for (; n < 30; n++)
            buf[n] = (char)('a' + (i + (unsigned)n) % 26);
    return (struct kv_slice){buf, (size_t)n};
}

static size_t hvalue_of(const struct hfield *f, char *buf)
{
    if (f->kind == 1)
        return (size_t)snprintf(buf, HVMAX + 1, "%lld", (long long)f->num);
    for (unsigned j = 0; j < f->len; j++) /* letters: HINCRBY refuses them */
        buf[j] = (char)('a' + (f->seed + j * 7) % 26);
    return f->len;
}

/* A table's digest: per field present its number, value length and bytes. */
static uint64_t hdigest(uint64_t d, unsigned i, const char *v, size_t vn)
{
    uint32_t len = (uint32_t)vn;
    d = sim_hash(d, &i, sizeof i);
    d = sim_hash(d, &len, sizeof len);
    return sim_hash(d, v, vn);
}

struct hval {
    char v[HVMAX + 1];
    size_t n;
    int ok;
};

static void hval_copy(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    (void)f, (void)fn;
    struct hval *h = arg;
    h->ok = vn <= HVMAX;
    h->n = vn;
    if (h->ok)
        memcpy(h->v, v, vn);
}

/* A hash's table as the mirror digests it: its count and fields. */
static int hash_table(kv_txn *x, txn_obj *d, uint32_t *n, uint64_t *vh)
{
    uint64_t count, dg = 29;
    int rc = dict_count(kv_txn_tx(x), d, &count);
    for (unsigned i = 0; i < HFIELDS && !rc; i++) {
        char buf[48];
        struct kv_slice f = hfield_of(i, buf);
        struct hval v = {{0}, 0, 1};
        if ((rc = dict_get(kv_txn_tx(x), d, f.p, f.n, hval_copy, &v)) > 0)
            dg = v.ok ? hdigest(dg, i, v.v, v.n) : sim_hash(dg, "long", 4);
        rc = rc < 0 ? rc : 0;
    }
    *n = (uint32_t)count;
    *vh = dg;
    return rc;
}

/* The mirror's value of the key: the record (packed) or the table's
 * digest, as read_key gives them. */
static void hash_entry(const struct hmir *h, struct entry *e, char *rec)
{
    char v[HVMAX + 1], name[48];
    if (h->table) {
        uint64_t dg = 29;
        for (unsigned i = 0; i < HFIELDS; i++)
            if (h->f[i].kind)
                dg = hdigest(dg, i, v, hvalue_of(&h->f[i], v));
        e->len = h->n;
        e->vh = dg;
        return;
    }
    size_t len = 4;
    put_le32(rec, h->n);
    for (unsigned j = 0; j < h->n; j++) {
        unsigned i = h->order[j];
        struct kv_slice f = hfield_of(i, name);
        size_t vn = hvalue_of(&h->f[i], v);
        put_le32(rec + len, (uint32_t)f.n);
        memcpy(rec + len + 4, f.p, f.n);
        len += 4 + f.n;
        put_le32(rec + len, (uint32_t)vn);
        memcpy(rec + len + 4, v, vn);
        len += 4 + vn;
    }
    e->len = (uint32_t)len;
    e->vh = value_hash(rec, len);
}

/* Does the packed hash pass the thresholds (hash.c's too_big)? */
static int hash_too_big(const struct hmir *h)
{
    char v[HVMAX + 1], name[48];
    if (h->n > HPACK_ENTRIES)
        return 1;
    for (unsigned j = 0; j < h->n; j++)
        if (hfield_of(h->order[j], name).n > HPACK_VALUE ||
            hvalue_of(&h->f[h->order[j]], v) > HPACK_VALUE)
            return 1;
    return 0;
}

/* Set field i of the mirror w: 1 added, 0 replaced. */
static int hmir_set(struct hmir *w, unsigned i, const struct hfield *f)
{
    int had = w->f[i].kind != 0;
    if (!had)
        w->order[w->n++] = (uint8_t)i;
    w->f[i] = *f;
    return !had;
}

/* Delete field i of the mirror w: 1 removed, 0 missing. */
static int hmir_del(struct hmir *w, unsigned i)
{
    if (!w->f[i].kind)
        return 0;
    for (unsigned j = 0; j < w->n; j++)
        if (w->order[j] == i) {
            memmove(&w->order[j], &w->order[j + 1], w->n - j - 1u);
            break;
        }
    w->n--;
    w->f[i].kind = 0;
    return 1;
}

static const struct hash_limits hlim = {HPACK_ENTRIES, HPACK_VALUE};

static int hash_op(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng)
{
    struct entry *e = &next[t][k], seen = {0};
    struct hmir *h = &hm[t][1][k / HEVERY], w;
    txn_obj *d = NULL;
    unsigned type;
    int rc = read_key(x, key, &seen), changed = 0;
    if (rc < 0)
        return rc;
    if (seen.present != e->present ||
        (e->present && (seen.len != e->len || seen.vh != e->vh || seen.at != e->at ||
                        seen.type != e->type)))
        return drift(t, k, "a hash's value");
    if (e->present && e->type != KV_HASH)
        return 0;
    if ((rc = kv_txn_dict(x, key, &type, &d)) < 0)
        return rc;
    if (e->present && h->valid && (d != NULL) != h->table)
        return drift(t, k, "a hash's encoding");
    if (e->present && !h->valid) { /* a put's bytes: gone first, as a DEL would */
        if ((rc = kv_txn_del(x, key)) != 1)
            return rc < 0 ? rc : drift(t, k, "a hash's delete");
        e->present = 0;
    }
    if (e->present)
        w = *h;
    else
        memset(&w, 0, sizeof w);
    char names[16][48], vals[4][HVMAX + 1];
    struct kv_slice fv[16];
    uint64_t got = 0, want = 0;
    unsigned dice = (unsigned)(sim_rand(rng) % 100);
    unsigned i = (unsigned)(sim_rand(rng) % HFIELDS);
    if (dice < 40) { /* HSET of 1 to 4 fields */
        unsigned n = 1 + (unsigned)(sim_rand(rng) % 4);
        for (unsigned j = 0; j < n; j++, i = (unsigned)(sim_rand(rng) % HFIELDS)) {
            struct hfield f = {0, (uint32_t)sim_rand(rng), 0, 2};
            unsigned what = (unsigned)(sim_rand(rng) % 10);
            if (what < 5)
                f.kind = 1, f.num = (int64_t)(sim_rand(rng) % 100000);
            else /* letters; one in five longer than HPACK_VALUE */
                f.len = (uint8_t)(what < 9 ? 1 + sim_rand(rng) % HPACK_VALUE
                                           : HPACK_VALUE + 1 + sim_rand(rng) % (HVMAX - HPACK_VALUE));
            fv[2 * j] = hfield_of(i, names[j]);
            fv[2 * j + 1] = (struct kv_slice){vals[j], hvalue_of(&f, vals[j])};
            want += (uint64_t)hmir_set(&w, i, &f);
        }
        rc = hash_set_fields(x, key, &hlim, fv, n, 0, &got);
        changed = 1;
    } else if (dice < 65) { /* HDEL of 1 to 6 fields (a table: to 16) */
        unsigned n = 1 + (unsigned)(sim_rand(rng) % (d ? 16 : 6));
        for (unsigned j = 0; j < n; j++, i = (unsigned)(sim_rand(rng) % HFIELDS)) {
            if (w.n && sim_rand(rng) % 4) /* mostly a field that is there */
                i = w.order[sim_rand(rng) % w.n];
            fv[j] = hfield_of(i, names[j]);
            want += (uint64_t)hmir_del(&w, i);
        }
        rc = hash_del_fields(x, key, &hlim, fv, n, &got);
        changed = want > 0;
    } else if (dice < 80) { /* HINCRBY: letters refuse it (no change) */
        struct hfield f = {w.f[i].kind ? w.f[i].num : 0, 0, 0, 1};
        long long by = (long long)(sim_rand(rng) % 2001) - 1000, now;
        f.num += by;
        rc = hash_incr(x, key, &hlim, hfield_of(i, names[0]), by, &now);
        if (rc >= 0 && (rc == HASH_NOT_INT) != (w.f[i].kind == 2))
            return drift(t, k, "HINCRBY's refusal");
        if (!rc && now != f.num)
            return drift(t, k, "HINCRBY's sum");
        if (!rc)
            hmir_set(&w, i, &f), changed = 1;
        rc = rc < 0 ? rc : 0;
    } else if (dice < 95) { /* HSETNX: the field left alone when there */
        struct hfield f = {(int64_t)(sim_rand(rng) % 1000), 0, 0, 1};
        fv[0] = hfield_of(i, names[0]);
        fv[1] = (struct kv_slice){vals[0], hvalue_of(&f, vals[0])};
        if (!w.f[i].kind)
            want = (uint64_t)hmir_set(&w, i, &f), changed = 1;
        rc = hash_set_fields(x, key, &hlim, fv, 1, 1, &got);
    } else { /* DEL */
        if ((rc = kv_txn_del(x, key)) < 0)
            return rc;
        if (rc != e->present)
            return drift(t, k, "a hash's delete");
        e->present = 0;
        h->valid = 0;
        return 0;
    }
    if (rc >= 0 && got != want)
        return drift(t, k, "a field's answer");
    if (rc < 0 || !changed)
        return rc < 0 ? rc : 0;
    if (!w.n) { /* the key went with its last field */
        e->present = 0;
        h->valid = 0;
        return 0;
    }
    if (!w.table && hash_too_big(&w)) /* hash.c converted it */
        w.table = 1;
    static char rec[SIM_THREADS][4 + HFIELDS * (8 + 30 + HVMAX)];
    w.valid = 1;
    *h = w;
    if (!e->present)
        e->at = 0;
    e->present = 1;
    e->type = KV_HASH;
    hash_entry(h, e, rec[t]);
    return 0;
}

/* One command on key k; 0 or an error (TXN_E_CORRUPT: the store's answer
 * is not the mirror's). */
static int command(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng)
{
    struct entry *e = &next[t][k];
    unsigned dice = (unsigned)(sim_rand(rng) % 100);
    int rc;
    if (dice >= 5 && dice < 85 && k >= nlong && k % HEVERY == HKEY)
        return hash_op(t, x, k, key, rng); /* a hash's key: 80 in 100 */
    if (dice >= 5 && dice < 85 && k >= nlong && k % LEVERY == LKEY)
        return list_op(t, x, k, key, rng); /* a list's key: 80 in 100 */
    if (dice >= 5 && dice < 85 && k >= nlong && k % ZEVERY == ZKEY)
        return zset_op(t, x, k, key, rng); /* a sorted set's key: 80 in 100 */
    if (dice >= 5 && dice < 85 && k >= nlong && k % SEVERY == SKEY)
        return dict_op(t, x, k, key, rng); /* a set's key: 80 in 100 */
    if (dice < 50) /* 35 small values, 15 large */
        return put(t, x, k, key, rng, dice >= 35);
    if (dice < 65) {
        if ((rc = kv_txn_del(x, key)) < 0)
            return rc;
        if (rc != e->present)
            return drift(t, k, "a delete's answer");
        e->present = 0;
        return 0;
    }
    if (dice < 72) {
        uint64_t at = pick_at(rng, 0);
        if ((rc = kv_txn_expire(x, key, at)) < 0)
            return rc;
        if (rc != e->present)
            return drift(t, k, "an expire's answer");
        e->at = e->present ? at : 0;
        return 0;
    }
    if (dice < 85 && k >= nlong)
        return list_op(t, x, k, key, rng);
    if (dice < 88 && k >= nlong) /* 3 in 100: the campaigns' time (CI) */
        return dict_op(t, x, k, key, rng);
    struct entry seen = {0};
    if ((rc = read_key(x, key, &seen)) < 0)
        return rc;
    if (seen.present != e->present ||
        (e->present && (seen.len != e->len || seen.vh != e->vh || seen.at != e->at)))
        return drift(t, k, "what a read sees");
    return 0;
}

/* One kv_txn over keys ks[0..n); a committed one becomes the mirror. */
static int run_txn(int t, const unsigned *ks, size_t n, uint64_t *rng, int may_roll_back,
                   int (*cmd)(int, kv_txn *, unsigned, struct kv_slice, uint64_t *))
{
    char names[BATCH][KEY_MAX];
    struct kv_slice keys[BATCH];
    kv_txn *x;
    for (size_t i = 0; i < n; i++)
        keys[i] = key_of(ks[i], names[i]);
    memcpy(next[t], cur[t], nkeys * sizeof *cur[t]);
    memcpy(dmask[t][1], dmask[t][0], nkeys * sizeof dmask[t][0][0]);
    for (size_t i = 0; i < n; i++)
        hm[t][1][ks[i] / HEVERY] = hm[t][0][ks[i] / HEVERY];
    next_digest[t] = digest_of(cur[t]); /* nothing changes before the end */
    for (size_t i = 0; i < n; i++)
        if (ks[i] < nlong && cur[t][ks[i]].present)
            memcpy(lval[t][1][ks[i]], lval[t][0][ks[i]], cur[t][ks[i]].len);
    int rc = kv_txn_begin(store[t], n, keys, 1, &x);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++)
        rc = cmd(t, x, ks[i], keys[i], rng);
    if (rc) /* an error ends the run: the transaction goes */
        return kv_txn_end(x, rc);
    if (may_roll_back && sim_rand(rng) % 8 == 0) {
        kv_txn_end(x, ROLLBACK);
        return 0;
    }
    next_digest[t] = digest_of(next[t]);
    if ((rc = kv_txn_end(x, 0)))
        return rc;
    memcpy(cur[t], next[t], nkeys * sizeof *cur[t]);
    memcpy(dmask[t][0], dmask[t][1], nkeys * sizeof dmask[t][0][0]);
    for (size_t i = 0; i < n; i++)
        hm[t][0][ks[i] / HEVERY] = hm[t][1][ks[i] / HEVERY];
    for (size_t i = 0; i < n; i++)
        if (ks[i] < nlong && cur[t][ks[i]].present)
            memcpy(lval[t][0][ks[i]], lval[t][1][ks[i]], cur[t][ks[i]].len);
    return 0;
}

static int preload_put(int t, kv_txn *x, unsigned k, struct kv_slice key, uint64_t *rng)
{
    if (k < nlong && !next[t][k].present)
        return splice_long(t, x, k, key, rng,
                           LONG_START + (size_t)(sim_rand(rng) % (SBUF - LONG_START)));
    return put(t, x, k, key, rng, nkeys == KEYS && sim_rand(rng) % 8 == 0);
}

/* ---- eviction: kv_evict below the store's bytes (evict_step) */

/* one step in EVICT_EVERY; kv_evict calls a step, each EVICT_BYTES below
 * the bytes (a few of the 200 keys, a few dozen of the resize's small ones) */
enum { EVICT_EVERY = 12, EVICT_CHUNKS = 3, EVICT_BYTES = 2048 };
static int evict_stray[SIM_THREADS]; /* the hook heard of a key the mirror did not hold */

/* kv_opts.evicted: key p[0..n) goes in the eviction's transaction, whose
 * commit is next: the mirror (committed) takes it at once, so that this
 * commit announces it and every later one (a no-op eviction's, a lazy
 * free's) the mirror without it. */
static void evicted_hook(const char *p, size_t n, void *arg)
{
    int t = (int)(intptr_t)arg, k = key_index(p, n);
    if (k < 0 || !cur[t][k].present) {
        evict_stray[t] = 1;
        return;
    }
    cur[t][k].present = 0;
    next_digest[t] = digest_of(cur[t]);
}

/* A memory limit below the store's bytes and kv_evict down to it, in
 * EVICT_CHUNKS calls with a switch point between (kv-shared: the other
 * threads' transactions run there, on the keys it evicts), in one of
 * the orders: Redis's allkeys-lru (CLOCK, with the slices' marks as the
 * run's lookups left them), volatile-ttl, allkeys-random. Not
 * volatile-lru: its sample ranks by the store's clock in seconds, so a
 * run crossing a second would not replay from its seed. */
static int evict_step(int t, uint64_t *rng)
{
    static const unsigned how[] = {KV_EVICT_LRU, KV_EVICT_TTL | KV_EVICT_VOLATILE,
                                   KV_EVICT_RANDOM};
    unsigned h = how[sim_rand(rng) % (sizeof how / sizeof how[0])];
    for (int c = 0; c < EVICT_CHUNKS; c++) {
        struct kv_info ki;
        uint64_t n;
        kv_info(store[t], &ki);
        next_digest[t] = digest_of(cur[t]); /* a commit that evicts nothing */
        int rc = kv_evict(store[t], ki.bytes > EVICT_BYTES ? ki.bytes - EVICT_BYTES : 0, h, &n);
        if (rc)
            return rc;
        if (evict_stray[t]) {
            fprintf(stderr, "crashsim: kv: an eviction took a key the mirror lacks\n");
            return TXN_E_CORRUPT;
        }
        sim_point();
    }
    return 0;
}

/* FLUSHALL ASYNC: the mirror empties when its transaction commits. */
static int flush_step(int t)
{
    static struct entry none[RESIZE_KEYS];
    next_digest[t] = digest_of(none);
    int rc = kv_flush_async(store[t]);
    if (rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL) {
        next_digest[t] = digest_of(cur[t]);
        return 0; /* nothing changed */
    }
    if (rc)
        return rc;
    memset(cur[t], 0, sizeof cur[t]);
    memset(dmask[t][0], 0, sizeof dmask[t][0]);
    memset(hm[t][0], 0, sizeof hm[t][0]);
    return 0;
}

static int kv_step(txn_pool *p, int t, uint64_t *rng)
{
    (void)p;
    unsigned ks[MAX_OPS];
    if (grow[t]) { /* one key more than the table's buckets */
        grow[t] = 0;
        ks[0] = TABLE;
        return run_txn(t, ks, 1, rng, 0, preload_put);
    }
    if (reserve[t]) { /* its transactions change no key */
        reserve[t] = 0;
        next_digest[t] = digest_of(cur[t]);
        kv_reserve(store[t], RESERVE);
        return 0;
    }
    if (sim_rand(rng) % EVICT_EVERY == 0 && !no_evict) /* keys go, the hook tells the mirror */
        return evict_step(t, rng);
    struct kv_info ki;
    kv_info(store[t], &ki);
    if (ki.lazy_pending && sim_rand(rng) % 4 == 0) { /* changes no key */
        uint64_t freed;
        next_digest[t] = digest_of(cur[t]);
        int rc = kv_lazy_free(store[t], LAZY_BUDGET, &freed);
        return rc < 0 ? rc : 0;
    }
    if (sim_rand(rng) % FLUSH_EVERY == 0)
        return flush_step(t);
    size_t n = 1 + (size_t)(sim_rand(rng) % MAX_OPS);
    for (size_t i = 0; i < n; i++)
        ks[i] = (unsigned)(sim_rand(rng) % nkeys);
    if (nlong && sim_rand(rng) % 2)
        ks[0] = (unsigned)(sim_rand(rng) % nlong);
    return run_txn(t, ks, n, rng, 1, command);
}

/* ---- setup and the run's end */

static int commit_hook(txn *tx, void *arg)
{
    int t = (int)(intptr_t)arg;
    return sim_commit(tx, t, next_digest[t]);
}

static int kv_setup(txn_pool *p, int t)
{
    if (store[t]) { /* the previous run's, when it ended in an error */
        kv_close(store[t]);
        store[t] = NULL;
    }
    int mode = resize_mode();
    grow[t] = mode != 0;
    reserve[t] = mode == 2;
    memset(cur[t], 0, sizeof cur[t]);
    memset(hm[t], 0, sizeof hm[t]);
    evict_stray[t] = 0;
    next_digest[t] = digest_of(cur[t]);
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    txn_obj *part = sim_part(tx, p, t);
    txn_abort(tx);
    struct kv_opts o = {.commit = commit_hook, .commit_arg = (void *)(intptr_t)t,
                        .evicted = evicted_hook};
    if ((rc = kv_adopt(p, part, &o, &store[t]))) {
        fprintf(stderr, "crashsim: kv: %s\n", kv_strerror(rc));
        return rc;
    }
    uint64_t rng = 91 + (uint64_t)t;
    unsigned ks[BATCH], preload = grow[t] ? TABLE : PRELOAD, n;
    for (unsigned k = 0; k < preload && !rc; k += n) {
        n = preload - k < BATCH ? preload - k : BATCH;
        for (unsigned i = 0; i < n; i++) /* every other key; in resize mode
                                            the first TABLE */
            ks[i] = grow[t] ? k + i : 2 * (k + i);
        rc = run_txn(t, ks, n, &rng, 0, preload_put);
    }
    return rc;
}

/* The run's end: the driver closes the pool next. */
static int kv_finish(int t)
{
    if (getenv("CRASHSIM_KV_ZSTATS")) /* zset_op's, for the figures of docs/kvstore.md */
        fprintf(stderr, "kv: thread %d: %lu sorted set commands, %lu to the large form, %lu "
                        "packed again\n", t, zconv[t][2], zconv[t][0], zconv[t][1]);
    memset(zconv[t], 0, sizeof zconv[t]);
    kv_close(store[t]);
    store[t] = NULL;
    return 0;
}

/* ---- reading back a recovered pool */

/* kv_check passes; what it says goes to stderr only when it fails. */
static int check(kv_store *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return 1;
    int rc = kv_check(s, f);
    fclose(f);
    for (char *line = text, *end; rc && line && *line; line = end ? end + 1 : NULL) {
        end = strchr(line, '\n');
        fprintf(stderr, "  kv: %.*s\n", end ? (int)(end - line) : (int)strlen(line), line);
    }
    free(text);
    return rc != 0;
}

struct listing {
    unsigned char seen[RESIZE_KEYS];
    int bad;
};

static void list_key(void *arg, const char *k, size_t n, unsigned type)
{
    (void)type;
    struct listing *l = arg;
    int i = key_index(k, n);
    if (i < 0 || l->seen[i]) {
        if (l->bad++ < 3)
            fprintf(stderr, "  kv: scan: %s key %.*s\n", i < 0 ? "unknown" : "repeated",
                    (int)n, k);
        return;
    }
    l->seen[i] = 1;
}

/* The digest of every key a scan finds, each read in its own kv_txn. */
static int read_all(kv_store *s, uint64_t *digest)
{
    static struct listing l;
    static struct entry e[RESIZE_KEYS]; /* too large for the stack */
    uint64_t c = 0;
    int rc;
    memset(&l, 0, sizeof l);
    memset(e, 0, sizeof e);
    do
        rc = kv_scan(s, c, 1024, list_key, &l, &c);
    while (!rc && c);
    for (unsigned k = 0; k < nkeys && !rc; k++) {
        char name[KEY_MAX];
        struct kv_slice key = key_of(k, name);
        kv_txn *x;
        if (!l.seen[k] || (rc = kv_txn_begin(s, 1, &key, 0, &x)))
            continue;
        if ((rc = read_key(x, key, &e[k])) == 0)
            fprintf(stderr, "  kv: key %u: listed, but missing\n", k);
        rc = kv_txn_end(x, rc > 0 ? 0 : rc ? rc : TXN_E_CORRUPT);
    }
    if (rc)
        fprintf(stderr, "  kv: reading the keys: %s\n", txn_strerror(rc));
    *digest = digest_of(e);
    return rc || l.bad;
}

static int reach_cb(txn_obj *o, void *arg)
{
    return reach_add(arg, o);
}

static int kv_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    txn *tx;
    kv_store *s;
    struct kv_opts o = {0};
    int rc = txn_begin(p, &tx);
    if (rc)
        return 1;
    resize_mode();
    txn_obj *part = sim_part(tx, p, t);
    txn_abort(tx);
    if ((rc = kv_adopt(p, part, &o, &s))) {
        fprintf(stderr, "  kv: open: %s\n", kv_strerror(rc));
        return 1;
    }
    int bad = check(s);
    if (!bad)
        bad = read_all(s, digest);
    /* the lazy frees the crash interrupted, resumed to their end */
    uint64_t freed, again = 0;
    while (!bad && (rc = kv_lazy_free(s, LAZY_BUDGET, &freed)) > 0)
        ;
    if (!bad && rc < 0) {
        fprintf(stderr, "  kv: lazy free after recovery: %s\n", txn_strerror(rc));
        bad = 1;
    }
    if (!bad && !(bad = check(s)) && !(bad = read_all(s, &again)) && again != *digest) {
        fprintf(stderr, "  kv: the lazy frees changed the keys\n");
        bad = 1;
    }
    /* the objects even of a broken store: the allocator's verdict too */
    if ((rc = kv_objects(s, reach_cb, r))) {
        fprintf(stderr, "  kv: objects: %s\n", kv_strerror(rc));
        bad = 1;
    }
    kv_close(s);
    return bad;
}

const struct workload wl_kv = {"kv", 6u << 20, KV_ROOT_SIZE, kv_setup, kv_step, kv_mirror,
                               kv_read, WL_BY_NAME, kv_finish};

/* ---- kv-shared: every thread's kv_txns on one store (thread 0's), under
 * the baton scheduler (WL_SHARED). A kv_txn holds the store's stripe
 * locks from kv_txn_begin to kv_txn_end, and there is no switch point in
 * between: the threads' transactions interleave between them, each in its
 * own context, on one key space, one mirror and one commit order. */

static int kvs_done; /* threads that ran their last step: by the baton holder */

static int kvs_setup(txn_pool *p, int t)
{
    kvs_done = 0;
    return kv_setup(p, t);
}

static int kvs_step(txn_pool *p, int t, uint64_t *rng)
{
    (void)t;
    sim_point(); /* before the kv_txn */
    int rc = kv_step(p, 0, rng);
    sim_point(); /* after its end */
    return rc;
}

/* The store is closed by the last thread to end. */
static int kvs_finish(int t)
{
    (void)t;
    return ++kvs_done == sim_threads() ? kv_finish(0) : 0;
}

const struct workload wl_kv_shared = {"kv-shared", 4u << 20, KV_ROOT_SIZE, kvs_setup,
                                      kvs_step, kv_mirror, kv_read,
                                      WL_BY_NAME | WL_SHARED, kvs_finish};

/* ---- kv-reserve: kv with the resize under way and an MSET's kv_reserve
 * (resize_mode 2), in a pool with room for the table of 2^16 buckets and
 * the one it drains beside the keys */

static int kvr_setup(txn_pool *p, int t)
{
    reserve_run = 1;
    return kv_setup(p, t);
}

static int kvr_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    reserve_run = 1;
    return kv_read(p, t, digest, r);
}

const struct workload wl_kv_reserve = {"kv-reserve", 12u << 20, KV_ROOT_SIZE, kvr_setup,
                                       kv_step, kv_mirror, kvr_read, WL_BY_NAME, kv_finish};
