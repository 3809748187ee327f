/* pool_grow.c - pools that grow (issue #42, item 1): a pool created small
 * with a larger max_size takes objects until it reaches the maximum, its
 * file and mapping growing in place; every object stays where it was and
 * keeps its bytes, also after a reopen; one object larger than the whole
 * first pool fits; with max_size = size a pool stays its size; without
 * max_size it may grow to TXN_POOL_MAX, several such pools open at once,
 * each growing, and a growth that would run into addresses taken after
 * the pool fails cleanly while a smaller one still fits; two threads
 * allocate while a third reads their objects as the pool grows under
 * them; trimmed after most objects are freed (their chunks a hole of the
 * file), and filled again. libpmemobj's pools (pmdk) do not grow: there a pool is
 * made at its max_size at once, and every case checks that instead. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common.h"
#include "txn.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define MAX (64u << 20)

/* The size a pool starts with: 6 MiB, or the engine's least (pmdk's). */
static size_t start_size(void)
{
    size_t min = txn_pool_min_size(NULL);
    return min > (6u << 20) ? min : 6u << 20;
}
#define START start_size()
#define BATCH 16

static const size_t sizes[] = {100, 3000, 200u << 10, 40, 9000};

struct obj {
    txn_obj *o;
    size_t size;
    uint64_t tag;
};

struct objs {
    struct obj *v;
    size_t n, cap;
    pthread_mutex_t m; /* the threads' case: guards v, n, cap */
};

/* An object's first, middle and last words: its tag, mixed by place. */
static uint64_t word(uint64_t tag, size_t off)
{
    return (tag + off) * 0x9e3779b97f4a7c15ull;
}

static size_t offs(size_t size, size_t out[3])
{
    out[0] = 0;
    out[1] = size / 16 * 8;
    out[2] = size / 8 * 8 - 8;
    return 3;
}

static int make(txn *tx, size_t size, uint64_t tag, struct obj *out)
{
    int rc = txn_alloc(tx, size, &out->o);
    size_t at[3];
    for (size_t i = 0, n = offs(size, at); i < n && !rc; i++)
        rc = txn_write_u64(tx, out->o, at[i], word(tag, at[i]));
    out->size = size;
    out->tag = tag;
    return rc;
}

static void verify(txn_pool *p, const struct obj *x)
{
    txn *tx;
    size_t at[3];
    CHECK_OK(txn_begin(p, &tx));
    for (size_t i = 0, n = offs(x->size, at); i < n; i++) {
        uint64_t v;
        CHECK_OK(txn_read(tx, x->o, at[i], &v, sizeof v));
        ck_assert_msg(v == word(x->tag, at[i]), "object %p (%zu bytes) word at %zu: %#llx",
                      (void *)x->o, x->size, at[i], (unsigned long long)v);
    }
    CHECK_OK(txn_commit(tx));
}

static void push(struct objs *s, const struct obj *x)
{
    pthread_mutex_lock(&s->m);
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        ck_assert_ptr_nonnull(s->v);
    }
    s->v[s->n++] = *x;
    pthread_mutex_unlock(&s->m);
}

/* Objects of the sizes above until the pool is full; returns the bytes. */
static uint64_t fill(txn_pool *p, struct objs *s, uint64_t tag0)
{
    uint64_t bytes = 0, tag = tag0;
    for (int full = 0; !full;) {
        txn *tx;
        struct obj made[BATCH];
        int n = 0, rc = 0;
        CHECK_OK(txn_begin(p, &tx));
        for (; n < BATCH && !rc; n++, tag++)
            rc = make(tx, sizes[tag % (sizeof sizes / sizeof *sizes)], tag, &made[n]);
        if (rc) {
            ck_assert_msg(rc == TXN_E_NOSPACE, "txn_alloc: %s", txn_strerror(rc));
            txn_abort(tx);
            break;
        }
        if ((rc = txn_commit(tx)) == TXN_E_NOSPACE)
            break;
        CHECK_OK(rc);
        for (int i = 0; i < n; i++) {
            push(s, &made[i]);
            bytes += made[i].size;
        }
    }
    return bytes;
}

static txn_pool *create(const char *name, size_t max)
{
    txn_pool_opts o = {.size = START, .max_size = max};
    txn_pool *p;
    CHECK_OK(txn_pool_create(name, "grow", &o, &p));
    return p;
}

/* libpmemobj's pools (the pmdk engine's) do not grow */
static int grows(void)
{
    return strcmp(txn_engine_name(), "pmdk") != 0;
}

static void info_of(const char *name, txn_pool_info *i)
{
    int rc = txn_pool_inspect(name, i);
    ck_assert_msg(rc == 0, "inspect: %s (%s)", txn_strerror(rc), i->problem);
}

START_TEST(test_fill_to_max)
{
    char name[TEST_NAME_LEN], path[TEST_PATH_LEN];
    CHECK_OK(test_pool_name("grow", name, sizeof name));
    CHECK_OK(test_pool_path(name, path, sizeof path));
    txn_pool *p = create(name, MAX);
    struct objs s = {.m = PTHREAD_MUTEX_INITIALIZER};
    uint64_t bytes = fill(p, &s, 1);
    int g = grows();
    for (size_t i = 0; i < s.n; i++)
        verify(p, &s.v[i]);
    txn_pool_close(p);
    txn_pool_info in;
    info_of(name, &in);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    if (g) {
        ck_assert_uint_eq(in.max_size, MAX);
        ck_assert_uint_le(in.size, MAX);
        ck_assert_uint_eq((uint64_t)st.st_size, in.size); /* the file ends with its heap */
        ck_assert_msg(bytes > MAX / 2, "%llu bytes stored in a pool of at most %u",
                      (unsigned long long)bytes, MAX);
    } else { /* made at its maximum at once */
        ck_assert_uint_eq(in.max_size, in.size);
        ck_assert_uint_eq(in.size, MAX);
    }
    CHECK_OK(txn_pool_open(name, "grow", &p));
    for (size_t i = 0; i < s.n; i++)
        verify(p, &s.v[i]);
    uint64_t more = fill(p, &s, 1u << 30); /* full: nothing, or what the open's recovery gave back */
    ck_assert_uint_lt(more, 1u << 20);
    txn_pool_close(p);
    txn_pool_info again;
    info_of(name, &again);
    ck_assert_uint_eq(again.size, in.size);
    free(s.v);
    test_pool_remove(name);
}
END_TEST

START_TEST(test_one_large_object)
{
    char name[TEST_NAME_LEN];
    CHECK_OK(test_pool_name("growbig", name, sizeof name));
    txn_pool *p = create(name, MAX);
    txn *tx;
    struct obj x;
    CHECK_OK(txn_begin(p, &tx));
    int rc = make(tx, 5 * (size_t)START, 7, &x);
    if (!grows()) {
        ck_assert_int_eq(rc, TXN_E_NOSPACE);
        txn_abort(tx);
        txn_pool_close(p);
        test_pool_remove(name);
        return;
    }
    CHECK_OK(rc);
    CHECK_OK(txn_commit(tx));
    txn_pool_close(p);
    CHECK_OK(txn_pool_open(name, "grow", &p));
    verify(p, &x);
    txn_pool_close(p);
    test_pool_remove(name);
}
END_TEST

/* With max_size = size a pool does not grow. */
START_TEST(test_fixed)
{
    char name[TEST_NAME_LEN];
    CHECK_OK(test_pool_name("fixed", name, sizeof name));
    txn_pool *p = create(name, START);
    struct objs s = {.m = PTHREAD_MUTEX_INITIALIZER};
    uint64_t bytes = fill(p, &s, 1);
    txn_pool_close(p);
    txn_pool_info in;
    info_of(name, &in);
    ck_assert_uint_lt(bytes, START);
    ck_assert_uint_eq(in.max_size, in.size);
    ck_assert_uint_le(in.size, START);
    free(s.v);
    test_pool_remove(name);
}
END_TEST

/* One committed object of `size` bytes; 0 or the error. */
static int make1(txn_pool *p, size_t size, uint64_t tag, struct obj *x)
{
    txn *tx;
    CHECK_OK(txn_begin(p, &tx));
    int rc = make(tx, size, tag, x);
    if (rc) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

/* Without max_size a pool may grow to TXN_POOL_MAX (pmdk: it does not
 * grow), its file no longer than its size and holding about what it
 * stores: the chunk table for 128 GiB is a hole. */
START_TEST(test_grows_by_default)
{
    char name[TEST_NAME_LEN], path[TEST_PATH_LEN];
    CHECK_OK(test_pool_name("growdef", name, sizeof name));
    CHECK_OK(test_pool_path(name, path, sizeof path));
    txn_pool *p = create(name, 0);
    size_t size, max;
    txn_pool_size(p, &size, &max);
    if (!grows()) {
        ck_assert_uint_eq(max, size);
        ck_assert_uint_eq(size, START);
        txn_pool_close(p);
        test_pool_remove(name);
        return;
    }
    ck_assert_uint_eq(max, TXN_POOL_MAX);
    struct obj x[12];
    for (int i = 0; i < 12; i++) /* 12 x 1.5 MiB: three times the start */
        CHECK_OK(make1(p, 3u << 19, (uint64_t)i + 1, &x[i]));
    txn_pool_close(p);
    txn_pool_info in;
    info_of(name, &in);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(in.max_size, TXN_POOL_MAX);
    ck_assert_uint_gt(in.size, 3 * START);
    ck_assert_uint_eq((uint64_t)st.st_size, in.size);
    ck_assert_msg((uint64_t)st.st_blocks * 512 < in.size - TXN_POOL_MAX / 8192 / 2,
                  "%llu bytes held by a pool of %llu: its table's hole is filled",
                  (unsigned long long)st.st_blocks * 512, (unsigned long long)in.size);
    CHECK_OK(txn_pool_open(name, "grow", &p));
    for (int i = 0; i < 12; i++)
        verify(p, &x[i]);
    txn_pool_close(p);
    test_pool_remove(name);
}
END_TEST

/* Several pools that may grow to TXN_POOL_MAX open at once, each growing
 * past its start, then reopened all at once: an open pool reserves the
 * addresses it uses, not its whole maximum (448 GiB of them for all
 * pools would hold three). */
START_TEST(test_several_default_pools)
{
    enum { NP = 8 };
    char names[NP][TEST_NAME_LEN];
    txn_pool *p[NP];
    struct obj x[NP];
    for (int i = 0; i < NP; i++) {
        CHECK_OK(test_pool_name("growmany", names[i], sizeof names[i]));
        p[i] = create(names[i], 0);
        int rc = make1(p[i], 2 * START, (uint64_t)i + 7, &x[i]);
        ck_assert_int_eq(rc, grows() ? 0 : TXN_E_NOSPACE);
    }
    for (int i = 0; i < NP; i++)
        txn_pool_close(p[i]);
    for (int i = 0; i < NP; i++) {
        int rc = txn_pool_open(names[i], "grow", &p[i]);
        ck_assert_msg(rc == 0, "pool %d of %d: %s", i + 1, NP, txn_strerror(rc));
    }
    for (int i = 0; i < NP; i++) {
        if (grows())
            verify(p[i], &x[i]);
        txn_pool_close(p[i]);
        test_pool_remove(names[i]);
    }
}
END_TEST

/* A growth that would run into addresses taken after the pool (another
 * pool's, while both are open; here a page mapped there) fails as "pool
 * is full" and changes nothing; a smaller one that stays before them
 * still goes through. */
START_TEST(test_growth_blocked)
{
    if (!grows())
        return;
    char name[TEST_NAME_LEN];
    CHECK_OK(test_pool_name("growblk", name, sizeof name));
    txn_pool *p = create(name, 0);
    /* bases are 1 GiB aligned and the root lies in the first GiB */
    const size_t gib = (size_t)1 << 30;
    char *base = (char *)((uintptr_t)txn_root(p) & ~(uintptr_t)(gib - 1));
    void *blk = mmap(base + gib, 4096, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    ck_assert_msg(blk == base + gib, "the addresses after the pool's first GiB are taken");
    size_t before, after;
    txn_pool_size(p, &before, NULL);
    struct obj x, y;
    ck_assert_int_eq(make1(p, gib, 1, &x), TXN_E_NOSPACE);
    txn_pool_size(p, &after, NULL);
    ck_assert_uint_eq(after, before);
    CHECK_OK(make1(p, 64u << 20, 2, &y));
    ck_assert_int_eq(munmap(blk, 4096), 0);
    txn_pool_close(p);
    CHECK_OK(txn_pool_open(name, "grow", &p));
    verify(p, &y);
    txn_pool_close(p);
    test_pool_remove(name);
}
END_TEST

/* Two threads fill one growing pool; a third reads what they made, as
 * they make it, while the pool grows under it. */
struct shared {
    txn_pool *p;
    struct objs s;
    _Atomic int writers;
    uint64_t tag0[2];
};

static void *writer(void *arg)
{
    struct shared *sh = arg;
    static _Atomic int next;
    int me = atomic_fetch_add(&next, 1) % 2;
    fill(sh->p, &sh->s, sh->tag0[me]);
    atomic_fetch_sub(&sh->writers, 1);
    return NULL;
}

static void *reader(void *arg)
{
    struct shared *sh = arg;
    size_t seen = 0, i = 0;
    while (atomic_load(&sh->writers) > 0 || i < seen) {
        pthread_mutex_lock(&sh->s.m);
        seen = sh->s.n;
        struct obj x = i < seen ? sh->s.v[i] : (struct obj){0};
        pthread_mutex_unlock(&sh->s.m);
        if (i < seen) {
            verify(sh->p, &x);
            i++;
        }
    }
    return NULL;
}

START_TEST(test_threads)
{
    char name[TEST_NAME_LEN];
    CHECK_OK(test_pool_name("growth", name, sizeof name));
    struct shared sh = {.p = create(name, MAX), .s = {.m = PTHREAD_MUTEX_INITIALIZER},
                        .writers = 2, .tag0 = {1, 1ull << 40}};
    pthread_t t[3];
    ck_assert_int_eq(pthread_create(&t[0], NULL, reader, &sh), 0);
    ck_assert_int_eq(pthread_create(&t[1], NULL, writer, &sh), 0);
    ck_assert_int_eq(pthread_create(&t[2], NULL, writer, &sh), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    txn_pool_close(sh.p);
    txn_pool_info in;
    info_of(name, &in);
    if (grows())
        ck_assert_uint_gt(in.size, 4 * (uint64_t)START);
    CHECK_OK(txn_pool_open(name, "grow", &sh.p));
    for (size_t i = 0; i < sh.s.n; i++)
        verify(sh.p, &sh.s.v[i]);
    txn_pool_close(sh.p);
    free(sh.s.v);
    test_pool_remove(name);
}
END_TEST

/* Bytes of the pool's file the filesystem holds (its holes excepted). */
static size_t file_bytes(const char *name)
{
    char path[TEST_PATH_LEN];
    struct stat st;
    CHECK_OK(test_pool_path(name, path, sizeof path));
    ck_assert_int_eq(stat(path, &st), 0);
    return (size_t)st.st_blocks * 512;
}

static void free_objs(txn_pool *p, struct objs *s, size_t from, size_t to)
{
    for (size_t i = from; i < to;) {
        txn *tx;
        CHECK_OK(txn_begin(p, &tx));
        for (size_t j = 0; j < 64 && i < to; j++, i++)
            CHECK_OK(txn_free(tx, s->v[i].o));
        CHECK_OK(txn_commit(tx));
    }
}

/* A pool grown to its maximum, 90% of its objects freed: txn_pool_trim
 * gives the free chunks' bytes back to the filesystem; the objects left
 * keep theirs, also after a reopen, and the pool takes as much as before
 * again. */
START_TEST(test_trim)
{
    char name[TEST_NAME_LEN];
    CHECK_OK(test_pool_name("trim", name, sizeof name));
    txn_pool *p = create(name, MAX);
    struct objs s = {.m = PTHREAD_MUTEX_INITIALIZER};
    uint64_t bytes = fill(p, &s, 1);
    size_t back, size, held = file_bytes(name);
    if (!grows()) {
        ck_assert_int_eq(txn_pool_trim(p, &back), TXN_E_NOTSUP);
        txn_pool_close(p);
        free(s.v);
        test_pool_remove(name);
        return;
    }
    txn *tx;
    CHECK_OK(txn_begin(p, &tx));
    ck_assert_int_eq(txn_pool_trim(p, &back), TXN_E_STATE); /* not in a transaction */
    txn_abort(tx);
    txn_pool_size(p, &size, NULL);
    free_objs(p, &s, s.n / 10, s.n); /* the first tenth stays */
    CHECK_OK(txn_pool_trim(p, &back));
    ck_assert_msg(back > size / 2 && file_bytes(name) <= held - back,
                  "%zu bytes given back of a %zu-byte pool, %zu held before, %zu after", back,
                  size, held, file_bytes(name));
    txn_pool_size(p, &back, NULL);
    ck_assert_uint_eq(back, size); /* same size, same addresses */
    s.n /= 10;
    for (size_t i = 0; i < s.n; i++)
        verify(p, &s.v[i]);
    txn_pool_close(p);
    CHECK_OK(txn_pool_open(name, "grow", &p));
    for (size_t i = 0; i < s.n; i++)
        verify(p, &s.v[i]);
    uint64_t again = fill(p, &s, 1u << 20) + bytes / 10;
    ck_assert_msg(again > bytes / 10 * 9, "refilled to %llu bytes, %llu at first",
                  (unsigned long long)again, (unsigned long long)bytes);
    for (size_t i = 0; i < s.n; i++)
        verify(p, &s.v[i]);
    txn_pool_close(p);
    free(s.v);
    test_pool_remove(name);
}
END_TEST

/* One thread trims over and over while another fills the pool, frees
 * what it made and fills again, and a third reads what the second made. */
struct churner {
    struct shared *sh;
    _Atomic int stop;
};

static void *trimmer(void *arg)
{
    struct churner *c = arg;
    while (!atomic_load(&c->stop)) {
        size_t back;
        CHECK_OK(txn_pool_trim(c->sh->p, &back));
    }
    return NULL;
}

START_TEST(test_trim_threads)
{
    if (!grows())
        return;
    char name[TEST_NAME_LEN];
    CHECK_OK(test_pool_name("trimth", name, sizeof name));
    struct shared sh = {.p = create(name, MAX), .s = {.m = PTHREAD_MUTEX_INITIALIZER},
                        .writers = 1};
    struct churner c = {.sh = &sh};
    pthread_t tt, rt;
    ck_assert_int_eq(pthread_create(&tt, NULL, trimmer, &c), 0);
    for (int round = 0; round < 3; round++) {
        atomic_store(&sh.writers, 1);
        ck_assert_int_eq(pthread_create(&rt, NULL, reader, &sh), 0);
        fill(sh.p, &sh.s, 1 + ((uint64_t)round << 32));
        atomic_store(&sh.writers, 0);
        ck_assert_int_eq(pthread_join(rt, NULL), 0);
        free_objs(sh.p, &sh.s, 0, sh.s.n);
        sh.s.n = 0;
    }
    atomic_store(&c.stop, 1);
    ck_assert_int_eq(pthread_join(tt, NULL), 0);
    txn_pool_close(sh.p);
    free(sh.s.v);
    test_pool_remove(name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool_grow");
    TCase *tc = test_tcase(s, "grow", 120.0);
    tcase_add_test(tc, test_fill_to_max);
    tcase_add_test(tc, test_one_large_object);
    tcase_add_test(tc, test_fixed);
    tcase_add_test(tc, test_grows_by_default);
    tcase_add_test(tc, test_several_default_pools);
    tcase_add_test(tc, test_growth_blocked);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_trim);
    tcase_add_test(tc, test_trim_threads);
    return test_run(s, CK_FORK_GETENV, "grow");
}
