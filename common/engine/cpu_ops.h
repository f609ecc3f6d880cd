/* cpu_ops.h — the CPU reference ops. Activations are fp32 arrays holding bf16-rounded values; every
 * place HF's bf16 model rounds is a frigg_round_bf16 here. These are also the reference the GPU ops are
 * compared with in tests. */
#ifndef FRIGG_CPU_OPS_H
#define FRIGG_CPU_OPS_H

#include <stdint.h>

#include "model/model.h"
#include "base/threadpool.h"
#include "base/util.h"

/* The precision an op rounds to, passed to every op (it belongs to the engine that runs them, never to the
 * process). FRIGG_PREC_BF16: round to bf16 everywhere HF's bf16 model rounds. FRIGG_PREC_FP32: round
 * nowhere, which is HF's model run in float32 on the same (bf16-valued) weights — the tight, structural
 * comparison of MODEL.md T17 (frigg_backend_opts.fp32_reference). */
typedef enum { FRIGG_PREC_BF16 = 0, FRIGG_PREC_FP32 = 1 } frigg_prec;
static inline float frigg_act(frigg_prec p, float x) { return p == FRIGG_PREC_FP32 ? x : frigg_round_bf16(x); }

/* y[t][o] = bf16(Σ_i W[o][i]·x[t][i]) for t < T, o < W.rows; fp32 accumulation. W's dtype must be one
 * frigg_model_check_dtypes accepts. The rounding points, for every dtype:
 *   W[o][i]: BF16 its value; INT8/INT4 bf16(q[o][i] * scale) — the fp32 product (exact) rounded once to
 *            bf16 (frigg_mat_row; compressed-tensors' dequantize in a bf16 model), so a quantized matrix
 *            computes exactly what the BF16 matrix of its dequantized values computes, bit for bit;
 *   the products W·x and their sum in fp32 (8 partial sums over i mod 8, combined pairwise, then the tail);
 *   y rounded once to bf16 (not at all in FRIGG_PREC_FP32).
 * A CUDA kernel for INT8/INT4 matches it by dequantizing to bf16 (q * scale rounded to bf16) and
 * accumulating bf16 x bf16 products in fp32. */
void frigg_cpu_linear(frigg_prec p, frigg_pool *pool, const frigg_mat *W, const float *x, int T, float *y);
/* y = bf16(x · rsqrt(mean(x²) + eps)) row by row, fp32 inside (no weight, trap T10). */
void frigg_cpu_rmsnorm(frigg_prec p, const float *x, int T, int D, double eps, float *y);
/* RoPE tables for positions [p0, p0+T): cos/sin [T][head_dim], bf16-rounded (MODEL.md §3.2). */
void frigg_cpu_rope_tables(frigg_prec p, const frigg_config *c, int p0, int T, float *cos_t, float *sin_t);
/* In place, rotate-half RoPE on x[T][heads*head_dim] with HF's bf16 rounding after each op. */
void frigg_cpu_rope_apply(frigg_prec p, float *x, int T, int heads, int head_dim, const float *cos_t,
                          const float *sin_t);
/* bf16(bf16(silu(g)) * u), silu in fp32. */
void frigg_cpu_swiglu(frigg_prec p, const float *g, const float *u, int n, float *out);

/* The int8 KV cache (frigg_backend_opts.kv_dtype = FRIGG_DT_INT8): symmetric, one fp32 scale per (position,
 * head), for K and for V separately, quantized when a position is written into the cache (K after RoPE) and
 * dequantized where attention reads it. frigg_kv_quantize quantizes one head's n values x[0..n) (the fp32
 * values a bf16 cache would hold: bf16-valued, or any fp32 in FRIGG_PREC_FP32; finite), exactly so:
 *   amax  = max_d |x[d]|                       exact
 *   scale = amax / 127.0f                      one fp32 division, rounded to nearest even
 *   q[d]  = 0 for every d when scale == 0      (amax == 0, or an amax so small its /127 underflows)
 *         = clamp(rne(x[d] / scale), -127, 127) otherwise: x[d] / scale one fp32 division rounded to nearest
 *           even (a true division, not x * (1/scale)); rne rounds to the nearest integer, halves to even
 *           (nearbyintf in the default rounding mode: 2.5 -> 2, 3.5 -> 4, -0.5 -> 0). The clamp acts only
 *           when scale is subnormal (its rounding can then be coarse enough that x / scale passes 127.5);
 *           with a normal scale, |x| <= amax makes x / scale round to at most 127
 * -128 is never produced. A CUDA kernel writes the same bytes with fabsf / fmaxf, __fdiv_rn(amax, 127.0f),
 * __fdiv_rn(x, scale), __float2int_rn and the clamp, built without flush-to-zero (no -ftz=true, no
 * --use_fast_math): a subnormal scale or x is used as it is.
 * Dequantizing, the one rounding point: the value attention reads is frigg_kv_dequant(q, scale) =
 * (float)q * scale, one fp32 multiplication rounded to nearest even, NOT rounded to bf16; from there the
 * attention is frigg_cpu_attention's fp32 arithmetic over those values (an int8 cache gives bit for bit what
 * an fp32 cache holding the dequantized values gives). A kernel that takes the scale out of the dot product
 * (scale * Σ q_d·k8_d) differs from this only by fp32 summation rounding. */
void frigg_kv_quantize(const float *x, int n, int8_t *q, float *scale);
static inline float frigg_kv_dequant(int8_t q, float scale) { return (float)q * scale; }

/* Attention of T query rows at positions [p0, p0+T) over the keys and values of positions [0, p0+T), with
 * the PrefixLM mask (MODEL.md §4.1: causal, or both query and key inside [0, prefix_len)): fp32 scores
 * scaled by 1/sqrt(head_dim), fp32 softmax, P·V accumulated as (p/sum)·v in fp32, one bf16 rounding of the
 * output; then, with a gate, out = bf16(bf16(sigmoid(g)) · o) (the sigmoid output gate, before o_proj).
 * Strides are in elements (floats; int8 values for an int8 cache): row t, head h of q at q + t*q_stride +
 * h*head_dim; position j, head h of k and v at k + j*pos_stride + h*head_stride (so one op serves the CPU
 * engine's [pos][D] cache and a device's [head][ctx][hd] layout). The one CPU attention: the engine and every test that needs a reference. */
typedef struct {
    const float *q;
    size_t q_stride;
    const float *k, *v;
    size_t pos_stride, head_stride;
    /* An int8 cache instead (k and v NULL): position j, head h of K at k8 + j*pos_stride + h*head_stride
     * (int8 elements, the same strides), its scale at k_scale + j*scale_pos_stride + h*scale_head_stride;
     * likewise V. Each row is read as frigg_kv_dequant(q, scale) (frigg_kv_quantize above). */
    const int8_t *k8, *v8;
    const float *k_scale, *v_scale;
    size_t scale_pos_stride, scale_head_stride;
    const float *gate; /* NULL: no gate */
    size_t gate_stride;
    int T, p0, prefix_len, heads, head_dim;
    float *out;
    size_t out_stride;
    /* Optional (NULL): per output element, sum_j w_j |v_j| with w the softmax weights (the weighted mean
     * magnitude of the values, fp32, strided as out): the scale of the error a rounding of w makes, which
     * tests/test_cuda_prefill.c bounds bf16-P kernels with. */
    float *abs_out;
} frigg_attn_args;
/* pool may be NULL (one thread). */
void frigg_cpu_attention(frigg_prec p, frigg_pool *pool, const frigg_attn_args *a);
/* Index of the largest value, lowest index on ties. */
int frigg_argmax(const float *x, int n);
/* The argmax over the ids a mask allows (bits[i / 32] bit i % 32; structured output): the first of equal values, as
 * frigg_argmax of the row with the others at -inf would give; an all-ones word is read straight, the others bit by
 * bit. -1 where the mask allows no id. */
int frigg_argmax_masked(const float *x, int n, const uint32_t *bits);

#endif
