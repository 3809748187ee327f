/* grow_kill.c - SIGKILL while a pool grows (issue #42, item 1): each round
 * a new pool of START bytes that may grow to MAX; a child appends objects
 * of 1 KiB to 256 KiB to a list, one a transaction, each holding its
 * number in its first and last words, and acknowledges each number once
 * committed and synced; the parent kills it after 1 to 120 ms, as the
 * pool is growing (its fallocate of the new part takes most of a growth:
 * the kills land in it, before and after its commit). The pool then opens,
 * passes txn_pool_inspect, and holds exactly the acknowledged objects
 * (plus at most the one in flight), each whole; and it grows again.
 * GROW_KILL_ROUNDS (default 10) rounds; KILL_SEED fixes the sleeps.
 * scripts/grow_kill.sh runs 200 a engine. */
#define _GNU_SOURCE
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "acks.h"
#include "common.h"
#include "txn.h"

#define LAYOUT "pmtx-grow-kill"
#define START ((size_t)8 << 20)
#define MAX ((size_t)256 << 20)

/* root: {count, head}; an object: {next, n, ..., n} */
enum { R_COUNT = 0, R_HEAD = 8, ROOT_SIZE = 16, O_NEXT = 0, O_N = 8 };

static size_t size_of(uint64_t n)
{
    return 1024 + (size_t)(n * 0x9e3779b97f4a7c15ull >> 46); /* 1 KiB to 257 KiB */
}

/* Append object n+1; *acked = n+1 once committed. */
static int append(txn_pool *p, uint64_t *acked)
{
    txn *tx;
    txn_obj *root = txn_root(p), *head, *o;
    uint64_t n;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    if ((rc = txn_read_u64(tx, root, R_COUNT, &n)) ||
        (rc = txn_read(tx, root, R_HEAD, &head, sizeof head)))
        goto fail;
    size_t size = size_of(n + 1);
    if ((rc = txn_alloc(tx, size, &o)) || (rc = txn_write(tx, o, O_NEXT, &head, sizeof head)) ||
        (rc = txn_write_u64(tx, o, O_N, n + 1)) ||
        (rc = txn_write_u64(tx, o, size / 8 * 8 - 8, n + 1)) ||
        (rc = txn_write_u64(tx, root, R_COUNT, n + 1)) ||
        (rc = txn_write(tx, root, R_HEAD, &o, sizeof o)))
        goto fail;
    if (!(rc = txn_commit(tx)))
        *acked = n + 1;
    return rc;
fail:
    txn_abort(tx);
    return rc;
}

static void child_main(const char *name, int ack_fd)
{
    txn_pool *p;
    if (txn_pool_open(name, LAYOUT, &p))
        _exit(10);
    for (;;) {
        uint64_t v;
        int rc = append(p, &v);
        if (rc == TXN_E_NOSPACE)
            pause(); /* at its maximum: wait for the kill */
        if (rc || txn_sync(p))
            _exit(11);
        if (write(ack_fd, &v, sizeof v) != (ssize_t)sizeof v)
            _exit(12);
    }
}

/* The list: count objects, count down to 1, each whole. */
static uint64_t check(txn_pool *p, uint64_t round)
{
    txn *tx;
    txn_obj *root = txn_root(p), *o;
    uint64_t count, k = 0;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, root, R_COUNT, &count));
    CHECK_OK(txn_read(tx, root, R_HEAD, &o, sizeof o));
    for (; o; k++) {
        uint64_t want = count - k, a, b;
        size_t size = size_of(want);
        CHECK_OK(txn_read_u64(tx, o, O_N, &a));
        CHECK_OK(txn_read_u64(tx, o, size / 8 * 8 - 8, &b));
        ck_assert_msg(a == want && b == want, "round %llu: object %llu of %llu holds %llu/%llu",
                      (unsigned long long)round, (unsigned long long)k,
                      (unsigned long long)count, (unsigned long long)a, (unsigned long long)b);
        CHECK_OK(txn_read(tx, o, O_NEXT, &o, sizeof o));
    }
    ck_assert_uint_eq(k, count);
    CHECK_OK(txn_commit(tx));
    return count;
}

static void round_once(const char *name, uint64_t round)
{
    txn_pool_opts o = {.size = START, .max_size = MAX, .root_size = ROOT_SIZE, .threads = 4};
    txn_pool *p;
    CHECK_OK(txn_pool_create(name, LAYOUT, &o, &p));
    txn_pool_close(p);
    struct acks a = {0};
    int fds[2], status;
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(fds[0]);
        child_main(name, fds[1]);
    }
    close(fds[1]);
    uint64_t sleep_ns = (1 + (uint64_t)(rand() % 120)) * 1000000u;
    status = acks_kill_child(fds[0], pid, &a, sleep_ns);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "round %llu: child stopped by itself (status 0x%x: exit code 10 open, "
                  "11 transaction, 12 pipe)", (unsigned long long)round, (unsigned)status);
    txn_pool_info in;
    int rc = txn_pool_inspect(name, &in);
    ck_assert_msg(rc == 0 || rc == TXN_INSPECT_RECOVER, "round %llu: inspect: %s (%s)",
                  (unsigned long long)round, txn_strerror(rc), in.problem);
    CHECK_OK(txn_pool_open(name, LAYOUT, &p));
    uint64_t got = check(p, round);
    ck_assert_msg(got == a.last || got == a.last + 1,
                  "round %llu: %llu objects after the kill, %llu acknowledged",
                  (unsigned long long)round, (unsigned long long)got,
                  (unsigned long long)a.last);
    uint64_t v; /* it grows again (or is at its maximum) */
    rc = append(p, &v);
    ck_assert_msg(rc == 0 || rc == TXN_E_NOSPACE, "round %llu: append after: %s",
                  (unsigned long long)round, txn_strerror(rc));
    txn_pool_close(p);
    ck_assert_int_eq(test_pool_remove(name), 0);
    printf("round %llu: %llu objects, pool %llu bytes\n", (unsigned long long)round,
           (unsigned long long)got, (unsigned long long)in.size);
}

START_TEST(test_grow_kill)
{
    char name[TEST_NAME_LEN];
    uint64_t rounds = env_u64("GROW_KILL_ROUNDS", 10);
    uint64_t seed = env_u64("KILL_SEED", (uint64_t)time(NULL) ^ (uint64_t)getpid());
    CHECK_OK(test_pool_name("gkill", name, sizeof name));
    printf("grow_kill: engine %s, %llu rounds, KILL_SEED=%llu\n", txn_engine_name(),
           (unsigned long long)rounds, (unsigned long long)seed);
    srand((unsigned)seed);
    for (uint64_t r = 1; r <= rounds; r++)
        round_once(name, r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("grow_kill");
    TCase *tc = test_tcase(s, "grow", 30.0 + 1.0 * (double)env_u64("GROW_KILL_ROUNDS", 10));
    tcase_add_test(tc, test_grow_kill);
    return test_run(s, CK_FORK_GETENV, "gkill");
}
