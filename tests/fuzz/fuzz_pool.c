/* fuzz_pool.c - libFuzzer target over pool open and recovery. Two template
 * images are made at start-up: one at a commit boundary and one in the
 * middle of a transaction (logs to roll back or replay). An input picks a
 * template, may truncate it, and overwrites bytes of its header, log slots
 * and chunk table; opening the result must return an error or a pool that
 * can be read and written. Crashes, hangs and sanitizer reports are bugs. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool.h"
#include "txn.h"

#define LAYOUT "pmtx-fuzz"
enum { SLOTS = 8 };

static char name[64], path[128];
static uint8_t *tmpl[2];
static size_t tsize, meta_end;

static uint8_t *snapshot(void)
{
    uint8_t *b = malloc(tsize);
    int fd = open(path, O_RDONLY);
    if (!b || fd < 0 || read(fd, b, tsize) != (ssize_t)tsize)
        abort(); /* set-up of the fuzzer itself failed */
    close(fd);
    return b;
}

static int step(txn_pool *p, uint64_t v)
{
    txn *tx;
    txn_obj *node, *old;
    int rc = txn_begin(p, &tx);
    for (int i = 0; !rc && i < SLOTS; i++)
        rc = txn_write_u64(tx, txn_root(p), 8 * (size_t)i, v);
    if (!rc)
        rc = txn_read(tx, txn_root(p), 8 * SLOTS, &old, sizeof old);
    if (!rc)
        rc = txn_alloc(tx, 64 + 40 * (v % 5), &node);
    if (!rc)
        rc = txn_write(tx, txn_root(p), 8 * SLOTS, &node, sizeof node);
    if (!rc && old)
        rc = txn_free(tx, old);
    if (rc)
        txn_abort(tx);
    return rc ? rc : txn_commit(tx);
}

/* libFuzzer ends with exit(): the pool file goes with the process */
static void remove_pool(void)
{
    unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(name, sizeof name, "pmtx-fuzz-%d.pool", (int)getpid());
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    atexit(remove_pool);
    txn_pool_opts o = {.size = 2u << 20, .root_size = 8 * (SLOTS + 1), .threads = 2};
    txn_pool *p;
    txn *tx;
    if (txn_pool_create(path, LAYOUT, &o, &p))
        abort();
    for (uint64_t v = 1; v <= 8; v++)
        if (step(p, v))
            abort();
    tsize = p->size;
    meta_end = POOL_FMT(p)->hdr->heap_off;
    tmpl[0] = snapshot();
    if (txn_begin(p, &tx) || txn_write_u64(tx, txn_root(p), 0, 99) ||
        txn_write_u64(tx, txn_root(p), 8, 99))
        abort();
    tmpl[1] = snapshot(); /* a crash in the middle of a transaction */
    txn_abort(tx);
    txn_pool_close(p);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    static uint8_t *img;
    if (n < 1)
        return 0;
    if (!img && !(img = malloc(tsize)))
        abort();
    memcpy(img, tmpl[data[0] & 1], tsize);
    size_t size = tsize;
    if ((data[0] & 6) == 6 && n > 1)
        size = tsize / 256 * data[1];
    for (size_t i = 1; i + 4 <= n; i += 4) {
        size_t at = ((size_t)data[i] | (size_t)data[i + 1] << 8 | (size_t)data[i + 2] << 16) %
                    meta_end;
        img[at] = data[i + 3];
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, img, size) != (ssize_t)size)
        abort();
    close(fd);
    txn_pool *p;
    if (txn_pool_open(path, LAYOUT, &p) == 0) {
        step(p, 1000);
        txn_pool_close(p);
    }
    return 0;
}
