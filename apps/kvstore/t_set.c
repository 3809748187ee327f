/* t_set.c - the set commands (SADD ... SSCAN): Redis 7.0's replies and
 * error texts, each in one store transaction (its own or EXEC's).
 *
 * A set is one value of type KV_SET: a byte saying which encoding Redis
 * would have given the set (SET_INTSET or SET_HASHTABLE: OBJECT ENCODING
 * answers it), a 4-byte member count, then per member a 4-byte length and
 * the member (little endian). An intset's members are integers kept in
 * ascending order, as Redis's intset keeps them; a hashtable's are in the
 * order they were added. A change writes the record again, so a command
 * costs O(the set's bytes), as a hash's does (t_hash.c).
 *
 * A set that Redis keeps as a hashtable (not an intset) becomes an element
 * table (t_dict.h) past SET_PACKED_MAX members, in the command's
 * transaction, as a hash past its thresholds (t_hash.c): then a member's
 * change costs O(1) pool writes. Redis 7.0 has no parameter for this step
 * (its hashtable sets are tables at every size; 7.2's
 * set-max-listpack-entries is 128), so it is a constant: OBJECT ENCODING
 * says "hashtable" either side of it. An emptied set is deleted, as in
 * Redis. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "t_dict.h"
#include "t_pack.h"
#include "t_set.h"

enum { SET_INTSET = 0, SET_HASHTABLE = 1 };
#define SET_HDR 5 /* the encoding byte and the count */
#define SET_PACKED_MAX 128 /* a hashtable set's most members packed */

/* A set read out of the store (or being built): members point into the
 * records read (raw) or into the request's arguments. */
struct set {
    struct val raw;
    int enc;
    struct kv_slice *e;
    size_t n, cap;
    txn_obj *d; /* the element table, or NULL: packed (members in e) */
    txn *tx;    /* the transaction d is read and written in */
};

static int room(struct set *s, size_t n)
{
    void *e = s->e;
    int rc = pack_room(&e, &s->cap, n, sizeof *s->e);
    s->e = e;
    return rc;
}

/* Split the record into members; a record that does not parse is damage. */
static int decode(struct set *s)
{
    const char *p = s->raw.p, *end = p + s->raw.n;
    if (s->raw.n < SET_HDR || (unsigned char)p[0] > SET_HASHTABLE)
        return TXN_E_CORRUPT;
    s->enc = p[0];
    size_t n = get32(p + 1);
    p += SET_HDR;
    if (n > s->raw.n / 4)
        return TXN_E_CORRUPT;
    int rc = room(s, n);
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

/* Load key's set: 1 (s filled), 0 missing (s empty), <0 an error
 * (KV_E_WRONGTYPE for another type). */
static int load(kv_txn *t, struct kv_slice key, struct set *s)
{
    unsigned type;
    memset(s, 0, sizeof *s);
    int rc = kv_txn_dict(t, key, &type, &s->d);
    if (rc > 0) {
        s->tx = kv_txn_tx(t);
        s->enc = SET_HASHTABLE;
        return type == KV_SET ? 1 : KV_E_WRONGTYPE;
    }
    if (rc < 0)
        return rc;
    rc = get_any(t, key, &s->raw, &type);
    if (rc <= 0)
        return rc;
    if (type != KV_SET)
        return KV_E_WRONGTYPE;
    return (rc = decode(s)) ? rc : 1;
}

static void set_free(struct set *s)
{
    free(s->raw.p);
    free(s->e);
}

/* ---- a set kept as a table (s->d) */

/* Copies of members, one after another in a growing buffer. */
struct bag {
    char *p;
    size_t n, cap, count;
    int oom;
};

static void bag_elem(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    (void)v, (void)vn;
    struct bag *b = arg;
    if (b->oom)
        return;
    if (b->n + sizeof fn + fn > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + sizeof fn + fn)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, &fn, sizeof fn);
    memcpy(b->p + b->n + sizeof fn, f, fn);
    b->n += sizeof fn + fn;
    b->count++;
}

static int room(struct set *s, size_t n);

/* The table's members of the buckets from `cursor` on (at least `count`,
 * or to the end: dict_scan) into s->e, copies that s->raw owns; *next:
 * dict_scan's. */
static int collect(struct set *s, uint64_t cursor, uint64_t count, uint64_t *next)
{
    struct bag b = {0};
    int rc = dict_scan(s->tx, s->d, cursor, count, bag_elem, &b, next);
    if (!rc && b.oom)
        rc = TXN_E_NOMEM;
    if (!rc)
        rc = room(s, b.count);
    for (size_t off = 0; !rc && off < b.n;) {
        size_t n;
        memcpy(&n, b.p + off, sizeof n);
        s->e[s->n++] = (struct kv_slice){b.p + off + sizeof n, n};
        off += sizeof n + n;
    }
    free(s->raw.p);
    s->raw.p = b.p;
    return rc;
}

/* Every member of a table into s->e (SMEMBERS, SPOP and SRANDMEMBER with
 * a count, the set operations: O(n) as in Redis). */
static int all(struct set *s)
{
    uint64_t next;
    return s->d && !s->n ? collect(s, 0, UINT64_MAX, &next) : 0;
}

/* Is m a member: 1, 0, or an error (a table's lookup). */
static int has(const struct set *s, struct kv_slice m);
static int union_rest(struct set *sets, size_t n, struct set *r);

/* After a table lost members: the key goes with its last one. */
static int dict_emptied(kv_txn *t, struct kv_slice key, const struct set *s)
{
    uint64_t n;
    int rc = dict_count(s->tx, s->d, &n);
    if (!rc && !n && (rc = kv_txn_del(t, key)) > 0)
        rc = 0;
    return rc;
}

static struct kv_slice *find(const struct set *s, struct kv_slice m)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].n == m.n && !memcmp(s->e[i].p, m.p, m.n))
            return &s->e[i];
    return NULL;
}

static int has(const struct set *s, struct kv_slice m)
{
    return s->d ? dict_get(s->tx, s->d, m.p, m.n, NULL, NULL) : find(s, m) != NULL;
}

/* Can m be an intset's member: an integer as Redis writes one (its
 * string2ll: no sign but '-', no leading zero, no spaces)? */
static int is_int(struct kv_slice m, long long *v)
{
    long long x;
    if (m.n >= 2 && m.p[0] == '-' && m.p[1] == '0') /* "-0": parse_ll takes it */
        return 0;
    return !parse_ll(&m, v ? v : &x);
}

/* Add m (not in s) to s: intset order kept, and the encoding changes as
 * Redis's setTypeAdd changes it: to a hashtable when a member is not an
 * integer or the count passes set-max-intset-entries (never back). */
static int add(struct set *s, struct kv_slice m)
{
    int rc = room(s, s->n + 1);
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
    if (s->enc == SET_INTSET && (long long)s->n > atomic_load(&cfg.set_max_intset_entries))
        s->enc = SET_HASHTABLE;
    return 0;
}

/* A new set's encoding is its first member's (Redis's setTypeCreate) */
static void start(struct set *s, struct kv_slice first)
{
    s->enc = is_int(first, NULL) ? SET_INTSET : SET_HASHTABLE;
}

static void drop(struct set *s, struct kv_slice *x)
{
    memmove(x, x + 1, (size_t)(s->e + s->n - x - 1) * sizeof *x);
    s->n--;
}

/* Write the set (expiry: `at`, KV_KEEPTTL to keep it): packed, or as a
 * new table past SET_PACKED_MAX (the conversion, in the command's
 * transaction); or delete the key if it is empty. */
static int store(kv_txn *t, struct kv_slice key, const struct set *s, uint64_t at)
{
    if (!s->n) {
        int rc = kv_txn_del(t, key);
        return rc < 0 ? rc : 0;
    }
    if (s->enc == SET_HASHTABLE && s->n > SET_PACKED_MAX) {
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

static void reply_members(struct buf *b, const struct set *s)
{
    reply_array(b, s->n);
    for (size_t i = 0; i < s->n; i++)
        reply_bulk(b, s->e[i].p, s->e[i].n);
}

/* Run a command on the set at argv[1] in its transaction t: the set
 * loaded (found: 1, or 0 with s empty), fn's reply and result (<0 a store
 * error: nothing of the command stays). */
typedef int (*set_fn)(struct conn *c, size_t argc, struct kv_slice *argv, kv_txn *t,
                      struct set *s, int found, const void *ctx);

static int with_set(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv, set_fn fn,
                    const void *ctx)
{
    struct set s;
    int rc = load(t, argv[1], &s);
    if (rc >= 0)
        rc = fn(c, argc, argv, t, &s, rc, ctx);
    set_free(&s);
    return rc;
}

#define SET_FN(name)                                                                          \
    static int name(struct conn *c, size_t argc, struct kv_slice *argv, kv_txn *t,            \
                    struct set *s, int found, const void *ctx)

/* SADD key member [member ...] */
SET_FN(sadd)
{
    (void)ctx;
    long long added = 0;
    int rc = 0;
    for (size_t i = 2; s->d && i < argc && rc >= 0; i++)
        if ((rc = dict_set(s->tx, s->d, argv[i].p, argv[i].n, NULL, 0, 1)) > 0)
            added++;
    if (s->d) {
        if (rc >= 0)
            reply_int(&c->out, added), rc = 0;
        return rc;
    }
    if (!found)
        start(s, argv[2]);
    for (size_t i = 2; i < argc && !rc; i++)
        if (!find(s, argv[i]) && !(rc = add(s, argv[i])))
            added++;
    if (!rc && (!added || !(rc = store(t, argv[1], s, KV_KEEPTTL))))
        reply_int(&c->out, added);
    return rc;
}

/* SREM key member [member ...] */
SET_FN(srem)
{
    (void)found, (void)ctx;
    long long n = 0;
    int rc = 0;
    for (size_t i = 2; s->d && i < argc && rc >= 0; i++)
        if ((rc = dict_del(s->tx, s->d, argv[i].p, argv[i].n)) > 0)
            n++;
    if (s->d) {
        if (rc >= 0 && !(rc = dict_emptied(t, argv[1], s)))
            reply_int(&c->out, n);
        return rc;
    }
    for (size_t i = 2; i < argc; i++) {
        struct kv_slice *x = find(s, argv[i]);
        if (x) {
            drop(s, x);
            n++;
        }
    }
    if (!n || !(rc = store(t, argv[1], s, KV_KEEPTTL)))
        reply_int(&c->out, n);
    return rc;
}

/* SCARD, SISMEMBER, SMISMEMBER, SMEMBERS: reads */
SET_FN(lookup)
{
    (void)t, (void)found, (void)ctx;
    int rc = 0;
    if (arg_is(&argv[0], "scard")) {
        uint64_t n = s->n;
        if (!s->d || !(rc = dict_count(s->tx, s->d, &n)))
            reply_int(&c->out, (long long)n);
    } else if (arg_is(&argv[0], "sismember")) {
        if ((rc = has(s, argv[2])) >= 0)
            reply_int(&c->out, rc), rc = 0;
    } else if (arg_is(&argv[0], "smismember")) {
        /* looked up first: an error leaves no half reply */
        char *in = malloc(argc);
        if (!in)
            return TXN_E_NOMEM;
        for (size_t i = 2; i < argc && rc >= 0; i++)
            in[i] = (char)(rc = has(s, argv[i]));
        if (rc >= 0) {
            rc = 0;
            reply_array(&c->out, argc - 2);
            for (size_t i = 2; i < argc; i++)
                reply_int(&c->out, in[i]);
        }
        free(in);
    } else if (!(rc = all(s))) {
        reply_members(&c->out, s);
    }
    return rc;
}

static int cmd_sadd(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_set(c, t, argc, argv, sadd, NULL);
}

static int cmd_srem(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_set(c, t, argc, argv, srem, NULL);
}

static int cmd_lookup(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_set(c, t, argc, argv, lookup, NULL);
}

/* Move n distinct random members to the front of s (a partial
 * Fisher-Yates shuffle). */
static void pick(struct set *s, size_t n)
{
    for (size_t i = 0; n < s->n && i < n; i++) {
        size_t j = i + (size_t)random() % (s->n - i);
        struct kv_slice x = s->e[i];
        s->e[i] = s->e[j];
        s->e[j] = x;
    }
}

#define RAND_MAX_MEMBERS (1LL << 24)

/* SRANDMEMBER key [count]: a positive count gives distinct members (the
 * whole set when count >= its size), a negative one |count| members that
 * may repeat */
SET_FN(srandmember)
{
    (void)t, (void)argv;
    long long count = *(const long long *)ctx;
    struct bag one = {0};
    int rc = 0;
    if (argc < 3 && s->d) { /* one member: O(1) */
        if ((rc = dict_random(s->tx, s->d, (uint64_t)random() << 31 ^ (uint64_t)random(),
                              bag_elem, &one)) >= 0 && one.oom)
            rc = TXN_E_NOMEM;
        if (rc > 0)
            reply_bulk(&c->out, one.p + sizeof(size_t), one.n - sizeof(size_t));
        free(one.p);
        return rc < 0 ? rc : 0;
    }
    if ((rc = all(s)))
        return rc;
    if (argc < 3) {
        const struct kv_slice *x = found ? &s->e[(size_t)random() % s->n] : NULL;
        x ? reply_bulk(&c->out, x->p, x->n) : reply_nil(&c->out);
        return 0;
    }
    if (!found || count == 0) {
        reply_array(&c->out, 0);
    } else if (count < 0) {
        size_t n = (size_t)-count;
        reply_array(&c->out, n);
        for (size_t i = 0; i < n; i++) {
            const struct kv_slice *x = &s->e[(size_t)random() % s->n];
            reply_bulk(&c->out, x->p, x->n);
        }
    } else {
        size_t n = (size_t)count < s->n ? (size_t)count : s->n;
        if (n < s->n)
            pick(s, n);
        s->n = n;
        reply_members(&c->out, s);
    }
    return 0;
}

static int cmd_srandmember(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long count = 1;
    if (argc > 3)
        return reply_error(&c->out, "ERR syntax error"), 0;
    if (argc == 3 && parse_ll(&argv[2], &count))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    if (argc == 3 && count < -LONG_MAX)
        return reply_error(&c->out, "ERR value is out of range, value must between "
                                    "-9223372036854775807 and 9223372036854775807"), 0;
    /* Redis would send -count members, for hours; here a reply has at
     * most RAND_MAX_MEMBERS (as HRANDFIELD's) */
    if (argc == 3 && count < -RAND_MAX_MEMBERS)
        return reply_error(&c->out, "ERR value is out of range"), 0;
    return with_set(c, t, argc, argv, srandmember, &count);
}

/* SPOP key [count]: count random members removed. As Redis 7.0's
 * spopWithCountCommand: when what remains is less than a fifth of what
 * goes, the rest is made a new set (whose encoding starts again from its
 * members: an intset if they allow it), else the members go one by one
 * (the encoding stays). */
SET_FN(spop)
{
    long long count = *(const long long *)ctx;
    int rc = 0;
    struct bag one = {0};
    if (argc < 3 && s->d) { /* one member: O(1) */
        if ((rc = dict_random(s->tx, s->d, (uint64_t)random() << 31 ^ (uint64_t)random(),
                              bag_elem, &one)) >= 0 && one.oom)
            rc = TXN_E_NOMEM;
        struct kv_slice m = {one.p + sizeof(size_t), one.n - sizeof(size_t)};
        if (rc > 0 && (rc = dict_del(s->tx, s->d, m.p, m.n)) >= 0 &&
            !(rc = dict_emptied(t, argv[1], s)))
            reply_bulk(&c->out, m.p, m.n);
        free(one.p);
        return rc;
    }
    if (found && argc == 3 && count && (rc = all(s)))
        return rc;
    if (argc < 3) {
        if (!found) {
            reply_nil(&c->out);
            return 0;
        }
        pick(s, 1);
        reply_bulk(&c->out, s->e[0].p, s->e[0].n);
        drop(s, &s->e[0]);
        return store(t, argv[1], s, KV_KEEPTTL);
    }
    if (!found || count == 0) {
        reply_array(&c->out, 0);
        return 0;
    }
    size_t n = (size_t)count < s->n ? (size_t)count : s->n, rest = s->n - n;
    pick(s, n);
    reply_array(&c->out, n);
    for (size_t i = 0; i < n; i++)
        reply_bulk(&c->out, s->e[i].p, s->e[i].n);
    if (rest && rest * 5 <= n) {
        struct set r = {{0}, 0, NULL, 0, 0, NULL, NULL};
        start(&r, s->e[n]);
        for (size_t i = n; i < s->n && !rc; i++)
            rc = add(&r, s->e[i]);
        if (!rc)
            rc = store(t, argv[1], &r, KV_KEEPTTL);
        free(r.e);
        return rc;
    }
    if (s->d) { /* the members popped leave the table one by one */
        for (size_t i = 0; i < n && rc >= 0; i++)
            rc = dict_del(s->tx, s->d, s->e[i].p, s->e[i].n);
        return rc < 0 ? rc : dict_emptied(t, argv[1], s);
    }
    memmove(s->e, s->e + n, rest * sizeof *s->e);
    s->n = rest;
    if (s->enc == SET_INTSET) /* the shuffle moved them: intset order again */
        for (size_t i = 1; i < s->n; i++)
            for (size_t j = i; j > 0; j--) {
                long long a = 0, b = 0;
                int ok = is_int(s->e[j - 1], &a) && is_int(s->e[j], &b);
                assert(ok); /* an intset's members are all integers */
                (void)ok;
                if (a <= b)
                    break;
                struct kv_slice x = s->e[j];
                s->e[j] = s->e[j - 1];
                s->e[j - 1] = x;
            }
    return store(t, argv[1], s, KV_KEEPTTL);
}

static int cmd_spop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long count = 1;
    if (argc > 3)
        return reply_error(&c->out, "ERR syntax error"), 0;
    if (argc == 3 && (parse_ll(&argv[2], &count) || count < 0))
        return reply_error(&c->out, "ERR value is out of range, must be positive"), 0;
    return with_set(c, t, argc, argv, spop, &count);
}

/* SMOVE source destination member */
static int cmd_smove(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    struct set src, dst;
    int rc = load(t, argv[1], &src), rd = 0;
    if (rc >= 0)
        rd = load(t, argv[2], &dst);
    else
        memset(&dst, 0, sizeof dst);
    if (rc == 0) { /* Redis answers 0 before it looks at the destination's type */
        reply_int(&c->out, 0);
        rc = 0;
    } else if (rc > 0 && rd < 0) {
        rc = rd;
    } else if (rc > 0) {
        struct kv_slice *x = find(&src, argv[3]);
        rc = src.d ? dict_get(src.tx, src.d, argv[3].p, argv[3].n, NULL, NULL) : 0;
        if (rc < 0) {
        } else if (!x && rc != 1) {
            rc = 0;
            reply_int(&c->out, 0);
        } else if (argv[1].n == argv[2].n && !memcmp(argv[1].p, argv[2].p, argv[1].n)) {
            rc = 0;
            reply_int(&c->out, 1);
        } else {
            /* out of the source (a table's emptied one deleted) ... */
            if (src.d && (rc = dict_del(src.tx, src.d, argv[3].p, argv[3].n)) >= 0)
                rc = dict_emptied(t, argv[1], &src);
            else if (!src.d && (drop(&src, x), 1))
                rc = store(t, argv[1], &src, KV_KEEPTTL);
            /* ... into the destination */
            if (!rc && dst.d && (rc = dict_set(dst.tx, dst.d, argv[3].p, argv[3].n, NULL, 0,
                                               1)) >= 0)
                rc = 0;
            else if (!rc && !dst.d) {
                if (!rd)
                    start(&dst, argv[3]);
                if (!find(&dst, argv[3]))
                    rc = add(&dst, argv[3]);
                if (!rc)
                    rc = store(t, argv[2], &dst, KV_KEEPTTL);
            }
            if (!rc)
                reply_int(&c->out, 1);
        }
    }
    set_free(&src);
    set_free(&dst);
    return rc;
}

/* ---- SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD */

enum op { OP_INTER, OP_UNION, OP_DIFF };

/* The sets at keys[0..n) into sets[] (a missing key is an empty set), the
 * type of each checked first as Redis 7.0 checks it (every key, a missing
 * one before it or not); then op's result into *r, whose members point
 * into sets[]. limit (SINTERCARD): stop an intersection at that many (0:
 * no limit). */
static int combine(kv_txn *t, const struct kv_slice *keys, size_t n, enum op op, size_t limit,
                   struct set *sets, struct set *r)
{
    int rc = 0, empty = 0;
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < n; i++)
        memset(&sets[i], 0, sizeof sets[i]);
    for (size_t i = 0; i < n && rc >= 0; i++)
        if (!(rc = load(t, keys[i], &sets[i])))
            empty = 1;
    if (rc < 0)
        return rc;
    rc = 0;
    if (op == OP_INTER && empty)
        return 0;
    /* a table's members read out to be walked; lookups go to the table */
    for (size_t i = 0; i < n && !rc; i++)
        rc = all(&sets[i]);
    if (op == OP_INTER) {
        /* the smallest set's members, kept when every other set has them */
        size_t small = 0;
        for (size_t i = 1; i < n; i++)
            if (sets[i].n < sets[small].n)
                small = i;
        for (size_t j = 0; j < sets[small].n && !rc && !(limit && r->n >= limit); j++) {
            size_t i = 0;
            while (i < n && (i == small || (rc = has(&sets[i], sets[small].e[j])) > 0))
                i++;
            if (rc >= 0 && i == n && !(rc = room(r, r->n + 1)))
                r->e[r->n++] = sets[small].e[j];
            rc = rc < 0 ? rc : 0;
        }
        return rc;
    }
    for (size_t j = 0; j < sets[0].n && !rc; j++) {
        size_t i = 1;
        while (op == OP_DIFF && i < n && !(rc = has(&sets[i], sets[0].e[j])))
            i++;
        if (rc >= 0 && (op == OP_UNION || i == n) && !(rc = room(r, r->n + 1)))
            r->e[r->n++] = sets[0].e[j];
        rc = rc < 0 ? rc : 0;
    }
    if (op == OP_UNION && n > 1 && !rc) /* members met again: a DRAM index of r */
        rc = union_rest(sets, n, r);
    return rc;
}

/* A member's hash for union_rest's DRAM index. */
static uint64_t mhash(struct kv_slice m)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < m.n; i++)
        h = (h ^ (unsigned char)m.p[i]) * 0x100000001b3ULL;
    return h ^ h >> 29;
}

/* The members of sets[1..n) that r (sets[0]'s, distinct) lacks, added to
 * r: an open-addressing index of r's members (positions + 1) so that each
 * costs O(1), not a walk of r. */
static int union_rest(struct set *sets, size_t n, struct set *r)
{
    size_t total = r->n, cap = 16, first = r->n;
    for (size_t i = 1; i < n; i++)
        total += sets[i].n;
    while (cap < 2 * total)
        cap *= 2;
    size_t *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return TXN_E_NOMEM;
    int rc = room(r, total);
    for (size_t i = 0; i < n && !rc; i++) {
        /* r's own members first (i == 0: indexed only), then the others' */
        const struct kv_slice *e = i ? sets[i].e : r->e;
        size_t m = i ? sets[i].n : first;
        for (size_t j = 0; j < m; j++) {
            size_t at = (size_t)mhash(e[j]) & (cap - 1);
            while (slot[at] && !(r->e[slot[at] - 1].n == e[j].n &&
                                 !memcmp(r->e[slot[at] - 1].p, e[j].p, e[j].n)))
                at = (at + 1) & (cap - 1);
            if (slot[at])
                continue;
            if (i)
                r->e[r->n++] = e[j];
            slot[at] = i ? r->n : j + 1;
        }
    }
    free(slot);
    return rc;
}

static enum op op_of(const struct kv_slice *name)
{
    return arg_is(name, "sinter") || arg_is(name, "sinterstore") ? OP_INTER
           : arg_is(name, "sunion") || arg_is(name, "sunionstore") ? OP_UNION : OP_DIFF;
}

/* SINTER, SUNION, SDIFF key [key ...]; their STORE forms destination key
 * [key ...] (the destination replaced, its expiry gone; an empty result
 * deletes it), whose result's encoding is built up as Redis builds it:
 * from an empty intset, member by member */
static int cmd_sop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int st = arg_is(&argv[0], "sinterstore") || arg_is(&argv[0], "sunionstore") ||
             arg_is(&argv[0], "sdiffstore");
    size_t first = st ? 2 : 1, n = argc - first;
    struct set *sets = calloc(n, sizeof *sets), r;
    if (!sets)
        return TXN_E_NOMEM;
    int rc = combine(t, &argv[first], n, op_of(&argv[0]), 0, sets, &r);
    if (!rc && !st) {
        reply_members(&c->out, &r);
    } else if (!rc) {
        struct set d = {{0}, SET_INTSET, NULL, 0, 0, NULL, NULL};
        for (size_t i = 0; i < r.n && !rc; i++)
            rc = add(&d, r.e[i]);
        if (!rc && !(rc = store(t, argv[1], &d, 0)))
            reply_int(&c->out, (long long)d.n);
        free(d.e);
    }
    for (size_t i = 0; i < n; i++)
        set_free(&sets[i]);
    free(sets);
    free(r.e);
    return rc;
}

/* SINTERCARD numkeys key [key ...] [LIMIT limit] */
static int cmd_sintercard(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long nk, limit = 0;
    if (parse_ll(&argv[1], &nk) || nk <= 0)
        return reply_error(&c->out, "ERR numkeys should be greater than 0"), 0;
    if ((unsigned long long)nk > argc - 2)
        return reply_error(&c->out, "ERR Number of keys can't be greater than number of args"),
               0;
    for (size_t i = 2 + (size_t)nk; i < argc; i += 2) {
        if (!arg_is(&argv[i], "LIMIT") || i + 1 == argc)
            return reply_error(&c->out, "ERR syntax error"), 0;
        if (parse_ll(&argv[i + 1], &limit) || limit < 0)
            return reply_error(&c->out, "ERR LIMIT can't be negative"), 0;
    }
    struct set *sets = calloc((size_t)nk, sizeof *sets), r;
    if (!sets)
        return TXN_E_NOMEM;
    int rc = combine(t, &argv[2], (size_t)nk, OP_INTER, (size_t)limit, sets, &r);
    if (!rc)
        reply_int(&c->out, (long long)r.n);
    for (size_t i = 0; i < (size_t)nk; i++)
        set_free(&sets[i]);
    free(sets);
    free(r.e);
    return rc;
}

/* SSCAN key cursor [MATCH pattern] [COUNT n]: a packed record is one
 * value, so one call returns every member (cursor 0), as Redis does for an
 * intset; a table is read from the cursor on (COUNT, default 10: as
 * HSCAN's, t_hash.c); options are read only for a set that is there, as
 * Redis */
SET_FN(sscan)
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
    int rc = s->d ? collect(s, *(const uint64_t *)ctx, (uint64_t)count, &next) : 0;
    if (rc)
        return rc;
    for (size_t i = 0; i < s->n; i++)
        if (!pattern || glob_match(pattern->p, pattern->n, s->e[i].p, s->e[i].n))
            s->e[n++] = s->e[i];
    s->n = n;
    char cur[24];
    reply_array(&c->out, 2);
    reply_bulk(&c->out, cur, (size_t)snprintf(cur, sizeof cur, "%llu", (unsigned long long)next));
    reply_members(&c->out, s);
    return 0;
}

static int cmd_sscan(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    /* the cursor as Redis reads it (strtoul: see HSCAN's) */
    char *end, cur[32];
    if (argv[2].n >= sizeof cur)
        return reply_error(&c->out, "ERR invalid cursor"), 0;
    memcpy(cur, argv[2].p, argv[2].n);
    cur[argv[2].n] = 0;
    errno = 0;
    uint64_t at = strtoull(cur, &end, 10);
    if (*end || errno == ERANGE || isspace((unsigned char)cur[0]))
        return reply_error(&c->out, "ERR invalid cursor"), 0;
    return with_set(c, t, argc, argv, sscan, &at);
}

/* ---- the table */

#define W CMD_WRITE
#define R CMD_READONLY
#define M CMD_DENYOOM
#define F CMD_FAST
const struct command set_commands[] = {
    {"sadd", cmd_sadd, -3, W | M | F, ACL_SET, {1, 1, 1}},
    {"srem", cmd_srem, -3, W | F, ACL_SET, {1, 1, 1}},
    {"scard", cmd_lookup, 2, R | F, ACL_SET, {1, 1, 1}},
    {"sismember", cmd_lookup, 3, R | F, ACL_SET, {1, 1, 1}},
    {"smismember", cmd_lookup, -3, R | F, ACL_SET, {1, 1, 1}},
    {"smembers", cmd_lookup, 2, R, ACL_SET, {1, 1, 1}},
    {"srandmember", cmd_srandmember, -2, R, ACL_SET, {1, 1, 1}},
    {"spop", cmd_spop, -2, W | F, ACL_SET, {1, 1, 1}},
    {"smove", cmd_smove, 4, W | F, ACL_SET, {1, 2, 1}},
    {"sinter", cmd_sop, -2, R, ACL_SET, {1, -1, 1}},
    {"sunion", cmd_sop, -2, R, ACL_SET, {1, -1, 1}},
    {"sdiff", cmd_sop, -2, R, ACL_SET, {1, -1, 1}},
    {"sinterstore", cmd_sop, -3, W | M, ACL_SET, {1, -1, 1}},
    {"sunionstore", cmd_sop, -3, W | M, ACL_SET, {1, -1, 1}},
    {"sdiffstore", cmd_sop, -3, W | M, ACL_SET, {1, -1, 1}},
    /* keys counted by numkeys (argument 1), as Redis's key spec */
    {"sintercard", cmd_sintercard, -3, R | CMD_KEYNUM(1), ACL_SET, {0, 0, 0}},
    {"sscan", cmd_sscan, -3, R, ACL_SET, {1, 1, 1}},
};
const size_t set_ncommands = sizeof set_commands / sizeof *set_commands;
