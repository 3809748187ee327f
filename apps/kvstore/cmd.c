/* cmd.c - the helpers the command files share (cmd.h): the names of
 * the table's flags and ACL categories, key specs, argument parsing, store
 * errors and values. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cmd.h"
#include "t_pack.h"

const char *const cmd_flag_names[CMD_NFLAGS] = {
    "write",   "readonly",     "denyoom", "admin",  "pubsub",        "noscript",
    "blocking", "loading",     "stale",   "skip_slowlog", "fast",    "no_auth",
    "may_replicate", "no_mandatory_keys", "no_multi", "allow_busy",
};

const char *const cmd_acl_names[ACL_NCATS] = {
    "@keyspace", "@read",   "@write",  "@set",    "@sortedset",   "@list",       "@hash",
    "@string",   "@bitmap", "@hyperloglog", "@geo", "@stream",    "@pubsub",     "@admin",
    "@fast",     "@slow",   "@blocking", "@dangerous", "@connection", "@transaction",
    "@scripting",
};

/* the keys of the range part (first, last, step) */
static size_t range_keys(const struct key_spec *k, size_t argc)
{
    if (k->first <= 0 || (size_t)k->first >= argc)
        return 0;
    size_t last = k->last < 0 ? argc - (size_t)-k->last : (size_t)k->last;
    if (last >= argc)
        last = argc - 1;
    return last < (size_t)k->first ? 0 : (last - (size_t)k->first) / (size_t)k->step + 1;
}

/* The keys after the range: where the first is (*at) and how many, or -1
 * when the count is not a count of keys the request has. A count is read
 * as C's atoi (leading blanks, a sign, digits, anything after ignored):
 * Redis's key spec wants a strict integer, and when it is not one Redis
 * falls back to its getkeys function, which reads it so. */
static long extra_keys(uint32_t flags, size_t argc, const struct kv_slice *argv, size_t *at)
{
    size_t numkeys = (flags & CMD_KEYNUM_MASK) >> CMD_KEYNUM_SHIFT;
    if (numkeys) {
        if (numkeys >= argc)
            return -1;
        const struct kv_slice *a = &argv[numkeys];
        char s[24];
        size_t n = a->n < sizeof s - 1 ? a->n : sizeof s - 1;
        memcpy(s, a->p, n);
        s[n] = 0;
        long long v = strtoll(s, NULL, 10);
        *at = numkeys + 1;
        return v < 1 || (unsigned long long)v > argc - *at ? -1 : (long)v;
    }
    if (flags & CMD_SORT_STORE) { /* the last STORE, its options skipped as Redis */
        long found = 0;
        for (size_t i = 2; i < argc; i++) {
            if (arg_is(&argv[i], "limit")) {
                i += 2;
            } else if (arg_is(&argv[i], "get") || arg_is(&argv[i], "by")) {
                i += 1;
            } else if (arg_is(&argv[i], "store") && i + 1 < argc) {
                *at = i + 1;
                found = 1;
            }
        }
        return found;
    }
    return 0;
}

size_t cmd_nkeys(const struct command *cmd, size_t argc, const struct kv_slice *argv)
{
    size_t at;
    if (cmd->flags & CMD_NOT_KEY)
        return 0;
    long extra = cmd_movable(cmd->flags) ? extra_keys(cmd->flags, argc, argv, &at) : 0;
    return extra < 0 ? 0 : range_keys(&cmd->keys, argc) + (size_t)extra;
}

size_t cmd_key(const struct command *cmd, size_t argc, const struct kv_slice *argv, size_t i)
{
    const struct key_spec *k = &cmd->keys;
    size_t r = range_keys(k, argc), at = 0;
    if (i < r)
        return (size_t)k->first + i * (size_t)k->step;
    extra_keys(cmd->flags, argc, argv, &at);
    return at + (i - r);
}

_Thread_local struct cmd_wanted cmd_wanted;

int cmd_want_key(struct kv_slice k)
{
    for (size_t i = 0; i < cmd_wanted.n; i++)
        if (cmd_wanted.k[i].n == k.n && !memcmp(cmd_wanted.k[i].p, k.p, k.n))
            return 0;
    if (cmd_wanted.n == cmd_wanted.cap) {
        size_t cap = cmd_wanted.cap ? 2 * cmd_wanted.cap : 16;
        struct kv_slice *a = realloc(cmd_wanted.k, cap * sizeof *a);
        if (!a)
            return TXN_E_NOMEM;
        cmd_wanted.k = a;
        cmd_wanted.cap = cap;
    }
    char *p = malloc(k.n ? k.n : 1);
    if (!p)
        return TXN_E_NOMEM;
    memcpy(p, k.p, k.n);
    cmd_wanted.k[cmd_wanted.n++] = (struct kv_slice){p, k.n};
    return 0;
}

void cmd_wanted_clear(void)
{
    for (size_t i = 0; i < cmd_wanted.n; i++)
        free((void *)(uintptr_t)cmd_wanted.k[i].p); /* our copies */
    cmd_wanted.n = 0;
}

/* set by reply_store_error (cmd.h) */
_Thread_local int cmd_found_full;

void reply_store_error(struct buf *b, int rc)
{
    cmd_found_full |= rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL;
    if (rc == KV_E_WRONGTYPE)
        reply_error(b, "WRONGTYPE Operation against a key holding the wrong kind of value");
    else if (rc == KV_E_MOREKEYS) /* cmd_want_key's runs again all found others */
        reply_error(b, "ERR the keys this command reads kept changing: try again");
    else if (rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL)
        reply_error(b, "ERR out of persistent memory: the pool is full (%s)", txn_strerror(rc));
    else
        reply_error(b, "ERR store: %s", txn_strerror(rc));
}

int arg_is(const struct kv_slice *a, const char *word)
{
    size_t n = strlen(word);
    return a->n == n && !strncasecmp(a->p, word, n);
}

/* Redis's integer syntax: t_pack.h's, which the packed records share. */
int parse_ll(const struct kv_slice *a, long long *out)
{
    return pack_ll(a->p, a->n, out);
}

int parse_u64(const struct kv_slice *a, uint64_t *out)
{
    char s[24];
    if (a->n == 0 || a->n >= sizeof s || a->p[0] < '0' || a->p[0] > '9')
        return -1;
    memcpy(s, a->p, a->n);
    s[a->n] = 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

/* Glob matching as Redis's KEYS: * ? [abc] [^a-z] and \ escapes. A star
 * remembers where it was so a mismatch backtracks there only: the last
 * star's choice is the only one that matters, so this is O(|p| * |s|),
 * not exponential. */
static int class_match(const char **pp, const char *pend, char ch)
{
    const char *p = *pp + 1;
    int neg = p < pend && *p == '^', hit = 0;
    p += neg;
    for (; p < pend && *p != ']'; p++) {
        if (*p == '\\' && p + 1 < pend) {
            p++;
            hit |= *p == ch;
        } else if (p + 2 < pend && p[1] == '-') { /* as Redis, "a-]" is a range too */
            unsigned char lo = (unsigned char)p[0], hi = (unsigned char)p[2];
            if (lo > hi) {
                unsigned char t = lo;
                lo = hi;
                hi = t;
            }
            hit |= (unsigned char)ch >= lo && (unsigned char)ch <= hi;
            p += 2;
        } else {
            hit |= *p == ch;
        }
    }
    /* the pattern's end closes a class left open, as in Redis ("[^"
     * matches any one byte) */
    *pp = p < pend ? p : pend - 1;
    return hit != neg;
}

int glob_match(const char *pat, size_t plen, const char *s, size_t slen)
{
    const char *p = pat, *pend = pat + plen, *send = s + slen;
    const char *star = NULL, *star_s = NULL;
    while (s < send) {
        if (p < pend && *p == '*') {
            star = ++p;
            star_s = s;
            continue;
        }
        if (p < pend) {
            const char *q = p;
            int ok;
            if (*q == '?')
                ok = 1;
            else if (*q == '[')
                ok = class_match(&q, pend, *s);
            else if (*q == '\\' && q + 1 < pend)
                ok = *++q == *s;
            else
                ok = *q == *s;
            if (ok) {
                p = q + 1;
                s++;
                continue;
            }
        }
        if (!star)
            return 0;
        p = star;
        s = ++star_s;
    }
    while (p < pend && *p == '*')
        p++;
    return p == pend;
}

void cmd_val_cb(void *arg, const char *v, size_t n)
{
    struct val *x = arg;
    x->n = n;
    if (!v)
        return;
    if (!(x->p = malloc(n ? n : 1))) {
        x->oom = 1;
        return;
    }
    memcpy(x->p, v, n);
}

int get_val(kv_txn *t, struct kv_slice k, struct val *x)
{
    memset(x, 0, sizeof *x);
    int rc = kv_txn_get(t, k, cmd_val_cb, x);
    if (rc > 0 && x->oom)
        rc = TXN_E_NOMEM;
    return rc;
}

int parse_ld(const char *p, size_t n, long double *out)
{
    char s[5120];
    if (n == 0 || n >= sizeof s || isspace((unsigned char)p[0]))
        return -1;
    memcpy(s, p, n);
    s[n] = 0;
    char *end;
    errno = 0;
    long double v = strtold(s, &end);
    if (*end || errno == ERANGE || isnan(v))
        return -1;
    *out = v;
    return 0;
}

int format_ld(long double v, char *buf)
{
    /* Redis's human-friendly form: 17 digits after the point, trailing
     * zeros and the point dropped */
    int n = snprintf(buf, LD_CHARS, "%.17Lf", v);
    if (strchr(buf, '.')) {
        while (n > 0 && buf[n - 1] == '0')
            n--;
        if (n > 0 && buf[n - 1] == '.')
            n--;
    }
    if (n == 2 && !memcmp(buf, "-0", 2))
        buf[0] = '0', n = 1;
    buf[n] = 0;
    return n;
}

const char *type_name(unsigned type)
{
    if (type == KV_ZSET)
        return "zset";
    if (type == KV_LIST)
        return "list";
    return type == KV_HASH ? "hash" : type == KV_SET ? "set" : "string"; /* an item is a string */
}

int get_any(kv_txn *t, struct kv_slice k, struct val *x, unsigned *type)
{
    memset(x, 0, sizeof *x);
    int rc = kv_txn_read(t, k, cmd_val_cb, x, type);
    if (rc > 0 && x->oom)
        rc = TXN_E_NOMEM;
    return rc;
}


uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void reply_help(struct buf *b, size_t argc, const char *cmd, const char *const *lines)
{
    char lower[32];
    size_t n = 0;
    for (; cmd[n] && n < sizeof lower - 1; n++)
        lower[n] = (char)tolower((unsigned char)cmd[n]);
    lower[n] = 0;
    if (argc != 2)
        return reply_error(b, "ERR wrong number of arguments for '%s|help' command", lower);
    size_t k = 0;
    while (lines[k])
        k++;
    char usage[96];
    snprintf(usage, sizeof usage, "%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
             cmd);
    reply_array(b, k + 3);
    reply_simple(b, usage);
    for (size_t i = 0; i < k; i++)
        reply_simple(b, lines[i]);
    reply_simple(b, "HELP");
    reply_simple(b, "    Prints this help.");
}
