/* tpcc.h - what the TPC-C driver's files share: the scale, a random
 * source with TPC-C's input rules, prepared statements, the five
 * transactions and the consistency checks. */
#ifndef PMTX_TPCC_H
#define PMTX_TPCC_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

/* The scale: the specification's numbers (clause 1.2, 4.3) unless a test
 * shrinks them. */
struct scale {
    int warehouses;
    int items;     /* 100,000 */
    int customers; /* per district, 3,000; as many orders are loaded */
};
#define TPCC_DISTRICTS 10
#define TPCC_NEW_ORDERS_FROM(s) ((s)->customers * 7 / 10 + 1) /* 2,101 */

/* ---- random input (clause 2.1.6, 4.3.2) */
struct rnd {
    uint64_t s;
};
uint64_t rnd_next(struct rnd *r);
int rnd_int(struct rnd *r, int lo, int hi); /* uniform in [lo, hi] */
/* NURand(A, x, y) with the run-time constant of A */
int rnd_nurand(struct rnd *r, int a, int x, int y);
/* a random string of letters and digits of length in [lo, hi]; returns
 * its length (out has hi + 1 bytes) */
int rnd_astring(struct rnd *r, char *out, int lo, int hi);
int rnd_nstring(struct rnd *r, char *out, int lo, int hi);
/* the last name of number n in [0, 999] (clause 4.3.2.3) */
void tpcc_last_name(int n, char *out /* 16 bytes */);
/* the last name number of a run-time customer lookup (clause 2.5.1.2) */
int tpcc_run_last(struct rnd *r, const struct scale *s);

/* ---- the database */
int tpcc_exec(sqlite3 *db, const char *sql); /* SQLITE_OK or the error, logged */
int tpcc_create(sqlite3 *db);
/* populate the tables (clause 4.3.3); prints progress to `log` */
int tpcc_load(sqlite3 *db, const struct scale *s, uint64_t seed, FILE *log);
/* read the scale of a loaded database back (its tpcc_meta row) */
int tpcc_read_scale(sqlite3 *db, struct scale *s);

/* ---- a terminal's connection and its prepared statements */
enum tx_type { TX_NEW_ORDER, TX_PAYMENT, TX_ORDER_STATUS, TX_DELIVERY, TX_STOCK_LEVEL, TX_TYPES };
extern const char *const tx_names[TX_TYPES];

struct term;
/* tag_payments: each Payment's h_data is a tag unique to it (T<pid>-<n>)
 * instead of the warehouse's and district's names, for the SIGKILL test */
struct term *term_open(sqlite3 *db, const struct scale *s, int home_w, uint64_t seed,
                       int tag_payments);
void term_close(struct term *t);
/* What a transaction that committed did, for the acknowledgements of the
 * SIGKILL test: a New-Order's order, a Payment's history tag. */
struct tx_result {
    enum tx_type type;
    int rolled_back; /* New-Order with an unused item (1%) */
    int w, d, o_id, ol_cnt; /* New-Order */
    int delivered;          /* Delivery: districts with an order delivered */
    char tag[32];           /* Payment: its h_data */
};
/* Run one transaction of the standard mix (or of `type` if >= 0): 0, or
 * an SQLite error code after rolling back. SQLITE_BUSY cannot come back:
 * the terminal's busy handler waits. */
int term_run(struct term *t, int type, struct tx_result *res);
uint64_t term_busy_waits(const struct term *t);
/* SQLite's busy handler of a connection: yields the processor and tries
 * again, for about ten seconds (counted in `term` if not NULL) */
int tpcc_busy_yield(void *term, int tries);

/* ---- the consistency conditions 1-4 (clause 3.3.2) and integrity_check:
 * 0 when they hold, else the number of failures, each printed to `out` */
int tpcc_check(sqlite3 *db, FILE *out);

#endif
