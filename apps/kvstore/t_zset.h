/* t_zset.h - the sorted set commands (t_zset.c): their entries of the
 * command table. */
#ifndef KV_T_ZSET_H
#define KV_T_ZSET_H

#include <stddef.h>

#include "cmd.h"

extern const struct command zset_commands[];
extern const size_t zset_ncommands;

#endif
