/* mcwarm.c - the client side of the warm-restart measurement
 * (scripts/warmrestart.sh): memcached's text protocol over TCP.
 *
 *   mcwarm load PORT N    set key:0 ... key:N-1 on one connection, 64
 *                         requests in flight, until N or the server goes;
 *                         prints how many were acknowledged (replies come
 *                         in order: every key below that count was)
 *   mcwarm check PORT N   connect (retrying for up to 30 s), time the
 *                         first served get, then get key:0 ... key:N-1;
 *                         prints "first_ms M hits H" (values checked)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 64
#define VALUE 100

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int dial(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* key i's value: its number, then filler that depends on it */
static void value_of(long i, char *v)
{
    int n = snprintf(v, VALUE + 1, "%ld:", i);
    for (int j = n; j < VALUE; j++)
        v[j] = (char)('a' + (i + j) % 26);
    v[VALUE] = 0;
}

/* A buffered reader of lines. */
struct rd {
    int fd;
    char b[1 << 16];
    size_t at, len;
};

/* Next line into out (without \r\n); -1 at the end of the stream. */
static int read_line(struct rd *r, char *out, size_t cap)
{
    size_t n = 0;
    for (;;) {
        if (r->at == r->len) {
            ssize_t k = read(r->fd, r->b, sizeof r->b);
            if (k <= 0)
                return -1;
            r->at = 0;
            r->len = (size_t)k;
        }
        char ch = r->b[r->at++];
        if (ch == '\n') {
            if (n && out[n - 1] == '\r')
                n--;
            out[n] = 0;
            return 0;
        }
        if (n + 1 < cap)
            out[n++] = ch;
    }
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int load(int port, long n)
{
    int fd = dial(port);
    if (fd < 0) {
        perror("mcwarm: connect");
        return 1;
    }
    struct rd r = {.fd = fd};
    char req[256], v[VALUE + 1], line[256];
    long sent = 0, acked = 0;
    while (acked < n) {
        while (sent < n && sent - acked < WINDOW) {
            value_of(sent, v);
            int len = snprintf(req, sizeof req, "set key:%ld 0 0 %d\r\n%s\r\n", sent, VALUE, v);
            if (send_all(fd, req, (size_t)len))
                goto gone;
            sent++;
        }
        if (read_line(&r, line, sizeof line))
            goto gone;
        if (strcmp(line, "STORED")) {
            fprintf(stderr, "mcwarm: set key:%ld: %s\n", acked, line);
            break;
        }
        acked++;
    }
gone:
    printf("%ld\n", acked);
    close(fd);
    return 0;
}

static int check(int port, long n)
{
    double t0 = now_ms(), first = -1;
    int fd = -1;
    while ((fd = dial(port)) < 0 && now_ms() - t0 < 30000)
        usleep(1000);
    if (fd < 0) {
        fprintf(stderr, "mcwarm: no server on port %d after 30 s\n", port);
        return 1;
    }
    struct rd r = {.fd = fd};
    char req[64], line[512], v[VALUE + 1];
    long hits = 0;
    for (long i = 0; i < n; i++) {
        int len = snprintf(req, sizeof req, "get key:%ld\r\n", i);
        if (send_all(fd, req, (size_t)len) || read_line(&r, line, sizeof line)) {
            fprintf(stderr, "mcwarm: connection lost at key:%ld\n", i);
            return 1;
        }
        if (first < 0)
            first = now_ms() - t0;
        if (!strncmp(line, "VALUE ", 6)) {
            if (read_line(&r, line, sizeof line))
                return 1;
            value_of(i, v);
            hits += !strcmp(line, v);
            if (read_line(&r, line, sizeof line)) /* END */
                return 1;
        }
    }
    printf("first_ms %.1f hits %ld\n", first, hits);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "load") && strcmp(argv[1], "check"))) {
        fprintf(stderr, "usage: mcwarm load|check PORT N\n");
        return 2;
    }
    int port = atoi(argv[2]);
    long n = atol(argv[3]);
    return !strcmp(argv[1], "load") ? load(port, n) : check(port, n);
}
