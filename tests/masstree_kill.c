/* masstree_kill.c - SIGKILL a process in the middle of its Masstree
 * operations, then check that the reopened tree is the tree after exactly
 * some prefix of the operations: no acknowledged one lost, none seen in
 * part, none after the prefix seen at all.
 *
 * The operations form one deterministic sequence: operation i puts key
 * j(i) with value 16 (i + 1) (unique: a later put is recognised), or one
 * time in four removes it. Keys are 8-byte ones and 20-byte ones that
 * share their first slice thirty at a time (layers, whose roots split).
 * A child opens the pool and the tree and runs the sequence from where the
 * previous round's tree stands, writing to a pipe how many operations are
 * durable: on the engines durable at commit after each operation; on
 * incll after every SYNC_EVERY operations and a txn_sync (its epochs also
 * end on their own). The parent kills it at a random moment (sometimes
 * while it still opens the pool: a crash during recovery), reopens, reads
 * every key and scans the tree in order, and finds the prefix: at least
 * the acknowledged count, at most the operations that could have started.
 * KILL_ROUNDS (default 16) rounds on one pool; KILL_SEED fixes the kills. */
#define _GNU_SOURCE
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acks.h"
#include "common.h"
#include "masstree.h"
#include "txn.h"

#define LAYOUT "pmtx-masstree-kill"
#define KEYS 3000
#define SYNC_EVERY 16

#ifdef MT_INCLL
enum { AHEAD = SYNC_EVERY }; /* what a kill can find done, unacknowledged */
#else
enum { AHEAD = 1 };
#endif

static char g_name[TEST_NAME_LEN]; /* named after main's process: main removes it */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t key_of(unsigned j, uint8_t k[20])
{
    uint64_t a, b = __builtin_bswap64(j);
    if (j % 4 != 3) {
        a = __builtin_bswap64((uint64_t)j * 2654435761u % 4294967291u);
        memcpy(k, &a, 8);
        return 8;
    }
    a = __builtin_bswap64(1000 + j / 120); /* 30 keys a layer */
    memcpy(k, &a, 8);
    memcpy(k + 8, &b, 8);
    memcpy(k + 16, "tail", 4);
    return 20;
}

/* Operation i: its key, and its value (0: a remove). */
static unsigned op_key(uint64_t i)
{
    return (unsigned)(mix(i) % KEYS);
}

static uint64_t op_val(uint64_t i)
{
    return (mix(i) >> 40) % 4 == 0 ? 0 : 16 * (i + 1);
}

/* ---- the child */

enum { CHILD_OPEN_FAILED = 10, CHILD_OP_FAILED, CHILD_PIPE_FAILED };

static void child(uint64_t base, int fd)
{
    txn_pool *p;
    mt_tree *t;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (txn_pool_open(g_name, LAYOUT, &p))
        _exit(CHILD_OPEN_FAILED);
    mt_opts o = {.pool = p, .batch = 8}; /* incll: puts share transactions */
    if (mt_open(&o, &t))
        _exit(CHILD_OPEN_FAILED);
    for (uint64_t i = base;; i++) {
        uint8_t k[20];
        size_t len = key_of(op_key(i), k);
        uint64_t v = op_val(i);
        if ((v ? mt_put(t, k, len, v) : mt_remove(t, k, len)) < 0)
            _exit(CHILD_OP_FAILED);
        uint64_t done = i + 1;
#ifdef MT_INCLL
        if (done % SYNC_EVERY)
            continue;
        if (mt_flush(t) || txn_sync(p))
            _exit(CHILD_OP_FAILED);
#endif
        if (write(fd, &done, sizeof done) != (ssize_t)sizeof done)
            _exit(CHILD_PIPE_FAILED);
    }
}

/* ---- the parent */

struct seen {
    uint8_t prev[20];
    size_t prev_len, n;
    int disorder;
};

static int in_order(const void *key, size_t len, uint64_t val, void *arg)
{
    struct seen *s = arg;
    (void)val;
    size_t m = len < s->prev_len ? len : s->prev_len;
    int c = memcmp(s->prev, key, m);
    if (s->n && (c > 0 || (c == 0 && s->prev_len >= len)))
        s->disorder = 1;
    memcpy(s->prev, key, len);
    s->prev_len = len;
    s->n++;
    return 0;
}

/* The recovered tree: every key's value (0: absent) into r. */
static void read_tree(uint64_t *r)
{
    txn_pool *p;
    mt_tree *t;
    int rc = txn_pool_open(g_name, LAYOUT, &p);
    ck_assert_msg(rc == 0, "pool open after the kill: %s", txn_strerror(rc));
    mt_opts o = {.pool = p};
    rc = mt_open(&o, &t);
    ck_assert_msg(rc == 0, "mt_open after the kill: %s", txn_strerror(rc));
    size_t present = 0;
    for (unsigned j = 0; j < KEYS; j++) {
        uint8_t k[20];
        size_t len = key_of(j, k);
        rc = mt_get(t, k, len, &r[j]);
        ck_assert_msg(rc == 0 || rc == 1, "get: %s", txn_strerror(rc));
        if (rc == 1)
            r[j] = 0;
        present += rc == 0;
    }
    struct seen s = {0};
    ck_assert_int_eq(mt_scan(t, NULL, 0, (size_t)-1, in_order, &s), (long)present);
    ck_assert_msg(!s.disorder, "the scan is out of order");
    mt_close(t);
    txn_pool_close(p);
}

/* Read the child's counts for `us` microseconds (it never waits on a full
 * pipe), then kill it and read the rest (acks.h). `first`: the timer starts
 * at the child's first count (up to 30 s), for the last round of a test
 * whose kills all came before an operation, as a loaded machine's slow
 * pool open can make them. */
static void kill_child(pid_t pid, int fd, uint64_t us, uint64_t *acked, int first)
{
    struct acks a = {.last = *acked, .rises = 1}; /* incll: a count per sync */
    if (first)
        acks_wait_first(fd, &a, 30000000000u);
    int st = acks_kill_child(fd, pid, &a, us * 1000);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                  "the child stopped by itself (exit %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    *acked = a.last;
}

START_TEST(kill_rounds)
{
    uint64_t rounds = env_u64("KILL_ROUNDS", 16), seed = env_u64("KILL_SEED", (uint64_t)time(NULL));
    txn_pool *p;
    mt_tree *t;
    txn_pool_opts po = {.size = (size_t)64 << 20, .threads = 4};
    ck_assert_int_eq(txn_pool_create(g_name, LAYOUT, &po, &p), 0);
    mt_opts o = {.pool = p};
    ck_assert_int_eq(mt_create(&o, &t), 0);
    mt_close(t);
    ck_assert_int_eq(txn_sync(p), 0);
    txn_pool_close(p);
    static uint64_t s[KEYS], r[KEYS]; /* the reference after `base` operations; the tree */
    uint64_t base = 0, total = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            child(base, fds[1]);
        }
        close(fds[1]);
        /* from 0 to 50 ms: the first milliseconds open the pool */
        uint64_t acked = base;
        kill_child(pid, fds[0], mix(seed * 131 + round) % 50000, &acked,
                   round == rounds - 1 && total == 0);
        read_tree(r);
        uint64_t i = base;
        for (; i < acked; i++) /* acknowledged: must all be there */
            s[op_key(i)] = op_val(i);
        size_t diff = 0;
        for (unsigned j = 0; j < KEYS; j++)
            diff += r[j] != s[j];
        for (; diff && i < acked + AHEAD; i++) { /* done but not acknowledged */
            unsigned j = op_key(i);
            diff -= r[j] != s[j];
            s[j] = op_val(i);
            diff += r[j] != s[j];
        }
        ck_assert_msg(diff == 0,
                      "round %llu (seed %llu): the tree is no prefix of the operations from %llu "
                      "(acknowledged %llu): %zu keys differ",
                      (unsigned long long)round, (unsigned long long)seed,
                      (unsigned long long)base, (unsigned long long)acked, diff);
        total += i - base;
        base = i;
    }
    ck_assert_msg(total > 0, "no operation in %llu rounds", (unsigned long long)rounds);
    fprintf(stderr, "masstree-kill %s: %llu rounds, %llu operations found done (seed %llu)\n",
            txn_engine_name(), (unsigned long long)rounds, (unsigned long long)total,
            (unsigned long long)seed);
}
END_TEST

int main(void)
{
    if (test_pool_name("masstree-kill", g_name, sizeof g_name))
        return 1;
    Suite *s = suite_create("masstree-kill");
    tcase_add_test(test_tcase(s, "kill", 600), kill_rounds);
    return test_run(s, CK_FORK_GETENV, "masstree-kill"); /* passed or not */
}
