/* server.c - sockets, connections and the threads that serve them.
 *
 * Two ways to serve clients, picked by --io:
 *  epoll (default): --threads workers, each with its own epoll set; the
 *    main thread accepts and hands each new connection to the next worker,
 *    which owns it from then on (no locks on connections). A worker runs
 *    rounds: wait for ready sockets, read each and run every complete
 *    request it holds, then - the durability point - one txn_sync() if any
 *    write committed since the last one (make_durable), then send the
 *    round's replies. One sync per round is what lets incll batch
 *    acknowledgements; for the engines durable at commit it returns at once.
 *    For incll this is group commit with the shortest epoch that acks
 *    allow: a round that holds replies ends the epoch at once (txn_sync)
 *    instead of waiting out its 64 ms, and every write of the round, of
 *    either worker, committed before that is covered by the one epoch end;
 *    a worker that finds its writes covered by another's sync skips its own
 *    (`synced`). Ending the epoch at once costs little, so waiting to
 *    gather more writes would add latency and save nothing. --ack commit
 *    replies before the epoch ends (the paper's buffered durability: a
 *    crash loses up to one epoch).
 *  threads: a thread per connection, blocking reads, as the paper's
 *    K-V store. Each such thread holds a log slot while it lives.
 *
 * Why epoll is the default: a thread per client pays a wake-up and a
 * context switch per request, where a worker serves every ready client in
 * one epoll_wait and sends their replies in one pass. Why main.c leaves
 * one CPU to the clients and a worker polls (--spin-us) before it sleeps:
 * a client that writes to a sleeping worker pays for the wake-up in its
 * own sends, and on a small machine a worker faster than its clients then
 * makes them slower. docs/kvstore.md has the measurements behind both.
 *
 * Flow control: a connection whose replies pile up past OUT_HIGH stops
 * running requests and stops being read until they are sent, so a
 * pipelining client that does not read cannot grow the server's memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "block.h"
#include "commands.h"
#include "memcache.h"
#include "pubsub.h"
#include "server.h"

#define READ_CHUNK (16u << 10)
#define OUT_HIGH (1u << 20)   /* replies waiting before a client is paused */
#define KEEP_BUF (1u << 20)   /* larger buffers are freed once empty */
#define MAX_EVENTS 256

static int unix_fd = -1, tcp_fd = -1, mc_unix_fd = -1, mc_tcp_fd = -1;
/* A connection handed to a worker or thread: its descriptor, with this bit
 * set when it came through memcached's listeners. */
#define FD_MC (1 << 30)
/* Accepting is paused while the process is out of descriptors
 * (accept_paused); the thread that closes a connection then writes
 * resume_fd, so the accept loop sleeps instead of spinning on a listening
 * socket that stays readable. */
static int resume_fd = -1;
static _Atomic int accept_paused;
static _Thread_local uint64_t held; /* requests this thread ran since its
                                       last acknowledgement point */

/* ---- one connection, whoever serves it */

/* An address as Redis's CLIENT LIST writes it: ip:port, [ip6]:port, or
 * a UNIX socket's path:0. */
static void addr_text(const struct sockaddr_storage *a, char *out, size_t n)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const void *)a;
        inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof ip);
        snprintf(out, n, "%s:%u", ip, ntohs(v4->sin_port));
    } else if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const void *)a;
        inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof ip);
        snprintf(out, n, "[%s]:%u", ip, ntohs(v6->sin6_port));
    } else {
        snprintf(out, n, "%s:0", srv.unix_path ? srv.unix_path : "");
    }
}

static struct conn *conn_new(int fd)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd & ~FD_MC;
    c->mc = (fd & FD_MC) != 0;
    c->wake_fd = -1;
    struct sockaddr_storage a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    if (getpeername(c->fd, (struct sockaddr *)&a, &len))
        a.ss_family = AF_UNIX;
    addr_text(&a, c->addr, sizeof c->addr);
    len = sizeof a;
    memset(&a, 0, sizeof a);
    if (getsockname(c->fd, (struct sockaddr *)&a, &len))
        a.ss_family = AF_UNIX;
    addr_text(&a, c->laddr, sizeof c->laddr);
    resp_init(&c->rp);
    client_register(c);
    return c;
}

/* A descriptor was freed: wake the accept loop if it waits for one. */
static void fd_freed(void)
{
    uint64_t one = 1;
    if (atomic_exchange(&accept_paused, 0) && write(resume_fd, &one, sizeof one) < 0)
        (void)0; /* the accept loop also retries on a timer */
}

/* A client's descriptor that never became a connection. */
static void client_drop(int fd)
{
    close(fd);
    fd_freed();
    atomic_fetch_sub(&srv.clients, 1);
}

/* Close the connection and free what it holds, but not c itself. */
static void conn_release(struct conn *c)
{
    block_done(c, 0);     /* no writer wakes c after this */
    pubsub_forget(c);     /* no publisher reaches c after this */
    client_unregister(c); /* nor CLIENT KILL, before its fd is closed */
    close(c->fd);
    fd_freed();
    buf_free(&c->in);
    buf_free(&c->out);
    buf_free(&c->pub_held);
    if (c->wake_fd >= 0)
        close(c->wake_fd);
    resp_free(&c->rp);
    free(c->argv);
    multi_free(c);
    atomic_fetch_sub(&srv.clients, 1);
}

static void conn_free(struct conn *c)
{
    conn_release(c);
    free(c);
}

/* Read what the socket holds. Returns -1 when the connection is over
 * (EOF, error, no memory), else 0. */
static int conn_read(struct conn *c)
{
    size_t want = c->rp.need > READ_CHUNK ? c->rp.need : READ_CHUNK;
    if (c->start > 0 && c->in.cap - c->in.len < want) {
        /* keep the unfinished request contiguous, at the front */
        memmove(c->in.p, c->in.p + c->start, c->in.len - c->start);
        c->in.len -= c->start;
        c->start = 0;
    }
    if (buf_reserve(&c->in, want))
        return -1;
    ssize_t r = read(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len);
    if (r > 0) {
        c->in.len += (size_t)r;
        return 0;
    }
    return r < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1;
}

/* Run the complete requests in the input buffer, in order, until replies
 * pile up (stalled), the connection is to close or a request blocks (it
 * stays first in the buffer: run again once due, block.h). */
static void conn_process(struct conn *c)
{
    long long deadline;
    if (block_pending(c, &deadline))
        return; /* what came meanwhile waits behind the blocked request */
    c->stalled = 0;
    c->paused = 0;
    while (!c->closing) {
        if (c->out.len - c->sent >= OUT_HIGH) {
            c->stalled = 1;
            break;
        }
        char *req = c->in.p + c->start;
        size_t avail = c->in.len - c->start;
        if (c->mc) {
            size_t used = avail ? mc_run(c, req, avail) : 0;
            if (!used)
                break;
            c->start += used;
            held++;
            continue;
        }
        if (pubsub_subscribed(c)) {
            pubsub_drain(c); /* messages published before this request first */
            if (c->closing) /* dropped for owing too much */
                break;
        }
        enum resp_status st = resp_parse(&c->rp, req, avail, &srv.lim);
        if (st == RESP_MORE) {
            if (avail > srv.max_query) {
                reply_error(&c->out, "ERR Protocol error: request larger than "
                                     "client-query-buffer-limit");
                c->closing = 1;
            }
            break;
        }
        if (st == RESP_ERROR) {
            reply_error(&c->out, "ERR %s", c->rp.err);
            c->closing = 1;
            break;
        }
        if (st == RESP_DONE) {
            if (c->rp.argc > c->argv_cap) {
                struct kv_slice *a = realloc(c->argv, c->rp.argc * sizeof *a);
                if (!a) {
                    c->closing = 1;
                    break;
                }
                c->argv = a;
                c->argv_cap = c->rp.argc;
            }
            for (size_t i = 0; i < c->rp.argc; i++)
                c->argv[i] = (struct kv_slice){req + c->rp.argv[i].off, c->rp.argv[i].len};
            long long left;
            while (command_paused(c->rp.argc, c->argv, &left)) {
                if (srv.io == IO_EPOLL) { /* parsed again once let through */
                    c->paused = 1;
                    resp_reset(&c->rp);
                    goto held_back;
                }
                usleep(left < 10 ? (useconds_t)left * 1000 : 10000); /* its own thread */
            }
            command_run(c, c->rp.argc, c->argv);
            held++;
            if (c->blk_armed) { /* blocked: parsed again when run again */
                resp_reset(&c->rp);
                break;
            }
        }
        c->start += c->rp.pos;
        resp_reset(&c->rp);
    }
held_back:
    if (c->out.oom)
        c->closing = 1, c->out.len = c->sent = 0;
    if (c->start == c->in.len) {
        c->start = c->in.len = 0;
        if (c->in.cap > KEEP_BUF)
            buf_free(&c->in);
    }
}

/* Send pending replies: 0 all sent, 1 the socket is full, -1 error. */
static int conn_send(struct conn *c)
{
    while (c->sent < c->out.len) {
        ssize_t w = send(c->fd, c->out.p + c->sent, c->out.len - c->sent, MSG_NOSIGNAL);
        if (w > 0)
            c->sent += (size_t)w;
        else if (w < 0 && errno == EINTR)
            continue;
        else
            return w < 0 && errno == EAGAIN ? 1 : -1;
    }
    c->sent = c->out.len = 0;
    if (c->out.cap > KEEP_BUF)
        buf_free(&c->out);
    return 0;
}

/* The acknowledgement point, before replies leave: every write they may
 * reflect must be durable - the client's own, and any other committed so
 * far, since a GET may have read another worker's fresh value. One
 * txn_sync covers all of them; none is needed if no write committed since
 * the last one (kv_commits). Returns -1 if they could not be made durable. */
static _Atomic uint64_t synced; /* kv_commits() covered by a past txn_sync */

static int make_durable(void)
{
    uint64_t n = held;
    held = 0;
    if (srv.ack != ACK_SYNC)
        return 0;
    uint64_t seen = kv_commits(srv.kv), cur = atomic_load(&synced);
    if (seen <= cur)
        return 0;
    atomic_fetch_add_explicit(&srv.ack_syncs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&srv.ack_held, n, memory_order_relaxed);
    if (txn_sync(kv_pool(srv.kv)))
        return -1;
    while (cur < seen && !atomic_compare_exchange_weak(&synced, &cur, seen))
        ;
    return 0;
}

/* ---- epoll workers */

struct worker {
    pthread_t th;
    int epfd, wake_fd;
    pthread_mutex_t qlock; /* guards q, mail and the conns' mail links */
    int *q;                /* fds from the acceptor */
    size_t qn, qcap;
    struct conn *mail;     /* connections Pub/Sub sent messages to */
    struct conn *all;    /* every connection this worker owns */
    struct conn *flush;  /* to send to (or close) at the end of the round */
    struct conn *resume; /* stalled, replies sent: run their requests */
    struct conn *paused; /* held back by CLIENT PAUSE (next_resume links) */
    struct conn *blocked; /* blocked on keys (next_blocked links) */
    long long blk_next;   /* the nearest of their deadlines (ms, 0: none) */
    _Atomic int blk_poke; /* one of them was woken (srv.wake_blocked) */
    int init_rc;
};

static struct worker *workers;
static pthread_barrier_t start_barrier;

static void set_events(struct worker *w, struct conn *c, unsigned events)
{
    if (c->events == events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (!epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev))
        c->events = events;
}

static void list_flush(struct worker *w, struct conn *c)
{
    if (c->listed)
        return;
    c->listed = 1;
    c->next_flush = w->flush;
    w->flush = c;
}

static void worker_close(struct worker *w, struct conn *c)
{
    if (c->blocked_listed)
        for (struct conn **at = &w->blocked; *at; at = &(*at)->next_blocked)
            if (*at == c) {
                *at = c->next_blocked;
                break;
            }
    if (c->pause_listed)
        for (struct conn **at = &w->paused; *at; at = &(*at)->next_resume)
            if (*at == c) {
                *at = c->next_resume;
                break;
            }
    /* off the mail list once no publisher can list it again (it may be
     * listed after its last UNSUBSCRIBE: a message came first) */
    pubsub_forget(c);
    pthread_mutex_lock(&w->qlock);
    if (c->mail_listed)
        for (struct conn **at = &w->mail; *at; at = &(*at)->next_mail)
            if (*at == c) {
                *at = c->next_mail;
                break;
            }
    pthread_mutex_unlock(&w->qlock);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->all = c->next;
    if (c->next)
        c->next->prev = c->prev;
    conn_free(c); /* close() also takes it out of the epoll set */
}

static void wake(struct worker *w);

static void worker_adopt(struct worker *w)
{
    uint64_t n;
    if (read(w->wake_fd, &n, sizeof n) < 0 && errno != EAGAIN)
        return;
    pthread_mutex_lock(&w->qlock);
    int *q = w->q;
    size_t qn = w->qn;
    w->q = NULL;
    w->qn = w->qcap = 0;
    pthread_mutex_unlock(&w->qlock);
    /* one at a time under the lock: a publisher may list a connection
     * again meanwhile; a bounded number a wake-up, then wake again */
    for (int k = 0;; k++) {
        pthread_mutex_lock(&w->qlock);
        struct conn *c = k < 1024 ? w->mail : NULL;
        if (c) {
            w->mail = c->next_mail;
            c->mail_listed = 0;
        }
        int more = !c && w->mail;
        pthread_mutex_unlock(&w->qlock);
        if (!c) {
            if (more)
                wake(w);
            break;
        }
        pubsub_drain(c);
        list_flush(w, c);
    }
    for (size_t i = 0; i < qn; i++) {
        struct conn *c = conn_new(q[i]);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (!c || epoll_ctl(w->epfd, EPOLL_CTL_ADD, q[i] & ~FD_MC, &ev)) {
            if (c)
                conn_free(c);
            else
                client_drop(q[i] & ~FD_MC);
            continue;
        }
        c->events = EPOLLIN;
        c->owner = w;
        c->next = w->all;
        if (w->all)
            w->all->prev = c;
        w->all = c;
    }
    free(q);
}

/* End of a round: make the round's writes durable, then send. */
static void round_end(struct worker *w)
{
    int lost = w->flush && make_durable();
    struct conn *next;
    for (struct conn *c = w->flush; c; c = next) {
        next = c->next_flush;
        c->listed = 0;
        if (lost) /* never send what may reflect a write that is not durable */
            c->closing = 1, c->out.len = c->sent = 0;
        int r = conn_send(c);
        if (r < 0 || (r == 0 && c->closing)) {
            worker_close(w, c);
            continue;
        }
        set_events(w, c, r ? EPOLLOUT : EPOLLIN);
        if (c->blk && !c->blocked_listed) {
            c->blocked_listed = 1;
            c->next_blocked = w->blocked;
            w->blocked = c;
            if (c->blk_armed)
                atomic_store(&w->blk_poke, 1); /* its deadline: looked at next round */
        }
        if (!r && c->stalled) {
            c->next_resume = w->resume;
            w->resume = c;
        } else if (c->paused && !c->pause_listed) {
            c->pause_listed = 1;
            c->next_resume = w->paused;
            w->paused = c;
        }
    }
    w->flush = NULL;
    stats_publish();
}

/* The events of the next round. After a round that had work the worker
 * polls for up to srv.spin_ns before it sleeps in epoll_wait, so that
 * clients that stream requests need not wake it (see the head of this
 * file). After a round without work it sleeps at once. */
static int wait_events(struct worker *w, struct epoll_event *ev, int busy)
{
    int idle = -1; /* how long to sleep: for ever, or until a pause ends */
    if (w->paused) {
        long long left = command_pause_left();
        idle = left > INT32_MAX ? INT32_MAX : (int)left;
    }
    if (w->blk_next) {
        long long left = w->blk_next - block_now();
        left = left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : left;
        if (idle < 0 || left < idle)
            idle = (int)left;
    }
    if (w->resume || atomic_load(&w->blk_poke))
        idle = 0;
    if (!busy || !srv.spin_ns || idle >= 0)
        return epoll_wait(w->epfd, ev, MAX_EVENTS, idle);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int n = epoll_wait(w->epfd, ev, MAX_EVENTS, 0);
        if (n || w->resume)
            return n;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) >= srv.spin_ns)
            break;
    }
    return epoll_wait(w->epfd, ev, MAX_EVENTS, -1);
}

/* Run again the blocked requests that are due (woken, timed out,
 * unblocked); drop from the list the connections no longer blocked; note
 * the nearest deadline of those still waiting. */
static void blocked_run(struct worker *w)
{
    long long next = 0, d;
    for (struct conn **at = &w->blocked; *at;) {
        struct conn *c = *at;
        if (c->blk && !block_pending(c, &d)) {
            conn_process(c);
            list_flush(w, c);
        }
        if (!c->blk) {
            *at = c->next_blocked;
            c->blocked_listed = 0;
            continue;
        }
        block_pending(c, &d);
        if (d && (!next || d < next))
            next = d;
        at = &c->next_blocked;
    }
    w->blk_next = next;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    txn *tx;
    /* take a log slot now, so that too few slots fail at start-up */
    if (!(w->init_rc = txn_begin(kv_pool(srv.kv), &tx)))
        txn_abort(tx);
    pthread_barrier_wait(&start_barrier);
    struct epoll_event ev[MAX_EVENTS];
    int busy = 0; /* the last round had events */
    while (!w->init_rc && !atomic_load(&srv.stopping)) {
        int n = wait_events(w, ev, busy);
        if (n < 0 && errno != EINTR)
            break;
        busy = n > 0;
        /* the held back: tried again each time the worker wakes (the
         * pause's end is its timeout; CLIENT UNPAUSE wakes it) */
        while (w->paused) {
            struct conn *p = w->paused;
            w->paused = p->next_resume;
            p->pause_listed = 0;
            p->next_resume = w->resume;
            w->resume = p;
        }
        if (atomic_exchange(&w->blk_poke, 0) || (w->blk_next && block_now() >= w->blk_next))
            blocked_run(w);
        struct conn *r = w->resume;
        w->resume = NULL;
        for (struct conn *next; r; r = next) {
            next = r->next_resume;
            conn_process(r);
            list_flush(w, r);
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = ev[i].data.ptr;
            if (!c) {
                worker_adopt(w);
                continue;
            }
            if ((c->events & EPOLLIN) && (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                if (conn_read(c))
                    c->closing = 1; /* EOF: send what is owed, then close */
                else
                    conn_process(c);
            } else if (ev[i].events & (EPOLLHUP | EPOLLERR)) {
                c->closing = 1, c->out.len = c->sent = 0;
            }
            list_flush(w, c);
        }
        round_end(w);
    }
    while (w->all) {
        conn_send(w->all); /* a last try, without waiting */
        worker_close(w, w->all);
    }
    return NULL;
}

static unsigned nworkers; /* started: workers_stop joins them */

/* Start the workers. Returns -1 if one could not take a log slot: the
 * others run until workers_stop, like after a successful start. */
static int workers_start(void)
{
    workers = calloc(srv.threads, sizeof *workers);
    if (workers && pthread_barrier_init(&start_barrier, NULL, srv.threads + 1)) {
        free(workers);
        workers = NULL;
    }
    if (!workers)
        return -1;
    for (unsigned i = 0; i < srv.threads; i++) {
        struct worker *w = &workers[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        pthread_mutex_init(&w->qlock, NULL);
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->epfd < 0 || w->wake_fd < 0 ||
            epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &ev) ||
            pthread_create(&w->th, NULL, worker_main, w)) {
            perror("kvstore: worker");
            exit(1); /* start-up only: nothing is open for clients yet */
        }
    }
    nworkers = srv.threads;
    pthread_barrier_wait(&start_barrier);
    for (unsigned i = 0; i < srv.threads; i++)
        if (workers[i].init_rc) {
            fprintf(stderr, "kvstore: worker %u: %s\n", i, txn_strerror(workers[i].init_rc));
            return -1;
        }
    return 0;
}

static void wake(struct worker *w)
{
    uint64_t one = 1;
    if (write(w->wake_fd, &one, sizeof one) < 0)
        perror("kvstore: wake");
}

/* srv.wake_all of the epoll workers (CLIENT UNPAUSE) */
static void wake_workers(void)
{
    for (unsigned i = 0; i < nworkers; i++)
        wake(&workers[i]);
}

/* srv.wake_blocked of the epoll workers (block.c) */
static void wake_blocked_worker(struct conn *c)
{
    struct worker *w = c->owner;
    if (!atomic_exchange(&w->blk_poke, 1))
        wake(w);
}

/* srv.wake_conn of the epoll workers (pubsub.c) */
static void wake_conn(struct conn *c)
{
    struct worker *w = c->owner;
    pthread_mutex_lock(&w->qlock);
    int listed = c->mail_listed;
    if (!listed) {
        c->mail_listed = 1;
        c->next_mail = w->mail;
        w->mail = c;
    }
    pthread_mutex_unlock(&w->qlock);
    if (!listed)
        wake(w);
}

static void workers_hand(int fd)
{
    static unsigned next;
    struct worker *w = &workers[next++ % srv.threads];
    pthread_mutex_lock(&w->qlock);
    if (w->qn == w->qcap) {
        size_t cap = w->qcap ? 2 * w->qcap : 16;
        int *q = realloc(w->q, cap * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&w->qlock);
            client_drop(fd);
            return;
        }
        w->q = q;
        w->qcap = cap;
    }
    w->q[w->qn++] = fd;
    pthread_mutex_unlock(&w->qlock);
    wake(w);
}

static void workers_stop(void)
{
    if (!nworkers)
        return;
    for (unsigned i = 0; i < nworkers; i++)
        wake(&workers[i]);
    for (unsigned i = 0; i < nworkers; i++) {
        struct worker *w = &workers[i];
        pthread_join(w->th, NULL);
        for (size_t k = 0; k < w->qn; k++)
            close(w->q[k]);
        free(w->q);
        close(w->epfd);
        close(w->wake_fd);
        pthread_mutex_destroy(&w->qlock);
    }
    pthread_barrier_destroy(&start_barrier);
    free(workers);
    workers = NULL;
    nworkers = 0;
}

/* ---- a thread per connection */

/* Connection threads are joined, not detached: a thread that has left
 * threads_all still ends its life (its txn context is given back as it
 * exits), and server_run must not return, nor the pool close, before. */
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t threads_gone = PTHREAD_COND_INITIALIZER;
static struct conn *threads_all;  /* live connections, for shutdown */
static struct conn *threads_done; /* their threads ended or ending: to join */

/* srv.wake_blocked of --io threads (block.c) */
static void wake_blocked_thread(struct conn *c)
{
    uint64_t one = 1;
    int fd = atomic_load(&c->wake_fd); /* -1: its thread polls (blocked_sleep) */
    if (fd >= 0 && write(fd, &one, sizeof one) < 0)
        perror("kvstore: wake");
}

/* A blocked connection's thread waits for its wake-up, its deadline or
 * its socket (read on, so that a client that hangs up is seen): -1 when
 * the connection is over, else 0. Its eventfd is made when it first
 * blocks (a connection that never blocks holds one descriptor, which the
 * client cap counts on); the waker reads wake_fd after setting the flag
 * that block_pending reads after wake_fd is set, so one of them sees the
 * other. Without a descriptor to spare it looks every 10 ms. */
static int blocked_sleep(struct conn *c)
{
    long long d;
    if (atomic_load(&c->wake_fd) < 0)
        atomic_store(&c->wake_fd, eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!block_pending(c, &d))
        return 0;
    int wfd = atomic_load(&c->wake_fd);
    struct pollfd pf[2] = {{c->fd, POLLIN, 0}, {wfd, POLLIN, 0}};
    long long left = d ? d - block_now() : -1;
    if (d && left < 0)
        left = 0;
    if (wfd < 0 && (left < 0 || left > 10))
        left = 10;
    int n = poll(pf, 2, left > INT32_MAX ? INT32_MAX : (int)left);
    uint64_t v;
    if (n > 0 && pf[1].revents && read(wfd, &v, sizeof v) < 0)
        (void)0; /* another wake-up drained it */
    if (n > 0 && pf[0].revents) {
        int fl = fcntl(c->fd, F_GETFL);
        /* a read that may find nothing must not wait: poll said readable,
         * yet stay safe against a spurious wake-up */
        if (fl >= 0 && !fcntl(c->fd, F_SETFL, fl | O_NONBLOCK)) {
            int r = conn_read(c);
            if (fcntl(c->fd, F_SETFL, fl) || r)
                return -1;
        }
    }
    return 0;
}

static void *conn_thread(void *arg)
{
    struct conn *c = arg;
    while (!c->closing && !(c->blk ? blocked_sleep(c) : conn_read(c))) {
        do {
            conn_process(c);
            if (c->out.len > c->sent && make_durable())
                c->closing = 1, c->out.len = c->sent = 0;
            if (conn_send(c))
                c->closing = 1;
        } while (c->stalled && !c->closing);
        stats_publish();
    }
    pthread_mutex_lock(&threads_lock); /* threads_stop shuts fds in the list */
    conn_release(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        threads_all = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = threads_done;
    threads_done = c;
    pthread_cond_broadcast(&threads_gone);
    pthread_mutex_unlock(&threads_lock);
    return NULL;
}

/* Join the threads of the connections that ended (they no longer take
 * threads_lock, so this waits at most for their exit). */
static void threads_reap(void)
{
    pthread_mutex_lock(&threads_lock);
    struct conn *c = threads_done, *next;
    threads_done = NULL;
    pthread_mutex_unlock(&threads_lock);
    for (; c; c = next) {
        next = c->next;
        pthread_join(c->th, NULL);
        free(c);
    }
}

static void threads_hand(int fd)
{
    static pthread_attr_t attr;
    static int attr_ok;
    if (!attr_ok) {
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1u << 20);
        attr_ok = 1;
    }
    threads_reap();
    int fl = fcntl(fd & ~FD_MC, F_GETFL);
    struct conn *c =
        fl < 0 || fcntl(fd & ~FD_MC, F_SETFL, fl & ~O_NONBLOCK) ? NULL : conn_new(fd);
    if (!c) {
        client_drop(fd & ~FD_MC);
        return;
    }
    pthread_mutex_lock(&threads_lock);
    c->next = threads_all;
    if (threads_all)
        threads_all->prev = c;
    threads_all = c;
    if (pthread_create(&c->th, &attr, conn_thread, c)) {
        threads_all = c->next;
        if (c->next)
            c->next->prev = NULL;
        conn_free(c);
    }
    pthread_mutex_unlock(&threads_lock);
}

/* Wake every connection thread out of read() and join them all. */
static void threads_stop(void)
{
    pthread_mutex_lock(&threads_lock);
    for (struct conn *c = threads_all; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    while (threads_all)
        pthread_cond_wait(&threads_gone, &threads_lock);
    pthread_mutex_unlock(&threads_lock);
    threads_reap();
}

/* ---- listening and accepting */

static int listen_unix(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        fprintf(stderr, "kvstore: unix socket path too long: %s\n", path);
        return -1;
    }
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    /* a socket file left by a killed server is stale if nobody answers */
    struct stat st;
    if (!stat(path, &st) && S_ISSOCK(st.st_mode)) {
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int alive = probe >= 0 && !connect(probe, (struct sockaddr *)&a, sizeof a);
        if (probe >= 0)
            close(probe);
        if (!alive)
            unlink(path);
    }
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 511)) {
        fprintf(stderr, "kvstore: unix socket %s: %s\n", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int listen_tcp(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 511)) {
        fprintf(stderr, "kvstore: 127.0.0.1:%d: %s\n", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int server_listen(void)
{
    if ((srv.unix_path && (unix_fd = listen_unix(srv.unix_path)) < 0) ||
        (srv.port && (tcp_fd = listen_tcp(srv.port)) < 0) ||
        (srv.mc_unix_path && (mc_unix_fd = listen_unix(srv.mc_unix_path)) < 0) ||
        (srv.mc_port && (mc_tcp_fd = listen_tcp(srv.mc_port)) < 0)) {
        server_unlisten();
        return -1;
    }
    return 0;
}

void server_unlisten(void)
{
    if (unix_fd >= 0) {
        close(unix_fd);
        unlink(srv.unix_path);
    }
    if (tcp_fd >= 0)
        close(tcp_fd);
    if (mc_unix_fd >= 0) {
        close(mc_unix_fd);
        unlink(srv.mc_unix_path);
    }
    if (mc_tcp_fd >= 0)
        close(mc_tcp_fd);
    unix_fd = tcp_fd = mc_unix_fd = mc_tcp_fd = -1;
}

/* Accept what lfd holds. Returns -1 when the process ran out of
 * descriptors (accept_paused is then set), else 0. */
static int accept_all(int lfd)
{
    int mc = lfd == mc_unix_fd || lfd == mc_tcp_fd;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
            /* set the flag before the retry: a descriptor freed after the
             * retry failed finds it set and wakes us */
            atomic_store(&accept_paused, 1);
            fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            if (fd < 0 && (errno == EMFILE || errno == ENFILE))
                return -1;
            atomic_store(&accept_paused, 0);
        }
        if (fd < 0)
            return 0; /* EAGAIN, or a client gone before we took it */
        atomic_fetch_add(&srv.conns_total, 1);
        if (atomic_load(&srv.clients) >= srv.max_clients) {
            /* each protocol's own answer (memcached's, for -c) */
            const char *full = mc ? "ERROR Too many open connections\r\n"
                                  : "-ERR max number of clients reached\r\n";
            if (send(fd, full, strlen(full), MSG_NOSIGNAL) < 0)
                (void)0; /* it is being closed either way */
            close(fd);
            atomic_fetch_add(&srv.rejected, 1);
            continue;
        }
        if (lfd == tcp_fd || lfd == mc_tcp_fd) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        atomic_fetch_add(&srv.clients, 1);
        if (srv.io == IO_EPOLL)
            workers_hand(fd | (mc ? FD_MC : 0));
        else
            threads_hand(fd | (mc ? FD_MC : 0));
    }
}

/* Descriptors the server keeps for itself besides its clients': as
 * Redis's 32 (standard streams, listeners, signalfd and eventfds, the
 * pool, a client accepted only to be refused), plus an epoll set and an
 * eventfd per worker. */
#define RESERVED_FDS 32u

void server_cap_clients(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur == RLIM_INFINITY)
        return;
    unsigned long long own = RESERVED_FDS + (srv.io == IO_EPOLL ? 2ull * srv.threads : 0);
    unsigned long long want = srv.max_clients + own;
    if (r.rlim_cur >= want)
        return;
    unsigned cap = r.rlim_cur > own ? (unsigned)(r.rlim_cur - own) : 1;
    fprintf(stderr,
            "kvstore: --max-clients %u needs %llu file descriptors, but the open file "
            "limit is %llu: serving at most %u clients (%llu descriptors kept for the "
            "server); raise 'ulimit -n' to serve more\n",
            srv.max_clients, want, (unsigned long long)r.rlim_cur, cap, own);
    srv.max_clients = cap;
}

/* While accepting is paused the loop also retries this often: ENFILE is
 * the whole system's, and another process's close wakes nobody here. */
#define PAUSED_RETRY_MS 100

/* ---- active expiry, adaptive as Redis 7's activeExpireCycle is (the
 * design; docs/kvstore.md section 19): a cycle goes on while many of the
 * keys it sees have expired, within a time budget, so that it keeps up
 * with keys that expire as fast as they are written and costs little
 * when few do. Reads delete what they find expired (store.h), and a write
 * that finds the pool full reclaims first (expire_reclaim). */
#define EXPIRE_PERIOD_MS 100
#define EXPIRE_BUSY_MS 25
#define EXPIRE_BUDGET_MS 25
/* Lazy free (store.h's kv_lazy_free): objects a step frees, each step a
 * transaction holding one stripe, so a client of that stripe waits for at
 * most one step (docs/kvstore.md, lazy free) */
#define LAZY_BUDGET 64

static pthread_t expire_th;
static int expire_fd = -1; /* eventfd: wakes the thread to stop */

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One cycle from *cursor: 1 if it ran out of budget while more than a
 * quarter of the keys of its last step that saw keys had expired (*stale,
 * kept from cycle to cycle: a step over empty buckets says nothing, so
 * the last few expired keys of a sparse table are still chased). */
static int expire_cycle(uint64_t *cursor, int *stale)
{
    struct kv_info ki;
    kv_info(srv.kv, &ki);
    if (!ki.expires)
        return 0;
    uint64_t start = mono_ms(), deleted, seen;
    for (;;) {
        if (kv_expire_cycle(srv.kv, cursor, EXPIRE_BUCKETS, &deleted, &seen))
            return 0;
        atomic_fetch_add(&srv.expired, deleted);
        if (seen)
            *stale = deleted * 4 > seen;
        if (!*stale || atomic_load(&srv.stopping))
            return 0;
        if (mono_ms() - start >= EXPIRE_BUDGET_MS)
            return 1;
    }
}

/* Free what DEL, expiry and overwrites dropped, step by step, for at most
 * EXPIRE_BUDGET_MS: 1 if some is still pending. */
static int lazy_cycle(void)
{
    struct kv_info ki;
    kv_info(srv.kv, &ki);
    if (!ki.lazy_pending)
        return 0;
    uint64_t start = mono_ms(), freed;
    int more;
    while ((more = kv_lazy_free(srv.kv, LAZY_BUDGET, &freed)) > 0 &&
           !atomic_load(&srv.stopping) && mono_ms() - start < EXPIRE_BUDGET_MS)
        ;
    /* incll and redo1 hand freed blocks back once a sync has passed them */
    txn_sync(kv_pool(srv.kv));
    return more > 0;
}

static void *expire_main(void *arg)
{
    (void)arg;
    uint64_t cursor = 0;
    int busy = 0, lazy = 0, stale = 0;
    struct pollfd pf = {expire_fd, POLLIN, 0};
    while (!atomic_load(&srv.stopping) &&
           poll(&pf, 1, lazy ? 0 : busy ? EXPIRE_BUSY_MS : EXPIRE_PERIOD_MS) >= 0 &&
           !pf.revents) {
        lazy = lazy_cycle();
        busy = expire_cycle(&cursor, &stale);
        stats_publish();
    }
    return NULL;
}

static int expire_start(void)
{
    if ((expire_fd = eventfd(0, EFD_CLOEXEC)) < 0)
        return -1;
    if (pthread_create(&expire_th, NULL, expire_main, NULL)) {
        close(expire_fd);
        expire_fd = -1;
        return -1;
    }
    return 0;
}

static void expire_stop(void)
{
    uint64_t one = 1;
    if (expire_fd < 0)
        return;
    if (write(expire_fd, &one, sizeof one) < 0)
        (void)0; /* stopping is set: it ends at its next wake-up anyway */
    pthread_join(expire_th, NULL);
    close(expire_fd);
    expire_fd = -1;
}

int server_run(void)
{
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    /* blocked in every thread (they inherit the mask): only signalfd sees
     * them, in the accept loop, which can then close the pool cleanly */
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sfd = signalfd(-1, &stop, SFD_CLOEXEC), rc = 0;
    srv.stop_fd = eventfd(0, EFD_CLOEXEC);
    resume_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    srv.wake_conn = srv.io == IO_EPOLL ? wake_conn : NULL;
    srv.wake_all = srv.io == IO_EPOLL ? wake_workers : NULL;
    srv.wake_blocked = srv.io == IO_EPOLL ? wake_blocked_worker : wake_blocked_thread;
    if (sfd < 0 || srv.stop_fd < 0 || resume_fd < 0 ||
        (srv.io == IO_EPOLL && workers_start()) || expire_start())
        rc = -1;
    struct pollfd pf[7] = {{sfd, POLLIN, 0},       {srv.stop_fd, POLLIN, 0},
                           {resume_fd, POLLIN, 0}, {unix_fd, POLLIN, 0},
                           {tcp_fd, POLLIN, 0},    {mc_unix_fd, POLLIN, 0},
                           {mc_tcp_fd, POLLIN, 0}};
    int paused = 0;
    while (!rc) {
        if (poll(pf, 7, paused ? PAUSED_RETRY_MS : -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (pf[0].revents || pf[1].revents)
            break;
        uint64_t n;
        if (pf[2].revents && read(resume_fd, &n, sizeof n) < 0)
            (void)0; /* drained by another wake-up */
        int resumed = paused; /* a descriptor was freed, or the retry timer */
        if (resumed) {
            paused = 0;
            pf[3].fd = unix_fd, pf[4].fd = tcp_fd, pf[5].fd = mc_unix_fd, pf[6].fd = mc_tcp_fd;
        }
        for (int i = 3; i < 7 && !paused; i++)
            if (pf[i].fd >= 0 && (resumed || pf[i].revents) && accept_all(pf[i].fd))
                paused = 1;
        if (paused) /* poll ignores negative descriptors */
            pf[3].fd = pf[4].fd = pf[5].fd = pf[6].fd = -1;
    }
    atomic_store(&srv.stopping, 1);
    server_unlisten();
    expire_stop();
    if (srv.io == IO_EPOLL)
        workers_stop();
    else
        threads_stop();
    if (sfd >= 0)
        close(sfd);
    if (srv.stop_fd >= 0)
        close(srv.stop_fd);
    if (resume_fd >= 0)
        close(resume_fd);
    resume_fd = -1;
    return rc;
}
