/* mt_store.h - the node-store contract: what the Masstree's algorithm
 * (masstree.c) asks of the store that keeps its nodes. Internal to
 * apps/masstree; included by mt_node.h.
 *
 * Two stores implement it, each in its own folder, which CMake puts on
 * the include path per engine (pmtx_masstree, CMakeLists.txt):
 *
 *   mirror/  engines undo, redo, cow, pmdk (and none: transient). The
 *            nodes are DRAM; with a pool, each is mirrored byte for byte
 *            in a txn.h object, each put or remove one transaction, each
 *            change of a node one txn_write to its object. Readers never
 *            touch the pool. mt_open rebuilds the DRAM tree.
 *   inpool/  engine incll. The nodes are incll objects, read and changed
 *            in place through InCLLs and the external log; no DRAM copy.
 *            mt_open rebuilds nothing: each node is recovered at its first
 *            access (node_ready).
 *
 * Each store's folder holds mt_layout.h (the nodes' layout and the inline
 * calls the descent makes on every node: node_ready, PST, VSTORE ...)
 * and mt_store_impl.h (the inline calls of this contract below marked
 * "inline"); the rest is out of line in its .c files. The split is where
 * the two differ: how a node is kept, made, changed, freed and found
 * again after a restart. The algorithm itself (descent, leaf search,
 * splits, unlinks, scans, locking) is one, in masstree.c.
 *
 * Errors. A call that fails records its error in o->err (the first one
 * only) and every later write call of o does nothing; o->clean says
 * whether the operation changed the tree before the error (0) or not (1).
 * Durability: none of these calls makes anything durable by itself; an
 * operation's changes are durable when its transaction is (op_end:
 * txn_commit on mirror; the epoch's end, txn_sync, on inpool).
 *
 * The tree's life (masstree.h) is the store's too: mt_create, mt_open,
 * mt_close and mt_flush are defined in each store's folder.
 */
#ifndef PMTX_MT_STORE_H
#define PMTX_MT_STORE_H

/* ---- an operation's frame (inline: mt_store_impl.h)
 *
 * void op_store_reset(struct op *o)
 *     Clears the store's part of o (op_begin, before anything else).
 * int op_store_begin(struct op *o, mt_tree *t)
 *     Gives o its transaction: o->tx, NULL for a transient tree. inpool:
 *     the thread's shared transaction on t if it has one (mt_opts.batch).
 *     0, or txn_begin's error (o then ends with op_end all the same).
 * int op_end(struct op *o)
 *     Ends o: op_finish (commit, or abort on an error; then unlock), or
 *     on inpool hands its transaction on to the thread's next operation
 *     (unlocking only). 0 or the error of o or of its commit.
 * int store_retry(mt_tree *t, int rc)
 *     After an operation failed with rc before it changed anything:
 *     nonzero if running it once more may succeed (inpool: TXN_E_NOSPACE,
 *     once the epoch was ended to free its log and its freed blocks).
 * int rd_begin(mt_tree *t), int rd_end(mt_tree *t)
 *     Around a get, a scan or a walk, which enter no transaction.
 *     rd_begin: TXN_E_STATE once the tree is unusable. rd_end: the first
 *     failed recovery of a node in the read (inpool), else 0.
 *
 * Properties of the store, constants the compiler folds:
 * int store_puts_back(void)
 *     1 if an operation's changes can be taken back until it commits
 *     (mirror: txn_abort and the saved DRAM nodes). 0 (inpool): an InCLL
 *     change stands once made, so an error after the first change leaves
 *     the tree unusable, and a step that may fail without harm (readying
 *     an unlink) runs after the change that must stand.
 * int store_parents_exact(void)
 *     1 if a non-root node's parent pointer always names its parent. 0
 *     (inpool): forgotten at a restart (NULL), and stale after a split of
 *     the parent moved it (only the splitter's own nodes are repointed):
 *     locked_parent checks it and finds the parent from the layer's root.
 * int store_leaf_prev(void)
 *     1 if leaves keep a prev pointer (mirror); 0 (inpool): a leaf's left
 *     neighbour is found in its parent.
 *
 * ---- the first access to a node in an execution (inline: mt_layout.h)
 *
 * void node_ready(struct node *n)
 *     Before reading n: inpool recovers a node not yet accessed since the
 *     restart (its InCLLs rolled back, its version reset, its parent
 *     forgotten, its structure checked). Nothing on mirror.
 * int node_err(void), void node_fail(int rc), void node_err_clear(void)
 *     The calling thread's first refused node (TXN_E_CORRUPT) or failed
 *     recovery in this operation; walks that meet one stop.
 * int nodes_trusted(void)
 *     1 when no node needs node_ready (mirror; inpool in the execution
 *     that made the tree): the descent then skips every check.
 */

/* ---- making and freeing nodes */

/* A new node, zeroed, locked and held by o (and its object allocated in
 * o's transaction). NULL and o->err on failure (TXN_E_NOMEM, the pool's
 * TXN_E_NOSPACE). Its body is filled by PST stores and then w_image. */
struct leaf *leaf_new(struct op *o);
struct inode *inode_new(struct op *o);
/* A new node's body, whole, to its object (nothing on inpool, whose PST
 * stores were the object's). */
void w_image(struct op *o, struct node *n);
/* A node o made and never linked, after a clean error (op_drop_new):
 * back to the DRAM pool, its object with o's aborted transaction
 * (mirror), or freed in o's transaction (inpool). */
void node_drop(struct op *o, struct node *n);
/* n (locked), about to be unlinked by o: its object is to be freed with
 * o's transaction. inpool frees it here, so that a full pool leaves n in
 * place; mirror at node_gone, after the remove's last write to it. */
void node_discard(struct op *o, struct node *n);
/* n is unlinked: mirror frees its object and retires the DRAM node once
 * o committed; nothing on inpool (the node is its object). */
void node_gone(struct op *o, struct node *n);

/* ---- readying what an operation changes, before the first change */

/* n (locked) is about to change, by PST stores or writes: logged whole
 * first (inpool's external log), or opened to write (mirror: txn_open,
 * where cow copies and undo logs; the DRAM body, parent and root bit
 * saved for op_put_back). A failure here comes before any change. */
void node_will_change(struct op *o, struct node *n);
/* the same for the tree's anchor, before a new root of the top layer */
void anchor_will_change(struct op *o);

/* ---- writes (n locked by o, and readied unless noted) */

/* One word or byte of n's body at offset off (LB_*, IB_*): mirror stores
 * it in DRAM and txn_writes it to the mirror (a pointer as its node's
 * handle); inpool logs n if it was not logged in the epoch, then stores. */
void w_u64(struct op *o, struct node *n, size_t off, uint64_t v);
void w_ptr(struct op *o, struct node *n, size_t off, void *p);
void w_u8(struct op *o, struct node *n, size_t off, uint8_t v);
/* words [off, off + 8 * count) of n already stored by PST: values, or
 * node pointers; to the mirror (nothing on inpool) */
void w_range(struct op *o, struct node *n, size_t off, unsigned count);
void w_range_ptr(struct op *o, struct node *n, size_t off, unsigned count);
/* The anchor names root (after anchor_will_change). */
void w_anchor(struct op *o, struct node *root);
/* A node pointer that readers follow without a version check of its node
 * (a left neighbour's next), and the top root: mirror writes the mirror
 * now and stores in DRAM once o committed, before its unlocks, so that a
 * failed operation never showed them; inpool stores them now. */
void w_ptr_at_commit(struct op *o, struct node *n, size_t off, void *p);
void root_at_commit(struct op *o, struct node *q);
/* The entry in slot s of leaf ul (locked, readied) names q, the new root
 * of the layer below (as w_ptr_at_commit on mirror). */
void w_layer_root(struct op *o, struct leaf *ul, unsigned s, struct node *q);
/* n (locked, or new) becomes a layer's root, or stops being one */
void node_set_root(struct op *o, struct node *n, int root);
/* The leaf chain's prev pointers (store_leaf_prev; inline, nothing on
 * inpool): l's left neighbour; a new leaf's, before its w_image; a
 * neighbour's, changed (readied). */
/* struct leaf *leaf_prev(struct leaf *l) */
/* void leaf_prev_init(struct leaf *r, struct leaf *l) */
/* void w_prev(struct op *o, struct leaf *nx, struct leaf *p) */

/* ---- a leaf's entries: the InCLL fast paths on inpool (plain mirror
 * writes on mirror), each on a locked leaf */

/* The value of slot s, in use: an update's one write (fails alone) */
void w_value(struct op *o, struct leaf *l, unsigned s, uint64_t v);
/* An update: w_value and -1; or (inpool, when the line's InCLL cannot
 * take it) the free position of perm to move the entry to, nothing
 * changed yet: then w_move_begin, w_entry into that slot,
 * w_perm(perm_swap). */
int w_value_try(struct op *o, struct leaf *l, unsigned s, uint64_t v);
void w_move_begin(struct op *o, struct leaf *l);
/* An insert into a free slot begins (then w_entry, w_perm); a remove
 * begins (then w_perm). Readied here; a failure fails o alone. */
void w_insert_begin(struct op *o, struct leaf *l);
void w_remove_begin(struct op *o, struct leaf *l);
/* Entry (ik, kl, v) into free slot s (after one of the begins, or
 * node_will_change). */
void w_entry(struct op *o, struct leaf *l, unsigned s, uint64_t ik, unsigned kl, uint64_t v);
/* Publish l's new permutation: the insert, remove or move takes effect. */
void w_perm(struct op *o, struct leaf *l, uint64_t perm);

/* ---- the end of an operation (called by op_finish) */

/* After o aborted on an error after its first change, or its commit
 * failed (rolled back): the DRAM tree as before o, under o's locks. 0, or
 * -1 if that cannot be done (the tree is then unusable: inpool always). */
int op_put_back(struct op *o);
/* o committed (or was transient and did not fail): before its unlocks,
 * the stores w_ptr_at_commit and root_at_commit held back; a gone leaf
 * retired. */
void op_committed(struct op *o);

#include "mt_store_impl.h"

#endif
