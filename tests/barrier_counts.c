/* barrier_counts.c - exact persist barriers of a commit and of an abort
 * for every persistent engine, as the engine's barriers.h states them
 * (commit = a + b*N and abort = c + d*N for N distinct 32-byte writes), at
 * whatever TXN_PDOM the run has: the PDOM changes what a barrier costs,
 * never how many. Also: a read-only transaction over objects nobody
 * writes does no log lookup, and one that reads its own write does where
 * the engine says so. Built for each engine whose folder holds barriers.h,
 * found on the engine's include path. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "txn.h"

struct cost {
    unsigned commit_a, commit_b, abort_a, abort_b;
    unsigned read_only; /* a transaction that only reads */
    /* a transaction that first opens its N objects with txn_open(TXN_RW),
     * then writes them, right after txn_sync: open_a + open_b * N with
     * batched logging (the default), paper_a + paper_b * N with
     * TXN_LOG_BATCH=0 (a record and a fence at each first write) */
    unsigned open_a, open_b, paper_a, paper_b;
    unsigned own_read_lookups; /* log lookups of a read of its own write */
    int epoch_logs_once;       /* the same transaction again, before the
                                  next txn_sync, logs nothing */
};

#include "barriers.h"

static const struct cost engine_cost = ENGINE_BARRIERS;

enum { NOBJ = 24 };
static txn_pool *pool;
static txn_obj *objs[NOBJ];
static char name[TEST_NAME_LEN];

static void setup(void)
{
    ck_assert_int_eq(test_pool_name("bc", name, sizeof name), 0);
    txn_pool_opts o = {.size = 16u << 20};
    ck_assert_int_eq(txn_pool_create(name, "bc", &o, &pool), 0);
    txn *tx;
    ck_assert_int_eq(txn_begin(pool, &tx), 0);
    for (int i = 0; i < NOBJ; i++)
        ck_assert_int_eq(txn_alloc(tx, 64, &objs[i]), 0);
    ck_assert_int_eq(txn_commit(tx), 0);
}

static void teardown(void)
{
    txn_pool_close(pool);
    test_pool_remove(name);
}

/* Barriers of one transaction writing objs[0..n) (32 bytes each). */
static uint64_t run(unsigned n, int commit, uint64_t v)
{
    txn_stats a, b;
    txn *tx;
    txn_stats_get(&a);
    ck_assert_int_eq(txn_begin(pool, &tx), 0);
    for (unsigned i = 0; i < n; i++) {
        uint64_t buf[4] = {v, v, v, v};
        ck_assert_int_eq(txn_write(tx, objs[i], 0, buf, sizeof buf), 0);
    }
    if (commit)
        ck_assert_int_eq(txn_commit(tx), 0);
    else
        txn_abort(tx);
    txn_stats_get(&b);
    return b.barriers - a.barriers;
}

START_TEST(test_commit_and_abort)
{
    const struct cost *c = &engine_cost;
    run(1, 1, 1); /* warm-up: slot claims, first runs */
    static const unsigned ns[] = {1, 2, 5, 20};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        unsigned n = ns[k];
        uint64_t got = run(n, 1, 10 + k);
        printf("%s pdom %d: commit of %u writes: %llu barriers\n", txn_engine_name(), txn_pdom(), n,
               (unsigned long long)got);
        ck_assert_uint_eq(got, c->commit_a + c->commit_b * n);
        got = run(n, 0, 20 + k);
        printf("%s pdom %d: abort of %u writes: %llu barriers\n", txn_engine_name(), txn_pdom(), n,
               (unsigned long long)got);
        ck_assert_uint_eq(got, c->abort_a + c->abort_b * n);
        /* the abort left the committed value */
        txn *tx;
        uint64_t v;
        ck_assert_int_eq(txn_begin(pool, &tx), 0);
        ck_assert_int_eq(txn_read_u64(tx, objs[n - 1], 0, &v), 0);
        txn_abort(tx);
        ck_assert_uint_eq(v, 10 + k);
    }
}
END_TEST

/* Redo only: lookups happen exactly when a transaction reads what it
 * wrote; other engines never count any. */
START_TEST(test_read_lookups)
{
    txn_stats a, b;
    txn *tx;
    uint64_t v;
    run(NOBJ, 1, 5);
    txn_stats_get(&a);
    ck_assert_int_eq(txn_begin(pool, &tx), 0);
    for (int i = 0; i < NOBJ; i++) {
        ck_assert_int_eq(txn_read_u64(tx, objs[i], 8, &v), 0);
        ck_assert_uint_eq(v, 5);
    }
    ck_assert_int_eq(txn_commit(tx), 0);
    txn_stats_get(&b);
    ck_assert_uint_eq(b.raw_lookups - a.raw_lookups, 0);
    ck_assert_uint_eq(b.barriers - a.barriers, engine_cost.read_only);

    ck_assert_int_eq(txn_begin(pool, &tx), 0);
    ck_assert_int_eq(txn_write_u64(tx, objs[3], 8, 77), 0);
    ck_assert_int_eq(txn_read_u64(tx, objs[3], 8, &v), 0);
    ck_assert_uint_eq(v, 77);
    ck_assert_int_eq(txn_read_u64(tx, objs[4], 8, &v), 0); /* not written */
    ck_assert_uint_eq(v, 5);
    txn_abort(tx);
    txn_stats_get(&a);
    ck_assert_uint_eq(a.raw_lookups - b.raw_lookups,
                      engine_cost.own_read_lookups);
}
END_TEST

/* Objects opened read-write first, then written: batched logging shares
 * one fence among the records of the opened objects. In the same epoch a
 * second such transaction of incll logs nothing. */
START_TEST(test_open_then_write)
{
    const struct cost *c = &engine_cost;
    const char *b = getenv("TXN_LOG_BATCH");
    int batched = !(b && *b == '0');
    static const unsigned ns[] = {1, 2, 5, 20};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        unsigned n = ns[k];
        for (int again = 0; again < 2; again++) {
            if (!again)
                ck_assert_int_eq(txn_sync(pool), 0);
            txn_stats s0, s1;
            txn *tx;
            txn_stats_get(&s0);
            ck_assert_int_eq(txn_begin(pool, &tx), 0);
            for (unsigned i = 0; i < n; i++)
                ck_assert_ptr_nonnull(txn_open(tx, objs[i], TXN_RW));
            for (unsigned i = 0; i < n; i++)
                ck_assert_int_eq(txn_write_u64(tx, objs[i], 16, 100 * k + again + i), 0);
            ck_assert_int_eq(txn_commit(tx), 0);
            txn_stats_get(&s1);
            uint64_t got = s1.barriers - s0.barriers;
            uint64_t want = batched ? c->open_a + c->open_b * n : c->paper_a + c->paper_b * n;
            if (again && c->epoch_logs_once)
                want = 0; /* logged earlier in this epoch */
            printf("%s pdom %d %s: open %u, write, commit (%s): %llu barriers\n", txn_engine_name(),
                   txn_pdom(), batched ? "batched" : "paper", n, again ? "again" : "after sync",
                   (unsigned long long)got);
            ck_assert_uint_eq(got, want);
            uint64_t v;
            ck_assert_int_eq(txn_begin(pool, &tx), 0);
            ck_assert_int_eq(txn_read_u64(tx, objs[n - 1], 16, &v), 0);
            txn_abort(tx);
            ck_assert_uint_eq(v, 100 * k + again + n - 1);
        }
    }
}
END_TEST

int main(void)
{
    /* incll: epochs end only in txn_sync, so no epoch ends between the
     * allocation and the counted writes; other engines ignore it */
    setenv("TXN_EPOCH_MS", "0", 0);
    Suite *s = suite_create("barrier_counts");
    TCase *tc = test_tcase(s, "counts", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_commit_and_abort);
    tcase_add_test(tc, test_read_lookups);
    tcase_add_test(tc, test_open_then_write);
    return test_run(s, CK_NOFORK, "bc"); /* stats are per thread */
}
