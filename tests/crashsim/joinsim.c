/* joinsim.c - the crash simulator over two pools (txn_join, issue #42
 * item 3): one transaction a step over pool A (its coordinator) and pool
 * B, both traced into one model (trace_attach, trace_attach_more: a fence
 * is global), crash images of both pools taken at the same event, each
 * pair recovered in a fresh process and checked.
 *
 *   joinsim-<engine> [--images N] [--seed S] [--threads T]
 *
 * A step adds one to a counter in both roots and rewrites a 512-byte
 * object of each with the counter's byte; one step in four also replaces
 * a small object of B (allocated, stamped, the old one freed); one in
 * eight aborts; one step in eight fails after B's part is prepared
 * (failing_step). A recovered pair must hold the same counter in both
 * pools, the last committed one or, while a commit is in flight, that
 * one, with both objects whole and B's small object the one of that
 * state; each pool's allocator must hold exactly what it reaches. Half
 * the checks open A first, half B first (whose recovery then opens A when
 * it finds a prepared transaction: join_decide).
 *
 * --threads T (2 to 4): T threads under the baton scheduler (sched.c:
 * switches at sim_lock, sim_unlock, sim_point and, inside transactions,
 * sim_point_txn; the order a function of the seed) share SLOTS slots,
 * each a counter, a 512-byte object and B's small object as above; a
 * step takes two slots' locks (in order) and adds one to both slots'
 * counters in both pools, one transaction over A and B from the thread's
 * own contexts, all committing through A's one join table. Per slot the
 * same rule holds; the commit in flight (one at most: no switch inside
 * the library) has moved all its slots or none. No failing steps.
 *
 * A's join table is full before the run (prefill): one check in four
 * also commits over A and a third pool X (check_x), refused while A is open
 * and B not (B's entries may be wanted by B's recovery: J3 of api.c), and
 * done once B is open.
 *
 * The record of a prepared transaction names its coordinator's file: a
 * pair of images is put in place of the pools' own files (renamed over
 * them; the running process keeps its mappings of the files it opened),
 * so that B's recovery finds A's image there.
 *
 * Last line: "crash images: N, inconsistent: K, untraced stores: U"; the
 * exit status is 0 only when K = U = 0. One pair in four also crashes
 * its recovery (both pools', traced, B's opening A when it asks) at a
 * random event, and that crash's pair of images is the one checked (it
 * counts as an image too).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "handle.h"
#include "layout_int.h"
#include "sim.h"
#include "trace.h"

#define LAYOUT "joinsim"
#define POOL_SIZE ((size_t)4 << 20)
#define STEPS_PER_RUN 60
#define IMAGES_PER_RUN 40
#define BULK 512u
#define MAX_THREADS 4
#define SLOTS 4 /* shared slots of a threaded run (one otherwise) */

/* root: per slot s, at s * SLOT: {count, bulk object, small object} */
enum { R_COUNT = 0, R_BULK = 8, R_SMALL = 16, SLOT = 24, ROOT_SIZE = 128, SMALL = 64 };

/* What a recovered pair may hold, per slot. At most one commit is in
 * flight (threads switch only outside the library): the slots it
 * touches have all advanced by one, or none has. */
struct expect {
    uint64_t committed[SLOTS]; /* the last committed counter */
    int in_commit[SLOTS];      /* a commit of committed + 1 is in flight */
};

static struct {
    char pa[256], pb[256]; /* the pools' files, and their images' */
    char ia[272], ib[272];
    char px[256];          /* a third pool, never imaged (J3's check) */
    txn_pool *a, *b;
    int threads, slots;   /* --threads; SLOTS when above 1, else 1 */
    struct expect ex;
    uint64_t rng, every; /* an image about every `every` events */
    uint64_t last_seq;   /* B's entry in A's table after the last commit */
    uint64_t last_count; /* the counter when last_seq was read */
    int failing;         /* in failing_step's commit, */
    uint64_t fail_from, fail_len; /* from that event; the last one's events */
    void *buf;
    uint64_t images, bad, untraced, recovery_crashes;
    uint64_t switches; /* threaded runs: times the baton moved */
    int req, res; /* pipes to and from the checker */
    pid_t checker;
} S;

/* ---- the check, in a process forked before any pool was opened (a child
 * of the running one would inherit its mappings at the pools' addresses) */

struct check_req {
    char pa[256], pb[256], ia[272], ib[272];
    int b_first;
    int recovery_crash; /* crash the recovery first, then check */
    int slots;
    uint64_t rng;
    void *base[2]; /* where A and B are mapped */
    struct expect ex;
};

static int put_image(int region, const char *tmp, const char *path, size_t size);

static int read_slot(txn *tx, txn_pool *p, int is_b, int sl, uint64_t *n)
{
    txn_obj *bulk, *small;
    unsigned char buf[BULK];
    txn_obj *root = txn_root(p);
    size_t at = (size_t)sl * SLOT;
    if (txn_read_u64(tx, root, at + R_COUNT, n) || txn_read(tx, root, at + R_BULK, &bulk, sizeof bulk) ||
        txn_read(tx, bulk, 0, buf, sizeof buf) ||
        txn_read(tx, root, at + R_SMALL, &small, sizeof small))
        return 1;
    for (size_t i = 0; i < BULK; i++)
        if (buf[i] != (unsigned char)*n) {
            fprintf(stderr, "  pool %c slot %d: counter %llu, byte %zu of its object %u\n",
                    is_b ? 'B' : 'A', sl, (unsigned long long)*n, i, buf[i]);
            return 1;
        }
    /* B's small object: made by the step to counter v, v % 4 == 1 */
    uint64_t want = *n ? *n - (*n - 1) % 4 : 0, stamp = 0;
    if (is_b && want && (!small || txn_obj_size(p, small) < SMALL ||
                         txn_read_u64(tx, small, 0, &stamp) || stamp != want)) {
        fprintf(stderr, "  pool B slot %d: counter %llu, small object %p stamped %llu, not %llu\n",
                sl, (unsigned long long)*n, (void *)small, (unsigned long long)stamp,
                (unsigned long long)want);
        return 1;
    }
    return 0;
}

static int read_pool(txn_pool *p, int is_b, int slots, uint64_t *n)
{
    txn *tx;
    int bad = 0;
    if (txn_begin(p, &tx))
        return 1;
    for (int sl = 0; sl < slots; sl++)
        bad |= read_slot(tx, p, is_b, sl, &n[sl]);
    txn_abort(tx);
    return bad;
}

static int reach_cb(txn_obj *o, void *arg)
{
    return reach_add(arg, o);
}

/* The allocator holds what the pool reaches, nothing else (sim_pool.c):
 * the objects of the root, and those of the meta object (the layout's
 * record and txn_join's table). */
static int check_leaks(txn_pool *p, char name, int slots)
{
    struct reach r = {0};
    txn *tx;
    int bad = txn_begin(p, &tx);
    if (bad)
        return 1;
    for (int sl = 0; !bad && sl < slots; sl++) {
        txn_obj *bulk = NULL, *small = NULL;
        size_t at = (size_t)sl * SLOT;
        bad = txn_read(tx, txn_root(p), at + R_BULK, &bulk, sizeof bulk) ||
              txn_read(tx, txn_root(p), at + R_SMALL, &small, sizeof small) ||
              reach_add(&r, bulk) || (small && reach_add(&r, small));
    }
    txn_abort(tx);
    bad = bad || layout_objects(p, reach_cb, &r);
    if (!bad && sim_check_alloc(p, &r)) {
        fprintf(stderr, "  pool %c: the allocator disagrees with what the pool reaches\n", name);
        bad = 1;
    }
    free(r.o);
    return bad;
}

/* A joined commit over A and X (X's root only): it needs an entry of A's
 * table, all of which are strangers' but B's contexts' (prefill), or
 * free ones where the last commit cleared some. */
static int commit_x(txn_pool *a, txn_pool *x)
{
    txn *tx;
    int rc = txn_begin(a, &tx);
    if (rc)
        return rc;
    if ((rc = txn_join(tx, x, NULL)) || (rc = txn_write_u64(tx, txn_root(x), R_COUNT, 1))) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

/* Free entries in A's table. */
static int table_free(txn_pool *a)
{
    txn *tx;
    txn_obj *t = NULL;
    uint64_t u;
    int n = 0;
    if (txn_begin(a, &tx))
        return -1;
    if (!txn_read(tx, txn_meta_root(a), JOIN_META_OFF, &t, sizeof t))
        for (uint64_t k = 0; t && k < JOIN_ENTRIES; k++)
            if (!txn_read_u64(tx, t, k * sizeof(struct join_entry), &u))
                n += !u;
    txn_abort(tx);
    return n;
}

/* J3 after a crash: with A open and B not, B's entries (a part perhaps
 * prepared and unsettled) are not given to X; once B is open (recovered),
 * one is. Returns 0 when so. */
static int check_x(txn_pool *a, txn_pool *b)
{
    txn_pool *x;
    int free_ = table_free(a);
    int rc = txn_pool_open(S.px, LAYOUT, &x);
    if (rc) {
        fprintf(stderr, "  open X: %s\n", txn_pool_strerror(rc));
        return 1;
    }
    rc = commit_x(a, x);
    txn_pool_close(x);
    int want = b || free_ > 0 ? 0 : TXN_E_NOSPACE;
    if (rc != want) {
        fprintf(stderr, "  a commit over A and X with B %s (%d entries free): %s, not %s\n",
                b ? "open" : "not open", free_, txn_strerror(rc), txn_strerror(want));
        return 1;
    }
    return 0;
}

static int check_pair(const struct check_req *q)
{
    txn_pool *p[2] = {NULL, NULL}; /* A, B */
    const char *path[2] = {q->pa, q->pb};
    int bad = 0;
    int with_x = q->rng % 4 == 0; /* X's pool opened twice: one check in four */
    for (int k = 0; k < 2; k++) {
        int i = q->b_first ? 1 - k : k;
        int rc = txn_pool_open(path[i], LAYOUT, &p[i]);
        if (rc) {
            fprintf(stderr, "  open %c (%s): %s\n", i ? 'B' : 'A', i == q->b_first ? "first" : "second",
                    txn_pool_strerror(rc));
            return 1;
        }
        if (i == 0 && with_x) /* A open: X's commit, B open or not */
            bad |= check_x(p[0], p[1]);
    }
    uint64_t na[SLOTS] = {0}, nb[SLOTS] = {0};
    if (with_x && q->b_first == 0) /* B's entry, free to go now that B is open */
        bad |= check_x(p[0], p[1]);
    bad |= read_pool(p[0], 0, q->slots, na) | read_pool(p[1], 1, q->slots, nb);
    bad |= check_leaks(p[0], 'A', q->slots) | check_leaks(p[1], 'B', q->slots);
    int advanced = -1; /* of the slots in flight: all advanced (1) or none (0) */
    for (int sl = 0; sl < q->slots; sl++) {
        uint64_t c = q->ex.committed[sl];
        int in = q->ex.in_commit[sl], adv = na[sl] == c + 1;
        if (na[sl] != nb[sl] || !(na[sl] == c || (in && adv)) || (in && advanced >= 0 && adv != advanced)) {
            fprintf(stderr, "  slot %d: A holds %llu, B %llu; committed %llu%s\n", sl,
                    (unsigned long long)na[sl], (unsigned long long)nb[sl], (unsigned long long)c,
                    in ? ", the next in flight" : "");
            bad = 1;
        }
        if (in)
            advanced = adv;
    }
    txn_pool_close(p[0]);
    txn_pool_close(p[1]);
    return bad;
}

/* ---- a crash during recovery: both pools' recovery (in the request's
 * order; B's may open A) traced from the images as persisted, crashed at
 * a random event of it, its images put in place of the first ones */

static struct {
    const struct check_req *q;
    uint64_t at;
    void *durable[2];
} RC;

static void recovery_hook(uint64_t event, void *arg)
{
    (void)arg;
    if (event != RC.at)
        return;
    const struct check_req *q = RC.q;
    _exit(put_image(0, q->ia, q->pa, POOL_SIZE) || put_image(1, q->ib, q->pb, POOL_SIZE) ? 4 : 3);
}

static int open_traced(const struct check_req *q)
{
    txn_pool *p[2] = {NULL, NULL};
    const char *path[2] = {q->pa, q->pb};
    if (trace_attach(q->base[0], POOL_SIZE, RC.durable[0]) ||
        trace_attach_more(q->base[1], POOL_SIZE, RC.durable[1]))
        return -1;
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        int i = q->b_first ? 1 - k : k;
        rc = txn_pool_open(path[i], LAYOUT, &p[i]);
    }
    for (int i = 0; i < 2; i++)
        if (p[i])
            txn_pool_close(p[i]);
    return rc;
}

static int file_io(const char *path, void *buf, int out)
{
    int fd = open(path, out ? O_WRONLY : O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = out ? write(fd, buf, POOL_SIZE) : read(fd, buf, POOL_SIZE);
    close(fd);
    return n == (ssize_t)POOL_SIZE ? 0 : -1;
}

/* Exits 3 with the crashed recovery's images in place, else 4 to 6. */
static void crash_recovery(const struct check_req *q)
{
    RC.q = q;
    const char *path[2] = {q->pa, q->pb};
    for (int i = 0; i < 2; i++)
        if (!(RC.durable[i] = trace_buf_alloc(POOL_SIZE)) || file_io(path[i], RC.durable[i], 0))
            _exit(4);
    /* count recovery's events, then put the images back and crash at one */
    if (open_traced(q))
        _exit(5);
    uint64_t n = trace_events();
    for (int i = 0; i < 2; i++)
        if (file_io(path[i], RC.durable[i], 1))
            _exit(4);
    RC.at = n ? trace_mix(&S.rng) % n : 0;
    trace_on_event(recovery_hook, NULL);
    open_traced(q);
    _exit(6); /* recovery did not reach the crash point */
}

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

static void checker_loop(int req, int res)
{
    struct check_req q;
    while (!xfer(req, &q, sizeof q, 0)) {
        int rc = -1;
        for (int pass = q.recovery_crash ? 0 : 1; pass < 2; pass++) {
            int st;
            fflush(stderr);
            pid_t pid = fork();
            if (pid == 0) {
                S.rng = q.rng;
                if (!pass)
                    crash_recovery(&q);
                _exit(check_pair(&q));
            }
            rc = -1;
            if (pid > 0 && waitpid(pid, &st, 0) == pid)
                rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            if (!pass && rc != 3) {
                fprintf(stderr, "  recovery crash: exit %d (4 files, 5 recovery failed, 6 no "
                        "crash point)\n", rc);
                break;
            }
            rc = pass ? rc : 0;
        }
        if (xfer(res, &rc, sizeof rc, 1))
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
    S.checker = fork();
    if (S.checker < 0)
        return -1;
    if (S.checker == 0) {
        close(req[1]);
        close(res[0]);
        checker_loop(req[0], res[1]);
    }
    close(req[0]);
    close(res[1]);
    S.req = req[1];
    S.res = res[0];
    return 0;
}

/* ---- images */

static int put_image(int region, const char *tmp, const char *path, size_t size)
{
    trace_image_of(region, S.buf, trace_mix(&S.rng));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    int rc = write(fd, S.buf, size) == (ssize_t)size ? 0 : -1;
    close(fd);
    return rc ? rc : rename(tmp, path); /* the running process keeps its own file */
}

static void take_image(uint64_t event, void *arg)
{
    (void)arg;
    /* one in two of the last events of a failing step's commit (its
     * parts' abort after their prepare: a few events of a run's
     * thousands), as long as the last such commit */
    uint64_t every = S.every;
    if (S.failing && S.fail_len && event - S.fail_from + 8 >= S.fail_len)
        every = 2;
    if (trace_mix(&S.rng) % every)
        return;
    struct check_req q = {.b_first = (int)(trace_mix(&S.rng) & 1),
                          .recovery_crash = trace_mix(&S.rng) % 4 == 0,
                          .rng = trace_mix(&S.rng),
                          .base = {S.a->base, S.b->base},
                          .slots = S.slots,
                          .ex = S.ex};
    snprintf(q.pa, sizeof q.pa, "%s", S.pa);
    snprintf(q.pb, sizeof q.pb, "%s", S.pb);
    snprintf(q.ia, sizeof q.ia, "%s", S.ia);
    snprintf(q.ib, sizeof q.ib, "%s", S.ib);
    int rc = -1;
    S.images += 1 + q.recovery_crash; /* a crashed recovery's images too */
    S.recovery_crashes += q.recovery_crash;
    if (!put_image(0, S.ia, S.pa, POOL_SIZE) && !put_image(1, S.ib, S.pb, POOL_SIZE) &&
        !xfer(S.req, &q, sizeof q, 1) && !xfer(S.res, &rc, sizeof rc, 0) && !rc)
        return;
    if (S.bad++ < 5)
        fprintf(stderr, "inconsistent image %llu (slot 0 committed %llu%s, %s opened first%s, exit %d)\n",
                (unsigned long long)S.images, (unsigned long long)S.ex.committed[0],
                S.ex.in_commit[0] ? ", next in flight" : "", q.b_first ? "B" : "A",
                q.recovery_crash ? ", recovery crashed" : "", rc);
}

/* ---- the workload */

static int fresh(txn_pool *p)
{
    txn *tx;
    txn_obj *o;
    int rc = txn_begin(p, &tx);
    if (rc)
        return rc;
    for (int sl = 0; sl < S.slots; sl++) {
        TRY(txn_alloc(tx, BULK, &o));
        TRY(txn_write(tx, txn_root(p), (size_t)sl * SLOT + R_BULK, &o, sizeof o));
    }
    return txn_commit(tx);
}

/* A step that fails after B's part is prepared: A's join table is filled
 * with strangers in the same transaction, so that the coordinator's
 * commit finds no entry for B's context (TXN_E_NOSPACE) and rolls all
 * back. B's part only frees its small object: its abort has allocator
 * bits to restore and no data, and those bits must be durable before its
 * slot reads settled (docs/join.md, "A part aborted after its prepare"). */
static int failing_step(void)
{
    txn *tx, *part;
    txn_obj *t = NULL, *small = NULL;
    int rc = txn_begin(S.a, &tx);
    if (rc)
        return rc;
    TRY(txn_join(tx, S.b, &part));
    TRY(txn_read(tx, txn_meta_root(S.a), JOIN_META_OFF, &t, sizeof t));
    TRY(txn_read(tx, txn_root(S.b), R_SMALL, &small, sizeof small));
    if (!t || !small) { /* no joined commit yet */
        txn_abort(tx);
        return 0;
    }
    for (uint64_t k = 0; k < JOIN_ENTRIES; k++) {
        size_t off = k * sizeof(struct join_entry) + offsetof(struct join_entry, uuid);
        uint64_t uuid;
        TRY(txn_read_u64(tx, t, off, &uuid));
        if (!uuid || uuid == S.b->uuid)
            TRY(txn_write_u64(tx, t, off, 0x5eed000000000000ull + k + 1));
    }
    TRY(txn_free(tx, small));
    S.failing = 1;
    S.fail_from = trace_events();
    rc = txn_commit(tx);
    S.failing = 0;
    S.fail_len = trace_events() - S.fail_from;
    if (rc == TXN_E_NOSPACE)
        return 0;
    fprintf(stderr, "joinsim: a commit with a full join table: %s\n",
            rc ? txn_strerror(rc) : "done");
    return rc ? rc : TXN_E_STATE;
}

/* A's table made full before tracing: B's entry (a joined commit that
 * changes nothing), and strangers in every other. When threads run, their
 * contexts on B are not this thread's: each of their commits is given the
 * entry of the context that committed last, its part settled (J3, in the
 * traced run). A joined commit of a check over A and another pool must
 * take one of B's entries (check_x). */
static int prefill(void)
{
    txn *tx;
    txn_obj *t;
    uint64_t u;
    int rc = txn_begin(S.a, &tx);
    if (rc)
        return rc;
    TRY(txn_join(tx, S.b, NULL));
    TRY(txn_write_u64(tx, txn_root(S.a), R_COUNT, 0));
    TRY(txn_write_u64(tx, txn_root(S.b), R_COUNT, 0));
    if ((rc = txn_commit(tx)) || (rc = txn_begin(S.a, &tx)))
        return rc;
    TRY(txn_read(tx, txn_meta_root(S.a), JOIN_META_OFF, &t, sizeof t));
    for (uint64_t k = 0; t && k < JOIN_ENTRIES; k++) {
        size_t off = k * sizeof(struct join_entry) + offsetof(struct join_entry, uuid);
        TRY(txn_read_u64(tx, t, off, &u));
        if (!u)
            TRY(txn_write_u64(tx, t, off, 0x5eed000000000000ull + k + 1));
    }
    return txn_commit(tx);
}

/* B's context's versions start just below 2^54, so that each run's steps
 * cross it: a seq made of the version shifted up by the context index's
 * bits lost the version's high bits there, and its entry in A's table
 * moved backwards. Set outside any transaction, before tracing. */
#define WRAP (1ull << 54)
static void near_wrap(txn_pool *b)
{
    struct txn *c = b->ctxs; /* the only one: this thread's (fresh) */
    TX_FMT(c)->version = WRAP - STEPS_PER_RUN / 2;
    TX_FMT(c)->version_end = WRAP + ((uint64_t)1 << 32);
    TX_FMT(c)->slot->next_version = TX_FMT(c)->version_end;
}

/* J1 as seen from outside: B's entry in A's table moves to a newer seq at
 * each commit that prepared B's part (1: it did not). */
static int entry_moved_on(void)
{
    txn *tx;
    txn_obj *t = NULL;
    struct join_entry e;
    int bad = 1;
    if (txn_begin(S.a, &tx))
        return 1;
    if (!txn_read(tx, txn_meta_root(S.a), JOIN_META_OFF, &t, sizeof t) && t)
        for (size_t k = 0; k < JOIN_ENTRIES; k++) {
            if (txn_read(tx, t, k * sizeof e, &e, sizeof e))
                break;
            if (e.uuid == S.b->uuid) {
                bad = e.seq <= S.last_seq;
                if (bad)
                    fprintf(stderr, "joinsim: B's entry in A's table went from %#llx to %#llx\n",
                            (unsigned long long)S.last_seq, (unsigned long long)e.seq);
                S.last_seq = e.seq;
                break;
            }
        }
    txn_abort(tx);
    return bad;
}

/* Slot sl's counter n + 1 into both pools in tx, and its objects. */
static int step_slot(txn *tx, txn *part, int sl)
{
    txn_pool *p[2] = {S.a, S.b};
    uint64_t n;
    unsigned char buf[BULK];
    size_t at = (size_t)sl * SLOT;
    int rc = 0;
    TRY(txn_read_u64(tx, txn_root(S.a), at + R_COUNT, &n));
    memset(buf, (int)(unsigned char)(n + 1), sizeof buf);
    for (int i = 0; i < 2; i++) {
        txn_obj *r = txn_root(p[i]), *o;
        TRY(txn_write_u64(tx, r, at + R_COUNT, n + 1));
        TRY(txn_read(tx, r, at + R_BULK, &o, sizeof o));
        TRY(txn_write(tx, o, 0, buf, sizeof buf));
        sim_point_txn();
    }
    if (n % 4 == 0) { /* B's small object replaced: allocator records in a part */
        txn_obj *old, *o, *rb = txn_root(S.b);
        TRY(txn_read(tx, rb, at + R_SMALL, &old, sizeof old));
        TRY(txn_alloc(part, SMALL, &o));
        TRY(txn_write_u64(tx, o, 0, n + 1));
        TRY(txn_write(tx, rb, at + R_SMALL, &o, sizeof o));
        if (old)
            TRY(txn_free(tx, old));
    }
    return rc;
}

/* One joined transaction over the slots sl[0..n-1] (their locks held
 * when threads run): each one's counter up by one in both pools. */
static int step_on(const int *sl, int n, uint64_t *rng)
{
    txn *tx, *part;
    int rc = txn_begin(S.a, &tx);
    if (rc)
        return rc;
    TRY(txn_join(tx, S.b, &part));
    for (int i = 0; i < n; i++)
        if ((rc = step_slot(tx, part, sl[i])))
            return rc; /* aborted */
    if (trace_mix(rng) % 8 == 0) {
        txn_abort(tx);
        return 0;
    }
    for (int i = 0; i < n; i++) /* no switch point from here to the commit's end */
        S.ex.in_commit[sl[i]] = 1;
    rc = txn_commit(tx);
    for (int i = 0; i < n; i++) {
        if (!rc)
            S.ex.committed[sl[i]]++;
        S.ex.in_commit[sl[i]] = 0;
    }
    return rc;
}

static int step(void)
{
    int sl = 0;
    int rc = step_on(&sl, 1, &S.rng);
    if (!rc && S.ex.committed[0] != S.last_count) {
        S.last_count = S.ex.committed[0];
        if (entry_moved_on())
            rc = TXN_E_CORRUPT;
    }
    return rc;
}

/* A threaded run's thread t: steps over two shared slots each, under
 * their locks (taken in order), switching where the scheduler says. */
struct worker {
    int t, rc;
    uint64_t rng;
    pthread_t tid;
};
static struct worker W[MAX_THREADS];

static void *work(void *arg)
{
    struct worker *w = arg;
    sched_enter(w->t);
    for (int i = 0; i < STEPS_PER_RUN / S.threads && !w->rc; i++) {
        int sl[2];
        sl[0] = (int)(sim_rand(&w->rng) % SLOTS);
        sl[1] = (sl[0] + 1 + (int)(sim_rand(&w->rng) % (SLOTS - 1))) % SLOTS;
        if (sl[0] > sl[1]) {
            int x = sl[0];
            sl[0] = sl[1];
            sl[1] = x;
        }
        sim_lock(sl[0]);
        sim_lock(sl[1]);
        w->rc = step_on(sl, 2, &w->rng);
        /* cow has one writer per object: the slots share the roots, so
         * another thread's open transaction holds them (TXN_E_CONFLICT,
         * rolled back); it runs on, and the step is tried again */
        for (int k = 0; w->rc == TXN_E_CONFLICT && k < 10000; k++) {
            sim_point();
            w->rc = step_on(sl, 2, &w->rng);
        }
        sim_unlock(sl[1]);
        sim_unlock(sl[0]);
        sim_point();
    }
    sched_exit(w->t, 1);
    return NULL;
}

static int join_worker(int t)
{
    return pthread_join(W[t].tid, NULL);
}

static int run_threads(void)
{
    uint64_t seed = trace_mix(&S.rng);
    int rc = 0;
    sched_begin(S.threads, seed, 1);
    for (int t = 0; t < S.threads; t++) {
        W[t] = (struct worker){t, 0, seed * 31 + (uint64_t)t, 0};
        if (pthread_create(&W[t].tid, NULL, work, &W[t])) {
            fprintf(stderr, "joinsim: cannot start a thread\n"); /* the scheduler waits for it */
            exit(2);
        }
    }
    for (int t = 0; t < S.threads; t++)
        sched_reap(join_worker);
    S.switches += sched_end();
    for (int t = 0; t < S.threads; t++)
        rc = rc ? rc : W[t].rc;
    return rc;
}

/* One run: two fresh pools (B made while A is open: their address ranges
 * differ), traced; `images` whether to take any (the first run counts the
 * events of a run). Returns the run's events, or 0 on an error. */
static uint64_t run(int images)
{
    /* a pool that does not grow: an image is the file at its traced size */
    txn_pool_opts o = {.size = POOL_SIZE, .max_size = POOL_SIZE, .root_size = ROOT_SIZE,
                       .threads = (unsigned)S.threads + 2};
    uint64_t events = 0;
    unlink(S.pa);
    unlink(S.pb);
    if (txn_pool_create(S.pa, LAYOUT, &o, &S.a) || txn_pool_create(S.pb, LAYOUT, &o, &S.b) ||
        fresh(S.a) || fresh(S.b)) {
        fprintf(stderr, "joinsim: pools: %s\n", txn_pool_strerror(TXN_E_IO));
        return 0;
    }
    txn_pool *x;
    txn_pool_opts ox = {.root_size = ROOT_SIZE, .threads = 1};
    ox.size = ox.max_size = txn_pool_min_size(&ox);
    unlink(S.px);
    if (txn_pool_create(S.px, LAYOUT, &ox, &x) || (txn_pool_close(x), prefill())) {
        fprintf(stderr, "joinsim: pool X, or A's table: %s\n", txn_pool_strerror(TXN_E_IO));
        return 0;
    }
    S.ex = (struct expect){{0}, {0}};
    S.last_seq = 0;
    S.last_count = 0;
    if (S.threads == 1)
        near_wrap(S.b);
    if (trace_attach(S.a->base, POOL_SIZE, NULL) || trace_attach_more(S.b->base, POOL_SIZE, NULL)) {
        fprintf(stderr, "joinsim: cannot trace\n");
        return 0;
    }
    if (images)
        trace_on_event(take_image, NULL);
    int rc = 0;
    if (S.threads > 1)
        rc = run_threads();
    for (int i = 0; S.threads == 1 && i < STEPS_PER_RUN && !rc; i++)
        rc = trace_mix(&S.rng) % 8 == 0 ? failing_step() : step();
    trace_on_event(NULL, NULL);
    events = trace_events();
    trace_lock();
    S.untraced += trace_audit("joinsim");
    trace_unlock();
    trace_detach();
    txn_pool_close(S.a);
    txn_pool_close(S.b);
    unlink(S.pa); /* the last images, or the pools */
    unlink(S.pb);
    unlink(S.px);
    if (rc) {
        fprintf(stderr, "joinsim: step: %s\n", txn_strerror(rc));
        return 0;
    }
    return events ? events : 1;
}

int main(int argc, char **argv)
{
    uint64_t want = 300, seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();
    static const struct option opts[] = {
        {"images", required_argument, NULL, 'n'}, {"seed", required_argument, NULL, 's'},
        {"threads", required_argument, NULL, 't'}, {0}};
    S.threads = 1;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'n')
            want = strtoull(optarg, NULL, 0);
        else if (c == 's')
            seed = strtoull(optarg, NULL, 0);
        else if (c == 't' && atoi(optarg) >= 1 && atoi(optarg) <= MAX_THREADS)
            S.threads = atoi(optarg);
        else {
            fprintf(stderr, "usage: %s [--images N] [--seed S] [--threads 1-%d]\n", argv[0],
                    MAX_THREADS);
            return 2;
        }
    }
    S.slots = S.threads > 1 ? SLOTS : 1;
    S.rng = seed;
    printf("joinsim: engine %s, seed %llu, threads %d\n", txn_engine_name(), (unsigned long long)seed,
           S.threads);
    char name[64];
    snprintf(name, sizeof name, "pmtx-joinsim-%ld-a", (long)getpid());
    if (txn_pool_path(name, S.pa, sizeof S.pa))
        return 2;
    snprintf(name, sizeof name, "pmtx-joinsim-%ld-b", (long)getpid());
    if (txn_pool_path(name, S.pb, sizeof S.pb))
        return 2;
    snprintf(name, sizeof name, "pmtx-joinsim-%ld-x", (long)getpid());
    if (txn_pool_path(name, S.px, sizeof S.px))
        return 2;
    snprintf(S.ia, sizeof S.ia, "%s.img", S.pa);
    snprintf(S.ib, sizeof S.ib, "%s.img", S.pb);
    if (!(S.buf = trace_buf_alloc(POOL_SIZE)) || checker_start())
        return 2;
    uint64_t events = run(0);
    if (!events)
        return 2;
    S.every = events / IMAGES_PER_RUN ? events / IMAGES_PER_RUN : 1;
    while (S.images < want)
        if (!run(1))
            return 2;
    close(S.req);
    close(S.res);
    waitpid(S.checker, NULL, 0);
    unlink(S.ia);
    unlink(S.ib);
    printf("recoveries crashed: %llu\n", (unsigned long long)S.recovery_crashes);
    if (S.threads > 1)
        printf("thread switches: %llu\n", (unsigned long long)S.switches);
    printf("crash images: %llu, inconsistent: %llu, untraced stores: %llu\n",
           (unsigned long long)S.images, (unsigned long long)S.bad,
           (unsigned long long)S.untraced);
    return S.bad || S.untraced ? 1 : 0;
}
