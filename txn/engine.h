/* engine.h - the contract each engine implements, once, in its folder.
 *
 * Shared code (txn/) calls only these; it never asks which engine it is.
 * txn/api.c checks arguments and bounds, owns per-thread contexts, the
 * allocator's volatile side and deferred actions, then calls the engine.
 *
 * How the engines map onto txn.h (one API, no engine-specific calls):
 *
 *  undo  txn_obj = the payload block itself. txn_write logs the old bytes
 *        (one record, one barrier) then stores in place; txn_read and
 *        txn_open are plain loads. Commit: persist written ranges, commit
 *        record (2 barriers). Recovery rolls back an uncommitted tail.
 *
 *  redo  txn_obj = block with an 8-byte writers bitmap before the payload
 *        (eng_obj_hdr = 8). txn_write appends (addr, new bytes) to the log,
 *        sets the writer bit, links the record into the transaction's hash
 *        by object; txn_read checks the bitmap and only then looks up.
 *        txn_open(RO) returns the object in place (valid for unwritten
 *        bytes). Commit: log, COMMITTED, apply, IDLE (4 barriers).
 *
 *  cow   txn_obj = a wrapper {payload, new, old_backup, writer}. txn_open
 *        (RW) copies the payload (a second writer gets TXN_E_CONFLICT) and
 *        returns the copy; txn_write lands in the copy; other readers see
 *        the old payload. Commit: write set + copies, COMMITTED, swap +
 *        free old through old_backup, IDLE (4 barriers).
 *
 *  incll txn_obj = block with an epoch tag. The first txn_write to an
 *        object in an epoch copies it to the external log (flushed; one
 *        fence before the first in-place change), later writes in the same
 *        epoch log nothing; commit costs no barrier and txn_sync() waits
 *        for the epoch's global flush.
 *
 *  pmdk  txn_obj = a libpmemobj allocation (direct pointer). txn_write =
 *        pmemobj_tx_add_range_direct + store; commit = pmemobj_tx_commit.
 *        Its pool is PMDK's own file; the engine implements the pool calls.
 *
 *  none  txn_obj = the payload; writes store in place after saving the old
 *        bytes in DRAM (so txn_abort works); nothing is flushed or fenced.
 */
/* eng_begin, eng_sync, eng_obj_blocks and eng_read have defaults in
 * engine_defaults.c (nothing at begin, durable at commit, one block per
 * object, reads through eng_open): an engine defines them only to differ. */
#ifndef PMTX_ENGINE_H
#define PMTX_ENGINE_H

#include <stddef.h>

#include "tx.h"

extern const char eng_name[];

/* Payload bytes of object o, or 0 if o is not an object of the pool. */
size_t eng_obj_size(txn_pool *p, const txn_obj *o);

/* The heap blocks that make up object o (at most 2): what a leak check
 * compares with the allocator's live blocks. Returns how many. */
int eng_obj_blocks(txn_pool *p, const txn_obj *o, void *blk[2]);

/* Whether the engine keeps a persistent log (0 for none): recovery and
 * slot claims are skipped otherwise. */
extern const int eng_persistent;

/* Recovery of one slot's last transaction, given its valid records in log
 * order. Must be idempotent (a crash during recovery recovers again), and
 * leave its effects flushed; the caller fences and invalidates the log.
 * The records were validated with eng_rec_valid first. */
int eng_recover(txn_pool *p, struct slot_hdr *slot, struct log_rec **recs,
                size_t n);

/* Check a record before recovery writes anything (TXN_E_CORRUPT). */
int eng_rec_valid(txn_pool *p, const struct log_rec *r);

int eng_tx_init(struct txn *tx);  /* per-thread state; tx->eng */
void eng_tx_fini(struct txn *tx);
int eng_begin(struct txn *tx);

/* Payload address of o (in place) and what it may be read through. */
void *eng_open(struct txn *tx, txn_obj *o, int mode);

/* Bounds are checked by the caller: off + n <= payload size. */
int eng_read(struct txn *tx, txn_obj *o, size_t off, void *dst, size_t n);
int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src,
              size_t n);

/* The object layer: allocate/free with the engine's header. */
int eng_alloc(struct txn *tx, size_t n, txn_obj **out);
int eng_free(struct txn *tx, txn_obj *o);

/* Make the transaction durable, or return an error having rolled it back.
 * Shared code releases freed blocks and runs deferred actions after. */
int eng_commit(struct txn *tx);
/* Roll back; shared code then releases reserved blocks. */
void eng_abort(struct txn *tx);

/* txn_sync(): wait until every committed transaction is durable. */
int eng_sync(txn_pool *p);

#endif
