/* inpool/mt_layout.h - the in-pool store's nodes: incll objects read and
 * changed in place, no DRAM copy (included by mt_node.h; see mt_store.h).
 *
 * Each node is an object of the incll engine (INCLL_NODE_ALLOC bytes:
 * five lines, the payload starting INCLL_OBJ_HDR bytes into the first).
 * Node pointers are payload addresses (handles stay valid across
 * restarts). The version word and the parent pointer live in the node but
 * are volatile in meaning: the first access to a node in an execution
 * (node_ready) resets them (version from the kind and root bytes, parent
 * unknown = NULL) before incll_node_prepare() recovers its InCLLs.
 * Stores to a node all go through the traced incll_* calls.
 */
#ifndef PMTX_MT_LAYOUT_H
#define PMTX_MT_LAYOUT_H

#include "incll.h"

/* 14-key leaves: the five lines keep room for the paper's InCLLs */
#define MT_LEAF_WIDTH 14
#define LWIDTH MT_LEAF_WIDTH

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
 * its parent (masstree.c, unlink_lock_by_parent). */
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

/* ---- stores into nodes: traced (word-sized; bytes by their word) */
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
#define VMARK(n, v) VSTORE(n, v)

/* ---- the first access to a node in an execution: node_ready before
 * reading a node; t_tx is the calling thread's transaction (every access
 * runs in one), t_first its pool's first epoch, t_err the first failed
 * recovery of the thread's current operation. */
extern __thread txn *t_tx;
extern __thread uint64_t t_first;
extern __thread int t_ready; /* its tree's `ready` */
extern __thread int t_err;
void node_recover(struct node *n);
static inline void node_ready(struct node *n)
{
    /* a tree made in this execution: no check on the node (a branch on
     * its epoch word, loaded with its first miss, costs the reads:
     * docs/masstree.md, "The first-access check") */
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

/* A node's persistent object: the node is its payload. */
static inline txn_obj *node_obj(struct node *n)
{
    return (txn_obj *)((char *)n - INCLL_OBJ_HDR);
}

/* ---- the store's part of an operation */
struct op_store {
    int made;        /* allocated, freed or txn_write'd something (its
                        transaction is not shared with the next operation) */
    uint64_t epoch;  /* of tx (incll_epoch), for the InCLL fast paths */
    const int *wait; /* incll_waiting_word(tx) */
};

#endif
