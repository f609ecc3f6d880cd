/* test_cuda_mlp.c — batch-1 decode's fused MLP (kernels/mlp.cu) and the kernels that fold its pending output
 * into x (kernels.h: fold). Against the CPU reference ops: x + bf16(down · swiglu(gate_up · rmsnorm(x))).
 * Bit for bit: fold is the formula kernels.h states (checked on the host from the accumulator's integers);
 * each folding kernel (o_proj's residual epilogue, the gqkv norm, under both GEMV implementations, and the
 * run's end, on both norm paths) equals its plain version run on the folded x, and leaves acc zero where it
 * writes x; a repeated MLP gives the same integers. Out-of-range partials and NaN set the flag; unsupported
 * shapes are refused. Without CUDA in the build, or without a GPU, everything is skipped (0 failed). */
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
#define CUDA_TEST_SEED 0x9e3779b97f4a7c15ull
#include "cuda_test_util.h"

#define EPS 1e-6f

static long long *acc_new(int D) {
    long long *a = NULL;
    cudaMalloc((void **)&a, (size_t)D * 8);
    cudaMemset(a, 0, (size_t)D * 8);
    return a;
}
static void acc_get(const long long *d, int D, long long *h) {
    cudaDeviceSynchronize();
    cudaMemcpy(h, d, (size_t)D * 8, cudaMemcpyDeviceToHost);
}
static long long *acc_dup(const long long *h, int D) {
    long long *a = acc_new(D);
    cudaMemcpy(a, h, (size_t)D * 8, cudaMemcpyHostToDevice);
    return a;
}
static int acc_is_zero(const long long *d, int D) {
    long long *h = malloc((size_t)D * 8);
    acc_get(d, D, h);
    int z = 1;
    for (int i = 0; i < D; i++) z &= h[i] == 0;
    free(h);
    return z;
}
static int same_dev(const uint16_t *a, const uint16_t *b, size_t n) {
    uint16_t *ha = malloc(n * 2), *hb = malloc(n * 2);
    cudaDeviceSynchronize();
    cudaMemcpy(ha, a, n * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(hb, b, n * 2, cudaMemcpyDeviceToHost);
    int same = !memcmp(ha, hb, n * 2);
    free(ha);
    free(hb);
    return same;
}
static uint16_t *dev_copy(const uint16_t *d, size_t n) {
    uint16_t *c = NULL;
    cudaMalloc((void **)&c, n * 2 + 16);
    cudaMemcpy(c, d, n * 2, cudaMemcpyDeviceToDevice);
    return c;
}

/* kernels.h's fold on the host: bf16(x + bf16(float(acc) * 2^-32)); (float) of a long long rounds to nearest
 * even, as __ll2float_rn. */
static float host_fold(float x, long long a) {
    return frigg_round_bf16(x + frigg_round_bf16((float)a * (1.0f / 4294967296.0f)));
}

static void test_shape(frigg_pool *pool, int D, int I) {
    char what[160];
    float *x = malloc(sizeof(float) * D), *gu = malloc(sizeof(float) * 2 * I * D), *dn = malloc(sizeof(float) * D * I);
    ct_fill(x, D, 2.0f);
    ct_fill(gu, (size_t)2 * I * D, 1.0f / sqrtf((float)D));
    ct_fill(dn, (size_t)D * I, 1.0f / sqrtf((float)I));
    /* the CPU reference */
    uint16_t *gub = malloc((size_t)2 * I * D * 2), *dnb = malloc((size_t)D * I * 2);
    for (size_t i = 0; i < (size_t)2 * I * D; i++) gub[i] = frigg_f32_to_bf16(gu[i]);
    for (size_t i = 0; i < (size_t)D * I; i++) dnb[i] = frigg_f32_to_bf16(dn[i]);
    frigg_mat Mgu = {gub, 2 * I, D}, Mdn = {dnb, D, I};
    float *xn = malloc(sizeof(float) * D), *lin = malloc(sizeof(float) * 2 * I), *m = malloc(sizeof(float) * I);
    float *y = malloc(sizeof(float) * D), *ref = malloc(sizeof(float) * D), *got = malloc(sizeof(float) * D);
    frigg_cpu_rmsnorm(x, 1, D, EPS, xn);
    frigg_cpu_linear(pool, &Mgu, xn, 1, lin);
    frigg_cpu_swiglu(lin, lin + I, I, m);
    frigg_cpu_linear(pool, &Mdn, m, 1, y);
    for (int i = 0; i < D; i++) ref[i] = frigg_round_bf16(x[i] + y[i]);

    float *dnT = malloc(sizeof(float) * D * I); /* the kernel reads down_proj transposed */
    for (int d = 0; d < D; d++)
        for (int i = 0; i < I; i++) dnT[(size_t)i * D + d] = dn[(size_t)d * I + i];
    uint16_t *dgu = ct_to_dev(gu, (size_t)2 * I * D), *ddn = ct_to_dev(dnT, (size_t)D * I), *dx = ct_to_dev(x, D);
    free(dnT);
    long long *dacc = acc_new(D), *hacc = malloc((size_t)D * 8), *hacc2 = malloc((size_t)D * 8);
    int *dflag = NULL, flag = 0;
    cudaMalloc((void **)&dflag, 4);
    cudaMemset(dflag, 0, 4);
    CHECK(fk_mlp_supported(1, D, I), "mlp %dx%d: not supported", D, I);
    CHECK(fk_mlp_decode(dgu, ddn, D, I, dx, EPS, dacc, dflag, 0) == 0, "%s", frigg_error());
    acc_get(dacc, D, hacc);
    /* a repeated run (and the early-request variant) gives the same integers, whatever order the blocks land */
    for (int v = 0; v < 2; v++) {
        fk_set_mlp_impl(v ? FK_MLP_FUSED_EARLY : FK_MLP_FUSED);
        cudaMemset(dacc, 0, (size_t)D * 8);
        CHECK(fk_mlp_decode(dgu, ddn, D, I, dx, EPS, dacc, dflag, 0) == 0, "%s", frigg_error());
        acc_get(dacc, D, hacc2);
        CHECK(!memcmp(hacc, hacc2, (size_t)D * 8), "mlp %dx%d: run %d (%s) differs from the first", D, I, v,
              v ? "fused-early" : "fused");
    }
    fk_set_mlp_impl(FK_MLP_FUSED);
    cudaMemcpy(&flag, dflag, 4, cudaMemcpyDeviceToHost);
    CHECK(flag == 0, "mlp %dx%d: range flag set on ordinary data", D, I);
    float *xf = malloc(sizeof(float) * D); /* x with the pending output folded in, on the host */
    for (int i = 0; i < D; i++) xf[i] = host_fold(x[i], hacc[i]);
    snprintf(what, sizeof what, "mlp %dx%d against the CPU ops", D, I);
    ct_expect_close(what, xf, ref, D, 0.3);
    uint16_t *dxf = ct_to_dev(xf, D);

    /* o_proj's residual epilogue with the fold: equal to the plain epilogue on the folded x, acc left zero.
     * With zero weights it writes fold(x, acc) itself. */
    float *Wo = malloc(sizeof(float) * D * D), *yin = malloc(sizeof(float) * D);
    ct_fill(Wo, (size_t)D * D, 1.0f / sqrtf((float)D));
    ct_fill(yin, D, 1.0f);
    uint16_t *dWo = ct_to_dev(Wo, (size_t)D * D), *dyin = ct_to_dev(yin, D), *dzero;
    cudaMalloc((void **)&dzero, (size_t)D * 8 * 2);
    cudaMemset(dzero, 0, (size_t)D * 8 * 2);
    static const int impls[] = {FK_GEMV_IMPL_SIMT, FK_GEMV_IMPL_TC};
    int impl_env = fk_get_gemv_impl();
    for (int k = 0; k < 2; k++) {
        fk_set_gemv_impl(impls[k]);
        const char *in = fk_gemv_impl_name(impls[k]);
        uint16_t *o1 = dev_copy(dx, D), *o2 = dev_copy(dxf, D);
        long long *a1 = acc_dup(hacc, D);
        CHECK(fk_gemv_resid_fold(dzero, D, 8, dyin, 1, o1, a1, 0) == 0, "%s", frigg_error());
        ct_from_dev(o1, D, got);
        int same = 1;
        for (int i = 0; i < D; i++) same &= got[i] == xf[i];
        CHECK(same, "resid_fold %s %dx%d with zero weights: not fold(x, acc)", in, D, I);
        CHECK(acc_is_zero(a1, D), "resid_fold %s %dx%d: acc not zeroed", in, D, I);
        cudaFree(a1);
        cudaMemcpy(o1, dx, (size_t)D * 2, cudaMemcpyDeviceToDevice);
        a1 = acc_dup(hacc, D);
        CHECK(fk_gemv_resid_fold(dWo, D, D, dyin, 1, o1, a1, 0) == 0, "%s", frigg_error());
        CHECK(fk_gemv(dWo, D, D, dyin, 1, 0, EPS, FK_GEMV_RESID, o2, 0) == 0, "%s", frigg_error());
        CHECK(same_dev(o1, o2, D), "resid_fold %s %dx%d: differs from the plain epilogue on the folded x", in, D, I);
        CHECK(acc_is_zero(a1, D), "resid_fold %s %dx%d: acc not zeroed", in, D, I);
        cudaFree(a1);
        cudaFree(o1);
        cudaFree(o2);

        /* the gqkv norm with the fold: every output equals the plain kernel's on the folded x */
        int hd = 128, H = D / hd, max_ctx = 4;
        long long seq_stride = (long long)H * max_ctx * hd;
        float *tab = malloc(sizeof(float) * max_ctx * hd), *Wq = malloc(sizeof(float) * 4 * D * D);
        ct_fill(tab, (size_t)max_ctx * hd, 1.0f);
        ct_fill(Wq, (size_t)4 * D * D, 1.0f / sqrtf((float)D));
        uint16_t *dcos = ct_to_dev(tab, (size_t)max_ctx * hd), *dsin = ct_to_dev(tab, (size_t)max_ctx * hd);
        uint16_t *dWq = ct_to_dev(Wq, (size_t)4 * D * D), *buf[2][4];
        int32_t two[2] = {0, 1}, *dsp;
        cudaMalloc((void **)&dsp, 8);
        cudaMemcpy(dsp, two, 8, cudaMemcpyHostToDevice);
        size_t n[4] = {(size_t)4 * D, (size_t)D, (size_t)seq_stride, (size_t)seq_stride}; /* gqkv, q, k, v */
        for (int r = 0; r < 2; r++) {
            for (int j = 0; j < 4; j++) {
                cudaMalloc((void **)&buf[r][j], n[j] * 2 + 16);
                cudaMemset(buf[r][j], 0, n[j] * 2);
            }
            fk_qkv_epi qa = {dcos, dsin, dsp, dsp + 1, buf[r][1], buf[r][2], buf[r][3], seq_stride, max_ctx, hd};
            long long *a = acc_dup(hacc, D);
            if (r == 0) CHECK(fk_gemv_qkv_fold(dWq, D, dx, a, 1, EPS, buf[r][0], &qa, 0) == 0, "%s", frigg_error());
            else CHECK(fk_gemv_qkv(dWq, D, dxf, 1, EPS, buf[r][0], &qa, 0) == 0, "%s", frigg_error());
            acc_get(a, D, hacc2);
            if (r == 0) CHECK(!memcmp(hacc, hacc2, (size_t)D * 8), "qkv_fold %s %dx%d: changed acc", in, D, I);
            cudaFree(a);
        }
        int same_all = 1;
        for (int j = 0; j < 4; j++) same_all &= same_dev(buf[0][j], buf[1][j], n[j]);
        CHECK(same_all, "qkv_fold %s %dx%d: differs from the plain kernel on the folded x", in, D, I);
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 4; j++) cudaFree(buf[r][j]);
        cudaFree(dsp);
        cudaFree(dcos);
        cudaFree(dsin);
        cudaFree(dWq);
        free(tab);
        free(Wq);
    }
    fk_set_gemv_impl(impl_env);

    /* the run's end with the fold, on both norm paths: state and x as the plain kernel's on the folded x */
    for (int general = 0; general <= 1; general++) {
        fk_set_eltwise_general(general);
        uint16_t *x1 = dev_copy(dx, D), *x2 = dev_copy(dxf, D), *st1, *st2, *other = ct_to_dev(yin, D);
        cudaMalloc((void **)&st1, (size_t)D * 2);
        cudaMalloc((void **)&st2, (size_t)D * 2);
        long long *a = acc_dup(hacc, D);
        CHECK(fk_run_end_fold(x1, st1, other, 1, D, EPS, a, 0) == 0, "%s", frigg_error());
        CHECK(fk_run_end(x2, st2, other, 1, D, EPS, 0) == 0, "%s", frigg_error());
        CHECK(same_dev(st1, st2, D) && same_dev(x1, x2, D), "run_end_fold %dx%d (general %d): differs from run_end on "
              "the folded x", D, I, general);
        CHECK(acc_is_zero(a, D), "run_end_fold %dx%d (general %d): acc not zeroed", D, I, general);
        cudaFree(a);
        cudaFree(x1);
        cudaFree(x2);
        cudaFree(st1);
        cudaFree(st2);
        cudaFree(other);
    }
    fk_set_eltwise_general(0);

    /* out of range: gate/up weights 2^14 times larger make partials far past 2^23; a NaN weight in down */
    for (int k = 0; k < 2; k++) {
        float *big = malloc(sizeof(float) * 2 * I * D);
        for (size_t i = 0; i < (size_t)2 * I * D; i++) big[i] = k ? gu[i] : gu[i] * 16384.0f;
        uint16_t *dbig = ct_to_dev(big, (size_t)2 * I * D), *ddn2 = dev_copy(ddn, (size_t)D * I);
        if (k) cudaMemset(ddn2 + 5, 0xff, 2); /* a bf16 NaN */
        cudaMemset(dflag, 0, 4);
        cudaMemset(dacc, 0, (size_t)D * 8);
        CHECK(fk_mlp_decode(dbig, ddn2, D, I, dx, EPS, dacc, dflag, 0) == 0, "%s", frigg_error());
        cudaDeviceSynchronize();
        cudaMemcpy(&flag, dflag, 4, cudaMemcpyDeviceToHost);
        CHECK(flag == 1, "mlp %dx%d: %s did not set the range flag", D, I, k ? "a NaN weight" : "partials past 2^23");
        cudaFree(dbig);
        cudaFree(ddn2);
        free(big);
    }

    cudaFree(dgu);
    cudaFree(ddn);
    cudaFree(dx);
    cudaFree(dxf);
    cudaFree(dacc);
    cudaFree(dflag);
    cudaFree(dWo);
    cudaFree(dyin);
    cudaFree(dzero);
    free(x); free(gu); free(dn); free(gub); free(dnb); free(xn); free(lin); free(m); free(y); free(ref); free(got);
    free(hacc); free(hacc2); free(xf); free(Wo); free(yin);
}
#endif

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_mlp");
#ifndef FRIGG_CUDA
    SKIP("built without CUDA (FRIGG_CUDA=0)");
#else
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device present");
    } else {
        CHECK(fk_init() == 0, "fk_init: %s", frigg_error());
        frigg_pool *pool = frigg_pool_create(0);
        /* DFM-Mimir's (128 blocks); 16 blocks of 1 chunk per lane; 3 blocks of 3 */
        static const int shapes[][2] = {{1536, 4096}, {256, 512}, {768, 96}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) test_shape(pool, shapes[s][0], shapes[s][1]);
        /* refused: hidden not a multiple of 256 or past 1536, intermediate not a multiple of 32 or past 8192, B > 1 */
        static const int bad[][3] = {{1, 200, 512}, {1, 1792, 512}, {1, 256, 48}, {1, 256, 8224}, {2, 256, 512}};
        for (size_t s = 0; s < sizeof bad / sizeof bad[0]; s++)
            CHECK(!fk_mlp_supported(bad[s][0], bad[s][1], bad[s][2]), "mlp B=%d %dx%d: supported", bad[s][0], bad[s][1],
                  bad[s][2]);
        CHECK(fk_mlp_decode(NULL, NULL, 200, 512, NULL, EPS, NULL, NULL, 0) != 0, "mlp 200x512: launched");
        frigg_pool_destroy(pool);
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "device error: %s", cudaGetErrorString(e));
    }
#endif
    TEST_MAIN_END();
}
