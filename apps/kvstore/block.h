/* block.h - clients blocked on keys (block.c): BLPOP, BRPOP, BLMOVE,
 * BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX and BZMPOP wait here until another
 * client writes one of their keys, their timeout passes or CLIENT UNBLOCK
 * frees them. Above cmd.h; the command files, the dispatcher and the
 * network use it.
 *
 * A blocked client's request stays unconsumed in its input buffer; when
 * it is due (woken by a write, timed out, unblocked) its owner thread runs
 * the request again, in a transaction of its own: it pops (and answers)
 * or blocks again, keeping its place in the queue. */
#ifndef KV_BLOCK_H
#define KV_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "cmd.h"

/* How a blocking command's run goes on (block_state). */
enum block_state {
    BLOCK_NONE,    /* not blocked yet: a first run */
    BLOCK_WAITING, /* blocked and run again: woken by a write */
    BLOCK_TIMEOUT, /* the timeout passed, or CLIENT UNBLOCK ... TIMEOUT */
    BLOCK_ERROR,   /* CLIENT UNBLOCK ... ERROR */
};

/* Read a blocking command's timeout argument as Redis 7.0 does (float
 * seconds, 0: for ever) into *ms (0: for ever). 0, or -1 with the error
 * replied. */
int block_timeout(struct conn *c, const struct kv_slice *arg, long long *ms);

/* What the run of c's blocked request is (owner thread). */
enum block_state block_state(struct conn *c);

/* CLIENT UNBLOCK ... ERROR freed c: its error replied, 1; else 0. */
int block_error(struct conn *c);

/* A blocking command found nothing to pop: inside EXEC or once its time
 * is up it answers a nil array, else it blocks on keys[0..n) for ms
 * (block_wait). 0 or TXN_E_NOMEM. */
int block_nothing(struct conn *c, const struct kv_slice *keys, size_t n, long long ms);

/* Nothing to pop: block c on keys[0..n) for ms (0: for ever) - or, when
 * already blocked, wait again in the same place. Called by the command
 * while its transaction holds the keys' locks, so that a write of one of
 * them either came before (the command saw it) or wakes c. The command
 * replies nothing; the dispatcher leaves the request unconsumed. 0, or
 * TXN_E_NOMEM. */
int block_wait(struct conn *c, const struct kv_slice *keys, size_t n, long long ms);

/* c is no longer blocked (served, timed out, unblocked, closed): off the
 * registry. A wake-up it has not taken (block_rerun), or with pass_on any,
 * goes on to the next waiter of its keys, so that none is lost with it.
 * Owner thread; nothing when c is not blocked. */
void block_done(struct conn *c, int pass_on);

/* c's blocked request is run again: it takes its wake-up (a write after
 * this wakes it once more). Owner thread. */
void block_rerun(struct conn *c);

/* c's request waits, still blocked: 1 c is blocked and not due (woken,
 * timed out or unblocked), else 0. *deadline gets its deadline (ms,
 * CLOCK_MONOTONIC; 0: none). Owner thread. */
int block_pending(struct conn *c, long long *deadline);

/* keys[0..n) were written (after the writer's commit): wake, for each,
 * the first client blocked on it that is not already woken. Cheap when no
 * client is blocked. Any thread, holding no store lock. */
void block_signal(const struct kv_slice *keys, size_t n);

/* CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if that client was blocked (it is
 * woken to answer as its timeout would, or with an error), else 0. */
int block_unblock(uint64_t id, int error);

/* Clients blocked now (INFO's blocked_clients). */
uint64_t block_count(void);

/* ms on CLOCK_MONOTONIC: deadlines */
long long block_now(void);

#endif
