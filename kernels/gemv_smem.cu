/* gemv_smem.cu — the batch-1 decode GEMV with its weights in shared memory (an A/B variant: auto letter 'm').
 *
 * Why: a decode step is a chain of dependent kernels, each of which (under PDL) requests its weights before
 * its wait so that they stream while the kernel in front finishes. The register-held designs (gemv.cu,
 * gemv_tc.cu) can only do that once their blocks are resident, and a kernel that holds its weights in
 * registers fills the register file: batch-1 down_proj runs 96 blocks of 16 warps x 123 registers, so its
 * blocks start only as gate_up's leave each SM, and its 12.6 MB stream after gate_up's instead of beside it
 * (run 27's ablation: 5.6 us per layer step for 2.8 us of weights). Here a block holds its weight rows in
 * shared memory, filled by one bulk copy (cp.async.bulk, completing on an mbarrier) per row, issued by one
 * thread before the wait: a few registers per thread, so the block can sit beside the kernel in front of it
 * (where the SM's shared-memory split lets it: FRIGG_SMEM_CARVEOUT).
 *
 * Work split: block b owns rows b*rpb .. b*rpb + rpb - 1 (rpb = ceil(O / SMs): one block per SM); warp w of
 * its 4 takes rows w, w + 4, ...; lane l sums chunks l, l + 32, ... of its row in increasing order with
 * gemv.cu's dot8, then warp_sum: the CUDA-core kernel's order, so the same bits as FRIGG_GEMV_IMPL=simt at
 * batch 1. x is staged in shared memory once per block after the wait. Hopper only (bulk copies); elsewhere
 * the launcher declines and the caller runs the tensor-core kernel. */
#include "gemv_common.cuh"

#define SMEM_WARPS 4
#define SMEM_MAX_BYTES (227 * 1024) /* the largest dynamic shared memory a block may ask for on sm_90 */

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

template <int EPI>
__global__ void __launch_bounds__(SMEM_WARPS * 32)
    gemv_smem_kernel(const uint16_t *__restrict__ W, int O, int K, int rpb, const uint16_t *__restrict__ x,
                     uint16_t *__restrict__ out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) uint4 ws[]; /* [rpb][nch] weight rows, then x [nch], then the mbarrier */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nch = K / 8;
    const int row0 = blockIdx.x * rpb, rows = min(rpb, O - row0);
    uint4 *xs = ws + (size_t)rpb * nch;
    uint64_t *bar = (uint64_t *)(xs + nch);
    if (threadIdx.x == 0 && rows > 0) {
        const uint32_t b = smem_addr(bar), bytes = (uint32_t)rows * (uint32_t)K * 2u;
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); /* visible to the bulk copies */
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
        for (int r = 0; r < rows; r++)
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         ::"r"(smem_addr(ws + (size_t)r * nch)), "l"(W + (size_t)(row0 + r) * K), "r"((uint32_t)K * 2u), "r"(b)
                         : "memory");
    }
    pdl_wait();
    pdl_launch();
    if (rows <= 0) return; /* after the wait and trigger, like every block */
    /* the residual of this warp's rows: lane j holds row warp + 4j's, loaded now, not after the dot products */
    float res = 0.0f;
    if (EPI == FK_GEMV_RESID && lane * SMEM_WARPS + warp < rows) res = bf2f(out[row0 + warp + lane * SMEM_WARPS]);
    for (int c = threadIdx.x; c < nch; c += blockDim.x) xs[c] = ((const uint4 *)x)[c];
    __syncthreads(); /* x staged; the mbarrier's init is visible to every thread */
    {
        const uint32_t b = smem_addr(bar);
        uint32_t done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                         : "=r"(done)
                         : "r"(b)
                         : "memory");
    }
    for (int r = warp, j = 0; r < rows; r += SMEM_WARPS, j++) {
        const uint4 *wr = ws + (size_t)r * nch;
        float acc = 0.0f;
        for (int c = lane; c < nch; c += 32) {
            const uint4 v = xs[c];
            const float xf[8] = {bf_lo(v.x), bf_hi(v.x), bf_lo(v.y), bf_hi(v.y), bf_lo(v.z), bf_hi(v.z), bf_lo(v.w), bf_hi(v.w)};
            acc += dot8(wr[c], xf);
        }
        acc = warp_sum(acc);
        const float rj = __shfl_sync(0xffffffffu, res, j & 31);
        if (lane == 0) {
            if (EPI == FK_GEMV_RESID) out[row0 + r] = f2bf(rj + rbf(acc));
            else out[row0 + r] = f2bf(acc);
        }
    }
#else
    (void)W; (void)O; (void)K; (void)rpb; (void)x; (void)out;
#endif
}

static int smem_sms, smem_ok; /* gemv_smem_init: the SM count; whether the device runs bulk copies (sm_90+) */

int gemv_smem_init(void) {
    int dev = 0, major = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&smem_sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    smem_ok = e == cudaSuccess && major >= 9;
    if (smem_ok) e = cudaFuncSetAttribute((const void *)gemv_smem_kernel<FK_GEMV_STORE>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_MAX_BYTES);
    if (smem_ok && e == cudaSuccess)
        e = cudaFuncSetAttribute((const void *)gemv_smem_kernel<FK_GEMV_RESID>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_MAX_BYTES);
    if (e != cudaSuccess) {
        frigg_set_error("gemv_smem: cannot set up the kernels: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int gemv_smem_launch(const uint16_t *W, int O, int K, const uint16_t *x, int epi, uint16_t *out, cudaStream_t s) {
    if (!smem_ok || (epi != FK_GEMV_STORE && epi != FK_GEMV_RESID) || O < 1 || smem_sms < 1) return 1;
    const int rpb = (O + smem_sms - 1) / smem_sms, blocks = (O + rpb - 1) / rpb;
    /* rpb rows and x, 16 bytes per 8 elements, then the 8-byte mbarrier (16 with its alignment) */
    const size_t bytes = ((size_t)rpb + 1) * K * 2 + 16;
    if (bytes > SMEM_MAX_BYTES || rpb > 32 * SMEM_WARPS) return 1; /* lane j of a warp holds its row j's residual */
    if (epi == FK_GEMV_RESID) fk_launch(gemv_smem_kernel<FK_GEMV_RESID>, blocks, SMEM_WARPS * 32, bytes, s, W, O, K, rpb, x, out);
    else fk_launch(gemv_smem_kernel<FK_GEMV_STORE>, blocks, SMEM_WARPS * 32, bytes, s, W, O, K, rpb, x, out);
    return fk_check_launch("gemv_smem") ? -1 : 0;
}
