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

#include "model/model.h"
#include "../../kernels/kernels.h" /* fk_ctx, fk_dequant_bf16 */

/* A cuBLAS handle on stream s with the engine's math mode (no reduced-precision reductions: every sum is
 * fp32 until the one bf16 rounding). 0, or -1 with frigg_error() set. */
int frigg_cuda_gemm_handle(cublasHandle_t *h, cudaStream_t s);
/* C[T][O] = A[T][K] · W[O][K]^T, bf16 in and out, fp32 accumulation, one rounding (as HF's cuBLAS call).
 * W: an [O][K] descriptor in device memory; a dtype without a GEMM is an error that names it. */
int frigg_cuda_gemm(cublasHandle_t h, const frigg_mat *W, const uint16_t *A, int T, uint16_t *C);

/* The prefill GEMM for any weight dtype: BF16 W is frigg_cuda_gemm itself (scratch unused, may be NULL);
 * an INT8/INT4 W is dequantized into `scratch` (device memory the caller owns, 16-byte aligned) by
 * fk_dequant_bf16 — w = bf16(q * scale), frigg_mat_row's values bit for bit — and multiplied by the same
 * cuBLAS call as frigg_cuda_gemm, in tiles of rows: floor(scratch_bytes / (2 * cols)) rows of W at a time,
 * rounded down to a multiple of 8 where that leaves at least 8 (so each tile's part of C starts 16-byte
 * aligned); all of them when the scratch holds frigg_cuda_gemm_scratch_bytes(W). Each tile's GEMM writes
 * its columns of C (ldc = rows). With the whole matrix in one tile the result is bit for bit frigg_cuda_gemm on the
 * dequantized bf16 matrix; with smaller tiles cuBLAS may pick another kernel per tile shape, so a column can
 * differ from that within fp32 summation rounding. Less scratch than one row (2 * cols bytes) is an error.
 * Both kernels go on the handle's stream (cublasGetStream) with kc's launch settings: the dequantization
 * waits for the work in front of it before writing the scratch, and the stream orders the next tile's
 * dequantization after this tile's GEMM. 0, or -1 with frigg_error() set. */
int frigg_cuda_gemm_dq(const fk_ctx *kc, cublasHandle_t h, const frigg_mat *W, const uint16_t *A, int T, uint16_t *C,
                       uint16_t *scratch, size_t scratch_bytes);
/* Scratch bytes for frigg_cuda_gemm_dq to take W in one tile: 2 * rows * cols for INT8/INT4, 0 for BF16. */
size_t frigg_cuda_gemm_scratch_bytes(const frigg_mat *W);

#ifdef __cplusplus
}
#endif

#endif
