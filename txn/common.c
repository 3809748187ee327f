/* common.c - what every engine library shares, including those with a
 * pool format of their own: error strings, pool paths and their locked
 * open, deferred actions, parallel parts. */
#define _GNU_SOURCE /* renameat2 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common.h"
#include "persist.h"
#include "txn.h"

void defers_run(struct vec *defers, int outcome)
{
    struct vec run = *defers;
    if (!run.n)
        return;
    vec_init(defers, sizeof(struct tx_defer));
    for (size_t i = 0; i < run.n; i++) {
        struct tx_defer *d = vec_at(&run, i);
        if (d->when & outcome)
            d->fn(d->arg);
    }
    if (defers->cap == 0) { /* keep the memory for the next one */
        run.n = 0;
        *defers = run;
    } else {
        vec_free(&run);
    }
}

static PM_TLS char problem[256];

void pool_problem(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
}

const char *pool_problem_text(void)
{
    return problem;
}

static PM_TLS int refused_rc;
static PM_TLS char refused_text[sizeof problem + 64];

int pool_refused(int rc)
{
    refused_rc = rc; /* a success forgets the last refusal */
    if (rc < 0) {
        if (*problem)
            snprintf(refused_text, sizeof refused_text, "%s: %s", txn_strerror(rc), problem);
        else
            snprintf(refused_text, sizeof refused_text, "%s", txn_strerror(rc));
    }
    return rc;
}

const char *txn_pool_strerror(int err)
{
    return err && err == refused_rc ? refused_text : txn_strerror(err);
}

/* Whether the pages of mem[off, end), a hole of the file (zeros), that
 * the view wrote differ from zero. Only pages in memory are read: a read
 * fault on a hole of a tmpfs file gives it a page, and an inspection
 * would fill the holes a trim and a growing pool's chunk table leave. */
static int hole_differs(const char *mem, size_t off, size_t end)
{
    enum { PG = 4096, N = 256 };
    unsigned char in[N];
    for (size_t pg = off / PG * PG; pg < end; pg += (size_t)N * PG) {
        size_t len = end - pg < (size_t)N * PG ? end - pg : (size_t)N * PG;
        if (mincore((void *)(mem + pg), len, in))
            return TXN_E_IO;
        for (size_t i = 0; i * PG < len; i++) {
            size_t a = pg + i * PG, b = a + PG;
            for (a = a < off ? off : a, b = b > end ? end : b; in[i] & 1 && a < b; a++)
                if (mem[a])
                    return 1;
        }
    }
    return 0;
}

int pool_bytes_differ(int fd, const char *mem, size_t off, size_t end)
{
    enum { STEP = 1 << 20 };
    char *buf = malloc(STEP);
    if (!buf)
        return TXN_E_NOMEM;
    int rc = 0;
    while (!rc && off < end) {
        /* the file's holes apart (a filesystem without SEEK_DATA: none) */
        off_t d = lseek(fd, (off_t)off, SEEK_DATA);
        size_t data = d >= 0 ? (size_t)d : errno == ENXIO ? end : off;
        data = data < end ? data : end;
        if (data > off && (rc = hole_differs(mem, off, data)))
            break;
        off_t h = data < end ? lseek(fd, (off_t)data, SEEK_HOLE) : (off_t)end;
        size_t to = h >= 0 && (size_t)h < end ? (size_t)h : end;
        for (off = data; !rc && off < to; off += STEP) {
            size_t n = to - off < STEP ? to - off : STEP;
            if (pread(fd, buf, n, (off_t)off) != (ssize_t)n)
                rc = TXN_E_IO;
            else if (memcmp(buf, mem + off, n))
                rc = 1;
        }
        off = to;
    }
    free(buf);
    return rc;
}

/* The directory of `file` in dir[cap]: what its create needs to exist,
 * and the filesystem whose space it takes. */
static void dir_of(const char *file, char *dir, size_t cap)
{
    const char *slash = strrchr(file, '/');
    size_t n = !slash ? 0 : slash == file ? 1 : (size_t)(slash - file);
    snprintf(dir, cap, "%.*s", (int)n, n ? file : ".");
}

int pool_file_error(const char *file, int e, size_t want)
{
    char dir[PATH_MAX], why[128], buf[128];
    struct stat st;
    struct statvfs vfs;
    switch (e) {
    case ENOENT:
        dir_of(file, dir, sizeof dir);
        if (stat(dir, &st) && errno == ENOENT)
            return REFUSE(TXN_E_NOENT, "%s: its directory %s does not exist", file, dir);
        return REFUSE(TXN_E_NOENT, "%s", file);
    case ENOTDIR:
        return REFUSE(TXN_E_NOENT, "%s: a part of its directory is not a directory", file);
    case EEXIST:
        return REFUSE(TXN_E_EXIST, "%s", file);
    case ENOMEM:
        return TXN_E_NOMEM;
    case ENOSPC:
        dir_of(file, dir, sizeof dir);
        if (statvfs(dir, &vfs))
            return REFUSE(TXN_E_NOSPACE, "%s: no space left on device (%zu bytes requested)",
                          file, want);
        return REFUSE(TXN_E_NOSPACE,
                      "%s: no space left on device (%zu bytes requested, %llu free in %s)",
                      file, want, (unsigned long long)vfs.f_bavail * vfs.f_frsize, dir);
    default: /* GNU strerror_r: it may return a static string, not fill buf */
        snprintf(why, sizeof why, "%s", strerror_r(e, buf, sizeof buf));
        why[0] = (char)tolower((unsigned char)why[0]); /* it follows a name */
        return REFUSE(TXN_E_IO, "%s: %s", file, why);
    }
}

/* What a file that is not a regular one is, as a refusal says it. */
static const char *not_regular(mode_t m)
{
    return S_ISDIR(m)    ? "is a directory"
         : S_ISFIFO(m)   ? "not a regular file (a FIFO)"
         : S_ISCHR(m)    ? "not a regular file (a character device)"
         : S_ISBLK(m)    ? "not a regular file (a block device)"
         : S_ISSOCK(m)   ? "not a regular file (a socket)"
                         : "not a regular file";
}

int pool_lock_file(const char *file, int flags, int *fd)
{
    struct stat st;
    /* an existing file's type first, so that a device is never opened
     * (opening one can act on it); a create makes its own file */
    if (!(flags & O_EXCL) && !stat(file, &st) && !S_ISREG(st.st_mode))
        return REFUSE(TXN_E_IO, "%s: %s", file, not_regular(st.st_mode));
    /* non-blocking: should the name have become a FIFO since, its open
     * returns at once rather than wait for a writer */
    *fd = open(file, flags | O_CLOEXEC | O_NONBLOCK, 0644);
    if (*fd < 0)
        return pool_file_error(file, errno, 0);
    int rc = 0, fl;
    if (fstat(*fd, &st) || (fl = fcntl(*fd, F_GETFL)) < 0 ||
        fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK))
        rc = pool_file_error(file, errno, 0);
    else if (!S_ISREG(st.st_mode))
        rc = REFUSE(TXN_E_IO, "%s: %s", file, not_regular(st.st_mode));
    else if (flock(*fd, LOCK_EX | LOCK_NB))
        rc = errno == EWOULDBLOCK ? REFUSE(TXN_E_BUSY, "%s: locked by another open", file)
                                  : pool_file_error(file, errno, 0);
    if (rc)
        close(*fd);
    return rc;
}

int pool_birth_begin(const char *file, struct pool_birth *b)
{
    struct stat st, at;
    size_t n = strlen(file);
    *b = (struct pool_birth){malloc(n + 1), malloc(n + sizeof POOL_BIRTH_SUFFIX), -1};
    if (!b->file || !b->tmp) {
        pool_birth_end(b, 0);
        return TXN_E_NOMEM;
    }
    memcpy(b->file, file, n + 1);
    snprintf(b->tmp, n + sizeof POOL_BIRTH_SUFFIX, "%s%s", file, POOL_BIRTH_SUFFIX);
    int rc = 0;
    /* early, for the usual message: the rename is what refuses for sure */
    if (!lstat(file, &st))
        rc = pool_file_error(file, EEXIST, 0);
    /* The lock decides which of two creations proceeds; a temporary whose
     * name was taken over or removed between the open and the lock is not
     * the one under the name: open again. */
    for (int tries = 0; !rc && b->fd < 0; tries++) {
        int fd = open(b->tmp, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0644);
        if (fd < 0) {
            rc = errno == ELOOP ? REFUSE(TXN_E_IO, "%s: its temporary %s is a symbolic link",
                                         file, b->tmp)
                                : pool_file_error(file, errno, 0);
        } else if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
            rc = REFUSE(TXN_E_IO, "%s: its temporary %s is not a regular file", file, b->tmp);
        } else if (flock(fd, LOCK_EX | LOCK_NB)) {
            rc = errno == EWOULDBLOCK
                   ? REFUSE(TXN_E_BUSY, "%s: being created by another process", file)
                   : pool_file_error(file, errno, 0);
        } else if (st.st_nlink > 1) { /* a link whose removal was cut short */
            rc = REFUSE(TXN_E_EXIST, "%s: its temporary %s is another name of a file", file,
                        b->tmp);
        } else if (lstat(b->tmp, &at) || at.st_ino != st.st_ino || at.st_dev != st.st_dev) {
            if (tries == 8)
                rc = REFUSE(TXN_E_BUSY, "%s: its temporary %s keeps changing", file, b->tmp);
        } else if (ftruncate(fd, 0) || fcntl(fd, F_SETFL, 0)) {
            rc = pool_file_error(file, errno, 0);
        } else {
            b->fd = fd;
            break;
        }
        if (fd >= 0)
            close(fd);
    }
    if (rc)
        pool_birth_end(b, 0);
    return rc;
}

/* The directory entry made durable: nothing to do on a filesystem in
 * memory (fsync returns at once there), one write on a real one. */
static void sync_dir(const char *file)
{
    char dir[PATH_MAX];
    dir_of(file, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); /* some filesystems refuse it (EINVAL): nothing to sync */
        close(fd);
    }
}

int pool_birth_publish(struct pool_birth *b)
{
    if (fsync(b->fd))
        return pool_file_error(b->file, errno, 0);
    if (renameat2(AT_FDCWD, b->tmp, AT_FDCWD, b->file, RENAME_NOREPLACE)) {
        int e = errno;
        if (e == EINVAL || e == ENOSYS) { /* a filesystem without the flag: */
            e = link(b->tmp, b->file) ? errno : 0; /* link() never replaces either */
            if (!e) /* should this fail, the next creation refuses the second name */
                unlink(b->tmp);
        }
        if (e == EEXIST)
            return REFUSE(TXN_E_EXIST, "%s: made by another process during this creation",
                          b->file);
        if (e)
            return pool_file_error(b->file, e, 0);
    }
    sync_dir(b->file);
    return 0;
}

void pool_birth_end(struct pool_birth *b, int abandon)
{
    if (abandon && b->tmp)
        unlink(b->tmp);
    free(b->file);
    free(b->tmp);
    b->file = b->tmp = NULL;
}

int txn_pool_path(const char *path, char *out, size_t cap)
{
    if (!path || !*path || !out)
        return TXN_E_INVAL;
    const char *dir = getenv("TXN_POOL_DIR");
    int abs = path[0] == '/';
    int n = abs ? snprintf(out, cap, "%s", path)
                : snprintf(out, cap, "%s/%s", dir && *dir ? dir : "/dev/shm", path);
    if (n >= 0 && (size_t)n < cap)
        return 0;
    return REFUSE(TXN_E_INVAL, "pool path of %d bytes%s: longer than %zu", n,
                  abs ? "" : " (under $TXN_POOL_DIR)", cap ? cap - 1 : 0);
}

static const char *const err_text[] = {
    "invalid argument",
    "out of memory",
    "pool is full",
    "I/O error on the pool file",
    "pool file does not exist",
    "pool file already exists",
    "not a pmtx pool file",
    "unsupported pool format version",
    "pool is corrupt",
    "pool file is truncated",
    "pool was created with another layout",
    "pool was written by another engine",
    "pool is busy (open elsewhere or its address range is taken)",
    "a transaction is already running on this thread",
    "too many threads for the pool's log slots",
    "transaction too large for its log",
    "object is open for writing by another transaction",
    "transaction has failed and can only abort",
    "not supported by this engine",
    "pool holds another layout version (no migration to this one)",
    "a persistent type differs from the one the pool recorded",
    "a transaction prepared in the pool waits for a coordinator pool that cannot be opened",
};

const char *txn_strerror(int err)
{
    if (err == 0)
        return "success";
    if (err <= TXN_E_FIRST && err >= TXN_E_LAST)
        return err_text[TXN_E_FIRST - err];
    if (err < 0)
        err = -err;
    return strerror(err);
}

unsigned par_threads(size_t units, size_t per, unsigned max)
{
#ifdef PMTX_TRACE
    (void)units, (void)per, (void)max;
    return 1;
#else
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t t = per ? units / per : units;
    if (cpus > 0 && t > (size_t)cpus)
        t = (size_t)cpus;
    return t < 1 ? 1 : t > max ? max : (unsigned)t;
#endif
}

#define PAR_MAX 16
struct par_ctx {
    void (*fn)(void *);
    char *parts;
    size_t size, n;
    _Atomic size_t next;
};

static void *par_worker(void *arg)
{
    struct par_ctx *c = arg;
    for (size_t k; (k = atomic_fetch_add(&c->next, 1)) < c->n;)
        c->fn(c->parts + c->size * k);
    return NULL;
}

void par_run(void (*fn)(void *part), void *parts, size_t size, size_t n, unsigned threads)
{
    struct par_ctx c = {fn, parts, size, n, 0};
    pthread_t th[PAR_MAX];
    unsigned started = 0;
    while (started + 1 < threads && started + 1 < n && started < PAR_MAX &&
           !pthread_create(&th[started], NULL, par_worker, &c))
        started++;
    par_worker(&c);
    for (unsigned k = 0; k < started; k++)
        pthread_join(th[k], NULL);
}
