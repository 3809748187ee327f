/* sqlite_attach_kill.c - SIGKILL a process in the middle of SQLite
 * transactions over a main and an ATTACHed pmtx database (issue #42, item
 * 3), then check both: every transaction whose COMMIT returned before the
 * kill is in both, at most one more, and none in one database only.
 *
 * Transaction i (the child's): c.v = i in both databases and a row of 300
 * to 3000 random bytes into t of each (older rows deleted, so that pages
 * are freed and reused); it writes i to a pipe once COMMIT returned. The
 * parent kills it 5 to 60 ms into a round, then opens the attached
 * database alone first on odd rounds (its pool's recovery then opens the
 * main one's when a transaction was in doubt: txn_join), the main one
 * first on even ones, and checks c.v equal in both, the acknowledged
 * value or one more, and PRAGMA integrity_check. SQLITE_ATTACH_KILLS
 * rounds (default 10; scripts/join_kill.sh runs 200); SQLITE_KILL_SEED
 * repeats them. On the engines that join (txn.h: txn_join). */
#define _GNU_SOURCE
#include <check.h>
#include <signal.h>
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

#define TAG "sqlattach"

static sqlite3 *open_db(const char *path)
{
    char uri[TEST_PATH_LEN + 64];
    sqlite3 *db;
    snprintf(uri, sizeof uri, "file:%s?vfs=pmtx&pmtx_size=16M", path);
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                        NULL)) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

static int attach(sqlite3 *db, const char *path)
{
    char sql[TEST_PATH_LEN + 96];
    snprintf(sql, sizeof sql, "ATTACH 'file:%s?vfs=pmtx&pmtx_size=16M' AS aux", path);
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

static void child_main(const char *main_path, const char *aux_path, int fd, uint64_t seed)
{
    sqlite3 *db = open_db(main_path);
    if (!db || attach(db, aux_path) || sqlite3_exec(db, "PRAGMA cache_size = 8", NULL, NULL, NULL))
        _exit(10);
    for (;;) {
        char sql[512];
        long long i = one_int(db, "SELECT v FROM main.c") + 1;
        int len = 300 + (int)(test_rand(&seed) % 2700);
        snprintf(sql, sizeof sql,
                 "BEGIN;"
                 "UPDATE main.c SET v = %lld; INSERT INTO main.t VALUES (%lld, randomblob(%d));"
                 "DELETE FROM main.t WHERE id < %lld;"
                 "UPDATE aux.c SET v = %lld; INSERT INTO aux.t VALUES (%lld, randomblob(%d));"
                 "DELETE FROM aux.t WHERE id < %lld;"
                 "COMMIT",
                 i, i, len, i - 40, i, i, len, i - 40);
        if (i <= 0 || sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
            _exit(11);
        uint64_t v = (uint64_t)i;
        if (write(fd, &v, sizeof v) != (ssize_t)sizeof v)
            _exit(12);
    }
}

static long long check_pair(const char *main_path, const char *aux_path, unsigned round)
{
    sqlite3 *db;
    if (round % 2) { /* the attached one alone first */
        db = open_db(aux_path);
        ck_assert_msg(db != NULL, "round %u: the attached database does not open alone", round);
        ck_assert_int_ge(one_int(db, "SELECT v FROM c"), 0);
        ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
    }
    db = open_db(main_path);
    ck_assert_msg(db != NULL, "round %u: the main database does not open", round);
    ck_assert_int_eq(attach(db, aux_path), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
    long long a = one_int(db, "SELECT v FROM main.c"), b = one_int(db, "SELECT v FROM aux.c");
    ck_assert_msg(a == b, "round %u: main holds transaction %lld, the attached one %lld", round,
                  a, b);
    ck_assert_int_eq(one_int(db, "SELECT max(id) FROM main.t"), a);
    ck_assert_int_eq(one_int(db, "SELECT max(id) FROM aux.t"), b);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
    return a;
}

START_TEST(test_attach_kill)
{
    struct test_pool m, x;
    unsigned rounds = (unsigned)env_u64("SQLITE_ATTACH_KILLS", 10), in_flight = 0;
    uint64_t seed = env_u64("SQLITE_KILL_SEED", (uint64_t)time(NULL) ^ (uint64_t)getpid());
    printf("sqlite attach kill: engine %s, %u rounds, SQLITE_KILL_SEED=%llu\n",
           txn_engine_name(), rounds, (unsigned long long)seed);
    fflush(stdout);
    srand((unsigned)seed);
    CHECK_OK(test_pool_new(&m, TAG));
    CHECK_OK(test_pool_new(&x, TAG));
    /* made in one process, the second while the first is open: their
     * address ranges differ (docs/join.md) */
    sqlite3 *db = open_db(m.path);
    ck_assert_ptr_nonnull(db);
    ck_assert_int_eq(attach(db, x.path), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db,
                                  "CREATE TABLE main.c(v INTEGER); INSERT INTO main.c VALUES (0);"
                                  "CREATE TABLE main.t(id INTEGER PRIMARY KEY, pad BLOB);"
                                  "CREATE TABLE aux.c(v INTEGER); INSERT INTO aux.c VALUES (0);"
                                  "CREATE TABLE aux.t(id INTEGER PRIMARY KEY, pad BLOB)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
    long long n = 0;
    for (unsigned r = 1; r <= rounds; r++) {
        struct acks a = {0};
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        uint64_t child_seed = (uint64_t)rand() << 16 | r;
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(fds[0]);
            child_main(m.path, x.path, fds[1], child_seed);
        }
        close(fds[1]);
        a.last = (uint64_t)n; /* the child goes on from the last state */
        uint64_t sleep_ns = (5 + (uint64_t)(rand() % 56)) * 1000000u;
        int status = acks_kill_child(fds[0], pid, &a, sleep_ns);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                      "round %u: child stopped by itself (status 0x%x: 10 open, 11 SQL, 12 pipe)",
                      r, (unsigned)status);
        long long got = check_pair(m.path, x.path, r);
        ck_assert_msg(got == (long long)a.last || got == (long long)a.last + 1,
                      "round %u: transaction %lld in both, %llu acknowledged", r, got,
                      (unsigned long long)a.last);
        in_flight += got != (long long)a.last;
        n = got;
    }
    printf("sqlite attach kill: %u rounds, %lld transactions, 0 in one database only, %u with "
           "the one in flight committed\n", rounds, n, in_flight);
    ck_assert_int_eq(unlink(m.path), 0);
    ck_assert_int_eq(unlink(x.path), 0);
}
END_TEST

int main(void)
{
    if (pmtx_sqlite_register(0) != SQLITE_OK) {
        fprintf(stderr, "pmtx_sqlite_register failed\n");
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("sqlite_attach_kill");
    TCase *tc = test_tcase(s, "sigkill", 60.0 + 1.0 * (double)env_u64("SQLITE_ATTACH_KILLS", 10));
    tcase_add_test(tc, test_attach_kill);
    return test_run(s, CK_FORK_GETENV, TAG);
}
