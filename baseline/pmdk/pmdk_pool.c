/* pmdk_pool.c - the pmdk engine's pool format (engine.h's eng_pool_*
 * layer): a libpmemobj pool file, checked before PMDK sees it, created,
 * opened (or viewed), sealed and closed; the volatile map of its objects.
 *
 * The pool holds, besides the program's objects: the root and the meta
 * object (user objects whose offsets struct meta records at seal), struct
 * meta itself, and the reserve.
 *
 * A full pool
 * -----------
 * PMDK's frees are intents in a redo log whose lane part holds about 40;
 * beyond that it grows the log from the heap, which a full pool cannot.
 * So each pool keeps a 64 KiB internal object, the reserve: a free that
 * fails for want of log space appends it to the transaction's intent log
 * (pmemobj_tx_log_append_buffer, PMDK's remedy for this case) and tries
 * again (pmdk_tx.c). One transaction at a time holds it, until it ends.
 *
 * Invariants
 * ----------
 * 1. Nothing volatile is stored in the pool: handles are offsets, and the
 *    object map is rebuilt at open from PMDK's heap after PMDK recovered.
 * 2. Open writes nothing until every check PMDK would fail only after it
 *    has written has passed (layout, descriptor checksum, truncation, and
 *    the heap as recovery leaves it, seen first on a private view). PMDK keeps run-time state inside the mapped file before its later
 *    checks (heap), so if pmemobj_open fails anyway the file's first bytes
 *    are put back as they were. A view (txn_pool_view) writes nothing at
 *    all: PMDK maps it copy-on-write.
 * 3. A pool is valid once struct meta says META_SEALED, with the root and
 *    the meta object it names: a crash during creation leaves a pool that
 *    open refuses (TXN_E_CORRUPT).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libpmem.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "persist.h"
#include "pmdk.h"
#include "pmdk_int.h"

#define RESERVE_SIZE ((size_t)64 << 10)
#define DEF_THREADS 64u /* of a pool made elsewhere, without struct meta */
#define DEF_ROOT 64u

/* Its state is the engine's (p->eng, tx->eng): no part for a format. */
const size_t eng_pool_fmt_size = 0;
const size_t eng_tx_fmt_size = 0;

int st_move(txn_pool *p, uint64_t off, unsigned from, unsigned to)
{
    unsigned sh;
    uint64_t *w = st_word(p, off, &sh);
    for (;;) { /* threads share words */
        uint64_t old = at_load(w);
        if (((old >> sh) & 3u) != from)
            return 0;
        uint64_t nw = (old & ~((uint64_t)3 << sh)) | ((uint64_t)to << sh);
        if (at_cas(w, old, nw))
            return 1;
    }
}

size_t obj_size_at(const txn_pool *p, uint64_t off)
{
    const struct pmdk_pool *d = pmdk_of(p);
    if (off == d->root_off)
        return d->root_size;
    if (off % GRAIN || st_get(p, off) == ST_FREE)
        return 0;
    return pmemobj_alloc_usable_size(oid_of(p, off));
}

size_t eng_obj_size(txn_pool *p, const txn_obj *o)
{
    uint64_t off;
    return offset_of(p, o, &off) ? obj_size_at(p, off) : 0;
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

/* pread or pwrite all of buf[n] at off: 0, or -1. */
static int rw_all(int fd, void *buf, size_t n, off_t off, int write)
{
    for (size_t done = 0; done < n;) {
        char *at = (char *)buf + done;
        ssize_t r = write ? pwrite(fd, at, n - done, off + (off_t)done)
                          : pread(fd, at, n - done, off + (off_t)done);
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
 * damaged file breaks first; a NULL layout matches any (inspection). */
static int check_prefix(const struct prefix *f, const char *layout)
{
    const unsigned char *b = f->b;
    if (f->n >= 8 && get64(b, 0) == POOL_MAGIC)
        return REFUSE(TXN_E_ENGINE, "a pool of pmtx's own format, not a libpmemobj pool");
    if (f->n < sizeof PMDK_POOL_SIG || memcmp(b, PMDK_POOL_SIG, sizeof PMDK_POOL_SIG))
        return REFUSE(TXN_E_NOTPOOL, "no libpmemobj pool header (signature)");
    if (f->n < PM_PREFIX)
        return REFUSE(TXN_E_TRUNC, "%zu bytes: shorter than a libpmemobj header", f->n);
    size_t end = get32(b, PM_HDR_INCOMPAT) & PM_FEAT_CKSUM_2K ? PM_HDR_SIZE / 2 : PM_HDR_SIZE;
    if (pm_checksum(b, PM_HDR_SIZE, PM_HDR_CSUM, end) != get64(b, PM_HDR_CSUM))
        return REFUSE(TXN_E_CORRUPT, "pool header: checksum mismatch");
    if (get32(b, PM_HDR_MAJOR) != PM_OBJ_MAJOR)
        return REFUSE(TXN_E_VERSION, "libpmemobj layout major %u, this library reads %u",
                      get32(b, PM_HDR_MAJOR), PM_OBJ_MAJOR);
    const unsigned char *d = b + PM_DSC;
    if (pm_checksum(d, PM_DSC_SIZE, PM_DSC_CSUM, PM_DSC_SIZE) != get64(d, PM_DSC_CSUM))
        return REFUSE(TXN_E_CORRUPT, "object pool descriptor: checksum mismatch");
    /* all zero passes the checksum (Fletcher of zeros is zero), and no
     * pool has it: its heap offset cannot be 0 */
    uint64_t heap_off = get64(d, PM_DSC_HEAP_OFF), heap_size = get64(b, PM_HEAP_SIZE);
    if (heap_off < PM_PREFIX || heap_off > SIZE_MAX / 2 || heap_size > SIZE_MAX / 2)
        return REFUSE(TXN_E_CORRUPT, "object pool descriptor: heap at %llu of %llu bytes",
                      (unsigned long long)heap_off, (unsigned long long)heap_size);
    const char *name = (const char *)d + PM_DSC_LAYOUT;
    if (!memchr(name, 0, PM_DSC_LAYOUT_MAX))
        return REFUSE(TXN_E_CORRUPT, "object pool descriptor: layout name not terminated");
    if (layout && strcmp(name, layout))
        return REFUSE(TXN_E_LAYOUT, "layout '%.63s', not '%s'", name, layout);
    size_t need = heap_size ? heap_off + heap_size : PMEMOBJ_MIN_POOL;
    if (f->file_size < need)
        return REFUSE(TXN_E_TRUNC, "%zu bytes of a pool of %zu", f->file_size, need);
    return 0;
}

static int read_prefix(const char *file, const char *layout, struct prefix *f)
{
    int fd, rc = pool_lock_file(file, O_RDONLY, &fd);
    if (rc)
        return rc;
    struct stat st;
    if (fstat(fd, &st))
        rc = pool_file_error(file, errno, 0);
    if (!rc) {
        f->file_size = (size_t)st.st_size;
        f->n = f->file_size < PM_PREFIX ? f->file_size : PM_PREFIX;
        rc = rw_all(fd, f->b, f->n, 0, 0) ? TXN_E_IO : check_prefix(f, layout);
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
    if (!now || pool_lock_file(file, O_RDWR, &fd)) {
        free(now);
        return;
    }
    if (!rw_all(fd, now, f->n, 0, 0) && memcmp(now, f->b, f->n))
        rw_all(fd, (void *)f->b, f->n, 0, 1);
    close(fd);
    free(now);
}

/* An errno of pmemobj_open once our own checks passed: a file error, or
 * damage PMDK found that we do not check. */
static int open_error(const char *file, int e)
{
    switch (e) {
    case EAGAIN:
        return TXN_E_BUSY;
    case ENOENT:
    case ENOMEM:
    case EACCES:
    case EPERM:
    case EIO:
    case EROFS:
    case EMFILE:
    case ENFILE:
        return pool_file_error(file, e, 0);
    default:
        return TXN_E_CORRUPT;
    }
}

/* ---- a bounded walk of PMDK's heap, before libpmemobj walks it
 *
 * libpmemobj steps through a zone by each chunk header's size in chunks,
 * and through a run's used blocks by the size in each block's header; a
 * size that damage set to 0 makes it step in place for ever (pmemobj_next
 * never returned: the hang of kvstore-check-pmdk, docs/pool-tool.md). The
 * same steps, each checked, refuse such a heap first. Offsets and rules of
 * libpmemobj 1.12's heap (layout major 6, heap major 1). */
#define HP_HDR 1024u /* heap header, then zone 0 */
#define HP_MAX_CHUNK 65528u
#define HP_CHUNK ((size_t)256 << 10)
#define HP_ZONE_META ((size_t)64 + 8u * HP_MAX_CHUNK) /* zone header, chunk headers */
#define HP_ZONE_MAX (HP_ZONE_META + HP_MAX_CHUNK * HP_CHUNK)
#define HP_ZONE_MAGIC 0xC3F0A2D2u
#define HP_RUN_HDR 16u /* block size, alignment */
#define HP_SIZE_MASK ((1ull << 48) - 1) /* a compact header's size bits */
enum { HP_TYPE_RUN = 4 };
enum { HP_COMPACT = 1, HP_NO_HEADER = 2, HP_ALIGNED = 4, HP_FLEX = 8 };

/* The used blocks of the run of `nchunks` chunks at `run`, stepped through
 * as libpmemobj does: per 64-bit word of its bitmap, from each set bit by
 * the block's size in units. Runs it lays out otherwise (fixed bitmaps of
 * old pools, aligned runs) are left to it; blocks without a header have
 * the unit's size, never 0. */
static int check_run(const unsigned char *run, uint32_t nchunks, uint16_t flags, size_t zone,
                     uint32_t chunk)
{
    if (!(flags & HP_FLEX) || (flags & (HP_ALIGNED | HP_NO_HEADER)))
        return 0;
    uint64_t unit = get64(run, 0);
    size_t content = nchunks * HP_CHUNK - HP_RUN_HDR;
    if (!unit || unit > content)
        return REFUSE(TXN_E_CORRUPT, "PMDK's heap: zone %zu, chunk %u: a run of %llu-byte "
                      "blocks", zone, chunk, (unsigned long long)unit);
    /* the bitmap: its words rounded so that the blocks start on a line */
    size_t nbits = content / unit, words = (nbits + 63) / 64;
    words = (words + HP_RUN_HDR / 8 + 7) / 8 * 8 - HP_RUN_HDR / 8;
    nbits = (content - words * 8) / unit;
    const unsigned char *data = run + HP_RUN_HDR + words * 8;
    for (size_t w = 0; w * 64 < nbits; w++) {
        uint64_t bits = get64(run, HP_RUN_HDR + w * 8);
        for (uint64_t b = 0; b < 64 && w * 64 + b < nbits;) {
            if (!(bits >> b & 1)) {
                b++;
                continue;
            }
            const unsigned char *h = data + (w * 64 + b) * unit;
            uint64_t size = flags & HP_COMPACT ? get64(h, 0) & HP_SIZE_MASK : get64(h, 8);
            if (!size)
                return REFUSE(TXN_E_CORRUPT, "PMDK's heap: zone %zu, chunk %u: block %llu of "
                              "its run has size 0", zone, chunk,
                              (unsigned long long)(w * 64 + b));
            b += (size - 1) / unit + 1;
        }
    }
    return 0;
}

/* The heap of the mapped pool `b` (size bytes): each zone's chunks by
 * their sizes, each run's used blocks. */
static int check_heap(const unsigned char *b, size_t size)
{
    uint64_t off = get64(b, PM_DSC + PM_DSC_HEAP_OFF), len = get64(b, PM_HEAP_SIZE);
    if (!len && off < size)
        len = size - off; /* pools of old versions do not record it */
    if (off > size || len > size - off)
        return REFUSE(TXN_E_CORRUPT, "object pool descriptor: heap at %llu of %llu bytes",
                      (unsigned long long)off, (unsigned long long)len);
    const unsigned char *heap = b + off;
    for (size_t z = 0; HP_HDR + z * HP_ZONE_MAX + HP_ZONE_META + HP_CHUNK <= len; z++) {
        const unsigned char *zone = heap + HP_HDR + z * HP_ZONE_MAX;
        uint32_t magic = get32(zone, 0), n = get32(zone, 4);
        size_t room = (len - HP_HDR - z * HP_ZONE_MAX - HP_ZONE_META) / HP_CHUNK;
        if (!magic) /* a zone not in use yet: libpmemobj skips it too */
            continue;
        if (magic != HP_ZONE_MAGIC || n > HP_MAX_CHUNK || n > room)
            return REFUSE(TXN_E_CORRUPT, "PMDK's heap: zone %zu header (magic %#x, %u chunks)",
                          z, magic, n);
        for (uint32_t c = 0; c < n;) {
            const unsigned char *ch = zone + 64 + 8 * (size_t)c;
            uint16_t type, flags;
            memcpy(&type, ch, 2);
            memcpy(&flags, ch + 2, 2);
            uint32_t span = get32(ch, 4);
            if (!span || span > n - c)
                return REFUSE(TXN_E_CORRUPT, "PMDK's heap: zone %zu, chunk %u: %u chunks long",
                              z, c, span);
            int rc = type == HP_TYPE_RUN
                       ? check_run(zone + HP_ZONE_META + c * HP_CHUNK, span, flags, z, c)
                       : 0;
            if (rc)
                return rc;
            c += span;
        }
    }
    return 0;
}

/* ---- pools */

/* Walks PMDK's heap: every object is live, except the internal ones. */
static void scan_objects(txn_pool *p)
{
    struct pmdk_pool *d = pmdk_of(p);
    for (PMEMoid o = pmemobj_first(d->pop); !OID_IS_NULL(o); o = pmemobj_next(o)) {
        uint64_t type = pmemobj_type_num(o);
        if (type == TYPE_META) {
            d->meta_obj = o.off;
        } else if (type == TYPE_RESERVE) {
            d->reserve_off = o.off;
            d->reserve_size = pmemobj_alloc_usable_size(o);
        } else if (o.off % GRAIN == 0 && o.off < p->size) {
            if (type == TYPE_LAYOUT)
                d->meta_off = o.off; /* a pool made before seal */
            st_move(p, o.off, ST_FREE, ST_LIVE);
        }
    }
}

/* The root, the meta object and the threads that struct meta records;
 * a pool of an earlier version has PMDK's root object as its root, and
 * one made elsewhere (no struct meta) gets one now. */
static int read_meta(txn_pool *p)
{
    struct pmdk_pool *d = pmdk_of(p);
    p->max_ctx = DEF_THREADS;
    const struct meta *m = NULL;
    if (d->meta_obj) {
        PMEMoid o = oid_of(p, d->meta_obj);
        if (pmemobj_alloc_usable_size(o) < sizeof *m)
            return REFUSE(TXN_E_CORRUPT, "the engine's meta object is too small");
        m = pmemobj_direct(o);
        if (m->magic == 0)
            return REFUSE(TXN_E_CORRUPT, "its creation did not complete (the engine's meta "
                          "object is not sealed)");
        if (m->magic != META_SEALED && m->magic != META_V1)
            return REFUSE(TXN_E_CORRUPT, "the engine's meta object: unknown magic %#llx",
                          (unsigned long long)m->magic);
        if (m->threads == 0 || m->threads > TXN_MAX_THREADS)
            return REFUSE(TXN_E_CORRUPT, "the engine's meta object: %u threads", m->threads);
        p->max_ctx = m->threads;
    } else if (OID_IS_NULL(pmemobj_first(d->pop)) && !pmemobj_root_size(d->pop)) {
        /* nothing at all: not a pool made elsewhere (which has a root or
         * objects) but one whose creation stopped inside pmemobj_create or
         * before the engine's first object */
        return REFUSE(TXN_E_CORRUPT, "its creation did not complete (a libpmemobj pool "
                      "with no object)");
    }
    if (m && m->magic == META_SEALED) {
        if (m->root_off % GRAIN || m->root_off >= p->size || st_get(p, m->root_off) != ST_LIVE ||
            m->meta_off % GRAIN || m->meta_off >= p->size || st_get(p, m->meta_off) != ST_LIVE ||
            m->root_size > pmemobj_alloc_usable_size(oid_of(p, m->root_off)))
            return REFUSE(TXN_E_CORRUPT, "the engine's meta object names no root or meta "
                          "object of the pool");
        d->root_off = m->root_off;
        d->root_size = m->root_size;
        d->meta_off = m->meta_off;
        return 0;
    }
    PMEMoid root = pmemobj_root(d->pop, 0);
    if (OID_IS_NULL(root))
        root = pmemobj_root(d->pop, DEF_ROOT);
    if (OID_IS_NULL(root))
        return TXN_E_NOSPACE;
    d->uuid_lo = root.pool_uuid_lo;
    d->root_off = root.off;
    d->root_size = pmemobj_root_size(d->pop);
    return 0;
}

static void pool_free(txn_pool *p)
{
    struct pmdk_pool *d = pmdk_of(p);
    if (!d)
        return;
    free(d->state);
    free(d);
    p->eng = NULL;
}

/* The volatile side of an open PMDK pool: the object map, and (but for a
 * new pool, whose root comes at seal) the root. */
static int pool_start(txn_pool *p, PMEMobjpool *pop, size_t size, unsigned new_threads)
{
    struct pmdk_pool *d = calloc(1, sizeof *d);
    if (!d)
        return TXN_E_NOMEM;
    p->eng = d;
    d->pop = pop;
    p->base = (char *)pop;
    p->size = size;
    p->max_size = size; /* libpmemobj's pools do not grow */
    size_t words = (size / GRAIN + 31) / 32;
    int rc = check_heap((const unsigned char *)pop, size);
    if (!rc) /* read_meta's root sets it when there is no object */
        d->uuid_lo = pmemobj_first(pop).pool_uuid_lo;
    if (!rc && !(d->state = calloc(words, sizeof *d->state)))
        rc = TXN_E_NOMEM;
    if (!rc) {
        scan_objects(p);
        p->max_ctx = new_threads;
        if (!new_threads)
            rc = read_meta(p);
    }
    if (rc)
        pool_free(p);
    return rc;
}

static int meta_init(PMEMobjpool *pop, void *ptr, void *arg)
{
    struct meta *m = ptr;
    memset(m, 0, sizeof *m); /* magic 0: not sealed yet */
    m->threads = *(const unsigned *)arg;
    pmemobj_persist(pop, m, sizeof *m);
    return 0;
}

/* The smallest pool of this engine: libpmemobj's own minimum (8 MiB)
 * serves none of the engine's objects once its reserve is made, and each
 * size class in use takes a run of its own (docs/pool-tool.md has the
 * measurements: 9 MiB for the first 256-byte object, 15 MiB for one object
 * of each of 8 sizes from 16 bytes to 256 KiB). */
#define MIN_POOL ((size_t)16 << 20)
_Static_assert(MIN_POOL >= PMEMOBJ_MIN_POOL, "below libpmemobj's minimum");

size_t eng_pool_min_size(const struct pool_params *o)
{
    (void)o; /* PMDK's lanes are fixed; its logs grow in the heap */
    return MIN_POOL;
}

int eng_pool_create(txn_pool *p, const char *file, const char *layout,
                    const struct pool_params *o)
{
    /* libpmemobj's pools do not grow: one given a max_size is made at it
     * at once; without one (0 here), at its size, as before growth was
     * the default of pmtx's format: a file of TXN_POOL_MAX is no default */
    size_t size = o->max_size > o->size ? o->max_size : o->size, min = eng_pool_min_size(o);
    if (size < min)
        return REFUSE(TXN_E_INVAL, "pool size %zu: at least %zu bytes for the pmdk engine", size,
                      min);
    if (o->root_size >= size || o->root_size > PMEMOBJ_MAX_ALLOC_SIZE)
        return TXN_E_NOSPACE;
    /* o->log_size has no meaning here: PMDK's logs grow by themselves */
    struct pool_birth *b = malloc(sizeof *b);
    int rc = b ? pool_birth_begin(file, b) : TXN_E_NOMEM;
    if (rc) {
        free(b);
        return rc;
    }
    /* PMDK creates the temporary itself (O_EXCL), under a lock of its own:
     * one taken over is removed while ours holds. A file it makes it knows
     * to be zero; in one it is given it clears the heap (32 MiB: 6-10 ms
     * more a creation, measured). Another creation that makes the name in
     * between makes PMDK's fail (TXN_E_BUSY). */
    unlink(b->tmp);
    close(b->fd);
    b->fd = -1;
    PMEMobjpool *pop = pmemobj_create(b->tmp, layout, size, 0644);
    if (!pop) {
        rc = errno == EEXIST || errno == EWOULDBLOCK
               ? REFUSE(TXN_E_BUSY, "%s: being created by another process", file)
           : errno == EINVAL ? REFUSE(TXN_E_INVAL, "libpmemobj: %s", pmemobj_errormsg())
                             : pool_file_error(file, errno, size);
        pool_birth_end(b, 0);
        free(b);
        return rc;
    }
    /* an fd of the file PMDK made, for the sync before its rename: one
     * that PMDK holds locked, else the name is another's by now */
    b->fd = open(b->tmp, O_RDONLY | O_CLOEXEC);
    if (b->fd < 0 || !flock(b->fd, LOCK_EX | LOCK_NB) || errno != EWOULDBLOCK)
        rc = REFUSE(TXN_E_BUSY, "%s: being created by another process", file);
    PMEMoid m;
    unsigned threads = o->threads;
    if (!rc && (pmemobj_xalloc(pop, &m, sizeof(struct meta), TYPE_META, 0, meta_init, &threads) ||
                pmemobj_zalloc(pop, &m, RESERVE_SIZE, TYPE_RESERVE)))
        rc = REFUSE(TXN_E_NOSPACE, "pool size %zu: libpmemobj has no room for the engine's "
                    "own objects", size);
    if (!rc)
        rc = pool_start(p, pop, size, o->threads);
    if (rc) { /* removed while PMDK's lock keeps it ours */
        pool_birth_end(b, rc != TXN_E_BUSY); /* BUSY: not the file PMDK made */
        if (b->fd >= 0)
            close(b->fd);
        free(b);
        pmemobj_close(pop);
        return rc;
    }
    pmdk_of(p)->birth = b; /* named at seal */
    return 0;
}

/* The new pool named (or, given up, its temporary removed): its birth
 * record released. */
static int birth_end(struct pmdk_pool *d, int publish)
{
    struct pool_birth *b = d->birth;
    int rc = publish ? pool_birth_publish(b) : 0;
    if (rc && publish)
        return rc; /* the close to come removes it */
    pool_birth_end(b, !publish);
    close(b->fd);
    free(b);
    d->birth = NULL;
    return 0;
}

int eng_pool_seal(txn_pool *p, txn_obj *root, size_t root_size, txn_obj *meta)
{
    struct pmdk_pool *d = pmdk_of(p);
    uint64_t root_off, meta_off;
    if (!d->meta_obj || !offset_of(p, root, &root_off) || !offset_of(p, meta, &meta_off))
        return TXN_E_STATE;
    struct meta *m = pmemobj_direct(oid_of(p, d->meta_obj));
    m->root_off = root_off;
    m->root_size = root_size;
    m->meta_off = meta_off;
    pmemobj_persist(d->pop, m, sizeof *m);
    m->magic = META_SEALED; /* one 8-byte store: the pool is valid */
    pmemobj_persist(d->pop, &m->magic, sizeof m->magic);
    d->root_off = root_off;
    d->root_size = root_size;
    d->meta_off = meta_off;
    return d->birth ? birth_end(d, 1) : 0;
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

/* PMDK's recovery writes anywhere in the file before the heap can be
 * checked, and a damaged heap is only refused after it (invariant 2). So
 * an open for writing first recovers and checks the heap on a private
 * view, writing nothing when it refuses. */
static int preflight(const char *file, const char *layout, size_t size)
{
    pmdk_private_open = 1;
    PMEMobjpool *pop = open_pop(file, layout, 1);
    int rc = pop ? check_heap((const unsigned char *)pop, size) : open_error(file, errno);
    if (pop)
        pmemobj_close(pop);
    pmdk_private_open = 0;
    return rc;
}

int eng_pool_open(txn_pool *p, const char *file, const char *layout, int view)
{
    struct prefix *f = malloc(sizeof *f);
    if (!f)
        return TXN_E_NOMEM;
    int rc = read_prefix(file, layout, f);
    if (rc)
        goto done;
    if (!view && (rc = preflight(file, layout, f->file_size)))
        goto done;
    PMEMobjpool *pop = open_pop(file, layout, view);
    if (!pop) {
        rc = open_error(file, errno);
        if (rc != TXN_E_BUSY && !view) /* a view wrote nothing to put back */
            restore_prefix(file, f);
        goto done;
    }
    if ((rc = pool_start(p, pop, f->file_size, 0))) {
        pmemobj_close(pop); /* refused by struct meta: PMDK's writes undone (2.) */
        if (!view)
            restore_prefix(file, f);
    }
done:
    free(f);
    return rc;
}

int eng_pool_trim(struct txn *tx, size_t *returned)
{
    (void)tx;
    *returned = 0;
    return TXN_E_NOTSUP; /* libpmemobj's pools keep their size */
}

void eng_pool_close(txn_pool *p)
{
    PMEMobjpool *pop = pmdk_of(p)->pop;
    if (pmdk_of(p)->birth) /* never sealed: removed while PMDK's lock holds */
        birth_end(pmdk_of(p), 0);
    pool_free(p);
    pmemobj_close(pop);
}

txn_obj *eng_pool_root(txn_pool *p)
{
    return handle_of(pmdk_of(p)->root_off);
}

txn_obj *eng_pool_meta(txn_pool *p)
{
    uint64_t off = pmdk_of(p)->meta_off;
    return off ? handle_of(off) : NULL;
}

/* ---- for the crash simulator (pmdk.h) */

void pmdk_region(txn_pool *p, void **base, size_t *size)
{
    *base = p->base;
    *size = p->size;
}

void pmdk_foreach_object(txn_pool *p, void (*fn)(txn_obj *o, enum pmdk_kind k, void *arg),
                         void *arg)
{
    struct pmdk_pool *d = pmdk_of(p);
    for (PMEMoid o = pmemobj_first(d->pop); !OID_IS_NULL(o); o = pmemobj_next(o)) {
        uint64_t type = pmemobj_type_num(o);
        enum pmdk_kind k = o.off == d->root_off ? PMDK_ROOT
                         : type == TYPE_META    ? PMDK_META
                         : type == TYPE_RESERVE ? PMDK_RESERVE
                                                : PMDK_USER;
        fn(handle_of(o.off), k, arg);
    }
}

/* ---- inspection (txn_pool_inspect) */

/* Objects by size class: powers of two, PMDK's classes being its own. */
static void add_object(txn_pool_info *info, uint64_t size)
{
    uint64_t c = 16;
    while (c < size)
        c *= 2;
    unsigned i = 0;
    while (i < info->nclasses && info->classes[i].size != c)
        i++;
    if (i == info->nclasses && info->nclasses < TXN_INFO_CLASSES)
        info->classes[info->nclasses++].size = c;
    if (i < TXN_INFO_CLASSES)
        info->classes[i].count++;
    info->objects++;
    info->heap_used += size;
}

int eng_pool_inspect(const char *file, txn_pool_info *info)
{
    struct prefix *f = calloc(1, sizeof *f);
    if (!f)
        return TXN_E_NOMEM;
    int rc = read_prefix(file, NULL, f);
    /* a pmtx pool's header names its engine (common.h) */
    int pmtx = f->n >= POOL_HDR_SIZE && get64(f->b, 0) == POOL_MAGIC;
    snprintf(info->format, sizeof info->format, "libpmemobj");
    snprintf(info->engine, sizeof info->engine, "%.*s", (int)POOL_ENGINE_MAX - 1,
             pmtx ? (const char *)f->b + POOL_ENGINE_OFF : eng_name);
    info->size = f->file_size;
    info->max_size = f->file_size; /* libpmemobj's pools do not grow */
    const unsigned char *d = f->b + PM_DSC;
    uint64_t heap_off = 0;
    if (!rc) {
        info->format_version = get32(f->b, PM_HDR_MAJOR);
        snprintf(info->layout, sizeof info->layout, "%s", (const char *)d + PM_DSC_LAYOUT);
        heap_off = get64(d, PM_DSC_HEAP_OFF);
        info->heap_size = get64(f->b, PM_HEAP_SIZE) ? get64(f->b, PM_HEAP_SIZE)
                                                     : f->file_size - heap_off;
    }
    txn_pool p = {0};
    if (!rc)
        rc = eng_pool_open(&p, file, info->layout, 1);
    free(f);
    if (rc)
        return rc;
    struct pmdk_pool *pp = pmdk_of(&p);
    for (PMEMoid o = pmemobj_first(pp->pop); !OID_IS_NULL(o); o = pmemobj_next(o))
        if (pmemobj_type_num(o) != TYPE_META && pmemobj_type_num(o) != TYPE_RESERVE)
            add_object(info, pmemobj_alloc_usable_size(o));
    if (pp->root_off == pmemobj_root(pp->pop, 0).off) /* not iterated */
        add_object(info, pp->root_size);
    info->heap_free = info->heap_size > info->heap_used ? info->heap_size - info->heap_used : 0;
    info->slots = p.max_ctx;
    /* what PMDK's recovery changed in the view's heap */
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    rc = fd < 0 ? TXN_E_IO : pool_bytes_differ(fd, p.base, heap_off, heap_off + info->heap_size);
    if (fd >= 0)
        close(fd);
    if (rc == 1)
        rc = REFUSE(TXN_INSPECT_RECOVER, "the next open's recovery changes PMDK's heap");
    eng_pool_close(&p);
    return rc;
}
