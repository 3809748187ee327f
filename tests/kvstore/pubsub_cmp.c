/* pubsub_cmp.c - kvclient pubsub SERVER: Pub/Sub as redis-server 7.0
 * answers it, byte for byte, over three connections at once (issue #44,
 * item 5). A script of steps, each a request on one connection; after
 * each, every open connection is sent a PING with the step's number and
 * read up to its reply, so that what a connection receives (replies,
 * messages another connection published) is compared step by step and no
 * wait on a clock decides what counts. The server runs two workers, so
 * publisher and subscriber are often served by different threads. The
 * script ends with CLIENT KILL by type (addresses and ids differ between
 * the two servers), of another connection and then of the caller, after
 * a write held back by CLIENT PAUSE WRITE until CLIENT UNPAUSE. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvclient.h"

#define NCONN 3

static const struct step {
    int who;
    const char *req; /* inline commands */
    int quiet;       /* connections not sent the marker after this step
                        (bit k: connection k), as it would wait behind a
                        request still queued (MULTI) or held (CLIENT PAUSE) */
} script[] = {
    {0, "SUBSCRIBE", 0},
    {0, "UNSUBSCRIBE", 0},
    {0, "PUNSUBSCRIBE", 0},
    {0, "SUBSCRIBE c1 c2 c1", 0},
    {0, "GET x", 0},
    {0, "PING hi", 0},
    {0, "PING a b", 0},
    {0, "FOO", 0},
    {0, "MULTI", 0},
    {0, "SET", 0},
    {0, "PSUBSCRIBE c* h?llo", 0},
    {0, "ECHO x", 0},
    {0, "UNSUBSCRIBE c2 zz", 0},
    {1, "PUBLISH c1 hello", 0},
    {1, "PUBLISH cx m", 0},
    {1, "PUBLISH hello m2", 0},
    {1, "PUBLISH nobody m3", 0},
    {1, "PUBSUB CHANNELS", 0},
    {1, "PUBSUB CHANNELS c?", 0},
    {1, "PUBSUB CHANNELS z*", 0},
    {1, "PUBSUB NUMSUB c1 c2 zz", 0},
    {1, "PUBSUB NUMSUB", 0},
    {1, "PUBSUB NUMPAT", 0},
    {1, "PUBSUB NUMPAT x", 0},
    {1, "PUBSUB FOO", 0},
    {1, "PUBSUB", 0},
    {1, "PUBSUB CHANNELS a b", 0},
    {1, "PUBSUB HELP", 0},
    {1, "PUBSUB help x", 0},
    {1, "PUBLISH a", 0},
    {2, "PSUBSCRIBE c*", 0},
    {1, "PUBLISH c1 both", 0},
    {1, "PUBSUB NUMPAT", 0},
    {2, "PUNSUBSCRIBE", 0},
    {1, "PUBSUB NUMPAT", 0},
    {0, "PUNSUBSCRIBE", 0},
    {0, "UNSUBSCRIBE", 0},
    /* sharded Pub/Sub: its own channels, counted apart, out of patterns'
     * reach; a subscription of any kind keeps the connection subscribed */
    {0, "SSUBSCRIBE s1 s2 s1", 0},
    {0, "SUBSCRIBE c5", 0},
    {0, "PSUBSCRIBE s*", 0},
    {1, "SPUBLISH s1 shard-hello", 0},
    {1, "PUBLISH s1 plain", 0},
    {1, "SPUBLISH nobody m", 0},
    {1, "PUBSUB SHARDCHANNELS s1", 0},
    {1, "PUBSUB SHARDCHANNELS z*", 0},
    {1, "PUBSUB SHARDNUMSUB s1 s2 zz", 0},
    {1, "PUBSUB CHANNELS s*", 0},
    {0, "GET x", 0},
    {0, "SUNSUBSCRIBE s2 zz", 0},
    {1, "SPUBLISH s2 gone", 0},
    {0, "SUNSUBSCRIBE", 0},
    {0, "SUNSUBSCRIBE", 0},
    {0, "UNSUBSCRIBE", 0},
    {0, "PUNSUBSCRIBE", 0},
    {0, "SSUBSCRIBE s3", 0},
    {0, "SUNSUBSCRIBE s3", 0},
    {1, "SPUBLISH", 0},
    {1, "MULTI", 1 << 1},
    {1, "SPUBLISH s1 in-exec", 1 << 1},
    {1, "EXEC", 0},
    {0, "GET ps:none", 0},
    {0, "MULTI", 1 << 0},
    {0, "SUBSCRIBE q", 1 << 0},
    {0, "EXEC", 0},
    {1, "PUBLISH q via-exec", 0},
    {0, "RESET", 0},
    {1, "PUBLISH q gone", 0},
    {2, "MULTI", 1 << 2},
    {2, "SET ps:a 1", 1 << 2},
    {2, "RESET", 0},
    {2, "EXEC", 0},
    {2, "GET ps:a", 0},
    {2, "SUBSCRIBE x y", 0},
    {1, "PUBLISH x to-2", 0},
    {2, "QUIT", 0},
    {1, "PUBSUB NUMSUB x y", 0},
    /* CLIENT PAUSE WRITE: a read passes, a write waits for UNPAUSE */
    {1, "CLIENT PAUSE 100000 WRITE", 0},
    {0, "GET ps:p", 0},
    {0, "SET ps:p held", 1 << 0},
    {1, "GET ps:p", 1 << 0},
    {1, "CLIENT UNPAUSE", 0},
    {1, "GET ps:p", 0},
    {0, "SUBSCRIBE big", 0},
    {1, "PUBLISH big ", 0}, /* + 5,000 bytes */
    /* subscribed to a shard channel only: still a pubsub client */
    {0, "UNSUBSCRIBE", 0},
    {0, "SSUBSCRIBE sbig", 0},
    {1, "CLIENT KILL TYPE master", 0},
    {1, "CLIENT KILL TYPE pubsub", 0},    /* connection 0, subscribed */
    {1, "PUBSUB NUMSUB big", 0},
    {1, "PUBSUB SHARDNUMSUB sbig", 0},
    {1, "CLIENT KILL TYPE normal", 0},    /* not itself: SKIPME yes */
    {1, "CLIENT KILL TYPE normal SKIPME no", 0}, /* itself, after the reply */
};
#define NSTEPS (sizeof script / sizeof script[0])

/* Read fd up to the reply to the marker PING (plain or, subscribed,
 * RESP2's array form), which is left out; 1 if the connection closed, 0
 * after the marker, -1 on neither within 3 s. */
static int read_to_marker(int fd, const char *mark, struct bytes *out)
{
    char plain[64], sub[96];
    int lp = snprintf(plain, sizeof plain, "$%zu\r\n%s\r\n", strlen(mark), mark);
    int ls = snprintf(sub, sizeof sub, "*2\r\n$4\r\npong\r\n$%zu\r\n%s\r\n", strlen(mark), mark);
    out->n = 0;
    for (uint64_t end = now_ms() + 3000;;) {
        if (out->n >= (size_t)lp && !memcmp(out->p + out->n - lp, plain, (size_t)lp)) {
            out->n -= (size_t)lp;
            return 0;
        }
        if (out->n >= (size_t)ls && !memcmp(out->p + out->n - ls, sub, (size_t)ls)) {
            out->n -= (size_t)ls;
            return 0;
        }
        uint64_t now = now_ms();
        struct pollfd pf = {fd, POLLIN, 0};
        if (now >= end || poll(&pf, 1, (int)(end - now)) <= 0)
            return -1;
        char b[8192];
        ssize_t k = recv(fd, b, sizeof b, 0);
        if (k <= 0)
            return 1;
        bytes_add(out, b, (size_t)k);
    }
}

/* The script through one server (RESP over fds[]); got[i][k] is what
 * connection k received at step i. */
static void play(int *fds, struct bytes got[][NCONN], int closed[][NCONN])
{
    int gone[NCONN] = {0};
    char big[5000];
    memset(big, 'z', sizeof big);
    for (size_t i = 0; i < NSTEPS; i++) {
        struct bytes req = {0};
        bytes_add(&req, script[i].req, strlen(script[i].req));
        if (!strcmp(script[i].req, "PUBLISH big "))
            bytes_add(&req, big, sizeof big);
        bytes_add(&req, "\r\n", 2);
        int w = script[i].who;
        if (!gone[w] && send_all(fds[w], req.p, req.n))
            gone[w] = 1;
        free(req.p);
        char mark[32];
        snprintf(mark, sizeof mark, "step-%zu", i);
        char ping[64];
        int n = snprintf(ping, sizeof ping, "PING %s\r\n", mark);
        /* the sender first: its request has run before the others' PINGs */
        for (int j = 0; j < NCONN; j++) {
            int k = j == 0 ? w : j <= w ? j - 1 : j;
            closed[i][k] = gone[k];
            if (gone[k] || (script[i].quiet >> k & 1))
                continue;
            if (k == w && !strcmp(script[i].req, "QUIT")) { /* read to the close */
                closed[i][k] = gone[k] = read_to_marker(fds[k], mark, &got[i][k]);
                continue;
            }
            /* a connection the server closed still has its last replies
             * to read when the marker cannot be sent */
            int r = send_all(fds[k], ping, (size_t)n) ? 1 : 0;
            int got_r = read_to_marker(fds[k], mark, &got[i][k]);
            r = r ? 1 : got_r;
            if (r)
                closed[i][k] = gone[k] = r > 0 ? 1 : -1;
        }
    }
}

int run_pubsub(const char *bin)
{
    struct server s;
    pid_t rpid;
    int rport;
    const char *extra[] = {"--pool-size", "16M", "--threads", "2", NULL};
    int rc = redis_pair_start(&s, bin, "pubsub", extra, &rpid, &rport);
    if (rc)
        return rc;
    static struct bytes ours[NSTEPS][NCONN], theirs[NSTEPS][NCONN];
    static int oc[NSTEPS][NCONN], tc[NSTEPS][NCONN];
    int a[NCONN], b[NCONN];
    for (int k = 0; k < NCONN; k++) {
        a[k] = connect_unix(s.sock);
        b[k] = connect_tcp(rport);
    }
    play(a, ours, oc);
    play(b, theirs, tc);
    for (size_t i = 0; i < NSTEPS; i++)
        for (int k = 0; k < NCONN; k++) {
            int same = oc[i][k] == tc[i][k] && ours[i][k].n == theirs[i][k].n &&
                       (!ours[i][k].n || !memcmp(ours[i][k].p, theirs[i][k].p, ours[i][k].n));
            CHECK(same, "step %zu (%d: %s), connection %d as redis-server", i, script[i].who,
                  script[i].req, k);
            if (!same) {
                show_bytes("kvstore", &ours[i][k], oc[i][k]);
                show_bytes("redis-server", &theirs[i][k], tc[i][k]);
            }
            free(ours[i][k].p);
            free(theirs[i][k].p);
        }
    for (int k = 0; k < NCONN; k++) {
        if (a[k] >= 0)
            close(a[k]);
        if (b[k] >= 0)
            close(b[k]);
    }
    kill(rpid, SIGTERM);
    waitpid(rpid, NULL, 0);
    int st = server_stop(&s, SIGTERM);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "clean exit (status %d)", st);
    server_cleanup(&s);
    printf("kvstore pubsub (%s): %d passed, %d failed\n", bin, passed, failed);
    return failed ? 1 : 0;
}
