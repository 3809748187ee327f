/* layout_int.h - what the retention layer (layout.c) offers the crash
 * simulator beyond txn_layout.h. Its layout record (version, signatures,
 * migration state) is the pool's meta object, txn_meta_root(). */
#ifndef PMTX_LAYOUT_INT_H
#define PMTX_LAYOUT_INT_H

#include "txn.h"

struct txn_layout;

/* Whether txn_layout_open(path, l) refuses the pool (TXN_E_LAYOUT,
 * TXN_E_LAYOUTVER, TXN_E_TYPESIG, message in txn_layout_error()), decided
 * on a view (txn_pool_view) without writing the file; 0 when it does not
 * refuse, or the view's own error (the real open then reports it). */
int layout_verdict(const char *path, const struct txn_layout *l);

/* Calls fn on every object the layout machinery holds that nothing else
 * reaches: the record, its signature table, a migration's scratch object
 * and lists, the objects a BUILD made and those a CLEAN still has to
 * free; and txn_join's table, whose handle the record holds too. For leak
 * checks (crash simulator). */
int layout_objects(txn_pool *p, int (*fn)(txn_obj *o, void *arg), void *arg);

#endif
