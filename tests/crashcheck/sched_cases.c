/* sched_cases.c - programs that --threads-sched must run to their end
 * (tests/CMakeLists.txt runs each under txn-crashcheck; a case that hangs
 * fails by the test's timeout, one that finds the scheduler wrong exits 1).
 *
 *   sched_cases --case NAME POOL    run the case on a new pool
 *   sched_cases --verify POOL       the pool opens and its counter reads
 *
 * Cases: trylock (a trylock spin while another thread holds the mutex),
 * insync (incll: a lock inside a transaction while another thread calls
 * txn_sync), mainexit (the main thread ends by pthread_exit), fork (a child
 * locks, creates and joins), cancel (a thread parked by the scheduler is
 * cancelled), robust (a robust mutex whose owner died, then waited for by
 * another thread), start (a new thread must not run beside its creator),
 * endabort (a thread ends inside a transaction whose TXN_ON_ABORT action
 * locks a mutex while another thread makes its first transaction). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "txn.h"

#define LAYOUT "sched_cases"

static txn_pool *pool;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, n = PTHREAD_MUTEX_INITIALIZER;
static atomic_int flag, flag2;

static void die(const char *what, int rc)
{
    fprintf(stderr, "sched_cases: %s: %s\n", what, txn_strerror(rc));
    exit(1);
}

/* One transaction adding 1 to the root's counter. */
static void bump(void)
{
    txn *tx;
    uint64_t v;
    int rc = txn_begin(pool, &tx);
    if (rc)
        die("txn_begin", rc);
    if ((rc = txn_read_u64(tx, txn_root(pool), 0, &v)) ||
        (rc = txn_write_u64(tx, txn_root(pool), 0, v + 1)) || (rc = txn_commit(tx)))
        die("bump", rc);
}

/* Switch points of the calling thread outside any transaction. */
static void yield_n(int k)
{
    while (k--) {
        pthread_mutex_lock(&n);
        pthread_mutex_unlock(&n);
    }
}

static void start(pthread_t *t, void *(*fn)(void *))
{
    if (pthread_create(t, NULL, fn, NULL)) {
        fprintf(stderr, "sched_cases: cannot start a thread\n");
        exit(1);
    }
}

/* ---- trylock: m held by the other thread until the spin has seen it busy */
static void *trylock_holder(void *arg)
{
    pthread_mutex_lock(&m);
    atomic_store(&flag, 1);
    while (!atomic_load(&flag2)) {
        bump();
        yield_n(1);
    }
    pthread_mutex_unlock(&m);
    return arg;
}

static void case_trylock(void)
{
    pthread_t t;
    start(&t, trylock_holder);
    while (!atomic_load(&flag))
        yield_n(1);
    while (pthread_mutex_trylock(&m) == EBUSY) {
        atomic_store(&flag2, 1);
        sched_yield();
    }
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
}

/* ---- insync: a lock inside a transaction, txn_sync in the other thread */
static void *insync_writer(void *arg)
{
    for (int i = 0; i < 20; i++) {
        txn *tx;
        uint64_t v;
        int rc = txn_begin(pool, &tx);
        if (rc)
            die("txn_begin", rc);
        pthread_mutex_lock(&m);
        if ((rc = txn_read_u64(tx, txn_root(pool), 0, &v)) ||
            (rc = txn_write_u64(tx, txn_root(pool), 0, v + 1)))
            die("write", rc);
        pthread_mutex_unlock(&m);
        if ((rc = txn_commit(tx)))
            die("txn_commit", rc);
    }
    atomic_store(&flag, 1);
    return arg;
}

static void case_insync(void)
{
    pthread_t t;
    start(&t, insync_writer);
    while (!atomic_load(&flag)) {
        yield_n(1);
        int rc = txn_sync(pool);
        if (rc)
            die("txn_sync", rc);
    }
    pthread_join(t, NULL);
}

/* ---- mainexit: the other thread works on and closes the pool */
static void *mainexit_worker(void *arg)
{
    for (int i = 0; i < 10; i++)
        bump();
    txn_pool_close(pool);
    return arg;
}

static void case_mainexit(void)
{
    pthread_t t;
    start(&t, mainexit_worker);
    bump();
    pthread_exit(NULL);
}

/* ---- fork: the child has only its one thread (the other one runs on in
 * the parent until the fork is over) */
static void *nothing(void *arg)
{
    yield_n(2);
    return arg;
}

static void *until_forked(void *arg)
{
    while (!atomic_load(&flag))
        yield_n(1);
    return arg;
}

static void case_fork(void)
{
    pthread_t t, c;
    start(&t, until_forked);
    bump();
    pid_t pid = fork();
    if (pid < 0) {
        perror("sched_cases: fork");
        exit(1);
    }
    if (pid == 0) {
        yield_n(10);
        start(&c, nothing);
        pthread_join(c, NULL);
        yield_n(10);
        _exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "sched_cases: the forked child failed\n");
        exit(1);
    }
    atomic_store(&flag, 1);
    bump();
    pthread_join(t, NULL);
}

/* ---- cancel: the thread is parked by the scheduler when cancelled */
static void *cancel_loop(void *arg)
{
    for (;;) {
        yield_n(1);
        pthread_testcancel();
    }
    return arg;
}

static void case_cancel(void)
{
    pthread_t t;
    start(&t, cancel_loop);
    yield_n(10);
    bump();
    pthread_cancel(t);
    void *rv;
    pthread_join(t, &rv);
    if (rv != PTHREAD_CANCELED) {
        fprintf(stderr, "sched_cases: the thread was not cancelled\n");
        exit(1);
    }
    bump();
}

/* ---- robust: r acquired from a dead owner is held, another thread waits */
static pthread_mutex_t r;

static void *robust_dies(void *arg)
{
    pthread_mutex_lock(&r);
    bump();
    return arg; /* ends holding r */
}

static void *robust_waits(void *arg)
{
    pthread_mutex_lock(&r);
    bump();
    pthread_mutex_unlock(&r);
    return arg;
}

static void case_robust(void)
{
    pthread_mutexattr_t a;
    pthread_t t;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&r, &a);
    start(&t, robust_dies);
    pthread_join(t, NULL);
    if (pthread_mutex_lock(&r) != EOWNERDEAD) {
        fprintf(stderr, "sched_cases: the robust mutex's owner did not die\n");
        exit(1);
    }
    pthread_mutex_consistent(&r);
    start(&t, robust_waits);
    yield_n(10);
    bump();
    pthread_mutex_unlock(&r);
    pthread_join(t, NULL);
}

/* ---- start: what a new thread does first waits for the baton */
static void *start_mark(void *arg)
{
    atomic_fetch_add(&flag, 1);
    return arg;
}

static void case_start(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        start(&t[i], start_mark);
        int before = atomic_load(&flag);
        /* no switch point here: the new thread must not run meanwhile */
        struct timespec d = {0, 50 * 1000 * 1000};
        nanosleep(&d, NULL);
        if (atomic_load(&flag) != before) {
            fprintf(stderr, "sched_cases: a new thread ran beside the baton's holder\n");
            exit(1);
        }
        yield_n(1);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
}

/* ---- endabort: a TXN_ON_ABORT action of a thread's end locks a mutex */
static void on_abort(void *arg)
{
    (void)arg;
    yield_n(8);
}

static void *endabort_ends(void *arg)
{
    txn *tx;
    int rc = txn_begin(pool, &tx);
    if (rc || (rc = txn_defer(tx, TXN_ON_ABORT, on_abort, NULL)) ||
        (rc = txn_write_u64(tx, txn_root(pool), 8, 1)))
        die("endabort", rc);
    return arg; /* ends inside the transaction: its end aborts it */
}

static void *endabort_begins(void *arg)
{
    bump();
    return arg;
}

static void case_endabort(void)
{
    pthread_t t[6];
    for (int i = 0; i < 6; i += 2) {
        start(&t[i], endabort_ends);
        start(&t[i + 1], endabort_begins);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
}

static const struct {
    const char *name;
    void (*run)(void);
} cases[] = {{"trylock", case_trylock}, {"insync", case_insync}, {"mainexit", case_mainexit},
             {"fork", case_fork},       {"cancel", case_cancel}, {"robust", case_robust},
             {"start", case_start},     {"endabort", case_endabort}};

int main(int argc, char **argv)
{
    int rc;
    if (argc == 3 && !strcmp(argv[1], "--verify")) {
        txn *tx;
        uint64_t v;
        if ((rc = txn_pool_open(argv[2], LAYOUT, &pool)))
            die("open", rc);
        if ((rc = txn_begin(pool, &tx)) || (rc = txn_read_u64(tx, txn_root(pool), 0, &v)))
            die("read", rc);
        txn_abort(tx);
        txn_pool_close(pool);
        return 0;
    }
    for (size_t i = 0; argc == 4 && !strcmp(argv[1], "--case") && i < sizeof cases / sizeof *cases;
         i++) {
        if (strcmp(argv[2], cases[i].name))
            continue;
        txn_pool_opts o = {.size = 0, .root_size = 64, .threads = 12};
        o.size = txn_pool_min_size(&o);
        if ((rc = txn_pool_create(argv[3], LAYOUT, &o, &pool)))
            die("create", rc);
        bump();
        cases[i].run();
        txn_pool_close(pool);
        return 0;
    }
    fprintf(stderr, "usage: sched_cases --case NAME POOL | sched_cases --verify POOL\n");
    return 2;
}
