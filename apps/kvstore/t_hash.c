/* t_hash.c - the hash commands (HSET ... HSCAN): Redis 7.0's replies and
 * error texts, each in one store transaction (its own or EXEC's).
 *
 * A hash is one value of type KV_HASH: a 4-byte field count, then per
 * field a 4-byte length, the field, a 4-byte length, the value (little
 * endian), in the order the fields were added, as Redis's listpack keeps a
 * small hash. A change writes the record again, so a command on a hash of
 * n bytes costs O(n): docs/kvstore.md says why and what it means.
 *
 * Past hash-max-listpack-entries fields, or with a field or value longer
 * than hash-max-listpack-value bytes (Redis's hashTypeTryConversion and
 * hashTypeConvert), the hash becomes an element table (t_dict.h) in the
 * command's transaction: the table made and filled, the key pointed at it
 * and the record freed commit together. From then on a field's change
 * costs O(1) pool writes; the table stays a table (as Redis's hashtable
 * never goes back to a listpack) until the hash empties. OBJECT ENCODING
 * says "hashtable". An emptied hash is deleted, as in Redis. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "t_dict.h"
#include "t_pack.h"
#include "t_hash.h"

struct field {
    struct kv_slice f, v;
};

/* A hash read out of the store: its fields point into `raw` or, once
 * changed, into the request's arguments. A table's (d) fields stay in the
 * pool; only the commands that give every field read them out (all()). */
struct hash {
    struct val raw;
    struct field *e;
    size_t n, cap;
    txn_obj *d; /* the element table, or NULL: packed */
    txn *tx;    /* the transaction d is read and written in */
};

static int room(struct hash *h, size_t n)
{
    void *e = h->e;
    int rc = pack_room(&e, &h->cap, n, sizeof *h->e);
    h->e = e;
    return rc;
}

/* Split the record into fields; a record that does not parse is damage. */
static int decode(struct hash *h)
{
    const char *p = h->raw.p, *end = p + h->raw.n;
    if (h->raw.n < 4)
        return TXN_E_CORRUPT;
    size_t n = get32(p);
    p += 4;
    if (n > h->raw.n / 8)
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
        h->e[h->n++] = (struct field){s[0], s[1]};
    }
    return rc ? rc : p == end ? 0 : TXN_E_CORRUPT;
}

/* Load argv[1]'s hash: 1 (h filled), 0 missing (h empty), <0 an error
 * (KV_E_WRONGTYPE for another type). */
static int load(kv_txn *t, struct kv_slice key, struct hash *h)
{
    unsigned type;
    memset(h, 0, sizeof *h);
    int rc = kv_txn_dict(t, key, &type, &h->d);
    if (rc > 0) {
        h->tx = kv_txn_tx(t);
        return type == KV_HASH ? 1 : KV_E_WRONGTYPE;
    }
    if (rc < 0)
        return rc;
    rc = get_any(t, key, &h->raw, &type);
    if (rc <= 0)
        return rc;
    if (type != KV_HASH)
        return KV_E_WRONGTYPE;
    return (rc = decode(h)) ? rc : 1;
}

static void hash_free(struct hash *h)
{
    free(h->raw.p);
    free(h->e);
}

static struct field *find(struct hash *h, struct kv_slice f)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->e[i].f.n == f.n && !memcmp(h->e[i].f.p, f.p, f.n))
            return &h->e[i];
    return NULL;
}

/* Does a packed hash of these fields pass the thresholds? */
static int too_big(const struct hash *h)
{
    long long most = atomic_load(&cfg.hash_max_listpack_entries);
    long long longest = atomic_load(&cfg.hash_max_listpack_value);
    if ((long long)h->n > most)
        return 1;
    for (size_t i = 0; i < h->n; i++)
        if ((long long)h->e[i].f.n > longest || (long long)h->e[i].v.n > longest)
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
 * thresholds; or delete the key if it is empty. */
static int store(kv_txn *t, struct kv_slice key, const struct hash *h)
{
    if (!h->n) {
        int rc = kv_txn_del(t, key);
        return rc < 0 ? rc : 0;
    }
    if (too_big(h))
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

/* Copies of elements, one after another in a growing buffer. */
struct bag {
    char *p;
    size_t n, cap, count;
    int oom;
};

static void bag_put(struct bag *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void bag_elem(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    struct bag *b = arg;
    size_t lens[2] = {fn, vn};
    bag_put(b, lens, sizeof lens);
    bag_put(b, f, fn);
    bag_put(b, v, vn);
    b->count++;
}

/* The table's fields of the buckets from `cursor` on (at least `count`
 * of them, or to the end: dict_scan) into h->e, copies that h->raw owns;
 * *next: dict_scan's. */
static int collect(struct hash *h, uint64_t cursor, uint64_t count, uint64_t *next)
{
    struct bag b = {0};
    int rc = dict_scan(h->tx, h->d, cursor, count, bag_elem, &b, next);
    if (!rc && b.oom)
        rc = TXN_E_NOMEM;
    if (!rc)
        rc = room(h, b.count);
    for (size_t off = 0; !rc && off < b.n;) {
        size_t lens[2];
        memcpy(lens, b.p + off, sizeof lens);
        off += sizeof lens;
        h->e[h->n].f = (struct kv_slice){b.p + off, lens[0]};
        h->e[h->n].v = (struct kv_slice){b.p + off + lens[0], lens[1]};
        h->n++;
        off += lens[0] + lens[1];
    }
    free(h->raw.p);
    h->raw.p = b.p;
    return rc;
}

/* Every field of a table into h->e (HGETALL, HRANDFIELD: O(n) as in
 * Redis). */
static int all(struct hash *h)
{
    uint64_t next;
    return h->d ? collect(h, 0, UINT64_MAX, &next) : 0;
}

static void val_elem(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    (void)f, (void)fn;
    struct val *x = arg;
    x->p = malloc(vn ? vn : 1);
    x->oom = !x->p;
    if (x->p)
        memcpy(x->p, v, vn);
    x->n = vn;
}

/* Field f of a table: a copy in *x (free x->p): 1 found, 0 missing. */
static int dget(const struct hash *h, struct kv_slice f, struct val *x)
{
    memset(x, 0, sizeof *x);
    int rc = dict_get(h->tx, h->d, f.p, f.n, val_elem, x);
    return rc > 0 && x->oom ? TXN_E_NOMEM : rc;
}

/* After a table lost fields: the key goes with its last one. */
static int dict_emptied(kv_txn *t, struct kv_slice key, const struct hash *h)
{
    uint64_t n;
    int rc = dict_count(h->tx, h->d, &n);
    if (!rc && !n && (rc = kv_txn_del(t, key)) > 0)
        rc = 0;
    return rc;
}

/* Set field f to v: 1 added, 0 replaced, <0. */
static int set_field(struct hash *h, struct kv_slice f, struct kv_slice v)
{
    struct field *x = find(h, f);
    if (x) {
        x->v = v;
        return 0;
    }
    int rc = room(h, h->n + 1);
    if (rc)
        return rc;
    h->e[h->n++] = (struct field){f, v};
    return 1;
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
    int rc = load(t, argv[1], &h);
    if (rc >= 0)
        rc = fn(c, argc, argv, t, &h, rc, ctx);
    hash_free(&h);
    return rc;
}

#define HASH_FN(name)                                                                         \
    static int name(struct conn *c, size_t argc, struct kv_slice *argv, kv_txn *t,            \
                    struct hash *h, int found, const void *ctx)

/* HSET key field value [field value ...]; HMSET (replies OK) */
HASH_FN(hset)
{
    (void)found, (void)ctx;
    long long added = 0;
    int rc = 0;
    for (size_t i = 2; i < argc && rc >= 0; i += 2)
        if ((rc = h->d ? dict_set(h->tx, h->d, argv[i].p, argv[i].n, argv[i + 1].p,
                                  argv[i + 1].n, 0)
                       : set_field(h, argv[i], argv[i + 1])) > 0)
            added++;
    if (rc >= 0 && !(rc = h->d ? 0 : store(t, argv[1], h)))
        arg_is(&argv[0], "hmset") ? reply_simple(&c->out, "OK") : reply_int(&c->out, added);
    return rc;
}

static int cmd_hset(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    if (argc % 2)
        return reply_error(&c->out, "ERR wrong number of arguments for '%s' command",
                           arg_is(&argv[0], "hmset") ? "hmset" : "hset"), 0;
    return with_hash(c, t, argc, argv, hset, NULL);
}

HASH_FN(hsetnx)
{
    (void)argc, (void)found, (void)ctx;
    int rc = 0;
    if (h->d) {
        if ((rc = dict_set(h->tx, h->d, argv[2].p, argv[2].n, argv[3].p, argv[3].n, 1)) >= 0)
            reply_int(&c->out, rc), rc = 0;
    } else if (find(h, argv[2]))
        reply_int(&c->out, 0);
    else if ((rc = set_field(h, argv[2], argv[3])) >= 0 && !(rc = store(t, argv[1], h)))
        reply_int(&c->out, 1);
    return rc;
}

static int cmd_hsetnx(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_hash(c, t, argc, argv, hsetnx, NULL);
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
        struct field *x = find(h, argv[i]), got;
        struct val xv = {0};
        if (h->d) {
            int rc = dget(h, argv[i], &xv);
            if (rc < 0)
                return rc;
            got = (struct field){argv[i], {xv.p, xv.n}};
            x = rc ? &got : NULL;
        }
        if (what == 'e')
            reply_int(&c->out, x != NULL);
        else if (what == 'l')
            reply_int(&c->out, x ? (long long)x->v.n : 0);
        else if (x)
            reply_bulk(&c->out, x->v.p, x->v.n);
        else
            reply_nil(&c->out);
        free(xv.p);
    }
    return 0;
}

static int cmd_hget(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_hash(c, t, argc, argv, lookup_fields, NULL);
}

HASH_FN(hdel)
{
    (void)found, (void)ctx;
    long long n = 0;
    int rc = 0;
    for (size_t i = 2; h->d && i < argc && rc >= 0; i++)
        if ((rc = dict_del(h->tx, h->d, argv[i].p, argv[i].n)) > 0)
            n++;
    if (h->d) {
        if (rc >= 0 && !(rc = dict_emptied(t, argv[1], h)))
            reply_int(&c->out, n);
        return rc;
    }
    for (size_t i = 2; i < argc; i++) {
        struct field *x = find(h, argv[i]);
        if (x) {
            memmove(x, x + 1, (size_t)(h->e + h->n - x - 1) * sizeof *x);
            h->n--;
            n++;
        }
    }
    if (!n || !(rc = store(t, argv[1], h)))
        reply_int(&c->out, n);
    return rc;
}

static int cmd_hdel(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_hash(c, t, argc, argv, hdel, NULL);
}

HASH_FN(hlen)
{
    (void)argc, (void)argv, (void)t, (void)found, (void)ctx;
    uint64_t n = h->n;
    int rc = h->d ? dict_count(h->tx, h->d, &n) : 0;
    if (!rc)
        reply_int(&c->out, (long long)n);
    return rc;
}

static int cmd_hlen(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_hash(c, t, argc, argv, hlen, NULL);
}

/* HINCRBY key field by; HINCRBYFLOAT: the field as a number, changed */
struct incr {
    int fl;
    long long by;
    long double fby;
};

HASH_FN(incr_field)
{
    (void)argc, (void)found;
    const struct incr *in = ctx;
    long long cur = 0;
    long double fcur = 0;
    char buf[LD_CHARS];
    int rc = 0, n;
    struct field *x = find(h, argv[2]), got;
    struct val xv = {0};
    if (h->d) {
        if ((rc = dget(h, argv[2], &xv)) < 0)
            return rc;
        got = (struct field){argv[2], {xv.p, xv.n}};
        x = rc ? &got : NULL;
        rc = 0;
    }
    if (!in->fl && x && parse_ll(&x->v, &cur)) {
        reply_error(&c->out, "ERR hash value is not an integer");
    } else if (!in->fl && ((in->by > 0 && cur > LLONG_MAX - in->by) ||
                           (in->by < 0 && cur < LLONG_MIN - in->by))) {
        reply_error(&c->out, "ERR increment or decrement would overflow");
    } else if (in->fl && x && parse_ld(x->v.p, x->v.n, &fcur)) {
        reply_error(&c->out, "ERR hash value is not a float");
    } else if (in->fl && (isnan(fcur + in->fby) || isinf(fcur + in->fby))) {
        reply_error(&c->out, "ERR increment would produce NaN or Infinity");
    } else {
        n = in->fl ? format_ld(fcur + in->fby, buf)
                   : snprintf(buf, sizeof buf, "%lld", cur + in->by);
        if (h->d)
            rc = dict_set(h->tx, h->d, argv[2].p, argv[2].n, buf, (size_t)n, 0);
        else if ((rc = set_field(h, argv[2], (struct kv_slice){buf, (size_t)n})) >= 0)
            rc = store(t, argv[1], h);
        if (rc >= 0) {
            rc = 0;
            in->fl ? reply_bulk(&c->out, buf, (size_t)n) : reply_int(&c->out, cur + in->by);
        }
    }
    free(xv.p);
    return rc;
}

static int cmd_hincrby(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    struct incr in = {arg_is(&argv[0], "hincrbyfloat"), 0, 0};
    if (!in.fl && parse_ll(&argv[3], &in.by))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    if (in.fl && parse_ld(argv[3].p, argv[3].n, &in.fby))
        return reply_error(&c->out, "ERR value is not a valid float"), 0;
    if (in.fl && isinf(in.fby))
        return reply_error(&c->out, "ERR value is NaN or Infinity"), 0;
    return with_hash(c, t, argc, argv, incr_field, &in);
}

static void reply_field(struct buf *b, const struct field *x, int values)
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
    int rc = all(h);
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
    struct bag one = {0};
    if (argc < 3 && h->d) { /* one field: O(1) */
        if ((rc = dict_random(h->tx, h->d, (uint64_t)random() << 31 ^ (uint64_t)random(),
                              bag_elem, &one)) >= 0 && one.oom)
            rc = TXN_E_NOMEM;
        size_t lens[2];
        if (rc > 0) {
            memcpy(lens, one.p, sizeof lens);
            reply_bulk(&c->out, one.p + sizeof lens, lens[0]);
        } else if (!rc) {
            reply_nil(&c->out);
        }
        free(one.p);
        return rc < 0 ? rc : 0;
    }
    if ((rc = all(h)))
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
            struct field x = h->e[i];
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
    int rc = h->d ? collect(h, *(const uint64_t *)ctx, (uint64_t)count, &next) : 0;
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
