/* cli.c — see cli.h. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int frigg_cli_number(const char *prog, const char *opt, const char *arg, double lo, double hi, int integer, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || !*arg || *end || !isfinite(v) || v < lo || v > hi || (integer && v != floor(v))) {
        fprintf(stderr, "%s: bad number for %s: \"%s\" (%s %.15g..%.15g)\n", prog, opt, arg, integer ? "an integer in" : "a number in",
                lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int frigg_cli_threads(const char *prog, const char *arg, int *out) {
    double v;
    if (frigg_cli_number(prog, "--threads", arg, 0, FRIGG_MAX_THREADS, 1, &v)) return -1;
    *out = (int)v;
    return 0;
}

int frigg_cli_kv_dtype(const char *prog, const char *arg, frigg_dtype *out) {
    if (!strcmp(arg, "bf16")) *out = FRIGG_DT_BF16;
    else if (!strcmp(arg, "int8")) *out = FRIGG_DT_INT8;
    else {
        fprintf(stderr, "%s: --kv-dtype takes bf16 or int8, not \"%s\"\n", prog, arg);
        return -1;
    }
    return 0;
}

int frigg_cli_dequant_rows(const char *prog, const char *arg, int *out) {
    char *end = NULL;
    long v = strtol(arg, &end, 10);
    if (!strcmp(arg, "off")) *out = FRIGG_DEQUANT_NEVER;
    else if (end != arg && !*end && v >= 1 && v <= 1 << 24) *out = (int)v;
    else {
        fprintf(stderr, "%s: --dequant-rows takes a number of rows (1 or more) or off, not \"%s\"\n", prog, arg);
        return -1;
    }
    return 0;
}

void frigg_print_version(const char *prog) {
#ifdef FRIGG_CUDA
    const char *cuda = "cuda+cpu";
#else
    const char *cuda = "cpu only";
#endif
    printf("%s (frigg) %s [%s]\n", prog, FRIGG_VERSION, cuda);
}

int frigg_not_implemented_main(int argc, char **argv, const char *prog, const char *what) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--version")) {
            frigg_print_version(prog);
            fprintf(stderr, "%s: not implemented yet (%s)\n", prog, what);
            return 2;
        }
    }
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        printf("usage: %s ...\n%s: %s.\n", prog, prog, what);
    fprintf(stderr, "%s: not implemented yet (%s)\n", prog, what);
    return 2;
}
