/* txn_check.h - what a program tells txn-crashcheck (docs/crashcheck.md),
 * optional. The program calls txn_check_acked(n) when it has acknowledged
 * its n-th operation to the outside world (after the commit, and on incll
 * after the txn_sync, that made it durable); at each crash image the
 * checker gives CMD the last n acknowledged before the crash, as
 * TXN_CHECK_ACKED. Linked with txn-<engine> (not -check) it does nothing:
 * the library's function is weak here, absent there. */
#ifndef PMTX_TXN_CHECK_H
#define PMTX_TXN_CHECK_H

#include <stdint.h>

void txn_check_ack(uint64_t n) __attribute__((weak));

static inline void txn_check_acked(uint64_t n)
{
    if (txn_check_ack)
        txn_check_ack(n);
}

#endif
