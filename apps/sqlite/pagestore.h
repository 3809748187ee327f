/* pagestore.h - a file of bytes kept in a pmtx pool in 4 KiB blocks: read
 * at its last committed state, changed only by a staged write set that
 * commits as one txn.h transaction. The SQLite VFS (vfs.c) keeps a main
 * database file in one; this layer knows nothing of SQLite.
 *
 * Threads: any thread may call pgs_read and pgs_size at any time. The
 * staging calls (pgs_stage_*, pgs_commit, pgs_discard) belong to one
 * writer at a time, which the caller serialises (the VFS: the connection
 * holding SQLite's RESERVED lock); they may come from different threads,
 * since each txn.h transaction starts and ends inside one call.
 *
 * Errors are 0 or a negative TXN_E_* code; pgs_why() then says what was
 * wrong in words. On any error nothing committed has changed. */
#ifndef PMTX_PAGESTORE_H
#define PMTX_PAGESTORE_H

#include <stddef.h>
#include <stdint.h>

#include "txn.h"

#define PGS_LAYOUT "pmtx-sqlite" /* the pool's layout name (txn_pool_create) */
#define PGS_BLOCK 4096u          /* bytes per block: SQLite's default page */
#define PGS_START ((size_t)4 << 20) /* bytes a new pool starts with: it grows */

typedef struct pgs pgs;

struct pgs_opts {
    size_t pool_size; /* bytes a new pool starts with (0: PGS_START, or
                         the least txn_pool_min_size takes) */
    size_t pool_max;  /* bytes a new pool may grow to (0: txn.h's default,
                         TXN_POOL_MAX; pmdk: its size) */
    int create;       /* create the pool file when it does not exist */
    int view;         /* open a private view (txn_pool_view): the file is
                         never written, and pgs_commit stays in memory */
};

/* Open the pool file `path` (creating it if o->create and it does not
 * exist; *created then says so) and load its block map. The pool's own
 * refusals (TXN_E_NOTPOOL, TXN_E_LAYOUT, TXN_E_CORRUPT, TXN_E_TRUNC,
 * TXN_E_BUSY, ...; the file untouched), or TXN_E_CORRUPT / TXN_E_LAYOUTVER
 * when the blocks' map in it is damaged or of another version. */
int pgs_open(const char *path, const struct pgs_opts *o, pgs **out, int *created);

/* Close the store: staged changes are dropped, committed ones durable. */
void pgs_close(pgs *s);

/* What the last failed call of this thread found wrong (never NULL). */
const char *pgs_why(void);

/* The file's size in bytes: as committed, or (staged) as the writer's
 * staged changes leave it. */
uint64_t pgs_size(pgs *s, int staged);

/* Copy n bytes at `off` into dst, as committed or (staged) as the writer
 * sees them; bytes past the end read as zero. *got: how many of the n
 * were inside the file. */
int pgs_read(pgs *s, int staged, void *dst, size_t n, uint64_t off, size_t *got);

/* Stage a write of n bytes at `off` (the file grows to hold them; a gap
 * reads as zeros) or a change of the file's size. Only memory is used:
 * TXN_E_NOMEM, or TXN_E_NOSPACE past what the pool's map can address. */
int pgs_stage_write(pgs *s, const void *src, size_t n, uint64_t off);
int pgs_stage_truncate(pgs *s, uint64_t size);

/* Apply every staged change in one transaction and commit it (durable as
 * txn_commit is for the engine), then drop the staged changes. On error
 * the pool is as it was and the staged changes are dropped too:
 * TXN_E_NOSPACE or TXN_E_LOGFULL (pool or log full), TXN_E_NOMEM, ... */
int pgs_commit(pgs *s);

/* pgs_commit of the n stores (each with one writer, the caller's) as one
 * transaction over their pools (txn_join): all or none, whatever crashes;
 * a store with nothing staged takes no part; stores on one pool (pgs_adopt's)
 * share that pool's transaction. Where the engine cannot join pools
 * (TXN_E_NOTSUP), or one of them is pgs_adopt's with a commit hook, they
 * commit one after the other, each as pgs_commit. At most PGS_COMMIT_MAX
 * stores. */
#define PGS_COMMIT_MAX 16
int pgs_commit_many(pgs **s, size_t n);

/* Drop the staged changes (a rollback: the pool never saw them). */
void pgs_discard(pgs *s);

/* Make every commit durable (txn_sync: incll waits for its epoch's end;
 * a no-op for engines durable at commit). */
int pgs_sync(pgs *s);

/* ---- a store in a pool its program opened itself. For the crash
 * simulator (tests/crashsim/wl_sqlite.c), whose pool is created, traced
 * and crashed by its driver, and holds other objects too; a program that
 * only uses the VFS never calls these. */

struct pgs_host {
    txn_pool *pool;     /* open, and left open by pgs_close */
    txn_obj *root;      /* stands for the pool's root: an object of at
                           least PGS_ROOT_SIZE bytes; all zero, it gets a
                           fresh map, in one transaction */
    uint64_t max_bytes; /* a fresh map addresses at least this many bytes */
    /* when not NULL, ends pgs_commit's transaction instead of txn_commit
     * (and must end it, as txn_commit does) */
    int (*commit)(txn *tx, void *arg);
    void *commit_arg;
};

#define PGS_ROOT_SIZE 64

/* Open the store kept under h->root in the open pool h->pool: as
 * pgs_open, with no file of its own. */
int pgs_adopt(const struct pgs_host *h, pgs **out);

/* Call fn on every object of the store's map, the root excepted: the
 * directory, the leaves, the blocks; checks P3 and P4 (pagestore.c) on
 * the way. 0, fn's nonzero return, or TXN_E_CORRUPT (pgs_why() says
 * which). Committed state only: no writer may have anything staged. */
int pgs_objects(pgs *s, int (*fn)(txn_obj *o, void *arg), void *arg);

#endif
