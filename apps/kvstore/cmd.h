/* cmd.h - what a command needs: the command table's entry (name, arity,
 * flags, ACL categories, key spec), the form of a command's function, and
 * the helpers the command files share (argument parsing, store errors,
 * values). Above conn.h; the command files (t_string.c, keys.c, t_hash.c,
 * t_set.c, config.c) and memcache.c are above it, the dispatcher
 * (commands.c) above them.
 *
 * Adding a type: a file with its commands and an array of their entries,
 * declared in its own header, and one line in commands.c's list of
 * tables. */
#ifndef KV_CMD_H
#define KV_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "conn.h"

/* A command's flags, Redis's, as COMMAND names them (cmd_flag_names in
 * cmd.c, in this order). */
enum {
    CMD_WRITE = 1u << 0,            /* changes the store */
    CMD_READONLY = 1u << 1,         /* reads keys only */
    CMD_DENYOOM = 1u << 2,          /* may grow the store */
    CMD_ADMIN = 1u << 3,
    CMD_PUBSUB = 1u << 4,
    CMD_NOSCRIPT = 1u << 5,
    CMD_BLOCKING = 1u << 6,         /* may wait for another client */
    CMD_LOADING = 1u << 7,
    CMD_STALE = 1u << 8,
    CMD_SKIP_SLOWLOG = 1u << 9,
    CMD_FAST = 1u << 10,            /* O(1) or O(log n) */
    CMD_NO_AUTH = 1u << 11,
    CMD_MAY_REPLICATE = 1u << 12,
    CMD_NO_MANDATORY_KEYS = 1u << 13,
    CMD_NO_MULTI = 1u << 14,        /* refused between MULTI and EXEC */
    CMD_ALLOW_BUSY = 1u << 15,
    CMD_NFLAGS = 16,
    /* not COMMAND's: how the dispatcher runs the command */
    CMD_RESERVE = 1u << 24, /* may add a key per key argument: the table
                               grows first (kv_reserve, outside any lock) */
    CMD_PUBSUB_OK = 1u << 25, /* runs in a subscribed connection's context
                                 (RESP2 allows only these there) */
    /* keys after the key spec's: CMD_KEYNUM(i), those that argument i
     * counts, right after it (Redis's keynum key spec: LMPOP, ZUNIONSTORE,
     * ...); CMD_SORT_STORE, the argument of SORT's last STORE option
     * (Redis's sortGetKeys). Either makes the keys "movable": COMMAND
     * INFO says movablekeys. */
    CMD_KEYNUM_SHIFT = 26,
    CMD_KEYNUM_MASK = 7u << 26,
    CMD_SORT_STORE = 1u << 29,
    /* the key spec names arguments that are no keys (Redis's not_key:
     * shard channels): COMMAND INFO shows it, nothing is locked, COMMAND
     * GETKEYS finds none */
    CMD_NOT_KEY = 1u << 30,
};
#define CMD_KEYNUM(i) ((uint32_t)(i) << CMD_KEYNUM_SHIFT)

/* ACL categories, as COMMAND INFO names them (cmd_acl_names, in this
 * order, Redis's). An entry lists the command's own; the ones its flags
 * imply (@write, @read, @admin, @dangerous, @fast or @slow, @blocking,
 * @pubsub) are added when COMMAND replies, as Redis adds them. */
enum {
    ACL_KEYSPACE = 1u << 0,
    ACL_READ = 1u << 1,
    ACL_WRITE = 1u << 2,
    ACL_SET = 1u << 3,
    ACL_SORTEDSET = 1u << 4,
    ACL_LIST = 1u << 5,
    ACL_HASH = 1u << 6,
    ACL_STRING = 1u << 7,
    ACL_BITMAP = 1u << 8,
    ACL_HYPERLOGLOG = 1u << 9,
    ACL_GEO = 1u << 10,
    ACL_STREAM = 1u << 11,
    ACL_PUBSUB = 1u << 12,
    ACL_ADMIN = 1u << 13,
    ACL_FAST = 1u << 14,
    ACL_SLOW = 1u << 15,
    ACL_BLOCKING = 1u << 16,
    ACL_DANGEROUS = 1u << 17,
    ACL_CONNECTION = 1u << 18,
    ACL_TRANSACTION = 1u << 19,
    ACL_SCRIPTING = 1u << 20,
    ACL_NCATS = 21,
};

extern const char *const cmd_flag_names[CMD_NFLAGS];
extern const char *const cmd_acl_names[ACL_NCATS];

/* A command's function. t is the store transaction over the keys its
 * table entry names (EXEC's while EXEC runs its queue), NULL when the
 * entry names none. It replies into c->out and returns 0, or a store
 * error (<0, KV_E_WRONGTYPE among them): the dispatcher then rolls the
 * transaction back and replies that error in place of what the command
 * replied. */
typedef int command_fn(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv);

/* Which arguments are keys: argv[first], argv[first + step], ... up to
 * argv[last] (last < 0: counted from the end, -1 the last argument);
 * first 0: none. Redis's first key, last key and step. The entry's flags
 * may name more (CMD_KEYNUM, CMD_SORT_STORE). */
struct key_spec {
    int first, last, step;
};

struct command {
    const char *name; /* lower case */
    command_fn *proc;
    int arity;        /* n: exactly n arguments with the name; -n: at least n */
    uint32_t flags;   /* CMD_* */
    uint32_t acl;     /* ACL_*: the command's own categories */
    struct key_spec keys;
};

/* How many keys the entry names in a request of argc arguments (0 when the
 * count of keys is not a number of keys the request has: the command
 * then fails on it before it reads a key, and Redis's COMMAND GETKEYS
 * finds none); the keys are then argv[cmd_key(cmd, argc, argv, i)] for i
 * below that. Redis's getKeysFromCommand, the count read as its
 * fallback reads it (atoi). */
size_t cmd_nkeys(const struct command *cmd, size_t argc, const struct kv_slice *argv);
size_t cmd_key(const struct command *cmd, size_t argc, const struct kv_slice *argv, size_t i);
static inline int cmd_movable(uint32_t flags)
{
    return (flags & (CMD_KEYNUM_MASK | CMD_SORT_STORE)) != 0;
}

/* A command that finds it must read a key its transaction does not hold
 * (SORT's BY and GET patterns name keys by the values it reads) names
 * each such key with cmd_want_key and returns KV_E_MOREKEYS: the
 * dispatcher rolls back what it did and runs it again, in a transaction
 * that holds those keys too (EXEC: the whole block again). 0, or
 * TXN_E_NOMEM. */
#define KV_E_MOREKEYS (-1100)
int cmd_want_key(struct kv_slice k);
/* The keys named since this thread's request began (copies), kept over
 * the runs again so that each holds every key an earlier one wanted;
 * the dispatcher empties it when the request ends. */
extern _Thread_local struct cmd_wanted {
    struct kv_slice *k;
    size_t n, cap;
} cmd_wanted;
void cmd_wanted_clear(void);

/* ---- helpers of the command files */

/* Reply a store error: a full pool is the one a client can act on
 * (it also sets cmd_found_full, which the dispatcher reads and clears:
 * it reclaims expired keys and runs a write once more). */
void reply_store_error(struct buf *b, int rc);
extern _Thread_local int cmd_found_full;

int arg_is(const struct kv_slice *a, const char *word); /* a, case folded, is word */
int parse_ll(const struct kv_slice *a, long long *out); /* Redis's strict integers */
/* an unsigned decimal that starts with a digit (SCAN's cursor, memcached's
 * numbers as its safe_strtoull reads them): 0 or -1 */
int parse_u64(const struct kv_slice *a, uint64_t *out);
/* a long double as Redis reads one (strtold, no spaces, finite): 0, -1 */
int parse_ld(const char *p, size_t n, long double *out);
/* ... and writes one (INCRBYFLOAT's form) into buf[LD_CHARS]: its length */
#define LD_CHARS 5200
int format_ld(long double v, char *buf);
/* Redis's glob-style pattern (KEYS, SCAN's MATCH) */
int glob_match(const char *pat, size_t plen, const char *s, size_t slen);

/* A value read out of a transaction (kv_txn_read copies it here). */
struct val {
    char *p;
    size_t n;
    int oom;
};
/* a kv_txn reader's callback that copies the value into the struct val
 * at arg (x->oom when out of memory) */
void cmd_val_cb(void *arg, const char *v, size_t n);
/* k's string value into x (free x->p): 1 found, 0 missing, <0 an error */
int get_val(kv_txn *t, struct kv_slice k, struct val *x);
/* k's value of any type into x (free x->p) and *type: 1 found, 0
 * missing, <0 an error */
int get_any(kv_txn *t, struct kv_slice k, struct val *x, unsigned *type);
const char *type_name(unsigned type); /* TYPE's answer for a kv_type */
/* The reply to "CMD HELP" (a command of subcommands, CMD in upper case),
 * in Redis's form: the usage line, `lines` (NULL ends them: a subcommand,
 * then what it does, indented), then HELP's own two; argc other than 2 is
 * Redis's arity error. */
void reply_help(struct buf *b, size_t argc, const char *cmd, const char *const *lines);
/* wall-clock ms since the Unix epoch: expiry times (store.h) */
uint64_t now_ms(void);

#endif
