/* incll_prim.c - the InCLL primitives of incll.h: first touch, lazy
 * recovery, and the fallbacks to the engine's external log. The crash
 * invariants N1-N9 are in incll.h; the comments here cite them. */
#include <pthread.h>

#include "atomics.h"
#include "engine.h"
#include "incll.h"
#include "incll_int.h"
#include "persist.h"

/* Keeps two stores to one line in program order (N2, N5): on x86-TSO a
 * release fence is a compiler barrier; the lines are never flushed here. */
#define store_order() __asm__ __volatile__("" ::: "memory")

/* incll_stats: this thread's counters, and the epoch count at its reset
 * (initial-exec: a count is a plain add, no call to find the library's
 * thread-local block) */
PM_TLS incll_stats incll_tstats; /* incll.h: the inline paths count too */
static PM_TLS uint64_t t_epochs0;
#define COUNT(field) (incll_tstats.field++)

void incll_stats_get(incll_stats *out)
{
    *out = incll_tstats;
    out->epochs = incll__epochs_ended() - t_epochs0;
}

void incll_stats_reset(void)
{
    incll_tstats = (incll_stats){0};
    t_epochs0 = incll__epochs_ended();
}

/* Volatile recovery locks, hashed by node (N7). */
#define REC_LOCKS 64
static pthread_mutex_t rec_lock[REC_LOCKS] = {[0 ... REC_LOCKS - 1] = PTHREAD_MUTEX_INITIALIZER};

static pthread_mutex_t *rec_lock_of(const void *node)
{
    uint64_t h = (uint64_t)(uintptr_t)node * 0x9e3779b97f4a7c15ull;
    return &rec_lock[h >> 58];
}
_Static_assert(REC_LOCKS == 64, "rec_lock_of takes the top 6 bits");

static incll_perm *perm_of(txn_obj *o, const incll_layout *l)
{
    return (incll_perm *)((char *)incll_node(o) + l->perm_off);
}

static uint64_t *vals_of(txn_obj *o, const incll_layout *l)
{
    return (uint64_t *)((char *)incll_node(o) + l->vals_off);
}

static incll_val *group_of(txn_obj *o, const incll_layout *l, unsigned g)
{
    return (incll_val *)((char *)incll_node(o) + l->group_off[g]);
}

static size_t line_of(size_t off)
{
    return (INCLL_OBJ_HDR + off) / INCLL_LINE;
}

int incll_layout_check(const incll_layout *l)
{
    if (!l || l->nslots == 0 || l->nslots > INCLL_MAX_SLOTS || l->ngroups == 0 ||
        l->ngroups > INCLL_MAX_GROUPS || l->perm_off % 8 || l->vals_off % 8 ||
        l->perm_off + sizeof(incll_perm) > l->size || l->vals_off + 8 * (size_t)l->nslots > l->size ||
        line_of(l->perm_off) != line_of(l->perm_off + sizeof(incll_perm) - 1))
        return TXN_E_INVAL;
    for (unsigned g = 0; g < l->ngroups; g++) {
        if (l->group_off[g] % 8 || l->group_off[g] + 8 > l->size)
            return TXN_E_INVAL;
        for (unsigned h = 0; h < g; h++)
            if (line_of(l->group_off[h]) == line_of(l->group_off[g]))
                return TXN_E_INVAL; /* two InCLLs for one line: the slot says which */
    }
    for (unsigned s = 0; s < l->nslots; s++)
        if (incll__group_of_slot(l, s) < 0)
            return TXN_E_INVAL;
    return 0;
}

void incll_store(void *dst, uint64_t v)
{
    pm_store64(dst, v);
}

void incll_store_bytes(void *dst, const void *src, size_t n)
{
    pm_memcpy(dst, src, n);
}

void incll_store_shared(uint64_t *dst, uint64_t v)
{
    pm_store64_shared(dst, v);
}

int incll_cas(uint64_t *dst, uint64_t expect, uint64_t nv)
{
    return pm_cas64(dst, expect, nv);
}

uint64_t incll_first_epoch(txn *tx)
{
    return incll__first_epoch(tx);
}

uint64_t incll_epoch(txn *tx)
{
    return incll__epoch(tx);
}

static void set_flags(incll_perm *pi, uint64_t set, uint64_t clear)
{
    pm_store64_shared(&pi->epoch, (pi->epoch | set) & ~clear);
}

/* The node into the epoch's external log; remembered in the flags. */
static int log_node(txn *tx, txn_obj *o, incll_perm *pi)
{
    if (pi->epoch & INCLL_LOGGED)
        return 0;
    int rc = incll__log(tx, o);
    if (!rc)
        set_flags(pi, INCLL_LOGGED, 0);
    return rc;
}

/* Restore what the failed epoch changed and start epoch c (N2, N7).
 * `e` is the node epoch; `recover` when e is below this execution. */
static int first_touch(txn *tx, txn_obj *o, const incll_layout *l, uint64_t e, int recover)
{
    incll_perm *pi = perm_of(o, l);
    uint64_t c = incll__epoch(tx), *vals = vals_of(o, l);
    int failed[INCLL_MAX_GROUPS + 1] = {0};
    for (unsigned g = 0; recover && g < l->ngroups; g++) { /* decide before writing */
        incll_val w = *group_of(o, l, g);
        unsigned s = incll_val_slot(w);
        uint64_t we = incll_val_epoch(w, e);
        if (s < l->nslots && incll__group_of_slot(l, s) == (int)g && we >= e && /* N7 */
            (failed[g] = incll__epoch_failed(tx, we)) < 0)
            return failed[g];
    }
    if (recover && (failed[INCLL_MAX_GROUPS] = incll__epoch_failed(tx, e)) < 0)
        return failed[INCLL_MAX_GROUPS];
    int logged = ((e ^ c) >> 16) != 0; /* N6: the low 16 bits would be ambiguous */
    int rc = logged ? incll__log(tx, o) : incll__mark(tx);
    if (rc)
        return rc;
    if (logged)
        COUNT(log_explicit);
    incll__dirty(tx, o, l->size); /* N9 */
    int restored = 0;
    for (unsigned g = 0; g < l->ngroups; g++) {
        incll_val *gw = group_of(o, l, g);
        if (!failed[g] && !logged)
            continue; /* N2: of an epoch before C, free in it */
        if (failed[g]) {
            pm_store64(&vals[incll_val_slot(*gw)], incll_val_old(*gw));
            store_order();
        }
        pm_store64(gw, incll_val_pack(INCLL_NONE, 0, c));
        if (failed[g]) {
            pm_flush(gw, 8);
            restored = 1;
        }
    }
    if (restored) /* N7: no node epoch above a failed InCLL */
        pm_barrier();
    if (failed[INCLL_MAX_GROUPS])
        pm_store64_shared(&pi->perm, pi->saved);
    else
        pm_store64(&pi->saved, pi->perm);
    /* a refused node keeps its node epoch: what ran above runs again,
     * the same way, at its next access (its InCLLs are restored now) */
    if (recover && l->check && l->check(tx->p, incll_node(o)))
        return TXN_E_CORRUPT;
    store_order();
    pm_store64_shared(&pi->epoch, c << INCLL_EPOCH_SHIFT | INCLL_INS_OK |
                                      (logged ? INCLL_LOGGED : 0));
    return 0;
}

int incll_node_prepare(txn *tx, txn_obj *o, const incll_layout *l)
{
    incll_perm *pi = perm_of(o, l);
    uint64_t first = incll__first_epoch(tx);
    if (at_load(&pi->epoch) >> INCLL_EPOCH_SHIFT >= first)
        return 0;
    pthread_mutex_t *lk = rec_lock_of(pi);
    pthread_mutex_lock(lk);
    uint64_t e = at_load(&pi->epoch) >> INCLL_EPOCH_SHIFT;
    int rc = e < first ? first_touch(tx, o, l, e, 1) : 0;
    pthread_mutex_unlock(lk);
    return rc;
}

/* Recovered, and started in the current epoch. A node epoch equal to
 * the current one says both at once (it is not below the first epoch of
 * this execution): one load. */
static int touch(txn *tx, txn_obj *o, const incll_layout *l)
{
    uint64_t c = incll__epoch(tx);
    if (at_load(&perm_of(o, l)->epoch) >> INCLL_EPOCH_SHIFT == c)
        return 0;
    int rc = incll_node_prepare(tx, o, l);
    uint64_t e = incll_node_epoch(perm_of(o, l));
    if (!rc && e != c)
        rc = first_touch(tx, o, l, e, 0);
    return rc;
}

int incll_node_init(txn *tx, txn_obj *o, const incll_layout *l, uint64_t perm)
{
    incll_perm *pi = perm_of(o, l);
    uint64_t c = incll__epoch(tx);
    if ((uintptr_t)o % INCLL_LINE)
        return TXN_E_INVAL; /* not INCLL_NODE_ALLOC: the lines are not N1's */
    int rc = incll__log(tx, o); /* nothing to log for a block of this epoch */
    if (rc)
        return rc;
    incll__dirty(tx, o, l->size);
    for (unsigned g = 0; g < l->ngroups; g++)
        pm_store64(group_of(o, l, g), incll_val_pack(INCLL_NONE, 0, c));
    pm_store64(&pi->perm, perm);
    pm_store64(&pi->saved, perm);
    pm_store64_shared(&pi->epoch, c << INCLL_EPOCH_SHIFT | INCLL_INS_OK | INCLL_LOGGED);
    return 0;
}

int incll_insert_begin(txn *tx, txn_obj *o, const incll_layout *l)
{
    int rc = touch(tx, o, l);
    incll_perm *pi = perm_of(o, l);
    if (rc)
        return rc;
    if (pi->epoch & INCLL_INS_OK) {
        COUNT(hit_insert);
    } else if (pi->epoch & INCLL_LOGGED) {
        COUNT(in_logged);
    } else if (!(rc = log_node(tx, o, pi))) { /* N4 */
        COUNT(log_overflow);
    }
    return rc;
}

int incll_remove_begin(txn *tx, txn_obj *o, const incll_layout *l)
{
    int rc = touch(tx, o, l);
    incll_perm *pi = perm_of(o, l);
    if (!rc && (pi->epoch & INCLL_INS_OK))
        set_flags(pi, 0, INCLL_INS_OK); /* N4 */
    if (!rc)
        COUNT(hit_remove);
    return rc;
}

void incll_perm_store(txn_obj *o, const incll_layout *l, uint64_t perm)
{
    store_order(); /* N3: after the epoch word */
    pm_store64_shared(&perm_of(o, l)->perm, perm);
}

/* N5; with `may_move`, INCLL_MOVE where the node would be logged but a
 * move can be absorbed (incll_update_try). */
static int update(txn *tx, txn_obj *o, const incll_layout *l, unsigned slot, uint64_t v,
                  int may_move)
{
    int g = slot < l->nslots ? incll__group_of_slot(l, slot) : -1;
    if (g < 0)
        return TXN_E_INVAL;
    int rc = touch(tx, o, l);
    if (rc)
        return rc;
    incll_perm *pi = perm_of(o, l);
    uint64_t *val = &vals_of(o, l)[slot];
    if (incll__update_hit(pi->epoch, group_of(o, l, (unsigned)g), val, slot, v, incll__epoch(tx)))
        return 0; /* N5: logged, or its InCLL saved the slot or takes it */
    if (may_move)
        return INCLL_MOVE; /* nothing changed */
    if ((rc = log_node(tx, o, pi)))
        return rc;
    COUNT(log_overflow);
    pm_store64_shared(val, v);
    return 0;
}

int incll_update(txn *tx, txn_obj *o, const incll_layout *l, unsigned slot, uint64_t v)
{
    return update(tx, o, l, slot, v, 0);
}

int incll_update_try(txn *tx, txn_obj *o, const incll_layout *l, unsigned slot, uint64_t v)
{
    return update(tx, o, l, slot, v, 1);
}

int incll_move_begin(txn *tx, txn_obj *o, const incll_layout *l)
{
    int rc = touch(tx, o, l);
    incll_perm *pi = perm_of(o, l);
    if (rc)
        return rc;
    if (pi->epoch & INCLL_LOGGED)
        return TXN_E_STATE; /* nothing to move: any change is free */
    if (pi->epoch & INCLL_INS_OK)
        set_flags(pi, 0, INCLL_INS_OK); /* N4: the old slot is free in perm */
    COUNT(hit_move);
    return 0;
}

int incll_log_object(txn *tx, txn_obj *o)
{
    if (!tx || !o || !txn_obj_size(txn_pool_of(tx), o))
        return TXN_E_INVAL;
    if (txn_last_error(tx))
        return TXN_E_STATE;
    return incll__log(tx, o);
}

int incll_log(txn *tx, txn_obj *o, const incll_layout *l)
{
    int rc = touch(tx, o, l);
    incll_perm *pi = perm_of(o, l);
    if (rc || (pi->epoch & INCLL_LOGGED))
        return rc;
    if (!(rc = log_node(tx, o, pi)))
        COUNT(log_explicit);
    return rc;
}
