/* t_string.h - the string commands (t_string.c): their entries of the
 * command table. (Not strings.h: that name is the C library's, and a
 * program built with this folder on its include path would take this one
 * for <strings.h>.) */
#ifndef KV_T_STRING_H
#define KV_T_STRING_H

#include <stddef.h>

#include "cmd.h"

extern const struct command string_commands[];
extern const size_t string_ncommands;

#endif
