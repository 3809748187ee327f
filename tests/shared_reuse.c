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
 * the commit too. Issue #40's reproducer, on every persistent engine.
 *
 * R2 (txn/format/pool.c): recovery never acts on the records a settled slot left
 * in its log. Thread A writes an object W and commits (or aborts), then
 * stays idle: its log still holds the records. Thread B frees W, gets
 * W's block back for new data (a small object's payload; a large one's
 * first chunk as a run of small blocks), commits, SIGKILL. After recovery
 * B's data must be whole and its blocks allocated.
 *
 * A free racing a write (two transactions at once, no lock: outside
 * txn.h's contract) never gives a block back twice: cow's C4 makes the
 * later one fail with TXN_E_CONFLICT; the others free once anyway.
 *
 * cow only (one writer per object, the others conflict): threads write,
 * free and abort one shared object at once; the next writer after an
 * abort frees the payload the aborted one had marked (C6 of cow/cow.c),
 * so every error but TXN_E_CONFLICT is a failure. */
#include <pthread.h>
#include <sched.h>
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

static void child(const char *name, void *arg)
{
    struct run *r = arg;
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

/* Fork; the child runs fn(name, arg), which ends in its own SIGKILL after
 * the acknowledged commit; any other end fails the test, `codes` saying
 * what its exit codes mean. */
static void killed_child(const char *name, void (*fn)(const char *, void *), void *arg,
                         const char *codes)
{
    int status;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        fn(name, arg);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "the child stopped by itself: status 0x%x (exit code: %s)", (unsigned)status,
                  codes);
}

static void run_case(size_t size, enum how how, int read_back)
{
    struct test_pool tp;
    struct run r = {.size = size, .how = how, .read_back = read_back};
    CHECK_OK(test_pool_new(&tp, "reuse"));
    killed_child(tp.name, child, &r,
                 "2x thread A's step, 4x thread B's, 46 X never came back, "
                 "50 the transaction read back other bytes than it wrote");

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

/* ---- R2 */

enum stale { STALE_SMALL, STALE_LARGE };
#define SMALL 24     /* bytes of W, of B's new objects (cow: its wrapper's class) */
#define LARGE 20000  /* bytes of W: a block of whole chunks */
#define RUN_OBJS 32  /* B's objects of RUN_SIZE, in a run new to the pool */
#define RUN_SIZE 1000

struct stale_run {
    txn_pool *p;
    enum stale kind;
    int abort; /* A's write is rolled back instead of committed */
    pthread_barrier_t bar;
    txn_obj *w;
};

/* A: W allocated and linked, then written by a transaction whose records
 * stay in A's log; then idle until the process is killed. */
static void *stale_a(void *arg)
{
    struct stale_run *r = arg;
    txn *tx;
    uint64_t v = 0x1111;
    STEP(txn_begin(r->p, &tx), 20);
    STEP(txn_alloc(tx, r->kind == STALE_SMALL ? SMALL : LARGE, &r->w), 21);
    STEP(txn_write(tx, txn_root(r->p), 0, &r->w, sizeof r->w), 22);
    STEP(txn_commit(tx), 23);
    STEP(txn_begin(r->p, &tx), 24);
    STEP(txn_write(tx, r->w, 0, &v, sizeof v), 25);
    if (r->abort)
        txn_abort(tx);
    else
        STEP(txn_commit(tx), 26);
    pthread_barrier_wait(&r->bar); /* 1: W written */
    pthread_barrier_wait(&r->bar); /* never: the process dies first */
    return NULL;
}

/* B, small: objects of W's size, a transaction each, until one's payload
 * starts in W's block; it is filled and linked from the root. Another
 * object is freed after W: cow's next object then takes its wrapper from
 * it and its payload from W (the cache gives back the last freed first). */
static void stale_b_small(struct stale_run *r)
{
    txn *tx;
    txn_obj *n = NULL, *q = NULL, *none = NULL;
    uint8_t b[SMALL];
    memset(b, 0xab, sizeof b);
    STEP(txn_begin(r->p, &tx), 53);
    STEP(txn_alloc(tx, 200, &q), 54);
    STEP(txn_commit(tx), 55);
    STEP(txn_begin(r->p, &tx), 40);
    STEP(txn_free(tx, r->w), 41);
    STEP(txn_free(tx, q), 56);
    STEP(txn_write(tx, txn_root(r->p), 0, &none, sizeof none), 42);
    STEP(txn_commit(tx), 43);
    STEP(txn_sync(r->p), 57); /* incll: the frees take effect with their epoch */
    for (int i = 0;; i++) {
        STEP(i == TRIES, 46); /* W's block never came back */
        STEP(txn_begin(r->p, &tx), 44);
        STEP(txn_alloc(tx, SMALL, &n), 45);
        const char *at = txn_open(tx, n, TXN_RO);
        STEP(!at, 47);
        if (at >= (const char *)r->w && at < (const char *)r->w + 16) {
            STEP(txn_write(tx, n, 0, b, sizeof b), 48);
            STEP(txn_write(tx, txn_root(r->p), 8, &n, sizeof n), 49);
            STEP(txn_commit(tx), 50);
            return;
        }
        STEP(txn_commit(tx), 51);
    }
}

/* B, large: W freed, then RUN_OBJS objects of a size no run of the pool
 * has yet (its new run takes the lowest free chunk: W's first), each
 * marked, listed in an object linked from the root. */
static void stale_b_large(struct stale_run *r)
{
    txn *tx;
    txn_obj *o[RUN_OBJS], *list, *none = NULL;
    STEP(txn_begin(r->p, &tx), 40);
    STEP(txn_free(tx, r->w), 41);
    STEP(txn_write(tx, txn_root(r->p), 0, &none, sizeof none), 42);
    STEP(txn_commit(tx), 43);
    STEP(txn_sync(r->p), 57);
    STEP(txn_begin(r->p, &tx), 44);
    for (uint64_t i = 0; i < RUN_OBJS; i++) {
        STEP(txn_alloc(tx, RUN_SIZE, &o[i]), 45);
        STEP(txn_write_u64(tx, o[i], 0, 0xabab0000 + i), 46);
    }
    STEP(txn_alloc(tx, sizeof o, &list), 47);
    STEP(txn_write(tx, list, 0, o, sizeof o), 48);
    STEP(txn_write(tx, txn_root(r->p), 8, &list, sizeof list), 49);
    STEP(txn_commit(tx), 50);
}

static void stale_child(const char *name, void *arg)
{
    struct stale_run *r = arg;
    txn_pool_opts o = {.size = 16u << 20, .threads = 4};
    pthread_t a;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    STEP(txn_pool_create(name, LAYOUT, &o, &r->p), 10);
    pthread_barrier_init(&r->bar, NULL, 2);
    STEP(pthread_create(&a, NULL, stale_a, r), 11);
    pthread_barrier_wait(&r->bar); /* 1 */
    if (r->kind == STALE_SMALL)
        stale_b_small(r);
    else
        stale_b_large(r);
    STEP(txn_sync(r->p), 52); /* acknowledged (incll: with its epoch) */
    raise(SIGKILL);
    _exit(12);
}

static void stale_case(enum stale kind, int abort)
{
    struct test_pool tp;
    struct stale_run r = {.kind = kind, .abort = abort};
    CHECK_OK(test_pool_new(&tp, "reuse"));
    killed_child(tp.name, stale_child, &r,
                 "2x thread A's step, 4x or 5x thread B's, 46 W's block never came back");

    txn_pool *p;
    txn *tx;
    txn_obj *n = NULL;
    CHECK_OK(txn_pool_open(tp.name, LAYOUT, &p));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read(tx, txn_root(p), 8, &n, sizeof n));
    ck_assert_ptr_nonnull(n);
    if (kind == STALE_SMALL) {
        uint8_t b[SMALL];
        int lost = 0;
        CHECK_OK(txn_read(tx, n, 0, b, sizeof b));
        for (size_t i = 0; i < sizeof b; i++)
            lost += b[i] != 0xab;
        ck_assert_msg(!lost, "%s: %d of the %d committed bytes in the reused block lost "
                      "after recovery (A's write %s)", txn_engine_name(), lost, SMALL,
                      abort ? "aborted" : "committed");
    } else {
        txn_obj *o[RUN_OBJS], *m;
        int again = 0;
        CHECK_OK(txn_read(tx, n, 0, o, sizeof o));
        for (uint64_t i = 0; i < RUN_OBJS; i++) {
            uint64_t v = 0;
            CHECK_OK(txn_read_u64(tx, o[i], 0, &v));
            ck_assert_msg(v == 0xabab0000 + i, "%s: object %llu of the run reads %llx",
                          txn_engine_name(), (unsigned long long)i, (unsigned long long)v);
        }
        for (int k = 0; k < 2 * RUN_OBJS; k++) { /* live blocks are not free */
            CHECK_OK(txn_alloc(tx, RUN_SIZE, &m));
            for (int i = 0; i < RUN_OBJS; i++)
                again += m == o[i];
        }
        ck_assert_msg(!again, "%s: %d live blocks of the run handed out again after "
                      "recovery (A's write %s)", txn_engine_name(), again,
                      abort ? "aborted" : "committed");
    }
    txn_abort(tx);
    txn_pool_close(p);
    ck_assert_int_eq(test_pool_remove(tp.name), 0);
}

START_TEST(test_stale_small)
{
    stale_case(STALE_SMALL, _i);
}
END_TEST

START_TEST(test_stale_large)
{
    stale_case(STALE_LARGE, _i);
}
END_TEST

/* ---- a free racing a write */

#define HANDED 64 /* objects allocated afterwards, each block once */

struct race {
    txn_pool *p;
    txn_obj *w;
    pthread_barrier_t bar;
};

static void *race_free(void *arg)
{
    struct race *r = arg;
    txn *tx;
    STEP(txn_begin(r->p, &tx), 20);
    STEP(txn_free(tx, r->w), 21);
    pthread_barrier_wait(&r->bar); /* 1: freed, not committed */
    pthread_barrier_wait(&r->bar); /* 2: the other wrote */
    STEP(txn_commit(tx), 22);
    pthread_barrier_wait(&r->bar); /* 3 */
    return NULL;
}

static void *race_write(void *arg)
{
    struct race *r = arg;
    txn *tx;
    uint64_t v = 7;
    pthread_barrier_wait(&r->bar); /* 1 */
    STEP(txn_begin(r->p, &tx), 40);
    int rc = txn_write(tx, r->w, 0, &v, sizeof v);
    pthread_barrier_wait(&r->bar); /* 2 */
    pthread_barrier_wait(&r->bar); /* 3: the free committed */
    if (rc)
        txn_abort(tx);
    else
        STEP(txn_commit(tx), 41);
    return NULL;
}

START_TEST(test_free_races_write)
{
    struct test_pool tp;
    struct race r;
    txn *tx;
    pthread_t a, b;
    txn_pool_opts o = {.size = 16u << 20, .threads = 4};
    CHECK_OK(test_pool_new(&tp, "reuse"));
    CHECK_OK(txn_pool_create(tp.name, LAYOUT, &o, &r.p));
    CHECK_OK(txn_begin(r.p, &tx));
    CHECK_OK(txn_alloc(tx, 64, &r.w));
    CHECK_OK(txn_commit(tx));
    pthread_barrier_init(&r.bar, NULL, 2);
    ck_assert_int_eq(pthread_create(&a, NULL, race_free, &r), 0);
    ck_assert_int_eq(pthread_create(&b, NULL, race_write, &r), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    const void *seen[2 * HANDED];
    size_t n = 0;
    CHECK_OK(txn_begin(r.p, &tx));
    for (int k = 0; k < HANDED; k++) {
        txn_obj *m;
        CHECK_OK(txn_alloc(tx, 64, &m));
        const void *at = txn_open(tx, m, TXN_RO);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(seen[i] != m && seen[i] != at,
                          "%s: a block freed by one transaction and written by another "
                          "was handed out twice", txn_engine_name());
        seen[n++] = m;
        if (at != (const void *)m)
            seen[n++] = at;
    }
    txn_abort(tx);
    txn_pool_close(r.p);
    ck_assert_int_eq(test_pool_remove(tp.name), 0);
}
END_TEST

/* ---- cow: writes, frees and aborts of one object by several threads */

enum { CLAIMERS = 3, CLAIM_TXS = 4000 };

struct claimer {
    txn_pool *p;
    txn_obj *x;
    int t, rc;
    unsigned conflicts;
};

static void *claim_loop(void *arg)
{
    struct claimer *c = arg;
    for (unsigned i = 0; i < CLAIM_TXS && !c->rc; i++) {
        txn *tx;
        if ((c->rc = txn_begin(c->p, &tx)))
            break;
        int frees = i % 7 == 3;
        int rc = frees ? txn_free(tx, c->x) : txn_write_u64(tx, c->x, 8 * (size_t)c->t, i);
        if (rc || i % 2 || frees) {
            txn_abort(tx); /* a free always: the object stays */
        } else {
            rc = txn_commit(tx);
        }
        if (rc == TXN_E_CONFLICT) {
            c->conflicts++;
            sched_yield();
        } else if (rc) {
            c->rc = rc;
        }
    }
    return NULL;
}

START_TEST(test_abort_claim)
{
    struct test_pool tp;
    txn_pool *p;
    txn_obj *x;
    txn *tx;
    pthread_t th[CLAIMERS];
    struct claimer c[CLAIMERS];
    txn_pool_opts o = {.size = 16u << 20, .threads = 4};
    CHECK_OK(test_pool_new(&tp, "reuse"));
    CHECK_OK(txn_pool_create(tp.name, LAYOUT, &o, &p));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_alloc(tx, 64, &x));
    CHECK_OK(txn_commit(tx));
    for (int t = 0; t < CLAIMERS; t++) {
        c[t] = (struct claimer){p, x, t, 0, 0};
        ck_assert_int_eq(pthread_create(&th[t], NULL, claim_loop, &c[t]), 0);
    }
    for (int t = 0; t < CLAIMERS; t++) {
        pthread_join(th[t], NULL);
        ck_assert_msg(!c[t].rc, "thread %d: %s (%u conflicts)", t, txn_strerror(c[t].rc),
                      c[t].conflicts);
    }
    CHECK_OK(txn_begin(p, &tx));
    for (int t = 0; t < CLAIMERS; t++) {
        uint64_t v;
        CHECK_OK(txn_read_u64(tx, x, 8 * (size_t)t, &v));
        ck_assert_uint_eq(v % 2, 0); /* only even transactions commit */
    }
    txn_abort(tx);
    txn_pool_close(p);
    ck_assert_int_eq(test_pool_remove(tp.name), 0);
}
END_TEST

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
    tc = test_tcase(s, "R2", 60.0);
    tcase_add_loop_test(tc, test_stale_small, 0, 2); /* A commits, A aborts */
    tcase_add_loop_test(tc, test_stale_large, 0, 2);
    tc = test_tcase(s, "free-write", 60.0);
    tcase_add_test(tc, test_free_races_write);
    if (!strcmp(txn_engine_name(), "cow")) {
        tc = test_tcase(s, "abort-claim", 60.0);
        tcase_add_test(tc, test_abort_claim);
    }
    return test_run(s, CK_FORK_GETENV, "reuse");
}
