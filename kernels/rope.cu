/* rope.cu — rotate-half RoPE on q and k straight from the gqkv projection output, with the KV-cache write
 * fused in: one pass over each row, no separate copy. HF's rounding: bf16 after each elementwise op. */
#include "common.cuh"
#include "kernels.h"

__global__ void rope_kv_kernel(const uint16_t *gqkv, int H, int hd, const int32_t *row_seq, const int32_t *row_pos,
                               const uint16_t *cos_t, const uint16_t *sin_t, uint16_t *q_out, uint16_t *k_slot,
                               uint16_t *v_slot, long long seq_stride, int max_ctx) {
    pdl_wait();
    pdl_launch();
    int t = blockIdx.x, D = H * hd, half = hd / 2;
    int pos = row_pos[t];
    const uint16_t *row = gqkv + (size_t)t * 4 * D;
    const uint16_t *q = row + D, *k = row + 2 * D, *v = row + 3 * D;
    const uint16_t *C = cos_t + (size_t)pos * hd, *S = sin_t + (size_t)pos * hd;
    size_t base = (size_t)row_seq[t] * seq_stride;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        int h = j / hd, i = j % hd;
        int partner = i < half ? j + half : j - half;
        float c = bf2f(C[i]), sn = bf2f(S[i]);
        float qr = i < half ? -bf2f(q[partner]) : bf2f(q[partner]);
        float kr = i < half ? -bf2f(k[partner]) : bf2f(k[partner]);
        float qo = rbf(rbf(bf2f(q[j]) * c) + rbf(qr * sn));
        float ko = rbf(rbf(bf2f(k[j]) * c) + rbf(kr * sn));
        q_out[(size_t)t * D + j] = f2bf(qo);
        size_t at = base + ((size_t)h * max_ctx + pos) * hd + i;
        k_slot[at] = f2bf(ko);
        v_slot[at] = v[j];
    }
}

extern "C" int fk_rope_kv(const uint16_t *gqkv, int T, int H, int hd, const int32_t *row_seq, const int32_t *row_pos,
                          const uint16_t *cos_t, const uint16_t *sin_t, uint16_t *q_out, uint16_t *k_slot,
                          uint16_t *v_slot, long long seq_stride, int max_ctx, cudaStream_t s) {
    if (hd % 2) {
        frigg_set_error("rope: head_dim %d is odd", hd);
        return -1;
    }
    fk_launch(rope_kv_kernel, T, 256, 0, s, gqkv, H, hd, row_seq, row_pos, cos_t, sin_t, q_out, k_slot, v_slot,
              seq_stride, max_ctx);
    return fk_check_launch("rope_kv");
}
