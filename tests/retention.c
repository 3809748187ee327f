/* retention.c - an old pool opened by a new program, on every engine
 * (txn_layout.h): the reset model refuses it clearly and leaves its data
 * alone (or recreates it when asked), the manual model migrates it in
 * bounded transactions and resumes or drops an interrupted migration, the
 * automatic model (LEDS) extends objects lazily, level by level, at first
 * access. Written only against txn.h and txn_layout.h. */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* a failed CHECK_RC also says what the layout code found (common.h) */
#define CHECK_DETAIL() txn_layout_error()
#include "common.h"
#include "txn.h"
#include "txn_layout.h"

#define NAME "kvlist"
#define NODES 300

static char g_pool[TEST_NAME_LEN];

static void new_pool_name(void)
{
    CHECK_OK(test_pool_name("retention", g_pool, sizeof g_pool));
}

static void remove_pool(void)
{
    test_pool_remove(g_pool);
}

static unsigned char *slurp(size_t *len)
{
    char path[TEST_PATH_LEN];
    CHECK_OK(test_pool_path(g_pool, path, sizeof path));
    return test_slurp(path, len);
}

/* txn_layout_open(l) must refuse with `want` and leave every byte of the
 * file as it was: no recovery, no boot count, no run-time state. */
static void refused_untouched(const txn_layout *l, int want)
{
    txn_pool *p = NULL;
    size_t n0, n1;
    unsigned char *before = slurp(&n0);
    CHECK_RC(txn_layout_open(g_pool, l, NULL, 0, &p), want);
    unsigned char *after = slurp(&n1);
    ck_assert_uint_eq(n0, n1);
    size_t i = 0;
    while (i < n0 && before[i] == after[i])
        i++;
    ck_assert_msg(i == n0, "a refused open (%s) wrote the file: byte %zu of %zu changed",
                  txn_strerror(want), i, n0);
    free(before);
    free(after);
}

static const txn_pool_opts g_opts = {.size = 16u << 20, .root_size = 64};

/* ---- version 1: a list of {u32 key, next} from the root's first word */
struct node_v1 {
    uint32_t key;
    uint32_t pad;
    txn_obj *next;
    TXN_EXTENDIBLE;
};
static const txn_type v1_types[] = {
    TXN_TYPE(struct node_v1, TXN_FIELD(struct node_v1, key), TXN_FIELD(struct node_v1, next),
             TXN_FIELD(struct node_v1, txn_ext_link_)),
};
static const txn_layout layout_v1 = {NAME, 1, v1_types, 1, NULL, 0, 0};

/* the same version with the key widened but no version bump */
struct node_v1_changed {
    uint64_t key;
    txn_obj *next;
    TXN_EXTENDIBLE;
};
static const txn_type v1_changed_types[] = {
    TXN_TYPE(struct node_v1_changed, TXN_FIELD(struct node_v1_changed, key),
             TXN_FIELD(struct node_v1_changed, next)),
};

/* build the v1 list of keys 1..n, key k at position k (head = n) */
static void fill_v1(txn_pool *p, unsigned n)
{
    txn *tx = NULL; /* set at k = 1; the compiler cannot tell */
    txn_obj *head = NULL;
    for (unsigned k = 1; k <= n; k++) {
        if (k % 50 == 1)
            CHECK_OK(txn_begin(p, &tx));
        txn_obj *o;
        struct node_v1 v = {.key = k, .next = head};
        CHECK_OK(txn_alloc(tx, sizeof v, &o));
        CHECK_OK(txn_write(tx, o, 0, &v, sizeof v));
        head = o;
        if (k % 50 == 0 || k == n) {
            CHECK_OK(txn_write(tx, txn_root(p), 0, &head, sizeof head));
            CHECK_OK(txn_commit(tx));
        }
    }
}

/* keys of the v1 list, head first; returns the count */
static unsigned read_v1(txn_pool *p, uint32_t *keys, unsigned max)
{
    txn *tx;
    txn_obj *o;
    unsigned n = 0;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read(tx, txn_root(p), 0, &o, sizeof o));
    while (o && n < max) {
        struct node_v1 v;
        ck_assert_uint_eq(txn_obj_size(p, o) >= sizeof v, 1);
        CHECK_OK(txn_read(tx, o, 0, &v, sizeof v));
        keys[n++] = v.key;
        o = v.next;
    }
    txn_abort(tx);
    return n;
}

static void make_v1_pool(void)
{
    txn_pool *p;
    new_pool_name();
    CHECK_OK(txn_layout_open(g_pool, &layout_v1, &g_opts, TXN_LAYOUT_CREATE, &p));
    uint32_t v = 0;
    CHECK_OK(txn_layout_version(p, &v));
    ck_assert_uint_eq(v, 1);
    fill_v1(p, NODES);
    txn_pool_close(p);
}

static void check_v1_intact(void)
{
    txn_pool *p;
    uint32_t keys[NODES + 1];
    CHECK_OK(txn_layout_open(g_pool, &layout_v1, NULL, 0, &p));
    ck_assert_uint_eq(read_v1(p, keys, NODES + 1), NODES);
    for (unsigned i = 0; i < NODES; i++)
        ck_assert_uint_eq(keys[i], NODES - i);
    uint32_t v = 0;
    CHECK_OK(txn_layout_version(p, &v));
    ck_assert_uint_eq(v, 1);
    txn_pool_close(p);
}

/* ---- version 2 (manual model): {u64 key, next, char name[16]} */
struct node_v2 {
    uint64_t key;
    txn_obj *next;
    char name[16];
};
static const txn_type v2_types[] = {
    TXN_TYPE(struct node_v2, TXN_FIELD(struct node_v2, key), TXN_FIELD(struct node_v2, next),
             TXN_FIELD(struct node_v2, name)),
};

/* The scratch: where the old list is read next, and the new list's ends. */
struct conv {
    txn_obj *old_next; /* next old node to convert */
    txn_obj *head, *tail;
    uint64_t started, done;
};

struct conv_ctl {
    unsigned batch;      /* nodes per step */
    unsigned fail_after; /* steps before a simulated failure (0: never) */
    unsigned steps;      /* steps run (volatile, for the test) */
};

static int conv_step(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg)
{
    struct conv_ctl *ctl = arg;
    struct conv c;
    int rc = txn_read(tx, scratch, 0, &c, sizeof c);
    if (rc || c.done)
        return rc;
    if (ctl->fail_after && ctl->steps == ctl->fail_after)
        return TXN_E_IO;
    ctl->steps++;
    if (!c.started) {
        txn_pool *p = txn_pool_of(tx);
        if ((rc = txn_read(tx, txn_root(p), 0, &c.old_next, sizeof c.old_next)))
            return rc;
        c.started = 1;
    }
    for (unsigned i = 0; i < ctl->batch && c.old_next; i++) {
        struct node_v1 o;
        struct node_v2 n = {0};
        txn_obj *no;
        if ((rc = txn_read(tx, c.old_next, 0, &o, sizeof o)) ||
            (rc = txn_migrate_alloc(m, tx, sizeof n, &no)))
            return rc;
        n.key = o.key;
        snprintf(n.name, sizeof n.name, "k%u", o.key);
        if ((rc = txn_write(tx, no, 0, &n, sizeof n)) ||
            (rc = txn_migrate_retire(m, tx, c.old_next)))
            return rc;
        if (c.tail)
            rc = txn_write(tx, c.tail, offsetof(struct node_v2, next), &no, sizeof no);
        else
            c.head = no;
        c.tail = no;
        c.old_next = o.next;
    }
    c.done = c.old_next == NULL;
    rc = txn_write(tx, scratch, 0, &c, sizeof c);
    return rc ? rc : c.done ? 0 : TXN_MIGRATE_MORE;
}

static int conv_finish(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg)
{
    (void)m;
    (void)arg;
    struct conv c;
    int rc = txn_read(tx, scratch, 0, &c, sizeof c);
    return rc ? rc : txn_write(tx, txn_root(txn_pool_of(tx)), 0, &c.head, sizeof c.head);
}

static struct conv_ctl g_ctl;
static const txn_migration v1_to_v2[] = {
    {1, sizeof(struct conv), conv_step, conv_finish, &g_ctl},
};
static const txn_layout layout_v2 = {NAME, 2, v2_types, 1, v1_to_v2, 1, 16};
static const txn_layout layout_v2_no_migration = {NAME, 2, v2_types, 1, NULL, 0, 0};

static void check_v2(txn_pool *p)
{
    txn *tx;
    txn_obj *o;
    unsigned n = 0;
    uint32_t v = 0;
    CHECK_OK(txn_layout_version(p, &v));
    ck_assert_uint_eq(v, 2);
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read(tx, txn_root(p), 0, &o, sizeof o));
    while (o) {
        struct node_v2 nd;
        char want[16];
        ck_assert_uint_ge(txn_obj_size(p, o), sizeof nd);
        CHECK_OK(txn_read(tx, o, 0, &nd, sizeof nd));
        ck_assert_uint_eq(nd.key, NODES - n);
        snprintf(want, sizeof want, "k%u", NODES - n);
        ck_assert_str_eq(nd.name, want);
        o = nd.next;
        n++;
    }
    txn_abort(tx);
    ck_assert_uint_eq(n, NODES);
}

/* ---- reset model */

START_TEST(test_reset_refuses_and_resets)
{
    txn_pool *p = NULL;
    make_v1_pool();
    /* a newer version without a migration: refused, named, and not one
     * byte of the file written */
    refused_untouched(&layout_v2_no_migration, TXN_E_LAYOUTVER);
    const char *msg = txn_layout_error();
    ck_assert_msg(strstr(msg, "version 1") && strstr(msg, "version 2") && strstr(msg, NAME),
                  "message names both versions: %s", msg);
    /* the same version whose struct changed: refused */
    txn_layout changed = layout_v1;
    changed.types = v1_changed_types;
    refused_untouched(&changed, TXN_E_TYPESIG);
    ck_assert_msg(strstr(txn_layout_error(), "node_v1_changed"), "%s", txn_layout_error());
    /* another layout name: refused */
    txn_layout other = layout_v1;
    other.name = "another";
    refused_untouched(&other, TXN_E_LAYOUT);
    ck_assert_msg(strstr(txn_layout_error(), "another"), "%s", txn_layout_error());
    check_v1_intact(); /* nothing above touched the data */
    /* the reset option recreates it empty at version 2 */
    CHECK_OK(txn_layout_open(g_pool, &layout_v2_no_migration, &g_opts, TXN_LAYOUT_RESET, &p));
    uint32_t v = 0;
    txn_obj *head = (txn_obj *)1;
    txn *tx;
    CHECK_OK(txn_layout_version(p, &v));
    ck_assert_uint_eq(v, 2);
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_read(tx, txn_root(p), 0, &head, sizeof head));
    txn_abort(tx);
    ck_assert_ptr_null(head);
    txn_pool_close(p);
    /* now version 1 is the older one */
    refused_untouched(&layout_v1, TXN_E_LAYOUTVER);
    ck_assert_msg(strstr(txn_layout_error(), "newer"), "%s", txn_layout_error());
    remove_pool();
}
END_TEST

START_TEST(test_missing_pool)
{
    txn_pool *p;
    new_pool_name();
    CHECK_RC(txn_layout_open(g_pool, &layout_v1, NULL, 0, &p), TXN_E_NOENT);
    txn_layout bad = layout_v1;
    bad.version = 0;
    CHECK_RC(txn_layout_open(g_pool, &bad, NULL, TXN_LAYOUT_CREATE, &p), TXN_E_INVAL);
}
END_TEST

/* ---- manual model */

START_TEST(test_manual_migrates)
{
    txn_pool *p;
    make_v1_pool();
    g_ctl = (struct conv_ctl){.batch = 16};
    CHECK_OK(txn_layout_open(g_pool, &layout_v2, NULL, 0, &p));
    ck_assert_uint_eq(g_ctl.steps, (NODES + 15) / 16);
    check_v2(p);
    txn_pool_close(p);
    /* the next open of the new program runs nothing */
    g_ctl.steps = 0;
    CHECK_OK(txn_layout_open(g_pool, &layout_v2, NULL, 0, &p));
    ck_assert_uint_eq(g_ctl.steps, 0);
    check_v2(p);
    txn_pool_close(p);
    /* the old program is refused now */
    refused_untouched(&layout_v1, TXN_E_LAYOUTVER);
    remove_pool();
}
END_TEST

START_TEST(test_manual_resumes)
{
    txn_pool *p;
    make_v1_pool();
    g_ctl = (struct conv_ctl){.batch = 16, .fail_after = 5};
    CHECK_RC(txn_layout_open(g_pool, &layout_v2, NULL, 0, &p), TXN_E_IO);
    ck_assert_uint_eq(g_ctl.steps, 5);
    /* the next open resumes where the committed steps stopped */
    g_ctl.fail_after = 0;
    g_ctl.steps = 0;
    CHECK_OK(txn_layout_open(g_pool, &layout_v2, NULL, 0, &p));
    ck_assert_uint_eq(g_ctl.steps, (NODES + 15) / 16 - 5);
    check_v2(p);
    txn_pool_close(p);
    remove_pool();
}
END_TEST

/* The old program drops a half-built version and finds its data; the new
 * one then migrates from the start. */
static void drop_then_migrate(void)
{
    txn_pool *p;
    check_v1_intact();
    g_ctl = (struct conv_ctl){.batch = 16};
    CHECK_OK(txn_layout_open(g_pool, &layout_v2, NULL, 0, &p));
    ck_assert_uint_eq(g_ctl.steps, (NODES + 15) / 16);
    check_v2(p);
    txn_pool_close(p);
}

START_TEST(test_manual_dropped_by_old_program)
{
    txn_pool *p;
    make_v1_pool();
    g_ctl = (struct conv_ctl){.batch = 16, .fail_after = 7};
    CHECK_RC(txn_layout_open(g_pool, &layout_v2, NULL, 0, &p), TXN_E_IO);
    drop_then_migrate();
    remove_pool();
}
END_TEST

/* A step that crashes (the process ends) in the middle of its
 * transaction, after txn_migrate_alloc wrote the layout record (the head
 * of its list of new objects) and a new node. */
static int crash_step(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg)
{
    (void)scratch;
    (void)arg;
    txn_obj *o;
    struct node_v2 n = {.key = 7};
    int rc = txn_migrate_alloc(m, tx, sizeof n, &o);
    if (!rc)
        rc = txn_write(tx, o, 0, &n, sizeof n);
    _exit(rc ? 2 : 0);
}

static const txn_migration v1_to_v2_crash[] = {{1, sizeof(struct conv), crash_step, NULL, NULL}};
static const txn_layout layout_v2_crash = {NAME, 2, v2_types, 1, v1_to_v2_crash, 1, 16};

/* A pool left by a crash in a migration's transaction, with the layout
 * record among what it wrote: a refusal decides on the pool as recovery
 * will make it, yet writes nothing, recovery included (the interrupted
 * transaction waits for the next open). The programs that may open it
 * then find their data. */
START_TEST(test_reset_refusal_after_crash)
{
    txn_pool *p;
    make_v1_pool();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        txn_layout_open(g_pool, &layout_v2_crash, NULL, 0, &p);
        _exit(3); /* the step did not run */
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the crashing step did not run");
    refused_untouched(&layout_v2_no_migration, TXN_E_LAYOUTVER);
    txn_layout changed = layout_v1;
    changed.types = v1_changed_types;
    refused_untouched(&changed, TXN_E_TYPESIG);
    if (PMTX_LINKED_PERSISTENT) /* an engine without a log recovers nothing */
        drop_then_migrate();
    remove_pool();
}
END_TEST

/* ---- automatic model: node_v1 extended with a 64-bit key (level 1) and a
 * name (level 2), without a version change */
struct node_ext1 {
    uint64_t key64;
    TXN_EXTENDIBLE;
};
struct node_ext2 {
    char name[24];
    TXN_EXTENDIBLE;
};
static unsigned g_inits;

static int ext1_init(txn *tx, txn_obj *o, void *ext)
{
    struct node_ext1 *e = ext;
    uint32_t k;
    int rc = txn_read(tx, o, offsetof(struct node_v1, key), &k, sizeof k);
    e->key64 = (uint64_t)k << 32 | k;
    g_inits++;
    return rc;
}

static const txn_ext_type node_ext = TXN_EXT_TYPE(
    struct node_v1, TXN_EXT_LEVEL(struct node_ext1, ext1_init), TXN_EXT_LEVEL(struct node_ext2, NULL));

static txn_obj *nth_node(txn *tx, txn_pool *p, unsigned i)
{
    txn_obj *o;
    CHECK_OK(txn_read(tx, txn_root(p), 0, &o, sizeof o));
    while (i--)
        CHECK_OK(txn_read(tx, o, offsetof(struct node_v1, next), &o, sizeof o));
    return o;
}

static txn_obj *link_of(txn *tx, txn_obj *o, size_t off)
{
    txn_obj *l;
    CHECK_OK(txn_read(tx, o, off, &l, sizeof l));
    return l;
}

START_TEST(test_auto_lazy)
{
    txn_pool *p;
    txn *tx;
    make_v1_pool();
    CHECK_OK(txn_layout_open(g_pool, &layout_v1, NULL, 0, &p)); /* same version */
    g_inits = 0;
    /* first access to level 1 of node 3: allocated and initialised */
    CHECK_OK(txn_begin(p, &tx));
    txn_obj *n3 = nth_node(tx, p, 3);
    uint64_t k64 = 0;
    CHECK_OK(txn_ext_read(tx, &node_ext, n3, 1, offsetof(struct node_ext1, key64), &k64, 8));
    ck_assert_uint_eq(k64, (uint64_t)(NODES - 3) << 32 | (NODES - 3));
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(g_inits, 1);
    /* a peek computes a missing level without making it */
    CHECK_OK(txn_begin(p, &tx));
    txn_obj *n6 = nth_node(tx, p, 6);
    k64 = 0;
    CHECK_OK(txn_ext_peek(tx, &node_ext, n6, 1, offsetof(struct node_ext1, key64), &k64, 8));
    ck_assert_uint_eq(k64, (uint64_t)(NODES - 6) << 32 | (NODES - 6));
    ck_assert_ptr_null(link_of(tx, n6, node_ext.link_off));
    CHECK_OK(txn_ext_peek(tx, &node_ext, n3, 1, offsetof(struct node_ext1, key64), &k64, 8));
    ck_assert_uint_eq(k64, (uint64_t)(NODES - 3) << 32 | (NODES - 3));
    CHECK_RC(txn_ext_peek(tx, &node_ext, n6, 1, 8, &k64, 16), TXN_E_INVAL);
    CHECK_OK(txn_commit(tx));
    ck_assert_uint_eq(g_inits, 2);
    /* an aborted extension leaves no trace */
    CHECK_OK(txn_begin(p, &tx));
    txn_obj *n4 = nth_node(tx, p, 4);
    CHECK_OK(txn_ext_read(tx, &node_ext, n4, 1, 0, &k64, 8));
    txn_abort(tx);
    CHECK_OK(txn_begin(p, &tx));
    ck_assert_ptr_null(link_of(tx, nth_node(tx, p, 4), node_ext.link_off));
    /* the others were not touched */
    for (unsigned i = 0; i < 10; i++)
        if (i != 3)
            ck_assert_ptr_null(link_of(tx, nth_node(tx, p, i), node_ext.link_off));
    txn_obj *e1 = link_of(tx, n3, node_ext.link_off);
    ck_assert_ptr_nonnull(e1);
    /* level 2 of node 5: both levels made in one go, in order */
    char name[24] = "five";
    txn_obj *n5 = nth_node(tx, p, 5);
    CHECK_OK(txn_ext_write(tx, &node_ext, n5, 2, 0, name, sizeof name));
    CHECK_OK(txn_commit(tx));
    txn_pool_close(p);
    /* a later run finds them, initialises nothing again */
    g_inits = 0;
    CHECK_OK(txn_layout_open(g_pool, &layout_v1, NULL, 0, &p));
    CHECK_OK(txn_begin(p, &tx));
    n5 = nth_node(tx, p, 5);
    char got[24] = {0};
    CHECK_OK(txn_ext_read(tx, &node_ext, n5, 2, 0, got, sizeof got));
    ck_assert_str_eq(got, "five");
    CHECK_OK(txn_ext_read(tx, &node_ext, n5, 1, 0, &k64, 8));
    ck_assert_uint_eq(k64, (uint64_t)(NODES - 5) << 32 | (NODES - 5));
    ck_assert_uint_eq(g_inits, 0);
    n3 = nth_node(tx, p, 3);
    ck_assert_ptr_eq(link_of(tx, n3, node_ext.link_off), e1);
    /* a deep copy has its own extensions with the same contents */
    txn_obj *c, *e1c, *e2c, *e1o = link_of(tx, n5, node_ext.link_off);
    CHECK_OK(txn_ext_copy(tx, &node_ext, n5, &c));
    e1c = link_of(tx, c, node_ext.link_off);
    ck_assert_ptr_nonnull(e1c);
    ck_assert_ptr_ne(e1c, e1o);
    e2c = link_of(tx, e1c, node_ext.levels[0].link_off);
    ck_assert_ptr_nonnull(e2c);
    ck_assert_ptr_ne(e2c, link_of(tx, e1o, node_ext.levels[0].link_off));
    memset(got, 0, sizeof got);
    CHECK_OK(txn_read(tx, e2c, 0, got, sizeof got));
    ck_assert_str_eq(got, "five");
    CHECK_OK(txn_commit(tx));
    /* freeing frees the extensions */
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_ext_free(tx, &node_ext, c));
    CHECK_OK(txn_commit(tx));
    CHECK_OK(txn_begin(p, &tx)); /* a freed object cannot be freed again */
    CHECK_RC(txn_free(tx, e1c), TXN_E_INVAL);
    CHECK_RC(txn_free(tx, e2c), TXN_E_INVAL);
    CHECK_RC(txn_free(tx, c), TXN_E_INVAL);
    txn_abort(tx);
    /* bad levels */
    CHECK_OK(txn_begin(p, &tx));
    size_t at;
    CHECK_RC(txn_ext_get(tx, &node_ext, n5, 3, &c, &at), TXN_E_INVAL);
    CHECK_RC(txn_ext_get(tx, &node_ext, n5, 0, &c, &at), TXN_E_INVAL);
    txn_abort(tx);
    txn_pool_close(p);
    remove_pool();
}
END_TEST

static uint64_t bytes_now(void)
{
    txn_stats st;
    txn_stats_get(&st);
    return st.bytes_stored;
}

/* A write that makes its level stores the block once (the bytes written
 * laid over the init's image), the *_known calls skip the link read the
 * caller made already, and a stale NULL link never makes a second
 * extension. */
START_TEST(test_auto_known_and_merged)
{
    txn_pool *p;
    txn *tx;
    make_v1_pool();
    CHECK_OK(txn_layout_open(g_pool, &layout_v1, NULL, 0, &p));
    /* node 1: level 1 made by a get (the init's image alone); node 2: made
     * by a write of its whole payload: the same bytes stored (the init's
     * key of node 1, 299 twice, and k64 each end in two zero bytes) */
    CHECK_OK(txn_begin(p, &tx));
    txn_obj *n1 = nth_node(tx, p, 1), *n2 = nth_node(tx, p, 2), *e;
    size_t at;
    /* node 0 first: the allocator's refill, if any, is not counted below */
    CHECK_OK(txn_ext_get(tx, &node_ext, nth_node(tx, p, 0), 1, &e, &at));
    uint64_t b0 = bytes_now();
    CHECK_OK(txn_ext_get(tx, &node_ext, n1, 1, &e, &at));
    ck_assert_uint_eq(at, 0);
    uint64_t by_get = bytes_now() - b0;
    uint64_t k64 = 0x112233445566ull; /* as many nonzero bytes as the init's */
    g_inits = 0;
    b0 = bytes_now();
    CHECK_OK(txn_ext_write(tx, &node_ext, n2, 1, offsetof(struct node_ext1, key64), &k64, 8));
    uint64_t by_write = bytes_now() - b0;
    ck_assert_uint_eq(g_inits, 1); /* the init still ran */
    ck_assert_uint_eq(by_write, by_get);
    CHECK_OK(txn_commit(tx));
    /* level 2 (no init) made by a write in its middle: zeros around it */
    CHECK_OK(txn_begin(p, &tx));
    n2 = nth_node(tx, p, 2);
    txn_obj *l1 = link_of(tx, n2, node_ext.link_off);
    ck_assert_ptr_nonnull(l1);
    CHECK_OK(txn_ext_write_known(tx, &node_ext, n2, l1, 2, 4, "ab", 2));
    char got[24];
    memset(got, 0x55, sizeof got);
    CHECK_OK(txn_ext_read(tx, &node_ext, n2, 2, 0, got, sizeof got));
    for (unsigned i = 0; i < sizeof got; i++)
        ck_assert_int_eq(got[i], i == 4 ? 'a' : i == 5 ? 'b' : 0);
    CHECK_OK(txn_ext_read(tx, &node_ext, n2, 1, 0, &k64, 8));
    ck_assert_uint_eq(k64, 0x112233445566ull);
    CHECK_OK(txn_commit(tx));
    /* a stale NULL link: the write reads it again and uses the level that
     * exists; get_known with the real link finds the same block */
    CHECK_OK(txn_begin(p, &tx));
    n1 = nth_node(tx, p, 1);
    l1 = link_of(tx, n1, node_ext.link_off);
    ck_assert_ptr_nonnull(l1);
    k64 = 42;
    g_inits = 0;
    CHECK_OK(txn_ext_write_known(tx, &node_ext, n1, NULL, 1, 0, &k64, 8));
    ck_assert_uint_eq(g_inits, 0);
    ck_assert_ptr_eq(link_of(tx, n1, node_ext.link_off), l1);
    CHECK_OK(txn_ext_get_known(tx, &node_ext, n1, l1, 1, &e, &at));
    ck_assert_ptr_eq(e, l1);
    k64 = 0;
    CHECK_OK(txn_read(tx, l1, 0, &k64, 8));
    ck_assert_uint_eq(k64, 42);
    CHECK_RC(txn_ext_get_known(tx, &node_ext, n1, l1, 0, &e, &at), TXN_E_INVAL);
    CHECK_OK(txn_commit(tx));
    /* free_known frees the object and both levels */
    CHECK_OK(txn_begin(p, &tx));
    n2 = nth_node(tx, p, 2);
    txn_obj *n3 = nth_node(tx, p, 3);
    l1 = link_of(tx, n2, node_ext.link_off);
    txn_obj *l2 = link_of(tx, l1, node_ext.levels[0].link_off);
    ck_assert_ptr_nonnull(l2);
    CHECK_OK(txn_write(tx, nth_node(tx, p, 1), offsetof(struct node_v1, next), &n3, sizeof n3));
    CHECK_OK(txn_ext_free_known(tx, &node_ext, n2, l1));
    CHECK_OK(txn_commit(tx));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_RC(txn_free(tx, l2), TXN_E_INVAL);
    CHECK_RC(txn_free(tx, l1), TXN_E_INVAL);
    CHECK_RC(txn_free(tx, n2), TXN_E_INVAL);
    txn_abort(tx);
    txn_pool_close(p);
    remove_pool();
}
END_TEST

/* Unlink the list's first node, born extended, and free it with
 * txn_ext_free_known (its link: TXN_EXT_INLINE); the freed handle. */
static txn_obj *pop_born(txn_pool *p)
{
    txn *tx;
    CHECK_OK(txn_begin(p, &tx));
    txn_obj *n = nth_node(tx, p, 0), *next = nth_node(tx, p, 1);
    CHECK_OK(txn_write(tx, txn_root(p), 0, &next, sizeof next));
    CHECK_OK(txn_ext_free_known(tx, &node_ext, n, TXN_EXT_INLINE));
    CHECK_OK(txn_commit(tx));
    return n;
}

/* An object born extended (txn_ext_alloc): one block, its levels in it
 * behind TXN_EXT_INLINE links, no init run; every txn_ext_* call finds the
 * levels there, a copy keeps them inline, a free frees the one block. */
START_TEST(test_auto_born_extended)
{
    txn_pool *p;
    txn *tx;
    make_v1_pool();
    CHECK_OK(txn_layout_open(g_pool, &layout_v1, NULL, 0, &p));
    const size_t off1 = txn_ext_inline_off(&node_ext, 1), off2 = txn_ext_inline_off(&node_ext, 2);
    ck_assert_uint_eq(off1, sizeof(struct node_v1));
    ck_assert_uint_eq(off2, off1 + sizeof(struct node_ext1));
    CHECK_OK(txn_begin(p, &tx));
    txn_obj *n, *head = nth_node(tx, p, 0), *e;
    g_inits = 0;
    uint64_t b0 = bytes_now();
    CHECK_OK(txn_ext_alloc(tx, &node_ext, &n));
    ck_assert_uint_ge(txn_obj_size(p, n), off2 + sizeof(struct node_ext2));
    ck_assert_ptr_eq(link_of(tx, n, node_ext.link_off), TXN_EXT_INLINE);
    ck_assert_ptr_eq(link_of(tx, n, off1 + node_ext.levels[0].link_off), TXN_EXT_INLINE);
    ck_assert_ptr_null(link_of(tx, n, off2 + node_ext.levels[1].link_off));
    ck_assert_uint_eq(g_inits, 0);
    (void)b0;
    struct node_v1 nd = {77, 0, head, TXN_EXT_INLINE};
    CHECK_OK(txn_write(tx, n, 0, &nd, offsetof(struct node_v1, txn_ext_link_)));
    CHECK_OK(txn_write(tx, txn_root(p), 0, &n, sizeof n));
    size_t at = 0;
    CHECK_OK(txn_ext_get(tx, &node_ext, n, 2, &e, &at));
    ck_assert_ptr_eq(e, n);
    ck_assert_uint_eq(at, off2);
    CHECK_OK(txn_ext_get_known(tx, &node_ext, n, TXN_EXT_INLINE, 1, &e, &at));
    ck_assert_ptr_eq(e, n);
    ck_assert_uint_eq(at, off1);
    uint64_t k64 = 1;
    CHECK_OK(txn_ext_read(tx, &node_ext, n, 1, 0, &k64, 8)); /* born zeroed */
    ck_assert_uint_eq(k64, 0);
    k64 = 0xabcdef;
    CHECK_OK(txn_ext_write_known(tx, &node_ext, n, TXN_EXT_INLINE, 1, 0, &k64, 8));
    CHECK_OK(txn_ext_write(tx, &node_ext, n, 2, 0, "born", 5));
    /* beyond a level: refused, not spilled into the next one */
    char big[40] = {0};
    CHECK_RC(txn_ext_write(tx, &node_ext, n, 1, 8, big, 16), TXN_E_INVAL);
    CHECK_RC(txn_ext_read(tx, &node_ext, n, 2, 0, big, sizeof big), TXN_E_INVAL);
    ck_assert_uint_eq(g_inits, 0);
    CHECK_OK(txn_commit(tx));
    txn_pool_close(p);
    /* found again after a reopen, in place */
    CHECK_OK(txn_layout_open(g_pool, &layout_v1, NULL, 0, &p));
    CHECK_OK(txn_begin(p, &tx));
    n = nth_node(tx, p, 0);
    k64 = 0;
    CHECK_OK(txn_read(tx, n, off1, &k64, 8));
    ck_assert_uint_eq(k64, 0xabcdef);
    char got[24] = {0};
    CHECK_OK(txn_ext_read(tx, &node_ext, n, 2, 0, got, sizeof got));
    ck_assert_str_eq(got, "born");
    CHECK_OK(txn_ext_peek(tx, &node_ext, n, 1, 0, &k64, 8));
    ck_assert_uint_eq(k64, 0xabcdef);
    ck_assert_uint_eq(g_inits, 0);
    /* a deep copy: one block again, the same bytes */
    txn_obj *c;
    CHECK_OK(txn_ext_copy(tx, &node_ext, n, &c));
    ck_assert_ptr_ne(c, n);
    ck_assert_ptr_eq(link_of(tx, c, node_ext.link_off), TXN_EXT_INLINE);
    memset(got, 0, sizeof got);
    CHECK_OK(txn_read(tx, c, off2, got, sizeof got));
    ck_assert_str_eq(got, "born");
    CHECK_OK(txn_commit(tx));
    /* freeing: the one block (known link or not) */
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_ext_free(tx, &node_ext, c));
    CHECK_OK(txn_commit(tx));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_RC(txn_free(tx, c), TXN_E_INVAL);
    txn_abort(tx);
    n = pop_born(p);
    CHECK_OK(txn_begin(p, &tx));
    CHECK_RC(txn_free(tx, n), TXN_E_INVAL);
    txn_abort(tx);
    /* an inline link outside the object it was born in is corrupt */
    CHECK_OK(txn_begin(p, &tx));
    txn_obj *n7 = nth_node(tx, p, 7), *in = TXN_EXT_INLINE;
    CHECK_OK(txn_ext_get(tx, &node_ext, n7, 1, &e, &at));
    ck_assert_uint_eq(at, 0);
    CHECK_OK(txn_write(tx, e, node_ext.levels[0].link_off, &in, sizeof in));
    CHECK_RC(txn_ext_get(tx, &node_ext, n7, 2, &e, &at), TXN_E_CORRUPT);
    txn_abort(tx);
    /* born with level 1 by a program that knew only it; a later program
     * adds level 2 as a block of its own, linked from the inline level */
    const txn_ext_type one_level =
        TXN_EXT_TYPE(struct node_v1, TXN_EXT_LEVEL(struct node_ext1, ext1_init));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_ext_alloc(tx, &one_level, &n));
    ck_assert_ptr_null(link_of(tx, n, off1 + node_ext.levels[0].link_off));
    head = nth_node(tx, p, 0);
    nd = (struct node_v1){88, 0, head, TXN_EXT_INLINE};
    CHECK_OK(txn_write(tx, n, 0, &nd, offsetof(struct node_v1, txn_ext_link_)));
    CHECK_OK(txn_write(tx, txn_root(p), 0, &n, sizeof n));
    CHECK_OK(txn_commit(tx));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_OK(txn_ext_write(tx, &node_ext, n, 2, 0, "later", 6));
    txn_obj *l2 = link_of(tx, n, off1 + node_ext.levels[0].link_off);
    ck_assert_ptr_nonnull(l2);
    ck_assert_ptr_ne(l2, TXN_EXT_INLINE);
    CHECK_OK(txn_ext_get(tx, &node_ext, n, 2, &e, &at));
    ck_assert_ptr_eq(e, l2);
    ck_assert_uint_eq(at, 0);
    CHECK_OK(txn_ext_copy(tx, &node_ext, n, &c));
    txn_obj *l2c = link_of(tx, c, off1 + node_ext.levels[0].link_off);
    ck_assert_ptr_nonnull(l2c);
    ck_assert_ptr_ne(l2c, l2);
    memset(got, 0, sizeof got);
    CHECK_OK(txn_ext_read(tx, &node_ext, c, 2, 0, got, sizeof got));
    ck_assert_str_eq(got, "later");
    CHECK_OK(txn_ext_free(tx, &node_ext, c));
    CHECK_OK(txn_commit(tx));
    CHECK_OK(txn_begin(p, &tx));
    CHECK_RC(txn_free(tx, l2c), TXN_E_INVAL);
    CHECK_RC(txn_free(tx, c), TXN_E_INVAL);
    txn_abort(tx);
    pop_born(p);
    CHECK_OK(txn_begin(p, &tx));
    CHECK_RC(txn_free(tx, l2), TXN_E_INVAL); /* the later level went with it */
    txn_abort(tx);
    /* a type without the base's size cannot make one */
    txn_ext_type no_size = node_ext;
    no_size.base_size = 0;
    CHECK_OK(txn_begin(p, &tx));
    CHECK_RC(txn_ext_alloc(tx, &no_size, &n), TXN_E_INVAL);
    txn_abort(tx);
    txn_pool_close(p);
    remove_pool();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("retention");
    TCase *tc = test_tcase(s, "models", 0);
    tcase_add_test(tc, test_reset_refuses_and_resets);
    tcase_add_test(tc, test_missing_pool);
    tcase_add_test(tc, test_manual_migrates);
    tcase_add_test(tc, test_manual_resumes);
    tcase_add_test(tc, test_manual_dropped_by_old_program);
    tcase_add_test(tc, test_reset_refusal_after_crash);
    tcase_add_test(tc, test_auto_lazy);
    tcase_add_test(tc, test_auto_known_and_merged);
    tcase_add_test(tc, test_auto_born_extended);
    return test_run(s, CK_FORK_GETENV, "retention");
}
