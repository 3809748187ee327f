/* reply.h - growable byte buffers and RESP2 reply encoding: the lowest
 * layer of the store's files with resp.h and store.h (it depends on none
 * of the others). */
#ifndef KV_REPLY_H
#define KV_REPLY_H

#include <stddef.h>

/* A growable byte buffer: requests in, replies out. */
struct buf {
    char *p;
    size_t len, cap;
    int oom; /* an allocation failed: the connection must close */
};

int buf_reserve(struct buf *b, size_t n); /* room for n more bytes; -1 */
void buf_add(struct buf *b, const void *p, size_t n);
void buf_free(struct buf *b);

/* RESP2 replies */
void reply_simple(struct buf *b, const char *s);       /* +s */
void reply_error(struct buf *b, const char *fmt, ...)  /* -ERR ..., CR/LF
                                                          in args become ' ' */
    __attribute__((format(printf, 2, 3)));
void reply_int(struct buf *b, long long v);            /* :v */
void reply_bulk(struct buf *b, const char *p, size_t n); /* $n p */
void reply_nil(struct buf *b);                         /* $-1 */
void reply_array(struct buf *b, size_t n);             /* *n (then n items) */

#endif
