/* server.h - the network (server.c): listening, serving connections and
 * the threads that do, active expiry. The top of the store's files with
 * main.c: it runs requests through commands.h and memcache.h. */
#ifndef KV_SERVER_H
#define KV_SERVER_H

#include "conn.h"

/* server.c: listen on srv.unix_path / srv.port (0 or an error message's
 * return -1), then serve until SIGTERM, SIGINT or SHUTDOWN; every thread
 * that ran transactions has exited when server_run returns. */
int server_listen(void);
/* Lower srv.max_clients to what the open file limit allows, saying so on
 * stderr; call before the store opens (log slots follow the clients). */
void server_cap_clients(void);
int server_run(void);
void server_unlisten(void);

#endif
