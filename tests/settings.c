/* settings.c - the TXN_* settings of the environment: a malformed one
 * refuses every pool create, open, view and inspection with TXN_E_INVAL
 * and a message that names it, its value and what it accepts, leaving the
 * pool file as it was; a good one still works; and the calls programs make
 * for their banner before any open (txn_pdom, txn_pdom_ns,
 * txn_flush_name) return the defaults for a malformed value at load.
 * Written only against txn.h; built for every engine, and every engine
 * refuses every setting, its own or not. */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "txn.h"

#define LAYOUT "pmtx-settings"
#define POOL_SIZE ((size_t)16 << 20) /* pmdk's smallest */

/* A value a setting refuses, and the words after "invalid argument: ". */
static const struct bad {
    const char *name, *value, *why;
} bad[] = {
    {"TXN_PDOM", "7", "TXN_PDOM=7: not 0, 1 or 2"},
    {"TXN_PDOM", "-1", "TXN_PDOM=-1: not 0, 1 or 2"},
    {"TXN_PDOM", "abc", "TXN_PDOM=abc: not 0, 1 or 2"},
    {"TXN_PDOM", " 1", "TXN_PDOM= 1: not 0, 1 or 2"},
    {"TXN_PDOM0_NS", "abc", "TXN_PDOM0_NS=abc: not a number of ns from 0 to 1000000000"},
    {"TXN_PDOM0_NS", "1000000001",
     "TXN_PDOM0_NS=1000000001: not a number of ns from 0 to 1000000000"},
    {"TXN_PDOM1_NS", "abc", "TXN_PDOM1_NS=abc: not a number of ns from 0 to 1000000000"},
    {"TXN_PDOM1_NS", "-5", "TXN_PDOM1_NS=-5: not a number of ns from 0 to 1000000000"},
    {"TXN_PDOM1_NS", "99999999999999999999999",
     "TXN_PDOM1_NS=99999999999999999999999: not a number of ns from 0 to 1000000000"},
    {"TXN_EPOCH_MS", "-1", "TXN_EPOCH_MS=-1: not a number of ms from 0 to 1000000000"},
    {"TXN_EPOCH_MS", "10ms", "TXN_EPOCH_MS=10ms: not a number of ms from 0 to 1000000000"},
    {"TXN_LOG_BATCH", "9", "TXN_LOG_BATCH=9: not 0 or 1"},
    {"TXN_LOG_BATCH", "no", "TXN_LOG_BATCH=no: not 0 or 1"},
    {"TXN_ALLOC_EAGER", "2", "TXN_ALLOC_EAGER=2: not 0 or 1"},
    {"TXN_ALLOC_EAGER", "yes", "TXN_ALLOC_EAGER=yes: not 0 or 1"},
    {"TXN_INCLL_FLUSH", "bogus", "TXN_INCLL_FLUSH=bogus: not tracked or whole"},
    {"TXN_INCLL_FLUSH", "Whole", "TXN_INCLL_FLUSH=Whole: not tracked or whole"},
    {"TXN_INCLL_STATS", "3", "TXN_INCLL_STATS=3: not 0, 1 or 2"},
    {"TXN_INCLL_STATS", "on", "TXN_INCLL_STATS=on: not 0, 1 or 2"},
    {"TXN_ALLOC_CACHE", "65", "TXN_ALLOC_CACHE=65: not a number of blocks from 0 to 64"},
    {"TXN_ALLOC_CACHE", "-1", "TXN_ALLOC_CACHE=-1: not a number of blocks from 0 to 64"},
};

/* Values the settings accept; "" is unset. */
static const struct good {
    const char *name, *value;
} good[] = {
    {"TXN_PDOM", "0"},          {"TXN_PDOM", "1"},           {"TXN_PDOM", "2"},
    {"TXN_PDOM", ""},           {"TXN_PDOM0_NS", "0"},       {"TXN_PDOM0_NS", "1000000000"},
    {"TXN_PDOM1_NS", "100"},    {"TXN_PDOM1_NS", "0100"},    {"TXN_EPOCH_MS", "0"},
    {"TXN_EPOCH_MS", "5"},      {"TXN_LOG_BATCH", "0"},      {"TXN_LOG_BATCH", "1"},
    {"TXN_ALLOC_EAGER", "0"},   {"TXN_ALLOC_EAGER", "1"},    {"TXN_INCLL_FLUSH", "tracked"},
    {"TXN_INCLL_FLUSH", "whole"}, {"TXN_INCLL_STATS", "0"},  {"TXN_INCLL_STATS", "1"},
    {"TXN_ALLOC_CACHE", "0"},   {"TXN_ALLOC_CACHE", "1"},    {"TXN_ALLOC_CACHE", "64"},
};

#define N_BAD (int)(sizeof bad / sizeof bad[0])
#define N_GOOD (int)(sizeof good / sizeof good[0])

/* A closed pool of this test, its root holding `mark`. */
static void make_pool(struct test_pool *t, uint64_t mark)
{
    txn_pool *p = NULL;
    txn *tx = NULL;
    CHECK_OK(test_pool_new(t, "set"));
    CHECK_OK(txn_pool_create(t->name, LAYOUT, &(txn_pool_opts){.size = POOL_SIZE}, &p));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_write_u64(tx, txn_root(p), 0, mark));
    CHECK_OK(txn_commit(tx));
    txn_pool_close(p);
}

/* rc is TXN_E_INVAL and its message says `why` of bad[i]. */
static void assert_refused(int rc, int i, const char *call)
{
    char want[256];
    snprintf(want, sizeof want, "%s: %s", txn_strerror(TXN_E_INVAL), bad[i].why);
    ck_assert_msg(rc == TXN_E_INVAL, "%s with %s=%s: %d (%s), expected TXN_E_INVAL", call,
                  bad[i].name, bad[i].value, rc, txn_pool_strerror(rc));
    ck_assert_msg(!strcmp(txn_pool_strerror(rc), want), "%s with %s=%s says \"%s\", not \"%s\"",
                  call, bad[i].name, bad[i].value, txn_pool_strerror(rc), want);
}

START_TEST(test_bad_values_refused)
{
    struct test_pool t, fresh;
    make_pool(&t, 42);
    size_t len, now_len;
    unsigned char *before = test_slurp(t.path, &len);
    for (int i = 0; i < N_BAD; i++) {
        txn_pool *p = NULL;
        txn_pool_info info;
        ck_assert_int_eq(setenv(bad[i].name, bad[i].value, 1), 0);
        CHECK_OK(test_pool_new(&fresh, "set"));
        assert_refused(txn_pool_create(fresh.name, LAYOUT, NULL, &p), i, "create");
        ck_assert_msg(access(fresh.path, F_OK) != 0, "a refused create left %s", fresh.path);
        assert_refused(txn_pool_open(t.name, LAYOUT, &p), i, "open");
        assert_refused(txn_pool_view(t.name, LAYOUT, &p), i, "view");
        assert_refused(txn_pool_inspect(t.name, &info), i, "inspect");
        ck_assert_str_eq(info.problem, bad[i].why);
        ck_assert_ptr_null(p);
        ck_assert_int_eq(unsetenv(bad[i].name), 0);
    }
    unsigned char *now = test_slurp(t.path, &now_len);
    ck_assert_msg(now_len == len && !memcmp(now, before, len), "a refused call changed %s",
                  t.path);
    free(now);
    free(before);
    ck_assert_int_eq(test_pool_remove(t.name), 0);
}
END_TEST

START_TEST(test_good_values_work)
{
    for (int i = 0; i < N_GOOD; i++) {
        struct test_pool t;
        txn_pool *p = NULL;
        txn *tx = NULL;
        txn_pool_info info;
        uint64_t v = 0;
        ck_assert_int_eq(setenv(good[i].name, good[i].value, 1), 0);
        make_pool(&t, 7 + (uint64_t)i);
        CHECK_OK(txn_pool_open(t.name, LAYOUT, &p));
        CHECK_OK(txn_begin(p, &tx));
        CHECK_OK(txn_read_u64(tx, txn_root(p), 0, &v));
        CHECK_OK(txn_commit(tx));
        txn_pool_close(p);
        ck_assert_uint_eq(v, 7 + (uint64_t)i);
        CHECK_OK(txn_pool_view(t.name, LAYOUT, &p));
        txn_pool_close(p);
        int rc = txn_pool_inspect(t.name, &info);
        ck_assert_msg(rc >= 0, "inspect with %s=%s: %s", good[i].name, good[i].value,
                      txn_pool_strerror(rc));
        ck_assert_int_eq(test_pool_remove(t.name), 0);
        ck_assert_int_eq(unsetenv(good[i].name), 0);
    }
}
END_TEST

/* ---- settings at load: this program run again with `env` added, as
 * "banner": it prints what the banner calls return and a create's code */

static int banner(void)
{
    struct test_pool t;
    txn_pool *p = NULL;
    if (test_pool_new(&t, "set"))
        return 1;
    int rc = txn_pool_create(t.name, LAYOUT, &(txn_pool_opts){.size = POOL_SIZE}, &p);
    if (!rc) {
        txn_pool_close(p);
        test_pool_remove(t.name);
    }
    printf("%d %u %s %d\n", txn_pdom(), txn_pdom_ns(), txn_flush_name(), rc);
    return 0;
}

/* What banner() printed with `a` and `b` (NAME=value, or NULL) set at
 * load, in out[cap]. */
static void run_banner(const char *a, const char *b, char *out, size_t cap)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        const char *env[] = {a, b};
        for (int k = 0; k < 2; k++)
            if (env[k])
                putenv((char *)env[k]);
        execl("/proc/self/exe", "settings", "banner", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    ssize_t n, got = 0;
    while (got + 1 < (ssize_t)cap && (n = read(fd[0], out + got, cap - 1 - (size_t)got)) > 0)
        got += n;
    out[got] = '\0';
    close(fd[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "banner run failed: %s", out);
}

START_TEST(test_banner_at_load)
{
    char out[128], want[128];
    int pdom;
    unsigned ns;
    char flush[32];
    int rc;
    /* malformed: the defaults (PDOM 1, 100 ns), and the create refuses */
    run_banner("TXN_PDOM=7", NULL, out, sizeof out);
    ck_assert_int_eq(sscanf(out, "%d %u %31s %d", &pdom, &ns, flush, &rc), 4);
    ck_assert_int_eq(pdom, 1);
    ck_assert_uint_eq(ns, 100);
    ck_assert_int_eq(rc, TXN_E_INVAL);
    run_banner("TXN_PDOM=0", "TXN_PDOM0_NS=-5", out, sizeof out);
    ck_assert_int_eq(sscanf(out, "%d %u %31s %d", &pdom, &ns, flush, &rc), 4);
    ck_assert_int_eq(pdom, 0);
    ck_assert_uint_eq(ns, 500);
    ck_assert_int_eq(rc, TXN_E_INVAL);
    /* good: taken */
    run_banner("TXN_PDOM=2", NULL, out, sizeof out);
    snprintf(want, sizeof want, "2 0 none 0\n");
    ck_assert_str_eq(out, want);
    run_banner("TXN_PDOM=0", "TXN_PDOM0_NS=250", out, sizeof out);
    ck_assert_int_eq(sscanf(out, "%d %u %31s %d", &pdom, &ns, flush, &rc), 4);
    ck_assert_int_eq(pdom, 0);
    ck_assert_uint_eq(ns, 250);
    ck_assert_int_eq(rc, 0);
}
END_TEST

static Suite *settings_suite(void)
{
    Suite *s = suite_create("settings");
    TCase *tc = test_tcase(s, "settings", 60);
    tcase_add_test(tc, test_bad_values_refused);
    tcase_add_test(tc, test_good_values_work);
    tcase_add_test(tc, test_banner_at_load);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "banner"))
        return banner();
    printf("engine %s, pools in %s\n", txn_engine_name(), test_pool_dir());
    return test_run(settings_suite(), CK_FORK_GETENV, "set");
}
