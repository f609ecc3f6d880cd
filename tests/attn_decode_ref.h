/* attn_decode_ref.h — the CPU reference for decode attention (fk_attn_decode) on the device's own cache
 * layout, and the tolerance check its callers share: tests/test_cuda_attn_decode.c and the microbenchmark
 * kernels/dev/attn_decode.cu (compiled as C++, hence the casts). The arithmetic is the CPU engine's
 * (common/cpu_engine.c attn_range): fp32 dot products, fp32 softmax, P·V accumulated as (p/sum)·v, one bf16
 * rounding of the output, then the gate bf16(bf16(sigmoid(g)) * o). */
#ifndef FRIGG_ATTN_DECODE_REF_H
#define FRIGG_ATTN_DECODE_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "util.h"

/* y[b][h*hd + d] for rows b < B: row b's query q[b] attends to positions [0, row_pos[b]] of sequence
 * row_seq[b], whose cache starts at kc/vc + row_seq[b] * seq_stride, laid out [head][max_ctx][hd] (bf16).
 * q [B][H*hd], gqkv [B][4*H*hd] (the gate is its first H*hd columns), all bf16 bit patterns. */
static inline void attn_decode_ref(const uint16_t *q, const uint16_t *kc, const uint16_t *vc, long long seq_stride,
                                   const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H,
                                   int hd, int max_ctx, float *y) {
    int D = H * hd;
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int b = 0; b < B; b++) {
        int nk = row_pos[b] + 1;
        float *p = (float *)malloc(sizeof(float) * (size_t)nk), *acc = (float *)malloc(sizeof(float) * (size_t)hd);
        for (int h = 0; h < H; h++) {
            const uint16_t *K = kc + (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * hd;
            const uint16_t *V = vc + (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * hd;
            const uint16_t *qr = q + (size_t)b * D + (size_t)h * hd;
            float mx = -INFINITY;
            for (int j = 0; j < nk; j++) {
                float s = 0;
                for (int d = 0; d < hd; d++) s += frigg_bf16_to_f32(qr[d]) * frigg_bf16_to_f32(K[(size_t)j * hd + d]);
                p[j] = s * scale;
                if (p[j] > mx) mx = p[j];
            }
            float sum = 0;
            for (int j = 0; j < nk; j++) {
                p[j] = expf(p[j] - mx);
                sum += p[j];
            }
            for (int d = 0; d < hd; d++) acc[d] = 0;
            for (int j = 0; j < nk; j++) {
                float w = p[j] / sum;
                for (int d = 0; d < hd; d++) acc[d] += w * frigg_bf16_to_f32(V[(size_t)j * hd + d]);
            }
            for (int d = 0; d < hd; d++) {
                float g = frigg_bf16_to_f32(gqkv[(size_t)b * 4 * D + (size_t)h * hd + d]);
                float sg = frigg_round_bf16(1.0f / (1.0f + expf(-g)));
                y[(size_t)b * D + (size_t)h * hd + d] = frigg_round_bf16(sg * frigg_round_bf16(acc[d]));
            }
        }
        free(p);
        free(acc);
    }
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
