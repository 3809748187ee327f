/* zfloor_sl.h - a skip list with spans and an open-addressing hash of its
 * members, the shape of Redis's sorted set, written once for zfloor.c and
 * included twice: over DRAM and over a pool through txn.h. Before each
 * inclusion zfloor.c defines
 *   SL(name)       the prefix of this copy's functions
 *   SLCTX          its context type
 *   RD(c, h, off)  the word at byte off of node h
 *   WR(c, h, off, v)  store a word
 *   MEM(c, h, buf) the member's MLEN bytes of node h (into buf, or in place)
 *   NEWNODE(c, levels)  a zeroed node of that many levels, or 0
 * and this file undefines them at its end.
 * A handle is a uint64_t (an address in DRAM, a txn_obj * in the pool),
 * 0 none. Members are MLEN bytes, compared as bytes; the order is (score,
 * member), Redis's. */

#ifndef ZFLOOR_SL_LAYOUT /* the layout once, the functions at each inclusion */
#define ZFLOOR_SL_LAYOUT
/* A node: score, backward, level, member, then per level (forward, span). */
enum { N_SCORE = 0, N_BACK = 8, N_LEVEL = 16, N_MEMBER = 24, N_LEVELS = 48, N_STEP = 16 };
#define N_FWD(i) ((size_t)N_LEVELS + N_STEP * (size_t)(i))
#define N_SPAN(i) (N_FWD(i) + 8)
/* The list's own words (its meta node): header node, tail, length, level,
 * hash table, its mask. */
enum { L_HEAD = 0, L_TAIL = 8, L_LEN = 16, L_LEVEL = 24, L_TABLE = 32, L_MASK = 40, L_SIZE = 48 };
#endif

static inline double SL(score)(SLCTX *c, uint64_t h)
{
    uint64_t w = RD(c, h, N_SCORE);
    double d;
    memcpy(&d, &w, sizeof d);
    return d;
}

static inline void SL(set_score)(SLCTX *c, uint64_t h, double d)
{
    uint64_t w;
    memcpy(&w, &d, sizeof w);
    WR(c, h, N_SCORE, w);
}

/* (s, m) before node h's (score, member)? */
static inline int SL(before)(SLCTX *c, double s, const char *m, uint64_t h)
{
    double hs = SL(score)(c, h);
    char buf[MLEN];
    return s < hs || (s == hs && memcmp(m, MEM(c, h, buf), MLEN) < 0);
}

/* Is node h's (score, member) before (s, m)? */
static inline int SL(after)(SLCTX *c, uint64_t h, double s, const char *m)
{
    double hs = SL(score)(c, h);
    char buf[MLEN];
    return hs < s || (hs == s && memcmp(MEM(c, h, buf), m, MLEN) < 0);
}

/* The bucket of member m: its hash table slot (holding the member's
 * node) or the empty slot it would take. */
static uint64_t SL(slot)(SLCTX *c, uint64_t l, const char *m)
{
    uint64_t t = RD(c, l, L_TABLE), mask = RD(c, l, L_MASK);
    uint64_t i = mhash(m) & mask;
    char buf[MLEN];
    for (;; i = (i + 1) & mask) {
        uint64_t h = RD(c, t, 8 * i);
        if (!h || !memcmp(MEM(c, h, buf), m, MLEN))
            return i;
    }
}

static uint64_t SL(find)(SLCTX *c, uint64_t l, const char *m)
{
    return RD(c, RD(c, l, L_TABLE), 8 * SL(slot)(c, l, m));
}

/* Link node x, of `lv` levels, holding (s, m) already, in order. */
static void SL(link)(SLCTX *c, uint64_t l, uint64_t x, unsigned lv, double s, const char *m)
{
    uint64_t update[SL_MAX], rank[SL_MAX];
    uint64_t head = RD(c, l, L_HEAD), level = RD(c, l, L_LEVEL), len = RD(c, l, L_LEN);
    uint64_t p = head;
    for (int i = (int)level - 1; i >= 0; i--) {
        rank[i] = i == (int)level - 1 ? 0 : rank[i + 1];
        for (uint64_t f; (f = RD(c, p, N_FWD(i))) && SL(after)(c, f, s, m);) {
            rank[i] += RD(c, p, N_SPAN(i));
            p = f;
        }
        update[i] = p;
    }
    if (lv > level) {
        for (unsigned i = (unsigned)level; i < lv; i++) {
            rank[i] = 0;
            update[i] = head;
            WR(c, head, N_SPAN(i), len);
        }
        WR(c, l, L_LEVEL, lv);
        level = lv;
    }
    for (unsigned i = 0; i < lv; i++) {
        WR(c, x, N_FWD(i), RD(c, update[i], N_FWD(i)));
        WR(c, update[i], N_FWD(i), x);
        uint64_t us = RD(c, update[i], N_SPAN(i));
        WR(c, x, N_SPAN(i), us - (rank[0] - rank[i]));
        WR(c, update[i], N_SPAN(i), rank[0] - rank[i] + 1);
    }
    for (unsigned i = lv; i < level; i++)
        WR(c, update[i], N_SPAN(i), RD(c, update[i], N_SPAN(i)) + 1);
    uint64_t back = update[0] == head ? 0 : update[0];
    WR(c, x, N_BACK, back);
    uint64_t next = RD(c, x, N_FWD(0));
    if (next)
        WR(c, next, N_BACK, x);
    else
        WR(c, l, L_TAIL, x);
    WR(c, l, L_LEN, len + 1);
}

/* Unlink node x holding (s, m); it keeps its level and member. */
static void SL(unlink)(SLCTX *c, uint64_t l, uint64_t x, double s, const char *m)
{
    uint64_t update[SL_MAX];
    uint64_t head = RD(c, l, L_HEAD), level = RD(c, l, L_LEVEL), p = head;
    for (int i = (int)level - 1; i >= 0; i--) {
        for (uint64_t f; (f = RD(c, p, N_FWD(i))) && SL(after)(c, f, s, m);)
            p = f;
        update[i] = p;
    }
    assert(RD(c, update[0], N_FWD(0)) == x); /* the hash and the list agree */
    for (unsigned i = 0; i < level; i++) {
        uint64_t us = RD(c, update[i], N_SPAN(i));
        if (RD(c, update[i], N_FWD(i)) == x) {
            WR(c, update[i], N_SPAN(i), us + RD(c, x, N_SPAN(i)) - 1);
            WR(c, update[i], N_FWD(i), RD(c, x, N_FWD(i)));
        } else {
            WR(c, update[i], N_SPAN(i), us - 1);
        }
    }
    uint64_t next = RD(c, x, N_FWD(0)), back = RD(c, x, N_BACK);
    if (next)
        WR(c, next, N_BACK, back);
    else
        WR(c, l, L_TAIL, back);
    while (level > 1 && !RD(c, head, N_FWD(level - 1)))
        level--;
    WR(c, l, L_LEVEL, level);
    WR(c, l, L_LEN, RD(c, l, L_LEN) - 1);
}

/* ZADD of m with score s: 1 added, 2 score changed, 3 unchanged; -1 no
 * room. A changed score stays in place when the order allows it, else
 * the node is unlinked and linked again at its new place, as Redis's
 * zslUpdateScore. */
static int SL(zadd)(SLCTX *c, uint64_t l, double s, const char *m, unsigned lv)
{
    uint64_t t = RD(c, l, L_TABLE), i = SL(slot)(c, l, m), x = RD(c, t, 8 * i);
    if (!x) {
        if (!(x = NEWNODE(c, lv)))
            return -1;
        uint64_t w[MLEN / 8];
        memcpy(w, m, MLEN);
        for (unsigned k = 0; k < MLEN / 8; k++)
            WR(c, x, N_MEMBER + 8 * k, w[k]);
        WR(c, x, N_LEVEL, lv);
        SL(set_score)(c, x, s);
        SL(link)(c, l, x, lv, s, m);
        WR(c, t, 8 * i, x);
        return 1;
    }
    double cur = SL(score)(c, x);
    if (cur == s)
        return 3;
    uint64_t back = RD(c, x, N_BACK), next = RD(c, x, N_FWD(0));
    if ((!back || SL(after)(c, back, s, m)) && (!next || SL(before)(c, s, m, next))) {
        SL(set_score)(c, x, s);
        return 2;
    }
    SL(unlink)(c, l, x, cur, m);
    SL(set_score)(c, x, s);
    SL(link)(c, l, x, (unsigned)RD(c, x, N_LEVEL), s, m);
    return 2;
}

/* Walk the list in order into out[0..len) (score, member); check that
 * the spans add up to each node's rank, the back links, the length and
 * that the hash finds every node: 0, or -1 and why on stderr. */
static int SL(dump)(SLCTX *c, uint64_t l, struct zpair *out, size_t cap)
{
    uint64_t head = RD(c, l, L_HEAD), len = RD(c, l, L_LEN), level = RD(c, l, L_LEVEL);
    size_t n = 0;
    uint64_t prev = 0;
    char buf[MLEN];
    for (uint64_t x = RD(c, head, N_FWD(0)); x; x = RD(c, x, N_FWD(0)), n++) {
        if (n >= cap || RD(c, x, N_BACK) != prev || SL(find)(c, l, MEM(c, x, buf)) != x) {
            fprintf(stderr, "zfloor: skip list: node %zu: links or hash wrong\n", n);
            return -1;
        }
        out[n].s = SL(score)(c, x);
        memcpy(out[n].m, MEM(c, x, buf), MLEN);
        prev = x;
    }
    if (n != len || RD(c, l, L_TAIL) != prev) {
        fprintf(stderr, "zfloor: skip list: %zu nodes, length %llu\n", n,
                (unsigned long long)len);
        return -1;
    }
    /* on each level the spans count the nodes they pass over */
    for (unsigned i = 0; i < level; i++) {
        uint64_t rank = 0;
        for (uint64_t p = head, f; (f = RD(c, p, N_FWD(i))); p = f) {
            rank += RD(c, p, N_SPAN(i));
            if (rank < 1 || rank > n || SL(find)(c, l, out[rank - 1].m) != f) {
                fprintf(stderr, "zfloor: skip list: level %u: span to rank %llu wrong\n", i,
                        (unsigned long long)rank);
                return -1;
            }
        }
    }
    return 0;
}

#undef SL
#undef SLCTX
#undef RD
#undef WR
#undef MEM
#undef NEWNODE
