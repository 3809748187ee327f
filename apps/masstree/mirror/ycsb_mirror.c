/* mirror/ycsb_mirror.c - ycsb's half for the mirror store (and the
 * transient tree): value buffers in DRAM, whose mirrors keep the pointers
 * only; no counters of its own; no crash-recovery run (ycsb.h). */
#include <stdlib.h>

#include "ycsb.h"

const struct ycsb_store ycsb_store = {"txn", 0};

size_t vals_pool_bytes(size_t n)
{
    (void)n;
    return 0;
}

char *vals_dram(size_t n)
{
    char *v = calloc(n, VAL_BYTES);
    if (!v)
        fail("buffers", TXN_E_NOMEM);
    return v;
}

void store_stats_reset(void) {}

void store_stats_add(int first) { (void)first; }

size_t store_stats_report(char *extra, size_t cap, double ops)
{
    (void)extra, (void)cap, (void)ops;
    return 0;
}

int crash_recovery(const char *engine)
{
    (void)engine; /* parse refused the flag (ycsb_store.crash_recovery) */
    return 2;
}
