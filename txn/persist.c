/* persist.c - PDOM configuration, the flush/fence primitives, counters. */
#include "persist.h"

#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <libpmem.h>
#include <string.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "txn.h"

PM_TLS struct pm_counters pm_ctr;
PM_TLS uint64_t txn__stored_inline;
struct pm_config pm_cfg = {1, 100, 1, "clwb"};
static pthread_once_t persist_once = PTHREAD_ONCE_INIT;

static unsigned env_uint(const char *name, unsigned dflt)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    return (*end || v > 1000000000ul) ? dflt : (unsigned)v;
}

static int env_flag(const char *name)
{
    const char *s = getenv(name);
    return s && *s == '1';
}

/* Mirrors libpmem's own choice so that programs can print it. */
static const char *detect_flush(void)
{
    unsigned a, b, c, d;
    if (env_flag("PMEM_NO_FLUSH"))
        return "none";
    int clwb = 0, clflushopt = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        clflushopt = (b >> 23) & 1;
        clwb = (b >> 24) & 1;
    }
    if (clwb && !env_flag("PMEM_NO_CLWB"))
        return "clwb";
    if (clflushopt && !env_flag("PMEM_NO_CLFLUSHOPT"))
        return "clflushopt";
    return "clflush";
}

/* libpmem's flush and drain, found past this library so that an engine
 * may interpose libpmem's exported names (pmdk does, to count PMDK's own
 * barriers) without this layer calling back into itself. */
static void (*real_flush)(const void *, size_t) = pmem_flush;
static void (*real_drain)(void) = pmem_drain;
static void *(*real_memcpy)(void *, const void *, size_t, unsigned) = pmem_memcpy;

static void find_libpmem(void)
{
    void *f = dlsym(RTLD_NEXT, "pmem_flush"), *d = dlsym(RTLD_NEXT, "pmem_drain");
    void *m = dlsym(RTLD_NEXT, "pmem_memcpy");
    if (f && d) {
        real_flush = (void (*)(const void *, size_t))f;
        real_drain = (void (*)(void))d;
    }
    if (m)
        real_memcpy = (void *(*)(void *, const void *, size_t, unsigned))m;
}

static void persist_setup(void)
{
    find_libpmem();
    int pdom = (int)env_uint("TXN_PDOM", 1);
    if (pdom > 2)
        pdom = 1;
    pm_cfg.pdom = pdom;
    pm_cfg.barrier_ns = pdom == 0 ? env_uint("TXN_PDOM0_NS", 500)
                      : pdom == 1 ? env_uint("TXN_PDOM1_NS", 100)
                                  : 0;
    pm_cfg.do_flush = pdom < 2;
    pm_cfg.flush_name = pdom < 2 ? detect_flush() : "none";
}

void persist_init(void)
{
    pthread_once(&persist_once, persist_setup);
}

__attribute__((constructor)) static void persist_ctor(void)
{
    persist_init();
}

void pm_flush_lines(const void *addr, size_t len)
{
    real_flush(addr, len);
}

void pm_copy_lines(void *dst, const void *src, size_t n)
{
    real_memcpy(dst, src, n, PMEM_F_MEM_NONTEMPORAL | PMEM_F_MEM_NODRAIN);
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void pm_fence_spin(void)
{
    uint64_t t0 = pm_cfg.barrier_ns ? now_ns() : 0;
    real_drain();
    if (pm_cfg.barrier_ns)
        while (now_ns() - t0 < pm_cfg.barrier_ns)
            __builtin_ia32_pause();
}

void txn_stats_get(txn_stats *out)
{
    if (!out)
        return;
    out->commits = pm_ctr.commits;
    out->aborts = pm_ctr.aborts;
    out->barriers = pm_ctr.barriers;
    out->lines_flushed = pm_ctr.lines_flushed;
    out->log_bytes = pm_ctr.log_bytes;
    out->raw_lookups = pm_ctr.raw_lookups;
    out->bytes_stored = pm_ctr.bytes_stored + txn__stored_inline;
}

void txn_stats_reset(void)
{
    memset(&pm_ctr, 0, sizeof pm_ctr);
    txn__stored_inline = 0;
}

int txn_pdom(void) { return pm_cfg.pdom; }
unsigned txn_pdom_ns(void) { return pm_cfg.barrier_ns; }
const char *txn_flush_name(void) { return pm_cfg.flush_name; }
