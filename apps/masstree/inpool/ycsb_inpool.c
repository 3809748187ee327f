/* inpool/ycsb_inpool.c - ycsb's half for the in-pool store (ycsb-incll):
 * value buffers in the pool, durable with the epoch that wrote them; the
 * InCLL counters of the run (incll_stats); and --crash-recovery, the
 * external log's worst case (ycsb.h). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "incll.h"
#include "ycsb.h"

const struct ycsb_store ycsb_store = {"incll", 1};

/* the value buffers, a quarter more for blocks left part full */
size_t vals_pool_bytes(size_t n)
{
    return n * VAL_BYTES / 4 * 5;
}

char *vals_dram(size_t n)
{
    (void)n;
    return NULL;
}

#define VAL_BLOCK 16376 /* the largest small block: 16 KiB with its tag */
#define VAL_BATCH 64
__thread struct vals t_vals;

void fill_vals(void)
{
    txn *tx;
    txn_obj *o;
    int rc = mt_flush(tree); /* the thread's shared transaction, if any */
    if (rc || (rc = txn_begin(pool, &tx)))
        fail("value", rc);
    size_t room = (size_t)(t_vals.end - t_vals.next) / VAL_BYTES;
    if (!t_vals.next || t_vals.epoch != incll_epoch(tx) || room == 0) {
        if ((rc = txn_alloc(tx, VAL_BLOCK, &o)))
            fail("value", rc);
        char *b = incll_node(o);
        t_vals.next = (char *)(((uintptr_t)b + 15) & ~(uintptr_t)15);
        t_vals.end = b + VAL_BLOCK;
        t_vals.epoch = incll_epoch(tx);
        room = (size_t)(t_vals.end - t_vals.next) / VAL_BYTES;
    }
    size_t n = room < VAL_BATCH ? room : VAL_BATCH;
    char batch[VAL_BATCH * VAL_BYTES];
    for (size_t i = 0; i < n; i++)
        memset(batch + i * VAL_BYTES, (uint8_t)t_vals.fill++, VAL_BYTES);
    incll_store_bytes(t_vals.next, batch, n * VAL_BYTES); /* one traced copy */
    t_vals.lim = t_vals.next + n * VAL_BYTES;
    if ((rc = txn_commit(tx)))
        fail("value", rc);
}

/* ---- the InCLL counters */
static _Atomic uint64_t s_hit_upd, s_hit_ins, s_hit_rem, s_hit_mov, s_in_logged, s_logged,
    s_epochs;

/* this thread's incll_stats into the sums (epochs: the process's, once) */
void store_stats_add(int first)
{
    incll_stats is;
    incll_stats_get(&is);
    atomic_fetch_add(&s_hit_upd, is.hit_update);
    atomic_fetch_add(&s_hit_ins, is.hit_insert);
    atomic_fetch_add(&s_hit_rem, is.hit_remove);
    atomic_fetch_add(&s_hit_mov, is.hit_move);
    atomic_fetch_add(&s_in_logged, is.in_logged);
    atomic_fetch_add(&s_logged, is.log_overflow + is.log_explicit);
    if (first)
        atomic_store(&s_epochs, is.epochs);
}

void store_stats_reset(void)
{
    incll_stats_reset();
}

/* the epochs the run ran in: those that ended, and the last one */
size_t store_stats_report(char *extra, size_t cap, double total)
{
    uint64_t hits = s_hit_upd + s_hit_ins + s_hit_rem + s_hit_mov, ep = s_epochs + 1;
    printf("# incll: %llu epochs, %.0f nodes logged per epoch (%llu in all, %.4f per op); "
           "InCLL hits %llu (updates %llu, inserts %llu, removes %llu, updates moved to a "
           "free slot %llu), %llu changes of nodes logged already\n",
           (unsigned long long)ep, (double)s_logged / (double)ep,
           (unsigned long long)s_logged, (double)s_logged / total, (unsigned long long)hits,
           (unsigned long long)s_hit_upd, (unsigned long long)s_hit_ins,
           (unsigned long long)s_hit_rem, (unsigned long long)s_hit_mov,
           (unsigned long long)s_in_logged);
    int n = snprintf(extra, cap,
                     ",\"batch\":%u,\"epochs\":%llu,\"logged_nodes\":%llu,"
                     "\"logged_per_epoch\":%.1f,\"incll_hits\":%llu,\"hits_update\":%llu,"
                     "\"hits_insert\":%llu,\"hits_remove\":%llu,\"hits_move\":%llu,"
                     "\"in_logged\":%llu",
                     cfg.batch, (unsigned long long)ep, (unsigned long long)s_logged,
                     (double)s_logged / (double)ep, (unsigned long long)hits,
                     (unsigned long long)s_hit_upd, (unsigned long long)s_hit_ins,
                     (unsigned long long)s_hit_rem, (unsigned long long)s_hit_mov,
                     (unsigned long long)s_in_logged);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* ---- --crash-recovery: the external log's worst case */

static _Atomic int crash_stop;
static _Atomic uint64_t crash_logged[256], crash_ops;

static uint64_t crash_val(uint64_t x)
{
    return 16 * (x + 1); /* 16-byte aligned: a value InCLL can save it */
}

/* Updates of random keys until the threads' logged nodes reach the
 * target (or 20 updates per key: a tree of fewer leaves never gets
 * there); the epoch does not end meanwhile. */
static void *crash_thread(void *arg)
{
    struct worker *w = arg;
    uint64_t s = mix64(cfg.seed * 1000003 + (uint64_t)w->id) | 1, ops = 0;
    incll_stats is;
    pthread_barrier_wait(&start_line);
    incll_stats_reset();
    while (!atomic_load_explicit(&crash_stop, memory_order_relaxed) &&
           ops < 20 * cfg.keys / (size_t)cfg.threads) {
        for (int j = 0; j < 256; j++, ops++) {
            uint8_t k[8];
            key_of(rnd(&s) % cfg.keys, k);
            int rc = mt_put(tree, k, 8, crash_val(cfg.keys + ops));
            if (rc < 0)
                fail("update", rc);
        }
        incll_stats_get(&is);
        if (is.epochs) {
            fprintf(stderr, "ycsb: an epoch ended during the run (TXN_EPOCH_MS, log size)\n");
            exit(1);
        }
        atomic_store(&crash_logged[w->id], is.log_overflow + is.log_explicit);
        uint64_t sum = 0;
        for (int t = 0; t < cfg.threads; t++)
            sum += atomic_load(&crash_logged[t]);
        if (sum >= cfg.crash_logged)
            atomic_store(&crash_stop, 1);
    }
    atomic_fetch_add(&crash_ops, ops);
    return NULL;
}

static void *crash_load(void *arg)
{
    struct range *r = arg;
    for (size_t i = r->from; i < r->to; i++) {
        uint8_t k[8];
        key_of(i, k);
        int rc = mt_put(tree, k, 8, crash_val(i));
        if (rc < 0)
            fail("load", rc);
    }
    return NULL;
}

struct crash_report {
    uint64_t logged, ops;
    double load_s, run_s;
};

/* The child: load, sync, update in one epoch, report, die in it. */
static void crash_child(const char *path, int fd)
{
    setenv("TXN_EPOCH_MS", "0", 1); /* epochs end at txn_sync only */
    /* room for the log: an epoch ends early when a thread's log passes
     * 1/16 of the heap (incll.c); a logged node takes about 400 bytes */
    size_t logb = cfg.crash_logged * 400 * 16 / (size_t)cfg.threads + ((size_t)64 << 20);
    txn_pool_opts po = {.size = ((size_t)128 << 20) + cfg.keys * 64 + logb,
                        .threads = (unsigned)cfg.threads + 1};
    int rc = txn_pool_create(path, "pmtx-ycsb", &po, &pool);
    if (rc)
        fail("pool create", rc);
    mt_opts mo = {.pool = pool};
    if ((rc = mt_create(&mo, &tree)))
        fail("create", rc);
    double t0 = now();
    load_keys(crash_load);
    if ((rc = txn_sync(pool)))
        fail("sync", rc);
    struct crash_report r = {.load_s = now() - t0};
    struct worker w[cfg.threads];
    pthread_t th[cfg.threads];
    pthread_barrier_init(&start_line, NULL, (unsigned)cfg.threads + 1);
    for (int t = 0; t < cfg.threads; t++) {
        w[t] = (struct worker){.id = t};
        if (pthread_create(&th[t], NULL, crash_thread, &w[t]))
            fail("pthread_create", TXN_E_NOMEM);
    }
    pthread_barrier_wait(&start_line);
    t0 = now();
    for (int t = 0; t < cfg.threads; t++)
        pthread_join(th[t], NULL);
    r.run_s = now() - t0;
    for (int t = 0; t < cfg.threads; t++)
        r.logged += crash_logged[t];
    r.ops = crash_ops;
    if (write(fd, &r, sizeof r) != (ssize_t)sizeof r)
        exit(1);
    kill(getpid(), SIGKILL); /* in the epoch: nothing flushed, no sync */
    exit(1);
}

/* Fork the child that crashes (crash_child) and take its report: 0, or
 * 1 if it did not report and die as planned. */
static int crash_fork(const char *path, struct crash_report *r)
{
    int fds[2];
    if (pipe(fds))
        fail("pipe", TXN_E_NOMEM);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        fail("fork", TXN_E_NOMEM);
    if (pid == 0) {
        close(fds[0]);
        crash_child(path, fds[1]);
    }
    close(fds[1]);
    int st = 0, got = read(fds[0], r, sizeof *r) == (ssize_t)sizeof *r;
    waitpid(pid, &st, 0);
    if (!got || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
        fprintf(stderr, "ycsb: the crashing child did not report and die as planned\n");
        return 1;
    }
    return 0;
}

/* The restart's times (s), from the pool's open: wall clock, and CPU
 * time of this thread too (its page faults included: what the restart
 * costs when other processes share the cores). */
struct restart_times {
    double pool, tree, first, all; /* after the open, tree, first get, every key */
    double cpu_pool, cpu_first;
    uint64_t nodes;
    int bad;
};

/* The restart: pool (the external log's replay), tree, first get; then
 * every node at its first access: all keys back at their loaded values. */
static void crash_restart(const char *path, struct restart_times *rt)
{
    mt_opts mo = {0};
    uint64_t v = 0;
    uint8_t k[8];
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = now();
    int rc = txn_pool_open(path, "pmtx-ycsb", &pool);
    if (rc)
        fail("pool open", rc);
    rt->pool = now() - t0;
    rt->cpu_pool = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    mo.pool = pool;
    if ((rc = mt_open(&mo, &tree)))
        fail("tree open", rc);
    rt->tree = now() - t0;
    key_of(cfg.keys / 2, k);
    rc = mt_get(tree, k, 8, &v);
    rt->first = now() - t0;
    rt->cpu_first = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    rt->bad = rc != 0 || v != crash_val(cfg.keys / 2);
    for (size_t i = 0; i < cfg.keys && !rt->bad; i++) {
        key_of(i, k);
        if (mt_get(tree, k, 8, &v) || v != crash_val(i)) {
            fprintf(stderr, "ycsb: key %zu: not its loaded value after recovery\n", i);
            rt->bad = 1;
        }
    }
    size_t n = 0;
    mt_scan(tree, NULL, 0, (size_t)-1, count_cb, &n);
    rt->bad |= n != cfg.keys;
    rt->all = now() - t0;
    mt_stats ms;
    mt_stats_get(tree, &ms);
    rt->nodes = ms.leaves + ms.inodes;
    mt_close(tree);
    txn_pool_close(pool);
}

/* a clean open of the same pool, for comparison (s) */
static double clean_open(const char *path)
{
    double t0 = now();
    int rc = txn_pool_open(path, "pmtx-ycsb", &pool);
    if (rc)
        fail("pool open", rc);
    double s = now() - t0;
    txn_pool_close(pool);
    return s;
}

static void crash_print(const char *engine, const struct crash_report *r,
                        const struct restart_times *rt, double clean)
{
    double pool_ms = rt->pool * 1e3, tree_ms = (rt->tree - rt->pool) * 1e3,
           get_ms = (rt->first - rt->tree) * 1e3, first_ms = rt->first * 1e3,
           all_ms = (rt->all - rt->first) * 1e3;
    printf("ycsb-%s recovery: %llu nodes logged in the failed epoch (%llu updates, %d threads, "
           "%.2f s) of %llu nodes; pool open (log replay) %.2f ms (clean open %.2f ms), "
           "tree open %.3f ms, first get %.3f ms: first operation %.2f ms after the restart "
           "(CPU %.2f ms, pool open %.2f); every node recovered and checked in %.0f ms%s\n",
           engine, (unsigned long long)r->logged, (unsigned long long)r->ops, cfg.threads,
           r->run_s, (unsigned long long)rt->nodes, pool_ms, clean * 1e3, tree_ms, get_ms,
           first_ms, rt->cpu_first * 1e3, rt->cpu_pool * 1e3, all_ms,
           rt->bad ? " CHECK FAILED" : " (checked)");
    printf("{\"engine\":\"%s\",\"test\":\"recovery\",\"keys\":%zu,\"threads\":%d,"
           "\"logged_nodes\":%llu,\"epoch_updates\":%llu,\"nodes\":%llu,"
           "\"recovery_ms\":%.3f,\"clean_open_ms\":%.3f,\"tree_open_ms\":%.4f,"
           "\"first_get_ms\":%.4f,\"first_op_ms\":%.3f,\"recovery_cpu_ms\":%.3f,"
           "\"first_op_cpu_ms\":%.3f,\"touch_all_ms\":%.1f,\"ok\":%s}\n",
           engine, cfg.keys, cfg.threads, (unsigned long long)r->logged,
           (unsigned long long)r->ops, (unsigned long long)rt->nodes, pool_ms, clean * 1e3,
           tree_ms, get_ms, first_ms, rt->cpu_pool * 1e3, rt->cpu_first * 1e3, all_ms,
           rt->bad ? "false" : "true");
}

int crash_recovery(const char *engine)
{
    char path[256];
    struct crash_report r;
    struct restart_times rt;
    snprintf(path, sizeof path, "ycsb-%s-crash-%d.pool", engine, (int)getpid());
    snprintf(made_pool, sizeof made_pool, "%s", path); /* by the child */
    if (crash_fork(path, &r)) {
        pool_unlink(path);
        return 1;
    }
    crash_restart(path, &rt);
    double clean = clean_open(path);
    pool_unlink(path);
    crash_print(engine, &r, &rt, clean);
    return rt.bad;
}
