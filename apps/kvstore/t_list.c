/* t_list.c - the list commands (LPUSH ... LMPOP): Redis 7.0's replies and
 * error texts, each in one store transaction (its own or EXEC's).
 *
 * A list is one value of type KV_LIST in one of two forms (little endian
 * numbers), chosen by its size as Redis's list-max-listpack-size chooses
 * a node's (-2, 8 KB, by default; CONFIG SET changes it):
 *  - packed, up to the limit of packs() (8 KB by default): a 4-byte element count, then per
 *    element a 4-byte length and its bytes, head first, as a hash is
 *    packed (t_hash.c). A change writes the record again: O(its bytes).
 *  - big: a header {BIG_MAGIC (4 bytes, never a packed count: it would
 *    need 16 GiB), 4 unused, count, head, end (8 bytes each)}, then free
 *    room, then the elements from byte `head` to byte `end`, each as its
 *    length, its bytes and its length again (so that the tail's last one
 *    is found from `end`), then free room. A push or a pop at either end
 *    writes the element's bytes and the header only (through the value's
 *    handle, kv_txn_open_as: the key found once a command; a value past
 *    64 KiB is in pieces, store.c, so only the pieces touched are read
 *    and written): O(1) element work. LPUSH takes the room before
 *    `head`; when there is none, or when the free room outgrows twice the
 *    elements, the list is written again with half its size free in
 *    front (amortized O(1)). The other commands read and write the whole
 *    list, as their Redis counterparts are O(n) too.
 * A big list that shrinks to half that limit is packed again (the gap
 * keeps a list at the threshold from changing form at each push and pop);
 * an emptied list is deleted, as in Redis. Either change happens inside
 * the command's transaction, so a crash sees the old form or the new.
 *
 * The blocking forms (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) pop as the
 * others when a key holds a list; else they block (block.h) and are run
 * again, each time in a transaction of their own, when a write wakes
 * them. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "config.h"
#include "t_list.h"

/* A list read out of the store: its elements point into `raw` or into
 * the request's arguments. */
struct list {
    struct val raw;
    struct kv_slice *e;
    size_t n, cap;
    int big; /* read from a big list */
};

/* The packed form's limit, list-max-listpack-size read as Redis reads it
 * for a quicklist node: -1 to -5 (and below) 4, 8, 16, 32, 64 KB of
 * record; a positive N, at most N elements within Redis's 8 KB safety
 * limit. A big list is packed again at half the limit (`back`). */
static int packs(size_t bytes, size_t n, int back)
{
    long long v = atomic_load(&cfg.list_max_listpack_size);
    size_t max = v >= 0 ? 8192 : (size_t)4096 << (v < -5 ? 4 : -v - 1);
    if (back)
        return bytes <= max / 2 && (v <= 0 || n <= (size_t)v / 2);
    return bytes <= max && (v <= 0 || n <= (size_t)v);
}
#define BIG_MAGIC 0xffffffffu
#define HDR 32
#define LIST_MAX_BYTES (1ULL << 40) /* kv_txn_splice_as's limit */

/* A list opened by probe(): its value's handle, what it is (0 missing,
 * 1 packed, 2 big, -1 written again since: probe it again), the bytes
 * of its value and a big list's header. */
struct big {
    kv_val *v;
    int kind;
    int defer, dirty; /* a rotation (move()): a pop leaves its header's
                         write to the push that follows (dirty: owed) */
    uint64_t count, head, end, size;
};

static uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static void put32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}

static uint64_t get64(const char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put64(char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static int room(struct list *l, size_t n)
{
    if (n <= l->cap)
        return 0;
    size_t cap = l->cap ? l->cap : 8;
    while (cap < n)
        cap *= 2;
    struct kv_slice *e = realloc(l->e, cap * sizeof *e);
    if (!e)
        return TXN_E_NOMEM;
    l->e = e;
    l->cap = cap;
    return 0;
}

/* A big list's elements, from its whole value. */
static int decode_big(struct list *l)
{
    const char *v = l->raw.p;
    if (l->raw.n < HDR)
        return TXN_E_CORRUPT;
    uint64_t count = get64(v + 8), p = get64(v + 16), end = get64(v + 24);
    if (p < HDR || p > end || end > l->raw.n || count > (end - p) / 8)
        return TXN_E_CORRUPT;
    int rc = room(l, count);
    for (uint64_t i = 0; i < count && !rc; i++) {
        uint32_t len;
        if (end - p < 8 || end - p - 8 < (len = get32(v + p)) || get32(v + p + 4 + len) != len)
            return TXN_E_CORRUPT;
        l->e[l->n++] = (struct kv_slice){v + p + 4, len};
        p += 8 + (uint64_t)len;
    }
    l->big = 1;
    return rc ? rc : p == end ? 0 : TXN_E_CORRUPT;
}

/* Split the record into elements; a record that does not parse is
 * damage. */
static int decode(struct list *l)
{
    const char *p = l->raw.p, *end = p + l->raw.n;
    if (l->raw.n < 4)
        return TXN_E_CORRUPT;
    if (get32(p) == BIG_MAGIC)
        return decode_big(l);
    size_t n = get32(p);
    p += 4;
    if (n > l->raw.n / 4)
        return TXN_E_CORRUPT;
    int rc = room(l, n);
    for (size_t i = 0; i < n && !rc; i++) {
        if (end - p < 4 || (size_t)(end - p - 4) < get32(p))
            return TXN_E_CORRUPT;
        l->e[l->n++] = (struct kv_slice){p + 4, get32(p)};
        p += 4 + get32(p);
    }
    return rc ? rc : p == end ? 0 : TXN_E_CORRUPT;
}

/* Load key's list: 1 (l filled), 0 missing (l empty), <0 an error
 * (KV_E_WRONGTYPE for another type). */
static int load(kv_txn *t, struct kv_slice key, struct list *l)
{
    unsigned type;
    memset(l, 0, sizeof *l);
    int rc = get_any(t, key, &l->raw, &type);
    if (rc <= 0)
        return rc;
    if (type != KV_LIST)
        return KV_E_WRONGTYPE;
    return (rc = decode(l)) ? rc : 1;
}

static void list_free(struct list *l)
{
    free(l->raw.p);
    free(l->e);
}

/* Write the list back (its expiry kept), packed or big by its size, or
 * delete the key if it is empty. */
static int store(kv_txn *t, struct kv_slice key, const struct list *l)
{
    if (!l->n) {
        int rc = kv_txn_del(t, key);
        return rc < 0 ? rc : 0;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->e[i].n > UINT32_MAX - 8)
            return TXN_E_NOSPACE;
        bytes += l->e[i].n;
    }
    size_t packed = 4 + 4 * l->n + bytes, body = 8 * l->n + bytes;
    int big = !packs(packed, l->n, l->big);
    if (!big && l->n > UINT32_MAX)
        return TXN_E_NOSPACE;
    size_t gap = big ? body / 2 + 64 : 0, len = big ? HDR + gap + body : packed;
    char *p = big ? calloc(1, len) : malloc(len), *q = p;
    if (!p)
        return TXN_E_NOMEM;
    if (big) {
        put32(q, BIG_MAGIC);
        put64(q + 8, l->n);
        put64(q + 16, HDR + gap);
        put64(q + 24, len);
        q += HDR + gap;
    } else {
        put32(q, (uint32_t)l->n);
        q += 4;
    }
    for (size_t i = 0; i < l->n; i++) {
        put32(q, (uint32_t)l->e[i].n);
        memcpy(q + 4, l->e[i].p, l->e[i].n);
        q += 4 + l->e[i].n;
        if (big)
            put32(q, (uint32_t)l->e[i].n), q += 4;
    }
    int rc = kv_txn_write(t, key, (struct kv_slice){p, len}, KV_KEEPTTL, KV_LIST);
    free(p);
    return rc;
}

/* ---- a big list's ends, read and written in place through its value's
 * handle (kv_txn_open_as): the key is looked up once a command, not at
 * each read or write of a header or an element (docs/kvstore.md, section
 * 34, has the profile that showed it) */

/* Bytes [off, off + n) of b's value into out. */
static int read_at(struct big *b, uint64_t off, size_t n, char *out)
{
    return n ? kv_val_read(b->v, off, out, n) : 0;
}

static int write_at(struct big *b, uint64_t off, const char *p, size_t n)
{
    if (off > LIST_MAX_BYTES || n > LIST_MAX_BYTES - off)
        return KV_E_TOOBIG;
    int rc = kv_val_write(b->v, off, p, n);
    if (!rc && off + n > b->size)
        b->size = off + n;
    return rc;
}

static int write_hdr(struct big *b)
{
    char h[HDR] = {0};
    put32(h, BIG_MAGIC);
    put64(h + 8, b->count);
    put64(h + 16, b->head);
    put64(h + 24, b->end);
    b->dirty = 0;
    return write_at(b, 0, h, HDR);
}

static void big_close(struct big *b)
{
    kv_val_close(b->v);
    b->v = NULL;
}

/* Open key's list into *b (big_close it after): its kind, 0 nothing, 1
 * a packed list, 2 a big one (its header read), or <0 an error
 * (KV_E_WRONGTYPE: another type; nothing open). */
static int probe(kv_txn *t, struct kv_slice key, struct big *b)
{
    char h[HDR];
    memset(b, 0, sizeof *b);
    int rc = kv_txn_open_as(t, key, KV_LIST, &b->v, &b->size);
    size_t got = b->size < HDR ? (size_t)b->size : HDR;
    if (rc > 0 && got >= 4 && !(rc = read_at(b, 0, got, h)) && get32(h) == BIG_MAGIC) {
        b->count = get64(h + 8), b->head = get64(h + 16), b->end = get64(h + 24);
        rc = got < HDR || b->head < HDR || b->head > b->end || b->end > b->size || !b->count ||
                     b->count > (b->end - b->head) / 8
                 ? TXN_E_CORRUPT
                 : 2;
    } else if (rc >= 0 && b->v) {
        rc = 1;
    }
    if (rc < 0)
        big_close(b);
    b->kind = rc < 0 ? 0 : rc;
    return rc;
}

/* The list probe() opened (packed or big) into l, whole: 1, or <0. */
static int load_open(struct big *b, struct list *l)
{
    memset(l, 0, sizeof *l);
    if (!(l->raw.p = malloc(b->size ? (size_t)b->size : 1)))
        return TXN_E_NOMEM;
    l->raw.n = (size_t)b->size;
    int rc = read_at(b, 0, l->raw.n, l->raw.p);
    return rc ? rc : (rc = decode(l)) ? rc : 1;
}

/* The length of the element whose record starts at off (from_end: ends
 * at off), checked against the list's bounds. */
static int rec_len(struct big *b, uint64_t off, int from_end, uint32_t *len)
{
    char w[4];
    int rc;
    if (from_end ? off - b->head < 8 : b->end - off < 8)
        return TXN_E_CORRUPT;
    if ((rc = read_at(b, from_end ? off - 4 : off, 4, w)))
        return rc;
    *len = get32(w);
    return (from_end ? off - b->head : b->end - off) - 8 < *len ? TXN_E_CORRUPT : 0;
}

/* Where element i's record starts, walking from the nearer end. */
static int seek(struct big *b, uint64_t i, uint64_t *off)
{
    uint32_t len;
    int rc = 0;
    if (i < b->count / 2) {
        *off = b->head;
        for (uint64_t k = 0; k < i && !rc; k++)
            if (!(rc = rec_len(b, *off, 0, &len)))
                *off += 8 + (uint64_t)len;
    } else {
        *off = b->end;
        for (uint64_t k = b->count; k > i && !rc; k--)
            if (!(rc = rec_len(b, *off, 1, &len)))
                *off -= 8 + (uint64_t)len;
    }
    return rc;
}

/* Read the element of len bytes (rec_len checked it) whose record starts
 * at off into a malloc'd *out. */
static int read_elem(struct big *b, uint64_t off, uint32_t len, struct kv_slice *out)
{
    char *p = malloc(len ? len : 1);
    int rc = p ? read_at(b, off + 4, len, p) : TXN_E_NOMEM;
    if (rc)
        free(p), p = NULL;
    *out = (struct kv_slice){p, len};
    return rc;
}

/* Elements a pop took: each malloc'd, in the order they left. */
struct popped {
    struct kv_slice *e;
    size_t n;
};

static void popped_free(struct popped *x)
{
    for (size_t i = 0; i < x->n; i++)
        free((char *)x->e[i].p);
    free(x->e);
    memset(x, 0, sizeof *x);
}

/* Take up to count elements off an end of a big list; its header, or the
 * list written again when it is small enough to pack or mostly free
 * room, or deleted when empty. */
static int pop_big(kv_txn *t, struct kv_slice key, struct big *b, int tail, uint64_t count,
                   struct popped *x)
{
    uint64_t k = count < b->count ? count : b->count;
    int rc = (x->e = malloc((size_t)k * sizeof *x->e)) ? 0 : TXN_E_NOMEM;
    for (uint64_t i = 0; i < k && !rc; i++) {
        uint32_t len;
        uint64_t off = tail ? b->end : b->head;
        if ((rc = rec_len(b, off, tail, &len)))
            break;
        if (tail)
            off -= 8 + (uint64_t)len;
        if ((rc = read_elem(b, off, len, &x->e[x->n])))
            break;
        x->n++;
        if (tail)
            b->end = off;
        else
            b->head = off + 8 + len;
        b->count--;
    }
    if (rc)
        return rc;
    if (!b->count) {
        big_close(b);
        b->kind = 0;
        return (rc = kv_txn_del(t, key)) < 0 ? rc : 0;
    }
    uint64_t live = b->end - b->head, unused = b->size - live - HDR;
    if (!packs(4 + live - 4 * b->count, b->count, 1) && unused <= 2 * live + 65536)
        return b->defer ? (b->dirty = 1, 0) : write_hdr(b);
    struct list l; /* pack it, or write it again with less room */
    memset(&l, 0, sizeof l);
    if (!(rc = write_hdr(b)) && (rc = load_open(b, &l)) > 0)
        rc = store(t, key, &l);
    list_free(&l);
    big_close(b);
    b->kind = -1;
    return rc < 0 ? rc : 0;
}

/* Push e[0..k) at an end of a big list (at the head each in turn, so the
 * last ends first, as LPUSH): 0, 1 when the head has no room, <0. */
static int push_big(struct big *b, int tail, const struct kv_slice *e, size_t k)
{
    uint64_t need = 0;
    for (size_t i = 0; i < k; i++) {
        if (e[i].n > UINT32_MAX - 8)
            return TXN_E_NOSPACE;
        need += 8 + e[i].n;
    }
    if (!tail && b->head - HDR < need)
        return 1;
    char *buf = malloc(need), *q = buf;
    if (!buf)
        return TXN_E_NOMEM;
    for (size_t i = 0; i < k; i++) {
        const struct kv_slice *x = &e[tail ? i : k - 1 - i];
        put32(q, (uint32_t)x->n);
        memcpy(q + 4, x->p, x->n);
        put32(q + 4 + x->n, (uint32_t)x->n);
        q += 8 + x->n;
    }
    uint64_t off = tail ? b->end : b->head - need;
    if (tail)
        b->end += need;
    else
        b->head -= need;
    b->count += k;
    /* the header first: a write past the value's end grows it by a
     * splice, after which the handle finds the key again */
    int rc = write_hdr(b);
    if (!rc)
        rc = write_at(b, off, buf, need);
    free(buf);
    return rc;
}

/* Put v before position i (0: the head, l->n: the tail). */
static int insert_at(struct list *l, size_t i, struct kv_slice v)
{
    int rc = room(l, l->n + 1);
    if (rc)
        return rc;
    memmove(&l->e[i + 1], &l->e[i], (l->n - i) * sizeof *l->e);
    l->e[i] = v;
    l->n++;
    return 0;
}

/* Take n elements away from position i. */
static void remove_at(struct list *l, size_t i, size_t n)
{
    memmove(&l->e[i], &l->e[i + n], (l->n - i - n) * sizeof *l->e);
    l->n -= n;
}

static int same(struct kv_slice a, struct kv_slice b)
{
    return a.n == b.n && (!a.n || !memcmp(a.p, b.p, a.n));
}

static void reply_null_array(struct buf *b)
{
    buf_add(b, "*-1\r\n", 5);
}

/* LEFT or RIGHT: 0 the head, 1 the tail, -1 neither */
static int side(const struct kv_slice *a)
{
    return arg_is(a, "LEFT") ? 0 : arg_is(a, "RIGHT") ? 1 : -1;
}

/* Redis's (start, end) of LRANGE and LTRIM on a list of n elements: the
 * first and last index kept, or *first > *last for none. */
static void clamp(long long start, long long end, size_t n, long long *first, long long *last)
{
    long long len = (long long)n;
    if (start < 0)
        start += len;
    if (end < 0)
        end += len;
    if (start < 0)
        start = 0;
    if (start > end || start >= len) {
        *first = 1, *last = 0;
        return;
    }
    *first = start;
    *last = end >= len ? len - 1 : end;
}

/* Push e[0..k) at an end of the list b holds (probe()'s, of key;
 * missing: made), its new length in *len: 1, or <0. */
static int push_in(kv_txn *t, struct kv_slice key, struct big *b, int tail,
                   const struct kv_slice *e, size_t k, uint64_t *len)
{
    int rc = 0;
    *len = 0;
    if (b->kind == 2 && (rc = push_big(b, tail, e, k)) <= 0) {
        *len = b->count;
        return rc < 0 ? rc : 1;
    }
    struct list l; /* packed, missing, or big without room at the head */
    memset(&l, 0, sizeof l);
    rc = b->dirty ? write_hdr(b) : 0;
    if (b->kind > 0 && !rc)
        rc = load_open(b, &l);
    big_close(b);
    b->kind = -1;
    for (size_t i = 0; i < k && rc >= 0; i++)
        rc = insert_at(&l, tail ? l.n : 0, e[i]);
    if (rc >= 0 && !(rc = store(t, key, &l)))
        *len = l.n, rc = 1;
    list_free(&l);
    return rc;
}

/* Push e[0..k) at an end of key's list (only_existing: not onto a
 * missing key); its new length in *len. 1 pushed, 0 not (only_existing),
 * <0. */
static int push(kv_txn *t, struct kv_slice key, int tail, const struct kv_slice *e, size_t k,
                int only_existing, uint64_t *len)
{
    struct big b;
    int rc = probe(t, key, &b);
    *len = 0;
    if (rc > 0 || (rc == 0 && !only_existing))
        rc = push_in(t, key, &b, tail, e, k, len);
    big_close(&b);
    return rc;
}

/* Take up to count elements off an end of the list b holds (probe()'s,
 * of key) into *x: 1 found, 0 missing, <0. */
static int pop_in(kv_txn *t, struct kv_slice key, struct big *b, int tail, uint64_t count,
                  struct popped *x)
{
    int rc;
    memset(x, 0, sizeof *x);
    if (b->kind == 2)
        return (rc = pop_big(t, key, b, tail, count, x)) ? rc : 1;
    if (b->kind <= 0)
        return 0;
    struct list l;
    if ((rc = load_open(b, &l)) > 0) {
        big_close(b);
        b->kind = -1;
        size_t k = count < l.n ? (size_t)count : l.n;
        rc = (x->e = malloc((k ? k : 1) * sizeof *x->e)) ? 0 : TXN_E_NOMEM;
        for (size_t i = 0; i < k && !rc; i++) {
            const struct kv_slice *y = tail ? &l.e[l.n - 1 - i] : &l.e[i];
            char *p = malloc(y->n ? y->n : 1);
            if (!p) {
                rc = TXN_E_NOMEM;
                break;
            }
            memcpy(p, y->p, y->n);
            x->e[x->n++] = (struct kv_slice){p, y->n};
        }
        if (!rc) {
            remove_at(&l, tail ? l.n - k : 0, k);
            rc = (rc = store(t, key, &l)) ? rc : 1;
        }
    }
    list_free(&l);
    return rc;
}

/* Take up to count elements off an end of key's list into *x: 1 found, 0
 * missing, <0. */
static int pop(kv_txn *t, struct kv_slice key, int tail, uint64_t count, struct popped *x)
{
    struct big b;
    int rc = probe(t, key, &b);
    memset(x, 0, sizeof *x);
    if (rc > 0)
        rc = pop_in(t, key, &b, tail, count, x);
    big_close(&b);
    return rc;
}

static void reply_popped(struct buf *b, const struct popped *x)
{
    reply_array(b, x->n);
    for (size_t i = 0; i < x->n; i++)
        reply_bulk(b, x->e[i].p, x->e[i].n);
}

/* ---- the commands */

/* LPUSH, RPUSH, LPUSHX, RPUSHX key element [element ...]: the new length */
static int cmd_push(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int tail = argv[0].p[0] == 'r' || argv[0].p[0] == 'R';
    int only_existing = argv[0].n == 6; /* the X forms */
    uint64_t len;
    int rc = push(t, argv[1], tail, &argv[2], argc - 2, only_existing, &len);
    if (rc >= 0)
        reply_int(&c->out, (long long)len), rc = 0;
    return rc;
}

/* LPOP, RPOP key [count]: one element (a bulk), or an array of up to
 * count */
static int cmd_pop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    int tail = argv[0].p[0] == 'r' || argv[0].p[0] == 'R';
    long long count = 1;
    if (argc > 3)
        return reply_error(&c->out, "ERR wrong number of arguments for '%s' command",
                           tail ? "rpop" : "lpop"), 0;
    if (argc == 3 && (parse_ll(&argv[2], &count) || count < 0))
        return reply_error(&c->out, "ERR value is out of range, must be positive"), 0;
    struct popped x = {0};
    struct big b;
    int rc = argc == 3 && !count ? probe(t, argv[1], &b) : pop(t, argv[1], tail, (uint64_t)count, &x);
    if (argc == 3 && !count)
        big_close(&b);
    if (rc == 0)
        argc == 3 ? reply_null_array(&c->out) : reply_nil(&c->out);
    else if (rc > 0 && argc == 3)
        reply_popped(&c->out, &x);
    else if (rc > 0)
        reply_bulk(&c->out, x.e[0].p, x.e[0].n);
    popped_free(&x);
    return rc < 0 ? rc : 0;
}

/* LLEN key */
static int cmd_llen(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    struct big b;
    struct list l;
    memset(&l, 0, sizeof l);
    int rc = probe(t, argv[1], &b);
    if (rc == 2)
        reply_int(&c->out, (long long)b.count), rc = 0;
    else if (rc >= 0 && (rc = rc ? load_open(&b, &l) : 0) >= 0)
        reply_int(&c->out, (long long)l.n), rc = 0;
    big_close(&b);
    list_free(&l);
    return rc;
}

/* Reply elements [first, last] of a big list, read from where the first
 * one's record starts through a window of the value: one read for many
 * short elements instead of two each (LRANGE's 100 elements cost 200
 * reads before); a longer element is read on its own. */
static int reply_big_range(struct buf *out, struct big *b, uint64_t first, uint64_t last)
{
    size_t cap = last - first < 4 ? 256 : 4096, got = 0; /* win: bytes [at, at + got) */
    uint64_t off, at = 0;
    char *win = malloc(cap);
    int rc = win ? seek(b, first, &off) : TXN_E_NOMEM;
    for (uint64_t i = first; i <= last && !rc; i++) {
        if (b->end - off < 8) {
            rc = TXN_E_CORRUPT;
            break;
        }
        if (off < at || off + 4 > at + got) {
            at = off;
            got = b->end - off < cap ? (size_t)(b->end - off) : cap;
            if ((rc = read_at(b, at, got, win)))
                break;
        }
        uint32_t len = get32(win + (off - at));
        struct kv_slice e;
        if (b->end - off - 8 < len) {
            rc = TXN_E_CORRUPT;
        } else if (off + 4 + len <= at + got) {
            reply_bulk(out, win + (off - at) + 4, len);
        } else if (!(rc = read_elem(b, off, len, &e))) {
            reply_bulk(out, e.p, e.n);
            free((char *)e.p);
        }
        off += 8 + (uint64_t)len;
    }
    free(win);
    return rc;
}

/* LRANGE key start stop */
static int cmd_lrange(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long start, end, first, last;
    if (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    struct big b;
    struct list l;
    memset(&l, 0, sizeof l);
    int rc = probe(t, argv[1], &b);
    if (rc == 2) {
        clamp(start, end, (size_t)b.count, &first, &last);
        reply_array(&c->out, first > last ? 0 : (size_t)(last - first + 1));
        if (first <= last)
            rc = reply_big_range(&c->out, &b, (uint64_t)first, (uint64_t)last);
        else
            rc = 0;
    } else if (rc >= 0 && (rc = rc ? load_open(&b, &l) : 0) >= 0) {
        rc = 0;
        clamp(start, end, l.n, &first, &last);
        reply_array(&c->out, first > last ? 0 : (size_t)(last - first + 1));
        for (long long i = first; i <= last; i++)
            reply_bulk(&c->out, l.e[i].p, l.e[i].n);
    }
    big_close(&b);
    list_free(&l);
    return rc;
}

/* An index as LINDEX and LSET read it, from the tail if negative: the
 * position, or -1 outside the list. */
static long long position(long long index, size_t n)
{
    if (index < 0)
        index += (long long)n;
    return index < 0 || index >= (long long)n ? -1 : index;
}

/* LINDEX key index: the key is looked up before the index is read, as
 * Redis does (a missing key is nil whatever the index) */
static int cmd_lindex(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long index;
    struct big b;
    struct list l;
    memset(&l, 0, sizeof l);
    int rc = probe(t, argv[1], &b);
    if (rc == 0) {
        reply_nil(&c->out);
    } else if (rc > 0 && parse_ll(&argv[2], &index)) {
        reply_error(&c->out, "ERR value is not an integer or out of range");
        rc = 0;
    } else if (rc == 2) {
        if ((index = position(index, (size_t)b.count)) < 0)
            reply_nil(&c->out), rc = 0;
        else
            rc = reply_big_range(&c->out, &b, (uint64_t)index, (uint64_t)index);
    } else if (rc > 0 && (rc = load_open(&b, &l)) > 0) {
        rc = 0;
        if ((index = position(index, l.n)) < 0)
            reply_nil(&c->out);
        else
            reply_bulk(&c->out, l.e[index].p, l.e[index].n);
    }
    big_close(&b);
    list_free(&l);
    return rc;
}

/* LSET key index element */
static int cmd_lset(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long index;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc == 0) {
        reply_error(&c->out, "ERR no such key");
    } else if (rc > 0) {
        rc = 0;
        if (parse_ll(&argv[2], &index))
            reply_error(&c->out, "ERR value is not an integer or out of range");
        else if ((index = position(index, l.n)) < 0)
            reply_error(&c->out, "ERR index out of range");
        else if (l.e[index] = argv[3], !(rc = store(t, argv[1], &l)))
            reply_simple(&c->out, "OK");
    }
    list_free(&l);
    return rc;
}

/* LINSERT key BEFORE|AFTER pivot element: the new length, -1 without the
 * pivot, 0 without the key */
static int cmd_linsert(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int after = arg_is(&argv[2], "AFTER");
    if (!after && !arg_is(&argv[2], "BEFORE"))
        return reply_error(&c->out, "ERR syntax error"), 0;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc == 0) {
        reply_int(&c->out, 0);
    } else if (rc > 0) {
        size_t i = 0;
        while (i < l.n && !same(l.e[i], argv[3]))
            i++;
        rc = 0;
        if (i == l.n)
            reply_int(&c->out, -1);
        else if (!(rc = insert_at(&l, i + (size_t)after, argv[4])) &&
                 !(rc = store(t, argv[1], &l)))
            reply_int(&c->out, (long long)l.n);
    }
    list_free(&l);
    return rc;
}

/* LREM key count element: count > 0 from the head, < 0 from the tail, 0
 * all of them */
static int cmd_lrem(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long count;
    if (parse_ll(&argv[2], &count))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc >= 0) {
        unsigned long long limit = count < 0 ? 0ULL - (unsigned long long)count
                                   : (unsigned long long)count;
        unsigned long long removed = 0;
        size_t kept = 0;
        rc = 0;
        if (count >= 0) {
            for (size_t i = 0; i < l.n; i++)
                if (same(l.e[i], argv[3]) && (!limit || removed < limit))
                    removed++;
                else
                    l.e[kept++] = l.e[i];
        } else {
            /* from the tail: keep the survivors at the end, then slide */
            kept = l.n;
            for (size_t i = l.n; i-- > 0;)
                if (same(l.e[i], argv[3]) && removed < limit)
                    removed++;
                else
                    l.e[--kept] = l.e[i];
            if (l.n) /* a missing key has no array to slide */
                memmove(l.e, l.e + kept, (l.n - kept) * sizeof *l.e);
            kept = l.n - kept;
        }
        l.n = kept;
        if (!removed || !(rc = store(t, argv[1], &l)))
            reply_int(&c->out, (long long)removed);
    }
    list_free(&l);
    return rc;
}

/* LTRIM key start stop */
static int cmd_ltrim(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    long long start, end, first, last;
    if (parse_ll(&argv[2], &start) || parse_ll(&argv[3], &end))
        return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc >= 0) {
        rc = 0;
        clamp(start, end, l.n, &first, &last);
        size_t n0 = l.n;
        if (first > last) {
            l.n = 0;
        } else {
            remove_at(&l, (size_t)last + 1, l.n - (size_t)last - 1);
            remove_at(&l, 0, (size_t)first);
        }
        if (l.n == n0 || !(rc = store(t, argv[1], &l)))
            reply_simple(&c->out, "OK");
    }
    list_free(&l);
    return rc;
}

/* LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len] */
static int cmd_lpos(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long rank = 1, count = -1, maxlen = 0; /* count -1: no COUNT */
    for (size_t j = 3; j < argc; j++) {
        int more = j + 1 < argc;
        if (more && arg_is(&argv[j], "RANK")) {
            if (parse_ll(&argv[++j], &rank))
                return reply_error(&c->out, "ERR value is not an integer or out of range"), 0;
            if (rank == 0)
                return reply_error(&c->out, "ERR RANK can't be zero: use 1 to start from the "
                                            "first match, 2 from the second ... or use "
                                            "negative to start from the end of the list"), 0;
            /* Redis 7.0 negates it into itself, searches from the tail
             * and takes the first match: rank -1 does that */
            if (rank == LLONG_MIN)
                rank = -1;
        } else if (more && arg_is(&argv[j], "COUNT")) {
            if (parse_ll(&argv[++j], &count) || count < 0)
                return reply_error(&c->out, "ERR COUNT can't be negative"), 0;
        } else if (more && arg_is(&argv[j], "MAXLEN")) {
            if (parse_ll(&argv[++j], &maxlen) || maxlen < 0)
                return reply_error(&c->out, "ERR MAXLEN can't be negative"), 0;
        } else {
            return reply_error(&c->out, "ERR syntax error"), 0;
        }
    }
    int from_tail = rank < 0;
    if (from_tail)
        rank = -rank;
    struct list l;
    int rc = load(t, argv[1], &l);
    if (rc == 0) {
        count != -1 ? reply_array(&c->out, 0) : reply_nil(&c->out);
    } else if (rc > 0) {
        rc = 0;
        /* the matching positions, gathered first: the array's length
         * goes before them */
        size_t nfound = 0, *found = NULL;
        long long matches = 0, scanned = 0;
        if (count != -1 && !(found = malloc((l.n ? l.n : 1) * sizeof *found)))
            rc = TXN_E_NOMEM;
        long long at = -1;
        for (size_t k = 0; !rc && k < l.n && (maxlen == 0 || scanned < maxlen); k++, scanned++) {
            size_t i = from_tail ? l.n - 1 - k : k;
            if (!same(l.e[i], argv[2]) || ++matches < rank)
                continue;
            if (count == -1) {
                at = (long long)i;
                break;
            }
            found[nfound++] = i;
            if (count && matches - rank + 1 >= count)
                break;
        }
        if (!rc && count == -1) {
            at < 0 ? reply_nil(&c->out) : reply_int(&c->out, at);
        } else if (!rc) {
            reply_array(&c->out, nfound);
            for (size_t i = 0; i < nfound; i++)
                reply_int(&c->out, (long long)found[i]);
        }
        free(found);
    }
    list_free(&l);
    return rc;
}

/* A packed list's rotation (move() on one key): read, turned and
 * written once. */
static int rotate_packed(struct conn *c, kv_txn *t, struct kv_slice key, struct big *b, int from,
                         int to)
{
    struct list l;
    int rc = load_open(b, &l);
    big_close(b);
    if (rc > 0 && !l.n)
        rc = TXN_E_CORRUPT;
    if (rc > 0) {
        struct kv_slice e = l.e[from ? l.n - 1 : 0];
        remove_at(&l, from ? l.n - 1 : 0, 1);
        if (!(rc = insert_at(&l, to ? l.n : 0, e)) && !(rc = store(t, key, &l)))
            reply_bulk(&c->out, e.p, e.n);
    }
    list_free(&l);
    return rc < 0 ? rc : 0;
}

/* Move one element from src's `from` end to dst's `to` end (the same key:
 * a rotation): LMOVE, RPOPLPUSH. The element, or nil without src. dst's
 * type is checked before anything is taken, as Redis does. */
static int move(struct conn *c, kv_txn *t, struct kv_slice *src, struct kv_slice *dst, int from,
                int to)
{
    struct popped x = {0};
    struct big s, d, *to_b = &d;
    uint64_t len;
    int one = same(*src, *dst); /* a rotation: one handle, one header */
    memset(&d, 0, sizeof d);
    int rc = probe(t, *src, &s);
    if (rc == 1 && one)
        return rotate_packed(c, t, *src, &s, from, to);
    if (rc > 0 && one)
        to_b = &s, s.defer = 1;
    else if (rc > 0)
        rc = probe(t, *dst, &d);
    if (rc >= 0 && (rc = pop_in(t, *src, &s, from, 1, &x)) == 0) {
        reply_nil(&c->out);
    } else if (rc > 0) {
        if (to_b->kind < 0) /* the pop wrote it again, or deleted it */
            big_close(to_b), rc = probe(t, *dst, to_b);
        if (rc >= 0 && (rc = push_in(t, *dst, to_b, to, &x.e[0], 1, &len)) >= 0)
            reply_bulk(&c->out, x.e[0].p, x.e[0].n);
    }
    if (rc >= 0 && s.dirty) /* not reached: the push wrote it */
        rc = write_hdr(&s);
    big_close(&s);
    big_close(&d);
    popped_free(&x);
    return rc < 0 ? rc : 0;
}

/* LMOVE source destination LEFT|RIGHT LEFT|RIGHT */
static int cmd_lmove(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    int from = side(&argv[3]), to = side(&argv[4]);
    if (from < 0 || to < 0)
        return reply_error(&c->out, "ERR syntax error"), 0;
    return move(c, t, &argv[1], &argv[2], from, to);
}

/* RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT */
static int cmd_rpoplpush(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    (void)argc;
    return move(c, t, &argv[1], &argv[2], 1, 0);
}

/* LMPOP's arguments from argv[at] (numkeys) on: the keys' first index
 * and count, the end, the count. 0, or -1 with the error replied. */
static int mpop_args(struct conn *c, size_t argc, const struct kv_slice *argv, size_t at,
                     size_t *first, size_t *nkeys, int *tail, long long *count)
{
    long long numkeys;
    *count = -1;
    if (parse_ll(&argv[at], &numkeys) || numkeys < 1)
        return reply_error(&c->out, "ERR numkeys should be greater than 0"), -1;
    if ((unsigned long long)numkeys >= argc - at - 1)
        return reply_error(&c->out, "ERR syntax error"), -1;
    size_t where = at + 1 + (size_t)numkeys;
    if ((*tail = side(&argv[where])) < 0)
        return reply_error(&c->out, "ERR syntax error"), -1;
    for (size_t j = where + 1; j < argc; j++) {
        if (*count == -1 && j + 1 < argc && arg_is(&argv[j], "COUNT")) {
            if (parse_ll(&argv[++j], count) || *count < 1)
                return reply_error(&c->out, "ERR count should be greater than 0"), -1;
        } else {
            return reply_error(&c->out, "ERR syntax error"), -1;
        }
    }
    if (*count == -1)
        *count = 1;
    *first = at + 1;
    *nkeys = (size_t)numkeys;
    return 0;
}

/* Pop from the first of keys[0..n) that holds a list: 1 popped (the reply
 * is in c->out: LMPOP's form with mpop, else BLPOP's [key, element]), 0
 * none did, <0. A blocked client run again passes over a key of another
 * type, as Redis 7.0 leaves it blocked then. */
static int pop_first(struct conn *c, kv_txn *t, const struct kv_slice *keys, size_t n, int tail,
                     long long count, int mpop)
{
    int again = block_state(c) != BLOCK_NONE;
    for (size_t k = 0; k < n; k++) {
        struct popped x;
        int rc = pop(t, keys[k], tail, (uint64_t)count, &x);
        if (rc > 0) {
            reply_array(&c->out, 2);
            reply_bulk(&c->out, keys[k].p, keys[k].n);
            if (mpop)
                reply_popped(&c->out, &x);
            else
                reply_bulk(&c->out, x.e[0].p, x.e[0].n);
        }
        popped_free(&x);
        if (rc == KV_E_WRONGTYPE && again)
            continue;
        if (rc)
            return rc;
    }
    return 0;
}

/* LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]: up to count
 * elements of the first key that holds a list, with its name; nil (an
 * array) when none does. The entry's key spec counts the keys by numkeys:
 * the transaction holds exactly those. */
static int cmd_lmpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    size_t first, n;
    int tail;
    long long count;
    if (mpop_args(c, argc, argv, 1, &first, &n, &tail, &count))
        return 0;
    int rc = pop_first(c, t, &argv[first], n, tail, count, 1);
    if (rc == 0)
        reply_null_array(&c->out);
    return rc < 0 ? rc : 0;
}

/* ---- the blocking forms
 *
 * Each answers as its non-blocking form when a key holds a list. Else:
 * inside EXEC, or once its timeout passed (or CLIENT UNBLOCK), a nil
 * array; otherwise it blocks (block_wait, under its transaction's locks)
 * and is run again when one of its keys is written. */

/* BLPOP, BRPOP key [key ...] timeout: [key, element] */
static int cmd_bpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long ms;
    int tail = argv[0].p[1] == 'r' || argv[0].p[1] == 'R';
    if (block_timeout(c, &argv[argc - 1], &ms) || block_error(c))
        return 0;
    int rc = pop_first(c, t, &argv[1], argc - 2, tail, 1, 0);
    return rc ? (rc < 0 ? rc : 0) : block_nothing(c, &argv[1], argc - 2, ms);
}

/* BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout, BRPOPLPUSH
 * source destination timeout: the element moved */
static int cmd_blmove(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long ms;
    int from = 1, to = 0;
    if (argc == 6 && ((from = side(&argv[3])) < 0 || (to = side(&argv[4])) < 0))
        return reply_error(&c->out, "ERR syntax error"), 0;
    if (block_timeout(c, &argv[argc - 1], &ms) || block_error(c))
        return 0;
    struct big b;
    int rc = probe(t, argv[1], &b);
    big_close(&b);
    if (rc == KV_E_WRONGTYPE && block_state(c) != BLOCK_NONE)
        rc = 0;
    if (rc > 0)
        return move(c, t, &argv[1], &argv[2], from, to);
    return rc < 0 ? rc : block_nothing(c, &argv[1], 1, ms);
}

/* BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count] */
static int cmd_blmpop(struct conn *c, kv_txn *t, size_t argc, struct kv_slice *argv)
{
    long long ms, count;
    size_t first, n;
    int tail;
    if (block_timeout(c, &argv[1], &ms) || mpop_args(c, argc, argv, 2, &first, &n, &tail, &count) ||
        block_error(c))
        return 0;
    int rc = pop_first(c, t, &argv[first], n, tail, count, 1);
    return rc ? (rc < 0 ? rc : 0) : block_nothing(c, &argv[first], n, ms);
}

/* ---- the table */

#define W CMD_WRITE
#define R CMD_READONLY
#define M CMD_DENYOOM
#define F CMD_FAST
const struct command list_commands[] = {
    {"lpush", cmd_push, -3, W | M | F, ACL_LIST, {1, 1, 1}},
    {"rpush", cmd_push, -3, W | M | F, ACL_LIST, {1, 1, 1}},
    {"lpushx", cmd_push, -3, W | M | F, ACL_LIST, {1, 1, 1}},
    {"rpushx", cmd_push, -3, W | M | F, ACL_LIST, {1, 1, 1}},
    {"lpop", cmd_pop, -2, W | F, ACL_LIST, {1, 1, 1}},
    {"rpop", cmd_pop, -2, W | F, ACL_LIST, {1, 1, 1}},
    {"llen", cmd_llen, 2, R | F, ACL_LIST, {1, 1, 1}},
    {"lrange", cmd_lrange, 4, R, ACL_LIST, {1, 1, 1}},
    {"lindex", cmd_lindex, 3, R, ACL_LIST, {1, 1, 1}},
    {"lset", cmd_lset, 4, W | M, ACL_LIST, {1, 1, 1}},
    {"linsert", cmd_linsert, 5, W | M, ACL_LIST, {1, 1, 1}},
    {"lrem", cmd_lrem, 4, W, ACL_LIST, {1, 1, 1}},
    {"ltrim", cmd_ltrim, 4, W, ACL_LIST, {1, 1, 1}},
    {"lpos", cmd_lpos, -3, R, ACL_LIST, {1, 1, 1}},
    {"lmove", cmd_lmove, 5, W | M, ACL_LIST, {1, 2, 1}},
    {"rpoplpush", cmd_rpoplpush, 3, W | M, ACL_LIST, {1, 2, 1}},
    {"lmpop", cmd_lmpop, -4, W | CMD_KEYNUM(1), ACL_LIST, {0, 0, 0}},
    {"blpop", cmd_bpop, -3, W | CMD_NOSCRIPT | CMD_BLOCKING, ACL_LIST, {1, -2, 1}},
    {"brpop", cmd_bpop, -3, W | CMD_NOSCRIPT | CMD_BLOCKING, ACL_LIST, {1, -2, 1}},
    {"blmove", cmd_blmove, 6, W | M | CMD_NOSCRIPT | CMD_BLOCKING, ACL_LIST, {1, 2, 1}},
    {"brpoplpush", cmd_blmove, 4, W | M | CMD_NOSCRIPT | CMD_BLOCKING, ACL_LIST, {1, 2, 1}},
    {"blmpop", cmd_blmpop, -5, W | CMD_BLOCKING | CMD_KEYNUM(2), ACL_LIST, {0, 0, 0}},
};
const size_t list_ncommands = sizeof list_commands / sizeof *list_commands;
