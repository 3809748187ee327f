/* reach.c - the leak check of the -check libraries (txn_check.h's
 * txn_check_reach, docs/crashcheck.md) on a pool whose objects are known:
 * the root holds A; B is allocated and held by nothing (a leak); C is
 * allocated, then freed, and named (reached and free). The verdict the
 * library writes at the close must name B's block as leaked and C's as
 * free, and say nothing of A.
 *
 *   reach      exit 0 when the verdict is that, 1 otherwise (its files in
 *              /dev/shm, named by the process id, removed) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txn.h"
#include "txn_check.h"

static char path[64], verdict[64];

#define TRY(x)                                                                           \
    do {                                                                                 \
        int rc_ = (x);                                                                   \
        if (rc_) {                                                                       \
            fprintf(stderr, "reach: %s: %s\n", #x, txn_strerror(rc_));                   \
            unlink(path);                                                                \
            unlink(verdict);                                                             \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

int main(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fputs("usage: reach\n", stderr);
        return 2;
    }
    snprintf(path, sizeof path, "/dev/shm/pmtx-reach-%d.pool", (int)getpid());
    snprintf(verdict, sizeof verdict, "/dev/shm/pmtx-reach-%d.verdict", (int)getpid());
    txn_pool *p;
    txn *tx;
    txn_obj *a, *b, *c;
    txn_pool_opts o = {.size = 0, .root_size = sizeof a, .threads = 2};
    o.size = txn_pool_min_size(&o);
    TRY(txn_pool_create(path, "reach", &o, &p));
    TRY(txn_begin(p, &tx));
    TRY(txn_alloc(tx, 100, &a));
    TRY(txn_alloc(tx, 3000, &b));
    TRY(txn_alloc(tx, 200, &c));
    TRY(txn_write(tx, txn_root(p), 0, &a, sizeof a));
    TRY(txn_commit(tx));
    TRY(txn_begin(p, &tx));
    TRY(txn_free(tx, c));
    TRY(txn_commit(tx));
    txn_pool_close(p);

    TRY(txn_pool_open(path, "reach", &p));
    setenv("TXN_CHECK_REACH", verdict, 1);
    txn_check_reach(p, a);
    txn_check_reach(p, c);
    txn_pool_close(p);
    unlink(path);

    /* B told by its size (A's and C's are smaller); an object may have
     * two blocks (cow: its wrapper and its payload) */
    FILE *f = fopen(verdict, "r");
    char line[128];
    int leaks = 0, big = 0, frees = 0, reached = 0;
    unsigned long long off, size;
    if (!f) {
        fprintf(stderr, "reach: no verdict written to %s\n", verdict);
        return 1;
    }
    while (fgets(line, sizeof line, f)) {
        fputs(line, stdout);
        if (!strncmp(line, "reached ", 8))
            reached++;
        else if (sscanf(line, "leak %llx %llu", &off, &size) == 2)
            leaks++, big += size >= 3000;
        else if (sscanf(line, "free %llx", &off) == 1)
            frees++;
    }
    fclose(f);
    unlink(verdict);
    if (reached != 1 || big != 1 || leaks > 2 || frees < 1 || frees > 2) {
        fprintf(stderr, "reach: expected a leak (B) and a reached free block (C); got %d "
                        "leaked, %d free\n", leaks, frees);
        return 1;
    }
    return 0;
}
