/* cli.c — see cli.h. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

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
