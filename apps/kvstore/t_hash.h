/* t_hash.h - the hash commands (t_hash.c): their entries of the command
 * table. */
#ifndef KV_T_HASH_H
#define KV_T_HASH_H

#include <stddef.h>

#include "cmd.h"

extern const struct command hash_commands[];
extern const size_t hash_ncommands;

#endif
