/* chk_sched.h - the baton scheduler of libtxn-<engine>-check (sched.c),
 * on under txn-crashcheck --threads-sched; used by the recorder (record.c). */
#ifndef PMTX_CHK_SCHED_H
#define PMTX_CHK_SCHED_H

#include <stdint.h>

/* Before main, one thread: the program's threads from here run one at a
 * time, in an order drawn from `seed`. `inside`: switch points inside a
 * transaction are taken (not on an engine whose txn_sync waits for the
 * transactions running: a parked one would never end). */
void chk_sched_init(uint64_t seed, int inside);

/* A switch point of the calling thread; in_txn: it runs a transaction. */
void chk_sched_point(int in_txn);

/* Times the baton moved to another thread. */
uint64_t chk_sched_switches(void);

/* The recorder's (record.c): the baton passed from thread `from` to `to`;
 * called by the thread letting it go, so that its stack is the switch
 * point's. */
void chk_record_switch(int from, int to);

/* The recorder's: the calling thread let go of one of the program's
 * mutexes (recorded when it runs a transaction: another thread may then
 * see its writes before they are committed). */
void chk_record_unlock(void);

/* The recorder's: whether the calling thread runs a transaction. */
int chk_in_txn(void);

#endif
