/* mcclient.c - kvclient's memcached text protocol modes (issue #32):
 *
 *   kvclient mc-replay PORT  the requests of a script (standard input) sent
 *                           one at a time to 127.0.0.1:PORT, each reply
 *                           printed on a line of its own: the client of
 *                           mc_compat/run.sh, which runs it against
 *                           memcached and kvstore and compares
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvclient.h"

/* ---- mc-replay
 *
 * A script line is one request, sent with CR LF after it. Escapes: \r \n
 * \t \\ \xHH; \{N:c} is the character c N times (long keys, large
 * values); \- is nothing (a line of only \- sends an empty line); \C is
 * the CAS of the last VALUE line this connection received; \c at the end
 * sends the line without CR LF and ends the connection after the reply (a
 * request cut short). Lines starting with '#' are comments, except
 * "#@sleep MS", which waits; blank lines are skipped.
 *
 * Each request is followed by "version", whose reply marks the end of the
 * request's replies (so a request with no reply, noreply, shows as none).
 * Output: "LINE<TAB>REPLY" for each request: the bytes received before
 * the marker, escaped as above (runs of 16 or more bytes as \{N:c}), the
 * CAS of each VALUE line as <cas>; " <closed>" when the server closed the
 * connection (the next request opens another), " <timeout>" when the
 * marker did not come within 10 s (and the connection is replaced); " <more>"
 * when bytes came after the marker (the same). */

#define REPLAY_WAIT_MS 10000
#define CUT_WAIT_MS 200

struct replay {
    int port;
    struct cli c;
    char cas[32]; /* the CAS of the last VALUE line received */
};

static int hexval(int ch)
{
    return isdigit(ch) ? ch - '0' : tolower(ch) - 'a' + 10;
}

/* The bytes of a script line; *cut: it ends with \c. 0, or -1 (bad). */
static int expand(const char *s, const char *cas, struct bytes *b, int *cut)
{
    *cut = 0;
    while (*s) {
        if (*s != '\\') {
            bytes_add(b, s++, 1);
            continue;
        }
        char ch, e = s[1];
        s += 2;
        switch (e) {
        case 'r': ch = '\r'; break;
        case 'n': ch = '\n'; break;
        case 't': ch = '\t'; break;
        case '\\': ch = '\\'; break;
        case '-': continue;
        case 'C': bytes_add(b, cas, strlen(cas)); continue;
        case 'c':
            if (*s)
                return -1;
            *cut = 1;
            return 0;
        case 'x':
            if (!isxdigit((unsigned char)s[0]) || !isxdigit((unsigned char)s[1]))
                return -1;
            ch = (char)(hexval(s[0]) << 4 | hexval(s[1]));
            s += 2;
            break;
        case '{': {
            char *end;
            unsigned long n = strtoul(s, &end, 10);
            if (*end != ':' || !end[1] || end[2] != '}' || n > (1ul << 26))
                return -1;
            for (unsigned long i = 0; i < n; i++)
                bytes_add(b, &end[1], 1);
            s = end + 3;
            continue;
        }
        default:
            return -1;
        }
        bytes_add(b, &ch, 1);
    }
    bytes_add(b, "\r\n", 2);
    return 0;
}

/* How many "version" commands a request holds: lines whose first token
 * (memcached splits on spaces) is "version"; a request of the script has
 * no data block that looks like one. */
static int versions_in(const struct bytes *b)
{
    int n = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (i > 0 && b->p[i - 1] != '\n')
            continue;
        size_t j = i;
        while (j < b->n && b->p[j] == ' ')
            j++;
        if (b->n - j >= 8 && !memcmp(b->p + j, "version", 7) &&
            strchr(" \r\n", b->p[j + 7]))
            n++;
    }
    return n;
}

/* Walk the replies in p[0..n): where the `want`-th VERSION line ends, or 0
 * if it has not come yet (a VALUE line's data block is skipped whole). */
static size_t marker_end(const char *p, size_t n, int want)
{
    size_t at = 0;
    int seen = 0;
    while (at < n) {
        const char *lf = memchr(p + at, '\n', n - at);
        if (!lf)
            return 0;
        size_t next = (size_t)(lf - p) + 1;
        if (!strncmp(p + at, "VALUE ", 6) && next - at < 600) {
            char line[600];
            memcpy(line, p + at, next - at);
            line[next - at] = 0;
            char key[300];
            unsigned long long flags, len;
            if (sscanf(line, "VALUE %299s %llu %llu", key, &flags, &len) == 3)
                next += len + 2;
        } else if (!strncmp(p + at, "VERSION ", 8) && ++seen == want) {
            return next;
        }
        at = next;
    }
    return 0;
}

static void put_escaped(struct bytes *o, const char *p, size_t n)
{
    char t[32];
    for (size_t i = 0; i < n;) {
        size_t run = 1;
        while (i + run < n && p[i + run] == p[i])
            run++;
        unsigned char ch = (unsigned char)p[i];
        const char *one = ch == '\r' ? "\\r" : ch == '\n' ? "\\n" : ch == '\\' ? "\\\\" : NULL;
        char hex[8];
        if (!one && (ch < 0x20 || ch >= 0x7f)) {
            snprintf(hex, sizeof hex, "\\x%02x", ch);
            one = hex;
        }
        if (!one) {
            hex[0] = (char)ch, hex[1] = 0;
            one = hex;
        }
        if (run >= 16) {
            bytes_add(o, t, (size_t)snprintf(t, sizeof t, "\\{%zu:%s}", run, one));
            i += run;
        } else {
            bytes_add(o, one, strlen(one));
            i++;
        }
    }
}

/* The replies as printed: escaped, each VALUE line's CAS replaced (and
 * remembered for \C). */
static void render(struct replay *r, const char *p, size_t n, struct bytes *o)
{
    size_t at = 0;
    while (at < n) {
        const char *lf = memchr(p + at, '\n', n - at);
        size_t next = lf ? (size_t)(lf - p) + 1 : n;
        char line[600], key[300], cas[32];
        unsigned long long flags, len;
        int k = 0;
        if (!strncmp(p + at, "VALUE ", 6) && next - at < sizeof line) {
            memcpy(line, p + at, next - at);
            line[next - at] = 0;
            if (sscanf(line, "VALUE %299s %llu %llu %31s%n", key, &flags, &len, cas, &k) == 4 &&
                (!strcmp(line + k, "\r\n"))) {
                snprintf(r->cas, sizeof r->cas, "%s", cas);
                snprintf(line, sizeof line, "VALUE %s %llu %llu <cas>\r\n", key, flags, len);
                put_escaped(o, line, strlen(line));
                at = next;
                continue;
            }
        }
        put_escaped(o, p + at, next - at);
        at = next;
    }
}

/* Read until the marker (or the time is up, or the server closes):
 * 0 marker, 1 closed, 2 timeout; *used: the replies before the marker. */
static int replay_read(struct replay *r, int want, int wait_ms, size_t *used)
{
    uint64_t end = now_ms() + (uint64_t)wait_ms;
    for (;;) {
        size_t m = want ? marker_end(r->c.buf, r->c.len, want) : 0;
        if (m) {
            /* the marker is the last VERSION line: drop it */
            size_t start = m - 1;
            while (start > 0 && r->c.buf[start - 1] != '\n')
                start--;
            *used = start;
            return 0;
        }
        *used = r->c.len;
        uint64_t now = now_ms();
        struct pollfd pf = {r->c.fd, POLLIN, 0};
        if (now >= end || poll(&pf, 1, (int)(end - now)) <= 0)
            return 2;
        if (r->c.cap - r->c.len < 65536) {
            r->c.cap = r->c.cap ? 2 * r->c.cap + 65536 : 65536;
            r->c.buf = realloc(r->c.buf, r->c.cap);
        }
        ssize_t n = recv(r->c.fd, r->c.buf + r->c.len, r->c.cap - r->c.len, 0);
        if (n <= 0)
            return 1;
        r->c.len += (size_t)n;
    }
}

static int replay_connect(struct replay *r)
{
    cli_close(&r->c);
    int fd = connect_tcp(r->port);
    cli_init(&r->c, fd);
    return fd < 0 ? -1 : 0;
}

/* One request: send it and the marker, print the replies. */
static int replay_one(struct replay *r, int lineno, const char *text)
{
    struct bytes req = {0}, o = {0};
    int cut;
    if (expand(text, r->cas, &req, &cut)) {
        fprintf(stderr, "mc-replay: line %d: a bad escape: %s\n", lineno, text);
        return -1;
    }
    if (r->c.fd < 0 && replay_connect(r)) {
        fprintf(stderr, "mc-replay: cannot connect to port %d\n", r->port);
        free(req.p);
        return -1;
    }
    int want = 0;
    if (!cut) {
        want = versions_in(&req) + 1;
        bytes_add(&req, "version\r\n", 9);
    }
    send_all(r->c.fd, req.p, req.n);
    size_t used;
    int rc = replay_read(r, want, cut ? CUT_WAIT_MS : REPLAY_WAIT_MS, &used);
    render(r, r->c.buf, used, &o);
    /* bytes after the marker: it was not the last reply (then the next
     * request starts on a new connection) */
    int extra = !rc && !cut && marker_end(r->c.buf, r->c.len, want) < r->c.len;
    printf("%d\t%.*s%s\n", lineno, (int)o.n, o.p,
           rc == 1   ? " <closed>"
           : rc == 2 ? (cut ? "" : " <timeout>")
           : extra   ? " <more>"
                     : "");
    if (rc || cut || extra)
        cli_close(&r->c);
    else
        r->c.len = 0; /* the marker was the last byte */
    free(req.p);
    free(o.p);
    return 0;
}

int run_mc_replay(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: kvclient mc-replay PORT <SCRIPT\n");
        return 2;
    }
    struct replay r = {.port = atoi(argv[2])};
    cli_init(&r.c, -1);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lineno = 0, status = 0;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        lineno++;
        if (n && line[n - 1] == '\n')
            line[--n] = 0;
        long ms;
        if (sscanf(line, "#@sleep %ld", &ms) == 1) {
            fflush(stdout);
            usleep((useconds_t)ms * 1000);
            continue;
        }
        if (!n || line[0] == '#')
            continue;
        if (replay_one(&r, lineno, line)) {
            status = 2;
            break;
        }
    }
    free(line);
    cli_close(&r.c);
    return status;
}
