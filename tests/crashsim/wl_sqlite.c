/* wl_sqlite.c - the crash simulator's SQLite workload: a database of the
 * VFS "pmtx" (apps/sqlite) kept in the driver's own pool, whose stores are
 * traced and crashed like any workload's.
 *
 * The pool: thread t's part (PGS_ROOT_SIZE bytes) stands for the root of
 * the VFS's block store (pagestore.h: pgs_adopt); the store is hosted
 * under a name (vfs_host.h) that sqlite3_open_v2 then opens. Each SQLite
 * commit is one txn.h transaction, which the store ends with sim_commit
 * (its commit hook), announcing the table's digest.
 *
 * The table: t(k INTEGER PRIMARY KEY, v BLOB, h INTEGER) with an index on
 * h, h a hash of v; keys from 0 to KEYS-1, between LOW and HIGH rows
 * (PRELOAD after setup, about MID later); values of 1 to 600 bytes, one in sixteen of 4500
 * to 9000 (overflow pages). Each step is one transaction: BEGIN, 1 to 10
 * inserts, updates, deletes of one key or of a range of keys; one step in
 * ten also runs a two-row INSERT whose second row hits a taken key (the
 * statement fails and undoes its first row), one in six PRAGMA
 * incremental_vacuum (auto_vacuum=INCREMENTAL: freed pages go to the
 * freelist, and the vacuum truncates the file); then ROLLBACK one time in
 * eight, else COMMIT. A cache of 10 pages makes transactions spill pages
 * before their commit. synchronous=OFF: durability is the engine's at
 * commit, and incll's at the driver's txn_sync (--sync-every).
 *
 * The oracle: the digest of the rows in key order (key, length, hash of
 * the value); the mirror keeps per key its length, the seed its bytes are
 * made from, and their hash. After recovery PRAGMA integrity_check must
 * say ok, every row's h must match its v (else the workload's invariant
 * is broken); the objects reached are the store's directory, leaves and
 * blocks (pgs_objects, which checks the store's own invariants P3, P4).
 *
 * With several threads, each has its own database: its part, its store,
 * its name and connection (the VFS's registry and SQLite are shared).
 * Run when named (--workload sqlite). */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pagestore.h"
#include "pmtx_sqlite.h"
#include "sim.h"
#include "vfs_host.h"

enum { KEYS = 400, PRELOAD = 160, LOW = 60, MID = 180, HIGH = 300, SMALL = 600, BIG_MIN = 4500,
       BIG_MAX = 9000 };
#define MAP_BYTES (2u << 20) /* what the store's map addresses */

struct row {
    int present;
    uint32_t len;
    uint64_t seed, vh; /* the value's bytes come from seed; vh: their hash */
};

static struct row cur[SIM_THREADS][KEYS];  /* committed */
static struct row next[SIM_THREADS][KEYS]; /* the transaction's */
static uint64_t next_digest[SIM_THREADS];  /* announced at the commit */
static unsigned char vbuf[SIM_THREADS][BIG_MAX]; /* a value's bytes */

enum { S_INS, S_UPD, S_DEL, S_DELR, S_BAD, NSTMT };
static const char *const stmt_sql[NSTMT] = {
    "INSERT INTO t(k, v, h) VALUES (?1, ?2, ?3)",
    "UPDATE t SET v = ?2, h = ?3 WHERE k = ?1",
    "DELETE FROM t WHERE k = ?1",
    "DELETE FROM t WHERE k BETWEEN ?1 AND ?2",
    "INSERT INTO t(k, v, h) VALUES (?1, ?2, ?3), (?4, ?2, ?3)",
};

static struct conn {
    sqlite3 *db;
    sqlite3_stmt *st[NSTMT];
    pgs *s;        /* the block store, hosted under name */
    char name[64];
} cn[SIM_THREADS];

/* ---- values and digests */

static void value_of(uint64_t seed, uint32_t len, unsigned char *out)
{
    sim_bytes(&seed, out, len);
}

static uint64_t value_hash(const void *v, size_t len)
{
    return sim_hash(17, v, len);
}

/* h of a row: a non-negative SQLite integer */
static sqlite3_int64 h_of(uint64_t vh)
{
    return (sqlite3_int64)(vh >> 1);
}

static uint64_t digest_add(uint64_t d, sqlite3_int64 k, uint32_t len, uint64_t vh)
{
    d = sim_hash(d, &k, sizeof k);
    d = sim_hash(d, &len, sizeof len);
    return sim_hash(d, &vh, sizeof vh);
}

static uint64_t digest_of(const struct row *rows)
{
    uint64_t d = 5, n = 0;
    for (sqlite3_int64 k = 0; k < KEYS; k++)
        if (rows[k].present) {
            d = digest_add(d, k, rows[k].len, rows[k].vh);
            n++;
        }
    return sim_hash(d, &n, sizeof n);
}

static uint64_t sq_mirror(int t)
{
    return digest_of(cur[t]);
}

/* ---- the connection */

static int sql_fail(int t, const char *what)
{
    fprintf(stderr, "crashsim: sqlite: %s: %s\n", what,
            cn[t].db ? sqlite3_errmsg(cn[t].db) : "no connection");
    return TXN_E_IO;
}

static int exec(int t, const char *sql)
{
    return sqlite3_exec(cn[t].db, sql, NULL, NULL, NULL) ? sql_fail(t, sql) : 0;
}

/* Close thread t's connection and stop hosting its store (whose pool may
 * be closed already: nothing here reads it). */
static void disconnect(int t)
{
    struct conn *c = &cn[t];
    for (int i = 0; i < NSTMT; i++) {
        sqlite3_finalize(c->st[i]);
        c->st[i] = NULL;
    }
    if (c->db) {
        sqlite3_close(c->db);
        c->db = NULL;
    }
    if (*c->name)
        pmtx_sqlite_unhost(c->name);
    *c->name = '\0';
    c->s = NULL;
}

static int commit_hook(txn *tx, void *arg)
{
    int t = (int)(intptr_t)arg;
    return sim_commit(tx, t, next_digest[t]);
}

/* Adopt thread t's part of p as a block store, host it and open it. */
static int connect(txn_pool *p, int t, int hook)
{
    struct conn *c = &cn[t];
    txn *tx;
    pgs *s;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    struct pgs_host h = {.pool = p, .root = sim_part(tx, p, t), .max_bytes = MAP_BYTES,
                         .commit = hook ? commit_hook : NULL,
                         .commit_arg = (void *)(intptr_t)t};
    txn_abort(tx);
    if (pmtx_sqlite_register(0)) {
        fputs("crashsim: sqlite: the VFS could not be registered\n", stderr);
        return TXN_E_STATE;
    }
    if ((rc = pgs_adopt(&h, &s))) {
        fprintf(stderr, "crashsim: sqlite: the block store: %s\n", pgs_why());
        return rc;
    }
    snprintf(c->name, sizeof c->name, "/pmtx-crashsim-sqlite-%d", t);
    if (pmtx_sqlite_host(c->name, s)) {
        pgs_close(s);
        *c->name = '\0';
        fputs("crashsim: sqlite: the store could not be hosted\n", stderr);
        return TXN_E_STATE;
    }
    c->s = s;
    if (sqlite3_open_v2(c->name, &c->db, SQLITE_OPEN_READWRITE, PMTX_SQLITE_VFS))
        return sql_fail(t, "open");
    return 0;
}

static int prepare(int t)
{
    for (int i = 0; i < NSTMT; i++)
        if (sqlite3_prepare_v2(cn[t].db, stmt_sql[i], -1, &cn[t].st[i], NULL))
            return sql_fail(t, stmt_sql[i]);
    return 0;
}

/* ---- the transactions */

/* A new value for key k of the transaction's rows. */
static void new_value(int t, int k, uint64_t *rng)
{
    struct row *r = &next[t][k];
    uint64_t x = sim_rand(rng);
    r->present = 1;
    r->seed = sim_rand(rng);
    r->len = x % 16 == 0 ? BIG_MIN + (uint32_t)((x >> 8) % (BIG_MAX - BIG_MIN + 1))
                         : 1 + (uint32_t)((x >> 8) % SMALL);
    value_of(r->seed, r->len, vbuf[t]);
    r->vh = value_hash(vbuf[t], r->len);
}

/* Bind row r's value and h at ?2, ?3 of st. */
static void bind_value(int t, sqlite3_stmt *st, const struct row *r)
{
    value_of(r->seed, r->len, vbuf[t]);
    sqlite3_bind_blob(st, 2, vbuf[t], (int)r->len, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, h_of(r->vh));
}

/* Run st to its end; its result code (reset, bindings cleared). */
static int run(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

/* A key of the transaction's rows from a random start: present or not. */
static int pick(int t, uint64_t *rng, int present)
{
    int k = (int)(sim_rand(rng) % KEYS);
    for (int i = 0; i < KEYS; i++, k = (k + 1) % KEYS)
        if (next[t][k].present == present)
            return k;
    return -1;
}

static int op_insert(int t, uint64_t *rng, unsigned *n)
{
    struct conn *c = &cn[t];
    int k = pick(t, rng, 0);
    if (k < 0)
        return 0;
    new_value(t, k, rng);
    sqlite3_bind_int64(c->st[S_INS], 1, k);
    bind_value(t, c->st[S_INS], &next[t][k]);
    ++*n;
    return run(c->st[S_INS]) == SQLITE_DONE ? 0 : sql_fail(t, "insert");
}

static int op_update(int t, uint64_t *rng)
{
    struct conn *c = &cn[t];
    int k = pick(t, rng, 1);
    if (k < 0)
        return 0;
    new_value(t, k, rng);
    sqlite3_bind_int64(c->st[S_UPD], 1, k);
    bind_value(t, c->st[S_UPD], &next[t][k]);
    return run(c->st[S_UPD]) == SQLITE_DONE ? 0 : sql_fail(t, "update");
}

static int op_delete(int t, uint64_t *rng, unsigned *n, int range)
{
    struct conn *c = &cn[t];
    int k = pick(t, rng, 1), last = k;
    if (k < 0)
        return 0;
    if (range) {
        last = k + 1 + (int)(sim_rand(rng) % 24);
        sqlite3_bind_int64(c->st[S_DELR], 2, last);
    }
    for (int i = k; i <= last && i < KEYS; i++)
        if (next[t][i].present) {
            next[t][i].present = 0;
            --*n;
        }
    sqlite3_stmt *st = c->st[range ? S_DELR : S_DEL];
    sqlite3_bind_int64(st, 1, k);
    return run(st) == SQLITE_DONE ? 0 : sql_fail(t, "delete");
}

/* Two rows, the second on a taken key: the statement must fail and undo
 * its first row (a statement rollback inside the transaction). */
static int op_failing(int t, uint64_t *rng)
{
    struct conn *c = &cn[t];
    int k = pick(t, rng, 0), taken = pick(t, rng, 1);
    if (k < 0 || taken < 0)
        return 0;
    struct row r = next[t][k];
    new_value(t, k, rng);
    sqlite3_bind_int64(c->st[S_BAD], 1, k);
    bind_value(t, c->st[S_BAD], &next[t][k]);
    sqlite3_bind_int64(c->st[S_BAD], 4, taken);
    next[t][k] = r;
    return run(c->st[S_BAD]) == SQLITE_CONSTRAINT ? 0 : sql_fail(t, "failing insert");
}

static unsigned count(const struct row *rows)
{
    unsigned n = 0;
    for (int k = 0; k < KEYS; k++)
        n += rows[k].present != 0;
    return n;
}

/* One transaction; a committed one becomes the mirror. */
static int sq_step(txn_pool *p, int t, uint64_t *rng)
{
    (void)p;
    memcpy(next[t], cur[t], sizeof next[t]);
    next_digest[t] = digest_of(cur[t]); /* nothing commits before COMMIT */
    unsigned n = count(cur[t]), ops = 1 + (unsigned)(sim_rand(rng) % 10);
    int rc = exec(t, "BEGIN");
    for (unsigned i = 0; i < ops && !rc; i++) {
        /* inserts lead below MID rows, deletes above */
        unsigned dice = (unsigned)(sim_rand(rng) % 100), ins = n < MID ? 50 : 25;
        if (n < LOW || (n < HIGH && dice < ins))
            rc = op_insert(t, rng, &n);
        else if (n > HIGH || dice < ins + 20)
            rc = op_delete(t, rng, &n, 0);
        else if (dice < ins + 25)
            rc = op_delete(t, rng, &n, 1);
        else
            rc = op_update(t, rng);
    }
    if (!rc && sim_rand(rng) % 10 == 0)
        rc = op_failing(t, rng);
    if (!rc && sim_rand(rng) % 6 == 0)
        rc = exec(t, sim_rand(rng) % 2 ? "PRAGMA incremental_vacuum(4)"
                                       : "PRAGMA incremental_vacuum");
    if (rc) /* an error ends the run: the transaction goes */
        return sqlite3_get_autocommit(cn[t].db) ? rc : (exec(t, "ROLLBACK"), rc);
    if (sim_rand(rng) % 8 == 0)
        return exec(t, "ROLLBACK");
    next_digest[t] = digest_of(next[t]);
    if ((rc = exec(t, "COMMIT")))
        return rc;
    memcpy(cur[t], next[t], sizeof cur[t]);
    return 0;
}

static int sq_setup(txn_pool *p, int t)
{
    disconnect(t); /* the previous run's, when it ended in an error */
    memset(cur[t], 0, sizeof cur[t]);
    memset(next[t], 0, sizeof next[t]);
    next_digest[t] = digest_of(cur[t]);
    int rc = connect(p, t, 1);
    if (!rc)
        rc = exec(t, "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA cache_size = 10;"
                     "PRAGMA synchronous = OFF;"
                     "BEGIN; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB NOT NULL,"
                     " h INTEGER NOT NULL); CREATE INDEX t_h ON t(h)");
    if (!rc)
        rc = prepare(t);
    uint64_t rng = 77 + (uint64_t)t;
    unsigned n = 0;
    while (!rc && n < PRELOAD)
        rc = op_insert(t, &rng, &n);
    next_digest[t] = digest_of(next[t]);
    if (!rc && !(rc = exec(t, "COMMIT")))
        memcpy(cur[t], next[t], sizeof cur[t]);
    if (rc)
        disconnect(t);
    return rc;
}

/* The run's end: the driver closes the pool next. */
static int sq_finish(int t)
{
    disconnect(t);
    return 0;
}

/* ---- reading back a recovered pool */

/* PRAGMA integrity_check says ok (else what it says goes to stderr) */
static int integrity(int t)
{
    sqlite3_stmt *st;
    int bad = 0, rc;
    if (sqlite3_prepare_v2(cn[t].db, "PRAGMA integrity_check", -1, &st, NULL))
        return sql_fail(t, "integrity_check");
    for (int i = 0; (rc = sqlite3_step(st)) == SQLITE_ROW; i++) {
        const char *msg = (const char *)sqlite3_column_text(st, 0);
        if (i == 0 && msg && !strcmp(msg, "ok"))
            continue;
        if (bad++ < 3)
            fprintf(stderr, "  sqlite: integrity_check: %s\n", msg ? msg : "?");
    }
    sqlite3_finalize(st);
    return rc != SQLITE_DONE ? sql_fail(t, "integrity_check") : bad != 0;
}

/* The digest of the rows in key order; each h must be the hash of its v. */
static int rows_digest(int t, uint64_t *digest)
{
    sqlite3_stmt *st;
    int bad = 0, rc;
    if (sqlite3_prepare_v2(cn[t].db, "SELECT k, v, h FROM t ORDER BY k", -1, &st, NULL))
        return sql_fail(t, "select");
    uint64_t d = 5, n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sqlite3_int64 k = sqlite3_column_int64(st, 0);
        const void *v = sqlite3_column_blob(st, 1);
        uint32_t len = (uint32_t)sqlite3_column_bytes(st, 1);
        uint64_t vh = value_hash(v, len);
        if (sqlite3_column_type(st, 1) != SQLITE_BLOB || h_of(vh) != sqlite3_column_int64(st, 2)) {
            if (bad++ < 3)
                fprintf(stderr, "  sqlite: row %lld: h is not the hash of v\n", (long long)k);
        }
        d = digest_add(d, k, len, vh);
        n++;
    }
    sqlite3_finalize(st);
    *digest = sim_hash(d, &n, sizeof n);
    return rc != SQLITE_DONE ? sql_fail(t, "select") : bad != 0;
}

static int reach_cb(txn_obj *o, void *arg)
{
    return reach_add(arg, o);
}

static int sq_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    int bad = connect(p, t, 0) != 0;
    if (!bad)
        bad = integrity(t);
    if (!bad)
        bad = rows_digest(t, digest);
    if (cn[t].db) { /* the connection first: nothing staged, nothing cached */
        sqlite3_close(cn[t].db);
        cn[t].db = NULL;
    }
    /* the objects even of a broken database: the allocator's verdict too */
    if (cn[t].s && pgs_objects(cn[t].s, reach_cb, r)) {
        fprintf(stderr, "  sqlite: the block store: %s\n", pgs_why());
        bad = 1;
    }
    disconnect(t);
    return bad;
}

const struct workload wl_sqlite = {"sqlite", 2u << 20, PGS_ROOT_SIZE, sq_setup, sq_step,
                                   sq_mirror, sq_read, WL_BY_NAME, sq_finish};
