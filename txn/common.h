/* common.h - helpers every engine library shares (common.c). */
#ifndef PMTX_COMMON_H
#define PMTX_COMMON_H

#include <stddef.h>

/* The file of a pool: `path` itself when absolute, else under
 * $TXN_POOL_DIR (default /dev/shm). TXN_E_INVAL if it does not fit. */
int pool_path(const char *path, char *out, size_t cap);

/* The first bytes of a libpmemobj pool file (PMDK's signature): pools of
 * the pmdk engine start with them, ours with POOL_MAGIC. */
#define PMDK_POOL_SIG "PMEMOBJ"

#endif
