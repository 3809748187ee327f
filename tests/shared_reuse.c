/* shared_reuse.c - a block freed by one thread and reused by another, then
 * SIGKILL: the reusing thread's committed writes must be there after
 * recovery. The interleaving is fixed by barriers between the two threads:
 *
 *   A: allocates X, fills it, links it from the root, commits
 *   B: reads X in a transaction and commits (its inline way for X is kept
 *      for its later transactions)
 *   A: frees X, unlinks it, commits, commits a few more times (redo1 gives
 *      a freed block back once a watermark has passed it) and exits (its
 *      allocator cache goes back to the pool)
 *   B: allocates blocks of X's size until it gets X's block, writes a
 *      header into it, links it, commits; the process SIGKILLs itself
 *
 * A fresh process then opens the pool (recovery) and reads the header.
 * Invariant R1 (txn/api.c): a way never outlives its object; the cases
 * below write the header each way txn.h allows and read it back before
 * the commit too. Issue #40's reproducer, on every persistent engine. */
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "common.h"

#define LAYOUT "shared_reuse"
#define HDR 40      /* bytes of the header B writes */
#define SPINS 64    /* A's commits after its free */
#define TRIES 20000 /* B's allocations before it gives up */

enum how { BY_WRITE, BY_U64, BY_OPEN_RW };

struct run {
    txn_pool *p;
    size_t size; /* of X and of B's allocations */
    enum how how;
    int read_back;
    pthread_barrier_t bar;
    txn_obj *x;
};

static void header(uint64_t *h)
{
    for (int i = 0; i < HDR / 8; i++)
        h[i] = 0x5eed0000 + (uint64_t)i * 0x1111;
}

/* In the child: a failed step ends the process with its code, never with
 * SIGKILL (the other thread may be waiting at a barrier). */
#define STEP(expr, code)    \
    do {                    \
        if ((expr) != 0)    \
            _exit(code);    \
    } while (0)

static void *thread_a(void *arg)
{
    struct run *r = arg;
    txn *tx;
    txn_obj *x = NULL;
    uint64_t fill[HDR / 8] = {7, 7, 7, 7, 7};
    STEP(txn_begin(r->p, &tx), 20);
    STEP(txn_alloc(tx, r->size, &x), 21);
    STEP(txn_write(tx, x, 0, fill, sizeof fill), 22);
    STEP(txn_write(tx, txn_root(r->p), 0, &x, sizeof x), 23);
    STEP(txn_commit(tx), 24);
    r->x = x;
    pthread_barrier_wait(&r->bar); /* 1: X is linked */
    pthread_barrier_wait(&r->bar); /* 2: B has read it */
    txn_obj *none = NULL;
    STEP(txn_begin(r->p, &tx), 25);
    STEP(txn_free(tx, x), 26);
    STEP(txn_write(tx, txn_root(r->p), 0, &none, sizeof none), 27);
    STEP(txn_commit(tx), 28);
    for (uint64_t i = 0; i < SPINS; i++) { /* watermarks pass the free */
        STEP(txn_begin(r->p, &tx), 29);
        STEP(txn_write_u64(tx, txn_root(r->p), 8, i), 30);
        STEP(txn_commit(tx), 31);
    }
    STEP(txn_sync(r->p), 32); /* incll: frees take effect with their epoch */
    return NULL; /* the thread's end gives its cache back */
}

static int write_header(struct run *r, txn *tx, txn_obj *o, const uint64_t *h)
{
    int rc = 0;
    if (r->how == BY_U64) {
        for (int i = 0; !rc && i < HDR / 8; i++)
            rc = txn_write_u64(tx, o, 8 * (size_t)i, h[i]);
        return rc;
    }
    if (r->how == BY_OPEN_RW && !txn_open(tx, o, TXN_RW))
        return txn_last_error(tx);
    return txn_write(tx, o, 0, h, HDR);
}

/* B's first half: it reads X, so that its way for X is kept. */
static void thread_b(struct run *r)
{
    txn *tx;
    uint64_t got[HDR / 8];
    pthread_barrier_wait(&r->bar); /* 1 */
    STEP(txn_begin(r->p, &tx), 40);
    STEP(txn_read(tx, r->x, 0, got, sizeof got), 41);
    STEP(txn_commit(tx), 42);
    pthread_barrier_wait(&r->bar); /* 2 */
}

/* B's second half, after A has ended. */
static void reuse(struct run *r)
{
    txn *tx;
    uint64_t h[HDR / 8], got[HDR / 8];
    txn_obj *o = NULL;
    /* the blocks that are not X are freed by the same transaction */
    txn_obj **extra = calloc(TRIES, sizeof *extra);
    size_t n = 0;
    header(h);
    STEP(txn_begin(r->p, &tx), 43);
    STEP(!extra, 44);
    for (; n < TRIES; n++) {
        STEP(txn_alloc(tx, r->size, &o), 45);
        if (o == r->x)
            break;
        extra[n] = o;
    }
    STEP(n == TRIES, 46); /* X never came back: the test proves nothing */
    for (size_t i = 0; i < n; i++)
        STEP(txn_free(tx, extra[i]), 47);
    STEP(write_header(r, tx, o, h), 48);
    if (r->read_back) {
        STEP(txn_read(tx, o, 0, got, sizeof got), 49);
        STEP(memcmp(got, h, HDR), 50); /* it does not see its own writes */
    }
    STEP(txn_write(tx, txn_root(r->p), 0, &o, sizeof o), 51);
    STEP(txn_commit(tx), 52);
    STEP(txn_sync(r->p), 53); /* acknowledged (incll: durable with its epoch) */
    raise(SIGKILL);
}

/* B's thread is one thread throughout: its way for X is the point. */
static void *thread_b_all(void *arg)
{
    struct run *r = arg;
    thread_b(r);
    pthread_barrier_wait(&r->bar); /* 3: A has ended */
    reuse(r);
    return NULL;
}

static void child(const char *name, struct run *r)
{
    txn_pool_opts o = {.size = 16u << 20, .threads = 4};
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    STEP(txn_pool_create(name, LAYOUT, &o, &r->p), 10);
    pthread_t a, b;
    pthread_barrier_init(&r->bar, NULL, 2);
    if (pthread_create(&b, NULL, thread_b_all, r) || pthread_create(&a, NULL, thread_a, r))
        _exit(11);
    pthread_join(a, NULL);
    pthread_barrier_wait(&r->bar); /* 3 */
    pthread_join(b, NULL);
    _exit(12); /* B's SIGKILL did not come */
}

static void run_case(size_t size, enum how how, int read_back)
{
    struct test_pool tp;
    struct run r = {.size = size, .how = how, .read_back = read_back};
    int status;
    CHECK_OK(test_pool_new(&tp, "reuse"));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        child(tp.name, &r);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "the child stopped by itself: status 0x%x (exit code: 2x thread A's step, "
                  "4x thread B's, 46 X never came back, 50 the transaction read back "
                  "other bytes than it wrote)",
                  (unsigned)status);

    /* recovery, in this process: it never opened the pool */
    txn_pool *p;
    txn *tx;
    txn_obj *x = NULL;
    uint64_t h[HDR / 8], got[HDR / 8];
    header(h);
    CHECK_OK(txn_pool_open(tp.name, LAYOUT, &p));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read(tx, txn_root(p), 0, &x, sizeof x));
    ck_assert_ptr_nonnull(x);
    ck_assert_uint_ge(txn_obj_size(p, x), size);
    CHECK_OK(txn_read(tx, x, 0, got, sizeof got));
    txn_abort(tx);
    txn_pool_close(p);
    ck_assert_msg(!memcmp(got, h, HDR),
                  "%s: the committed header of the reused block reads %llx %llx %llx %llx "
                  "%llx after recovery, not %llx %llx %llx %llx %llx",
                  txn_engine_name(), (unsigned long long)got[0], (unsigned long long)got[1],
                  (unsigned long long)got[2], (unsigned long long)got[3],
                  (unsigned long long)got[4], (unsigned long long)h[0],
                  (unsigned long long)h[1], (unsigned long long)h[2], (unsigned long long)h[3],
                  (unsigned long long)h[4]);
    ck_assert_int_eq(test_pool_remove(tp.name), 0);
}

START_TEST(test_reuse_write)
{
    run_case(64, BY_WRITE, 0);
}
END_TEST

START_TEST(test_reuse_other_class)
{
    run_case(200, BY_WRITE, 0);
}
END_TEST

START_TEST(test_reuse_u64)
{
    run_case(64, BY_U64, 0);
}
END_TEST

START_TEST(test_reuse_open_rw)
{
    run_case(64, BY_OPEN_RW, 0);
}
END_TEST

START_TEST(test_reuse_read_back)
{
    run_case(64, BY_WRITE, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shared_reuse");
    TCase *tc = test_tcase(s, "R1", 60.0);
    tcase_add_test(tc, test_reuse_write);
    tcase_add_test(tc, test_reuse_other_class);
    tcase_add_test(tc, test_reuse_u64);
    tcase_add_test(tc, test_reuse_open_rw);
    tcase_add_test(tc, test_reuse_read_back);
    return test_run(s, CK_FORK_GETENV, "reuse");
}
