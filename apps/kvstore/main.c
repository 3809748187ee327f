/* main.c - kvstore-<engine>: the persistent key-value store's server.
 *
 *   kvstore-<engine> --pool FILE [--unix PATH] [--port N] [options]
 *
 * Creates the pool if FILE does not exist, else opens (and so recovers)
 * it, then serves RESP2 on the UNIX socket and on 127.0.0.1 until SIGTERM,
 * SIGINT or SHUTDOWN, and closes the pool. --check verifies the store
 * instead and exits 0 (sound) or 1. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "server.h"

#define MIB (1ull << 20)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kvstore-%s --pool FILE [--unix PATH] [--port N] [options]\n"
            "  --pool FILE        pool file (created if missing; relative: $TXN_POOL_DIR)\n"
            "  --unix PATH        listen on this UNIX socket\n"
            "  --port N           listen on 127.0.0.1:N (default 6379; 0: no TCP)\n"
            "  --memcached-port N     also serve memcached's text protocol on\n"
            "                         127.0.0.1:N (the same keys)\n"
            "  --memcached-unix PATH  ... and on this UNIX socket\n"
            "  --max-memory BYTES bytes of the pool the keys may use: beyond it\n"
            "                     memcached's storage commands evict (CLOCK; 0: none)\n"
            "  --threads N        epoll workers (default: online CPUs - 1, at least 1)\n"
            "  --spin-us N        a worker with work polls N us before it sleeps\n"
            "                     (default 20; 0: sleep at once)\n"
            "  --io epoll|threads one thread per client instead of workers\n"
            "  --ack sync|commit  reply to writes after txn_sync per batch (default),\n"
            "                     or right after commit (incll: before durability)\n"
            "  --max-value BYTES  largest argument (default 16M; K, M, G suffixes)\n"
            "  --max-query BYTES  largest request (default max(64M, 2 * max-value))\n"
            "  --max-clients N    connections served at once (default 10000; lowered,\n"
            "                     with a warning, to fit the open file limit)\n"
            "  --pool-size BYTES  the most a new pool grows to (default 256M)\n"
            "  --pool-start BYTES what a new pool starts with (default 4M, or what its\n"
            "                     threads' logs need); it grows as keys come\n"
            "  --resize-step N    old buckets each write moves while the table grows\n"
            "                     (default 8; fewer spread a resize over more writes)\n"
            "  --check            verify the store, print a summary, exit 0 or 1\n",
            txn_engine_name());
}

static int parse_size(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    }
    if (errno || end == s || *end || (v << shift) >> shift != v)
        return -1;
    *out = v << shift;
    return 0;
}

static void raise_fd_limit(void)
{
    struct rlimit r;
    if (!getrlimit(RLIMIT_NOFILE, &r) && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

/* What the command line sets besides the server's own settings (srv). */
struct options {
    const char *pool;
    unsigned long long max_value, max_query, pool_size, pool_start;
    unsigned resize_step;
    int check;
};

/* Parse the command line into *o and srv. Returns -1 to go on, else the
 * exit status (0 after --help, 2 after a usage error). */
static int parse_args(int argc, char **argv, struct options *o)
{
    enum { O_POOL = 1, O_UNIX, O_PORT, O_THREADS, O_IO, O_ACK, O_MAXVAL, O_MAXQ,
           O_MAXCLI, O_PSIZE, O_STEP, O_CHECK, O_SPIN, O_HELP, O_MCPORT, O_MCUNIX, O_MAXMEM,
           O_PSTART };
    static const struct option opts[] = {
        {"pool", 1, 0, O_POOL},          {"unix", 1, 0, O_UNIX},
        {"port", 1, 0, O_PORT},          {"threads", 1, 0, O_THREADS},
        {"io", 1, 0, O_IO},              {"ack", 1, 0, O_ACK},
        {"max-value", 1, 0, O_MAXVAL},   {"max-query", 1, 0, O_MAXQ},
        {"max-clients", 1, 0, O_MAXCLI}, {"pool-size", 1, 0, O_PSIZE},
        {"pool-start", 1, 0, O_PSTART},
        {"resize-step", 1, 0, O_STEP},   {"check", 0, 0, O_CHECK},
        {"spin-us", 1, 0, O_SPIN},       {"help", 0, 0, O_HELP},
        {"memcached-port", 1, 0, O_MCPORT}, {"memcached-unix", 1, 0, O_MCUNIX},
        {"max-memory", 1, 0, O_MAXMEM},
        {0, 0, 0, 0}};
    unsigned long long n;
    int opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (opt) {
        case O_POOL: o->pool = optarg; break;
        case O_UNIX: srv.unix_path = optarg; break;
        case O_PORT:
            bad = parse_size(optarg, &n) || n > 65535;
            srv.port = (int)n;
            break;
        case O_THREADS:
            bad = parse_size(optarg, &n) || n < 1 || n > 1000;
            srv.threads = (unsigned)n;
            break;
        case O_IO:
            bad = strcmp(optarg, "epoll") && strcmp(optarg, "threads");
            srv.io = strcmp(optarg, "threads") ? IO_EPOLL : IO_THREADS;
            break;
        case O_ACK:
            bad = strcmp(optarg, "sync") && strcmp(optarg, "commit");
            srv.ack = strcmp(optarg, "commit") ? ACK_SYNC : ACK_COMMIT;
            break;
        case O_MAXVAL: bad = parse_size(optarg, &o->max_value) || o->max_value < 1; break;
        case O_MAXQ: bad = parse_size(optarg, &o->max_query); break;
        case O_MAXCLI:
            bad = parse_size(optarg, &n) || n < 1 || n > 1000000;
            srv.max_clients = (unsigned)n;
            break;
        case O_PSIZE: bad = parse_size(optarg, &o->pool_size); break;
        case O_PSTART: bad = parse_size(optarg, &o->pool_start); break;
        case O_STEP:
            bad = parse_size(optarg, &n) || n < 1 || n > 1u << 20;
            o->resize_step = (unsigned)n;
            break;
        case O_CHECK: o->check = 1; break;
        case O_SPIN:
            bad = parse_size(optarg, &n) || n > 1000000;
            srv.spin_ns = (long long)n * 1000;
            break;
        case O_MCPORT:
            bad = parse_size(optarg, &n) || n < 1 || n > 65535;
            srv.mc_port = (int)n;
            break;
        case O_MCUNIX: srv.mc_unix_path = optarg; break;
        case O_MAXMEM: bad = parse_size(optarg, &n); srv.max_memory = n; break;
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "kvstore: bad value for --%s: %s\n", opts[opt - 1].name, optarg);
            return 2;
        }
    }
    if (!o->pool || optind != argc || (!o->check && !srv.unix_path && !srv.port && !srv.mc_port && !srv.mc_unix_path)) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* The request limits. A request may by default hold two of the largest
 * values and 64 KiB more (a SET of a largest key and value), and at least
 * 64 MiB. */
static void set_limits(const struct options *o)
{
    unsigned long long q = o->max_query;
    if (!q)
        q = 2 * o->max_value + 64 * 1024 > 64 * MIB ? 2 * o->max_value + 64 * 1024 : 64 * MIB;
    srv.lim = (struct resp_limits){.max_bulk = o->max_value, .max_args = 1024 * 1024,
                                   .max_inline = 64 * 1024};
    srv.max_query = q;
}

/* Open (or create) the store into srv.kv and say what it holds; uptime
 * counts from here. */
static int open_store(const struct options *o)
{
    /* log slots: one per worker, or per client thread, plus the main
     * thread and resizes started from any of them */
    unsigned slots = srv.io == IO_THREADS ? srv.max_clients + 4 : srv.threads + 4;
    struct kv_opts ko = {.pool_size = o->pool_size, .pool_start = o->pool_start,
                         .threads = slots < 64 ? 64 : slots > 1024 ? 1024 : slots,
                         .resize_step = o->resize_step, .no_create = o->check,
                         .view = o->check};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = kv_open(o->pool, &ko, &srv.kv);
    if (rc) {
        if (o->check)
            printf("check: FAILED: pool %s: %s\n", o->pool, kv_strerror(rc));
        else
            fprintf(stderr, "kvstore: pool %s: %s\n", o->pool, kv_strerror(rc));
        return rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct kv_info ki;
    kv_info(srv.kv, &ki);
    printf("kvstore: pool %s: %llu keys, %llu buckets%s, opened in %.1f ms\n", o->pool,
           (unsigned long long)ki.keys, (unsigned long long)ki.buckets,
           ki.resizing ? " (resizing)" : "",
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    srv.started = t1.tv_sec;
    return 0;
}

static void print_listening(void)
{
    printf("kvstore: listening on");
    if (srv.unix_path)
        printf(" unix:%s", srv.unix_path);
    if (srv.port)
        printf(" 127.0.0.1:%d", srv.port);
    if (srv.mc_unix_path)
        printf(" memcached:unix:%s", srv.mc_unix_path);
    if (srv.mc_port)
        printf(" memcached:127.0.0.1:%d", srv.mc_port);
    printf("\n");
    printf("kvstore: io %s, %u %s, spin %lld us, ack %s\n",
           srv.io == IO_EPOLL ? "epoll" : "threads",
           srv.io == IO_EPOLL ? srv.threads : srv.max_clients,
           srv.io == IO_EPOLL ? "workers" : "clients at most", srv.spin_ns / 1000,
           srv.ack == ACK_SYNC ? "sync" : "commit");
}

int main(int argc, char **argv)
{
    struct options o = {.max_value = 16 * MIB, .pool_size = 256 * MIB};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    srv.port = 6379;
    /* one CPU left to the clients, which share the machine (UNIX socket):
     * docs/kvstore.md has the measurements */
    srv.threads = cpus > 1 ? (unsigned)cpus - 1 : 1;
    srv.spin_ns = 20000;
    srv.max_clients = 10000;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    set_limits(&o);
    if (commands_init()) {
        fprintf(stderr, "kvstore: the command table has an entry twice or a bad one\n");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("kvstore: engine %s, PDOM %d (%u ns per barrier), flush %s\n", txn_engine_name(),
           txn_pdom(), txn_pdom_ns(), txn_flush_name());
    /* --check: the pool format's own verdict first (its allocator, its
     * logs), then the store's; neither writes to the file */
    int pool_rc = 0;
    if (o.check) {
        txn_pool_info info;
        pool_rc = txn_pool_inspect(o.pool, &info);
        if (pool_rc < 0 && pool_rc != TXN_E_CORRUPT) { /* the store cannot be read */
            printf("check: FAILED: pool %s: %s\n", o.pool, txn_pool_strerror(pool_rc));
            return 1;
        }
        printf("check: pool: %s%s%s\n", pool_rc == 0 ? "consistent" : pool_rc > 0
                                        ? "consistent once the next open recovers it" : "damaged",
               info.problem[0] ? ": " : "", info.problem);
    } else {
        /* before the store opens: its log slots follow the clients */
        raise_fd_limit();
        server_cap_clients();
    }
    if (open_store(&o))
        return 1;
    if (o.check) {
        rc = kv_check(srv.kv, stdout);
        kv_close(srv.kv);
        return rc || pool_rc < 0 ? 1 : 0;
    }
    if (server_listen()) {
        kv_close(srv.kv);
        return 1;
    }
    print_listening();
    rc = server_run();
    kv_close(srv.kv);
    printf("kvstore: pool closed\n");
    return rc ? 1 : 0;
}
