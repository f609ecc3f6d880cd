/* frigg-run — placeholder while the foundation lands. */
#include "cli.h"

int main(int argc, char **argv) { return frigg_not_implemented_main(argc, argv, "frigg-run", "in progress"); }
