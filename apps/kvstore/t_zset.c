/* t_zset.c - the sorted set commands (ZADD ... ZSCAN): Redis 7.0's
 * replies and error texts, each in one store transaction (its own or
 * EXEC's). The blocking BZPOPMIN, BZPOPMAX and BZMPOP (block.h) are at
 * the end, written against ZPOPMIN's and ZMPOP's replies only.
 *
 * A sorted set is one value of type KV_ZSET: a 4-byte member count, then
 * per member its score (the 8 bytes of an IEEE double), a 4-byte length
 * and the member's bytes (little endian), in the order of (score, member)
 * with members compared as bytes, the order Redis's listpack keeps. A
 * change writes the record again, so a command costs O(bytes of the set),
 * as a hash's does (docs/kvstore.md, section 24). An emptied sorted set is
 * deleted, as in Redis. Scores are doubles, never NaN.
 *
 * Past zset-max-listpack-entries members, or with a member longer than
 * zset-max-listpack-value bytes, a set is written in its large form
 * (zbtree.c: B-trees in the value, O(log n) per member), as Redis's
 * skiplist; it stays so until it is deleted. ZADD, ZINCRBY, ZREM, the
 * lookups, ZPOPMIN/ZPOPMAX, the ranges (ZRANGE in all its forms, ZCOUNT,
 * ZLEXCOUNT, ZREMRANGEBY*), ZRANDMEMBER and ZSCAN work on that form in
 * place, by rank;
 * the other commands read it whole as the packed record and write back
 * the large form (docs/kvstore.md, sections 27 and 30). */
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
#include "zbtree.h"

/* A sorted set read out of the store: its members point into `raw` or,
 * once changed, into the request's arguments. */
struct zset {
    struct val raw;
    struct zent *e;
    size_t n, cap;
    int big; /* read from the large form, so written back in it */
};

#define ENT_HDR 12 /* score and length before each member */

/* The record is little endian: on such a host its fields are copied as
 * they are, since byte loops showed in a ZADD's time (docs/kvstore.md,
 * section 24) */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

static double get_score(const char *p)
{
    uint64_t u = 0;
    double d;
    if (HOST_LE) {
        memcpy(&d, p, sizeof d);
        return d;
    }
    for (int i = 7; i >= 0; i--)
        u = u << 8 | (unsigned char)p[i];
    memcpy(&d, &u, sizeof d);
    return d;
}

static void put_score(char *p, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    if (HOST_LE) {
        memcpy(p, &u, sizeof u);
        return;
    }
    for (int i = 0; i < 8; i++)
        p[i] = (char)(u >> (8 * i));
}

static int mcmp(struct kv_slice a, struct kv_slice b)
{
    int c = memcmp(a.p, b.p, a.n < b.n ? a.n : b.n);
    return c ? c : a.n < b.n ? -1 : a.n > b.n;
}

/* The set's order: score, then member bytes */
static int ecmp(const struct zent *a, const struct zent *b)
{
    return a->s < b->s ? -1 : a->s > b->s ? 1 : mcmp(a->m, b->m);
}

static int room(struct zset *z, size_t n)
{
    void *e = z->e;
    int rc = pack_room(&e, &z->cap, n, sizeof *z->e);
    z->e = e;
    return rc;
}

/* Split the record into members; a record that does not parse, or whose
 * members are out of order, repeated or scored NaN, is damage. */
static int decode(struct zset *z)
{
    const char *p = z->raw.p, *end = p + z->raw.n;
    if (z->raw.n < 4)
        return TXN_E_CORRUPT;
    size_t n = get32(p);
    p += 4;
    if (n > z->raw.n / ENT_HDR)
        return TXN_E_CORRUPT;
    int rc = room(z, n);
    for (size_t i = 0; i < n && !rc; i++) {
        if (end - p < ENT_HDR || (size_t)(end - p - ENT_HDR) < get32(p + 8))
            return TXN_E_CORRUPT;
        struct zent x = {get_score(p), {p + ENT_HDR, get32(p + 8)}};
        if (isnan(x.s) || (i && ecmp(&z->e[i - 1], &x) >= 0))
            return TXN_E_CORRUPT;
        z->e[z->n++] = x;
        p += ENT_HDR + x.m.n;
    }
    return rc ? rc : p == end ? 0 : TXN_E_CORRUPT;
}

/* Load key's sorted set: 1 (z filled), 0 missing (z empty), <0 an error
 * (KV_E_WRONGTYPE for another type). */
static int load(kv_txn *t, struct kv_slice key, struct zset *z)
{
    unsigned type;
    memset(z, 0, sizeof *z);
    int rc = get_any(t, key, &z->raw, &type);
    if (rc <= 0)
        return rc;
    if (type != KV_ZSET)
        return KV_E_WRONGTYPE;
    if (zb_is_big(z->raw.p, z->raw.n)) {
        /* the large form, read out as the packed record */
        zb *b;
        free(z->raw.p);
        z->raw.p = NULL;
        if ((rc = zb_open(t, key, &b)) <= 0)
            return rc < 0 ? rc : TXN_E_CORRUPT;
        rc = zb_close(b, zb_export(b, &z->raw.p, &z->raw.n));
        z->big = 1;
        if (rc)
            return rc;
    }
    return (rc = decode(z)) ? rc : 1;
}

static void zset_free(struct zset *z)
{
    free(z->raw.p);
    free(z->e);
    memset(z, 0, sizeof *z);
}

/* Does a set of n members, the longest of `longest` bytes, pass the
 * thresholds of the packed form (Redis's zsetTypeCreate's test)? */
static int too_big(size_t n, size_t longest)
{
    return (long long)n > atomic_load(&cfg.zset_max_listpack_entries) ||
           (long long)longest > atomic_load(&cfg.zset_max_listpack_value);
}

/* Write the set back (expiry `at`: KV_KEEPTTL keeps the key's), or delete
 * the key if the set is empty: in the large form if it was read in it or
 * passes the thresholds. */
static int store(kv_txn *t, struct kv_slice key, const struct zset *z, uint64_t at)
{
    if (!z->n) {
        int rc = kv_txn_del(t, key);
        return rc < 0 ? rc : 0;
    }
    if (z->n > UINT32_MAX)
        return TXN_E_NOSPACE;
    size_t len = 4, longest = 0;
    for (size_t i = 0; i < z->n; i++) {
        if (z->e[i].m.n > UINT32_MAX)
            return TXN_E_NOSPACE;
        len += ENT_HDR + z->e[i].m.n;
        longest = z->e[i].m.n > longest ? z->e[i].m.n : longest;
    }
    if (z->big || too_big(z->n, longest))
        return zb_write(t, key, z->e, z->n, at);
    char *p = malloc(len), *q = p;
    if (!p)
        return TXN_E_NOMEM;
    put32(q, (uint32_t)z->n);
    q += 4;
    for (size_t i = 0; i < z->n; i++) {
        put_score(q, z->e[i].s);
        put32(q + 8, (uint32_t)z->e[i].m.n);
        memcpy(q + ENT_HDR, z->e[i].m.p, z->e[i].m.n);
        q += ENT_HDR + z->e[i].m.n;
    }
    int rc = kv_txn_write(t, key, (struct kv_slice){p, len}, at, KV_ZSET);
    free(p);
    return rc;
}

static ssize_t find(const struct zset *z, struct kv_slice m)
{
    for (size_t i = 0; i < z->n; i++)
        if (z->e[i].m.n == m.n && !memcmp(z->e[i].m.p, m.p, m.n))
            return (ssize_t)i;
    return -1;
}

static void remove_at(struct zset *z, size_t i)
{
    memmove(&z->e[i], &z->e[i + 1], (z->n - i - 1) * sizeof *z->e);
    z->n--;
}

/* Insert x (not a member yet) at its place in the order */
static int insert(struct zset *z, struct zent x)
{
    int rc = room(z, z->n + 1);
    if (rc)
        return rc;
    if (x.s == 0)
        x.s = 0; /* -0 is kept as 0, as Redis's listpack keeps it */
    size_t lo = 0, hi = z->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ecmp(&z->e[mid], &x) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&z->e[lo + 1], &z->e[lo], (z->n - lo) * sizeof *z->e);
    z->e[lo] = x;
    z->n++;
    return 0;
}

static int cmp_ent(const void *a, const void *b)
{
    return ecmp(a, b);
}

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

/* ---- ranges of scores or of members */

enum { LEX_MINUS = -1, LEX_STR = 0, LEX_PLUS = 1 };

struct range {
    int lex;
    double min, max;            /* by score */
    int lmin, lmax;             /* by member: LEX_* */
    struct kv_slice smin, smax; /* ... and the strings of LEX_STR */
    int minex, maxex;
};

static int parse_score_range(const struct kv_slice *lo, const struct kv_slice *hi,
                             struct range *r)
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
                           struct range *r)
{
    memset(r, 0, sizeof *r);
    r->lex = 1;
    return parse_lex_item(lo, &r->lmin, &r->smin, &r->minex) ||
                   parse_lex_item(hi, &r->lmax, &r->smax, &r->maxex)
               ? -1
               : 0;
}

/* member m against a lex bound */
static int lex_cmp(struct kv_slice m, int kind, struct kv_slice s)
{
    return kind == LEX_MINUS ? 1 : kind == LEX_PLUS ? -1 : mcmp(m, s);
}

static int gte_min(const struct range *r, const struct zent *x)
{
    if (!r->lex)
        return r->minex ? x->s > r->min : x->s >= r->min;
    int c = lex_cmp(x->m, r->lmin, r->smin);
    return r->minex ? c > 0 : c >= 0;
}

static int lte_max(const struct range *r, const struct zent *x)
{
    if (!r->lex)
        return r->maxex ? x->s < r->max : x->s <= r->max;
    int c = lex_cmp(x->m, r->lmax, r->smax);
    return r->maxex ? c < 0 : c <= 0;
}

/* Can nothing be in r (Redis's test before it looks)? */
static int range_empty(const struct range *r)
{
    int c;
    if (!r->lex) {
        c = r->min > r->max ? 1 : r->min < r->max ? -1 : 0;
    } else if (r->lmin == r->lmax && r->lmin != LEX_STR) {
        c = 0;
    } else if (r->lmin == LEX_MINUS || r->lmax == LEX_PLUS) {
        c = -1;
    } else if (r->lmin == LEX_PLUS || r->lmax == LEX_MINUS) {
        c = 1;
    } else {
        c = mcmp(r->smin, r->smax);
    }
    return c > 0 || (c == 0 && (r->minex || r->maxex));
}

/* The first member in r, as Redis's zzlFirstInRange and
 * zzlFirstInLexRange find it (from the start, the first one >= min, if it
 * is <= max; by member that is a walk over members of any score): its
 * index, or -1. */
static ssize_t first_in(const struct zset *z, const struct range *r)
{
    if (!z->n || range_empty(r) || !gte_min(r, &z->e[z->n - 1]) || !lte_max(r, &z->e[0]))
        return -1;
    for (size_t i = 0; i < z->n; i++)
        if (gte_min(r, &z->e[i]))
            return lte_max(r, &z->e[i]) ? (ssize_t)i : -1;
    return -1;
}

/* ... and the last one (from the end, the first one <= max, if >= min) */
static ssize_t last_in(const struct zset *z, const struct range *r)
{
    if (!z->n || range_empty(r) || !gte_min(r, &z->e[z->n - 1]) || !lte_max(r, &z->e[0]))
        return -1;
    for (size_t i = z->n; i-- > 0;)
        if (lte_max(r, &z->e[i]))
            return gte_min(r, &z->e[i]) ? (ssize_t)i : -1;
    return -1;
}

/* The run of members in r from the first one on: [*from, *to) */
static void run_in(const struct zset *z, const struct range *r, size_t *from, size_t *to)
{
    ssize_t f = first_in(z, r);
    size_t i = f < 0 ? z->n : (size_t)f;
    *from = i;
    while (i < z->n && lte_max(r, &z->e[i]))
        i++;
    *to = f < 0 ? *from : i;
}

/* ZRANGE's rank arguments made indexes as Redis makes them: 0 nothing,
 * 1 [*start, *end] */
static int rank_span(long long start, long long end, size_t n, size_t *s, size_t *e)
{
    long long len = (long long)n;
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (start > end || start >= len)
        return 0;
    if (end >= len)
        end = len - 1;
    *s = (size_t)start;
    *e = (size_t)end;
    return 1;
}

/* ---- ranges of a set in the large form, by rank: O(log n) to find,
 * O(1) a member to walk */

/* The ranks [*from, *to) of r's members in the large set b */
static int big_span(zb *b, const struct range *r, uint64_t *from, uint64_t *to)
{
    uint64_t n = zb_card(b);
    int rc = 0;
    *from = *to = 0;
    if (range_empty(r))
        return 0;
    if (!r->lex) {
        if (!(rc = zb_rank_of_score(b, r->min, r->minex, from)))
            rc = zb_rank_of_score(b, r->max, !r->maxex, to);
    } else {
        *from = r->lmin == LEX_MINUS ? 0 : n;
        *to = r->lmax == LEX_MINUS ? 0 : n;
        if (r->lmin == LEX_STR)
            rc = zb_rank_of_member(b, r->smin, r->minex, from);
        if (!rc && r->lmax == LEX_STR)
            rc = zb_rank_of_member(b, r->smax, !r->maxex, to);
    }
    if (*to < *from)
        *to = *from;
    return rc;
}

/* The members picked by a range of a large set */
struct pick {
    struct zent *e;
    size_t n;
    int owned; /* each member malloc'd (picked from a large set) */
};

static void pick_free(struct pick *p)
{
    for (size_t i = 0; p->owned && i < p->n; i++)
        free((char *)p->e[i].m.p);
    free(p->e);
}

/* count members of b from rank `first` on, up (dir 1) or down (-1) */
static int big_pick(zb *b, uint64_t first, size_t count, int dir, struct pick *p)
{
    zb_walk *w;
    p->owned = 1;
    if (!count)
        return 0;
    if (!(p->e = malloc(count * sizeof *p->e)))
        return TXN_E_NOMEM;
    int rc = zb_walk_open(b, first, &w);
    if (rc)
        return rc;
    for (size_t i = 0; !rc && i < count; i++) {
        char *m;
        size_t mn;
        double s;
        if (i && (rc = zb_walk_step(w, dir)) > 0)
            rc = TXN_E_CORRUPT; /* the ranks said it was there */
        if (!rc && !(rc = zb_walk_get(w, &s, &m, &mn)))
            p->e[p->n++] = (struct zent){s, {m, mn}};
    }
    zb_walk_free(w);
    return rc;
}

/* ---- commands */

#define ERR_SYNTAX "ERR syntax error"
#define ERR_INT "ERR value is not an integer or out of range"
#define ERR_FLOAT "ERR value is not a valid float"
#define ERR_RANGE "ERR min or max is not a float"
#define ERR_LEX "ERR min or max not valid string range item"

#define Z_NX 1
#define Z_XX 2
#define Z_GT 4
#define Z_LT 8
#define Z_CH 16
#define Z_INCR 32

/* Redis's zsetAdd rule for one member, there or not (cur: its score):
 * 0 nothing to do, 1 add, 2 change, 3 processed but unchanged, -1 the
 * result would be NaN; *score becomes the score after (INCR adds cur). */
static int zadd_rule(int there, double cur, int fl, double *score)
{
    if (!there)
        return (fl & Z_XX) ? 0 : 1;
    if (fl & Z_NX)
        return 0;
    if (fl & Z_INCR) {
        *score += cur;
        if (isnan(*score))
            return -1;
    }
    if (((fl & Z_LT) && *score >= cur) || ((fl & Z_GT) && *score <= cur))
        return 0;
    return *score == cur ? 3 : 2;
}

/* Add or change one member as Redis's zsetAdd: 1 added, 2 changed, 0
 * nothing done, -1 the result would be NaN, <-1 a store error; its score
 * after to *out. */
static int zadd_one(struct zset *z, double score, struct kv_slice m, int fl, double *out)
{
    ssize_t i = find(z, m);
    int act = zadd_rule(i >= 0, i >= 0 ? z->e[i].s : 0, fl, &score), rc;
    if (act <= 0)
        return act;
    *out = score;
    if (act == 3)
        return 3;
    if (act == 2) {
        struct kv_slice name = z->e[i].m;
        remove_at(z, (size_t)i);
        m = name;
    }
    rc = insert(z, (struct zent){score, m});
    return rc ? rc : act;
}

/* zadd_one on a set in the large form */
static int zadd_big(zb *b, double score, struct kv_slice m, int fl, double *out)
{
    double cur = 0;
    int rc = zb_score(b, m, &cur);
    if (rc < 0)
        return rc;
    int act = zadd_rule(rc > 0, cur, fl, &score);
    if (act <= 0)
        return act;
    *out = score;
    if (act == 3)
        return 3;
    if (act == 2)
        return (rc = zb_rescore(b, m, cur, score)) ? rc : 2;
    return (rc = zb_insert(b, score, m)) ? rc : 1;
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
    double *scores = malloc(elements * sizeof *scores);
    if (!scores)
        return TXN_E_NOMEM;
    for (size_t k = 0; k < elements; k++)
        if (parse_score(&argv[i + 2 * k], &scores[k])) {
            free(scores);
            return reply_error(&c->out, ERR_FLOAT), 0;
        }
    struct zset z = {0};
    zb *b = NULL;
    int rc = zb_open(t, argv[1], &b), nan = 0;
    if (!rc)
        rc = load(t, argv[1], &z);
    long long added = 0, changed = 0, processed = 0;
    double score = 0;
    if (rc >= 0 && !(rc == 0 && (fl & Z_XX))) {
        rc = 0;
        for (size_t k = 0; k < elements && rc >= 0 && !nan; k++) {
            rc = b ? zadd_big(b, scores[k], argv[i + 2 * k + 1], fl, &score)
                   : zadd_one(&z, scores[k], argv[i + 2 * k + 1], fl, &score);
            if (rc == -1)
                nan = 1, rc = 0;
            added += rc == 1;
            changed += rc == 2;
            processed += rc > 0;
        }
        if (!b && rc >= 0 && (added || changed))
            rc = store(t, argv[1], &z, KV_KEEPTTL);
    }
    if (b)
        rc = zb_close(b, rc);
    if (rc >= 0) {
        rc = 0;
        if (nan)
            reply_error(&c->out, "ERR resulting score is not a number (NaN)");
        else if (!(fl & Z_INCR))
            reply_int(&c->out, (fl & Z_CH) ? added + changed : added);
        else if (processed)
            reply_score(&c->out, score);
        else
            reply_nil(&c->out);
    }
    free(scores);
    zset_free(&z);
    return rc;
}

/* ZREM key member ... */
static int cmd_zrem(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    struct zset z = {0};
    zb *b = NULL;
    int rc = zb_open(t, argv[1], &b);
    long long n = 0;
    if (rc > 0) {
        double old;
        for (size_t i = 2; rc >= 0 && i < argc; i++)
            if ((rc = zb_remove(b, argv[i], &old)) > 0)
                n++;
        if ((rc = zb_close(b, rc)) >= 0)
            reply_int(&c->out, n), rc = 0;
        return rc;
    }
    if (!rc)
        rc = load(t, argv[1], &z);
    for (size_t i = 2; rc > 0 && i < argc; i++) {
        ssize_t k = find(&z, argv[i]);
        if (k >= 0)
            remove_at(&z, (size_t)k), n++;
    }
    if (rc >= 0 && (!n || !(rc = store(t, argv[1], &z, KV_KEEPTTL))))
        reply_int(&c->out, n), rc = 0;
    zset_free(&z);
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
        rc = load(t, argv[1], &z);
    if (rc < 0)
        return rc;
    if (arg_is(&argv[0], "zcard")) {
        reply_int(&c->out, (long long)z.n);
    } else if (arg_is(&argv[0], "zmscore")) {
        reply_array(&c->out, argc - 2);
        for (size_t i = 2; i < argc; i++) {
            ssize_t k = find(&z, argv[i]);
            k < 0 ? reply_nil(&c->out) : reply_score(&c->out, z.e[k].s);
        }
    } else {
        ssize_t k = find(&z, argv[2]);
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
    struct range r;
    if (arg_is(&argv[0], "zlexcount") ? parse_lex_range(&argv[2], &argv[3], &r)
                                      : parse_score_range(&argv[2], &argv[3], &r))
        return reply_error(&c->out, "%s", r.lex ? ERR_LEX : ERR_RANGE), 0;
    struct zset z;
    size_t from, to;
    zb *b;
    int rc = zb_open(t, argv[1], &b);
    if (rc > 0) {
        uint64_t bf, bt;
        if (!(rc = big_span(b, &r, &bf, &bt)))
            reply_int(&c->out, (long long)(bt - bf));
        return zb_close(b, rc);
    }
    if (rc < 0 || (rc = load(t, argv[1], &z)) < 0)
        return rc;
    run_in(&z, &r, &from, &to);
    reply_int(&c->out, (long long)(to - from));
    zset_free(&z);
    return 0;
}

static int pick_add(struct pick *p, const struct zent *x, size_t cap)
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
    if (n) /* e may be NULL then */
        qsort(e, n, sizeof *e, cmp_ent);
    struct zset z = {{0}, e, n, n, 0};
    int rc = store(t, dst, &z, 0);
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
    struct range r;
    if (by == BY_RANK && (parse_ll(lo, &start) || parse_ll(hi, &end)))
        return reply_error(&c->out, ERR_INT), 0;
    if (by == BY_SCORE && parse_score_range(lo, hi, &r))
        return reply_error(&c->out, ERR_RANGE), 0;
    if (by == BY_LEX && parse_lex_range(lo, hi, &r))
        return reply_error(&c->out, ERR_LEX), 0;

    struct zset z = {0};
    struct pick p = {0};
    zb *b;
    int rc = zb_open(t, argv[at], &b);
    if (rc > 0) {
        /* the large form: the picked members are a run of ranks */
        uint64_t n = zb_card(b), from = 0, to = 0, first = 0, count = 0;
        size_t s, e;
        if (by == BY_RANK) {
            if (rank_span(start, end, (size_t)n, &s, &e))
                from = s, to = (uint64_t)e + 1;
            rc = 0;
        } else {
            rc = big_span(b, &r, &from, &to);
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
            rc = big_pick(b, first, (size_t)count, rev ? -1 : 1, &p);
        rc = zb_close(b, rc);
    } else if (rc == 0 && (rc = load(t, argv[at], &z)) >= 0) {
        rc = 0;
        size_t s, e;
        if (by == BY_RANK) {
            if (rank_span(start, end, z.n, &s, &e))
                for (size_t i = s; i <= e && !rc; i++)
                    rc = pick_add(&p, &z.e[rev ? z.n - 1 - i : i], e - s + 1);
        } else if (!(offset > 0 && (size_t)offset >= z.n)) {
            /* from the first member in range on (the last, reversed): skip
             * offset members (a negative offset skips them all, as in
             * Redis), then take up to limit (negative: all) while they are
             * in range */
            ssize_t k = rev ? last_in(&z, &r) : first_in(&z, &r);
            if (k >= 0 && offset < 0)
                k = -1;
            if (k >= 0)
                k += rev ? -(ssize_t)offset : (ssize_t)offset;
            for (; k >= 0 && (size_t)k < z.n && limit-- != 0 && !rc; k += rev ? -1 : 1) {
                if (rev ? !gte_min(&r, &z.e[k]) : !lte_max(&r, &z.e[k]))
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
    pick_free(&p);
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
    long long start, end;
    struct range r;
    if (by == BY_RANK && (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end)))
        return reply_error(&c->out, ERR_INT), 0;
    if (by == BY_SCORE && parse_score_range(&argv[2], &argv[3], &r))
        return reply_error(&c->out, ERR_RANGE), 0;
    if (by == BY_LEX && parse_lex_range(&argv[2], &argv[3], &r))
        return reply_error(&c->out, ERR_LEX), 0;
    struct zset z;
    zb *b;
    int rc = zb_open(t, argv[1], &b);
    if (rc > 0) {
        /* the large form: the run of ranks, each member removed in place */
        uint64_t bf = 0, bt = 0;
        size_t s, e;
        struct pick p = {0};
        rc = 0;
        if (by != BY_RANK)
            rc = big_span(b, &r, &bf, &bt);
        else if (rank_span(start, end, (size_t)zb_card(b), &s, &e))
            bf = s, bt = (uint64_t)e + 1;
        if (!rc)
            rc = big_pick(b, bf, (size_t)(bt - bf), 1, &p);
        for (size_t i = 0; !rc && i < p.n; i++) {
            double old;
            rc = zb_remove(b, p.e[i].m, &old);
            rc = rc > 0 ? 0 : rc < 0 ? rc : TXN_E_CORRUPT; /* picked, so there */
        }
        pick_free(&p);
        if ((rc = zb_close(b, rc)) >= 0)
            reply_int(&c->out, (long long)(bt - bf)), rc = 0;
        return rc;
    }
    if (rc < 0 || (rc = load(t, argv[1], &z)) < 0)
        return rc;
    size_t from = 0, to = 0;
    if (by == BY_RANK) {
        if (rank_span(start, end, z.n, &from, &to))
            to++;
        else
            from = to = 0;
    } else {
        run_in(&z, &r, &from, &to);
    }
    rc = 0;
    if (to > from) {
        memmove(&z.e[from], &z.e[to], (z.n - to) * sizeof *z.e);
        z.n -= to - from;
        rc = store(t, argv[1], &z, KV_KEEPTTL);
    }
    if (!rc)
        reply_int(&c->out, (long long)(to - from));
    zset_free(&z);
    return rc;
}

/* zpop's pops from a set in the large form (count > 0 or -1: all) */
static int zpop_big(struct conn *c, zb *b, const struct kv_slice *key, int max, long long count,
                    int mpop)
{
    if (count == 0) {
        if (mpop)
            buf_add(&c->out, "*-1\r\n", 5);
        else
            reply_array(&c->out, 0);
        return 0;
    }
    uint64_t n = zb_card(b);
    size_t m = count < 0 || (unsigned long long)count > n ? (size_t)n : (size_t)count;
    if (mpop) {
        reply_array(&c->out, 2);
        reply_bulk(&c->out, key->p, key->n);
        reply_array(&c->out, m);
    } else {
        reply_array(&c->out, 2 * m);
    }
    int rc = 0;
    for (size_t i = 0; i < m && rc >= 0; i++) {
        double s, old;
        char *p;
        size_t pn;
        if ((rc = zb_at(b, max ? zb_card(b) - 1 : 0, &s, &p, &pn)) < 0)
            break;
        struct zent x = {s, {p, pn}};
        if (mpop)
            reply_array(&c->out, 2);
        reply_ent(&c->out, &x, 1);
        rc = zb_remove(b, x.m, &old);
        free(p);
    }
    return rc < 0 ? rc : 0;
}

/* Pop up to count members of the first non-empty set of keys[0..n)
 * (min: the lowest scores), as Redis's genericZpopCommand: ZPOPMIN and
 * ZPOPMAX reply flat (member, score, ...), ZMPOP [key, [[member, score],
 * ...]] or a nil array. */
static int zpop(struct conn *c, kv_txn *t, const struct kv_slice *keys, size_t n, int max,
                long long count, int mpop)
{
    struct zset z = {0};
    int rc = 0;
    size_t k = 0;
    for (; k < n; k++) {
        zb *b;
        if ((rc = zb_open(t, keys[k], &b)) > 0)
            return zb_close(b, zpop_big(c, b, &keys[k], max, count, mpop));
        if (rc < 0 || (rc = load(t, keys[k], &z)) < 0)
            return rc;
        if (rc > 0)
            break;
        zset_free(&z);
    }
    if (k == n || count == 0) {
        zset_free(&z);
        if (mpop)
            buf_add(&c->out, "*-1\r\n", 5); /* RESP2's nil array */
        else
            reply_array(&c->out, 0);
        return 0;
    }
    size_t m = count < 0 || (unsigned long long)count > z.n ? z.n : (size_t)count;
    if (mpop) {
        reply_array(&c->out, 2);
        reply_bulk(&c->out, keys[k].p, keys[k].n);
        reply_array(&c->out, m);
    } else {
        reply_array(&c->out, 2 * m);
    }
    for (size_t i = 0; i < m; i++) {
        const struct zent *x = &z.e[max ? z.n - 1 - i : i];
        if (mpop)
            reply_array(&c->out, 2);
        reply_ent(&c->out, x, 1);
    }
    if (!max)
        memmove(z.e, z.e + m, (z.n - m) * sizeof *z.e);
    z.n -= m;
    rc = store(t, keys[k], &z, KV_KEEPTTL);
    zset_free(&z);
    return rc;
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
    return mcmp(((const struct zent *)a)->m, ((const struct zent *)b)->m);
}

static const struct zent *src_find(const struct src *s, struct kv_slice m)
{
    size_t lo = 0, hi = s->z.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = mcmp(s->by_m[mid].m, m);
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
    int c = mcmp(x->x.m, y->x.m);
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
        rc = load(t, argv[nk_at + 1 + i], &src[i].z);
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
            if (nres && !mcmp(res[nres - 1].m, all[k].x.m))
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
        qsort(res, nres, sizeof *res, cmp_ent);
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
        struct pick p = {0};
        if (!(rc = big_pick(b, n - 1, (size_t)n, -1, &p)))
            for (size_t i = 0; i < p.n; i++)
                reply_ent(&c->out, &p.e[i], scores);
        pick_free(&p);
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
    if (rc < 0 || (rc = load(t, argv[1], &z)) < 0)
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
    struct pick p = {NULL, 0, 1};
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
    pick_free(&p);
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
        rc = load(t, argv[1], &z);
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
