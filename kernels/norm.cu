/* norm.cu — row-wise kernels: embedding + first injection, weightless RMSNorm (alone, fused with the
 * residual add, fused with the end of a module run and the next injection), and SwiGLU for prefill.
 * The norms run one warp per row with the row in registers (16-byte accesses) where D allows, else one block
 * per row; SwiGLU runs 16-byte chunks over the flat [T][I/8] space where I allows. */
#include "common.cuh"
#include "kernels.h"

#define NORM_THREADS 256

__global__ void embed_kernel(const uint16_t *embed, const uint16_t *zli, const int32_t *ids, int D, float scale,
                             uint16_t *zH, uint16_t *zL, uint16_t *x) {
    pdl_wait();
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

/* Shared body: mode 0 = out=rmsnorm(in); 1 = h+=y then a=rmsnorm(h); 2 = state=rmsnorm(x), x=state+other.
 * The general path (any D, any alignment): one block per row, two passes over the row. */
__global__ void norm_kernel(int mode, uint16_t *h, const uint16_t *y, uint16_t *out, const uint16_t *other, int D,
                            float eps) {
    __shared__ float scratch[32];
    pdl_wait();
    size_t row = (size_t)blockIdx.x * D;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float v = bf2f(ld_act16(h + row + i));
        if (mode == 1) {
            v = rbf(v + bf2f(ld_act16(y + row + i)));
            h[row + i] = f2bf(v);
        }
        ss += v * v;
    }
    float r = 1.0f / sqrtf(block_sum(ss, scratch) / (float)D + eps);
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        float n = rbf(bf2f(ld_act16(h + row + i)) * r);
        out[row + i] = f2bf(n);
        if (mode == 2 && other) h[row + i] = f2bf(n + bf2f(ld_act16(other + row + i)));
    }
}

/* The fast path (D % 8 == 0, D <= 32 * 8 * NORM_VEC_MAX, 16-byte aligned rows): one warp per row, the row held
 * in registers as 16-byte chunks (lane l owns chunks l, l + 32, ...), so every byte is read once and written
 * once with 16-byte accesses and all of a lane's loads are in flight together; a warp shuffle replaces the
 * block reduction. The roundings are the general path's (fp32 sum of squares in another order). */
#define NORM_VEC_MAX 8 /* chunks per lane: D up to 2048 */
#define NORM_ROWS 4    /* rows (warps) per block */

template <int MODE>
__global__ void __launch_bounds__(32 * NORM_ROWS)
    norm_vec_kernel(uint16_t *h, const uint16_t *y, uint16_t *out, const uint16_t *other, int T, int D, float eps) {
    pdl_wait();
    const int lane = threadIdx.x & 31, t = blockIdx.x * NORM_ROWS + (threadIdx.x >> 5), nc = D / 8;
    if (t >= T) return;
    uint4 *hr = (uint4 *)(h + (size_t)t * D);
    float v[NORM_VEC_MAX][8];
    uint4 w[NORM_VEC_MAX], wy[NORM_VEC_MAX];
#pragma unroll
    for (int c = 0; c < NORM_VEC_MAX; c++) {
        int ci = lane + 32 * c;
        if (ci < nc) {
            w[c] = ld_act(hr + ci);
            if (MODE == 1) wy[c] = ld_act((const uint4 *)(y + (size_t)t * D) + ci);
        }
    }
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < NORM_VEC_MAX; c++) {
        int ci = lane + 32 * c;
        if (ci < nc) {
            bf16x8_unpack(w[c], v[c]);
            if (MODE == 1) {
                float fy[8];
                bf16x8_unpack(wy[c], fy);
#pragma unroll
                for (int k = 0; k < 8; k++) v[c][k] = rbf(v[c][k] + fy[k]);
                hr[ci] = bf16x8_pack(v[c]);
            }
#pragma unroll
            for (int k = 0; k < 8; k++) ss += v[c][k] * v[c][k];
        }
    }
    const float r = 1.0f / sqrtf(warp_sum(ss) / (float)D + eps);
#pragma unroll
    for (int c = 0; c < NORM_VEC_MAX; c++) {
        int ci = lane + 32 * c;
        if (ci < nc) {
            float n[8];
#pragma unroll
            for (int k = 0; k < 8; k++) n[k] = rbf(v[c][k] * r);
            ((uint4 *)(out + (size_t)t * D))[ci] = bf16x8_pack(n);
            if (MODE == 2 && other) {
                float o[8];
                bf16x8_unpack(ld_act((const uint4 *)(other + (size_t)t * D) + ci), o);
#pragma unroll
                for (int k = 0; k < 8; k++) o[k] += n[k];
                hr[ci] = bf16x8_pack(o);
            }
        }
    }
}

extern "C" void fk_ctx_set_eltwise_general(fk_ctx *kc, int on) { kc->eltwise_general = on != 0; }

static int launch_norm(const fk_ctx *kc, const char *what, int mode, uint16_t *h, const uint16_t *y, uint16_t *out, const uint16_t *other,
                       int T, int D, float eps, cudaStream_t s) {
    int vec = !kc->eltwise_general && D % 8 == 0 && D <= 32 * 8 * NORM_VEC_MAX && fk_aligned16(h) &&
              fk_aligned16(out) && (!y || fk_aligned16(y)) && (!other || fk_aligned16(other));
    if (!vec) {
        fk_launch(kc, norm_kernel, T, NORM_THREADS, 0, s, mode, h, y, out, other, D, eps);
    } else {
        int grid = (T + NORM_ROWS - 1) / NORM_ROWS;
        if (mode == 0) fk_launch(kc, norm_vec_kernel<0>, grid, 32 * NORM_ROWS, 0, s, h, y, out, other, T, D, eps);
        else if (mode == 1) fk_launch(kc, norm_vec_kernel<1>, grid, 32 * NORM_ROWS, 0, s, h, y, out, other, T, D, eps);
        else fk_launch(kc, norm_vec_kernel<2>, grid, 32 * NORM_ROWS, 0, s, h, y, out, other, T, D, eps);
    }
    return fk_check_launch(what);
}

/* SwiGLU, general path: gu rows are [gate | up] of 2I. */
__global__ void swiglu_kernel(const uint16_t *gu, int I, uint16_t *out) {
    pdl_wait();
    size_t t = blockIdx.y;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < I; i += gridDim.x * blockDim.x) {
        float g = bf2f(ld_act16(gu + t * 2 * I + i)), u = bf2f(ld_act16(gu + t * 2 * I + I + i));
        float sg = rbf(g / (1.0f + expf(-g)));
        out[t * I + i] = f2bf(sg * u);
    }
}

/* SwiGLU, fast path (I % 8 == 0, aligned): one 16-byte chunk of gate, up and out per thread over the flat
 * [T][I/8] index space, so a 4096-token prefill runs millions of independent 16-byte loads. */
__global__ void swiglu_vec_kernel(const uint16_t *gu, int T, int I, uint16_t *out) {
    pdl_wait();
    const int nc = I / 8;
    const size_t n = (size_t)T * nc;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n; idx += (size_t)gridDim.x * blockDim.x) {
        size_t t = idx / nc, c = idx % nc;
        const uint4 *row = (const uint4 *)(gu + t * 2 * I);
        float g[8], u[8], m[8];
        bf16x8_unpack(ld_act(row + c), g);
        bf16x8_unpack(ld_act(row + nc + c), u);
#pragma unroll
        for (int k = 0; k < 8; k++) m[k] = rbf(g[k] / (1.0f + expf(-g[k]))) * u[k];
        ((uint4 *)(out + t * I))[c] = bf16x8_pack(m);
    }
}

extern "C" int fk_embed(const fk_ctx *kc, const frigg_mat *embed, const uint16_t *z_L_init, const int32_t *ids, int T,
                        int D, float scale, uint16_t *zH, uint16_t *zL, uint16_t *x, cudaStream_t s) {
    const uint16_t *E = fk_mat_bf16(embed, "embed");
    if (!E) return -1;
    if (embed->cols != D) {
        frigg_set_error("embed: the table's rows have %d elements, the activations %d", embed->cols, D);
        return -1;
    }
    fk_launch(kc, embed_kernel, T, NORM_THREADS, 0, s, E, z_L_init, ids, D, scale, zH, zL, x);
    return fk_check_launch("embed");
}

extern "C" int fk_rmsnorm(const fk_ctx *kc, const uint16_t *in, uint16_t *out, int T, int D, float eps, cudaStream_t s) {
    return launch_norm(kc, "rmsnorm", 0, (uint16_t *)in, NULL, out, NULL, T, D, eps, s);
}

extern "C" int fk_add_rmsnorm(const fk_ctx *kc, uint16_t *h, const uint16_t *y, uint16_t *a, int T, int D, float eps, cudaStream_t s) {
    return launch_norm(kc, "add_rmsnorm", 1, h, y, a, NULL, T, D, eps, s);
}

extern "C" int fk_run_end(const fk_ctx *kc, uint16_t *x, uint16_t *state, const uint16_t *other, int T, int D,
                          float eps, cudaStream_t s) {
    return launch_norm(kc, "run_end", 2, x, NULL, state, other, T, D, eps, s);
}

extern "C" int fk_swiglu(const fk_ctx *kc, const uint16_t *gu, int T, int I, uint16_t *out, cudaStream_t s) {
    if (!kc->eltwise_general && I % 8 == 0 && fk_aligned16(gu) && fk_aligned16(out)) {
        /* grid-stride: at most 16 blocks of 256 threads resident per SM; more blocks only add launch tail */
        size_t n = (size_t)T * (I / 8), blocks = (n + 255) / 256;
        if (blocks > (size_t)kc->sms * 16) blocks = (size_t)kc->sms * 16;
        fk_launch(kc, swiglu_vec_kernel, (unsigned)(blocks ? blocks : 1), 256, 0, s, gu, T, I, out);
    } else {
        dim3 grid((I + 255) / 256, T);
        fk_launch(kc, swiglu_kernel, grid, 256, 0, s, gu, I, out);
    }
    return fk_check_launch("swiglu");
}
