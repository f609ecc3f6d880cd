/* libFuzzer target: the GGUF reader on arbitrary bytes — the header, metadata (every array walked through
 * frigg_gguf_arr_next), tensor infos and data extents — then the hrm_text config mapping and, for every tensor it
 * vouched for, the dequantization of its first blocks. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "model/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    frigg_gguf g;
    if (frigg_gguf_parse(&g, data, size, "fuzz") == 0) {
        for (int64_t i = 0; i < g.nkv; i++) {
            const frigg_gguf_kv *kv = &g.kv[i];
            if (kv->type != FRIGG_GGUF_ARRAY) continue;
            const unsigned char *p = kv->adata;
            for (uint64_t k = 0; k < kv->n && k < 4096; k++) frigg_gguf_arr_next(kv, &p, NULL, NULL, NULL, NULL, NULL);
        }
        frigg_config c;
        frigg_gguf_hrm_config(&g, &c, NULL);
        float out[512];
        for (int64_t i = 0; i < g.ntensors; i++) {
            const frigg_gguf_tensor *t = &g.tensors[i];
            uint32_t be, bb;
            frigg_ggml_type_block(t->type, &be, &bb);
            size_t n = t->nelem < 512 ? (size_t)t->nelem : 512;
            n -= be ? n % be : n;
            if (n) frigg_gguf_dequant_f32(t->type, t->data, n, out);
        }
    }
    frigg_gguf_close(&g);
    return 0;
}
