/* join.c - one transaction over several pools (txn_join, issue #42 item 3).
 *
 * api:     reads, writes, allocations and frees across two pools through
 *          the coordinator's handle and the part's, one commit; an abort
 *          rolls both back; what txn_join refuses; TXN_E_NOTSUP on the
 *          engines that cannot join (txn.h says which).
 * incll_epochs: on incll, why it cannot join: A's commit made durable
 *          (txn_sync), then B's acknowledged commit ended by a crash
 *          before B's epoch did: A holds it, B not.
 * indoubt: a child commits a transaction over pools A (coordinator), B
 *          and C and ends itself from B's TXN_ON_COMMIT action, after A
 *          committed and B finished, before C did: C is left prepared.
 *          C's recovery must then keep it (A closed: C's open opens A; A
 *          open in this process, even with all of A's contexts taken by
 *          other threads, or the opening thread's transaction on A
 *          failed), roll it back when A's join table does not
 *          hold its seq (the table changed by hand, as if A had not
 *          committed), and refuse to open with TXN_E_INDOUBT, naming A's
 *          file, while A is missing, and while A is open here only as a
 *          view (a view's table is not the file's).
 * threads_full: three threads, each alternating participants B and C,
 *          over a table with three entries not strangers': no commit
 *          refused (an entry whose part is still finishing is not given).
 * many:    300 fresh participant pools joined one after the other to one
 *          coordinator (reopened after 260): at most one entry of its
 *          table in use (J3 of api.c); an entry a crash left is given to
 *          another context only once its participant is open here.
 * kill:    a child runs joined transactions over A and B, each adding one
 *          to a counter in both roots (and rewriting a 4 KiB object in
 *          each), acknowledging each commit; SIGKILL after 1 to 30 ms;
 *          then one pool opened first (B first on odd rounds: its recovery
 *          opens A; A first on even ones): both counters equal, at the
 *          last acknowledged value or one more. JOIN_KILL_ROUNDS (default
 *          15); scripts/join_kill.sh runs 200. */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acks.h"
#include "common.h"
#include "txn.h"

#define LAYOUT "pmtx-join"
#define POOL_SIZE ((size_t)8 << 20)
#define BULK 4096u

/* root: {count, bulk object} */
enum { R_COUNT = 0, R_BULK = 8, ROOT_SIZE = 64 };
/* the meta object's word with the join table's handle, and an entry's
 * bytes: {participant uuid, context index, seq} (txn.h: word 7;
 * docs/join.md) */
enum { META_JOIN = 56, ENTRY = 24, ENTRIES = 256 };

static int joins(void)
{
    return !strcmp(txn_engine_name(), "undo") || !strcmp(txn_engine_name(), "redo") ||
           !strcmp(txn_engine_name(), "redo1") || !strcmp(txn_engine_name(), "cow");
}

/* n new pools, each made while the ones before are open: a pool's
 * address range is drawn at its creation among those free then (1 GiB
 * slots, 447 of them), and two pools made apart may draw the same one and
 * then never be open at once (TXN_E_BUSY: docs/join.md). */
static void make_pools(struct test_pool *t, int n)
{
    txn_pool_opts o = {.size = POOL_SIZE, .root_size = ROOT_SIZE, .threads = 4};
    txn_pool *p[3];
    size_t least = txn_pool_min_size(&o); /* pmdk's is larger */
    if (o.size < least)
        o.size = least;
    ck_assert_int_le(n, 3);
    for (int i = 0; i < n; i++) {
        CHECK_OK(test_pool_new(&t[i], "join"));
        CHECK_OK(txn_pool_create(t[i].name, LAYOUT, &o, &p[i]));
    }
    for (int i = 0; i < n; i++)
        txn_pool_close(p[i]);
}

static uint64_t count_of(txn_pool *p)
{
    txn *tx;
    uint64_t v;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, txn_root(p), R_COUNT, &v));
    CHECK_OK(txn_commit(tx));
    return v;
}

START_TEST(test_notsup)
{
    struct test_pool t[2], a, b;
    txn_pool *pa, *pb;
    txn *tx, *part = NULL;
    if (joins())
        return;
    make_pools(t, 2);
    a = t[0];
    b = t[1];
    CHECK_OK(txn_pool_open(a.name, LAYOUT, &pa));
    CHECK_OK(txn_pool_open(b.name, LAYOUT, &pb));
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_RC(txn_join(tx, pb, &part), TXN_E_NOTSUP);
    ck_assert_ptr_null(part);
    CHECK_OK(txn_write_u64(tx, txn_root(pa), R_COUNT, 5)); /* tx goes on */
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(count_of(pa), 5);
    txn_pool_close(pa);
    txn_pool_close(pb);
    test_pool_remove(a.name);
    test_pool_remove(b.name);
}
END_TEST

/* Why incll cannot join (docs/join.md, "incll"): a transaction of incll
 * is durable only when its epoch ends, and an epoch's end makes every
 * transaction of it permanent (its records stale), so no state of a part
 * is durable and still revocable, which a prepared part must be. The most
 * incll offers, each pool's commit made durable by txn_sync one after the
 * other, is torn by a crash between the two: A's commit durable, B's
 * (acknowledged) rolled back with its epoch. Seen here: a child so
 * committing ends before B's sync. */
START_TEST(test_incll_epochs)
{
    struct test_pool t[2];
    txn_pool *pa, *pb;
    int status;
    if (strcmp(txn_engine_name(), "incll"))
        return;
    make_pools(t, 2);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        txn *tx;
        setenv("TXN_EPOCH_MS", "0", 1); /* no epoch ends but at txn_sync */
        if (txn_pool_open(t[0].name, LAYOUT, &pa) || txn_pool_open(t[1].name, LAYOUT, &pb))
            _exit(10);
        if (txn_begin(pa, &tx) || txn_write_u64(tx, txn_root(pa), R_COUNT, 1) ||
            txn_commit(tx) || txn_sync(pa))
            _exit(11);
        if (txn_begin(pb, &tx) || txn_write_u64(tx, txn_root(pb), R_COUNT, 1) || txn_commit(tx))
            _exit(12);
        _exit(0); /* the crash: B's epoch has not ended */
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x",
                  (unsigned)status);
    CHECK_OK(txn_pool_open(t[1].name, LAYOUT, &pb)); /* B first */
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    ck_assert_uint_eq(count_of(pa), 1);
    ck_assert_uint_eq(count_of(pb), 0); /* acknowledged, rolled back with its epoch */
    txn_pool_close(pa);
    txn_pool_close(pb);
    for (int i = 0; i < 2; i++)
        test_pool_remove(t[i].name);
}
END_TEST

START_TEST(test_api)
{
    struct test_pool a, b;
    txn_pool *pa, *pb;
    txn *tx, *part, *again;
    txn_obj *o, *ra, *rb;
    uint64_t v;
    struct test_pool t[2];
    if (!joins())
        return;
    make_pools(t, 2);
    a = t[0];
    b = t[1];
    CHECK_OK(txn_pool_open(a.name, LAYOUT, &pa));
    CHECK_OK(txn_pool_open(b.name, LAYOUT, &pb));
    ra = txn_root(pa);
    rb = txn_root(pb);

    /* commit: B's objects through tx and through part */
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_OK(txn_join(tx, pb, &part));
    CHECK_OK(txn_join(tx, pb, &again));
    ck_assert_ptr_eq(part, again);
    ck_assert_ptr_eq(txn_pool_of(part), pb);
    CHECK_RC(txn_join(tx, pa, &again), TXN_E_INVAL);
    CHECK_RC(txn_join(part, pa, &again), TXN_E_INVAL);
    CHECK_OK(txn_write_u64(tx, ra, R_COUNT, 1));
    CHECK_OK(txn_write_u64(tx, rb, R_COUNT, 1));
    CHECK_OK(txn_read_u64(tx, rb, R_COUNT, &v));
    ck_assert_uint_eq(v, 1);
    CHECK_OK(txn_alloc(part, BULK, &o));
    ck_assert_uint_ge(txn_obj_size(pb, o), BULK);
    CHECK_OK(txn_write_u64(tx, o, BULK - 8, 77));
    CHECK_OK(txn_write(tx, rb, R_BULK, &o, sizeof o));
    ck_assert_ptr_nonnull(txn_open(tx, rb, TXN_RW));
    CHECK_OK(txn_write_u64(tx, rb, 16, 3));
    CHECK_RC(txn_commit(part), TXN_E_INVAL); /* only through tx */
    txn_abort(part);                         /* refused: nothing done */
    CHECK_OK(txn_read_u64(part, rb, 16, &v));
    ck_assert_uint_eq(v, 3);
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(count_of(pa), 1);
    ck_assert_uint_eq(count_of(pb), 1);

    /* abort: both back, B's allocation and free cancelled */
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_OK(txn_join(tx, pb, &part));
    CHECK_OK(txn_write_u64(tx, ra, R_COUNT, 2));
    CHECK_OK(txn_write_u64(tx, rb, R_COUNT, 2));
    CHECK_OK(txn_free(tx, o));
    txn_abort(tx);
    ck_assert_uint_eq(count_of(pa), 1);
    ck_assert_uint_eq(count_of(pb), 1);
    CHECK_OK(txn_begin(pb, &tx)); /* part is gone: the thread begins on B */
    CHECK_OK(txn_read_u64(tx, o, BULK - 8, &v));
    ck_assert_uint_eq(v, 77);
    CHECK_OK(txn_commit(tx));

    /* a failed write in B fails the whole transaction */
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_OK(txn_join(tx, pb, &part));
    CHECK_OK(txn_write_u64(tx, ra, R_COUNT, 3));
    CHECK_RC(txn_write_u64(tx, rb, txn_obj_size(pb, rb), 3), TXN_E_INVAL); /* past the root */
    CHECK_RC(txn_commit(tx), TXN_E_STATE);
    ck_assert_uint_eq(count_of(pa), 1);

    /* a pool the thread runs a transaction on cannot be joined */
    CHECK_OK(txn_begin(pb, &again));
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_RC(txn_join(tx, pb, &part), TXN_E_NESTED);
    txn_abort(tx);
    txn_abort(again);

    /* nothing of a view is joined: its writes stay private, while the
     * real pool's seqs go on (a view of B, then a view of A) */
    txn_pool_close(pb);
    CHECK_OK(txn_pool_view(b.name, LAYOUT, &pb));
    CHECK_OK(txn_begin(pa, &tx));
    part = NULL;
    CHECK_RC(txn_join(tx, pb, &part), TXN_E_NOTSUP);
    ck_assert_ptr_null(part);
    txn_abort(tx);
    txn_pool_close(pb);
    txn_pool_close(pa);
    CHECK_OK(txn_pool_open(b.name, LAYOUT, &pb));
    CHECK_OK(txn_pool_view(a.name, LAYOUT, &pa));
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_RC(txn_join(tx, pb, &part), TXN_E_NOTSUP);
    txn_abort(tx);

    /* closed and opened again, B first */
    txn_pool_close(pa);
    txn_pool_close(pb);
    CHECK_OK(txn_pool_open(b.name, LAYOUT, &pb));
    CHECK_OK(txn_pool_open(a.name, LAYOUT, &pa));
    ck_assert_uint_eq(count_of(pa), 1);
    ck_assert_uint_eq(count_of(pb), 1);
    txn_pool_close(pa);
    txn_pool_close(pb);
    test_pool_remove(a.name);
    test_pool_remove(b.name);
}
END_TEST

/* ---- threads: each its own word of both roots, its own contexts (so
 * its own entry in A's join table), committing at once on one coordinator
 * pool (its join_lock) */

enum { THREADS = 3, THREAD_TXS = 300 };

/* cow has one writer per object: the threads' words of one root conflict
 * (TXN_E_CONFLICT), and the transaction is tried again, as its users do */
static int retry(int *rc, uint64_t *i)
{
    if (*rc != TXN_E_CONFLICT)
        return 0;
    *rc = 0;
    --*i;
    sched_yield();
    return 1;
}

struct worker {
    txn_pool *a, *b;
    int t, rc;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (uint64_t i = 1; i <= THREAD_TXS && !w->rc; i++) {
        txn *tx, *part;
        size_t off = 8 * (size_t)(w->t + 1);
        if ((w->rc = txn_begin(w->a, &tx)))
            break;
        if ((w->rc = txn_join(tx, w->b, &part)) ||
            (w->rc = txn_write_u64(tx, txn_root(w->a), off, i)) ||
            (w->rc = txn_write_u64(tx, txn_root(w->b), off, i))) {
            txn_abort(tx);
            if (retry(&w->rc, &i))
                continue;
            break;
        }
        if (i % 5 == 0)
            txn_abort(tx);
        else
            w->rc = txn_commit(tx);
    }
    return NULL;
}

START_TEST(test_threads)
{
    struct test_pool t[2];
    txn_pool *pa, *pb;
    pthread_t th[THREADS];
    struct worker w[THREADS];
    if (!joins())
        return;
    make_pools(t, 2);
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    CHECK_OK(txn_pool_open(t[1].name, LAYOUT, &pb));
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){pa, pb, i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        CHECK_OK(w[i].rc);
    }
    txn_pool_close(pa);
    txn_pool_close(pb);
    CHECK_OK(txn_pool_open(t[1].name, LAYOUT, &pb)); /* B first */
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    for (int i = 0; i < THREADS; i++) {
        txn *tx;
        uint64_t va, vb;
        CHECK_OK(txn_begin(pa, &tx));
        CHECK_OK(txn_join(tx, pb, NULL));
        CHECK_OK(txn_read_u64(tx, txn_root(pa), 8 * (size_t)(i + 1), &va));
        CHECK_OK(txn_read_u64(tx, txn_root(pb), 8 * (size_t)(i + 1), &vb));
        txn_abort(tx);
        ck_assert_uint_eq(va, THREAD_TXS - 1); /* the last, a multiple of 5, aborted */
        ck_assert_uint_eq(vb, THREAD_TXS - 1);
    }
    txn_pool_close(pa);
    txn_pool_close(pb);
    for (int i = 0; i < 2; i++)
        test_pool_remove(t[i].name);
}
END_TEST

/* ---- many: more participant contexts over time than the table holds */

/* Entries of A's table in use, and whether one is participant `uuid`'s. */
static int table_used(txn_pool *pa, uint64_t uuid, int *has)
{
    txn *tx;
    txn_obj *t;
    uint64_t e[3];
    int n = 0;
    *has = 0;
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_OK(txn_read(tx, txn_meta_root(pa), META_JOIN, &t, sizeof t));
    for (size_t k = 0; t && k < ENTRIES; k++) {
        CHECK_OK(txn_read(tx, t, k * ENTRY, e, sizeof e));
        n += e[0] != 0;
        *has |= e[0] == uuid;
    }
    txn_abort(tx);
    return n;
}

/* The participant of the first entry in use of A's table. */
static uint64_t first_uuid(txn_pool *pa)
{
    txn *tx;
    txn_obj *t;
    uint64_t u = 0;
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_OK(txn_read(tx, txn_meta_root(pa), META_JOIN, &t, sizeof t));
    for (size_t k = 0; t && !u && k < ENTRIES; k++)
        CHECK_OK(txn_read_u64(tx, t, k * ENTRY, &u));
    txn_abort(tx);
    return u;
}

/* Every free entry of A's table but `keep` given to a stranger, by hand. */
static void fill_table(txn_pool *pa, int keep)
{
    txn *tx;
    txn_obj *t;
    uint64_t u;
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_OK(txn_read(tx, txn_meta_root(pa), META_JOIN, &t, sizeof t));
    ck_assert_ptr_nonnull(t);
    for (size_t k = 0; k < ENTRIES; k++) {
        CHECK_OK(txn_read_u64(tx, t, k * ENTRY, &u));
        if (!u && keep > 0)
            keep--;
        else if (!u)
            CHECK_OK(txn_write_u64(tx, t, k * ENTRY, 0x5eed000000000000ull + k + 1));
    }
    CHECK_OK(txn_commit(tx));
}

/* A joined commit of counter v over A and q (q's root only). */
static int commit_with(txn_pool *pa, txn_pool *q, uint64_t v)
{
    txn *tx;
    int rc = txn_begin(pa, &tx);
    if (rc)
        return rc;
    if ((rc = txn_join(tx, q, NULL)) || (rc = txn_write_u64(tx, txn_root(q), R_COUNT, v))) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

/* A fresh participant (made while A is open: their ranges differ), one
 * joined commit, closed and removed: a new pool uuid each time. */
static void one_stranger(txn_pool *pa, uint64_t v)
{
    struct test_pool x;
    txn_pool *px;
    txn_pool_opts o = {.root_size = ROOT_SIZE, .threads = 1};
    o.size = txn_pool_min_size(&o);
    CHECK_OK(test_pool_new(&x, "join"));
    CHECK_OK(txn_pool_create(x.name, LAYOUT, &o, &px));
    CHECK_OK(commit_with(pa, px, v));
    ck_assert_uint_eq(count_of(px), v);
    txn_pool_close(px);
    test_pool_remove(x.name);
}

START_TEST(test_many)
{
    struct test_pool t[2];
    txn_pool *pa, *pb;
    int has;
    if (!joins())
        return;
    make_pools(t, 2);
    /* X, the participant of the end, is made while A and B are open so
     * that its address range is neither's (ranges are drawn at creation) */
    struct test_pool x;
    txn_pool *px;
    txn_pool_opts o = {.root_size = ROOT_SIZE, .threads = 1};
    o.size = txn_pool_min_size(&o);
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    CHECK_OK(txn_pool_open(t[1].name, LAYOUT, &pb));
    CHECK_OK(test_pool_new(&x, "join"));
    CHECK_OK(txn_pool_create(x.name, LAYOUT, &o, &px));
    txn_pool_close(px);
    txn_pool_close(pb);
    /* 260 distinct participant contexts (more than the table's entries),
     * then A reopened and 40 more: each commit's entry is cleared by the
     * next one, the last by the close (J3) */
    for (uint64_t i = 1; i <= 300; i++) {
        one_stranger(pa, i);
        ck_assert_int_le(table_used(pa, 0, &has), 1);
        if (i == 260) {
            txn_pool_close(pa);
            CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
        }
    }
    txn_pool_close(pa); /* clears the last stranger's entry */
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    ck_assert_int_eq(table_used(pa, 0, &has), 0);
    txn_pool_close(pa);
    /* an entry left by an earlier life of A (B's: a child commits over A
     * and B and ends with no close) is given to another context only
     * once B is open here, its recovery done */
    int status;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(txn_pool_open(t[0].name, LAYOUT, &pa) || txn_pool_open(t[1].name, LAYOUT, &pb) ||
              commit_with(pa, pb, 1));
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    ck_assert_int_eq(table_used(pa, 0, &has), 1);
    uint64_t ub = first_uuid(pa);
    fill_table(pa, 0); /* all strangers but B */
    CHECK_OK(txn_pool_open(x.name, LAYOUT, &px));
    CHECK_RC(commit_with(pa, px, 2), TXN_E_NOSPACE); /* B not open here */
    CHECK_OK(txn_pool_open(t[1].name, LAYOUT, &pb));
    ck_assert_int_eq(table_used(pa, ub, &has), ENTRIES);
    ck_assert(has);
    CHECK_OK(commit_with(pa, px, 2)); /* B's entry given to X */
    ck_assert_int_eq(table_used(pa, ub, &has), ENTRIES);
    ck_assert(!has);
    ck_assert_uint_eq(count_of(px), 2);
    ck_assert_uint_eq(count_of(pb), 1);
    txn_pool_close(px);
    txn_pool_close(pa);
    txn_pool_close(pb);
    test_pool_remove(x.name);
    for (int i = 0; i < 2; i++)
        test_pool_remove(t[i].name);
}
END_TEST

/* Free threads on a table of three usable entries: each thread's commits
 * alternate between participants B and C, so nearly every commit needs an
 * entry another context left, while the other threads' parts may be
 * finishing (their entries pending: J3). Three entries always suffice:
 * at most two are another thread's pending one. */
struct rotor {
    txn_pool *a, *q[2];
    int t, rc;
};

static void *rotate(void *arg)
{
    struct rotor *w = arg;
    for (uint64_t i = 1; i <= 200 && !w->rc; i++) {
        txn *tx;
        txn_pool *q = w->q[i % 2];
        size_t off = 8 * (size_t)(w->t + 1);
        if ((w->rc = txn_begin(w->a, &tx)))
            break;
        if ((w->rc = txn_join(tx, q, NULL)) || (w->rc = txn_write_u64(tx, txn_root(w->a), off, i)) ||
            (w->rc = txn_write_u64(tx, txn_root(q), off, i))) {
            txn_abort(tx);
            if (retry(&w->rc, &i))
                continue;
            break;
        }
        w->rc = txn_commit(tx);
    }
    return NULL;
}

START_TEST(test_threads_full)
{
    struct test_pool t[3];
    txn_pool *p[3];
    pthread_t th[THREADS];
    struct rotor w[THREADS];
    int has;
    if (!joins())
        return;
    make_pools(t, 3);
    for (int i = 0; i < 3; i++)
        CHECK_OK(txn_pool_open(t[i].name, LAYOUT, &p[i]));
    CHECK_OK(commit_with(p[0], p[1], 0)); /* A's table made, B's entry in it */
    fill_table(p[0], 2);
    ck_assert_int_eq(table_used(p[0], 0, &has), ENTRIES - 2);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct rotor){p[0], {p[1], p[2]}, i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, rotate, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        CHECK_OK(w[i].rc);
    }
    for (int i = 0; i < THREADS; i++) {
        txn *tx;
        uint64_t v[3];
        CHECK_OK(txn_begin(p[0], &tx));
        CHECK_OK(txn_join(tx, p[1], NULL));
        CHECK_OK(txn_join(tx, p[2], NULL));
        for (int k = 0; k < 3; k++)
            CHECK_OK(txn_read_u64(tx, txn_root(p[k]), 8 * (size_t)(i + 1), &v[k]));
        txn_abort(tx);
        ck_assert_uint_eq(v[0], 200);
        ck_assert_uint_eq(v[1], 200); /* B took the even ones */
        ck_assert_uint_eq(v[2], 199);
    }
    for (int i = 0; i < 3; i++) {
        txn_pool_close(p[i]);
        test_pool_remove(t[i].name);
    }
}
END_TEST

/* ---- indoubt */

static void end_now(void *arg)
{
    (void)arg;
    _exit(0); /* no destructor, no close: what a crash leaves */
}

/* A child commits counter `v` into A, B and C and stops after B finished:
 * C is prepared, A committed. */
static void leave_c_prepared(struct test_pool *t, uint64_t v)
{
    int status;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        txn_pool *p[3];
        txn *tx, *part[2];
        for (int i = 0; i < 3; i++)
            if (txn_pool_open(t[i].name, LAYOUT, &p[i]))
                _exit(10);
        if (txn_begin(p[0], &tx) || txn_join(tx, p[1], &part[0]) ||
            txn_join(tx, p[2], &part[1]) ||
            txn_defer(part[0], TXN_ON_COMMIT, end_now, NULL))
            _exit(11);
        for (int i = 0; i < 3; i++)
            if (txn_write_u64(tx, txn_root(p[i]), R_COUNT, v))
                _exit(12);
        txn_commit(tx);
        _exit(13); /* the action did not run */
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child status 0x%x (10 open, 11 join, 12 write, 13 no action)", (unsigned)status);
}

/* Threads each holding a transaction on one pool until told, to take all
 * its contexts (those whose txn_begin fails TXN_E_THREADS hold nothing). */
enum { HOLDERS = 8 };

struct holders {
    txn_pool *p;
    pthread_barrier_t held, go;
    int begun; /* under the barrier's order: counted before `held` */
    pthread_mutex_t mu;
    pthread_t t[HOLDERS];
};

static void *hold(void *arg)
{
    struct holders *h = arg;
    txn *tx;
    int rc = txn_begin(h->p, &tx);
    pthread_mutex_lock(&h->mu);
    h->begun += !rc;
    pthread_mutex_unlock(&h->mu);
    pthread_barrier_wait(&h->held);
    pthread_barrier_wait(&h->go);
    if (!rc)
        txn_abort(tx);
    return NULL;
}

static void hold_all(struct holders *h, txn_pool *p)
{
    h->p = p;
    h->begun = 0;
    pthread_mutex_init(&h->mu, NULL);
    pthread_barrier_init(&h->held, NULL, HOLDERS + 1);
    pthread_barrier_init(&h->go, NULL, HOLDERS + 1);
    for (int i = 0; i < HOLDERS; i++)
        ck_assert_int_eq(pthread_create(&h->t[i], NULL, hold, h), 0);
    pthread_barrier_wait(&h->held);
    ck_assert_int_gt(h->begun, 0);
    ck_assert_int_lt(h->begun, HOLDERS); /* some refused: none left */
}

static void release_all(struct holders *h)
{
    pthread_barrier_wait(&h->go);
    for (int i = 0; i < HOLDERS; i++)
        pthread_join(h->t[i], NULL);
    pthread_barrier_destroy(&h->held);
    pthread_barrier_destroy(&h->go);
    pthread_mutex_destroy(&h->mu);
}

/* A's table entries as if A had not committed its last transaction: each
 * seq one version older. B's is of no concern: B finished. */
static void forget_in_table(txn_pool *pa)
{
    txn *tx;
    txn_obj *t;
    uint64_t e[3];
    int n = 0;
    CHECK_OK(txn_begin(pa, &tx));
    CHECK_OK(txn_read(tx, txn_meta_root(pa), META_JOIN, &t, sizeof t));
    ck_assert_ptr_nonnull(t);
    for (size_t k = 0; k < ENTRIES; k++) {
        CHECK_OK(txn_read(tx, t, k * ENTRY, e, sizeof e));
        if (e[0] && ++n)
            CHECK_OK(txn_write_u64(tx, t, k * ENTRY + 16, e[2] - 1));
    }
    ck_assert_int_eq(n, 2); /* B's context and C's */
    CHECK_OK(txn_commit(tx));
}

START_TEST(test_indoubt)
{
    struct test_pool t[3];
    txn_pool *pa, *pc;
    txn_pool_info in;
    if (!joins())
        return;
    make_pools(t, 3);

    /* committed, A closed: C's recovery opens A (as a view when inspected) */
    leave_c_prepared(t, 7);
    int rc = txn_pool_inspect(t[2].name, &in); /* undo: nothing to change but its slot */
    ck_assert_msg(rc == 0 || rc == TXN_INSPECT_RECOVER, "inspect: %s", in.problem);
    ck_assert_uint_eq(in.slots_pending, 1);
    CHECK_OK(txn_pool_open(t[2].name, LAYOUT, &pc));
    ck_assert_uint_eq(count_of(pc), 7);
    txn_pool_close(pc);

    /* committed, A open here with all its contexts taken by other
     * threads: A's table is still read (with no context of A) */
    struct holders h;
    leave_c_prepared(t, 8);
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    hold_all(&h, pa);
    CHECK_OK(txn_pool_open(t[2].name, LAYOUT, &pc));
    release_all(&h);
    ck_assert_uint_eq(count_of(pc), 8);
    txn_pool_close(pc);
    txn_pool_close(pa);

    /* committed, A open here, and this thread's transaction on A failed
     * already: A's table is still read (not through that transaction) */
    leave_c_prepared(t, 8);
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    txn *failed;
    CHECK_OK(txn_begin(pa, &failed));
    CHECK_RC(txn_write_u64(failed, txn_root(pa), txn_obj_size(pa, txn_root(pa)), 1),
             TXN_E_INVAL);
    CHECK_OK(txn_pool_open(t[2].name, LAYOUT, &pc));
    txn_abort(failed);
    ck_assert_uint_eq(count_of(pc), 8);
    txn_pool_close(pc);

    /* not in A's table: rolled back (A open here, then A closed) */
    txn_pool_close(pa);
    leave_c_prepared(t, 9);
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    ck_assert_uint_eq(count_of(pa), 9);
    forget_in_table(pa);
    CHECK_OK(txn_pool_open(t[2].name, LAYOUT, &pc));
    ck_assert_uint_eq(count_of(pc), 8);
    txn_pool_close(pc);
    txn_pool_close(pa);
    leave_c_prepared(t, 10); /* the entries move on */
    CHECK_OK(txn_pool_open(t[0].name, LAYOUT, &pa));
    forget_in_table(pa);
    txn_pool_close(pa);
    CHECK_OK(txn_pool_open(t[2].name, LAYOUT, &pc));
    ck_assert_uint_eq(count_of(pc), 8);
    txn_pool_close(pc);

    /* A open here only as a view, where a private commit made its table
     * forget C's seq: C's recovery does not take the view's word, and the
     * real A cannot be opened beside it: refused */
    leave_c_prepared(t, 11);
    CHECK_OK(txn_pool_view(t[0].name, LAYOUT, &pa));
    forget_in_table(pa);
    CHECK_RC(txn_pool_open(t[2].name, LAYOUT, &pc), TXN_E_INDOUBT);
    txn_pool_close(pa);

    /* A missing: C does not open, and says why; A back: it does */
    char moved[TEST_PATH_LEN + 8];
    snprintf(moved, sizeof moved, "%s.away", t[0].path);
    ck_assert_int_eq(rename(t[0].path, moved), 0);
    CHECK_RC(txn_pool_open(t[2].name, LAYOUT, &pc), TXN_E_INDOUBT);
    const char *why = txn_pool_strerror(TXN_E_INDOUBT);
    ck_assert_msg(strstr(why, t[0].path) != NULL, "the refusal does not name %s: %s", t[0].path,
                  why);
    ck_assert_int_eq(rename(moved, t[0].path), 0);
    CHECK_OK(txn_pool_open(t[2].name, LAYOUT, &pc));
    ck_assert_uint_eq(count_of(pc), 11);
    txn_pool_close(pc);
    for (int i = 0; i < 3; i++)
        test_pool_remove(t[i].name);
}
END_TEST

/* ---- kill */

static int step(txn_pool *pa, txn_pool *pb, uint64_t *acked)
{
    txn *tx, *part;
    txn_pool *p[2] = {pa, pb};
    uint64_t n;
    int rc = txn_begin(pa, &tx);
    if (rc)
        return rc;
    if ((rc = txn_join(tx, pb, &part)) || (rc = txn_read_u64(tx, txn_root(pa), R_COUNT, &n)))
        goto fail;
    for (int i = 0; i < 2; i++) {
        txn_obj *o, *r = txn_root(p[i]);
        char buf[BULK];
        memset(buf, (int)(n + 1), sizeof buf);
        if ((rc = txn_read(tx, r, R_BULK, &o, sizeof o)) ||
            (rc = txn_write_u64(tx, r, R_COUNT, n + 1)) ||
            (rc = txn_write(tx, o, 0, buf, sizeof buf)))
            goto fail;
    }
    if (!(rc = txn_commit(tx)))
        *acked = n + 1;
    return rc;
fail:
    txn_abort(tx);
    return rc;
}

static void kill_child(const struct test_pool *a, const struct test_pool *b, int fd)
{
    txn_pool *pa, *pb;
    int rc = txn_pool_open(a->name, LAYOUT, &pa);
    if (rc || (rc = txn_pool_open(b->name, LAYOUT, &pb)))
        _exit(rc <= TXN_E_FIRST && rc >= TXN_E_LAST ? 64 + TXN_E_FIRST - rc : 10);
    for (;;) {
        uint64_t v;
        if (step(pa, pb, &v))
            _exit(11);
        if (write(fd, &v, sizeof v) != (ssize_t)sizeof v)
            _exit(12);
    }
}

/* Both counters, and each bulk object whole with the counter's byte. */
static uint64_t check_pool(txn_pool *p)
{
    txn *tx;
    txn_obj *o;
    uint64_t n;
    unsigned char buf[BULK];
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, txn_root(p), R_COUNT, &n));
    CHECK_OK(txn_read(tx, txn_root(p), R_BULK, &o, sizeof o));
    CHECK_OK(txn_read(tx, o, 0, buf, sizeof buf));
    for (size_t i = 0; i < BULK; i++)
        ck_assert_msg(buf[i] == (unsigned char)n, "count %llu, bulk byte %zu is %u",
                      (unsigned long long)n, i, buf[i]);
    CHECK_OK(txn_commit(tx));
    return n;
}

static void set_bulk(const struct test_pool *t)
{
    txn_pool *p;
    txn *tx;
    txn_obj *o;
    CHECK_OK(txn_pool_open(t->name, LAYOUT, &p));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_alloc(tx, BULK, &o));
    CHECK_OK(txn_write(tx, txn_root(p), R_BULK, &o, sizeof o));
    CHECK_OK(txn_commit(tx));
    txn_pool_close(p);
}

START_TEST(test_kill)
{
    uint64_t rounds = env_u64("JOIN_KILL_ROUNDS", 15);
    uint64_t seed = env_u64("KILL_SEED", (uint64_t)time(NULL) ^ (uint64_t)getpid());
    uint64_t in_flight = 0;
    if (!joins())
        return;
    printf("join kill: engine %s, %llu rounds, KILL_SEED=%llu\n", txn_engine_name(),
           (unsigned long long)rounds, (unsigned long long)seed);
    srand((unsigned)seed);
    for (uint64_t r = 1; r <= rounds; r++) {
        struct test_pool t[2], a, b;
        struct acks k = {0};
        int fds[2];
        make_pools(t, 2);
        a = t[0];
        b = t[1];
        set_bulk(&a);
        set_bulk(&b);
        ck_assert_int_eq(pipe(fds), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(fds[0]);
            kill_child(&a, &b, fds[1]);
        }
        close(fds[1]);
        int status = acks_kill_child(fds[0], pid, &k, (1 + (uint64_t)(rand() % 30)) * 1000000u);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                      "round %llu: child stopped by itself (status 0x%x: 10 open, 64 + "
                      "TXN_E_FIRST - code: open refused, 11 transaction, 12 pipe)", (unsigned long long)r, (unsigned)status);
        txn_pool *pa, *pb;
        if (r % 2) {
            CHECK_OK(txn_pool_open(b.name, LAYOUT, &pb));
            CHECK_OK(txn_pool_open(a.name, LAYOUT, &pa));
        } else {
            CHECK_OK(txn_pool_open(a.name, LAYOUT, &pa));
            CHECK_OK(txn_pool_open(b.name, LAYOUT, &pb));
        }
        uint64_t na = check_pool(pa), nb = check_pool(pb);
        ck_assert_msg(na == nb && (na == k.last || na == k.last + 1),
                      "round %llu: A holds %llu, B %llu, %llu acknowledged", (unsigned long long)r,
                      (unsigned long long)na, (unsigned long long)nb, (unsigned long long)k.last);
        in_flight += na != k.last;
        txn_pool_close(pa);
        txn_pool_close(pb);
        test_pool_remove(a.name);
        test_pool_remove(b.name);
    }
    printf("join kill: %llu rounds, 0 inconsistent, %llu with the transaction in flight "
           "committed\n", (unsigned long long)rounds, (unsigned long long)in_flight);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("join");
    TCase *tc = test_tcase(s, "api", 30.0);
    tcase_add_test(tc, test_notsup);
    tcase_add_test(tc, test_incll_epochs);
    tcase_add_test(tc, test_api);
    tcase_add_test(tc, test_indoubt);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_many);
    tcase_add_test(tc, test_threads_full);
    tc = test_tcase(s, "kill", 30.0 + 0.5 * (double)env_u64("JOIN_KILL_ROUNDS", 15));
    tcase_add_test(tc, test_kill);
    return test_run(s, CK_FORK_GETENV, "join");
}
