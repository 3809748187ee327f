/* ctxreg.c - see ctxreg.h. */
#include "ctxreg.h"

#include <pthread.h>
#include <stdlib.h>

#include "persist.h"
#include "txn.h"
#include "util.h"

struct entry {
    void *pool;
    uint64_t gen;
    void *ctx;                    /* in thread caches */
    const struct ctxreg_ops *ops; /* in the list of open pools */
};

struct tls_state {
    struct entry *e; /* this thread's contexts, one per pool */
    unsigned n, cap;
};

static PM_TLS struct tls_state tls;
static PM_TLS struct entry last; /* what ctxreg_get returned last */
static pthread_key_t tls_key;
static int tls_key_ok;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vec open_pools = {NULL, 0, 0, sizeof(struct entry)};
static uint64_t next_gen = 1;

/* Caller holds reg_lock. */
static const struct entry *find_open(void *pool, uint64_t gen)
{
    for (size_t i = 0; i < open_pools.n; i++) {
        const struct entry *e = vec_at(&open_pools, i);
        if (e->pool == pool && e->gen == gen)
            return e;
    }
    return NULL;
}

/* Thread exit: give back this thread's contexts of pools still open. */
static void tls_exit(void *arg)
{
    struct tls_state *t = arg;
    pthread_mutex_lock(&reg_lock);
    for (unsigned i = 0; i < t->n; i++) {
        const struct entry *open = find_open(t->e[i].pool, t->e[i].gen);
        if (open)
            open->ops->release(t->e[i].ctx);
    }
    pthread_mutex_unlock(&reg_lock);
    free(t->e);
    t->e = NULL;
    t->n = t->cap = 0;
    last = (struct entry){0};
}

static void tls_setup(void)
{
    tls_key_ok = pthread_key_create(&tls_key, tls_exit) == 0;
}

uint64_t ctxreg_open(void *pool, const struct ctxreg_ops *ops)
{
    pthread_mutex_lock(&reg_lock);
    struct entry *e = vec_push(&open_pools);
    uint64_t gen = e ? next_gen++ : 0;
    if (e)
        *e = (struct entry){pool, gen, NULL, ops};
    pthread_mutex_unlock(&reg_lock);
    return gen;
}

void ctxreg_close(void *pool, uint64_t gen, void (*release_all)(void *pool))
{
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < open_pools.n; i++) {
        struct entry *e = vec_at(&open_pools, i);
        if (e->pool == pool && e->gen == gen) {
            *e = *(struct entry *)vec_at(&open_pools, --open_pools.n);
            break;
        }
    }
    release_all(pool);
    pthread_mutex_unlock(&reg_lock);
}

void ctxreg_drop(void *pool, uint64_t gen, void *ctx)
{
    pthread_mutex_lock(&reg_lock);
    const struct entry *open = find_open(pool, gen);
    if (open)
        open->ops->release(ctx);
    pthread_mutex_unlock(&reg_lock);
}

static __attribute__((noinline)) void *get_slow(void *pool, uint64_t gen, int *err)
{
    for (unsigned i = 0; i < tls.n; i++)
        if (tls.e[i].pool == pool && tls.e[i].gen == gen) {
            last = tls.e[i];
            return last.ctx;
        }
    pthread_once(&tls_once, tls_setup);
    if (!tls_key_ok || pthread_setspecific(tls_key, &tls)) {
        *err = TXN_E_NOMEM; /* no way to give the context back at exit */
        return NULL;
    }
    pthread_mutex_lock(&reg_lock); /* forget pools closed since */
    const struct entry *open = find_open(pool, gen);
    const struct ctxreg_ops *ops = open ? open->ops : NULL;
    unsigned k = 0;
    for (unsigned i = 0; i < tls.n; i++)
        if (find_open(tls.e[i].pool, tls.e[i].gen))
            tls.e[k++] = tls.e[i];
    tls.n = k;
    pthread_mutex_unlock(&reg_lock);
    if (!ops) {
        *err = TXN_E_INVAL; /* a closed pool */
        return NULL;
    }
    if (tls.n == tls.cap) {
        unsigned cap = tls.cap ? tls.cap * 2 : 4;
        struct entry *e = realloc(tls.e, cap * sizeof *e);
        if (!e) {
            *err = TXN_E_NOMEM;
            return NULL;
        }
        tls.e = e;
        tls.cap = cap;
    }
    void *ctx = ops->create(pool, err);
    if (ctx)
        last = tls.e[tls.n++] = (struct entry){pool, gen, ctx, NULL};
    return ctx;
}

/* The slow part apart: the hit saves no registers. */
void *ctxreg_get(void *pool, uint64_t gen, int *err)
{
    if (last.pool == pool && last.gen == gen) /* a gen is never reused */
        return last.ctx;
    return get_slow(pool, gen, err);
}

void ctxreg_thread_end(void)
{
    tls_exit(&tls);
}
