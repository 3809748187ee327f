/* retain.c - crash simulator workloads of txn_layout.h.
 *
 * migrate: a list whose node format changes twice (version 1 -> 2 -> 3)
 * by manual migrations run in the middle of the run, in transactions of
 * two nodes; between them, ordinary transactions in the current format.
 * After a crash every node must have the format of the recorded version
 * (never a mix) and the keys of a commit; then the old program's open
 * (which drops a half-built version) and the newest program's open (which
 * resumes and finishes it) must both keep the keys.
 *
 * extend: a list of lazily extendible nodes; transactions read and write
 * fields of extension levels 1 and 2 (made at first access), push, pop
 * (freeing the extensions) and replace nodes by deep copies. The digest
 * covers which extensions exist, so an extension made by a transaction
 * that did not commit is caught, and the allocator check catches a leaked
 * or shared extension. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout_int.h"
#include "sim.h"
#include "txn_layout.h"

/* ---- migrate */

enum { MG_INIT = 24, MG_MAX = 32, MG_MIN = 4, MG_TO2 = 15, MG_TO3 = 60 };

/* a node of any version, decoded */
struct gnode {
    uint32_t fmt;
    uint64_t key;
    txn_obj *next;
};

static size_t next_off(uint32_t fmt)
{
    return fmt == 1 ? 8 : 16;
}

static size_t node_size(uint32_t fmt)
{
    return fmt == 1 ? 16 : fmt == 2 ? 24 : 32;
}

/* fmt 1 {u32 fmt, u32 key, next}; 2 {u32 fmt, pad, u64 key, next};
 * 3 as 2 plus u64 check = key * 7 + 1 */
static size_t encode(const struct gnode *g, unsigned char *b)
{
    memset(b, 0, 32);
    memcpy(b, &g->fmt, 4);
    if (g->fmt == 1) {
        uint32_t k = (uint32_t)g->key;
        memcpy(b + 4, &k, 4);
    } else {
        memcpy(b + 8, &g->key, 8);
    }
    memcpy(b + next_off(g->fmt), &g->next, sizeof g->next);
    if (g->fmt == 3) {
        uint64_t c = g->key * 7 + 1;
        memcpy(b + 24, &c, 8);
    }
    return node_size(g->fmt);
}

/* Reads node o, which must have format `fmt`; nonzero if it has not. */
static int decode(txn *tx, txn_pool *p, txn_obj *o, uint32_t fmt, struct gnode *g)
{
    unsigned char b[32];
    if (txn_obj_size(p, o) < node_size(fmt) || txn_read(tx, o, 0, b, node_size(fmt)))
        return 1;
    memcpy(&g->fmt, b, 4);
    if (g->fmt != fmt)
        return 1;
    if (fmt == 1) {
        uint32_t k;
        memcpy(&k, b + 4, 4);
        g->key = k;
    } else {
        memcpy(&g->key, b + 8, 8);
    }
    memcpy(&g->next, b + next_off(fmt), sizeof g->next);
    if (fmt == 3) {
        uint64_t c;
        memcpy(&c, b + 24, 8);
        return c != g->key * 7 + 1;
    }
    return 0;
}

static uint32_t mg_key[MG_MAX];
static unsigned mg_len, mg_steps;
static uint32_t mg_ver;
static uint32_t mg_view_ver; /* what sim_file_check's view found */

static uint64_t mg_digest_of(const uint32_t *key, unsigned len)
{
    return sim_hash(sim_hash(5, &len, sizeof len), key, len * sizeof *key);
}

static uint64_t mg_mirror(int t)
{
    (void)t;
    return mg_digest_of(mg_key, mg_len);
}

/* the migration: scratch {old_next, head, tail, started, done} */
struct conv {
    txn_obj *old_next, *head, *tail;
    uint64_t started, done;
};

static int conv_step(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg)
{
    uint32_t to = *(const uint32_t *)arg;
    txn_pool *p = txn_pool_of(tx);
    struct conv c;
    int rc = txn_read(tx, scratch, 0, &c, sizeof c);
    if (rc || c.done)
        return rc;
    if (!c.started) {
        if ((rc = txn_read(tx, sim_part(tx, p, 0), 0, &c.old_next, sizeof c.old_next)))
            return rc;
        c.started = 1;
    }
    for (int i = 0; i < 2 && c.old_next; i++) {
        struct gnode g;
        unsigned char b[32];
        txn_obj *no;
        if (decode(tx, p, c.old_next, to - 1, &g))
            return TXN_E_CORRUPT;
        txn_obj *old = c.old_next;
        c.old_next = g.next;
        g.fmt = to;
        g.next = NULL;
        size_t n = encode(&g, b);
        if ((rc = txn_migrate_alloc(m, tx, n, &no)) || (rc = txn_write(tx, no, 0, b, n)) ||
            (rc = txn_migrate_retire(m, tx, old)))
            return rc;
        if (c.tail)
            rc = txn_write(tx, c.tail, next_off(to), &no, sizeof no);
        else
            c.head = no;
        if (rc)
            return rc;
        c.tail = no;
    }
    c.done = c.old_next == NULL;
    rc = txn_write(tx, scratch, 0, &c, sizeof c);
    return rc ? rc : c.done ? 0 : TXN_MIGRATE_MORE;
}

static int conv_finish(txn_migrate *m, txn *tx, txn_obj *scratch, void *arg)
{
    (void)m;
    (void)arg;
    struct conv c;
    int rc = txn_read(tx, scratch, 0, &c, sizeof c);
    return rc ? rc : txn_write(tx, sim_part(tx, txn_pool_of(tx), 0), 0, &c.head, sizeof c.head);
}

struct mg_node1 {
    uint32_t fmt, key;
    txn_obj *next;
};
struct mg_node2 {
    uint32_t fmt, pad;
    uint64_t key;
    txn_obj *next;
};
struct mg_node3 {
    uint32_t fmt, pad;
    uint64_t key;
    txn_obj *next;
    uint64_t check;
};
static const txn_type mg_t1[] = {TXN_TYPE(struct mg_node1, TXN_FIELD(struct mg_node1, key),
                                          TXN_FIELD(struct mg_node1, next))};
static const txn_type mg_t2[] = {TXN_TYPE(struct mg_node2, TXN_FIELD(struct mg_node2, key),
                                          TXN_FIELD(struct mg_node2, next))};
static const txn_type mg_t3[] = {TXN_TYPE(struct mg_node3, TXN_FIELD(struct mg_node3, key),
                                          TXN_FIELD(struct mg_node3, next),
                                          TXN_FIELD(struct mg_node3, check))};
static const uint32_t to2 = 2, to3 = 3;
static const txn_migration mg_steps_all[] = {
    {1, sizeof(struct conv), conv_step, conv_finish, (void *)&to2},
    {2, sizeof(struct conv), conv_step, conv_finish, (void *)&to3},
};
static const txn_layout mg_layouts[4] = {
    {0},
    {"crashsim", 1, mg_t1, 1, NULL, 0, 3},
    {"crashsim", 2, mg_t2, 1, mg_steps_all, 1, 3},
    {"crashsim", 3, mg_t3, 1, mg_steps_all, 2, 3},
};

static int mg_setup(txn_pool *p, int t)
{
    txn *tx;
    txn_obj *head = NULL;
    int rc = txn_layout_apply(p, &mg_layouts[1]);
    if (rc)
        return rc;
    mg_ver = 1;
    mg_steps = 0;
    mg_len = MG_INIT;
    TRY(txn_begin(p, &tx));
    for (unsigned i = MG_INIT; i-- > 0;) {
        struct gnode g = {1, 1000 + i, head};
        unsigned char b[32];
        size_t n = encode(&g, b);
        mg_key[i] = 1000 + i;
        TRY(txn_alloc(tx, n, &head));
        TRY(txn_write(tx, head, 0, b, n));
    }
    TRY(txn_write(tx, sim_part(tx, p, t), 0, &head, sizeof head));
    return sim_commit(tx, t, mg_mirror(t));
}

static int mg_nth(txn *tx, txn_pool *p, unsigned i, txn_obj **out)
{
    txn_obj *o;
    int rc = txn_read(tx, sim_part(tx, p, 0), 0, &o, sizeof o);
    while (!rc && i--)
        rc = txn_read(tx, o, next_off(mg_ver), &o, sizeof o);
    *out = o;
    return rc;
}

static int mg_step(txn_pool *p, int t, uint64_t *rng)
{
    txn *tx;
    uint32_t key[MG_MAX];
    unsigned len = mg_len;
    unsigned s = mg_steps++;
    if (s == MG_TO2 || s == MG_TO3) { /* the new program */
        int rc = txn_layout_apply(p, &mg_layouts[mg_ver + 1]);
        if (!rc)
            mg_ver++;
        return rc;
    }
    memcpy(key, mg_key, sizeof key);
    TRY(txn_begin(p, &tx));
    unsigned ops = 1 + (unsigned)(sim_rand(rng) % 3);
    for (unsigned k = 0; k < ops; k++) {
        unsigned op = (unsigned)(sim_rand(rng) % 3);
        txn_obj *o, *part = sim_part(tx, p, t);
        struct gnode g;
        unsigned char b[32];
        if (op == 0 && len < MG_MAX) { /* push */
            g = (struct gnode){mg_ver, (uint32_t)sim_rand(rng), NULL};
            TRY(txn_read(tx, part, 0, &g.next, sizeof g.next));
            size_t n = encode(&g, b);
            TRY(txn_alloc(tx, n, &o));
            TRY(txn_write(tx, o, 0, b, n));
            TRY(txn_write(tx, part, 0, &o, sizeof o));
            memmove(key + 1, key, len * sizeof *key);
            key[0] = (uint32_t)g.key;
            len++;
        } else if (op == 1 && len > MG_MIN) { /* pop */
            TRY(mg_nth(tx, p, 0, &o));
            if (decode(tx, p, o, mg_ver, &g))
                TRY(TXN_E_CORRUPT);
            TRY(txn_write(tx, part, 0, &g.next, sizeof g.next));
            TRY(txn_free(tx, o));
            len--;
            memmove(key, key + 1, len * sizeof *key);
        } else { /* rewrite a key */
            unsigned i = (unsigned)(sim_rand(rng) % len);
            TRY(mg_nth(tx, p, i, &o));
            if (decode(tx, p, o, mg_ver, &g))
                TRY(TXN_E_CORRUPT);
            g.key = key[i] = (uint32_t)sim_rand(rng);
            size_t n = encode(&g, b);
            TRY(txn_write(tx, o, 0, b, n));
        }
    }
    int done, rc = sim_finish(tx, t, rng, mg_digest_of(key, len), &done);
    if (done) {
        memcpy(mg_key, key, sizeof key);
        mg_len = len;
    }
    return rc;
}

/* Walks the list; every node must have the recorded version's format. */
static int mg_walk(txn_pool *p, uint32_t want, uint64_t *digest, struct reach *r)
{
    uint32_t v = 0, key[MG_MAX];
    unsigned n = 0;
    txn *tx;
    txn_obj *o;
    if (txn_layout_version(p, &v) || v < 1 || v > 3 || (want && v != want))
        return 1;
    TRY(txn_begin(p, &tx));
    TRY(txn_read(tx, sim_part(tx, p, 0), 0, &o, sizeof o));
    for (; o; n++) {
        struct gnode g;
        if (n == MG_MAX || decode(tx, p, o, v, &g) || (r && reach_add(r, o))) {
            txn_abort(tx);
            return 1;
        }
        key[n] = (uint32_t)g.key;
        o = g.next;
    }
    txn_abort(tx);
    *digest = mg_digest_of(key, n);
    return 0;
}

static int mg_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    uint32_t v;
    uint64_t d1, d2;
    (void)t;
    if (mg_walk(p, 0, digest, NULL) || txn_layout_version(p, &v))
        return 1;
    if (v != mg_view_ver) {
        fprintf(stderr, "  recovery gave version %u, the view %u\n", v, mg_view_ver);
        return 1;
    }
    /* the program of the recorded version opens it (dropping a half-built
     * newer version), then the newest (resuming or starting migrations) */
    if (v < 3 && (txn_layout_apply(p, &mg_layouts[v]) || mg_walk(p, v, &d1, NULL) ||
                  d1 != *digest))
        return 1;
    if (txn_layout_apply(p, &mg_layouts[3]) || mg_walk(p, 3, &d2, r))
        return 1;
    return d2 != *digest;
}

const struct workload wl_migrate = {"migrate", 2u << 20, 16, mg_setup, mg_step, mg_mirror,
                                    mg_read, WL_BY_NAME | WL_ONE_THREAD, NULL};

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    if (f && !fseek(f, 0, SEEK_END) && (*n = (size_t)ftell(f)) && (b = malloc(*n))) {
        rewind(f);
        if (fread(b, 1, *n, f) != *n) {
            free(b);
            b = NULL;
        }
    }
    if (f)
        fclose(f);
    return b;
}

/* The refusals of txn_layout_open, decided on a private view before the
 * open (layout_verdict), agree with the version recovery leaves: each
 * program older than it is refused, the others (which drop, resume or
 * start migrations) are not, a version 4 without migrations always is;
 * and none of these writes a byte of the image. */
int sim_file_check(const struct workload *w, const char *path)
{
    static const txn_layout v4 = {"crashsim", 4, mg_t3, 1, NULL, 0, 3};
    if (w != &wl_migrate)
        return 0;
    mg_view_ver = UINT32_MAX;
    size_t n0 = 0, n1 = 0;
    unsigned char *b0 = slurp(path, &n0), *b1 = NULL;
    txn_pool *p;
    uint32_t v = 4;
    int bad = !b0 || txn_pool_view(path, "crashsim", &p);
    if (!bad) {
        bad = txn_layout_version(p, &v) || v > 3;
        txn_pool_close(p);
        mg_view_ver = v;
    }
    for (uint32_t k = 1; !bad && k <= 4; k++) {
        int want = (k < v || k == 4) && v ? TXN_E_LAYOUTVER : 0;
        int rc = layout_verdict(path, k < 4 ? &mg_layouts[k] : &v4);
        if (rc != want) {
            fprintf(stderr, "  pool at version %u, program version %u: %s, expected %s\n", v, k,
                    txn_strerror(rc), txn_strerror(want));
            bad = 1;
        }
    }
    if (!bad && (!(b1 = slurp(path, &n1)) || n1 != n0 || memcmp(b0, b1, n0))) {
        fprintf(stderr, "  a verdict wrote the image\n");
        bad = 1;
    } else if (bad && v > 3) {
        fprintf(stderr, "  the view of the image has no layout version\n");
    }
    free(b0);
    free(b1);
    return bad;
}

/* ---- extend */

enum { EX_INIT = 12, EX_MAX = 24, EX_MIN = 3 };

struct ex_node {
    uint64_t key;
    txn_obj *next;
    TXN_EXTENDIBLE;
};
struct ex_lvl1 {
    uint64_t key2;
    TXN_EXTENDIBLE;
};
struct ex_lvl2 {
    uint64_t tag;
    uint64_t more[5]; /* a block of another size class */
    TXN_EXTENDIBLE;
};

static int lvl1_init(txn *tx, txn_obj *o, void *ext)
{
    struct ex_lvl1 *e = ext;
    uint64_t k;
    int rc = txn_read(tx, o, offsetof(struct ex_node, key), &k, sizeof k);
    e->key2 = k * 3 + 1;
    return rc;
}

static const txn_ext_type ex_type = TXN_EXT_TYPE(
    struct ex_node, TXN_EXT_LEVEL(struct ex_lvl1, lvl1_init), TXN_EXT_LEVEL(struct ex_lvl2, NULL));

/* the mirror: per node its key, its levels, key2 and tag */
struct ex_m {
    uint64_t key, lvl, key2, tag;
};
static struct ex_m ex_m[SIM_THREADS][EX_MAX];
static unsigned ex_len[SIM_THREADS];

static uint64_t ex_digest_of(const struct ex_m *m, unsigned len)
{
    uint64_t h = sim_hash(7, &len, sizeof len);
    for (unsigned i = 0; i < len; i++)
        h = sim_hash(h, &m[i], sizeof m[i]);
    return h;
}

static uint64_t ex_mirror(int t)
{
    return ex_digest_of(ex_m[t], ex_len[t]);
}

static int ex_setup(txn_pool *p, int t)
{
    txn *tx;
    txn_obj *head = NULL;
    ex_len[t] = EX_INIT;
    TRY(txn_begin(p, &tx));
    for (unsigned i = EX_INIT; i-- > 0;) {
        struct ex_node nd = {100 * (uint64_t)t + i, head, NULL};
        ex_m[t][i] = (struct ex_m){nd.key, 0, 0, 0};
        TRY(txn_alloc(tx, sizeof nd, &head));
        TRY(txn_write(tx, head, 0, &nd, sizeof nd));
    }
    TRY(txn_write(tx, sim_part(tx, p, t), 0, &head, sizeof head));
    return sim_commit(tx, t, ex_mirror(t));
}

/* the link that points at node i: the part's head or node i-1's next */
static int ex_at(txn *tx, txn_pool *p, int t, unsigned i, txn_obj **holder, size_t *off,
                 txn_obj **node)
{
    *holder = sim_part(tx, p, t);
    *off = 0;
    int rc = txn_read(tx, *holder, 0, node, sizeof *node);
    while (!rc && i--) {
        *holder = *node;
        *off = offsetof(struct ex_node, next);
        rc = txn_read(tx, *node, *off, node, sizeof *node);
    }
    return rc;
}

static int ex_op(txn *tx, txn_pool *p, int t, uint64_t *rng, struct ex_m *m, unsigned *len)
{
    unsigned op = (unsigned)(sim_rand(rng) % 6), i = (unsigned)(sim_rand(rng) % *len);
    txn_obj *holder, *o, *c;
    size_t off;
    int rc = ex_at(tx, p, t, i, &holder, &off, &o);
    if (rc)
        return rc;
    if (op == 0) { /* read level 1: made at first access */
        uint64_t k2;
        if ((rc = txn_ext_read(tx, &ex_type, o, 1, 0, &k2, 8)))
            return rc;
        if (k2 != (m[i].lvl ? m[i].key2 : m[i].key * 3 + 1))
            return TXN_E_CORRUPT;
        m[i].key2 = k2;
        m[i].lvl = m[i].lvl ? m[i].lvl : 1;
    } else if (op == 1) { /* write level 1 (odd nodes: with the link read first) */
        m[i].key2 = sim_rand(rng);
        txn_obj *link = NULL;
        if (i % 2 && (rc = txn_read(tx, o, offsetof(struct ex_node, txn_ext_link_), &link,
                                    sizeof link)))
            return rc;
        rc = i % 2 ? txn_ext_write_known(tx, &ex_type, o, link, 1, 0, &m[i].key2, 8)
                   : txn_ext_write(tx, &ex_type, o, 1, 0, &m[i].key2, 8);
        m[i].lvl = m[i].lvl ? m[i].lvl : 1;
    } else if (op == 2) { /* write level 2: both levels made */
        if (!m[i].lvl)
            m[i].key2 = m[i].key * 3 + 1;
        m[i].tag = sim_rand(rng);
        rc = txn_ext_write(tx, &ex_type, o, 2, 0, &m[i].tag, 8);
        m[i].lvl = 2;
    } else if (op == 3 && *len < EX_MAX) { /* push before node i (odd keys: born
                                               extended, both levels zeroed) */
        struct ex_node nd = {sim_rand(rng), o, NULL};
        int born = nd.key & 1;
        if (born ? (rc = txn_ext_alloc(tx, &ex_type, &c)) ||
                       (rc = txn_write(tx, c, 0, &nd, offsetof(struct ex_node, txn_ext_link_)))
                 : (rc = txn_alloc(tx, sizeof nd, &c)) ||
                       (rc = txn_write(tx, c, 0, &nd, sizeof nd)))
            return rc;
        rc = txn_write(tx, holder, off, &c, sizeof c);
        memmove(m + i + 1, m + i, (*len - i) * sizeof *m);
        m[i] = (struct ex_m){nd.key, born ? 2 : 0, 0, 0};
        (*len)++;
    } else if (op == 4 && *len > EX_MIN) { /* unlink and free node i */
        struct ex_node nd; /* next and the link in one read (odd nodes use it) */
        if ((rc = txn_read(tx, o, 0, &nd, sizeof nd)) ||
            (rc = txn_write(tx, holder, off, &nd.next, sizeof nd.next)))
            return rc;
        rc = i % 2 ? txn_ext_free_known(tx, &ex_type, o, nd.txn_ext_link_)
                   : txn_ext_free(tx, &ex_type, o);
        (*len)--;
        memmove(m + i, m + i + 1, (*len - i) * sizeof *m);
    } else if (op == 5) { /* replace node i by a deep copy */
        if ((rc = txn_ext_copy(tx, &ex_type, o, &c)) ||
            (rc = txn_write(tx, holder, off, &c, sizeof c)))
            return rc;
        rc = txn_ext_free(tx, &ex_type, o);
    }
    return rc;
}

static int ex_step(txn_pool *p, int t, uint64_t *rng)
{
    txn *tx;
    struct ex_m m[EX_MAX];
    unsigned len = ex_len[t];
    memcpy(m, ex_m[t], sizeof m);
    TRY(txn_begin(p, &tx));
    unsigned ops = 1 + (unsigned)(sim_rand(rng) % 3);
    for (unsigned k = 0; k < ops; k++)
        TRY(ex_op(tx, p, t, rng, m, &len));
    int done, rc = sim_finish(tx, t, rng, ex_digest_of(m, len), &done);
    if (done) {
        memcpy(ex_m[t], m, sizeof m);
        ex_len[t] = len;
    }
    return rc;
}

static int ex_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    txn *tx;
    txn_obj *o;
    struct ex_m m[EX_MAX];
    unsigned n = 0;
    TRY(txn_begin(p, &tx));
    TRY(txn_read(tx, sim_part(tx, p, t), 0, &o, sizeof o));
    for (; o; n++) {
        struct ex_node nd;
        struct ex_lvl1 e1;
        struct ex_lvl2 e2;
        if (n == EX_MAX || txn_obj_size(p, o) < sizeof nd || reach_add(r, o))
            TRY(1);
        TRY(txn_read(tx, o, 0, &nd, sizeof nd));
        m[n] = (struct ex_m){nd.key, 0, 0, 0};
        if (nd.txn_ext_link_ == TXN_EXT_INLINE) { /* born extended: both levels in o */
            size_t at1 = txn_ext_inline_off(&ex_type, 1), at2 = txn_ext_inline_off(&ex_type, 2);
            if (txn_obj_size(p, o) < at2 + sizeof e2)
                TRY(1);
            TRY(txn_read(tx, o, at1, &e1, sizeof e1));
            TRY(txn_read(tx, o, at2, &e2, sizeof e2));
            if (e1.txn_ext_link_ != TXN_EXT_INLINE || e2.txn_ext_link_)
                TRY(1);
            m[n] = (struct ex_m){nd.key, 2, e1.key2, e2.tag};
        } else if (nd.txn_ext_link_) {
            if (txn_obj_size(p, nd.txn_ext_link_) < sizeof e1 || reach_add(r, nd.txn_ext_link_))
                TRY(1);
            TRY(txn_read(tx, nd.txn_ext_link_, 0, &e1, sizeof e1));
            m[n].lvl = 1;
            m[n].key2 = e1.key2;
            if (e1.txn_ext_link_) {
                if (txn_obj_size(p, e1.txn_ext_link_) < sizeof e2 ||
                    reach_add(r, e1.txn_ext_link_))
                    TRY(1);
                TRY(txn_read(tx, e1.txn_ext_link_, 0, &e2, sizeof e2));
                if (e2.txn_ext_link_) /* no level 3 exists */
                    TRY(1);
                m[n].lvl = 2;
                m[n].tag = e2.tag;
            }
        }
        o = nd.next;
    }
    txn_abort(tx);
    *digest = ex_digest_of(m, n);
    return 0;
}

const struct workload wl_extend = {"extend", 2u << 20, 16, ex_setup, ex_step, ex_mirror,
                                   ex_read, WL_BY_NAME, NULL};
