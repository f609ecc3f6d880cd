/* test_cuda_prefill.c — every prefill attention implementation (FK_PREFILL_*) against the CPU attention op
 * (frigg_cpu_attention, fp32, the CPU engine's arithmetic) with the PrefixLM mask, at the edges the tiled kernels classify: lengths around the 16-row warp,
 * 64-key tile and 64/128-row block boundaries, prefix lengths on and next to tile edges (fully visible,
 * partly visible and skipped tiles), head dims 16..128, a single token. Also: nothing is written past row T
 * (poisoned rows stay poisoned), bf16 P really differs from the hi+lo split and is the default, an unknown
 * implementation is refused by the set call and leaves the choice as it was. Also the prefill elementwise kernels (rmsnorm,
 * add_rmsnorm, run_end, swiglu, rope_kv) on both of their paths — 16-byte chunks (D, I a multiple of 8, D up to
 * 2048; head_dim a multiple of 16) and the general one — against the CPU ops, at Mimir's sizes and at the
 * edges of the chunked paths (lanes without a chunk, rows not a multiple of the rows per block, in place).
 * Skips without CUDA or a GPU.
 * Tolerance (as tests/test_cuda_ops.c expect_close): every element within 2 bf16 ulps of the reference plus
 * rms/128; with P as hi+lo at most 2% of the elements differ at all (fp32 sums in another order).
 * With P rounded to bf16 (the default kernel; HF's own practice) there is one more, derived term. The kernel
 * feeds the tensor cores w_j = bf16(p_j) = p_j (1 + d_j) with |d_j| <= 2^-9 (round to nearest, 8 significant
 * bits; the online-softmax rescales are fp32, ~2^-24, inside the first term) but divides by l = sum_j p_j of the
 * unrounded p. So o' - o = sum_j d_j p_j v_j / l, and |o' - o| <= 2^-9 * A with A = sum_j p_j |v_j| / sum_j p_j
 * (<= max |v_j|): a near-zero o whose terms cancel can move by far more ulps of itself than a large one.
 * The output y = bf16(bf16(sg) * bf16(o)) carries that through the gate (|sg| <= 1): the bound adds
 * sg * 2^-9 * A * (1 + 2^-6), the last factor for the two roundings (o, y) applied to the moved value.
 * A comes from the reference op (abs_out), per element. Up to half of the elements may then differ by an
 * ulp (typically ~35%). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "engine/backend.h"
#include "model/config.h"
#include "engine/cpu_ops.h"
#include "../kernels/kernels.h"
#define CUDA_TEST_SEED 0x2545F4914F6CDD1Dull
#include "cuda_test_util.h"

static fk_ctx *kctx; /* the context every launch below uses */


/* y rows [0, T) with the gate, from the CPU attention op; K, V in the cache layout [head][max_ctx][hd].
 * bf16p_bound[i]: the bf16-P term of y[i]'s tolerance, sg * 2^-9 * sum_j p_j |v_j| / sum_j p_j * (1 + 2^-6)
 * (see the header), from the op's abs_out. */
static void ref_attention(const float *q, const float *K, const float *V, const float *g, int T, int H, int hd,
                          int max_ctx, int P, float *y, double *bf16p_bound) {
    int D = H * hd;
    float *av = malloc(sizeof(float) * (size_t)T * D);
    frigg_attn_args a = {.q = q, .q_stride = D, .k = K, .v = V, .pos_stride = hd, .head_stride = (size_t)max_ctx * hd,
                         .gate = g, .gate_stride = 4 * D, .T = T, .p0 = 0, .prefix_len = P, .heads = H,
                         .head_dim = hd, .out = y, .out_stride = D, .abs_out = av};
    frigg_cpu_attention(FRIGG_PREC_BF16, NULL, &a);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) {
            float sg = frigg_round_bf16(1.0f / (1.0f + expf(-g[(size_t)t * 4 * D + i])));
            bf16p_bound[(size_t)t * D + i] = sg * ldexp(av[(size_t)t * D + i], -9) * (1.0 + ldexp(1.0, -6));
        }
    free(av);
}

static int is_bf16p(int impl) {
    return impl == FK_PREFILL_MMA_BF16P;
}

/* Returns how many elements of got differ from ref; records a failure past the bound. extra: a per-element
 * addition to the bound (the bf16-P term), or NULL. */
static size_t expect_close(const char *what, const uint16_t *got, const float *ref, const double *extra, size_t n,
                           double frac) {
    size_t off = 0, bad = 0;
    double ss = 0, worst = 0;
    for (size_t i = 0; i < n; i++) ss += (double)ref[i] * ref[i];
    double floor_abs = sqrt(ss / (double)(n ? n : 1)) / 128.0;
    for (size_t i = 0; i < n; i++) {
        float v = frigg_bf16_to_f32(got[i]);
        if (v == ref[i]) continue;
        off++;
        double d = fabs((double)v - ref[i]);
        if (!(d <= 2.0 * fabs(ref[i]) / 128.0 + floor_abs + (extra ? extra[i] : 0.0))) bad++; /* NaN (poison) too */
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
        double *bound = malloc(sizeof(double) * T * D);
        uint16_t *got = malloc((size_t)(T + extra) * D * 2), *split = malloc((size_t)T * D * 2);
        ct_fill(q, (size_t)T * D, 2.0f);
        ct_fill(Kc, (size_t)H * max_ctx * hd, 2.0f); /* positions >= T hold values too: they must stay unread */
        ct_fill(Vc, (size_t)H * max_ctx * hd, 1.0f);
        ct_fill(g, (size_t)T * 4 * D, 3.0f);
        uint16_t *dq = ct_to_dev(q, (size_t)T * D), *dk = ct_to_dev(Kc, (size_t)H * max_ctx * hd), *dv = ct_to_dev(Vc, (size_t)H * max_ctx * hd);
        uint16_t *dg = ct_to_dev(g, (size_t)T * 4 * D), *dy;
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
            ref_attention(q, Kc, Vc, g, T, H, hd, max_ctx, P, ref, bound);
            static const int order[FK_PREFILL_NIMPL] = {FK_PREFILL_MMA, FK_PREFILL_MMA_BF16P}; /* hi+lo first: compared below */
            for (int ii = 0; ii < FK_PREFILL_NIMPL; ii++) {
                const int impl = order[ii];
                CHECK(fk_ctx_set_prefill_impl(kctx, impl) == 0, "%s", frigg_error());
                cudaMemset(dy, 0xff, (size_t)(T + extra) * D * 2); /* bf16 NaN */
                CHECK(fk_attn_prefill(kctx, dq, dk, dv, dg, T, H, hd, max_ctx, P, dy, 0) == 0, "%s", frigg_error());
                cudaDeviceSynchronize();
                cudaMemcpy(got, dy, (size_t)(T + extra) * D * 2, cudaMemcpyDeviceToHost);
                char what[96];
                snprintf(what, sizeof what, "attn_prefill %s T=%d H=%d hd=%d P=%d", fk_prefill_impl_name(impl), T, H, hd, P);
                expect_close(what, got, ref, is_bf16p(impl) ? bound : NULL, (size_t)T * D, is_bf16p(impl) ? 0.5 : 0.02);
                int untouched = 1;
                for (size_t i = (size_t)T * D; i < (size_t)(T + extra) * D; i++) untouched &= got[i] == 0xffff;
                CHECK(untouched, "%s: wrote past row T", what);
                if (impl == FK_PREFILL_MMA) memcpy(split, got, (size_t)T * D * 2);
                /* bf16 P must actually round P: on a long enough row some output differs from the hi+lo kernel */
                if (impl == FK_PREFILL_MMA_BF16P && T >= 129 && P == T)
                    CHECK(memcmp(split, got, (size_t)T * D * 2) != 0, "%s: identical to the hi+lo kernel", what);
            }
        }
        fk_ctx_set_prefill_impl(kctx, FK_PREFILL_MMA);
        cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dg); cudaFree(dy);
        free(q); free(Kc); free(Vc); free(g); free(ref); free(bound); free(got); free(split);
    }
}

/* fk_attn_prefill_group: prompts of different lengths and masks (whole prefix, causal, part prefix), in a cache of
 * three sequences out of order, give each prompt's own fk_attn_prefill result bit for bit, in both
 * implementations and at two head dims; a bad group is refused. */
static void test_group(void) {
    static const int hds[] = {128, 64};
    for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
        const int H = 3, hd = hds[hi], D = H * hd, max_ctx = 160, n = 3;
        const int Ts[3] = {65, 17, 130}, Ps[3] = {65, 0, 100}, seqs[3] = {2, 0, 1};
        const long long stride = (long long)H * max_ctx * hd;
        int rows = 0, r0[3];
        for (int p = 0; p < n; p++) {
            r0[p] = rows;
            rows += Ts[p];
        }
        float *q = malloc(sizeof(float) * rows * D), *g = malloc(sizeof(float) * rows * 4 * D);
        float *kv = malloc(sizeof(float) * 3 * stride);
        ct_fill(q, (size_t)rows * D, 2.0f);
        ct_fill(g, (size_t)rows * 4 * D, 3.0f);
        ct_fill(kv, (size_t)3 * stride, 2.0f);
        uint16_t *dq = ct_to_dev(q, (size_t)rows * D), *dg = ct_to_dev(g, (size_t)rows * 4 * D);
        uint16_t *dk = ct_to_dev(kv, (size_t)3 * stride);
        ct_fill(kv, (size_t)3 * stride, 1.0f);
        uint16_t *dv = ct_to_dev(kv, (size_t)3 * stride), *dy1, *dy2;
        cudaMalloc((void **)&dy1, (size_t)rows * D * 2);
        cudaMalloc((void **)&dy2, (size_t)rows * D * 2);
        uint16_t *a = malloc((size_t)rows * D * 2), *b = malloc((size_t)rows * D * 2);
        fk_prefill_group grp;
        memset(&grp, 0, sizeof grp);
        grp.n = n;
        for (int p = 0; p < n; p++) {
            grp.row0[p] = r0[p];
            grp.T[p] = Ts[p];
            grp.P[p] = Ps[p];
            grp.kv_off[p] = seqs[p] * stride;
        }
        for (int impl = 0; impl < FK_PREFILL_NIMPL; impl++) {
            CHECK(fk_ctx_set_prefill_impl(kctx, impl) == 0, "%s", frigg_error());
            cudaMemset(dy1, 0xff, (size_t)rows * D * 2);
            cudaMemset(dy2, 0xff, (size_t)rows * D * 2);
            CHECK(fk_attn_prefill_group(kctx, dq, dk, dv, dg, &grp, H, hd, max_ctx, dy1, 0) == 0, "%s", frigg_error());
            for (int p = 0; p < n; p++)
                CHECK(fk_attn_prefill(kctx, dq + (size_t)r0[p] * D, dk + seqs[p] * stride, dv + seqs[p] * stride,
                                      dg + (size_t)r0[p] * 4 * D, Ts[p], H, hd, max_ctx, Ps[p], dy2 + (size_t)r0[p] * D, 0) == 0,
                      "%s", frigg_error());
            cudaDeviceSynchronize();
            cudaMemcpy(a, dy1, (size_t)rows * D * 2, cudaMemcpyDeviceToHost);
            cudaMemcpy(b, dy2, (size_t)rows * D * 2, cudaMemcpyDeviceToHost);
            size_t diff = 0, nan = 0;
            for (size_t i = 0; i < (size_t)rows * D; i++) {
                diff += a[i] != b[i];
                nan += a[i] == 0xffff;
            }
            CHECK(diff == 0 && nan == 0, "attn_prefill_group %s hd=%d: %zu of %zu values differ from the prompts' own "
                  "launches, %zu unwritten", fk_prefill_impl_name(impl), hd, diff, (size_t)rows * D, nan);
        }
        fk_prefill_group bad = grp;
        bad.n = 0;
        CHECK(fk_attn_prefill_group(kctx, dq, dk, dv, dg, &bad, H, hd, max_ctx, dy1, 0) != 0, "a group of 0 was accepted");
        bad.n = FK_PREFILL_GROUP_MAX + 1;
        CHECK(fk_attn_prefill_group(kctx, dq, dk, dv, dg, &bad, H, hd, max_ctx, dy1, 0) != 0, "a group past the most was accepted");
        bad = grp;
        bad.T[1] = max_ctx + 1;
        CHECK(fk_attn_prefill_group(kctx, dq, dk, dv, dg, &bad, H, hd, max_ctx, dy1, 0) != 0, "a prompt past the context was accepted");
        fk_ctx_set_prefill_impl(kctx, FK_PREFILL_MMA);
        cudaFree(dq); cudaFree(dg); cudaFree(dk); cudaFree(dv); cudaFree(dy1); cudaFree(dy2);
        free(q); free(g); free(kv); free(a); free(b);
    }
}

static void test_errors(void) {
    uint16_t *d;
    cudaMalloc((void **)&d, 4096);
    CHECK(fk_ctx_set_prefill_impl(kctx, FK_PREFILL_MMA) == 0, "%s", frigg_error());
    CHECK(fk_ctx_set_prefill_impl(kctx, FK_PREFILL_NIMPL) == -1, "an unknown prefill implementation was accepted");
    CHECK(fk_ctx_set_prefill_impl(kctx, -1) == -1, "prefill implementation -1 was accepted");
    CHECK(fk_ctx_prefill_impl(kctx) == FK_PREFILL_MMA, "a refused implementation changed the choice");
    CHECK(!strcmp(fk_prefill_impl_name(FK_PREFILL_MMA_BF16P), "mma-bf16p") && !strcmp(fk_prefill_impl_name(FK_PREFILL_MMA), "mma") &&
              !strcmp(fk_prefill_impl_name(FK_PREFILL_NIMPL), "?"), "prefill implementation names");
    CHECK(fk_attn_prefill(kctx, d, d, d, d, 4, 1, 48, 4, 4, d, 0) != 0, "head_dim 48 was accepted");
    cudaFree(d);
}
static float *from_dev(const uint16_t *d, size_t n) {
    uint16_t *h = malloc(n * 2);
    float *f = malloc(n * 4);
    cudaDeviceSynchronize();
    cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; i++) f[i] = frigg_bf16_to_f32(h[i]);
    free(h);
    return f;
}
static int eltwise_general; /* which path test_norms / test_swiglu / test_rope exercise */
static const char *path(void) { return eltwise_general ? " (general path)" : ""; }
/* Elementwise outputs: the bound of expect_close on floats, at most 1% of the elements off at all. */
static void expect_close_f(const char *what, const float *got, const float *ref, size_t n) {
    uint16_t *g16 = malloc(n * 2);
    for (size_t i = 0; i < n; i++) g16[i] = frigg_f32_to_bf16(got[i]);
    expect_close(what, g16, ref, NULL, n, 0.01);
    free(g16);
}

/* rmsnorm (also in place), add_rmsnorm (the sum exactly bf16(h + y)), run_end (x exactly bf16(state + other)).
 * D: 1536 (Mimir: 6 chunks per lane), 2048 (all 8), 40 (5 lanes of 32 hold a chunk), 2056 and 36 (general
 * path); T: 1, 7, 9 (not multiples of the 4 rows per block). */
static void test_norms(void) {
    static const int shapes[][2] = {{7, 1536}, {1, 1536}, {9, 2048}, {5, 40}, {3, 2056}, {6, 36}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int T = shapes[si][0], D = shapes[si][1];
        size_t n = (size_t)T * D;
        float *h = malloc(n * 4), *y = malloc(n * 4), *o = malloc(n * 4), *ref = malloc(n * 4), *hs = malloc(n * 4);
        ct_fill(h, n, 3.0f);
        ct_fill(y, n, 1.0f);
        ct_fill(o, n, 1.0f);
        uint16_t *dh = ct_to_dev(h, n), *dy = ct_to_dev(y, n), *dother = ct_to_dev(o, n), *da, *ds;
        cudaMalloc((void **)&da, n * 2 + 16);
        cudaMalloc((void **)&ds, n * 2 + 16);
        char what[96];
        frigg_cpu_rmsnorm(FRIGG_PREC_BF16, h, T, D, 1e-6, ref);
        cudaMemset(da, 0xff, n * 2);
        CHECK(fk_rmsnorm(kctx, dh, da, T, D, 1e-6f, 0) == 0, "%s", frigg_error());
        float *got = from_dev(da, n);
        snprintf(what, sizeof what, "rmsnorm T=%d D=%d%s", T, D, path());
        expect_close_f(what, got, ref, n);
        free(got);
        /* in place: in == out */
        uint16_t *dcopy = ct_to_dev(h, n);
        CHECK(fk_rmsnorm(kctx, dcopy, dcopy, T, D, 1e-6f, 0) == 0, "%s", frigg_error());
        got = from_dev(dcopy, n);
        snprintf(what, sizeof what, "rmsnorm in place T=%d D=%d%s", T, D, path());
        expect_close_f(what, got, ref, n);
        free(got);
        cudaFree(dcopy);
        for (size_t i = 0; i < n; i++) hs[i] = frigg_round_bf16(h[i] + y[i]);
        frigg_cpu_rmsnorm(FRIGG_PREC_BF16, hs, T, D, 1e-6, ref);
        cudaMemset(da, 0xff, n * 2);
        CHECK(fk_add_rmsnorm(kctx, dh, dy, da, T, D, 1e-6f, 0) == 0, "%s", frigg_error());
        got = from_dev(dh, n);
        CHECK(!memcmp(got, hs, n * 4), "add_rmsnorm T=%d D=%d%s: the residual sum is not bf16(h + y)", T, D, path());
        free(got);
        got = from_dev(da, n);
        snprintf(what, sizeof what, "add_rmsnorm T=%d D=%d%s", T, D, path());
        expect_close_f(what, got, ref, n);
        free(got);
        cudaMemset(ds, 0xff, n * 2);
        CHECK(fk_run_end(kctx, dh, ds, dother, T, D, 1e-6f, 0) == 0, "%s", frigg_error());
        float *st = from_dev(ds, n);
        snprintf(what, sizeof what, "run_end state T=%d D=%d%s", T, D, path());
        expect_close_f(what, st, ref, n);
        got = from_dev(dh, n);
        int ok = 1;
        for (size_t i = 0; i < n; i++) ok &= got[i] == frigg_round_bf16(st[i] + o[i]);
        CHECK(ok, "run_end T=%d D=%d%s: next input is not bf16(state + other)", T, D, path());
        free(got);
        free(st);
        cudaFree(dh); cudaFree(dy); cudaFree(dother); cudaFree(da); cudaFree(ds);
        free(h); free(y); free(o); free(ref); free(hs);
    }
}

/* I: 4096 (Mimir), 8 (one chunk per row), 700 and 12 (general path); T 3 and 33. */
static void test_swiglu(void) {
    static const int shapes[][2] = {{3, 4096}, {33, 8}, {3, 700}, {5, 12}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int T = shapes[si][0], I = shapes[si][1];
        float *gu = malloc(sizeof(float) * T * 2 * I), *ref = malloc(sizeof(float) * T * I);
        ct_fill(gu, (size_t)T * 2 * I, 6.0f);
        for (int t = 0; t < T; t++) frigg_cpu_swiglu(FRIGG_PREC_BF16, gu + (size_t)t * 2 * I, gu + (size_t)t * 2 * I + I, I, ref + (size_t)t * I);
        uint16_t *dgu = ct_to_dev(gu, (size_t)T * 2 * I), *dm;
        cudaMalloc((void **)&dm, (size_t)T * I * 2 + 16);
        cudaMemset(dm, 0xff, (size_t)T * I * 2);
        CHECK(fk_swiglu(kctx, dgu, T, I, dm, 0) == 0, "%s", frigg_error());
        float *got = from_dev(dm, (size_t)T * I);
        char what[96];
        snprintf(what, sizeof what, "swiglu T=%d I=%d%s", T, I, path());
        expect_close_f(what, got, ref, (size_t)T * I);
        free(got);
        cudaFree(dgu); cudaFree(dm);
        free(gu); free(ref);
    }
}

/* rope_kv, bit-exact against frigg_cpu_rope_apply (q, k) and a copy (v), rows of two sequences at scattered
 * positions. head_dim 128 (Mimir), 64, 16 (one chunk per half) on the chunked path; 8 and 24 on the general. */
static void test_rope(void) {
    static const int shapes[][3] = {{12, 128, 70}, {3, 64, 9}, {2, 16, 5}, {2, 8, 4}, {3, 24, 6}}; /* H, hd, T */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int H = shapes[si][0], hd = shapes[si][1], T = shapes[si][2], D = H * hd, max_ctx = 80;
        frigg_config c;
        memset(&c, 0, sizeof c);
        c.head_dim = hd;
        c.num_heads = H;
        c.rope_theta = 10000.0;
        float *cs = malloc(sizeof(float) * max_ctx * hd), *sn = malloc(sizeof(float) * max_ctx * hd);
        frigg_cpu_rope_tables(FRIGG_PREC_BF16, &c, 0, max_ctx, cs, sn);
        float *gqkv = malloc(sizeof(float) * T * 4 * D);
        ct_fill(gqkv, (size_t)T * 4 * D, 3.0f);
        int32_t *pos = malloc(4 * T), *seq = malloc(4 * T), *dpos, *dseq;
        for (int t = 0; t < T; t++) {
            seq[t] = t % 2;
            pos[t] = (t * 37 + 5) % max_ctx;
            for (int u = 0; u < t; u++) /* distinct (seq, pos) so no row overwrites another */
                if (seq[u] == seq[t] && pos[u] == pos[t]) pos[t] = (pos[t] + 1) % max_ctx, u = -1;
        }
        cudaMalloc((void **)&dpos, 4 * T);
        cudaMalloc((void **)&dseq, 4 * T);
        cudaMemcpy(dpos, pos, 4 * T, cudaMemcpyHostToDevice);
        cudaMemcpy(dseq, seq, 4 * T, cudaMemcpyHostToDevice);
        uint16_t *dg = ct_to_dev(gqkv, (size_t)T * 4 * D), *dcos = ct_to_dev(cs, (size_t)max_ctx * hd), *dsin = ct_to_dev(sn, (size_t)max_ctx * hd);
        uint16_t *dq, *dk, *dv;
        long long seq_stride = (long long)H * max_ctx * hd;
        cudaMalloc((void **)&dq, (size_t)T * D * 2);
        cudaMalloc((void **)&dk, (size_t)2 * seq_stride * 2);
        cudaMalloc((void **)&dv, (size_t)2 * seq_stride * 2);
        cudaMemset(dq, 0xff, (size_t)T * D * 2);
        CHECK(fk_rope_kv(kctx, dg, T, H, hd, dseq, dpos, dcos, dsin, dq, dk, dv, seq_stride, max_ctx, 0) == 0, "%s", frigg_error());
        float *got = from_dev(dq, (size_t)T * D), *kc = from_dev(dk, (size_t)2 * seq_stride), *vc = from_dev(dv, (size_t)2 * seq_stride);
        float *q = malloc(sizeof(float) * D), *k = malloc(sizeof(float) * D);
        int qok = 1, kok = 1, vok = 1;
        for (int t = 0; t < T; t++) {
            memcpy(q, gqkv + (size_t)t * 4 * D + D, sizeof(float) * D);
            memcpy(k, gqkv + (size_t)t * 4 * D + 2 * D, sizeof(float) * D);
            frigg_cpu_rope_apply(FRIGG_PREC_BF16, q, 1, H, hd, cs + (size_t)pos[t] * hd, sn + (size_t)pos[t] * hd);
            frigg_cpu_rope_apply(FRIGG_PREC_BF16, k, 1, H, hd, cs + (size_t)pos[t] * hd, sn + (size_t)pos[t] * hd);
            for (int j = 0; j < D; j++) {
                size_t at = (size_t)seq[t] * seq_stride + ((size_t)(j / hd) * max_ctx + pos[t]) * hd + j % hd;
                qok &= got[(size_t)t * D + j] == q[j];
                kok &= kc[at] == k[j];
                vok &= vc[at] == gqkv[(size_t)t * 4 * D + 3 * D + j];
            }
        }
        CHECK(qok, "rope_kv H=%d hd=%d T=%d%s: rotated q differs from frigg_cpu_rope_apply", H, hd, T, path());
        CHECK(kok, "rope_kv H=%d hd=%d T=%d%s: cached k differs from frigg_cpu_rope_apply", H, hd, T, path());
        CHECK(vok, "rope_kv H=%d hd=%d T=%d%s: cached v is not the gqkv v block", H, hd, T, path());
        cudaFree(dpos); cudaFree(dseq); cudaFree(dg); cudaFree(dcos); cudaFree(dsin); cudaFree(dq); cudaFree(dk); cudaFree(dv);
        free(cs); free(sn); free(gqkv); free(pos); free(seq); free(got); free(kc); free(vc); free(q); free(k);
    }
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
        kctx = fk_ctx_create();
        CHECK(kctx != NULL, "fk_ctx_create: %s", frigg_error());
        CHECK(fk_ctx_prefill_impl(kctx) == FK_PREFILL_MMA_BF16P, "the default prefill attention is %s, not mma-bf16p",
              fk_prefill_impl_name(fk_ctx_prefill_impl(kctx)));
        test_shapes();
        test_group();
        test_errors();
        for (int general = 0; general < 2; general++) { /* the 16-byte paths, then the general ones at the same shapes */
            fk_ctx_set_eltwise_general(kctx, general);
            eltwise_general = general;
            test_norms();
            test_swiglu();
            test_rope();
        }
        fk_ctx_set_eltwise_general(kctx, 0);
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "device error: %s", cudaGetErrorString(e));
        fk_ctx_free(kctx);
    }
#endif
    TEST_MAIN_END();
}
