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

/* CLIENT PAUSE: 1 if this request must wait (every command, or with
 * WRITE those that write or publish), until the pause ends or CLIENT
 * UNPAUSE; its ms left goes to *left. */
int command_paused(size_t argc, struct kv_slice *argv, long long *left);
/* ms until CLIENT PAUSE ends, 0 when none holds */
long long command_pause_left(void);

/* Free what MULTI and WATCH hold (the connection closes). */
void multi_free(struct conn *c);

#endif
