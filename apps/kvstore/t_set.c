/* t_set.c - the set commands (SADD ... SSCAN): Redis 7.0's replies and
 * error texts, each in one store transaction (its own or EXEC's). The
 * sets themselves, their forms and changes, are set.c's (set.h); this
 * file reads the arguments and CONFIG and writes the replies. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "set.h"
#include "t_set.h"

/* The thresholds of this command: CONFIG's, read once. */
static struct set_limits limits(void)
{
    return (struct set_limits){atomic_load(&cfg.set_max_intset_entries), SET_PACKED_MAX};
}

/* A random number for set.c's picks. */
static uint64_t seed(void)
{
    return (uint64_t)random() << 31 ^ (uint64_t)random();
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
    int rc = set_load(t, argv[1], &s);
    if (rc >= 0)
        rc = fn(c, argc, argv, t, &s, rc, ctx);
    set_free(&s);
    return rc;
}

#define SET_FN(name)                                                                          \
    static int name(struct conn *c, size_t argc, struct kv_slice *argv, kv_txn *t,            \
                    struct set *s, int found, const void *ctx)

/* SCARD, SISMEMBER, SMISMEMBER, SMEMBERS: reads */
SET_FN(lookup)
{
    (void)t, (void)found, (void)ctx;
    int rc = 0;
    if (arg_is(&argv[0], "scard")) {
        uint64_t n;
        if (!(rc = set_count(s, &n)))
            reply_int(&c->out, (long long)n);
    } else if (arg_is(&argv[0], "sismember")) {
        if ((rc = set_has(s, argv[2])) >= 0)
            reply_int(&c->out, rc), rc = 0;
    } else if (arg_is(&argv[0], "smismember")) {
        /* looked up first: an error leaves no half reply */
        char *in = malloc(argc);
        if (!in)
            return TXN_E_NOMEM;
        for (size_t i = 2; i < argc && rc >= 0; i++)
            in[i] = (char)(rc = set_has(s, argv[i]));
        if (rc >= 0) {
            rc = 0;
            reply_array(&c->out, argc - 2);
            for (size_t i = 2; i < argc; i++)
                reply_int(&c->out, in[i]);
        }
        free(in);
    } else if (!(rc = set_all(s))) {
        reply_members(&c->out, s);
    }
    return rc;
}

/* SADD key member [member ...]; SREM key member [member ...] */
static int cmd_sadd(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    struct set_limits lim = limits();
    uint64_t n;
    int rc = arg_is(&argv[0], "sadd") ? set_add(t, argv[1], &lim, &argv[2], argc - 2, &n)
                                      : set_rem(t, argv[1], &lim, &argv[2], argc - 2, &n);
    if (!rc)
        reply_int(&c->out, (long long)n);
    return rc;
}

static int cmd_lookup(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return with_set(c, t, argc, argv, lookup, NULL);
}

#define RAND_MAX_MEMBERS (1LL << 24)

/* SRANDMEMBER key [count]: a positive count gives distinct members (the
 * whole set when count >= its size), a negative one |count| members that
 * may repeat */
SET_FN(srandmember)
{
    (void)t, (void)argv;
    long long count = *(const long long *)ctx;
    struct kv_slice one;
    int rc = 0;
    if (argc < 3 && s->d) { /* one member: O(1) */
        if ((rc = set_random(s, seed(), &one)) > 0)
            reply_bulk(&c->out, one.p, one.n);
        free(rc > 0 ? (void *)one.p : NULL);
        return rc < 0 ? rc : 0;
    }
    if ((rc = set_all(s)))
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
            set_pick(s, n, seed());
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

static int cmd_spop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long count = 1;
    if (argc > 3)
        return reply_error(&c->out, "ERR syntax error"), 0;
    if (argc == 3 && (parse_ll(&argv[2], &count) || count < 0))
        return reply_error(&c->out, "ERR value is out of range, must be positive"), 0;
    struct set_limits lim = limits();
    struct set_popped x;
    int rc = set_pop(t, argv[1], &lim, argc == 3, (uint64_t)count, seed(), &x);
    if (rc >= 0 && argc == 3) {
        reply_array(&c->out, x.n);
        for (size_t i = 0; i < x.n; i++)
            reply_bulk(&c->out, x.e[i].p, x.e[i].n);
    } else if (rc >= 0) {
        x.n ? reply_bulk(&c->out, x.e[0].p, x.e[0].n) : reply_nil(&c->out);
    }
    set_popped_free(&x);
    return rc < 0 ? rc : 0;
}

/* SMOVE source destination member */
static int cmd_smove(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    struct set_limits lim = limits();
    int rc = set_move(t, argv[1], argv[2], &lim, argv[3]);
    if (rc >= 0)
        reply_int(&c->out, rc);
    return rc < 0 ? rc : 0;
}

/* ---- SINTER, SUNION, SDIFF, their STORE forms, SINTERCARD */

enum op { OP_INTER, OP_UNION, OP_DIFF };

static int union_rest(struct set *sets, size_t n, struct set *r);

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
        if (!(rc = set_load(t, keys[i], &sets[i])))
            empty = 1;
    if (rc < 0)
        return rc;
    rc = 0;
    if (op == OP_INTER && empty)
        return 0;
    /* a table's members read out to be walked; lookups go to the table */
    for (size_t i = 0; i < n && !rc; i++)
        rc = set_all(&sets[i]);
    if (op == OP_INTER) {
        /* the smallest set's members, kept when every other set has them */
        size_t small = 0;
        for (size_t i = 1; i < n; i++)
            if (sets[i].n < sets[small].n)
                small = i;
        for (size_t j = 0; j < sets[small].n && !rc && !(limit && r->n >= limit); j++) {
            size_t i = 0;
            while (i < n && (i == small || (rc = set_has(&sets[i], sets[small].e[j])) > 0))
                i++;
            if (rc >= 0 && i == n && !(rc = set_room(r, r->n + 1)))
                r->e[r->n++] = sets[small].e[j];
            rc = rc < 0 ? rc : 0;
        }
        return rc;
    }
    for (size_t j = 0; j < sets[0].n && !rc; j++) {
        size_t i = 1;
        while (op == OP_DIFF && i < n && !(rc = set_has(&sets[i], sets[0].e[j])))
            i++;
        if (rc >= 0 && (op == OP_UNION || i == n) && !(rc = set_room(r, r->n + 1)))
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
    int rc = set_room(r, total);
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
        struct set d = {NULL, SET_INTSET, NULL, 0, 0, NULL, NULL};
        struct set_limits lim = limits();
        for (size_t i = 0; i < r.n && !rc; i++)
            rc = set_insert(&d, r.e[i], &lim);
        if (!rc && !(rc = set_store(t, argv[1], &d, 0, &lim)))
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
    int rc = s->d ? set_collect(s, *(const uint64_t *)ctx, (uint64_t)count, &next) : 0;
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
    {"srem", cmd_sadd, -3, W | F, ACL_SET, {1, 1, 1}},
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
