/* harness.h — a minimal test harness. Each tests/test_*.c is its own executable; CHECK records a
 * pass or a failure (with file:line and a message) and keeps going; TEST_MAIN_END prints
 * "<name>: N passed, N failed" which tests/run-tests sums into the final line.
 * Tests find committed data through FRIGG_ROOT (the repository root; default ".") and the shared
 * data folder through FRIGG_SHARED (default "../shared"). */
#ifndef FRIGG_TEST_HARNESS_H
#define FRIGG_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int th_pass, th_fail;
static const char *th_name = "test";

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (cond) {                                                       \
            th_pass++;                                                    \
        } else {                                                          \
            th_fail++;                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

/* Skip a group of checks that needs something this machine lacks; printed, never silent. */
#define SKIP(...)                                  \
    do {                                           \
        fprintf(stderr, "SKIP %s: ", th_name);     \
        fprintf(stderr, __VA_ARGS__);              \
        fputc('\n', stderr);                       \
    } while (0)

#define TEST_MAIN_BEGIN(name) th_name = (name)
#define TEST_MAIN_END()                                                        \
    do {                                                                       \
        printf("%s: %d passed, %d failed\n", th_name, th_pass, th_fail);      \
        return th_fail ? 1 : 0;                                                \
    } while (0)

static inline const char *th_root(void) {
    const char *r = getenv("FRIGG_ROOT");
    return r && *r ? r : ".";
}
static inline const char *th_shared(void) {
    const char *r = getenv("FRIGG_SHARED");
    return r && *r ? r : "../shared";
}
/* FRIGG_QUICK: 1 runs a test's short form, unset/empty/0 the whole test; any other value is refused (exit 2),
 * not guessed at. */
static inline int th_quick(void) {
    const char *q = getenv("FRIGG_QUICK");
    if (!q || !*q || !strcmp(q, "0")) return 0;
    if (!strcmp(q, "1")) return 1;
    fprintf(stderr, "%s: FRIGG_QUICK must be 0 or 1, not '%s'\n", th_name, q);
    exit(2);
}
/* Build "<root>/<rel>" into a static-per-call buffer the caller must free. */
static inline char *th_path(const char *base, const char *rel) {
    size_t n = strlen(base) + strlen(rel) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", base, rel);
    return p;
}

#endif
