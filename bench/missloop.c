/* missloop: what a random access per key into a structure larger than the
 * caches costs on this host, with no pmtx code involved. A DEL of N keys
 * from a chained hash table in DRAM (nodes from malloc, a table of 2^18
 * heads, keys deleted in the order they were set, as scripts/msetbench.sh
 * does), then the same with 1 to 3 more accesses per key at addresses
 * that follow no order: an insert into an open-addressing map keyed by
 * the node's address (a transaction's list of frees), one keyed by the
 * bucket's (ranges already logged), a counter of a 32 MiB array indexed
 * by a hash of the node's address (an allocator's metadata). The maps are
 * zeroed before each round, outside the timing, as a map reused by every
 * transaction is faulted in. Prints the best of 5 rounds in ns per key.
 * docs/kvstore.md section 18b has the figures. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TABLE_BITS 18
#define ROUNDS 5

struct node {
    struct node *next;
    uint64_t hash;
    char key[24];
    char val[24];
};

struct slot {
    uint64_t key, val;
    uint32_t used;
};

static uint64_t hash_of(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void map_put(struct slot *m, size_t cap, uint64_t key, uint64_t val)
{
    size_t i = (size_t)((key >> 3) * 0x9e3779b97f4a7c15ull >> 17) & (cap - 1);
    while (m[i].used && m[i].key != key)
        i = (i + 1) & (cap - 1);
    m[i] = (struct slot){key, val, 1};
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000, cap = 16;
    if (n == 0) {
        fprintf(stderr, "usage: missloop [KEYS]\n");
        return 2;
    }
    while (cap < 4 * n)
        cap <<= 1;
    size_t meta_n = (size_t)1 << 22;
    struct node **tab = calloc((size_t)1 << TABLE_BITS, sizeof *tab);
    uint64_t *meta = calloc(meta_n, sizeof *meta);
    struct slot *frees = calloc(cap, sizeof *frees), *logged = calloc(cap, sizeof *logged);
    if (!tab || !meta || !frees || !logged) {
        fprintf(stderr, "missloop: out of memory\n");
        return 1;
    }
    char k[32];
    printf("# missloop %zu: a DEL of %zu keys, ns per key (best of %d)\n", n, n, ROUNDS);
    for (int extra = 0; extra <= 3; extra++) {
        double best = 1e30;
        for (int round = 0; round < ROUNDS; round++) {
            for (size_t i = 0; i < n; i++) {
                struct node *x = malloc(sizeof *x);
                if (!x)
                    return 1;
                int l = snprintf(k, sizeof k, "k:%zu", i);
                memcpy(x->key, k, (size_t)l + 1);
                x->hash = hash_of(k, (size_t)l);
                struct node **b = &tab[x->hash >> (64 - TABLE_BITS)];
                x->next = *b;
                *b = x;
            }
            memset(frees, 0, cap * sizeof *frees);
            memset(logged, 0, cap * sizeof *logged);
            double t0 = now();
            for (size_t i = 0; i < n; i++) {
                int l = snprintf(k, sizeof k, "k:%zu", i);
                uint64_t h = hash_of(k, (size_t)l);
                struct node **b = &tab[h >> (64 - TABLE_BITS)], **at = b;
                while (*at && ((*at)->hash != h || strcmp((*at)->key, k)))
                    at = &(*at)->next;
                struct node *x = *at;
                *at = x->next;
                uint64_t xa = (uint64_t)(uintptr_t)x;
                if (extra >= 1)
                    map_put(frees, cap, xa, i);
                if (extra >= 2)
                    map_put(logged, cap, (uint64_t)(uintptr_t)b, i);
                if (extra >= 3)
                    meta[(xa >> 6) * 0x9e3779b97f4a7c15ull >> 42 & (meta_n - 1)]++;
                free(x);
            }
            double t = (now() - t0) / (double)n * 1e9;
            best = t < best ? t : best;
        }
        printf("extra accesses %d: %4.0f ns per key\n", extra, best);
    }
    return 0;
}
