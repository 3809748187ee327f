/* run.c - the runs of one row: P-Retain's migration, then the update
 * programs one after the other on one file, or interleaved in processes
 * of their own, and the medians of what they measured.
 *
 * Each run: P-Retain (a program of its own: it opens, migrates and closes
 * the pool), then P-Manual on the migrated pool, P-Auto on the original
 * pool and, on Layout-Add, P-Original' (the original program, no
 * retention, running the update input on the original pool), in an order
 * that rotates from run to run. By default they run one after the other,
 * each on the same file, the original copied over it in place before each
 * (and migrated for P-Manual): every program runs on the same memory, at
 * the same address (with a file per program, the physical pages under
 * each differed, and so did identical programs). With --block, each
 * program runs in a process of its own with its pool open (a file each),
 * and they take turns, block after block (the order rotating from block to
 * block). P-Auto against P-Manual is the paper's overhead; it includes
 * what the migration changed besides the layout (the nodes' size class;
 * P-Retain keeps their order in the heap). P-Auto against P-Original', the
 * same pool and heap, is what the extendible structs themselves cost. */
#include <unistd.h>

#include "retain.h"

enum { MANUAL, AUTO, ORIGINAL_SAME, PROGS };

static const char *const prog_name[PROGS] = {"P-Manual", "P-Auto", "P-Original'"};
static const txn_layout v1 = {"retain-bench", 1, NULL, 0, NULL, 0, 0};

/* What the runs of one row share. */
struct row {
    const struct node_layout *L1;  /* the original layout */
    const struct node_layout *L[PROGS];
    const txn_layout *lay[PROGS];
    const uint32_t *orig, *keys;   /* the original's input, the update's */
    size_t n, want;                /* update operations, keys they find */
    unsigned np;                   /* programs: P-Original' on Layout-Add */
    unsigned nb;                   /* hash buckets */
    txn_layout v2;                 /* the new version, with the migration */
};

/* What each run measured, for the medians. */
struct samples {
    double retain[REPS_MAX], manual[REPS_MAX], autom[REPS_MAX], same[REPS_MAX];
    double d_auto[REPS_MAX];              /* T(P-Auto) - T(P-Manual) */
    double ov_cpu[REPS_MAX], ov_wall[REPS_MAX]; /* P-Auto / P-Manual - 1 */
    double lx_cpu[REPS_MAX], lx_wall[REPS_MAX]; /* P-Auto / P-Original' - 1 */
};

/* P-Retain: the original pool copied over the work file, then migrated to
 * v2 there (timed; its bytes counted). */
static void retain_copy(const struct row *w, double *t, struct measure *m)
{
    txn_pool *p;
    int rc;
    if (copy_file(pool_file(POOL_ORIG), pool_file(POOL_WORK)))
        die("copy", TXN_E_IO);
    uint64_t b0 = stored();
    double t0 = now_s();
    unsigned tries = 0;
    while ((rc = txn_layout_open(pool_file(POOL_WORK), &w->v2, NULL, 0, &p)) == TXN_E_IO &&
           g_opt.interrupt && ++tries < 1000000)
        ; /* an interrupted migration resumes */
    if (rc)
        die("P-Retain", rc);
    *t = now_s() - t0;
    m->b_retain = stored() - b0;
    txn_pool_close(p);
}

/* Run r, one program after the other on the work file made anew in
 * place: the same memory under every program. Each runs even on an empty
 * input (the sweep's 0.1% at N < 500): P-Retain migrates all the same. */
static void run_in_turn(const struct row *w, unsigned r, struct prog pg[PROGS], double *t_retain,
                        struct measure *m)
{
    for (unsigned i = 0; i < w->np; i++) {
        unsigned q = (i + r) % w->np;
        if (q == MANUAL)
            retain_copy(w, t_retain, m);
        else if (copy_file(pool_file(POOL_ORIG), pool_file(POOL_WORK)))
            die("copy", TXN_E_IO);
        prog_open(&pg[q], prog_name[q], pool_file(POOL_WORK), w->lay[q], w->L[q], w->nb);
        prog_ops(&pg[q], w->keys, 0, w->n);
        prog_close(&pg[q], w->want);
    }
}

/* Run r, the programs in processes of their own (a file each) taking
 * turns block after block. */
static void run_interleaved(const struct row *w, unsigned r, struct prog pg[PROGS],
                            double *t_retain, struct measure *m)
{
    static const enum pool_file file[PROGS] = {POOL_WORK, POOL_WORK2, POOL_WORK3};
    struct child ch[PROGS];
    retain_copy(w, t_retain, m); /* P-Manual's pool first: the children open theirs at once */
    for (unsigned q = 0; q < w->np; q++) {
        if (q > 0 && copy_file(pool_file(POOL_ORIG), pool_file(file[q])))
            die("copy", TXN_E_IO);
        child_start(&ch[q], prog_name[q], pool_file(file[q]), w->lay[q], w->L[q], w->nb, w->keys,
                    w->want);
    }
    for (size_t from = 0, b = 0; from < w->n; from += g_opt.block, b++)
        for (unsigned i = 0; i < w->np; i++) {
            size_t to = from + g_opt.block < w->n ? from + g_opt.block : w->n;
            child_run(&ch[(i + r + b) % w->np], from, to);
        }
    for (unsigned q = 0; q < w->np; q++) {
        child_end(&ch[q]);
        pg[q] = ch[q].g;
    }
}

static void run_once(const struct row *w, unsigned r, struct samples *s, struct measure *m)
{
    struct prog pg[PROGS];
    /* each run on a pool of its own, built anew: a new address (a pool
     * maps where it was made) and new pages, whose placement in the caches
     * and TLBs changes from run to run (docs/retention.md) */
    if (r > 0) {
        double t;
        uint64_t bytes;
        p_original(w->L1, w->orig, g_opt.n, &t, &bytes);
    }
    unlink(pool_file(POOL_WORK));
    if (g_opt.block)
        run_interleaved(w, r, pg, &s->retain[r], m);
    else
        run_in_turn(w, r, pg, &s->retain[r], m);
    m->b_manual = pg[MANUAL].bytes;
    m->b_auto = pg[AUTO].bytes;
    struct stamp man = pg[MANUAL].t, aut = pg[AUTO].t;
    struct stamp same = w->np > ORIGINAL_SAME ? pg[ORIGINAL_SAME].t : aut;
    s->manual[r] = man.cpu;
    s->autom[r] = aut.cpu;
    s->same[r] = same.cpu;
    s->d_auto[r] = aut.cpu - man.cpu;
    s->ov_cpu[r] = aut.cpu / man.cpu - 1;
    s->ov_wall[r] = aut.wall / man.wall - 1;
    s->lx_cpu[r] = aut.cpu / same.cpu - 1;
    s->lx_wall[r] = aut.wall / same.wall - 1;
}

static void summarise(struct samples *s, unsigned reps, struct measure *m)
{
    m->reps = reps;
    m->t_retain = median(s->retain, reps);
    m->t_manual = median(s->manual, reps);
    m->t_auto = median(s->autom, reps);
    m->t_same = median(s->same, reps);
    m->d_auto = median(s->d_auto, reps);
    quartiles(s->ov_cpu, reps, m->ov_cpu);
    quartiles(s->ov_wall, reps, m->ov_wall);
    quartiles(s->lx_cpu, reps, m->lx_cpu);
    quartiles(s->lx_wall, reps, m->lx_wall);
}

void p_update(const struct node_layout *L1, const struct node_layout *L2,
              const struct node_layout *La, const uint32_t *orig, const uint32_t *keys, size_t n,
              size_t want, unsigned reps, int same, struct measure *m)
{
    struct migration mig;
    unsigned nb = hash_buckets(g_opt.n);
    if (migration_init(&mig, L1, L2, nb))
        die("migration", TXN_E_NOMEM);
    const txn_migration step = migration_step(&mig);
    struct row w = {
        .L1 = L1,
        .L = {L2, La, L1},
        .lay = {&w.v2, &v1, &v1},
        .orig = orig,
        .keys = keys,
        .n = n,
        .want = want,
        .np = same ? 3 : 2,
        .nb = nb,
        .v2 = {"retain-bench", 2, NULL, 0, &step, 1, BATCH},
    };
    struct samples s;
    for (unsigned r = 0; r < reps; r++)
        run_once(&w, r, &s, m);
    migration_release(&mig);
    unlink(pool_file(POOL_WORK));
    unlink(pool_file(POOL_WORK2));
    unlink(pool_file(POOL_WORK3));
    m->same = same;
    summarise(&s, reps, m);
}
