/* inpool/ycsb_vals.h - ycsb's value buffers with the in-pool store
 * (included by ycsb.h): inline, as a put's new buffer is on the run's
 * path.
 *
 * Value buffers in the pool: each thread fills buffers in a block
 * allocated in the current epoch (incll_epoch), in a transaction of that
 * epoch, so the epoch's global flush writes the bytes back and a crash in
 * it frees the block; the tree's pointer to a buffer changes in the same
 * epoch or a later one. A new block when the epoch moved on (a block of an
 * earlier epoch would have to be logged) or when it is full. VAL_BATCH
 * buffers are filled in one transaction (as if each were written in its
 * put's), handed out one by one. Buffers are 16-byte aligned: a value
 * InCLL saves only such pointers. Old buffers are not reused (the pool is
 * sized for the run). */
#ifndef PMTX_YCSB_VALS_H
#define PMTX_YCSB_VALS_H

struct vals {
    char *next, *lim; /* filled, not handed out */
    char *end;        /* of the block */
    uint64_t epoch;   /* of the block */
    unsigned fill;
};
extern __thread struct vals t_vals;
void fill_vals(void); /* the next batch (ycsb_inpool.c) */

static inline char *new_val(char *dram, size_t i, int fill)
{
    (void)dram, (void)i, (void)fill;
    if (t_vals.next == t_vals.lim)
        fill_vals();
    char *v = t_vals.next;
    t_vals.next += VAL_BYTES;
    return v;
}

#endif
