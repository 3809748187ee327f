/* wl_check.c - a crash simulator workload (tests/crashsim/sim.h: slots,
 * list, mix, kv, churn, churn-grow, whose pool grows, masstree, and sqlite
 * where SQLite is built) run as a program of its own, linked with
 * libtxn-<engine>-check, and checked by txn-crashcheck with the workload's
 * own oracle (docs/crashcheck.md: our campaigns through the one checker):
 *
 *   wl_check --workload W [--steps N] [--seed S] POOL
 *       create POOL, the workload's setup, N of its transactions
 *   wl_check --workload W [--steps N] [--seed S] --verify POOL
 *       CMD: exit 0 when the recovered POOL holds a state the run may
 *       leave at the crash txn-crashcheck describes
 *
 * The oracle is the simulator's: before each commit the workload names
 * the digest its state will have if the commit takes effect (sim_commit),
 * and after recovery it reads the pool back into a digest. --verify runs
 * the same workload from the same seed again on a scratch pool of its own
 * (POOL.ref, removed) to learn the digest after each commit, and accepts
 * the recovered pool's digest when it is that of the commits returned at
 * the crash (TXN_CHECK_COMMITTED), or of one more while one was in flight
 * (TXN_CHECK_INFLIGHT); on incll, any from the last completed txn_sync's
 * (TXN_CHECK_SYNCED) on. Every txn_commit of the program is counted (the
 * link wraps it), as the checker counts them. The objects the read back
 * reaches are named to the leak check (txn_check_reach), the simulator's
 * allocator oracle.
 *
 *   wl_check --workload shared|kv-shared|masstree-shared --threads T ...
 *       a shared workload (sim.h's WL_SHARED): T threads on one part, each
 *       making N transactions, run only under txn-crashcheck
 *       --threads-sched. The workloads' one mirror assumes that no other
 *       thread runs between their switch points (sim_point, sim_lock), as
 *       under the crash simulator's scheduler, so the program asks the
 *       library's scheduler to switch only there
 *       (txn_check_marked_switches). --verify learns the digests from a
 *       reference run of PROGRAM's schedule: this program run again, traced
 *       to /dev/null under the library's scheduler from the run's seed
 *       (TXN_CHECK_RUN_SEED), once: its history is kept in the file the
 *       checker gives CMD (TXN_CHECK_CMD_FILE; POOL.ref.hist, removed,
 *       without it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"
#include "txn.h"
#include "txn_check.h"

#define MAX_COMMITS 100000
#define LAYOUT "crashsim"

/* The run's commits: how many returned 0, and the digest after each
 * (one thread, or one at a time under the scheduler: no lock). */
static uint64_t commits;
static uint64_t *hist; /* hist[k]: the digest after k commits, or 0 unknown */

int __real_txn_commit(txn *tx);

/* Every commit, the workload's and its store's own: a commit that is not
 * the workload's (sim_commit) leaves its digest as it was. */
int __wrap_txn_commit(txn *tx)
{
    int rc = __real_txn_commit(tx);
    if (!rc && ++commits < MAX_COMMITS && hist)
        hist[commits] = hist[commits - 1];
    return rc;
}

int sim_commit(txn *tx, int t, uint64_t next)
{
    (void)t;
    int rc = txn_commit(tx);
    if (!rc && commits < MAX_COMMITS && hist)
        hist[commits] = next;
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

/* The run's threads (--threads): set before they start. */
static int nthreads = 1;

/* sim_lock's locks: the program's mutexes, which the library's scheduler
 * knows (a lock held by a parked thread passes the baton). */
static pthread_mutex_t locks[SIM_LOCKS];

/* The crash simulator's switch points, the only ones under
 * txn_check_marked_switches (inside a transaction where the engine takes
 * them). No-ops in a run of one thread. */
void sim_point(void)
{
    txn_check_point();
}

void sim_point_txn(void)
{
    txn_check_point();
}

void sim_lock(int i)
{
    txn_check_point();
    pthread_mutex_lock(&locks[i]);
}

void sim_unlock(int i)
{
    pthread_mutex_unlock(&locks[i]);
    txn_check_point();
}

int sim_threads(void)
{
    return nthreads;
}

/* wl_sqlite is weak (NULL when SQLite is not built in): skipped then */
static const struct workload *const workloads[] = {
    &wl_slots, &wl_list,   &wl_mix,        &wl_kv,         &wl_churn,         &wl_churn_grow,
    &wl_masstree, &wl_sqlite, &wl_shared, &wl_kv_shared, &wl_masstree_shared};

struct worker {
    const struct workload *w;
    txn_pool *p;
    int t;
    uint64_t rng, steps;
    int rc;
};

/* The key-value store seeds its random numbers (eviction's order) from
 * getrandom(2), for each store: a worker draws from its own stream of the
 * run's seed instead (this definition takes libc's place in the program),
 * so that the --verify's run evicts the keys the checked run evicted, as
 * the crash simulator's workers do. Other calls (the pool's, outside the
 * workers) go to the kernel, or to the checker's seed (check/record.c). */
static _Thread_local struct {
    int on;
    uint64_t seed;
} worker_random;

ssize_t getrandom(void *buf, size_t n, unsigned flags)
{
    if (!worker_random.on)
        return syscall(SYS_getrandom, buf, n, flags);
    sim_bytes(&worker_random.seed, buf, n);
    return (ssize_t)n;
}

static void *work(void *arg)
{
    struct worker *k = arg;
    worker_random.on = 1, worker_random.seed = k->rng ^ 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; !k->rc && i < k->steps; i++)
        k->rc = k->w->step(k->p, k->t, &k->rng);
    if (!k->rc && k->w->finish)
        k->rc = k->w->finish(k->t);
    worker_random.on = 0; /* one thread runs on main's */
    return NULL;
}

/* The run: the pool made as the simulator makes it for one thread, the
 * workload's setup, `steps` transactions. The commits the setup ends at in
 * *setup_end. 0, or 1 with a message. */
static int run(const struct workload *w, const char *path, uint64_t steps, uint64_t seed,
               uint64_t *setup_end)
{
    txn_pool *p;
    /* one part: the size sim_pool.c gives pmtx's format for it */
    txn_pool_opts o = {.size = w->pool_size,
                       .root_size = 8 * SIM_THREADS,
                       .threads = (unsigned)nthreads + 1,
                       .max_size = w->flags & WL_GROWS ? WL_GROWTH * w->pool_size : 0};
    int rc = txn_pool_create(path, LAYOUT, &o, &p);
    if (rc) {
        fprintf(stderr, "wl_check: create %s: %s\n", path, txn_strerror(rc));
        return 1;
    }
    if (!(rc = sim_make_parts(p, w->root_size, 1)) && !(rc = w->setup(p, 0)) &&
        !(rc = txn_sync(p))) {
        *setup_end = commits;
        if (hist && commits < MAX_COMMITS)
            hist[commits] = w->mirror_digest(0);
        /* thread k's generator as the crash simulator seeds it */
        struct worker wk[SIM_THREADS];
        pthread_t tid[SIM_THREADS];
        int started = 0;
        for (int k = 0; k < nthreads; k++)
            wk[k] = (struct worker){w, p, k, seed * 31 + (uint64_t)k, steps, 0};
        if (nthreads == 1)
            work(&wk[0]);
        for (int k = 0; nthreads > 1 && k < nthreads; k++, started++)
            if (pthread_create(&tid[k], NULL, work, &wk[k])) {
                rc = TXN_E_NOMEM;
                break;
            }
        for (int k = 0; k < started; k++)
            pthread_join(tid[k], NULL);
        for (int k = 0; !rc && k < nthreads; k++)
            rc = wk[k].rc;
    }
    txn_pool_close(p);
    if (rc)
        fprintf(stderr, "wl_check: the workload %s: %s\n", w->name, txn_strerror(rc));
    return rc != 0;
}

static uint64_t env_u64(const char *name)
{
    const char *v = getenv(name);
    return v ? strtoull(v, NULL, 10) : 0;
}

/* The reference run's history file: a key naming the run (the
 * workload, its steps, seed and threads, the seed of PROGRAM's run), the
 * commits, setup_end, then the digest after each commit. */
#define HIST_MAGIC 0x31545349484c57ull /* "WLHIST1" */

static uint64_t hist_key(const struct workload *w, uint64_t steps, uint64_t seed,
                         const char *run_seed)
{
    char k[256];
    int n = snprintf(k, sizeof k, "%s %llu %llu %d %s", w->name, (unsigned long long)steps,
                     (unsigned long long)seed, nthreads, run_seed);
    return sim_hash(HIST_MAGIC, k, (size_t)n < sizeof k ? (size_t)n : sizeof k);
}

/* --hist FILE: written for the --verify that started this run. */
static int write_hist(const char *file, uint64_t key, uint64_t setup_end)
{
    FILE *f = fopen(file, "wb");
    uint64_t n = commits < MAX_COMMITS ? commits : MAX_COMMITS - 1;
    uint64_t head[4] = {HIST_MAGIC, key, n, setup_end};
    int bad = !f || fwrite(head, sizeof head, 1, f) != 1 ||
              fwrite(hist, sizeof *hist, n + 1, f) != n + 1;
    if (f && fclose(f))
        bad = 1;
    if (bad)
        fprintf(stderr, "wl_check: cannot write %s\n", file);
    return bad;
}

/* The history of the run `key` names, from `file`: 0, or 1 when the file
 * is missing, cut short or another run's. */
static int read_hist(const char *file, uint64_t key, uint64_t *setup_end)
{
    FILE *f = fopen(file, "rb");
    uint64_t head[4];
    int bad = !f || fread(head, sizeof head, 1, f) != 1 || head[0] != HIST_MAGIC ||
              head[1] != key || head[2] >= MAX_COMMITS ||
              fread(hist, sizeof *hist, head[2] + 1, f) != head[2] + 1;
    if (f)
        fclose(f);
    if (!bad) {
        commits = head[2];
        *setup_end = head[3];
    }
    return bad;
}

/* The reference run of a shared workload: this program again, on
 * POOL.ref, under the library's scheduler from the run's seed, so that its
 * threads take the traced run's turns. Its history is kept in the file
 * txn-crashcheck gives CMD (TXN_CHECK_CMD_FILE), so that one reference
 * run serves every image. 0, or 2 with a message. */
static int reference(const struct workload *w, const char *ref, uint64_t steps, uint64_t seed,
                     uint64_t *setup_end)
{
    const char *run_seed = getenv("TXN_CHECK_RUN_SEED"), *keep = getenv("TXN_CHECK_CMD_FILE");
    if (!run_seed) {
        fputs("wl_check: --threads --verify runs as txn-crashcheck's CMD (TXN_CHECK_RUN_SEED)\n",
              stderr);
        return 2;
    }
    uint64_t key = hist_key(w, steps, seed, run_seed);
    char file[4300], a_steps[32], a_seed[32], a_threads[16];
    snprintf(file, sizeof file, "%s.hist", ref);
    if (keep && *keep && strlen(keep) < sizeof file)
        snprintf(file, sizeof file, "%s", keep);
    else
        keep = NULL;
    if (keep && !read_hist(file, key, setup_end))
        return 0;
    snprintf(a_steps, sizeof a_steps, "%llu", (unsigned long long)steps);
    snprintf(a_seed, sizeof a_seed, "%llu", (unsigned long long)seed);
    snprintf(a_threads, sizeof a_threads, "%d", nthreads);
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0) {
        /* the traced run's environment (txn-crashcheck's PROGRAM run) */
        setenv("TXN_CHECK_TRACE", "/dev/null", 1);
        setenv("TXN_CHECK_POOL", ref, 1);
        setenv("TXN_CHECK_SEED", run_seed, 1);
        setenv("TXN_CHECK_SCHED", "1", 1);
        setenv("TXN_EPOCH_MS", "0", 1);
        unsetenv("TXN_CHECK_RECOVER");
        unsetenv("TXN_CHECK_WHERE");
        unsetenv("TXN_CHECK_REACH");
        execl("/proc/self/exe", "wl_check", "--workload", w->name, "--steps", a_steps, "--seed",
              a_seed, "--threads", a_threads, "--hist", file, ref, (char *)NULL);
        fprintf(stderr, "wl_check: exec: %s\n", strerror(errno));
        _exit(127);
    }
    int st, bad = 2;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && !WEXITSTATUS(st) && !read_hist(file, key, setup_end))
        bad = 0;
    else
        fputs("wl_check: the reference run failed\n", stderr);
    if (!keep)
        unlink(file);
    return bad;
}

/* The recovered pool against the reference run's digests. */
static int verify(const struct workload *w, const char *path, uint64_t steps, uint64_t seed)
{
    char ref[4200];
    uint64_t setup_end = 0;
    snprintf(ref, sizeof ref, "%s.ref", path);
    hist = calloc(MAX_COMMITS, sizeof *hist);
    if (!hist) {
        fputs("wl_check: out of memory\n", stderr);
        return 2;
    }
    unlink(ref);
    int bad = nthreads > 1 ? reference(w, ref, steps, seed, &setup_end)
                           : run(w, ref, steps, seed, &setup_end);
    unlink(ref);
    if (bad)
        return 2;
    uint64_t c = env_u64("TXN_CHECK_COMMITTED"), f = env_u64("TXN_CHECK_INFLIGHT");
    uint64_t lo = c, hi = c + f;
    if (!strcmp(txn_engine_name(), "incll")) /* durable at txn_sync only */
        lo = env_u64("TXN_CHECK_SYNCED");
    if (lo < setup_end)
        return 0; /* the state may be one before the workload's first: the
                     pool opened, nothing more to compare */
    if (hi > commits) {
        fprintf(stderr, "wl_check: %llu commits at the crash, the run made %llu\n",
                (unsigned long long)hi, (unsigned long long)commits);
        return 1;
    }
    txn_pool *p;
    int rc = txn_pool_open(path, LAYOUT, &p);
    if (rc) {
        fprintf(stderr, "wl_check: open %s: %s\n", path, txn_strerror(rc));
        return 1;
    }
    struct reach r = {0};
    uint64_t d = 0;
    txn *tx;
    if (!txn_begin(p, &tx)) { /* the part the root holds (sim_make_parts) */
        txn_obj *part = sim_part(tx, p, 0);
        txn_abort(tx);
        if (part)
            reach_add(&r, part);
    }
    if (w->read_back(p, 0, &d, &r)) {
        fprintf(stderr, "wl_check: the workload's invariants do not hold\n");
        bad = 1;
    }
    /* the allocator oracle: what the workload reaches is what is live,
     * compared by the -check library at the close (txn_check.h) */
    txn_check_reach(p, NULL);
    for (size_t i = 0; i < r.n; i++)
        txn_check_reach(p, r.o[i]);
    txn_pool_close(p);
    free(r.o);
    for (uint64_t k = lo; !bad && k <= hi; k++)
        if (hist[k] == d)
            return 0;
    if (!bad)
        fprintf(stderr,
                "wl_check: the pool's digest %016llx is no state of commits %llu to %llu "
                "(after %llu: %016llx)\n",
                (unsigned long long)d, (unsigned long long)lo, (unsigned long long)hi,
                (unsigned long long)lo, (unsigned long long)hist[lo]);
    return 1;
}

int main(int argc, char **argv)
{
    const struct workload *w = NULL;
    uint64_t steps = 120, seed = 1;
    int check = 0, i = 1;
    const char *hist_file = NULL;
    for (; i < argc - 1; i++) {
        if (!strcmp(argv[i], "--verify")) {
            check = 1;
        } else if (i + 1 < argc - 1 && !strcmp(argv[i], "--workload")) {
            for (size_t k = 0; k < sizeof workloads / sizeof workloads[0]; k++)
                if (workloads[k] && !strcmp(workloads[k]->name, argv[i + 1]))
                    w = workloads[k];
            i++;
        } else if (i + 1 < argc - 1 && !strcmp(argv[i], "--steps")) {
            steps = strtoull(argv[++i], NULL, 10);
        } else if (i + 1 < argc - 1 && !strcmp(argv[i], "--seed")) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (i + 1 < argc - 1 && !strcmp(argv[i], "--threads")) {
            nthreads = atoi(argv[++i]);
        } else if (i + 1 < argc - 1 && !strcmp(argv[i], "--hist")) {
            hist_file = argv[++i];
        } else {
            break;
        }
    }
    if (!w || i != argc - 1 || nthreads < 1 || nthreads > SIM_THREADS) {
        fputs("usage: wl_check --workload slots|list|mix|kv|churn|churn-grow|masstree|sqlite "
              "[--steps N] [--seed S] [--verify] POOL\n"
              "       wl_check --workload shared|kv-shared|masstree-shared --threads 2-4 "
              "[--steps N] [--seed S] [--verify] POOL\n",
              stderr);
        return 2;
    }
    if (!(w->flags & WL_SHARED) && nthreads > 1) {
        fprintf(stderr, "wl_check: %s runs with one thread\n", w->name);
        return 2;
    }
    for (int k = 0; k < SIM_LOCKS; k++)
        pthread_mutex_init(&locks[k], NULL);
    if (nthreads > 1 && !check) {
        /* the mirror is right only when the threads run one at a time,
         * switching at its points alone */
        const char *sched = getenv("TXN_CHECK_SCHED");
        if (!sched || strcmp(sched, "1")) {
            fputs("wl_check: --threads runs under txn-crashcheck --threads-sched\n", stderr);
            return 2;
        }
        txn_check_marked_switches();
    }
    if (check)
        return verify(w, argv[i], steps, seed);
    if (hist_file && !(hist = calloc(MAX_COMMITS, sizeof *hist))) {
        fputs("wl_check: out of memory\n", stderr);
        return 2;
    }
    uint64_t setup_end;
    int rc = run(w, argv[i], steps, seed, &setup_end);
    if (!rc && hist_file) {
        const char *run_seed = getenv("TXN_CHECK_SEED");
        rc = write_hist(hist_file, hist_key(w, steps, seed, run_seed ? run_seed : ""), setup_end);
    }
    return rc;
}
