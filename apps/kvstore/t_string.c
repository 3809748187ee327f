/* t_string.c - the string commands: Redis 7.0's replies and error texts.
 * Each runs in the store transaction the dispatcher opened over its keys
 * (cmd.h), its own or EXEC's: a command that reads and writes (GETSET,
 * APPEND, INCR) is atomic, and one that fails on its input writes
 * nothing. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t_string.h"

#define MAX_STRING (512ull * 1024 * 1024) /* Redis's proto-max-bulk-len default */

static void reply_val(struct buf *b, int found, const struct val *x)
{
    if (found > 0)
        reply_bulk(b, x->p, x->n);
    else
        reply_nil(b);
}

/* ---- GET, MGET, SET and its family */

/* GET and MGET reply straight from the locked value (no copy). */
static void bulk_cb(void *arg, const char *v, size_t n)
{
    if (v)
        reply_bulk(arg, v, n);
    else
        reply_nil(arg);
}

static int cmd_get(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int rc = 0;
    rc = kv_txn_get(t, argv[1], bulk_cb, &c->out);
    return rc;
}

/* MGET answers nil for a key of another type: the store sets the type
 * before it calls back. */
struct string_reply {
    struct buf *b;
    unsigned type;
};

static void string_cb(void *arg, const char *v, size_t n)
{
    struct string_reply *r = arg;
    if (v && r->type == KV_ITEM && n >= KV_ITEM_HDR) /* read raw: its string */
        v += KV_ITEM_HDR, n -= KV_ITEM_HDR;
    bulk_cb(r->b, r->type != KV_STRING && r->type != KV_ITEM ? NULL : v, n);
}

static int cmd_mget(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int rc = 0;
    reply_array(&c->out, argc - 1);
    struct string_reply r = {&c->out, KV_STRING};
    for (size_t i = 1; i < argc && rc >= 0; i++)
        rc = kv_txn_read(t, argv[i], string_cb, &r, &r.type);
    return rc;
}

/* An expiry argument of `cmd` (EX/PX: relative seconds/ms, EXAT/PXAT:
 * absolute) as ms since the epoch, with Redis's errors; 0 or -1 after
 * replying. */
static int expiry_arg(struct conn *c, const struct kv_slice *opt, const struct kv_slice *v,
               const char *cmd, uint64_t *at)
{
    long long n;
    if (parse_ll(v, &n)) {
        reply_error(&c->out, "ERR value is not an integer or out of range");
        return -1;
    }
    int ms = arg_is(opt, "PX") || arg_is(opt, "PXAT");
    int abs = arg_is(opt, "EXAT") || arg_is(opt, "PXAT");
    long long base = abs ? 0 : (long long)now_ms();
    if (n <= 0 || (!ms && n > LLONG_MAX / 1000) ||
        __builtin_add_overflow(ms ? n : n * 1000, base, &n)) {
        reply_error(&c->out, "ERR invalid expire time in '%s' command", cmd);
        return -1;
    }
    *at = (uint64_t)n;
    return 0;
}

/* SET key value [NX | XX] [GET] [EX s | PX ms | EXAT t | PXAT t | KEEPTTL] */
static int cmd_set(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int nx = 0, xx = 0, get = 0, keep = 0;
    size_t ex = 0; /* index of EX/PX/EXAT/PXAT */
    for (size_t i = 3; i < argc; i++) {
        int expiry = arg_is(&argv[i], "EX") || arg_is(&argv[i], "PX") ||
                     arg_is(&argv[i], "EXAT") || arg_is(&argv[i], "PXAT");
        if (arg_is(&argv[i], "NX") && !xx)
            nx = 1;
        else if (arg_is(&argv[i], "XX") && !nx)
            xx = 1;
        else if (arg_is(&argv[i], "GET"))
            get = 1;
        else if (arg_is(&argv[i], "KEEPTTL") && !ex)
            keep = 1;
        else if (expiry && !keep && !ex && i + 1 < argc)
            ex = i++;
        else
            return reply_error(&c->out, "ERR syntax error"), 0;
    }
    uint64_t at = keep ? KV_KEEPTTL : 0;
    if (ex && expiry_arg(c, &argv[ex], &argv[ex + 1], "set", &at))
        return 0;
    struct val old = {0};
    int rc = 0, found = 0;
    if (!nx && !xx && !get) { /* the common SET: no need to look first */
        if (!(rc = kv_txn_put(t, argv[1], argv[2], at)))
            reply_simple(&c->out, "OK");
    } else if ((found = rc = get ? get_val(t, argv[1], &old)
                                 : kv_txn_get(t, argv[1], NULL, NULL)) >= 0) {
        int set = !(nx && found) && !(xx && !found);
        rc = set ? kv_txn_put(t, argv[1], argv[2], at) : 0;
        if (!rc && get)
            reply_val(&c->out, found, &old);
        else if (!rc)
            set ? reply_simple(&c->out, "OK") : reply_nil(&c->out);
    }
    free(old.p);
    return rc;
}

static int cmd_setnx(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int rc = 0;
    if ((rc = kv_txn_get(t, argv[1], NULL, NULL)) == 0 &&
        !(rc = kv_txn_put(t, argv[1], argv[2], 0)))
        reply_int(&c->out, 1);
    else if (rc > 0)
        reply_int(&c->out, 0);
    return rc;
}

/* GETSET key value; GETDEL key */
static int cmd_getset(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    struct val old;
    int del = arg_is(&argv[0], "GETDEL");
    int rc = 0, found;
    if ((found = rc = get_val(t, argv[1], &old)) >= 0) {
        rc = del ? (found ? kv_txn_del(t, argv[1]) : 0) : kv_txn_put(t, argv[1], argv[2], 0);
        if (rc >= 0)
            reply_val(&c->out, found, &old);
    }
    free(old.p);
    return rc;
}

/* MSET key value [key value ...]; MSETNX: none set if any key exists */
static int cmd_mset(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int nx = arg_is(&argv[0], "MSETNX");
    if (argc % 2 == 0)
        return reply_error(&c->out, "ERR wrong number of arguments for '%s' command",
                           nx ? "msetnx" : "mset"), 0;
    int rc = 0, any = 0;
    for (size_t i = 1; nx && i < argc && !rc; i += 2)
        if ((rc = kv_txn_get(t, argv[i], NULL, NULL)) > 0)
            any = 1, rc = 0;
    for (size_t i = 1; !any && i < argc && !rc; i += 2)
        rc = kv_txn_put(t, argv[i], argv[i + 1], 0);
    if (!rc)
        nx ? reply_int(&c->out, !any) : reply_simple(&c->out, "OK");
    return rc;
}

/* ---- changing a value in place: APPEND, SETRANGE, SETBIT */

/* The new content of a value: old (or empty) with `n` bytes of `src` at
 * `at`, zeros between; NULL src: only grown to at + n. */
static char *spliced(const struct val *old, size_t at, const char *src, size_t n, size_t *len)
{
    size_t have = old->p ? old->n : 0, want = at + n > have ? at + n : have;
    char *v = calloc(1, want ? want : 1);
    if (!v)
        return NULL;
    if (have)
        memcpy(v, old->p, have);
    if (src)
        memcpy(v + at, src, n);
    *len = want;
    return v;
}

/* APPEND and SETRANGE: only the new bytes are written (kv_txn_splice). */
static int splice(struct conn *c, kv_txn *t, struct kv_slice *argv, uint64_t off,
                  struct kv_slice src)
{
    uint64_t len = 0;
    int rc;
    if ((rc = kv_txn_splice(t, argv[1], off, src, MAX_STRING, &len)) == KV_E_TOOBIG) {
        reply_error(&c->out, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        rc = 0;
    } else if (rc >= 0) {
        reply_int(&c->out, (long long)len);
    }
    return rc;
}

static int cmd_append(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    return splice(c, t, argv, KV_SPLICE_END, argv[2]);
}

static int cmd_setrange(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long off;
    if (parse_ll(&argv[2], &off))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    if (off < 0)
        return reply_error(&c->out, "ERR offset is out of range"), 0;
    return splice(c, t, argv, (uint64_t)off, argv[3]);
}

/* A bit offset as Redis takes it: 0 to 2^32 - 1 */
static int parse_bit_offset(const struct kv_slice *a, unsigned long long *out)
{
    long long v;
    if (parse_ll(a, &v) || v < 0 || v >= 4294967296LL)
        return -1;
    *out = (unsigned long long)v;
    return 0;
}

static int cmd_setbit(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    unsigned long long bit;
    if (parse_bit_offset(&argv[2], &bit))
        return reply_error(&c->out, "ERR bit offset is not an integer or out of range"), 0;
    if (argv[3].n != 1 || (argv[3].p[0] != '0' && argv[3].p[0] != '1'))
        return reply_error(&c->out, "ERR bit is not an integer or out of range"), 0;
    struct val old;
    size_t len = 0, byte = (size_t)(bit >> 3);
    int rc = 0;
    if ((rc = get_val(t, argv[1], &old)) >= 0) {
        char *v = spliced(&old, byte, NULL, 1, &len);
        if (!v) {
            rc = TXN_E_NOMEM;
        } else {
            unsigned char m = (unsigned char)(0x80u >> (bit & 7));
            int was = ((unsigned char)v[byte] & m) != 0;
            v[byte] = (char)(argv[3].p[0] == '1' ? (unsigned char)v[byte] | m
                                                 : (unsigned char)v[byte] & (unsigned char)~m);
            /* only the byte is written (a pieced string: one piece) */
            uint64_t now;
            if ((rc = kv_txn_splice(t, argv[1], byte, (struct kv_slice){v + byte, 1}, MAX_STRING,
                                    &now)) >= 0) {
                rc = 0;
                reply_int(&c->out, was);
            }
        }
        free(v);
    }
    free(old.p);
    return rc;
}

/* ---- reading a part: STRLEN, GETRANGE, GETBIT, BITCOUNT */

/* These read only the bytes they need (kv_txn_getrange): a string in
 * pieces is not gathered. */
static int cmd_strlen(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    uint64_t len;
    int rc = 0;
    if ((rc = kv_txn_getrange(t, argv[1], 0, 0, NULL, NULL, &len)) >= 0)
        reply_int(&c->out, (long long)len);
    return rc;
}

/* Redis's range of [start, end] over n items, negative counted from the
 * end: 0 when empty, else 1 with *lo, *hi inside [0, n). */
static int clamp_range(long long start, long long end, size_t n, size_t *lo, size_t *hi)
{
    long long len = (long long)n;
    if (start < 0 && end < 0 && start > end)
        return 0;
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (end < 0)
        end = 0;
    if (end >= len)
        end = len - 1;
    if (n == 0 || start > end)
        return 0;
    *lo = (size_t)start;
    *hi = (size_t)end;
    return 1;
}

static int cmd_getrange(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long start, end;
    if (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    uint64_t len;
    size_t lo, hi;
    int rc = 0;
    /* the length first: the range counts from the end */
    if ((rc = kv_txn_getrange(t, argv[1], 0, 0, NULL, NULL, &len)) > 0 &&
        clamp_range(start, end, (size_t)len, &lo, &hi))
        rc = kv_txn_getrange(t, argv[1], lo, hi - lo + 1, bulk_cb, &c->out, &len);
    else if (rc >= 0)
        reply_bulk(&c->out, "", 0);
    return rc;
}

static int cmd_getbit(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    unsigned long long bit;
    if (parse_bit_offset(&argv[2], &bit))
        return reply_error(&c->out, "ERR bit offset is not an integer or out of range"), 0;
    struct val x;
    uint64_t len;
    size_t byte = (size_t)(bit >> 3);
    int rc = 0;
    memset(&x, 0, sizeof x);
    if ((rc = kv_txn_getrange(t, argv[1], byte, 1, cmd_val_cb, &x, &len)) > 0 && x.oom)
        rc = TXN_E_NOMEM;
    if (rc >= 0)
        reply_int(&c->out, rc && x.n == 1 && ((unsigned char)x.p[0] & (0x80u >> (bit & 7))));
    free(x.p);
    return rc;
}

/* BITCOUNT key [start end [BYTE | BIT]] */
static int cmd_bitcount(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long start = 0, end = -1;
    int bits = 0;
    if (argc == 3 || argc > 5)
        return reply_error(&c->out, "ERR syntax error"), 0;
    if (argc >= 4 && (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end)))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    if (argc == 5) {
        if (arg_is(&argv[4], "BIT"))
            bits = 1;
        else if (!arg_is(&argv[4], "BYTE"))
            return reply_error(&c->out, "ERR syntax error"), 0;
    }
    struct val x;
    size_t lo, hi;
    int rc = 0;
    if ((rc = get_val(t, argv[1], &x)) >= 0) {
        long long n = 0;
        if (rc && clamp_range(start, end, bits ? x.n * 8 : x.n, &lo, &hi))
            for (size_t i = lo; i <= hi; i++)
                n += bits ? ((unsigned char)x.p[i >> 3] >> (7 - (i & 7))) & 1
                          : __builtin_popcount((unsigned char)x.p[i]);
        reply_int(&c->out, n);
    }
    free(x.p);
    return rc;
}

/* ---- numbers */

/* Redis's integer syntax of a stored value (string2ll) */
static int value_ll(const struct val *x, long long *out)
{
    return parse_ll(&(struct kv_slice){x->p, x->n}, out);
}

static int incr_by(struct conn *c, kv_txn *t, struct kv_slice *argv, long long by)
{
    struct val x;
    int rc, found;
    long long cur = 0, next;
    if ((found = rc = get_val(t, argv[1], &x)) >= 0) {
        rc = 0;
        if (found && value_ll(&x, &cur)) {
            reply_error(&c->out, "ERR value is not an integer or out of range");
        } else if (__builtin_add_overflow(cur, by, &next)) {
            reply_error(&c->out, "ERR increment or decrement would overflow");
        } else {
            char buf[24];
            int n = snprintf(buf, sizeof buf, "%lld", next);
            if (!(rc = kv_txn_put(t, argv[1], (struct kv_slice){buf, (size_t)n}, KV_KEEPTTL)))
                reply_int(&c->out, next);
        }
    }
    free(x.p);
    return rc;
}

static int cmd_incr(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    return incr_by(c, t, argv, arg_is(&argv[0], "DECR") ? -1 : 1);
}

static int cmd_incrby(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long by;
    if (parse_ll(&argv[2], &by))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    if (arg_is(&argv[0], "DECRBY")) {
        if (by == LLONG_MIN)
            return reply_error(&c->out, "ERR decrement would overflow"), 0;
        by = -by;
    }
    return incr_by(c, t, argv, by);
}

static int cmd_incrbyfloat(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long double by, cur = 0;
    if (parse_ld(argv[2].p, argv[2].n, &by))
        return reply_error(&c->out, "ERR value is not a valid float"), 0;
    struct val x;
    int rc = 0, found;
    if ((found = rc = get_val(t, argv[1], &x)) >= 0) {
        rc = 0;
        long double next;
        if (found && parse_ld(x.p, x.n, &cur)) {
            reply_error(&c->out, "ERR value is not a valid float");
        } else if (isnan(next = cur + by) || isinf(next)) {
            reply_error(&c->out, "ERR increment would produce NaN or Infinity");
        } else {
            char buf[LD_CHARS];
            int n = format_ld(next, buf);
            if (!(rc = kv_txn_put(t, argv[1], (struct kv_slice){buf, (size_t)n}, KV_KEEPTTL)))
                reply_bulk(&c->out, buf, (size_t)n);
        }
    }
    free(x.p);
    return rc;
}

/* ---- SETEX, PSETEX, GETEX */

static int cmd_setex(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int ms = arg_is(&argv[0], "PSETEX");
    uint64_t at;
    if (expiry_arg(c, &(struct kv_slice){ms ? "PX" : "EX", 2}, &argv[2],
                   ms ? "psetex" : "setex", &at))
        return 0;
    int rc = 0;
    if (!(rc = kv_txn_put(t, argv[1], argv[3], at)))
        reply_simple(&c->out, "OK");
    return rc;
}

/* GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST] */
static int cmd_getex(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    uint64_t at = KV_KEEPTTL;
    if (argc > 2) {
        if (argc == 3 && arg_is(&argv[2], "PERSIST"))
            at = 0;
        else if (argc == 4 && (arg_is(&argv[2], "EX") || arg_is(&argv[2], "PX") ||
                               arg_is(&argv[2], "EXAT") || arg_is(&argv[2], "PXAT"))) {
            if (expiry_arg(c, &argv[2], &argv[3], "getex", &at))
                return 0;
        } else
            return reply_error(&c->out, "ERR syntax error"), 0;
    }
    struct val x;
    int rc = 0, found;
    if ((found = rc = get_val(t, argv[1], &x)) > 0 && at != KV_KEEPTTL) {
        uint64_t cur;
        if ((rc = kv_txn_ttl(t, argv[1], &cur)) > 0 && (at || cur))
            rc = kv_txn_expire(t, argv[1], at);
    }
    if (rc >= 0)
        reply_val(&c->out, found, &x);
    free(x.p);
    return rc;
}

/* ---- the table */

#define W CMD_WRITE
#define R CMD_READONLY
#define M CMD_DENYOOM
#define F CMD_FAST
const struct command string_commands[] = {
    {"get", cmd_get, 2, R | F, ACL_STRING, {1, 1, 1}},
    {"set", cmd_set, -3, W | M, ACL_STRING, {1, 1, 1}},
    {"setnx", cmd_setnx, 3, W | M | F, ACL_STRING, {1, 1, 1}},
    {"getset", cmd_getset, 3, W | M | F, ACL_STRING, {1, 1, 1}},
    {"getdel", cmd_getset, 2, W | F, ACL_STRING, {1, 1, 1}},
    {"append", cmd_append, 3, W | M | F, ACL_STRING, {1, 1, 1}},
    {"strlen", cmd_strlen, 2, R | F, ACL_STRING, {1, 1, 1}},
    {"getrange", cmd_getrange, 4, R, ACL_STRING, {1, 1, 1}},
    {"setrange", cmd_setrange, 4, W | M, ACL_STRING, {1, 1, 1}},
    {"setbit", cmd_setbit, 4, W | M, ACL_BITMAP, {1, 1, 1}},
    {"getbit", cmd_getbit, 3, R | F, ACL_BITMAP, {1, 1, 1}},
    {"bitcount", cmd_bitcount, -2, R, ACL_BITMAP, {1, 1, 1}},
    {"mget", cmd_mget, -2, R | F, ACL_STRING, {1, -1, 1}},
    {"mset", cmd_mset, -3, W | M | CMD_RESERVE, ACL_STRING, {1, -1, 2}},
    {"msetnx", cmd_mset, -3, W | M | CMD_RESERVE, ACL_STRING, {1, -1, 2}},
    {"incr", cmd_incr, 2, W | M | F, ACL_STRING, {1, 1, 1}},
    {"decr", cmd_incr, 2, W | M | F, ACL_STRING, {1, 1, 1}},
    {"incrby", cmd_incrby, 3, W | M | F, ACL_STRING, {1, 1, 1}},
    {"decrby", cmd_incrby, 3, W | M | F, ACL_STRING, {1, 1, 1}},
    {"incrbyfloat", cmd_incrbyfloat, 3, W | M | F, ACL_STRING, {1, 1, 1}},
    {"setex", cmd_setex, 4, W | M, ACL_STRING, {1, 1, 1}},
    {"psetex", cmd_setex, 4, W | M, ACL_STRING, {1, 1, 1}},
    {"getex", cmd_getex, -2, W | F, ACL_STRING, {1, 1, 1}},
};
const size_t string_ncommands = sizeof string_commands / sizeof *string_commands;
