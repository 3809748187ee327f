/* persist.h - flush, fence and persist barriers with PDOM emulation, the
 * pm_store helpers every persistent store goes through, per-thread counters.
 *
 * The flush instruction is chosen once (libpmem picks clwb, clflushopt or
 * clflush from CPUID and honours PMEM_NO_CLWB, PMEM_NO_CLFLUSHOPT,
 * PMEM_NO_FLUSH); nothing above this layer knows which it got.
 *
 * A persist barrier is: the lines flushed since the last barrier, a fence,
 * then a spin until the barrier took at least the PDOM's latency (counted
 * from the fence: the write-backs are asynchronous and the fence is where a
 * real barrier waits for them). At PDOM 2 (eADR) nothing is flushed and no
 * fence is issued, but barriers and lines are still counted: the PDOM
 * changes what a barrier costs, not how many the algorithm issues.
 */
#ifndef PMTX_PERSIST_H
#define PMTX_PERSIST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "atomics.h"

/* The crash simulator's build traces every store, flush and fence into
 * its model (trace.h): a store and its record happen under the tracer's
 * lock, so threads reach the model in the order their stores reached
 * memory. A normal build compiles the hooks away. */
#ifdef PMTX_TRACE
#include "trace.h"
#define PM_TRACE_LOCK() trace_lock()
#define PM_TRACE_STORE(d, n) trace_store_unlock(d, n)
#define PM_TRACE_UNLOCK() trace_unlock()
#define PM_TRACE_FLUSH(a, n) trace_flush(a, n)
#define PM_TRACE_FENCE() trace_fence()
#define PM_TRACE_DISCARD(a, n) trace_discard_locked(a, n)
#else
#define PM_TRACE_LOCK() ((void)0)
#define PM_TRACE_STORE(d, n) ((void)0)
#define PM_TRACE_UNLOCK() ((void)0)
#define PM_TRACE_FLUSH(a, n) ((void)0)
#define PM_TRACE_FENCE() ((void)0)
#define PM_TRACE_DISCARD(a, n) ((void)0)
#endif

/* Give [addr, addr + n) back to the filesystem: punch(arg) makes it a
 * hole of the file (it reads zero from then on, at once durable), and the
 * tracer's model learns it in the same step, under its lock, so that no
 * audit sees the one without the other. Returns punch's result. */
static inline int pm_discard(void *addr, size_t n, int (*punch)(void *), void *arg)
{
    (void)addr;
    (void)n;
    PM_TRACE_LOCK();
    int rc = punch(arg);
    if (!rc)
        PM_TRACE_DISCARD(addr, n);
    PM_TRACE_UNLOCK();
    return rc;
}

#define PM_LINE 64u

/* Per-thread counters (exact). */
struct pm_counters {
    uint64_t commits;
    uint64_t aborts;
    uint64_t barriers;
    uint64_t lines_flushed;
    uint64_t log_bytes;
    uint64_t raw_lookups;
    uint64_t bytes_stored; /* bytes stored to pools by the pm_* helpers */
};
/* initial-exec: the libraries are linked at start-up, never dlopen()ed, so
 * a counter update is one TLS-relative add, not a __tls_get_addr call */
#define PM_TLS __thread __attribute__((tls_model("initial-exec")))
extern PM_TLS struct pm_counters pm_ctr;
/* txn__stored_inline (txn.h): bytes stored by the inline paths of txn.h
 * (added as each transaction ends) and of a public engine header
 * (incll.h), counted in txn_stats. */

/* The flush instruction, as libpmem chooses it (PMEM_NO_* honoured). */
enum pm_insn { PM_CLWB, PM_CLFLUSHOPT, PM_CLFLUSH, PM_NOFLUSH };

/* Settings read once from the environment (persist_init). */
struct pm_config {
    int pdom;            /* 0, 1 or 2 */
    unsigned barrier_ns; /* spin target per barrier (0 at PDOM 2) */
    int do_flush;        /* issue flush instructions and fences */
    const char *flush_name;
    enum pm_insn insn;   /* flush_name's instruction */
};
extern struct pm_config pm_cfg;

/* Reads TXN_PDOM, TXN_PDOM0_NS, TXN_PDOM1_NS once (a malformed one as
 * its default); then checks every setting of the environment as it is now
 * (settings_check): 0, or TXN_E_INVAL with the malformed setting recorded
 * (REFUSE). Called by each pool create, open, view and inspection. */
int persist_init(void);

/* Every TXN_* setting the library reads. A number takes decimal digits
 * only; a word setting's value is the index of its word. */
enum setting {
    SET_PDOM,        /* 0, 1 or 2 */
    SET_PDOM0_NS,    /* ns */
    SET_PDOM1_NS,    /* ns */
    SET_LOG_BATCH,   /* 0 or 1 */
    SET_ALLOC_EAGER, /* 0 or 1 */
    SET_EPOCH_MS,    /* incll: ms, 0 for no epoch thread */
    SET_INCLL_FLUSH, /* incll: 0 "tracked", 1 "whole" */
    SET_INCLL_STATS, /* incll: 0, 1 or 2 */
    SET_ALLOC_CACHE, /* blocks per class a thread's allocator cache keeps */
    SET_COUNT
};
/* Setting s from the environment; dflt when it is unset, empty or
 * malformed (a malformed one refuses every pool call: settings_check). */
unsigned setting_get(enum setting s, unsigned dflt);
/* 0, or TXN_E_INVAL naming the first malformed setting, its value and
 * what it accepts (REFUSE). */
int settings_check(void);

void pm_flush_lines(const void *addr, size_t len); /* persist.c */
void pm_fence_spin(void);                          /* persist.c */

/* Count the lines holding [addr, addr+len) as flushed (len > 0). */
static inline void pm_count_lines(const void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(PM_LINE - 1);
    uintptr_t e = (uintptr_t)addr + len;
    pm_ctr.lines_flushed += (e - a + PM_LINE - 1) / PM_LINE;
}

/* One line's write-back by instruction insn (pm_cfg.insn: the one libpmem
 * would use). The line is an input: the stores before it are made first,
 * and nothing else is taken as written (as an output, every flush made a
 * loop read pm_cfg and the counters again). */
static inline void pm_flush_insn_as(enum pm_insn insn, const void *line)
{
#ifndef PMTX_TRACE
    if (insn == PM_CLWB) /* the usual one first: a loop tests it first */
        __asm__ volatile("clwb %0" : : "m"(*(const char *)line));
    else if (insn == PM_CLFLUSHOPT)
        __asm__ volatile("clflushopt %0" : : "m"(*(const char *)line));
    else if (insn == PM_CLFLUSH)
        __asm__ volatile("clflush %0" : : "m"(*(const char *)line));
#else
    (void)insn;
    (void)line;
#endif
}

static inline void pm_flush_insn(const void *line)
{
    pm_flush_insn_as(pm_cfg.insn, line);
}

/* Write back the line holding addr (an aligned word): pm_flush(addr, 8)
 * in fewer instructions, for loops over many words. */
static inline void pm_flush_word(const void *addr)
{
    PM_TRACE_FLUSH(addr, 8);
    pm_ctr.lines_flushed++;
    if (pm_cfg.do_flush)
        pm_flush_insn(addr);
}

/* Many words' lines written back in one loop (a log's word entries): the
 * settings read once by pm_flusher_begin, the lines counted once by
 * pm_flusher_end, so that the loop holds them in registers (redo1's
 * commit: 7 instructions a word instead of 21, docs/access.md). */
struct pm_flusher {
    enum pm_insn insn; /* PM_NOFLUSH when nothing is flushed */
    uint64_t lines;
};

static inline struct pm_flusher pm_flusher_begin(void)
{
    return (struct pm_flusher){pm_cfg.do_flush ? pm_cfg.insn : PM_NOFLUSH, 0};
}

static inline void pm_flusher_word(struct pm_flusher *f, const void *addr)
{
    PM_TRACE_FLUSH(addr, 8);
    f->lines++;
    pm_flush_insn_as(f->insn, addr);
}

static inline void pm_flusher_end(const struct pm_flusher *f)
{
    pm_ctr.lines_flushed += f->lines;
}

/* Write back the lines holding [addr, addr+len); no ordering guarantee.
 * A range of a few lines is flushed here, a longer one by libpmem. */
static inline void pm_flush(const void *addr, size_t len)
{
    if (len == 0)
        return;
    PM_TRACE_FLUSH(addr, len);
    pm_count_lines(addr, len);
    if (!pm_cfg.do_flush)
        return;
    uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(PM_LINE - 1), e = (uintptr_t)addr + len;
    if (e - a > 4 * PM_LINE) {
        pm_flush_lines(addr, len);
        return;
    }
    for (; a < e; a += PM_LINE)
        pm_flush_insn((const void *)a);
}

/* The persist barrier: everything flushed before it is durable after it. */
static inline void pm_barrier(void)
{
    pm_ctr.barriers++;
    PM_TRACE_FENCE();
    if (pm_cfg.pdom < 2)
        pm_fence_spin();
}

/* flush + barrier of one range. */
static inline void pm_persist(const void *addr, size_t len)
{
    pm_flush(addr, len);
    pm_barrier();
}

/* ---- stores to persistent memory. Every store an engine or an app's
 * non-transactional code makes to a pool goes through these, so that the
 * crash simulator build can trace them. */
static inline void pm_store64(void *dst, uint64_t v)
{
    PM_TRACE_LOCK();
    /* one untorn store (the same mov as a volatile one), which a reader
     * in another thread may load atomically: a chunk table entry, the
     * heap's size */
    __atomic_store_n((uint64_t *)dst, v, __ATOMIC_RELAXED);
    pm_ctr.bytes_stored += 8;
    PM_TRACE_STORE(dst, 8);
}

static inline void pm_memcpy(void *dst, const void *src, size_t n)
{
    PM_TRACE_LOCK();
    memcpy(dst, src, n);
    pm_ctr.bytes_stored += n;
    PM_TRACE_STORE(dst, n);
}

static inline void pm_memset(void *dst, int c, size_t n)
{
    PM_TRACE_LOCK();
    memset(dst, c, n);
    pm_ctr.bytes_stored += n;
    PM_TRACE_STORE(dst, n);
}

void pm_copy_lines(void *dst, const void *src, size_t n); /* persist.c */

/* pm_memcpy then pm_flush of the copy, for a large copy that nothing
 * reads soon (recovery's restore): at PDOM 0 and 1 it stores around the
 * caches (libpmem's non-temporal copy), so that neither the destination's
 * lines are read first nor are they left to be written back. Ordered by
 * the next pm_barrier, as a flush is. */
static inline void pm_memcpy_flush(void *dst, const void *src, size_t n)
{
#if defined(PMTX_TRACE) || defined(__SANITIZE_ADDRESS__)
    /* traced; or under AddressSanitizer, which does not see into
     * libpmem's copy */
    pm_memcpy(dst, src, n);
    pm_flush(dst, n);
#else
    if (n == 0)
        return;
    /* counted as pm_memcpy + pm_flush count, at every PDOM */
    pm_count_lines(dst, n);
    pm_ctr.bytes_stored += n;
    if (pm_cfg.do_flush)
        pm_copy_lines(dst, src, n);
    else
        memcpy(dst, src, n);
#endif
}

/* This thread's flushes and non-temporal copies ordered before whatever
 * it does next (an sfence): for a helper thread whose writes another
 * thread's pm_barrier makes durable (recovery's restore threads). Not a
 * persist barrier: nothing counted, no emulated latency. */
static inline void pm_order(void)
{
#ifndef PMTX_TRACE
    if (pm_cfg.do_flush)
        __builtin_ia32_sfence();
#endif
}

/* Atomic read-modify-write of a persistent word (allocator bitmaps, which
 * threads share). */
static inline void pm_or64(uint64_t *dst, uint64_t bits)
{
    PM_TRACE_LOCK();
    at_or(dst, bits);
    pm_ctr.bytes_stored += 8;
    PM_TRACE_STORE(dst, 8);
}

static inline void pm_and64(uint64_t *dst, uint64_t bits)
{
    PM_TRACE_LOCK();
    at_and(dst, bits);
    pm_ctr.bytes_stored += 8;
    PM_TRACE_STORE(dst, 8);
}

/* A store other threads may read concurrently (with at_load). */
static inline void pm_store64_shared(uint64_t *dst, uint64_t v)
{
    PM_TRACE_LOCK();
    at_store(dst, v);
    pm_ctr.bytes_stored += 8;
    PM_TRACE_STORE(dst, 8);
}

/* Compare-and-swap of a persistent word; nonzero when it swapped. */
static inline int pm_cas64(uint64_t *dst, uint64_t expect, uint64_t nv)
{
    PM_TRACE_LOCK();
    int swapped = at_cas(dst, expect, nv);
    if (swapped) {
        pm_ctr.bytes_stored += 8;
        PM_TRACE_STORE(dst, 8);
    } else {
        PM_TRACE_UNLOCK();
    }
    return swapped;
}

#endif
