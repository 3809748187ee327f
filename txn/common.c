/* common.c - what every engine library shares, including those with a
 * pool format of their own: error strings and pool path resolution. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "txn.h"

void defers_run(struct vec *defers, int outcome)
{
    struct vec run = *defers;
    if (!run.n)
        return;
    vec_init(defers, sizeof(struct tx_defer));
    for (size_t i = 0; i < run.n; i++) {
        struct tx_defer *d = vec_at(&run, i);
        if (d->when & outcome)
            d->fn(d->arg);
    }
    if (defers->cap == 0) { /* keep the memory for the next one */
        run.n = 0;
        *defers = run;
    } else {
        vec_free(&run);
    }
}

int pool_path(const char *path, char *out, size_t cap)
{
    const char *dir = getenv("TXN_POOL_DIR");
    int n = path[0] == '/' ? snprintf(out, cap, "%s", path)
                           : snprintf(out, cap, "%s/%s", dir && *dir ? dir : "/dev/shm", path);
    return n < 0 || (size_t)n >= cap ? TXN_E_INVAL : 0;
}

static const char *const err_text[] = {
    "invalid argument",
    "out of memory",
    "pool is full",
    "I/O error on the pool file",
    "pool file does not exist",
    "pool file already exists",
    "not a pmtx pool file",
    "unsupported pool format version",
    "pool is corrupt (checksum mismatch)",
    "pool file is truncated",
    "pool was created with another layout",
    "pool was written by another engine",
    "pool is busy (open elsewhere or its address range is taken)",
    "a transaction is already running on this thread",
    "too many threads for the pool's log slots",
    "transaction too large for its log",
    "object is open for writing by another transaction",
    "transaction has failed and can only abort",
    "not supported by this engine",
    "pool holds another layout version (no migration to this one)",
    "a persistent type differs from the one the pool recorded",
};

const char *txn_strerror(int err)
{
    if (err == 0)
        return "success";
    if (err <= TXN_E_FIRST && err >= TXN_E_LAST)
        return err_text[TXN_E_FIRST - err];
    if (err < 0)
        err = -err;
    return strerror(err);
}
