/* hash.c - hashes in the store (hash.h): their forms, read and changed
 * inside the caller's kv_txn, below the commands (t_hash.c), so that the
 * crash simulator's workload runs the same code.
 *
 * A hash is one value of type KV_HASH: a 4-byte field count, then per
 * field a 4-byte length, the field, a 4-byte length, the value (little
 * endian), in the order the fields were added, as Redis's listpack keeps a
 * small hash. A change writes the record again, so a command on a hash of
 * n bytes costs O(n): docs/kvstore.md says why and what it means.
 *
 * Past the limits' entries, or with a field or value longer than their
 * value bytes (Redis's hashTypeTryConversion and hashTypeConvert), the
 * hash becomes an element table (t_dict.h) in the command's transaction:
 * the table made and filled, the key pointed at it and the record freed
 * commit together. From then on a field's change costs O(1) pool writes;
 * the table stays a table (as Redis's hashtable never goes back to a
 * listpack) until the hash empties. An emptied hash is deleted, as in
 * Redis. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elems.h"
#include "hash.h"
#include "t_dict.h"

static int room(struct hash *h, size_t n)
{
    void *e = h->e;
    int rc = pack_room(&e, &h->cap, n, sizeof *h->e);
    h->e = e;
    return rc;
}

/* Split the record into fields; a record that does not parse is damage. */
static int decode(struct hash *h, size_t rawn)
{
    const char *p = h->raw, *end = p + rawn;
    if (rawn < 4)
        return TXN_E_CORRUPT;
    size_t n = get32(p);
    p += 4;
    if (n > rawn / 8)
        return TXN_E_CORRUPT;
    int rc = room(h, n);
    for (size_t i = 0; i < n && !rc; i++) {
        struct kv_slice s[2];
        for (int j = 0; j < 2; j++) {
            if (end - p < 4 || (size_t)(end - p - 4) < get32(p))
                return TXN_E_CORRUPT;
            s[j] = (struct kv_slice){p + 4, get32(p)};
            p += 4 + s[j].n;
        }
        h->e[h->n++] = (struct hash_field){s[0], s[1]};
    }
    return rc ? rc : p == end ? 0 : TXN_E_CORRUPT;
}

int hash_load(kv_txn *t, struct kv_slice key, struct hash *h)
{
    struct pack_val x;
    memset(h, 0, sizeof *h);
    int rc = elems_load(t, key, KV_HASH, &h->d, &h->tx, &x);
    h->raw = x.p;
    if (rc == 1 && (rc = decode(h, x.n)) == 0)
        rc = 1;
    return rc == 2 ? 1 : rc;
}

void hash_free(struct hash *h)
{
    free(h->raw);
    free(h->e);
}

static struct hash_field *find(const struct hash *h, struct kv_slice f)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->e[i].f.n == f.n && !memcmp(h->e[i].f.p, f.p, f.n))
            return &h->e[i];
    return NULL;
}

/* Does a packed hash of these fields pass the limits? */
static int too_big(const struct hash *h, const struct hash_limits *lim)
{
    if ((long long)h->n > lim->entries)
        return 1;
    for (size_t i = 0; i < h->n; i++)
        if ((long long)h->e[i].f.n > lim->value || (long long)h->e[i].v.n > lim->value)
            return 1;
    return 0;
}

/* The packed hash h as a table that the key then holds (its expiry
 * kept), in t: the conversion, one transaction with the command. */
static int convert(kv_txn *t, struct kv_slice key, const struct hash *h)
{
    txn *tx = kv_txn_tx(t);
    txn_obj *d;
    int rc = dict_new(tx, &d);
    for (size_t i = 0; i < h->n && rc >= 0; i++)
        rc = dict_set(tx, d, h->e[i].f.p, h->e[i].f.n, h->e[i].v.p, h->e[i].v.n, 0);
    return rc < 0 ? rc : kv_txn_put_dict(t, key, d, KV_KEEPTTL, KV_HASH);
}

/* Write the hash back (its expiry kept): packed, or as a table past the
 * limits; or delete the key if it is empty. */
static int store(kv_txn *t, struct kv_slice key, const struct hash *h,
                 const struct hash_limits *lim)
{
    if (!h->n) {
        int rc = kv_txn_del(t, key);
        return rc < 0 ? rc : 0;
    }
    if (too_big(h, lim))
        return convert(t, key, h);
    size_t len = 4;
    for (size_t i = 0; i < h->n; i++)
        len += 8 + h->e[i].f.n + h->e[i].v.n;
    if (h->n > UINT32_MAX)
        return TXN_E_NOSPACE;
    char *p = malloc(len), *q = p;
    if (!p)
        return TXN_E_NOMEM;
    put32(q, (uint32_t)h->n);
    q += 4;
    for (size_t i = 0; i < h->n; i++) {
        const struct kv_slice *s = &h->e[i].f;
        for (int j = 0; j < 2; j++, s = &h->e[i].v) {
            put32(q, (uint32_t)s->n);
            memcpy(q + 4, s->p, s->n);
            q += 4 + s->n;
        }
    }
    int rc = kv_txn_write(t, key, (struct kv_slice){p, len}, KV_KEEPTTL, KV_HASH);
    free(p);
    return rc;
}

/* ---- a hash kept as a table (h->d) */

int hash_collect(struct hash *h, uint64_t cursor, uint64_t count, uint64_t *next)
{
    struct elems_bag b = {0};
    struct hash_field x;
    size_t off = 0;
    int rc = elems_scan(h->tx, h->d, cursor, count, &b, next);
    if (!rc)
        rc = room(h, b.count);
    while (!rc && elems_next(&b, &off, &x.f, &x.v))
        h->e[h->n++] = x;
    free(h->raw);
    h->raw = b.p;
    return rc;
}

int hash_all(struct hash *h)
{
    uint64_t next;
    return h->d ? hash_collect(h, 0, UINT64_MAX, &next) : 0;
}

int hash_count(const struct hash *h, uint64_t *n)
{
    *n = h->n;
    return h->d ? dict_count(h->tx, h->d, n) : 0;
}

int hash_random(const struct hash *h, uint64_t seed, struct kv_slice *f)
{
    return elems_random(h->tx, h->d, seed, f);
}

/* A copy of a table's value (dict_get's callback). */
struct copy {
    char *p;
    size_t n;
    int oom;
};

static void val_elem(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    (void)f, (void)fn;
    struct copy *x = arg;
    x->p = malloc(vn ? vn : 1);
    x->oom = !x->p;
    if (x->p)
        memcpy(x->p, v, vn);
    x->n = vn;
}

int hash_get(const struct hash *h, struct kv_slice f, struct kv_slice *v, char **copy)
{
    *copy = NULL;
    if (!h->d) {
        const struct hash_field *x = find(h, f);
        if (x)
            *v = x->v;
        return x != NULL;
    }
    struct copy x = {0};
    int rc = dict_get(h->tx, h->d, f.p, f.n, val_elem, &x);
    if (rc > 0 && x.oom)
        return TXN_E_NOMEM;
    *copy = x.p;
    *v = (struct kv_slice){x.p, x.n};
    return rc;
}

/* Set field f of packed h to v: 1 added, 0 replaced, <0. */
static int set_field(struct hash *h, struct kv_slice f, struct kv_slice v)
{
    struct hash_field *x = find(h, f);
    if (x) {
        x->v = v;
        return 0;
    }
    int rc = room(h, h->n + 1);
    if (rc)
        return rc;
    h->e[h->n++] = (struct hash_field){f, v};
    return 1;
}

/* ---- the changes */

int hash_set_fields(kv_txn *t, struct kv_slice key, const struct hash_limits *lim,
                    const struct kv_slice *fv, size_t k, int nx, uint64_t *added)
{
    struct hash h;
    int rc = hash_load(t, key, &h);
    *added = 0;
    for (size_t i = 0; i < k && rc >= 0; i++) {
        const struct kv_slice *f = &fv[2 * i], *v = &fv[2 * i + 1];
        if (h.d)
            rc = dict_set(h.tx, h.d, f->p, f->n, v->p, v->n, nx);
        else
            rc = nx && find(&h, *f) ? 0 : set_field(&h, *f, *v);
        if (rc > 0)
            ++*added;
    }
    /* HSETNX that found its field writes nothing */
    if (rc >= 0 && !h.d && (!nx || *added))
        rc = store(t, key, &h, lim);
    hash_free(&h);
    return rc < 0 ? rc : 0;
}

int hash_del_fields(kv_txn *t, struct kv_slice key, const struct hash_limits *lim,
                    const struct kv_slice *f, size_t k, uint64_t *removed)
{
    struct hash h;
    int rc = hash_load(t, key, &h);
    *removed = 0;
    if (rc >= 0 && h.d) {
        rc = elems_del(t, key, h.tx, h.d, f, k, removed);
    } else if (rc >= 0) {
        rc = 0;
        for (size_t i = 0; i < k; i++) {
            struct hash_field *x = find(&h, f[i]);
            if (x) {
                memmove(x, x + 1, (size_t)(h.e + h.n - x - 1) * sizeof *x);
                h.n--;
                ++*removed;
            }
        }
        if (*removed)
            rc = store(t, key, &h, lim);
    }
    hash_free(&h);
    return rc < 0 ? rc : 0;
}

int hash_update(kv_txn *t, struct kv_slice key, const struct hash_limits *lim, struct kv_slice f,
                hash_update_fn fn, void *arg)
{
    struct hash h;
    struct kv_slice from, to;
    char *copy = NULL;
    int rc = hash_load(t, key, &h);
    if (rc >= 0 && (rc = hash_get(&h, f, &from, &copy)) >= 0 &&
        !(rc = fn(arg, rc ? &from : NULL, &to))) {
        if (h.d)
            rc = dict_set(h.tx, h.d, f.p, f.n, to.p, to.n, 0);
        else if ((rc = set_field(&h, f, to)) >= 0)
            rc = store(t, key, &h, lim);
        rc = rc < 0 ? rc : 0;
    }
    free(copy);
    hash_free(&h);
    return rc;
}

struct incr {
    long long by, now;
    char buf[24];
};

static int incr_fn(void *arg, const struct kv_slice *from, struct kv_slice *to)
{
    struct incr *in = arg;
    long long cur = 0;
    if (from && pack_ll(from->p, from->n, &cur))
        return HASH_NOT_INT;
    if ((in->by > 0 && cur > LLONG_MAX - in->by) || (in->by < 0 && cur < LLONG_MIN - in->by))
        return HASH_OVERFLOW;
    in->now = cur + in->by;
    *to = (struct kv_slice){in->buf, (size_t)snprintf(in->buf, sizeof in->buf, "%lld", in->now)};
    return 0;
}

int hash_incr(kv_txn *t, struct kv_slice key, const struct hash_limits *lim, struct kv_slice f,
              long long by, long long *now)
{
    struct incr in = {by, 0, {0}};
    int rc = hash_update(t, key, lim, f, incr_fn, &in);
    *now = in.now;
    return rc;
}
