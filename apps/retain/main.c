/* main.c - retain-<engine>: the persistent data retention evaluation's
 * command line (retain.h says what it measures).
 *
 *   retain-<engine> [--n N] [--reps R] [--reps-add R] [--kernel hash|btree|skip]
 *                   [--block OPS] (the update programs run in processes of
 *                               their own, taking turns block by block)
 *                   [--sweep]   (DEL of 0.1%, 1%, 10%, 100% of the keys)
 *                   [--interrupt K] (every K-th migration step fails and is
 *                               rolled back; P-Retain opens again and resumes)
 *                   [--lazy-new] (P-Auto's new nodes are not born extended:
 *                               their extension made at first access, as
 *                               the paper's; by default they are on
 *                               Layout-Change, whose keys are in the level)
 *                   [--born-new] (born extended on Layout-Add too)
 *                   [--plain-ext] (P-Auto without section 4.4: txn_ext_peek,
 *                               txn_ext_write and txn_ext_free read the link
 *                               at each access)
 *                   [--no-evict] (no write over twice the last-level cache
 *                               before each timed part: for runs that check
 *                               results and compare no times)
 * Pool files: retain-<engine>-<pid>-*.pool in $TXN_POOL_DIR (default
 * /dev/shm), removed at the end. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "retain.h"

struct retain_options g_opt = {
    .n = 20000,
    .reps = 3,
    .evict = 1,
    .known_links = 1,
    .born = BORN_USED,
    .pool_size = (size_t)16 << 20,
};

static const struct option long_opts[] = {{"n", required_argument, 0, 'n'},
                                          {"reps", required_argument, 0, 'r'},
                                          {"kernel", required_argument, 0, 'k'},
                                          {"sweep", no_argument, 0, 's'},
                                          {"plain-ext", no_argument, 0, 'p'},
                                          {"lazy-new", no_argument, 0, 'l'},
                                          {"born-new", no_argument, 0, 'B'},
                                          {"reps-add", required_argument, 0, 'a'},
                                          {"block", required_argument, 0, 'b'},
                                          {"interrupt", required_argument, 0, 'i'},
                                          {"no-evict", no_argument, 0, 'E'},
                                          {0, 0, 0, 0}};

static int usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--n N] [--reps 1..64] [--reps-add 1..64] [--kernel hash|btree|skip] "
            "[--block OPS] [--sweep] [--plain-ext] [--lazy-new|--born-new] "
            "[--interrupt K] [--no-evict]\n",
            argv0);
    return 2;
}

static int reps_arg(const char *s, unsigned *out)
{
    int r = atoi(s);
    if (r < 1 || r > REPS_MAX)
        return -1;
    *out = (unsigned)r;
    return 0;
}

/* One option; -1 if it or its argument is not one retain takes. */
static int parse_option(int c, const char *arg, int *kmask, int *sweep)
{
    int kd;
    switch (c) {
    case 'n':
        if (atol(arg) < 16)
            return -1;
        g_opt.n = (size_t)atol(arg);
        return 0;
    case 'r':
        return reps_arg(arg, &g_opt.reps);
    case 'a':
        return reps_arg(arg, &g_opt.reps_add);
    case 'b':
        if (atol(arg) < 0)
            return -1;
        g_opt.block = (size_t)atol(arg);
        return 0;
    case 'k':
        if ((kd = kind_named(arg)) < 0)
            return -1;
        *kmask = 1 << kd;
        return 0;
    case 's':
        *sweep = 1;
        return 0;
    case 'p':
        g_opt.known_links = 0;
        return 0;
    case 'l':
        g_opt.born = BORN_NEVER;
        return 0;
    case 'B':
        g_opt.born = BORN_ALWAYS;
        return 0;
    case 'i':
        if (atoi(arg) < 2)
            return -1;
        g_opt.interrupt = (unsigned)atoi(arg);
        return 0;
    case 'E':
        g_opt.evict = 0;
        return 0;
    default:
        return -1;
    }
}

int main(int argc, char **argv)
{
    int kmask = (1 << KINDS) - 1, sweep = 0;
    for (int c; (c = getopt_long(argc, argv, "n:r:k:s", long_opts, NULL)) != -1;)
        if (parse_option(c, optarg, &kmask, &sweep))
            return usage(argv[0]);
    if (g_opt.n * 2048 > g_opt.pool_size)
        g_opt.pool_size = g_opt.n * 2048;
    if (pool_files_init()) {
        fprintf(stderr, "retain: the pool directory's name is too long\n");
        return 1;
    }
    printf("# retain: engine %s, PDOM %d, N = %zu keys, medians of %u runs (Layout-Add: %u), "
           "thread CPU time, %s\n",
           txn_engine_name(), txn_pdom(), g_opt.n, g_opt.reps,
           g_opt.reps_add ? g_opt.reps_add : g_opt.reps,
           g_opt.block ? "interleaved blocks" : "one program after the other");
    if (sweep)
        report_sweep(kmask);
    else
        report_table(kmask);
    pool_files_remove();
    return 0;
}
