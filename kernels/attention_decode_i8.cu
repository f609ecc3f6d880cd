/* attention_decode_i8.cu — the int8 KV cache on the GPU (frigg_backend_opts.kv_dtype = FRIGG_DT_INT8): a prompt's
 * write of its positions, quantized as cpu_ops.h's frigg_kv_quantize defines (bit for bit), and its read back for
 * the prefill attention. A decode step's write runs inside its attention kernel (fk_attn_decode_i8,
 * attention_decode.cu), with the same arithmetic as the write here, checked byte for byte by test_cuda_kv_int8.
 *
 * Layout: the bf16 cache's, [seq][head][max_ctx][hd] with int8 elements (seq_stride elements per sequence),
 * and beside it one fp32 scale per (seq, head, position), [seq][head][max_ctx] (seq_stride / hd floats per
 * sequence), for K and for V.
 *
 * The write (fk_kv_write_i8, of a prompt's rows staged by fk_rope_rows): one warp per (row, head) for K and one
 * for V. amax is a warp max (exact in any order), scale = __fdiv_rn(amax, 127),
 * q = clamp(__float2int_rn(__fdiv_rn(x, scale)), -127, 127), 0 everywhere when the scale is 0: cpu_ops.h's rules
 * in the operations it names, which the build keeps without flush-to-zero.
 *
 * The attention (fk_attn_decode_i8) is attention_decode.cu's kernel instantiated for this cache: the same splits,
 * rounds, loads before the PDL wait and merges, with a lane's 16 values one 16-byte load. A score is
 * (sum(q * k8) * scale_k) / sqrt(hd) and a value row adds (p * scale_v) * v8: the CPU op's fp32 arithmetic in
 * another order (it dequantizes each element first), so the two agree within the bf16 tolerance, not in bits;
 * a row's result depends on its own keys only, never on the batch. It replaced a kernel of its own here (a warp
 * per key and a merge kernel of its own), which ran batch-1 decode at ctx 4096 at 125.0 tok/s against the bf16
 * cache's 238.3 (benchmarks/h200-2026-12-02/kvsplit/kv.jsonl). With the write fused in, the engine's int8 decode
 * ran 1.005-1.147x faster than with the write as two kernels of its own, arms alternated in one device call
 * (benchmarks/h200-2026-12-02/kvfuse/ab-summary.txt).
 *
 * The prefill's read (fk_kv_dequant_i8): positions [0, T) of one sequence dequantized into a bf16 copy in the bf16
 * cache's layout, which fk_attn_prefill reads. One thread per 8 values of a (head, position): two 4-byte loads of
 * int8, the scale, eight fp32 products q * scale (frigg_kv_dequant's, exact to fp32), each rounded once to bf16
 * (one 16-byte store). The rounding to bf16 is the one difference from the CPU engine, which attends over the
 * fp32 products: at most 2^-9 relative per value, the size of the bf16 rounding every other attention input has.
 */
#include <math.h>

#include "common.cuh"
#include "kernels.h"

#define I8_MAX_HD 128 /* head_dim: a multiple of 32, at most 128 (four elements per lane) */

__global__ void __launch_bounds__(64)
    kv_write_i8_kernel(const uint16_t *k, const uint16_t *v, int kv_stride,
                       const int32_t *row_seq, const int32_t *row_pos, int hd, int max_ctx,
                       long long seq_stride, int8_t *__restrict__ k8, int8_t *__restrict__ v8, float *__restrict__ ks,
                       float *__restrict__ vs) {
    pdl_wait();
    const int h = blockIdx.x, b = blockIdx.y, w = threadIdx.x >> 5, lane = threadIdx.x & 31, E = hd / 32;
    const uint16_t *src = (w ? v : k) + (size_t)b * kv_stride + (size_t)h * hd;
    const long long seq = row_seq[b], pos = row_pos[b];
    float x[I8_MAX_HD / 32], amax = 0.0f;
#pragma unroll
    for (int e = 0; e < I8_MAX_HD / 32; e++) {
        x[e] = e < E ? bf2f(ld_act16(src + lane + 32 * e)) : 0.0f;
        amax = fmaxf(amax, fabsf(x[e]));
    }
    amax = warp_max(amax);
    const float scale = __fdiv_rn(amax, 127.0f);
    int8_t *dst = (w ? v8 : k8) + seq * seq_stride + ((long long)h * max_ctx + pos) * hd;
#pragma unroll
    for (int e = 0; e < I8_MAX_HD / 32; e++) {
        if (e >= E) break;
        int q = 0;
        if (scale != 0.0f) {
            q = __float2int_rn(__fdiv_rn(x[e], scale));
            q = q > 127 ? 127 : q < -127 ? -127 : q;
        }
        dst[lane + 32 * e] = (int8_t)q;
    }
    if (lane == 0) (w ? vs : ks)[seq * (seq_stride / hd) + (long long)h * max_ctx + pos] = scale;
}

__global__ void __launch_bounds__(256)
    kv_dequant_i8_kernel(const int8_t *k8, const int8_t *v8, const float *ks, const float *vs, int T, int H, int hd,
                         int max_ctx, uint16_t *__restrict__ k_out, uint16_t *__restrict__ v_out) {
    pdl_wait();
    const int cpp = hd / 8; /* 8-value chunks per (head, position) */
    const size_t per_head = (size_t)T * cpp, n = (size_t)H * per_head;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n; idx += (size_t)gridDim.x * blockDim.x) {
        const size_t h = idx / per_head, r = idx % per_head, j = r / cpp, c = r % cpp;
        const size_t si = h * max_ctx + j, at = si * hd + c * 8;
#pragma unroll
        for (int w = 0; w < 2; w++) {
            const int8_t *src = (w ? v8 : k8) + at;
            const uint32_t lo = ld_act32(src), hi = ld_act32(src + 4);
            const float sc = __uint_as_float(ld_act32((w ? vs : ks) + si));
            float f[8];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                f[e] = __fmul_rn((float)(int8_t)(lo >> (8 * e)), sc);
                f[4 + e] = __fmul_rn((float)(int8_t)(hi >> (8 * e)), sc);
            }
            *(uint4 *)((w ? v_out : k_out) + at) = bf16x8_pack(f);
        }
    }
}

static int i8_shape(const char *what, int B, int H, int hd, int max_ctx, long long seq_stride) {
    if (B < 1 || H < 1 || hd < 32 || hd > I8_MAX_HD || hd % 32 || max_ctx < 1 || seq_stride < (long long)H * max_ctx * hd ||
        seq_stride % hd) {
        frigg_set_error("%s: unsupported shape (rows %d, heads %d, head_dim %d: a multiple of 32 up to %d; context %d, "
                        "sequence stride %lld)",
                        what, B, H, hd, I8_MAX_HD, max_ctx, seq_stride);
        return -1;
    }
    return 0;
}

extern "C" int fk_kv_write_i8(const fk_ctx *kc, const uint16_t *k, const uint16_t *v, int kv_stride, const int32_t *row_seq,
                              const int32_t *row_pos, int B, int H, int hd, int max_ctx, long long seq_stride, int8_t *k8,
                              int8_t *v8, float *k_scale, float *v_scale, cudaStream_t s) {
    if (i8_shape("kv_write_i8", B, H, hd, max_ctx, seq_stride)) return -1;
    if (kv_stride < H * hd) {
        frigg_set_error("kv_write_i8: row stride %d is less than heads x head_dim (%d)", kv_stride, H * hd);
        return -1;
    }
    if (B > 65535) { /* the grid's y dimension: a prefill's rows */
        frigg_set_error("kv_write_i8: %d rows in one call (at most 65535)", B);
        return -1;
    }
    fk_launch(kc, kv_write_i8_kernel, dim3(H, B), 64, 0, s, k, v, kv_stride, row_seq, row_pos, hd, max_ctx, seq_stride, k8, v8,
              k_scale, v_scale);
    return fk_check_launch("kv_write_i8");
}

extern "C" int fk_kv_dequant_i8(const fk_ctx *kc, const int8_t *k8, const int8_t *v8, const float *k_scale,
                                const float *v_scale, int T, int H, int hd, int max_ctx, uint16_t *k_out, uint16_t *v_out,
                                cudaStream_t s) {
    if (i8_shape("kv_dequant_i8", T, H, hd, max_ctx, (long long)H * max_ctx * hd)) return -1;
    if (T > max_ctx) {
        frigg_set_error("kv_dequant_i8: %d positions in a cache of %d", T, max_ctx);
        return -1;
    }
    /* 4-byte int8 loads and 16-byte bf16 stores (cudaMalloc'd bases and slot offsets of whole heads satisfy both) */
    if (((uintptr_t)k8 | (uintptr_t)v8 | (uintptr_t)k_scale | (uintptr_t)v_scale) & 3 || !fk_aligned16(k_out) ||
        !fk_aligned16(v_out)) {
        frigg_set_error("kv_dequant_i8: misaligned buffers (int8 and scales 4-byte, outputs 16-byte aligned)");
        return -1;
    }
    size_t n = (size_t)H * T * (hd / 8), blocks = (n + 255) / 256;
    if (blocks > (size_t)kc->sms * 16) blocks = (size_t)kc->sms * 16; /* grid-stride past resident blocks */
    fk_launch(kc, kv_dequant_i8_kernel, (unsigned)(blocks ? blocks : 1), 256, 0, s, k8, v8, k_scale, v_scale, T, H, hd,
              max_ctx, k_out, v_out);
    return fk_check_launch("kv_dequant_i8");
}
