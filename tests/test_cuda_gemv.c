/* test_cuda_gemv.c — the decode GEMV implementations (tensor cores, CUDA cores) on the cases their tiling
 * has edges at: every batch size 1..8, partial 8-row tiles (O % 8 != 0, paired O/2 % 4 != 0), K slices that
 * do not divide evenly into warps (K/8 = 257), and K > 4096, which every implementation hands to the CUDA-core
 * kernel (the tensor-core kernel keeps one round of K per warp), against the CPU reference ops. And the properties batched decode relies on, bit for bit: each batch row's result equals
 * the single-row pass on that row, for every B; results do not depend on the tensor-core kernel's grid
 * (persistent blocks walking several tiles each); a repeated launch gives the same bits.
 * Without CUDA in the build, or without a GPU, everything is skipped (0 failed). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "backend.h"
#include "cpu_ops.h"
#include "../kernels/kernels.h"
#define CUDA_TEST_SEED 0x2545f4914f6cdd1dull
#include "cuda_test_util.h"



static const char *impl_name; /* "tc", "simt", "auto" */

/* One (O, K) shape: every B, every epilogue, with and without the fused norm, against the CPU ops. */
static void test_shape(frigg_pool *pool, int O, int K) {
    float *W = malloc(sizeof(float) * O * K), *x = malloc(sizeof(float) * 8 * K), *h = malloc(sizeof(float) * 8 * O);
    ct_fill(W, (size_t)O * K, 1.0f / sqrtf((float)K));
    ct_fill(x, (size_t)8 * K, 2.0f);
    ct_fill(h, (size_t)8 * O, 1.0f);
    uint16_t *Wb = malloc((size_t)O * K * 2);
    for (size_t i = 0; i < (size_t)O * K; i++) Wb[i] = frigg_f32_to_bf16(W[i]);
    frigg_mat M = {.w = Wb, .rows = O, .cols = K};
    uint16_t *dW = ct_to_dev(W, (size_t)O * K), *dx = ct_to_dev(x, (size_t)8 * K), *dout;
    cudaMalloc((void **)&dout, (size_t)8 * O * 2);
    float *xn = malloc(sizeof(float) * 8 * K), *lin[2], *ref = malloc(sizeof(float) * 8 * O), *got = malloc(sizeof(float) * 8 * O);
    lin[0] = malloc(sizeof(float) * 8 * O);
    lin[1] = malloc(sizeof(float) * 8 * O);
    frigg_cpu_linear(FRIGG_PREC_BF16, pool, &M, x, 8, lin[0]); /* rows are independent: the B-row references are the first B rows */
    frigg_cpu_rmsnorm(FRIGG_PREC_BF16, x, 8, K, 1e-6, xn);
    frigg_cpu_linear(FRIGG_PREC_BF16, pool, &M, xn, 8, lin[1]);
    int I = O / 2;
    for (int B = 1; B <= 8; B++)
        for (int norm = 0; norm <= 1; norm++) {
            char what[128];
            double frac = norm ? 0.3 : 0.03;
            if (norm && (size_t)B * K * 2 > 64 * 1024) { /* beyond the staged-x limit: must be refused */
                CHECK(fk_gemv(dW, O, K, dx, B, norm, 1e-6f, FK_GEMV_STORE, dout, 0) != 0,
                      "gemv %s %dx%d B=%d norm: accepted %zu bytes of staged x", impl_name, O, K, B, (size_t)B * K * 2);
                continue;
            }
            ct_poison(dout, (size_t)8 * O);
            CHECK(fk_gemv(dW, O, K, dx, B, norm, 1e-6f, FK_GEMV_STORE, dout, 0) == 0, "%s", frigg_error());
            ct_from_dev(dout, (size_t)B * O, got);
            snprintf(what, sizeof what, "gemv %s %dx%d B=%d norm=%d store", impl_name, O, K, B, norm);
            ct_expect_close(what, got, lin[norm], (size_t)B * O, frac);

            uint16_t *hd = ct_to_dev(h, (size_t)B * O);
            CHECK(fk_gemv(dW, O, K, dx, B, norm, 1e-6f, FK_GEMV_RESID, hd, 0) == 0, "%s", frigg_error());
            ct_from_dev(hd, (size_t)B * O, got);
            cudaFree(hd);
            for (int i = 0; i < B * O; i++) ref[i] = frigg_round_bf16(h[i] + lin[norm][i]);
            snprintf(what, sizeof what, "gemv %s %dx%d B=%d norm=%d resid", impl_name, O, K, B, norm);
            ct_expect_close(what, got, ref, (size_t)B * O, frac);

            for (int b = 0; b < B; b++)
                frigg_cpu_swiglu(FRIGG_PREC_BF16, lin[norm] + (size_t)b * O, lin[norm] + (size_t)b * O + I, I, ref + (size_t)b * I);
            ct_poison(dout, (size_t)8 * O);
            CHECK(fk_gemv(dW, O, K, dx, B, norm, 1e-6f, FK_GEMV_SWIGLU, dout, 0) == 0, "%s", frigg_error());
            ct_from_dev(dout, (size_t)B * I, got);
            snprintf(what, sizeof what, "gemv %s %dx%d B=%d norm=%d swiglu", impl_name, O, K, B, norm);
            ct_expect_close(what, got, ref, (size_t)B * I, frac + 0.05);
        }

    int norm_ok = 8 * K * 2 <= 64 * 1024;
    if (!strcmp(impl_name, "auto")) {
        /* auto runs, for each B, exactly the implementation its table names (bit for bit); its rows are not
         * batch-invariant (B = 1 and B = 8 may run different kernels), so the checks below are not for it */
        float *forced = malloc(sizeof(float) * 8 * O);
        for (int epi = FK_GEMV_STORE; epi <= FK_GEMV_SWIGLU; epi++)
            for (int B = 1; B <= 8; B++) {
                int cols = epi == FK_GEMV_SWIGLU ? I : O, named = fk_gemv_auto_impl(B, O, K, epi);
                CHECK(named == FK_GEMV_IMPL_SIMT || named == FK_GEMV_IMPL_TC, "auto names implementation %d", named);
                for (int k = 0; k < 2; k++) {
                    fk_set_gemv_impl(k ? named : FK_GEMV_IMPL_AUTO);
                    uint16_t *hd = ct_to_dev(h, (size_t)8 * O); /* RESID adds into its output: a fresh copy each run */
                    ct_poison(dout, (size_t)8 * O);
                    uint16_t *o = epi == FK_GEMV_RESID ? hd : dout;
                    CHECK(fk_gemv(dW, O, K, dx, B, epi == FK_GEMV_SWIGLU && norm_ok, 1e-6f, epi, o, 0) == 0, "%s",
                          frigg_error());
                    ct_from_dev(o, (size_t)B * cols, k ? forced : got);
                    cudaFree(hd);
                }
                fk_set_gemv_impl(FK_GEMV_IMPL_AUTO);
                CHECK(!memcmp(got, forced, sizeof(float) * B * cols), "gemv auto %dx%d B=%d epi %d: differs from %s, its table's choice",
                      O, K, B, epi, fk_gemv_impl_name(named));
            }
        free(forced);
    } else {
    /* Batch rows are independent, bit for bit: row b of a B-row pass equals the 1-row pass on x row b. */
    float *one = malloc(sizeof(float) * 8 * O);
    for (int epi = FK_GEMV_STORE; epi <= FK_GEMV_SWIGLU; epi += FK_GEMV_SWIGLU) {
        int cols = epi == FK_GEMV_SWIGLU ? I : O;
        for (int b = 0; b < 8; b++) {
            CHECK(fk_gemv(dW, O, K, dx + (size_t)b * K, 1, norm_ok, 1e-6f, epi, dout + (size_t)b * cols, 0) == 0, "%s",
                  frigg_error());
        }
        ct_from_dev(dout, (size_t)8 * cols, one);
        int same = 1;
        for (int B = 2; B <= 8; B++) {
            ct_poison(dout, (size_t)8 * O);
            fk_gemv(dW, O, K, dx, B, norm_ok, 1e-6f, epi, dout, 0);
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
        float *base = malloc(sizeof(float) * 8 * O);
        int B = norm_ok ? 8 : 3;
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
            fk_gemv_tc_set_max_blocks(caps[c]);
            for (int rep = 0; rep < 2; rep++) {
                ct_poison(dout, (size_t)8 * O);
                CHECK(fk_gemv(dW, O, K, dx, B, 1, 1e-6f, FK_GEMV_SWIGLU, dout, 0) == 0, "%s", frigg_error());
                ct_from_dev(dout, (size_t)B * I, got);
                if (c == 0 && rep == 0) memcpy(base, got, sizeof(float) * B * I);
                else
                    CHECK(!memcmp(got, base, sizeof(float) * B * I), "gemv tc %dx%d: grid cap %d (run %d) changed the result",
                          O, K, caps[c], rep);
            }
        }
        fk_gemv_tc_set_max_blocks(0);
        /* the A/B variants (two tiles in flight per warp; the reduction and epilogue rotating over the
         * warps), with a grid of as many blocks as fit and with 1 block: the same bits as the default */
        for (int v = 1; v < 4; v++)
            for (int c = 0; c < 2; c++) {
                fk_gemv_tc_set_variant(v & 1 ? 2 : 1, v >> 1);
                fk_gemv_tc_set_max_blocks(c);
                ct_poison(dout, (size_t)8 * O);
                CHECK(fk_gemv(dW, O, K, dx, B, 1, 1e-6f, FK_GEMV_SWIGLU, dout, 0) == 0, "%s", frigg_error());
                ct_from_dev(dout, (size_t)B * I, got);
                CHECK(!memcmp(got, base, sizeof(float) * B * I), "gemv tc %dx%d: depth %d rotate %d grid cap %d changed the result",
                      O, K, v & 1 ? 2 : 1, v >> 1, c);
            }
        fk_gemv_tc_set_variant(2, 0); /* the default */
        fk_gemv_tc_set_max_blocks(0);
        free(base);
    }
    }
    /* simt with every chunk of a long row in flight (K > 2048 here): the same chunk order, the same bits */
    if (!strcmp(impl_name, "simt") && K > 2048) {
        float *base = malloc(sizeof(float) * 8 * O);
        for (int lu = 0; lu < 2; lu++) {
            fk_gemv_simt_set_long_unroll(lu);
            ct_poison(dout, (size_t)8 * O);
            CHECK(fk_gemv(dW, O, K, dx, 3, 0, 1e-6f, FK_GEMV_STORE, dout, 0) == 0, "%s", frigg_error());
            ct_from_dev(dout, (size_t)3 * O, lu ? got : base);
        }
        fk_gemv_simt_set_long_unroll(0);
        CHECK(!memcmp(got, base, sizeof(float) * 3 * O), "gemv simt %dx%d: the long unroll changed the result", O, K);
        free(base);
    }
    cudaFree(dW); cudaFree(dx); cudaFree(dout);
    free(W); free(x); free(h); free(Wb); free(xn); free(lin[0]); free(lin[1]); free(ref); free(got);
}
#endif

#ifdef FRIGG_CUDA
/* FRIGG_GEMV_AUTO (read by fk_init): malformed rows are errors; a valid one changes auto's choices; the
 * depth-1 tensor-core kernel it can name ('1') gives the default tc's bits. Leaves the table as shipped. */
static void test_auto_env(void) {
    static const char *bad[] = {"down=1111111", "downs=11111111", "down=1111111x", "down=11111111,", "=11111111",
                                "down:11111111"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("FRIGG_GEMV_AUTO", bad[i], 1);
        CHECK(fk_init() == -1 && strstr(frigg_error(), "FRIGG_GEMV_AUTO"), "FRIGG_GEMV_AUTO=%s must be refused", bad[i]);
    }
    setenv("FRIGG_GEMV_AUTO", "down=s1111111,o_proj=sttttttt", 1);
    CHECK(fk_init() == 0, "fk_init: %s", frigg_error());
    CHECK(fk_gemv_auto_impl(1, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "down B=1: not simt");
    CHECK(fk_gemv_auto_impl(2, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_TC, "down B=2: not tc");
    CHECK(fk_gemv_auto_impl(1, 1536, 1536, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "o_proj B=1: not simt");
    const int O = 1536, K = 4096, B = 3;
    float *W = malloc(sizeof(float) * O * K), *x = malloc(sizeof(float) * B * K), *a = malloc(sizeof(float) * B * O),
          *b = malloc(sizeof(float) * B * O);
    ct_fill(W, (size_t)O * K, 1.0f / sqrtf((float)K));
    ct_fill(x, (size_t)B * K, 2.0f);
    uint16_t *dW = ct_to_dev(W, (size_t)O * K), *dx = ct_to_dev(x, (size_t)B * K), *dout;
    cudaMalloc((void **)&dout, (size_t)B * O * 2);
    int impl = fk_get_gemv_impl();
    for (int k = 0; k < 2; k++) { /* auto ('1': depth 1), then tc forced (depth 2) */
        fk_set_gemv_impl(k ? FK_GEMV_IMPL_TC : FK_GEMV_IMPL_AUTO);
        ct_poison(dout, (size_t)B * O);
        CHECK(fk_gemv(dW, O, K, dx, B, 0, 1e-6f, FK_GEMV_STORE, dout, 0) == 0, "%s", frigg_error());
        ct_from_dev(dout, (size_t)B * O, k ? b : a);
    }
    CHECK(!memcmp(a, b, sizeof(float) * B * O), "tc at depth 1 differs from depth 2");
    fk_set_gemv_impl(impl);
    cudaFree(dW);
    cudaFree(dx);
    cudaFree(dout);
    free(W);
    free(x);
    free(a);
    free(b);
    setenv("FRIGG_GEMV_AUTO", "down=tttttttt,o_proj=tttttttt", 1); /* the shipped rows */
    CHECK(fk_init() == 0, "fk_init: %s", frigg_error());
    unsetenv("FRIGG_GEMV_AUTO");
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
        CHECK(fk_init() == 0, "fk_init: %s", frigg_error());
        frigg_pool *pool = frigg_pool_create(0);
        /* (O, K): Mimir's o_proj; a partial last tile in both tilings (100: 12.5 plain tiles, 50 units = 12.5
         * paired tiles); K/8 = 257 over 9 warps; K 4352, past the tensor-core kernel's one round (the CUDA-core
         * kernel's, under every implementation); a tiny K (1 warp) */
        static const int shapes[][2] = {{1536, 1536}, {100, 512}, {72, 2056}, {40, 4352}, {24, 64}};
        static const int impls[] = {FK_GEMV_IMPL_TC, FK_GEMV_IMPL_SIMT, FK_GEMV_IMPL_AUTO};
        int impl_env = fk_get_gemv_impl();
        for (int i = 0; i < 3; i++) {
            fk_set_gemv_impl(impls[i]);
            impl_name = fk_gemv_impl_name(impls[i]);
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) test_shape(pool, shapes[s][0], shapes[s][1]);
        }
        /* auto's table, at Mimir's shapes: simt at batch 1 for the normed gqkv and gate_up, tensor cores for
         * o_proj and down at batch 1 and for all four at batch 8 */
        static const int mimir[][3] = {{6144, 1536, FK_GEMV_QKV}, {1536, 1536, FK_GEMV_RESID}, {8192, 1536, FK_GEMV_SWIGLU},
                                       {1536, 4096, FK_GEMV_RESID}};
        for (int i = 0; i < 4; i++) {
            int want1 = mimir[i][2] == FK_GEMV_RESID ? FK_GEMV_IMPL_TC : FK_GEMV_IMPL_SIMT;
            CHECK(fk_gemv_auto_impl(1, mimir[i][0], mimir[i][1], mimir[i][2]) == want1, "auto B=1 %dx%d: not %s",
                  mimir[i][0], mimir[i][1], fk_gemv_impl_name(want1));
            CHECK(fk_gemv_auto_impl(8, mimir[i][0], mimir[i][1], mimir[i][2]) == FK_GEMV_IMPL_TC, "auto B=8 %dx%d: not tc",
                  mimir[i][0], mimir[i][1]);
        }
        /* K past the tensor-core kernel's one round goes to the CUDA-core kernel at every batch size */
        CHECK(fk_gemv_auto_impl(8, 1536, 4104, FK_GEMV_RESID) == FK_GEMV_IMPL_SIMT, "auto B=8 K=4104: not simt");
        CHECK(fk_gemv_auto_impl(8, 1536, 4096, FK_GEMV_RESID) == FK_GEMV_IMPL_TC, "auto B=8 K=4096: not tc");
        test_auto_env();
        fk_set_gemv_impl(impl_env);
        frigg_pool_destroy(pool);
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "device error: %s", cudaGetErrorString(e));
    }
#endif
    TEST_MAIN_END();
}
