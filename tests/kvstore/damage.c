/* damage FILE SEED N [FROM [TO]] - flip N bytes of FILE, each in a 4 KiB
 * page of [FROM, TO) (default: the whole file) that holds something (not
 * all zero): damage where a store keeps its data, drawn reproducibly from
 * SEED. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: damage FILE SEED N [FROM [TO]]\n");
        return 2;
    }
    uint64_t seed = strtoull(argv[2], NULL, 0) * 0x9e3779b97f4a7c15ull + 1;
    long n = atol(argv[3]);
    size_t from = argc > 4 ? strtoull(argv[4], NULL, 0) : 0;
    int fd = open(argv[1], O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        perror(argv[1]);
        return 1;
    }
    size_t size = (size_t)st.st_size, pages = 0;
    size_t to = argc > 5 ? strtoull(argv[5], NULL, 0) : size;
    if (to > size)
        to = size;
    uint8_t *b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (b == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    size_t *used = malloc((size / 4096 + 1) * sizeof *used);
    for (size_t pg = from / 4096; used && pg < (to + 4095) / 4096; pg++)
        for (size_t i = 0; i < 4096; i += 8)
            if (*(uint64_t *)(b + pg * 4096 + i)) {
                used[pages++] = pg;
                break;
            }
    if (!pages) {
        fprintf(stderr, "%s: nothing past %zu to damage\n", argv[1], from);
        return 1;
    }
    for (long k = 0; k < n; k++) {
        size_t lo = used[next(&seed) % pages] * 4096, hi = lo + 4096;
        lo = lo < from ? from : lo;
        hi = hi > to ? to : hi;
        size_t at = lo + next(&seed) % (hi - lo);
        b[at] ^= (uint8_t)(1 + next(&seed) % 255);
    }
    munmap(b, size);
    free(used);
    close(fd);
    return 0;
}
