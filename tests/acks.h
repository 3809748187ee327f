/* acks.h - the parent's side of the SIGKILL tests: a child writes one
 * 8-byte number per acknowledged transaction into a pipe, each one more
 * than the last (or, with `rises`, any larger one: a count of operations
 * acknowledged in groups), and the parent reads them until it kills the
 * child. */
#ifndef PMTX_TESTS_ACKS_H
#define PMTX_TESTS_ACKS_H

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t acks_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The acks of one round: the last value, and how many came. */
struct acks {
    unsigned char partial[8];
    size_t npartial;
    uint64_t last, count;
    int rises; /* set by the caller: acks may step by more than one */
};

/* Reads what the pipe holds; each ack must be one more than the last
 * (with `rises`: larger than the last).
 * Returns what read() returned (0: end of file). */
static inline ssize_t acks_drain(int fd, struct acks *a)
{
    unsigned char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    for (ssize_t i = 0; i < n; i++) {
        a->partial[a->npartial++] = buf[i];
        if (a->npartial < 8)
            continue;
        uint64_t v;
        memcpy(&v, a->partial, 8);
        ck_assert_msg(a->rises ? v > a->last : v == a->last + 1,
                      "acks out of order: %llu after %llu", (unsigned long long)v,
                      (unsigned long long)a->last);
        a->last = v;
        a->count++;
        a->npartial = 0;
    }
    return n;
}

/* Reads acks until `ns` have passed, so the child never blocks on a full
 * pipe, which would make the kill land at the same spot every round. */
static inline void acks_read_for(int fd, struct acks *a, uint64_t ns)
{
    uint64_t end = acks_now_ns() + ns;
    for (uint64_t t = acks_now_ns(); t < end; t = acks_now_ns()) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        struct timespec left = {.tv_sec = (time_t)((end - t) / 1000000000u),
                                .tv_nsec = (long)((end - t) % 1000000000u)};
        int r = ppoll(&pfd, 1, &left, NULL);
        ck_assert_msg(r >= 0 || errno == EINTR, "ppoll: %s", strerror(errno));
        if (r > 0 && acks_drain(fd, a) == 0)
            break; /* end of file: the child stopped by itself */
    }
}

/* Reads acks until the first one of the round comes (or `ns` pass, or
 * the pipe ends): a test whose kills all landed before any commit, which
 * a loaded machine's slow start can make happen, gives it one round that
 * kills only after a commit. */
static inline void acks_wait_first(int fd, struct acks *a, uint64_t ns)
{
    uint64_t end = acks_now_ns() + ns;
    while (!a->count && acks_now_ns() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, 100);
        ck_assert_msg(r >= 0 || errno == EINTR, "poll: %s", strerror(errno));
        if (r > 0 && acks_drain(fd, a) == 0)
            break;
    }
}

/* One round's end: read the acks of child `pid` from `fd` for `ns`, then
 * SIGKILL it, reap it, read what the pipe still holds and close it.
 * Returns the child's wait status. */
static inline int acks_kill_child(int fd, pid_t pid, struct acks *a, uint64_t ns)
{
    int status;
    acks_read_for(fd, a, ns);
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    while (acks_drain(fd, a) > 0)
        ;
    close(fd);
    return status;
}

#endif
