/* gemv_tc.cu — the decode GEMV on tensor cores: out[b] = W·x[b] for B <= 8 rows, one mma.sync m16n8k16 per
 * 8 weight rows x 16 K-elements with the WEIGHTS as the mma's B operand (the n = 8 columns) and the batch
 * rows as A (rows 0..7 of the 16; rows 8..15 are zero). Tensor-core work is not the limit (at batch 8 this
 * is 16 FLOP per weight byte, far below the ridge); what the layout buys is 8-row tiles: twice as many
 * tiles as the older 16-row design (weights as A), so the 1536-row outputs have 192 tiles for 132 SMs.
 *
 * Work split. A tile is 8 weight rows: rows 8t..8t+7 for the plain epilogues, or 4 output units for the
 * paired ones (unit 4t + j has its two rows — gate/up, or the RoPE pair — in tile columns 2j and 2j + 1, so
 * the thread holding C[b][2j], C[b][2j+1] has both values its epilogue needs). The block's warps split K
 * (slices fixed by K alone); each thread (group g = lane/4, t = lane%4) streams 16 bytes (8 K-elements) of
 * tile row g per step, chunk 4s + t of its warp's slice, all steps of the slice in registers at once. A dot
 * product does not care in which order its K terms come, so those 8 elements feed k-slots {2t, 2t+1, 2t+8,
 * 2t+9} of two mma's as they sit, and the x fragment (batch row g, the same chunk) is read with the same
 * permutation: no shuffles.
 *
 * Blocks are persistent: the grid is at most what fits on the GPU at once, and each block walks tiles
 * blockIdx.x, + gridDim.x, ... . So x (B x K, normalised when the RMSNorm is fused) is staged into shared
 * memory once per block, not once per tile: at batch 8 and 1024 tiles, per-tile staging would read as many
 * bytes from L2 as the weights themselves. The next tile's weights are requested right after the current
 * tile's mma's, so they are in flight during the cross-warp reduction and the epilogue. Before
 * griddepcontrol.wait (PDL) each block already streams its first tile: for o_proj and down_proj that is the
 * whole matrix.
 *
 * Determinism: a tile's sum is fixed by K alone (the warp count and slices depend on K; partials are added
 * in warp order), never by B, the grid size or which block takes the tile; the RMSNorm's sum of squares is
 * fixed by K too. An mma output row depends only on its own A row, so batch row b's result does not depend
 * on the other rows: batched decode is bit-identical to single-row decode. */
#include "gemv_common.cuh"

#define TC_MAX_WARPS 16 /* K split over up to 16 warps: 16 warps x 8 steps x 4 chunks = K 4096 in one round */
#define TC_STEPS 8      /* steps (4 chunks of 16 bytes per tile row) each warp holds in registers */
#define TC_XPAD 4       /* uint4 of padding per staged x row: rows g and g+1 fall in different bank halves */
#define TC_MAX_SMEM (100 * 1024)

__device__ __forceinline__ void mma_bf16_16816(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* The weight row that tile row g (0..7) of `tile` streams; false when it lies past the matrix. */
template <int EPI>
__device__ __forceinline__ bool tile_row(int tile, int g, int O, int hd, int *row) {
    if (EPI == FK_GEMV_SWIGLU || EPI == FK_GEMV_QKV) {
        int unit = tile * 4 + (g >> 1), r1, r2;
        if (unit >= O / 2) return false;
        pair_rows<EPI>(unit, O, hd, &r1, &r2);
        *row = g & 1 ? r2 : r1;
        return true;
    }
    *row = tile * 8 + g;
    return *row < O;
}

/* x [B][nch] -> shared memory rows of xstride uint4; with NORM, each row becomes bf16(x * rsqrt(mean(x^2) +
 * eps)). The sum of squares runs in a fixed order set by blockDim (a function of K) and nch, so every block,
 * and every batch size, computes the same scale for the same row. Every thread must call it. */
template <bool NORM>
__device__ __forceinline__ void stage_x(const uint4 *xv, int B, int nch, int K, float eps, uint4 *xs, int xstride,
                                        float (*red)[TC_MAX_WARPS]) {
    const int tid = threadIdx.x, bs = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = bs >> 5;
#pragma unroll 4
    for (int i = tid; i < B * nch; i += bs) {
        int b = i / nch, c = i - b * nch;
        xs[b * xstride + c] = xv[i];
    }
    __syncthreads();
    if (NORM) {
        for (int b = 0; b < B; b++) {
            float ss = 0.0f;
            for (int c = tid; c < nch; c += bs) {
                uint4 v = xs[b * xstride + c];
                float a0 = bf_lo(v.x), a1 = bf_hi(v.x), a2 = bf_lo(v.y), a3 = bf_hi(v.y);
                float a4 = bf_lo(v.z), a5 = bf_hi(v.z), a6 = bf_lo(v.w), a7 = bf_hi(v.w);
                ss += a0 * a0 + a1 * a1 + a2 * a2 + a3 * a3 + a4 * a4 + a5 * a5 + a6 * a6 + a7 * a7;
            }
            ss = warp_sum(ss);
            if (lane == 0) red[b][warp] = ss;
        }
        __syncthreads();
        for (int b = 0; b < B; b++) {
            float tot = 0.0f;
            for (int w = 0; w < nw; w++) tot += red[b][w];
            float r = 1.0f / sqrtf(tot / (float)K + eps); /* the formula of stage_norm (gemv_common.cuh) */
            for (int c = tid; c < nch; c += bs) { /* the chunks this thread read above: no sync needed before */
                uint4 v = xs[b * xstride + c];
                uint32_t *p = (uint32_t *)&v;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    uint32_t lo = f2bf(bf_lo(p[j]) * r), hi = f2bf(bf_hi(p[j]) * r);
                    p[j] = lo | (hi << 16);
                }
                xs[b * xstride + c] = v;
            }
        }
        __syncthreads();
    }
}

/* DEPTH: weight tiles each warp has in flight. 1: the next tile is requested after the current tile's mma's
 * (two register sets' worth never needed). 2 (an A/B variant, fk_gemv_tc_set_variant): tiles i+1 and i+2 stream
 * while tile i is reduced, twice the bytes in flight per warp, at up to 128 registers (one block of 16 warps
 * per SM by registers). The tile order, slices and sums are the same: the same bits. */
template <bool NORM, int EPI, int DEPTH>
__global__ void __launch_bounds__(TC_MAX_WARPS * 32, DEPTH == 1 ? 2 : 1)
    gemv_tc_kernel(const uint16_t *__restrict__ W, int O, int K, const uint16_t *__restrict__ x, int B, float eps,
                   uint16_t *__restrict__ out, fk_qkv_epi qa, int rotate) {
    constexpr bool PAIRED = EPI == FK_GEMV_SWIGLU || EPI == FK_GEMV_QKV;
    extern __shared__ uint4 smem[];
    __shared__ float red[8][TC_MAX_WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5, nch = K / 8;
    const int g = lane >> 2, t = lane & 3;
    const int xstride = nch + TC_XPAD;
    uint4 *xs = smem;
    float2 *part = (float2 *)(smem + (size_t)B * xstride); /* [2][nw][32]: double-buffered by tile parity */
    const int tiles = PAIRED ? (O / 2 + 3) / 4 : (O + 7) / 8;
    /* this warp's slice of K, in chunks of 8 elements */
    const int c_lo = (int)((long long)nch * warp / nw), n = (int)((long long)nch * (warp + 1) / nw) - c_lo;
    const uint4 zero = make_uint4(0, 0, 0, 0);

    /* register sets of weights (DEPTH of them), each with its row pointer and in-matrix flag */
    uint4 wa[TC_STEPS], wb[TC_STEPS];
    const uint4 *pa = NULL, *pb = NULL;
    bool oka = false, okb = false;
    /* Point set (w, wp, wok) at tile row g of `tile` and request the slice's first round. */
    auto fetch = [&](uint4(&w)[TC_STEPS], const uint4 *&wp, bool &wok, int tile) {
        int row = 0;
        wok = tile_row<EPI>(tile, g, O, qa.hd, &row);
        wp = (const uint4 *)(W + (size_t)row * K) + c_lo;
#pragma unroll
        for (int s = 0; s < TC_STEPS; s++) {
            int c = 4 * s + t;
            w[s] = wok && c < n ? ld_stream(wp + c) : zero;
        }
    };
    int tile = blockIdx.x;
    /* weights do not depend on earlier kernels: stream them before the wait */
    fetch(wa, pa, oka, tile);
    if (DEPTH == 2 && tile + (int)gridDim.x < tiles) fetch(wb, pb, okb, tile + gridDim.x);
    pdl_wait();
    pdl_launch();
    stage_x<NORM>((const uint4 *)x, B, nch, K, eps, xs, xstride, red);
    const bool xok = g < B; /* mma row g is batch row g; rows >= B (and 8..15) stay zero */
    const uint4 *xr = xs + (xok ? g : 0) * xstride + c_lo;

    /* One tile from register set (w, wp, wok): its mma's, the set's next request, the reduction, the epilogue. */
    auto run_tile = [&](uint4(&w)[TC_STEPS], const uint4 *&wp, bool &wok, int cur, int it) {
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int c0 = 0; c0 < n; c0 += 4 * TC_STEPS) {
            if (c0) { /* K > 4 x TC_STEPS x 8 x warps: further rounds (not Mimir's shapes) */
#pragma unroll
                for (int s = 0; s < TC_STEPS; s++) {
                    int c = c0 + 4 * s + t;
                    w[s] = wok && c < n ? ld_stream(wp + c) : zero;
                }
            }
#pragma unroll
            for (int s = 0; s < TC_STEPS; s++) {
                if (c0 + 4 * s >= n) break; /* warp-uniform: the mma needs every lane */
                int c = c0 + 4 * s + t;
                uint4 xx = xok && c < n ? xr[c] : zero;
                /* k-slots 2t,2t+1 <- elements 0,1 (then 4,5); 2t+8,2t+9 <- elements 2,3 (then 6,7) */
                mma_bf16_16816(acc, xx.x, 0u, xx.y, 0u, w[s].x, w[s].y);
                mma_bf16_16816(acc, xx.z, 0u, xx.w, 0u, w[s].z, w[s].w);
            }
        }
        const int next = cur + DEPTH * (int)gridDim.x;
        if (next < tiles) fetch(w, wp, wok, next); /* in flight during the reduction below */
        /* acc[0], acc[1] = batch row g, tile columns 2t, 2t+1 (acc[2], acc[3]: the zero rows 8..15) */
        if (nw > 1) {
            float2 *pt = part + (size_t)(it & 1) * nw * 32;
            pt[warp * 32 + lane] = make_float2(acc[0], acc[1]);
            __syncthreads();
            /* The tile's reducing warp also runs its epilogue (dependent loads: row_pos, RoPE tables, the
             * residual): with `rotate` that duty passes from warp to warp, tile by tile, so no one warp is late
             * for every next tile's __syncthreads. The sum is in warp order either way: the same bits. */
            if (warp != (rotate ? it % nw : 0)) return;
            float2 s = pt[lane];
            for (int v = 1; v < nw; v++) {
                float2 p = pt[v * 32 + lane];
                s.x += p.x;
                s.y += p.y;
            }
            acc[0] = s.x;
            acc[1] = s.y;
        }
        if (!xok) return;
        if (PAIRED) {
            int unit = cur * 4 + t, r1, r2;
            if (unit < O / 2) {
                pair_rows<EPI>(unit, O, qa.hd, &r1, &r2);
                gemv_store<EPI>(unit, r1, g, acc[0], acc[1], O, out, qa);
            }
        } else {
            int row = cur * 8 + 2 * t;
            if (row < O) gemv_store<EPI>(row, row, g, acc[0], 0.0f, O, out, qa);
            if (row + 1 < O) gemv_store<EPI>(row + 1, row + 1, g, acc[1], 0.0f, O, out, qa);
        }
    };
    /* every warp of the block walks the same tiles, so the __syncthreads above match */
    for (int it = 0; tile < tiles;) {
        run_tile(wa, pa, oka, tile, it);
        tile += gridDim.x;
        it++;
        if (tile >= tiles) break;
        if (DEPTH == 2) run_tile(wb, pb, okb, tile, it);
        else run_tile(wa, pa, oka, tile, it);
        tile += gridDim.x;
        it++;
    }
}

typedef void (*gemv_tc_fn)(const uint16_t *, int, int, const uint16_t *, int, float, uint16_t *, fk_qkv_epi, int);

template <int DEPTH>
static gemv_tc_fn pick_tc_d(int norm, int epi) {
    switch (epi) {
    case FK_GEMV_STORE: return norm ? gemv_tc_kernel<true, FK_GEMV_STORE, DEPTH> : gemv_tc_kernel<false, FK_GEMV_STORE, DEPTH>;
    case FK_GEMV_RESID: return norm ? gemv_tc_kernel<true, FK_GEMV_RESID, DEPTH> : gemv_tc_kernel<false, FK_GEMV_RESID, DEPTH>;
    case FK_GEMV_SWIGLU: return norm ? gemv_tc_kernel<true, FK_GEMV_SWIGLU, DEPTH> : gemv_tc_kernel<false, FK_GEMV_SWIGLU, DEPTH>;
    }
    return norm ? gemv_tc_kernel<true, FK_GEMV_QKV, DEPTH> : gemv_tc_kernel<false, FK_GEMV_QKV, DEPTH>;
}
static gemv_tc_fn pick_tc(int norm, int epi, int depth) { return depth == 2 ? pick_tc_d<2>(norm, epi) : pick_tc_d<1>(norm, epi); }

static int tc_max_blocks; /* fk_gemv_tc_set_max_blocks: 0 = as many as fit on the GPU at once */
static int tc_rotate, tc_depth = 2; /* fk_gemv_tc_set_variant: A/B hooks. Depth 2 is the default since run 10 (dev/gemv:
 * fastest tensor-core variant at every shape and batch size, e.g. gqkv B8 14.38 against 19.62 µs at depth 1) */
extern "C" void fk_gemv_tc_set_variant(int depth, int rotate) {
    tc_depth = depth == 2 ? 2 : 1;
    tc_rotate = rotate != 0;
}
extern "C" void fk_gemv_tc_set_max_blocks(int blocks) { tc_max_blocks = blocks > 0 ? blocks : 0; }

/* Measured once in gemv_tc_init (the launcher runs inside graph capture, where device queries are best
 * avoided): SM count, shared memory per SM, and how many blocks of each kernel and warp count fit on one SM
 * by registers and threads. Shared memory, which depends on B and K, is accounted for at launch. With two
 * devices these are the last-initialised device's: the same for identical GPUs. */
static int tc_sms = 1, tc_smem_per_sm, tc_fit[2][2][4][TC_MAX_WARPS + 1]; /* [depth-1][norm][epi][warps] */

int gemv_tc_init(void) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&tc_sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&tc_smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
    for (int d = 0; d < 2 && e == cudaSuccess; d++)
        for (int norm = 0; norm <= 1 && e == cudaSuccess; norm++)
            for (int epi = 0; epi < 4 && e == cudaSuccess; epi++) {
                gemv_tc_fn fn = pick_tc(norm, epi, d + 1);
                e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, TC_MAX_SMEM);
                for (int nw = 1; nw <= TC_MAX_WARPS && e == cudaSuccess; nw++)
                    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&tc_fit[d][norm][epi][nw], fn, nw * 32, 0);
            }
    if (e != cudaSuccess) {
        frigg_set_error("gemv_tc: cannot set up the kernels: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* Shapes are validated by the caller (gemv.cu), except the shared-memory need, checked here. */
int gemv_tc_launch(const uint16_t *W, int O, int K, const uint16_t *x, int B, int norm_in, float eps, int epi,
                   uint16_t *out, const fk_qkv_epi *qa, int per_sm_cap, cudaStream_t s) {
    int paired = epi == FK_GEMV_SWIGLU || epi == FK_GEMV_QKV;
    int tiles = paired ? (O / 2 + 3) / 4 : (O + 7) / 8;
    /* one warp per 32 chunks of K (one round of loads each), 1..TC_MAX_WARPS: a function of K only, which
     * fixes the summation order (never B) */
    int nch = K / 8, nw = (nch + 4 * TC_STEPS - 1) / (4 * TC_STEPS);
    nw = nw < 1 ? 1 : nw > TC_MAX_WARPS ? TC_MAX_WARPS : nw;
    size_t smem = (size_t)B * (nch + TC_XPAD) * 16 + (size_t)2 * nw * 32 * sizeof(float2);
    if (smem > TC_MAX_SMEM) {
        frigg_set_error("gemv_tc: %d rows of K %d need %zu bytes of shared memory (limit %d)", B, K, smem, TC_MAX_SMEM);
        return -1;
    }
    if (tiles == 0) return 0;
    gemv_tc_fn fn = pick_tc(norm_in, epi, tc_depth);
    /* Persistent grid: every block resident at once (registers and threads from tc_fit; shared memory:
     * this launch's, the kernel's static 512 bytes and the 1 KiB the system reserves per block); then the
     * fewest blocks that keep the same number of rounds, so each block takes the same number of tiles. The
     * grid changes no result. */
    int per_sm = tc_fit[tc_depth - 1][norm_in != 0][epi][nw];
    int by_smem = tc_smem_per_sm ? (int)(tc_smem_per_sm / (smem + 512 + 1024)) : 1;
    if (by_smem < per_sm) per_sm = by_smem;
    if (per_sm_cap > 0 && per_sm_cap < per_sm) per_sm = per_sm_cap;
    long long cap = (long long)tc_sms * (per_sm > 0 ? per_sm : 1);
    if (tc_max_blocks && cap > tc_max_blocks) cap = tc_max_blocks;
    int rounds = (int)((tiles + cap - 1) / cap);
    int grid = (tiles + rounds - 1) / rounds;
    fk_launch(fn, grid, nw * 32, smem, s, W, O, K, x, B, eps, out, *qa, tc_rotate);
    return fk_check_launch("gemv_tc");
}
