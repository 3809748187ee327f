/* list.c - lists in the store (list.h): their two forms, read and
 * changed inside the caller's kv_txn, below the commands (t_list.c), so
 * that the crash simulator's workload runs the same code.
 *
 * A list is one value of type KV_LIST in one of two forms (little endian
 * numbers), chosen by its size as Redis's list-max-listpack-size chooses
 * a node's (the caller passes it: CONFIG's, or a test's own):
 *  - packed, up to the limit of packs() (8 KB by default): a 4-byte element count, then per
 *    element a 4-byte length and its bytes, head first, as a hash is
 *    packed (hash.c). A change writes the record again: O(its bytes).
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
 *    front (amortized O(1)). RPUSH takes the room after `end`; a push
 *    past the value's end makes half the elements' bytes of it. The other commands read and write the whole
 *    list, as their Redis counterparts are O(n) too.
 * A big list that shrinks to half that limit is packed again (the gap
 * keeps a list at the threshold from changing form at each push and pop);
 * an emptied list is deleted, as in Redis. Either change happens inside
 * the command's transaction, so a crash sees the old form or the new. */
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "t_pack.h"

/* The packed form's limit, list-max-listpack-size read as Redis reads it
 * for a quicklist node: -1 to -5 (and below) 4, 8, 16, 32, 64 KB of
 * record; a positive N, at most N elements within Redis's 8 KB safety
 * limit. A big list is packed again at half the limit (`back`). */
static int packs(long long v, size_t bytes, size_t n, int back)
{
    size_t max = v >= 0 ? 8192 : (size_t)4096 << (v < -5 ? 4 : -v - 1);
    if (back)
        return bytes <= max / 2 && (v <= 0 || n <= (size_t)v / 2);
    return bytes <= max && (v <= 0 || n <= (size_t)v);
}
#define BIG_MAGIC 0xffffffffu
#define HDR 32
#define LIST_MAX_BYTES (1ULL << 40) /* kv_txn_splice_as's limit */

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
    void *e = l->e;
    int rc = pack_room(&e, &l->cap, n, sizeof *l->e);
    l->e = e;
    return rc;
}

/* A big list's elements, from its whole value. */
static int decode_big(struct list *l)
{
    const char *v = l->raw;
    if (l->rawn < HDR)
        return TXN_E_CORRUPT;
    uint64_t count = get64(v + 8), p = get64(v + 16), end = get64(v + 24);
    if (p < HDR || p > end || end > l->rawn || count > (end - p) / 8)
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
    const char *p = l->raw, *end = p + l->rawn;
    if (l->rawn < 4)
        return TXN_E_CORRUPT;
    if (get32(p) == BIG_MAGIC)
        return decode_big(l);
    size_t n = get32(p);
    p += 4;
    if (n > l->rawn / 4)
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

int list_load(kv_txn *t, struct kv_slice key, struct list *l)
{
    struct list_handle b;
    int rc = list_probe(t, key, 0, &b);
    memset(l, 0, sizeof *l);
    if (rc > 0)
        rc = list_read(&b, l);
    list_close(&b);
    return rc;
}

void list_free(struct list *l)
{
    free(l->raw);
    free(l->e);
}

int list_store(kv_txn *t, struct kv_slice key, const struct list *l, long long max)
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
    int big = !packs(max, packed, l->n, l->big);
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
static int read_at(struct list_handle *b, uint64_t off, size_t n, char *out)
{
    return n ? kv_val_read(b->v, off, out, n) : 0;
}

static int write_at(struct list_handle *b, uint64_t off, const char *p, size_t n)
{
    if (off > LIST_MAX_BYTES || n > LIST_MAX_BYTES - off)
        return KV_E_TOOBIG;
    int rc = kv_val_write(b->v, off, p, n);
    if (!rc && off + n > b->size)
        b->size = off + n;
    return rc;
}

static int write_hdr(struct list_handle *b)
{
    char h[HDR] = {0};
    put32(h, BIG_MAGIC);
    put64(h + 8, b->count);
    put64(h + 16, b->head);
    put64(h + 24, b->end);
    b->dirty = 0;
    return write_at(b, 0, h, HDR);
}

void list_close(struct list_handle *b)
{
    kv_val_close(b->v);
    b->v = NULL;
}

int list_probe(kv_txn *t, struct kv_slice key, long long max, struct list_handle *b)
{
    char h[HDR];
    memset(b, 0, sizeof *b);
    b->max = max;
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
        list_close(b);
    b->kind = rc < 0 ? 0 : rc;
    return rc;
}

int list_read(struct list_handle *b, struct list *l)
{
    memset(l, 0, sizeof *l);
    if (!(l->raw = malloc(b->size ? (size_t)b->size : 1)))
        return TXN_E_NOMEM;
    l->rawn = (size_t)b->size;
    int rc = read_at(b, 0, l->rawn, l->raw);
    return rc ? rc : (rc = decode(l)) ? rc : 1;
}

/* The length of the element whose record starts at off (from_end: ends
 * at off), checked against the list's bounds. */
static int rec_len(struct list_handle *b, uint64_t off, int from_end, uint32_t *len)
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
static int seek(struct list_handle *b, uint64_t i, uint64_t *off)
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
static int read_elem(struct list_handle *b, uint64_t off, uint32_t len, struct kv_slice *out)
{
    char *p = malloc(len ? len : 1);
    int rc = p ? read_at(b, off + 4, len, p) : TXN_E_NOMEM;
    if (rc)
        free(p), p = NULL;
    *out = (struct kv_slice){p, len};
    return rc;
}

void list_popped_free(struct list_popped *x)
{
    for (size_t i = 0; i < x->n; i++)
        free((char *)x->e[i].p);
    free(x->e);
    memset(x, 0, sizeof *x);
}

/* Take up to count elements off an end of a big list; its header, or the
 * list written again when it is small enough to pack or mostly free
 * room, or deleted when empty. */
static int pop_big(kv_txn *t, struct kv_slice key, struct list_handle *b, int tail, uint64_t count,
                   struct list_popped *x)
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
        list_close(b);
        b->kind = 0;
        return (rc = kv_txn_del(t, key)) < 0 ? rc : 0;
    }
    uint64_t live = b->end - b->head, unused = b->size - live - HDR;
    if (!packs(b->max, 4 + live - 4 * b->count, b->count, 1) && unused <= 2 * live + 65536)
        return b->defer ? (b->dirty = 1, 0) : write_hdr(b);
    struct list l; /* pack it, or write it again with less room */
    memset(&l, 0, sizeof l);
    if (!(rc = write_hdr(b)) && (rc = list_read(b, &l)) > 0)
        rc = list_store(t, key, &l, b->max);
    list_free(&l);
    list_close(b);
    b->kind = -1;
    return rc < 0 ? rc : 0;
}

/* Push e[0..k) at an end of a big list (at the head each in turn, so the
 * last ends first, as LPUSH): 0, 1 when the head has no room, <0. */
static int push_big(struct list_handle *b, int tail, const struct kv_slice *e, size_t k)
{
    uint64_t need = 0;
    for (size_t i = 0; i < k; i++) {
        if (e[i].n > UINT32_MAX - 8)
            return TXN_E_NOSPACE;
        need += 8 + e[i].n;
    }
    if (!tail && b->head - HDR < need)
        return 1;
    /* a push past the value's end leaves room at the tail, half the
     * elements' bytes, so that the next pushes write in place, as LPUSH
     * does before `head` (a write past the end is a splice that finds the
     * key again and writes the value's length) */
    uint64_t grow = tail && b->end + need > b->size ? (b->end - b->head) / 2 + 64 : 0;
    char *buf = calloc(1, need + grow), *q = buf;
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
        rc = write_at(b, off, buf, need + grow);
    free(buf);
    return rc;
}

int list_insert_at(struct list *l, size_t i, struct kv_slice v)
{
    int rc = room(l, l->n + 1);
    if (rc)
        return rc;
    memmove(&l->e[i + 1], &l->e[i], (l->n - i) * sizeof *l->e);
    l->e[i] = v;
    l->n++;
    return 0;
}

void list_remove_at(struct list *l, size_t i, size_t n)
{
    memmove(&l->e[i], &l->e[i + n], (l->n - i - n) * sizeof *l->e);
    l->n -= n;
}

static int same(struct kv_slice a, struct kv_slice b)
{
    return a.n == b.n && (!a.n || !memcmp(a.p, b.p, a.n));
}

/* Push e[0..k) at an end of the list b holds (list_probe's, of key;
 * missing: made), its new length in *len: 1, or <0. */
static int push_in(kv_txn *t, struct kv_slice key, struct list_handle *b, int tail,
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
        rc = list_read(b, &l);
    list_close(b);
    b->kind = -1;
    for (size_t i = 0; i < k && rc >= 0; i++)
        rc = list_insert_at(&l, tail ? l.n : 0, e[i]);
    if (rc >= 0 && !(rc = list_store(t, key, &l, b->max)))
        *len = l.n, rc = 1;
    list_free(&l);
    return rc;
}

int list_push(kv_txn *t, struct kv_slice key, long long max, int tail, const struct kv_slice *e,
              size_t k, int only_existing, uint64_t *len)
{
    struct list_handle b;
    int rc = list_probe(t, key, max, &b);
    *len = 0;
    if (rc > 0 || (rc == 0 && !only_existing))
        rc = push_in(t, key, &b, tail, e, k, len);
    list_close(&b);
    return rc;
}

/* Take up to count elements off an end of the list b holds (list_probe's, of
 * key) into *x: 1 found, 0 missing, <0. */
static int pop_in(kv_txn *t, struct kv_slice key, struct list_handle *b, int tail, uint64_t count,
                  struct list_popped *x)
{
    int rc;
    memset(x, 0, sizeof *x);
    if (b->kind == 2)
        return (rc = pop_big(t, key, b, tail, count, x)) ? rc : 1;
    if (b->kind <= 0)
        return 0;
    struct list l;
    if ((rc = list_read(b, &l)) > 0) {
        list_close(b);
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
            list_remove_at(&l, tail ? l.n - k : 0, k);
            rc = (rc = list_store(t, key, &l, b->max)) ? rc : 1;
        }
    }
    list_free(&l);
    return rc;
}

int list_pop(kv_txn *t, struct kv_slice key, long long max, int tail, uint64_t count,
             struct list_popped *x)
{
    struct list_handle b;
    int rc = list_probe(t, key, max, &b);
    memset(x, 0, sizeof *x);
    if (rc > 0)
        rc = pop_in(t, key, &b, tail, count, x);
    list_close(&b);
    return rc;
}

/* Read from where the first element's record starts through a window of
 * the value: one read for many short elements instead of two each
 * (LRANGE's 100 elements cost 200 reads before); a longer element is read
 * on its own. */
int list_range(struct list_handle *b, uint64_t first, uint64_t last,
               void (*fn)(void *arg, const char *p, size_t n), void *arg)
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
            fn(arg, win + (off - at) + 4, len);
        } else if (!(rc = read_elem(b, off, len, &e))) {
            fn(arg, e.p, e.n);
            free((char *)e.p);
        }
        off += 8 + (uint64_t)len;
    }
    free(win);
    return rc;
}

/* A malloc'd copy of e into *out: 0 or TXN_E_NOMEM. */
static int copy_elem(struct kv_slice e, struct kv_slice *out)
{
    char *p = malloc(e.n ? e.n : 1);
    if (p)
        memcpy(p, e.p, e.n);
    *out = (struct kv_slice){p, e.n};
    return p ? 0 : TXN_E_NOMEM;
}

/* A packed list's rotation (list_move on one key): read, turned and
 * written once; the element moved in *out. */
static int rotate_packed(kv_txn *t, struct kv_slice key, struct list_handle *b, int from, int to,
                         struct kv_slice *out)
{
    struct list l;
    int rc = list_read(b, &l);
    list_close(b);
    if (rc > 0 && !l.n)
        rc = TXN_E_CORRUPT;
    if (rc > 0) {
        struct kv_slice e = l.e[from ? l.n - 1 : 0];
        list_remove_at(&l, from ? l.n - 1 : 0, 1);
        if (!(rc = list_insert_at(&l, to ? l.n : 0, e)) &&
            !(rc = list_store(t, key, &l, b->max)) && !(rc = copy_elem(e, out)))
            rc = 1;
    }
    list_free(&l);
    return rc;
}

int list_move(kv_txn *t, struct kv_slice src, struct kv_slice dst, long long max, int from,
              int to, struct kv_slice *e)
{
    struct list_popped x = {0};
    struct list_handle s, d, *to_b = &d;
    uint64_t len;
    int one = same(src, dst); /* a rotation: one handle, one header */
    memset(&d, 0, sizeof d);
    *e = (struct kv_slice){NULL, 0};
    int rc = list_probe(t, src, max, &s);
    if (rc == 1 && one)
        return rotate_packed(t, src, &s, from, to, e);
    if (rc > 0 && one)
        to_b = &s, s.defer = 1;
    else if (rc > 0)
        rc = list_probe(t, dst, max, &d);
    if (rc >= 0 && (rc = pop_in(t, src, &s, from, 1, &x)) > 0) {
        if (to_b->kind < 0) /* the pop wrote it again, or deleted it */
            list_close(to_b), rc = list_probe(t, dst, max, to_b);
        if (rc >= 0 && (rc = push_in(t, dst, to_b, to, &x.e[0], 1, &len)) >= 0) {
            *e = x.e[0]; /* handed over: x forgets it */
            x.e[0].p = NULL;
            rc = 1;
        }
    }
    int w = rc >= 0 && s.dirty ? write_hdr(&s) : 0; /* not reached: the push wrote it */
    if (w)
        rc = w;
    if (rc < 0) {
        free((char *)e->p);
        *e = (struct kv_slice){NULL, 0};
    }
    list_close(&s);
    list_close(&d);
    list_popped_free(&x);
    return rc;
}


/* ---- the commands that change a list's middle: the list whole */

long long list_position(long long index, size_t n)
{
    if (index < 0)
        index += (long long)n;
    return index < 0 || index >= (long long)n ? -1 : index;
}

void list_clamp(long long start, long long end, size_t n, long long *first, long long *last)
{
    size_t lo, hi;
    int some = pack_span(start, end, n, &lo, &hi);
    *first = some ? (long long)lo : 1;
    *last = some ? (long long)hi : 0;
}

int list_set(kv_txn *t, struct kv_slice key, long long max, long long index, struct kv_slice v)
{
    struct list l;
    int rc = list_load(t, key, &l);
    if (rc > 0 && (index = list_position(index, l.n)) < 0) {
        rc = 2;
    } else if (rc > 0) {
        l.e[index] = v;
        rc = (rc = list_store(t, key, &l, max)) ? rc : 1;
    }
    list_free(&l);
    return rc;
}

int list_insert(kv_txn *t, struct kv_slice key, long long max, int after, struct kv_slice pivot,
                struct kv_slice v, uint64_t *len)
{
    struct list l;
    int rc = list_load(t, key, &l);
    size_t i = 0;
    *len = 0;
    while (rc > 0 && i < l.n && !same(l.e[i], pivot))
        i++;
    if (rc > 0 && i == l.n)
        rc = 2;
    else if (rc > 0 && !(rc = list_insert_at(&l, i + (size_t)after, v)) &&
             !(rc = list_store(t, key, &l, max)))
        *len = l.n, rc = 1;
    list_free(&l);
    return rc;
}

int list_rem(kv_txn *t, struct kv_slice key, long long max, long long count, struct kv_slice v,
             uint64_t *removed)
{
    struct list l;
    int rc = list_load(t, key, &l);
    unsigned long long limit = count < 0 ? 0ULL - (unsigned long long)count
                                         : (unsigned long long)count;
    size_t kept = 0;
    *removed = 0;
    if (rc <= 0) {
        list_free(&l);
        return rc;
    }
    if (count >= 0) {
        for (size_t i = 0; i < l.n; i++)
            if (same(l.e[i], v) && (!limit || *removed < limit))
                ++*removed;
            else
                l.e[kept++] = l.e[i];
    } else {
        /* from the tail: keep the survivors at the end, then slide */
        kept = l.n;
        for (size_t i = l.n; i-- > 0;)
            if (same(l.e[i], v) && *removed < limit)
                ++*removed;
            else
                l.e[--kept] = l.e[i];
        memmove(l.e, l.e + kept, (l.n - kept) * sizeof *l.e);
        kept = l.n - kept;
    }
    l.n = kept;
    rc = *removed ? list_store(t, key, &l, max) : 0;
    list_free(&l);
    return rc ? rc : 1;
}

int list_trim(kv_txn *t, struct kv_slice key, long long max, long long start, long long end)
{
    struct list l;
    long long first, last;
    int rc = list_load(t, key, &l);
    if (rc > 0) {
        size_t n0 = l.n;
        list_clamp(start, end, l.n, &first, &last);
        if (first > last) {
            l.n = 0;
        } else {
            list_remove_at(&l, (size_t)last + 1, l.n - (size_t)last - 1);
            list_remove_at(&l, 0, (size_t)first);
        }
        rc = l.n == n0 ? 1 : (rc = list_store(t, key, &l, max)) ? rc : 1;
    }
    list_free(&l);
    return rc;
}
