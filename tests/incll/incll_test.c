/* incll_test.c - unit tests of the InCLL primitives (incll.h) on the test
 * leaf (leaf.h): word packing, the fallbacks to the external log (InCLL
 * taken, 16-bit epoch wrap, a remove and an insert in one epoch), lazy
 * recovery after a crash (a child process that dies in its epoch), the
 * failed-epoch queries, and which of two records of one address recovery
 * keeps. Built with the runtime compiled in, so that it can set the
 * durable epoch words of a closed pool and write a log of its own. */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common.h" /* tests/common.h, not txn/'s */
#include "alloc.h"
#include "incll_int.h"
#include "leaf.h"
#include "log.h"
#include "persist.h"
#include "pool.h"
#include "format.h"
#include "txn.h"

#define LAYOUT "incll-prim"
#define W_EPOCH 0 /* incll.c: pool_hdr.eng_words */
#define W_NFAILED 1
#define W_FAILED 2

static char g_name[TEST_NAME_LEN];
static txn_pool *g_p;

static void setup(void)
{
    ck_assert_int_eq(test_pool_name("incll-prim", g_name, sizeof g_name), 0);
    txn_pool_opts o = {.size = 8u << 20, .root_size = 64, .threads = 4};
    ck_assert_int_eq(txn_pool_create(g_name, LAYOUT, &o, &g_p), 0);
}

static void teardown(void)
{
    if (g_p)
        txn_pool_close(g_p);
    g_p = NULL;
    test_pool_remove(g_name);
}

static void reopen(void)
{
    txn_pool_close(g_p);
    ck_assert_int_eq(txn_pool_open(g_name, LAYOUT, &g_p), 0);
}

static txn *begin(void)
{
    txn *tx;
    ck_assert_int_eq(txn_begin(g_p, &tx), 0);
    return tx;
}

static void commit_sync(txn *tx)
{
    ck_assert_int_eq(txn_commit(tx), 0);
    ck_assert_int_eq(txn_sync(g_p), 0);
}

/* The root holds leaf handles. */
static txn_obj *leaf_at(txn *tx, int i)
{
    txn_obj *o = NULL;
    ck_assert_int_eq(txn_read(tx, txn_root(g_p), 8 * (size_t)i, &o, sizeof o), 0);
    ck_assert_ptr_nonnull(o);
    return o;
}

/* Leaf i of the root with keys 1..k, value of key x = 16 * x (durable). */
static void make_leaf(int i, int k)
{
    txn *tx = begin();
    txn_obj *o;
    ck_assert_int_eq(tleaf_new(tx, &o), 0);
    ck_assert_int_eq(txn_write(tx, txn_root(g_p), 8 * (size_t)i, &o, sizeof o), 0);
    for (int x = 1; x <= k; x++)
        ck_assert_int_eq(tleaf_insert(tx, o, (uint64_t)x, 16u * (uint64_t)x), 0);
    commit_sync(tx);
}

static struct leaf *node(txn *tx, txn_obj *o)
{
    struct leaf *n;
    ck_assert_int_eq(tleaf_open(tx, o, &n), 0);
    return n;
}

static uint64_t value_of(const struct leaf *n, uint64_t key)
{
    int s = tleaf_find(n, key);
    ck_assert_int_ge(s, 0);
    return n->vals[s];
}

static int logged(const struct leaf *n)
{
    return (n->p.epoch & INCLL_LOGGED) != 0;
}

START_TEST(test_pack)
{
    uint64_t ptr = 0x00007f12345678a0ull, e = 0x123456789ull;
    incll_val w = incll_val_pack(9, ptr, e);
    ck_assert_uint_eq(incll_val_slot(w), 9);
    ck_assert_uint_eq(incll_val_old(w), ptr);
    ck_assert_uint_eq(w >> 48, e & 0xffff);
    ck_assert_uint_eq(incll_val_epoch(w, e), e);
    ck_assert_uint_eq(incll_val_epoch(w, (e & ~0xffffull) + 3), e); /* same high bits */
    ck_assert_uint_ne(incll_val_epoch(w, e + 0x10000), e);
    ck_assert_uint_eq(incll_val_slot(incll_val_pack(INCLL_NONE, 0, e)), INCLL_NONE);
    ck_assert(incll_val_fits(ptr));
    ck_assert(!incll_val_fits(ptr | 8));        /* not 16-byte aligned */
    ck_assert(!incll_val_fits(1ull << 48 | 16)); /* above 48 bits */
    ck_assert_uint_eq(incll_val_old(incll_val_pack(0, ptr | 0xffff000000000007ull, 0)), ptr);
}
END_TEST

START_TEST(test_layout)
{
    ck_assert_int_eq(incll_layout_check(&leaf_layout), 0);
    incll_layout l = leaf_layout;
    l.group_off[1] = offsetof(struct leaf, pad); /* vals[7..13] without one */
    ck_assert_int_eq(incll_layout_check(&l), TXN_E_INVAL);
    l = leaf_layout;
    l.perm_off = offsetof(struct leaf, keys[3]); /* would straddle lines 0-1 */
    ck_assert_int_eq(incll_layout_check(&l), TXN_E_INVAL);
    l = leaf_layout;
    l.ngroups = 1;
    ck_assert_int_eq(incll_layout_check(&l), TXN_E_INVAL);
}
END_TEST

/* The paper's update: one value per line per epoch in the InCLL, more in
 * the log. */
START_TEST(test_update_incll)
{
    make_leaf(0, 10);
    txn *tx = begin();
    txn_obj *o = leaf_at(tx, 0);
    struct leaf *n = node(tx, o);
    txn_stats s0, s1, s2;
    txn_stats_reset();
    txn_stats_get(&s0);
    ck_assert_int_eq(tleaf_update(tx, o, 2, 0x1000), 0); /* slot 1: incll1 */
    ck_assert_int_eq(tleaf_update(tx, o, 9, 0x2000), 0); /* slot 8: incll2 */
    ck_assert_int_eq(tleaf_update(tx, o, 2, 0x3000), 0); /* slot 1 again */
    txn_stats_get(&s1);
    uint64_t e = incll__epoch(tx);
    ck_assert_uint_eq(incll_node_epoch(&n->p), e);
    ck_assert(!logged(n));
    ck_assert_uint_eq(s1.barriers - s0.barriers, 1); /* the epoch marker */
    ck_assert_uint_eq(n->incll1, incll_val_pack(1, 32, e));
    ck_assert_uint_eq(n->incll2, incll_val_pack(8, 144, e));
    ck_assert_uint_eq(n->p.saved, n->p.perm);
    ck_assert_uint_eq(value_of(n, 2), 0x3000);
    ck_assert_uint_eq(value_of(n, 9), 0x2000);
    /* slot 3 shares incll1's line: the InCLL is taken, the node is logged */
    ck_assert_int_eq(tleaf_update(tx, o, 4, 0x4000), 0);
    txn_stats_get(&s2);
    ck_assert(logged(n));
    ck_assert_uint_eq(s2.barriers - s1.barriers, 1);
    ck_assert_uint_ge(s2.log_bytes - s1.log_bytes, sizeof(struct leaf));
    ck_assert_uint_eq(n->incll1, incll_val_pack(1, 32, e)); /* unchanged */
    ck_assert_int_eq(tleaf_update(tx, o, 5, 0x5000), 0);    /* logged: free */
    txn_stats_get(&s1);
    ck_assert_uint_eq(s1.barriers, s2.barriers);
    ck_assert_uint_eq(s1.log_bytes, s2.log_bytes);
    commit_sync(tx);
    /* a new epoch: the InCLLs are free again, the old value of slot 1 is
     * 0x3000 */
    tx = begin();
    n = node(tx, o);
    ck_assert_int_eq(tleaf_update(tx, o, 2, 0x6000), 0);
    ck_assert(!logged(n));
    ck_assert_uint_eq(n->incll1, incll_val_pack(1, 0x3000, incll__epoch(tx)));
    /* the other line was not written: its InCLL, of the last epoch, is
     * free in this one (N2, N5) */
    ck_assert_uint_eq(n->incll2, incll_val_pack(8, 144, e));
    /* an old value that is no 16-byte aligned pointer cannot be saved */
    ck_assert_int_eq(tleaf_update(tx, o, 10, 0x7001), 0);
    ck_assert(!logged(n));
    ck_assert_uint_eq(n->incll2, incll_val_pack(9, 160, incll__epoch(tx)));
    commit_sync(tx);
    tx = begin();
    n = node(tx, o);
    ck_assert_int_eq(tleaf_update(tx, o, 10, 0x8000), 0);
    ck_assert(logged(n));
    commit_sync(tx);
}
END_TEST

/* Inserts and removes use the permutation InCLL alone, except an insert
 * after a remove in one epoch. */
START_TEST(test_remove_insert)
{
    make_leaf(0, 6);
    txn *tx = begin();
    txn_obj *o = leaf_at(tx, 0);
    struct leaf *n = node(tx, o);
    uint64_t before = n->p.perm;
    ck_assert_int_eq(tleaf_insert(tx, o, 100, 1600), 0);
    ck_assert_int_eq(tleaf_insert(tx, o, 101, 1616), 0);
    ck_assert_int_eq(tleaf_remove(tx, o, 100), 0);
    ck_assert(!logged(n));
    ck_assert_uint_eq(n->p.saved, before);
    ck_assert(!(n->p.epoch & INCLL_INS_OK));
    ck_assert_int_eq(tleaf_remove(tx, o, 3), 0); /* removes never log */
    ck_assert(!logged(n));
    ck_assert_int_eq(tleaf_insert(tx, o, 102, 1632), 0); /* would reuse slot 2 */
    ck_assert(logged(n));
    ck_assert_uint_eq(n->p.saved, before);
    ck_assert_int_eq(tleaf_find(n, 102), 2);
    ck_assert_int_eq(tleaf_insert(tx, o, 102, 1632), TXN_E_INVAL);
    ck_assert_int_eq(tleaf_remove(tx, o, 100), TXN_E_INVAL);
    commit_sync(tx);
    tx = begin(); /* next epoch: inserts are free again */
    n = node(tx, o);
    ck_assert_int_eq(tleaf_insert(tx, o, 103, 1648), 0);
    ck_assert(!logged(n));
    ck_assert(n->p.epoch & INCLL_INS_OK);
    for (uint64_t k = 200; n->p.perm != (1u << LEAF_WIDTH) - 1; k++)
        ck_assert_int_eq(tleaf_insert(tx, o, k, 16 * k), 0);
    ck_assert_int_eq(tleaf_insert(tx, o, 999, 16), TXN_E_NOSPACE);
    commit_sync(tx);
}
END_TEST

/* incll_stats counts what each primitive did: known operations on one
 * leaf over two epochs. */
START_TEST(test_stats)
{
    make_leaf(0, 6); /* keys 1..6 in slots 0..5 */
    incll_stats a, b;
    incll_stats_reset();
    txn *tx = begin();
    txn_obj *o = leaf_at(tx, 0);
    ck_assert_int_eq(tleaf_update(tx, o, 1, 0x100), 0);   /* incll1 takes slot 0 */
    ck_assert_int_eq(tleaf_update(tx, o, 1, 0x110), 0);   /* holds slot 0 */
    ck_assert_int_eq(tleaf_insert(tx, o, 50, 0x500), 0);  /* perm InCLL */
    ck_assert_int_eq(tleaf_insert(tx, o, 51, 0x510), 0);
    ck_assert_int_eq(tleaf_remove(tx, o, 50), 0);         /* perm InCLL, INS_OK off */
    incll_stats_get(&a);
    ck_assert_uint_eq(a.hit_update, 2);
    ck_assert_uint_eq(a.hit_insert, 2);
    ck_assert_uint_eq(a.hit_remove, 1);
    ck_assert_uint_eq(a.log_overflow + a.log_explicit + a.in_logged, 0);
    ck_assert_int_eq(tleaf_update(tx, o, 2, 0x120), 0);   /* incll1 holds slot 0: log */
    ck_assert_int_eq(tleaf_update(tx, o, 3, 0x130), 0);   /* in the log already */
    ck_assert_int_eq(tleaf_insert(tx, o, 52, 0x520), 0);  /* in the log already */
    incll_stats_get(&b);
    ck_assert_uint_eq(b.log_overflow, 1);
    ck_assert_uint_eq(b.in_logged, 2);
    ck_assert_uint_eq(b.hit_update, 2);
    ck_assert_uint_eq(b.epochs, 0);
    commit_sync(tx); /* one epoch ends */
    tx = begin();
    ck_assert_int_eq(tleaf_remove(tx, o, 51), 0);
    ck_assert_int_eq(tleaf_insert(tx, o, 53, 0x530), 0);  /* after a remove: N4, log */
    ck_assert_int_eq(incll_log(tx, o, &leaf_layout), 0);  /* logged already: nothing */
    commit_sync(tx);
    tx = begin();
    ck_assert_int_eq(incll_log(tx, o, &leaf_layout), 0);  /* a structure change */
    commit_sync(tx);
    incll_stats_get(&b);
    ck_assert_uint_eq(b.hit_remove, 2);
    ck_assert_uint_eq(b.log_overflow, 2);
    ck_assert_uint_eq(b.log_explicit, 1);
    ck_assert_uint_eq(b.epochs, 3);
    incll_stats_reset();
    incll_stats_get(&a);
    ck_assert_uint_eq(a.hit_update + a.hit_insert + a.hit_remove + a.log_overflow + a.epochs, 0);
}
END_TEST

/* incll_update_try: what incll_update absorbs it does; where incll_update
 * would log the node it changes nothing and answers INCLL_MOVE (the
 * structure picks a slot free since the start of the epoch, or calls
 * incll_update); incll_move_begin takes INS_OK away (an insert into the
 * first free slot, which may be the moved one, logs). */
START_TEST(test_update_move)
{
    make_leaf(0, 10); /* keys 1..10 in slots 0..9, value of x = 16 * x */
    incll_stats st;
    incll_stats_reset();
    txn *tx = begin();
    txn_obj *o = leaf_at(tx, 0);
    struct leaf *n = node(tx, o);
    ck_assert_int_eq(incll_update_try(tx, o, &leaf_layout, 1, 0x1000), 0); /* incll1: slot 1 */
    ck_assert_uint_eq(value_of(n, 2), 0x1000);
    /* slot 3 shares incll1's line: a move, nothing written */
    ck_assert_int_eq(incll_update_try(tx, o, &leaf_layout, 3, 0x2000), INCLL_MOVE);
    ck_assert_uint_eq(value_of(n, 4), 64);
    ck_assert(!logged(n));
    ck_assert(n->p.epoch & INCLL_INS_OK);
    ck_assert_int_eq(incll_move_begin(tx, o, &leaf_layout), 0);
    ck_assert(!(n->p.epoch & INCLL_INS_OK));
    ck_assert_int_eq(incll_move_begin(tx, o, &leaf_layout), 0); /* another move */
    /* slot 4 of the same line: a move again; or incll_update, which logs */
    ck_assert_int_eq(incll_update_try(tx, o, &leaf_layout, 4, 0x3000), INCLL_MOVE);
    ck_assert_uint_eq(value_of(n, 5), 80);
    ck_assert_int_eq(incll_update(tx, o, &leaf_layout, 4, 0x3000), 0);
    ck_assert(logged(n));
    ck_assert_uint_eq(value_of(n, 5), 0x3000);
    /* logged: everything is free, nothing to move */
    ck_assert_int_eq(incll_update_try(tx, o, &leaf_layout, 5, 0x4000), 0);
    ck_assert_uint_eq(value_of(n, 6), 0x4000);
    ck_assert_int_eq(incll_move_begin(tx, o, &leaf_layout), TXN_E_STATE);
    incll_stats_get(&st);
    ck_assert_uint_eq(st.hit_move, 2);
    ck_assert_uint_eq(st.log_overflow, 1);
    ck_assert_uint_eq(st.in_logged, 1);
    commit_sync(tx);
    /* an old value no InCLL can save: a move too */
    tx = begin();
    ck_assert_int_eq(tleaf_update(tx, o, 7, 0x7001), 0); /* incll1 free: saves 112 */
    commit_sync(tx);
    tx = begin();
    n = node(tx, o);
    ck_assert_int_eq(incll_update_try(tx, o, &leaf_layout, 6, 0x8000), INCLL_MOVE);
    ck_assert_uint_eq(value_of(n, 7), 0x7001);
    ck_assert(!logged(n));
    commit_sync(tx);
}
END_TEST

/* A grace that says no until told: freed blocks wait for it. */
static int g_open;
static uint64_t grace_now(void *arg)
{
    return ++*(uint64_t *)arg;
}
static int grace_passed(void *arg, uint64_t token)
{
    (void)arg, (void)token;
    return g_open;
}

/* Whether one of n allocations of 200 bytes (aborted) gets block a. */
static int allocates(txn_obj *a, int n)
{
    txn *tx = begin();
    txn_obj *c;
    int seen = 0;
    for (int i = 0; i < n && !seen; i++) {
        ck_assert_int_eq(txn_alloc(tx, 200, &c), 0);
        seen = c == a;
    }
    txn_abort(tx);
    return seen;
}

/* A block freed under a grace returns to the allocator only once the
 * grace has passed (the allocator hands it out again then). */
START_TEST(test_grace)
{
    uint64_t calls = 0;
    txn_obj *a, *b;
    incll_grace g = {grace_now, grace_passed, &calls};
    incll_set_grace(&g);
    g_open = 0;
    txn *tx = begin();
    ck_assert_int_eq(txn_alloc(tx, 200, &a), 0);
    commit_sync(tx);
    tx = begin();
    ck_assert_int_eq(txn_free(tx, a), 0);
    commit_sync(tx); /* its epoch ended: a is free, waiting */
    ck_assert_uint_ge(calls, 1); /* the grace was asked */
    for (int i = 0; i < 3; i++) { /* epochs end; the grace holds a back */
        ck_assert(!allocates(a, 300));
        tx = begin();
        ck_assert_int_eq(txn_alloc(tx, 200, &b), 0);
        commit_sync(tx);
    }
    g_open = 1;
    tx = begin(); /* an epoch with work ends: the waiting blocks return */
    ck_assert_int_eq(txn_alloc(tx, 200, &b), 0);
    commit_sync(tx);
    ck_assert(allocates(a, 300));
    incll_set_grace(NULL);
}
END_TEST

/* A grace whose now() is slow: an epoch end is in it while the test
 * replaces the grace. */
static atomic_int g_in_now;
static uint64_t slow_now(void *arg)
{
    atomic_store(&g_in_now, 1);
    usleep(100 * 1000);
    ++*(uint64_t *)arg;
    atomic_store(&g_in_now, 0);
    return 0;
}

static void *sync_thread(void *arg)
{
    (void)arg;
    txn *tx = begin();
    txn_obj *a;
    ck_assert_int_eq(txn_alloc(tx, 200, &a), 0);
    commit_sync(tx); /* its epoch end calls slow_now */
    return NULL;
}

/* Once incll_set_grace returns, no epoch end calls the grace it replaced:
 * its arg may be freed (here: heap memory the sanitizer watches). */
START_TEST(test_grace_replaced)
{
    uint64_t *calls = calloc(1, sizeof *calls);
    ck_assert_ptr_nonnull(calls);
    incll_grace g = {slow_now, grace_passed, calls};
    incll_set_grace(&g);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, sync_thread, NULL), 0);
    while (!atomic_load(&g_in_now))
        usleep(1000);
    incll_set_grace(NULL);
    int in_now = atomic_load(&g_in_now);
    free(calls);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(!in_now, "incll_set_grace returned while an epoch end ran the old grace");
}
END_TEST

#define CLOSE_TX 2000
/* Threads commit a word each of the root without a sync; one also ends
 * in a transaction (its context is released, and rolled back, as it
 * exits). */
static void *close_worker(void *arg)
{
    uint64_t k = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 1; i <= CLOSE_TX; i++) {
        txn *tx = begin();
        ck_assert_int_eq(txn_write(tx, txn_root(g_p), 8 * k, &i, 8), 0);
        ck_assert_int_eq(txn_commit(tx), 0);
    }
    if (k == 0) {
        txn *tx = begin();
        uint64_t bad = 99;
        ck_assert_int_eq(txn_write(tx, txn_root(g_p), 0, &bad, 8), 0);
    }
    return NULL;
}

/* Closing with 1 ms epochs: the epoch thread is often ending an epoch (or
 * waiting for a pin) when the pool closes; the close joins it, the
 * sanitizer build sees what it might still touch, and every commit is
 * durable at the next open. */
START_TEST(test_close_epoch_in_flight)
{
    setenv("TXN_EPOCH_MS", "1", 1); /* read when the pool's first context comes */
    for (int round = 0; round < 30; round++) {
        txn_abort(begin()); /* this thread's context keeps the epoch thread to the close */
        pthread_t th[3];
        for (uintptr_t k = 0; k < 3; k++)
            ck_assert_int_eq(pthread_create(&th[k], NULL, close_worker, (void *)k), 0);
        for (int k = 0; k < 3; k++)
            ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        reopen();
        txn *tx = begin();
        for (size_t k = 0; k < 3; k++) {
            uint64_t v = 0;
            ck_assert_int_eq(txn_read(tx, txn_root(g_p), 8 * k, &v, 8), 0);
            ck_assert_uint_eq(v, CLOSE_TX);
        }
        txn_abort(tx);
        reopen();
    }
    unsetenv("TXN_EPOCH_MS");
}
END_TEST

/* Set the durable epoch of the closed pool (the next context reads it). */
static void set_epoch_words(uint64_t epoch, uint64_t nfailed, const uint64_t *ring)
{
    txn_pool_close(g_p);
    ck_assert_int_eq(txn_pool_open(g_name, LAYOUT, &g_p), 0);
    uint64_t *w = POOL_FMT(g_p)->hdr->eng_words; /* no context yet: no engine state */
    w[W_EPOCH] = epoch;
    w[W_NFAILED] = nfailed;
    for (int i = 0; ring && i < 6; i++)
        w[W_FAILED + i] = ring[i];
}

/* Epochs 0xfffe..0x10000: the value InCLLs keep 16 bits of the epoch, so
 * the first change after the high bits moved logs the node. */
START_TEST(test_wrap)
{
    set_epoch_words(0xfffe, 0, NULL);
    make_leaf(0, 10); /* epoch 0xfffe, then 0xffff */
    txn *tx = begin();
    ck_assert_uint_eq(incll__epoch(tx), 0xffff);
    txn_obj *o = leaf_at(tx, 0);
    struct leaf *n = node(tx, o);
    ck_assert_int_eq(tleaf_update(tx, o, 1, 0x100), 0);
    ck_assert(!logged(n));
    ck_assert_uint_eq(n->incll1 >> 48, 0xffff);
    commit_sync(tx);
    tx = begin();
    ck_assert_uint_eq(incll__epoch(tx), 0x10000);
    n = node(tx, o);
    txn_stats s0, s1;
    txn_stats_get(&s0);
    ck_assert_int_eq(tleaf_remove(tx, o, 5), 0); /* a remove alone would not log */
    txn_stats_get(&s1);
    ck_assert(logged(n));
    ck_assert_uint_ge(s1.log_bytes - s0.log_bytes, sizeof(struct leaf));
    ck_assert_uint_eq(incll_node_epoch(&n->p), 0x10000);
    ck_assert_uint_eq(n->incll1, incll_val_pack(INCLL_NONE, 0, 0x10000));
    ck_assert_int_eq(tleaf_update(tx, o, 1, 0x200), 0);
    commit_sync(tx);
    tx = begin(); /* 0x10001: back to the InCLLs */
    n = node(tx, o);
    ck_assert_int_eq(tleaf_update(tx, o, 1, 0x300), 0);
    ck_assert(!logged(n));
    ck_assert_uint_eq(n->incll1, incll_val_pack(0, 0x200, 0x10001));
    commit_sync(tx);
}
END_TEST

/* A child changes the leaves in one epoch and dies without ending it
 * (every store reached the file: one of the states a crash may leave). */
static uint64_t crash_child(void (*fn)(txn *tx))
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    txn_pool_close(g_p);
    g_p = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        txn_pool *p;
        txn *tx;
        if (txn_pool_open(g_name, LAYOUT, &p) || txn_begin(p, &tx))
            _exit(2);
        g_p = p;
        uint64_t e = incll__epoch(tx);
        fn(tx);
        if (txn_commit(tx) || write(fd[1], &e, sizeof e) != sizeof e)
            _exit(3);
        _exit(0); /* no txn_sync, no close: the epoch never ends */
    }
    int st;
    uint64_t e = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_int_eq(read(fd[0], &e, sizeof e), sizeof e);
    close(fd[0]);
    close(fd[1]);
    ck_assert_int_eq(txn_pool_open(g_name, LAYOUT, &g_p), 0);
    return e;
}

static void child_changes(txn *tx)
{
    txn_obj *a = leaf_at(tx, 0), *b = leaf_at(tx, 1);
    /* leaf 0: InCLLs only */
    ck_assert_int_eq(tleaf_update(tx, a, 2, 0xa0), 0);
    ck_assert_int_eq(tleaf_update(tx, a, 9, 0xb0), 0);
    ck_assert_int_eq(tleaf_insert(tx, a, 50, 0xc0), 0);
    ck_assert_int_eq(tleaf_remove(tx, a, 4), 0);
    ck_assert(!logged(incll_node(a)));
    /* leaf 1: InCLLs, then the log, then more changes */
    ck_assert_int_eq(tleaf_update(tx, b, 1, 0xd0), 0);
    ck_assert_int_eq(tleaf_remove(tx, b, 3), 0);
    ck_assert_int_eq(tleaf_insert(tx, b, 60, 0xe0), 0);
    ck_assert(logged(incll_node(b)));
    ck_assert_int_eq(tleaf_update(tx, b, 1, 0xf0), 0);
    ck_assert_int_eq(tleaf_update(tx, b, 2, 0x110), 0);
    ck_assert_int_eq(tleaf_remove(tx, b, 5), 0);
}

static void check_keys(txn *tx, txn_obj *o, int k)
{
    struct leaf *n = node(tx, o);
    ck_assert_uint_eq(n->p.perm, (1u << k) - 1);
    for (int x = 1; x <= k; x++)
        ck_assert_uint_eq(value_of(n, (uint64_t)x), 16u * (uint64_t)x);
}

START_TEST(test_lazy_recovery)
{
    make_leaf(0, 10);
    make_leaf(1, 6);
    uint64_t e = crash_child(child_changes);
    txn *tx = begin();
    ck_assert_int_eq(incll__epoch_failed(tx, e), 1);
    ck_assert_int_eq(incll__epoch_failed(tx, e - 1), 0);
    ck_assert_uint_gt(incll__first_epoch(tx), e);
    txn_obj *a = leaf_at(tx, 0), *b = leaf_at(tx, 1);
    struct leaf *na = incll_node(a), *nb = incll_node(b);
    /* before its first access the leaf holds the failed epoch's changes;
     * leaf 1 came back from the log as it was when logged */
    ck_assert_uint_eq(incll_node_epoch(&na->p), e);
    ck_assert_uint_ne(na->p.perm, (1u << 10) - 1);
    ck_assert_uint_eq(na->vals[1], 0xa0);
    ck_assert_uint_eq(incll_node_epoch(&nb->p), e);
    ck_assert_uint_eq(nb->vals[0], 0xd0);
    check_keys(tx, a, 10);
    check_keys(tx, b, 6);
    ck_assert_uint_eq(incll_node_epoch(&na->p), incll__epoch(tx));
    ck_assert_uint_eq(na->incll1, incll_val_pack(INCLL_NONE, 0, incll__epoch(tx)));
    check_keys(tx, a, 10); /* again: nothing changes */
    ck_assert_int_eq(tleaf_update(tx, a, 3, 0x330), 0);
    commit_sync(tx);
    reopen();
    tx = begin();
    a = leaf_at(tx, 0);
    ck_assert_uint_eq(value_of(node(tx, a), 3), 0x330);
    ck_assert_int_eq(tleaf_update(tx, a, 3, 48), 0);
    check_keys(tx, a, 10);
    check_keys(tx, leaf_at(tx, 1), 6);
    commit_sync(tx);
}
END_TEST

/* incll_layout.check: the structure's check of a node at its first
 * access after a restart. */
static int check_calls, check_refuse, check_rolled_back;
static txn_pool *check_pool;

static int refuse_check(txn_pool *p, const void *node)
{
    const struct leaf *n = node;
    check_calls++;
    check_pool = p;
    /* leaf 0 as before child_changes: keys 1..10, value 16 * key */
    check_rolled_back = n->p.perm == (1u << 10) - 1 && n->vals[1] == 0x20 && n->vals[8] == 0x90;
    return check_refuse;
}

/* The check sees the node rolled back (the failed epoch's InCLL changes
 * undone) and its pool; a refusal leaves the node unrecovered (its node
 * epoch the failed one): incll_node_prepare and the change calls answer
 * TXN_E_CORRUPT and change nothing, and each access checks it again; once
 * accepted it is recovered and not checked again in this execution. */
START_TEST(test_check)
{
    make_leaf(0, 10);
    make_leaf(1, 6);
    uint64_t e = crash_child(child_changes);
    incll_layout l = leaf_layout;
    l.check = refuse_check;
    txn *tx = begin();
    txn_obj *a = leaf_at(tx, 0);
    struct leaf *na = incll_node(a);
    check_refuse = 1;
    ck_assert_int_eq(incll_node_prepare(tx, a, &l), TXN_E_CORRUPT);
    ck_assert_int_eq(check_calls, 1);
    ck_assert_ptr_eq(check_pool, g_p);
    ck_assert(check_rolled_back);
    ck_assert_uint_eq(incll_node_epoch(&na->p), e);
    ck_assert_int_eq(incll_update(tx, a, &l, 1, 0x40), TXN_E_CORRUPT);
    ck_assert_int_eq(incll_insert_begin(tx, a, &l), TXN_E_CORRUPT);
    ck_assert_int_eq(incll_log(tx, a, &l), TXN_E_CORRUPT);
    ck_assert_int_eq(check_calls, 4);
    ck_assert(check_rolled_back); /* rolled back again, the same */
    ck_assert_uint_eq(na->vals[1], 0x20);
    ck_assert(!logged(na));
    check_refuse = 0;
    ck_assert_int_eq(incll_node_prepare(tx, a, &l), 0);
    ck_assert_int_eq(check_calls, 5);
    ck_assert_uint_eq(incll_node_epoch(&na->p), incll__epoch(tx));
    ck_assert_int_eq(incll_update(tx, a, &l, 1, 0x40), 0);
    ck_assert_int_eq(check_calls, 5);
    ck_assert_uint_eq(value_of(na, 2), 0x40);
    commit_sync(tx);
    reopen(); /* a clean restart: checked once more, as it is now */
    tx = begin();
    a = leaf_at(tx, 0);
    ck_assert_int_eq(incll_node_prepare(tx, a, &l), 0);
    ck_assert_int_eq(check_calls, 6);
    ck_assert(!check_rolled_back);
    ck_assert_uint_eq(value_of(incll_node(a), 2), 0x40);
    commit_sync(tx);
}
END_TEST

/* incll_update_try_in (incll.h's inline path) with the transaction's
 * epoch: a node not started in the epoch goes to the library (its first
 * touch); then a slot its line's InCLL saved, a free InCLL of the other
 * line and a logged node are done inline, counted as the library counts
 * (incll_stats, txn_stats.bytes_stored); a slot whose InCLL holds another
 * answers INCLL_MOVE with nothing written. */
static void child_inline(txn *tx)
{
    txn_obj *o = leaf_at(tx, 0);
    uint64_t e = incll_epoch(tx);
    ck_assert_int_eq(incll_update_try_in(tx, o, &leaf_layout, 1, 0x1a00, e), 0);
    ck_assert_int_eq(incll_update_try_in(tx, o, &leaf_layout, 1, 0x1b00, e), 0);
    ck_assert_int_eq(incll_update_try_in(tx, o, &leaf_layout, 8, 0x2b00, e), 0);
}

START_TEST(test_update_inline)
{
    make_leaf(0, 10); /* keys 1..10 in slots 0..9, value of x = 16 * x */
    incll_stats st;
    txn_stats s0, s1;
    incll_stats_reset();
    txn *tx = begin();
    txn_obj *o = leaf_at(tx, 0);
    struct leaf *n = node(tx, o);
    uint64_t e = incll_epoch(tx);
    ck_assert_uint_ne(incll_node_epoch(&n->p), e);
    ck_assert_int_eq(incll_update_try_in(tx, o, &leaf_layout, 1, 0x1000, e), 0); /* first touch */
    ck_assert_uint_eq(incll_node_epoch(&n->p), e);
    ck_assert_uint_eq(n->incll1, incll_val_pack(1, 32, e));
    txn_stats_get(&s0);
    ck_assert_int_eq(incll_update_try_in(tx, o, &leaf_layout, 1, 0x1100, e), 0); /* saved */
    txn_stats_get(&s1);
    ck_assert_uint_eq(value_of(n, 2), 0x1100);
    ck_assert_uint_eq(n->incll1, incll_val_pack(1, 32, e)); /* still the epoch's start */
    ck_assert_uint_eq(s1.bytes_stored - s0.bytes_stored, 8);
    ck_assert_int_eq(incll_update_try_in(tx, o, &leaf_layout, 8, 0x2000, e), 0); /* incll2 */
    txn_stats_get(&s0);
    ck_assert_uint_eq(s0.bytes_stored - s1.bytes_stored, 16);
    ck_assert_uint_eq(n->incll2, incll_val_pack(8, 144, e));
    ck_assert_uint_eq(value_of(n, 9), 0x2000);
    ck_assert_int_eq(incll_update_try_in(tx, o, &leaf_layout, 3, 0x3000, e), INCLL_MOVE);
    ck_assert_uint_eq(value_of(n, 4), 64);
    ck_assert_int_eq(incll_update(tx, o, &leaf_layout, 3, 0x3000), 0); /* logs */
    ck_assert(logged(n));
    ck_assert_int_eq(incll_update_try_in(tx, o, &leaf_layout, 5, 0x5000, e), 0);
    ck_assert_uint_eq(value_of(n, 6), 0x5000);
    incll_stats_get(&st);
    ck_assert_uint_eq(st.hit_update, 3);
    ck_assert_uint_eq(st.log_overflow, 1);
    ck_assert_uint_eq(st.in_logged, 1);
    commit_sync(tx);
    /* the inline changes of a failed epoch roll back at the first access */
    uint64_t fe = crash_child(child_inline);
    tx = begin();
    o = leaf_at(tx, 0);
    n = incll_node(o);
    ck_assert_uint_eq(incll_node_epoch(&n->p), fe);
    ck_assert_uint_eq(n->vals[1], 0x1b00);
    ck_assert_uint_eq(n->vals[8], 0x2b00);
    n = node(tx, o);
    ck_assert_uint_eq(value_of(n, 2), 0x1100);
    ck_assert_uint_eq(value_of(n, 9), 0x2000);
    commit_sync(tx);
}
END_TEST

static void child_touch_a(txn *tx)
{
    ck_assert_int_eq(tleaf_update(tx, leaf_at(tx, 0), 1, 0x990), 0);
}

static void child_update_9(txn *tx)
{
    ck_assert_int_eq(tleaf_update(tx, leaf_at(tx, 0), 9, 0x990), 0);
}

/* Value InCLLs are reset lazily (N2, N5): one of an epoch before the
 * node's stays as it was, and recovery looks only at those of the node
 * epoch or later (N7). An older one is of a complete epoch, even when the
 * failure ring no longer tells it: its node is not taken for corrupt,
 * and its old value is not restored after a later crash. */
START_TEST(test_stale_incll)
{
    make_leaf(0, 10);
    txn *tx = begin();
    txn_obj *o = leaf_at(tx, 0);
    ck_assert_int_eq(tleaf_update(tx, o, 2, 0x1000), 0); /* slot 1: incll1 */
    uint64_t e1 = incll__epoch(tx);
    commit_sync(tx);
    set_epoch_words(e1 + 20, 0, NULL);
    tx = begin();
    o = leaf_at(tx, 0);
    struct leaf *n = node(tx, o);
    ck_assert_int_eq(tleaf_update(tx, o, 9, 0x2000), 0); /* slot 8: incll2 */
    uint64_t e2 = incll__epoch(tx);
    ck_assert_uint_eq(n->incll1, incll_val_pack(1, 32, e1)); /* not rewritten */
    ck_assert_uint_eq(n->incll2, incll_val_pack(8, 144, e2));
    commit_sync(tx);
    /* seven failures since e1, six remembered: e1 is older than all */
    uint64_t ring[6];
    for (int i = 0; i < 6; i++)
        ring[i] = e1 + 1 + (uint64_t)i;
    set_epoch_words(e2 + 10, 7, ring);
    tx = begin();
    ck_assert_int_eq(incll__epoch_failed(tx, e1), TXN_E_CORRUPT);
    o = leaf_at(tx, 0);
    ck_assert_int_eq(tleaf_open(tx, o, &n), 0);
    ck_assert_uint_eq(value_of(n, 2), 0x1000);
    ck_assert_uint_eq(n->incll1, incll_val_pack(1, 32, e1));
    txn_abort(tx);
    uint64_t e3 = crash_child(child_update_9);
    tx = begin();
    ck_assert_int_eq(incll__epoch_failed(tx, e3), 1);
    o = leaf_at(tx, 0);
    n = incll_node(o);
    ck_assert_uint_eq(n->vals[8], 0x990); /* before the first access */
    ck_assert_int_eq(tleaf_open(tx, o, &n), 0);
    ck_assert_uint_eq(value_of(n, 9), 0x2000);
    ck_assert_uint_eq(value_of(n, 2), 0x1000);
    ck_assert_uint_eq(n->incll1, incll_val_pack(1, 32, e1));
    for (uint64_t x = 3; x <= 10; x++)
        if (x != 9)
            ck_assert_uint_eq(value_of(n, x), 16 * x);
    commit_sync(tx);
}
END_TEST

/* Two crashes in a row, the second before the first one's leaves were
 * touched: each keeps its failed epoch. */
START_TEST(test_two_crashes)
{
    make_leaf(0, 10);
    make_leaf(1, 6);
    uint64_t e1 = crash_child(child_changes);
    uint64_t e2 = crash_child(child_touch_a); /* recovers leaf 0 in e2 */
    ck_assert_uint_gt(e2, e1);
    txn *tx = begin();
    ck_assert_int_eq(incll__epoch_failed(tx, e1), 1);
    ck_assert_int_eq(incll__epoch_failed(tx, e2), 1);
    check_keys(tx, leaf_at(tx, 0), 10);
    check_keys(tx, leaf_at(tx, 1), 6);
    commit_sync(tx);
}
END_TEST

/* A node older than every failed epoch the engine remembers, with more
 * failures than it remembers: its state cannot be told, and prepare says
 * so instead of guessing. */
/* incll_epoch: the running transaction's epoch, which ends at txn_sync;
 * a block allocated in it takes incll_store()s and incll_store_bytes() in
 * place, durable with the epoch. */
START_TEST(test_epoch)
{
    txn *tx = begin();
    uint64_t e = incll_epoch(tx);
    ck_assert_uint_ge(e, incll_first_epoch(tx));
    txn_obj *o;
    ck_assert_int_eq(txn_alloc(tx, 64, &o), 0);
    ck_assert_int_eq(txn_write(tx, txn_root(g_p), 0, &o, sizeof o), 0);
    uint64_t *w = incll_node(o), more[4];
    for (int i = 0; i < 4; i++)
        incll_store(&w[i], 0x1111u * (uint64_t)(i + 1));
    for (int i = 4; i < 8; i++)
        more[i - 4] = 0x1111u * (uint64_t)(i + 1);
    incll_store_bytes(&w[4], more, sizeof more);
    commit_sync(tx);
    reopen();
    tx = begin();
    ck_assert_uint_gt(incll_epoch(tx), e);
    o = leaf_at(tx, 0);
    for (int i = 0; i < 8; i++) {
        uint64_t v;
        ck_assert_int_eq(txn_read(tx, o, 8 * (size_t)i, &v, sizeof v), 0);
        ck_assert_uint_eq(v, 0x1111u * (uint64_t)(i + 1));
    }
    txn_abort(tx);
}
END_TEST

START_TEST(test_forgotten_epoch)
{
    make_leaf(0, 4);
    uint64_t ring[6] = {100, 110, 120, 130, 140, 150};
    set_epoch_words(200, 7, ring);
    txn *tx = begin();
    txn_obj *o = leaf_at(tx, 0);
    struct leaf *n;
    ck_assert_int_eq(incll__epoch_failed(tx, 120), 1);
    ck_assert_int_eq(incll__epoch_failed(tx, 125), 0);
    ck_assert_int_eq(incll__epoch_failed(tx, 99), TXN_E_CORRUPT);
    ck_assert_int_eq(tleaf_open(tx, o, &n), TXN_E_CORRUPT);
    ck_assert_int_eq(tleaf_update(tx, o, 1, 0x40), TXN_E_CORRUPT);
    ck_assert_uint_eq(((struct leaf *)incll_node(o))->vals[0], 16); /* untouched */
    txn_abort(tx);
}
END_TEST

/* incll_log_object on a plain object (the root's last word): logged once,
 * the write after it logs nothing, and a crash in the epoch brings back
 * the bytes it had when logged, though that write was committed; bad
 * calls fail. */
static void child_log_object(txn *tx)
{
    uint64_t v = 0x5150;
    txn_stats a, b, c;
    txn_stats_reset();
    ck_assert_int_eq(incll_log_object(tx, txn_root(g_p)), 0);
    txn_stats_get(&a);
    ck_assert_uint_gt(a.log_bytes, 0);
    ck_assert_int_eq(incll_log_object(tx, txn_root(g_p)), 0); /* logged already */
    txn_stats_get(&b);
    ck_assert_uint_eq(b.log_bytes, a.log_bytes);
    ck_assert_int_eq(txn_write(tx, txn_root(g_p), 56, &v, 8), 0); /* logs nothing */
    txn_stats_get(&c);
    ck_assert_uint_eq(c.log_bytes, a.log_bytes);
}

START_TEST(test_log_object)
{
    txn *tx = begin();
    uint64_t v = 0x4140;
    ck_assert_int_eq(incll_log_object(NULL, txn_root(g_p)), TXN_E_INVAL);
    ck_assert_int_eq(incll_log_object(tx, NULL), TXN_E_INVAL);
    ck_assert_int_eq(txn_write(tx, txn_root(g_p), 56, &v, 8), 0);
    commit_sync(tx);
    crash_child(child_log_object);
    tx = begin();
    ck_assert_int_eq(txn_read_u64(tx, txn_root(g_p), 56, &v), 0);
    ck_assert_uint_eq(v, 0x4140);
    ck_assert_int_eq(txn_write(tx, txn_root(g_p), (size_t)1 << 30, &v, 8), TXN_E_INVAL);
    ck_assert_int_eq(incll_log_object(tx, txn_root(g_p)), TXN_E_STATE);
    txn_abort(tx);
}
END_TEST

/* Two records of the root's block in the failed epoch's log, the first
 * with its bytes from the epoch's start, the second with later bytes (no
 * path of the engine appends such a pair: R of incll.c is the guard), and
 * the later bytes in place: recovery keeps the first record's. */
static void child_two_records(txn *tx)
{
    txn_obj *root = txn_root(g_p);
    size_t size = alloc_block_size(tx->p, root, 0);
    uint64_t *blk = (uint64_t *)root, later[64];
    ck_assert_uint_le(size, sizeof later);
    memcpy(later, blk, size);
    later[1] = 0xbad;
    struct log l; /* the slot's log, from its start: the engine appended nothing */
    log_attach(&l, tx->p, TX_FMT(tx)->slot);
    uint64_t e = incll__epoch(tx);
    ck_assert_int_eq(log_append(&l, e, LOG_DATA, (uint64_t)(uintptr_t)blk, 0, blk,
                                (uint32_t)size, NULL), 0);
    ck_assert_int_eq(log_append(&l, e, LOG_DATA, (uint64_t)(uintptr_t)blk, 0, later,
                                (uint32_t)size, NULL), 0);
    log_flush(&l);
    pm_barrier();
    pm_memcpy(blk, later, size);
}

START_TEST(test_first_record_wins)
{
    txn *tx = begin();
    uint64_t v = 0x600d;
    ck_assert_int_eq(txn_write(tx, txn_root(g_p), 0, &v, 8), 0);
    commit_sync(tx);
    crash_child(child_two_records);
    tx = begin();
    ck_assert_int_eq(txn_read_u64(tx, txn_root(g_p), 0, &v), 0);
    ck_assert_uint_eq(v, 0x600d);
    txn_abort(tx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("incll-prim");
    TCase *tc = test_tcase(s, "prim", 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_pack);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_update_incll);
    tcase_add_test(tc, test_remove_insert);
    tcase_add_test(tc, test_stats);
    tcase_add_test(tc, test_update_move);
    tcase_add_test(tc, test_update_inline);
    tcase_add_test(tc, test_grace);
    tcase_add_test(tc, test_grace_replaced);
    tcase_add_test(tc, test_close_epoch_in_flight);
    tcase_add_test(tc, test_wrap);
    tcase_add_test(tc, test_lazy_recovery);
    tcase_add_test(tc, test_check);
    tcase_add_test(tc, test_two_crashes);
    tcase_add_test(tc, test_stale_incll);
    tcase_add_test(tc, test_forgotten_epoch);
    tcase_add_test(tc, test_epoch);
    tcase_add_test(tc, test_log_object);
    tcase_add_test(tc, test_first_record_wins);
    return s;
}

int main(void)
{
    return test_run(suite(), CK_FORK_GETENV, "incll-prim");
}
