/* txn_check.h - what a program tells txn-crashcheck (docs/crashcheck.md),
 * optional. Linked with txn-<engine> (not -check) each call does nothing:
 * the library's functions are weak here, absent there.
 *
 * txn_check_acked(n): the program has acknowledged its n-th operation to
 * the outside world (after the commit, and on incll after the txn_sync,
 * that made it durable); at each crash image the checker gives CMD the
 * last n acknowledged before the crash, as TXN_CHECK_ACKED.
 *
 * txn_check_reach(p, o): CMD reaches object o of pool p (the root and the
 * meta object need not be named; o NULL names nothing, and turns the check
 * on for a pool whose root reaches nothing). Once it has been called, the pool's
 * txn_pool_close compares the objects named with the allocator's live
 * blocks: one allocated and not named is a leak, one named and free is
 * free and reachable; the checker counts either as inconsistent and names
 * the line of a leaked object's txn_alloc. A CMD that never calls it gets
 * no leak check (the checker says on how many images it was made).
 *
 * txn_check_marked_switches(): under --threads-sched, the baton passes
 * from here only at txn_check_point() calls, where a thread must wait (a
 * mutex another thread holds, a join) and at a thread's start and end; not
 * at txn_begin, txn_commit nor at every mutex call. For a program whose
 * own bookkeeping assumes that no other thread runs between two of its
 * points (a mirror of the pool updated after the commit). Called before
 * the program's first pthread_create. txn_check_point(): a switch point
 * (inside a transaction, taken on the engines that take switches there). */
#ifndef PMTX_TXN_CHECK_H
#define PMTX_TXN_CHECK_H

#include <stdint.h>

#include "txn.h"

void txn_check_ack(uint64_t n) __attribute__((weak));
void txn_check_reach_obj(txn_pool *p, const txn_obj *o) __attribute__((weak));
void txn_check_mark_only(void) __attribute__((weak));
void txn_check_switch(void) __attribute__((weak));

static inline void txn_check_acked(uint64_t n)
{
    if (txn_check_ack)
        txn_check_ack(n);
}

static inline void txn_check_reach(txn_pool *p, const txn_obj *o)
{
    if (txn_check_reach_obj)
        txn_check_reach_obj(p, o);
}

static inline void txn_check_marked_switches(void)
{
    if (txn_check_mark_only)
        txn_check_mark_only();
}

static inline void txn_check_point(void)
{
    if (txn_check_switch)
        txn_check_switch();
}

#endif
