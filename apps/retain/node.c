/* node.c - node layouts and the accesses every kernel makes to a node:
 * load, store, allocate, free, in the original layout, the new one or the
 * original with an extension level (P-Auto). */
#include <string.h>

#include "retain.h"

/* The layout in use for the init functions (no argument reaches them). */
static const struct node_layout *g_init_lay;

/* Layout-Change's level: the keys, widened from the node's 32-bit ones. */
static int ext_key_init(txn *tx, txn_obj *o, void *ext)
{
    const struct node_layout *L = g_init_lay;
    uint32_t k[KMAX];
    int rc = txn_read(tx, o, L->off_keys, k, 4 * L->K);
    for (unsigned i = 0; i < L->K; i++)
        ((uint64_t *)ext)[i] = k[i];
    return rc;
}

static void layout_init(struct node_layout *L, enum kind kind, unsigned kw, unsigned name,
                        enum ext ext)
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

void layouts_for(enum kind kind, int change, struct node_layout *L1, struct node_layout *L2,
                 struct node_layout *La)
{
    layout_init(L1, kind, 4, 0, EXT_NONE);
    if (change) {
        layout_init(L2, kind, 8, 0, EXT_NONE);
        layout_init(La, kind, 4, 0, EXT_KEY);
    } else {
        layout_init(L2, kind, 4, NAME_LEN, EXT_NONE);
        layout_init(La, kind, 4, 0, EXT_NAME);
    }
}

/* P-Auto's new nodes: born extended when the update program sets the new
 * level's fields at creation (Layout-Change: the keys live there), lazily
 * extended when it does not use them yet (Layout-Add's name: a born node
 * would take a larger size class for bytes nobody reads, and a freed old
 * node's block, still in the caches, would not fit the next new node). */
static int born(const struct node_layout *L)
{
    return L->ext != EXT_NONE &&
           (g_opt.born == BORN_ALWAYS || (g_opt.born == BORN_USED && L->ext == EXT_KEY));
}

static void load_fields(const struct node_layout *L, const unsigned char *b, struct node *d)
{
    memcpy(&d->n, b, 4);
    memcpy(&d->leaf, b + 4, 4);
    memcpy(d->val, b + L->off_vals, 8 * L->K);
    memcpy(d->child, b + L->off_child, 8 * L->C);
}

/* The keys stored in the node itself, or (Layout-Change's P-Auto, no
 * extension yet) what its init would make of them. */
static void load_node_keys(const struct node_layout *L, const unsigned char *b, struct node *d)
{
    for (unsigned i = 0; i < L->K; i++) {
        uint32_t k32;
        if (L->kw == 8) {
            memcpy(&d->key[i], b + L->off_keys + 8 * i, 8);
        } else {
            memcpy(&k32, b + L->off_keys + 4 * i, 4);
            d->key[i] = k32;
        }
    }
}

/* Section 4.4 (what a compiler would emit): the bytes a load of a node
 * reads hold its extension link (after the header), so the load takes it
 * there and no later access reads it again (the key read below,
 * txn_ext_write_known, txn_ext_free_known); a missing extension's keys
 * (Layout-Change) come from the bytes already loaded (the init's
 * conversion) instead of a peek. --plain-ext: txn_ext_peek, txn_ext_write
 * and txn_ext_free, each reading the link itself. */
int node_load(txn *tx, const struct instance *k, txn_obj *o, struct node *d)
{
    const struct node_layout *L = k->L;
    unsigned char b[256];
    int inline_key = L->ext == EXT_KEY && g_opt.known_links;
    TRY(txn_read(tx, o, 0, b, L->off_name)); /* all but the name */
    d->link = NULL;
    if (L->ext != EXT_NONE && g_opt.known_links)
        memcpy(&d->link, b + L->off_link, sizeof d->link);
    load_fields(L, b, d);
    if (inline_key && d->link == TXN_EXT_INLINE) /* born extended (node_alloc) */
        return txn_read(tx, o, txn_ext_inline_off(&L->xt, 1), d->key, 8 * L->K);
    if (inline_key && d->link)
        return txn_read(tx, d->link, 0, d->key, 8 * L->K);
    if (L->ext == EXT_KEY && !inline_key) { /* a look only: the first write makes it */
        g_init_lay = L;
        return txn_ext_peek(tx, &L->xt, o, 1, 0, d->key, 8 * L->K);
    }
    load_node_keys(L, b, d);
    return 0;
}

/* The node's image in layout L (link and name left zero). */
static void encode(const struct node_layout *L, const struct node *d, unsigned char *b)
{
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
}

int node_store(txn *tx, const struct instance *k, txn_obj *o, const struct node *d, unsigned w)
{
    const struct node_layout *L = k->L;
    unsigned char b[256] = {0};
    if (w & W_NEW)
        w |= W_ALL;
    encode(L, d, b);
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
        TRY(g_opt.known_links
                ? txn_ext_write_known(tx, &L->xt, o, d->link, 1, 0, d->key, 8 * L->K)
                : txn_ext_write(tx, &L->xt, o, 1, 0, d->key, 8 * L->K));
    return 0;
}

size_t node_bytes(const struct node_layout *L)
{
    return born(L) ? txn_ext_inline_off(&L->xt, L->xt.nlevels + 1) : L->size;
}

/* A new node. P-Auto's, when born(), are born extended (txn_ext_alloc: the
 * level in the node's block, one allocation), as a program that knows and
 * sets the new fields makes its objects; the old nodes' extensions stay
 * lazy. */
int node_alloc(txn *tx, const struct instance *k, txn_obj **o)
{
    if (k->m)
        return txn_migrate_alloc(k->m, tx, k->L->size, o);
    if (born(k->L))
        return txn_ext_alloc(tx, &k->L->xt, o);
    return txn_alloc(tx, k->L->size, o);
}

int node_free(txn *tx, const struct instance *k, txn_obj *o, const struct node *d)
{
    if (k->L->ext == EXT_NONE)
        return txn_free(tx, o);
    return g_opt.known_links ? txn_ext_free_known(tx, &k->L->xt, o, d->link)
                             : txn_ext_free(tx, &k->L->xt, o);
}

int entry_get(txn *tx, const struct instance *k, txn_obj **e)
{
    return txn_read(tx, k->holder, k->off, e, sizeof *e);
}

int entry_set(txn *tx, const struct instance *k, txn_obj *e)
{
    return txn_write(tx, k->holder, k->off, &e, sizeof e);
}
