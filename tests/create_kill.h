/* create_kill.h - SIGKILL a process while it creates a pool (or a
 * database of the SQLite VFS), at moments spread over its whole creation,
 * then start as a program does: open what is there, or create it when
 * there is nothing. Every such start must succeed and find a valid, empty
 * store, and no temporary file of a killed creation may be left beside it
 * once a start succeeded.
 *
 * The child writes a byte to a pipe just before it creates; the parent
 * waits for it, then sleeps a random 0 to 1.2 times the time an unkilled
 * creation takes (measured first), and kills. CREATE_KILLS rounds
 * (default 20), CREATE_KILL_SEED repeats them. The parent prints one line
 * of figures: kills, how many landed before the creation ended, failed
 * starts. Header only, for one test program each (create_kill.c, the
 * VFS's sqlite_create_kill.c). */
#ifndef PMTX_TESTS_CREATE_KILL_H
#define PMTX_TESTS_CREATE_KILL_H

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* The test case's time: a round (creation, kill, start) takes well under
 * 0.2 s, but for pmdk in a sanitizer's build. */
#define CREATE_KILL_SECONDS (30.0 + 0.5 * (double)env_u64("CREATE_KILLS", 20))

/* What is created and started. make runs in the child (0: made); start
 * in the parent: 0, or nonzero with the reason in why[cap]. */
struct ck_target {
    const char *what;
    int (*make)(const char *name);
    int (*start)(const char *name, char *why, size_t cap);
};

static inline double ck_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One child creating `name`, killed `delay` seconds after it began (a
 * negative delay: never). Returns 1 when the kill landed before the child
 * ended, 0 when it had ended, -1 when it ended with a failure. *took:
 * seconds from the fork to its end (from the fork: a parent that loses
 * its core after the child began must not measure a shorter creation). */
static inline int ck_round(const struct ck_target *t, const char *name, double delay,
                           double *took)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    double t0 = ck_now();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char go = 1;
        close(fds[0]);
        if (write(fds[1], &go, 1) != 1)
            _exit(3);
        _exit(t->make(name) ? 2 : 0);
    }
    close(fds[1]);
    char go;
    ck_assert_int_eq(read(fds[0], &go, 1), 1);
    close(fds[0]);
    if (delay >= 0) {
        struct timespec d = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    *took = ck_now() - t0;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        return 1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Files of the pool directory whose names start with `name` but are not
 * `name` itself: what a creation left beside it. The first in left[cap]. */
static inline int ck_leftovers(const char *name, char *left, size_t cap)
{
    DIR *d = opendir(test_pool_dir());
    struct dirent *e;
    int n = 0;
    size_t len = strlen(name);
    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, name, len) && e->d_name[len] && n++ == 0)
            snprintf(left, cap, "%s", e->d_name);
    closedir(d);
    return n;
}

static inline void ck_remove_all(const char *name)
{
    char left[256];
    test_pool_remove(name);
    while (ck_leftovers(name, left, sizeof left))
        ck_assert_int_eq(test_pool_remove(left), 0);
}

/* The rounds of the top of this file, on pools named after `tag`. */
static inline void create_kill_rounds(const struct ck_target *t, const char *tag)
{
    unsigned kills = (unsigned)env_u64("CREATE_KILLS", 20);
    uint64_t seed = env_u64("CREATE_KILL_SEED", (uint64_t)time(NULL) * 2654435761u) | 1;
    char name[TEST_NAME_LEN], why[512], first[700] = "", left[256];
    double took[3], span;
    ck_assert_int_eq(test_pool_name(tag, name, sizeof name), 0);
    for (int i = 0; i < 3; i++) { /* an unkilled creation's time: the median of 3 */
        ck_remove_all(name);
        ck_assert_msg(ck_round(t, name, -1, &took[i]) == 0, "%s: creation failed", t->what);
    }
    double lo = took[0] < took[1] ? took[0] : took[1], hi = took[0] + took[1] - lo;
    span = took[2] < lo ? lo : took[2] > hi ? hi : took[2];
    unsigned landed = 0, failed = 0;
    for (unsigned k = 0; k < kills; k++) {
        ck_remove_all(name);
        double delay = span * 1.2 * (double)(test_rand(&seed) % 10001) / 10000.0;
        double spent;
        int r = ck_round(t, name, delay, &spent);
        ck_assert_msg(r >= 0, "%s: the creating child failed", t->what);
        landed += r == 1;
        int bad = t->start(name, why, sizeof why);
        if (!bad && ck_leftovers(name, left, sizeof left)) {
            snprintf(why, sizeof why, "%s left beside the pool", left);
            bad = 1;
        }
        if (bad && failed++ == 0)
            snprintf(first, sizeof first, "kill %u at %.0f us: %s", k, delay * 1e6, why);
    }
    ck_remove_all(name);
    printf("create-kill %s: %u kills (%u during creation, creation %.0f us), %u later "
           "starts failed%s%s\n",
           t->what, kills, landed, span * 1e6, failed, *first ? "; first: " : "", first);
    fflush(stdout);
    ck_assert_msg(failed == 0, "%s: %u of %u starts after a kill failed; first: %s", t->what,
                  failed, kills, first);
}

#endif
