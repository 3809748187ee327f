/* config.h - CONFIG GET/SET (config.c): the parameters clients and test
 * suites read and set, in one table, and the values the command files
 * read. Beside the command files, above cmd.h. */
#ifndef KV_CONFIG_H
#define KV_CONFIG_H

#include <stddef.h>

#include "cmd.h"

/* The settable parameters' values: CONFIG SET writes them while commands
 * read them on other threads; no lock guards them (each field is atomic,
 * and a command reads a field once). Their defaults are in config.c's
 * table. */
struct kv_config {
    _Atomic long long set_max_intset_entries;   /* set.c: an intset's most members */
    _Atomic long long hash_max_listpack_entries;
    _Atomic long long hash_max_listpack_value;
    _Atomic long long list_max_listpack_size;
    _Atomic long long zset_max_listpack_entries;
    _Atomic long long zset_max_listpack_value;
    _Atomic long long maxmemory_policy; /* an index into config.c's policy names */
    _Atomic long long lfu_log_factor;   /* kv_lfu_set's, pushed by config_push */
    _Atomic long long lfu_decay_time;
    _Atomic long long lazyfree_lazy_user_flush; /* keys.c: a FLUSHALL without SYNC or
                                                   ASYNC is ASYNC */
};
extern struct kv_config cfg;
/* Is maxmemory-policy an LFU one (Redis then counts accesses: OBJECT FREQ)? */
int config_lfu(void);
/* maxmemory-policy's order for kv_evict (KV_EVICT_*, KV_EVICT_VOLATILE
 * for volatile-*), or -1 for noeviction: the RESP commands past
 * --max-memory evict so, and are refused when that leaves the keys' bytes
 * past it (volatile-* with no key with an expiry left, as Redis). */
int config_evict_how(void);
/* Set every parameter to its default: once, before the workers start. */
void config_init(void);
/* Hand the store what it reads of the parameters (LFU's counting): after
 * every CONFIG SET (the defaults need none: noeviction counts nothing). */
void config_push(void);

extern const struct command config_commands[];
extern const size_t config_ncommands;

#endif
