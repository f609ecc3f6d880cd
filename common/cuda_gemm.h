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
#include "../kernels/kernels.h" /* fk_ctx, fk_dequant_bf16 */

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

/* The GEMMs of few rows (a decode step of 17..64 rows, a short prompt) through cuBLASLt with a configuration
 * measured faster than the one cublasGemmEx picks, where cuda_gemm.c's table has one for the device, the shape
 * and the row count; everything else is frigg_cuda_gemm. Same product and rounding points (fp32 sums, split-K
 * partials reduced in fp32, one bf16 rounding); another summation order than cublasGemmEx's. A configuration
 * cuBLASLt refuses for a shape (cublasLtMatmulAlgoCheck) falls back to frigg_cuda_gemm for it, and
 * frigg_few_rows_gemm_plan says which one a call takes. Plans are made on first use (host calls only, so the
 * first call may be inside a stream capture); `ws` is device memory the caller owns, shared with the handle's
 * own cuBLAS calls (one stream orders them). NULL with frigg_error() set when cuBLASLt cannot start. */
typedef struct frigg_lt_gemms frigg_lt_gemms;
frigg_lt_gemms *frigg_few_rows_gemm_create(int device, void *ws, size_t ws_bytes);
void frigg_few_rows_gemm_free(frigg_lt_gemms *g);
/* C[T][O] = A[T][K] · W[O][K]^T for a bf16 W (frigg_mat_bf16), on h's stream; a W without bf16 values is an
 * error, as for frigg_cuda_gemm. g may be NULL (then frigg_cuda_gemm). 0, or -1 with frigg_error() set. */
int frigg_few_rows_gemm(frigg_lt_gemms *g, cublasHandle_t h, const frigg_mat *W, const uint16_t *A, int T,
                        uint16_t *C);
/* Which GEMM frigg_few_rows_gemm runs for an [O][K] bf16 matrix at T rows (its description into desc, when
 * given): 1 a cuBLASLt configuration of the table; 0 cublasGemmEx, the table having none for the device, shape
 * and rows; -1 cublasGemmEx because cuBLASLt refused the table's configuration (another cuBLAS than the one
 * the table was measured with, say). */
int frigg_few_rows_gemm_plan(frigg_lt_gemms *g, int O, int K, int T, char *desc, size_t desc_len);

#ifdef __cplusplus
}
#endif

#endif
