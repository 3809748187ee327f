/* sqlite_kill.c - SIGKILL a process in the middle of SQLite transactions
 * on the pmtx VFS, then check the database: PRAGMA integrity_check is ok,
 * every transaction whose COMMIT returned before the kill is there, at
 * most one more, and none in part.
 *
 * Transaction i (the child's): k rows of random sizes into t with grp = i,
 * the row (i, k) into log, meta.n = i and meta.total += k; some also
 * delete the rows of an older group (its log row then says 0), some run a
 * statement that fails on a constraint first, and one in eight ends in
 * ROLLBACK. So after any crash: log holds exactly 1..meta.n, each group
 * has the rows its log row says, and meta.total counts t. The child's
 * page cache is small, so that most transactions spill pages before they
 * commit. It writes i to a pipe once COMMIT returned (synchronous=FULL:
 * incll's commit has waited for its epoch); the parent kills it 5 to 60
 * ms into a round. SQLITE_KILLS rounds (default 5); SQLITE_KILL_SEED repeats them.
 * Built for the persistent engines. */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acks.h"
#include "common.h"
#include "pmtx_sqlite.h"
#include "txn.h"

#define TAG "sqlkill"
#define SQL_LEN 1024

enum { CHILD_OPEN_FAILED = 10, CHILD_SQL_FAILED, CHILD_PIPE_FAILED };

static sqlite3 *open_db(const char *path)
{
    char uri[TEST_PATH_LEN + 64];
    sqlite3 *db;
    snprintf(uri, sizeof uri, "file:%s?vfs=pmtx&pmtx_size=64M", path);
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                        NULL)) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

/* ---- the child: transactions until killed */

static int run(sqlite3 *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(sqlite3 *db, const char *fmt, ...)
{
    char sql[SQL_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static long long one_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* One transaction as the top of this file says; returns its number once
 * committed, 0 when it rolled back, -1 on an error. */
static long long one_txn(sqlite3 *db, uint64_t *rnd)
{
    uint64_t r = test_rand(rnd);
    int k = 1 + (int)(r % 20), pad = 10 + (int)(r >> 8) % 3000;
    if (run(db, "BEGIN"))
        return -1;
    long long i = one_int(db, "SELECT n FROM meta") + 1;
    if (i <= 0)
        return -1;
    /* a failed statement undoes only itself */
    if ((r >> 20) % 5 == 0 && i > 1 &&
        run(db, "INSERT INTO log VALUES (1, 0)") != SQLITE_CONSTRAINT)
        return -1;
    if (run(db,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d) "
            "INSERT INTO t(grp, pad) SELECT %lld, randomblob(%d + x) FROM c",
            k, i, pad) ||
        run(db, "INSERT INTO log VALUES (%lld, %d)", i, k) ||
        run(db, "UPDATE meta SET n = %lld, total = total + %d", i, k))
        return -1;
    if ((r >> 30) % 3 == 0 && i > 30) {
        long long old = i - 30 + (long long)((r >> 40) % 10);
        if (run(db, "UPDATE meta SET total = total - (SELECT count(*) FROM t WHERE grp = %lld)",
                old) ||
            run(db, "DELETE FROM t WHERE grp = %lld", old) ||
            run(db, "UPDATE log SET rows = 0 WHERE i = %lld", old))
            return -1;
    }
    if ((r >> 50) % 8 == 0)
        return run(db, "ROLLBACK") ? -1 : 0;
    return run(db, "COMMIT") ? -1 : i;
}

static void child_main(const char *path, int ack_fd, uint64_t seed)
{
    sqlite3 *db = open_db(path);
    uint64_t rnd = seed | 1;
    /* a small cache: most transactions spill pages before their commit */
    if (!db || run(db, "PRAGMA cache_size = 8"))
        _exit(CHILD_OPEN_FAILED);
    for (;;) {
        long long i = one_txn(db, &rnd);
        if (i < 0)
            _exit(CHILD_SQL_FAILED);
        if (i > 0 && write(ack_fd, &i, sizeof i) != (ssize_t)sizeof i)
            _exit(CHILD_PIPE_FAILED);
    }
}

/* ---- the parent */

static long long q_int(sqlite3 *db, const char *sql)
{
    long long v = one_int(db, sql);
    ck_assert_msg(v >= 0, "%s: %s", sql, sqlite3_errmsg(db));
    return v;
}

/* The checks of the top of this file; returns meta.n. */
static long long check_db(const char *path, unsigned round)
{
    sqlite3 *db = open_db(path);
    sqlite3_stmt *st;
    ck_assert_msg(db != NULL, "round %u: the database does not open", round);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_msg(!strcmp((const char *)sqlite3_column_text(st, 0), "ok"),
                  "round %u: integrity_check: %s", round, sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    long long n = q_int(db, "SELECT n FROM meta");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM log"), n);
    ck_assert_int_eq(q_int(db, "SELECT coalesce(max(i), 0) FROM log"), n);
    ck_assert_int_eq(q_int(db, "SELECT total FROM meta"), q_int(db, "SELECT count(*) FROM t"));
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM log l WHERE rows != "
                               "(SELECT count(*) FROM t WHERE grp = l.i)"),
                     0);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t WHERE grp > (SELECT n FROM meta)"), 0);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
    return n;
}

/* A round: the child killed 5 to 60 ms after it starts (after its first
 * commit when `first`: the last round of a test none of whose rounds had
 * committed). */
static long long kill_round(const char *path, unsigned round, long long before, int first)
{
    struct acks a = {.last = (uint64_t)before};
    uint64_t sleep_ns = (5 + (uint64_t)(rand() % 56)) * 1000000u;
    int fds[2], status;
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(fds[0]);
        child_main(path, fds[1], (uint64_t)rand() << 16 | round);
    }
    close(fds[1]);
    if (first)
        acks_wait_first(fds[0], &a, 30000000000u);
    status = acks_kill_child(fds[0], pid, &a, sleep_ns);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "round %u: the child stopped by itself (status 0x%x: exit code 10 open, 11 "
                  "SQL, 12 pipe)",
                  round, (unsigned)status);
    ck_assert_uint_eq(a.npartial, 0);
    long long got = check_db(path, round);
    long long last = (long long)a.last;
    ck_assert_msg(got == last || got == last + 1,
                  "round %u: the database holds %lld transactions, the last acknowledged is "
                  "%lld (%u acks this round, killed after %llu ms)",
                  round, got, last, (unsigned)a.count, (unsigned long long)(sleep_ns / 1000000));
    return got;
}

START_TEST(test_sqlite_kill)
{
    struct test_pool t;
    unsigned rounds = (unsigned)env_u64("SQLITE_KILLS", 5), advanced = 0;
    uint64_t seed = env_u64("SQLITE_KILL_SEED", (uint64_t)time(NULL) ^ (uint64_t)getpid());
    long long n = 0;
    printf("sqlite kill: engine %s, %u rounds, SQLITE_KILL_SEED=%llu\n", txn_engine_name(),
           rounds, (unsigned long long)seed);
    fflush(stdout);
    srand((unsigned)seed);
    CHECK_OK(test_pool_new(&t, TAG));
    sqlite3 *db = open_db(t.path);
    ck_assert_ptr_nonnull(db);
    ck_assert_int_eq(sqlite3_exec(db,
                                  "CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, pad BLOB);"
                                  "CREATE INDEX t_grp ON t(grp);"
                                  "CREATE TABLE log(i INTEGER PRIMARY KEY, rows INTEGER);"
                                  "CREATE TABLE meta(n INTEGER, total INTEGER);"
                                  "INSERT INTO meta VALUES (0, 0)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
    for (unsigned r = 1; r <= rounds; r++) {
        long long v = kill_round(t.path, r, n, r == rounds && n == 0);
        advanced += v > n;
        n = v;
    }
    printf("sqlite kill: %lld transactions, the count advanced in %u of %u rounds\n", n,
           advanced, rounds);
    ck_assert_msg(rounds == 0 || n > 0, "no transaction committed in %u rounds", rounds);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

int main(void)
{
    if (pmtx_sqlite_register(0) != SQLITE_OK) {
        fprintf(stderr, "pmtx_sqlite_register failed\n");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("sqlite_kill");
    TCase *tc = test_tcase(s, "sigkill", 60.0 + 5.0 * (double)env_u64("SQLITE_KILLS", 5));
    tcase_add_test(tc, test_sqlite_kill);
    return test_run(s, CK_FORK_GETENV, TAG);
}
