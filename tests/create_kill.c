/* create_kill.c - a pool's creation SIGKILLed at random moments, then a
 * start that opens the pool or creates it when there is none, as the
 * key-value store's does: every start succeeds and finds an empty pool
 * with its root (issue #41, item 5). create_kill.h runs the rounds;
 * scripts/create_kill.sh runs 200 of them per engine. Built for the
 * persistent engines. */
#include <check.h>

#include "create_kill.h"

#define TAG "ckill"
#define LAYOUT "create-kill"
#define ROOT_SIZE 256u
#define POOL_SIZE ((size_t)32 << 20)

static const txn_pool_opts opts = {.size = POOL_SIZE, .root_size = ROOT_SIZE};

static int make(const char *name)
{
    txn_pool *p;
    if (txn_pool_create(name, LAYOUT, &opts, &p))
        return -1;
    txn_pool_close(p);
    return 0;
}

static int start(const char *name, char *why, size_t cap)
{
    txn_pool *p;
    int rc = txn_pool_open(name, LAYOUT, &p);
    const char *how = "open";
    if (rc == TXN_E_NOENT) {
        rc = txn_pool_create(name, LAYOUT, &opts, &p);
        how = "create";
    }
    if (rc) {
        snprintf(why, cap, "%s: %s", how, txn_pool_strerror(rc));
        return 1;
    }
    unsigned char r[ROOT_SIZE], zero[ROOT_SIZE] = {0};
    txn *tx;
    txn_obj *root = txn_root(p);
    if (!root || txn_obj_size(p, root) < ROOT_SIZE) {
        snprintf(why, cap, "%s: no root of %u bytes", how, ROOT_SIZE);
        rc = 1;
    } else if ((rc = txn_begin(p, &tx)) || (rc = txn_read(tx, root, 0, r, sizeof r)) ||
               (rc = txn_commit(tx)) || memcmp(r, zero, sizeof r)) {
        snprintf(why, cap, "%s: the root cannot be read or is not empty (%s)", how,
                 txn_strerror(rc));
        rc = 1;
    }
    txn_pool_close(p);
    return rc;
}

START_TEST(test_create_kill)
{
    struct ck_target t = {txn_engine_name(), make, start};
    create_kill_rounds(&t, TAG);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("create_kill");
    TCase *tc = test_tcase(s, "kills", CREATE_KILL_SECONDS);
    tcase_add_test(tc, test_create_kill);
    return test_run(s, CK_FORK_GETENV, TAG);
}
