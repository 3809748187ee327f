/* mt_node.h - Masstree internals shared by the algorithm and both node
 * stores (internal to apps/masstree): the version word, the tree and an
 * operation, the permutation, the DRAM node pool and epochs, and locks.
 *
 * The nodes themselves are the store's: "mt_layout.h" is found in the
 * store's folder (mirror/ or inpool/, chosen by CMake per engine:
 * pmtx_masstree in CMakeLists.txt), and so is the inline half of the
 * store contract (mt_store.h). Shared code names no store.
 *
 * Every body word that optimistic readers may read while a writer stores
 * it is accessed with relaxed atomics (LD/ST); the version word orders
 * them (acquire on the reader's side, release on the writer's).
 */
#ifndef PMTX_MT_NODE_H
#define PMTX_MT_NODE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "masstree.h"

#define IWIDTH 15     /* keys of an internal node */
#define PERM_SLOTS 15 /* nibbles of a permutation; with 14-key leaves the
                         last one always names the unused slot 14 */
#define KLEN_LAYER 9  /* klen of an entry whose value is a layer's root */
/* More internal levels than any layer reaches (a split at least halves a
 * node): a damaged pool's cycle through internal nodes ends here. */
#define MT_MAX_HEIGHT 64

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* ---- version word (Masstree's): readers retry when it changes */
#define V_LOCKED (1ull << 0)
#define V_INSERTING (1ull << 1) /* a writer changes keys or permutation */
#define V_SPLITTING (1ull << 2) /* a writer moves keys to another node */
#define V_DELETED (1ull << 3)   /* unlinked: readers start again */
#define V_ROOT (1ull << 4)      /* root of its layer */
#define V_LEAF (1ull << 5)
#define V_DIRTY (V_INSERTING | V_SPLITTING)
#define V_INSERT_ONE (1ull << 6)  /* 16-bit insert counter from bit 6 */
#define V_SPLIT_ONE (1ull << 22)  /* 42-bit split counter from bit 22 */
#define V_INSERT_MASK (V_SPLIT_ONE - V_INSERT_ONE)

enum { KIND_LEAF = 1, KIND_INODE = 2 };

/* ---- the tree */
struct mt_tree {
    _Atomic(struct node *) root;
    txn_pool *pool;
    txn_obj *anchor;
    size_t anchor_off;
    int (*commit)(txn *tx, void *arg);
    void *commit_arg;
    _Atomic int broken; /* a transaction failed: DRAM may differ */
    _Atomic uint64_t splits, unlinked;
    /* the in-pool store's (inpool/): the pool's first epoch in this
     * execution; made in it (mt_create: every node is of it, node_ready
     * has nothing to check); opts.batch */
    uint64_t first;
    int ready;
    unsigned batch;
};

/* The store's nodes (struct node, leaf, inode; LWIDTH, NODE_BYTES), its
 * stores into them (PST, PST8, VSTORE, VCAS, VMARK), the first access to
 * a node (node_ready ...), and its part of an operation (struct op_store). */
#include "mt_layout.h"

_Static_assert(LWIDTH == 14 || LWIDTH == 15, "leaf width");

/* One put or remove: its transaction and the locks it holds. */
#define OP_LOCKS 64
#define OP_SPARE 24 /* a split's new internal nodes: a layer of 2^64 keys
                       has fewer levels */
struct op {
    mt_tree *t;
    txn *tx;   /* NULL when transient */
    int err;   /* first failed txn call */
    int clean; /* err came before the operation changed the tree: it
                  fails alone, the tree stays usable (op_drop_new) */
    int nspare, nnew;
    struct inode *spare[OP_SPARE]; /* a split's internal nodes, made first */
    struct node *made_new[OP_LOCKS]; /* the nodes it allocated */
    struct leaf *upper; /* a split's leaf above its layer's root (new_root) */
    unsigned splits, unlinks; /* counted in the tree (undone by op_put_back) */
    struct op_store st;       /* the store's own */
    int nheld;
    struct node *held[OP_LOCKS];
    /* the layers the key went through: their roots as first reached, and
     * the key's slice in each (a layer root's split updates the entry of
     * the layer above) */
    int depth;
    struct node *layer[MT_MAX_KEY / 8 + 2];
    uint64_t ik[MT_MAX_KEY / 8 + 2];
};

/* ---- permutation */
static inline unsigned perm_count(uint64_t p) { return (unsigned)(p & 15); }
static inline unsigned perm_slot(uint64_t p, unsigned i)
{
    return (unsigned)(p >> (4 * i + 4)) & 15;
}
#define PERM_EMPTY 0xedcba98765432100ull /* slots 0..14 free, in order */
/* insert the free slot at position count at sorted position i */
uint64_t perm_insert(uint64_t p, unsigned i);
/* remove the key at sorted position i (its slot becomes the first free) */
uint64_t perm_remove(uint64_t p, unsigned i);
/* a free position (>= count) of p whose slot is not in use in `from` (the
 * permutation at the start of the epoch), or -1 */
int perm_free_since(uint64_t p, uint64_t from);
/* sorted position i names the slot of free position f, f names i's */
uint64_t perm_swap(uint64_t p, unsigned i, unsigned f);

/* 1 if perm is valid (perm_valid) and l's entries under it are in key
 * order, each a key length of 0-8 or KLEN_LAYER and a slice in [lo, hi)
 * (no bound above without has_hi): the structure one leaf shows */
int leaf_entries_ok(const struct leaf *l, uint64_t perm, uint64_t lo, uint64_t hi, int has_hi);

/* ---- node pool and epochs (mt_node.c) */
void *node_alloc(void);              /* NULL when the pool is exhausted */
void node_free_now(void *n);         /* nobody can reach it */
void node_retire(void *n);           /* freed when no reader can hold it */
void epoch_enter(void);
void epoch_exit(void);
/* The readers' grace, for blocks freed elsewhere (the in-pool store's,
 * which the engine holds back): a token of the epoch now, and whether
 * every reader that could have seen the block before it was taken is
 * gone. Never wait. */
uint64_t epoch_grace_now(void);
int epoch_grace_passed(uint64_t token);

/* ---- locks */
/* n's version once no writer is changing it (n ready already) */
static inline uint64_t node_wait(struct node *n)
{
    uint64_t v;
    while ((v = atomic_load_explicit(&n->version, memory_order_acquire)) & V_DIRTY)
        __builtin_ia32_pause();
    return v;
}
static inline uint64_t node_stable(struct node *n)
{
    node_ready(n);
    return node_wait(n);
}
static inline int node_changed(struct node *n, uint64_t v)
{
    atomic_thread_fence(memory_order_acquire);
    return (atomic_load_explicit(&n->version, memory_order_relaxed) ^ v) > V_LOCKED;
}
void node_lock(struct node *n);
int node_trylock(struct node *n);
void node_unlock(struct node *n);
/* mark a node this thread has locked */
static inline void node_mark(struct node *n, uint64_t bits)
{
    VMARK(n, atomic_load_explicit(&n->version, memory_order_relaxed) | bits);
    atomic_thread_fence(memory_order_release);
}

static inline int is_leaf(struct node *n)
{
    return (atomic_load_explicit(&n->version, memory_order_relaxed) & V_LEAF) != 0;
}

/* ---- an operation's locks (mt_node.c) */
void op_lock(struct op *o, struct node *n);
int op_trylock(struct op *o, struct node *n);
void op_hold(struct op *o, struct node *n); /* a new node, locked */
int op_holds(struct op *o, struct node *n);
void op_unhold(struct op *o, struct node *n); /* without unlocking it */
void op_unlock(struct op *o, struct node *n); /* an unchanged node */
/* n, new (a leaf or not), made by o: locked, held, and listed for
 * op_drop_new and op_put_back */
void op_made(struct op *o, struct node *n, int leaf);
/* After a clean error (o->clean): the nodes o made go back (node_drop),
 * never linked. */
void op_drop_new(struct op *o);
/* The first error of o's calls is kept (later ones are its consequences). */
static inline void op_fail(struct op *o, int rc)
{
    if (rc && !o->err)
        o->err = rc;
}

/* Commit (or abort on an error), then unlock all: the end of every
 * operation that does not go on in a shared transaction (op_end). */
int op_finish(struct op *o);

/* A tree of opts (mt_tree.c), nothing in it yet. */
mt_tree *tree_new(const mt_opts *opts);
/* The same for a tree that needs a pool (mt_open; inpool: mt_create):
 * 0 and *out, TXN_E_INVAL without opts->pool, or TXN_E_NOMEM. */
int tree_new_pooled(const mt_opts *opts, mt_tree **out);
/* Calls fn on every node below n (n included), children before parents,
 * each made ready first; stops at a node that is refused (node_err). */
void tree_walk(struct node *n, void (*fn)(struct node *, void *), void *arg);

/* What the store does for the algorithm (mt_store.h, and its inline half). */
#include "mt_store.h"

/* An operation's start: its transaction (op_store_begin), or
 * TXN_E_STATE once the tree is unusable. */
static inline int op_begin(struct op *o, mt_tree *t)
{
    o->t = t;
    o->tx = NULL;
    o->err = 0;
    o->clean = 0;
    o->nspare = o->nnew = 0;
    o->upper = NULL;
    o->splits = o->unlinks = 0;
    op_store_reset(o);
    o->nheld = 0;
    o->depth = 0;
    if (atomic_load(&t->broken))
        return TXN_E_STATE;
    return op_store_begin(o, t);
}

#endif
