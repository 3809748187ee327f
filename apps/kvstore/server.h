/* server.h - what the network layer (server.c), the command table
 * (commands.c) and main.c share: the server's settings and counters, a
 * connection, reply encoding. */
#ifndef KV_SERVER_H
#define KV_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "resp.h"
#include "store.h"

/* A growable byte buffer: requests in, replies out. */
struct buf {
    char *p;
    size_t len, cap;
    int oom; /* an allocation failed: the connection must close */
};

int buf_reserve(struct buf *b, size_t n); /* room for n more bytes; -1 */
void buf_add(struct buf *b, const void *p, size_t n);
void buf_free(struct buf *b);

/* RESP2 replies */
void reply_simple(struct buf *b, const char *s);       /* +s */
void reply_error(struct buf *b, const char *fmt, ...)  /* -ERR ..., CR/LF
                                                          in args become ' ' */
    __attribute__((format(printf, 2, 3)));
void reply_int(struct buf *b, long long v);            /* :v */
void reply_bulk(struct buf *b, const char *p, size_t n); /* $n p */
void reply_nil(struct buf *b);                         /* $-1 */
void reply_array(struct buf *b, size_t n);             /* *n (then n items) */

/* How replies wait for durability. */
enum ack_mode {
    ACK_SYNC,   /* txn_sync() once per batch of requests that changed the
                   store, before any of the batch's replies is sent: free for
                   engines durable at commit, one epoch wait per batch for
                   incll */
    ACK_COMMIT, /* reply when txn_commit returns (incll: not yet durable) */
};

enum io_mode { IO_EPOLL, IO_THREADS };

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
    /* memcached's protocol (memcache.c): where it listens, its counters */
    const char *mc_unix_path; /* NULL: none */
    int mc_port;              /* 0: none */
    _Atomic uint64_t max_memory; /* bytes the keys may use before
                                    memcached's storage commands evict (0:
                                    no limit); cache_memlimit sets it */
    _Atomic uint64_t mc[17];  /* struct mc_stats, published */
};

/* memcached's "stats" counters, kept per thread (mc_thread) and added to
 * srv.mc by stats_publish; the order of stat_names in memcache.c. */
struct mc_stats {
    uint64_t cmd_get, cmd_set, cmd_flush, cmd_touch, get_hits, get_misses, delete_misses,
        delete_hits, incr_misses, incr_hits, decr_misses, decr_hits, cas_misses, cas_hits,
        cas_badval, touch_hits, touch_misses;
};
#define MC_STATS 17
_Static_assert(sizeof(struct mc_stats) == MC_STATS * 8, "mc_stats is an array of counters");
extern _Thread_local struct mc_stats mc_thread;

/* Run the memcached request at p[0, n) of connection c: the bytes it
 * took (0: the request is not complete yet). */
struct conn;
size_t mc_run(struct conn *c, const char *p, size_t n);

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
    unsigned events; /* epoll interest */
    int listed;      /* on the worker's flush list */
    pthread_t th;    /* --io threads: the thread serving it */
    struct multi *multi; /* MULTI's queue and WATCH's keys, or NULL */
    uint64_t id;     /* CLIENT ID: 1, 2, ... in order of connection */
    long long since; /* seconds, CLOCK_MONOTONIC, at connection */
    char *name;      /* CLIENT SETNAME's, or NULL; changed and read under
                        the client registry's lock (CLIENT LIST reads it) */
    struct conn *reg_prev, *reg_next; /* the client registry */
    kv_txn *exec;    /* EXEC's store transaction while it runs its queue */
    int mc;          /* speaks memcached's text protocol, not RESP */
    size_t mc_swallow; /* bytes of refused data still to skip (memcache.c) */
    struct conn *next_flush, *next_resume, *prev, *next; /* owner's lists */
};

/* Run one request (argv[0] is the command name); replies go to c->out. */
void command_run(struct conn *c, size_t argc, struct kv_slice *argv);
/* The client registry (server.c): every open connection, for CLIENT LIST.
 * fn runs under the registry's lock, which also guards conn.name. */
void clients_each(void (*fn)(struct conn *c, void *arg), void *arg);
void client_set_name(struct conn *c, const char *name, size_t n); /* n 0: none */
/* fn(arg, name) under the lock (NULL when none) */
void client_get_name(struct conn *c, void (*fn)(void *arg, const char *name), void *arg);

/* Free what MULTI and WATCH hold (the connection closes). */
void multi_free(struct conn *c);

/* ---- for the command files (commands.c, strings.c) */
void reply_store_error(struct buf *b, int rc);
int arg_is(const struct kv_slice *a, const char *word);
int parse_ll(const struct kv_slice *a, long long *out); /* Redis's strict integers */
/* an unsigned decimal that starts with a digit (SCAN's cursor, memcached's
 * numbers as its safe_strtoull reads them): 0 or -1 */
int parse_u64(const struct kv_slice *a, uint64_t *out);
/* The store transaction a command runs in: EXEC's when it runs the queue
 * (cmd_tx_end then leaves it open), else one of its own over `keys`. */
int cmd_tx_begin(struct conn *c, size_t n, const struct kv_slice *keys, int write, kv_txn **t);
int cmd_tx_end(struct conn *c, kv_txn *t, int rc);

/* End the command's transaction; a store error replaces what the command
 * replied so far (from `mark`), KV_E_WRONGTYPE too (strings.c). */
void tx_done(struct conn *c, kv_txn *t, int rc, size_t mark);
/* A value read out of a transaction (kv_txn_read copies it here). */
struct val {
    char *p;
    size_t n;
    int oom;
};
/* k's value of any type into x (free x->p) and *type: 1 found, 0
 * missing, <0 an error */
int get_any(kv_txn *t, struct kv_slice k, struct val *x, unsigned *type);
const char *type_name(unsigned type); /* TYPE's answer for a kv_type */
/* a long double as Redis reads one (strtold, no spaces, finite): 0, -1 */
int parse_ld(const char *p, size_t n, long double *out);
/* ... and writes one (INCRBYFLOAT's form) into buf[LD_CHARS]: its length */
#define LD_CHARS 5200
int format_ld(long double v, char *buf);
/* Redis's glob-style pattern (KEYS, SCAN's MATCH) */
int glob_match(const char *pat, size_t plen, const char *s, size_t slen);

#define KV_COMMAND(name) void name(struct conn *c, size_t argc, struct kv_slice *argv)
KV_COMMAND(cmd_get);
KV_COMMAND(cmd_mget);
KV_COMMAND(cmd_set);
KV_COMMAND(cmd_setnx);
KV_COMMAND(cmd_getset);
KV_COMMAND(cmd_mset);
KV_COMMAND(cmd_append);
KV_COMMAND(cmd_setrange);
KV_COMMAND(cmd_setbit);
KV_COMMAND(cmd_strlen);
KV_COMMAND(cmd_getrange);
KV_COMMAND(cmd_getbit);
KV_COMMAND(cmd_bitcount);
KV_COMMAND(cmd_incr);
KV_COMMAND(cmd_incrby);
KV_COMMAND(cmd_incrbyfloat);
KV_COMMAND(cmd_del);
KV_COMMAND(cmd_exists);
KV_COMMAND(cmd_type);
KV_COMMAND(cmd_expire);
KV_COMMAND(cmd_ttl);
KV_COMMAND(cmd_persist);
KV_COMMAND(cmd_setex);
KV_COMMAND(cmd_getex);
KV_COMMAND(cmd_rename);
KV_COMMAND(cmd_copy);
KV_COMMAND(cmd_randomkey);
KV_COMMAND(cmd_object);
KV_COMMAND(cmd_hset);
KV_COMMAND(cmd_hsetnx);
KV_COMMAND(cmd_hget);
KV_COMMAND(cmd_hdel);
KV_COMMAND(cmd_hlen);
KV_COMMAND(cmd_hincrby);
KV_COMMAND(cmd_hgetall);
KV_COMMAND(cmd_hrandfield);
KV_COMMAND(cmd_hscan);

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

/* server.c: listen on srv.unix_path / srv.port (0 or an error message's
 * return -1), then serve until SIGTERM, SIGINT or SHUTDOWN; every thread
 * that ran transactions has exited when server_run returns. */
int server_listen(void);
/* Lower srv.max_clients to what the open file limit allows, saying so on
 * stderr; call before the store opens (log slots follow the clients). */
void server_cap_clients(void);
int server_run(void);
void server_unlisten(void);

#endif
