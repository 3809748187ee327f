/* pmdk_libpmem.c - the libpmem functions libpmemobj calls, redefined on
 * persist.h.
 *
 * libpmemobj persists through libpmem's exported pmem_flush, pmem_drain,
 * pmem_persist, pmem_memcpy/memmove/memset and pmem_deep_flush. This
 * library defines and exports them (pmdk.map), so libpmemobj's calls land
 * here and go through persist.h: PMDK's barriers are counted and priced
 * per PDOM like every other engine's, and at PDOM 2 no flush or fence
 * reaches the hardware. persist.c reaches the real libpmem through
 * dlsym(RTLD_NEXT), past these definitions. (pmem_msync is left alone:
 * with PMEM_IS_PMEM_FORCE=1, as the scripts run, PMDK calls it only for
 * pool headers at create and close; without it PMDK msyncs instead of
 * flushing and its barriers go uncounted.)
 */
#include <libpmem.h>
#include <string.h>

#include "persist.h"
#include "pmdk_int.h"

_Thread_local int pmdk_private_open;

void pmem_flush(const void *addr, size_t len)
{
    if (pmdk_private_open)
        return;
    pm_flush(addr, len);
}

/* A deep flush differs from a flush on real hardware only for device DAX;
 * under emulation it writes back the same lines. */
void pmem_deep_flush(const void *addr, size_t len)
{
    if (pmdk_private_open)
        return;
    pm_flush(addr, len);
}

void pmem_drain(void)
{
    if (!pmdk_private_open)
        pm_barrier();
}

void pmem_persist(const void *addr, size_t len)
{
    if (pmdk_private_open)
        return;
    pm_persist(addr, len);
}

/* The tail of pmem_memcpy/memmove/memset: flush, then drain, as the flags
 * allow (NOFLUSH implies NODRAIN, as libpmem documents). The copy itself
 * is a plain one: non-temporal stores are an optimisation, not a rule. */
static void flush_copy(const void *dst, size_t len, unsigned flags)
{
    if ((flags & PMEM_F_MEM_NOFLUSH) || pmdk_private_open)
        return;
    pm_flush(dst, len);
    if (!(flags & PMEM_F_MEM_NODRAIN))
        pm_barrier();
}

void *pmem_memcpy(void *dst, const void *src, size_t len, unsigned flags)
{
    if (pmdk_private_open)
        memcpy(dst, src, len);
    else
        pm_memcpy(dst, src, len);
    flush_copy(dst, len, flags);
    return dst;
}

void *pmem_memmove(void *dst, const void *src, size_t len, unsigned flags)
{
    memmove(dst, src, len);
    flush_copy(dst, len, flags);
    return dst;
}

void *pmem_memset(void *dst, int c, size_t len, unsigned flags)
{
    if (pmdk_private_open)
        memset(dst, c, len);
    else
        pm_memset(dst, c, len);
    flush_copy(dst, len, flags);
    return dst;
}
