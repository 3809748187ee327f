/* pagestore_model.c - the SQLite VFS's block store (apps/sqlite/pagestore.h)
 * against a model in DRAM: random staged writes and truncations (growing,
 * cutting, cutting then growing again in one write set), commits,
 * discards and reopens; after each step the staged and the committed
 * views must read exactly as the model's two byte arrays. Then a pool that
 * fills up: the commit that does not fit fails and changes nothing. Then
 * two stores in one pool (pgs_adopt) committed together (pgs_commit_many):
 * one transaction, so a failure of the second's part undoes the first's.
 * Built for every engine. PGS_MODEL_STEPS (default 5000) and
 * PGS_MODEL_SEED repeat a run. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "pagestore.h"
#include "txn.h"

#define MAX_FILE ((size_t)3 << 20) /* the model's largest file */
#define POOL_SIZE ((size_t)32 << 20)

struct model {
    unsigned char *committed, *staged;
    size_t csize, ssize;
};

static uint64_t seed;

static size_t below(size_t n)
{
    return n ? (size_t)(test_rand(&seed) % n) : 0;
}

/* Every byte of both views, and both sizes, as the model has them. */
static void check_views(pgs *s, const struct model *m, const char *when)
{
    static unsigned char buf[MAX_FILE + 8192];
    size_t got;
    ck_assert_msg(pgs_size(s, 1) == m->ssize && pgs_size(s, 0) == m->csize,
                  "%s: sizes %llu/%llu, model %zu/%zu", when,
                  (unsigned long long)pgs_size(s, 1), (unsigned long long)pgs_size(s, 0),
                  m->ssize, m->csize);
    for (int staged = 0; staged < 2; staged++) {
        size_t size = staged ? m->ssize : m->csize;
        const unsigned char *want = staged ? m->staged : m->committed;
        /* past the end: zeros, and `got` says where the file stopped */
        CHECK_OK(pgs_read(s, staged, buf, size + 5000, 0, &got));
        ck_assert_uint_eq(got, size);
        static const unsigned char zero[5000];
        if (!memcmp(buf, want, size) && !memcmp(buf + size, zero, sizeof zero))
            continue;
        size_t i = 0;
        while (buf[i] == (i < size ? want[i] : 0))
            i++;
        ck_assert_msg(0, "%s: %s byte %zu is %u, model %u (size %zu)", when,
                      staged ? "staged" : "committed", i, buf[i], i < size ? want[i] : 0, size);
    }
}

/* A few random reads at unaligned places of the staged view. */
static void check_reads(pgs *s, const struct model *m)
{
    unsigned char buf[10000];
    for (int k = 0; k < 4; k++) {
        size_t off = below(m->ssize + 100), n = 1 + below(sizeof buf - 1), got;
        CHECK_OK(pgs_read(s, 1, buf, n, off, &got));
        size_t in = off >= m->ssize ? 0 : (m->ssize - off < n ? m->ssize - off : n);
        ck_assert_uint_eq(got, in);
        /* one assertion per read: libcheck reports every passing one */
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (buf[i] != (i < in ? m->staged[off + i] : 0))
                bad = i;
        ck_assert_msg(bad == n, "read of %zu at %zu: byte %zu is %u, model %u", n, off, bad,
                      buf[bad], bad < in ? m->staged[off + bad] : 0);
    }
}

/* Bytes that change a file: random, zeros, or the same with a few changed
 * (the commit writes only changed words). */
static void fill(unsigned char *p, const unsigned char *old, size_t n)
{
    switch (below(3)) {
    case 0:
        for (size_t i = 0; i < n; i++)
            p[i] = (unsigned char)test_rand(&seed);
        break;
    case 1:
        memset(p, 0, n);
        break;
    default:
        memcpy(p, old, n);
        for (int k = 0; k < 3; k++)
            p[below(n)] ^= (unsigned char)(1 + below(255));
    }
}

static void step_write(pgs *s, struct model *m)
{
    static unsigned char buf[MAX_FILE];
    size_t n = 1 + below(12000);
    /* half of them inside the file or at its end, as SQLite writes */
    size_t off = below(2) ? below((m->ssize < MAX_FILE - n ? m->ssize : MAX_FILE - n) + 1)
                          : below(MAX_FILE - n + 1);
    unsigned char *old = m->staged + off;
    fill(buf, old, n);
    CHECK_OK(pgs_stage_write(s, buf, n, off));
    memcpy(m->staged + off, buf, n);
    if (off + n > m->ssize)
        m->ssize = off + n;
}

static void step_truncate(pgs *s, struct model *m)
{
    size_t size = below(2) ? below(m->ssize + 1) : below(MAX_FILE + 1);
    CHECK_OK(pgs_stage_truncate(s, size));
    if (size < m->ssize)
        memset(m->staged + size, 0, m->ssize - size);
    m->ssize = size;
}

START_TEST(test_model)
{
    struct test_pool t;
    struct model m = {calloc(1, MAX_FILE), calloc(1, MAX_FILE), 0, 0};
    struct pgs_opts o = {.pool_size = POOL_SIZE, .create = 1};
    uint64_t steps = env_u64("PGS_MODEL_STEPS", 5000);
    unsigned commits = 0, discards = 0, reopens = 0;
    int created;
    pgs *s;
    seed = env_u64("PGS_MODEL_SEED", (uint64_t)time(NULL) ^ (uint64_t)getpid());
    printf("pagestore model: engine %s, %llu steps, PGS_MODEL_SEED=%llu\n", txn_engine_name(),
           (unsigned long long)steps, (unsigned long long)seed);
    ck_assert_ptr_nonnull(m.committed);
    ck_assert_ptr_nonnull(m.staged);
    CHECK_OK(test_pool_new(&t, "pgsmodel"));
    ck_assert_msg(pgs_open(t.path, &o, &s, &created) == 0, "%s", pgs_why());
    ck_assert_int_eq(created, 1);
    for (uint64_t i = 0; i < steps; i++) {
        size_t r = below(100);
        if (r < 55) {
            step_write(s, &m);
        } else if (r < 70) {
            step_truncate(s, &m);
        } else if (r < 85) {
            ck_assert_msg(pgs_commit(s) == 0, "commit: %s", pgs_why());
            memcpy(m.committed, m.staged, MAX_FILE);
            m.csize = m.ssize;
            commits++;
        } else if (r < 95) {
            pgs_discard(s);
            memcpy(m.staged, m.committed, MAX_FILE);
            m.ssize = m.csize;
            discards++;
        } else if (r < 97) {
            /* staged changes die with the store */
            pgs_close(s);
            memcpy(m.staged, m.committed, MAX_FILE);
            m.ssize = m.csize;
            o.create = 0;
            ck_assert_msg(pgs_open(t.path, &o, &s, &created) == 0, "%s", pgs_why());
            reopens++;
        } else {
            check_views(s, &m, "step");
        }
        check_reads(s, &m);
        if (i % 100 == 0 || r >= 95)
            check_views(s, &m, "step");
    }
    ck_assert_msg(pgs_commit(s) == 0, "commit: %s", pgs_why());
    memcpy(m.committed, m.staged, MAX_FILE);
    m.csize = m.ssize;
    pgs_close(s);
    ck_assert_msg(pgs_open(t.path, &o, &s, &created) == 0, "%s", pgs_why());
    check_views(s, &m, "last reopen");
    pgs_close(s);
    printf("pagestore model: %u commits, %u discards, %u reopens\n", commits, discards, reopens);
    ck_assert_int_eq(unlink(t.path), 0);
    free(m.committed);
    free(m.staged);
}
END_TEST

/* Growing commits into a small pool until one does not fit: it fails
 * with TXN_E_NOSPACE or TXN_E_LOGFULL, the committed file is what the
 * last good commit left (also after a reopen), and the store goes on. */
START_TEST(test_full)
{
    struct test_pool t;
    struct pgs_opts o = {.pool_size = (size_t)16 << 20, .pool_max = (size_t)16 << 20,
                         .create = 1};
    static unsigned char block[128 << 10], back[128 << 10];
    size_t good = 0, got;
    int created, rc = 0;
    pgs *s;
    CHECK_OK(test_pool_new(&t, "pgsmodel"));
    ck_assert_msg(pgs_open(t.path, &o, &s, &created) == 0, "%s", pgs_why());
    for (unsigned k = 0; k < 250 && !rc; k++) {
        memset(block, 1 + (int)k, sizeof block);
        CHECK_OK(pgs_stage_write(s, block, sizeof block, good));
        if (!(rc = pgs_commit(s)))
            good += sizeof block;
    }
    ck_assert_msg(rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL, "commit returned %d (%s): %s", rc,
                  txn_strerror(rc), pgs_why());
    ck_assert_msg(good > 0, "the first commit failed: %s", pgs_why());
    ck_assert_uint_eq(pgs_size(s, 0), good);
    ck_assert_uint_eq(pgs_size(s, 1), good);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t off = 0; off < good; off += sizeof back) {
            CHECK_OK(pgs_read(s, 0, back, sizeof back, off, &got));
            ck_assert_uint_eq(got, sizeof back);
            memset(block, 1 + (int)(off / sizeof back), sizeof block);
            ck_assert_msg(!memcmp(back, block, sizeof back), "bytes at %zu changed", off);
        }
        /* a small change still commits */
        memset(block, 0x77, 100);
        CHECK_OK(pgs_stage_write(s, block, 100, 0));
        ck_assert_msg(pgs_commit(s) == 0, "%s", pgs_why());
        memset(block, 1, 100);
        CHECK_OK(pgs_stage_write(s, block, 100, 0));
        ck_assert_msg(pgs_commit(s) == 0, "%s", pgs_why());
        pgs_close(s);
        o.create = 0;
        ck_assert_msg(pgs_open(t.path, &o, &s, &created) == 0, "%s", pgs_why());
    }
    pgs_close(s);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

/* Two stores hosted in one pool committed by pgs_commit_many: as one
 * transaction of that pool (on every engine: no pool is joined), so when
 * the second store's changes do not fit, the first's are not committed
 * either. */
START_TEST(test_one_pool)
{
    struct test_pool t;
    txn_pool_opts po = {.size = (size_t)8 << 20, .max_size = (size_t)8 << 20};
    static unsigned char big[(size_t)12 << 20], back[4096];
    txn_pool *p;
    txn *tx;
    txn_obj *root[2];
    pgs *st[2];
    size_t got;
    if (po.size < txn_pool_min_size(&po))
        po.size = po.max_size = txn_pool_min_size(&po);
    CHECK_OK(test_pool_new(&t, "pgsmodel"));
    CHECK_OK(txn_pool_create(t.name, PGS_LAYOUT, &po, &p));
    CHECK_OK(txn_begin(p, &tx));
    for (int i = 0; i < 2; i++)
        CHECK_OK(txn_alloc(tx, PGS_ROOT_SIZE, &root[i]));
    CHECK_OK(txn_commit(tx));
    for (int i = 0; i < 2; i++) {
        struct pgs_host h = {.pool = p, .root = root[i], .max_bytes = (uint64_t)64 << 20};
        ck_assert_msg(pgs_adopt(&h, &st[i]) == 0, "%s", pgs_why());
    }
    /* both commit */
    for (int i = 0; i < 2; i++) {
        memset(back, 'a' + i, sizeof back);
        CHECK_OK(pgs_stage_write(st[i], back, sizeof back, 0));
    }
    ck_assert_msg(pgs_commit_many(st, 2) == 0, "%s", pgs_why());
    /* the second's changes cannot fit: neither commits */
    memset(back, 'x', sizeof back);
    CHECK_OK(pgs_stage_write(st[0], back, sizeof back, 0));
    memset(big, 'y', sizeof big);
    CHECK_OK(pgs_stage_write(st[1], big, sizeof big, 0));
    int rc = pgs_commit_many(st, 2);
    ck_assert_msg(rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL, "commit returned %d (%s): %s", rc,
                  txn_strerror(rc), pgs_why());
    for (int i = 0; i < 2; i++) {
        CHECK_OK(pgs_read(st[i], 0, back, sizeof back, 0, &got));
        ck_assert_uint_eq(got, sizeof back);
        ck_assert_msg(back[0] == 'a' + i && back[sizeof back - 1] == 'a' + i,
                      "store %d holds '%c' after a failed commit of both", i, back[0]);
        ck_assert_uint_eq(pgs_size(st[i], 0), sizeof back);
    }
    for (int i = 0; i < 2; i++)
        pgs_close(st[i]);
    txn_pool_close(p);
    ck_assert_int_eq(unlink(t.path), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pagestore_model");
    TCase *tc = test_tcase(s, "model", 300);
    tcase_add_test(tc, test_model);
    tcase_add_test(tc, test_full);
    tcase_add_test(tc, test_one_pool);
    return test_run(s, CK_FORK_GETENV, "pgsmodel");
}
