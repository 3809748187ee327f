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
 * allocator oracle. One thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "txn.h"
#include "txn_check.h"

#define MAX_COMMITS 100000
#define LAYOUT "crashsim"

/* The run's commits: how many returned 0, and the digest after each
 * (one thread: no lock). */
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

void sim_point(void)
{
}

int sim_threads(void)
{
    return 1;
}

/* wl_sqlite is weak (NULL when SQLite is not built in): skipped then */
static const struct workload *const workloads[] = {
    &wl_slots, &wl_list, &wl_mix, &wl_kv, &wl_churn, &wl_churn_grow, &wl_masstree, &wl_sqlite};

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
                       .threads = 2,
                       .max_size = w->flags & WL_GROWS ? WL_GROWTH * w->pool_size : 0};
    int rc = txn_pool_create(path, LAYOUT, &o, &p);
    if (rc) {
        fprintf(stderr, "wl_check: create %s: %s\n", path, txn_strerror(rc));
        return 1;
    }
    uint64_t rng = seed * 31;
    if (!(rc = sim_make_parts(p, w->root_size, 1)) && !(rc = w->setup(p, 0)) &&
        !(rc = txn_sync(p))) {
        *setup_end = commits;
        if (hist && commits < MAX_COMMITS)
            hist[commits] = w->mirror_digest(0);
        for (uint64_t i = 0; !rc && i < steps; i++)
            rc = w->step(p, 0, &rng);
        if (!rc && w->finish)
            rc = w->finish(0);
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
    int bad = run(w, ref, steps, seed, &setup_end);
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
        } else {
            break;
        }
    }
    if (!w || i != argc - 1) {
        fputs("usage: wl_check --workload slots|list|mix|kv|churn|churn-grow|masstree|sqlite "
              "[--steps N] [--seed S] [--verify] POOL\n",
              stderr);
        return 2;
    }
    if (check)
        return verify(w, argv[i], steps, seed);
    uint64_t setup_end;
    return run(w, argv[i], steps, seed, &setup_end);
}
