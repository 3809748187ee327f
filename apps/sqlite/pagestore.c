/* pagestore.c - a file of bytes in a pmtx pool, in 4 KiB blocks, changed
 * by staged write sets that commit as one txn.h transaction each.
 *
 * Layout (every field a u64 or a txn_obj handle)
 *   root   {magic, version, block, size, dir, ndir}: `size` is the file's
 *          length in bytes; `dir` an object of `ndir` handles. The pool's
 *          root, or an object of a pool the program opened (pgs_adopt)
 *   dir    {leaf[ndir]}: leaf i maps blocks [i * LEAF_N, (i + 1) * LEAF_N)
 *   leaf   {block[LEAF_N]}: NULL for a block that reads as zeros
 *   block  PGS_BLOCK bytes of the file
 * The directory is sized when the pool is made, for as many blocks as the
 * pool could hold at its maximum (txn_pool_size), so it never moves: for
 * a pool that may grow to TXN_POOL_MAX, 512 KiB of handles, and 256 MiB of
 * addresses for its copy in DRAM (map_load), of which only the leaves in
 * use take memory; leaves are 4 KiB objects made
 * when their first block is, so a commit that grows the file writes one
 * small leaf and never a large table (cow copies what a commit writes).
 *
 * Why blocks of 4 KiB rather than extents: a block is what one SQLite page
 * is at the default page size, so a commit touches exactly the objects of
 * the pages it changed. cow copies every object a transaction writes and
 * incll logs an object of up to 4 KiB whole at its first write in an
 * epoch: with extents of many pages both would copy the whole extent for
 * one changed row. Other page sizes still work (a page is a part of a
 * block, or several blocks); only the number of objects per page changes.
 *
 * Invariants (map_load checks P1 and P2 at every open)
 *  P1 A non-NULL dir entry is an object of at least LEAF_N handles; a
 *     non-NULL leaf entry an object of at least PGS_BLOCK bytes.
 *  P2 size <= ndir * LEAF_N * PGS_BLOCK.
 *  P3 Every byte of a block at or past `size` is zero, and no block lies
 *     wholly at or past `size` (a shrinking commit frees them): the file
 *     can grow again by changing `size` alone.
 *  P4 A leaf exists exactly while it maps a block.
 *  P5 Nothing changes the pool but pgs_commit, in one transaction: after
 *     a crash the file is as its last durable commit left it.
 *
 * The staged view (what the writer reads between its first write and its
 * commit): staged blocks hold their whole content, in DRAM; `low` is the
 * lowest size the file had since the last commit; an unstaged block that
 * starts at or past `low` reads as zeros (the writer cut the file there),
 * one that starts below it reads from the pool (whose bytes from `low` on
 * are zero: by P3 when low is the committed size, else because the cut
 * staged the block holding `low` with its tail zeroed). The commit frees
 * the unstaged blocks from `low` on and writes the staged ones.
 *
 * A commit writes only what changed: each staged block is compared with
 * the pool's copy word by word, and the runs of changed words (merged
 * when less than GAP bytes apart) are written, one txn_write each. What
 * that logs and flushes per engine: docs/sqlite.md.
 */
#include "pagestore.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "txn.h"

#define MAGIC 0x31627173786d70ULL /* "pmxsqb1" */
#define VERSION 1                 /* of the layout above */
#define LEAF_N 512u               /* handles per leaf: a 4 KiB object */
#define LEAF_BYTES (LEAF_N * 8u)
#ifndef PGS_GAP                   /* a build option for measuring it (docs/sqlite.md) */
#define PGS_GAP 64u
#endif
#define GAP PGS_GAP                /* changed runs closer than this merge */
#define WORD 8u

enum { R_MAGIC = 0, R_VERSION = 8, R_BLOCK = 16, R_SIZE = 24, R_DIR = 32, R_NDIR = 40,
       ROOT_SIZE = PGS_ROOT_SIZE };

/* A staged block: its index in the file and its whole content. */
struct sblk {
    uint64_t idx;
    unsigned char *data; /* NULL: an empty slot of the table */
};

/* The write set of the current writer. */
struct stage {
    struct sblk *tab; /* open addressing by idx; cap is a power of two */
    size_t cap, n;
    uint64_t size;    /* the file's size as staged */
    uint64_t low;     /* the lowest size since the last commit */
    int active;       /* something is staged */
};

struct pgs {
    txn_pool *p;
    txn_obj *root, *dir;
    uint64_t ndir;         /* entries of dir */
    uint64_t nmax;         /* blocks the map can address: ndir * LEAF_N */
    txn_obj **leaf;        /* DRAM copy of dir */
    txn_obj **blk;         /* DRAM copy of every leaf: blk[i] maps block i */
    uint32_t *used;        /* per leaf: its non-NULL entries */
    uint64_t size;         /* committed size */
    pthread_rwlock_t lock; /* pgs_commit exclusive, pool reads shared */
    struct stage st;
    int broken;            /* the map could not be read again after a failed
                              commit: it may name rolled-back objects */
    int own;               /* the pool is the store's (pgs_open): closed with it */
    int (*commit)(txn *tx, void *arg); /* pgs_adopt's hook, or NULL */
    void *commit_arg;
};

static __thread char why_buf[512];

const char *pgs_why(void)
{
    return why_buf;
}

/* Record why a call fails and return rc. */
__attribute__((format(printf, 2, 3))) static int fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why_buf, sizeof why_buf, fmt, ap);
    va_end(ap);
    return rc;
}

/* TXN_E_IO once the DRAM map may be wrong (see pgs_commit). */
static int usable(const pgs *s)
{
    return s->broken ? fail(TXN_E_IO, "the block map was lost after a failed commit: "
                                      "close and reopen the database")
                     : 0;
}

static inline uint64_t blocks_for(uint64_t bytes)
{
    return bytes / PGS_BLOCK + (bytes % PGS_BLOCK != 0);
}

/* ---- the staged blocks: a small hash table */

static size_t slot_of(const struct stage *st, uint64_t idx)
{
    return (size_t)(idx * 0x9e3779b97f4a7c15ull >> 17) & (st->cap - 1);
}

static struct sblk *stage_find(const struct stage *st, uint64_t idx)
{
    if (!st->cap)
        return NULL;
    for (size_t i = slot_of(st, idx);; i = (i + 1) & (st->cap - 1)) {
        if (!st->tab[i].data)
            return NULL;
        if (st->tab[i].idx == idx)
            return &st->tab[i];
    }
}

static void stage_put(struct stage *st, uint64_t idx, unsigned char *data)
{
    size_t i = slot_of(st, idx);
    while (st->tab[i].data)
        i = (i + 1) & (st->cap - 1);
    st->tab[i] = (struct sblk){idx, data};
    st->n++;
}

/* Room for one more block at a load of at most one half. */
static int stage_reserve(struct stage *st)
{
    if (2 * (st->n + 1) <= st->cap)
        return 0;
    size_t cap = st->cap ? 2 * st->cap : 64;
    struct sblk *old = st->tab, *tab = calloc(cap, sizeof *tab);
    if (!tab)
        return fail(TXN_E_NOMEM, "staging a block: out of memory");
    size_t oldcap = st->cap;
    st->tab = tab;
    st->cap = cap;
    st->n = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].data)
            stage_put(st, old[i].idx, old[i].data);
    free(old);
    return 0;
}

/* Keep only the staged blocks that start below `end` (a cut file): the
 * others are dropped and the rest put in a new table (removal would break
 * the probe chains of a linear-probing table). */
static int stage_cut(struct stage *st, uint64_t end)
{
    if (!st->cap)
        return 0;
    struct sblk *old = st->tab, *tab = calloc(st->cap, sizeof *tab);
    if (!tab)
        return fail(TXN_E_NOMEM, "cutting the staged file: out of memory");
    st->tab = tab;
    st->n = 0;
    for (size_t i = 0; i < st->cap; i++) {
        if (!old[i].data)
            continue;
        if (old[i].idx * PGS_BLOCK < end)
            stage_put(st, old[i].idx, old[i].data);
        else
            free(old[i].data);
    }
    free(old);
    return 0;
}

static void stage_clear(struct stage *st, uint64_t size)
{
    for (size_t i = 0; i < st->cap; i++)
        free(st->tab[i].data);
    free(st->tab);
    *st = (struct stage){.size = size, .low = size};
}

/* ---- reading the pool */

/* Copy n bytes at `boff` of committed block idx into dst, in transaction
 * tx; a block that is not there reads as zeros. */
static int read_block(pgs *s, txn *tx, uint64_t idx, size_t boff, void *dst, size_t n)
{
    txn_obj *b = idx < s->nmax ? s->blk[idx] : NULL;
    if (!b) {
        memset(dst, 0, n);
        return 0;
    }
    int rc = txn_read(tx, b, boff, dst, n);
    return rc ? fail(rc, "reading block %llu: %s", (unsigned long long)idx, txn_strerror(rc)) : 0;
}

/* A read-only transaction around pool reads: begun at the first, ended by
 * read_end. txn.h reads need a transaction; one costs no barrier on every
 * engine but pmdk (docs/sqlite.md). */
static int read_tx(pgs *s, txn **tx)
{
    if (*tx)
        return 0;
    int rc = txn_begin(s->p, tx);
    return rc ? fail(rc, "beginning a read: %s", txn_strerror(rc)) : 0;
}

static int read_end(txn *tx, int rc)
{
    if (tx) {
        int c = txn_commit(tx);
        if (!rc && c)
            rc = fail(c, "ending a read: %s", txn_strerror(c));
    }
    return rc;
}

/* Whole block idx as the staged view has it, into dst (PGS_BLOCK bytes). */
static int staged_block(pgs *s, txn **tx, uint64_t idx, unsigned char *dst)
{
    if (idx * PGS_BLOCK >= s->st.low) {
        memset(dst, 0, PGS_BLOCK);
        return 0;
    }
    int rc = read_tx(s, tx);
    return rc ? rc : read_block(s, *tx, idx, 0, dst, PGS_BLOCK);
}

uint64_t pgs_size(pgs *s, int staged)
{
    if (staged)
        return s->st.size;
    pthread_rwlock_rdlock(&s->lock);
    uint64_t size = s->size;
    pthread_rwlock_unlock(&s->lock);
    return size;
}

int pgs_read(pgs *s, int staged, void *dst, size_t n, uint64_t off, size_t *got)
{
    unsigned char *d = dst;
    txn *tx = NULL;
    pthread_rwlock_rdlock(&s->lock);
    int rc = usable(s);
    uint64_t size = staged ? s->st.size : s->size;
    size_t in = rc || off >= size ? 0 : (size - off < n ? (size_t)(size - off) : n);
    memset(d + in, 0, n - in);
    for (size_t done = 0; done < in && !rc;) {
        uint64_t pos = off + done, idx = pos / PGS_BLOCK;
        size_t boff = (size_t)(pos % PGS_BLOCK), k = PGS_BLOCK - boff;
        if (k > in - done)
            k = in - done;
        const struct sblk *b = staged ? stage_find(&s->st, idx) : NULL;
        if (b)
            memcpy(d + done, b->data + boff, k);
        else if (staged && idx * PGS_BLOCK >= s->st.low)
            memset(d + done, 0, k);
        else if (!(rc = read_tx(s, &tx)))
            rc = read_block(s, tx, idx, boff, d + done, k);
        done += k;
    }
    rc = read_end(tx, rc);
    pthread_rwlock_unlock(&s->lock);
    *got = in;
    return rc;
}

/* ---- staging */

/* The staged copy of block idx, made if need be: filled with the block as
 * the staged view has it, unless the caller overwrites all of it. */
static int stage_get(pgs *s, uint64_t idx, int whole, unsigned char **out)
{
    struct sblk *b = stage_find(&s->st, idx);
    if (b) {
        *out = b->data;
        return 0;
    }
    int rc = stage_reserve(&s->st);
    unsigned char *data = rc ? NULL : malloc(PGS_BLOCK);
    if (!rc && !data)
        rc = fail(TXN_E_NOMEM, "staging a block: out of memory");
    if (!rc && !whole) {
        txn *tx = NULL;
        pthread_rwlock_rdlock(&s->lock);
        rc = read_end(tx, staged_block(s, &tx, idx, data));
        pthread_rwlock_unlock(&s->lock);
    }
    if (rc) {
        free(data);
        return rc;
    }
    stage_put(&s->st, idx, data);
    *out = data;
    return 0;
}

static int check_room(const pgs *s, uint64_t end)
{
    if (end / PGS_BLOCK > s->nmax || (end / PGS_BLOCK == s->nmax && end % PGS_BLOCK))
        return fail(TXN_E_NOSPACE, "a file of %llu bytes does not fit the pool's map (%llu bytes)",
                    (unsigned long long)end, (unsigned long long)(s->nmax * PGS_BLOCK));
    return 0;
}

int pgs_stage_write(pgs *s, const void *src, size_t n, uint64_t off)
{
    const unsigned char *from = src;
    uint64_t end = off + n;
    int rc = usable(s);
    if (!rc)
        rc = end < off ? fail(TXN_E_NOSPACE, "write past 2^64 bytes") : check_room(s, end);
    for (size_t done = 0; !rc && done < n;) {
        uint64_t pos = off + done, idx = pos / PGS_BLOCK;
        size_t boff = (size_t)(pos % PGS_BLOCK), k = PGS_BLOCK - boff;
        if (k > n - done)
            k = n - done;
        unsigned char *data;
        if (!(rc = stage_get(s, idx, k == PGS_BLOCK, &data)))
            memcpy(data + boff, from + done, k);
        done += k;
    }
    if (rc)
        return rc;
    if (end > s->st.size)
        s->st.size = end;
    s->st.active = 1;
    return 0;
}

int pgs_stage_truncate(pgs *s, uint64_t size)
{
    int rc = usable(s);
    if (!rc)
        rc = check_room(s, size);
    if (rc || size >= s->st.size) {
        if (!rc) {
            s->st.size = size; /* grown: the new bytes read as zeros (P3) */
            s->st.active = 1;
        }
        return rc;
    }
    size_t tail = (size_t)(size % PGS_BLOCK);
    unsigned char *data = NULL;
    struct sblk *b = stage_find(&s->st, size / PGS_BLOCK);
    if (b)
        data = b->data;
    else if (tail && size < s->st.low && (rc = stage_get(s, size / PGS_BLOCK, 0, &data)))
        return rc; /* the block holding the new end: staged before low moves */
    if ((rc = stage_cut(&s->st, blocks_for(size) * PGS_BLOCK)))
        return rc;
    if (data && tail)
        memset(data + tail, 0, PGS_BLOCK - tail);
    if (size < s->st.low)
        s->st.low = size;
    s->st.size = size;
    s->st.active = 1;
    return 0;
}

void pgs_discard(pgs *s)
{
    stage_clear(&s->st, pgs_size(s, 0));
}

/* ---- committing */

static int by_idx(const void *a, const void *b)
{
    uint64_t x = ((const struct sblk *)a)->idx, y = ((const struct sblk *)b)->idx;
    return (x > y) - (x < y);
}

static inline uint64_t word_at(const unsigned char *p, size_t i)
{
    uint64_t w;
    memcpy(&w, p + i, WORD);
    return w;
}

/* Write to o the words of `want` that differ from `have`: a txn_write per
 * run of changed words, runs less than GAP bytes apart written as one
 * (fewer log records and barriers for a few unchanged bytes more). */
static int write_changes(txn *tx, txn_obj *o, const unsigned char *have,
                         const unsigned char *want)
{
    size_t i = 0;
    while (i < PGS_BLOCK) {
        while (i < PGS_BLOCK && word_at(have, i) == word_at(want, i))
            i += WORD;
        if (i == PGS_BLOCK)
            break;
        size_t start = i, end = i + WORD;
        for (i += WORD; i < PGS_BLOCK && i - end < GAP; i += WORD)
            if (word_at(have, i) != word_at(want, i))
                end = i + WORD;
        int rc = txn_write(tx, o, start, want + start, end - start);
        if (rc)
            return rc;
    }
    return 0;
}

static int all_zero(const unsigned char *p)
{
    for (size_t i = 0; i < PGS_BLOCK; i += WORD)
        if (word_at(p, i))
            return 0;
    return 1;
}

/* Free block idx (and its leaf when that was its last block). */
static int drop_block(pgs *s, txn *tx, uint64_t idx)
{
    uint64_t l = idx / LEAF_N;
    int rc = txn_free(tx, s->blk[idx]);
    if (!rc && --s->used[l] == 0) {
        rc = txn_free(tx, s->leaf[l]);
        if (!rc)
            rc = txn_write_u64(tx, s->dir, l * 8, 0);
        s->leaf[l] = NULL;
    } else if (!rc) {
        rc = txn_write_u64(tx, s->leaf[l], (idx % LEAF_N) * 8, 0);
    }
    s->blk[idx] = NULL;
    return rc;
}

/* A new zero-filled block idx, with its leaf if that is new too. */
static int add_block(pgs *s, txn *tx, uint64_t idx)
{
    uint64_t l = idx / LEAF_N;
    txn_obj *o;
    int rc;
    if (!s->leaf[l]) {
        if ((rc = txn_alloc(tx, LEAF_BYTES, &o)) ||
            (rc = txn_write_u64(tx, s->dir, l * 8, (uint64_t)(uintptr_t)o)))
            return rc;
        s->leaf[l] = o;
    }
    if ((rc = txn_alloc(tx, PGS_BLOCK, &o)) ||
        (rc = txn_write_u64(tx, s->leaf[l], (idx % LEAF_N) * 8, (uint64_t)(uintptr_t)o)))
        return rc;
    s->blk[idx] = o;
    s->used[l]++;
    return 0;
}

/* Write staged block b into the pool: only its changed words. */
static int apply_block(pgs *s, txn *tx, const struct sblk *b, unsigned char *have)
{
    txn_obj *o = s->blk[b->idx];
    int zero = all_zero(b->data), rc;
    if (!o && zero)
        return 0; /* a missing block reads as zeros already */
    if (o && zero)
        return drop_block(s, tx, b->idx);
    if (o) {
        if ((rc = txn_read(tx, o, 0, have, PGS_BLOCK)))
            return rc;
    } else {
        if ((rc = add_block(s, tx, b->idx)))
            return rc;
        memset(have, 0, PGS_BLOCK);
        o = s->blk[b->idx];
    }
    return write_changes(tx, o, have, b->data);
}

static int apply(pgs *s, txn *tx)
{
    struct stage *st = &s->st;
    unsigned char *have = malloc(PGS_BLOCK);
    struct sblk *list = malloc((st->n ? st->n : 1) * sizeof *list);
    int rc = 0;
    if (!have || !list) {
        rc = TXN_E_NOMEM;
        goto out;
    }
    /* the blocks the writer cut away: from `low` on, unless staged again */
    for (uint64_t i = blocks_for(st->low); !rc && i < blocks_for(s->size) && i < s->nmax; i++)
        if (s->blk[i] && !stage_find(st, i))
            rc = drop_block(s, tx, i);
    size_t n = 0;
    for (size_t i = 0; i < st->cap; i++)
        if (st->tab[i].data)
            list[n++] = st->tab[i];
    /* in file order: neighbouring pages are neighbours in their leaf */
    qsort(list, n, sizeof *list, by_idx);
    for (size_t i = 0; !rc && i < n; i++)
        rc = apply_block(s, tx, &list[i], have);
    if (!rc && st->size != s->size)
        rc = txn_write_u64(tx, s->root, R_SIZE, st->size);
out:
    free(have);
    free(list);
    return rc;
}

static int map_load(pgs *s);

/* After a failed commit: the map in DRAM followed the aborted transaction,
 * so read it again from the pool, which the abort left as it was. Should
 * that fail too, the store refuses everything until it is reopened. */
static void map_reload(pgs *s, int rc)
{
    char why[sizeof why_buf];
    memcpy(why, why_buf, sizeof why);
    int lrc = map_load(s);
    memcpy(why_buf, why, sizeof why);
    if (lrc) {
        s->broken = 1;
        fail(rc, "%s; then reloading the block map: %s", why, txn_strerror(lrc));
    }
}

int pgs_commit(pgs *s)
{
    if (!s->st.active)
        return 0;
    txn *tx;
    pthread_rwlock_wrlock(&s->lock);
    int rc = usable(s);
    if (!rc && (rc = txn_begin(s->p, &tx))) {
        fail(rc, "beginning the commit: %s", txn_strerror(rc));
    } else if (!rc) {
        if ((rc = apply(s, tx))) {
            fail(rc, "applying the commit: %s", txn_strerror(rc));
            txn_abort(tx);
        } else if ((rc = s->commit ? s->commit(tx, s->commit_arg) : txn_commit(tx))) {
            fail(rc, "committing: %s", txn_strerror(rc));
        }
        if (rc)
            map_reload(s, rc);
        else
            s->size = s->st.size;
    }
    pthread_rwlock_unlock(&s->lock);
    stage_clear(&s->st, s->size);
    return rc;
}

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(pgs *const *)a, y = (uintptr_t)*(pgs *const *)b;
    return (x > y) - (x < y);
}

/* The staged changes of every store in one transaction over their pools:
 * begun on the first store's, the other pools joined (txn_join); stores
 * on one pool apply to that pool's one transaction (its own for the
 * first pool, the part for another). Each store's lock is taken, in
 * address order (no two commits wait for each other). */
static int commit_joined(pgs **s, size_t n)
{
    pgs *order[PGS_COMMIT_MAX];
    memcpy(order, s, n * sizeof *s);
    qsort(order, n, sizeof *order, by_addr);
    for (size_t i = 0; i < n; i++)
        pthread_rwlock_wrlock(&order[i]->lock);
    txn *tx[PGS_COMMIT_MAX] = {NULL}; /* the first store's, then the parts */
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++)
        rc = usable(s[i]);
    if (!rc && (rc = txn_begin(s[0]->p, &tx[0])))
        fail(rc, "beginning the commit: %s", txn_strerror(rc));
    for (size_t i = 1; !rc && i < n; i++)
        if (s[i]->p == s[0]->p) /* txn_join takes no pool twice: its own is tx[0] */
            tx[i] = tx[0];
        else if ((rc = txn_join(tx[0], s[i]->p, &tx[i])) && rc != TXN_E_NOTSUP)
            fail(rc, "joining a database's pool to the commit: %s", txn_strerror(rc));
    for (size_t i = 0; !rc && i < n; i++)
        if ((rc = apply(s[i], tx[i])))
            fail(rc, "applying the commit: %s", txn_strerror(rc));
    if (rc && tx[0])
        txn_abort(tx[0]); /* and its parts */
    else if (!rc && (rc = txn_commit(tx[0])))
        fail(rc, "committing: %s", txn_strerror(rc));
    for (size_t i = 0; i < n; i++) {
        if (rc && tx[0] && rc != TXN_E_NOTSUP)
            map_reload(s[i], rc);
        else if (!rc)
            s[i]->size = s[i]->st.size;
    }
    for (size_t i = 0; i < n; i++)
        pthread_rwlock_unlock(&order[i]->lock);
    for (size_t i = 0; !rc && i < n; i++)
        stage_clear(&s[i]->st, s[i]->size);
    return rc;
}

int pgs_commit_many(pgs **s, size_t n)
{
    pgs *w[PGS_COMMIT_MAX];
    size_t k = 0;
    int alone = 0; /* a store whose host ends its commits */
    if (n > PGS_COMMIT_MAX)
        return fail(TXN_E_INVAL, "%zu stores in one commit: at most %u", n, PGS_COMMIT_MAX);
    for (size_t i = 0; i < n; i++) /* the stores with something staged, once each */
        if (s[i]->commit) {
            alone = 1;
        } else if (s[i]->st.active) {
            int seen = 0;
            for (size_t j = 0; j < k; j++)
                seen |= w[j] == s[i];
            if (!seen)
                w[k++] = s[i];
        }
    int rc = k > 1 && !alone ? commit_joined(w, k) : TXN_E_NOTSUP;
    if (rc != TXN_E_NOTSUP) {
        if (rc) /* each store's staged changes dropped, as pgs_commit does */
            for (size_t i = 0; i < n; i++)
                stage_clear(&s[i]->st, s[i]->size);
        return rc;
    }
    /* one store, a hosted one, or an engine that cannot join: one commit
     * each */
    for (size_t i = 0; i < n; i++) {
        int c = pgs_commit(s[i]);
        rc = rc && rc != TXN_E_NOTSUP ? rc : c;
    }
    return rc == TXN_E_NOTSUP ? 0 : rc;
}

int pgs_sync(pgs *s)
{
    int rc = txn_sync(s->p);
    return rc ? fail(rc, "sync: %s", txn_strerror(rc)) : 0;
}

/* ---- opening */

/* Read root, dir and leaves into s, checking P1 and P2. */
static int map_load(pgs *s)
{
    txn *tx;
    uint64_t magic = 0, version = 0, block = 0, size = 0, ndir = 0;
    txn_obj *dir = NULL;
    int rc = txn_begin(s->p, &tx);
    if (rc)
        return fail(rc, "reading the block map: %s", txn_strerror(rc));
    if ((rc = txn_read_u64(tx, s->root, R_MAGIC, &magic)) ||
        (rc = txn_read_u64(tx, s->root, R_VERSION, &version)) ||
        (rc = txn_read_u64(tx, s->root, R_BLOCK, &block)) ||
        (rc = txn_read_u64(tx, s->root, R_SIZE, &size)) ||
        (rc = txn_read(tx, s->root, R_DIR, &dir, sizeof dir)) ||
        (rc = txn_read_u64(tx, s->root, R_NDIR, &ndir))) {
        rc = fail(TXN_E_CORRUPT, "root object too small for %s", PGS_LAYOUT);
        goto out;
    }
    if (magic != MAGIC) {
        rc = fail(TXN_E_CORRUPT, "root: magic %#llx is not %s's", (unsigned long long)magic,
                  PGS_LAYOUT);
        goto out;
    }
    if (version != VERSION || block != PGS_BLOCK) {
        rc = fail(TXN_E_LAYOUTVER, "root: version %llu, block %llu bytes; this build reads "
                  "version %d, %u", (unsigned long long)version, (unsigned long long)block,
                  VERSION, PGS_BLOCK);
        goto out;
    }
    if (!ndir || ndir > UINT64_MAX / 8 / LEAF_N || txn_obj_size(s->p, dir) / 8 < ndir) {
        rc = fail(TXN_E_CORRUPT, "root: directory of %llu entries not an object that holds "
                  "them", (unsigned long long)ndir);
        goto out;
    }
    if (size > ndir * LEAF_N * PGS_BLOCK) {
        rc = fail(TXN_E_CORRUPT, "root: size %llu past the map's %llu bytes",
                  (unsigned long long)size, (unsigned long long)(ndir * LEAF_N * PGS_BLOCK));
        goto out;
    }
    int fresh = ndir != s->ndir; /* the copy's arrays new, zero */
    if (fresh) {
        free(s->leaf);
        free(s->blk);
        free(s->used);
        s->leaf = calloc(ndir, sizeof *s->leaf);
        s->blk = calloc(ndir * LEAF_N, sizeof *s->blk);
        s->used = calloc(ndir, sizeof *s->used);
        s->ndir = s->nmax = 0;
        if (!s->leaf || !s->blk || !s->used) {
            rc = fail(TXN_E_NOMEM, "the block map of %llu leaves: out of memory",
                      (unsigned long long)ndir);
            goto out;
        }
    }
    s->dir = dir;
    s->ndir = ndir;
    s->nmax = ndir * LEAF_N;
    s->size = size;
    for (uint64_t l = 0; l < ndir; l++) {
        txn_obj **m = s->blk + l * LEAF_N;
        s->used[l] = 0;
        if ((rc = txn_read(tx, dir, l * 8, &s->leaf[l], sizeof s->leaf[l]))) {
            fail(rc, "directory entry %llu: %s", (unsigned long long)l, txn_strerror(rc));
            goto out;
        }
        if (!s->leaf[l]) {
            if (!fresh) /* a fresh array stays untouched: no memory */
                memset(m, 0, LEAF_N * sizeof *m);
            continue;
        }
        if (txn_obj_size(s->p, s->leaf[l]) < LEAF_BYTES) {
            rc = fail(TXN_E_CORRUPT, "directory entry %llu is not a leaf of the pool",
                      (unsigned long long)l);
            goto out;
        }
        if ((rc = txn_read(tx, s->leaf[l], 0, m, LEAF_BYTES))) {
            fail(rc, "leaf %llu: %s", (unsigned long long)l, txn_strerror(rc));
            goto out;
        }
        for (unsigned i = 0; i < LEAF_N; i++) {
            if (!m[i])
                continue;
            if (txn_obj_size(s->p, m[i]) < PGS_BLOCK) {
                rc = fail(TXN_E_CORRUPT, "leaf %llu entry %u is not a block of the pool",
                          (unsigned long long)l, i);
                goto out;
            }
            s->used[l]++;
        }
    }
out:
    txn_commit(tx);
    return rc;
}

/* Write a fresh root and directory into a new pool (or one whose making
 * was cut short before this, root still all zero): one transaction. */
static int map_init(pgs *s, uint64_t file_size)
{
    uint64_t ndir = blocks_for(file_size) / LEAF_N + 1;
    txn *tx;
    txn_obj *dir;
    int rc = txn_begin(s->p, &tx);
    if (rc)
        return fail(rc, "making the block map: %s", txn_strerror(rc));
    if ((rc = txn_alloc(tx, ndir * 8, &dir)) ||
        (rc = txn_write_u64(tx, s->root, R_VERSION, VERSION)) ||
        (rc = txn_write_u64(tx, s->root, R_BLOCK, PGS_BLOCK)) ||
        (rc = txn_write_u64(tx, s->root, R_SIZE, 0)) ||
        (rc = txn_write(tx, s->root, R_DIR, &dir, sizeof dir)) ||
        (rc = txn_write_u64(tx, s->root, R_NDIR, ndir)) ||
        (rc = txn_write_u64(tx, s->root, R_MAGIC, MAGIC))) {
        txn_abort(tx);
        return fail(rc, "making the block map: %s", txn_strerror(rc));
    }
    rc = txn_commit(tx);
    return rc ? fail(rc, "making the block map: %s", txn_strerror(rc)) : 0;
}

/* Whether the root is all zero: a pool whose making was cut short. */
static int root_blank(pgs *s)
{
    txn *tx;
    unsigned char r[ROOT_SIZE], zero[ROOT_SIZE] = {0};
    if (txn_obj_size(s->p, s->root) < ROOT_SIZE || txn_begin(s->p, &tx))
        return 0;
    int rc = txn_read(tx, s->root, 0, r, sizeof r);
    txn_commit(tx);
    return !rc && !memcmp(r, zero, sizeof r);
}

/* A store with no pool yet. */
static pgs *store_new(void)
{
    pgs *s = calloc(1, sizeof *s);
    *why_buf = '\0';
    if (!s) {
        fail(TXN_E_NOMEM, "out of memory");
        return NULL;
    }
    pthread_rwlock_init(&s->lock, NULL);
    return s;
}

/* Free what store_new and map_load made (the pool is the caller's). */
static void store_free(pgs *s)
{
    stage_clear(&s->st, 0);
    free(s->leaf);
    free(s->blk);
    free(s->used);
    pthread_rwlock_destroy(&s->lock);
    free(s);
}

int pgs_open(const char *path, const struct pgs_opts *o, pgs **out, int *created)
{
    char file[4096];
    pgs *s = store_new();
    int rc, made = 0;
    *created = 0;
    if (!s)
        return TXN_E_NOMEM;
    s->own = 1;
    if (o->view) {
        rc = txn_pool_view(path, PGS_LAYOUT, &s->p);
    } else {
        rc = txn_pool_open(path, PGS_LAYOUT, &s->p);
        if (rc == TXN_E_NOENT && o->create) {
            txn_pool_opts po = {.size = o->pool_size, .root_size = ROOT_SIZE,
                                .max_size = o->pool_max};
            if (!po.size) { /* small, growing as the database does */
                txn_pool_opts least = {.root_size = ROOT_SIZE}; /* its threads' logs */
                size_t min = txn_pool_min_size(&least);
                po.size = min > PGS_START ? min : PGS_START;
                if (po.max_size && po.size > po.max_size)
                    po.size = po.max_size;
            }
            rc = txn_pool_create(path, PGS_LAYOUT, &po, &s->p);
            made = !rc;
        }
    }
    if (rc) {
        fail(rc, "%s", txn_pool_strerror(rc));
        goto fail;
    }
    s->root = txn_root(s->p);
    if ((made || root_blank(s)) && !o->view) {
        size_t max;
        txn_pool_size(s->p, NULL, &max); /* what the pool may grow to */
        if ((rc = map_init(s, (uint64_t)max)))
            goto fail;
    }
    if ((rc = map_load(s)))
        goto fail;
    stage_clear(&s->st, s->size);
    *out = s;
    *created = made;
    return 0;
fail:
    if (s->p)
        txn_pool_close(s->p);
    if (made && !txn_pool_path(path, file, sizeof file))
        unlink(file); /* the pool this call made, unusable: gone again */
    store_free(s);
    return rc;
}

int pgs_adopt(const struct pgs_host *h, pgs **out)
{
    pgs *s = store_new();
    int rc;
    if (!s)
        return TXN_E_NOMEM;
    s->p = h->pool;
    s->root = h->root;
    s->commit = h->commit;
    s->commit_arg = h->commit_arg;
    rc = root_blank(s) ? map_init(s, h->max_bytes) : 0;
    if (!rc)
        rc = map_load(s);
    if (rc) {
        store_free(s);
        return rc;
    }
    stage_clear(&s->st, s->size);
    *out = s;
    return 0;
}

void pgs_close(pgs *s)
{
    if (!s)
        return;
    if (s->own)
        txn_pool_close(s->p);
    store_free(s);
}

/* ---- the objects of the map */

int pgs_objects(pgs *s, int (*fn)(txn_obj *o, void *arg), void *arg)
{
    txn *tx = NULL;
    pthread_rwlock_rdlock(&s->lock);
    int rc = usable(s);
    if (!rc)
        rc = fn(s->dir, arg);
    for (uint64_t l = 0; !rc && l < s->ndir; l++) {
        if (!s->leaf[l])
            continue;
        if (!s->used[l]) {
            rc = fail(TXN_E_CORRUPT, "leaf %llu maps no block (P4)", (unsigned long long)l);
            break;
        }
        rc = fn(s->leaf[l], arg);
        for (uint64_t i = l * LEAF_N; !rc && i < (l + 1) * LEAF_N; i++) {
            if (!s->blk[i])
                continue;
            if (i * PGS_BLOCK >= s->size)
                rc = fail(TXN_E_CORRUPT, "block %llu lies past the file's %llu bytes (P3)",
                          (unsigned long long)i, (unsigned long long)s->size);
            else
                rc = fn(s->blk[i], arg);
        }
    }
    /* the tail of the last block, past the end of the file, reads zero (P3) */
    size_t tail = (size_t)(s->size % PGS_BLOCK);
    uint64_t last = s->size / PGS_BLOCK;
    if (!rc && tail && last < s->nmax && s->blk[last]) {
        unsigned char b[PGS_BLOCK], zero[PGS_BLOCK] = {0};
        if (!(rc = read_tx(s, &tx)) && !(rc = read_block(s, tx, last, tail, b, PGS_BLOCK - tail)) &&
            memcmp(b, zero, PGS_BLOCK - tail))
            rc = fail(TXN_E_CORRUPT, "block %llu holds bytes past the file's end (P3)",
                      (unsigned long long)last);
    }
    rc = read_end(tx, rc);
    pthread_rwlock_unlock(&s->lock);
    return rc;
}
