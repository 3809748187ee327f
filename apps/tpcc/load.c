/* load.c - TPC-C's tables, their initial population (clause 4.3) and the
 * random input rules both share (clause 2.1.6, 4.3.2). Money is kept in
 * cents as integers, so that consistency condition 1 is an exact
 * comparison. */
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "tpcc.h"

/* xorshift64*: fast, and each terminal has its own */
uint64_t rnd_next(struct rnd *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}

int rnd_int(struct rnd *r, int lo, int hi)
{
    return lo + (int)(rnd_next(r) % (uint64_t)(hi - lo + 1));
}

/* The run-time constants C (clause 2.1.6): C_LAST's differs from the
 * load's by 66, within the allowed 65..119 and not 96 or 112. */
#define C_LAST_LOAD 157
#define C_LAST_RUN 223
#define C_ID 259
#define C_OL_I_ID 7911

static int nurand_c(struct rnd *r, int a, int c, int x, int y)
{
    return (((rnd_int(r, 0, a) | rnd_int(r, x, y)) + c) % (y - x + 1)) + x;
}

int rnd_nurand(struct rnd *r, int a, int x, int y)
{
    int c = a == 255 ? C_LAST_RUN : a == 1023 ? C_ID : C_OL_I_ID;
    return nurand_c(r, a, c, x, y);
}

static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

int rnd_astring(struct rnd *r, char *out, int lo, int hi)
{
    int n = rnd_int(r, lo, hi);
    for (int i = 0; i < n; i++)
        out[i] = alnum[rnd_next(r) % (sizeof alnum - 1)];
    out[n] = 0;
    return n;
}

int rnd_nstring(struct rnd *r, char *out, int lo, int hi)
{
    int n = rnd_int(r, lo, hi);
    for (int i = 0; i < n; i++)
        out[i] = (char)('0' + rnd_next(r) % 10);
    out[n] = 0;
    return n;
}

void tpcc_last_name(int n, char *out)
{
    static const char *const syl[10] = {"BAR", "OUGHT", "ABLE", "PRI",   "PRES",
                                        "ESE", "ANTI",  "CALLY", "ATION", "EING"};
    strcpy(out, syl[n / 100]);
    strcat(out, syl[n / 10 % 10]);
    strcat(out, syl[n % 10]);
}

int tpcc_run_last(struct rnd *r, const struct scale *s)
{
    /* a smaller test scale loads names 0..customers-1 only */
    int top = s->customers < 1000 ? s->customers - 1 : 999;
    return rnd_nurand(r, 255, 0, top);
}

int tpcc_exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fprintf(stderr, "tpcc: %s: %s\n", err ? err : sqlite3_errstr(rc), sql);
    sqlite3_free(err);
    return rc;
}

static const char schema[] =
    "CREATE TABLE warehouse (w_id INTEGER PRIMARY KEY, w_name TEXT, w_street_1 TEXT,"
    " w_street_2 TEXT, w_city TEXT, w_state TEXT, w_zip TEXT, w_tax REAL, w_ytd INTEGER);"
    "CREATE TABLE district (d_id INTEGER, d_w_id INTEGER, d_name TEXT, d_street_1 TEXT,"
    " d_street_2 TEXT, d_city TEXT, d_state TEXT, d_zip TEXT, d_tax REAL, d_ytd INTEGER,"
    " d_next_o_id INTEGER, PRIMARY KEY (d_w_id, d_id)) WITHOUT ROWID;"
    "CREATE TABLE customer (c_id INTEGER, c_d_id INTEGER, c_w_id INTEGER, c_first TEXT,"
    " c_middle TEXT, c_last TEXT, c_street_1 TEXT, c_street_2 TEXT, c_city TEXT,"
    " c_state TEXT, c_zip TEXT, c_phone TEXT, c_since INTEGER, c_credit TEXT,"
    " c_credit_lim INTEGER, c_discount REAL, c_balance INTEGER, c_ytd_payment INTEGER,"
    " c_payment_cnt INTEGER, c_delivery_cnt INTEGER, c_data TEXT,"
    " PRIMARY KEY (c_w_id, c_d_id, c_id)) WITHOUT ROWID;"
    "CREATE INDEX customer_last ON customer (c_w_id, c_d_id, c_last, c_first);"
    "CREATE TABLE history (h_c_id INTEGER, h_c_d_id INTEGER, h_c_w_id INTEGER,"
    " h_d_id INTEGER, h_w_id INTEGER, h_date INTEGER, h_amount INTEGER, h_data TEXT);"
    "CREATE TABLE new_order (no_o_id INTEGER, no_d_id INTEGER, no_w_id INTEGER,"
    " PRIMARY KEY (no_w_id, no_d_id, no_o_id)) WITHOUT ROWID;"
    "CREATE TABLE orders (o_id INTEGER, o_d_id INTEGER, o_w_id INTEGER, o_c_id INTEGER,"
    " o_entry_d INTEGER, o_carrier_id INTEGER, o_ol_cnt INTEGER, o_all_local INTEGER,"
    " PRIMARY KEY (o_w_id, o_d_id, o_id)) WITHOUT ROWID;"
    "CREATE INDEX orders_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);"
    "CREATE TABLE order_line (ol_o_id INTEGER, ol_d_id INTEGER, ol_w_id INTEGER,"
    " ol_number INTEGER, ol_i_id INTEGER, ol_supply_w_id INTEGER, ol_delivery_d INTEGER,"
    " ol_quantity INTEGER, ol_amount INTEGER, ol_dist_info TEXT,"
    " PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)) WITHOUT ROWID;"
    "CREATE TABLE item (i_id INTEGER PRIMARY KEY, i_im_id INTEGER, i_name TEXT,"
    " i_price INTEGER, i_data TEXT);"
    "CREATE TABLE stock (s_i_id INTEGER, s_w_id INTEGER, s_quantity INTEGER,"
    " s_dist_01 TEXT, s_dist_02 TEXT, s_dist_03 TEXT, s_dist_04 TEXT, s_dist_05 TEXT,"
    " s_dist_06 TEXT, s_dist_07 TEXT, s_dist_08 TEXT, s_dist_09 TEXT, s_dist_10 TEXT,"
    " s_ytd INTEGER, s_order_cnt INTEGER, s_remote_cnt INTEGER, s_data TEXT,"
    " PRIMARY KEY (s_w_id, s_i_id)) WITHOUT ROWID;"
    "CREATE TABLE tpcc_meta (k INTEGER PRIMARY KEY, warehouses INTEGER, items INTEGER,"
    " customers INTEGER);";

int tpcc_create(sqlite3 *db)
{
    return tpcc_exec(db, schema);
}

/* One insert statement, bound column by column from a format: i an int,
 * I an int64, r a double, s a string, n NULL (which takes no argument). */
struct ins {
    sqlite3 *db;
    sqlite3_stmt *st;
    long *pending; /* rows since the last commit */
};

static int ins_prepare(struct ins *x, sqlite3 *db, const char *sql, long *pending)
{
    x->db = db;
    x->pending = pending;
    int rc = sqlite3_prepare_v2(db, sql, -1, &x->st, NULL);
    if (rc != SQLITE_OK)
        fprintf(stderr, "tpcc: %s: %s\n", sqlite3_errmsg(db), sql);
    return rc;
}

/* Commit every this many rows: one SQLite (and txn.h) transaction does
 * not have to stage the whole load. */
#define LOAD_BATCH 5000

static int ins_row(struct ins *x, const char *fmt, ...)
{
    if ((int)strlen(fmt) != sqlite3_bind_parameter_count(x->st)) {
        fprintf(stderr, "tpcc: load: %s: %d values for %d columns\n", sqlite3_sql(x->st),
                (int)strlen(fmt), sqlite3_bind_parameter_count(x->st));
        return SQLITE_MISUSE;
    }
    va_list ap;
    va_start(ap, fmt);
    for (int i = 1; fmt[i - 1]; i++) {
        switch (fmt[i - 1]) {
        case 'i': sqlite3_bind_int(x->st, i, va_arg(ap, int)); break;
        case 'I': sqlite3_bind_int64(x->st, i, va_arg(ap, long long)); break;
        case 'r': sqlite3_bind_double(x->st, i, va_arg(ap, double)); break;
        case 's': sqlite3_bind_text(x->st, i, va_arg(ap, const char *), -1, SQLITE_TRANSIENT); break;
        default: sqlite3_bind_null(x->st, i); break;
        }
    }
    va_end(ap);
    int rc = sqlite3_step(x->st);
    sqlite3_reset(x->st);
    if (rc != SQLITE_DONE) {
        fprintf(stderr, "tpcc: load: %s\n", sqlite3_errmsg(x->db));
        return rc;
    }
    if (++*x->pending >= LOAD_BATCH) {
        *x->pending = 0;
        if ((rc = tpcc_exec(x->db, "COMMIT; BEGIN")) != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

/* a-string of [lo, hi] with "ORIGINAL" somewhere in 10% of them */
static void rnd_data(struct rnd *r, char *out, int lo, int hi)
{
    int n = rnd_astring(r, out, lo, hi);
    if (rnd_int(r, 1, 10) == 1) {
        int at = rnd_int(r, 0, n - 8);
        memcpy(out + at, "ORIGINAL", 8);
    }
}

static void rnd_zip(struct rnd *r, char *out)
{
    rnd_nstring(r, out, 4, 4);
    strcat(out, "11111");
}

/* name, street 1, street 2, city, state, zip of a warehouse or district */
struct address {
    char name[11], s1[21], s2[21], city[21], state[3], zip[10];
};

static void rnd_address(struct rnd *r, struct address *a)
{
    rnd_astring(r, a->name, 6, 10);
    rnd_astring(r, a->s1, 10, 20);
    rnd_astring(r, a->s2, 10, 20);
    rnd_astring(r, a->city, 10, 20);
    rnd_astring(r, a->state, 2, 2);
    rnd_zip(r, a->zip);
}

static int load_items(struct ins *x, struct rnd *r, const struct scale *s)
{
    char name[25], data[51];
    for (int i = 1; i <= s->items; i++) {
        rnd_astring(r, name, 14, 24);
        rnd_data(r, data, 26, 50);
        int rc = ins_row(x, "iisis", i, rnd_int(r, 1, 10000), name, rnd_int(r, 100, 10000), data);
        if (rc)
            return rc;
    }
    return SQLITE_OK;
}

static int load_stock(struct ins *x, struct rnd *r, const struct scale *s, int w)
{
    char dist[10][25], data[51];
    for (int i = 1; i <= s->items; i++) {
        for (int k = 0; k < 10; k++)
            rnd_astring(r, dist[k], 24, 24);
        rnd_data(r, data, 26, 50);
        int rc = ins_row(x, "iiissssssssssiiis", i, w, rnd_int(r, 10, 100), dist[0], dist[1],
                         dist[2], dist[3], dist[4], dist[5], dist[6], dist[7], dist[8], dist[9],
                         0, 0, 0, data);
        if (rc)
            return rc;
    }
    return SQLITE_OK;
}

static int load_customers(struct ins *cu, struct ins *hi, struct rnd *r, const struct scale *s,
                          int w, int d, long long now)
{
    char first[17], last[16], s1[21], s2[21], city[21], state[3], zip[10], phone[17];
    char data[501], hdata[25];
    for (int c = 1; c <= s->customers; c++) {
        rnd_astring(r, first, 8, 16);
        tpcc_last_name(c <= 1000 ? c - 1 : nurand_c(r, 255, C_LAST_LOAD, 0, 999), last);
        rnd_astring(r, s1, 10, 20);
        rnd_astring(r, s2, 10, 20);
        rnd_astring(r, city, 10, 20);
        rnd_astring(r, state, 2, 2);
        rnd_zip(r, zip);
        rnd_nstring(r, phone, 16, 16);
        rnd_astring(r, data, 300, 500);
        int rc = ins_row(cu, "iiisssssssssIsirIIiis", c, d, w, first, "OE", last, s1, s2, city,
                         state, zip, phone, now, rnd_int(r, 1, 10) == 1 ? "BC" : "GC", 5000000,
                         rnd_int(r, 0, 5000) / 10000.0, -1000LL, 1000LL, 1, 0, data);
        if (rc)
            return rc;
        rnd_astring(r, hdata, 12, 24);
        if ((rc = ins_row(hi, "iiiiiIIs", c, d, w, d, w, now, 1000LL, hdata)))
            return rc;
    }
    return SQLITE_OK;
}

static int load_orders(struct ins *o, struct ins *ol, struct ins *no, struct rnd *r,
                       const struct scale *s, int w, int d, long long now)
{
    int n = s->customers, from = TPCC_NEW_ORDERS_FROM(s);
    int perm[n];
    for (int i = 0; i < n; i++)
        perm[i] = i + 1;
    for (int i = n - 1; i > 0; i--) { /* o_c_id: a random permutation */
        int j = rnd_int(r, 0, i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    char dist[25];
    for (int id = 1; id <= n; id++) {
        int cnt = rnd_int(r, 5, 15), rc;
        if (id < from)
            rc = ins_row(o, "iiiiIiii", id, d, w, perm[id - 1], now, rnd_int(r, 1, 10), cnt, 1);
        else
            rc = ins_row(o, "iiiiInii", id, d, w, perm[id - 1], now, cnt, 1);
        if (rc)
            return rc;
        for (int k = 1; k <= cnt; k++) {
            rnd_astring(r, dist, 24, 24);
            if (id < from)
                rc = ins_row(ol, "iiiiiiIiIs", id, d, w, k, rnd_int(r, 1, s->items), w, now, 5,
                             0LL, dist);
            else
                rc = ins_row(ol, "iiiiiiniIs", id, d, w, k, rnd_int(r, 1, s->items), w, 5,
                             (long long)rnd_int(r, 1, 999999), dist);
            if (rc)
                return rc;
        }
        if (id >= from && (rc = ins_row(no, "iii", id, d, w)))
            return rc;
    }
    return SQLITE_OK;
}

enum { I_ITEM, I_WH, I_STOCK, I_DIST, I_CUST, I_HIST, I_ORD, I_OL, I_NO, I_META, I_N };

static const char *const ins_sql[I_N] = {
    "INSERT INTO item VALUES (?,?,?,?,?)",
    "INSERT INTO warehouse VALUES (?,?,?,?,?,?,?,?,?)",
    "INSERT INTO stock VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO district VALUES (?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO customer VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO history VALUES (?,?,?,?,?,?,?,?)",
    "INSERT INTO orders VALUES (?,?,?,?,?,?,?,?)",
    "INSERT INTO order_line VALUES (?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO new_order VALUES (?,?,?)",
    "INSERT INTO tpcc_meta VALUES (1,?,?,?)",
};

static int load_warehouse(struct ins *x, struct rnd *r, const struct scale *s, int w,
                          long long now)
{
    struct address a;
    rnd_address(r, &a);
    int rc = ins_row(&x[I_WH], "issssssrI", w, a.name, a.s1, a.s2, a.city, a.state, a.zip,
                     rnd_int(r, 0, 2000) / 10000.0, 30000000LL);
    if (rc || (rc = load_stock(&x[I_STOCK], r, s, w)))
        return rc;
    for (int d = 1; d <= TPCC_DISTRICTS; d++) {
        rnd_address(r, &a);
        rc = ins_row(&x[I_DIST], "iissssssrIi", d, w, a.name, a.s1, a.s2, a.city, a.state,
                     a.zip, rnd_int(r, 0, 2000) / 10000.0, 3000000LL, s->customers + 1);
        if (rc || (rc = load_customers(&x[I_CUST], &x[I_HIST], r, s, w, d, now)) ||
            (rc = load_orders(&x[I_ORD], &x[I_OL], &x[I_NO], r, s, w, d, now)))
            return rc;
    }
    return SQLITE_OK;
}

int tpcc_load(sqlite3 *db, const struct scale *s, uint64_t seed, FILE *log)
{
    struct rnd r = {seed | 1};
    struct ins x[I_N] = {0};
    long pending = 0;
    long long now = (long long)time(NULL);
    int rc = tpcc_create(db);
    if (rc == SQLITE_OK)
        rc = tpcc_exec(db, "BEGIN");
    for (int i = 0; i < I_N && rc == SQLITE_OK; i++)
        rc = ins_prepare(&x[i], db, ins_sql[i], &pending);
    if (rc == SQLITE_OK)
        rc = ins_row(&x[I_META], "iii", s->warehouses, s->items, s->customers);
    if (rc == SQLITE_OK)
        rc = load_items(&x[I_ITEM], &r, s);
    for (int w = 1; w <= s->warehouses && rc == SQLITE_OK; w++) {
        if (log)
            fprintf(log, "tpcc: loading warehouse %d of %d\n", w, s->warehouses);
        rc = load_warehouse(x, &r, s, w, now);
    }
    for (int i = 0; i < I_N; i++)
        sqlite3_finalize(x[i].st);
    if (rc == SQLITE_OK)
        rc = tpcc_exec(db, "COMMIT");
    else
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int tpcc_read_scale(sqlite3 *db, struct scale *s)
{
    sqlite3_stmt *st;
    /* a new database has no such table: asked first, so that SQLite's log
     * does not report the query on it as an error */
    int rc = sqlite3_table_column_metadata(db, NULL, "tpcc_meta", "k", NULL, NULL, NULL, NULL,
                                           NULL);
    if (rc != SQLITE_OK)
        return SQLITE_NOTFOUND;
    rc = sqlite3_prepare_v2(db, "SELECT warehouses, items, customers FROM tpcc_meta", -1, &st,
                            NULL);
    if (rc != SQLITE_OK)
        return rc;
    if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        s->warehouses = sqlite3_column_int(st, 0);
        s->items = sqlite3_column_int(st, 1);
        s->customers = sqlite3_column_int(st, 2);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_CORRUPT;
    }
    sqlite3_finalize(st);
    return rc;
}
