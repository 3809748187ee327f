/* txn_crashcheck.c - txn-crashcheck: a program written on txn.h, linked
 * with libtxn-<engine>-check, checked against power failure with its own
 * consistency check (docs/crashcheck.md):
 *
 *   txn-crashcheck [--images N] [--seed S] [--pdom 0|1|2] [--threads-sched]
 *                  [--replay S:N] [--check-timeout SEC]
 *                  --check 'CMD {pool}' -- PROGRAM ARGS... {pool}
 *
 * PROGRAM runs once on a fresh pool with the recorder on; its trace is
 * replayed into the crash simulator's model (tests/crashsim/trace.c); at
 * N points chosen from the seed a crash image is written to the pool's
 * path, recovered by PROGRAM's own library in a fresh process (one image in
 * four crashed again during that recovery and recovered once more), and
 * CMD is run on it; when CMD names the objects it reaches
 * (txn_check_reach), its library's leak check is read back too. A pool
 * that grows is followed (CHK_GROW). Last line: "crash images: N, inconsistent: K,
 * untraced stores: U"; exit status 0 only when K = U = 0, 1 when a check
 * failed, 2 when the check could not be made. Its files (the pool, the
 * traces, CMD's output) are in /dev/shm, or in $TXN_CHECK_DIR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trace.h"
#include "tracefmt.h"

#define MAX_IMAGES 1000000
#define SHOW_FAILURES 5 /* failures reported in full; the rest counted */

static struct {
    uint64_t images, seed;
    int pdom;
    char pdom_s[8]; /* pdom, for the children's TXN_PDOM */
    const char *sched; /* "1": --threads-sched (the recorder's TXN_CHECK_SCHED), or NULL */
    const char *epoch; /* TXN_EPOCH_MS under --threads-sched: "0" (incll's epoch
                          thread is not one the scheduler runs), else as set */
    long replay; /* --replay: the one image to make and keep, or -1 */
    int inferred; /* the trace's stores are inferred (CHK_INFERRED, pmdk):
                     crash points at fences only */
    unsigned timeout;
    const char *check;
    char **prog; /* PROGRAM ARGS..., {pool} replaced */
    char pool[128], trace[128], rtrace[128], out[128], wtrace[128];
    char reach[128]; /* CMD's leak check verdict (CHK_ENV_REACH) */
    char keep[128];  /* CMD's own file, kept from one image to the next
                        (TXN_CHECK_CMD_FILE): a reference run's result */
    char engine[32];
} C = {.images = 200, .seed = 1, .pdom = 1, .replay = -1, .timeout = 10};

static void cleanup(void)
{
    unlink(C.trace);
    unlink(C.rtrace);
    unlink(C.wtrace);
    unlink(C.out);
    unlink(C.reach);
    unlink(C.keep);
    if (C.replay < 0)
        unlink(C.pool);
}

/* The child running now (its process group), for a signal's cleanup. */
static volatile pid_t running;

/* Interrupted: the child's group ended and nothing left in /dev/shm
 * (unlink and kill are async-signal-safe). */
static void on_signal(int sig)
{
    if (running > 0) { /* gone before the files go: it may be making one */
        kill(-running, SIGKILL);
        waitpid(running, NULL, 0);
    }
    cleanup();
    _exit(128 + sig);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("txn-crashcheck: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    cleanup();
    exit(2);
}

static void usage(void)
{
    fputs("usage: txn-crashcheck [--images N] [--seed S] [--pdom 0|1|2] [--threads-sched]\n"
          "                      [--replay S:N] [--check-timeout SEC] --check 'CMD {pool}'"
          " -- PROGRAM ARGS... {pool}\n",
          stderr);
    exit(2);
}

/* `s` with every {pool} replaced by the pool's path (malloc'd). */
static char *subst(const char *s)
{
    size_t n = strlen(s) + 1, k = 0;
    for (const char *p = s; (p = strstr(p, "{pool}")); p += 6)
        k++;
    char *r = malloc(n + k * strlen(C.pool)), *w = r;
    if (!r)
        die("out of memory");
    for (const char *p = s, *q; ; p = q + 6) {
        if (!(q = strstr(p, "{pool}"))) {
            strcpy(w, p);
            break;
        }
        memcpy(w, p, (size_t)(q - p));
        w += q - p;
        w = stpcpy(w, C.pool);
    }
    return r;
}

/* ---- child processes, each in a process group of its own so that a
 * timeout ends all it started */
struct run {
    int status;   /* wait status */
    int timedout;
};

static void set_env(const char *k, const char *v)
{
    if (v)
        setenv(k, v, 1);
    else
        unsetenv(k);
}

/* A child in a process group of its own, recorded as `running` before a
 * signal can come: no interruption between the fork and the record (the
 * child would be left making files after the cleanup). fork_child returns
 * in both; the parent then calls forked(). */
static pid_t fork_child(sigset_t *was)
{
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    sigprocmask(SIG_BLOCK, &stop, was);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        sigprocmask(SIG_SETMASK, was, NULL);
        setpgid(0, 0);
    }
    return pid;
}

static void forked(pid_t pid, const sigset_t *was)
{
    setpgid(pid, pid);
    running = pid;
    sigprocmask(SIG_SETMASK, was, NULL);
}

/* Runs argv (or `sh -c cmd`) with the environment of `env` (NULL-ended
 * pairs; a NULL value unsets), stdout and stderr to C.out when `capture`,
 * else stdout to /dev/null; waits at most C.timeout s. */
static struct run spawn(char **argv, const char *cmd, const char *const *env, int capture)
{
    struct run r = {0, 0};
    sigset_t was;
    pid_t pid = fork_child(&was);
    if (pid == 0) {
        for (const char *const *e = env; e && *e; e += 2)
            set_env(e[0], e[1]);
        int fd = open(capture ? C.out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            if (capture)
                dup2(fd, 2);
            close(fd);
        }
        if (cmd) {
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        } else {
            /* PROGRAM at the same addresses in every run: an engine whose
             * pool holds its mapping's addresses (pmdk's libpmemobj keeps
             * pointers in its pool's runtime part) then stores the same
             * bytes again (--replay, the reruns for source lines); pmtx's
             * own pools take their address from the seed anyway */
            personality(ADDR_NO_RANDOMIZE);
            execvp(argv[0], argv);
        }
        fprintf(stderr, "txn-crashcheck: cannot run %s: %s\n", cmd ? "/bin/sh" : argv[0],
                strerror(errno));
        _exit(127);
    }
    forked(pid, &was);
    /* woken by the child's exit itself (a pidfd), not by polling: a
     * check is a few ms, and a poll's sleep would be a good part of it */
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned us = 50;;) {
        pid_t w = waitpid(pid, &r.status, WNOHANG);
        if (w == pid)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = (long)C.timeout * 1000 - (long)(now.tv_sec - t0.tv_sec) * 1000 -
                    (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (left <= 0) {
            kill(-pid, SIGKILL);
            waitpid(pid, &r.status, 0);
            r.timedout = 1;
            break;
        }
        if (pfd >= 0) {
            struct pollfd q = {pfd, POLLIN, 0};
            poll(&q, 1, (int)(left < 1000 ? left : 1000));
        } else { /* a kernel without pidfds */
            usleep(us);
            if (us < 5000)
                us *= 2;
        }
    }
    running = 0;
    if (pfd >= 0)
        close(pfd);
    return r;
}

static void show_output(const char *who)
{
    FILE *f = fopen(C.out, "r");
    char line[512];
    int n = 0;
    if (!f)
        return;
    while (fgets(line, sizeof line, f) && n++ < 20)
        fprintf(stderr, "    %s: %s", who, line);
    fclose(f);
}

/* ---- the trace */
struct trace {
    char *p;
    size_t n;
};

static int trace_load(const char *path, struct trace *t)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    t->p = NULL;
    t->n = 0;
    if (fd < 0 || fstat(fd, &st)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    t->n = (size_t)st.st_size;
    if (t->n) {
        t->p = mmap(NULL, t->n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (t->p == MAP_FAILED)
            t->p = NULL;
    }
    close(fd);
    return t->p ? 0 : -1;
}

static void trace_unload(struct trace *t)
{
    if (t->p)
        munmap(t->p, t->n);
    t->p = NULL;
}

/* The record at *pos, its payload in *pl; advances *pos. NULL at the end
 * (or at a record cut short: a program killed while writing). */
static const struct chk_rec *next_rec(const struct trace *t, size_t *pos, const char **pl)
{
    if (t->n - *pos < sizeof(struct chk_rec))
        return NULL;
    const struct chk_rec *r = (const void *)(t->p + *pos);
    uint64_t body = r->type == CHK_MAP || r->type == CHK_GROW ? r->arg : chk_pad(r->len);
    if (t->n - *pos - sizeof *r < body)
        return NULL;
    *pl = t->p + *pos + sizeof *r;
    *pos += sizeof *r + body;
    return r;
}

static int is_point(const struct chk_rec *r)
{
    if (C.inferred) /* the stores between two fences are in address order */
        return r->type == CHK_FENCE;
    return r->type == CHK_STORE || r->type == CHK_FLUSH || r->type == CHK_FENCE;
}

static const char *const type_name[CHK_TYPES] = {
    [CHK_STORE] = "store", [CHK_FLUSH] = "flush", [CHK_FENCE] = "fence"};

/* ---- the replay: the model fed from the trace, in the memory `mem` */
struct state {
    char *mem;    /* the pool as the program's traced stores left it */
    size_t size;
    uint64_t committed, inflight, synced, acked, untraced;
    uint64_t sync_from; /* committed when the sync in progress started */
    uint64_t txn;       /* the last transaction begun */
    const struct chk_rec *last; /* the last point's record */
    uint64_t last_no, no;       /* its number in the trace; the record's */
    uint64_t ack_no;            /* the number of the last CHK_ACK, or 0 */
    uint64_t switch_no;         /* the last CHK_SWITCH's, or 0 */
    uint64_t switch_from, switch_to; /* its threads */
    struct {
        uint64_t txn, no;
    } unl[16]; /* transactions not ended that let go of a lock (CHK_UNLOCK) */
    unsigned nunl;
    struct {
        uint64_t no, off, txn;
    } unt[SHOW_FAILURES]; /* the first untraced stores of different transactions */
    unsigned nunt;
    struct {
        uint64_t off, no;
    } *alloc; /* CHK_ALLOC: each object allocated, and its record's number */
    size_t nalloc, alloc_cap;
    uint64_t grows; /* CHK_GROW records fed */
};

/* Transaction `txn` ended: its lock let go (CHK_UNLOCK) is no longer one
 * of a transaction in flight. */
static void unlocked_end(struct state *s, uint64_t txn)
{
    for (unsigned i = 0; i < s->nunl; i++)
        if (s->unl[i].txn == txn) {
            s->unl[i] = s->unl[--s->nunl];
            return;
        }
}

/* One record into the model; 1 when it was a crash point. */
static int feed(struct state *s, const struct chk_rec *r, const char *pl, int quiet)
{
    switch (r->type) {
    case CHK_MAP:
        if (s->mem)
            munmap(s->mem, s->size);
        s->size = r->arg;
        s->mem = trace_buf_alloc(s->size);
        if (!s->mem || trace_attach(s->mem, s->size, pl))
            die("out of memory (a pool of %zu bytes)", s->size);
        memcpy(s->mem, pl, s->size);
        return 0;
    case CHK_GROW: { /* the model's memory larger, its state kept */
        if (!s->mem || r->off != s->size)
            die("trace: a growth not at the pool's end");
        size_t n = s->size + r->arg;
        char *m = trace_buf_alloc(n);
        if (!m)
            die("out of memory (a pool of %zu bytes)", n);
        memcpy(m, s->mem, s->size);
        memcpy(m + s->size, pl, r->arg);
        if (trace_grow(m, n, pl))
            die("out of memory (a pool of %zu bytes)", n);
        trace_buf_free(s->mem, s->size);
        s->mem = m;
        s->size = n;
        s->grows++;
        return 0;
    }
    case CHK_STORE:
        if (!s->mem || r->off + r->len > s->size)
            die("trace: a store outside the pool");
        memcpy(s->mem + r->off, pl, r->len);
        trace_lock();
        trace_store_unlock(s->mem + r->off, r->len);
        break;
    case CHK_FLUSH:
        if (!s->mem)
            die("trace: a flush outside the pool");
        trace_flush(s->mem + r->off, r->arg);
        break;
    case CHK_FENCE:
        if (!s->mem)
            die("trace: a fence outside the pool");
        trace_fence();
        break;
    case CHK_UNTRACED:
        if (!s->mem || r->off + r->len > s->size)
            die("trace: an untraced store outside the pool");
        memcpy(s->mem + r->off, pl, r->len);
        s->untraced++;
        if (!quiet && s->nunt < SHOW_FAILURES && (!s->nunt || s->unt[s->nunt - 1].txn != r->arg))
            s->unt[s->nunt++] = (typeof(s->unt[0])){s->no, r->off, r->arg};
        if (!quiet && s->untraced <= SHOW_FAILURES)
            fprintf(stderr,
                    "untraced store at pool offset %#llx (%u bytes), found at the end of "
                    "transaction %llu or after it: a store to the pool not made through "
                    "txn_write (a TXN_RO pointer?)\n",
                    (unsigned long long)r->off, r->len, (unsigned long long)r->arg);
        /* the model takes the bytes from here on */
        trace_lock();
        trace_audit(NULL);
        trace_unlock();
        return 0;
    case CHK_BEGIN:
        s->txn = r->off;
        return 0;
    case CHK_COMMIT:
        s->inflight++;
        return 0;
    case CHK_COMMITTED:
        unlocked_end(s, r->off);
        s->inflight--;
        if (!r->len)
            s->committed++;
        return 0;
    case CHK_SYNC:
        s->sync_from = s->committed;
        return 0;
    case CHK_SYNCED:
        s->synced = s->sync_from;
        return 0;
    case CHK_ACK:
        s->acked = r->arg;
        s->ack_no = s->no;
        return 0;
    case CHK_UNLOCK: /* the first of a transaction's, while room */
        for (unsigned i = 0; i < s->nunl; i++)
            if (s->unl[i].txn == r->off)
                return 0;
        if (s->nunl < sizeof s->unl / sizeof s->unl[0])
            s->unl[s->nunl++] = (typeof(s->unl[0])){r->off, s->no};
        return 0;
    case CHK_ABORT:
        unlocked_end(s, r->off);
        return 0;
    case CHK_SWITCH:
        s->switch_no = s->no;
        s->switch_from = r->off;
        s->switch_to = r->arg;
        return 0;
    case CHK_ALLOC:
        if (s->nalloc == s->alloc_cap) {
            s->alloc_cap = s->alloc_cap ? 2 * s->alloc_cap : 1024;
            if (!(s->alloc = realloc(s->alloc, s->alloc_cap * sizeof *s->alloc)))
                die("out of memory");
        }
        s->alloc[s->nalloc++] = (typeof(s->alloc[0])){r->off, s->no};
        return 0;
    case CHK_UNMAP:
        return 0;
    default:
        return 0;
    }
    s->last = r;
    s->last_no = s->no;
    return is_point(r);
}

static void image_of(const struct state *s, char *buf, uint64_t point)
{
    if (C.pdom == 2) { /* eADR: every store up to the crash, in order */
        memcpy(buf, s->mem, s->size);
        return;
    }
    uint64_t x = C.seed ^ point * 0x9e3779b97f4a7c15ull;
    trace_image(buf, trace_mix(&x));
}

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

static uint64_t mix(uint64_t *s)
{
    return trace_mix(s);
}

/* Recovery of the image at C.pool crashed at a random event of its own
 * trace, leaving that image at C.pool. In a forked process: the model is
 * one per process, and the campaign's must go on. 0, or what went wrong. */
static const char *crash_recovery(uint64_t rng)
{
    const char *env[] = {CHK_ENV_RECOVER, "1", CHK_ENV_TRACE, C.rtrace, CHK_ENV_POOL, C.pool,
                         "TXN_PDOM", C.pdom_s, "TXN_PDOM0_NS", "0", "TXN_PDOM1_NS", "0",
                         NULL};
    /* the image kept aside: recovery writes the pool in place */
    struct trace img;
    if (trace_load(C.pool, &img))
        return "cannot read the image";
    char *saved = malloc(img.n);
    if (!saved)
        die("out of memory");
    memcpy(saved, img.p, img.n);
    size_t n = img.n;
    trace_unload(&img);
    struct run r = spawn(C.prog, NULL, env, 1);
    if (r.timedout || !WIFEXITED(r.status) || WEXITSTATUS(r.status)) {
        free(saved);
        return r.timedout ? "recovery did not end" : "recovery failed";
    }
    sigset_t was;
    pid_t pid = fork_child(&was);
    if (pid == 0) {
        struct trace t;
        struct state s = {0};
        if (trace_load(C.rtrace, &t))
            _exit(3);
        uint64_t events = 0;
        const char *pl;
        size_t pos = 0;
        const struct chk_rec *rec;
        while ((rec = next_rec(&t, &pos, &pl)))
            events += is_point(rec);
        uint64_t at = events ? mix(&rng) % events : 0, e = 0;
        int mapped = 0;
        for (pos = 0; (rec = next_rec(&t, &pos, &pl));) {
            if (rec->type == CHK_MAP) {
                if (mapped++) /* one open of the image only */
                    break;
                if (rec->arg != n)
                    _exit(4);
                feed(&s, rec, saved, 1);
                continue;
            }
            if (feed(&s, rec, pl, 1) && e++ == at)
                break;
        }
        if (!s.mem)
            _exit(5);
        image_of(&s, saved, at + 1000003);
        _exit(write_file(C.pool, saved, n) ? 6 : 0);
    }
    forked(pid, &was);
    int st, got = (int)waitpid(pid, &st, 0);
    running = 0;
    free(saved);
    if (got != pid || !WIFEXITED(st) || WEXITSTATUS(st))
        return "the crash of recovery could not be made";
    return NULL;
}

/* The failures reported in full: their images and the numbers of the
 * records their crashes followed (where_report). */
static struct {
    uint64_t image, no, ack_no, switch_no, switch_from, switch_to, unlock_no, unlock_txn;
    uint64_t leak_off, leak_no; /* a leaked object's offset and its CHK_ALLOC's
                                   number (0: none) */
} shown[SHOW_FAILURES];
static unsigned nshown;

/* ---- source lines: PROGRAM run again from the seed with the recorder
 * asked for the stack of record `no` (TXN_CHECK_WHERE); the run is the
 * same when the program is deterministic and single-threaded, which the
 * record's own type and offset confirm. The frames, through addr2line. */
static int where_of(const struct trace *orig, uint64_t no, char *out, size_t cap)
{
    char seed[32], pdom[8], at[32];
    const char *path = C.wtrace;
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)C.seed);
    snprintf(pdom, sizeof pdom, "%d", C.pdom);
    snprintf(at, sizeof at, "%llu", (unsigned long long)no);
    const char *env[] = {CHK_ENV_TRACE, path, CHK_ENV_POOL, C.pool, CHK_ENV_SEED, seed,
                         "TXN_PDOM", pdom, "TXN_PDOM0_NS", "0", "TXN_PDOM1_NS", "0",
                         CHK_ENV_RECOVER, NULL, CHK_ENV_WHERE, at, CHK_ENV_SCHED, C.sched,
                         "TXN_EPOCH_MS", C.epoch, NULL};
    unlink(C.pool);
    unsigned keep = C.timeout;
    C.timeout = 3600;
    struct run r = spawn(C.prog, NULL, env, 1);
    C.timeout = keep;
    unlink(C.pool);
    struct trace t;
    int found = 0;
    if (!r.timedout && !trace_load(path, &t)) {
        const struct chk_rec *a = NULL, *b = NULL, *x;
        const char *pl, *wpl = NULL;
        size_t pa = 0, pb = 0;
        uint64_t i = 0;
        for (; (x = next_rec(orig, &pa, &pl)) && i <= no; i++)
            a = x;
        for (i = 0; (x = next_rec(&t, &pb, &pl)); i++) {
            if (i == no)
                b = x;
            if (x->type == CHK_WHERE && x->off == no) {
                wpl = pl;
                found = x->len;
                break;
            }
        }
        if (!a || !b || a->type != b->type || a->off != b->off || a->len != b->len) {
            found = 0;
        } else if (found) {
            char *text = strndup(wpl, (size_t)found), *save = NULL;
            size_t used = 0;
            int frames = 0;
            for (char *ln = strtok_r(text, "\n", &save); ln && frames < 3;
                 ln = strtok_r(NULL, "\n", &save)) {
                char *tab = strchr(ln, '\t'), cmd[4200], line[512];
                if (!tab)
                    continue;
                *tab = 0;
                /* -i: a function inlined into its caller gives a line
                 * each; txn.h's own inline calls are not the program's */
                snprintf(cmd, sizeof cmd, "addr2line -f -C -s -p -i -e '%s' %s 2>/dev/null", ln,
                         tab + 1);
                FILE *f = popen(cmd, "r");
                while (f && frames < 3 && used < cap && fgets(line, sizeof line, f)) {
                    line[strcspn(line, "\n")] = 0;
                    const char *l = line;
                    if (!strncmp(l, " (inlined by) ", 14))
                        l += 14;
                    /* txn.h's functions are named txn_* (inlined or not,
                     * as the build's optimisation says) */
                    if (!strstr(l, "??") && strncmp(l, "txn_", 4) &&
                        !strstr(l, " at txn.h:") && !strstr(l, " at txn_check.h:"))
                        used += (size_t)snprintf(out + used, cap - used, "%s%s",
                                                 frames++ ? " <- " : "", l);
                }
                if (f)
                    pclose(f);
                if (used >= cap)
                    break;
            }
            free(text);
            found = frames > 0;
        }
        trace_unload(&t);
    }
    unlink(path);
    return found ? 0 : -1;
}

static void where_report(const struct trace *t, const struct state *s)
{
    char at[1024];
    for (unsigned i = 0; i < nshown; i++) {
        if (!where_of(t, shown[i].no, at, sizeof at))
            fprintf(stderr, "image %llu: the crash followed the event made at %s\n",
                    (unsigned long long)shown[i].image, at);
        else
            fprintf(stderr, "image %llu: no source line (the program did not run the same "
                    "way again, or has no debugging information)\n",
                    (unsigned long long)shown[i].image);
        if (shown[i].ack_no && !where_of(t, shown[i].ack_no, at, sizeof at))
            fprintf(stderr, "image %llu: the last acknowledgement before the crash was made "
                    "at %s\n", (unsigned long long)shown[i].image, at);
        /* --threads-sched: where the thread that ran before it let the
         * baton go (a lock let go too early shows there) */
        if (shown[i].switch_no && !where_of(t, shown[i].switch_no, at, sizeof at))
            fprintf(stderr, "image %llu: the last thread switch before the crash, from thread "
                    "%llu to %llu, was made at %s\n", (unsigned long long)shown[i].image,
                    (unsigned long long)shown[i].switch_from,
                    (unsigned long long)shown[i].switch_to, at);
        /* a transaction not ended at the crash whose thread let others in */
        if (shown[i].unlock_no && !where_of(t, shown[i].unlock_no, at, sizeof at))
            fprintf(stderr, "image %llu: transaction %llu, not ended at the crash, let go of "
                    "a lock before its end at %s\n", (unsigned long long)shown[i].image,
                    (unsigned long long)shown[i].unlock_txn, at);
        if (shown[i].leak_no && !where_of(t, shown[i].leak_no, at, sizeof at))
            fprintf(stderr, "image %llu: the leaked object at pool offset %#llx was allocated "
                    "at %s\n", (unsigned long long)shown[i].image,
                    (unsigned long long)shown[i].leak_off, at);
    }
    for (unsigned i = 0; i < s->nunt; i++)
        if (!where_of(t, s->unt[i].no, at, sizeof at))
            fprintf(stderr, "untraced store at pool offset %#llx: found at the end of "
                    "transaction %llu, whose end is at %s\n",
                    (unsigned long long)s->unt[i].off, (unsigned long long)s->unt[i].txn, at);
}

/* The image being checked, as written (before recovery). */
static const char *cur_image;
static size_t cur_size;

/* A checksum of an image, to tell one from another in reports. */
static uint64_t image_sum(const char *b, size_t n)
{
    uint64_t h = 1469598103934665603ull, w;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    return h;
}

/* ---- one image at C.pool: recovered, checked by pmtx and by CMD */
struct verdict {
    uint64_t images, bad;
    uint64_t reached; /* images whose CMD made the leak check */
};


static void report(uint64_t image, uint64_t point, uint64_t points, const struct state *s,
                   const char *what, int show)
{
    if (!show)
        return;
    if (nshown < SHOW_FAILURES)
        shown[nshown++] = (typeof(shown[0])){image,          s->last_no,     s->ack_no,
                                             s->switch_no,   s->switch_from, s->switch_to,
                                             s->nunl ? s->unl[0].no : 0,
                                             s->nunl ? s->unl[0].txn : 0, 0, 0};
    const struct chk_rec *r = s->last;
    fprintf(stderr,
            "inconsistent image %llu (--replay %llu:%llu, checksum %016llx): crash after event "
            "%llu of %llu, "
            "a %s at pool offset %#llx, in or after transaction %llu; commits returned %llu, "
            "in flight %llu, acknowledged %llu\n  %s\n",
            (unsigned long long)image, (unsigned long long)C.seed, (unsigned long long)image,
            (unsigned long long)image_sum(cur_image, cur_size), (unsigned long long)point,
            (unsigned long long)points,
            r && type_name[r->type] ? type_name[r->type] : "?",
            (unsigned long long)(r ? r->off : 0), (unsigned long long)s->txn,
            (unsigned long long)s->committed, (unsigned long long)s->inflight,
            (unsigned long long)s->acked, what);
}

/* The allocator's side of CMD's run: the verdict its library wrote at the
 * pool's close when CMD named what it reaches (txn_check_reach). A leak is
 * given the line of its object's allocation: the last CHK_ALLOC of its
 * offset before the crash. */
static void leak_check(uint64_t image, uint64_t point, uint64_t points, const struct state *s,
                       struct verdict *v, int show)
{
    FILE *f = fopen(C.reach, "r");
    if (!f)
        return;
    char line[128], list[3][96];
    unsigned long long off, size, leaks = 0, frees = 0, first_leak = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "reached ", 8)) {
            v->reached++;
        } else if (sscanf(line, "leak %llx %llu", &off, &size) == 2) {
            if (leaks + frees < 3)
                snprintf(list[leaks + frees], sizeof list[0],
                         "leaked: allocated, reached by nothing: pool offset %#llx (%llu bytes)",
                         off, size);
            if (!leaks++)
                first_leak = off;
        } else if (sscanf(line, "free %llx", &off) == 1) {
            if (leaks + frees < 3)
                snprintf(list[leaks + frees], sizeof list[0],
                         "reached and free: pool offset %#llx", off);
            frees++;
        } else { /* the library's words about what it could not check */
            line[strcspn(line, "\n")] = 0;
            if (leaks + frees < 3)
                snprintf(list[leaks + frees], sizeof list[0], "%.90s", line);
            frees++;
        }
    }
    fclose(f);
    unlink(C.reach);
    if (!leaks && !frees)
        return;
    char what[160];
    snprintf(what, sizeof what, "allocator: %llu block%s leaked, %llu reached and free", leaks,
             leaks == 1 ? "" : "s", frees);
    v->bad++;
    report(image, point, points, s, what, show);
    if (!show)
        return;
    for (unsigned long long i = 0; i < leaks + frees && i < 3; i++)
        fprintf(stderr, "    %s\n", list[i]);
    for (size_t i = s->nalloc; leaks && i-- > 0;)
        if (s->alloc[i].off == first_leak) {
            shown[nshown - 1].leak_off = first_leak;
            shown[nshown - 1].leak_no = s->alloc[i].no;
            break;
        }
}

static void check_image(uint64_t image, uint64_t point, uint64_t points, const struct state *s,
                        struct verdict *v)
{
    char n1[32], n2[32], n3[32], n4[32];
    int show = v->bad < SHOW_FAILURES;
    v->images++;
    uint64_t rng = C.seed * 0x2545f4914f6cdd1dull + image;
    if (mix(&rng) % 4 == 0) { /* recovery crashed too */
        const char *why = crash_recovery(rng);
        if (why) {
            v->bad++;
            report(image, point, points, s, why, show);
            if (show)
                show_output("recovery");
            return;
        }
    }
    /* the recovery runs at the PDOM the program ran at */
    const char *env[] = {CHK_ENV_RECOVER, "1", CHK_ENV_POOL, C.pool, CHK_ENV_TRACE, NULL,
                         "TXN_PDOM", C.pdom_s, "TXN_PDOM0_NS", "0", "TXN_PDOM1_NS", "0",
                         NULL};
    struct run r = spawn(C.prog, NULL, env, 1);
    if (r.timedout || !WIFEXITED(r.status) || WEXITSTATUS(r.status)) {
        v->bad++;
        report(image, point, points, s,
               r.timedout ? "recovery did not end within --check-timeout"
                          : "recovery failed, or the recovered pool is not consistent",
               show);
        if (show)
            show_output("recovery");
        return;
    }
    snprintf(n1, sizeof n1, "%llu", (unsigned long long)s->committed);
    snprintf(n2, sizeof n2, "%llu", (unsigned long long)s->inflight);
    snprintf(n3, sizeof n3, "%llu", (unsigned long long)s->synced);
    snprintf(n4, sizeof n4, "%llu", (unsigned long long)s->acked);
    /* the run's seed too: a CMD can run PROGRAM's schedule again
     * (tests/crashcheck/wl_check.c's reference run of threads), once, its
     * result kept in the file named */
    char n5[32];
    snprintf(n5, sizeof n5, "%llu", (unsigned long long)C.seed);
    const char *cenv[] = {"TXN_CHECK_COMMITTED", n1, "TXN_CHECK_INFLIGHT", n2,
                          "TXN_CHECK_SYNCED", n3, "TXN_CHECK_ACKED", n4, "TXN_CHECK_RUN_SEED", n5,
                          "TXN_CHECK_CMD_FILE", C.keep,
                          CHK_ENV_REACH, C.reach, NULL};
    unlink(C.reach);
    char *cmd = subst(C.check);
    r = spawn(NULL, cmd, cenv, 1);
    free(cmd);
    if (r.timedout || !WIFEXITED(r.status) || WEXITSTATUS(r.status)) {
        char what[128];
        if (r.timedout)
            snprintf(what, sizeof what, "CMD did not end within --check-timeout (%u s)",
                     C.timeout);
        else if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127)
            snprintf(what, sizeof what, "CMD could not be run (exit 127)");
        else if (WIFEXITED(r.status))
            snprintf(what, sizeof what, "CMD exited with %d", WEXITSTATUS(r.status));
        else
            snprintf(what, sizeof what, "CMD was killed by signal %d", WTERMSIG(r.status));
        v->bad++;
        report(image, point, points, s, what, show);
        if (show)
            show_output("CMD");
        if (r.timedout || (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 127))
            die("%s: stopping (CMD: %s)", what, C.check);
        return;
    }
    leak_check(image, point, points, s, v, show);
}

/* A crash point: image `image` is taken after event `event`. */
struct point {
    uint64_t event, image;
};

static int by_event(const void *a, const void *b)
{
    const struct point *x = a, *y = b;
    if (x->event != y->event)
        return (x->event > y->event) - (x->event < y->event);
    return (x->image > y->image) - (x->image < y->image);
}

static uint64_t number(const char *s, const char *what, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || v > max || *s == '-') {
        fprintf(stderr, "txn-crashcheck: %s: '%s' is not a number from 0 to %llu\n", what, s,
                (unsigned long long)max);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"images", required_argument, 0, 'n'},
                                         {"seed", required_argument, 0, 's'},
                                         {"pdom", required_argument, 0, 'p'},
                                         {"threads-sched", no_argument, 0, 't'},
                                         {"check-timeout", required_argument, 0, 'T'},
                                         {"check", required_argument, 0, 'c'},
                                         {"replay", required_argument, 0, 'r'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "+", opts, NULL)) != -1;) {
        if (c == 'n')
            C.images = number(optarg, "--images", MAX_IMAGES);
        else if (c == 's')
            C.seed = number(optarg, "--seed", UINT64_MAX);
        else if (c == 'p')
            C.pdom = (int)number(optarg, "--pdom", 2);
        else if (c == 'T')
            C.timeout = (unsigned)number(optarg, "--check-timeout", 86400);
        else if (c == 'c')
            C.check = optarg;
        else if (c == 'r') {
            char *colon = strchr(optarg, ':');
            if (!colon)
                die("--replay takes SEED:IMAGE, as an inconsistent image's report prints it");
            *colon = 0;
            C.seed = number(optarg, "--replay's seed", UINT64_MAX);
            C.replay = (long)number(colon + 1, "--replay's image", MAX_IMAGES);
        } else if (c == 't') {
            C.sched = "1";
        } else {
            usage();
        }
    }
    if (optind >= argc || !C.check)
        usage();
    snprintf(C.pdom_s, sizeof C.pdom_s, "%d", C.pdom);
    C.epoch = C.sched ? "0" : getenv("TXN_EPOCH_MS");
    if (!strstr(C.check, "{pool}"))
        die("--check's CMD must name the pool as {pool}");
    if (C.timeout == 0)
        die("--check-timeout must be at least 1 s");
    int has_pool = 0;
    for (int i = optind; i < argc; i++)
        has_pool |= strstr(argv[i], "{pool}") != NULL;
    if (!has_pool)
        die("PROGRAM's arguments must name the pool as {pool}");
    if (C.replay >= 0 && (uint64_t)C.replay >= C.images)
        C.images = (uint64_t)C.replay + 1;

    int pid = (int)getpid();
    /* its files: in memory, as the pools it tests (TXN_CHECK_DIR: elsewhere) */
    const char *dir = getenv("TXN_CHECK_DIR");
    if (!dir || !*dir)
        dir = "/dev/shm";
    if (strlen(dir) > 60)
        die("TXN_CHECK_DIR: a directory name of at most 60 bytes");
    snprintf(C.pool, sizeof C.pool, "%s/txn-crashcheck-%d.pool", dir, pid);
    snprintf(C.trace, sizeof C.trace, "%s/txn-crashcheck-%d.trace", dir, pid);
    snprintf(C.rtrace, sizeof C.rtrace, "%s/txn-crashcheck-%d.rtrace", dir, pid);
    snprintf(C.out, sizeof C.out, "%s/txn-crashcheck-%d.out", dir, pid);
    snprintf(C.wtrace, sizeof C.wtrace, "%s/txn-crashcheck-%d.wtrace", dir, pid);
    snprintf(C.reach, sizeof C.reach, "%s/txn-crashcheck-%d.reach", dir, pid);
    snprintf(C.keep, sizeof C.keep, "%s/txn-crashcheck-%d.cmd", dir, pid);
    if (C.replay >= 0)
        snprintf(C.pool, sizeof C.pool, "%s/txn-crashcheck-%llu-%ld.pool", dir,
                 (unsigned long long)C.seed, C.replay);
    unlink(C.pool);
    C.prog = calloc((size_t)(argc - optind + 1), sizeof *C.prog);
    if (!C.prog)
        die("out of memory");
    for (int i = optind; i < argc; i++)
        C.prog[i - optind] = subst(argv[i]);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);

    /* 1. the program, once, with the recorder on */
    char seed[32], pdom[8];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)C.seed);
    snprintf(pdom, sizeof pdom, "%d", C.pdom);
    /* the barrier's emulated latency is cost, not what the model checks */
    const char *env[] = {CHK_ENV_TRACE, C.trace, CHK_ENV_POOL, C.pool, CHK_ENV_SEED, seed,
                         "TXN_PDOM", pdom, "TXN_PDOM0_NS", "0", "TXN_PDOM1_NS", "0",
                         CHK_ENV_RECOVER, NULL, CHK_ENV_SCHED, C.sched, "TXN_EPOCH_MS", C.epoch,
                         NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned keep = C.timeout;
    C.timeout = 3600; /* the program's own run is not CMD's */
    struct run r = spawn(C.prog, NULL, env, 1);
    C.timeout = keep;
    if (r.timedout || !WIFEXITED(r.status) || WEXITSTATUS(r.status)) {
        show_output("PROGRAM");
        if (WIFSIGNALED(r.status))
            die("PROGRAM crashed by itself (signal %d: %s) before any image was taken",
                WTERMSIG(r.status), strsignal(WTERMSIG(r.status)));
        die("PROGRAM %s", r.timedout ? "did not end within an hour"
                                     : WEXITSTATUS(r.status) == 127 ? "could not be run"
                                                                    : "exited with an error");
    }
    unlink(C.pool); /* the images go there */
    struct trace t;
    size_t pos = 0;
    const char *pl;
    const struct chk_rec *rec;
    if (trace_load(C.trace, &t) || !(rec = next_rec(&t, &pos, &pl)) || rec->type != CHK_HELLO ||
        rec->off != CHK_MAGIC)
        die("PROGRAM wrote no trace: it is not linked with a -check library (build it with "
            "`pkg-config --cflags --libs txn-<engine>-check`), or its trace could not be "
            "written");
    if (rec->arg != CHK_VERSION)
        die("PROGRAM's library writes trace version %llu, this checker reads %u",
            (unsigned long long)rec->arg, CHK_VERSION);
    snprintf(C.engine, sizeof C.engine, "%.*s", (int)rec->len, pl);
    size_t after_hello = pos;
    if ((rec = next_rec(&t, &pos, &pl)) && rec->type == CHK_INFERRED) {
        C.inferred = 1;
        if (C.pdom != 2)
            die("PROGRAM's library (%s) infers its engine's stores at flushes and fences, "
                "not in their order: it is checked at --pdom 2 only", C.engine);
    } else {
        pos = after_hello;
    }
    /* the run's fingerprint: the same seed gives the same one when the
     * program runs the same way (one thread, or --threads-sched) */
    uint64_t digest = image_sum(t.p, t.n);
    uint64_t points = 0;
    int mapped = 0;
    while ((rec = next_rec(&t, &pos, &pl))) {
        mapped |= rec->type == CHK_MAP;
        points += mapped && is_point(rec);
    }
    if (!mapped)
        die("PROGRAM never created the pool {pool} named (%s)", C.pool);
    if (!points)
        die("PROGRAM stored nothing to its pool: there is nothing to crash");

    /* 2. the crash points, from the seed: image i's point is the seed's
     * i-th draw, whatever the image count (--replay S:N needs only N) */
    struct point *pt = malloc(C.images * sizeof *pt);
    uint64_t rng = C.seed ^ 0xc2b2ae3d27d4eb4full;
    if (!pt)
        die("out of memory");
    for (uint64_t i = 0; i < C.images; i++)
        pt[i] = (struct point){mix(&rng) % points, i};
    qsort(pt, C.images, sizeof *pt, by_event);

    /* 3. the replay, an image at each point */
    struct state s = {0};
    struct verdict v = {0};
    char *buf = NULL;
    size_t buf_size = 0; /* the pool's size grows (CHK_GROW), and a new
                            mapping may be larger */
    uint64_t e = 0, next = 0;
    for (pos = 0; (rec = next_rec(&t, &pos, &pl)) && next < C.images; s.no++) {
        if (!feed(&s, rec, pl, 0))
            continue;
        for (; next < C.images && pt[next].event == e; next++) {
            uint64_t image = pt[next].image;
            if (C.replay >= 0 && (long)image != C.replay)
                continue;
            if (buf_size < s.size) {
                trace_buf_free(buf, buf_size);
                if (!(buf = trace_buf_alloc(s.size)))
                    die("out of memory");
                buf_size = s.size;
            }
            image_of(&s, buf, image);
            if (write_file(C.pool, buf, s.size))
                die("cannot write the image %s: %s", C.pool, strerror(errno));
            cur_image = buf;
            cur_size = s.size;
            if (C.replay >= 0) {
                printf("image %ld: checksum %016llx\n", C.replay,
                       (unsigned long long)image_sum(buf, s.size));
                fflush(stdout);
            }
            check_image(image, e, points, &s, &v);
        }
        e++;
    }
    /* the untraced stores after the last point */
    while ((rec = next_rec(&t, &pos, &pl))) {
        s.no++;
        feed(&s, rec, pl, 0);
    }
    free(pt);
    where_report(&t, &s);
    if (C.replay >= 0 && buf && write_file(C.pool, buf, cur_size) == 0)
        printf("image %ld: the image (before recovery) is at %s\n", C.replay, C.pool);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    trace_unload(&t);
    trace_detach();
    if (s.mem)
        trace_buf_free(s.mem, s.size);
    free(s.alloc);
    if (s.grows)
        printf("the pool grew %llu time%s, to %zu bytes (images after a growth have its size)\n",
               (unsigned long long)s.grows, s.grows == 1 ? "" : "s", s.size);
    if (v.images)
        printf("leak check: made on %llu of %llu images%s\n", (unsigned long long)v.reached,
               (unsigned long long)v.images,
               v.reached ? "" : " (CMD named no object it reaches: txn_check_reach)");
    printf("%s: %llu events (trace %016llx), %.1f s, %.0f images/s\n", C.engine,
           (unsigned long long)points, (unsigned long long)digest, sec,
           (double)v.images / sec);
    printf("crash images: %llu, inconsistent: %llu, untraced stores: %llu\n",
           (unsigned long long)v.images, (unsigned long long)v.bad,
           (unsigned long long)s.untraced);
    cleanup();
    return v.bad || s.untraced ? 1 : 0;
}
