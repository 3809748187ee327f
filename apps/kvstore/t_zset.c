/* t_zset.c - the sorted set commands (ZADD ... ZSCAN): Redis 7.0's
 * replies and error texts, each in one store transaction (its own or
 * EXEC's). The blocking BZPOPMIN, BZPOPMAX and BZMPOP (block.h) are at
 * the end, written against ZPOPMIN's and ZMPOP's replies only.
 *
 * A sorted set is one value of type KV_ZSET, packed or, past
 * zset-max-listpack-entries members or with a member longer than
 * zset-max-listpack-value bytes, in its large form (zbtree.c: B-trees in
 * the value, O(log n) per member), as Redis's skiplist; it stays so until
 * it is deleted. The changes of members (ZADD, ZINCRBY, ZREM, the pops,
 * ZREMRANGEBY*) and the conversion are zset.c's, which the crash
 * simulator's workload calls too. The lookups, the ranges (ZRANGE in all
 * its forms, ZCOUNT, ZLEXCOUNT), ZRANDMEMBER and ZSCAN work on the large
 * form in place, by rank; the other commands read it whole as the packed
 * record and write back the large form (docs/kvstore.md, sections 24, 27
 * and 30). */
#include <assert.h>
#include <stdatomic.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "block.h"
#include "config.h"
#include "t_pack.h"
#include "t_zset.h"
#include "zset.h"

/* ---- scores as Redis reads and writes them */

/* Copy a into a NUL-terminated string for strtod: buf if it fits, else
 * malloc'd (*heap, to free). NULL: out of memory. */
static char *cstr(const struct kv_slice *a, char *buf, size_t size, char **heap)
{
    char *s = buf;
    *heap = NULL;
    if (a->n >= size && !(s = *heap = malloc(a->n + 1)))
        return NULL;
    memcpy(s, a->p, a->n);
    s[a->n] = 0;
    return s;
}

/* A score argument as Redis's getDoubleFromObject reads it: strtod over
 * every byte, no leading space, no overflow, not NaN. 0, or -1. */
static int parse_score(const struct kv_slice *a, double *out)
{
    char buf[128], *heap, *end;
    char *s = cstr(a, buf, sizeof buf, &heap);
    if (!s || !a->n || isspace((unsigned char)s[0])) {
        free(heap);
        return -1;
    }
    errno = 0;
    double v = strtod(s, &end);
    int bad = (size_t)(end - s) != a->n || isnan(v) ||
              (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || v == 0));
    free(heap);
    if (bad)
        return -1;
    *out = v;
    return 0;
}

/* A range bound ("(1", "-inf", "2"): as zslParseRange reads it, strtod
 * without the checks of a score. 0, or -1. */
static int parse_bound(const struct kv_slice *a, double *out, int *ex)
{
    struct kv_slice b = *a;
    *ex = b.n && b.p[0] == '(';
    if (*ex)
        b.p++, b.n--;
    char buf[128], *heap, *end;
    char *s = cstr(&b, buf, sizeof buf, &heap);
    if (!s)
        return -1;
    double v = strtod(s, &end);
    int bad = (size_t)(end - s) != b.n || isnan(v);
    free(heap);
    if (bad)
        return -1;
    *out = v;
    return 0;
}

/* Redis's addReplyDouble in RESP2: "inf", "-inf", else "%.17g" */
#define SCORE_CHARS 32
static int fmt_score(double d, char *buf)
{
    if (isinf(d))
        return (int)strlen(strcpy(buf, d > 0 ? "inf" : "-inf"));
    return snprintf(buf, SCORE_CHARS, "%.17g", d);
}

/* ... and as its listpack keeps a score (d2string), which ZSCAN replies:
 * an integer's digits when it is one within +-2^62, else the above */
static int fmt_stored(double d, char *buf)
{
    if (!isinf(d) && d >= (double)(-LLONG_MAX / 2) && d <= (double)(LLONG_MAX / 2) &&
        d == (double)(long long)d)
        return snprintf(buf, SCORE_CHARS, "%lld", (long long)d);
    return fmt_score(d, buf);
}

static void reply_score(struct buf *b, double d)
{
    char buf[SCORE_CHARS];
    int n = fmt_score(d, buf);
    reply_bulk(b, buf, (size_t)n);
}

static void reply_ent(struct buf *b, const struct zent *x, int scores)
{
    reply_bulk(b, x->m.p, x->m.n);
    if (scores)
        reply_score(b, x->s);
}


static int parse_score_range(const struct kv_slice *lo, const struct kv_slice *hi,
                             struct zset_range *r)
{
    memset(r, 0, sizeof *r);
    return parse_bound(lo, &r->min, &r->minex) || parse_bound(hi, &r->max, &r->maxex) ? -1 : 0;
}

static int parse_lex_item(const struct kv_slice *a, int *kind, struct kv_slice *s, int *ex)
{
    if (!a->n)
        return -1;
    *s = (struct kv_slice){a->p + 1, a->n - 1};
    *kind = LEX_STR;
    switch (a->p[0]) {
    case '+':
    case '-':
        if (a->n != 1)
            return -1;
        *kind = a->p[0] == '+' ? LEX_PLUS : LEX_MINUS;
        *ex = 1;
        return 0;
    case '(':
        *ex = 1;
        return 0;
    case '[':
        *ex = 0;
        return 0;
    default:
        return -1;
    }
}

static int parse_lex_range(const struct kv_slice *lo, const struct kv_slice *hi,
                           struct zset_range *r)
{
    memset(r, 0, sizeof *r);
    r->lex = 1;
    return parse_lex_item(lo, &r->lmin, &r->smin, &r->minex) ||
                   parse_lex_item(hi, &r->lmax, &r->smax, &r->maxex)
               ? -1
               : 0;
}

/* ---- commands */

#define ERR_SYNTAX "ERR syntax error"
#define ERR_INT "ERR value is not an integer or out of range"
#define ERR_FLOAT "ERR value is not a valid float"
#define ERR_RANGE "ERR min or max is not a float"
#define ERR_LEX "ERR min or max not valid string range item"

/* The thresholds of the packed form, read once a command */
static struct zset_max zmax(void)
{
    return (struct zset_max){atomic_load(&cfg.zset_max_listpack_entries),
                             atomic_load(&cfg.zset_max_listpack_value)};
}

/* ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ...; ZINCRBY key
 * increment member */
static int cmd_zadd(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int fl = 0;
    size_t i = 2;
    if (arg_is(&argv[0], "zincrby")) {
        fl = Z_INCR;
    } else {
        static const struct {
            const char *w;
            int f;
        } opts[] = {{"nx", Z_NX}, {"xx", Z_XX}, {"gt", Z_GT}, {"lt", Z_LT}, {"ch", Z_CH},
                    {"incr", Z_INCR}};
        for (int hit = 1; hit && i < argc;) {
            hit = 0;
            for (size_t k = 0; k < sizeof opts / sizeof *opts && !hit; k++)
                if (arg_is(&argv[i], opts[k].w))
                    fl |= opts[k].f, hit = 1, i++;
        }
    }
    size_t elements = argc - i;
    if (elements % 2 || !elements)
        return reply_error(&c->out, ERR_SYNTAX), 0;
    elements /= 2;
    if ((fl & Z_NX) && (fl & Z_XX))
        return reply_error(&c->out, "ERR XX and NX options at the same time are not "
                                    "compatible"), 0;
    if (((fl & Z_GT) && (fl & Z_NX)) || ((fl & Z_LT) && (fl & Z_NX)) ||
        ((fl & Z_GT) && (fl & Z_LT)))
        return reply_error(&c->out, "ERR GT, LT, and/or NX options at the same time are not "
                                    "compatible"), 0;
    if ((fl & Z_INCR) && elements > 1)
        return reply_error(&c->out, "ERR INCR option supports a single increment-element "
                                    "pair"), 0;
    struct zent *e = malloc(elements * sizeof *e);
    if (!e)
        return TXN_E_NOMEM;
    for (size_t k = 0; k < elements; k++) {
        e[k].m = argv[i + 2 * k + 1];
        if (parse_score(&argv[i + 2 * k], &e[k].s)) {
            free(e);
            return reply_error(&c->out, ERR_FLOAT), 0;
        }
    }
    struct zset_added o;
    int rc = zset_add(t, argv[1], zmax(), fl, e, elements, &o);
    if (rc >= 0) {
        if (o.nan)
            reply_error(&c->out, "ERR resulting score is not a number (NaN)");
        else if (!(fl & Z_INCR))
            reply_int(&c->out, (fl & Z_CH) ? o.added + o.changed : o.added);
        else if (o.processed)
            reply_score(&c->out, o.score);
        else
            reply_nil(&c->out);
    }
    free(e);
    return rc;
}

/* ZREM key member ... */
static int cmd_zrem(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    uint64_t n;
    int rc = zset_rem(t, argv[1], zmax(), &argv[2], argc - 2, &n);
    if (!rc)
        reply_int(&c->out, (long long)n);
    return rc;
}

/* ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK: lookups */
static int zlookup_big(struct conn *c, zb *b, size_t argc, struct kv_slice *argv)
{
    double s;
    uint64_t rank;
    int rc = 0;
    if (arg_is(&argv[0], "zcard")) {
        reply_int(&c->out, (long long)zb_card(b));
    } else if (arg_is(&argv[0], "zmscore")) {
        reply_array(&c->out, argc - 2);
        for (size_t i = 2; i < argc && rc >= 0; i++)
            if ((rc = zb_score(b, argv[i], &s)) >= 0)
                rc ? reply_score(&c->out, s) : reply_nil(&c->out);
    } else if (arg_is(&argv[0], "zscore")) {
        if ((rc = zb_score(b, argv[2], &s)) >= 0)
            rc ? reply_score(&c->out, s) : reply_nil(&c->out);
    } else if ((rc = zb_rank(b, argv[2], &s, &rank)) == 0) {
        reply_nil(&c->out);
    } else if (rc > 0) {
        reply_int(&c->out, (long long)(arg_is(&argv[0], "zrank") ? rank
                                                                 : zb_card(b) - 1 - rank));
    }
    return rc < 0 ? rc : 0;
}

static int cmd_zlookup(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    struct zset z;
    zb *b;
    int rc = zb_open(t, argv[1], &b);
    if (rc > 0)
        return zb_close(b, zlookup_big(c, b, argc, argv));
    if (!rc)
        rc = zset_load(t, argv[1], &z);
    if (rc < 0)
        return rc;
    if (arg_is(&argv[0], "zcard")) {
        reply_int(&c->out, (long long)z.n);
    } else if (arg_is(&argv[0], "zmscore")) {
        reply_array(&c->out, argc - 2);
        for (size_t i = 2; i < argc; i++) {
            ssize_t k = zset_find(&z, argv[i]);
            k < 0 ? reply_nil(&c->out) : reply_score(&c->out, z.e[k].s);
        }
    } else {
        ssize_t k = zset_find(&z, argv[2]);
        if (k < 0)
            reply_nil(&c->out);
        else if (arg_is(&argv[0], "zscore"))
            reply_score(&c->out, z.e[k].s);
        else if (arg_is(&argv[0], "zrank"))
            reply_int(&c->out, (long long)k);
        else
            reply_int(&c->out, (long long)(z.n - 1 - (size_t)k));
    }
    zset_free(&z);
    return 0;
}

/* ZCOUNT key min max; ZLEXCOUNT key min max */
static int cmd_zcount(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    struct zset_range r;
    if (arg_is(&argv[0], "zlexcount") ? parse_lex_range(&argv[2], &argv[3], &r)
                                      : parse_score_range(&argv[2], &argv[3], &r))
        return reply_error(&c->out, "%s", r.lex ? ERR_LEX : ERR_RANGE), 0;
    struct zset z;
    size_t from, to;
    zb *b;
    int rc = zb_open(t, argv[1], &b);
    if (rc > 0) {
        uint64_t bf, bt;
        if (!(rc = zset_big_span(b, &r, &bf, &bt)))
            reply_int(&c->out, (long long)(bt - bf));
        return zb_close(b, rc);
    }
    if (rc < 0 || (rc = zset_load(t, argv[1], &z)) < 0)
        return rc;
    zset_run_in(&z, &r, &from, &to);
    reply_int(&c->out, (long long)(to - from));
    zset_free(&z);
    return 0;
}

static int pick_add(struct zset_pick *p, const struct zent *x, size_t cap)
{
    if (!p->e && !(p->e = malloc((cap ? cap : 1) * sizeof *p->e)))
        return TXN_E_NOMEM;
    p->e[p->n++] = *x;
    return 0;
}

/* Write picked members to dst as a new sorted set (no expiry, whatever
 * dst held; deleted if empty), as Redis's ZRANGESTORE and ZUNIONSTORE
 * replace their destination; the reply is its size. */
static int store_picked(struct conn *c, kv_txn *t, struct kv_slice dst, struct zent *e, size_t n)
{
    int rc = zset_replace(t, dst, e, n, zmax());
    if (!rc)
        reply_int(&c->out, (long long)n);
    return rc;
}

enum { BY_AUTO, BY_RANK, BY_SCORE, BY_LEX };
enum { DIR_AUTO, DIR_FWD, DIR_REV };

/* ZRANGE and its older forms, ZRANGESTORE: Redis's zrangeGenericCommand.
 * The arguments from argv[at] on: src min max [options] */
static int zrange(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv, size_t at,
                  int store_to, int by, int dir)
{
    long long offset = 0, limit = -1, start = 0, end = 0;
    int withscores = 0, has_limit = 0;
    for (size_t j = at + 3; j < argc; j++) {
        size_t left = argc - j - 1;
        if (!store_to && arg_is(&argv[j], "withscores")) {
            withscores = 1;
        } else if (arg_is(&argv[j], "limit") && left >= 2) {
            if (parse_ll(&argv[j + 1], &offset) || parse_ll(&argv[j + 2], &limit))
                return reply_error(&c->out, ERR_INT), 0;
            has_limit = 1;
            j += 2;
        } else if (dir == DIR_AUTO && arg_is(&argv[j], "rev")) {
            dir = DIR_REV;
        } else if (by == BY_AUTO && arg_is(&argv[j], "bylex")) {
            by = BY_LEX;
        } else if (by == BY_AUTO && arg_is(&argv[j], "byscore")) {
            by = BY_SCORE;
        } else {
            return reply_error(&c->out, ERR_SYNTAX), 0;
        }
    }
    dir = dir == DIR_AUTO ? DIR_FWD : dir;
    by = by == BY_AUTO ? BY_RANK : by;
    (void)has_limit;
    if (limit != -1 && by == BY_RANK)
        return reply_error(&c->out, "ERR syntax error, LIMIT is only supported in combination "
                                    "with either BYSCORE or BYLEX"), 0;
    if (withscores && by == BY_LEX)
        return reply_error(&c->out, "ERR syntax error, WITHSCORES not supported in "
                                    "combination with BYLEX"), 0;
    int rev = dir == DIR_REV;
    struct kv_slice *lo = &argv[at + 1], *hi = &argv[at + 2];
    if (rev && by != BY_RANK)
        lo = &argv[at + 2], hi = &argv[at + 1];
    struct zset_range r;
    if (by == BY_RANK && (parse_ll(lo, &start) || parse_ll(hi, &end)))
        return reply_error(&c->out, ERR_INT), 0;
    if (by == BY_SCORE && parse_score_range(lo, hi, &r))
        return reply_error(&c->out, ERR_RANGE), 0;
    if (by == BY_LEX && parse_lex_range(lo, hi, &r))
        return reply_error(&c->out, ERR_LEX), 0;

    struct zset z = {0};
    struct zset_pick p = {0};
    zb *b;
    int rc = zb_open(t, argv[at], &b);
    if (rc > 0) {
        /* the large form: the picked members are a run of ranks */
        uint64_t n = zb_card(b), from = 0, to = 0, first = 0, count = 0;
        size_t s, e;
        if (by == BY_RANK) {
            if (pack_span(start, end, (size_t)n, &s, &e))
                from = s, to = (uint64_t)e + 1;
            rc = 0;
        } else {
            rc = zset_big_span(b, &r, &from, &to);
            /* skip offset members (a negative one skips them all, as
             * Redis's), then take up to limit (negative: all) */
            if (offset < 0 || (uint64_t)offset >= to - from)
                to = from;
            else if (rev)
                to -= (uint64_t)offset;
            else
                from += (uint64_t)offset;
            if (limit >= 0 && (uint64_t)limit < to - from) {
                if (rev)
                    from = to - (uint64_t)limit;
                else
                    to = from + (uint64_t)limit;
            }
        }
        count = to - from;
        first = rev ? (by == BY_RANK ? n - 1 - from : to - 1) : from;
        if (!rc)
            rc = zset_big_pick(b, first, (size_t)count, rev ? -1 : 1, &p);
        rc = zb_close(b, rc);
    } else if (rc == 0 && (rc = zset_load(t, argv[at], &z)) >= 0) {
        rc = 0;
        size_t s, e;
        if (by == BY_RANK) {
            if (pack_span(start, end, z.n, &s, &e))
                for (size_t i = s; i <= e && !rc; i++)
                    rc = pick_add(&p, &z.e[rev ? z.n - 1 - i : i], e - s + 1);
        } else if (!(offset > 0 && (size_t)offset >= z.n)) {
            /* from the first member in range on (the last, reversed): skip
             * offset members (a negative offset skips them all, as in
             * Redis), then take up to limit (negative: all) while they are
             * in range */
            ssize_t k = rev ? zset_last_in(&z, &r) : zset_first_in(&z, &r);
            if (k >= 0 && offset < 0)
                k = -1;
            if (k >= 0)
                k += rev ? -(ssize_t)offset : (ssize_t)offset;
            for (; k >= 0 && (size_t)k < z.n && limit-- != 0 && !rc; k += rev ? -1 : 1) {
                if (rev ? !zset_gte_min(&r, &z.e[k]) : !zset_lte_max(&r, &z.e[k]))
                    break;
                rc = pick_add(&p, &z.e[k], z.n);
            }
        }
    }
    if (!rc && store_to) {
        rc = store_picked(c, t, argv[1], p.e, p.n);
    } else if (!rc) {
        reply_array(&c->out, p.n * (withscores ? 2 : 1));
        for (size_t i = 0; i < p.n; i++)
            reply_ent(&c->out, &p.e[i], withscores);
    }
    zset_pick_free(&p);
    zset_free(&z);
    return rc;
}

static int cmd_zrange(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int by = BY_AUTO, dir = DIR_AUTO;
    if (arg_is(&argv[0], "zrevrange"))
        by = BY_RANK, dir = DIR_REV;
    else if (arg_is(&argv[0], "zrangebyscore"))
        by = BY_SCORE, dir = DIR_FWD;
    else if (arg_is(&argv[0], "zrevrangebyscore"))
        by = BY_SCORE, dir = DIR_REV;
    else if (arg_is(&argv[0], "zrangebylex"))
        by = BY_LEX, dir = DIR_FWD;
    else if (arg_is(&argv[0], "zrevrangebylex"))
        by = BY_LEX, dir = DIR_REV;
    return zrange(c, t, argc, argv, 1, 0, by, dir);
}

static int cmd_zrangestore(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return zrange(c, t, argc, argv, 2, 1, BY_AUTO, DIR_AUTO);
}

/* ZREMRANGEBYRANK key start stop, ZREMRANGEBYSCORE key min max,
 * ZREMRANGEBYLEX key min max */
static int cmd_zremrange(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int by = arg_is(&argv[0], "zremrangebyrank") ? BY_RANK
             : arg_is(&argv[0], "zremrangebyscore") ? BY_SCORE : BY_LEX;
    long long start = 0, end = 0;
    struct zset_range r = {0};
    if (by == BY_RANK && (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end)))
        return reply_error(&c->out, ERR_INT), 0;
    if (by == BY_SCORE && parse_score_range(&argv[2], &argv[3], &r))
        return reply_error(&c->out, ERR_RANGE), 0;
    if (by == BY_LEX && parse_lex_range(&argv[2], &argv[3], &r))
        return reply_error(&c->out, ERR_LEX), 0;
    uint64_t n;
    int rc = zset_remrange(t, argv[1], zmax(), by == BY_RANK, start, end, &r, &n);
    if (!rc)
        reply_int(&c->out, (long long)n);
    return rc;
}

/* Pop up to count members of the first non-empty set of keys[0..n)
 * (min: the lowest scores), as Redis's genericZpopCommand: ZPOPMIN and
 * ZPOPMAX reply flat (member, score, ...), ZMPOP [key, [[member, score],
 * ...]] or a nil array. */
static int zpop(struct conn *c, kv_txn *t, const struct kv_slice *keys, size_t n, int max,
                long long count, int mpop)
{
    struct zset_popped x = {0};
    int rc = 0;
    size_t k = 0;
    for (; k < n && !rc; k++)
        if ((rc = zset_pop(t, keys[k], zmax(), max, count, &x)) == 0)
            zset_popped_free(&x);
    if (rc < 0 || !rc || count == 0) {
        zset_popped_free(&x);
        if (rc < 0)
            return rc;
        if (mpop)
            buf_add(&c->out, "*-1\r\n", 5); /* RESP2's nil array */
        else
            reply_array(&c->out, 0);
        return 0;
    }
    k--; /* the key popped from */
    if (mpop) {
        reply_array(&c->out, 2);
        reply_bulk(&c->out, keys[k].p, keys[k].n);
        reply_array(&c->out, x.n);
    } else {
        reply_array(&c->out, 2 * x.n);
    }
    for (size_t i = 0; i < x.n; i++) {
        if (mpop)
            reply_array(&c->out, 2);
        reply_ent(&c->out, &x.e[i], 1);
    }
    zset_popped_free(&x);
    return 0;
}

/* ZPOPMIN key [count], ZPOPMAX key [count] */
static int cmd_zpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long count = 1;
    if (argc > 3)
        return reply_error(&c->out, ERR_SYNTAX), 0;
    if (argc == 3 && (parse_ll(&argv[2], &count) || count < 0))
        return reply_error(&c->out, "ERR value is out of range, must be positive"), 0;
    return zpop(c, t, &argv[1], 1, arg_is(&argv[0], "zpopmax"), count, 0);
}

/* ZMPOP numkeys key ... MIN|MAX [COUNT count] */
static int cmd_zmpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long numkeys, count = -1;
    if (parse_ll(&argv[1], &numkeys) || numkeys < 1)
        return reply_error(&c->out, "ERR numkeys should be greater than 0"), 0;
    if ((unsigned long long)numkeys >= argc - 2)
        return reply_error(&c->out, ERR_SYNTAX), 0;
    size_t where = 2 + (size_t)numkeys;
    int max = arg_is(&argv[where], "max");
    if (!max && !arg_is(&argv[where], "min"))
        return reply_error(&c->out, ERR_SYNTAX), 0;
    for (size_t j = where + 1; j < argc; j++) {
        if (count == -1 && arg_is(&argv[j], "count") && j + 1 < argc) {
            j++;
            if (parse_ll(&argv[j], &count) || count < 1)
                return reply_error(&c->out, "ERR count should be greater than 0"), 0;
        } else {
            return reply_error(&c->out, ERR_SYNTAX), 0;
        }
    }
    return zpop(c, t, &argv[2], (size_t)numkeys, max, count == -1 ? 1 : count, 1);
}

/* ZUNION/ZINTER/ZDIFF numkeys key ... [WEIGHTS w ...] [AGGREGATE
 * SUM|MIN|MAX] [WITHSCORES], their STORE forms (destination first, no
 * WITHSCORES) and ZINTERCARD numkeys key ... [LIMIT n]: Redis's
 * zunionInterDiffGenericCommand. */
enum { OP_UNION, OP_INTER, OP_DIFF };
enum { AGG_SUM, AGG_MIN, AGG_MAX };

struct src {
    struct zset z;
    double w;
    struct zent *by_m; /* its members sorted by member, for lookups */
};

static int by_member(const void *a, const void *b)
{
    return zset_mcmp(((const struct zent *)a)->m, ((const struct zent *)b)->m);
}

static const struct zent *src_find(const struct src *s, struct kv_slice m)
{
    size_t lo = 0, hi = s->z.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = zset_mcmp(s->by_m[mid].m, m);
        if (!c)
            return &s->by_m[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void aggregate(double *target, double v, int agg)
{
    if (agg == AGG_SUM) {
        *target += v;
        if (isnan(*target))
            *target = 0; /* inf + -inf, as Redis */
    } else if (agg == AGG_MIN) {
        *target = v < *target ? v : *target;
    } else {
        *target = v > *target ? v : *target;
    }
}

/* sources by size, smallest first, as Redis sorts them (stable: equal
 * sizes keep the order of the keys) */
static int by_size(const void *a, const void *b)
{
    const struct src *x = a, *y = b;
    return x->z.n < y->z.n ? -1 : x->z.n > y->z.n ? 1 : x < y ? -1 : x > y;
}

/* A union's member from one source, and where it came from, to sort */
struct tagged {
    struct zent x;
    size_t seq;
};

static int by_member_seq(const void *a, const void *b)
{
    const struct tagged *x = a, *y = b;
    int c = zset_mcmp(x->x.m, y->x.m);
    return c ? c : x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int setop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv, int op,
                 int store_to, int card, const char *name)
{
    size_t nk_at = store_to ? 2 : 1;
    long long setnum, limit = 0;
    if (parse_ll(&argv[nk_at], &setnum))
        return reply_error(&c->out, ERR_INT), 0;
    if (setnum < 1)
        return reply_error(&c->out, "ERR at least 1 input key is needed for '%s' command",
                           name), 0;
    if ((unsigned long long)setnum > argc - (nk_at + 1))
        return reply_error(&c->out, ERR_SYNTAX), 0;
    size_t n = (size_t)setnum;
    struct src *src = calloc(n, sizeof *src);
    struct zent *res = NULL;
    size_t nres = 0;
    int rc = src ? 0 : TXN_E_NOMEM, withscores = 0, agg = AGG_SUM;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        src[i].w = 1;
        rc = zset_load(t, argv[nk_at + 1 + i], &src[i].z);
    }
    if (rc < 0)
        goto out;
    rc = 0;
    const char *bad = NULL;
    for (size_t j = nk_at + 1 + n; j < argc && !bad;) {
        size_t left = argc - j;
        if (op != OP_DIFF && !card && left >= n + 1 && arg_is(&argv[j], "weights")) {
            j++;
            for (size_t i = 0; i < n && !bad; i++, j++)
                if (parse_score(&argv[j], &src[i].w))
                    bad = "ERR weight value is not a float";
        } else if (op != OP_DIFF && !card && left >= 2 && arg_is(&argv[j], "aggregate")) {
            j++;
            if (arg_is(&argv[j], "sum"))
                agg = AGG_SUM;
            else if (arg_is(&argv[j], "min"))
                agg = AGG_MIN;
            else if (arg_is(&argv[j], "max"))
                agg = AGG_MAX;
            else
                bad = ERR_SYNTAX;
            j++;
        } else if (!store_to && !card && arg_is(&argv[j], "withscores")) {
            j++;
            withscores = 1;
        } else if (card && left >= 2 && arg_is(&argv[j], "limit")) {
            if (parse_ll(&argv[j + 1], &limit) || limit < 0)
                bad = "ERR LIMIT can't be negative";
            j += 2;
        } else {
            bad = ERR_SYNTAX;
        }
    }
    if (bad) {
        reply_error(&c->out, "%s", bad);
        goto out;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += src[i].z.n;
    if (!(res = malloc((total ? total : 1) * sizeof *res))) {
        rc = TXN_E_NOMEM;
        goto out;
    }
    if (op != OP_DIFF)
        qsort(src, n, sizeof *src, by_size);
    for (size_t i = 0; i < n && !rc; i++) {
        if (!(src[i].by_m = malloc((src[i].z.n ? src[i].z.n : 1) * sizeof *src[i].by_m))) {
            rc = TXN_E_NOMEM;
            break;
        }
        if (src[i].z.n) /* a missing key's e is NULL */
            memcpy(src[i].by_m, src[i].z.e, src[i].z.n * sizeof *src[i].by_m);
        qsort(src[i].by_m, src[i].z.n, sizeof *src[i].by_m, by_member);
    }
    if (rc)
        goto out;
    if (op == OP_INTER) {
        for (size_t k = 0; k < src[0].z.n && !(card && limit && (long long)nres >= limit); k++) {
            const struct zent *x = &src[0].z.e[k];
            double score = src[0].w * x->s;
            if (isnan(score))
                score = 0;
            size_t j = 1;
            for (; j < n; j++) {
                const struct zent *y = src_find(&src[j], x->m);
                if (!y)
                    break;
                aggregate(&score, y->s * src[j].w, agg);
            }
            if (j == n)
                res[nres++] = (struct zent){score, x->m};
        }
    } else if (op == OP_DIFF) {
        for (size_t k = 0; k < src[0].z.n; k++) {
            size_t j = 1;
            while (j < n && !src_find(&src[j], src[0].z.e[k].m))
                j++;
            if (j == n)
                res[nres++] = src[0].z.e[k];
        }
    } else {
        struct tagged *all = malloc((total ? total : 1) * sizeof *all);
        size_t m = 0;
        if (!all) {
            rc = TXN_E_NOMEM;
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < src[i].z.n; k++, m++) {
                double score = src[i].w * src[i].z.e[k].s;
                all[m] = (struct tagged){{isnan(score) ? 0 : score, src[i].z.e[k].m}, m};
            }
        qsort(all, m, sizeof *all, by_member_seq);
        for (size_t k = 0; k < m; k++) {
            if (nres && !zset_mcmp(res[nres - 1].m, all[k].x.m))
                aggregate(&res[nres - 1].s, all[k].x.s, agg);
            else
                res[nres++] = all[k].x;
        }
        free(all);
    }
    if (card) {
        reply_int(&c->out, (long long)nres);
    } else if (store_to) {
        rc = store_picked(c, t, argv[1], res, nres);
    } else {
        qsort(res, nres, sizeof *res, zset_cmp);
        reply_array(&c->out, nres * (withscores ? 2 : 1));
        for (size_t i = 0; i < nres; i++)
            reply_ent(&c->out, &res[i], withscores);
    }
out:
    for (size_t i = 0; src && i < n; i++) {
        zset_free(&src[i].z);
        free(src[i].by_m);
    }
    free(src);
    free(res);
    return rc;
}

static int cmd_zsetop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    static const struct {
        const char *name;
        int op, store_to, card;
    } ops[] = {
        {"zunion", OP_UNION, 0, 0},      {"zinter", OP_INTER, 0, 0},
        {"zdiff", OP_DIFF, 0, 0},        {"zunionstore", OP_UNION, 1, 0},
        {"zinterstore", OP_INTER, 1, 0}, {"zdiffstore", OP_DIFF, 1, 0},
        {"zintercard", OP_INTER, 0, 1},
    };
    size_t i = 0;
    while (i + 1 < sizeof ops / sizeof *ops && !arg_is(&argv[0], ops[i].name))
        i++;
    return setop(c, t, argc, argv, ops[i].op, ops[i].store_to, ops[i].card, ops[i].name);
}

#define RAND_MAX_MEMBERS (1LL << 24)

/* Reply the member of rank r of b (with its score if asked) */
static int reply_rank(struct conn *c, zb *b, uint64_t r, int scores)
{
    char *m;
    size_t mn;
    double s;
    int rc = zb_at(b, r, &s, &m, &mn);
    if (rc)
        return rc;
    struct zent x = {s, {m, mn}};
    reply_ent(&c->out, &x, scores);
    free(m);
    return 0;
}

/* count (< the set's n) distinct ranks of [0, n), as Floyd's sampling
 * picks them: for each j of the last count ranks, a random one of
 * [0, j] unless it was taken, else j itself. A table of twice count
 * slots (open addressing, rank + 1 in a slot) says what was taken. */
static int sample_ranks(uint64_t n, size_t count, uint64_t *out)
{
    size_t cap = 16;
    while (cap < 2 * count)
        cap *= 2;
    uint64_t *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return TXN_E_NOMEM;
    for (uint64_t j = n - count, k = 0; j < n; j++, k++) {
        uint64_t pick = ((uint64_t)random() << 31 ^ (uint64_t)random()) % (j + 1);
        for (int pass = 0; pass < 2; pass++) {
            size_t h = (size_t)(pick * 0x9E3779B97F4A7C15ULL >> 17) & (cap - 1);
            while (slot[h] && slot[h] != pick + 1)
                h = (h + 1) & (cap - 1);
            if (!slot[h]) { /* not taken: take it */
                slot[h] = pick + 1;
                break;
            }
            pick = j; /* taken: j is not yet (it is above all picked so far) */
        }
        out[k] = pick;
    }
    free(slot);
    return 0;
}

/* ZRANDMEMBER on the large form: each member by its rank, O(log n) */
static int zrand_big(struct conn *c, zb *b, long long count, int many, int scores)
{
    uint64_t n = zb_card(b);
    int rc = 0;
    if (!many)
        return reply_rank(c, b, (uint64_t)random() % n, 0);
    if (count == 0) {
        reply_array(&c->out, 0);
    } else if (count < 0 || count == 1) {
        size_t k = (size_t)(count < 0 ? -count : count);
        reply_array(&c->out, k * (size_t)(scores + 1));
        for (size_t i = 0; i < k && !rc; i++)
            rc = reply_rank(c, b, (uint64_t)random() % n, scores);
    } else if ((uint64_t)count >= n) {
        /* the whole set, from its end, as Redis replies it */
        reply_array(&c->out, (size_t)n * (size_t)(scores + 1));
        struct zset_pick p = {0};
        if (!(rc = zset_big_pick(b, n - 1, (size_t)n, -1, &p)))
            for (size_t i = 0; i < p.n; i++)
                reply_ent(&c->out, &p.e[i], scores);
        zset_pick_free(&p);
    } else {
        uint64_t *r = malloc((size_t)count * sizeof *r);
        if (!r || (rc = sample_ranks(n, (size_t)count, r))) {
            free(r);
            return r ? rc : TXN_E_NOMEM;
        }
        reply_array(&c->out, (size_t)count * (size_t)(scores + 1));
        for (size_t i = 0; i < (size_t)count && !rc; i++)
            rc = reply_rank(c, b, r[i], scores);
        free(r);
    }
    return rc;
}

/* ZRANDMEMBER key [count [WITHSCORES]]: a positive count gives distinct
 * members (the whole set, in order, when count >= its size), a negative
 * one |count| members that may repeat */
static int cmd_zrandmember(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long count = 1;
    int scores = argc == 4, many = argc >= 3;
    if (many && parse_ll(&argv[2], &count))
        return reply_error(&c->out, ERR_INT), 0;
    if (many && count < -LLONG_MAX)
        return reply_error(&c->out, "ERR value is out of range, value must between "
                                    "-9223372036854775807 and 9223372036854775807"), 0;
    if (argc > 4 || (scores && !arg_is(&argv[3], "WITHSCORES")))
        return reply_error(&c->out, ERR_SYNTAX), 0;
    if (scores && (count < -LLONG_MAX / 2 || count > LLONG_MAX / 2))
        return reply_error(&c->out, "ERR value is out of range"), 0;
    /* Redis allocates a reply of -count members and dies of it; here a
     * reply has at most RAND_MAX_MEMBERS of them */
    if (many && count < -RAND_MAX_MEMBERS)
        return reply_error(&c->out, "ERR value is out of range"), 0;
    struct zset z;
    zb *b;
    int rc = zb_open(t, argv[1], &b);
    if (rc > 0)
        return zb_close(b, zrand_big(c, b, count, many, scores));
    if (rc < 0 || (rc = zset_load(t, argv[1], &z)) < 0)
        return rc;
    if (!many) {
        if (rc)
            reply_ent(&c->out, &z.e[(size_t)random() % z.n], 0);
        else
            reply_nil(&c->out);
    } else if (!rc || count == 0) {
        reply_array(&c->out, 0);
    } else if (count < 0 || count == 1) {
        size_t n = (size_t)(count < 0 ? -count : count);
        reply_array(&c->out, n * (size_t)(scores + 1));
        for (size_t i = 0; i < n; i++)
            reply_ent(&c->out, &z.e[(size_t)random() % z.n], scores);
    } else if ((size_t)count >= z.n) {
        /* the whole set, from its end, as Redis replies it */
        reply_array(&c->out, z.n * (size_t)(scores + 1));
        for (size_t i = z.n; i-- > 0;)
            reply_ent(&c->out, &z.e[i], scores);
    } else {
        size_t n = (size_t)count;
        /* a partial Fisher-Yates shuffle picks n distinct members */
        for (size_t i = 0; i < n; i++) {
            size_t j = i + (size_t)random() % (z.n - i);
            struct zent x = z.e[i];
            z.e[i] = z.e[j];
            z.e[j] = x;
        }
        reply_array(&c->out, n * (size_t)(scores + 1));
        for (size_t i = 0; i < n; i++)
            reply_ent(&c->out, &z.e[i], scores);
    }
    zset_free(&z);
    return 0;
}

/* A large set's ZSCAN cursor: the score of the member to go on from, as
 * a number in the scores' order (-0 as 0), never 0 (which starts and
 * ends a scan) */
static uint64_t score_cursor(double s)
{
    uint64_t u;
    if (s == 0)
        s = 0;
    memcpy(&u, &s, sizeof u);
    return u >> 63 ? ~u : u | 1ULL << 63;
}

/* ZSCAN on the large form: from the first member scored at least the
 * cursor's score, count members and then the rest of the last one's
 * score, so that the next cursor (the score after them) passes over
 * nothing that stays in the set whatever is added or removed between
 * calls (docs/kvstore.md, section 32) */
static int zscan_big(struct conn *c, zb *b, unsigned long long cur,
                     const struct kv_slice *pattern, long long count)
{
    uint64_t n = zb_card(b), from = 0, next = 0;
    struct zset_pick p = {NULL, 0, 1};
    size_t cap = 0;
    int rc = 0;
    if (cur > score_cursor(INFINITY)) {
        from = n;
    } else if (cur > score_cursor(-INFINITY)) {
        uint64_t u = cur >> 63 ? cur & ~(1ULL << 63) : ~cur;
        double s;
        memcpy(&s, &u, sizeof s);
        rc = zb_rank_of_score(b, s, 0, &from);
    }
    zb_walk *w = NULL;
    if (!rc && from < n)
        rc = zb_walk_open(b, from, &w);
    for (uint64_t i = from; w && !rc && i < n; i++) {
        char *m;
        size_t mn;
        double s;
        if (i > from && (rc = zb_walk_step(w, 1)) != 0) {
            rc = rc > 0 ? TXN_E_CORRUPT : rc; /* i < n: there is one */
            break;
        }
        if ((rc = zb_walk_get(w, &s, &m, &mn)))
            break;
        if ((long long)p.n >= count && s != p.e[p.n - 1].s) {
            next = score_cursor(s); /* the next page starts at this one */
            free(m);
            break;
        }
        if (p.n == cap) {
            struct zent *e = realloc(p.e, (cap = cap ? 2 * cap : 16) * sizeof *e);
            if (!e) {
                free(m);
                rc = TXN_E_NOMEM;
                break;
            }
            p.e = e;
        }
        p.e[p.n++] = (struct zent){s, {m, mn}};
    }
    if (w)
        zb_walk_free(w);
    if (!rc) {
        char buf[SCORE_CHARS];
        size_t k = 0;
        for (size_t i = 0; i < p.n; i++)
            if (!pattern || glob_match(pattern->p, pattern->n, p.e[i].m.p, p.e[i].m.n))
                k++;
        reply_array(&c->out, 2);
        reply_bulk(&c->out, buf, (size_t)snprintf(buf, sizeof buf, "%llu",
                                                  (unsigned long long)next));
        reply_array(&c->out, 2 * k);
        /* the large form's scores as Redis's skip list replies them */
        for (size_t i = 0; i < p.n; i++)
            if (!pattern || glob_match(pattern->p, pattern->n, p.e[i].m.p, p.e[i].m.n))
                reply_ent(&c->out, &p.e[i], 1);
    }
    zset_pick_free(&p);
    return rc;
}

/* ZSCAN key cursor [MATCH pattern] [COUNT n]: a packed set is one value,
 * so one call returns every member (cursor 0), as Redis does for a
 * listpack; a large one pages (zscan_big). Options are read only for a
 * set that is there, as Redis. */
static int cmd_zscan(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    /* Redis reads the cursor with strtoul: signs and "" pass, spaces
     * before it and out-of-range numbers do not */
    char *end, cur[32];
    if (argv[2].n >= sizeof cur)
        return reply_error(&c->out, "ERR invalid cursor"), 0;
    memcpy(cur, argv[2].p, argv[2].n);
    cur[argv[2].n] = 0;
    errno = 0;
    unsigned long long cv = strtoull(cur, &end, 10);
    if (*end || errno == ERANGE || isspace((unsigned char)cur[0]))
        return reply_error(&c->out, "ERR invalid cursor"), 0;
    struct zset z = {0};
    zb *b = NULL;
    int rc = zb_open(t, argv[1], &b);
    if (!rc)
        rc = zset_load(t, argv[1], &z);
    if (rc < 0)
        return rc;
    const struct kv_slice *pattern = NULL;
    const char *bad = NULL;
    long long count = 10;
    for (size_t i = 3; rc && i < argc && !bad; i += 2) {
        if (i + 1 == argc || !(arg_is(&argv[i], "MATCH") || arg_is(&argv[i], "COUNT")))
            bad = ERR_SYNTAX;
        else if (arg_is(&argv[i], "MATCH"))
            pattern = &argv[i + 1];
        else if (parse_ll(&argv[i + 1], &count))
            bad = ERR_INT;
        else if (count < 1)
            bad = ERR_SYNTAX;
    }
    rc = 0;
    if (bad) {
        reply_error(&c->out, "%s", bad);
    } else if (b) {
        rc = zscan_big(c, b, cv, pattern, count);
    } else {
        size_t n = 0;
        for (size_t i = 0; i < z.n; i++)
            if (!pattern || glob_match(pattern->p, pattern->n, z.e[i].m.p, z.e[i].m.n))
                z.e[n++] = z.e[i];
        reply_array(&c->out, 2);
        reply_bulk(&c->out, "0", 1);
        reply_array(&c->out, 2 * n);
        for (size_t i = 0; i < n; i++) {
            char buf[SCORE_CHARS];
            int len = fmt_stored(z.e[i].s, buf);
            reply_bulk(&c->out, z.e[i].m.p, z.e[i].m.n);
            reply_bulk(&c->out, buf, (size_t)len);
        }
    }
    if (b)
        rc = zb_close(b, rc);
    zset_free(&z);
    return rc;
}

/* ---- the blocking forms: ZPOPMIN/ZPOPMAX and ZMPOP when a key holds a
 * sorted set, else block (block.h) or, inside EXEC or once timed out, a
 * nil array. Kept apart from the encoding: they read only what zpop and
 * cmd_zmpop reply. */

/* BZPOPMIN, BZPOPMAX key [key ...] timeout: [key, member, score] */
static int cmd_bzpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long ms;
    if (block_timeout(c, &argv[argc - 1], &ms) || block_error(c))
        return 0;
    enum block_state st = block_state(c);
    for (size_t k = 1; k < argc - 1; k++) {
        size_t mark = c->out.len;
        int rc = zpop(c, t, &argv[k], 1, arg_is(&argv[0], "bzpopmax"), 1, 0);
        if (rc == KV_E_WRONGTYPE && st != BLOCK_NONE)
            continue; /* Redis 7.0 leaves the client blocked */
        if (rc < 0)
            return rc;
        if (c->out.len - mark == 4 && !memcmp(c->out.p + mark, "*0\r\n", 4)) {
            c->out.len = mark; /* no such sorted set */
            continue;
        }
        /* zpop's [member, score] becomes [key, member, score] */
        assert(c->out.len - mark > 4 && !memcmp(c->out.p + mark, "*2\r\n", 4));
        struct buf head = {0};
        reply_array(&head, 3);
        reply_bulk(&head, argv[k].p, argv[k].n);
        if (head.oom || buf_reserve(&c->out, head.len - 4)) {
            buf_free(&head);
            return TXN_E_NOMEM;
        }
        memmove(c->out.p + mark + head.len, c->out.p + mark + 4, c->out.len - mark - 4);
        memcpy(c->out.p + mark, head.p, head.len);
        c->out.len += head.len - 4;
        buf_free(&head);
        return 0;
    }
    return block_nothing(c, &argv[1], argc - 2, ms);
}

/* BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: ZMPOP on
 * the arguments after the timeout; its nil array means "block". */
static int cmd_bzmpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long ms, numkeys;
    if (block_timeout(c, &argv[1], &ms) || block_error(c))
        return 0;
    size_t mark = c->out.len;
    int rc = cmd_zmpop(c, t, argc - 1, argv + 1);
    if (rc == KV_E_WRONGTYPE && block_state(c) != BLOCK_NONE)
        rc = 0, buf_add(&c->out, "*-1\r\n", 5); /* still blocked, as Redis 7.0 */
    if (rc < 0 || c->out.len - mark != 5 || memcmp(c->out.p + mark, "*-1\r\n", 5))
        return rc; /* popped, an error, or ZMPOP's own error reply */
    c->out.len = mark;
    /* ZMPOP checked numkeys: the keys are argv[3 .. 3 + numkeys) */
    if (parse_ll(&argv[2], &numkeys) || numkeys < 1 || (size_t)numkeys > argc - 4)
        return reply_error(&c->out, ERR_SYNTAX), 0;
    return block_nothing(c, &argv[3], (size_t)numkeys, ms);
}

/* ---- the table */

#define W CMD_WRITE
#define R CMD_READONLY
#define M CMD_DENYOOM
#define F CMD_FAST
#define Z ACL_SORTEDSET
/* The commands that take numkeys name their keys by it (the key spec's
 * fourth field: the index of the count), as Redis's keynum key specs. */
const struct command zset_commands[] = {
    {"zadd", cmd_zadd, -4, W | M | F, Z, {1, 1, 1}},
    {"zincrby", cmd_zadd, 4, W | M | F, Z, {1, 1, 1}},
    {"zrem", cmd_zrem, -3, W | F, Z, {1, 1, 1}},
    {"zcard", cmd_zlookup, 2, R | F, Z, {1, 1, 1}},
    {"zscore", cmd_zlookup, 3, R | F, Z, {1, 1, 1}},
    {"zmscore", cmd_zlookup, -3, R | F, Z, {1, 1, 1}},
    {"zrank", cmd_zlookup, 3, R | F, Z, {1, 1, 1}},
    {"zrevrank", cmd_zlookup, 3, R | F, Z, {1, 1, 1}},
    {"zcount", cmd_zcount, 4, R | F, Z, {1, 1, 1}},
    {"zlexcount", cmd_zcount, 4, R | F, Z, {1, 1, 1}},
    {"zrange", cmd_zrange, -4, R, Z, {1, 1, 1}},
    {"zrevrange", cmd_zrange, -4, R, Z, {1, 1, 1}},
    {"zrangebyscore", cmd_zrange, -4, R, Z, {1, 1, 1}},
    {"zrevrangebyscore", cmd_zrange, -4, R, Z, {1, 1, 1}},
    {"zrangebylex", cmd_zrange, -4, R, Z, {1, 1, 1}},
    {"zrevrangebylex", cmd_zrange, -4, R, Z, {1, 1, 1}},
    {"zrangestore", cmd_zrangestore, -5, W | M, Z, {1, 2, 1}},
    {"zremrangebyrank", cmd_zremrange, 4, W, Z, {1, 1, 1}},
    {"zremrangebyscore", cmd_zremrange, 4, W, Z, {1, 1, 1}},
    {"zremrangebylex", cmd_zremrange, 4, W, Z, {1, 1, 1}},
    {"zpopmin", cmd_zpop, -2, W | F, Z, {1, 1, 1}},
    {"zpopmax", cmd_zpop, -2, W | F, Z, {1, 1, 1}},
    {"zmpop", cmd_zmpop, -4, W | CMD_KEYNUM(1), Z, {0, 0, 0}},
    {"bzpopmin", cmd_bzpop, -3, W | CMD_NOSCRIPT | CMD_BLOCKING | F, Z, {1, -2, 1}},
    {"bzpopmax", cmd_bzpop, -3, W | CMD_NOSCRIPT | CMD_BLOCKING | F, Z, {1, -2, 1}},
    {"bzmpop", cmd_bzmpop, -5, W | CMD_BLOCKING | CMD_KEYNUM(2), Z, {0, 0, 0}},
    {"zunion", cmd_zsetop, -3, R | CMD_KEYNUM(1), Z, {0, 0, 0}},
    {"zinter", cmd_zsetop, -3, R | CMD_KEYNUM(1), Z, {0, 0, 0}},
    {"zdiff", cmd_zsetop, -3, R | CMD_KEYNUM(1), Z, {0, 0, 0}},
    {"zunionstore", cmd_zsetop, -4, W | M | CMD_KEYNUM(2), Z, {1, 1, 1}},
    {"zinterstore", cmd_zsetop, -4, W | M | CMD_KEYNUM(2), Z, {1, 1, 1}},
    {"zdiffstore", cmd_zsetop, -4, W | M | CMD_KEYNUM(2), Z, {1, 1, 1}},
    {"zintercard", cmd_zsetop, -3, R | CMD_KEYNUM(1), Z, {0, 0, 0}},
    {"zrandmember", cmd_zrandmember, -2, R, Z, {1, 1, 1}},
    {"zscan", cmd_zscan, -3, R, Z, {1, 1, 1}},
};
const size_t zset_ncommands = sizeof zset_commands / sizeof *zset_commands;

const char *zset_encoding(const char *v, size_t n)
{
    return zb_is_big(v, n) ? "skiplist" : "listpack";
}
