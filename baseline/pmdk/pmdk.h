/* pmdk.h - what the pmdk engine offers test tools that compile it in (the
 * crash simulator): its pool's mapping and the objects PMDK's heap holds.
 * Not exported by libtxn-pmdk. */
#ifndef PMTX_PMDK_H
#define PMTX_PMDK_H

#include <stddef.h>

#include "txn.h"

/* Where `p` is mapped: the bytes of its file. */
void pmdk_region(txn_pool *p, void **base, size_t *size);

enum pmdk_kind {
    PMDK_USER,    /* a txn.h object */
    PMDK_ROOT,    /* the root */
    PMDK_META,    /* the engine's creation options */
    PMDK_RESERVE, /* the engine's intent log reserve */
};

/* Calls fn for every object PMDK's heap holds, read from PMDK's persistent
 * heap (pmemobj_first/next), not from the engine's volatile map. */
void pmdk_foreach_object(txn_pool *p, void (*fn)(txn_obj *o, enum pmdk_kind k, void *arg),
                         void *arg);

#endif
