/* persist.c - PDOM configuration, the flush/fence primitives, counters. */
#include "persist.h"

#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <libpmem.h>
#include <limits.h>
#include <string.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"
#include "txn.h"

PM_TLS struct pm_counters pm_ctr;
PM_TLS uint64_t txn__stored_inline;
PM_TLS uint64_t txn__commits_inline;
PM_TLS struct txn__cur txn__cur;
struct pm_config pm_cfg = {1, 100, 1, "clwb", PM_CLWB};
static pthread_once_t persist_once = PTHREAD_ONCE_INIT;

/* What each setting accepts, in one table so that every reader parses it
 * alike and a malformed value refuses the pool call instead of running
 * with a default nobody asked for. */
static const char *const flush_words[] = {"tracked", "whole"};
#define NS_MAX 1000000000u /* 1 s per barrier, per epoch: past any use */
static const struct setting_def {
    const char *name;
    unsigned max;             /* numbers 0..max, or words[0..max] */
    const char *const *words; /* NULL: a number */
    const char *accepts;      /* what a refusal says */
} settings[SET_COUNT] = {
    [SET_PDOM] = {"TXN_PDOM", 2, NULL, "not 0, 1 or 2"},
    [SET_PDOM0_NS] = {"TXN_PDOM0_NS", NS_MAX, NULL, "not a number of ns from 0 to 1000000000"},
    [SET_PDOM1_NS] = {"TXN_PDOM1_NS", NS_MAX, NULL, "not a number of ns from 0 to 1000000000"},
    [SET_LOG_BATCH] = {"TXN_LOG_BATCH", 1, NULL, "not 0 or 1"},
    [SET_ALLOC_EAGER] = {"TXN_ALLOC_EAGER", 1, NULL, "not 0 or 1"},
    [SET_EPOCH_MS] = {"TXN_EPOCH_MS", NS_MAX, NULL, "not a number of ms from 0 to 1000000000"},
    [SET_INCLL_FLUSH] = {"TXN_INCLL_FLUSH", 1, flush_words, "not tracked or whole"},
    [SET_INCLL_STATS] = {"TXN_INCLL_STATS", 2, NULL, "not 0, 1 or 2"},
    [SET_ALLOC_CACHE] = {"TXN_ALLOC_CACHE", 64, NULL, "not a number of blocks from 0 to 64"},
};

/* 0 and *v, or -1 when s is not what d accepts: strtoul would take a
 * sign, spaces and a trailing word, which is how "-1" became a default. */
static int parse(const struct setting_def *d, const char *s, unsigned *v)
{
    unsigned long long n = 0;
    if (d->words) {
        for (n = 0; n <= d->max && strcmp(s, d->words[n]); n++)
            ;
    } else {
        for (const char *c = s; *c && n <= d->max; c++)
            n = *c >= '0' && *c <= '9' ? n * 10 + (unsigned)(*c - '0') : ULLONG_MAX;
    }
    *v = (unsigned)n;
    return n <= d->max ? 0 : -1;
}

unsigned setting_get(enum setting k, unsigned dflt)
{
    const char *s = getenv(settings[k].name);
    unsigned v;
    return s && *s && !parse(&settings[k], s, &v) ? v : dflt;
}

int settings_check(void)
{
    for (int k = 0; k < SET_COUNT; k++) {
        const char *s = getenv(settings[k].name);
        unsigned v;
        if (s && *s && parse(&settings[k], s, &v))
            return REFUSE(TXN_E_INVAL, "%s=%.40s: %s", settings[k].name, s, settings[k].accepts);
    }
    return 0;
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
    int pdom = (int)setting_get(SET_PDOM, 1);
    pm_cfg.pdom = pdom;
    pm_cfg.barrier_ns = pdom == 0 ? setting_get(SET_PDOM0_NS, 500)
                      : pdom == 1 ? setting_get(SET_PDOM1_NS, 100)
                                  : 0;
    pm_cfg.do_flush = pdom < 2;
    pm_cfg.flush_name = pdom < 2 ? detect_flush() : "none";
    pm_cfg.insn = !strcmp(pm_cfg.flush_name, "clwb")         ? PM_CLWB
                : !strcmp(pm_cfg.flush_name, "clflushopt") ? PM_CLFLUSHOPT
                : !strcmp(pm_cfg.flush_name, "clflush")    ? PM_CLFLUSH
                                                           : PM_NOFLUSH;
}

/* The barrier settings are taken once, at load, as hot paths read them
 * unlocked; the check runs at every pool call, against the environment of
 * the moment, since incll reads its settings when a pool starts. */
int persist_init(void)
{
    pthread_once(&persist_once, persist_setup);
    return settings_check();
}

__attribute__((constructor)) static void persist_ctor(void)
{
    pthread_once(&persist_once, persist_setup);
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
    out->commits = pm_ctr.commits + txn__commits_inline;
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
    txn__commits_inline = 0;
}

int txn_pdom(void) { return pm_cfg.pdom; }
unsigned txn_pdom_ns(void) { return pm_cfg.barrier_ns; }
const char *txn_flush_name(void) { return pm_cfg.flush_name; }
