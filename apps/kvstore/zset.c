/* zset.c - sorted sets in the store (zset.h): the packed record, the
 * large form's calls (zbtree.c), the conversion to it when a set passes
 * the thresholds, ZADD's flags, the removals and pops, each inside the
 * caller's kv_txn. A change of a packed set writes its record again, so
 * it costs O(bytes of the set) (docs/kvstore.md, section 24); the large
 * form changes a node at a time. An emptied set is deleted, as in Redis.
 * Scores are doubles, never NaN. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "t_pack.h"
#include "zset.h"

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

int zset_mcmp(struct kv_slice a, struct kv_slice b)
{
    int c = memcmp(a.p, b.p, a.n < b.n ? a.n : b.n);
    return c ? c : a.n < b.n ? -1 : a.n > b.n;
}

/* The set's order: score, then member bytes */
static int ecmp(const struct zent *a, const struct zent *b)
{
    return a->s < b->s ? -1 : a->s > b->s ? 1 : zset_mcmp(a->m, b->m);
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
    const char *p = z->raw, *end = p + z->rawn;
    if (z->rawn < 4)
        return TXN_E_CORRUPT;
    size_t n = get32(p);
    p += 4;
    if (n > z->rawn / ENT_HDR)
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

/* kv_txn_read's callback: the value's bytes copied into the set's raw
 * (rawn set, raw left NULL when out of memory) */
static void copy_raw(void *arg, const char *v, size_t n)
{
    struct zset *z = arg;
    z->rawn = n;
    if (v && (z->raw = malloc(n ? n : 1)))
        memcpy(z->raw, v, n);
}

int zset_load(kv_txn *t, struct kv_slice key, struct zset *z)
{
    unsigned type;
    memset(z, 0, sizeof *z);
    int rc = kv_txn_read(t, key, copy_raw, z, &type);
    if (rc <= 0)
        return rc;
    if (!z->raw)
        return TXN_E_NOMEM;
    if (type != KV_ZSET)
        return KV_E_WRONGTYPE;
    if (zb_is_big(z->raw, z->rawn)) {
        /* the large form, read out as the packed record */
        zb *b;
        free(z->raw);
        z->raw = NULL;
        if ((rc = zb_open(t, key, &b)) <= 0)
            return rc < 0 ? rc : TXN_E_CORRUPT;
        rc = zb_close(b, zb_export(b, &z->raw, &z->rawn));
        z->big = 1;
        if (rc)
            return rc;
    }
    return (rc = decode(z)) ? rc : 1;
}

void zset_free(struct zset *z)
{
    free(z->raw);
    free(z->e);
    memset(z, 0, sizeof *z);
}

/* Does a set of n members, the longest of `longest` bytes, pass the
 * thresholds of the packed form (Redis's zsetTypeCreate's test)? */
static int too_big(size_t n, size_t longest, struct zset_max max)
{
    return (long long)n > max.entries || (long long)longest > max.value;
}

int zset_store(kv_txn *t, struct kv_slice key, const struct zset *z, uint64_t at,
               struct zset_max max)
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
    if (z->big || too_big(z->n, longest, max))
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

ssize_t zset_find(const struct zset *z, struct kv_slice m)
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

int zset_cmp(const void *a, const void *b)
{
    return ecmp(a, b);
}

/* member m against a lex bound */
static int lex_cmp(struct kv_slice m, int kind, struct kv_slice s)
{
    return kind == LEX_MINUS ? 1 : kind == LEX_PLUS ? -1 : zset_mcmp(m, s);
}

int zset_gte_min(const struct zset_range *r, const struct zent *x)
{
    if (!r->lex)
        return r->minex ? x->s > r->min : x->s >= r->min;
    int c = lex_cmp(x->m, r->lmin, r->smin);
    return r->minex ? c > 0 : c >= 0;
}

int zset_lte_max(const struct zset_range *r, const struct zent *x)
{
    if (!r->lex)
        return r->maxex ? x->s < r->max : x->s <= r->max;
    int c = lex_cmp(x->m, r->lmax, r->smax);
    return r->maxex ? c < 0 : c <= 0;
}

/* Can nothing be in r (Redis's test before it looks)? */
static int range_empty(const struct zset_range *r)
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
        c = zset_mcmp(r->smin, r->smax);
    }
    return c > 0 || (c == 0 && (r->minex || r->maxex));
}

/* The first member in r, as Redis's zzlFirstInRange and
 * zzlFirstInLexRange find it (from the start, the first one >= min, if it
 * is <= max; by member that is a walk over members of any score): its
 * index, or -1. */
ssize_t zset_first_in(const struct zset *z, const struct zset_range *r)
{
    if (!z->n || range_empty(r) || !zset_gte_min(r, &z->e[z->n - 1]) || !zset_lte_max(r, &z->e[0]))
        return -1;
    for (size_t i = 0; i < z->n; i++)
        if (zset_gte_min(r, &z->e[i]))
            return zset_lte_max(r, &z->e[i]) ? (ssize_t)i : -1;
    return -1;
}

/* ... and the last one (from the end, the first one <= max, if >= min) */
ssize_t zset_last_in(const struct zset *z, const struct zset_range *r)
{
    if (!z->n || range_empty(r) || !zset_gte_min(r, &z->e[z->n - 1]) || !zset_lte_max(r, &z->e[0]))
        return -1;
    for (size_t i = z->n; i-- > 0;)
        if (zset_lte_max(r, &z->e[i]))
            return zset_gte_min(r, &z->e[i]) ? (ssize_t)i : -1;
    return -1;
}

/* The run of members in r from the first one on: [*from, *to) */
void zset_run_in(const struct zset *z, const struct zset_range *r, size_t *from, size_t *to)
{
    ssize_t f = zset_first_in(z, r);
    size_t i = f < 0 ? z->n : (size_t)f;
    *from = i;
    while (i < z->n && zset_lte_max(r, &z->e[i]))
        i++;
    *to = f < 0 ? *from : i;
}

/* ---- ranges of a set in the large form, by rank: O(log n) to find,
 * O(1) a member to walk */

/* The ranks [*from, *to) of r's members in the large set b */
int zset_big_span(zb *b, const struct zset_range *r, uint64_t *from, uint64_t *to)
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

void zset_pick_free(struct zset_pick *p)
{
    for (size_t i = 0; p->owned && i < p->n; i++)
        free((char *)p->e[i].m.p);
    free(p->e);
}

/* count members of b from rank `first` on, up (dir 1) or down (-1) */
int zset_big_pick(zb *b, uint64_t first, size_t count, int dir, struct zset_pick *p)
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
    ssize_t i = zset_find(z, m);
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
int zset_replace(kv_txn *t, struct kv_slice key, struct zent *e, size_t n, struct zset_max max)
{
    if (n) /* e may be NULL then */
        qsort(e, n, sizeof *e, zset_cmp);
    struct zset z = {NULL, 0, e, n, n, 0};
    return zset_store(t, key, &z, 0, max);
}

int zset_add(kv_txn *t, struct kv_slice key, struct zset_max max, int fl, const struct zent *e,
             size_t k, struct zset_added *o)
{
    struct zset z = {0};
    zb *b = NULL;
    int rc = zb_open(t, key, &b);
    memset(o, 0, sizeof *o);
    if (!rc)
        rc = zset_load(t, key, &z);
    if (rc >= 0 && !(rc == 0 && (fl & Z_XX))) {
        rc = 0;
        for (size_t i = 0; i < k && rc >= 0 && !o->nan; i++) {
            rc = b ? zadd_big(b, e[i].s, e[i].m, fl, &o->score)
                   : zadd_one(&z, e[i].s, e[i].m, fl, &o->score);
            if (rc == -1)
                o->nan = 1, rc = 0;
            o->added += rc == 1;
            o->changed += rc == 2;
            o->processed += rc > 0;
        }
        if (!b && rc >= 0 && (o->added || o->changed))
            rc = zset_store(t, key, &z, KV_KEEPTTL, max);
    }
    if (b)
        rc = zb_close(b, rc);
    zset_free(&z);
    return rc < 0 ? rc : 0;
}

int zset_rem(kv_txn *t, struct kv_slice key, struct zset_max max, const struct kv_slice *m,
             size_t k, uint64_t *removed)
{
    struct zset z = {0};
    zb *b = NULL;
    int rc = zb_open(t, key, &b);
    *removed = 0;
    if (rc > 0) {
        double old;
        for (size_t i = 0; rc >= 0 && i < k; i++)
            if ((rc = zb_remove(b, m[i], &old)) > 0)
                ++*removed;
        rc = zb_close(b, rc);
        return rc < 0 ? rc : 0;
    }
    if (!rc)
        rc = zset_load(t, key, &z);
    for (size_t i = 0; rc > 0 && i < k; i++) {
        ssize_t j = zset_find(&z, m[i]);
        if (j >= 0)
            remove_at(&z, (size_t)j), ++*removed;
    }
    if (rc >= 0 && *removed)
        rc = zset_store(t, key, &z, KV_KEEPTTL, max);
    zset_free(&z);
    return rc < 0 ? rc : 0;
}

void zset_popped_free(struct zset_popped *x)
{
    for (size_t i = 0; i < x->n; i++)
        free((char *)x->e[i].m.p);
    free(x->e);
    x->e = NULL;
    x->n = 0;
}

/* Keep a popped member (its bytes copied unless `own`: already malloc'd) */
static int popped_add(struct zset_popped *x, size_t cap, double s, char *p, size_t n, int own)
{
    if (!x->e && !(x->e = malloc((cap ? cap : 1) * sizeof *x->e)))
        return own ? (free(p), TXN_E_NOMEM) : TXN_E_NOMEM;
    if (!own) {
        char *q = malloc(n ? n : 1);
        if (!q)
            return TXN_E_NOMEM;
        memcpy(q, p, n);
        p = q;
    }
    x->e[x->n++] = (struct zent){s, {p, n}};
    return 0;
}

int zset_pop(kv_txn *t, struct kv_slice key, struct zset_max max, int top, long long count,
             struct zset_popped *x)
{
    struct zset z = {0};
    zb *b;
    memset(x, 0, sizeof *x);
    int rc = zb_open(t, key, &b);
    if (rc > 0) {
        uint64_t n = zb_card(b);
        size_t m = count < 0 || (unsigned long long)count > n ? (size_t)n : (size_t)count;
        rc = 0;
        for (size_t i = 0; i < m && rc >= 0; i++) {
            double s, old;
            char *p;
            size_t pn;
            if ((rc = zb_at(b, top ? zb_card(b) - 1 : 0, &s, &p, &pn)) < 0)
                break;
            if (!(rc = popped_add(x, m, s, p, pn, 1)))
                rc = zb_remove(b, x->e[x->n - 1].m, &old);
        }
        rc = zb_close(b, rc);
        return rc < 0 ? rc : 1;
    }
    if (rc < 0 || (rc = zset_load(t, key, &z)) <= 0) {
        zset_free(&z);
        return rc;
    }
    size_t m = count < 0 || (unsigned long long)count > z.n ? z.n : (size_t)count;
    rc = 0;
    for (size_t i = 0; i < m && !rc; i++) {
        const struct zent *e = &z.e[top ? z.n - 1 - i : i];
        rc = popped_add(x, m, e->s, (char *)e->m.p, e->m.n, 0);
    }
    if (!rc && m) {
        if (!top)
            memmove(z.e, z.e + m, (z.n - m) * sizeof *z.e);
        z.n -= m;
        rc = zset_store(t, key, &z, KV_KEEPTTL, max);
    }
    zset_free(&z);
    return rc < 0 ? rc : 1;
}

int zset_remrange(kv_txn *t, struct kv_slice key, struct zset_max max, int by_rank,
                  long long start, long long end, const struct zset_range *r,
                  uint64_t *removed)
{
    struct zset z;
    zb *b;
    *removed = 0;
    int rc = zb_open(t, key, &b);
    if (rc > 0) {
        /* the large form: the run of ranks, each member removed in place */
        uint64_t bf = 0, bt = 0;
        size_t s, e;
        struct zset_pick p = {0};
        rc = 0;
        if (!by_rank)
            rc = zset_big_span(b, r, &bf, &bt);
        else if (pack_span(start, end, (size_t)zb_card(b), &s, &e))
            bf = s, bt = (uint64_t)e + 1;
        if (!rc)
            rc = zset_big_pick(b, bf, (size_t)(bt - bf), 1, &p);
        for (size_t i = 0; !rc && i < p.n; i++) {
            double old;
            rc = zb_remove(b, p.e[i].m, &old);
            rc = rc > 0 ? 0 : rc < 0 ? rc : TXN_E_CORRUPT; /* picked, so there */
        }
        zset_pick_free(&p);
        if ((rc = zb_close(b, rc)) >= 0)
            *removed = bt - bf, rc = 0;
        return rc;
    }
    if (rc < 0 || (rc = zset_load(t, key, &z)) < 0)
        return rc;
    size_t from = 0, to = 0;
    if (by_rank) {
        if (pack_span(start, end, z.n, &from, &to))
            to++;
        else
            from = to = 0;
    } else {
        zset_run_in(&z, r, &from, &to);
    }
    rc = 0;
    if (to > from) {
        memmove(&z.e[from], &z.e[to], (z.n - to) * sizeof *z.e);
        z.n -= to - from;
        rc = zset_store(t, key, &z, KV_KEEPTTL, max);
    }
    if (!rc)
        *removed = to - from;
    zset_free(&z);
    return rc;
}
