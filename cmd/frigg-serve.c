/* frigg-serve — not implemented yet: answers --help/--version and exits 2, never fake output. */
#include "cli.h"
#include <microhttpd.h> /* linked already, so the server issue starts from a working build */

int main(int argc, char **argv) { return frigg_not_implemented_main(argc, argv, "frigg-serve", "the OpenAI-compatible server is planned in a later issue"); }
