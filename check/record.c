/* record.c - the recorder of libtxn-<engine>-check: the persist layer's
 * trace hooks (trace.h) and the txn_* calls written into the trace file
 * txn-crashcheck names (tracefmt.h; design in docs/crashcheck.md).
 *
 * Without TXN_CHECK_TRACE in the environment it records nothing: the hooks
 * take and drop the lock and the program runs as with txn-<engine>.
 *
 * The library's sources are compiled with txn_begin, txn__begin,
 * txn_commit, txn_abort, txn_sync, txn_alloc and txn_pool_close renamed
 * (chk_real_*, CMake's -D): the exported calls are the wrappers below, which
 * record the call around the real one (txn__begin, what txn.h's inline
 * txn_begin calls, records as txn_begin; txn_pool_close: the leak check, in
 * CMD).
 * The pool is found through the library's own mmap, munmap, renameat2 and
 * link, wrapped by the linker (--wrap): nothing in txn/ knows the
 * recorder.
 *
 * CHK_INFER (pmdk, whose pool format is libpmemobj's): libpmemobj maps the
 * pool by libc's mmap and writes it with plain stores, flushing and
 * draining through libpmem's calls, which the engine's library defines on
 * the persist layer. So this library exports mmap and munmap (every
 * caller's: the pool is found whoever maps it), infers the stores from
 * the pool against what the records explain, at each flush (its lines)
 * and each fence (the whole pool), and records them as stores: in address
 * order, so only the fences are crash points (CHK_INFERRED). It exports
 * open and fstat too: libpmemobj reads a new pool's uuid from the kernel's
 * file, drawn from the seed here as getrandom is, and its creation time
 * from the file's, fixed here. No leak check: pmtx's allocator is not in
 * the library. */
#undef txn_begin
#undef txn__begin
#undef txn_commit
#undef txn_abort
#undef txn_sync
#undef txn_alloc
#undef txn_pool_close
#define TXN_NO_INLINE /* txn_begin is defined below, as a function */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef CHK_INFER
#include "alloc.h" /* alloc_foreach_live: the leak check (this library
                      * is built from the format's sources; no engine) */
#endif
#include "chk_sched.h"
#include "engine.h"
#include "handle.h"
#include "layout_int.h" /* layout_objects: txn_layout.h's own objects */
#include "trace.h"
#include "tracefmt.h"
#include "txn.h"
#include "txn_check.h"

int chk_real_txn_begin(txn_pool *p, txn **out);
int chk_real_txn_commit(txn *tx);
void chk_real_txn_abort(txn *tx);
int chk_real_txn_sync(txn_pool *p);
int chk_real_txn_alloc(txn *tx, size_t n, txn_obj **out);
void chk_real_txn_pool_close(txn_pool *p);

#ifdef CHK_INFER
/* the kernel's calls: a lookup past this library could allocate, and
 * malloc map memory, through these very functions */
static void *real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static int real_munmap(void *addr, size_t len)
{
    return (int)syscall(SYS_munmap, addr, len);
}
#define __real_mmap real_mmap
#define __real_munmap real_munmap
#define __wrap_mmap mmap
#define __wrap_munmap munmap
#else
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);
#endif
int __real_renameat2(int odir, const char *old, int ndir, const char *new, unsigned flags);
int __real_link(const char *old, const char *new);
ssize_t __real_getrandom(void *buf, size_t n, unsigned flags);

#define BUF_SIZE (1u << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The recorder's state: set by the constructor before any other thread
 * exists (on, pool, tmp, seeded), the rest under `lock`. */
static struct {
    int on;        /* constructor: TXN_CHECK_TRACE is set */
    int fd;        /* lock: the trace file */
    char *buf;     /* lock: records not yet written */
    size_t used;   /* lock */
    int failed;    /* lock: a write failed; the checker finds the file short */
    char pool[4096], tmp[4200]; /* constructor: the pool's path and its
                                   creation's temporary */
    char *base;    /* lock: the followed mapping, or NULL */
    size_t size;   /* lock */
    uint8_t *view; /* lock: what the traced stores explain */
    char *pending; /* lock: the temporary's mapping, followed once renamed */
    size_t pending_size;
    int seeded;     /* constructor: getrandom from `seed` */
    uint64_t seed;  /* lock */
    uint64_t txns;  /* lock: user transactions begun */
    uint64_t nrec;  /* lock: records written */
    uint64_t where; /* constructor: the record whose stack is wanted, or
                       UINT64_MAX */
    unsigned threads; /* lock: threads numbered */
} R = {.fd = -1, .where = UINT64_MAX};

static __thread unsigned my_thread; /* 1 + this thread's number, 0: none yet */
static __thread uint64_t my_txn;    /* the serial of this thread's transaction */
static __thread int in_txn;         /* this thread runs a transaction: a
                                       switch point here is inside one */

static unsigned thread_no(void)
{
    if (!my_thread)
        my_thread = ++R.threads; /* under lock: callers hold it */
    return my_thread - 1;
}

static void out_flush(void)
{
    for (size_t done = 0; done < R.used;) {
        ssize_t w = write(R.fd, R.buf + done, R.used - done);
        if (w <= 0) {
            R.failed = 1;
            break;
        }
        done += (size_t)w;
    }
    R.used = 0;
}

static void out(const void *p, size_t n)
{
    if (n > BUF_SIZE - R.used)
        out_flush();
    if (n > BUF_SIZE) { /* a whole pool's contents: written through */
        for (size_t done = 0; done < n;) {
            ssize_t w = write(R.fd, (const char *)p + done, n - done);
            if (w <= 0) {
                R.failed = 1;
                return;
            }
            done += (size_t)w;
        }
        return;
    }
    memcpy(R.buf + R.used, p, n);
    R.used += n;
}

static void rec(uint32_t type, uint64_t off, uint64_t arg, const void *payload, uint32_t len);

/* The stack of the record just written, for txn-crashcheck's report of
 * where a crash came: the frames outside this library and libc, as object
 * and offset (the checker turns them into source lines). Under lock. */
static void where(uint64_t n)
{
    void *f[32];
    char text[2048];
    size_t used = 0;
    Dl_info self, d;
    int k = backtrace(f, 32);
    if (!dladdr((void *)where, &self))
        return;
    for (int i = 0; i < k && used < sizeof text - 300; i++) {
        if (!dladdr(f[i], &d) || !d.dli_fname || d.dli_fbase == self.dli_fbase ||
            strstr(d.dli_fname, "/libc.so") || strstr(d.dli_fname, "san.so"))
            continue; /* not the program's: this library, libc, a sanitizer's runtime */
        /* a return address: the call is the byte before it */
        uintptr_t off = (uintptr_t)f[i] - (uintptr_t)d.dli_fbase - 1;
        used += (size_t)snprintf(text + used, sizeof text - used, "%s\t%#lx\n", d.dli_fname,
                                 (unsigned long)off);
    }
    rec(CHK_WHERE, n, 0, text, (uint32_t)used);
}

/* Under lock. */
static void rec(uint32_t type, uint64_t off, uint64_t arg, const void *payload, uint32_t len)
{
    if (!R.on || R.fd < 0)
        return;
    struct chk_rec r = {type, len, off, arg};
    static const uint64_t zero;
    out(&r, sizeof r);
    if (len) {
        out(payload, len);
        out(&zero, chk_pad(len) - len);
    }
    if (R.nrec++ == R.where)
        where(R.where);
}

static int in_pool(const void *a, size_t n)
{
    uintptr_t x = (uintptr_t)a, b = (uintptr_t)R.base;
    return R.base && x >= b && x < b + R.size && n <= b + R.size - x;
}

static void audit_range(size_t from, size_t to, uint64_t serial);
static void audit(uint64_t serial);

/* ---- the persist layer's hooks (persist.h, PMTX_TRACE) */
void trace_lock(void)
{
    pthread_mutex_lock(&lock);
}

void trace_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

void trace_store_unlock(const void *dst, size_t n)
{
    if (n && in_pool(dst, n)) {
        size_t off = (size_t)((const char *)dst - R.base);
        memcpy(R.view + off, dst, n);
        rec(CHK_STORE, off, thread_no(), dst, (uint32_t)n);
    }
    pthread_mutex_unlock(&lock);
}

void trace_flush(const void *addr, size_t n)
{
    pthread_mutex_lock(&lock);
    if (n && in_pool(addr, n)) {
        size_t off = (size_t)((const char *)addr - R.base);
#ifdef CHK_INFER /* the flushed lines' stores, before their flush */
        audit_range(off & ~(size_t)63, (off + n + 63) & ~(size_t)63, R.txns);
#endif
        rec(CHK_FLUSH, off, n, NULL, 0);
    }
    pthread_mutex_unlock(&lock);
}

/* A hole punched in the pool (txn_pool_trim), under the lock: what the
 * stores explain reads zero there too. The chunks are free: their bytes matter to no
 * recovery, so no event is recorded (an image keeps their old bytes). */
void trace_discard_locked(const void *addr, size_t n)
{
    if (n && in_pool(addr, n))
        memset(R.view + ((const char *)addr - R.base), 0, n);
}

void trace_fence(void)
{
    pthread_mutex_lock(&lock);
#ifdef CHK_INFER /* every store before the fence: the image there is exact */
    audit(R.txns);
#endif
    if (R.base)
        rec(CHK_FENCE, 0, thread_no(), NULL, 0);
    pthread_mutex_unlock(&lock);
}

#define AUDIT_BLOCK 4096 /* bytes the audit compares at once */

/* ---- untraced stores: the pool against what the traced stores explain,
 * word by word where a line differs; the pool's bytes are taken from then
 * on (the checker's model does the same with the record). Under lock. */
static void audit_range(size_t from, size_t to, uint64_t serial)
{
    if (!R.base)
        return;
    if (to > R.size)
        to = R.size;
    /* Almost all of the pool is the same at every audit: one comparison a
     * block, the lines only of a block that differs (a call a line made
     * the audit most of a traced run's time). */
    for (size_t blk = from; blk < to; blk += AUDIT_BLOCK) {
        size_t end = to - blk < AUDIT_BLOCK ? to : blk + AUDIT_BLOCK;
        if (!memcmp(R.view + blk, R.base + blk, end - blk))
            continue;
        for (size_t pos = blk; pos < end; pos += 64) {
            size_t len = end - pos < 64 ? end - pos : 64;
            if (!memcmp(R.view + pos, R.base + pos, len))
                continue;
            for (size_t w = pos; w < pos + len; w += 8) {
                size_t wl = pos + len - w < 8 ? pos + len - w : 8;
                if (!memcmp(R.view + w, R.base + w, wl))
                    continue;
#ifdef CHK_INFER /* the engine's stores are all plain: stores */
                rec(CHK_STORE, w, thread_no(), R.base + w, (uint32_t)wl);
                (void)serial;
#else
                rec(CHK_UNTRACED, w, serial, R.base + w, (uint32_t)wl);
#endif
            }
            memcpy(R.view + pos, R.base + pos, len);
        }
    }
}

static void audit(uint64_t serial)
{
    audit_range(0, R.size, serial);
}

/* Follow [base, base+size) from here: its contents are durable now. */
static void attach(char *base, size_t size)
{
    uint8_t *v = malloc(size);
    if (!v) {
        R.failed = 1;
        return;
    }
    memcpy(v, base, size);
    R.base = base;
    R.size = size;
    R.view = v;
    rec(CHK_MAP, 0, size, NULL, 0);
    out(base, size); /* the payload, written through (rec's len is 32 bits) */
}

static void detach(void)
{
    audit(R.txns);
    rec(CHK_UNMAP, 0, 0, NULL, 0);
    out_flush();
    free(R.view);
    R.view = NULL;
    R.base = NULL;
}

static int same_file(int fd, const char *path)
{
    struct stat a, b;
    return path[0] && !fstat(fd, &a) && !stat(path, &b) && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Whether a mapping of len bytes from fd's start may be the pool's: under
 * CHK_INFER one of the whole file, not libpmemobj's map of its header. */
static int whole_file(int fd, size_t len)
{
#ifdef CHK_INFER
    struct stat st;
    return !fstat(fd, &st) && (uint64_t)st.st_size <= len;
#else
    (void)fd;
    (void)len;
    return 1;
#endif
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    void *a = __real_mmap(addr, len, prot, flags, fd, off);
    if (!R.on || a == MAP_FAILED || fd < 0 || !(flags & MAP_SHARED))
        return a;
    pthread_mutex_lock(&lock);
    if (off && R.base && same_file(fd, R.pool)) {
        /* more of the pool mapped: a growth, followed when it extends the
         * pool's mapping at its end (pool_grow's way); another is not */
        if ((char *)a == R.base + R.size && (size_t)off == R.size) {
            uint8_t *v = realloc(R.view, R.size + len);
            if (v) {
                memcpy(v + R.size, a, len);
                R.view = v;
                rec(CHK_GROW, R.size, len, NULL, 0);
                out(a, len); /* the payload, written through, as attach's */
                R.size += len;
            } else {
                R.failed = 1;
            }
        } else {
            static int told;
            if (!told++)
                fputs("txn-crashcheck: a mapping of the pool's file not at its end: "
                      "its stores are not followed\n", stderr);
        }
    } else if (!off && !R.base && whole_file(fd, len) && same_file(fd, R.pool)) {
        attach(a, len);
    } else if (!off && !R.base && len > R.pending_size && same_file(fd, R.tmp)) {
        /* the whole file, not a mapping of its header beside it (libpmemobj
         * makes one while it creates the pool) */
        R.pending = a;
        R.pending_size = len;
    }
    pthread_mutex_unlock(&lock);
    return a;
}

int __wrap_munmap(void *addr, size_t len)
{
    if (R.on) {
        pthread_mutex_lock(&lock);
        if (R.base && (char *)addr == R.base)
            detach();
        if (R.pending && (char *)addr == R.pending) {
            R.pending = NULL;
            R.pending_size = 0;
        }
        pthread_mutex_unlock(&lock);
    }
    return __real_munmap(addr, len);
}

/* A creation's temporary under the pool's name: the pool is born. */
static void published(const char *new)
{
    if (!R.on)
        return;
    pthread_mutex_lock(&lock);
    if (R.pending && !R.base && !strcmp(new, R.pool))
        attach(R.pending, R.pending_size);
    R.pending = NULL;
    R.pending_size = 0;
    pthread_mutex_unlock(&lock);
}

int __wrap_renameat2(int odir, const char *old, int ndir, const char *new, unsigned flags)
{
    int rc = __real_renameat2(odir, old, ndir, new, flags);
    if (!rc)
        published(new);
    return rc;
}

int __wrap_link(const char *old, const char *new)
{
    int rc = __real_link(old, new);
    if (!rc)
        published(new);
    return rc;
}

/* Under the checker a run from the same seed maps its pool at the same
 * address with the same uuid: the same bytes stored, the same images. */
ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags)
{
    if (!R.seeded)
        return __real_getrandom(buf, n, flags);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = trace_mix(&R.seed);
        memcpy((char *)buf + i, &w, n - i < 8 ? n - i : 8);
    }
    pthread_mutex_unlock(&lock);
    return (ssize_t)n;
}

uint64_t trace_mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#ifdef CHK_INFER
#define UUID_FILE "/proc/sys/kernel/random/uuid"
#define CHK_CRTIME 1796515200 /* 2026-12-06 00:00 UTC: a pool's crtime */

/* Every open of the process (this library exports it). Under the checker,
 * the kernel's uuid file, libpmemobj's source of a new pool's uuid, reads
 * a uuid drawn from the seed: a memory file of its text. */
int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    if (R.seeded && !strcmp(path, UUID_FILE)) {
        unsigned char u[16];
        char text[40];
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < 16; i += 8) {
            uint64_t w = trace_mix(&R.seed);
            memcpy(u + i, &w, 8);
        }
        pthread_mutex_unlock(&lock);
        u[6] = (unsigned char)((u[6] & 0x0f) | 0x40); /* version 4, as the kernel's */
        u[8] = (unsigned char)((u[8] & 0x3f) | 0x80);
        int n = snprintf(text, sizeof text,
                         "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n",
                         u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                         u[12], u[13], u[14], u[15]);
        int fd = (int)syscall(SYS_memfd_create, "uuid", (unsigned)MFD_CLOEXEC);
        if (fd >= 0 && (write(fd, text, (size_t)n) != n || lseek(fd, 0, SEEK_SET))) {
            close(fd);
            fd = -1;
        }
        if (fd >= 0)
            return fd;
    }
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}
#endif

#ifdef CHK_INFER
/* Every fstat of the process (exported). Under the checker, the pool's
 * file (or its creation's temporary) has a fixed change time: libpmemobj
 * takes a new pool's creation time (its header's crtime) from it. */
int fstat(int fd, struct stat *st)
{
    int rc = (int)syscall(SYS_fstat, fd, st);
    if (rc || !R.seeded || !S_ISREG(st->st_mode))
        return rc;
    const char *names[2] = {R.pool, R.tmp};
    for (int i = 0; i < 2; i++) {
        struct stat b;
        if (names[i][0] && !syscall(SYS_newfstatat, AT_FDCWD, names[i], &b, 0) &&
            b.st_dev == st->st_dev && b.st_ino == st->st_ino) {
            st->st_ctim.tv_sec = CHK_CRTIME;
            st->st_ctim.tv_nsec = 0;
        }
    }
    return 0;
}
#endif

/* ---- the calls of txn.h that the checker's oracle needs */
int txn_begin(txn_pool *p, txn **out)
{
    if (!R.on)
        return chk_real_txn_begin(p, out);
    chk_sched_point(in_txn);
    pthread_mutex_lock(&lock);
    audit(R.txns); /* what was stored since the last transaction ended */
    uint64_t serial = ++R.txns;
    pthread_mutex_unlock(&lock);
    int rc = chk_real_txn_begin(p, out);
    pthread_mutex_lock(&lock);
    if (!rc) {
        my_txn = serial;
        in_txn = 1;
        rec(CHK_BEGIN, serial, thread_no(), NULL, 0);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int txn__begin(txn_pool *p, txn **out)
{
    return txn_begin(p, out);
}

int txn_commit(txn *tx)
{
    if (!R.on)
        return chk_real_txn_commit(tx);
    uint64_t serial = my_txn;
    chk_sched_point(in_txn);
    pthread_mutex_lock(&lock);
    audit(serial);
    rec(CHK_COMMIT, serial, thread_no(), NULL, 0);
    pthread_mutex_unlock(&lock);
    int rc = chk_real_txn_commit(tx);
    pthread_mutex_lock(&lock);
    rec(CHK_COMMITTED, serial, thread_no(), NULL, rc != 0);
    audit(serial);
    pthread_mutex_unlock(&lock);
    in_txn = 0; /* a failed commit ends the transaction too */
    chk_sched_point(0);
    return rc;
}

void txn_abort(txn *tx)
{
    if (!R.on) {
        chk_real_txn_abort(tx);
        return;
    }
    uint64_t serial = my_txn;
    pthread_mutex_lock(&lock);
    audit(serial);
    pthread_mutex_unlock(&lock);
    chk_real_txn_abort(tx);
    in_txn = 0;
    pthread_mutex_lock(&lock);
    rec(CHK_ABORT, serial, thread_no(), NULL, 0);
    pthread_mutex_unlock(&lock);
}

/* The object's offset: txn-crashcheck names the line of the allocation
 * of an object its leak check finds (CHK_ALLOC). */
int txn_alloc(txn *tx, size_t n, txn_obj **out)
{
    int rc = chk_real_txn_alloc(tx, n, out);
    if (!R.on || rc)
        return rc;
    pthread_mutex_lock(&lock);
    if (in_pool(*out, 1))
        rec(CHK_ALLOC, (uint64_t)((char *)*out - R.base), thread_no(), NULL, 0);
    pthread_mutex_unlock(&lock);
    return rc;
}

int txn_sync(txn_pool *p)
{
    if (!R.on)
        return chk_real_txn_sync(p);
    pthread_mutex_lock(&lock);
    rec(CHK_SYNC, 0, thread_no(), NULL, 0);
    pthread_mutex_unlock(&lock);
    int rc = chk_real_txn_sync(p);
    pthread_mutex_lock(&lock);
    if (!rc)
        rec(CHK_SYNCED, 0, thread_no(), NULL, 0);
    pthread_mutex_unlock(&lock);
    return rc;
}

void chk_record_switch(int from, int to)
{
    pthread_mutex_lock(&lock);
    rec(CHK_SWITCH, (uint64_t)from, (uint64_t)to, NULL, 0);
    pthread_mutex_unlock(&lock);
}

void chk_record_unlock(void)
{
    if (!in_txn)
        return;
    pthread_mutex_lock(&lock);
    rec(CHK_UNLOCK, my_txn, thread_no(), NULL, 0);
    pthread_mutex_unlock(&lock);
}

int chk_in_txn(void)
{
    return in_txn;
}

void txn_check_ack(uint64_t n)
{
    pthread_mutex_lock(&lock);
    rec(CHK_ACK, 0, n, NULL, 0);
    pthread_mutex_unlock(&lock);
}

#ifndef CHK_INFER
/* ---- the leak check (txn_check.h): the blocks of the objects the program
 * says it reaches (txn_check_reach), compared at the pool's close with the
 * allocator's live blocks: a live block not reached is a leak, a reached
 * one not live is free and reachable. One pool a process: the first one
 * reached into. */
static struct {
    pthread_mutex_t lock;
    txn_pool *p;   /* lock: the pool reached into, or NULL */
    uint64_t *b;   /* lock: the blocks reached, as pool offsets */
    size_t n, cap; /* lock */
    int failed;    /* lock: out of memory: no verdict */
} RCH = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void reach_block(txn_pool *p, const void *blk)
{
    if (RCH.n == RCH.cap) {
        size_t cap = RCH.cap ? 2 * RCH.cap : 256;
        uint64_t *b = realloc(RCH.b, cap * sizeof *b);
        if (!b) {
            RCH.failed = 1;
            return;
        }
        RCH.b = b;
        RCH.cap = cap;
    }
    RCH.b[RCH.n++] = (uint64_t)((uintptr_t)blk - (uintptr_t)p->base);
}

/* An object's blocks (eng_obj_blocks) are read only when the object is in
 * the pool; any other address is kept as it is, found free at the close.
 * o NULL: the check is on, nothing named (a pool that holds only its root). */
void txn_check_reach_obj(txn_pool *p, const txn_obj *o)
{
    if (!p)
        return;
    pthread_mutex_lock(&RCH.lock);
    if (!RCH.p)
        RCH.p = p;
    if (RCH.p == p && o) {
        void *blk[2];
        uintptr_t x = (uintptr_t)o, b = (uintptr_t)p->base;
        if (x >= b && x < b + p->size) {
            int k = eng_obj_blocks(p, o, blk);
            for (int i = 0; i < k; i++)
                reach_block(p, blk[i]);
        } else {
            reach_block(p, o);
        }
    }
    pthread_mutex_unlock(&RCH.lock);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

struct leak_walk {
    FILE *f;
    txn_pool *p;
    uint64_t leaks;
};

static void on_live(void *blk, size_t size, void *arg)
{
    struct leak_walk *w = arg;
    uint64_t off = (uint64_t)((char *)blk - w->p->base);
    if (!bsearch(&off, RCH.b, RCH.n, sizeof *RCH.b, cmp_u64)) {
        w->leaks++;
        fprintf(w->f, "leak %#llx %zu\n", (unsigned long long)off, size);
    }
}

/* An object of the layout record (txn_layout.h): the library's, reached
 * from the meta object. Under RCH.lock. */
static int reach_layout(txn_obj *o, void *arg)
{
    void *blk[2];
    txn_pool *p = arg;
    for (int k = eng_obj_blocks(p, o, blk); k-- > 0;)
        reach_block(p, blk[k]);
    return 0;
}

/* The verdict, at the close of the pool reached into, before the real
 * close (no transaction runs); to the file CHK_ENV_REACH names (the
 * checker's), else to stderr when something is wrong. Under RCH.lock. The
 * root, the meta object and the layout record's objects are reached
 * without being named. */
static void reach_verdict(txn_pool *p)
{
    const char *path = getenv(CHK_ENV_REACH);
    FILE *f = path ? fopen(path, "w") : stderr;
    if (!f || RCH.failed) {
        if (f && f != stderr)
            fclose(f);
        return;
    }
    void *blk[2];
    txn_obj *own[2] = {txn_root(p), txn_meta_root(p)};
    size_t named = RCH.n;
    for (int i = 0; i < 2; i++)
        for (int k = eng_obj_blocks(p, own[i], blk); k-- > 0;)
            if (alloc_block_size(p, blk[k], 1))
                reach_block(p, blk[k]);
    if (layout_objects(p, reach_layout, p))
        fprintf(f, "layout: the layout record could not be read\n");
    qsort(RCH.b, RCH.n, sizeof *RCH.b, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < RCH.n; i++)
        if (!u || RCH.b[i] != RCH.b[u - 1])
            RCH.b[u++] = RCH.b[i];
    RCH.n = u;
    if (f != stderr)
        fprintf(f, "reached %zu\n", named);
    struct leak_walk w = {f, p, 0};
    alloc_foreach_live(p, on_live, &w);
    for (size_t i = 0; i < RCH.n; i++)
        if (RCH.b[i] >= p->size || !alloc_block_size(p, p->base + RCH.b[i], 1))
            fprintf(f, "free %#llx\n", (unsigned long long)RCH.b[i]);
    if (f != stderr)
        fclose(f);
}

void txn_pool_close(txn_pool *p)
{
    pthread_mutex_lock(&RCH.lock);
    if (p && RCH.p == p) {
        reach_verdict(p);
        RCH.p = NULL;
        RCH.n = 0;
        RCH.failed = 0;
    }
    pthread_mutex_unlock(&RCH.lock);
    chk_real_txn_pool_close(p);
}

#else
/* No leak check: the pool's allocator is libpmemobj's (the checker says
 * on how many images it was made: none). */
void txn_check_reach_obj(txn_pool *p, const txn_obj *o)
{
    (void)p;
    (void)o;
}

void txn_pool_close(txn_pool *p)
{
    chk_real_txn_pool_close(p);
}
#endif

/* A child the program forks records nothing: the trace is the parent's
 * (the child's copy of the buffer is dropped, the file left alone). The
 * fork is made holding the lock, so that the child's copy of it is free. */
static void before_fork(void)
{
    pthread_mutex_lock(&lock);
}

static void after_fork(void)
{
    pthread_mutex_unlock(&lock);
}

static void in_child(void)
{
    R.on = 0;
    R.fd = -1;
    R.used = 0;
    R.base = NULL;
    pthread_mutex_unlock(&lock);
}

static void at_exit(void)
{
    pthread_mutex_lock(&lock);
    if (R.fd >= 0)
        out_flush();
    pthread_mutex_unlock(&lock);
}

/* Recovery of the pool under TXN_CHECK_RECOVER: open (recover), close,
 * exit before the program's main. Exit status: 0, or 10 + the open's
 * error (as -TXN_E_* - 30800) with its message on stderr. */
static void recover_and_exit(void)
{
    txn_pool_info info;
    txn_pool *p;
    int v = txn_pool_inspect(R.pool, &info);
    if (v < 0) {
        fprintf(stderr, "txn-crashcheck: recovery: %s\n", txn_pool_strerror(v));
        _exit(10);
    }
    int rc = txn_pool_open(R.pool, info.layout, &p);
    if (rc) {
        fprintf(stderr, "txn-crashcheck: recovery: open: %s\n", txn_pool_strerror(rc));
        at_exit();
        _exit(11);
    }
    txn_pool_close(p);
    at_exit();
    /* the recovered pool as the format's own checks see it */
    v = txn_pool_inspect(R.pool, &info);
    if (v != 0) {
        fprintf(stderr, "txn-crashcheck: recovered pool: %s%s%s\n",
                v == TXN_INSPECT_RECOVER ? "recovery still pending" : txn_strerror(v),
                info.problem[0] ? ": " : "", info.problem);
        _exit(12);
    }
    _exit(0);
}

/* Last of the library's constructors (this file is linked last, and
 * .init_array runs in link order): the settings and size classes are
 * read before a recovery may open a pool here. */
__attribute__((constructor)) static void record_init(void)
{
    const char *trace = getenv(CHK_ENV_TRACE), *pool = getenv(CHK_ENV_POOL);
    const char *seed = getenv(CHK_ENV_SEED), *recover = getenv(CHK_ENV_RECOVER);
    const char *at = getenv(CHK_ENV_WHERE), *sched = getenv(CHK_ENV_SCHED);
    if (at)
        R.where = strtoull(at, NULL, 10);
    if (pool && strlen(pool) < sizeof R.pool) {
        snprintf(R.pool, sizeof R.pool, "%s", pool);
        snprintf(R.tmp, sizeof R.tmp, "%s.pmtx-new", pool);
    }
    if (seed) {
        R.seed = strtoull(seed, NULL, 10);
        R.seeded = 1;
    }
    if (trace) {
        R.fd = open(trace, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        R.buf = malloc(BUF_SIZE);
        if (R.fd >= 0 && R.buf) {
            R.on = 1;
            const char *e = txn_engine_name();
            pthread_mutex_lock(&lock);
            rec(CHK_HELLO, CHK_MAGIC, CHK_VERSION, e, (uint32_t)strlen(e) + 1);
#ifdef CHK_INFER
            rec(CHK_INFERRED, 0, 0, NULL, 0);
#endif
            out_flush();
            pthread_mutex_unlock(&lock);
            atexit(at_exit);
            pthread_atfork(before_fork, after_fork, in_child);
            if (sched && !strcmp(sched, "1")) {
#ifdef CHK_NO_SWITCH_IN_TX
                chk_sched_init(R.seed, 0);
#else
                chk_sched_init(R.seed, 1);
#endif
            }
        } else { /* the checker then finds no trace and says so */
            fprintf(stderr, "txn-crashcheck: cannot write the trace %s: %s\n", trace,
                    strerror(errno));
            if (R.fd >= 0)
                close(R.fd);
            R.fd = -1;
        }
    }
    if (recover && !strcmp(recover, "1"))
        recover_and_exit();
}
