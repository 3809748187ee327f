/* block.c - the registry of clients blocked on keys (block.h).
 *
 * One list of blocked clients in the order they blocked, under one lock,
 * shared by every thread that serves connections. A write of a key wakes
 * the first client on the list that waits for that key and is not
 * already woken (FIFO per key, as Redis serves its blocked clients); the
 * woken client's owner runs its request again, which pops in its own
 * transaction or blocks again in the same place. A client that leaves
 * while woken (timeout, disconnect) passes its keys on, so a wake-up is
 * never lost with it. A signal scans the list: O(blocked clients x their
 * keys), paid only while some client is blocked (a relaxed count says so
 * without the lock).
 *
 * Invariants (asserted where relied on):
 *  1. an entry is on the list exactly while its connection's blk points
 *     to it (block_done unlinks through it);
 *  2. the list is in the order the clients blocked (wake_first's "first
 *     blocked, first served"): an entry is only ever appended, with a
 *     number above its predecessor's, and stays in place while it waits
 *     again.
 *
 * Lock order: a store transaction's stripe locks, then g.lock, then what
 * srv.wake_blocked takes (a worker's wake-up). g.lock is never held while
 * a stripe lock is taken. */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "block.h"

struct blocked {
    struct conn *c;         /* fixed */
    struct kv_slice *keys;  /* copies, fixed while listed */
    size_t n;
    long long deadline;     /* ms CLOCK_MONOTONIC, 0: none (owner only) */
    uint64_t seq;           /* order of blocking (fixed, set under g.lock) */
    _Atomic int woken;      /* set by a signal (under g.lock), cleared by
                               the owner when it waits again */
    _Atomic int unblock;    /* BLOCK_TIMEOUT or BLOCK_ERROR: CLIENT UNBLOCK
                               (set under g.lock) */
    struct blocked *prev, *next; /* the list (g.lock) */
};

static struct {
    pthread_mutex_t lock;        /* guards head, tail and the links */
    struct blocked *head, *tail; /* in the order the clients blocked */
    uint64_t seq;                /* the last entry's number */
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Atomic uint64_t nblocked; /* entries listed; read without g.lock
                                     as a hint, exact under it */

long long block_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Redis 7.0's getTimeoutFromObjectOrReply in seconds: a long double read
 * by strtold (inf too, not nan), times 1000, cast to long long; a value
 * the cast cannot hold comes out as LLONG_MIN on x86-64, hence "negative"
 * for 1e300 and inf, as redis-server answers. */
int block_timeout(struct conn *c, const struct kv_slice *arg, long long *ms)
{
    long double v;
    if (parse_ld(arg->p, arg->n, &v))
        return reply_error(&c->out, "ERR timeout is not a float or out of range"), -1;
    v *= 1000;
    if (!(v < 9223372036854775807.0L) || v <= -9223372036854775808.0L)
        return reply_error(&c->out, "ERR timeout is negative"), -1;
    long long t = (long long)v;
    if (t < 0)
        return reply_error(&c->out, "ERR timeout is negative"), -1;
    *ms = t;
    return 0;
}

enum block_state block_state(struct conn *c)
{
    struct blocked *b = c->blk;
    if (!b)
        return BLOCK_NONE;
    int u = atomic_load(&b->unblock);
    if (u)
        return (enum block_state)u;
    if (b->deadline && block_now() >= b->deadline)
        return BLOCK_TIMEOUT;
    return BLOCK_WAITING;
}

int block_error(struct conn *c)
{
    if (block_state(c) != BLOCK_ERROR)
        return 0;
    reply_error(&c->out, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
    return 1;
}

int block_nothing(struct conn *c, const struct kv_slice *keys, size_t n, long long ms)
{
    if (c->exec || block_state(c) == BLOCK_TIMEOUT) {
        buf_add(&c->out, "*-1\r\n", 5); /* RESP2's nil array */
        return 0;
    }
    return block_wait(c, keys, n, ms);
}

int block_wait(struct conn *c, const struct kv_slice *keys, size_t n, long long ms)
{
    c->blk_armed = 1;
    if (c->blk) { /* woken for nothing: wait again, in the same place */
        atomic_store(&c->blk->woken, 0);
        return 0;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += keys[i].n;
    struct blocked *b = calloc(1, sizeof *b + n * sizeof *b->keys + bytes + 1);
    if (!b) {
        c->blk_armed = 0;
        return TXN_E_NOMEM;
    }
    b->c = c;
    b->keys = (struct kv_slice *)(b + 1);
    b->n = n;
    char *p = (char *)(b->keys + n);
    for (size_t i = 0; i < n; i++) {
        memcpy(p, keys[i].p, keys[i].n);
        b->keys[i] = (struct kv_slice){p, keys[i].n};
        p += keys[i].n;
    }
    b->deadline = ms ? block_now() + ms : 0;
    if (b->deadline < 0) /* past what the clock can reach: for ever */
        b->deadline = 0;
    pthread_mutex_lock(&g.lock);
    b->seq = ++g.seq;
    assert(!g.tail || g.tail->seq < b->seq); /* invariant 2 */
    b->prev = g.tail;
    if (g.tail)
        g.tail->next = b;
    else
        g.head = b;
    g.tail = b;
    c->blk = b;
    atomic_fetch_add(&nblocked, 1);
    pthread_mutex_unlock(&g.lock);
    return 0;
}

static int has_key(const struct blocked *b, const struct kv_slice *k)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->keys[i].n == k->n && (!k->n || !memcmp(b->keys[i].p, k->p, k->n)))
            return 1;
    return 0;
}

/* Wake the first waiter on key that is not woken (g.lock held). */
static void wake_first(const struct kv_slice *key)
{
    for (struct blocked *b = g.head; b; b = b->next) {
        assert(!b->next || b->seq < b->next->seq); /* invariant 2 */
        if (atomic_load(&b->woken) || !has_key(b, key))
            continue;
        atomic_store(&b->woken, 1);
        if (srv.wake_blocked)
            srv.wake_blocked(b->c);
        return;
    }
}

void block_signal(const struct kv_slice *keys, size_t n)
{
    if (!atomic_load_explicit(&nblocked, memory_order_relaxed) || !n)
        return;
    pthread_mutex_lock(&g.lock);
    for (size_t i = 0; i < n; i++)
        wake_first(&keys[i]);
    pthread_mutex_unlock(&g.lock);
}

void block_rerun(struct conn *c)
{
    if (c->blk)
        atomic_store(&c->blk->woken, 0);
}

void block_done(struct conn *c, int pass_on)
{
    struct blocked *b = c->blk;
    c->blk_armed = 0;
    if (!b)
        return;
    assert(b->c == c); /* invariant 1 */
    pthread_mutex_lock(&g.lock);
    assert(b->prev ? b->prev->next == b : g.head == b);
    if (b->prev)
        b->prev->next = b->next;
    else
        g.head = b->next;
    if (b->next)
        b->next->prev = b->prev;
    else
        g.tail = b->prev;
    c->blk = NULL;
    atomic_fetch_sub(&nblocked, 1);
    /* a wake-up it did not take goes to the next waiter (when it popped,
     * the dispatcher signals the keys it wrote) */
    if (pass_on || atomic_load(&b->woken))
        for (size_t i = 0; i < b->n; i++)
            wake_first(&b->keys[i]);
    pthread_mutex_unlock(&g.lock);
    free(b);
}

int block_pending(struct conn *c, long long *deadline)
{
    struct blocked *b = c->blk;
    *deadline = b ? b->deadline : 0;
    return b && block_state(c) == BLOCK_WAITING && !atomic_load(&b->woken);
}

int block_unblock(uint64_t id, int error)
{
    int found = 0;
    pthread_mutex_lock(&g.lock);
    for (struct blocked *b = g.head; b; b = b->next) {
        if (b->c->id != id)
            continue;
        atomic_store(&b->unblock, error ? BLOCK_ERROR : BLOCK_TIMEOUT);
        if (srv.wake_blocked)
            srv.wake_blocked(b->c);
        found = 1;
        break;
    }
    pthread_mutex_unlock(&g.lock);
    return found;
}

uint64_t block_count(void)
{
    return atomic_load(&nblocked);
}
