/* libFuzzer target: the safetensors header parser on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    frigg_st_set s = {0};
    if (frigg_st_parse(&s, data, size, "fuzz", 0) == 0) {
        frigg_st_finish(&s);
        for (int i = 0; i < s.ntensors; i++) { /* touch every byte the parser vouched for */
            const volatile uint8_t *p = s.tensors[i].data;
            for (size_t j = 0; j < s.tensors[i].nbytes; j += 97) (void)p[j];
        }
    }
    frigg_st_close(&s);
    return 0;
}
