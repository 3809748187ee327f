/* mt_node.c - Masstree node pool, epoch-based reclamation, node locks, and
 * operations' writes (a DRAM store, and a txn_write to the node's mirror).
 *
 * Node pool. One mmap'd region (reserved, not committed) handed out in
 * chunks to threads; each thread keeps a free list. Nodes are never given
 * back to the system: the MT+ allocator.
 *
 * Epochs. A reader or writer announces the global epoch while it runs an
 * operation. A node unlinked in epoch e is freed once the global epoch is
 * e + 2: the epoch only advances when every running operation announced
 * the current one, so no operation that could have reached the node is
 * still running. Every thread tries to advance it after RETIRE_BATCH
 * retires (the global barrier per epoch of MT+).
 */
#define _GNU_SOURCE
#include "mt_node.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define POOL_BYTES (64ull << 30) /* address space reserved for nodes */
#define CHUNK_NODES 1024
#define MAX_THREADS 256
#define RETIRE_BATCH 64

static char *g_base;
static _Atomic uint64_t g_used; /* bytes handed out in chunks */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static _Atomic uint64_t g_epoch = 1;
struct eslot {
    _Alignas(64) _Atomic uint64_t active; /* announced epoch, 0 = idle */
    _Atomic int used;
};
static struct eslot g_slots[MAX_THREADS];

struct retired {
    void *n;
    uint64_t epoch;
};

/* what a thread owns; handed to the next thread taking its slot */
struct tstate {
    void *free;           /* free list, linked through the first word */
    char *chunk, *chunk_end;
    struct retired *lim;  /* retired nodes, oldest first from lim_head */
    size_t lim_head, lim_n, lim_cap;
    unsigned since_advance;
    int depth;            /* nested epoch_enter */
};
static struct tstate g_state[MAX_THREADS];
static __thread int t_slot = -1;
static pthread_key_t g_key;

static void thread_gone(void *arg)
{
    int s = (int)(intptr_t)arg - 1;
    atomic_store(&g_slots[s].active, 0);
    atomic_store(&g_slots[s].used, 0);
}

static void pool_init(void)
{
    void *p = mmap(NULL, POOL_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    g_base = p == MAP_FAILED ? NULL : p;
    pthread_key_create(&g_key, thread_gone);
}

static struct tstate *self(void)
{
    if (t_slot < 0) {
        pthread_once(&g_once, pool_init);
        for (int s = 0;; s = (s + 1) % MAX_THREADS) {
            int z = 0;
            if (atomic_compare_exchange_strong(&g_slots[s].used, &z, 1)) {
                t_slot = s;
                pthread_setspecific(g_key, (void *)(intptr_t)(s + 1));
                break;
            }
        }
    }
    return &g_state[t_slot];
}

void *node_alloc(void)
{
    struct tstate *st = self();
    void *n = st->free;
    if (n) {
        st->free = *(void **)n;
    } else {
        if (st->chunk == st->chunk_end) {
            uint64_t at = atomic_fetch_add(&g_used, CHUNK_NODES * NODE_BYTES);
            if (!g_base || at + CHUNK_NODES * NODE_BYTES > POOL_BYTES)
                return NULL;
            st->chunk = g_base + at;
            st->chunk_end = st->chunk + CHUNK_NODES * NODE_BYTES;
        }
        n = st->chunk;
        st->chunk += NODE_BYTES;
    }
    memset(n, 0, NODE_BYTES);
    return n;
}

void node_free_now(void *n)
{
    struct tstate *st = self();
    *(void **)n = st->free;
    st->free = n;
}

static void try_advance(void)
{
    uint64_t e = atomic_load(&g_epoch);
    for (int s = 0; s < MAX_THREADS; s++) {
        uint64_t a = atomic_load(&g_slots[s].active);
        if (a && a != e)
            return;
    }
    atomic_compare_exchange_strong(&g_epoch, &e, e + 1);
}

static void reclaim(struct tstate *st)
{
    uint64_t e = atomic_load(&g_epoch);
    while (st->lim_head < st->lim_n && st->lim[st->lim_head].epoch + 2 <= e)
        node_free_now(st->lim[st->lim_head++].n);
    if (st->lim_head == st->lim_n)
        st->lim_head = st->lim_n = 0;
}

void node_retire(void *n)
{
    struct tstate *st = self();
    if (st->lim_n == st->lim_cap) {
        if (st->lim_head) { /* compact before growing */
            memmove(st->lim, st->lim + st->lim_head,
                    (st->lim_n - st->lim_head) * sizeof *st->lim);
            st->lim_n -= st->lim_head;
            st->lim_head = 0;
        }
        if (st->lim_n == st->lim_cap) {
            size_t cap = st->lim_cap ? 2 * st->lim_cap : 256;
            struct retired *r = realloc(st->lim, cap * sizeof *r);
            if (!r)
                return; /* leaked, never reused: still safe */
            st->lim = r;
            st->lim_cap = cap;
        }
    }
    st->lim[st->lim_n++] = (struct retired){n, atomic_load(&g_epoch)};
    if (++st->since_advance >= RETIRE_BATCH) {
        st->since_advance = 0;
        try_advance();
        reclaim(st);
    }
}

#ifdef MT_INCLL
/* Nodes unlinked before `token` was taken may be in the hands of readers
 * that announced epochs up to token; all are gone once the epoch is
 * token + 2 (as for reclaim). Never waits: the engine calls these while
 * ending its epoch. */
uint64_t mt_grace_now(void *arg)
{
    (void)arg;
    try_advance();
    return atomic_load(&g_epoch);
}

int mt_grace_passed(void *arg, uint64_t token)
{
    (void)arg;
    if (atomic_load(&g_epoch) < token + 2)
        try_advance();
    return atomic_load(&g_epoch) >= token + 2;
}
#endif

void epoch_enter(void)
{
    struct tstate *st = self();
    if (st->depth++ == 0) {
        /* The announcement is visible before this thread reads any node:
         * a seq_cst exchange is a full barrier by itself (x86's locked
         * xchg; arm64's swpal). No fence after it: gcc's locked `or` on
         * the stack cost the pool tree's reads about a quarter (README,
         * "The reads' fence"). */
        (void)atomic_exchange(&g_slots[t_slot].active, atomic_load(&g_epoch));
    }
}

void epoch_exit(void)
{
    struct tstate *st = &g_state[t_slot];
    if (--st->depth == 0) {
        atomic_store_explicit(&g_slots[t_slot].active, 0, memory_order_release);
        if (st->lim_n != st->lim_head && ++st->since_advance >= RETIRE_BATCH) {
            st->since_advance = 0;
            try_advance();
            reclaim(st);
        }
    }
}

/* ---- permutation: decoded into positions, changed, encoded again */

static unsigned perm_decode(uint64_t p, unsigned a[PERM_SLOTS])
{
    for (unsigned i = 0; i < PERM_SLOTS; i++)
        a[i] = perm_slot(p, i);
    return perm_count(p);
}

static uint64_t perm_encode(const unsigned a[PERM_SLOTS], unsigned n)
{
    uint64_t p = n;
    for (unsigned i = 0; i < PERM_SLOTS; i++)
        p |= (uint64_t)a[i] << (4 * i + 4);
    return p;
}

uint64_t perm_insert(uint64_t p, unsigned i)
{
    unsigned a[PERM_SLOTS], n = perm_decode(p, a), slot = a[n];
    memmove(a + i + 1, a + i, (n - i) * sizeof *a);
    a[i] = slot;
    return perm_encode(a, n + 1);
}

uint64_t perm_remove(uint64_t p, unsigned i)
{
    unsigned a[PERM_SLOTS], n = perm_decode(p, a), slot = a[i];
    memmove(a + i, a + i + 1, (n - 1 - i) * sizeof *a);
    a[n - 1] = slot;
    return perm_encode(a, n - 1);
}

/* 1 if p is a permutation a leaf can hold: count <= LWIDTH, every slot
 * once, the unused slot 14 of a 14-key leaf last */
static int perm_valid(uint64_t p)
{
    unsigned seen = 0;
    for (unsigned i = 0; i < PERM_SLOTS; i++)
        seen |= 1u << perm_slot(p, i);
    return perm_count(p) <= LWIDTH && seen == (1u << PERM_SLOTS) - 1 &&
           (LWIDTH == PERM_SLOTS || perm_slot(p, PERM_SLOTS - 1) == PERM_SLOTS - 1);
}

int leaf_entries_ok(const struct leaf *l, uint64_t perm, uint64_t lo, uint64_t hi, int has_hi)
{
    uint64_t pik = 0;
    unsigned pkl = 0;
    if (!perm_valid(perm))
        return 0;
    for (unsigned i = 0; i < perm_count(perm); i++) {
        unsigned s = perm_slot(perm, i), kl = l->klen[s];
        uint64_t ik = l->ikey[s];
        if (kl > KLEN_LAYER || ik < lo || (has_hi && ik >= hi) ||
            (i && (ik < pik || (ik == pik && kl <= pkl))))
            return 0;
        pik = ik, pkl = kl;
    }
    return 1;
}

int perm_free_since(uint64_t p, uint64_t from)
{
    /* the slots free in `from`: its nibbles past its count (fewer than
     * the used ones in a leaf more than half full) */
    unsigned was_free = 0, c = perm_count(from) < LWIDTH ? perm_count(from) : LWIDTH;
    uint64_t q = c < PERM_SLOTS ? from >> (4 * c + 4) : 0;
    for (unsigned i = c; i < PERM_SLOTS; i++, q >>= 4)
        was_free |= 1u << (q & 15);
    was_free &= (1u << LWIDTH) - 1; /* slot 14 of a 14-key leaf is never used */
    if (perm_count(p) >= LWIDTH)
        return -1;
    q = p >> (4 * perm_count(p) + 4); /* p's free slots */
    for (unsigned i = perm_count(p); i < LWIDTH; i++, q >>= 4)
        if (was_free >> (q & 15) & 1)
            return (int)i;
    return -1;
}

uint64_t perm_swap(uint64_t p, unsigned i, unsigned f)
{
    unsigned si = 4 * i + 4, sf = 4 * f + 4; /* the two nibbles */
    uint64_t x = (p >> si ^ p >> sf) & 15;
    return p ^ (x << si | x << sf);
}

/* ---- locks */

static inline int lock_cas(struct node *n, uint64_t v)
{
#ifdef MT_INCLL
    return VCAS(n, v, v | V_LOCKED);
#else
    return atomic_compare_exchange_strong_explicit(&n->version, &v, v | V_LOCKED,
                                                   memory_order_acquire,
                                                   memory_order_relaxed);
#endif
}

void node_lock(struct node *n)
{
    node_ready(n);
    for (;;) {
        uint64_t v = atomic_load_explicit(&n->version, memory_order_relaxed);
        if (!(v & V_LOCKED) && lock_cas(n, v))
            return;
        __builtin_ia32_pause();
    }
}

int node_trylock(struct node *n)
{
    node_ready(n);
    uint64_t v = atomic_load_explicit(&n->version, memory_order_relaxed);
    return !(v & V_LOCKED) && lock_cas(n, v);
}

void node_unlock(struct node *n)
{
    uint64_t v = atomic_load_explicit(&n->version, memory_order_relaxed), nv = v;
    if (v & V_INSERTING)
        nv = (nv & ~V_INSERT_MASK) | ((nv + V_INSERT_ONE) & V_INSERT_MASK);
    if (v & V_SPLITTING)
        nv += V_SPLIT_ONE;
    VSTORE(n, nv & ~(V_LOCKED | V_DIRTY));
}

/* ---- operations */

#ifdef MT_INCLL
__thread struct mt_batch t_batch;

/* Commit the shared transaction, if any. */
static int batch_end(void)
{
    txn *tx = t_batch.tx;
    mt_tree *t = t_batch.t;
    t_batch.tx = NULL;
    t_batch.n = 0;
    int rc = tx ? t->commit(tx, t->commit_arg) : 0;
    if (rc)
        atomic_store(&t->broken, 1);
    return rc;
}

int rd_batch(mt_tree *t)
{
    if (incll_waiting(t_batch.wait))
        return batch_end();
    t_tx = t_batch.pool == t->pool ? t_batch.tx : NULL;
    return 0;
}

int mt_flush(mt_tree *t)
{
    return t_batch.tx && t_batch.t == t ? batch_end() : 0;
}
#else
int mt_flush(mt_tree *t)
{
    (void)t;
    return 0;
}
#endif

#ifdef MT_INCLL
int op_begin_tx(struct op *o, mt_tree *t)
{
    int rc = 0;
    if (t_batch.tx && t_batch.t != t) /* another tree's */
        rc = batch_end();
    if (!rc && !(rc = txn_begin(t->pool, &o->tx))) {
        o->epoch = incll_epoch(o->tx);
        o->wait = incll_waiting_word(o->tx);
    }
    return rc;
}
#endif

#ifndef MT_INCLL
static int op_restore(struct op *o);
#endif

int op_finish(struct op *o)
{
    int rc = 0, broken = 0;
#ifdef MT_INCLL
    t_batch.tx = NULL;
    t_batch.n = 0;
    /* A clean error commits: the thread's shared transaction may hold
     * InCLL changes of its earlier operations, which no abort may follow
     * (incll.h); this operation's nodes were freed in it (op_drop_new). */
    int abort = o->err && !o->clean;
#else
    int abort = o->err != 0;
#endif
    if (o->tx && abort) {
        txn_abort(o->tx);
        rc = o->err;
#ifdef MT_INCLL
        broken = !o->clean;
#else
        broken = !o->clean && op_restore(o) != 0;
#endif
    } else if (o->tx) {
        rc = o->t->commit(o->tx, o->t->commit_arg);
#ifdef MT_INCLL
        broken = rc != 0;
#else /* a failed commit rolled the transaction back (txn.h) */
        broken = rc != 0 && op_restore(o) != 0;
#endif
        rc = rc ? rc : o->err;
    } else if (o->err) {
        rc = o->err;
        broken = !o->clean;
    }
    if (broken)
        atomic_store(&o->t->broken, 1);
#ifndef MT_INCLL
    if (!rc) { /* committed (or transient): what readers follow unmarked */
        for (int i = 0; i < o->nlater; i++)
            __atomic_store_n(o->later[i].w, o->later[i].v, __ATOMIC_RELEASE);
        if (o->new_top)
            atomic_store_explicit(&o->t->root, o->new_top, memory_order_release);
    }
#endif
    while (o->nheld > 0)
        node_unlock(o->held[--o->nheld]);
#ifndef MT_INCLL
    if (o->gone && !rc)
        node_retire(o->gone);
#endif
    return rc;
}

/* n leaves o's locks (it stays locked: a node o made, going away). */
void op_unhold(struct op *o, struct node *n)
{
    for (int i = o->nheld - 1; i >= 0; i--)
        if (o->held[i] == n) {
            o->held[i] = o->held[--o->nheld];
            return;
        }
}

int op_holds(struct op *o, struct node *n)
{
    for (int i = o->nheld - 1; i >= 0; i--)
        if (o->held[i] == n)
            return 1;
    return 0;
}

/* OP_LOCKS bounds what one operation can lock: a split of every level
 * (a leaf, its right neighbour, up to 27 levels of parents, new nodes) */
void op_hold(struct op *o, struct node *n)
{
    if (o->nheld == OP_LOCKS) { /* cannot happen in a tree of 2^64 keys */
        o->err = o->err ? o->err : TXN_E_INVAL;
        node_unlock(n);
        return;
    }
    o->held[o->nheld++] = n;
}

void op_lock(struct op *o, struct node *n)
{
    if (op_holds(o, n))
        return;
    node_lock(n);
    op_hold(o, n);
}

int op_trylock(struct op *o, struct node *n)
{
    if (op_holds(o, n))
        return 0; /* the caller would unlock it while still using it */
    if (!node_trylock(n))
        return 0;
    op_hold(o, n);
    return 1;
}

void op_unlock(struct op *o, struct node *n)
{
    for (int i = o->nheld - 1; i >= 0; i--)
        if (o->held[i] == n) {
            memmove(o->held + i, o->held + i + 1, (size_t)(o->nheld - 1 - i) * sizeof *o->held);
            o->nheld--;
            node_unlock(n);
            return;
        }
}

#ifndef MT_INCLL /* the mirror writes; mt_incll.c has the in-pool ones */
static inline uint64_t *word(struct node *n, size_t off)
{
    return (uint64_t *)(BODY(n) + off);
}

static inline txn_obj *mirror_of(uint64_t p)
{
    return p ? ((struct node *)p)->pobj : NULL;
}

static void mirror_write(struct op *o, struct node *n, size_t off, const void *src, size_t len)
{
    if (o->tx && !o->err)
        o->err = txn_write(o->tx, n->pobj, off, src, len);
}

/* The word writes: the mirror first, the DRAM store only when it took
 * (after an error the DRAM tree changes no more: a failure before any
 * change leaves it as it was). */
void w_u64(struct op *o, struct node *n, size_t off, uint64_t v)
{
    mirror_write(o, n, off, &v, 8);
    if (!o->err)
        ST(*word(n, off), v);
}

void w_ptr(struct op *o, struct node *n, size_t off, void *p)
{
    txn_obj *h = mirror_of((uint64_t)p);
    mirror_write(o, n, off, &h, 8);
    if (!o->err)
        __atomic_store_n(word(n, off), (uint64_t)p, __ATOMIC_RELEASE);
}

void w_ptr_at_commit(struct op *o, struct node *n, size_t off, void *p)
{
    txn_obj *h = mirror_of((uint64_t)p);
    mirror_write(o, n, off, &h, 8);
    if (o->err)
        return;
    if (o->nlater == 2) { /* cannot happen: an unlink's, or a new root's */
        o->err = TXN_E_INVAL;
        return;
    }
    o->later[o->nlater].w = word(n, off);
    o->later[o->nlater++].v = (uint64_t)p;
}

void root_at_commit(struct op *o, struct node *q)
{
    if (!o->err)
        o->new_top = q;
}

void w_u8(struct op *o, struct node *n, size_t off, uint8_t v)
{
    mirror_write(o, n, off, &v, 1);
    if (!o->err)
        __atomic_store_n((uint8_t *)BODY(n) + off, v, __ATOMIC_RELAXED);
}

void w_range(struct op *o, struct node *n, size_t off, unsigned count)
{
    if (count)
        mirror_write(o, n, off, word(n, off), 8 * (size_t)count);
}

void w_range_ptr(struct op *o, struct node *n, size_t off, unsigned count)
{
    uint64_t h[IWIDTH + 1];
    if (!o->tx || !count)
        return;
    for (unsigned i = 0; i < count; i++)
        h[i] = (uint64_t)mirror_of(word(n, off)[i]);
    mirror_write(o, n, off, h, 8 * (size_t)count);
}

static struct node *node_new(struct op *o, uint64_t kind, size_t body)
{
    struct node *n = node_alloc();
    if (!n) {
        o->err = o->err ? o->err : TXN_E_NOMEM;
        return NULL;
    }
    if (o->tx) {
        int rc = txn_alloc(o->tx, body, &n->pobj);
        if (rc) {
            node_free_now(n);
            o->err = o->err ? o->err : rc;
            return NULL;
        }
    }
    *word(n, 0) = kind;
    atomic_store_explicit(&n->version,
                          V_LOCKED | V_INSERTING | (kind == KIND_LEAF ? V_LEAF : 0),
                          memory_order_relaxed);
    op_hold(o, n);
    if (o->nnew < OP_LOCKS)
        o->made_new[o->nnew++] = n;
    return n;
}

/* Never linked, never seen by a reader: back to the free list at once;
 * their objects go with the aborted transaction. */
void op_drop_new(struct op *o)
{
    while (o->nnew > 0) {
        struct node *n = o->made_new[--o->nnew];
        op_unhold(o, n);
        node_free_now(n);
    }
}

struct leaf *leaf_new(struct op *o)
{
    struct leaf *l = (struct leaf *)node_new(o, KIND_LEAF, LEAF_BODY);
    if (l)
        l->perm = PERM_EMPTY;
    return l;
}

struct inode *inode_new(struct op *o)
{
    return (struct inode *)node_new(o, KIND_INODE, INODE_BODY);
}

void w_image(struct op *o, struct node *n)
{
    uint64_t img[LEAF_BODY / 8];
    if (!o->tx || o->err)
        return;
    if (is_leaf(n)) {
        struct leaf *l = (struct leaf *)n;
        memcpy(img, BODY(n), LEAF_BODY);
        img[LB_NEXT / 8] = (uint64_t)mirror_of((uint64_t)l->next);
        img[LB_PREV / 8] = (uint64_t)mirror_of((uint64_t)l->prev);
        for (unsigned s = 0; s < LWIDTH; s++)
            if (l->klen[s] == KLEN_LAYER)
                img[LB_VAL / 8 + s] = (uint64_t)mirror_of(l->val[s]);
        o->err = txn_write(o->tx, n->pobj, 0, img, LEAF_BODY);
    } else {
        struct inode *in = (struct inode *)n;
        memcpy(img, BODY(n), INODE_BODY);
        for (unsigned i = 0; i <= IWIDTH; i++)
            img[IB_CHILD / 8 + i] = (uint64_t)mirror_of((uint64_t)in->child[i]);
        o->err = txn_write(o->tx, n->pobj, 0, img, INODE_BODY);
    }
}

void node_discard(struct op *o, struct node *n)
{
    if (o->tx && !o->err)
        o->err = txn_free(o->tx, n->pobj);
}

void node_gone(struct op *o, struct node *n)
{
    o->gone = n; /* op_finish retires it once o committed */
}

void w_anchor(struct op *o, struct node *root)
{
    if (o->tx && !o->err)
        o->err = txn_write(o->tx, o->t->anchor, o->t->anchor_off, &root->pobj, 8);
}

/* Opened to write before anything changes: an engine that copies to
 * write (cow) makes its copy here, where a full pool fails the operation
 * alone; undo logs the object whole, once. */
static void open_rw(struct op *o, txn_obj *h)
{
    if (o->tx && !o->err && !txn_open(o->tx, h, TXN_RW)) {
        int rc = txn_last_error(o->tx);
        o->err = rc ? rc : TXN_E_STATE;
    }
}

/* What an operation changes in DRAM, saved before its first change: the
 * body and the root and deleted bits of each node it readied (every
 * existing node it changes, node_will_change), a root's parent pointer
 * (NULL: new_root sets it). The top root changes only once the
 * operation committed (root_at_commit). A thread runs one operation at a
 * time. */
struct saved {
    struct node *n;
    struct inode *parent;
    uint64_t bits;
    uint64_t body[NODE_BYTES / 8]; /* a leaf's or an inode's */
};
static __thread struct saved t_saved[OP_LOCKS];

static void op_save(struct op *o, struct node *n)
{
    if (!o->tx || o->nsaved < 0)
        return; /* transient: its errors come before any change */
    for (int i = 0; i < o->nsaved; i++)
        if (t_saved[i].n == n)
            return;
    if (o->nsaved == OP_LOCKS) {
        o->nsaved = -1; /* cannot happen: OP_LOCKS bounds its locks too */
        return;
    }
    struct saved *sv = &t_saved[o->nsaved++];
    sv->n = n;
    sv->parent = __atomic_load_n(&n->parent, __ATOMIC_RELAXED);
    sv->bits = atomic_load_explicit(&n->version, memory_order_relaxed) & (V_ROOT | V_DELETED);
    memcpy(sv->body, BODY(n), is_leaf(n) ? LEAF_BODY : INODE_BODY); /* locked: no writer */
}

void node_will_change(struct op *o, struct node *n)
{
    op_save(o, n); /* even after an error: insert_up's stores go on */
    open_rw(o, n->pobj);
}

void anchor_will_change(struct op *o)
{
    open_rw(o, o->t->anchor);
}

/* After an error that came once the operation had changed the tree, or
 * a failed commit (its transaction rolled back: the mirrors are as
 * before it), the DRAM tree as before it too, under its locks: an
 * update's value word; each saved node marked as split (a reader that
 * read it starts again at its unlock), its body and bits back (a root's
 * parent too); the children of the internal nodes put back pointed at
 * them again (an internal split had moved some); the
 * nodes it made marked deleted (no reader validates a read through
 * them: their parents changed too) and retired; the counts. 0, or -1 if
 * it saved too many nodes to put back (the tree is then unusable). */
static int op_restore(struct op *o)
{
    if (o->nsaved < 0)
        return -1;
    if (o->upd_word) /* an update (readers may have read it: as of any
                      * update before its commit) */
        __atomic_store_n(o->upd_word, o->upd_old, __ATOMIC_RELEASE);
    for (int i = o->nsaved - 1; i >= 0; i--) {
        struct saved *sv = &t_saved[i];
        struct node *n = sv->n;
        node_mark(n, V_SPLITTING);
        size_t words = (is_leaf(n) ? LEAF_BODY : INODE_BODY) / 8;
        uint64_t *b = (uint64_t *)BODY(n);
        for (size_t w = 0; w < words; w++) /* only what changed: a leaf's
                                              * low key is read unlocked */
            if (b[w] != sv->body[w])
                __atomic_store_n(&b[w], sv->body[w], __ATOMIC_RELAXED);
        if (sv->bits & V_ROOT) /* new_root gave it a parent; a non-root's
                                * parent changes under its parent's lock */
            PST(n->parent, sv->parent);
        uint64_t v = atomic_load_explicit(&n->version, memory_order_relaxed);
        atomic_store_explicit(&n->version, (v & ~(V_ROOT | V_DELETED)) | sv->bits,
                              memory_order_release);
    }
    for (int i = 0; i < o->nsaved; i++) {
        struct node *n = t_saved[i].n;
        if (is_leaf(n))
            continue;
        struct inode *in = (struct inode *)n;
        for (unsigned c = 0; c <= in->nkeys && c <= IWIDTH; c++)
            if (in->child[c])
                PST(in->child[c]->parent, in);
    }
    while (o->nnew > 0) { /* locked since made: unlocked with the others */
        struct node *n = o->made_new[--o->nnew];
        node_mark(n, V_DELETED | V_SPLITTING);
        node_retire(n);
    }
    atomic_fetch_sub_explicit(&o->t->splits, o->splits, memory_order_relaxed);
    atomic_fetch_sub_explicit(&o->t->unlinked, o->unlinks, memory_order_relaxed);
    o->gone = NULL;
    return 0;
}

void node_set_root(struct op *o, struct node *n, int root)
{
    (void)o;
    if (root)
        atomic_fetch_or_explicit(&n->version, V_ROOT, memory_order_relaxed);
    else
        atomic_fetch_and_explicit(&n->version, ~V_ROOT, memory_order_release);
}

void w_value(struct op *o, struct leaf *l, unsigned s, uint64_t v)
{
    w_u64(o, &l->h, LB_VAL + 8 * (size_t)s, v);
}

int w_value_try(struct op *o, struct leaf *l, unsigned s, uint64_t v)
{
    if (o->err)
        return -1;
    if (o->tx) { /* a failed commit puts it back (op_restore) */
        o->upd_word = word(&l->h, LB_VAL + 8 * (size_t)s);
        o->upd_old = *o->upd_word;
    }
    w_value(o, l, s, v);
    o->clean = o->err != 0; /* an update's one write: nothing changed */
    return -1;
}

void w_move_begin(struct op *o, struct leaf *l)
{
    (void)o, (void)l; /* never called: w_value_try moves nothing here */
}

/* An insert or a remove opens its leaf before it changes it. */
static void leaf_will_change(struct op *o, struct leaf *l)
{
    if (!o->err) {
        node_will_change(o, &l->h);
        o->clean = o->err != 0;
    }
    node_mark(&l->h, V_INSERTING);
}

void w_insert_begin(struct op *o, struct leaf *l)
{
    leaf_will_change(o, l);
}

void w_remove_begin(struct op *o, struct leaf *l)
{
    leaf_will_change(o, l);
}

void w_perm(struct op *o, struct leaf *l, uint64_t perm)
{
    w_u64(o, &l->h, LB_PERM, perm);
}

int rd_begin(mt_tree *t)
{
    return atomic_load_explicit(&t->broken, memory_order_relaxed) ? TXN_E_STATE : 0;
}

int rd_end(mt_tree *t)
{
    (void)t;
    return 0;
}
#endif /* !MT_INCLL */
