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

/* Calls fn on every object the layout machinery holds that nothing else
 * reaches: the record, its signature table, a migration's scratch object
 * and lists, the objects a BUILD made and those a CLEAN still has to
 * free. For leak checks (crash simulator). */
int layout_objects(txn_pool *p, int (*fn)(txn_obj *o, void *arg), void *arg);

#endif
