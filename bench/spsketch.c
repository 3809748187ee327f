/* spsketch.c - SPS's loop through small inlined access paths written from
 * scratch, beside the raw loop and txn.h: what an API of txn.h's shape
 * costs, one feature at a time (issue #45: none at 0.8x of the raw loop;
 * docs/access.md).
 *
 *   spsketch-none [--keys N] [--sizes 1,4,16,64] [--seconds T] [--rounds R]
 *
 * Lines, each the same generator and swaps over N u64 in a file of
 * /dev/shm (as sps's raw line), one JSON line a point:
 *   raw    the plain loop
 *   flag   the sketch: each read checks the object against a cached
 *          one and the offset against its bound, each write also the room
 *          of a DRAM log, appends (address, old word) and stores; a failed
 *          check sets a flag tested at the commit. The state is a local.
 *   call   the same, but a failed check calls a function the compiler cannot
 *          see into (as a library's slow path), which may change the state:
 *          so the state lives in memory reachable from that function.
 *   tls    call, with the state found through a thread-local pointer at the
 *          begin and a count of commits in a thread-local, as txn.h's
 *          inline begin and commit do.
 *   pad16, pad32, pad48  raw with 16, 32 or 48 nops a swap: instructions
 *          that wait for nothing and only take room in the reorder window,
 *          as an access path's checks and bookkeeping do
 *   txn    the loop of sps.c through txn.h, on the engine linked (none: no
 *          persistence, the bound the others approach), its array in a pool.
 * The lines run in turn, T seconds each, R rounds a size, so that a loaded
 * host slows them alike; the last lines give each line's median and the
 * median of its per-round ratios to raw. */
#define _GNU_SOURCE
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

#define LOG_WORDS 4096u

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*, as sps.c */
static inline uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

/* An index below n, as sps.c picks it: the high half of rnd() * n (a %
 * by a run-time n would be a divide, slower than the rest of a swap). */
static inline uint64_t pick(uint64_t *s, uint64_t n)
{
    return (uint64_t)((unsigned __int128)rnd(s) * n >> 64);
}

/* The transaction's state: one cached object and the DRAM log. */
struct st {
    const void *obj;
    char *base;
    unsigned long long lim; /* bytes - 8 */
    uint64_t *wl, *wl_end, *wl0;
    uint32_t fail;
    uint32_t active;
};

/* ---- the slow paths: out of the compiler's sight (noipa), so that a call
 * may have changed anything reachable, as a library's would */
__attribute__((noipa)) static int slow_read(struct st *h, const void *o, uint64_t off,
                                            uint64_t *v)
{
    (void)o;
    (void)off;
    h->fail = 1;
    *v = 0;
    return 1;
}

__attribute__((noipa)) static int slow_write(struct st *h, const void *o, uint64_t off,
                                             uint64_t v)
{
    (void)o;
    (void)off;
    (void)v;
    h->fail = 1;
    return 1;
}

static struct st shared; /* the state of call and tls: reachable by the slow paths */
static __thread struct st *cur_tx;
static __thread uint64_t commits;

/* each line a function of its own: instructions are counted per function
 * (callgrind) */
#define NOINLINE static __attribute__((noinline))
#define ALWAYS static inline __attribute__((always_inline))

ALWAYS int rd_flag(struct st *h, const void *o, uint64_t off, uint64_t *v)
{
    if (__builtin_expect(h->obj == o && off <= h->lim, 1)) {
        *v = *(const uint64_t *)(const void *)(h->base + off);
        return 0;
    }
    h->fail = 1;
    *v = 0;
    return 0;
}

ALWAYS int wr_flag(struct st *h, const void *o, uint64_t off, uint64_t v)
{
    if (__builtin_expect(h->obj == o && off <= h->lim && h->wl < h->wl_end, 1)) {
        uint64_t *p = (uint64_t *)(void *)(h->base + off), *e = h->wl;
        e[0] = (uint64_t)(uintptr_t)p;
        e[1] = *p;
        *p = v;
        h->wl = e + 2;
        return 0;
    }
    h->fail = 1;
    return 0;
}

ALWAYS int rd_call(struct st *h, const void *o, uint64_t off, uint64_t *v)
{
    if (__builtin_expect(h->obj == o && off <= h->lim, 1)) {
        *v = *(const uint64_t *)(const void *)(h->base + off);
        return 0;
    }
    uint64_t t;
    int rc = slow_read(h, o, off, &t);
    *v = t;
    return rc;
}

ALWAYS int wr_call(struct st *h, const void *o, uint64_t off, uint64_t v)
{
    if (__builtin_expect(h->obj == o && off <= h->lim && h->wl < h->wl_end, 1)) {
        uint64_t *p = (uint64_t *)(void *)(h->base + off), *e = h->wl;
        e[0] = (uint64_t)(uintptr_t)p;
        e[1] = *p;
        *p = v;
        h->wl = e + 2;
        return 0;
    }
    return slow_write(h, o, off, v);
}

static struct {
    uint64_t keys;
    unsigned sizes[16], nsizes;
    double seconds;
    int rounds;
} cfg = {10000000, {1, 4, 16, 64}, 4, 1.0, 1};

static void report(const char *line, uint64_t n, unsigned size, uint64_t txs, uint64_t ns)
{
    printf("{\"bench\":\"spsketch\",\"line\":\"%s\",\"keys\":%llu,\"size\":%u,\"txs\":%llu,"
           "\"ns\":%llu,\"swaps_per_s\":%.0f}\n",
           line, (unsigned long long)n, size, (unsigned long long)txs, (unsigned long long)ns,
           (double)txs * size * 1e9 / (double)ns);
    fflush(stdout);
}

/* The loops: one function a line, so each is compiled on its own. */
#define LOOP_HEAD                                                                             \
    uint64_t end = now_ns() + (uint64_t)(cfg.seconds * 1e9), t0 = now_ns(), t = t0, txs = 0; \
    while (t < end) {                                                                         \
        for (int k = 0; k < 16; k++, txs++) {
#define LOOP_TAIL      \
    }                  \
    t = now_ns();      \
    }                  \
    *ns = t - t0;      \
    return txs;

NOINLINE uint64_t loop_raw(uint64_t *a, uint64_t n, unsigned size, uint64_t *seed, uint64_t *ns)
{
    LOOP_HEAD
    for (unsigned w = 0; w < size; w++) {
        uint64_t i = pick(seed, n), j = pick(seed, n);
        uint64_t x = a[i], y = a[j];
        a[i] = y;
        a[j] = x;
    }
    LOOP_TAIL
}

/* raw with `pad` nops a swap (a constant where it is inlined) */
static inline __attribute__((always_inline)) uint64_t loop_pad(uint64_t *a, uint64_t n,
                                                                unsigned size, uint64_t *seed,
                                                                uint64_t *ns, int pad)
{
    LOOP_HEAD
    for (unsigned w = 0; w < size; w++) {
        uint64_t i = pick(seed, n), j = pick(seed, n);
        uint64_t x = a[i], y = a[j];
        a[i] = y;
        a[j] = x;
        if (pad == 16)
            __asm__ volatile(".rept 16\n\tnop\n\t.endr");
        else if (pad == 32)
            __asm__ volatile(".rept 32\n\tnop\n\t.endr");
        else
            __asm__ volatile(".rept 48\n\tnop\n\t.endr");
    }
    LOOP_TAIL
}

NOINLINE uint64_t loop_pad16(uint64_t *a, uint64_t n, unsigned size, uint64_t *seed, uint64_t *ns)
{
    return loop_pad(a, n, size, seed, ns, 16);
}

NOINLINE uint64_t loop_pad32(uint64_t *a, uint64_t n, unsigned size, uint64_t *seed, uint64_t *ns)
{
    return loop_pad(a, n, size, seed, ns, 32);
}

NOINLINE uint64_t loop_pad48(uint64_t *a, uint64_t n, unsigned size, uint64_t *seed, uint64_t *ns)
{
    return loop_pad(a, n, size, seed, ns, 48);
}

NOINLINE uint64_t loop_flag(uint64_t *a, uint64_t n, unsigned size, uint64_t *seed, uint64_t *ns,
                          uint64_t *log)
{
    const void *obj = a;
    LOOP_HEAD
    struct st s = {obj, (char *)a, 8 * n - 8, log, log + LOG_WORDS - 1, log, 0, 1};
    int rc = 0;
    for (unsigned w = 0; w < size; w++) {
        uint64_t i = pick(seed, n), j = pick(seed, n), x = 0, y = 0;
        rc |= rd_flag(&s, obj, 8 * i, &x);
        rc |= rd_flag(&s, obj, 8 * j, &y);
        rc |= wr_flag(&s, obj, 8 * i, y);
        rc |= wr_flag(&s, obj, 8 * j, x);
    }
    if (rc || s.fail) {
        fprintf(stderr, "spsketch: a check failed\n");
        exit(1);
    }
    LOOP_TAIL
}

NOINLINE uint64_t loop_call(uint64_t *a, uint64_t n, unsigned size, uint64_t *seed, uint64_t *ns,
                          uint64_t *log)
{
    const void *obj = a;
    struct st *h = &shared;
    LOOP_HEAD
    *h = (struct st){obj, (char *)a, 8 * n - 8, log, log + LOG_WORDS - 1, log, 0, 1};
    int rc = 0;
    for (unsigned w = 0; w < size; w++) {
        uint64_t i = pick(seed, n), j = pick(seed, n), x = 0, y = 0;
        rc |= rd_call(h, obj, 8 * i, &x);
        rc |= rd_call(h, obj, 8 * j, &y);
        rc |= wr_call(h, obj, 8 * i, y);
        rc |= wr_call(h, obj, 8 * j, x);
    }
    if (rc || h->fail) {
        fprintf(stderr, "spsketch: a check failed\n");
        exit(1);
    }
    h->wl = h->wl0;
    LOOP_TAIL
}

NOINLINE uint64_t loop_tls(uint64_t *a, uint64_t n, unsigned size, uint64_t *seed, uint64_t *ns,
                         uint64_t *log)
{
    const void *obj = a;
    shared = (struct st){obj, (char *)a, 8 * n - 8, log, log + LOG_WORDS - 1, log, 0, 0};
    cur_tx = &shared;
    LOOP_HEAD
    struct st *h = cur_tx; /* the begin */
    h->active = 1;
    int rc = 0;
    for (unsigned w = 0; w < size; w++) {
        uint64_t i = pick(seed, n), j = pick(seed, n), x = 0, y = 0;
        rc |= rd_call(h, obj, 8 * i, &x);
        rc |= rd_call(h, obj, 8 * j, &y);
        rc |= wr_call(h, obj, 8 * i, y);
        rc |= wr_call(h, obj, 8 * j, x);
    }
    if (rc || h->fail) {
        fprintf(stderr, "spsketch: a check failed\n");
        exit(1);
    }
    if (h == cur_tx) { /* the commit */
        h->wl = h->wl0;
        h->active = 0;
        commits++;
    }
    LOOP_TAIL
}

NOINLINE uint64_t loop_txn(txn_pool *p, txn_obj *arr, uint64_t n, unsigned size, uint64_t *seed,
                         uint64_t *ns)
{
    LOOP_HEAD
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc) {
        fprintf(stderr, "spsketch: txn_begin: %s\n", txn_pool_strerror(rc));
        exit(1);
    }
    for (unsigned w = 0; w < size; w++) {
        uint64_t i = pick(seed, n), j = pick(seed, n), x = 0, y = 0;
        rc |= txn_read_u64(tx, arr, 8 * i, &x);
        rc |= txn_read_u64(tx, arr, 8 * j, &y);
        rc |= txn_write_u64(tx, arr, 8 * i, y);
        rc |= txn_write_u64(tx, arr, 8 * j, x);
    }
    if (rc || (rc = txn_commit(tx))) {
        txn_abort(tx);
        fprintf(stderr, "spsketch: txn: %s\n", txn_pool_strerror(rc));
        exit(1);
    }
    LOOP_TAIL
}

static int permutation(const uint64_t *a, uint64_t n)
{
    uint8_t *seen = calloc(n, 1);
    int ok = seen != NULL;
    for (uint64_t i = 0; ok && i < n; i++)
        ok = a[i] < n && !seen[a[i]]++;
    free(seen);
    return ok;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int k)
{
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

enum { RAW, PAD16, PAD32, PAD48, FLAG, CALL, TLS, TXN, LINES, MAX_ROUNDS = 64 };
static const char *const line_name[LINES] = {"raw",  "pad16", "pad32", "pad48",
                                             "flag", "call",  "tls",   "txn"};

/* The array of the txn line: one object of n words in a pool. */
static txn_pool *make_pool(uint64_t n, txn_obj **arr, char *name, size_t len)
{
    txn_pool_opts o = {.size = 16 * n + ((size_t)128 << 20), .root_size = 64, .threads = 4};
    snprintf(name, len, "pmtx-spsketch-%d.pool", (int)getpid());
    txn_pool *p;
    txn *tx;
    int rc = txn_pool_create(name, "spsketch", &o, &p);
    if (!rc && !(rc = txn_begin(p, &tx)) && (rc = txn_alloc(tx, 8 * n, arr)))
        txn_abort(tx);
    else if (!rc)
        rc = txn_commit(tx);
    uint64_t buf[1024];
    for (uint64_t at = 0; !rc && at < n; at += 1024) {
        uint64_t k = n - at < 1024 ? n - at : 1024;
        for (uint64_t i = 0; i < k; i++)
            buf[i] = at + i;
        if ((rc = txn_begin(p, &tx)))
            break;
        if ((rc = txn_write(tx, *arr, 8 * at, buf, 8 * k)))
            txn_abort(tx);
        else
            rc = txn_commit(tx);
    }
    if (rc) {
        fprintf(stderr, "spsketch: the txn line's pool: %s\n", txn_pool_strerror(rc));
        exit(1);
    }
    return p;
}

static int pool_permutation(txn_pool *p, txn_obj *arr, uint64_t n)
{
    uint64_t *a = malloc(8 * n);
    txn *tx;
    int ok = a && !txn_begin(p, &tx);
    if (ok) {
        ok = !txn_read(tx, arr, 0, a, 8 * n);
        txn_abort(tx);
    }
    ok = ok && permutation(a, n);
    free(a);
    return ok;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"keys", 1, 0, 'k'}, {"sizes", 1, 0, 's'},
                                         {"seconds", 1, 0, 't'}, {"rounds", 1, 0, 'r'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k': cfg.keys = strtoull(optarg, NULL, 10); break;
        case 't': cfg.seconds = atof(optarg); break;
        case 'r': cfg.rounds = atoi(optarg); break;
        case 's': {
            cfg.nsizes = 0;
            for (char *p = optarg; *p && cfg.nsizes < 16;) {
                cfg.sizes[cfg.nsizes++] = (unsigned)strtoul(p, &p, 10);
                if (*p == ',')
                    p++;
            }
            break;
        }
        default:
            fprintf(stderr, "usage: spsketch [--keys N] [--sizes 1,4,16,64] [--seconds T] "
                            "[--rounds R]\n");
            return 2;
        }
    }
    uint64_t n = cfg.keys;
    if (n < 2 || !cfg.nsizes || cfg.rounds < 1 || cfg.rounds > MAX_ROUNDS || cfg.seconds <= 0) {
        fprintf(stderr, "spsketch: bad arguments (rounds 1 to %d)\n", MAX_ROUNDS);
        return 2;
    }
    for (unsigned k = 0; k < cfg.nsizes; k++)
        if (!cfg.sizes[k] || 4 * cfg.sizes[k] + 2 > LOG_WORDS) {
            fprintf(stderr, "spsketch: size %u: 1 to %u swaps\n", cfg.sizes[k],
                    (LOG_WORDS - 2) / 4);
            return 2;
        }
    char path[64], pool_name[64];
    snprintf(path, sizeof path, "/dev/shm/pmtx-spsketch-%d", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)(8 * n))) {
        perror("spsketch: the array's file");
        return 1;
    }
    uint64_t *a = mmap(NULL, 8 * n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    unlink(path);
    if (a == MAP_FAILED) {
        perror("spsketch: mmap");
        return 1;
    }
    for (uint64_t i = 0; i < n; i++)
        a[i] = i;
    txn_obj *arr;
    txn_pool *p = make_pool(n, &arr, pool_name, sizeof pool_name);
    static uint64_t log[LOG_WORDS];
    static double rate[LINES][MAX_ROUNDS], ratio[LINES][MAX_ROUNDS];
    uint64_t seed = 0x9e3779b97f4a7c15ull, ns = 0, txs = 0;
    for (unsigned k = 0; k < cfg.nsizes; k++) {
        unsigned size = cfg.sizes[k];
        for (int r = 0; r < cfg.rounds; r++) {
            for (int l = 0; l < LINES; l++) {
                switch (l) {
                case RAW: txs = loop_raw(a, n, size, &seed, &ns); break;
                case PAD16: txs = loop_pad16(a, n, size, &seed, &ns); break;
                case PAD32: txs = loop_pad32(a, n, size, &seed, &ns); break;
                case PAD48: txs = loop_pad48(a, n, size, &seed, &ns); break;
                case FLAG: txs = loop_flag(a, n, size, &seed, &ns, log); break;
                case CALL: txs = loop_call(a, n, size, &seed, &ns, log); break;
                case TLS: txs = loop_tls(a, n, size, &seed, &ns, log); break;
                default: txs = loop_txn(p, arr, n, size, &seed, &ns); break;
                }
                report(line_name[l], n, size, txs, ns);
                rate[l][r] = (double)txs * size * 1e9 / (double)ns;
            }
            for (int l = 0; l < LINES; l++)
                ratio[l][r] = rate[l][r] / rate[RAW][r];
        }
        printf("# S = %u, %d rounds, median Mswaps/s (median ratio to raw):", size, cfg.rounds);
        for (int l = 0; l < LINES; l++) {
            double m = median(rate[l], cfg.rounds) / 1e6, q = median(ratio[l], cfg.rounds);
            printf(" %s %.2f (%.2f)", line_name[l], m, q);
        }
        printf("\n");
    }
    int ok = permutation(a, n) && pool_permutation(p, arr, n);
    munmap(a, 8 * n);
    txn_pool_close(p);
    char pool_path[4096];
    if (!txn_pool_path(pool_name, pool_path, sizeof pool_path))
        unlink(pool_path);
    if (!ok) {
        fprintf(stderr, "spsketch: an array is no longer a permutation\n");
        return 1;
    }
    return commits ? 0 : 1;
}
