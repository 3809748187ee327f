/* config.c - CONFIG GET, SET and HELP as redis-server 7.0 answers them,
 * over one table of parameters: each one's name (and Redis's older alias),
 * kind, range, default and where its value lives. A parameter this server
 * cannot change (it is fixed at start, or names something it does not
 * have: an append-only file, snapshots) answers its true value and
 * refuses a different one. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"

struct kv_config cfg;

enum kind {
    P_NUM,   /* an integer in [min, max], in *num */
    P_MEM,   /* a memory value (Redis's: 10k, 5mb, ...): srv.max_memory */
    P_ENUM,  /* one of the names in words: its index in *num */
    P_BOOL,  /* yes (1) or no (0), in *num */
    P_FIXED, /* answers fixed(); CONFIG SET takes only that answer */
};

/* fixed values: what this server is (set at start, never changed) */
static void fixed_save(char *v) { v[0] = 0; }           /* no snapshots */
static void fixed_aof(char *v) { strcpy(v, "no"); }     /* no append-only file */
static void fixed_databases(char *v) { strcpy(v, "1"); }
static void fixed_bulk(char *v) { sprintf(v, "%zu", srv.lim.max_bulk); }
static void fixed_clients(char *v) { sprintf(v, "%u", srv.max_clients); }
static void fixed_port(char *v) { sprintf(v, "%d", srv.port); }
static void fixed_threads(char *v) { sprintf(v, "%u", srv.threads); }
static void fixed_query(char *v) { sprintf(v, "%zu", srv.max_query); }
static void fixed_unix(char *v) { snprintf(v, 256, "%s", srv.unix_path ? srv.unix_path : ""); }

static const char *const policies[] = {
    "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru",
    "allkeys-lfu",  "allkeys-random", "noeviction", NULL,
};
/* each policy's order for kv_evict, in the order of the names; -1: none */
static const int policy_how[] = {
    KV_EVICT_LRU | KV_EVICT_VOLATILE, KV_EVICT_LFU | KV_EVICT_VOLATILE,
    KV_EVICT_RANDOM | KV_EVICT_VOLATILE, KV_EVICT_TTL | KV_EVICT_VOLATILE,
    KV_EVICT_LRU, KV_EVICT_LFU, KV_EVICT_RANDOM, -1,
};
_Static_assert(sizeof policy_how / sizeof *policy_how == sizeof policies / sizeof *policies - 1,
               "a kv_evict order for every policy");

int config_lfu(void)
{
    int how = policy_how[atomic_load(&cfg.maxmemory_policy)];
    return how >= 0 && (how & ~KV_EVICT_VOLATILE) == KV_EVICT_LFU;
}

int config_evict_how(void)
{
    return policy_how[atomic_load(&cfg.maxmemory_policy)];
}

struct param {
    const char *name, *alias;
    enum kind kind;
    long long min, max, def;
    _Atomic long long *num;          /* P_NUM, P_ENUM, P_BOOL */
    const char *const *words;        /* P_ENUM */
    void (*fixed)(char *v);          /* P_FIXED: writes at most 256 bytes */
};

/* The parameters. The encoding thresholds are Redis's (7.0's names first,
 * the older ziplist ones as aliases) and read by the type that uses them;
 * maxmemory is --max-memory (docs/kvstore.md, section 23). */
static const struct param params[] = {
    {"set-max-intset-entries", NULL, P_NUM, 0, LLONG_MAX, 512,
     &cfg.set_max_intset_entries, NULL, NULL},
    {"hash-max-listpack-entries", "hash-max-ziplist-entries", P_NUM, 0, LLONG_MAX, 512,
     &cfg.hash_max_listpack_entries, NULL, NULL},
    {"hash-max-listpack-value", "hash-max-ziplist-value", P_NUM, 0, LLONG_MAX, 64,
     &cfg.hash_max_listpack_value, NULL, NULL},
    {"list-max-listpack-size", "list-max-ziplist-size", P_NUM, INT_MIN, INT_MAX, -2,
     &cfg.list_max_listpack_size, NULL, NULL},
    {"zset-max-listpack-entries", "zset-max-ziplist-entries", P_NUM, 0, LLONG_MAX, 128,
     &cfg.zset_max_listpack_entries, NULL, NULL},
    {"zset-max-listpack-value", "zset-max-ziplist-value", P_NUM, 0, LLONG_MAX, 64,
     &cfg.zset_max_listpack_value, NULL, NULL},
    {"maxmemory", NULL, P_MEM, 0, 0, 0, NULL, NULL, NULL},
    {"maxmemory-policy", NULL, P_ENUM, 0, 0, 7, &cfg.maxmemory_policy, policies, NULL},
    {"lfu-log-factor", NULL, P_NUM, 0, INT_MAX, 10, &cfg.lfu_log_factor, NULL, NULL},
    {"lfu-decay-time", NULL, P_NUM, 0, INT_MAX, 1, &cfg.lfu_decay_time, NULL, NULL},
    {"lazyfree-lazy-user-flush", NULL, P_BOOL, 0, 1, 0, &cfg.lazyfree_lazy_user_flush, NULL,
     NULL},
    {"save", NULL, P_FIXED, 0, 0, 0, NULL, NULL, fixed_save},
    {"appendonly", NULL, P_FIXED, 0, 0, 0, NULL, NULL, fixed_aof},
    {"databases", NULL, P_FIXED, 0, 0, 0, NULL, NULL, fixed_databases},
    {"proto-max-bulk-len", NULL, P_FIXED, 0, 0, 0, NULL, NULL, fixed_bulk},
    {"maxclients", NULL, P_FIXED, 0, 0, 0, NULL, NULL, fixed_clients},
    {"port", NULL, P_FIXED, 0, 0, 0, NULL, NULL, fixed_port},
    {"io-threads", NULL, P_FIXED, 0, 0, 0, NULL, NULL, fixed_threads},
    {"client-query-buffer-limit", NULL, P_FIXED, 0, 0, 0, NULL, NULL, fixed_query},
    {"unixsocket", NULL, P_FIXED, 0, 0, 0, NULL, NULL, fixed_unix},
};
#define NPARAMS (sizeof params / sizeof *params)
#define VALUE_CHARS 320

void config_init(void)
{
    for (size_t i = 0; i < NPARAMS; i++)
        if (params[i].num)
            atomic_store(params[i].num, params[i].def);
}

void config_push(void)
{
    if (srv.kv) /* LFU's counting costs lookups a store only under LFU */
        kv_lfu_set(srv.kv, config_lfu(), (unsigned)atomic_load(&cfg.lfu_log_factor),
                   (unsigned)atomic_load(&cfg.lfu_decay_time));
}

/* a parameter by name or alias, case folded: its index, or -1 */
static int lookup(const struct kv_slice *name)
{
    for (size_t i = 0; i < NPARAMS; i++)
        if (arg_is(name, params[i].name) || (params[i].alias && arg_is(name, params[i].alias)))
            return (int)i;
    return -1;
}

static void value_of(const struct param *p, char *v)
{
    if (p->kind == P_NUM)
        sprintf(v, "%lld", atomic_load(p->num));
    else if (p->kind == P_MEM)
        sprintf(v, "%llu", (unsigned long long)atomic_load(&srv.max_memory));
    else if (p->kind == P_ENUM)
        strcpy(v, p->words[atomic_load(p->num)]);
    else if (p->kind == P_BOOL)
        strcpy(v, atomic_load(p->num) ? "yes" : "no");
    else
        p->fixed(v);
}

/* Redis's memtoull: digits, then b, k, kb, m, mb, g or gb in any case (k
 * is 1000, kb 1024): 0 or -1 */
static int parse_mem(const struct kv_slice *a, unsigned long long *out)
{
    static const struct { const char *unit; unsigned long long mul; } units[] = {
        {"", 1}, {"b", 1}, {"k", 1000}, {"kb", 1024}, {"m", 1000000}, {"mb", 1 << 20},
        {"g", 1000000000}, {"gb", 1 << 30},
    };
    size_t d = 0;
    while (d < a->n && isdigit((unsigned char)a->p[d]))
        d++;
    struct kv_slice unit = {a->p + d, a->n - d};
    for (size_t u = 0; d && d <= 20 && u < sizeof units / sizeof *units; u++) {
        if (unit.n != strlen(units[u].unit) || (unit.n && !arg_is(&unit, units[u].unit)))
            continue;
        unsigned long long v = 0;
        for (size_t i = 0; i < d; i++) {
            if (v > (ULLONG_MAX - (unsigned)(a->p[i] - '0')) / 10)
                return -1;
            v = v * 10 + (unsigned)(a->p[i] - '0');
        }
        if (v > ULLONG_MAX / units[u].mul)
            return -1;
        *out = v * units[u].mul;
        return 0;
    }
    return -1;
}

/* Check value v for p: NULL and the parsed value in *out, or the reason
 * (the end of Redis's error text). */
static const char *check(const struct param *p, const struct kv_slice *v, long long *out,
                         char *why)
{
    unsigned long long m;
    char cur[VALUE_CHARS];
    switch (p->kind) {
    case P_NUM:
        if (parse_ll(v, out))
            return "argument couldn't be parsed into an integer";
        if (*out < p->min || *out > p->max) {
            sprintf(why, "argument must be between %lld and %lld inclusive", p->min, p->max);
            return why;
        }
        return NULL;
    case P_MEM:
        if (parse_mem(v, &m) || m > LLONG_MAX)
            return "argument must be a memory value";
        *out = (long long)m;
        return NULL;
    case P_ENUM:
        for (long long i = 0; p->words[i]; i++)
            if (arg_is(v, p->words[i]))
                return *out = i, NULL;
        strcpy(why, "argument(s) must be one of the following: ");
        for (size_t i = 0; p->words[i]; i++)
            strcat(strcat(why, p->words[i]), p->words[i + 1] ? ", " : "");
        return why;
    case P_BOOL:
        if (arg_is(v, "yes") || arg_is(v, "no"))
            return *out = arg_is(v, "yes"), NULL;
        return "argument must be 'yes' or 'no'";
    case P_FIXED:
        p->fixed(cur);
        if (v->n == strlen(cur) && (!v->n || arg_is(v, cur)))
            return NULL;
        /* Redis's own words where Redis refuses the same; else why not */
        if (p->fixed == fixed_aof && !arg_is(v, "yes"))
            return "argument must be 'yes' or 'no'";
        return p->fixed == fixed_aof ? "not supported: every write is durable in the pool "
                                       "when acknowledged, there is no append-only file"
               : p->fixed == fixed_save ? "not supported: the store is its pool, there are "
                                          "no snapshots"
                                        : "can't set immutable config";
    }
    return "unknown parameter kind";
}

static void apply(const struct param *p, long long v)
{
    if (p->kind == P_MEM)
        atomic_store(&srv.max_memory, (uint64_t)v);
    else if (p->num)
        atomic_store(p->num, v);
}

/* CONFIG GET pattern [pattern ...]: a name without glob characters is
 * looked up (an alias too) and answered under the name given; a pattern
 * matches names and aliases, case folded, each parameter once */
static void config_get(struct conn *c, size_t argc, struct kv_slice *argv)
{
    struct buf items = {0};
    char seen[NPARAMS] = {0}, alias_seen[NPARAMS] = {0}, v[VALUE_CHARS];
    size_t hits = 0;
    for (size_t i = 2; i < argc; i++) {
        int glob = memchr(argv[i].p, '*', argv[i].n) || memchr(argv[i].p, '?', argv[i].n) ||
                   memchr(argv[i].p, '[', argv[i].n);
        /* Redis matches case folded; the names are in lower case */
        char pat[VALUE_CHARS];
        size_t pn = argv[i].n < sizeof pat ? argv[i].n : sizeof pat;
        for (size_t k = 0; k < pn; k++)
            pat[k] = (char)tolower((unsigned char)argv[i].p[k]);
        for (size_t p = 0; p < NPARAMS; p++) {
            const char *names[2] = {params[p].name, params[p].alias};
            char *done[2] = {&seen[p], &alias_seen[p]};
            for (int a = 0; a < 2; a++) {
                struct kv_slice nm = names[a] ? (struct kv_slice){names[a], strlen(names[a])}
                                              : (struct kv_slice){NULL, 0};
                if (!names[a] || *done[a] ||
                    (glob ? !glob_match(pat, pn, nm.p, nm.n)
                          : !arg_is(&argv[i], names[a])))
                    continue;
                *done[a] = 1;
                value_of(&params[p], v);
                glob ? reply_bulk(&items, nm.p, nm.n) : reply_bulk(&items, argv[i].p, argv[i].n);
                reply_bulk(&items, v, strlen(v));
                hits++;
            }
        }
    }
    reply_array(&c->out, 2 * hits);
    buf_add(&c->out, items.p, items.len);
    buf_free(&items);
}

/* CONFIG SET parameter value [parameter value ...]: all or nothing, as
 * Redis: every name known and given once, every value valid, then all
 * set */
static void config_set(struct conn *c, size_t argc, struct kv_slice *argv)
{
    size_t n = (argc - 2) / 2;
    int idx[64];
    long long val[64];
    char why[VALUE_CHARS + 256];
    if (argc < 4)
        return reply_error(&c->out, "ERR wrong number of arguments for 'config|set' command");
    if (argc % 2 || n > sizeof idx / sizeof *idx)
        return reply_error(&c->out, "ERR syntax error");
    for (size_t i = 0; i < n; i++) {
        const struct kv_slice *name = &argv[2 + 2 * i];
        if ((idx[i] = lookup(name)) < 0)
            return reply_error(&c->out, "ERR Unknown option or number of arguments for "
                               "CONFIG SET - '%.*s'", (int)(name->n > 128 ? 128 : name->n),
                               name->p);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (argv[2 + 2 * i].n == argv[2 + 2 * j].n &&
                !strncasecmp(argv[2 + 2 * i].p, argv[2 + 2 * j].p, argv[2 + 2 * i].n))
                return reply_error(&c->out, "ERR CONFIG SET failed (possibly related to "
                                   "argument '%.*s') - duplicate parameter",
                                   (int)argv[2 + 2 * i].n, argv[2 + 2 * i].p);
    for (size_t i = 0; i < n; i++) {
        const char *bad = check(&params[idx[i]], &argv[3 + 2 * i], &val[i], why);
        if (bad)
            return reply_error(&c->out, "ERR CONFIG SET failed (possibly related to argument "
                               "'%s') - %s", params[idx[i]].name, bad);
    }
    for (size_t i = 0; i < n; i++)
        if (params[idx[i]].kind != P_FIXED)
            apply(&params[idx[i]], val[i]);
    config_push();
    reply_simple(&c->out, "OK");
}

static int cmd_config(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    static const char *const help[] = {
        "GET <pattern>", "    The parameters matching the glob-style <pattern>, with their values.",
        "SET <directive> <value>", "    Set the configuration <directive> to <value>.",
        NULL,
    };
    if (arg_is(&argv[1], "HELP"))
        return reply_help(&c->out, argc, "CONFIG", help), 0;
    if (arg_is(&argv[1], "GET")) {
        if (argc < 3)
            return reply_error(&c->out, "ERR wrong number of arguments for 'config|get' "
                                        "command"), 0;
        return config_get(c, argc, argv), 0;
    }
    if (arg_is(&argv[1], "SET"))
        return config_set(c, argc, argv), 0;
    return reply_error(&c->out, "ERR unknown subcommand '%.*s'. Try CONFIG HELP.",
                       (int)(argv[1].n > 64 ? 64 : argv[1].n), argv[1].p), 0;
}

/* Redis's CONFIG is a container: no flags or keys of its own */
const struct command config_commands[] = {
    {"config", cmd_config, -2, 0, 0, {0, 0, 0}},
};
const size_t config_ncommands = sizeof config_commands / sizeof *config_commands;
