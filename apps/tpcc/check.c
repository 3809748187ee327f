/* check.c - TPC-C's consistency conditions 1-4 (clause 3.3.2.1-4) and
 * SQLite's integrity_check, after a run or after a crash. */
#include <string.h>

#include "tpcc.h"

static const struct {
    const char *what, *sql; /* sql returns one row per violation */
} conditions[] = {
    {"1: W_YTD = sum(D_YTD)",
     "SELECT w_id FROM warehouse WHERE w_ytd !="
     " (SELECT SUM(d_ytd) FROM district WHERE d_w_id = w_id)"},
    {"2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
     "SELECT d_w_id, d_id FROM district WHERE d_next_o_id - 1 !="
     " (SELECT MAX(o_id) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id)"
     " OR d_next_o_id - 1 != IFNULL((SELECT MAX(no_o_id) FROM new_order"
     " WHERE no_w_id = d_w_id AND no_d_id = d_id), d_next_o_id - 1)"},
    {"3: max(NO_O_ID) - min(NO_O_ID) + 1 = rows of NEW-ORDER",
     "SELECT no_w_id, no_d_id FROM new_order GROUP BY no_w_id, no_d_id"
     " HAVING MAX(no_o_id) - MIN(no_o_id) + 1 != COUNT(*)"},
    {"4: sum(O_OL_CNT) = rows of ORDER-LINE",
     "SELECT a.w, a.d FROM (SELECT o_w_id w, o_d_id d, SUM(o_ol_cnt) n FROM orders"
     " GROUP BY 1, 2) a LEFT JOIN (SELECT ol_w_id w, ol_d_id d, COUNT(*) n FROM order_line"
     " GROUP BY 1, 2) b ON a.w = b.w AND a.d = b.d WHERE a.n != IFNULL(b.n, 0)"},
};

/* rows of a query, each printed after `what`; -1 on an error */
static int violations(sqlite3 *db, const char *what, const char *sql, FILE *out)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(out, "tpcc: check %s: %s\n", what, sqlite3_errmsg(db));
        return -1;
    }
    int n = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *a = (const char *)sqlite3_column_text(st, 0);
        if (!strcmp(what, "integrity_check") && a && !strcmp(a, "ok"))
            continue;
        fprintf(out, "tpcc: condition %s fails: %s", what, a ? a : "NULL");
        for (int i = 1; i < sqlite3_column_count(st); i++)
            fprintf(out, " %s", (const char *)sqlite3_column_text(st, i));
        fputc('\n', out);
        n++;
    }
    if (rc != SQLITE_DONE) {
        fprintf(out, "tpcc: check %s: %s\n", what, sqlite3_errmsg(db));
        n = -1;
    }
    sqlite3_finalize(st);
    return n;
}

int tpcc_check(sqlite3 *db, FILE *out)
{
    int failed = 0;
    if (tpcc_exec(db, "BEGIN") != SQLITE_OK)
        return 1;
    for (size_t i = 0; i < sizeof conditions / sizeof *conditions; i++) {
        int n = violations(db, conditions[i].what, conditions[i].sql, out);
        failed += n < 0 ? 1 : n;
    }
    int n = violations(db, "integrity_check", "PRAGMA integrity_check", out);
    failed += n < 0 ? 1 : n;
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    return failed;
}
