/* wl_shared.c - the shared workload: every thread works on the same K
 * slots, each holding an object or nothing, under the scheduler's lock of
 * the slot (sim_lock): replace a slot's object (free the old one, allocate
 * one of several sizes, write it by ranges, words or after
 * txn_open(TXN_RW), read it back in the same transaction), change it in
 * place, read it (a transaction that only reads, which fills the inline
 * ways), or delete it. Thread 1 is mostly a deleter, as the key-value
 * store's expire thread is. One transaction in eight aborts.
 *
 * An object's bytes follow from its header (slot, version, size, seed):
 * a pattern in its first bytes and its last ones, zeros between, so a
 * recovered object checks itself and its header names the commit it came
 * from. The mirror is one for all threads; the digest of its K entries is
 * the state the global commit order reaches.
 *
 * A transaction that frees an object sometimes reads it again after the
 * free (as a store unlinks a freed item by its key): legal until the
 * commit, and it leaves the object in the thread's inline ways. Freed
 * blocks come back first to the thread that freed them, so that thread
 * then allocates the block it has a way for: what a thread that reads an
 * object another thread frees meets when the allocator's caches pass the
 * block on.
 *
 * CRASHSIM_SHARED_READBACK=0 leaves out the read back of a new or changed
 * object in its own transaction: a bug that reads wrong there (the stale
 * way above) then goes on to its commit, for the crash images to find.
 * CRASHSIM_SHARED_REREAD=0 leaves out the read after a free: a thread then
 * has a way for a freed block only when another thread freed it.
 *
 * CRASHSIM_SHARED_EARLY_UNLOCK=1 is a broken variant, for the checkers to
 * find: a change in place publishes its entry to the mirror and lets the
 * slot's lock go before its commit, with a switch point between. Another
 * thread then reads, changes or frees the object whose change is not yet
 * committed, or commits a state that holds the change; a crash before the
 * first commit rolls it back under what the second, committed, relied on.
 * (Only the change in place: a new object's allocation is not another
 * transaction's to use before it commits, and the run would fail.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum { K = 8, HDR = 32, PAT = 256, TAIL = 64, DELETER = 1 };
#define MAGIC 0x5348415245440000ull /* "SHARED\0\0" | slot */
#define BIG ((size_t)70 << 10)      /* more than a 64 KiB chunk: a multi-chunk block */

static const size_t sizes[] = {48, 64, 200, 1000, 5000};
/* Sizes of classes used one allocation in 16, each new to the pool at its
 * first use: a run of the class is then formatted, often in the chunks a
 * multi-chunk block just gave back (formats made durable outside any log,
 * which a replayed FREE record of the block must not undo). */
static const size_t rare[] = {2400, 3000, 6000, 7000, 10000, 12000, 14000, 16000};

/* A slot's object as committed; size 0: the slot is empty. */
struct ent {
    uint64_t size, version, seed;
};

/* The committed state. Slot i's entry is written by the thread holding
 * sim_lock(i), after its commit returned; the others read it only while
 * they hold the baton (the scheduler runs one thread at a time), and a
 * digest taken then is of committed entries only. */
static struct {
    struct ent e[K];
    uint64_t version; /* the last version given: by the baton holder */
    txn_obj *cell[K]; /* each slot's cell (its object's handle): set by
                         setup, read-only during the run */
} M;

/* A switch of the environment, on unless it is "0" (read once). */
static int knob(const char *name, int *cached)
{
    if (*cached < 0) {
        const char *v = getenv(name);
        *cached = !v || strcmp(v, "0");
    }
    return *cached;
}

/* Whether a transaction reads back what it wrote. */
static int readback(void)
{
    static int on = -1;
    return knob("CRASHSIM_SHARED_READBACK", &on);
}

/* The broken variant: the lock let go before the commit. */
static int early_unlock(void)
{
    static int on = -1;
    const char *v = getenv("CRASHSIM_SHARED_EARLY_UNLOCK");
    if (on < 0)
        on = v && !strcmp(v, "1");
    return on;
}

/* Whether a transaction reads an object again after freeing it. */
static int reread(void)
{
    static int on = -1;
    return knob("CRASHSIM_SHARED_REREAD", &on);
}

static uint64_t digest_of(const struct ent *e)
{
    return sim_hash(0x5348, e, sizeof(struct ent) * K);
}

static uint64_t shared_mirror(int t)
{
    (void)t;
    return digest_of(M.e);
}

/* The pattern of e's object in slot `slot`: its first `a` bytes after
 * the header, and its last `b` bytes. */
static void pattern(const struct ent *e, int slot, uint8_t *pa, size_t *a, uint8_t *pb,
                    size_t *b)
{
    size_t end = e->size < HDR + PAT ? (size_t)e->size : HDR + PAT;
    *a = end - HDR;
    *b = e->size >= HDR + PAT + TAIL ? TAIL : 0;
    uint64_t s = e->seed ^ e->version * 0x9e3779b97f4a7c15ull ^ (uint64_t)slot;
    sim_bytes(&s, pa, *a);
    sim_bytes(&s, pb, *b);
}

static void header(const struct ent *e, int slot, uint64_t h[4])
{
    h[0] = MAGIC | (uint64_t)slot;
    h[1] = e->version;
    h[2] = e->size;
    h[3] = e->seed;
}

/* Write e's header and pattern into o: by ranges, by words, or by ranges
 * after txn_open(TXN_RW), as `how` says (0, 1, 2). */
static int write_obj(txn *tx, txn_obj *o, int slot, const struct ent *e, unsigned how)
{
    uint64_t h[4];
    uint8_t pa[PAT], pb[TAIL];
    size_t a, b;
    header(e, slot, h);
    pattern(e, slot, pa, &a, pb, &b);
    if (how == 2 && !txn_open(tx, o, TXN_RW))
        return txn_last_error(tx) ? txn_last_error(tx) : TXN_E_INVAL;
    if (how == 1) {
        int rc = 0;
        for (size_t i = 0; !rc && i < 4; i++)
            rc = txn_write_u64(tx, o, 8 * i, h[i]);
        for (size_t i = 0; !rc && i < a; i += 8) {
            uint64_t w;
            memcpy(&w, pa + i, 8);
            rc = txn_write_u64(tx, o, HDR + i, w);
        }
        for (size_t i = 0; !rc && i < b; i += 8) {
            uint64_t w;
            memcpy(&w, pb + i, 8);
            rc = txn_write_u64(tx, o, e->size - b + i, w);
        }
        return rc;
    }
    int rc = txn_write(tx, o, 0, h, sizeof h);
    if (!rc && a)
        rc = txn_write(tx, o, HDR, pa, a);
    if (!rc && b)
        rc = txn_write(tx, o, e->size - b, pb, b);
    return rc;
}

static int say(const char *what, int slot, const struct ent *e)
{
    fprintf(stderr, "  shared: slot %d (version %llu, %llu bytes): %s\n", slot,
            (unsigned long long)e->version, (unsigned long long)e->size, what);
    return TXN_E_CORRUPT;
}

/* o's header is e's (words read one by one, as a reader of a key does). */
static int check_hdr(txn *tx, txn_obj *o, int slot, const struct ent *e)
{
    uint64_t h[4], w;
    header(e, slot, h);
    for (size_t i = 0; i < 4; i++) {
        int rc = txn_read_u64(tx, o, 8 * i, &w);
        if (rc)
            return rc;
        if (w != h[i])
            return say("header differs", slot, e);
    }
    return 0;
}

/* o holds e's object whole: header, pattern, zeros elsewhere. */
static int check_obj(txn *tx, txn_obj *o, int slot, const struct ent *e)
{
    uint64_t h[4], got[4];
    uint8_t pa[PAT], pb[TAIL], buf[PAT];
    size_t a, b, size = txn_obj_size(txn_pool_of(tx), o);
    if (size < e->size)
        return say("object smaller than its size", slot, e);
    header(e, slot, h);
    pattern(e, slot, pa, &a, pb, &b);
    int rc = txn_read(tx, o, 0, got, sizeof got);
    if (rc)
        return rc;
    if (memcmp(got, h, sizeof h))
        return say("header differs", slot, e);
    if ((rc = txn_read(tx, o, HDR, buf, a)))
        return rc;
    if (memcmp(buf, pa, a))
        return say("pattern at the start differs", slot, e);
    if (b && ((rc = txn_read(tx, o, e->size - b, buf, b))))
        return rc;
    if (b && memcmp(buf, pb, b))
        return say("pattern at the end differs", slot, e);
    /* zeros between the patterns and past the size */
    for (size_t off = HDR + a; off < size;) {
        if (off == e->size - b && b) {
            off += b;
            continue;
        }
        size_t n = size - off < sizeof buf ? size - off : sizeof buf;
        if (b && off < e->size - b && off + n > e->size - b)
            n = e->size - b - off;
        if ((rc = txn_read(tx, o, off, buf, n)))
            return rc;
        for (size_t i = 0; i < n; i++)
            if (buf[i])
                return say("a byte outside the pattern is not zero", slot, e);
        off += n;
    }
    return 0;
}

static int shared_setup(txn_pool *p, int t)
{
    txn *tx;
    memset(&M, 0, sizeof M);
    struct ent e[K] = {{0}};
    TRY(txn_begin(p, &tx));
    txn_obj *part = sim_part(tx, p, t);
    for (int i = 0; i < K; i++) {
        TRY(txn_alloc(tx, 16, &M.cell[i]));
        TRY(txn_write(tx, part, 8 * (size_t)i, &M.cell[i], 8));
        if (i % 2)
            continue;
        txn_obj *o;
        e[i] = (struct ent){sizes[i % 5], ++M.version, 0x1234567ull * (uint64_t)(i + 1)};
        TRY(txn_alloc(tx, e[i].size, &o));
        TRY(write_obj(tx, o, i, &e[i], 0));
        TRY(txn_write(tx, M.cell[i], 0, &o, 8));
    }
    int rc = sim_commit(tx, t, digest_of(e));
    if (!rc)
        memcpy(M.e, e, sizeof e);
    return rc;
}

enum op { OP_REPLACE, OP_MODIFY, OP_READ, OP_DELETE };

/* The transaction of `op` on `slot`, up to its commit: *ne is the slot's
 * entry if it commits. tx is aborted on an error. */
static int update(txn *tx, int slot, enum op op, uint64_t *rng, struct ent *ne)
{
    txn_obj *cell = M.cell[slot], *old = NULL;
    const struct ent *cur = &M.e[slot];
    *ne = *cur;
    TRY(txn_read(tx, cell, 0, &old, sizeof old));
    if (!old != !cur->size) {
        txn_abort(tx);
        return say(old ? "cell holds an object the mirror does not" : "cell is empty", slot,
                   cur);
    }
    if (op == OP_READ) {
        if (old)
            TRY(check_obj(tx, old, slot, cur));
        return 0;
    }
    if (op == OP_MODIFY && old) {
        ne->version = ++M.version;
        TRY(check_hdr(tx, old, slot, cur));
        TRY(write_obj(tx, old, slot, ne, (unsigned)(sim_rand(rng) % 3)));
        if (readback())
            TRY(check_obj(tx, old, slot, ne));
        return 0;
    }
    if (old) { /* a replace or a delete frees the old object */
        TRY(check_hdr(tx, old, slot, cur));
        TRY(txn_free(tx, old));
        sim_point_txn();
        if ((op == OP_DELETE || sim_rand(rng) % 2) && reread())
            TRY(check_hdr(tx, old, slot, cur)); /* read after the free */
    }
    if (op == OP_DELETE) {
        *ne = (struct ent){0, 0, 0};
        if (old)
            TRY(txn_write_u64(tx, cell, 0, 0));
        return 0;
    }
    uint64_t r = sim_rand(rng);
    size_t size = r % 16 == 0 ? BIG : r % 16 == 1 ? rare[r / 16 % 8] : sizes[r / 16 % 5];
    *ne = (struct ent){size, ++M.version, sim_rand(rng)};
    txn_obj *o;
    TRY(txn_alloc(tx, ne->size, &o));
    sim_point_txn();
    TRY(write_obj(tx, o, slot, ne, (unsigned)(r / 160 % 3)));
    if (readback())
        TRY(check_obj(tx, o, slot, ne));
    if (r / 480 % 2)
        TRY(txn_write(tx, cell, 0, &o, sizeof o));
    else
        TRY(txn_write_u64(tx, cell, 0, (uint64_t)(uintptr_t)o));
    return 0;
}

static int shared_step(txn_pool *p, int t, uint64_t *rng)
{
    uint64_t r = sim_rand(rng);
    int slot = (int)(r % K);
    enum op op;
    if (t == DELETER)
        op = r / K % 10 < 7 ? OP_DELETE : OP_READ;
    else {
        unsigned k = (unsigned)(r / K % 20);
        op = k < 2 ? OP_DELETE : k < 10 ? OP_REPLACE : k < 14 ? OP_MODIFY : OP_READ;
    }
    sim_point(); /* before txn_begin */
    sim_lock(slot);
    txn *tx;
    struct ent ne;
    int rc = txn_begin(p, &tx);
    if (!rc)
        rc = update(tx, slot, op, rng, &ne);
    if (!rc && op == OP_MODIFY && M.e[slot].size && early_unlock()) {
        if (sim_rand(rng) % 8 == 0) { /* sim_finish's abort, under the lock */
            txn_abort(tx);
            sim_unlock(slot);
            return 0;
        }
        M.e[slot] = ne; /* published, and the lock let go: the bug */
        sim_unlock(slot);
        for (int i = 0; i < 4; i++) /* more work before the commit */
            sim_point_txn();
        rc = sim_commit(tx, 0, digest_of(M.e));
        sim_point();
        return rc;
    }
    if (!rc) {
        sim_point_txn(); /* before the commit */
        if (op == OP_READ) {
            rc = txn_commit(tx);
        } else {
            /* the digest now: other threads may have committed while this
             * one waited for the baton */
            struct ent e[K];
            memcpy(e, M.e, sizeof e);
            e[slot] = ne;
            int committed;
            rc = sim_finish(tx, 0, rng, digest_of(e), &committed);
            if (committed)
                M.e[slot] = ne;
        }
        sim_point(); /* after the commit */
    }
    sim_unlock(slot);
    return rc;
}

static int shared_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    txn *tx;
    struct ent e[K] = {{0}};
    int bad = 0;
    if (txn_begin(p, &tx))
        return 1;
    txn_obj *part = sim_part(tx, p, t);
    for (int i = 0; i < K; i++) { /* every slot: the allocator oracle needs all they reach */
        txn_obj *cell = NULL, *o = NULL;
        uint64_t h[4];
        if (txn_read(tx, part, 8 * (size_t)i, &cell, 8) || !cell || reach_add(r, cell) ||
            txn_read(tx, cell, 0, &o, 8)) {
            fprintf(stderr, "  shared: slot %d: no cell\n", i);
            bad = 1;
            continue;
        }
        if (!o)
            continue;
        if (reach_add(r, o) || txn_read(tx, o, 0, h, sizeof h) || h[0] != (MAGIC | (uint64_t)i)) {
            fprintf(stderr, "  shared: slot %d: object %p without its header\n", i, (void *)o);
            bad = 1;
            continue;
        }
        e[i] = (struct ent){h[2], h[1], h[3]};
        if (e[i].size < 48 || e[i].size > BIG || e[i].size % 8 || check_obj(tx, o, i, &e[i]))
            bad = 1;
    }
    txn_abort(tx);
    *digest = digest_of(e);
    return bad;
}

const struct workload wl_shared = {"shared", 4u << 20, 8 * K, shared_setup, shared_step,
                                   shared_mirror, shared_read, WL_BY_NAME | WL_SHARED, NULL};
