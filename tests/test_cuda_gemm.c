/* test_cuda_gemm.c — the few-rows GEMM (common/cuda_gemm.c: frigg_few_rows_gemm, the decode step's projections
 * from 17 to 64 rows) against the CPU op that defines it (cpu_ops.h: frigg_cpu_linear) and against
 * frigg_cuda_gemm, on DFM-Mimir's four layer shapes (gqkv 6144x1536, o 1536x1536, gate_up 8192x1536, down
 * 1536x4096) and a small one, at row counts on both sides of the table's ranges:
 *   - within the bf16 tolerance of frigg_cpu_linear and of frigg_cuda_gemm (another summation order);
 *   - which GEMM ran (frigg_few_rows_gemm_plan): a table entry for this device that cuBLASLt refuses is a
 *     failure, not a silent fallback; without an entry, the result is frigg_cuda_gemm's bit for bit;
 *   - the same bits twice, and from a CUDA graph whose capture made the plan (the decode graphs do);
 *   - a matrix without bf16 values refused by name.
 * Without a GPU (or CUDA in the build) it prints a SKIP line. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model.h"
#include "util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "backend.h"
#include "cpu_ops.h"
#include "cuda_gemm.h"
#define CUDA_TEST_SEED 0x3c6ef372fe94f82bull
#include "cuda_test_util.h"

static int lt_used, lt_fallback;

static void test_shape(frigg_pool *pool, frigg_lt_gemms *g, cublasHandle_t hb, cudaStream_t s, int O, int K, int T) {
    float *W = malloc(sizeof(float) * O * K), *A = malloc(sizeof(float) * T * K), *ref = malloc(sizeof(float) * T * O),
          *got = malloc(sizeof(float) * T * O), *base = malloc(sizeof(float) * T * O), *again = malloc(sizeof(float) * T * O);
    ct_fill(W, (size_t)O * K, 1.0f / sqrtf((float)K));
    ct_fill(A, (size_t)T * K, 2.0f);
    uint16_t *hw = malloc((size_t)O * K * 2);
    for (size_t i = 0; i < (size_t)O * K; i++) hw[i] = frigg_f32_to_bf16(W[i]);
    frigg_mat hm = {.w = hw, .rows = O, .cols = K, .dtype = FRIGG_DT_BF16, .scales = NULL, .group = 0};
    frigg_cpu_linear(FRIGG_PREC_BF16, pool, &hm, A, T, ref);
    uint16_t *dW = ct_to_dev(W, (size_t)O * K), *dA = ct_to_dev(A, (size_t)T * K), *dC;
    cudaMalloc((void **)&dC, (size_t)T * O * 2 + 16);
    frigg_mat dm = {.w = dW, .rows = O, .cols = K, .dtype = FRIGG_DT_BF16, .scales = NULL, .group = 0};
    char what[320], desc[160];

    ct_poison(dC, (size_t)T * O);
    cudaDeviceSynchronize();
    CHECK(frigg_cuda_gemm(hb, &dm, dA, T, dC) == 0, "%s", frigg_error());
    cudaStreamSynchronize(s);
    ct_from_dev(dC, (size_t)T * O, base);

    /* the first call inside a capture: the plan is made while the stream captures */
    ct_poison(dC, (size_t)T * O);
    cudaDeviceSynchronize();
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    int rc = frigg_few_rows_gemm(g, hb, &dm, dA, T, dC);
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess && rc == 0, "capture of the few-rows GEMM %dx%dx%d: %s", T, O, K,
          rc ? frigg_error() : "capture failed");
    CHECK(graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "graph instantiation");
    if (exec) CHECK(cudaGraphLaunch(exec, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess, "graph launch");
    ct_from_dev(dC, (size_t)T * O, got);
    int plan = frigg_few_rows_gemm_plan(g, O, K, T, desc, sizeof desc);
    CHECK(plan >= 0, "%dx%dx%d: %s", T, O, K, desc);
    lt_used += plan == 1;
    lt_fallback += plan == 0;
    snprintf(what, sizeof what, "few-rows GEMM %dx%dx%d (%s) vs frigg_cpu_linear", T, O, K, desc);
    ct_expect_close(what, got, ref, (size_t)T * O, 0.03);
    snprintf(what, sizeof what, "few-rows GEMM %dx%dx%d (%s) vs frigg_cuda_gemm", T, O, K, desc);
    ct_expect_close(what, got, base, (size_t)T * O, 0.03);
    if (plan == 0)
        CHECK(!memcmp(got, base, sizeof(float) * T * O), "%dx%dx%d without a table entry is not frigg_cuda_gemm bit for bit",
              T, O, K);
    /* eagerly, the same bits */
    ct_poison(dC, (size_t)T * O);
    cudaDeviceSynchronize();
    CHECK(frigg_few_rows_gemm(g, hb, &dm, dA, T, dC) == 0, "%s", frigg_error());
    cudaStreamSynchronize(s);
    ct_from_dev(dC, (size_t)T * O, again);
    CHECK(!memcmp(got, again, sizeof(float) * T * O), "%dx%dx%d (%s): eager call not bit for bit the graph's", T, O, K, desc);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    cudaFree(dW);
    cudaFree(dA);
    cudaFree(dC);
    free(hw);
    free(W);
    free(A);
    free(ref);
    free(got);
    free(base);
    free(again);
}
#endif

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_gemm");
#ifndef FRIGG_CUDA
    SKIP("built without CUDA (FRIGG_CUDA=0): the few-rows GEMM is not tested");
#else
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device present: the few-rows GEMM is not run");
    } else {
        cudaSetDevice(0);
        frigg_pool *pool = frigg_pool_create(0);
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cublasHandle_t hb;
        CHECK(frigg_cuda_gemm_handle(&hb, s) == 0, "%s", frigg_error());
        const size_t ws_bytes = 32u << 20;
        void *ws = NULL;
        cudaMalloc(&ws, ws_bytes);
        CHECK(cublasSetWorkspace(hb, ws, ws_bytes) == CUBLAS_STATUS_SUCCESS, "cublasSetWorkspace");
        frigg_lt_gemms *g = frigg_few_rows_gemm_create(0, ws, ws_bytes);
        CHECK(g != NULL, "frigg_few_rows_gemm_create: %s", frigg_error());
        static const int shapes[][2] = {{6144, 1536}, {1536, 1536}, {8192, 1536}, {1536, 4096}, {96, 256}};
        static const int Ts[] = {1, 16, 17, 24, 31, 32, 33, 48, 63, 64};
        int quick = th_quick();
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++)
                if (!quick || Ts[t] == 17 || Ts[t] == 64) test_shape(pool, g, hb, s, shapes[k][0], shapes[k][1], Ts[t]);
        /* a matrix with no bf16 values: refused by name, as frigg_cuda_gemm refuses it */
        frigg_mat q = {.w = ws, .rows = 16, .cols = 256, .dtype = FRIGG_DT_INT8, .scales = ws, .group = 0};
        CHECK(frigg_few_rows_gemm(g, hb, &q, ws, 17, ws) == -1 && strstr(frigg_error(), "int8"),
              "an int8 matrix was not refused by name (%s)", frigg_error());
        printf("test_cuda_gemm: %d shape/row counts on a cuBLASLt configuration of the table, %d on cublasGemmEx\n", lt_used,
               lt_fallback);
        frigg_few_rows_gemm_free(g);
        cublasDestroy(hb);
        cudaFree(ws);
        cudaStreamDestroy(s);
        frigg_pool_destroy(pool);
    }
#endif
    TEST_MAIN_END();
}
