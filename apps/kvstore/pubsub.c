/* pubsub.c - Pub/Sub as redis-server 7.0 answers it (RESP2), sharded
 * Pub/Sub too (SSUBSCRIBE, SPUBLISH: a server that is not a cluster is
 * its one shard, so a shard channel is a channel of its own namespace,
 * which patterns do not reach).
 *
 * A registry of channels, of patterns and of shard channels, each with the clients
 * subscribed to it in order of subscription, under one lock. PUBLISH
 * encodes the message once and appends it to each receiver's mailbox, then
 * asks the network (srv.wake_conn) to have the receiver's owner move it
 * into the connection's replies: a receiver may be served by another
 * thread, which alone writes its output buffer.
 *
 * Locks, in the order they are taken: g.lock (the registry, and which
 * client is subscribed to what), then a client's mail_lock (its mailbox),
 * then whatever srv.wake_conn takes. A connection's `ps` pointer is set and
 * cleared by its owner thread, under g.lock; publishers reach a client
 * only through the registry, so once pubsub_forget has returned none
 * holds it. CLIENT LIST reads the counts under the client registry's lock,
 * which is therefore taken before g.lock, never after.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pubsub.h"

#define MAIL_LIMIT (32u << 20) /* Redis's client-output-buffer-limit pubsub */

/* A channel or a pattern, and who is subscribed to it. */
struct topic {
    char *name;
    size_t n;
    uint64_t hash;
    void **subs; /* its clients (struct pubsub_client), in order of
                    subscription */
    size_t nsubs, cap;
    struct topic *next; /* the bucket's chain */
};

struct table {
    struct topic **b;
    size_t nb, count; /* buckets (a power of two), topics */
};

/* One subscribed connection. */
struct pubsub_client {
    struct conn *c;
    /* what it is subscribed to, in order (g.lock; its owner reads them
     * without it, being the only writer) */
    void **chans, **pats, **shards; /* struct topic */
    size_t nch, cch, npat, cpat, nsh, csh;
    pthread_mutex_t mail_lock; /* guards mail and overflow */
    struct buf mail;
    int overflow; /* past MAIL_LIMIT: the owner closes the connection */
    int dead;     /* killed (CLIENT KILL): counted and sent nothing while
                     its owner closes it (g.lock) */
};

static struct {
    pthread_mutex_t lock; /* guards everything below */
    struct table chans, pats, shards;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* What a kind of subscription uses: its table, the client's list of its
 * topics, and the words of its replies. */
enum { K_CHAN, K_PAT, K_SHARD };
static const struct kind {
    const char *sub, *unsub, *msg;
} kinds[] = {
    {"subscribe", "unsubscribe", "message"},
    {"psubscribe", "punsubscribe", "pmessage"},
    {"ssubscribe", "sunsubscribe", "smessage"},
};

static struct table *table_of(int kind)
{
    return kind == K_CHAN ? &g.chans : kind == K_PAT ? &g.pats : &g.shards;
}

/* the client's topics of a kind: their array, count and capacity */
static void ***topics_of(struct pubsub_client *ps, int kind, size_t **n, size_t **cap)
{
    if (kind == K_CHAN) {
        *n = &ps->nch, *cap = &ps->cch;
        return &ps->chans;
    }
    if (kind == K_PAT) {
        *n = &ps->npat, *cap = &ps->cpat;
        return &ps->pats;
    }
    *n = &ps->nsh, *cap = &ps->csh;
    return &ps->shards;
}

static uint64_t hash_of(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

static struct topic *table_find(const struct table *t, const char *p, size_t n, uint64_t h)
{
    if (!t->nb)
        return NULL;
    for (struct topic *x = t->b[h & (t->nb - 1)]; x; x = x->next)
        if (x->hash == h && x->n == n && !memcmp(x->name, p, n))
            return x;
    return NULL;
}

/* Twice the buckets when there are more topics than buckets. */
static int table_grow(struct table *t)
{
    size_t nb = t->nb ? 2 * t->nb : 64;
    struct topic **b = calloc(nb, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < t->nb; i++)
        for (struct topic *x = t->b[i], *next; x; x = next) {
            next = x->next;
            x->next = b[x->hash & (nb - 1)];
            b[x->hash & (nb - 1)] = x;
        }
    free(t->b);
    t->b = b;
    t->nb = nb;
    return 0;
}

static struct topic *table_add(struct table *t, const char *p, size_t n, uint64_t h)
{
    if (t->count >= t->nb && table_grow(t))
        return NULL;
    struct topic *x = calloc(1, sizeof *x);
    if (!x || !(x->name = malloc(n ? n : 1))) {
        free(x);
        return NULL;
    }
    memcpy(x->name, p, n);
    x->n = n;
    x->hash = h;
    x->next = t->b[h & (t->nb - 1)];
    t->b[h & (t->nb - 1)] = x;
    t->count++;
    return x;
}

static void table_remove(struct table *t, struct topic *x)
{
    struct topic **at = &t->b[x->hash & (t->nb - 1)];
    while (*at != x)
        at = &(*at)->next;
    *at = x->next;
    t->count--;
    free(x->subs);
    free(x->name);
    free(x);
}

/* Append p to *a (n of cap): 0, or -1 out of memory. */
static int push(void ***a, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 4;
        void **g2 = realloc(*a, c * sizeof *g2);
        if (!g2)
            return -1;
        *a = g2;
        *cap = c;
    }
    (*a)[(*n)++] = p;
    return 0;
}

/* Remove p from arr (n entries), keeping the order. */
static void pull(void **arr, size_t *n, const void *p)
{
    for (size_t i = 0; i < *n; i++)
        if (arr[i] == p) {
            memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof *arr);
            (*n)--;
            return;
        }
}

static struct pubsub_client *client_of(struct conn *c)
{
    if (c->ps)
        return c->ps;
    struct pubsub_client *ps = calloc(1, sizeof *ps);
    if (!ps)
        return NULL;
    ps->c = c;
    pthread_mutex_init(&ps->mail_lock, NULL);
    return ps;
}

/* The count a subscription reply gives: channels and patterns, or (shard
 * replies) shard channels, as Redis 7.0 counts them */
static size_t subscriptions(const struct pubsub_client *ps, int kind)
{
    return !ps ? 0 : kind == K_SHARD ? ps->nsh : ps->nch + ps->npat;
}

/* The client leaves no topic: it is no longer subscribed (g.lock held). */
static void client_drop_if_idle(struct conn *c)
{
    struct pubsub_client *ps = c->ps;
    if (!ps || ps->nch + ps->npat + ps->nsh)
        return;
    pubsub_drain(c); /* what was published before its last UNSUBSCRIBE */
    c->ps = NULL;
    free(ps->chans);
    free(ps->pats);
    free(ps->shards);
    buf_free(&ps->mail);
    pthread_mutex_destroy(&ps->mail_lock);
    free(ps);
}

/* x's subscribers not killed (g.lock held) */
static size_t live(const struct topic *x)
{
    size_t n = 0;
    for (size_t i = 0; i < x->nsubs; i++)
        n += !((const struct pubsub_client *)x->subs[i])->dead;
    return n;
}

void pubsub_kill(struct conn *c)
{
    pthread_mutex_lock(&g.lock);
    if (c->ps)
        c->ps->dead = 1;
    pthread_mutex_unlock(&g.lock);
}

/* The subscription replies: [kind, name or nil, subscriptions left]. */
static void reply_sub(struct buf *b, const char *kind, const char *p, size_t n, size_t count)
{
    reply_array(b, 3);
    reply_bulk(b, kind, strlen(kind));
    if (p)
        reply_bulk(b, p, n);
    else
        reply_nil(b);
    reply_int(b, (long long)count);
}

/* SUBSCRIBE, PSUBSCRIBE and SSUBSCRIBE. */
static int subscribe(struct conn *c, size_t argc, struct kv_slice *argv, int kind)
{
    if (!srv.wake_conn)
        return reply_error(&c->out, "ERR %s needs --io epoll: a thread per connection is not "
                                    "sent messages", kinds[kind].sub), 0;
    if (c->mc)
        return reply_error(&c->out, "ERR not on memcached's protocol"), 0;
    pthread_mutex_lock(&g.lock);
    struct pubsub_client *ps = client_of(c);
    int rc = ps ? 0 : TXN_E_NOMEM;
    if (ps)
        c->ps = ps;
    struct table *t = table_of(kind);
    for (size_t i = 1; i < argc && !rc; i++) {
        uint64_t h = hash_of(argv[i].p, argv[i].n);
        struct topic *x = table_find(t, argv[i].p, argv[i].n, h);
        int have = 0;
        for (size_t k = 0; x && k < x->nsubs; k++)
            have |= x->subs[k] == ps;
        if (!have) {
            int made = !x;
            size_t *n, *cap;
            void ***mine = topics_of(ps, kind, &n, &cap);
            if (!x && !(x = table_add(t, argv[i].p, argv[i].n, h)))
                rc = TXN_E_NOMEM;
            else if (push(&x->subs, &x->nsubs, &x->cap, ps)) {
                rc = TXN_E_NOMEM;
            } else if (push(mine, n, cap, x)) {
                pull(x->subs, &x->nsubs, ps);
                rc = TXN_E_NOMEM;
            }
            if (rc && made && x && !x->nsubs)
                table_remove(t, x);
        }
        if (!rc)
            reply_sub(&c->out, kinds[kind].sub, argv[i].p, argv[i].n, subscriptions(ps, kind));
    }
    if (ps)
        client_drop_if_idle(c);
    pthread_mutex_unlock(&g.lock);
    return rc;
}

/* Take ps off topic x of the kind (g.lock held). */
static void leave(int kind, struct topic *x, struct pubsub_client *ps)
{
    size_t *n, *cap;
    void ***mine = topics_of(ps, kind, &n, &cap);
    pull(x->subs, &x->nsubs, ps);
    pull(*mine, n, x);
    if (!x->nsubs)
        table_remove(table_of(kind), x);
}

/* UNSUBSCRIBE, PUNSUBSCRIBE and SUNSUBSCRIBE: the named topics, or every
 * one of the client's of that kind (in the order it subscribed); none at
 * all still replies once. */
static int unsubscribe(struct conn *c, size_t argc, struct kv_slice *argv, int kind)
{
    const char *word = kinds[kind].unsub;
    struct table *t = table_of(kind);
    pthread_mutex_lock(&g.lock);
    struct pubsub_client *ps = c->ps;
    size_t none = 0, *n = &none, *cap;
    void ***mine = ps ? topics_of(ps, kind, &n, &cap) : NULL;
    if (argc > 1) {
        for (size_t i = 1; i < argc; i++) {
            struct topic *x = ps ? table_find(t, argv[i].p, argv[i].n,
                                              hash_of(argv[i].p, argv[i].n))
                                 : NULL;
            int have = 0;
            for (size_t k = 0; x && k < x->nsubs; k++)
                have |= x->subs[k] == ps;
            if (have)
                leave(kind, x, ps);
            reply_sub(&c->out, word, argv[i].p, argv[i].n, subscriptions(ps, kind));
        }
    } else if (!*n) {
        reply_sub(&c->out, word, NULL, 0, subscriptions(ps, kind));
    } else {
        while (*n) {
            struct topic *x = (*mine)[0]; /* oldest first */
            reply_sub(&c->out, word, x->name, x->n, subscriptions(ps, kind) - 1);
            leave(kind, x, ps);
        }
    }
    client_drop_if_idle(c);
    pthread_mutex_unlock(&g.lock);
    return 0;
}

static int cmd_subscribe(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    return subscribe(c, argc, argv, K_CHAN);
}

static int cmd_psubscribe(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    return subscribe(c, argc, argv, K_PAT);
}

static int cmd_ssubscribe(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    return subscribe(c, argc, argv, K_SHARD);
}

static int cmd_unsubscribe(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    return unsubscribe(c, argc, argv, K_CHAN);
}

static int cmd_punsubscribe(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    return unsubscribe(c, argc, argv, K_PAT);
}

static int cmd_sunsubscribe(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    return unsubscribe(c, argc, argv, K_SHARD);
}

void pubsub_forget(struct conn *c)
{
    if (!c->ps)
        return;
    pthread_mutex_lock(&g.lock);
    struct pubsub_client *ps = c->ps;
    while (ps->nch)
        leave(K_CHAN, ps->chans[0], ps);
    while (ps->npat)
        leave(K_PAT, ps->pats[0], ps);
    while (ps->nsh)
        leave(K_SHARD, ps->shards[0], ps);
    client_drop_if_idle(c);
    pthread_mutex_unlock(&g.lock);
}

/* Append msg to ps's mailbox and wake its owner (g.lock held). */
static void deliver(struct pubsub_client *ps, const struct buf *msg)
{
    pthread_mutex_lock(&ps->mail_lock);
    if (!ps->overflow) {
        if (ps->mail.len + msg->len > MAIL_LIMIT)
            ps->overflow = 1;
        else
            buf_add(&ps->mail, msg->p, msg->len);
    }
    pthread_mutex_unlock(&ps->mail_lock);
    srv.wake_conn(ps->c);
}

/* Send m on channel ch (shard: a shard channel) to every live subscriber
 * (send 0: only count them): the receivers, or TXN_E_NOMEM. */
static long long publish(const struct kv_slice *ch, const struct kv_slice *m, int send,
                         int shard)
{
    struct buf msg = {0}, pmsg = {0};
    long long n = 0;
    const char *word = kinds[shard ? K_SHARD : K_CHAN].msg;
    reply_array(&msg, 3);
    reply_bulk(&msg, word, strlen(word));
    reply_bulk(&msg, ch->p, ch->n);
    reply_bulk(&msg, m->p, m->n);
    if (msg.oom) {
        buf_free(&msg);
        return TXN_E_NOMEM;
    }
    pthread_mutex_lock(&g.lock);
    struct topic *x = table_find(shard ? &g.shards : &g.chans, ch->p, ch->n,
                                 hash_of(ch->p, ch->n));
    for (size_t i = 0; x && i < x->nsubs; i++) {
        struct pubsub_client *ps = x->subs[i];
        if (!ps->dead && send)
            deliver(ps, &msg);
        n += !ps->dead;
    }
    for (size_t b = 0; !shard && b < g.pats.nb; b++)
        for (struct topic *p = g.pats.b[b]; p; p = p->next) {
            if (!glob_match(p->name, p->n, ch->p, ch->n))
                continue;
            pmsg.len = 0;
            reply_array(&pmsg, 4);
            reply_bulk(&pmsg, "pmessage", 8);
            reply_bulk(&pmsg, p->name, p->n);
            reply_bulk(&pmsg, ch->p, ch->n);
            reply_bulk(&pmsg, m->p, m->n);
            for (size_t i = 0; !pmsg.oom && i < p->nsubs; i++) {
                struct pubsub_client *ps = p->subs[i];
                if (!ps->dead && send)
                    deliver(ps, &pmsg);
                n += !ps->dead;
            }
        }
    pthread_mutex_unlock(&g.lock);
    buf_free(&msg);
    buf_free(&pmsg);
    return n;
}

/* A held message: its channel's and its own length and whether it is a
 * shard channel's, then their bytes. */
static void hold(struct conn *c, const struct kv_slice *ch, const struct kv_slice *m, int shard)
{
    size_t len[3] = {ch->n, m->n, (size_t)shard};
    buf_add(&c->pub_held, len, sizeof len);
    buf_add(&c->pub_held, ch->p, ch->n);
    buf_add(&c->pub_held, m->p, m->n);
}

void pubsub_hold(struct conn *c)
{
    c->pub_hold = 1;
    c->pub_held.len = 0;
}

void pubsub_release(struct conn *c, int send)
{
    for (size_t at = 0; send && at + 3 * sizeof(size_t) <= c->pub_held.len;) {
        size_t len[3];
        memcpy(len, c->pub_held.p + at, sizeof len);
        at += sizeof len;
        struct kv_slice ch = {c->pub_held.p + at, len[0]};
        struct kv_slice m = {c->pub_held.p + at + len[0], len[1]};
        at += len[0] + len[1];
        publish(&ch, &m, 1, len[2] != 0);
    }
    c->pub_hold = 0;
    buf_free(&c->pub_held);
}

/* PUBLISH: at once, or inside EXEC once the block has committed (a block
 * rolled back and run again must not send twice, nor one that failed at
 * all); the reply counts the receivers when it runs. */
static int cmd_publish(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    (void)argc;
    int shard = arg_is(&argv[0], "spublish");
    long long n = publish(&argv[1], &argv[2], !c->pub_hold, shard);
    if (n < 0)
        return (int)n;
    if (c->pub_hold)
        hold(c, &argv[1], &argv[2], shard);
    if (c->pub_held.oom)
        return TXN_E_NOMEM;
    reply_int(&c->out, n);
    return 0;
}

void pubsub_counts(struct conn *c, size_t *channels, size_t *patterns, size_t *shards)
{
    pthread_mutex_lock(&g.lock);
    *channels = c->ps ? c->ps->nch : 0;
    *patterns = c->ps ? c->ps->npat : 0;
    *shards = c->ps ? c->ps->nsh : 0;
    pthread_mutex_unlock(&g.lock);
}

void pubsub_drain(struct conn *c)
{
    struct pubsub_client *ps = c->ps;
    if (!ps)
        return;
    pthread_mutex_lock(&ps->mail_lock);
    if (ps->overflow || c->out.len - c->sent + ps->mail.len > MAIL_LIMIT) {
        /* as Redis: the slow subscriber is dropped, what it was owed too */
        ps->overflow = 1;
        c->closing = 1;
        c->out.len = c->sent = 0;
        ps->mail.len = 0;
    } else if (ps->mail.len) {
        buf_add(&c->out, ps->mail.p, ps->mail.len);
        ps->mail.len = 0;
    }
    pthread_mutex_unlock(&ps->mail_lock);
}

/* PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT | HELP */
static int cmd_pubsub(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)t;
    static const char *const help[] = {
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        NULL,
    };
    const struct kv_slice *sub = &argv[1];
    if (arg_is(sub, "help"))
        return reply_help(&c->out, argc, "PUBSUB", help), 0;
    if ((arg_is(sub, "channels") || arg_is(sub, "shardchannels")) && argc <= 3) {
        struct buf names = {0};
        size_t k = 0;
        pthread_mutex_lock(&g.lock);
        const struct table *tb = arg_is(sub, "channels") ? &g.chans : &g.shards;
        for (size_t b = 0; b < tb->nb; b++)
            for (struct topic *x = tb->b[b]; x; x = x->next)
                if (live(x) && (argc == 2 || glob_match(argv[2].p, argv[2].n, x->name, x->n))) {
                    reply_bulk(&names, x->name, x->n);
                    k++;
                }
        pthread_mutex_unlock(&g.lock);
        int rc = names.oom ? TXN_E_NOMEM : 0;
        if (!rc) {
            reply_array(&c->out, k);
            buf_add(&c->out, names.p, names.len);
        }
        buf_free(&names);
        return rc;
    }
    if (arg_is(sub, "numsub") || arg_is(sub, "shardnumsub")) {
        int shard = arg_is(sub, "shardnumsub");
        reply_array(&c->out, 2 * (argc - 2));
        pthread_mutex_lock(&g.lock);
        for (size_t i = 2; i < argc; i++) {
            struct topic *x = table_find(shard ? &g.shards : &g.chans, argv[i].p, argv[i].n,
                                         hash_of(argv[i].p, argv[i].n));
            reply_bulk(&c->out, argv[i].p, argv[i].n);
            reply_int(&c->out, x ? (long long)live(x) : 0);
        }
        pthread_mutex_unlock(&g.lock);
        return 0;
    }
    if (arg_is(sub, "numpat")) {
        if (argc != 2)
            return reply_error(&c->out, "ERR wrong number of arguments for 'pubsub|numpat' "
                                        "command"), 0;
        size_t n = 0;
        pthread_mutex_lock(&g.lock);
        for (size_t b = 0; b < g.pats.nb; b++)
            for (struct topic *p = g.pats.b[b]; p; p = p->next)
                n += live(p) > 0;
        pthread_mutex_unlock(&g.lock);
        reply_int(&c->out, (long long)n);
        return 0;
    }
    if (arg_is(sub, "channels") || arg_is(sub, "shardchannels"))
        return reply_error(&c->out, "ERR unknown subcommand or wrong number of arguments for "
                                    "'%.*s'. Try PUBSUB HELP.",
                           (int)(sub->n > 64 ? 64 : sub->n), sub->p), 0;
    reply_error(&c->out, "ERR unknown subcommand '%.*s'. Try PUBSUB HELP.",
                (int)(sub->n > 64 ? 64 : sub->n), sub->p);
    return 0;
}

/* ---- the table: Redis's flags; the subscriptions are allowed in a
 * subscribed connection's context (CMD_PUBSUB_OK) */

#define P CMD_PUBSUB
#define NS CMD_NOSCRIPT
#define L CMD_LOADING
#define S CMD_STALE
#define OK CMD_PUBSUB_OK

const struct command pubsub_commands[] = {
    {"subscribe", cmd_subscribe, -2, P | NS | L | S | OK, ACL_PUBSUB, {0, 0, 0}},
    {"unsubscribe", cmd_unsubscribe, -1, P | NS | L | S | OK, ACL_PUBSUB, {0, 0, 0}},
    {"psubscribe", cmd_psubscribe, -2, P | NS | L | S | OK, ACL_PUBSUB, {0, 0, 0}},
    {"punsubscribe", cmd_punsubscribe, -1, P | NS | L | S | OK, ACL_PUBSUB, {0, 0, 0}},
    {"publish", cmd_publish, 3, P | L | S | CMD_FAST, ACL_PUBSUB,
     {0, 0, 0}},
    {"pubsub", cmd_pubsub, -2, 0, 0, {0, 0, 0}},
    /* the channels are where Redis's key specs say (for a cluster's
     * slots) but are no keys: CMD_NOT_KEY */
    {"ssubscribe", cmd_ssubscribe, -2, P | NS | L | S | OK | CMD_NOT_KEY, ACL_PUBSUB, {1, -1, 1}},
    {"sunsubscribe", cmd_sunsubscribe, -1, P | NS | L | S | OK | CMD_NOT_KEY, ACL_PUBSUB,
     {1, -1, 1}},
    {"spublish", cmd_publish, 3, P | L | S | CMD_FAST | CMD_NOT_KEY, ACL_PUBSUB, {1, 1, 1}},
};
const size_t pubsub_ncommands = sizeof pubsub_commands / sizeof pubsub_commands[0];
