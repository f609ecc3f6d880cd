/* attention_decode.cu — decode attention: one new query row per batch row against the slot's cached keys,
 * split-K over the keys (flash-decoding), the partials merged by the last split block of each (row, head),
 * with the output gate y = bf16(bf16(sigmoid(g)) * bf16(o)) fused into that merge. Scores and softmax are
 * fp32 like the CPU engine. */
#include "common.cuh"
#include "kernels.h"

#define DEC_CHUNK 64  /* keys per split block */
#define DEC_WARPS 8

/* Merge the split partials of one (row, head) and apply the output gate. Loads bypass L1 (__ldcg): the
 * partials were written by other blocks. */
__device__ void combine_row(int len, const uint16_t *gqkv, int H, int hd, int nsplit, const float *w, int b, int h,
                            uint16_t *y) {
    const int D = H * hd, ns = (len + DEC_CHUNK - 1) / DEC_CHUNK;
    (void)nsplit;
    float M = -INFINITY;
    for (int sp = 0; sp < ns; sp++) M = fmaxf(M, __ldcg(w + sp * (hd + 2)));
    float L = 0.0f;
    for (int sp = 0; sp < ns; sp++) L += __ldcg(w + sp * (hd + 2) + 1) * expf(__ldcg(w + sp * (hd + 2)) - M);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int sp = 0; sp < ns; sp++) a += __ldcg(w + sp * (hd + 2) + 2 + d) * expf(__ldcg(w + sp * (hd + 2)) - M);
        float o = rbf(a / L);
        float g = bf2f(gqkv[(size_t)b * 4 * D + h * hd + d]);
        float sg = rbf(1.0f / (1.0f + expf(-g)));
        y[(size_t)b * D + h * hd + d] = f2bf(sg * o);
    }
}

/* DPL dims per lane; lanes with lane*DPL >= hd idle in the dot product. */
template <int DPL>
__global__ void __launch_bounds__(DEC_WARPS * 32)
    attn_decode_split(const uint16_t *__restrict__ q, const uint16_t *__restrict__ k_slot,
                      const uint16_t *__restrict__ v_slot, long long seq_stride, const int32_t *row_seq,
                      const int32_t *row_pos, int H, int hd, int max_ctx, int nsplit, float scale, float *work,
                      int *counters, const uint16_t *__restrict__ gqkv, uint16_t *__restrict__ y) {
    __shared__ float wm[DEC_WARPS], wl[DEC_WARPS];
    __shared__ float wacc[DEC_WARPS][256];
    pdl_wait();
    pdl_launch();
    const int sp = blockIdx.x, h = blockIdx.y, b = blockIdx.z, D = H * hd;
    const int len = row_pos[b] + 1, j0 = sp * DEC_CHUNK;
    if (j0 >= len) return;
    const int j1 = min(len, j0 + DEC_CHUNK);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, d0 = lane * DPL;
    const bool active = d0 < hd;
    size_t base = (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * hd;
    const uint16_t *K = k_slot + base, *V = v_slot + base;
    float qf[DPL], acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        qf[i] = active ? bf2f(q[(size_t)b * D + h * hd + d0 + i]) : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    /* Each warp takes a contiguous quarter of the chunk, 4 keys at a time: the 8 loads of a group are all in
     * flight before the first dot product needs them. */
    const int per_warp = DEC_CHUNK / DEC_WARPS, kw0 = j0 + warp * per_warp, kw1 = min(j1, kw0 + per_warp);
    for (int jb = kw0; jb < kw1; jb += 4) {
        float kf[4][DPL], vf[4][DPL];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int j = jb + u;
            bool live = active && j < kw1;
#pragma unroll
            for (int i = 0; i < DPL; i++) kf[u][i] = vf[u][i] = 0.0f;
            if (live) {
                if (DPL == 4) {
                    uint2 kk = *(const uint2 *)(K + (size_t)j * hd + d0), vv = *(const uint2 *)(V + (size_t)j * hd + d0);
                    kf[u][0] = bf_lo(kk.x); kf[u][1 % DPL] = bf_hi(kk.x); kf[u][2 % DPL] = bf_lo(kk.y); kf[u][3 % DPL] = bf_hi(kk.y);
                    vf[u][0] = bf_lo(vv.x); vf[u][1 % DPL] = bf_hi(vv.x); vf[u][2 % DPL] = bf_lo(vv.y); vf[u][3 % DPL] = bf_hi(vv.y);
                } else {
#pragma unroll
                    for (int i = 0; i < DPL; i++) {
                        kf[u][i] = bf2f(K[(size_t)j * hd + d0 + i]);
                        vf[u][i] = bf2f(V[(size_t)j * hd + d0 + i]);
                    }
                }
            }
        }
        float sc[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            float part = 0.0f;
#pragma unroll
            for (int i = 0; i < DPL; i++) part += qf[i] * kf[u][i];
            sc[u] = warp_sum(part) * scale;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (jb + u >= kw1) break;
            float m_new = fmaxf(m, sc[u]);
            float alpha = m == -INFINITY ? 0.0f : expf(m - m_new), p = expf(sc[u] - m_new);
            l = l * alpha + p;
#pragma unroll
            for (int i = 0; i < DPL; i++) acc[i] = acc[i] * alpha + p * vf[u][i];
            m = m_new;
        }
    }
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
    if (active)
#pragma unroll
        for (int i = 0; i < DPL; i++) wacc[warp][d0 + i] = acc[i];
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < DEC_WARPS; w++) M = fmaxf(M, wm[w]);
    float *out = work + (((size_t)b * H + h) * nsplit + sp) * (hd + 2);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < DEC_WARPS; w++)
            if (wm[w] != -INFINITY) a += wacc[w][d] * expf(wm[w] - M);
        out[2 + d] = a;
    }
    if (threadIdx.x == 0) {
        float L = 0.0f;
        for (int w = 0; w < DEC_WARPS; w++)
            if (wm[w] != -INFINITY) L += wl[w] * expf(wm[w] - M);
        out[0] = M;
        out[1] = L;
    }
    /* The last split block of this (row, head) to finish combines all partials: no separate kernel, no
     * launch gap. The counter is reset by that block, so it is zero again for the next layer and step. */
    __shared__ int is_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        int ns = (len + DEC_CHUNK - 1) / DEC_CHUNK;
        int prev = atomicAdd(&counters[b * H + h], 1);
        is_last = prev == ns - 1;
        if (is_last) counters[b * H + h] = 0;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    combine_row(len, gqkv, H, hd, nsplit, work + ((size_t)b * H + h) * nsplit * (hd + 2), b, h, y);
}

extern "C" size_t fk_attn_decode_work_floats(int B, int H, int hd, int max_ctx) {
    int nsplit = (max_ctx + DEC_CHUNK - 1) / DEC_CHUNK;
    return (size_t)B * H * nsplit * (hd + 2);
}

extern "C" int fk_attn_decode(const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot, long long seq_stride,
                              const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H,
                              int hd, int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s) {
    int nsplit = (max_ctx + DEC_CHUNK - 1) / DEC_CHUNK;
    dim3 grid(nsplit, H, B);
    float scale = (float)(1.0 / sqrt((double)hd));
    switch (hd) {
    case 16:
    case 32: fk_launch(attn_decode_split<1>, grid, DEC_WARPS * 32, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, hd, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 64: fk_launch(attn_decode_split<2>, grid, DEC_WARPS * 32, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, hd, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 128: fk_launch(attn_decode_split<4>, grid, DEC_WARPS * 32, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, hd, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    default:
        frigg_set_error("attention: head_dim %d is not supported by the CUDA backend (16, 32, 64 or 128)", hd);
        return -1;
    }
    return fk_check_launch("attn_decode");
}
