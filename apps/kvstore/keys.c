/* keys.c - the commands on keys of any type, as Redis's db.c and
 * expire.c: DEL, EXISTS, TYPE, RENAME, COPY, OBJECT, the expiry commands,
 * RANDOMKEY, KEYS, SCAN, DBSIZE, FLUSHALL. Redis 7.0's replies and error
 * texts; a command with keys runs in the transaction the dispatcher opened
 * over them (cmd.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "keys.h"
#include "t_dict.h"
#include "set.h"
#include "t_zset.h"

/* ---- keys and values */

static int cmd_dbsize(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    struct kv_info i;
    kv_info(srv.kv, &i);
    reply_int(&c->out, (long long)i.keys);
    return 0;
}

static int cmd_flushall(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    if (argc > 2 || (argc == 2 && !arg_is(&argv[1], "SYNC") && !arg_is(&argv[1], "ASYNC")))
        return reply_error(&c->out, "ERR syntax error"), 0;
    /* ASYNC (or neither, under lazyfree-lazy-user-flush yes) empties the
     * keyspace at once and frees in the background, as Redis 7.0; SYNC, or
     * no room for ASYNC's new table, frees here */
    int async = argc == 2 ? arg_is(&argv[1], "ASYNC")
                          : atomic_load(&cfg.lazyfree_lazy_user_flush) != 0;
    int rc = async ? kv_flush_async(srv.kv) : TXN_E_NOSPACE;
    if (rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL)
        rc = kv_flush(srv.kv);
    if (rc)
        return rc;
    reply_simple(&c->out, "OK");
    return 0;
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

static int cmd_keys(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
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
    return 0;
}

/* SCAN's cursor as Redis reads it (strtoul): a sign is taken ("-1" is
 * 2^64 - 1), a leading space or any byte after the digits is not, nothing
 * at all is 0. 0 or -1. */
static int parse_cursor(const struct kv_slice *a, uint64_t *out)
{
    char s[64];
    if (a->n >= sizeof s || (a->n && isspace((unsigned char)a->p[0])))
        return -1;
    memcpy(s, a->p, a->n);
    s[a->n] = 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE)
        return -1;
    *out = v;
    return 0;
}

static int cmd_scan(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    uint64_t cursor, next;
    long long count = 10;
    struct key_list l = {{0}, 0, NULL, 0, -1};
    if (parse_cursor(&argv[1], &cursor))
        return reply_error(&c->out, "ERR invalid cursor"), 0;
    for (size_t i = 2; i < argc; i += 2) {
        if (i + 1 == argc)
            return reply_error(&c->out, "ERR syntax error"), 0;
        if (arg_is(&argv[i], "MATCH"))
            l.pattern = &argv[i + 1];
        else if (arg_is(&argv[i], "COUNT")) {
            if (parse_ll(&argv[i + 1], &count))
                return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
            if (count < 1)
                return reply_error(&c->out, "ERR syntax error"), 0;
        } else if (arg_is(&argv[i], "TYPE"))
            l.type = arg_is(&argv[i + 1], "string") ? KV_STRING
                     : arg_is(&argv[i + 1], "hash") ? KV_HASH
                     : arg_is(&argv[i + 1], "list") ? KV_LIST
                     : arg_is(&argv[i + 1], "set")  ? KV_SET
                     : arg_is(&argv[i + 1], "zset") ? KV_ZSET
                                                    : KV_NO_TYPE;
        else
            return reply_error(&c->out, "ERR syntax error"), 0;
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
        if (rc)
            return rc;
        return reply_error(&c->out, "ERR out of memory"), 0;
    }
    char cur[24];
    reply_array(&c->out, 2);
    reply_bulk(&c->out, cur, (size_t)snprintf(cur, sizeof cur, "%llu", (unsigned long long)next));
    reply_array(&c->out, l.n);
    buf_add(&c->out, l.items.p, l.items.len);
    buf_free(&l.items);
    return 0;
}

/* ---- keys: DEL, UNLINK, EXISTS, TOUCH */

/* DEL and UNLINK delete, EXISTS and TOUCH look: each answers how many of
 * its keys it found (a key named twice counts twice, as in Redis). */
static int count_keys(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv, int del)
{
    int rc = 0;
    long long n = 0;
    for (size_t i = 1; i < argc && rc >= 0; i++) {
        if (i + KV_PREFETCH_AHEAD < argc)
            kv_txn_prefetch(t, argv[i + KV_PREFETCH_AHEAD]);
        if ((rc = del ? kv_txn_del(t, argv[i]) : kv_txn_get(t, argv[i], NULL, NULL)) > 0)
            n++;
    }
    if (rc >= 0)
        reply_int(&c->out, n);
    return rc;
}

static int cmd_del(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return count_keys(c, t, argc, argv, 1);
}

static int cmd_exists(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return count_keys(c, t, argc, argv, 0);
}

static int cmd_type(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    unsigned type;
    int rc = 0;
    if ((rc = kv_txn_read(t, argv[1], NULL, NULL, &type)) >= 0)
        reply_simple(&c->out, rc ? type_name(type) : "none");
    return rc;
}

/* RENAME src dst; RENAMENX: only when dst does not exist. The value
 * moves whole (kv_txn_move): O(1) for a big one too, as in Redis. */
static int cmd_rename(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int nx = arg_is(&argv[0], "RENAMENX");
    int same = argv[1].n == argv[2].n && !memcmp(argv[1].p, argv[2].p, argv[1].n);
    unsigned type = KV_STRING;
    int rc = 0, found;
    if ((found = rc = kv_txn_read(t, argv[1], NULL, NULL, &type)) >= 0) {
        rc = 0;
        if (!found) {
            reply_error(&c->out, "ERR no such key");
        } else if (same) {
            nx ? reply_int(&c->out, 0) : reply_simple(&c->out, "OK");
        } else if (nx && (rc = kv_txn_get(t, argv[2], NULL, NULL)) != 0) {
            if (rc > 0)
                reply_int(&c->out, 0), rc = 0;
        } else if ((rc = kv_txn_move(t, argv[1], argv[2])) >= 0) {
            rc = 0;
            nx ? reply_int(&c->out, 1) : reply_simple(&c->out, "OK");
        }
    }
    return rc;
}

/* COPY src dst [DB 0] [REPLACE] */
static int cmd_copy(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int replace = 0;
    for (size_t i = 3; i < argc; i++) {
        long long db;
        if (arg_is(&argv[i], "REPLACE")) {
            replace = 1;
        } else if (arg_is(&argv[i], "DB") && i + 1 < argc) {
            if (parse_ll(&argv[++i], &db))
                return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
            if (db != 0)
                return reply_error(&c->out, "ERR DB index is out of range"), 0;
        } else {
            return reply_error(&c->out, "ERR syntax error"), 0;
        }
    }
    if (argv[1].n == argv[2].n && !memcmp(argv[1].p, argv[2].p, argv[1].n))
        return reply_error(&c->out, "ERR source and destination objects are the same"), 0;
    struct val x;
    uint64_t at = 0;
    unsigned type = KV_STRING;
    txn_obj *d, *copy;
    int rc = 0, found;
    if ((found = rc = get_any(t, argv[1], &x, &type)) >= 0 &&
        (rc = kv_txn_dict(t, argv[1], &type, &d)) >= 0) {
        rc = 0;
        int there = found && !replace ? kv_txn_get(t, argv[2], NULL, NULL) : 0;
        if (there < 0)
            rc = there;
        else if (!found || there)
            reply_int(&c->out, 0);
        else if ((rc = kv_txn_ttl(t, argv[1], &at)) >= 0 && d && /* a table: copied */
                 !(rc = dict_copy(kv_txn_tx(t), d, &copy)) &&
                 !(rc = kv_txn_put_dict(t, argv[2], copy, at, type)))
            reply_int(&c->out, 1);
        else if (rc >= 0 && !d &&
                 !(rc = kv_txn_write(t, argv[2], (struct kv_slice){x.p, x.n}, at, type)))
            reply_int(&c->out, 1);
    }
    free(x.p);
    return rc;
}

/* OBJECT ENCODING key: a string says what Redis 7.0 makes of the value
 * a SET stores (string_encoding below; Redis's "raw" after APPEND,
 * SETRANGE or SETBIT is not kept: the bytes alone decide here), a
 * hash as one packed record of its fields (hash.c: as Redis's
 * "listpack"), a set says what Redis would have made of it (set.c); a
 * hash or a set past its packed size is an element table (t_dict.c:
 * "hashtable"); a
 * list, packed too (list.c), says "quicklist", Redis 7.0's only encoding
 * of lists; a sorted set "listpack" or, in its large form (zbtree.c),
 * "skiplist". OBJECT REFCOUNT: Redis's answer, 2147483647 for a string that
 * it would have made one of its shared integers (0 to 9999), else 1.
 * OBJECT FREQ: Redis's error unless an LFU policy is set, then the
 * logarithmic access counter of the key's slice of the key space
 * (kv_txn_freq, DRAM); OBJECT IDLETIME: the
 * seconds since the key's slice of the key space was last looked up
 * (kv_txn_idle; Redis's error under an LFU policy), OBJECT itself no
 * access (docs/kvstore.md, section 33). */
static int shared_integer(const char *v, size_t n)
{
    long long x;
    struct kv_slice a = {v, n};
    return v && n && !parse_ll(&a, &x) && x >= 0 && x < 10000 && (x || n == 1);
}

/* Redis's tryObjectEncoding of a stored string: a strict integer of at
 * most 20 bytes is "int", other strings of at most 44 bytes "embstr" (one
 * allocation with the object header), longer ones "raw". */
static const char *string_encoding(const char *v, size_t n)
{
    long long x;
    struct kv_slice a = {v, n};
    if (n <= 20 && !parse_ll(&a, &x))
        return "int";
    return n <= 44 ? "embstr" : "raw";
}

static int cmd_object(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    static const char *const help[] = {
        "ENCODING <key>",
        "    How the value at <key> is kept: int, embstr or raw (a string), listpack or",
        "    hashtable (a hash),",
        "    listpack or skiplist (a sorted set), quicklist (a list), intset or hashtable (a set).",
        "FREQ <key>",
        "    The logarithmic access frequency counter of <key> (its 2^-20 slice of the key",
        "    space) under an LFU maxmemory-policy.",
        "IDLETIME <key>",
        "    Seconds since <key> was last read or written (the last access of any key of",
        "    its 2^-20 slice of the key space).",
        "REFCOUNT <key>",
        "    Redis's count of references to the value: 2147483647 for a shared integer",
        "    (a string holding 0 to 9999), else 1.",
        NULL,
    };
    static const char *const subs[] = {"encoding", "freq", "idletime", "refcount", NULL};
    const struct kv_slice *sub = &argv[1];
    if (arg_is(sub, "HELP"))
        return reply_help(&c->out, argc, "OBJECT", help), 0;
    size_t which = 0;
    while (subs[which] && !arg_is(sub, subs[which]))
        which++;
    if (!subs[which])
        return reply_error(&c->out, "ERR unknown subcommand '%.*s'. Try OBJECT HELP.",
                           (int)(sub->n > 64 ? 64 : sub->n), sub->p), 0;
    if (argc != 3)
        return reply_error(&c->out, "ERR wrong number of arguments for 'object|%s' command",
                           subs[which]), 0;
    int rc = 0;
    unsigned type = KV_STRING;
    struct val x = {0};
    txn_obj *d = NULL;
    uint64_t idle = 0;
    unsigned freq = 0;
    kv_txn_no_touch(t); /* OBJECT is no access (Redis's LOOKUP_NOTOUCH) */
    if ((rc = kv_txn_idle(t, argv[2], &idle)) < 0 || (rc = kv_txn_freq(t, argv[2], &freq)) < 0)
        return rc;
    if ((rc = kv_txn_read(t, argv[2], cmd_val_cb, &x, &type)) > 0 && x.oom)
        rc = TXN_E_NOMEM;
    if (rc > 0 && (type == KV_HASH || type == KV_SET) &&
        (rc = kv_txn_dict(t, argv[2], &type, &d)) >= 0)
        rc = 1;
    if (rc < 0 || !rc) {
        if (!rc)
            reply_nil(&c->out);
        free(x.p);
        return rc;
    }
    const char *v = x.p; /* a string's bytes */
    size_t n = x.n;
    if (type == KV_ITEM) /* memcached's item: its string after the header */
        v = n >= KV_ITEM_HDR ? v + KV_ITEM_HDR : NULL, n = n >= KV_ITEM_HDR ? n - KV_ITEM_HDR : 0;
    if (which == 1 && !config_lfu())
        reply_error(&c->out, "ERR An LFU maxmemory policy is not selected, access frequency "
                             "not tracked. Please note that when switching between policies at "
                             "runtime LRU and LFU data will take some time to adjust.");
    else if (which == 1)
        reply_int(&c->out, (long long)freq);
    else if (which == 2 && config_lfu())
        reply_error(&c->out, "ERR An LFU maxmemory policy is selected, idle time not tracked. "
                             "Please note that when switching between policies at runtime LRU "
                             "and LFU data will take some time to adjust.");
    else if (which == 2)
        reply_int(&c->out, (long long)idle);
    else if (which == 3) {
        int shared = (type == KV_STRING || type == KV_ITEM) && shared_integer(v, n);
        reply_int(&c->out, shared ? 2147483647 : 1);
    } else {
        const char *enc = d                                  ? "hashtable"
                          : type == KV_HASH                   ? "listpack"
                          : type == KV_ZSET                  ? zset_encoding(x.p, x.n)
                          : type == KV_LIST                  ? "quicklist"
                          : type == KV_SET                   ? set_encoding(x.p, x.n)
                                                             : string_encoding(v, n);
        reply_bulk(&c->out, enc, strlen(enc));
    }
    free(x.p);
    return 0;
}

/* RANDOMKEY: the first key from a random point of the hash space */
struct first_key {
    char *k;
    size_t n;
};

static void first_key_cb(void *arg, const char *k, size_t n, unsigned type)
{
    (void)type;
    struct first_key *f = arg;
    if (!f->k && (f->k = malloc(n ? n : 1))) {
        memcpy(f->k, k, n);
        f->n = n;
    }
}

static int cmd_randomkey(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc, (void)argv;
    struct first_key f = {0};
    uint64_t cursor = ((uint64_t)random() << 33) ^ ((uint64_t)random() << 2), next;
    int rc = 0, wrapped = 0;
    while (!f.k && !rc) {
        if ((rc = kv_scan(srv.kv, cursor, 64, first_key_cb, &f, &next)))
            break;
        if (!next) {
            if (wrapped++)
                break; /* the whole space: no key */
        }
        cursor = next;
    }
    if (rc)
        reply_store_error(&c->out, rc);
    else if (f.k)
        reply_bulk(&c->out, f.k, f.n);
    else
        reply_nil(&c->out);
    free(f.k);
    return 0;
}

/* ---- expiry: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT [NX | XX | GT | LT],
 * TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST, SETEX, PSETEX, GETEX */

static int cmd_expire(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int ms = arg_is(&argv[0], "PEXPIRE") || arg_is(&argv[0], "PEXPIREAT");
    int abs = arg_is(&argv[0], "EXPIREAT") || arg_is(&argv[0], "PEXPIREAT");
    int nx = 0, xx = 0, gt = 0, lt = 0;
    for (size_t i = 3; i < argc; i++) {
        if (arg_is(&argv[i], "NX"))
            nx = 1;
        else if (arg_is(&argv[i], "XX"))
            xx = 1;
        else if (arg_is(&argv[i], "GT"))
            gt = 1;
        else if (arg_is(&argv[i], "LT"))
            lt = 1;
        else
            return reply_error(&c->out, "ERR Unsupported option %.*s",
                               (int)(argv[i].n > 64 ? 64 : argv[i].n), argv[i].p), 0;
    }
    if (nx && (xx || gt || lt))
        return reply_error(&c->out, "ERR NX and XX, GT or LT options at the same time are "
                                    "not compatible"), 0;
    if (gt && lt)
        return reply_error(&c->out, "ERR GT and LT options at the same time are not "
                                    "compatible"), 0;
    long long n;
    if (parse_ll(&argv[2], &n))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    long long base = abs ? 0 : (long long)now_ms(), at;
    if ((!ms && (n > LLONG_MAX / 1000 || n < LLONG_MIN / 1000)) ||
        __builtin_add_overflow(ms ? n : n * 1000, base, &at)) {
        char lower[16];
        size_t k = argv[0].n < sizeof lower - 1 ? argv[0].n : sizeof lower - 1;
        for (size_t i = 0; i < k; i++)
            lower[i] = (char)(argv[0].p[i] | 0x20);
        lower[k] = 0;
        return reply_error(&c->out, "ERR invalid expire time in '%s' command", lower), 0;
    }
    int rc = 0;
    uint64_t cur;
    if ((rc = kv_txn_ttl(t, argv[1], &cur)) > 0) {
        /* a key without an expiry counts as infinite for GT and LT */
        int ok = !(nx && cur) && !(xx && !cur) && !(gt && (!cur || (uint64_t)at <= cur)) &&
                 !(lt && cur && (uint64_t)at >= cur);
        if (!ok)
            rc = 0;
        else if (at <= (long long)now_ms()) /* a time past: the key goes now */
            rc = kv_txn_del(t, argv[1]);
        else
            rc = kv_txn_expire(t, argv[1], (uint64_t)at);
    }
    if (rc >= 0)
        reply_int(&c->out, rc > 0);
    return rc;
}

/* TTL, PTTL (time left), EXPIRETIME, PEXPIRETIME (the time): -2 missing,
 * -1 no expiry */
static int cmd_ttl(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int ms = argv[0].p[0] == 'p' || argv[0].p[0] == 'P';
    int abs = argv[0].n > 4; /* EXPIRETIME, PEXPIRETIME */
    int rc = 0;
    uint64_t at;
    if ((rc = kv_txn_ttl(t, argv[1], &at)) >= 0) {
        long long v;
        if (!rc)
            v = -2;
        else if (!at)
            v = -1;
        else if (abs)
            v = ms ? (long long)at : (long long)((at + 500) / 1000);
        else {
            uint64_t now = now_ms();
            long long left = at > now ? (long long)(at - now) : 0;
            v = ms ? left : (left + 500) / 1000;
        }
        reply_int(&c->out, v);
    }
    return rc;
}

static int cmd_persist(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int rc = 0;
    uint64_t at;
    if ((rc = kv_txn_ttl(t, argv[1], &at)) > 0)
        rc = at ? kv_txn_expire(t, argv[1], 0) : 0;
    if (rc >= 0)
        reply_int(&c->out, rc > 0);
    return rc;
}

/* SETEX key seconds value; PSETEX key ms value */

/* ---- the table */

#define W CMD_WRITE
#define R CMD_READONLY
#define M CMD_DENYOOM
#define F CMD_FAST
/* KEYS, SCAN, RANDOMKEY and the flushes lock the store's stripes
 * on their own, which EXEC's one transaction over its keys cannot hold:
 * refused inside MULTI here (Redis queues them). */
#define NM CMD_NO_MULTI
const struct command key_commands[] = {
    {"del", cmd_del, -2, W, ACL_KEYSPACE, {1, -1, 1}},
    {"unlink", cmd_del, -2, W | F, ACL_KEYSPACE, {1, -1, 1}},
    {"exists", cmd_exists, -2, R | F, ACL_KEYSPACE, {1, -1, 1}},
    {"touch", cmd_exists, -2, R | F, ACL_KEYSPACE, {1, -1, 1}},
    {"type", cmd_type, 2, R | F, ACL_KEYSPACE, {1, 1, 1}},
    {"expire", cmd_expire, -3, W | F, ACL_KEYSPACE, {1, 1, 1}},
    {"pexpire", cmd_expire, -3, W | F, ACL_KEYSPACE, {1, 1, 1}},
    {"expireat", cmd_expire, -3, W | F, ACL_KEYSPACE, {1, 1, 1}},
    {"pexpireat", cmd_expire, -3, W | F, ACL_KEYSPACE, {1, 1, 1}},
    {"ttl", cmd_ttl, 2, R | F, ACL_KEYSPACE, {1, 1, 1}},
    {"pttl", cmd_ttl, 2, R | F, ACL_KEYSPACE, {1, 1, 1}},
    {"expiretime", cmd_ttl, 2, R | F, ACL_KEYSPACE, {1, 1, 1}},
    {"pexpiretime", cmd_ttl, 2, R | F, ACL_KEYSPACE, {1, 1, 1}},
    {"persist", cmd_persist, 2, W | F, ACL_KEYSPACE, {1, 1, 1}},
    {"rename", cmd_rename, 3, W, ACL_KEYSPACE, {1, 2, 1}},
    {"renamenx", cmd_rename, 3, W | F, ACL_KEYSPACE, {1, 2, 1}},
    {"copy", cmd_copy, -3, W | M, ACL_KEYSPACE, {1, 2, 1}},
    /* Redis's OBJECT is a container of subcommands with no keys of its
     * own; here its subcommands, which all read one, name it at 2 */
    {"object", cmd_object, -2, 0, 0, {2, 2, 1}},
    {"randomkey", cmd_randomkey, 1, R | NM, ACL_KEYSPACE, {0, 0, 0}},
    {"dbsize", cmd_dbsize, 1, R | F, ACL_KEYSPACE, {0, 0, 0}},
    {"keys", cmd_keys, 2, R | NM, ACL_KEYSPACE | ACL_DANGEROUS, {0, 0, 0}},
    {"scan", cmd_scan, -2, R | NM, ACL_KEYSPACE, {0, 0, 0}},
    {"flushall", cmd_flushall, -1, W | NM, ACL_KEYSPACE | ACL_DANGEROUS, {0, 0, 0}},
    {"flushdb", cmd_flushall, -1, W | NM, ACL_KEYSPACE | ACL_DANGEROUS, {0, 0, 0}},
};
const size_t key_ncommands = sizeof key_commands / sizeof *key_commands;
