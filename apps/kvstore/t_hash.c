/* t_hash.c - the hash commands (HSET ... HSCAN): Redis 7.0's replies and
 * error texts, each in one store transaction (its own or EXEC's). The
 * hashes themselves, their forms and changes, are hash.c's (hash.h); this
 * file reads the arguments and CONFIG and writes the replies. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "hash.h"
#include "t_hash.h"

/* The thresholds of this command: CONFIG's, read once. */
static struct hash_limits limits(void)
{
    return (struct hash_limits){atomic_load(&cfg.hash_max_listpack_entries),
                                atomic_load(&cfg.hash_max_listpack_value)};
}

/* Run a hash command in its transaction t (over its key, argv[1]): the
 * hash loaded (found: 1, or 0 with h empty), fn's reply and result (<0 a
 * store error: nothing of the command stays). */
typedef int (*hash_fn)(struct conn *c, size_t argc, struct kv_slice *argv, kv_txn *t,
                       struct hash *h, int found, const void *ctx);

static int with_hash(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv, hash_fn fn,
                     const void *ctx)
{
    struct hash h;
    int rc = hash_load(t, argv[1], &h);
    if (rc >= 0)
        rc = fn(c, argc, argv, t, &h, rc, ctx);
    hash_free(&h);
    return rc;
}

#define HASH_FN(name)                                                                         \
    static int name(struct conn *c, size_t argc, struct kv_slice *argv, kv_txn *t,            \
                    struct hash *h, int found, const void *ctx)

/* HSET key field value [field value ...]; HMSET (replies OK) */
static int cmd_hset(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    if (argc % 2)
        return reply_error(&c->out, "ERR wrong number of arguments for '%s' command",
                           arg_is(&argv[0], "hmset") ? "hmset" : "hset"), 0;
    struct hash_limits lim = limits();
    uint64_t added;
    int rc = hash_set_fields(t, argv[1], &lim, &argv[2], (argc - 2) / 2, 0, &added);
    if (!rc)
        arg_is(&argv[0], "hmset") ? reply_simple(&c->out, "OK")
                                  : reply_int(&c->out, (long long)added);
    return rc;
}

/* HSETNX key field value */
static int cmd_hsetnx(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    struct hash_limits lim = limits();
    uint64_t added;
    int rc = hash_set_fields(t, argv[1], &lim, &argv[2], 1, 1, &added);
    if (!rc)
        reply_int(&c->out, (long long)added);
    return rc;
}

/* HGET key field, HMGET key field ..., HEXISTS, HSTRLEN: read-only lookups
 * of fields */
HASH_FN(lookup_fields)
{
    (void)t, (void)found, (void)ctx;
    char what = arg_is(&argv[0], "hmget") ? 'm' : arg_is(&argv[0], "hexists") ? 'e'
                : arg_is(&argv[0], "hstrlen") ? 'l' : 'g';
    if (what == 'm')
        reply_array(&c->out, argc - 2);
    for (size_t i = 2; i < argc; i++) {
        struct kv_slice v;
        char *copy;
        int rc = hash_get(h, argv[i], &v, &copy);
        if (rc < 0)
            return rc;
        if (what == 'e')
            reply_int(&c->out, rc);
        else if (what == 'l')
            reply_int(&c->out, rc ? (long long)v.n : 0);
        else if (rc)
            reply_bulk(&c->out, v.p, v.n);
        else
            reply_nil(&c->out);
        free(copy);
    }
    return 0;
}

static int cmd_hget(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_hash(c, t, argc, argv, lookup_fields, NULL);
}

/* HDEL key field [field ...] */
static int cmd_hdel(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    struct hash_limits lim = limits();
    uint64_t n;
    int rc = hash_del_fields(t, argv[1], &lim, &argv[2], argc - 2, &n);
    if (!rc)
        reply_int(&c->out, (long long)n);
    return rc;
}

HASH_FN(hlen)
{
    (void)argc, (void)argv, (void)t, (void)found, (void)ctx;
    uint64_t n;
    int rc = hash_count(h, &n);
    if (!rc)
        reply_int(&c->out, (long long)n);
    return rc;
}

static int cmd_hlen(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_hash(c, t, argc, argv, hlen, NULL);
}

/* HINCRBYFLOAT's change of a field (hash_update's fn) */
enum { NOT_FLOAT = 3, NOT_FINITE = 4 };
struct fincr {
    long double by;
    char buf[LD_CHARS];
    size_t n;
};

static int fincr_fn(void *arg, const struct kv_slice *from, struct kv_slice *to)
{
    struct fincr *in = arg;
    long double cur = 0;
    if (from && parse_ld(from->p, from->n, &cur))
        return NOT_FLOAT;
    if (isnan(cur + in->by) || isinf(cur + in->by))
        return NOT_FINITE;
    in->n = (size_t)format_ld(cur + in->by, in->buf);
    *to = (struct kv_slice){in->buf, in->n};
    return 0;
}

/* HINCRBY key field by; HINCRBYFLOAT: the field as a number, changed */
static int cmd_hincrby(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    static const char *const why[] = {
        [HASH_NOT_INT] = "ERR hash value is not an integer",
        [HASH_OVERFLOW] = "ERR increment or decrement would overflow",
        [NOT_FLOAT] = "ERR hash value is not a float",
        [NOT_FINITE] = "ERR increment would produce NaN or Infinity",
    };
    struct hash_limits lim = limits();
    int fl = arg_is(&argv[0], "hincrbyfloat"), rc;
    long long by = 0, now = 0;
    struct fincr in;
    if (!fl && parse_ll(&argv[3], &by))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    if (fl && parse_ld(argv[3].p, argv[3].n, &in.by))
        return reply_error(&c->out, "ERR value is not a valid float"), 0;
    if (fl && isinf(in.by))
        return reply_error(&c->out, "ERR value is NaN or Infinity"), 0;
    rc = fl ? hash_update(t, argv[1], &lim, argv[2], fincr_fn, &in)
            : hash_incr(t, argv[1], &lim, argv[2], by, &now);
    if (rc > 0)
        reply_error(&c->out, "%s", why[rc]);
    else if (!rc && fl)
        reply_bulk(&c->out, in.buf, in.n);
    else if (!rc)
        reply_int(&c->out, now);
    return rc < 0 ? rc : 0;
}

static void reply_field(struct buf *b, const struct hash_field *x, int values)
{
    reply_bulk(b, x->f.p, x->f.n);
    if (values)
        reply_bulk(b, x->v.p, x->v.n);
}

/* HKEYS, HVALS, HGETALL: every field, in the hash's order */
HASH_FN(hgetall)
{
    (void)argc, (void)t, (void)found, (void)ctx;
    int keys = !arg_is(&argv[0], "hvals"), vals = !arg_is(&argv[0], "hkeys");
    int rc = hash_all(h);
    if (rc)
        return rc;
    reply_array(&c->out, h->n * (size_t)(keys + vals));
    for (size_t i = 0; i < h->n; i++) {
        if (keys)
            reply_bulk(&c->out, h->e[i].f.p, h->e[i].f.n);
        if (vals)
            reply_bulk(&c->out, h->e[i].v.p, h->e[i].v.n);
    }
    return 0;
}

static int cmd_hgetall(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_hash(c, t, argc, argv, hgetall, NULL);
}

#define RAND_MAX_FIELDS (1LL << 24)

/* HRANDFIELD key [count [WITHVALUES]]: a positive count gives distinct
 * fields (the whole hash, in order, when count >= its size), a negative
 * one |count| fields that may repeat */
HASH_FN(hrandfield)
{
    (void)argv, (void)t;
    long long count = *(const long long *)ctx;
    int values = argc == 4, rc = 0;
    struct kv_slice one;
    if (argc < 3 && h->d) { /* one field: O(1) */
        rc = hash_random(h, (uint64_t)random() << 31 ^ (uint64_t)random(), &one);
        if (rc > 0)
            reply_bulk(&c->out, one.p, one.n);
        else if (!rc)
            reply_nil(&c->out);
        free(rc > 0 ? (void *)one.p : NULL);
        return rc < 0 ? rc : 0;
    }
    if ((rc = hash_all(h)))
        return rc;
    if (argc < 3) {
        if (found)
            reply_field(&c->out, &h->e[(size_t)random() % h->n], 0);
        else
            reply_nil(&c->out);
    } else if (!found || count == 0) {
        reply_array(&c->out, 0);
    } else if (count < 0) {
        size_t n = (size_t)-count;
        reply_array(&c->out, n * (size_t)(values + 1));
        for (size_t i = 0; i < n; i++)
            reply_field(&c->out, &h->e[(size_t)random() % h->n], values);
    } else {
        size_t n = (size_t)count < h->n ? (size_t)count : h->n;
        /* a partial Fisher-Yates shuffle picks n distinct fields */
        for (size_t i = 0; n < h->n && i < n; i++) {
            size_t j = i + (size_t)random() % (h->n - i);
            struct hash_field x = h->e[i];
            h->e[i] = h->e[j];
            h->e[j] = x;
        }
        reply_array(&c->out, n * (size_t)(values + 1));
        for (size_t i = 0; i < n; i++)
            reply_field(&c->out, &h->e[i], values);
    }
    return 0;
}

static int cmd_hrandfield(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long count = 1;
    int values = argc == 4, many = argc >= 3;
    if (argc > 4 || (values && !arg_is(&argv[3], "WITHVALUES")))
        return reply_error(&c->out, "ERR syntax error"), 0;
    if (many && parse_ll(&argv[2], &count))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    if (many && count < -LONG_MAX)
        return reply_error(&c->out, "ERR value is out of range, value must between "
                                    "-9223372036854775807 and 9223372036854775807"), 0;
    /* Redis allocates a reply of -count fields and dies of it (tried);
     * here a reply has at most RAND_MAX_FIELDS of them */
    if (many && ((values && count < -LONG_MAX / 2) || count < -RAND_MAX_FIELDS))
        return reply_error(&c->out, "ERR value is out of range"), 0;
    return with_hash(c, t, argc, argv, hrandfield, &count);
}

/* HSCAN key cursor [MATCH pattern] [COUNT n]: a packed record is one
 * value, so one call returns every field (cursor 0), as Redis does for a
 * listpack; a table's buckets are read from the cursor on until COUNT
 * fields (default 10) were seen, as Redis's dictScan; options are read
 * only for a hash that is there, as Redis */
HASH_FN(hscan)
{
    (void)t;
    const struct kv_slice *pattern = NULL;
    const char *bad = NULL;
    size_t n = 0;
    long long count = 10;
    uint64_t next = 0;
    for (size_t i = 3; found && i < argc && !bad; i += 2) {
        if (i + 1 == argc || !(arg_is(&argv[i], "MATCH") || arg_is(&argv[i], "COUNT")))
            bad = "ERR syntax error";
        else if (arg_is(&argv[i], "MATCH"))
            pattern = &argv[i + 1];
        else if (parse_ll(&argv[i + 1], &count))
            bad = "ERR value is not an integer or out of range";
        else if (count < 1)
            bad = "ERR syntax error";
    }
    if (bad) {
        reply_error(&c->out, "%s", bad);
        return 0;
    }
    int rc = h->d ? hash_collect(h, *(const uint64_t *)ctx, (uint64_t)count, &next) : 0;
    if (rc)
        return rc;
    for (size_t i = 0; i < h->n; i++)
        if (!pattern || glob_match(pattern->p, pattern->n, h->e[i].f.p, h->e[i].f.n))
            h->e[n++] = h->e[i];
    char cur[24];
    reply_array(&c->out, 2);
    reply_bulk(&c->out, cur, (size_t)snprintf(cur, sizeof cur, "%llu", (unsigned long long)next));
    reply_array(&c->out, 2 * n);
    for (size_t i = 0; i < n; i++)
        reply_field(&c->out, &h->e[i], 1);
    return 0;
}

static int cmd_hscan(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    /* Redis reads the cursor with strtoul: signs and "" pass, spaces
     * before it and out-of-range numbers do not */
    char *end, cur[32];
    if (argv[2].n >= sizeof cur)
        return reply_error(&c->out, "ERR invalid cursor"), 0;
    memcpy(cur, argv[2].p, argv[2].n);
    cur[argv[2].n] = 0;
    errno = 0;
    uint64_t at = strtoull(cur, &end, 10);
    if (*end || errno == ERANGE || isspace((unsigned char)cur[0]))
        return reply_error(&c->out, "ERR invalid cursor"), 0;
    return with_hash(c, t, argc, argv, hscan, &at);
}

/* ---- the table */

#define W CMD_WRITE
#define R CMD_READONLY
#define M CMD_DENYOOM
#define F CMD_FAST
const struct command hash_commands[] = {
    {"hset", cmd_hset, -4, W | M | F, ACL_HASH, {1, 1, 1}},
    {"hmset", cmd_hset, -4, W | M | F, ACL_HASH, {1, 1, 1}},
    {"hsetnx", cmd_hsetnx, 4, W | M | F, ACL_HASH, {1, 1, 1}},
    {"hget", cmd_hget, 3, R | F, ACL_HASH, {1, 1, 1}},
    {"hmget", cmd_hget, -3, R | F, ACL_HASH, {1, 1, 1}},
    {"hdel", cmd_hdel, -3, W | F, ACL_HASH, {1, 1, 1}},
    {"hlen", cmd_hlen, 2, R | F, ACL_HASH, {1, 1, 1}},
    {"hstrlen", cmd_hget, 3, R | F, ACL_HASH, {1, 1, 1}},
    {"hexists", cmd_hget, 3, R | F, ACL_HASH, {1, 1, 1}},
    {"hincrby", cmd_hincrby, 4, W | M | F, ACL_HASH, {1, 1, 1}},
    {"hincrbyfloat", cmd_hincrby, 4, W | M | F, ACL_HASH, {1, 1, 1}},
    {"hkeys", cmd_hgetall, 2, R, ACL_HASH, {1, 1, 1}},
    {"hvals", cmd_hgetall, 2, R, ACL_HASH, {1, 1, 1}},
    {"hgetall", cmd_hgetall, 2, R, ACL_HASH, {1, 1, 1}},
    {"hrandfield", cmd_hrandfield, -2, R, ACL_HASH, {1, 1, 1}},
    {"hscan", cmd_hscan, -3, R, ACL_HASH, {1, 1, 1}},
};
const size_t hash_ncommands = sizeof hash_commands / sizeof *hash_commands;
