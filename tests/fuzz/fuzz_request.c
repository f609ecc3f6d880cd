/* libFuzzer target: one JSON-lines request (the frigg-run / frigg-serve input path). */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "run/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t e;
    json_t *o = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e); /* as frigg-run reads a line */
    if (!o) return 0;
    frigg_request r;
    if (frigg_request_parse(&r, o, 512) == 0) frigg_request_free(&r);
    json_decref(o);
    return 0;
}
