/* norm.cu — row-wise kernels: embedding + first injection, weightless RMSNorm (alone, fused with the
 * residual add, fused with the end of a module run and the next injection), and SwiGLU for prefill.
 * One block per row; the row is read once into registers/L1 and written once. */
#include "common.cuh"
#include "kernels.h"

#define NORM_THREADS 256

__global__ void embed_kernel(const uint16_t *embed, const uint16_t *zli, const int32_t *ids, int D, float scale,
                             uint16_t *zH, uint16_t *zL, uint16_t *x) {
    pdl_wait();
    pdl_launch();
    int t = blockIdx.x;
    const uint16_t *e = embed + (size_t)ids[t] * D;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float h = rbf(bf2f(e[i]) * scale); /* fp32 product with the fp32 scale, one rounding (§3.1) */
        float l = bf2f(zli[i]);
        zH[(size_t)t * D + i] = f2bf(h);
        zL[(size_t)t * D + i] = f2bf(l);
        x[(size_t)t * D + i] = f2bf(l + h);
    }
}

/* Shared body: mode 0 = out=rmsnorm(in); 1 = h+=y then a=rmsnorm(h); 2 = state=rmsnorm(x), x=state+other. */
__global__ void norm_kernel(int mode, uint16_t *h, const uint16_t *y, uint16_t *out, const uint16_t *other, int D,
                            float eps) {
    __shared__ float scratch[32];
    pdl_wait();
    pdl_launch();
    size_t row = (size_t)blockIdx.x * D;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float v = bf2f(h[row + i]);
        if (mode == 1) {
            v = rbf(v + bf2f(y[row + i]));
            h[row + i] = f2bf(v);
        }
        ss += v * v;
    }
    float r = 1.0f / sqrtf(block_sum(ss, scratch) / (float)D + eps);
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float n = rbf(bf2f(h[row + i]) * r);
        out[row + i] = f2bf(n);
        if (mode == 2 && other) h[row + i] = f2bf(n + bf2f(other[row + i]));
    }
}

__global__ void swiglu_kernel(const uint16_t *gu, int I, uint16_t *out) {
    pdl_wait();
    pdl_launch();
    size_t t = blockIdx.y;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < I; i += gridDim.x * blockDim.x) {
        float g = bf2f(gu[t * 2 * I + i]), u = bf2f(gu[t * 2 * I + I + i]);
        float sg = rbf(g / (1.0f + expf(-g)));
        out[t * I + i] = f2bf(sg * u);
    }
}

extern "C" int fk_embed(const uint16_t *embed, const uint16_t *z_L_init, const int32_t *ids, int T, int D,
                        float scale, uint16_t *zH, uint16_t *zL, uint16_t *x, cudaStream_t s) {
    fk_launch(embed_kernel, T, NORM_THREADS, 0, s, embed, z_L_init, ids, D, scale, zH, zL, x);
    return fk_check_launch("embed");
}

extern "C" int fk_rmsnorm(const uint16_t *in, uint16_t *out, int T, int D, float eps, cudaStream_t s) {
    fk_launch(norm_kernel, T, NORM_THREADS, 0, s, 0, (uint16_t *)in, (const uint16_t *)NULL, out, (const uint16_t *)NULL, D, eps);
    return fk_check_launch("rmsnorm");
}

extern "C" int fk_add_rmsnorm(uint16_t *h, const uint16_t *y, uint16_t *a, int T, int D, float eps, cudaStream_t s) {
    fk_launch(norm_kernel, T, NORM_THREADS, 0, s, 1, h, y, a, (const uint16_t *)NULL, D, eps);
    return fk_check_launch("add_rmsnorm");
}

extern "C" int fk_run_end(uint16_t *x, uint16_t *state, const uint16_t *other, int T, int D, float eps,
                          cudaStream_t s) {
    fk_launch(norm_kernel, T, NORM_THREADS, 0, s, 2, x, (const uint16_t *)NULL, state, other, D, eps);
    return fk_check_launch("run_end");
}

extern "C" int fk_swiglu(const uint16_t *gu, int T, int I, uint16_t *out, cudaStream_t s) {
    dim3 grid((I + 255) / 256, T);
    fk_launch(swiglu_kernel, grid, 256, 0, s, gu, I, out);
    return fk_check_launch("swiglu");
}
