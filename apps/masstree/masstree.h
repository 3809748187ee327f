/* masstree.h - a concurrent Masstree (a trie of B+trees on 8-byte key
 * slices) with three kinds of node storage, the first two in one build:
 *
 *   transient  every node in DRAM, from an mmap'd node pool (opts.pool NULL)
 *   txn.h      the same DRAM tree, and every node mirrored in a persistent
 *              object of a txn.h pool: each put/remove is one transaction,
 *              each change of a node one txn_write to its object; the
 *              node locks an operation takes are held until it committed.
 *
 * Reads (get, scan) never lock and never enter a transaction: they read
 * the DRAM nodes optimistically, checking each node's version word. After
 * a crash, mt_open() rebuilds the DRAM tree from the persistent objects,
 * which hold exactly the completed puts and removes (durable when they
 * return, per the engine's durability; incll: at the epoch's end).
 *
 * What the txn.h storage costs: each put or remove pays its engine's
 * logging and barriers on every node it changes; reads pay nothing (they
 * never touch the pool, as in DRAM-copy designs such as Kamino-Tx or
 * DudeTM); the nodes take DRAM and pool space both; a restart rebuilds
 * the DRAM tree (ycsb --restart measures it).
 *
 *   in-pool    (the in-pool store, on the incll engine: ycsb-incll) no
 *              DRAM copy: every node is an incll object read and changed
 *              in place, writers each in a transaction of the engine's
 *              epoch, readers in none (but at a node's first access after
 *              a restart); values change through the leaves' value
 *              InCLLs, inserts and removes through the permutation InCLL,
 *              everything else after the node went to the external log
 *              (inpool/). Durable at the end of the epoch (txn_sync);
 *              mt_open rebuilds nothing: each node is recovered at its
 *              first access. Empty leaves are unlinked and freed as in
 *              the other variants (their blocks reused once no reader
 *              can hold them), and there is no transient tree in this
 *              build.
 *
 * Keys are byte strings of at most MT_MAX_KEY bytes, values 8-byte words.
 * Every call may be made by any number of threads at once.
 */
#ifndef PMTX_MASSTREE_H
#define PMTX_MASSTREE_H

#include <stddef.h>
#include <stdint.h>

#include "txn.h"

#define MT_MAX_KEY 256

typedef struct mt_tree mt_tree;

typedef struct mt_opts {
    txn_pool *pool;   /* NULL: transient tree */
    txn_obj *anchor;  /* object holding the root's handle (default: the
                         pool's root object) */
    size_t anchor_off; /* offset of that handle in anchor (8-aligned) */
    /* commits an operation's transaction (default txn_commit); the crash
     * simulator announces the state a commit makes through it. Nonzero
     * only when the transaction did not commit and was rolled back (as
     * txn_commit's errors): on txn.h the tree then puts its DRAM nodes
     * back (mt_put) */
    int (*commit)(txn *tx, void *arg);
    void *commit_arg;
    /* in-pool store (incll) only: up to `batch` puts and removes of a
     * thread share one transaction of the engine's epoch (0 or 1: one
     * each), as the paper's threads, which meet only at epoch boundaries;
     * durability is the epoch's either way. The shared transaction
     * commits after `batch` operations, after an operation that allocated
     * or freed a node (a split, an unlinked leaf), when an epoch end
     * waits for it (checked at the end of each of the thread's puts and
     * removes and at the start of its reads), and at mt_flush(): always
     * between two operations. Ignored by the other builds, whose
     * operations are durable at their own commit. */
    unsigned batch;
} mt_opts;

/* A new empty tree; with a pool, its root handle is written to the anchor
 * in one transaction. 0, TXN_E_NOMEM, or the transaction's error. */
int mt_create(const mt_opts *opts, mt_tree **out);

/* Rebuild the tree that the anchor names (txn.h storage only), checking
 * its structure: TXN_E_CORRUPT if it is not a well-formed tree. */
int mt_open(const mt_opts *opts, mt_tree **out);

/* Release the DRAM tree (the persistent objects stay). No call may run;
 * every other thread has called mt_flush(). Flushes the calling thread. */
void mt_close(mt_tree *t);

/* Commit the calling thread's shared transaction (mt_opts.batch), if it
 * has one on t: before the thread waits for another thread (an epoch end
 * waits for the transaction, and other threads' puts for the epoch end),
 * begins a transaction of its own on the pool or calls txn_sync or
 * txn_pool_close (which would wait for it), or exits (a thread that
 * exits without it has its transaction rolled back with its context: its
 * InCLL changes stay, see incll.h). 0 or the commit's error (the tree is then unusable, as after
 * a failed put). */
int mt_flush(mt_tree *t);

/* 0 and *val if key is present, 1 if not, TXN_E_INVAL for a long key,
 * TXN_E_STATE once the tree is unusable (see mt_put). */
int mt_get(mt_tree *t, const void *key, size_t len, uint64_t *val);

/* Insert or update: 1 inserted, 0 updated, or a negative TXN_E_*.
 * A put that needs new nodes (a split, a new layer) makes them, and
 * readies every node it will change (logged, or opened to write: cow's
 * copies), before it changes anything: when the pool is full it returns
 * TXN_E_NOSPACE and the tree is as before, usable (removes make room
 * again). On txn.h, an error part way through (a log that must grow from
 * a full pool, where writes log one by one: redo, pmdk, undo with
 * TXN_LOG_BATCH=0) fails the put alone too, and so does a failed commit
 * (rolled back): the DRAM nodes it changed are put back as they were,
 * under its locks (a get may have returned an update's value before its
 * commit failed, as it may return any update's before its commit). In
 * the in-pool store, an error after the first change or a failed commit
 * leaves the tree unusable: every later call returns TXN_E_STATE, and
 * mt_open() brings back the committed tree after the pool is opened
 * again. */
int mt_put(mt_tree *t, const void *key, size_t len, uint64_t val);

/* 1 removed, 0 absent, or a negative TXN_E_* as for mt_put. */
int mt_remove(mt_tree *t, const void *key, size_t len);

/* Called by mt_scan for each key in order; nonzero stops the scan. It
 * must not call the tree API itself (an operation's per-thread state,
 * e.g. whether its tree's nodes need recovery at first access, would be
 * the inner call's for the rest of the scan). */
typedef int (*mt_scan_fn)(const void *key, size_t len, uint64_t val, void *arg);

/* Visit keys >= start (start NULL: from the first key) in ascending order,
 * at most max of them. Returns the number visited, or a negative TXN_E_*.
 * Each key visited was present at some time during the scan. */
long mt_scan(mt_tree *t, const void *start, size_t len, size_t max, mt_scan_fn fn,
             void *arg);

/* Calls fn for the persistent object of every node (txn.h storage). */
void mt_objects(mt_tree *t, void (*fn)(txn_obj *o, void *arg), void *arg);

typedef struct mt_stats {
    uint64_t leaves, inodes, layers; /* nodes in the tree now */
    uint64_t splits, unlinked;       /* leaf splits, empty leaves removed */
} mt_stats;

/* Counts of a quiescent tree (walks it). */
void mt_stats_get(mt_tree *t, mt_stats *out);

#endif
