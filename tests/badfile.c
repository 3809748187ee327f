/* badfile.c - damaged pool files: random byte flips in the header, the
 * logs, the chunk table and free heap space, truncation, a zeroed header,
 * a wrong format version, and hand-made damage to what open checks.
 * Opening one must never crash or hang, and its outcome must fit the bytes
 * that were damaged:
 *   - dead bytes (what nobody reads, or reads and never applies: header
 *     and slot padding, records of settled transactions, a log's never
 *     written tail, the chunk table's slack, free chunks) change nothing:
 *     the image opens and holds exactly the last commit;
 *   - bytes that open checks (the checksummed header, a log chain, a
 *     chunk table entry, a record's target, records under the undo log's
 *     tail hint) make it refuse the image with the TXN_E_* that names the
 *     cause: TXN_E_NOTPOOL (magic), TXN_E_VERSION (format), else
 *     TXN_E_CORRUPT;
 *   - other metadata (the slots' state and version words, the boot count,
 *     the engine's words, the chunk table's entries) may go either way,
 *     but an image that opens holds a consistent state, and a refusal
 *     names a cause in the pool format.
 * Each test prints how many images were refused (by code) and opened.
 *
 * The pool holds SLOTS+1 values that every transaction sets to the same
 * new value (and some transactions allocate and free a node, so logs hold
 * ALLOC/FREE records too). Two images are damaged: one taken at a commit
 * boundary, one taken in the middle of a transaction (a crash). Each
 * damaged image is opened in a child process under alarm(). Built for
 * the engines that use pmtx's own pool format (it knows where the header,
 * the logs and the chunk table are). BADFILE_ROUNDS sets the rounds per
 * case. */
#define _GNU_SOURCE
#include <check.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "log.h"
#include "pool.h"
#include "txn.h"
#if __has_include("redo1_log.h") /* built for redo1: its log's format */
#include "redo1_log.h"
#define REDO1_LOG 1
#else
#define REDO1_LOG 0
#endif

#define LAYOUT "pmtx-badfile"
enum { SLOTS = 16, COMMITS = 30 };

static struct test_pool pool;
static size_t img_size, meta_end;
static txn_obj *committed_node; /* root word SLOTS+1 at the last commit */

/* ---- what each byte of an image is */

enum kind {
    DEAD,        /* nobody reads it, or nobody applies what it holds */
    EITHER,      /* metadata open uses without checking it all */
    DATA,        /* live data or a live log: never damaged here */
    BAD_MAGIC,   /* open refuses: TXN_E_NOTPOOL */
    BAD_VERSION, /* open refuses: TXN_E_VERSION */
    BAD_SUM,     /* open refuses: TXN_E_CORRUPT (header checksum) */
    BAD_TAG,     /* open refuses: TXN_E_CORRUPT (a slot's tag) */
};

struct region {
    size_t lo, hi;
    enum kind kind;
    const char *what;
};

/* 6 in the header, 6 per log slot, 2 for the chunk table, one per run of
 * free or used chunks, one past the heap: the test's pool has a few slots
 * and 64 chunks */
enum { MAX_REGIONS = 512 };

struct image {
    const char *what;
    uint8_t *b;
    struct region r[MAX_REGIONS];
    int n;
};

static struct image committed = {.what = "at a commit"}, inflight = {.what = "in flight"};

static void add(struct image *im, size_t lo, size_t hi, enum kind k, const char *what)
{
    if (lo >= hi)
        return;
    struct region *last = im->n ? &im->r[im->n - 1] : NULL;
    if (last && last->hi == lo && last->kind == k && !strcmp(last->what, what)) {
        last->hi = hi; /* one region for a run of free chunks */
        return;
    }
    ck_assert_int_lt(im->n, MAX_REGIONS);
    im->r[im->n++] = (struct region){lo, hi, k, what};
}

/* Where the bytes of [lo, hi) that were ever written end (8-aligned): a
 * record ends with its checksum, which is never zero in practice. */
static size_t written_end(const uint8_t *b, size_t lo, size_t hi)
{
    while (hi > lo && b[hi - 1] == 0)
        hi--;
    return lo + ((hi - lo + 7) & ~(size_t)7);
}

/* The map of an image, from its (undamaged) header, slots and chunk
 * table. In a crash image the slots' written records are the running
 * transaction's log (undo and incll need all of it to roll back), so they
 * stay whole; at a commit they belong to settled transactions or ended
 * epochs, which recovery never applies. */
static void map_image(struct image *im, int crash)
{
    const struct pool_hdr *h = (const struct pool_hdr *)im->b;
    size_t sum_end = offsetof(struct pool_hdr, checksum) + sizeof h->checksum;
    im->n = 0;
    add(im, 0, sizeof h->magic, BAD_MAGIC, "header magic");
    add(im, offsetof(struct pool_hdr, format), offsetof(struct pool_hdr, layout), BAD_VERSION,
        "header format and size");
    add(im, offsetof(struct pool_hdr, layout), sum_end, BAD_SUM, "checksummed header");
    add(im, offsetof(struct pool_hdr, boot), offsetof(struct pool_hdr, eng_words), EITHER,
        "boot count");
    add(im, offsetof(struct pool_hdr, eng_words), offsetof(struct pool_hdr, pad), EITHER,
        "engine words");
    add(im, offsetof(struct pool_hdr, pad), POOL_HDR_SIZE, DEAD, "header padding");
    for (size_t s = 0; s < h->nslots; s++) {
        /* the slot header, then its first log segment's */
        size_t at = h->slots_off + s * h->slot_size, seg = at + sizeof(struct slot_hdr);
        size_t recs = seg + sizeof(struct seg_hdr), end = at + h->slot_size;
        size_t w = written_end(im->b, recs, end);
        add(im, at, at + offsetof(struct slot_hdr, tag), EITHER, "slot header words");
        add(im, at + offsetof(struct slot_hdr, tag), at + offsetof(struct slot_hdr, pad), BAD_TAG,
            "slot tag");
        add(im, at + offsetof(struct slot_hdr, pad), seg, DEAD, "slot header padding");
        add(im, seg, seg + offsetof(struct seg_hdr, pad), EITHER, "slot's log chain");
        add(im, seg + offsetof(struct seg_hdr, pad), recs, DEAD, "segment header padding");
        /* redo1 replays a slot's latest logs at every open: live at a
         * commit too (damage there reads as a torn log) */
        add(im, recs, w, crash || REDO1_LOG ? DATA : DEAD,
            crash ? "running transaction's log" : REDO1_LOG ? "latest logs" : "settled records");
        add(im, w, end, DEAD, "never written log tail");
    }
    size_t ctab_end = h->ctab_off + h->nchunks * sizeof(uint64_t);
    add(im, h->ctab_off, ctab_end, EITHER, "chunk table");
    add(im, ctab_end, h->heap_off, DEAD, "chunk table slack");
    const uint64_t *ctab = (const uint64_t *)(im->b + h->ctab_off);
    for (size_t c = 0; c < h->nchunks; c++) {
        size_t lo = h->heap_off + c * (size_t)CHUNK_SIZE;
        /* a zero entry is a FREE chunk (alloc_format) */
        add(im, lo, lo + CHUNK_SIZE, ctab[c] ? DATA : DEAD, ctab[c] ? "used chunk" : "free chunk");
    }
    add(im, h->heap_off + h->nchunks * (size_t)CHUNK_SIZE, h->size, DEAD, "past the heap");
}

static const struct region *region_of(const struct image *im, size_t at)
{
    for (int i = 0; i < im->n; i++)
        if (at >= im->r[i].lo && at < im->r[i].hi)
            return &im->r[i];
    return NULL;
}

/* ---- making the images */

/* One transaction: every value becomes v; on odd v a node is allocated and
 * the previous one freed (root word SLOTS+1 holds it). */
static void step(txn *tx, txn_pool *p, uint64_t v)
{
    txn_obj *root = txn_root(p);
    for (int i = 0; i <= SLOTS; i++)
        ck_assert_int_eq(txn_write_u64(tx, root, 8 * (size_t)i, v), 0);
    if (v % 2) {
        txn_obj *old, *node;
        ck_assert_int_eq(txn_read(tx, root, 8 * (SLOTS + 1), &old, sizeof old), 0);
        ck_assert_int_eq(txn_alloc(tx, 100 + 50 * (v % 7), &node), 0);
        ck_assert_int_eq(txn_write(tx, root, 8 * (SLOTS + 1), &node, sizeof node), 0);
        if (old)
            ck_assert_int_eq(txn_free(tx, old), 0);
    }
}

static void make_images(void)
{
    ck_assert_int_eq(test_pool_new(&pool, "badfile"), 0);
    /* a pool that does not grow: one that may grow to TXN_POOL_MAX has a
     * chunk table of 16 MiB (a hole), which every image would copy */
    txn_pool_opts o = {.size = 4u << 20, .root_size = 8 * (SLOTS + 2), .threads = 2,
                       .max_size = 4u << 20};
    txn_pool *p;
    txn *tx;
    ck_assert_int_eq(txn_pool_create(pool.name, LAYOUT, &o, &p), 0);
    for (uint64_t v = 1; v <= COMMITS; v++) {
        ck_assert_int_eq(txn_begin(p, &tx), 0);
        step(tx, p, v);
        ck_assert_int_eq(txn_commit(tx), 0);
    }
    /* engines durable at their epoch's end (incll) need it; a no-op else */
    ck_assert_int_eq(txn_sync(p), 0);
    meta_end = POOL_FMT(p)->hdr->heap_off;
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    ck_assert_int_eq(txn_read(tx, txn_root(p), 8 * (SLOTS + 1), &committed_node,
                              sizeof committed_node), 0);
    txn_abort(tx);
    committed.b = test_slurp(pool.path, &img_size);
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    step(tx, p, COMMITS + 1); /* in flight: the file is what a crash leaves */
    inflight.b = test_slurp(pool.path, &img_size);
    txn_abort(tx);
    txn_pool_close(p);
    map_image(&committed, 0);
    map_image(&inflight, 1);
}

/* ---- opening a damaged image */

/* How the child that opened an image ended (its exit status). */
enum outcome {
    INTACT = 0,     /* opened, exactly the last commit */
    OLDER = 1,      /* opened, a consistent state of another commit */
    BROKEN = 2,     /* opened, the values disagree or cannot be read */
    ODD_CODE = 3,   /* refused with something that is no TXN_E_* code */
    REFUSED = 10,   /* + (TXN_E_FIRST - rc): refused with rc */
    SIGNALLED = 128 /* + the signal: a crash, or a hang (SIGALRM) */
};

static int refused_with(int rc)
{
    return REFUSED + (TXN_E_FIRST - rc);
}

/* Child: open the image and say what it holds. */
static int open_and_check(void)
{
    txn_pool *p;
    alarm(20);
    int rc = txn_pool_open(pool.name, LAYOUT, &p);
    if (rc)
        return rc <= TXN_E_FIRST && rc >= TXN_E_LAST ? refused_with(rc) : ODD_CODE;
    txn *tx;
    txn_obj *node = NULL;
    uint64_t v[SLOTS + 1];
    int bad = txn_begin(p, &tx) != 0;
    for (int i = 0; !bad && i <= SLOTS; i++)
        bad = txn_read_u64(tx, txn_root(p), 8 * (size_t)i, &v[i]) != 0 || v[i] != v[0];
    if (!bad)
        bad = txn_read(tx, txn_root(p), 8 * (SLOTS + 1), &node, sizeof node) != 0 || !node;
    if (!bad)
        txn_abort(tx);
    bad |= v[0] > COMMITS + 1;
    txn_pool_close(p);
    return bad ? BROKEN : v[0] == COMMITS && node == committed_node ? INTACT : OLDER;
}

/* Write the damaged image, open it in a child, return how the child ended
 * (enum outcome). A refused open must have left the file as it was, byte
 * for byte; so must an inspection, whatever the verdict. */
static int try_image(const uint8_t *img, size_t n)
{
    test_spew(pool.path, img, n);
    pid_t pid = fork();
    if (pid == 0)
        _exit(open_and_check());
    int st;
    ck_assert(waitpid(pid, &st, 0) == pid);
    int o = WIFEXITED(st) ? WEXITSTATUS(st) : SIGNALLED + WTERMSIG(st);
    if (o >= REFUSED && o < SIGNALLED) {
        txn_pool_info info;
        txn_pool_inspect(pool.path, &info);
        size_t len;
        uint8_t *now = test_slurp(pool.path, &len);
        ck_assert_msg(len == n && !memcmp(now, img, n),
                      "a refused open (%s) or its inspection wrote to the file",
                      txn_strerror(TXN_E_FIRST - (o - REFUSED)));
        free(now);
    }
    return o;
}

static const char *outcome_text(int o, char *buf, size_t n)
{
    if (o >= SIGNALLED)
        snprintf(buf, n, "killed by signal %d (%s)", o - SIGNALLED, strsignal(o - SIGNALLED));
    else if (o >= REFUSED)
        snprintf(buf, n, "refused: %s", txn_strerror(TXN_E_FIRST - (o - REFUSED)));
    else
        snprintf(buf, n, "%s", o == INTACT ? "opened, intact" : o == OLDER ? "opened, another commit"
                                 : o == BROKEN ? "opened, broken state" : "refused, no TXN_E_* code");
    return buf;
}

/* A refusal that names a cause in the pool format. */
static int format_refusal(int o)
{
    static const int codes[] = {TXN_E_NOTPOOL, TXN_E_VERSION, TXN_E_CORRUPT, TXN_E_TRUNC,
                                TXN_E_ENGINE};
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
        if (o == refused_with(codes[i]))
            return 1;
    return 0;
}

/* The images a test tried, by outcome; printed at its end. */
struct tally {
    unsigned images, refused, opened, intact, by_code[TXN_E_FIRST - TXN_E_LAST + 1];
};

static void count(struct tally *t, int o)
{
    t->images++;
    if (o >= REFUSED && o < SIGNALLED) {
        t->refused++;
        t->by_code[o - REFUSED]++;
    } else if (o == INTACT || o == OLDER) {
        t->opened++;
        t->intact += o == INTACT;
    }
}

static void report(const char *test, const struct tally *t)
{
    char codes[256] = "";
    size_t len = 0;
    for (int i = 0; i <= TXN_E_FIRST - TXN_E_LAST; i++)
        if (t->by_code[i] && len < sizeof codes)
            len += (size_t)snprintf(codes + len, sizeof codes - len, "%s%u %s", len ? ", " : "",
                                    t->by_code[i], txn_strerror(TXN_E_FIRST - i));
    printf("badfile %s %s: %u images: %u refused%s%s%s, %u opened (%u intact, %u at another "
           "commit)\n",
           txn_engine_name(), test, t->images, t->refused, *codes ? " (" : "", codes,
           *codes ? ")" : "", t->opened, t->intact, t->opened - t->intact);
    fflush(stdout);
}

/* What the damage to img (against its source im) must lead to: one
 * outcome, or -1 for "opened consistent, or a format refusal". *where
 * and *off: the damaged byte that decides it. */
static int expected(const struct image *im, const uint8_t *img, const char **where,
                    size_t *off)
{
    /* check_hdr's order: magic, format, checksum; then the rest */
    static const int rank[] = {[DEAD] = 0,    [EITHER] = 1,      [BAD_TAG] = 2,
                               [BAD_SUM] = 3, [BAD_VERSION] = 4, [BAD_MAGIC] = 5};
    const struct region *worst = NULL;
    for (size_t at = 0; at < img_size; at++) {
        if (img[at] == im->b[at])
            continue;
        const struct region *r = region_of(im, at);
        ck_assert_msg(r && r->kind != DATA, "damage at %#zx outside the regions to damage", at);
        if (!worst || rank[r->kind] > rank[worst->kind]) {
            worst = r;
            *off = at;
        }
    }
    *where = worst ? worst->what : "nothing";
    switch (worst ? worst->kind : DEAD) {
    case BAD_MAGIC:
        return refused_with(TXN_E_NOTPOOL);
    case BAD_VERSION:
        return refused_with(TXN_E_VERSION);
    case BAD_SUM:
    case BAD_TAG:
        return refused_with(TXN_E_CORRUPT);
    case EITHER:
        return -1;
    default:
        return INTACT;
    }
}

/* Open img and hold the outcome to what its damage allows. */
static void judge(const struct image *im, const uint8_t *img, struct tally *t, const char *test,
                  int round)
{
    const char *where;
    size_t off = 0;
    int want = expected(im, img, &where, &off);
    int got = try_image(img, img_size);
    char g[96], w[96];
    count(t, got);
    ck_assert_msg(want < 0 ? got == INTACT || got == OLDER || format_refusal(got) : got == want,
                  "%s, image %s, round %d, damage in %s (%#zx): %s, expected %s", test, im->what,
                  round, where, off, outcome_text(got, g, sizeof g),
                  want < 0 ? "a consistent state or a format refusal"
                           : outcome_text(want, w, sizeof w));
}

static int rounds(void)
{
    return (int)env_u64("BADFILE_ROUNDS", 150);
}

/* A byte of `im` in [lo, hi) to damage. With kinds 0, any byte, drawn
 * uniformly as random damage falls; else one whose kind is in `kinds` (a
 * bit mask), its region drawn first so that small regions are hit as
 * often as the free chunks. */
static size_t pick(const struct image *im, size_t lo, size_t hi, unsigned kinds, uint64_t *seed)
{
    if (!kinds)
        return lo + test_rand(seed) % (hi - lo);
    int idx[MAX_REGIONS], n = 0;
    for (int i = 0; i < im->n; i++)
        if ((kinds >> im->r[i].kind & 1) && im->r[i].hi > lo && im->r[i].lo < hi)
            idx[n++] = i;
    ck_assert_int_gt(n, 0);
    const struct region *r = &im->r[idx[test_rand(seed) % (uint64_t)n]];
    size_t a = r->lo > lo ? r->lo : lo, b = r->hi < hi ? r->hi : hi;
    return a + test_rand(seed) % (b - a);
}

#define CHECKED (1u << BAD_MAGIC | 1u << BAD_VERSION | 1u << BAD_SUM)

/* rounds() images of 1 to 3 flipped bytes in [lo, hi), drawn by pick(). */
static void flips(const struct image *im, size_t lo, size_t hi, unsigned kinds, uint64_t seed,
                  struct tally *t, const char *test)
{
    uint8_t *img = malloc(img_size);
    ck_assert_ptr_nonnull(img);
    for (int r = 0; r < rounds(); r++) {
        memcpy(img, im->b, img_size);
        int k = 1 + (int)(test_rand(&seed) % 3);
        for (int i = 0; i < k; i++) {
            size_t at = pick(im, lo, hi, kinds, &seed);
            img[at] ^= (uint8_t)(1 + test_rand(&seed) % 255);
        }
        judge(im, img, t, test, r);
    }
    free(img);
}

/* ---- the tests */

START_TEST(test_header_flips)
{
    struct tally t = {0};
    make_images();
    flips(&committed, 0, POOL_HDR_SIZE, 0, 11, &t, "header flips");
    flips(&inflight, 0, POOL_HDR_SIZE, 0, 12, &t, "header flips");
    report("header flips", &t);
}
END_TEST

/* At a commit boundary the logs hold settled records: damage to them and
 * to the paddings changes nothing; damage to the slot headers' words, the
 * log chains or the chunk table is refused or leaves a consistent state.
 * (redo1's latest logs are live: they are left alone, its other bytes are
 * drawn by region.) */
START_TEST(test_metadata_flips)
{
    struct tally t = {0};
    make_images();
    flips(&committed, POOL_HDR_SIZE, meta_end, REDO1_LOG ? ~(1u << DATA) : 0, 21, &t,
          "metadata flips");
    report("metadata flips", &t);
}
END_TEST

/* Damage to dead bytes only, anywhere in the file: both images open and
 * hold the last commit. */
START_TEST(test_dead_bytes)
{
    struct tally t = {0};
    make_images();
    flips(&committed, 0, img_size, 1u << DEAD, 41, &t, "dead bytes");
    flips(&inflight, 0, img_size, 1u << DEAD, 42, &t, "dead bytes");
    report("dead bytes", &t);
    ck_assert_uint_eq(t.intact, t.images);
}
END_TEST

/* log.c's record checksum: the header's, seeded with the sentinel, then
 * the payload's; stored in the record's last 8 bytes. */
static __attribute__((unused)) void reseal(struct log_rec *r)
{
    uint64_t sum = csum64(csum64(LOG_SENTINEL, r, sizeof *r), r + 1, r->len);
    size_t size = sizeof *r + (((size_t)r->len + 7) & ~(size_t)7) + sizeof sum;
    memcpy((char *)r + size - sizeof sum, &sum, sizeof sum);
}

/* One hand-made damage that open must refuse with want, and that
 * txn_pool_inspect() then describes with `problem` (pool.c's words). */
static void refused(const uint8_t *img, int want, const char *what, const char *problem,
                    struct tally *t)
{
    char g[96];
    int got = try_image(img, img_size);
    count(t, got);
    ck_assert_msg(got == refused_with(want), "%s: %s, expected %s", what,
                  outcome_text(got, g, sizeof g), txn_strerror(want));
    txn_pool_info info;
    ck_assert_int_eq(txn_pool_inspect(pool.path, &info), want);
    ck_assert_msg(strstr(info.problem, problem), "%s: the problem is '%s', not '%s'", what,
                  info.problem, problem);
    /* what a program prints for the refused open: the code and the words */
    txn_pool *p;
    int rc = txn_pool_open(pool.name, LAYOUT, &p);
    ck_assert_int_eq(rc, want);
    const char *msg = txn_pool_strerror(rc);
    ck_assert_msg(strstr(msg, txn_strerror(want)) == msg && strstr(msg, problem),
                  "%s: the open's message is '%s'", what, msg);
    printf("badfile %s: %s: %s\n", txn_engine_name(), what, msg);
}

/* Damage to what open checks: the checksummed header (random flips; the
 * code says which check failed), and by hand a chunk table entry that is
 * no chunk, a log chain into the middle of a chunk, a record of the
 * running transaction whose target is outside the pool (its checksum
 * right), and, where the log keeps a tail hint (undo), a record before
 * it. */
START_TEST(test_checked_bytes)
{
    struct tally t = {0};
    make_images();
    flips(&committed, 0, POOL_HDR_SIZE, CHECKED, 51, &t, "checked bytes");
    flips(&inflight, 0, POOL_HDR_SIZE, CHECKED, 52, &t, "checked bytes");

    uint8_t *img = malloc(img_size);
    ck_assert_ptr_nonnull(img);
    const struct pool_hdr *h = (const struct pool_hdr *)inflight.b;
    size_t slot = h->slots_off, seg = slot + sizeof(struct slot_hdr);
    size_t recs = seg + sizeof(struct seg_hdr);
    for (int crash = 0; crash < 2; crash++) {
        const uint8_t *src = crash ? inflight.b : committed.b;
        memcpy(img, src, img_size);
        memset(img + h->ctab_off + 8, 0x77, 8); /* entry 1 */
        refused(img, TXN_E_CORRUPT, "a chunk table entry that is no chunk", "chunk table entry 1",
                &t);
        memcpy(img, src, img_size);
        uint64_t mid = h->base + h->heap_off + 8;
        memcpy(img + seg + offsetof(struct seg_hdr, next), &mid, sizeof mid);
        refused(img, TXN_E_CORRUPT, "a log chain into the middle of a chunk", "log slot 0", &t);
        /* the file's second 4 KiB page: slot 0's header and its first
         * records */
        memcpy(img, src, img_size);
        memset(img + slot, 0, 4096);
        refused(img, TXN_E_CORRUPT, "a zeroed second page", "log slot 0: header damaged", &t);
    }

#if REDO1_LOG
    /* the last commit's part, an entry aimed below the pool, resealed */
    const struct r1_part *ph = (const struct r1_part *)(committed.b + recs);
    size_t last = 0;
    for (size_t at = recs; at + sizeof *ph < slot + h->slot_size; at += 64) {
        ph = (const struct r1_part *)(committed.b + at);
        if (ph->magic == R1_PART_MAGIC && ph->len >= 16 && r1_part_csum(ph, ph + 1) == ph->csum &&
            (!last || ph->version > ((const struct r1_part *)(committed.b + last))->version))
            last = at;
    }
    ck_assert_msg(last, "no part in slot 0's log");
    memcpy(img, committed.b, img_size);
    struct r1_part *bp = (struct r1_part *)(img + last);
    uint64_t below = 4096;
    memcpy(bp + 1, &below, sizeof below); /* its first entry is a word's */
    bp->csum = r1_part_csum(bp, bp + 1);
    refused(img, TXN_E_CORRUPT, "a committed log whose entry is outside the pool", "log slot 0",
            &t);
    (void)recs;
#else
    /* a transaction the state word says committed, its first record
     * damaged: what replays it is gone */
    memcpy(img, committed.b, img_size);
    struct log_rec cr;
    memcpy(&cr, img + recs, sizeof cr);
    uint64_t st = slot_state(cr.version, SLOT_COMMITTED);
    memcpy(img + slot + offsetof(struct slot_hdr, state), &st, sizeof st);
    img[recs + offsetof(struct log_rec, addr)] ^= 0x40;
    refused(img, TXN_E_CORRUPT, "a committed transaction's damaged log", "is committed", &t);

    /* the running transaction's first record (the slot the main thread
     * took first), aimed below the pool */
    struct slot_hdr sh;
    struct log_rec r;
    memcpy(&sh, inflight.b + slot, sizeof sh);
    memcpy(&r, inflight.b + recs, sizeof r);
    ck_assert_msg(r.sentinel == LOG_SENTINEL, "no record at the start of slot 0's log");
    memcpy(img, inflight.b, img_size);
    struct log_rec *fr = (struct log_rec *)(img + recs);
    fr->addr = 4096;
    reseal(fr);
    refused(img, TXN_E_CORRUPT, "a record whose target is outside the pool", "log slot 0", &t);

    /* the second record: the first one gives the log its version */
    size_t second = sizeof r + (((size_t)r.len + 7) & ~(size_t)7) + sizeof(uint64_t);
    if (sh.tail_version == r.version && sh.tail > second) {
        memcpy(img, inflight.b, img_size);
        img[recs + second + offsetof(struct log_rec, addr)] ^= 0x40;
        refused(img, TXN_E_CORRUPT, "a damaged record before the log's tail hint", "log slot 0",
                &t);
        /* the first record: the tail hint still names the transaction */
        memcpy(img, inflight.b, img_size);
        img[recs + offsetof(struct log_rec, addr)] ^= 0x40;
        refused(img, TXN_E_CORRUPT, "the running transaction's damaged first record",
                "log slot 0: transaction", &t);
    } else {
        printf("badfile %s: no tail hint in the log\n", txn_engine_name());
    }
#endif
    free(img);
    report("checked bytes", &t);
}
END_TEST

START_TEST(test_truncated)
{
    make_images();
    uint64_t seed = 31;
    for (int r = 0; r < rounds() / 4; r++) {
        const uint8_t *src = r % 2 ? inflight.b : committed.b;
        size_t n = test_rand(&seed) % img_size;
        test_spew(pool.path, src, n);
        txn_pool *p;
        int rc = txn_pool_open(pool.name, LAYOUT, &p);
        ck_assert_msg(rc == TXN_E_TRUNC || rc == TXN_E_NOTPOOL,
                      "truncated to %zu bytes: %s", n, txn_strerror(rc));
    }
}
END_TEST

START_TEST(test_zeroed_header_and_version)
{
    make_images();
    uint8_t *img = malloc(img_size);
    txn_pool *p;
    ck_assert(img != NULL);
    memcpy(img, inflight.b, img_size);
    memset(img, 0, POOL_HDR_SIZE);
    test_spew(pool.path, img, img_size);
    ck_assert_int_eq(txn_pool_open(pool.name, LAYOUT, &p), TXN_E_NOTPOOL);
    memcpy(img, inflight.b, img_size);
    ((struct pool_hdr *)img)->format = 99;
    test_spew(pool.path, img, img_size);
    ck_assert_int_eq(txn_pool_open(pool.name, LAYOUT, &p), TXN_E_VERSION);
    /* the undamaged crash image recovers to the last commit */
    ck_assert_int_eq(try_image(inflight.b, img_size), INTACT);
    ck_assert_int_eq(txn_pool_open(pool.name, LAYOUT, &p), 0);
    txn *tx;
    uint64_t v;
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    ck_assert_int_eq(txn_read_u64(tx, txn_root(p), 0, &v), 0);
    txn_abort(tx);
    txn_pool_close(p);
    ck_assert_uint_eq(v, COMMITS);
    free(img);
}
END_TEST

static void cleanup(void)
{
    test_pool_remove(pool.name);
}

#if REDO1_LOG
/* A part of a fill (a 512-byte object of one byte, as joinsim writes)
 * torn back to zeros, 8 or 16 bytes anywhere: its checksum no longer
 * holds (Q2). One that mixed two words as w ^ rot32(x) passed when both
 * words of a pair were torn. */
START_TEST(test_torn_fill_csum)
{
    unsigned char e[584];
    for (int fill = 1; fill < 256; fill += 0x33) {
        memset(e, fill, sizeof e);
        struct r1_part h = {R1_PART_MAGIC, 8, 6, 0, 1, sizeof e, 0};
        uint64_t sum = r1_part_csum(&h, e);
        for (size_t n = 8; n <= 16; n += 8)
            for (size_t at = 0; at + n <= sizeof e; at += 8) {
                memset(e + at, 0, n);
                ck_assert_msg(r1_part_csum(&h, e) != sum, "fill %#x: %zu bytes at %zu torn pass",
                              fill, n, at);
                memset(e + at, fill, n);
            }
    }
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("badfile");
    TCase *tc = test_tcase(s, "damage", 300);
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_add_test(tc, test_header_flips);
    tcase_add_test(tc, test_metadata_flips);
    tcase_add_test(tc, test_dead_bytes);
    tcase_add_test(tc, test_checked_bytes);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_zeroed_header_and_version);
#if REDO1_LOG
    tcase_add_test(tc, test_torn_fill_csum);
#endif
    printf("engine %s\n", txn_engine_name());
    return test_run(s, CK_FORK_GETENV, "badfile");
}
