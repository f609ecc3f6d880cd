/* test_cuda_gemv.c — the decode GEMV implementations (tensor cores, CUDA cores) on the cases their tiling
 * has edges at: every batch size 1..16 (past 8 the tensor-core kernel's rows 8..15 of the mma, or the CUDA-core
 * kernel in launches of 8), partial 8-row tiles (O % 8 != 0, paired O/2 % 4 != 0), K slices that
 * do not divide evenly into warps (K/8 = 257), and K > 4096, which every implementation hands to the CUDA-core
 * kernel (the tensor-core kernel keeps one round of K per warp), against the CPU reference ops. And the properties batched decode relies on, bit for bit: each batch row's result equals
 * the single-row pass on that row, for every B; results do not depend on the tensor-core kernel's grid
 * (persistent blocks walking several tiles each); a repeated launch gives the same bits. Kernel choices live in
 * a context (fk_ctx): two contexts with different choices, used in turn, each keep their own; auto's table is
 * per context and a malformed row is refused; a quantized descriptor the kernels cannot read (int8 without scales:
 * test_cuda_gemv_q.c tests the quantized kernels) is an error naming its dtype.
 * Without CUDA in the build, or without a GPU, everything is skipped (0 failed). */
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
#include "../kernels/kernels.h"
#define CUDA_TEST_SEED 0x2545f4914f6cdd1dull
#include "cuda_test_util.h"



static fk_ctx *kc;            /* the context every launch below uses */
#define TB FK_GEMV_MAX_ROWS   /* batch rows tested: every B up to one call's limit */
static const char *impl_name; /* "tc", "simt", "auto" */

/* One (O, K) shape: every B, every epilogue, with and without the fused norm, against the CPU ops. */
static void test_shape(frigg_pool *pool, int O, int K) {
    float *W = malloc(sizeof(float) * O * K), *x = malloc(sizeof(float) * TB * K), *h = malloc(sizeof(float) * TB * O);
    ct_fill(W, (size_t)O * K, 1.0f / sqrtf((float)K));
    ct_fill(x, (size_t)TB * K, 2.0f);
    ct_fill(h, (size_t)TB * O, 1.0f);
    uint16_t *Wb = malloc((size_t)O * K * 2);
    for (size_t i = 0; i < (size_t)O * K; i++) Wb[i] = frigg_f32_to_bf16(W[i]);
    frigg_mat M = {.w = Wb, .rows = O, .cols = K};
    uint16_t *dW = ct_to_dev(W, (size_t)O * K), *dx = ct_to_dev(x, (size_t)TB * K), *dout;
    const frigg_mat dM = {.w = dW, .rows = O, .cols = K, .dtype = FRIGG_DT_BF16};
    cudaMalloc((void **)&dout, (size_t)TB * O * 2);
    float *xn = malloc(sizeof(float) * TB * K), *lin[2], *ref = malloc(sizeof(float) * TB * O), *got = malloc(sizeof(float) * TB * O);
    lin[0] = malloc(sizeof(float) * TB * O);
    lin[1] = malloc(sizeof(float) * TB * O);
    frigg_cpu_linear(FRIGG_PREC_BF16, pool, &M, x, TB, lin[0]); /* rows are independent: the B-row references are the first B rows */
    frigg_cpu_rmsnorm(FRIGG_PREC_BF16, x, TB, K, 1e-6, xn);
    frigg_cpu_linear(FRIGG_PREC_BF16, pool, &M, xn, TB, lin[1]);
    int I = O / 2;
    for (int B = 1; B <= TB; B++)
        for (int norm = 0; norm <= 1; norm++) {
            char what[128];
            double frac = norm ? 0.3 : 0.03;
            /* The CUDA-core kernel stages x for up to 8 rows per launch; beyond the staged-x limit a call it runs
             * must be refused (the tensor-core kernel, K <= 4096, has no such limit) */
            if (norm && (size_t)(B < 8 ? B : 8) * K * 2 > 64 * 1024) {
                CHECK(fk_gemv(kc, &dM, dx, B, norm, 1e-6f, FK_GEMV_STORE, dout, 0) != 0,
                      "gemv %s %dx%d B=%d norm: accepted %zu bytes of staged x", impl_name, O, K, B, (size_t)B * K * 2);
                continue;
            }
            ct_poison(dout, (size_t)TB * O);
            CHECK(fk_gemv(kc, &dM, dx, B, norm, 1e-6f, FK_GEMV_STORE, dout, 0) == 0, "%s", frigg_error());
            ct_from_dev(dout, (size_t)B * O, got);
            snprintf(what, sizeof what, "gemv %s %dx%d B=%d norm=%d store", impl_name, O, K, B, norm);
            ct_expect_close(what, got, lin[norm], (size_t)B * O, frac);

            uint16_t *hd = ct_to_dev(h, (size_t)B * O);
            CHECK(fk_gemv(kc, &dM, dx, B, norm, 1e-6f, FK_GEMV_RESID, hd, 0) == 0, "%s", frigg_error());
            ct_from_dev(hd, (size_t)B * O, got);
            cudaFree(hd);
            for (int i = 0; i < B * O; i++) ref[i] = frigg_round_bf16(h[i] + lin[norm][i]);
            snprintf(what, sizeof what, "gemv %s %dx%d B=%d norm=%d resid", impl_name, O, K, B, norm);
            ct_expect_close(what, got, ref, (size_t)B * O, frac);

            for (int b = 0; b < B; b++)
                frigg_cpu_swiglu(FRIGG_PREC_BF16, lin[norm] + (size_t)b * O, lin[norm] + (size_t)b * O + I, I, ref + (size_t)b * I);
            ct_poison(dout, (size_t)TB * O);
            CHECK(fk_gemv(kc, &dM, dx, B, norm, 1e-6f, FK_GEMV_SWIGLU, dout, 0) == 0, "%s", frigg_error());
            ct_from_dev(dout, (size_t)B * I, got);
            snprintf(what, sizeof what, "gemv %s %dx%d B=%d norm=%d swiglu", impl_name, O, K, B, norm);
            ct_expect_close(what, got, ref, (size_t)B * I, frac + 0.05);
        }

    int norm_ok = 8 * K * 2 <= 64 * 1024;
    if (!strcmp(impl_name, "auto")) {
        /* auto runs, for each B, exactly the implementation its table names (bit for bit); its rows are not
         * batch-invariant (B = 1 and B = 8 may run different kernels), so the checks below are not for it */
        float *forced = malloc(sizeof(float) * TB * O);
        for (int epi = FK_GEMV_STORE; epi <= FK_GEMV_SWIGLU; epi++)
            for (int B = 1; B <= TB; B++) {
                int cols = epi == FK_GEMV_SWIGLU ? I : O, named = fk_ctx_gemv_auto_impl(kc, B, O, K, epi);
                CHECK(named == FK_GEMV_IMPL_SIMT || named == FK_GEMV_IMPL_TC, "auto names implementation %d", named);
                for (int k = 0; k < 2; k++) {
                    fk_ctx_set_gemv_impl(kc, k ? named : FK_GEMV_IMPL_AUTO);
                    uint16_t *hd = ct_to_dev(h, (size_t)TB * O); /* RESID adds into its output: a fresh copy each run */
                    ct_poison(dout, (size_t)TB * O);
                    uint16_t *o = epi == FK_GEMV_RESID ? hd : dout;
                    CHECK(fk_gemv(kc, &dM, dx, B, epi == FK_GEMV_SWIGLU && norm_ok, 1e-6f, epi, o, 0) == 0, "%s",
                          frigg_error());
                    ct_from_dev(o, (size_t)B * cols, k ? forced : got);
                    cudaFree(hd);
                }
                fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_AUTO);
                CHECK(!memcmp(got, forced, sizeof(float) * B * cols), "gemv auto %dx%d B=%d epi %d: differs from %s, its table's choice",
                      O, K, B, epi, fk_gemv_impl_name(named));
            }
        free(forced);
    } else {
    /* Batch rows are independent, bit for bit: row b of a B-row pass equals the 1-row pass on x row b. */
    float *one = malloc(sizeof(float) * TB * O);
    for (int epi = FK_GEMV_STORE; epi <= FK_GEMV_SWIGLU; epi += FK_GEMV_SWIGLU) {
        int cols = epi == FK_GEMV_SWIGLU ? I : O;
        for (int b = 0; b < TB; b++) {
            CHECK(fk_gemv(kc, &dM, dx + (size_t)b * K, 1, norm_ok, 1e-6f, epi, dout + (size_t)b * cols, 0) == 0, "%s",
                  frigg_error());
        }
        ct_from_dev(dout, (size_t)TB * cols, one);
        int same = 1;
        for (int B = 2; B <= TB; B++) {
            ct_poison(dout, (size_t)TB * O);
            fk_gemv(kc, &dM, dx, B, norm_ok, 1e-6f, epi, dout, 0);
            ct_from_dev(dout, (size_t)B * cols, got);
            same &= !memcmp(got, one, sizeof(float) * B * cols);
        }
        CHECK(same, "gemv %s %dx%d epi %d: a batch row differs from its single-row pass", impl_name, O, K, epi);
    }
    free(one);

    /* The tensor-core kernel's grid (1 block walking every tile, 7 blocks, as many as fit) changes no bit;
     * a repeated launch neither. */
    if (!strcmp(impl_name, "tc")) {
        static const int caps[] = {1, 7, 0};
        float *base = malloc(sizeof(float) * TB * O);
        for (int B = norm_ok ? 16 : 3;; B = 8) {
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
            fk_ctx_set_gemv_tc_max_blocks(kc, caps[c]);
            for (int rep = 0; rep < 2; rep++) {
                ct_poison(dout, (size_t)TB * O);
                CHECK(fk_gemv(kc, &dM, dx, B, 1, 1e-6f, FK_GEMV_SWIGLU, dout, 0) == 0, "%s", frigg_error());
                ct_from_dev(dout, (size_t)B * I, got);
                if (c == 0 && rep == 0) memcpy(base, got, sizeof(float) * B * I);
                else
                    CHECK(!memcmp(got, base, sizeof(float) * B * I), "gemv tc %dx%d B=%d: grid cap %d (run %d) changed the result",
                          O, K, B, caps[c], rep);
            }
        }
        if (B == 8 || !norm_ok) break; /* 16 rows (both mma halves), then 8 */
        }
        fk_ctx_set_gemv_tc_max_blocks(kc, 0);
        free(base);
    }
    }
    cudaFree(dW); cudaFree(dx); cudaFree(dout);
    free(W); free(x); free(h); free(Wb); free(xn); free(lin[0]); free(lin[1]); free(ref); free(got);
}
#endif

#ifdef FRIGG_CUDA
/* auto's table per context: malformed rows are refused (the table unchanged); a valid one changes this
 * context's choices and no other's. */
static void test_auto_table(void) {
    static const char *bad[] = {"down=sssssss", "downs=ssssssss", "down=sssssssx", "down=ssssssss,", "=ssssssss",
                                "down:ssssssss", "down=11111111"};
    fk_ctx *other = fk_ctx_create();
    CHECK(other != NULL, "fk_ctx_create: %s", frigg_error());
    if (!other) return;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(fk_ctx_set_gemv_auto(other, bad[i]) == -1 && strstr(frigg_error(), "auto table"), "auto row '%s' must be refused",
              bad[i]);
    CHECK(fk_ctx_gemv_auto_impl(other, 1, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_TC, "a refused row changed the table");
    CHECK(fk_ctx_set_gemv_auto(other, "down=stttttts,o_proj=sttttttt") == 0, "%s", frigg_error());
    CHECK(fk_ctx_gemv_auto_impl(other, 1, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "down B=1: not simt");
    CHECK(fk_ctx_gemv_auto_impl(other, 2, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_TC, "down B=2: not tc");
    CHECK(fk_ctx_gemv_auto_impl(other, 8, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "down B=8: not simt");
    CHECK(fk_ctx_gemv_auto_impl(other, 1, 1536, 1536, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "o_proj B=1: not simt");
    CHECK(fk_ctx_gemv_auto_impl(kc, 1, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_TC, "another context's table changed");
    /* the quantized rows are their own: setting one leaves the bf16 row of the same class alone */
    CHECK(fk_ctx_set_gemv_auto(other, "q.down=tttttttt") == 0, "%s", frigg_error());
    CHECK(fk_ctx_gemv_q_auto_impl(other, 1, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_TC, "q.down B=1: not tc");
    CHECK(fk_ctx_gemv_auto_impl(other, 1, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "q.down changed the bf16 row");
    CHECK(fk_ctx_set_gemv_auto(other, "q.down=ssssssss") == 0, "%s", frigg_error());
    CHECK(fk_ctx_gemv_q_auto_impl(other, 8, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "q.down B=8: not simt");
    CHECK(fk_ctx_set_gemv_auto(other, "q.dow=ssssssss") == -1, "q.dow must be refused");
    fk_ctx_free(other);
}

/* Two contexts with different choices (one simt, one tc), launched in turn on one stream: each gives its
 * own implementation's bits, as it does alone. And an int8 descriptor without scales is refused by name. */
static void test_two_contexts(void) {
    const int O = 1536, K = 4096, B = 3;
    fk_ctx *a = fk_ctx_create(), *b = fk_ctx_create();
    CHECK(a && b, "fk_ctx_create: %s", frigg_error());
    if (!a || !b) {
        fk_ctx_free(a);
        fk_ctx_free(b);
        return;
    }
    CHECK(fk_ctx_set_gemv_impl(a, FK_GEMV_IMPL_SIMT) == 0 && fk_ctx_set_gemv_impl(b, FK_GEMV_IMPL_TC) == 0, "%s", frigg_error());
    CHECK(fk_ctx_set_gemv_impl(a, 7) == -1, "gemv impl 7 accepted");
    float *W = malloc(sizeof(float) * O * K), *x = malloc(sizeof(float) * B * K), *alone[2], *turn[2];
    ct_fill(W, (size_t)O * K, 1.0f / sqrtf((float)K));
    ct_fill(x, (size_t)B * K, 2.0f);
    uint16_t *dW = ct_to_dev(W, (size_t)O * K), *dx = ct_to_dev(x, (size_t)B * K), *d[2];
    const frigg_mat dM = {.w = dW, .rows = O, .cols = K, .dtype = FRIGG_DT_BF16};
    fk_ctx *ctxs[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        cudaMalloc((void **)&d[k], (size_t)B * O * 2);
        alone[k] = malloc(sizeof(float) * B * O);
        turn[k] = malloc(sizeof(float) * B * O);
        ct_poison(d[k], (size_t)B * O);
        CHECK(fk_gemv(ctxs[k], &dM, dx, B, 0, 1e-6f, FK_GEMV_STORE, d[k], 0) == 0, "%s", frigg_error());
        ct_from_dev(d[k], (size_t)B * O, alone[k]);
    }
    for (int rep = 0; rep < 3; rep++)
        for (int k = 0; k < 2; k++) CHECK(fk_gemv(ctxs[k], &dM, dx, B, 0, 1e-6f, FK_GEMV_STORE, d[k], 0) == 0, "%s", frigg_error());
    for (int k = 0; k < 2; k++) {
        ct_from_dev(d[k], (size_t)B * O, turn[k]);
        CHECK(!memcmp(turn[k], alone[k], sizeof(float) * B * O), "context %d: launched in turn with another, not its own bits", k);
    }
    CHECK(memcmp(alone[0], alone[1], sizeof(float) * B * O) != 0,
          "simt and tc gave identical bits at K 4096: the two contexts did not run different kernels");
    frigg_mat q8 = dM;
    q8.dtype = FRIGG_DT_INT8;
    CHECK(fk_gemv(a, &q8, dx, B, 0, 1e-6f, FK_GEMV_STORE, d[0], 0) == -1 && strstr(frigg_error(), "int8"),
          "an int8 descriptor without scales was not refused by name: %s", frigg_error());
    for (int k = 0; k < 2; k++) {
        cudaFree(d[k]);
        free(alone[k]);
        free(turn[k]);
    }
    cudaFree(dW);
    cudaFree(dx);
    free(W);
    free(x);
    fk_ctx_free(a);
    fk_ctx_free(b);
}
#endif

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_gemv");
#ifndef FRIGG_CUDA
    SKIP("built without CUDA (FRIGG_CUDA=0)");
#else
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device present");
    } else {
        kc = fk_ctx_create();
        CHECK(kc != NULL, "fk_ctx_create: %s", frigg_error());
        frigg_pool *pool = frigg_pool_create(0);
        /* (O, K): Mimir's o_proj; a partial last tile in both tilings (100: 12.5 plain tiles, 50 units = 12.5
         * paired tiles); K/8 = 257 over 9 warps; K 4352, past the tensor-core kernel's one round (the CUDA-core
         * kernel's, under every implementation); a tiny K (1 warp) */
        static const int shapes[][2] = {{1536, 1536}, {100, 512}, {72, 2056}, {40, 4352}, {24, 64}};
        static const int impls[] = {FK_GEMV_IMPL_TC, FK_GEMV_IMPL_SIMT, FK_GEMV_IMPL_AUTO};
        int impl_env = fk_ctx_gemv_impl(kc);
        for (int i = 0; i < 3; i++) {
            fk_ctx_set_gemv_impl(kc, impls[i]);
            impl_name = fk_gemv_impl_name(impls[i]);
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) test_shape(pool, shapes[s][0], shapes[s][1]);
        }
        /* auto's table, at Mimir's shapes: simt at batch 1 for the normed gqkv and gate_up, tensor cores for
         * o_proj and down at batch 1 and for all four at batch 8 */
        static const int mimir[][3] = {{6144, 1536, FK_GEMV_QKV}, {1536, 1536, FK_GEMV_RESID}, {8192, 1536, FK_GEMV_SWIGLU},
                                       {1536, 4096, FK_GEMV_RESID}};
        for (int i = 0; i < 4; i++) {
            int want1 = mimir[i][2] == FK_GEMV_RESID ? FK_GEMV_IMPL_TC : FK_GEMV_IMPL_SIMT;
            CHECK(fk_ctx_gemv_auto_impl(kc, 1, mimir[i][0], mimir[i][1], mimir[i][2]) == want1, "auto B=1 %dx%d: not %s",
                  mimir[i][0], mimir[i][1], fk_gemv_impl_name(want1));
            CHECK(fk_ctx_gemv_auto_impl(kc, 8, mimir[i][0], mimir[i][1], mimir[i][2]) == FK_GEMV_IMPL_TC, "auto B=8 %dx%d: not tc",
                  mimir[i][0], mimir[i][1]);
        }
        /* the int8 cache's gqkv, a plain store of the gqkv shape, takes the gqkv row (not o_proj's) */
        CHECK(fk_ctx_gemv_auto_impl(kc, 1, 6144, 1536, FK_GEMV_STORE) == FK_GEMV_IMPL_SIMT, "auto B=1 plain 6144x1536: not simt");
        CHECK(fk_ctx_gemv_auto_impl(kc, 2, 6144, 1536, FK_GEMV_STORE) == FK_GEMV_IMPL_TC, "auto B=2 plain 6144x1536: not tc");
        CHECK(fk_ctx_gemv_q_auto_impl(kc, 2, 6144, 1536, FK_GEMV_STORE) == FK_GEMV_IMPL_SIMT, "q. auto B=2 plain 6144x1536: not simt");
        /* K past the tensor-core kernel's one round goes to the CUDA-core kernel at every batch size */
        CHECK(fk_ctx_gemv_auto_impl(kc, 8, 1536, 4104, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "auto B=8 K=4104: not simt");
        CHECK(fk_ctx_gemv_auto_impl(kc, 8, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_TC, "auto B=8 K=4096: not tc");
        /* past 8 rows (the table's end): one tensor-core pass where K allows, else the CUDA-core kernel */
        CHECK(fk_ctx_gemv_auto_impl(kc, 16, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_TC, "auto B=16 K=4096: not tc");
        CHECK(fk_ctx_gemv_auto_impl(kc, 9, 6144, 1536, FK_GEMV_QKV) == FK_GEMV_IMPL_TC, "auto B=9 gqkv: not tc");
        CHECK(fk_ctx_gemv_auto_impl(kc, 16, 1536, 4104, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "auto B=16 K=4104: not simt");
        CHECK(fk_ctx_gemv_q_auto_impl(kc, 12, 1536, 1536, FK_GEMV_RESID) == FK_GEMV_IMPL_TC, "q. auto B=12: not tc");
        {
            const frigg_mat none = {.w = (void *)16, .rows = 64, .cols = 64, .dtype = FRIGG_DT_BF16};
            CHECK(fk_gemv(kc, &none, (const uint16_t *)16, FK_GEMV_MAX_ROWS + 1, 0, 1e-6f, FK_GEMV_STORE, (uint16_t *)16, 0) == -1 &&
                      strstr(frigg_error(), "rows 17"),
                  "17 rows accepted: %s", frigg_error());
        }
        fk_ctx_set_gemv_impl(kc, impl_env);
        test_auto_table();
        test_two_contexts();
        frigg_pool_destroy(pool);
        fk_ctx_free(kc);
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "device error: %s", cudaGetErrorString(e));
    }
#endif
    TEST_MAIN_END();
}
