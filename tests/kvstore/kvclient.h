/* kvclient.h - what kvclient.c (the RESP modes) shares with mcclient.c
 * (the memcached modes): connections, the server under test, the counts. */
#ifndef KVCLIENT_H
#define KVCLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <sys/types.h>

extern int passed, failed;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (cond)                                                            \
            passed++;                                                        \
        else {                                                               \
            failed++;                                                        \
            printf("FAIL %s:%d: ", __func__, __LINE__);                      \
            printf(__VA_ARGS__);                                             \
            printf("\n");                                                    \
        }                                                                    \
    } while (0)

uint64_t now_ms(void); /* CLOCK_MONOTONIC */

/* A connection and the bytes read from it that are not consumed yet. */
struct cli {
    int fd;
    char *buf;
    size_t len, cap;
};

int connect_unix(const char *path); /* a descriptor, or -1 */
int connect_tcp(int port);          /* 127.0.0.1:port, TCP_NODELAY */
void cli_init(struct cli *c, int fd);
void cli_close(struct cli *c);
int send_all(int fd, const void *p, size_t n); /* 0, or -1 */
/* Append what the socket holds to c's buffer without waiting: 0, or -1
 * at EOF or on an error (the pipelined loads of the kill tests). */
int cli_fill(struct cli *c);

/* A growing byte buffer. */
struct bytes {
    char *p;
    size_t n, cap;
};

void bytes_add(struct bytes *b, const void *p, size_t n);

/* The server under test: its binary, a directory of its own (socket,
 * log), a pool in /dev/shm, the RESP port it listens on and its pid. */
struct server {
    const char *bin;
    char dir[64], sock[128], pool[128], log[160];
    int port;
    pid_t pid;
};

int free_port(void); /* a free TCP port on 127.0.0.1, or -1 */
void server_names(struct server *s, const char *bin, const char *tag);
/* Run the server with extra arguments; 0 once it answers PING, else -1. */
int server_start(struct server *s, const char *const *extra);
int server_stop(struct server *s, int sig); /* the wait status */
int server_check(struct server *s);         /* --check's exit status */
/* One step of a kill test's load over its connections c[0..n) (fd -1:
 * closed; n at most LOAD_CONNS_MAX): SIGKILL the server once `end` (ms)
 * has come (*killed set), wait up to ms for input, then say per
 * connection in what[i]: 1 read it (input or a hang-up), -1 give up (still
 * open 5 s after the kill: a dead server's connections end at once; said
 * on stdout), 0 nothing. The connections still open; 0 when none is or poll failed. */
#define LOAD_CONNS_MAX 16
int load_ready(struct server *s, uint64_t end, int *killed, struct cli *const *c, int n, int ms,
               int *what);
void server_cleanup(struct server *s);      /* the log's tail if a check failed */
/* A kill test's rounds (environment variable var, else dflt) and *seed
 * (KV_SEED, else from the time and pid). */
int kill_rounds(const char *var, int dflt, unsigned *seed);
/* Append the words of KV_SERVER_ARGS to extra[*n..cap-1) and end it with
 * NULL (e.g. "--ack commit", a server a kill test must catch); returns
 * the buffer the words point into, for free() after the test. */
char *server_env_args(const char **extra, int *n, int cap);

/* Start redis-server (no persistence) on a free TCP port, logging to s's
 * log: 0 once it answers PING, else -1. */
int redis_start(struct server *s, pid_t *pid, int *port);
/* The server under test (server_names with tag, then extra arguments) and
 * redis-server beside it: 0 both answer, 77 no redis-server (skip), 1 a
 * start failed (counted, cleaned up). */
int redis_pair_start(struct server *s, const char *bin, const char *tag,
                     const char *const *extra, pid_t *rpid, int *rport);
/* Bytes as the comparisons print them; closed: >0 closed, <0 no answer */
void show_bytes(const char *what, const struct bytes *b, int closed);
/* pubsub_cmp.c's mode */
int run_pubsub(const char *bin);

/* mcclient.c's modes */
int run_mc_replay(int argc, char **argv);
int run_mc_kill(const char *bin);

#endif
