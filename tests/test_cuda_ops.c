/* test_cuda_ops.c — every CUDA kernel against the CPU reference op it replaces (cpu_ops.h), in the style of
 * llama.cpp's test-backend-ops: same random inputs, compare outputs. Kernels round to bf16 at the same
 * points as the CPU ops, but fp32 sums run in another order, so an output may sit one bf16 ulp away; the
 * checks allow exactly that (and only on a small fraction of elements), everything else must be equal.
 * Without CUDA in the build, or without a GPU, every group is skipped (0 failed). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "engine/backend.h"
#include "engine/cpu_ops.h"
#include "engine/sampler.h"
#include "../kernels/kernels.h"
#define CUDA_TEST_SEED 88172645463325252ull
#include "cuda_test_util.h"



static fk_ctx *kctx; /* the context every launch below uses */
static const char *gemv_impl_name = "tc"; /* which decode GEMV implementation the gemv checks run */

static void test_gemv(frigg_pool *pool) {
    /* 72 x 2056: 257 chunks of 8, split unevenly over 9 warps by the tensor-core kernel; 200 and 72: partial 16-row tiles */
    static const int shapes[][2] = {{96, 64}, {200, 1536}, {1536, 4096}, {72, 2056}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int O = shapes[si][0], K = shapes[si][1];
        float *W = malloc(sizeof(float) * O * K), *x = malloc(sizeof(float) * 8 * K), *h = malloc(sizeof(float) * 8 * O);
        ct_fill(W, (size_t)O * K, 1.0f / sqrtf((float)K));
        ct_fill(x, (size_t)8 * K, 2.0f);
        ct_fill(h, (size_t)8 * O, 1.0f);
        uint16_t *Wb = malloc((size_t)O * K * 2);
        for (size_t i = 0; i < (size_t)O * K; i++) Wb[i] = frigg_f32_to_bf16(W[i]);
        frigg_mat M = {.w = Wb, .rows = O, .cols = K};
        uint16_t *dW = ct_to_dev(W, (size_t)O * K), *dx = ct_to_dev(x, (size_t)8 * K), *dout;
        const frigg_mat dM = {.w = dW, .rows = O, .cols = K, .dtype = FRIGG_DT_BF16};
        cudaMalloc((void **)&dout, (size_t)8 * O * 2);
        float *xn = malloc(sizeof(float) * 8 * K), *ref = malloc(sizeof(float) * 8 * O), *got = malloc(sizeof(float) * 8 * O);
        float *sw = malloc(sizeof(float) * 8 * O);
        for (int B = 1; B <= 8; B++) {
            for (int norm = 0; norm <= 1; norm++) {
                const float *in = x;
                if (norm) {
                    frigg_cpu_rmsnorm(FRIGG_PREC_BF16, x, B, K, 1e-6, xn);
                    in = xn;
                }
                frigg_cpu_linear(FRIGG_PREC_BF16, pool, &M, in, B, ref);
                char what[96];
                /* store */
                CHECK(fk_gemv(kctx, &dM, dx, B, norm, 1e-6f, FK_GEMV_STORE, dout, 0) == 0, "%s", frigg_error());
                ct_from_dev(dout, (size_t)B * O, got);
                snprintf(what, sizeof what, "gemv %s %dx%d B=%d norm=%d store", gemv_impl_name, O, K, B, norm);
                ct_expect_close(what, got, ref, (size_t)B * O, norm ? 0.25 : 0.02);
                /* residual epilogue: h + bf16(W x) */
                uint16_t *dh = ct_to_dev(h, (size_t)B * O);
                CHECK(fk_gemv(kctx, &dM, dx, B, norm, 1e-6f, FK_GEMV_RESID, dh, 0) == 0, "%s", frigg_error());
                ct_from_dev(dh, (size_t)B * O, got);
                for (int i = 0; i < B * O; i++) sw[i] = frigg_round_bf16(h[i] + ref[i]);
                snprintf(what, sizeof what, "gemv %s %dx%d B=%d norm=%d resid", gemv_impl_name, O, K, B, norm);
                ct_expect_close(what, got, sw, (size_t)B * O, norm ? 0.25 : 0.02);
                cudaFree(dh);
                /* SwiGLU epilogue: rows [0, O/2) gate, [O/2, O) up */
                int I = O / 2;
                for (int b = 0; b < B; b++) frigg_cpu_swiglu(FRIGG_PREC_BF16, ref + (size_t)b * O, ref + (size_t)b * O + I, I, sw + (size_t)b * I);
                CHECK(fk_gemv(kctx, &dM, dx, B, norm, 1e-6f, FK_GEMV_SWIGLU, dout, 0) == 0, "%s", frigg_error());
                ct_from_dev(dout, (size_t)B * I, got);
                snprintf(what, sizeof what, "gemv %s %dx%d B=%d norm=%d swiglu", gemv_impl_name, O, K, B, norm);
                ct_expect_close(what, got, sw, (size_t)B * I, norm ? 0.3 : 0.03);
            }
        }
        /* Rows of one pass are independent: B=1 on row 3 equals row 3 of a B=8 pass, bit for bit. */
        float *row8 = malloc(sizeof(float) * 8 * O);
        fk_gemv(kctx, &dM, dx, 8, 1, 1e-6f, FK_GEMV_STORE, dout, 0);
        ct_from_dev(dout, (size_t)8 * O, row8);
        fk_gemv(kctx, &dM, dx + (size_t)3 * K, 1, 1, 1e-6f, FK_GEMV_STORE, dout, 0);
        ct_from_dev(dout, (size_t)O, got);
        CHECK(!memcmp(got, row8 + (size_t)3 * O, sizeof(float) * O), "gemv %s %dx%d: batch row differs from single row", gemv_impl_name, O, K);
        free(row8);
        /* A bad shape is an error, not a silent no-op. */
        CHECK(fk_gemv(kctx, &dM, dx, FK_GEMV_MAX_ROWS + 1, 0, 1e-6f, FK_GEMV_STORE, dout, 0) != 0, "gemv accepted %d rows",
              FK_GEMV_MAX_ROWS + 1);
        cudaFree(dW);
        cudaFree(dx);
        cudaFree(dout);
        free(W); free(x); free(h); free(Wb); free(xn); free(ref); free(got); free(sw);
    }
}

static void test_norms(void) {
    int T = 5, D = 1536;
    size_t n = (size_t)T * D;
    float *h = malloc(n * 4), *y = malloc(n * 4), *o = malloc(n * 4), *ref = malloc(n * 4), *got = malloc(n * 4);
    ct_fill(h, n, 3.0f);
    ct_fill(y, n, 1.0f);
    ct_fill(o, n, 1.0f);
    uint16_t *dh = ct_to_dev(h, n), *dy = ct_to_dev(y, n), *da, *dother = ct_to_dev(o, n);
    cudaMalloc((void **)&da, n * 2);
    frigg_cpu_rmsnorm(FRIGG_PREC_BF16, h, T, D, 1e-6, ref);
    CHECK(fk_rmsnorm(kctx, dh, da, T, D, 1e-6f, 0) == 0, "%s", frigg_error());
    ct_from_dev(da, n, got);
    ct_expect_close("rmsnorm", got, ref, n, 0.01);
    /* add + norm */
    float *hs = malloc(n * 4);
    for (size_t i = 0; i < n; i++) hs[i] = frigg_round_bf16(h[i] + y[i]);
    frigg_cpu_rmsnorm(FRIGG_PREC_BF16, hs, T, D, 1e-6, ref);
    CHECK(fk_add_rmsnorm(kctx, dh, dy, da, T, D, 1e-6f, 0) == 0, "%s", frigg_error());
    ct_from_dev(dh, n, got);
    CHECK(!memcmp(got, hs, n * 4), "add_rmsnorm: the residual sum is not bf16(h + y)");
    ct_from_dev(da, n, got);
    ct_expect_close("add_rmsnorm", got, ref, n, 0.01);
    /* run end: state = norm(x), x = bf16(state + other) */
    uint16_t *dstate;
    cudaMalloc((void **)&dstate, n * 2);
    CHECK(fk_run_end(kctx, dh, dstate, dother, T, D, 1e-6f, 0) == 0, "%s", frigg_error());
    ct_from_dev(dstate, n, got);
    ct_expect_close("run_end state", got, ref, n, 0.01);
    float *nx = malloc(n * 4);
    for (size_t i = 0; i < n; i++) nx[i] = frigg_round_bf16(got[i] + o[i]);
    ct_from_dev(dh, n, got);
    CHECK(!memcmp(got, nx, n * 4), "run_end: next input is not bf16(state + other)");
    /* swiglu */
    int I = 700;
    float *gu = malloc(sizeof(float) * T * 2 * I), *sref = malloc(sizeof(float) * T * I), *sgot = malloc(sizeof(float) * T * I);
    ct_fill(gu, (size_t)T * 2 * I, 6.0f);
    for (int t = 0; t < T; t++) frigg_cpu_swiglu(FRIGG_PREC_BF16, gu + (size_t)t * 2 * I, gu + (size_t)t * 2 * I + I, I, sref + (size_t)t * I);
    uint16_t *dgu = ct_to_dev(gu, (size_t)T * 2 * I), *dm;
    cudaMalloc((void **)&dm, (size_t)T * I * 2);
    CHECK(fk_swiglu(kctx, dgu, T, I, dm, 0) == 0, "%s", frigg_error());
    ct_from_dev(dm, (size_t)T * I, sgot);
    ct_expect_close("swiglu", sgot, sref, (size_t)T * I, 0.01);
    /* embed: bf16(e * scale), z_L broadcast, first injection */
    int V = 50;
    float *E = malloc(sizeof(float) * V * D), *zl = malloc(sizeof(float) * D);
    ct_fill(E, (size_t)V * D, 0.05f);
    ct_fill(zl, D, 1.0f);
    int32_t ids[3] = {7, 0, 49}, *dids;
    cudaMalloc((void **)&dids, sizeof ids);
    cudaMemcpy(dids, ids, sizeof ids, cudaMemcpyHostToDevice);
    uint16_t *dE = ct_to_dev(E, (size_t)V * D), *dzl = ct_to_dev(zl, D);
    const frigg_mat dEm = {.w = dE, .rows = V, .cols = D, .dtype = FRIGG_DT_BF16};
    CHECK(fk_embed(kctx, &dEm, dzl, dids, 3, D, 39.191835884530846f, dh, dy, da, 0) == 0, "%s", frigg_error());
    ct_from_dev(dh, (size_t)3 * D, got);
    ct_from_dev(da, (size_t)3 * D, ref);
    int ok = 1;
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < D; i++) {
            float zh = frigg_round_bf16(E[(size_t)ids[t] * D + i] * (float)39.191835884530846);
            ok &= got[(size_t)t * D + i] == zh && ref[(size_t)t * D + i] == frigg_round_bf16(zh + zl[i]);
        }
    CHECK(ok, "embed: z_H or the first injection differs from the CPU formula");
    cudaFree(dh); cudaFree(dy); cudaFree(da); cudaFree(dother); cudaFree(dstate); cudaFree(dgu); cudaFree(dm);
    cudaFree(dids); cudaFree(dE); cudaFree(dzl);
    free(h); free(y); free(o); free(ref); free(got); free(hs); free(nx); free(gu); free(sref); free(sgot); free(E); free(zl);
}

/* The reference: the CPU attention op with the gate (nq query rows at positions q0.., K and V [head][T][hd]). */
static void ref_attention(const float *q, const float *K, const float *V, const float *g, int T, int nq, int q0, int H,
                          int hd, int P, float *y) {
    int D = H * hd;
    frigg_attn_args a = {.q = q, .q_stride = D, .k = K, .v = V, .pos_stride = hd, .head_stride = (size_t)T * hd,
                         .gate = g, .gate_stride = 4 * D, .T = nq, .p0 = q0, .prefix_len = P, .heads = H,
                         .head_dim = hd, .out = y, .out_stride = D};
    frigg_cpu_attention(FRIGG_PREC_BF16, NULL, &a);
}

static void test_attention(void) {
    /* T, heads, head_dim; 2060: a long cache (33 decode split blocks) */
    static const int cfgs[][3] = {{100, 2, 128}, {37, 4, 16}, {70, 3, 32}, {300, 1, 128}, {129, 2, 64}, {2060, 1, 32}};
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        int T = cfgs[ci][0], H = cfgs[ci][1], hd = cfgs[ci][2], D = H * hd, max_ctx = T + 3;
        float *q = malloc(sizeof(float) * T * D), *K = malloc(sizeof(float) * H * T * hd), *V = malloc(sizeof(float) * H * T * hd);
        float *g = malloc(sizeof(float) * T * 4 * D), *ref = malloc(sizeof(float) * T * D), *got = malloc(sizeof(float) * T * D);
        ct_fill(q, (size_t)T * D, 2.0f);
        ct_fill(K, (size_t)H * T * hd, 2.0f);
        ct_fill(V, (size_t)H * T * hd, 1.0f);
        ct_fill(g, (size_t)T * 4 * D, 3.0f);
        /* cache laid out [head][max_ctx][hd] */
        float *Kc = calloc((size_t)H * max_ctx * hd, sizeof(float)), *Vc = calloc((size_t)H * max_ctx * hd, sizeof(float));
        for (int h = 0; h < H; h++)
            for (int j = 0; j < T; j++)
                for (int d = 0; d < hd; d++) {
                    Kc[((size_t)h * max_ctx + j) * hd + d] = K[((size_t)h * T + j) * hd + d];
                    Vc[((size_t)h * max_ctx + j) * hd + d] = V[((size_t)h * T + j) * hd + d];
                }
        uint16_t *dq = ct_to_dev(q, (size_t)T * D), *dk = ct_to_dev(Kc, (size_t)H * max_ctx * hd), *dv = ct_to_dev(Vc, (size_t)H * max_ctx * hd);
        uint16_t *dg = ct_to_dev(g, (size_t)T * 4 * D), *dy;
        cudaMalloc((void **)&dy, (size_t)T * D * 2);
        int prefixes[3] = {0, T / 2, T};
        /* P as bf16 hi + lo (fp32 accuracy: this tolerance); the bf16-P default has its own, derived bound in
         * tests/test_cuda_prefill.c */
        for (int impl = FK_PREFILL_MMA; impl == FK_PREFILL_MMA; impl++) {
            CHECK(fk_ctx_set_prefill_impl(kctx, impl) == 0, "%s", frigg_error());
            for (int pi = 0; pi < 3; pi++) {
                int P = prefixes[pi];
                ref_attention(q, K, V, g, T, T, 0, H, hd, P, ref);
                CHECK(fk_attn_prefill(kctx, dq, dk, dv, dg, T, H, hd, max_ctx, P, dy, 0) == 0, "%s", frigg_error());
                ct_from_dev(dy, (size_t)T * D, got);
                char what[80];
                snprintf(what, sizeof what, "attn_prefill impl %d T=%d H=%d hd=%d P=%d", impl, T, H, hd, P);
                ct_expect_close(what, got, ref, (size_t)T * D, 0.02);
            }
        }
        fk_ctx_set_prefill_impl(kctx, FK_PREFILL_MMA_BF16P);
        /* The mask must matter: a prefix run differs from the causal reference on early rows. */
        ref_attention(q, K, V, g, T, T, 0, H, hd, 0, ref);
        fk_attn_prefill(kctx, dq, dk, dv, dg, T, H, hd, max_ctx, T, dy, 0);
        ct_from_dev(dy, (size_t)T * D, got);
        CHECK(memcmp(got, ref, sizeof(float) * D) != 0, "attn_prefill: prefix and causal gave the same first row");
        /* Decode: rows b = 0..2 of sequences 0..2 (the same cache, seq_stride 0) at different positions. */
        int32_t seqh[3] = {0, 0, 0}, posh[3] = {T - 1, T / 2, 0}, *dseq, *dpos;
        cudaMalloc((void **)&dseq, sizeof seqh);
        cudaMalloc((void **)&dpos, sizeof posh);
        cudaMemcpy(dseq, seqh, sizeof seqh, cudaMemcpyHostToDevice);
        cudaMemcpy(dpos, posh, sizeof posh, cudaMemcpyHostToDevice);
        float *work;
        cudaMalloc((void **)&work, fk_attn_decode_work_floats(3, H, hd, max_ctx) * 4);
        /* q rows and gates for decode: rows 0..2 of q/g */
        int *cnt, hcnt[3 * 4];
        cudaMalloc((void **)&cnt, sizeof hcnt);
        cudaMemset(cnt, 0, sizeof hcnt);
        for (int rep = 0; rep < 2; rep++) /* twice: the counters must be left at zero */
            CHECK(fk_attn_decode(kctx, dq, dk, dv, 0, dseq, dpos, dg, 3, H, hd, max_ctx, work, cnt, dy, 0) == 0, "%s", frigg_error());
        ct_from_dev(dy, (size_t)3 * D, got);
        cudaMemcpy(hcnt, cnt, sizeof(int) * 3 * H, cudaMemcpyDeviceToHost);
        int zero = 1;
        for (int i = 0; i < 3 * H; i++) zero &= hcnt[i] == 0;
        CHECK(zero, "attn_decode: split counters not reset to zero");
        cudaFree(cnt);
        for (int b = 0; b < 3; b++) {
            /* row b's query is q[b], attending causally to keys [0, pos] */
            ref_attention(q + (size_t)b * D, K, V, g + (size_t)b * 4 * D, T, 1, posh[b], H, hd, 0, ref);
            char what[80];
            snprintf(what, sizeof what, "attn_decode T=%d H=%d hd=%d row %d", T, H, hd, b);
            ct_expect_close(what, got + (size_t)b * D, ref, (size_t)D, 0.02);
        }
        cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dg); cudaFree(dy); cudaFree(dseq); cudaFree(dpos); cudaFree(work);
        free(q); free(K); free(V); free(g); free(ref); free(got); free(Kc); free(Vc);
    }
}

static void test_rope(void) {
    frigg_config c = {0};
    c.head_dim = 128;
    c.num_heads = 3;
    c.rope_theta = 10000.0;
    int T = 6, H = 3, hd = 128, D = H * hd, max_ctx = 64;
    float *cs = malloc(sizeof(float) * max_ctx * hd), *sn = malloc(sizeof(float) * max_ctx * hd);
    frigg_cpu_rope_tables(FRIGG_PREC_BF16, &c, 0, max_ctx, cs, sn);
    float *gqkv = malloc(sizeof(float) * T * 4 * D);
    ct_fill(gqkv, (size_t)T * 4 * D, 3.0f);
    int32_t pos[6] = {0, 1, 2, 17, 40, 63}, seq[6] = {0, 1, 0, 1, 0, 1}, *dpos, *dseq;
    cudaMalloc((void **)&dpos, sizeof pos);
    cudaMalloc((void **)&dseq, sizeof seq);
    cudaMemcpy(dpos, pos, sizeof pos, cudaMemcpyHostToDevice);
    cudaMemcpy(dseq, seq, sizeof seq, cudaMemcpyHostToDevice);
    uint16_t *dg = ct_to_dev(gqkv, (size_t)T * 4 * D), *dcos = ct_to_dev(cs, (size_t)max_ctx * hd), *dsin = ct_to_dev(sn, (size_t)max_ctx * hd);
    uint16_t *dq, *dk, *dv;
    long long seq_stride = (long long)H * max_ctx * hd;
    cudaMalloc((void **)&dq, (size_t)T * D * 2);
    cudaMalloc((void **)&dk, (size_t)2 * seq_stride * 2);
    cudaMalloc((void **)&dv, (size_t)2 * seq_stride * 2);
    CHECK(fk_rope_kv(kctx, dg, T, H, hd, dseq, dpos, dcos, dsin, dq, dk, dv, seq_stride, max_ctx, 0) == 0, "%s", frigg_error());
    float *q = malloc(sizeof(float) * D), *k = malloc(sizeof(float) * D), *got = malloc(sizeof(float) * T * D);
    float *kc = malloc(sizeof(float) * 2 * seq_stride), *vc = malloc(sizeof(float) * 2 * seq_stride);
    ct_from_dev(dq, (size_t)T * D, got);
    ct_from_dev(dk, (size_t)2 * seq_stride, kc);
    ct_from_dev(dv, (size_t)2 * seq_stride, vc);
    int qok = 1, kok = 1, vok = 1;
    for (int t = 0; t < T; t++) {
        memcpy(q, gqkv + (size_t)t * 4 * D + D, sizeof(float) * D);
        memcpy(k, gqkv + (size_t)t * 4 * D + 2 * D, sizeof(float) * D);
        frigg_cpu_rope_apply(FRIGG_PREC_BF16, q, 1, H, hd, cs + (size_t)pos[t] * hd, sn + (size_t)pos[t] * hd);
        frigg_cpu_rope_apply(FRIGG_PREC_BF16, k, 1, H, hd, cs + (size_t)pos[t] * hd, sn + (size_t)pos[t] * hd);
        for (int j = 0; j < D; j++) {
            int h = j / hd, d = j % hd;
            size_t at = (size_t)seq[t] * seq_stride + ((size_t)h * max_ctx + pos[t]) * hd + d;
            qok &= got[(size_t)t * D + j] == q[j];
            kok &= kc[at] == k[j];
            vok &= vc[at] == gqkv[(size_t)t * 4 * D + 3 * D + j];
        }
    }
    CHECK(qok, "rope_kv: rotated q differs from frigg_cpu_rope_apply");
    /* The fused decode projection: rmsnorm(x) -> gqkv rows -> RoPE -> cache, against the CPU ops. */
    {
        int K = D;
        float *Wf = malloc(sizeof(float) * 4 * D * K), *x = malloc(sizeof(float) * T * K), *xn = malloc(sizeof(float) * T * K);
        float *lin = malloc(sizeof(float) * T * 4 * D);
        ct_fill(Wf, (size_t)4 * D * K, 1.0f / sqrtf((float)K));
        ct_fill(x, (size_t)T * K, 2.0f);
        uint16_t *Wb = malloc((size_t)4 * D * K * 2);
        for (size_t i = 0; i < (size_t)4 * D * K; i++) Wb[i] = frigg_f32_to_bf16(Wf[i]);
        frigg_mat M = {.w = Wb, .rows = 4 * D, .cols = K};
        frigg_pool *pool = frigg_pool_create(0);
        frigg_cpu_rmsnorm(FRIGG_PREC_BF16, x, T, K, 1e-6, xn);
        frigg_cpu_linear(FRIGG_PREC_BF16, pool, &M, xn, T, lin);
        frigg_pool_destroy(pool);
        uint16_t *dW = ct_to_dev(Wf, (size_t)4 * D * K), *dx = ct_to_dev(x, (size_t)T * K), *dgq;
        cudaMalloc((void **)&dgq, (size_t)T * 4 * D * 2);
        cudaMemset(dk, 0, (size_t)2 * seq_stride * 2);
        cudaMemset(dv, 0, (size_t)2 * seq_stride * 2);
        fk_qkv_epi qa = {dcos, dsin, dseq, dpos, dq, dk, dv, seq_stride, max_ctx, hd};
        const frigg_mat dQ = {.w = dW, .rows = 4 * D, .cols = D, .dtype = FRIGG_DT_BF16};
        CHECK(fk_gemv_qkv(kctx, &dQ, dx, T, 1e-6f, dgq, &qa, 0) == 0, "%s", frigg_error());
        float *gg = malloc(sizeof(float) * T * 4 * D), *refq = malloc(sizeof(float) * T * D), *refk = malloc(sizeof(float) * T * D);
        ct_from_dev(dgq, (size_t)T * 4 * D, gg);
        ct_from_dev(dq, (size_t)T * D, got);
        ct_from_dev(dk, (size_t)2 * seq_stride, kc);
        ct_from_dev(dv, (size_t)2 * seq_stride, vc);
        float *gk = malloc(sizeof(float) * T * D), *gv = malloc(sizeof(float) * T * D), *refv = malloc(sizeof(float) * T * D);
        float *gref = malloc(sizeof(float) * T * D), *ggot = malloc(sizeof(float) * T * D);
        for (int t = 0; t < T; t++) {
            memcpy(refq + (size_t)t * D, lin + (size_t)t * 4 * D + D, sizeof(float) * D);
            memcpy(refk + (size_t)t * D, lin + (size_t)t * 4 * D + 2 * D, sizeof(float) * D);
            memcpy(refv + (size_t)t * D, lin + (size_t)t * 4 * D + 3 * D, sizeof(float) * D);
            memcpy(gref + (size_t)t * D, lin + (size_t)t * 4 * D, sizeof(float) * D);
            memcpy(ggot + (size_t)t * D, gg + (size_t)t * 4 * D, sizeof(float) * D);
            frigg_cpu_rope_apply(FRIGG_PREC_BF16, refq + (size_t)t * D, 1, H, hd, cs + (size_t)pos[t] * hd, sn + (size_t)pos[t] * hd);
            frigg_cpu_rope_apply(FRIGG_PREC_BF16, refk + (size_t)t * D, 1, H, hd, cs + (size_t)pos[t] * hd, sn + (size_t)pos[t] * hd);
            for (int j = 0; j < D; j++) {
                size_t at = (size_t)seq[t] * seq_stride + ((size_t)(j / hd) * max_ctx + pos[t]) * hd + j % hd;
                gk[(size_t)t * D + j] = kc[at];
                gv[(size_t)t * D + j] = vc[at];
            }
        }
        ct_expect_close("gemv_qkv gate rows", ggot, gref, (size_t)T * D, 0.25);
        ct_expect_close("gemv_qkv q (RoPE)", got, refq, (size_t)T * D, 0.25);
        ct_expect_close("gemv_qkv k (RoPE, cache)", gk, refk, (size_t)T * D, 0.25);
        ct_expect_close("gemv_qkv v (cache)", gv, refv, (size_t)T * D, 0.25);
        cudaFree(dW); cudaFree(dx); cudaFree(dgq);
        free(Wf); free(x); free(xn); free(lin); free(Wb); free(gg); free(refq); free(refk); free(gk); free(gv); free(refv);
        free(gref); free(ggot);
    }
    CHECK(kok, "rope_kv: cached k differs from frigg_cpu_rope_apply or sits at the wrong slot position");
    CHECK(vok, "rope_kv: cached v is not the v rows");
    cudaFree(dpos); cudaFree(dseq); cudaFree(dg); cudaFree(dcos); cudaFree(dsin); cudaFree(dq); cudaFree(dk); cudaFree(dv);
    free(cs); free(sn); free(gqkv); free(q); free(k); free(got); free(kc); free(vc);
}

/* fk_argmax_bf16 against frigg_argmax on rows that probe its split over blocks: ties across slices (the lower
 * index wins), the last element, rows of -inf with one finite value, all -inf and NaN rows (index 0), NaN
 * beside the maximum, ties inside one 16-byte chunk, rows whose length is not a multiple of 8 (the scalar
 * path) and rows shorter than the number of slices, batches of 1, 2, 6 and 8 rows. */
static void test_argmax_rows(int B, int V, const char *what, int with_advance) {
    float *x = malloc(sizeof(float) * B * V);
    ct_fill(x, (size_t)B * V, 10.0f);
    for (int b = 0; b < B; b++) {
        float *r = x + (size_t)b * V;
        switch (b % 6) {
        case 0: r[V / 3] = 50.0f; r[V - 1 - V / 5] = 50.0f; break;           /* tie across slices */
        case 1: r[V - 1] = 60.0f; break;                                       /* the last element */
        case 2: for (int i = 0; i < V; i++) r[i] = -INFINITY;
                r[V / 2] = -1.0f; break;                                       /* one finite value */
        case 3: for (int i = 0; i < V; i++) r[i] = b % 4 == 3 ? NAN : -INFINITY; break; /* -> 0 */
        case 4: r[V / 2] = 40.0f; if (V / 2 + 1 < V) r[V / 2 + 1] = NAN; if (V > 8) r[V / 2 - 1] = 40.0f; break;
        case 5: if (V >= 16) { r[8] = 45.0f; r[9] = 45.0f; r[15] = 45.0f; } break; /* ties in one chunk */
        }
    }
    uint16_t *h = malloc((size_t)B * V * 2);
    for (size_t i = 0; i < (size_t)B * V; i++) h[i] = frigg_f32_to_bf16(x[i]);
    for (size_t i = 0; i < (size_t)B * V; i++) x[i] = frigg_bf16_to_f32(h[i]); /* what the device sees */
    uint16_t *dx = NULL;
    cudaMalloc((void **)&dx, (size_t)B * V * 2);
    cudaMemcpy(dx, h, (size_t)B * V * 2, cudaMemcpyHostToDevice);
    int32_t *dids, ids[8];
    float *dvals, vals[8];
    void *work = NULL;
    cudaMalloc((void **)&dids, sizeof ids);
    cudaMalloc((void **)&dvals, sizeof vals);
    cudaMalloc(&work, fk_argmax_work_bytes(B));
    /* advance: every row's position goes up by exactly one (the pipelined decode's step counter) */
    int32_t pos[8], *dpos = NULL;
    for (int b = 0; b < B; b++) pos[b] = 1000 * b + 7;
    if (with_advance) {
        cudaMalloc((void **)&dpos, sizeof pos);
        cudaMemcpy(dpos, pos, sizeof(int32_t) * B, cudaMemcpyHostToDevice);
    }
    /* vals on every other batch size: the NULL path and the written one both run */
    float *vout = B % 2 == 0 ? dvals : NULL;
    CHECK(fk_argmax_bf16(kctx, dx, B, V, dids, dpos, vout, work, 0) == 0, "%s", frigg_error());
    cudaMemcpy(ids, dids, sizeof(int32_t) * B, cudaMemcpyDeviceToHost);
    if (vout) {
        /* a row's value at its id, or -inf where no value wins (all -inf / NaN) */
        cudaMemcpy(vals, dvals, sizeof(float) * B, cudaMemcpyDeviceToHost);
        for (int b = 0; b < B; b++) {
            float want = x[(size_t)b * V + ids[b]];
            if (isnan(want)) want = -INFINITY;
            CHECK(vals[b] == want, "argmax %s row %d: value %g, the row's %g at %d", what, b, vals[b], want, ids[b]);
        }
    }
    if (with_advance) {
        int32_t got[8];
        cudaMemcpy(got, dpos, sizeof(int32_t) * B, cudaMemcpyDeviceToHost);
        for (int b = 0; b < B; b++) CHECK(got[b] == pos[b] + 1, "argmax %s row %d: position %d after advance, want %d", what, b, got[b], pos[b] + 1);
        cudaFree(dpos);
    }
    for (int b = 0; b < B; b++)
        CHECK(ids[b] == frigg_argmax(x + (size_t)b * V, V), "argmax %s row %d: %d, frigg_argmax %d", what, b, ids[b],
              frigg_argmax(x + (size_t)b * V, V));
    if (V == 262144 && B >= 3) CHECK(ids[0] == V / 3 && ids[1] == V - 1 && ids[2] == V / 2, "argmax: got %d %d %d", ids[0], ids[1], ids[2]);
    /* fk_argmax_bf16_masked: a mask per row (ids with (7i + b) % 5 != 0, the unmasked winner left out, and one row
     * allowing nothing) against the same rule on the host: the best allowed finite value, lowest id on ties, 0 where
     * none beats -inf */
    const int W = (V + 31) / 32;
    uint32_t *mask = calloc((size_t)B * W, 4), *dmask = NULL;
    for (int b = 0; b < B; b++) {
        if (b == B - 1 && B > 1) continue; /* allows nothing */
        for (int i = 0; i < V; i++)
            if ((7 * i + b) % 5 != 0 && i != ids[b]) mask[(size_t)b * W + i / 32] |= 1u << (i % 32);
    }
    cudaMalloc((void **)&dmask, (size_t)B * W * 4);
    cudaMemcpy(dmask, mask, (size_t)B * W * 4, cudaMemcpyHostToDevice);
    CHECK(fk_argmax_bf16_masked(kctx, dx, B, V, dmask, dids, NULL, NULL, work, 0) == 0, "%s", frigg_error());
    int32_t mids[8];
    cudaMemcpy(mids, dids, sizeof(int32_t) * B, cudaMemcpyDeviceToHost);
    for (int b = 0; b < B; b++) {
        float best = -INFINITY;
        int bi = -1;
        for (int i = 0; i < V; i++)
            if ((mask[(size_t)b * W + i / 32] >> (i % 32)) & 1u) {
                float v = x[(size_t)b * V + i];
                if (v > best) best = v, bi = i;
            }
        CHECK(mids[b] == (bi < 0 ? 0 : bi), "masked argmax %s row %d: %d, the best allowed %d", what, b, mids[b], bi < 0 ? 0 : bi);
    }
    cudaFree(dmask);
    free(mask);
    cudaFree(dx);
    cudaFree(dids);
    cudaFree(dvals);
    cudaFree(work);
    free(x);
    free(h);
}
static void test_argmax(void) {
    test_argmax_rows(6, 262144, "Mimir vocab", 0);
    test_argmax_rows(8, 262144, "batch 8", 1);
    test_argmax_rows(1, 262144, "batch 1", 1);
    test_argmax_rows(6, 1001, "odd length", 0);
    test_argmax_rows(6, 40, "shorter than the slices", 1);
    test_argmax_rows(6, 512, "tiny vocab", 0);
    test_argmax_rows(2, 1, "one logit", 1);
    CHECK(fk_argmax_bf16(kctx, NULL, 1, 8, NULL, NULL, NULL, NULL, 0) == -1, "argmax without a workspace is not an error");
}

/* fk_topk_bf16 against frigg_topk: the same k ids, each with its value, in the documented order (the ones
 * above the k-th largest value by index, then the ones equal to it by index while they last). Rows of few
 * distinct values (ties everywhere, across slices and at the cut), of -0 beside +0 (one value), continuous
 * rows, NaN below everything, k = 1, a Mimir row at k = 1024, k = V, rows shorter than the slices, batches. */
static void test_topk_rows(int B, int V, int k, int mode, const char *what) {
    float *x = malloc(sizeof(float) * B * V);
    ct_fill(x, (size_t)B * V, 10.0f);
    for (size_t i = 0; i < (size_t)B * V; i++) {
        if (mode == 0) x[i] = floorf(x[i]); /* about 20 distinct values */
        if (mode == 1) x[i] = i % 3 ? 0.0f : -0.0f;
        if (mode == 3 && i % 97 == 5) x[i] = NAN;
    }
    uint16_t *h = malloc((size_t)B * V * 2);
    for (size_t i = 0; i < (size_t)B * V; i++) h[i] = frigg_f32_to_bf16(x[i]);
    for (size_t i = 0; i < (size_t)B * V; i++) x[i] = frigg_bf16_to_f32(h[i]); /* what the device sees */
    uint16_t *dx = NULL;
    float *dv = NULL;
    int32_t *di = NULL;
    void *work = NULL;
    cudaMalloc((void **)&dx, (size_t)B * V * 2);
    cudaMalloc((void **)&dv, sizeof(float) * B * k);
    cudaMalloc((void **)&di, sizeof(int32_t) * B * k);
    cudaMalloc(&work, fk_topk_work_bytes(B));
    cudaMemcpy(dx, h, (size_t)B * V * 2, cudaMemcpyHostToDevice);
    CHECK(fk_topk_bf16(kctx, dx, B, V, k, dv, di, work, 0) == 0, "topk %s: %s", what, frigg_error());
    float *gv = malloc(sizeof(float) * B * k), *row = malloc(sizeof(float) * V);
    int32_t *gi = malloc(sizeof(int32_t) * B * k), *want = malloc(sizeof(int32_t) * k), *order = malloc(sizeof(int32_t) * k);
    cudaMemcpy(gv, dv, sizeof(float) * B * k, cudaMemcpyDeviceToHost);
    cudaMemcpy(gi, di, sizeof(int32_t) * B * k, cudaMemcpyDeviceToHost);
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < V; i++) row[i] = isnan(x[(size_t)b * V + i]) ? -INFINITY : x[(size_t)b * V + i];
        frigg_topk(row, V, k, want);
        const float cut = row[want[k - 1]];
        int n = 0; /* the documented order: above the cut by index, then at the cut by index */
        for (int i = 0; i < V && n < k; i++)
            if (row[i] > cut) order[n++] = i;
        for (int i = 0; i < V && n < k; i++)
            if (row[i] == cut) order[n++] = i;
        int ok = n == k, same_set = 1;
        for (int j = 0; j < k && ok; j++) ok &= gi[b * k + j] == order[j] && gv[b * k + j] == row[order[j]];
        for (int j = 0; j < k; j++) { /* and the order's ids are frigg_topk's */
            int found = 0;
            for (int q = 0; q < k && !found; q++) found = order[q] == want[j];
            same_set &= found;
        }
        CHECK(ok && same_set, "topk %s row %d: not the %d largest in the documented order", what, b, k);
    }
    cudaFree(dx);
    cudaFree(dv);
    cudaFree(di);
    cudaFree(work);
    free(x);
    free(h);
    free(gv);
    free(gi);
    free(row);
    free(want);
    free(order);
}
static void test_topk(void) {
    test_topk_rows(1, 262144, 40, 0, "Mimir vocab, ties");
    test_topk_rows(3, 262144, 1024, 2, "Mimir vocab, k 1024");
    test_topk_rows(8, 262144, 1, 0, "batch 8, k 1");
    test_topk_rows(2, 5000, 700, 1, "-0 and +0");
    test_topk_rows(4, 20000, 64, 3, "NaN");
    test_topk_rows(2, 1001, 1001, 2, "k = V");
    test_topk_rows(6, 40, 7, 0, "shorter than the slices");
    CHECK(fk_topk_bf16(kctx, NULL, 1, 8, 9, NULL, NULL, (void *)8, 0) == -1, "topk of more than the row is not an error");
    CHECK(fk_topk_bf16(kctx, NULL, 1, 8, 2, NULL, NULL, NULL, 0) == -1, "topk without a workspace is not an error");
}
#endif

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_ops");
#ifndef FRIGG_CUDA
    SKIP("built without CUDA (FRIGG_CUDA=0)");
#else
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device present");
    } else {
        kctx = fk_ctx_create();
        CHECK(kctx != NULL, "fk_ctx_create: %s", frigg_error());
        frigg_pool *pool = frigg_pool_create(0);
        int impl_env = fk_ctx_gemv_impl(kctx);
        /* both decode GEMV implementations (tensor cores, CUDA cores) against the same references; the RoPE
         * test includes the fused gqkv GEMV */
        static const struct { int impl; const char *name; } impls[] = {{FK_GEMV_IMPL_TC, "tc"}, {FK_GEMV_IMPL_SIMT, "simt"}};
        for (int i = 0; i < 2; i++) {
            fk_ctx_set_gemv_impl(kctx, impls[i].impl);
            gemv_impl_name = impls[i].name;
            fprintf(stderr, "gemv implementation: %s\n", gemv_impl_name);
            test_gemv(pool);
            test_rope();
        }
        fk_ctx_set_gemv_impl(kctx, impl_env); /* the default: auto */
        test_norms();
        test_attention();
        test_argmax();
        test_topk();
        frigg_pool_destroy(pool);
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "device error: %s", cudaGetErrorString(e));
        fk_ctx_free(kctx);
    }
#endif
    TEST_MAIN_END();
}
