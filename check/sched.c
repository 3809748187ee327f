/* sched.c - the baton scheduler of libtxn-<engine>-check, on under
 * txn-crashcheck --threads-sched (docs/crashcheck.md): the program's
 * threads run one at a time, and the next to run is drawn from the seed at
 * each switch point, so a run from the same seed makes the same trace, the
 * same images and the same source lines. The algorithm is the crash
 * simulator's (tests/crashsim/sched.c: the holder keeps the baton half the
 * time, else a runnable thread is drawn); what differs is where its switch
 * points come from: here the program's own pthread calls.
 *
 * This library exports pthread_create, pthread_join, pthread_exit,
 * pthread_mutex_lock, pthread_mutex_trylock and pthread_mutex_unlock (the
 * names the CMake map adds to the engine's exports); the dynamic linker finds
 * them before libc's (the program's link names this library first). Each
 * forwards to libc's at once unless the scheduler is on, the calling thread
 * is one it runs, and the call is the program's own: the library's
 * internal locks and threads are never switch points (a switch inside the
 * library could leave another thread waiting on a lock the parked thread
 * holds).
 *
 * Switch points: the program's lock (before the acquire, and while the
 * mutex is held by another thread, which then runs), a trylock that finds
 * the mutex held by another thread, unlock, thread creation, join (while
 * the joined thread runs), a thread's end (its return, pthread_exit, also
 * the main thread's, or a cancellation), and the recorder's txn_begin and
 * txn_commit (chk_sched_point). A program that calls txn_check_mark_only
 * first (txn_check.h) gets only the waits, its threads' starts and ends,
 * and the points it marks (txn_check_switch). Where switches inside a transaction are not
 * taken (incll: its txn_sync waits for the running transactions), only the
 * waits are: a lock of a mutex held by another thread, a join. A new thread
 * waits for the baton before its first step. Condition variables,
 * semaphores, rwlocks, timed locks, spinlocks, C11 mtx_* and other blocking
 * calls are not scheduled: a thread that blocks in one while holding the
 * baton waits for ever (docs/crashcheck.md). Threads that all wait for each
 * other (the program's own deadlock) end the run with a message (exit 3):
 * nothing else could run. A forked child runs unscheduled.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chk_sched.h"
#include "txn_check.h"
#include "ctxreg.h"
#include "trace.h"

#define MAX_THREADS 256 /* threads a run may start (not at once: in all) */
#define MAX_HELD 64     /* program mutexes held at once */

/* libc's calls, found past this library (RTLD_NEXT) at the first use */
static int (*sys_lock)(pthread_mutex_t *);
static int (*sys_trylock)(pthread_mutex_t *);
static int (*sys_unlock)(pthread_mutex_t *);
static int (*sys_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static int (*sys_join)(pthread_t, void **);
static void (*sys_exit)(void *);

static void *sys(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) { /* no libc behind this library: nothing can run */
        fprintf(stderr, "txn-crashcheck: %s not found past the -check library\n", name);
        _exit(127);
    }
    return f;
}

#define SYS(var, name)                                                                   \
    (atomic_load_explicit((_Atomic(void *) *)&var, memory_order_acquire)                  \
         ? var                                                                           \
         : (atomic_store_explicit((_Atomic(void *) *)&var, sys(name), memory_order_release), \
            var))

/* The scheduler's state: `on`, `inside`, `lo`, `hi` set by chk_sched_init
 * before the program's main (one thread); the rest under `mu`, which is
 * libc's own mutex, taken through sys_lock. */
static struct {
    int on;                /* init: --threads-sched */
    int inside;            /* init: switch points inside transactions taken */
    int marked;            /* set by txn_check_mark_only before the program's
                              threads start: switches only where marked */
    uintptr_t lo, hi;      /* init: this library's code, for internal calls */
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* mu: the baton moved */
    int n;                 /* mu: threads numbered (0: the main thread) */
    int turn;              /* mu: the thread holding the baton */
    int done[MAX_THREADS];          /* mu: thread ended */
    pthread_t tid[MAX_THREADS];     /* mu: set by its creator */
    pthread_mutex_t *wants[MAX_THREADS]; /* mu: the mutex it waits for */
    int joins[MAX_THREADS];         /* mu: the thread it waits to join, or -1 */
    pthread_mutex_t *held[MAX_HELD]; /* mu: program mutexes held ... */
    int holder[MAX_HELD];           /* mu: ... by these threads */
    uint64_t rng;          /* mu (only the baton holder draws) */
    uint64_t switches;     /* mu: times the baton moved */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* The scheduler's number of this thread, -1 when it does not run it;
 * whether it has taken the baton once (a new thread takes it at its start,
 * in started(), after a sanitizer's thread start has let its creator go). */
static __thread int self = -1;
static __thread int entered;
static __thread int forking; /* between fork's prepare and its end */
static __thread int quiet; /* its end gives back its contexts: the
                              registry's lock held, no voluntary switch */

/* Whether the calling thread may give the baton away when it need not
 * wait: not inside a transaction where such switches are not taken (the
 * engine's txn_sync would wait for the parked transaction), nor while its
 * end holds the context registry's lock (the next thread's txn_begin would
 * block on it holding the baton). */
static int may_switch(void)
{
    return !quiet && !S.marked && (S.inside || !chk_in_txn());
}

/* The scheduler's sections run with cancellation off: a cancellation in
 * its condition waits would come back holding mu into the thread's end,
 * which takes mu again. A pending one acts at the program's next
 * cancellation point. */
#define LOCK_S(old)                                                   \
    (pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &(old)),          \
     SYS(sys_lock, "pthread_mutex_lock")(&S.mu))
#define UNLOCK_S(old)                                                 \
    (SYS(sys_unlock, "pthread_mutex_unlock")(&S.mu),                  \
     pthread_setcancelstate((old), NULL))

/* Under mu: the calling thread's first switch point waits for the baton. */
static void enter(void)
{
    while (!entered && S.turn != self)
        pthread_cond_wait(&S.cv, &S.mu);
    entered = 1;
}

static int find_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t want = (uintptr_t)arg;
    if (info->dlpi_addr != want)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
        if (!S.lo || a < S.lo)
            S.lo = a;
        if (b > S.hi)
            S.hi = b;
    }
    return 1;
}

static int in_lib(const void *a)
{
    return (uintptr_t)a >= S.lo && (uintptr_t)a < S.hi;
}

/* Whether the call whose return address is `ra` comes from this library.
 * A sanitizer's runtime may stand between (its interceptor calls the next
 * definition, this one): then the frames above it say who called. */
static __attribute__((noinline)) int internal(const void *ra)
{
    if (in_lib(ra))
        return 1;
    Dl_info d;
    if (dladdr(ra, &d) && d.dli_fname && strstr(d.dli_fname, "/libpmemobj.so"))
        return 1; /* the pmdk engine's own library: its locks are the engine's */
    if (!dladdr(ra, &d) || !d.dli_fname || !strstr(d.dli_fname, "san.so"))
        return 0;
    void *f[12];
    int k = backtrace(f, 12), i = 0;
    while (i < k && !in_lib(f[i])) /* the sanitizer's backtrace, if it has one */
        i++;
    while (i < k && in_lib(f[i])) /* here, and the call in this file */
        i++;
    for (; i < k; i++) { /* past the interceptors, the caller */
        if (in_lib(f[i]))
            return 1;
        if (!dladdr(f[i], &d) || !d.dli_fname || !strstr(d.dli_fname, "san.so"))
            return 0;
    }
    return 0;
}

/* fork: the child gets a copy of mu free (the fork is made holding it) and
 * runs unscheduled, as the recorder records nothing there. Meanwhile the
 * forking thread's calls are not scheduled: the recorder's handlers lock
 * from libc's fork, where they look like the program's calls. */
static void fork_prepare(void)
{
    forking = 1;
    SYS(sys_lock, "pthread_mutex_lock")(&S.mu);
}

static void fork_parent(void)
{
    SYS(sys_unlock, "pthread_mutex_unlock")(&S.mu);
    forking = 0;
}

static void fork_child(void)
{
    forking = 0;
    S.on = 0;
    self = -1;
    S.mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    S.cv = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
}

void chk_sched_init(uint64_t seed, int inside)
{
    Dl_info d;
    if (!dladdr((void *)chk_sched_init, &d))
        return; /* not on: the run is then as without --threads-sched */
    dl_iterate_phdr(find_lib, d.dli_fbase);
    backtrace((void *[1]){0}, 1); /* its first call loads the unwinder: not
                                     under mu, where it could not lock */
    /* the program's pthread calls must reach this library: when libc's come
     * first (linked before it), a run would not be scheduled, nor replayable */
    void *mine = (void *)pthread_mutex_lock;
    if (dlsym(RTLD_DEFAULT, "pthread_mutex_lock") != mine) {
        fputs("txn-crashcheck: --threads-sched: the program's pthread calls do not reach the "
              "-check library (link it before libc)\n", stderr);
        _exit(2);
    }
    /* registered after the recorder's: its prepare runs first, taking mu
     * before the recorder's lock, the order of chk_record_switch */
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    S.inside = inside;
    S.rng = seed ^ 0x6a09e667f3bcc908ull;
    for (int i = 0; i < MAX_THREADS; i++)
        S.joins[i] = -1;
    S.n = 1;
    S.turn = 0;
    self = 0; /* the main thread holds the baton */
    entered = 1;
    S.on = 1;
}

uint64_t chk_sched_switches(void)
{
    if (!S.on)
        return 0;
    int old;
    LOCK_S(old);
    uint64_t n = S.switches;
    UNLOCK_S(old);
    return n;
}

static int held_by(const pthread_mutex_t *m)
{
    for (int i = 0; i < MAX_HELD; i++)
        if (S.held[i] == m)
            return S.holder[i];
    return -1;
}

static int runnable(int t)
{
    if (S.done[t])
        return 0;
    if (S.wants[t] && held_by(S.wants[t]) >= 0)
        return 0;
    return S.joins[t] < 0 || S.done[S.joins[t]];
}

/* Under mu, by the baton holder t: choose the next holder (t itself half
 * the time when it can go on), then wait for the baton to come back unless
 * t has ended. No thread can go on: the program's threads wait for each
 * other (a deadlock of the program's own), said and ended. */
static void pass(int t)
{
    int cand[MAX_THREADS], n = 0, next;
    assert(S.turn == t); /* only the baton holder passes it */
    for (int i = 0; i < S.n; i++)
        if (runnable(i))
            cand[n++] = i;
    if (n == 0) {
        for (int i = 0; i < S.n; i++)
            if (!S.done[i]) {
                fprintf(stderr,
                        "txn-crashcheck: the program's threads deadlocked under --threads-sched "
                        "(thread %d waits for %s)\n",
                        i, S.wants[i] ? "a mutex" : "a thread to end");
                _exit(3);
            }
        next = -1; /* everyone ended */
    } else if (runnable(t) && trace_mix(&S.rng) % 2) {
        next = t;
    } else {
        next = cand[trace_mix(&S.rng) % (uint64_t)n];
    }
    if (next != t && next >= 0) {
        S.switches++;
        chk_record_switch(t, next);
    }
    S.turn = next;
    pthread_cond_broadcast(&S.cv);
    while (!S.done[t] && S.turn != t)
        pthread_cond_wait(&S.cv, &S.mu);
}

static int scheduled(void)
{
    return S.on && self >= 0 && !forking;
}

static void point(int in_txn)
{
    if (!scheduled() || (in_txn && !S.inside))
        return;
    int old;
    LOCK_S(old);
    enter();
    pass(self);
    UNLOCK_S(old);
}

void chk_sched_point(int in_txn)
{
    if (!S.marked)
        point(in_txn);
}

/* txn_check.h's: the program's bookkeeping assumes that no other thread
 * runs between two points it marks (a mirror of the pool updated after
 * the commit), so the baton passes only at those and where a thread must
 * wait. */
void txn_check_mark_only(void)
{
    if (!scheduled())
        return;
    int old, late;
    LOCK_S(old);
    late = S.n > 1; /* read without mu by the threads: set before they start */
    if (!late)
        S.marked = 1;
    UNLOCK_S(old);
    if (late)
        fputs("txn-crashcheck: txn_check_marked_switches() after the program's first "
              "pthread_create: ignored\n", stderr);
}

void txn_check_switch(void)
{
    point(chk_in_txn());
}

/* ---- the program's mutexes */
static void set_held(pthread_mutex_t *m, int t)
{
    for (int i = 0; i < MAX_HELD; i++)
        if (t < 0 ? S.held[i] == m : !S.held[i]) {
            S.held[i] = t < 0 ? NULL : m;
            S.holder[i] = t;
            return;
        }
    if (t >= 0) { /* not known held: another thread that wants it may run
                     and block in libc's lock, and the run hang */
        static int told;
        if (!told++)
            fprintf(stderr, "txn-crashcheck: more than %d mutexes held at once: "
                            "--threads-sched may hang\n", MAX_HELD);
    }
}

/* A lock's result that leaves the mutex held by the caller: a robust
 * mutex whose owner died is acquired too (EOWNERDEAD). */
static int acquired(int rc)
{
    return rc == 0 || rc == EOWNERDEAD;
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
    if (!scheduled() || internal(__builtin_return_address(0)))
        return SYS(sys_lock, "pthread_mutex_lock")(m);
    int old;
    LOCK_S(old);
    enter();
    if (may_switch())
        pass(self); /* a switch point before the acquire */
    int rc;
    while ((rc = SYS(sys_trylock, "pthread_mutex_trylock")(m)) == EBUSY &&
           held_by(m) >= 0 && held_by(m) != self) {
        S.wants[self] = m; /* not runnable until the holder lets go */
        pass(self);
    }
    S.wants[self] = NULL;
    if (rc == EBUSY) { /* held by a thread not scheduled: wait for it here */
        SYS(sys_unlock, "pthread_mutex_unlock")(&S.mu);
        rc = SYS(sys_lock, "pthread_mutex_lock")(m);
        SYS(sys_lock, "pthread_mutex_lock")(&S.mu);
    }
    if (acquired(rc))
        set_held(m, self);
    UNLOCK_S(old);
    return rc;
}

int pthread_mutex_trylock(pthread_mutex_t *m)
{
    if (!scheduled() || internal(__builtin_return_address(0)))
        return SYS(sys_trylock, "pthread_mutex_trylock")(m);
    int old;
    LOCK_S(old);
    enter();
    int rc = SYS(sys_trylock, "pthread_mutex_trylock")(m);
    if (acquired(rc))
        set_held(m, self);
    else if (rc == EBUSY && held_by(m) >= 0 && held_by(m) != self)
        pass(self); /* a try in a loop would spin holding the baton: the
                       holder may run (a wait, taken inside transactions) */
    UNLOCK_S(old);
    return rc;
}

int pthread_mutex_unlock(pthread_mutex_t *m)
{
    if (!scheduled() || internal(__builtin_return_address(0)))
        return SYS(sys_unlock, "pthread_mutex_unlock")(m);
    int old;
    LOCK_S(old);
    enter();
    int rc = SYS(sys_unlock, "pthread_mutex_unlock")(m);
    if (!rc) {
        set_held(m, -1);
        chk_record_unlock();
    }
    if (may_switch())
        pass(self);
    UNLOCK_S(old);
    return rc;
}

/* ---- the program's threads */
struct start {
    int t;
    void *(*fn)(void *);
    void *arg;
};

/* A thread's end, by pthread_exit, a return or a cancellation: its library
 * contexts are given back now, while it holds the baton (their release
 * stores and fences: redo1 flushes its slot's lines), not by its exit's
 * destructor racing the threads that run on; then the baton passes on for
 * good. */
static void ended(void *arg)
{
    (void)arg;
    int old;
    LOCK_S(old);
    enter();
    SYS(sys_unlock, "pthread_mutex_unlock")(&S.mu);
    /* a transaction still running is aborted here, its TXN_ON_ABORT
     * actions run with the registry's lock held: no switch of their own */
    quiet = 1;
    ctxreg_thread_end();
    quiet = 0;
    SYS(sys_lock, "pthread_mutex_lock")(&S.mu);
    for (int i = 0; i < MAX_HELD; i++) /* a thread may end holding some */
        if (S.held[i] && S.holder[i] == self)
            S.held[i] = NULL;
    S.done[self] = 1;
    pass(self);
    UNLOCK_S(old);
    self = -1;
}

static void *started(void *arg)
{
    struct start s = *(struct start *)arg;
    void *rc;
    int old;
    free(arg);
    self = s.t;
    /* its first step waits for the baton: nothing it does runs beside the
     * holder (a sanitizer's interceptor has let its creator go by now) */
    LOCK_S(old);
    enter();
    UNLOCK_S(old);
    pthread_cleanup_push(ended, NULL);
    rc = s.fn(s.arg);
    pthread_cleanup_pop(1);
    return rc;
}

int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    if (!scheduled() || internal(__builtin_return_address(0)))
        return SYS(sys_create, "pthread_create")(th, attr, fn, arg);
    struct start *s = malloc(sizeof *s);
    if (!s)
        return EAGAIN;
    int old;
    LOCK_S(old);
    enter();
    if (S.n == MAX_THREADS) {
        UNLOCK_S(old);
        free(s);
        fprintf(stderr, "txn-crashcheck: more than %d threads under --threads-sched\n",
                MAX_THREADS);
        return EAGAIN;
    }
    *s = (struct start){S.n, fn, arg};
    /* the new thread waits for the baton before its first step */
    int rc = SYS(sys_create, "pthread_create")(th, attr, started, s);
    if (rc) {
        UNLOCK_S(old);
        free(s);
        return rc;
    }
    S.tid[S.n++] = *th;
    if (may_switch())
        pass(self); /* a switch point: the new thread may run first */
    UNLOCK_S(old);
    return 0;
}

int pthread_join(pthread_t th, void **ret)
{
    if (!scheduled() || internal(__builtin_return_address(0)))
        return SYS(sys_join, "pthread_join")(th, ret);
    int old;
    LOCK_S(old);
    enter();
    int u = -1;
    for (int i = 1; i < S.n; i++)
        if (pthread_equal(S.tid[i], th))
            u = i;
    if (u >= 0) {
        if (may_switch())
            pass(self);
        S.joins[self] = u; /* not runnable until u has ended */
        while (!S.done[u])
            pass(self);
        S.joins[self] = -1;
    }
    UNLOCK_S(old);
    /* u's end has passed: what is left of its exit stores nothing */
    return SYS(sys_join, "pthread_join")(th, ret);
}

/* The main thread's pthread_exit ends it as the scheduler's thread 0 (the
 * others' ends are their start's cleanup): else it would keep the baton
 * while the process runs on. */
void pthread_exit(void *rv)
{
    if (scheduled() && self == 0 && !internal(__builtin_return_address(0)))
        ended(NULL);
    SYS(sys_exit, "pthread_exit")(rv);
    __builtin_unreachable();
}
