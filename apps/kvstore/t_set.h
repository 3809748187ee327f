/* t_set.h - the set commands (t_set.c): their entries of the command
 * table. */
#ifndef KV_T_SET_H
#define KV_T_SET_H

#include <stddef.h>

#include "cmd.h"

extern const struct command set_commands[];
extern const size_t set_ncommands;

#endif
