/* trace_event.c - what the crash models (trace.c, trace_diff.c) share:
 * the lock stores and events are recorded under, the numbering of events
 * and the hook called at each. */
#include <pthread.h>
#include <sys/mman.h>

#include "trace.h"

static pthread_mutex_t tlock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t events;
static trace_event_fn hook;
static void *hook_arg;

void trace_lock(void)
{
    pthread_mutex_lock(&tlock);
}

void trace_unlock(void)
{
    pthread_mutex_unlock(&tlock);
}

/* Under the lock: a thread of the engine's own may be at an event. */
void trace_on_event(trace_event_fn fn, void *arg)
{
    pthread_mutex_lock(&tlock);
    hook = fn;
    hook_arg = arg;
    pthread_mutex_unlock(&tlock);
}

uint64_t trace_events(void)
{
    return events;
}

void trace_event(void)
{
    uint64_t e = events++;
    if (hook)
        hook(e, hook_arg);
}

void trace_events_reset(void)
{
    events = 0;
}

uint64_t trace_mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void *trace_buf_alloc(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, n, MADV_HUGEPAGE); /* only advice: 4 KiB pages do too */
    return p;
}

void trace_buf_free(void *p, size_t n)
{
    if (p)
        munmap(p, n);
}
