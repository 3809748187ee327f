/* t_list.c - the list commands (LPUSH ... LMPOP): Redis 7.0's replies and
 * error texts, each in one store transaction (its own or EXEC's).
 *
 * The lists themselves, their two forms and the changes at their ends,
 * are list.c's (list.h): here the arguments are read, list.c is called
 * with CONFIG's list-max-listpack-size, and the reply is written.
 *
 * The blocking forms (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) pop as the
 * others when a key holds a list; else they block (block.h) and are run
 * again, each time in a transaction of their own, when a write wakes
 * them. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "config.h"
#include "list.h"
#include "t_list.h"

/* list-max-listpack-size, read once a command (CONFIG SET may change it
 * meanwhile) */
static long long list_max(void)
{
    return atomic_load(&cfg.list_max_listpack_size);
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

/* list_range's callback: an element as a bulk reply into the buffer */
static void reply_elem(void *arg, const char *p, size_t n)
{
    reply_bulk(arg, p, n);
}

static void reply_popped(struct buf *b, const struct list_popped *x)
{
    reply_array(b, x->n);
    for (size_t i = 0; i < x->n; i++)
        reply_bulk(b, x->e[i].p, x->e[i].n);
}

/* ---- the commands */

/* LPUSH, RPUSH, LPUSHX, RPUSHX key element [element ...]: the new length */
static int cmd_push(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int tail = argv[0].p[0] == 'r' || argv[0].p[0] == 'R';
    int only_existing = argv[0].n == 6; /* the X forms */
    uint64_t len;
    int rc = list_push(t, argv[1], list_max(), tail, &argv[2], argc - 2, only_existing, &len);
    if (rc >= 0)
        reply_int(&c->out, (long long)len), rc = 0;
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
    struct list_popped x = {0};
    struct list_handle b;
    int rc = argc == 3 && !count ? list_probe(t, argv[1], list_max(), &b)
                                 : list_pop(t, argv[1], list_max(), tail, (uint64_t)count, &x);
    if (argc == 3 && !count)
        list_close(&b);
    if (rc == 0)
        argc == 3 ? reply_null_array(&c->out) : reply_nil(&c->out);
    else if (rc > 0 && argc == 3)
        reply_popped(&c->out, &x);
    else if (rc > 0)
        reply_bulk(&c->out, x.e[0].p, x.e[0].n);
    list_popped_free(&x);
    return rc < 0 ? rc : 0;
}

/* LLEN key */
static int cmd_llen(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    struct list_handle b;
    struct list l;
    memset(&l, 0, sizeof l);
    int rc = list_probe(t, argv[1], list_max(), &b);
    if (rc == 2)
        reply_int(&c->out, (long long)b.count), rc = 0;
    else if (rc >= 0 && (rc = rc ? list_read(&b, &l) : 0) >= 0)
        reply_int(&c->out, (long long)l.n), rc = 0;
    list_close(&b);
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
    struct list_handle b;
    struct list l;
    memset(&l, 0, sizeof l);
    int rc = list_probe(t, argv[1], list_max(), &b);
    if (rc == 2) {
        list_clamp(start, end, (size_t)b.count, &first, &last);
        reply_array(&c->out, first > last ? 0 : (size_t)(last - first + 1));
        if (first <= last)
            rc = list_range(&b, (uint64_t)first, (uint64_t)last, reply_elem, &c->out);
        else
            rc = 0;
    } else if (rc >= 0 && (rc = rc ? list_read(&b, &l) : 0) >= 0) {
        rc = 0;
        list_clamp(start, end, l.n, &first, &last);
        reply_array(&c->out, first > last ? 0 : (size_t)(last - first + 1));
        for (long long i = first; i <= last; i++)
            reply_bulk(&c->out, l.e[i].p, l.e[i].n);
    }
    list_close(&b);
    list_free(&l);
    return rc;
}

/* LINDEX key index: the key is looked up before the index is read, as
 * Redis does (a missing key is nil whatever the index) */
static int cmd_lindex(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long index;
    struct list_handle b;
    struct list l;
    memset(&l, 0, sizeof l);
    int rc = list_probe(t, argv[1], list_max(), &b);
    if (rc == 0) {
        reply_nil(&c->out);
    } else if (rc > 0 && parse_ll(&argv[2], &index)) {
        reply_error(&c->out, "ERR value is not an integer or out of range");
        rc = 0;
    } else if (rc == 2) {
        if ((index = list_position(index, (size_t)b.count)) < 0)
            reply_nil(&c->out), rc = 0;
        else
            rc = list_range(&b, (uint64_t)index, (uint64_t)index, reply_elem, &c->out);
    } else if (rc > 0 && (rc = list_read(&b, &l)) > 0) {
        rc = 0;
        if ((index = list_position(index, l.n)) < 0)
            reply_nil(&c->out);
        else
            reply_bulk(&c->out, l.e[index].p, l.e[index].n);
    }
    list_close(&b);
    list_free(&l);
    return rc;
}

/* LSET key index element: the key is looked up before the index is read,
 * as Redis does */
static int cmd_lset(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long index;
    struct list_handle b;
    int bad = parse_ll(&argv[2], &index);
    int rc = bad ? list_probe(t, argv[1], 0, &b) : list_set(t, argv[1], list_max(), index, argv[3]);
    if (bad)
        list_close(&b);
    if (rc == 0)
        reply_error(&c->out, "ERR no such key");
    else if (rc > 0 && bad)
        reply_error(&c->out, "ERR value is not an integer or out of range");
    else if (rc == 2)
        reply_error(&c->out, "ERR index out of range");
    else if (rc > 0)
        reply_simple(&c->out, "OK");
    return rc < 0 ? rc : 0;
}

/* LINSERT key BEFORE|AFTER pivot element: the new length, -1 without the
 * pivot, 0 without the key */
static int cmd_linsert(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    uint64_t len;
    int after = arg_is(&argv[2], "AFTER");
    if (!after && !arg_is(&argv[2], "BEFORE"))
        return reply_error(&c->out, "ERR syntax error"), 0;
    int rc = list_insert(t, argv[1], list_max(), after, argv[3], argv[4], &len);
    if (rc >= 0)
        reply_int(&c->out, rc == 2 ? -1 : (long long)len);
    return rc < 0 ? rc : 0;
}

/* LREM key count element: count > 0 from the head, < 0 from the tail, 0
 * all of them */
static int cmd_lrem(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long count;
    uint64_t removed;
    if (parse_ll(&argv[2], &count))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    int rc = list_rem(t, argv[1], list_max(), count, argv[3], &removed);
    if (rc >= 0)
        reply_int(&c->out, (long long)removed);
    return rc < 0 ? rc : 0;
}

/* LTRIM key start stop */
static int cmd_ltrim(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long start, end;
    if (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    int rc = list_trim(t, argv[1], list_max(), start, end);
    if (rc >= 0)
        reply_simple(&c->out, "OK");
    return rc < 0 ? rc : 0;
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
    int rc = list_load(t, argv[1], &l);
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

/* LMOVE, RPOPLPUSH, BLMOVE: the element moved, or nil without src */
static int move(struct conn *c, kv_txn *t, struct kv_slice src, struct kv_slice dst, int from,
                int to)
{
    struct kv_slice e;
    int rc = list_move(t, src, dst, list_max(), from, to, &e);
    if (rc == 0)
        reply_nil(&c->out);
    else if (rc > 0)
        reply_bulk(&c->out, e.p, e.n);
    free((char *)e.p);
    return rc < 0 ? rc : 0;
}

/* LMOVE source destination LEFT|RIGHT LEFT|RIGHT */
static int cmd_lmove(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int from = side(&argv[3]), to = side(&argv[4]);
    if (from < 0 || to < 0)
        return reply_error(&c->out, "ERR syntax error"), 0;
    return move(c, t, argv[1], argv[2], from, to);
}

/* RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT */
static int cmd_rpoplpush(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    return move(c, t, argv[1], argv[2], 1, 0);
}

/* LMPOP's arguments from argv[at] (numkeys) on: the keys' first index
 * and count, the end, the count. 0, or -1 with the error replied. */
static int mpop_args(struct conn *c, size_t argc, const struct kv_slice *argv, size_t at,
                     size_t *first, size_t *nkeys, int *tail, long long *count)
{
    long long numkeys;
    *count = -1;
    if (parse_ll(&argv[at], &numkeys) || numkeys < 1)
        return reply_error(&c->out, "ERR numkeys should be greater than 0"), -1;
    if ((unsigned long long)numkeys >= argc - at - 1)
        return reply_error(&c->out, "ERR syntax error"), -1;
    size_t where = at + 1 + (size_t)numkeys;
    if ((*tail = side(&argv[where])) < 0)
        return reply_error(&c->out, "ERR syntax error"), -1;
    for (size_t j = where + 1; j < argc; j++) {
        if (*count == -1 && j + 1 < argc && arg_is(&argv[j], "COUNT")) {
            if (parse_ll(&argv[++j], count) || *count < 1)
                return reply_error(&c->out, "ERR count should be greater than 0"), -1;
        } else {
            return reply_error(&c->out, "ERR syntax error"), -1;
        }
    }
    if (*count == -1)
        *count = 1;
    *first = at + 1;
    *nkeys = (size_t)numkeys;
    return 0;
}

/* Pop from the first of keys[0..n) that holds a list: 1 popped (the reply
 * is in c->out: LMPOP's form with mpop, else BLPOP's [key, element]), 0
 * none did, <0. A blocked client run again passes over a key of another
 * type, as Redis 7.0 leaves it blocked then. */
static int pop_first(struct conn *c, kv_txn *t, const struct kv_slice *keys, size_t n, int tail,
                     long long count, int mpop)
{
    int again = block_state(c) != BLOCK_NONE;
    long long max = list_max();
    for (size_t k = 0; k < n; k++) {
        struct list_popped x;
        int rc = list_pop(t, keys[k], max, tail, (uint64_t)count, &x);
        if (rc > 0) {
            reply_array(&c->out, 2);
            reply_bulk(&c->out, keys[k].p, keys[k].n);
            if (mpop)
                reply_popped(&c->out, &x);
            else
                reply_bulk(&c->out, x.e[0].p, x.e[0].n);
        }
        list_popped_free(&x);
        if (rc == KV_E_WRONGTYPE && again)
            continue;
        if (rc)
            return rc;
    }
    return 0;
}

/* LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: up to count
 * elements of the first key that holds a list, with its name; nil (an
 * array) when none does. The entry's key spec counts the keys by numkeys:
 * the transaction holds exactly those. */
static int cmd_lmpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    size_t first, n;
    int tail;
    long long count;
    if (mpop_args(c, argc, argv, 1, &first, &n, &tail, &count))
        return 0;
    int rc = pop_first(c, t, &argv[first], n, tail, count, 1);
    if (rc == 0)
        reply_null_array(&c->out);
    return rc < 0 ? rc : 0;
}

/* ---- the blocking forms
 *
 * Each answers as its non-blocking form when a key holds a list. Else:
 * inside EXEC, or once its timeout passed (or CLIENT UNBLOCK), a nil
 * array; otherwise it blocks (block_wait, under its transaction's locks)
 * and is run again when one of its keys is written. */

/* BLPOP, BRPOP key [key ...] timeout: [key, element] */
static int cmd_bpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long ms;
    int tail = argv[0].p[1] == 'r' || argv[0].p[1] == 'R';
    if (block_timeout(c, &argv[argc - 1], &ms) || block_error(c))
        return 0;
    int rc = pop_first(c, t, &argv[1], argc - 2, tail, 1, 0);
    return rc ? (rc < 0 ? rc : 0) : block_nothing(c, &argv[1], argc - 2, ms);
}

/* BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout, BRPOPLPUSH
 * source destination timeout: the element moved */
static int cmd_blmove(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long ms;
    int from = 1, to = 0;
    if (argc == 6 && ((from = side(&argv[3])) < 0 || (to = side(&argv[4])) < 0))
        return reply_error(&c->out, "ERR syntax error"), 0;
    if (block_timeout(c, &argv[argc - 1], &ms) || block_error(c))
        return 0;
    struct list_handle b;
    int rc = list_probe(t, argv[1], list_max(), &b);
    list_close(&b);
    if (rc == KV_E_WRONGTYPE && block_state(c) != BLOCK_NONE)
        rc = 0;
    if (rc > 0)
        return move(c, t, argv[1], argv[2], from, to);
    return rc < 0 ? rc : block_nothing(c, &argv[1], 1, ms);
}

/* BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count] */
static int cmd_blmpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long ms, count;
    size_t first, n;
    int tail;
    if (block_timeout(c, &argv[1], &ms) || mpop_args(c, argc, argv, 2, &first, &n, &tail, &count) ||
        block_error(c))
        return 0;
    int rc = pop_first(c, t, &argv[first], n, tail, count, 1);
    return rc ? (rc < 0 ? rc : 0) : block_nothing(c, &argv[first], n, ms);
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
    {"lmpop", cmd_lmpop, -4, W | CMD_KEYNUM(1), ACL_LIST, {0, 0, 0}},
    {"blpop", cmd_bpop, -3, W | CMD_NOSCRIPT | CMD_BLOCKING, ACL_LIST, {1, -2, 1}},
    {"brpop", cmd_bpop, -3, W | CMD_NOSCRIPT | CMD_BLOCKING, ACL_LIST, {1, -2, 1}},
    {"blmove", cmd_blmove, 6, W | M | CMD_NOSCRIPT | CMD_BLOCKING, ACL_LIST, {1, 2, 1}},
    {"brpoplpush", cmd_blmove, 4, W | M | CMD_NOSCRIPT | CMD_BLOCKING, ACL_LIST, {1, 2, 1}},
    {"blmpop", cmd_blmpop, -5, W | CMD_BLOCKING | CMD_KEYNUM(2), ACL_LIST, {0, 0, 0}},
};
const size_t list_ncommands = sizeof list_commands / sizeof *list_commands;
