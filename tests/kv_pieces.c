/* kv_pieces.c - strings in pieces (apps/kvstore/store.c, issue #41) against
 * a model in DRAM, on every engine.
 *
 * A few keys take random APPENDs, SETRANGEs (in the middle, across piece
 * boundaries, past the end), one-byte writes as SETBIT makes them, whole
 * SETs, deletes and expiry changes, some rolled back (half the SETRANGEs
 * of a key present go through a handle: kv_txn_open_as, kv_val_write);
 * their strings grow past the size where the store cuts them into pieces
 * and past the piece table's first capacity. After each step every key reads back as the
 * model says (GET; and kv_txn_getrange, which STRLEN, GETRANGE and GETBIT
 * use, over a random range and one across a piece boundary);
 * kv_check passes every few steps; the store's byte count after a reopen
 * (counted from the pool) is what the calls accounted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "store.h"

enum { KEYS = 3, MAXLEN = 600000, STEPS = 400 };
#define MAX_STRING (512ull * 1024 * 1024)
#define FAR_MS 4102444800000ull /* 2100-01-01 */

struct model {
    int present;
    size_t len;
    char v[MAXLEN];
};

static struct model m[KEYS]; /* large: not on the stack */
static char src[MAXLEN];

static struct kv_slice key_of(unsigned i, char *buf)
{
    return (struct kv_slice){buf, (size_t)snprintf(buf, 32, "str:%u", i)};
}

struct got {
    int found;
    size_t len;
    int same;
    const struct model *want;
};

static void got_cb(void *arg, const char *v, size_t n)
{
    struct got *g = arg;
    g->found = v != NULL;
    g->len = n;
    g->same = v && n == g->want->len && !memcmp(v, g->want->v, n);
}

struct range {
    const char *want;
    size_t n;
    int same;
};

static void range_cb(void *arg, const char *v, size_t n)
{
    struct range *r = arg;
    r->same = v && n == r->n && !memcmp(v, r->want, n);
}

/* kv_txn_getrange of [off, off + n) of key i against the model. */
static void check_range(kv_txn *t, struct kv_slice k, unsigned i, uint64_t off, uint64_t n,
                        unsigned step)
{
    size_t len = m[i].present ? m[i].len : 0;
    size_t a = off < len ? (size_t)off : len, b = n < len - a ? a + (size_t)n : len;
    struct range r = {m[i].v + a, b - a, 0};
    uint64_t got;
    int rc = kv_txn_getrange(t, k, off, n, range_cb, &r, &got);
    ck_assert_int_eq(rc, m[i].present);
    ck_assert_uint_eq(got, len);
    if (rc)
        ck_assert_msg(r.same, "step %u: key %u, bytes [%llu, +%llu) differ", step, i,
                      (unsigned long long)off, (unsigned long long)n);
}

/* Every key holds what the model says. */
static void reconcile(kv_store *s, unsigned step)
{
    static uint64_t seed = 5;
    for (unsigned i = 0; i < KEYS; i++) {
        char kb[32];
        struct kv_slice k = key_of(i, kb);
        struct got g = {.want = &m[i]};
        kv_txn *t;
        CHECK_OK(kv_txn_begin(s, 1, &k, 0, &t));
        int rc = kv_txn_get(t, k, got_cb, &g);
        size_t len = m[i].len + 1;
        check_range(t, k, i, test_rand(&seed) % len, test_rand(&seed) % 140000, step);
        check_range(t, k, i, 65536 - test_rand(&seed) % 100, test_rand(&seed) % 300, step);
        CHECK_OK(kv_txn_end(t, 0));
        ck_assert_int_eq(rc, m[i].present);
        if (rc)
            ck_assert_msg(g.same, "step %u: key %u holds %zu bytes, the model %zu%s", step, i,
                          g.len, m[i].len, g.len == m[i].len ? " (other bytes)" : "");
    }
}

/* One random change of key i, in its own transaction; one in eight rolls
 * back (the model then stays). */
static void step(kv_store *s, unsigned i, uint64_t *seed)
{
    char kb[32];
    struct kv_slice k = key_of(i, kb);
    struct model *x = &m[i];
    struct model next; /* the model if it commits */
    kv_txn *t;
    unsigned dice = (unsigned)(test_rand(seed) % 100);
    if (i == 0 && dice >= 75 && dice < 88)
        dice = 88; /* key 0 is never replaced nor deleted: it grows long */
    uint64_t len = 0, off = KV_SPLICE_END;
    size_t n = 0;
    memcpy(&next, x, sizeof next);
    CHECK_OK(kv_txn_begin(s, 1, &k, 1, &t));
    if (dice < 75) { /* APPEND, SETRANGE, a byte as SETBIT writes it */
        size_t have = x->present ? x->len : 0;
        if (dice < 40) {
            n = 1 + (size_t)(test_rand(seed) % (dice < 5 ? 140000 : 12000));
        } else if (dice < 65) {
            off = test_rand(seed) % (have + 40000);
            n = 1 + (size_t)(test_rand(seed) % 5000);
        } else {
            off = test_rand(seed) % (have + 100);
            n = 1;
        }
        uint64_t at = off == KV_SPLICE_END ? have : off;
        if (at + n > MAXLEN) {
            CHECK_OK(kv_txn_end(t, 0));
            return;
        }
        for (size_t j = 0; j < n; j++)
            src[j] = (char)('A' + test_rand(seed) % 58);
        int rc;
        if (dice >= 52 && dice < 65 && x->present) {
            /* through a handle (kv_val): the bytes inside the string in
             * place, then those past its end (the string grows), with
             * another call between, after which the handle finds the
             * node again */
            kv_val *v;
            size_t h = at >= have ? 0 : at + n <= have ? n : have - at;
            char *back = malloc(n);
            ck_assert_ptr_nonnull(back);
            ck_assert_int_eq(kv_txn_open_as(t, k, KV_STRING, &v, &len), 1);
            ck_assert_uint_eq(len, x->len);
            CHECK_OK(kv_val_write(v, at, src, h));
            ck_assert_int_eq(kv_txn_getrange(t, k, 0, 0, NULL, NULL, &len), 1);
            if (h < n)
                CHECK_OK(kv_val_write(v, at + h, src + h, n - h));
            CHECK_OK(kv_val_read(v, at, back, n));
            ck_assert_int_eq(memcmp(back, src, n), 0);
            size_t end = at + n > have ? at + n : have; /* past the end: refused */
            ck_assert_int_eq(kv_val_read(v, end, back, 1), TXN_E_INVAL);
            free(back);
            kv_val_close(v);
            rc = kv_txn_getrange(t, k, 0, 0, NULL, NULL, &len);
        } else {
            rc = kv_txn_splice(t, k, off, (struct kv_slice){src, n}, MAX_STRING, &len);
        }
        ck_assert_int_eq(rc, x->present);
        if (!next.present)
            next.len = 0;
        if (at > next.len)
            memset(next.v + next.len, 0, at - next.len);
        memcpy(next.v + at, src, n);
        if (at + n > next.len)
            next.len = at + n;
        next.present = 1;
        ck_assert_uint_eq(len, next.len);
    } else if (dice < 83) { /* SET: small, a value object, or large */
        n = (size_t)(test_rand(seed) % (dice < 80 ? 300 : 50000));
        for (size_t j = 0; j < n; j++)
            next.v[j] = (char)('a' + test_rand(seed) % 26);
        next.len = n;
        next.present = 1;
        CHECK_OK(kv_txn_put(t, k, (struct kv_slice){next.v, n}, 0));
    } else if (dice < 88) {
        ck_assert_int_eq(kv_txn_del(t, k), x->present);
        next.present = 0;
    } else { /* an expiry set or removed: the node changes, not its value */
        ck_assert_int_eq(kv_txn_expire(t, k, dice < 94 ? FAR_MS : 0), x->present);
    }
    if (test_rand(seed) % 8 == 0) {
        ck_assert_int_eq(kv_txn_end(t, -1), -1);
        return;
    }
    CHECK_OK(kv_txn_end(t, 0));
    memcpy(x, &next, sizeof next);
}

START_TEST(test_pieces_model)
{
    struct test_pool tp;
    memset(m, 0, sizeof m);
    CHECK_OK(test_pool_new(&tp, "pieces"));
    struct kv_opts o = {.pool_size = 64u << 20, .threads = 2};
    kv_store *s;
    CHECK_OK(kv_open(tp.name, &o, &s));
    uint64_t seed = 41;
    for (unsigned st = 0; st < STEPS; st++) {
        step(s, (unsigned)(test_rand(&seed) % KEYS), &seed);
        reconcile(s, st);
        if (st % 50 == 49)
            ck_assert_int_eq(kv_check(s, stderr), 0);
    }
    size_t longest = 0;
    for (unsigned i = 0; i < KEYS; i++)
        longest = m[i].len > longest ? m[i].len : longest;
    ck_assert_uint_gt(longest, 300000); /* past the table's first 4 pieces */
    struct kv_info before, after;
    kv_info(s, &before);
    kv_close(s);
    CHECK_OK(kv_open(tp.name, &o, &s));
    kv_info(s, &after);
    ck_assert_uint_eq(after.keys, before.keys);
    ck_assert_uint_eq(after.bytes, before.bytes);
    ck_assert_int_eq(kv_check(s, stderr), 0);
    reconcile(s, STEPS);
    CHECK_OK(kv_flush(s));
    kv_info(s, &after);
    ck_assert_uint_eq(after.keys, 0);
    ck_assert_int_eq(kv_check(s, stderr), 0);
    kv_close(s);
    test_pool_remove(tp.name);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kv_pieces");
    TCase *tc = test_tcase(s, "pieces", 120);
    tcase_add_test(tc, test_pieces_model);
    printf("engine %s\n", txn_engine_name());
    return test_run(s, CK_FORK_GETENV, "pieces");
}
