/* alloc_reuse.c - space freed at one object size serves any other (issue
 * 41, item 1): a small pool filled with objects of one size until it is
 * full, all of them freed, then filled again at the next size: 100 ->
 * 1,000 -> 10,000 -> 100 bytes, and 100 -> 120 KiB (large objects) ->
 * 100. Each refill stores at least 90% of the bytes of the first fill.
 * Half the cases close and open the pool between the free and the refill
 * (the allocator then knows nothing of its runs but what the pool holds). */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>

#include "common.h"
#include "txn.h"

#define POOL_SIZE (6u << 20)
#define BATCH 64 /* allocations a transaction */

static char name[TEST_NAME_LEN];

/* The objects a thread made. */
struct objs {
    txn_obj **o;
    size_t n, cap;
};
static struct objs mine;

/* Allocate objects of `size` bytes until the pool is full, into s;
 * returns the bytes stored. */
static uint64_t fill_set(txn_pool *p, size_t size, struct objs *s)
{
    for (int full = 0; !full;) {
        txn *tx;
        size_t before = s->n;
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
            if (s->n == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 4096;
                s->o = realloc(s->o, s->cap * sizeof *s->o);
                ck_assert_ptr_nonnull(s->o);
            }
            s->o[s->n++] = o;
        }
        int rc = txn_commit(tx);
        if (rc == TXN_E_NOSPACE) { /* the log could not grow: the pool is full */
            s->n = before; /* rolled back */
            break;
        }
        CHECK_OK(rc);
    }
    return (uint64_t)s->n * size;
}

static void free_set(txn_pool *p, struct objs *s)
{
    for (size_t i = 0; i < s->n;) {
        txn *tx;
        CHECK_OK(txn_begin(p, &tx));
        for (size_t j = 0; j < BATCH && i < s->n; j++, i++)
            CHECK_OK(txn_free(tx, s->o[i]));
        CHECK_OK(txn_commit(tx));
    }
    s->n = 0;
    CHECK_OK(txn_sync(p)); /* engines that hand frees back later (incll) */
}

static uint64_t fill(txn_pool *p, size_t size)
{
    return fill_set(p, size, &mine);
}

static void free_all(txn_pool *p)
{
    free_set(p, &mine);
}

static void run_sizes(const size_t *sizes, int n, int reopen)
{
    ck_assert_int_eq(test_pool_name("areuse", name, sizeof name), 0);
    txn_pool *p;
    txn_pool_opts o = {.size = POOL_SIZE, .max_size = POOL_SIZE}; /* filled: no growth */
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
    free(mine.o);
    mine = (struct objs){0};
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

/* Two threads fill and empty one pool at once, each at its own size:
 * runs turn FREE and change class while the other thread's cache holds
 * blocks (it gives them back at its next reservation). Then one thread
 * alone refills the pool at a third size. */
struct churner {
    txn_pool *p;
    size_t size;
};

static void *churn(void *arg)
{
    struct churner *c = arg;
    struct objs s = {0};
    for (int round = 0; round < 4; round++) {
        fill_set(c->p, c->size, &s);
        free_set(c->p, &s);
    }
    free(s.o);
    return NULL;
}

START_TEST(test_two_threads)
{
    ck_assert_int_eq(test_pool_name("areuse", name, sizeof name), 0);
    txn_pool *p;
    txn_pool_opts o = {.size = POOL_SIZE, .max_size = POOL_SIZE}; /* filled: no growth */
    CHECK_OK(txn_pool_create(name, "alloc_reuse", &o, &p));
    uint64_t first = fill(p, 100);
    free_all(p);
    struct churner c[2] = {{p, 100}, {p, 10000}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, churn, &c[i]), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    uint64_t bytes = fill(p, 1000);
    ck_assert_msg(bytes * 10 >= first * 9, "the refill after the threads stored %llu bytes, the first fill %llu",
                  (unsigned long long)bytes, (unsigned long long)first);
    free_all(p);
    txn_pool_close(p);
    test_pool_remove(name);
    free(mine.o);
    mine = (struct objs){0};
}
END_TEST

int main(void)
{
    Suite *s = suite_create("alloc_reuse");
    TCase *tc = test_tcase(s, "refill", 60.0);
    tcase_add_loop_test(tc, test_small_classes, 0, 2); /* without, with a reopen */
    tcase_add_loop_test(tc, test_large_objects, 0, 2);
    tcase_add_test(tc, test_two_threads);
    return test_run(s, CK_FORK_GETENV, "areuse");
}
