/* keys.h - the commands on keys of any type (keys.c): their entries of
 * the command table. */
#ifndef KV_KEYS_H
#define KV_KEYS_H

#include <stddef.h>

#include "cmd.h"

extern const struct command key_commands[];
extern const size_t key_ncommands;

#endif
