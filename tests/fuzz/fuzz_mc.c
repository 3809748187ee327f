/* fuzz_mc.c - libFuzzer target over the kvstore's memcached protocols (text and binary)
 * (apps/kvstore/memcache.c), with the server's code and a real store on
 * undo under it: the sibling of fuzz_resp.c.
 *
 * Each input is a byte stream from one client, run twice as the server
 * runs it: all at once, and arriving in chunks (sizes drawn from the
 * input), each call seeing exactly the bytes received so far in a buffer
 * of that size (so AddressSanitizer catches a read past them). How the
 * stream is cut into requests does not depend on the store's contents, so
 * both runs must consume the same requests, of the same lengths, and stop
 * (quit, a line too long) at the same place; no request may take more
 * than it was given, and the store must pass kv_check after each run.
 * Small limits (1,000-byte items, 64 KiB of keys before eviction) make
 * the limit paths reachable. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcache.h"

static char path[64];

static void close_store(void)
{
    kv_close(srv.kv);
    unlink(path);
}

static void mix(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * 0x100000001b3ULL;
}

static void open_store(void)
{
    struct kv_opts o = {.pool_size = 32u << 20, .threads = 2};
    snprintf(path, sizeof path, "/dev/shm/fuzz-mc-%d.pool", (int)getpid());
    unlink(path);
    int rc = kv_open(path, &o, &srv.kv);
    if (rc) {
        fprintf(stderr, "fuzz-mc: %s: %s\n", path, kv_strerror(rc));
        abort();
    }
    srv.lim.max_bulk = 1000;
    srv.max_memory = 64 * 1024;
    srv.max_clients = 10;
    srv.threads = 1;
    srv.mc_port = 1;
    atexit(close_store);
}

/* The requests of data[0, size), arriving chunk(i) bytes at a time (all
 * at once when chunks == NULL): a hash of their lengths. */
static uint64_t run(const uint8_t *data, size_t size, const uint8_t *chunks, size_t nchunks)
{
    struct conn c;
    memset(&c, 0, sizeof c);
    c.mc = 1;
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t start = 0, have = chunks ? 0 : size, k = 0, skipped = 0;
    while (!c.closing) {
        size_t avail = have - start, used = 0;
        int skipping = c.mc_swallow > 0; /* a refused data block: taken as it
                                            arrives, counted as one */
        if (avail) {
            char *copy = malloc(avail); /* exactly what has arrived */
            memcpy(copy, data + start, avail);
            used = mc_run(&c, copy, avail);
            free(copy);
        }
        if (used > avail)
            abort(); /* a request never takes more than it was given */
        c.out.len = 0; /* the replies: not compared (they depend on the store) */
        if (used) {
            if (skipping) {
                skipped += used;
            } else {
                if (skipped)
                    mix(&h, &skipped, sizeof skipped);
                skipped = 0;
                mix(&h, &used, sizeof used);
            }
            start += used;
            continue;
        }
        if (have == size)
            break;
        size_t n = nchunks ? 1 + chunks[k++ % nchunks] % 23 : size;
        have = have + n < size ? have + n : size;
    }
    mix(&h, &skipped, sizeof skipped);
    mix(&h, &c.closing, sizeof c.closing);
    mix(&h, &start, sizeof start);
    buf_free(&c.out);
    static FILE *quiet;
    if (!quiet && !(quiet = fopen("/dev/null", "w")))
        abort();
    if (kv_check(srv.kv, quiet)) {
        kv_check(srv.kv, stderr); /* again, to say what is wrong */
        abort();
    }
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv.kv)
        open_store();
    size_t nchunks = size < 8 ? size : 8;
    uint64_t whole = run(data, size, NULL, 0);
    if (!nchunks)
        return 0;
    uint64_t parts = run(data, size, data, nchunks);
    if (whole != parts) {
        fprintf(stderr, "the stream was cut into other requests in chunks\n");
        abort();
    }
    return 0;
}
