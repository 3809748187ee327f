/* workloads.c - the crash simulator's workloads: slot increments with a
 * checksum invariant (Array-like), an alloc/free-heavy linked list, and a
 * random mix of allocations, frees and partial writes. Each aborts one
 * transaction in eight. With several threads, thread `t` works on its own
 * part (sim_part) and what it reaches, and keeps its own mirror. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* ---- slots: K objects of 4 u64 and a counter of all increments */

enum { K = 24, SLOT_WORDS = 4, SL_ROOT = 8 + 8 * K };
static uint64_t sl_val[SIM_THREADS][K][SLOT_WORDS], sl_count[SIM_THREADS];
static txn_obj *sl_obj[SIM_THREADS][K];

static uint64_t slots_digest_of(uint64_t v[K][SLOT_WORDS], uint64_t count)
{
    return sim_hash(sim_hash(1, &count, 8), v, sizeof(uint64_t) * K * SLOT_WORDS);
}

static uint64_t slots_mirror(int t)
{
    return slots_digest_of(sl_val[t], sl_count[t]);
}

static int slots_setup(txn_pool *p, int t)
{
    txn *tx;
    memset(sl_val[t], 0, sizeof sl_val[t]);
    sl_count[t] = 0;
    TRY(txn_begin(p, &tx));
    txn_obj *root = sim_part(tx, p, t);
    for (int i = 0; i < K; i++) {
        TRY(txn_alloc(tx, SLOT_WORDS * 8, &sl_obj[t][i]));
        TRY(txn_write(tx, root, 8 + 8 * (size_t)i, &sl_obj[t][i], sizeof sl_obj[t][i]));
    }
    return sim_commit(tx, t, slots_mirror(t));
}

static int slots_step(txn_pool *p, int t, uint64_t *rng)
{
    txn *tx;
    uint64_t nv[K][SLOT_WORDS], count = sl_count[t];
    txn_obj **obj = sl_obj[t];
    memcpy(nv, sl_val[t], sizeof nv);
    TRY(txn_begin(p, &tx));
    unsigned m = 1 + (unsigned)(sim_rand(rng) % 6), pick[6];
    for (unsigned j = 0; j < m; j++)
        pick[j] = (unsigned)(sim_rand(rng) % K);
    /* half the transactions first open some of their slots read-write, as
     * Array does: batched logging engines log them under one fence */
    unsigned opened = sim_rand(rng) % 2 ? 1 + (unsigned)(sim_rand(rng) % m) : 0;
    for (unsigned j = 0; j < opened; j++)
        if (!txn_open(tx, obj[pick[j]], TXN_RW))
            TRY(txn_last_error(tx) ? txn_last_error(tx) : TXN_E_INVAL);
    for (unsigned j = 0; j < m; j++) {
        unsigned s = pick[j];
        uint64_t buf[SLOT_WORDS];
        if (sim_rand(rng) % 2) { /* whole slot, one write */
            TRY(txn_read(tx, obj[s], 0, buf, sizeof buf));
            for (int w = 0; w < SLOT_WORDS; w++)
                buf[w]++;
            TRY(txn_write(tx, obj[s], 0, buf, sizeof buf));
        } else { /* read-after-write, word by word */
            for (int w = 0; w < SLOT_WORDS; w++) {
                TRY(txn_read_u64(tx, obj[s], 8 * (size_t)w, &buf[w]));
                TRY(txn_write_u64(tx, obj[s], 8 * (size_t)w, buf[w] + 1));
            }
        }
        for (int w = 0; w < SLOT_WORDS; w++)
            nv[s][w]++;
        count += SLOT_WORDS;
    }
    TRY(txn_write_u64(tx, sim_part(tx, p, t), 0, count));
    int done, rc = sim_finish(tx, t, rng, slots_digest_of(nv, count), &done);
    if (done) {
        memcpy(sl_val[t], nv, sizeof nv);
        sl_count[t] = count;
    }
    return rc;
}

static int slots_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    txn *tx;
    uint64_t v[K][SLOT_WORDS], count, sum = 0;
    TRY(txn_begin(p, &tx));
    txn_obj *root = sim_part(tx, p, t);
    TRY(txn_read_u64(tx, root, 0, &count));
    for (int i = 0; i < K; i++) {
        txn_obj *o;
        TRY(txn_read(tx, root, 8 + 8 * (size_t)i, &o, sizeof o));
        if (!o || txn_obj_size(p, o) < SLOT_WORDS * 8) {
            txn_abort(tx);
            return 1;
        }
        TRY(txn_read(tx, o, 0, v[i], sizeof v[i]));
        for (int w = 0; w < SLOT_WORDS; w++)
            sum += v[i][w];
        if (reach_add(r, o))
            return 1;
    }
    txn_abort(tx);
    *digest = slots_digest_of(v, count);
    return sum != count; /* the checksum invariant */
}

const struct workload wl_slots = {"slots", 2u << 20, SL_ROOT, slots_setup, slots_step,
                                  slots_mirror, slots_read, 0, NULL};

/* ---- list: a linked list of nodes {value, next, size} of varied sizes,
 * pushed and popped at the head and rewritten in the middle */

enum { L_MAX = 40, L_ROOT = 16 };
static const size_t node_sizes[] = {24, 40, 200, 1000, 5000, 20000, 300000};
static uint64_t ls_val[SIM_THREADS][L_MAX], ls_size[SIM_THREADS][L_MAX];
static unsigned ls_len[SIM_THREADS];

static uint64_t list_digest_of(const uint64_t *val, const uint64_t *size, unsigned len)
{
    uint64_t h = sim_hash(2, &len, sizeof len);
    for (unsigned i = 0; i < len; i++) {
        h = sim_hash(h, &val[i], 8);
        h = sim_hash(h, &size[i], 8);
    }
    return h;
}

static uint64_t list_mirror(int t)
{
    return list_digest_of(ls_val[t], ls_size[t], ls_len[t]);
}

static int list_setup(txn_pool *p, int t)
{
    (void)p;
    ls_len[t] = 0;
    return 0;
}

/* the i-th node (0 = head) of thread t's list */
static int nth(txn *tx, txn_pool *p, int t, unsigned i, txn_obj **out)
{
    txn_obj *o;
    int rc = txn_read(tx, sim_part(tx, p, t), 0, &o, sizeof o);
    while (!rc && i--)
        rc = txn_read(tx, o, 8, &o, sizeof o);
    *out = o;
    return rc;
}

static int list_step(txn_pool *p, int t, uint64_t *rng)
{
    txn *tx;
    txn_obj *root, *o;
    uint64_t val[L_MAX], size[L_MAX];
    unsigned len = ls_len[t];
    memcpy(val, ls_val[t], sizeof val);
    memcpy(size, ls_size[t], sizeof size);
    TRY(txn_begin(p, &tx));
    root = sim_part(tx, p, t);
    unsigned op = (unsigned)(sim_rand(rng) % 3);
    if (len == 0 || (op == 0 && len < L_MAX)) { /* push */
        uint64_t node[3] = {sim_rand(rng), 0, 0};
        uint64_t r = sim_rand(rng) % 32;
        node[2] = node_sizes[r < 31 ? r % 6 : 6];
        TRY(txn_read(tx, root, 0, &node[1], 8));
        TRY(txn_alloc(tx, node[2], &o));
        TRY(txn_write(tx, o, 0, node, sizeof node));
        TRY(txn_write(tx, root, 0, &o, sizeof o));
        memmove(val + 1, val, len * 8);
        memmove(size + 1, size, len * 8);
        val[0] = node[0];
        size[0] = node[2];
        len++;
    } else if (op == 1) { /* pop */
        txn_obj *next;
        TRY(nth(tx, p, t, 0, &o));
        TRY(txn_read(tx, o, 8, &next, sizeof next));
        TRY(txn_write(tx, root, 0, &next, sizeof next));
        TRY(txn_free(tx, o));
        len--;
        memmove(val, val + 1, len * 8);
        memmove(size, size + 1, len * 8);
    } else { /* rewrite a value in the middle */
        unsigned i = (unsigned)(sim_rand(rng) % len);
        TRY(nth(tx, p, t, i, &o));
        val[i] = sim_rand(rng);
        TRY(txn_write_u64(tx, o, 0, val[i]));
    }
    TRY(txn_write(tx, root, 8, &len, sizeof len));
    int done, rc = sim_finish(tx, t, rng, list_digest_of(val, size, len), &done);
    if (done) {
        memcpy(ls_val[t], val, sizeof val);
        memcpy(ls_size[t], size, sizeof size);
        ls_len[t] = len;
    }
    return rc;
}

static int list_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    txn *tx;
    txn_obj *o;
    uint64_t val[L_MAX], size[L_MAX];
    unsigned len, n = 0;
    TRY(txn_begin(p, &tx));
    txn_obj *root = sim_part(tx, p, t);
    TRY(txn_read(tx, root, 8, &len, sizeof len));
    TRY(txn_read(tx, root, 0, &o, sizeof o));
    for (; o; n++) {
        uint64_t node[3];
        if (n == L_MAX || txn_obj_size(p, o) < sizeof node || reach_add(r, o)) {
            txn_abort(tx);
            return 1;
        }
        TRY(txn_read(tx, o, 0, node, sizeof node));
        if (txn_obj_size(p, o) < node[2]) {
            txn_abort(tx);
            return 1;
        }
        val[n] = node[0];
        size[n] = node[2];
        o = (txn_obj *)(uintptr_t)node[1];
    }
    txn_abort(tx);
    *digest = list_digest_of(val, size, n);
    return n != len;
}

const struct workload wl_list = {"list", 4u << 20, L_ROOT, list_setup, list_step, list_mirror,
                                 list_read, 0, NULL};

/* ---- mix: a table of objects of random sizes ({size, bytes}); each
 * transaction allocates, frees and rewrites parts of them */

enum { M_SLOTS = 16, M_MAX = 3000, M_ROOT = 8 * M_SLOTS };
static uint8_t mx_data[SIM_THREADS][M_SLOTS][M_MAX];
static size_t mx_size[SIM_THREADS][M_SLOTS]; /* 0 = empty slot */

static uint64_t mix_digest_of(uint8_t (*data)[M_MAX], const size_t *size)
{
    uint64_t h = 3;
    for (int i = 0; i < M_SLOTS; i++) {
        h = sim_hash(h, &size[i], sizeof size[i]);
        h = sim_hash(h, data[i], size[i]);
    }
    return h;
}

static uint64_t mix_mirror(int t)
{
    return mix_digest_of(mx_data[t], mx_size[t]);
}

static int mix_setup(txn_pool *p, int t)
{
    (void)p;
    memset(mx_size[t], 0, sizeof mx_size[t]);
    return 0;
}

static int mix_step(txn_pool *p, int t, uint64_t *rng)
{
    static uint8_t data_of[SIM_THREADS][M_SLOTS][M_MAX];
    uint8_t(*data)[M_MAX] = data_of[t];
    size_t size[M_SLOTS];
    txn *tx;
    memcpy(data, mx_data[t], sizeof data_of[t]);
    memcpy(size, mx_size[t], sizeof size);
    TRY(txn_begin(p, &tx));
    txn_obj *root = sim_part(tx, p, t);
    unsigned ops = 1 + (unsigned)(sim_rand(rng) % 4);
    for (unsigned k = 0; k < ops; k++) {
        unsigned s = (unsigned)(sim_rand(rng) % M_SLOTS);
        txn_obj *o;
        TRY(txn_read(tx, root, 8 * (size_t)s, &o, sizeof o));
        if (!size[s]) { /* allocate and fill */
            size[s] = 8 + sim_rand(rng) % (M_MAX - 8);
            for (size_t b = 0; b < size[s]; b++)
                data[s][b] = (uint8_t)sim_rand(rng);
            TRY(txn_alloc(tx, 8 + size[s], &o));
            TRY(txn_write_u64(tx, o, 0, size[s]));
            TRY(txn_write(tx, o, 8, data[s], size[s]));
            TRY(txn_write(tx, root, 8 * (size_t)s, &o, sizeof o));
        } else if (sim_rand(rng) % 3 == 0) { /* free */
            txn_obj *none = NULL;
            TRY(txn_free(tx, o));
            TRY(txn_write(tx, root, 8 * (size_t)s, &none, sizeof none));
            size[s] = 0;
        } else { /* rewrite a part */
            size_t at = sim_rand(rng) % size[s];
            size_t n = 1 + sim_rand(rng) % (size[s] - at);
            for (size_t b = at; b < at + n; b++)
                data[s][b] = (uint8_t)sim_rand(rng);
            TRY(txn_write(tx, o, 8 + at, data[s] + at, n));
        }
    }
    int done, rc = sim_finish(tx, t, rng, mix_digest_of(data, size), &done);
    if (done) {
        memcpy(mx_data[t], data, sizeof data_of[t]);
        memcpy(mx_size[t], size, sizeof size);
    }
    return rc;
}

static int mix_read(txn_pool *p, int t, uint64_t *digest, struct reach *r)
{
    static uint8_t data[M_SLOTS][M_MAX];
    size_t size[M_SLOTS];
    txn *tx;
    TRY(txn_begin(p, &tx));
    for (int s = 0; s < M_SLOTS; s++) {
        txn_obj *o;
        TRY(txn_read(tx, sim_part(tx, p, t), 8 * (size_t)s, &o, sizeof o));
        size[s] = 0;
        if (!o)
            continue;
        TRY(txn_read(tx, o, 0, &size[s], sizeof size[s]));
        if (!size[s] || size[s] > M_MAX || 8 + size[s] > txn_obj_size(p, o) ||
            reach_add(r, o)) {
            txn_abort(tx);
            return 1;
        }
        TRY(txn_read(tx, o, 8, data[s], size[s]));
    }
    txn_abort(tx);
    *digest = mix_digest_of(data, size);
    return 0;
}

const struct workload wl_mix = {"mix", 4u << 20, M_ROOT, mix_setup, mix_step, mix_mirror,
                                mix_read, 0, NULL};
