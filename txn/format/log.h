/* log.h - the per-thread chunked persistent log that undo and redo share.
 *
 * A slot's log is a chain of segments: the one inside the slot, then heap
 * chunks linked by seg_hdr.next and kept for reuse. Records are appended
 * here and flushed together by log_flush() just before the engine's
 * barrier: flushing each record as it is written would write its lines
 * back while the next record still stores into them, and on x86 a later
 * locked instruction waits for every write-back in flight.
 *
 * Record on media (8-byte aligned):
 *   sentinel | version | type,len | addr | aux | payload (len, padded to 8)
 *   | checksum
 * The checksum covers everything before it, so a torn record (any per-line
 * prefix of its stores) or a stale one from an older transaction is
 * recognised and ends the log. A record that does not fit in the rest of a
 * segment is preceded by a JUMP record to the next segment.
 */
#ifndef PMTX_LOG_H
#define PMTX_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h" /* enum log_type */
#include "pool.h"

#define LOG_SENTINEL 0x5ec0ffee0dd5a1e5ull

/* The log's own record kind, beside the engines' (engine.h: enum
 * log_type): continue at the next segment. */
#define LOG_JUMP 4u

struct log_rec {
    uint64_t sentinel; /* LOG_SENTINEL */
    uint64_t version;  /* transaction version */
    uint32_t type;     /* enum log_type */
    uint32_t len;      /* payload bytes */
    uint64_t addr;     /* target address */
    uint64_t aux;      /* type specific */
    /* payload, then the checksum */
};
_Static_assert(sizeof(struct log_rec) == 40, "log_rec header size");


static inline void *log_payload(struct log_rec *r) { return r + 1; }

/* A thread's write position in its slot's log (volatile). */
struct log {
    txn_pool *p;
    struct slot_hdr *slot;
    char *seg;   /* current segment */
    size_t off;  /* next record offset within seg */
    size_t end;  /* usable end of seg */
    size_t used; /* bytes appended since log_rewind */
    size_t flushed; /* offset in seg up to which records were flushed */
};

void log_attach(struct log *l, txn_pool *p, struct slot_hdr *slot);

/* Start writing at the beginning again (the old records stay readable
 * until overwritten; versions tell them apart). */
void log_rewind(struct log *l);

/* Append one record (not flushed: see log_flush). The payload is copied from
 * `src` (may be NULL when len == 0). Growing the log into a new heap chunk
 * costs one extra barrier. Returns 0 and *out, or TXN_E_NOSPACE. */
int log_append(struct log *l, uint64_t version, uint32_t type, uint64_t addr,
               uint64_t aux, const void *src, uint32_t len,
               struct log_rec **out);

/* Flush what was appended since the last log_flush (no fence). */
void log_flush(struct log *l);

/* Record the tail hint after a barrier (stored and flushed, not fenced). */
void log_set_tail(struct log *l, uint64_t version);

/* Make the log read as empty: the first record is invalidated (flushed, no
 * fence). */
void log_invalidate(struct log *l);

/* Recovery: collect the valid records of the slot's last transaction into
 * `recs` (struct log_rec * items). Returns 0, or TXN_E_CORRUPT when the
 * chain or the tail hint is inconsistent. Writes nothing. */
int log_scan(txn_pool *p, struct slot_hdr *slot, struct vec *recs);

/* Recovery: the segments of every slot's chain (addresses, for the
 * allocator to mark as log chunks). Writes nothing. */
int log_chain(txn_pool *p, struct slot_hdr *slot, struct vec *segs);

#endif
