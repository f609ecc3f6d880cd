/* cuda_gemm.h — the prefill GEMM of the CUDA engine (cuBLAS), shared with kernels/dev/prefill.cu so that the
 * microbenchmark times exactly the engine's call. Only in CUDA builds (FRIGG_CUDA). */
#ifndef FRIGG_CUDA_GEMM_H
#define FRIGG_CUDA_GEMM_H

#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "model.h"

/* A cuBLAS handle on stream s with the engine's math mode (no reduced-precision reductions: every sum is
 * fp32 until the one bf16 rounding). 0, or -1 with frigg_error() set. */
int frigg_cuda_gemm_handle(cublasHandle_t *h, cudaStream_t s);
/* C[T][O] = A[T][K] · W[O][K]^T, bf16 in and out, fp32 accumulation, one rounding (as HF's cuBLAS call).
 * W: an [O][K] descriptor in device memory; a dtype without a GEMM is an error that names it. */
int frigg_cuda_gemm(cublasHandle_t h, const frigg_mat *W, const uint16_t *A, int T, uint16_t *C);

#ifdef __cplusplus
}
#endif

#endif
