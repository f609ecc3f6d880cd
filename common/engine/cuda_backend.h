/* cuda_backend.h — controls of the CUDA engine beyond backend.h, for tests and frigg-bench. Only in
 * CUDA builds (FRIGG_CUDA). */
#ifndef FRIGG_CUDA_BACKEND_H
#define FRIGG_CUDA_BACKEND_H

#include "backend.h"

#ifdef FRIGG_CUDA
/* Replay each decode step from a captured CUDA graph (on, the default) or launch its kernels one by one
 * (off): the eager path the graph is checked against. */
void frigg_cuda_set_graphs(frigg_backend *b, int on);
/* Kernel nodes in the captured decode-step graph for nseq rows (captures it if needed); -1 on error. */
int frigg_cuda_kernels_per_step(frigg_backend *b, int nseq);
/* How a decode step of nseq rows runs its projections: "gemv" (fused GEMV passes of at most 16 rows) or "gemm"
 * (cuBLAS, 17 rows and more unless the engine is batch-invariant). */
const char *frigg_cuda_decode_proj(const frigg_backend *b, int nseq);
/* Whether the engine holds a bf16 copy of quantized weights (frigg_backend_opts.dequant_rows; returns 1 if so),
 * and whether a decode step of nseq rows reads it for the layer matrices (*layers) and for lm_head (*lm_head). */
int frigg_cuda_decode_copy(const frigg_backend *b, int nseq, int *layers, int *lm_head);
/* The engine's kernel context (kernels/kernels.h): its device's properties and the kernel choices of this engine
 * alone (tests and frigg-bench set and report them; no other engine is affected). Changing a choice after a
 * decode step was captured does not change that graph: set choices before the first step. */
struct fk_ctx *frigg_cuda_kernels(frigg_backend *b);
/* Free and total memory of a device (cudaMemGetInfo), for a server's budget before it creates engines. 0, or -1
 * with frigg_error(). */
int frigg_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes);
/* Start (on) or stop (off) the CUDA profiler's range (cudaProfilerStart/Stop): frigg-bench puts the timed decode
 * steps in it, so a profiler started with its range off (ncu --profile-from-start off) sees decode only, not the
 * prefills before it. Nothing happens without a profiler attached. */
void frigg_cuda_profile_range(int on);
/* Device memory the engine holds (weights, KV slabs, work buffers), in bytes. */
size_t frigg_cuda_bytes(const frigg_backend *b);
/* Device memory an engine for max_ctx tokens per sequence allocates beside its weights and KV cache (activations,
 * the grouped prefill's rows, logits, workspaces), in bytes: for a budget before the engine is created. */
size_t frigg_cuda_work_bytes(const frigg_config *c, int max_ctx, frigg_dtype kv_dtype);
#endif

#endif
