/* commands.c - the dispatcher, the connection and server commands, COMMAND,
 * and MULTI/EXEC: Redis's names, arities, replies and error texts, so that
 * redis-cli, redis-benchmark and client libraries work unchanged. The
 * command table is in parts, one per file of commands (each type's own,
 * as Redis's t_string.c, t_hash.c, ...); an entry holds the name, the
 * function, the arity, the flags, the ACL categories and the key spec
 * (cmd.h), the only place each is written. Dispatch is one lookup in an
 * index of the table by the name's hash; the dispatcher checks the arity,
 * opens the store transaction over the entry's keys and hands it to the
 * command; the same table answers COMMAND. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "block.h"
#include "commands.h"
#include "config.h"
#include "keys.h"
#include "pubsub.h"
#include "t_hash.h"
#include "t_list.h"
#include "t_set.h"
#include "t_sort.h"
#include "t_zset.h"
#include "t_string.h"

/* A write that found the pool full runs again after expire_reclaim, up to
 * RECLAIM_TRIES times (a reclaim frees a few hundred nodes, whose room
 * may not be of the size that the write lacked). */
#define RECLAIM_TRIES 4

/* ---- connection and server */

static int cmd_ping(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    if (argc > 2)
        return reply_error(&c->out, "ERR wrong number of arguments for 'ping' command"), 0;
    if (pubsub_subscribed(c)) { /* RESP2's form in a subscribed context */
        reply_array(&c->out, 2);
        reply_bulk(&c->out, "pong", 4);
        reply_bulk(&c->out, argc == 2 ? argv[1].p : "", argc == 2 ? argv[1].n : 0);
    } else if (argc == 2) {
        reply_bulk(&c->out, argv[1].p, argv[1].n);
    } else {
        reply_simple(&c->out, "PONG");
    }
    return 0;
}

static int cmd_echo(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc;
    reply_bulk(&c->out, argv[1].p, argv[1].n);
    return 0;
}

/* HELLO [protover [AUTH user pass] [SETNAME name]]: RESP2 only; RESP3 is
 * refused with Redis's NOPROTO, which clients take as "speak RESP2". */
static int name_ok(const struct kv_slice *a)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->p[i] < '!' || a->p[i] > '~')
            return 0;
    return 1;
}

static int cmd_hello(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    const struct kv_slice *name = NULL;
    if (argc >= 2) {
        long long ver;
        if (parse_ll(&argv[1], &ver))
            return reply_error(&c->out,
                               "ERR Protocol version is not an integer or out of range"), 0;
        if (ver != 2)
            return reply_error(&c->out, "NOPROTO unsupported protocol version%s",
                               ver == 3 ? ": this server speaks RESP2 only" : ""), 0;
    }
    for (size_t i = 2; i < argc; i++) {
        if (arg_is(&argv[i], "SETNAME") && i + 1 < argc) {
            name = &argv[++i];
        } else if (arg_is(&argv[i], "AUTH") && i + 2 < argc) {
            return reply_error(&c->out, "ERR AUTH: this server has no users or passwords"), 0;
        } else {
            return reply_error(&c->out, "ERR Syntax error in HELLO option '%.*s'",
                               (int)(argv[i].n > 64 ? 64 : argv[i].n), argv[i].p), 0;
        }
    }
    if (name && !name_ok(name))
        return reply_error(&c->out, "ERR Client names cannot contain spaces, newlines or "
                                    "special characters."), 0;
    if (name)
        client_set_name(c, name->p, name->n);
    reply_array(&c->out, 14);
    reply_bulk(&c->out, "server", 6);
    reply_bulk(&c->out, "redis", 5);
    reply_bulk(&c->out, "version", 7);
    reply_bulk(&c->out, "7.0.0", 5);
    reply_bulk(&c->out, "proto", 5);
    reply_int(&c->out, 2);
    reply_bulk(&c->out, "id", 2);
    reply_int(&c->out, (long long)c->id);
    reply_bulk(&c->out, "mode", 4);
    reply_bulk(&c->out, "standalone", 10);
    reply_bulk(&c->out, "role", 4);
    reply_bulk(&c->out, "master", 6);
    reply_bulk(&c->out, "modules", 7);
    reply_array(&c->out, 0);
    return 0;
}

static void name_reply(void *arg, const char *name)
{
    if (name)
        reply_bulk(arg, name, strlen(name));
    else
        reply_nil(arg);
}

/* One CLIENT LIST line (the fields clients parse; addr is the socket's
 * kind here) */
static void client_line(struct conn *c, void *arg)
{
    struct buf *b = arg;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char line[640];
    size_t sub, psub, ssub;
    pubsub_counts(c, &sub, &psub, &ssub);
    int n = snprintf(line, sizeof line,
                     "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=0 flags=%s%s db=0 "
                     "sub=%zu psub=%zu ssub=%zu multi=-1 qbuf=0 obl=0 oll=0 omem=0 events=r "
                     "cmd=client\n",
                     (unsigned long long)c->id, c->addr, c->laddr, c->fd,
                     c->name ? c->name : "", (long long)ts.tv_sec - c->since,
                     sub + psub + ssub ? "P" : "N", c->no_evict ? "e" : "", sub, psub, ssub);
    if (n > 0)
        buf_add(b, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void self_line(struct conn *c, void *arg)
{
    struct conn **me = arg;
    if (c == me[0])
        client_line(c, me[1]);
}

static void reply_subcommand_arity(struct buf *b, const char *cmd, const struct kv_slice *sub)
{
    char lower[32];
    size_t n = sub->n < sizeof lower - 1 ? sub->n : sizeof lower - 1;
    for (size_t i = 0; i < n; i++)
        lower[i] = (char)tolower((unsigned char)sub->p[i]);
    lower[n] = 0;
    reply_error(b, "ERR wrong number of arguments for '%s|%s' command", cmd, lower);
}

static void reply_unknown_sub(struct buf *b, const struct kv_slice *sub, const char *help)
{
    reply_error(b, "ERR unknown subcommand '%.*s'. Try %s HELP.",
                (int)(sub->n > 64 ? 64 : sub->n), sub->p, help);
}

/* CLIENT KILL: what its filters name, as Redis 7.0 reads them. */
struct kill_filter {
    struct conn *self;
    uint64_t id;            /* 0: any */
    int type;               /* -1 any, 0 normal, 1 pubsub, 2 none (replicas) */
    const struct kv_slice *addr, *laddr;
    int skipme;
    long long killed;
};

static int slice_is(const struct kv_slice *a, const char *s)
{
    return a->n == strlen(s) && !memcmp(a->p, s, a->n);
}

/* Under the client registry's lock: c cannot be freed nor its descriptor
 * closed meanwhile (conn_release unregisters first). Another connection
 * is shut down, which its owner sees as the end of the connection, in
 * either --io mode; the caller itself is closed after this reply. */
static void kill_one(struct conn *c, void *arg)
{
    struct kill_filter *f = arg;
    size_t sub, psub, ssub;
    pubsub_counts(c, &sub, &psub, &ssub);
    int type = sub + psub + ssub ? 1 : 0;
    if ((f->id && c->id != f->id) || (f->type >= 0 && f->type != type) ||
        (f->addr && !slice_is(f->addr, c->addr)) || (f->laddr && !slice_is(f->laddr, c->laddr)) ||
        (f->skipme && c == f->self) || c->mc)
        return;
    f->killed++;
    if (c == f->self)
        c->closing = 1;
    else
        shutdown(c->fd, SHUT_RDWR);
    pubsub_kill(c); /* gone for PUBLISH and PUBSUB now, as in Redis */
}

static void client_kill(struct conn *c, size_t argc, struct kv_slice *argv)
{
    struct kill_filter f = {c, 0, -1, NULL, NULL, 1, 0};
    if (argc == 3) { /* the old form: CLIENT KILL addr:port */
        f.addr = &argv[2];
        f.skipme = 0;
        clients_each(kill_one, &f);
        if (!f.killed)
            return reply_error(&c->out, "ERR No such client");
        return reply_simple(&c->out, "OK");
    }
    if (argc % 2) /* an option without its value */
        return reply_error(&c->out, argc == 3 ? "ERR No such client" : "ERR syntax error");
    for (size_t i = 2; i + 1 < argc; i += 2) {
        const struct kv_slice *o = &argv[i], *v = &argv[i + 1];
        long long id;
        if (arg_is(o, "ID")) {
            if (parse_ll(v, &id) || id <= 0)
                return reply_error(&c->out, "ERR client-id should be greater than 0");
            f.id = (uint64_t)id;
        } else if (arg_is(o, "TYPE")) {
            if (arg_is(v, "normal"))
                f.type = 0;
            else if (arg_is(v, "pubsub"))
                f.type = 1;
            else if (arg_is(v, "master") || arg_is(v, "slave") || arg_is(v, "replica"))
                f.type = 2;
            else
                return reply_error(&c->out, "ERR Unknown client type '%.*s'",
                                   (int)(v->n > 64 ? 64 : v->n), v->p);
        } else if (arg_is(o, "USER")) {
            if (!slice_is(v, "default"))
                return reply_error(&c->out, "ERR No such user '%.*s'",
                                   (int)(v->n > 64 ? 64 : v->n), v->p);
        } else if (arg_is(o, "ADDR")) {
            f.addr = v;
        } else if (arg_is(o, "LADDR")) {
            f.laddr = v;
        } else if (arg_is(o, "SKIPME")) {
            if (arg_is(v, "yes"))
                f.skipme = 1;
            else if (arg_is(v, "no"))
                f.skipme = 0;
            else
                return reply_error(&c->out, "ERR syntax error");
        } else {
            return reply_error(&c->out, "ERR syntax error");
        }
    }
    clients_each(kill_one, &f);
    reply_int(&c->out, f.killed);
}

/* CLIENT PAUSE's state: when it ends (ms, CLOCK_MONOTONIC; 0: none) and
 * whether it holds back writes only. Any thread reads and sets them. */
static _Atomic long long pause_end;
static _Atomic int pause_writes;

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void client_pause(struct conn *c, size_t argc, struct kv_slice *argv)
{
    long long ms;
    if (argc != 3 && argc != 4)
        return reply_subcommand_arity(&c->out, "client", &argv[1]);
    if (parse_ll(&argv[2], &ms))
        return reply_error(&c->out, "ERR timeout is not an integer or out of range");
    if (ms < 0)
        return reply_error(&c->out, "ERR timeout is negative");
    int writes = 0;
    if (argc == 4) {
        if (arg_is(&argv[3], "WRITE"))
            writes = 1;
        else if (!arg_is(&argv[3], "ALL"))
            return reply_error(&c->out, "ERR CLIENT PAUSE mode must be WRITE or ALL");
    }
    atomic_store(&pause_writes, writes);
    atomic_store(&pause_end, mono_ms() + ms);
    reply_simple(&c->out, "OK");
}

/* CLIENT SETNAME | GETNAME | ID | LIST | INFO | KILL | REPLY | NO-EVICT |
 * PAUSE | UNPAUSE */
static int cmd_client(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    const struct kv_slice *sub = &argv[1];
    static const char *const help[] = {
        "GETNAME", "    The name of this connection, or nil.",
        "ID", "    The id of this connection.",
        "INFO", "    This connection's line of CLIENT LIST.",
        "KILL <ip:port>", "    Close the connection at that address.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Close the connections matching every filter: ID, TYPE (normal, pubsub), ADDR,",
        "    LADDR, USER (default), SKIPME (yes, the default, or no).",
        "LIST", "    A line about each connection.",
        "NO-EVICT (ON|OFF)", "    Kept for clients that set it; no connection is evicted here.",
        "PAUSE <timeout> [WRITE|ALL]",
        "    Hold back every command (ALL, the default) or those that write, for <timeout> ms.",
        "REPLY (ON|OFF|SKIP)", "    Send replies, none, or none for the next command.",
        "SETNAME <name>", "    Name this connection (\"\": no name).",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
        "    Unblock a client blocked in a blocking command: as its timeout would, or with an error.",
        "UNPAUSE", "    End a CLIENT PAUSE.",
        NULL,
    };
    if (arg_is(sub, "HELP"))
        return reply_help(&c->out, argc, "CLIENT", help), 0;
    if (arg_is(sub, "SETNAME")) {
        if (argc != 3)
            return reply_subcommand_arity(&c->out, "client", sub), 0;
        if (!name_ok(&argv[2]))
            return reply_error(&c->out, "ERR Client names cannot contain spaces, newlines "
                                        "or special characters."), 0;
        client_set_name(c, argv[2].p, argv[2].n);
        return reply_simple(&c->out, "OK"), 0;
    }
    if (arg_is(sub, "GETNAME") || arg_is(sub, "ID") || arg_is(sub, "INFO")) {
        if (argc != 2)
            return reply_subcommand_arity(&c->out, "client", sub), 0;
        if (arg_is(sub, "ID"))
            return reply_int(&c->out, (long long)c->id), 0;
        if (arg_is(sub, "GETNAME"))
            return client_get_name(c, name_reply, &c->out), 0;
        struct buf b = {0};
        struct conn *me[2] = {c, (struct conn *)(void *)&b};
        clients_each(self_line, me);
        reply_bulk(&c->out, b.p ? b.p : "", b.len);
        buf_free(&b);
        return 0;
    }
    if (arg_is(sub, "LIST")) {
        struct buf b = {0};
        clients_each(client_line, &b);
        reply_bulk(&c->out, b.p ? b.p : "", b.len);
        buf_free(&b);
        return 0;
    }
    if (arg_is(sub, "KILL"))
        return client_kill(c, argc, argv), 0;
    if (arg_is(sub, "PAUSE"))
        return client_pause(c, argc, argv), 0;
    if (arg_is(sub, "UNPAUSE")) {
        if (argc != 2)
            return reply_subcommand_arity(&c->out, "client", sub), 0;
        atomic_store(&pause_end, 0);
        if (srv.wake_all)
            srv.wake_all();
        return reply_simple(&c->out, "OK"), 0;
    }
    if (arg_is(sub, "UNBLOCK")) {
        long long id;
        int error = 0;
        if (argc != 3 && argc != 4)
            return reply_subcommand_arity(&c->out, "client", sub), 0;
        if (parse_ll(&argv[2], &id))
            return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
        if (argc == 4 && !arg_is(&argv[3], "TIMEOUT") && !(error = arg_is(&argv[3], "ERROR")))
            return reply_error(&c->out,
                               "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"), 0;
        return reply_int(&c->out, block_unblock((uint64_t)id, error)), 0;
    }
    if (arg_is(sub, "REPLY") || arg_is(sub, "NO-EVICT")) {
        if (argc != 3)
            return reply_subcommand_arity(&c->out, "client", sub), 0;
        int reply = arg_is(sub, "REPLY");
        const struct kv_slice *v = &argv[2];
        if (!arg_is(v, "ON") && !arg_is(v, "OFF") && !(reply && arg_is(v, "SKIP")))
            return reply_error(&c->out, "ERR syntax error"), 0;
        if (!reply)
            c->no_evict = arg_is(v, "ON");
        else if (arg_is(v, "SKIP"))
            c->reply_skip = 2; /* this reply and the next command's */
        else
            c->reply_off = arg_is(v, "OFF");
        reply_simple(&c->out, "OK");
        return 0;
    }
    reply_unknown_sub(&c->out, sub, "CLIENT");
    return 0;
}

/* FUNCTION FLUSH and SCRIPT FLUSH: no functions or scripts to flush */
static int cmd_function(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    int script = arg_is(&argv[0], "SCRIPT");
    static const char *const help[] = {
        "FLUSH [ASYNC|SYNC]", "    Nothing to delete: none are kept here.",
        NULL,
    };
    if (arg_is(&argv[1], "HELP"))
        return reply_help(&c->out, argc, script ? "SCRIPT" : "FUNCTION", help), 0;
    if (!arg_is(&argv[1], "FLUSH"))
        return reply_unknown_sub(&c->out, &argv[1], script ? "SCRIPT" : "FUNCTION"), 0;
    if (argc > 3 || (argc == 3 && !arg_is(&argv[2], "ASYNC") && !arg_is(&argv[2], "SYNC"))) {
        reply_error(&c->out, script ? "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
                                    : "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
        return 0;
    }
    reply_simple(&c->out, "OK");
    return 0;
}

/* LATENCY and SLOWLOG: nothing is recorded (empty answers) */
static int cmd_latency(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc;
    static const char *const help[] = {
        "HISTORY <event>", "    Empty: no latency events are recorded.",
        "LATEST", "    Empty: no latency events are recorded.",
        "RESET [<event> ...]", "    0: there is nothing to reset.",
        NULL,
    };
    if (arg_is(&argv[1], "HELP"))
        return reply_help(&c->out, argc, "LATENCY", help), 0;
    if (arg_is(&argv[1], "LATEST") || arg_is(&argv[1], "HISTORY"))
        return reply_array(&c->out, 0), 0;
    if (arg_is(&argv[1], "RESET"))
        return reply_int(&c->out, 0), 0;
    reply_unknown_sub(&c->out, &argv[1], "LATENCY");
    return 0;
}

static int cmd_slowlog(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc;
    static const char *const help[] = {
        "GET [<count>]", "    Empty: no slow commands are recorded.",
        "LEN", "    0: no slow commands are recorded.",
        "RESET", "    OK: there is nothing to reset.",
        NULL,
    };
    if (arg_is(&argv[1], "HELP"))
        return reply_help(&c->out, argc, "SLOWLOG", help), 0;
    if (arg_is(&argv[1], "GET"))
        return reply_array(&c->out, 0), 0;
    if (arg_is(&argv[1], "LEN"))
        return reply_int(&c->out, 0), 0;
    if (arg_is(&argv[1], "RESET"))
        return reply_simple(&c->out, "OK"), 0;
    reply_unknown_sub(&c->out, &argv[1], "SLOWLOG");
    return 0;
}

static int cmd_time(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char s[24], us[24];
    int ns = snprintf(s, sizeof s, "%lld", (long long)ts.tv_sec);
    int nu = snprintf(us, sizeof us, "%ld", ts.tv_nsec / 1000);
    reply_array(&c->out, 2);
    reply_bulk(&c->out, s, (size_t)ns);
    reply_bulk(&c->out, us, (size_t)nu);
    return 0;
}

static int cmd_debug(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    reply_error(&c->out, "ERR DEBUG is not supported by this server");
    return 0;
}

static int cmd_select(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc;
    long long db;
    if (parse_ll(&argv[1], &db))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    if (db != 0)
        return reply_error(&c->out, "ERR DB index is out of range"), 0;
    reply_simple(&c->out, "OK");
    return 0;
}

static int cmd_quit(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    reply_simple(&c->out, "OK");
    c->closing = 1;
    return 0;
}

/* As Redis: no reply; the server closes the pool and exits, and the
 * client sees its connection close. */
static int cmd_shutdown(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    for (size_t i = 1; i < argc; i++) {
        if (arg_is(&argv[i], "ABORT"))
            return reply_error(&c->out, "ERR No shutdown in progress."), 0;
        if (!arg_is(&argv[i], "NOSAVE") && !arg_is(&argv[i], "SAVE") &&
            !arg_is(&argv[i], "NOW") && !arg_is(&argv[i], "FORCE"))
            return reply_error(&c->out, "ERR syntax error"), 0;
    }
    uint64_t one = 1;
    if (write(srv.stop_fd, &one, sizeof one) != sizeof one)
        return reply_error(&c->out, "ERR cannot signal the shutdown"), 0;
    c->closing = 1;
    return 0;
}

static long long now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

/* INFO's text, built a section at a time, one format per section (a
 * vsnprintf per line doubled INFO's cost: docs/kvstore.md). A section that
 * does not fit is left out with every one after it (4 KiB holds them all
 * with room to spare); two bytes stay free for the blank line that ends a
 * section. */
struct info_text {
    char p[4096];
    size_t n;
    int full;
};

static void info_add(struct info_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void info_add(struct info_text *t, const char *fmt, ...)
{
    if (t->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(t->p + t->n, sizeof t->p - t->n, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= sizeof t->p - t->n - 2)
        t->full = 1;
    else
        t->n += (size_t)w;
}

static void info_server(struct info_text *t, const struct kv_info *ki)
{
    (void)ki;
    info_add(t,
             "# Server\r\n"
             "redis_version:7.0.0\r\n"
             "server:pmtx-kvstore\r\n"
             "process_id:%d\r\n"
             "io_mode:%s\r\n"
             "io_threads:%u\r\n"
             "tcp_port:%d\r\n"
             "uptime_in_seconds:%lld\r\n",
             (int)getpid(), srv.io == IO_EPOLL ? "epoll" : "threads", srv.threads, srv.port,
             now_s() - srv.started);
}

static void info_clients(struct info_text *t, const struct kv_info *ki)
{
    (void)ki;
    info_add(t,
             "# Clients\r\n"
             "connected_clients:%llu\r\n"
             "maxclients:%u\r\n"
             "blocked_clients:%llu\r\n",
             (unsigned long long)atomic_load(&srv.clients), srv.max_clients,
             (unsigned long long)block_count());
}

static void info_memory(struct info_text *t, const struct kv_info *ki)
{
    info_add(t,
             "# Memory\r\n"
             "used_memory:%llu\r\n"
             "pool_size:%zu\r\n"
             "pool_max_size:%zu\r\n"
             "hash_buckets:%llu\r\n"
             "hash_resizing:%d\r\n"
             "lazyfree_pending_objects:%llu\r\n",
             (unsigned long long)ki->bytes, ki->pool_size, ki->pool_max_size,
             (unsigned long long)ki->buckets, ki->resizing,
             (unsigned long long)ki->lazy_pending);
}

/* The engine and how replies wait for durability, then Redis's own fields
 * for the tools that read them: no AOF, no RDB, never loading. */
static void info_persistence(struct info_text *t, const struct kv_info *ki)
{
    (void)ki;
    info_add(t,
             "# Persistence\r\n"
             "engine:%s\r\n"
             "pdom:%d\r\n"
             "pdom_barrier_ns:%u\r\n"
             "flush_instruction:%s\r\n"
             "ack:%s\r\n"
             "aof_enabled:0\r\n"
             "rdb_bgsave_in_progress:0\r\n"
             "loading:0\r\n",
             txn_engine_name(), txn_pdom(), txn_pdom_ns(), txn_flush_name(),
             srv.ack == ACK_SYNC ? "sync" : "commit");
}

/* The server's counters, this thread's txn_stats added first (the other
 * threads publish theirs at the end of each round). */
static void info_stats(struct info_text *t, const struct kv_info *ki)
{
    stats_publish();
    info_add(t,
             "# Stats\r\n"
             "total_connections_received:%llu\r\n"
             "total_commands_processed:%llu\r\n"
             "rejected_connections:%llu\r\n"
             "expired_keys:%llu\r\n"
             "evicted_keys:%llu\r\n"
             "lazyfreed_objects:%llu\r\n"
             "txn_commits:%llu\r\n"
             "txn_aborts:%llu\r\n"
             "persist_barriers:%llu\r\n"
             "lines_flushed:%llu\r\n"
             "log_bytes:%llu\r\n"
             "ack_syncs:%llu\r\n"
             "ack_held_requests:%llu\r\n",
             (unsigned long long)atomic_load(&srv.conns_total),
             (unsigned long long)atomic_load(&srv.commands),
             (unsigned long long)atomic_load(&srv.rejected),
             (unsigned long long)atomic_load(&srv.expired),
             (unsigned long long)ki->evictions,
             (unsigned long long)ki->lazy_freed,
             (unsigned long long)atomic_load(&srv.commits),
             (unsigned long long)atomic_load(&srv.aborts),
             (unsigned long long)atomic_load(&srv.barriers),
             (unsigned long long)atomic_load(&srv.lines),
             (unsigned long long)atomic_load(&srv.log_bytes),
             (unsigned long long)atomic_load(&srv.ack_syncs),
             (unsigned long long)atomic_load(&srv.ack_held));
}

/* As Redis: no db0 line while the store is empty. */
static void info_keyspace(struct info_text *t, const struct kv_info *ki)
{
    info_add(t, "# Keyspace\r\n");
    if (ki->keys)
        info_add(t, "db0:keys=%llu,expires=%llu,avg_ttl=0\r\n", (unsigned long long)ki->keys,
                 (unsigned long long)ki->expires);
}

static const struct info_section {
    const char *name;
    void (*write)(struct info_text *t, const struct kv_info *ki);
} info_sections[] = {
    {"server", info_server},
    {"clients", info_clients},
    {"memory", info_memory},
    {"persistence", info_persistence},
    {"stats", info_stats},
    {"keyspace", info_keyspace},
};

/* Is the section among INFO's arguments? None, "all", "default" and
 * "everything" name every section (there are no others to leave out). */
static int info_wanted(const char *section, size_t argc, const struct kv_slice *argv)
{
    if (argc == 1)
        return 1;
    for (size_t i = 1; i < argc; i++)
        if (arg_is(&argv[i], section) || arg_is(&argv[i], "all") ||
            arg_is(&argv[i], "default") || arg_is(&argv[i], "everything"))
            return 1;
    return 0;
}

/* INFO [section...]: Redis's "# Section" headers and "field:value" lines,
 * with the transaction engine's own under Persistence and Stats; a blank
 * line between sections. */
static int cmd_info(struct conn *c, kv_txn *tx, size_t argc, struct kv_slice *argv)
{
    (void)tx;
    struct kv_info ki;
    struct info_text t;
    t.n = 0;
    t.full = 0;
    kv_info(srv.kv, &ki);
    for (size_t s = 0; s < sizeof info_sections / sizeof *info_sections; s++) {
        if (!info_wanted(info_sections[s].name, argc, argv))
            continue;
        size_t mark = t.n;
        info_sections[s].write(&t, &ki);
        if (t.full) {
            t.n = mark;
            break;
        }
        memcpy(t.p + t.n, "\r\n", 2);
        t.n += 2;
    }
    reply_bulk(&c->out, t.p, t.n >= 2 ? t.n - 2 : 0);
    return 0;
}

/* ---- COMMAND */

static int cmd_command(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv);
static int cmd_multi(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv);
static int cmd_exec(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv);
static int cmd_discard(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv);
static int cmd_watch(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv);
static int cmd_unwatch(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv);
static int cmd_reset(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv);

/* The table: each type's file has its own part (adding a type adds a
 * line here); lookup is through an index by name's hash. */
#define W CMD_WRITE
#define R CMD_READONLY
#define F CMD_FAST
#define L CMD_LOADING
#define S CMD_STALE
#define NS CMD_NOSCRIPT
#define B CMD_ALLOW_BUSY
/* Redis's CLIENT, FUNCTION, SCRIPT, LATENCY, SLOWLOG and COMMAND
 * are containers: no flags or keys of their own (their subcommands have
 * them) */
static const struct command server_commands[] = {
    {"ping", cmd_ping, -1, F | CMD_PUBSUB_OK, ACL_CONNECTION, {0, 0, 0}},
    {"echo", cmd_echo, 2, L | S | F, ACL_CONNECTION, {0, 0, 0}},
    {"select", cmd_select, 2, L | S | F, ACL_CONNECTION, {0, 0, 0}},
    {"hello", cmd_hello, -1, NS | L | S | F | CMD_NO_AUTH | B, ACL_CONNECTION, {0, 0, 0}},
    {"quit", cmd_quit, -1, NS | L | S | F | CMD_NO_AUTH | B | CMD_PUBSUB_OK, ACL_CONNECTION,
     {0, 0, 0}},
    {"client", cmd_client, -2, 0, 0, {0, 0, 0}},
    {"function", cmd_function, -2, 0, 0, {0, 0, 0}},
    {"script", cmd_function, -2, 0, 0, {0, 0, 0}},
    {"latency", cmd_latency, -2, 0, 0, {0, 0, 0}},
    {"slowlog", cmd_slowlog, -2, 0, 0, {0, 0, 0}},
    {"command", cmd_command, -1, L | S, ACL_CONNECTION, {0, 0, 0}},
    {"time", cmd_time, 1, L | S | F, 0, {0, 0, 0}},
    {"debug", cmd_debug, -2, CMD_ADMIN | NS | L | S, 0, {0, 0, 0}},
    {"info", cmd_info, -1, L | S, ACL_DANGEROUS, {0, 0, 0}},
    {"shutdown", cmd_shutdown, -1, CMD_ADMIN | NS | L | S | CMD_NO_MULTI | B, 0, {0, 0, 0}},
    {"multi", cmd_multi, 1, NS | L | S | F | B, ACL_TRANSACTION, {0, 0, 0}},
    {"exec", cmd_exec, 1, NS | L | S | CMD_SKIP_SLOWLOG, ACL_TRANSACTION, {0, 0, 0}},
    {"discard", cmd_discard, 1, NS | L | S | F | B, ACL_TRANSACTION, {0, 0, 0}},
    {"reset", cmd_reset, 1, NS | L | S | F | CMD_NO_AUTH | B | CMD_PUBSUB_OK, ACL_CONNECTION,
     {0, 0, 0}},
    {"watch", cmd_watch, -2, NS | L | S | F | B, ACL_TRANSACTION, {1, -1, 1}},
    {"unwatch", cmd_unwatch, 1, NS | L | S | F | B, ACL_TRANSACTION, {0, 0, 0}},
};
static const size_t server_ncommands = sizeof server_commands / sizeof *server_commands;

static const struct {
    const struct command *cmds;
    const size_t *n;
} parts[] = {
    {server_commands, &server_ncommands},
    {string_commands, &string_ncommands},
    {key_commands, &key_ncommands},
    {hash_commands, &hash_ncommands},
    {list_commands, &list_ncommands},
    {pubsub_commands, &pubsub_ncommands},
    {set_commands, &set_ncommands},
    {config_commands, &config_ncommands},
    {zset_commands, &zset_ncommands},
    {sort_commands, &sort_ncommands},
};
#define NPARTS (sizeof parts / sizeof *parts)

/* An open-addressed index of every entry by its name's hash (folded to
 * lower case), built once by commands_init: a request costs one hash of
 * its name and, most often, one comparison. INDEX_SIZE keeps the load
 * under 1/2 (commands_init checks). */
#define INDEX_SIZE 512
static struct slot {
    const struct command *cmd; /* NULL: empty */
    uint32_t hash;
    uint32_t len;
} index_[INDEX_SIZE];
static size_t ncommands; /* entries in the table */

static uint32_t name_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)(unsigned char)tolower((unsigned char)p[i])) * 16777619u;
    return h;
}

static const struct command *lookup_command(const struct kv_slice *name)
{
    uint32_t h = name_hash(name->p, name->n);
    for (size_t i = h & (INDEX_SIZE - 1);; i = (i + 1) & (INDEX_SIZE - 1)) {
        const struct slot *s = &index_[i];
        if (!s->cmd)
            return NULL;
        if (s->hash == h && s->len == name->n && !strncasecmp(s->cmd->name, name->p, name->n))
            return s->cmd;
    }
}

int commands_init(void)
{
    if (ncommands)
        return 0;
    config_init();
    for (size_t p = 0; p < NPARTS; p++)
        for (size_t i = 0; i < *parts[p].n; i++) {
            const struct command *cmd = &parts[p].cmds[i];
            const struct key_spec *k = &cmd->keys;
            struct kv_slice name = {(char *)cmd->name, strlen(cmd->name)};
            if (lookup_command(&name) || 2 * (ncommands + 1) > INDEX_SIZE)
                return -1; /* a name twice, or the index too small */
            /* cmd_nkeys steps through the keys: a spec with keys has a
             * step, one without names none */
            if (!cmd->arity || (k->first > 0 ? k->step < 1 : k->last || k->step) ||
                ((cmd->flags & CMD_KEYNUM_MASK) && (cmd->flags & CMD_SORT_STORE)))
                return -1;
            uint32_t h = name_hash(name.p, name.n);
            size_t s = h & (INDEX_SIZE - 1);
            while (index_[s].cmd)
                s = (s + 1) & (INDEX_SIZE - 1);
            index_[s] = (struct slot){cmd, h, (uint32_t)name.n};
            ncommands++;
        }
    return 0;
}

/* The ACL categories COMMAND INFO shows: the entry's own and those its
 * flags imply (Redis's setImplicitACLCategories). */
static uint32_t acl_of(const struct command *cmd)
{
    uint32_t a = cmd->acl;
    a |= cmd->flags & CMD_WRITE ? ACL_WRITE : 0;
    a |= cmd->flags & CMD_READONLY ? ACL_READ : 0;
    a |= cmd->flags & CMD_ADMIN ? ACL_ADMIN | ACL_DANGEROUS : 0;
    a |= cmd->flags & CMD_PUBSUB ? ACL_PUBSUB : 0;
    a |= cmd->flags & CMD_FAST ? ACL_FAST : ACL_SLOW;
    a |= cmd->flags & CMD_BLOCKING ? ACL_BLOCKING : 0;
    return a;
}

static void reply_names(struct buf *b, uint32_t bits, const char *const *names, unsigned n)
{
    size_t count = 0;
    for (unsigned i = 0; i < n; i++)
        count += (bits >> i) & 1;
    reply_array(b, count);
    for (unsigned i = 0; i < n; i++)
        if ((bits >> i) & 1)
            reply_simple(b, names[i]);
}

/* A command's flags; a command whose keys are found by reading its
 * arguments (cmd_movable) also says Redis's "movablekeys", last. */
static void reply_flags(struct buf *b, uint32_t flags, int movable)
{
    size_t count = (size_t)movable;
    for (unsigned i = 0; i < CMD_NFLAGS; i++)
        count += (flags >> i) & 1;
    reply_array(b, count);
    for (unsigned i = 0; i < CMD_NFLAGS; i++)
        if ((flags >> i) & 1)
            reply_simple(b, cmd_flag_names[i]);
    if (movable)
        reply_simple(b, "movablekeys");
}

/* The key spec of the keys after the range: Redis's keynum spec (the
 * count at numkeys, the keys right after it), or, for SORT's STORE, one
 * whose search is "unknown" (found by the command's own parsing). */
static void movable_spec(struct buf *b, const struct command *cmd)
{
    int sort = (cmd->flags & CMD_SORT_STORE) != 0;
    reply_array(b, 6);
    reply_bulk(b, "flags", 5);
    reply_array(b, 1);
    reply_simple(b, sort ? "OW" : cmd->flags & CMD_WRITE ? "RW" : "RO");
    reply_bulk(b, "begin_search", 12);
    if (sort) {
        reply_array(b, 4);
        reply_bulk(b, "type", 4);
        reply_bulk(b, "unknown", 7);
        reply_bulk(b, "spec", 4);
        reply_array(b, 0);
        reply_bulk(b, "find_keys", 9);
        reply_array(b, 4);
        reply_bulk(b, "type", 4);
        reply_bulk(b, "unknown", 7);
        reply_bulk(b, "spec", 4);
        reply_array(b, 0);
        return;
    }
    reply_array(b, 4);
    reply_bulk(b, "type", 4);
    reply_bulk(b, "index", 5);
    reply_bulk(b, "spec", 4);
    reply_array(b, 2);
    reply_bulk(b, "index", 5);
    reply_int(b, (long long)((cmd->flags & CMD_KEYNUM_MASK) >> CMD_KEYNUM_SHIFT));
    reply_bulk(b, "find_keys", 9);
    reply_array(b, 4);
    reply_bulk(b, "type", 4);
    reply_bulk(b, "keynum", 6);
    reply_bulk(b, "spec", 4);
    reply_array(b, 6);
    reply_bulk(b, "keynumidx", 9);
    reply_int(b, 0);
    reply_bulk(b, "firstkey", 8);
    reply_int(b, 1);
    reply_bulk(b, "keystep", 7);
    reply_int(b, 1);
}

/* One entry of COMMAND's reply, Redis 7's ten fields: name, arity, flags,
 * first key, last key, step, ACL categories, tips, key specs and
 * subcommands. There are no tips or subcommands here (docs/kvstore.md),
 * and a key spec says RW or RO only: the finer flags Redis gives each
 * (OW, insert, delete, ...) are not kept. */
static void command_entry(struct buf *b, const struct command *cmd)
{
    const struct key_spec *k = &cmd->keys;
    reply_array(b, 10);
    reply_bulk(b, cmd->name, strlen(cmd->name));
    reply_int(b, cmd->arity);
    reply_flags(b, cmd->flags, cmd_movable(cmd->flags));
    reply_int(b, k->first);
    reply_int(b, k->last);
    reply_int(b, k->step);
    reply_names(b, acl_of(cmd), cmd_acl_names, ACL_NCATS);
    reply_array(b, 0);
    reply_array(b, (k->first > 0) + cmd_movable(cmd->flags));
    if (k->first > 0) {
        reply_array(b, 6);
        reply_bulk(b, "flags", 5);
        reply_array(b, 1);
        reply_simple(b, cmd->flags & CMD_WRITE ? "RW" : "RO");
        reply_bulk(b, "begin_search", 12);
        reply_array(b, 4);
        reply_bulk(b, "type", 4);
        reply_bulk(b, "index", 5);
        reply_bulk(b, "spec", 4);
        reply_array(b, 2);
        reply_bulk(b, "index", 5);
        reply_int(b, k->first);
        reply_bulk(b, "find_keys", 9);
        reply_array(b, 4);
        reply_bulk(b, "type", 4);
        reply_bulk(b, "range", 5);
        reply_bulk(b, "spec", 4);
        reply_array(b, 6);
        reply_bulk(b, "lastkey", 7);
        reply_int(b, k->last < 0 ? k->last : k->last - k->first);
        reply_bulk(b, "keystep", 7);
        reply_int(b, k->step);
        reply_bulk(b, "limit", 5);
        reply_int(b, 0);
    }
    if (cmd_movable(cmd->flags))
        movable_spec(b, cmd);
    reply_array(b, 0);
}

static void each_command(void (*fn)(struct buf *b, const struct command *cmd), struct buf *b)
{
    for (size_t p = 0; p < NPARTS; p++)
        for (size_t i = 0; i < *parts[p].n; i++)
            fn(b, &parts[p].cmds[i]);
}

static void command_name(struct buf *b, const struct command *cmd)
{
    reply_bulk(b, cmd->name, strlen(cmd->name));
}

/* COMMAND GETKEYS name arg...: the keys the entry names, Redis's errors */
static void command_getkeys(struct conn *c, size_t argc, struct kv_slice *argv)
{
    const struct command *cmd = lookup_command(&argv[2]);
    size_t n = argc - 2;
    if (!cmd)
        return reply_error(&c->out, "ERR Invalid command specified");
    if ((cmd->arity > 0 && n != (size_t)cmd->arity) || (cmd->arity < 0 && n < (size_t)-cmd->arity))
        return reply_error(&c->out, "ERR Invalid number of arguments specified for command");
    if ((cmd->keys.first <= 0 && !cmd_movable(cmd->flags)) || (cmd->flags & CMD_NOT_KEY))
        return reply_error(&c->out, "ERR The command has no key arguments");
    size_t nk = cmd_nkeys(cmd, n, argv + 2);
    if (!nk)
        return reply_error(&c->out, "ERR Invalid arguments specified for command");
    reply_array(&c->out, nk);
    for (size_t i = 0; i < nk; i++) {
        const struct kv_slice *k = &argv[2 + cmd_key(cmd, n, argv + 2, i)];
        reply_bulk(&c->out, k->p, k->n);
    }
}

/* COMMAND [COUNT | LIST | INFO [name ...] | DOCS [name ...] | GETKEYS
 * name arg ...], from the table. DOCS answers empty: the table holds no
 * documentation, and redis-cli then uses its own help. */
static int cmd_command(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    const struct kv_slice *sub = &argv[1];
    static const char *const help[] = {
        "(no subcommand)", "    Details of every command.",
        "COUNT", "    How many commands there are.",
        "DOCS [<command-name> ...]", "    Empty: no documentation is kept here.",
        "GETKEYS <full-command>", "    The keys of a full command (its name, its arguments).",
        "INFO [<command-name> ...]", "    Details of the commands named, or of every command.",
        "LIST", "    The name of every command.",
        NULL,
    };
    if (argc == 1) {
        reply_array(&c->out, ncommands);
        each_command(command_entry, &c->out);
    } else if (arg_is(sub, "HELP")) {
        reply_help(&c->out, argc, "COMMAND", help);
    } else if (arg_is(sub, "COUNT")) {
        if (argc != 2)
            return reply_subcommand_arity(&c->out, "command", sub), 0;
        reply_int(&c->out, (long long)ncommands);
    } else if (arg_is(sub, "LIST")) {
        if (argc != 2) /* FILTERBY is not kept here */
            return reply_error(&c->out, "ERR syntax error"), 0;
        reply_array(&c->out, ncommands);
        each_command(command_name, &c->out);
    } else if (arg_is(sub, "DOCS")) {
        reply_array(&c->out, 0);
    } else if (arg_is(sub, "INFO")) {
        if (argc == 2) {
            reply_array(&c->out, ncommands);
            each_command(command_entry, &c->out);
            return 0;
        }
        reply_array(&c->out, argc - 2);
        for (size_t i = 2; i < argc; i++) {
            const struct command *cmd = lookup_command(&argv[i]);
            if (cmd)
                command_entry(&c->out, cmd);
            else
                buf_add(&c->out, "*-1\r\n", 5);
        }
    } else if (arg_is(sub, "GETKEYS")) {
        if (argc < 4)
            return reply_subcommand_arity(&c->out, "command", sub), 0;
        command_getkeys(c, argc, argv);
    } else {
        reply_unknown_sub(&c->out, sub, "COMMAND");
    }
    return 0;
}

/* Redis's reply to an unknown command quotes the name and the first
 * arguments; long ones are cut so that an error stays one short line. */
static void reply_unknown(struct buf *b, size_t argc, const struct kv_slice *argv)
{
    char args[512];
    size_t n = 0;
    for (size_t i = 1; i < argc && n < 128; i++) { /* each cut to what is left of 128 */
        size_t room = 128 - n, take = argv[i].n < room ? argv[i].n : room;
        int w = snprintf(args + n, sizeof args - n, "'%.*s' ", (int)take, argv[i].p);
        if (w < 0 || (size_t)w >= sizeof args - n)
            break;
        n += (size_t)w;
    }
    args[n] = 0;
    reply_error(b, "ERR unknown command '%.*s', with args beginning with: %s",
                (int)(argv[0].n > 128 ? 128 : argv[0].n), argv[0].p, args);
}

/* ---- MULTI, EXEC, DISCARD, WATCH, UNWATCH
 *
 * EXEC runs its queue as ONE store transaction (kv_txn) over the keys of
 * every queued command and every watched key: after a crash all of it is
 * in the store or none, and its replies go out once it is durable, as
 * every write's. Commands that fail on their input inside EXEC reply
 * their error and change nothing, and the others go on (Redis's rule); a
 * store error (the pool is full) rolls the whole block back and EXEC
 * answers that error. WATCH remembers each key's stripe version
 * (kv_key_version) and a digest of its value; EXEC, holding the locks,
 * aborts when a version moved and the key's value or existence changed. */

static _Thread_local int exec_error; /* what rolled EXEC's block back */

/* A command whose keys keep changing under it (SORT's pattern keys, as
 * other clients write the list it sorts) gives up after MOREKEYS_TRIES
 * runs (cmd_want_key). */
#define MOREKEYS_TRIES 8
static int run(struct conn *c, const struct command *cmd, size_t argc, struct kv_slice *argv);

struct queued {
    const struct command *cmd;
    size_t argc;
    struct kv_slice *argv; /* and their bytes, in the same allocation */
};

struct watched {
    char *key;
    size_t n;
    uint64_t version, digest; /* digest 0: the key did not exist */
};

struct multi {
    int open;     /* between MULTI and EXEC / DISCARD */
    int failed;   /* a command could not be queued: EXEC aborts */
    unsigned flags; /* the queued commands' flags or'ed (Redis's mstate.cmd_flags):
                       EXEC's OOM check */
    struct queued *q;
    size_t nq, capq;
    struct watched *w;
    size_t nw;
};

static struct multi *multi_of(struct conn *c)
{
    if (!c->multi)
        c->multi = calloc(1, sizeof *c->multi);
    return c->multi;
}

static void queue_clear(struct multi *m)
{
    for (size_t i = 0; i < m->nq; i++)
        free(m->q[i].argv);
    m->nq = 0;
    m->open = m->failed = 0;
    m->flags = 0;
}

static void watch_clear(struct multi *m)
{
    for (size_t i = 0; i < m->nw; i++)
        free(m->w[i].key);
    free(m->w);
    m->w = NULL;
    m->nw = 0;
}

void multi_free(struct conn *c)
{
    if (!c->multi)
        return;
    queue_clear(c->multi);
    watch_clear(c->multi);
    free(c->multi->q);
    free(c->multi);
    c->multi = NULL;
}

static int enqueue(struct multi *m, const struct command *cmd, size_t argc,
                   const struct kv_slice *argv)
{
    size_t bytes = 0;
    for (size_t i = 0; i < argc; i++)
        bytes += argv[i].n;
    if (m->nq == m->capq) {
        size_t cap = m->capq ? 2 * m->capq : 8;
        struct queued *q = realloc(m->q, cap * sizeof *q);
        if (!q)
            return -1;
        m->q = q;
        m->capq = cap;
    }
    struct kv_slice *a = malloc(argc * sizeof *a + bytes + 1);
    if (!a)
        return -1;
    char *p = (char *)(a + argc);
    for (size_t i = 0; i < argc; i++) {
        memcpy(p, argv[i].p, argv[i].n);
        a[i] = (struct kv_slice){p, argv[i].n};
        p += argv[i].n;
    }
    m->q[m->nq++] = (struct queued){cmd, argc, a};
    m->flags |= cmd->flags;
    return 0;
}

/* FNV-1a of a value, never 0 (0 stands for a missing key) */
static void digest_cb(void *arg, const char *v, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; v && i < n; i++)
        h = (h ^ (unsigned char)v[i]) * 0x100000001b3ULL;
    *(uint64_t *)arg = v ? (h ? h : 1) : 0;
}

static int cmd_multi(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    struct multi *m = multi_of(c);
    if (!m)
        return reply_error(&c->out, "ERR out of memory"), 0;
    m->open = 1;
    reply_simple(&c->out, "OK");
    return 0;
}

static int cmd_discard(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    if (!c->multi || !c->multi->open)
        return reply_error(&c->out, "ERR DISCARD without MULTI"), 0;
    queue_clear(c->multi);
    watch_clear(c->multi);
    reply_simple(&c->out, "OK");
    return 0;
}

/* RESET: the connection as it was when it opened: no MULTI, no WATCH, no
 * name, no subscription (RESP2 and database 0 are all this server has). */
static int cmd_reset(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    if (c->multi) {
        queue_clear(c->multi);
        watch_clear(c->multi);
    }
    client_set_name(c, NULL, 0);
    pubsub_forget(c);
    c->reply_off = c->reply_skip = 0;
    c->no_evict = 0;
    reply_simple(&c->out, "RESET");
    return 0;
}

static int cmd_unwatch(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    if (c->multi)
        watch_clear(c->multi);
    reply_simple(&c->out, "OK");
    return 0;
}

static int cmd_watch(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    struct multi *m = multi_of(c);
    if (!m)
        return reply_error(&c->out, "ERR out of memory"), 0;
    struct watched *w = realloc(m->w, (m->nw + argc - 1) * sizeof *w);
    if (!w)
        return TXN_E_NOMEM;
    m->w = w;
    for (size_t i = 1; i < argc; i++) {
        struct watched *x = &m->w[m->nw];
        if (!(x->key = malloc(argv[i].n + 1)))
            return TXN_E_NOMEM;
        memcpy(x->key, argv[i].p, argv[i].n);
        x->n = argv[i].n;
        x->version = kv_key_version(srv.kv, argv[i]);
        unsigned type = 0;
        int rc = kv_txn_read(t, argv[i], digest_cb, &x->digest, &type);
        if (rc < 0) {
            free(x->key);
            return rc;
        }
        x->digest += type; /* a new type with the same bytes is a change */
        m->nw++;
    }
    reply_simple(&c->out, "OK");
    return 0;
}

/* The keys of a queued command, by its table entry's key spec. */
static size_t add_keys(const struct queued *q, struct kv_slice *keys, size_t n)
{
    size_t nk = cmd_nkeys(q->cmd, q->argc, q->argv);
    for (size_t i = 0; i < nk; i++)
        keys[n++] = q->argv[cmd_key(q->cmd, q->argc, q->argv, i)];
    return n;
}

/* A watched key changed since WATCH (checked under EXEC's locks). */
static int watch_broken(struct multi *m, kv_txn *t)
{
    for (size_t i = 0; i < m->nw; i++) {
        struct kv_slice k = {m->w[i].key, m->w[i].n};
        if (kv_key_version(srv.kv, k) == m->w[i].version)
            continue;
        uint64_t d = 0;
        unsigned type = 0;
        int rc = kv_txn_read(t, k, digest_cb, &d, &type);
        if (rc < 0)
            return rc;
        d += type;
        if (d != m->w[i].digest)
            return 1;
    }
    return 0;
}

/* Run the queued block in one transaction: 0 (replies in c->out), 1 a
 * watched key changed (nothing written, nothing replied), or the store
 * error that rolled it all back. */
static int exec_block(struct conn *c, struct multi *m)
{
    size_t nkeys = m->nw + cmd_wanted.n;
    for (size_t i = 0; i < m->nq; i++)
        nkeys += m->q[i].argc;
    struct kv_slice *keys = malloc((nkeys ? nkeys : 1) * sizeof *keys);
    kv_txn *t = NULL;
    size_t n = 0, mark = c->out.len;
    int rc = keys ? 0 : TXN_E_NOMEM, write = 0;
    for (size_t i = 0; keys && i < m->nw; i++)
        keys[n++] = (struct kv_slice){m->w[i].key, m->w[i].n};
    for (size_t i = 0; keys && i < cmd_wanted.n; i++)
        keys[n++] = cmd_wanted.k[i];
    for (size_t i = 0; keys && i < m->nq; i++) {
        n = add_keys(&m->q[i], keys, n);
        write |= (m->q[i].cmd->flags & CMD_WRITE) != 0;
    }
    if (!rc)
        rc = kv_txn_begin(srv.kv, n, keys, write, &t);
    free(keys);
    if (!rc && (rc = watch_broken(m, t)) > 0) {
        int end = kv_txn_end(t, 0); /* nothing written */
        return end ? end : 1;
    }
    if (!rc) {
        reply_array(&c->out, m->nq);
        c->exec = t;
        for (size_t i = 0; i < m->nq && c->exec; i++)
            run(c, m->q[i].cmd, m->q[i].argc, m->q[i].argv);
        /* a store error inside ended it: run cleared c->exec */
        rc = c->exec ? kv_txn_end(t, 0) : exec_error;
        c->exec = NULL;
    }
    if (rc)
        c->out.len = mark;
    return rc;
}

/* A write committed: wake the first client blocked on each of its keys
 * (block.h); they run their pops again after it. */
static void signal_keys(const struct command *cmd, size_t argc, const struct kv_slice *argv)
{
    size_t nk = cmd_nkeys(cmd, argc, argv);
    for (size_t i = 0; i < nk; i++)
        block_signal(&argv[cmd_key(cmd, argc, argv, i)], 1);
}

static int cmd_exec(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    struct multi *m = c->multi;
    if (!m || !m->open)
        return reply_error(&c->out, "ERR EXEC without MULTI"), 0;
    if (m->failed) {
        queue_clear(m);
        watch_clear(m);
        return reply_error(&c->out,
                           "EXECABORT Transaction discarded because of previous errors."), 0;
    }
    pubsub_hold(c);
    int rc = exec_block(c, m);
    /* a command wanted keys the block did not hold: again, with them */
    for (int tries = 0; rc == KV_E_MOREKEYS && tries < MOREKEYS_TRIES; tries++) {
        pubsub_release(c, 0);
        pubsub_hold(c);
        rc = exec_block(c, m);
    }
    /* a full pool rolled the block back: expired keys first, then again */
    for (int tries = 0; (rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL) && tries < RECLAIM_TRIES &&
                        expire_reclaim((unsigned)tries);
         tries++) {
        pubsub_release(c, 0);
        pubsub_hold(c);
        rc = exec_block(c, m);
    }
    pubsub_release(c, rc == 0); /* its PUBLISHes once committed */
    for (size_t i = 0; rc == 0 && i < m->nq; i++)
        if (m->q[i].cmd->flags & CMD_WRITE)
            signal_keys(m->q[i].cmd, m->q[i].argc, m->q[i].argv);
    queue_clear(m);
    watch_clear(m);
    if (rc == 1)
        buf_add(&c->out, "*-1\r\n", 5);
    else if (rc)
        reply_store_error(&c->out, rc);
    return 0;
}

/* ---- the dispatcher */

/* Run one command in its transaction: EXEC's (c->exec) or one of its own
 * over the keys its entry names (none: no transaction). A store error
 * replaces what the command replied; inside EXEC, an error other than
 * WRONGTYPE (the command's own: it wrote nothing) rolls the block back
 * and clears c->exec (exec_error says why). 0 or the store error. */
static int run(struct conn *c, const struct command *cmd, size_t argc, struct kv_slice *argv)
{
    const struct key_spec *ks = &cmd->keys;
    size_t mark = c->out.len, nk = cmd_nkeys(cmd, argc, argv);
    int rc = 0, contiguous = ks->step == 1 && !cmd_movable(cmd->flags);
    for (int tries = 0;; tries++) {
        kv_txn *t = nk ? c->exec : NULL;
        rc = 0;
        size_t n = nk + (c->exec ? 0 : cmd_wanted.n);
        if (n && !t) {
            struct kv_slice few[16], *keys = few;
            if (contiguous && !cmd_wanted.n)
                keys = &argv[ks->first]; /* contiguous: no copy */
            else if (n > sizeof few / sizeof *few && !(keys = malloc(n * sizeof *keys)))
                rc = TXN_E_NOMEM;
            for (size_t i = 0; !rc && keys != &argv[ks->first] && i < nk; i++)
                keys[i] = argv[cmd_key(cmd, argc, argv, i)];
            for (size_t i = 0; !rc && i < cmd_wanted.n; i++)
                keys[nk + i] = cmd_wanted.k[i];
            if (!rc && (cmd->flags & CMD_RESERVE))
                kv_reserve(srv.kv, nk);
            if (!rc)
                rc = kv_txn_begin(srv.kv, n, keys, (cmd->flags & CMD_WRITE) != 0, &t);
            if (keys != few && keys != &argv[ks->first])
                free(keys);
            if (rc) {
                reply_store_error(&c->out, rc);
                return rc;
            }
        }
        rc = cmd->proc(c, t, argc, argv);
        if (t && t != c->exec) {
            rc = kv_txn_end(t, rc);
            if (rc == KV_E_MOREKEYS && tries < MOREKEYS_TRIES) {
                c->out.len = mark; /* rolled back: again, holding them */
                continue;
            }
            if (rc < 0)
                c->blk_armed = 0; /* it answers the error: not blocked */
            /* a write that committed wakes the clients blocked on its keys */
            if (rc >= 0 && !c->blk_armed && (cmd->flags & CMD_WRITE))
                signal_keys(cmd, argc, argv);
        } else if (t && rc < 0 && rc != KV_E_WRONGTYPE) {
            kv_txn_end(t, rc); /* the block cannot commit in part */
            exec_error = rc;
            c->exec = NULL;
        }
        break;
    }
    if (rc < 0) {
        c->out.len = mark;
        reply_store_error(&c->out, rc);
    }
    return rc < 0 ? rc : 0;
}

long long command_pause_left(void)
{
    long long end = atomic_load(&pause_end), now = end ? mono_ms() : 0;
    return end > now ? end - now : 0;
}

int command_paused(size_t argc, struct kv_slice *argv, long long *left)
{
    long long end = atomic_load(&pause_end), now;
    if (!end || (now = mono_ms()) >= end)
        return 0;
    if (atomic_load(&pause_writes)) {
        const struct command *cmd = argc ? lookup_command(&argv[0]) : NULL;
        /* writes, EXEC (its block may write) and PUBLISH, as Redis */
        if (!cmd || (!(cmd->flags & CMD_WRITE) && cmd->proc != cmd_exec &&
                     !arg_is(&argv[0], "publish") && !arg_is(&argv[0], "spublish")))
            return 0;
    }
    *left = end - now;
    return 1;
}

static void dispatch(struct conn *c, size_t argc, struct kv_slice *argv);

void command_run(struct conn *c, size_t argc, struct kv_slice *argv)
{
    size_t mark = c->out.len;
    /* a blocked request run again: an answer other than an element (an
     * error) passes its wake-up on; a timeout still pops what is there */
    int unblocked = block_state(c) == BLOCK_ERROR;
    block_rerun(c);
    c->blk_armed = 0;
    dispatch(c, argc, argv);
    if (c->blk && !c->blk_armed) /* a blocked request that answered */
        block_done(c, unblocked);
    cmd_wanted_clear();
    if (c->reply_off || c->reply_skip) { /* CLIENT REPLY OFF or SKIP: errors too */
        c->out.len = mark;
        if (c->reply_skip)
            c->reply_skip--;
    }
}

/* Redis's check before a command that may grow the store (CMD_DENYOOM):
 * past --max-memory, a policy other than noeviction evicts down to it;
 * 1 if the command is refused (noeviction, or nothing left the policy may
 * evict). kv_evict_admit owns the rule for several workers: a write whose
 * own eviction made room goes on. The bytes count the element tables of
 * big hashes and sets too (t_dict.h). */
static int over_max_memory(void)
{
    uint64_t limit = atomic_load(&srv.max_memory);
    struct kv_info ki;
    if (!limit)
        return 0;
    kv_info(srv.kv, &ki);
    if (ki.bytes <= limit)
        return 0;
    int how = config_evict_how();
    return how < 0 || kv_evict_admit(srv.kv, limit, (unsigned)how) <= 0;
}

static const char oom_error[] = "OOM command not allowed when used memory > 'maxmemory'.";

static void dispatch(struct conn *c, size_t argc, struct kv_slice *argv)
{
    thread_commands++;
    const struct command *cmd = lookup_command(&argv[0]);
    struct multi *m = c->multi && c->multi->open ? c->multi : NULL;
    if (!cmd) {
        if (m)
            m->failed = 1;
        return reply_unknown(&c->out, argc, argv);
    }
    if ((cmd->arity > 0 && argc != (size_t)cmd->arity) ||
        (cmd->arity < 0 && argc < (size_t)-cmd->arity)) {
        if (cmd->proc == cmd_exec) { /* Redis discards the block, MULTI or not */
            if (c->multi) {
                queue_clear(c->multi);
                watch_clear(c->multi);
            }
            return reply_error(&c->out, "EXECABORT Transaction discarded because of: wrong "
                               "number of arguments for 'exec' command");
        }
        if (m)
            m->failed = 1;
        return reply_error(&c->out, "ERR wrong number of arguments for '%s' command",
                           cmd->name);
    }
    if (pubsub_subscribed(c) && !(cmd->flags & CMD_PUBSUB_OK))
        return reply_error(&c->out, "ERR Can't execute '%s': only (P|S)SUBSCRIBE / "
                           "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                           cmd->name);
    /* Past the limit inside MULTI, redis-server 7.0 refuses every command
     * but DISCARD, QUIT and RESET (queuing takes memory too), and EXEC when
     * a queued command may grow the store: checked again at EXEC, since
     * the memory may have grown while the block was queued */
    if (m && cmd->proc != cmd_discard && cmd->proc != cmd_quit && cmd->proc != cmd_reset &&
        (cmd->proc != cmd_exec || (m->flags & CMD_DENYOOM)) && over_max_memory()) {
        if (cmd->proc != cmd_exec) {
            m->failed = 1; /* as Redis: EXEC then answers EXECABORT */
            return reply_error(&c->out, "%s", oom_error);
        }
        queue_clear(m);
        watch_clear(m);
        return reply_error(&c->out, "EXECABORT Transaction discarded because of: %s",
                           oom_error);
    }
    if (m && cmd->proc != cmd_exec && cmd->proc != cmd_discard && cmd->proc != cmd_quit &&
        cmd->proc != cmd_reset) {
        if (cmd->proc == cmd_multi)
            return reply_error(&c->out, "ERR MULTI calls can not be nested");
        if (cmd->proc == cmd_watch)
            return reply_error(&c->out, "ERR WATCH inside MULTI is not allowed");
        if (cmd->flags & CMD_NO_MULTI) {
            m->failed = 1;
            return reply_error(&c->out, "ERR %s inside MULTI is not supported here: it "
                               "cannot be part of the block's one transaction", cmd->name);
        }
        if (enqueue(m, cmd, argc, argv)) {
            m->failed = 1;
            return reply_error(&c->out, "ERR out of memory");
        }
        return reply_simple(&c->out, "QUEUED");
    }
    if ((cmd->flags & CMD_DENYOOM) && over_max_memory())
        return reply_error(&c->out, "%s", oom_error);
    size_t mark = c->out.len;
    cmd_found_full = 0;
    run(c, cmd, argc, argv);
    /* A write that found the pool full rolled back (a command of several
     * transactions, as FLUSHALL, may be run again): expired keys are
     * deleted to make room, and it runs again, as Redis frees expired keys
     * before it refuses a write. EXEC does this for its block. */
    for (int tries = 0; cmd_found_full && tries < RECLAIM_TRIES && cmd->proc != cmd_exec &&
                        (cmd->flags & CMD_WRITE) && expire_reclaim((unsigned)tries);
         tries++) {
        c->out.len = mark;
        cmd_found_full = 0;
        run(c, cmd, argc, argv);
    }
}
