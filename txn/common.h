/* common.h - helpers every engine library shares (common.c). */
#ifndef PMTX_COMMON_H
#define PMTX_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* What a pool format found wrong in a file, in words ("chunk table entry
 * 12: unknown kind 9"), for the calling thread's last refused open or
 * inspection; the format sets it where it refuses. pool_problem("") clears
 * it. */
void pool_problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *pool_problem_text(void);
/* A txn_pool_* call of the front end returns `rc`: a failure is recorded,
 * with the problem text, for txn_pool_strerror(). Returns rc. */
int pool_refused(int rc);
/* Refuse a file with `rc`, saying why. */
#define REFUSE(rc, ...) (pool_problem(__VA_ARGS__), (rc))

/* Whether the bytes [off, end) of the file fd differ from mem[off, end)
 * (a view of it: what its recovery changed): 1 or 0, or TXN_E_IO,
 * TXN_E_NOMEM. */
int pool_bytes_differ(int fd, const char *mem, size_t off, size_t end);

/* Open a pool file (open(2) flags; mode 0644 when created) under an
 * exclusive flock: TXN_E_BUSY while another open of it, in this process or
 * another, holds it; TXN_E_NOENT, TXN_E_EXIST, TXN_E_IO (anything but a
 * regular file, checked before it is read: a FIFO never blocks). Each
 * refusal names the file and its cause (REFUSE). */
int pool_lock_file(const char *file, int flags, int *fd);

/* A system call on the pool file `file` failed with errno e: the TXN_E_*
 * code for it (TXN_E_NOENT, TXN_E_EXIST, TXN_E_NOMEM, TXN_E_NOSPACE, else
 * TXN_E_IO), with the file and the cause in words (REFUSE): a missing
 * directory, "permission denied", for ENOSPC the `want` bytes requested
 * and the bytes free. */
int pool_file_error(const char *file, int e, size_t want);

/* A pool file being created: made under a temporary name beside its own,
 * PATH.pmtx-new, and renamed to PATH once complete (sealed), so that a
 * crash during creation never leaves a file under PATH that no open can
 * use. A name with that suffix is this library's by convention: the next
 * creation of PATH takes over (empties and reuses) what a killed one left
 * there, so such files never pile up. */
#define POOL_BIRTH_SUFFIX ".pmtx-new"
struct pool_birth {
    char *file; /* the pool's name (malloc'ed, as tmp) */
    char *tmp;  /* where it is made */
    int fd;     /* tmp opened read-write; the caller keeps it (pmtx's format: its
                   pool fd) or closes it */
};

/* Claim the temporary of `file`: TXN_E_EXIST when `file` exists,
 * TXN_E_BUSY while another creation of it holds the temporary, else the
 * temporary created or taken over, empty, and locked (flock, as
 * pool_lock_file) in b->fd. Each refusal names `file` and its cause. */
int pool_birth_begin(const char *file, struct pool_birth *b);
/* The complete pool named: the temporary's data synced, renamed to the
 * pool's name without replacing anything there (TXN_E_EXIST, the
 * temporary kept for pool_birth_end), the directory synced. */
int pool_birth_publish(struct pool_birth *b);
/* Release b's names; with `abandon` (a creation given up, while its
 * temporary is still locked by this process) the temporary removed. The
 * fd is the caller's. */
void pool_birth_end(struct pool_birth *b, int abandon);

/* The first 8 bytes of a pool of pmtx's own format (format/pool.h), the
 * bytes of its header, and where in it the header names the engine
 * (POOL_ENGINE_MAX bytes, NUL-terminated unless full): what another
 * format's inspection (pmdk's) may read of such a file. pool.h checks
 * them against struct pool_hdr. */
#define POOL_MAGIC 0x31585448544d5050ull /* "PPMTHTX1" */
#define POOL_HDR_SIZE 4096u
#define POOL_ENGINE_OFF 80u
#define POOL_ENGINE_MAX 16u

/* A deferred action (txn_defer). */
struct tx_defer {
    int when;
    void (*fn)(void *);
    void *arg;
};

/* Run the actions of `defers` registered for `outcome` (TXN_ON_COMMIT or
 * TXN_ON_ABORT; TXN_ON_END matches both), in order, and empty the list.
 * The actions may begin new transactions that defer more: those land in a
 * fresh list and are not run here. */
void defers_run(struct vec *defers, int outcome);

/* Threads for `units` of work, one per `per` units (at least one), at
 * most `max` and the cores online; 1 in the crash simulator's build (its
 * store trace is one thread's). */
unsigned par_threads(size_t units, size_t per, unsigned max);

/* fn on each of the n parts (consecutive, `size` bytes each), by up to
 * `threads` threads, the caller one of them, that take the parts in order
 * from a counter: a thread that starts late (waiting for a core) takes
 * fewer, and the caller takes any no thread could be started for. Returns
 * once all ended. */
void par_run(void (*fn)(void *part), void *parts, size_t size, size_t n, unsigned threads);

/* The first bytes of a libpmemobj pool file (PMDK's signature): pools of
 * the pmdk engine start with them, ours with POOL_MAGIC. */
#define PMDK_POOL_SIG "PMEMOBJ"
#define PMDK_ENGINE "pmdk" /* the engine of such pools */

#endif
