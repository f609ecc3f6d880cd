/* gemv_common.cuh — what the decode GEMV kernels (gemv.cu: one warp per row, CUDA cores; gemv_tc.cu: 16-row
 * tiles on tensor cores; gemv_q.cu: quantized weights) share: the 8-wide dot product, the streaming weight load,
 * the fused input RMSNorm staging, and the epilogues, so all produce the same roundings at the same points. */
#ifndef FRIGG_KERNELS_GEMV_COMMON_CUH
#define FRIGG_KERNELS_GEMV_COMMON_CUH

#include "common.cuh"
#include "dequant.cuh"
#include "kernels.h"

#define GEMV_MAX_SMEM (64 * 1024) /* dynamic shared memory for the normalised x: 8 rows of K <= 4096 */

/* Eight bf16 weights times eight fp32 inputs, one fixed order: the SIMT GEMV (gemv.cu) and the quantized GEMV
 * (gemv_q.cu, on the dequantized weights) both sum with it, which keeps them bit-identical. */
__device__ __forceinline__ float dot8(uint4 w, const float *x) {
    float s = bf_lo(w.x) * x[0];
    s = fmaf(bf_hi(w.x), x[1], s);
    s = fmaf(bf_lo(w.y), x[2], s);
    s = fmaf(bf_hi(w.y), x[3], s);
    s = fmaf(bf_lo(w.z), x[4], s);
    s = fmaf(bf_hi(w.z), x[5], s);
    s = fmaf(bf_lo(w.w), x[6], s);
    s = fmaf(bf_hi(w.w), x[7], s);
    return s;
}

/* x [B][K] (nch = K/8 16-byte chunks per row) -> xs = bf16(x * rsqrt(mean(x^2) + eps)) row by row, using the
 * whole block (every thread must call it). Returns xs. scratch: B x 32 floats of shared memory.
 * x is read from global memory once: the first pass parks the raw chunks in xs while it sums their squares,
 * the second normalises xs in place. The B rows are reduced side by side, each in block_sum's order (a
 * thread's chunks in increasing order, warp_sum, then warp_sum over the warps' partials), so a row's scale has
 * the same bits whatever B. Every warp does that last warp_sum itself, so one barrier fewer than one warp doing
 * it and handing the scales on through shared memory. */
template <int B>
__device__ __forceinline__ const uint4 *stage_norm(const uint4 *xv, int nch, int K, float eps, uint4 *xs,
                                                   float *scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    float ss[B];
#pragma unroll
    for (int b = 0; b < B; b++) ss[b] = 0.0f;
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
#pragma unroll
        for (int b = 0; b < B; b++) {
            uint4 v = ld_act(xv + (size_t)b * nch + c);
            xs[(size_t)b * nch + c] = v;
            float a0 = bf_lo(v.x), a1 = bf_hi(v.x), a2 = bf_lo(v.y), a3 = bf_hi(v.y);
            float a4 = bf_lo(v.z), a5 = bf_hi(v.z), a6 = bf_lo(v.w), a7 = bf_hi(v.w);
            ss[b] += a0 * a0 + a1 * a1 + a2 * a2 + a3 * a3 + a4 * a4 + a5 * a5 + a6 * a6 + a7 * a7;
        }
    }
#pragma unroll
    for (int b = 0; b < B; b++) {
        float v = warp_sum(ss[b]);
        if (lane == 0) scratch[b * 32 + warp] = v;
    }
    __syncthreads();
    float r[B];
#pragma unroll
    for (int b = 0; b < B; b++) {
        float t = lane < nw ? scratch[b * 32 + lane] : 0.0f;
        r[b] = 1.0f / sqrtf(warp_sum(t) / (float)K + eps);
    }
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
#pragma unroll
        for (int b = 0; b < B; b++) {
            uint4 v = xs[(size_t)b * nch + c];
            uint32_t *p = (uint32_t *)&v;
            for (int j = 0; j < 4; j++) {
                uint32_t lo = f2bf(bf_lo(p[j]) * r[b]), hi = f2bf(bf_hi(p[j]) * r[b]);
                p[j] = lo | (hi << 16);
            }
            xs[(size_t)b * nch + c] = v;
        }
    }
    __syncthreads();
    return xs;
}

/* The operands of one batch row's epilogue, loaded ahead of the dot products (right after the PDL wait) so
 * their latency is not added after them: for QKV, where the row's k/v go in the cache (row_seq, row_pos) and
 * its RoPE factors, as packed bf16; for RESID the residual (gemv_preload_resid). Not before the wait, though
 * nothing in flight writes the QKV ones: dependent loads there delay the trigger (kernels/common.cuh). */
struct gemv_pre {
    size_t at;     /* QKV k/v: cache offset of dim i */
    uint32_t cs1;  /* QKV q/k: cos | sin << 16 of dim i */
    uint32_t cs2;  /* ... of dim i + hd/2 */
    float res;     /* RESID: the residual out[at] */
    bool ok, res_ok;
};

template <int EPI>
__device__ __forceinline__ gemv_pre gemv_preload(int row1, int b, int O, const fk_qkv_epi &qa) {
    gemv_pre p = {0, 0, 0, 0.0f, EPI == FK_GEMV_QKV, false};
    if (EPI == FK_GEMV_QKV) {
        int half = qa.hd / 2, Dm = O / 4, sec = row1 / Dm, j1 = row1 % Dm, i = j1 % qa.hd, h = j1 / qa.hd;
        if (sec == 0) return p; /* the gate: no cache slot, no RoPE */
        int pos = qa.row_pos[b];
        p.at = (size_t)qa.row_seq[b] * qa.seq_stride + ((size_t)h * qa.max_ctx + pos) * qa.hd + i;
        if (sec == 3) return p; /* v: no RoPE */
        const uint16_t *C = qa.cos_t + (size_t)pos * qa.hd, *S = qa.sin_t + (size_t)pos * qa.hd;
        p.cs1 = (uint32_t)C[i] | (uint32_t)S[i] << 16;
        p.cs2 = (uint32_t)C[i + half] | (uint32_t)S[i + half] << 16;
    }
    return p;
}
/* After the wait: the RESID residual of (batch row b, row) into p. */
template <int EPI>
__device__ __forceinline__ void gemv_preload_resid(gemv_pre &p, int row, int b, int O, const uint16_t *out) {
    if (EPI == FK_GEMV_RESID) {
        p.res = bf2f(ld_act16(out + (size_t)b * O + row));
        p.res_ok = true;
    }
}

/* Write batch row b's result for one output unit. Plain epilogues (store, residual): a1 is row1's sum (row2,
 * a2 unused). Paired ones: a1, a2 are rows row1 and row2 (SwiGLU: gate row unit and up row O/2 + unit; QKV:
 * dims i and i + hd/2 of one head of one section, which RoPE mixes). pre: from gemv_preload /
 * gemv_preload_resid for this (row1, b), or with ok/res_ok false to have the operands loaded here. */
template <int EPI>
__device__ __forceinline__ void gemv_store(int unit, int row1, int b, float a1, float a2, int O, uint16_t *out,
                                           const fk_qkv_epi &qa, gemv_pre pre) {
    if (EPI == FK_GEMV_STORE || EPI == FK_GEMV_RESID) {
        size_t at = (size_t)b * O + row1;
        if (EPI == FK_GEMV_STORE) out[at] = f2bf(a1);
        else out[at] = f2bf((pre.res_ok ? pre.res : bf2f(ld_act16(out + at))) + rbf(a1));
    } else if (EPI == FK_GEMV_QKV) {
        int half = qa.hd / 2, Dm = O / 4, sec = row1 / Dm, j1 = row1 % Dm, j2 = j1 + half;
        float x1 = rbf(a1), x2 = rbf(a2);
        if (sec == 0) { /* the output gate: kept for the attention epilogue */
            out[(size_t)b * O + j1] = f2bf(x1);
            out[(size_t)b * O + j2] = f2bf(x2);
            return;
        }
        if (!pre.ok) pre = gemv_preload<EPI>(row1, b, O, qa);
        if (sec == 3) {
            qa.v_slot[pre.at] = f2bf(x1);
            qa.v_slot[pre.at + half] = f2bf(x2);
            return;
        }
        /* rotate-half RoPE with HF's rounding after each op (as frigg_cpu_rope_apply) */
        float c1 = bf_lo(pre.cs1), s1 = bf_hi(pre.cs1), c2 = bf_lo(pre.cs2), s2 = bf_hi(pre.cs2);
        float o1 = rbf(rbf(x1 * c1) + rbf(-x2 * s1));
        float o2 = rbf(rbf(x2 * c2) + rbf(x1 * s2));
        if (sec == 1) {
            qa.q_out[(size_t)b * Dm + j1] = f2bf(o1);
            qa.q_out[(size_t)b * Dm + j2] = f2bf(o2);
        } else {
            qa.k_slot[pre.at] = f2bf(o1);
            qa.k_slot[pre.at + half] = f2bf(o2);
        }
    } else {
        float g = rbf(a1), u = rbf(a2);
        float sg = rbf(g / (1.0f + expf(-g)));
        out[(size_t)b * (O / 2) + unit] = f2bf(sg * u);
    }
}
/* The same, every operand loaded here. */
template <int EPI>
__device__ __forceinline__ void gemv_store(int unit, int row1, int b, float a1, float a2, int O, uint16_t *out,
                                           const fk_qkv_epi &qa) {
    gemv_pre none = {0, 0, 0, 0.0f, false, false};
    gemv_store<EPI>(unit, row1, b, a1, a2, O, out, qa, none);
}

/* The weight rows of output unit `unit` (< O/2) for the paired epilogues. */
template <int EPI>
__device__ __forceinline__ void pair_rows(int unit, int O, int hd, int *row1, int *row2) {
    if (EPI == FK_GEMV_QKV) { /* unit -> section (gate,q,k,v), head, dim i < hd/2: rows i and i + hd/2 */
        int half = hd / 2, Dm = O / 4, sec = unit / (Dm / 2), p = unit % (Dm / 2);
        *row1 = sec * Dm + (p / half) * hd + p % half;
        *row2 = *row1 + half;
    } else {
        *row1 = unit;
        *row2 = O / 2 + unit;
    }
}

/* gemv.cu: auto's letter ('s' or 't') for this call; quant: INT8 / INT4 weights (the table's q. rows). */
char gemv_auto_choice(const fk_ctx *kc, int quant, int B, int O, int K, int epi);

/* gemv_tc.cu */
#define GEMV_TC_MAX_K 4096 /* the tensor-core kernel's largest K (one round of steps per warp; gemv_tc.cu) */
#define GEMV_TC_MAX_ROWS 16 /* its batch rows per launch (both halves of the mma's 16 rows) */
#define GEMV_SIMT_MAX_ROWS FK_GEMV_SIMT_ROWS /* the CUDA-core kernels' (gemv.cu, gemv_q.cu): larger B runs in launches of 8 */
/* The rows of x one CUDA-core launch stages (its shared memory: rows x K x 2 bytes when normed). */
static inline int gemv_simt_rows(int B) { return B < GEMV_SIMT_MAX_ROWS ? B : GEMV_SIMT_MAX_ROWS; }
/* A call's operands from batch row b0 on, for a launch of its later rows: x [B][K], out [B][O] (SwiGLU: [B][O/2]),
 * and the QKV epilogue's rows (row_seq, row_pos, q_out [B][D], D = K). */
static inline void gemv_rows_from(int b0, int O, int K, int epi, const uint16_t **x, uint16_t **out, fk_qkv_epi *qa) {
    *x += (size_t)b0 * K;
    *out += (size_t)b0 * (epi == FK_GEMV_SWIGLU ? O / 2 : O);
    if (epi == FK_GEMV_QKV) {
        qa->row_seq += b0;
        qa->row_pos += b0;
        qa->q_out += (size_t)b0 * K;
    }
}
/* 0, or -1 with frigg_error set (K beyond one round, a failed launch). */
int gemv_tc_launch(const fk_ctx *kc, const uint16_t *W, int O, int K, const uint16_t *x, int B, int norm_in, float eps,
                   int epi, uint16_t *out, const fk_qkv_epi *qa, cudaStream_t s);
/* The same kernel on weights of dtype dt (frigg_dtype): INT8 / INT4 read as packed, with their scales S. */
int gemv_tc_launch_dt(const fk_ctx *kc, int dt, const void *W, const uint16_t *S, qgeom geo, int O, int K,
                      const uint16_t *x, int B, int norm_in, float eps, int epi, uint16_t *out, const fk_qkv_epi *qa,
                      cudaStream_t s);

/* gemv_q.cu: the INT8/INT4 kernels fk_gemv / fk_gemv_qkv hand quantized descriptors to (kernels.h). 0, or -1
 * with frigg_error set. */
int gemv_q_launch(const fk_ctx *kc, const frigg_mat *W, const uint16_t *x, int B, int norm_in, float eps, int epi,
                  uint16_t *out, cudaStream_t s);
int gemv_q_qkv(const fk_ctx *kc, const frigg_mat *W, const uint16_t *x, int B, float eps, uint16_t *gqkv,
               const fk_qkv_epi *qa, cudaStream_t s);

#endif
