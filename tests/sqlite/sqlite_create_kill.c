/* sqlite_create_kill.c - the VFS's creation of a database SIGKILLed at
 * random moments (the child opens a new database and makes a table), then
 * a start that opens it, creating what is missing: it succeeds, the
 * database passes PRAGMA integrity_check and takes a row (issue #41, item
 * 5). create_kill.h runs the rounds; scripts/create_kill.sh runs 200 of
 * them. Built for the persistent engines. */
#include <check.h>
#include <sqlite3.h>

#include "create_kill.h"
#include "pmtx_sqlite.h"

#define TAG "sqlckill"

/* The database `name`, made if missing; NULL with SQLite's reason in
 * why[cap]. */
static sqlite3 *open_db(const char *name, char *why, size_t cap)
{
    char path[TEST_PATH_LEN], uri[TEST_PATH_LEN + 64];
    sqlite3 *db;
    if (test_pool_path(name, path, sizeof path))
        return NULL;
    snprintf(uri, sizeof uri, "file:%s?vfs=pmtx&pmtx_size=32M", path);
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                        NULL) == SQLITE_OK)
        return db;
    snprintf(why, cap, "open: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return NULL;
}

static int make(const char *name)
{
    char why[256];
    sqlite3 *db = open_db(name, why, sizeof why);
    int rc = !db || sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS t(x)", NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

static int start(const char *name, char *why, size_t cap)
{
    sqlite3 *db = open_db(name, why, cap);
    sqlite3_stmt *st = NULL;
    int rc = 1;
    if (!db)
        return 1;
    if (sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS t(x); INSERT INTO t VALUES (1)", NULL,
                     NULL, NULL))
        snprintf(why, cap, "create table, insert: %s", sqlite3_errmsg(db));
    else if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) ||
             sqlite3_step(st) != SQLITE_ROW)
        snprintf(why, cap, "integrity_check: %s", sqlite3_errmsg(db));
    else if (strcmp((const char *)sqlite3_column_text(st, 0), "ok"))
        snprintf(why, cap, "integrity_check: %s", sqlite3_column_text(st, 0));
    else
        rc = 0;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}

START_TEST(test_create_kill)
{
    struct ck_target t = {"vfs-" PMTX_LINKED_ENGINE, make, start};
    ck_assert_int_eq(pmtx_sqlite_register(0), SQLITE_OK);
    create_kill_rounds(&t, TAG);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sqlite_create_kill");
    TCase *tc = test_tcase(s, "kills", CREATE_KILL_SECONDS);
    tcase_add_test(tc, test_create_kill);
    return test_run(s, CK_FORK_GETENV, TAG);
}
