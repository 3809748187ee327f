/* commands.h - the dispatcher (commands.c): the command table's index,
 * running a request, MULTI's state. Above the command files (t_string.h,
 * keys.h, t_hash.h), below the network (server.h). */
#ifndef KV_COMMANDS_H
#define KV_COMMANDS_H

#include <stddef.h>

#include "conn.h"

/* Index the command table (once, before the first request): 0, or -1
 * when a name is there twice, the index is too small, or an entry has no
 * arity or a key spec without a step. */
int commands_init(void);

/* Run one request (argv[0] is the command name); replies go to c->out. */
void command_run(struct conn *c, size_t argc, struct kv_slice *argv);

/* Free what MULTI and WATCH hold (the connection closes). */
void multi_free(struct conn *c);

#endif
