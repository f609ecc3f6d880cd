/* lmhead.cu — what follows the lm_head GEMV: greedy argmax on the device (so only ids cross PCIe) and the
 * bf16 -> fp32 widening of logits that do go to the host. */
#include "common.cuh"
#include "kernels.h"

#define ARGMAX_THREADS 256
#define ARGMAX_SLICES 64 /* blocks per row: each scans 1/64 of it (4096 logits of Mimir's 262144) */

/* (v, i) beats (best, bi): greater, or equal at a lower index. Ties go to the lowest index, like torch.argmax
 * and frigg_argmax; NaN never wins (v > best is false), so an all -inf/NaN row keeps bi = INT_MAX. The rule is
 * associative and commutative, so the result does not depend on how the row is split. */
__device__ __forceinline__ void amax_take(float v, int i, float &best, int &bi) {
    if (v > best || (v == best && i < bi)) {
        best = v;
        bi = i;
    }
}
__device__ __forceinline__ void amax_warp(float &best, int &bi) {
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        amax_take(ov, oi, best, bi);
    }
}

/* grid (ARGMAX_SLICES, B): block x scans slice x of row b (16-byte loads where the row is 16-byte aligned, so
 * one pass moves the 512 KB of a Mimir row over many SMs instead of one) and writes its best (value, index)
 * to part[b][x]. Why: one block per row with 2-byte loads took most of the 85 us a batch-1 step spent outside
 * the layer kernels and lm_head (b0fb83f); with this pair that is 36 us, and batch-1 decode went from 285.0-285.7
 * to 289.9-290.2 tok/s, batch 8 from 1,596-1,598 to 1,611-1,613 (b0fb83f, alternated in one call). */
/* mask (NULL: none): mw 32-bit words per row, bit i of row b set where id i may win (structured output's allowed
 * tokens); the others are left out of the comparison, so the id is the best allowed one, lowest on ties, and a row
 * with no allowed finite value gives 0 as an all -inf row does. */
__device__ __forceinline__ uint32_t mask_bits8(const uint32_t *mask, int mw, int b, int i0) {
    /* the 8 bits of ids i0..i0+7 (i0 % 8 == 0: one word holds them), 0xFF without a mask */
    return mask ? (ld_act32(mask + (size_t)b * mw + (i0 >> 5)) >> (i0 & 31)) & 0xFFu : 0xFFu;
}

__global__ void __launch_bounds__(ARGMAX_THREADS) argmax_part_kernel(const uint16_t *logits, int V, float *part_v,
                                                                      int *part_i, const uint32_t *mask, int mw) {
    __shared__ float sv[ARGMAX_THREADS / 32];
    __shared__ int si[ARGMAX_THREADS / 32];
    pdl_wait();
    const int b = blockIdx.y, x = blockIdx.x, t = threadIdx.x;
    const uint16_t *row = logits + (size_t)b * V;
    float best = -INFINITY;
    int bi = 0x7fffffff;
    if (V % 8 == 0 && fk_aligned16(logits)) { /* every row 16-byte aligned: 8 logits per load */
        const int nch = V / 8, per = (nch + ARGMAX_SLICES - 1) / ARGMAX_SLICES;
        const int c0 = x * per, c1 = min(nch, c0 + per);
        for (int c = c0 + t; c < c1; c += ARGMAX_THREADS) {
            const uint32_t m = mask_bits8(mask, mw, b, c * 8);
            if (!m) continue; /* none of these 8 allowed: their logits are not read */
            uint4 w = ld_act(row + (size_t)c * 8);
            float f[8];
            bf16x8_unpack(w, f);
#pragma unroll
            for (int k = 0; k < 8; k++)
                if ((m >> k) & 1u) amax_take(f[k], c * 8 + k, best, bi);
        }
    } else {
        const int per = (V + ARGMAX_SLICES - 1) / ARGMAX_SLICES, i0 = x * per, i1 = min(V, i0 + per);
        for (int i = i0 + t; i < i1; i += ARGMAX_THREADS)
            if (!mask || ((ld_act32(mask + (size_t)b * mw + (i >> 5)) >> (i & 31)) & 1u))
                amax_take(bf2f(ld_act16(row + i)), i, best, bi);
    }
    amax_warp(best, bi);
    const int lane = t & 31, warp = t >> 5;
    if (lane == 0) {
        sv[warp] = best;
        si[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        best = lane < ARGMAX_THREADS / 32 ? sv[lane] : -INFINITY;
        bi = lane < ARGMAX_THREADS / 32 ? si[lane] : 0x7fffffff;
        amax_warp(best, bi);
        if (lane == 0) {
            part_v[b * ARGMAX_SLICES + x] = best;
            part_i[b * ARGMAX_SLICES + x] = bi;
        }
    }
}

/* One warp per row: the best of the row's ARGMAX_SLICES partials. All -inf or NaN rows: index 0, as
 * frigg_argmax. advance (may be NULL): the row's position, incremented once its id is written; vals (may be
 * NULL): the best value; see fk_argmax_bf16. */
__global__ void argmax_final_kernel(const float *part_v, const int *part_i, int32_t *ids, int32_t *advance, float *vals) {
    pdl_wait();
    const int b = blockIdx.x, lane = threadIdx.x;
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int x = lane; x < ARGMAX_SLICES; x += 32)
        amax_take(__uint_as_float(ld_act32(part_v + b * ARGMAX_SLICES + x)), (int)ld_act32(part_i + b * ARGMAX_SLICES + x),
                  best, bi);
    amax_warp(best, bi);
    if (lane == 0) {
        ids[b] = bi == 0x7fffffff ? 0 : bi;
        if (vals) vals[b] = best;
        if (advance) advance[b] += 1;
    }
}

__global__ void widen_kernel(const uint16_t *in, size_t n, float *out) {
    pdl_wait();
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = bf2f(ld_act16(in + i));
}

extern "C" size_t fk_argmax_work_bytes(int B) { return (size_t)(B > 0 ? B : 0) * ARGMAX_SLICES * 8; }

extern "C" int fk_argmax_bf16_masked(const fk_ctx *kc, const uint16_t *logits, int B, int V, const uint32_t *mask,
                                     int32_t *ids, int32_t *advance, float *vals, void *work, cudaStream_t s) {
    if (B < 1 || V < 1 || !work || !fk_aligned16(work)) {
        frigg_set_error("argmax: %d rows of %d logits, workspace %p (fk_argmax_work_bytes, 16-byte aligned)", B, V, work);
        return -1;
    }
    float *pv = (float *)work;
    int *pi = (int *)(pv + (size_t)B * ARGMAX_SLICES);
    fk_launch(kc, argmax_part_kernel, dim3(ARGMAX_SLICES, B), ARGMAX_THREADS, 0, s, logits, V, pv, pi, mask, (V + 31) / 32);
    if (fk_check_launch("argmax")) return -1;
    fk_launch(kc, argmax_final_kernel, B, 32, 0, s, (const float *)pv, (const int *)pi, ids, advance, vals);
    return fk_check_launch("argmax");
}

extern "C" int fk_argmax_bf16(const fk_ctx *kc, const uint16_t *logits, int B, int V, int32_t *ids, int32_t *advance, float *vals,
                              void *work, cudaStream_t s) {
    return fk_argmax_bf16_masked(kc, logits, B, V, NULL, ids, advance, vals, work, s);
}

extern "C" int fk_bf16_to_f32(const fk_ctx *kc, const uint16_t *in, size_t n, float *out, cudaStream_t s) {
    size_t blocks = (n + 255) / 256;
    if (blocks > 65535) blocks = 65535;
    if (!blocks) return 0;
    fk_launch(kc, widen_kernel, (unsigned)blocks, 256, 0, s, in, n, out);
    return fk_check_launch("bf16_to_f32");
}
