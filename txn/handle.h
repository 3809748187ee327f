/* handle.h - the front end's volatile handles: an open pool (struct
 * txn_pool) and a thread's context in it (struct txn). Each holds a
 * pointer to the engine's state; the pool format's state lies right after
 * the handle, in the same allocation (eng_pool_fmt_size, eng_tx_fmt_size:
 * engine.h), and only the format knows its type (struct fmt_pool, struct
 * fmt_tx). */
#ifndef PMTX_HANDLE_H
#define PMTX_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "txn.h"
#include "util.h"

struct fmt_pool;
struct fmt_tx;

/* The format's part of a pool handle and of a context. At a fixed offset,
 * not behind a pointer: the load of such a pointer before every heap
 * lookup cost redo1 a fifth of its transactions (docs/format.md). */
#define POOL_FMT(p) ((struct fmt_pool *)((p) + 1))
#define TX_FMT(tx) ((struct fmt_tx *)((tx) + 1))

/* One per (thread, pool); `struct txn` of txn.h: the part txn.h's inline
 * paths read, the front end's fields (api.c), the engine's and the
 * format's state. Used by its thread only, but for next_ctx (the pool's
 * ctx_lock) and a release at the pool's close (no other call runs). */
struct txn {
    struct txn__hot hot;      /* first: txn.h casts a txn * to it */
    txn_pool *p;
    pthread_t owner;          /* the thread it belongs to */
    struct txn *next_ctx;     /* p->ctx_lock: pool's list */
    unsigned slot_idx;        /* context index, < p->max_ctx: its log slot */
    int err;                  /* first error of the running transaction */
    signed char way_keep[TXN__WAYS]; /* per way: eng_inline's answer */
    int ways_kept;            /* a way may be kept past the transaction */
    uint64_t ways_filled[(TXN__WAYS + 63) / 64]; /* a bit per way way_fill set
                                 since ways_clear: what ways_clear empties */
    uint8_t way_next[1 << TXN__SET_BITS]; /* per set: the way to fill next */
    int ways_move;            /* ways whose mode changes at the end, in moved[]
                                 (more than TXN__MOVED: all are looked at) */
#define TXN__MOVED 48
    uint8_t moved[TXN__MOVED];
    const txn_obj *last_obj;  /* the object last checked, and its size */
    size_t last_size;
    struct vec defers;        /* struct tx_defer */
    struct txn *coord;        /* a participant's coordinator (txn_join), or
                                 NULL */
    struct vec parts;         /* a coordinator's participants (struct txn *) */
    void *eng;                /* the engine's per-thread state */
    /* then the format's part (TX_FMT) */
};

/* The volatile handle of an open pool, shared by every thread that runs
 * transactions on it. "open" means set by the open or create, before any
 * context exists, and only read until the close, which runs when no other
 * call is in progress. */
/* txn_join's table in a coordinator pool (api.c; the crash simulator
 * fills it to make a joined commit fail after its parts prepared). */
#define JOIN_ENTRIES 256 /* participant contexts a coordinator pool keeps */
#define JOIN_META_OFF 56 /* the meta object's word with the table's handle */

struct join_entry {
    uint64_t uuid; /* participant pool; 0: a free entry */
    uint64_t ctx;  /* its context's index */
    uint64_t seq;  /* that context's last transaction committed here: its
                      version (struct join_ref) */
};

/* What a coordinator's handle knows of one entry of its table (J3). */
struct join_mark {
    struct join_entry e; /* the entry as this handle's commit wrote it */
    int state;           /* JOIN_UNKNOWN, JOIN_PENDING, JOIN_SETTLED */
};
enum { JOIN_UNKNOWN, JOIN_PENDING, JOIN_SETTLED };

struct txn_pool {
    /* first: txn.h's inline txn_begin reads it. gen: open; freed, atomic
     * (bumped where blocks are freed, read at every txn_begin): blocks
     * given back to the allocator so far, counted before any of them can
     * be reserved again (R1, api.c) */
    struct txn__pool_hot hot;
    _Alignas(64) char *base;  /* open: where the file is mapped; on a line
                                 away from `freed`'s bumps */
    size_t size;              /* bytes of the file and its mapping: set at
                                 open, raised by a growth (atomic: the
                                 format's pool_size_now) */
    size_t max_size;          /* open: bytes it may grow to */
    unsigned max_ctx;         /* open: contexts at once: the format's log slots */
    uint8_t *ctx_used;        /* ctx_lock: per context index: claimed */
    pthread_mutex_t ctx_lock; /* guards ctxs and ctx_used */
    struct txn *ctxs;         /* ctx_lock: per-thread contexts of this pool */
    void *eng;                /* the engine's lock (its own rules) */
    char *file;               /* open: the file's full path, */
    char *layout;             /* its layout name, */
    uint64_t uuid;            /* and uuid (eng_pool_uuid): what a
                                 prepared transaction names it by */
    txn_pool *next_open;      /* the process's open pools (api.c's lock) */
    pthread_mutex_t join_lock; /* held through a commit that writes the
                                  pool's join table (txn_join) */
    struct join_mark *join_marks; /* join_lock: per entry of the table, what
                                     this handle's commits put there and
                                     whether its part has settled (J3);
                                     NULL until the first joined commit */
    int view;                 /* open: a view (txn_pool_view): its writes
                                 stay private, so it neither joins nor
                                 answers a real pool's recovery */
    /* then the format's part (POOL_FMT; its own rules) */
};

#endif
