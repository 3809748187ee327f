/* fuzz_resp.c - libFuzzer target over the kvstore's RESP parser
 * (apps/kvstore/resp.c, which links alone).
 *
 * Each input is parsed twice, as the server sees it: all at once, and
 * growing by chunks (sizes drawn from the input) the way reads arrive, each
 * call seeing exactly the bytes received so far in a buffer of that size (so
 * AddressSanitizer catches any read past them). Both must yield the same
 * requests and the same error, and every request must lie inside the bytes
 * it consumed. Small limits make the limit paths reachable. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"

static const struct resp_limits lim = {.max_bulk = 1000, .max_args = 50, .max_inline = 300};

/* What a parse produced: a hash of every request's arguments and outcome. */
struct outcome {
    uint64_t hash;
    unsigned requests;
    const char *err;
};

static void mix(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * 0x100000001b3ULL;
}

/* Check one finished request and fold it into the outcome. */
static void take(struct outcome *o, const struct resp_parser *p, enum resp_status st,
                 const char *req, size_t avail)
{
    if (p->pos == 0 || p->pos > avail)
        abort(); /* a request consumes something, never more than given */
    o->requests++;
    mix(&o->hash, &st, sizeof st);
    if (st != RESP_DONE)
        return;
    if (p->argc == 0)
        abort();
    for (size_t i = 0; i < p->argc; i++) {
        const struct resp_arg *a = &p->argv[i];
        if (a->off > p->pos || a->len > p->pos - a->off || a->len > lim.max_bulk)
            abort();
        mix(&o->hash, &a->len, sizeof a->len);
        mix(&o->hash, req + a->off, a->len);
    }
}

/* Parse data[0, size) with the bytes arriving `chunk(i)` at a time (all
 * at once when chunks == NULL). */
static struct outcome run(const uint8_t *data, size_t size, const uint8_t *chunks, size_t nchunks)
{
    struct outcome o = {0xcbf29ce484222325ULL, 0, NULL};
    struct resp_parser p;
    resp_init(&p);
    size_t start = 0, have = chunks ? 0 : size, k = 0;
    for (;;) {
        size_t avail = have - start;
        char *copy = malloc(avail ? avail : 1); /* exactly what has arrived */
        memcpy(copy, data + start, avail);
        enum resp_status st = resp_parse(&p, copy, avail, &lim);
        if (st == RESP_DONE || st == RESP_EMPTY) {
            take(&o, &p, st, copy, avail);
            start += p.pos;
            resp_reset(&p);
        }
        free(copy);
        if (st == RESP_ERROR) {
            if (!p.err)
                abort();
            o.err = p.err;
            break;
        }
        if (st == RESP_MORE) {
            if (have == size)
                break;
            size_t c = nchunks ? 1 + chunks[k++ % nchunks] % 23 : size;
            have = have + c < size ? have + c : size;
        }
    }
    resp_free(&p);
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the first bytes pick the chunk sizes; all bytes are the stream */
    size_t nchunks = size < 8 ? size : 8;
    struct outcome whole = run(data, size, NULL, 0);
    struct outcome parts = run(data, size, data, nchunks ? nchunks : 0);
    if (!nchunks)
        return 0;
    if (whole.hash != parts.hash || whole.requests != parts.requests || whole.err != parts.err) {
        fprintf(stderr, "whole: %u requests, err %s; in chunks: %u requests, err %s\n",
                whole.requests, whole.err ? whole.err : "-", parts.requests,
                parts.err ? parts.err : "-");
        abort();
    }
    return 0;
}
