/* leaf.c - the test leaf node of leaf.h on the InCLL primitives. */
#include <stddef.h>

#include "leaf.h"

const incll_layout leaf_layout = {
    .size = sizeof(struct leaf),
    .perm_off = offsetof(struct leaf, p),
    .vals_off = offsetof(struct leaf, vals),
    .nslots = LEAF_WIDTH,
    .ngroups = 2,
    .group_off = {offsetof(struct leaf, incll1), offsetof(struct leaf, incll2)},
};

int tleaf_new(txn *tx, txn_obj **out)
{
    int rc = txn_alloc(tx, INCLL_NODE_ALLOC(sizeof(struct leaf)), out);
    return rc ? rc : incll_node_init(tx, *out, &leaf_layout, 0);
}

int tleaf_open(txn *tx, txn_obj *o, struct leaf **out)
{
    int rc = incll_node_prepare(tx, o, &leaf_layout);
    *out = rc ? NULL : incll_node(o);
    return rc;
}

int tleaf_find(const struct leaf *n, uint64_t key)
{
    for (int s = 0; s < LEAF_WIDTH; s++)
        if (n->p.perm >> s & 1 && n->keys[s] == key)
            return s;
    return -1;
}

int tleaf_insert(txn *tx, txn_obj *o, uint64_t key, uint64_t val)
{
    struct leaf *n;
    int rc = tleaf_open(tx, o, &n);
    if (rc)
        return rc;
    if (tleaf_find(n, key) >= 0)
        return TXN_E_INVAL;
    int s = 0;
    while (s < LEAF_WIDTH && n->p.perm >> s & 1)
        s++;
    if (s == LEAF_WIDTH)
        return TXN_E_NOSPACE; /* a real tree splits here, after incll_log() */
    if ((rc = incll_insert_begin(tx, o, &leaf_layout)))
        return rc;
    incll_store(&n->keys[s], key);
    incll_store(&n->vals[s], val);
    incll_perm_store(o, &leaf_layout, n->p.perm | 1ull << s);
    return 0;
}

int tleaf_remove(txn *tx, txn_obj *o, uint64_t key)
{
    struct leaf *n;
    int rc = tleaf_open(tx, o, &n);
    int s = rc ? -1 : tleaf_find(n, key);
    if (rc || s < 0)
        return rc ? rc : TXN_E_INVAL;
    if ((rc = incll_remove_begin(tx, o, &leaf_layout)))
        return rc;
    incll_perm_store(o, &leaf_layout, n->p.perm & ~(1ull << s));
    return 0;
}

int tleaf_update(txn *tx, txn_obj *o, uint64_t key, uint64_t val)
{
    struct leaf *n;
    int rc = tleaf_open(tx, o, &n);
    int s = rc ? -1 : tleaf_find(n, key);
    if (rc || s < 0)
        return rc ? rc : TXN_E_INVAL;
    return incll_update(tx, o, &leaf_layout, (unsigned)s, val);
}
