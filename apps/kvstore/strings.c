/* strings.c - the string commands and the generic key commands (DEL,
 * EXISTS, ...): Redis 7.0's replies and error texts. Each runs in one
 * store transaction over its keys (kv_txn), its own or EXEC's (multi.c):
 * a command that reads and writes (GETSET, APPEND, INCR) is atomic, and
 * one that fails on its input writes nothing. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

#define MAX_STRING (512ull * 1024 * 1024) /* Redis's proto-max-bulk-len default */

/* wall-clock ms since the Unix epoch: expiry times (store.h) */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void val_cb(void *arg, const char *v, size_t n)
{
    struct val *x = arg;
    x->n = n;
    if (!v)
        return;
    if (!(x->p = malloc(n ? n : 1))) {
        x->oom = 1;
        return;
    }
    memcpy(x->p, v, n);
}

/* 1 found (x filled; free x->p), 0 missing, <0 an error */
static int get_val(kv_txn *t, struct kv_slice k, struct val *x)
{
    memset(x, 0, sizeof *x);
    int rc = kv_txn_get(t, k, val_cb, x);
    if (rc > 0 && x->oom)
        rc = TXN_E_NOMEM;
    return rc;
}

/* Begin the command's transaction over argv[first], argv[first + step],
 * ..., up to argv[last] (last < 0: counted from the end). */
static int tx_keys(struct conn *c, size_t argc, struct kv_slice *argv, size_t first, long last,
                   size_t step, int write, kv_txn **t)
{
    size_t end = last < 0 ? argc - (size_t)-last : (size_t)last;
    struct kv_slice one[1], *keys = one;
    size_t n = 0;
    if (step == 1) {
        keys = &argv[first];
        n = end - first + 1;
    } else {
        if (!(keys = malloc(sizeof *keys * (argc / step + 1))))
            return TXN_E_NOMEM;
        for (size_t i = first; i <= end; i += step)
            keys[n++] = argv[i];
    }
    int rc = cmd_tx_begin(c, n, keys, write, t);
    if (keys != one && keys != &argv[first])
        free(keys);
    return rc;
}

void tx_done(struct conn *c, kv_txn *t, int rc, size_t mark)
{
    rc = cmd_tx_end(c, t, rc);
    if (rc < 0) {
        c->out.len = mark;
        reply_store_error(&c->out, rc);
    }
}

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

void cmd_get(struct conn *c, size_t argc, struct kv_slice *argv)
{
    kv_txn *t;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    rc = kv_txn_get(t, argv[1], bulk_cb, &c->out);
    tx_done(c, t, rc, mark);
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
    bulk_cb(r->b, r->type == KV_HASH ? NULL : v, n);
}

void cmd_mget(struct conn *c, size_t argc, struct kv_slice *argv)
{
    kv_txn *t;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, -1, 1, 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    reply_array(&c->out, argc - 1);
    struct string_reply r = {&c->out, KV_STRING};
    for (size_t i = 1; i < argc && rc >= 0; i++)
        rc = kv_txn_read(t, argv[i], string_cb, &r, &r.type);
    tx_done(c, t, rc, mark);
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
void cmd_set(struct conn *c, size_t argc, struct kv_slice *argv)
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
            return reply_error(&c->out, "ERR syntax error");
    }
    uint64_t at = keep ? KV_KEEPTTL : 0;
    if (ex && expiry_arg(c, &argv[ex], &argv[ex + 1], "set", &at))
        return;
    kv_txn *t;
    struct val old = {0};
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t), found = 0;
    if (rc)
        return reply_store_error(&c->out, rc);
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
    tx_done(c, t, rc, mark);
}

void cmd_setnx(struct conn *c, size_t argc, struct kv_slice *argv)
{
    kv_txn *t;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    if ((rc = kv_txn_get(t, argv[1], NULL, NULL)) == 0 && !(rc = kv_txn_put(t, argv[1], argv[2], 0)))
        reply_int(&c->out, 1);
    else if (rc > 0)
        reply_int(&c->out, 0);
    tx_done(c, t, rc, mark);
}

/* GETSET key value; GETDEL key */
void cmd_getset(struct conn *c, size_t argc, struct kv_slice *argv)
{
    kv_txn *t;
    struct val old;
    size_t mark = c->out.len;
    int del = arg_is(&argv[0], "GETDEL");
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t), found;
    if (rc)
        return reply_store_error(&c->out, rc);
    if ((found = rc = get_val(t, argv[1], &old)) >= 0) {
        rc = del ? (found ? kv_txn_del(t, argv[1]) : 0) : kv_txn_put(t, argv[1], argv[2], 0);
        if (rc >= 0)
            reply_val(&c->out, found, &old);
    }
    free(old.p);
    tx_done(c, t, rc, mark);
}

/* MSET key value [key value ...]; MSETNX: none set if any key exists */
void cmd_mset(struct conn *c, size_t argc, struct kv_slice *argv)
{
    int nx = arg_is(&argv[0], "MSETNX");
    if (argc % 2 == 0)
        return reply_error(&c->out, "ERR wrong number of arguments for '%s' command",
                           nx ? "msetnx" : "mset");
    kv_txn *t;
    size_t mark = c->out.len;
    if (!c->exec)
        kv_reserve(srv.kv, argc / 2);
    int rc = tx_keys(c, argc, argv, 1, -2, 2, 1, &t), any = 0;
    if (rc)
        return reply_store_error(&c->out, rc);
    for (size_t i = 1; nx && i < argc && !rc; i += 2)
        if ((rc = kv_txn_get(t, argv[i], NULL, NULL)) > 0)
            any = 1, rc = 0;
    for (size_t i = 1; !any && i < argc && !rc; i += 2)
        rc = kv_txn_put(t, argv[i], argv[i + 1], 0);
    if (!rc)
        nx ? reply_int(&c->out, !any) : reply_simple(&c->out, "OK");
    tx_done(c, t, rc, mark);
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
static void splice(struct conn *c, size_t argc, struct kv_slice *argv, uint64_t off,
                   struct kv_slice src)
{
    kv_txn *t;
    uint64_t len = 0;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    if ((rc = kv_txn_splice(t, argv[1], off, src, MAX_STRING, &len)) == KV_E_TOOBIG) {
        reply_error(&c->out, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
        rc = 0;
    } else if (rc >= 0) {
        reply_int(&c->out, (long long)len);
    }
    tx_done(c, t, rc, mark);
}

void cmd_append(struct conn *c, size_t argc, struct kv_slice *argv)
{
    splice(c, argc, argv, KV_SPLICE_END, argv[2]);
}

void cmd_setrange(struct conn *c, size_t argc, struct kv_slice *argv)
{
    long long off;
    if (parse_ll(&argv[2], &off))
        return reply_error(&c->out, "ERR value is not an integer or out of range");
    if (off < 0)
        return reply_error(&c->out, "ERR offset is out of range");
    splice(c, argc, argv, (uint64_t)off, argv[3]);
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

void cmd_setbit(struct conn *c, size_t argc, struct kv_slice *argv)
{
    unsigned long long bit;
    if (parse_bit_offset(&argv[2], &bit))
        return reply_error(&c->out, "ERR bit offset is not an integer or out of range");
    if (argv[3].n != 1 || (argv[3].p[0] != '0' && argv[3].p[0] != '1'))
        return reply_error(&c->out, "ERR bit is not an integer or out of range");
    kv_txn *t;
    struct val old;
    size_t mark = c->out.len, len = 0, byte = (size_t)(bit >> 3);
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
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
    tx_done(c, t, rc, mark);
}

/* ---- reading a part: STRLEN, GETRANGE, GETBIT, BITCOUNT */

/* These read only the bytes they need (kv_txn_getrange): a string in
 * pieces is not gathered. */
void cmd_strlen(struct conn *c, size_t argc, struct kv_slice *argv)
{
    kv_txn *t;
    uint64_t len;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    if ((rc = kv_txn_getrange(t, argv[1], 0, 0, NULL, NULL, &len)) >= 0)
        reply_int(&c->out, (long long)len);
    tx_done(c, t, rc, mark);
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

void cmd_getrange(struct conn *c, size_t argc, struct kv_slice *argv)
{
    long long start, end;
    if (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end))
        return reply_error(&c->out, "ERR value is not an integer or out of range");
    kv_txn *t;
    uint64_t len;
    size_t mark = c->out.len, lo, hi;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    /* the length first: the range counts from the end */
    if ((rc = kv_txn_getrange(t, argv[1], 0, 0, NULL, NULL, &len)) > 0 &&
        clamp_range(start, end, (size_t)len, &lo, &hi))
        rc = kv_txn_getrange(t, argv[1], lo, hi - lo + 1, bulk_cb, &c->out, &len);
    else if (rc >= 0)
        reply_bulk(&c->out, "", 0);
    tx_done(c, t, rc, mark);
}

void cmd_getbit(struct conn *c, size_t argc, struct kv_slice *argv)
{
    unsigned long long bit;
    if (parse_bit_offset(&argv[2], &bit))
        return reply_error(&c->out, "ERR bit offset is not an integer or out of range");
    kv_txn *t;
    struct val x;
    uint64_t len;
    size_t mark = c->out.len, byte = (size_t)(bit >> 3);
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    memset(&x, 0, sizeof x);
    if ((rc = kv_txn_getrange(t, argv[1], byte, 1, val_cb, &x, &len)) > 0 && x.oom)
        rc = TXN_E_NOMEM;
    if (rc >= 0)
        reply_int(&c->out, rc && x.n == 1 && ((unsigned char)x.p[0] & (0x80u >> (bit & 7))));
    free(x.p);
    tx_done(c, t, rc, mark);
}

/* BITCOUNT key [start end [BYTE | BIT]] */
void cmd_bitcount(struct conn *c, size_t argc, struct kv_slice *argv)
{
    long long start = 0, end = -1;
    int bits = 0;
    if (argc == 3 || argc > 5)
        return reply_error(&c->out, "ERR syntax error");
    if (argc >= 4 && (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end)))
        return reply_error(&c->out, "ERR value is not an integer or out of range");
    if (argc == 5) {
        if (arg_is(&argv[4], "BIT"))
            bits = 1;
        else if (!arg_is(&argv[4], "BYTE"))
            return reply_error(&c->out, "ERR syntax error");
    }
    kv_txn *t;
    struct val x;
    size_t mark = c->out.len, lo, hi;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    if ((rc = get_val(t, argv[1], &x)) >= 0) {
        long long n = 0;
        if (rc && clamp_range(start, end, bits ? x.n * 8 : x.n, &lo, &hi))
            for (size_t i = lo; i <= hi; i++)
                n += bits ? ((unsigned char)x.p[i >> 3] >> (7 - (i & 7))) & 1
                          : __builtin_popcount((unsigned char)x.p[i]);
        reply_int(&c->out, n);
    }
    free(x.p);
    tx_done(c, t, rc, mark);
}

/* ---- numbers */

/* Redis's integer syntax of a stored value (string2ll) */
static int value_ll(const struct val *x, long long *out)
{
    return parse_ll(&(struct kv_slice){x->p, x->n}, out);
}

static void incr_by(struct conn *c, size_t argc, struct kv_slice *argv, long long by)
{
    kv_txn *t;
    struct val x;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t), found;
    if (rc)
        return reply_store_error(&c->out, rc);
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
    tx_done(c, t, rc, mark);
}

void cmd_incr(struct conn *c, size_t argc, struct kv_slice *argv)
{
    incr_by(c, argc, argv, arg_is(&argv[0], "DECR") ? -1 : 1);
}

void cmd_incrby(struct conn *c, size_t argc, struct kv_slice *argv)
{
    long long by;
    if (parse_ll(&argv[2], &by))
        return reply_error(&c->out, "ERR value is not an integer or out of range");
    if (arg_is(&argv[0], "DECRBY")) {
        if (by == LLONG_MIN)
            return reply_error(&c->out, "ERR decrement would overflow");
        by = -by;
    }
    incr_by(c, argc, argv, by);
}

int parse_ld(const char *p, size_t n, long double *out)
{
    char s[5120];
    if (n == 0 || n >= sizeof s || isspace((unsigned char)p[0]))
        return -1;
    memcpy(s, p, n);
    s[n] = 0;
    char *end;
    errno = 0;
    long double v = strtold(s, &end);
    if (*end || errno == ERANGE || isnan(v))
        return -1;
    *out = v;
    return 0;
}

int format_ld(long double v, char *buf)
{
    /* Redis's human-friendly form: 17 digits after the point, trailing
     * zeros and the point dropped */
    int n = snprintf(buf, LD_CHARS, "%.17Lf", v);
    if (strchr(buf, '.')) {
        while (n > 0 && buf[n - 1] == '0')
            n--;
        if (n > 0 && buf[n - 1] == '.')
            n--;
    }
    if (n == 2 && !memcmp(buf, "-0", 2))
        buf[0] = '0', n = 1;
    buf[n] = 0;
    return n;
}

void cmd_incrbyfloat(struct conn *c, size_t argc, struct kv_slice *argv)
{
    long double by, cur = 0;
    if (parse_ld(argv[2].p, argv[2].n, &by))
        return reply_error(&c->out, "ERR value is not a valid float");
    kv_txn *t;
    struct val x;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t), found;
    if (rc)
        return reply_store_error(&c->out, rc);
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
    tx_done(c, t, rc, mark);
}

/* ---- keys: DEL, UNLINK, EXISTS, TOUCH */

/* DEL and UNLINK delete, EXISTS and TOUCH look: each answers how many of
 * its keys it found (a key named twice counts twice, as in Redis). */
static void count_keys(struct conn *c, size_t argc, struct kv_slice *argv, int del)
{
    kv_txn *t;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, -1, 1, del, &t);
    long long n = 0;
    if (rc)
        return reply_store_error(&c->out, rc);
    for (size_t i = 1; i < argc && rc >= 0; i++)
        if ((rc = del ? kv_txn_del(t, argv[i]) : kv_txn_get(t, argv[i], NULL, NULL)) > 0)
            n++;
    if (rc >= 0)
        reply_int(&c->out, n);
    tx_done(c, t, rc, mark);
}

void cmd_del(struct conn *c, size_t argc, struct kv_slice *argv)
{
    count_keys(c, argc, argv, 1);
}

void cmd_exists(struct conn *c, size_t argc, struct kv_slice *argv)
{
    count_keys(c, argc, argv, 0);
}

const char *type_name(unsigned type)
{
    return type == KV_HASH ? "hash" : "string"; /* an item is a string */
}

void cmd_type(struct conn *c, size_t argc, struct kv_slice *argv)
{
    kv_txn *t;
    unsigned type;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    if ((rc = kv_txn_read(t, argv[1], NULL, NULL, &type)) >= 0)
        reply_simple(&c->out, rc ? type_name(type) : "none");
    tx_done(c, t, rc, mark);
}

int get_any(kv_txn *t, struct kv_slice k, struct val *x, unsigned *type)
{
    memset(x, 0, sizeof *x);
    int rc = kv_txn_read(t, k, val_cb, x, type);
    if (rc > 0 && x->oom)
        rc = TXN_E_NOMEM;
    return rc;
}

/* RENAME src dst; RENAMENX: only when dst does not exist */
void cmd_rename(struct conn *c, size_t argc, struct kv_slice *argv)
{
    int nx = arg_is(&argv[0], "RENAMENX");
    int same = argv[1].n == argv[2].n && !memcmp(argv[1].p, argv[2].p, argv[1].n);
    kv_txn *t;
    struct val x;
    uint64_t at = 0;
    unsigned type = KV_STRING;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 2, 1, 1, &t), found;
    if (rc)
        return reply_store_error(&c->out, rc);
    if ((found = rc = get_any(t, argv[1], &x, &type)) >= 0) {
        rc = 0;
        if (!found) {
            reply_error(&c->out, "ERR no such key");
        } else if (same) {
            nx ? reply_int(&c->out, 0) : reply_simple(&c->out, "OK");
        } else if (nx && (rc = kv_txn_get(t, argv[2], NULL, NULL)) != 0) {
            if (rc > 0)
                reply_int(&c->out, 0), rc = 0;
        } else if ((rc = kv_txn_ttl(t, argv[1], &at)) >= 0 &&
                   (rc = kv_txn_write(t, argv[2], (struct kv_slice){x.p, x.n}, at, type)) >= 0 &&
                   (rc = kv_txn_del(t, argv[1])) >= 0) {
            rc = 0;
            nx ? reply_int(&c->out, 1) : reply_simple(&c->out, "OK");
        }
    }
    free(x.p);
    tx_done(c, t, rc, mark);
}

/* COPY src dst [DB 0] [REPLACE] */
void cmd_copy(struct conn *c, size_t argc, struct kv_slice *argv)
{
    int replace = 0;
    for (size_t i = 3; i < argc; i++) {
        long long db;
        if (arg_is(&argv[i], "REPLACE")) {
            replace = 1;
        } else if (arg_is(&argv[i], "DB") && i + 1 < argc) {
            if (parse_ll(&argv[++i], &db))
                return reply_error(&c->out, "ERR value is not an integer or out of range");
            if (db != 0)
                return reply_error(&c->out, "ERR DB index is out of range");
        } else {
            return reply_error(&c->out, "ERR syntax error");
        }
    }
    if (argv[1].n == argv[2].n && !memcmp(argv[1].p, argv[2].p, argv[1].n))
        return reply_error(&c->out, "ERR source and destination objects are the same");
    kv_txn *t;
    struct val x;
    uint64_t at = 0;
    unsigned type = KV_STRING;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 2, 1, 1, &t), found;
    if (rc)
        return reply_store_error(&c->out, rc);
    if ((found = rc = get_any(t, argv[1], &x, &type)) >= 0) {
        rc = 0;
        int there = found && !replace ? kv_txn_get(t, argv[2], NULL, NULL) : 0;
        if (there < 0)
            rc = there;
        else if (!found || there)
            reply_int(&c->out, 0);
        else if ((rc = kv_txn_ttl(t, argv[1], &at)) >= 0 &&
                 !(rc = kv_txn_write(t, argv[2], (struct kv_slice){x.p, x.n}, at, type)))
            reply_int(&c->out, 1);
    }
    free(x.p);
    tx_done(c, t, rc, mark);
}

/* OBJECT ENCODING key: strings are kept as the bytes given ("raw"), a
 * hash as one packed record of its fields (hashes.c: as Redis's
 * "listpack") */
void cmd_object(struct conn *c, size_t argc, struct kv_slice *argv)
{
    if (!arg_is(&argv[1], "ENCODING"))
        return reply_error(&c->out, "ERR unknown subcommand '%.*s'. Try OBJECT HELP.",
                           (int)(argv[1].n > 64 ? 64 : argv[1].n), argv[1].p);
    if (argc != 3)
        return reply_error(&c->out, "ERR wrong number of arguments for 'object|encoding' "
                                    "command");
    kv_txn *t;
    size_t mark = c->out.len;
    int rc = cmd_tx_begin(c, 1, &argv[2], 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    unsigned type;
    if ((rc = kv_txn_read(t, argv[2], NULL, NULL, &type)) > 0)
        type == KV_HASH ? reply_bulk(&c->out, "listpack", 8) : reply_bulk(&c->out, "raw", 3);
    else if (!rc)
        reply_nil(&c->out);
    tx_done(c, t, rc, mark);
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

void cmd_randomkey(struct conn *c, size_t argc, struct kv_slice *argv)
{
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
}

/* ---- expiry: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT [NX | XX | GT | LT],
 * TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST, SETEX, PSETEX, GETEX */

void cmd_expire(struct conn *c, size_t argc, struct kv_slice *argv)
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
                               (int)(argv[i].n > 64 ? 64 : argv[i].n), argv[i].p);
    }
    if (nx && (xx || gt || lt))
        return reply_error(&c->out, "ERR NX and XX, GT or LT options at the same time are "
                                    "not compatible");
    if (gt && lt)
        return reply_error(&c->out, "ERR GT and LT options at the same time are not "
                                    "compatible");
    long long n;
    if (parse_ll(&argv[2], &n))
        return reply_error(&c->out, "ERR value is not an integer or out of range");
    long long base = abs ? 0 : (long long)now_ms(), at;
    if ((!ms && (n > LLONG_MAX / 1000 || n < LLONG_MIN / 1000)) ||
        __builtin_add_overflow(ms ? n : n * 1000, base, &at)) {
        char lower[16];
        size_t k = argv[0].n < sizeof lower - 1 ? argv[0].n : sizeof lower - 1;
        for (size_t i = 0; i < k; i++)
            lower[i] = (char)(argv[0].p[i] | 0x20);
        lower[k] = 0;
        return reply_error(&c->out, "ERR invalid expire time in '%s' command", lower);
    }
    kv_txn *t;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
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
    tx_done(c, t, rc, mark);
}

/* TTL, PTTL (time left), EXPIRETIME, PEXPIRETIME (the time): -2 missing,
 * -1 no expiry */
void cmd_ttl(struct conn *c, size_t argc, struct kv_slice *argv)
{
    int ms = argv[0].p[0] == 'p' || argv[0].p[0] == 'P';
    int abs = argv[0].n > 4; /* EXPIRETIME, PEXPIRETIME */
    kv_txn *t;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 0, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
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
    tx_done(c, t, rc, mark);
}

void cmd_persist(struct conn *c, size_t argc, struct kv_slice *argv)
{
    kv_txn *t;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    uint64_t at;
    if ((rc = kv_txn_ttl(t, argv[1], &at)) > 0)
        rc = at ? kv_txn_expire(t, argv[1], 0) : 0;
    if (rc >= 0)
        reply_int(&c->out, rc > 0);
    tx_done(c, t, rc, mark);
}

/* SETEX key seconds value; PSETEX key ms value */
void cmd_setex(struct conn *c, size_t argc, struct kv_slice *argv)
{
    int ms = arg_is(&argv[0], "PSETEX");
    uint64_t at;
    if (expiry_arg(c, &(struct kv_slice){ms ? "PX" : "EX", 2}, &argv[2],
                   ms ? "psetex" : "setex", &at))
        return;
    kv_txn *t;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, 1, &t);
    if (rc)
        return reply_store_error(&c->out, rc);
    if (!(rc = kv_txn_put(t, argv[1], argv[3], at)))
        reply_simple(&c->out, "OK");
    tx_done(c, t, rc, mark);
}

/* GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST] */
void cmd_getex(struct conn *c, size_t argc, struct kv_slice *argv)
{
    uint64_t at = KV_KEEPTTL;
    if (argc > 2) {
        if (argc == 3 && arg_is(&argv[2], "PERSIST"))
            at = 0;
        else if (argc == 4 && (arg_is(&argv[2], "EX") || arg_is(&argv[2], "PX") ||
                               arg_is(&argv[2], "EXAT") || arg_is(&argv[2], "PXAT"))) {
            if (expiry_arg(c, &argv[2], &argv[3], "getex", &at))
                return;
        } else
            return reply_error(&c->out, "ERR syntax error");
    }
    kv_txn *t;
    struct val x;
    size_t mark = c->out.len;
    int rc = tx_keys(c, argc, argv, 1, 1, 1, at != KV_KEEPTTL, &t), found;
    if (rc)
        return reply_store_error(&c->out, rc);
    if ((found = rc = get_val(t, argv[1], &x)) > 0 && at != KV_KEEPTTL) {
        uint64_t cur;
        if ((rc = kv_txn_ttl(t, argv[1], &cur)) > 0 && (at || cur))
            rc = kv_txn_expire(t, argv[1], at);
    }
    if (rc >= 0)
        reply_val(&c->out, found, &x);
    free(x.p);
    tx_done(c, t, rc, mark);
}
