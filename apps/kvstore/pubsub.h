/* pubsub.h - Redis's Pub/Sub (pubsub.c): SUBSCRIBE, PSUBSCRIBE, their
 * UNSUBSCRIBEs, PUBLISH and PUBSUB, and what the dispatcher and the
 * network need of a subscribed connection. Not persistent, as in Redis: a
 * restart forgets every subscription. */
#ifndef KV_PUBSUB_H
#define KV_PUBSUB_H

#include <stddef.h>

#include "cmd.h"

extern const struct command pubsub_commands[];
extern const size_t pubsub_ncommands;

/* c subscribed to a channel or a pattern: only the commands flagged
 * CMD_PUBSUB_OK run (RESP2's rule). Owner thread only. */
static inline int pubsub_subscribed(const struct conn *c)
{
    return c->ps != NULL;
}

/* Leave every channel and pattern and drop undelivered messages: at close
 * and RESET. After it returns no publisher reaches c. */
void pubsub_forget(struct conn *c);

/* Inside EXEC (commands.c): PUBLISH counts its receivers but sends only at
 * pubsub_release(c, 1), when the block has committed; pubsub_release(c, 0)
 * drops what was held (the block rolled back). Owner thread. */
void pubsub_hold(struct conn *c);
void pubsub_release(struct conn *c, int send);

/* c was killed (CLIENT KILL, another thread): from now on it receives
 * nothing and counts for no channel, until its owner closes it. */
void pubsub_kill(struct conn *c);

/* How many channels, patterns and shard channels c is subscribed to (any
 * thread: CLIENT LIST's sub=, psub= and ssub=; takes Pub/Sub's lock, so never call it under it). */
void pubsub_counts(struct conn *c, size_t *channels, size_t *patterns, size_t *shards);

/* Move the messages published to c into c->out, in order (owner thread:
 * the network's wake-up, and before each request of a subscribed
 * connection, so that a reply never overtakes an earlier message). A
 * subscriber that let messages pile up past Redis's pubsub output limit
 * (32 MiB) is closed, as Redis closes it. */
void pubsub_drain(struct conn *c);

#endif
