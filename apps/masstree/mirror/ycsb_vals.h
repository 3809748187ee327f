/* mirror/ycsb_vals.h - ycsb's value buffers with the mirror store
 * (included by ycsb.h): in DRAM, inline, as a put's new buffer is on the
 * run's path. */
#ifndef PMTX_YCSB_VALS_H
#define PMTX_YCSB_VALS_H

#include <string.h>

/* Buffer i of a thread's DRAM array (each used once, as in the pool). */
static inline char *new_val(char *dram, size_t i, int fill)
{
    char *v = dram + i * VAL_BYTES;
    memset(v, fill, VAL_BYTES);
    return v;
}

#endif
