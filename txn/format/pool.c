/* pool.c - pmtx's pool format (engine.h's eng_pool_* layer): pool files
 * created, validated, mapped, recovered and closed. */
#define _GNU_SOURCE
#include <assert.h>
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
#include "format.h"
#include "persist.h"

/* The front end puts a pool's struct fmt_pool right after its struct
 * txn_pool (api.c, POOL_FMT), which is aligned enough only if its size is
 * a multiple. */
_Static_assert(sizeof(struct txn_pool) % _Alignof(struct fmt_pool) == 0, "fmt_pool after txn_pool");
const size_t eng_pool_fmt_size = sizeof(struct fmt_pool);

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* Where pools are mapped: above the sanitizers' shadow and heap ranges and
 * below the area where the kernel places mmaps and libraries (its base is
 * randomised within the 1 TiB under the stack). */
#define MAP_LO 0x7e8000000000ull
#define MAP_HI 0x7ef000000000ull
#define MAP_ALIGN (1ull << 30)

#define MIN_SIZE (2u << 20)
#define MIN_LOG (64u << 10)
#define MAX_LOG (16u << 20)

static uint64_t hdr_csum(const struct pool_hdr *h)
{
    return csum64(POOL_MAGIC, h, offsetof(struct pool_hdr, checksum));
}

static size_t align_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* Addresses [at, at + len) reserved, inaccessible, no memory behind them;
 * TXN_E_BUSY when something is there already. */
static int reserve(char *at, size_t len)
{
    void *r = mmap(at, len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (r == MAP_FAILED)
        return errno == EEXIST ? TXN_E_BUSY : TXN_E_IO;
    if (r != at) { /* kernel without NOREPLACE */
        munmap(r, len);
        return TXN_E_BUSY;
    }
    return 0;
}

/* The addresses an open pool of `size` bytes that may grow to `max`
 * reserves: the MAP_ALIGN slots its bytes touch, not its whole maximum.
 * Bases are MAP_ALIGN aligned, so no other pool starts in them; a pool
 * holding 128 GiB of addresses for 4 MiB of data would keep any pool
 * whose base lies in that range from opening (docs/growth.md). A growth
 * reserves the slots after them (reserve_to). */
static size_t window(size_t size, size_t max)
{
    size_t w = align_up(size, MAP_ALIGN);
    return w < max ? w : max;
}

/* The file's first `size` bytes mapped over the start of a reservation
 * of `resv` bytes at r (MAP_SHARED, or a private copy-on-write view:
 * MAP_PRIVATE | MAP_NORESERVE); the rest stays reserved, inaccessible,
 * for the pool's growth. */
static int map_over(int fd, char *r, size_t size, size_t resv, int share, char **out)
{
    void *a = mmap(r, size, PROT_READ | PROT_WRITE, share | MAP_FIXED, fd, 0);
    if (a == MAP_FAILED) {
        munmap(r, resv);
        return TXN_E_IO;
    }
    *out = a;
    return 0;
}

/* Reserve [base, base + resv) and map the file over its start (map_over);
 * TXN_E_BUSY when something is there already. */
static int map_at(int fd, uint64_t base, size_t size, size_t resv, int share, char **out)
{
    char *r = (char *)(uintptr_t)base;
    int rc = reserve(r, resv);
    return rc ? rc : map_over(fd, r, size, resv, share, out);
}

/* A new pool's base, at random: first one where its whole maximum is free
 * in this process (no pool open here in the way of its growth), of which
 * it then keeps its window; failing that, where its window is. */
static int map_anywhere(int fd, size_t size, size_t max, char **out)
{
    uint64_t span = MAP_HI - MAP_LO;
    if (max > span / 2)
        return TXN_E_INVAL;
    size_t resv = window(size, max);
    for (int tries = 0; tries < 64; tries++) {
        uint64_t r;
        if (getrandom(&r, sizeof r, 0) != sizeof r)
            r = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull + (uint64_t)tries;
        uint64_t slots = (span - align_up(max, MAP_ALIGN)) / MAP_ALIGN;
        char *base = (char *)(uintptr_t)(MAP_LO + (r % slots) * MAP_ALIGN);
        int rc = reserve(base, tries < 32 ? max : resv);
        if (rc == TXN_E_BUSY)
            continue;
        if (rc)
            return rc;
        if (tries < 32 && max > resv) /* free: of it, the window is kept */
            munmap(base + resv, max - resv);
        return map_over(fd, base, size, resv, MAP_SHARED, out);
    }
    return TXN_E_BUSY;
}

/* The pool's reservation extended over its first `end` bytes, by whole
 * slots (window): 0, or TXN_E_BUSY when another pool's addresses are
 * there, which then ends this pool's growth while both are open. */
static int reserve_to(txn_pool *p, size_t end)
{
    struct fmt_pool *f = POOL_FMT(p);
    if (end <= f->reserved)
        return 0;
    size_t to = window(end, f->hdr->size);
    int rc = reserve(p->base + f->reserved, to - f->reserved);
    if (!rc)
        f->reserved = to;
    return rc;
}

/* Bytes of the file a pool of `chunks` heap chunks has. */
static size_t file_end(const struct pool_hdr *h, size_t chunks)
{
    return h->heap_off + chunks * (size_t)CHUNK_SIZE;
}

/* Space for chunk table entries [from, to) and heap chunks [from, to):
 * what a new pool or a growth writes; the table past them stays a hole. */
static int fallocate_chunks(int fd, const struct pool_hdr *h, size_t from, size_t to)
{
    int rc = posix_fallocate(fd, (off_t)(h->ctab_off + from * 8), (off_t)((to - from) * 8));
    return rc ? rc : posix_fallocate(fd, (off_t)file_end(h, from),
                                     (off_t)((to - from) * (size_t)CHUNK_SIZE));
}

size_t pool_grow(txn_pool *p, size_t want)
{
    struct fmt_pool *f = POOL_FMT(p);
    struct pool_hdr *h = f->hdr;
    size_t have = pool_heap_chunks(p), max = h->nchunks;
    if (h->format <= POOL_FORMAT_FIXED || f->view || have == max || want == 0)
        return 0;
    size_t add = have > want ? have : want; /* doubling: n allocations, O(n) growth */
    if (add > max - have)
        add = max - have; /* the last of it, even if less than wanted */
    if (reserve_to(p, file_end(h, have + add))) { /* another pool follows */
        if (want >= add || reserve_to(p, file_end(h, have + want)))
            return 0;
        add = want; /* what was asked still fits before it */
    }
    const uint64_t *t = (const uint64_t *)(p->base + h->ctab_off);
    for (size_t i = have; i < have + add; i++)
        if (t[i]) /* G1 broken: a damaged table; grow no further */
            return 0;
    /* the file's new length durable before the header says it (a crash
     * of the machine, not only of the process, must find it) */
    if (fallocate_chunks(f->fd, h, have, have + add) || fdatasync(f->fd))
        return 0; /* the filesystem is full: the pool stays as it was */
    char *at = p->base + file_end(h, have);
    if (mmap(at, add * (size_t)CHUNK_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
             f->fd, (off_t)file_end(h, have)) == MAP_FAILED)
        return 0;
    pm_store64(&h->heap_chunks, have + add); /* the commit point */
    pm_persist(&h->heap_chunks, sizeof h->heap_chunks);
    __atomic_store_n(&p->size, file_end(h, have + add), __ATOMIC_RELEASE);
    return add;
}

/* A pool of header h mapped at base, its first `end` bytes: what create
 * and open set up in `p`. */
static void mapped(txn_pool *p, int fd, int view, const struct pool_hdr *h, char *base,
                   size_t end, size_t resv)
{
    POOL_FMT(p)->fd = fd;
    POOL_FMT(p)->view = view;
    POOL_FMT(p)->reserved = resv;
    POOL_FMT(p)->hdr = (struct pool_hdr *)base;
    p->base = base;
    p->size = end;
    p->max_size = h->size;
    p->max_ctx = (unsigned)h->nslots;
}

struct punch {
    int fd;
    off_t at, len;
};

static int punch(void *arg)
{
    struct punch *h = arg;
    if (!fallocate(h->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, h->at, h->len))
        return 0;
    return errno == EOPNOTSUPP ? TXN_E_NOTSUP : TXN_E_IO;
}

int pool_fill(txn_pool *p, size_t ci, size_t n)
{
    struct fmt_pool *f = POOL_FMT(p);
    if (f->view) /* a private copy: its holes fill from memory */
        return 0;
    return posix_fallocate(f->fd, (off_t)file_end(f->hdr, ci), (off_t)(n * (size_t)CHUNK_SIZE))
               ? TXN_E_NOSPACE
               : 0;
}

int pool_discard(txn_pool *p, size_t ci, size_t n)
{
    struct fmt_pool *f = POOL_FMT(p);
    if (f->view)
        return TXN_E_NOTSUP;
    struct punch h = {f->fd, (off_t)file_end(f->hdr, ci), (off_t)(n * (size_t)CHUNK_SIZE)};
    return pm_discard(p->base + h.at, (size_t)h.len, punch, &h);
}

/* What create and open set up in `p`, undone (p->base NULL: nothing). */
static void pool_unmap(txn_pool *p)
{
    if (POOL_FMT(p)->birth) { /* a new pool never sealed: its temporary goes */
        pool_birth_end(POOL_FMT(p)->birth, 1);
        free(POOL_FMT(p)->birth);
        POOL_FMT(p)->birth = NULL;
    }
    alloc_close(p);
    if (p->base)
        munmap(p->base, POOL_FMT(p)->reserved);
    close(POOL_FMT(p)->fd);
    p->base = NULL;
}

static size_t slot_bytes(size_t log_size)
{
    return align_up(log_size + 2 * sizeof(struct slot_hdr), PM_LINE);
}

/* The header, the threads' log slots, and a heap of MIN_CHUNKS chunks with
 * their chunk table entries. */
size_t eng_pool_min_size(const struct pool_params *o)
{
    size_t ctab = POOL_HDR_SIZE + o->threads * slot_bytes(o->log_size);
    size_t min = align_up(ctab + MIN_CHUNKS * 8, CHUNK_SIZE) + MIN_CHUNKS * (size_t)CHUNK_SIZE;
    return min < MIN_SIZE ? MIN_SIZE : min;
}

/* Lay out a new pool's header (all but root and checksum). */
static int plan(struct pool_hdr *h, const char *layout, const struct pool_params *o)
{
    if (o->log_size < MIN_LOG || o->log_size > MAX_LOG)
        return REFUSE(TXN_E_INVAL, "log size %zu: %u to %u bytes", o->log_size, MIN_LOG, MAX_LOG);
    size_t min = eng_pool_min_size(o);
    if (o->size < min)
        return REFUSE(TXN_E_INVAL, "pool size %zu: at least %zu bytes for %u threads' logs of "
                      "%zu bytes", o->size, min, o->threads, o->log_size);
    memset(h, 0, sizeof *h);
    h->magic = POOL_MAGIC;
    h->format = POOL_FORMAT;
    h->hdr_size = sizeof *h;
    snprintf(h->layout, sizeof h->layout, "%s", layout);
    snprintf(h->engine, sizeof h->engine, "%s", eng_name);
    h->size = o->max_size ? o->max_size : TXN_POOL_MAX; /* growth by default */
    h->nslots = o->threads;
    h->slot_size = slot_bytes(o->log_size);
    h->slots_off = POOL_HDR_SIZE;
    h->ctab_off = h->slots_off + h->nslots * h->slot_size;
    size_t n = h->ctab_off < h->size ? (h->size - h->ctab_off) / (CHUNK_SIZE + 8) : 0;
    while (n && align_up(h->ctab_off + n * 8, CHUNK_SIZE) + n * (size_t)CHUNK_SIZE > h->size)
        n--;
    assert(n >= MIN_CHUNKS); /* eng_pool_min_size() counts for them */
    h->nchunks = n;
    h->heap_off = align_up(h->ctab_off + n * 8, CHUNK_SIZE);
    /* the heap it starts with: what o->size holds with a table of its own */
    size_t n0 = (o->size - h->ctab_off) / (CHUNK_SIZE + 8);
    while (align_up(h->ctab_off + n0 * 8, CHUNK_SIZE) + n0 * (size_t)CHUNK_SIZE > o->size)
        n0--;
    assert(n0 >= MIN_CHUNKS);
    h->heap_chunks = n0 < n ? n0 : n;
    return 0;
}

int eng_pool_create(txn_pool *p, const char *file, const char *layout,
                    const struct pool_params *o)
{
    struct pool_hdr h;
    struct pool_birth *b = malloc(sizeof *b);
    int rc = b ? plan(&h, layout, o) : TXN_E_NOMEM, fd;
    if (rc || (rc = pool_birth_begin(file, b))) {
        free(b);
        return rc;
    }
    fd = b->fd;
    POOL_FMT(p)->birth = b; /* the file gets its name at seal */
    char *base = NULL;
    size_t end = file_end(&h, h.heap_chunks);
    if ((rc = posix_fallocate(fd, 0, (off_t)h.ctab_off)) ||
        (rc = fallocate_chunks(fd, &h, 0, h.heap_chunks))) {
        rc = pool_file_error(file, rc, o->size); /* ENOSPC: with the sizes */
        goto fail;
    }
    if ((rc = map_anywhere(fd, end, h.size, &base)))
        goto fail;
    h.base = (uint64_t)(uintptr_t)base;
    getrandom(&h.uuid, sizeof h.uuid, 0);
    h.uuid |= !h.uuid; /* never 0: txn_join's "no pool" (eng_pool_uuid) */
    mapped(p, fd, 0, &h, base, end, window(end, h.size));
    /* the file is fresh: slots and chunk table are zero already, but for
     * the slots' tags */
    pm_memcpy(base, &h, sizeof h);
    for (size_t s = 0; s < h.nslots; s++) {
        struct slot_hdr *sh = pool_slot(p, s);
        pm_store64(&sh->tag, slot_tag(&h, s));
        pm_flush(&sh->tag, sizeof sh->tag);
    }
    alloc_format(p);
    struct vec none;
    vec_init(&none, sizeof(uint64_t));
    if ((rc = alloc_open(p, &none))) {
        pool_unmap(p);
        return rc;
    }
    return 0;
fail:
    pool_birth_end(b, 1);
    free(b);
    POOL_FMT(p)->birth = NULL;
    close(fd);
    return rc;
}

int eng_pool_seal(txn_pool *p, txn_obj *root, size_t root_size, txn_obj *meta)
{
    pm_store64(&POOL_FMT(p)->hdr->root, (uint64_t)(uintptr_t)root);
    pm_store64(&POOL_FMT(p)->hdr->root_size, root_size);
    pm_store64(&POOL_FMT(p)->hdr->layout_rec, (uint64_t)(uintptr_t)meta);
    pm_store64(&POOL_FMT(p)->hdr->checksum, hdr_csum(POOL_FMT(p)->hdr));
    pm_persist(POOL_FMT(p)->hdr, sizeof *POOL_FMT(p)->hdr);
    if (!POOL_FMT(p)->birth)
        return 0;
    int rc = pool_birth_publish(POOL_FMT(p)->birth);
    if (!rc) { /* named: no longer a temporary to remove at close */
        pool_birth_end(POOL_FMT(p)->birth, 0);
        free(POOL_FMT(p)->birth);
        POOL_FMT(p)->birth = NULL;
    }
    return rc;
}

/* The header's layout, each field against the others and the file. */
static int check_geometry(const struct pool_hdr *h)
{
    if (h->size < MIN_SIZE || h->base % MAP_ALIGN || h->base < MAP_LO ||
        h->base + h->size > MAP_HI)
        return REFUSE(TXN_E_CORRUPT, "header: size %llu or address %#llx out of range",
                      (unsigned long long)h->size, (unsigned long long)h->base);
    if (h->nslots == 0 || h->nslots > TXN_MAX_THREADS || h->slot_size < MIN_LOG ||
        h->slots_off != POOL_HDR_SIZE || h->ctab_off != h->slots_off + h->nslots * h->slot_size)
        return REFUSE(TXN_E_CORRUPT, "header: %llu log slots of %llu bytes do not fit",
                      (unsigned long long)h->nslots, (unsigned long long)h->slot_size);
    if (h->heap_off % CHUNK_SIZE || h->heap_off < h->ctab_off + h->nchunks * 8 ||
        h->heap_off + h->nchunks * CHUNK_SIZE > h->size)
        return REFUSE(TXN_E_CORRUPT, "header: a heap of %llu chunks at %llu does not fit",
                      (unsigned long long)h->nchunks, (unsigned long long)h->heap_off);
    uint64_t have = h->format > POOL_FORMAT_FIXED ? h->heap_chunks : h->nchunks;
    if (have < MIN_CHUNKS || have > h->nchunks)
        return REFUSE(TXN_E_CORRUPT, "header: a heap of %llu chunks, of at most %llu",
                      (unsigned long long)have, (unsigned long long)h->nchunks);
    uint64_t end = h->base + file_end(h, have);
    if (h->root < h->base + h->heap_off || h->root >= end ||
        h->layout_rec < h->base + h->heap_off || h->layout_rec >= end)
        return REFUSE(TXN_E_CORRUPT, "header: root or meta object outside the heap");
    if (!memchr(h->layout, 0, sizeof h->layout) || !memchr(h->engine, 0, sizeof h->engine))
        return REFUSE(TXN_E_CORRUPT, "header: layout or engine name not terminated");
    return 0;
}

/* Everything about the header that open checks, without writing; a NULL
 * layout matches any (inspection). */
static int check_hdr(const struct pool_hdr *h, size_t file_size, const char *layout)
{
    if (file_size >= sizeof PMDK_POOL_SIG && !memcmp(h, PMDK_POOL_SIG, sizeof PMDK_POOL_SIG))
        return REFUSE(TXN_E_ENGINE, "a libpmemobj pool: the pmdk engine's");
    if (file_size < sizeof h->magic || h->magic != POOL_MAGIC)
        return REFUSE(TXN_E_NOTPOOL, "no pmtx pool header (magic)");
    if (file_size < sizeof *h)
        return REFUSE(TXN_E_TRUNC, "%zu bytes: shorter than a pool header", file_size);
    if ((h->format != POOL_FORMAT && h->format != POOL_FORMAT_FIXED &&
         h->format != POOL_FORMAT_UNTAGGED) ||
        h->hdr_size != sizeof *h)
        return REFUSE(TXN_E_VERSION, "pool format %u, this library reads %u", h->format,
                      POOL_FORMAT);
    if (h->checksum != hdr_csum(h))
        return REFUSE(TXN_E_CORRUPT, "header: checksum mismatch");
    int rc = check_geometry(h);
    if (rc)
        return rc;
    size_t need = h->format > POOL_FORMAT_FIXED ? file_end(h, h->heap_chunks) : h->size;
    if (file_size < need)
        return REFUSE(TXN_E_TRUNC, "%zu bytes of a pool of %zu", file_size, need);
    if (layout && strcmp(h->layout, layout))
        return REFUSE(TXN_E_LAYOUT, "layout '%s', not '%s'", h->layout, layout);
    if (strncmp(h->engine, eng_name, sizeof h->engine))
        return REFUSE(TXN_E_ENGINE, "written by engine '%s', not %s", h->engine, eng_name);
    return 0;
}

/* One slot's scan: its records (recs), the log segments it finds. */
struct scan_part {
    txn_pool *p;
    size_t slot;
    struct vec *recs;
    struct vec segs;
    int rc;
    char why[160]; /* the scanning thread's problem text */
};

static void scan_slot(void *arg)
{
    struct scan_part *j = arg;
    struct slot_hdr *slot = pool_slot(j->p, j->slot);
    int rc = 0;
    pool_problem("%s", "");
    if (POOL_FMT(j->p)->hdr->format != POOL_FORMAT_UNTAGGED && slot->tag != slot_tag(POOL_FMT(j->p)->hdr, j->slot))
        rc = REFUSE(TXN_E_CORRUPT, "header damaged (tag %#llx)", (unsigned long long)slot->tag);
    if (!rc)
        rc = log_chain(j->p, slot, &j->segs);
    if (!rc)
        rc = log_scan(j->p, slot, j->recs);
    for (size_t i = 0; !rc && i < j->recs->n; i++) {
        struct log_rec *r = *(struct log_rec **)vec_at(j->recs, i);
        if ((rc = eng_rec_valid(j->p, r)))
            pool_problem("record %zu (type %u, %u bytes at %#llx) is not one this engine wrote",
                         i, r->type, r->len, (unsigned long long)r->addr);
    }
    if (rc) /* the words stay in this thread: the caller's may be another */
        snprintf(j->why, sizeof j->why, "%s",
                 *pool_problem_text() ? pool_problem_text() : txn_strerror(rc));
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
    size_t ns = POOL_FMT(p)->hdr->nslots;
    struct scan_part *j = calloc(ns, sizeof *j);
    if (!j)
        return TXN_E_NOMEM;
    for (size_t s = 0; s < ns; s++) {
        j[s] = (struct scan_part){p, s, &recs[s], {0}, 0, ""};
        vec_init(&j[s].segs, sizeof(uint64_t));
    }
    par_run(scan_slot, j, sizeof j[0], ns, par_threads(ns, 1, SCAN_THREADS));
    int rc = 0;
    for (size_t s = 0; s < ns; s++) {
        if (!rc && (rc = j[s].rc))
            pool_problem("log slot %zu: %s", s, j[s].why);
        if (!rc && vec_append(segs, j[s].segs.a, j[s].segs.n))
            rc = TXN_E_NOMEM;
        vec_free(&j[s].segs);
    }
    free(j);
    return rc;
}

static int recover(txn_pool *p, struct vec *recs)
{
    for (size_t s = 0; s < POOL_FMT(p)->hdr->nslots; s++) {
        if (!recs[s].n)
            continue;
        int rc = eng_recover(p, pool_slot(p, s), (struct log_rec **)recs[s].a, recs[s].n);
        if (rc)
            return rc;
        POOL_FMT(p)->recovered_slots++;
    }
    if (!POOL_FMT(p)->recovered_slots)
        return 0;
    pm_barrier(); /* recovered data durable before the logs go */
    /* The state word says the transaction is settled: a torn first record
     * of the slot's next transaction can bring an invalidated record back
     * to life, and it must then be seen as settled, never rolled back over
     * newer data. Settled before the log is invalidated: a log gone under
     * a state word that still names its transaction unsettled is what
     * damage looks like (log_scan). */
    for (size_t s = 0; s < POOL_FMT(p)->hdr->nslots; s++)
        if (recs[s].n) {
            struct slot_hdr *slot = pool_slot(p, s);
            uint64_t v = (*(struct log_rec **)vec_at(&recs[s], 0))->version;
            pm_store64(&slot->state, slot_state(v, SLOT_IDLE));
            pm_flush(&slot->state, sizeof slot->state);
        }
    pm_barrier();
    struct log l;
    for (size_t s = 0; s < POOL_FMT(p)->hdr->nslots; s++)
        if (recs[s].n) {
            log_attach(&l, p, pool_slot(p, s));
            log_invalidate(&l);
        }
    pm_barrier();
    return 0;
}

/* The same steps for a view (txn_pool_view) on a private mapping of a
 * file opened read-only, so that recovery, the boot count and whatever
 * runs later land in this process's copy of the pages and never in the
 * file. */
int eng_pool_open(txn_pool *p, const char *file, const char *layout, int view)
{
    int fd, rc = pool_lock_file(file, view ? O_RDONLY : O_RDWR, &fd);
    if (rc)
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
    size_t end = h.format > POOL_FORMAT_FIXED ? file_end(&h, h.heap_chunks) : h.size;
    /* a view never grows: its own bytes only */
    size_t resv = view ? end : window(end, h.size);
    if ((rc = map_at(fd, h.base, end, resv, view ? MAP_PRIVATE | MAP_NORESERVE : MAP_SHARED,
                     &base))) {
        close(fd);
        return rc;
    }
    mapped(p, fd, view, &h, base, end, resv);
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
    POOL_FMT(p)->open_recs = recs;
    rc = recover(p, recs);
    POOL_FMT(p)->open_recs = NULL;
    if (!rc)
        rc = eng_recover_logs(p);
    if (rc || (rc = alloc_open(p, &segs)))
        goto done;
    pm_store64(&POOL_FMT(p)->hdr->boot, POOL_FMT(p)->hdr->boot + 1);
    pm_persist(&POOL_FMT(p)->hdr->boot, sizeof POOL_FMT(p)->hdr->boot);
done:
    for (size_t s = 0; recs && s < h.nslots; s++)
        vec_free(&recs[s]);
    free(recs);
    vec_free(&segs);
    if (rc)
        pool_unmap(p);
    return rc;
}

int eng_pool_trim(struct txn *tx, size_t *returned)
{
    txn_pool *p = tx->p;
    struct fmt_pool *f = POOL_FMT(p);
    struct stat a, b;
    *returned = 0;
    if (f->view)
        return TXN_E_NOTSUP;
    alloc_cache_drain(p, &TX_FMT(tx)->cache); /* blocks it holds keep runs in use */
    if (fstat(f->fd, &a))
        return TXN_E_IO;
    int rc = alloc_trim(p);
    if (!rc && !fstat(f->fd, &b) && b.st_blocks < a.st_blocks)
        *returned = (size_t)(a.st_blocks - b.st_blocks) * 512;
    return rc;
}

void eng_pool_close(txn_pool *p)
{
    pool_unmap(p);
}

uint64_t eng_pool_uuid(txn_pool *p)
{
    return POOL_FMT(p)->hdr->uuid;
}

txn_obj *eng_pool_root(txn_pool *p)
{
    return (txn_obj *)(uintptr_t)POOL_FMT(p)->hdr->root;
}

txn_obj *eng_pool_meta(txn_pool *p)
{
    return (txn_obj *)(uintptr_t)POOL_FMT(p)->hdr->layout_rec;
}

/* ---- inspection (txn_pool_inspect) */

static void describe_hdr(const struct pool_hdr *h, txn_pool_info *info)
{
    snprintf(info->format, sizeof info->format, "pmtx");
    info->format_version = h->format;
    snprintf(info->engine, sizeof info->engine, "%.*s", (int)sizeof h->engine - 1, h->engine);
    snprintf(info->layout, sizeof info->layout, "%.*s", (int)sizeof h->layout - 1, h->layout);
    info->size = h->format > POOL_FORMAT_FIXED ? file_end(h, h->heap_chunks) : h->size;
    info->max_size = h->size;
    info->slots = (unsigned)h->nslots;
    info->opens = h->boot;
}

/* The header read and checked; then a view opened, which makes every
 * other check of an open and recovers in private memory; the pool it
 * leaves described, and compared with the file. */
int eng_pool_inspect(const char *file, txn_pool_info *info)
{
    int fd, rc = pool_lock_file(file, O_RDONLY, &fd);
    if (rc)
        return rc;
    struct stat st;
    struct pool_hdr h;
    memset(&h, 0, sizeof h);
    if (fstat(fd, &st) || pread(fd, &h, sizeof h, 0) < 0)
        rc = TXN_E_IO;
    if (!rc && st.st_size >= (off_t)sizeof h && h.magic == POOL_MAGIC)
        describe_hdr(&h, info);
    else if (!rc && !memcmp(&h, PMDK_POOL_SIG, sizeof PMDK_POOL_SIG))
        snprintf(info->engine, sizeof info->engine, "%s", PMDK_ENGINE);
    if (!rc)
        rc = check_hdr(&h, (size_t)st.st_size, NULL);
    close(fd);
    /* a handle with its format's part after it, as the front end makes
     * one (sizeof(txn_pool) is a multiple of fmt_pool's alignment) */
    struct {
        txn_pool p;
        struct fmt_pool f;
    } v = {.f = {.fd = -1}};
    txn_pool *p = &v.p;
    assert((void *)POOL_FMT(p) == (void *)&v.f);
    if (rc || (rc = eng_pool_open(p, file, h.layout, 1)))
        return rc;
    info->slots_pending = POOL_FMT(p)->recovered_slots;
    for (size_t s = 0; s < h.nslots; s++)
        info->slots_used += pool_slot(p, s)->next_version != 0;
    /* what the view's recovery changed past the slots */
    if (!(rc = alloc_describe(p, info)))
        rc = pool_bytes_differ(POOL_FMT(p)->fd, p->base, POOL_FMT(p)->hdr->ctab_off, p->size);
    if (rc == 1)
        rc = REFUSE(TXN_INSPECT_RECOVER,
                    "the next open's recovery changes the pool (%u log slot%s to settle)",
                    POOL_FMT(p)->recovered_slots, POOL_FMT(p)->recovered_slots == 1 ? "" : "s");
    eng_pool_close(p);
    return rc;
}
