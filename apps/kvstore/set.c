/* set.c - sets in the store (set.h): their forms, read and changed inside
 * the caller's kv_txn, below the commands (t_set.c), so that the crash
 * simulator's workload runs the same code.
 *
 * A set is one value of type KV_SET: a byte saying which encoding Redis
 * would have given the set (SET_INTSET or SET_HASHTABLE: OBJECT ENCODING
 * answers it), a 4-byte member count, then per member a 4-byte length and
 * the member (little endian). An intset's members are integers kept in
 * ascending order, as Redis's intset keeps them; a hashtable's are in the
 * order they were added. A change writes the record again, so a command
 * costs O(the set's bytes), as a hash's does (hash.c).
 *
 * A set that Redis keeps as a hashtable (not an intset) becomes an element
 * table (t_dict.h) past the packed limit (SET_PACKED_MAX for the
 * commands), in the command's transaction, as a hash past its thresholds
 * (hash.c): then a member's change costs O(1) pool writes. OBJECT
 * ENCODING says "hashtable" either side of it. Only SPOP's rebuild of
 * what remains (set_pop) packs a table again. An emptied set is deleted,
 * as in Redis. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "elems.h"
#include "set.h"
#include "t_dict.h"

#define SET_HDR 5 /* the encoding byte and the count */

int set_room(struct set *s, size_t n)
{
    void *e = s->e;
    int rc = pack_room(&e, &s->cap, n, sizeof *s->e);
    s->e = e;
    return rc;
}

/* Split the record into members; a record that does not parse is damage. */
static int decode(struct set *s, size_t rawn)
{
    const char *p = s->raw, *end = p + rawn;
    if (rawn < SET_HDR || (unsigned char)p[0] > SET_HASHTABLE)
        return TXN_E_CORRUPT;
    s->enc = p[0];
    size_t n = get32(p + 1);
    p += SET_HDR;
    if (n > rawn / 4)
        return TXN_E_CORRUPT;
    int rc = set_room(s, n);
    for (size_t i = 0; i < n && !rc; i++) {
        if (end - p < 4 || (size_t)(end - p - 4) < get32(p))
            return TXN_E_CORRUPT;
        s->e[s->n++] = (struct kv_slice){p + 4, get32(p)};
        p += 4 + get32(p);
    }
    return rc ? rc : p == end ? 0 : TXN_E_CORRUPT;
}

const char *set_encoding(const char *v, size_t n)
{
    return n && v[0] == SET_INTSET ? "intset" : "hashtable";
}

int set_load(kv_txn *t, struct kv_slice key, struct set *s)
{
    struct pack_val x;
    memset(s, 0, sizeof *s);
    s->enc = SET_HASHTABLE;
    int rc = elems_load(t, key, KV_SET, &s->d, &s->tx, &x);
    s->raw = x.p;
    if (rc == 1 && (rc = decode(s, x.n)) == 0)
        rc = 1;
    return rc == 2 ? 1 : rc;
}

void set_free(struct set *s)
{
    free(s->raw);
    free(s->e);
}

void set_popped_free(struct set_popped *x)
{
    for (size_t i = 0; i < x->n; i++)
        free((void *)x->e[i].p);
    free(x->e);
    x->e = NULL;
    x->n = 0;
}

/* ---- a set kept as a table (s->d) */

int set_collect(struct set *s, uint64_t cursor, uint64_t count, uint64_t *next)
{
    struct elems_bag b = {0};
    struct kv_slice m, v;
    size_t off = 0;
    int rc = elems_scan(s->tx, s->d, cursor, count, &b, next);
    if (!rc)
        rc = set_room(s, b.count);
    while (!rc && elems_next(&b, &off, &m, &v))
        s->e[s->n++] = m;
    free(s->raw);
    s->raw = b.p;
    return rc;
}

int set_all(struct set *s)
{
    uint64_t next;
    return s->d && !s->n ? set_collect(s, 0, UINT64_MAX, &next) : 0;
}

int set_count(const struct set *s, uint64_t *n)
{
    *n = s->n;
    return s->d ? dict_count(s->tx, s->d, n) : 0;
}

int set_random(const struct set *s, uint64_t seed, struct kv_slice *m)
{
    return elems_random(s->tx, s->d, seed, m);
}

static struct kv_slice *find(const struct set *s, struct kv_slice m)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].n == m.n && !memcmp(s->e[i].p, m.p, m.n))
            return &s->e[i];
    return NULL;
}

int set_has(const struct set *s, struct kv_slice m)
{
    return s->d ? dict_get(s->tx, s->d, m.p, m.n, NULL, NULL) : find(s, m) != NULL;
}

/* A step of splitmix64: the picks' random numbers from the caller's seed. */
static uint64_t next_rand(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ z >> 27) * 0x94d049bb133111ebULL;
    return z ^ z >> 31;
}

/* A partial Fisher-Yates shuffle. */
void set_pick(struct set *s, size_t n, uint64_t seed)
{
    for (size_t i = 0; n < s->n && i < n; i++) {
        size_t j = i + (size_t)(next_rand(&seed) % (s->n - i));
        struct kv_slice x = s->e[i];
        s->e[i] = s->e[j];
        s->e[j] = x;
    }
}

/* Can m be an intset's member: an integer as Redis writes one? */
static int is_int(struct kv_slice m, long long *v)
{
    long long x;
    return !pack_ll(m.p, m.n, v ? v : &x);
}

int set_insert(struct set *s, struct kv_slice m, const struct set_limits *lim)
{
    int rc = set_room(s, s->n + 1);
    if (rc)
        return rc;
    long long v;
    size_t at = s->n;
    if (s->enc == SET_INTSET && !is_int(m, &v))
        s->enc = SET_HASHTABLE;
    if (s->enc == SET_INTSET) {
        for (at = 0; at < s->n; at++) {
            long long w = 0;
            int ok = is_int(s->e[at], &w);
            assert(ok); /* an intset's members are all integers (SET_INTSET) */
            (void)ok;
            if (w > v)
                break;
        }
        memmove(&s->e[at + 1], &s->e[at], (s->n - at) * sizeof *s->e);
    }
    s->e[at] = m;
    s->n++;
    if (s->enc == SET_INTSET && (long long)s->n > lim->intset_max)
        s->enc = SET_HASHTABLE;
    return 0;
}

void set_start(struct set *s, struct kv_slice first)
{
    s->enc = is_int(first, NULL) ? SET_INTSET : SET_HASHTABLE;
}

static void drop(struct set *s, struct kv_slice *x)
{
    memmove(x, x + 1, (size_t)(s->e + s->n - x - 1) * sizeof *x);
    s->n--;
}

int set_store(kv_txn *t, struct kv_slice key, const struct set *s, uint64_t at,
              const struct set_limits *lim)
{
    if (!s->n) {
        int rc = kv_txn_del(t, key);
        return rc < 0 ? rc : 0;
    }
    if (s->enc == SET_HASHTABLE && s->n > lim->packed_max) {
        txn *tx = kv_txn_tx(t);
        txn_obj *d;
        int rc = dict_new(tx, &d);
        for (size_t i = 0; i < s->n && rc >= 0; i++)
            rc = dict_set(tx, d, s->e[i].p, s->e[i].n, NULL, 0, 1);
        return rc < 0 ? rc : kv_txn_put_dict(t, key, d, at, KV_SET);
    }
    if (s->n > UINT32_MAX)
        return TXN_E_NOSPACE;
    size_t len = SET_HDR;
    for (size_t i = 0; i < s->n; i++)
        len += 4 + s->e[i].n;
    char *p = malloc(len), *q = p + SET_HDR;
    if (!p)
        return TXN_E_NOMEM;
    p[0] = (char)s->enc;
    put32(p + 1, (uint32_t)s->n);
    for (size_t i = 0; i < s->n; i++) {
        put32(q, (uint32_t)s->e[i].n);
        memcpy(q + 4, s->e[i].p, s->e[i].n);
        q += 4 + s->e[i].n;
    }
    int rc = kv_txn_write(t, key, (struct kv_slice){p, len}, at, KV_SET);
    free(p);
    return rc;
}

/* ---- the changes */

int set_add(kv_txn *t, struct kv_slice key, const struct set_limits *lim,
            const struct kv_slice *m, size_t k, uint64_t *added)
{
    struct set s;
    int rc = set_load(t, key, &s), found = rc;
    *added = 0;
    for (size_t i = 0; s.d && i < k && rc >= 0; i++)
        if ((rc = dict_set(s.tx, s.d, m[i].p, m[i].n, NULL, 0, 1)) > 0)
            ++*added;
    if (rc >= 0 && !s.d) {
        rc = 0;
        if (!found)
            set_start(&s, m[0]);
        for (size_t i = 0; i < k && !rc; i++)
            if (!find(&s, m[i]) && !(rc = set_insert(&s, m[i], lim)))
                ++*added;
        if (!rc && *added)
            rc = set_store(t, key, &s, KV_KEEPTTL, lim);
    }
    set_free(&s);
    return rc < 0 ? rc : 0;
}

int set_rem(kv_txn *t, struct kv_slice key, const struct set_limits *lim,
            const struct kv_slice *m, size_t k, uint64_t *removed)
{
    struct set s;
    int rc = set_load(t, key, &s);
    *removed = 0;
    if (rc >= 0 && s.d) {
        rc = elems_del(t, key, s.tx, s.d, m, k, removed);
    } else if (rc >= 0) {
        rc = 0;
        for (size_t i = 0; i < k; i++) {
            struct kv_slice *x = find(&s, m[i]);
            if (x) {
                drop(&s, x);
                ++*removed;
            }
        }
        if (*removed)
            rc = set_store(t, key, &s, KV_KEEPTTL, lim);
    }
    set_free(&s);
    return rc < 0 ? rc : 0;
}

/* Copies of s's members [0, n) into x. */
static int popped(struct set_popped *x, const struct set *s, size_t n)
{
    if (n && !(x->e = calloc(n, sizeof *x->e)))
        return TXN_E_NOMEM;
    for (; x->n < n; x->n++) {
        char *p = malloc(s->e[x->n].n ? s->e[x->n].n : 1);
        if (!p)
            return TXN_E_NOMEM;
        memcpy(p, s->e[x->n].p, s->e[x->n].n);
        x->e[x->n] = (struct kv_slice){p, s->e[x->n].n};
    }
    return 0;
}

/* An intset's members in ascending order again (a shuffle moved them). */
static void intset_order(struct set *s)
{
    for (size_t i = 1; i < s->n; i++)
        for (size_t j = i; j > 0; j--) {
            long long a = 0, b = 0;
            int ok = is_int(s->e[j - 1], &a) && is_int(s->e[j], &b);
            assert(ok); /* an intset's members are all integers (SET_INTSET) */
            (void)ok;
            if (a <= b)
                break;
            struct kv_slice x = s->e[j];
            s->e[j] = s->e[j - 1];
            s->e[j - 1] = x;
        }
}

static int pop_one(kv_txn *t, struct kv_slice key, const struct set_limits *lim, struct set *s,
                   uint64_t seed, struct set_popped *x)
{
    uint64_t gone;
    int rc;
    if (s->d) { /* O(1) */
        struct kv_slice m;
        if ((rc = set_random(s, seed, &m)) <= 0)
            return rc;
        if (!(x->e = malloc(sizeof *x->e))) {
            free((void *)m.p);
            return TXN_E_NOMEM;
        }
        x->e[x->n++] = m;
        return elems_del(t, key, s->tx, s->d, &m, 1, &gone);
    }
    set_pick(s, 1, seed);
    if ((rc = popped(x, s, 1)))
        return rc;
    drop(s, &s->e[0]);
    return set_store(t, key, s, KV_KEEPTTL, lim);
}

int set_pop(kv_txn *t, struct kv_slice key, const struct set_limits *lim, int many,
            uint64_t count, uint64_t seed, struct set_popped *x)
{
    struct set s;
    int rc = set_load(t, key, &s), found = rc;
    memset(x, 0, sizeof *x);
    if (rc <= 0 || (many && !count)) {
    } else if (!many) {
        rc = pop_one(t, key, lim, &s, seed, x);
    } else if (!(rc = set_all(&s))) {
        size_t n = count < s.n ? (size_t)count : s.n, rest = s.n - n;
        set_pick(&s, n, seed);
        rc = popped(x, &s, n);
        if (!rc && rest && rest * 5 <= n) { /* what remains becomes a new set */
            struct set r = {0};
            set_start(&r, s.e[n]);
            for (size_t i = n; i < s.n && !rc; i++)
                rc = set_insert(&r, s.e[i], lim);
            if (!rc)
                rc = set_store(t, key, &r, KV_KEEPTTL, lim);
            free(r.e);
        } else if (!rc && s.d) { /* the members popped leave the table one by one */
            uint64_t gone;
            rc = elems_del(t, key, s.tx, s.d, s.e, n, &gone);
        } else if (!rc) {
            memmove(s.e, s.e + n, rest * sizeof *s.e);
            s.n = rest;
            if (s.enc == SET_INTSET)
                intset_order(&s);
            rc = set_store(t, key, &s, KV_KEEPTTL, lim);
        }
    }
    set_free(&s);
    return rc < 0 ? rc : found;
}

int set_move(kv_txn *t, struct kv_slice src, struct kv_slice dst, const struct set_limits *lim,
             struct kv_slice m)
{
    struct set from, to;
    int rc = set_load(t, src, &from), rd = 0;
    if (rc > 0)
        rd = set_load(t, dst, &to);
    else
        memset(&to, 0, sizeof to);
    if (rc > 0 && rd < 0)
        rc = rd;
    if (rc > 0 && (rc = set_has(&from, m)) > 0 &&
        !(src.n == dst.n && !memcmp(src.p, dst.p, src.n))) {
        /* out of the source (a table's emptied one deleted) ... */
        uint64_t gone;
        if (from.d) {
            rc = elems_del(t, src, from.tx, from.d, &m, 1, &gone);
        } else {
            drop(&from, find(&from, m));
            rc = set_store(t, src, &from, KV_KEEPTTL, lim);
        }
        /* ... into the destination */
        if (!rc && to.d) {
            rc = dict_set(to.tx, to.d, m.p, m.n, NULL, 0, 1);
        } else if (!rc) {
            if (!rd)
                set_start(&to, m);
            if (!find(&to, m))
                rc = set_insert(&to, m, lim);
            if (!rc)
                rc = set_store(t, dst, &to, KV_KEEPTTL, lim);
        }
        rc = rc < 0 ? rc : 1;
    }
    set_free(&from);
    set_free(&to);
    return rc;
}
