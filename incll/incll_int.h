/* incll_int.h - what the incll engine (incll.c) gives the InCLL
 * primitives (incll_prim.c); internal, not exported. `tx` is the calling
 * thread's running transaction. */
#ifndef PMTX_INCLL_INT_H
#define PMTX_INCLL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "txn.h"

/* The epoch of the running transaction (it never changes under it). */
uint64_t incll__epoch(txn *tx);

/* The first epoch of this execution: every failed epoch is below it. */
uint64_t incll__first_epoch(txn *tx);

/* 1 if epoch e failed (a crash happened in it), 0 if it completed or has
 * not ended, TXN_E_CORRUPT if it is older than what the engine remembers
 * of failures. */
int incll__epoch_failed(txn *tx, uint64_t e);

/* Make sure a crash in the current epoch fails it: a record of the epoch
 * in this thread's log, durable (one barrier, once per thread and epoch). */
int incll__mark(txn *tx);

/* Object o's whole block into the current epoch's external log, durable
 * (one barrier) and tagged, unless it is there already (or was allocated
 * in this epoch). */
int incll__log(txn *tx, txn_obj *o);

/* The first `n` payload bytes of o change in place this epoch: the
 * epoch's global flush must write them back. Each call adds a range
 * (no merging): call it once per object and epoch. */
void incll__dirty(txn *tx, txn_obj *o, size_t n);

/* Epochs ended in this process, all pools (incll_stats). */
uint64_t incll__epochs_ended(void);

#endif
