/* mt_node.h - Masstree nodes (internal to apps/masstree): layout, version
 * word, node pool, epochs, and the write helpers that keep a node's
 * persistent mirror in step with its DRAM copy.
 *
 * A node is a volatile header (version word, mirror handle) followed by
 * its body. The body is also the persistent layout: the mirror object
 * holds the body byte for byte, except that node pointers are stored as
 * the handles of the nodes' mirrors. Body offsets (LB_*, IB_*) are the
 * offsets in the mirror.
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

/* Keys of a leaf: 15, or 14 (-DMT_LEAF_WIDTH=14), which leaves room in
 * the same five lines for the paper's InCLLs (see struct leaf). */
#ifdef MT_INCLL /* nodes in the pool (incll engine): 14-key leaves */
#undef MT_LEAF_WIDTH
#define MT_LEAF_WIDTH 14
#include "incll.h"
#endif
#ifndef MT_LEAF_WIDTH
#define MT_LEAF_WIDTH 15
#endif
#define LWIDTH MT_LEAF_WIDTH
#define IWIDTH 15     /* keys of an internal node */
#define PERM_SLOTS 15 /* nibbles of a permutation; with 14-key leaves the
                         last one always names the unused slot 14 */
_Static_assert(LWIDTH == 14 || LWIDTH == 15, "leaf width");
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

#ifdef MT_INCLL
/* In-pool nodes (MT_INCLL, ycsb-incll): each node is an object of the
 * incll engine (INCLL_NODE_ALLOC bytes: five lines, the payload starting
 * INCLL_OBJ_HDR bytes into the first), read and changed in place; no DRAM
 * copy. Node pointers are payload addresses (handles stay valid across
 * restarts). The version word and the parent pointer live in the node but
 * are volatile in meaning: the first access to a node in an execution
 * (node_ready) resets them (version from the kind and root bytes, parent
 * unknown = NULL) before incll_node_prepare() recovers its InCLLs.
 * Stores to a node all go through the traced incll_* calls. */
struct node {
    _Atomic uint64_t version;
    struct inode *parent; /* NULL: unknown (found from the layer root) */
};

/* Payload lines (Cohen et al., Figure 1):
 *   0: version, parent, the permutation InCLL (epoch, saved, perm), next,
 *      lowkey
 *   1-2: ikey[0..13], klen[0..13], then the kind and root bytes
 *   3: vlog1 (the InCLL of val[0..6]), val[0..6]
 *   4: val[7..13], vlog2 (the InCLL of val[7..13])
 * There is no prev pointer: an empty leaf's left neighbour is found in
 * its parent (masstree.c, unlink_prepare). */
struct leaf {
    struct node h;
    uint64_t pepoch, psaved; /* with perm: the incll_perm */
    uint64_t perm;
    struct leaf *next;
    uint64_t lowkey;
    uint64_t ikey[LWIDTH];
    uint8_t klen[16]; /* [14]: kind, [15]: root of its layer */
    uint64_t vlog1;
    uint64_t val[LWIDTH];
    uint64_t vlog2;
};
/* An internal node: line 0 as a leaf's (its permutation InCLL unused but
 * for the node epoch; one value InCLL covering nkeys, never used): every
 * change of it goes through the external log. */
struct inode {
    struct node h;
    uint64_t pepoch, psaved, pperm;
    uint64_t vlog;
    uint64_t nkeys;
    uint64_t ikey[IWIDTH];
    uint64_t flags; /* bytes 6 and 7: kind and root, as in a leaf */
    struct node *child[IWIDTH + 1];
};
#define NB_KIND 182 /* payload byte of the kind, in both node types */
#define NB_ROOT 183
_Static_assert(offsetof(struct leaf, klen) + 14 == NB_KIND &&
               offsetof(struct inode, flags) + 6 == NB_KIND, "kind byte");
_Static_assert(offsetof(struct leaf, pepoch) == 16 && offsetof(struct inode, pepoch) == 16,
               "node epoch");
_Static_assert(INCLL_LINE_OF(struct leaf, pepoch) == 0 && INCLL_LINE_OF(struct leaf, lowkey) == 0,
               "line 0");
_Static_assert(INCLL_SAME_LINE(struct leaf, vlog1, val[0]) &&
               INCLL_SAME_LINE(struct leaf, vlog1, val[6]) &&
               INCLL_SAME_LINE(struct leaf, vlog2, val[7]) &&
               INCLL_SAME_LINE(struct leaf, vlog2, val[13]), "value InCLL lines");
_Static_assert(INCLL_SAME_LINE(struct inode, vlog, nkeys), "inode InCLL line");
_Static_assert(INCLL_NODE_ALLOC(sizeof(struct leaf)) == 5 * 64 - INCLL_OBJ_HDR &&
               INCLL_NODE_ALLOC(sizeof(struct inode)) == 5 * 64 - INCLL_OBJ_HDR,
               "five lines a node");
enum {
    LB_PERM = offsetof(struct leaf, perm) - 16, LB_NEXT = offsetof(struct leaf, next) - 16,
    LB_IKEY = offsetof(struct leaf, ikey) - 16, LB_KLEN = offsetof(struct leaf, klen) - 16,
    LB_VAL = offsetof(struct leaf, val) - 16, IB_NKEYS = offsetof(struct inode, nkeys) - 16,
    IB_IKEY = offsetof(struct inode, ikey) - 16, IB_CHILD = offsetof(struct inode, child) - 16
};
#define BODY(n) ((char *)(n) + sizeof(struct node))
#define NODE_BYTES 320
extern const incll_layout mt_leaf_layout, mt_inode_layout;
#else
/* The volatile header. Parent pointers are volatile: an internal node's
 * split moves children that other operations may have locked, so it may
 * not write their mirrors; recovery derives parents from the structure. */
struct node {
    _Atomic uint64_t version;
    txn_obj *pobj;        /* persistent mirror, NULL when transient */
    struct inode *parent; /* NULL for a layer's root */
};

/* A leaf is five cache lines (the node pool hands out 64-byte aligned
 * NODE_BYTES). With 15 keys: line 0 header, perm, links; lines 1-2 slices
 * and lengths; lines 3-4 values. With 14 keys the values move 8 bytes on,
 * to the paper's InCLL layout (Cohen et al., Figure 1): line 3 is one log
 * word then values 0-6, line 4 values 7-13 then one log word, so that an
 * InCLL is in the cache line of the values it logs. A durable variant
 * would also take line 0's pobj and kind words (which an in-place node
 * does not need) for the permutation's InCLL (epoch and flags, the old
 * permutation), in the line of the permutation itself. */
struct leaf {
    struct node h;
    /* body (the mirror's layout) */
    uint64_t kind;
    uint64_t perm;         /* count in bits 0-3, slot of the i-th key in
                              nibble i+1; nibbles past count: free slots */
    struct leaf *next, *prev;
    uint64_t lowkey;       /* no key of this leaf is below it */
    uint64_t ikey[LWIDTH]; /* slices, big-endian as integers */
    uint8_t klen[16];      /* 0-8 bytes of the slice, or KLEN_LAYER */
#if LWIDTH == 14
    uint64_t vlog1;        /* reserved: the InCLL of values 0-6 */
#endif
    uint64_t val[LWIDTH];  /* value, or the layer root (a node *) */
#if LWIDTH == 14
    uint64_t vlog2;        /* reserved: the InCLL of values 7-13 */
#endif
};
enum {
    LB_PERM = 8, LB_NEXT = 16, LB_PREV = 24, LB_LOWKEY = 32, LB_IKEY = 40,
    LB_KLEN = LB_IKEY + 8 * LWIDTH, LB_VAL = LB_KLEN + 16 + 8 * (LWIDTH == 14),
    LEAF_BODY = LB_VAL + 8 * LWIDTH + 8 * (LWIDTH == 14)
};
#if LWIDTH == 14
_Static_assert(offsetof(struct leaf, vlog1) % 64 == 0 && offsetof(struct leaf, val[7]) % 64 == 0 &&
               offsetof(struct leaf, vlog2) % 64 == 56, "InCLL lines");
#endif
_Static_assert(offsetof(struct leaf, perm) < 64, "the permutation in line 0");

struct inode {
    struct node h;
    uint64_t kind;
    uint64_t nkeys;
    uint64_t ikey[IWIDTH];          /* child[i + 1] holds keys >= ikey[i] */
    struct node *child[IWIDTH + 1];
};
enum { IB_NKEYS = 8, IB_IKEY = 16, IB_CHILD = IB_IKEY + 8 * IWIDTH,
       INODE_BODY = IB_CHILD + 8 * (IWIDTH + 1) };

#define BODY(n) ((char *)(n) + sizeof(struct node))
_Static_assert(offsetof(struct leaf, kind) == sizeof(struct node), "leaf body");
_Static_assert(offsetof(struct leaf, val) - sizeof(struct node) == LB_VAL, "leaf layout");
_Static_assert(sizeof(struct leaf) - sizeof(struct node) == LEAF_BODY, "leaf size");
_Static_assert(offsetof(struct inode, child) - sizeof(struct node) == IB_CHILD, "inode layout");
_Static_assert(sizeof(struct inode) - sizeof(struct node) == INODE_BODY, "inode size");
#define NODE_BYTES 320 /* one pool size class for both kinds */
_Static_assert(sizeof(struct leaf) <= NODE_BYTES && sizeof(struct inode) <= NODE_BYTES,
               "node class");

#endif /* MT_INCLL */

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
    uint64_t first; /* MT_INCLL: the pool's first epoch in this execution */
    int ready;      /* MT_INCLL: made in this execution (mt_create): every
                       node is of it, node_ready has nothing to check */
    unsigned batch; /* MT_INCLL: opts.batch */
};

/* One put or remove: its transaction and the locks it holds. */
#define OP_LOCKS 64
#define OP_SPARE 24 /* a split's new internal nodes: a layer of 2^64 keys
                       has fewer levels */
struct op {
    mt_tree *t;
    txn *tx;   /* NULL when transient */
    int err;   /* first failed txn call */
    int made;  /* MT_INCLL: allocated, freed or txn_write'd something (its
                  transaction is not shared with the next operation) */
    int clean; /* err came before the operation changed the tree: it
                  fails alone, the tree stays usable (op_drop_new) */
    int nspare, nnew;
    struct inode *spare[OP_SPARE]; /* a split's internal nodes, made first */
    struct node *made_new[OP_LOCKS]; /* the nodes it allocated */
    struct leaf *upper; /* a split's leaf above its layer's root (new_root) */
    unsigned splits, unlinks; /* counted in the tree (undone by op_restore) */
#ifndef MT_INCLL
    struct node *gone;     /* the leaf it unlinked: retired once committed */
    int nsaved;            /* nodes saved before their first change */
    uint64_t *upd_word, upd_old; /* an update's value word, and before */
    /* stores readers see unmarked, made once the operation committed
     * (w_ptr_at_commit, root_at_commit) */
    int nlater;
    struct { uint64_t *w, v; } later[2];
    struct node *new_top;
#else
    uint64_t epoch; /* of tx (incll_epoch), for the InCLL fast paths */
    const int *wait; /* incll_waiting_word(tx) */
#endif
    int nheld;
    struct node *held[OP_LOCKS];
    /* the layers the key went through: their roots as first reached, and
     * the key's slice in each (a layer root's split updates the entry of
     * the layer above) */
    int depth;
    struct node *layer[MT_MAX_KEY / 8 + 2];
    uint64_t ik[MT_MAX_KEY / 8 + 2];
};

/* ---- node pool and epochs (mt_node.c) */
void *node_alloc(void);              /* NULL when the pool is exhausted */
void node_free_now(void *n);         /* nobody can reach it */
void node_retire(void *n);           /* freed when no reader can hold it */
void epoch_enter(void);
void epoch_exit(void);

/* ---- the first access to a node in an execution (MT_INCLL): node_ready
 * before reading a node; t_tx is the calling thread's transaction (every
 * access runs in one), t_first its pool's first epoch, t_err the first
 * failed recovery of the thread's current operation. */
#ifdef MT_INCLL
extern __thread txn *t_tx;
extern __thread uint64_t t_first;
extern __thread int t_ready; /* its tree's `ready` */
extern __thread int t_err;
void node_recover(struct node *n);
/* the readers' grace for blocks the engine holds back (incll_grace): the
 * node epoch now, and whether every reader of that epoch is gone */
uint64_t mt_grace_now(void *arg);
int mt_grace_passed(void *arg, uint64_t token);
static inline void node_ready(struct node *n)
{
    /* a tree made in this execution: no check on the node (a branch on
     * its epoch word, loaded with its first miss, cost C-uniform reads 12%) */
    if (__builtin_expect(t_ready, 1))
        return;
    uint64_t e = __atomic_load_n(&((struct leaf *)n)->pepoch, __ATOMIC_ACQUIRE);
    if (__builtin_expect((e >> INCLL_EPOCH_SHIFT) < t_first, 0))
        node_recover(n);
}
/* After a restart (t_ready 0) every node is checked at its first access
 * (node_recover): a refused one (TXN_E_CORRUPT) or one that could not be
 * recovered sets t_err, and the walk that met it stops there, as do walks
 * that go round a cycle (node_fail). */
static inline int node_err(void) { return t_err; }
static inline void node_fail(int rc)
{
    if (!t_err)
        t_err = rc;
}
static inline int nodes_trusted(void) { return t_ready; }
static inline void node_err_clear(void) { t_err = 0; }
/* stores into nodes: traced (word-sized; bytes by their word) */
#define PST(x, v) incll_store_shared((uint64_t *)&(x), (uint64_t)(v))
void pst8(uint8_t *p, uint8_t v);
#define PST8(x, v) pst8(&(x), (uint8_t)(v))
/* The version word means nothing after a restart (node_recover resets
 * it): the crash simulator's build traces its stores like any other, a
 * normal build stores it in line, without a call into the library. */
#ifdef PMTX_TRACE
#define VSTORE(n, v) incll_store_shared((uint64_t *)&(n)->version, (v))
#define VCAS(n, v, nv) incll_cas((uint64_t *)&(n)->version, (v), (nv))
#else
#define VSTORE(n, v) atomic_store_explicit(&(n)->version, (v), memory_order_release)
#define VCAS(n, v, nv)                                                                   \
    atomic_compare_exchange_strong_explicit(&(n)->version, &(uint64_t){(v)}, (nv),      \
                                            memory_order_acquire, memory_order_relaxed)
#endif
#else
static inline void node_ready(struct node *n) { (void)n; }
static inline int node_err(void) { return 0; }
static inline void node_fail(int rc) { (void)rc; }
static inline int nodes_trusted(void) { return 1; }
static inline void node_err_clear(void) {}
#define PST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define PST8(x, v) __atomic_store_n(&(x), (uint8_t)(v), __ATOMIC_RELAXED)
#define VSTORE(n, v) atomic_store_explicit(&(n)->version, (v), memory_order_release)
#endif

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
    uint64_t v = atomic_load_explicit(&n->version, memory_order_relaxed);
#ifdef MT_INCLL
    VSTORE(n, v | bits);
#else
    atomic_store_explicit(&n->version, v | bits, memory_order_relaxed);
#endif
    atomic_thread_fence(memory_order_release);
}

/* ---- operations' writes: DRAM store plus txn_write to the mirror */
void op_lock(struct op *o, struct node *n);
int op_trylock(struct op *o, struct node *n);
void op_hold(struct op *o, struct node *n); /* a new node, locked */
/* After a clean error (o->clean): the nodes the operation allocated go
 * back (its transaction then ends without a change). */
void op_drop_new(struct op *o);
int op_holds(struct op *o, struct node *n);
void op_unhold(struct op *o, struct node *n); /* without unlocking it */
void w_u64(struct op *o, struct node *n, size_t off, uint64_t v);
void w_ptr(struct op *o, struct node *n, size_t off, void *p);
void w_u8(struct op *o, struct node *n, size_t off, uint8_t v);
/* mirror words [off, off + 8 * count) already stored in DRAM: values, or
 * node pointers (translated to their mirrors' handles) */
void w_range(struct op *o, struct node *n, size_t off, unsigned count);
void w_range_ptr(struct op *o, struct node *n, size_t off, unsigned count);
void op_unlock(struct op *o, struct node *n); /* an unchanged node */
/* a new node: allocate DRAM and mirror; the body is then filled in DRAM
 * and written whole by w_image */
struct leaf *leaf_new(struct op *o);
struct inode *inode_new(struct op *o);
void w_image(struct op *o, struct node *n);
/* n, being unlinked: its persistent object freed with o's transaction
 * (before any change), then, once unlinked, n itself (node_gone: retired
 * in DRAM once o committed; nothing in the pool build, whose node is the
 * object) */
void node_discard(struct op *o, struct node *n);
void node_gone(struct op *o, struct node *n);
void w_anchor(struct op *o, struct node *root);
/* A node pointer that readers follow without a version check of its
 * node (a left neighbour's next, the layer's entry in the leaf above),
 * and the top root: written to the mirror now (w_ptr_at_commit), stored
 * in DRAM once the operation committed, before its unlocks (txn.h; the
 * pool build stores them now). A failed operation never showed them. */
void w_ptr_at_commit(struct op *o, struct node *n, size_t off, void *p);
void root_at_commit(struct op *o, struct node *q);
/* n (locked) is about to change, by PST stores or writes: logged first
 * (MT_INCLL), or opened to write (txn_open: cow's copy, undo's log) and
 * its DRAM body, parent and root bit saved (txn.h: an error after the
 * first change puts them back, op_finish) */
void node_will_change(struct op *o, struct node *n);
/* the same for the tree's anchor, before a new root of the top layer */
void anchor_will_change(struct op *o);
/* n (locked, or new) becomes a layer's root, or stops being one */
void node_set_root(struct op *o, struct node *n, int root);
/* InCLL fast paths on a locked leaf (plain mirror writes elsewhere):
 * value of slot s in use; begin an insert into a free slot (then
 * put_entry's stores); begin a remove; publish the new permutation */
void w_value(struct op *o, struct leaf *l, unsigned s, uint64_t v);
void w_insert_begin(struct op *o, struct leaf *l);
void w_remove_begin(struct op *o, struct leaf *l);
void w_perm(struct op *o, struct leaf *l, uint64_t perm);
/* w_value (-1), or (MT_INCLL) the free position of perm to move the entry
 * to, nothing changed yet (incll_update_try's INCLL_MOVE, a slot free
 * since the start of the epoch): then w_move_begin, put_entry into that
 * slot, w_perm(perm_swap). */
int w_value_try(struct op *o, struct leaf *l, unsigned s, uint64_t v);
void w_move_begin(struct op *o, struct leaf *l);
/* ---- a read-only operation's transaction (MT_INCLL; nothing otherwise) */
#ifdef MT_INCLL
/* The calling thread's shared transaction (opts.batch): its tree, pool,
 * epoch and epoch-end word, and the operations it has run. */
struct mt_batch {
    mt_tree *t;
    txn *tx;
    txn_pool *pool;
    uint64_t epoch;
    const int *wait;
    unsigned n;
};
extern __thread struct mt_batch t_batch;
extern __thread txn_pool *t_pool; /* of a read: recover in a txn of its own */
/* rd_begin's rest: the shared transaction committed (its result) when an
 * epoch end waits for it; else t_tx is it if it is on t's pool (a node's
 * first access after a restart recovers in it), or NULL */
int rd_batch(mt_tree *t);
/* Reads enter no transaction: only a node's first access after a restart
 * writes (node_recover begins one for it, or uses the thread's shared
 * one). An epoch end waiting for the shared transaction ends it here too. */
static inline int rd_begin(mt_tree *t)
{
    if (atomic_load_explicit(&t->broken, memory_order_relaxed))
        return TXN_E_STATE;
    t_pool = t->pool;
    t_first = t->first;
    t_ready = t->ready;
    t_err = 0;
    t_tx = NULL;
    if (!t_batch.tx)
        return 0;
    if (!incll_waiting(t_batch.wait) && t_batch.pool == t->pool) {
        t_tx = t_batch.tx;
        return 0;
    }
    return rd_batch(t);
}
static inline int rd_end(mt_tree *t)
{
    (void)t;
    t_pool = NULL;
    return t_err;
}
#else
int rd_begin(mt_tree *t);
int rd_end(mt_tree *t);
#endif

/* An operation's start: its transaction (MT_INCLL: the thread's shared
 * one when it is on this tree, else op_begin_tx begins one). */
#ifdef MT_INCLL
int op_begin_tx(struct op *o, mt_tree *t);
#endif
static inline int op_begin(struct op *o, mt_tree *t)
{
    o->t = t;
    o->tx = NULL;
    o->err = 0;
    o->made = 0;
    o->clean = 0;
    o->nspare = o->nnew = 0;
    o->upper = NULL;
    o->splits = o->unlinks = 0;
#ifndef MT_INCLL
    o->gone = NULL;
    o->nsaved = 0;
    o->upd_word = NULL;
    o->nlater = 0;
    o->new_top = NULL;
#endif
    o->nheld = 0;
    o->depth = 0;
    if (atomic_load(&t->broken))
        return TXN_E_STATE;
#ifdef MT_INCLL
    int rc = 0;
    if (t_batch.tx && t_batch.t == t) {
        o->tx = t_batch.tx;
        o->epoch = t_batch.epoch;
        o->wait = t_batch.wait;
    } else {
        rc = op_begin_tx(o, t);
    }
    t_tx = o->tx;
    t_first = t->first;
    t_ready = t->ready;
    t_err = 0;
    return rc;
#else
    return t->pool ? txn_begin(t->pool, &o->tx) : 0;
#endif
}

/* Commit (or abort on an error), then unlock all. */
int op_finish(struct op *o);
static inline int op_end(struct op *o)
{
#ifdef MT_INCLL
    if (t_err && !o->err)
        o->err = t_err;
    t_tx = NULL;
    /* commits cover whole operations: an epoch end waiting for this
     * transaction has it after this operation (a commit hook announces
     * the state after it) */
    if (o->tx && !o->err && !o->made && ++t_batch.n < o->t->batch && !incll_waiting(o->wait)) {
        t_batch.t = o->t; /* the next operation goes on in it */
        t_batch.tx = o->tx;
        t_batch.pool = o->t->pool;
        t_batch.epoch = o->epoch;
        t_batch.wait = o->wait;
        while (o->nheld > 0)
            node_unlock(o->held[--o->nheld]);
        return 0;
    }
#endif
    return op_finish(o);
}

/* A node's persistent object (NULL: transient). */
static inline txn_obj *node_obj(struct node *n)
{
#ifdef MT_INCLL
    return (txn_obj *)((char *)n - INCLL_OBJ_HDR);
#else
    return n->pobj;
#endif
}

/* A tree of opts (mt_tree.c), nothing in it yet. */
mt_tree *tree_new(const mt_opts *opts);

static inline int is_leaf(struct node *n)
{
    return (atomic_load_explicit(&n->version, memory_order_relaxed) & V_LEAF) != 0;
}

#endif
