/* conn.c - the state every layer shares (conn.h): the server's settings
 * and counters, the per-thread statistics, the client registry, and
 * expire_reclaim. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"

struct server srv;


/* memcached's counters of this thread (memcache.c counts, stats_publish
 * adds them up) */
_Thread_local struct mc_stats mc_thread;

/* ---- statistics */

_Thread_local uint64_t thread_commands;

/* Add `d` to a shared counter unless it is 0: a round of reads then
 * leaves the lines of the write counters alone. */
static void add(_Atomic uint64_t *to, uint64_t d)
{
    if (d)
        atomic_fetch_add_explicit(to, d, memory_order_relaxed);
}

void stats_publish(void)
{
    static _Thread_local txn_stats last;
    static _Thread_local uint64_t last_commands;
    txn_stats now;
    txn_stats_get(&now);
    add(&srv.commands, thread_commands - last_commands);
    add(&srv.commits, now.commits - last.commits);
    add(&srv.aborts, now.aborts - last.aborts);
    add(&srv.barriers, now.barriers - last.barriers);
    add(&srv.lines, now.lines_flushed - last.lines_flushed);
    add(&srv.log_bytes, now.log_bytes - last.log_bytes);
    static _Thread_local struct mc_stats last_mc;
    const uint64_t *mc = (const uint64_t *)&mc_thread, *was = (const uint64_t *)&last_mc;
    for (int i = 0; i < MC_STATS; i++)
        add(&srv.mc[i], mc[i] - was[i]);
    last_mc = mc_thread;
    last = now;
    last_commands = thread_commands;
}

/* ---- the client registry (CLIENT LIST, CLIENT ID) */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct conn *reg_head;
static uint64_t reg_next_id;

void client_register(struct conn *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c->since = (long long)ts.tv_sec;
    pthread_mutex_lock(&reg_mu);
    c->id = ++reg_next_id;
    c->reg_next = reg_head;
    if (reg_head)
        reg_head->reg_prev = c;
    reg_head = c;
    pthread_mutex_unlock(&reg_mu);
}

void client_unregister(struct conn *c)
{
    pthread_mutex_lock(&reg_mu);
    if (c->reg_prev)
        c->reg_prev->reg_next = c->reg_next;
    else if (reg_head == c)
        reg_head = c->reg_next;
    if (c->reg_next)
        c->reg_next->reg_prev = c->reg_prev;
    free(c->name);
    c->name = NULL;
    pthread_mutex_unlock(&reg_mu);
}

void clients_each(void (*fn)(struct conn *c, void *arg), void *arg)
{
    pthread_mutex_lock(&reg_mu);
    for (struct conn *c = reg_head; c; c = c->reg_next)
        fn(c, arg);
    pthread_mutex_unlock(&reg_mu);
}

void client_set_name(struct conn *c, const char *name, size_t n)
{
    char *copy = n ? strndup(name, n) : NULL;
    pthread_mutex_lock(&reg_mu);
    free(c->name);
    c->name = copy;
    pthread_mutex_unlock(&reg_mu);
}

void client_get_name(struct conn *c, void (*fn)(void *arg, const char *name), void *arg)
{
    pthread_mutex_lock(&reg_mu);
    fn(arg, c->name);
    pthread_mutex_unlock(&reg_mu);
}

/* expire_reclaim's state: one reclaimer at a time */
static pthread_mutex_t reclaim_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t reclaim_cursor;     /* guarded by reclaim_lock */
static _Atomic uint64_t reclaim_gen; /* reclaims that deleted keys */

/* Keys a first reclaim deletes at least, unless a whole pass finds fewer: room
 * for the write that asked and the next few. */
#define RECLAIM_KEYS 256

int expire_reclaim(unsigned round)
{
    struct kv_info ki;
    kv_info(srv.kv, &ki);
    if (ki.lazy_pending) { /* values DEL dropped come back before keys go */
        uint64_t f;
        int rc;
        while ((rc = kv_lazy_free(srv.kv, RECLAIM_KEYS, &f)) > 0)
            ;
        if (!rc && !txn_sync(kv_pool(srv.kv)))
            return 1;
    }
    if (!ki.expires)
        return 0;
    uint64_t gen = atomic_load(&reclaim_gen), deleted = 0, seen, d, visited = 0;
    pthread_mutex_lock(&reclaim_lock);
    if (atomic_load(&reclaim_gen) != gen) { /* another thread just made room */
        pthread_mutex_unlock(&reclaim_lock);
        return 1;
    }
    int rc = 0;
    uint64_t want = (uint64_t)RECLAIM_KEYS << (4 * (round < 8 ? round : 8));
    while (!rc && deleted < want && visited < ki.buckets) {
        rc = kv_expire_cycle(srv.kv, &reclaim_cursor, EXPIRE_BUCKETS, &d, &seen);
        deleted += d;
        visited += EXPIRE_BUCKETS;
    }
    atomic_fetch_add(&srv.expired, deleted);
    /* incll hands freed blocks back at the end of their epoch */
    if (deleted && !txn_sync(kv_pool(srv.kv)))
        atomic_fetch_add(&reclaim_gen, 1);
    pthread_mutex_unlock(&reclaim_lock);
    return deleted > 0;
}

