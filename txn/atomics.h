/* atomics.h - the one atomics layer of pmtx, on libatomic_ops. */
#ifndef PMTX_ATOMICS_H
#define PMTX_ATOMICS_H

#include <atomic_ops.h>
#include <stdint.h>

_Static_assert(sizeof(AO_t) == sizeof(uint64_t), "pmtx needs a 64-bit AO_t");

static inline uint64_t at_load(const volatile uint64_t *p)
{
    return AO_load_acquire((const volatile AO_t *)p);
}

static inline void at_store(volatile uint64_t *p, uint64_t v)
{
    AO_store_release((volatile AO_t *)p, v);
}

static inline uint64_t at_fetch_add(volatile uint64_t *p, uint64_t v)
{
    return AO_fetch_and_add_full((volatile AO_t *)p, v);
}

static inline int at_cas(volatile uint64_t *p, uint64_t expect, uint64_t nv)
{
    return AO_compare_and_swap_full((volatile AO_t *)p, expect, nv);
}

static inline void at_or(volatile uint64_t *p, uint64_t v)
{
    AO_or_full((volatile AO_t *)p, v);
}

static inline void at_and(volatile uint64_t *p, uint64_t v)
{
    AO_and_full((volatile AO_t *)p, v);
}

static inline void at_full_fence(void)
{
    AO_nop_full();
}

#endif
