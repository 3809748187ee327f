/* resp.c - the RESP2 request parser (see resp.h). */
#include "resp.h"

#include <stdlib.h>
#include <string.h>

/* A "*<n>\r\n" or "$<n>\r\n" line: 20 digits, a sign and CRLF fit in 32. */
#define HDR_MAX 32

void resp_init(struct resp_parser *r)
{
    memset(r, 0, sizeof *r);
    resp_reset(r);
}

void resp_reset(struct resp_parser *r)
{
    r->pos = 0;
    r->nargs = -1;
    r->bulk = -1;
    r->argc = 0;
    r->need = 0;
    r->err = NULL;
}

void resp_free(struct resp_parser *r)
{
    free(r->argv);
    r->argv = NULL;
    r->cap = 0;
}

static enum resp_status fail(struct resp_parser *r, const char *msg)
{
    r->err = msg;
    return RESP_ERROR;
}

/* Append an argument; argv grows by doubling, never by what a header
 * claims, so "*1000000" alone costs nothing. */
static int push_arg(struct resp_parser *r, size_t off, size_t len)
{
    if (r->argc == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 8;
        struct resp_arg *a = realloc(r->argv, cap * sizeof *a);
        if (!a)
            return -1;
        r->argv = a;
        r->cap = cap;
    }
    r->argv[r->argc++] = (struct resp_arg){off, len};
    return 0;
}

/* Parse the line "<c><integer>\r\n" at p (n bytes available) into *v and
 * its length into *adv. Returns 1, 0 (incomplete) or -1 (malformed). The
 * integer is an optional '-' and 1 to 18 digits: anything longer is no
 * length a client could mean. */
static int header_line(const char *p, size_t n, long long *v, size_t *adv)
{
    const char *lf = memchr(p, '\n', n < HDR_MAX ? n : HDR_MAX);
    if (!lf)
        return n >= HDR_MAX ? -1 : 0;
    size_t line = (size_t)(lf - p); /* without the '\n' */
    if (line < 3 || p[line - 1] != '\r')
        return -1;
    size_t i = 1, end = line - 1;
    int neg = p[i] == '-';
    i += (size_t)neg;
    if (i == end || end - i > 18)
        return -1;
    long long x = 0;
    for (; i < end; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        x = x * 10 + (p[i] - '0');
    }
    *v = neg ? -x : x;
    *adv = line + 1;
    return 1;
}

/* An inline command: one line, arguments separated by spaces or tabs (no
 * quoting: redis-cli and every client library send arrays; this is for a
 * person typing PING into nc). */
static enum resp_status parse_inline(struct resp_parser *r, const char *buf, size_t len,
                                     const struct resp_limits *lim)
{
    /* r->pos: bytes already known to hold no '\n', so a line that arrives
     * a byte at a time is scanned once */
    size_t scan = len < lim->max_inline ? len : lim->max_inline;
    const char *lf = r->pos < scan ? memchr(buf + r->pos, '\n', scan - r->pos) : NULL;
    if (!lf) {
        if (len >= lim->max_inline)
            return fail(r, "Protocol error: too big inline request");
        r->pos = len;
        return RESP_MORE;
    }
    size_t end = (size_t)(lf - buf);
    r->pos = end + 1;
    if (end > 0 && buf[end - 1] == '\r')
        end--;
    for (size_t i = 0; i < end;) {
        while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
            i++;
        size_t start = i;
        while (i < end && buf[i] != ' ' && buf[i] != '\t')
            i++;
        if (i == start)
            break;
        if (r->argc == lim->max_args)
            return fail(r, "Protocol error: too many arguments");
        if (push_arg(r, start, i - start))
            return fail(r, "out of memory");
    }
    return r->argc ? RESP_DONE : RESP_EMPTY;
}

enum resp_status resp_parse(struct resp_parser *r, const char *buf, size_t len,
                            const struct resp_limits *lim)
{
    long long v;
    size_t adv;
    if (r->err)
        return RESP_ERROR;
    if (r->nargs < 0) {
        if (len == 0)
            return RESP_MORE;
        if (buf[0] != '*')
            return parse_inline(r, buf, len, lim);
        int h = header_line(buf, len, &v, &adv);
        if (h <= 0)
            return h ? fail(r, "Protocol error: invalid multibulk length") : RESP_MORE;
        r->pos = adv;
        if (v <= 0)
            return RESP_EMPTY; /* "*0" and "*-1": nothing to run, as Redis */
        if ((unsigned long long)v > lim->max_args)
            return fail(r, "Protocol error: invalid multibulk length");
        r->nargs = v;
    }
    while (r->argc < (size_t)r->nargs) {
        if (r->bulk < 0) {
            if (r->pos == len)
                return RESP_MORE;
            if (buf[r->pos] != '$')
                return fail(r, "Protocol error: expected '$'");
            int h = header_line(buf + r->pos, len - r->pos, &v, &adv);
            if (h <= 0)
                return h ? fail(r, "Protocol error: invalid bulk length") : RESP_MORE;
            if (v < 0)
                return fail(r, "Protocol error: invalid bulk length");
            if ((unsigned long long)v > lim->max_bulk)
                return fail(r, "Protocol error: bulk length exceeds the server's max-bulk");
            r->bulk = v;
            r->pos += adv;
        }
        size_t want = (size_t)r->bulk + 2, have = len - r->pos;
        if (have < want) {
            r->need = want - have;
            return RESP_MORE;
        }
        if (buf[r->pos + want - 2] != '\r' || buf[r->pos + want - 1] != '\n')
            return fail(r, "Protocol error: bulk not followed by CRLF");
        if (push_arg(r, r->pos, (size_t)r->bulk))
            return fail(r, "out of memory");
        r->pos += want;
        r->bulk = -1;
        r->need = 0;
    }
    return RESP_DONE;
}
