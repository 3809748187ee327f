/* conn.h - what every layer of the store's files shares: the server's
 * settings and counters (srv), a connection, the client registry, and
 * the store's upkeep that any request may need (expire_reclaim). Above
 * reply.h, resp.h and store.h, below the commands (cmd.h) and the network
 * (server.h). */
#ifndef KV_CONN_H
#define KV_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "reply.h"
#include "resp.h"
#include "store.h"

/* memcached's "stats" counters: how many (struct mc_stats) */
#define MC_STATS 17

struct conn;
struct pubsub_client; /* pubsub.c */
struct blocked;       /* block.c */

/* How replies wait for durability. */
enum ack_mode {
    ACK_SYNC,   /* txn_sync() once per batch of requests that changed the
                   store, before any of the batch's replies is sent: free for
                   engines durable at commit, one epoch wait per batch for
                   incll */
    ACK_COMMIT, /* reply when txn_commit returns (incll: not yet durable) */
};

enum io_mode { IO_EPOLL, IO_THREADS };

/* The server: every thread reads it. The plain fields are set by main
 * before the threads start and only read after; the _Atomic ones are
 * counters and switches that any thread changes (no lock guards them). */
struct server {
    kv_store *kv;
    struct resp_limits lim;
    size_t max_query;      /* bytes one request may occupy */
    unsigned threads;      /* epoll workers */
    long long spin_ns;     /* a worker polls this long before it sleeps */
    unsigned max_clients;
    enum ack_mode ack;
    enum io_mode io;
    const char *unix_path; /* NULL: none */
    int port;              /* 0: no TCP */
    long long started;     /* seconds, CLOCK_MONOTONIC */
    int stop_fd;           /* eventfd: SHUTDOWN asks main to stop */
    _Atomic int stopping;
    _Atomic uint64_t clients, conns_total, commands, rejected;
    _Atomic uint64_t expired; /* keys active expiry and expire_reclaim
                                 deleted */
    /* the workers' txn_stats deltas (txn_stats are per thread) */
    _Atomic uint64_t commits, aborts, barriers, lines, log_bytes;
    /* the acknowledgement point (ACK_SYNC): txn_sync calls, and the
     * replies they held back (a group commit's size is their ratio) */
    _Atomic uint64_t ack_syncs, ack_held;
    /* Have c's owner move the messages published to it into its replies
     * and send them (pubsub.c calls it from any thread, c being alive
     * while it holds Pub/Sub's lock). NULL: connections cannot be woken
     * (--io threads), so none may subscribe. */
    void (*wake_conn)(struct conn *c);
    /* Have every thread that serves connections look again at the ones
     * CLIENT PAUSE held back (CLIENT UNPAUSE); NULL: nothing to wake. */
    void (*wake_all)(void);
    /* Have c's owner look at c's blocked request again (block.c calls it
     * from any thread under its registry's lock, c being listed there). */
    void (*wake_blocked)(struct conn *c);
    /* memcached's protocol (memcache.c): where it listens, its counters */
    const char *mc_unix_path; /* NULL: none */
    int mc_port;              /* 0: none */
    _Atomic uint64_t max_memory; /* bytes the keys may use before
                                    memcached's storage commands evict and
                                    RESP's that may grow the store evict
                                    or are refused (0: no limit);
                                    cache_memlimit and CONFIG SET maxmemory
                                    set it */
    _Atomic uint64_t mc[MC_STATS]; /* struct mc_stats, published */
};

/* memcached's "stats" counters, kept per thread (mc_thread) and added to
 * srv.mc by stats_publish; the order of stat_names in memcache.c. */
struct mc_stats {
    uint64_t cmd_get, cmd_set, cmd_flush, cmd_touch, get_hits, get_misses, delete_misses,
        delete_hits, incr_misses, incr_hits, decr_misses, decr_hits, cas_misses, cas_hits,
        cas_badval, touch_hits, touch_misses;
};
_Static_assert(sizeof(struct mc_stats) == MC_STATS * 8, "mc_stats is an array of counters");
extern _Thread_local struct mc_stats mc_thread;

extern struct server srv;

/* One client connection, owned by one thread at a time. */
struct conn {
    int fd;
    struct buf in;   /* in.p[start, in.len): bytes not yet run */
    size_t start;
    struct resp_parser rp;
    struct kv_slice *argv;
    size_t argv_cap;
    struct buf out;  /* out.p[sent, out.len): replies not yet sent */
    size_t sent;
    int closing;     /* close once `out` is sent: QUIT, protocol error, EOF */
    int stalled;     /* requests left unrun while replies piled up */
    int paused;      /* a request held back by CLIENT PAUSE (owner) */
    int pause_listed; /* on its worker's list of those (owner) */
    unsigned events; /* epoll interest */
    int listed;      /* on the worker's flush list */
    pthread_t th;    /* --io threads: the thread serving it */
    struct multi *multi; /* MULTI's queue and WATCH's keys, or NULL */
    uint64_t id;     /* CLIENT ID: 1, 2, ... in order of connection */
    char addr[64], laddr[64]; /* the peer's and our end, as CLIENT LIST
                                 writes them; set before it is registered */
    int reply_off;   /* CLIENT REPLY OFF (owner thread) */
    int reply_skip;  /* replies still to drop: CLIENT REPLY SKIP's own and
                        the next command's (owner thread) */
    int no_evict;    /* CLIENT NO-EVICT (kept; nothing evicts clients) */
    long long since; /* seconds, CLOCK_MONOTONIC, at connection */
    char *name;      /* CLIENT SETNAME's, or NULL; changed and read under
                        the client registry's lock (CLIENT LIST reads it) */
    struct conn *reg_prev, *reg_next; /* the client registry */
    kv_txn *exec;    /* EXEC's store transaction while it runs its queue */
    int mc;          /* speaks memcached's text protocol, not RESP */
    size_t mc_swallow; /* bytes of refused data still to skip (memcache.c) */
    int mc_proto;      /* memcached's protocol, from its first byte: 0 not yet,
                          1 text, 2 binary (memcache.c) */
    struct pubsub_client *ps; /* its subscriptions (pubsub.c), NULL: none;
                                 set by its owner under Pub/Sub's lock */
    int pub_hold;                /* PUBLISH inside EXEC: held until the
                                    block commits (pubsub.c; owner) */
    struct buf pub_held;         /* those messages (owner) */
    void *owner;                 /* the worker serving it (server.c) */
    struct conn *next_mail;      /* the owner's list of connections with
                                    messages; guarded by the owner's qlock */
    int mail_listed;             /* on that list (the owner's qlock) */
    struct conn *next_flush, *next_resume, *prev, *next; /* owner's lists */
    struct blocked *blk; /* its entry in the registry of blocked clients
                            (block.c), NULL: not blocked; set and cleared
                            by its owner under the registry's lock */
    int blk_armed;       /* the request just run blocked: it stays in `in`
                            to be run again (owner) */
    struct conn *next_blocked; /* the owner's list of blocked connections
                                  (epoll worker) */
    int blocked_listed;  /* on that list (owner) */
    _Atomic int wake_fd; /* --io threads: an eventfd that wakes its thread
                            while it is blocked, made when it first blocks
                            (its owner); -1: none */
};

/* The client registry: every open connection, for CLIENT LIST and
 * CLIENT ID. fn runs under the registry's lock, which also guards
 * conn.name. */
void client_register(struct conn *c);   /* gives it its id */
void client_unregister(struct conn *c); /* frees its name */
void clients_each(void (*fn)(struct conn *c, void *arg), void *arg);
void client_set_name(struct conn *c, const char *name, size_t n); /* n 0: none */
/* fn(arg, name) under the lock (NULL when none) */
void client_get_name(struct conn *c, void (*fn)(void *arg, const char *name), void *arg);

/* Buckets one step of expiry visits (the active cycle's and
 * expire_reclaim's). */
#define EXPIRE_BUCKETS 1024

/* A write found the pool full: delete expired keys (a pass over the
 * table at most), so that it can try once more, as Redis frees an
 * expired key when a write needs the room. No transaction of the caller
 * may be open. 1 if keys were deleted (by this call or by another's that
 * it waited for), else 0. `round`: the caller's tries so far; each deletes
 * 16 times more than the one before (a write needs a whole run emptied
 * when its size class has no free block). */
int expire_reclaim(unsigned round);

/* Requests this thread ran; stats_publish adds them to srv.commands (one
 * shared atomic per request would bounce its line between the workers). */
extern _Thread_local uint64_t thread_commands;

/* Add this thread's txn_stats and requests since its last call to the
 * server's. */
void stats_publish(void);

#endif
