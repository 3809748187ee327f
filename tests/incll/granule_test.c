/* granule_test.c - incll's large objects (more than 4 KiB), logged by
 * granule (incll.c, L1-L3): a write logs a bounded record, not the object;
 * one granule is logged once per epoch; a transaction reads its own held
 * writes; and a crash in an epoch (a child process that dies in it, every
 * store in the file) brings back the object as the epoch found it, after
 * scattered writes, writes across granules, an abort, an object opened
 * whole, and threads writing granules of one object at once. Epochs end
 * only at txn_sync (TXN_EPOCH_MS=0); TXN_LOG_BATCH=0 runs it with a
 * barrier per logging write (the paper's order). */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common.h" /* tests/common.h, not txn/'s */
#include "incll.h"
#include "txn.h"

#define LAYOUT "incll-granule"
#define BIG ((size_t)300000) /* payload bytes: a large object */
#define MAX_RECORD 4200u     /* a 4 KiB granule, its record's header and tail */
#define THREADS 4

static char g_name[TEST_NAME_LEN];
static txn_pool *g_p;
static int g_batch; /* TXN_LOG_BATCH: records share one barrier */

static void setup(void)
{
    ck_assert_int_eq(test_pool_name("incll-granule", g_name, sizeof g_name), 0);
    txn_pool_opts o = {.size = 32u << 20, .root_size = 64, .threads = THREADS + 1};
    CHECK_OK(txn_pool_create(g_name, LAYOUT, &o, &g_p));
    g_batch = env_u64("TXN_LOG_BATCH", 1) != 0;
}

static void teardown(void)
{
    if (g_p)
        txn_pool_close(g_p);
    g_p = NULL;
    test_pool_remove(g_name);
}

static txn *begin(void)
{
    txn *tx;
    CHECK_OK(txn_begin(g_p, &tx));
    return tx;
}

static void commit_sync(txn *tx)
{
    CHECK_OK(txn_commit(tx));
    CHECK_OK(txn_sync(g_p));
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    return z ^ (z >> 27);
}

/* Object `slot` of the root: n payload bytes from `pattern`, durable. */
static txn_obj *make_object(int slot, size_t n, const uint8_t *pattern)
{
    txn *tx = begin();
    txn_obj *o;
    CHECK_OK(txn_alloc(tx, n, &o));
    CHECK_OK(txn_write(tx, o, 0, pattern, n));
    CHECK_OK(txn_write(tx, txn_root(g_p), 8 * (size_t)slot, &o, sizeof o));
    commit_sync(tx);
    return o;
}

static txn_obj *object_at(int slot)
{
    txn *tx = begin();
    txn_obj *o = NULL;
    CHECK_OK(txn_read(tx, txn_root(g_p), 8 * (size_t)slot, &o, sizeof o));
    txn_abort(tx);
    ck_assert_ptr_nonnull(o);
    return o;
}

static void expect_bytes(txn_obj *o, const uint8_t *want, size_t n)
{
    uint8_t *got = malloc(n);
    ck_assert_ptr_nonnull(got);
    txn *tx = begin();
    CHECK_OK(txn_read(tx, o, 0, got, n));
    txn_abort(tx);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "byte %zu: %u, expected %u", i, got[i], want[i]);
    free(got);
}

static uint8_t *pattern(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd(&seed);
    return p;
}

/* The log and barrier figures of one call. */
struct delta {
    txn_stats a;
};

static void mark(struct delta *d)
{
    txn_stats_get(&d->a);
}

static uint64_t logged_since(const struct delta *d)
{
    txn_stats b;
    txn_stats_get(&b);
    return b.log_bytes - d->a.log_bytes;
}

static uint64_t barriers_since(const struct delta *d)
{
    txn_stats b;
    txn_stats_get(&b);
    return b.barriers - d->a.barriers;
}

/* A word written into a large object logs one bounded record (not the
 * object), once per granule and epoch; writes that log nothing cost no
 * barrier; txn_open(TXN_RW) logs the object whole; a small object is
 * logged whole at its first write. */
START_TEST(test_log_granules)
{
    uint8_t *p = pattern(BIG, 1);
    txn_obj *o = make_object(0, BIG, p), *s = make_object(1, 1000, p);
    struct delta d, t;
    /* the block starts a chunk: payload offset 56 begins an aligned line */
    txn *tx = begin();
    mark(&t);
    mark(&d);
    CHECK_OK(txn_write_u64(tx, o, 56, 1));
    uint64_t rec = logged_since(&d);
    ck_assert_uint_gt(rec, 64);
    ck_assert_uint_le(rec, MAX_RECORD);
    mark(&d);
    CHECK_OK(txn_write_u64(tx, o, 64, 2)); /* the same line: logged already */
    CHECK_OK(txn_write_u64(tx, o, 112, 3));
    ck_assert_uint_eq(logged_since(&d), 0);
    mark(&d);
    CHECK_OK(txn_write_u64(tx, o, BIG / 2, 4)); /* another granule: its own record */
    ck_assert_uint_eq(logged_since(&d), rec);
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(barriers_since(&t), g_batch ? 1 : 2);
    tx = begin(); /* the same epoch: logged, no barrier */
    mark(&d);
    CHECK_OK(txn_write_u64(tx, o, 56, 5));
    CHECK_OK(txn_write_u64(tx, o, BIG / 2, 6));
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(logged_since(&d), 0);
    ck_assert_uint_eq(barriers_since(&d), 0);
    CHECK_OK(txn_sync(g_p));
    tx = begin(); /* a new epoch logs it again */
    mark(&d);
    CHECK_OK(txn_write_u64(tx, o, 56, 7));
    ck_assert_uint_eq(logged_since(&d), rec);
    mark(&d);
    ck_assert_ptr_nonnull(txn_open(tx, o, TXN_RW)); /* whole, but what is logged */
    ck_assert_uint_ge(logged_since(&d), BIG - MAX_RECORD);
    mark(&d);
    CHECK_OK(txn_write_u64(tx, o, BIG - 8, 8));
    CHECK_OK(txn_write_u64(tx, s, 8, 9)); /* small: whole */
    ck_assert_uint_ge(logged_since(&d), 1000);
    ck_assert_uint_le(logged_since(&d), MAX_RECORD);
    CHECK_OK(txn_commit(tx));
    free(p);
}
END_TEST

/* Writes held behind their granules' records are what the transaction
 * reads, also across granules and mixed with bytes written in place; an
 * abort takes everything back; a commit keeps it. */
START_TEST(test_own_writes)
{
    uint8_t *p = pattern(BIG, 2), *m = malloc(BIG), buf[1000];
    memcpy(m, p, BIG);
    txn_obj *o = make_object(0, BIG, p);
    for (int round = 0; round < 2; round++) {
        txn *tx = begin();
        uint64_t seed = 40 + (uint64_t)round;
        for (int k = 0; k < 200; k++) {
            size_t n = 1 + rnd(&seed) % sizeof buf, at = rnd(&seed) % (BIG - n);
            if (k % 3 == 0) { /* read back: held and in-place bytes alike */
                CHECK_OK(txn_read(tx, o, at, buf, n));
                ck_assert_int_eq(memcmp(buf, m + at, n), 0);
                continue;
            }
            for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t)rnd(&seed);
            CHECK_OK(txn_write(tx, o, at, buf, n));
            memcpy(m + at, buf, n);
        }
        if (round == 0) {
            txn_abort(tx);
            memcpy(m, p, BIG);
            expect_bytes(o, p, BIG);
        } else {
            commit_sync(tx);
            expect_bytes(o, m, BIG);
        }
    }
    free(p);
    free(m);
}
END_TEST

/* A child runs `fn` in one epoch and dies without ending it. */
static void crash_child(void (*fn)(void))
{
    txn_pool_close(g_p);
    g_p = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (txn_pool_open(g_name, LAYOUT, &g_p))
            _exit(2);
        fn();
        _exit(0); /* no txn_sync, no close: the epoch never ends */
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    CHECK_OK(txn_pool_open(g_name, LAYOUT, &g_p));
}

/* Scattered words and runs of bytes, in transactions of one epoch that
 * commit, one that aborts, one that opens the object whole first. */
static void child_scatter(void)
{
    txn_obj *o = object_at(0);
    uint64_t seed = 7;
    uint8_t buf[700];
    for (int t = 0; t < 12; t++) {
        txn *tx;
        if (txn_begin(g_p, &tx))
            _exit(3);
        if (t == 5 && !txn_open(tx, o, TXN_RW))
            _exit(4);
        for (int k = 0; k < 40; k++) {
            size_t n = k % 4 ? 8 : 1 + rnd(&seed) % sizeof buf;
            size_t at = (k % 4 ? 8 * (rnd(&seed) % (BIG / 8)) : rnd(&seed) % (BIG - n));
            for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t)rnd(&seed);
            if (txn_write(tx, o, at, buf, n))
                _exit(5);
        }
        if (t == 3)
            txn_abort(tx);
        else if (txn_commit(tx))
            _exit(6);
    }
}

/* The object as the failed epoch found it: the last txn_sync's state. */
START_TEST(test_crash_scatter)
{
    uint8_t *p = pattern(BIG, 3);
    txn_obj *o = make_object(0, BIG, p);
    txn *tx = begin(); /* a complete epoch of changes first */
    for (size_t at = 0; at + 8 <= BIG; at += 4104) {
        CHECK_OK(txn_write_u64(tx, o, at, at));
        memcpy(p + at, &at, 8);
    }
    commit_sync(tx);
    crash_child(child_scatter);
    expect_bytes(object_at(0), p, BIG);
    tx = begin(); /* and it takes changes again */
    CHECK_OK(txn_write_u64(tx, o, 8, 99));
    commit_sync(tx);
    free(p);
}
END_TEST

/* THREADS threads write the granules of one object at once, in one
 * epoch: thread k the words of the 4 KiB pages k, k + THREADS, ... of the
 * block (chunk aligned: different granules for any granule size), or,
 * with `shared`, word k of every line (the same granules). */
struct writer {
    txn_obj *o;
    int k, shared;
    uint64_t seed;
    uint8_t *mirror; /* what the object holds once every writer committed */
};

static size_t writer_offset(const struct writer *w, uint64_t *seed)
{
    if (w->shared) /* word k of a line of the block, as a payload offset */
        return 64 * (1 + rnd(seed) % (BIG / 64 - 1)) + 8 * (size_t)w->k - 8;
    size_t pages = (BIG + 8) / 4096, page = rnd(seed) % pages;
    return 4096 * (page - page % THREADS + (size_t)w->k) + 8 * (rnd(seed) % 511);
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    uint64_t seed = w->seed;
    for (int t = 0; t < 30; t++) {
        txn *tx;
        if (txn_begin(g_p, &tx))
            return "begin";
        for (int j = 0; j < 24; j++) {
            size_t at = writer_offset(w, &seed);
            uint64_t v = rnd(&seed);
            if (at + 8 > BIG)
                continue;
            if (txn_write_u64(tx, w->o, at, v)) {
                txn_abort(tx);
                return "write";
            }
            memcpy(w->mirror + at, &v, 8);
        }
        if (txn_commit(tx))
            return "commit";
    }
    return NULL;
}

static int run_writers(txn_obj *o, int shared, uint64_t seed, uint8_t *mirror)
{
    pthread_t th[THREADS];
    struct writer w[THREADS];
    for (int k = 0; k < THREADS; k++) {
        w[k] = (struct writer){o, k, shared, seed + (uint64_t)k, mirror};
        if (pthread_create(&th[k], NULL, writer_main, &w[k]))
            return -1;
    }
    int bad = 0;
    for (int k = 0; k < THREADS; k++) {
        void *why;
        pthread_join(th[k], &why);
        if (why) {
            fprintf(stderr, "writer %d: %s failed\n", k, (const char *)why);
            bad = 1;
        }
    }
    return bad;
}

static int g_shared;

static void child_writers(void)
{
    uint8_t *scratch = malloc(BIG);
    if (!scratch || run_writers(object_at(0), g_shared, 200, scratch))
        _exit(7);
}

static void threads_case(int shared)
{
    uint8_t *p = pattern(BIG, 4), *m = malloc(BIG);
    txn_obj *o = make_object(0, BIG, p);
    memcpy(m, p, BIG);
    ck_assert_int_eq(run_writers(o, shared, 100, m), 0); /* committed and synced */
    CHECK_OK(txn_sync(g_p));
    expect_bytes(o, m, BIG);
    g_shared = shared;
    crash_child(child_writers); /* the same in an epoch that fails */
    expect_bytes(object_at(0), m, BIG);
    free(p);
    free(m);
}

START_TEST(test_threads)
{
    threads_case(0);
}
END_TEST

/* Several threads in the same granules (different words): every record
 * of a granule holds its bytes from the epoch's start (L3). Not under
 * ThreadSanitizer: a record's copy reads the words other threads store,
 * with atomic loads against their plain stores, which the hardware orders
 * (x86-TSO, L3's fences) but the sanitizer reports. */
#ifndef __SANITIZE_THREAD__
START_TEST(test_threads_shared)
{
    threads_case(1);
}
END_TEST
#endif

static Suite *suite(void)
{
    Suite *s = suite_create("incll-granule");
    TCase *tc = test_tcase(s, "granule", 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_log_granules);
    tcase_add_test(tc, test_own_writes);
    tcase_add_test(tc, test_crash_scatter);
    tcase_add_test(tc, test_threads);
#ifndef __SANITIZE_THREAD__
    tcase_add_test(tc, test_threads_shared);
#endif
    return s;
}

int main(void)
{
    return test_run(suite(), CK_FORK_GETENV, "incll-granule");
}
