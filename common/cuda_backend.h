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
/* Profiling only (frigg-bench --skip): leave these kernels out of every decode step captured afterwards,
 * so that the time a kind of kernel costs inside the real step is the step time's difference. The output
 * is then wrong. Bits: FRIGG_SKIP_*. */
enum { FRIGG_SKIP_QKV = 1, FRIGG_SKIP_ATTN = 2, FRIGG_SKIP_O = 4, FRIGG_SKIP_GU = 8, FRIGG_SKIP_DOWN = 16,
       FRIGG_SKIP_LMHEAD = 32 };
void frigg_cuda_set_skip(frigg_backend *b, int mask);
/* Device memory the engine holds (weights, KV slabs, work buffers), in bytes. */
size_t frigg_cuda_bytes(const frigg_backend *b);
#endif

#endif
