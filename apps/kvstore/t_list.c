/* t_list.c - the list commands (LPUSH ... LMPOP): Redis 7.0's replies and
 * error texts, each in one store transaction (its own or EXEC's).
 *
 * A list is one value of type KV_LIST: a 4-byte element count, then per
 * element a 4-byte length and its bytes (little endian), head first, as
 * a hash is packed (t_hash.c). A change writes the record again, so a
 * command on a list of n bytes costs O(n) (docs/kvstore.md, section 22).
 * An emptied list is deleted, as in Redis. The blocking forms (BLPOP ...)
 * are not here. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "t_list.h"

/* A list read out of the store: its elements point into `raw` or into
 * the request's arguments. */
struct list {
    struct val raw;
    struct kv_slice *e;
    size_t n, cap;
};

static uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static void put32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}

static int room(struct list *l, size_t n)
{
    if (n <= l->cap)
        return 0;
    size_t cap = l->cap ? l->cap : 8;
    while (cap < n)
        cap *= 2;
    struct kv_slice *e = realloc(l->e, cap * sizeof *e);
    if (!e)
        return TXN_E_NOMEM;
    l->e = e;
    l->cap = cap;
    return 0;
}

/* Split the record into elements; a record that does not parse is
 * damage. */
static int decode(struct list *l)
{
    const char *p = l->raw.p, *end = p + l->raw.n;
    if (l->raw.n < 4)
        return TXN_E_CORRUPT;
    size_t n = get32(p);
    p += 4;
    if (n > l->raw.n / 4)
        return TXN_E_CORRUPT;
    int rc = room(l, n);
    for (size_t i = 0; i < n && !rc; i++) {
        if (end - p < 4 || (size_t)(end - p - 4) < get32(p))
            return TXN_E_CORRUPT;
        l->e[l->n++] = (struct kv_slice){p + 4, get32(p)};
        p += 4 + get32(p);
    }
    return rc ? rc : p == end ? 0 : TXN_E_CORRUPT;
}

/* Load key's list: 1 (l filled), 0 missing (l empty), <0 an error
 * (KV_E_WRONGTYPE for another type). */
static int load(kv_txn *t, struct kv_slice key, struct list *l)
{
    unsigned type;
    memset(l, 0, sizeof *l);
    int rc = get_any(t, key, &l->raw, &type);
    if (rc <= 0)
        return rc;
    if (type != KV_LIST)
        return KV_E_WRONGTYPE;
    return (rc = decode(l)) ? rc : 1;
}

static void list_free(struct list *l)
{
    free(l->raw.p);
    free(l->e);
}

/* Write the list back (its expiry kept), or delete the key if it is
 * empty. */
static int store(kv_txn *t, struct kv_slice key, const struct list *l)
{
    if (!l->n) {
        int rc = kv_txn_del(t, key);
        return rc < 0 ? rc : 0;
    }
    if (l->n > UINT32_MAX)
        return TXN_E_NOSPACE;
    size_t len = 4;
    for (size_t i = 0; i < l->n; i++) {
        if (l->e[i].n > UINT32_MAX)
            return TXN_E_NOSPACE;
        len += 4 + l->e[i].n;
    }
    char *p = malloc(len), *q = p;
    if (!p)
        return TXN_E_NOMEM;
    put32(q, (uint32_t)l->n);
    q += 4;
    for (size_t i = 0; i < l->n; i++) {
        put32(q, (uint32_t)l->e[i].n);
        memcpy(q + 4, l->e[i].p, l->e[i].n);
        q += 4 + l->e[i].n;
    }
    int rc = kv_txn_write(t, key, (struct kv_slice){p, len}, KV_KEEPTTL, KV_LIST);
    free(p);
    return rc;
}

/* Put v before position i (0: the head, l->n: the tail). */
static int insert_at(struct list *l, size_t i, struct kv_slice v)
{
    int rc = room(l, l->n + 1);
    if (rc)
        return rc;
    memmove(&l->e[i + 1], &l->e[i], (l->n - i) * sizeof *l->e);
    l->e[i] = v;
    l->n++;
    return 0;
}

/* Take n elements away from position i. */
static void remove_at(struct list *l, size_t i, size_t n)
{
    memmove(&l->e[i], &l->e[i + n], (l->n - i - n) * sizeof *l->e);
    l->n -= n;
}

static int same(struct kv_slice a, struct kv_slice b)
{
    return a.n == b.n && (!a.n || !memcmp(a.p, b.p, a.n));
}

static void reply_null_array(struct buf *b)
{
    buf_add(b, "*-1\r\n", 5);
}

/* LEFT or RIGHT: 0 the head, 1 the tail, -1 neither */
static int side(const struct kv_slice *a)
{
    return arg_is(a, "LEFT") ? 0 : arg_is(a, "RIGHT") ? 1 : -1;
}

/* Redis's (start, end) of LRANGE and LTRIM on a list of n elements: the
 * first and last index kept, or *first > *last for none. */
static void clamp(long long start, long long end, size_t n, long long *first, long long *last)
{
    long long len = (long long)n;
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (start > end || start >= len) {
        *first = 1, *last = 0;
        return;
    }
    *first = start;
    *last = end >= len ? len - 1 : end;
}

/* Reply the elements popped from one end: an array of up to count of
 * them in the order they leave (the tail's last first), and take them
 * away. */
static void pop_reply(struct buf *b, struct list *l, int tail, size_t count)
{
    size_t k = count < l->n ? count : l->n;
    reply_array(b, k);
    for (size_t i = 0; i < k; i++) {
        const struct kv_slice *x = tail ? &l->e[l->n - 1 - i] : &l->e[i];
        reply_bulk(b, x->p, x->n);
    }
    remove_at(l, tail ? l->n - k : 0, k);
}

/* ---- the commands */

/* LPUSH, RPUSH, LPUSHX, RPUSHX key element [element ...]: the new length */
static int cmd_push(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int tail = argv[0].p[0] == 'r' || argv[0].p[0] == 'R';
    int only_existing = argv[0].n == 6; /* the X forms */
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc == 0 && only_existing) {
        reply_int(&c->out, 0);
    } else if (rc >= 0) {
        rc = 0;
        for (size_t i = 2; i < argc && !rc; i++)
            rc = insert_at(&l, tail ? l.n : 0, argv[i]);
        if (!rc && !(rc = store(t, argv[1], &l)))
            reply_int(&c->out, (long long)l.n);
    }
    list_free(&l);
    return rc;
}

/* LPOP, RPOP key [count]: one element (a bulk), or an array of up to
 * count */
static int cmd_pop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int tail = argv[0].p[0] == 'r' || argv[0].p[0] == 'R';
    long long count = 1;
    if (argc > 3)
        return reply_error(&c->out, "ERR wrong number of arguments for '%s' command",
                           tail ? "rpop" : "lpop"), 0;
    if (argc == 3 && (parse_ll(&argv[2], &count) || count < 0))
        return reply_error(&c->out, "ERR value is out of range, must be positive"), 0;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc == 0) {
        argc == 3 ? reply_null_array(&c->out) : reply_nil(&c->out);
    } else if (rc > 0 && argc == 3) {
        rc = 0;
        if (count) {
            pop_reply(&c->out, &l, tail, (size_t)count);
            rc = store(t, argv[1], &l);
        } else {
            reply_array(&c->out, 0);
        }
    } else if (rc > 0) {
        struct kv_slice x = l.e[tail ? l.n - 1 : 0];
        remove_at(&l, tail ? l.n - 1 : 0, 1);
        if (!(rc = store(t, argv[1], &l)))
            reply_bulk(&c->out, x.p, x.n);
    }
    list_free(&l);
    return rc;
}

/* LLEN key */
static int cmd_llen(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc >= 0)
        reply_int(&c->out, (long long)l.n), rc = 0;
    list_free(&l);
    return rc;
}

/* LRANGE key start stop */
static int cmd_lrange(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long start, end, first, last;
    if (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc >= 0) {
        rc = 0;
        clamp(start, end, l.n, &first, &last);
        reply_array(&c->out, first > last ? 0 : (size_t)(last - first + 1));
        for (long long i = first; i <= last; i++)
            reply_bulk(&c->out, l.e[i].p, l.e[i].n);
    }
    list_free(&l);
    return rc;
}

/* An index as LINDEX and LSET read it, from the tail if negative: the
 * position, or -1 outside the list. */
static long long position(long long index, size_t n)
{
    if (index < 0)
        index += (long long)n;
    return index < 0 || index >= (long long)n ? -1 : index;
}

/* LINDEX key index: the key is looked up before the index is read, as
 * Redis does (a missing key is nil whatever the index) */
static int cmd_lindex(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long index;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc == 0) {
        reply_nil(&c->out);
    } else if (rc > 0) {
        rc = 0;
        if (parse_ll(&argv[2], &index))
            reply_error(&c->out, "ERR value is not an integer or out of range");
        else if ((index = position(index, l.n)) < 0)
            reply_nil(&c->out);
        else
            reply_bulk(&c->out, l.e[index].p, l.e[index].n);
    }
    list_free(&l);
    return rc;
}

/* LSET key index element */
static int cmd_lset(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long index;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc == 0) {
        reply_error(&c->out, "ERR no such key");
    } else if (rc > 0) {
        rc = 0;
        if (parse_ll(&argv[2], &index))
            reply_error(&c->out, "ERR value is not an integer or out of range");
        else if ((index = position(index, l.n)) < 0)
            reply_error(&c->out, "ERR index out of range");
        else if (l.e[index] = argv[3], !(rc = store(t, argv[1], &l)))
            reply_simple(&c->out, "OK");
    }
    list_free(&l);
    return rc;
}

/* LINSERT key BEFORE|AFTER pivot element: the new length, -1 without the
 * pivot, 0 without the key */
static int cmd_linsert(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int after = arg_is(&argv[2], "AFTER");
    if (!after && !arg_is(&argv[2], "BEFORE"))
        return reply_error(&c->out, "ERR syntax error"), 0;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc == 0) {
        reply_int(&c->out, 0);
    } else if (rc > 0) {
        size_t i = 0;
        while (i < l.n && !same(l.e[i], argv[3]))
            i++;
        rc = 0;
        if (i == l.n)
            reply_int(&c->out, -1);
        else if (!(rc = insert_at(&l, i + (size_t)after, argv[4])) &&
                 !(rc = store(t, argv[1], &l)))
            reply_int(&c->out, (long long)l.n);
    }
    list_free(&l);
    return rc;
}

/* LREM key count element: count > 0 from the head, < 0 from the tail, 0
 * all of them */
static int cmd_lrem(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long count;
    if (parse_ll(&argv[2], &count))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc >= 0) {
        unsigned long long limit = count < 0 ? 0ULL - (unsigned long long)count
                                   : (unsigned long long)count;
        unsigned long long removed = 0;
        size_t kept = 0;
        rc = 0;
        if (count >= 0) {
            for (size_t i = 0; i < l.n; i++)
                if (same(l.e[i], argv[3]) && (!limit || removed < limit))
                    removed++;
                else
                    l.e[kept++] = l.e[i];
        } else {
            /* from the tail: keep the survivors at the end, then slide */
            kept = l.n;
            for (size_t i = l.n; i-- > 0;)
                if (same(l.e[i], argv[3]) && removed < limit)
                    removed++;
                else
                    l.e[--kept] = l.e[i];
            memmove(l.e, l.e + kept, (l.n - kept) * sizeof *l.e);
            kept = l.n - kept;
        }
        l.n = kept;
        if (!removed || !(rc = store(t, argv[1], &l)))
            reply_int(&c->out, (long long)removed);
    }
    list_free(&l);
    return rc;
}

/* LTRIM key start stop */
static int cmd_ltrim(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long start, end, first, last;
    if (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc >= 0) {
        rc = 0;
        clamp(start, end, l.n, &first, &last);
        size_t n0 = l.n;
        if (first > last) {
            l.n = 0;
        } else {
            remove_at(&l, (size_t)last + 1, l.n - (size_t)last - 1);
            remove_at(&l, 0, (size_t)first);
        }
        if (l.n == n0 || !(rc = store(t, argv[1], &l)))
            reply_simple(&c->out, "OK");
    }
    list_free(&l);
    return rc;
}

/* LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len] */
static int cmd_lpos(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long rank = 1, count = -1, maxlen = 0; /* count -1: no COUNT */
    for (size_t j = 3; j < argc; j++) {
        int more = j + 1 < argc;
        if (more && arg_is(&argv[j], "RANK")) {
            if (parse_ll(&argv[++j], &rank))
                return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
            if (rank == 0)
                return reply_error(&c->out, "ERR RANK can't be zero: use 1 to start from the "
                                            "first match, 2 from the second ... or use "
                                            "negative to start from the end of the list"), 0;
            /* Redis 7.0 negates it into itself, searches from the tail
             * and takes the first match: rank -1 does that */
            if (rank == LLONG_MIN)
                rank = -1;
        } else if (more && arg_is(&argv[j], "COUNT")) {
            if (parse_ll(&argv[++j], &count) || count < 0)
                return reply_error(&c->out, "ERR COUNT can't be negative"), 0;
        } else if (more && arg_is(&argv[j], "MAXLEN")) {
            if (parse_ll(&argv[++j], &maxlen) || maxlen < 0)
                return reply_error(&c->out, "ERR MAXLEN can't be negative"), 0;
        } else {
            return reply_error(&c->out, "ERR syntax error"), 0;
        }
    }
    int from_tail = rank < 0;
    if (from_tail)
        rank = -rank;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc == 0) {
        count != -1 ? reply_array(&c->out, 0) : reply_nil(&c->out);
    } else if (rc > 0) {
        rc = 0;
        /* the matching positions, gathered first: the array's length
         * goes before them */
        size_t nfound = 0, *found = NULL;
        long long matches = 0, scanned = 0;
        if (count != -1 && !(found = malloc((l.n ? l.n : 1) * sizeof *found)))
            rc = TXN_E_NOMEM;
        long long at = -1;
        for (size_t k = 0; !rc && k < l.n && (maxlen == 0 || scanned < maxlen); k++, scanned++) {
            size_t i = from_tail ? l.n - 1 - k : k;
            if (!same(l.e[i], argv[2]) || ++matches < rank)
                continue;
            if (count == -1) {
                at = (long long)i;
                break;
            }
            found[nfound++] = i;
            if (count && matches - rank + 1 >= count)
                break;
        }
        if (!rc && count == -1) {
            at < 0 ? reply_nil(&c->out) : reply_int(&c->out, at);
        } else if (!rc) {
            reply_array(&c->out, nfound);
            for (size_t i = 0; i < nfound; i++)
                reply_int(&c->out, (long long)found[i]);
        }
        free(found);
    }
    list_free(&l);
    return rc;
}

/* Move one element from src's `from` end to dst's `to` end (the same key:
 * a rotation): LMOVE, RPOPLPUSH. The element, or nil without src. */
static int move(struct conn *c, kv_txn *t, struct kv_slice *src, struct kv_slice *dst, int from,
                int to)
{
    struct list s, d;
    int one = same(*src, *dst);
    memset(&d, 0, sizeof d);
    int rc = load(t, *src, &s);
    if (rc == 0) {
        reply_nil(&c->out);
    } else if (rc > 0 && (one || (rc = load(t, *dst, &d)) >= 0)) {
        struct list *to_list = one ? &s : &d;
        struct kv_slice x = s.e[from ? s.n - 1 : 0];
        remove_at(&s, from ? s.n - 1 : 0, 1);
        if (!(rc = insert_at(to_list, to ? to_list->n : 0, x)) &&
            !(rc = store(t, *src, &s)) && (one || !(rc = store(t, *dst, &d))))
            reply_bulk(&c->out, x.p, x.n);
    }
    list_free(&s);
    list_free(&d);
    return rc;
}

/* LMOVE source destination LEFT|RIGHT LEFT|RIGHT */
static int cmd_lmove(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int from = side(&argv[3]), to = side(&argv[4]);
    if (from < 0 || to < 0)
        return reply_error(&c->out, "ERR syntax error"), 0;
    return move(c, t, &argv[1], &argv[2], from, to);
}

/* RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT */
static int cmd_rpoplpush(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    return move(c, t, &argv[1], &argv[2], 1, 0);
}

/* LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: up to count
 * elements of the first key that holds a list, with its name; nil (an
 * array) when none does. The entry names every argument after numkeys as
 * a key (the table's key spec has no key count), which locks at most a
 * few stripes more than needed. */
static int cmd_lmpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long numkeys, count = -1;
    if (parse_ll(&argv[1], &numkeys) || numkeys < 1)
        return reply_error(&c->out, "ERR numkeys should be greater than 0"), 0;
    if ((unsigned long long)numkeys >= argc - 2)
        return reply_error(&c->out, "ERR syntax error"), 0;
    size_t where = 2 + (size_t)numkeys;
    int tail = side(&argv[where]);
    if (tail < 0)
        return reply_error(&c->out, "ERR syntax error"), 0;
    for (size_t j = where + 1; j < argc; j++) {
        if (count == -1 && j + 1 < argc && arg_is(&argv[j], "COUNT")) {
            if (parse_ll(&argv[++j], &count) || count < 1)
                return reply_error(&c->out, "ERR count should be greater than 0"), 0;
        } else {
            return reply_error(&c->out, "ERR syntax error"), 0;
        }
    }
    if (count == -1)
        count = 1;
    for (size_t k = 2; k < where; k++) {
        struct list l;
        int rc = load(t, argv[k], &l), found = rc > 0;
        if (found) {
            reply_array(&c->out, 2);
            reply_bulk(&c->out, argv[k].p, argv[k].n);
            pop_reply(&c->out, &l, tail, (size_t)count);
            rc = store(t, argv[k], &l);
        }
        list_free(&l);
        if (found || rc < 0)
            return rc;
    }
    reply_null_array(&c->out);
    return 0;
}

/* ---- the table */

#define W CMD_WRITE
#define R CMD_READONLY
#define M CMD_DENYOOM
#define F CMD_FAST
const struct command list_commands[] = {
    {"lpush", cmd_push, -3, W | M | F, ACL_LIST, {1, 1, 1}},
    {"rpush", cmd_push, -3, W | M | F, ACL_LIST, {1, 1, 1}},
    {"lpushx", cmd_push, -3, W | M | F, ACL_LIST, {1, 1, 1}},
    {"rpushx", cmd_push, -3, W | M | F, ACL_LIST, {1, 1, 1}},
    {"lpop", cmd_pop, -2, W | F, ACL_LIST, {1, 1, 1}},
    {"rpop", cmd_pop, -2, W | F, ACL_LIST, {1, 1, 1}},
    {"llen", cmd_llen, 2, R | F, ACL_LIST, {1, 1, 1}},
    {"lrange", cmd_lrange, 4, R, ACL_LIST, {1, 1, 1}},
    {"lindex", cmd_lindex, 3, R, ACL_LIST, {1, 1, 1}},
    {"lset", cmd_lset, 4, W | M, ACL_LIST, {1, 1, 1}},
    {"linsert", cmd_linsert, 5, W | M, ACL_LIST, {1, 1, 1}},
    {"lrem", cmd_lrem, 4, W, ACL_LIST, {1, 1, 1}},
    {"ltrim", cmd_ltrim, 4, W, ACL_LIST, {1, 1, 1}},
    {"lpos", cmd_lpos, -3, R, ACL_LIST, {1, 1, 1}},
    {"lmove", cmd_lmove, 5, W | M, ACL_LIST, {1, 2, 1}},
    {"rpoplpush", cmd_rpoplpush, 3, W | M, ACL_LIST, {1, 2, 1}},
    {"lmpop", cmd_lmpop, -4, W, ACL_LIST, {2, -1, 1}},
};
const size_t list_ncommands = sizeof list_commands / sizeof *list_commands;
