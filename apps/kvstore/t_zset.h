/* t_zset.h - the sorted set commands (t_zset.c): their entries of the
 * command table, and what OBJECT ENCODING says of one. */
#ifndef KV_T_ZSET_H
#define KV_T_ZSET_H

#include <stddef.h>

#include "cmd.h"

extern const struct command zset_commands[];
extern const size_t zset_ncommands;

/* OBJECT ENCODING's answer for a sorted set's stored value v of n bytes:
 * "listpack" (packed) or "skiplist" (the large form, zbtree.c) */
const char *zset_encoding(const char *v, size_t n);

#endif
