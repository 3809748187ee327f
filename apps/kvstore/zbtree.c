/* zbtree.c - a large sorted set: two B-trees in the key's one value.
 *
 * The value is a 64-byte header (a marker no packed record's count can
 * equal, the member count, the two roots, a free list of nodes, the bytes
 * of dead long members), then nodes and long members anywhere after it.
 * Tree 0 orders the members by (score, member) and keeps, per child, the
 * members under it (ranks in O(log n)); tree 1 orders them by member (a
 * member's score without a scan). Both are the same code with another
 * comparison. An entry holds the score, the length and a member of up to
 * INL bytes; a longer member lives once, apart, and both entries hold its
 * first PFX bytes and where it is.
 *
 * Nodes are read and written through a handle to the value
 * (kv_txn_open_as), so every change is part of the command's transaction
 * and only the bytes that differ are written (a node's old and new
 * copies are compared). A deleted long member's bytes are counted, and
 * the set is written again compactly once they pass half the value.
 * Values are in host byte order (the pool is not portable across byte
 * orders anyway). */
#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "zbtree.h"

#define MAXK 15 /* keys in a node at most: a fan-out of 16 */
#define MINK 7  /* ... and at least, but in the root */
#define INL 28  /* a member this long or shorter is kept in its entry */
#define PFX 20  /* of a longer one, its first bytes, then its offset */
#define MARK 0xFFFFFFFFu
#define MAXCACHE 192 /* nodes one operation may touch: 3 a level, both trees */
#define CHUNK 16     /* slots allocated at a time (a ZADD touches about 12) */

struct ent {
    double s;
    uint32_t len;
    unsigned char d[INL];
};

struct node {
    uint16_t n, leaf;
    uint32_t pad;
    struct ent e[MAXK];
    uint64_t child[MAXK + 1];
    uint32_t cnt[MAXK + 1]; /* members under child[i]: kept in tree 0 only
                               (tree 1's are never read, and not keeping
                               them spares a write a level per change) */
};

struct hdr {
    uint32_t mark, ver;
    uint64_t count;
    uint64_t root[2];
    uint64_t free;    /* freed nodes, each linking the next in child[0] */
    uint64_t garbage; /* bytes of long members deleted */
    uint64_t spare[2];
};

_Static_assert(sizeof(struct ent) == 40, "entries are packed");
_Static_assert(sizeof(struct node) == 8 + MAXK * 40 + (MAXK + 1) * 12, "nodes are packed");
_Static_assert(sizeof(struct hdr) == 64, "the header is 64 bytes");

#define HDR sizeof(struct hdr)
#define NODE sizeof(struct node)

/* A node read (or made) by this operation. A node only read is copied
 * once (cur); mut() keeps its bytes as read (orig) before the first change,
 * and flush writes a changed node's bytes that differ. A counter or a
 * score changed in a node not otherwise changed is written at once
 * (put), keeping it clean: most nodes of a ZADD change only a counter.
 * Z1: a clean slot's cur is the node as the transaction sees it. */
struct slot {
    uint64_t off;
    int fresh; /* made by this operation: written whole */
    int dirty; /* mut() was called: orig holds the node as read */
    struct node orig, cur;
};

struct zb {
    kv_txn *t;
    struct kv_slice key;
    kv_val *v; /* the key's value, found once */
    uint64_t len; /* the value's bytes, with the room of nodes made */
    struct hdr h0, h;
    struct slot *c[MAXCACHE / CHUNK]; /* slot i: c[i / CHUNK][i % CHUNK] */
    size_t nc;
    int err;
};

/* What a search compares against: (s, m) in tree 0, m in tree 1 */
struct key {
    double s;
    struct kv_slice m;
};

/* Nodes and long members through the value's handle (kv_val): a read
 * past the value's end is a damaged offset */
static int rd(zb *z, uint64_t off, void *dst, size_t n)
{
    int rc = kv_val_read(z->v, off, dst, n);
    return rc == TXN_E_INVAL ? TXN_E_CORRUPT : rc;
}

static int wr(zb *z, uint64_t off, const void *src, size_t n)
{
    return kv_val_write(z->v, off, src, n);
}

static int mcmp(struct kv_slice a, struct kv_slice b)
{
    int c = memcmp(a.p, b.p, a.n < b.n ? a.n : b.n);
    return c ? c : a.n < b.n ? -1 : a.n > b.n;
}

static uint64_t blob_of(const struct ent *e)
{
    uint64_t b;
    memcpy(&b, e->d + PFX, sizeof b);
    return b;
}

/* The entry's member, compared with m (z->err on a failed read) */
static int ent_mcmp(zb *z, const struct ent *e, struct kv_slice m)
{
    if (e->len <= INL)
        return mcmp((struct kv_slice){(const char *)e->d, e->len}, m);
    size_t p = m.n < PFX ? m.n : PFX;
    int c = memcmp(e->d, m.p, p);
    if (c || m.n <= PFX)
        return c ? c : 1; /* equal prefix: the entry is the longer */
    char *buf = malloc(e->len);
    if (!buf) {
        z->err = TXN_E_NOMEM;
        return 0;
    }
    int rc = rd(z, blob_of(e), buf, e->len);
    if (rc)
        z->err = rc;
    c = rc ? 0 : mcmp((struct kv_slice){buf, e->len}, m);
    free(buf);
    return c;
}

/* entry against key in tree `tr` */
static int ent_cmp(zb *z, int tr, const struct ent *e, const struct key *k)
{
    if (!tr && e->s != k->s)
        return e->s < k->s ? -1 : 1;
    return ent_mcmp(z, e, k->m);
}

/* ---- the node cache of an operation */

static struct slot *slot_at(zb *z, size_t i)
{
    return &z->c[i / CHUNK][i % CHUNK];
}

/* The operation's next slot (its chunk allocated on first use) */
static struct slot *new_slot(zb *z)
{
    assert(z->nc < MAXCACHE); /* 1: an operation touches at most MAXCACHE nodes */
    struct slot **c = &z->c[z->nc / CHUNK];
    if (!*c && !(*c = malloc(CHUNK * sizeof **c))) {
        z->err = TXN_E_NOMEM;
        return NULL;
    }
    return slot_at(z, z->nc++);
}

static struct node *get(zb *z, uint64_t off)
{
    for (size_t i = 0; i < z->nc; i++)
        if (slot_at(z, i)->off == off)
            return &slot_at(z, i)->cur;
    if (z->err)
        return NULL;
    if (off < HDR || off > z->len || z->len - off < NODE) {
        z->err = TXN_E_CORRUPT;
        return NULL;
    }
    struct slot *s = new_slot(z);
    if (!s)
        return NULL;
    int rc = rd(z, off, &s->cur, NODE);
    if (!rc && s->cur.n > MAXK)
        rc = TXN_E_CORRUPT;
    if (rc) {
        z->nc--; /* (the slot is not the node) */
        z->err = rc;
        return NULL;
    }
    s->off = off;
    s->fresh = 0;
    s->dirty = 0;
#ifndef NDEBUG
    s->orig = s->cur; /* for Z1's assert in flush */
#endif
    return &s->cur;
}

static struct slot *slot_of(struct node *x)
{
    return (struct slot *)(void *)((char *)x - offsetof(struct slot, cur));
}

/* x (from get or make) is about to change: its bytes as read are kept */
static void mut(struct node *x)
{
    struct slot *s = slot_of(x);
    if (!s->fresh && !s->dirty) {
        s->orig = *x;
        s->dirty = 1;
    }
}

/* Store n bytes of src at byte fo of x: written now if x is clean (Z1
 * holds: cur and orig both get them), else by flush */
static void put(zb *z, struct node *x, size_t fo, const void *src, size_t n)
{
    struct slot *s = slot_of(x);
    memcpy((char *)x + fo, src, n);
    if (s->fresh || s->dirty || z->err)
        return;
#ifndef NDEBUG
    memcpy((char *)&s->orig + fo, src, n);
#endif
    z->err = wr(z, s->off + fo, src, n);
}

static void cnt_add(zb *z, struct node *x, unsigned i, int d)
{
    uint32_t v = x->cnt[i] + (uint32_t)d;
    put(z, x, offsetof(struct node, cnt) + i * sizeof v, &v, sizeof v);
}

/* A node for the tree, from the free list or past the value's end */
static struct node *make(zb *z, int leaf, uint64_t *off)
{
    if (z->err)
        return NULL;
    struct node *x;
    if (z->h.free) {
        *off = z->h.free;
        if (!(x = get(z, *off)))
            return NULL;
        mut(x);
        z->h.free = x->child[0];
    } else {
        struct slot *s = new_slot(z);
        if (!s)
            return NULL;
        *off = s->off = z->len;
        s->fresh = 1;
        s->dirty = 0;
        z->len += NODE;
        x = &s->cur;
    }
    memset(x, 0, NODE);
    x->leaf = (uint16_t)leaf;
    return x;
}

static void drop(zb *z, struct node *x, uint64_t off)
{
    mut(x);
    memset(x, 0, NODE);
    x->child[0] = z->h.free;
    z->h.free = off;
}

/* Write the bytes of each node and of the header that changed */
static int flush(zb *z)
{
    for (size_t i = 0; i < z->nc && !z->err; i++) {
        struct slot *s = slot_at(z, i);
        const unsigned char *a = (const void *)&s->orig, *b = (const void *)&s->cur;
        size_t lo = 0, hi = NODE;
        assert(s->fresh || s->dirty || !memcmp(a, b, NODE)); /* Z1 */
        if (!s->fresh && (!s->dirty || !memcmp(a, b, NODE)))
            continue; /* most nodes an operation reads, it only reads */
        if (!s->fresh) { /* the changed span: by blocks, then bytes */
            while (lo + 32 <= NODE && !memcmp(a + lo, b + lo, 32))
                lo += 32;
            while (lo < NODE && a[lo] == b[lo])
                lo++;
            while (hi >= lo + 32 && !memcmp(a + hi - 32, b + hi - 32, 32))
                hi -= 32;
            while (hi > lo && a[hi - 1] == b[hi - 1])
                hi--;
        }
        if (hi > lo && (z->err = wr(z, s->off + lo, b + lo, hi - lo)) == 0)
            s->orig = s->cur;
        s->fresh = 0;
    }
    z->nc = 0;
    if (!z->err && memcmp(&z->h0, &z->h, HDR)) {
        z->err = wr(z, 0, &z->h, HDR);
        z->h0 = z->h;
    }
    return z->err;
}

/* ---- searching */

/* The first index of x whose entry is >= k; *eq: it is k */
static unsigned lower(zb *z, int tr, const struct node *x, const struct key *k, int *eq)
{
    unsigned lo = 0, hi = x->n;
    *eq = 0;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        int c = ent_cmp(z, tr, &x->e[mid], k);
        if (c == 0) {
            *eq = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Find k in tree tr: 1 (the node's offset and index to *off, *at, and
 * in tree 0 its rank to *rank), 0 missing */
static int search(zb *z, int tr, const struct key *k, uint64_t *off, unsigned *at,
                  uint64_t *rank)
{
    uint64_t o = z->h.root[tr], r = 0;
    while (o) {
        struct node *x = get(z, o);
        if (!x)
            return z->err;
        int eq;
        unsigned i = lower(z, tr, x, k, &eq);
        if (z->err)
            return z->err;
        for (unsigned j = 0; !x->leaf && j < i + (unsigned)eq; j++)
            r += x->cnt[j];
        if (eq) {
            *off = o;
            *at = i;
            if (rank)
                *rank = r + i;
            return 1;
        }
        if (x->leaf)
            return 0;
        r += i;
        o = x->child[i];
    }
    return 0;
}

/* ---- inserting: CLRS's top-down B-tree insertion, with counts */

static uint32_t sum_cnt(const struct node *x)
{
    uint32_t s = x->n;
    for (unsigned j = 0; !x->leaf && j <= x->n; j++)
        s += x->cnt[j];
    return s;
}

/* Split x's full child i into two of MINK keys, its middle key up */
static int split(zb *z, struct node *x, unsigned i)
{
    struct node *y = get(z, x->child[i]);
    if (!y)
        return z->err;
    uint64_t zo;
    struct node *w = make(z, y->leaf, &zo);
    if (!w)
        return z->err;
    assert(y->n == MAXK && x->n < MAXK); /* 2: only a full child of a non-full node splits */
    mut(y);
    mut(x);
    w->n = MINK;
    memcpy(w->e, &y->e[MINK + 1], MINK * sizeof *w->e);
    if (!y->leaf) {
        memcpy(w->child, &y->child[MINK + 1], (MINK + 1) * sizeof *w->child);
        memcpy(w->cnt, &y->cnt[MINK + 1], (MINK + 1) * sizeof *w->cnt);
    }
    uint32_t wc = sum_cnt(w), yc = x->cnt[i] - wc - 1;
    struct ent mid = y->e[MINK];
    y->n = MINK;
    memset(&y->e[MINK], 0, (MAXK - MINK) * sizeof *y->e);
    if (!y->leaf) {
        memset(&y->child[MINK + 1], 0, MINK * sizeof *y->child);
        memset(&y->cnt[MINK + 1], 0, MINK * sizeof *y->cnt);
    }
    memmove(&x->e[i + 1], &x->e[i], (x->n - i) * sizeof *x->e);
    memmove(&x->child[i + 2], &x->child[i + 1], (x->n - i) * sizeof *x->child);
    memmove(&x->cnt[i + 2], &x->cnt[i + 1], (x->n - i) * sizeof *x->cnt);
    x->e[i] = mid;
    x->child[i + 1] = zo;
    x->cnt[i] = yc;
    x->cnt[i + 1] = wc;
    x->n++;
    return 0;
}

static int tree_insert(zb *z, int tr, const struct ent *e, const struct key *k)
{
    uint64_t o = z->h.root[tr];
    struct node *x;
    if (!o) {
        if (!(x = make(z, 1, &z->h.root[tr])))
            return z->err;
        x->n = 1;
        x->e[0] = *e;
        return 0;
    }
    if (!(x = get(z, o)))
        return z->err;
    if (x->n == MAXK) {
        uint64_t ro;
        struct node *r = make(z, 0, &ro);
        if (!r)
            return z->err;
        r->child[0] = o;
        r->cnt[0] = sum_cnt(x); /* x, a leaf or internal, holds the tree */
        z->h.root[tr] = ro;
        if (split(z, r, 0))
            return z->err;
        x = r;
    }
    for (;;) {
        int eq;
        unsigned i = lower(z, tr, x, k, &eq);
        if (z->err)
            return z->err;
        if (eq)
            return z->err = TXN_E_CORRUPT; /* a member the caller said was not */
        if (x->leaf) {
            mut(x);
            memmove(&x->e[i + 1], &x->e[i], (x->n - i) * sizeof *x->e);
            x->e[i] = *e;
            x->n++;
            return 0;
        }
        struct node *y = get(z, x->child[i]);
        if (!y)
            return z->err;
        if (y->n == MAXK) {
            if (split(z, x, i))
                return z->err;
            if (ent_cmp(z, tr, &x->e[i], k) < 0)
                i++;
            if (z->err || !(y = get(z, x->child[i])))
                return z->err;
        }
        if (!tr)
            cnt_add(z, x, i, 1);
        if (z->err)
            return z->err;
        x = y;
    }
}

/* ---- deleting: find, swap with the predecessor into a leaf, then mend
 * the nodes left with fewer than MINK keys from the leaf up */

#define MAXDEPTH 48

static int tree_delete(zb *z, int tr, const struct key *k)
{
    uint64_t path[MAXDEPTH];
    unsigned idx[MAXDEPTH], d = 0, at = 0;
    uint64_t o = z->h.root[tr];
    struct node *x = NULL, *hit = NULL;
    for (;;) {
        if (!o || d == MAXDEPTH)
            return z->err = TXN_E_CORRUPT; /* the caller found it in the other tree */
        if (!(x = get(z, o)))
            return z->err;
        int eq;
        unsigned i = lower(z, tr, x, k, &eq);
        if (z->err)
            return z->err;
        path[d] = o;
        if (eq) {
            hit = x;
            at = i;
            idx[d++] = i; /* to the predecessor: child i, then rightmost */
            break;
        }
        if (x->leaf)
            return z->err = TXN_E_CORRUPT;
        idx[d++] = i;
        o = x->child[i];
    }
    if (hit->leaf) {
        mut(hit);
        memmove(&hit->e[at], &hit->e[at + 1], (hit->n - at - 1) * sizeof *hit->e);
        memset(&hit->e[--hit->n], 0, sizeof *hit->e);
    } else {
        o = hit->child[at];
        for (;;) {
            if (d == MAXDEPTH || !(x = get(z, o)))
                return z->err ? z->err : (z->err = TXN_E_CORRUPT);
            path[d] = o;
            idx[d++] = x->n;
            if (x->leaf)
                break;
            o = x->child[x->n];
        }
        if (!x->n)
            return z->err = TXN_E_CORRUPT;
        mut(hit);
        mut(x);
        hit->e[at] = x->e[x->n - 1];
        memset(&x->e[--x->n], 0, sizeof *x->e);
    }
    /* one member fewer under each child taken */
    for (unsigned j = 0; !tr && j + 1 < d; j++) {
        struct node *p = get(z, path[j]);
        if (!p)
            return z->err;
        cnt_add(z, p, idx[j], -1);
        if (z->err)
            return z->err;
    }
    for (unsigned j = d - 1; j > 0; j--) {
        struct node *n = get(z, path[j]), *p = get(z, path[j - 1]);
        if (!n || !p)
            return z->err;
        if (n->n >= MINK)
            break;
        unsigned ci = idx[j - 1];
        struct node *l = ci > 0 ? get(z, p->child[ci - 1]) : NULL;
        struct node *r = ci < p->n ? get(z, p->child[ci + 1]) : NULL;
        if (z->err)
            return z->err;
        mut(n);
        mut(p);
        if (l && l->n > MINK) { /* borrow from the left */
            mut(l);
            memmove(&n->e[1], &n->e[0], n->n * sizeof *n->e);
            n->e[0] = p->e[ci - 1];
            p->e[ci - 1] = l->e[l->n - 1];
            uint32_t moved = 1;
            if (!n->leaf) {
                memmove(&n->child[1], &n->child[0], (n->n + 1) * sizeof *n->child);
                memmove(&n->cnt[1], &n->cnt[0], (n->n + 1) * sizeof *n->cnt);
                n->child[0] = l->child[l->n];
                n->cnt[0] = l->cnt[l->n];
                moved += n->cnt[0];
                l->child[l->n] = 0;
                l->cnt[l->n] = 0;
            }
            memset(&l->e[--l->n], 0, sizeof *l->e);
            n->n++;
            p->cnt[ci - 1] -= moved;
            p->cnt[ci] += moved;
            break;
        }
        if (r && r->n > MINK) { /* borrow from the right */
            mut(r);
            n->e[n->n] = p->e[ci];
            p->e[ci] = r->e[0];
            uint32_t moved = 1;
            if (!n->leaf) {
                n->child[n->n + 1] = r->child[0];
                n->cnt[n->n + 1] = r->cnt[0];
                moved += r->cnt[0];
                memmove(&r->child[0], &r->child[1], r->n * sizeof *r->child);
                memmove(&r->cnt[0], &r->cnt[1], r->n * sizeof *r->cnt);
                r->child[r->n] = 0;
                r->cnt[r->n] = 0;
            }
            memmove(&r->e[0], &r->e[1], (r->n - 1) * sizeof *r->e);
            memset(&r->e[--r->n], 0, sizeof *r->e);
            n->n++;
            p->cnt[ci] += moved;
            p->cnt[ci + 1] -= moved;
            break;
        }
        /* merge a (left) + separator + b (right) into a; b is freed */
        unsigned s = l ? ci - 1 : ci;
        struct node *a = l ? l : n, *b = l ? n : r;
        if (!b)
            return z->err = TXN_E_CORRUPT; /* a child with no sibling */
        assert(a->n + 1 + b->n <= MAXK); /* 3: a merge fits one node */
        mut(a);
        uint64_t bo = p->child[s + 1];
        a->e[a->n] = p->e[s];
        memcpy(&a->e[a->n + 1], b->e, b->n * sizeof *b->e);
        if (!a->leaf) {
            memcpy(&a->child[a->n + 1], b->child, (b->n + 1) * sizeof *b->child);
            memcpy(&a->cnt[a->n + 1], b->cnt, (b->n + 1) * sizeof *b->cnt);
        }
        a->n = (uint16_t)(a->n + 1 + b->n);
        p->cnt[s] += 1 + p->cnt[s + 1];
        memmove(&p->e[s], &p->e[s + 1], (p->n - s - 1) * sizeof *p->e);
        memmove(&p->child[s + 1], &p->child[s + 2], (p->n - s - 1) * sizeof *p->child);
        memmove(&p->cnt[s + 1], &p->cnt[s + 2], (p->n - s - 1) * sizeof *p->cnt);
        p->n--;
        memset(&p->e[p->n], 0, sizeof *p->e);
        p->child[p->n + 1] = 0;
        p->cnt[p->n + 1] = 0;
        drop(z, b, bo);
    }
    struct node *root = get(z, z->h.root[tr]);
    if (!root)
        return z->err;
    if (!root->n) {
        uint64_t old = z->h.root[tr];
        z->h.root[tr] = root->leaf ? 0 : root->child[0];
        drop(z, root, old);
    }
    return 0;
}

/* ---- the set */

static void fill_ent(struct ent *x, double s, struct kv_slice m, uint64_t blob)
{
    memset(x, 0, sizeof *x);
    x->s = s;
    x->len = (uint32_t)m.n;
    if (m.n <= INL) {
        memcpy(x->d, m.p, m.n);
    } else {
        memcpy(x->d, m.p, PFX);
        memcpy(x->d + PFX, &blob, sizeof blob);
    }
}

int zb_is_big(const char *v, size_t n)
{
    uint32_t mark;
    if (n < 4)
        return 0;
    memcpy(&mark, v, sizeof mark);
    return mark == MARK;
}

int zb_open(kv_txn *t, struct kv_slice key, zb **out)
{
    struct hdr h;
    uint64_t len;
    kv_val *v;
    int rc = kv_txn_open_as(t, key, KV_ZSET, &v, &len);
    if (rc <= 0)
        return rc;
    size_t got = len < HDR ? (size_t)len : HDR;
    rc = got < 4 ? 0 : kv_val_read(v, 0, &h, got);
    if (got < 4 || rc || h.mark != MARK) {
        kv_val_close(v);
        return rc; /* packed (0), or the read's error */
    }
    if (got < HDR || h.count > UINT32_MAX) {
        kv_val_close(v);
        return TXN_E_CORRUPT;
    }
    zb *z = calloc(1, sizeof *z);
    if (!z) {
        free(z);
        kv_val_close(v);
        return TXN_E_NOMEM;
    }
    z->t = t;
    z->key = key;
    z->v = v;
    z->len = len;
    z->h0 = z->h = h;
    *out = z;
    return 1;
}

uint64_t zb_card(const zb *z)
{
    return z->h.count;
}

/* Before an operation: write back what earlier ones changed once the
 * cache fills, so that one operation always has room */
static int begin(zb *z)
{
    return z->err ? z->err : z->nc > MAXCACHE / 3 ? flush(z) : 0;
}

/* Tree 1's entry of m: 1 (a copy to *e, its place to *off, *at), 0 */
static int member(zb *z, struct kv_slice m, struct ent *e, uint64_t *off, unsigned *at)
{
    struct key k = {0, m};
    int rc = search(z, 1, &k, off, at, NULL);
    if (rc > 0)
        *e = get(z, *off)->e[*at];
    return rc;
}

int zb_score(zb *z, struct kv_slice m, double *s)
{
    struct ent e;
    uint64_t off;
    unsigned at;
    int rc = begin(z);
    if (!rc && (rc = member(z, m, &e, &off, &at)) > 0)
        *s = e.s;
    return rc;
}

int zb_rank(zb *z, struct kv_slice m, double *s, uint64_t *rank)
{
    struct ent e;
    uint64_t off;
    unsigned at;
    int rc = begin(z);
    if (rc || (rc = member(z, m, &e, &off, &at)) <= 0)
        return rc;
    struct key k = {e.s, m};
    *s = e.s;
    rc = search(z, 0, &k, &off, &at, rank);
    return rc ? rc : TXN_E_CORRUPT; /* in tree 1, so in tree 0 */
}

int zb_insert(zb *z, double s, struct kv_slice m)
{
    int rc = begin(z);
    if (rc)
        return rc;
    if (m.n > UINT32_MAX || z->h.count >= UINT32_MAX)
        return TXN_E_NOSPACE;
    uint64_t blob = 0;
    if (m.n > INL) { /* the long member once, past the end */
        blob = z->len;
        z->len += m.n;
        if ((rc = wr(z, blob, m.p, m.n)))
            return z->err = rc;
    }
    struct ent e;
    struct key k = {s, m};
    fill_ent(&e, s, m, blob);
    if (tree_insert(z, 0, &e, &k) || tree_insert(z, 1, &e, &k))
        return z->err;
    z->h.count++;
    return 0;
}

int zb_rescore(zb *z, struct kv_slice m, double old, double s)
{
    struct ent e;
    uint64_t off;
    unsigned at;
    int rc = begin(z);
    if (rc || (rc = member(z, m, &e, &off, &at)) < 0)
        return rc;
    if (!rc || e.s != old)
        return z->err = TXN_E_CORRUPT;
    struct node *x = get(z, off);
    if (!x)
        return z->err;
    put(z, x, offsetof(struct node, e) + at * sizeof *x->e + offsetof(struct ent, s), &s, sizeof s);
    struct key k0 = {old, m}, k1 = {s, m};
    e.s = s;
    if (tree_delete(z, 0, &k0) || tree_insert(z, 0, &e, &k1))
        return z->err;
    return 0;
}

int zb_remove(zb *z, struct kv_slice m, double *old)
{
    struct ent e;
    uint64_t off;
    unsigned at;
    int rc = begin(z);
    if (rc || (rc = member(z, m, &e, &off, &at)) <= 0)
        return rc;
    struct key k = {e.s, m};
    *old = e.s;
    if (tree_delete(z, 0, &k) || tree_delete(z, 1, &k))
        return z->err;
    z->h.count--;
    if (e.len > INL)
        z->h.garbage += e.len;
    return 1;
}

/* e's member into a malloc'd copy */
static int ent_member(zb *z, const struct ent *e, char **m, size_t *mn)
{
    char *p = malloc(e->len ? e->len : 1);
    if (!p)
        return TXN_E_NOMEM;
    int rc = 0;
    if (e->len <= INL)
        memcpy(p, e->d, e->len);
    else
        rc = rd(z, blob_of(e), p, e->len);
    if (rc) {
        free(p);
        return rc;
    }
    *m = p;
    *mn = e->len;
    return 0;
}

int zb_at(zb *z, uint64_t r, double *s, char **m, size_t *mn)
{
    int rc = begin(z);
    if (rc)
        return rc;
    if (r >= z->h.count)
        return TXN_E_CORRUPT;
    uint64_t o = z->h.root[0];
    while (o) {
        struct node *x = get(z, o);
        if (!x)
            return z->err;
        if (x->leaf) {
            if (r >= x->n)
                break;
            *s = x->e[r].s;
            return ent_member(z, &x->e[r], m, mn);
        }
        unsigned i = 0;
        for (; i <= x->n; i++) {
            if (r < x->cnt[i])
                break;
            r -= x->cnt[i];
            if (i < x->n && r == 0) {
                *s = x->e[i].s;
                return ent_member(z, &x->e[i], m, mn);
            }
            if (i < x->n)
                r--;
        }
        if (i > x->n)
            break;
        o = x->child[i];
    }
    return z->err = TXN_E_CORRUPT; /* the counts do not add up */
}

/* ---- ranks of bounds, and walks from a rank: the range commands in
 * O(log n + m) rather than a read of the whole set */

/* An entry is before the bound if its score is below s (at most s, with
 * `after`), or by member (lex) if its member is below m (at most m) */
struct bound {
    int lex, after;
    double s;
    struct kv_slice m;
};

static int before(zb *z, const struct ent *e, const struct bound *b)
{
    if (!b->lex)
        return b->after ? e->s <= b->s : e->s < b->s;
    int c = ent_mcmp(z, e, b->m);
    return b->after ? c <= 0 : c < 0;
}

/* The members before b, counted on the way down tree 0 (the order puts
 * them all first: by score always, by member when the scores allow) */
static int rank_of(zb *z, const struct bound *b, uint64_t *rank)
{
    int rc = begin(z);
    uint64_t o = z->h.root[0], r = 0;
    for (int depth = 0; !rc && o; depth++) {
        struct node *x = depth < MAXDEPTH ? get(z, o) : NULL;
        if (!x)
            return z->err ? z->err : (z->err = TXN_E_CORRUPT);
        unsigned lo = 0, hi = x->n;
        while (lo < hi) {
            unsigned mid = (lo + hi) / 2;
            if (before(z, &x->e[mid], b))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (z->err)
            return z->err;
        if (x->leaf) {
            r += lo;
            break;
        }
        for (unsigned j = 0; j < lo; j++)
            r += (uint64_t)x->cnt[j] + 1;
        o = x->child[lo];
    }
    *rank = r;
    return rc;
}

int zb_rank_of_score(zb *z, double s, int after, uint64_t *rank)
{
    struct bound b = {0, after, s, {NULL, 0}};
    return rank_of(z, &b, rank);
}

int zb_rank_of_member(zb *z, struct kv_slice m, int after, uint64_t *rank)
{
    struct bound b = {1, after, 0, m};
    return rank_of(z, &b, rank);
}

/* A walk holds the path from the root: each level's node (a copy, as a
 * walk may pass more nodes than an operation's cache holds) and where it
 * is; the deepest level is at an entry, every other one in a child. */
struct zb_walk {
    zb *z;
    int d;
    struct {
        struct node x;
        unsigned i;
    } lv[MAXDEPTH];
};

static int walk_push(zb_walk *w, uint64_t o)
{
    zb *z = w->z;
    if (w->d >= MAXDEPTH || o < HDR || o > z->len || z->len - o < NODE)
        return TXN_E_CORRUPT;
    struct node *x = &w->lv[w->d].x;
    int rc = rd(z, o, x, NODE);
    if (!rc && (x->n > MAXK || x->n == 0)) /* no node of a non-empty tree is empty */
        rc = TXN_E_CORRUPT;
    if (!rc)
        w->d++;
    return rc;
}

/* Down from child o to its first entry (dir 1) or its last (-1) */
static int walk_down(zb_walk *w, uint64_t o, int dir)
{
    for (;;) {
        int rc = walk_push(w, o);
        if (rc)
            return rc;
        struct node *x = &w->lv[w->d - 1].x;
        unsigned i = dir > 0 ? 0 : x->n;
        w->lv[w->d - 1].i = x->leaf && dir < 0 ? i - 1 : i;
        if (x->leaf)
            return 0;
        o = x->child[i];
    }
}

int zb_walk_open(zb *z, uint64_t r, zb_walk **out)
{
    int rc = flush(z); /* the walk reads the stored nodes */
    if (rc)
        return rc;
    if (r >= z->h.count)
        return TXN_E_CORRUPT;
    zb_walk *w = malloc(sizeof *w);
    if (!w)
        return TXN_E_NOMEM;
    w->z = z;
    w->d = 0;
    uint64_t o = z->h.root[0];
    while (!(rc = walk_push(w, o))) {
        struct node *x = &w->lv[w->d - 1].x;
        unsigned i = 0;
        if (x->leaf) {
            if (r >= x->n)
                break;
            w->lv[w->d - 1].i = (unsigned)r;
            *out = w;
            return 0;
        }
        for (; i <= x->n; i++) {
            if (r < x->cnt[i])
                break;
            r -= x->cnt[i];
            if (i < x->n && r == 0) {
                w->lv[w->d - 1].i = i;
                *out = w;
                return 0;
            }
            if (i < x->n)
                r--;
        }
        if (i > x->n)
            break;
        w->lv[w->d - 1].i = i;
        o = x->child[i];
    }
    free(w);
    return rc ? rc : TXN_E_CORRUPT; /* the counts do not add up */
}

int zb_walk_get(zb_walk *w, double *s, char **m, size_t *mn)
{
    const struct ent *e = &w->lv[w->d - 1].x.e[w->lv[w->d - 1].i];
    *s = e->s;
    return ent_member(w->z, e, m, mn);
}

int zb_walk_step(zb_walk *w, int dir)
{
    struct node *x = &w->lv[w->d - 1].x;
    unsigned *i = &w->lv[w->d - 1].i;
    if (!x->leaf) { /* to the first entry after it, or the last before */
        if (dir > 0)
            ++*i;
        return walk_down(w, x->child[*i], dir);
    }
    if (dir > 0 ? *i + 1 < x->n : *i > 0) {
        *i += dir > 0 ? 1 : (unsigned)-1;
        return 0;
    }
    while (--w->d > 0) { /* up, to the entry after the child (or before) */
        unsigned *pi = &w->lv[w->d - 1].i;
        if (dir > 0 ? *pi < w->lv[w->d - 1].x.n : *pi > 0) {
            if (dir < 0)
                --*pi;
            return 0;
        }
    }
    return 1;
}

void zb_walk_free(zb_walk *w)
{
    free(w);
}

/* ---- the whole set out, and in */

struct out {
    char *p;
    size_t n, cap;
    uint64_t members;
};

static int out_add(struct out *b, const void *src, size_t n)
{
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap - b->n < n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return TXN_E_NOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

static int walk(zb *z, uint64_t o, struct out *b, int depth)
{
    struct node x;
    int rc = depth > MAXDEPTH || o < HDR || o > z->len || z->len - o < NODE ? TXN_E_CORRUPT
                                                                              : rd(z, o, &x, NODE);
    if (!rc && x.n > MAXK)
        rc = TXN_E_CORRUPT;
    for (unsigned i = 0; !rc && i <= x.n; i++) {
        if (!x.leaf)
            rc = walk(z, x.child[i], b, depth + 1);
        if (rc || i == x.n)
            break;
        char *m = NULL;
        size_t mn = 0;
        uint32_t len = x.e[i].len;
        if (!(rc = ent_member(z, &x.e[i], &m, &mn)) && !(rc = out_add(b, &x.e[i].s, 8)) &&
            !(rc = out_add(b, &len, 4)))
            rc = out_add(b, m, mn);
        free(m);
        b->members++;
    }
    return rc;
}

int zb_export(zb *z, char **p, size_t *n)
{
    struct out b = {0};
    uint32_t count = (uint32_t)z->h.count;
    int rc = flush(z);
    if (!rc)
        rc = out_add(&b, &count, 4);
    if (!rc && z->h.root[0])
        rc = walk(z, z->h.root[0], &b, 0);
    if (!rc && b.members != z->h.count)
        rc = TXN_E_CORRUPT;
    if (rc) {
        free(b.p);
        return rc;
    }
    *p = b.p;
    *n = b.n;
    return 0;
}

/* Bulk load: a tree of the least height that holds them, each node's
 * members spread evenly over its children (each half full at least) */
struct build {
    struct out b;
    const struct zent *base;
    const struct zent **ord;
    const uint64_t *blob; /* by index in base */
};

static uint64_t capacity(unsigned h)
{
    uint64_t c = 1;
    while (h-- && c < UINT32_MAX)
        c *= MAXK + 1;
    return c - 1;
}

static void build_ent(const struct build *bd, size_t i, struct ent *x)
{
    const struct zent *e = bd->ord[i];
    fill_ent(x, e->s, e->m, bd->blob[e - bd->base]);
}

static int build(struct build *bd, size_t lo, uint64_t c, unsigned h, uint64_t *off)
{
    struct node x;
    int rc = 0;
    memset(&x, 0, sizeof x);
    if (h == 1) {
        assert(c <= MAXK); /* 4: a leaf's share fits it */
        x.leaf = 1;
        x.n = (uint16_t)c;
        for (unsigned j = 0; j < c; j++)
            build_ent(bd, lo + j, &x.e[j]);
    } else {
        uint64_t cap = capacity(h - 1), k = (c + cap + 1) / (cap + 1); /* ceil((c + 1) / (cap + 1)) */
        uint64_t each = (c - (k - 1)) / k, rem = (c - (k - 1)) % k;
        size_t pos = lo;
        for (uint64_t j = 0; j < k && !rc; j++) {
            uint64_t cj = each + (j < rem);
            rc = build(bd, pos, cj, h - 1, &x.child[j]);
            x.cnt[j] = (uint32_t)cj;
            pos += cj;
            if (j + 1 < k)
                build_ent(bd, pos++, &x.e[j]);
        }
        x.n = (uint16_t)(k - 1);
    }
    *off = bd->b.n;
    return rc ? rc : out_add(&bd->b, &x, NODE);
}

static int by_member(const void *a, const void *b)
{
    return mcmp((*(const struct zent *const *)a)->m, (*(const struct zent *const *)b)->m);
}

int zb_write(kv_txn *t, struct kv_slice key, const struct zent *e, size_t n, uint64_t at)
{
    if (n > UINT32_MAX)
        return TXN_E_NOSPACE;
    struct build bd = {{0}, e, malloc((n ? n : 1) * sizeof *bd.ord),
                       malloc((n ? n : 1) * sizeof *bd.blob)};
    struct hdr h = {MARK, 1, n, {0, 0}, 0, 0, {0, 0}};
    int rc = bd.ord && bd.blob ? out_add(&bd.b, &h, HDR) : TXN_E_NOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        bd.ord[i] = &e[i];
        ((uint64_t *)bd.blob)[i] = e[i].m.n > INL ? bd.b.n : 0;
        if (e[i].m.n > UINT32_MAX)
            rc = TXN_E_NOSPACE;
        else if (e[i].m.n > INL)
            rc = out_add(&bd.b, e[i].m.p, e[i].m.n);
    }
    unsigned height = 1;
    while (capacity(height) < n)
        height++;
    for (int tr = 0; tr < 2 && !rc && n; tr++) {
        if (tr)
            qsort(bd.ord, n, sizeof *bd.ord, by_member);
        rc = build(&bd, 0, n, height, &h.root[tr]);
    }
    if (!rc) {
        memcpy(bd.b.p, &h, HDR);
        rc = kv_txn_write(t, key, (struct kv_slice){bd.b.p, bd.b.n}, at, KV_ZSET);
    }
    free(bd.b.p);
    free(bd.ord);
    free((void *)bd.blob);
    return rc;
}

/* The packed record p (n bytes, as zb_export writes it) as entries */
static int unpack(const char *p, size_t n, struct zent **out, size_t *count)
{
    uint32_t c, len;
    memcpy(&c, p, 4);
    struct zent *e = malloc((c ? c : 1) * sizeof *e);
    if (!e)
        return TXN_E_NOMEM;
    size_t at = 4;
    for (uint32_t i = 0; i < c; i++) {
        memcpy(&e[i].s, p + at, 8);
        memcpy(&len, p + at + 8, 4);
        e[i].m = (struct kv_slice){p + at + 12, len};
        at += 12 + (size_t)len;
    }
    assert(at == n); /* 5: zb_export wrote it so */
    (void)n;
    *out = e;
    *count = c;
    return 0;
}

int zb_close(zb *z, int rc)
{
    if (rc >= 0 && z->err)
        rc = z->err;
    if (rc >= 0) {
        int w = flush(z);
        /* the trees as zbtree.c's header says: in order, balanced, counted */
        assert(w || !z->h.count || !zb_check(z));
        if (!w && !z->h.count) {
            w = kv_txn_del(z->t, z->key);
            w = w < 0 ? w : 0;
        } else if (!w && z->h.garbage > 65536 && z->h.garbage > z->len / 2) {
            /* long members deleted fill half the value: write it again */
            char *p = NULL;
            size_t n = 0, c = 0;
            struct zent *e = NULL;
            if (!(w = zb_export(z, &p, &n)) && !(w = unpack(p, n, &e, &c)))
                w = zb_write(z->t, z->key, e, c, KV_KEEPTTL);
            free(e);
            free(p);
        }
        if (w)
            rc = w;
    }
    kv_val_close(z->v);
    for (size_t i = 0; i < MAXCACHE / CHUNK; i++)
        free(z->c[i]);
    free(z);
    return rc;
}

/* ---- checking (tests): every node within the value, each tree in
 * order, every non-root node at least MINK keys, counts that add up */

static int check_node(zb *z, int tr, uint64_t o, int depth, int *leafdepth, struct ent *prev,
                      struct node *store, uint64_t *count)
{
    struct node *x = &store[depth];
    int rc = depth >= MAXDEPTH / 2 || o < HDR || o > z->len || z->len - o < NODE
                 ? TXN_E_CORRUPT
                 : rd(z, o, x, NODE);
    if (rc || x->n > MAXK || (depth && x->n < MINK) || (!depth && !x->n))
        return rc ? rc : TXN_E_CORRUPT;
    uint64_t mine = 0;
    for (unsigned i = 0; i <= x->n; i++) {
        if (!x->leaf) {
            uint64_t c = 0;
            if ((rc = check_node(z, tr, x->child[i], depth + 1, leafdepth, prev, store, &c)))
                return rc;
            if (!tr && c != x->cnt[i])
                return TXN_E_CORRUPT;
            mine += c;
        } else if (*leafdepth < 0) {
            *leafdepth = depth;
        } else if (i == 0 && *leafdepth != depth) {
            return TXN_E_CORRUPT;
        }
        if (i == x->n)
            break;
        const struct ent *e = &x->e[i];
        if (prev->len != UINT32_MAX) {
            char *m;
            size_t mn;
            if ((rc = ent_member(z, e, &m, &mn)))
                return rc;
            struct key k = {e->s, {m, mn}};
            int c = ent_cmp(z, tr, prev, &k);
            free(m);
            if (z->err || c >= 0)
                return z->err ? z->err : TXN_E_CORRUPT;
        }
        *prev = *e;
        mine++;
    }
    *count = mine;
    return 0;
}

int zb_check(zb *z)
{
    int rc = flush(z);
    struct node *store = malloc(MAXDEPTH / 2 * sizeof *store);
    for (int tr = 0; tr < 2 && !rc; tr++) {
        int leafdepth = -1;
        struct ent prev = {0, UINT32_MAX, {0}}; /* none yet */
        uint64_t c = 0;
        if (!store)
            rc = TXN_E_NOMEM;
        else if (z->h.root[tr])
            rc = check_node(z, tr, z->h.root[tr], 0, &leafdepth, &prev, store, &c);
        if (!rc && c != z->h.count)
            rc = TXN_E_CORRUPT;
    }
    free(store);
    return rc;
}
