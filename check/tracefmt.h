/* tracefmt.h - the trace file a program linked with libtxn-<engine>-check
 * writes under txn-crashcheck (docs/crashcheck.md): what the recorder
 * (record.c) writes and the checker (tools/txn_crashcheck.c) reads. One
 * definition for both sides.
 *
 * The file is a sequence of records, each a struct chk_rec and `len`
 * payload bytes padded to a multiple of 8, in the order the events reached
 * memory (they are written under the lock traced stores are made under).
 */
#ifndef PMTX_TRACEFMT_H
#define PMTX_TRACEFMT_H

#include <stdint.h>

#define CHK_MAGIC 0x314b434e5854504dull /* "MPTXNCK1" */
#define CHK_VERSION 5u /* 2: CHK_SWITCH, CHK_UNLOCK; 3: CHK_ALLOC; 4: CHK_GROW;
                          5: CHK_INFERRED */

/* The environment between the checker and the recorder. */
#define CHK_ENV_TRACE "TXN_CHECK_TRACE"     /* the trace file to write */
#define CHK_ENV_POOL "TXN_CHECK_POOL"       /* the one pool file to follow */
#define CHK_ENV_SEED "TXN_CHECK_SEED"       /* getrandom's stream, decimal */
#define CHK_ENV_RECOVER "TXN_CHECK_RECOVER" /* 1: open the pool, close, exit */
#define CHK_ENV_WHERE "TXN_CHECK_WHERE"     /* a record's number (HELLO is 0):
                                               a CHK_WHERE record follows it */
#define CHK_ENV_SCHED "TXN_CHECK_SCHED"     /* 1: the program's threads under
                                               the seeded scheduler */
#define CHK_ENV_REACH "TXN_CHECK_REACH"     /* the leak check's verdict, written
                                               by CMD's library at the pool's
                                               close: "reached N", then a line
                                               "leak OFF SIZE" per live block
                                               not reached, "free OFF" per
                                               reached block not live, any
                                               other line in words: what
                                               could not be checked */

enum chk_type {
    CHK_HELLO = 1, /* off: CHK_MAGIC, arg: CHK_VERSION; payload: engine name */
    CHK_MAP,       /* the pool is followed from here: arg its size; then
                      arg bytes (len is 0: 32 bits would not hold them), its
                      whole contents, durable */
    CHK_STORE,     /* off, len, payload: the bytes; arg: thread */
    CHK_FLUSH,     /* off, arg: length */
    CHK_FENCE,     /* arg: thread */
    CHK_UNTRACED,  /* off, len, payload: bytes no traced store explains;
                      arg: the transaction (serial) during or after which
                      the audit found them */
    CHK_BEGIN,     /* arg: thread, off: the transaction's serial */
    CHK_COMMIT,    /* txn_commit called: arg thread, off serial */
    CHK_COMMITTED, /* txn_commit returned: arg thread, off serial; len: 0
                      when it returned 0, else 1 */
    CHK_ABORT,     /* txn_abort: arg thread, off serial */
    CHK_SYNC,      /* txn_sync called: arg thread */
    CHK_SYNCED,    /* txn_sync returned 0: arg thread */
    CHK_UNMAP,     /* the pool's mapping ends */
    CHK_ACK,       /* txn_check_ack (txn_check.h): arg n */
    CHK_WHERE,     /* the stack of the record TXN_CHECK_WHERE named: off its
                      number; payload: a line "object-path<TAB>offset" a
                      frame, the program's frames only, innermost first */
    CHK_SWITCH,    /* --threads-sched: the baton passed; off: the thread that
                      let it go, arg: the one that has it (the scheduler's
                      numbers, 0 the main thread) */
    CHK_UNLOCK,    /* --threads-sched: the program let go of a mutex inside a
                      transaction; off: its serial, arg: thread */
    CHK_ALLOC,     /* txn_alloc returned 0: off the object's pool offset,
                      arg thread */
    CHK_GROW,      /* the pool mapped more of its file (a growth), right
                      after its end: off the old size, arg the bytes added;
                      then arg bytes (len is 0, as for CHK_MAP), their
                      contents, durable */
    CHK_INFERRED,  /* right after HELLO: the library's stores are plain
                      (pmdk's libpmemobj), inferred from the pool against
                      what the records explain at each flush (its lines)
                      and fence (the whole pool), written as CHK_STORE in
                      address order: only the fences are crash points, at
                      PDOM 2 */
    CHK_TYPES
};

struct chk_rec {
    uint32_t type; /* enum chk_type */
    uint32_t len;  /* payload bytes */
    uint64_t off;  /* pool offset, or as the type says */
    uint64_t arg;
};

/* A record's payload rounded up: records stay 8-byte aligned. */
static inline uint64_t chk_pad(uint64_t len)
{
    return (len + 7) & ~(uint64_t)7;
}

#endif
