/* mcclient.c - kvclient's memcached protocol modes (issue #32):
 *
 *   kvclient mc-replay PORT  the requests of a script (standard input) sent
 *                           one at a time to 127.0.0.1:PORT, each reply
 *                           printed on a line of its own: the client of
 *                           mc_compat/run.sh, which runs it against
 *                           memcached and kvstore and compares
 *   kvclient mc-bin-replay PORT  the same in the binary protocol
 *   kvclient mc-kill SERVER  SIGKILL the server under pipelined set,
 *                           delete, incr, gets+cas and add on its memcached
 *                           port, restart it, check every acknowledged write
 *                           (KV_MC_KILLS rounds, default 10; KV_SEED;
 *                           KV_SERVER_ARGS: more server arguments)
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
 * the CAS of the last VALUE line (or meta reply's c token) this connection
 * received; \c at the end
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
        if (next - at < sizeof line && next - at > 2 &&
            (!strncmp(p + at, "HD", 2) || !strncmp(p + at, "VA ", 3) ||
             !strncmp(p + at, "EN", 2))) {
            /* a meta reply: its c token is the item's CAS (remembered) */
            char *cas_at = NULL;
            memcpy(line, p + at, next - at);
            line[next - at] = 0;
            for (char *w = strchr(line, ' '); w; w = strchr(w + 1, ' '))
                if (w[1] == 'c' && w[2] >= '0' && w[2] <= '9')
                    cas_at = w + 2;
            if (cas_at) {
                size_t d = strspn(cas_at, "0123456789");
                snprintf(r->cas, sizeof r->cas, "%.*s", (int)d, cas_at);
                char tail[600];
                snprintf(tail, sizeof tail, "%s", cas_at + d);
                snprintf(cas_at, sizeof line - (size_t)(cas_at - line), "<cas>%s", tail);
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

/* ---- mc-bin-replay
 *
 * The binary protocol's replay: a script line is one request or more,
 * separated by " | ", each an opcode (a name below or 0xNN) and fields:
 * k=KEY v=VALUE (escapes as mc-replay's; a space is \x20), f=FLAGS e=EXPIRY
 * (set, add, replace; e also touch, gat and flush), d=DELTA i=INITIAL
 * (incr, decr: e defaults to 0), c=CAS (c=\C: the last CAS received),
 * o=OPAQUE, x=HEX (the extras as given, instead), kl=N and bl=N (key and
 * body lengths as sent, instead of the true ones). A noop follows the
 * line's requests; its response ends theirs. Output: "LINE<TAB>" then
 * each response as "[op st k= x= v= cas o]" (a CAS as <cas>), the STAT
 * responses of a stat with keys as one "[stats]", and " <closed>" or
 * " <timeout>" as mc-replay prints them. */

static const struct {
    const char *name;
    uint8_t op;
} bin_names[] = {
    {"get", 0x00},     {"set", 0x01},      {"add", 0x02},      {"replace", 0x03},
    {"delete", 0x04},  {"incr", 0x05},     {"decr", 0x06},     {"quit", 0x07},
    {"flush", 0x08},   {"getq", 0x09},     {"noop", 0x0a},     {"version", 0x0b},
    {"getk", 0x0c},    {"getkq", 0x0d},    {"append", 0x0e},   {"prepend", 0x0f},
    {"stat", 0x10},    {"setq", 0x11},     {"addq", 0x12},     {"replaceq", 0x13},
    {"deleteq", 0x14}, {"incrq", 0x15},    {"decrq", 0x16},    {"quitq", 0x17},
    {"flushq", 0x18},  {"appendq", 0x19},  {"prependq", 0x1a}, {"verbosity", 0x1b},
    {"touch", 0x1c},   {"gat", 0x1d},      {"gatq", 0x1e},     {"gatk", 0x23},
    {"gatkq", 0x24},
};

#define BIN_MARK 0x4d41524bu /* the closing noop's opaque */

static void be_put(struct bytes *b, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        char ch = (char)(v >> (8 * i));
        bytes_add(b, &ch, 1);
    }
}

static uint64_t be_get(const char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | (unsigned char)p[i];
    return v;
}

/* One request of a line into b: 0, or -1 (a bad field). */
static int bin_request(char *text, const char *cas, struct bytes *b)
{
    struct bytes key = {0}, val = {0}, ext = {0};
    unsigned long long f = 0, e = 0, d = 0, ini = 0, c = 0, o = 0, kl = 0, bl = 0;
    int has_e = 0, has_x = 0, has_kl = 0, has_bl = 0, op = -1, cut, rc = 0;
    char *save, *w = strtok_r(text, " ", &save);
    for (size_t i = 0; w && i < sizeof bin_names / sizeof *bin_names; i++)
        if (!strcmp(w, bin_names[i].name))
            op = bin_names[i].op;
    if (w && op < 0 && !strncmp(w, "0x", 2))
        op = (int)strtol(w, NULL, 16);
    if (op < 0 || op > 255)
        return -1;
    while (!rc && (w = strtok_r(NULL, " ", &save))) {
        char *eq = strchr(w, '=');
        if (!eq)
            return -1;
        *eq++ = 0;
        struct bytes *to = !strcmp(w, "k") ? &key : !strcmp(w, "v") ? &val : NULL;
        if (to) {
            rc = expand(eq, cas, to, &cut) || cut;
            to->n -= rc ? 0 : 2; /* expand's CR LF */
        } else if (!strcmp(w, "c")) {
            c = strcmp(eq, "\\C") ? strtoull(eq, NULL, 0) : strtoull(cas, NULL, 10);
        } else if (!strcmp(w, "x")) {
            has_x = 1;
            for (size_t i = 0; eq[i] && eq[i + 1]; i += 2) {
                char ch = (char)(hexval(eq[i]) << 4 | hexval(eq[i + 1]));
                bytes_add(&ext, &ch, 1);
            }
        } else {
            unsigned long long v = strtoull(eq, NULL, 0);
            if (!strcmp(w, "f")) f = v;
            else if (!strcmp(w, "e")) e = v, has_e = 1;
            else if (!strcmp(w, "d")) d = v;
            else if (!strcmp(w, "i")) ini = v;
            else if (!strcmp(w, "o")) o = v;
            else if (!strcmp(w, "kl")) kl = v, has_kl = 1;
            else if (!strcmp(w, "bl")) bl = v, has_bl = 1;
            else rc = -1;
        }
    }
    if (!rc && !has_x) {
        int base = op & ~0x10; /* the quiet forms are 0x10 above most */
        if (op == 0x01 || op == 0x02 || op == 0x03 || op == 0x11 || op == 0x12 || op == 0x13)
            be_put(&ext, f, 4), be_put(&ext, e, 4);
        else if (base == 0x05 || base == 0x06)
            be_put(&ext, d, 8), be_put(&ext, ini, 8), be_put(&ext, e, 4);
        else if (op == 0x1c || op == 0x1d || op == 0x1e || op == 0x23 || op == 0x24 ||
                 ((op == 0x08 || op == 0x18) && has_e))
            be_put(&ext, e, 4);
    }
    if (!rc) {
        char h[2] = {(char)0x80, (char)op};
        bytes_add(b, h, 2);
        be_put(b, has_kl ? kl : key.n, 2);
        h[0] = (char)ext.n, h[1] = 0;
        bytes_add(b, h, 2);
        be_put(b, 0, 2); /* vbucket */
        be_put(b, has_bl ? bl : ext.n + key.n + val.n, 4);
        be_put(b, o, 4);
        be_put(b, c, 8);
        bytes_add(b, ext.p, ext.n);
        bytes_add(b, key.p, key.n);
        bytes_add(b, val.p, val.n);
    }
    free(key.p);
    free(val.p);
    free(ext.p);
    return rc ? -1 : 0;
}

/* The responses in p[0, n) as printed; *done: the marker was among them;
 * the return: the bytes taken (whole responses only). */
static size_t bin_render(struct replay *r, const char *p, size_t n, struct bytes *o, int *done)
{
    size_t at = 0;
    int in_stats = 0;
    *done = 0;
    while (!*done && n - at >= 24) {
        const char *h = p + at;
        size_t kl = be_get(h + 2, 2), el = (unsigned char)h[4], bl = be_get(h + 8, 4);
        if (n - at < 24 + bl)
            break;
        unsigned op = (unsigned char)h[1], st = (unsigned)be_get(h + 6, 2);
        uint64_t opaque = be_get(h + 12, 4), cas = be_get(h + 16, 8);
        at += 24 + bl;
        if (op == 0x0a && opaque == BIN_MARK) {
            *done = 1;
            break;
        }
        if (op == 0x10 && !st && kl) { /* a stat: the list as one */
            if (!in_stats)
                bytes_add(o, "[stats]", 7);
            in_stats = 1;
            continue;
        }
        in_stats = 0;
        char t[96];
        bytes_add(o, t, (size_t)snprintf(t, sizeof t, "%s[%02x st=%04x", o->n ? " " : "", op, st));
        bytes_add(o, " k=", 3);
        put_escaped(o, h + 24 + el, kl);
        bytes_add(o, " x=", 3);
        for (size_t i = 0; i < el; i++)
            bytes_add(o, t, (size_t)snprintf(t, sizeof t, "%02x", (unsigned char)h[24 + i]));
        bytes_add(o, " v=", 3);
        put_escaped(o, h + 24 + el + kl, bl < el + kl ? 0 : bl - el - kl);
        if (cas)
            snprintf(r->cas, sizeof r->cas, "%llu", (unsigned long long)cas);
        bytes_add(o, t, (size_t)snprintf(t, sizeof t, " %s o=%llu]", cas ? "<cas>" : "cas=0",
                                         (unsigned long long)opaque));
    }
    return at;
}

static int bin_replay_one(struct replay *r, int lineno, const char *line)
{
    struct bytes req = {0}, o = {0};
    char text[4096];
    if (strlen(line) >= sizeof text) {
        fprintf(stderr, "mc-bin-replay: line %d: longer than %zu bytes\n", lineno, sizeof text);
        return -1;
    }
    snprintf(text, sizeof text, "%s", line);
    for (char *part = text, *bar; part; part = bar) {
        bar = strstr(part, " | ");
        if (bar)
            *bar = 0, bar += 3;
        if (bin_request(part, r->cas, &req)) {
            fprintf(stderr, "mc-bin-replay: line %d: a bad request: %s\n", lineno, part);
            free(req.p);
            return -1;
        }
    }
    char mark[24] = {(char)0x80, 0x0a};
    for (int i = 0; i < 4; i++)
        mark[12 + i] = (char)(BIN_MARK >> (24 - 8 * i));
    bytes_add(&req, mark, sizeof mark);
    if (r->c.fd < 0 && replay_connect(r)) {
        fprintf(stderr, "mc-bin-replay: cannot connect to port %d\n", r->port);
        free(req.p);
        return -1;
    }
    send_all(r->c.fd, req.p, req.n);
    uint64_t end = now_ms() + REPLAY_WAIT_MS;
    int done = 0, closed = 0;
    size_t used = 0;
    while (!done) {
        used += bin_render(r, r->c.buf + used, r->c.len - used, &o, &done);
        if (done)
            break;
        uint64_t now = now_ms();
        struct pollfd pf = {r->c.fd, POLLIN, 0};
        if (now >= end || poll(&pf, 1, (int)(end - now)) <= 0)
            break;
        if (r->c.cap - r->c.len < 65536) {
            r->c.cap = r->c.cap ? 2 * r->c.cap + 65536 : 65536;
            r->c.buf = realloc(r->c.buf, r->c.cap);
        }
        ssize_t k = recv(r->c.fd, r->c.buf + r->c.len, r->c.cap - r->c.len, 0);
        if (k <= 0) {
            closed = 1;
            break;
        }
        r->c.len += (size_t)k;
    }
    printf("%d\t%.*s%s\n", lineno, (int)o.n, o.p,
           done ? "" : closed ? " <closed>" : " <timeout>");
    if (!done || used < r->c.len)
        cli_close(&r->c);
    else
        r->c.len = 0;
    free(req.p);
    free(o.p);
    return 0;
}

/* Both replays: the script's lines one at a time. */
int run_mc_replay(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: kvclient mc-replay|mc-bin-replay PORT <SCRIPT\n");
        return 2;
    }
    int (*one)(struct replay *, int, const char *) =
        strcmp(argv[1], "mc-bin-replay") ? replay_one : bin_replay_one;
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
        if (one(&r, lineno, line)) {
            status = 2;
            break;
        }
    }
    free(line);
    cli_close(&r.c);
    return status;
}

/* ---- mc-kill
 *
 * MC_CONNS connections, each on its own keys (key % MC_CONNS), pipeline
 * MC_DEPTH requests: set, delete, gets then cas (or add where the key is
 * absent), and the meta ms and md, on value keys; set, incr and the meta ma
 * on counter keys (every MC_COUNTER_EVERY-th). One request at a time per key, so each key's
 * acknowledged state is known, and so is what its request in flight at the
 * kill would make of it. After the restart every key must hold its
 * acknowledged state or, if a request on it was in flight, that request's
 * result: a set's value and flags, a delete's absence, an incr's sum. A
 * value names its key and version and ends in a checksum of the rest, so
 * a torn or misplaced one is told apart from an old one. */

enum { MC_CONNS = 4, MC_DEPTH = 8, MC_KEYS = 4000, MC_COUNTER_EVERY = 5, MC_BIG_EVERY = 25 };

enum mop_kind { M_SET, M_DEL, M_GETS, M_CAS, M_ADD, M_INCR, M_SETNUM, M_MS, M_MD, M_MA };
static const char *const mop_name[] = {"set", "delete", "gets", "cas", "add",
                                       "incr", "set", "ms", "md", "ma"};

/* What a key holds: a value key its version, a counter its number. */
struct mstate {
    uint8_t present;
    uint32_t ver;
    uint64_t num;
};

struct mkey {
    struct mstate acked; /* after its last acknowledged request */
    struct mstate after; /* after its request in flight */
    uint8_t inflight, pending; /* pending: in flight when the server died */
};

struct mop {
    int key;
    uint8_t kind;
    uint64_t delta; /* M_INCR */
};

struct mconn {
    struct cli c;
    struct mop q[MC_DEPTH]; /* requests awaiting replies, oldest first */
    int head, n;
};

struct mc_totals {
    uint64_t acked, pending, applied, checked;
    int bad_replies;
};

static struct mkey mkeys[MC_KEYS];
static uint32_t mc_next_ver = 1;

static int is_counter(int key)
{
    return key % MC_COUNTER_EVERY == 0;
}

static uint32_t mc_flags(int key, uint32_t ver)
{
    return (uint32_t)(((uint64_t)key * 2654435761u) ^ ((uint64_t)ver * 40503u));
}

static uint64_t fnv(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return h;
}

/* Value `ver` of a value key: "key=K ver=V " then bytes from (K, V), then
 * " sum=" and 16 hex digits of the FNV-1a hash of all before. */
static void mc_value(int key, uint32_t ver, struct bytes *b)
{
    char head[64], sum[32];
    uint64_t x = (uint64_t)key << 32 | ver;
    size_t len = ver % MC_BIG_EVERY == 0 ? 20000 + x % 40000 : x * 2654435761u % 500;
    b->n = 0;
    bytes_add(b, head, (size_t)snprintf(head, sizeof head, "key=%d ver=%u ", key, ver));
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        char ch = (char)(x >> 32);
        bytes_add(b, &ch, 1);
    }
    bytes_add(b, sum, (size_t)snprintf(sum, sizeof sum, " sum=%016llx",
                                       (unsigned long long)fnv(b->p, b->n)));
}

static void mc_key_name(char *k, size_t size, int key)
{
    snprintf(k, size, "mck:%d", key);
}

/* What a request makes of a key's state. */
static struct mstate mc_apply(struct mstate s, const struct mop *op, uint32_t ver, uint64_t num)
{
    switch (op->kind) {
    case M_SET: case M_CAS: case M_ADD: case M_MS:
        return (struct mstate){1, ver, 0};
    case M_SETNUM:
        return (struct mstate){1, 0, num};
    case M_DEL: case M_MD:
        return (struct mstate){0, 0, 0};
    case M_INCR: case M_MA:
        s.num += op->delta;
        return s;
    default: /* M_GETS reads */
        return s;
    }
}

static void mc_send_store(struct mconn *m, const char *cmd, int key, uint32_t flags,
                          const char *data, size_t n, uint64_t cas)
{
    char k[32], line[160];
    struct bytes b = {0};
    mc_key_name(k, sizeof k, key);
    int len = cas ? snprintf(line, sizeof line, "%s %s %u 0 %zu %llu\r\n", cmd, k, flags, n,
                             (unsigned long long)cas)
                  : snprintf(line, sizeof line, "%s %s %u 0 %zu\r\n", cmd, k, flags, n);
    bytes_add(&b, line, (size_t)len);
    bytes_add(&b, data, n);
    bytes_add(&b, "\r\n", 2);
    send_all(m->c.fd, b.p, b.n); /* a dead server: the replies will say */
    free(b.p);
}

/* Queue and send a request on key; cas: the CAS value of a gets. */
static void mc_send(struct mconn *m, int key, int kind, uint64_t cas, unsigned *seed)
{
    struct mop op = {key, (uint8_t)kind, 0};
    struct mkey *mk = &mkeys[key];
    char k[32], line[96];
    uint32_t ver = 0;
    uint64_t num = 0;
    mc_key_name(k, sizeof k, key);
    if (kind == M_SET || kind == M_CAS || kind == M_ADD || kind == M_MS) {
        struct bytes v = {0};
        ver = mc_next_ver++;
        mc_value(key, ver, &v);
        if (kind == M_MS) { /* the meta set: ms <key> <len> F<flags> */
            struct bytes b = {0};
            int n = snprintf(line, sizeof line, "ms %s %zu F%u\r\n", k, v.n,
                             mc_flags(key, ver));
            bytes_add(&b, line, (size_t)n);
            bytes_add(&b, v.p, v.n);
            bytes_add(&b, "\r\n", 2);
            send_all(m->c.fd, b.p, b.n);
            free(b.p);
        } else {
            mc_send_store(m, kind == M_SET ? "set" : kind == M_CAS ? "cas" : "add", key,
                          mc_flags(key, ver), v.p, v.n, kind == M_CAS ? cas : 0);
        }
        free(v.p);
    } else if (kind == M_SETNUM) {
        num = rand_r(seed) % 100000;
        int n = snprintf(line, sizeof line, "%llu", (unsigned long long)num);
        mc_send_store(m, "set", key, mc_flags(key, 0), line, (size_t)n, 0);
    } else {
        op.delta = 1 + rand_r(seed) % 1000;
        int n = kind == M_DEL    ? snprintf(line, sizeof line, "delete %s\r\n", k)
                : kind == M_MD   ? snprintf(line, sizeof line, "md %s\r\n", k)
                : kind == M_GETS ? snprintf(line, sizeof line, "gets %s\r\n", k)
                : kind == M_MA   ? snprintf(line, sizeof line, "ma %s D%llu\r\n", k,
                                            (unsigned long long)op.delta)
                                 : snprintf(line, sizeof line, "incr %s %llu\r\n", k,
                                            (unsigned long long)op.delta);
        send_all(m->c.fd, line, (size_t)n);
    }
    mk->after = mc_apply(mk->acked, &op, ver, num);
    mk->inflight = 1;
    m->q[(m->head + m->n++) % MC_DEPTH] = op;
}

/* A new request on one of connection idx's keys with none in flight. */
static void mc_send_new(struct mconn *m, int idx, unsigned *seed)
{
    int key;
    do
        key = (int)(rand_r(seed) % (MC_KEYS / MC_CONNS)) * MC_CONNS + idx;
    while (mkeys[key].inflight);
    int r = (int)(rand_r(seed) % 100);
    if (is_counter(key))
        mc_send(m, key,
                !mkeys[key].acked.present ? M_SETNUM
                : r < 70                  ? M_INCR
                : r < 90                  ? M_MA
                                          : M_DEL,
                0, seed);
    else
        mc_send(m, key,
                r < 35   ? M_SET
                : r < 50 ? M_MS
                : r < 60 ? M_DEL
                : r < 65 ? M_MD
                : r < 85 ? M_GETS
                         : M_SET,
                0, seed);
}

/* ---- memcached replies */

/* One line, or one VALUE line and its data block. */
struct munit {
    const char *line; /* without CR LF */
    size_t len;
    int value; /* a VALUE line: key, flags, CAS, data */
    char key[64];
    uint32_t flags;
    uint64_t cas;
    const char *data;
    size_t dn;
};

/* The unit at p: the bytes it takes, 0 if not all here, -1 if malformed. */
static long mc_unit(const char *p, size_t n, struct munit *u)
{
    const char *lf = n ? memchr(p, '\n', n) : NULL; /* p is NULL before a first read */
    memset(u, 0, sizeof *u);
    if (!lf)
        return 0;
    size_t used = (size_t)(lf - p) + 1;
    if (used < 2 || lf[-1] != '\r')
        return -1;
    u->line = p;
    u->len = used - 2;
    if (u->len < 6 || memcmp(p, "VALUE ", 6))
        return (long)used;
    char line[160];
    unsigned long long cas = 0;
    size_t dn;
    if (u->len >= sizeof line)
        return -1;
    memcpy(line, p, u->len);
    line[u->len] = 0;
    if (sscanf(line, "VALUE %63s %u %zu %llu", u->key, &u->flags, &dn, &cas) < 3)
        return -1;
    if (n < used + dn + 2)
        return 0;
    if (memcmp(p + used + dn, "\r\n", 2))
        return -1;
    u->value = 1;
    u->cas = cas;
    u->data = p + used;
    u->dn = dn;
    return (long)(used + dn + 2);
}

static int unit_is(const struct munit *u, const char *s)
{
    return u->len == strlen(s) && !memcmp(u->line, s, u->len);
}

/* The state of key that a VALUE block (NULL: none) shows: 0, or -1 if it
 * is not one the test wrote (torn, misplaced, other flags); why: what it
 * holds, in words. */
static int mc_found(int key, const struct munit *u, struct mstate *st, char *why, size_t cap)
{
    memset(st, 0, sizeof *st);
    if (!u || !u->value) {
        snprintf(why, cap, "absent");
        return 0;
    }
    st->present = 1;
    if (is_counter(key)) {
        char digits[32], *end;
        snprintf(digits, sizeof digits, "%.*s", (int)(u->dn < 31 ? u->dn : 31), u->data);
        st->num = strtoull(digits, &end, 10);
        snprintf(why, cap, "counter %s, flags %u", digits, u->flags);
        return u->flags == mc_flags(key, 0) && u->dn && !*end && u->dn == strlen(digits) ? 0
                                                                                         : -1;
    }
    int k = -1;
    char head[48], sum[17] = "";
    snprintf(head, sizeof head, "%.*s", (int)(u->dn < 47 ? u->dn : 47), u->data);
    if (u->dn > 22)
        snprintf(sum, sizeof sum, "%.16s", u->data + u->dn - 16);
    if (sscanf(head, "key=%d ver=%u ", &k, &st->ver) != 2 || k != key ||
        strtoull(sum, NULL, 16) != fnv(u->data, u->dn - 21)) {
        snprintf(why, cap, "a torn or misplaced value (%zu bytes, key %d)", u->dn, k);
        return -1;
    }
    snprintf(why, cap, "version %u, flags %u", st->ver, u->flags);
    struct bytes want = {0};
    mc_value(key, st->ver, &want);
    int same = want.n == u->dn && !memcmp(want.p, u->data, u->dn);
    free(want.p);
    return same && u->flags == mc_flags(key, st->ver) ? 0 : -1;
}

static int same_state(const struct mstate *a, const struct mstate *b)
{
    return a->present == b->present && (!a->present || (a->ver == b->ver && a->num == b->num));
}

static const char *state_words(int key, const struct mstate *s, char *w, size_t cap)
{
    if (!s->present)
        snprintf(w, cap, "absent");
    else if (is_counter(key))
        snprintf(w, cap, "counter %llu", (unsigned long long)s->num);
    else
        snprintf(w, cap, "version %u", s->ver);
    return w;
}

/* ---- the load, the kill, the check */

static void mc_consume(struct cli *c, size_t used)
{
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
}

/* The oldest request's reply, if all of it is here: 1 taken (checked
 * against the model, which it advances), 0 not yet, -1 malformed. *gets:
 * the CAS value of an answered gets (0: the key is absent). */
static int mc_take(struct mconn *m, struct mc_totals *t, uint64_t *gets)
{
    struct munit u, end;
    long a = mc_unit(m->c.buf, m->c.len, &u), b = 1;
    const struct mop *op = &m->q[m->head];
    struct mkey *mk = &mkeys[op->key];
    char want[32], why[96];
    struct mstate st;
    if (a > 0 && u.value) /* a gets: the VALUE block, then END */
        b = mc_unit(m->c.buf + a, m->c.len - (size_t)a, &end);
    if (a <= 0 || b <= 0)
        return a < 0 || b < 0 ? -1 : 0;
    int ok;
    switch (op->kind) {
    case M_DEL:
        ok = unit_is(&u, mk->acked.present ? "DELETED" : "NOT_FOUND");
        break;
    case M_MD:
        ok = unit_is(&u, mk->acked.present ? "HD" : "NF");
        break;
    case M_MS:
    case M_MA:
        ok = unit_is(&u, "HD");
        break;
    case M_INCR:
        snprintf(want, sizeof want, "%llu", (unsigned long long)mk->after.num);
        ok = unit_is(&u, want);
        break;
    case M_GETS:
        ok = (u.value ? unit_is(&end, "END") : unit_is(&u, "END")) &&
             !mc_found(op->key, u.value ? &u : NULL, &st, why, sizeof why) &&
             same_state(&st, &mk->acked);
        *gets = u.value ? (u.cas ? u.cas : 1) : 0;
        break;
    default:
        ok = unit_is(&u, "STORED");
    }
    if (!ok && ++t->bad_replies <= 10)
        printf("mc-kill: key %d: %s answered \"%.*s\"\n", op->key, mop_name[op->kind],
               (int)(u.len < 80 ? u.len : 80), u.line);
    if (ok)
        mk->acked = mk->after;
    t->acked += ok && op->kind != M_GETS;
    mk->inflight = 0;
    mc_consume(&m->c, (size_t)(u.value ? a + b : a));
    m->head = (m->head + 1) % MC_DEPTH;
    m->n--;
    return 1;
}

/* Load for `ms`, SIGKILL the server and read every reply it sent before
 * dying; the requests left unanswered are in flight (pending). */
static void mc_load_and_kill(struct server *s, int port, int ms, unsigned *seed,
                             struct mc_totals *t)
{
    struct mconn m[MC_CONNS];
    memset(m, 0, sizeof m);
    for (int i = 0; i < MC_CONNS; i++) {
        cli_init(&m[i].c, connect_tcp(port));
        CHECK(m[i].c.fd >= 0, "connect to the memcached port %d", port);
        while (m[i].c.fd >= 0 && m[i].n < MC_DEPTH)
            mc_send_new(&m[i], i, seed);
    }
    uint64_t end = now_ms() + (uint64_t)ms;
    int killed = 0, what[MC_CONNS];
    struct cli *cs[MC_CONNS];
    for (int i = 0; i < MC_CONNS; i++)
        cs[i] = &m[i].c;
    while (load_ready(s, end, &killed, cs, MC_CONNS, 20, what)) {
        for (int i = 0; i < MC_CONNS; i++) {
            if (!what[i])
                continue;
            int eof = what[i] < 0 ? -1 : cli_fill(&m[i].c), r = 0;
            uint64_t gets = 0;
            while (m[i].n && (r = mc_take(&m[i], t, &gets)) > 0) {
                struct mop done = m[i].q[(m[i].head + MC_DEPTH - 1) % MC_DEPTH];
                if (killed)
                    continue;
                if (done.kind == M_GETS) /* the cas (or add) that follows it */
                    mc_send(&m[i], done.key, gets ? M_CAS : M_ADD, gets, seed);
                else
                    mc_send_new(&m[i], i, seed);
            }
            if (eof || r < 0) {
                if (r < 0 && ++t->bad_replies <= 10)
                    printf("mc-kill: connection %d: a malformed reply\n", i);
                t->bad_replies += what[i] < 0;
                for (; m[i].n; m[i].head = (m[i].head + 1) % MC_DEPTH, m[i].n--) {
                    struct mkey *mk = &mkeys[m[i].q[m[i].head].key];
                    mk->pending = m[i].q[m[i].head].kind != M_GETS;
                    mk->inflight = 0;
                    t->pending += mk->pending;
                }
                cli_close(&m[i].c);
            }
        }
    }
    int st;
    waitpid(s->pid, &st, 0);
    s->pid = 0;
}

/* After a restart: every key holds its acknowledged state, or what its
 * request in flight made of it (the model takes what is there). */
static int mc_verify(int port, struct mc_totals *t)
{
    enum { BATCH = 100 };
    struct cli c;
    int bad = 0;
    cli_init(&c, connect_tcp(port));
    if (c.fd < 0) {
        CHECK(0, "connect to the memcached port %d", port);
        return 1;
    }
    for (int first = 0; first < MC_KEYS; first += BATCH) {
        struct bytes req = {0};
        char k[32];
        const struct munit *found[BATCH] = {0};
        struct munit units[BATCH];
        bytes_add(&req, "gets", 4);
        for (int key = first; key < first + BATCH; key++) {
            mc_key_name(k, sizeof k, key);
            bytes_add(&req, " ", 1);
            bytes_add(&req, k, strlen(k));
        }
        bytes_add(&req, "\r\n", 2);
        send_all(c.fd, req.p, req.n);
        free(req.p);
        /* read to END, then look at the units in place */
        size_t at = 0;
        int nu = 0;
        uint64_t until = now_ms() + 30000;
        for (;;) {
            struct munit u;
            long used = mc_unit(c.buf + at, c.len - at, &u);
            if (used > 0 && unit_is(&u, "END"))
                break;
            if (used > 0 && u.value && nu < BATCH) {
                units[nu++] = u;
                at += (size_t)used;
                continue;
            }
            struct pollfd pf = {c.fd, POLLIN, 0};
            if (used != 0 || now_ms() > until || poll(&pf, 1, 1000) < 0 || cli_fill(&c)) {
                CHECK(0, "gets of keys %d..: a reply that is not VALUE blocks and END",
                      first);
                cli_close(&c);
                return 1;
            }
            at = 0, nu = 0; /* the buffer may have moved: parse again */
        }
        for (int i = 0; i < nu; i++) {
            int key = atoi(units[i].key + 4);
            if (key >= first && key < first + BATCH)
                found[key - first] = &units[i];
        }
        for (int key = first; key < first + BATCH; key++) {
            struct mkey *mk = &mkeys[key];
            struct mstate st;
            char why[96], was[48];
            int rc = mc_found(key, found[key - first], &st, why, sizeof why);
            t->checked++;
            if (!rc && same_state(&st, &mk->acked)) {
                /* as acknowledged */
            } else if (!rc && mk->pending && same_state(&st, &mk->after)) {
                t->applied++;
            } else if (++bad <= 10) {
                printf("mc-kill: key %d holds %s, not its acknowledged state (%s)%s\n", key, why,
                       state_words(key, &mk->acked, was, sizeof was),
                       mk->pending ? " nor what its request in flight makes of it" : "");
            }
            if (!rc) /* the model goes on from what is there */
                mk->acked = st;
            mk->pending = 0;
        }
        mc_consume(&c, at + 5);
    }
    cli_close(&c);
    if (bad > 10)
        printf("mc-kill: ... %d keys in all\n", bad);
    return bad;
}

/* Start the server with a memcached port of its own (*port), and the
 * words of KV_SERVER_ARGS (e.g. "--ack commit": a server that replies
 * before its writes are durable, which the test must catch). Three tries:
 * two free ports asked for one after the other may be the same. */
static int mc_start(struct server *s, int *port)
{
    char p[16];
    const char *extra[24] = {"--pool-size", "256M", "--threads", "2", "--memcached-port", p};
    int n = 6, rc = -1;
    char *args = server_env_args(extra, &n, 24);
    for (int try = 0; try < 3 && rc; try++) {
        *port = free_port();
        snprintf(p, sizeof p, "%d", *port);
        rc = server_start(s, extra);
    }
    free(args);
    return rc;
}

int run_mc_kill(const char *bin)
{
    unsigned seed;
    int rounds = kill_rounds("KV_MC_KILLS", 10, &seed), port;
    printf("mc-kill test: %s %s, %d rounds, KV_SEED=%u\n", bin,
           getenv("KV_SERVER_ARGS") ? getenv("KV_SERVER_ARGS") : "", rounds, seed);
    struct server s;
    struct mc_totals t = {0};
    server_names(&s, bin, "mckill");
    uint64_t t0 = now_ms();
    for (int round = 1; round <= rounds; round++) {
        uint64_t at[5] = {now_ms()};
        if (mc_start(&s, &port)) {
            CHECK(0, "round %d: server starts", round);
            break;
        }
        at[1] = now_ms();
        int lost = round > 1 ? mc_verify(port, &t) : 0;
        CHECK(!lost, "round %d: acknowledged writes there after the kill (%d keys not)", round,
              lost);
        at[2] = now_ms();
        mc_load_and_kill(&s, port, 50 + (int)(rand_r(&seed) % 250), &seed, &t);
        at[3] = now_ms();
        CHECK(server_check(&s) == 0, "round %d: --check after SIGKILL", round);
        at[4] = now_ms();
        if (at[4] - at[0] > 3000) /* a round takes well under a second */
            printf("mc-kill: round %d took %.1f s: start %.1f, check %.1f, load and kill "
                   "%.1f, --check %.1f\n",
                   round, (at[4] - at[0]) / 1e3, (at[1] - at[0]) / 1e3, (at[2] - at[1]) / 1e3,
                   (at[3] - at[2]) / 1e3, (at[4] - at[3]) / 1e3);
    }
    if (!mc_start(&s, &port)) {
        int lost = mc_verify(port, &t);
        CHECK(!lost, "final: acknowledged writes there (%d keys not)", lost);
        int st = server_stop(&s, SIGTERM);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "final SIGTERM: clean exit");
        CHECK(server_check(&s) == 0, "final --check");
    } else {
        CHECK(0, "final restart");
    }
    printf("mc-kill test: %d kills in %.1f s, %llu acknowledged writes, %llu key states "
           "checked; %llu writes in flight at the kills (%llu applied, %llu not)\n",
           rounds, (double)(now_ms() - t0) / 1000, (unsigned long long)t.acked,
           (unsigned long long)t.checked, (unsigned long long)t.pending,
           (unsigned long long)t.applied, (unsigned long long)(t.pending - t.applied));
    CHECK(t.acked >= (uint64_t)rounds, "writes were acknowledged (%llu)",
          (unsigned long long)t.acked);
    CHECK(!t.bad_replies, "%d replies not the ones the model expects", t.bad_replies);
    server_cleanup(&s);
    printf("kvstore mc-kill (%s): %d passed, %d failed\n", bin, passed, failed);
    return failed ? 1 : 0;
}
