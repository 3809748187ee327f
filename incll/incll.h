/* incll.h - In-Cache-Line Logging (InCLL) for data structures on the incll
 * engine (Cohen et al., ASPLOS'19, sections 4 and 5).
 *
 * A node of a persistent structure (a Masstree leaf, the test leaf of
 * tests/incll) is an incll object (txn_alloc) that embeds small undo words
 * in the cache lines of the fields they protect. Stores to one line reach
 * the media in program order, so such a word needs no flush and no fence:
 * only the order of two stores, which a compiler barrier keeps (x86-TSO:
 * a release fence). When an InCLL cannot hold what a change needs, the
 * node is copied whole to the engine's external log (one barrier), and the
 * rest of the epoch changes it freely.
 *
 * The words (in the node's payload, at offsets the node type chooses):
 *
 *  incll_perm  the permutation InCLL: three 8-byte words in ONE line.
 *    perm   the protected word: which slots are in use (a bitmap, or
 *           Masstree's permutation); the structure's own data.
 *    saved  perm as it was at the start of the node epoch.
 *    epoch  node epoch << 2 | INCLL_LOGGED | INCLL_INS_OK. The flags are
 *           transient (they mean something only while the node epoch is
 *           the current epoch): LOGGED, the node is in this epoch's
 *           external log; INS_OK, no slot was removed this epoch, so an
 *           insert may reuse a free slot without logging.
 *
 *  incll_val   a value InCLL: one word in the line of the value words it
 *           covers (e.g. vals[0..6] of a 14-slot leaf): bits 0-3 the slot
 *           it saved (15: none), bits 4-47 the slot's old value (a 16-byte
 *           aligned 48-bit pointer keeps all its bits), bits 48-63 the low
 *           16 bits of the epoch it was written in; the high bits are the
 *           node epoch's (invariant N6).
 *
 * Objects of the incll engine start their payload INCLL_OBJ_HDR bytes
 * after a block boundary, and blocks whose size is a multiple of 64 are
 * line aligned: allocate INCLL_NODE_ALLOC(sizeof node) and check a node
 * type's lines with INCLL_SAME_LINE/INCLL_IN_ONE_LINE in _Static_asserts
 * (they count the header); incll_layout_check() checks a layout at run
 * time.
 *
 * Crash invariants (C: the epoch of the running transaction; S: the first
 * epoch of this execution, above every failed epoch)
 *  N1 perm, saved and epoch share one line; each value InCLL shares the
 *     line of every value word it covers.
 *  N2 First touch: the first change of a node in C, or its first access in
 *     this execution, stores per line, in this order: in each value line
 *     that N7 restores or whose InCLL N6 needs rewritten, [the restore],
 *     then the InCLL := (none, low16(C)); in the perm line, saved := perm
 *     [or perm := saved, N7], then epoch := C | INS_OK. Other value lines
 *     are not written (nor read, but by N7's decision): their InCLLs
 *     carry an older epoch, which says free in C (N5).
 *     Before any of it, either this thread's epoch marker is durable (a
 *     record of C in its log, one barrier per thread per epoch: a crash in
 *     C then fails C), or, when C and the node epoch differ in their high
 *     48 bits (the 16-bit wrap, about once in 70 minutes of 64 ms epochs),
 *     the whole node is in C's external log.
 *  N3 perm changes in C only after N2; saved is not written again in C. A
 *     crash in C rolls perm back to saved. Slots free at the start of C
 *     need nothing more: their key and value bytes are unreachable then.
 *  N4 A removal clears INS_OK; an insert that finds it clear logs the node
 *     first (it could reuse the removed slot, whose pair the rollback
 *     brings back).
 *  N5 A value of a slot in use changes in C only after its line's InCLL
 *     holds (slot, old value, low16(C)), or held that slot already in C, or
 *     the node is logged in C. An InCLL holds a slot in C only when its
 *     epoch bits are low16(C); with other bits it is free. Otherwise (the
 *     InCLL holds another slot in C, or the old value is no 16-byte aligned
 *     48-bit word) the node is logged first.
 *  N6 A value InCLL's epoch is (node epoch & ~0xffff) | low16. It is
 *     written only in its node's epoch, so it is at most the node epoch
 *     (or C, when a save of C persisted and C's epoch word did not); when
 *     C and the node epoch differ in their high bits, N2 logs the node and
 *     rewrites every value InCLL, so whichever node epoch is durable (the
 *     old one or C: the lines persist independently) has the right high
 *     bits. An InCLL with bits other than low16(C) is thus of an epoch
 *     before C.
 *  N7 Lazy recovery: a node whose epoch is below S is recovered at its
 *     first access, under a hashed volatile recovery lock (the node's own
 *     lock may be in any state after a crash): perm := saved if the node
 *     epoch failed, vals[slot] := old for each value InCLL whose epoch
 *     failed, then N2; a restored InCLL, rewritten after its restore in
 *     the same line, is flushed and fenced before the node epoch changes
 *     (one barrier per node with a restore). So a value InCLL of an epoch
 *     below the node epoch is of a complete epoch (one that failed was
 *     restored at the node's first access after it, durably before the
 *     node epoch passed it), and only InCLLs of the node epoch or later
 *     are looked up: an old complete epoch may be one the failure ring
 *     no longer tells. Idempotent: after a crash part way, the node epoch
 *     is the old failed one or C (failed by the marker), saved is
 *     unchanged, and each value InCLL is either unchanged (restored
 *     again) or reset after its restore in the same line.
 *  N8 A node logged in C comes back from the external log as it was when
 *     logged, InCLL words included (it may have changed in C before); N7
 *     then takes it back to the start of C.
 *  N9 N2 adds the whole node to C's global flush, so at the start of each
 *     epoch every node's words are durable.
 *
 * Cost: no barrier per change; one per thread per epoch (the marker), one
 * per node logged. Reads of a node after a restart write it once (N7),
 * with one barrier when they restore a value InCLL.
 *
 * Rules for a structure using these
 *  - Every call runs inside a transaction of the calling thread (it pins
 *    the epoch). Changes made through these calls are not undone by
 *    txn_abort(): abort only before the first of them.
 *  - Call incll_node_prepare() before reading a node in a transaction, the
 *    change calls before changing it, with the node locked by the
 *    structure (one writer per node).
 *  - Keys and values of free slots are written with incll_store() after
 *    incll_insert_begin() and before incll_perm_store(); any other change
 *    (split, merge, a key in use) after incll_log(), with incll_store().
 *  - The engine remembers the last 6 failed epochs: a node not accessed
 *    while 6 later crashes happened (each in an epoch with changes) can no
 *    longer be told from a complete one; incll_node_prepare() then returns
 *    TXN_E_CORRUPT rather than guess.
 */
#ifndef PMTX_INCLL_H
#define PMTX_INCLL_H

#include <stddef.h>
#include <stdint.h>

#include "txn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INCLL_OBJ_HDR 8u    /* payload offset of an incll object in its block */
#define INCLL_LINE 64u
#define INCLL_NONE 15u      /* slot field of a value InCLL that saved nothing */
#define INCLL_MAX_SLOTS 15u /* value words a layout may have */
#define INCLL_MAX_GROUPS 4u /* value InCLLs a layout may have */

/* Flags in incll_perm.epoch. */
#define INCLL_INS_OK 1u
#define INCLL_LOGGED 2u
#define INCLL_EPOCH_SHIFT 2

typedef struct incll_perm {
    uint64_t epoch; /* node epoch << 2 | INCLL_LOGGED | INCLL_INS_OK */
    uint64_t saved; /* perm at the start of the node epoch */
    uint64_t perm;  /* the protected word */
} incll_perm;

typedef uint64_t incll_val; /* slot:4 | old value bits 4-47 | low16(epoch) */

#define INCLL_PTR_MASK 0x0000fffffffffff0ull

/* Payload bytes to allocate for a node of n bytes: block size a multiple
 * of 64, so the block is line aligned and the node's lines are known. */
#define INCLL_NODE_ALLOC(n) ((((n) + INCLL_OBJ_HDR + INCLL_LINE - 1) / INCLL_LINE) * INCLL_LINE - INCLL_OBJ_HDR)

/* Line (within the block) of the first and last byte of type.field. */
#define INCLL_LINE_OF(type, field) ((INCLL_OBJ_HDR + offsetof(type, field)) / INCLL_LINE)
#define INCLL_END_LINE_OF(type, field)                                                    \
    ((INCLL_OBJ_HDR + offsetof(type, field) + sizeof(((type *)0)->field) - 1) / INCLL_LINE)
#define INCLL_IN_ONE_LINE(type, field) (INCLL_LINE_OF(type, field) == INCLL_END_LINE_OF(type, field))
/* a and b each in one line, the same one. */
#define INCLL_SAME_LINE(type, a, b)                                                       \
    (INCLL_IN_ONE_LINE(type, a) && INCLL_IN_ONE_LINE(type, b) &&                          \
     INCLL_LINE_OF(type, a) == INCLL_LINE_OF(type, b))

/* ---- value InCLL words */

/* Whether v can be saved in a value InCLL (16-byte aligned, below 2^48). */
static inline int incll_val_fits(uint64_t v) { return (v & ~INCLL_PTR_MASK) == 0; }

static inline incll_val incll_val_pack(unsigned slot, uint64_t v, uint64_t epoch)
{
    return (uint64_t)(slot & 15u) | (v & INCLL_PTR_MASK) | (epoch & 0xffffu) << 48;
}
static inline unsigned incll_val_slot(incll_val w) { return (unsigned)(w & 15u); }
static inline uint64_t incll_val_old(incll_val w) { return w & INCLL_PTR_MASK; }
/* The full epoch of w, from the node epoch's high bits (N6). */
static inline uint64_t incll_val_epoch(incll_val w, uint64_t node_epoch)
{
    return (node_epoch & ~0xffffull) | w >> 48;
}

static inline uint64_t incll_node_epoch(const incll_perm *pi)
{
    return pi->epoch >> INCLL_EPOCH_SHIFT;
}

/* ---- a node type's layout: byte offsets in the node (its payload) */
typedef struct incll_layout {
    size_t size;     /* bytes of the node (what incll_node_prepare may log) */
    size_t perm_off; /* the incll_perm */
    size_t vals_off; /* the value words: uint64_t[nslots] */
    unsigned nslots; /* <= INCLL_MAX_SLOTS */
    unsigned ngroups;                     /* value InCLLs, <= INCLL_MAX_GROUPS */
    size_t group_off[INCLL_MAX_GROUPS];   /* each value InCLL */
    /* Optional (NULL: none): a node of pool p as its first access after
     * a restart finds it, its InCLLs rolled back, before it counts as
     * recovered. Nonzero: damaged (not torn: crashes are the epochs'),
     * say a pointer that is no object of p; the node stays unrecovered,
     * incll_node_prepare() and the change calls answer TXN_E_CORRUPT, and
     * its next access checks it again. Runs under the node's recovery
     * lock: it may read the node, not change it. */
    int (*check)(txn_pool *p, const void *node);
} incll_layout;

/* 0 if the layout keeps N1: the perm InCLL in one line, every value word
 * in the line of exactly one value InCLL; else TXN_E_INVAL. */
int incll_layout_check(const incll_layout *l);

/* The node: o's payload. */
static inline void *incll_node(txn_obj *o) { return (char *)o + INCLL_OBJ_HDR; }

/* ---- the operations. All return 0 or a TXN_E_* code (TXN_E_LOGFULL,
 * TXN_E_NOSPACE or TXN_E_NOMEM when the log cannot grow, TXN_E_CORRUPT,
 * TXN_E_INVAL). After an error the node holds what it held before the
 * call (its InCLL words may have started the current epoch). */

/* A node o allocated by this transaction with INCLL_NODE_ALLOC bytes
 * (else TXN_E_INVAL): its InCLL words for the current epoch, with perm =
 * `perm` (saved likewise). The rest of it is the structure's (written with
 * incll_store()). */
int incll_node_init(txn *tx, txn_obj *o, const incll_layout *l, uint64_t perm);

/* Before the first read of o in a transaction: recovers it if this is its
 * first access since a restart (N7), TXN_E_CORRUPT if the layout's check
 * refuses it then. Cheap otherwise (one load). */
int incll_node_prepare(txn *tx, txn_obj *o, const incll_layout *l);

/* Before writing a free slot's key and value (N3, N4). */
int incll_insert_begin(txn *tx, txn_obj *o, const incll_layout *l);

/* Before clearing a slot in perm (N3, N4). */
int incll_remove_begin(txn *tx, txn_obj *o, const incll_layout *l);

/* Publish a new perm, after incll_insert_begin/incll_remove_begin (and
 * the slot's stores) in the same transaction. */
void incll_perm_store(txn_obj *o, const incll_layout *l, uint64_t perm);

/* Set the value word of `slot` (a slot in use) to v (N5). */
int incll_update(txn *tx, txn_obj *o, const incll_layout *l, unsigned slot, uint64_t v);

/* incll_update, or a move: where incll_update would log the node (its
 * line's InCLL holds another slot, or the old value is no 16-byte aligned
 * 48-bit word; the node not logged in this epoch), incll_update_try
 * changes nothing and returns INCLL_MOVE. The caller may then move the
 * entry to a slot that is free now and was free at the start of the
 * epoch (not in `saved`: its bytes are unreachable after a rollback,
 * N3): incll_move_begin, the key and new value into that slot
 * (incll_store), one incll_perm_store naming it where the old slot was;
 * the epoch's rollback of perm brings the old slot back, untouched. With
 * no such slot, incll_update (which logs). Otherwise as incll_update: 0
 * or an error. */
#define INCLL_MOVE 1
int incll_update_try(txn *tx, txn_obj *o, const incll_layout *l, unsigned slot, uint64_t v);

/* Begin a move (after INCLL_MOVE, same transaction): clears INS_OK (N4:
 * the old slot is free in perm but holds the start-of-epoch pair, so an
 * insert into the first free slot must log the node first). TXN_E_STATE
 * on a node logged in this epoch. */
int incll_move_begin(txn *tx, txn_obj *o, const incll_layout *l);

/* Log the whole node in the current epoch's external log now (no-op if it
 * is there): afterwards any field may change, through incll_store(). */
int incll_log(txn *tx, txn_obj *o, const incll_layout *l);

/* Log any object whole (a structure's root record, say: no InCLL words)
 * in the current epoch's external log now, as txn_open(TXN_RW) does; a
 * failure (TXN_E_NOSPACE: a full pool) leaves the object and the
 * transaction usable (a large object's records written before the
 * failure stay in the log: they hold its bytes as they were), so a
 * structure can ready what it will write before it changes anything.
 * Later txn_write calls to it log nothing. */
int incll_log_object(txn *tx, txn_obj *o);

/* A traced store into a node, for what the rules above allow. */
void incll_store(void *dst, uint64_t v);

/* The same for n bytes from src (e.g. filling a block allocated in the
 * running epoch, see incll_epoch). */
void incll_store_bytes(void *dst, const void *src, size_t n);

/* The same for a word that other threads read concurrently (release). */
void incll_store_shared(uint64_t *dst, uint64_t v);

/* Traced compare-and-swap of a word in a node (full barrier); nonzero
 * when it swapped. For words whose value after a crash does not matter
 * (a structure's lock word, reset at the node's first access). */
int incll_cas(uint64_t *dst, uint64_t expect, uint64_t nv);

/* The first epoch of this execution (S of N7): a node whose epoch is
 * below it has not been accessed since the pool was opened. */
uint64_t incll_first_epoch(txn *tx);

/* ---- statistics: per calling thread, cumulative since thread start or
 * the last incll_stats_reset() (as txn_stats). Cheap: thread-local
 * counters; a program sums its threads'. */
typedef struct incll_stats {
    uint64_t hit_update;   /* value changes a value InCLL absorbed (no log) */
    uint64_t hit_insert;   /* inserts the permutation InCLL absorbed */
    uint64_t hit_remove;   /* removes the permutation InCLL absorbed */
    uint64_t hit_move;     /* updates moved to a free slot (INCLL_MOVE),
                              absorbed by the permutation InCLL */
    uint64_t in_logged;    /* updates and inserts into a node logged already
                              this epoch (nothing to save) */
    uint64_t log_overflow; /* nodes logged because an InCLL could not take a
                              change (N4: insert after a remove, N5: the
                              value InCLL holds another slot) */
    uint64_t log_explicit; /* nodes logged by incll_log (structure changes)
                              or at the 16-bit epoch wrap (N6) */
    uint64_t epochs;       /* epochs ended in this process (all pools; not
                              per thread) since the reset */
} incll_stats;

void incll_stats_get(incll_stats *out);
void incll_stats_reset(void);

/* ---- reuse of freed nodes. A block freed by a transaction (txn_free)
 * returns to the allocator when its epoch has ended and is durable (I4 of
 * incll.c). A structure whose readers run outside transactions (the
 * Masstree's gets and scans: they lock nothing and pin no epoch) may still
 * be reading such a node then; it gives the engine its readers' grace
 * period, and freed blocks wait for it too: at the end of the epoch that
 * freed them, token = now(arg); they return at the end of the first
 * later epoch for which passed(arg, token) is true. Both are called by the
 * thread ending an epoch, while no transaction runs: they must not wait
 * for the structure's readers (try, and say no). When a pool's last
 * transaction context goes (txn_pool_close), its waiting blocks return at
 * once: the structure's readers must be done by then. One grace for the
 * process (NULL: none, the default); incll_set_grace returns once no epoch
 * end calls the grace it replaces, whose arg may be freed then. A crash
 * forgets nothing: the frees
 * are durable, and the waiting blocks are free when the pool is opened. */
typedef struct incll_grace {
    uint64_t (*now)(void *arg);
    int (*passed)(void *arg, uint64_t token);
    void *arg;
} incll_grace;

void incll_set_grace(const incll_grace *g);

/* Nonzero when an epoch end waits for the running transactions to end:
 * a transaction that a thread keeps open across several operations of a
 * structure (masstree's mt_opts.batch) commits then. */
int incll_epoch_waiting(txn *tx);

/* The epoch of the running transaction. A block allocated (txn_alloc) in
 * epoch E is in E's global flush whole: stores into it with incll_store()
 * in transactions of E need no log, as its bytes at E's start do not
 * matter (a crash in E frees it again); from E+1 on, it changes like any
 * other object (txn_write). */
uint64_t incll_epoch(txn *tx);

/* The word incll_epoch_waiting(tx) reads, for a check without a call
 * (incll_waiting); it stays valid while tx's pool is open. */
const int *incll_waiting_word(txn *tx);
static inline int incll_waiting(const int *w) { return __atomic_load_n(w, __ATOMIC_RELAXED); }

/* ---- inline fast paths: the common case of a primitive without a call
 * into the library. `epoch` is the running transaction's (incll_epoch(tx),
 * which does not change while it runs). */

/* This thread's counters (incll_stats_get); the fast paths count here. */
extern __thread incll_stats incll_tstats __attribute__((tls_model("initial-exec")));

/* the library's count of bytes stored by such paths (txn_stats.bytes_stored) */
extern __thread uint64_t txn__stored_inline __attribute__((tls_model("initial-exec")));

#ifdef PMTX_TRACE /* the crash simulator's build traces every store */
#define INCLL_STORE_(p, v) incll_store_shared((uint64_t *)(p), (v))
#else /* release, as incll_store_shared: a reader that loads a value word
       * with acquire sees what was written before it, e.g. the bytes it
       * points to (a plain store on x86) */
#define INCLL_STORE_(p, v)                                                                \
    (__atomic_store_n((uint64_t *)(p), (uint64_t)(v), __ATOMIC_RELEASE), txn__stored_inline += 8)
#endif

/* The value InCLL (index in group_off) whose line holds slot s's value
 * word, or -1. */
static inline int incll__group_of_slot(const incll_layout *l, unsigned s)
{
    size_t line = (INCLL_OBJ_HDR + l->vals_off + 8 * (size_t)s) / INCLL_LINE;
    for (unsigned g = 0; g < l->ngroups && g < INCLL_MAX_GROUPS; g++)
        if ((INCLL_OBJ_HDR + l->group_off[g]) / INCLL_LINE == line)
            return (int)g;
    return -1;
}

/* N5 on a node started in `epoch` (its epoch word ew), `gw` the InCLL of
 * the line of `val` (slot's value word): when the node is logged, or the
 * InCLL saved this slot already, or is free and takes the old value, v
 * is stored (counted) and 1 returned; else 0, nothing changed. The
 * library's incll_update and the inline path below both decide here. */
static inline int incll__update_hit(uint64_t ew, incll_val *gw, uint64_t *val, unsigned slot,
                                    uint64_t v, uint64_t epoch)
{
    incll_val w = *gw;
    unsigned held = w >> 48 == (epoch & 0xffffu) ? incll_val_slot(w) : INCLL_NONE; /* N5 */
    if (ew & INCLL_LOGGED) {
        incll_tstats.in_logged++;
    } else if (held == slot) {
        incll_tstats.hit_update++; /* its start-of-epoch value is saved already */
    } else if (held == INCLL_NONE && incll_val_fits(*val)) {
        INCLL_STORE_(gw, incll_val_pack(slot, *val, epoch));
        __asm__ __volatile__("" ::: "memory"); /* the InCLL before the value */
        incll_tstats.hit_update++;
    } else {
        return 0;
    }
    INCLL_STORE_(val, v);
    return 1;
}

/* incll_update_try without a call when the node was started in this
 * epoch already: incll__update_hit takes the change (0), or it answers
 * INCLL_MOVE with nothing changed, as the library would (its node is
 * touched in the epoch, so there is nothing else to decide). With a
 * layout constant to the compiler, the search for the slot's InCLL folds
 * away. The node's first change in the epoch calls incll_update_try. */
static inline int incll_update_try_in(txn *tx, txn_obj *o, const incll_layout *l,
                                      unsigned slot, uint64_t v, uint64_t epoch)
{
    char *n = (char *)incll_node(o);
    uint64_t ew = __atomic_load_n(&((incll_perm *)(n + l->perm_off))->epoch, __ATOMIC_RELAXED);
    int g = slot < l->nslots ? incll__group_of_slot(l, slot) : -1;
    if (ew >> INCLL_EPOCH_SHIFT == epoch && g >= 0)
        return incll__update_hit(ew, (incll_val *)(n + l->group_off[g]),
                                 (uint64_t *)(n + l->vals_off) + slot, slot, v, epoch)
                   ? 0
                   : INCLL_MOVE;
    return incll_update_try(tx, o, l, slot, v);
}

#ifdef __cplusplus
}
#endif
#endif
