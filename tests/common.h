/* common.h - what the libcheck suites of tests/ and tests/incll/ share:
 * the return-code check, the names and files of their pools, whole-file
 * reads and writes, the number knobs they read from the environment, and
 * the runner of main().
 *
 * Pools are named pmtx-<tag>-<run pid>-<pid>-<seq>: the run pid is main's,
 * so that main() can remove what a test that failed half-way (in its own
 * forked process) left behind; <pid> and <seq> keep the pools of one test
 * process apart. A name is relative: txn_pool_path() resolves it under
 * $TXN_POOL_DIR (default /dev/shm), as every txn_pool_* call does.
 *
 * Header only, for one translation unit per program: the helpers are
 * static inline and keep their state in function-local statics. */
#ifndef PMTX_TESTS_COMMON_H
#define PMTX_TESTS_COMMON_H

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "txn.h"

#define TEST_NAME_LEN 128 /* a pool name of test_pool_name() fits */
#define TEST_PATH_LEN 512 /* its full path under a usual TXN_POOL_DIR */

/* What a failed CHECK_RC adds after the codes; a suite whose calls keep a
 * reason of their own (retention.c: txn_layout_error()) defines it before
 * including this file. */
#ifndef CHECK_DETAIL
#define CHECK_DETAIL() ""
#endif

/* Fails the test with the call, the code and its name unless rc == want. */
#define CHECK_RC(expr, want)                                                       \
    do {                                                                           \
        int rc_ = (expr);                                                          \
        const char *why_ = rc_ == (want) ? "" : CHECK_DETAIL();                    \
        ck_assert_msg(rc_ == (want), "%s returned %d (%s), expected %s (%d)%s%s", \
                      #expr, rc_, txn_pool_strerror(rc_), #want, (int)(want),      \
                      *why_ ? ": " : "", why_);                                    \
    } while (0)
#define CHECK_OK(expr) CHECK_RC(expr, 0)

/* An unsigned number from the environment (strtoull: 0x and 0 prefixes
 * too), or dflt when it is unset or empty: KILL_ROUNDS, KILL_SEED, ... */
static inline uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return (s && *s) ? strtoull(s, NULL, 0) : dflt;
}

/* xorshift64: a test's own repeatable numbers (seed nonzero). */
static inline uint64_t test_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The pid of the run's main(); fixed by its first call, which test_run()
 * makes before any test is forked. */
static inline pid_t test_run_pid(void)
{
    static pid_t pid;
    if (!pid)
        pid = getpid();
    return pid;
}

/* The directory relative pool names resolve under: txn_pool_path()'s, so
 * that it never disagrees with the library. */
static inline const char *test_pool_dir(void)
{
    static char dir[TEST_PATH_LEN];
    if (txn_pool_path("x", dir, sizeof dir))
        return "?";
    dir[strlen(dir) - 2] = '\0'; /* "<dir>/x" */
    return *dir ? dir : "/";
}

/* A fresh pool name of this run (see the top of this file) in name[cap].
 * Returns 0, or TXN_E_INVAL when it does not fit. */
static inline int test_pool_name(const char *tag, char *name, size_t cap)
{
    static unsigned seq;
    int n = snprintf(name, cap, "pmtx-%s-%ld-%ld-%u", tag, (long)test_run_pid(),
                     (long)getpid(), seq++);
    return n > 0 && (size_t)n < cap ? 0 : TXN_E_INVAL;
}

/* The file a pool name stands for (txn_pool_path), in path[cap]. */
static inline int test_pool_path(const char *name, char *path, size_t cap)
{
    return txn_pool_path(name, path, cap);
}

/* A pool of a test: its name for txn_pool_*, its file for everything else. */
struct test_pool {
    char name[TEST_NAME_LEN];
    char path[TEST_PATH_LEN];
};

/* A fresh name and its path. Returns 0 or TXN_E_INVAL. */
static inline int test_pool_new(struct test_pool *t, const char *tag)
{
    int rc = test_pool_name(tag, t->name, sizeof t->name);
    return rc ? rc : test_pool_path(t->name, t->path, sizeof t->path);
}

/* Remove the pool file `name`: unlink()'s result (0, or -1 and errno). */
static inline int test_pool_remove(const char *name)
{
    char path[TEST_PATH_LEN];
    if (test_pool_path(name, path, sizeof path))
        return -1;
    return unlink(path);
}

/* Remove the files (and empty directories) of this run named after `tag`:
 * what tests that failed before their own clean-up left. */
static inline void test_pool_sweep(const char *tag)
{
    char prefix[TEST_NAME_LEN];
    DIR *d = opendir(test_pool_dir());
    struct dirent *e;
    if (!d)
        return;
    snprintf(prefix, sizeof prefix, "pmtx-%s-%ld-", tag, (long)test_run_pid());
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char path[TEST_PATH_LEN];
        if (test_pool_path(e->d_name, path, sizeof path) == 0 && unlink(path) != 0)
            rmdir(path);
    }
    closedir(d);
}

/* The whole file `path` in a malloc'ed buffer, its length in *len; the
 * test fails when it cannot be read. */
static inline void *test_slurp(const char *path, size_t *len)
{
    struct stat st;
    size_t done = 0;
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    ck_assert_int_eq(fstat(fd, &st), 0);
    *len = (size_t)st.st_size;
    unsigned char *buf = malloc(*len ? *len : 1);
    ck_assert_ptr_nonnull(buf);
    while (done < *len) {
        ssize_t n = read(fd, buf + done, *len - done);
        ck_assert_msg(n > 0, "read %s: %s", path, strerror(errno));
        done += (size_t)n;
    }
    close(fd);
    return buf;
}

/* The file `path` made (or truncated) to hold exactly buf[len]. */
static inline void test_spew(const char *path, const void *buf, size_t len)
{
    size_t done = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    while (done < len) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);
        ck_assert_msg(n > 0, "write %s: %s", path, strerror(errno));
        done += (size_t)n;
    }
    close(fd);
}

/* A test case of `s` named `name`, given at least `seconds` (0: leave it to
 * libcheck): its own default, 4 s, is too short for a run by hand, and
 * ctest's CK_DEFAULT_TIMEOUT still wins when it is larger. */
static inline TCase *test_tcase(Suite *s, const char *name, double seconds)
{
    TCase *tc = tcase_create(name);
    const char *e = getenv("CK_DEFAULT_TIMEOUT");
    double env = e && *e ? strtod(e, NULL) : 0;
    if (seconds > 0)
        tcase_set_timeout(tc, seconds > env ? seconds : env);
    suite_add_tcase(s, tc);
    return tc;
}

/* Run the suite (fork: CK_FORK_GETENV, or CK_NOFORK for a suite whose
 * counters are per thread), then sweep the pools named after `tag` (NULL:
 * none). Returns main()'s exit status: EXIT_FAILURE if a test failed. */
static inline int test_run(Suite *s, enum fork_status fork, const char *tag)
{
    test_run_pid();
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, fork);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (tag)
        test_pool_sweep(tag);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
