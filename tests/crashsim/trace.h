/* trace.h - the crash simulator's model of the x86 persistency (Px86),
 * fed by the persist layer in the PMTX_TRACE build.
 *
 * For each 64-byte line of the traced region the tracer keeps the bytes
 * that are surely persisted and the ordered list of stores made to the
 * line since, each store cut into units that cannot tear (one aligned
 * 8-byte word at most). A flush marks the stores a line holds so far; a
 * fence makes the marked ones persisted. A crash image is, per line, the
 * persisted bytes plus some prefix of the pending stores: any prefix is a
 * state the hardware may leave.
 */
#ifndef PMTX_TRACE_H
#define PMTX_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* Hooks called by persist.h in the traced build: a store is made between
 * trace_lock() and trace_store_unlock() (or trace_unlock() if it did not
 * happen). */
void trace_lock(void);
void trace_unlock(void);
void trace_store_unlock(const void *dst, size_t n);
void trace_flush(const void *addr, size_t n);
void trace_fence(void);
/* [addr, addr + n), whole lines, now reads zero and is durable so (a hole
 * punched in the pool's file): its pending stores are dropped. Called
 * with the tracer's lock held (trace_lock), which it keeps. */
void trace_discard_locked(const void *addr, size_t n);

/* Called at every event (store, flush, fence) with its index, after the
 * tracer has recorded it; the crash simulator takes images from here. */
typedef void (*trace_event_fn)(uint64_t event, void *arg);

/* Start tracing [base, base+size), whose persisted contents are `durable`
 * (copied; NULL: the region's current contents, its bytes past the part
 * mapped now reading zero: trace_set_live). */
int trace_attach(void *base, size_t size, const void *durable);

/* Regions traced at once: trace_attach's, then trace_attach_more's. */
#define TRACE_REGIONS 2
/* Trace [base, base+size) too (a second pool), beside trace_attach's
 * region until trace_detach: one model, whose fences are global. Its
 * persisted contents are `durable` (copied), or with NULL what it holds
 * now (all of it mapped). */
int trace_attach_more(void *base, size_t size, const void *durable);

/* The region grows to [base, base+size) (txn-crashcheck: a pool that
 * mapped more of its file, at a new address in the checker's memory): its
 * first bytes keep their persisted contents and pending stores, the new
 * ones are persisted as `tail` (size minus the old size bytes; NULL: zero).
 * 0, or -1 (nothing attached, not larger, out of memory; the model is as
 * it was). */
int trace_grow(void *base, size_t size, const void *tail);

/* Of the region, the bytes mapped now, at *live (read at each attach and
 * audit; NULL: all of it): a pool that grows maps more of its range as it
 * goes, the rest reads zero until then. The diff model's regions never
 * grow: it ignores this. */
void trace_set_live(const size_t *live);
void trace_detach(void);

void trace_on_event(trace_event_fn fn, void *arg);
uint64_t trace_events(void);

/* Write a crash image of the region to `out` (size bytes): persisted
 * bytes plus, per dirty line, a prefix of its pending stores chosen from
 * `seed` (all prefixes equally likely; first and last extra likely).
 * Returns the number of lines that had pending stores. */
size_t trace_image(void *out, uint64_t seed);
/* The same for region `region` (0: trace_attach's, 1: trace_attach_more's;
 * its size bytes). */
size_t trace_image_of(int region, void *out, uint64_t seed);

/* How many distinct images the pending stores allow (the product of
 * (pending + 1) over dirty lines), saturating at `cap`. */
uint64_t trace_combos(uint64_t cap);

/* The idx-th of those images (idx < trace_combos()), in mixed radix. */
void trace_image_nth(void *out, uint64_t idx);

/* Untraced stores: bytes of the region that differ from what the traced
 * stores explain. Returns how many 8-byte words differ (0 = all traced),
 * reports the first few on stderr with `where` (NULL: none reported), and
 * takes the region as it is from then on so a store is reported once. */
size_t trace_audit(const char *where);

/* ---- shared by the models (trace_event.c) */

/* Numbers an event and calls the hook; under trace_lock(). */
void trace_event(void);

/* Numbering starts again (a model's trace_detach calls it). */
void trace_events_reset(void);

/* splitmix64: the models' choices from a seed */
uint64_t trace_mix(uint64_t *s);

/* Buffers of a region's size (images, persisted contents), in huge pages
 * where the kernel has them: otherwise their page faults are much of the
 * cost of a crash image. */
void *trace_buf_alloc(size_t n);
void trace_buf_free(void *p, size_t n);

#endif
