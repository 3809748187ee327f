/* engine.h - the contract each engine implements, once, in its folder.
 *
 * Layers, each calling only the one below it:
 *
 *   txn/api.c     the front end: the only definition of every txn_* call.
 *                 Checks arguments and bounds, owns the pool handle, the
 *                 per-thread contexts (ctxreg.h), the root and meta objects
 *                 of a new pool, deferred actions and statistics.
 *   eng_pool_*    the pool format: a pool file on media. txn/format/ (pool.c,
 *                 alloc.c, log.c, tx.c) is pmtx's own format, linked into
 *                 every engine that does not bring one; an engine with a
 *                 format of its own (pmdk: a libpmemobj pool) defines every
 *                 eng_pool_* call itself and links none of those files.
 *   eng_*         the logging technique: transactions on objects.
 *
 * What an engine may include from txn/: this file (and through it
 * handle.h, common.h, util.h), persist.h for every store, flush and fence,
 * atomics.h, and addrmap.h. Nothing else: the front end's ctxreg.h, the
 * crash simulator's trace hooks and the pool format's headers
 * (txn/format/) are not an engine's business. No engine folder has
 * txn/format/ on its include path, and tests/engine_includes.c checks
 * that none includes one of its headers (docs/format.md).
 *
 * How the engines map onto txn.h (one API, no engine-specific calls):
 *
 *  undo  txn_obj = the payload block itself. txn_write logs the old bytes
 *        (one record, one barrier) then stores in place; txn_read and
 *        txn_open are plain loads. Commit: persist written ranges, commit
 *        record (2 barriers). Recovery rolls back an uncommitted tail.
 *
 *  redo  txn_obj = block with an 8-byte writers bitmap before the payload.
 *        txn_write appends (addr, new bytes) to the log, sets the writer
 *        bit, links the record into the transaction's hash by object;
 *        txn_read checks the bitmap and only then looks up. txn_open(RO)
 *        returns the object in place (valid for unwritten bytes). Commit:
 *        log, COMMITTED, apply, IDLE (4 barriers).
 *
 *  cow   txn_obj = a wrapper {payload, new, old_backup, writer}. txn_open
 *        (RW) copies the payload (a second writer gets TXN_E_CONFLICT) and
 *        returns the copy; txn_write lands in the copy; other readers see
 *        the old payload. Commit: write set + copies, COMMITTED, swap +
 *        free old through old_backup, IDLE (4 barriers).
 *
 *  incll txn_obj = block with an epoch tag. The first txn_write to an
 *        object in an epoch copies it to the external log (a block above
 *        4 KiB: the 64-byte granule written; flushed; one fence before the
 *        first in-place change), later writes in the same epoch log
 *        nothing; commit costs no barrier and txn_sync() waits for the
 *        epoch's global flush.
 *
 *  redo1 txn_obj = the payload. Writes go to a DRAM log (txn.h's inline
 *        paths append to it) with a filter of the words written; commit
 *        writes it as checksummed parts into the slot's ring, one barrier,
 *        then applies it; its lines are flushed at the slot's next commit.
 *
 *  pmdk  txn_obj = a handle naming a libpmemobj allocation. txn_write =
 *        pmemobj_tx_add_range_direct + store; commit = pmemobj_tx_commit.
 *        Its pool is PMDK's own file: it implements the eng_pool_* layer.
 *
 *  none  txn_obj = the payload; writes store in place after saving the old
 *        bytes in DRAM (so txn_abort works); nothing is flushed or fenced.
 *
 * Each engine folder's CMakeLists.txt declares the engine (pmtx_engine():
 * its sources, whether it is persistent, its pool format, its libraries,
 * its crash-simulator arguments) and may hold barriers.h, the barrier
 * formula of its commit and abort that tests/barrier_counts.c checks.
 *
 * eng_begin, eng_sync, eng_obj_blocks, eng_open, eng_read and eng_inline
 * have defaults in engine_defaults.c (nothing at begin, durable at commit,
 * one block per object that is its payload, reads through eng_open,
 * nothing inline): an engine defines them only to differ.
 */
#ifndef PMTX_ENGINE_H
#define PMTX_ENGINE_H

#include <stddef.h>

#include "common.h"
#include "handle.h"

/* pmtx's format's log records, named by its recovery calls below. */
struct slot_hdr;
struct log_rec;

/* The engine's name (txn_engine_name()), as its CMakeLists.txt declares
 * it (PMTX_ENGINE_NAME). */
extern const char eng_name[];

/* Whether the engine keeps a persistent log (0 for none): recovery and
 * transaction versions are skipped otherwise. */
extern const int eng_persistent;

/* ---- the pool format (txn/format/, or the engine's own) */

/* txn_pool_opts with the defaults applied and the front end's checks
 * passed (threads in 1..TXN_MAX_THREADS). What else a value may be is the
 * format's to check (TXN_E_INVAL). */
struct pool_params {
    size_t size;      /* bytes the pool starts with */
    size_t max_size;  /* bytes it may grow to (>= size), or 0 when not
                         given: the format's default (pmtx's format:
                         TXN_POOL_MAX; pmdk: size, its pools do not grow) */
    size_t root_size; /* payload bytes of the root object */
    unsigned threads; /* contexts in transactions at once */
    size_t log_size;  /* bytes of a context's first log chunk */
};

/* Bytes of the format's part of a pool handle and of a context (struct
 * fmt_pool, struct fmt_tx: handle.h's POOL_FMT, TX_FMT), which the front
 * end allocates, zeroed, right after each; 0 for none. */
extern const size_t eng_pool_fmt_size;
extern const size_t eng_tx_fmt_size;

/* Create the pool file `file` (a full path; it must not exist) for
 * `layout` and fill `p` (zeroed by the caller but for the front end's
 * fields): base, size, max_ctx, and the format's own state. The pool then
 * takes transactions; the front end makes its root and meta objects in
 * one and hands them to eng_pool_seal(). The file is made under a
 * temporary name (common.h: struct pool_birth) that seal renames to
 * `file`, so no crash leaves an incomplete pool under `file`. On failure
 * nothing is left: `p` holds nothing to release. */
int eng_pool_create(txn_pool *p, const char *file, const char *layout,
                    const struct pool_params *o);

/* The smallest pool file eng_pool_create() takes with `o`
 * (txn_pool_min_size()). */
size_t eng_pool_min_size(const struct pool_params *o);

/* Record a new pool's root (root_size payload bytes) and meta object
 * durably, then give the file its name: the pool exists from then on. A
 * close of a pool never sealed removes its file. */
int eng_pool_seal(txn_pool *p, txn_obj *root, size_t root_size, txn_obj *meta);

/* Open `file`: check everything before writing anything (on any error the
 * file is left as it was and `p` holds nothing), map it, recover it, and
 * fill `p` as eng_pool_create does. With `view`, a private copy-on-write
 * view: recovery and every later change stay in this process's memory and
 * the file is never written (txn_pool_view()). */
int eng_pool_open(txn_pool *p, const char *file, const char *layout, int view);

/* Release what eng_pool_create/open set up; the front end has synced the
 * pool and released every context before. */
void eng_pool_close(txn_pool *p);

/* Give the pool's free space back to the filesystem (txn_pool_trim), from
 * the calling thread's context tx, in no transaction (its cached blocks go
 * back first); *returned: the bytes the file gave back. TXN_E_NOTSUP for
 * a format that cannot. */
int eng_pool_trim(struct txn *tx, size_t *returned);

/* The pool's uuid (random at creation, never 0), what a prepared
 * transaction names its coordinator by (txn_join); 0 for a format that
 * has none (the default: such pools cannot be joined). */
uint64_t eng_pool_uuid(txn_pool *p);

/* The root object and the meta object (txn_meta_root()). */
txn_obj *eng_pool_root(txn_pool *p);
txn_obj *eng_pool_meta(txn_pool *p);

/* A new context tx of the pool (tx->p, tx->idx set; idx < p->max_ctx and
 * no other live context has it) takes its share of the pool (pmtx: log
 * slot idx and an allocator cache); detach gives it back. */
int eng_pool_attach(struct txn *tx);
void eng_pool_detach(struct txn *tx);

/* The format's part of a transaction's start and end, around the
 * engine's (pmtx: its version; its blocks given back, its log rewound). */
void eng_pool_begin(struct txn *tx);
void eng_pool_end(struct txn *tx, int committed);

/* txn_pool_inspect() of `file` (a full path): fill info (zeroed by the
 * caller), writing nothing, and return the verdict; say what it is about
 * with pool_problem(). */
int eng_pool_inspect(const char *file, txn_pool_info *info);

/* ---- objects and transactions */

/* Payload bytes of object o, or 0 if o is not an object of the pool. */
size_t eng_obj_size(txn_pool *p, const txn_obj *o);

/* The heap blocks that make up object o (at most 2): what a leak check
 * compares with the allocator's live blocks. Returns how many. */
int eng_obj_blocks(txn_pool *p, const txn_obj *o, void *blk[2]);

/* Per-context state (tx->eng), after eng_pool_attach / before detach. */
int eng_tx_init(struct txn *tx);
void eng_tx_fini(struct txn *tx);
int eng_begin(struct txn *tx);

/* Payload address of o (in place) and what it may be read through. */
void *eng_open(struct txn *tx, txn_obj *o, int mode);

/* How txn.h's inline paths may reach o in the running transaction, asked
 * by the front end after each of its calls that reached o (w->lim is o's
 * payload size - 8). Returns ENG_WAY_NONE (every access calls the engine;
 * the default), or, having set w->base (the payload as the transaction
 * reads it) and w->wmode (TXN__W_*: SLOW, or what a write does inline;
 * with TXN__W_LOG, reads of words the filter marks call eng_read):
 * ENG_WAY_DROP (for this transaction only) or the TXN__W_* mode the way
 * keeps for the thread's later transactions, with the same base (objects
 * freed by the thread are dropped). The answer holds until the engine's
 * next call on o, or the transaction's end or first error; an engine
 * whose call on one object makes an answer for another one wrong must not
 * give it (none does today). tx->hot.gate, when the engine sets it, holds
 * every TXN__W_DIRECT write back (undo: while a record awaits its
 * barrier). */
#define ENG_WAY_NONE (-1)
#define ENG_WAY_DROP (-2)
int eng_inline(struct txn *tx, txn_obj *o, struct txn__way *w);

/* Whether the engine defines eng_inline (1), or leaves every access to
 * the library (0, the default): the front end then keeps no ways. */
extern const int eng_inlines;

/* Whether txn.h may begin a transaction inline (Q1 there), and commit it
 * inline (Q2) while it calls the library for nothing (ENG_QUICK_ALL: none,
 * whose commit is a rewind of its write log and the counts), or only
 * begin it (ENG_QUICK_BEGIN: redo1; its commit is the library's); 0, the
 * default: neither. Either needs nothing of eng_begin and nothing of
 * eng_pool_begin but the format's version, which the engine then does
 * not use: a context's first transaction, begun by the library, still
 * takes one (the slot reads as used, txn_pool_inspect), the inline ones
 * none. */
#define ENG_QUICK_BEGIN 1
#define ENG_QUICK_ALL 2
extern const int eng_quick;

/* Bounds are checked by the caller: off + n <= payload size. */
int eng_read(struct txn *tx, txn_obj *o, size_t off, void *dst, size_t n);
int eng_write(struct txn *tx, txn_obj *o, size_t off, const void *src,
              size_t n);

/* The object layer: allocate/free with the engine's header. The caller
 * has refused the root and the meta object for eng_free. */
int eng_alloc(struct txn *tx, size_t n, txn_obj **out);
int eng_free(struct txn *tx, txn_obj *o);

/* Make the transaction durable, or return an error having rolled it back.
 * The front end then ends it (eng_pool_end) and runs deferred actions. */
int eng_commit(struct txn *tx);
/* Roll back (also at pool close, from another thread, for a context whose
 * thread ended inside a transaction). */
void eng_abort(struct txn *tx);

/* txn_sync(): wait until every committed transaction is durable. */
int eng_sync(txn_pool *p);

/* ---- one transaction over several pools (txn_join; docs/join.md): a
 * two-phase commit whose coordinator is the pool txn_begin ran on */

/* Whether the engine defines eng_prepare and eng_finish (1); 0, the
 * default, makes txn_join TXN_E_NOTSUP. */
extern const int eng_joins;

/* Who decides a prepared transaction: the coordinator pool's uuid, its
 * file (a full path) and layout name; and which transaction it is: its
 * version (seq, all 64 bits: never reused in its slot) and its context's
 * index (ctx: its slot). */
struct join_ref {
    uint64_t uuid;
    uint64_t seq;
    uint32_t ctx;
    const char *file;
    const char *layout;
};

/* Phase one of a participant: everything the transaction wrote (and its
 * allocator bits) durable, with its log and a LOG_PREPARE record naming
 * `ref`, all behind one barrier; the transaction stays uncommitted (a
 * crash now leaves recovery to ask join_decide). Sets ref->seq (never 0,
 * never the seq of another transaction of its context) and ref->ctx, so
 * that a coordinator keeps one entry per participant context. A
 * transaction that wrote nothing is not prepared: ref->seq 0. After it,
 * only eng_finish or eng_abort. */
int eng_prepare(struct txn *tx, struct join_ref *ref);

/* The committed bytes [off, off+n) of o, read with no transaction: a
 * participant's recovery reads its coordinator's join table so (api.c,
 * J2: in place, every entry is a committed one while the coordinator's
 * join_lock is held by the reader). The default reads the object in place
 * (undo's objects are their payload). */
void eng_read_committed(txn_pool *p, txn_obj *o, size_t off, void *dst, size_t n);

/* Phase two: the coordinator committed (its commit named ref->seq): the
 * prepared transaction commits, one store and barrier. Never fails. */
void eng_finish(struct txn *tx);

/* The front end's answer to recovery for a prepared transaction it finds
 * unsettled: 1 if its coordinator committed it, 0 if not (it rolls back),
 * or why the coordinator cannot tell (TXN_E_INDOUBT: the open of p, the
 * pool recovered, fails with it, naming the
 * coordinator's file: nothing is guessed). Opens the coordinator (a view
 * when the pool being recovered is one) unless this process has it open. */
int join_decide(txn_pool *p, const struct join_ref *ref);

/* A prepared transaction's record of its coordinator's names: ref's file
 * and layout, each NUL-ended, into buf (JOIN_NAMES_MAX bytes); returns the
 * bytes written, or 0 when a name is too long. join_names_get reads them
 * back from s (len bytes) into ref's file and layout (pointing into s):
 * 1 when they are well formed (an absolute file, a layout), else 0. One
 * format for every engine that prepares (log.c's LOG_PREPARE record,
 * redo1's prepare part). */
#define JOIN_NAMES_MAX (4096 + TXN_LAYOUT_MAX + 2)
size_t join_names_put(const struct join_ref *ref, char *buf);
int join_names_get(const char *s, size_t len, struct join_ref *ref);

/* ---- recovery, called by txn/format/pool.c only (pmtx's format) */

/* Recovery of one slot's last transaction, given its valid records in log
 * order. Must be idempotent (a crash during recovery recovers again), and
 * leave its effects flushed; the caller fences and invalidates the log.
 * The records were validated with eng_rec_valid first.
 * R2: the records may be those of a transaction that settled long ago
 * (committed or aborted; a log is rewound in memory only), whose objects
 * other threads have freed and reused since: recovery writes through a
 * record only while its transaction was unsettled at the crash, or where
 * the block it names is still that record's. */
int eng_recover(txn_pool *p, struct slot_hdr *slot, struct log_rec **recs,
                size_t n);

/* Check a record before recovery writes anything (TXN_E_CORRUPT). */
int eng_rec_valid(txn_pool *p, const struct log_rec *r);

/* Recovery of logs that are not log.c's (redo1 writes its own into the
 * slots' segment chains): after the slots' records were recovered, before
 * the allocator is opened. Must leave what it recovered durable, add the
 * slots it settled to the format's count (recovered_slots), and check
 * everything it relies on before writing anything (TXN_E_CORRUPT, with
 * pool_problem()). The default has nothing to do. */
int eng_recover_logs(txn_pool *p);

/* ---- what pmtx's format (txn/format/) offers the engines that log in it;
 * an engine with a format of its own calls none of it */

/* Config shared by engines, read once from the environment. */
struct txn_config {
    int alloc_eager; /* TXN_ALLOC_EAGER=1: the paper's cleanup barriers */
    int log_batch;   /* TXN_LOG_BATCH=0: log and fence at each write (the
                        papers); default 1: txn_open(TXN_RW) logs the whole
                        object and the records of a batch share one fence */
};
extern struct txn_config txn_cfg;

/* A block allocated or freed by the running transaction. */
struct tx_block {
    void *blk;
    size_t size; /* usable bytes */
};

/* Reserve a block for the transaction and remember it (volatile). */
int tx_reserve(struct txn *tx, size_t n, struct tx_block *out);

/* Give back the newest block tx_reserve() returned, when a later step of
 * the same allocation failed: else the transaction would commit it
 * allocated and unreachable. */
void tx_unreserve(struct txn *tx);

/* Remember a block to free at commit; TXN_E_INVAL if it is not a block
 * that is allocated (persistently or by this transaction) or is freed
 * twice (by this transaction or by another one still open). */
int tx_mark_free(struct txn *tx, void *blk, struct tx_block *out);

/* At commit, for an engine that gives the transaction's freed blocks back
 * itself, later (it copied them, and needs the lists no more): both lists
 * are emptied, and their blocks no longer count as reserved or freed by an
 * open transaction. The engine may give a freed block back at once: one
 * it allocated too is on both lists, and is then no longer either. */
void tx_take_blocks(struct txn *tx);

/* Forget the newest block tx_mark_free() took, when a later step of the
 * same free failed. */
void tx_unmark_free(struct txn *tx);

/* Is blk reserved by this transaction? */
int tx_is_new(const struct txn *tx, const void *blk);

/* Set the allocator's persistent bit of every block the transaction
 * reserved and clear that of every block it freed, then flush them if
 * `flush`; never fenced. Nothing when it has neither. */
void tx_apply_allocs(struct txn *tx, int flush);

/* The inverse of tx_apply_allocs(tx, 1), block by block, each flushed:
 * a rollback of allocator bits already applied. */
void tx_unapply_allocs(struct txn *tx);

/* Flush every block the transaction allocated (their contents, written in
 * place, become durable at the engine's next barrier). */
void tx_flush_new_blocks(struct txn *tx);

/* Usable size of the block starting at `blk`, or 0 if `blk` is not the
 * start of a block of the heap. `live` also requires its persistent bit. */
size_t alloc_block_size(txn_pool *p, const void *blk, int live);

/* The kinds of records an engine appends to its slot's log (the values
 * are on media, in the format's records). */
enum log_type {
    LOG_DATA = 1,   /* bytes at addr: old (undo) or new (redo) */
    LOG_ALLOC = 2,  /* block at addr of aux bytes was allocated */
    LOG_FREE = 3,   /* block at addr of aux bytes was freed */
    LOG_OBJ = 5,    /* object at addr opened for writing; aux: its copy */
    LOG_PREPARE = 6, /* the transaction is prepared (txn_join): addr: its
                        coordinator's uuid, aux: the context's
                        index (the record's version is the
                        transaction's: ref's seq), payload: the
                        coordinator's file and layout, each NUL-ended */
};

/* Largest payload of one record; engines split larger ranges. */
#define LOG_MAX_PAYLOAD (16u * 1024u)

/* Append a record of the running transaction (its version) to the
 * context's log, not flushed (tx_log_flush); the payload is copied from
 * `src` (NULL when len is 0). Growing the log into a new chunk costs one
 * barrier. Returns 0 and, when `out`, the record (tx_rec_get reads it),
 * or TXN_E_NOSPACE. */
int tx_log(struct txn *tx, uint32_t type, uint64_t addr, uint64_t aux, const void *src,
           uint32_t len, struct log_rec **out);

/* Flush what was appended since the last flush (no fence). */
void tx_log_flush(struct txn *tx);

/* Record the log's tail hint after a barrier (stored and flushed, not
 * fenced). */
void tx_log_set_tail(struct txn *tx);

/* Bytes appended to the context's log by the running transaction. */
size_t tx_log_used(const struct txn *tx);

/* Append one ALLOC or FREE record for b (flushed, not fenced). */
int tx_log_block(struct txn *tx, uint32_t type, const struct tx_block *b);

/* Append an ALLOC record per reserved block and a FREE record per freed
 * one (flushed, not fenced). */
int tx_log_allocs(struct txn *tx);

/* A slot's transaction state: with the version, one 8-byte word on media
 * (the format's), so that no crash can pair a state with another
 * transaction. */
#define SLOT_IDLE 0u
#define SLOT_COMMITTED 1u

/* Store the context's slot state word (the running transaction's version,
 * SLOT_*) and persist it: one barrier. The single 8-byte store is what
 * makes a commit durable. */
void tx_set_state(struct txn *tx, unsigned state);

/* Recovery: the slot's state if its word is that of transaction
 * `version` (SLOT_*), SLOT_IDLE if it is a later transaction's (the
 * records are stale, R2), else -1. */
int tx_slot_state(const struct slot_hdr *slot, uint64_t version);
/* The same, but the word's state bits whatever they are. */
int tx_slot_bits(const struct slot_hdr *slot, uint64_t version);

/* A record as recovery reads it (the format's record, not its layout). */
struct tx_rec {
    uint64_t version; /* of its transaction */
    uint32_t type;    /* enum log_type */
    uint32_t len;     /* payload bytes */
    uint64_t addr;
    uint64_t aux;
    const void *payload;
};
void tx_rec_get(const struct log_rec *r, struct tx_rec *out);
/* Whether r still holds the record the running transaction appended (its
 * sentinel and version): debug checks that nothing wrote over the log. */
int tx_rec_current(const struct txn *tx, const struct log_rec *r);

/* Recovery helpers for ALLOC/FREE records: redo or roll back one. */
void tx_redo_alloc_rec(txn_pool *p, const struct log_rec *r);
void tx_undo_alloc_rec(txn_pool *p, const struct log_rec *r);
int tx_alloc_rec_valid(txn_pool *p, const struct log_rec *r);
/* The common record check of a log of in-place ranges and allocator
 * records: a DATA record's range lies in the pool, an ALLOC/FREE record
 * names a real allocator block; anything else is corrupt. */
int tx_rec_valid(txn_pool *p, const struct log_rec *r);

/* Validate an ALLOC/FREE record's block before recovery applies it: a
 * block boundary of a run of its class, whatever the chunk is now (a run
 * whose format was not durable yet, or one that became FREE and was taken
 * for something else since: alloc_apply() leaves such a block alone). */
int alloc_record_valid(txn_pool *p, uint64_t blk, uint64_t size);

/* A prepared transaction (eng_prepare): its seq and ctx into `ref`, and
 * the LOG_PREPARE record naming ref (not flushed). */
void tx_join_seq(const struct txn *tx, struct join_ref *ref);
int tx_log_prepare(struct txn *tx, const struct join_ref *ref);
/* Recovery: whether r is a well-formed LOG_PREPARE record, and the
 * coordinator it names (ref's strings point into the record). */
int tx_prepare_rec_get(const struct log_rec *r, struct join_ref *ref);

/* Whether [a, a + n) lies in the pool's heap. */
int tx_pool_contains(txn_pool *p, const void *a, size_t n);

/* The pool's count of opens so far: it tags volatile-only fields an
 * engine keeps in objects (cow: the writer of a wrapper). */
uint64_t tx_pool_boot(txn_pool *p);

/* Blocks the running transaction reserved and freed so far. */
size_t tx_block_count(const struct txn *tx);

/* The blocks the running transaction reserved and freed so far, oldest
 * first: arrays valid until its next call that reserves or frees. */
const struct tx_block *tx_allocs(const struct txn *tx, size_t *n);
const struct tx_block *tx_frees(const struct txn *tx, size_t *n);

/* ---- what pmtx's format offers the engines that keep logs of their own
 * in its slots (redo1: a ring of parts; incll: an epoch's records) and
 * give freed blocks back themselves, later (tx_take_blocks) */

/* The pool's log slots (as many as p->max_ctx). */
size_t tx_pool_slots(txn_pool *p);

/* The eight mutable words of the pool's header that the engine owns
 * (incll: its durable epoch and failed epochs; redo1: its version floor),
 * zero in a new pool; the engine stores and persists them itself. */
uint64_t *tx_pool_eng_words(txn_pool *p);

/* The first address of the heap, and the bytes of the heap the pool has
 * now (a growth raises it). */
char *tx_pool_heap(txn_pool *p);
size_t tx_pool_heap_bytes(txn_pool *p);

/* Count a slot whose transaction the engine's recovery settled (pool.c
 * reports how many; eng_recover_logs). */
void tx_recovered_slot(txn_pool *p);

/* A cache of free blocks, the format's (opaque): where blocks the engine
 * gives back go, a batch at a time, rather than one by one under the
 * allocator's lock. tx_cache(tx) is the context's own (drained at its
 * detach); one of tx_cache_new's is the engine's to drain and free. */
struct alloc_cache;
struct alloc_cache *tx_cache(struct txn *tx);
struct alloc_cache *tx_cache_new(void);
void tx_cache_free(txn_pool *p, struct alloc_cache *c); /* drained first */
/* Give back a block no transaction holds any more; any thread, but one
 * at a time per cache. */
void tx_cache_release(txn_pool *p, struct alloc_cache *c, void *blk);
/* Every block of c back to the pool's shared lists. */
void tx_cache_drain(txn_pool *p, struct alloc_cache *c);

/* Set (`set`) or clear the allocator's persistent bit of the block blk
 * of `size` usable bytes (as an ALLOC or FREE record names it), flushed
 * if `flush` (not fenced); idempotent. */
void tx_block_apply(txn_pool *p, uint64_t blk, uint64_t size, int set, int flush);
/* Flush the allocator's persistent words of that block (not fenced). */
void tx_block_flush_meta(txn_pool *p, uint64_t blk, uint64_t size);
/* fn for every persistently allocated block (its start, usable size). */
void tx_foreach_live(txn_pool *p, void (*fn)(void *blk, size_t size, void *arg), void *arg);

/* A slot's chain of log segments, raw, for an engine that writes its own
 * log there (redo1): a segment is named by its first usable byte; `cap`:
 * its usable bytes. The slot's first segment is inside the slot; the
 * others are heap chunks of tx_seg_chunk_cap usable bytes each, linked
 * after it, which every open keeps as the slot's (log_chain). */
char *tx_slot_seg(txn_pool *p, size_t idx, size_t *cap);
/* The segment linked after seg, or NULL at the chain's end. */
char *tx_seg_next(const char *seg);
/* A fresh chunk for a chain (one barrier: its link word zero and durable
 * before the chunk counts as a log's), or TXN_E_NOSPACE. */
int tx_seg_new(txn_pool *p, char **seg);
/* Link next after seg: stored and flushed, not fenced. */
void tx_seg_link(char *seg, const char *next);
extern const size_t tx_seg_chunk_cap;

/* A slot's log in the format's records (log.h), written by an engine with
 * its own versions (incll: its epochs); opaque. The log starts at the
 * slot's first segment; rewound, it writes there again (the old records
 * stay readable until overwritten: versions tell them apart). */
struct log;
struct log *tx_slot_log_new(txn_pool *p, size_t idx);
void tx_slot_log_free(struct log *l);
/* Append a record of version v (not flushed); as tx_log. */
int tx_slot_log_append(struct log *l, uint64_t v, uint32_t type, uint64_t addr, uint64_t aux,
                       const void *src, uint32_t len);
void tx_slot_log_flush(struct log *l);
void tx_slot_log_rewind(struct log *l);
/* Bytes appended since the last rewind. */
size_t tx_slot_log_used(const struct log *l);
/* Recovery: slot idx's valid records (struct log_rec * items appended to
 * recs): those pool.c's open already validated when it has them, else
 * scanned (log_scan); 0 or TXN_E_CORRUPT, TXN_E_NOMEM. Writes nothing. */
int tx_slot_recs(txn_pool *p, size_t idx, struct vec *recs);

/* Payload bytes of an object that is a heap block with `hdr` bytes of
 * engine header in front of its payload; 0 if it is no block. */
static inline size_t tx_block_payload(txn_pool *p, const void *o, size_t hdr)
{
    size_t s = alloc_block_size(p, o, 0);
    return s > hdr ? s - hdr : 0;
}

#endif
