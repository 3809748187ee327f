/* array.c - the paper's Array and Array-RAW microbenchmarks on Google
 * Benchmark (bench/gbench.h), written once against txn.h and built as
 * build/bin/array-<engine>.
 *
 * The pool holds N slots of S u64 each, every slot an object of its own,
 * found from the root: root -> directory -> index pages of PAGE_SLOTS
 * handles -> slots. One iteration is one transaction over a random run of
 * RUN contiguous slots: the first W of them read-write, the others read
 * integer by integer through txn_open(TXN_RO) (the paper's hand-optimised
 * direct read). The W read-write slots are first opened with
 * txn_open(TXN_RW), which lets batched-logging engines log them under one
 * fence (TXN_LOG_BATCH=0: the paper's log at each write), then updated:
 *   Array     a read-write slot is txn_read whole into a buffer, incremented
 *             there and written back with one txn_write.
 *   ArrayRAW  each integer of a read-write slot is txn_read_u64 and
 *             txn_write_u64'd + 1 in place: read-after-write at every step.
 * After each run of a benchmark the sum of all integers must equal the
 * increments committed since the array was made; otherwise the benchmark
 * fails and the program exits nonzero, so a wrong engine posts no number.
 *
 * Benchmarks run slot size by slot size; each size gets its own pool in
 * $TXN_POOL_DIR (one pool at a time, created on first use, removed when the
 * next size starts and at exit) so that the pool is only as big as the
 * array it holds. Building the array is not timed. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gbench.h"
#include "txn.h"

#define RUN 20            /* slots per transaction */
#define PAGE_SLOTS 1024u  /* slot handles per index page: 8 KiB objects */
#define MAX_INTS 512u     /* largest slot: 4 KiB */
#define MAX_LIST 32
#define DEFAULT_SLOTS 10000000ull /* as in the paper */

/* The root object. */
struct array_root {
    uint64_t nslots; /* N */
    uint64_t ints;   /* S: u64 per slot */
    txn_obj *dir;    /* ceil(N / PAGE_SLOTS) handles of index pages */
};

/* The array of the open pool (volatile). */
static struct {
    txn_pool *pool;      /* NULL: none open */
    unsigned ints;       /* its S */
    uint64_t nslots;     /* N, the same for every S */
    uint64_t increments; /* committed since it was built */
    char name[96];       /* pool file, relative to $TXN_POOL_DIR */
    char path[4096];     /* the same, to remove it */
} A;

/* What a transaction read, kept so the reads cannot be optimised away. */
static volatile uint64_t read_sink;

/* The error of a txn_open that returned NULL. */
static int open_error(txn *tx)
{
    int rc = txn_last_error(tx);
    return rc ? rc : TXN_E_INVAL;
}

/* ---- the persistent index */

static txn_obj *const *open_dir(txn *tx, txn_pool *p)
{
    const struct array_root *r = txn_open(tx, txn_root(p), TXN_RO);
    return r ? txn_open(tx, r->dir, TXN_RO) : NULL;
}

static uint64_t npages(uint64_t nslots)
{
    return (nslots + PAGE_SLOTS - 1) / PAGE_SLOTS;
}

/* One transaction: index page `pg` and its slots, all zero. */
static int build_page(txn_pool *p, uint64_t pg, txn_obj **page)
{
    static txn_obj *slots[PAGE_SLOTS];
    uint64_t n = A.nslots - pg * PAGE_SLOTS;
    if (n > PAGE_SLOTS)
        n = PAGE_SLOTS;
    txn *tx;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    rc = txn_alloc(tx, n * sizeof *slots, page);
    for (uint64_t i = 0; !rc && i < n; i++)
        rc = txn_alloc(tx, A.ints * sizeof(uint64_t), &slots[i]);
    if (!rc)
        rc = txn_write(tx, *page, 0, slots, n * sizeof *slots);
    if (rc) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

/* Build the array: pages of slots, PAGE_SLOTS objects per transaction,
 * then the directory and the root in one last transaction. */
static int build(txn_pool *p)
{
    uint64_t np = npages(A.nslots);
    txn_obj **pages = malloc(np * sizeof *pages);
    if (!pages)
        return TXN_E_NOMEM;
    int rc = 0;
    for (uint64_t pg = 0; !rc && pg < np; pg++)
        rc = build_page(p, pg, &pages[pg]);
    txn *tx;
    if (!rc && !(rc = txn_begin(p, &tx))) {
        struct array_root r = {A.nslots, A.ints, NULL};
        rc = txn_alloc(tx, np * sizeof *pages, &r.dir);
        if (!rc)
            rc = txn_write(tx, r.dir, 0, pages, np * sizeof *pages);
        if (!rc)
            rc = txn_write(tx, txn_root(p), 0, &r, sizeof r);
        if (rc)
            txn_abort(tx);
        else
            rc = txn_commit(tx);
    }
    free(pages);
    return rc;
}

/* Sum of every integer of the array, page by page. */
static int array_sum(uint64_t *out)
{
    uint64_t sum = 0, np = npages(A.nslots);
    for (uint64_t pg = 0; pg < np; pg++) {
        txn *tx;
        int rc = txn_begin(A.pool, &tx);
        if (rc)
            return rc;
        txn_obj *const *dir = open_dir(tx, A.pool);
        txn_obj *const *page = dir ? txn_open(tx, dir[pg], TXN_RO) : NULL;
        uint64_t n = A.nslots - pg * PAGE_SLOTS;
        for (uint64_t i = 0; page && i < n && i < PAGE_SLOTS; i++) {
            const uint64_t *v = txn_open(tx, page[i], TXN_RO);
            if (!v) {
                page = NULL;
                break;
            }
            for (unsigned j = 0; j < A.ints; j++)
                sum += v[j];
        }
        if (!page) {
            rc = open_error(tx);
            txn_abort(tx);
            return rc;
        }
        if ((rc = txn_commit(tx)))
            return rc;
    }
    *out = sum;
    return 0;
}

/* ---- the pool: one per slot size, one at a time */

static void remove_pool(void)
{
    if (A.pool) {
        txn_pool_close(A.pool);
        A.pool = NULL;
    }
    if (A.path[0])
        unlink(A.path);
    A.path[0] = '\0';
}

static void on_signal(int sig)
{
    if (A.path[0])
        unlink(A.path); /* async-signal-safe; the pool is not closed */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Room for N slots of `ints` integers: payload plus a quarter for size
 * class rounding, 96 bytes of headers (a cow wrapper, a PMDK header) and
 * the slot's index entry, plus logs and slack. $ARRAY_POOL_MB overrides. */
static size_t pool_size(unsigned ints)
{
    const char *mb = getenv("ARRAY_POOL_MB");
    if (mb && *mb)
        return (size_t)strtoull(mb, NULL, 10) << 20;
    size_t payload = ints * sizeof(uint64_t);
    size_t bytes = A.nslots * (payload + payload / 4 + 96 + 8) + (64u << 20);
    return (bytes + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
}

/* Make the pool hold an array of `ints` integers per slot. */
static int array_ready(unsigned ints)
{
    if (A.pool && A.ints == ints)
        return 0;
    remove_pool();
    snprintf(A.name, sizeof A.name, "pmtx-array-%s-%d-s%u.pool", txn_engine_name(),
             (int)getpid(), ints);
    txn_pool_opts o = {.size = pool_size(ints),
                       .root_size = sizeof(struct array_root),
                       .threads = 4};
    int rc = txn_pool_path(A.name, A.path, sizeof A.path);
    if (!rc)
        rc = txn_pool_create(A.name, "array", &o, &A.pool);
    if (rc) {
        A.path[0] = '\0'; /* removed by the failed create, or not ours */
        A.pool = NULL;
        return rc;
    }
    A.ints = ints;
    A.increments = 0;
    if ((rc = build(A.pool)))
        remove_pool();
    return rc;
}

/* ---- one transaction */

static int bump(txn *tx, txn_obj *o)
{
    uint64_t buf[MAX_INTS];
    size_t n = A.ints * sizeof *buf;
    int rc = txn_read(tx, o, 0, buf, n);
    if (rc)
        return rc;
    for (unsigned j = 0; j < A.ints; j++)
        buf[j]++;
    return txn_write(tx, o, 0, buf, n);
}

static int bump_raw(txn *tx, txn_obj *o)
{
    for (unsigned j = 0; j < A.ints; j++) {
        uint64_t v;
        int rc = txn_read_u64(tx, o, j * sizeof v, &v);
        if (!rc)
            rc = txn_write_u64(tx, o, j * sizeof v, v + 1);
        if (rc)
            return rc;
    }
    return 0;
}

static int read_slot(txn *tx, txn_obj *o, uint64_t *seen)
{
    const uint64_t *v = txn_open(tx, o, TXN_RO);
    if (!v)
        return open_error(tx);
    for (unsigned j = 0; j < A.ints; j++)
        *seen += v[j];
    return 0;
}

/* Slots first .. first+RUN-1, the first `w` read-write. */
/* not inlined: profilers count one transaction by its calls */
static __attribute__((noinline)) int one_tx(uint64_t first, unsigned w, int raw, uint64_t *seen)
{
    txn *tx;
    int rc = txn_begin(A.pool, &tx);
    if (rc)
        return rc;
    txn_obj *const *dir = open_dir(tx, A.pool);
    txn_obj *const *page = NULL;
    txn_obj *rw[RUN];
    uint64_t pg = UINT64_MAX;
    for (unsigned k = 0; dir && k < RUN && !rc; k++) {
        uint64_t i = first + k;
        if (i / PAGE_SLOTS != pg) {
            pg = i / PAGE_SLOTS;
            if (!(page = txn_open(tx, dir[pg], TXN_RO)))
                break;
        }
        txn_obj *o = page[i % PAGE_SLOTS];
        if (k >= w)
            rc = read_slot(tx, o, seen);
        else if (!txn_open(tx, rw[k] = o, TXN_RW))
            rc = open_error(tx);
    }
    for (unsigned k = 0; k < w && dir && page && !rc; k++)
        rc = raw ? bump_raw(tx, rw[k]) : bump(tx, rw[k]);
    if (!rc && (!dir || !page))
        rc = open_error(tx);
    if (rc) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

/* xorshift64*: the start of each transaction's run */
static uint64_t next_first(void)
{
    static uint64_t x = 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return (x * 0x2545f4914f6cdd1dull >> 11) % (A.nslots - RUN + 1);
}

/* ---- the benchmarks */

static void fail(gbench_state *st, const char *what, const char *why)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s", what, why);
    fprintf(stderr, "array-%s: FAILED (S=%u): %s\n", txn_engine_name(), A.ints, msg);
    gbench_skip_with_error(st, msg);
}

/* Fail loudly unless the array holds exactly the increments committed. */
static void verify(gbench_state *st)
{
    uint64_t sum;
    int rc = array_sum(&sum);
    if (rc) {
        fail(st, "checksum", txn_strerror(rc));
    } else if (sum != A.increments) {
        char why[128];
        snprintf(why, sizeof why, "sum of the array %llu, increments committed %llu",
                 (unsigned long long)sum, (unsigned long long)A.increments);
        fail(st, "checksum mismatch", why);
        A.increments = sum; /* judge the next benchmarks on their own */
    }
}

static void run(gbench_state *st, int raw)
{
    unsigned ints = (unsigned)gbench_range(st, 0), w = (unsigned)gbench_range(st, 1);
    int rc = array_ready(ints);
    if (rc) {
        fail(st, "building the array", txn_pool_strerror(rc));
        return;
    }
    char label[64];
    snprintf(label, sizeof label, "%s PDOM%d", txn_engine_name(), txn_pdom());
    gbench_label(st, label);
    txn_stats s0, s1;
    uint64_t seen = 0, done = 0;
    txn_stats_get(&s0);
    while (gbench_keep_running(st)) {
        if ((rc = one_tx(next_first(), w, raw, &seen))) {
            fail(st, "transaction", txn_strerror(rc));
            break;
        }
        done++;
    }
    txn_stats_get(&s1);
    read_sink = seen;
    A.increments += done * w * ints;
    gbench_counter(st, "barriers_per_tx", (double)(s1.barriers - s0.barriers),
                   GBENCH_PER_ITERATION);
    gbench_counter(st, "lines_per_tx", (double)(s1.lines_flushed - s0.lines_flushed),
                   GBENCH_PER_ITERATION);
    gbench_counter(st, "log_bytes_per_tx", (double)(s1.log_bytes - s0.log_bytes),
                   GBENCH_PER_ITERATION);
    if (!gbench_error_occurred(st))
        verify(st);
}

static void bench_array(gbench_state *st, void *unused)
{
    (void)unused;
    run(st, 0);
}

static void bench_array_raw(gbench_state *st, void *unused)
{
    (void)unused;
    run(st, 1);
}

/* ---- the command line */

static void usage(void)
{
    printf("array-%s: the Array and ArrayRAW benchmarks on the %s engine.\n"
           "  --array_slots=N         slots in the array (default $ARRAY_SLOTS, else %llu)\n"
           "  --array_sizes=S,...     integers per slot to run (default 1,4,16,64)\n"
           "  --array_wslots=W,...    read-write slots of the %d (default 0,5,10,15,20)\n"
           "Environment: TXN_PDOM, TXN_POOL_DIR (the pools), ARRAY_POOL_MB (pool size).\n\n",
           txn_engine_name(), txn_engine_name(), DEFAULT_SLOTS, RUN);
}

/* "1,4,16" into v[]; returns the count, or 0 if malformed or a value is
 * outside [lo, hi]. */
static size_t parse_list(const char *s, unsigned lo, unsigned hi, int64_t *v)
{
    size_t n = 0;
    for (;;) {
        char *end;
        unsigned long x = strtoul(s, &end, 10);
        if (end == s || x < lo || x > hi || n == MAX_LIST)
            return 0;
        v[n++] = (int64_t)x;
        if (*end == '\0')
            return n;
        if (*end != ',')
            return 0;
        s = end + 1;
    }
}

static int parse_slots(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long x = strtoull(s, &end, 10);
    if (end == s || *end || x < RUN || x > (1ull << 40))
        return -1;
    *out = x;
    return 0;
}

/* Take our flags out of argv (Google Benchmark rejects unknown ones). */
static int parse_args(int *argc, char **argv, int64_t *sizes, size_t *nsizes, int64_t *ws,
                      size_t *nws)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        int bad = 0;
        if (!strncmp(a, "--array_slots=", 14))
            bad = parse_slots(a + 14, &A.nslots);
        else if (!strncmp(a, "--array_sizes=", 14))
            bad = !(*nsizes = parse_list(a + 14, 1, MAX_INTS, sizes));
        else if (!strncmp(a, "--array_wslots=", 15))
            bad = !(*nws = parse_list(a + 15, 0, RUN, ws));
        else
            argv[out++] = argv[i];
        if (bad) {
            fprintf(stderr, "array: bad argument %s (see --help)\n", a);
            return -1;
        }
    }
    *argc = out;
    argv[out] = NULL;
    return 0;
}

static void register_all(const int64_t *sizes, size_t nsizes, const int64_t *ws, size_t nws)
{
    static const char *const names[] = {"slot", "wslots"};
    /* size by size, so that each size builds its pool once */
    for (size_t i = 0; i < nsizes; i++)
        for (int raw = 0; raw <= 1; raw++) {
            gbench *b = raw ? gbench_register("ArrayRAW", bench_array_raw, NULL)
                            : gbench_register("Array", bench_array, NULL);
            for (size_t j = 0; j < nws; j++)
                gbench_args(b, (int64_t[]){sizes[i], ws[j]}, 2);
            gbench_arg_names(b, names, 2);
        }
}

static void add_context(void)
{
    char v[32];
    gbench_context("engine", txn_engine_name());
    snprintf(v, sizeof v, "%d", txn_pdom());
    gbench_context("pdom", v);
    snprintf(v, sizeof v, "%u", txn_pdom_ns());
    gbench_context("pdom_ns", v);
    gbench_context("flush", txn_flush_name());
    snprintf(v, sizeof v, "%llu", (unsigned long long)A.nslots);
    gbench_context("array_slots", v);
}

int main(int argc, char **argv)
{
    int64_t sizes[MAX_LIST] = {1, 4, 16, 64}, ws[MAX_LIST] = {0, 5, 10, 15, 20};
    size_t nsizes = 4, nws = 5;
    const char *env = getenv("ARRAY_SLOTS");
    A.nslots = DEFAULT_SLOTS;
    if (env && *env && parse_slots(env, &A.nslots)) {
        fprintf(stderr, "array: bad ARRAY_SLOTS=%s (at least %d)\n", env, RUN);
        return 1;
    }
    if (parse_args(&argc, argv, sizes, &nsizes, ws, &nws))
        return 1;
    fprintf(stderr, "# engine %s, PDOM %d (%u ns per barrier), flush %s, %llu slots\n",
            txn_engine_name(), txn_pdom(), txn_pdom_ns(), txn_flush_name(),
            (unsigned long long)A.nslots);
    add_context();
    register_all(sizes, nsizes, ws, nws);
    atexit(remove_pool);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    return gbench_main(argc, argv, usage);
}
