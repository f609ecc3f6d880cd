/* gemv_tc.cu — the decode GEMV on tensor cores: out[b] = W·x[b] for B <= 16 rows, one mma.sync m16n8k16 per
 * 8 weight rows x 16 K-elements with the WEIGHTS as the mma's B operand (the n = 8 columns) and the batch
 * rows as A (rows 0..7 of the 16; rows 8..15 are zero up to 8 batch rows and batch rows 8..15 beyond: the
 * kernel's MODE, below). Tensor-core work is not the limit (at batch 8 this
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
 * blockIdx.x, + gridDim.x, ... . K fits one round of steps (K <= 4096: the launcher sends larger K to the
 * CUDA-core kernel), so a warp's K slice, and with it the x fragment each lane feeds the mma (batch row g,
 * chunks 4s + t of the slice), is the same for every tile: the warp loads its slice of x from global memory
 * once, right after the wait, normalises it, and parks it in its own corner of shared memory, where every
 * tile reads it back conflict-free (at batch 1 lane c stages chunk c; at B > 1 each lane its own fragment: see
 * the kernel). No block-wide staging pass of x (at batch 8 the old one, with the norm's row-by-row
 * reductions, cost each block several serial µs). With the RMSNorm fused, a row's sum of squares is the warp's
 * (warp_sum's order over its chunks), then the warps' partials in warp order through shared memory: one
 * barrier. The next tile's weights are requested right after the current tile's mma's, so they are in flight during the
 * cross-warp reduction and the epilogue. Before griddepcontrol.wait (PDL) each block already streams its
 * first tile: for o_proj and down_proj that is the whole matrix.
 *
 * Determinism: a tile's sum is fixed by K alone (the warp count and slices depend on K; partials are added
 * in warp order), never by B, the grid size or which block takes the tile; the RMSNorm's sum of squares is
 * fixed by K too (slices and warp order). An mma output row depends only on its own A row, so batch row b's result does not depend
 * on the other rows: batched decode is bit-identical to single-row decode. */
#include "dequant.cuh"
#include "gemv_common.cuh"

#define TC_MAX_WARPS FK_TC_MAX_WARPS /* K split over up to 16 warps: 16 warps x 8 steps x 4 chunks = K 4096 in one round */
#define TC_STEPS 8      /* steps (4 chunks of 16 bytes per tile row) each warp holds in registers */
#define TC_MAX_K (TC_MAX_WARPS * TC_STEPS * 4 * 8) /* one round of steps per warp: GEMV_TC_MAX_K */
#define TC_XW_BYTES(nw) ((size_t)(nw) * TC_STEPS * 32 * 16) /* the x fragments of nw warps (dynamic shared memory) */
static_assert(TC_MAX_K == GEMV_TC_MAX_K, "gemv_common.cuh states the tensor-core kernel's K limit");

/* The sum of the squares of 8 bf16 values, in order. */
__device__ __forceinline__ float sq8(uint4 v) {
    float a0 = bf_lo(v.x), a1 = bf_hi(v.x), a2 = bf_lo(v.y), a3 = bf_hi(v.y);
    float a4 = bf_lo(v.z), a5 = bf_hi(v.z), a6 = bf_lo(v.w), a7 = bf_hi(v.w);
    return a0 * a0 + a1 * a1 + a2 * a2 + a3 * a3 + a4 * a4 + a5 * a5 + a6 * a6 + a7 * a7;
}
/* v -> bf16(v * r), element by element (stage_norm's rounding). */
__device__ __forceinline__ uint4 scale8(uint4 v, float r) {
    uint32_t *p = (uint32_t *)&v;
#pragma unroll
    for (int j = 0; j < 4; j++) p[j] = (uint32_t)f2bf(bf_lo(p[j]) * r) | ((uint32_t)f2bf(bf_hi(p[j]) * r) << 16);
    return v;
}

/* 16 bytes global -> shared without registers (L2, coherent: what the kernel in front wrote, after the wait). */
__device__ __forceinline__ void cp_async16_cg(void *smem, const void *gmem) {
    const uint32_t sa = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(act_launder(gmem)) : "memory");
}

__device__ __forceinline__ void mma_bf16_16816(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                               uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* A tile row's 8-element chunk as it is stored: 16 bytes of bf16, or an int8 / int4 chunk (dequant.cuh). The
 * register sets hold it as loaded; tc_dq turns it into the 8 bf16 weights the mma's take, for the quantized
 * dtypes bf16(q * scale) (dq_chunk), the same bits as the dequantized matrix would hold. */
template <int DT> struct tcw {
    typedef typename qword<DT>::T T;
    static constexpr int bytes = qword<DT>::bytes;
};
template <> struct tcw<FRIGG_DT_BF16> {
    typedef uint4 T;
    static constexpr int bytes = 16;
};
__device__ __forceinline__ uint4 tc_load(const uint4 *p) { return ld_stream(p); }
__device__ __forceinline__ uint2 tc_load(const uint2 *p) { return ld_stream_q(p); }
__device__ __forceinline__ uint32_t tc_load(const uint32_t *p) { return ld_stream_q(p); }
__device__ __forceinline__ uint4 tc_zero(uint4) { return make_uint4(0, 0, 0, 0); }
__device__ __forceinline__ uint2 tc_zero(uint2) { return make_uint2(0, 0); }
__device__ __forceinline__ uint32_t tc_zero(uint32_t) { return 0; }
__device__ __forceinline__ uint4 tc_dq(uint4 w, uint32_t) { return w; }
__device__ __forceinline__ uint4 tc_dq(uint2 w, uint32_t s2) { return dq_chunk(w, s2); }
__device__ __forceinline__ uint4 tc_dq(uint32_t w, uint32_t s2) { return dq_chunk(w, s2); }

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

/* Weight tiles in flight per warp: with DEPTH sets, tiles i+1 .. i+DEPTH stream while tile i is reduced, at up
 * to 128 registers (one block of 16 warps per SM by registers). bf16: two sets of 8 x 16 bytes per lane; one
 * tile in flight measured slower at every shape and batch size (the kernels/dev/gemv timings in
 * benchmarks/h200-2026-11-30/: gqkv B8 14.38 against 19.62 µs). A quantized chunk is 8 (int8) or 4 (int4)
 * bytes, so two sets held half or a quarter of bf16's bytes in flight, and the int8 GEMV ran no faster than
 * bf16 on half the bytes (benchmarks/h200-2026-12-03/tcq/: 213 against 296 tok/s at batch 1). So more
 * sets, their scales packed two steps to a register: int8 three (four spill past 128 registers), int4 four.
 * Staging the weights through shared memory instead (cp.async of whole 128-byte lines into per-warp stages, 4
 * int8 / 6 int4 stages deep, the same sums) was slower at every shape, bf16 too: int8 gqkv at batch 1 15.23
 * against 9.33 us, lm_head 292.6 against 238.8 (benchmarks/h200-2026-12-02/smemq/gemv_q.txt beside probe/). */
template <int DT> struct tc_depth {
    static constexpr int n = DT == FRIGG_DT_BF16 ? 2 : DT == FRIGG_DT_INT8 ? 3 : 4;
};
/* Batch rows per launch (the kernel's MODE): TC_ONE one row (its own x staging), TC_8 up to 8 (A rows 0..7 of
 * the mma; 8..15 zero), TC_16 up to 16: rows 8..15 of the same mma's hold batch rows 8..15, so a weight is
 * loaded and dequantized once for 16 rows at no more mma's than for 8. Each lane then stages two x fragments
 * (batch rows g and g + 8: twice the shared memory) and the thread holding C[g][.] also holds C[g + 8][.], which
 * it reduces and stores the same way. A C row depends only on its own A row, and row g + 8's x is staged,
 * normalised and summed in row g's order, so a row's bits are the same in either half: 16-row passes keep
 * batched decode bit-identical to single-row decode (tests/test_cuda_gemv.c checks every B up to 16). */
enum { TC_ONE = 0, TC_8 = 1, TC_16 = 2, TC_NMODE = 3 };
template <int MODE> struct tc_mode {
    static constexpr bool one = MODE == TC_ONE;
    static constexpr int na = MODE == TC_16 ? 2 : 1; /* 8-row groups of batch rows */
};
static int tc_mode_of(int B) { return B == 1 ? TC_ONE : B <= 8 ? TC_8 : TC_16; }

template <bool NORM, int EPI, int MODE, int DT>
__global__ void __launch_bounds__(TC_MAX_WARPS * 32, 1)
    gemv_tc_kernel(const void *__restrict__ W, const uint16_t *__restrict__ S, qgeom geo, int O, int K,
                   const uint16_t *__restrict__ x, int B, float eps, uint16_t *__restrict__ out, fk_qkv_epi qa) {
    typedef typename tcw<DT>::T word;
    constexpr bool QUANT = DT != FRIGG_DT_BF16;
    constexpr int DEPTH = tc_depth<DT>::n;
    constexpr bool PAIRED = EPI == FK_GEMV_SWIGLU || EPI == FK_GEMV_QKV;
    constexpr bool ONE = tc_mode<MODE>::one;
    constexpr int NA = tc_mode<MODE>::na;
    extern __shared__ uint4 xw[];                     /* [NA][nw][TC_STEPS][32]: each lane's x fragments, normalised */
    __shared__ float2 part[NA][2][TC_MAX_WARPS * 32]; /* per-warp tile partials, double-buffered by tile parity */
    __shared__ float red[8 * NA][TC_MAX_WARPS];       /* per-warp sums of squares of the batch rows (NORM) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5, nch = K / 8;
    const int g = lane >> 2, t = lane & 3;
    const int tiles = PAIRED ? (O / 2 + 3) / 4 : (O + 7) / 8;
    /* this warp's slice of K, in chunks of 8 elements */
    const int c_lo = (int)((long long)nch * warp / nw), n = (int)((long long)nch * (warp + 1) / nw) - c_lo;
    const uint4 zero = make_uint4(0, 0, 0, 0);

    /* the register sets of weights (quantized: with each chunk's bf16 scale, step s in half s % 2 of sc[s / 2]) */
    word wset[DEPTH][TC_STEPS];
    uint32_t sset[DEPTH][TC_STEPS / 2] = {};
    /* Request tile row g of `tile` (this warp's slice of it) into set w. A quantized chunk's scale is loaded
     * only where its group differs from the previous step's (one scale per row: once per tile). */
    auto fetch = [&](word(&w)[TC_STEPS], uint32_t(&sc)[TC_STEPS / 2], int tile) {
        int row = 0;
        const bool wok = tile_row<EPI>(tile, g, O, qa.hd, &row);
        const word *wp = (const word *)((const unsigned char *)W + (size_t)row * nch * tcw<DT>::bytes) + c_lo;
#pragma unroll
        for (int s = 0; s < TC_STEPS; s++) {
            int c = 4 * s + t;
            w[s] = wok && c < n ? tc_load(wp + c) : tc_zero(word());
        }
        if (QUANT) {
            const uint16_t *sp = S + (size_t)row * geo.ng;
            int prev = -1;
            uint32_t v = 0;
#pragma unroll
            for (int s = 0; s < TC_STEPS; s++) {
                int c = 4 * s + t, grp = q_group(c_lo + c, geo);
                v = !(wok && c < n) ? 0u : grp == prev ? v : ld_scale16(sp + grp); /* zero past the slice */
                prev = grp;
                sc[s / 2] = s % 2 ? sc[s / 2] | v << 16 : v;
            }
        }
    };
    int tile = blockIdx.x;
    /* weights do not depend on earlier kernels: stream them before the wait */
    fetch(wset[0], sset[0], tile);
#pragma unroll
    for (int d = 1; d < DEPTH; d++)
        if (tile + d * (int)gridDim.x < tiles) fetch(wset[d], sset[d], tile + d * (int)gridDim.x);
    pdl_wait();
    /* The block's first tile is reduced and stored by warp 0: its lanes load their epilogue
     * operands (gemv_pre) now, ahead of the x fragment and the mma's, not inside the epilogue. After the wait,
     * not before: loads that depend on loads (row_pos, then the RoPE tables) ahead of the trigger in pdl_wait
     * would hold back the next kernel's launch (7edf85e). */
    gemv_pre pre1 = {0, 0, 0, 0.0f, false, false}, pre2 = pre1;
    const bool xok = g < B, xok1 = NA > 1 && g + 8 < B; /* batch rows g and (TC_16) g + 8 */
    const bool first_ok = warp == 0 && xok && tile < tiles;
    if (EPI == FK_GEMV_QKV && first_ok) {
        int unit = tile * 4 + t, r1, r2;
        if (unit < O / 2) {
            pair_rows<EPI>(unit, O, qa.hd, &r1, &r2);
            pre1 = gemv_preload<EPI>(r1, g, O, qa);
        }
    }
    if (EPI == FK_GEMV_RESID && first_ok) {
        int row = tile * 8 + 2 * t;
        if (row < O) gemv_preload_resid<EPI>(pre1, row, g, O, out);
        if (row + 1 < O) gemv_preload_resid<EPI>(pre2, row + 1, g, O, out);
    }
    /* Stage the warp's slice of x (n <= 32 chunks per batch row) where the mma's read it: the fragment of lane
     * (g, t) at step s is chunk 4s + t of batch row g, at xl[32 s]. Rows >= B are never read (xok). A coherent
     * load (ld_act): x was written by the kernel in front of this one. Two ways, with the same bits, so batched
     * decode stays bit-identical to single-row decode:
     * - batch 1 (ONE): lane c stages chunk c of row 0, so each lane loads, squares and normalises one chunk.
     *   Before, each lane staged its own fragment at batch 1 too: 8 chunks, all zero but in lanes 0-3 (Nsight
     *   Compute: about 1.8 us of a normed launch). 51b6c97, batch 1 at ctx 512: 299.6-299.8 against
     *   291.3-291.8 tok/s (o_proj and down_proj, unnormed, run here at batch 1). Row 0's sum of squares: each
     *   chunk's (sq8), then warp_sum over the 32 chunks.
     * - B > 1: each lane stages its own fragment (batch row g, chunks 4s + t), all 8 loads in flight at once
     *   (the chunk-per-lane staging at B > 1 cost batch 8 4.5 %, 51b6c97). Its sum of squares adds the same
     *   pairs in the same order as warp_sum over the chunks: steps s and s + 4 (chunks 16 apart), s and s + 2,
     *   0 and 1 in the lane, then the lanes t ^ 2 and t ^ 1.
     * Then the warps' partials in warp order: fixed by K alone, never by B. */
    uint4 *xl = xw + (size_t)warp * TC_STEPS * 32 + lane; /* this lane's fragment, step s at xl[32 s] */
    const size_t xhi = (size_t)nw * TC_STEPS * 32;         /* TC_16: row g + 8's fragment at xl[xhi + 32 s] */
    if (ONE) {
        uint4 v = lane < n ? ld_act((const uint4 *)x + c_lo + lane) : zero; /* zero past the slice */
        if (NORM) {
            const float ss = warp_sum(sq8(v));
            if (lane == 0) red[0][warp] = ss;
            __syncthreads();
            float tot = 0.0f;
            for (int w = 0; w < nw; w++) tot += red[0][w];
            v = scale8(v, 1.0f / sqrtf(tot / (float)K + eps)); /* the formula of stage_norm (gemv_common.cuh) */
        }
        xw[(size_t)warp * TC_STEPS * 32 + (lane >> 2) * 32 + (lane & 3)] = v; /* step lane / 4, lane (0, lane % 4) */
    } else {
        /* each 8-row group j (batch row g + 8j) the same way, so row g + 8's bits are row g's would be.
         * TC_16: both rows' 16 chunks go out at once as cp.async, straight into shared memory: loaded into
         * registers (as TC_8 does), the second row's loads waited for the first's, as the weight sets leave no
         * room for both. A lane reads back only what it copied, so its own wait_group is all it needs. */
        if (NA > 1) {
#pragma unroll
            for (int j = 0; j < NA; j++) {
                const bool ok = j ? xok1 : xok;
                const uint4 *xr = (const uint4 *)x + (size_t)(ok ? g + 8 * j : 0) * nch + c_lo;
#pragma unroll
                for (int s = 0; s < TC_STEPS; s++) {
                    int c = 4 * s + t;
                    if (ok && c < n) cp_async16_cg(&xl[j * xhi + 32 * s], xr + c);
                    else xl[j * xhi + 32 * s] = zero;
                }
            }
            asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
        }
        float ss[NA];
#pragma unroll
        for (int j = 0; j < NA; j++) {
            const bool ok = j ? xok1 : xok;
            const uint4 *xr = (const uint4 *)x + (size_t)(ok ? g + 8 * j : 0) * nch + c_lo;
            uint4 xf[TC_STEPS];
#pragma unroll
            for (int s = 0; s < TC_STEPS; s++) {
                int c = 4 * s + t;
                xf[s] = NA > 1 ? xl[j * xhi + 32 * s] : ok && c < n ? ld_act(xr + c) : zero; /* zero past the slice */
            }
            /* Parked in shared memory for the tiles (lane-contiguous: conflict-free), not held in registers:
             * with two tiles of weights in flight that would pass 128 registers and spill inside the tile loop. */
            float u[TC_STEPS];
#pragma unroll
            for (int s = 0; s < TC_STEPS; s++) {
                if (NORM) u[s] = sq8(xf[s]);
                if (NA == 1) xl[32 * s] = xf[s];
            }
            if (NORM) {
                static_assert(TC_STEPS == 8, "the in-lane levels below are warp_sum's distances 16, 8, 4 in chunks");
#pragma unroll
                for (int s = 0; s < 4; s++) u[s] = u[s] + u[s + 4];
#pragma unroll
                for (int s = 0; s < 2; s++) u[s] = u[s] + u[s + 2];
                ss[j] = u[0] + u[1];
                ss[j] += __shfl_xor_sync(0xffffffffu, ss[j], 2);
                ss[j] += __shfl_xor_sync(0xffffffffu, ss[j], 1);
                if (t == 0) red[g + 8 * j][warp] = ss[j];
            }
        }
        if (NORM) { /* x -> bf16(x * rsqrt(mean(x^2) + eps)), rows g (and g + 8), in place */
            __syncthreads();
#pragma unroll
            for (int j = 0; j < NA; j++) {
                float tot = 0.0f;
                for (int w = 0; w < nw; w++) tot += red[g + 8 * j][w];
                const float r = 1.0f / sqrtf(tot / (float)K + eps);
#pragma unroll
                for (int s = 0; s < TC_STEPS; s++) xl[j * xhi + 32 * s] = scale8(xl[j * xhi + 32 * s], r);
            }
        }
    }
    __syncwarp();

    /* One tile from register set w: its mma's, the set's next request, the reduction, the epilogue. */
    auto run_tile = [&](word(&w)[TC_STEPS], uint32_t(&sc)[TC_STEPS / 2], int cur, int it) {
        /* step s's scale as a bf16 pair (s, s) */
        auto scale2 = [&](int s) { return __byte_perm(sc[s / 2], 0, s % 2 ? 0x3232 : 0x1010); };
        /* A tile is a chain of dependent mma's, and at batch 8 the tile loop's latency, not only the weight
         * stream, sets the kernel's time (Nsight Compute, the stall report 3abdbd0 added to benchmarks/h200-2026-11-30/: after waits on global
         * loads, fixed-latency dependencies such as the mma chain, and shared-memory loads such as x and the
         * partials, were the most sampled stalls). So, when every step of the warp's slice is full (DFM-Mimir's
         * shapes: K 1536 and 4096 give each warp 8 full steps), the steps have no early exit (x can be read
         * ahead of the mma's) and the two mma's of a step go to two accumulators, summed at the end: two chains
         * of 8 instead of one of 16. aa4e062 (A/B in one call): batch 8 1,565-1,574 against 1,491-1,492 tok/s,
         * batch 1 284.4-284.7 against 280.7-280.9; four chains were no faster. The order of the sum is
         * fixed by K alone, as before. */
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (n == 4 * TC_STEPS) {
            float acc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int s = 0; s < TC_STEPS; s++) {
                const uint4 xx = xok ? xl[32 * s] : zero, ws = tc_dq(w[s], scale2(s));
                const uint4 xh = xok1 ? xl[xhi + 32 * s] : zero; /* A rows 8..15: zero below TC_16 */
                /* k-slots 2t,2t+1 <- elements 0,1 (then 4,5); 2t+8,2t+9 <- elements 2,3 (then 6,7) */
                mma_bf16_16816(acc, xx.x, xh.x, xx.y, xh.y, ws.x, ws.y);
                mma_bf16_16816(acc2, xx.z, xh.z, xx.w, xh.w, ws.z, ws.w);
            }
            acc[0] += acc2[0];
            acc[1] += acc2[1];
            if (NA > 1) {
                acc[2] += acc2[2];
                acc[3] += acc2[3];
            }
        } else {
#pragma unroll
            for (int s = 0; s < TC_STEPS; s++) {
                if (4 * s >= n) break; /* warp-uniform: the mma needs every lane */
                const uint4 xx = xok ? xl[32 * s] : zero, ws = tc_dq(w[s], scale2(s));
                const uint4 xh = xok1 ? xl[xhi + 32 * s] : zero;
                mma_bf16_16816(acc, xx.x, xh.x, xx.y, xh.y, ws.x, ws.y);
                mma_bf16_16816(acc, xx.z, xh.z, xx.w, xh.w, ws.z, ws.w);
            }
        }
        const int next = cur + DEPTH * (int)gridDim.x;
        if (next < tiles) fetch(w, sc, next); /* in flight during the reduction below */
        /* acc[0], acc[1] = batch row g, tile columns 2t, 2t+1 (acc[2], acc[3]: row g + 8, zero below TC_16) */
        bool lo = true, up = NA > 1; /* this thread stores rows g / rows g + 8 (one warp: both) */
        if (nw > 1) {
            float2 *pt = part[0][it & 1], *ph = part[NA - 1][it & 1];
            pt[warp * 32 + lane] = make_float2(acc[0], acc[1]);
            if (NA > 1) ph[warp * 32 + lane] = make_float2(acc[2], acc[3]);
            __syncthreads();
            /* Warp 0 reduces the tile, in warp order, and runs its epilogue (dependent loads: row_pos, RoPE
             * tables, the residual); under TC_16 warp 1 does the same for rows g + 8 beside it. Both read their
             * partials before they reach the next tile's barrier, so the parity buffer they read is not
             * rewritten until the tile after next. */
            lo = warp == 0;
            up = NA > 1 && warp == 1;
            if (!lo && !up) return;
            /* one half's partials summed in warp order; unrolled, so their loads are in flight together (aa4e062:
             * batch 8 1,597-1,600 against 1,560-1,563 tok/s; the same sum in the same order) */
            auto sum_parts = [&](const float2 *pp, float *a) {
                float2 s = pp[lane];
#pragma unroll 4
                for (int v = 1; v < nw; v++) {
                    float2 p = pp[v * 32 + lane];
                    s.x += p.x;
                    s.y += p.y;
                }
                a[0] = s.x;
                a[1] = s.y;
            };
            if (lo) sum_parts(pt, acc);
            if (up && xok1) sum_parts(ph, acc + 2); /* row g + 8's */
        }
        if (!(lo ? xok : xok1)) return; /* xok1 implies xok */
        /* the first tile's operands were loaded early (pre1, pre2: warp 0's, and the first tile is warp 0's).
         * Loading every later tile's at the start of its run_tile measured slower (51b6c97: batch 1 298.7 against
         * 299.6-299.8 tok/s, batch 8 1,255.6 against 1,277.7). */
        const gemv_pre none = {0, 0, 0, 0.0f, false, false}, p1 = it == 0 ? pre1 : none, p2 = it == 0 ? pre2 : none;
        if (PAIRED) {
            int unit = cur * 4 + t, r1, r2;
            if (unit < O / 2) {
                pair_rows<EPI>(unit, O, qa.hd, &r1, &r2);
                if (lo) gemv_store<EPI>(unit, r1, g, acc[0], acc[1], O, out, qa, p1);
                if (up && xok1) gemv_store<EPI>(unit, r1, g + 8, acc[2], acc[3], O, out, qa, none);
            }
        } else {
            int row = cur * 8 + 2 * t;
            if (lo && row < O) gemv_store<EPI>(row, row, g, acc[0], 0.0f, O, out, qa, p1);
            if (lo && row + 1 < O) gemv_store<EPI>(row + 1, row + 1, g, acc[1], 0.0f, O, out, qa, p2);
            if (up && xok1) {
                if (row < O) gemv_store<EPI>(row, row, g + 8, acc[2], 0.0f, O, out, qa, none);
                if (row + 1 < O) gemv_store<EPI>(row + 1, row + 1, g + 8, acc[3], 0.0f, O, out, qa, none);
            }
        }
    };
    /* every warp of the block walks the same tiles, so the __syncthreads above match */
    for (int it = 0; tile < tiles;) {
#pragma unroll
        for (int d = 0; d < DEPTH; d++) {
            if (tile >= tiles) break;
            run_tile(wset[d], sset[d], tile, it);
            tile += gridDim.x;
            it++;
        }
    }
}

typedef void (*gemv_tc_fn)(const void *, const uint16_t *, qgeom, int, int, const uint16_t *, int, float, uint16_t *,
                           fk_qkv_epi);

template <int MODE, int DT>
static gemv_tc_fn pick_tc_mode(int norm, int epi) {
    switch (epi) {
    case FK_GEMV_STORE:
        return norm ? gemv_tc_kernel<true, FK_GEMV_STORE, MODE, DT> : gemv_tc_kernel<false, FK_GEMV_STORE, MODE, DT>;
    case FK_GEMV_RESID:
        return norm ? gemv_tc_kernel<true, FK_GEMV_RESID, MODE, DT> : gemv_tc_kernel<false, FK_GEMV_RESID, MODE, DT>;
    case FK_GEMV_SWIGLU:
        return norm ? gemv_tc_kernel<true, FK_GEMV_SWIGLU, MODE, DT> : gemv_tc_kernel<false, FK_GEMV_SWIGLU, MODE, DT>;
    }
    return norm ? gemv_tc_kernel<true, FK_GEMV_QKV, MODE, DT> : gemv_tc_kernel<false, FK_GEMV_QKV, MODE, DT>;
}
template <int DT>
static gemv_tc_fn pick_tc_dt(int norm, int epi, int mode) {
    return mode == TC_ONE ? pick_tc_mode<TC_ONE, DT>(norm, epi)
           : mode == TC_8 ? pick_tc_mode<TC_8, DT>(norm, epi)
                          : pick_tc_mode<TC_16, DT>(norm, epi);
}
/* mode: tc_mode_of(B) (batch 1 its own x staging; TC_8 keeps the code batch 8 was measured with) */
static gemv_tc_fn pick_tc(int dt, int norm, int epi, int mode) {
    return dt == FRIGG_DT_INT8   ? pick_tc_dt<FRIGG_DT_INT8>(norm, epi, mode)
           : dt == FRIGG_DT_INT4 ? pick_tc_dt<FRIGG_DT_INT4>(norm, epi, mode)
                                 : pick_tc_dt<FRIGG_DT_BF16>(norm, epi, mode);
}
/* dynamic shared memory of a launch: the x fragments of nw warps, twice for TC_16 */
static size_t tc_smem(int nw, int mode) { return TC_XW_BYTES(nw) * (mode == TC_16 ? 2 : 1); }

extern "C" void fk_ctx_set_gemv_tc_max_blocks(fk_ctx *kc, int blocks) { kc->tc_max_blocks = blocks > 0 ? blocks : 0; }

/* Measured once per context, on its device (the launcher runs inside graph capture, where device queries
 * are best avoided): how many blocks of each kernel and warp count fit on one SM (registers, threads,
 * shared memory). */
int fk_gemv_tc_ctx_init(fk_ctx *kc) {
    cudaError_t e = cudaSuccess;
    static_assert(TC_NMODE == FK_TC_NMODE, "ctx.cuh sizes tc_fit by the kernel's modes");
    for (int dt = 0; dt < 3 && e == cudaSuccess; dt++)
        for (int mode = 0; mode < TC_NMODE && e == cudaSuccess; mode++)
            for (int norm = 0; norm <= 1 && e == cudaSuccess; norm++)
                for (int epi = 0; epi < 4 && e == cudaSuccess; epi++) {
                    gemv_tc_fn fn = pick_tc(dt, norm, epi, mode);
                    e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             tc_smem(TC_MAX_WARPS, mode));
                    for (int nw = 1; nw <= TC_MAX_WARPS && e == cudaSuccess; nw++)
                        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&kc->tc_fit[dt][mode][norm][epi][nw], fn, nw * 32,
                                                                          tc_smem(nw, mode));
                }
    if (e != cudaSuccess) {
        frigg_set_error("gemv_tc: cannot set up the kernels: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* Shapes are validated by the callers (gemv.cu, gemv_q.cu), which send K > TC_MAX_K to the CUDA-core kernels.
 * dt FRIGG_DT_BF16: W is bf16 [O][K], S and geo unused; INT8 / INT4: W the packed values, S the scales. */
int gemv_tc_launch_dt(const fk_ctx *kc, int dt, const void *W, const uint16_t *S, qgeom geo, int O, int K,
                      const uint16_t *x, int B, int norm_in, float eps, int epi, uint16_t *out, const fk_qkv_epi *qa,
                      cudaStream_t s) {
    int paired = epi == FK_GEMV_SWIGLU || epi == FK_GEMV_QKV;
    int tiles = paired ? (O / 2 + 3) / 4 : (O + 7) / 8;
    /* one warp per 32 chunks of K (one round of loads each), 1..TC_MAX_WARPS: a function of K only, which
     * fixes the summation order (never B) */
    int nch = K / 8, nw = (nch + 4 * TC_STEPS - 1) / (4 * TC_STEPS);
    nw = nw < 1 ? 1 : nw > TC_MAX_WARPS ? TC_MAX_WARPS : nw;
    if (K > TC_MAX_K) {
        frigg_set_error("gemv_tc: K %d is more than one round of steps (%d)", K, TC_MAX_K);
        return -1;
    }
    if (B < 1 || B > GEMV_TC_MAX_ROWS) {
        frigg_set_error("gemv_tc: %d rows (1..%d per launch)", B, GEMV_TC_MAX_ROWS);
        return -1;
    }
    if (tiles == 0) return 0;
    if (dt != FRIGG_DT_BF16 && dt != FRIGG_DT_INT8 && dt != FRIGG_DT_INT4) {
        frigg_set_error("gemv_tc: dtype %d", dt);
        return -1;
    }
    const int mode = tc_mode_of(B);
    gemv_tc_fn fn = pick_tc(dt, norm_in, epi, mode);
    /* Persistent grid: every block resident at once (registers, threads and the kernel's static shared
     * memory, all in tc_fit); then the fewest blocks that keep the same number of rounds, so each block takes
     * the same number of tiles. The grid changes no result. */
    int per_sm = kc->tc_fit[dt][mode][norm_in != 0][epi][nw];
    long long cap = (long long)kc->sms * (per_sm > 0 ? per_sm : 1);
    if (kc->tc_max_blocks && cap > kc->tc_max_blocks) cap = kc->tc_max_blocks;
    int rounds = (int)((tiles + cap - 1) / cap);
    int grid = (tiles + rounds - 1) / rounds;
    fk_launch(kc, fn, grid, nw * 32, tc_smem(nw, mode), s, W, S, geo, O, K, x, B, eps, out, *qa);
    return fk_check_launch("gemv_tc");
}

int gemv_tc_launch(const fk_ctx *kc, const uint16_t *W, int O, int K, const uint16_t *x, int B, int norm_in, float eps,
                   int epi, uint16_t *out, const fk_qkv_epi *qa, cudaStream_t s) {
    const qgeom none = {0, 1, 0};
    return gemv_tc_launch_dt(kc, FRIGG_DT_BF16, W, (const uint16_t *)0, none, O, K, x, B, norm_in, eps, epi, out, qa, s);
}
