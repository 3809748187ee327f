/* t_list.h - the list commands (t_list.c): their entries of the command
 * table. */
#ifndef KV_T_LIST_H
#define KV_T_LIST_H

#include <stddef.h>

#include "cmd.h"

extern const struct command list_commands[];
extern const size_t list_ncommands;

#endif
