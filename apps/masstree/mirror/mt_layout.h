/* mirror/mt_layout.h - the mirror store's nodes: DRAM nodes, each
 * mirrored in a txn.h object (included by mt_node.h; see mt_store.h).
 *
 * A node is a volatile header (version word, mirror handle) followed by
 * its body. The body is also the persistent layout: the mirror object
 * holds the body byte for byte, except that node pointers are stored as
 * the handles of the nodes' mirrors. Body offsets (LB_*, IB_*) are the
 * offsets in the mirror.
 */
#ifndef PMTX_MT_LAYOUT_H
#define PMTX_MT_LAYOUT_H

/* Keys of a leaf: 15, or 14 (-DMT_LEAF_WIDTH=14), which leaves room in
 * the same five lines for the paper's InCLLs (see struct leaf). */
#ifndef MT_LEAF_WIDTH
#define MT_LEAF_WIDTH 15
#endif
#define LWIDTH MT_LEAF_WIDTH

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

/* ---- stores into nodes: DRAM, plain atomics (the mirror is written by
 * the w_* calls) */
#define PST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELEASE)
#define PST8(x, v) __atomic_store_n(&(x), (uint8_t)(v), __ATOMIC_RELAXED)
#define VSTORE(n, v) atomic_store_explicit(&(n)->version, (v), memory_order_release)
#define VMARK(n, v) atomic_store_explicit(&(n)->version, (v), memory_order_relaxed)
#define VCAS(n, v, nv)                                                                   \
    atomic_compare_exchange_strong_explicit(&(n)->version, &(uint64_t){(v)}, (nv),      \
                                            memory_order_acquire, memory_order_relaxed)

/* ---- first access: every node is ready (the DRAM tree is rebuilt) */
static inline void node_ready(struct node *n) { (void)n; }
static inline int node_err(void) { return 0; }
static inline void node_fail(int rc) { (void)rc; }
static inline int nodes_trusted(void) { return 1; }
static inline void node_err_clear(void) {}

/* A node's persistent object (NULL: transient). */
static inline txn_obj *node_obj(struct node *n) { return n->pobj; }

/* ---- the store's part of an operation */
struct op_store {
    struct node *gone;     /* the leaf it unlinks: freed, then retired
                              once committed (node_discard, node_gone) */
    int nsaved;            /* nodes saved before their first change */
    uint64_t *upd_word, upd_old; /* an update's value word, and before */
    /* stores readers see unmarked, made once the operation committed
     * (w_ptr_at_commit, root_at_commit) */
    int nlater;
    struct { uint64_t *w, v; } later[2];
    struct node *new_top;
};

#endif
