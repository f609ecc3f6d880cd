/* mlp.cu — batch-1 decode's whole MLP in one kernel: x -> rmsnorm -> gate_up -> SwiGLU -> down_proj, with
 * down_proj split over its K (the I SwiGLU units) across the blocks and the partials summed as fixed-point
 * integers into an accumulator that the next kernel folds into x (kernels.h: fold, FK_ACC_SHIFT).
 *
 * Why. As two GEMVs (gate_up, then down) the down kernel can start its dot products only after every gate_up
 * block has finished: a grid-wide dependency in the middle of the MLP, and that dependent tail, not the weight
 * stream, is where batch-1 time goes (run 27's ablation: down 5.6 µs against the 2.8 its weights take at the
 * measured bandwidth). Split-K removes the dependency: block j owns SwiGLU units 32j..32j+31, so it needs only
 * its own 64 gate/up rows and then the 32 columns of down that multiply those units. No block waits for
 * another. Those columns are read from a transposed copy of down_proj (downT [I][D], kept beside the
 * row-major one, which prefill and batched decode use): 32 rows of it are one contiguous 32 D x 2 bytes.
 * Run 34 read them from down itself, 64-byte pieces 2 I bytes apart, and that part of the kernel took 6.8 µs
 * against the 5.6 of the whole split down_proj kernel.
 *
 * Block: 16 warps, 2 units per warp. Each lane streams NC 16-byte chunks of each of its warp's 4 rows (gate and
 * up of 2 units; D = 256 NC), MLP_ROUND_CHUNKS at a time, the first round requested before the PDL wait. The down slice is copied
 * to shared memory with cp.async, requested right after the wait (fused-early: before it, an A/B variant).
 * Sums, all in fixed orders: a gate/up row exactly as the CUDA-core GEMV sums it (gemv.cu: per lane in chunk
 * order, then warp_sum), so m has the bits of the split path's m; an element's partial over the block's 32
 * units as two halves of 16 in unit order, then their sum; the partials across blocks exactly, as integers. */
#include "gemv_common.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MLP_UNITS 32 /* SwiGLU units per block: 64-byte segments of each down_proj row */
#define MLP_WARPS 16 /* 2 units per warp */
#define MLP_MAX_NC 6 /* D <= 1536 (DFM-Mimir's) */
#define MLP_MAX_BLOCKS 256
/* |partial| < 2^23: its integer is < 2^55, and up to 256 of them sum below 2^63 */
#define MLP_BOUND 8388608.0f
static_assert(FK_ACC_SHIFT == 32, "fold1 (common.cuh) and the conversion below scale by 2^32");

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}

/* chunks of each row a lane holds in flight at once (rounds of MLP_ROUND_CHUNKS, as gemv.cu's batch-1 row pairs,
 * with the same summation order). Run 32 held all 6 of DFM-Mimir's at once: 124 registers x 512 threads, the
 * whole register file, so no block of the kernel before or after could share an SM and PDL's overlap was lost
 * (batch-1 decode 241 against 274 tok/s for the split MLP). */
#define MLP_ROUND_CHUNKS 3
#define MLP_MAX_REGS 72 /* 512 x 72 registers leave room for an o_proj block (and gqkv's) on the same SM */

template <int NC, int MODE>
__global__ void __maxnreg__(MLP_MAX_REGS) /* launched with MLP_WARPS * 32 threads */
    mlp_b1_kernel(const uint16_t *__restrict__ gu, const uint16_t *__restrict__ downT, int I,
                  const uint16_t *__restrict__ x, float eps, long long *acc, int *flag) {
    constexpr int mode = MODE;
    /* mode bit 0: fused-early. Bits 1-3 (FRIGG_MLP_DIAG, timing experiments only, results wrong): 2 no
     * accumulator adds, 4 no down_proj at all. */
    const int early = mode & 1;
    constexpr int D = 256 * NC, nch = D / 8;
    extern __shared__ uint4 sm[];
    uint4 *dsl = sm;                    /* [32][D/8]: downT rows 32j .. 32j + 31, i.e. down's columns */
    uint4 *xs = sm + MLP_UNITS * nch;   /* [D/8]: rmsnorm(x) */
    __shared__ float scratch[32], rs[1], m_s[MLP_UNITS];
    __shared__ __align__(16) float psum[2][D]; /* the two halves of each partial (units 0-15, 16-31) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int j0 = blockIdx.x * MLP_UNITS, u0 = j0 + 2 * warp;
    const uint4 *rows[4] = {(const uint4 *)(gu + (size_t)u0 * D), (const uint4 *)(gu + (size_t)(I + u0) * D),
                            (const uint4 *)(gu + (size_t)(u0 + 1) * D), (const uint4 *)(gu + (size_t)(I + u0 + 1) * D)};
    constexpr int U = MLP_ROUND_CHUNKS < NC ? MLP_ROUND_CHUNKS : NC;
    uint4 w[4][U];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
        for (int r = 0; r < 4; r++) w[r][u] = ld_stream(rows[r] + lane + 32 * u);
    auto fetch_down = [&]() { /* one contiguous 32 D x 2 bytes */
        const uint4 *src = (const uint4 *)(downT + (size_t)j0 * D);
        for (int q = threadIdx.x; q < MLP_UNITS * nch; q += MLP_WARPS * 32) cp_async16(dsl + q, src + q);
        asm volatile("cp.async.commit_group;" ::: "memory");
    };
    if (early && !(mode & 4)) fetch_down();
    pdl_wait();
    pdl_launch();
    if (!early && !(mode & 4)) fetch_down();
    stage_norm((const uint4 *)x, 1, nch, D, eps, xs, scratch, rs);
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int c0 = 0; c0 < NC; c0 += U) { /* chunks in increasing order whatever U: the same sums */
        if (c0 > 0)
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    if (c0 + u < NC) w[r][u] = ld_stream(rows[r] + lane + 32 * (c0 + u));
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (c0 + u >= NC) break;
            uint4 v = xs[lane + 32 * (c0 + u)];
            float xf[8];
            bf16x8_unpack(v, xf);
#pragma unroll
            for (int r = 0; r < 4; r++) a[r] += dot8(w[r][u], xf);
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) a[r] = warp_sum(a[r]);
    if (lane == 0)
#pragma unroll
        for (int k = 0; k < 2; k++) { /* gemv_store's SwiGLU roundings */
            float g = rbf(a[2 * k]), u = rbf(a[2 * k + 1]);
            float sg = rbf(g / (1.0f + expf(-g)));
            m_s[2 * warp + k] = rbf(sg * u);
        }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
    if constexpr ((MODE & 4) != 0) {
        if (threadIdx.x < MLP_UNITS && m_s[threadIdx.x] == 12345.0f) acc[0] = 1; /* keep gate/up live */
    } else {
    /* thread (h, c): elements 8c..8c+7 of y over units 16h..16h+15, in unit order (2 nch <= the block) */
    if (threadIdx.x < 2 * nch) {
        const int h = threadIdx.x / nch, c = threadIdx.x % nch;
        float p[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
        for (int i = 16 * h; i < 16 * h + 16; i++) {
            float wv[8];
            bf16x8_unpack(dsl[i * nch + c], wv);
            const float mi = m_s[i];
#pragma unroll
            for (int k = 0; k < 8; k++) p[k] = fmaf(wv[k], mi, p[k]);
        }
        float4 *o = (float4 *)(psum[h] + 8 * c);
        o[0] = make_float4(p[0], p[1], p[2], p[3]);
        o[1] = make_float4(p[4], p[5], p[6], p[7]);
    }
    __syncthreads();
    for (int d = threadIdx.x; d < D; d += MLP_WARPS * 32) {
        float p = psum[0][d] + psum[1][d];
        if (!(fabsf(p) < MLP_BOUND)) { /* beyond the fixed point's range, or NaN: reported, never wrapped */
            atomicOr(flag, 1);
            p = 0.0f;
        }
        if (!(mode & 2)) atomicAdd((unsigned long long *)acc + d, (unsigned long long)__float2ll_rn(p * 4294967296.0f));
        else if (p == 12345.0f) acc[d] = 1; /* keep the partial live */
    }
    }
}

typedef void (*mlp_fn)(const uint16_t *, const uint16_t *, int, const uint16_t *, float, long long *, int *);
template <int MODE>
static mlp_fn mlp_pick_m(int nc) {
    switch (nc) {
    case 1: return mlp_b1_kernel<1, MODE>;
    case 2: return mlp_b1_kernel<2, MODE>;
    case 3: return mlp_b1_kernel<3, MODE>;
    case 4: return mlp_b1_kernel<4, MODE>;
    case 5: return mlp_b1_kernel<5, MODE>;
    case 6: return mlp_b1_kernel<6, MODE>;
    }
    return NULL;
}
static mlp_fn mlp_pick(int nc, int mode) {
    switch (mode) {
    case 1: return mlp_pick_m<1>(nc);
    case 2: return nc == 6 ? mlp_b1_kernel<6, 2> : NULL;
    case 4: return nc == 6 ? mlp_b1_kernel<6, 4> : NULL;
    }
    return mlp_pick_m<0>(nc);
}
static size_t mlp_smem(int D) { return (size_t)(MLP_UNITS + 1) * (D / 8) * 16; }

static int mlp_impl = FK_MLP_FUSED, mlp_diag;
static int mlp_fits[MLP_MAX_NC + 1]; /* fk_mlp_init: the instance's shared memory fits the current device */
extern "C" void fk_set_mlp_impl(int impl) { mlp_impl = impl; }
extern "C" int fk_get_mlp_impl(void) { return mlp_impl; }

/* Called by fk_init: FRIGG_MLP, and the shared-memory limit of every instance. */
extern "C" int fk_mlp_init(void) {
    const char *env = getenv("FRIGG_MLP");
    if (env && *env) {
        if (!strcmp(env, "fused")) mlp_impl = FK_MLP_FUSED;
        else if (!strcmp(env, "fused-early")) mlp_impl = FK_MLP_FUSED_EARLY;
        else if (!strcmp(env, "split")) mlp_impl = FK_MLP_SPLIT;
        else {
            frigg_set_error("FRIGG_MLP must be fused, fused-early or split, not '%s'", env);
            return -1;
        }
    }
    const char *diag = getenv("FRIGG_MLP_DIAG");
    mlp_diag = diag && *diag ? atoi(diag) : 0;
    if (mlp_diag != 0 && mlp_diag != 2 && mlp_diag != 4) {
        frigg_set_error("FRIGG_MLP_DIAG must be 2 or 4");
        return -1;
    }
    if (mlp_diag) fprintf(stderr, "frigg: FRIGG_MLP_DIAG=%d: a timing experiment, decode results are WRONG\n", mlp_diag);
    /* The down slice needs 64 bytes of shared memory per hidden element: more than some GPUs give a block
     * (compute capability 8.6 and 8.9: 99 KB; DFM-Mimir's needs 105). There the shape is unsupported and the
     * engine runs the split MLP. */
    int dev = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    for (int nc = 1; nc <= MLP_MAX_NC && e == cudaSuccess; nc++) {
        cudaFuncAttributes fa;
        e = cudaFuncGetAttributes(&fa, (const void *)mlp_pick(nc, 0));
        mlp_fits[nc] = e == cudaSuccess && fa.sharedSizeBytes + mlp_smem(256 * nc) <= (size_t)optin;
        for (int m = 0; m < 16 && mlp_fits[nc] && e == cudaSuccess; m++)
            if (mlp_pick(nc, m))
                e = cudaFuncSetAttribute((const void *)mlp_pick(nc, m), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)mlp_smem(256 * nc));
    }
    if (e != cudaSuccess) {
        frigg_set_error("mlp: cannot set up the kernels: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

extern "C" int fk_mlp_supported(int B, int D, int I) {
    return B == 1 && D % 256 == 0 && D / 256 >= 1 && D / 256 <= MLP_MAX_NC && mlp_fits[D / 256] && I % MLP_UNITS == 0 &&
           I >= MLP_UNITS && I / MLP_UNITS <= MLP_MAX_BLOCKS;
}

extern "C" int fk_mlp_decode(const uint16_t *gu, const uint16_t *downT, int D, int I, const uint16_t *x, float eps,
                             long long *acc, int *flag, cudaStream_t s) {
    if (!fk_mlp_supported(1, D, I) || !fk_aligned16(gu) || !fk_aligned16(downT) || !fk_aligned16(x) || !fk_aligned16(acc)) {
        frigg_set_error("mlp: unsupported shape or alignment (hidden %d, intermediate %d): hidden must be a multiple "
                        "of 256 up to 1536 (and its 64 bytes of shared memory per element fit the GPU's block), "
                        "intermediate a multiple of 32 up to 8192", D, I);
        return -1;
    }
    mlp_fn fn = mlp_pick(D / 256, mlp_diag ? mlp_diag : mlp_impl == FK_MLP_FUSED_EARLY ? 1 : 0);
    if (!fn) {
        frigg_set_error("mlp: FRIGG_MLP_DIAG is for hidden 1536 only");
        return -1;
    }
    fk_launch(fn, I / MLP_UNITS, MLP_WARPS * 32, mlp_smem(D), s, gu, downT, I, x, eps, acc, flag);
    return fk_check_launch("mlp");
}
