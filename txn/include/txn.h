/* txn.h - pmtx: failure-atomic transactions on persistent memory.
 *
 * One API, several engines. A program is linked against exactly one engine
 * library (libtxn-undo, libtxn-redo, ...; `pkg-config --libs txn-undo`) and
 * this header is all it sees. txn_engine_name() tells which engine it got.
 *
 * Model
 * -----
 * A pool is a file holding persistent objects. Objects are named by
 * `txn_obj *` handles; a handle is a plain address that stays valid across
 * runs (the pool is always mapped at the address it was created at), so
 * persistent structures store handles directly, in their payload bytes.
 *
 * Every change a transaction makes to persistent data goes through
 * txn_write()/txn_write_u64() (or txn_alloc()/txn_free()); data reached
 * through txn_open() may be READ directly where txn_open() says so, never
 * written. Transactions of different threads run concurrently on disjoint
 * data; the application brings its own (volatile) locks and releases them
 * from a txn_defer() action, as two-phase locking wants.
 *
 * Errors
 * ------
 * Every call that can fail returns 0 or a negative TXN_E_* code, never an
 * errno value and never by aborting the process: a bad file, a full pool or
 * a wrong argument is reported, and nothing persistent is lost.
 * txn_strerror() names each code. A TXN_* setting of the environment that
 * is malformed or out of range (TXN_PDOM=7) makes every pool create, open,
 * view and inspection return TXN_E_INVAL (docs/settings.md lists them).
 *
 * Durability
 * ----------
 * undo, redo, redo1, cow, pmdk: a transaction is durable when txn_commit()
 *        returns 0.
 * incll: failure-atomic at once, durable when its epoch has been flushed;
 *        txn_sync() waits for that.
 * none:  nothing is ever durable (a baseline for comparisons).
 * After a crash, opening the pool recovers it to a state that holds exactly
 * the durable transactions: no part of any other transaction is visible.
 */
#ifndef PMTX_TXN_H
#define PMTX_TXN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes: a reserved negative range, never clashing with errno */
#define TXN_E_FIRST    (-30800)
#define TXN_E_INVAL    (-30800) /* an argument is out of range or malformed */
#define TXN_E_NOMEM    (-30801) /* volatile memory (malloc) ran out */
#define TXN_E_NOSPACE  (-30802) /* the pool is full */
#define TXN_E_IO       (-30803) /* a system call on the pool file failed */
#define TXN_E_NOENT    (-30804) /* the pool file does not exist */
#define TXN_E_EXIST    (-30805) /* the pool file exists already (create) */
#define TXN_E_NOTPOOL  (-30806) /* the file is not a pmtx pool (magic) */
#define TXN_E_VERSION  (-30807) /* pool format version not supported */
#define TXN_E_CORRUPT  (-30808) /* header or log checksum mismatch */
#define TXN_E_TRUNC    (-30809) /* file shorter than the pool it holds */
#define TXN_E_LAYOUT   (-30810) /* pool was created with another layout */
#define TXN_E_ENGINE   (-30811) /* pool was written by another engine */
#define TXN_E_BUSY     (-30812) /* pool open elsewhere, or address in use */
#define TXN_E_NESTED   (-30813) /* this thread already runs a transaction */
#define TXN_E_THREADS  (-30814) /* more threads than the pool has log slots */
#define TXN_E_LOGFULL  (-30815) /* transaction too large for its log */
#define TXN_E_CONFLICT (-30816) /* object already opened for writing by
                                   another transaction (cow: one writer) */
#define TXN_E_STATE    (-30817) /* call not allowed in the transaction's
                                   state (e.g. write after a failed call) */
#define TXN_E_NOTSUP   (-30818) /* not supported by this engine */
#define TXN_E_LAYOUTVER (-30819) /* pool holds another layout version and
                                    no migration leads to the program's
                                    (txn_layout.h) */
#define TXN_E_TYPESIG  (-30820) /* a persistent type's size or fields
                                   differ from what the pool recorded */
#define TXN_E_INDOUBT  (-30821) /* a transaction prepared in the pool
                                   (txn_join) waits for a coordinator pool
                                   that cannot be opened */
#define TXN_E_LAST     (-30821)

/* A short English description of a TXN_E_* code or of an errno value. */
const char *txn_strerror(int err);

/* What to print for `err` returned by a txn_pool_* call of this thread:
 * when it is the code of the thread's last refused pool create, open, view
 * or inspection, txn_strerror(err) followed by what was refused and why
 * ("pool is corrupt: log slot 3: damaged chain, tail or record";
 * "invalid argument: TXN_PDOM=7: not 0, 1 or 2"); else txn_strerror(err).
 * The text stays valid until the thread's next txn_pool_* call. */
const char *txn_pool_strerror(int err);

/* txn_read, txn_write and their _u64 forms are inline functions (the end
 * of this file); the library also exports them as plain functions, for
 * bindings that cannot use a C header. Define TXN_NO_INLINE before
 * including this file to call those instead (to interpose them, say). */
#ifdef TXN_NO_INLINE
#define TXN__API
#else
#define TXN__API static inline
#endif
/* txn_commit is inline too, but not where the crash simulator's tracing
 * is on (PMTX_TRACE): its recorder and tests wrap the exported call. */
#if defined(TXN_NO_INLINE) || defined(PMTX_TRACE)
#define TXN__QAPI
#else
#define TXN__QAPI static inline
#define TXN__QUICK 1
#endif

/* ---- handles */
typedef struct txn_pool txn_pool; /* an open pool */
typedef struct txn txn;           /* a running transaction (one per thread) */
typedef struct txn_obj txn_obj;   /* a persistent object; never dereference
                                     it: use txn_open/txn_read/txn_write */

/* The engine this program is linked with: "undo", "redo", "redo1", "cow",
 * "incll", "none" or "pmdk". */
const char *txn_engine_name(void);

/* ---- pools */

#define TXN_LAYOUT_MAX 63    /* bytes of a layout name */
#define TXN_MAX_THREADS 1024 /* txn_pool_opts.threads */
#define TXN_META_SIZE 64     /* payload bytes of txn_meta_root() */

/* Options for txn_pool_create(); zero means the default. */
typedef struct txn_pool_opts {
    size_t size;       /* bytes the pool starts with (default 64 MiB, at
                          least txn_pool_min_size()) */
    size_t root_size;  /* payload bytes of the root object (default 64);
                          zero-filled at creation */
    unsigned threads;  /* log slots = max threads in transactions at once
                          (default 64, max 1024) */
    size_t log_size;   /* bytes of each slot's first log chunk (default
                          64 KiB); logs grow by heap chunks beyond it */
    size_t max_size;   /* bytes the pool may grow to, from `size` to
                          TXN_POOL_MAX (the default); max_size = size: a
                          pool that does not grow. An allocation that
                          finds no room grows the file and its mapping in
                          place (objects never move); a crash during a
                          growth leaves the pool at its old size or its
                          new one. An open pool holds the addresses it
                          uses (1 GiB at a time), not its maximum: it
                          grows until another open pool's addresses
                          follow it ("pool is full" then). The chunk table
                          for the maximum is a hole of the file: its
                          length (ls -l) is up to max_size / 8192 more
                          than it holds (16 MiB at TXN_POOL_MAX). pmdk:
                          libpmemobj's pools do not grow: made at a given
                          max_size at once; without one, at `size`. */
} txn_pool_opts;

/* The most a pool may grow to: pools live in a range of 448 GiB of
 * addresses that every pool of a process shares (between the sanitizers'
 * ranges and the kernel's mmap area: txn/format/pool.c), each at a base
 * chosen at creation. 64-bit programs only. */
#define TXN_POOL_MAX ((size_t)128 << 30)

/* Create the pool file `path` (it must not exist) for `layout` (a name of
 * at most 63 bytes that every later open must repeat), then open it.
 * A relative path is taken under $TXN_POOL_DIR, default /dev/shm.
 * Returns 0 and *out, or TXN_E_EXIST, TXN_E_INVAL, TXN_E_IO, TXN_E_BUSY,
 * TXN_E_NOENT (its directory does not exist), TXN_E_NOSPACE (root does not
 * fit, or the filesystem has no room). The file appears under `path`
 * only once complete (made under `path`.pmtx-new and renamed), so a
 * crash during the call leaves no pool, never a broken one; nothing is
 * left on failure. Durable on return. */
int txn_pool_create(const char *path, const char *layout,
                    const txn_pool_opts *opts, txn_pool **out);

/* The smallest file size txn_pool_create() takes with `opts` (NULL or
 * zero fields: the defaults) on the linked engine, or 0 when opts are
 * invalid. pmtx's format: room for the threads' log slots and a heap of 16
 * chunks of 64 KiB (5,308,416 bytes at the defaults); pmdk: 16 MiB, what
 * libpmemobj needs to serve objects of several sizes (docs/pool-tool.md). */
size_t txn_pool_min_size(const txn_pool_opts *opts);

/* The bytes an open pool has now (its file, which a growth lengthens) and
 * the most it may grow to (txn_pool_opts.max_size; = *size when it does
 * not grow). Either pointer may be NULL. */
void txn_pool_size(txn_pool *p, size_t *size, size_t *max_size);

/* Give the pool's free space back to the filesystem: the bytes of every
 * free 64 KiB chunk of its heap, wherever it lies, become a hole of the
 * file (the pool keeps its size and addresses, and takes the chunks again
 * when it needs them: the filesystem gives the space back then). Empty
 * runs of blocks count as free; free blocks among blocks in use do not:
 * objects never move. Runs while other threads run transactions, in steps
 * of 64 MiB each holding the allocator for the time of its holes; safe at
 * any crash (a free chunk's bytes mean nothing). Not in a transaction
 * (TXN_E_STATE). *returned (may be NULL): the bytes the file gave back.
 * pmdk, or a filesystem without holes: TXN_E_NOTSUP. `txn-pool shrink
 * FILE` does it to a closed pool. */
int txn_pool_trim(txn_pool *p, size_t *returned);

/* The file a pool path names: `path` itself when it is absolute, else
 * `path` under $TXN_POOL_DIR (default /dev/shm), as every txn_pool_* call
 * resolves it. Writes the NUL-terminated name to out (cap bytes).
 * TXN_E_INVAL if path is NULL or empty or the name does not fit. */
int txn_pool_path(const char *path, char *out, size_t cap);

/* Open an existing pool, run recovery, and return it in *out.
 * Checks, before writing anything: TXN_E_NOENT (no file), TXN_E_NOTPOOL
 * (not a pmtx pool), TXN_E_VERSION, TXN_E_CORRUPT (header or log damaged),
 * TXN_E_TRUNC (file shorter than the pool), TXN_E_LAYOUT (other layout),
 * TXN_E_ENGINE (other engine), TXN_E_BUSY (opened by another process, or
 * its address range is taken in this one). On any error the file is left
 * exactly as it was. Recovery rolls back transactions that were running
 * at the crash (undo), replays committed ones (redo), and so on per engine;
 * it is itself crash-safe: a crash during recovery recovers again. */
int txn_pool_open(const char *path, const char *layout, txn_pool **out);

/* txn_pool_open() on a private copy-on-write view of the file: the open
 * checks and recovers, counts the boot and runs transactions as usual,
 * but every byte it writes stays in this process's memory and is gone at
 * txn_pool_close(); the file is never written. What a check that must
 * leave the file as it was looks at: the pool as the next real open will
 * find it, interrupted transactions recovered. */
int txn_pool_view(const char *path, const char *layout, txn_pool **out);

/* Close a pool. No transaction of any thread may be running on it, and no
 * other call on it (txn_sync included) may be in progress.
 * Everything committed is durable (engines with deferred durability sync
 * first). A pool that coordinated joined transactions (txn_join) first
 * frees, in one transaction, its join table's entries whose parts have
 * settled. Handles of the pool become invalid. */
void txn_pool_close(txn_pool *p);

/* The root object, created with the pool: the entry point from which a
 * program finds all its other objects. */
txn_obj *txn_root(txn_pool *p);

/* The meta object, created with the pool like the root: TXN_META_SIZE
 * zero-filled bytes reserved for libraries built on this API (txn_layout.h
 * keeps its layout record there). Programs keep their data under
 * txn_root(). Neither can be freed. */
txn_obj *txn_meta_root(txn_pool *p);

/* Payload size in bytes of an object (at least what was asked for). */
size_t txn_obj_size(txn_pool *p, const txn_obj *o);

/* ---- inspection: what a pool file holds, read without writing a byte
 * (the pool tool, txn-pool, is built on it) */

#define TXN_INFO_CLASSES 64 /* entries of txn_pool_info.classes */
#define TXN_INSPECT_RECOVER 1 /* txn_pool_inspect: recovery is pending */

typedef struct txn_pool_info {
    char format[16];         /* "pmtx", or "libpmemobj" (pmdk) */
    unsigned format_version; /* of that format */
    char engine[16];         /* the engine that writes the pool */
    char layout[TXN_LAYOUT_MAX + 1];
    uint64_t size;           /* bytes of the pool now */
    uint64_t max_size;       /* bytes it may grow to (= size: it does not) */
    uint64_t heap_size;      /* bytes of its heap */
    uint64_t heap_used;      /* of it, in live objects */
    uint64_t heap_free;      /* of it, free for new objects */
    uint64_t heap_logs;      /* of it, in log chunks (pmtx) */
    uint64_t free_chunks;    /* of heap_free, in free chunks any size may
                                take (pmtx) */
    uint64_t free_extent;    /* the longest stretch of free chunks: the
                                largest object that fits (pmtx) */
    uint64_t objects;        /* live objects, the root and meta included */
    unsigned nclasses;       /* by size class: classes[i] */
    struct {
        uint64_t size;  /* bytes per object of the class (at most) */
        uint64_t count; /* live objects in it */
        uint64_t free;  /* bytes of its free blocks, which only objects of
                           its size take (pmtx) */
    } classes[TXN_INFO_CLASSES];
    unsigned slots;          /* log slots: threads in transactions at once */
    unsigned slots_used;     /* slots that have run a transaction (pmtx) */
    unsigned slots_pending;  /* slots whose last transaction recovery
                                settles at the next open (pmtx) */
    uint64_t opens;          /* times the pool was opened (pmtx) */
    char problem[256];       /* what the verdict is about, in words */
} txn_pool_info;

/* Describe the pool file `path` in *info and return its verdict: 0 when
 * it is consistent, TXN_INSPECT_RECOVER when it is consistent once the
 * next open has recovered the transactions a crash interrupted (the
 * figures describe it as recovered), or what txn_pool_open() would refuse
 * it with: TXN_E_CORRUPT (info->problem names the damaged part: header,
 * log slot N, chunk table entry N, ...), TXN_E_NOTPOOL, TXN_E_TRUNC,
 * TXN_E_VERSION, TXN_E_ENGINE (another engine's pool; info->engine names
 * it), TXN_E_BUSY, TXN_E_NOENT, TXN_E_IO. Checks what an open checks, and
 * recovers on a private view (txn_pool_view()); the file is not written. */
int txn_pool_inspect(const char *path, txn_pool_info *info);

/* ---- transactions */

/* A transaction belongs to the thread that began it: txn_commit and
 * txn_abort from another thread are refused (TXN_E_INVAL, nothing done).
 *
 * Begin a transaction on `p` for the calling thread and return it in *tx.
 * TXN_E_NESTED if this thread already runs one on `p`; TXN_E_THREADS if all
 * log slots are taken. A thread keeps its slot until it exits or the pool
 * is closed. On failure *tx is NULL. Inline (txn_inline.h). */
TXN__API int txn_begin(txn_pool *p, txn **tx);

/* Commit. On 0 the transaction is durable (see Durability), its deferred
 * TXN_ON_COMMIT and TXN_ON_END actions have run, and `tx` is gone.
 * On error the transaction has been rolled back as by txn_abort() (its
 * TXN_ON_ABORT actions ran): TXN_E_STATE if an earlier call of it failed
 * (txn_last_error() says which), TXN_E_NOSPACE/TXN_E_LOGFULL if its log
 * could not grow. Inline where nothing but the end of the transaction is
 * left to do (txn_inline.h). */
TXN__QAPI int txn_commit(txn *tx);

/* Roll back every change of the transaction, release its allocations,
 * cancel its frees, run TXN_ON_ABORT and TXN_ON_END actions. `tx` is gone. */
void txn_abort(txn *tx);

/* Access modes for txn_open(). */
#define TXN_RO 0
#define TXN_RW 1

/* Open `o` in this transaction and return the address of the payload the
 * transaction should READ: the object in place for undo, redo and pmdk,
 * the private copy for cow with TXN_RW. Writes still go through txn_write.
 * TXN_RW declares that the transaction will write `o`: undo and incll log
 * the whole object then, and the objects a transaction opens TXN_RW before
 * writing any of them share one persist barrier (TXN_LOG_BATCH=0: a
 * barrier each, at the first write, as in the papers); later writes to
 * them log nothing. Opening the objects to write first is the cheap order.
 * For redo, direct reads through the pointer are valid only for bytes this
 * transaction has not written (read them with txn_read instead).
 * Returns NULL on error: NULL/foreign object, or (cow) another transaction
 * holds it open for writing; txn_last_error(tx) then says which. */
void *txn_open(txn *tx, txn_obj *o, int mode);

/* One transaction over several pools. Join `other` to the transaction
 * `tx` (begun by txn_begin on its coordinator pool): a transaction of the
 * calling thread begins on `other` (*part, when part is not NULL), and
 * from then on tx reaches the objects of both: txn_open, txn_read,
 * txn_write and txn_free on tx take an object of `other` to *part (which
 * takes them too; txn_alloc in `other` goes through *part). txn_commit(tx)
 * commits all the joined pools as one, txn_abort(tx) rolls all back;
 * txn_commit and txn_abort of *part are refused (TXN_E_INVAL, nothing
 * done), and *part is gone with tx. Joining a pool twice gives the same
 * part. TXN_E_NOTSUP on an engine that cannot: incll, whose transactions
 * become durable only when their epoch ends, which also makes them
 * permanent, so a part can never be durable yet revocable as a prepared
 * one must be; none (no durable log) and pmdk (its pools have no uuid).
 * TXN_E_NOTSUP too for a pool without a uuid, or when either pool is a
 * view (txn_pool_view: its writes never reach the file); TXN_E_INVAL for
 * tx's own pool, a part, or a transaction of another thread; txn_begin's
 * errors on `other`.
 *
 * All or nothing after a crash: the commit is two-phase. Each part that
 * wrote something is first prepared (durable, its log naming the
 * coordinator's file, layout, uuid and a number, seq); then the
 * coordinator's transaction commits with, in its pool's join table (kept
 * under txn_meta_root(), word 7), the seq of each part; then the parts
 * commit. The rule: recovery of a pool that finds a prepared, unsettled
 * part opens its coordinator (or uses it when this process has it open,
 * not as a view),
 * which recovers on its own first, and keeps the part if the coordinator's
 * table holds its seq, else rolls it back. A coordinator that cannot be
 * opened (gone, moved, open in another process, another pool under its
 * name) fails the open with TXN_E_INDOUBT, txn_pool_strerror() naming it:
 * nothing is guessed. Joined commits on one coordinator pool are
 * serialised. The table holds 256 participant contexts (pool and thread
 * context); an entry is freed once its part has settled, and a commit
 * that finds none free fails TXN_E_NOSPACE, rolled back: only entries of
 * parts still finishing, or left by a crash while their participant is
 * not open in this process, stay taken. docs/join.md has the details. */
int txn_join(txn *tx, txn_pool *other, txn **part);

/* The pool a transaction runs on. */
txn_pool *txn_pool_of(const txn *tx);

/* The error of the last failed call of this transaction, or 0. */
int txn_last_error(const txn *tx);

/* Copy n bytes at offset `off` of o's payload into dst, as this transaction
 * sees them (its own writes included). TXN_E_INVAL if off+n is past the
 * payload. Inline (txn_inline.h). */
TXN__API int txn_read(txn *tx, txn_obj *o, size_t off, void *dst, size_t n);

/* Write n bytes from src at offset `off` of o's payload. Visible to this
 * transaction at once, to others after commit, durable per Durability.
 * TXN_E_INVAL (range), TXN_E_LOGFULL / TXN_E_NOSPACE (log cannot grow),
 * TXN_E_CONFLICT (cow). After an error the transaction can only abort.
 * Inline (txn_inline.h). */
TXN__API int txn_write(txn *tx, txn_obj *o, size_t off, const void *src, size_t n);

/* 8-byte forms of txn_read/txn_write; off must be 8-byte aligned. Inline. */
TXN__API int txn_read_u64(txn *tx, txn_obj *o, size_t off, uint64_t *v);
TXN__API int txn_write_u64(txn *tx, txn_obj *o, size_t off, uint64_t v);

/* Allocate an object with n payload bytes (zero-filled). It exists only if
 * the transaction commits; an abort or a crash before commit releases it.
 * TXN_E_NOSPACE when the pool has no room for it, TXN_E_INVAL for n == 0.
 * Not an error of the transaction: it may go on and commit. */
int txn_alloc(txn *tx, size_t n, txn_obj **out);

/* Free `o` when the transaction commits (an abort cancels it). Freeing the
 * root, a foreign or an already freed object is TXN_E_INVAL. */
int txn_free(txn *tx, txn_obj *o);

/* When a deferred action runs. */
#define TXN_ON_COMMIT 1 /* after a successful commit */
#define TXN_ON_ABORT  2 /* after an abort (or failed commit) */
#define TXN_ON_END    3 /* either way: lock release */

/* Run fn(arg) when the transaction ends as `when` says, after its effects
 * are in place (after durability for TXN_ON_COMMIT, except incll: after the
 * commit, before the epoch is flushed). Actions run in registration order. */
int txn_defer(txn *tx, int when, void (*fn)(void *), void *arg);

/* Wait until every transaction committed by any thread before the call is
 * durable. Immediate for engines that are durable at commit. */
int txn_sync(txn_pool *p);

/* ---- statistics, per calling thread, cumulative since thread start or
 * the last txn_stats_reset(). Barrier and line counts are exact: they count
 * what the algorithm issues at every persistence domain (at PDOM 2 a
 * barrier costs nothing but is still counted). */
typedef struct txn_stats {
    uint64_t commits;       /* transactions committed */
    uint64_t aborts;        /* transactions rolled back */
    uint64_t barriers;      /* persist barriers (flushes + fence) */
    uint64_t lines_flushed; /* cache lines written back */
    uint64_t log_bytes;     /* bytes appended to persistent logs */
    uint64_t raw_lookups;   /* redo: reads that had to search the log for
                               the transaction's own writes */
    uint64_t bytes_stored;  /* bytes stored to pools: data, logs and
                               allocator metadata (pmdk: only the stores
                               libpmemobj makes through libpmem) */
} txn_stats;

void txn_stats_get(txn_stats *out);
void txn_stats_reset(void);

/* The persistence domain emulated by this process (TXN_PDOM, default 1),
 * its barrier latency in ns, and the flush instruction in use ("clwb",
 * "clflushopt", "clflush" or "none"), as read when the library was
 * loaded; a malformed TXN_PDOM or TXN_PDOMn_NS reads as its default here
 * (these never fail), and the pool calls refuse it. */
int txn_pdom(void);
unsigned txn_pdom_ns(void);
const char *txn_flush_name(void);

/* The inline access path: private, in a header of its own. */
#include "txn_inline.h"

#ifdef __cplusplus
}
#endif
#endif /* PMTX_TXN_H */
