/* gemv_tc.cu — the decode GEMV on tensor cores: out[b] = W·x[b] for B <= 8 rows as one mma.sync m16n8k16
 * per 16 weight rows x 16 K-elements, the batch rows being the n = 8 columns. The CUDA-core kernel (gemv.cu)
 * spends, at batch 8, eight x loads and ~128 conversions + FMAs per 16 bytes of weights and is instruction
 * bound there; here 1 KiB of weights costs 3 loads and 2 mma per warp. Measured (H200, run 6, context 512):
 * batch 8 831.7 tok/s against the CUDA-core kernel's 625.8, but batch 1 180.6 against 207.0 (the 16-row
 * tiles give down_proj and o_proj only 96 blocks, fewer than the 132 SMs; not yet tuned).
 *
 * Layout: a block owns one tile: 16 weight rows for the plain epilogues (rows 16t + g and 16t + g + 8), or 8
 * output units for the paired ones (unit 8t + g: its two rows, gate/up or the RoPE pair, are mma rows g and
 * g + 8, so one thread ends up holding both values its epilogue needs). The block's warps split K; each
 * thread (group g = lane/4, t = lane%4) streams 16 bytes (8 K-elements) of row g and of row g + 8 per step,
 * chunk c + t. Because a dot product does not care in which order its K terms are summed, those 8 elements
 * are fed to the mma's k-slots {2t, 2t+1, 2t+8, 2t+9} of two mma's as they sit in the registers, and the x
 * fragment (batch row g, the same chunk) is loaded with the same permutation: no shuffles, no shared memory.
 * The warps' fp32 partials are added in warp order (deterministic; a batch row's result does not depend on
 * the other rows, so batched and single-row decode agree bit for bit). */
#include "gemv_common.cuh"

#define TC_MAX_WARPS 16 /* K split over up to 16 warps: 16 x 32 chunks = K 4096 in one round trip */
#define TC_UNROLL 8     /* steps of 4 chunks per warp in flight: 8 KiB of weights per warp */

__device__ __forceinline__ void mma_bf16_16816(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <bool NORM, int EPI>
__global__ void __launch_bounds__(TC_MAX_WARPS * 32)
    gemv_tc_kernel(const uint16_t *__restrict__ W, int O, int K, const uint16_t *__restrict__ x, int B, float eps,
                   uint16_t *__restrict__ out, fk_qkv_epi qa) {
    constexpr bool PAIRED = EPI == FK_GEMV_SWIGLU || EPI == FK_GEMV_QKV;
    extern __shared__ uint4 xs[];
    __shared__ float scratch[32];
    __shared__ float rs[8];
    __shared__ float4 part[TC_MAX_WARPS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5, nch = K / 8;
    const int g = lane >> 2, t = lane & 3;
    int unit, rowA, rowB;
    bool okA, okB;
    if (PAIRED) {
        unit = blockIdx.x * 8 + g;
        okA = okB = unit < O / 2;
        pair_rows<EPI>(okA ? unit : 0, O, qa.hd, &rowA, &rowB);
    } else {
        unit = rowA = blockIdx.x * 16 + g;
        rowB = rowA + 8;
        okA = rowA < O;
        okB = rowB < O;
    }
    /* this warp's slice of K, in chunks of 8 elements */
    const int c_lo = (int)((long long)nch * warp / nw), n = (int)((long long)nch * (warp + 1) / nw) - c_lo;
    const uint4 *wa = (const uint4 *)(W + (size_t)(okA ? rowA : 0) * K) + c_lo;
    const uint4 *wb = (const uint4 *)(W + (size_t)(okB ? rowB : 0) * K) + c_lo;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    /* The first steps' weights do not depend on earlier kernels: start streaming them before the wait. */
    uint4 A[TC_UNROLL], Bw[TC_UNROLL];
#pragma unroll
    for (int u = 0; u < TC_UNROLL; u++) {
        int c = 4 * u + t;
        A[u] = okA && c < n ? ld_stream(wa + c) : zero;
        Bw[u] = okB && c < n ? ld_stream(wb + c) : zero;
    }
    pdl_wait();
    pdl_launch();
    const uint4 *xv = (const uint4 *)x;
    if (NORM) xv = stage_norm(xv, B, nch, K, eps, xs, scratch, rs);
    const bool xok = g < B; /* mma column g is batch row g; columns >= B stay zero */
    const uint4 *xr = xv + (size_t)(xok ? g : 0) * nch + c_lo;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int c0 = 0; c0 < n; c0 += 4 * TC_UNROLL) {
        if (c0) {
#pragma unroll
            for (int u = 0; u < TC_UNROLL; u++) {
                int c = c0 + 4 * u + t;
                A[u] = okA && c < n ? ld_stream(wa + c) : zero;
                Bw[u] = okB && c < n ? ld_stream(wb + c) : zero;
            }
        }
#pragma unroll
        for (int u = 0; u < TC_UNROLL; u++) {
            if (c0 + 4 * u >= n) break; /* warp-uniform: the mma needs every lane */
            int c = c0 + 4 * u + t;
            uint4 xx = xok && c < n ? xr[c] : zero; /* shared memory (normalised) or global */
            /* k-slots 2t,2t+1 <- elements 0,1 (then 4,5); 2t+8,2t+9 <- elements 2,3 (then 6,7) */
            mma_bf16_16816(acc, A[u].x, Bw[u].x, A[u].y, Bw[u].y, xx.x, xx.y);
            mma_bf16_16816(acc, A[u].z, Bw[u].z, A[u].w, Bw[u].w, xx.z, xx.w);
        }
    }
    /* acc: [0], [1] = row A for batch rows 2t, 2t+1; [2], [3] = row B for the same batch rows */
    if (nw > 1) {
        part[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        __syncthreads();
        if (warp != 0) return;
        float4 s = part[0][lane];
        for (int w = 1; w < nw; w++) {
            float4 p = part[w][lane];
            s.x += p.x;
            s.y += p.y;
            s.z += p.z;
            s.w += p.w;
        }
        acc[0] = s.x;
        acc[1] = s.y;
        acc[2] = s.z;
        acc[3] = s.w;
    }
#pragma unroll
    for (int j = 0; j < 2; j++) {
        int b = 2 * t + j;
        if (b >= B) continue;
        if (PAIRED) {
            if (okA) gemv_store<EPI>(unit, rowA, b, acc[j], acc[2 + j], O, out, qa);
        } else {
            if (okA) gemv_store<EPI>(rowA, rowA, b, acc[j], 0.0f, O, out, qa);
            if (okB) gemv_store<EPI>(rowB, rowB, b, acc[2 + j], 0.0f, O, out, qa);
        }
    }
}

typedef void (*gemv_tc_fn)(const uint16_t *, int, int, const uint16_t *, int, float, uint16_t *, fk_qkv_epi);

static gemv_tc_fn pick_tc(int norm, int epi) {
    switch (epi) {
    case FK_GEMV_STORE: return norm ? gemv_tc_kernel<true, FK_GEMV_STORE> : gemv_tc_kernel<false, FK_GEMV_STORE>;
    case FK_GEMV_RESID: return norm ? gemv_tc_kernel<true, FK_GEMV_RESID> : gemv_tc_kernel<false, FK_GEMV_RESID>;
    case FK_GEMV_SWIGLU: return norm ? gemv_tc_kernel<true, FK_GEMV_SWIGLU> : gemv_tc_kernel<false, FK_GEMV_SWIGLU>;
    }
    return norm ? gemv_tc_kernel<true, FK_GEMV_QKV> : gemv_tc_kernel<false, FK_GEMV_QKV>;
}

int gemv_tc_init(void) {
    for (int epi = 0; epi < 4; epi++) {
        cudaError_t e = cudaFuncSetAttribute((const void *)pick_tc(1, epi), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             GEMV_MAX_SMEM);
        if (e != cudaSuccess) {
            frigg_set_error("gemv_tc: cannot raise the shared-memory limit: %s", cudaGetErrorString(e));
            return -1;
        }
    }
    return 0;
}

/* Shapes are validated by the caller (gemv.cu). */
cudaError_t gemv_tc_launch(const uint16_t *W, int O, int K, const uint16_t *x, int B, int norm_in, float eps, int epi,
                           uint16_t *out, const fk_qkv_epi *qa, cudaStream_t s) {
    int paired = epi == FK_GEMV_SWIGLU || epi == FK_GEMV_QKV;
    int tiles = paired ? (O / 2 + 7) / 8 : (O + 15) / 16;
    /* one warp per 32 chunks of K (one round of loads each), 1..TC_MAX_WARPS */
    int nw = (K / 8 + 31) / 32;
    nw = nw < 1 ? 1 : nw > TC_MAX_WARPS ? TC_MAX_WARPS : nw;
    size_t smem = norm_in ? (size_t)B * K * 2 : 0;
    return fk_launch(pick_tc(norm_in, epi), tiles, nw * 32, smem, s, W, O, K, x, B, eps, out, *qa);
}
