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

/* The pool of a test closed and removed, and its objects' list freed. */
static void pool_done(txn_pool *p)
{
    txn_pool_close(p);
    test_pool_remove(name);
    free(mine.o);
    mine = (struct objs){0};
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
    pool_done(p);
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
    pool_done(p);
}
END_TEST

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* n objects of `size` bytes into mine, their addresses sorted into a;
 * returns the block size (the smallest step between two of them). */
static uintptr_t alloc_sorted(txn_pool *p, size_t size, size_t n, uintptr_t *a)
{
    mine.o = realloc(mine.o, n * sizeof *mine.o);
    ck_assert_ptr_nonnull(mine.o);
    mine.cap = n;
    while (mine.n < n) {
        txn *tx;
        CHECK_OK(txn_begin(p, &tx));
        for (int i = 0; i < BATCH && mine.n < n; i++)
            CHECK_OK(txn_alloc(tx, size, &mine.o[mine.n++]));
        CHECK_OK(txn_commit(tx));
    }
    for (size_t i = 0; i < n; i++)
        a[i] = (uintptr_t)mine.o[i];
    qsort(a, n, sizeof *a, by_addr);
    uintptr_t b = UINTPTR_MAX;
    for (size_t i = 1; i < n; i++)
        if (a[i] - a[i - 1] < b)
            b = a[i] - a[i - 1];
    return b;
}

/* An address of a run's chunk that is aligned to its class but lies past
 * its last block is no object: what the size check of every open reads
 * from a table of blocks a run holds (txn/format/alloc.c). The run's
 * layout (a 512-byte header, 64 KiB chunks) is the format's. The request
 * sizes are tried until the blocks (payload and the engine's header)
 * leave a run a tail; cow's objects are 32-byte handles, which fill a run
 * exactly, so it has no such address to try. */
START_TEST(test_past_last_block)
{
    enum { N = 6000, RUN_BYTES = 65536 - 512 };
    static const size_t sizes[] = {48, 32, 40, 24, 16};
    ck_assert_int_eq(test_pool_name("areuse", name, sizeof name), 0);
    txn_pool *p;
    txn_pool_opts o = {.size = POOL_SIZE, .max_size = POOL_SIZE};
    CHECK_OK(txn_pool_create(name, "alloc_reuse", &o, &p));
    uintptr_t *a = malloc(N * sizeof *a), b = 0;
    ck_assert_ptr_nonnull(a);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        if (RUN_BYTES % (b = alloc_sorted(p, sizes[k], N, a)) != 0)
            break;
        free_all(p);
    }
    size_t nb = RUN_BYTES / b, runs = 0;
    for (size_t i = 0; RUN_BYTES % b && i + nb <= mine.n; i++) {
        if (a[i + nb - 1] != a[i] + (nb - 1) * b)
            continue; /* not the first block of a whole run */
        txn_obj *last = (txn_obj *)a[i + nb - 1], *past = (txn_obj *)(a[i] + nb * b);
        ck_assert_uint_gt(txn_obj_size(p, last), 0);
        ck_assert_msg(txn_obj_size(p, past) == 0, "%zu bytes past a run's last block",
                      txn_obj_size(p, past));
        txn *tx;
        CHECK_OK(txn_begin(p, &tx));
        ck_assert_ptr_null(txn_open(tx, past, TXN_RO));
        ck_assert_int_eq(txn_last_error(tx), TXN_E_INVAL);
        txn_abort(tx);
        runs++;
        i += nb - 1;
    }
    ck_assert(runs >= 1 || RUN_BYTES % b == 0);
    free(a);
    free_all(p);
    pool_done(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("alloc_reuse");
    TCase *tc = test_tcase(s, "refill", 60.0);
    tcase_add_loop_test(tc, test_small_classes, 0, 2); /* without, with a reopen */
    tcase_add_loop_test(tc, test_large_objects, 0, 2);
    tcase_add_test(tc, test_two_threads);
    tcase_add_test(tc, test_past_last_block);
    return test_run(s, CK_FORK_GETENV, "areuse");
}
