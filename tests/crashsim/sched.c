/* sched.c - the baton scheduler of shared workloads (WL_SHARED).
 *
 * Exactly one workload thread runs at a time: the one holding the baton.
 * The baton moves only at switch points the workload passes through
 * (sim_point, sim_point_txn, sim_lock, sim_unlock, and a thread's start
 * and end), all outside the library, and the next holder is chosen by a
 * generator seeded from the run's seed. So the order of every call into
 * the library, and with it every traced event, is a function of the seed
 * alone: a crash image can be made again by running again.
 *
 * A thread's end is a switch too, but its library context is released by
 * its exit (the context's end stores and fences: redo1 flushes the slot's
 * pending lines), after it returns: so the ended thread keeps the baton
 * until the driver has joined it (sched_reap), and the driver passes the
 * baton on for it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim.h"

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active;   /* mu (set before the threads start): a shared run */
    int inside;   /* set before the threads start: switch points inside
                     transactions are taken */
    int n;        /* set before the threads start: workload threads */
    int turn;     /* mu: the thread holding the baton, -1 when all ended */
    int ending;   /* mu: a thread that ended and keeps the baton until it is
                     joined, or -1 */
    int done[SIM_THREADS];     /* mu: thread ended */
    int wants[SIM_THREADS];    /* mu: the lock a thread waits for, or -1 */
    int holder[SIM_LOCKS];     /* mu: the thread holding a lock, or -1 */
    uint64_t rng;              /* mu (only the baton holder draws) */
    uint64_t switches;         /* mu: times the baton moved */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* The workload thread this OS thread runs, for sim_lock and sim_point. */
static _Thread_local int self = -1;

void sched_begin(int threads, uint64_t seed, int inside)
{
    pthread_mutex_lock(&S.mu);
    S.active = 1;
    S.inside = inside;
    S.n = threads;
    S.rng = seed ^ 0x6a09e667f3bcc908ull;
    S.switches = 0;
    S.ending = -1;
    for (int i = 0; i < SIM_THREADS; i++) {
        S.done[i] = i >= threads;
        S.wants[i] = -1;
    }
    for (int i = 0; i < SIM_LOCKS; i++)
        S.holder[i] = -1;
    S.turn = (int)(sim_rand(&S.rng) % (uint64_t)threads);
    pthread_mutex_unlock(&S.mu);
}

uint64_t sched_end(void)
{
    pthread_mutex_lock(&S.mu);
    S.active = 0;
    uint64_t n = S.switches;
    pthread_mutex_unlock(&S.mu);
    return n;
}

static int runnable(int t)
{
    return !S.done[t] && (S.wants[t] < 0 || S.holder[S.wants[t]] < 0);
}

/* Under mu, by the baton holder `t`: choose the next holder (t itself
 * half the time when it can go on), then wait for the baton to come back
 * unless t has ended. */
static void pass(int t)
{
    int cand[SIM_THREADS], n = 0;
    for (int i = 0; i < S.n; i++)
        if (runnable(i))
            cand[n++] = i;
    int next;
    if (n == 0) {
        for (int i = 0; i < S.n; i++)
            if (!S.done[i]) {
                fprintf(stderr, "crashsim: shared workload deadlocked (thread %d waits)\n", i);
                abort();
            }
        next = -1; /* everyone ended */
    } else if (runnable(t) && sim_rand(&S.rng) % 2) {
        next = t;
    } else {
        next = cand[sim_rand(&S.rng) % (uint64_t)n];
    }
    if (next != t)
        S.switches++;
    S.turn = next;
    pthread_cond_broadcast(&S.cv);
    while (!S.done[t] && S.turn != t)
        pthread_cond_wait(&S.cv, &S.mu);
}

void sched_enter(int t)
{
    self = t;
    pthread_mutex_lock(&S.mu);
    while (S.turn != t)
        pthread_cond_wait(&S.cv, &S.mu);
    pthread_mutex_unlock(&S.mu);
}

void sched_exit(int t, int joined)
{
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < SIM_LOCKS; i++) /* a thread that failed may hold some */
        if (S.holder[i] == t)
            S.holder[i] = -1;
    S.done[t] = 1;
    if (joined) { /* the baton stays until sched_reap has joined t */
        S.ending = t;
        pthread_cond_broadcast(&S.cv);
    } else {
        pass(t);
    }
    pthread_mutex_unlock(&S.mu);
    self = -1;
}

int sched_reap(int (*join)(int t))
{
    pthread_mutex_lock(&S.mu);
    while (S.ending < 0)
        pthread_cond_wait(&S.cv, &S.mu);
    int t = S.ending, rc;
    pthread_mutex_unlock(&S.mu);
    rc = join(t); /* its exit, context and all, while no other thread runs */
    pthread_mutex_lock(&S.mu);
    S.ending = -1;
    pass(t); /* t has ended: the next holder, and no waiting */
    pthread_mutex_unlock(&S.mu);
    return rc;
}

void sim_point(void)
{
    if (self < 0)
        return; /* not a scheduled thread: setup, or a run of its own */
    pthread_mutex_lock(&S.mu);
    pass(self);
    pthread_mutex_unlock(&S.mu);
}

void sim_point_txn(void)
{
    if (S.inside)
        sim_point();
}

void sim_lock(int i)
{
    if (self < 0)
        return;
    pthread_mutex_lock(&S.mu);
    pass(self); /* a switch point before the acquire */
    while (S.holder[i] >= 0) {
        S.wants[self] = i; /* not runnable until the holder lets go */
        pass(self);
    }
    S.wants[self] = -1;
    S.holder[i] = self;
    pthread_mutex_unlock(&S.mu);
}

void sim_unlock(int i)
{
    if (self < 0)
        return;
    pthread_mutex_lock(&S.mu);
    S.holder[i] = -1;
    pass(self);
    pthread_mutex_unlock(&S.mu);
}
