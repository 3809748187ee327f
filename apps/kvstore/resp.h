/* resp.h - an incremental parser of RESP2 requests (arrays of bulk strings,
 * and inline commands), with no dependency on the store or the network so
 * that it links alone into its fuzzer (tests/fuzz/fuzz_resp.c).
 *
 * The caller keeps the bytes of the request being parsed contiguous in one
 * buffer, starting at the request's first byte, and calls resp_parse()
 * each time more bytes arrive. The parser remembers how far it got, so a
 * 100 MiB bulk arriving in 16 KiB reads costs O(reads), not O(reads^2);
 * its arguments are (offset, length) pairs into that buffer, so the caller
 * may move or grow the buffer between calls. */
#ifndef KV_RESP_H
#define KV_RESP_H

#include <stddef.h>

/* What a client may send; a request over a limit is a protocol error. */
struct resp_limits {
    size_t max_bulk;   /* bytes of one argument */
    size_t max_args;   /* arguments of one request */
    size_t max_inline; /* bytes of an inline command line, or of any
                          header line ("*<n>", "$<n>") */
};

struct resp_arg {
    size_t off; /* from the request's first byte */
    size_t len;
};

enum resp_status {
    RESP_ERROR = -1, /* protocol error: `err` says which; close the client */
    RESP_MORE = 0,   /* incomplete: call again with more bytes */
    RESP_DONE = 1,   /* a request of argc >= 1 arguments, `pos` bytes long */
    RESP_EMPTY = 2,  /* `pos` bytes that hold no command (blank line, "*0") */
};

struct resp_parser {
    size_t pos;         /* bytes of the request parsed so far */
    long long nargs;    /* arguments announced by "*<n>", -1 before it */
    long long bulk;     /* length of the bulk being read, -1 before "$" */
    size_t argc;        /* arguments complete */
    struct resp_arg *argv;
    size_t cap;         /* of argv */
    size_t need;        /* hint: bytes the current argument still needs */
    const char *err;    /* on RESP_ERROR: a static message, or errbuf */
    char errbuf[48];
};

void resp_init(struct resp_parser *r);

/* Forget the current request (keeps argv's memory). */
void resp_reset(struct resp_parser *r);

void resp_free(struct resp_parser *r);

/* Parse the request whose first `len` bytes are at `buf` (the same request,
 * grown, since the last resp_reset). A complete inline command is
 * rewritten in place, its quotes and escapes removed; bytes of an array
 * request are left as they are. */
enum resp_status resp_parse(struct resp_parser *r, char *buf, size_t len,
                            const struct resp_limits *lim);

#endif
