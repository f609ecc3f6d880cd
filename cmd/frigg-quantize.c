/* frigg-quantize — not implemented yet: answers --help/--version and exits 2, never fake output. */
#include "cli.h"

int main(int argc, char **argv) { return frigg_not_implemented_main(argc, argv, "frigg-quantize", "weight quantization is planned in a later issue"); }
