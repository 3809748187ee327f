/* pmdk.c - the `pmdk` engine: txn.h on PMDK's libpmemobj (1.12), so that
 * every app and benchmark also runs on PMDK's own transactions.
 *
 * This engine brings its own pool format (a libpmemobj pool file) and is
 * linked with txn/common.c and txn/persist.c only; it implements every
 * other call of txn.h itself. The file holds, in order: handles, the pool
 * file checks that open runs before PMDK sees the file, the volatile map
 * of live objects, per-thread contexts, pools, transactions, and the
 * libpmem functions libpmemobj calls, redefined on persist.h.
 *
 * Mapping onto PMDK
 * -----------------
 * txn_begin  = pmemobj_tx_begin(pop, NULL, TX_PARAM_NONE) (no setjmp: PMDK
 *              only longjmps when given a jmp_buf) with the failure
 *              behaviour POBJ_TX_FAILURE_RETURN, so a failed call returns
 *              its error and leaves the transaction to us.
 * txn_write  = pmemobj_tx_add_range_direct + store (PMDK undo-logs the old
 *              bytes; the paper's PMDK baseline). txn_read and txn_open are
 *              plain loads from the object in place.
 * txn_alloc  = pmemobj_tx_xalloc(ZERO), txn_free = pmemobj_tx_free.
 * txn_commit = pmemobj_tx_commit + pmemobj_tx_end; then deferred actions.
 *
 * Handles
 * -------
 * PMDK maps a pool wherever mmap puts it, so a persistent pointer must not
 * be an address. A txn_obj * is HANDLE_BASE + the object's offset in its
 * pool (PMEMoid.off): the same in every run, and never dereferenced (txn.h
 * forbids it). The handle holds no pool: every call that takes one also
 * knows the pool (txn_obj_size(p, o), and the transaction's pool for
 * txn_open/read/write/free), so any number of pools can be open at once.
 * The price: a handle of another open pmdk pool that happens to name a
 * live offset of this one cannot be told apart from a handle of this pool.
 *
 * Handles are checked exactly: the pool keeps a volatile map with 2 bits
 * per 16-byte granule (PMDK object offsets are 16-byte aligned) saying
 * whether an object starts there, built at open by walking PMDK's heap.
 * The root is PMDK's root object; a small internal object of its own type
 * (struct meta) keeps the creation options PMDK does not store (threads).
 *
 * A full pool
 * -----------
 * PMDK's frees are intents in a redo log whose lane part holds about 40;
 * beyond that it grows the log from the heap, which a full pool cannot.
 * So each pool keeps a 64 KiB internal object, the reserve: a free that
 * fails for want of log space appends it to the transaction's intent log
 * (pmemobj_tx_log_append_buffer, PMDK's remedy for this case) and tries
 * again. One transaction at a time holds it, until it ends.
 *
 * Invariants
 * ----------
 * 1. Nothing volatile is stored in the pool: handles are offsets, and the
 *    object map is rebuilt at open from PMDK's heap after PMDK recovered.
 * 2. A block leaves the map (FREE) before PMDK can hand it to another
 *    allocation: at commit before pmemobj_tx_commit for freed objects, at
 *    abort before pmemobj_tx_abort for allocated ones, and at once when a
 *    transaction frees what it allocated itself (PMDK cancels that
 *    reservation at once). So another thread's new object at the same
 *    offset is never taken off the map.
 * 3. Open writes nothing until every check PMDK would fail only after it
 *    has written has passed (layout, descriptor checksum, truncation).
 *    PMDK keeps run-time state inside the mapped file before its later
 *    checks (heap), so if pmemobj_open fails anyway the file's first bytes
 *    are put back as they were. A view (pool_open_view, layout_rec.h)
 *    writes nothing at all: PMDK maps it copy-on-write.
 * 4. Deferred actions run after pmemobj_tx_end, when PMDK has no
 *    transaction on the thread, so they may begin new ones.
 *
 * Barriers
 * --------
 * libpmemobj persists through libpmem's exported pmem_flush, pmem_drain,
 * pmem_persist, pmem_memcpy/memmove/memset and pmem_deep_flush. This
 * library defines and exports them (baseline/pmdk.map), so libpmemobj's
 * calls land here and go through persist.h: PMDK's barriers are counted
 * and priced per PDOM like every other engine's, and at PDOM 2 no flush or
 * fence reaches the hardware. persist.c reaches the real libpmem through
 * dlsym(RTLD_NEXT), past these definitions. (pmem_msync is left alone:
 * with PMEM_IS_PMEM_FORCE=1, as the scripts run, PMDK calls it only for
 * pool headers at create and close; without it PMDK msyncs instead of
 * flushing and its barriers go uncounted.)
 *
 * What PMDK 1.12 issues, measured at every PDOM: a transaction of N
 * add_range writes (N >= 1, distinct objects) costs 2N + 3 barriers; an
 * empty one 2. Per range: a pmem_memset of the next undo entry (flush +
 * drain) and a pmem_memcpy of the snapshot (flush) + pmem_drain. Commit:
 * flush the ranges + drain, a drain, and the pmem_persist that invalidates
 * the undo log. Lines for 32-byte writes: 3N + 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libpmem.h>
#include <libpmemobj.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomics.h"
#include "common.h"
#include "ctxreg.h"
#include "layout_rec.h"
#include "persist.h"
#include "pmdk.h"
#include "txn.h"
#include "util.h"

#define HANDLE_BASE ((uintptr_t)1 << 44) /* 16 TiB: keeps NULL and small
                                             integers invalid handles */
#define GRAIN 16u                          /* PMDK object offset alignment */

#define DEF_SIZE ((size_t)64 << 20)
#define DEF_ROOT 64u
#define DEF_THREADS 64u
#define MAX_THREADS 1024u
#define MAX_LAYOUT 63u /* txn.h: a layout name has at most 63 bytes */

/* PMDK type numbers: user objects, and the internal objects (struct meta
 * and the intent log reserve) that iteration tells apart by them. */
#define TYPE_OBJ 0u
#define TYPE_META 0x4154454d58544d50ull /* "PMTXMETA" */
#define TYPE_RESERVE 0x5652535258544d50ull /* "PMTXRSRV" */
#define TYPE_LAYOUT 0x5459414c58544d50ull /* "PMTXLAYT": the layout record */
#define RESERVE_SIZE ((size_t)64 << 10)
#define META_MAGIC 0x3141544d4b444d50ull /* "PMDKMTA1" */

/* What a pool needs that PMDK does not keep. */
struct meta {
    uint64_t magic;
    uint32_t threads;
    uint32_t unused;
};

/* One per (thread, pool): the thread's slot, and `txn` of txn.h. */
struct txn {
    txn_pool *p;
    struct txn *next; /* the pool's contexts */
    pthread_t owner;  /* PMDK transactions belong to one thread */
    int active;
    int err;          /* first error of the running transaction */
    int has_reserve;  /* holds the pool's reserve */
    struct vec allocs; /* uint64_t offsets allocated by it */
    struct vec frees;  /* uint64_t offsets it frees at commit */
    struct vec defers; /* struct tx_defer */
};

struct txn_pool {
    PMEMobjpool *pop;
    char *base;        /* == pop: PMEMoid offsets count from here */
    size_t size;       /* of the file and the mapping */
    uint64_t uuid_lo;  /* PMEMoid.pool_uuid_lo of this pool */
    uint64_t root_off;
    size_t root_size;
    uint64_t reserve_off; /* the intent log reserve, 0 if none */
    size_t reserve_size;
    uint64_t reserve_busy; /* a transaction holds it */
    uint64_t layout_off;   /* the layout record (layout_rec.h), 0 if none */
    uint64_t *state;   /* 2 bits per granule: ST_* */
    unsigned threads;  /* contexts allowed at once */
    uint64_t gen;      /* unique per open: keys the thread caches */
    pthread_mutex_t ctx_lock;
    struct txn *ctxs;
    unsigned nctx;
};

/* ---- handles */

static txn_obj *handle_of(uint64_t off)
{
    return (txn_obj *)(HANDLE_BASE + (uintptr_t)off);
}

/* The offset named by `o`, if it lies in the pool at all. */
static int offset_of(const txn_pool *p, const txn_obj *o, uint64_t *off)
{
    uintptr_t h = (uintptr_t)o;
    if (h < HANDLE_BASE || h - HANDLE_BASE >= p->size)
        return 0;
    *off = h - HANDLE_BASE;
    return 1;
}

static PMEMoid oid_of(const txn_pool *p, uint64_t off)
{
    return (PMEMoid){p->uuid_lo, off};
}

/* ---- the map of objects: 2 bits per GRAIN bytes of the pool */

enum {
    ST_FREE = 0,    /* no object starts here */
    ST_LIVE = 1,    /* a committed object */
    ST_NEW = 2,     /* allocated by a running transaction */
    ST_FREEING = 3, /* committed, freed by a running transaction */
};

static uint64_t *st_word(const txn_pool *p, uint64_t off, unsigned *shift)
{
    uint64_t g = off / GRAIN;
    *shift = (unsigned)(g % 32) * 2;
    return &p->state[g / 32];
}

static unsigned st_get(const txn_pool *p, uint64_t off)
{
    unsigned sh;
    uint64_t w = at_load(st_word(p, off, &sh));
    return (unsigned)(w >> sh) & 3u;
}

/* Moves `off` from state `from` to `to`; 0 if it was not in `from`.
 * Threads share words, so this is a CAS loop. */
static int st_move(txn_pool *p, uint64_t off, unsigned from, unsigned to)
{
    unsigned sh;
    uint64_t *w = st_word(p, off, &sh);
    for (;;) {
        uint64_t old = at_load(w);
        if (((old >> sh) & 3u) != from)
            return 0;
        uint64_t nw = (old & ~((uint64_t)3 << sh)) | ((uint64_t)to << sh);
        if (at_cas(w, old, nw))
            return 1;
    }
}

/* Payload bytes of object `off`, or 0 when no object starts there. */
static size_t obj_size_at(const txn_pool *p, uint64_t off)
{
    if (off == p->root_off)
        return p->root_size;
    if (off % GRAIN || st_get(p, off) == ST_FREE)
        return 0;
    return pmemobj_alloc_usable_size(oid_of(p, off));
}

/* ---- pool file checks, read-only, before PMDK maps the file
 *
 * Offsets in PMDK 1.12's format (layout major 6): the pool header (4 KiB,
 * Fletcher-64 checksummed), then the object pool descriptor (2 KiB,
 * checksummed: layout name, lane and heap offsets), then fields that are
 * not checksummed (root, run id, heap size), then run-time state PMDK
 * keeps in the mapping up to the lanes. */
#define PM_HDR_SIZE 4096u
#define PM_HDR_MAJOR 8u     /* uint32 format major */
#define PM_HDR_INCOMPAT 16u /* uint32 incompatible features */
#define PM_HDR_CSUM 4088u
#define PM_FEAT_CKSUM_2K 0x2u /* the header checksum covers 2 KiB only */
#define PM_OBJ_MAJOR 6u
#define PM_DSC 4096u        /* descriptor */
#define PM_DSC_SIZE 2048u
#define PM_DSC_LAYOUT 0u    /* char[1024] */
#define PM_DSC_LAYOUT_MAX 1024u
#define PM_DSC_HEAP_OFF 1040u
#define PM_DSC_CSUM 2040u
#define PM_HEAP_SIZE 6176u  /* uint64 heap size, 0 in old pools */
#define PM_PREFIX 8192u     /* what PMDK may rewrite before failing */

/* Fletcher-64 over 32-bit little-endian words as PMDK computes it: the
 * checksum field and everything from `end` on count as zero. */
static uint64_t pm_checksum(const unsigned char *b, size_t len, size_t csum, size_t end)
{
    uint32_t lo = 0, hi = 0;
    for (size_t i = 0; i + 4 <= len; i += 4) {
        uint32_t w = 0;
        if (i < end && (i < csum || i >= csum + 8))
            memcpy(&w, b + i, 4);
        lo += w;
        hi += lo;
    }
    return (uint64_t)hi << 32 | lo;
}

static uint64_t get64(const unsigned char *b, size_t off)
{
    uint64_t v;
    memcpy(&v, b + off, sizeof v);
    return v;
}

static uint32_t get32(const unsigned char *b, size_t off)
{
    uint32_t v;
    memcpy(&v, b + off, sizeof v);
    return v;
}

static int read_all(int fd, void *buf, size_t n, off_t off)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, off + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n, off_t off)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = pwrite(fd, (const char *)buf + done, n - done, off + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* The file's first bytes, kept to check them and to put them back. */
struct prefix {
    unsigned char b[PM_PREFIX];
    size_t n;         /* bytes read: min(file size, PM_PREFIX) */
    size_t file_size;
};

/* Everything open checks before PMDK sees the file, in order of what a
 * damaged file breaks first. */
static int check_prefix(const struct prefix *f, const char *layout)
{
    const unsigned char *b = f->b;
    if (f->n < 8)
        return TXN_E_NOTPOOL;
    if (get64(b, 0) == POOL_MAGIC)
        return TXN_E_ENGINE;
    if (memcmp(b, PMDK_POOL_SIG, sizeof PMDK_POOL_SIG))
        return TXN_E_NOTPOOL;
    if (f->n < PM_PREFIX)
        return TXN_E_TRUNC;
    size_t end = get32(b, PM_HDR_INCOMPAT) & PM_FEAT_CKSUM_2K ? PM_HDR_SIZE / 2 : PM_HDR_SIZE;
    if (pm_checksum(b, PM_HDR_SIZE, PM_HDR_CSUM, end) != get64(b, PM_HDR_CSUM))
        return TXN_E_CORRUPT;
    if (get32(b, PM_HDR_MAJOR) != PM_OBJ_MAJOR)
        return TXN_E_VERSION;
    const unsigned char *d = b + PM_DSC;
    if (pm_checksum(d, PM_DSC_SIZE, PM_DSC_CSUM, PM_DSC_SIZE) != get64(d, PM_DSC_CSUM))
        return TXN_E_CORRUPT;
    const char *name = (const char *)d + PM_DSC_LAYOUT;
    if (!memchr(name, 0, PM_DSC_LAYOUT_MAX))
        return TXN_E_CORRUPT;
    if (strcmp(name, layout))
        return TXN_E_LAYOUT;
    uint64_t heap_off = get64(d, PM_DSC_HEAP_OFF), heap_size = get64(b, PM_HEAP_SIZE);
    if (heap_off < PM_PREFIX || heap_off > SIZE_MAX / 2 || heap_size > SIZE_MAX / 2)
        return TXN_E_CORRUPT;
    size_t need = heap_size ? heap_off + heap_size : PMEMOBJ_MIN_POOL;
    return f->file_size < need ? TXN_E_TRUNC : 0;
}

/* Opens `file` under an exclusive flock, PMDK's own lock: TXN_E_BUSY while
 * the pool is open, in this process or another. */
static int lock_file(const char *file, int flags, int *fd)
{
    *fd = open(file, flags | O_CLOEXEC);
    if (*fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? TXN_E_NOENT : TXN_E_IO;
    if (flock(*fd, LOCK_EX | LOCK_NB)) {
        int busy = errno == EWOULDBLOCK;
        close(*fd);
        return busy ? TXN_E_BUSY : TXN_E_IO;
    }
    return 0;
}

static int read_prefix(const char *file, const char *layout, struct prefix *f)
{
    int fd, rc = lock_file(file, O_RDONLY, &fd);
    if (rc)
        return rc;
    struct stat st;
    if (fstat(fd, &st))
        rc = TXN_E_IO;
    else if (!S_ISREG(st.st_mode))
        rc = TXN_E_NOTPOOL;
    if (!rc) {
        f->file_size = (size_t)st.st_size;
        f->n = f->file_size < PM_PREFIX ? f->file_size : PM_PREFIX;
        rc = read_all(fd, f->b, f->n, 0) ? TXN_E_IO : check_prefix(f, layout);
    }
    close(fd); /* drops the lock: PMDK takes its own */
    return rc;
}

/* pmemobj_open failed after mapping: put back what it wrote into the
 * first bytes (run id, run-time state). Skipped if someone holds the pool
 * by now: then those bytes are theirs. */
static void restore_prefix(const char *file, const struct prefix *f)
{
    unsigned char *now = malloc(PM_PREFIX);
    int fd;
    if (!now || lock_file(file, O_RDWR, &fd)) {
        free(now);
        return;
    }
    if (!read_all(fd, now, f->n, 0) && memcmp(now, f->b, f->n))
        write_all(fd, f->b, f->n, 0);
    close(fd);
    free(now);
}

/* An errno of pmemobj_open once our own checks passed. */
static int open_error(int e)
{
    switch (e) {
    case EAGAIN:
        return TXN_E_BUSY;
    case ENOENT:
        return TXN_E_NOENT;
    case ENOMEM:
        return TXN_E_NOMEM;
    case EACCES:
    case EPERM:
    case EIO:
    case EROFS:
    case EMFILE:
    case ENFILE:
        return TXN_E_IO;
    default:
        return TXN_E_CORRUPT; /* PMDK found damage we do not check */
    }
}

static int create_error(int e)
{
    switch (e) {
    case EEXIST:
        return TXN_E_EXIST;
    case ENOENT:
    case ENOTDIR:
        return TXN_E_NOENT;
    case EINVAL:
        return TXN_E_INVAL;
    case ENOMEM:
        return TXN_E_NOMEM;
    default:
        return TXN_E_IO;
    }
}

static int layout_ok(const char *layout)
{
    size_t n = strnlen(layout, MAX_LAYOUT + 1);
    return n > 0 && n <= MAX_LAYOUT;
}

/* ---- per-thread contexts
 * A thread gets a context per pool at its first txn_begin and keeps it
 * until it exits or the pool closes; `threads` bounds them (TXN_E_THREADS).
 * A TLS array finds it without a lock; `gen` tells an entry of a closed
 * pool from a new pool at the same address. */

static void ctx_free(struct txn *tx)
{
    vec_free(&tx->allocs);
    vec_free(&tx->frees);
    vec_free(&tx->defers);
    free(tx);
}

/* Gives the slot back; called with the context registry locked. */
static void ctx_release(void *ctx)
{
    struct txn *tx = ctx;
    txn_pool *p = tx->p;
    pthread_mutex_lock(&p->ctx_lock);
    for (struct txn **pp = &p->ctxs; *pp; pp = &(*pp)->next)
        if (*pp == tx) {
            *pp = tx->next;
            p->nctx--;
            break;
        }
    pthread_mutex_unlock(&p->ctx_lock);
    ctx_free(tx);
}

static void *ctx_new(void *pool, int *err)
{
    txn_pool *p = pool;
    struct txn *tx = calloc(1, sizeof *tx);
    if (!tx) {
        *err = TXN_E_NOMEM;
        return NULL;
    }
    tx->p = p;
    tx->owner = pthread_self();
    vec_init(&tx->allocs, sizeof(uint64_t));
    vec_init(&tx->frees, sizeof(uint64_t));
    vec_init(&tx->defers, sizeof(struct tx_defer));
    pthread_mutex_lock(&p->ctx_lock);
    int full = p->nctx >= p->threads;
    if (!full) {
        tx->next = p->ctxs;
        p->ctxs = tx;
        p->nctx++;
    }
    pthread_mutex_unlock(&p->ctx_lock);
    if (full) {
        free(tx);
        *err = TXN_E_THREADS;
        return NULL;
    }
    return tx;
}

static const struct ctxreg_ops ctx_ops = {ctx_new, ctx_release};

static void release_all(void *pool)
{
    txn_pool *p = pool;
    while (p->ctxs)
        ctx_release(p->ctxs);
}

/* ---- pools */

static int meta_init(PMEMobjpool *pop, void *ptr, void *arg)
{
    struct meta *m = ptr;
    m->magic = META_MAGIC;
    m->threads = *(const unsigned *)arg;
    m->unused = 0;
    pmemobj_persist(pop, m, sizeof *m);
    return 0;
}

/* Walks PMDK's heap: every object is live, except the internal ones. */
static void scan_objects(txn_pool *p)
{
    for (PMEMoid o = pmemobj_first(p->pop); !OID_IS_NULL(o); o = pmemobj_next(o)) {
        uint64_t type = pmemobj_type_num(o);
        if (type == TYPE_META) {
            const struct meta *m = pmemobj_direct(o);
            if (pmemobj_alloc_usable_size(o) >= sizeof *m && m->magic == META_MAGIC &&
                m->threads > 0 && m->threads <= MAX_THREADS)
                p->threads = m->threads;
        } else if (type == TYPE_RESERVE) {
            p->reserve_off = o.off;
            p->reserve_size = pmemobj_alloc_usable_size(o);
        } else if (type == TYPE_LAYOUT && o.off % GRAIN == 0 && o.off < p->size) {
            p->layout_off = o.off; /* an object txn_read/txn_write reach */
            st_move(p, o.off, ST_FREE, ST_LIVE);
        } else if (o.off % GRAIN == 0 && o.off < p->size) {
            st_move(p, o.off, ST_FREE, ST_LIVE);
        }
    }
}

void pmdk_region(txn_pool *p, void **base, size_t *size)
{
    *base = p->base;
    *size = p->size;
}

void pmdk_foreach_object(txn_pool *p, void (*fn)(txn_obj *o, enum pmdk_kind k, void *arg),
                         void *arg)
{
    for (PMEMoid o = pmemobj_first(p->pop); !OID_IS_NULL(o); o = pmemobj_next(o)) {
        uint64_t type = pmemobj_type_num(o);
        enum pmdk_kind k = o.off == p->root_off ? PMDK_ROOT
                         : type == TYPE_META    ? PMDK_META
                         : type == TYPE_RESERVE ? PMDK_RESERVE
                                                : PMDK_USER;
        fn(handle_of(o.off), k, arg);
    }
}

static void pool_free(txn_pool *p)
{
    if (p->gen)
        ctxreg_close(p, p->gen, release_all);
    pthread_mutex_destroy(&p->ctx_lock);
    free(p->state);
    free(p);
}

/* The volatile side of an open PMDK pool: root, object map, registry. */
static int pool_start(PMEMobjpool *pop, size_t size, txn_pool **out)
{
    txn_pool *p = calloc(1, sizeof *p);
    if (!p)
        return TXN_E_NOMEM;
    pthread_mutex_init(&p->ctx_lock, NULL);
    p->pop = pop;
    p->base = (char *)pop;
    p->size = size;
    p->threads = DEF_THREADS;
    PMEMoid root = pmemobj_root(pop, 0);
    if (OID_IS_NULL(root)) /* a PMDK pool of our layout made elsewhere */
        root = pmemobj_root(pop, DEF_ROOT);
    int rc = OID_IS_NULL(root) ? TXN_E_NOSPACE : 0;
    size_t words = (size / GRAIN + 31) / 32;
    if (!rc && !(p->state = calloc(words, sizeof *p->state)))
        rc = TXN_E_NOMEM;
    if (!rc) {
        p->uuid_lo = root.pool_uuid_lo;
        p->root_off = root.off;
        p->root_size = pmemobj_root_size(pop);
        scan_objects(p);
        p->gen = ctxreg_open(p, &ctx_ops);
        rc = p->gen ? 0 : TXN_E_NOMEM;
    }
    if (rc) {
        pool_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int txn_pool_create(const char *path, const char *layout, const txn_pool_opts *opts,
                    txn_pool **out)
{
    if (!path || !layout || !out || !layout_ok(layout))
        return TXN_E_INVAL;
    size_t size = opts && opts->size ? opts->size : DEF_SIZE;
    size_t root_size = opts && opts->root_size ? opts->root_size : DEF_ROOT;
    unsigned threads = opts && opts->threads ? opts->threads : DEF_THREADS;
    if (threads > MAX_THREADS)
        return TXN_E_INVAL;
    if (size < PMEMOBJ_MIN_POOL)
        size = PMEMOBJ_MIN_POOL; /* PMDK's minimum */
    if (root_size >= size || root_size > PMEMOBJ_MAX_ALLOC_SIZE)
        return TXN_E_NOSPACE;
    char file[PATH_MAX];
    int rc = txn_pool_path(path, file, sizeof file);
    if (rc)
        return rc;
    persist_init();
    /* opts->log_size has no meaning here: PMDK's logs grow by themselves */
    PMEMobjpool *pop = pmemobj_create(file, layout, size, 0644);
    if (!pop)
        return create_error(errno);
    /* the root comes zero-filled from PMDK; these calls are durable */
    PMEMoid root = pmemobj_root(pop, root_size), m;
    if (OID_IS_NULL(root) ||
        pmemobj_xalloc(pop, &m, sizeof(struct meta), TYPE_META, 0, meta_init, &threads) ||
        pmemobj_alloc(pop, &m, RESERVE_SIZE, TYPE_RESERVE, NULL, NULL) ||
        pmemobj_zalloc(pop, &m, LAYOUT_REC_SIZE, TYPE_LAYOUT))
        rc = TXN_E_NOSPACE;
    if (!rc)
        rc = pool_start(pop, size, out);
    if (rc) {
        pmemobj_close(pop);
        unlink(file);
    }
    return rc;
}

/* PMDK's copy-on-write open (the ctl copy_on_write.at_open, which PMDK's
 * own read-only tools use): the file mapped MAP_PRIVATE, so that PMDK's
 * run-time state, its recovery and our transactions reach only this
 * process's pages. The setting is global to the process: every open of
 * this engine takes g_open_lock, so no real open runs while it is set.
 * (A program opening PMDK pools behind this library's back, at the same
 * time as a view, could get a private mapping.) */
static pthread_mutex_t g_open_lock = PTHREAD_MUTEX_INITIALIZER;

static PMEMobjpool *open_pop(const char *file, const char *layout, int view)
{
    pthread_mutex_lock(&g_open_lock);
    int on = 1, off = 0;
    PMEMobjpool *pop = NULL;
    if (!view || !pmemobj_ctl_set(NULL, "copy_on_write.at_open", &on))
        pop = pmemobj_open(file, layout);
    int e = errno;
    if (view)
        pmemobj_ctl_set(NULL, "copy_on_write.at_open", &off);
    pthread_mutex_unlock(&g_open_lock);
    errno = e;
    return pop;
}

static int pool_open(const char *path, const char *layout, int view, txn_pool **out)
{
    if (!path || !layout || !out || !*layout)
        return TXN_E_INVAL;
    if (!layout_ok(layout))
        return TXN_E_LAYOUT; /* no pool can have been created with it */
    char file[PATH_MAX];
    int rc = txn_pool_path(path, file, sizeof file);
    if (rc)
        return rc;
    persist_init();
    struct prefix *f = malloc(sizeof *f);
    if (!f)
        return TXN_E_NOMEM;
    if ((rc = read_prefix(file, layout, f)))
        goto done;
    PMEMobjpool *pop = open_pop(file, layout, view);
    if (!pop) {
        rc = open_error(errno);
        if (rc != TXN_E_BUSY && !view) /* a view wrote nothing to put back */
            restore_prefix(file, f);
        goto done;
    }
    if ((rc = pool_start(pop, f->file_size, out)))
        pmemobj_close(pop);
done:
    free(f);
    return rc;
}

int txn_pool_open(const char *path, const char *layout, txn_pool **out)
{
    return pool_open(path, layout, 0, out);
}

int pool_open_view(const char *path, const char *layout, txn_pool **out)
{
    return pool_open(path, layout, 1, out);
}

void txn_pool_close(txn_pool *p)
{
    if (!p)
        return;
    PMEMobjpool *pop = p->pop;
    pool_free(p);
    pmemobj_close(pop);
}

txn_obj *txn_root(txn_pool *p)
{
    return p ? handle_of(p->root_off) : NULL;
}

txn_obj *pool_layout_rec(txn_pool *p)
{
    return p->layout_off ? handle_of(p->layout_off) : NULL;
}

size_t txn_obj_size(txn_pool *p, const txn_obj *o)
{
    uint64_t off;
    return p && offset_of(p, o, &off) ? obj_size_at(p, off) : 0;
}

const char *txn_engine_name(void)
{
    return "pmdk";
}

int txn_sync(txn_pool *p)
{
    return p ? 0 : TXN_E_INVAL; /* durable at commit */
}

/* ---- transactions */

/* Calls that reach PMDK's transaction must come from the thread that began
 * it (PMDK's state is per thread and it aborts the process otherwise). */
static int mine(const struct txn *tx)
{
    return pthread_equal(tx->owner, pthread_self());
}

static int usable(const struct txn *tx)
{
    if (!tx || !tx->active)
        return TXN_E_INVAL;
    return tx->err ? TXN_E_STATE : 0;
}

/* Records the first error: after it the transaction can only abort. */
static int fail(struct txn *tx, int rc)
{
    if (rc && !tx->err)
        tx->err = rc;
    return rc;
}

/* An error number of a PMDK transaction call. */
static int tx_error(int e)
{
    return e == ENOMEM ? TXN_E_NOSPACE : e == EINVAL ? TXN_E_INVAL : TXN_E_STATE;
}

int txn_begin(txn_pool *p, txn **out)
{
    if (!p || !out)
        return TXN_E_INVAL;
    int err = 0;
    struct txn *tx = ctxreg_get(p, p->gen, &err);
    if (!tx)
        return err;
    if (tx->active)
        return TXN_E_NESTED;
    /* PMDK flattens nested transactions and cannot nest across pools:
     * one transaction per thread, whatever the pool */
    if (pmemobj_tx_stage() != TX_STAGE_NONE)
        return TXN_E_NOTSUP;
    int rc = pmemobj_tx_begin(p->pop, NULL, TX_PARAM_NONE);
    if (rc) {
        pmemobj_tx_end();
        return rc == ENOMEM ? TXN_E_NOMEM : TXN_E_IO;
    }
    pmemobj_tx_set_failure_behavior(POBJ_TX_FAILURE_RETURN);
    tx->active = 1;
    tx->err = 0;
    tx->allocs.n = tx->frees.n = 0;
    *out = tx;
    return 0;
}

static void set_states(txn_pool *p, const struct vec *v, unsigned from, unsigned to)
{
    for (size_t i = 0; i < v->n; i++)
        st_move(p, *(uint64_t *)vec_at(v, i), from, to);
}

/* Roll back in PMDK; the map first (invariant 2). */
static void rollback(struct txn *tx)
{
    set_states(tx->p, &tx->allocs, ST_NEW, ST_FREE);
    set_states(tx->p, &tx->frees, ST_FREEING, ST_LIVE);
    if (pmemobj_tx_stage() == TX_STAGE_WORK)
        pmemobj_tx_abort(ECANCELED);
    pmemobj_tx_end();
}

static void finish(struct txn *tx, int committed)
{
    if (tx->has_reserve) { /* PMDK let go of it at pmemobj_tx_end */
        tx->has_reserve = 0;
        at_store(&tx->p->reserve_busy, 0);
    }
    tx->active = 0;
    tx->allocs.n = tx->frees.n = 0;
    if (committed)
        pm_ctr.commits++;
    else
        pm_ctr.aborts++;
    defers_run(&tx->defers, committed ? TXN_ON_COMMIT : TXN_ON_ABORT);
}

static int commit_pmdk(struct txn *tx)
{
    txn_pool *p = tx->p;
    set_states(p, &tx->frees, ST_FREEING, ST_FREE); /* invariant 2 */
    if (pmemobj_tx_stage() == TX_STAGE_WORK)
        pmemobj_tx_commit();
    enum pobj_tx_stage stage = pmemobj_tx_stage();
    int e = pmemobj_tx_end();
    if (stage == TX_STAGE_ONCOMMIT && e == 0) {
        set_states(p, &tx->allocs, ST_NEW, ST_LIVE);
        return 0;
    }
    /* PMDK rolled it back itself. Its commit does not fail in 1.12 (it
     * returns nothing), so this is a safety net: allocations it already
     * released are unmapped only now. */
    set_states(p, &tx->frees, ST_FREE, ST_LIVE);
    set_states(p, &tx->allocs, ST_NEW, ST_FREE);
    return e ? tx_error(e) : TXN_E_STATE;
}

int txn_commit(txn *tx)
{
    if (!tx || !tx->active || !mine(tx))
        return TXN_E_INVAL;
    if (tx->err) { /* txn_last_error() still says what failed */
        rollback(tx);
        finish(tx, 0);
        return TXN_E_STATE;
    }
    int rc = commit_pmdk(tx);
    finish(tx, rc == 0);
    return rc;
}

void txn_abort(txn *tx)
{
    if (!tx || !tx->active || !mine(tx))
        return;
    rollback(tx);
    finish(tx, 0);
}

txn_pool *txn_pool_of(const txn *tx)
{
    return tx ? tx->p : NULL;
}

int txn_last_error(const txn *tx)
{
    return tx ? tx->err : TXN_E_INVAL;
}

/* The object's offset when [off, off+n) lies in its payload. */
static int range_ok(const struct txn *tx, const txn_obj *o, size_t off, size_t n,
                    uint64_t *at)
{
    size_t s = offset_of(tx->p, o, at) ? obj_size_at(tx->p, *at) : 0;
    return s && off <= s && n <= s - off;
}

void *txn_open(txn *tx, txn_obj *o, int mode)
{
    uint64_t at;
    if (usable(tx))
        return NULL;
    if ((mode != TXN_RO && mode != TXN_RW) || !offset_of(tx->p, o, &at) ||
        !obj_size_at(tx->p, at)) {
        fail(tx, TXN_E_INVAL);
        return NULL;
    }
    return tx->p->base + at; /* in place: PMDK undo-logs */
}

int txn_read(txn *tx, txn_obj *o, size_t off, void *dst, size_t n)
{
    uint64_t at;
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!dst || !range_ok(tx, o, off, n, &at))
        return TXN_E_INVAL;
    memcpy(dst, tx->p->base + at + off, n);
    return 0;
}

int txn_write(txn *tx, txn_obj *o, size_t off, const void *src, size_t n)
{
    uint64_t at;
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!mine(tx))
        return TXN_E_INVAL;
    if (!src || !range_ok(tx, o, off, n, &at))
        return fail(tx, TXN_E_INVAL);
    if (n == 0)
        return 0;
    if (pmemobj_tx_stage() != TX_STAGE_WORK)
        return fail(tx, TXN_E_STATE);
    char *a = tx->p->base + at + off;
    if ((rc = pmemobj_tx_add_range_direct(a, n)))
        return fail(tx, tx_error(rc));
    pm_memcpy(a, src, n);
    return 0;
}

int txn_read_u64(txn *tx, txn_obj *o, size_t off, uint64_t *v)
{
    if (off % 8)
        return TXN_E_INVAL;
    return txn_read(tx, o, off, v, sizeof *v);
}

int txn_write_u64(txn *tx, txn_obj *o, size_t off, uint64_t v)
{
    if (off % 8)
        return tx && tx->active ? fail(tx, TXN_E_INVAL) : TXN_E_INVAL;
    return txn_write(tx, o, off, &v, sizeof v);
}

int txn_alloc(txn *tx, size_t n, txn_obj **out)
{
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!out || n == 0 || !mine(tx))
        return TXN_E_INVAL;
    if (n > tx->p->size || n > PMEMOBJ_MAX_ALLOC_SIZE)
        return TXN_E_NOSPACE;
    if (pmemobj_tx_stage() != TX_STAGE_WORK)
        return TXN_E_STATE;
    if (vec_reserve(&tx->allocs, 1))
        return TXN_E_NOMEM;
    PMEMoid o = pmemobj_tx_xalloc(n, TYPE_OBJ, POBJ_XALLOC_ZERO | POBJ_XALLOC_NO_ABORT);
    if (OID_IS_NULL(o))
        return errno == ENOMEM ? TXN_E_NOSPACE : tx_error(errno);
    st_move(tx->p, o.off, ST_FREE, ST_NEW);
    *(uint64_t *)vec_push(&tx->allocs) = o.off;
    *out = handle_of(o.off);
    return 0;
}

/* pmemobj_tx_free, with the reserve appended to the intent log when PMDK
 * cannot grow the log itself (a full pool). */
static int pmdk_free(struct txn *tx, uint64_t off)
{
    txn_pool *p = tx->p;
    int rc = pmemobj_tx_free(oid_of(p, off));
    if (rc != ENOMEM || tx->has_reserve || !p->reserve_off || !at_cas(&p->reserve_busy, 0, 1))
        return rc;
    tx->has_reserve = 1;
    if (pmemobj_tx_xlog_append_buffer(TX_LOG_TYPE_INTENT, p->base + p->reserve_off,
                                      p->reserve_size, POBJ_XLOG_APPEND_BUFFER_NO_ABORT))
        return rc;
    return pmemobj_tx_free(oid_of(p, off));
}

/* Frees an object this transaction allocated: PMDK releases it at once,
 * so it leaves the map first (invariant 2) and the allocs list too. */
static int free_new(struct txn *tx, uint64_t off)
{
    struct vec *a = &tx->allocs;
    size_t i = a->n;
    while (i > 0 && *(uint64_t *)vec_at(a, i - 1) != off)
        i--;
    if (i == 0 || !st_move(tx->p, off, ST_NEW, ST_FREE))
        return TXN_E_INVAL; /* another transaction's */
    *(uint64_t *)vec_at(a, i - 1) = *(uint64_t *)vec_at(a, a->n - 1);
    a->n--;
    int rc = pmdk_free(tx, off);
    if (rc) { /* still reserved by us: nobody took it */
        st_move(tx->p, off, ST_FREE, ST_NEW);
        *(uint64_t *)vec_push(a) = off;
        return tx_error(rc);
    }
    return 0;
}

int txn_free(txn *tx, txn_obj *o)
{
    uint64_t off;
    int rc = usable(tx);
    if (rc)
        return rc;
    if (!mine(tx) || !offset_of(tx->p, o, &off) || off == tx->p->root_off ||
        off % GRAIN)
        return TXN_E_INVAL;
    if (pmemobj_tx_stage() != TX_STAGE_WORK)
        return TXN_E_STATE;
    if (st_get(tx->p, off) == ST_NEW)
        return free_new(tx, off);
    if (vec_reserve(&tx->frees, 1))
        return TXN_E_NOMEM;
    /* LIVE -> FREEING: a second free of it, by us or anyone, fails here */
    if (!st_move(tx->p, off, ST_LIVE, ST_FREEING))
        return TXN_E_INVAL;
    if ((rc = pmdk_free(tx, off))) {
        st_move(tx->p, off, ST_FREEING, ST_LIVE);
        return tx_error(rc);
    }
    *(uint64_t *)vec_push(&tx->frees) = off;
    return 0;
}

int txn_defer(txn *tx, int when, void (*fn)(void *), void *arg)
{
    if (!tx || !tx->active || !fn || when < TXN_ON_COMMIT || when > TXN_ON_END)
        return TXN_E_INVAL;
    struct tx_defer *d = vec_push(&tx->defers);
    if (!d)
        return TXN_E_NOMEM;
    *d = (struct tx_defer){when, fn, arg};
    return 0;
}

/* ---- libpmem, as libpmemobj calls it (exported by baseline/pmdk.map) */

void pmem_flush(const void *addr, size_t len)
{
    pm_flush(addr, len);
}

/* A deep flush differs from a flush on real hardware only for device DAX;
 * under emulation it writes back the same lines. */
void pmem_deep_flush(const void *addr, size_t len)
{
    pm_flush(addr, len);
}

void pmem_drain(void)
{
    pm_barrier();
}

void pmem_persist(const void *addr, size_t len)
{
    pm_persist(addr, len);
}

/* The tail of pmem_memcpy/memmove/memset: flush, then drain, as the flags
 * allow (NOFLUSH implies NODRAIN, as libpmem documents). The copy itself
 * is a plain one: non-temporal stores are an optimisation, not a rule. */
static void flush_copy(const void *dst, size_t len, unsigned flags)
{
    if (flags & PMEM_F_MEM_NOFLUSH)
        return;
    pm_flush(dst, len);
    if (!(flags & PMEM_F_MEM_NODRAIN))
        pm_barrier();
}

void *pmem_memcpy(void *dst, const void *src, size_t len, unsigned flags)
{
    pm_memcpy(dst, src, len);
    flush_copy(dst, len, flags);
    return dst;
}

void *pmem_memmove(void *dst, const void *src, size_t len, unsigned flags)
{
    memmove(dst, src, len);
    flush_copy(dst, len, flags);
    return dst;
}

void *pmem_memset(void *dst, int c, size_t len, unsigned flags)
{
    pm_memset(dst, c, len);
    flush_copy(dst, len, flags);
    return dst;
}
