/* engine_includes.c - the engine contract kept free of pmtx's format
 * (issue #42, item 4): no source of an engine folder includes a header of
 * the pool format. The folders are the engines' (PMTX_ENGINE_DIRS of the
 * top CMakeLists.txt, passed as ENGINE_DIRS, ':' between them), the
 * headers every .h file of txn/format/, both read when the test runs, so
 * that an engine or a format header added later is covered too. An
 * engine reaches the format through engine.h only (docs/format.md). */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define MAX_HEADERS 64
#define LINE_MAX_LEN 4096

struct headers {
    char name[MAX_HEADERS][NAME_MAX + 1];
    size_t n;
};

static const char *src_dir(void)
{
    const char *d = getenv("PMTX_SOURCE_DIR");
    ck_assert_msg(d && *d, "PMTX_SOURCE_DIR is not set (tests/CMakeLists.txt sets it)");
    return d;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* The format's headers: every .h file of txn/format/. */
static void format_headers(struct headers *h)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/txn/format", src_dir());
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "cannot read %s", path);
    h->n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (has_suffix(e->d_name, ".h")) {
            ck_assert_msg(h->n < MAX_HEADERS, "more than %d headers in %s", MAX_HEADERS, path);
            snprintf(h->name[h->n++], sizeof h->name[0], "%s", e->d_name);
        }
    closedir(d);
    ck_assert_msg(h->n > 0, "no header in %s", path);
}

/* The header an #include line names, reduced to its last path component
 * ("../txn/format/pool.h" is pool.h); 0 if the line is no #include. */
static int included(const char *line, char *name, size_t cap)
{
    const char *s = line + strspn(line, " \t");
    if (*s++ != '#')
        return 0;
    s += strspn(s, " \t");
    if (strncmp(s, "include", 7) != 0)
        return 0;
    s += 7;
    s += strspn(s, " \t");
    char close = *s == '"' ? '"' : *s == '<' ? '>' : 0;
    if (!close)
        return 0;
    const char *start = ++s, *end = strchr(start, close);
    if (!end)
        return 0;
    for (const char *q = start; q < end; q++)
        if (*q == '/')
            start = q + 1;
    snprintf(name, cap, "%.*s", (int)(end - start), start);
    return 1;
}

/* Whether scan_file names what it finds on stderr (not for the scan's own
 * check, whose finds are planted). */
static int g_report = 1;

/* Lines of `file` that include one of h's headers, each reported. */
static int scan_file(const char *file, const struct headers *h)
{
    FILE *f = fopen(file, "r");
    ck_assert_msg(f != NULL, "cannot read %s", file);
    char line[LINE_MAX_LEN], name[NAME_MAX + 1];
    int found = 0;
    for (unsigned no = 1; fgets(line, sizeof line, f); no++) {
        if (!included(line, name, sizeof name))
            continue;
        for (size_t i = 0; i < h->n; i++)
            if (strcmp(name, h->name[i]) == 0) {
                if (g_report)
                        fprintf(stderr, "%s:%u: includes %s, a header of the pool format\n", file,
                            no, name);
                found++;
            }
    }
    fclose(f);
    return found;
}

/* Every C source or header under dir, recursively. */
static int scan_dir(const char *dir, const struct headers *h, unsigned *files)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot read %s", dir);
    int found = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ck_assert_msg(stat(path, &st) == 0, "cannot stat %s", path);
        if (S_ISDIR(st.st_mode)) {
            found += scan_dir(path, h, files);
        } else if (has_suffix(e->d_name, ".c") || has_suffix(e->d_name, ".h") ||
                   has_suffix(e->d_name, ".cc")) {
            found += scan_file(path, h);
            (*files)++;
        }
    }
    closedir(d);
    return found;
}

START_TEST(test_engines_include_no_format_header)
{
    struct headers h;
    format_headers(&h);
    const char *dirs = getenv("ENGINE_DIRS");
    ck_assert_msg(dirs && *dirs, "ENGINE_DIRS is not set (tests/CMakeLists.txt sets it)");
    char *list = strdup(dirs), *save = NULL;
    ck_assert_ptr_nonnull(list);
    int found = 0;
    unsigned folders = 0, files = 0;
    for (char *d = strtok_r(list, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", src_dir(), d);
        found += scan_dir(path, &h, &files);
        folders++;
    }
    free(list);
    printf("%u engine folders, %u files, %zu format headers: %d includes\n", folders, files,
           h.n, found);
    ck_assert_msg(files > 0, "no source file in the engine folders");
    ck_assert_msg(found == 0, "%d include(s) of the pool format's headers in engine folders "
                  "(listed above): an engine reaches the format through engine.h", found);
}
END_TEST

/* The scan itself finds an include in each form an engine might write
 * one, and passes the includes an engine may have: so that the test above
 * cannot pass by finding nothing. */
START_TEST(test_scan_finds_an_include)
{
    struct headers h;
    format_headers(&h);
    char dir[] = "/tmp/pmtx-engine-includes-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s/engine.c", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#include \"engine.h\"\n#include <stdint.h>\n/* #include \"%s\" */\n", h.name[0]);
    fclose(f);
    unsigned files = 0;
    g_report = 0;
    ck_assert_int_eq(scan_dir(dir, &h, &files), 0);
    f = fopen(file, "a");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#include \"%s\"\n  #  include <../txn/format/%s>\n", h.name[0], h.name[h.n - 1]);
    fclose(f);
    int found = scan_dir(dir, &h, &files);
    g_report = 1;
    unlink(file);
    rmdir(dir);
    ck_assert_int_eq(found, 2);
}
END_TEST

static Suite *engine_includes_suite(void)
{
    Suite *s = suite_create("engine_includes");
    TCase *tc = test_tcase(s, "engine_includes", 10);
    tcase_add_test(tc, test_scan_finds_an_include);
    tcase_add_test(tc, test_engines_include_no_format_header);
    return s;
}

int main(void)
{
    return test_run(engine_includes_suite(), CK_FORK_GETENV, NULL);
}
