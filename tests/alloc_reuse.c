/* alloc_reuse.c - space freed at one object size serves any other (issue
 * 41, item 1): a small pool filled with objects of one size until it is
 * full, all of them freed, then filled again at the next size: 100 ->
 * 1,000 -> 10,000 -> 100 bytes, and 100 -> 120 KiB (large objects) ->
 * 100. Each refill stores at least 90% of the bytes of the first fill.
 * Half the cases close and open the pool between the free and the refill
 * (the allocator then knows nothing of its runs but what the pool holds). */
#include <check.h>
#include <stdlib.h>

#include "common.h"
#include "txn.h"

#define POOL_SIZE (6u << 20)
#define BATCH 64 /* allocations a transaction */

static char name[TEST_NAME_LEN];
static txn_obj **objs;
static size_t nobjs, cap;

/* Allocate objects of `size` bytes until the pool is full; returns the
 * bytes stored. */
static uint64_t fill(txn_pool *p, size_t size)
{
    for (int full = 0; !full;) {
        txn *tx;
        CHECK_OK(txn_begin(p, &tx));
        for (int i = 0; i < BATCH; i++) {
            txn_obj *o;
            int rc = txn_alloc(tx, size, &o);
            if (rc == TXN_E_NOSPACE) {
                full = 1;
                break;
            }
            CHECK_OK(rc);
            CHECK_OK(txn_write_u64(tx, o, 0, size));
            if (nobjs == cap) {
                cap = cap ? 2 * cap : 4096;
                objs = realloc(objs, cap * sizeof *objs);
                ck_assert_ptr_nonnull(objs);
            }
            objs[nobjs++] = o;
        }
        int rc = txn_commit(tx);
        if (rc == TXN_E_NOSPACE) /* the log could not grow: the pool is full */
            break;
        CHECK_OK(rc);
    }
    return (uint64_t)nobjs * size;
}

static void free_all(txn_pool *p)
{
    for (size_t i = 0; i < nobjs;) {
        txn *tx;
        CHECK_OK(txn_begin(p, &tx));
        for (size_t j = 0; j < BATCH && i < nobjs; j++, i++)
            CHECK_OK(txn_free(tx, objs[i]));
        CHECK_OK(txn_commit(tx));
    }
    nobjs = 0;
    CHECK_OK(txn_sync(p)); /* engines that hand frees back later (incll) */
}

static void run_sizes(const size_t *sizes, int n, int reopen)
{
    ck_assert_int_eq(test_pool_name("areuse", name, sizeof name), 0);
    txn_pool *p;
    txn_pool_opts o = {.size = POOL_SIZE};
    CHECK_OK(txn_pool_create(name, "alloc_reuse", &o, &p));
    uint64_t first = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bytes = fill(p, sizes[i]);
        if (i == 0)
            first = bytes;
        ck_assert_msg(bytes * 10 >= first * 9,
                      "fill %d (%zu-byte objects) stored %llu bytes, the first fill %llu", i + 1,
                      sizes[i], (unsigned long long)bytes, (unsigned long long)first);
        free_all(p);
        if (reopen) {
            txn_pool_close(p);
            CHECK_OK(txn_pool_open(name, "alloc_reuse", &p));
        }
    }
    txn_pool_close(p);
    test_pool_remove(name);
    free(objs);
    objs = NULL;
    cap = 0;
}

static const size_t small_sizes[] = {100, 1000, 10000, 100};
static const size_t large_sizes[] = {100, 120 << 10, 100}; /* 2 chunks, 94% of them */

START_TEST(test_small_classes)
{
    run_sizes(small_sizes, 4, _i);
}
END_TEST

START_TEST(test_large_objects)
{
    run_sizes(large_sizes, 3, _i);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("alloc_reuse");
    TCase *tc = test_tcase(s, "refill", 60.0);
    tcase_add_loop_test(tc, test_small_classes, 0, 2); /* without, with a reopen */
    tcase_add_loop_test(tc, test_large_objects, 0, 2);
    return test_run(s, CK_FORK_GETENV, "areuse");
}
