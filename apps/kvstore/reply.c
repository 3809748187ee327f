/* reply.c - byte buffers and RESP2 reply encoding. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply.h"

int buf_reserve(struct buf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->cap - b->len >= n)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return -1;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void buf_add(struct buf *b, const void *p, size_t n)
{
    if (n && !buf_reserve(b, n)) {
        memcpy(b->p + b->len, p, n);
        b->len += n;
    }
}

void buf_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void add_line(struct buf *b, char type, const char *s, size_t n)
{
    if (buf_reserve(b, n + 3))
        return;
    b->p[b->len++] = type;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    memcpy(b->p + b->len, "\r\n", 2);
    b->len += 2;
}

void reply_simple(struct buf *b, const char *s)
{
    add_line(b, '+', s, strlen(s));
}

void reply_error(struct buf *b, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    for (size_t i = 0; i < len; i++) /* a client's bytes quoted in an error */
        if (msg[i] == '\r' || msg[i] == '\n')
            msg[i] = ' ';
    add_line(b, '-', msg, len);
}

/* v in decimal at s (room for 20 digits and a sign): its length. Every
 * bulk reply has such a header, and snprintf cost as much as a GET's
 * lookup (docs/kvstore.md, section 15). */
static size_t decimal(char *s, long long v)
{
    char tmp[20];
    size_t n = 0, len = 0;
    unsigned long long u = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;
    do
        tmp[n++] = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        s[len++] = '-';
    while (n)
        s[len++] = tmp[--n];
    return len;
}

static void add_num(struct buf *b, char type, long long v)
{
    char s[24];
    add_line(b, type, s, decimal(s, v));
}

void reply_int(struct buf *b, long long v)
{
    add_num(b, ':', v);
}

void reply_array(struct buf *b, size_t n)
{
    add_num(b, '*', (long long)n);
}

void reply_nil(struct buf *b)
{
    buf_add(b, "$-1\r\n", 5);
}

void reply_bulk(struct buf *b, const char *p, size_t n)
{
    if (buf_reserve(b, n + 32))
        return;
    b->p[b->len++] = '$';
    b->len += decimal(b->p + b->len, (long long)n);
    memcpy(b->p + b->len, "\r\n", 2);
    b->len += 2;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    memcpy(b->p + b->len, "\r\n", 2);
    b->len += 2;
}
