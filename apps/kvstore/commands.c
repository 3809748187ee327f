/* commands.c - the command table and the commands: Redis's names, arities,
 * replies and error texts, so that redis-cli, redis-benchmark and client
 * libraries work unchanged. Dispatch is one lookup in a table of
 * {name, proc, arity, flags, keys}, as in Redis; the same table answers
 * COMMAND. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

struct command {
    const char *name;
    void (*proc)(struct conn *c, size_t argc, struct kv_slice *argv);
    int arity; /* n: exactly n arguments with the name; -n: at least n */
    const char *flags; /* COMMAND's flags, space-separated */
    int first_key, last_key, step;
};

/* ---- helpers */

/* This thread's command answered that the pool is full: command_run
 * reclaims expired keys and runs it again, up to RECLAIM_TRIES times (a
 * reclaim frees a few hundred nodes, whose room may not be of the size
 * that the write lacked). */
static _Thread_local int found_full;
#define RECLAIM_TRIES 4

/* The reply to a store error; a full pool is the one a client can act on. */
void reply_store_error(struct buf *b, int rc)
{
    found_full |= rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL;
    if (rc == KV_E_WRONGTYPE)
        reply_error(b, "WRONGTYPE Operation against a key holding the wrong kind of value");
    else if (rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL)
        reply_error(b, "ERR out of persistent memory: the pool is full (%s)", txn_strerror(rc));
    else
        reply_error(b, "ERR store: %s", txn_strerror(rc));
}

int arg_is(const struct kv_slice *a, const char *word)
{
    size_t n = strlen(word);
    return a->n == n && !strncasecmp(a->p, word, n);
}

/* Redis's integer syntax (strict decimal, within the type). */
int parse_ll(const struct kv_slice *a, long long *out)
{
    char s[24];
    if (a->n == 0 || a->n >= sizeof s)
        return -1;
    memcpy(s, a->p, a->n);
    s[a->n] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || (s[0] == '0' && a->n > 1) || s[0] == '+' || s[0] == ' ')
        return -1;
    *out = v;
    return 0;
}

int parse_u64(const struct kv_slice *a, uint64_t *out)
{
    char s[24];
    if (a->n == 0 || a->n >= sizeof s || a->p[0] < '0' || a->p[0] > '9')
        return -1;
    memcpy(s, a->p, a->n);
    s[a->n] = 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

/* Glob matching as Redis's KEYS: * ? [abc] [^a-z] and \ escapes. A star
 * remembers where it was so a mismatch backtracks there only: the last
 * star's choice is the only one that matters, so this is O(|p| * |s|),
 * not exponential. */
static int class_match(const char **pp, const char *pend, char ch)
{
    const char *p = *pp + 1;
    int neg = p < pend && *p == '^', hit = 0;
    p += neg;
    for (; p < pend && *p != ']'; p++) {
        if (*p == '\\' && p + 1 < pend) {
            p++;
            hit |= *p == ch;
        } else if (p + 2 < pend && p[1] == '-' && p[2] != ']') {
            unsigned char lo = (unsigned char)p[0], hi = (unsigned char)p[2];
            if (lo > hi) {
                unsigned char t = lo;
                lo = hi;
                hi = t;
            }
            hit |= (unsigned char)ch >= lo && (unsigned char)ch <= hi;
            p += 2;
        } else {
            hit |= *p == ch;
        }
    }
    if (p == pend)
        return -1; /* no closing ']': the pattern matches nothing */
    *pp = p;
    return hit != neg;
}

int glob_match(const char *pat, size_t plen, const char *s, size_t slen)
{
    const char *p = pat, *pend = pat + plen, *send = s + slen;
    const char *star = NULL, *star_s = NULL;
    while (s < send) {
        if (p < pend && *p == '*') {
            star = ++p;
            star_s = s;
            continue;
        }
        if (p < pend) {
            const char *q = p;
            int ok;
            if (*q == '?')
                ok = 1;
            else if (*q == '[')
                ok = class_match(&q, pend, *s);
            else if (*q == '\\' && q + 1 < pend)
                ok = *++q == *s;
            else
                ok = *q == *s;
            if (ok < 0)
                return 0;
            if (ok) {
                p = q + 1;
                s++;
                continue;
            }
        }
        if (!star)
            return 0;
        p = star;
        s = ++star_s;
    }
    while (p < pend && *p == '*')
        p++;
    return p == pend;
}

/* ---- keys and values */

static void cmd_dbsize(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc, (void)argv;
    struct kv_info i;
    kv_info(srv.kv, &i);
    reply_int(&c->out, (long long)i.keys);
}

static void cmd_flushall(struct conn *c, size_t argc, struct kv_slice *argv)
{
    if (argc > 2 || (argc == 2 && !arg_is(&argv[1], "SYNC") && !arg_is(&argv[1], "ASYNC")))
        return reply_error(&c->out, "ERR syntax error");
    int rc = kv_flush(srv.kv);
    if (rc)
        return reply_store_error(&c->out, rc);
    reply_simple(&c->out, "OK");
}

/* Keys found by a scan, encoded as bulk strings, counted. */
struct key_list {
    struct buf items;
    size_t n;
    const struct kv_slice *pattern; /* NULL: all */
    size_t seen; /* keys visited, matching or not */
    int type;    /* SCAN's TYPE: a kv_type, KV_NO_TYPE (a type not kept
                    here: nothing matches) or -1: any */
};
#define KV_NO_TYPE 99

static void key_cb(void *arg, const char *k, size_t n, unsigned type)
{
    struct key_list *l = arg;
    l->seen++;
    if (l->pattern && !glob_match(l->pattern->p, l->pattern->n, k, n))
        return;
    if (l->type >= 0 && (unsigned)l->type != (type == KV_ITEM ? KV_STRING : type))
        return;
    reply_bulk(&l->items, k, n);
    l->n++;
}

static void cmd_keys(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    struct key_list l = {{0}, 0, &argv[1], 0, -1};
    uint64_t cursor = 0;
    int rc;
    if (argv[1].n == 1 && argv[1].p[0] == '*')
        l.pattern = NULL;
    /* a stripe lock at a time: not a snapshot, as with SCAN */
    while (!(rc = kv_scan(srv.kv, cursor, 4096, key_cb, &l, &cursor)) && cursor)
        ;
    if (rc)
        reply_store_error(&c->out, rc);
    else if (l.items.oom)
        reply_error(&c->out, "ERR out of memory");
    else {
        reply_array(&c->out, l.n);
        buf_add(&c->out, l.items.p, l.items.len);
    }
    buf_free(&l.items);
}

static void cmd_scan(struct conn *c, size_t argc, struct kv_slice *argv)
{
    uint64_t cursor, next;
    long long count = 10;
    struct key_list l = {{0}, 0, NULL, 0, -1};
    if (parse_u64(&argv[1], &cursor))
        return reply_error(&c->out, "ERR invalid cursor");
    for (size_t i = 2; i < argc; i += 2) {
        if (i + 1 == argc)
            return reply_error(&c->out, "ERR syntax error");
        if (arg_is(&argv[i], "MATCH"))
            l.pattern = &argv[i + 1];
        else if (arg_is(&argv[i], "COUNT")) {
            if (parse_ll(&argv[i + 1], &count))
                return reply_error(&c->out, "ERR value is not an integer or out of range");
            if (count < 1)
                return reply_error(&c->out, "ERR syntax error");
        } else if (arg_is(&argv[i], "TYPE"))
            l.type = arg_is(&argv[i + 1], "string") ? KV_STRING
                     : arg_is(&argv[i + 1], "hash") ? KV_HASH : KV_NO_TYPE;
        else
            return reply_error(&c->out, "ERR syntax error");
    }
    /* as Redis: go on until COUNT keys (before MATCH) or 10 x COUNT
     * buckets were visited, or the end */
    int rc;
    uint64_t visited = 0, limit = 10 * (uint64_t)count;
    do {
        rc = kv_scan(srv.kv, cursor, (size_t)count, key_cb, &l, &next);
        visited += (uint64_t)count;
        cursor = next;
    } while (!rc && next && l.seen < (size_t)count && visited < limit);
    if (rc || l.items.oom) {
        buf_free(&l.items);
        return rc ? reply_store_error(&c->out, rc) : reply_error(&c->out, "ERR out of memory");
    }
    char cur[24];
    reply_array(&c->out, 2);
    reply_bulk(&c->out, cur, (size_t)snprintf(cur, sizeof cur, "%llu", (unsigned long long)next));
    reply_array(&c->out, l.n);
    buf_add(&c->out, l.items.p, l.items.len);
    buf_free(&l.items);
}

/* ---- connection and server */

static void cmd_ping(struct conn *c, size_t argc, struct kv_slice *argv)
{
    if (argc > 2)
        return reply_error(&c->out, "ERR wrong number of arguments for 'ping' command");
    if (argc == 2)
        reply_bulk(&c->out, argv[1].p, argv[1].n);
    else
        reply_simple(&c->out, "PONG");
}

static void cmd_echo(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    reply_bulk(&c->out, argv[1].p, argv[1].n);
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

static void cmd_hello(struct conn *c, size_t argc, struct kv_slice *argv)
{
    const struct kv_slice *name = NULL;
    if (argc >= 2) {
        long long ver;
        if (parse_ll(&argv[1], &ver))
            return reply_error(&c->out, "ERR Protocol version is not an integer or out of range");
        if (ver != 2)
            return reply_error(&c->out, "NOPROTO unsupported protocol version%s",
                               ver == 3 ? ": this server speaks RESP2 only" : "");
    }
    for (size_t i = 2; i < argc; i++) {
        if (arg_is(&argv[i], "SETNAME") && i + 1 < argc) {
            name = &argv[++i];
        } else if (arg_is(&argv[i], "AUTH") && i + 2 < argc) {
            return reply_error(&c->out, "ERR AUTH: this server has no users or passwords");
        } else {
            return reply_error(&c->out, "ERR Syntax error in HELLO option '%.*s'",
                               (int)(argv[i].n > 64 ? 64 : argv[i].n), argv[i].p);
        }
    }
    if (name && !name_ok(name))
        return reply_error(&c->out, "ERR Client names cannot contain spaces, newlines or "
                                    "special characters.");
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
    char line[512];
    int n = snprintf(line, sizeof line,
                     "id=%llu addr=%s fd=%d name=%s age=%lld idle=0 flags=N db=0 sub=0 "
                     "psub=0 ssub=0 multi=-1 qbuf=0 obl=0 oll=0 omem=0 events=r cmd=client\n",
                     (unsigned long long)c->id, srv.unix_path ? "unix" : "tcp", c->fd,
                     c->name ? c->name : "", (long long)ts.tv_sec - c->since);
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

/* CLIENT SETNAME | GETNAME | ID | LIST | INFO */
static void cmd_client(struct conn *c, size_t argc, struct kv_slice *argv)
{
    const struct kv_slice *sub = &argv[1];
    if (arg_is(sub, "SETNAME")) {
        if (argc != 3)
            return reply_subcommand_arity(&c->out, "client", sub);
        if (!name_ok(&argv[2]))
            return reply_error(&c->out, "ERR Client names cannot contain spaces, newlines "
                                        "or special characters.");
        client_set_name(c, argv[2].p, argv[2].n);
        return reply_simple(&c->out, "OK");
    }
    if (arg_is(sub, "GETNAME") || arg_is(sub, "ID") || arg_is(sub, "INFO")) {
        if (argc != 2)
            return reply_subcommand_arity(&c->out, "client", sub);
        if (arg_is(sub, "ID"))
            return reply_int(&c->out, (long long)c->id);
        if (arg_is(sub, "GETNAME"))
            return client_get_name(c, name_reply, &c->out);
        struct buf b = {0};
        struct conn *me[2] = {c, (struct conn *)(void *)&b};
        clients_each(self_line, me);
        reply_bulk(&c->out, b.p ? b.p : "", b.len);
        return buf_free(&b);
    }
    if (arg_is(sub, "LIST")) {
        struct buf b = {0};
        clients_each(client_line, &b);
        reply_bulk(&c->out, b.p ? b.p : "", b.len);
        return buf_free(&b);
    }
    reply_unknown_sub(&c->out, sub, "CLIENT");
}

/* FUNCTION FLUSH and SCRIPT FLUSH: no functions or scripts to flush */
static void cmd_function(struct conn *c, size_t argc, struct kv_slice *argv)
{
    int script = arg_is(&argv[0], "SCRIPT");
    if (!arg_is(&argv[1], "FLUSH"))
        return reply_unknown_sub(&c->out, &argv[1], script ? "SCRIPT" : "FUNCTION");
    if (argc > 3 || (argc == 3 && !arg_is(&argv[2], "ASYNC") && !arg_is(&argv[2], "SYNC")))
        return reply_error(&c->out, script ? "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
                                           : "ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    reply_simple(&c->out, "OK");
}

/* LATENCY and SLOWLOG: nothing is recorded (empty answers) */
static void cmd_latency(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    if (arg_is(&argv[1], "LATEST") || arg_is(&argv[1], "HISTORY"))
        return reply_array(&c->out, 0);
    if (arg_is(&argv[1], "RESET"))
        return reply_int(&c->out, 0);
    reply_unknown_sub(&c->out, &argv[1], "LATENCY");
}

static void cmd_slowlog(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    if (arg_is(&argv[1], "GET"))
        return reply_array(&c->out, 0);
    if (arg_is(&argv[1], "LEN"))
        return reply_int(&c->out, 0);
    if (arg_is(&argv[1], "RESET"))
        return reply_simple(&c->out, "OK");
    reply_unknown_sub(&c->out, &argv[1], "SLOWLOG");
}

static void cmd_time(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc, (void)argv;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char s[24], us[24];
    int ns = snprintf(s, sizeof s, "%lld", (long long)ts.tv_sec);
    int nu = snprintf(us, sizeof us, "%ld", ts.tv_nsec / 1000);
    reply_array(&c->out, 2);
    reply_bulk(&c->out, s, (size_t)ns);
    reply_bulk(&c->out, us, (size_t)nu);
}

static void cmd_debug(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc, (void)argv;
    reply_error(&c->out, "ERR DEBUG is not supported by this server");
}

static void cmd_select(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long db;
    if (parse_ll(&argv[1], &db))
        return reply_error(&c->out, "ERR value is not an integer or out of range");
    if (db != 0)
        return reply_error(&c->out, "ERR DB index is out of range");
    reply_simple(&c->out, "OK");
}

static void cmd_quit(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc, (void)argv;
    reply_simple(&c->out, "OK");
    c->closing = 1;
}

/* As Redis: no reply; the server closes the pool and exits, and the
 * client sees its connection close. */
static void cmd_shutdown(struct conn *c, size_t argc, struct kv_slice *argv)
{
    for (size_t i = 1; i < argc; i++) {
        if (arg_is(&argv[i], "ABORT"))
            return reply_error(&c->out, "ERR No shutdown in progress.");
        if (!arg_is(&argv[i], "NOSAVE") && !arg_is(&argv[i], "SAVE") &&
            !arg_is(&argv[i], "NOW") && !arg_is(&argv[i], "FORCE"))
            return reply_error(&c->out, "ERR syntax error");
    }
    uint64_t one = 1;
    if (write(srv.stop_fd, &one, sizeof one) != sizeof one)
        return reply_error(&c->out, "ERR cannot signal the shutdown");
    c->closing = 1;
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
             "maxclients:%u\r\n",
             (unsigned long long)atomic_load(&srv.clients), srv.max_clients);
}

static void info_memory(struct info_text *t, const struct kv_info *ki)
{
    info_add(t,
             "# Memory\r\n"
             "used_memory:%llu\r\n"
             "pool_size:%zu\r\n"
             "pool_max_size:%zu\r\n"
             "hash_buckets:%llu\r\n"
             "hash_resizing:%d\r\n",
             (unsigned long long)ki->bytes, ki->pool_size, ki->pool_max_size,
             (unsigned long long)ki->buckets, ki->resizing);
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
static void cmd_info(struct conn *c, size_t argc, struct kv_slice *argv)
{
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
}

/* CONFIG GET: what redis-benchmark asks (save, appendonly) and a few more
 * that describe this server; CONFIG SET changes nothing here. */
static void cmd_config(struct conn *c, size_t argc, struct kv_slice *argv)
{
    if (!arg_is(&argv[1], "GET"))
        return reply_error(&c->out, "ERR unknown subcommand '%.*s'. Try CONFIG HELP.",
                           (int)(argv[1].n > 64 ? 64 : argv[1].n), argv[1].p);
    if (argc < 3)
        return reply_error(&c->out, "ERR wrong number of arguments for 'config|get' command");
    char v[6][32];
    snprintf(v[0], sizeof v[0], "%zu", srv.lim.max_bulk);
    snprintf(v[1], sizeof v[1], "%u", srv.max_clients);
    snprintf(v[2], sizeof v[2], "%d", srv.port);
    snprintf(v[3], sizeof v[3], "%u", srv.threads);
    snprintf(v[4], sizeof v[4], "%zu", srv.max_query);
    const char *params[][2] = {
        {"save", ""},       {"appendonly", "no"},  {"databases", "1"},
        {"proto-max-bulk-len", v[0]}, {"maxclients", v[1]}, {"port", v[2]},
        {"io-threads", v[3]}, {"client-query-buffer-limit", v[4]},
        {"unixsocket", srv.unix_path ? srv.unix_path : ""},
    };
    size_t np = sizeof params / sizeof *params, hits = 0;
    struct buf items = {0};
    for (size_t p = 0; p < np; p++)
        for (size_t i = 2; i < argc; i++)
            if (glob_match(argv[i].p, argv[i].n, params[p][0], strlen(params[p][0]))) {
                reply_bulk(&items, params[p][0], strlen(params[p][0]));
                reply_bulk(&items, params[p][1], strlen(params[p][1]));
                hits++;
                break;
            }
    reply_array(&c->out, 2 * hits);
    buf_add(&c->out, items.p, items.len);
    buf_free(&items);
}

/* ---- the table */

static void cmd_command(struct conn *c, size_t argc, struct kv_slice *argv);

static void cmd_multi(struct conn *c, size_t argc, struct kv_slice *argv);
static void cmd_exec(struct conn *c, size_t argc, struct kv_slice *argv);
static void cmd_discard(struct conn *c, size_t argc, struct kv_slice *argv);
static void cmd_watch(struct conn *c, size_t argc, struct kv_slice *argv);
static void cmd_unwatch(struct conn *c, size_t argc, struct kv_slice *argv);

static const struct command commands[] = {
    {"get", cmd_get, 2, "readonly fast", 1, 1, 1},
    {"set", cmd_set, -3, "write denyoom", 1, 1, 1},
    {"setnx", cmd_setnx, 3, "write denyoom fast", 1, 1, 1},
    {"getset", cmd_getset, 3, "write denyoom fast", 1, 1, 1},
    {"getdel", cmd_getset, 2, "write fast", 1, 1, 1},
    {"append", cmd_append, 3, "write denyoom fast", 1, 1, 1},
    {"strlen", cmd_strlen, 2, "readonly fast", 1, 1, 1},
    {"getrange", cmd_getrange, 4, "readonly", 1, 1, 1},
    {"setrange", cmd_setrange, 4, "write denyoom", 1, 1, 1},
    {"setbit", cmd_setbit, 4, "write denyoom", 1, 1, 1},
    {"getbit", cmd_getbit, 3, "readonly fast", 1, 1, 1},
    {"bitcount", cmd_bitcount, -2, "readonly", 1, 1, 1},
    {"del", cmd_del, -2, "write", 1, -1, 1},
    {"unlink", cmd_del, -2, "write fast", 1, -1, 1},
    {"exists", cmd_exists, -2, "readonly fast", 1, -1, 1},
    {"touch", cmd_exists, -2, "readonly fast", 1, -1, 1},
    {"mget", cmd_mget, -2, "readonly fast", 1, -1, 1},
    {"mset", cmd_mset, -3, "write denyoom", 1, -1, 2},
    {"msetnx", cmd_mset, -3, "write denyoom", 1, -1, 2},
    {"incr", cmd_incr, 2, "write denyoom fast", 1, 1, 1},
    {"decr", cmd_incr, 2, "write denyoom fast", 1, 1, 1},
    {"incrby", cmd_incrby, 3, "write denyoom fast", 1, 1, 1},
    {"decrby", cmd_incrby, 3, "write denyoom fast", 1, 1, 1},
    {"incrbyfloat", cmd_incrbyfloat, 3, "write denyoom fast", 1, 1, 1},
    {"type", cmd_type, 2, "readonly fast", 1, 1, 1},
    {"expire", cmd_expire, -3, "write fast", 1, 1, 1},
    {"pexpire", cmd_expire, -3, "write fast", 1, 1, 1},
    {"expireat", cmd_expire, -3, "write fast", 1, 1, 1},
    {"pexpireat", cmd_expire, -3, "write fast", 1, 1, 1},
    {"ttl", cmd_ttl, 2, "readonly fast", 1, 1, 1},
    {"pttl", cmd_ttl, 2, "readonly fast", 1, 1, 1},
    {"expiretime", cmd_ttl, 2, "readonly fast", 1, 1, 1},
    {"pexpiretime", cmd_ttl, 2, "readonly fast", 1, 1, 1},
    {"persist", cmd_persist, 2, "write fast", 1, 1, 1},
    {"setex", cmd_setex, 4, "write denyoom", 1, 1, 1},
    {"psetex", cmd_setex, 4, "write denyoom", 1, 1, 1},
    {"getex", cmd_getex, -2, "write fast", 1, 1, 1},
    {"rename", cmd_rename, 3, "write", 1, 2, 1},
    {"renamenx", cmd_rename, 3, "write fast", 1, 2, 1},
    {"copy", cmd_copy, -3, "write denyoom", 1, 2, 1},
    {"randomkey", cmd_randomkey, 1, "readonly", 0, 0, 0},
    {"object", cmd_object, -2, "readonly", 2, 2, 1},
    {"hset", cmd_hset, -4, "write denyoom fast", 1, 1, 1},
    {"hmset", cmd_hset, -4, "write denyoom fast", 1, 1, 1},
    {"hsetnx", cmd_hsetnx, 4, "write denyoom fast", 1, 1, 1},
    {"hget", cmd_hget, 3, "readonly fast", 1, 1, 1},
    {"hmget", cmd_hget, -3, "readonly fast", 1, 1, 1},
    {"hdel", cmd_hdel, -3, "write fast", 1, 1, 1},
    {"hlen", cmd_hlen, 2, "readonly fast", 1, 1, 1},
    {"hstrlen", cmd_hget, 3, "readonly fast", 1, 1, 1},
    {"hexists", cmd_hget, 3, "readonly fast", 1, 1, 1},
    {"hincrby", cmd_hincrby, 4, "write denyoom fast", 1, 1, 1},
    {"hincrbyfloat", cmd_hincrby, 4, "write denyoom fast", 1, 1, 1},
    {"hkeys", cmd_hgetall, 2, "readonly", 1, 1, 1},
    {"hvals", cmd_hgetall, 2, "readonly", 1, 1, 1},
    {"hgetall", cmd_hgetall, 2, "readonly", 1, 1, 1},
    {"hrandfield", cmd_hrandfield, -2, "readonly", 1, 1, 1},
    {"hscan", cmd_hscan, -3, "readonly", 1, 1, 1},
    {"hello", cmd_hello, -1, "noscript loading fast", 0, 0, 0},
    {"client", cmd_client, -2, "admin noscript loading", 0, 0, 0},
    {"function", cmd_function, -2, "noscript", 0, 0, 0},
    {"script", cmd_function, -2, "noscript", 0, 0, 0},
    {"latency", cmd_latency, -2, "admin noscript loading", 0, 0, 0},
    {"slowlog", cmd_slowlog, -2, "admin loading", 0, 0, 0},
    {"time", cmd_time, 1, "loading fast", 0, 0, 0},
    {"debug", cmd_debug, -2, "admin noscript loading", 0, 0, 0},
    {"multi", cmd_multi, 1, "noscript loading fast", 0, 0, 0},
    {"exec", cmd_exec, 1, "noscript loading", 0, 0, 0},
    {"discard", cmd_discard, 1, "noscript loading fast", 0, 0, 0},
    {"watch", cmd_watch, -2, "noscript loading fast", 1, -1, 1},
    {"unwatch", cmd_unwatch, 1, "noscript loading fast", 0, 0, 0},
    {"dbsize", cmd_dbsize, 1, "readonly fast", 0, 0, 0},
    {"flushall", cmd_flushall, -1, "write", 0, 0, 0},
    {"flushdb", cmd_flushall, -1, "write", 0, 0, 0},
    {"keys", cmd_keys, 2, "readonly", 0, 0, 0},
    {"scan", cmd_scan, -2, "readonly", 0, 0, 0},
    {"ping", cmd_ping, -1, "fast", 0, 0, 0},
    {"echo", cmd_echo, 2, "fast", 0, 0, 0},
    {"select", cmd_select, 2, "loading fast", 0, 0, 0},
    {"info", cmd_info, -1, "loading", 0, 0, 0},
    {"command", cmd_command, -1, "loading", 0, 0, 0},
    {"config", cmd_config, -2, "admin loading", 0, 0, 0},
    {"quit", cmd_quit, -1, "fast", 0, 0, 0},
    {"shutdown", cmd_shutdown, -1, "admin", 0, 0, 0},
};
#define NCOMMANDS (sizeof commands / sizeof *commands)

static const struct command *lookup_command(const struct kv_slice *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (arg_is(name, commands[i].name))
            return &commands[i];
    return NULL;
}

/* One entry of COMMAND's reply, in the six fields every Redis client
 * understands: name, arity, flags, first key, last key, step. */
static void command_entry(struct buf *b, const struct command *cmd)
{
    char flags[64];
    const char *f[8];
    size_t nf = 0;
    snprintf(flags, sizeof flags, "%s", cmd->flags);
    for (char *save, *t = strtok_r(flags, " ", &save); t && nf < 8; t = strtok_r(NULL, " ", &save))
        f[nf++] = t;
    reply_array(b, 6);
    reply_bulk(b, cmd->name, strlen(cmd->name));
    reply_int(b, cmd->arity);
    reply_array(b, nf);
    for (size_t i = 0; i < nf; i++)
        reply_simple(b, f[i]);
    reply_int(b, cmd->first_key);
    reply_int(b, cmd->last_key);
    reply_int(b, cmd->step);
}

/* COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND DOCS (empty: no
 * docs; redis-cli then uses its built-in help). */
static void cmd_command(struct conn *c, size_t argc, struct kv_slice *argv)
{
    if (argc == 1) {
        reply_array(&c->out, NCOMMANDS);
        for (size_t i = 0; i < NCOMMANDS; i++)
            command_entry(&c->out, &commands[i]);
    } else if (arg_is(&argv[1], "COUNT")) {
        reply_int(&c->out, (long long)NCOMMANDS);
    } else if (arg_is(&argv[1], "DOCS")) {
        reply_array(&c->out, 0);
    } else if (arg_is(&argv[1], "INFO")) {
        reply_array(&c->out, argc - 2);
        for (size_t i = 2; i < argc; i++) {
            const struct command *cmd = lookup_command(&argv[i]);
            if (cmd)
                command_entry(&c->out, cmd);
            else
                buf_add(&c->out, "*-1\r\n", 5);
        }
    } else {
        reply_error(&c->out, "ERR unknown subcommand '%.*s'. Try COMMAND HELP.",
                    (int)(argv[1].n > 64 ? 64 : argv[1].n), argv[1].p);
    }
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

/* Commands that lock the store on their own (scans, whole-store flushes)
 * cannot join EXEC's transaction: refused inside MULTI. */
static int multi_refuses(const struct command *cmd)
{
    static const char *const no[] = {"flushall", "flushdb", "keys", "scan", "randomkey", "shutdown",
                                    "multi"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (!strcmp(cmd->name, no[i]))
            return 1;
    return 0;
}

static _Thread_local int exec_error; /* what rolled EXEC's block back */

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

static void cmd_multi(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc, (void)argv;
    struct multi *m = multi_of(c);
    if (!m)
        return reply_error(&c->out, "ERR out of memory");
    m->open = 1;
    reply_simple(&c->out, "OK");
}

static void cmd_discard(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc, (void)argv;
    if (!c->multi || !c->multi->open)
        return reply_error(&c->out, "ERR DISCARD without MULTI");
    queue_clear(c->multi);
    watch_clear(c->multi);
    reply_simple(&c->out, "OK");
}

static void cmd_unwatch(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc, (void)argv;
    if (c->multi)
        watch_clear(c->multi);
    reply_simple(&c->out, "OK");
}

static void cmd_watch(struct conn *c, size_t argc, struct kv_slice *argv)
{
    struct multi *m = multi_of(c);
    if (!m)
        return reply_error(&c->out, "ERR out of memory");
    kv_txn *t;
    int rc = kv_txn_begin(srv.kv, argc - 1, &argv[1], 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    struct watched *w = realloc(m->w, (m->nw + argc - 1) * sizeof *w);
    if (!w)
        rc = TXN_E_NOMEM;
    else
        m->w = w;
    for (size_t i = 1; i < argc && !rc; i++) {
        struct watched *x = &m->w[m->nw];
        if (!(x->key = malloc(argv[i].n + 1))) {
            rc = TXN_E_NOMEM;
            break;
        }
        memcpy(x->key, argv[i].p, argv[i].n);
        x->n = argv[i].n;
        x->version = kv_key_version(srv.kv, argv[i]);
        unsigned type = 0;
        if ((rc = kv_txn_read(t, argv[i], digest_cb, &x->digest, &type)) < 0) {
            free(x->key);
            break;
        }
        x->digest += type; /* a new type with the same bytes is a change */
        rc = 0;
        m->nw++;
    }
    rc = kv_txn_end(t, rc);
    if (rc)
        return reply_store_error(&c->out, rc);
    reply_simple(&c->out, "OK");
}

/* The keys of a queued command, by its table entry (first, last, step). */
static size_t add_keys(const struct queued *q, struct kv_slice *keys, size_t n)
{
    const struct command *cmd = q->cmd;
    if (cmd->first_key <= 0)
        return n;
    size_t last = cmd->last_key < 0 ? q->argc - (size_t)-cmd->last_key : (size_t)cmd->last_key;
    for (size_t i = (size_t)cmd->first_key; i <= last && i < q->argc; i += (size_t)cmd->step)
        keys[n++] = q->argv[i];
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
    size_t nkeys = m->nw;
    for (size_t i = 0; i < m->nq; i++)
        nkeys += m->q[i].argc;
    struct kv_slice *keys = malloc((nkeys ? nkeys : 1) * sizeof *keys);
    kv_txn *t = NULL;
    size_t n = 0, mark = c->out.len;
    int rc = keys ? 0 : TXN_E_NOMEM, write = 0;
    for (size_t i = 0; i < m->nw; i++)
        keys[n++] = (struct kv_slice){m->w[i].key, m->w[i].n};
    for (size_t i = 0; keys && i < m->nq; i++) {
        n = add_keys(&m->q[i], keys, n);
        write |= strstr(m->q[i].cmd->flags, "write") != NULL;
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
            m->q[i].cmd->proc(c, m->q[i].argc, m->q[i].argv);
        /* a store error inside ended it: cmd_tx_end cleared c->exec */
        rc = c->exec ? kv_txn_end(t, 0) : exec_error;
        c->exec = NULL;
    }
    if (rc)
        c->out.len = mark;
    return rc;
}

static void cmd_exec(struct conn *c, size_t argc, struct kv_slice *argv)
{
    (void)argc, (void)argv;
    struct multi *m = c->multi;
    if (!m || !m->open)
        return reply_error(&c->out, "ERR EXEC without MULTI");
    if (m->failed) {
        queue_clear(m);
        watch_clear(m);
        return reply_error(&c->out,
                           "EXECABORT Transaction discarded because of previous errors.");
    }
    int rc = exec_block(c, m);
    /* a full pool rolled the block back: expired keys first, then again */
    for (int tries = 0; (rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL) && tries < RECLAIM_TRIES &&
                        expire_reclaim((unsigned)tries);
         tries++)
        rc = exec_block(c, m);
    queue_clear(m);
    watch_clear(m);
    if (rc == 1)
        buf_add(&c->out, "*-1\r\n", 5);
    else if (rc)
        reply_store_error(&c->out, rc);
}

/* ---- the store transaction a command runs in */


int cmd_tx_begin(struct conn *c, size_t n, const struct kv_slice *keys, int write, kv_txn **t)
{
    if (c->exec) {
        *t = c->exec;
        return 0;
    }
    return kv_txn_begin(srv.kv, n, keys, write, t);
}

int cmd_tx_end(struct conn *c, kv_txn *t, int rc)
{
    if (t != c->exec)
        return kv_txn_end(t, rc);
    if (rc == KV_E_WRONGTYPE) /* the command's own error: it wrote nothing */
        return rc;
    if (rc < 0) { /* the block cannot commit in part: all of it rolls back */
        kv_txn_end(t, rc);
        exec_error = rc;
        c->exec = NULL;
        return rc;
    }
    return 0;
}

void command_run(struct conn *c, size_t argc, struct kv_slice *argv)
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
    if (m && cmd->proc != cmd_exec && cmd->proc != cmd_discard && cmd->proc != cmd_quit) {
        if (cmd->proc == cmd_multi)
            return reply_error(&c->out, "ERR MULTI calls can not be nested");
        if (cmd->proc == cmd_watch)
            return reply_error(&c->out, "ERR WATCH inside MULTI is not allowed");
        if (multi_refuses(cmd)) {
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
    size_t mark = c->out.len;
    found_full = 0;
    cmd->proc(c, argc, argv);
    /* A write that found the pool full rolled back (a command of several
     * transactions, as FLUSHALL, may be run again): expired keys are
     * deleted to make room, and it runs again, as Redis frees expired keys
     * before it refuses a write. EXEC does this for its block. */
    for (int tries = 0; found_full && tries < RECLAIM_TRIES && !c->exec && cmd->proc != cmd_exec &&
                        strstr(cmd->flags, "write") && expire_reclaim((unsigned)tries);
         tries++) {
        c->out.len = mark;
        found_full = 0;
        cmd->proc(c, argc, argv);
    }
}
