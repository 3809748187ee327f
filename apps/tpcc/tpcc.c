/* tpcc.c - tpcc-<engine>: TPC-C on SQLite, on the pmtx VFS (the linked
 * engine) or on stock SQLite for comparison (docs/sqlite.md).
 *
 *   tpcc-<engine> --warehouses W --seconds S [--terminals T]
 *                 [--mode pmtx|memory|wal|delete] [--db PATH] [--load-only]
 *                 [--check-only] [--acks FILE] [--items N --customers N]
 *
 * Loads W warehouses (or opens the loaded database --db names), runs T
 * terminals without think time for S seconds, prints a human line and a
 * JSON line, then checks the consistency conditions 1-4 and
 * integrity_check: a failure makes the exit status 1. --acks FILE appends
 * a line per committed New-Order and Payment as COMMIT returns (the
 * SIGKILL test); --check-only with --acks checks that each is there. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pmtx_sqlite.h"
#include "tpcc.h"
#include "txn.h"

enum mode { M_PMTX, M_MEMORY, M_WAL, M_DELETE };
static const char *const mode_names[] = {"pmtx", "memory", "wal", "delete"};

static struct {
    struct scale s;
    double seconds;
    int terminals;
    enum mode mode;
    const char *db;
    char uri[512];
    int load_only, check_only, keep, prealloc;
    const char *acks;
    unsigned long long pool_mb;
    uint64_t seed;
} opt = {{1, 100000, 3000}, 10, 1, M_PMTX, NULL, "", 0, 0, 0, 0, NULL, 0, 1};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Open a connection as the mode says; NULL after saying why. */
static sqlite3 *open_db(int create)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX;
    if (opt.check_only && opt.mode == M_PMTX)
        flags |= SQLITE_OPEN_READONLY; /* the VFS then writes not a byte, recovery included */
    else
        flags |= SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(opt.uri, &db, flags, NULL);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "tpcc: %s: %s\n", opt.uri, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_handler(db, tpcc_busy_yield, NULL); /* the terminals may be running */
    const char *setup = opt.mode == M_WAL      ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL"
                        : opt.mode == M_DELETE ? "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL"
                                               : "PRAGMA synchronous=FULL";
    if (tpcc_exec(db, setup) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

/* ---- the terminals */
struct counts {
    uint64_t done[TX_TYPES], rollbacks, errors, busy;
    txn_stats stats;
};

static struct {
    double end;
    int ack_fd;
    atomic_int failed;
} run_state = {0, -1, 0};

struct terminal {
    pthread_t th;
    int id;
    struct counts c;
};

static void ack(const struct tx_result *r)
{
    char line[64];
    int n = 0;
    if (r->type == TX_NEW_ORDER && !r->rolled_back)
        n = snprintf(line, sizeof line, "N %d %d %d %d\n", r->w, r->d, r->o_id, r->ol_cnt);
    else if (r->type == TX_PAYMENT)
        n = snprintf(line, sizeof line, "P %s\n", r->tag);
    /* one write: a line is there whole or not at all after a SIGKILL */
    if (n > 0 && write(run_state.ack_fd, line, (size_t)n) != n)
        atomic_store(&run_state.failed, 1);
}

static void *terminal_main(void *arg)
{
    struct terminal *me = arg;
    sqlite3 *db = open_db(0);
    struct term *t = db ? term_open(db, &opt.s, me->id % opt.s.warehouses + 1,
                                    opt.seed * 7919 + (uint64_t)me->id * 104729, opt.acks != NULL)
                        : NULL;
    if (!t) {
        atomic_store(&run_state.failed, 1);
        sqlite3_close(db);
        return NULL;
    }
    txn_stats a, b;
    txn_stats_get(&a);
    struct tx_result r;
    while (now_s() < run_state.end && !atomic_load(&run_state.failed)) {
        if (term_run(t, -1, &r) != SQLITE_OK) {
            me->c.errors++;
            atomic_store(&run_state.failed, 1);
            break;
        }
        me->c.done[r.type]++;
        me->c.rollbacks += (uint64_t)r.rolled_back;
        if (run_state.ack_fd >= 0)
            ack(&r);
    }
    txn_stats_get(&b);
    me->c.stats = (txn_stats){.commits = b.commits - a.commits,
                              .barriers = b.barriers - a.barriers,
                              .lines_flushed = b.lines_flushed - a.lines_flushed,
                              .log_bytes = b.log_bytes - a.log_bytes};
    me->c.busy = term_busy_waits(t);
    term_close(t);
    sqlite3_close(db);
    return NULL;
}

static int run_terminals(struct counts *sum, double *elapsed)
{
    struct terminal *ts = calloc((size_t)opt.terminals, sizeof *ts);
    *elapsed = 0;
    if (!ts)
        return -1;
    double start = now_s();
    run_state.end = start + opt.seconds;
    int started = 0;
    for (; started < opt.terminals; started++) {
        ts[started].id = started;
        if (pthread_create(&ts[started].th, NULL, terminal_main, &ts[started])) {
            atomic_store(&run_state.failed, 1);
            break;
        }
    }
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < started; i++) {
        pthread_join(ts[i].th, NULL);
        for (int k = 0; k < TX_TYPES; k++)
            sum->done[k] += ts[i].c.done[k];
        sum->rollbacks += ts[i].c.rollbacks;
        sum->errors += ts[i].c.errors;
        sum->busy += ts[i].c.busy;
        sum->stats.commits += ts[i].c.stats.commits;
        sum->stats.barriers += ts[i].c.stats.barriers;
        sum->stats.lines_flushed += ts[i].c.stats.lines_flushed;
        sum->stats.log_bytes += ts[i].c.stats.log_bytes;
    }
    *elapsed = now_s() - start;
    free(ts);
    return atomic_load(&run_state.failed) ? -1 : 0;
}

/* ---- the acknowledgements of an earlier run: every one is there */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int check_acks(sqlite3 *db, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "tpcc: %s: %s\n", path, strerror(errno));
        return 1;
    }
    /* the tagged history rows, sorted, to look the Payments up in */
    size_t n = 0, cap = 1024;
    char **tags = malloc(cap * sizeof *tags);
    sqlite3_stmt *st = NULL, *ord = NULL, *lines = NULL;
    int missing = 0, acked = 0;
    sqlite3_prepare_v2(db, "SELECT h_data FROM history WHERE h_data LIKE 'T%'", -1, &st, NULL);
    while (tags && st && sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap && !(tags = realloc(tags, (cap *= 2) * sizeof *tags)))
            break;
        tags[n++] = strdup((const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    if (!tags) {
        fclose(f);
        return 1;
    }
    qsort(tags, n, sizeof *tags, cmp_str);
    sqlite3_prepare_v2(db, "SELECT o_ol_cnt FROM orders WHERE o_w_id = ? AND o_d_id = ?"
                           " AND o_id = ?", -1, &ord, NULL);
    sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM order_line WHERE ol_w_id = ? AND ol_d_id = ?"
                           " AND ol_o_id = ?", -1, &lines, NULL);
    char line[128], tag[64];
    int w, d, o, cnt;
    while (fgets(line, sizeof line, f)) {
        acked++;
        if (sscanf(line, "N %d %d %d %d", &w, &d, &o, &cnt) == 4) {
            int got = -1, got_lines = -1;
            sqlite3_stmt *both[2] = {ord, lines};
            for (int i = 0; i < 2; i++) {
                sqlite3_reset(both[i]);
                sqlite3_bind_int(both[i], 1, w);
                sqlite3_bind_int(both[i], 2, d);
                sqlite3_bind_int(both[i], 3, o);
                if (sqlite3_step(both[i]) == SQLITE_ROW)
                    *(i ? &got_lines : &got) = sqlite3_column_int(both[i], 0);
            }
            if (got != cnt || got_lines != cnt) {
                fprintf(stderr, "tpcc: acknowledged New-Order %d/%d/%d (%d lines) is not there"
                                " (order: %d lines, %d order lines)\n", w, d, o, cnt, got, got_lines);
                missing++;
            }
        } else if (sscanf(line, "P %63s", tag) == 1) {
            char *key = tag;
            if (!bsearch(&key, tags, n, sizeof *tags, cmp_str)) {
                fprintf(stderr, "tpcc: acknowledged Payment %s is not there\n", tag);
                missing++;
            }
        } else if (strchr(line, '\n')) {
            fprintf(stderr, "tpcc: %s: not an acknowledgement: %s", path, line);
            missing++;
        }
    }
    sqlite3_finalize(ord);
    sqlite3_finalize(lines);
    for (size_t i = 0; i < n; i++)
        free(tags[i]);
    free(tags);
    fclose(f);
    printf("tpcc: %d acknowledged transactions, %d missing\n", acked, missing);
    return missing != 0;
}

/* ---- options */
static void usage(FILE *to)
{
    fprintf(to,
            "usage: tpcc-%s [--warehouses W] [--seconds S] [--terminals T]\n"
            "       [--mode pmtx|memory|wal|delete] [--db PATH] [--pool-mb N | --prealloc]\n"
            "       [--seed N]\n"
            "       [--load-only | --check-only] [--acks FILE] [--items N] [--customers N]\n"
            "  pmtx: the pmtx VFS on the %s engine; memory: SQLite's in-memory database;\n"
            "  wal, delete: the stock VFS in that journal mode, synchronous=FULL.\n"
            "  --db: the database file (default: a new one in /dev/shm, removed after);\n"
            "  an existing, loaded one is reused. --items/--customers shrink the\n"
            "  scale (tests); the default is the specification's (100000, 3000).\n"
            "  A new pmtx database starts small and grows to what W warehouses need\n"
            "  (made at that size at once where pools do not grow: pmdk); --pool-mb N:\n"
            "  made N MiB at once, no larger; --prealloc: made at once at what W\n"
            "  warehouses need.\n",
            txn_engine_name(), txn_engine_name());
}

static int parse_int(const char *name, const char *v, int lo, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > 1000000000) {
        fprintf(stderr, "tpcc: --%s %s: not a whole number of at least %d\n", name, v, lo);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_args(int argc, char **argv)
{
    static const struct option longs[] = {
        {"warehouses", 1, 0, 'w'}, {"seconds", 1, 0, 's'},    {"terminals", 1, 0, 't'},
        {"mode", 1, 0, 'm'},       {"db", 1, 0, 'd'},         {"load-only", 0, 0, 'L'},
        {"check-only", 0, 0, 'C'}, {"acks", 1, 0, 'a'},       {"items", 1, 0, 'i'},
        {"customers", 1, 0, 'c'},  {"pool-mb", 1, 0, 'p'},    {"seed", 1, 0, 'S'},
        {"prealloc", 0, 0, 'P'},   {"help", 0, 0, 'h'},       {0, 0, 0, 0}};
    int c, x;
    char *end;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'w': if (parse_int("warehouses", optarg, 1, &opt.s.warehouses)) return -1; break;
        case 't': if (parse_int("terminals", optarg, 1, &opt.terminals)) return -1; break;
        case 'i': if (parse_int("items", optarg, 100, &opt.s.items)) return -1; break;
        case 'c': if (parse_int("customers", optarg, 30, &opt.s.customers)) return -1; break;
        case 'p': if (parse_int("pool-mb", optarg, 1, &x)) return -1; opt.pool_mb = (unsigned)x; break;
        case 'S': if (parse_int("seed", optarg, 0, &x)) return -1; opt.seed = (uint64_t)x; break;
        case 's':
            opt.seconds = strtod(optarg, &end);
            if (*end || end == optarg || !(opt.seconds > 0)) {
                fprintf(stderr, "tpcc: --seconds %s: not a positive number\n", optarg);
                return -1;
            }
            break;
        case 'm':
            for (x = 0; x < 4 && strcmp(optarg, mode_names[x]); x++)
                ;
            if (x == 4) {
                fprintf(stderr, "tpcc: --mode %s: not pmtx, memory, wal or delete\n", optarg);
                return -1;
            }
            opt.mode = (enum mode)x;
            break;
        case 'd': opt.db = optarg; break;
        case 'L': opt.load_only = 1; break;
        case 'C': opt.check_only = 1; break;
        case 'P': opt.prealloc = 1; break;
        case 'a': opt.acks = optarg; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tpcc: unexpected argument: %s\n", argv[optind]);
        return -1;
    }
    if (opt.mode == M_MEMORY && (opt.db || opt.load_only || opt.check_only)) {
        fprintf(stderr, "tpcc: --mode memory keeps nothing: no --db, --load-only, --check-only\n");
        return -1;
    }
    return 0;
}

/* Name the database: its URI for the mode, and a file of our own unless
 * --db names one. */
static char own_path[256];

static void name_db(void)
{
    if (opt.mode == M_MEMORY) { /* shared by the terminals' connections */
        snprintf(opt.uri, sizeof opt.uri, "file:/tpcc-%d?vfs=memdb", (int)getpid());
        return;
    }
    if (!opt.db) {
        snprintf(own_path, sizeof own_path, "/dev/shm/tpcc-%s-%s-%d.db", txn_engine_name(),
                 mode_names[opt.mode], (int)getpid());
        opt.db = own_path;
    }
    /* about 110 MB a warehouse at the full scale, room to grow */
    unsigned long long need =
        256 + 256ULL * (unsigned)opt.s.warehouses * (unsigned)opt.s.items / 100000;
    if (opt.mode == M_PMTX && (opt.pool_mb || opt.prealloc)) {
        unsigned long long mb = opt.pool_mb ? opt.pool_mb : need;
        snprintf(opt.uri, sizeof opt.uri, "file:%s?vfs=pmtx&pmtx_size=%lluM", opt.db, mb);
    } else if (opt.mode == M_PMTX) {
        /* small, growing up to that; a pool that cannot grow (pmdk) is
         * made at that size at once, else its load fills it */
        snprintf(opt.uri, sizeof opt.uri, "file:%s?vfs=pmtx&pmtx_max=%lluM", opt.db, need);
    } else {
        snprintf(opt.uri, sizeof opt.uri, "file:%s", opt.db);
    }
}

static void remove_own(void)
{
    if (!own_path[0])
        return;
    const char *sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[300];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", own_path, sfx[i]);
        unlink(p);
    }
}

/* terminal_failed: a terminal stopped on an error; broken: the checks'
 * failures */
static void report(const struct counts *c, double elapsed, double load_s, int terminal_failed,
                   int broken)
{
    uint64_t all = 0;
    for (int k = 0; k < TX_TYPES; k++)
        all += c->done[k];
    double tx = all ? (double)all : 1, tpmc = c->done[TX_NEW_ORDER] * 60.0 / elapsed;
    printf("tpcc-%s %s W=%d T=%d %.1f s: tpmC %.0f, %.0f tx/s, %llu rollbacks;"
           " per tx %.2f barriers, %.0f log bytes; %s\n",
           txn_engine_name(), mode_names[opt.mode], opt.s.warehouses, opt.terminals, elapsed,
           tpmc, all / elapsed, (unsigned long long)c->rollbacks, c->stats.barriers / tx,
           c->stats.log_bytes / tx,
           broken ? "CHECK FAILED" : terminal_failed ? "consistent, A TERMINAL FAILED" : "consistent");
    printf("{\"program\":\"tpcc\",\"engine\":\"%s\",\"mode\":\"%s\",\"pdom\":%d,"
           "\"warehouses\":%d,\"terminals\":%d,\"seconds\":%.3f,\"load_seconds\":%.3f,"
           "\"tpmC\":%.1f,\"tps\":{",
           txn_engine_name(), mode_names[opt.mode], txn_pdom(), opt.s.warehouses, opt.terminals,
           elapsed, load_s, tpmc);
    for (int k = 0; k < TX_TYPES; k++)
        printf("%s\"%s\":%.1f", k ? "," : "", tx_names[k], c->done[k] / elapsed);
    printf("},\"total_tps\":%.1f,\"rollbacks\":%llu,\"busy_waits\":%llu,"
           "\"barriers_per_tx\":%.3f,\"lines_per_tx\":%.2f,\"log_bytes_per_tx\":%.1f,"
           "\"terminal_failed\":%s,\"consistent\":%s}\n",
           all / elapsed, (unsigned long long)c->rollbacks, (unsigned long long)c->busy,
           c->stats.barriers / tx, c->stats.lines_flushed / tx, c->stats.log_bytes / tx,
           terminal_failed ? "true" : "false", broken ? "false" : "true");
}

static int loaded(sqlite3 *db)
{
    struct scale s;
    if (tpcc_read_scale(db, &s) != SQLITE_OK)
        return 0;
    opt.s = s;
    return 1;
}

/* SQLite's error log (the pmtx VFS says there why it refused a file) */
static void sqlite_log(void *arg, int code, const char *msg)
{
    (void)arg;
    int primary = code & 0xff;
    if (primary != SQLITE_NOTICE && primary != SQLITE_WARNING)
        fprintf(stderr, "tpcc: sqlite: %s (%s)\n", msg, sqlite3_errstr(code));
}

/* A run killed inside an acknowledgement's write() may leave part of its
 * line (a write crossing a page boundary stops between pages on SIGKILL):
 * that transaction was never acknowledged, so the part is cut off before
 * this run appends. 0, or -1 with errno. */
static int drop_torn_ack(int fd)
{
    off_t end = lseek(fd, 0, SEEK_END), at = end;
    char ch = '\n';
    while (at > 0 && pread(fd, &ch, 1, at - 1) == 1 && ch != '\n')
        at--;
    if (end < 0 || at < 0)
        return -1;
    return at < end ? ftruncate(fd, at) : 0;
}

int main(int argc, char **argv)
{
    if (parse_args(argc, argv))
        return 2;
    sqlite3_config(SQLITE_CONFIG_LOG, sqlite_log, (void *)NULL);
    if (opt.mode == M_PMTX && pmtx_sqlite_register(0) != SQLITE_OK) {
        fprintf(stderr, "tpcc: the pmtx VFS could not be registered\n");
        return 1;
    }
    name_db();
    int status = 1;
    double load_s = 0;
    sqlite3 *db = open_db(!opt.check_only); /* held to the end: memory's database */
    if (!db)
        goto out;
    if (!loaded(db)) {
        if (opt.check_only) {
            fprintf(stderr, "tpcc: %s: not a loaded TPC-C database\n", opt.db);
            goto out;
        }
        double t0 = now_s();
        if (tpcc_load(db, &opt.s, opt.seed, stderr) != SQLITE_OK)
            goto out;
        load_s = now_s() - t0;
        fprintf(stderr, "tpcc: loaded in %.1f s\n", load_s);
    }
    if (opt.check_only || opt.load_only) {
        status = tpcc_check(db, stderr) != 0;
        if (opt.acks && check_acks(db, opt.acks))
            status = 1;
        printf("tpcc: %s\n", status ? "CHECK FAILED" : "consistent, integrity ok");
        goto out;
    }
    if (opt.acks && (run_state.ack_fd = open(opt.acks, O_RDWR | O_APPEND | O_CREAT, 0644)) < 0) {
        fprintf(stderr, "tpcc: %s: %s\n", opt.acks, strerror(errno));
        goto out;
    }
    if (opt.acks && drop_torn_ack(run_state.ack_fd)) {
        fprintf(stderr, "tpcc: %s: %s\n", opt.acks, strerror(errno));
        goto out;
    }
    struct counts c;
    double elapsed = 0;
    int terminal_failed = run_terminals(&c, &elapsed) != 0;
    if (terminal_failed)
        fprintf(stderr, "tpcc: a terminal failed: the run is not valid\n");
    int broken = tpcc_check(db, stderr);
    report(&c, elapsed, load_s, terminal_failed, broken);
    status = terminal_failed || broken;
out:
    sqlite3_close(db);
    if (run_state.ack_fd >= 0)
        close(run_state.ack_fd);
    remove_own();
    return status;
}
