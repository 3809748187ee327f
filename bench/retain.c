/* retain.c - the persistent data retention evaluation (txn_layout.h): the
 * cost of keeping a pool's data when its node struct changes, manual
 * migration against lazily extendible structs, on three kernels.
 *
 * Kernels, each with a 32-bit key in the original program: a chained hash
 * table (fixed bucket array), a B-tree of order 8 (CLRS, up to 7 keys a
 * node) and a skip list of 4 levels. Layout changes: "change" (the key
 * becomes 64-bit) and "add" (a 16-byte name field that the update programs
 * declare but do not use yet, as in the paper).
 * Programs:
 *   P-Original  builds the pool (version 1) from the input;
 *   P-Retain    txn_layout_open of version 2 with the manual migration:
 *               copies every node into the new layout (same shape), in
 *               heap order, in transactions of 64 nodes, then frees the
 *               old ones;
 *   P-Manual    runs the update input on the migrated pool (version 2);
 *   P-Auto      runs the update input on an unconverted copy of the
 *               original pool, the new field in an extension level made at
 *               first access (txn_ext_*);
 *   P-Original' (Layout-Add rows) the original program running the update
 *               input on another copy of the original pool: P-Auto against
 *               it is what the extendible structs cost on the same heap.
 * Inputs (every operation: look the key up, delete it if found, insert
 * it otherwise; one transaction each): INS (the original inserts N keys,
 * the update N others), DEL (the update deletes the same N), RAND (N
 * random keys that repeat, the same sequence in both).
 * Overheads: Manual = T(P-Retain) / T(P-Manual), Auto = (T(P-Auto) -
 * T(P-Manual)) / T(P-Manual), the latter as the median of each run's
 * paired ratio, with its quartiles, in thread CPU time and wall time.
 * Bytes: what the programs store to the pool
 * (txn_stats.bytes_stored: data, logs, allocator metadata); the retention
 * bytes are P-Retain's for the manual model and what P-Auto stores beyond
 * P-Manual for the automatic one ("none" when it stores less).
 *
 *   retain-<engine> [--n N] [--reps R] [--reps-add R] [--kernel hash|btree|skip]
 *                   [--block OPS] (the update programs run in processes of
 *                               their own, taking turns block by block)
 *                   [--sweep]   (DEL of 0.1%, 1%, 10%, 100% of the keys)
 *                   [--interrupt K] (every K-th migration step fails and is
 *                               rolled back; P-Retain opens again and resumes)
 *                   [--lazy-new] (P-Auto's new nodes are not born extended:
 *                               their extension made at first access, as
 *                               the paper's; by default they are on
 *                               Layout-Change, whose keys are in the level)
 *                   [--born-new] (born extended on Layout-Add too)
 *                   [--plain-ext] (P-Auto without section 4.4: txn_ext_peek,
 *                               txn_ext_write and txn_ext_free read the link
 *                               at each access)
 * P-Manual and P-Auto check their result (how many of their keys they find,
 * known from the input), so a wrong migration, extension or kernel fails
 * the run (exit 1).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "txn.h"
#include "txn_layout.h"

#define KMAX 7 /* keys per node (B-tree) */
#define CMAX 8 /* children per node */
#define NAME_LEN 16
#define SKIP_LEVELS 4
#define BT_T 4 /* B-tree minimum degree: order 8 */
#define BATCH 64 /* nodes per migration transaction */

enum kind { HASH, BTREE, SKIP };
enum ext { EXT_NONE, EXT_KEY, EXT_NAME };
static const char *const kind_name[] = {"hash", "btree", "skip"};

/* A node layout: header {u32 n, u32 leaf/level}, extension link, keys (kw
 * bytes each, padded to 8), values, children, name. The link (the hidden
 * pointer of an extendible struct, present in every version) sits right
 * after the header, in the node's first line: a load of the node brings
 * it with the fields, as a compiler placing the hidden pointer first
 * would (a vtable pointer's place). */
struct lay {
    enum kind kind;
    unsigned kw, name;
    enum ext ext;
    unsigned K, C;
    size_t off_keys, off_vals, off_child, off_name, off_link, size;
    txn_ext_type xt;
    txn_ext_level xl;
};

/* the kernel in use for init functions (no argument reaches them) */
static const struct lay *g_init_lay;

static int ext_key_init(txn *tx, txn_obj *o, void *ext)
{
    const struct lay *L = g_init_lay;
    uint32_t k[KMAX];
    int rc = txn_read(tx, o, L->off_keys, k, 4 * L->K);
    for (unsigned i = 0; i < L->K; i++)
        ((uint64_t *)ext)[i] = k[i];
    return rc;
}

static void lay_init(struct lay *L, enum kind kind, unsigned kw, unsigned name, enum ext ext)
{
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->kw = kw;
    L->name = name;
    L->ext = ext;
    L->K = kind == BTREE ? KMAX : 1;
    L->C = kind == BTREE ? CMAX : kind == SKIP ? SKIP_LEVELS : 1;
    L->off_link = 8;
    L->off_keys = 16;
    L->off_vals = L->off_keys + (kw * L->K + 7) / 8 * 8;
    L->off_child = L->off_vals + 8 * L->K;
    L->off_name = L->off_child + 8 * L->C;
    L->size = L->off_name + name;
    if (ext != EXT_NONE) {
        size_t payload = ext == EXT_KEY ? 8 * L->K : NAME_LEN;
        L->xl = (txn_ext_level){payload + 8, payload, ext == EXT_KEY ? ext_key_init : NULL};
        L->xt = (txn_ext_type){L->off_link, &L->xl, 1, L->size};
    }
}

/* A decoded node. */
struct dnode {
    uint32_t n, leaf; /* keys in use; B-tree leaf flag or skip list level */
    uint64_t key[KMAX], val[KMAX];
    txn_obj *child[CMAX];
    txn_obj *link; /* P-Auto: the extension link as loaded (NULL: none) */
};

/* What a kernel works on: its layout, where its entry handle lives, and
 * the migration whose objects it allocates (NULL outside one). */
struct kc {
    const struct lay *L;
    txn_obj *holder;
    size_t off;
    txn_migrate *m;
    unsigned nb; /* hash buckets */
};

#define TRY(x)                                                                 \
    do {                                                                       \
        int rc_ = (x);                                                         \
        if (rc_)                                                               \
            return rc_;                                                        \
    } while (0)

static void nload_rest(const struct lay *L, const unsigned char *b, struct dnode *d)
{
    memcpy(&d->n, b, 4);
    memcpy(&d->leaf, b + 4, 4);
    memcpy(d->val, b + L->off_vals, 8 * L->K);
    memcpy(d->child, b + L->off_child, 8 * L->C);
}

/* Section 4.4 (what a compiler would emit): the bytes a load of a node
 * reads hold its extension link (after the header), so the load takes it
 * there and no later access reads it again (the key read below,
 * txn_ext_write_known, txn_ext_free_known); a missing extension's keys
 * (Layout-Change) come from the bytes already loaded (the init's
 * conversion) instead of a peek. --plain-ext: txn_ext_peek, txn_ext_write
 * and txn_ext_free, each reading the link itself (on Layout-Add DEL, the
 * free's read of the link cost P-Auto about 1% of its time). */
static int g_inline_check = 1;
/* P-Auto's new nodes: born extended when the update program sets the new
 * level's fields at creation (Layout-Change: the keys live there), lazily
 * extended when it does not use them yet (Layout-Add's name: a born node
 * would take a larger size class for bytes nobody reads, and a freed old
 * node's block, still in the caches, would not fit the next new node:
 * on the hash table's RAND, P-Auto against P-Original' went from 1.2-2.7%
 * to 0.3-0.4%). --lazy-new: lazily always (the paper's); --born-new: born
 * always. */
enum { BORN_USED, BORN_NEVER, BORN_ALWAYS };
static int g_born = BORN_USED;

static int born(const struct lay *L)
{
    return L->ext != EXT_NONE &&
           (g_born == BORN_ALWAYS || (g_born == BORN_USED && L->ext == EXT_KEY));
}

static int nload(txn *tx, const struct kc *k, txn_obj *o, struct dnode *d)
{
    const struct lay *L = k->L;
    unsigned char b[256];
    int inline_key = L->ext == EXT_KEY && g_inline_check;
    TRY(txn_read(tx, o, 0, b, L->off_name)); /* all but the name */
    d->link = NULL;
    if (L->ext != EXT_NONE && g_inline_check)
        memcpy(&d->link, b + L->off_link, sizeof d->link);
    nload_rest(L, b, d);
    if (inline_key && d->link == TXN_EXT_INLINE) /* born extended (nalloc) */
        return txn_read(tx, o, txn_ext_inline_off(&L->xt, 1), d->key, 8 * L->K);
    if (inline_key && d->link)
        return txn_read(tx, d->link, 0, d->key, 8 * L->K);
    if (L->ext == EXT_KEY && !inline_key) { /* a look only: the first write makes it */
        g_init_lay = L;
        return txn_ext_peek(tx, &L->xt, o, 1, 0, d->key, 8 * L->K);
    }
    for (unsigned i = 0; i < L->K; i++) { /* in the node, or its init's conversion */
        uint32_t k32;
        if (L->kw == 8) {
            memcpy(&d->key[i], b + L->off_keys + 8 * i, 8);
        } else {
            memcpy(&k32, b + L->off_keys + 4 * i, 4);
            d->key[i] = k32;
        }
    }
    return 0;
}

#define W_HDR 1u
#define W_KEYS 2u
#define W_VALS 4u
#define W_CHILD 8u
#define W_NEW 16u /* a new node: everything, and its name */
#define W_ALL (W_HDR | W_KEYS | W_VALS | W_CHILD)

static int nstore(txn *tx, const struct kc *k, txn_obj *o, const struct dnode *d, unsigned w)
{
    const struct lay *L = k->L;
    unsigned char b[256] = {0};
    if (w & W_NEW)
        w |= W_ALL;
    memcpy(b, &d->n, 4);
    memcpy(b + 4, &d->leaf, 4);
    for (unsigned i = 0; i < L->K; i++) {
        if (L->kw == 8) {
            memcpy(b + L->off_keys + 8 * i, &d->key[i], 8);
        } else {
            uint32_t k32 = (uint32_t)d->key[i];
            memcpy(b + L->off_keys + 4 * i, &k32, 4);
        }
    }
    memcpy(b + L->off_vals, d->val, 8 * L->K);
    memcpy(b + L->off_child, d->child, 8 * L->C);
    int keys_in_base = L->ext != EXT_KEY;
    if (w & W_NEW) { /* all but the link (NULL: txn_alloc zero-fills) */
        TRY(txn_write(tx, o, 0, b, 8));
        /* Layout-Change's P-Auto: the old key field is dead, keys go to
         * the extension */
        size_t from = keys_in_base ? L->off_keys : L->off_vals;
        TRY(txn_write(tx, o, from, b + from, L->size - from));
    } else {
        if (w & W_HDR)
            TRY(txn_write(tx, o, 0, b, 8));
        if (w & W_KEYS && keys_in_base)
            TRY(txn_write(tx, o, L->off_keys, b + L->off_keys, L->off_vals - L->off_keys));
        if (w & W_VALS)
            TRY(txn_write(tx, o, L->off_vals, b + L->off_vals, 8 * L->K));
        if (w & W_CHILD)
            TRY(txn_write(tx, o, L->off_child, b + L->off_child, 8 * L->C));
    }
    g_init_lay = L;
    if (w & W_KEYS && !keys_in_base)
        TRY(g_inline_check ? txn_ext_write_known(tx, &L->xt, o, d->link, 1, 0, d->key, 8 * L->K)
                           : txn_ext_write(tx, &L->xt, o, 1, 0, d->key, 8 * L->K));
    return 0;
}

/* Bytes of a new node: P-Auto's hold their extension level. */
static size_t node_bytes(const struct lay *L)
{
    return born(L) ? txn_ext_inline_off(&L->xt, L->xt.nlevels + 1) : L->size;
}

/* A new node. P-Auto's, when born(), are born extended (txn_ext_alloc: the
 * level in the node's block, one allocation), as a program that knows and
 * sets the new fields makes its objects; the old nodes' extensions stay
 * lazy. */
static int nalloc(txn *tx, const struct kc *k, txn_obj **o)
{
    if (k->m)
        return txn_migrate_alloc(k->m, tx, k->L->size, o);
    if (born(k->L))
        return txn_ext_alloc(tx, &k->L->xt, o);
    return txn_alloc(tx, k->L->size, o);
}

/* Free node o, loaded as d (with its link) in this transaction since it
 * last changed. */
static int nfree(txn *tx, const struct kc *k, txn_obj *o, const struct dnode *d)
{
    if (k->L->ext == EXT_NONE)
        return txn_free(tx, o);
    return g_inline_check ? txn_ext_free_known(tx, &k->L->xt, o, d->link)
                          : txn_ext_free(tx, &k->L->xt, o);
}

static int entry_get(txn *tx, const struct kc *k, txn_obj **e)
{
    return txn_read(tx, k->holder, k->off, e, sizeof *e);
}

static int entry_set(txn *tx, const struct kc *k, txn_obj *e)
{
    return txn_write(tx, k->holder, k->off, &e, sizeof e);
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t val_of(uint64_t key)
{
    return key * 2 + 1;
}

/* ---- hash table: bucket array of nb handles, chains of one-key nodes */

static int h_find(txn *tx, const struct kc *k, uint64_t key, txn_obj **bucket_arr, txn_obj **prev,
                  txn_obj **cur, struct dnode *d)
{
    TRY(entry_get(tx, k, bucket_arr));
    size_t b = mix64(key) & (k->nb - 1);
    *prev = NULL;
    TRY(txn_read(tx, *bucket_arr, 8 * b, cur, sizeof *cur));
    while (*cur) {
        TRY(nload(tx, k, *cur, d));
        if (d->key[0] == key)
            return 0;
        *prev = *cur;
        *cur = d->child[0];
    }
    return 0;
}

static int h_lookup(txn *tx, const struct kc *k, uint64_t key, int *found)
{
    txn_obj *arr, *prev, *cur;
    struct dnode d;
    TRY(h_find(tx, k, key, &arr, &prev, &cur, &d));
    *found = cur != NULL;
    return 0;
}

static int h_insert(txn *tx, const struct kc *k, uint64_t key, uint64_t val)
{
    txn_obj *arr, *o;
    size_t b = mix64(key) & (k->nb - 1);
    struct dnode d = {.n = 1, .key = {key}, .val = {val}};
    TRY(entry_get(tx, k, &arr));
    TRY(txn_read(tx, arr, 8 * b, &d.child[0], 8));
    TRY(nalloc(tx, k, &o));
    TRY(nstore(tx, k, o, &d, W_NEW));
    return txn_write(tx, arr, 8 * b, &o, sizeof o);
}

static int h_delete(txn *tx, const struct kc *k, uint64_t key)
{
    txn_obj *arr, *prev, *cur;
    struct dnode d, pd;
    TRY(h_find(tx, k, key, &arr, &prev, &cur, &d));
    if (!cur)
        return 0;
    if (prev) {
        TRY(nload(tx, k, prev, &pd));
        pd.child[0] = d.child[0];
        TRY(nstore(tx, k, prev, &pd, W_CHILD));
    } else {
        size_t b = mix64(key) & (k->nb - 1);
        TRY(txn_write(tx, arr, 8 * b, &d.child[0], 8));
    }
    return nfree(tx, k, cur, &d);
}

static int h_create(txn *tx, const struct kc *k)
{
    txn_obj *arr;
    TRY(k->m ? txn_migrate_alloc(k->m, tx, 8 * (size_t)k->nb, &arr)
             : txn_alloc(tx, 8 * (size_t)k->nb, &arr));
    return entry_set(tx, k, arr);
}

/* ---- skip list: a head node of level 4, nodes of level 1..4 */

static unsigned level_of(uint64_t key)
{
    uint64_t h = mix64(key ^ 0x5eed);
    unsigned l = 1;
    while (l < SKIP_LEVELS && (h & 1)) {
        l++;
        h >>= 1;
    }
    return l;
}

/* The search drops a level at a node it often loaded already (the one
 * it stopped before): that node is loaded once, for every program alike. */
static int s_find(txn *tx, const struct kc *k, uint64_t key, txn_obj *upd[SKIP_LEVELS],
                  txn_obj **cand, struct dnode *cd)
{
    txn_obj *x, *stop = NULL;
    struct dnode d, sd;
    TRY(entry_get(tx, k, &x));
    TRY(nload(tx, k, x, &d));
    for (int l = SKIP_LEVELS - 1; l >= 0; l--) {
        while (d.child[l]) {
            txn_obj *nx = d.child[l];
            struct dnode nd;
            if (nx == stop)
                nd = sd;
            else
                TRY(nload(tx, k, nx, &nd));
            if (nd.key[0] >= key) {
                stop = nx;
                sd = nd;
                if (l == 0) {
                    *cd = nd;
                    *cand = nx;
                }
                break;
            }
            x = nx;
            d = nd;
        }
        upd[l] = x;
    }
    if (*cand && cd->key[0] != key)
        *cand = NULL;
    return 0;
}

static int s_lookup(txn *tx, const struct kc *k, uint64_t key, int *found)
{
    txn_obj *upd[SKIP_LEVELS], *cand = NULL;
    struct dnode cd;
    TRY(s_find(tx, k, key, upd, &cand, &cd));
    *found = cand != NULL;
    return 0;
}

static int s_link(txn *tx, const struct kc *k, txn_obj *pred, unsigned l, txn_obj *to)
{
    return txn_write(tx, pred, k->L->off_child + 8 * l, &to, sizeof to);
}

static int s_insert(txn *tx, const struct kc *k, uint64_t key, uint64_t val)
{
    txn_obj *upd[SKIP_LEVELS], *cand = NULL, *o;
    struct dnode cd, d = {.n = 1, .leaf = level_of(key), .key = {key}, .val = {val}};
    TRY(s_find(tx, k, key, upd, &cand, &cd));
    for (unsigned l = 0; l < d.leaf; l++)
        TRY(txn_read(tx, upd[l], k->L->off_child + 8 * l, &d.child[l], 8));
    TRY(nalloc(tx, k, &o));
    TRY(nstore(tx, k, o, &d, W_NEW));
    for (unsigned l = 0; l < d.leaf; l++)
        TRY(s_link(tx, k, upd[l], l, o));
    return 0;
}

static int s_delete(txn *tx, const struct kc *k, uint64_t key)
{
    txn_obj *upd[SKIP_LEVELS], *cand = NULL;
    struct dnode cd;
    TRY(s_find(tx, k, key, upd, &cand, &cd));
    if (!cand)
        return 0;
    for (unsigned l = 0; l < cd.leaf; l++)
        TRY(s_link(tx, k, upd[l], l, cd.child[l]));
    return nfree(tx, k, cand, &cd);
}

static int s_create(txn *tx, const struct kc *k)
{
    txn_obj *h;
    struct dnode d = {.n = 0, .leaf = SKIP_LEVELS};
    TRY(nalloc(tx, k, &h));
    TRY(nstore(tx, k, h, &d, W_NEW));
    return entry_set(tx, k, h);
}

/* ---- B-tree of order 8 (CLRS, minimum degree 4) */

static int b_lookup(txn *tx, const struct kc *k, uint64_t key, int *found)
{
    txn_obj *x;
    struct dnode d;
    TRY(entry_get(tx, k, &x));
    *found = 0;
    while (x) {
        TRY(nload(tx, k, x, &d));
        unsigned i = 0;
        while (i < d.n && d.key[i] < key)
            i++;
        if (i < d.n && d.key[i] == key) {
            *found = 1;
            return 0;
        }
        x = d.leaf ? NULL : d.child[i];
    }
    return 0;
}

/* Split full child y (child i of x). */
static int b_split(txn *tx, const struct kc *k, txn_obj *xo, struct dnode *x, unsigned i,
                   txn_obj *yo, struct dnode *y)
{
    struct dnode z = {.n = BT_T - 1, .leaf = y->leaf};
    txn_obj *zo;
    for (unsigned j = 0; j < BT_T - 1; j++) {
        z.key[j] = y->key[j + BT_T];
        z.val[j] = y->val[j + BT_T];
    }
    if (!y->leaf)
        for (unsigned j = 0; j < BT_T; j++)
            z.child[j] = y->child[j + BT_T];
    y->n = BT_T - 1;
    for (unsigned j = x->n + 1; j > i + 1; j--)
        x->child[j] = x->child[j - 1];
    for (unsigned j = x->n; j > i; j--) {
        x->key[j] = x->key[j - 1];
        x->val[j] = x->val[j - 1];
    }
    TRY(nalloc(tx, k, &zo));
    x->child[i + 1] = zo;
    x->key[i] = y->key[BT_T - 1];
    x->val[i] = y->val[BT_T - 1];
    x->n++;
    TRY(nstore(tx, k, zo, &z, W_NEW));
    TRY(nstore(tx, k, yo, y, W_HDR));
    return nstore(tx, k, xo, x, W_ALL);
}

static int b_insert(txn *tx, const struct kc *k, uint64_t key, uint64_t val)
{
    txn_obj *ro;
    struct dnode r;
    TRY(entry_get(tx, k, &ro));
    if (!ro) {
        struct dnode d = {.n = 1, .leaf = 1, .key = {key}, .val = {val}};
        TRY(nalloc(tx, k, &ro));
        TRY(nstore(tx, k, ro, &d, W_NEW));
        return entry_set(tx, k, ro);
    }
    TRY(nload(tx, k, ro, &r));
    txn_obj *xo = ro;
    struct dnode x = r;
    if (r.n == 2 * BT_T - 1) {
        struct dnode s = {.n = 0, .leaf = 0, .child = {ro}};
        txn_obj *so;
        TRY(nalloc(tx, k, &so));
        TRY(nstore(tx, k, so, &s, W_NEW));
        TRY(entry_set(tx, k, so));
        TRY(b_split(tx, k, so, &s, 0, ro, &r));
        xo = so;
        x = s;
    }
    for (;;) {
        unsigned i = x.n;
        if (x.leaf) {
            while (i > 0 && x.key[i - 1] > key) {
                x.key[i] = x.key[i - 1];
                x.val[i] = x.val[i - 1];
                i--;
            }
            x.key[i] = key;
            x.val[i] = val;
            x.n++;
            return nstore(tx, k, xo, &x, W_HDR | W_KEYS | W_VALS);
        }
        while (i > 0 && x.key[i - 1] > key)
            i--;
        txn_obj *co = x.child[i];
        struct dnode c;
        TRY(nload(tx, k, co, &c));
        if (c.n == 2 * BT_T - 1) {
            TRY(b_split(tx, k, xo, &x, i, co, &c));
            if (key > x.key[i]) {
                co = x.child[i + 1];
                TRY(nload(tx, k, co, &c));
            }
        }
        xo = co;
        x = c;
    }
}

/* Merge child i+1 of x into child i, with key i of x between them. */
static int b_merge(txn *tx, const struct kc *k, txn_obj *xo, struct dnode *x, unsigned i,
                   txn_obj **yo_out, struct dnode *y)
{
    txn_obj *yo = x->child[i], *zo = x->child[i + 1];
    struct dnode z;
    TRY(nload(tx, k, yo, y));
    TRY(nload(tx, k, zo, &z));
    y->key[y->n] = x->key[i];
    y->val[y->n] = x->val[i];
    for (unsigned j = 0; j < z.n; j++) {
        y->key[y->n + 1 + j] = z.key[j];
        y->val[y->n + 1 + j] = z.val[j];
    }
    if (!y->leaf)
        for (unsigned j = 0; j <= z.n; j++)
            y->child[y->n + 1 + j] = z.child[j];
    y->n += z.n + 1;
    for (unsigned j = i; j + 1 < x->n; j++) {
        x->key[j] = x->key[j + 1];
        x->val[j] = x->val[j + 1];
    }
    for (unsigned j = i + 1; j < x->n; j++)
        x->child[j] = x->child[j + 1];
    x->n--;
    TRY(nstore(tx, k, yo, y, W_ALL));
    TRY(nstore(tx, k, xo, x, W_ALL));
    TRY(nfree(tx, k, zo, &z));
    *yo_out = yo;
    return 0;
}

/* Make child i of x hold at least BT_T keys; *ci = the child to go to. */
static int b_fill(txn *tx, const struct kc *k, txn_obj *xo, struct dnode *x, unsigned *ci,
                  txn_obj **co, struct dnode *c)
{
    unsigned i = *ci;
    if (c->n >= BT_T)
        return 0;
    struct dnode s;
    if (i > 0) { /* borrow from the left sibling */
        TRY(nload(tx, k, x->child[i - 1], &s));
        if (s.n >= BT_T) {
            for (unsigned j = c->n; j > 0; j--) {
                c->key[j] = c->key[j - 1];
                c->val[j] = c->val[j - 1];
            }
            if (!c->leaf)
                for (unsigned j = c->n + 1; j > 0; j--)
                    c->child[j] = c->child[j - 1];
            c->key[0] = x->key[i - 1];
            c->val[0] = x->val[i - 1];
            c->child[0] = s.child[s.n];
            c->n++;
            x->key[i - 1] = s.key[s.n - 1];
            x->val[i - 1] = s.val[s.n - 1];
            s.n--;
            TRY(nstore(tx, k, x->child[i - 1], &s, W_HDR));
            TRY(nstore(tx, k, *co, c, W_ALL));
            return nstore(tx, k, xo, x, W_KEYS | W_VALS);
        }
    }
    if (i < x->n) { /* borrow from the right sibling */
        TRY(nload(tx, k, x->child[i + 1], &s));
        if (s.n >= BT_T) {
            c->key[c->n] = x->key[i];
            c->val[c->n] = x->val[i];
            c->child[c->n + 1] = s.child[0];
            c->n++;
            x->key[i] = s.key[0];
            x->val[i] = s.val[0];
            for (unsigned j = 0; j + 1 < s.n; j++) {
                s.key[j] = s.key[j + 1];
                s.val[j] = s.val[j + 1];
            }
            for (unsigned j = 0; j < s.n; j++)
                s.child[j] = s.child[j + 1];
            s.n--;
            TRY(nstore(tx, k, x->child[i + 1], &s, W_ALL));
            TRY(nstore(tx, k, *co, c, W_ALL));
            return nstore(tx, k, xo, x, W_KEYS | W_VALS);
        }
        return b_merge(tx, k, xo, x, i, co, c);
    }
    *ci = i - 1;
    return b_merge(tx, k, xo, x, i - 1, co, c);
}

static int b_delete(txn *tx, const struct kc *k, uint64_t key)
{
    txn_obj *xo, *ro;
    struct dnode x;
    TRY(entry_get(tx, k, &ro));
    if (!ro)
        return 0;
    xo = ro;
    TRY(nload(tx, k, xo, &x));
    for (;;) {
        unsigned i = 0;
        while (i < x.n && x.key[i] < key)
            i++;
        if (i < x.n && x.key[i] == key) {
            if (x.leaf) {
                for (unsigned j = i; j + 1 < x.n; j++) {
                    x.key[j] = x.key[j + 1];
                    x.val[j] = x.val[j + 1];
                }
                x.n--;
                TRY(nstore(tx, k, xo, &x, W_HDR | W_KEYS | W_VALS));
                break;
            }
            txn_obj *yo = x.child[i], *zo = x.child[i + 1];
            struct dnode y, z;
            TRY(nload(tx, k, yo, &y));
            if (y.n >= BT_T) { /* replace by the predecessor, delete it below */
                txn_obj *po = yo;
                struct dnode pd = y;
                while (!pd.leaf) {
                    po = pd.child[pd.n];
                    TRY(nload(tx, k, po, &pd));
                }
                x.key[i] = key = pd.key[pd.n - 1];
                x.val[i] = pd.val[pd.n - 1];
                TRY(nstore(tx, k, xo, &x, W_KEYS | W_VALS));
                xo = yo;
                x = y;
                continue;
            }
            TRY(nload(tx, k, zo, &z));
            if (z.n >= BT_T) { /* the successor */
                txn_obj *so = zo;
                struct dnode sd = z;
                while (!sd.leaf) {
                    so = sd.child[0];
                    TRY(nload(tx, k, so, &sd));
                }
                x.key[i] = key = sd.key[0];
                x.val[i] = sd.val[0];
                TRY(nstore(tx, k, xo, &x, W_KEYS | W_VALS));
                xo = zo;
                x = z;
                continue;
            }
            TRY(b_merge(tx, k, xo, &x, i, &yo, &y));
            xo = yo;
            x = y;
            continue;
        }
        if (x.leaf)
            break; /* not there */
        txn_obj *co = x.child[i];
        struct dnode c;
        TRY(nload(tx, k, co, &c));
        TRY(b_fill(tx, k, xo, &x, &i, &co, &c));
        xo = co;
        x = c;
    }
    /* the root may have emptied */
    struct dnode r;
    TRY(entry_get(tx, k, &ro));
    TRY(nload(tx, k, ro, &r));
    if (r.n == 0) {
        TRY(entry_set(tx, k, r.leaf ? NULL : r.child[0]));
        TRY(nfree(tx, k, ro, &r));
    }
    return 0;
}

/* ---- kernel dispatch */

static int k_lookup(txn *tx, const struct kc *k, uint64_t key, int *found)
{
    switch (k->L->kind) {
    case HASH:
        return h_lookup(tx, k, key, found);
    case SKIP:
        return s_lookup(tx, k, key, found);
    default:
        return b_lookup(tx, k, key, found);
    }
}

static int k_insert(txn *tx, const struct kc *k, uint64_t key, uint64_t val)
{
    switch (k->L->kind) {
    case HASH:
        return h_insert(tx, k, key, val);
    case SKIP:
        return s_insert(tx, k, key, val);
    default:
        return b_insert(tx, k, key, val);
    }
}

static int k_delete(txn *tx, const struct kc *k, uint64_t key)
{
    switch (k->L->kind) {
    case HASH:
        return h_delete(tx, k, key);
    case SKIP:
        return s_delete(tx, k, key);
    default:
        return b_delete(tx, k, key);
    }
}

static int k_create(txn *tx, const struct kc *k)
{
    return k->L->kind == HASH ? h_create(tx, k) : k->L->kind == SKIP ? s_create(tx, k) : 0;
}

/* ---- the manual model's migration: copy every node into the new layout,
 * in heap order. The old nodes, found by walking the structure, are
 * copied in the order of their addresses, so the new nodes lie in the heap
 * as the old ones did (a PMDK program would walk POBJ_FOREACH, which goes
 * in heap order too): P-Manual then runs on the original's layout, and the
 * paper's overhead compares the structs, not a defragmented heap (copied
 * in traversal order, a hash chain's nodes came out side by side, and
 * P-Manual ran INS up to 6% faster than the original program on the
 * original heap). Three phases, BATCH nodes a transaction: copy each node
 * (its children still the old nodes; the copies' handles in a forwarding
 * array, a migration object), then point the copies' children at the
 * children's copies, then the new entry (bucket array, root, head). A copy
 * is written whole in the transaction that allocates it, which logs
 * nothing for it; the second pass logs and writes only child words. The old
 * structure is read-only throughout, so a resumed migration walks it
 * again and finds the same order. */
struct conv {               /* the scratch object */
    txn_obj *entry;         /* the new structure (at the end: the root's word) */
    txn_obj *fwd;           /* forwarding array: the copy of old node i */
    uint64_t started, done; /* done: the last phase ended */
    uint64_t phase, next;   /* phase 0 copies, 1 child words, 2 entry; next index */
    uint64_t count;         /* old nodes */
    uint64_t steps;         /* steps committed */
};

struct heap_order {         /* DRAM: the walk, made again by a resumed step */
    txn_obj *scratch;
    txn_pool *p;
    uint64_t steps;         /* the scratch's count once its last step commits:
                               another means that step was rolled back */
    size_t n;
    txn_obj **old;          /* old nodes by address */
    txn_obj **fwd;          /* copies of the nodes allocated so far */
};

struct mig {
    struct lay *from, *to;
    unsigned nb;
    struct heap_order *h;
};

static int cmp_obj(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (txn_obj *const *)a, y = (uintptr_t) * (txn_obj *const *)b;
    return x < y ? -1 : x > y;
}

static void order_drop(struct heap_order *h)
{
    free(h->old);
    free(h->fwd);
    *h = (struct heap_order){0};
}

static int order_push(struct heap_order *h, size_t *cap, txn_obj *o)
{
    if (h->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 1024;
        txn_obj **a = realloc(h->old, nc * sizeof *a);
        if (!a)
            return TXN_E_NOMEM;
        h->old = a;
        *cap = nc;
    }
    h->old[h->n++] = o;
    return 0;
}

/* Every old node (the skip list's head included; not the hash table's
 * bucket array), by address. */
static int order_walk(txn *tx, const struct mig *g, const struct kc *ok, struct heap_order *h)
{
    struct dnode d;
    txn_obj *e;
    size_t cap = 0;
    TRY(entry_get(tx, ok, &e));
    if (g->from->kind == HASH) {
        for (uint64_t b = 0; e && b < g->nb; b++) {
            txn_obj *c;
            TRY(txn_read(tx, e, 8 * b, &c, sizeof c));
            for (; c; c = d.child[0]) {
                TRY(order_push(h, &cap, c));
                TRY(nload(tx, ok, c, &d));
            }
        }
    } else if (g->from->kind == SKIP) {
        for (txn_obj *c = e; c; c = d.child[0]) {
            TRY(order_push(h, &cap, c));
            TRY(nload(tx, ok, c, &d));
        }
    } else if (e) { /* B-tree: the walked part of h->old is the stack */
        TRY(order_push(h, &cap, e));
        for (size_t i = 0; i < h->n; i++) {
            TRY(nload(tx, ok, h->old[i], &d));
            for (unsigned j = 0; !d.leaf && j <= d.n; j++)
                TRY(order_push(h, &cap, d.child[j]));
        }
    }
    if (h->n)
        qsort(h->old, h->n, sizeof *h->old, cmp_obj);
    return 0;
}

/* The copy of old node o (NULL stays NULL). */
static int forward(const struct heap_order *h, txn_obj *o, txn_obj **out)
{
    if (!o) {
        *out = NULL;
        return 0;
    }
    txn_obj **at = bsearch(&o, h->old, h->n, sizeof *h->old, cmp_obj);
    if (!at)
        return TXN_E_CORRUPT; /* a child outside the structure */
    *out = h->fwd[at - h->old];
    return 0;
}

/* The DRAM walk of this migration, made on its first step in this
 * process (a new migration, or one resumed after a crash). */
static int order_get(txn *tx, const struct mig *g, const struct kc *ok, txn_obj *scratch,
                     const struct conv *c, struct heap_order **out)
{
    struct heap_order *h = g->h;
    txn_pool *p = txn_pool_of(tx);
    if (h->old && h->scratch == scratch && h->p == p && h->steps == c->steps) {
        *out = h;
        return 0;
    }
    order_drop(h);
    int rc = order_walk(tx, g, ok, h);
    if (!rc && c->started && h->n != c->count)
        rc = TXN_E_CORRUPT; /* the old structure changed under the migration */
    if (!rc && !(h->fwd = calloc(h->n ? h->n : 1, sizeof *h->fwd)))
        rc = TXN_E_NOMEM;
    size_t have = !c->started ? 0 : c->phase > 0 ? h->n : c->next;
    if (!rc && have) /* resumed: the copies made so far */
        rc = txn_read(tx, c->fwd, 0, h->fwd, have * sizeof *h->fwd);
    if (rc) {
        order_drop(h);
        return rc;
    }
    h->scratch = scratch;
    h->p = p;
    *out = h;
    return 0;
}

static int conv_start(txn_migrate *m, txn *tx, const struct mig *g, const struct kc *ok,
                      const struct heap_order *h, struct conv *c)
{
    txn_obj *e;
    c->started = 1;
    c->count = h->n;
    TRY(txn_migrate_alloc(m, tx, 8 * (h->n ? h->n : 1), &c->fwd));
    TRY(entry_get(tx, ok, &e));
    if (g->from->kind != HASH)
        return 0;
    TRY(txn_migrate_retire(m, tx, e)); /* the old bucket array */
    return txn_migrate_alloc(m, tx, 8 * (size_t)g->nb, &c->entry);
}

/* Children of a loaded node: a chain's next, a skip-list node's levels,
 * an internal B-tree node's n + 1. */
static unsigned children(const struct lay *L, const struct dnode *d)
{
    unsigned nc = L->kind == HASH ? 1 : L->kind == SKIP ? d->leaf : d->leaf ? 0 : d->n + 1;
    return nc < L->C ? nc : L->C;
}

/* --interrupt K: every K-th step fails after its work (the library rolls
 * it back and the open fails; P-Retain opens the pool again, resuming). */
static unsigned g_interrupt, g_steps_run;

/* Up to BATCH units of the current phase. */
static int conv_batch(txn_migrate *m, txn *tx, const struct mig *g, const struct kc *ok,
                      const struct kc *nk, struct heap_order *h, struct conv *c)
{
    uint64_t end = c->next + BATCH;
    if (end > h->n)
        end = h->n;
    for (uint64_t i = c->next; c->phase < 2 && i < end; i++) {
        struct dnode d;
        TRY(nload(tx, ok, h->old[i], &d));
        unsigned nc = children(g->from, &d);
        if (c->phase == 0) { /* the copy, its children still the old nodes */
            for (unsigned j = nc; j < CMAX; j++) /* stale words, cleared */
                d.child[j] = NULL;
            TRY(nalloc(tx, nk, &h->fwd[i]));
            TRY(nstore(tx, nk, h->fwd[i], &d, W_NEW));
            TRY(txn_migrate_retire(m, tx, h->old[i]));
            continue;
        }
        int any = 0; /* phase 1: the children's copies */
        for (unsigned j = 0; j < nc; j++) {
            TRY(forward(h, d.child[j], &d.child[j]));
            any |= d.child[j] != NULL;
        }
        if (any)
            TRY(txn_write(tx, h->fwd[i], nk->L->off_child, d.child, 8 * nc));
    }
    if (c->phase == 0 && end > c->next)
        TRY(txn_write(tx, c->fwd, 8 * c->next, &h->fwd[c->next], 8 * (end - c->next)));
    if (c->phase == 2) { /* the entry: the hash table's buckets, BATCH at a time */
        txn_obj *e;
        TRY(entry_get(tx, ok, &e));
        if (g->from->kind != HASH) {
            TRY(forward(h, e, &c->entry));
        } else {
            txn_obj *heads[BATCH];
            end = c->next + BATCH < g->nb ? c->next + BATCH : g->nb;
            TRY(txn_read(tx, e, 8 * c->next, heads, 8 * (end - c->next)));
            for (uint64_t b = 0; b < end - c->next; b++)
                TRY(forward(h, heads[b], &heads[b]));
            TRY(txn_write(tx, c->entry, 8 * c->next, heads, 8 * (end - c->next)));
            c->next = end;
        }
        c->done = g->from->kind != HASH || c->next == g->nb; /* the last phase ended */
        return 0;
    }
    c->next = end;
    if (end == h->n) {
        c->phase++;
        c->next = 0;
    }
    return 0;
}

static int conv_step(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg)
{
    const struct mig *g = arg;
    txn_pool *p = txn_pool_of(tx);
    struct conv c;
    struct heap_order *h;
    struct kc ok = {g->from, txn_root(p), 0, NULL, g->nb};
    struct kc nk = {g->to, scratch, offsetof(struct conv, entry), m, g->nb};
    TRY(txn_read(tx, scratch, 0, &c, sizeof c));
    if (c.done)
        return 0;
    TRY(order_get(tx, g, &ok, scratch, &c, &h));
    if (!c.started)
        TRY(conv_start(m, tx, g, &ok, h, &c));
    TRY(conv_batch(m, tx, g, &ok, &nk, h, &c));
    c.steps++;
    TRY(txn_write(tx, scratch, 0, &c, sizeof c));
    h->steps = c.steps;
    if (g_interrupt && ++g_steps_run % g_interrupt == 0)
        return TXN_E_IO;
    return c.done ? 0 : TXN_MIGRATE_MORE;
}

static int conv_finish(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg)
{
    const struct mig *g = arg;
    struct conv c;
    order_drop(g->h);
    TRY(txn_read(tx, scratch, 0, &c, sizeof c));
    TRY(txn_migrate_retire(m, tx, c.fwd)); /* a migration object, freed with the old */
    return txn_write(tx, txn_root(txn_pool_of(tx)), 0, &c.entry, sizeof c.entry);
}

/* ---- programs */

enum input { INS, DEL, RAND };
static const char *const input_name[] = {"INS", "DEL", "RAND"};

/* The thread's CPU time: the run is one thread, and the machine's other
 * processes then cost it nothing (barrier spins and page faults count),
 * except through the caches they share. Wall time is reported beside it. */
static double clock_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double now_s(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

/* A timed interval: thread CPU time and wall time. */
struct stamp {
    double cpu, wall;
};

static struct stamp stamp_now(void)
{
    return (struct stamp){now_s(), clock_s(CLOCK_MONOTONIC)};
}

static struct stamp stamp_since(struct stamp t0)
{
    struct stamp t = stamp_now();
    return (struct stamp){t.cpu - t0.cpu, t.wall - t0.wall};
}

static uint64_t stored(void)
{
    txn_stats s;
    txn_stats_get(&s);
    return s.bytes_stored;
}

/* one operation per transaction: delete the key if there, else insert */
static int run_ops(txn_pool *p, const struct kc *k, const uint32_t *keys, size_t n, size_t *found_n)
{
    size_t f = 0;
    for (size_t i = 0; i < n; i++) {
        txn *tx;
        int found = 0;
        TRY(txn_begin(p, &tx));
        int rc = k_lookup(tx, k, keys[i], &found);
        if (!rc)
            rc = found ? k_delete(tx, k, keys[i]) : k_insert(tx, k, keys[i], val_of(keys[i]));
        if (rc) {
            txn_abort(tx);
            return rc;
        }
        TRY(txn_commit(tx));
        f += (size_t)found;
    }
    *found_n = f;
    return 0;
}

/* Untimed: allocate (zero-filled) and abort `n` node-sized objects, so
 * that the timed program does not pay first touches of pool pages that
 * another program's pool had touched already (P-Retain's frees leave
 * P-Manual warm pages; a fresh copy, with --block, has none). */
static int warm_heap(txn_pool *p, size_t size, size_t n)
{
    for (size_t done = 0; done < n;) {
        txn *tx;
        TRY(txn_begin(p, &tx));
        for (unsigned i = 0; i < 1000 && done < n; i++, done++) {
            txn_obj *o;
            int rc = txn_alloc(tx, size, &o);
            if (rc) {
                txn_abort(tx);
                return rc == TXN_E_NOSPACE ? 0 : rc;
            }
        }
        txn_abort(tx);
    }
    return 0;
}

static int create_structure(txn_pool *p, const struct kc *k)
{
    txn *tx;
    TRY(txn_begin(p, &tx));
    int rc = k_create(tx, k);
    if (rc) {
        txn_abort(tx);
        return rc;
    }
    return txn_commit(tx);
}

static char g_dir[256], g_orig[512], g_work[512], g_work2[512], g_work3[512];

static void die(const char *what, int rc)
{
    fprintf(stderr, "retain: %s: %s %s\n", what, txn_strerror(rc), txn_layout_error());
    unlink(g_orig);
    unlink(g_work);
    unlink(g_work2);
    unlink(g_work3);
    exit(1);
}

/* Copy a pool file over `to`, in place when `to` exists: the file keeps
 * its pages (on /dev/shm, the same physical memory), so programs that run
 * one after the other on it run on the same memory. */
static int copy_file(const char *from, const char *to)
{
    int a = open(from, O_RDONLY), b = open(to, O_WRONLY | O_CREAT, 0600);
    static char buf[1 << 20];
    ssize_t n;
    off_t at = 0;
    int rc = a >= 0 && b >= 0 ? 0 : -1;
    while (!rc && (n = read(a, buf, sizeof buf)) > 0) {
        rc = pwrite(b, buf, (size_t)n, at) == n ? 0 : -1;
        at += n;
    }
    if (!rc && (n < 0 || ftruncate(b, at)))
        rc = -1;
    if (a >= 0)
        close(a);
    if (b >= 0 && close(b))
        rc = -1;
    return rc;
}

static size_t g_n;
static unsigned g_reps = 3, g_reps_add; /* runs per row; Layout-Add rows (0: g_reps) */
#define REPS_MAX 64

/* Medians over the runs; the Auto overheads are medians of the runs'
 * paired ratios (e.g. T(P-Auto)/T(P-Manual) - 1 of one run), with their
 * quartiles: the spread says which differences the measurement resolves. */
struct measure {
    double t_orig, t_retain, t_manual, t_auto;
    double ov_cpu[3], ov_wall[3]; /* Auto overhead: 25th, 50th, 75th percentile */
    double lx_cpu[3], lx_wall[3]; /* P-Auto against P-Original' (below), likewise */
    double t_same;                /* P-Original' */
    double d_auto;                /* median of the runs' T(P-Auto) - T(P-Manual) */
    int same;                     /* P-Original' ran */
    unsigned reps;
    uint64_t b_orig, b_retain, b_manual, b_auto;
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v (sorted in place), interpolated between ranks. */
static double quantile(double *v, unsigned n, double q)
{
    qsort(v, n, sizeof *v, cmp_d);
    double x = q * (double)(n - 1);
    unsigned i = (unsigned)x;
    return i + 1 < n ? v[i] + (x - (double)i) * (v[i + 1] - v[i]) : v[n - 1];
}

static double median(double *v, unsigned n)
{
    return quantile(v, n, 0.5);
}

static void quartiles(double *v, unsigned n, double out[3])
{
    out[0] = quantile(v, n, 0.25);
    out[1] = quantile(v, n, 0.5);
    out[2] = quantile(v, n, 0.75);
}

static unsigned buckets_for(size_t n)
{
    unsigned nb = 1;
    while (nb < n / 2)
        nb *= 2;
    return nb;
}

static txn_pool_opts g_opts = {.size = (size_t)16 << 20, .root_size = 64};

/* P-Original: build the original pool from `keys`. */
static void p_original(struct lay *L, const uint32_t *keys, size_t n, struct measure *m)
{
    static const txn_layout v1 = {"retain-bench", 1, NULL, 0, NULL, 0, 0};
    txn_pool *p;
    unlink(g_orig);
    int rc = txn_layout_open(g_orig, &v1, &g_opts, TXN_LAYOUT_CREATE, &p);
    if (rc)
        die("create", rc);
    struct kc k = {L, txn_root(p), 0, NULL, buckets_for(g_n)};
    size_t f;
    uint64_t b0 = stored();
    double t0 = now_s();
    if ((rc = create_structure(p, &k)) || (rc = run_ops(p, &k, keys, n, &f)))
        die("P-Original", rc);
    m->t_orig = now_s() - t0;
    m->b_orig = stored() - b0;
    txn_pool_close(p);
}

/* An update program: its pool (P-Manual: version 2, migrated already;
 * P-Auto and P-Original': version 1), opened after an untimed warm-up of
 * its heap, and what it has measured so far. */
struct prog {
    const char *what;
    txn_pool *p;
    struct kc k;
    struct stamp t;
    size_t found;
    uint64_t bytes;
};

static void prog_open(struct prog *g, const char *what, const char *path, const txn_layout *lay,
                      struct lay *L, unsigned nb)
{
    int rc;
    *g = (struct prog){.what = what};
    if ((rc = txn_layout_open(path, lay, NULL, 0, &g->p)))
        die(what, rc);
    g->k = (struct kc){L, txn_root(g->p), 0, NULL, nb};
    if ((rc = warm_heap(g->p, node_bytes(L), 2 * g_n)))
        die("warm", rc);
}

/* Every program starts its timed operations with nothing of its pool in
 * the caches. P-Manual's pool comes from the migration, which has just
 * touched every node, the others' from a file copy that evicted them: with
 * the shared last-level cache (32 MB here) still holding the structure
 * (hash table and B-tree at N = 100000: 5-7 MB) for P-Manual alone, P-Auto
 * against P-Manual moved from one invocation to the next by how much of
 * that cache other work took, up to 3-5% on the hash table, with P-Auto
 * and P-Original' equal. Writes over a buffer of twice the last-level
 * cache (evicting the TLB's entries too): 64 MB on a host with a 32 MB
 * cache, 600 MB on one that reports 300 MB, where it was nearly all of a
 * small run's time. --no-evict (g_evict = 0) skips it, for runs that
 * check results and do not compare times (the ctest smoke runs). */
static int g_evict = 1;

static void evict_caches(void)
{
    static unsigned char *buf;
    static size_t n;
    if (!g_evict)
        return;
    if (!buf) {
        long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        n = 2 * (l3 > 0 ? (size_t)l3 : (size_t)32 << 20);
        if (!(buf = malloc(n)))
            return;
    }
    for (size_t i = 0; i < n; i += 64)
        buf[i]++;
}

/* Operations [from, to) of the update input, timed, from cold caches. */
static void prog_ops(struct prog *g, const uint32_t *keys, size_t from, size_t to)
{
    size_t f;
    int rc;
    evict_caches();
    uint64_t b0 = stored();
    struct stamp t0 = stamp_now();
    if ((rc = run_ops(g->p, &g->k, keys + from, to - from, &f)))
        die(g->what, rc);
    struct stamp t = stamp_since(t0);
    g->bytes += stored() - b0;
    g->t.cpu += t.cpu;
    g->t.wall += t.wall;
    g->found += f;
}

/* Close it; it must have found `want` keys. */
static void prog_close(struct prog *g, size_t want)
{
    if (g->found != want) {
        fprintf(stderr, "retain: %s found %zu keys, expected %zu\n", g->what, g->found, want);
        exit(1);
    }
    txn_pool_close(g->p);
}

/* Operations per block of an interleaved run (0: each program runs the
 * whole input at once). */
static size_t g_block;

/* An interleaved program runs in a child process of its own (a pool maps
 * at the address it was made at, so copies of one pool cannot be open in
 * one process): it opens its pool, then runs the blocks the parent sends
 * and answers each with its counters; one child runs at a time. */
struct child {
    pid_t pid;
    int cmd, ans; /* pipe ends: to the child, from it */
    struct prog g;
};

struct block_cmd {
    size_t from, to; /* from > to: close and exit */
};

static void xfer(int fd, void *buf, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = out ? write(fd, (char *)buf + done, n - done)
                        : read(fd, (char *)buf + done, n - done);
        if (r <= 0) {
            fprintf(stderr, "retain: pipe to an interleaved program broke\n");
            exit(1);
        }
        done += (size_t)r;
    }
}

static void child_start(struct child *c, const char *what, const char *path,
                        const txn_layout *lay, struct lay *L, unsigned nb, const uint32_t *keys,
                        size_t want)
{
    int to[2], from[2];
    if (pipe(to) || pipe(from))
        die("pipe", TXN_E_IO);
    fflush(stdout);
    c->pid = fork();
    if (c->pid < 0)
        die("fork", TXN_E_IO);
    if (c->pid == 0) {
        close(to[1]);
        close(from[0]);
        prog_open(&c->g, what, path, lay, L, nb);
        for (;;) {
            struct block_cmd b;
            xfer(to[0], &b, sizeof b, 0);
            if (b.from > b.to) {
                prog_close(&c->g, want);
                xfer(from[1], &c->g, sizeof c->g, 1);
                _exit(0);
            }
            prog_ops(&c->g, keys, b.from, b.to);
            xfer(from[1], &c->g, sizeof c->g, 1);
        }
    }
    close(to[0]);
    close(from[1]);
    c->cmd = to[1];
    c->ans = from[0];
    c->g = (struct prog){.what = what};
}

static void child_run(struct child *c, size_t from, size_t to)
{
    struct block_cmd b = {from, to};
    xfer(c->cmd, &b, sizeof b, 1);
    xfer(c->ans, &c->g, sizeof c->g, 0);
}

static void child_end(struct child *c)
{
    int st;
    child_run(c, 1, 0);
    close(c->cmd);
    close(c->ans);
    if (waitpid(c->pid, &st, 0) != c->pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "retain: %s failed\n", c->g.what);
        exit(1);
    }
}

/* P-Retain: the original pool copied over g_work, then migrated to v2
 * there (timed; its bytes counted). */
static void retain_copy(const txn_layout *v2, double *t, struct measure *m)
{
    txn_pool *p;
    int rc;
    if (copy_file(g_orig, g_work))
        die("copy", TXN_E_IO);
    uint64_t b0 = stored();
    double t0 = now_s();
    unsigned tries = 0;
    while ((rc = txn_layout_open(g_work, v2, NULL, 0, &p)) == TXN_E_IO && g_interrupt &&
           ++tries < 1000000)
        ; /* an interrupted migration resumes */
    if (rc)
        die("P-Retain", rc);
    *t = now_s() - t0;
    m->b_retain = stored() - b0;
    txn_pool_close(p);
}

/* Each run: P-Retain (a program of its own: it opens, migrates and
 * closes the pool), then P-Manual on the migrated pool, P-Auto on the
 * original pool and, with `same`, P-Original' (the original program, no
 * retention, running the update input on the original pool), in an order
 * that rotates from run to run. By default they run one after the other,
 * each on the same file, the original copied over it in place before each
 * (and migrated for P-Manual): every program runs on the same memory, at
 * the same address (with a file per program, the physical pages under
 * each differed, and two identical programs differed by up to 5%). With
 * g_block, each program runs in a process of its own with its pool open
 * (a file each), and they take turns, block after block of g_block
 * operations (the order rotating from block to block). P-Auto against
 * P-Manual is the paper's overhead; it includes what the migration
 * changed besides the layout (the nodes' size class; P-Retain keeps their
 * order in the heap). P-Auto against P-Original', the same pool and heap,
 * is what the extendible structs themselves cost.
 * `want` = keys the update input must find. */
static void p_update(struct lay *L1, struct lay *L2, struct lay *La, const uint32_t *orig,
                     const uint32_t *keys, size_t n, size_t want, unsigned reps, int same,
                     struct measure *m)
{
    struct heap_order ho = {0};
    struct mig g = {L1, L2, buckets_for(g_n), &ho};
    const txn_migration mg[] = {{1, sizeof(struct conv), conv_step, conv_finish, &g}};
    const txn_layout v2 = {"retain-bench", 2, NULL, 0, mg, 1, BATCH};
    const txn_layout v1 = {"retain-bench", 1, NULL, 0, NULL, 0, 0};
    static const char *const names[] = {"P-Manual", "P-Auto", "P-Original'"};
    const char *paths[] = {g_work, g_work2, g_work3};
    const txn_layout *lays[] = {&v2, &v1, &v1};
    struct lay *Ls[] = {L2, La, L1};
    double tr[REPS_MAX], tm[REPS_MAX], ta[REPS_MAX], ts[REPS_MAX];
    double oc[REPS_MAX], ow[REPS_MAX], lc[REPS_MAX], lw[REPS_MAX], da[REPS_MAX];
    for (unsigned r = 0; r < reps; r++) {
        struct prog pg[3]; /* Manual, Auto, Original' */
        struct child ch[3];
        unsigned np = same ? 3 : 2;
        size_t block = g_block ? g_block : n;
        /* each run on a pool of its own, built anew: a new address (a pool
         * maps where it was made) and new pages, whose placement in the
         * caches and TLBs changes from run to run; with one pool for all
         * runs, P-Auto against P-Manual moved by up to 6 points from one
         * invocation to the next, with tight quartiles in each */
        if (r > 0) {
            struct measure mo = {0};
            p_original(L1, orig, g_n, &mo);
        }
        unlink(g_work);
        if (g_block) /* P-Manual's pool first: the children open theirs at once */
            retain_copy(&v2, &tr[r], m);
        for (unsigned q = 0; g_block && q < np; q++) {
            if (q > 0 && copy_file(g_orig, paths[q]))
                die("copy", TXN_E_IO);
            child_start(&ch[q], names[q], paths[q], lays[q], Ls[q], g.nb, keys, want);
        }
        for (size_t from = 0, b = 0; from < n; from += block, b++)
            for (unsigned i = 0; i < np; i++) {
                unsigned q = (unsigned)((i + r + b) % np);
                size_t to = from + block < n ? from + block : n;
                if (g_block) {
                    child_run(&ch[q], from, to);
                    continue;
                }
                /* one program after the other, each on the same file made
                 * anew in place: the same memory under every program */
                if (q == 0)
                    retain_copy(&v2, &tr[r], m);
                else if (copy_file(g_orig, g_work))
                    die("copy", TXN_E_IO);
                prog_open(&pg[q], names[q], g_work, lays[q], Ls[q], g.nb);
                prog_ops(&pg[q], keys, from, to);
                prog_close(&pg[q], want);
            }
        for (unsigned q = 0; g_block && q < np; q++) {
            child_end(&ch[q]);
            pg[q] = ch[q].g;
        }
        m->b_manual = pg[0].bytes;
        m->b_auto = pg[1].bytes;
        struct stamp st[3] = {pg[0].t, pg[1].t, same ? pg[2].t : pg[1].t};
        tm[r] = st[0].cpu;
        ta[r] = st[1].cpu;
        ts[r] = st[2].cpu;
        da[r] = st[1].cpu - st[0].cpu;
        oc[r] = st[1].cpu / st[0].cpu - 1;
        ow[r] = st[1].wall / st[0].wall - 1;
        lc[r] = st[1].cpu / st[2].cpu - 1;
        lw[r] = st[1].wall / st[2].wall - 1;
    }
    order_drop(&ho);
    unlink(g_work);
    unlink(g_work2);
    unlink(g_work3);
    m->reps = reps;
    m->same = same;
    m->t_retain = median(tr, reps);
    m->t_manual = median(tm, reps);
    m->t_auto = median(ta, reps);
    m->t_same = median(ts, reps);
    m->d_auto = median(da, reps);
    quartiles(oc, reps, m->ov_cpu);
    quartiles(ow, reps, m->ov_wall);
    quartiles(lc, reps, m->lx_cpu);
    quartiles(lw, reps, m->lx_wall);
}

static uint32_t key_at(uint64_t i)
{
    return (uint32_t)mix64(i * 0x9e3779b97f4a7c15ull + 12345);
}

/* N keys that are all distinct: i -> a bijection of 32-bit values */
static uint32_t unique_key(uint32_t i)
{
    uint32_t x = i * 2654435761u + 0x1234567u;
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

/* keys of the original program and of the update, and how many of the
 * update's the update finds (what run_ops must report) */
static void make_input(enum input in, size_t n, uint32_t *orig, uint32_t *upd, size_t *want,
                       size_t upd_n)
{
    for (size_t i = 0; i < n; i++) {
        if (in == RAND) {
            orig[i] = key_at(i) % (uint32_t)n;
            upd[i] = orig[i];
        } else {
            orig[i] = unique_key((uint32_t)i);
            upd[i] = in == INS ? unique_key((uint32_t)(n + i)) : orig[i];
        }
    }
    if (in != RAND) {
        *want = in == DEL ? upd_n : 0;
        return;
    }
    /* RAND: replay the sequence on a presence bitmap */
    unsigned char *in_set = calloc(n, 1);
    size_t f = 0;
    for (size_t i = 0; i < n; i++)
        in_set[orig[i]] ^= 1;
    for (size_t i = 0; i < upd_n; i++) {
        f += in_set[upd[i]];
        in_set[upd[i]] ^= 1;
    }
    free(in_set);
    *want = f;
}

static void layouts(enum kind kd, int change, struct lay *L1, struct lay *L2, struct lay *La)
{
    lay_init(L1, kd, 4, 0, EXT_NONE);
    if (change) {
        lay_init(L2, kd, 8, 0, EXT_NONE);
        lay_init(La, kd, 4, 0, EXT_KEY);
    } else {
        lay_init(L2, kd, 4, NAME_LEN, EXT_NONE);
        lay_init(La, kd, 4, 0, EXT_NAME);
    }
}

static void table(int kmask)
{
    uint32_t *orig = malloc(g_n * 4), *upd = malloc(g_n * 4);
    printf("| kernel | layout | input | runs | P-Original ms | P-Retain ms | P-Manual ms | P-Auto ms "
           "| P-Original' ms | Manual overhead | Auto overhead, CPU [quartiles] | Auto overhead, "
           "wall [quartiles] | Auto/P-Original', CPU [quartiles] | Auto/P-Original', wall "
           "[quartiles] | bytes P-Retain | bytes P-Manual | bytes P-Auto | retention bytes "
           "Manual/Auto |\n");
    printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int kd = 0; kd < 3; kd++) {
        if (!(kmask & 1 << kd))
            continue;
        for (int change = 1; change >= 0; change--)
            for (int in = 0; in < 3; in++) {
                struct lay L1, L2, La;
                struct measure m = {0};
                size_t want;
                layouts(kd, change, &L1, &L2, &La);
                make_input(in, g_n, orig, upd, &want, g_n);
                p_original(&L1, orig, g_n, &m);
                p_update(&L1, &L2, &La, orig, upd, g_n, want,
                         change || !g_reps_add ? g_reps : g_reps_add, !change, &m);
                char ratio[32];
                if (m.b_auto > m.b_manual)
                    snprintf(ratio, sizeof ratio, "%.1fx",
                             (double)m.b_retain / (double)(m.b_auto - m.b_manual));
                else
                    snprintf(ratio, sizeof ratio, "Auto: none");
                char same_t[32] = "-", same_c[64] = "-", same_w[64] = "-";
                if (m.same) {
                    snprintf(same_t, sizeof same_t, "%.1f", m.t_same * 1e3);
                    snprintf(same_c, sizeof same_c, "%.2f%% [%.2f, %.2f]", 100 * m.lx_cpu[1],
                             100 * m.lx_cpu[0], 100 * m.lx_cpu[2]);
                    snprintf(same_w, sizeof same_w, "%.2f%% [%.2f, %.2f]", 100 * m.lx_wall[1],
                             100 * m.lx_wall[0], 100 * m.lx_wall[2]);
                }
                printf("| %s | %s | %s | %u | %.1f | %.1f | %.1f | %.1f | %s | %.2f%% "
                       "| %.2f%% [%.2f, %.2f] | %.2f%% [%.2f, %.2f] | %s | %s | %llu | %llu | %llu "
                       "| %s |\n",
                       kind_name[kd], change ? "Layout-Change" : "Layout-Add", input_name[in],
                       m.reps, m.t_orig * 1e3, m.t_retain * 1e3, m.t_manual * 1e3, m.t_auto * 1e3,
                       same_t, 100 * m.t_retain / m.t_manual, 100 * m.ov_cpu[1],
                       100 * m.ov_cpu[0], 100 * m.ov_cpu[2], 100 * m.ov_wall[1],
                       100 * m.ov_wall[0], 100 * m.ov_wall[2], same_c, same_w,
                       (unsigned long long)m.b_retain, (unsigned long long)m.b_manual,
                       (unsigned long long)m.b_auto, ratio);
                fflush(stdout);
            }
    }
    free(orig);
    free(upd);
}

/* DEL of a fraction of the keys, Layout-Change: the manual model pays
 * the whole migration, the automatic one the nodes the deletions touch. */
static void sweep(int kmask)
{
    static const double frac[] = {0.001, 0.01, 0.1, 1.0};
    uint32_t *orig = malloc(g_n * 4), *upd = malloc(g_n * 4);
    printf("| kernel | keys deleted | P-Retain ms | P-Manual ms | P-Auto ms | Manual cost ms "
           "| Auto cost ms | Manual/Auto time | Manual/Auto bytes |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int kd = 0; kd < 3; kd++) {
        if (!(kmask & 1 << kd))
            continue;
        struct lay L1, L2, La;
        layouts(kd, 1, &L1, &L2, &La);
        size_t want;
        struct measure m0 = {0};
        make_input(DEL, g_n, orig, upd, &want, g_n);
        p_original(&L1, orig, g_n, &m0);
        for (int i = 0; i < 4; i++) {
            struct measure m = {0};
            size_t n = (size_t)(frac[i] * (double)g_n + 0.5);
            p_update(&L1, &L2, &La, orig, upd, n, n, g_reps, 0, &m);
            double auto_cost = m.d_auto; /* paired: run by run */
            /* bytes the retention costs: all of P-Retain for the manual
             * model, what P-Auto stores beyond P-Manual for the automatic */
            double auto_bytes = (double)m.b_auto - (double)m.b_manual;
            char rt[48], rb[48];
            if (auto_cost > 0)
                snprintf(rt, sizeof rt, "%.1fx", m.t_retain / auto_cost);
            else
                snprintf(rt, sizeof rt, "Auto: none measurable");
            if (auto_bytes > 0)
                snprintf(rb, sizeof rb, "%.1fx", (double)m.b_retain / auto_bytes);
            else
                snprintf(rb, sizeof rb, "Auto: none");
            printf("| %s | %.1f%% (%zu) | %.2f | %.2f | %.2f | %.2f | %.3f | %s | %s |\n",
                   kind_name[kd], frac[i] * 100, n, m.t_retain * 1e3, m.t_manual * 1e3,
                   m.t_auto * 1e3, m.t_retain * 1e3, auto_cost * 1e3, rt, rb);
            fflush(stdout);
        }
    }
    free(orig);
    free(upd);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"n", required_argument, 0, 'n'},
                                         {"reps", required_argument, 0, 'r'},
                                         {"kernel", required_argument, 0, 'k'},
                                         {"sweep", no_argument, 0, 's'},
                                         {"plain-ext", no_argument, 0, 'p'},
                                         {"lazy-new", no_argument, 0, 'l'},
                                         {"born-new", no_argument, 0, 'B'},
                                         {"reps-add", required_argument, 0, 'a'},
                                         {"block", required_argument, 0, 'b'},
                                         {"interrupt", required_argument, 0, 'i'},
                                         {"no-evict", no_argument, 0, 'E'},
                                         {0, 0, 0, 0}};
    int kmask = 7, do_sweep = 0;
    g_n = 20000;
    for (int c; (c = getopt_long(argc, argv, "n:r:k:s", opts, NULL)) != -1;) {
        if (c == 'n' && atol(optarg) >= 16)
            g_n = (size_t)atol(optarg);
        else if (c == 'r' && atoi(optarg) >= 1 && atoi(optarg) <= REPS_MAX)
            g_reps = (unsigned)atoi(optarg);
        else if (c == 'a' && atoi(optarg) >= 1 && atoi(optarg) <= REPS_MAX)
            g_reps_add = (unsigned)atoi(optarg);
        else if (c == 'b' && atol(optarg) >= 0)
            g_block = (size_t)atol(optarg);
        else if (c == 'k' && (!strcmp(optarg, "hash") || !strcmp(optarg, "btree") ||
                              !strcmp(optarg, "skip")))
            kmask = !strcmp(optarg, "hash") ? 1 : !strcmp(optarg, "btree") ? 2 : 4;
        else if (c == 's')
            do_sweep = 1;
        else if (c == 'p')
            g_inline_check = 0;
        else if (c == 'l')
            g_born = BORN_NEVER;
        else if (c == 'B')
            g_born = BORN_ALWAYS;
        else if (c == 'i' && atoi(optarg) >= 2)
            g_interrupt = (unsigned)atoi(optarg);
        else if (c == 'E')
            g_evict = 0;
        else {
            fprintf(stderr,
                    "usage: %s [--n N] [--reps 1..64] [--reps-add 1..64] [--kernel hash|btree|skip] "
                    "[--block OPS] [--sweep] [--plain-ext] [--lazy-new|--born-new] "
                    "[--interrupt K] [--no-evict]\n",
                    argv[0]);
            return 2;
        }
    }
    if (g_n * 2048 > g_opts.size)
        g_opts.size = g_n * 2048;
    snprintf(g_dir, sizeof g_dir, "%s", getenv("TXN_POOL_DIR") ? getenv("TXN_POOL_DIR") : "/dev/shm");
    snprintf(g_orig, sizeof g_orig, "%s/retain-%s-%d-orig.pool", g_dir, txn_engine_name(),
             (int)getpid());
    snprintf(g_work, sizeof g_work, "%s/retain-%s-%d-work.pool", g_dir, txn_engine_name(),
             (int)getpid());
    snprintf(g_work2, sizeof g_work2, "%s/retain-%s-%d-work2.pool", g_dir, txn_engine_name(),
             (int)getpid());
    snprintf(g_work3, sizeof g_work3, "%s/retain-%s-%d-work3.pool", g_dir, txn_engine_name(),
             (int)getpid());
    printf("# retain: engine %s, PDOM %d, N = %zu keys, medians of %u runs (Layout-Add: %u), "
           "thread CPU time, %s\n",
           txn_engine_name(), txn_pdom(), g_n, g_reps, g_reps_add ? g_reps_add : g_reps,
           g_block ? "interleaved blocks" : "one program after the other");
    if (do_sweep)
        sweep(kmask);
    else
        table(kmask);
    unlink(g_orig);
    unlink(g_work);
    unlink(g_work2);
    unlink(g_work3);
    return 0;
}
