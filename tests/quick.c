/* quick.c - transactions whose begin and commit txn.h may run inline
 * (none: Q1, Q2 in txn.h; redo1: the begin only), mixed with everything
 * that must send them back to the library: an abort, a nested begin, a
 * deferred action, a failed call, a second pool, a commit from another
 * thread, a pool closed and opened again. Written against txn.h only;
 * every engine runs it (on the others every begin and commit calls the
 * library, and the results must be the same). */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "txn.h"

#define LAYOUT "pmtx-quick"
#define ROUNDS 1000

static txn_pool *make_pool(char *name)
{
    txn_pool_opts o = {.size = (size_t)16 << 20, .root_size = 64};
    txn_pool *p = NULL;
    CHECK_OK(test_pool_name("quick", name, TEST_NAME_LEN));
    CHECK_OK(txn_pool_create(name, LAYOUT, &o, &p));
    return p;
}

static void drop_pool(txn_pool *p, const char *name)
{
    txn_pool_close(p);
    ck_assert_int_eq(test_pool_remove(name), 0);
}

static uint64_t get(txn_pool *p, size_t off)
{
    txn *tx;
    uint64_t v = 0;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, txn_root(p), off, &v));
    CHECK_OK(txn_commit(tx));
    return v;
}

/* A read first, as a program's update does: it lets the object's writes
 * run inline from then on (a write that calls the library does not). */
static void put(txn_pool *p, size_t off, uint64_t v)
{
    txn *tx;
    uint64_t old;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, txn_root(p), off, &old));
    CHECK_OK(txn_write_u64(tx, txn_root(p), off, v));
    CHECK_OK(txn_commit(tx));
}

/* Many commits in a row (inline after the first on none), each counted;
 * then an abort restores only its own transaction's old bytes: a commit
 * that left its log behind would have the abort restore older ones. */
START_TEST(test_commits_then_abort)
{
    char name[TEST_NAME_LEN];
    txn_pool *p = make_pool(name);
    txn_stats st;
    put(p, 0, 0);
    txn_stats_reset();
    for (uint64_t i = 1; i <= ROUNDS; i++)
        put(p, 0, i);
    txn_stats_get(&st);
    ck_assert_uint_eq(st.commits, ROUNDS);
    txn *tx;
    uint64_t v;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, txn_root(p), 0, &v));
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 7777));
    CHECK_OK(txn_write_u64(tx, txn_root(p), 8, 8888));
    txn_abort(tx);
    ck_assert_uint_eq(get(p, 0), ROUNDS);
    ck_assert_uint_eq(get(p, 8), 0);
    txn_stats_get(&st);
    ck_assert_uint_eq(st.aborts, 1);
    ck_assert_uint_eq(st.commits, ROUNDS + 2);
    drop_pool(p, name);
}
END_TEST

/* A begin while one runs is refused and leaves the running one whole. */
START_TEST(test_nested)
{
    char name[TEST_NAME_LEN];
    txn_pool *p = make_pool(name);
    put(p, 0, 1);
    txn *tx, *t2 = (txn *)&t2;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 2));
    CHECK_RC(txn_begin(p, &t2), TXN_E_NESTED);
    ck_assert_ptr_null(t2);
    CHECK_OK(txn_write_u64(tx, txn_root(p), 8, 3));
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(get(p, 0), 2);
    ck_assert_uint_eq(get(p, 8), 3);
    drop_pool(p, name);
}
END_TEST

static void count(void *arg)
{
    ++*(int *)arg;
}

/* A deferred action of a transaction begun inline runs at its commit. */
START_TEST(test_defer)
{
    char name[TEST_NAME_LEN];
    txn_pool *p = make_pool(name);
    put(p, 0, 1);
    int ran = 0;
    txn *tx;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_defer(tx, TXN_ON_COMMIT, count, &ran));
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 2));
    ck_assert_int_eq(ran, 0);
    CHECK_OK(txn_commit(tx));
    ck_assert_int_eq(ran, 1);
    put(p, 0, 3); /* the next one has no action */
    ck_assert_int_eq(ran, 1);
    drop_pool(p, name);
}
END_TEST

/* After a failed call the commit is refused and rolls back. */
START_TEST(test_failed_call)
{
    char name[TEST_NAME_LEN];
    txn_pool *p = make_pool(name);
    put(p, 0, 1);
    txn *tx;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 2));
    CHECK_RC(txn_write_u64(tx, txn_root(p), 4, 2), TXN_E_INVAL);
    CHECK_RC(txn_commit(tx), TXN_E_STATE);
    ck_assert_uint_eq(get(p, 0), 1);
    put(p, 0, 4);
    ck_assert_uint_eq(get(p, 0), 4);
    drop_pool(p, name);
}
END_TEST

/* Two pools, their transactions interleaved: each commit finds its own
 * context whichever the thread used last. */
START_TEST(test_two_pools)
{
    char na[TEST_NAME_LEN], nb[TEST_NAME_LEN];
    txn_pool *a = make_pool(na), *b = make_pool(nb);
    for (uint64_t i = 1; i <= 100; i++) {
        txn *ta, *tb;
        CHECK_OK(txn_begin(a, &ta));
        int rc = txn_begin(b, &tb);
        if (rc == TXN_E_NOTSUP) { /* pmdk: one transaction a thread */
            txn_abort(ta);
            put(a, 0, i % 2 ? i : i - 1);
            put(b, 0, 1000 + i);
            continue;
        }
        CHECK_OK(rc);
        CHECK_OK(txn_write_u64(ta, txn_root(a), 0, i));
        CHECK_OK(txn_write_u64(tb, txn_root(b), 0, 1000 + i));
        if (i % 2) {
            CHECK_OK(txn_commit(ta));
            CHECK_OK(txn_commit(tb));
        } else {
            CHECK_OK(txn_commit(tb));
            txn_abort(ta);
        }
    }
    ck_assert_uint_eq(get(a, 0), 99);
    ck_assert_uint_eq(get(b, 0), 1100);
    drop_pool(a, na);
    drop_pool(b, nb);
}
END_TEST

struct other {
    txn *tx;
    int rc;
};

static void *commit_other(void *arg)
{
    struct other *o = arg;
    o->rc = txn_commit(o->tx);
    return NULL;
}

/* A commit from another thread is refused and changes nothing. */
START_TEST(test_commit_other_thread)
{
    char name[TEST_NAME_LEN];
    txn_pool *p = make_pool(name);
    put(p, 0, 1);
    struct other o = {NULL, 0};
    pthread_t t;
    uint64_t v;
    CHECK_OK(txn_begin(p, &o.tx));
    CHECK_OK(txn_read_u64(o.tx, txn_root(p), 0, &v));
    CHECK_OK(txn_write_u64(o.tx, txn_root(p), 0, 2));
    ck_assert_int_eq(pthread_create(&t, NULL, commit_other, &o), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    CHECK_RC(o.rc, TXN_E_INVAL);
    CHECK_OK(txn_write_u64(o.tx, txn_root(p), 8, 3));
    CHECK_OK(txn_commit(o.tx));
    ck_assert_uint_eq(get(p, 0), 2);
    ck_assert_uint_eq(get(p, 8), 3);
    drop_pool(p, name);
}
END_TEST

/* A pool closed and opened again (and another pool made meanwhile, which
 * may take the old handle's address): the thread's cached context of the
 * closed one is never used. */
START_TEST(test_close_reopen)
{
    char na[TEST_NAME_LEN], nb[TEST_NAME_LEN];
    txn_pool *a = make_pool(na);
    put(a, 0, 5);
    put(a, 0, 6);
    txn_pool_close(a);
    txn_pool *b = make_pool(nb);
    put(b, 0, 7);
    put(b, 0, 8);
    ck_assert_uint_eq(get(b, 0), 8);
    txn_pool_close(b);
    CHECK_OK(txn_pool_open(na, LAYOUT, &a));
    ck_assert_uint_eq(get(a, 0), 6);
    put(a, 8, 9);
    ck_assert_uint_eq(get(a, 8), 9);
    drop_pool(a, na);
    ck_assert_int_eq(test_pool_remove(nb), 0);
}
END_TEST

/* Objects allocated and freed between inline transactions: each new
 * block's first life and its next are told apart (api.c's R1). */
START_TEST(test_alloc_free)
{
    char name[TEST_NAME_LEN];
    txn_pool *p = make_pool(name);
    for (uint64_t i = 1; i <= 50; i++) {
        txn *tx;
        txn_obj *o;
        CHECK_OK(txn_begin(p, &tx));
        CHECK_OK(txn_alloc(tx, 64, &o));
        CHECK_OK(txn_write_u64(tx, o, 0, i));
        CHECK_OK(txn_write_u64(tx, txn_root(p), 0, (uint64_t)(uintptr_t)o));
        CHECK_OK(txn_commit(tx));
        uint64_t v = 0;
        CHECK_OK(txn_begin(p, &tx));
        CHECK_OK(txn_read_u64(tx, o, 0, &v));
        CHECK_OK(txn_write_u64(tx, o, 8, v + 1));
        CHECK_OK(txn_commit(tx));
        ck_assert_uint_eq(v, i);
        CHECK_OK(txn_begin(p, &tx));
        CHECK_OK(txn_read_u64(tx, o, 8, &v));
        ck_assert_uint_eq(v, i + 1);
        CHECK_OK(txn_free(tx, o));
        CHECK_OK(txn_commit(tx));
    }
    drop_pool(p, name);
}
END_TEST

/* A transaction that allocated commits its allocation even when it began
 * inline: a later abort must not give the block back. */
START_TEST(test_alloc_then_abort)
{
    char name[TEST_NAME_LEN];
    txn_pool *p = make_pool(name);
    put(p, 0, 1);
    put(p, 0, 2);
    txn *tx;
    txn_obj *o;
    uint64_t v;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, txn_root(p), 0, &v));
    CHECK_OK(txn_alloc(tx, 64, &o));
    CHECK_OK(txn_write_u64(tx, o, 0, 42));
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 3));
    CHECK_OK(txn_commit(tx));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, txn_root(p), 0, &v));
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 4));
    txn_abort(tx);
    ck_assert_uint_eq(get(p, 0), 3);
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, o, 0, &v));
    ck_assert_uint_eq(v, 42);
    CHECK_OK(txn_free(tx, o));
    CHECK_OK(txn_commit(tx));
    drop_pool(p, name);
}
END_TEST

/* An object of `n` payload bytes, its words 0.. set to base + their
 * index, committed. */
static txn_obj *make_obj(txn_pool *p, size_t n, uint64_t base)
{
    txn *tx;
    txn_obj *o;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_alloc(tx, n, &o));
    for (size_t w = 0; w < n / 8; w++)
        CHECK_OK(txn_write_u64(tx, o, 8 * w, base + w));
    CHECK_OK(txn_commit(tx));
    return o;
}

static uint64_t read_of(txn *tx, txn_obj *o, size_t off)
{
    uint64_t v = 0;
    CHECK_OK(txn_read_u64(tx, o, off, &v));
    return v;
}

/* K1 (txn.h): the object the library saw last changes between two
 * objects of different sizes in every order of reads, writes and opens,
 * within and across transactions, and each access reaches its own object;
 * after a failed call no access runs inline, and the rollback restores
 * both. */
START_TEST(test_keys_follow)
{
    char name[TEST_NAME_LEN];
    txn_pool *p = make_pool(name);
    txn_obj *a = make_obj(p, 64, 100), *b = make_obj(p, 256, 200);
    for (int round = 0; round < 3; round++) {
        txn *tx;
        CHECK_OK(txn_begin(p, &tx));
        ck_assert_uint_eq(read_of(tx, a, 8), 101 + 10 * round);
        ck_assert_uint_eq(read_of(tx, b, 8), 201 + 10 * round);
        CHECK_OK(txn_write_u64(tx, a, 8, 111 + 10 * round)); /* way 0 is b's */
        ck_assert_uint_eq(read_of(tx, b, 8), 201 + 10 * round);
        CHECK_OK(txn_write_u64(tx, b, 8, 211 + 10 * round));
        CHECK_OK(txn_write_u64(tx, a, 16, 7));
        ck_assert_uint_eq(read_of(tx, a, 8), 111 + 10 * round);
        ck_assert_uint_eq(read_of(tx, b, 8), 211 + 10 * round);
        ck_assert_uint_eq(read_of(tx, a, 16), 7);
        ck_assert_uint_eq(read_of(tx, b, 16), 202);
        CHECK_OK(txn_write_u64(tx, a, 16, 102));
        CHECK_OK(txn_commit(tx));
    }
    txn *tx;
    for (int round = 0; round < 2; round++) { /* way 0 moved by txn_open */
        CHECK_OK(txn_begin(p, &tx));
        ck_assert_uint_eq(read_of(tx, b, 8), 231);
        CHECK_OK(txn_commit(tx));
        CHECK_OK(txn_begin(p, &tx));
        ck_assert_ptr_nonnull(txn_open(tx, a, TXN_RO));
        ck_assert_uint_eq(read_of(tx, b, 8), 231);
        ck_assert_uint_eq(read_of(tx, a, 8), 131);
        ck_assert_ptr_nonnull(txn_open(tx, b, TXN_RO));
        CHECK_OK(txn_write_u64(tx, a, 24, 103));
        ck_assert_uint_eq(read_of(tx, b, 24), 203);
        CHECK_OK(txn_commit(tx));
    }
    CHECK_OK(txn_begin(p, &tx));
    ck_assert_uint_eq(read_of(tx, a, 0), 100);
    CHECK_OK(txn_write_u64(tx, a, 0, 1));
    CHECK_RC(txn_write_u64(tx, a, txn_obj_size(p, a), 1), TXN_E_INVAL); /* past a's end */
    uint64_t v = 0;
    CHECK_RC(txn_write_u64(tx, a, 0, 2), TXN_E_STATE);
    CHECK_RC(txn_read_u64(tx, a, 0, &v), TXN_E_STATE);
    CHECK_RC(txn_write_u64(tx, b, 0, 2), TXN_E_STATE);
    CHECK_RC(txn_commit(tx), TXN_E_STATE);
    CHECK_OK(txn_begin(p, &tx));
    ck_assert_uint_eq(read_of(tx, a, 0), 100);
    ck_assert_uint_eq(read_of(tx, a, 8), 131);
    ck_assert_uint_eq(read_of(tx, b, 0), 200);
    ck_assert_uint_eq(read_of(tx, b, 8), 231);
    ck_assert_uint_eq(read_of(tx, b, 248), 231);
    CHECK_OK(txn_commit(tx));
    drop_pool(p, name);
}
END_TEST

/* txn_stats' bytes_stored of none, which stores nothing but the data:
 * 8 bytes a word written inline (counted from the write log at the end),
 * the others' bytes once, whichever way the transaction ends (the other
 * engines store logs too, some after the commit: not compared). */
START_TEST(test_stored_count)
{
    char name[TEST_NAME_LEN];
    txn_pool *p = make_pool(name);
    int exact = !strcmp(txn_engine_name(), "none");
    const uint64_t words[4] = {1, 2, 3, 4};
    /* case 0 twice: the second begins and commits inline (none) */
    const int cases[5] = {0, 0, 1, 2, 3};
    const uint64_t want[4] = {32, 32 + 16 + 24, 64, 32};
    for (int c = 0; c < 5; c++) {
        int k = cases[c];
        txn_stats s0, s1;
        txn *tx;
        int ran = 0;
        txn_stats_get(&s0);
        CHECK_OK(txn_begin(p, &tx));
        (void)read_of(tx, txn_root(p), 0);
        for (size_t w = 0; w < 4; w++)
            CHECK_OK(txn_write_u64(tx, txn_root(p), 8 * w, 40 + w));
        if (k == 1) { /* a range entry inline, one by the library */
            CHECK_OK(txn_write(tx, txn_root(p), 32, words, 16));
            CHECK_OK(txn_write(tx, txn_root(p), 36, words, 24));
        }
        if (k == 3) /* the library's commit */
            CHECK_OK(txn_defer(tx, TXN_ON_COMMIT, count, &ran));
        if (k == 2) /* 32 stored, 32 restored */
            txn_abort(tx);
        else
            CHECK_OK(txn_commit(tx));
        txn_stats_get(&s1);
        if (exact)
            ck_assert_uint_eq(s1.bytes_stored - s0.bytes_stored, want[k]);
        ck_assert_int_eq(ran, k == 3);
    }
    drop_pool(p, name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quick");
    TCase *c = test_tcase(s, "quick", 30);
    tcase_add_test(c, test_commits_then_abort);
    tcase_add_test(c, test_nested);
    tcase_add_test(c, test_defer);
    tcase_add_test(c, test_failed_call);
    tcase_add_test(c, test_two_pools);
    tcase_add_test(c, test_commit_other_thread);
    tcase_add_test(c, test_close_reopen);
    tcase_add_test(c, test_alloc_free);
    tcase_add_test(c, test_alloc_then_abort);
    tcase_add_test(c, test_keys_follow);
    tcase_add_test(c, test_stored_count);
    printf("engine %s\n", txn_engine_name());
    return test_run(s, CK_FORK_GETENV, "quick");
}
