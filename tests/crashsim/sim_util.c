/* sim_util.c - the helpers the crash simulator's workloads call, shared by
 * its driver (crashsim.c) and by the driver that runs a workload through
 * txn-crashcheck (tests/crashcheck/wl_check.c).
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "util.h"

uint64_t sim_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sim_bytes(uint64_t *s, void *out, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = sim_rand(s);
        memcpy((char *)out + i, &w, n - i < 8 ? n - i : 8);
    }
}

uint64_t sim_hash(uint64_t h, const void *p, size_t n)
{
    return csum64(h, p, n);
}

txn_obj *sim_part(txn *tx, txn_pool *p, int t)
{
    txn_obj *o = NULL;
    txn_read(tx, txn_root(p), 8 * (size_t)t, &o, sizeof o);
    return o;
}

int sim_make_parts(txn_pool *p, size_t size, int threads)
{
    txn *tx;
    int rc = txn_begin(p, &tx);
    for (int t = 0; !rc && t < threads; t++) {
        txn_obj *o;
        rc = txn_alloc(tx, size, &o);
        if (!rc)
            rc = txn_write(tx, txn_root(p), 8 * (size_t)t, &o, sizeof o);
    }
    if (rc) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

int reach_add(struct reach *r, txn_obj *o)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        txn_obj **a = realloc(r->o, r->cap * sizeof *a);
        if (!a)
            return -1;
        r->o = a;
    }
    r->o[r->n++] = o;
    return 0;
}

