/* rope.cu — rotate-half RoPE on q and k straight from the gqkv projection output, with the K/V write fused in:
 * one pass over each row, no separate copy. HF's rounding: bf16 after each elementwise op. Where K and V go is
 * a kv_dst: the bf16 cache (fk_rope_kv: row t at position row_pos[t] of sequence row_seq[t], layout
 * [head][max_ctx][hd]) or plain rows (fk_rope_rows: row t at t * row_stride, heads side by side, the staging the
 * int8 cache's write quantizes from). The rotation always uses row_pos[t]: only the destination differs. */
#include "common.cuh"
#include "kernels.h"

/* Element i of head h of row t (at position pos, of sequence seq) goes to
 * seq * seq_stride + h * head_stride + pos * pos_stride + t * row_stride + i of k and of v. */
struct kv_dst {
    uint16_t *k, *v;
    long long seq_stride, head_stride, pos_stride, row_stride;
};
__device__ __forceinline__ size_t kv_at(const kv_dst &d, const int32_t *row_seq, int t, int pos, int h, int i) {
    const long long seq = row_seq ? row_seq[t] : 0;
    return (size_t)(seq * d.seq_stride + h * d.head_stride + pos * d.pos_stride + t * d.row_stride + i);
}

__global__ void rope_kv_kernel(const uint16_t *gqkv, int H, int hd, const int32_t *row_seq, const int32_t *row_pos,
                               const uint16_t *cos_t, const uint16_t *sin_t, uint16_t *q_out, kv_dst dst) {
    pdl_wait();
    int t = blockIdx.x, D = H * hd, half = hd / 2;
    int pos = row_pos[t];
    const uint16_t *row = gqkv + (size_t)t * 4 * D;
    const uint16_t *q = row + D, *k = row + 2 * D, *v = row + 3 * D;
    const uint16_t *C = cos_t + (size_t)pos * hd, *S = sin_t + (size_t)pos * hd;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        int h = j / hd, i = j % hd;
        int partner = i < half ? j + half : j - half;
        float c = bf2f(C[i]), sn = bf2f(S[i]);
        const float qp = bf2f(ld_act16(q + partner)), kp = bf2f(ld_act16(k + partner));
        float qr = i < half ? -qp : qp;
        float kr = i < half ? -kp : kp;
        float qo = rbf(rbf(bf2f(ld_act16(q + j)) * c) + rbf(qr * sn));
        float ko = rbf(rbf(bf2f(ld_act16(k + j)) * c) + rbf(kr * sn));
        q_out[(size_t)t * D + j] = f2bf(qo);
        size_t at = kv_at(dst, row_seq, t, pos, h, i);
        dst.k[at] = f2bf(ko);
        dst.v[at] = ld_act16(v + j);
    }
}

/* x1 (first half) and x2 (second half) rotated: x1' = x1 c1 - x2 s1, x2' = x2 c2 + x1 s2, rounded as HF. */
__device__ __forceinline__ void rope8(const float x1[8], const float x2[8], const float c1[8], const float s1[8],
                                      const float c2[8], const float s2[8], float o1[8], float o2[8]) {
#pragma unroll
    for (int k = 0; k < 8; k++) {
        o1[k] = rbf(rbf(x1[k] * c1[k]) + rbf(-x2[k] * s1[k]));
        o2[k] = rbf(rbf(x2[k] * c2[k]) + rbf(x1[k] * s2[k]));
    }
}

/* Fast path (head_dim % 16 == 0, 16-byte aligned buffers): a thread owns 8 consecutive dims i..i+7 of the
 * first half of one head and their partners i+half..: it reads q, k, v, cos and sin of both as 16-byte chunks
 * and writes q, the k and v entries the same way. The flat [T][H * hd/16] index space gives a
 * 4096-token prefill hundreds of thousands of independent threads. Same roundings as the general path. */
__global__ void rope_kv_vec_kernel(const uint16_t *gqkv, int T, int H, int hd, const int32_t *row_seq,
                                   const int32_t *row_pos, const uint16_t *cos_t, const uint16_t *sin_t,
                                   uint16_t *q_out, kv_dst dst) {
    pdl_wait();
    const int half = hd / 2, cph = half / 8, cpr = H * cph, D = H * hd; /* chunks per head half, per row */
    const size_t n = (size_t)T * cpr;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n; idx += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(idx / cpr), c = (int)(idx % cpr), h = c / cph, i = (c % cph) * 8;
        const int pos = row_pos[t];
        const uint16_t *row = gqkv + (size_t)t * 4 * D + h * hd + i;
        const uint16_t *C = cos_t + (size_t)pos * hd + i, *S = sin_t + (size_t)pos * hd + i;
        uint4 wq1 = ld_act(row + D), wq2 = ld_act(row + D + half);
        uint4 wk1 = ld_act(row + 2 * D), wk2 = ld_act(row + 2 * D + half);
        uint4 wv1 = ld_act(row + 3 * D), wv2 = ld_act(row + 3 * D + half);
        float c1[8], s1[8], c2[8], s2[8], x1[8], x2[8], o1[8], o2[8];
        bf16x8_unpack(*(const uint4 *)C, c1);
        bf16x8_unpack(*(const uint4 *)S, s1);
        bf16x8_unpack(*(const uint4 *)(C + half), c2);
        bf16x8_unpack(*(const uint4 *)(S + half), s2);
        bf16x8_unpack(wq1, x1);
        bf16x8_unpack(wq2, x2);
        rope8(x1, x2, c1, s1, c2, s2, o1, o2);
        uint16_t *qo = q_out + (size_t)t * D + h * hd + i;
        *(uint4 *)qo = bf16x8_pack(o1);
        *(uint4 *)(qo + half) = bf16x8_pack(o2);
        bf16x8_unpack(wk1, x1);
        bf16x8_unpack(wk2, x2);
        rope8(x1, x2, c1, s1, c2, s2, o1, o2);
        size_t at = kv_at(dst, row_seq, t, pos, h, i);
        *(uint4 *)(dst.k + at) = bf16x8_pack(o1);
        *(uint4 *)(dst.k + at + half) = bf16x8_pack(o2);
        *(uint4 *)(dst.v + at) = wv1;
        *(uint4 *)(dst.v + at + half) = wv2;
    }
}

static int rope_launch(const fk_ctx *kc, const uint16_t *gqkv, int T, int H, int hd, const int32_t *row_seq,
                       const int32_t *row_pos, const uint16_t *cos_t, const uint16_t *sin_t, uint16_t *q_out,
                       const kv_dst &dst, cudaStream_t s) {
    if (hd % 2) {
        frigg_set_error("rope: head_dim %d is odd", hd);
        return -1;
    }
    /* 16-byte chunks need 8-aligned element offsets everywhere: hd % 16 (so half % 8), aligned bases and strides */
    const bool strides8 = dst.seq_stride % 8 == 0 && dst.head_stride % 8 == 0 && dst.pos_stride % 8 == 0 &&
                          dst.row_stride % 8 == 0;
    if (!kc->eltwise_general && hd % 16 == 0 && strides8 && fk_aligned16(gqkv) && fk_aligned16(cos_t) &&
        fk_aligned16(sin_t) && fk_aligned16(q_out) && fk_aligned16(dst.k) && fk_aligned16(dst.v)) {
        size_t n = (size_t)T * H * (hd / 16), blocks = (n + 255) / 256;
        if (blocks > (size_t)kc->sms * 16) blocks = (size_t)kc->sms * 16; /* grid-stride past resident blocks */
        fk_launch(kc, rope_kv_vec_kernel, (unsigned)(blocks ? blocks : 1), 256, 0, s, gqkv, T, H, hd, row_seq, row_pos,
                  cos_t, sin_t, q_out, dst);
    } else {
        fk_launch(kc, rope_kv_kernel, T, 256, 0, s, gqkv, H, hd, row_seq, row_pos, cos_t, sin_t, q_out, dst);
    }
    return fk_check_launch("rope_kv");
}

extern "C" int fk_rope_kv(const fk_ctx *kc, const uint16_t *gqkv, int T, int H, int hd, const int32_t *row_seq, const int32_t *row_pos,
                          const uint16_t *cos_t, const uint16_t *sin_t, uint16_t *q_out, uint16_t *k_slot,
                          uint16_t *v_slot, long long seq_stride, int max_ctx, cudaStream_t s) {
    kv_dst dst = {k_slot, v_slot, seq_stride, (long long)max_ctx * hd, hd, 0};
    return rope_launch(kc, gqkv, T, H, hd, row_seq, row_pos, cos_t, sin_t, q_out, dst, s);
}

extern "C" int fk_rope_rows(const fk_ctx *kc, const uint16_t *gqkv, int T, int H, int hd, const int32_t *row_pos,
                            const uint16_t *cos_t, const uint16_t *sin_t, uint16_t *q_out, uint16_t *k_out,
                            uint16_t *v_out, int kv_stride, cudaStream_t s) {
    if (kv_stride < H * hd) {
        frigg_set_error("rope_rows: row stride %d is less than heads x head_dim (%d)", kv_stride, H * hd);
        return -1;
    }
    kv_dst dst = {k_out, v_out, 0, hd, 0, kv_stride};
    return rope_launch(kc, gqkv, T, H, hd, NULL, row_pos, cos_t, sin_t, q_out, dst, s);
}
