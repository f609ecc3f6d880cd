/* test_cuda_prefill.c — every prefill attention implementation (FK_PREFILL_*) against a double-precision
 * reference with the PrefixLM mask, at the edges the tiled kernels classify: lengths around the 16-row warp,
 * 64-key tile and 64/128-row block boundaries, prefix lengths on and next to tile edges (fully visible,
 * partly visible and skipped tiles), head dims 16..128, a single token. Also: nothing is written past row T
 * (poisoned rows stay poisoned), bf16 P really differs from the hi+lo split, an unknown implementation or
 * FRIGG_PREFILL_ATTN name is an error. Skips without CUDA or a GPU.
 * Tolerance (as tests/test_cuda_ops.c expect_close): every element within 2 bf16 ulps of the reference plus
 * rms/128; with P as hi+lo at most 2% of the elements differ at all (fp32 sums in another order). With P
 * rounded to bf16 (SDPA/flash practice) o moves by ~0.2 ulp before its own rounding, so up to half of the
 * elements may sit one ulp away; the magnitude bound is unchanged. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "backend.h"
#include "../kernels/kernels.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { /* uniform [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frigg_round_bf16(frand() * scale);
}
static uint16_t *to_dev(const float *x, size_t n) {
    uint16_t *h = malloc(n * 2), *d = NULL;
    for (size_t i = 0; i < n; i++) h[i] = frigg_f32_to_bf16(x[i]);
    cudaMalloc((void **)&d, n * 2 + 16);
    cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice);
    free(h);
    return d;
}

/* y rows [0, T) with the gate; K, V in the cache layout [head][max_ctx][hd]. */
static void ref_attention(const float *q, const float *K, const float *V, const float *g, int T, int H, int hd,
                          int max_ctx, int P, float *y) {
    int D = H * hd;
    double *p = malloc(sizeof(double) * T), *o = malloc(sizeof(double) * hd);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < T; j++) {
                if (!(j <= t || (t < P && j < P))) {
                    p[j] = -INFINITY;
                    continue;
                }
                double s = 0;
                for (int d = 0; d < hd; d++) s += (double)q[(size_t)t * D + h * hd + d] * K[((size_t)h * max_ctx + j) * hd + d];
                p[j] = s / sqrt((double)hd);
                if (p[j] > mx) mx = p[j];
            }
            for (int d = 0; d < hd; d++) o[d] = 0;
            for (int j = 0; j < T; j++) {
                if (p[j] == -INFINITY) continue;
                double w = exp(p[j] - mx);
                sum += w;
                for (int d = 0; d < hd; d++) o[d] += w * V[((size_t)h * max_ctx + j) * hd + d];
            }
            for (int d = 0; d < hd; d++) {
                float sg = frigg_round_bf16(1.0f / (1.0f + expf(-g[(size_t)t * 4 * D + h * hd + d])));
                y[(size_t)t * D + h * hd + d] = frigg_round_bf16(sg * frigg_round_bf16((float)(o[d] / sum)));
            }
        }
    free(p);
    free(o);
}

static int is_bf16p(int impl) {
    return impl == FK_PREFILL_MMA_BF16P || impl == FK_PREFILL_MMA8_BF16P || impl == FK_PREFILL_MMA_BF16P_2B;
}

/* Returns how many elements of got differ from ref; records a failure past the bound. */
static size_t expect_close(const char *what, const uint16_t *got, const float *ref, size_t n, double frac) {
    size_t off = 0, bad = 0;
    double ss = 0, worst = 0;
    for (size_t i = 0; i < n; i++) ss += (double)ref[i] * ref[i];
    double floor_abs = sqrt(ss / (double)(n ? n : 1)) / 128.0;
    for (size_t i = 0; i < n; i++) {
        float v = frigg_bf16_to_f32(got[i]);
        if (v == ref[i]) continue;
        off++;
        double d = fabs((double)v - ref[i]);
        if (!(d <= 2.0 * fabs(ref[i]) / 128.0 + floor_abs)) bad++; /* NaN (poison) lands here */
        if (!(d <= worst)) worst = d;
    }
    CHECK(bad == 0 && off <= frac * n + 1, "%s: %zu of %zu beyond tolerance, %zu differ (worst |d| %.3g, rms/128 %.3g)", what,
          bad, n, off, worst, floor_abs);
    return off;
}

static void test_shapes(void) {
    /* T, heads, head_dim */
    static const int cfgs[][3] = {{1, 1, 128},  {17, 2, 128}, {65, 1, 128}, {129, 2, 128}, {300, 2, 128},
                                  {520, 1, 128}, {200, 3, 64}, {130, 2, 32}, {100, 4, 16}};
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        int T = cfgs[ci][0], H = cfgs[ci][1], hd = cfgs[ci][2], D = H * hd, max_ctx = T + 5, extra = 3;
        float *q = malloc(sizeof(float) * T * D), *Kc = malloc(sizeof(float) * H * max_ctx * hd);
        float *Vc = malloc(sizeof(float) * H * max_ctx * hd), *g = malloc(sizeof(float) * T * 4 * D);
        float *ref = malloc(sizeof(float) * T * D);
        uint16_t *got = malloc((size_t)(T + extra) * D * 2), *split = malloc((size_t)T * D * 2);
        fill(q, (size_t)T * D, 2.0f);
        fill(Kc, (size_t)H * max_ctx * hd, 2.0f); /* positions >= T hold values too: they must stay unread */
        fill(Vc, (size_t)H * max_ctx * hd, 1.0f);
        fill(g, (size_t)T * 4 * D, 3.0f);
        uint16_t *dq = to_dev(q, (size_t)T * D), *dk = to_dev(Kc, (size_t)H * max_ctx * hd), *dv = to_dev(Vc, (size_t)H * max_ctx * hd);
        uint16_t *dg = to_dev(g, (size_t)T * 4 * D), *dy;
        cudaMalloc((void **)&dy, (size_t)(T + extra) * D * 2);
        int cand[] = {0, 1, T / 2, T - 1, T, 15, 16, 63, 64, 65, 127, 128, 129, 256}, prefixes[16], np = 0;
        for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
            int P = cand[i], dup = 0;
            if (P < 0 || P > T) continue;
            for (int j = 0; j < np; j++) dup |= prefixes[j] == P;
            if (!dup) prefixes[np++] = P;
        }
        for (int pi = 0; pi < np; pi++) {
            int P = prefixes[pi];
            ref_attention(q, Kc, Vc, g, T, H, hd, max_ctx, P, ref);
            for (int impl = 0; impl < FK_PREFILL_NIMPL; impl++) {
                fk_set_prefill_impl(impl);
                cudaMemset(dy, 0xff, (size_t)(T + extra) * D * 2); /* bf16 NaN */
                CHECK(fk_attn_prefill(dq, dk, dv, dg, T, H, hd, max_ctx, P, dy, 0) == 0, "%s", frigg_error());
                cudaDeviceSynchronize();
                cudaMemcpy(got, dy, (size_t)(T + extra) * D * 2, cudaMemcpyDeviceToHost);
                char what[96];
                snprintf(what, sizeof what, "attn_prefill %s T=%d H=%d hd=%d P=%d", fk_prefill_impl_name(impl), T, H, hd, P);
                expect_close(what, got, ref, (size_t)T * D, is_bf16p(impl) ? 0.5 : 0.02);
                int untouched = 1;
                for (size_t i = (size_t)T * D; i < (size_t)(T + extra) * D; i++) untouched &= got[i] == 0xffff;
                CHECK(untouched, "%s: wrote past row T", what);
                if (impl == FK_PREFILL_MMA) memcpy(split, got, (size_t)T * D * 2);
                /* bf16 P must actually round P: on a long enough row some output differs from the hi+lo kernel */
                if (impl == FK_PREFILL_MMA_BF16P && T >= 129 && P == T)
                    CHECK(memcmp(split, got, (size_t)T * D * 2) != 0, "%s: identical to the hi+lo kernel", what);
            }
        }
        fk_set_prefill_impl(FK_PREFILL_MMA);
        cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dg); cudaFree(dy);
        free(q); free(Kc); free(Vc); free(g); free(ref); free(got); free(split);
    }
}

static void test_errors(void) {
    uint16_t *d;
    cudaMalloc((void **)&d, 4096);
    fk_set_prefill_impl(FK_PREFILL_NIMPL);
    CHECK(fk_attn_prefill(d, d, d, d, 4, 1, 128, 4, 4, d, 0) != 0, "an unknown prefill implementation was accepted");
    fk_set_prefill_impl(FK_PREFILL_MMA);
    CHECK(fk_attn_prefill(d, d, d, d, 4, 1, 48, 4, 4, d, 0) != 0, "head_dim 48 was accepted");
    cudaFree(d);
    /* The environment choice: a known name selects it, anything else fails fk_init. */
    const char *old = getenv("FRIGG_PREFILL_ATTN");
    char *saved = old ? strdup(old) : NULL;
    setenv("FRIGG_PREFILL_ATTN", "mma8-bf16p", 1);
    CHECK(fk_init() == 0 && fk_get_prefill_impl() == FK_PREFILL_MMA8_BF16P, "FRIGG_PREFILL_ATTN=mma8-bf16p not taken");
    setenv("FRIGG_PREFILL_ATTN", "fast", 1);
    CHECK(fk_init() != 0, "FRIGG_PREFILL_ATTN=fast was accepted");
    if (saved) setenv("FRIGG_PREFILL_ATTN", saved, 1);
    else unsetenv("FRIGG_PREFILL_ATTN");
    free(saved);
    CHECK(fk_init() == 0, "fk_init: %s", frigg_error());
    fk_set_prefill_impl(FK_PREFILL_MMA);
}
#endif

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_prefill");
#ifndef FRIGG_CUDA
    SKIP("built without CUDA (FRIGG_CUDA=0)");
#else
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device present");
    } else {
        CHECK(fk_init() == 0, "fk_init: %s", frigg_error());
        test_shapes();
        test_errors();
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "device error: %s", cudaGetErrorString(e));
    }
#endif
    TEST_MAIN_END();
}
