/* sps.c - SPS, the benchmark of the persistent transactional memories
 * (Ramalhete, Correia and Felber, "Efficient Algorithms for Persistent
 * Transactional Memory", PPoPP 2021): N u64 in persistent memory, each
 * transaction swaps S random pairs (two reads and two writes a swap), one
 * thread. One JSON line per point on stdout. The array must still be a
 * permutation at the end: an engine that loses or duplicates a value posts
 * no number (exit 1).
 *
 *   sps-<engine> [--keys N] [--sizes 1,4,16,64,256] [--seconds T]
 *                [--layout array|objects|both] [--raw]
 *
 * Layouts: `array`, the N values in one object; `objects`, one 64-byte
 * object per value (the value in its first word). --raw adds the
 * hardware's lines, the same loop and generator on a plain mapped array:
 * `raw` without flushes, `raw-flush` with a write-back of each written
 * line and one fence per transaction. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "txn.h"

#define MAX_SIZES 16
#define CHUNK 8192u    /* values per setup transaction / read of the check */
#define OBJ_BYTES 64u

static struct {
    uint64_t keys, obj_keys;
    unsigned sizes[MAX_SIZES], nsizes;
    double seconds;
    int array, objects, raw;
} cfg = {10000000, 1000000, {1, 4, 16, 64, 256}, 5, 1.0, 1, 0, 0};

static char pool_name[64];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: the generator of every line, seeded alike */
static inline uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* An index below n, as evenly spread as rnd() % n: the high half of
 * rnd() * n. A % by a run-time n is a divide, which was most of the raw
 * loop's time and which Quadra's benchmark does not pay (its modulus is a
 * constant, made a multiply); docs/access.md has the figures. */
static inline uint64_t pick(uint64_t *s, uint64_t n)
{
    return (uint64_t)((unsigned __int128)rnd(s) * n >> 64);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "sps-%s: %s: %s\n", txn_engine_name(), what, txn_pool_strerror(rc));
    if (pool_name[0]) {
        char path[4096];
        if (!txn_pool_path(pool_name, path, sizeof path))
            unlink(path);
    }
    exit(1);
}

/* ---- one point's figures */

struct point {
    const char *line, *layout;
    uint64_t keys;
    unsigned size;
    uint64_t txs, ns;
    txn_stats st;
};

static void print_point(const struct point *p)
{
    double s = (double)p->ns / 1e9, tx = (double)p->txs;
    printf("{\"bench\":\"sps\",\"engine\":\"%s\",\"line\":\"%s\",\"layout\":\"%s\","
           "\"pdom\":%d,\"barrier_ns\":%u,\"flush\":\"%s\",\"keys\":%llu,"
           "\"swaps_per_tx\":%u,\"transactions\":%llu,\"seconds\":%.3f,"
           "\"swaps_per_s\":%.0f,\"tx_per_s\":%.0f,\"barriers_per_tx\":%.3f,"
           "\"lines_per_tx\":%.3f}\n",
           txn_engine_name(), p->line, p->layout, txn_pdom(), txn_pdom_ns(), txn_flush_name(),
           (unsigned long long)p->keys, p->size, (unsigned long long)p->txs, s,
           tx * p->size / s, tx / s, p->txs ? (double)p->st.barriers / tx : 0,
           p->txs ? (double)p->st.lines_flushed / tx : 0);
    fflush(stdout);
}

/* Whether vals[0..n) (read by `get`) is a permutation of 0..n-1. */
static int is_permutation(uint64_t n, int (*get)(void *ctx, uint64_t at, uint64_t *v, uint64_t k),
                          void *ctx)
{
    uint64_t *seen = calloc((n + 63) / 64, 8), *buf = malloc(CHUNK * 8);
    int ok = seen && buf;
    for (uint64_t at = 0; ok && at < n; at += CHUNK) {
        uint64_t k = n - at < CHUNK ? n - at : CHUNK;
        if (get(ctx, at, buf, k)) {
            ok = 0;
            break;
        }
        for (uint64_t i = 0; ok && i < k; i++) {
            uint64_t v = buf[i];
            ok = v < n && !(seen[v / 64] >> (v % 64) & 1);
            if (ok)
                seen[v / 64] |= 1ull << (v % 64);
        }
    }
    free(seen);
    free(buf);
    return ok;
}

/* ---- the engine's lines */

struct store {
    txn_pool *p;
    int objects;
    uint64_t n;
    txn_obj *arr;   /* array layout */
    txn_obj **objs; /* objects layout: handles, kept in DRAM */
};

/* The value of index i: a word of the array, or an object's first word.
 * `objects` is a constant where these are inlined (run_engine's two
 * instances), so the loop tests no layout per access. */
static inline __attribute__((always_inline)) int get_val(const struct store *s, int objects,
                                                         txn *tx, uint64_t i, uint64_t *v)
{
    return objects ? txn_read_u64(tx, s->objs[i], 0, v) : txn_read_u64(tx, s->arr, 8 * i, v);
}

static inline __attribute__((always_inline)) int put_val(const struct store *s, int objects,
                                                         txn *tx, uint64_t i, uint64_t v)
{
    return objects ? txn_write_u64(tx, s->objs[i], 0, v) : txn_write_u64(tx, s->arr, 8 * i, v);
}

static void setup(struct store *s, int objects, uint64_t n)
{
    size_t data = objects ? n * 160 : n * 8 * 2; /* allocator headers; incll's log */
    txn_pool_opts o = {.size = data + ((size_t)128 << 20), .root_size = 64, .threads = 4};
    snprintf(pool_name, sizeof pool_name, "pmtx-sps-%d.pool", (int)getpid());
    int rc = txn_pool_create(pool_name, "sps", &o, &s->p);
    if (rc)
        die("pool create", rc);
    s->objects = objects;
    s->n = n;
    s->objs = objects ? malloc(n * sizeof *s->objs) : NULL;
    if (objects && !s->objs)
        die("handles", TXN_E_NOMEM);
    txn *tx;
    if (!objects) {
        if ((rc = txn_begin(s->p, &tx)) || (rc = txn_alloc(tx, n * 8, &s->arr)) ||
            (rc = txn_commit(tx)))
            die("the array", rc);
    }
    uint64_t *buf = malloc(CHUNK * 8);
    for (uint64_t at = 0; at < n; at += CHUNK) {
        uint64_t k = n - at < CHUNK ? n - at : CHUNK;
        for (uint64_t i = 0; i < k; i++)
            buf[i] = at + i;
        if ((rc = txn_begin(s->p, &tx)))
            die("setup", rc);
        if (!objects)
            rc = txn_write(tx, s->arr, 8 * at, buf, 8 * k);
        for (uint64_t i = 0; objects && !rc && i < k; i++)
            if (!(rc = txn_alloc(tx, OBJ_BYTES, &s->objs[at + i])))
                rc = txn_write_u64(tx, s->objs[at + i], 0, at + i);
        if (rc) {
            txn_abort(tx);
            die("setup", rc);
        }
        if ((rc = txn_commit(tx)))
            die("setup", rc);
    }
    free(buf);
    if ((rc = txn_sync(s->p)))
        die("setup", rc);
}

static int read_chunk(void *ctx, uint64_t at, uint64_t *v, uint64_t k)
{
    struct store *s = ctx;
    txn *tx;
    int rc = txn_begin(s->p, &tx);
    if (rc)
        return rc;
    if (!s->objects)
        rc = txn_read(tx, s->arr, 8 * at, v, 8 * k);
    for (uint64_t i = 0; s->objects && !rc && i < k; i++)
        rc = txn_read_u64(tx, s->objs[at + i], 0, &v[i]);
    txn_abort(tx);
    return rc;
}

/* One point: transactions of `size` swaps for cfg.seconds. */
static inline __attribute__((always_inline)) void run_loop(struct store *s, int objects,
                                                           unsigned size, uint64_t *seed,
                                                           struct point *pt)
{
    uint64_t end = now_ns() + (uint64_t)(cfg.seconds * 1e9), t0 = now_ns(), t = t0, txs = 0;
    const uint64_t n = s->n;
    /* a copy whose address no call sees: the handles stay in registers,
     * as a program's locals would (s itself went to setup) */
    const struct store c = *s;
    txn_stats_reset();
    while (t < end) {
        for (int k = 0; k < 16; k++, txs++) {
            txn *tx;
            int rc = txn_begin(c.p, &tx);
            if (rc)
                die("begin", rc);
            /* after a failed call the others of the transaction fail too
             * (TXN_E_STATE) and change nothing: one test per transaction */
            for (unsigned w = 0; w < size; w++) {
                uint64_t i = pick(seed, n), j = pick(seed, n), a = 0, b = 0;
                rc |= get_val(&c, objects, tx, i, &a);
                rc |= get_val(&c, objects, tx, j, &b);
                rc |= put_val(&c, objects, tx, i, b);
                rc |= put_val(&c, objects, tx, j, a);
            }
            if (rc) {
                txn_abort(tx);
                die("swap", rc);
            }
            if ((rc = txn_commit(tx)))
                die("commit", rc);
        }
        t = now_ns();
    }
    txn_stats_get(&pt->st);
    pt->txs = txs;
    pt->ns = t - t0;
}

static void run_engine(struct store *s, unsigned size, uint64_t *seed, struct point *pt)
{
    if (s->objects)
        run_loop(s, 1, size, seed, pt);
    else
        run_loop(s, 0, size, seed, pt);
}

static int run_layout(int objects)
{
    struct store s = {0};
    uint64_t n = objects ? cfg.obj_keys : cfg.keys;
    setup(&s, objects, n);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    struct point pts[MAX_SIZES];
    for (unsigned k = 0; k < cfg.nsizes; k++) {
        pts[k] = (struct point){txn_engine_name(), objects ? "objects" : "array", n,
                                cfg.sizes[k], 0, 0, {0}};
        run_engine(&s, cfg.sizes[k], &seed, &pts[k]);
    }
    int ok = is_permutation(n, read_chunk, &s);
    txn_pool_close(s.p);
    free(s.objs);
    char path[4096];
    if (!txn_pool_path(pool_name, path, sizeof path))
        unlink(path);
    pool_name[0] = 0;
    if (!ok) {
        fprintf(stderr, "sps-%s: the %s is no longer a permutation: no figures\n",
                txn_engine_name(), objects ? "objects' values" : "array");
        return 1;
    }
    for (unsigned k = 0; k < cfg.nsizes; k++)
        print_point(&pts[k]);
    return 0;
}

/* ---- the raw lines: a plain array mapped from a file beside the pools */

enum flush_insn { F_CLWB, F_CLFLUSHOPT, F_CLFLUSH };
static enum flush_insn raw_flush;

static void pick_flush(void)
{
    unsigned a, b, c, d;
    raw_flush = F_CLFLUSH;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d))
        raw_flush = b & (1u << 24) ? F_CLWB : b & (1u << 23) ? F_CLFLUSHOPT : F_CLFLUSH;
}

static inline void flush_line(void *p)
{
    switch (raw_flush) {
    case F_CLWB:
        __asm__ volatile("clwb %0" : "+m"(*(volatile char *)p));
        break;
    case F_CLFLUSHOPT:
        __asm__ volatile("clflushopt %0" : "+m"(*(volatile char *)p));
        break;
    default:
        __asm__ volatile("clflush %0" : "+m"(*(volatile char *)p));
    }
}

static void run_raw(uint64_t *a, uint64_t n, unsigned size, int flush, uint64_t *seed,
                    struct point *pt)
{
    uint64_t end = now_ns() + (uint64_t)(cfg.seconds * 1e9), t0 = now_ns(), t = t0, txs = 0;
    while (t < end) {
        for (int k = 0; k < 16; k++, txs++) {
            for (unsigned w = 0; w < size; w++) {
                uint64_t i = pick(seed, n), j = pick(seed, n);
                uint64_t x = a[i], y = a[j];
                a[i] = y;
                a[j] = x;
                if (flush) {
                    flush_line(&a[i]);
                    flush_line(&a[j]);
                }
            }
            if (flush)
                __asm__ volatile("sfence" ::: "memory");
        }
        t = now_ns();
    }
    pt->txs = txs;
    pt->ns = t - t0;
    if (flush) {
        pt->st.barriers = txs;
        pt->st.lines_flushed = txs * 2 * size;
    }
}

static int raw_get(void *ctx, uint64_t at, uint64_t *v, uint64_t k)
{
    memcpy(v, (uint64_t *)ctx + at, 8 * k);
    return 0;
}

static int run_raw_lines(void)
{
    uint64_t n = cfg.keys;
    char path[4096];
    snprintf(pool_name, sizeof pool_name, "pmtx-sps-raw-%d", (int)getpid());
    int rc = txn_pool_path(pool_name, path, sizeof path), fd = -1;
    if (rc || (fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600)) < 0 ||
        ftruncate(fd, (off_t)(n * 8))) {
        fprintf(stderr, "sps: %s: %s\n", path, strerror(errno));
        return 1;
    }
    uint64_t *a = mmap(NULL, n * 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    unlink(path);
    pool_name[0] = 0;
    if (a == MAP_FAILED) {
        perror("sps: mmap");
        return 1;
    }
    pick_flush();
    for (uint64_t i = 0; i < n; i++)
        a[i] = i;
    struct point pts[2][MAX_SIZES];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int flush = 0; flush < 2; flush++)
        for (unsigned k = 0; k < cfg.nsizes; k++) {
            pts[flush][k] = (struct point){flush ? "raw-flush" : "raw", "array", n,
                                           cfg.sizes[k], 0, 0, {0}};
            run_raw(a, n, cfg.sizes[k], flush, &seed, &pts[flush][k]);
        }
    int ok = is_permutation(n, raw_get, a);
    munmap(a, n * 8);
    if (!ok) {
        fprintf(stderr, "sps: the raw array is no longer a permutation\n");
        return 1;
    }
    for (int flush = 0; flush < 2; flush++)
        for (unsigned k = 0; k < cfg.nsizes; k++)
            print_point(&pts[flush][k]);
    return 0;
}

/* ---- options */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sps-%s [--keys N] [--object-keys N] [--sizes S,S,...] [--seconds T]\n"
            "              [--layout array|objects|both] [--raw]\n"
            "  --keys N         values of the array layout (default 10000000)\n"
            "  --object-keys N  64-byte objects of the objects layout (default 1000000)\n"
            "  --sizes LIST     swaps per transaction, one point each (default 1,4,16,64,256)\n"
            "  --seconds T      time per point (default 1)\n"
            "  --layout L       array (default), objects or both\n"
            "  --raw            also the raw lines (a plain array, without and with flushes)\n"
            "Environment: TXN_PDOM, TXN_PDOM0_NS, TXN_PDOM1_NS, TXN_POOL_DIR (where the pool\n"
            "and the raw array live).\n",
            txn_engine_name());
}

static int parse_sizes(const char *s)
{
    cfg.nsizes = 0;
    while (*s && cfg.nsizes < MAX_SIZES) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || v == 0 || v > 1000000 || (*end && *end != ','))
            return -1;
        cfg.sizes[cfg.nsizes++] = (unsigned)v;
        s = *end ? end + 1 : end;
    }
    return cfg.nsizes && !*s ? 0 : -1;
}

static int parse_count(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || v < 2 || v > (1ull << 32))
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"keys", 1, 0, 'k'},   {"object-keys", 1, 0, 'o'}, {"sizes", 1, 0, 's'},
        {"seconds", 1, 0, 't'}, {"layout", 1, 0, 'l'},     {"raw", 0, 0, 'r'},
        {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'k':
        case 'o':
            if (parse_count(optarg, c == 'k' ? &cfg.keys : &cfg.obj_keys)) {
                fprintf(stderr, "sps: bad --%s %s (2 to 2^32)\n", c == 'k' ? "keys" : "object-keys",
                        optarg);
                return 2;
            }
            break;
        case 's':
            if (parse_sizes(optarg)) {
                fprintf(stderr, "sps: bad --sizes %s (numbers from 1, comma-separated, at "
                        "most %d)\n", optarg, MAX_SIZES);
                return 2;
            }
            break;
        case 't':
            cfg.seconds = strtod(optarg, &end);
            if (end == optarg || *end || !(cfg.seconds > 0 && cfg.seconds <= 3600)) {
                fprintf(stderr, "sps: bad --seconds %s (more than 0, at most 3600)\n", optarg);
                return 2;
            }
            break;
        case 'l':
            cfg.array = !strcmp(optarg, "array") || !strcmp(optarg, "both");
            cfg.objects = !strcmp(optarg, "objects") || !strcmp(optarg, "both");
            if (!cfg.array && !cfg.objects) {
                fprintf(stderr, "sps: bad --layout %s (array, objects or both)\n", optarg);
                return 2;
            }
            break;
        case 'r': cfg.raw = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    fprintf(stderr, "# sps: engine %s, PDOM %d (%u ns per barrier), flush %s\n",
            txn_engine_name(), txn_pdom(), txn_pdom_ns(), txn_flush_name());
    int rc = 0;
    if (cfg.raw)
        rc |= run_raw_lines();
    if (cfg.array)
        rc |= run_layout(0);
    if (cfg.objects)
        rc |= run_layout(1);
    return rc;
}
