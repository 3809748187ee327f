/* t_sort.h - SORT and SORT_RO (t_sort.c): their entries of the command
 * table. */
#ifndef KV_T_SORT_H
#define KV_T_SORT_H

#include <stddef.h>

#include "cmd.h"

extern const struct command sort_commands[];
extern const size_t sort_ncommands;

#endif
