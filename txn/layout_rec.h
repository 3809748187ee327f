/* layout_rec.h - what txn/layout.c needs from a pool format: the layout
 * record, an object made with the pool that holds its layout version,
 * signatures and migration state (txn_layout.h). */
#ifndef PMTX_LAYOUT_REC_H
#define PMTX_LAYOUT_REC_H

#include "txn.h"

#define LAYOUT_REC_SIZE 64u /* payload bytes, zero-filled at creation */

/* The pool's layout record, or NULL if its file has none. pool.c keeps
 * its address in the pool header; the pmdk engine finds it by its PMDK
 * type number. */
txn_obj *pool_layout_rec(txn_pool *p);

/* txn_pool_open() on a private copy-on-write view of the file: the open
 * recovers, counts the boot and runs transactions as usual, but every byte
 * it writes stays in this process's memory and is gone at
 * txn_pool_close(); the file is not written. What a check that must leave
 * the file as it was looks at: the pool as the next real open will find
 * it, interrupted transactions recovered. */
int pool_open_view(const char *path, const char *layout, txn_pool **out);

struct txn_layout;

/* Whether txn_layout_open(path, l) refuses the pool (TXN_E_LAYOUT,
 * TXN_E_LAYOUTVER, TXN_E_TYPESIG, message in txn_layout_error()), decided
 * on a view (pool_open_view) without writing the file; 0 when it does not
 * refuse, or the view's own error (the real open then reports it). */
int layout_verdict(const char *path, const struct txn_layout *l);

/* Calls fn on every object the layout machinery holds that nothing else
 * reaches: the record, its signature table, a migration's scratch object
 * and lists, the objects a BUILD made and those a CLEAN still has to
 * free. For leak checks (crash simulator). */
int layout_objects(txn_pool *p, int (*fn)(txn_obj *o, void *arg), void *arg);

#endif
