/* sqlite_vfs.c - the SQLite VFS pmtx through SQLite's C API, per engine:
 * a database made, filled, reopened; ROLLBACK and failed statements after
 * SQLite spilled pages to the file; journal modes; page sizes and files
 * that shrink; a full pool; a new database small and growing, or up to
 * pmtx_max; connections of one process, threads with a
 * connection each, and a second process; files that are no pool of this
 * layout (each refused with the right SQLite code and left byte for byte
 * as it was); a stale journal
 * beside the pool; and what a commit costs in barriers (printed, and for
 * incll: PRAGMA synchronous decides whether a commit waits for its epoch). */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "pmtx_sqlite.h"
#include "txn.h"

#define TAG "sqlvfs"
#define SQL_LEN 1024

/* The last message SQLite logged (the VFS logs why it refuses a file). */
static char last_log[1024];

static void on_log(void *arg, int code, const char *msg)
{
    (void)arg;
    snprintf(last_log, sizeof last_log, "(%d) %s", code, msg);
}

/* Open `path` on the pmtx VFS with URI parameters `params` (or "").
 * Returns sqlite3_open_v2's code; *db is NULL unless it is SQLITE_OK. */
static int db_open(const char *path, const char *params, int flags, sqlite3 **db)
{
    char uri[TEST_PATH_LEN + 128];
    snprintf(uri, sizeof uri, "file:%s?vfs=pmtx%s%s", path, *params ? "&" : "", params);
    int rc = sqlite3_open_v2(uri, db, flags | SQLITE_OPEN_URI, NULL);
    if (rc) {
        sqlite3_close(*db);
        *db = NULL;
    }
    return rc;
}

static sqlite3 *db_open_ok(const char *path, const char *params)
{
    sqlite3 *db;
    int rc = db_open(path, params, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &db);
    ck_assert_msg(rc == SQLITE_OK, "open %s: %s; log: %s", path, sqlite3_errstr(rc), last_log);
    return db;
}

static int exec_rc(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

static void exec_ok(sqlite3 *db, const char *sql)
{
    int rc = exec_rc(db, sql);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s (%d); log: %s", sql, sqlite3_errmsg(db), rc,
                  last_log);
}

/* The first column of the first row of `sql`, as an integer. */
static long long q_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
    rc = sqlite3_step(st);
    ck_assert_msg(rc == SQLITE_ROW, "%s: %s", sql, sqlite3_errmsg(db));
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* The same as text, in out[cap]. */
static const char *q_text(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
    rc = sqlite3_step(st);
    ck_assert_msg(rc == SQLITE_ROW, "%s: %s", sql, sqlite3_errmsg(db));
    snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return out;
}

static void integrity_ok(sqlite3 *db)
{
    char r[256];
    ck_assert_str_eq(q_text(db, "PRAGMA integrity_check", r, sizeof r), "ok");
}

static void close_ok(sqlite3 *db)
{
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

/* Insert n rows (a, b) = (first + i, a blob of `len` bytes) in one
 * statement. */
static int insert_rows(sqlite3 *db, long long first, int n, int len)
{
    char sql[SQL_LEN];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < %d) "
             "INSERT INTO t(a, b) SELECT %lld + x, randomblob(%d) FROM c",
             n - 1, first, len);
    return exec_rc(db, sql);
}

static void new_db(struct test_pool *t)
{
    CHECK_OK(test_pool_new(t, TAG));
}

START_TEST(test_make_reopen)
{
    struct test_pool t;
    char r[64];
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "");
    ck_assert_str_eq(q_text(db, "PRAGMA pmtx_engine", r, sizeof r), PMTX_LINKED_ENGINE);
    ck_assert_str_eq(q_text(db, "PRAGMA journal_mode", r, sizeof r), "memory");
    exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB); CREATE INDEX tb ON t(b)");
    exec_ok(db, "BEGIN");
    ck_assert_int_eq(insert_rows(db, 1, 3000, 200), SQLITE_OK);
    exec_ok(db, "COMMIT");
    long long sum = q_int(db, "SELECT sum(length(b)) + sum(a) FROM t");
    close_ok(db);
    db = db_open_ok(t.path, "");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 3000);
    ck_assert_int_eq(q_int(db, "SELECT sum(length(b)) + sum(a) FROM t"), sum);
    ck_assert_str_eq(q_text(db, "PRAGMA journal_mode", r, sizeof r), "memory");
    integrity_ok(db);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* A transaction larger than the page cache: SQLite writes pages to the
 * file before COMMIT. Reads see them; ROLLBACK drops them. */
START_TEST(test_rollback_after_spill)
{
    struct test_pool t;
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "");
    exec_ok(db, "PRAGMA cache_size = 5; CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
    ck_assert_int_eq(insert_rows(db, 1, 10, 100), SQLITE_OK);
    long long pages = q_int(db, "PRAGMA page_count");
    exec_ok(db, "BEGIN");
    ck_assert_int_eq(insert_rows(db, 100, 3000, 300), SQLITE_OK);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 3010);
    exec_ok(db, "UPDATE t SET b = zeroblob(50) WHERE a <= 10");
    exec_ok(db, "ROLLBACK");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 10);
    ck_assert_int_eq(q_int(db, "SELECT sum(length(b)) FROM t"), 1000);
    ck_assert_int_eq(q_int(db, "PRAGMA page_count"), pages);
    integrity_ok(db);
    /* still usable, and what commits stays */
    ck_assert_int_eq(insert_rows(db, 5000, 500, 300), SQLITE_OK);
    close_ok(db);
    db = db_open_ok(t.path, "");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 510);
    integrity_ok(db);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* A statement that fails half-way undoes only itself inside a
 * transaction, and everything outside one; pages had spilled both times. */
START_TEST(test_failed_statement)
{
    struct test_pool t;
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "");
    exec_ok(db, "PRAGMA cache_size = 5; CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB UNIQUE)");
    exec_ok(db, "INSERT INTO t VALUES (100000, x'01')");
    exec_ok(db, "BEGIN");
    exec_ok(db, "INSERT INTO t VALUES (1, x'02')");
    /* 2999 rows go in, the last one collides with x'01' */
    const char *clash =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000) "
        "INSERT INTO t SELECT x + 1, CASE WHEN x = 3000 THEN x'01' ELSE randomblob(300) END "
        "FROM c";
    ck_assert_int_eq(exec_rc(db, clash), SQLITE_CONSTRAINT);
    exec_ok(db, "COMMIT");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 2);
    ck_assert_int_eq(exec_rc(db, clash), SQLITE_CONSTRAINT); /* autocommit */
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 2);
    integrity_ok(db);
    close_ok(db);
    db = db_open_ok(t.path, "");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 2);
    integrity_ok(db);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

START_TEST(test_journal_modes)
{
    static const char *const refused[] = {"OFF", "DELETE", "TRUNCATE", "PERSIST", "WAL"};
    struct test_pool t;
    char sql[128], r[64];
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "");
    exec_ok(db, "CREATE TABLE t(a)");
    for (unsigned i = 0; i < sizeof refused / sizeof *refused; i++) {
        snprintf(sql, sizeof sql, "PRAGMA journal_mode = %s", refused[i]);
        ck_assert_int_eq(exec_rc(db, sql), SQLITE_ERROR);
        ck_assert_msg(strstr(sqlite3_errmsg(db), "journal_mode") != NULL, "%s: %s", sql,
                      sqlite3_errmsg(db));
        ck_assert_str_eq(q_text(db, "PRAGMA journal_mode", r, sizeof r), "memory");
    }
    ck_assert_str_eq(q_text(db, "PRAGMA journal_mode = MEMORY", r, sizeof r), "memory");
    exec_ok(db, "INSERT INTO t VALUES (1)");
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* Pages smaller and larger than the VFS's 4 KiB blocks, a file that
 * shrinks (VACUUM, auto_vacuum) and grows again, across reopens. */
START_TEST(test_page_sizes)
{
    static const int sizes[] = {512, 1024, 8192, 65536};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        struct test_pool t;
        char sql[128];
        new_db(&t);
        sqlite3 *db = db_open_ok(t.path, "");
        snprintf(sql, sizeof sql, "PRAGMA page_size = %d", sizes[i]);
        exec_ok(db, sql);
        exec_ok(db, "PRAGMA auto_vacuum = FULL; PRAGMA cache_size = 20");
        exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
        ck_assert_int_eq(insert_rows(db, 1, 2000, 500), SQLITE_OK);
        long long full = q_int(db, "PRAGMA page_count");
        exec_ok(db, "DELETE FROM t WHERE a > 100");
        long long cut = q_int(db, "PRAGMA page_count");
        ck_assert_msg(cut < full / 4, "page size %d: %lld pages, %lld after the delete",
                      sizes[i], full, cut);
        /* shrink and grow in one transaction */
        exec_ok(db, "BEGIN");
        exec_ok(db, "DELETE FROM t WHERE a > 50");
        ck_assert_int_eq(insert_rows(db, 10000, 300, 700), SQLITE_OK);
        exec_ok(db, "COMMIT");
        long long sum = q_int(db, "SELECT sum(a) + sum(length(b)) FROM t");
        exec_ok(db, "VACUUM");
        integrity_ok(db);
        close_ok(db);
        db = db_open_ok(t.path, "");
        ck_assert_int_eq(q_int(db, "PRAGMA page_size"), sizes[i]);
        ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 350);
        ck_assert_int_eq(q_int(db, "SELECT sum(a) + sum(length(b)) FROM t"), sum);
        integrity_ok(db);
        close_ok(db);
        ck_assert_int_eq(unlink(t.path), 0);
    }
}
END_TEST

/* Commits into a small pool until one does not fit: SQLITE_FULL, the
 * database as the last commit left it, and it goes on working. */
START_TEST(test_pool_full)
{
    struct test_pool t;
    int rc = SQLITE_OK, n = 0;
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "pmtx_size=16M");
    exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
    while (n < 1000 && (rc = insert_rows(db, 1 + 250LL * n, 250, 2000)) == SQLITE_OK)
        n++;
    ck_assert_msg(rc == SQLITE_FULL, "after %d commits: %s (%d)", n, sqlite3_errmsg(db), rc);
    ck_assert_msg(strstr(last_log, "pool is full") || strstr(last_log, "log"), "log: %s",
                  last_log);
    ck_assert_int_gt(n, 5);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 250LL * n);
    integrity_ok(db);
    /* small changes still fit: ten rows out, five in (on free pages) */
    char sql[128];
    snprintf(sql, sizeof sql, "DELETE FROM t WHERE a > %lld", 250LL * n - 10);
    exec_ok(db, sql);
    ck_assert_int_eq(insert_rows(db, 1000000, 5, 2000), SQLITE_OK);
    close_ok(db);
    db = db_open_ok(t.path, "");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 250LL * n - 5);
    integrity_ok(db);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* Bytes the file holds (its chunk table for 128 GiB is a hole). */
static long long held(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (long long)st.st_blocks * 512;
}

/* A new database starts small and grows: 24 MB of rows, one commit each
 * 500 KB, in a pool that started at 4 MiB (the pmdk engine's pools do not
 * grow: there it starts at its least and fills); with pmtx_max=16M it
 * grows to 16 MiB and then is full (its first heap of 1 MiB held one
 * commit). */
START_TEST(test_pool_grows)
{
    struct test_pool t;
    int n = 0, rc = SQLITE_OK, grows = strcmp(txn_engine_name(), "pmdk") != 0;
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "");
    exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
    ck_assert_int_lt(held(t.path), (grows ? 8LL : 20LL) << 20);
    while (n < 48 && (rc = insert_rows(db, 1 + 250LL * n, 250, 2000)) == SQLITE_OK)
        n++;
    if (grows) {
        ck_assert_msg(rc == SQLITE_OK, "after %d commits: %s (%d); log: %s", n,
                      sqlite3_errmsg(db), rc, last_log);
        ck_assert_int_gt(held(t.path), 24LL << 20);
    } else {
        ck_assert_int_eq(rc, SQLITE_FULL);
    }
    close_ok(db);
    db = db_open_ok(t.path, "");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 250LL * n);
    integrity_ok(db);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
    if (!grows)
        return;
    new_db(&t);
    db = db_open_ok(t.path, "pmtx_max=16M");
    exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
    for (n = 0; n < 48 && (rc = insert_rows(db, 1 + 250LL * n, 250, 2000)) == SQLITE_OK;)
        n++;
    ck_assert_msg(rc == SQLITE_FULL, "after %d commits: %s (%d)", n, sqlite3_errmsg(db), rc);
    ck_assert_int_gt(n, 5);
    ck_assert_int_le(held(t.path), 16LL << 20);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 250LL * n);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* A transaction that spills past what the pool can map fails with
 * SQLITE_FULL in the middle of a write; SQLite rolls it back without
 * rewriting the pages it spilled, so the VFS must drop them (at the
 * unlock): the next commit may not carry them into the pool. */
START_TEST(test_spill_error)
{
    struct test_pool t;
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "pmtx_size=16M");
    exec_ok(db, "PRAGMA cache_size = 5; CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
    ck_assert_int_eq(insert_rows(db, 1, 100, 1000), SQLITE_OK);
    exec_ok(db, "BEGIN");
    int rc = insert_rows(db, 1000, 30000, 1000); /* 30 MB */
    ck_assert_msg(rc == SQLITE_FULL, "%s (%d)", sqlite3_errmsg(db), rc);
    exec_rc(db, "ROLLBACK"); /* SQLite may have ended it already */
    ck_assert_int_eq(insert_rows(db, 100000, 10, 1000), SQLITE_OK);
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 110);
    integrity_ok(db);
    close_ok(db);
    db = db_open_ok(t.path, "");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 110);
    integrity_ok(db);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* Two connections of one process: SQLite's locks between them, and a
 * reader never sees what the writer has not committed. */
START_TEST(test_two_connections)
{
    struct test_pool t;
    sqlite3_stmt *st;
    new_db(&t);
    sqlite3 *a = db_open_ok(t.path, ""), *b = db_open_ok(t.path, "");
    exec_ok(a, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
    ck_assert_int_eq(insert_rows(a, 1, 10, 10), SQLITE_OK);
    /* a writes (RESERVED, pages in its cache): b reads the old rows */
    exec_ok(a, "BEGIN IMMEDIATE");
    ck_assert_int_eq(insert_rows(a, 100, 5, 10), SQLITE_OK);
    ck_assert_int_eq(exec_rc(b, "BEGIN IMMEDIATE"), SQLITE_BUSY);
    ck_assert_int_eq(q_int(b, "SELECT count(*) FROM t"), 10);
    /* b in the middle of a read: a cannot commit yet */
    ck_assert_int_eq(sqlite3_prepare_v2(b, "SELECT a FROM t", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(exec_rc(a, "COMMIT"), SQLITE_BUSY);
    sqlite3_finalize(st);
    exec_ok(a, "COMMIT");
    ck_assert_int_eq(q_int(b, "SELECT count(*) FROM t"), 15);
    /* a spills (EXCLUSIVE): b waits, then sees nothing of a's rollback */
    exec_ok(a, "PRAGMA cache_size = 5");
    exec_ok(a, "BEGIN");
    ck_assert_int_eq(insert_rows(a, 1000, 2000, 300), SQLITE_OK);
    ck_assert_int_eq(exec_rc(b, "SELECT count(*) FROM t"), SQLITE_BUSY);
    exec_ok(a, "ROLLBACK");
    ck_assert_int_eq(q_int(b, "SELECT count(*) FROM t"), 15);
    ck_assert_int_eq(insert_rows(b, 5000, 5, 10), SQLITE_OK);
    ck_assert_int_eq(q_int(a, "SELECT count(*) FROM t"), 20);
    close_ok(a);
    integrity_ok(b);
    close_ok(b);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* Threads, each with its connection, write and read at once; SQLite's
 * busy handler waits out the locks. Every committed row is there, and
 * readers never see a count that no commit made. */
#define THREADS 4
#define THREAD_TXNS 40

struct worker {
    const char *path;
    int id, failed;
};

/* A reader's view: the counter and the rows agree (no assertion: this
 * runs in a thread of its own). */
static int rows_agree(sqlite3 *db)
{
    sqlite3_stmt *st;
    int ok = sqlite3_prepare_v2(db, "SELECT (SELECT rows FROM n) = (SELECT count(*) FROM t)", -1,
                                &st, NULL) == SQLITE_OK &&
             sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1;
    sqlite3_finalize(st);
    return ok;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    sqlite3 *db;
    char sql[SQL_LEN];
    if (db_open(w->path, "", SQLITE_OPEN_READWRITE, &db)) {
        w->failed = 1;
        return NULL;
    }
    sqlite3_busy_timeout(db, 10000);
    for (int i = 0; i < THREAD_TXNS && !w->failed; i++) {
        snprintf(sql, sizeof sql,
                 "BEGIN IMMEDIATE; INSERT INTO t(a, b) VALUES (%d, randomblob(%d));"
                 "UPDATE n SET rows = rows + 1; COMMIT",
                 w->id * 1000 + i, 100 + 37 * i);
        if (exec_rc(db, sql) || !rows_agree(db))
            w->failed = 1;
    }
    sqlite3_close(db);
    return NULL;
}

START_TEST(test_threads)
{
    struct test_pool t;
    pthread_t th[THREADS];
    struct worker w[THREADS];
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "");
    exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB); CREATE TABLE n(rows);"
                "INSERT INTO n VALUES (0)");
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){t.path, i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(!w[i].failed, "thread %d failed", i);
    }
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), THREADS * THREAD_TXNS);
    ck_assert_int_eq(q_int(db, "SELECT rows FROM n"), THREADS * THREAD_TXNS);
    integrity_ok(db);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* A second process cannot open a pool this one has open. */
START_TEST(test_other_process)
{
    struct test_pool t;
    int status;
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "");
    exec_ok(db, "CREATE TABLE t(a)");
    for (int round = 0; round < 2; round++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            sqlite3 *other;
            int rc = db_open(t.path, "", SQLITE_OPEN_READWRITE, &other);
            if (rc == SQLITE_OK)
                rc = exec_rc(other, "INSERT INTO t VALUES (1)") ? 99 : 0;
            sqlite3_close(other);
            _exit(rc);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        /* busy while open here; once closed, the other process writes */
        ck_assert_int_eq(WEXITSTATUS(status), round == 0 ? SQLITE_BUSY : SQLITE_OK);
        if (round == 0)
            close_ok(db);
    }
    db = db_open_ok(t.path, "");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 1);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* ---- files the VFS must refuse, leaving them as they were */

/* Opening `path` fails with `want`, logs a reason containing `why`, and
 * leaves the file byte for byte as it was. */
static void refused(const char *path, int want, const char *why)
{
    size_t n0, n1;
    unsigned char *before = test_slurp(path, &n0);
    sqlite3 *db;
    *last_log = '\0';
    int rc = db_open(path, "", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &db);
    if (rc == SQLITE_OK) {
        rc = exec_rc(db, "SELECT * FROM sqlite_master");
        sqlite3_close(db);
    }
    ck_assert_msg(rc == want, "%s: %s (%d), expected %s; log: %s", path, sqlite3_errstr(rc), rc,
                  sqlite3_errstr(want), last_log);
    ck_assert_msg(strstr(last_log, why) && strstr(last_log, path), "%s: log says '%s', not '%s'",
                  path, last_log, why);
    unsigned char *after = test_slurp(path, &n1);
    ck_assert_msg(n0 == n1 && !memcmp(before, after, n0), "%s changed", path);
    free(before);
    free(after);
}

/* A pool made by the VFS, with a table and a row. */
static void make_pool(const char *path)
{
    sqlite3 *db = db_open_ok(path, "");
    exec_ok(db, "CREATE TABLE t(a); INSERT INTO t VALUES (42)");
    close_ok(db);
}

START_TEST(test_not_a_pool)
{
    struct test_pool t;
    sqlite3 *db;
    new_db(&t);
    test_spew(t.path, "hello, world\n", 13);
    refused(t.path, SQLITE_NOTADB, "not a pmtx pool");
    test_spew(t.path, "", 0);
    refused(t.path, SQLITE_NOTADB, "not a pmtx pool");
    /* a database of SQLite's own VFS */
    ck_assert_int_eq(unlink(t.path), 0);
    ck_assert_int_eq(sqlite3_open(t.path, &db), SQLITE_OK);
    exec_ok(db, "CREATE TABLE t(a); INSERT INTO t VALUES (1)");
    close_ok(db);
    refused(t.path, SQLITE_NOTADB, "not a pmtx pool");
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

START_TEST(test_other_layout)
{
    struct test_pool t;
    txn_pool *p;
    txn_pool_opts o = {.size = (size_t)16 << 20};
    new_db(&t);
    CHECK_OK(txn_pool_create(t.name, "some-other-program", &o, &p));
    txn_pool_close(p);
    refused(t.path, SQLITE_NOTADB, "layout");
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

START_TEST(test_truncated_pool)
{
    struct test_pool t;
    new_db(&t);
    make_pool(t.path);
    ck_assert_int_eq(truncate(t.path, 1 << 20), 0);
    refused(t.path, SQLITE_CORRUPT, "truncated");
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

START_TEST(test_corrupt_pool)
{
    struct test_pool t;
    size_t n;
    new_db(&t);
    make_pool(t.path);
    unsigned char *img = test_slurp(t.path, &n);
    img[100] ^= 0x5a; /* a checksummed field of the header, both formats */
    test_spew(t.path, img, n);
    free(img);
    refused(t.path, SQLITE_CORRUPT, "corrupt");
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* A hot journal of another database under the pool's journal name: SQLite
 * would play it into the file; the VFS says no journal exists. */
START_TEST(test_stale_journal)
{
    struct test_pool t, other;
    char journal[TEST_PATH_LEN + 16], other_journal[TEST_PATH_LEN + 16];
    int status;
    new_db(&t);
    new_db(&other);
    sqlite3 *db = db_open_ok(t.path, "");
    exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
    ck_assert_int_eq(insert_rows(db, 1, 1000, 100), SQLITE_OK);
    long long sum = q_int(db, "SELECT sum(a) + sum(length(b)) FROM t");
    close_ok(db);
    /* a default-VFS database killed in the middle of a transaction that
     * spilled: its rollback journal stays behind, hot */
    ck_assert_int_eq(sqlite3_open(other.path, &db), SQLITE_OK);
    exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
    ck_assert_int_eq(insert_rows(db, 1, 1000, 100), SQLITE_OK);
    close_ok(db);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (sqlite3_open(other.path, &db) || exec_rc(db, "PRAGMA cache_size = 2; BEGIN") ||
            exec_rc(db, "UPDATE t SET b = zeroblob(100)"))
            _exit(1);
        kill(getpid(), SIGKILL);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    snprintf(journal, sizeof journal, "%s-journal", t.path);
    snprintf(other_journal, sizeof other_journal, "%s-journal", other.path);
    ck_assert_msg(rename(other_journal, journal) == 0, "no hot journal: %s", strerror(errno));
    db = db_open_ok(t.path, "");
    ck_assert_int_eq(q_int(db, "SELECT sum(a) + sum(length(b)) FROM t"), sum);
    integrity_ok(db);
    close_ok(db);
    ck_assert_int_eq(access(journal, F_OK), 0); /* not the VFS's to delete */
    ck_assert_int_eq(unlink(journal), 0);
    ck_assert_int_eq(unlink(t.path), 0);
    ck_assert_int_eq(unlink(other.path), 0);
}
END_TEST

/* locking_mode=EXCLUSIVE sends no unlock at the end of a transaction:
 * SQLite's own rollback rewrites the old pages, and the next commit
 * writes the staged state, which is the committed one. */
START_TEST(test_exclusive_locking)
{
    struct test_pool t;
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "");
    exec_ok(db, "PRAGMA locking_mode = EXCLUSIVE; PRAGMA cache_size = 5");
    exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b BLOB)");
    ck_assert_int_eq(insert_rows(db, 1, 100, 100), SQLITE_OK);
    exec_ok(db, "BEGIN");
    ck_assert_int_eq(insert_rows(db, 1000, 2000, 300), SQLITE_OK);
    exec_ok(db, "UPDATE t SET b = zeroblob(10) WHERE a <= 100");
    exec_ok(db, "ROLLBACK");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 100);
    ck_assert_int_eq(q_int(db, "SELECT sum(length(b)) FROM t"), 10000);
    ck_assert_int_eq(insert_rows(db, 5000, 10, 100), SQLITE_OK);
    close_ok(db);
    db = db_open_ok(t.path, "");
    ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 110);
    ck_assert_int_eq(q_int(db, "SELECT sum(length(b)) FROM t"), 11000);
    integrity_ok(db);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* ---- what a commit costs */

struct cost {
    double barriers, lines, log_bytes;
};

/* The engine's counters per run of `sql` (a transaction), over n runs. */
static struct cost per_commit(sqlite3 *db, const char *sql, int n)
{
    txn_stats a, b;
    txn_stats_get(&a);
    for (int i = 0; i < n; i++)
        exec_ok(db, sql);
    txn_stats_get(&b);
    return (struct cost){(double)(b.barriers - a.barriers) / n,
                         (double)(b.lines_flushed - a.lines_flushed) / n,
                         (double)(b.log_bytes - a.log_bytes) / n};
}

/* Prints barriers, lines and log bytes per SQLite commit for docs/sqlite.md
 * (read with: sqlite-vfs-<engine>, CK_RUN_CASE=cost); checks that a
 * read-only transaction costs what a read-only txn.h transaction does,
 * and that on incll synchronous=OFF leaves durability to the epoch. */
START_TEST(test_commit_cost)
{
    struct test_pool t;
    int incll = !strcmp(PMTX_LINKED_ENGINE, "incll");
    new_db(&t);
    sqlite3 *db = db_open_ok(t.path, "");
    exec_ok(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);"
                "CREATE TABLE stock(id INTEGER PRIMARY KEY, qty INTEGER, data TEXT);"
                "CREATE TABLE line(o INTEGER, n INTEGER, item INTEGER, amount REAL, info TEXT,"
                "                  PRIMARY KEY (o, n))");
    exec_ok(db, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000)"
                " INSERT INTO stock SELECT x, 100, printf('%050d', x) FROM c");
    const char *row = "INSERT INTO t(b) VALUES ('a row of about forty bytes, no more')";
    /* New-Order's shape: ten stock rows read and changed, an order of ten
     * lines inserted (one transaction) */
    const char *order =
        "BEGIN;"
        "UPDATE stock SET qty = qty - 1 WHERE id IN (SELECT abs(random()) % 10000 + 1"
        "  FROM (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4"
        "  UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8"
        "  UNION ALL SELECT 9 UNION ALL SELECT 10));"
        "INSERT INTO line SELECT (SELECT count(*) FROM line) / 10 + 1, x, x * 7, x * 1.5,"
        "  printf('%024d', x) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1"
        "  FROM c WHERE x < 10) SELECT x FROM c);"
        "COMMIT";
    const char *read = "SELECT count(*) FROM stock WHERE qty < 100";
    per_commit(db, row, 20); /* warm: pages made, logs grown, epoch logged */
    per_commit(db, order, 20);
    for (int sync = 0; sync < (incll ? 2 : 1); sync++) {
        exec_ok(db, sync ? "PRAGMA synchronous = OFF" : "PRAGMA synchronous = FULL");
        per_commit(db, row, 5);
        per_commit(db, order, 5);
        struct cost r = per_commit(db, row, 200), o = per_commit(db, order, 200),
                    q = per_commit(db, read, 200);
        printf("sqlite commit cost: engine %s, synchronous %s, pdom %d: one-row insert %.2f "
               "barriers %.1f lines %.0f log bytes; new-order %.2f barriers %.1f lines %.0f log "
               "bytes; read-only %.2f barriers\n",
               txn_engine_name(), sync ? "OFF" : "FULL", txn_pdom(), r.barriers, r.lines,
               r.log_bytes, o.barriers, o.lines, o.log_bytes, q.barriers);
        fflush(stdout);
        /* a read begins and ends one txn.h transaction: pmdk's costs 2 */
        ck_assert_msg(q.barriers == (strcmp(PMTX_LINKED_ENGINE, "pmdk") ? 0.0 : 2.0),
                      "read-only: %.2f barriers", q.barriers);
        if (incll && !sync) /* each commit waits for an epoch's end */
            ck_assert_msg(r.barriers >= 1.0, "synchronous=FULL: %.2f barriers", r.barriers);
        if (incll && sync) /* TXN_EPOCH_MS=0: epochs end only at txn_sync; what
                            * is left is the first write of a page in an epoch */
            ck_assert_msg(r.barriers < 0.5, "synchronous=OFF: %.2f barriers", r.barriers);
    }
    fflush(stdout);
    close_ok(db);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

int main(void)
{
    sqlite3_config(SQLITE_CONFIG_LOG, on_log, NULL);
    /* registered once; a second call changes nothing */
    if (pmtx_sqlite_register(0) != SQLITE_OK || pmtx_sqlite_register(0) != SQLITE_OK) {
        fprintf(stderr, "pmtx_sqlite_register failed\n");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("sqlite_vfs");
    TCase *tc = test_tcase(s, "vfs", 300);
    tcase_add_test(tc, test_make_reopen);
    tcase_add_test(tc, test_rollback_after_spill);
    tcase_add_test(tc, test_failed_statement);
    tcase_add_test(tc, test_journal_modes);
    tcase_add_test(tc, test_page_sizes);
    tcase_add_test(tc, test_pool_full);
    tcase_add_test(tc, test_pool_grows);
    tcase_add_test(tc, test_spill_error);
    tcase_add_test(tc, test_two_connections);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_other_process);
    tcase_add_test(tc, test_exclusive_locking);
    tc = test_tcase(s, "refuse", 300);
    tcase_add_test(tc, test_not_a_pool);
    tcase_add_test(tc, test_other_layout);
    tcase_add_test(tc, test_truncated_pool);
    tcase_add_test(tc, test_corrupt_pool);
    tcase_add_test(tc, test_stale_journal);
    tc = test_tcase(s, "cost", 300);
    tcase_add_test(tc, test_commit_cost);
    return test_run(s, CK_FORK_GETENV, TAG);
}
