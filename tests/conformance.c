/* conformance.c - the engine-independent conformance suite, written only
 * against txn.h and linked once per engine (libtxn-<engine>).
 *
 * Every test makes its own small pool under $TXN_POOL_DIR (default
 * /dev/shm) named pmtx-conf-<main pid>-<test pid>-<seq>; main() removes
 * whatever a failed test left behind. Tests run forked (CK_FORK), so a
 * crash or a failed assertion in one does not take the others down. */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "txn.h"

#define LAYOUT "pmtx-conformance"
#define POOL_SIZE ((size_t)16 << 20)
#define NAME_MAX_LEN TEST_NAME_LEN

/* ---- pool helpers */

static void new_pool_name(char *buf, size_t n)
{
    CHECK_OK(test_pool_name("conf", buf, n));
}

static txn_pool *create_pool_opts(char *name, txn_pool_opts *o)
{
    txn_pool *p = NULL;
    new_pool_name(name, NAME_MAX_LEN);
    CHECK_OK(txn_pool_create(name, LAYOUT, o, &p));
    ck_assert_ptr_nonnull(p);
    return p;
}

static txn_pool *create_pool(char *name, size_t root_size)
{
    txn_pool_opts o = {0};
    o.size = POOL_SIZE;
    o.max_size = POOL_SIZE; /* the tests that fill it expect it full */
    o.root_size = root_size;
    return create_pool_opts(name, &o);
}

static txn_pool *reopen_pool(txn_pool *p, const char *name)
{
    txn_pool *q = NULL;
    txn_pool_close(p);
    CHECK_OK(txn_pool_open(name, LAYOUT, &q));
    ck_assert_ptr_nonnull(q);
    return q;
}

static void destroy_pool(txn_pool *p, const char *name)
{
    txn_pool_close(p);
    ck_assert_msg(test_pool_remove(name) == 0, "pool file %s missing", name);
}

/* ---- transaction helpers */

static txn *begin(txn_pool *p)
{
    txn *tx = NULL;
    CHECK_OK(txn_begin(p, &tx));
    ck_assert_ptr_nonnull(tx);
    return tx;
}

static uint64_t read_u64(txn *tx, txn_obj *o, size_t off)
{
    uint64_t v = 0;
    CHECK_OK(txn_read_u64(tx, o, off, &v));
    return v;
}

static void write_handle(txn *tx, txn_obj *o, size_t off, txn_obj *h)
{
    CHECK_OK(txn_write(tx, o, off, &h, sizeof h));
}

static txn_obj *read_handle(txn *tx, txn_obj *o, size_t off)
{
    txn_obj *h = NULL;
    CHECK_OK(txn_read(tx, o, off, &h, sizeof h));
    return h;
}

/* The u64 at `off` of `o`, read in a transaction of its own. */
static uint64_t committed_u64(txn_pool *p, txn_obj *o, size_t off)
{
    txn *tx = begin(p);
    uint64_t v = read_u64(tx, o, off);
    CHECK_OK(txn_commit(tx));
    return v;
}

static void commit_u64(txn_pool *p, txn_obj *o, size_t off, uint64_t v)
{
    txn *tx = begin(p);
    CHECK_OK(txn_write_u64(tx, o, off, v));
    CHECK_OK(txn_commit(tx));
}

/* A byte pattern that differs per position and per seed. */
static unsigned char pat(size_t i, unsigned seed)
{
    return (unsigned char)((i * 131u + (i >> 9) + seed * 29u + 7u) & 0xffu);
}

static void fill_pat(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pat(i, seed);
}

/* Index of the first byte of buf[0..n) that is not `c`, or n. */
static size_t first_not(const unsigned char *buf, size_t n, unsigned char c)
{
    size_t i = 0;
    while (i < n && buf[i] == c)
        i++;
    return i;
}

/* ---- pools: create, open, close, root */

START_TEST(test_create_close_reopen_keeps_data)
{
    char name[NAME_MAX_LEN];
    unsigned char want[256], got[256];
    txn_pool *p = create_pool(name, sizeof want);
    txn_obj *root = txn_root(p);
    txn *tx;

    ck_assert_ptr_nonnull(root);
    fill_pat(want, sizeof want, 1);
    tx = begin(p);
    CHECK_OK(txn_write(tx, root, 0, want, sizeof want));
    CHECK_OK(txn_commit(tx));
    CHECK_OK(txn_sync(p));

    for (int round = 0; round < 3; round++) {
        p = reopen_pool(p, name);
        root = txn_root(p);
        ck_assert_ptr_nonnull(root);
        ck_assert_uint_ge(txn_obj_size(p, root), sizeof want);
        memset(got, 0, sizeof got);
        tx = begin(p);
        CHECK_OK(txn_read(tx, root, 0, got, sizeof got));
        CHECK_OK(txn_commit(tx));
        ck_assert_msg(memcmp(got, want, sizeof want) == 0,
                      "root data lost after close/reopen #%d", round + 1);
    }
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_root_zero_filled)
{
    char name[NAME_MAX_LEN];
    const size_t root_size = 1000; /* deliberately not a round number */
    txn_pool *p = create_pool(name, root_size);
    txn_obj *root = txn_root(p);
    size_t size = txn_obj_size(p, root);
    unsigned char *buf = malloc(size);
    const unsigned char *direct;
    txn *tx;

    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_ge(size, root_size);
    tx = begin(p);
    memset(buf, 0xee, size);
    CHECK_OK(txn_read(tx, root, 0, buf, size));
    ck_assert_uint_eq(first_not(buf, size, 0), size);
    direct = txn_open(tx, root, TXN_RO);
    ck_assert_ptr_nonnull(direct);
    ck_assert_uint_eq(first_not(direct, root_size, 0), root_size);
    CHECK_OK(txn_commit(tx));

    /* The default root (root_size 0) exists too. */
    {
        char name2[NAME_MAX_LEN];
        txn_pool_opts o = {0};
        txn_pool *q;
        o.size = POOL_SIZE;
        q = create_pool_opts(name2, &o);
        ck_assert_ptr_nonnull(txn_root(q));
        ck_assert_uint_ge(txn_obj_size(q, txn_root(q)), 64);
        ck_assert_uint_eq(committed_u64(q, txn_root(q), 56), 0);
        destroy_pool(q, name2);
    }
    free(buf);
    destroy_pool(p, name);
}
END_TEST

/* One thread using more pools than a small per-thread cache would hold. */
START_TEST(test_many_pools_one_thread)
{
    enum { NPOOLS = 12 };
    char names[NPOOLS][NAME_MAX_LEN];
    txn_pool *pools[NPOOLS];
    txn_pool_opts o = {.size = (size_t)16 << 20, .threads = 2}; /* pmdk's smallest */

    for (int i = 0; i < NPOOLS; i++) {
        pools[i] = create_pool_opts(names[i], &o);
        commit_u64(pools[i], txn_root(pools[i]), 0, 1000 + (uint64_t)i);
    }
    for (int i = 0; i < NPOOLS; i++)
        ck_assert_uint_eq(committed_u64(pools[i], txn_root(pools[i]), 0),
                          1000 + (uint64_t)i);
    for (int i = 0; i < NPOOLS; i++)
        txn_pool_close(pools[i]);
    for (int i = NPOOLS - 1; i >= 0; i--)
        CHECK_OK(txn_pool_open(names[i], LAYOUT, &pools[i]));
    for (int i = 0; i < NPOOLS; i++) {
        ck_assert_uint_eq(committed_u64(pools[i], txn_root(pools[i]), 0),
                          1000 + (uint64_t)i);
        destroy_pool(pools[i], names[i]);
    }
}
END_TEST

START_TEST(test_two_pools_at_once)
{
    char na[NAME_MAX_LEN], nb[NAME_MAX_LEN];
    txn_pool *a = create_pool(na, 64);
    txn_pool *b = create_pool(nb, 64);

    commit_u64(a, txn_root(a), 0, 0xaaaa);
    commit_u64(b, txn_root(b), 0, 0xbbbb);
    ck_assert_uint_eq(committed_u64(a, txn_root(a), 0), 0xaaaa);
    ck_assert_uint_eq(committed_u64(b, txn_root(b), 0), 0xbbbb);
    txn_pool_close(a);
    b = reopen_pool(b, nb);
    CHECK_OK(txn_pool_open(na, LAYOUT, &a));
    ck_assert_uint_eq(committed_u64(a, txn_root(a), 0), 0xaaaa);
    ck_assert_uint_eq(committed_u64(b, txn_root(b), 0), 0xbbbb);
    destroy_pool(a, na);
    destroy_pool(b, nb);
}
END_TEST

/* ---- commit, abort, reads */

START_TEST(test_commit_then_read_back)
{
    char name[NAME_MAX_LEN];
    static const char msg[] = "hello, persistent world";
    txn_pool *p = create_pool(name, 256);
    txn_obj *root = txn_root(p);
    const unsigned char *direct;
    char got[sizeof msg];
    uint64_t v;
    txn *tx = begin(p);

    CHECK_OK(txn_write_u64(tx, root, 0, 0x1122334455667788ull));
    CHECK_OK(txn_write(tx, root, 16, msg, sizeof msg));
    CHECK_OK(txn_commit(tx));

    tx = begin(p);
    ck_assert_uint_eq(read_u64(tx, root, 0), 0x1122334455667788ull);
    CHECK_OK(txn_read(tx, root, 16, got, sizeof got));
    ck_assert_str_eq(got, msg);
    direct = txn_open(tx, root, TXN_RO);
    ck_assert_ptr_nonnull(direct);
    memcpy(&v, direct, sizeof v);
    ck_assert_uint_eq(v, 0x1122334455667788ull);
    ck_assert_int_eq(memcmp(direct + 16, msg, sizeof msg), 0);
    ck_assert_int_eq(txn_last_error(tx), 0);
    CHECK_OK(txn_commit(tx));
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_abort_discards_writes)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 256);
    txn_obj *root = txn_root(p);
    unsigned char before[200], junk[200], got[200];
    const unsigned char *direct;
    uint64_t v;
    txn *tx;

    fill_pat(before, sizeof before, 3);
    fill_pat(junk, sizeof junk, 4);
    tx = begin(p);
    CHECK_OK(txn_write_u64(tx, root, 0, 111));
    CHECK_OK(txn_write(tx, root, 40, before, sizeof before));
    CHECK_OK(txn_commit(tx));

    tx = begin(p);
    CHECK_OK(txn_write_u64(tx, root, 0, 222));
    CHECK_OK(txn_write(tx, root, 40, junk, sizeof junk));
    ck_assert_uint_eq(read_u64(tx, root, 0), 222);
    txn_abort(tx);

    tx = begin(p);
    ck_assert_uint_eq(read_u64(tx, root, 0), 111);
    CHECK_OK(txn_read(tx, root, 40, got, sizeof got));
    ck_assert_int_eq(memcmp(got, before, sizeof before), 0);
    direct = txn_open(tx, root, TXN_RO);
    ck_assert_ptr_nonnull(direct);
    memcpy(&v, direct, sizeof v);
    ck_assert_uint_eq(v, 111);
    ck_assert_int_eq(memcmp(direct + 40, before, sizeof before), 0);
    CHECK_OK(txn_commit(tx));

    /* The abort survives a reopen as well. */
    p = reopen_pool(p, name);
    ck_assert_uint_eq(committed_u64(p, txn_root(p), 0), 111);
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_read_your_writes)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 128);
    txn_obj *root = txn_root(p);
    unsigned char base[64], mine[10], got[64];
    txn *tx;

    memset(base, 'a', sizeof base);
    memset(mine, 'Z', sizeof mine);
    tx = begin(p);
    CHECK_OK(txn_write(tx, root, 0, base, sizeof base));
    CHECK_OK(txn_commit(tx));

    tx = begin(p);
    CHECK_OK(txn_write(tx, root, 20, mine, sizeof mine));
    /* a range that covers the write and committed bytes on both sides */
    CHECK_OK(txn_read(tx, root, 10, got, 30));
    ck_assert_uint_eq(first_not(got, 10, 'a'), 10);
    ck_assert_uint_eq(first_not(got + 10, 10, 'Z'), 10);
    ck_assert_uint_eq(first_not(got + 20, 10, 'a'), 10);
    /* a range that starts inside the write and ends past it */
    CHECK_OK(txn_read(tx, root, 25, got, 10));
    ck_assert_uint_eq(first_not(got, 5, 'Z'), 5);
    ck_assert_uint_eq(first_not(got + 5, 5, 'a'), 5);
    /* a u64 whose bytes are part written, part committed */
    {
        uint64_t v = read_u64(tx, root, 24), w;
        memcpy(&w, "aaaaaaaa", 8);
        memset(&w, 'Z', 6); /* bytes 24..29 written, 30..31 committed */
        ck_assert_uint_eq(v, w);
    }
    CHECK_OK(txn_write_u64(tx, root, 64, 77));
    ck_assert_uint_eq(read_u64(tx, root, 64), 77);
    CHECK_OK(txn_commit(tx));

    tx = begin(p);
    CHECK_OK(txn_read(tx, root, 0, got, 64));
    ck_assert_uint_eq(first_not(got, 20, 'a'), 20);
    ck_assert_uint_eq(first_not(got + 20, 10, 'Z'), 10);
    ck_assert_uint_eq(first_not(got + 30, 34, 'a'), 34);
    ck_assert_uint_eq(read_u64(tx, root, 64), 77);
    CHECK_OK(txn_commit(tx));
    destroy_pool(p, name);
}
END_TEST

/* Random writes of 1 to 40 bytes (aligned words most of the time, as the
 * inline paths take them; other sizes and offsets through the library)
 * and reads of up to 5000 bytes, in transactions long enough to need an
 * engine's lookup structures, each read checked against a model; one
 * transaction of each pair aborts. Committed and aborted states are read
 * back after a reopen. */
START_TEST(test_read_your_writes_random)
{
    enum { SIZE = 24 << 10, OPS = 3000 };
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    unsigned char *model = calloc(SIZE, 1), *before = malloc(SIZE), *got = malloc(5000);
    uint64_t seed = 0x51ed;
    txn_obj *o;
    txn *tx = begin(p);
    CHECK_OK(txn_alloc(tx, SIZE, &o));
    CHECK_OK(txn_write(tx, txn_root(p), 0, &o, sizeof o));
    CHECK_OK(txn_commit(tx));
    for (int round = 0; round < 4; round++) {
        memcpy(before, model, SIZE);
        tx = begin(p);
        for (int i = 0; i < OPS; i++) {
            uint64_t r = test_rand(&seed);
            if (r % 4 == 0) {
                size_t n = 1 + (size_t)(r >> 8) % (r % 8 ? 64 : 5000);
                size_t off = (size_t)(r >> 24) % (SIZE - n + 1);
                CHECK_OK(txn_read(tx, o, off, got, n));
                ck_assert_msg(!memcmp(got, model + off, n), "round %d op %d: read of %zu at %zu",
                              round, i, n, off);
                continue;
            }
            if (r % 4 == 1) {
                size_t off = 8 * ((size_t)(r >> 8) % (SIZE / 8));
                uint64_t v = test_rand(&seed), w;
                ck_assert_uint_eq(read_u64(tx, o, off), (memcpy(&w, model + off, 8), w));
                CHECK_OK(txn_write_u64(tx, o, off, v));
                memcpy(model + off, &v, 8);
                continue;
            }
            size_t n = 1 + (size_t)(r >> 8) % 40, off = (size_t)(r >> 24) % (SIZE - n + 1);
            unsigned char buf[40];
            for (size_t k = 0; k < n; k++)
                buf[k] = (unsigned char)test_rand(&seed);
            CHECK_OK(txn_write(tx, o, off, buf, n));
            memcpy(model + off, buf, n);
        }
        if (round % 2) {
            txn_abort(tx);
            memcpy(model, before, SIZE);
        } else {
            CHECK_OK(txn_commit(tx));
        }
        p = reopen_pool(p, name);
        tx = begin(p);
        CHECK_OK(txn_read(tx, txn_root(p), 0, &o, sizeof o));
        for (size_t off = 0; off < SIZE; off += 4096) {
            CHECK_OK(txn_read(tx, o, off, got, 4096));
            ck_assert_msg(!memcmp(got, model + off, 4096), "round %d: bytes %zu.. after reopen",
                          round, off);
        }
        txn_abort(tx);
    }
    free(model);
    free(before);
    free(got);
    destroy_pool(p, name);
}
END_TEST

/* Writes four overlapping ranges; returns what the root should then hold. */
static void overlapping_writes(txn *tx, txn_obj *root, unsigned char *want)
{
    unsigned char buf[100];
    memset(buf, 'A', 100);
    CHECK_OK(txn_write(tx, root, 0, buf, 100));
    memset(want, 'A', 100);
    memset(buf, 'B', 100);
    CHECK_OK(txn_write(tx, root, 50, buf, 100));
    memset(want + 50, 'B', 100);
    memset(buf, 'C', 5);
    CHECK_OK(txn_write(tx, root, 75, buf, 5));
    memset(want + 75, 'C', 5);
    memset(buf, 'D', 20);
    CHECK_OK(txn_write(tx, root, 140, buf, 20));
    memset(want + 140, 'D', 20);
    for (uint64_t i = 1; i <= 3; i++)
        CHECK_OK(txn_write_u64(tx, root, 200, i));
    memcpy(want + 200, &(uint64_t){3}, 8);
}

START_TEST(test_overlapping_writes)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 256);
    txn_obj *root = txn_root(p);
    unsigned char orig[208], want[208], got[208];
    txn *tx;

    memset(orig, 'o', sizeof orig);
    tx = begin(p);
    CHECK_OK(txn_write(tx, root, 0, orig, sizeof orig));
    CHECK_OK(txn_commit(tx));
    memcpy(want, orig, sizeof want);

    /* aborted: every byte goes back to 'o' */
    tx = begin(p);
    overlapping_writes(tx, root, want);
    CHECK_OK(txn_read(tx, root, 0, got, sizeof got));
    ck_assert_int_eq(memcmp(got, want, sizeof want), 0);
    txn_abort(tx);
    tx = begin(p);
    CHECK_OK(txn_read(tx, root, 0, got, sizeof got));
    CHECK_OK(txn_commit(tx));
    ck_assert_msg(first_not(got, sizeof got, 'o') == sizeof got,
                  "abort did not restore byte %zu",
                  first_not(got, sizeof got, 'o'));

    /* committed: the later write wins where ranges overlap */
    memcpy(want, orig, sizeof want);
    tx = begin(p);
    overlapping_writes(tx, root, want);
    CHECK_OK(txn_commit(tx));
    p = reopen_pool(p, name);
    root = txn_root(p);
    tx = begin(p);
    CHECK_OK(txn_read(tx, root, 0, got, sizeof got));
    CHECK_OK(txn_commit(tx));
    ck_assert_int_eq(memcmp(got, want, sizeof want), 0);
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_large_ranges)
{
    enum { BIG = 64 << 10 };
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p), *big;
    unsigned char *p1 = malloc(BIG), *p2 = malloc(BIG), *got = malloc(BIG);
    const unsigned char *direct;
    unsigned char one = 0xa5;
    txn *tx;

    ck_assert(p1 && p2 && got);
    fill_pat(p1, BIG, 11);
    fill_pat(p2, BIG, 12);
    ck_assert_uint_ne(p1[12345], one);

    /* a fresh object written fully in the transaction that allocates it */
    tx = begin(p);
    CHECK_OK(txn_alloc(tx, BIG, &big));
    ck_assert_uint_ge(txn_obj_size(p, big), BIG);
    CHECK_OK(txn_write(tx, big, 0, p2, BIG));
    write_handle(tx, root, 0, big);
    CHECK_OK(txn_commit(tx));

    /* an existing object overwritten fully: 64 KiB of undo/redo at once */
    tx = begin(p);
    CHECK_OK(txn_write(tx, big, 0, p1, BIG));
    CHECK_OK(txn_commit(tx));
    tx = begin(p);
    direct = txn_open(tx, big, TXN_RO);
    ck_assert_ptr_nonnull(direct);
    ck_assert_int_eq(memcmp(direct, p1, BIG), 0);
    CHECK_OK(txn_commit(tx));

    /* overwritten fully and aborted */
    tx = begin(p);
    CHECK_OK(txn_write(tx, big, 0, p2, BIG));
    CHECK_OK(txn_read(tx, big, 0, got, BIG));
    ck_assert_int_eq(memcmp(got, p2, BIG), 0);
    txn_abort(tx);
    tx = begin(p);
    CHECK_OK(txn_read(tx, big, 0, got, BIG));
    CHECK_OK(txn_commit(tx));
    ck_assert_int_eq(memcmp(got, p1, BIG), 0);

    /* one byte at an odd offset, and the very last byte */
    tx = begin(p);
    CHECK_OK(txn_write(tx, big, 12345, &one, 1));
    CHECK_OK(txn_write(tx, big, BIG - 1, &one, 1));
    CHECK_OK(txn_commit(tx));
    p1[12345] = one;
    p1[BIG - 1] = one;
    p = reopen_pool(p, name);
    tx = begin(p);
    big = read_handle(tx, txn_root(p), 0);
    CHECK_OK(txn_read(tx, big, 0, got, BIG));
    CHECK_OK(txn_commit(tx));
    ck_assert_int_eq(memcmp(got, p1, BIG), 0);

    free(p1);
    free(p2);
    free(got);
    destroy_pool(p, name);
}
END_TEST

/* Runs one call that must fail in a transaction of its own, then aborts:
 * after a failed call a transaction may refuse everything but abort. */
#define EXPECT_FAIL_IN_TXN(p, t, call, want)                                  \
    do {                                                                      \
        txn *t = begin(p);                                                    \
        CHECK_RC(call, want);                                                 \
        txn_abort(t);                                                         \
    } while (0)

START_TEST(test_out_of_range)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p);
    size_t size = txn_obj_size(p, root);
    unsigned char buf[16] = {0};
    uint64_t v;
    txn *tx;

    commit_u64(p, root, 0, 42);
    ck_assert_uint_ge(size, 64);

    tx = begin(p);
    CHECK_OK(txn_write(tx, root, size - 8, buf, 8)); /* ends exactly at end */
    CHECK_OK(txn_read(tx, root, size - 8, buf, 8));
    CHECK_OK(txn_read_u64(tx, root, 0, &v));
    txn_abort(tx);

    EXPECT_FAIL_IN_TXN(p, t, txn_read(t, root, size - 4, buf, 8), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_read(t, root, size, buf, 1), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_read(t, root, SIZE_MAX, buf, 2), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_read(t, root, 8, buf, SIZE_MAX), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_read_u64(t, root, size, &v), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_read_u64(t, root, 3, &v), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_read(t, NULL, 0, buf, 1), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_write(t, root, size - 4, buf, 8), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_write(t, root, SIZE_MAX - 1, buf, 4),
                       TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_write(t, NULL, 0, buf, 1), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_write_u64(t, root, size, 1), TXN_E_INVAL);
    EXPECT_FAIL_IN_TXN(p, t, txn_write_u64(t, root, 4, 1), TXN_E_INVAL);
    ck_assert_uint_eq(committed_u64(p, root, 0), 42);

    /* A failed write dooms the transaction: commit rolls it back. */
    tx = begin(p);
    CHECK_OK(txn_write_u64(tx, root, 0, 43));
    CHECK_RC(txn_write(tx, root, size, buf, 1), TXN_E_INVAL);
    ck_assert_int_eq(txn_last_error(tx), TXN_E_INVAL);
    CHECK_RC(txn_commit(tx), TXN_E_STATE);
    ck_assert_uint_eq(committed_u64(p, root, 0), 42);
    p = reopen_pool(p, name);
    ck_assert_uint_eq(committed_u64(p, txn_root(p), 0), 42);
    destroy_pool(p, name);
}
END_TEST

/* ---- allocation and free */

START_TEST(test_alloc_commit)
{
    char name[NAME_MAX_LEN];
    static const size_t sizes[3] = {100, 1, 4000};
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p), *o[3];
    unsigned char buf[4000], got[4000];
    txn *tx = begin(p);

    for (int i = 0; i < 3; i++) {
        CHECK_OK(txn_alloc(tx, sizes[i], &o[i]));
        ck_assert_ptr_nonnull(o[i]);
        ck_assert_uint_ge(txn_obj_size(p, o[i]), sizes[i]);
        CHECK_OK(txn_read(tx, o[i], 0, got, sizes[i]));
        ck_assert_uint_eq(first_not(got, sizes[i], 0), sizes[i]);
        write_handle(tx, root, 8 * (size_t)i, o[i]);
    }
    for (int i = 0; i < 3; i++) {
        fill_pat(buf, sizes[i], 20 + (unsigned)i);
        CHECK_OK(txn_write(tx, o[i], 0, buf, sizes[i]));
    }
    CHECK_OK(txn_commit(tx));

    p = reopen_pool(p, name);
    root = txn_root(p);
    tx = begin(p);
    for (int i = 0; i < 3; i++) {
        txn_obj *h = read_handle(tx, root, 8 * (size_t)i);
        ck_assert_ptr_nonnull(h);
        ck_assert_uint_ge(txn_obj_size(p, h), sizes[i]);
        fill_pat(buf, sizes[i], 20 + (unsigned)i);
        CHECK_OK(txn_read(tx, h, 0, got, sizes[i]));
        ck_assert_msg(memcmp(got, buf, sizes[i]) == 0,
                      "object %d: data lost or overlapping another", i);
    }
    CHECK_OK(txn_commit(tx));

    tx = begin(p);
    CHECK_RC(txn_alloc(tx, 0, &o[0]), TXN_E_INVAL);
    txn_abort(tx);
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_alloc_abort_does_not_leak)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *o = NULL;
    const uint64_t mark = 0x5a5a5a5a5a5a5a5aull;

    commit_u64(p, txn_root(p), 0, 7);
    for (int i = 0; i < 10000; i++) {
        txn *tx = begin(p);
        int rc = txn_alloc(tx, 4096, &o);
        ck_assert_msg(rc == 0, "alloc+abort cycle %d: %s", i,
                      txn_strerror(rc));
        CHECK_OK(txn_write_u64(tx, o, 4088, mark));
        CHECK_OK(txn_write_u64(tx, txn_root(p), 0, (uint64_t)i + 100));
        txn_abort(tx);
    }
    ck_assert_uint_eq(committed_u64(p, txn_root(p), 0), 7);

    /* the space is still there for one big object */
    {
        txn *tx = begin(p);
        CHECK_OK(txn_alloc(tx, (size_t)4 << 20, &o));
        ck_assert_uint_eq(read_u64(tx, o, 4088), 0);
        CHECK_OK(txn_commit(tx));
    }
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_free_commit_reuses_memory)
{
    enum { MIB = 1 << 20 };
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p), *o;
    const unsigned char *direct;

    for (int i = 0; i < 200; i++) {
        txn *tx = begin(p);
        int rc = txn_alloc(tx, MIB, &o);
        ck_assert_msg(rc == 0, "1 MiB alloc #%d: %s", i, txn_strerror(rc));
        /* zero-filled, even when it reuses the last cycle's memory */
        direct = txn_open(tx, o, TXN_RO);
        ck_assert_ptr_nonnull(direct);
        ck_assert_msg(first_not(direct, MIB, 0) == MIB,
                      "cycle %d: new object not zero-filled at byte %zu", i,
                      first_not(direct, MIB, 0));
        CHECK_OK(txn_write_u64(tx, o, 0, (uint64_t)i + 1));
        CHECK_OK(txn_write_u64(tx, o, MIB - 8, (uint64_t)i + 1));
        write_handle(tx, root, 0, o);
        CHECK_OK(txn_commit(tx));

        tx = begin(p);
        o = read_handle(tx, root, 0);
        ck_assert_uint_eq(read_u64(tx, o, MIB - 8), (uint64_t)i + 1);
        CHECK_OK(txn_free(tx, o));
        write_handle(tx, root, 0, NULL);
        CHECK_OK(txn_commit(tx));
    }
    destroy_pool(p, name);
}
END_TEST

/* A small object is zero-filled to its usable size (txn_obj_size), the
 * padding past what was asked for too, when its block held an object that
 * wrote all of it: the allocator skips storing a padding that is zero. */
START_TEST(test_alloc_zero_fills_padding)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p), *o;
    unsigned char junk[256], got[256];
    memset(junk, 0xab, sizeof junk);
    for (int i = 0; i < 40; i++) {
        size_t n = 33 + (size_t)(i % 8) * 2; /* one size class, or two */
        txn *tx = begin(p);
        CHECK_OK(txn_alloc(tx, n, &o));
        size_t usable = txn_obj_size(p, o);
        ck_assert_uint_ge(usable, n);
        ck_assert_uint_le(usable, sizeof got);
        CHECK_OK(txn_read(tx, o, 0, got, usable));
        ck_assert_msg(first_not(got, usable, 0) == usable,
                      "cycle %d: %zu-byte object (usable %zu) not zero at byte %zu", i, n,
                      usable, first_not(got, usable, 0));
        CHECK_OK(txn_write(tx, o, 0, junk, usable)); /* the padding too */
        write_handle(tx, root, 0, o);
        CHECK_OK(txn_commit(tx));
        tx = begin(p);
        CHECK_OK(txn_free(tx, read_handle(tx, root, 0)));
        write_handle(tx, root, 0, NULL);
        CHECK_OK(txn_commit(tx));
    }
    destroy_pool(p, name);
}
END_TEST

/* After a reopen, objects made before it are freed before their run hands
 * out anything: the freed blocks come back once, and no live object's
 * block is handed out again (the allocator reads a run's bitmap when it
 * first needs it, which must be as it was at the open). */
static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

START_TEST(test_reopen_frees_then_allocs_no_twice)
{
    enum { OLD = 1500, FREED = 40, NEW = 2500, SZ = 64, BATCH = 250 };
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *arr, **all = malloc((OLD + NEW) * sizeof *all);
    ck_assert_ptr_nonnull(all);
    txn *tx = begin(p);
    CHECK_OK(txn_alloc(tx, OLD * sizeof(txn_obj *), &arr));
    write_handle(tx, txn_root(p), 0, arr);
    CHECK_OK(txn_commit(tx));
    for (int i = 0; i < OLD; i += BATCH) {
        tx = begin(p);
        for (int j = i; j < i + BATCH; j++) {
            CHECK_OK(txn_alloc(tx, SZ, &all[j]));
            write_handle(tx, arr, (size_t)j * sizeof(txn_obj *), all[j]);
        }
        CHECK_OK(txn_commit(tx));
    }
    p = reopen_pool(p, name);
    tx = begin(p);
    arr = read_handle(tx, txn_root(p), 0);
    for (int j = 0; j < OLD; j++)
        all[j] = read_handle(tx, arr, (size_t)j * sizeof(txn_obj *));
    CHECK_OK(txn_commit(tx));
    tx = begin(p); /* free every 37th old object, from the first runs */
    for (int j = 0; j < FREED; j++) {
        CHECK_OK(txn_free(tx, all[j * 37]));
        all[j * 37] = NULL;
    }
    CHECK_OK(txn_commit(tx));
    CHECK_OK(txn_sync(p));
    for (int i = 0; i < NEW; i += BATCH) {
        tx = begin(p);
        for (int j = i; j < i + BATCH; j++)
            CHECK_OK(txn_alloc(tx, SZ, &all[OLD + j]));
        CHECK_OK(txn_commit(tx));
    }
    qsort(all, OLD + NEW, sizeof *all, cmp_ptr);
    for (int j = FREED + 1; j < OLD + NEW; j++) /* the first FREED are NULL */
        ck_assert_msg(all[j] != all[j - 1], "block %p handed out while live", (void *)all[j]);
    free(all);
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_free_abort_keeps_object)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p), *o;
    unsigned char want[300], got[300];
    txn *tx = begin(p);

    fill_pat(want, sizeof want, 30);
    CHECK_OK(txn_alloc(tx, sizeof want, &o));
    CHECK_OK(txn_write(tx, o, 0, want, sizeof want));
    write_handle(tx, root, 0, o);
    CHECK_OK(txn_commit(tx));

    for (int i = 0; i < 3; i++) {
        tx = begin(p);
        CHECK_OK(txn_free(tx, o));
        write_handle(tx, root, 0, NULL);
        txn_abort(tx);
    }
    p = reopen_pool(p, name);
    root = txn_root(p);
    tx = begin(p);
    o = read_handle(tx, root, 0);
    ck_assert_ptr_nonnull(o);
    CHECK_OK(txn_read(tx, o, 0, got, sizeof got));
    ck_assert_int_eq(memcmp(got, want, sizeof want), 0);
    /* the aborted frees were cancelled, so this one is the first */
    CHECK_OK(txn_free(tx, o));
    write_handle(tx, root, 0, NULL);
    CHECK_OK(txn_commit(tx));

    tx = begin(p);
    CHECK_RC(txn_free(tx, o), TXN_E_INVAL); /* already freed */
    txn_abort(tx);
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_free_bad_objects)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p);
    uint64_t local[8] = {0};
    txn *tx;

    commit_u64(p, root, 0, 9);
    tx = begin(p);
    ck_assert_int_eq(txn_last_error(tx), 0);
    CHECK_RC(txn_free(tx, root), TXN_E_INVAL);
    txn_abort(tx);
    tx = begin(p);
    CHECK_RC(txn_free(tx, NULL), TXN_E_INVAL);
    txn_abort(tx);
    tx = begin(p);
    CHECK_RC(txn_free(tx, (txn_obj *)&local[4]), TXN_E_INVAL);
    txn_abort(tx);
    tx = begin(p);
    ck_assert_ptr_null(txn_open(tx, NULL, TXN_RO));
    ck_assert_int_eq(txn_last_error(tx), TXN_E_INVAL);
    txn_abort(tx);
    tx = begin(p);
    ck_assert_ptr_null(txn_open(tx, (txn_obj *)&local[4], TXN_RO));
    ck_assert_int_ne(txn_last_error(tx), 0);
    txn_abort(tx);

    /* the root is untouched and the pool still works */
    ck_assert_uint_eq(committed_u64(p, root, 0), 9);
    commit_u64(p, root, 0, 10);
    p = reopen_pool(p, name);
    ck_assert_uint_eq(committed_u64(p, txn_root(p), 0), 10);
    destroy_pool(p, name);
}
END_TEST

/* Allocates `n` bytes until the pool is full; returns how many fit. */
static int fill_in_one_txn(txn *tx, size_t n)
{
    txn_obj *o;
    int count = 0, rc;
    while ((rc = txn_alloc(tx, n, &o)) == 0) {
        ck_assert_int_lt(++count, 100000);
        CHECK_OK(txn_write_u64(tx, o, 0, (uint64_t)count));
    }
    ck_assert_msg(rc == TXN_E_NOSPACE, "alloc #%d returned %d (%s)",
                  count + 1, rc, txn_strerror(rc));
    return count;
}

/* Live objects of the closed pool `name`, as txn_pool_inspect counts them. */
static uint64_t live_objects(const char *name)
{
    char path[4096];
    txn_pool_info info;
    ck_assert_int_eq(test_pool_path(name, path, sizeof path), 0);
    int rc = txn_pool_inspect(path, &info);
    ck_assert_msg(rc == 0, "inspect %s: %s", path, txn_strerror(rc));
    return info.objects;
}

/* An allocation that fails leaves nothing behind it, also when the
 * transaction goes on and commits (cow reserves a wrapper, then the
 * payload: the wrapper of a payload that did not fit used to stay
 * allocated and unreachable). */
START_TEST(test_failed_alloc_commits_nothing)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *o;
    txn *tx;
    commit_u64(p, txn_root(p), 0, 1);
    txn_pool_close(p);
    uint64_t before = live_objects(name);
    CHECK_OK(txn_pool_open(name, LAYOUT, &p));
    tx = begin(p);
    CHECK_RC(txn_alloc(tx, (size_t)POOL_SIZE, &o), TXN_E_NOSPACE);
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 2));
    CHECK_OK(txn_commit(tx));
    txn_pool_close(p);
    ck_assert_uint_eq(live_objects(name), before);
    CHECK_OK(txn_pool_open(name, LAYOUT, &p));
    ck_assert_uint_eq(committed_u64(p, txn_root(p), 0), 2);
    destroy_pool(p, name);
}
END_TEST

/* Objects of `size` bytes, one committed transaction each (word 0: its
 * number from 1), until the pool is full; returns how many, at most max. */
static int fill_committed(txn_pool *p, size_t size, txn_obj **objs, int max)
{
    txn_obj *o;
    int n = 0, rc;
    for (;;) {
        txn *tx = begin(p);
        if ((rc = txn_alloc(tx, size, &o))) {
            CHECK_RC(rc, TXN_E_NOSPACE);
            txn_abort(tx);
            return n;
        }
        ck_assert_int_lt(n, max);
        CHECK_OK(txn_write_u64(tx, o, 0, (uint64_t)n + 1));
        CHECK_OK(txn_commit(tx));
        objs[n++] = o;
    }
}

/* A transaction that frees finds room for what it writes on a full pool
 * (A5 in the allocator: cow copies an object at its first write). */
START_TEST(test_free_on_full_pool)
{
    enum { OBJ = 256 << 10, MAXOBJ = 200 };
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *objs[MAXOBJ];
    txn *tx;
    int n = fill_committed(p, OBJ, objs, MAXOBJ);
    ck_assert_int_ge(n, 2);
    tx = begin(p);
    CHECK_OK(txn_free(tx, objs[0]));
    CHECK_OK(txn_write_u64(tx, objs[1], 0, 77));
    CHECK_OK(txn_commit(tx));
    p = reopen_pool(p, name);
    tx = begin(p);
    ck_assert_uint_eq(read_u64(tx, objs[1], 0), 77);
    txn_abort(tx);
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_pool_full)
{
    enum { CHUNK = 256 << 10, MAXOBJ = 200 };
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p), *objs[MAXOBJ], *o;
    int first, second, n;
    txn *tx;

    commit_u64(p, root, 0, 0xfeed);

    tx = begin(p);
    first = fill_in_one_txn(tx, CHUNK);
    ck_assert_int_gt(first, 4);
    txn_abort(tx);

    ck_assert_uint_eq(committed_u64(p, root, 0), 0xfeed);
    commit_u64(p, root, 0, 0xbeef);
    ck_assert_uint_eq(committed_u64(p, root, 0), 0xbeef);
    tx = begin(p);
    second = fill_in_one_txn(tx, CHUNK);
    txn_abort(tx);
    ck_assert_msg(second >= first - 1,
                  "abort of a full pool leaked: %d then %d objects", first,
                  second);

    /* filled by committed transactions, then all freed in one */
    n = fill_committed(p, CHUNK, objs, MAXOBJ);
    ck_assert_int_ge(n, second - 1);
    ck_assert_uint_eq(committed_u64(p, root, 0), 0xbeef);
    tx = begin(p);
    for (int i = 0; i < n; i++) {
        ck_assert_uint_eq(read_u64(tx, objs[i], 0), (uint64_t)i + 1);
        CHECK_OK(txn_free(tx, objs[i]));
    }
    CHECK_OK(txn_commit(tx));
    tx = begin(p);
    CHECK_OK(txn_alloc(tx, (size_t)4 << 20, &o));
    CHECK_OK(txn_commit(tx));
    p = reopen_pool(p, name);
    ck_assert_uint_eq(committed_u64(p, txn_root(p), 0), 0xbeef);
    destroy_pool(p, name);
}
END_TEST

/* ---- deferred actions */

static char g_seq_log[32];
static size_t g_seq_len;

static void record(void *arg)
{
    if (g_seq_len + 1 < sizeof g_seq_log)
        g_seq_log[g_seq_len++] = *(const char *)arg;
    g_seq_log[g_seq_len] = '\0';
}

static const char tag_a = 'a', tag_b = 'b', tag_c = 'c', tag_d = 'd',
                  tag_e = 'e';

static void defer_all(txn *tx)
{
    g_seq_len = 0;
    g_seq_log[0] = '\0';
    CHECK_OK(txn_defer(tx, TXN_ON_COMMIT, record, (void *)&tag_a));
    CHECK_OK(txn_defer(tx, TXN_ON_ABORT, record, (void *)&tag_b));
    CHECK_OK(txn_defer(tx, TXN_ON_END, record, (void *)&tag_c));
    CHECK_OK(txn_defer(tx, TXN_ON_COMMIT, record, (void *)&tag_d));
    CHECK_OK(txn_defer(tx, TXN_ON_ABORT, record, (void *)&tag_e));
    ck_assert_str_eq(g_seq_log, ""); /* nothing runs before the end */
}

START_TEST(test_deferred_actions)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p);
    txn *tx;

    tx = begin(p);
    defer_all(tx);
    CHECK_OK(txn_write_u64(tx, root, 0, 1));
    CHECK_OK(txn_commit(tx));
    ck_assert_str_eq(g_seq_log, "acd");

    tx = begin(p);
    defer_all(tx);
    CHECK_OK(txn_write_u64(tx, root, 0, 2));
    txn_abort(tx);
    ck_assert_str_eq(g_seq_log, "bce");

    /* a commit that fails runs the abort actions */
    tx = begin(p);
    defer_all(tx);
    CHECK_RC(txn_write(tx, root, txn_obj_size(p, root), "x", 1),
             TXN_E_INVAL);
    ck_assert_int_ne(txn_commit(tx), 0);
    ck_assert_str_eq(g_seq_log, "bce");

    tx = begin(p);
    CHECK_RC(txn_defer(tx, 0, record, (void *)&tag_a), TXN_E_INVAL);
    txn_abort(tx);
    tx = begin(p);
    CHECK_RC(txn_defer(tx, 4, record, (void *)&tag_a), TXN_E_INVAL);
    txn_abort(tx);
    tx = begin(p);
    CHECK_RC(txn_defer(tx, TXN_ON_END, NULL, NULL), TXN_E_INVAL);
    txn_abort(tx);
    ck_assert_uint_eq(committed_u64(p, root, 0), 1);
    destroy_pool(p, name);
}
END_TEST

/* An action may run a transaction of its own: the thread's transaction
 * is over when actions run. */
static txn_pool *g_defer_pool;

static void begin_inside_action(void *arg)
{
    txn *tx = NULL;
    record(arg);
    if (txn_begin(g_defer_pool, &tx) != 0)
        return; /* the missing 'z' and value fail the test */
    txn_defer(tx, TXN_ON_COMMIT, record, (void *)&tag_e);
    txn_write_u64(tx, txn_root(g_defer_pool), 8, 99);
    txn_commit(tx);
}

START_TEST(test_deferred_action_runs_transaction)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn *tx = begin(p);

    g_defer_pool = p;
    g_seq_len = 0;
    g_seq_log[0] = '\0';
    CHECK_OK(txn_defer(tx, TXN_ON_COMMIT, record, (void *)&tag_a));
    CHECK_OK(txn_defer(tx, TXN_ON_COMMIT, begin_inside_action,
                       (void *)&tag_b));
    CHECK_OK(txn_defer(tx, TXN_ON_END, record, (void *)&tag_c));
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 1));
    CHECK_OK(txn_commit(tx));
    /* a, then b and its inner transaction's e, then c: each once */
    ck_assert_str_eq(g_seq_log, "abec");
    ck_assert_uint_eq(committed_u64(p, txn_root(p), 0), 1);
    ck_assert_uint_eq(committed_u64(p, txn_root(p), 8), 99);
    destroy_pool(p, name);
}
END_TEST

START_TEST(test_nested_begin)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p);
    txn *tx = begin(p), *inner = NULL;

    CHECK_OK(txn_write_u64(tx, root, 0, 5));
    inner = tx; /* a failed begin sets it to NULL, which txn_abort ignores */
    CHECK_RC(txn_begin(p, &inner), TXN_E_NESTED);
    ck_assert_ptr_null(inner);
    txn_abort(inner);
    CHECK_RC(txn_begin(p, NULL), TXN_E_INVAL);
    /* the outer transaction is unharmed */
    ck_assert_uint_eq(read_u64(tx, root, 0), 5);
    CHECK_OK(txn_write_u64(tx, root, 8, 6));
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(committed_u64(p, root, 0), 5);
    ck_assert_uint_eq(committed_u64(p, root, 8), 6);
    tx = begin(p); /* not nested any more */
    txn_abort(tx);
    tx = begin(p);
    CHECK_OK(txn_commit(tx));
    destroy_pool(p, name);
}
END_TEST

/* ---- threads */

enum { NTHREADS = 8, TXNS_PER_THREAD = 2000, ARR = 4 };

struct worker {
    pthread_t tid;
    txn_pool *pool;
    txn_obj *obj;         /* counter at 0, ARR equal u64 at 8.. */
    uint64_t commits, aborts;
    uint64_t stat_commits, stat_aborts; /* txn_stats deltas */
    int failures;
    char first_failure[160];
};

static void worker_fail(struct worker *w, const char *what, int rc)
{
    if (w->failures++ == 0)
        snprintf(w->first_failure, sizeof w->first_failure,
                 "%s: %d (%s)", what, rc, txn_strerror(rc));
}

/* One transaction: counter and array += 1, checking they agree first. */
static void worker_step(struct worker *w, int j)
{
    txn *tx = NULL;
    uint64_t c = 0, arr[ARR];
    int rc = txn_begin(w->pool, &tx);
    if (rc != 0) {
        worker_fail(w, "txn_begin", rc);
        return;
    }
    if ((rc = txn_read_u64(tx, w->obj, 0, &c)) != 0 ||
        (rc = txn_read(tx, w->obj, 8, arr, sizeof arr)) != 0) {
        worker_fail(w, "read", rc);
        txn_abort(tx);
        return;
    }
    for (int k = 0; k < ARR; k++)
        if (arr[k] != c || c != w->commits)
            worker_fail(w, "counter and array disagree", (int)k);
    rc = txn_write_u64(tx, w->obj, 0, c + 1);
    for (int k = 0; k < ARR && rc == 0; k++)
        arr[k] = c + 1;
    if (rc == 0 && (j & 1))
        rc = txn_write(tx, w->obj, 8, arr, sizeof arr);
    for (int k = 0; k < ARR && rc == 0 && !(j & 1); k++)
        rc = txn_write_u64(tx, w->obj, 8 + 8 * (size_t)k, c + 1);
    if (rc != 0) {
        worker_fail(w, "write", rc);
        txn_abort(tx);
        return;
    }
    if (j % 7 == 3) {
        txn_abort(tx);
        w->aborts++;
    } else if ((rc = txn_commit(tx)) != 0) {
        worker_fail(w, "txn_commit", rc);
    } else {
        w->commits++;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    txn_stats s0, s1;
    txn_stats_get(&s0);
    for (int j = 0; j < TXNS_PER_THREAD; j++)
        worker_step(w, j);
    txn_stats_get(&s1);
    w->stat_commits = s1.commits - s0.commits;
    w->stat_aborts = s1.aborts - s0.aborts;
    return NULL;
}

static void check_worker_objects(txn_pool *p, txn_obj *root,
                                 const struct worker *w)
{
    txn *tx = begin(p);
    for (int i = 0; i < NTHREADS; i++) {
        txn_obj *o = read_handle(tx, root, 8 * (size_t)i);
        ck_assert_uint_eq(read_u64(tx, o, 0), w[i].commits);
        for (int k = 0; k < ARR; k++)
            ck_assert_uint_eq(read_u64(tx, o, 8 + 8 * (size_t)k),
                              w[i].commits);
    }
    CHECK_OK(txn_commit(tx));
}

START_TEST(test_many_threads)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 8 * NTHREADS);
    txn_obj *root = txn_root(p);
    struct worker w[NTHREADS];
    txn *tx = begin(p);

    memset(w, 0, sizeof w);
    for (int i = 0; i < NTHREADS; i++) {
        w[i].pool = p;
        CHECK_OK(txn_alloc(tx, 8 * (1 + ARR), &w[i].obj));
        write_handle(tx, root, 8 * (size_t)i, w[i].obj);
    }
    CHECK_OK(txn_commit(tx));

    for (int i = 0; i < NTHREADS; i++)
        ck_assert_int_eq(pthread_create(&w[i].tid, NULL, worker_main, &w[i]),
                         0);
    for (int i = 0; i < NTHREADS; i++)
        ck_assert_int_eq(pthread_join(w[i].tid, NULL), 0);
    for (int i = 0; i < NTHREADS; i++) {
        ck_assert_msg(w[i].failures == 0, "thread %d: %d failures, first %s",
                      i, w[i].failures, w[i].first_failure);
        ck_assert_uint_eq(w[i].commits + w[i].aborts, TXNS_PER_THREAD);
        ck_assert_uint_eq(w[i].stat_commits, w[i].commits);
        ck_assert_uint_eq(w[i].stat_aborts, w[i].aborts);
    }
    check_worker_objects(p, root, w);
    p = reopen_pool(p, name);
    check_worker_objects(p, txn_root(p), w);
    destroy_pool(p, name);
}
END_TEST

/* A thread that holds a transaction open until told to commit. */
struct holder {
    txn_pool *pool;
    sem_t started, go;
    int begin_rc, commit_rc;
    int wait_for_go;
};

static void *holder_main(void *arg)
{
    struct holder *h = arg;
    txn *tx = NULL;
    h->begin_rc = txn_begin(h->pool, &tx);
    sem_post(&h->started);
    if (h->wait_for_go)
        sem_wait(&h->go);
    if (h->begin_rc == 0)
        h->commit_rc = txn_commit(tx);
    return NULL;
}

static void run_holder(struct holder *h, pthread_t *t, txn_pool *p, int wait)
{
    h->pool = p;
    h->wait_for_go = wait;
    h->begin_rc = h->commit_rc = -1;
    ck_assert_int_eq(sem_init(&h->started, 0, 0), 0);
    ck_assert_int_eq(sem_init(&h->go, 0, 0), 0);
    ck_assert_int_eq(pthread_create(t, NULL, holder_main, h), 0);
    ck_assert_int_eq(sem_wait(&h->started), 0);
}

START_TEST(test_thread_slots)
{
    char name[NAME_MAX_LEN];
    txn_pool_opts o = {0};
    struct holder h1, h2, h3;
    pthread_t t1, t2, t3;
    txn_pool *p;
    txn *tx;

    o.size = POOL_SIZE;
    o.threads = 2;
    p = create_pool_opts(name, &o);
    tx = begin(p);                 /* slot 1: this thread */
    run_holder(&h1, &t1, p, 1);    /* slot 2: h1, held open */
    CHECK_OK(h1.begin_rc);
    run_holder(&h2, &t2, p, 0);    /* no slot left */
    ck_assert_int_eq(pthread_join(t2, NULL), 0);
    CHECK_RC(h2.begin_rc, TXN_E_THREADS);
    sem_post(&h1.go);
    ck_assert_int_eq(pthread_join(t1, NULL), 0);
    CHECK_OK(h1.commit_rc);
    run_holder(&h3, &t3, p, 0);    /* h1 exited: its slot is free again */
    ck_assert_int_eq(pthread_join(t3, NULL), 0);
    CHECK_OK(h3.begin_rc);
    CHECK_OK(h3.commit_rc);
    CHECK_OK(txn_commit(tx));
    destroy_pool(p, name);
}
END_TEST

/* ---- engine name, errors, statistics */

/* The library names the engine the build linked this suite with. */
START_TEST(test_engine_name)
{
    const char *name = txn_engine_name();
    ck_assert_ptr_nonnull(name);
    ck_assert_str_eq(name, PMTX_LINKED_ENGINE);
}
END_TEST

START_TEST(test_strerror)
{
    static const int errnos[] = {0, EINVAL, ENOENT, ENOMEM, EIO, ENOSPC};
    const char *msgs[TXN_E_FIRST - TXN_E_LAST + 1];
    int n = 0;

    for (int e = TXN_E_FIRST; e >= TXN_E_LAST; e--) {
        const char *m = txn_strerror(e);
        ck_assert_msg(m && *m, "txn_strerror(%d) is empty", e);
        for (int i = 0; i < n; i++)
            ck_assert_msg(strcmp(m, msgs[i]) != 0,
                          "codes %d and %d share the message \"%s\"", e,
                          TXN_E_FIRST - i, m);
        msgs[n++] = m;
    }
    for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++) {
        const char *m = txn_strerror(errnos[i]);
        ck_assert_msg(m && *m, "txn_strerror(%d) is empty", errnos[i]);
    }
    /* negative errno values (the kernel's convention) and junk */
    ck_assert_ptr_nonnull(txn_strerror(-ENOENT));
    ck_assert_ptr_nonnull(txn_strerror(TXN_E_LAST - 1));
    ck_assert_ptr_nonnull(txn_strerror(123456));
}
END_TEST

static void *commit_one(void *arg)
{
    txn_pool *p = arg;
    txn *tx = NULL;
    if (txn_begin(p, &tx) == 0)
        txn_commit(tx);
    return NULL;
}

START_TEST(test_stats_count_commits_aborts)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_stats s0, s1;
    pthread_t t;
    txn *tx;

    txn_stats_get(&s0);
    tx = begin(p);
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 1));
    CHECK_OK(txn_commit(tx));
    txn_stats_get(&s1);
    ck_assert_uint_eq(s1.commits - s0.commits, 1);
    ck_assert_uint_eq(s1.aborts - s0.aborts, 0);

    s0 = s1;
    tx = begin(p);
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, 2));
    txn_abort(tx);
    txn_stats_get(&s1);
    ck_assert_uint_eq(s1.commits - s0.commits, 0);
    ck_assert_uint_eq(s1.aborts - s0.aborts, 1);

    /* another thread's transaction is not counted here */
    s0 = s1;
    ck_assert_int_eq(pthread_create(&t, NULL, commit_one, p), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    txn_stats_get(&s1);
    ck_assert_uint_eq(s1.commits, s0.commits);
    ck_assert_uint_eq(s1.aborts, s0.aborts);

    for (int i = 0; i < 5; i++)
        commit_u64(p, txn_root(p), 0, (uint64_t)i);
    txn_stats_get(&s1);
    ck_assert_uint_eq(s1.commits - s0.commits, 5);

    /* the words a committed transaction wrote are counted stored, those
     * the inline path stored too (txn.h adds them up per transaction, the
     * library counts them when it ends);
     * pmdk's stores are libpmemobj's, not counted */
    if (strcmp(txn_engine_name(), "pmdk")) {
        txn_stats_get(&s0);
        tx = begin(p);
        (void)read_u64(tx, txn_root(p), 0); /* a read fills the object's way */
        for (size_t w = 0; w < 4; w++)
            CHECK_OK(txn_write_u64(tx, txn_root(p), 8 * w, 40 + w));
        CHECK_OK(txn_commit(tx));
        txn_stats_get(&s1);
        ck_assert_uint_ge(s1.bytes_stored - s0.bytes_stored, 32);
    }

    txn_stats_reset();
    txn_stats_get(&s1);
    ck_assert_uint_eq(s1.commits, 0);
    ck_assert_uint_eq(s1.aborts, 0);
    ck_assert_uint_eq(s1.barriers, 0);
    ck_assert_uint_eq(s1.lines_flushed, 0);
    ck_assert_uint_eq(s1.log_bytes, 0);
    destroy_pool(p, name);
}
END_TEST

/* ---- a persistent linked list, followed after a reopen */

enum { NODES = 50, NODE_VALUE = 0, NODE_NEXT = 8, NODE_SIZE = 48 };

START_TEST(test_linked_structure_survives_reopen)
{
    char name[NAME_MAX_LEN];
    txn_pool *p = create_pool(name, 64);
    txn_obj *root = txn_root(p), *head = NULL, *n;
    char label[NODE_SIZE - 16];
    uint64_t count = 0;
    txn *tx = begin(p);

    /* push NODES nodes: values 1..NODES, so the list reads NODES..1 */
    for (uint64_t v = 1; v <= NODES; v++) {
        CHECK_OK(txn_alloc(tx, NODE_SIZE, &n));
        CHECK_OK(txn_write_u64(tx, n, NODE_VALUE, v * 1000 + 7));
        write_handle(tx, n, NODE_NEXT, head);
        snprintf(label, sizeof label, "node-%llu", (unsigned long long)v);
        CHECK_OK(txn_write(tx, n, 16, label, sizeof label));
        head = n;
    }
    write_handle(tx, root, 0, head);
    CHECK_OK(txn_write_u64(tx, root, 8, NODES));
    CHECK_OK(txn_commit(tx));

    p = reopen_pool(p, name);
    root = txn_root(p);
    tx = begin(p);
    ck_assert_uint_eq(read_u64(tx, root, 8), NODES);
    for (n = read_handle(tx, root, 0); n != NULL;
         n = read_handle(tx, n, NODE_NEXT)) {
        uint64_t want = NODES - count;
        const unsigned char *direct = txn_open(tx, n, TXN_RO);
        char expect[sizeof label];
        uint64_t v;
        ck_assert_uint_lt(count, NODES);
        ck_assert_ptr_nonnull(direct);
        ck_assert_uint_eq(read_u64(tx, n, NODE_VALUE), want * 1000 + 7);
        memcpy(&v, direct + NODE_VALUE, sizeof v);
        ck_assert_uint_eq(v, want * 1000 + 7);
        snprintf(expect, sizeof expect, "node-%llu", (unsigned long long)want);
        ck_assert_str_eq((const char *)direct + 16, expect);
        count++;
    }
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(count, NODES);
    destroy_pool(p, name);
}
END_TEST

/* ---- runner */

static Suite *conformance_suite(void)
{
    Suite *s = suite_create("conformance");
    TCase *pools = test_tcase(s, "pools", 30);
    TCase *tx = test_tcase(s, "transactions", 30);
    TCase *heap = test_tcase(s, "allocation", 30);
    TCase *misc = test_tcase(s, "misc", 30);

    tcase_add_test(pools, test_create_close_reopen_keeps_data);
    tcase_add_test(pools, test_root_zero_filled);
    tcase_add_test(pools, test_two_pools_at_once);
    tcase_add_test(pools, test_many_pools_one_thread);
    tcase_add_test(pools, test_linked_structure_survives_reopen);
    tcase_add_test(tx, test_commit_then_read_back);
    tcase_add_test(tx, test_abort_discards_writes);
    tcase_add_test(tx, test_read_your_writes);
    tcase_add_test(tx, test_read_your_writes_random);
    tcase_add_test(tx, test_overlapping_writes);
    tcase_add_test(tx, test_large_ranges);
    tcase_add_test(tx, test_out_of_range);
    tcase_add_test(tx, test_deferred_actions);
    tcase_add_test(tx, test_deferred_action_runs_transaction);
    tcase_add_test(tx, test_nested_begin);
    tcase_add_test(tx, test_many_threads);
    tcase_add_test(tx, test_thread_slots);
    tcase_add_test(heap, test_alloc_commit);
    tcase_add_test(heap, test_alloc_abort_does_not_leak);
    tcase_add_test(heap, test_free_commit_reuses_memory);
    tcase_add_test(heap, test_alloc_zero_fills_padding);
    tcase_add_test(heap, test_reopen_frees_then_allocs_no_twice);
    tcase_add_test(heap, test_free_abort_keeps_object);
    tcase_add_test(heap, test_free_bad_objects);
    tcase_add_test(heap, test_pool_full);
    tcase_add_test(heap, test_failed_alloc_commits_nothing);
    tcase_add_test(heap, test_free_on_full_pool);
    tcase_add_test(misc, test_engine_name);
    tcase_add_test(misc, test_strerror);
    tcase_add_test(misc, test_stats_count_commits_aborts);
    return s;
}

int main(void)
{
    printf("engine %s, pdom %d, flush %s, pools in %s\n", txn_engine_name(),
           txn_pdom(), txn_flush_name(), test_pool_dir());
    return test_run(conformance_suite(), CK_FORK_GETENV, "conf");
}
