/* common.cuh — helpers shared by the .cu files: bf16 conversions with the CPU engine's rounding (RNE),
 * warp/block reductions, and error reporting into frigg's per-thread error slot. */
#ifndef FRIGG_KERNELS_COMMON_CUH
#define FRIGG_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "ctx.cuh"

extern "C" void frigg_set_error(const char *fmt, ...);

/* After a launch: turn a launch error into frigg's error and -1. */
static inline int fk_check_launch(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        frigg_set_error("CUDA kernel %s failed to launch: %s", what, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* Programmatic dependent launch (Hopper+): a kernel launched with fk_launch may start while its predecessor
 * in the stream is finishing. It must call pdl_wait() before touching anything an earlier kernel writes (or
 * reads: writes come after the wait too); work before the wait is limited to reading constant data such as
 * weights, which is how a GEMV overlaps its weight stream with the previous kernel's tail. On older GPUs
 * both are no-ops and fk_launch launches normally. */
/* Every kernel lets its successor launch *before* its own wait (pdl_wait triggers, then waits), so two
 * kernels ahead can be resident and streaming their weights while one waits. Safe under the rule above: what
 * a kernel reads before its wait is never written by the kernels in flight in front of it, and its wait
 * still returns only once its predecessor (and so, transitively, every earlier kernel) has completed.
 * Measured on the H200 with the two alternated in one call (benchmarks/h200-2026-11-30/, the PDL A/B): batch-1 decode
 * 243.8 against 224.7 tok/s with the trigger after the wait, batch 8 1094 against 1109, prefill 4096 equal.
 * Where the trigger sits also decides whose loads reach memory first: kernels issue their early loads
 * (weights, cached keys) and then trigger, so the successor's early loads queue behind them. A trigger as the
 * kernel's first instruction measured 3% slower at batch 1; loads before the trigger that depend on other
 * loads (an index, then what it points at) hold the successor back instead (4%). Asking the L2 before the
 * trigger for the next GEMV's whole matrix (one bulk prefetch per 64 KB from each block's thread 0, f88caec)
 * made every decode cell slower, batch-1 bf16 0.888x and int8 / int4 0.94-0.95x
 * (benchmarks/h200-2026-12-04/l2ahead/); the same request after the wait was not measured. */
__device__ __forceinline__ void pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Reading what another kernel of the step wrote (activations, logits, the previous kernel's output): ld_act,
 * a coherent load (ld.global, L1-cached), never the non-coherent path. Under PDL a kernel starts while the
 * kernel in front of it is still writing; griddepcontrol.wait makes those writes visible to coherent loads, but
 * a load through a const __restrict__ pointer may compile to ld.global.nc, which PTX allows only for data that
 * no one writes while the kernel runs. The tensor-core GEMV at depth 3 (an A/B variant) read stale x through .nc
 * inside the pipeline (wrong, and different run to run; right in isolation), and the same load through .cg or
 * .ca was right; .cg (L2 only) cost 7 % at batch 1: every GEMV block then fetches x from L2 (the test_cuda_engine
 * logs and variant rows 33f1e67 added to benchmarks/h200-2026-11-30/).
 * How: act_launder hides where the pointer came from (an empty asm the compiler cannot see through), so the
 * compiler cannot prove the data read-only and emits a plain ld.global; __isGlobal keeps it a global load, not
 * a generic one. A plain load, unlike __ldca's asm volatile (a strong load in the SASS), may be scheduled
 * among the weight loads (ad4e8ee: the same speed as __ldca), and it stays below pdl_wait, whose asm clobbers
 * memory. tests/nc-loads.sh checks the PTX. Weights and the RoPE
 * tables, written once at load, keep their streaming loads. */
__device__ __forceinline__ const void *act_launder(const void *p) {
    asm("" : "+l"(p));
    __builtin_assume(__isGlobal(p));
    return p;
}
__device__ __forceinline__ uint4 ld_act(const void *p) { return *(const uint4 *)act_launder(p); }
__device__ __forceinline__ uint32_t ld_act32(const void *p) { return *(const uint32_t *)act_launder(p); }
__device__ __forceinline__ uint16_t ld_act16(const void *p) { return *(const uint16_t *)act_launder(p); }

/* Data written once at load (weights, the RoPE tables), read through the non-coherent path and kept out of L1:
 * a weight is read once per pass. The only ld.global.nc that tests/nc-loads.sh lets through. */
__device__ __forceinline__ uint4 ld_stream(const uint4 *p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

/* The bf16 values of a weight matrix for a kernel that reads bf16, or NULL with frigg_error() naming the
 * dtype (`what`: the launcher) when this build has no kernel for it. */
static inline const uint16_t *fk_mat_bf16(const frigg_mat *W, const char *what) {
    if (W->dtype != FRIGG_DT_BF16) {
        frigg_set_error("%s: no CUDA kernel for %s weights", what, frigg_dtype_name(W->dtype));
        return NULL;
    }
    return (const uint16_t *)W->w;
}

/* A launch with PDL where the context's device has it. */
template <typename... KArgs, typename... Args>
static inline cudaError_t fk_launch(const fk_ctx *kc, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                    cudaStream_t s, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = kc->pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, ((KArgs)args)...);
}

__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
/* Round to nearest even, as frigg_f32_to_bf16 and torch do. */
__device__ __forceinline__ uint16_t f2bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
__device__ __forceinline__ float rbf(float f) { return bf2f(f2bf(f)); }
/* The two bf16 halves of a 32-bit word, low element first (memory order). */
__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

/* Eight bf16 values in one 16-byte chunk (memory order) to floats and back (round to nearest even). */
__device__ __forceinline__ void bf16x8_unpack(uint4 w, float f[8]) {
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        f[2 * k] = bf_lo(u[k]);
        f[2 * k + 1] = bf_hi(u[k]);
    }
}
__device__ __forceinline__ uint4 bf16x8_pack(const float f[8]) {
    uint32_t u[4];
#pragma unroll
    for (int k = 0; k < 4; k++) u[k] = (uint32_t)f2bf(f[2 * k]) | ((uint32_t)f2bf(f[2 * k + 1]) << 16);
    return make_uint4(u[0], u[1], u[2], u[3]);
}
/* 16-byte accesses need 16-byte aligned bases (cudaMalloc gives 256). Host launchers and kernels alike. */
__host__ __device__ static inline int fk_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result. */
__device__ __forceinline__ float block_sum(float v, float *scratch32) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch32[warp] = v;
    __syncthreads();
    float t = lane < nw ? scratch32[lane] : 0.0f;
    return warp_sum(t);
}

#endif
