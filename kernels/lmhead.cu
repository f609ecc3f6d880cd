/* lmhead.cu — what follows the lm_head GEMV: greedy argmax on the device (so only ids cross PCIe) and the
 * bf16 -> fp32 widening of logits that do go to the host. */
#include "common.cuh"
#include "kernels.h"

#define ARGMAX_THREADS 1024

/* One block per row. Ties go to the lowest index, like torch.argmax and frigg_argmax. */
__global__ void argmax_kernel(const uint16_t *logits, int V, int32_t *ids) {
    __shared__ float sv[32];
    __shared__ int si[32];
    pdl_wait();
    pdl_launch();
    const uint16_t *row = logits + (size_t)blockIdx.x * V;
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        float v = bf2f(ld_act16(row + i));
        if (v > best) { /* i increases per thread, so the first max stays */
            best = v;
            bi = i;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ov > best || (ov == best && oi < bi)) {
            best = ov;
            bi = oi;
        }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sv[warp] = best;
        si[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x >> 5;
        best = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, best, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > best || (ov == best && oi < bi)) {
                best = ov;
                bi = oi;
            }
        }
        /* All -inf or NaN rows: fall back to index 0 as frigg_argmax does. */
        if (lane == 0) ids[blockIdx.x] = bi == 0x7fffffff ? 0 : bi;
    }
}

__global__ void widen_kernel(const uint16_t *in, size_t n, float *out) {
    pdl_wait();
    pdl_launch();
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = bf2f(ld_act16(in + i));
}

extern "C" int fk_argmax_bf16(const uint16_t *logits, int B, int V, int32_t *ids, cudaStream_t s) {
    fk_launch(argmax_kernel, B, ARGMAX_THREADS, 0, s, logits, V, ids);
    return fk_check_launch("argmax");
}

extern "C" int fk_bf16_to_f32(const uint16_t *in, size_t n, float *out, cudaStream_t s) {
    size_t blocks = (n + 255) / 256;
    if (blocks > 65535) blocks = 65535;
    if (!blocks) return 0;
    fk_launch(widen_kernel, (unsigned)blocks, 256, 0, s, in, n, out);
    return fk_check_launch("bf16_to_f32");
}
