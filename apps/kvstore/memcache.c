/* memcache.c - memcached's text protocol (1.6) on the store, beside RESP:
 * the same keys (docs/kvstore.md, section 16). An item is a value of type
 * KV_ITEM: its 32-bit flags and 64-bit CAS value, then its bytes; RESP
 * reads it as a string, and a RESP string reads here as an item of flags
 * 0. Each command runs in one store transaction over its key, so a
 * storage command is acknowledged once durable, like a RESP write. Replies
 * and error texts are memcached 1.6.18's (tests/kvstore/mc_compat). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "memcache.h"

#define KEY_MAX 250            /* memcached's KEY_MAX_LENGTH */
#define LINE_MAX_BYTES 65536   /* a command line (a get of many keys) */
#define REL_MAX (60 * 60 * 24 * 30) /* exptimes up to 30 days are relative */
#define MC_VERSION "1.6.18"    /* the protocol's; clients test it for features */

/* A new CAS value: unique, and larger than any of an earlier run (the
 * counter starts at the wall clock in ns; no run hands out one a ns). */
static uint64_t new_cas(void)
{
    static _Atomic uint64_t next;
    uint64_t v = atomic_load(&next);
    if (!v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        atomic_compare_exchange_strong(&next, &v, seed);
    }
    return atomic_fetch_add(&next, 1) + 1;
}

static void put_le(char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (char)(v >> (8 * i));
}

static uint64_t get_le(const char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | (unsigned char)p[i];
    return v;
}

/* The item header's CAS word also keeps two states of the meta commands
 * in its top bits (CAS values, from the clock in ns, stay below 2^62
 * until 2116): the item is stale (md I, ms I: X), and a client was told
 * it won the right to recache it (W; later ones get Z). */
#define CAS_STALE (1ull << 63)
#define CAS_WON (1ull << 62)
#define CAS_MASK (CAS_WON - 1)

/* An item as memcached sees a key: found (a string or an item), its flags,
 * CAS and bytes (a copy). */
struct item {
    int found, foreign; /* foreign: a value memcached does not see (a hash) */
    uint32_t flags;
    uint64_t cas;
    uint64_t state; /* the meta commands' CAS_STALE and CAS_WON */
    struct val v; /* v.p: the whole value; data/n: its bytes */
    const char *data;
    size_t n;
};

static int item_get(kv_txn *t, struct kv_slice key, struct item *it)
{
    unsigned type;
    memset(it, 0, sizeof *it);
    int rc = get_any(t, key, &it->v, &type);
    if (rc <= 0)
        return rc;
    if (type == KV_ITEM && it->v.n >= KV_ITEM_HDR) {
        it->flags = (uint32_t)get_le(it->v.p, 4);
        uint64_t w = get_le(it->v.p + 4, 8);
        it->cas = w & CAS_MASK;
        it->state = w & ~CAS_MASK;
        it->data = it->v.p + KV_ITEM_HDR;
        it->n = it->v.n - KV_ITEM_HDR;
    } else if (type == KV_STRING) {
        /* a RESP string: its CAS is a digest of its bytes, so that it
         * changes when they do */
        uint64_t h = 0xcbf29ce484222325ULL;
        for (size_t i = 0; i < it->v.n; i++)
            h = (h ^ (unsigned char)it->v.p[i]) * 0x100000001b3ULL;
        it->cas = h >> 2 | 1; /* below CAS_WON: no meta state bit */
        it->data = it->v.p;
        it->n = it->v.n;
    } else {
        it->foreign = 1;
        return 0;
    }
    it->found = 1;
    return 1;
}

/* Write key as an item of `flags` holding a (then b), with CAS `cas` and
 * meta state `state`, expiring at `at` (KV_KEEPTTL: as it was). */
static int item_write(kv_txn *t, struct kv_slice key, uint32_t flags, struct kv_slice a,
                      struct kv_slice b, uint64_t at, uint64_t cas, uint64_t state)
{
    size_t n = KV_ITEM_HDR + a.n + b.n;
    char *p = malloc(n);
    if (!p)
        return TXN_E_NOMEM;
    put_le(p, flags, 4);
    put_le(p + 4, cas | state, 8);
    if (a.n)
        memcpy(p + KV_ITEM_HDR, a.p, a.n);
    if (b.n)
        memcpy(p + KV_ITEM_HDR + a.n, b.p, b.n);
    int rc = kv_txn_write(t, key, (struct kv_slice){p, n}, at, KV_ITEM);
    free(p);
    return rc;
}

/* item_write with a new CAS (to *cas) and no meta state */
static int item_put(kv_txn *t, struct kv_slice key, uint32_t flags, struct kv_slice a,
                    struct kv_slice b, uint64_t at, uint64_t *cas)
{
    *cas = new_cas();
    return item_write(t, key, flags, a, b, at, *cas, 0);
}

/* ---- the command line */

struct line {
    struct kv_slice tok[24]; /* memcached's MAX_TOKENS; a get with more
                                keys is read on from `rest` */
    size_t n;
    const char *rest, *end;
};

static void tokenize(struct line *l, const char *p, const char *end)
{
    l->n = 0;
    while (p < end && l->n < 24) {
        while (p < end && *p == ' ')
            p++;
        const char *s = p;
        while (p < end && *p != ' ')
            p++;
        if (p > s)
            l->tok[l->n++] = (struct kv_slice){s, (size_t)(p - s)};
    }
    l->rest = p;
    l->end = end;
}

static int is(const struct kv_slice *t, const char *w)
{
    size_t n = strlen(w);
    return t->n == n && !memcmp(t->p, w, n);
}

/* Unsigned decimal of at most `bits` bits, as memcached's safe_strtoull
 * (and safe_strtoul for 32): 0 or -1. */
static int parse_u(const struct kv_slice *t, int bits, uint64_t *out)
{
    struct kv_slice s = *t;
    if (s.n > 1 && s.p[0] == '+') /* strtoul's sign */
        s.p++, s.n--;
    return parse_u64(&s, out) || (bits == 32 && *out > UINT32_MAX) ? -1 : 0;
}

/* Signed decimal (exptimes, lengths): 0 or -1. */
static int parse_i(const struct kv_slice *t, long long *out)
{
    char s[32];
    if (!t->n || t->n >= sizeof s)
        return -1;
    memcpy(s, t->p, t->n);
    s[t->n] = 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || isspace((unsigned char)s[0]))
        return -1;
    *out = v;
    return 0;
}

/* An exptime as ms since the epoch: 0 never, 1 already past (a negative
 * one), relative up to 30 days, else absolute seconds. */
static uint64_t expiry_of(long long e)
{
    if (e == 0)
        return 0;
    if (e < 0)
        return 1;
    if (e <= REL_MAX)
        return now_ms() + (uint64_t)e * 1000;
    return (uint64_t)e * 1000;
}

static void out(struct conn *c, const char *s)
{
    buf_add(&c->out, s, strlen(s));
}

static void outf(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void outf(struct conn *c, const char *fmt, ...)
{
    char s[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s, sizeof s, fmt, ap);
    va_end(ap);
    buf_add(&c->out, s, n < 0 ? 0 : (size_t)n < sizeof s ? (size_t)n : sizeof s - 1);
}

/* A store error, as memcached's SERVER_ERROR. */
static void server_error(struct conn *c, int rc)
{
    if (rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL)
        out(c, "SERVER_ERROR out of memory storing object\r\n");
    else
        outf(c, "SERVER_ERROR store: %s\r\n", txn_strerror(rc));
}

/* ---- the binary protocol's frame (1.6's protocol_binary.h): a 24-byte
 * header, big endian, then extras, key and value. A connection whose first
 * byte is 0x80 speaks it (memcached decides so too, once per connection). */

#define BIN_HDR 24
#define BIN_REQ 0x80
#define BIN_RES 0x81

/* A status and its text, as memcached 1.6.18 sends them. */
#define BIN_STATUSES(X)                                                                 \
    X(BIN_OK, 0x00, "")                                                                \
    X(BIN_ENOENT, 0x01, "Not found")                                                   \
    X(BIN_EEXISTS, 0x02, "Data exists for key.")                                       \
    X(BIN_E2BIG, 0x03, "Too large.")                                                   \
    X(BIN_EINVAL, 0x04, "Invalid arguments")                                           \
    X(BIN_NOT_STORED, 0x05, "Not stored.")                                             \
    X(BIN_DELTA_BADVAL, 0x06, "Non-numeric server-side value for incr or decr")        \
    X(BIN_UNKNOWN, 0x81, "Unknown command")                                            \
    X(BIN_ENOMEM, 0x82, "Out of memory")                                               \
    X(BIN_EINTERNAL, 0x84, "Internal error")

enum bin_status {
#define BIN_ENUM(name, code, text) name = code,
    BIN_STATUSES(BIN_ENUM)
#undef BIN_ENUM
};

static const char *bin_text(enum bin_status st)
{
    switch (st) {
#define BIN_CASE(name, code, text)                                                      \
    case name:                                                                         \
        return text;
        BIN_STATUSES(BIN_CASE)
#undef BIN_CASE
    }
    return "Unknown error";
}

/* A request's header as received (its opaque goes back unread). */
struct bin_hdr {
    uint8_t op, extlen;
    uint16_t keylen;
    uint32_t bodylen;
    uint8_t opaque[4];
    uint64_t cas;
};

static void put_be(char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (char)(v >> (8 * (n - 1 - i)));
}

static uint64_t get_be(const char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | (unsigned char)p[i];
    return v;
}

/* One response to request h: extras, key and value, any of them empty. */
static void bin_reply(struct conn *c, const struct bin_hdr *h, enum bin_status st, const void *ext,
                      size_t extlen, const void *key, size_t keylen, const void *val, size_t n,
                      uint64_t cas)
{
    char hdr[BIN_HDR];
    hdr[0] = (char)BIN_RES;
    hdr[1] = (char)h->op;
    put_be(hdr + 2, keylen, 2);
    hdr[4] = (char)extlen;
    hdr[5] = 0; /* data type: raw bytes */
    put_be(hdr + 6, st, 2);
    put_be(hdr + 8, extlen + keylen + n, 4);
    memcpy(hdr + 12, h->opaque, 4);
    put_be(hdr + 16, cas, 8);
    buf_add(&c->out, hdr, BIN_HDR);
    if (extlen)
        buf_add(&c->out, ext, extlen);
    if (keylen)
        buf_add(&c->out, key, keylen);
    if (n)
        buf_add(&c->out, val, n);
}

/* An error response: the status and its text. */
static void bin_error(struct conn *c, const struct bin_hdr *h, enum bin_status st)
{
    const char *t = bin_text(st);
    bin_reply(c, h, st, NULL, 0, NULL, 0, t, strlen(t), 0);
}

/* A store error (rc < 0), as the text protocol's server_error. */
static void bin_server_error(struct conn *c, const struct bin_hdr *h, int rc)
{
    if (rc == TXN_E_NOSPACE || rc == TXN_E_LOGFULL)
        return bin_error(c, h, BIN_ENOMEM);
    char t[160];
    int n = snprintf(t, sizeof t, "store: %s", txn_strerror(rc));
    bin_reply(c, h, BIN_EINTERNAL, NULL, 0, NULL, 0, t, n < 0 ? 0 : (size_t)n, 0);
}

/* ---- retrieval: get, gets, gat, gats (and the binary protocol's) */

/* Look key up in a transaction of its own; with `touch`, then give it
 * expiry `at` (1: in the past, so it goes). *it is the item as it was
 * before the touch: gat shows it, then touches it. Counted as memcached
 * counts a get or a touch. */
static int fetch_once(struct kv_slice k, int touch, uint64_t at, struct item *it)
{
    kv_txn *t;
    memset(it, 0, sizeof *it);
    int rc = kv_txn_begin(srv.kv, 1, &k, touch, &t);
    if (rc)
        return rc;
    if ((rc = item_get(t, k, it)) > 0 && touch)
        rc = at == 1 ? kv_txn_del(t, k) : kv_txn_expire(t, k, at);
    rc = kv_txn_end(t, rc);
    if (touch)
        it->found ? mc_thread.touch_hits++ : mc_thread.touch_misses++;
    else
        it->found ? mc_thread.get_hits++ : mc_thread.get_misses++;
    touch ? mc_thread.cmd_touch++ : mc_thread.cmd_get++;
    return rc;
}

static void retrieve(struct conn *c, struct line *l, int cas, int touch)
{
    size_t first = touch ? 2 : 1;
    long long e = 0;
    if (l->n < 2) /* a gat of no key: its exptime checked, then END */
        return out(c, "ERROR\r\n");
    if (touch && parse_i(&l->tok[1], &e))
        return out(c, "CLIENT_ERROR invalid exptime argument\r\n");
    size_t mark = c->out.len;
    for (;;) {
        for (size_t i = first; i < l->n; i++) {
            struct kv_slice k = l->tok[i];
            struct item it;
            if (k.n > KEY_MAX) {
                c->out.len = mark;
                return out(c, "CLIENT_ERROR bad command line format\r\n");
            }
            int rc = fetch_once(k, touch, expiry_of(e), &it);
            if (rc < 0) {
                free(it.v.p);
                c->out.len = mark;
                return server_error(c, rc);
            }
            if (it.found) {
                outf(c, "VALUE %.*s %u %zu", (int)k.n, k.p, (unsigned)it.flags, it.n);
                if (cas)
                    outf(c, " %llu", (unsigned long long)it.cas);
                out(c, "\r\n");
                buf_add(&c->out, it.data, it.n);
                out(c, "\r\n");
            }
            free(it.v.p);
        }
        if (l->rest >= l->end)
            break;
        tokenize(l, l->rest, l->end); /* the keys beyond the first 24 tokens */
        first = 0;
    }
    out(c, "END\r\n");
}

/* ---- storage: set, add, replace, append, prepend, cas */

enum { SET, ADD, REPLACE, APPEND, PREPEND, CAS };

/* Room for a write of `need` bytes under --max-memory: evict first. */
static void make_room(size_t need)
{
    struct kv_info ki;
    uint64_t n;
    uint64_t limit = atomic_load(&srv.max_memory);
    if (!limit)
        return;
    kv_info(srv.kv, &ki);
    if (ki.bytes + need > limit)
        kv_evict(srv.kv, limit > need ? limit - need : 0, KV_EVICT_LRU, &n);
}

/* A full pool (with no limit set, or more than the limit in use by RESP's
 * keys or the logs): delete expired keys, or else evict a tenth of the
 * keys' bytes, then try again. After evicting, txn_sync: incll hands the
 * freed blocks back only when their epoch ends, and a retry before that
 * would evict again, down to nothing left. */
static int full(int rc)
{
    struct kv_info ki;
    uint64_t n;
    if (rc != TXN_E_NOSPACE && rc != TXN_E_LOGFULL)
        return 0;
    if (expire_reclaim(0))
        return 1;
    kv_info(srv.kv, &ki);
    return !kv_evict(srv.kv, ki.bytes - ki.bytes / 10, KV_EVICT_LRU, &n) && n > 0 &&
           !txn_sync(kv_pool(srv.kv));
}

/* One storage command in a transaction of its own; `check`: compare the
 * item's CAS with cas_in first (cas, and the meta set's C with any mode);
 * `invalidate` (ms I): an older cas_in is taken too, and the item stored
 * stale. *reply is memcached's word, *cas the stored item's new CAS. */
static int store_once(int op, int check, int invalidate, struct kv_slice key, uint32_t flags,
                      uint64_t at, struct kv_slice data, uint64_t cas_in, const char **reply,
                      uint64_t *cas)
{
    uint64_t state = 0;
    kv_txn *t;
    struct item it;
    int rc = kv_txn_begin(srv.kv, 1, &key, 1, &t);
    if (rc)
        return rc;
    *reply = "STORED\r\n";
    *cas = 0;
    if (op == CAS)
        op = SET, check = 1;
    if ((rc = item_get(t, key, &it)) >= 0) {
        int there = it.found || it.foreign; /* add: a hash is there too */
        rc = 0;
        if (check && invalidate && it.found && cas_in < it.cas)
            state = CAS_STALE;
        if (check && !it.found)
            *reply = "NOT_FOUND\r\n";
        else if (check && it.cas != cas_in && !state)
            *reply = "EXISTS\r\n";
        else if ((op == ADD && there) ||
                 ((op == REPLACE || op == APPEND || op == PREPEND) && !it.found))
            *reply = "NOT_STORED\r\n";
        else if ((op == APPEND || op == PREPEND) && it.n + data.n > srv.lim.max_bulk)
            *reply = "NOT_STORED\r\n"; /* no larger than --max-value */
        else if (op == APPEND)
            rc = item_put(t, key, it.flags, (struct kv_slice){it.data, it.n}, data,
                          KV_KEEPTTL, cas);
        else if (op == PREPEND)
            rc = item_put(t, key, it.flags, data, (struct kv_slice){it.data, it.n},
                          KV_KEEPTTL, cas);
        else if (at == 1) /* stored and expired at once: gone */
            rc = (rc = kv_txn_del(t, key)) < 0 ? rc : 0;
        else
            rc = item_write(t, key, flags, data, (struct kv_slice){NULL, 0}, at,
                            *cas = new_cas(), state);
    }
    free(it.v.p);
    return kv_txn_end(t, rc);
}

/* store_once until it runs, making room (a full pool: expired keys
 * reclaimed, then evictions) between tries; counted as memcached counts. */
static int store_retry(int op, int check, int invalidate, struct kv_slice key, uint32_t flags,
                       uint64_t at, struct kv_slice data, uint64_t cas_in, const char **reply,
                       uint64_t *cas)
{
    int rc;
    make_room(data.n + key.n + 64);
    mc_thread.cmd_set++;
    /* evicting random items empties few of the allocator's runs: the room
     * a value of another size needs may take several rounds */
    while ((rc = store_once(op, check, invalidate, key, flags, at, data, cas_in, reply, cas)) <
               0 &&
           full(rc))
        ;
    if (op == CAS && rc >= 0)
        *(**reply == 'S'   ? &mc_thread.cas_hits
          : **reply == 'E' ? &mc_thread.cas_badval
                           : &mc_thread.cas_misses) += 1;
    return rc;
}

static void store(struct conn *c, int op, struct kv_slice key, uint32_t flags, long long e,
                  struct kv_slice data, uint64_t cas_in, int noreply)
{
    const char *reply = "STORED\r\n";
    uint64_t cas;
    int rc = store_retry(op, 0, 0, key, flags, expiry_of(e), data, cas_in, &reply, &cas);
    if (noreply)
        return;
    if (rc < 0)
        return server_error(c, rc);
    out(c, reply);
}

/* Delete key in a transaction of its own (errors: the key stays). */
static void drop(struct kv_slice key)
{
    kv_txn *t;
    if (!kv_txn_begin(srv.kv, 1, &key, 1, &t))
        kv_txn_end(t, kv_txn_del(t, key));
}

/* The data block after a storage command's line: 1 run (or refused), 0
 * wait for more bytes, with *used what the command takes of the input. */
static int storage(struct conn *c, struct line *l, int op, size_t line_len, const char *p,
                   size_t n, size_t *used)
{
    size_t want = op == CAS ? 6 : 5;
    uint64_t flags = 0, cas = 0;
    long long e = 0, bytes = -1;
    *used = line_len;
    if (l->n != want && l->n != want + 1) {
        out(c, "ERROR\r\n");
        return 1;
    }
    int noreply = l->n == want + 1 && is(&l->tok[want], "noreply");
    if (l->tok[1].n > KEY_MAX || parse_u(&l->tok[2], 32, &flags) || parse_i(&l->tok[3], &e) ||
        parse_i(&l->tok[4], &bytes) || bytes < 0 || bytes > INT32_MAX - 2 ||
        (op == CAS && parse_u(&l->tok[5], 64, &cas))) {
        out(c, "CLIENT_ERROR bad command line format\r\n");
        return 1;
    }
    size_t total = line_len + (size_t)bytes + 2;
    if ((size_t)bytes > srv.lim.max_bulk) {
        /* memcached's answer; the data that follows is skipped as it
         * comes, not buffered */
        out(c, "SERVER_ERROR object too large for cache\r\n");
        c->mc_swallow = (size_t)bytes + 2;
        if (op == SET) /* and, as memcached, the key's old value goes: a
                          client must not read it as the one it set */
            drop(l->tok[1]);
        return 1;
    }
    if (n < total)
        return 0;
    *used = total;
    const char *data = p + line_len;
    if (data[bytes] != '\r' || data[bytes + 1] != '\n') {
        out(c, "CLIENT_ERROR bad data chunk\r\n");
        return 1;
    }
    store(c, op, l->tok[1], (uint32_t)flags, e, (struct kv_slice){data, (size_t)bytes}, cas,
          noreply);
    return 1;
}

/* ---- the others */

/* Delete key, unless `check` and its CAS is not cas_in: *code 'D'
 * deleted, 'N' not found, 'E' its CAS differs. */
static int delete_once(struct kv_slice key, int check, uint64_t cas_in, char *code)
{
    kv_txn *t;
    struct item it;
    *code = 'N';
    int rc = kv_txn_begin(srv.kv, 1, &key, 1, &t);
    if (rc)
        return rc;
    if ((rc = item_get(t, key, &it)) > 0) {
        if (check && it.cas != cas_in) {
            *code = 'E';
            rc = 0;
        } else if ((rc = kv_txn_del(t, key)) >= 0) {
            *code = 'D';
        }
    } else if (!rc && it.foreign && !check) { /* a RESP hash or list: delete takes it too */
        if ((rc = kv_txn_del(t, key)) > 0)
            *code = 'D';
    }
    free(it.v.p);
    rc = kv_txn_end(t, rc);
    *code == 'D' ? mc_thread.delete_hits++ : mc_thread.delete_misses++;
    return rc;
}

static void del(struct conn *c, struct line *l)
{
    int noreply = l->n >= 3 && is(&l->tok[l->n - 1], "noreply");
    size_t args = l->n - (size_t)noreply;
    /* memcached still takes a legacy time of 0 */
    if (args > 3 || (args == 3 && !is(&l->tok[2], "0")) || args < 2)
        return out(c, args < 2 ? "ERROR\r\n"
                               : "CLIENT_ERROR bad command line format.  Usage: delete <key> "
                                 "[noreply]\r\n");
    if (l->tok[1].n > KEY_MAX)
        return out(c, "CLIENT_ERROR bad command line format\r\n");
    char code;
    int rc = delete_once(l->tok[1], 0, 0, &code);
    if (noreply)
        return;
    if (rc < 0)
        return server_error(c, rc);
    out(c, code == 'D' ? "DELETED\r\n" : "NOT_FOUND\r\n");
}

/* An incr or decr: what is asked, and (below the line) what came of it. */
struct arith {
    int incr;              /* else decr (down to 0, never below) */
    uint64_t delta;
    int check;             /* compare the item's CAS with cas_in first */
    uint64_t cas_in;
    int vivify;            /* a miss creates the item holding init, expiring at vivify_at */
    uint64_t init, vivify_at;
    int set_ttl;           /* a hit also gets expiry `at` (ma's T) */
    uint64_t at;
    /* ---- */
    char code;             /* 'H' done, 'N' not found, 'E' CAS differs, 'V' not a number */
    int existed;           /* the key held an item before */
    uint32_t flags;        /* the item's, after */
    uint64_t value, cas;   /* the number and CAS stored */
    long long ttl;         /* seconds left, -1 none (ttl_left) */
    char num[24];          /* the number as stored */
};

static long long ttl_left(kv_txn *t, struct kv_slice key)
{
    uint64_t at = 0;
    if (kv_txn_ttl(t, key, &at) <= 0 || !at)
        return -1;
    uint64_t now = now_ms();
    return at <= now ? 0 : (long long)((at - now + 999) / 1000);
}

/* One incr or decr in a transaction of its own. The number is the item's
 * bytes read as memcached's safe_strtoull reads them: spaces before the
 * digits, and anything after a space following them, pass. */
static int arith_once(struct kv_slice key, struct arith *a)
{
    kv_txn *t;
    struct item it;
    a->code = 'N';
    a->existed = 0;
    a->num[0] = 0;
    a->ttl = -1;
    int rc = kv_txn_begin(srv.kv, 1, &key, 1, &t);
    if (rc)
        return rc;
    if ((rc = item_get(t, key, &it)) > 0) {
        size_t b = 0, e;
        uint64_t v;
        while (b < it.n && isspace((unsigned char)it.data[b]))
            b++;
        for (e = b; e < it.n && !isspace((unsigned char)it.data[e]);)
            e++;
        struct kv_slice digits = {it.data + b, e - b};
        a->existed = 1;
        rc = 0;
        if (a->check && it.cas != a->cas_in) {
            a->code = 'E';
        } else if (parse_u(&digits, 64, &v)) {
            a->code = 'V';
        } else {
            a->value = a->incr ? v + a->delta : v < a->delta ? 0 : v - a->delta;
            int len = snprintf(a->num, sizeof a->num, "%llu", (unsigned long long)a->value);
            a->flags = it.flags;
            /* memcached writes a number no longer than the old value over
             * it, padded with spaces to its length (10 decremented reads
             * "9 "); a longer one replaces it */
            char pad[64];
            size_t plen = (size_t)len;
            if (plen < it.n && it.n <= sizeof pad) {
                memset(pad, ' ', it.n);
                memcpy(pad, a->num, plen);
                plen = it.n;
            }
            rc = item_put(t, key, it.flags,
                          (struct kv_slice){plen > (size_t)len ? pad : a->num, plen},
                          (struct kv_slice){NULL, 0}, KV_KEEPTTL, &a->cas);
            if (rc >= 0 && a->set_ttl)
                rc = kv_txn_expire(t, key, a->at);
            a->code = 'H';
        }
    } else if (rc == 0 && a->vivify && !it.foreign) {
        a->value = a->init;
        int len = snprintf(a->num, sizeof a->num, "%llu", (unsigned long long)a->init);
        a->flags = 0;
        rc = item_put(t, key, 0, (struct kv_slice){a->num, (size_t)len},
                      (struct kv_slice){NULL, 0}, a->vivify_at, &a->cas);
        a->code = 'H';
    }
    if (rc >= 0 && a->code == 'H')
        a->ttl = ttl_left(t, key);
    free(it.v.p);
    return kv_txn_end(t, rc);
}

static void arith(struct conn *c, struct line *l, int incr)
{
    struct arith a = {.incr = incr};
    /* a fourth word that is not noreply is ignored, as memcached does */
    int noreply = l->n == 4 && is(&l->tok[3], "noreply");
    if (l->n != 3 && l->n != 4)
        return out(c, "ERROR\r\n");
    if (l->tok[1].n > KEY_MAX)
        return out(c, "CLIENT_ERROR bad command line format\r\n");
    if (parse_u(&l->tok[2], 64, &a.delta))
        return out(c, "CLIENT_ERROR invalid numeric delta argument\r\n");
    int rc = arith_once(l->tok[1], &a);
    if (incr)
        a.existed ? mc_thread.incr_hits++ : mc_thread.incr_misses++;
    else
        a.existed ? mc_thread.decr_hits++ : mc_thread.decr_misses++;
    if (noreply)
        return;
    if (rc < 0)
        return server_error(c, rc);
    if (a.code == 'V')
        return out(c, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    if (a.code == 'N')
        return out(c, "NOT_FOUND\r\n");
    outf(c, "%s\r\n", a.num);
}

static void touch(struct conn *c, struct line *l)
{
    long long e;
    int noreply = l->n == 4 && is(&l->tok[3], "noreply"); /* else ignored */
    if (l->n != 3 && l->n != 4)
        return out(c, "ERROR\r\n");
    if (l->tok[1].n > KEY_MAX)
        return out(c, "CLIENT_ERROR bad command line format\r\n");
    if (parse_i(&l->tok[2], &e))
        return out(c, "CLIENT_ERROR invalid exptime argument\r\n");
    struct item it;
    int rc = fetch_once(l->tok[1], 1, expiry_of(e), &it);
    free(it.v.p);
    if (noreply)
        return;
    if (rc < 0)
        return server_error(c, rc);
    out(c, it.found ? "TOUCHED\r\n" : "NOT_FOUND\r\n");
}

/* A flush_all with a delay: when it is due (ms since the epoch, 0: none).
 * Kept in DRAM: a restart before it is due forgets it. */
static _Atomic uint64_t flush_due;

static int flush_now(void)
{
    mc_thread.cmd_flush++;
    return kv_flush(srv.kv);
}

/* Run a flush_all whose time has come (before each command). */
static void flush_if_due(void)
{
    uint64_t due = atomic_load(&flush_due);
    if (due && now_ms() >= due && atomic_compare_exchange_strong(&flush_due, &due, 0))
        flush_now();
}

static void flush_all(struct conn *c, struct line *l)
{
    /* flush_all [delay] [noreply]: a last word that is not noreply is
     * ignored, and a negative delay means now, as in memcached */
    int noreply = l->n >= 2 && is(&l->tok[l->n - 1], "noreply");
    long long delay = 0;
    if (l->n > 3)
        return out(c, "ERROR\r\n");
    if (l->n >= 2 && !is(&l->tok[1], "noreply") && parse_i(&l->tok[1], &delay))
        return out(c, "CLIENT_ERROR invalid exptime argument\r\n");
    int rc = 0;
    if (delay > 0)
        atomic_store(&flush_due, expiry_of(delay));
    else
        rc = flush_now();
    if (noreply)
        return;
    if (rc < 0)
        return server_error(c, rc);
    out(c, "OK\r\n");
}

static const char *const stat_names[MC_STATS] = {
    "cmd_get", "cmd_set", "cmd_flush", "cmd_touch", "get_hits", "get_misses", "delete_misses",
    "delete_hits", "incr_misses", "incr_hits", "decr_misses", "decr_hits", "cas_misses",
    "cas_hits", "cas_badval", "touch_hits", "touch_misses"};

/* memcached's -m, what its stats call limit_maxbytes and maxbytes: the
 * bytes items may take before storing evicts, --max-memory here; without
 * it, the pool's size is all that bounds them. */
static uint64_t mc_maxbytes(const struct kv_info *ki)
{
    uint64_t limit = atomic_load(&srv.max_memory);
    return limit ? limit : ki->pool_max_size;
}

/* A stat: text "STAT name value", binary (h not NULL) a response whose key
 * is the name and value the value; stats_end ends the list. */
static void stat_put(struct conn *c, const struct bin_hdr *h, const char *name, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));
static void stat_put(struct conn *c, const struct bin_hdr *h, const char *name, const char *fmt,
                     ...)
{
    char v[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof v ? (size_t)n : sizeof v - 1;
    if (h)
        return bin_reply(c, h, BIN_OK, NULL, 0, name, strlen(name), v, len, 0);
    outf(c, "STAT %s %.*s\r\n", name, (int)len, v);
}

static void stats_end(struct conn *c, const struct bin_hdr *h)
{
    if (h)
        return bin_reply(c, h, BIN_OK, NULL, 0, NULL, 0, NULL, 0, 0);
    out(c, "END\r\n");
}

static void mc_stats_general(struct conn *c, const struct bin_hdr *h)
{
    struct kv_info ki;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    stats_publish(); /* this thread's own counts too */
    kv_info(srv.kv, &ki);
    stat_put(c, h, "pid", "%d", (int)getpid());
    stat_put(c, h, "uptime", "%lld", (long long)ts.tv_sec - srv.started);
    stat_put(c, h, "time", "%lld", (long long)(now_ms() / 1000));
    stat_put(c, h, "version", "%s", MC_VERSION);
    stat_put(c, h, "pointer_size", "%d", (int)(8 * sizeof(void *)));
    stat_put(c, h, "max_connections", "%u", srv.max_clients);
    stat_put(c, h, "curr_connections", "%llu", (unsigned long long)atomic_load(&srv.clients));
    stat_put(c, h, "total_connections", "%llu",
             (unsigned long long)atomic_load(&srv.conns_total));
    stat_put(c, h, "rejected_connections", "%llu",
             (unsigned long long)atomic_load(&srv.rejected));
    for (int i = 0; i < MC_STATS; i++)
        stat_put(c, h, stat_names[i], "%llu", (unsigned long long)atomic_load(&srv.mc[i]));
    stat_put(c, h, "threads", "%u", srv.threads);
    stat_put(c, h, "limit_maxbytes", "%llu", (unsigned long long)mc_maxbytes(&ki));
    stat_put(c, h, "bytes", "%llu", (unsigned long long)ki.bytes);
    stat_put(c, h, "curr_items", "%llu", (unsigned long long)ki.keys);
    stat_put(c, h, "evictions", "%llu", (unsigned long long)ki.evictions);
    stats_end(c, h);
}

static void mc_stats_settings(struct conn *c, const struct bin_hdr *h)
{
    struct kv_info ki;
    kv_info(srv.kv, &ki);
    stat_put(c, h, "maxconns", "%u", srv.max_clients);
    stat_put(c, h, "tcpport", "%d", srv.mc_port);
    stat_put(c, h, "domain_socket", "%s", srv.mc_unix_path ? srv.mc_unix_path : "NULL");
    stat_put(c, h, "item_size_max", "%zu", srv.lim.max_bulk);
    stat_put(c, h, "num_threads", "%u", srv.threads);
    stat_put(c, h, "maxbytes", "%llu", (unsigned long long)mc_maxbytes(&ki));
    stat_put(c, h, "evictions", "%s", srv.max_memory ? "on" : "off");
    stat_put(c, h, "cas_enabled", "yes");
    stats_end(c, h);
}

static void mc_stats_reset(void)
{
    stats_publish();
    for (int i = 0; i < MC_STATS; i++)
        atomic_store(&srv.mc[i], 0);
}

/* stats [ARG]: 0, or -1 for an argument it does not know */
static int stats_of(struct conn *c, const struct bin_hdr *h, const struct kv_slice *arg)
{
    if (!arg)
        return mc_stats_general(c, h), 0;
    if (is(arg, "settings"))
        return mc_stats_settings(c, h), 0;
    if (is(arg, "items") || is(arg, "slabs") || is(arg, "sizes") || is(arg, "conns"))
        return stats_end(c, h), 0; /* no slab classes here */
    if (is(arg, "reset")) {
        mc_stats_reset();
        h ? stats_end(c, h) : out(c, "RESET\r\n");
        return 0;
    }
    return -1;
}

static void stats(struct conn *c, struct line *l)
{
    if (l->n > 2 || stats_of(c, NULL, l->n == 2 ? &l->tok[1] : NULL))
        out(c, "ERROR\r\n");
}

/* cache_memlimit MEGABYTES [noreply]: memcached's -m at run time, the
 * --max-memory of the storage commands' eviction (memcached 1.6.18's
 * bounds and replies). */
static void memlimit(struct conn *c, const struct line *l)
{
    uint64_t mb;
    if (l->n < 2 || l->n > 3 || parse_u64(&l->tok[1], &mb))
        return out(c, "ERROR\r\n");
    if (mb < 8)
        return out(c, "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n");
    if (mb > 1000000000)
        return out(c, "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n");
    atomic_store(&srv.max_memory, mb << 20);
    out(c, "OK\r\n");
}

/* ---- the meta commands: mn, mg, ms, md, ma, me (1.6's protocol.txt,
 * "Meta Commands"; replies as memcached 1.6.18's). A request is a command,
 * a key, for ms a length, then flags: one letter each, some with a token
 * glued to it. Flags that ask for something are answered in the order
 * given. Not kept: whether an item was fetched and when (h answers 0, l
 * 0: docs/kvstore.md). */

#define OPAQUE_MAX 32

struct meta {
    struct kv_slice key;       /* the key to look up (decoded with b) */
    struct kv_slice key_given; /* as sent: what k returns */
    char raw[KEY_MAX + 1];     /* the decoded key's bytes */
    const struct kv_slice *tok[128]; /* each flag's token (past its letter) */
    char order[24];            /* the flags, in the request's order */
    size_t n;
};

static int b64_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* Decode base64 s into out (at most cap bytes): the length, or -1. */
static long b64_decode(const struct kv_slice *s, char *out, size_t cap)
{
    if (!s->n || s->n % 4)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < s->n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            unsigned char ch = (unsigned char)s->p[i + k];
            if (ch == '=' && i + 4 == s->n && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = b64_value(ch)) < 0) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        for (int k = 0; k < 3 - pad; k++) {
            if (n == cap)
                return -1;
            out[n++] = (char)(w >> (16 - 8 * k));
        }
    }
    return (long)n;
}

/* Read the flags of tokens l->tok[first...] allowed by `valid`; the key is
 * l->tok[1]. NULL, or memcached's error line. */
static const char *meta_parse(const struct line *l, size_t first, const char *valid,
                              struct meta *m)
{
    memset(m->tok, 0, sizeof m->tok);
    m->n = 0;
    for (size_t i = first; i < l->n; i++) {
        unsigned char ch = (unsigned char)l->tok[i].p[0];
        if (ch >= 128 || !strchr(valid, ch))
            return "CLIENT_ERROR invalid flag\r\n";
        if (m->tok[ch])
            return "CLIENT_ERROR duplicate flag\r\n";
        m->tok[ch] = &l->tok[i];
        m->order[m->n++] = (char)ch;
    }
    if (m->tok['O'] && m->tok['O']->n - 1 > OPAQUE_MAX)
        return "CLIENT_ERROR opaque token too long\r\n";
    m->key_given = l->tok[1];
    m->key = l->tok[1];
    if (m->tok['b']) {
        long n = b64_decode(&l->tok[1], m->raw, KEY_MAX);
        if (n <= 0)
            return "CLIENT_ERROR error decoding key\r\n";
        m->key = (struct kv_slice){m->raw, (size_t)n};
    }
    if (m->key.n > KEY_MAX)
        return "CLIENT_ERROR bad command line format\r\n";
    return NULL;
}

/* Flag ch's token as a number: 0, or -1 when absent-or-bad (*present
 * tells which). Signed for TTLs. */
static int meta_num(const struct meta *m, char ch, int sign, long long *v, int *present)
{
    const struct kv_slice *t = m->tok[(unsigned char)ch];
    *present = t != NULL;
    if (!t)
        return 0;
    struct kv_slice s = {t->p + 1, t->n - 1};
    if (sign)
        return parse_i(&s, v);
    uint64_t u;
    if (parse_u(&s, 64, &u))
        return -1;
    *v = (long long)u;
    return 0;
}

/* What an answered flag needs of the item. */
struct meta_item {
    int found;
    uint64_t cas;
    uint32_t flags;
    size_t size;
    long long ttl; /* seconds left, -1 none */
};

/* The flags that return something, in the request's order. On a miss
 * only O and k come back, as in memcached. */
static void meta_flags(struct conn *c, const struct meta *m, const struct meta_item *it,
                       const char *skip)
{
    for (size_t i = 0; i < m->n; i++) {
        char ch = m->order[i];
        const struct kv_slice *t = m->tok[(unsigned char)ch];
        if (strchr(skip, ch))
            continue;
        if (ch == 'O')
            outf(c, " %.*s", (int)t->n, t->p);
        else if (ch == 'k')
            outf(c, " k%.*s%s", (int)m->key_given.n, m->key_given.p, m->tok['b'] ? " b" : "");
        else if (!it->found)
            continue;
        else if (ch == 'c')
            outf(c, " c%llu", (unsigned long long)it->cas);
        else if (ch == 'f')
            outf(c, " f%u", (unsigned)it->flags);
        else if (ch == 's')
            outf(c, " s%zu", it->size);
        else if (ch == 't')
            outf(c, " t%lld", it->ttl);
        else if (ch == 'h' || ch == 'l')
            outf(c, " %c0", ch);
    }
}

/* mg <key> <flags>* */
static void meta_get(struct conn *c, struct line *l)
{
    struct meta m;
    if (l->n < 2)
        return out(c, "ERROR\r\n");
    const char *err = meta_parse(l, 2, "bcfhklOqstuvENRTPL", &m);
    if (err)
        return out(c, err);
    long long ttl_new = 0, vivify = 0, recache = 0;
    int has_t = 0, has_n = 0, has_r = 0;
    if (meta_num(&m, 'T', 1, &ttl_new, &has_t) || meta_num(&m, 'N', 1, &vivify, &has_n) ||
        meta_num(&m, 'R', 1, &recache, &has_r))
        return out(c, "CLIENT_ERROR bad token in command line format\r\n");
    kv_txn *t;
    struct item it;
    struct meta_item mi;
    int won, rc;
    /* a read, unless it changes the item: T, N, or a win to record (then
     * read again in a write transaction) */
    for (int write = has_t || has_n;; write = 1) {
        memset(&mi, 0, sizeof mi);
        won = 0;
        if ((rc = kv_txn_begin(srv.kv, 1, &m.key, write, &t)))
            return server_error(c, rc);
        if ((rc = item_get(t, m.key, &it)) > 0) {
            mi = (struct meta_item){1, it.cas, it.flags, it.n, ttl_left(t, m.key)};
            rc = 0;
            /* a stale item, or one whose TTL is under R, goes to the first
             * client that asks: W, later ones Z */
            won = !(it.state & CAS_WON) &&
                  ((it.state & CAS_STALE) || (has_r && mi.ttl != -1 && mi.ttl < recache));
            if (won && !write) {
                free(it.v.p);
                kv_txn_end(t, 0);
                continue;
            }
            if (won)
                rc = item_write(t, m.key, it.flags, (struct kv_slice){it.data, it.n},
                                (struct kv_slice){NULL, 0}, KV_KEEPTTL, it.cas,
                                it.state | CAS_WON);
            if (rc >= 0 && has_t) {
                uint64_t at = expiry_of(ttl_new);
                rc = at == 1 ? kv_txn_del(t, m.key) : kv_txn_expire(t, m.key, at);
            }
        } else if (rc == 0 && has_n && !it.foreign) { /* vivify: an empty item, this client won */
            uint64_t at = expiry_of(vivify), cas = new_cas();
            rc = item_write(t, m.key, 0, (struct kv_slice){NULL, 0}, (struct kv_slice){NULL, 0},
                            at, cas, CAS_WON);
            mi = (struct meta_item){1, cas, 0, 0, vivify ? vivify : -1};
            it.data = "";
            won = 1;
        }
        break;
    }
    rc = kv_txn_end(t, rc);
    mc_thread.cmd_get++;
    mi.found ? mc_thread.get_hits++ : mc_thread.get_misses++;
    if (rc < 0) {
        free(it.v.p);
        return server_error(c, rc);
    }
    if (!mi.found) {
        if (!m.tok['q']) {
            out(c, "EN");
            meta_flags(c, &m, &mi, "");
            out(c, "\r\n");
        }
    } else {
        int stale = (it.state & CAS_STALE) != 0;
        if (m.tok['v'])
            outf(c, "VA %zu", mi.size);
        else
            out(c, "HD");
        meta_flags(c, &m, &mi, "");
        /* memcached's order: X W for a win, Z X after one */
        if (won)
            out(c, stale ? " X W" : " W");
        else if (it.state & CAS_WON)
            out(c, stale ? " Z X" : " Z");
        else if (stale)
            out(c, " X");
        out(c, "\r\n");
        if (m.tok['v']) {
            buf_add(&c->out, it.data, mi.size);
            out(c, "\r\n");
        }
    }
    free(it.v.p);
}

/* ms <key> <datalen> <flags>*: 1 run (or refused), 0 wait for the data */
static int meta_set(struct conn *c, struct line *l, size_t line_len, const char *p, size_t n,
                    size_t *used)
{
    struct meta m;
    long long bytes;
    *used = line_len;
    if (l->n < 2)
        return out(c, "ERROR\r\n"), 1;
    if (l->n < 3 || parse_i(&l->tok[2], &bytes) || bytes < 0 || bytes > INT32_MAX - 2)
        return out(c, "CLIENT_ERROR bad command line format\r\n"), 1;
    const char *err = meta_parse(l, 3, "bcCEFIkOqsSTMPL", &m);
    long long ttl = 0, flags = 0, cas_in = 0;
    int has_t = 0, has_f = 0, has_c = 0;
    if (!err && meta_num(&m, 'F', 0, &flags, &has_f))
        err = "CLIENT_ERROR bad command line format\r\n";
    if (!err && (meta_num(&m, 'T', 1, &ttl, &has_t) || meta_num(&m, 'C', 0, &cas_in, &has_c)))
        err = "CLIENT_ERROR bad token in command line format\r\n";
    int op = SET; /* C compares in any mode (store_once's check) */
    const struct kv_slice *mode = m.tok['M'];
    if (!err && mode) {
        char ch = mode->n == 2 ? mode->p[1] : 0;
        if (ch == 'E' || ch == 'e')
            op = ADD;
        else if (ch == 'A' || ch == 'a')
            op = APPEND;
        else if (ch == 'P' || ch == 'p')
            op = PREPEND;
        else if (ch == 'R' || ch == 'r')
            op = REPLACE;
        else if (ch != 'S' && ch != 's')
            err = "CLIENT_ERROR invalid mode for ms M token\r\n";
    }
    size_t total = line_len + (size_t)bytes + 2;
    if (err || (size_t)bytes > srv.lim.max_bulk) {
        /* the data that follows is skipped as it comes */
        out(c, err ? err : "SERVER_ERROR object too large for cache\r\n");
        c->mc_swallow = (size_t)bytes + 2;
        return 1;
    }
    if (n < total)
        return 0;
    *used = total;
    const char *data = p + line_len;
    if (data[bytes] != '\r' || data[bytes + 1] != '\n')
        return out(c, "CLIENT_ERROR bad data chunk\r\n"), 1;
    const char *reply = "STORED\r\n";
    uint64_t at = expiry_of(ttl), cas = 0;
    struct kv_slice d = {data, (size_t)bytes};
    int rc = store_retry(op, has_c, m.tok['I'] != NULL, m.key, (uint32_t)flags, at, d,
                         (uint64_t)cas_in, &reply, &cas);
    if (rc < 0)
        return server_error(c, rc), 1;
    /* c answers 0 when nothing was stored, as memcached */
    struct meta_item mi = {1, reply[0] == 'S' ? cas : 0, (uint32_t)flags, d.n, -1};
    const char *code = reply[0] == 'S'   ? "HD"
                       : reply[0] == 'E' ? "EX"
                       : reply[4] == 'F' ? "NF"
                                         : "NS";
    if (m.tok['q'] && code[0] == 'H')
        return 1;
    out(c, code);
    meta_flags(c, &m, &mi, "fst");
    out(c, "\r\n");
    return 1;
}

/* md <key> <flags>* */
static void meta_delete(struct conn *c, struct line *l)
{
    struct meta m;
    if (l->n < 2)
        return out(c, "ERROR\r\n");
    const char *err = meta_parse(l, 2, "bCEIkOqTxPL", &m);
    long long cas_in = 0, ttl = 0;
    int has_c = 0, has_t = 0;
    if (!err && (meta_num(&m, 'C', 0, &cas_in, &has_c) || meta_num(&m, 'T', 1, &ttl, &has_t)))
        err = "CLIENT_ERROR invalid or duplicate flag\r\n";
    if (err)
        return out(c, err);
    kv_txn *t;
    struct item it;
    const char *code = "NF";
    int rc = kv_txn_begin(srv.kv, 1, &m.key, 1, &t);
    if (rc)
        return server_error(c, rc);
    if ((rc = item_get(t, m.key, &it)) > 0) {
        rc = 0;
        if (has_c && it.cas != (uint64_t)cas_in) {
            code = "EX";
        } else if (m.tok['I']) { /* kept, stale, with a new CAS (and T) */
            code = "HD";
            uint64_t at = has_t ? expiry_of(ttl) : KV_KEEPTTL;
            rc = at == 1 ? kv_txn_del(t, m.key)
                         : item_write(t, m.key, it.flags, (struct kv_slice){it.data, it.n},
                                      (struct kv_slice){NULL, 0}, at, new_cas(), CAS_STALE);
        } else {
            code = "HD";
            rc = kv_txn_del(t, m.key);
        }
    }
    free(it.v.p);
    rc = kv_txn_end(t, rc);
    code[0] == 'H' ? mc_thread.delete_hits++ : mc_thread.delete_misses++;
    if (rc < 0)
        return server_error(c, rc);
    if (m.tok['q'] && code[0] == 'H')
        return;
    struct meta_item mi = {0};
    out(c, code);
    meta_flags(c, &m, &mi, "");
    out(c, "\r\n");
}

/* ma <key> <flags>* */
static void meta_arith(struct conn *c, struct line *l)
{
    struct meta m;
    if (l->n < 2)
        return out(c, "ERROR\r\n");
    const char *err = meta_parse(l, 2, "bCENJDTMqtcvkOPL", &m);
    long long cas_in = 0, vivify = 0, init = 0, delta = 1, ttl = 0;
    int has_c = 0, has_n = 0, has_j = 0, has_d = 0, has_t = 0;
    if (!err && (meta_num(&m, 'C', 0, &cas_in, &has_c) || meta_num(&m, 'N', 1, &vivify, &has_n) ||
                 meta_num(&m, 'J', 0, &init, &has_j) || meta_num(&m, 'D', 0, &delta, &has_d) ||
                 meta_num(&m, 'T', 1, &ttl, &has_t)))
        err = "CLIENT_ERROR invalid or duplicate flag\r\n";
    int incr = 1;
    const struct kv_slice *mode = m.tok['M'];
    if (!err && mode) {
        char ch = mode->n == 2 ? mode->p[1] : 0;
        if (ch == 'D' || ch == 'd' || ch == '-')
            incr = 0;
        else if (ch != 'I' && ch != 'i' && ch != '+')
            err = "CLIENT_ERROR invalid mode for ma M token\r\n";
    }
    if (err)
        return out(c, err);
    struct arith a = {.incr = incr,
                      .delta = (uint64_t)delta,
                      .check = has_c,
                      .cas_in = (uint64_t)cas_in,
                      .vivify = has_n,
                      .init = (uint64_t)init,
                      .vivify_at = expiry_of(vivify),
                      .set_ttl = has_t,
                      .at = expiry_of(ttl)};
    int rc = arith_once(m.key, &a);
    struct meta_item mi = {0};
    if (a.code == 'H')
        mi = (struct meta_item){1, a.cas, a.flags, strlen(a.num), a.ttl};
    incr ? (mi.found ? mc_thread.incr_hits++ : mc_thread.incr_misses++)
         : (mi.found ? mc_thread.decr_hits++ : mc_thread.decr_misses++);
    if (rc < 0)
        return server_error(c, rc);
    if (a.code == 'V')
        return out(c, "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n");
    const char *code = a.code == 'H' ? "HD" : a.code == 'E' ? "EX" : "NF";
    if (m.tok['q'] && code[0] == 'H')
        return;
    if (code[0] == 'H' && m.tok['v'])
        outf(c, "VA %zu", strlen(a.num));
    else
        out(c, code);
    meta_flags(c, &m, &mi, "fs");
    out(c, "\r\n");
    if (code[0] == 'H' && m.tok['v'])
        outf(c, "%s\r\n", a.num);
}

/* me <key> [b]: the item's metadata, for people; memcached's fields, ours
 * where the store has none (la 0, fetch no, class 1) */
static void meta_debug(struct conn *c, struct line *l)
{
    struct meta m;
    if (l->n < 2)
        return out(c, "CLIENT_ERROR bad command line format\r\n");
    const char *err = meta_parse(l, 2, "b", &m);
    if (err)
        return out(c, err);
    kv_txn *t;
    struct item it;
    long long ttl = -1;
    int rc = kv_txn_begin(srv.kv, 1, &m.key, 0, &t);
    if (rc)
        return server_error(c, rc);
    if ((rc = item_get(t, m.key, &it)) > 0)
        ttl = ttl_left(t, m.key);
    rc = kv_txn_end(t, rc);
    if (rc < 0) {
        free(it.v.p);
        return server_error(c, rc);
    }
    if (!it.found)
        out(c, "EN\r\n");
    else
        outf(c, "ME %.*s exp=%lld la=0 cas=%llu fetch=no cls=1 size=%zu\r\n",
             (int)m.key_given.n, m.key_given.p, ttl, (unsigned long long)it.cas,
             it.n + m.key.n + 48);
    free(it.v.p);
}

/* ---- the binary protocol's commands */

enum bin_kind { B_GET, B_GAT, B_TOUCH, B_STORE, B_CAT, B_DELETE, B_ARITH, B_QUIT, B_FLUSH,
                B_NOOP, B_VERSION, B_STAT };

/* What a kind of request carries: the extras lengths it takes (a bit per
 * length: 1 << len), its key (0 none, 1 one, 2 one or none) and whether a
 * value follows. Anything else is "Invalid arguments", and memcached then
 * closes the connection. */
static const struct {
    uint32_t ext;
    uint8_t key, value;
} bin_shape[] = {
    [B_GET] = {1u << 0, 1, 0},      [B_GAT] = {1u << 4, 1, 0},   [B_TOUCH] = {1u << 4, 1, 0},
    [B_STORE] = {1u << 8, 1, 1},    [B_CAT] = {1u << 0, 1, 1},   [B_DELETE] = {1u << 0, 1, 0},
    [B_ARITH] = {1u << 20, 1, 0},   [B_QUIT] = {1u << 0, 0, 0},  [B_FLUSH] = {1u << 0 | 1u << 4, 0, 0},
    [B_NOOP] = {1u << 0, 0, 0},     [B_VERSION] = {1u << 0, 0, 0}, [B_STAT] = {1u << 0, 2, 0},
};

#define BQ 1 /* quiet: no response when it succeeds (a get: when it misses) */
#define BK 2 /* the response names the key (getk, gatk) */

/* The opcodes served (anything else, verbosity and SASL included, is
 * "Unknown command" as in memcached 1.6.18): kind, the text protocol's
 * storage op or incr (1) / decr (0), flags. */
static const struct {
    uint8_t kind, sub, flags;
} bin_ops[256] = {
    [0x00] = {B_GET, 0, 0},          [0x09] = {B_GET, 0, BQ},
    [0x0c] = {B_GET, 0, BK},         [0x0d] = {B_GET, 0, BQ | BK},
    [0x1d] = {B_GAT, 0, 0},          [0x1e] = {B_GAT, 0, BQ},
    [0x23] = {B_GAT, 0, BK},         [0x24] = {B_GAT, 0, BQ | BK},
    [0x1c] = {B_TOUCH, 0, 0},
    [0x01] = {B_STORE, SET, 0},      [0x11] = {B_STORE, SET, BQ},
    [0x02] = {B_STORE, ADD, 0},      [0x12] = {B_STORE, ADD, BQ},
    [0x03] = {B_STORE, REPLACE, 0},  [0x13] = {B_STORE, REPLACE, BQ},
    [0x0e] = {B_CAT, APPEND, 0},     [0x19] = {B_CAT, APPEND, BQ},
    [0x0f] = {B_CAT, PREPEND, 0},    [0x1a] = {B_CAT, PREPEND, BQ},
    [0x04] = {B_DELETE, 0, 0},       [0x14] = {B_DELETE, 0, BQ},
    [0x05] = {B_ARITH, 1, 0},        [0x15] = {B_ARITH, 1, BQ},
    [0x06] = {B_ARITH, 0, 0},        [0x16] = {B_ARITH, 0, BQ},
    [0x07] = {B_QUIT, 0, 0},         [0x17] = {B_QUIT, 0, BQ},
    [0x08] = {B_FLUSH, 0, 0},        [0x18] = {B_FLUSH, 0, BQ},
    [0x0a] = {B_NOOP, 0, 0},         [0x0b] = {B_VERSION, 0, 0},
    [0x10] = {B_STAT, 0, 0},
};
/* kind 0 is B_GET: an opcode is served when its row is set */
static int bin_served(uint8_t op)
{
    return op == 0x00 || bin_ops[op].kind || bin_ops[op].sub || bin_ops[op].flags;
}

/* A get, gat or touch. */
static void bin_fetch(struct conn *c, const struct bin_hdr *h, struct kv_slice key,
                      const char *ext)
{
    int kind = bin_ops[h->op].kind, fl = bin_ops[h->op].flags;
    struct item it;
    uint64_t at = kind == B_GET ? 0 : expiry_of((long long)get_be(ext, 4));
    int rc = fetch_once(key, kind != B_GET, at, &it);
    if (rc < 0) {
        bin_server_error(c, h, rc);
    } else if (it.found) {
        char flags[4];
        put_be(flags, it.flags, 4);
        bin_reply(c, h, BIN_OK, flags, 4, key.p, fl & BK ? key.n : 0, it.data,
                  kind == B_TOUCH ? 0 : it.n, it.cas);
    } else if (!(fl & BQ)) {
        if (fl & BK) /* getk's miss names the key, with no text */
            bin_reply(c, h, BIN_ENOENT, NULL, 0, key.p, key.n, NULL, 0, 0);
        else
            bin_error(c, h, BIN_ENOENT);
    }
    free(it.v.p);
}

/* set, add, replace (a CAS in the header makes them compare it first),
 * append, prepend. */
static void bin_store(struct conn *c, const struct bin_hdr *h, struct kv_slice key,
                      const char *ext, struct kv_slice data)
{
    int op = bin_ops[h->op].sub, check = h->cas != 0;
    uint32_t flags = 0;
    uint64_t at = 0, cas = 0;
    const char *reply = "STORED\r\n";
    if (ext) {
        flags = (uint32_t)get_be(ext, 4);
        at = expiry_of((long long)get_be(ext + 4, 4));
    }
    if (op == SET && check)
        op = CAS;
    int rc = store_retry(op, check, 0, key, flags, at, data, h->cas, &reply, &cas);
    if (rc < 0)
        return bin_server_error(c, h, rc);
    enum bin_status st = reply[0] == 'S'   ? BIN_OK
                         : reply[0] == 'E' ? BIN_EEXISTS
                         : op == ADD       ? BIN_EEXISTS /* "not stored": it is there */
                         : op == APPEND || op == PREPEND ? BIN_NOT_STORED
                         : BIN_ENOENT; /* replace, or a CAS, of a missing key */
    if (st != BIN_OK)
        return bin_error(c, h, st);
    if (!(bin_ops[h->op].flags & BQ))
        bin_reply(c, h, BIN_OK, NULL, 0, NULL, 0, NULL, 0, cas);
}

static void bin_delete(struct conn *c, const struct bin_hdr *h, struct kv_slice key)
{
    char code;
    int rc = delete_once(key, h->cas != 0, h->cas, &code);
    if (rc < 0)
        return bin_server_error(c, h, rc);
    if (code != 'D')
        return bin_error(c, h, code == 'E' ? BIN_EEXISTS : BIN_ENOENT);
    if (!(bin_ops[h->op].flags & BQ))
        bin_reply(c, h, BIN_OK, NULL, 0, NULL, 0, NULL, 0, 0);
}

/* incr, decr: delta, initial value and expiry in the extras; a miss
 * creates the item holding the initial value unless the expiry is
 * 0xffffffff. */
static void bin_arith(struct conn *c, const struct bin_hdr *h, struct kv_slice key,
                      const char *ext)
{
    uint64_t exp = get_be(ext + 16, 4);
    struct arith a = {.incr = bin_ops[h->op].sub,
                      .delta = get_be(ext, 8),
                      .check = h->cas != 0,
                      .cas_in = h->cas,
                      .vivify = exp != 0xffffffffu,
                      .init = get_be(ext + 8, 8),
                      .vivify_at = expiry_of((long long)exp)};
    int rc = arith_once(key, &a);
    if (a.incr)
        a.existed ? mc_thread.incr_hits++ : mc_thread.incr_misses++;
    else
        a.existed ? mc_thread.decr_hits++ : mc_thread.decr_misses++;
    if (rc < 0)
        return bin_server_error(c, h, rc);
    if (a.code != 'H')
        return bin_error(c, h,
                         a.code == 'E' ? BIN_EEXISTS : a.code == 'V' ? BIN_DELTA_BADVAL : BIN_ENOENT);
    if (!(bin_ops[h->op].flags & BQ)) {
        char v[8];
        put_be(v, a.value, 8);
        bin_reply(c, h, BIN_OK, NULL, 0, NULL, 0, v, 8, a.cas);
    }
}

/* One binary request at p[0, n): the bytes it took (0: not all here). */
static size_t bin_run(struct conn *c, const char *p, size_t n)
{
    if (n < BIN_HDR)
        return 0;
    struct bin_hdr h = {.op = (uint8_t)p[1],
                        .keylen = (uint16_t)get_be(p + 2, 2),
                        .extlen = (uint8_t)p[4],
                        .bodylen = (uint32_t)get_be(p + 8, 4),
                        .cas = get_be(p + 16, 8)};
    memcpy(h.opaque, p + 12, 4);
    /* a request that closes the connection takes its header only, so that
       what it takes never depends on how much else has arrived */
    if ((unsigned char)p[0] != BIN_REQ) { /* memcached closes on a bad magic byte */
        c->closing = 1;
        return BIN_HDR;
    }
    flush_if_due();
    thread_commands++;
    size_t body = h.bodylen, head = (size_t)h.keylen + h.extlen;
    if (head > body) { /* memcached: "Unknown command", and it closes */
        bin_error(c, &h, BIN_UNKNOWN);
        c->closing = 1;
        return BIN_HDR;
    }
    size_t vlen = body - head;
    if (!bin_served(h.op)) { /* answered; the body skipped as it comes (mc_run) */
        bin_error(c, &h, BIN_UNKNOWN);
        c->mc_swallow = body;
        return BIN_HDR;
    }
    int kind = bin_ops[h.op].kind;
    if (h.extlen > 20 || !(bin_shape[kind].ext >> h.extlen & 1) || h.keylen > KEY_MAX ||
        (bin_shape[kind].key == 1 && !h.keylen) || (!bin_shape[kind].key && h.keylen) ||
        (!bin_shape[kind].value && vlen)) {
        bin_error(c, &h, BIN_EINVAL);
        c->closing = 1;
        return BIN_HDR;
    }
    if (bin_shape[kind].value && vlen > srv.lim.max_bulk) {
        /* as the text protocol: refused, the data skipped, and a set's
           key loses its old value (so its key is waited for) */
        if (n - BIN_HDR < head)
            return 0;
        bin_error(c, &h, BIN_E2BIG);
        if (bin_ops[h.op].sub == SET && kind == B_STORE)
            drop((struct kv_slice){p + BIN_HDR + h.extlen, h.keylen});
        c->mc_swallow = vlen;
        return BIN_HDR + head;
    }
    if (n - BIN_HDR < body)
        return 0;
    const char *ext = h.extlen ? p + BIN_HDR : NULL;
    struct kv_slice key = {p + BIN_HDR + h.extlen, h.keylen};
    struct kv_slice data = {p + BIN_HDR + head, vlen};
    int quiet = bin_ops[h.op].flags & BQ;
    switch (kind) {
    case B_GET:
    case B_GAT:
    case B_TOUCH:
        bin_fetch(c, &h, key, ext);
        break;
    case B_STORE:
    case B_CAT:
        bin_store(c, &h, key, ext, data);
        break;
    case B_DELETE:
        bin_delete(c, &h, key);
        break;
    case B_ARITH:
        bin_arith(c, &h, key, ext);
        break;
    case B_QUIT:
        if (!quiet)
            bin_reply(c, &h, BIN_OK, NULL, 0, NULL, 0, NULL, 0, 0);
        c->closing = 1;
        break;
    case B_FLUSH: {
        long long delay = ext ? (long long)get_be(ext, 4) : 0;
        int rc = 0;
        if (delay > 0)
            atomic_store(&flush_due, expiry_of(delay));
        else
            rc = flush_now();
        if (rc < 0)
            bin_server_error(c, &h, rc);
        else if (!quiet)
            bin_reply(c, &h, BIN_OK, NULL, 0, NULL, 0, NULL, 0, 0);
        break;
    }
    case B_NOOP:
        bin_reply(c, &h, BIN_OK, NULL, 0, NULL, 0, NULL, 0, 0);
        break;
    case B_VERSION:
        bin_reply(c, &h, BIN_OK, NULL, 0, NULL, 0, MC_VERSION, strlen(MC_VERSION), 0);
        break;
    case B_STAT:
        if (stats_of(c, &h, key.n ? &key : NULL))
            bin_error(c, &h, BIN_ENOENT);
        break;
    }
    return BIN_HDR + body;
}

/* Does memcached take this line's last word as noreply? It does for the
 * commands that have one, given a word count it runs them with; it then
 * sends no reply at all, not even an error: a client that sent noreply
 * reads none, and would take one for the next command's. */
static int silent(const struct line *l)
{
    static const struct {
        const char *cmd;
        size_t min, max; /* words, noreply included */
    } has[] = {{"set", 5, 6},     {"add", 5, 6},   {"replace", 5, 6}, {"append", 5, 6},
               {"prepend", 5, 6}, {"cas", 6, 7},   {"incr", 3, 4},    {"decr", 3, 4},
               {"touch", 3, 4},   {"delete", 3, 4}, {"flush_all", 2, 3}, {"verbosity", 3, 3},
               {"cache_memlimit", 3, 3}};
    if (!l->n || !is(&l->tok[l->n - 1], "noreply"))
        return 0;
    for (size_t i = 0; i < sizeof has / sizeof *has; i++)
        if (is(&l->tok[0], has[i].cmd))
            return l->n >= has[i].min && l->n <= has[i].max;
    return 0;
}

size_t mc_run(struct conn *c, const char *p, size_t n)
{
    if (c->mc_swallow) { /* the data of a refused storage command */
        size_t k = n < c->mc_swallow ? n : c->mc_swallow;
        c->mc_swallow -= k;
        return k;
    }
    if (!c->mc_proto && n)
        c->mc_proto = (unsigned char)p[0] == BIN_REQ ? 2 : 1;
    if (c->mc_proto == 2)
        return bin_run(c, p, n);
    const char *lf = memchr(p, '\n', n < LINE_MAX_BYTES ? n : LINE_MAX_BYTES);
    if (!lf) {
        if (n >= LINE_MAX_BYTES) {
            out(c, "CLIENT_ERROR line too long\r\n");
            c->closing = 1;
        }
        return 0;
    }
    size_t line_len = (size_t)(lf - p) + 1;
    const char *end = lf > p && lf[-1] == '\r' ? lf - 1 : lf;
    /* memcached reads the line as a C string: a NUL byte ends it ("set
     * a\0b 0 0 1" is "set a": ERROR) */
    const char *nul = memchr(p, '\0', (size_t)(end - p));
    if (nul)
        end = nul;
    struct line l;
    tokenize(&l, p, end);
    flush_if_due();
    thread_commands++;
    if (!l.n) {
        out(c, "ERROR\r\n");
        return line_len;
    }
    const struct kv_slice *cmd = &l.tok[0];
    static const char *const ops[] = {"set", "add", "replace", "append", "prepend", "cas"};
    size_t mark = c->out.len, used = line_len;
    int op = SET;
    while (op <= CAS && !is(cmd, ops[op]))
        op++;
    if (op <= CAS) {
        if (!storage(c, &l, op, line_len, p, n, &used))
            return 0; /* its data block is not all here */
    } else if (is(cmd, "ms")) {
        if (!meta_set(c, &l, line_len, p, n, &used))
            return 0;
    } else if (is(cmd, "mg"))
        meta_get(c, &l);
    else if (is(cmd, "md"))
        meta_delete(c, &l);
    else if (is(cmd, "ma"))
        meta_arith(c, &l);
    else if (is(cmd, "me"))
        meta_debug(c, &l);
    else if (is(cmd, "mn"))
        out(c, "MN\r\n");
    else if (is(cmd, "get") || is(cmd, "gets") || is(cmd, "gat") || is(cmd, "gats"))
        retrieve(c, &l, is(cmd, "gets") || is(cmd, "gats"), cmd->p[1] == 'a');
    else if (is(cmd, "delete"))
        del(c, &l);
    else if (is(cmd, "incr") || is(cmd, "decr"))
        arith(c, &l, cmd->p[0] == 'i');
    else if (is(cmd, "touch"))
        touch(c, &l);
    else if (is(cmd, "flush_all"))
        flush_all(c, &l);
    else if (is(cmd, "version"))
        out(c, "VERSION " MC_VERSION "\r\n");
    else if (is(cmd, "verbosity") && l.n >= 2 && l.n <= 3)
        is(&l.tok[l.n - 1], "noreply") ? (void)0 : out(c, "OK\r\n");
    else if (is(cmd, "quit")) /* whatever follows it */
        c->closing = 1;
    else if (is(cmd, "stats"))
        stats(c, &l);
    else if (is(cmd, "cache_memlimit"))
        memlimit(c, &l);
    else
        out(c, "ERROR\r\n");
    if (silent(&l))
        c->out.len = mark;
    return used;
}
