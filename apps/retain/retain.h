/* retain.h - what the files of the retention evaluation share: node
 * layouts and decoded nodes, the kernels, the migration, the programs and
 * their measurements, and the options of the command line.
 *
 * The evaluation (txn_layout.h; docs/retention.md): the cost of keeping a
 * pool's data when its node struct changes, manual migration against
 * lazily extendible structs, on three kernels. Each kernel has a 32-bit
 * key in the original program: a chained hash table (fixed bucket array),
 * a B-tree of order 8 (CLRS, up to 7 keys a node) and a skip list of 4
 * levels. Layout changes: "change" (the key becomes 64-bit) and "add" (a
 * 16-byte name field that the update programs declare but do not use yet,
 * as in the paper).
 * Programs:
 *   P-Original  builds the pool (version 1) from the input;
 *   P-Retain    txn_layout_open of version 2 with the manual migration:
 *               copies every node into the new layout (same shape), in
 *               heap order, in transactions of 64 nodes, then frees the
 *               old ones;
 *   P-Manual    runs the update input on the migrated pool (version 2);
 *   P-Auto      runs the update input on an unconverted copy of the
 *               original pool, the new field in an extension level made at
 *               first access (txn_ext_*);
 *   P-Original' (Layout-Add rows) the original program running the update
 *               input on another copy of the original pool: P-Auto against
 *               it is what the extendible structs cost on the same heap.
 * Inputs (every operation: look the key up, delete it if found, insert
 * it otherwise; one transaction each): INS (the original inserts N keys,
 * the update N others), DEL (the update deletes the same N), RAND (N
 * random keys that repeat, the same sequence in both).
 * Overheads: Manual = T(P-Retain) / T(P-Manual), Auto = (T(P-Auto) -
 * T(P-Manual)) / T(P-Manual), the latter as the median of each run's
 * paired ratio, with its quartiles, in thread CPU time and wall time.
 * Bytes: what the programs store to the pool (txn_stats.bytes_stored:
 * data, logs, allocator metadata); the retention bytes are P-Retain's for
 * the manual model and what P-Auto stores beyond P-Manual for the
 * automatic one ("none" when it stores less).
 * P-Manual and P-Auto check their result (how many of their keys they
 * find, known from the input), so a wrong migration, extension or kernel
 * fails the run (exit 1). */
#ifndef RETAIN_H
#define RETAIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "txn.h"
#include "txn_layout.h"

#define KMAX 7        /* keys per node (B-tree) */
#define CMAX 8        /* children per node */
#define NAME_LEN 16   /* Layout-Add's new field */
#define SKIP_LEVELS 4
#define BT_T 4        /* B-tree minimum degree: order 8 */
#define BATCH 64      /* nodes per migration transaction */
#define REPS_MAX 64   /* runs per row */

#define TRY(x)                                                                 \
    do {                                                                       \
        int rc_ = (x);                                                         \
        if (rc_)                                                               \
            return rc_;                                                        \
    } while (0)

enum kind { HASH, BTREE, SKIP, KINDS };
enum ext { EXT_NONE, EXT_KEY, EXT_NAME }; /* what a node's extension level holds */
enum input { INS, DEL, RAND };
enum born { BORN_USED, BORN_NEVER, BORN_ALWAYS }; /* P-Auto's new nodes (node.c) */

/* ---- options (main.c) */

struct retain_options {
    size_t n;           /* keys of the original program (--n) */
    unsigned reps;      /* runs per row (--reps) */
    unsigned reps_add;  /* runs per Layout-Add row (--reps-add; 0: reps) */
    size_t block;       /* operations per turn of an interleaved run (--block;
                           0: each program runs the whole input at once) */
    unsigned interrupt; /* every interrupt-th migration step fails (--interrupt) */
    int evict;          /* cold caches before each timed part (0: --no-evict) */
    int known_links;    /* section 4.4's accessors (0: --plain-ext) */
    enum born born;     /* --lazy-new, --born-new */
    size_t pool_size;   /* of each pool the programs make */
};

extern struct retain_options g_opt;

/* ---- node layouts and accesses (node.c) */

/* A node layout: header {u32 n, u32 leaf/level}, extension link, keys (kw
 * bytes each, padded to 8), values, children, name. The link (the hidden
 * pointer of an extendible struct, present in every version) sits right
 * after the header, in the node's first line: a load of the node brings
 * it with the fields, as a compiler placing the hidden pointer first
 * would (a vtable pointer's place). */
struct node_layout {
    enum kind kind;
    unsigned kw, name; /* bytes of a key, of the name field */
    enum ext ext;
    unsigned K, C;     /* keys and children a node holds */
    size_t off_keys, off_vals, off_child, off_name, off_link, size;
    txn_ext_type xt;
    txn_ext_level xl;
};

/* A decoded node. */
struct node {
    uint32_t n, leaf; /* keys in use; B-tree leaf flag or skip list level */
    uint64_t key[KMAX], val[KMAX];
    txn_obj *child[CMAX];
    txn_obj *link; /* P-Auto: the extension link as loaded (NULL: none) */
};

/* One instance of a kernel's structure: its layout, where its entry
 * handle lives, and the migration whose objects it allocates (NULL
 * outside one). */
struct instance {
    const struct node_layout *L;
    txn_obj *holder;
    size_t off;
    txn_migrate *m;
    unsigned nb; /* hash buckets */
};

/* What node_store writes of a node. */
#define W_HDR 1u
#define W_KEYS 2u
#define W_VALS 4u
#define W_CHILD 8u
#define W_NEW 16u /* a new node: everything, and its name */
#define W_ALL (W_HDR | W_KEYS | W_VALS | W_CHILD)

/* The original layout (L1), the new one (L2) and P-Auto's (La: the
 * original with an extension level) of a kernel and a layout change. */
void layouts_for(enum kind kind, int change, struct node_layout *L1, struct node_layout *L2,
                 struct node_layout *La);
int node_load(txn *tx, const struct instance *k, txn_obj *o, struct node *d);
int node_store(txn *tx, const struct instance *k, txn_obj *o, const struct node *d, unsigned w);
int node_alloc(txn *tx, const struct instance *k, txn_obj **o);
/* Free node o, loaded as d (with its link) in this transaction since it
 * last changed. */
int node_free(txn *tx, const struct instance *k, txn_obj *o, const struct node *d);
/* Bytes of a new node: P-Auto's hold their extension level. */
size_t node_bytes(const struct node_layout *L);
int entry_get(txn *tx, const struct instance *k, txn_obj **e);
int entry_set(txn *tx, const struct instance *k, txn_obj *e);

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- the kernels (hash.c, btree.c, skiplist.c; kernel.c) */

struct kernel {
    const char *name;
    int (*create)(txn *tx, const struct instance *k); /* an empty structure */
    int (*lookup)(txn *tx, const struct instance *k, uint64_t key, int *found);
    int (*insert)(txn *tx, const struct instance *k, uint64_t key, uint64_t val);
    int (*remove)(txn *tx, const struct instance *k, uint64_t key);
};

extern const struct kernel hash_kernel, btree_kernel, skip_kernel;
const struct kernel *kernel_of(enum kind kind);
/* The kind named `name`; -1 if none is. */
int kind_named(const char *name);
/* Hash buckets for n keys. */
unsigned hash_buckets(size_t n);

/* ---- the manual migration (migrate.c) */

struct heap_order;
struct migration {
    const struct node_layout *from, *to;
    unsigned nb;
    struct heap_order *order; /* DRAM state of the migration in this process */
};

/* The migration from layout `from` to `to`; TXN_E_NOMEM. */
int migration_init(struct migration *g, const struct node_layout *from,
                   const struct node_layout *to, unsigned nb);
void migration_release(struct migration *g);
/* Version 1 -> 2 of txn_layout.h, with g as its argument. */
txn_migration migration_step(struct migration *g);

/* ---- pool files (files.c) */

enum pool_file { POOL_ORIG, POOL_WORK, POOL_WORK2, POOL_WORK3, POOL_FILES };

/* Names the files of this process, in $TXN_POOL_DIR (default /dev/shm:
 * txn_pool_path); TXN_E_INVAL if a name does not fit. */
int pool_files_init(void);
const char *pool_file(enum pool_file f);
void pool_files_remove(void);
/* Copy a pool file over `to`, in place when `to` exists; -1 on error. */
int copy_file(const char *from, const char *to);
/* Remove the pool files and exit 1 (the run failed). */
_Noreturn void fail_exit(void);
/* Report the error, then fail_exit(). */
_Noreturn void die(const char *what, int rc);

/* ---- programs (program.c) */

/* A timed interval: thread CPU time and wall time. */
struct stamp {
    double cpu, wall;
};

/* The thread's CPU time now. */
double now_s(void);
/* Bytes this thread has stored to pools so far. */
uint64_t stored(void);

/* An update program: its pool (P-Manual: version 2, migrated already;
 * P-Auto and P-Original': version 1), opened after an untimed warm-up of
 * its heap, and what it has measured so far. */
struct prog {
    const char *what;
    txn_pool *p;
    struct instance k;
    struct stamp t;
    size_t found;
    uint64_t bytes;
};

/* P-Original: build the original pool from `keys`; its time and bytes. */
void p_original(const struct node_layout *L, const uint32_t *keys, size_t n, double *t,
                uint64_t *bytes);
void prog_open(struct prog *g, const char *what, const char *path, const txn_layout *lay,
               const struct node_layout *L, unsigned nb);
/* Operations [from, to) of the update input, timed, from cold caches. */
void prog_ops(struct prog *g, const uint32_t *keys, size_t from, size_t to);
/* Close it; it must have found `want` keys. */
void prog_close(struct prog *g, size_t want);

/* ---- interleaved programs, in child processes (child.c) */

struct child {
    pid_t pid;
    int cmd, ans; /* pipe ends: to the child, from it */
    struct prog g;
};

void child_start(struct child *c, const char *what, const char *path, const txn_layout *lay,
                 const struct node_layout *L, unsigned nb, const uint32_t *keys, size_t want);
/* Operations [from, to) in the child; c->g then holds its counters. */
void child_run(struct child *c, size_t from, size_t to);
/* The child closes its pool (checking what it found) and exits. */
void child_end(struct child *c);

/* ---- runs and their statistics (run.c, stats.c) */

/* Medians over the runs; the Auto overheads are medians of the runs'
 * paired ratios (e.g. T(P-Auto)/T(P-Manual) - 1 of one run), with their
 * quartiles: the spread says which differences the measurement resolves. */
struct measure {
    double t_orig, t_retain, t_manual, t_auto;
    double ov_cpu[3], ov_wall[3]; /* Auto overhead: 25th, 50th, 75th percentile */
    double lx_cpu[3], lx_wall[3]; /* P-Auto against P-Original' (below), likewise */
    double t_same;                /* P-Original' */
    double d_auto;                /* median of the runs' T(P-Auto) - T(P-Manual) */
    int same;                     /* P-Original' ran */
    unsigned reps;
    uint64_t b_orig, b_retain, b_manual, b_auto;
};

/* The update programs' runs of one row (run.c): `keys` (n of them; `want`
 * of them found) on the pool built from `orig`, `reps` runs, P-Original'
 * too when `same`. */
void p_update(const struct node_layout *L1, const struct node_layout *L2,
              const struct node_layout *La, const uint32_t *orig, const uint32_t *keys, size_t n,
              size_t want, unsigned reps, int same, struct measure *m);

double median(double *v, unsigned n);
/* 25th, 50th and 75th percentiles of v (sorted in place). */
void quartiles(double *v, unsigned n, double out[3]);

/* ---- inputs and reports (input.c, report.c) */

/* Keys of the original program and of the update (n each), and how many
 * of the update's first upd_n the update finds. */
void make_input(enum input in, size_t n, uint32_t *orig, uint32_t *upd, size_t *want,
                size_t upd_n);
/* Every kernel of kmask (bit per kind), layout change and input. */
void report_table(int kmask);
/* DEL of 0.1%, 1%, 10%, 100% of the keys, Layout-Change. */
void report_sweep(int kmask);

#endif
