/* file_errors.c - what a pool create, open, view and inspection say of a
 * file they cannot use: a missing directory, a file or directory the
 * caller may not write, a directory, a FIFO, a device, a symlink loop, a
 * filesystem too small for the pool. Each returns the TXN_E_* code txn.h
 * documents, with the file and the cause in txn_pool_strerror(); a FIFO
 * or a device is refused without blocking; and the file is left exactly as
 * it was (its stat and its bytes). Written only against txn.h; built for
 * every engine. */
#define _GNU_SOURCE
#include <check.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "txn.h"

#define LAYOUT "pmtx-file-errors"
#define POOL_SIZE ((size_t)16 << 20) /* pmdk's smallest */
#define TEXT_LEN 1024
#define NOBODY 65534 /* the uid and gid an unprivileged run takes */
#define CALL_SECONDS 10 /* a refused call returns in far less */

/* ---- what a file is, before and after */

struct snap {
    struct stat st;
    char link[TEST_PATH_LEN]; /* a symlink's target */
    unsigned char *data;      /* a regular file's bytes */
    size_t len;
};

static void snap_take(const char *path, struct snap *s)
{
    memset(s, 0, sizeof *s);
    ck_assert_msg(lstat(path, &s->st) == 0, "lstat %s: %s", path, strerror(errno));
    if (S_ISLNK(s->st.st_mode))
        ck_assert_int_gt(readlink(path, s->link, sizeof s->link - 1), 0);
    if (S_ISREG(s->st.st_mode))
        s->data = test_slurp(path, &s->len);
}

/* Fails unless `path` is what `before` recorded; frees it. */
static void snap_same(const char *path, struct snap *before)
{
    struct snap now;
    snap_take(path, &now);
    const struct stat *a = &before->st, *b = &now.st;
    ck_assert_msg(a->st_mode == b->st_mode && a->st_ino == b->st_ino &&
                      a->st_size == b->st_size && a->st_nlink == b->st_nlink &&
                      a->st_rdev == b->st_rdev && a->st_uid == b->st_uid,
                  "%s changed: mode %o -> %o, size %lld -> %lld", path, a->st_mode, b->st_mode,
                  (long long)a->st_size, (long long)b->st_size);
    if (!S_ISCHR(a->st_mode)) /* a device's times are its users' */
        ck_assert_msg(a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
                          a->st_mtim.tv_nsec == b->st_mtim.tv_nsec,
                      "%s modified", path);
    ck_assert_str_eq(before->link, now.link);
    ck_assert_msg(before->len == now.len && (!now.len || !memcmp(before->data, now.data, now.len)),
                  "%s: its bytes changed", path);
    free(before->data);
    free(now.data);
}

/* ---- the calls and what they say */

/* rc is `want` and txn_pool_strerror() says its code's text, then `why`. */
static void expect(const char *call, int rc, int want, const char *why)
{
    char text[TEXT_LEN];
    snprintf(text, sizeof text, "%s: %s", txn_strerror(want), why);
    ck_assert_msg(rc == want && !strcmp(txn_pool_strerror(rc), text),
                  "%s: %d \"%s\", expected %d \"%s\"", call, rc, txn_pool_strerror(rc), want,
                  text);
}

/* Open, view and inspection of `name` all refused with want and why, each
 * in time (a blocked one dies of the alarm: the test fails). */
static void refuse_all(const char *name, int want, const char *why)
{
    txn_pool *p = NULL;
    txn_pool_info info;
    alarm(CALL_SECONDS);
    expect("open", txn_pool_open(name, LAYOUT, &p), want, why);
    expect("view", txn_pool_view(name, LAYOUT, &p), want, why);
    expect("inspect", txn_pool_inspect(name, &info), want, why);
    alarm(0);
    ck_assert_str_eq(info.problem, why);
    ck_assert_ptr_null(p);
}

static int create(const char *name, size_t size)
{
    txn_pool *p = NULL;
    int rc = txn_pool_create(name, LAYOUT, &(txn_pool_opts){.size = size}, &p);
    if (!rc)
        txn_pool_close(p);
    return rc;
}

/* A closed pool of this test. */
static void make_pool(struct test_pool *t)
{
    CHECK_OK(test_pool_new(t, "ferr"));
    CHECK_OK(create(t->name, POOL_SIZE));
}

/* f with a and b in buf[TEXT_LEN]; the test fails if it does not fit. */
static char *fmt(char *buf, const char *f, const char *a, const char *b)
{
    ck_assert_int_lt(snprintf(buf, TEXT_LEN, f, a, b), TEXT_LEN);
    return buf;
}

/* ---- tests */

START_TEST(test_missing_directory)
{
    struct test_pool t;
    char why[TEXT_LEN], file[TEXT_LEN], sub[TEXT_LEN];
    CHECK_OK(test_pool_new(&t, "ferr")); /* t.path: a directory never made */
    ck_assert_int_eq(setenv("TXN_POOL_DIR", t.path, 1), 0);
    fmt(file, "%s/%s", t.path, "pool");
    fmt(why, "%s: its directory %s does not exist", file, t.path);
    expect("create", create("pool", POOL_SIZE), TXN_E_NOENT, why);
    refuse_all("pool", TXN_E_NOENT, why);
    /* deeper */
    fmt(sub, "%s/%s", t.path, "sub");
    fmt(file, "%s/%s", sub, "pool");
    fmt(why, "%s: its directory %s does not exist", file, sub);
    expect("create", create(file, POOL_SIZE), TXN_E_NOENT, why);
    ck_assert_int_ne(access(t.path, F_OK), 0);
    /* the directory is there, the file not */
    ck_assert_int_eq(unsetenv("TXN_POOL_DIR"), 0);
    CHECK_OK(test_pool_new(&t, "ferr"));
    refuse_all(t.name, TXN_E_NOENT, t.path);
    ck_assert_int_ne(access(t.path, F_OK), 0);
}
END_TEST

/* What a call of `what` on `path` returned and said, made as uid and gid
 * NOBODY when this runs as root (an unprivileged run is one already). */
static int as_nobody(int (*what)(const char *), const char *path, char *said)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        if (geteuid() == 0 && (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)))
            _exit(2);
        int rc = what(path);
        dprintf(fd[1], "%d\n%s", rc, txn_pool_strerror(rc));
        _exit(0);
    }
    close(fd[1]);
    char buf[TEXT_LEN];
    ssize_t n, got = 0;
    while (got + 1 < (ssize_t)sizeof buf &&
           (n = read(fd[0], buf + got, sizeof buf - 1 - (size_t)got)) > 0)
        got += n;
    buf[got] = '\0';
    close(fd[0]);
    int status, rc;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "could not drop privileges");
    char *nl = strchr(buf, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_int_eq(sscanf(buf, "%d", &rc), 1);
    snprintf(said, TEXT_LEN, "%s", nl + 1);
    return rc;
}

static int open_rw(const char *path)
{
    txn_pool *p = NULL;
    int rc = txn_pool_open(path, LAYOUT, &p);
    if (!rc)
        txn_pool_close(p);
    return rc;
}

static int create_small(const char *path)
{
    return create(path, POOL_SIZE);
}

START_TEST(test_permission_denied)
{
    struct test_pool t, d;
    struct snap s;
    char said[TEXT_LEN], want[TEXT_LEN], file[TEXT_LEN];
    make_pool(&t);
    ck_assert_int_eq(chmod(t.path, 0444), 0);
    snap_take(t.path, &s);
    int rc = as_nobody(open_rw, t.path, said);
    fmt(want, "I/O error on the pool file: %s: %s", t.path, "permission denied");
    ck_assert_msg(rc == TXN_E_IO && !strcmp(said, want), "open of a 0444 file: %d \"%s\"", rc,
                  said);
    snap_same(t.path, &s);
    ck_assert_int_eq(unlink(t.path), 0);
    /* a create in a directory it may not write */
    CHECK_OK(test_pool_new(&d, "ferr"));
    ck_assert_int_eq(mkdir(d.path, 0555), 0);
    snap_take(d.path, &s);
    fmt(file, "%s/%s", d.path, "pool");
    rc = as_nobody(create_small, file, said);
    fmt(want, "I/O error on the pool file: %s: %s", file, "permission denied");
    ck_assert_msg(rc == TXN_E_IO && !strcmp(said, want), "create in a 0555 directory: %d \"%s\"",
                  rc, said);
    snap_same(d.path, &s);
    ck_assert_int_eq(rmdir(d.path), 0);
}
END_TEST

static int make_dir(const char *path)
{
    return mkdir(path, 0700);
}

static int make_fifo(const char *path)
{
    return mkfifo(path, 0600);
}

static int make_loop(const char *path)
{
    return symlink(path, path);
}

/* A name of this test made by `make` into something other than a regular
 * file: open, view and inspection say it is `what`; a create says the name
 * exists (O_EXCL), or, for PMDK's create, which follows it first, `what`;
 * and it is left as it was. */
static void not_a_file(int (*make)(const char *), const char *what)
{
    struct test_pool t;
    struct snap s;
    char why[TEXT_LEN];
    CHECK_OK(test_pool_new(&t, "ferr"));
    ck_assert_int_eq(make(t.path), 0);
    snap_take(t.path, &s);
    refuse_all(t.name, TXN_E_IO, fmt(why, "%s: %s", t.path, what));
    int rc = create(t.name, POOL_SIZE);
    if (rc == TXN_E_EXIST)
        expect("create", rc, TXN_E_EXIST, t.path);
    else
        expect("create", rc, TXN_E_IO, why);
    snap_same(t.path, &s);
    ck_assert_int_eq(remove(t.path), 0);
}

START_TEST(test_directory)
{
    not_a_file(make_dir, "is a directory");
}
END_TEST

START_TEST(test_fifo)
{
    not_a_file(make_fifo, "not a regular file (a FIFO)");
}
END_TEST

START_TEST(test_symlink_loop)
{
    not_a_file(make_loop, "too many levels of symbolic links");
}
END_TEST

START_TEST(test_device)
{
    struct snap s;
    snap_take("/dev/null", &s);
    refuse_all("/dev/null", TXN_E_IO, "/dev/null: not a regular file (a character device)");
    snap_same("/dev/null", &s);
}
END_TEST

/* A pool larger than its whole filesystem: refused at once (fallocate
 * checks the size first), with both sizes, and no file left. */
START_TEST(test_no_space)
{
    struct test_pool t;
    struct statvfs vfs;
    char want[TEXT_LEN];
    CHECK_OK(test_pool_new(&t, "ferr"));
    ck_assert_int_eq(statvfs(test_pool_dir(), &vfs), 0);
    size_t size = (size_t)vfs.f_blocks * vfs.f_frsize + ((size_t)64 << 20);
    int rc = create(t.name, size);
    snprintf(want, sizeof want, "%s: %s: no space left on device (%zu bytes requested, ",
             txn_strerror(TXN_E_NOSPACE), t.path, size);
    const char *said = txn_pool_strerror(rc);
    ck_assert_msg(rc == TXN_E_NOSPACE && !strncmp(said, want, strlen(want)),
                  "create of %zu bytes: %d \"%s\"", size, rc, said);
    unsigned long long free_bytes;
    char dir[TEXT_LEN];
    ck_assert_int_eq(sscanf(said + strlen(want), "%llu free in %1000[^)])", &free_bytes, dir), 2);
    ck_assert_str_eq(dir, test_pool_dir());
    ck_assert_uint_lt(free_bytes, size);
    ck_assert_int_ne(access(t.path, F_OK), 0);
}
END_TEST

/* A name past PATH_MAX once under the pool directory: refused before any
 * file is touched, with its length. */
START_TEST(test_name_too_long)
{
    static char name[PATH_MAX];
    char why[TEXT_LEN];
    memset(name, 'p', sizeof name - 1);
    size_t len = strlen(test_pool_dir()) + 1 + strlen(name);
    snprintf(why, sizeof why, "pool path of %zu bytes (under $TXN_POOL_DIR): longer than %d", len,
             PATH_MAX - 1);
    txn_pool *p = NULL;
    txn_pool_info info;
    expect("create", create(name, POOL_SIZE), TXN_E_INVAL, why);
    expect("open", txn_pool_open(name, LAYOUT, &p), TXN_E_INVAL, why);
    expect("view", txn_pool_view(name, LAYOUT, &p), TXN_E_INVAL, why);
    /* (info.problem stays empty here: the front end returns before it
     * fills it) */
    expect("inspect", txn_pool_inspect(name, &info), TXN_E_INVAL, why);
}
END_TEST

static Suite *file_errors_suite(void)
{
    Suite *s = suite_create("file_errors");
    TCase *tc = test_tcase(s, "file_errors", 60);
    tcase_add_test(tc, test_missing_directory);
    tcase_add_test(tc, test_permission_denied);
    tcase_add_test(tc, test_directory);
    tcase_add_test(tc, test_fifo);
    tcase_add_test(tc, test_device);
    tcase_add_test(tc, test_symlink_loop);
    tcase_add_test(tc, test_no_space);
    tcase_add_test(tc, test_name_too_long);
    return s;
}

int main(void)
{
    printf("engine %s, pools in %s\n", txn_engine_name(), test_pool_dir());
    return test_run(file_errors_suite(), CK_FORK_GETENV, "ferr");
}
