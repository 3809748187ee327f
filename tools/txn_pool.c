/* txn_pool.c - the pool tool, like PMDK's pmempool: what a pool file
 * holds (info) and whether it is consistent (check), read without writing
 * a byte (txn_pool_inspect, then a view for the layout record).
 *
 * Built once per engine as txn-pool-<engine>, and as txn-pool on one of
 * them; each runs the binary of the engine that wrote the pool when that
 * is not its own, so any of them takes any pool.
 *
 *   txn-pool info [--json] FILE    exit 0, or 2 when it cannot be read
 *   txn-pool check FILE            exit 0 consistent, 1 needs recovery,
 *                                  2 damaged, not a pool, or unreadable
 *                                  (a line says what)
 *   txn-pool shrink FILE           the pool's free space given back to the
 *                                  filesystem (the pool opened and
 *                                  recovered, then txn_pool_trim): exit 0,
 *                                  or 2 (a line says why)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txn.h"
#include "txn_layout.h"

enum { EXIT_OK = 0, EXIT_RECOVER = 1, EXIT_DAMAGED = 2, EXIT_USAGE = 64 };

/* What the tool found: the pool's description and its layout record. */
struct found {
    const char *path;
    int verdict; /* txn_pool_inspect's */
    txn_pool_info info;
    int layout_rc; /* txn_layout_inspect's, when the pool could be viewed */
    txn_layout_info layout;
    char layout_msg[320];
};

static const char *state_name(const struct found *f)
{
    switch (f->verdict) {
    case 0:
        return "consistent";
    case TXN_INSPECT_RECOVER:
        return "needs recovery";
    case TXN_E_CORRUPT:
    case TXN_E_TRUNC:
        return "damaged";
    case TXN_E_NOTPOOL:
        return "not a pool";
    case TXN_E_VERSION:
        return "unsupported format";
    case TXN_E_ENGINE:
        return "another engine's pool";
    default:
        return "cannot be read";
    }
}

/* The pool is another engine's: run that engine's tool on it instead
 * (once: a tool that is run so never hands on again). Returns only when
 * it cannot. */
static void hand_on(const struct found *f, char **argv)
{
    char self[PATH_MAX], tool[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || getenv("TXN_POOL_TOOL_HANDED") || !f->info.engine[0] ||
        !strcmp(f->info.engine, txn_engine_name()))
        return;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    snprintf(tool, sizeof tool, "%s/txn-pool-%s", self, f->info.engine);
    setenv("TXN_POOL_TOOL_HANDED", "1", 1);
    execv(tool, argv);
    fprintf(stderr, "txn-pool: %s: written by engine '%s', whose tool %s cannot run: %s\n",
            f->path, f->info.engine, tool, strerror(errno));
    exit(EXIT_DAMAGED);
}

/* The layout record, on a view: nothing written even in memory's file. */
static void read_layout(struct found *f)
{
    txn_pool *p;
    f->layout_rc = txn_pool_view(f->path, f->info.layout, &p);
    if (f->layout_rc) {
        snprintf(f->layout_msg, sizeof f->layout_msg, "%s", txn_strerror(f->layout_rc));
        return;
    }
    f->layout_rc = txn_layout_inspect(p, &f->layout);
    snprintf(f->layout_msg, sizeof f->layout_msg, "%s",
             f->layout_rc ? (*txn_layout_error() ? txn_layout_error()
                                                 : txn_strerror(f->layout_rc))
                          : "");
    txn_pool_close(p);
    if (f->layout_rc && f->verdict >= 0) { /* the record is damaged */
        f->verdict = f->layout_rc;
        snprintf(f->info.problem, sizeof f->info.problem, "%.255s", f->layout_msg);
    }
}

static void find(struct found *f, const char *path, char **argv)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    f->verdict = txn_pool_inspect(path, &f->info);
    if (f->verdict == TXN_E_ENGINE)
        hand_on(f, argv);
    if (f->verdict >= 0)
        read_layout(f);
    /* a file that cannot be read: the cause first, for the problem text
     * may be just the file's name (a missing file: "pool file does not
     * exist: PATH") */
    const char *cause = txn_strerror(f->verdict);
    if (f->verdict < 0 && !strcmp(state_name(f), "cannot be read") &&
        strncmp(f->info.problem, cause, strlen(cause))) {
        char was[sizeof f->info.problem];
        snprintf(was, sizeof was, "%s", f->info.problem);
        snprintf(f->info.problem, sizeof f->info.problem, "%.100s%s%.150s", cause,
                 *was ? ": " : "", was);
    }
}

static void print_bytes(const char *label, uint64_t n)
{
    printf("%-12s %" PRIu64 " bytes (%.1f MiB)\n", label, n, (double)n / (1 << 20));
}

static void print_text(const struct found *f)
{
    const txn_pool_info *i = &f->info;
    printf("%-12s %s\n", "file", f->path);
    if (i->format[0])
        printf("%-12s %s, version %u\n", "format", i->format, i->format_version);
    if (i->engine[0])
        printf("%-12s %s\n", "engine", i->engine);
    if (i->layout[0]) {
        printf("%-12s %s", "layout", i->layout);
        if (f->verdict >= 0 && !f->layout_rc && f->layout.version)
            printf(", version %u, %" PRIu64 " type signatures", f->layout.version,
                   f->layout.types);
        else if (f->verdict >= 0 && !f->layout_rc)
            printf(", no layout version recorded");
        if (f->verdict >= 0 && !f->layout_rc && f->layout.target)
            printf(", migrating to version %u (%s)", f->layout.target,
                   f->layout.cleaning ? "cleaning up" : "building");
        printf("\n");
    }
    if (i->size)
        print_bytes("size", i->size);
    if (i->max_size > i->size)
        print_bytes("  max", i->max_size);
    if (f->verdict >= 0) {
        print_bytes("heap", i->heap_size);
        print_bytes("  used", i->heap_used);
        print_bytes("  free", i->heap_free);
        if (!strcmp(i->format, "pmtx")) {
            print_bytes("    chunks", i->free_chunks);
            print_bytes("    extent", i->free_extent);
        }
        if (i->heap_logs)
            print_bytes("  logs", i->heap_logs);
        printf("%-12s %" PRIu64 "\n", "objects", i->objects);
        for (unsigned c = 0; c < i->nclasses; c++) {
            printf("  %-10" PRIu64 " %" PRIu64, i->classes[c].size, i->classes[c].count);
            if (i->classes[c].free)
                printf(", %" PRIu64 " bytes free", i->classes[c].free);
            printf("\n");
        }
        printf("%-12s %u", "log slots", i->slots);
        if (!strcmp(i->format, "pmtx"))
            printf(", %u used, %u with a log the next open settles", i->slots_used,
                   i->slots_pending);
        printf("\n");
        if (!strcmp(i->format, "pmtx"))
            printf("%-12s %" PRIu64 " since creation\n", "opens", i->opens);
    }
    printf("%-12s %s%s%s\n", "state", state_name(f), i->problem[0] ? ": " : "", i->problem);
}

static void json_str(const char *key, const char *s)
{
    printf("\"%s\":\"", key);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    printf("\",");
}

static void print_json(const struct found *f)
{
    const txn_pool_info *i = &f->info;
    printf("{");
    json_str("file", f->path);
    json_str("state", state_name(f));
    json_str("problem", i->problem);
    json_str("format", i->format);
    printf("\"format_version\":%u,", i->format_version);
    json_str("engine", i->engine);
    json_str("layout", i->layout);
    if (f->verdict >= 0 && !f->layout_rc)
        printf("\"layout_version\":%u,\"layout_types\":%" PRIu64 ",\"migration_target\":%u,",
               f->layout.version, f->layout.types, f->layout.target);
    printf("\"size\":%" PRIu64 ",\"max_size\":%" PRIu64 ",\"heap_size\":%" PRIu64
           ",\"heap_used\":%" PRIu64
           ",\"heap_free\":%" PRIu64 ",\"heap_logs\":%" PRIu64 ",\"free_chunks\":%" PRIu64
           ",\"free_extent\":%" PRIu64 ",\"objects\":%" PRIu64 ",",
           i->size, i->max_size, i->heap_size, i->heap_used, i->heap_free, i->heap_logs, i->free_chunks,
           i->free_extent, i->objects);
    printf("\"classes\":[");
    for (unsigned c = 0; c < i->nclasses; c++)
        printf("%s{\"size\":%" PRIu64 ",\"count\":%" PRIu64 ",\"free\":%" PRIu64 "}",
               c ? "," : "", i->classes[c].size, i->classes[c].count, i->classes[c].free);
    printf("],\"slots\":%u,\"slots_used\":%u,\"slots_pending\":%u,\"opens\":%" PRIu64 "}\n",
           i->slots, i->slots_used, i->slots_pending, i->opens);
}

static int exit_code(const struct found *f)
{
    return f->verdict == 0 ? EXIT_OK : f->verdict == TXN_INSPECT_RECOVER ? EXIT_RECOVER
                                                                         : EXIT_DAMAGED;
}

/* Open (recover), trim, close: what came back. */
static int shrink(const char *path, char **argv)
{
    struct found f;
    memset(&f, 0, sizeof f);
    f.path = path;
    int rc = txn_pool_inspect(path, &f.info);
    if (rc == TXN_E_ENGINE)
        hand_on(&f, argv);
    txn_pool *p = NULL;
    size_t back = 0;
    if ((rc >= 0 && (rc = txn_pool_open(path, f.info.layout, &p)) == 0)) {
        rc = txn_pool_trim(p, &back);
        txn_pool_close(p);
    }
    if (rc) {
        fprintf(stderr, "txn-pool: %s: %s\n", path,
                rc == TXN_E_NOTSUP ? "nothing can be given back (a pmdk pool, or a filesystem "
                                     "that punches no holes)"
                                   : txn_pool_strerror(rc));
        return EXIT_DAMAGED;
    }
    printf("%s: %zu bytes given back to the filesystem\n", path, back);
    return EXIT_OK;
}

static int usage(void)
{
    fputs("usage: txn-pool info [--json] FILE   what a pool file holds\n"
          "       txn-pool check FILE           0 consistent, 1 needs recovery, 2 damaged\n"
          "       txn-pool shrink FILE          give its free space back to the filesystem\n"
          "A relative FILE is taken under $TXN_POOL_DIR (default /dev/shm). Only shrink\n"
          "writes to the file (it opens the pool, which recovers it, then trims it).\n",
          stderr);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage();
        return 0;
    }
    int json = argc == 4 && !strcmp(argv[2], "--json");
    if (argc < 3 || argc > 4 || (argc == 4 && !json))
        return usage();
    const char *path = argv[argc - 1];
    struct found f;
    if (!strcmp(argv[1], "info")) {
        find(&f, path, argv);
        if (json)
            print_json(&f);
        else
            print_text(&f);
        return f.verdict < 0 ? EXIT_DAMAGED : EXIT_OK;
    }
    if (!strcmp(argv[1], "shrink") && !json)
        return shrink(path, argv);
    if (!strcmp(argv[1], "check") && !json) {
        find(&f, path, argv);
        printf("%s: %s%s%s\n", path, state_name(&f), f.info.problem[0] ? ": " : "",
               f.info.problem);
        return exit_code(&f);
    }
    return usage();
}
