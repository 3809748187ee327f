/* resp.c - the RESP2 request parser (see resp.h). */
#include "resp.h"

#include <stdio.h>
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
    /* canonical only, as Redis's string2ll: no "04", "-0" or "+4" */
    if (p[i] == '0' && (end - i > 1 || neg))
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

/* Blanks between inline arguments, and what may follow a closing quote:
 * C's isspace, as Redis's sdssplitargs. */
static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The escape after a backslash in double quotes: \n \r \t \b \a, else
 * the character itself (\\ and \" among them). */
static char unescape(char c)
{
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'b': return '\b';
    case 'a': return '\a';
    default: return c;
    }
}

/* Split the inline line buf[0, end) into arguments as Redis's sdssplitargs
 * does: blanks separate them; "double quotes" take \xHH and the escapes
 * of unescape(), 'single quotes' only \'; a closing quote must be followed
 * by a blank or the end of the line. An argument is rewritten in place
 * (it never grows), so its (off, len) still points into buf. Unlike
 * sdssplitargs, which stops at a NUL byte, a NUL is an ordinary byte. */
static enum resp_status split_inline(struct resp_parser *r, char *buf, size_t end,
                                     const struct resp_limits *lim)
{
    static const char unbalanced[] = "Protocol error: unbalanced quotes in request";
    size_t i = 0;
    for (;;) {
        while (i < end && is_blank(buf[i]))
            i++;
        if (i == end)
            return r->argc ? RESP_DONE : RESP_EMPTY;
        size_t start = i, out = i;
        char quote = 0; /* the quote we are in, or 0 */
        for (;;) {
            if (i == end) {
                if (quote)
                    return fail(r, unbalanced);
                break;
            }
            char ch = buf[i];
            if (!quote && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'))
                break;
            if (!quote && (ch == '"' || ch == '\'')) {
                quote = ch, i++;
            } else if (quote && ch == quote) {
                if (++i < end && !is_blank(buf[i]))
                    return fail(r, unbalanced);
                break;
            } else if (quote == '"' && ch == '\\' && i + 3 < end && buf[i + 1] == 'x' &&
                       hex_digit(buf[i + 2]) >= 0 && hex_digit(buf[i + 3]) >= 0) {
                buf[out++] = (char)(hex_digit(buf[i + 2]) * 16 + hex_digit(buf[i + 3]));
                i += 4;
            } else if (quote == '"' && ch == '\\' && i + 1 < end) {
                buf[out++] = unescape(buf[i + 1]);
                i += 2;
            } else if (quote == '\'' && ch == '\\' && i + 1 < end && buf[i + 1] == '\'') {
                buf[out++] = '\'';
                i += 2;
            } else {
                buf[out++] = ch, i++;
            }
        }
        if (r->argc == lim->max_args)
            return fail(r, "Protocol error: too many arguments");
        if (push_arg(r, start, out - start))
            return fail(r, "out of memory");
    }
}

/* An inline command: one line, for a person typing into nc or telnet
 * (redis-cli and client libraries send arrays). */
static enum resp_status parse_inline(struct resp_parser *r, char *buf, size_t len,
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
    return split_inline(r, buf, end, lim);
}

enum resp_status resp_parse(struct resp_parser *r, char *buf, size_t len,
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
            if (buf[r->pos] != '$') { /* Redis's text, with the byte found */
                snprintf(r->errbuf, sizeof r->errbuf, "Protocol error: expected '$', got '%c'",
                         buf[r->pos]);
                return fail(r, r->errbuf);
            }
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
        /* the two bytes after the bulk are skipped unread, as Redis
         * skips them: "$4\r\nPINGxx" is PING */
        if (push_arg(r, r->pos, (size_t)r->bulk))
            return fail(r, "out of memory");
        r->pos += want;
        r->bulk = -1;
        r->need = 0;
    }
    return RESP_DONE;
}
