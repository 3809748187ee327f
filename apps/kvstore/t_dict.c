/* t_dict.c - the persistent element table of big hashes and sets
 * (t_dict.h), on txn.h alone: linear hashing over chains.
 *
 * Layout (every field a u64 or a txn_obj handle)
 *   header   {count, level, split, nseg, dir}: the table has
 *            SEG_BUCKETS << level buckets, plus `split` buckets of the next
 *            level: bucket split + (SEG_BUCKETS << level) is the upper half
 *            of bucket `split`, already split
 *   dir      {seg[capacity]}, capacity from the object's size; seg[0 ..
 *            nseg) made
 *   segment  {head[SEG_BUCKETS]}: the chains' first nodes
 *   node     {next, hash, flen | vlen << 32, field bytes, value bytes}
 *
 * Why linear hashing: the table grows by one bucket split per insert past
 * a load of one element a bucket, so no request rehashes more than one
 * chain (a doubling table would move every element at once, or need a
 * second table while it drains); objects stay small (512-byte segments,
 * nodes of their element), which a copying engine (cow) copies on write.
 * Only the directory grows by copying: one handle per 64 buckets.
 *
 * Invariants (dict_objects verifies each)
 *  D1 Element e lies in bucket b(e.hash): h & (N - 1) with N =
 *     SEG_BUCKETS << level, or h & (2N - 1) when that is below split.
 *  D2 count is the number of nodes of all chains; split < N.
 *  D3 Every bucket below N + split lies in a segment below nseg. */
#include "t_dict.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define SEG_BITS 6
#define SEG_BUCKETS (1u << SEG_BITS)
#define SEG_BYTES (SEG_BUCKETS * 8)
#define MAX_LEVEL 40

enum { H_COUNT = 0, H_LEVEL = 8, H_SPLIT = 16, H_NSEG = 24, H_DIR = 32, HDR_SIZE = 40 };
enum { N_NEXT = 0, N_HASH = 8, N_LENS = 16, NODE_HDR = 24 };

struct hdr {
    uint64_t count, level, split, nseg;
    txn_obj *dir;
};
_Static_assert(sizeof(struct hdr) == HDR_SIZE, "header layout");

struct node {
    txn_obj *next;
    uint64_t hash;
    uint64_t lens;
};

/* the element hash: part of the layout (D1) */
static uint64_t ehash(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* dict_bytes_taken's count: a thread's, as its transactions are */
static _Thread_local int64_t taken;

int64_t dict_bytes_taken(void)
{
    int64_t n = taken;
    taken = 0;
    return n;
}

static int dalloc(txn *tx, size_t n, txn_obj **out)
{
    int rc = txn_alloc(tx, n, out);
    if (!rc)
        taken += (int64_t)txn_obj_size(txn_pool_of(tx), *out);
    return rc;
}

static int dfree(txn *tx, txn_obj *o)
{
    int64_t n = (int64_t)txn_obj_size(txn_pool_of(tx), o);
    int rc = txn_free(tx, o);
    if (!rc)
        taken -= n;
    return rc;
}

static int hdr_read(txn *tx, txn_obj *d, struct hdr *h)
{
    int rc = txn_read(tx, d, 0, h, sizeof *h);
    if (!rc && (h->level > MAX_LEVEL || h->split >= (uint64_t)SEG_BUCKETS << h->level))
        rc = TXN_E_CORRUPT;
    return rc;
}

static uint64_t bucket_of(const struct hdr *h, uint64_t hash)
{
    uint64_t n = (uint64_t)SEG_BUCKETS << h->level, b = hash & (n - 1);
    return b < h->split ? hash & (2 * n - 1) : b;
}

static uint64_t buckets(const struct hdr *h)
{
    return ((uint64_t)SEG_BUCKETS << h->level) + h->split;
}

/* Where bucket b's head lives: segment and offset (D3). */
static int head_ref(txn *tx, const struct hdr *h, uint64_t b, txn_obj **seg, size_t *off)
{
    if (b / SEG_BUCKETS >= h->nseg)
        return TXN_E_CORRUPT;
    *off = (size_t)(b % SEG_BUCKETS) * 8;
    return txn_read(tx, h->dir, (size_t)(b / SEG_BUCKETS) * 8, seg, sizeof *seg);
}

static int seg_new(txn *tx, txn_obj **out)
{
    static const char zeros[SEG_BYTES];
    int rc = dalloc(tx, SEG_BYTES, out);
    return rc ? rc : txn_write(tx, *out, 0, zeros, sizeof zeros);
}

int dict_new(txn *tx, txn_obj **out)
{
    struct hdr h = {0, 0, 0, 1, NULL};
    txn_obj *d, *seg;
    int rc = dalloc(tx, HDR_SIZE, &d);
    if (!rc)
        rc = dalloc(tx, 8 * 8, &h.dir);
    if (!rc)
        rc = seg_new(tx, &seg);
    if (!rc)
        rc = txn_write(tx, h.dir, 0, &seg, sizeof seg);
    if (!rc)
        rc = txn_write(tx, d, 0, &h, sizeof h);
    if (!rc)
        *out = d;
    return rc;
}

int dict_count(txn *tx, txn_obj *d, uint64_t *n)
{
    return txn_read(tx, d, H_COUNT, n, sizeof *n);
}

/* A node's element, read whole, to cb. */
static int give(txn *tx, txn_obj *node, const struct node *nh, dict_elem_fn cb, void *arg)
{
    if (!cb)
        return 0;
    size_t fn = (size_t)(nh->lens & 0xffffffffu), vn = (size_t)(nh->lens >> 32);
    char small[512], *p = fn + vn <= sizeof small ? small : malloc(fn + vn);
    if (!p)
        return TXN_E_NOMEM;
    int rc = txn_read(tx, node, NODE_HDR, p, fn + vn);
    if (!rc)
        cb(arg, p, fn, p + fn, vn);
    if (p != small)
        free(p);
    return rc;
}

/* A chain position: the node found and the link (object, offset) that
 * points at it. */
struct pos {
    txn_obj *seg;    /* the bucket's segment */
    size_t head_off; /* the bucket's head in it */
    txn_obj *link;
    size_t link_off;
    txn_obj *node;
    struct node nh;
};

/* Find f: 1 (p->node and its link), 0 missing (p's bucket set), <0. */
static int locate(txn *tx, const struct hdr *h, const char *f, size_t fn, uint64_t hash,
                  struct pos *p)
{
    int rc = head_ref(tx, h, bucket_of(h, hash), &p->seg, &p->head_off);
    p->link = p->seg;
    p->link_off = p->head_off;
    if (!rc)
        rc = txn_read(tx, p->seg, p->head_off, &p->node, sizeof p->node);
    for (uint64_t steps = 0; !rc && p->node; steps++) {
        if (steps > h->count) /* longer than the table: a cycle */
            return TXN_E_CORRUPT;
        if ((rc = txn_read(tx, p->node, 0, &p->nh, sizeof p->nh)))
            break;
        if (p->nh.hash == hash && (p->nh.lens & 0xffffffffu) == fn) {
            char small[256], *q = fn <= sizeof small ? small : malloc(fn);
            if (!q)
                return TXN_E_NOMEM;
            rc = txn_read(tx, p->node, NODE_HDR, q, fn);
            int eq = !rc && !memcmp(q, f, fn);
            if (q != small)
                free(q);
            if (eq)
                return 1;
        }
        p->link = p->node;
        p->link_off = N_NEXT;
        p->node = p->nh.next;
    }
    return rc;
}

int dict_get(txn *tx, txn_obj *d, const char *f, size_t fn, dict_elem_fn cb, void *arg)
{
    struct hdr h;
    struct pos p;
    int rc = hdr_read(tx, d, &h);
    if (!rc)
        rc = locate(tx, &h, f, fn, ehash(f, fn), &p);
    if (rc == 1 && (rc = give(tx, p.node, &p.nh, cb, arg)) == 0)
        rc = 1;
    return rc;
}

static int node_new(txn *tx, txn_obj *next, uint64_t hash, const char *f, size_t fn,
                    const char *v, size_t vn, txn_obj **out)
{
    if (fn > 0xffffffffu || vn > 0xffffffffu)
        return TXN_E_NOSPACE;
    size_t size = NODE_HDR + fn + vn;
    struct node nh = {next, hash, (uint64_t)fn | (uint64_t)vn << 32};
    char small[NODE_HDR + 512], *img = size <= sizeof small ? small : malloc(size);
    if (!img)
        return TXN_E_NOMEM;
    /* put together and written once: one pass through the engine */
    memcpy(img, &nh, sizeof nh);
    if (fn)
        memcpy(img + NODE_HDR, f, fn);
    if (vn)
        memcpy(img + NODE_HDR + fn, v, vn);
    int rc = dalloc(tx, size, out);
    if (!rc)
        rc = txn_write(tx, *out, 0, img, size);
    if (img != small)
        free(img);
    return rc;
}

/* The directory with room for segment h->nseg (a copy twice as large when
 * it is full). */
static int dir_room(txn *tx, struct hdr *h)
{
    size_t cap = txn_obj_size(txn_pool_of(tx), h->dir) / 8;
    if (h->nseg < cap)
        return 0;
    txn_obj *nd;
    size_t bytes = (size_t)h->nseg * 8;
    void *copy = malloc(bytes);
    if (!copy)
        return TXN_E_NOMEM;
    int rc = txn_read(tx, h->dir, 0, copy, bytes);
    if (!rc)
        rc = dalloc(tx, 2 * bytes, &nd);
    if (!rc)
        rc = txn_write(tx, nd, 0, copy, bytes);
    free(copy);
    if (!rc)
        rc = dfree(tx, h->dir);
    if (!rc)
        h->dir = nd;
    return rc;
}

/* Split bucket h->split into itself and its upper half (D1 kept): the
 * chain's nodes relinked, at most one segment made. */
static int split_one(txn *tx, struct hdr *h)
{
    uint64_t n = (uint64_t)SEG_BUCKETS << h->level, lo = h->split, hi = lo + n;
    int rc = 0;
    if (hi / SEG_BUCKETS >= h->nseg) {
        txn_obj *seg;
        if ((rc = dir_room(tx, h)) || (rc = seg_new(tx, &seg)) ||
            (rc = txn_write(tx, h->dir, (size_t)h->nseg * 8, &seg, sizeof seg)))
            return rc;
        h->nseg++;
    }
    txn_obj *lseg, *hseg, *cur, *tail[2] = {NULL, NULL};
    size_t loff, hoff;
    if ((rc = head_ref(tx, h, lo, &lseg, &loff)) || (rc = head_ref(tx, h, hi, &hseg, &hoff)) ||
        (rc = txn_read(tx, lseg, loff, &cur, sizeof cur)))
        return rc;
    txn_obj *heads[2] = {NULL, NULL};
    for (uint64_t steps = 0; cur; steps++) {
        struct node nh;
        if (steps > h->count)
            return TXN_E_CORRUPT;
        if ((rc = txn_read(tx, cur, 0, &nh, sizeof nh)))
            return rc;
        /* D1: a node of bucket lo has lo or hi in its low bits */
        assert((nh.hash & (n - 1)) == lo);
        int up = (nh.hash & (2 * n - 1)) == hi;
        /* a node whose next stays the same keeps its link unwritten */
        if (tail[up] && (rc = txn_write(tx, tail[up], N_NEXT, &cur, sizeof cur)))
            return rc;
        if (!tail[up])
            heads[up] = cur;
        tail[up] = cur;
        cur = nh.next;
    }
    static txn_obj *const none = NULL;
    for (int i = 0; i < 2; i++)
        if (tail[i] && (rc = txn_write(tx, tail[i], N_NEXT, &none, sizeof none)))
            return rc;
    if ((rc = txn_write(tx, lseg, loff, &heads[0], sizeof heads[0])) ||
        (rc = txn_write(tx, hseg, hoff, &heads[1], sizeof heads[1])))
        return rc;
    if (++h->split == n) {
        h->level++;
        h->split = 0;
    }
    return 0;
}

int dict_set(txn *tx, txn_obj *d, const char *f, size_t fn, const char *v, size_t vn, int nx)
{
    struct hdr h, was;
    struct pos p;
    uint64_t hash = ehash(f, fn);
    int rc = hdr_read(tx, d, &h);
    if (!rc)
        rc = locate(tx, &h, f, fn, hash, &p);
    if (rc < 0 || (rc == 1 && nx))
        return rc == 1 ? 0 : rc;
    txn_obj *node;
    if (rc == 1) {
        if ((p.nh.lens >> 32) == vn) /* same length: the bytes in place */
            return vn ? txn_write(tx, p.node, NODE_HDR + fn, v, vn) : 0;
        if ((rc = node_new(tx, p.nh.next, hash, f, fn, v, vn, &node)) ||
            (rc = dfree(tx, p.node)))
            return rc;
        return txn_write(tx, p.link, p.link_off, &node, sizeof node);
    }
    txn_obj *head;
    if ((rc = txn_read(tx, p.seg, p.head_off, &head, sizeof head)) ||
        (rc = node_new(tx, head, hash, f, fn, v, vn, &node)) ||
        (rc = txn_write(tx, p.seg, p.head_off, &node, sizeof node)))
        return rc;
    was = h;
    h.count++;
    if (h.count > buckets(&h) && h.level < MAX_LEVEL && (rc = split_one(tx, &h)))
        return rc;
    /* the count alone, or the whole header after a split */
    int grew = memcmp(&h.level, &was.level, sizeof h - H_LEVEL) != 0;
    rc = grew ? txn_write(tx, d, 0, &h, sizeof h) : txn_write(tx, d, H_COUNT, &h.count, 8);
    return rc ? rc : 1;
}

int dict_del(txn *tx, txn_obj *d, const char *f, size_t fn)
{
    struct hdr h;
    struct pos p;
    int rc = hdr_read(tx, d, &h);
    if (!rc)
        rc = locate(tx, &h, f, fn, ehash(f, fn), &p);
    if (rc <= 0)
        return rc;
    h.count--;
    if ((rc = dfree(tx, p.node)) ||
        (rc = txn_write(tx, p.link, p.link_off, &p.nh.next, sizeof p.nh.next)) ||
        (rc = txn_write(tx, d, H_COUNT, &h.count, sizeof h.count)))
        return rc;
    return 1;
}

/* Each node of bucket b: fn(node, its header), stopping at fn's nonzero
 * return. */
static int walk(txn *tx, const struct hdr *h, uint64_t b,
                int (*fn)(txn *tx, txn_obj *node, const struct node *nh, void *arg), void *arg)
{
    txn_obj *seg, *cur;
    size_t off;
    int rc = head_ref(tx, h, b, &seg, &off);
    if (!rc)
        rc = txn_read(tx, seg, off, &cur, sizeof cur);
    for (uint64_t steps = 0; !rc && cur; steps++) {
        struct node nh;
        if (steps > h->count)
            return TXN_E_CORRUPT;
        if (!(rc = txn_read(tx, cur, 0, &nh, sizeof nh)))
            rc = fn(tx, cur, &nh, arg);
        cur = nh.next;
    }
    return rc;
}

struct giving {
    dict_elem_fn cb;
    void *arg;
    uint64_t given;
    uint64_t skip; /* dict_random: nodes to pass first */
    int done;
};

static int give_one(txn *tx, txn_obj *node, const struct node *nh, void *arg)
{
    struct giving *g = arg;
    if (g->skip) {
        g->skip--;
        return 0;
    }
    g->given++;
    int rc = give(tx, node, nh, g->cb, g->arg);
    return rc ? rc : g->done; /* done: one element wanted (dict_random) */
}

int dict_scan(txn *tx, txn_obj *d, uint64_t cursor, uint64_t count, dict_elem_fn cb, void *arg,
              uint64_t *next)
{
    struct hdr h;
    struct giving g = {cb, arg, 0, 0, 0};
    int rc = hdr_read(tx, d, &h);
    uint64_t b = cursor;
    for (; !rc && b < buckets(&h) && g.given < count; b++)
        rc = walk(tx, &h, b, give_one, &g);
    *next = b < buckets(&h) ? b : 0;
    return rc;
}

static int count_one(txn *tx, txn_obj *node, const struct node *nh, void *arg)
{
    (void)tx, (void)node, (void)nh;
    ++*(uint64_t *)arg;
    return 0;
}

int dict_random(txn *tx, txn_obj *d, uint64_t r, dict_elem_fn cb, void *arg)
{
    struct hdr h;
    int rc = hdr_read(tx, d, &h);
    if (rc || !h.count)
        return rc;
    uint64_t nb = buckets(&h);
    /* a random bucket until one has elements, then a random one of them
     * (as Redis's dictGetFairRandomKey, roughly: long chains are rare at a
     * load of one); a walk on from the last tried if many were empty */
    for (int tries = 0;; tries++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t b = (r >> 17) % nb, len = 0;
        if (tries >= 64) {
            uint64_t seen = 0;
            for (; !rc && !len && seen++ < nb; b = (b + 1) % nb)
                rc = walk(tx, &h, b, count_one, &len);
            if (!rc && !len) /* count says elements, no bucket has one: D2 */
                return TXN_E_CORRUPT;
        } else {
            rc = walk(tx, &h, b, count_one, &len);
        }
        if (rc)
            return rc;
        if (len) {
            if (tries >= 64)
                b = (b + nb - 1) % nb;
            struct giving g = {cb, arg, 0, (r >> 40) % len, 1};
            rc = walk(tx, &h, b, give_one, &g);
            return rc < 0 ? rc : 1;
        }
    }
}

struct copying {
    txn_obj *to;
};

static int copy_node(txn *tx, txn_obj *node, const struct node *nh, void *arg)
{
    struct copying *c = arg;
    size_t fn = (size_t)(nh->lens & 0xffffffffu), vn = (size_t)(nh->lens >> 32);
    char small[512], *p = fn + vn <= sizeof small ? small : malloc(fn + vn);
    if (!p)
        return TXN_E_NOMEM;
    int rc = txn_read(tx, node, NODE_HDR, p, fn + vn);
    if (!rc)
        rc = dict_set(tx, c->to, p, fn, p + fn, vn, 0);
    if (p != small)
        free(p);
    return rc < 0 ? rc : 0;
}

int dict_copy(txn *tx, txn_obj *d, txn_obj **out)
{
    struct hdr h;
    struct copying c = {NULL};
    int rc = hdr_read(tx, d, &h);
    if (!rc)
        rc = dict_new(tx, &c.to);
    for (uint64_t b = 0; !rc && b < buckets(&h); b++)
        rc = walk(tx, &h, b, copy_node, &c);
    if (!rc)
        *out = c.to;
    return rc;
}

static int free_node(txn *tx, txn_obj *node, const struct node *nh, void *arg)
{
    (void)nh, (void)arg;
    return dfree(tx, node);
}

/* The table's segments, directory and header, its elements freed. */
static int free_frame(txn *tx, const struct hdr *h, txn_obj *d)
{
    int rc = 0;
    for (uint64_t s = 0; !rc && s < h->nseg; s++) {
        txn_obj *seg;
        if (!(rc = txn_read(tx, h->dir, (size_t)s * 8, &seg, sizeof seg)))
            rc = dfree(tx, seg);
    }
    if (!rc)
        rc = dfree(tx, h->dir);
    return rc ? rc : dfree(tx, d);
}

int dict_free(txn *tx, txn_obj *d)
{
    struct hdr h;
    int rc = hdr_read(tx, d, &h);
    for (uint64_t b = 0; !rc && b < buckets(&h); b++)
        rc = walk(tx, &h, b, free_node, NULL);
    return rc ? rc : free_frame(tx, &h, d);
}

int dict_free_some(txn *tx, txn_obj *d, uint64_t *cursor, uint64_t budget, uint64_t *freed)
{
    struct hdr h;
    int rc = hdr_read(tx, d, &h), wrapped = 0;
    uint64_t nb = buckets(&h), b = *cursor < nb ? *cursor : 0, left = budget, dry = 0;
    *freed = 0;
    /* empty buckets cost a read each: at most 4 * budget of them a call */
    while (!rc && h.count && left && dry < 4 * budget) {
        if (b >= nb) {
            if (wrapped) /* count says more nodes than the chains hold (D2) */
                return TXN_E_CORRUPT;
            b = 0;
            wrapped = 1;
        }
        txn_obj *seg, *cur;
        size_t off;
        if ((rc = head_ref(tx, &h, b, &seg, &off)) ||
            (rc = txn_read(tx, seg, off, &cur, sizeof cur)))
            break;
        if (!cur) {
            b++;
            dry++;
            continue;
        }
        while (cur && left && !rc) {
            txn_obj *next;
            if (!h.count)
                return TXN_E_CORRUPT;
            if (!(rc = txn_read(tx, cur, N_NEXT, &next, sizeof next)) &&
                !(rc = dfree(tx, cur))) {
                cur = next;
                h.count--;
                left--;
                ++*freed;
            }
        }
        if (!rc)
            rc = txn_write(tx, seg, off, &cur, sizeof cur);
    }
    if (!rc && *freed)
        rc = txn_write(tx, d, H_COUNT, &h.count, sizeof h.count);
    *cursor = b;
    if (rc || h.count)
        return rc;
    return (rc = free_frame(tx, &h, d)) ? rc : 1;
}

struct visiting {
    int (*fn)(txn_obj *o, void *arg);
    void *arg;
    const struct hdr *h;
    uint64_t b, nodes;
};

static int sized(txn *tx, txn_obj *o, size_t n)
{
    return o && txn_obj_size(txn_pool_of(tx), o) >= n;
}

static int visit_node(txn *tx, txn_obj *node, const struct node *nh, void *arg)
{
    struct visiting *v = arg;
    size_t len = NODE_HDR + (size_t)(nh->lens & 0xffffffffu) + (size_t)(nh->lens >> 32);
    v->nodes++;
    if (!sized(tx, node, len) || bucket_of(v->h, nh->hash) != v->b) /* D1 */
        return TXN_E_CORRUPT;
    return v->fn(node, v->arg);
}

int dict_objects(txn *tx, txn_obj *d, int (*fn)(txn_obj *o, void *arg), void *arg)
{
    struct hdr h;
    if (!sized(tx, d, HDR_SIZE))
        return TXN_E_CORRUPT;
    int rc = hdr_read(tx, d, &h);
    if (rc || (rc = fn(d, arg)))
        return rc;
    uint64_t nb = buckets(&h);
    if (!sized(tx, h.dir, (size_t)h.nseg * 8) || (nb - 1) / SEG_BUCKETS >= h.nseg) /* D3 */
        return TXN_E_CORRUPT;
    if ((rc = fn(h.dir, arg)))
        return rc;
    for (uint64_t s = 0; !rc && s < h.nseg; s++) {
        txn_obj *seg;
        if (!(rc = txn_read(tx, h.dir, (size_t)s * 8, &seg, sizeof seg)))
            rc = sized(tx, seg, SEG_BYTES) ? fn(seg, arg) : TXN_E_CORRUPT;
    }
    struct visiting v = {fn, arg, &h, 0, 0};
    for (; !rc && v.b < nb; v.b++)
        rc = walk(tx, &h, v.b, visit_node, &v);
    if (!rc && v.nodes != h.count) /* D2 */
        rc = TXN_E_CORRUPT;
    return rc;
}
