/* mt_node.c - Masstree node pool, epoch-based reclamation, permutations,
 * node locks, and an operation's locks and end (both stores').
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

/* Nodes unlinked before `token` was taken may be in the hands of readers
 * that announced epochs up to token; all are gone once the epoch is
 * token + 2 (as for reclaim). */
uint64_t epoch_grace_now(void)
{
    try_advance();
    return atomic_load(&g_epoch);
}

int epoch_grace_passed(uint64_t token)
{
    if (atomic_load(&g_epoch) < token + 2)
        try_advance();
    return atomic_load(&g_epoch) >= token + 2;
}

void epoch_enter(void)
{
    struct tstate *st = self();
    if (st->depth++ == 0) {
        /* The announcement is visible before this thread reads any node:
         * a seq_cst exchange is a full barrier by itself (x86's locked
         * xchg; arm64's swpal). No fence after it: gcc's locked `or` on
         * the stack slowed the pool tree's reads (docs/masstree.md, "The
         * reads' fence"). */
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
    return VCAS(n, v, v | V_LOCKED);
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

/* The end of an operation: abort on an error (but a clean one where the
 * store cannot put back, whose shared transaction may hold InCLL changes
 * of earlier operations that no abort may follow: incll.h; this
 * operation's nodes were freed in it, op_drop_new), else commit; a
 * failure after the first change, or a failed commit (rolled back, as
 * txn_commit promises), has the store put the DRAM tree back
 * (op_put_back), or leaves the tree unusable. */
int op_finish(struct op *o)
{
    int rc = 0, broken = 0;
    int abort = o->err && (store_puts_back() || !o->clean);
    if (o->tx && abort) {
        txn_abort(o->tx);
        rc = o->err;
        broken = !o->clean && op_put_back(o) != 0;
    } else if (o->tx) {
        rc = o->t->commit(o->tx, o->t->commit_arg);
        broken = rc != 0 && op_put_back(o) != 0;
        rc = rc ? rc : o->err;
    } else if (o->err) {
        rc = o->err;
        broken = !o->clean;
    }
    if (broken)
        atomic_store(&o->t->broken, 1);
    if (!rc) /* committed (or transient) */
        op_committed(o);
    while (o->nheld > 0)
        node_unlock(o->held[--o->nheld]);
    return rc;
}

void op_made(struct op *o, struct node *n, int leaf)
{
    VSTORE(n, V_LOCKED | V_INSERTING | (leaf ? V_LEAF : 0));
    op_hold(o, n);
    if (o->nnew < OP_LOCKS)
        o->made_new[o->nnew++] = n;
}

void op_drop_new(struct op *o)
{
    while (o->nnew > 0) {
        struct node *n = o->made_new[--o->nnew];
        op_unhold(o, n);
        node_drop(o, n);
    }
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
