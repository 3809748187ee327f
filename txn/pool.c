/* pool.c - pool files: create, validate, map, recover, close. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"
#include "layout_rec.h"
#include "persist.h"
#include "pool.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

int api_register_pool(txn_pool *p);
void api_unregister_pool(txn_pool *p);
struct txn *api_ctx(txn_pool *p, int *err);

/* Where pools are mapped: above the sanitizers' shadow and heap ranges and
 * below the area where the kernel places mmaps and libraries (its base is
 * randomised within the 1 TiB under the stack). */
#define MAP_LO 0x7e8000000000ull
#define MAP_HI 0x7ef000000000ull
#define MAP_ALIGN (1ull << 30)

#define DEF_SIZE (64u << 20)
#define MIN_SIZE (2u << 20)
#define DEF_THREADS 64u
#define MAX_THREADS 1024u
#define DEF_LOG (64u << 10)
#define MAX_LOG (16u << 20)
#define DEF_ROOT 64u

static uint64_t hdr_csum(const struct pool_hdr *h)
{
    return csum64(POOL_MAGIC, h, offsetof(struct pool_hdr, checksum));
}

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* Map the file at `base` (MAP_SHARED, or a private copy-on-write view:
 * MAP_PRIVATE | MAP_NORESERVE); TXN_E_BUSY when something is there
 * already. */
static int map_at(int fd, uint64_t base, size_t size, int share, char **out)
{
    void *a = mmap((void *)(uintptr_t)base, size, PROT_READ | PROT_WRITE,
                   share | MAP_FIXED_NOREPLACE, fd, 0);
    if (a == MAP_FAILED)
        return errno == EEXIST ? TXN_E_BUSY : TXN_E_IO;
    if ((uint64_t)(uintptr_t)a != base) { /* kernel without NOREPLACE */
        munmap(a, size);
        return TXN_E_BUSY;
    }
    *out = a;
    return 0;
}

static int map_anywhere(int fd, size_t size, char **out)
{
    uint64_t span = MAP_HI - MAP_LO;
    if (size > span / 2)
        return TXN_E_INVAL;
    for (int tries = 0; tries < 64; tries++) {
        uint64_t r;
        if (getrandom(&r, sizeof r, 0) != sizeof r)
            r = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull + (uint64_t)tries;
        uint64_t slots = (span - align_up(size, MAP_ALIGN)) / MAP_ALIGN;
        uint64_t base = MAP_LO + (r % slots) * MAP_ALIGN;
        int rc = map_at(fd, base, size, MAP_SHARED, out);
        if (rc != TXN_E_BUSY)
            return rc;
    }
    return TXN_E_BUSY;
}

static txn_pool *pool_new(int fd, char *base, size_t size)
{
    txn_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->fd = fd;
    p->base = base;
    p->size = size;
    p->hdr = (struct pool_hdr *)base;
    pthread_mutex_init(&p->ctx_lock, NULL);
    return p;
}

static void pool_free(txn_pool *p)
{
    if (p->gen)
        api_unregister_pool(p);
    alloc_close(p);
    free(p->slot_used);
    munmap(p->base, p->size);
    close(p->fd);
    pthread_mutex_destroy(&p->ctx_lock);
    free(p);
}

/* Volatile set-up shared by create and open, after recovery. */
static int pool_start(txn_pool *p, const struct vec *segs)
{
    p->slot_used = calloc(p->hdr->nslots, 1);
    if (!p->slot_used)
        return TXN_E_NOMEM;
    int rc = alloc_open(p, segs);
    return rc ? rc : api_register_pool(p);
}

static int open_file(const char *path, int flags, int *fd)
{
    *fd = open(path, flags | O_CLOEXEC, 0644);
    if (*fd < 0)
        return errno == ENOENT ? TXN_E_NOENT : errno == EEXIST ? TXN_E_EXIST : TXN_E_IO;
    if (flock(*fd, LOCK_EX | LOCK_NB)) {
        int busy = errno == EWOULDBLOCK;
        close(*fd);
        return busy ? TXN_E_BUSY : TXN_E_IO;
    }
    return 0;
}

/* Lay out a new pool's header (all but root and checksum). */
static int plan(struct pool_hdr *h, const char *layout, const txn_pool_opts *o)
{
    size_t size = o && o->size ? o->size : DEF_SIZE;
    size_t threads = o && o->threads ? o->threads : DEF_THREADS;
    size_t log = o && o->log_size ? o->log_size : DEF_LOG;
    if (size < MIN_SIZE || threads > MAX_THREADS || log < DEF_LOG || log > MAX_LOG)
        return TXN_E_INVAL;
    memset(h, 0, sizeof *h);
    h->magic = POOL_MAGIC;
    h->format = POOL_FORMAT;
    h->hdr_size = sizeof *h;
    strcpy(h->layout, layout);
    snprintf(h->engine, sizeof h->engine, "%s", eng_name);
    h->size = size;
    h->nslots = threads;
    h->slot_size = align_up(log + 2 * sizeof(struct slot_hdr), PM_LINE);
    h->slots_off = POOL_HDR_SIZE;
    h->ctab_off = h->slots_off + h->nslots * h->slot_size;
    size_t n = (size - h->ctab_off) / (CHUNK_SIZE + 8);
    while (n && align_up(h->ctab_off + n * 8, CHUNK_SIZE) + n * (size_t)CHUNK_SIZE > size)
        n--;
    if (n < 4)
        return TXN_E_INVAL;
    h->nchunks = n;
    h->heap_off = align_up(h->ctab_off + n * 8, CHUNK_SIZE);
    return 0;
}

/* The root and the layout record, in one transaction. */
static int make_root(txn_pool *p, size_t root_size)
{
    int rc = 0;
    txn *tx;
    txn_obj *root, *rec;
    if ((rc = txn_begin(p, &tx)))
        return rc;
    if ((rc = txn_alloc(tx, root_size, &root)) ||
        (rc = txn_alloc(tx, LAYOUT_REC_SIZE, &rec))) {
        txn_abort(tx);
        return rc;
    }
    if ((rc = txn_commit(tx)))
        return rc;
    pm_store64(&p->hdr->root, (uint64_t)(uintptr_t)root);
    pm_store64(&p->hdr->root_size, root_size);
    pm_store64(&p->hdr->layout_rec, (uint64_t)(uintptr_t)rec);
    return 0;
}

int txn_pool_create(const char *path, const char *layout,
                    const txn_pool_opts *opts, txn_pool **out)
{
    char full[PATH_MAX];
    struct pool_hdr h;
    if (!path || !layout || !out || !*layout || strlen(layout) >= LAYOUT_MAX)
        return TXN_E_INVAL;
    int rc = txn_pool_path(path, full, sizeof full);
    if (rc || (rc = plan(&h, layout, opts)))
        return rc;
    int fd;
    if ((rc = open_file(full, O_RDWR | O_CREAT | O_EXCL, &fd)))
        return rc;
    char *base = NULL;
    if ((rc = posix_fallocate(fd, 0, (off_t)h.size))) {
        rc = rc == ENOSPC ? TXN_E_NOSPACE : TXN_E_IO;
        goto fail_file;
    }
    if ((rc = map_anywhere(fd, h.size, &base)))
        goto fail_file;
    h.base = (uint64_t)(uintptr_t)base;
    getrandom(&h.uuid, sizeof h.uuid, 0);
    txn_pool *p = pool_new(fd, base, h.size);
    if (!p) {
        munmap(base, h.size);
        rc = TXN_E_NOMEM;
        goto fail_file;
    }
    /* the file is fresh: slots and chunk table are zero already */
    pm_memcpy(base, &h, sizeof h);
    alloc_format(p);
    struct vec none;
    vec_init(&none, sizeof(uint64_t));
    if ((rc = pool_start(p, &none)) ||
        (rc = make_root(p, opts && opts->root_size ? opts->root_size : DEF_ROOT)))
        goto fail_pool;
    pm_store64(&p->hdr->checksum, hdr_csum(p->hdr));
    pm_persist(p->hdr, sizeof *p->hdr);
    *out = p;
    return 0;
fail_pool:
    pool_free(p);
    unlink(full);
    return rc;
fail_file:
    close(fd);
    unlink(full);
    return rc;
}

/* Everything about the header that open checks, without writing. */
static int check_hdr(const struct pool_hdr *h, size_t file_size, const char *layout)
{
    if (file_size >= sizeof PMDK_POOL_SIG && !memcmp(h, PMDK_POOL_SIG, sizeof PMDK_POOL_SIG))
        return TXN_E_ENGINE; /* a pool of the pmdk engine */
    if (file_size < sizeof h->magic || h->magic != POOL_MAGIC)
        return TXN_E_NOTPOOL;
    if (file_size < sizeof *h)
        return TXN_E_TRUNC;
    if (h->format != POOL_FORMAT || h->hdr_size != sizeof *h)
        return TXN_E_VERSION;
    if (h->checksum != hdr_csum(h))
        return TXN_E_CORRUPT;
    if (h->size < MIN_SIZE || h->base % MAP_ALIGN || h->base < MAP_LO ||
        h->base + h->size > MAP_HI || h->nslots == 0 || h->nslots > MAX_THREADS ||
        h->slot_size < DEF_LOG || h->slots_off != POOL_HDR_SIZE ||
        h->ctab_off != h->slots_off + h->nslots * h->slot_size ||
        h->heap_off % CHUNK_SIZE || h->heap_off < h->ctab_off + h->nchunks * 8 ||
        h->heap_off + h->nchunks * CHUNK_SIZE > h->size ||
        h->root < h->base + h->heap_off || h->root >= h->base + h->size ||
        h->layout_rec < h->base + h->heap_off || h->layout_rec >= h->base + h->size ||
        memchr(h->layout, 0, sizeof h->layout) == NULL)
        return TXN_E_CORRUPT;
    if (file_size < h->size)
        return TXN_E_TRUNC;
    if (strcmp(h->layout, layout))
        return TXN_E_LAYOUT;
    if (strncmp(h->engine, eng_name, sizeof h->engine))
        return TXN_E_ENGINE;
    return 0;
}

/* One slot's scan: its records (recs), the log segments it finds. */
struct scan_part {
    txn_pool *p;
    size_t slot;
    struct vec *recs;
    struct vec segs;
    int rc;
};

static void scan_slot(void *arg)
{
    struct scan_part *j = arg;
    struct slot_hdr *slot = pool_slot(j->p, j->slot);
    int rc = log_chain(j->p, slot, &j->segs);
    if (!rc)
        rc = log_scan(j->p, slot, j->recs);
    for (size_t i = 0; !rc && i < j->recs->n; i++)
        rc = eng_rec_valid(j->p, *(struct log_rec **)vec_at(j->recs, i));
    j->rc = rc;
}

#define SCAN_THREADS 4

/* Scan every slot; validate all records before anything is written. The
 * slots' logs are independent: with more than one core, threads scan them
 * side by side (a crash under a write-heavy load leaves megabytes of
 * records in the logs of several slots, and checking their checksums is
 * most of what recovery reads). */
static int scan_logs(txn_pool *p, struct vec *recs, struct vec *segs)
{
    size_t ns = p->hdr->nslots;
    struct scan_part *j = calloc(ns, sizeof *j);
    if (!j)
        return TXN_E_NOMEM;
    for (size_t s = 0; s < ns; s++) {
        j[s] = (struct scan_part){p, s, &recs[s], {0}, 0};
        vec_init(&j[s].segs, sizeof(uint64_t));
    }
    par_run(scan_slot, j, sizeof j[0], ns, par_threads(ns, 1, SCAN_THREADS));
    int rc = 0;
    for (size_t s = 0; s < ns; s++) {
        if (!rc)
            rc = j[s].rc;
        if (!rc && vec_append(segs, j[s].segs.a, j[s].segs.n))
            rc = TXN_E_NOMEM;
        vec_free(&j[s].segs);
    }
    free(j);
    return rc;
}

static int recover(txn_pool *p, struct vec *recs)
{
    int any = 0;
    for (size_t s = 0; s < p->hdr->nslots; s++) {
        if (!recs[s].n)
            continue;
        int rc = eng_recover(p, pool_slot(p, s), (struct log_rec **)recs[s].a, recs[s].n);
        if (rc)
            return rc;
        any = 1;
    }
    if (!any)
        return 0;
    pm_barrier(); /* recovered data durable before the logs go */
    struct log l;
    for (size_t s = 0; s < p->hdr->nslots; s++)
        if (recs[s].n) {
            /* The state word says the transaction is settled: a torn first
             * record of the slot's next transaction can bring an
             * invalidated record back to life, and it must then be seen
             * as settled, never rolled back over newer data. */
            struct slot_hdr *slot = pool_slot(p, s);
            uint64_t v = (*(struct log_rec **)vec_at(&recs[s], 0))->version;
            pm_store64(&slot->state, slot_state(v, SLOT_IDLE));
            pm_flush(&slot->state, sizeof slot->state);
            log_attach(&l, p, slot);
            log_invalidate(&l);
        }
    pm_barrier();
    return 0;
}

/* txn_pool_open, or with `view` pool_open_view: the same steps on a
 * private mapping of a file opened read-only, so that recovery, the boot
 * count and whatever runs later land in this process's copy of the pages
 * and never in the file. */
static int pool_open(const char *path, const char *layout, int view, txn_pool **out)
{
    char full[PATH_MAX];
    if (!path || !layout || !out)
        return TXN_E_INVAL;
    int rc = txn_pool_path(path, full, sizeof full), fd;
    if (rc || (rc = open_file(full, view ? O_RDONLY : O_RDWR, &fd)))
        return rc;
    struct stat st;
    struct pool_hdr h;
    memset(&h, 0, sizeof h);
    if (fstat(fd, &st) || pread(fd, &h, sizeof h, 0) < 0) {
        close(fd);
        return TXN_E_IO;
    }
    if ((rc = check_hdr(&h, (size_t)st.st_size, layout))) {
        close(fd);
        return rc;
    }
    char *base;
    if ((rc = map_at(fd, h.base, h.size, view ? MAP_PRIVATE | MAP_NORESERVE : MAP_SHARED,
                     &base))) {
        close(fd);
        return rc;
    }
    txn_pool *p = pool_new(fd, base, h.size);
    if (!p) {
        munmap(base, h.size);
        close(fd);
        return TXN_E_NOMEM;
    }
    struct vec segs, *recs = calloc(h.nslots, sizeof *recs);
    vec_init(&segs, sizeof(uint64_t));
    if (!recs) {
        rc = TXN_E_NOMEM;
        goto done;
    }
    for (size_t s = 0; s < h.nslots; s++)
        vec_init(&recs[s], sizeof(struct log_rec *));
    if ((rc = alloc_check(p)) || (rc = scan_logs(p, recs, &segs)))
        goto done;
    p->open_recs = recs;
    rc = recover(p, recs);
    p->open_recs = NULL;
    if (rc || (rc = pool_start(p, &segs)))
        goto done;
    pm_store64(&p->hdr->boot, p->hdr->boot + 1);
    pm_persist(&p->hdr->boot, sizeof p->hdr->boot);
    *out = p;
done:
    for (size_t s = 0; recs && s < h.nslots; s++)
        vec_free(&recs[s]);
    free(recs);
    vec_free(&segs);
    if (rc)
        pool_free(p);
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
    txn_sync(p);
    pool_free(p);
}

txn_obj *txn_root(txn_pool *p)
{
    return p ? (txn_obj *)(uintptr_t)p->hdr->root : NULL;
}

txn_obj *pool_layout_rec(txn_pool *p)
{
    txn_obj *o = (txn_obj *)(uintptr_t)p->hdr->layout_rec;
    return eng_obj_size(p, o) >= LAYOUT_REC_SIZE ? o : NULL;
}
