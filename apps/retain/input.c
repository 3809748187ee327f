/* input.c - the inputs INS, DEL and RAND: the original program's keys,
 * the update program's, and how many of the latter it finds. */
#include <stdlib.h>

#include "retain.h"

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

/* RAND: the update's finds, replaying both sequences on a presence
 * bitmap. */
static size_t rand_finds(const uint32_t *orig, const uint32_t *upd, size_t n, size_t upd_n)
{
    unsigned char *in_set = calloc(n, 1);
    size_t f = 0;
    if (!in_set)
        die("input", TXN_E_NOMEM);
    for (size_t i = 0; i < n; i++)
        in_set[orig[i]] ^= 1;
    for (size_t i = 0; i < upd_n; i++) {
        f += in_set[upd[i]];
        in_set[upd[i]] ^= 1;
    }
    free(in_set);
    return f;
}

void make_input(enum input in, size_t n, uint32_t *orig, uint32_t *upd, size_t *want,
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
    if (in == RAND)
        *want = rand_finds(orig, upd, n, upd_n);
    else
        *want = in == DEL ? upd_n : 0;
}
