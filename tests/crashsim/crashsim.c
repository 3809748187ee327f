/* crashsim.c - the crash simulator: runs workloads on one engine with
 * every store, flush and fence traced (trace.h), takes crash images at
 * random points, recovers each in a fresh process, and checks it against
 * the workload's oracle and the allocator. One crash image in four also
 * crashes recovery itself at a random point and recovers that image again.
 *
 *   crashsim-<engine> [--workload slots|list|mix|leaf|sparse|migrate|extend|masstree|sqlite|kv|
 *                                 shared|masstree-shared|kv-shared|churn]
 *                     [--images N] [--seed S] [--threads T] [--sync-every K] [--image N]
 *                     [--no-switch-in-tx]
 *
 * With T threads, each runs the workload on its own part of one pool, all
 * tracing into one model; a crash image freezes every thread wherever it
 * is, and each thread's part must hold its last commit or, while its
 * commit is in flight, that one. A shared workload (WL_SHARED) runs its
 * threads on the same objects under the baton scheduler (sched.c), one at
 * a time, so a run is a function of its seed; its commits form one global
 * order, and the pool must hold the last commit or the one in flight.
 * --image N (with --seed S) makes crash point N of that campaign again,
 * keeps its image, prints its path and checksum, and checks it.
 *
 * Last line: "crash images: N, inconsistent: K, untraced stores: U"; the
 * exit status is 0 only when K = U = 0.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "layout_int.h"
#include "sim.h"
#include "trace.h"

#define TX_PER_RUN 120
#define IMAGES_PER_RUN 48
#define EXHAUSTIVE_MAX 6 /* enumerate every image when there are so few */
#define AUDIT_EVERY 2048 /* events between untraced-store audits */

static const struct workload *const workloads[] = {&wl_slots, &wl_list, &wl_mix, &wl_leaf,
                                                   &wl_sparse, &wl_migrate, &wl_extend,
                                                   &wl_masstree, &wl_sqlite, &wl_kv,
                                                   &wl_shared, &wl_masstree_shared,
                                                   &wl_kv_shared, &wl_churn, &wl_kv_reserve,
                                                   &wl_churn_grow};

/* ---- the oracle. Each thread calls txn_sync() after every
 * `sync_every` commits (a no-op for engines durable at commit, which run
 * with sync_every = 1 and so stay strict: only the last commit, or the one
 * in flight, is acceptable). A recovered state must be one of the thread's
 * commits since its last completed txn_sync, or the one in flight. A crash
 * image is taken (and a child forked) while other threads may be anywhere:
 * a snapshot of these words, taken then, is of one moment of each thread
 * (ex_snapshot). */
#define MAX_SYNC_EVERY 16
static unsigned sync_every = 1;
/* Shared runs: whether threads may switch inside a transaction (at
 * txn_alloc, txn_free, sim_lock); --no-switch-in-tx clears it. */
static int switch_in_tx = 1;
static txn_pool *txn_pool_of_run(void);
static int R_exact(void);
/* The workload of the run in progress, set before its setup commits. */
static const struct workload *run_w;

static int shared_run(void)
{
    return run_w && run_w->flags & WL_SHARED;
}

/* The campaign's run in progress: its points are numbered from
 * run_index * IMAGES_PER_RUN. */
static uint64_t run_index;

/* Events at which a commit of the run returned (shared workloads): the
 * campaign puts a share of its crash points just after them. Written by
 * the baton holder only. */
static struct {
    uint64_t *ev;
    size_t n, cap;
} cev;

static void cev_add(uint64_t e)
{
    if (cev.n == cev.cap) {
        size_t cap = cev.cap ? 2 * cev.cap : 256;
        uint64_t *a = realloc(cev.ev, cap * sizeof *a);
        if (!a)
            return; /* fewer points after commits; the run goes on */
        cev.ev = a;
        cev.cap = cap;
    }
    cev.ev[cev.n++] = e;
}

/* ex[t] is written by thread t alone (a shared run's ex[0]: by the baton
 * holder), each word with a release store between the two steps of
 * `seq`, and read by the thread that takes an image (ex_snapshot). A copy
 * made while one thread was between two of its words (say a new `commits`
 * with the `hist` word of the commit not yet written) once failed a
 * threaded incll campaign under load. */
static struct expect {
    uint64_t hist[MAX_SYNC_EVERY + 1]; /* digest of commit c at
                                          c % (MAX_SYNC_EVERY+1) */
    uint64_t pending; /* digest if the commit in flight lands */
    uint64_t commits; /* commits so far */
    uint64_t synced;  /* commits durable by a completed txn_sync */
    int in_commit;
    int syncing;  /* in txn_sync after commit `commits` */
    unsigned seq; /* odd while the thread changes the words above */
} ex[SIM_THREADS];

/* Release stores and acquire loads, no fence (which ThreadSanitizer does
 * not follow): a snapshot that reads a word written after the odd `seq`
 * then reads that `seq` or a later one. */
#define EX_SET(e, field, v) __atomic_store_n(&(e)->field, (v), __ATOMIC_RELEASE)

/* A change of the words holds no event (no trace lock), so a snapshot,
 * taken under that lock, never waits for a thread that waits for it. */
static void ex_begin(struct expect *e)
{
    __atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELAXED);
}

static void ex_end(struct expect *e)
{
    __atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELEASE);
}

static void ex_snapshot(struct expect *to)
{
    for (int t = 0; t < SIM_THREADS; t++) {
        struct expect *e = &ex[t], *w = &to[t];
        unsigned s;
        for (;;) {
            if ((s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE)) & 1) {
                sched_yield();
                continue;
            }
            for (int i = 0; i <= MAX_SYNC_EVERY; i++)
                w->hist[i] = __atomic_load_n(&e->hist[i], __ATOMIC_ACQUIRE);
            w->pending = __atomic_load_n(&e->pending, __ATOMIC_ACQUIRE);
            w->commits = __atomic_load_n(&e->commits, __ATOMIC_ACQUIRE);
            w->synced = __atomic_load_n(&e->synced, __ATOMIC_ACQUIRE);
            w->in_commit = __atomic_load_n(&e->in_commit, __ATOMIC_ACQUIRE);
            w->syncing = __atomic_load_n(&e->syncing, __ATOMIC_ACQUIRE);
            if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s)
                break;
        }
        w->seq = s;
    }
}

static int acceptable(const struct expect *e, uint64_t d)
{
    if (R_exact()) /* only the last synced state, or the one being synced */
        return e->hist[e->synced % (MAX_SYNC_EVERY + 1)] == d ||
               (e->syncing && e->hist[e->commits % (MAX_SYNC_EVERY + 1)] == d);
    for (uint64_t c = e->synced; c <= e->commits; c++)
        if (e->hist[c % (MAX_SYNC_EVERY + 1)] == d)
            return 1;
    return e->in_commit && e->pending == d;
}

int sim_commit(txn *tx, int t, uint64_t next)
{
    /* a shared workload's commits, of every thread, in one order */
    struct expect *e = &ex[shared_run() ? 0 : t];
    ex_begin(e);
    EX_SET(e, pending, next);
    EX_SET(e, in_commit, 1);
    ex_end(e);
    int rc = txn_commit(tx);
    ex_begin(e);
    if (!rc) {
        EX_SET(e, hist[(e->commits + 1) % (MAX_SYNC_EVERY + 1)], next);
        EX_SET(e, commits, e->commits + 1);
    }
    EX_SET(e, in_commit, 0);
    ex_end(e);
    if (!rc && shared_run()) {
        trace_lock();
        cev_add(trace_events());
        trace_unlock();
    }
    if (!rc && e->commits % sync_every == 0) {
        ex_begin(e);
        EX_SET(e, syncing, 1);
        ex_end(e);
        rc = txn_sync(txn_pool_of_run());
        ex_begin(e);
        if (!rc)
            EX_SET(e, synced, e->commits);
        EX_SET(e, syncing, 0);
        ex_end(e);
    }
    return rc;
}

int sim_finish(txn *tx, int t, uint64_t *rng, uint64_t next, int *committed)
{
    *committed = 0;
    if (sim_rand(rng) % 8 == 0) {
        txn_abort(tx);
        return 0;
    }
    int rc = sim_commit(tx, t, next);
    *committed = rc == 0;
    return rc;
}

static int reach_cb(txn_obj *o, void *arg)
{
    return reach_add(arg, o);
}

/* The library draws a new pool's address and uuid from getrandom(2). A
 * shared run draws them from its seed instead (this definition takes the
 * place of libc's in the program), so that the same seed writes the same
 * bytes in another process too: --image N gives an image equal byte for
 * byte. Other runs get the kernel's. */
static struct {
    int on;        /* set and read by the thread that creates pools */
    uint64_t seed; /* the stream while on */
} fixed_random;

/* ... and the key-value store seeds its random numbers (eviction's order)
 * from it, for each store: a worker of a run that is not shared draws from
 * its own stream of the run's seed, so that the run that counts a run's
 * events and the run that takes its images evict the same keys, and a
 * seed gives the same images again (each thread's: their order does not
 * matter). Shared runs' workers, in the scheduler's order, draw from
 * fixed_random. */
static _Thread_local struct {
    int on;
    uint64_t seed;
} worker_random;

ssize_t getrandom(void *buf, size_t n, unsigned flags)
{
    if (worker_random.on) {
        sim_bytes(&worker_random.seed, buf, n);
        return (ssize_t)n;
    }
    if (!fixed_random.on)
        return syscall(SYS_getrandom, buf, n, flags);
    sim_bytes(&fixed_random.seed, buf, n);
    return (ssize_t)n;
}

/* ---- state of the run in progress */
struct tally {
    uint64_t images, bad, untraced;
};

static struct {
    const struct workload *w;
    int threads;
    int parts; /* parts of the pool: threads, or 1 for a shared workload */
    txn_pool *p;
    char *base; /* where p is mapped, size bytes */
    size_t size;
    const uint64_t *points;
    size_t npoints, next;
    uint64_t rng;
    struct tally *t;
    char img[96], img2[96];
    void *buf;
    uint64_t rec_crash_at; /* in a recovery child: event to crash at */
    long only;             /* --image: the one point of the run to take, or -1 */
} R;

/* The exact oracle (sim_epoch_exact): one thread, several commits per
 * sync. */
static int R_exact(void)
{
    return sync_every > 1 && R.threads == 1 && sim_epoch_exact && sim_epoch_exact(R.w);
}

/* Overwritten in place, not truncated first: a file of the same size
 * keeps its pages (images are written again and again). */
static int write_file(const char *path, const void *buf, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, buf, n);
    int rc = w == (ssize_t)n && !ftruncate(fd, (off_t)n) ? 0 : -1;
    close(fd);
    return rc;
}

/* Which recent commit a refused state is, if any: a state from before the
 * last sync (lost) reads differently from one no commit ever had (torn). */
static void report_state(const struct expect *e, uint64_t d)
{
    uint64_t c = e->commits, oldest = c > MAX_SYNC_EVERY ? c - MAX_SYNC_EVERY : 0;
    long found = -1;
    for (uint64_t k = oldest; k <= c; k++)
        if (e->hist[k % (MAX_SYNC_EVERY + 1)] == d)
            found = (long)k;
    fprintf(stderr, "    commits %llu, synced %llu%s%s; the state is ",
            (unsigned long long)c, (unsigned long long)e->synced,
            e->syncing ? ", syncing" : "", e->in_commit ? ", committing" : "");
    if (found >= 0)
        fprintf(stderr, "commit %ld's\n", found);
    else
        fprintf(stderr, "none of commits %llu..%llu\n", (unsigned long long)oldest,
                (unsigned long long)c);
}

/* In a fresh process: open (recover) the image and check every thread's
 * part against what `want` (a snapshot of ex) allows. */
static int check_image(const char *path, const struct expect *want)
{
    txn_pool *p;
    int bad = sim_file_check(R.w, path);
    int rc = txn_pool_open(path, "crashsim", &p);
    if (rc) {
        fprintf(stderr, "  open: %s\n", txn_pool_strerror(rc));
        return 1;
    }
    struct reach r = {0};
    for (int t = 0; t < R.parts; t++) {
        txn *tx;
        txn_obj *part = NULL;
        if (!txn_begin(p, &tx)) {
            part = sim_part(tx, p, t);
            txn_abort(tx);
        }
        if (!part || reach_add(&r, part)) {
            fprintf(stderr, "  thread %d: no part\n", t);
            bad = 1;
            continue;
        }
        uint64_t d = 0;
        if (R.w->read_back(p, t, &d, &r)) {
            fprintf(stderr, "  thread %d: workload invariant broken\n", t);
            bad = 1;
        }
        if (!acceptable(&want[t], d)) {
            fprintf(stderr, "  thread %d: state is none of the commits since the last sync%s\n",
                    t, want[t].in_commit ? " nor the one in flight" : "");
            report_state(&want[t], d);
            bad = 1;
        }
    }
    if (layout_objects(p, reach_cb, &r)) {
        fprintf(stderr, "  layout record unreadable\n");
        bad = 1;
    }
    bad |= sim_check_alloc(p, &r);
    free(r.o);
    txn_pool_close(p);
    return bad;
}

static void recovery_hook(uint64_t event, void *arg)
{
    (void)arg;
    if (event != R.rec_crash_at)
        return;
    trace_image(R.buf, R.rng);
    _exit(write_file(R.img2, R.buf, R.size) ? 4 : 3);
}

static int open_traced(const char *path, const void *durable)
{
    txn_pool *p;
    trace_attach(R.base, R.size, durable);
    int rc = txn_pool_open(path, "crashsim", &p);
    for (int t = 0; !rc && sim_touch && t < R.parts; t++)
        sim_touch(R.w, p, t);
    if (!rc)
        txn_pool_close(p);
    return rc;
}

/* Child: crash recovery of the image at `path` at a random event, leaving
 * R.img2. */
static void crash_recovery(const char *path)
{
    void *durable = trace_buf_alloc(R.size);
    int fd = open(path, O_RDONLY);
    if (!durable || fd < 0 || read(fd, durable, R.size) != (ssize_t)R.size)
        _exit(4);
    close(fd);
    /* count recovery's events on a copy, then crash at one of them */
    write_file(R.img2, durable, R.size);
    if (open_traced(R.img2, durable))
        _exit(5);
    uint64_t n = trace_events();
    write_file(R.img2, durable, R.size);
    R.rec_crash_at = n ? sim_rand(&R.rng) % n : 0;
    trace_on_event(recovery_hook, NULL);
    open_traced(R.img2, durable);
    _exit(6); /* recovery did not reach the crash point */
}

/* ---- the checker. Recovery runs in processes forked from one forked
 * at start, before any pool was opened: a child of the running workload
 * would inherit its open pool and its transaction in progress, which an
 * engine's library may keep per process and per thread (PMDK does, and
 * then refuses to open an image of the same pool). */
struct check_req {
    int recovery_crash, quiet, threads;
    unsigned wl;
    uint64_t rng;
    char *base;
    size_t size;
    char path[112], img2[96];
    struct expect want[SIM_THREADS];
};

static struct {
    int req, res; /* pipes to and from it */
    pid_t pid;
} checker;

static int xfer(int fd, void *buf, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = out ? write(fd, (char *)buf + done, n - done)
                        : read(fd, (char *)buf + done, n - done);
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

/* In a process forked by the checker. */
static void check_child(const struct check_req *q)
{
    if (q->quiet && !freopen("/dev/null", "w", stderr))
        _exit(7);
    R.w = workloads[q->wl];
    R.threads = R.parts = q->threads;
    R.base = q->base;
    R.size = q->size;
    R.rng = q->rng;
    memcpy(R.img2, q->img2, sizeof R.img2);
    if (q->recovery_crash) {
        if (!(R.buf = trace_buf_alloc(R.size)))
            _exit(4);
        crash_recovery(q->path);
    }
    _exit(check_image(q->path, q->want));
}

static void checker_loop(void)
{
    struct check_req q;
    while (!xfer(checker.req, &q, sizeof q, 0)) {
        int st, rc = -1;
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0)
            check_child(&q);
        if (pid > 0 && waitpid(pid, &st, 0) == pid)
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (xfer(checker.res, &rc, sizeof rc, 1))
            break;
    }
    _exit(0);
}

static int checker_start(void)
{
    int req[2], res[2];
    if (pipe(req) || pipe(res))
        return -1;
    fflush(NULL);
    checker.pid = fork();
    if (checker.pid < 0)
        return -1;
    if (checker.pid == 0) {
        close(req[1]);
        close(res[0]);
        checker.req = req[0];
        checker.res = res[1];
        checker_loop();
    }
    close(req[0]);
    close(res[1]);
    checker.req = req[1];
    checker.res = res[0];
    return 0;
}

static void checker_stop(void)
{
    close(checker.req);
    close(checker.res);
    waitpid(checker.pid, NULL, 0);
}

static int run_child(int recovery_crash, const char *path, const struct expect *want)
{
    struct check_req q = {.recovery_crash = recovery_crash,
                          .quiet = R.t->bad >= 5, /* details of the first few failures
                                                     are enough */
                          .threads = R.parts,
                          .rng = R.rng,
                          .base = R.base,
                          .size = R.size};
    for (unsigned i = 0; i < sizeof workloads / sizeof *workloads; i++)
        if (workloads[i] == R.w)
            q.wl = i;
    snprintf(q.path, sizeof q.path, "%s", path);
    memcpy(q.img2, R.img2, sizeof q.img2);
    memcpy(q.want, want, sizeof q.want);
    int rc;
    fflush(stderr);
    if (xfer(checker.req, &q, sizeof q, 1) || xfer(checker.res, &rc, sizeof rc, 0))
        return -1;
    return rc;
}

/* Recover the image at `path` in fresh processes and check it. `point`:
 * the campaign's crash point the image is of (--image takes it again), or
 * -1 where points are not numbered. */
static void check_saved(const char *path, const struct expect *want, long point)
{
    int rec = sim_rand(&R.rng) % 4 == 0, crashed = 0;
    int rc = run_child(rec, path, want);
    if (rec && rc == 3) { /* recovery crashed: recover its image */
        R.t->images++;
        crashed = 1;
        rc = run_child(0, R.img2, want);
    }
    R.t->images++;
    if (rc && R.t->bad++ < 5) {
        char at[64] = "";
        if (point >= 0)
            snprintf(at, sizeof at, ", point %ld", point);
        if (crashed)
            strcat(at, ", recovery crashed");
        fprintf(stderr, "inconsistent image %llu (workload %s%s, commits %llu%s, exit %d)\n",
                (unsigned long long)R.t->images, R.w->name, at,
                (unsigned long long)want[0].commits,
                want[0].in_commit ? ", thread 0 committing" : "", rc);
    }
}

/* With several threads, a child forked now could inherit a lock another
 * thread holds (the library's, or malloc's): images are saved and checked
 * after the threads have joined. */
struct saved {
    char path[112];
    long point; /* the campaign's point (shared workloads), or -1 */
    struct expect want[SIM_THREADS];
};
static struct saved saved[IMAGES_PER_RUN * (EXHAUSTIVE_MAX + 1)];
static size_t nsaved;

static void verify(void)
{
    /* a shared run's checks draw from R.rng: after the run, so that its
     * images are the same with --image */
    int later = R.threads > 1 || R.only >= 0 || R.w->flags & WL_SHARED;
    struct saved *s = later ? &saved[nsaved] : &saved[0];
    if (later)
        snprintf(s->path, sizeof s->path, "%s.%zu", R.img, nsaved);
    else /* checked at once: one file, rewritten (run() removes it) */
        snprintf(s->path, sizeof s->path, "%s", R.img);
    ex_snapshot(s->want); /* the moment of the crash */
    if (write_file(s->path, R.buf, R.size)) {
        perror("crashsim: image");
        exit(2);
    }
    s->point = R.w->flags & WL_SHARED ? (long)(run_index * IMAGES_PER_RUN + R.next - 1) : -1;
    if (later) {
        nsaved++;
        return;
    }
    check_saved(s->path, s->want, s->point);
}

static void check_all_saved(void)
{
    for (size_t i = 0; i < nsaved; i++) {
        check_saved(saved[i].path, saved[i].want, saved[i].point);
        unlink(saved[i].path);
    }
    nsaved = 0;
}

static void crash_here(void)
{
    uint64_t combos = trace_combos(EXHAUSTIVE_MAX);
    /* a shared workload's point is one image: --image N is point N */
    if (combos <= EXHAUSTIVE_MAX && !(R.w->flags & WL_SHARED)) {
        for (uint64_t i = 0; i < combos; i++) {
            trace_image_nth(R.buf, i);
            verify();
        }
    } else if (R.w->flags & WL_SHARED) {
        /* the image's choice from the run's seed and the point's index,
         * so that --image makes it again without the points before it */
        uint64_t s = R.rng ^ (uint64_t)R.next * 0x9e3779b97f4a7c15ull;
        trace_image(R.buf, sim_rand(&s));
        verify();
    } else {
        trace_image(R.buf, sim_rand(&R.rng));
        verify();
    }
}

static void run_hook(uint64_t event, void *arg)
{
    (void)arg;
    if (event % AUDIT_EVERY == AUDIT_EVERY - 1)
        R.t->untraced += trace_audit("during the run");
    while (R.next < R.npoints && R.points[R.next] <= event) {
        if (R.points[R.next++] == event && (R.only < 0 || (long)R.next - 1 == R.only))
            crash_here();
    }
}

static txn_pool *txn_pool_of_run(void)
{
    return R.p;
}

int sim_threads(void)
{
    return R.threads;
}

/* CRASHSIM_SHARED_EXIT_RACE=1: a shared run's ended thread passes the
 * baton at once, and its exit (its library context's end, with stores and
 * fences) races the threads still running: runs are then no longer a
 * function of the seed, but a context's end meets commits in flight. */
static int exit_race(void)
{
    const char *v = getenv("CRASHSIM_SHARED_EXIT_RACE");
    return v && !strcmp(v, "1");
}

struct worker {
    int t;
    uint64_t rng;
    int rc;
};

static void *work(void *arg)
{
    struct worker *k = arg;
    int shared = R.w->flags & WL_SHARED;
    if (shared)
        sched_enter(k->t);
    else
        worker_random.on = 1, worker_random.seed = k->rng ^ 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < TX_PER_RUN && !k->rc; i++)
        k->rc = R.w->step(R.p, k->t, &k->rng);
    if (!k->rc && R.w->finish)
        k->rc = R.w->finish(k->t);
    worker_random.on = 0; /* one thread runs on the caller's, which makes pools */
    if (shared) /* one thread runs on the caller's; see exit_race */
        sched_exit(k->t, R.threads > 1 && !exit_race());
    return NULL;
}

static pthread_t tid[SIM_THREADS]; /* the run's threads */

static int join_worker(int t)
{
    return pthread_join(tid[t], NULL);
}

/* One run of the workload on a fresh pool; returns its event count. */
static uint64_t run(const struct workload *w, int threads, uint64_t seed,
                    const uint64_t *points, size_t npoints, long only, struct tally *t)
{
    char name[64];
    snprintf(name, sizeof name, "crashsim-%s-%d.pool", txn_engine_name(), (int)getpid());
    int shared = w->flags & WL_SHARED, parts = shared ? 1 : threads;
    run_w = w;
    fixed_random.on = shared;
    fixed_random.seed = seed ^ 0x3c6ef372fe94f82bull;
    txn_pool_opts o = {.size = sim_pool_size(w->pool_size, parts, threads),
                       .root_size = 8 * SIM_THREADS,
                       .threads = (unsigned)threads + 1,
                       /* the model covers the whole maximum: a pool
                                        * that does not grow says so */
                       .max_size = (w->flags & WL_GROWS ? WL_GROWTH : 1) *
                                   sim_pool_size(w->pool_size, parts, threads)};
    txn_pool *p;
    char stale[128];
    /* The name holds our pid, so no live run owns a file of that name: it
     * is left by a run killed before its cleanup whose pid we now have. */
    txn_pool_path(name, stale, sizeof stale);
    unlink(stale);
    int rc = txn_pool_create(name, "crashsim", &o, &p);
    if (rc) {
        fprintf(stderr, "crashsim: create: %s\n", txn_strerror(rc));
        exit(2);
    }
    memset(ex, 0, sizeof ex); /* no thread of the run runs yet */
    if ((rc = sim_make_parts(p, w->root_size, parts))) {
        fprintf(stderr, "crashsim: parts: %s\n", txn_strerror(rc));
        exit(2);
    }
    R.p = p; /* sim_commit syncs it */
    for (int k = 0; k < parts; k++)
        if ((rc = w->setup(p, k))) {
            fprintf(stderr, "crashsim: setup: %s\n", txn_strerror(rc));
            exit(2);
        }
    if ((rc = txn_sync(p))) {
        fprintf(stderr, "crashsim: sync: %s\n", txn_strerror(rc));
        exit(2);
    }
    for (int k = 0; k < parts; k++) { /* the run starts from here */
        ex[k].hist[ex[k].commits % (MAX_SYNC_EVERY + 1)] = w->mirror_digest(k);
        ex[k].synced = ex[k].commits;
    }
    R = (typeof(R)){.w = w, .threads = threads, .parts = parts, .p = p, .points = points,
                    .npoints = npoints, .t = t, .rng = seed ^ 0x5bd1e995, .only = only};
    void *base;
    if (sim_region(p, &base, &R.size)) {
        char path[128];
        txn_pool_close(p);
        txn_pool_path(name, path, sizeof path);
        unlink(path);
        exit(2);
    }
    R.base = base;
    R.buf = trace_buf_alloc(R.size);
    snprintf(R.img, sizeof R.img, "/dev/shm/crashsim-%d.img", (int)getpid());
    snprintf(R.img2, sizeof R.img2, "/dev/shm/crashsim-%d.img2", (int)getpid());
    if (!R.buf || trace_attach(R.base, R.size, NULL)) {
        fputs("crashsim: out of memory\n", stderr);
        exit(2);
    }
    cev.n = 0; /* the run's commits from here */
    trace_on_event(run_hook, NULL);
    /* --no-switch-in-tx: an engine whose commits and txn_sync wait for
     * the running transactions (incll's CRASHSIM_SHARED_ARGS) */
    if (shared)
        sched_begin(threads, seed, switch_in_tx);
    struct worker wk[SIM_THREADS];
    for (int k = 0; k < threads; k++) {
        wk[k] = (struct worker){k, seed * 31 + (uint64_t)k, 0};
        if (threads == 1)
            work(&wk[k]); /* one thread: deterministic event numbers */
        else if (pthread_create(&tid[k], NULL, work, &wk[k])) {
            if (shared) { /* the scheduler would wait for it forever */
                fputs("crashsim: cannot start a thread\n", stderr);
                exit(2);
            }
            wk[k].rc = TXN_E_NOMEM;
        }
    }
    for (int k = 0; threads > 1 && k < threads; k++)
        if (shared && !exit_race()) /* the ended threads, in the order they ended */
            sched_reap(join_worker);
        else
            pthread_join(tid[k], NULL);
    if (shared)
        sched_end();
    trace_lock(); /* the run's length: the events of the workload */
    uint64_t events = trace_events();
    trace_unlock();
    trace_on_event(NULL, NULL);
    if (only < 0)
        check_all_saved();
    for (int k = 0; k < threads; k++)
        if (wk[k].rc) {
            fprintf(stderr, "crashsim: %s: transaction: %s\n", w->name, txn_strerror(wk[k].rc));
            t->bad++;
        }
    /* An engine's own thread (incll's epoch thread) may still be storing:
     * the sync ends an epoch in flight, traced, and the audit takes the
     * lock those stores are made under. */
    if ((rc = txn_sync(p))) {
        fprintf(stderr, "crashsim: %s: sync: %s\n", w->name, txn_strerror(rc));
        t->bad++;
    }
    trace_lock();
    t->untraced += trace_audit("end of run");
    trace_unlock();
    /* Closed before the trace is detached: the close joins the engine's
     * threads, whose stores until then go into the model. */
    txn_pool_close(p);
    trace_detach();
    char path[128];
    txn_pool_path(name, path, sizeof path);
    unlink(path);
    unlink(R.img);
    unlink(R.img2);
    trace_buf_free(R.buf, R.size);
    return events;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* --image: the image of point `only` (kept, at s->path) is checked. */
static void check_kept(const struct saved *s, long image)
{
    char *buf = malloc(R.size);
    int fd = open(s->path, O_RDONLY);
    if (!buf || fd < 0 || read(fd, buf, R.size) != (ssize_t)R.size) {
        fprintf(stderr, "crashsim: image %ld: cannot read %s\n", image, s->path);
        exit(2);
    }
    close(fd);
    printf("image %ld: kept at %s, checksum %016llx\n", image, s->path,
           (unsigned long long)sim_hash(0, buf, R.size));
    free(buf);
    fflush(stdout);
    int rc = run_child(0, s->path, s->want);
    R.t->images++;
    if (rc) {
        R.t->bad++;
        fprintf(stderr, "inconsistent image (workload %s, commits %llu%s, exit %d)\n",
                R.w->name, (unsigned long long)s->want[0].commits,
                s->want[0].in_commit ? ", committing" : "", rc);
    }
}

/* The crash points of a run of `events` events: uniform, and for a shared
 * workload one in four within 8 events after a commit returned (where
 * a commit's durability and what the next transactions do with the blocks
 * it freed meet). */
static void choose_points(const struct workload *w, uint64_t events, uint64_t rng,
                          uint64_t *points, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        points[i] = sim_rand(&rng) % events;
        if (w->flags & WL_SHARED && i % 4 == 3 && cev.n) {
            uint64_t e = cev.ev[sim_rand(&rng) % cev.n] + 1 + sim_rand(&rng) % 8;
            points[i] = e < events ? e : events - 1;
        }
    }
    qsort(points, n, sizeof *points, cmp_u64);
}

static void campaign(const struct workload *w, int threads, uint64_t images, uint64_t seed,
                     long image, struct tally *all)
{
    struct tally t = {0};
    uint64_t points[IMAGES_PER_RUN];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* a shared workload's runs always have IMAGES_PER_RUN points, so that
     * point N is in run N / IMAGES_PER_RUN whatever the image count */
    int full = w->flags & WL_SHARED;
    for (uint64_t r = image >= 0 ? (uint64_t)image / IMAGES_PER_RUN : 0; t.images < images; r++) {
        uint64_t s = seed * 7919 + r, rng = s ^ 0xa5a5;
        run_index = r;
        uint64_t events = run(w, threads, s, NULL, 0, -1, &t); /* how long is a run? */
        size_t n = images - t.images < IMAGES_PER_RUN && !full ? images - t.images
                                                               : IMAGES_PER_RUN;
        choose_points(w, events, rng, points, n);
        if (image < 0) {
            run(w, threads, s, points, n, -1, &t);
            continue;
        }
        run(w, threads, s, points, n, (long)(image % IMAGES_PER_RUN), &t);
        if (nsaved != 1) {
            fprintf(stderr, "crashsim: image %ld was not taken\n", image);
            exit(2);
        }
        check_kept(&saved[0], image);
        nsaved = 0;
        break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%s/%s: crash images %llu, inconsistent %llu, untraced %llu, %.0f images/s\n",
           txn_engine_name(), w->name, (unsigned long long)t.images,
           (unsigned long long)t.bad, (unsigned long long)t.untraced, (double)t.images / sec);
    fflush(stdout);
    all->images += t.images;
    all->bad += t.bad;
    all->untraced += t.untraced;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"workload", required_argument, 0, 'w'},
                                         {"images", required_argument, 0, 'n'},
                                         {"seed", required_argument, 0, 's'},
                                         {"threads", required_argument, 0, 't'},
                                         {"sync-every", required_argument, 0, 'k'},
                                         {"image", required_argument, 0, 'i'},
                                         {"no-switch-in-tx", no_argument, 0, 'x'},
                                         {0, 0, 0, 0}};
    const char *only = NULL;
    uint64_t images = 2000, seed = 1;
    int threads = 1;
    long image = -1;
    for (int c; (c = getopt_long(argc, argv, "w:n:s:t:k:i:x", opts, NULL)) != -1;) {
        if (c == 'w')
            only = optarg;
        else if (c == 'n')
            images = strtoull(optarg, NULL, 10);
        else if (c == 's')
            seed = strtoull(optarg, NULL, 10);
        else if (c == 't' && atoi(optarg) >= 1 && atoi(optarg) <= SIM_THREADS)
            threads = atoi(optarg);
        else if (c == 'k' && atoi(optarg) >= 1 && atoi(optarg) <= MAX_SYNC_EVERY)
            sync_every = (unsigned)atoi(optarg);
        else if (c == 'i' && atol(optarg) >= 0)
            image = atol(optarg);
        else if (c == 'x')
            switch_in_tx = 0;
        else {
            fprintf(stderr,
                    "usage: %s [--workload slots|list|mix|leaf|sparse|migrate|extend|masstree|"
                    "sqlite|kv|shared|masstree-shared|kv-shared|churn]"
                    " [--images N] [--seed S]"
                    " [--threads 1..%d] [--sync-every 1..%d] [--image N] [--no-switch-in-tx]\n",
                    argv[0], SIM_THREADS, MAX_SYNC_EVERY);
            return 2;
        }
    }
    struct tally all = {0};
    int found = 0;
    if (checker_start()) {
        perror("crashsim: checker");
        return 2;
    }
    for (size_t i = 0; i < sizeof workloads / sizeof *workloads; i++)
        if (workloads[i] && (only ? !strcmp(only, workloads[i]->name) : !(workloads[i]->flags & WL_BY_NAME))) {
            if (threads > 1 && workloads[i]->flags & WL_ONE_THREAD) {
                fprintf(stderr, "crashsim: %s runs on one thread\n", workloads[i]->name);
                return 2;
            }
            if (image >= 0 && !(workloads[i]->flags & WL_SHARED)) {
                fprintf(stderr, "crashsim: --image needs a shared workload (%s is not)\n",
                        workloads[i]->name);
                return 2;
            }
            found = 1;
            campaign(workloads[i], threads, image >= 0 ? 1 : images, seed, image, &all);
        }
    checker_stop();
    if (!found) {
        fprintf(stderr, "crashsim: no workload named %s\n", only);
        return 2;
    }
    printf("crash images: %llu, inconsistent: %llu, untraced stores: %llu\n",
           (unsigned long long)all.images, (unsigned long long)all.bad,
           (unsigned long long)all.untraced);
    return all.bad || all.untraced;
}
