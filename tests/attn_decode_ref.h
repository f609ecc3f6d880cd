/* attn_decode_ref.h — the CPU reference for decode attention (fk_attn_decode) on the device's own cache
 * layout, and the tolerance check its callers share: tests/test_cuda_attn_decode.c and the microbenchmark
 * kernels/dev/attn_decode.cu (compiled as C++, hence the casts). The arithmetic is the CPU engine's own
 * attention op (frigg_cpu_attention: fp32 dot products, fp32 softmax, P·V accumulated as (p/sum)·v, one bf16
 * rounding of the output, then the gate bf16(bf16(sigmoid(g)) * o)), run on the bf16 inputs as floats. */
#ifndef FRIGG_ATTN_DECODE_REF_H
#define FRIGG_ATTN_DECODE_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "engine/cpu_ops.h"
#include "base/util.h"
#ifdef __cplusplus
}
#endif

/* y[b][h*hd + d] for rows b < B: row b's query q[b] attends to positions [0, row_pos[b]] of sequence
 * row_seq[b], whose cache starts at kc/vc + row_seq[b] * seq_stride, laid out [head][max_ctx][hd] (bf16).
 * q [B][H*hd], gqkv [B][4*H*hd] (the gate is its first H*hd columns), all bf16 bit patterns. */
static inline void attn_decode_ref(const uint16_t *q, const uint16_t *kc, const uint16_t *vc, long long seq_stride,
                                   const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H,
                                   int hd, int max_ctx, float *y) {
    int D = H * hd;
    float *qf = (float *)malloc(sizeof(float) * (size_t)D), *gf = (float *)malloc(sizeof(float) * (size_t)D);
    for (int b = 0; b < B; b++) {
        int nk = row_pos[b] + 1;
        float *kf = (float *)malloc(sizeof(float) * (size_t)H * nk * hd), *vf = (float *)malloc(sizeof(float) * (size_t)H * nk * hd);
        for (int h = 0; h < H; h++)
            for (int j = 0; j < nk; j++)
                for (int d = 0; d < hd; d++) {
                    size_t src = (size_t)row_seq[b] * seq_stride + ((size_t)h * max_ctx + j) * hd + d;
                    kf[((size_t)h * nk + j) * hd + d] = frigg_bf16_to_f32(kc[src]);
                    vf[((size_t)h * nk + j) * hd + d] = frigg_bf16_to_f32(vc[src]);
                }
        for (int i = 0; i < D; i++) {
            qf[i] = frigg_bf16_to_f32(q[(size_t)b * D + i]);
            gf[i] = frigg_bf16_to_f32(gqkv[(size_t)b * 4 * D + i]);
        }
        frigg_attn_args a;
        memset(&a, 0, sizeof a);
        a.q = qf;
        a.q_stride = (size_t)D;
        a.k = kf;
        a.v = vf;
        a.pos_stride = (size_t)hd;
        a.head_stride = (size_t)nk * hd;
        a.gate = gf;
        a.gate_stride = (size_t)D;
        a.T = 1;
        a.p0 = row_pos[b];
        a.prefix_len = 0; /* a decode row is causal */
        a.heads = H;
        a.head_dim = hd;
        a.out = y + (size_t)b * D;
        a.out_stride = (size_t)D;
        frigg_cpu_attention(FRIGG_PREC_BF16, NULL, &a);
        free(kf);
        free(vf);
    }
    free(qf);
    free(gf);
}

/* The tolerance of tests/test_cuda_ops.c's expect_close: fp32 sums in another order move an output across a
 * bf16 rounding boundary now and then, so an element may differ by about 2 bf16 ulps of itself plus
 * rms(ref)/128, and at most a fraction `frac` of the elements may differ at all. Returns 1 when `got` is
 * within it; *off, *bad (beyond tolerance) and *worst describe the differences. NaN never passes. */
static inline int attn_decode_close(const float *got, const float *ref, size_t n, double frac, size_t *off, size_t *bad,
                                    double *worst) {
    double ss = 0;
    *off = *bad = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) ss += (double)ref[i] * ref[i];
    double floor_abs = sqrt(ss / (double)(n ? n : 1)) / 128.0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] == ref[i]) continue;
        (*off)++;
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= 2.0 * fabs(ref[i]) / 128.0 + floor_abs)) (*bad)++;
        if (d > *worst || d != d) *worst = d;
    }
    return *bad == 0 && (double)*off <= frac * (double)n + 1;
}

#endif
