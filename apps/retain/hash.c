/* hash.c - the chained hash table kernel: a fixed array of bucket
 * handles, chains of one-key nodes. */
#include "retain.h"

unsigned hash_buckets(size_t n)
{
    unsigned nb = 1;
    while (nb < n / 2)
        nb *= 2;
    return nb;
}

static size_t bucket_of(const struct instance *k, uint64_t key)
{
    return mix64(key) & (k->nb - 1);
}

/* The node holding key (*cur, loaded in d; NULL if none) and the one
 * before it in its chain (*prev; NULL: the bucket's first). */
static int hash_find(txn *tx, const struct instance *k, uint64_t key, txn_obj **buckets,
                     txn_obj **prev, txn_obj **cur, struct node *d)
{
    TRY(entry_get(tx, k, buckets));
    *prev = NULL;
    TRY(txn_read(tx, *buckets, 8 * bucket_of(k, key), cur, sizeof *cur));
    while (*cur) {
        TRY(node_load(tx, k, *cur, d));
        if (d->key[0] == key)
            return 0;
        *prev = *cur;
        *cur = d->child[0];
    }
    return 0;
}

static int hash_lookup(txn *tx, const struct instance *k, uint64_t key, int *found)
{
    txn_obj *buckets, *prev, *cur;
    struct node d;
    TRY(hash_find(tx, k, key, &buckets, &prev, &cur, &d));
    *found = cur != NULL;
    return 0;
}

static int hash_insert(txn *tx, const struct instance *k, uint64_t key, uint64_t val)
{
    txn_obj *buckets, *o;
    size_t b = bucket_of(k, key);
    struct node d = {.n = 1, .key = {key}, .val = {val}};
    TRY(entry_get(tx, k, &buckets));
    TRY(txn_read(tx, buckets, 8 * b, &d.child[0], 8));
    TRY(node_alloc(tx, k, &o));
    TRY(node_store(tx, k, o, &d, W_NEW));
    return txn_write(tx, buckets, 8 * b, &o, sizeof o);
}

static int hash_remove(txn *tx, const struct instance *k, uint64_t key)
{
    txn_obj *buckets, *prev, *cur;
    struct node d, pd;
    TRY(hash_find(tx, k, key, &buckets, &prev, &cur, &d));
    if (!cur)
        return 0;
    if (prev) {
        TRY(node_load(tx, k, prev, &pd));
        pd.child[0] = d.child[0];
        TRY(node_store(tx, k, prev, &pd, W_CHILD));
    } else {
        TRY(txn_write(tx, buckets, 8 * bucket_of(k, key), &d.child[0], 8));
    }
    return node_free(tx, k, cur, &d);
}

static int hash_create(txn *tx, const struct instance *k)
{
    txn_obj *buckets;
    TRY(k->m ? txn_migrate_alloc(k->m, tx, 8 * (size_t)k->nb, &buckets)
             : txn_alloc(tx, 8 * (size_t)k->nb, &buckets));
    return entry_set(tx, k, buckets);
}

const struct kernel hash_kernel = {"hash", hash_create, hash_lookup, hash_insert, hash_remove};
