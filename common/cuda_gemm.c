/* cuda_gemm.c — the prefill GEMM (see cuda_gemm.h). */
#include "cuda_gemm.h"

#include "util.h"

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

int frigg_cuda_gemm(cublasHandle_t h, const frigg_mat *Wm, const uint16_t *A, int T, uint16_t *C) {
    const uint16_t *W = frigg_mat_bf16(Wm);
    if (!W) {
        frigg_set_error("prefill GEMM: no CUDA GEMM for %s weights", frigg_dtype_name(Wm->dtype));
        return -1;
    }
    const int O = Wm->rows, K = Wm->cols;
    const float one = 1.0f, zero = 0.0f;
    /* Column-major view: C^T[O][T] = W^T' · A^T, i.e. op(W) = T on the row-major [O][K] weight. */
    cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, O, T, K, &one, W, CUDA_R_16BF, K, A, CUDA_R_16BF, K,
                                     &zero, C, CUDA_R_16BF, O, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        frigg_set_error("cuBLAS GEMM %dx%dx%d failed (status %d)", T, O, K, (int)st);
        return -1;
    }
    return 0;
}
