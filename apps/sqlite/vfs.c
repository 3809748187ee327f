/* vfs.c - the SQLite VFS "pmtx": main database files in pmtx pools
 * (pagestore.h), every other file on the default VFS.
 *
 * What SQLite does and what the VFS makes of it (SQLite 3.40, journal mode
 * MEMORY; seen with a tracing VFS, docs/sqlite.md):
 *   write transaction   xLock(RESERVED), xLock(EXCLUSIVE), xWrite...,
 *                       [xTruncate], FCNTL_SYNC, [xSync],
 *                       [xTruncate], FCNTL_COMMIT_PHASETWO, xUnlock(SHARED)
 *   rollback            [xTruncate, xWrite of the old pages, FCNTL_SYNC,
 *                       xSync], xUnlock(SHARED): no COMMIT_PHASETWO
 * Writes and truncations are staged (pgs_stage_*) and read back by the
 * writer; COMMIT_PHASETWO applies them in one txn.h transaction
 * (pgs_commit), after the last truncation SQLite makes for the commit;
 * an unlock below RESERVED drops whatever is staged (pgs_discard), which
 * is SQLite's rollback. journal_mode=OFF is refused: there SQLite cannot
 * undo a failed statement whose pages it already wrote. In locking_mode
 * EXCLUSIVE no unlock comes, but SQLite's own rollback rewrites the old
 * pages, so what stays staged is the committed content and the next
 * commit writes nothing for it.
 *
 * Why stage in DRAM and open the txn.h transaction only at the commit:
 * a txn.h transaction belongs to the thread that began it, and a SQLite
 * connection may move between threads inside a transaction; other
 * connections never see uncommitted bytes in place (undo, none); and a
 * rollback costs the pool nothing. The cost: the pages a transaction
 * writes are held in memory until it ends, as MEMORY's journal holds
 * their old content already.
 *
 * A transaction over ATTACHed pmtx databases: SQLite ends it with phase
 * one (FCNTL_SYNC) of every database it wrote, then phase two
 * (COMMIT_PHASETWO) of each, one after the other, all in one call on the
 * connection's thread. The files of the thread that passed phase one are
 * listed (phase_one); the first phase two commits them all as one
 * transaction over their pools (pgs_commit_many: txn_join, where the
 * engine joins; one after the other where it does not), and the others'
 * phase two then finds nothing staged. So such a transaction is in every
 * database or in none, whatever crashes (docs/join.md).
 *
 * Locks between the connections of this process follow SQLite's levels
 * (SHARED, RESERVED, PENDING, EXCLUSIVE) on the state shared per pool;
 * another process cannot open the pool at all (txn.h: TXN_E_BUSY).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef PMTX_SQLITE_EXTENSION
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#else
#include <sqlite3.h>
#endif

#include "pagestore.h"
#include "pmtx_sqlite.h"
#include "txn.h"
#include "vfs_host.h"

/* A pool open in this process, shared by its connections. */
struct shared {
    struct shared *next;
    dev_t dev;
    ino_t ino;
    char *path;           /* as SQLite named it at the first open */
    pid_t pid;            /* the process that opened it */
    int refs;             /* sqlite3_files open on it */
    int view;             /* opened read-only: a private view */
    int hosted;           /* pmtx_sqlite_host's: found by path, which holds
                             a reference until pmtx_sqlite_unhost */
    pgs *s;
    pthread_mutex_t mu;   /* the lock state: */
    int nshared;          /* connections holding SHARED or more */
    struct pfile *writer; /* the one holding RESERVED or more */
    int pending;          /* the writer waits for EXCLUSIVE: no new SHARED */
};

/* One connection's open main database file. */
struct pfile {
    sqlite3_file base;
    struct shared *sh;
    int lock;     /* SQLITE_LOCK_* held */
    int readonly;
    int sync;     /* xSync came in this write transaction */
};

static sqlite3_vfs *base_vfs; /* where every other file goes */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shared *reg;    /* open pools (reg_mu) */

static __thread char last_msg[768];
static __thread int last_code;

/* Log why a call fails (sqlite3_log, xGetLastError) and return code. */
static int report(int code, int txn_rc, const char *path, const char *why)
{
    snprintf(last_msg, sizeof last_msg, "pmtx: %s: %s", path ? path : "?", why);
    last_code = txn_rc;
    sqlite3_log(code, "%s", last_msg);
    return code;
}

/* The SQLite code for a pool that cannot be opened. */
static int open_code(int rc)
{
    switch (rc) {
    case TXN_E_NOTPOOL:
    case TXN_E_LAYOUT:
        return SQLITE_NOTADB;
    case TXN_E_CORRUPT:
    case TXN_E_TRUNC:
        return SQLITE_CORRUPT;
    case TXN_E_BUSY:
        return SQLITE_BUSY;
    case TXN_E_NOMEM:
        return SQLITE_NOMEM;
    case TXN_E_NOSPACE:
        return SQLITE_FULL;
    default:
        return SQLITE_CANTOPEN;
    }
}

/* The SQLite code for a failed change: full pool or log, else `io`. */
static int change_code(int rc, int io)
{
    switch (rc) {
    case TXN_E_NOSPACE:
    case TXN_E_LOGFULL:
        return SQLITE_FULL;
    case TXN_E_NOMEM:
        return SQLITE_IOERR_NOMEM;
    default:
        return io;
    }
}

/* ---- the file methods */

static int f_close(sqlite3_file *f);
static void phase_one_drop(struct pfile *pf);
static int f_lock(sqlite3_file *f, int level);
static int f_unlock(sqlite3_file *f, int level);

static int f_read(sqlite3_file *f, void *dst, int n, sqlite3_int64 off)
{
    struct pfile *pf = (struct pfile *)f;
    size_t got;
    int rc = pgs_read(pf->sh->s, pf->lock >= SQLITE_LOCK_RESERVED, dst, (size_t)n,
                      (uint64_t)off, &got);
    if (rc)
        return report(SQLITE_IOERR_READ, rc, pf->sh->path, pgs_why());
    return got < (size_t)n ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

/* Writes come only from the connection holding RESERVED or more. */
static int writer_only(struct pfile *pf, int code)
{
    if (pf->lock >= SQLITE_LOCK_RESERVED)
        return 0;
    return report(code, TXN_E_STATE, pf->sh->path, "change without a write lock");
}

static int f_write(sqlite3_file *f, const void *src, int n, sqlite3_int64 off)
{
    struct pfile *pf = (struct pfile *)f;
    int rc = writer_only(pf, SQLITE_IOERR_WRITE);
    if (rc)
        return rc;
    if ((rc = pgs_stage_write(pf->sh->s, src, (size_t)n, (uint64_t)off)))
        return report(change_code(rc, SQLITE_IOERR_WRITE), rc, pf->sh->path, pgs_why());
    return SQLITE_OK;
}

static int f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    struct pfile *pf = (struct pfile *)f;
    int rc = writer_only(pf, SQLITE_IOERR_TRUNCATE);
    if (rc)
        return rc;
    if ((rc = pgs_stage_truncate(pf->sh->s, (uint64_t)size)))
        return report(change_code(rc, SQLITE_IOERR_TRUNCATE), rc, pf->sh->path, pgs_why());
    return SQLITE_OK;
}

/* SQLite syncs before COMMIT_PHASETWO, when nothing is committed yet:
 * remembered, and the commit then waits for durability (incll's epoch;
 * a no-op elsewhere). PRAGMA synchronous=OFF sends no xSync. */
static int f_sync(sqlite3_file *f, int flags)
{
    struct pfile *pf = (struct pfile *)f;
    (void)flags;
    if (pf->lock >= SQLITE_LOCK_RESERVED)
        pf->sync = 1;
    return SQLITE_OK;
}

static int f_size(sqlite3_file *f, sqlite3_int64 *size)
{
    struct pfile *pf = (struct pfile *)f;
    *size = (sqlite3_int64)pgs_size(pf->sh->s, pf->lock >= SQLITE_LOCK_RESERVED);
    return SQLITE_OK;
}

static int f_lock(sqlite3_file *f, int level)
{
    struct pfile *pf = (struct pfile *)f;
    struct shared *sh = pf->sh;
    int rc = SQLITE_OK;
    if (pf->lock >= level)
        return SQLITE_OK;
    pthread_mutex_lock(&sh->mu);
    if (level == SQLITE_LOCK_SHARED) {
        if (sh->writer && (sh->pending || sh->writer->lock == SQLITE_LOCK_EXCLUSIVE)) {
            rc = SQLITE_BUSY;
        } else {
            sh->nshared++;
            pf->lock = SQLITE_LOCK_SHARED;
        }
    } else if (sh->writer && sh->writer != pf) {
        rc = SQLITE_BUSY;
    } else if (pf->readonly) {
        rc = SQLITE_READONLY;
    } else if (level == SQLITE_LOCK_RESERVED) {
        sh->writer = pf;
        pf->lock = SQLITE_LOCK_RESERVED;
        pf->sync = 0;
    } else {
        /* EXCLUSIVE (by way of PENDING while other readers finish) */
        if (!sh->writer)
            pf->sync = 0;
        sh->writer = pf;
        if (sh->nshared > 1) {
            sh->pending = 1;
            pf->lock = SQLITE_LOCK_PENDING;
            rc = SQLITE_BUSY;
        } else {
            sh->pending = 0;
            pf->lock = SQLITE_LOCK_EXCLUSIVE;
        }
    }
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

static int f_unlock(sqlite3_file *f, int level)
{
    struct pfile *pf = (struct pfile *)f;
    struct shared *sh = pf->sh;
    if (pf->lock <= level)
        return SQLITE_OK;
    pthread_mutex_lock(&sh->mu);
    if (pf->lock >= SQLITE_LOCK_RESERVED) {
        /* the write transaction ends; after its commit nothing is staged,
         * else this is SQLite's rollback */
        pgs_discard(sh->s);
        phase_one_drop(pf);
        sh->writer = NULL;
        sh->pending = 0;
        pf->sync = 0;
    }
    if (level == SQLITE_LOCK_NONE)
        sh->nshared--;
    pf->lock = level;
    pthread_mutex_unlock(&sh->mu);
    return SQLITE_OK;
}

static int f_reserved(sqlite3_file *f, int *out)
{
    struct pfile *pf = (struct pfile *)f;
    pthread_mutex_lock(&pf->sh->mu);
    *out = pf->sh->writer != NULL;
    pthread_mutex_unlock(&pf->sh->mu);
    return SQLITE_OK;
}

/* The files past phase one of a commit, each with the thread committing
 * it (the top of this file). An entry goes at that commit's phase two,
 * or when its file unlocks or closes (a rollback after phase one). */
#define PHASE_ONE_MAX 64
static pthread_mutex_t phase_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    pthread_t thread;
    struct pfile *pf;
} phase_one[PHASE_ONE_MAX]; /* phase_mu */
static int phase_n;         /* phase_mu */

static void phase_one_add(struct pfile *pf)
{
    pthread_mutex_lock(&phase_mu);
    int have = 0;
    for (int i = 0; i < phase_n; i++)
        have |= phase_one[i].pf == pf;
    if (!have && phase_n < PHASE_ONE_MAX) { /* else it commits alone */
        phase_one[phase_n].thread = pthread_self();
        phase_one[phase_n++].pf = pf;
    }
    pthread_mutex_unlock(&phase_mu);
}

static void phase_one_drop(struct pfile *pf)
{
    pthread_mutex_lock(&phase_mu);
    for (int i = 0; i < phase_n; i++)
        if (phase_one[i].pf == pf)
            phase_one[i--] = phase_one[--phase_n];
    pthread_mutex_unlock(&phase_mu);
}

/* pf and the other files of this thread's commit, taken off the list:
 * how many (pf first). */
static size_t phase_one_take(struct pfile *pf, struct pfile **out, size_t cap)
{
    size_t n = 1;
    int mine = 0;
    out[0] = pf;
    pthread_mutex_lock(&phase_mu);
    pthread_t self = pthread_self();
    for (int i = 0; i < phase_n; i++)
        mine |= phase_one[i].pf == pf && pthread_equal(phase_one[i].thread, self);
    for (int i = 0; mine && i < phase_n; i++)
        if (pthread_equal(phase_one[i].thread, self)) {
            if (phase_one[i].pf != pf && n < cap)
                out[n++] = phase_one[i].pf;
            phase_one[i--] = phase_one[--phase_n];
        }
    pthread_mutex_unlock(&phase_mu);
    return n;
}

/* SQLite's commit point: the staged transaction goes to the pool, with
 * those of the other databases of the same commit (the top of this file). */
static int commit(struct pfile *pf)
{
    int rc;
    struct pfile *all[PGS_COMMIT_MAX];
    pgs *stores[PGS_COMMIT_MAX];
    if (pf->lock < SQLITE_LOCK_RESERVED)
        return SQLITE_OK;
    size_t n = phase_one_take(pf, all, PGS_COMMIT_MAX);
    for (size_t i = 0; i < n; i++)
        stores[i] = all[i]->sh->s;
    if ((rc = n > 1 ? pgs_commit_many(stores, n) : pgs_commit(pf->sh->s)))
        return report(change_code(rc, SQLITE_IOERR_WRITE), rc, pf->sh->path, pgs_why());
    for (size_t i = 0; i < n; i++) {
        if (all[i]->sync && (rc = pgs_sync(all[i]->sh->s)))
            return report(SQLITE_IOERR_FSYNC, rc, all[i]->sh->path, pgs_why());
        all[i]->sync = 0;
    }
    return SQLITE_OK;
}

/* PRAGMAs the VFS answers: journal modes other than MEMORY are refused
 * (see the top of this file); pmtx_engine names the linked engine. */
static int pragma(char **arg)
{
    const char *name = arg[1], *value = arg[2];
    if (!strcasecmp(name, "journal_mode") && value && strcasecmp(value, "memory")) {
        arg[0] = sqlite3_mprintf("pmtx: journal_mode=%s refused: a pmtx database keeps "
                                 "journal_mode=MEMORY (each transaction is one pmtx "
                                 "transaction; OFF cannot undo a failed statement)",
                                 value);
        return SQLITE_ERROR;
    }
    if (!strcasecmp(name, "pmtx_engine")) {
        arg[0] = sqlite3_mprintf("%s", txn_engine_name());
        return SQLITE_OK;
    }
    return SQLITE_NOTFOUND;
}

static int f_control(sqlite3_file *f, int op, void *arg)
{
    struct pfile *pf = (struct pfile *)f;
    switch (op) {
    case SQLITE_FCNTL_COMMIT_PHASETWO:
        return commit(pf);
    case SQLITE_FCNTL_SYNC: /* phase one of a commit */
        if (pf->lock >= SQLITE_LOCK_RESERVED)
            phase_one_add(pf);
        return SQLITE_OK;
    case SQLITE_FCNTL_PRAGMA:
        return pragma(arg);
    case SQLITE_FCNTL_VFSNAME:
        *(char **)arg = sqlite3_mprintf("%s", PMTX_SQLITE_VFS);
        return SQLITE_OK;
    case SQLITE_FCNTL_LOCKSTATE:
        *(int *)arg = pf->lock;
        return SQLITE_OK;
    default:
        return SQLITE_NOTFOUND;
    }
}

static int f_sector(sqlite3_file *f)
{
    (void)f;
    return PGS_BLOCK;
}

static int f_device(sqlite3_file *f)
{
    (void)f;
    return SQLITE_IOCAP_POWERSAFE_OVERWRITE;
}

static const sqlite3_io_methods methods = {
    .iVersion = 1,
    .xClose = f_close,
    .xRead = f_read,
    .xWrite = f_write,
    .xTruncate = f_truncate,
    .xSync = f_sync,
    .xFileSize = f_size,
    .xLock = f_lock,
    .xUnlock = f_unlock,
    .xCheckReservedLock = f_reserved,
    .xFileControl = f_control,
    .xSectorSize = f_sector,
    .xDeviceCharacteristics = f_device,
};

/* ---- the registry of open pools */

/* The pool open here as file (dev, ino). A child of fork() inherits its
 * parent's registry but must not use the parent's pools: it opens its own,
 * which txn.h refuses while the parent has the file (TXN_E_BUSY). */
static struct shared *find(dev_t dev, ino_t ino)
{
    pid_t me = getpid();
    for (struct shared *sh = reg; sh; sh = sh->next)
        if (!sh->hosted && sh->dev == dev && sh->ino == ino && sh->pid == me)
            return sh;
    return NULL;
}

/* The store hosted here under name (vfs_host.h). */
static struct shared *find_hosted(const char *name)
{
    pid_t me = getpid();
    for (struct shared *sh = reg; sh; sh = sh->next)
        if (sh->hosted && sh->pid == me && !strcmp(sh->path, name))
            return sh;
    return NULL;
}

/* Take sh out of the registry and free it with its store. */
static void drop_shared(struct shared *sh)
{
    struct shared **pp = &reg;
    while (*pp != sh)
        pp = &(*pp)->next;
    *pp = sh->next;
    pgs_close(sh->s);
    pthread_mutex_destroy(&sh->mu);
    free(sh->path);
    free(sh);
}

static int f_close(sqlite3_file *f)
{
    struct pfile *pf = (struct pfile *)f;
    struct shared *sh = pf->sh;
    f_unlock(f, SQLITE_LOCK_NONE);
    phase_one_drop(pf);
    pthread_mutex_lock(&reg_mu);
    if (--sh->refs == 0)
        drop_shared(sh);
    pthread_mutex_unlock(&reg_mu);
    return SQLITE_OK;
}

/* URI parameter `key`=N[K|M|G] of a main database's name, or 0. */
static int pool_size(const char *name, const char *key, size_t *out)
{
    const char *v = sqlite3_uri_parameter(name, key);
    char *end;
    *out = 0;
    if (!v)
        return 0;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (errno || end == v || *end || n > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)n << shift;
    return 0;
}

/* Open (or share) the pool of a main database: under reg_mu. */
static int open_shared(const char *name, int flags, struct shared **out)
{
    struct stat sb;
    struct shared *sh = find_hosted(name);
    if (!sh && !stat(name, &sb))
        sh = find(sb.st_dev, sb.st_ino);
    int ro = (flags & SQLITE_OPEN_READONLY) != 0, created, rc;
    if (sh) {
        if (sh->view && !ro)
            return report(SQLITE_BUSY, TXN_E_BUSY, name,
                          "open read-only in this process: close it first");
        sh->refs++;
        *out = sh;
        return SQLITE_OK;
    }
    struct pgs_opts o = {.create = (flags & SQLITE_OPEN_CREATE) != 0, .view = ro};
    /* pmtx_size: a database of that size, whole at once; pmtx_max: one
     * that may grow to it (with pmtx_size, from that size) */
    if (pool_size(name, "pmtx_size", &o.pool_size))
        return report(SQLITE_CANTOPEN, TXN_E_INVAL, name,
                      "pmtx_size: not a size in bytes (N, NK, NM or NG)");
    if (pool_size(name, "pmtx_max", &o.pool_max))
        return report(SQLITE_CANTOPEN, TXN_E_INVAL, name,
                      "pmtx_max: not a size in bytes (N, NK, NM or NG)");
    if (!o.pool_max)
        o.pool_max = o.pool_size;
    if (!(sh = calloc(1, sizeof *sh)) || !(sh->path = strdup(name))) {
        free(sh);
        return report(SQLITE_NOMEM, TXN_E_NOMEM, name, "out of memory");
    }
    if ((rc = pgs_open(name, &o, &sh->s, &created))) {
        free(sh->path);
        free(sh);
        return report(open_code(rc), rc, name, pgs_why());
    }
    if (stat(name, &sb)) {
        rc = errno;
        pgs_close(sh->s);
        free(sh->path);
        free(sh);
        return report(SQLITE_CANTOPEN, TXN_E_IO, name, strerror(rc));
    }
    sh->dev = sb.st_dev;
    sh->ino = sb.st_ino;
    sh->view = ro;
    sh->pid = getpid();
    sh->refs = 1;
    pthread_mutex_init(&sh->mu, NULL);
    sh->next = reg;
    reg = sh;
    *out = sh;
    return SQLITE_OK;
}

int pmtx_sqlite_host(const char *name, pgs *s)
{
    struct shared *sh = calloc(1, sizeof *sh);
    int rc = SQLITE_OK;
    if (!sh || !(sh->path = strdup(name))) {
        free(sh);
        return SQLITE_NOMEM;
    }
    sh->hosted = 1;
    sh->s = s;
    sh->pid = getpid();
    sh->refs = 1;
    pthread_mutex_init(&sh->mu, NULL);
    pthread_mutex_lock(&reg_mu);
    if (find_hosted(name)) {
        rc = SQLITE_BUSY;
    } else {
        sh->next = reg;
        reg = sh;
    }
    pthread_mutex_unlock(&reg_mu);
    if (rc) {
        pthread_mutex_destroy(&sh->mu);
        free(sh->path);
        free(sh);
    }
    return rc;
}

int pmtx_sqlite_unhost(const char *name)
{
    int rc = SQLITE_OK;
    pthread_mutex_lock(&reg_mu);
    struct shared *sh = find_hosted(name);
    if (!sh)
        rc = SQLITE_NOTFOUND;
    else if (sh->refs > 1)
        rc = SQLITE_BUSY;
    else
        drop_shared(sh);
    pthread_mutex_unlock(&reg_mu);
    return rc;
}

/* ---- the VFS methods */

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *outflags)
{
    (void)vfs;
    f->pMethods = NULL;
    if (flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL))
        return report(SQLITE_CANTOPEN, TXN_E_NOTSUP, name,
                      "a pmtx database keeps journal_mode=MEMORY: no journal or WAL file");
    if (!(flags & SQLITE_OPEN_MAIN_DB) || !name)
        return base_vfs->xOpen(base_vfs, name, f, flags, outflags);
    struct pfile *pf = (struct pfile *)f;
    struct shared *sh;
    pthread_mutex_lock(&reg_mu);
    int rc = open_shared(name, flags, &sh);
    pthread_mutex_unlock(&reg_mu);
    if (rc)
        return rc;
    memset(pf, 0, sizeof *pf);
    pf->sh = sh;
    pf->readonly = sh->view;
    f->pMethods = &methods;
    if (outflags) {
        /* SQLITE_OPEN_MEMORY makes SQLite's pager pick journal_mode=MEMORY */
        *outflags = flags | SQLITE_OPEN_MEMORY;
        if (pf->readonly)
            *outflags = (*outflags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) |
                        SQLITE_OPEN_READONLY;
    }
    return SQLITE_OK;
}

/* Whether name is the journal or WAL name of a pool open here: such a
 * file never exists for SQLite, whatever lies on disk under that name
 * (a stale journal would otherwise be "hot" and played into the pool). */
static int pool_journal(const char *name)
{
    static const char *const suffix[] = {"-journal", "-wal"};
    size_t n = strlen(name);
    int hit = 0;
    for (unsigned i = 0; i < 2 && !hit; i++) {
        size_t k = strlen(suffix[i]);
        if (n <= k || strcmp(name + n - k, suffix[i]))
            continue;
        pthread_mutex_lock(&reg_mu);
        for (struct shared *sh = reg; sh && !hit; sh = sh->next)
            hit = strlen(sh->path) == n - k && !memcmp(sh->path, name, n - k);
        pthread_mutex_unlock(&reg_mu);
    }
    return hit;
}

static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
    (void)vfs;
    if (pool_journal(name)) {
        *out = 0;
        return SQLITE_OK;
    }
    return base_vfs->xAccess(base_vfs, name, flags, out);
}

static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
    (void)vfs;
    return base_vfs->xDelete(base_vfs, name, sync_dir);
}

static int v_full(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
    (void)vfs;
    return base_vfs->xFullPathname(base_vfs, name, n, out);
}

static void *v_dlopen(sqlite3_vfs *vfs, const char *name)
{
    (void)vfs;
    return base_vfs->xDlOpen(base_vfs, name);
}

static void v_dlerror(sqlite3_vfs *vfs, int n, char *msg)
{
    (void)vfs;
    base_vfs->xDlError(base_vfs, n, msg);
}

static void (*v_dlsym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
    (void)vfs;
    return base_vfs->xDlSym(base_vfs, h, sym);
}

static void v_dlclose(sqlite3_vfs *vfs, void *h)
{
    (void)vfs;
    base_vfs->xDlClose(base_vfs, h);
}

static int v_random(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    return base_vfs->xRandomness(base_vfs, n, out);
}

static int v_sleep(sqlite3_vfs *vfs, int us)
{
    (void)vfs;
    return base_vfs->xSleep(base_vfs, us);
}

static int v_time(sqlite3_vfs *vfs, double *out)
{
    (void)vfs;
    return base_vfs->xCurrentTime(base_vfs, out);
}

static int v_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
    (void)vfs;
    if (base_vfs->iVersion >= 2 && base_vfs->xCurrentTimeInt64)
        return base_vfs->xCurrentTimeInt64(base_vfs, out);
    double d;
    int rc = base_vfs->xCurrentTime(base_vfs, &d);
    *out = (sqlite3_int64)(d * 86400000.0);
    return rc;
}

/* The last failure of this thread: its TXN_E_* code, and the reason. */
static int v_last_error(sqlite3_vfs *vfs, int n, char *out)
{
    (void)vfs;
    if (n > 0 && out)
        snprintf(out, (size_t)n, "%s", last_msg);
    return last_code;
}

static sqlite3_vfs pmtx_vfs = {
    .iVersion = 2,
    .zName = PMTX_SQLITE_VFS,
    .xOpen = v_open,
    .xDelete = v_delete,
    .xAccess = v_access,
    .xFullPathname = v_full,
    .xDlOpen = v_dlopen,
    .xDlError = v_dlerror,
    .xDlSym = v_dlsym,
    .xDlClose = v_dlclose,
    .xRandomness = v_random,
    .xSleep = v_sleep,
    .xCurrentTime = v_time,
    .xGetLastError = v_last_error,
    .xCurrentTimeInt64 = v_time64,
};

int pmtx_sqlite_register(int make_default)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int rc = SQLITE_OK;
    pthread_mutex_lock(&mu);
    if (!base_vfs) {
        sqlite3_vfs *b = sqlite3_vfs_find(NULL);
        if (!b || !strcmp(b->zName, PMTX_SQLITE_VFS)) {
            rc = SQLITE_ERROR;
        } else {
            pmtx_vfs.szOsFile = b->szOsFile > (int)sizeof(struct pfile) ? b->szOsFile
                                                                        : (int)sizeof(struct pfile);
            pmtx_vfs.mxPathname = b->mxPathname;
            base_vfs = b;
            if ((rc = sqlite3_vfs_register(&pmtx_vfs, make_default)))
                base_vfs = NULL;
        }
    } else if (make_default) {
        rc = sqlite3_vfs_register(&pmtx_vfs, 1);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

#ifdef PMTX_SQLITE_EXTENSION
/* The loadable extension's entry point: registers the VFS, which must
 * outlive this connection, so the library stays loaded. */
__attribute__((visibility("default"))) int sqlite3_extension_init(sqlite3 *db, char **err,
                                                                  const sqlite3_api_routines *api)
{
    (void)db;
    SQLITE_EXTENSION_INIT2(api);
    int rc = pmtx_sqlite_register(0);
    if (rc != SQLITE_OK) {
        *err = sqlite3_mprintf("pmtx: the VFS could not be registered (%d)", rc);
        return rc;
    }
    return SQLITE_OK_LOAD_PERMANENTLY;
}
#endif
