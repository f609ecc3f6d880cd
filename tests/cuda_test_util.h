/* cuda_test_util.h — what the CUDA kernel tests share: a seeded uniform generator, bf16 host <-> device copies,
 * poisoning, and the closeness check of bf16 outputs. Header-only (static inline) because the check reports
 * through harness.h's per-test counters; define CUDA_TEST_SEED before including it (each test keeps its own
 * random sequence). Only in CUDA builds. */
#ifndef FRIGG_TESTS_CUDA_TEST_UTIL_H
#define FRIGG_TESTS_CUDA_TEST_UTIL_H
#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "base/util.h"

static uint64_t ct_rng = CUDA_TEST_SEED;
static inline float ct_frand(void) { /* uniform [-1, 1) */
    ct_rng ^= ct_rng << 13;
    ct_rng ^= ct_rng >> 7;
    ct_rng ^= ct_rng << 17;
    return (float)((ct_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
/* bf16-representable values, so the device copy holds exactly what the CPU reference sees */
static inline void ct_fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frigg_round_bf16(ct_frand() * scale);
}
static inline uint16_t *ct_to_dev(const float *x, size_t n) {
    uint16_t *h = malloc(n * 2), *d = NULL;
    for (size_t i = 0; i < n; i++) h[i] = frigg_f32_to_bf16(x[i]);
    cudaMalloc((void **)&d, n * 2 + 16);
    cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice);
    free(h);
    return d;
}
static inline void ct_from_dev(const uint16_t *d, size_t n, float *x) {
    uint16_t *h = malloc(n * 2);
    cudaDeviceSynchronize();
    cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; i++) x[i] = frigg_bf16_to_f32(h[i]);
    free(h);
}
static inline void ct_poison(uint16_t *d, size_t n) { cudaMemset(d, 0xff, n * 2); } /* bf16 NaN everywhere */

/* Equal, or close: fp32 sums in another order move a result across a bf16 rounding boundary now and then
 * (a fraction `frac` of the elements may differ at all), and an input that is itself one ulp off (e.g. a
 * normalised row whose rsqrt differs in the last bit) moves an output by about 2^-8 of the row's typical
 * magnitude. Anything beyond 2 ulps + rms(ref) * 2^-7 is a real error; NaN (poison left) is too. */
static inline void ct_expect_close(const char *what, const float *got, const float *ref, size_t n, double frac) {
    size_t off = 0, bad = 0;
    double worst = 0, ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)ref[i] * ref[i];
    double floor_abs = sqrt(ss / (double)(n ? n : 1)) / 128.0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] == ref[i]) continue;
        off++;
        double d = fabs(got[i] - ref[i]);
        if (!(d <= 2.0 * fabs(ref[i]) / 128.0 + floor_abs)) bad++;
        if (d > worst) worst = d;
    }
    CHECK(bad == 0 && off <= frac * n + 1, "%s: %zu of %zu beyond tolerance, %zu differ (worst |d| %.3g, rms/128 %.3g)", what,
          bad, n, off, worst, floor_abs);
}
#endif
#endif
