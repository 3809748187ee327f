/* bank.c - transfers between accounts, each in one transaction; the
 * example txn-crashcheck checks (docs/crashcheck.md).
 *
 *   bank [--transfers N] [--threads T] POOL
 *                                 create POOL, make N transfers (by T
 *                                 threads, taking turns under one lock)
 *   bank --verify POOL            check a (recovered) POOL: exit 0 when
 *                                 consistent
 *
 * Transfer k moves an amount drawn from k between two accounts drawn from
 * k, and counts itself in the root, in the same transaction; k is the
 * count the root holds (the transfers are numbered in the order they
 * commit). It is acknowledged (txn_check_acked) once durable: after its
 * commit and txn_sync (which incll needs, and the other engines return
 * from at once). With threads, all of it under the bank's lock: the
 * transactions of a pool are not isolated from each other (txn.h), the
 * program orders its writers.
 * --verify replays the transfers the pool counts from the initial balances
 * and finds the same balances, the same total, and at least every
 * transfer acknowledged before the crash (TXN_CHECK_ACKED, set by
 * txn-crashcheck), and names the accounts' object, all it reaches, to the
 * leak check (txn_check_reach).
 *
 * Broken on purpose when built with one of (the checker must find them):
 *   BANK_SPLIT   a transfer in two transactions: the debit, then the credit
 *   BANK_RO      the credit stored through txn_open(TXN_RO)'s pointer
 *   BANK_NOSYNC  acknowledged after the commit, without txn_sync (incll)
 *   BANK_UNLOCK  with threads, the lock released before the commit:
 *                the next transfer reads this one's uncommitted writes
 *   BANK_LEAK    the new balances in a new object, allocated in one
 *                transaction and linked (the old one freed) in a second:
 *                a crash between them leaks it (the balances stay right;
 *                txn_check_reach in --verify finds it)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txn.h"
#include "txn_check.h"

#define ACCOUNTS 16
#define START 1000u
#define LAYOUT "bank"

/* The root: the transfers made, and the accounts' object. */
struct root {
    uint64_t count;
    txn_obj *accounts; /* ACCOUNTS balances, u64 each */
};

static uint64_t draw(uint64_t k)
{
    uint64_t z = k * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Transfer k: from, to (different) and amount; none if `from` is short. */
static void transfer_of(uint64_t k, const uint64_t *bal, unsigned *from, unsigned *to,
                        uint64_t *amount)
{
    uint64_t r = draw(k);
    *from = (unsigned)(r % ACCOUNTS);
    *to = (unsigned)((*from + 1 + (r >> 8) % (ACCOUNTS - 1)) % ACCOUNTS);
    *amount = 1 + (r >> 16) % 200;
    if (bal[*from] < *amount)
        *amount = 0;
}

#define TRY(x)                                                                           \
    do {                                                                                 \
        int rc_ = (x);                                                                   \
        if (rc_) {                                                                       \
            fprintf(stderr, "bank: %s: %s\n", #x, txn_strerror(rc_));                    \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

static int setup(txn_pool *p)
{
    txn *tx;
    struct root r = {0, NULL};
    uint64_t bal[ACCOUNTS];
    for (int i = 0; i < ACCOUNTS; i++)
        bal[i] = START;
    TRY(txn_begin(p, &tx));
    TRY(txn_alloc(tx, sizeof bal, &r.accounts));
    TRY(txn_write(tx, r.accounts, 0, bal, sizeof bal));
    TRY(txn_write(tx, txn_root(p), 0, &r, sizeof r));
    TRY(txn_commit(tx));
    return 0;
}

/* The bank's lock: the transfers of its threads one at a time. */
static pthread_mutex_t bank_lock = PTHREAD_MUTEX_INITIALIZER;

/* A transfer, under bank_lock; *locked cleared where it lets go of it. */
static int transfer(txn_pool *p, int *locked)
{
    txn *tx;
    struct root r;
    uint64_t bal[ACCOUNTS], amount, k;
    unsigned from, to;
    (void)locked; /* BANK_UNLOCK's */
    TRY(txn_begin(p, &tx));
    TRY(txn_read(tx, txn_root(p), 0, &r, sizeof r));
    TRY(txn_read(tx, r.accounts, 0, bal, sizeof bal));
    k = r.count;
    transfer_of(k, bal, &from, &to, &amount);
#ifdef BANK_LEAK
    txn_obj *fresh;
    bal[from] -= amount;
    bal[to] += amount;
    TRY(txn_alloc(tx, sizeof bal, &fresh));
    TRY(txn_write(tx, fresh, 0, bal, sizeof bal));
    TRY(txn_commit(tx)); /* broken: allocated, reached by nothing */
    TRY(txn_begin(p, &tx));
    struct root nr = {k + 1, fresh};
    TRY(txn_write(tx, txn_root(p), 0, &nr, sizeof nr));
    TRY(txn_free(tx, r.accounts));
#else
    TRY(txn_write_u64(tx, r.accounts, 8 * from, bal[from] - amount));
#endif
#ifdef BANK_SPLIT
    TRY(txn_commit(tx)); /* broken: the debit is durable on its own */
    TRY(txn_begin(p, &tx));
#endif
#if defined(BANK_RO)
    uint64_t *a = txn_open(tx, r.accounts, TXN_RO);
    if (!a)
        TRY(txn_last_error(tx));
    a[to] += amount; /* broken: a store the transaction does not know of */
#elif !defined(BANK_LEAK)
    TRY(txn_write_u64(tx, r.accounts, 8 * to, bal[to] + amount));
#endif
#ifndef BANK_LEAK
    TRY(txn_write_u64(tx, txn_root(p), 0, k + 1));
#endif
#ifdef BANK_UNLOCK
    pthread_mutex_unlock(&bank_lock); /* broken: the transaction is not done */
    *locked = 0;
#endif
    TRY(txn_commit(tx));
#ifndef BANK_NOSYNC
    TRY(txn_sync(p));
#endif
    txn_check_acked(k + 1); /* the transfer's "done" to the outside world */
    return 0;
}

static int one_transfer(txn_pool *p)
{
    int locked = 1;
    pthread_mutex_lock(&bank_lock);
    int rc = transfer(p, &locked);
    if (locked)
        pthread_mutex_unlock(&bank_lock);
    return rc;
}

struct teller {
    txn_pool *p;
    uint64_t n; /* transfers to make */
    int rc;
};

static void *teller(void *arg)
{
    struct teller *t = arg;
    for (uint64_t i = 0; !t->rc && i < t->n; i++)
        t->rc = one_transfer(t->p);
    return NULL;
}

static int verify(const char *path)
{
    txn_pool *p;
    txn *tx;
    struct root r;
    uint64_t bal[ACCOUNTS], want[ACCOUNTS], total = 0, acked = 0;
    const char *a = getenv("TXN_CHECK_ACKED");
    if (a)
        acked = strtoull(a, NULL, 10);
    TRY(txn_pool_open(path, LAYOUT, &p));
    TRY(txn_begin(p, &tx));
    TRY(txn_read(tx, txn_root(p), 0, &r, sizeof r));
    int bad = 0;
    if (!r.accounts) { /* the crash came before the accounts were made */
        txn_abort(tx);
        txn_check_reach(p, NULL); /* the root reaches nothing: no object */
        txn_pool_close(p);
        if (r.count || acked) {
            fprintf(stderr, "bank: no accounts, yet %llu transfers counted, %llu acknowledged\n",
                    (unsigned long long)r.count, (unsigned long long)acked);
            return 1;
        }
        return 0;
    }
    TRY(txn_read(tx, r.accounts, 0, bal, sizeof bal));
    txn_abort(tx);
    txn_check_reach(p, r.accounts); /* all the bank reaches: the leak check */
    txn_pool_close(p);
    for (int i = 0; i < ACCOUNTS; i++) {
        want[i] = START;
        total += bal[i];
    }
    for (uint64_t k = 0; k < r.count; k++) {
        unsigned from, to;
        uint64_t amount;
        transfer_of(k, want, &from, &to, &amount);
        want[from] -= amount;
        want[to] += amount;
    }
    if (total != (uint64_t)ACCOUNTS * START) {
        fprintf(stderr, "bank: total %llu, not %llu\n", (unsigned long long)total,
                (unsigned long long)ACCOUNTS * START);
        bad = 1;
    }
    if (memcmp(bal, want, sizeof bal)) {
        fprintf(stderr, "bank: the balances are not those of the %llu transfers counted\n",
                (unsigned long long)r.count);
        bad = 1;
    }
    if (r.count < acked) {
        fprintf(stderr, "bank: %llu transfers in the pool, %llu were acknowledged\n",
                (unsigned long long)r.count, (unsigned long long)acked);
        bad = 1;
    }
    return bad;
}

#define MAX_TELLERS 16

int main(int argc, char **argv)
{
    uint64_t n = 100, threads = 1;
    int i = 1;
    if (argc == 3 && !strcmp(argv[1], "--verify"))
        return verify(argv[2]);
    for (; i + 1 < argc - 1; i += 2) {
        if (!strcmp(argv[i], "--transfers"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--threads"))
            threads = strtoull(argv[i + 1], NULL, 10);
        else
            break;
    }
    if (i != argc - 1 || threads < 1 || threads > MAX_TELLERS) {
        fprintf(stderr, "usage: bank [--transfers N] [--threads 1..%d] POOL | "
                        "bank --verify POOL\n", MAX_TELLERS);
        return 2;
    }
    txn_pool *p;
    /* a log slot a thread, and the main thread's; the smallest pool, and one
     * that does not grow: txn-crashcheck writes the whole file for each crash
     * image, and a pool that may grow to TXN_POOL_MAX has a chunk table of
     * 16 MiB (a hole) */
    txn_pool_opts o = {.size = 0, .root_size = sizeof(struct root),
                       .threads = threads < 4 ? 4 : (unsigned)threads + 1};
    o.size = o.max_size = txn_pool_min_size(&o);
    TRY(txn_pool_create(argv[i], LAYOUT, &o, &p));
    int rc = setup(p);
    struct teller t[MAX_TELLERS];
    pthread_t tid[MAX_TELLERS];
    uint64_t started = 0;
    for (uint64_t k = 0; k < threads; k++) /* n in shares, the first ones larger */
        t[k] = (struct teller){p, n / threads + (k < n % threads), 0};
    if (!rc && threads == 1)
        teller(&t[0]);
    else
        for (; !rc && started < threads; started++)
            if (pthread_create(&tid[started], NULL, teller, &t[started])) {
                fprintf(stderr, "bank: cannot start a thread\n");
                rc = 1;
            }
    for (uint64_t k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
    for (uint64_t k = 0; k < threads; k++)
        rc |= t[k].rc;
    txn_pool_close(p);
    return rc;
}
