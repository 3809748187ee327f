/* badfile.c - damaged pool files: random byte flips in the header and the
 * logs, truncation, a zeroed header, a wrong format version. Opening one
 * must return an error or recover a consistent state; it must never crash,
 * hang, or hand back a state that breaks the pool's invariant.
 *
 * The pool holds a counter and SLOTS values that every transaction sets to
 * the same new value (and some transactions allocate and free a node, so
 * logs hold ALLOC/FREE records too). Two images are damaged: one taken at
 * a commit boundary, one taken in the middle of a transaction (a crash).
 * Each damaged image is opened in a child process under alarm(). Built for
 * the engines that use pmtx's own pool format (it knows where the header
 * and the logs are). BADFILE_ROUNDS sets the rounds per case. */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool.h"
#include "txn.h"

#define LAYOUT "pmtx-badfile"
enum { SLOTS = 16, COMMITS = 30 };

static char name[64], path[128];
static uint8_t *committed_img, *inflight_img;
static size_t img_size, meta_end;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint8_t *read_file(size_t *n)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    ck_assert(fd >= 0 && fstat(fd, &st) == 0);
    uint8_t *b = malloc((size_t)st.st_size);
    ck_assert(b && read(fd, b, (size_t)st.st_size) == st.st_size);
    close(fd);
    *n = (size_t)st.st_size;
    return b;
}

static void write_file(const uint8_t *b, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert(fd >= 0 && write(fd, b, n) == (ssize_t)n);
    close(fd);
}

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
    snprintf(name, sizeof name, "pmtx-badfile-%d.pool", (int)getpid());
    const char *dir = getenv("TXN_POOL_DIR");
    snprintf(path, sizeof path, "%s/%s", dir && *dir ? dir : "/dev/shm", name);
    txn_pool_opts o = {.size = 4u << 20, .root_size = 8 * (SLOTS + 2), .threads = 2};
    txn_pool *p;
    txn *tx;
    unlink(path);
    ck_assert_int_eq(txn_pool_create(name, LAYOUT, &o, &p), 0);
    for (uint64_t v = 1; v <= COMMITS; v++) {
        ck_assert_int_eq(txn_begin(p, &tx), 0);
        step(tx, p, v);
        ck_assert_int_eq(txn_commit(tx), 0);
    }
    /* engines durable at their epoch's end (incll) need it; a no-op else */
    ck_assert_int_eq(txn_sync(p), 0);
    meta_end = p->hdr->heap_off;
    committed_img = read_file(&img_size);
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    step(tx, p, COMMITS + 1); /* in flight: the file is what a crash leaves */
    inflight_img = read_file(&img_size);
    txn_abort(tx);
    txn_pool_close(p);
}

/* Child: 0 = an error, or a state with the invariant; 1 = broken state. */
static int open_and_check(void)
{
    txn_pool *p;
    alarm(20);
    if (txn_pool_open(name, LAYOUT, &p))
        return 0;
    txn *tx;
    uint64_t v[SLOTS + 1];
    int bad = txn_begin(p, &tx) != 0;
    for (int i = 0; !bad && i <= SLOTS; i++)
        bad = txn_read_u64(tx, txn_root(p), 8 * (size_t)i, &v[i]) != 0 || v[i] != v[0];
    if (!bad)
        txn_abort(tx);
    bad |= v[0] > COMMITS + 1;
    txn_pool_close(p);
    return bad;
}

/* Write the damaged image, open it in a child, return how the child ended:
 * 0 fine, 1 broken state, >= 128 killed by a signal (a crash or a hang). */
static int try_image(const uint8_t *img, size_t n)
{
    write_file(img, n);
    pid_t pid = fork();
    if (pid == 0)
        _exit(open_and_check());
    int st;
    ck_assert(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int rounds(void)
{
    const char *s = getenv("BADFILE_ROUNDS");
    return s && atoi(s) > 0 ? atoi(s) : 150;
}

static void flips(const uint8_t *src, size_t lo, size_t hi, uint64_t seed)
{
    uint8_t *img = malloc(img_size);
    ck_assert(img != NULL);
    for (int r = 0; r < rounds(); r++) {
        memcpy(img, src, img_size);
        int k = 1 + (int)(rnd(&seed) % 3);
        size_t at = 0;
        for (int i = 0; i < k; i++) {
            at = lo + rnd(&seed) % (hi - lo);
            img[at] ^= (uint8_t)(1 + rnd(&seed) % 255);
        }
        int rc = try_image(img, img_size);
        ck_assert_msg(rc == 0, "round %d: %d flips, last at offset %#zx: child ended %d", r,
                      k, at, rc);
    }
    free(img);
}

START_TEST(test_header_flips)
{
    make_images();
    flips(committed_img, 0, POOL_HDR_SIZE, 11);
    flips(inflight_img, 0, POOL_HDR_SIZE, 12);
}
END_TEST

/* At a commit boundary the logs hold committed (dead) records: damage to
 * them, to the slot headers or to the chunk table must not change data. */
START_TEST(test_metadata_flips)
{
    make_images();
    flips(committed_img, POOL_HDR_SIZE, meta_end, 21);
}
END_TEST

START_TEST(test_truncated)
{
    make_images();
    uint64_t seed = 31;
    for (int r = 0; r < rounds() / 4; r++) {
        const uint8_t *src = r % 2 ? inflight_img : committed_img;
        size_t n = rnd(&seed) % img_size;
        write_file(src, n);
        txn_pool *p;
        int rc = txn_pool_open(name, LAYOUT, &p);
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
    memcpy(img, inflight_img, img_size);
    memset(img, 0, POOL_HDR_SIZE);
    write_file(img, img_size);
    ck_assert_int_eq(txn_pool_open(name, LAYOUT, &p), TXN_E_NOTPOOL);
    memcpy(img, inflight_img, img_size);
    ((struct pool_hdr *)img)->format = 99;
    write_file(img, img_size);
    ck_assert_int_eq(txn_pool_open(name, LAYOUT, &p), TXN_E_VERSION);
    /* the undamaged crash image recovers to the last commit */
    ck_assert_int_eq(try_image(inflight_img, img_size), 0);
    ck_assert_int_eq(txn_pool_open(name, LAYOUT, &p), 0);
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
    unlink(path);
}

int main(void)
{
    Suite *s = suite_create("badfile");
    TCase *tc = tcase_create("damage");
    tcase_add_checked_fixture(tc, NULL, cleanup);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_header_flips);
    tcase_add_test(tc, test_metadata_flips);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_zeroed_header_and_version);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    printf("engine %s\n", txn_engine_name());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
