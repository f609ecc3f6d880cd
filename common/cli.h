/* cli.h — behaviour every frigg executable shares: --version text, the "not implemented yet" answer. */
#ifndef FRIGG_CLI_H
#define FRIGG_CLI_H

void frigg_print_version(const char *prog);
/* For an executable whose issue has not landed: --help/--version say so, everything exits 2. */
int frigg_not_implemented_main(int argc, char **argv, const char *prog, const char *what);

#endif
