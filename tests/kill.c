/* kill.c - SIGKILL a process in the middle of its transactions, then check
 * that recovery leaves exactly the acknowledged commits (plus at most the
 * one in flight) and that no transaction is visible in part.
 *
 * Built only for engines that are durable at commit. The pool's root holds
 * an invariant that every transaction keeps:
 *   - `committed`, SLOTS u64 in the root and AUX u64 in another object all
 *     hold the same value, which each transaction increments;
 *   - `list_len` is the length of the singly linked list at `list_head`,
 *     which transactions grow and shrink with txn_alloc/txn_free; node
 *     values strictly decrease from the head and never exceed `committed`;
 *   - every u64 of a BULK-byte object equals `bulk_value` (<= committed):
 *     one transaction in sixteen rewrites it all, more log than a slot's
 *     first log chunk holds, so the kill also lands in grown logs.
 * A child runs transactions and writes each committed value to a pipe once
 * txn_commit() and txn_sync() have returned (txn_sync is a no-op for engines
 * durable at commit; incll is durable at its epoch's end); the parent kills
 * it at a random moment.
 * KILL_ROUNDS (default 20) rounds run on one pool; KILL_SEED fixes the
 * random sleeps. */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
#include "txn.h"

#define LAYOUT "pmtx-kill"
#define POOL_SIZE ((size_t)16 << 20)

enum {
    SLOTS = 16,
    AUX = 16,
    MAX_LIST = 24,
    /* root layout */
    R_COMMITTED = 0,
    R_SLOTS = 8,
    R_AUX = R_SLOTS + 8 * SLOTS,
    R_LIST_LEN = R_AUX + 8,
    R_LIST_HEAD = R_LIST_LEN + 8,
    R_BULK = R_LIST_HEAD + 8,
    R_BULK_VALUE = R_BULK + 8,
    ROOT_SIZE = R_BULK_VALUE + 8,
    /* node layout */
    N_VALUE = 0,
    N_NEXT = 8,
    NODE_SIZE = 40,
    /* the bulk object, rewritten in PIECE-byte writes */
    BULK = 96 << 10,
    PIECE = 8 << 10,
};

/* ---- the child: transactions until killed */

/* Exit codes of a child that stopped on its own (it never should). */
enum { CHILD_OPEN_FAILED = 10, CHILD_TXN_FAILED, CHILD_PIPE_FAILED };

static int push_node(txn *tx, txn_obj *root, uint64_t value, uint64_t len)
{
    txn_obj *head, *n;
    int rc;
    if ((rc = txn_read(tx, root, R_LIST_HEAD, &head, sizeof head)) ||
        (rc = txn_alloc(tx, NODE_SIZE, &n)) ||
        (rc = txn_write_u64(tx, n, N_VALUE, value)) ||
        (rc = txn_write(tx, n, N_NEXT, &head, sizeof head)) ||
        (rc = txn_write(tx, root, R_LIST_HEAD, &n, sizeof n)))
        return rc;
    return txn_write_u64(tx, root, R_LIST_LEN, len + 1);
}

static int pop_node(txn *tx, txn_obj *root, uint64_t len)
{
    txn_obj *head, *next;
    int rc;
    if ((rc = txn_read(tx, root, R_LIST_HEAD, &head, sizeof head)) ||
        (rc = txn_read(tx, head, N_NEXT, &next, sizeof next)) ||
        (rc = txn_write(tx, root, R_LIST_HEAD, &next, sizeof next)) ||
        (rc = txn_free(tx, head)))
        return rc;
    return txn_write_u64(tx, root, R_LIST_LEN, len - 1);
}

static int rewrite_bulk(txn *tx, txn_obj *root, uint64_t value)
{
    static uint64_t piece[PIECE / 8];
    txn_obj *bulk;
    int rc;
    for (size_t i = 0; i < PIECE / 8; i++)
        piece[i] = value;
    if ((rc = txn_read(tx, root, R_BULK, &bulk, sizeof bulk)))
        return rc;
    for (size_t off = 0; off < BULK; off += PIECE)
        if ((rc = txn_write(tx, bulk, off, piece, PIECE)))
            return rc;
    return txn_write_u64(tx, root, R_BULK_VALUE, value);
}

/* Raises all SLOTS+AUX+1 values to c+1, and sometimes grows or shrinks
 * the list; one in eight transactions is aborted at the end instead.
 * Sets *acked to c+1 when the transaction committed, else to 0. */
static int one_step(txn_pool *p, uint64_t step, uint64_t *acked)
{
    txn_obj *root = txn_root(p), *aux;
    uint64_t c, len, slots[SLOTS];
    txn *tx = NULL;
    int rc = txn_begin(p, &tx);
    *acked = 0;
    if (rc)
        return rc;
    if ((rc = txn_read_u64(tx, root, R_COMMITTED, &c)) ||
        (rc = txn_read_u64(tx, root, R_LIST_LEN, &len)) ||
        (rc = txn_read(tx, root, R_AUX, &aux, sizeof aux)))
        goto fail;
    for (int i = 0; i < SLOTS; i++)
        slots[i] = c + 1;
    if ((rc = txn_write_u64(tx, root, R_COMMITTED, c + 1)) ||
        (rc = txn_write(tx, root, R_SLOTS, slots, sizeof slots)))
        goto fail;
    for (int i = 0; i < AUX; i++)
        if ((rc = txn_write_u64(tx, aux, 8 * (size_t)i, c + 1)))
            goto fail;
    if (len < MAX_LIST && step % 3 == 0)
        rc = push_node(tx, root, c + 1, len);
    else if (len > 0 && (step % 5 == 1 || len == MAX_LIST))
        rc = pop_node(tx, root, len);
    if (rc == 0 && step % 16 == 5)
        rc = rewrite_bulk(tx, root, c + 1);
    if (rc)
        goto fail;
    if (step % 8 == 7) {
        txn_abort(tx);
        return 0;
    }
    if ((rc = txn_commit(tx)) == 0)
        *acked = c + 1;
    return rc;
fail:
    txn_abort(tx);
    return rc;
}

static void child_main(const char *name, int ack_fd)
{
    txn_pool *p = NULL;
    if (txn_pool_open(name, LAYOUT, &p) != 0)
        _exit(CHILD_OPEN_FAILED);
    for (uint64_t step = 0;; step++) {
        uint64_t v;
        if (one_step(p, step, &v) != 0)
            _exit(CHILD_TXN_FAILED);
        if (v != 0 && txn_sync(p) != 0)
            _exit(CHILD_TXN_FAILED);
        if (v != 0 && write(ack_fd, &v, sizeof v) != (ssize_t)sizeof v)
            _exit(CHILD_PIPE_FAILED);
    }
}

/* ---- the parent */

static void check_bulk(txn *tx, txn_obj *root, uint64_t c, uint64_t round)
{
    static uint64_t words[BULK / 8];
    uint64_t value;
    txn_obj *bulk;
    CHECK_OK(txn_read(tx, root, R_BULK, &bulk, sizeof bulk));
    CHECK_OK(txn_read_u64(tx, root, R_BULK_VALUE, &value));
    ck_assert_msg(value <= c, "round %llu: bulk value %llu > committed %llu",
                  (unsigned long long)round, (unsigned long long)value,
                  (unsigned long long)c);
    CHECK_OK(txn_read(tx, bulk, 0, words, BULK));
    for (size_t i = 0; i < BULK / 8; i++)
        ck_assert_msg(words[i] == value,
                      "round %llu: bulk word %zu = %llu, bulk value %llu",
                      (unsigned long long)round, i,
                      (unsigned long long)words[i],
                      (unsigned long long)value);
}

/* Checks the invariant on the recovered pool; returns `committed`. */
static uint64_t check_invariant(txn_pool *p, uint64_t round)
{
    txn_obj *root = txn_root(p), *aux, *n;
    uint64_t c, len, v, count = 0, prev = UINT64_MAX;
    txn *tx = NULL;

    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read_u64(tx, root, R_COMMITTED, &c));
    for (int i = 0; i < SLOTS; i++) {
        CHECK_OK(txn_read_u64(tx, root, R_SLOTS + 8 * (size_t)i, &v));
        ck_assert_msg(v == c, "round %llu: slot %d = %llu, committed = %llu",
                      (unsigned long long)round, i, (unsigned long long)v,
                      (unsigned long long)c);
    }
    CHECK_OK(txn_read(tx, root, R_AUX, &aux, sizeof aux));
    ck_assert_ptr_nonnull(aux);
    for (int i = 0; i < AUX; i++) {
        CHECK_OK(txn_read_u64(tx, aux, 8 * (size_t)i, &v));
        ck_assert_msg(v == c, "round %llu: aux %d = %llu, committed = %llu",
                      (unsigned long long)round, i, (unsigned long long)v,
                      (unsigned long long)c);
    }
    CHECK_OK(txn_read_u64(tx, root, R_LIST_LEN, &len));
    ck_assert_uint_le(len, MAX_LIST);
    CHECK_OK(txn_read(tx, root, R_LIST_HEAD, &n, sizeof n));
    for (; n != NULL; count++) {
        ck_assert_msg(count < len, "round %llu: list longer than %llu",
                      (unsigned long long)round, (unsigned long long)len);
        CHECK_OK(txn_read_u64(tx, n, N_VALUE, &v));
        ck_assert_msg(v < prev && v <= c,
                      "round %llu: node %llu value %llu (previous %llu, "
                      "committed %llu)",
                      (unsigned long long)round, (unsigned long long)count,
                      (unsigned long long)v, (unsigned long long)prev,
                      (unsigned long long)c);
        prev = v;
        CHECK_OK(txn_read(tx, n, N_NEXT, &n, sizeof n));
    }
    check_bulk(tx, root, c, round);
    ck_assert_msg(count == len, "round %llu: list has %llu nodes, root says %llu",
                  (unsigned long long)round, (unsigned long long)count,
                  (unsigned long long)len);
    CHECK_OK(txn_commit(tx));
    return c;
}

static void create_initial_pool(const char *name)
{
    txn_pool_opts o = {0};
    txn_pool *p = NULL;
    txn_obj *aux, *bulk;
    txn *tx = NULL;

    o.size = POOL_SIZE;
    o.root_size = ROOT_SIZE;
    o.threads = 4;
    CHECK_OK(txn_pool_create(name, LAYOUT, &o, &p));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_alloc(tx, 8 * AUX, &aux));
    CHECK_OK(txn_write(tx, txn_root(p), R_AUX, &aux, sizeof aux));
    CHECK_OK(txn_alloc(tx, BULK, &bulk));
    CHECK_OK(txn_write(tx, txn_root(p), R_BULK, &bulk, sizeof bulk));
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(check_invariant(p, 0), 0);
    txn_pool_close(p);
}

/* One round: fork, let the child run for 1..30 ms, kill it, recover.
 * Returns the recovered `committed`. */
static uint64_t kill_round(const char *name, uint64_t round, uint64_t before)
{
    struct acks a = {.last = before};
    uint64_t sleep_ns = (1 + (uint64_t)(rand() % 30)) * 1000000u;
    uint64_t expect, got;
    int fds[2], status;
    txn_pool *p = NULL;
    pid_t pid;

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* a parent that fails an assertion must not leave us running */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(fds[0]);
        child_main(name, fds[1]);
    }
    close(fds[1]);
    status = acks_kill_child(fds[0], pid, &a, sleep_ns);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "round %llu: child stopped by itself (status 0x%x: exit "
                  "code 10 open, 11 transaction, 12 pipe)",
                  (unsigned long long)round, (unsigned)status);
    ck_assert_uint_eq(a.npartial, 0);

    CHECK_OK(txn_pool_open(name, LAYOUT, &p));
    got = check_invariant(p, round);
    expect = a.last;
    ck_assert_msg(got == expect || got == expect + 1,
                  "round %llu: recovered %llu, last acknowledged %llu "
                  "(%llu acks this round, slept %llu us)",
                  (unsigned long long)round, (unsigned long long)got,
                  (unsigned long long)expect, (unsigned long long)a.count,
                  (unsigned long long)(sleep_ns / 1000));
    txn_pool_close(p);
    return got;
}

START_TEST(test_sigkill_rounds)
{
    char name[TEST_NAME_LEN];
    uint64_t rounds = env_u64("KILL_ROUNDS", 20);
    uint64_t seed = env_u64("KILL_SEED", (uint64_t)time(NULL) ^ (uint64_t)getpid());
    uint64_t value = 0, advanced = 0;
    txn_pool *p = NULL;
    txn *tx = NULL;

    CHECK_OK(test_pool_name("kill", name, sizeof name));
    printf("kill: engine %s, %llu rounds, KILL_SEED=%llu\n", txn_engine_name(),
           (unsigned long long)rounds, (unsigned long long)seed);
    fflush(stdout);
    srand((unsigned)seed);
    create_initial_pool(name);

    for (uint64_t r = 1; r <= rounds; r++) {
        uint64_t v = kill_round(name, r, value);
        advanced += v > value;
        value = v;
    }
    ck_assert_msg(rounds == 0 || value > 0,
                  "the child never committed a transaction in %llu rounds",
                  (unsigned long long)rounds);

    /* the recovered pool takes new transactions and keeps them */
    CHECK_OK(txn_pool_open(name, LAYOUT, &p));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_write_u64(tx, txn_root(p), R_COMMITTED, value + 1));
    txn_abort(tx);
    ck_assert_uint_eq(check_invariant(p, rounds + 1), value);
    txn_pool_close(p);
    printf("kill: counter reached %llu, advanced in %llu of %llu rounds\n",
           (unsigned long long)value, (unsigned long long)advanced,
           (unsigned long long)rounds);
    ck_assert_int_eq(test_pool_remove(name), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kill");
    /* a round takes at most 30 ms plus a recovery */
    TCase *tc = test_tcase(s, "sigkill", 30.0 + 0.5 * (double)env_u64("KILL_ROUNDS", 20));
    tcase_add_test(tc, test_sigkill_rounds);
    /* a test that failed half-way left its pool behind */
    return test_run(s, CK_FORK_GETENV, "kill");
}
