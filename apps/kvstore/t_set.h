/* t_set.h - the set commands (t_set.c): their entries of the command
 * table, and what OBJECT ENCODING says of a set's record. */
#ifndef KV_T_SET_H
#define KV_T_SET_H

#include <stddef.h>

#include "cmd.h"

extern const struct command set_commands[];
extern const size_t set_ncommands;

/* OBJECT ENCODING's answer for a set's stored record v of n bytes:
 * "intset" or "hashtable", as Redis 7.0 would answer for the same set */
const char *set_encoding(const char *v, size_t n);

#endif
