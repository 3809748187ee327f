/* bigtx.c - the cost of big transactions: one transaction of n writes (to
 * n distinct objects), of n writes then n reads of the n words of one
 * object, of n allocations (each written once), of n frees, and n
 * allocations rolled back, for each n asked. A transaction whose
 * per-operation bookkeeping is O(1) shows the same time per operation at
 * every n; one that searches what it did so far shows a time per
 * operation that grows with n. One line per (kind, n) on stdout:
 *
 *   engine kind n seconds ns_per_op ratio
 *
 * `ratio` is ns_per_op over that of the kind's smallest n: about 1 when
 * the cost is linear in n, about n / n_smallest when it is quadratic.
 *
 *   bigtx-<engine> [--writes 10000,100000,1000000] [--allocs 10000,100000]
 *                  [--tails 65536,1048576] [--size 64] [--pool-mb 1536] [--reps 3]
 *
 * --tails S,...: transactions that each write 1 KiB at the end of one
 * object of S bytes (an APPEND into a value with room): ns_per_op is a
 * transaction's time, `ratio` its growth with S (an engine that copies
 * the object at its first write: about S / S_smallest).
 *
 * Each point is the fastest of --reps transactions.
 *
 * The pool lives under $TXN_POOL_DIR (default /dev/shm) and is removed at
 * the end. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "txn.h"

#define MAX_NS 8
#define CHUNK 8192u /* objects per setup transaction */

static struct {
    uint64_t writes[MAX_NS], allocs[MAX_NS], tails[MAX_NS];
    unsigned nwrites, nallocs, ntails;
    size_t size, pool_mb;
    unsigned reps;
} cfg = {{10000, 100000, 1000000}, {10000, 100000}, {0}, 3, 2, 0, 64, 1536, 3};

static char pool_name[64];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bigtx-%s: %s: %s\n", txn_engine_name(), what, txn_pool_strerror(rc));
    char path[4096];
    if (pool_name[0] && !txn_pool_path(pool_name, path, sizeof path))
        unlink(path);
    exit(1);
}

/* The fastest of a point's repetitions (0: none yet): the first run of a
 * size also pays for touching the pool's pages and growing the
 * transaction's arrays. */
static double keep_best(double best, double s)
{
    return best == 0 || s < best ? s : best;
}

static void report(const char *kind, uint64_t n, double s, double *first)
{
    double per = s * 1e9 / (double)n;
    if (*first == 0)
        *first = per;
    printf("%-6s %-12s %8llu %9.3f %9.1f %6.2f\n", txn_engine_name(), kind,
           (unsigned long long)n, s, per, per / *first);
    fflush(stdout);
}

/* n objects of cfg.size bytes, allocated in small transactions. */
static txn_obj **make_objects(txn_pool *p, uint64_t n)
{
    txn_obj **o = malloc(n * sizeof *o);
    if (!o)
        die("handles", TXN_E_NOMEM);
    for (uint64_t at = 0; at < n; at += CHUNK) {
        txn *tx;
        int rc = txn_begin(p, &tx);
        for (uint64_t i = at; !rc && i < n && i < at + CHUNK; i++)
            rc = txn_alloc(tx, cfg.size, &o[i]);
        if (!rc)
            rc = txn_commit(tx);
        else
            txn_abort(tx);
        if (rc)
            die("setup", rc);
    }
    return o;
}

static void free_objects(txn_pool *p, txn_obj **o, uint64_t n)
{
    for (uint64_t at = 0; at < n; at += CHUNK) {
        txn *tx;
        int rc = txn_begin(p, &tx);
        for (uint64_t i = at; !rc && i < n && i < at + CHUNK; i++)
            rc = txn_free(tx, o[i]);
        if (!rc)
            rc = txn_commit(tx);
        else
            txn_abort(tx);
        if (rc)
            die("teardown", rc);
    }
    free(o);
}

/* One transaction writing a word of each of the first n objects. */
static void run_writes(txn_pool *p)
{
    uint64_t max = 0;
    for (unsigned k = 0; k < cfg.nwrites; k++)
        max = cfg.writes[k] > max ? cfg.writes[k] : max;
    txn_obj **o = make_objects(p, max);
    double first = 0;
    for (unsigned k = 0; k < cfg.nwrites; k++) {
        uint64_t n = cfg.writes[k];
        double best = 0;
        for (unsigned rep = 0; rep < cfg.reps; rep++) {
            txn *tx;
            double t0 = now_s();
            int rc = txn_begin(p, &tx);
            for (uint64_t i = 0; !rc && i < n; i++)
                rc = txn_write_u64(tx, o[i], 0, i + k + rep);
            if (!rc)
                rc = txn_commit(tx);
            else
                txn_abort(tx);
            if (rc)
                die("writes", rc);
            best = keep_best(best, now_s() - t0);
        }
        report("write", n, best, &first);
    }
    free_objects(p, o, max);
}

/* One object of n words; one transaction writes every word, then reads
 * every word back (a read looks up what the transaction wrote). */
static void run_array(txn_pool *p)
{
    double first = 0, best = 0;
    for (unsigned k = 0; k < cfg.nwrites * cfg.reps; k++) {
        uint64_t n = cfg.writes[k / cfg.reps];
        txn *tx;
        txn_obj *a;
        int rc = txn_begin(p, &tx);
        if (rc)
            die("the array", rc);
        if ((rc = txn_alloc(tx, n * 8, &a))) {
            txn_abort(tx);
            die("the array", rc);
        }
        if ((rc = txn_commit(tx)))
            die("the array", rc);
        double t0 = now_s();
        rc = txn_begin(p, &tx);
        for (uint64_t i = 0; !rc && i < n; i++)
            rc = txn_write_u64(tx, a, 8 * i, i + 1);
        for (uint64_t i = 0; !rc && i < n; i++) {
            uint64_t v = 0;
            if (!(rc = txn_read_u64(tx, a, 8 * i, &v)) && v != i + 1) {
                fprintf(stderr, "bigtx-%s: word %llu of the array reads %llu\n",
                        txn_engine_name(), (unsigned long long)i, (unsigned long long)v);
                exit(1);
            }
        }
        if (!rc)
            rc = txn_commit(tx);
        else
            txn_abort(tx);
        if (rc)
            die("array writes and reads", rc);
        best = keep_best(k % cfg.reps ? best : 0, now_s() - t0);
        if (k % cfg.reps == cfg.reps - 1)
            report("array-w+r", n, best, &first);
        if ((rc = txn_begin(p, &tx)) || (rc = txn_free(tx, a)) || (rc = txn_commit(tx)))
            die("array free", rc);
    }
}

/* One transaction of n allocations (each written), one of n frees, and n
 * allocations that abort. */
static void run_allocs(txn_pool *p)
{
    double first[3] = {0};
    for (unsigned k = 0; k < cfg.nallocs; k++) {
        uint64_t n = cfg.allocs[k];
        txn_obj **o = malloc(n * sizeof *o);
        if (!o)
            die("handles", TXN_E_NOMEM);
        double best[3] = {0};
        for (unsigned step = 0; step < 3 * cfg.reps; step++) {
            int kind = (int)(step % 3);
            txn *tx;
            double t0 = now_s();
            int rc = txn_begin(p, &tx);
            for (uint64_t i = 0; !rc && i < n; i++)
                if (kind == 1 || !(rc = txn_alloc(tx, cfg.size, &o[i])))
                    rc = kind == 1 ? txn_free(tx, o[i]) : txn_write_u64(tx, o[i], 0, i);
            if (!rc && kind < 2)
                rc = txn_commit(tx);
            else
                txn_abort(tx);
            if (rc)
                die(kind == 0 ? "allocs" : kind == 1 ? "frees" : "allocs to abort", rc);
            best[kind] = keep_best(best[kind], now_s() - t0);
        }
        for (int kind = 0; kind < 3; kind++)
            report(kind == 0 ? "alloc" : kind == 1 ? "free" : "alloc-abort", n, best[kind],
                   &first[kind]);
        free(o);
    }
}

/* Per object size S: transactions that write 1 KiB at its end. */
static void run_tails(txn_pool *p)
{
    enum { TAIL = 1024, PER_POINT = 64 };
    static char buf[TAIL];
    double first = 0;
    for (unsigned k = 0; k < cfg.ntails; k++) {
        uint64_t size = cfg.tails[k] < TAIL ? TAIL : cfg.tails[k];
        txn *tx;
        txn_obj *o;
        int rc = txn_begin(p, &tx);
        if (!rc && (rc = txn_alloc(tx, size, &o)))
            txn_abort(tx);
        if (rc || (rc = txn_commit(tx)))
            die("the tail's object", rc);
        double best = 0;
        for (unsigned rep = 0; rep < cfg.reps; rep++) {
            double t0 = now_s();
            for (unsigned i = 0; i < PER_POINT; i++) {
                memset(buf, 'a' + (int)(i % 26), sizeof buf);
                if ((rc = txn_begin(p, &tx)))
                    die("tail writes", rc);
                if ((rc = txn_write(tx, o, size - TAIL, buf, TAIL))) {
                    txn_abort(tx);
                    die("tail writes", rc);
                }
                if ((rc = txn_commit(tx)))
                    die("tail writes", rc);
            }
            best = keep_best(best, (now_s() - t0) / PER_POINT);
        }
        if (first == 0)
            first = best;
        printf("%-6s %-12s %8llu %9.6f %9.1f %6.2f\n", txn_engine_name(), "tail-1k",
               (unsigned long long)size, best, best * 1e9, best / first);
        fflush(stdout);
        if ((rc = txn_begin(p, &tx)) || (rc = txn_free(tx, o)) || (rc = txn_commit(tx)))
            die("the tail's object", rc);
    }
}

static int parse_list(const char *s, uint64_t *out, unsigned *n)
{
    *n = 0;
    while (*s && *n < MAX_NS) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || v == 0 || v > 100000000ull || (*end && *end != ','))
            return -1;
        out[(*n)++] = v;
        s = *end ? end + 1 : end;
    }
    return !*s ? 0 : -1;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"writes", 1, 0, 'w'}, {"allocs", 1, 0, 'a'},
                                         {"tails", 1, 0, 't'},
                                         {"size", 1, 0, 's'},   {"pool-mb", 1, 0, 'm'},
                                         {"reps", 1, 0, 'r'},
                                         {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'w':
        case 'a':
        case 't':
            if (parse_list(optarg, c == 'w' ? cfg.writes : c == 'a' ? cfg.allocs : cfg.tails,
                           c == 'w' ? &cfg.nwrites : c == 'a' ? &cfg.nallocs : &cfg.ntails)) {
                fprintf(stderr, "bigtx: bad --%s %s (counts from 1, comma-separated, at most %d; "
                        "an empty list skips the kind)\n",
                        c == 'w' ? "writes" : c == 'a' ? "allocs" : "tails", optarg, MAX_NS);
                return 2;
            }
            break;
        case 's':
        case 'm': {
            unsigned long long v = strtoull(optarg, &end, 10);
            if (end == optarg || *end || v < 8 || v > 65536u) {
                fprintf(stderr, "bigtx: bad --%s %s (8 to 65536)\n", c == 's' ? "size" : "pool-mb",
                        optarg);
                return 2;
            }
            if (c == 's')
                cfg.size = v;
            else
                cfg.pool_mb = v;
            break;
        }
        case 'r':
            cfg.reps = (unsigned)strtoul(optarg, &end, 10);
            if (end == optarg || *end || cfg.reps < 1 || cfg.reps > 100) {
                fprintf(stderr, "bigtx: bad --reps %s (1 to 100)\n", optarg);
                return 2;
            }
            break;
        case 'h':
            printf("usage: bigtx-%s [--writes N,N,...] [--allocs N,N,...] [--tails S,S,...] "
                   "[--size BYTES] [--pool-mb MB] [--reps R]\n", txn_engine_name());
            return 0;
        default:
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "bigtx: unexpected argument %s\n", argv[optind]);
        return 2;
    }
    txn_pool_opts o = {.size = cfg.pool_mb << 20, .threads = 4};
    txn_pool *p;
    snprintf(pool_name, sizeof pool_name, "pmtx-bigtx-%d.pool", (int)getpid());
    int rc = txn_pool_create(pool_name, "bigtx", &o, &p);
    if (rc)
        die("pool create", rc);
    printf("# engine kind n seconds ns_per_op ratio_to_smallest_n\n");
    if (cfg.nwrites) {
        run_writes(p);
        run_array(p);
    }
    if (cfg.nallocs)
        run_allocs(p);
    if (cfg.ntails)
        run_tails(p);
    txn_pool_close(p);
    char path[4096];
    if (!txn_pool_path(pool_name, path, sizeof path))
        unlink(path);
    return 0;
}
