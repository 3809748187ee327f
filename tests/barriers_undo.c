/* barriers_undo.c - the undo engine's persist-barrier budget, checked
 * exactly through txn_stats at whatever persistence domain TXN_PDOM
 * selects (ctest runs it at 0, 1 and 2: the count must not change).
 *
 * The budget under test (undo/undo.c states it), per transaction, with N
 * distinct ranges written in objects that existed before it:
 *   - commit: N + 2 (one barrier per undo record, then the commit's two);
 *   - writing a range again: free;
 *   - read-only or empty: 0; objects opened TXN_RW and not written: 0;
 *   - abort: N + 2 (restore, then invalidate the log), 0 without writes,
 *     and the data is back;
 *   - allocating or freeing objects, and writing into objects allocated by
 *     the same transaction: nothing more, so N + 2 again (2 more, N + 4,
 *     with the eager allocator, TXN_ALLOC_EAGER=1).
 * Every test runs a warm-up transaction first: a thread's first
 * transaction may claim a log slot and pay for it, and the first
 * allocation of a size may claim a chunk. */
#define _GNU_SOURCE
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "txn.h"

#define LAYOUT "pmtx-barriers"
#define POOL_SIZE ((size_t)16 << 20)

enum { MAX_RANGES = 20, STRIDE = 64, RANGE = 32 };
static const int range_counts[] = {1, 2, 5, 20};
#define NCOUNTS (sizeof range_counts / sizeof range_counts[0])

/* ---- pool fixture: each test gets a fresh pool and one warm-up */

static char g_name[TEST_NAME_LEN];
static txn_pool *g_pool;

static txn *begin(void)
{
    txn *tx = NULL;
    CHECK_OK(txn_begin(g_pool, &tx));
    return tx;
}

static void setup(void)
{
    txn_pool_opts o = {.size = POOL_SIZE, .root_size = 256};
    txn *tx;
    CHECK_OK(test_pool_name("barr", g_name, sizeof g_name));
    CHECK_OK(txn_pool_create(g_name, LAYOUT, &o, &g_pool));
    tx = begin();
    CHECK_OK(txn_write_u64(tx, txn_root(g_pool), 0, 1));
    CHECK_OK(txn_commit(tx));
}

static void teardown(void)
{
    txn_pool_close(g_pool);
    test_pool_remove(g_name);
}

/* ---- measuring */

static txn_stats g_before;

static void measure_start(void)
{
    txn_stats_get(&g_before);
}

/* What happened since measure_start(). */
static txn_stats measured(void)
{
    txn_stats now, d;
    txn_stats_get(&now);
    d.commits = now.commits - g_before.commits;
    d.aborts = now.aborts - g_before.aborts;
    d.barriers = now.barriers - g_before.barriers;
    d.lines_flushed = now.lines_flushed - g_before.lines_flushed;
    d.log_bytes = now.log_bytes - g_before.log_bytes;
    return d;
}

/* ---- data */

static void fill(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(seed * 37u + i * 3u + 1u);
}

/* One committed object of `n` bytes, filled with fill(seed 0). */
static txn_obj *make_object(size_t n)
{
    unsigned char buf[MAX_RANGES * STRIDE];
    txn_obj *o = NULL;
    txn *tx = begin();
    ck_assert_uint_le(n, sizeof buf);
    fill(buf, n, 0);
    CHECK_OK(txn_alloc(tx, n, &o));
    CHECK_OK(txn_write(tx, o, 0, buf, n));
    CHECK_OK(txn_commit(tx));
    return o;
}

/* The object and offset of range i: in one object, or one object each. */
struct target {
    txn_obj *objs[MAX_RANGES];
    int spread; /* 0: all in objs[0] at i * STRIDE; 1: objs[i] at 0 */
};

static txn_obj *obj_of(const struct target *t, int i)
{
    return t->spread ? t->objs[i] : t->objs[0];
}

static size_t off_of(const struct target *t, int i)
{
    return t->spread ? 0 : (size_t)i * STRIDE;
}

static void make_target(struct target *t, int spread)
{
    t->spread = spread;
    for (int i = 0; i < (spread ? MAX_RANGES : 1); i++)
        t->objs[i] = make_object(spread ? STRIDE : MAX_RANGES * STRIDE);
}

/* Writes ranges first..n-1, range i with fill(seed + i). */
static void write_ranges_from(txn *tx, const struct target *t, int first,
                              int n, unsigned seed)
{
    unsigned char buf[RANGE];
    for (int i = first; i < n; i++) {
        fill(buf, RANGE, seed + (unsigned)i);
        CHECK_OK(txn_write(tx, obj_of(t, i), off_of(t, i), buf, RANGE));
    }
}

static void write_ranges(txn *tx, const struct target *t, int n, unsigned seed)
{
    write_ranges_from(tx, t, 0, n, seed);
}

/* Fails unless range i holds fill(seed_of_range(i)) for i < n, and the
 * bytes fill(0) gave it at creation for n <= i < MAX_RANGES. */
static void check_ranges(const struct target *t, int n, unsigned seed)
{
    unsigned char want[RANGE], init[MAX_RANGES * STRIDE], got[RANGE];
    txn *tx = begin();
    fill(init, sizeof init, 0);
    for (int i = 0; i < MAX_RANGES; i++) {
        if (i < n)
            fill(want, RANGE, seed + (unsigned)i);
        else
            memcpy(want, init + off_of(t, i), RANGE);
        CHECK_OK(txn_read(tx, obj_of(t, i), off_of(t, i), got, RANGE));
        ck_assert_msg(memcmp(got, want, RANGE) == 0,
                      "range %d of %d holds the wrong bytes", i, n);
    }
    CHECK_OK(txn_commit(tx));
}

/* ---- tests */

START_TEST(test_pdom_from_env)
{
    const char *env = getenv("TXN_PDOM");
    int want = (env && *env) ? atoi(env) : 1;
    ck_assert_int_eq(txn_pdom(), want);
    ck_assert_str_eq(txn_engine_name(), "undo");
    ck_assert_ptr_nonnull(txn_flush_name());
}
END_TEST

/* N distinct ranges, in one object (_i = 0) or N objects (_i = 1). */
START_TEST(test_distinct_ranges)
{
    struct target t;
    make_target(&t, _i);
    for (size_t k = 0; k < NCOUNTS; k++) {
        int n = range_counts[k];
        for (int rep = 0; rep < 3; rep++) {
            unsigned seed = 100u * (unsigned)(k + 1) + (unsigned)rep;
            txn_stats d;
            measure_start();
            txn *tx = begin();
            write_ranges(tx, &t, n, seed);
            CHECK_OK(txn_commit(tx));
            d = measured();
            ck_assert_msg(d.barriers == (uint64_t)n + 2,
                          "%d ranges (%s, rep %d): %llu barriers, want %d", n,
                          _i ? "N objects" : "one object", rep,
                          (unsigned long long)d.barriers, n + 2);
            ck_assert_uint_eq(d.commits, 1);
            ck_assert_uint_ge(d.lines_flushed, (uint64_t)n);
            ck_assert_uint_ge(d.log_bytes, (uint64_t)n * RANGE);
            check_ranges(&t, n, seed);
        }
    }
}
END_TEST

START_TEST(test_same_range_twice)
{
    struct target t;
    make_target(&t, 0);
    for (size_t k = 0; k < NCOUNTS; k++) {
        int n = range_counts[k];
        unsigned seed = 200u + 10u * (unsigned)k;
        txn_stats d;
        measure_start();
        txn *tx = begin();
        write_ranges(tx, &t, n, seed + 1);
        write_ranges(tx, &t, n, seed);     /* the same ranges again */
        write_ranges(tx, &t, 1, seed + 7); /* and the first a third time */
        write_ranges(tx, &t, 1, seed);
        CHECK_OK(txn_commit(tx));
        d = measured();
        ck_assert_msg(d.barriers == (uint64_t)n + 2,
                      "%d ranges written twice: %llu barriers, want %d", n,
                      (unsigned long long)d.barriers, n + 2);
        check_ranges(&t, n, seed);
    }
}
END_TEST

/* Ranges are remembered word by word (LG1 in undo.c): a write inside
 * words logged whole by an earlier record logs nothing, wherever it
 * starts and across the map's 512-byte spans; a word written only in part
 * is logged again at its next write, since no record holds all of it.
 * Committed (_i = 0) or aborted (_i = 1): the bytes must then be the
 * writes', or all back. */
START_TEST(test_words_logged)
{
    static const struct {
        size_t off, n;
        int logs; /* 1: this write must add a record and its barrier */
    } w[] = {
        {0, 576, 1}, /* longer than a span: across a span boundary */
        {496, 8, 0}, {528, 16, 0}, {2, 2, 0}, /* inside it */
        {600, 4, 1},  {604, 4, 1},  /* halves of a word: each logged */
        {600, 8, 1},  /* that word, still never logged whole */
        {600, 8, 0},  /* now it is */
    };
    enum { N = sizeof w / sizeof w[0] };
    txn_obj *o = make_object(MAX_RANGES * STRIDE);
    unsigned char init[MAX_RANGES * STRIDE], want[MAX_RANGES * STRIDE], got[MAX_RANGES * STRIDE];
    fill(init, sizeof init, 0);
    memcpy(want, init, sizeof want);
    uint64_t logs = 0;
    measure_start();
    txn *tx = begin();
    for (int i = 0; i < N; i++) {
        unsigned char buf[576];
        fill(buf, w[i].n, 50u + (unsigned)i);
        uint64_t b0 = measured().barriers;
        CHECK_OK(txn_write(tx, o, w[i].off, buf, w[i].n));
        ck_assert_msg(measured().barriers - b0 == (uint64_t)w[i].logs,
                      "write %d (%zu bytes at %zu): %llu barriers, want %d", i, w[i].n, w[i].off,
                      (unsigned long long)(measured().barriers - b0), w[i].logs);
        memcpy(want + w[i].off, buf, w[i].n);
        logs += (uint64_t)w[i].logs;
    }
    if (_i) {
        txn_abort(tx);
        memcpy(want, init, sizeof want);
    } else {
        CHECK_OK(txn_commit(tx));
    }
    ck_assert_uint_eq(measured().barriers, logs + 2);
    tx = begin();
    CHECK_OK(txn_read(tx, o, 0, got, sizeof got));
    CHECK_OK(txn_commit(tx));
    for (size_t i = 0; i < sizeof got; i++)
        ck_assert_msg(got[i] == want[i], "%s: byte %zu is %u, want %u", _i ? "aborted" : "committed",
                      i, got[i], want[i]);
}
END_TEST

START_TEST(test_read_only)
{
    struct target t;
    unsigned char buf[MAX_RANGES * STRIDE];
    uint64_t v;
    txn_stats d;
    txn *tx;

    make_target(&t, 0);
    measure_start();
    tx = begin();
    CHECK_OK(txn_read(tx, t.objs[0], 0, buf, sizeof buf));
    CHECK_OK(txn_read_u64(tx, txn_root(g_pool), 0, &v));
    ck_assert_ptr_nonnull(txn_open(tx, t.objs[0], TXN_RO));
    CHECK_OK(txn_commit(tx));
    d = measured();
    ck_assert_uint_eq(v, 1);
    ck_assert_uint_eq(d.barriers, 0);
    ck_assert_uint_eq(d.lines_flushed, 0);
    ck_assert_uint_eq(d.log_bytes, 0);
    ck_assert_uint_eq(d.commits, 1);

    measure_start();
    tx = begin(); /* empty */
    CHECK_OK(txn_commit(tx));
    tx = begin(); /* empty, aborted */
    txn_abort(tx);
    d = measured();
    ck_assert_uint_eq(d.barriers, 0);
    ck_assert_uint_eq(d.commits, 1);
    ck_assert_uint_eq(d.aborts, 1);
}
END_TEST

START_TEST(test_abort)
{
    struct target t;
    make_target(&t, _i);
    for (size_t k = 0; k < NCOUNTS; k++) {
        int n = range_counts[k];
        txn_stats d;
        measure_start();
        txn *tx = begin();
        write_ranges(tx, &t, n, 300u + (unsigned)k);
        txn_abort(tx);
        d = measured();
        ck_assert_msg(d.barriers == (uint64_t)n + 2,
                      "abort after %d writes: %llu barriers, want %d", n,
                      (unsigned long long)d.barriers, n + 2);
        ck_assert_uint_eq(d.aborts, 1);
        ck_assert_uint_eq(d.commits, 0);
        check_ranges(&t, 0, 0); /* every range as created */
    }
    /* the log is clean again: a commit still costs exactly N + 2 */
    {
        txn_stats d;
        measure_start();
        txn *tx = begin();
        write_ranges(tx, &t, 5, 400);
        CHECK_OK(txn_commit(tx));
        d = measured();
        ck_assert_uint_eq(d.barriers, 5 + 2);
        check_ranges(&t, 5, 400);
    }
}
END_TEST

/* Objects opened TXN_RW wait for their records until the next write
 * (U9 of undo.c): 20 opened and none written cost no record and no
 * barrier; the first of 5 writes appends all 20 records under the batch's
 * one fence, then the commit's two; an abort after writing 5 gives their
 * bytes back. */
START_TEST(test_opened_unwritten)
{
    struct target t;
    txn_stats d;
    txn *tx;
    make_target(&t, 1);
    measure_start(); /* one opened and written: one record's bytes */
    tx = begin();
    ck_assert_ptr_nonnull(txn_open(tx, t.objs[0], TXN_RW));
    write_ranges(tx, &t, 1, 500u);
    CHECK_OK(txn_commit(tx));
    d = measured();
    uint64_t rec = d.log_bytes;
    ck_assert_uint_eq(d.barriers, 1 + 2);
    ck_assert_uint_gt(rec, 0);
    for (int w = 0; w <= 5; w += 5) {
        measure_start();
        tx = begin();
        for (int i = 0; i < MAX_RANGES; i++)
            ck_assert_ptr_nonnull(txn_open(tx, t.objs[i], TXN_RW));
        write_ranges(tx, &t, w, 500u);
        CHECK_OK(txn_commit(tx));
        d = measured();
        ck_assert_msg(d.barriers == (w ? 1u + 2u : 0u) && d.log_bytes == (w ? MAX_RANGES * rec : 0),
                      "%d of %d opened objects written: %llu barriers, %llu log bytes", w,
                      MAX_RANGES, (unsigned long long)d.barriers,
                      (unsigned long long)d.log_bytes);
        check_ranges(&t, w ? w : 1, 500u);
    }
    tx = begin();
    for (int i = 0; i < MAX_RANGES; i++)
        ck_assert_ptr_nonnull(txn_open(tx, t.objs[i], TXN_RW));
    write_ranges(tx, &t, 5, 600u);
    txn_abort(tx);
    check_ranges(&t, 5, 500u);
}
END_TEST

/* Barriers the allocator adds to a transaction that allocates or frees. */
/* Extra barriers of a transaction that allocates or frees and logs n
 * ranges after it: eager mode pays two cleanup barriers; lazy mode pays
 * one only when no logged write follows the allocation (its record must
 * be durable before the allocator's bits change). */
static uint64_t alloc_extra(int n)
{
    const char *e = getenv("TXN_ALLOC_EAGER");
    if (e && strcmp(e, "1") == 0)
        return 2;
    return n == 0 ? 1 : 0;
}

enum { FRESH_SIZE = 512 };

/* Allocates an object of FRESH_SIZE, writes three ranges into it and N
 * ranges of the existing object, the first of them holding its handle. */
static txn_obj *alloc_and_write(const struct target *t, int n,
                                const unsigned char *buf)
{
    unsigned char range0[RANGE];
    txn_obj *fresh = NULL;
    txn *tx = begin();
    CHECK_OK(txn_alloc(tx, FRESH_SIZE, &fresh));
    CHECK_OK(txn_write(tx, fresh, 0, buf, RANGE));
    if (n > 0) {
        fill(range0, RANGE, 700);
        memcpy(range0, &fresh, sizeof fresh);
        CHECK_OK(txn_write(tx, t->objs[0], 0, range0, RANGE));
        write_ranges_from(tx, t, 1, n, 600u);
    }
    CHECK_OK(txn_write(tx, fresh, 100, buf, 3 * RANGE));
    CHECK_OK(txn_write_u64(tx, fresh, FRESH_SIZE - 8, 0xabcdef));
    CHECK_OK(txn_commit(tx));
    return fresh;
}

START_TEST(test_alloc_and_free)
{
    static const int counts[] = {0, 1, 5, 20};
    static const unsigned char warm_up[3 * RANGE];
    struct target t;
    txn *tx;

    make_target(&t, 0);
    alloc_and_write(&t, 0, warm_up); /* may claim a chunk for its size */
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        int n = counts[k];
        unsigned char buf[3 * RANGE], got[3 * RANGE];
        txn_obj *fresh, *h = NULL;
        uint64_t v = 0;
        txn_stats d;

        fill(buf, sizeof buf, 500u + (unsigned)k);
        measure_start();
        fresh = alloc_and_write(&t, n, buf);
        d = measured();
        ck_assert_msg(d.barriers == (uint64_t)n + 2 + alloc_extra(n),
                      "alloc + %d ranges: %llu barriers, want %llu", n,
                      (unsigned long long)d.barriers,
                      (unsigned long long)(n + 2 + alloc_extra(n)));

        tx = begin();
        if (n > 0) {
            CHECK_OK(txn_read(tx, t.objs[0], 0, &h, sizeof h));
            ck_assert_ptr_eq(h, fresh);
        }
        CHECK_OK(txn_read(tx, fresh, 100, got, sizeof got));
        ck_assert_int_eq(memcmp(got, buf, sizeof got), 0);
        CHECK_OK(txn_read(tx, fresh, 0, got, RANGE));
        ck_assert_int_eq(memcmp(got, buf, RANGE), 0);
        CHECK_OK(txn_read_u64(tx, fresh, FRESH_SIZE - 8, &v));
        ck_assert_uint_eq(v, 0xabcdef);
        CHECK_OK(txn_commit(tx));

        /* freeing it again, with the same N ranges */
        measure_start();
        tx = begin();
        CHECK_OK(txn_free(tx, fresh));
        write_ranges(tx, &t, n, 800u);
        CHECK_OK(txn_commit(tx));
        d = measured();
        ck_assert_msg(d.barriers == (uint64_t)n + 2 + alloc_extra(n),
                      "free + %d ranges: %llu barriers, want %llu", n,
                      (unsigned long long)d.barriers,
                      (unsigned long long)(n + 2 + alloc_extra(n)));
        check_ranges(&t, n, 800u);
    }

    /* allocated, written and aborted: no data to restore, but its ALLOC
     * record must be invalidated durably (one barrier) before the block
     * can go to another transaction */
    measure_start();
    tx = begin();
    {
        txn_obj *fresh = NULL;
        CHECK_OK(txn_alloc(tx, FRESH_SIZE, &fresh));
        CHECK_OK(txn_write_u64(tx, fresh, 0, 1));
    }
    txn_abort(tx);
    ck_assert_uint_eq(measured().barriers, 1);
    /* read-only and aborted: nothing at all */
    measure_start();
    tx = begin();
    txn_abort(tx);
    ck_assert_uint_eq(measured().barriers, 0);
}
END_TEST

static Suite *barriers_suite(void)
{
    Suite *s = suite_create("barriers_undo");
    TCase *tc = test_tcase(s, "budget", 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_pdom_from_env);
    tcase_add_loop_test(tc, test_distinct_ranges, 0, 2);
    tcase_add_test(tc, test_same_range_twice);
    tcase_add_loop_test(tc, test_words_logged, 0, 2);
    tcase_add_test(tc, test_read_only);
    tcase_add_loop_test(tc, test_abort, 0, 2);
    tcase_add_test(tc, test_opened_unwritten);
    tcase_add_test(tc, test_alloc_and_free);
    return s;
}

int main(void)
{
    printf("engine %s, TXN_PDOM=%s -> pdom %d (%u ns), flush %s\n",
           txn_engine_name(), getenv("TXN_PDOM") ? getenv("TXN_PDOM") : "",
           txn_pdom(), txn_pdom_ns(), txn_flush_name());
    return test_run(barriers_suite(), CK_FORK_GETENV, "barr");
}
