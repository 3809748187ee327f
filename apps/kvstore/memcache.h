/* memcache.h - memcached's text protocol on the store (memcache.c).
 * Above cmd.h, below the network (server.h). */
#ifndef KV_MEMCACHE_H
#define KV_MEMCACHE_H

#include <stddef.h>

#include "conn.h"

/* Run the memcached request at p[0, n) of connection c: the bytes it
 * took (0: the request is not complete yet). */
size_t mc_run(struct conn *c, const char *p, size_t n);

#endif
