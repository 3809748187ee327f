/* delfloor: the least work a failure-atomic DEL of N keys must do, with
 * no pmtx code, to set beside redis-server's DEL and the store's engines.
 *
 * A file in a shared-memory mount (a pool under PMEM_IS_PMEM_FORCE=1 is
 * the same kind of memory) holds a chained hash table of 2^18 buckets
 * {head, count}, nodes of 64 bytes {next, hash, key, value} taken in the
 * order the keys are set (as an allocator hands out a run), an allocation
 * bitmap of a bit per node and an undo log. The keys are "k:0" .. as
 * scripts/msetbench.sh sends them, deleted in that order. Per key, each
 * variant adds to the one before:
 *   lookup   find the node, unlink it (bucket or previous node's next),
 *            count it down, push it on a volatile free list: no flush.
 *   +record  before the unlink, an undo record of the words it changes
 *            (address, old 16 bytes) appended to the log (a line written
 *            back when full), once per word in the transaction (a volatile
 *            bit per bucket and per node says which are saved); no fence.
 *   +free    at commit, the node's allocation bit cleared, the changed
 *            lines of the bitmap, the table and the nodes written back,
 *            one barrier, a commit word, one barrier.
 *   +fence   a barrier after each record, before its unlink: undo's rule
 *            that the old bytes are durable before any new byte may reach
 *            the media (the store's undo engine does this per distinct
 *            range written).
 * A barrier is an sfence then a wait until BARRIER_NS nanoseconds have
 * passed since it began (the store's emulation of a persistence domain
 * at PDOM 1; default 100, argument 2). Write-back is clwb where the
 * processor has it, else clflushopt, else none. The table is rebuilt,
 * outside the timing, before each round. Prints, of 9 rounds, the fastest
 * whole DEL in ms, and the sum over its parts (each CHUNK keys, and the
 * commit) of each part's fastest round, in ms and ns per key: on a host
 * shared with other work a round preempted part-way then costs only the
 * part it was preempted in. docs/kvstore.md section 18d has the figures. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BUCKET_BITS 18
#define ROUNDS 9
#define CHUNK 1000 /* keys timed together */
#define LINE 64

struct bucket {
    uint64_t head; /* node index + 1, 0 for none */
    uint64_t n;
};

struct node {
    uint64_t next; /* node index + 1 */
    uint64_t hash;
    uint32_t klen, vlen;
    char kv[40];
};

struct rec {
    uint64_t addr; /* of the 16 bytes saved */
    uint64_t old[2];
    uint64_t seq;
};

/* The file's layout: the table, the nodes, the bitmap, the log, a word
 * that says committed. */
struct pm {
    struct bucket *tab;
    struct node *nodes;
    uint64_t *bits;
    struct rec *log;
    uint64_t *commit;
};

enum { V_LOOKUP, V_RECORD, V_FREE, V_FENCE, VARIANTS };
static const char *const vname[VARIANTS] = {"lookup", "+record", "+free", "+fence"};

static int have_clwb, have_clflushopt;
static uint64_t barrier_ns = 100;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

__attribute__((target("clwb,clflushopt"))) static void wb_line(const void *p)
{
    if (have_clwb)
        __builtin_ia32_clwb(p);
    else if (have_clflushopt)
        __builtin_ia32_clflushopt((void *)(uintptr_t)p);
}

static void wb(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(LINE - 1), e = (uintptr_t)p + n;
    for (; a < e; a += LINE)
        wb_line((const void *)a);
}

static void barrier(void)
{
    uint64_t t0 = barrier_ns ? now_ns() : 0;
    __builtin_ia32_sfence();
    while (barrier_ns && now_ns() - t0 < barrier_ns)
        __builtin_ia32_pause();
}

/* FNV-1a, then a final mix so that the top bits pick the bucket */
static uint64_t hash_of(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static void fill(struct pm *m, size_t n)
{
    memset(m->tab, 0, sizeof *m->tab << BUCKET_BITS);
    memset(m->bits, 0, (n + 63) / 64 * 8);
    for (size_t i = 0; i < n; i++) {
        struct node *x = &m->nodes[i];
        int kl = snprintf(x->kv, sizeof x->kv, "k:%zu", i);
        int vl = snprintf(x->kv + kl, sizeof x->kv - (size_t)kl, "value-of-%zu", i);
        x->klen = (uint32_t)kl;
        x->vlen = (uint32_t)vl;
        x->hash = hash_of(x->kv, (size_t)kl);
        struct bucket *b = &m->tab[x->hash >> (64 - BUCKET_BITS)];
        x->next = b->head;
        b->head = i + 1;
        b->n++;
        m->bits[i / 64] |= 1ull << (i % 64);
    }
}

/* Append an undo record of the n (8 or 16) bytes at p; a line of the log
 * is written back once, when it is full (log_tail: the rest). A line
 * written back and then written again waits for the write-back, so a log
 * wrote back at each record costs several times this. */
static int put_rec(struct pm *m, size_t *nrec, const uint64_t *p, size_t n)
{
    struct rec *r = &m->log[(*nrec)++];
    r->addr = (uint64_t)(uintptr_t)p;
    memcpy(r->old, p, n);
    r->seq = *nrec;
    if (((uintptr_t)(r + 1) & (LINE - 1)) == 0)
        wb(r, sizeof *r);
    return 1;
}

/* Write back the log's partial last line (before a barrier). */
static void log_tail(struct pm *m, size_t nrec)
{
    if (nrec && ((uintptr_t)&m->log[nrec] & (LINE - 1)))
        wb(&m->log[nrec - 1], sizeof(struct rec));
}

/* The DEL of every key, as variant v does it: the number deleted.
 * saved_b and saved_n: a zeroed bit per bucket and per node. */
static size_t del_all(struct pm *m, size_t n, int v, const char *keys, const uint32_t *koff,
                      uint64_t *freelist, uint8_t *saved_b, uint8_t *saved_n, uint64_t *part)
{
    size_t nrec = 0, nfree = 0;
    uint64_t t = now_ns();
    for (size_t i = 0; i < n; i++) {
        if (i % CHUNK == 0 && i) {
            uint64_t t1 = now_ns();
            part[i / CHUNK - 1] = t1 - t;
            t = t1;
        }
        const char *k = keys + koff[i];
        size_t kl = koff[i + 1] - koff[i];
        uint64_t h = hash_of(k, kl);
        struct bucket *b = &m->tab[h >> (64 - BUCKET_BITS)];
        uint64_t *link = &b->head, cur = *link;
        while (cur) {
            struct node *x = &m->nodes[cur - 1];
            if (x->hash == h && x->klen == kl && !memcmp(x->kv, k, kl))
                break;
            link = &x->next;
            cur = *link;
        }
        if (!cur)
            continue;
        struct node *x = &m->nodes[cur - 1];
        if (v >= V_RECORD) { /* the words the unlink changes: the bucket
                                {head, count}, and the previous node's next */
            size_t bi = (size_t)(b - m->tab), pi = link == &b->head ? 0 : (size_t)((struct node *)(void *)link - m->nodes);
            int fresh = 0;
            if (!(saved_b[bi / 8] >> (bi % 8) & 1)) {
                saved_b[bi / 8] |= (uint8_t)(1u << (bi % 8));
                fresh += put_rec(m, &nrec, &b->head, 16);
            }
            if (link != &b->head && !(saved_n[pi / 8] >> (pi % 8) & 1)) {
                saved_n[pi / 8] |= (uint8_t)(1u << (pi % 8));
                fresh += put_rec(m, &nrec, link, 8);
            }
            if (v >= V_FENCE && fresh) {
                log_tail(m, nrec);
                barrier();
            }
        }
        *link = x->next;
        b->n--;
        freelist[nfree++] = cur - 1;
    }
    uint64_t t1 = now_ns();
    part[(n - 1) / CHUNK] = t1 - t;
    t = t1;
    if (v >= V_FREE) { /* each changed line written back once */
        uintptr_t last = 0;
        for (size_t j = 0; j < nfree; j++) {
            uint64_t idx = freelist[j];
            uint64_t *w = &m->bits[idx / 64];
            *w &= ~(1ull << (idx % 64));
            if (((uintptr_t)w & ~(uintptr_t)(LINE - 1)) != last) {
                if (last)
                    wb((const void *)last, 8);
                last = (uintptr_t)w & ~(uintptr_t)(LINE - 1);
            }
        }
        if (last)
            wb((const void *)last, 8);
        log_tail(m, nrec);
        for (size_t j = 0; j < nrec; j++) /* the words saved are those changed */
            wb((const void *)(uintptr_t)m->log[j].addr, 16);
        barrier();
        *m->commit = *m->commit + 1;
        wb(m->commit, 8);
        barrier();
    }
    part[(n - 1) / CHUNK + 1] = now_ns() - t; /* the commit */
    return nfree;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
    if (argc > 2)
        barrier_ns = strtoull(argv[2], NULL, 10);
    const char *path = argc > 3 ? argv[3] : "/dev/shm/delfloor.pool";
    if (n == 0 || argc > 4) {
        fprintf(stderr, "usage: delfloor [KEYS [BARRIER_NS [FILE]]]\n");
        return 2;
    }
    {
        unsigned a, b, c, d;
        __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
        have_clwb = b >> 24 & 1;
        have_clflushopt = b >> 23 & 1;
    }
    size_t tab_b = sizeof(struct bucket) << BUCKET_BITS, nodes_b = n * sizeof(struct node),
           bits_b = (n + 63) / 64 * 8, log_b = 2 * n * sizeof(struct rec);
    size_t total = tab_b + nodes_b + bits_b + log_b + LINE;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)total)) {
        perror(path);
        return 1;
    }
    char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    unlink(path); /* the mapping keeps it; nothing left behind */
    if (base == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    struct pm m = {(struct bucket *)base, (struct node *)(base + tab_b),
                   (uint64_t *)(base + tab_b + nodes_b), (struct rec *)(base + tab_b + nodes_b + bits_b),
                   (uint64_t *)(base + tab_b + nodes_b + bits_b + log_b)};
    /* the command's keys, as the server has them after parsing */
    char *keys = malloc(n * 16);
    uint32_t *koff = malloc((n + 1) * sizeof *koff);
    uint64_t *freelist = malloc(n * sizeof *freelist);
    size_t sb_b = ((size_t)1 << BUCKET_BITS) / 8, sn_b = n / 8 + 1;
    uint8_t *saved_b = malloc(sb_b), *saved_n = malloc(sn_b);
    size_t nparts = (n - 1) / CHUNK + 2; /* the chunks of keys, the commit */
    uint64_t *part = malloc(nparts * sizeof *part), *best = malloc(nparts * sizeof *best);
    if (!keys || !koff || !freelist || !saved_b || !saved_n || !part || !best) {
        fprintf(stderr, "delfloor: out of memory\n");
        return 1;
    }
    koff[0] = 0;
    for (size_t i = 0; i < n; i++)
        koff[i + 1] = koff[i] + (uint32_t)sprintf(keys + koff[i], "k:%zu", i);
    printf("# delfloor %zu keys, barrier %llu ns, write-back %s: %d rounds\n", n,
           (unsigned long long)barrier_ns, have_clwb ? "clwb" : have_clflushopt ? "clflushopt" : "none",
           ROUNDS);
    printf("%-8s %9s %9s %9s\n", "variant", "ms", "parts_ms", "ns/key");
    for (int v = 0; v < VARIANTS; v++) {
        uint64_t whole = UINT64_MAX, sum = 0;
        for (size_t c = 0; c < nparts; c++)
            best[c] = UINT64_MAX;
        for (int r = 0; r < ROUNDS; r++) {
            fill(&m, n);
            memset(saved_b, 0, sb_b);
            memset(saved_n, 0, sn_b);
            uint64_t t0 = now_ns();
            size_t done = del_all(&m, n, v, keys, koff, freelist, saved_b, saved_n, part);
            uint64_t t = now_ns() - t0;
            if (done != n) {
                fprintf(stderr, "delfloor: deleted %zu of %zu\n", done, n);
                return 1;
            }
            whole = t < whole ? t : whole;
            for (size_t c = 0; c < nparts; c++)
                best[c] = part[c] < best[c] ? part[c] : best[c];
        }
        for (size_t c = 0; c < nparts; c++)
            sum += best[c];
        printf("%-8s %9.2f %9.2f %9.1f\n", vname[v], (double)whole / 1e6, (double)sum / 1e6,
               (double)sum / (double)n);
    }
    munmap(base, total);
    free(keys);
    free(koff);
    free(freelist);
    free(saved_b);
    free(saved_n);
    free(part);
    free(best);
    return 0;
}
