/* ycsb.c - the YCSB driver of the Masstree: ycsb-<engine>.
 *
 *   ycsb-<engine> [--workload a|b|c|e] [--dist uniform|zipf] [--keys N]
 *                 [--threads T] [--ops M] [--seed S] [--check] [--op-times]
 *                 [--batch B]
 *
 * Loads N keys (T threads), then T threads run M operations each:
 *   a  50% get, 50% update      b  95% get, 5% update
 *   c  100% get                 e  95% scan of 10 keys, 5% insert
 * Keys are 8-byte strings, chosen uniformly or by a scrambled Zipfian
 * (constant 0.99, as YCSB). A value is a pointer to a 32-byte buffer; an
 * update or insert points its key at a new buffer (none is used twice in
 * a run), a get copies the buffer. With the nodes in the pool
 * (ycsb-incll) the buffers are in the pool too, durable with the epoch
 * that wrote them (inpool/ycsb_inpool.c); elsewhere they are in DRAM (the
 * transient tree's, and the mirror store's, whose mirrors keep the
 * pointers only: mirror/ycsb_mirror.c).
 * --check also finds every value's buffer whole (one byte repeated).
 * ycsb-none runs the transient tree (no txn.h at all); the other engines
 * the tree on txn.h in a pool under $TXN_POOL_DIR (default /dev/shm),
 * removed at the end. Prints one line for people and one JSON line.
 * --check verifies the tree afterwards (every key, a full scan).
 * --op-times times every operation of the run (two clock reads each,
 * counted in) and prints the mean time of a get, an update (its new
 * buffer and its put), a scan and an insert: where one engine's run is
 * slower than another's.
 * --restart (txn.h storage) closes tree and pool after the run and times
 * opening them again: the pool's recovery and the tree's rebuild from its
 * persistent nodes (the time to the first operation after a restart).
 * --batch B (ycsb-incll): up to B puts of a thread share one transaction
 * of the epoch (mt_opts.batch; default 32, 1: a transaction per put),
 * as the paper's threads, which enter no transaction per operation.
 * ycsb-incll also prints what its InCLLs did in the run (incll_stats):
 * updates, inserts and removes absorbed by an InCLL, nodes logged to the
 * external log, epochs, and nodes logged per epoch.
 *
 * --crash-recovery N (ycsb-incll): the worst case of recovery. A child
 * process loads the keys, ends the epoch (txn_sync), and its threads
 * update random keys in one long epoch (no epoch thread: TXN_EPOCH_MS=0)
 * until N nodes are in the epoch's external log; then it dies (SIGKILL)
 * before the epoch ends. The parent times opening the pool (the replay of
 * the external log), opening the tree, and the first get after it; then
 * checks every key against the loaded value (the failed epoch's updates
 * must all be gone, each node recovered at its first access) and times a
 * clean open of the same pool for comparison.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ycsb.h"

#define SCAN_LEN 10

struct ycsb_cfg cfg = {'a', 0, 2, 0, 0, 0, 1000000, 1000000, 0, 1, 32};

mt_tree *tree;
txn_pool *pool;
pthread_barrier_t start_line;
char made_pool[256];
static char *load_vals;
static _Atomic uint64_t s_barriers, s_lines, s_logbytes, s_found, s_inserted;
/* --op-times: nanoseconds and counts per kind of operation */
enum { OP_GET, OP_UPDATE, OP_SCAN, OP_INSERT, OP_KINDS };
static const char *const op_name[OP_KINDS] = {"get", "update", "scan", "insert"};
static _Atomic uint64_t s_op_ns[OP_KINDS], s_op_n[OP_KINDS];

double clock_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

void pool_unlink(const char *path)
{
    char full[600];
    if (txn_pool_path(path, full, sizeof full) == 0)
        unlink(full);
}

uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double rnd01(uint64_t *s)
{
    return (double)(rnd(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* scrambled, so loading order is random */
void key_of(uint64_t i, uint8_t k[8])
{
    uint64_t x = mix64(i + 1);
    memcpy(k, &x, 8);
}

/* ---- scrambled Zipfian over [0, n) (Gray et al., as YCSB) */
static struct {
    double theta, alpha, zetan, eta, half_pow;
    uint64_t n;
} zf;

static void zipf_init(uint64_t n)
{
    double sum = 0;
    zf.theta = 0.99;
    zf.n = n;
    for (uint64_t i = 1; i <= n; i++)
        sum += 1.0 / pow((double)i, zf.theta);
    zf.zetan = sum;
    zf.alpha = 1.0 / (1.0 - zf.theta);
    zf.half_pow = pow(0.5, zf.theta);
    double zeta2 = 1.0 + zf.half_pow;
    zf.eta = (1.0 - pow(2.0 / (double)n, 1.0 - zf.theta)) / (1.0 - zeta2 / zf.zetan);
}

static uint64_t zipf_next(uint64_t *s)
{
    double u = rnd01(s), uz = u * zf.zetan;
    uint64_t r;
    if (uz < 1.0)
        r = 0;
    else if (uz < 1.0 + zf.half_pow)
        r = 1;
    else
        r = (uint64_t)((double)zf.n * pow(zf.eta * u - zf.eta + 1.0, zf.alpha));
    if (r >= zf.n)
        r = zf.n - 1;
    return mix64(r ^ 0x9e3779b97f4a7c15ULL) % zf.n; /* scramble */
}

static uint64_t pick(uint64_t *s)
{
    return cfg.zipf ? zipf_next(s) : rnd(s) % cfg.keys;
}

void fail(const char *what, int rc)
{
    fprintf(stderr, "ycsb: %s: %s\n", what, txn_pool_strerror(rc));
    if (made_pool[0]) /* a pool can take gigabytes of /dev/shm */
        pool_unlink(made_pool);
    exit(1);
}

/* ---- load */
static void *load_thread(void *arg)
{
    struct range *r = arg;
    for (size_t i = r->from; i < r->to; i++) {
        uint8_t k[8];
        char *v = new_val(load_vals, i, (int)(i & 0xff));
        key_of(i, k);
        int rc = mt_put(tree, k, 8, (uint64_t)v);
        if (rc < 0)
            fail("load", rc);
    }
    int rc = mt_flush(tree); /* before the thread ends */
    if (rc)
        fail("load", rc);
    return NULL;
}

static void run_threads(void *(*fn)(void *), void *args, size_t argsize);

void load_keys(void *(*fn)(void *))
{
    struct range rg[cfg.threads];
    for (int t = 0; t < cfg.threads; t++)
        rg[t] = (struct range){cfg.keys * (size_t)t / (size_t)cfg.threads,
                               cfg.keys * (size_t)(t + 1) / (size_t)cfg.threads};
    run_threads(fn, rg, sizeof rg[0]);
}

static void run_threads(void *(*fn)(void *), void *args, size_t argsize)
{
    pthread_t th[cfg.threads];
    for (int t = 0; t < cfg.threads; t++)
        if (pthread_create(&th[t], NULL, fn, (char *)args + t * argsize))
            fail("pthread_create", TXN_E_NOMEM);
    for (int t = 0; t < cfg.threads; t++)
        pthread_join(th[t], NULL);
}

/* ---- run */
static int scan_cb(const void *key, size_t len, uint64_t val, void *arg)
{
    struct worker *w = arg;
    (void)key;
    (void)len;
    uint64_t x;
    memcpy(&x, (const void *)val, 8);
    w->sink += x;
    return 0;
}

static void *run_thread(void *arg)
{
    struct worker *w = arg;
    uint64_t s = mix64(cfg.seed * 1000003 + (uint64_t)w->id) | 1, found = 0, ins = 0;
    uint64_t op_n[OP_KINDS] = {0};
    double op_s[OP_KINDS] = {0};
    size_t next_buf = 0;
    unsigned upd = cfg.workload == 'a' ? 50 : cfg.workload == 'b' ? 5 : 0;
    pthread_barrier_wait(&start_line);
    txn_stats_reset();
    store_stats_reset();
    w->start = now();
    for (size_t j = 0; j < cfg.ops; j++) {
        uint8_t k[8], buf[VAL_BYTES];
        unsigned dice = (unsigned)(rnd(&s) % 100), kind;
        if (cfg.workload == 'e') {
            kind = dice < 5 ? OP_INSERT : OP_SCAN; /* an insert takes a new key */
            key_of(kind == OP_INSERT ? cfg.keys + (uint64_t)w->id + (uint64_t)cfg.threads * ins++
                                     : pick(&s),
                   k);
        } else {
            kind = dice < upd ? OP_UPDATE : OP_GET;
            key_of(pick(&s), k);
        }
        double t0 = cfg.op_times ? now() : 0;
        if (kind == OP_INSERT || kind == OP_UPDATE) {
            char *v = new_val(w->vals, next_buf++, (int)(j & 0xff));
            int rc = mt_put(tree, k, 8, (uint64_t)v);
            if (rc < 0)
                fail(kind == OP_INSERT ? "insert" : "update", rc);
        } else if (kind == OP_SCAN) {
            long n = mt_scan(tree, k, 8, SCAN_LEN, scan_cb, w);
            if (n < 0)
                fail("scan", (int)n);
            found += n > 0;
        } else {
            uint64_t v;
            if (mt_get(tree, k, 8, &v) == 0) {
                memcpy(buf, (const void *)v, VAL_BYTES);
                w->sink += buf[0];
                found++;
            }
        }
        if (cfg.op_times) {
            op_s[kind] += now() - t0;
            op_n[kind]++;
        }
    }
    int rc = mt_flush(tree); /* the last shared transaction: in the run */
    if (rc)
        fail("commit", rc);
    w->end = now();
    txn_stats st;
    txn_stats_get(&st);
    atomic_fetch_add(&s_barriers, st.barriers);
    atomic_fetch_add(&s_lines, st.lines_flushed);
    atomic_fetch_add(&s_logbytes, st.log_bytes);
    atomic_fetch_add(&s_found, found);
    atomic_fetch_add(&s_inserted, ins);
    for (int i = 0; i < OP_KINDS; i++) {
        atomic_fetch_add(&s_op_ns[i], (uint64_t)(op_s[i] * 1e9));
        atomic_fetch_add(&s_op_n[i], op_n[i]);
    }
    store_stats_add(w->id == 0);
    return NULL;
}

int count_cb(const void *key, size_t len, uint64_t val, void *arg)
{
    (void)key, (void)len, (void)val;
    ++*(size_t *)arg;
    return 0;
}

static int check(void)
{
    size_t n = 0;
    for (size_t i = 0; i < cfg.keys; i++) {
        uint8_t k[8];
        uint64_t v;
        key_of(i, k);
        if (mt_get(tree, k, 8, &v)) {
            fprintf(stderr, "ycsb: check: key %zu missing\n", i);
            return 1;
        }
        const uint8_t *b = (const uint8_t *)v; /* a buffer is filled with one byte */
        for (unsigned j = 1; j < VAL_BYTES; j++)
            if (b[j] != b[0]) {
                fprintf(stderr, "ycsb: check: the value of key %zu is torn\n", i);
                return 1;
            }
    }
    mt_scan(tree, NULL, 0, (size_t)-1, count_cb, &n);
    if (n != cfg.keys + s_inserted) {
        fprintf(stderr, "ycsb: check: scan saw %zu keys, expected %zu\n", n,
                cfg.keys + (size_t)s_inserted);
        return 1;
    }
    return 0;
}

static void usage(const char *me)
{
    fprintf(stderr,
            "usage: %s [--workload a|b|c|e] [--dist uniform|zipf] [--keys N] [--threads T]"
            " [--ops M] [--seed S] [--check] [--restart] [--op-times] [--batch B]"
            " [--crash-recovery N]\n",
            me);
    exit(2);
}

/* A flag's number: decimal digits only, within [lo, hi]; otherwise a
 * clear error (exit 2), not a number strtoull made up. */
static uint64_t num(const char *flag, const char *s, uint64_t lo, uint64_t hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "ycsb: --%s %s: not a whole number from %llu to %llu\n", flag, s,
                (unsigned long long)lo, (unsigned long long)hi);
        exit(2);
    }
    return v;
}

static void parse(int argc, char **argv)
{
    static const struct option opts[] = {
        {"workload", required_argument, 0, 'w'}, {"dist", required_argument, 0, 'd'},
        {"keys", required_argument, 0, 'k'},     {"threads", required_argument, 0, 't'},
        {"ops", required_argument, 0, 'o'},      {"seed", required_argument, 0, 's'},
        {"check", no_argument, 0, 'c'},          {"restart", no_argument, 0, 'r'},
        {"crash-recovery", required_argument, 0, 'x'}, {"op-times", no_argument, 0, 'p'},
        {"batch", required_argument, 0, 'b'},    {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'w':
            if (strlen(optarg) != 1 || !strchr("abce", optarg[0]))
                usage(argv[0]);
            cfg.workload = optarg[0];
            break;
        case 'd':
            if (strcmp(optarg, "uniform") && strcmp(optarg, "zipf"))
                usage(argv[0]);
            cfg.zipf = !strcmp(optarg, "zipf");
            break;
        case 'k': cfg.keys = num("keys", optarg, 1, (uint64_t)1 << 36); break;
        case 't': cfg.threads = (int)num("threads", optarg, 1, 256); break;
        case 'o': cfg.ops = num("ops", optarg, 1, (uint64_t)1 << 40); break;
        case 's': cfg.seed = num("seed", optarg, 0, UINT64_MAX); break;
        case 'c': cfg.check = 1; break;
        case 'r': cfg.restart = 1; break;
        case 'p': cfg.op_times = 1; break;
        case 'x': cfg.crash_logged = num("crash-recovery", optarg, 1, (uint64_t)1 << 32); break;
        case 'b': cfg.batch = (unsigned)num("batch", optarg, 1, 1u << 20); break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc)
        usage(argv[0]);
    if (cfg.crash_logged && !ycsb_store.crash_recovery) {
        fprintf(stderr, "ycsb: --crash-recovery is for ycsb-incll\n");
        exit(2);
    }
}

/* the pool of a run on txn.h, under a name of this process (path) */
static void make_pool(const char *engine, char *path, size_t cap)
{
    size_t inserts = cfg.workload == 'e' ? cfg.ops * (size_t)cfg.threads / 15 : 0;
    txn_pool_opts po = {.size = ((size_t)128 << 20) + (cfg.keys + inserts) * 64,
                        .threads = (unsigned)cfg.threads + 1};
    po.size += vals_pool_bytes(cfg.keys + cfg.ops * (size_t)cfg.threads);
    snprintf(path, cap, "ycsb-%s-%d.pool", engine, (int)getpid());
    int rc = txn_pool_create(path, "pmtx-ycsb", &po, &pool);
    if (rc)
        fail("pool create", rc);
    snprintf(made_pool, sizeof made_pool, "%s", path);
}

/* Load the keys; seconds. The load is durable before the run: on incll,
 * the global flush of the load's epoch (every line the load wrote) would
 * otherwise land in the run's first epoch, on its memory bandwidth
 * (docs/masstree.md, "The load's epoch"). */
static double load(void)
{
    int rc;
    load_vals = vals_dram(cfg.keys);
    double t0 = now();
    load_keys(load_thread);
    if (pool && (rc = txn_sync(pool)))
        fail("sync", rc);
    return now() - t0;
}

/* The run's threads (w[cfg.threads]); seconds from the first one's start
 * to the last one's end. */
static double run(struct worker *w)
{
    pthread_t th[cfg.threads];
    for (int t = 0; t < cfg.threads; t++)
        w[t] = (struct worker){.id = t, .vals = vals_dram(cfg.ops)};
    pthread_barrier_init(&start_line, NULL, (unsigned)cfg.threads + 1);
    for (int t = 0; t < cfg.threads; t++)
        if (pthread_create(&th[t], NULL, run_thread, &w[t]))
            fail("pthread_create", TXN_E_NOMEM);
    pthread_barrier_wait(&start_line);
    double first = 0, last = 0;
    for (int t = 0; t < cfg.threads; t++) {
        pthread_join(th[t], NULL);
        first = t && first < w[t].start ? first : w[t].start;
        last = last > w[t].end ? last : w[t].end;
    }
    return last - first;
}

/* --restart: close tree and pool, open them again; seconds */
static double restart(const char *path, mt_opts *mo)
{
    int rc;
    mt_close(tree);
    txn_pool_close(pool);
    double t0 = now();
    if ((rc = txn_pool_open(path, "pmtx-ycsb", &pool)))
        fail("pool open", rc);
    mo->pool = pool;
    if ((rc = mt_open(mo, &tree)))
        fail("rebuild", rc);
    return now() - t0;
}

/* --op-times: the "# op times" line, and the JSON fields into extra */
static size_t op_times_report(char *extra, size_t cap)
{
    size_t xn = 0;
    printf("# op times (mean, each timed by two clock reads):");
    for (int i = 0; i < OP_KINDS; i++) {
        if (!s_op_n[i])
            continue;
        double ns = (double)s_op_ns[i] / (double)s_op_n[i];
        printf(" %s %.1f ns (%llu)", op_name[i], ns, (unsigned long long)s_op_n[i]);
        xn += (size_t)snprintf(extra + xn, cap - xn, ",\"%s_ns\":%.1f", op_name[i], ns);
    }
    printf("\n");
    return xn;
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    const char *engine = txn_engine_name();
    /* none keeps nothing: its line is the transient tree (MT+) */
    int transient = !strcmp(engine, "none");
    const char *storage = transient ? "transient" : ycsb_store.name;
    char path[256] = "";
    printf("# engine %s pdom %d (%u ns) flush %s storage %s\n", engine, txn_pdom(),
           txn_pdom_ns(), txn_flush_name(), storage);
    if (cfg.crash_logged)
        return crash_recovery(engine);
    if (!transient)
        make_pool(engine, path, sizeof path);
    mt_opts mo = {.pool = pool, .batch = cfg.batch};
    int rc = mt_create(&mo, &tree);
    if (rc)
        fail("create", rc);
    if (cfg.zipf)
        zipf_init(cfg.keys);
    double load_s = load();
    struct worker w[cfg.threads];
    double run_s = run(w);
    double total = (double)cfg.ops * cfg.threads, mops = total / run_s / 1e6;
    mt_stats ms; /* before a restart: the rebuilt tree counts no splits */
    mt_stats_get(tree, &ms);
    double restart_s = cfg.restart && pool ? restart(path, &mo) : 0;
    int bad = cfg.check ? check() : 0;
    printf("ycsb-%s %c %s: %zu keys, %d threads x %zu ops: %.3f Mops/s "
           "(load %.2f s, run %.2f s; %.2f barriers/op)%s%s\n",
           engine, cfg.workload, cfg.zipf ? "zipf" : "uniform", cfg.keys, cfg.threads, cfg.ops,
           mops, load_s, run_s, (double)s_barriers / total,
           cfg.check ? (bad ? " CHECK FAILED" : " checked") : "",
           restart_s > 0 ? "; restarted" : "");
    if (restart_s > 0)
        printf("# restart: pool open and tree rebuild %.3f s for %llu nodes\n", restart_s,
               (unsigned long long)(ms.leaves + ms.inodes));
    char extra[768] = "";
    size_t xn = cfg.op_times ? op_times_report(extra, sizeof extra) : 0;
    xn += store_stats_report(extra + xn, sizeof extra - xn, total);
    printf("{\"engine\":\"%s\",\"storage\":\"%s\",\"workload\":\"%c\",\"dist\":\"%s\","
           "\"keys\":%zu,\"threads\":%d,\"ops\":%.0f,\"mops\":%.4f,\"load_s\":%.3f,"
           "\"run_s\":%.3f,\"pdom\":%d,\"barriers_per_op\":%.3f,\"lines_per_op\":%.3f,"
           "\"log_bytes_per_op\":%.1f,\"found\":%llu,\"leaves\":%llu,\"inodes\":%llu,"
           "\"splits\":%llu,\"restart_s\":%.4f%s}\n",
           engine, storage, cfg.workload, cfg.zipf ? "zipf" : "uniform", cfg.keys, cfg.threads,
           total, mops, load_s, run_s, txn_pdom(), (double)s_barriers / total,
           (double)s_lines / total, (double)s_logbytes / total, (unsigned long long)s_found,
           (unsigned long long)ms.leaves, (unsigned long long)ms.inodes,
           (unsigned long long)ms.splits, restart_s, extra);
    mt_close(tree);
    for (int t = 0; t < cfg.threads; t++)
        free(w[t].vals);
    free(load_vals);
    if (pool) {
        txn_pool_close(pool);
        pool_unlink(path);
    }
    return bad;
}
