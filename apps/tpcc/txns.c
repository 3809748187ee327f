/* txns.c - a terminal: its connection's prepared statements and TPC-C's
 * five transactions with their input rules (clause 2.4-2.8). Writing
 * transactions begin IMMEDIATE, so that two terminals never deadlock
 * upgrading their locks; a busy database (a reader against a committing
 * writer) is waited for by yielding the processor, not by SQLite's default
 * sleep of a millisecond or more. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tpcc.h"

const char *const tx_names[TX_TYPES] = {"new_order", "payment", "order_status", "delivery",
                                        "stock_level"};

enum {
    S_BEGIN, S_BEGIN_RO, S_COMMIT, S_ROLLBACK,
    /* New-Order */
    S_W_TAX, S_D_NEXT, S_D_INC, S_C_NO, S_O_INS, S_NO_INS, S_I_GET, S_S_UPD, S_OL_INS,
    /* Payment */
    S_W_YTD, S_W_GET, S_D_YTD, S_D_GET, S_C_BY_LAST, S_C_PAY, S_C_UPD, S_C_DATA_GET,
    S_C_DATA_UPD, S_H_INS,
    /* Order-Status */
    S_C_OS, S_O_LAST, S_OL_GET,
    /* Delivery */
    S_NO_MIN, S_NO_DEL, S_O_CID, S_O_CARRIER, S_OL_DELIV, S_OL_SUM, S_C_DELIV,
    /* Stock-Level */
    S_D_NEXT_SL, S_SL,
    S_N
};

#define C_KEY " WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?"
static const char *const sql[S_N] = {
    "BEGIN IMMEDIATE", "BEGIN", "COMMIT", "ROLLBACK",
    "SELECT w_tax FROM warehouse WHERE w_id = ?",
    "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?",
    "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = ? AND d_id = ?",
    "SELECT c_discount, c_last, c_credit FROM customer" C_KEY,
    "INSERT INTO orders VALUES (?, ?, ?, ?, ?, NULL, ?, ?)",
    "INSERT INTO new_order VALUES (?, ?, ?)",
    "SELECT i_price, i_name, i_data FROM item WHERE i_id = ?",
    "UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1,"
    " s_remote_cnt = s_remote_cnt + ? WHERE s_w_id = ? AND s_i_id = ?",
    "INSERT INTO order_line VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)",
    "UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?",
    "SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse"
    " WHERE w_id = ?",
    "UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?",
    "SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district"
    " WHERE d_w_id = ? AND d_id = ?",
    "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ?"
    " ORDER BY c_first",
    "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip,"
    " c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance FROM customer" C_KEY,
    "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?,"
    " c_payment_cnt = c_payment_cnt + 1" C_KEY,
    "SELECT c_data FROM customer" C_KEY,
    "UPDATE customer SET c_data = ?" C_KEY,
    "INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "SELECT c_balance, c_first, c_middle, c_last FROM customer" C_KEY,
    "SELECT o_id, o_carrier_id, o_entry_d FROM orders WHERE o_w_id = ? AND o_d_id = ?"
    " AND o_c_id = ? ORDER BY o_id DESC LIMIT 1",
    "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line"
    " WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
    "SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ?"
    " ORDER BY no_o_id LIMIT 1",
    "DELETE FROM new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?",
    "SELECT o_c_id FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?",
    "UPDATE orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?",
    "UPDATE order_line SET ol_delivery_d = ? WHERE ol_w_id = ? AND ol_d_id = ?"
    " AND ol_o_id = ?",
    "SELECT SUM(ol_amount) FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
    "UPDATE customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1"
    C_KEY,
    "SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?",
    "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock WHERE ol_w_id = ? AND ol_d_id = ?"
    " AND ol_o_id < ? AND ol_o_id >= ? AND s_w_id = ? AND s_i_id = ol_i_id"
    " AND s_quantity < ?",
};

struct term {
    sqlite3 *db;
    struct scale s;
    int w; /* home warehouse */
    struct rnd r;
    sqlite3_stmt *st[S_N];
    sqlite3_stmt *stock_get[TPCC_DISTRICTS]; /* one per district's s_dist_xx */
    uint64_t busy;
    int tag_payments; /* h_data = a unique tag (the SIGKILL test's acks) */
    int writing;      /* holds `writer` */
};

static atomic_ulong tag_seq; /* the process's tags: T<pid>-<n> */

/* Wait for the other terminals by yielding; give up after about ten
 * seconds of tries (a terminal that holds the lock that long is stuck). */
int tpcc_busy_yield(void *arg, int tries)
{
    struct term *t = arg;
    if (t)
        t->busy++;
    if (tries > 20000000)
        return 0;
    sched_yield();
    return 1;
}

struct term *term_open(sqlite3 *db, const struct scale *s, int home_w, uint64_t seed,
                       int tag_payments)
{
    struct term *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->db = db;
    t->s = *s;
    t->w = home_w;
    t->r.s = seed | 1;
    t->tag_payments = tag_payments;
    sqlite3_busy_handler(db, tpcc_busy_yield, t);
    int rc = SQLITE_OK;
    for (int i = 0; i < S_N && rc == SQLITE_OK; i++)
        rc = sqlite3_prepare_v3(db, sql[i], -1, SQLITE_PREPARE_PERSISTENT, &t->st[i], NULL);
    for (int d = 0; d < TPCC_DISTRICTS && rc == SQLITE_OK; d++) {
        char q[200];
        snprintf(q, sizeof q,
                 "SELECT s_quantity, s_data, s_dist_%02d FROM stock WHERE s_w_id = ? AND s_i_id = ?",
                 d + 1);
        rc = sqlite3_prepare_v3(db, q, -1, SQLITE_PREPARE_PERSISTENT, &t->stock_get[d], NULL);
    }
    if (rc != SQLITE_OK) {
        fprintf(stderr, "tpcc: preparing the statements: %s\n", sqlite3_errmsg(db));
        term_close(t);
        return NULL;
    }
    return t;
}

void term_close(struct term *t)
{
    if (!t)
        return;
    for (int i = 0; i < S_N; i++)
        sqlite3_finalize(t->st[i]);
    for (int d = 0; d < TPCC_DISTRICTS; d++)
        sqlite3_finalize(t->stock_get[d]);
    sqlite3_busy_handler(t->db, NULL, NULL);
    free(t);
}

uint64_t term_busy_waits(const struct term *t)
{
    return t->busy;
}

/* Bind a statement from a format (i int, I int64, r double, s text) and
 * step it once: SQLITE_ROW, SQLITE_DONE or the error. The statement
 * stays as stepped, for its columns; the next q() on it resets it. */
static int vq(sqlite3_stmt *st, const char *fmt, va_list ap)
{
    sqlite3_reset(st);
    if ((int)strlen(fmt) != sqlite3_bind_parameter_count(st))
        return SQLITE_MISUSE; /* a format that does not fit its statement */
    for (int i = 1; fmt[i - 1]; i++) {
        switch (fmt[i - 1]) {
        case 'i': sqlite3_bind_int(st, i, va_arg(ap, int)); break;
        case 'I': sqlite3_bind_int64(st, i, va_arg(ap, long long)); break;
        case 'r': sqlite3_bind_double(st, i, va_arg(ap, double)); break;
        default: sqlite3_bind_text(st, i, va_arg(ap, const char *), -1, SQLITE_TRANSIENT); break;
        }
    }
    return sqlite3_step(st);
}

static int q(struct term *t, int s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vq(t->st[s], fmt, ap);
    va_end(ap);
    return rc;
}

/* the same for a statement that must change the database: SQLITE_OK */
static int qx(struct term *t, int s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vq(t->st[s], fmt, ap);
    va_end(ap);
    sqlite3_reset(t->st[s]);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* a query that must return a row: SQLITE_OK, or SQLITE_CORRUPT when the
 * row is missing (the database broke a TPC-C invariant) */
#define ROW(rc) ((rc) == SQLITE_ROW ? SQLITE_OK : (rc) == SQLITE_DONE ? SQLITE_CORRUPT : (rc))

static int col_int(struct term *t, int s, int c)
{
    return sqlite3_column_int(t->st[s], c);
}

/* SQLite admits one writer at a time: the terminals of this process queue
 * for it on a mutex, asleep, rather than polling SQLite's lock (on two
 * cores a poller took the processor from the writer it waited for). */
static pthread_mutex_t writer = PTHREAD_MUTEX_INITIALIZER;

static int begin(struct term *t, int writes)
{
    if (writes) {
        pthread_mutex_lock(&writer);
        t->writing = 1;
    }
    return qx(t, writes ? S_BEGIN : S_BEGIN_RO, "");
}

/* ---- the customer of a Payment or an Order-Status: by last name (60%),
 * the one in the middle of those of that name by first name, or by id */
static int pick_customer(struct term *t, int w, int d, int *c_id)
{
    if (rnd_int(&t->r, 1, 100) > 60) {
        *c_id = rnd_nurand(&t->r, 1023, 1, t->s.customers);
        return SQLITE_OK;
    }
    char last[16];
    tpcc_last_name(tpcc_run_last(&t->r, &t->s), last);
    enum { MOST = 128 }; /* about 3 share a name at the full scale */
    int ids[MOST], n = 0, rc = q(t, S_C_BY_LAST, "iis", w, d, last);
    for (; rc == SQLITE_ROW; rc = sqlite3_step(t->st[S_C_BY_LAST]), n++)
        if (n < MOST)
            ids[n] = col_int(t, S_C_BY_LAST, 0);
    if (rc != SQLITE_DONE)
        return rc;
    if (n == 0) /* no customer of that name: one by id instead */
        *c_id = rnd_nurand(&t->r, 1023, 1, t->s.customers);
    else
        *c_id = ids[(n + 1) / 2 - 1 < MOST ? (n + 1) / 2 - 1 : MOST - 1];
    return SQLITE_OK;
}

static int other_warehouse(struct term *t)
{
    int w = rnd_int(&t->r, 1, t->s.warehouses - 1);
    return w >= t->w ? w + 1 : w;
}

/* ---- New-Order (clause 2.4) */
static int new_order(struct term *t, struct tx_result *res)
{
    int w = t->w, d = rnd_int(&t->r, 1, TPCC_DISTRICTS);
    int c = rnd_nurand(&t->r, 1023, 1, t->s.customers);
    int n = rnd_int(&t->r, 5, 15), rollback = rnd_int(&t->r, 1, 100) == 1;
    int item[15], supply[15], qty[15], all_local = 1;
    for (int i = 0; i < n; i++) {
        item[i] = rnd_nurand(&t->r, 8191, 1, t->s.items);
        supply[i] = w;
        if (t->s.warehouses > 1 && rnd_int(&t->r, 1, 100) == 1) {
            supply[i] = other_warehouse(t);
            all_local = 0;
        }
        qty[i] = rnd_int(&t->r, 1, 10);
    }
    if (rollback)
        item[n - 1] = t->s.items + 1; /* an unused item: the 1% that roll back */

    int rc = begin(t, 1);
    if (rc || (rc = ROW(q(t, S_W_TAX, "i", w))))
        return rc;
    double w_tax = sqlite3_column_double(t->st[S_W_TAX], 0);
    if ((rc = ROW(q(t, S_D_NEXT, "ii", w, d))))
        return rc;
    double d_tax = sqlite3_column_double(t->st[S_D_NEXT], 0);
    int o_id = col_int(t, S_D_NEXT, 1);
    if ((rc = qx(t, S_D_INC, "ii", w, d)) || (rc = ROW(q(t, S_C_NO, "iii", w, d, c))))
        return rc;
    double discount = sqlite3_column_double(t->st[S_C_NO], 0);
    long long now = (long long)time(NULL);
    if ((rc = qx(t, S_O_INS, "iiiiIii", o_id, d, w, c, now, n, all_local)) ||
        (rc = qx(t, S_NO_INS, "iii", o_id, d, w)))
        return rc;
    long long total = 0;
    for (int i = 0; i < n; i++) {
        rc = q(t, S_I_GET, "i", item[i]);
        if (rc == SQLITE_DONE) { /* "Item number is not valid" */
            sqlite3_reset(t->st[S_I_GET]);
            res->rolled_back = 1;
            return qx(t, S_ROLLBACK, "");
        }
        if (rc != SQLITE_ROW)
            return rc;
        long long price = sqlite3_column_int64(t->st[S_I_GET], 0);
        int orig = strstr((const char *)sqlite3_column_text(t->st[S_I_GET], 2), "ORIGINAL") != 0;
        sqlite3_stmt *sg = t->stock_get[d - 1];
        sqlite3_reset(sg);
        sqlite3_bind_int(sg, 1, supply[i]);
        sqlite3_bind_int(sg, 2, item[i]);
        if ((rc = ROW(sqlite3_step(sg))))
            return rc;
        int s_qty = sqlite3_column_int(sg, 0);
        orig = orig && strstr((const char *)sqlite3_column_text(sg, 1), "ORIGINAL");
        char dist[25];
        snprintf(dist, sizeof dist, "%s", (const char *)sqlite3_column_text(sg, 2));
        sqlite3_reset(sg);
        s_qty = s_qty >= qty[i] + 10 ? s_qty - qty[i] : s_qty - qty[i] + 91;
        if ((rc = qx(t, S_S_UPD, "iiiii", s_qty, qty[i], supply[i] != w, supply[i], item[i])))
            return rc;
        long long amount = qty[i] * price;
        total += amount;
        (void)orig; /* brand-generic: shown on the terminal, which has no screen here */
        if ((rc = qx(t, S_OL_INS, "iiiiiiiIs", o_id, d, w, i + 1, item[i], supply[i], qty[i],
                     amount, dist)))
            return rc;
    }
    (void)(total * (1 - discount) * (1 + w_tax + d_tax)); /* the screen's total */
    if ((rc = qx(t, S_COMMIT, "")))
        return rc;
    res->w = w;
    res->d = d;
    res->o_id = o_id;
    res->ol_cnt = n;
    return SQLITE_OK;
}

/* ---- Payment (clause 2.5) */
static int payment(struct term *t, struct tx_result *res)
{
    int w = t->w, d = rnd_int(&t->r, 1, TPCC_DISTRICTS), cw = w, cd = d;
    if (t->s.warehouses > 1 && rnd_int(&t->r, 1, 100) > 85) {
        cw = other_warehouse(t);
        cd = rnd_int(&t->r, 1, TPCC_DISTRICTS);
    }
    long long amount = rnd_int(&t->r, 100, 500000);
    int rc = begin(t, 1), c;
    if (rc || (rc = qx(t, S_W_YTD, "Ii", amount, w)) || (rc = ROW(q(t, S_W_GET, "i", w))))
        return rc;
    char wname[11], dname[11];
    snprintf(wname, sizeof wname, "%s", (const char *)sqlite3_column_text(t->st[S_W_GET], 0));
    if ((rc = qx(t, S_D_YTD, "Iii", amount, w, d)) || (rc = ROW(q(t, S_D_GET, "ii", w, d))))
        return rc;
    snprintf(dname, sizeof dname, "%s", (const char *)sqlite3_column_text(t->st[S_D_GET], 0));
    if ((rc = pick_customer(t, cw, cd, &c)) || (rc = ROW(q(t, S_C_PAY, "iii", cw, cd, c))))
        return rc;
    int bad = !strcmp((const char *)sqlite3_column_text(t->st[S_C_PAY], 10), "BC");
    if ((rc = qx(t, S_C_UPD, "IIiii", amount, amount, cw, cd, c)))
        return rc;
    if (bad) { /* bad credit: the payment goes in front of c_data, kept to 500 */
        if ((rc = ROW(q(t, S_C_DATA_GET, "iii", cw, cd, c))))
            return rc;
        char data[501];
        snprintf(data, sizeof data, "%d %d %d %d %d %lld|%s", c, cd, cw, d, w, amount,
                 (const char *)sqlite3_column_text(t->st[S_C_DATA_GET], 0));
        if ((rc = qx(t, S_C_DATA_UPD, "siii", data, cw, cd, c)))
            return rc;
    }
    char hdata[32];
    if (t->tag_payments)
        snprintf(hdata, sizeof hdata, "T%d-%lu", (int)getpid(), atomic_fetch_add(&tag_seq, 1) + 1);
    else
        snprintf(hdata, sizeof hdata, "%.10s    %.10s", wname, dname);
    if ((rc = qx(t, S_H_INS, "iiiiiIIs", c, cd, cw, d, w, (long long)time(NULL), amount, hdata)) ||
        (rc = qx(t, S_COMMIT, "")))
        return rc;
    snprintf(res->tag, sizeof res->tag, "%s", hdata);
    return SQLITE_OK;
}

/* ---- Order-Status (clause 2.6), read-only */
static int order_status(struct term *t)
{
    int w = t->w, d = rnd_int(&t->r, 1, TPCC_DISTRICTS), c;
    int rc = begin(t, 0);
    if (rc || (rc = pick_customer(t, w, d, &c)) || (rc = ROW(q(t, S_C_OS, "iii", w, d, c))))
        return rc;
    rc = q(t, S_O_LAST, "iii", w, d, c);
    if (rc == SQLITE_ROW) /* the customer's last order and its lines */
        for (rc = q(t, S_OL_GET, "iii", w, d, col_int(t, S_O_LAST, 0)); rc == SQLITE_ROW;)
            rc = sqlite3_step(t->st[S_OL_GET]);
    if (rc != SQLITE_DONE)
        return rc;
    return qx(t, S_COMMIT, "");
}

/* ---- Delivery (clause 2.7): the ten districts in one transaction */
static int delivery(struct term *t, struct tx_result *res)
{
    int w = t->w, carrier = rnd_int(&t->r, 1, 10), rc = begin(t, 1);
    long long now = (long long)time(NULL);
    if (rc)
        return rc;
    for (int d = 1; d <= TPCC_DISTRICTS; d++) {
        rc = q(t, S_NO_MIN, "ii", w, d);
        if (rc == SQLITE_DONE)
            continue; /* none to deliver in this district: skipped */
        if (rc != SQLITE_ROW)
            return rc;
        int o = col_int(t, S_NO_MIN, 0);
        sqlite3_reset(t->st[S_NO_MIN]);
        if ((rc = qx(t, S_NO_DEL, "iii", w, d, o)) || (rc = ROW(q(t, S_O_CID, "iii", w, d, o))))
            return rc;
        int c = col_int(t, S_O_CID, 0);
        if ((rc = qx(t, S_O_CARRIER, "iiii", carrier, w, d, o)) ||
            (rc = qx(t, S_OL_DELIV, "Iiii", now, w, d, o)) ||
            (rc = ROW(q(t, S_OL_SUM, "iii", w, d, o))))
            return rc;
        long long sum = sqlite3_column_int64(t->st[S_OL_SUM], 0);
        if ((rc = qx(t, S_C_DELIV, "Iiii", sum, w, d, c)))
            return rc;
        res->delivered++;
    }
    return qx(t, S_COMMIT, "");
}

/* ---- Stock-Level (clause 2.8), read-only */
static int stock_level(struct term *t)
{
    int w = t->w, d = rnd_int(&t->r, 1, TPCC_DISTRICTS), threshold = rnd_int(&t->r, 10, 20);
    int rc = begin(t, 0);
    if (rc || (rc = ROW(q(t, S_D_NEXT_SL, "ii", w, d))))
        return rc;
    int next = col_int(t, S_D_NEXT_SL, 0);
    if ((rc = ROW(q(t, S_SL, "iiiiii", w, d, next, next - 20, w, threshold))))
        return rc;
    return qx(t, S_COMMIT, "");
}

/* the standard mix (clause 5.2.3): 45, 43, 4, 4, 4 */
static enum tx_type pick_type(struct term *t)
{
    int x = rnd_int(&t->r, 1, 100);
    return x <= 45 ? TX_NEW_ORDER : x <= 88 ? TX_PAYMENT : x <= 92 ? TX_ORDER_STATUS
                                                         : x <= 96 ? TX_DELIVERY
                                                                   : TX_STOCK_LEVEL;
}

int term_run(struct term *t, int type, struct tx_result *res)
{
    memset(res, 0, sizeof *res);
    res->type = type >= 0 ? (enum tx_type)type : pick_type(t);
    int rc;
    switch (res->type) {
    case TX_NEW_ORDER: rc = new_order(t, res); break;
    case TX_PAYMENT: rc = payment(t, res); break;
    case TX_ORDER_STATUS: rc = order_status(t); break;
    case TX_DELIVERY: rc = delivery(t, res); break;
    default: rc = stock_level(t); break;
    }
    for (int i = 0; i < S_N; i++)
        sqlite3_reset(t->st[i]);
    for (int d = 0; d < TPCC_DISTRICTS; d++)
        sqlite3_reset(t->stock_get[d]);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "tpcc: %s: %s (%s)\n", tx_names[res->type], sqlite3_errstr(rc),
                sqlite3_errmsg(t->db));
        if (!sqlite3_get_autocommit(t->db))
            sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (t->writing) {
        t->writing = 0;
        pthread_mutex_unlock(&writer);
    }
    return rc;
}
