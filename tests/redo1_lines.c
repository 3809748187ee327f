/* redo1_lines.c - redo1 writes back a commit's lines at the slot's next
 * commit: one line per word entry and the lines of each range, counted
 * in txn_stats exactly as they are flushed. Its commit issues the word
 * entries' write-backs itself at PDOM 0 and 1 and only counts the ranges
 * at PDOM 2 (redo1.c, flush_pending), paths the crash simulator's traced
 * build does not take: this checks that they visit every entry. And the
 * filter of the words written is empty after each commit and abort. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "txn.h"

enum { WORDS = 16, RANGE = 32 };

static txn_pool *pool;
static txn_obj *obj;
static char name[TEST_NAME_LEN];

static void setup(void)
{
    ck_assert_int_eq(test_pool_name("r1l", name, sizeof name), 0);
    txn_pool_opts o = {.size = 16u << 20};
    ck_assert_int_eq(txn_pool_create(name, "r1l", &o, &pool), 0);
}

static void teardown(void)
{
    txn_pool_close(pool);
    test_pool_remove(name);
}

/* Lines flushed by a transaction writing one word at off. */
static uint64_t one_word(uint64_t off, uint64_t v)
{
    txn_stats a, b;
    txn *tx;
    txn_stats_get(&a);
    ck_assert_int_eq(txn_begin(pool, &tx), 0);
    ck_assert_int_eq(txn_write_u64(tx, obj, off, v), 0);
    ck_assert_int_eq(txn_commit(tx), 0);
    txn_stats_get(&b);
    return b.lines_flushed - a.lines_flushed;
}

START_TEST(test_pending_lines)
{
    txn *tx;
    ck_assert_int_eq(txn_begin(pool, &tx), 0);
    ck_assert_int_eq(txn_alloc(tx, WORDS * 64 + 64, &obj), 0);
    ck_assert_int_eq(txn_commit(tx), 0); /* its block's lines pending */
    one_word(0, 1);
    /* its log alone: the one-word transaction's pending line, its part */
    uint64_t base = one_word(0, 2);
    for (uint64_t round = 0; round < 3; round++) {
        ck_assert_int_eq(txn_begin(pool, &tx), 0);
        const char *at = txn_open(tx, obj, TXN_RO); /* where the range lies */
        ck_assert_ptr_nonnull(at);
        for (uint64_t i = 0; i < WORDS; i++) /* a line each */
            ck_assert_int_eq(txn_write_u64(tx, obj, i * 64, 10 * round + i), 0);
        uint64_t buf[RANGE / 8] = {round, round, round, round};
        size_t roff = WORDS * 64 + 40; /* across two lines or within one */
        ck_assert_int_eq(txn_write(tx, obj, roff, buf, sizeof buf), 0);
        ck_assert_int_eq(txn_commit(tx), 0);
        uintptr_t lo = (uintptr_t)(at + roff), hi = lo + RANGE;
        uint64_t range_lines = (hi + 63) / 64 - lo / 64;
        /* the next commit writes back what this one applied */
        uint64_t got = one_word(0, 100 + round);
        printf("redo1 pdom %d: %d words and a range of %llu lines pending: %llu lines flushed, "
               "%llu without\n",
               txn_pdom(), WORDS, (unsigned long long)range_lines, (unsigned long long)got,
               (unsigned long long)base);
        ck_assert_uint_eq(got, base - 1 + WORDS + range_lines);
    }
}
END_TEST

/* A commit empties the filter as it applies its log (redo1.c's walk_log),
 * entry by entry for a short log and whole for a long one, and an abort
 * empties it too: the next transaction then reads the words written
 * before with plain loads, never through the library's search of its log
 * (raw_lookups). A word left marked would still read right, only slower,
 * so this counts the searches. */
START_TEST(test_filter_emptied)
{
    txn *tx;
    ck_assert_int_eq(txn_begin(pool, &tx), 0);
    ck_assert_int_eq(txn_alloc(tx, 8192, &obj), 0);
    ck_assert_int_eq(txn_commit(tx), 0);
    /* words and a range, a short log, whose filter bytes are cleared one
     * by one; 600 words, a long one, whose filter is cleared whole; then
     * an abort of each */
    static const unsigned counts[] = {WORDS, 600};
    for (int abort = 0; abort < 2; abort++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            unsigned n = counts[c];
            uint64_t v0 = 1000 * (abort * 2 + c + 1);
            ck_assert_int_eq(txn_begin(pool, &tx), 0);
            for (uint64_t i = 0; i < n; i++)
                ck_assert_int_eq(txn_write_u64(tx, obj, i * 8, v0 + i), 0);
            uint64_t buf[RANGE / 8] = {v0, v0, v0, v0};
            ck_assert_int_eq(txn_write(tx, obj, 8192 - RANGE, buf, sizeof buf), 0);
            if (abort)
                txn_abort(tx);
            else
                ck_assert_int_eq(txn_commit(tx), 0);
            txn_stats a, b;
            txn_stats_get(&a);
            ck_assert_int_eq(txn_begin(pool, &tx), 0);
            /* a write first: reads of an object the transaction wrote
             * look at the filter (txn.h), of one it did not, never */
            ck_assert_int_eq(txn_write_u64(tx, obj, 8192 - RANGE - 8, v0), 0);
            for (uint64_t i = 0; i < n; i++) {
                uint64_t v;
                ck_assert_int_eq(txn_read_u64(tx, obj, i * 8, &v), 0);
                if (!abort)
                    ck_assert_uint_eq(v, v0 + i);
            }
            uint64_t got[RANGE / 8];
            ck_assert_int_eq(txn_read(tx, obj, 8192 - RANGE, got, sizeof got), 0);
            txn_stats_get(&b);
            ck_assert_int_eq(txn_commit(tx), 0);
            ck_assert_msg(b.raw_lookups == a.raw_lookups,
                          "%s of %u words: %llu reads searched the log after it", abort ? "abort" : "commit",
                          n, (unsigned long long)(b.raw_lookups - a.raw_lookups));
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redo1_lines");
    TCase *tc = test_tcase(s, "lines", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_pending_lines);
    tcase_add_test(tc, test_filter_emptied);
    return test_run(s, CK_NOFORK, "r1l"); /* stats are per thread */
}
