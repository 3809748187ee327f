/* skiplist.c - the skip list kernel: a head node of level 4, nodes of
 * level 1 to 4 (a level drawn from the key's hash). */
#include "retain.h"

static unsigned level_of(uint64_t key)
{
    uint64_t h = mix64(key ^ 0x5eed);
    unsigned l = 1;
    while (l < SKIP_LEVELS && (h & 1)) {
        l++;
        h >>= 1;
    }
    return l;
}

/* The last node before key on each level (upd), and the node holding key
 * (*cand, loaded in cd; NULL if none). The search drops a level at a node
 * it often loaded already (the one it stopped before): that node is loaded
 * once, for every program alike. */
static int skip_find(txn *tx, const struct instance *k, uint64_t key, txn_obj *upd[SKIP_LEVELS],
                     txn_obj **cand, struct node *cd)
{
    txn_obj *x, *stop = NULL;
    struct node d, sd;
    TRY(entry_get(tx, k, &x));
    TRY(node_load(tx, k, x, &d));
    for (int l = SKIP_LEVELS - 1; l >= 0; l--) {
        while (d.child[l]) {
            txn_obj *nx = d.child[l];
            struct node nd;
            if (nx == stop)
                nd = sd;
            else
                TRY(node_load(tx, k, nx, &nd));
            if (nd.key[0] >= key) {
                stop = nx;
                sd = nd;
                if (l == 0) {
                    *cd = nd;
                    *cand = nx;
                }
                break;
            }
            x = nx;
            d = nd;
        }
        upd[l] = x;
    }
    if (*cand && cd->key[0] != key)
        *cand = NULL;
    return 0;
}

static int skip_lookup(txn *tx, const struct instance *k, uint64_t key, int *found)
{
    txn_obj *upd[SKIP_LEVELS], *cand = NULL;
    struct node cd;
    TRY(skip_find(tx, k, key, upd, &cand, &cd));
    *found = cand != NULL;
    return 0;
}

static int skip_link(txn *tx, const struct instance *k, txn_obj *pred, unsigned l, txn_obj *to)
{
    return txn_write(tx, pred, k->L->off_child + 8 * l, &to, sizeof to);
}

static int skip_insert(txn *tx, const struct instance *k, uint64_t key, uint64_t val)
{
    txn_obj *upd[SKIP_LEVELS], *cand = NULL, *o;
    struct node cd, d = {.n = 1, .leaf = level_of(key), .key = {key}, .val = {val}};
    TRY(skip_find(tx, k, key, upd, &cand, &cd));
    for (unsigned l = 0; l < d.leaf; l++)
        TRY(txn_read(tx, upd[l], k->L->off_child + 8 * l, &d.child[l], 8));
    TRY(node_alloc(tx, k, &o));
    TRY(node_store(tx, k, o, &d, W_NEW));
    for (unsigned l = 0; l < d.leaf; l++)
        TRY(skip_link(tx, k, upd[l], l, o));
    return 0;
}

static int skip_remove(txn *tx, const struct instance *k, uint64_t key)
{
    txn_obj *upd[SKIP_LEVELS], *cand = NULL;
    struct node cd;
    TRY(skip_find(tx, k, key, upd, &cand, &cd));
    if (!cand)
        return 0;
    for (unsigned l = 0; l < cd.leaf; l++)
        TRY(skip_link(tx, k, upd[l], l, cd.child[l]));
    return node_free(tx, k, cand, &cd);
}

static int skip_create(txn *tx, const struct instance *k)
{
    txn_obj *head;
    struct node d = {.n = 0, .leaf = SKIP_LEVELS};
    TRY(node_alloc(tx, k, &head));
    TRY(node_store(tx, k, head, &d, W_NEW));
    return entry_set(tx, k, head);
}

const struct kernel skip_kernel = {"skip", skip_create, skip_lookup, skip_insert, skip_remove};
