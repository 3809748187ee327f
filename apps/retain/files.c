/* files.c - the pool files of one invocation: their names, a copy made in
 * place, their removal at the end or on failure. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "retain.h"

static const char *const file_role[POOL_FILES] = {"orig", "work", "work2", "work3"};
static char g_files[POOL_FILES][512];

int pool_files_init(void)
{
    for (int f = 0; f < POOL_FILES; f++) {
        char name[128];
        snprintf(name, sizeof name, "retain-%s-%d-%s.pool", txn_engine_name(), (int)getpid(),
                 file_role[f]);
        TRY(txn_pool_path(name, g_files[f], sizeof g_files[f]));
    }
    return 0;
}

const char *pool_file(enum pool_file f)
{
    return g_files[f];
}

void pool_files_remove(void)
{
    for (int f = 0; f < POOL_FILES; f++)
        unlink(g_files[f]);
}

void fail_exit(void)
{
    pool_files_remove();
    exit(1);
}

void die(const char *what, int rc)
{
    fprintf(stderr, "retain: %s: %s %s\n", what, txn_pool_strerror(rc), txn_layout_error());
    fail_exit();
}

/* In place: the file keeps its pages (on /dev/shm, the same physical
 * memory), so programs that run one after the other on it run on the same
 * memory. */
int copy_file(const char *from, const char *to)
{
    int a = open(from, O_RDONLY), b = open(to, O_WRONLY | O_CREAT, 0600);
    static char buf[1 << 20];
    ssize_t n = 0;
    off_t at = 0;
    int rc = a >= 0 && b >= 0 ? 0 : -1;
    while (!rc && (n = read(a, buf, sizeof buf)) > 0) {
        rc = pwrite(b, buf, (size_t)n, at) == n ? 0 : -1;
        at += n;
    }
    if (!rc && (n < 0 || ftruncate(b, at)))
        rc = -1;
    if (a >= 0)
        close(a);
    if (b >= 0 && close(b))
        rc = -1;
    return rc;
}
