/* t_sort.c - SORT and SORT_RO (Redis 7.0's sortCommandGeneric): the
 * elements of a list, a set or a sorted set, by their own value or by
 * other keys' (BY pattern, a hash's field with "->"), numerically or
 * ALPHA, ASC or DESC, a LIMIT of them, each replaced by other keys' values
 * (GET pattern, "#" the element itself), replied or stored as a list
 * (STORE).
 *
 * The collections are read, and the stored list written, through their
 * types' own commands (LRANGE, SMEMBERS, ZRANGE, HGET, RPUSH), run here
 * into the reply buffer and read back: SORT depends on no record format.
 * The keys that BY and GET patterns name are known only once the elements
 * are read, so a first run names them (cmd_want_key) and the dispatcher
 * runs SORT again in a transaction that holds them too. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "t_hash.h"
#include "t_list.h"
#include "t_set.h"
#include "t_sort.h"
#include "t_zset.h"

/* An entry of a type's table, by name (a few dozen entries: a scan) */
static const struct command *find_cmd(const struct command *cmds, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(cmds[i].name, name))
            return &cmds[i];
    return NULL;
}

/* ---- reading what a command replied (RESP2: bulks, arrays of bulks) */

struct elem {
    const char *p; /* in struct sort's copy of the replies; NULL: nil */
    size_t n;
};

static int read_line(const char **pp, const char *end, long long *v)
{
    const char *p = *pp;
    char *e;
    if (p >= end)
        return -1;
    errno = 0;
    *v = strtoll(p + 1, &e, 10);
    if (errno || e + 2 > end || e[0] != '\r')
        return -1;
    *pp = e + 2;
    return 0;
}

/* One bulk (or nil) at *pp into x */
static int read_bulk(const char **pp, const char *end, struct elem *x)
{
    long long n;
    if (*pp >= end || **pp != '$' || read_line(pp, end, &n))
        return -1;
    if (n < 0) {
        x->p = NULL, x->n = 0;
        return 0;
    }
    if ((size_t)(end - *pp) < (size_t)n + 2)
        return -1;
    x->p = *pp, x->n = (size_t)n;
    *pp += n + 2;
    return 0;
}

/* ---- the work of one SORT */

struct item {
    struct elem e;   /* the element */
    struct elem by;  /* BY's value (ALPHA); nil when missing */
    double score;    /* numeric: the value it sorts by */
    size_t seq;      /* its place before sorting */
};

struct sort {
    struct conn *c;
    kv_txn *t;
    char *copies[1]; /* the elements' reply, read back (owned) */
    int alpha, desc;
    int by_alpha; /* ALPHA by BY's values (item_cmp) */
    int missing;  /* a pattern named a key not held */
};

/* Run cmd with args (argv[0] its name) into c->out, and move what it
 * replied into a buffer of ours (*copy, freed by sort_free): the reply's
 * bytes and their length, or a negative store error. */
static int run_into(struct sort *s, const struct command *cmd, size_t argc,
                    struct kv_slice *argv, char **copy, size_t *len)
{
    struct buf *b = &s->c->out;
    size_t mark = b->len;
    int rc = cmd->proc(s->c, s->t, argc, argv);
    size_t n = b->len - mark;
    if (rc >= 0) {
        char *p = malloc(n + 1);
        if (!p) {
            rc = TXN_E_NOMEM;
        } else {
            memcpy(p, b->p + mark, n);
            *copy = p;
            *len = n;
        }
    }
    b->len = mark;
    return rc;
}

/* Is key held by the transaction, and of which type? 1 (type in *type),
 * 0 missing, a store error; a key not held is wanted for the next run
 * (s->missing) and reads as missing now. */
static int probe(struct sort *s, struct kv_slice key, unsigned *type)
{
    int rc = kv_txn_read(s->t, key, NULL, NULL, type);
    if (rc == TXN_E_STATE) {
        s->missing = 1;
        return cmd_want_key(key);
    }
    return rc;
}

/* The elements of the list, set or sorted set at key, in its order, into
 * *out (*n of them): 1, 0 missing, or an error (KV_E_WRONGTYPE) */
static int load(struct sort *s, struct kv_slice key, struct elem **out, size_t *n)
{
    unsigned type;
    int rc = probe(s, key, &type);
    *out = NULL;
    *n = 0;
    if (rc <= 0)
        return rc;
    const struct command *cmd;
    struct kv_slice argv[4] = {{"lrange", 6}, key, {"0", 1}, {"-1", 2}};
    size_t argc = 4;
    if (type == KV_LIST) {
        cmd = find_cmd(list_commands, list_ncommands, "lrange");
    } else if (type == KV_ZSET) {
        cmd = find_cmd(zset_commands, zset_ncommands, "zrange");
        argv[0] = (struct kv_slice){"zrange", 6};
    } else if (type == KV_SET) {
        cmd = find_cmd(set_commands, set_ncommands, "smembers");
        argv[0] = (struct kv_slice){"smembers", 8};
        argc = 2;
    } else {
        return KV_E_WRONGTYPE;
    }
    if (!cmd)
        return TXN_E_STATE;
    size_t len;
    if ((rc = run_into(s, cmd, argc, argv, &s->copies[0], &len)) < 0)
        return rc;
    const char *p = s->copies[0], *end = p + len;
    long long count;
    if (p >= end || *p != '*' || read_line(&p, end, &count) || count < 0)
        return TXN_E_STATE; /* not the reply these commands give */
    if (count && !(*out = calloc((size_t)count, sizeof **out)))
        return TXN_E_NOMEM;
    for (size_t i = 0; i < (size_t)count; i++)
        if (read_bulk(&p, end, &(*out)[i]) || !(*out)[i].p)
            return TXN_E_STATE;
    *n = (size_t)count;
    return 1;
}

/* Redis's lookupKeyByPattern: pattern's first '*' replaced by the
 * element; "->field" after it reads a hash's field; "#" is the element
 * itself; a pattern without '*', a missing key or one of another type
 * gives nil. The value goes to *v (its bytes in a buffer appended to
 * *bufs), nil as NULL. */
struct values {
    char **p;
    size_t n, cap;
};

static int keep(struct values *vs, char *p)
{
    if (vs->n == vs->cap) {
        size_t cap = vs->cap ? 2 * vs->cap : 64;
        char **a = realloc(vs->p, cap * sizeof *a);
        if (!a) {
            free(p);
            return TXN_E_NOMEM;
        }
        vs->p = a;
        vs->cap = cap;
    }
    vs->p[vs->n++] = p;
    return 0;
}

static int by_pattern(struct sort *s, struct values *vs, const struct kv_slice *pat,
                      struct elem e, struct elem *v)
{
    v->p = NULL, v->n = 0;
    if (pat->n == 1 && pat->p[0] == '#') {
        *v = e;
        return 0;
    }
    /* Redis reads the pattern as a C string: a NUL byte ends it */
    size_t plen = strnlen(pat->p, pat->n);
    const char *star = memchr(pat->p, '*', plen);
    if (!star)
        return 0;
    const char *field = NULL, *pend = pat->p + plen;
    for (const char *f = star + 1; f + 2 < pend; f++)
        if (f[0] == '-' && f[1] == '>') {
            field = f + 2;
            break;
        }
    size_t pre = (size_t)(star - pat->p);
    size_t post = (size_t)((field ? field - 2 : pend) - (star + 1));
    char *k = malloc(pre + e.n + post + 1);
    if (!k)
        return TXN_E_NOMEM;
    memcpy(k, pat->p, pre);
    memcpy(k + pre, e.p, e.n);
    memcpy(k + pre + e.n, star + 1, post);
    struct kv_slice key = {k, pre + e.n + post};
    unsigned type;
    int rc = probe(s, key, &type);
    if (rc <= 0 || (field ? type != KV_HASH : (type != KV_STRING && type != KV_ITEM))) {
        free(k);
        return rc < 0 ? rc : 0;
    }
    char *copy = NULL;
    size_t len;
    if (field) {
        const struct command *hget = find_cmd(hash_commands, hash_ncommands, "hget");
        struct kv_slice argv[3] = {{"hget", 4}, key, {field, (size_t)(pend - field)}};
        rc = hget ? run_into(s, hget, 3, argv, &copy, &len) : TXN_E_STATE;
        const char *p = copy;
        if (rc >= 0 && read_bulk(&p, copy + len, v))
            rc = TXN_E_STATE;
    } else {
        struct val x;
        rc = get_val(s->t, key, &x);
        copy = x.p;
        v->p = rc > 0 ? (x.p ? x.p : "") : NULL;
        v->n = x.n;
    }
    free(k);
    if (rc < 0) {
        free(copy);
        return rc;
    }
    return copy ? keep(vs, copy) : 0; /* keep frees it when it cannot */
}

static int cmp_bytes(struct elem a, struct elem b)
{
    int c = memcmp(a.p, b.p, a.n < b.n ? a.n : b.n);
    return c ? c : (a.n > b.n) - (a.n < b.n);
}

/* sortCompare's order: numeric by score, equal scores by the elements'
 * bytes; ALPHA by BY's values (nil first) or by the elements; DESC the
 * reverse; ties kept in their first order */
static _Thread_local const struct sort *cmp_sort;

static int item_cmp(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    const struct sort *s = cmp_sort;
    int c;
    if (!s->alpha)
        c = x->score > y->score ? 1 : x->score < y->score ? -1 : cmp_bytes(x->e, y->e);
    else if (s->by_alpha)
        c = !x->by.p || !y->by.p ? (!!x->by.p - !!y->by.p) : cmp_bytes(x->by, y->by);
    else
        c = cmp_bytes(x->e, y->e);
    if (s->desc)
        c = -c;
    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int sort_generic(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv, int ro)
{
    struct sort s = {c, t, {NULL}, 0, 0, 0, 0};
    const struct kv_slice *sortby = NULL, *store = NULL, **gets = NULL;
    size_t ngets = 0;
    long long lstart = 0, lcount = -1;
    int dontsort = 0, rc = 0;
    if (!(gets = calloc(argc, sizeof *gets)))
        return TXN_E_NOMEM;
    for (size_t j = 2; j < argc; j++) {
        size_t left = argc - j - 1;
        if (arg_is(&argv[j], "asc")) {
            s.desc = 0;
        } else if (arg_is(&argv[j], "desc")) {
            s.desc = 1;
        } else if (arg_is(&argv[j], "alpha")) {
            s.alpha = 1;
        } else if (arg_is(&argv[j], "limit") && left >= 2) {
            if (parse_ll(&argv[j + 1], &lstart) || parse_ll(&argv[j + 2], &lcount)) {
                free(gets);
                return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
            }
            j += 2;
        } else if (!ro && arg_is(&argv[j], "store") && left >= 1) {
            store = &argv[++j];
        } else if (arg_is(&argv[j], "by") && left >= 1) {
            sortby = &argv[++j];
            if (!memchr(sortby->p, '*', strnlen(sortby->p, sortby->n)))
                dontsort = 1;
        } else if (arg_is(&argv[j], "get") && left >= 1) {
            gets[ngets++] = &argv[++j];
        } else {
            free(gets);
            return reply_error(&c->out, "ERR syntax error"), 0;
        }
    }
    struct elem *el = NULL;
    struct item *v = NULL;
    struct values vals = {NULL, 0, 0};
    size_t n = 0;
    unsigned type = 0;
    rc = probe(&s, argv[1], &type);
    if (rc > 0 && type != KV_LIST && type != KV_SET && type != KV_ZSET)
        rc = KV_E_WRONGTYPE;
    if (rc > 0)
        rc = load(&s, argv[1], &el, &n);
    if (rc < 0)
        goto out;
    /* a set's order is its own: with STORE it is sorted (ALPHA), so that
     * what is stored does not depend on it, as Redis */
    if (dontsort && type == KV_SET && store) {
        dontsort = 0;
        s.alpha = 1;
        sortby = NULL;
    }
    if (n && !(v = calloc(n, sizeof *v))) {
        rc = TXN_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = (struct item){el[i], {NULL, 0}, 0, i};
    /* unsorted: a list or a sorted set in its order, reversed by DESC; a
     * set in its own either way */
    if (dontsort && type != KV_SET && s.desc)
        for (size_t i = 0; i < n / 2; i++) {
            struct item x = v[i];
            v[i] = v[n - 1 - i];
            v[n - 1 - i] = x;
        }
    long long start = lstart < 0 ? 0 : lstart;
    long long end = lcount < 0 ? (long long)n - 1 : start + lcount - 1;
    if (start >= (long long)n) {
        start = (long long)n - 1;
        end = (long long)n - 2;
    }
    if (end >= (long long)n)
        end = (long long)n - 1;
    int bad_score = 0;
    for (size_t i = 0; !dontsort && i < n; i++) {
        struct elem by = v[i].e;
        if (sortby) {
            if ((rc = by_pattern(&s, &vals, sortby, v[i].e, &by)) < 0)
                goto out;
            if (!by.p)
                continue;
        }
        if (s.alpha) {
            if (sortby)
                v[i].by = by;
        } else {
            /* strtod of the value as a C string, as Redis */
            char few[128], *num = by.n < sizeof few ? few : malloc(by.n + 1), *e;
            if (!num) {
                rc = TXN_E_NOMEM;
                goto out;
            }
            memcpy(num, by.p, by.n);
            num[by.n] = 0;
            errno = 0;
            v[i].score = strtod(num, &e);
            if (*e || errno == ERANGE || isnan(v[i].score))
                bad_score = 1;
            if (num != few)
                free(num);
        }
    }
    if (!dontsort && !s.missing && n) { /* (qsort wants an array, even of none) */
        s.by_alpha = s.alpha && sortby;
        cmp_sort = &s;
        qsort(v, n, sizeof *v, item_cmp);
    }
    size_t rows = end >= start ? (size_t)(end - start + 1) : 0;
    size_t outlen = ngets ? ngets * rows : rows;
    struct elem *outv = NULL;
    if (outlen && !(outv = calloc(outlen, sizeof *outv))) {
        rc = TXN_E_NOMEM;
        goto out;
    }
    for (size_t r = 0, o = 0; r < rows; r++) {
        struct elem e = v[(size_t)start + r].e;
        if (!ngets)
            outv[o++] = e;
        for (size_t g = 0; g < ngets && rc >= 0; g++)
            rc = by_pattern(&s, &vals, gets[g], e, &outv[o++]);
    }
    if (rc >= 0 && s.missing)
        rc = KV_E_MOREKEYS; /* again, holding the keys the patterns named */
    if (rc < 0) {
        free(outv);
        goto out;
    }
    if (bad_score) {
        reply_error(&c->out, "ERR One or more scores can't be converted into double");
    } else if (!store) {
        reply_array(&c->out, outlen);
        for (size_t i = 0; i < outlen; i++)
            if (outv[i].p)
                reply_bulk(&c->out, outv[i].p, outv[i].n);
            else
                reply_nil(&c->out);
    } else {
        /* the destination replaced by a list of them (nil as ""), or
         * deleted when there are none, through RPUSH */
        rc = kv_txn_del(t, *store);
        const struct command *rpush = find_cmd(list_commands, list_ncommands, "rpush");
        struct kv_slice *args = outlen ? malloc((outlen + 2) * sizeof *args) : NULL;
        if (rc >= 0 && outlen && (!rpush || !args))
            rc = rpush ? TXN_E_NOMEM : TXN_E_STATE;
        if (rc >= 0 && outlen) {
            args[0] = (struct kv_slice){"rpush", 5};
            args[1] = *store;
            for (size_t i = 0; i < outlen; i++)
                args[2 + i] = (struct kv_slice){outv[i].p ? outv[i].p : "", outv[i].n};
            size_t mark = c->out.len;
            rc = rpush->proc(c, t, outlen + 2, args);
            c->out.len = mark;
        }
        free(args);
        if (rc >= 0)
            reply_int(&c->out, (long long)outlen);
    }
    free(outv);
    rc = rc < 0 ? rc : 0;
out:
    for (size_t i = 0; i < vals.n; i++)
        free(vals.p[i]);
    free(vals.p);
    free(v);
    free(el);
    free(s.copies[0]);
    free(gets);
    return rc;
}

/* SORT key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern
 * ...]] [ASC|DESC] [ALPHA] [STORE destination] */
static int cmd_sort(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return sort_generic(c, t, argc, argv, 0);
}

/* SORT_RO: SORT without STORE */
static int cmd_sort_ro(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    return sort_generic(c, t, argc, argv, 1);
}

/* Redis's key specs: the key, and (SORT) the STORE destination, which
 * its sortGetKeys finds; SORT_RO has a getkeys function too, so both say
 * movablekeys (SORT_RO's STORE is a syntax error: the key its flag names
 * is locked, never read) */
const struct command sort_commands[] = {
    {"sort", cmd_sort, -2, CMD_WRITE | CMD_DENYOOM | CMD_SORT_STORE,
     ACL_SET | ACL_SORTEDSET | ACL_LIST | ACL_DANGEROUS, {1, 1, 1}},
    {"sort_ro", cmd_sort_ro, -2, CMD_READONLY | CMD_SORT_STORE,
     ACL_SET | ACL_SORTEDSET | ACL_LIST | ACL_DANGEROUS, {1, 1, 1}},
};
const size_t sort_ncommands = sizeof sort_commands / sizeof *sort_commands;
