/* libFuzzer target: config.json parsing and validation. */
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    frigg_config c;
    frigg_config_parse(&c, (const char *)data, size, "fuzz");
    return 0;
}
