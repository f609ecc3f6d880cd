/* cpu_ops.h — the CPU reference ops. Activations are fp32 arrays holding bf16-rounded values; every
 * place HF's bf16 model rounds is a frigg_round_bf16 here. These are also the reference the GPU ops are
 * compared with in tests. */
#ifndef FRIGG_CPU_OPS_H
#define FRIGG_CPU_OPS_H

#include <stdint.h>

#include "model.h"
#include "threadpool.h"
#include "util.h"

/* Reference precision, process-wide. 0 (default): round to bf16 everywhere HF's bf16 model rounds.
 * 1: round nowhere, which is HF's model run in float32 on the same (bf16-valued) weights — the tight,
 * structural comparison of MODEL.md T17. Set once before running; tests and frigg-parity use it. */
extern int frigg_cpu_fp32_reference;
static inline float frigg_act(float x) { return frigg_cpu_fp32_reference ? x : frigg_round_bf16(x); }

/* y[t][o] = bf16(Σ_i W[o][i]·x[t][i]) for t < T, o < W.rows; fp32 accumulation. */
void frigg_cpu_linear(frigg_pool *pool, const frigg_mat *W, const float *x, int T, float *y);
/* y = bf16(x · rsqrt(mean(x²) + eps)) row by row, fp32 inside (no weight, trap T10). */
void frigg_cpu_rmsnorm(const float *x, int T, int D, double eps, float *y);
/* RoPE tables for positions [p0, p0+T): cos/sin [T][head_dim], bf16-rounded (MODEL.md §3.2). */
void frigg_cpu_rope_tables(const frigg_config *c, int p0, int T, float *cos_t, float *sin_t);
/* In place, rotate-half RoPE on x[T][heads*head_dim] with HF's bf16 rounding after each op. */
void frigg_cpu_rope_apply(float *x, int T, int heads, int head_dim, const float *cos_t, const float *sin_t);
/* bf16(bf16(silu(g)) * u), silu in fp32. */
void frigg_cpu_swiglu(const float *g, const float *u, int n, float *out);
/* Index of the largest value, lowest index on ties. */
int frigg_argmax(const float *x, int n);

#endif
