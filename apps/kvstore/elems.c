/* elems.c - what sets and hashes share (elems.h): their element tables
 * reached through a key, in one place. */
#include <stdlib.h>
#include <string.h>

#include "elems.h"
#include "t_dict.h"

int elems_load(kv_txn *t, struct kv_slice key, unsigned type, txn_obj **d, txn **tx,
               struct pack_val *raw)
{
    unsigned got;
    memset(raw, 0, sizeof *raw);
    *d = NULL;
    *tx = NULL;
    int rc = kv_txn_dict(t, key, &got, d);
    if (rc > 0) {
        *tx = kv_txn_tx(t);
        return got == type ? 2 : KV_E_WRONGTYPE;
    }
    if (rc < 0 || (rc = pack_read(t, key, raw, &got)) <= 0)
        return rc;
    return got == type ? 1 : KV_E_WRONGTYPE;
}

static void bag_put(struct elems_bag *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void bag_elem(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    struct elems_bag *b = arg;
    size_t lens[2] = {fn, vn};
    bag_put(b, lens, sizeof lens);
    bag_put(b, f, fn);
    bag_put(b, v, vn);
    b->count++;
}

int elems_scan(txn *tx, txn_obj *d, uint64_t cursor, uint64_t count, struct elems_bag *b,
               uint64_t *next)
{
    int rc = dict_scan(tx, d, cursor, count, bag_elem, b, next);
    return !rc && b->oom ? TXN_E_NOMEM : rc;
}

int elems_next(const struct elems_bag *b, size_t *off, struct kv_slice *f, struct kv_slice *v)
{
    size_t lens[2];
    if (*off >= b->n)
        return 0;
    memcpy(lens, b->p + *off, sizeof lens);
    *f = (struct kv_slice){b->p + *off + sizeof lens, lens[0]};
    *v = (struct kv_slice){f->p + lens[0], lens[1]};
    *off += sizeof lens + lens[0] + lens[1];
    return 1;
}

int elems_random(txn *tx, txn_obj *d, uint64_t seed, struct kv_slice *f)
{
    struct elems_bag one = {0};
    struct kv_slice v;
    size_t off = 0;
    int rc = dict_random(tx, d, seed, bag_elem, &one);
    if (rc >= 0 && one.oom)
        rc = TXN_E_NOMEM;
    if (rc > 0 && elems_next(&one, &off, f, &v)) { /* the field moved to the front */
        memmove(one.p, f->p, f->n);
        f->p = one.p;
        return 1;
    }
    free(one.p);
    return rc;
}

int elems_del(kv_txn *t, struct kv_slice key, txn *tx, txn_obj *d, const struct kv_slice *f,
              size_t k, uint64_t *removed)
{
    int rc = 0;
    uint64_t n;
    *removed = 0;
    for (size_t i = 0; i < k && rc >= 0; i++)
        if ((rc = dict_del(tx, d, f[i].p, f[i].n)) > 0)
            ++*removed;
    if (rc >= 0 && !(rc = dict_count(tx, d, &n)) && !n && (rc = kv_txn_del(t, key)) > 0)
        rc = 0;
    return rc < 0 ? rc : 0;
}
