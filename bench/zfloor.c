/* zfloor.c - what a ZADD and an HSET cost at each layer, in one process,
 * no network (issue #44's speed target for collections; docs/kvstore.md,
 * section 41).
 *
 *   zfloor-<engine> [--sizes 1000,100000] [--ops N] [--rounds R]
 *                   [--hfields F] [--lines LIST] [--seed X] [--check]
 *
 * Lines (LIST, comma separated; default all), each the same ZADDs of a
 * random member of S (every member there, named "element:%012u" as
 * redis-benchmark's -r S) with a new random score in [0, S):
 *   dram  a skip list with spans and a hash of members, Redis's shape,
 *         written here (zfloor_sl.h), in malloc'd memory
 *   pool  the same code on objects of a pool, one transaction a ZADD:
 *         every word read by txn_read_u64, every word changed by
 *         txn_write_u64, on the engine linked
 *   arena the same in one pool object, a node an offset in it: every
 *         access finds the object txn.h's inline path holds (the pool
 *         line's per-object lookups removed)
 *   tx0   a transaction that writes one word: the engine's fixed cost
 *   kv0   a kv_txn over one key that does nothing: the store's fixed cost
 *   zb    the store's large sorted set (zbtree.c) in a kv_txn, as
 *         t_zset.c's ZADD runs it: zb_open, zb_score, zb_rescore, zb_close
 *   cmd   the command itself: command_run("ZADD myzset score member"),
 *         the dispatcher, its kv_txn, t_zset.c, the reply (not sent)
 *   ping  command_run("PING"): the dispatcher and a reply alone
 * and for a hash of F fields (default 10) in the packed form, HSET of a
 * random field to a value of 1 to 3 digits:
 *   hdram an array of (field, value) searched in turn, in DRAM
 *   hpool the same array in one pool object, read whole by txn_read, the
 *         value written by txn_write, one transaction an HSET
 *   hcmd  command_run("HSET myhash field value")
 * Each line runs N operations (default 200,000) per size, the lines in
 * turn, R rounds (default 3); a line prints the median of its rounds in
 * ns of the thread's CPU time per operation. --check: after the runs,
 * the skip list in DRAM, the ones in the pool and the arena, the store's
 * two sorted sets (zb and cmd lines) and the three hashes must hold the
 * same members in the same order, the skip lists' spans, back links and
 * hashes must agree and zbtree.c's own check must pass; exit 1
 * otherwise. */
#define _GNU_SOURCE
#include <assert.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "conn.h"
#include "store.h"
#include "txn.h"
#include "zbtree.h"

enum { ML = 20, MLEN = 24, SL_MAX = 32, MAX_SIZES = 8, MAX_ROUNDS = 15, HMAX = 64 };

struct zpair {
    double s;
    char m[MLEN];
};

static uint64_t rnd(uint64_t *s) /* xorshift64* */
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* redis-benchmark's member for -r: "element:" and 12 digits, zero padded
 * to MLEN bytes */
static void member(uint64_t j, char *m)
{
    memset(m, 0, MLEN);
    memcpy(m, "element:", 8);
    for (int i = ML - 1; i >= 8; i--, j /= 10)
        m[i] = (char)('0' + j % 10);
}

static uint64_t mhash(const char *m)
{
    uint64_t w[3];
    memcpy(w, m, sizeof w);
    uint64_t h = (w[0] ^ (w[1] << 21 | w[1] >> 43) ^ (w[2] << 42 | w[2] >> 22)) *
                 0x9e3779b97f4a7c15ull;
    return h ^ h >> 29;
}

/* A level for a new node: Redis's, p = 1/4 */
static unsigned level_of(uint64_t *r)
{
    unsigned lv = 1;
    while (lv < SL_MAX && (rnd(r) & 3) == 0)
        lv++;
    return lv;
}

static uint64_t thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the skip list over DRAM */

typedef struct {
    int unused;
} dctx;

static uint64_t dnew(unsigned lv)
{
    return (uint64_t)(uintptr_t)calloc(1, 48 + 16 * (size_t)lv);
}

#define DRD(h, off) (*(uint64_t *)((char *)(uintptr_t)(h) + (off)))
#define DWR(h, off, v) (*(uint64_t *)((char *)(uintptr_t)(h) + (off)) = (v))
#define SL(n) d_##n
#define SLCTX dctx
#define RD(c, h, off) ((void)(c), DRD(h, off))
#define WR(c, h, off, v) ((void)(c), DWR(h, off, v))
#define MEM(c, h, buf) ((void)(c), (void)(buf), (const char *)(uintptr_t)(h) + N_MEMBER)
#define NEWNODE(c, lv) ((void)(c), dnew(lv))
#include "zfloor_sl.h"

/* ---- the same over a pool, through txn.h */

typedef struct {
    txn *tx;
    txn_obj *a; /* the arena line's object */
    int rc;     /* the first error of the transaction */
} pctx;

static inline void pfail(pctx *c, int rc)
{
    if (rc && !c->rc)
        c->rc = rc;
}

static inline uint64_t prd(pctx *c, uint64_t h, size_t off)
{
    uint64_t v = 0;
    pfail(c, txn_read_u64(c->tx, (txn_obj *)(uintptr_t)h, off, &v));
    return v;
}

static inline void pwr(pctx *c, uint64_t h, size_t off, uint64_t v)
{
    pfail(c, txn_write_u64(c->tx, (txn_obj *)(uintptr_t)h, off, v));
}

static inline const char *pmem(pctx *c, uint64_t h, char *buf)
{
    pfail(c, txn_read(c->tx, (txn_obj *)(uintptr_t)h, N_MEMBER, buf, MLEN));
    return buf;
}

static uint64_t pnew(pctx *c, size_t n)
{
    txn_obj *o = NULL;
    int rc = txn_alloc(c->tx, n, &o);
    pfail(c, rc);
    return rc ? 0 : (uint64_t)(uintptr_t)o;
}

#define SL(n) p_##n
#define SLCTX pctx
#define RD(c, h, off) prd(c, h, off)
#define WR(c, h, off, v) pwr(c, h, off, v)
#define MEM(c, h, buf) pmem(c, h, buf)
#define NEWNODE(c, lv) pnew(c, N_FWD(lv))
#include "zfloor_sl.h"

/* ---- the same over one pool object (an arena): a handle is an offset in
 * it, so that every read finds the object txn.h's inline path has at
 * hand and no access looks an object up; nodes are taken from its end
 * (word A_TOP) and never freed */

enum { A_TOP = 8, A_FIRST = 64 };

static inline uint64_t ard(pctx *c, uint64_t h, size_t off)
{
    uint64_t v = 0;
    pfail(c, txn_read_u64(c->tx, c->a, (size_t)h + off, &v));
    return v;
}

static inline void awr(pctx *c, uint64_t h, size_t off, uint64_t v)
{
    pfail(c, txn_write_u64(c->tx, c->a, (size_t)h + off, v));
}

static inline const char *amem(pctx *c, uint64_t h, char *buf)
{
    pfail(c, txn_read(c->tx, c->a, (size_t)h + N_MEMBER, buf, MLEN));
    return buf;
}

/* n bytes at the arena's top (zero: never used before) */
static uint64_t anew(pctx *c, size_t n)
{
    uint64_t top = ard(c, 0, A_TOP), end = top + ((n + 7) & ~(size_t)7);
    if (c->rc || end > txn_obj_size(txn_pool_of(c->tx), c->a)) {
        pfail(c, TXN_E_NOSPACE);
        return 0;
    }
    awr(c, 0, A_TOP, end);
    return top;
}

#define SL(n) a_##n
#define SLCTX pctx
#define RD(c, h, off) ard(c, h, off)
#define WR(c, h, off, v) awr(c, h, off, v)
#define MEM(c, h, buf) amem(c, h, buf)
#define NEWNODE(c, lv) anew(c, N_FWD(lv))
#include "zfloor_sl.h"

/* ---- the program's state */

static struct {
    uint64_t seed, ops;
    size_t sizes[MAX_SIZES], nsizes;
    unsigned rounds, hfields;
    int check;
    char lines[256];
} opt = {.seed = 42, .ops = 200000, .sizes = {1000, 100000}, .nsizes = 2, .rounds = 3,
         .hfields = 10, .lines = "dram,pool,arena,tx0,kv0,zb,cmd,ping,hdram,hpool,hcmd"};

static txn_pool *pool;   /* the pool line's */
static char pool_name[64], kv_name[64];
static struct conn conn; /* the command lines' client, its replies dropped */

static int want(const char *line)
{
    size_t n = strlen(line);
    for (const char *p = opt.lines; (p = strstr(p, line)); p += n)
        if ((p == opt.lines || p[-1] == ',') && (p[n] == ',' || !p[n]))
            return 1;
    return 0;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "zfloor: %s: %s\n", what, rc ? txn_strerror(rc) : "failed");
    exit(1);
}

/* The i-th operation's member and score of a run of size S, the same for
 * every line */
struct op {
    char m[MLEN];
    double s;
};

static struct op *make_ops(size_t S, uint64_t seed)
{
    struct op *o = malloc(opt.ops * sizeof *o);
    if (!o)
        die("malloc", 0);
    for (uint64_t i = 0; i < opt.ops; i++) {
        member(rnd(&seed) % S, o[i].m);
        o[i].s = (double)(rnd(&seed) % S);
    }
    return o;
}

/* Every member's first score, and the levels of the nodes, the same for
 * every line */
static double first_score(uint64_t j, uint64_t seed)
{
    uint64_t r = seed ^ (j + 1) * 0x9e3779b97f4a7c15ull;
    return (double)(rnd(&r) % 1000003);
}

/* ---- the skip list lines */

static uint64_t table_cap(size_t S);

static uint64_t d_make(size_t S)
{
    uint64_t cap = table_cap(S);
    uint64_t l = (uint64_t)(uintptr_t)calloc(1, L_SIZE), head = dnew(SL_MAX);
    uint64_t t = (uint64_t)(uintptr_t)calloc(cap, 8);
    if (!l || !head || !t)
        die("calloc", 0);
    dctx c;
    DWR(l, L_HEAD, head), DWR(l, L_LEVEL, 1), DWR(l, L_TABLE, t), DWR(l, L_MASK, cap - 1);
    uint64_t r = opt.seed;
    char m[MLEN];
    for (uint64_t j = 0; j < S; j++) {
        member(j, m);
        if (d_zadd(&c, l, first_score(j, opt.seed), m, level_of(&r)) != 1)
            die("a skip list's fill", 0);
    }
    return l;
}

static void d_free(uint64_t l)
{
    uint64_t x = DRD(DRD(l, L_HEAD), N_FWD(0));
    while (x) {
        uint64_t next = DRD(x, N_FWD(0));
        free((void *)(uintptr_t)x);
        x = next;
    }
    free((void *)(uintptr_t)DRD(l, L_HEAD));
    free((void *)(uintptr_t)DRD(l, L_TABLE));
    free((void *)(uintptr_t)l);
}

static uint64_t run_dram(uint64_t l, const struct op *o)
{
    dctx c;
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++)
        d_zadd(&c, l, o[i].s, o[i].m, 1);
    return thread_ns() - t0;
}

static txn_obj *arena; /* the arena line's object */

static void p_begin(pctx *c)
{
    int rc = txn_begin(pool, &c->tx);
    if (rc)
        die("txn_begin", rc);
    c->a = arena;
    c->rc = 0;
}

static void p_end(pctx *c, const char *what)
{
    if (c->rc) {
        txn_abort(c->tx);
        die(what, c->rc);
    }
    int rc = txn_commit(c->tx);
    if (rc)
        die(what, rc);
}

typedef int zadd_fn(pctx *c, uint64_t l, double s, const char *m, unsigned lv);

/* Fill list l of the pool or the arena with members 0..S-1 at their first
 * scores, in transactions of 64 */
static void fill(uint64_t l, size_t S, zadd_fn *zadd)
{
    pctx c;
    uint64_t r = opt.seed;
    char m[MLEN];
    for (uint64_t j = 0; j < S; j += 64) {
        p_begin(&c);
        for (uint64_t k = j; k < S && k < j + 64; k++) {
            member(k, m);
            if (zadd(&c, l, first_score(k, opt.seed), m, level_of(&r)) != 1)
                pfail(&c, TXN_E_NOSPACE);
        }
        p_end(&c, "a list's fill");
    }
}

/* Buckets of a hash of S members: a power of two, at least 2 S */
static uint64_t table_cap(size_t S)
{
    uint64_t cap = 1;
    while (cap < 2 * S)
        cap *= 2;
    return cap;
}

typedef uint64_t new_fn(pctx *c, size_t n);
typedef void wr_fn(pctx *c, uint64_t h, size_t off, uint64_t v);

/* A list of S members in the pool (pnew, pwr, p_zadd) or the arena */
static uint64_t make_list(size_t S, new_fn *nw, wr_fn *w, zadd_fn *zadd)
{
    uint64_t cap = table_cap(S);
    pctx c;
    p_begin(&c);
    uint64_t l = nw(&c, L_SIZE), head = nw(&c, N_FWD(SL_MAX)), t = nw(&c, 8 * cap);
    w(&c, l, L_HEAD, head), w(&c, l, L_LEVEL, 1), w(&c, l, L_TABLE, t);
    w(&c, l, L_MASK, cap - 1);
    p_end(&c, "a list's head");
    fill(l, S, zadd);
    return l;
}

/* Free the pool list's objects, a transaction per 256 */
static void p_drop(uint64_t l)
{
    pctx c;
    p_begin(&c);
    uint64_t x = prd(&c, prd(&c, l, L_HEAD), N_FWD(0));
    for (unsigned k = 0; x; k++) {
        uint64_t next = prd(&c, x, N_FWD(0));
        pfail(&c, txn_free(c.tx, (txn_obj *)(uintptr_t)x));
        x = next;
        if (k % 256 == 255) {
            p_end(&c, "the pool's free");
            p_begin(&c);
        }
    }
    pfail(&c, txn_free(c.tx, (txn_obj *)(uintptr_t)prd(&c, l, L_HEAD)));
    pfail(&c, txn_free(c.tx, (txn_obj *)(uintptr_t)prd(&c, l, L_TABLE)));
    pfail(&c, txn_free(c.tx, (txn_obj *)(uintptr_t)l));
    p_end(&c, "the pool's free");
}

/* The ZADDs on the pool's list or the arena's, a transaction each */
static uint64_t run_tx(uint64_t l, const struct op *o, zadd_fn *zadd)
{
    pctx c;
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++) {
        p_begin(&c);
        zadd(&c, l, o[i].s, o[i].m, 1);
        p_end(&c, "a ZADD in the pool");
    }
    return thread_ns() - t0;
}

/* The engine's fixed cost: one word written, the list's length again */
static uint64_t run_tx0(uint64_t l)
{
    pctx c;
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++) {
        p_begin(&c);
        pwr(&c, l, L_LEN, prd(&c, l, L_LEN));
        p_end(&c, "a one-word transaction");
    }
    return thread_ns() - t0;
}

/* The list in an arena: room for S nodes of up to 5 levels on average */
static uint64_t a_make(size_t S)
{
    size_t bytes = A_FIRST + L_SIZE + N_FWD(SL_MAX) + 8 * table_cap(S) + S * N_FWD(5);
    pctx c;
    p_begin(&c);
    arena = (txn_obj *)(uintptr_t)pnew(&c, bytes);
    pwr(&c, (uint64_t)(uintptr_t)arena, A_TOP, A_FIRST);
    p_end(&c, "the arena");
    return make_list(S, anew, awr, a_zadd);
}

/* ---- the store's lines */

static struct kv_slice slice(const char *p)
{
    return (struct kv_slice){p, strlen(p)};
}

static int cmp_ent(const void *a, const void *b)
{
    const struct zent *x = a, *y = b;
    if (x->s != y->s)
        return x->s < y->s ? -1 : 1;
    return memcmp(x->m.p, y->m.p, ML);
}

/* Fill key with members 0..S-1 at their first scores: the first 128 in
 * one zb_write (the large form, as t_zset.c converts a set), then
 * zb_insert in transactions of 256, as ZADDs of new members */
static void zb_fill(struct kv_slice key, size_t S)
{
    size_t first = S < 128 ? S : 128;
    struct zent *e = calloc(S, sizeof *e);
    char *names = malloc(S * MLEN);
    if (!e || !names)
        die("malloc", 0);
    for (size_t j = 0; j < S; j++) {
        member(j, names + j * MLEN);
        e[j] = (struct zent){first_score(j, opt.seed), {names + j * MLEN, ML}};
    }
    qsort(e, first, sizeof *e, cmp_ent);
    kv_txn *t;
    int rc = kv_txn_begin(srv.kv, 1, &key, 1, &t);
    if (!rc)
        rc = kv_txn_end(t, zb_write(t, key, e, first, 0));
    for (size_t j = first; !rc && j < S; j += 256) {
        zb *z = NULL;
        if ((rc = kv_txn_begin(srv.kv, 1, &key, 1, &t)))
            break;
        rc = zb_open(t, key, &z);
        rc = rc == 1 ? 0 : rc < 0 ? rc : TXN_E_CORRUPT;
        for (size_t k = j; !rc && k < S && k < j + 256; k++)
            rc = zb_insert(z, e[k].s, e[k].m);
        if (z)
            rc = zb_close(z, rc);
        rc = kv_txn_end(t, rc);
    }
    if (rc)
        die("a sorted set's fill", rc);
    free(e);
    free(names);
}

static uint64_t run_zb(struct kv_slice key, const struct op *o)
{
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++) {
        kv_txn *t;
        zb *z = NULL;
        double cur;
        struct kv_slice m = {o[i].m, ML};
        int rc = kv_txn_begin(srv.kv, 1, &key, 1, &t);
        if (rc)
            die("kv_txn_begin", rc);
        if ((rc = zb_open(t, key, &z)) == 1 && (rc = zb_score(z, m, &cur)) == 1)
            rc = cur == o[i].s ? 0 : zb_rescore(z, m, cur, o[i].s);
        else if (rc >= 0)
            rc = TXN_E_CORRUPT; /* every member is there */
        if (z)
            rc = zb_close(z, rc);
        if ((rc = kv_txn_end(t, rc)))
            die("a ZADD through zbtree.c", rc);
    }
    return thread_ns() - t0;
}

static uint64_t run_kv0(struct kv_slice key)
{
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++) {
        kv_txn *t;
        int rc = kv_txn_begin(srv.kv, 1, &key, 1, &t);
        if (rc || (rc = kv_txn_end(t, 0)))
            die("an empty kv_txn", rc);
    }
    return thread_ns() - t0;
}

/* Run one command; its reply must begin with `expect` (NULL: any) */
static void command(size_t argc, struct kv_slice *argv, const char *expect)
{
    conn.out.len = 0;
    command_run(&conn, argc, argv);
    if (expect && (conn.out.len < strlen(expect) || memcmp(conn.out.p, expect, strlen(expect)))) {
        fprintf(stderr, "zfloor: %.*s: reply %.*s\n", (int)argv[0].n, argv[0].p,
                (int)(conn.out.len > 80 ? 80 : conn.out.len), conn.out.p);
        exit(1);
    }
}

static uint64_t run_cmd(const struct op *o)
{
    char score[32];
    struct kv_slice argv[4] = {slice("ZADD"), slice("myzset"), {score, 0}, {NULL, ML}};
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++) {
        argv[2].n = (size_t)snprintf(score, sizeof score, "%.0f", o[i].s);
        argv[3].p = o[i].m;
        command(4, argv, opt.check ? ":0\r\n" : NULL);
    }
    return thread_ns() - t0;
}

static uint64_t run_ping(void)
{
    struct kv_slice argv[1] = {slice("PING")};
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++)
        command(1, argv, opt.check ? "+PONG\r\n" : NULL);
    return thread_ns() - t0;
}

/* ---- the hash lines: F fields, values of 1 to 3 digits */

struct hent {
    char f[MLEN];
    uint32_t vn, pad;
    char v[8];
};

struct hop {
    unsigned f;
    uint32_t vn;
    char v[4];
};

static char fname[HMAX][MLEN]; /* field k's name: member(k) */

static struct hop *make_hops(uint64_t seed)
{
    struct hop *o = malloc(opt.ops * sizeof *o);
    if (!o)
        die("malloc", 0);
    for (uint64_t i = 0; i < opt.ops; i++) {
        o[i].f = (unsigned)(rnd(&seed) % opt.hfields);
        o[i].vn = (uint32_t)snprintf(o[i].v, sizeof o[i].v, "%u", (unsigned)(rnd(&seed) % 1000));
    }
    return o;
}

static uint64_t run_hdram(struct hent *h, const struct hop *o)
{
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++) {
        const char *f = fname[o[i].f];
        for (unsigned k = 0; k < opt.hfields; k++)
            if (!memcmp(h[k].f, f, MLEN)) {
                h[k].vn = o[i].vn;
                memcpy(h[k].v, o[i].v, sizeof o[i].v);
                break;
            }
    }
    return thread_ns() - t0;
}

static uint64_t run_hpool(txn_obj *ho, const struct hop *o)
{
    struct hent h[HMAX];
    size_t n = opt.hfields * sizeof *h;
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++) {
        pctx c;
        const char *f = fname[o[i].f];
        p_begin(&c);
        pfail(&c, txn_read(c.tx, ho, 0, h, n));
        for (unsigned k = 0; k < opt.hfields; k++)
            if (!memcmp(h[k].f, f, MLEN)) {
                h[k].vn = o[i].vn;
                memcpy(h[k].v, o[i].v, sizeof o[i].v);
                pfail(&c, txn_write(c.tx, ho, k * sizeof *h + MLEN, &h[k].vn, 16));
                break;
            }
        p_end(&c, "an HSET in the pool");
    }
    return thread_ns() - t0;
}

static uint64_t run_hcmd(const struct hop *o)
{
    struct kv_slice argv[4] = {slice("HSET"), slice("myhash"), {NULL, ML}, {NULL, 0}};
    uint64_t t0 = thread_ns();
    for (uint64_t i = 0; i < opt.ops; i++) {
        argv[2].p = fname[o[i].f];
        argv[3] = (struct kv_slice){o[i].v, o[i].vn};
        command(4, argv, opt.check ? ":0\r\n" : NULL);
    }
    return thread_ns() - t0;
}

/* ---- the checks */

/* The store's sorted set at key, in order, into out[0..S) */
static int zb_dump(struct kv_slice key, struct zpair *out, size_t S)
{
    kv_txn *t;
    zb *z = NULL;
    zb_walk *w = NULL;
    int rc = kv_txn_begin(srv.kv, 1, &key, 0, &t);
    if (rc)
        return rc;
    if ((rc = zb_open(t, key, &z)) == 1)
        rc = zb_card(z) == S ? zb_check(z) : TXN_E_CORRUPT;
    else if (rc >= 0)
        rc = TXN_E_CORRUPT;
    if (!rc)
        rc = zb_walk_open(z, 0, &w);
    for (size_t i = 0; !rc && i < S; i++) {
        char *m;
        size_t mn;
        if (i && (rc = zb_walk_step(w, 1)))
            break;
        if ((rc = zb_walk_get(w, &out[i].s, &m, &mn)))
            break;
        memset(out[i].m, 0, MLEN);
        memcpy(out[i].m, m, mn < MLEN ? mn : MLEN);
        rc = mn == ML ? 0 : TXN_E_CORRUPT;
        free(m);
    }
    if (w)
        zb_walk_free(w);
    if (z)
        rc = zb_close(z, rc);
    return kv_txn_end(t, rc) ? TXN_E_CORRUPT : rc;
}

static int same(const char *what, const struct zpair *a, const struct zpair *b, size_t S)
{
    for (size_t i = 0; i < S; i++)
        if (a[i].s != b[i].s || memcmp(a[i].m, b[i].m, MLEN)) {
            fprintf(stderr, "zfloor: check: %s differs at rank %zu: %g %.*s against %g %.*s\n",
                    what, i, a[i].s, ML, a[i].m, b[i].s, ML, b[i].m);
            return 1;
        }
    return 0;
}

/* The sorted sets' check after a size's rounds: 0, or 1 */
static int check_zsets(uint64_t dl, uint64_t pl, uint64_t al, size_t S)
{
    struct zpair *a = calloc(S, sizeof *a), *b = calloc(S, sizeof *b);
    int bad = 0;
    if (!a || !b)
        die("calloc", 0);
    dctx dc;
    if (d_dump(&dc, dl, a, S))
        return 1;
    int (*dump[2])(pctx *, uint64_t, struct zpair *, size_t) = {p_dump, a_dump};
    const uint64_t lists[2] = {pl, al};
    const char *lines[2] = {"pool", "arena"};
    for (int k = 0; k < 2 && !bad; k++)
        if (want(lines[k])) {
            pctx c;
            p_begin(&c);
            bad |= dump[k](&c, lists[k], b, S) || same(lines[k], a, b, S);
            p_end(&c, "the check");
        }
    const char *keys[] = {"zb", "myzset"}, *names[] = {"zbtree.c's set", "ZADD's set"};
    for (int k = 0; k < 2 && !bad; k++) {
        if (!want(k ? "cmd" : "zb"))
            continue;
        int rc = zb_dump(slice(keys[k]), b, S);
        if (rc) {
            fprintf(stderr, "zfloor: check: %s: %s\n", names[k], txn_strerror(rc));
            bad = 1;
        } else {
            bad |= same(names[k], a, b, S);
        }
    }
    free(a);
    free(b);
    return bad;
}

static int check_hashes(struct hent *h, txn_obj *ho)
{
    struct hent p[HMAX];
    pctx c;
    int bad = 0;
    p_begin(&c);
    pfail(&c, txn_read(c.tx, ho, 0, p, opt.hfields * sizeof *p));
    p_end(&c, "the check");
    for (unsigned k = 0; k < opt.hfields && !bad; k++) {
        char want_reply[32];
        struct kv_slice argv[3] = {slice("HGET"), slice("myhash"), {h[k].f, ML}};
        if (want("hpool") && (p[k].vn != h[k].vn || memcmp(p[k].v, h[k].v, h[k].vn))) {
            fprintf(stderr, "zfloor: check: the pool's hash differs at field %u\n", k);
            bad = 1;
        }
        if (want("hcmd")) {
            snprintf(want_reply, sizeof want_reply, "$%u\r\n%.*s\r\n", h[k].vn, (int)h[k].vn,
                     h[k].v);
            command(3, argv, want_reply);
        }
    }
    return bad;
}

/* ---- the driver */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *line, size_t S, uint64_t *ns, unsigned n)
{
    qsort(ns, n, sizeof *ns, cmp_u64);
    printf("%-6s %-6s %8zu %10.1f   (rounds:", txn_engine_name(), line, S,
           (double)ns[n / 2] / (double)opt.ops);
    for (unsigned r = 0; r < n; r++)
        printf(" %.1f", (double)ns[r] / (double)opt.ops);
    printf(")\n");
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr, "usage: zfloor [--sizes 1000,100000] [--ops N] [--rounds R] [--hfields F] "
                    "[--lines dram,pool,arena,tx0,kv0,zb,cmd,ping,hdram,hpool,hcmd] [--seed X] "
                    "[--check]\n");
    exit(2);
}

/* The number s says, in [lo, hi], else the usage */
static uint64_t number(const char *s, uint64_t lo, uint64_t hi)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s || *end || v < lo || v > hi)
        usage();
    return v;
}

static void parse(int argc, char **argv)
{
    static const struct option lo[] = {{"sizes", 1, 0, 's'}, {"ops", 1, 0, 'n'},
                                       {"rounds", 1, 0, 'r'}, {"hfields", 1, 0, 'h'},
                                       {"lines", 1, 0, 'l'}, {"seed", 1, 0, 'x'},
                                       {"check", 0, 0, 'c'}, {0, 0, 0, 0}};
    for (int ch; (ch = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
        char *end = NULL;
        switch (ch) {
        case 's':
            opt.nsizes = 0;
            for (char *p = optarg; *p && opt.nsizes < MAX_SIZES; p = *end ? end + 1 : end) {
                unsigned long long v = strtoull(p, &end, 10);
                if (end == p || v < 1 || v > 10000000 || (*end && *end != ','))
                    usage();
                opt.sizes[opt.nsizes++] = (size_t)v;
            }
            break;
        case 'n':
            opt.ops = number(optarg, 1, UINT64_MAX);
            break;
        case 'r':
            opt.rounds = (unsigned)number(optarg, 1, MAX_ROUNDS);
            break;
        case 'h':
            opt.hfields = (unsigned)number(optarg, 1, HMAX);
            break;
        case 'l':
            if (strlen(optarg) >= sizeof opt.lines)
                usage();
            strcpy(opt.lines, optarg);
            break;
        case 'x':
            opt.seed = number(optarg, 1, UINT64_MAX);
            break;
        case 'c':
            opt.check = 1;
            break;
        default:
            usage();
        }
    }
    if (optind != argc)
        usage();
}

static void cleanup(void)
{
    char path[256];
    if (pool)
        txn_pool_close(pool);
    if (srv.kv)
        kv_close(srv.kv);
    if (pool_name[0] && !txn_pool_path(pool_name, path, sizeof path))
        unlink(path);
    if (kv_name[0] && !txn_pool_path(kv_name, path, sizeof path))
        unlink(path);
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    snprintf(pool_name, sizeof pool_name, "zfloor-%d-sl.pool", (int)getpid());
    snprintf(kv_name, sizeof kv_name, "zfloor-%d-kv.pool", (int)getpid());
    atexit(cleanup);
    txn_pool_opts po = {.size = 64u << 20, .max_size = (size_t)1 << 30};
    int rc = txn_pool_create(pool_name, "zfloor", &po, &pool);
    if (rc)
        die(txn_pool_strerror(rc), rc);
    struct kv_opts ko = {.pool_size = (size_t)1 << 30, .threads = 8};
    if ((rc = kv_open(kv_name, &ko, &srv.kv)))
        die(kv_strerror(rc), rc);
    srv.lim = (struct resp_limits){.max_bulk = 1 << 20, .max_args = 1024, .max_inline = 65536};
    srv.threads = 1;
    if (commands_init())
        die("commands_init", 0);
    conn.fd = -1;
    printf("engine line       size   ns/op (thread CPU, median of %u rounds of %llu ops)\n",
           opt.rounds, (unsigned long long)opt.ops);
    int bad = 0;
    uint64_t ns[MAX_ROUNDS];
    for (size_t si = 0; si < opt.nsizes; si++) {
        size_t S = opt.sizes[si];
        const char *zl[] = {"dram", "pool", "tx0", "kv0", "zb", "cmd", "ping", "arena"};
        enum { ZLINES = sizeof zl / sizeof *zl };
        uint64_t all[ZLINES][MAX_ROUNDS];
        int any = 0;
        for (int k = 0; k < ZLINES; k++)
            any |= want(zl[k]);
        if (!any && !opt.check)
            continue;
        uint64_t dl = d_make(S), pl = 0;
        if (want("pool") || want("tx0"))
            pl = make_list(S, pnew, pwr, p_zadd);
        uint64_t al = want("arena") ? a_make(S) : 0;
        if (want("zb") || want("kv0"))
            zb_fill(slice("zb"), S);
        if (want("cmd"))
            zb_fill(slice("myzset"), S);
        for (unsigned r = 0; r < opt.rounds; r++) {
            /* each round the same ZADDs: the scores differ from the first
             * round's end, so every round moves members */
            struct op *o = make_ops(S, opt.seed + r + 1);
            all[0][r] = want("dram") ? run_dram(dl, o) : 0;
            all[1][r] = want("pool") ? run_tx(pl, o, p_zadd) : 0;
            all[2][r] = want("tx0") ? run_tx0(pl) : 0;
            all[3][r] = want("kv0") ? run_kv0(slice("zb")) : 0;
            all[4][r] = want("zb") ? run_zb(slice("zb"), o) : 0;
            all[5][r] = want("cmd") ? run_cmd(o) : 0;
            all[6][r] = want("ping") ? run_ping() : 0;
            all[7][r] = want("arena") ? run_tx(al, o, a_zadd) : 0;
            free(o);
        }
        for (int k = 0; k < ZLINES; k++)
            if (want(zl[k])) {
                memcpy(ns, all[k], sizeof ns);
                report(zl[k], S, ns, opt.rounds);
            }
        if (opt.check && want("dram") && check_zsets(dl, pl, al, S))
            bad = 1;
        d_free(dl);
        if (pl)
            p_drop(pl);
        if (al) {
            pctx c;
            p_begin(&c);
            pfail(&c, txn_free(c.tx, arena));
            p_end(&c, "the arena's free");
        }
        struct kv_slice keys[2] = {slice("zb"), slice("myzset")};
        for (int k = 0; k < 2; k++) {
            kv_txn *t;
            if ((rc = kv_txn_begin(srv.kv, 1, &keys[k], 1, &t)))
                die("a DEL", rc);
            int del = kv_txn_del(t, keys[k]);
            if ((rc = kv_txn_end(t, del < 0 ? del : 0)) < 0)
                die("a DEL", rc);
        }
    }
    if (want("hdram") || want("hpool") || want("hcmd")) {
        struct hent h[HMAX];
        memset(h, 0, sizeof h);
        txn_obj *ho = NULL;
        for (unsigned k = 0; k < opt.hfields; k++) {
            member(k, fname[k]);
            memcpy(h[k].f, fname[k], MLEN);
            h[k].vn = 3;
            memcpy(h[k].v, "xxx", 3);
            struct kv_slice argv[4] = {slice("HSET"), slice("myhash"), {h[k].f, ML},
                                       slice("xxx")};
            command(4, argv, ":1\r\n");
        }
        pctx c;
        p_begin(&c);
        pfail(&c, txn_alloc(c.tx, opt.hfields * sizeof *h, &ho));
        if (!c.rc)
            pfail(&c, txn_write(c.tx, ho, 0, h, opt.hfields * sizeof *h));
        p_end(&c, "a hash's fill");
        const char *hl[] = {"hdram", "hpool", "hcmd"};
        uint64_t all[3][MAX_ROUNDS];
        for (unsigned r = 0; r < opt.rounds; r++) {
            struct hop *o = make_hops(opt.seed + r + 1);
            all[0][r] = want("hdram") ? run_hdram(h, o) : 0;
            all[1][r] = want("hpool") ? run_hpool(ho, o) : 0;
            all[2][r] = want("hcmd") ? run_hcmd(o) : 0;
            free(o);
        }
        for (int k = 0; k < 3; k++)
            if (want(hl[k])) {
                memcpy(ns, all[k], sizeof ns);
                report(hl[k], opt.hfields, ns, opt.rounds);
            }
        if (opt.check && want("hdram") && check_hashes(h, ho))
            bad = 1;
    }
    buf_free(&conn.out);
    if (opt.check)
        printf("check: %s\n", bad ? "FAILED" : "the structures agree");
    return bad;
}
