/* pool_tool.c - txn_pool_inspect() and the pool tool (txn-pool, whose path
 * is argv[1]) on pools of this engine: intact, interrupted by a crash,
 * damaged, truncated, foreign. Every verdict leaves the file byte for byte
 * as it was, and it is the truth: a pool said consistent is one that the
 * next open's recovery leaves as it is (pmtx's format: its chunk table
 * and heap compared before and after a real open). */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "pool.h" /* pmtx's format: where its chunk table lies */
#include "txn.h"
#include "txn_layout.h"

static const char *tool;
static char name[TEST_NAME_LEN], path[TEST_PATH_LEN];

struct item {
    uint64_t key, value;
};
static const txn_type types[] = {
    TXN_TYPE(struct item, TXN_FIELD(struct item, key), TXN_FIELD(struct item, value))};
static const txn_layout layout = {"pooltool", 2, types, 1, NULL, 0, 0};

/* A closed pool of this engine: 200 objects of three sizes, the layout
 * record holding version 2 and one type signature. */
static void setup(void)
{
    ck_assert_int_eq(test_pool_name("pt", name, sizeof name), 0);
    ck_assert_int_eq(test_pool_path(name, path, sizeof path), 0);
    txn_pool *p;
    txn_pool_opts o = {.size = 16u << 20, .root_size = 128};
    ck_assert_int_eq(txn_layout_open(name, &layout, &o, TXN_LAYOUT_CREATE, &p), 0);
    txn *tx;
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    for (int i = 0; i < 200; i++) {
        txn_obj *ob;
        ck_assert_int_eq(txn_alloc(tx, i % 3 == 0 ? 24 : i % 3 == 1 ? 300 : 5000, &ob), 0);
        if (i < 16)
            ck_assert_int_eq(txn_write_u64(tx, txn_root(p), 8 * (size_t)i, (uint64_t)ob), 0);
    }
    ck_assert_int_eq(txn_commit(tx), 0);
    txn_pool_close(p);
}

static void teardown(void)
{
    unlink(path);
}

/* The pool tool's exit status on `file` (check, or info with --json). */
static int run_tool(const char *verb, const char *file)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s' >/dev/null", tool, verb, file);
    int st = system(cmd);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Inspect `file` and run the tool's check and info on it: the verdict,
 * with the file unchanged by any of them. */
static int verdict_of(const char *file, txn_pool_info *info)
{
    size_t n0, n1;
    void *before = test_slurp(file, &n0);
    int v = txn_pool_inspect(file, info);
    int want = v == 0 ? 0 : v == TXN_INSPECT_RECOVER ? 1 : 2;
    ck_assert_int_eq(run_tool("check", file), want);
    ck_assert_int_eq(run_tool("info", file), v < 0 ? 2 : 0);
    ck_assert_int_eq(run_tool("info --json", file), v < 0 ? 2 : 0);
    void *after = test_slurp(file, &n1);
    ck_assert_msg(n0 == n1 && !memcmp(before, after, n0), "%s changed by its inspection", file);
    free(before);
    free(after);
    return v;
}

START_TEST(test_intact)
{
    txn_pool_info i;
    ck_assert_int_eq(verdict_of(path, &i), 0);
    ck_assert_str_eq(i.engine, txn_engine_name());
    ck_assert_str_eq(i.layout, "pooltool");
    ck_assert_uint_ge(i.objects, 202); /* and the root, the meta object */
    uint64_t sum = 0;
    for (unsigned c = 0; c < i.nclasses; c++) {
        sum += i.classes[c].count;
        if (c)
            ck_assert_uint_lt(i.classes[c - 1].size, i.classes[c].size);
    }
    ck_assert_uint_eq(sum, i.objects);
    ck_assert_uint_ge(i.heap_used, 67 * (24 + 300 + 5000));
    ck_assert_uint_le(i.heap_used + i.heap_free + i.heap_logs, i.heap_size);
    ck_assert_uint_ge(i.size, 16u << 20);
    ck_assert_str_eq(i.problem, "");
    /* the layout record, on a view */
    txn_pool *p;
    txn_layout_info l;
    ck_assert_int_eq(txn_pool_view(name, "pooltool", &p), 0);
    ck_assert_int_eq(txn_layout_inspect(p, &l), 0);
    txn_pool_close(p);
    ck_assert_uint_eq(l.version, 2);
    ck_assert_uint_eq(l.types, 1);
    ck_assert_uint_eq(l.target, 0);
}
END_TEST

/* The chunk table and heap of a pmtx pool file, or NULL for another
 * format: what recovery changes. */
static void *pmtx_heap(const char *file, size_t *n)
{
    void *b = test_slurp(file, n);
    const struct pool_hdr *h = b;
    if (*n < sizeof *h || h->magic != POOL_MAGIC) {
        free(b);
        return NULL;
    }
    size_t off = h->ctab_off;
    memmove(b, (char *)b + off, *n - off);
    *n -= off;
    return b;
}

/* A process that dies in the middle of a transaction, with its writes
 * made: the verdict says whether the next open changes the pool, and it
 * is right. */
START_TEST(test_interrupted)
{
    pid_t pid = fork();
    if (pid == 0) {
        txn_pool *p;
        txn *tx;
        if (txn_pool_open(name, "pooltool", &p) || txn_begin(p, &tx))
            _exit(1);
        for (size_t i = 0; i < 16; i++) {
            uint64_t h;
            if (txn_read_u64(tx, txn_root(p), 8 * i, &h) ||
                txn_write_u64(tx, (txn_obj *)h, 0, 0x5a5a5a5a5a5a5a5aull))
                _exit(1);
        }
        _exit(0); /* no commit, no close: a crash */
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    txn_pool_info i;
    int v = verdict_of(path, &i);
    ck_assert_msg(v == 0 || v == TXN_INSPECT_RECOVER, "verdict %d (%s)", v, i.problem);
    printf("%s: interrupted transaction: %s\n", txn_engine_name(),
           v ? i.problem : "consistent (recovery changes nothing)");
    size_t n0, n1;
    void *heap0 = pmtx_heap(path, &n0);
    txn_pool *p;
    ck_assert_int_eq(txn_pool_open(name, "pooltool", &p), 0);
    txn_pool_close(p);
    void *heap1 = pmtx_heap(path, &n1);
    if (heap0) /* the open changed the pool exactly when the verdict said */
        ck_assert_int_eq(n0 == n1 && !memcmp(heap0, heap1, n0) ? 0 : TXN_INSPECT_RECOVER, v);
    free(heap0);
    free(heap1);
    ck_assert_int_eq(verdict_of(path, &i), 0); /* recovered */
}
END_TEST

/* A copy of the pool with `edit` applied, inspected. */
static int damaged(void (*edit)(char *b, size_t *n), txn_pool_info *i)
{
    char copy[4200];
    snprintf(copy, sizeof copy, "%s.copy", path);
    size_t n;
    char *b = test_slurp(path, &n);
    edit(b, &n);
    test_spew(copy, b, n);
    free(b);
    int v = verdict_of(copy, i);
    unlink(copy);
    return v;
}

static void flip_header(char *b, size_t *n)
{
    (void)n;
    b[100] ^= 0x5a; /* checksummed in both formats */
}

static void truncate_1m(char *b, size_t *n)
{
    (void)b;
    *n = 1u << 20;
}

static void foreign(char *b, size_t *n)
{
    for (size_t k = 0; k < 65536; k++)
        b[k] = (char)(k * 131 + 7);
    *n = 65536;
}

static void empty(char *b, size_t *n)
{
    (void)b;
    *n = 0;
}

static void flip_chunk_entry(char *b, size_t *n)
{
    (void)n;
    const struct pool_hdr *h = (const struct pool_hdr *)b;
    memset(b + h->ctab_off + 8, 0x77, 8); /* entry 1 */
}

/* The line of `txn-pool check file` in out[cap]; returns its exit status
 * (124: it ran for 20 s, as a walk of a damaged heap that never ends). */
static int tool_line(const char *file, char *out, size_t cap)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "timeout 20 '%s' check '%s' 2>&1", tool, file);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    if (!fgets(out, (int)cap, f))
        *out = 0;
    int st = pclose(f);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* What the tool and an open say name the cause (issue #41): a missing file
 * (it used to say "cannot be read: PATH" alone); a pmdk pool whose
 * creation stopped before its seal (it used to say "invalid argument",
 * and the key-value store's --check "ok"). */
START_TEST(test_messages)
{
    char out[1024], missing[TEST_PATH_LEN + 8];
    snprintf(missing, sizeof missing, "%s.none", path);
    ck_assert_int_eq(tool_line(missing, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "cannot be read: pool file does not exist"), "%s", out);
    if (strcmp(txn_engine_name(), "pmdk"))
        return;
    /* the meta object's magic, written last at seal ("PMDKMTA2"), undone */
    size_t n;
    unsigned char *b = test_slurp(path, &n);
    unsigned char *m = memmem(b, n, "PMDKMTA2", 8);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_null(memmem(m + 8, n - (size_t)(m + 8 - b), "PMDKMTA2", 8));
    memset(m, 0, 8);
    test_spew(path, b, n);
    free(b);
    ck_assert_int_eq(tool_line(path, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "damaged: its creation did not complete"), "%s", out);
    txn_pool *p;
    ck_assert_int_eq(txn_pool_open(name, "pooltool", &p), TXN_E_CORRUPT);
    ck_assert_msg(strstr(txn_pool_strerror(TXN_E_CORRUPT), "creation did not complete"), "%s",
                  txn_pool_strerror(TXN_E_CORRUPT));
}
END_TEST

/* pmdk: a block of a run whose header says size 0 made libpmemobj's walk
 * of the heap step in place for ever (kvstore-check-pmdk hung now and
 * then); the tool and an open now refuse it at once. The first object the
 * root names: its handle is 2^44 + its offset in the file (pmdk_int.h),
 * its compact header's size the 8 bytes 16 before it. */
START_TEST(test_heap_size_zero)
{
    if (strcmp(txn_engine_name(), "pmdk"))
        return;
    txn_pool *p;
    txn *tx;
    uint64_t h;
    ck_assert_int_eq(txn_pool_open(name, "pooltool", &p), 0);
    ck_assert_int_eq(txn_begin(p, &tx), 0);
    ck_assert_int_eq(txn_read_u64(tx, txn_root(p), 0, &h), 0);
    ck_assert_int_eq(txn_commit(tx), 0);
    txn_pool_close(p);
    size_t n, off = (size_t)(h - ((uint64_t)1 << 44));
    unsigned char *b = test_slurp(path, &n);
    ck_assert_uint_lt(off, n);
    ck_assert_uint_ge(off, 16);
    memset(b + off - 16, 0, 8);
    test_spew(path, b, n);
    free(b);
    char out[1024];
    ck_assert_int_eq(tool_line(path, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "damaged: PMDK's heap:") && strstr(out, "has size 0"), "%s", out);
    ck_assert_int_eq(txn_pool_open(name, "pooltool", &p), TXN_E_CORRUPT);
}
END_TEST

START_TEST(test_damaged)
{
    txn_pool_info i;
    ck_assert_int_eq(damaged(flip_header, &i), TXN_E_CORRUPT);
    ck_assert_ptr_nonnull(strstr(i.problem, "header"));
    ck_assert_int_eq(damaged(truncate_1m, &i), TXN_E_TRUNC);
    ck_assert_ptr_nonnull(strstr(i.problem, "bytes"));
    ck_assert_int_eq(damaged(foreign, &i), TXN_E_NOTPOOL);
    ck_assert_int_eq(damaged(empty, &i), TXN_E_NOTPOOL);
    ck_assert_int_eq(txn_pool_inspect("pmtx-pt-no-such-file.pool", &i), TXN_E_NOENT);
    ck_assert_int_eq(run_tool("check", "pmtx-pt-no-such-file.pool"), 2);
    txn_pool_info intact;
    ck_assert_int_eq(txn_pool_inspect(path, &intact), 0);
    if (!strcmp(intact.format, "pmtx")) {
        ck_assert_int_eq(damaged(flip_chunk_entry, &i), TXN_E_CORRUPT);
        ck_assert_ptr_nonnull(strstr(i.problem, "chunk table entry 1"));
    }
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH-OF-txn-pool\n", argv[0]);
        return 2;
    }
    tool = argv[1];
    Suite *s = suite_create("pool_tool");
    TCase *tc = test_tcase(s, "pool_tool", 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_intact);
    tcase_add_test(tc, test_interrupted);
    tcase_add_test(tc, test_damaged);
    tcase_add_test(tc, test_messages);
    tcase_add_test(tc, test_heap_size_zero);
    return test_run(s, CK_FORK_GETENV, "pt");
}
