/* alloc.c - size-class runs, large objects and log chunks in the heap;
 * volatile free state rebuilt at open; per-thread caches.
 *
 * A run is not its class's for ever: once none of its blocks is in use it
 * turns back into a FREE chunk that any class, a large object or a log may
 * take. That happens on demand, when no FREE chunk is left (reclaim()): no
 * barrier on the free path, and a block freed and allocated again in a
 * loop does not format a run each time. What it relies on:
 *
 * A1 A run's volatile bit (vbits) of a block is 1 while the block is
 *    allocated, reserved by a transaction or held in a thread cache, and 0
 *    only while it is free at the shared level (carve() hands it out from
 *    there); used[ci] counts the run's 1 bits.
 * A2 The engines give a block back (alloc_release) only when its durable
 *    bit is 0 and no recovery can set it again: a reservation whose ALLOC
 *    never became durable, or a FREE that is durable and whose transaction
 *    has settled (engine.h).
 * A3 A run turns FREE only with used == 0, under al->lock; by A1 and A2 no
 *    block of it is in use and its durable bitmap is clear. Its entry
 *    FREE is made durable (one barrier) before the chunk may be taken, so a
 *    crash never finds an entry RUN over bytes a new owner wrote.
 * A4 A record of a settled transaction may name a block of a chunk that
 *    has since changed kind or class (R2 in engine.h: recovery does not
 *    write through it). alloc_record_valid() accepts any block boundary of
 *    the record's class; alloc_apply() changes a bit only in a run of the
 *    block's class. Large objects had this case already: their chunks
 *    become runs again once freed.
 * A5 The last `spare` FREE chunks go only to log segments and to
 *    transactions that have freed more bytes than they reserve: one that
 *    deletes finds room on a full pool for what it writes (cow copies an
 *    object at its first write, a store's delete may need a segment).
 * A6 A block's mark NEW is set while an open transaction holds it
 *    reserved, its mark FREED while an open transaction has freed it (until
 *    it ends, or its engine takes its frees over); only that transaction
 *    clears it, and a block is given back (alloc_release) with neither.
 *    The marks are volatile: recovery never reads them. They replace the
 *    transaction's maps of its blocks (a DEL of n keys made n inserts at
 *    random addresses of a map of megabytes): a mark sits at a fixed place
 *    per block, and the marks of one run share 1 KiB.
 */
#include "alloc.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>

#include "atomics.h"
#include "persist.h"

enum { CK_FREE = 0, CK_RUN = 1, CK_LARGE = 2, CK_CONT = 3, CK_LOG = 4 };

#define RUN_HDR 512u /* bitmap area at the start of a run chunk */
#define MAX_SMALL 16384u
#define REFILL 32u

static const uint32_t class_size[ALLOC_CLASSES] = {
    16,   32,   48,   64,   80,   96,    112,   128,   160,   192,  224,   256,
    320,  384,  448,  512,  640,  768,   896,   1024,  1280,  1536, 1792,  2048,
    2560, 3072, 3584, 4096, 5120, 6144,  7168,  8192,  10240, 12288, 14336, 16384};

_Static_assert((CHUNK_SIZE - RUN_HDR) / 16 <= RUN_HDR * 8,
               "the bitmap of the smallest class fits in a run header");

static inline uint64_t ck_make(unsigned kind, unsigned cls, uint64_t n)
{
    return kind | (uint64_t)cls << 8 | n << 16;
}
static inline unsigned ck_kind(uint64_t e) { return e & 0xff; }
static inline unsigned ck_class(uint64_t e) { return (e >> 8) & 0xff; }
static inline uint64_t ck_n(uint64_t e) { return e >> 16; }

struct class_vol {
    struct vec runs; /* uint32_t: runs that may have blocks free at the shared level */
};

_Static_assert(ALLOC_CACHE == 64, "TXN_ALLOC_CACHE accepts 0 to the cache's size (persist.c)");

/* Shared by the pool's threads; "open": set by alloc_open, then read only. */
struct alloc_state {
    pthread_mutex_t lock;
    uint64_t *ctab;      /* open: persistent chunk table */
    char *heap;          /* open */
    size_t nchunks;      /* lock: chunks the heap has (pool_heap_chunks) */
    size_t max_chunks;   /* open: chunks it may grow to: the arrays' length */
    unsigned cache_max;  /* open: TXN_ALLOC_CACHE, blocks a thread cache keeps */
    uint8_t *chunk_free; /* lock: 1: FREE and not reserved */
    size_t free_hint;    /* lock */
    uint32_t *vlarge;    /* lock: chunks of a reserved/allocated large object
                            (read without it by the block's owner) */
    uint64_t **vbits;    /* lock: per RUN chunk: 1 = allocated, reserved or cached (A1) */
    uint16_t *used;      /* lock: per RUN chunk with vbits: its 1 bits */
    uint8_t *listed;     /* lock: 1: on its class's runs */
    uint8_t *holed;      /* lock: 1: a FREE chunk whose bytes may be a hole of
                            the file (alloc_trim; unknown after an open) */
    int reclaim;         /* lock: a run may be empty: reclaim() has work */
    int growing;         /* lock: a growth runs, with the lock let go (grow) */
    pthread_cond_t grown; /* with lock: broadcast when a growth ends */
    size_t nfree;        /* lock: chunks whose chunk_free is 1 */
    size_t spare;        /* open: FREE chunks kept for freeing transactions (A5) */
    _Atomic unsigned drain; /* bumped when chunks run short: thread caches
                               give their blocks back at their next reserve */
    uint64_t *marks;     /* open: the array. A6: 2 bits (MARK_NEW, MARK_FREED)
                            per MARK_GRAIN bytes of the heap; a block's pair
                            is the transaction's that set it, its word is
                            shared with other blocks': atomic read-modify-writes */
    struct class_vol cls[ALLOC_CLASSES]; /* lock */
};

/* ceil(2^32 / size): (x * inv) >> 32 == x / size for x < CHUNK_SIZE */
static uint32_t class_inv[ALLOC_CLASSES];
/* Blocks a run of each class holds: a table, not a divide, since
 * alloc_block_size checks it at every open of an object (the divide's
 * latency, not its one instruction, docs/access.md). */
static uint32_t class_blocks[ALLOC_CLASSES];

__attribute__((constructor)) static void class_setup(void)
{
    for (unsigned c = 0; c < ALLOC_CLASSES; c++) {
        class_inv[c] = (uint32_t)(((1ull << 32) + class_size[c] - 1) / class_size[c]);
        class_blocks[c] = (CHUNK_SIZE - RUN_HDR) / class_size[c];
    }
}

static inline size_t div_class(size_t x, unsigned c)
{
    return (size_t)(((uint64_t)x * class_inv[c]) >> 32);
}

static inline unsigned class_of(size_t n)
{
    unsigned c = 0;
    while (class_size[c] < n)
        c++;
    return c;
}

static inline unsigned run_blocks(unsigned c)
{
    return class_blocks[c];
}

static inline uint64_t *ctab(txn_pool *p)
{
    return (uint64_t *)(p->base + POOL_FMT(p)->hdr->ctab_off);
}

static inline char *chunk_addr(txn_pool *p, size_t ci)
{
    return p->base + POOL_FMT(p)->hdr->heap_off + ci * (size_t)CHUNK_SIZE;
}

static inline size_t chunk_of(txn_pool *p, const void *a)
{
    return (size_t)((const char *)a - (p->base + POOL_FMT(p)->hdr->heap_off)) / CHUNK_SIZE;
}

void alloc_format(txn_pool *p)
{
    uint64_t *t = ctab(p);
    pm_memset(t, 0, pool_heap_chunks(p) * sizeof *t); /* the rest is a hole */
    pm_flush(t, pool_heap_chunks(p) * sizeof *t);
}

int alloc_check(txn_pool *p)
{
    uint64_t *t = ctab(p);
    size_t n = pool_heap_chunks(p);
    for (size_t i = 0; i < n; i++) {
        uint64_t e = t[i];
        unsigned k = ck_kind(e);
        if (k > CK_LOG || (k == CK_RUN && ck_class(e) >= ALLOC_CLASSES) ||
            (k == CK_LARGE && (ck_n(e) == 0 || ck_n(e) > n - i))) {
            pool_problem("chunk table entry %zu: %#llx is no chunk", i, (unsigned long long)e);
            return TXN_E_CORRUPT;
        }
    }
    return 0;
}

/* ---- volatile state */

static int add_run(struct alloc_state *al, unsigned c, uint32_t ci)
{
    if (al->listed[ci])
        return 0;
    uint32_t *r = vec_push(&al->cls[c].runs);
    if (!r)
        return TXN_E_NOMEM;
    *r = ci;
    al->listed[ci] = 1;
    return 0;
}

static unsigned count_bits(const uint64_t *vb, unsigned nb)
{
    unsigned cnt = 0;
    for (unsigned w = 0; w * 64 < nb; w++)
        cnt += (unsigned)__builtin_popcountll(w * 64 + 64 <= nb ? vb[w]
                                              : vb[w] & ((1ull << (nb % 64)) - 1));
    return cnt;
}

/* A run's volatile bitmap is a copy of its durable one as the pool opened,
 * made when the run is first needed (carve, or the first change of one of
 * its durable bits: none changes before), not at open: an open reads no
 * run header (with a heap of thousands of runs, a page fault each, most of
 * a clean open's time). NO_BITS: the copy could not be made (no memory)
 * when a durable bit was about to change; the run hands out no more
 * never-handed-out blocks until the next open. Caller holds al->lock. */
static uint64_t no_bits_mark;
#define NO_BITS (&no_bits_mark)

static uint64_t *run_bits(txn_pool *p, struct alloc_state *al, size_t ci)
{
    uint64_t *vb = al->vbits[ci];
    if (vb)
        return vb;
    unsigned nb = run_blocks(ck_class(ctab(p)[ci]));
    size_t words = (nb + 63) / 64;
    if ((vb = malloc(words * 8))) {
        memcpy(vb, chunk_addr(p, ci), words * 8);
        al->used[ci] = (uint16_t)count_bits(vb, nb);
        if (!al->used[ci])
            al->reclaim = 1;
        __atomic_store_n(&al->vbits[ci], vb, __ATOMIC_RELEASE);
    }
    return vb;
}

/* Before a durable bit of run ci changes: its copy as the pool opened. */
static void run_bits_before_change(txn_pool *p, size_t ci)
{
    struct alloc_state *al = POOL_FMT(p)->al;
    if (!al || __atomic_load_n(&al->vbits[ci], __ATOMIC_ACQUIRE))
        return; /* recovery before alloc_open, or made already */
    pthread_mutex_lock(&al->lock);
    if (!run_bits(p, al, ci))
        __atomic_store_n(&al->vbits[ci], NO_BITS, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&al->lock);
}

static int fix_log_chunks(txn_pool *p, const struct vec *segs)
{
    uint64_t *t = ctab(p);
    size_t n = pool_heap_chunks(p);
    uint8_t *is_seg = calloc(n, 1);
    if (!is_seg)
        return TXN_E_NOMEM;
    int changed = 0;
    for (size_t i = 0; i < segs->n; i++)
        is_seg[chunk_of(p, (void *)(uintptr_t)*(uint64_t *)vec_at(segs, i))] = 1;
    for (size_t i = 0; i < n; i++) {
        unsigned k = ck_kind(t[i]);
        uint64_t want = is_seg[i] ? ck_make(CK_LOG, 0, 0)
                        : k == CK_LOG ? ck_make(CK_FREE, 0, 0) : t[i];
        if (want != t[i]) {
            pm_store64(&t[i], want);
            pm_flush(&t[i], 8);
            changed = 1;
        }
        if (k == CK_LARGE && !is_seg[i])
            i += ck_n(t[i]) - 1;
    }
    free(is_seg);
    if (changed)
        pm_barrier();
    return 0;
}

/* A zeroed array for every chunk the heap may grow to: address space
 * only, its pages made as the chunks they describe come (and never
 * moved, so that growing needs no lock its readers would take). */
static void *lazy_calloc(size_t n, size_t size)
{
    size_t bytes = n * size;
    void *a = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return a == MAP_FAILED ? NULL : a;
}

static void lazy_free(void *a, size_t bytes)
{
    if (a)
        munmap(a, bytes ? bytes : 1);
}

/* Every block starts at a multiple of MARK_GRAIN from the heap's start
 * (chunks, RUN_HDR and every class size are multiples of it). */
#define MARK_GRAIN 16u
_Static_assert(RUN_HDR % MARK_GRAIN == 0 && CHUNK_SIZE % MARK_GRAIN == 0, "blocks on grains");

static size_t marks_bytes(size_t chunks)
{
    return chunks * (CHUNK_SIZE / MARK_GRAIN) * 2 / 8;
}

/* A5's spare chunks of a heap of n. */
static size_t spare_of(size_t n)
{
    return n / 32 > 8 ? 8 : n / 32 ? n / 32 : 1;
}

void alloc_close(txn_pool *p)
{
    struct alloc_state *al = POOL_FMT(p)->al;
    if (!al)
        return;
    for (size_t i = 0; i < al->nchunks; i++)
        if (al->vbits[i] != NO_BITS)
            free(al->vbits[i]);
    for (unsigned c = 0; c < ALLOC_CLASSES; c++)
        vec_free(&al->cls[c].runs);
    lazy_free(al->vbits, al->max_chunks * sizeof *al->vbits);
    lazy_free(al->used, al->max_chunks * sizeof *al->used);
    lazy_free(al->listed, al->max_chunks);
    lazy_free(al->holed, al->max_chunks);
    lazy_free(al->vlarge, al->max_chunks * sizeof *al->vlarge);
    lazy_free(al->chunk_free, al->max_chunks);
    lazy_free(al->marks, marks_bytes(al->max_chunks));
    pthread_cond_destroy(&al->grown);
    pthread_mutex_destroy(&al->lock);
    free(al);
    POOL_FMT(p)->al = NULL;
}

int alloc_open(txn_pool *p, const struct vec *segs)
{
    int rc = fix_log_chunks(p, segs);
    if (rc)
        return rc;
    struct alloc_state *al = calloc(1, sizeof *al);
    if (!al)
        return TXN_E_NOMEM;
    POOL_FMT(p)->al = al;
    pthread_mutex_init(&al->lock, NULL);
    pthread_cond_init(&al->grown, NULL);
    al->nchunks = pool_heap_chunks(p);
    al->max_chunks = POOL_FMT(p)->hdr->nchunks;
    al->cache_max = setting_get(SET_ALLOC_CACHE, ALLOC_CACHE);
    al->spare = spare_of(al->nchunks);
    al->chunk_free = lazy_calloc(al->max_chunks, 1);
    al->vlarge = lazy_calloc(al->max_chunks, sizeof *al->vlarge);
    al->vbits = lazy_calloc(al->max_chunks, sizeof *al->vbits);
    al->used = lazy_calloc(al->max_chunks, sizeof *al->used);
    al->listed = lazy_calloc(al->max_chunks, 1);
    al->holed = lazy_calloc(al->max_chunks, 1);
    al->marks = lazy_calloc(marks_bytes(al->max_chunks), 1);
    if (!al->chunk_free || !al->vlarge || !al->vbits || !al->used || !al->listed || !al->holed ||
        !al->marks)
        goto nomem;
    for (unsigned c = 0; c < ALLOC_CLASSES; c++)
        vec_init(&al->cls[c].runs, sizeof(uint32_t));
    uint64_t *t = ctab(p);
    for (size_t i = 0; i < al->nchunks; i++) {
        uint64_t e = t[i];
        switch (ck_kind(e)) {
        case CK_RUN: /* its bitmap copied when first needed (run_bits) */
            if (add_run(al, ck_class(e), (uint32_t)i))
                goto nomem;
            al->reclaim = 1; /* it may be empty */
            break;
        case CK_LARGE:
            for (uint64_t j = 0; j < ck_n(e); j++)
                al->vlarge[i + j] = (uint32_t)(j ? 0 : ck_n(e));
            i += ck_n(e) - 1;
            break;
        case CK_LOG:
            break;
        default: /* FREE, or a CONT left without its head */
            al->chunk_free[i] = 1;
            al->holed[i] = 1; /* a trim before may have punched it */
            al->nfree++;
        }
    }
    return 0;
nomem:
    alloc_close(p);
    return TXN_E_NOMEM;
}

/* ---- chunks (caller holds al->lock) */

static long take_chunks(struct alloc_state *al, size_t n, int spare_ok)
{
    size_t N = al->nchunks;
    if (al->nfree < n + (spare_ok ? 0 : al->spare))
        return -1; /* A5 */
    for (size_t tries = 0, i = al->free_hint % (N ? N : 1); tries < N;) {
        if (i + n > N) {
            tries += N - i;
            i = 0;
            continue;
        }
        size_t j = 0;
        while (j < n && al->chunk_free[i + j])
            j++;
        if (j == n) {
            memset(al->chunk_free + i, 0, n);
            al->nfree -= n;
            al->free_hint = i + n;
            return (long)i;
        }
        tries += j + 1;
        i += j + 1;
    }
    return -1;
}

/* A3: run ci, none of whose blocks is in use, becomes a FREE chunk. */
static void run_to_free(txn_pool *p, struct alloc_state *al, size_t ci)
{
    assert(al->used[ci] == 0 && "A3: a run turns FREE only with no block in use");
#ifndef NDEBUG
    unsigned nb = run_blocks(ck_class(ctab(p)[ci]));
    assert(count_bits((const uint64_t *)chunk_addr(p, ci), nb) == 0 &&
           "A2: a run with no block in use has no durable bit set");
#endif
    uint64_t *e = &ctab(p)[ci];
    pm_store64(e, ck_make(CK_FREE, 0, 0));
    pm_persist(e, 8);
    free(al->vbits[ci]);
    __atomic_store_n(&al->vbits[ci], NULL, __ATOMIC_RELEASE);
    al->chunk_free[ci] = 1;
    al->nfree++;
    if (ci < al->free_hint)
        al->free_hint = ci;
}

/* Every run none of whose blocks is in use becomes FREE; the classes' run
 * lists are rebuilt on the way (runs with room, once each). Reads the
 * header of each run not read since the open. Returns the chunks freed. */
static size_t reclaim(txn_pool *p, struct alloc_state *al)
{
    size_t freed = 0;
    int again = 0;
    for (unsigned c = 0; c < ALLOC_CLASSES; c++) {
        struct vec *r = &al->cls[c].runs;
        for (size_t i = 0; i < r->n; i++)
            al->listed[*(uint32_t *)vec_at(r, i)] = 0;
        r->n = 0;
    }
    uint64_t *t = ctab(p);
    for (size_t ci = 0; ci < al->nchunks; ci++) {
        uint64_t e = __atomic_load_n(&t[ci], __ATOMIC_RELAXED); /* its owner may set it */
        if (ck_kind(e) == CK_LARGE)
            ci += ck_n(e) - 1;
        if (ck_kind(e) != CK_RUN)
            continue;
        uint64_t *vb = run_bits(p, al, ci);
        if (vb == NO_BITS)
            continue; /* hands out nothing until the next open */
        if (vb && !al->used[ci]) {
            run_to_free(p, al, ci);
            freed++;
        } else if ((!vb || al->used[ci] < run_blocks(ck_class(e))) &&
                   add_run(al, ck_class(e), (uint32_t)ci)) {
            again = 1; /* out of memory: the next pass lists it */
        }
        again |= !vb;
    }
    al->reclaim = again;
    return freed;
}

/* A block free at the shared level again (A1). */
static void shared_free(txn_pool *p, struct alloc_state *al, void *blk)
{
    size_t ci = chunk_of(p, blk);
    uint64_t *vb = al->vbits[ci];
    if (!vb || vb == NO_BITS)
        return; /* no copy of the bits (no memory): out of use until the next open */
    unsigned k = ck_class(ctab(p)[ci]);
    size_t idx = div_class((size_t)((char *)blk - chunk_addr(p, ci) - RUN_HDR), k);
    assert(vb[idx / 64] >> (idx % 64) & 1 && "A1: a block given back was in use");
    vb[idx / 64] &= ~(1ull << (idx % 64));
    if (--al->used[ci] == 0)
        al->reclaim = 1;
    add_run(al, k, (uint32_t)ci); /* out of memory: listed by the next reclaim() */
    if (!al->listed[ci])
        al->reclaim = 1;
}

static void cache_to_shared(txn_pool *p, struct alloc_state *al, struct alloc_cache *c)
{
    for (unsigned k = 0; k < ALLOC_CLASSES; k++)
        while (c->n[k])
            shared_free(p, al, c->blk[k][--c->n[k]]);
}

/* The heap grown by n chunks or more, FREE, the spare ones (A5) kept:
 * after every freed block has been looked for, and only then, so that a
 * pool grows only for what its free space cannot serve. pool_grow runs
 * with the lock let go: the file's new space (posix_fallocate zeroes it,
 * then fdatasync) takes long, 0.2 s a GiB on tmpfs, and the threads that
 * free, or allocate from what the heap has, need not wait for it. Nothing
 * the lock guards is touched meanwhile: the new chunks are past nchunks
 * until the arrays take them below. One growth at a time: a thread that
 * needs chunks while one runs waits for its end. 1: look again (the heap
 * grew, or another growth ended), 0: it cannot grow. */
static int grow(txn_pool *p, struct alloc_state *al, size_t n)
{
    if (al->growing) {
        while (al->growing)
            pthread_cond_wait(&al->grown, &al->lock);
        return 1;
    }
    al->growing = 1;
    size_t want = n + al->spare;
    pthread_mutex_unlock(&al->lock);
    size_t add = pool_grow(p, want);
    pthread_mutex_lock(&al->lock);
    al->growing = 0;
    pthread_cond_broadcast(&al->grown);
    if (!add)
        return 0;
    assert(pool_heap_chunks(p) == al->nchunks + add && al->nchunks + add <= al->max_chunks);
    memset(al->chunk_free + al->nchunks, 1, add);
    if (al->free_hint > al->nchunks)
        al->free_hint = al->nchunks;
    al->nfree += add;
    al->nchunks += add;
    al->spare = spare_of(al->nchunks);
    return 1;
}

/* n contiguous FREE chunks; when there are none, the runs that are empty
 * become FREE, first with the caller's cache given back (c, if any), and
 * the other threads are asked to give theirs back. */
/* Chunks [ci, ci + n), just taken, that may be holes of the file get
 * their space from the filesystem before anyone writes them: a store to a
 * hole the filesystem cannot fill would fault the writer (SIGBUS). On
 * failure they are FREE again, and the caller's allocation fails. */
static int fill_holes(txn_pool *p, struct alloc_state *al, size_t ci, size_t n)
{
    for (size_t i = ci, j; i < ci + n; i = j) {
        for (j = i; j < ci + n && al->holed[j]; j++)
            ;
        if (j > i && pool_fill(p, i, j - i)) {
            memset(al->chunk_free + ci, 1, n);
            al->nfree += n;
            return TXN_E_NOSPACE;
        }
        memset(al->holed + i, 0, j - i);
        j += j == i;
    }
    return 0;
}

static long grab_any(txn_pool *p, struct alloc_state *al, size_t n, struct alloc_cache *c,
                     int spare_ok)
{
    long ci = take_chunks(al, n, spare_ok);
    if (ci < 0 && al->reclaim && reclaim(p, al))
        ci = take_chunks(al, n, spare_ok);
    if (ci < 0) {
        atomic_fetch_add_explicit(&al->drain, 1, memory_order_relaxed);
        if (c)
            cache_to_shared(p, al, c);
        if (al->reclaim && reclaim(p, al))
            ci = take_chunks(al, n, spare_ok);
    }
    while (ci < 0 && grow(p, al, n)) /* ends: the heap's maximum */
        ci = take_chunks(al, n, spare_ok);
    return ci;
}

static long grab_chunks(txn_pool *p, struct alloc_state *al, size_t n, struct alloc_cache *c,
                        int spare_ok)
{
    long ci = grab_any(p, al, n, c, spare_ok);
    return ci >= 0 && fill_holes(p, al, (size_t)ci, n) ? -1 : ci;
}

#define TRIM_STEP 1024u /* chunks a step of alloc_trim holds the lock for: 64 MiB */

int alloc_trim(txn_pool *p)
{
    struct alloc_state *al = POOL_FMT(p)->al;
    int rc = 0;
    pthread_mutex_lock(&al->lock);
    if (al->reclaim)
        reclaim(p, al);
    atomic_fetch_add_explicit(&al->drain, 1, memory_order_relaxed);
    pthread_mutex_unlock(&al->lock);
    for (size_t at = 0; !rc; at += TRIM_STEP) {
        pthread_mutex_lock(&al->lock);
        size_t end = at + TRIM_STEP < al->nchunks ? at + TRIM_STEP : al->nchunks;
        for (size_t i = at, j; i < end && !rc; i = j) {
            for (j = i; j < end && al->chunk_free[j]; j++)
                ;
            if (j > i && !(rc = pool_discard(p, i, j - i)))
                memset(al->holed + i, 1, j - i);
            j += j == i;
        }
        int done = end == al->nchunks;
        pthread_mutex_unlock(&al->lock);
        if (done)
            break;
    }
    return rc;
}

int alloc_log_chunk(txn_pool *p, void **seg)
{
    struct alloc_state *al = POOL_FMT(p)->al;
    pthread_mutex_lock(&al->lock);
    long ci = grab_chunks(p, al, 1, NULL, 1);
    pthread_mutex_unlock(&al->lock);
    if (ci < 0)
        return TXN_E_NOSPACE;
    char *a = chunk_addr(p, (size_t)ci);
    struct seg_hdr *sh = (struct seg_hdr *)a;
    pm_store64(&sh->next, 0);
    pm_flush(sh, sizeof *sh);
    uint64_t *e = &ctab(p)[ci];
    pm_store64(e, ck_make(CK_LOG, 0, 0));
    pm_persist(e, 8);
    *seg = a;
    return 0;
}

/* A FREE chunk becomes a run of class c: a clean durable bitmap first. */
static int new_run(txn_pool *p, struct alloc_state *al, unsigned c, struct alloc_cache *cache,
                   int spare_ok)
{
    long ci = grab_chunks(p, al, 1, cache, spare_ok);
    if (ci < 0)
        return TXN_E_NOSPACE;
    size_t words = (run_blocks(c) + 63) / 64;
    uint64_t *vb = calloc(words, 8);
    if (!vb || add_run(al, c, (uint32_t)ci)) {
        free(vb);
        al->chunk_free[ci] = 1;
        al->nfree++;
        return TXN_E_NOMEM;
    }
    /* the whole header, not only the bitmap's words: spare bits that are
     * zero tell damage from a run (alloc_describe) */
    char *a = chunk_addr(p, (size_t)ci);
    pm_memset(a, 0, RUN_HDR);
    pm_persist(a, RUN_HDR);
    uint64_t *e = &ctab(p)[ci];
    pm_store64(e, ck_make(CK_RUN, c, 0));
    pm_flush(e, 8);
    al->used[ci] = 0;
    __atomic_store_n(&al->vbits[ci], vb, __ATOMIC_RELEASE);
    return 0;
}

/* Move up to `want` blocks of class c free at the shared level into the
 * cache. */
static void carve(txn_pool *p, struct alloc_state *al, unsigned c, struct alloc_cache *cache,
                  unsigned want)
{
    struct class_vol *cv = &al->cls[c];
    unsigned nb = run_blocks(c);
    while (want && cv->runs.n) {
        uint32_t ci = *(uint32_t *)vec_at(&cv->runs, cv->runs.n - 1);
        uint64_t *vb = run_bits(p, al, ci);
        if (!vb)
            return; /* no memory for the copy: none carved */
        if (vb != NO_BITS) {
            char *data = chunk_addr(p, ci) + RUN_HDR;
            for (unsigned w = 0; want && w * 64 < nb; w++) {
                while (want && ~vb[w]) {
                    unsigned b = (unsigned)__builtin_ctzll(~vb[w]);
                    if (w * 64 + b >= nb)
                        break;
                    vb[w] |= 1ull << b;
                    al->used[ci]++;
                    cache->blk[c][cache->n[c]++] = data + (size_t)(w * 64 + b) * class_size[c];
                    want--;
                }
            }
        }
        if (want || vb == NO_BITS) { /* exhausted */
            al->listed[ci] = 0;
            cv->runs.n--;
        }
    }
}

static int refill(txn_pool *p, struct alloc_cache *cache, unsigned c, int spare_ok)
{
    struct alloc_state *al = POOL_FMT(p)->al;
    unsigned want = al->cache_max < REFILL ? al->cache_max : REFILL;
    want = want ? want : 1;
    int rc = 0;
    pthread_mutex_lock(&al->lock);
    carve(p, al, c, cache, want);
    if (cache->n[c] == 0) {
        rc = new_run(p, al, c, cache, spare_ok);
        if (!rc)
            carve(p, al, c, cache, want);
    }
    pthread_mutex_unlock(&al->lock);
    return cache->n[c] ? 0 : (rc ? rc : TXN_E_NOSPACE);
}

static int all_zero(const char *b, size_t n)
{
    for (; n && ((uintptr_t)b & 7); b++, n--)
        if (*b)
            return 0;
    for (uint64_t w; n >= 8; b += 8, n -= 8) {
        memcpy(&w, b, 8);
        if (w)
            return 0;
    }
    for (; n; b++, n--)
        if (*b)
            return 0;
    return 1;
}

int alloc_reserve(txn_pool *p, struct alloc_cache *c, size_t n, int spare_ok, void **blk,
                  size_t *usable)
{
    struct alloc_state *al = POOL_FMT(p)->al;
    unsigned drain = atomic_load_explicit(&al->drain, memory_order_relaxed);
    if (c->drain != drain) { /* chunks ran short: the cache's blocks back */
        c->drain = drain;
        alloc_cache_drain(p, c);
    }
    if (n > MAX_SMALL) {
        size_t nch = (n + CHUNK_SIZE - 1) / CHUNK_SIZE;
        pthread_mutex_lock(&al->lock);
        long ci = grab_chunks(p, al, nch, c, spare_ok);
        if (ci >= 0)
            for (size_t j = 0; j < nch; j++)
                al->vlarge[ci + j] = (uint32_t)(j ? 0 : nch);
        pthread_mutex_unlock(&al->lock);
        if (ci < 0)
            return TXN_E_NOSPACE;
        *blk = chunk_addr(p, (size_t)ci);
        *usable = nch * CHUNK_SIZE;
    } else {
        unsigned k = class_of(n);
        if (c->n[k] == 0) {
            int rc = refill(p, c, k, spare_ok);
            if (rc)
                return rc;
        }
        *blk = c->blk[k][--c->n[k]];
        *usable = class_size[k];
    }
    /* zero-filled to the usable size; the padding past n is usually zero
     * already (nothing is written there unless a program writes past what
     * it asked for): stored only when it is not, a store to the pool saved
     * per allocation (the commit flushes the whole block either way) */
    pm_memset(*blk, 0, n);
    if (!all_zero((const char *)*blk + n, *usable - n))
        pm_memset((char *)*blk + n, 0, *usable - n);
    return 0;
}

/* R1 (txn/api.c): the pool's count of freed blocks goes up before the
 * block can be reserved again, by any thread. */
static void count_freed(txn_pool *p)
{
    __atomic_fetch_add(&p->hot.freed, 1, __ATOMIC_RELEASE);
}

static void release_large(struct alloc_state *al, size_t ci)
{
    size_t n = al->vlarge[ci];
    pthread_mutex_lock(&al->lock);
    for (size_t j = 0; j < n; j++) {
        al->vlarge[ci + j] = 0;
        al->chunk_free[ci + j] = 1;
    }
    al->nfree += n;
    if (ci < al->free_hint)
        al->free_hint = ci;
    pthread_mutex_unlock(&al->lock);
}

void alloc_release(txn_pool *p, struct alloc_cache *c, void *blk)
{
    struct alloc_state *al = POOL_FMT(p)->al;
    size_t ci = chunk_of(p, blk);
    assert(!alloc_marked(p, blk, MARK_NEW | MARK_FREED) &&
           "A6: a block given back is marked by no transaction");
    count_freed(p);
    if (al->vlarge[ci]) {
        release_large(al, ci);
        return;
    }
    unsigned drain = atomic_load_explicit(&al->drain, memory_order_relaxed);
    if (c->drain != drain) { /* chunks ran short: a thread that only frees
                                (an expiry thread) gives its cache back too */
        c->drain = drain;
        pthread_mutex_lock(&al->lock);
        cache_to_shared(p, al, c);
        shared_free(p, al, blk);
        pthread_mutex_unlock(&al->lock);
        return;
    }
    unsigned k = ck_class(ctab(p)[ci]);
    if (c->n[k] >= al->cache_max) { /* half the cache to the shared level */
        pthread_mutex_lock(&al->lock);
        while (c->n[k] > al->cache_max / 2)
            shared_free(p, al, c->blk[k][--c->n[k]]);
        if (!al->cache_max) /* a cache that keeps none: the block too */
            shared_free(p, al, blk);
        pthread_mutex_unlock(&al->lock);
        if (!al->cache_max)
            return;
    }
    c->blk[k][c->n[k]++] = blk;
}

void alloc_cache_drain(txn_pool *p, struct alloc_cache *c)
{
    struct alloc_state *al = POOL_FMT(p)->al;
    pthread_mutex_lock(&al->lock);
    cache_to_shared(p, al, c);
    pthread_mutex_unlock(&al->lock);
}

/* ---- marks of the blocks open transactions hold (A6) */

/* The word holding blk's marks and their shift in it; NULL when blk is no
 * grain of the heap (then no block of it). */
static uint64_t *mark_word(txn_pool *p, const void *blk, unsigned *shift)
{
    struct alloc_state *al = POOL_FMT(p)->al;
    uintptr_t off = (uintptr_t)blk - (uintptr_t)(p->base + POOL_FMT(p)->hdr->heap_off);
    if (off % MARK_GRAIN || off / CHUNK_SIZE >= al->max_chunks) /* below the heap: wrapped */
        return NULL;
    size_t g = off / MARK_GRAIN;
    *shift = (unsigned)(g % 32) * 2;
    return al->marks + g / 32;
}

int alloc_mark(txn_pool *p, const void *blk, enum alloc_mark m)
{
    unsigned sh;
    uint64_t *w = mark_word(p, blk, &sh);
    if (!w)
        return 1;
    uint64_t bit = (uint64_t)m << sh;
    return (__atomic_fetch_or(w, bit, __ATOMIC_ACQ_REL) & bit) != 0;
}

void alloc_unmark(txn_pool *p, const void *blk, enum alloc_mark m)
{
    unsigned sh;
    uint64_t *w = mark_word(p, blk, &sh);
    if (w)
        __atomic_fetch_and(w, ~((uint64_t)m << sh), __ATOMIC_ACQ_REL);
}

int alloc_marked(txn_pool *p, const void *blk, unsigned m)
{
    unsigned sh;
    const uint64_t *w = mark_word(p, blk, &sh);
    return w && (__atomic_load_n(w, __ATOMIC_ACQUIRE) >> sh & m) != 0;
}

/* ---- persistent state of a block */

void alloc_apply(txn_pool *p, uint64_t blk, uint64_t size, enum alloc_op op,
                 int flush)
{
    void *b = (void *)(uintptr_t)blk;
    size_t ci = chunk_of(p, b);
    uint64_t *t = ctab(p);
    if (size > MAX_SMALL) {
        size_t n = size / CHUNK_SIZE;
        for (size_t j = 0; j < n; j++) {
            uint64_t e = op == ALLOC_CLEAR ? ck_make(CK_FREE, 0, 0)
                         : j == 0          ? ck_make(CK_LARGE, 0, n)
                                           : ck_make(CK_CONT, 0, 0);
            pm_store64(&t[ci + j], e);
        }
        if (flush)
            pm_flush(&t[ci], n * 8);
        return;
    }
    /* A4: a run that was never durably formatted, or a chunk that is no
     * longer the block's run: no bit to change */
    if (ck_kind(t[ci]) != CK_RUN || class_size[ck_class(t[ci])] != size)
        return;
    run_bits_before_change(p, ci);
    unsigned k = ck_class(t[ci]);
    size_t idx = (size_t)((char *)b - chunk_addr(p, ci) - RUN_HDR) / class_size[k];
    uint64_t *word = (uint64_t *)chunk_addr(p, ci) + idx / 64;
    uint64_t bit = 1ull << (idx % 64);
    if (op == ALLOC_SET)
        pm_or64(word, bit);
    else
        pm_and64(word, ~bit);
    if (flush)
        pm_flush(word, 8);
}

void alloc_flush_meta(txn_pool *p, uint64_t blk, uint64_t size)
{
    void *b = (void *)(uintptr_t)blk;
    size_t ci = chunk_of(p, b);
    uint64_t *t = ctab(p);
    if (size > MAX_SMALL) {
        pm_flush(&t[ci], size / CHUNK_SIZE * 8);
        return;
    }
    if (ck_kind(t[ci]) != CK_RUN || class_size[ck_class(t[ci])] != size)
        return; /* A4 */
    size_t idx = (size_t)((char *)b - chunk_addr(p, ci) - RUN_HDR) / class_size[ck_class(t[ci])];
    pm_flush((uint64_t *)chunk_addr(p, ci) + idx / 64, 8);
}

size_t alloc_block_size(txn_pool *p, const void *blk, int live)
{
    if (!pool_contains(p, blk, 1))
        return 0;
    size_t ci = chunk_of(p, blk);
    if (ci >= POOL_FMT(p)->hdr->nchunks)
        return 0;
    uint64_t e = ctab(p)[ci];
    const char *ca = chunk_addr(p, ci);
    if (ck_kind(e) == CK_RUN) {
        unsigned k = ck_class(e);
        size_t rel = (size_t)((const char *)blk - ca);
        size_t idx = div_class(rel - RUN_HDR, k);
        if (rel < RUN_HDR || idx * class_size[k] != rel - RUN_HDR || idx >= run_blocks(k))
            return 0;
        if (live && !(at_load((const uint64_t *)ca + idx / 64) >> (idx % 64) & 1))
            return 0;
        return class_size[k];
    }
    if ((const char *)blk != ca)
        return 0;
    if (live)
        return ck_kind(e) == CK_LARGE ? ck_n(e) * CHUNK_SIZE : 0;
    return POOL_FMT(p)->al && POOL_FMT(p)->al->vlarge[ci] ? (size_t)POOL_FMT(p)->al->vlarge[ci] * CHUNK_SIZE : 0;
}

int alloc_record_valid(txn_pool *p, uint64_t blk, uint64_t size)
{
    void *b = (void *)(uintptr_t)blk;
    if (!pool_contains(p, b, size) || size == 0)
        return 0;
    size_t ci = chunk_of(p, b);
    char *ca = chunk_addr(p, ci);
    if (size > MAX_SMALL)
        return (char *)b == ca && size % CHUNK_SIZE == 0;
    /* A4: the chunk may be of any kind now (also FREE: a run whose entry
     * never became durable); the record names a block of some run */
    size_t rel = (size_t)((char *)b - ca);
    unsigned k = class_of(size);
    return rel >= RUN_HDR && class_size[k] == size && (rel - RUN_HDR) % size == 0 &&
           (rel - RUN_HDR) / size < run_blocks(k);
}

void alloc_foreach_live(txn_pool *p, void (*fn)(void *blk, size_t size, void *arg),
                        void *arg)
{
    uint64_t *t = ctab(p);
    size_t heap = pool_heap_chunks(p);
    for (size_t i = 0; i < heap; i++) {
        uint64_t e = t[i];
        if (ck_kind(e) == CK_LARGE) {
            fn(chunk_addr(p, i), ck_n(e) * CHUNK_SIZE, arg);
            i += ck_n(e) - 1;
            continue;
        }
        if (ck_kind(e) != CK_RUN)
            continue;
        unsigned k = ck_class(e), nb = run_blocks(k);
        const uint64_t *bm = (const uint64_t *)chunk_addr(p, i);
        for (unsigned b = 0; b < nb; b++)
            if (bm[b / 64] >> (b % 64) & 1)
                fn(chunk_addr(p, i) + RUN_HDR + (size_t)b * class_size[k], class_size[k], arg);
    }
}

/* Count n live objects of `size` bytes per object, and `free` bytes of
 * free blocks, into info's classes. */
static void add_class(txn_pool_info *info, uint64_t size, uint64_t n, uint64_t free)
{
    info->objects += n;
    info->heap_used += n * size;
    unsigned i = 0;
    while (i < info->nclasses && info->classes[i].size != size)
        i++;
    if (i == info->nclasses) {
        if (i == TXN_INFO_CLASSES)
            i--; /* the largest objects share the last entry */
        else
            info->classes[info->nclasses++].size = size;
    }
    info->classes[i].count += n;
    info->classes[i].free += free;
}

/* The bits of a run's header past its blocks: never set by the allocator.
 * Pools of format 2 zeroed only the bitmap's words of a new run: there,
 * only the bits of its last word are known. */
static int spare_bits_clear(txn_pool *p, const uint64_t *bm, unsigned nb, unsigned *bad)
{
    unsigned end = POOL_FMT(p)->hdr->format > POOL_FORMAT_UNTAGGED ? RUN_HDR * 8 : (nb + 63) / 64 * 64;
    for (unsigned b = nb; b < end; b++)
        if (bm[b / 64] >> (b % 64) & 1) {
            *bad = b;
            return 0;
        }
    return 1;
}

int alloc_describe(txn_pool *p, txn_pool_info *info)
{
    uint64_t *t = ctab(p);
    size_t heap = pool_heap_chunks(p);
    info->heap_size = heap * (uint64_t)CHUNK_SIZE;
    uint64_t small[ALLOC_CLASSES] = {0}, sfree[ALLOC_CLASSES] = {0}, stretch = 0;
    for (size_t i = 0; i < heap; i++) {
        uint64_t e = t[i];
        unsigned k = ck_kind(e);
        stretch = k == CK_FREE ? stretch + CHUNK_SIZE : 0;
        if (stretch > info->free_extent)
            info->free_extent = stretch;
        if (k == CK_FREE) {
            info->heap_free += CHUNK_SIZE;
            info->free_chunks += CHUNK_SIZE;
        } else if (k == CK_LOG)
            info->heap_logs += CHUNK_SIZE;
        if (k != CK_RUN)
            continue;
        const uint64_t *bm = (const uint64_t *)chunk_addr(p, i);
        unsigned c = ck_class(e), nb = run_blocks(c), cnt = 0, bad;
        if (!spare_bits_clear(p, bm, nb, &bad))
            return REFUSE(TXN_E_CORRUPT, "allocator run at offset %#zx (chunk %zu, %u-byte "
                          "blocks): bitmap bit %u set past its %u blocks",
                          (size_t)(chunk_addr(p, i) - p->base), i, class_size[c], bad, nb);
        cnt = count_bits(bm, nb);
        small[c] += cnt;
        sfree[c] += (uint64_t)(nb - cnt) * class_size[c];
        info->heap_free += (uint64_t)(nb - cnt) * class_size[c];
    }
    for (unsigned c = 0; c < ALLOC_CLASSES; c++)
        if (small[c] || sfree[c])
            add_class(info, class_size[c], small[c], sfree[c]);
    for (size_t i = 0; i < heap; i++) /* then the large objects */
        if (ck_kind(t[i]) == CK_LARGE)
            add_class(info, ck_n(t[i]) * CHUNK_SIZE, 1, 0);
    return 0;
}
