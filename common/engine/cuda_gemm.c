/* cuda_gemm.c — the prefill GEMM (see cuda_gemm.h). */
#include "cuda_gemm.h"

#include "base/util.h"

int frigg_cuda_gemm_handle(cublasHandle_t *h, cudaStream_t s) {
    *h = NULL;
    if (cublasCreate(h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(*h, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(*h, CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) !=
            CUBLAS_STATUS_SUCCESS) {
        if (*h) cublasDestroy(*h);
        *h = NULL;
        frigg_set_error("cuBLAS initialisation failed");
        return -1;
    }
    return 0;
}

/* C[T][ldc] columns [0, n) = A[T][K] · W[n][K]^T for a bf16 W of n rows (C offset to the first column). */
static int gemm_bf16(cublasHandle_t h, const uint16_t *W, int n, int K, const uint16_t *A, int T, uint16_t *C, int ldc) {
    const float one = 1.0f, zero = 0.0f;
    /* Column-major view: C^T[O][T] = W^T' · A^T, i.e. op(W) = T on the row-major [O][K] weight. */
    cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, T, K, &one, W, CUDA_R_16BF, K, A, CUDA_R_16BF, K,
                                     &zero, C, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        frigg_set_error("cuBLAS GEMM %dx%dx%d failed (status %d)", T, n, K, (int)st);
        return -1;
    }
    return 0;
}

int frigg_cuda_gemm(cublasHandle_t h, const frigg_mat *Wm, const uint16_t *A, int T, uint16_t *C) {
    const uint16_t *W = frigg_mat_bf16(Wm);
    if (!W) {
        frigg_set_error("prefill GEMM: no CUDA GEMM for %s weights without a dequantization scratch "
                        "(frigg_cuda_gemm_dq)", frigg_dtype_name(Wm->dtype));
        return -1;
    }
    return gemm_bf16(h, W, Wm->rows, Wm->cols, A, T, C, Wm->rows);
}

size_t frigg_cuda_gemm_scratch_bytes(const frigg_mat *W) {
    return W->dtype == FRIGG_DT_BF16 ? 0 : 2 * (size_t)W->rows * (size_t)W->cols;
}

int frigg_cuda_gemm_dq(const fk_ctx *kc, cublasHandle_t h, const frigg_mat *W, const uint16_t *A, int T, uint16_t *C,
                       uint16_t *scratch, size_t scratch_bytes) {
    if (W->dtype == FRIGG_DT_BF16) return frigg_cuda_gemm(h, W, A, T, C);
    const int O = W->rows, K = W->cols;
    size_t row_bytes = 2 * (size_t)(K > 0 ? K : 1), fit = scratch ? scratch_bytes / row_bytes : 0;
    if (fit < 1) {
        frigg_set_error("prefill GEMM: %s weights [%d][%d] need a dequantization scratch of at least %zu bytes "
                        "(one row), %zu given", frigg_dtype_name(W->dtype), O, K, row_bytes, scratch ? scratch_bytes : 0);
        return -1;
    }
    int tile = fit < (size_t)O ? (int)fit : O;
    if (tile < O && tile >= 8) tile -= tile % 8; /* every tile's columns of C start 16-byte aligned */
    cudaStream_t s = NULL;
    if (cublasGetStream(h, &s) != CUBLAS_STATUS_SUCCESS) {
        frigg_set_error("prefill GEMM: cannot read the cuBLAS handle's stream");
        return -1;
    }
    for (int o0 = 0; o0 < O; o0 += tile) {
        int n = O - o0 < tile ? O - o0 : tile;
        if (fk_dequant_bf16(kc, W, o0, n, scratch, s) || gemm_bf16(h, scratch, n, K, A, T, C + o0, O)) return -1;
    }
    return 0;
}
