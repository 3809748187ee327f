/* crashsim.c - the crash simulator: runs workloads on one engine with
 * every store, flush and fence traced (trace.h), takes crash images at
 * random points, recovers each in a fresh process, and checks it against
 * the workload's oracle and the allocator. One crash image in four also
 * crashes recovery itself at a random point and recovers that image again.
 *
 *   crashsim-<engine> [--workload slots|list|mix] [--images N] [--seed S]
 *
 * Last line: "crash images: N, inconsistent: K, untraced stores: U"; the
 * exit status is 0 only when K = U = 0.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "common.h"
#include "engine.h"
#include "pool.h"
#include "sim.h"
#include "trace.h"

#define TX_PER_RUN 120
#define IMAGES_PER_RUN 48
#define EXHAUSTIVE_MAX 6 /* enumerate every image when there are so few */
#define AUDIT_EVERY 2048 /* events between untraced-store audits */

static const struct workload *const workloads[] = {&wl_slots, &wl_list, &wl_mix};

/* ---- the oracle: digests of every committed state of this run */
static struct {
    uint64_t *d;
    size_t n, cap;
    uint64_t pending; /* digest if the commit in flight takes effect */
    int in_commit;
} ex;

static void expect_push(uint64_t d)
{
    if (ex.n == ex.cap) {
        ex.cap = ex.cap ? ex.cap * 2 : 256;
        ex.d = realloc(ex.d, ex.cap * sizeof *ex.d);
        if (!ex.d) {
            perror("crashsim");
            exit(2);
        }
    }
    ex.d[ex.n++] = d;
}

int sim_commit(txn *tx, uint64_t next)
{
    ex.pending = next;
    ex.in_commit = 1;
    int rc = txn_commit(tx);
    ex.in_commit = 0;
    if (!rc)
        expect_push(next);
    return rc;
}

uint64_t sim_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t sim_hash(uint64_t h, const void *p, size_t n)
{
    return csum64(h, p, n);
}

int reach_add(struct reach *r, txn_obj *o)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        txn_obj **a = realloc(r->o, r->cap * sizeof *a);
        if (!a)
            return -1;
        r->o = a;
    }
    r->o[r->n++] = o;
    return 0;
}

/* ---- state of the run in progress */
struct tally {
    uint64_t images, bad, untraced;
};

static struct {
    const struct workload *w;
    txn_pool *p;
    const uint64_t *points;
    size_t npoints, next;
    uint64_t rng;
    struct tally *t;
    char img[96], img2[96];
    void *buf;
    uint64_t rec_crash_at; /* in a recovery child: event to crash at */
} R;

static int write_file(const char *path, const void *buf, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, buf, n);
    close(fd);
    return w == (ssize_t)n ? 0 : -1;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

struct blocks {
    void **b;
    size_t n, cap, live, stray;
};

static void on_live(void *blk, size_t size, void *arg)
{
    (void)size;
    struct blocks *s = arg;
    if (bsearch(&blk, s->b, s->n, sizeof *s->b, cmp_ptr))
        s->live++;
    else if (s->stray++ < 3)
        fprintf(stderr, "  leaked block %p\n", blk);
}

/* Reachable blocks = live blocks, each once. */
static int check_alloc(txn_pool *p, const struct reach *r)
{
    struct blocks s = {0};
    s.cap = 2 * (r->n + 1);
    s.b = malloc(s.cap * sizeof *s.b);
    if (!s.b)
        return 1;
    s.n = (size_t)eng_obj_blocks(p, txn_root(p), s.b);
    for (size_t i = 0; i < r->n; i++)
        s.n += (size_t)eng_obj_blocks(p, r->o[i], s.b + s.n);
    qsort(s.b, s.n, sizeof *s.b, cmp_ptr);
    int bad = 0;
    for (size_t i = 1; i < s.n; i++)
        if (s.b[i] == s.b[i - 1]) {
            fprintf(stderr, "  block %p reached twice\n", s.b[i]);
            bad = 1;
        }
    alloc_foreach_live(p, on_live, &s);
    if (s.live != s.n) {
        fprintf(stderr, "  %zu reachable blocks, %zu of them allocated\n", s.n, s.live);
        for (size_t i = 0; i < s.n; i++)
            if (!alloc_block_size(p, s.b[i], 1))
                fprintf(stderr, "  reachable block %p (pool offset %#zx) is free\n", s.b[i],
                        (size_t)((char *)s.b[i] - p->base));
        bad = 1;
    }
    free(s.b);
    return bad || s.stray;
}

/* In a fresh process: open (recover) the image and check it. */
static int check_image(const char *path, uint64_t committed, int in_commit, uint64_t pending)
{
    txn_pool *p;
    int rc = txn_pool_open(path, "crashsim", &p);
    if (rc) {
        fprintf(stderr, "  open: %s\n", txn_strerror(rc));
        return 1;
    }
    struct reach r = {0};
    uint64_t d = 0;
    int bad = R.w->read_back(p, &d, &r);
    if (bad)
        fprintf(stderr, "  workload invariant broken\n");
    if (d != committed && !(in_commit && d == pending)) {
        fprintf(stderr, "  state is neither the last commit%s\n",
                in_commit ? " nor the one in flight" : "");
        bad = 1;
    }
    bad |= check_alloc(p, &r);
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
    _exit(write_file(R.img2, R.buf, R.p->size) ? 4 : 3);
}

static int open_traced(const char *path, const void *durable)
{
    txn_pool *p;
    trace_attach(R.p->base, R.p->size, durable);
    int rc = txn_pool_open(path, "crashsim", &p);
    if (!rc)
        txn_pool_close(p);
    return rc;
}

/* Child: crash recovery of R.img at a random event, leaving R.img2. */
static void crash_recovery(void)
{
    void *durable = malloc(R.p->size);
    int fd = open(R.img, O_RDONLY);
    if (!durable || fd < 0 || read(fd, durable, R.p->size) != (ssize_t)R.p->size)
        _exit(4);
    close(fd);
    /* count recovery's events on a copy, then crash at one of them */
    write_file(R.img2, durable, R.p->size);
    if (open_traced(R.img2, durable))
        _exit(5);
    uint64_t n = trace_events();
    write_file(R.img2, durable, R.p->size);
    R.rec_crash_at = n ? sim_rand(&R.rng) % n : 0;
    trace_on_event(recovery_hook, NULL);
    open_traced(R.img2, durable);
    _exit(6); /* recovery did not reach the crash point */
}

static int run_child(int recovery_crash, const char *path)
{
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (R.t->bad >= 5) /* details of the first few failures are enough */
            if (!freopen("/dev/null", "w", stderr))
                _exit(7);
        munmap(R.p->base, R.p->size); /* the image maps where our pool is */
        trace_forked();
        if (recovery_crash)
            crash_recovery();
        _exit(check_image(path, ex.d[ex.n - 1], ex.in_commit, ex.pending));
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void verify(void)
{
    if (write_file(R.img, R.buf, R.p->size)) {
        perror("crashsim: image");
        exit(2);
    }
    int rec = sim_rand(&R.rng) % 4 == 0;
    int rc = run_child(rec, R.img);
    if (rec && rc == 3) { /* recovery crashed: recover its image */
        R.t->images++;
        rc = run_child(0, R.img2);
    }
    R.t->images++;
    if (rc && R.t->bad++ < 5) {
        fprintf(stderr, "inconsistent image (workload %s, commit %zu%s, exit %d)\n",
                R.w->name, ex.n - 1, ex.in_commit ? ", commit in flight" : "", rc);
    }
}

static void crash_here(void)
{
    uint64_t combos = trace_combos(EXHAUSTIVE_MAX);
    if (combos <= EXHAUSTIVE_MAX) {
        for (uint64_t i = 0; i < combos; i++) {
            trace_image_nth(R.buf, i);
            verify();
        }
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
        if (R.points[R.next++] == event)
            crash_here();
    }
}

/* One run of the workload on a fresh pool; returns its event count. */
static uint64_t run(const struct workload *w, uint64_t seed, const uint64_t *points,
                    size_t npoints, struct tally *t)
{
    char name[64];
    snprintf(name, sizeof name, "crashsim-%s-%d.pool", txn_engine_name(), (int)getpid());
    txn_pool_opts o = {.size = w->pool_size, .root_size = w->root_size, .threads = 2};
    txn_pool *p;
    int rc = txn_pool_create(name, "crashsim", &o, &p);
    if (rc) {
        fprintf(stderr, "crashsim: create: %s\n", txn_strerror(rc));
        exit(2);
    }
    ex.n = 0;
    uint64_t rng = seed;
    if ((rc = w->setup(p, seed))) {
        fprintf(stderr, "crashsim: setup: %s\n", txn_strerror(rc));
        exit(2);
    }
    expect_push(w->mirror_digest());
    R = (typeof(R)){.w = w, .p = p, .points = points, .npoints = npoints, .t = t,
                    .rng = seed ^ 0x5bd1e995, .buf = malloc(p->size)};
    snprintf(R.img, sizeof R.img, "/dev/shm/crashsim-%d.img", (int)getpid());
    snprintf(R.img2, sizeof R.img2, "/dev/shm/crashsim-%d.img2", (int)getpid());
    if (!R.buf || trace_attach(p->base, p->size, NULL)) {
        fputs("crashsim: out of memory\n", stderr);
        exit(2);
    }
    trace_on_event(run_hook, NULL);
    for (int i = 0; i < TX_PER_RUN; i++)
        if ((rc = w->step(p, &rng))) {
            fprintf(stderr, "crashsim: %s: transaction: %s\n", w->name, txn_strerror(rc));
            t->bad++;
            break;
        }
    t->untraced += trace_audit("end of run");
    uint64_t events = trace_events();
    trace_on_event(NULL, NULL);
    trace_detach();
    txn_pool_close(p);
    char path[128];
    pool_path(name, path, sizeof path);
    unlink(path);
    unlink(R.img);
    unlink(R.img2);
    free(R.buf);
    return events;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void campaign(const struct workload *w, uint64_t images, uint64_t seed, struct tally *all)
{
    struct tally t = {0};
    uint64_t points[IMAGES_PER_RUN];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t r = 0; t.images < images; r++) {
        uint64_t s = seed * 7919 + r, rng = s ^ 0xa5a5;
        uint64_t events = run(w, s, NULL, 0, &t); /* how long is this run? */
        size_t n = images - t.images < IMAGES_PER_RUN ? images - t.images : IMAGES_PER_RUN;
        for (size_t i = 0; i < n; i++)
            points[i] = sim_rand(&rng) % events;
        qsort(points, n, sizeof *points, cmp_u64);
        run(w, s, points, n, &t);
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
                                         {0, 0, 0, 0}};
    const char *only = NULL;
    uint64_t images = 2000, seed = 1;
    for (int c; (c = getopt_long(argc, argv, "w:n:s:", opts, NULL)) != -1;) {
        if (c == 'w')
            only = optarg;
        else if (c == 'n')
            images = strtoull(optarg, NULL, 10);
        else if (c == 's')
            seed = strtoull(optarg, NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--workload slots|list|mix] [--images N] [--seed S]\n",
                    argv[0]);
            return 2;
        }
    }
    struct tally all = {0};
    int found = 0;
    for (size_t i = 0; i < sizeof workloads / sizeof *workloads; i++)
        if (!only || !strcmp(only, workloads[i]->name)) {
            found = 1;
            campaign(workloads[i], images, seed, &all);
        }
    if (!found) {
        fprintf(stderr, "crashsim: no workload named %s\n", only);
        return 2;
    }
    printf("crash images: %llu, inconsistent: %llu, untraced stores: %llu\n",
           (unsigned long long)all.images, (unsigned long long)all.bad,
           (unsigned long long)all.untraced);
    return all.bad || all.untraced;
}
