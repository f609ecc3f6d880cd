/* attention.cu — prefill attention (tiled, flash-style, PrefixLM mask computed per element, never
 * materialised) with the output gate y = bf16(bf16(sigmoid(g)) * bf16(o)) fused into the epilogue. Scores and
 * softmax are fp32 like the CPU engine. The P·V product runs on tensor cores with P either split into bf16 hi +
 * lo parts (~16 bits of mantissa instead of bf16's 8; tracks the CPU engine's fp32 P to ~1e-5) or rounded once
 * to bf16 (the bf16p variants, mma-bf16p the default: what HF's SDPA/flash kernels and its eager path, which
 * casts the softmax to bf16, do; half the P·V tensor work). Decode attention is in attention_decode.cu. */
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "kernels.h"

/* Prefill attention with register-resident tiles (FlashAttention-2 layout): mma.sync m16n8k16 on bf16,
 * each warp owns 16 query rows; S, P and O never leave registers, because the accumulator layout of the
 * m16n8 tile (row g = lane/4, columns 2*(lane%4)+{0,1}, rows g and g+8) is known, so the per-row softmax
 * rescale and the reuse of S as the A operand of P·V need no shared memory. K and V tiles are kept [key][dim]
 * in shared memory, rows padded by 8 elements so fragment loads hit 32 distinct banks; V's B fragments come
 * from ldmatrix.trans (a transposing store into shared memory was 16-way bank-conflicted).
 * SPLIT: P·V with P as bf16 hi + lo (~16 mantissa bits, tracks the CPU engine's fp32 P) or P rounded once to
 * bf16 as SDPA/flash kernels do (half the P·V tensor-core work).
 * Per warp and key tile the mask is classified once: tiles no row of the warp can see are skipped, tiles
 * every row sees entirely (inside the prefix, or below the diagonal) skip the per-element mask. Scores stay
 * unscaled until the exponent, where scale·log2(e) and the row max fold into one FFMA. */
#define MM_BK 64

__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* 16-byte global -> shared copy that does not stall the thread; src_ok false writes zeros instead. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool src_ok) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int n = src_ok ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_commit(void) { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait(void) {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* Two floats to a bf16x2 word (low element first), one cvt instruction, round to nearest even. */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}
/* p = hi + lo with both parts bf16: ~16 significant bits of p reach the tensor cores. */
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t *hi, uint32_t *lo) {
    *hi = pack_bf16(x0, x1);
    *lo = pack_bf16(x0 - bf_lo(*hi), x1 - bf_hi(*hi));
}
/* 2^x on the SFU; -inf gives +0 (masked keys), results below 2^-126 flush to zero (they are below any
 * bf16 output's resolution next to the row maximum's weight of 1). */
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* MM_NW warps per block (16 query rows each) and MM_MINB blocks per SM: at head_dim 128 the kernel needs 174
 * registers (ptxas -v), two blocks per SM; held to 168 (12 bytes of spill) three blocks (12 warps, 3 x 69.6 KB
 * of tiles) share an SM. 8 warps per block (half the K/V traffic into shared memory per query row), the first
 * WMMA kernel with shared-memory tiles, and two blocks per SM were each timed against this one by
 * kernels/dev/prefill.cu and were slower (the kernels/dev/prefill timings in benchmarks/h200-2026-11-30/); git keeps them. */
#define MM_NW 4
#define MM_MINB 3
/* GROUP: the prompts of fk_attn_prefill_group, prompt blockIdx.z's rows and cache taken from `grp` (a kernel
 * parameter: no copy of its own to order against the kernels in front); a block past its prompt's rows exits.
 * Every other block computes what the one-prompt kernel computes for that prompt: the same bits. */
template <int HD, bool SPLIT, bool GROUP>
__global__ void __launch_bounds__(MM_NW * 32, MM_MINB)
    attn_prefill_mma(const uint16_t *__restrict__ q, const uint16_t *__restrict__ kc, const uint16_t *__restrict__ vc,
                     const uint16_t *__restrict__ gqkv, int T, int H, int max_ctx, int P, float sl2,
                     uint16_t *__restrict__ y, fk_prefill_group grp) {
    constexpr int NW = MM_NW;
    constexpr int BQ = 16 * NW, KS = HD + 8, NT = MM_BK / 8, DT = HD / 8, KK = HD / 16, TILE = MM_BK * KS;
    static_assert(DT % 2 == 0, "V fragments are loaded two 8-column tiles at a time");
    /* Two K and two V tiles: the next tile streams in (cp.async) while this one is computed. */
    extern __shared__ __align__(16) uint16_t kv_smem[];
    uint16_t *Kbuf = kv_smem, *Vbuf = kv_smem + 2 * TILE;
    /* Last query tiles first: under a causal mask they see the most keys, so the long blocks start early and
     * the short ones fill the tail of the grid. A group's grid is as wide as its longest prompt: a shorter
     * prompt's first tile is its block x = gridDim.x - 1 all the same. */
    const int h = blockIdx.y, t0 = (gridDim.x - 1 - blockIdx.x) * BQ, D = H * HD;
    if (GROUP) {
        const int z = blockIdx.z;
        T = grp.T[z];
        P = grp.P[z];
        q += (size_t)grp.row0[z] * D;
        gqkv += (size_t)grp.row0[z] * 4 * D;
        y += (size_t)grp.row0[z] * D;
        kc += grp.kv_off[z];
        vc += grp.kv_off[z];
    }
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
    const int w0 = t0 + warp * 16;               /* this warp's first query row */
    const int r0 = w0 + g, r1 = r0 + 8;          /* this thread's two query rows */
    pdl_wait();
    if (GROUP && t0 >= T) return;
    uint32_t qa[KK][4];
#pragma unroll
    for (int kk = 0; kk < KK; kk++) {
        const uint16_t *q0 = q + (size_t)r0 * D + h * HD + kk * 16 + 2 * tq, *q1 = q + (size_t)r1 * D + h * HD + kk * 16 + 2 * tq;
        qa[kk][0] = r0 < T ? ld_act32(q0) : 0u;
        qa[kk][1] = r1 < T ? ld_act32(q1) : 0u;
        qa[kk][2] = r0 < T ? ld_act32(q0 + 8) : 0u;
        qa[kk][3] = r1 < T ? ld_act32(q1 + 8) : 0u;
    }
    float o[DT][4];
#pragma unroll
    for (int i = 0; i < DT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    /* m: running row max of the unscaled scores; l: this lane's partial row sum */
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    int kend = t0 + BQ;
    if (t0 < P && P > kend) kend = P;
    if (kend > T) kend = T;
    const uint16_t *Kh = kc + (size_t)h * max_ctx * HD, *Vh = vc + (size_t)h * max_ctx * HD;
    const int ntile = (kend + MM_BK - 1) / MM_BK;
    auto load_tile = [&](int buf, int jt) {
        for (int i = tid; i < MM_BK * (HD / 8); i += NW * 32) {
            int r = i / (HD / 8), c = i % (HD / 8), j = jt + r;
            bool ok = j < T;
            cp_async16(&Kbuf[buf * TILE + r * KS + c * 8], ok ? Kh + (size_t)j * HD + c * 8 : Kh, ok);
            cp_async16(&Vbuf[buf * TILE + r * KS + c * 8], ok ? Vh + (size_t)j * HD + c * 8 : Vh, ok);
        }
        cp_commit();
    };
    if (ntile > 0) load_tile(0, 0);
    for (int it = 0; it < ntile; it++) {
        const int j0 = it * MM_BK, jl = j0 + MM_BK - 1;
        const uint16_t *Ks = Kbuf + (it & 1) * TILE, *Vs = Vbuf + (it & 1) * TILE;
        if (it + 1 < ntile) {
            load_tile((it + 1) & 1, j0 + MM_BK);
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        /* Key j is visible from row r when j <= r or (r < P and j < P). No row of the warp sees the tile when
         * its first key is past the warp's last row and outside the prefix (or the warp is past the prefix).
         * Every row sees all of it when its last key exists and is at most the warp's first row, or lies in
         * the prefix (rows >= P then have r >= P > jl). Tile 0 is never skipped (key 0 is visible to every
         * row), so each row's max is finite from the first tile on. */
        const bool skip = j0 > w0 + 15 && (w0 >= P || j0 >= P);
        const bool full = jl < T && (jl <= w0 || jl < P);
        if (!skip) {
            float sc[NT][4];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
                if (KK % 2 == 0) {
                    /* ldmatrix.x4: the B fragments of two k-steps (keys nt*8.., dims 16kk + 0/8/16/24) */
#pragma unroll
                    for (int kk = 0; kk < KK; kk += 2) {
                        uint32_t b0, b1, b2, b3;
                        unsigned addr = (unsigned)__cvta_generic_to_shared(&Ks[(nt * 8 + (lane & 7)) * KS + kk * 16 + (lane >> 3) * 8]);
                        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                                     : "r"(addr));
                        mma16816(sc[nt], qa[kk], b0, b1);
                        mma16816(sc[nt], qa[(kk + 1) % KK], b2, b3);
                    }
                } else {
#pragma unroll
                    for (int kk = 0; kk < KK; kk++) {
                        const uint16_t *kp = &Ks[(nt * 8 + g) * KS + kk * 16 + 2 * tq];
                        mma16816(sc[nt], qa[kk], *(const uint32_t *)kp, *(const uint32_t *)(kp + 8));
                    }
                }
            }
            if (!full) {
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int j = j0 + nt * 8 + 2 * tq + (e & 1), qr = e < 2 ? r0 : r1;
                        if (!(j < T && (j <= qr || (qr < P && j < P)))) sc[nt][e] = -INFINITY;
                    }
            }
            /* running max per row (unscaled: scale > 0 keeps the order) */
            float mx0 = m0, mx1 = m1;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                mx0 = fmaxf(mx0, fmaxf(sc[nt][0], sc[nt][1]));
                mx1 = fmaxf(mx1, fmaxf(sc[nt][2], sc[nt][3]));
            }
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
            /* The guard keeps -inf - -inf out for a row that has seen no key yet (cannot happen, see above). */
            const float ms0 = (mx0 == -INFINITY ? 0.0f : mx0) * sl2, ms1 = (mx1 == -INFINITY ? 0.0f : mx1) * sl2;
            /* alpha = 1 exactly when the max did not move (m = -inf: 0); when it moved for no row of the warp,
             * the rescale of O is skipped (a warp-uniform branch): with a stable max most tiles take that path. */
            const float a0 = mx0 == m0 ? 1.0f : ex2(fmaf(m0, sl2, -ms0)), a1 = mx1 == m1 ? 1.0f : ex2(fmaf(m1, sl2, -ms1));
            const bool moved = __any_sync(0xffffffffu, mx0 != m0 || mx1 != m1);
            m0 = mx0;
            m1 = mx1;
            float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                sc[nt][0] = ex2(fmaf(sc[nt][0], sl2, -ms0));
                sc[nt][1] = ex2(fmaf(sc[nt][1], sl2, -ms0));
                sc[nt][2] = ex2(fmaf(sc[nt][2], sl2, -ms1));
                sc[nt][3] = ex2(fmaf(sc[nt][3], sl2, -ms1));
                ps0 += sc[nt][0] + sc[nt][1];
                ps1 += sc[nt][2] + sc[nt][3];
            }
            l0 = l0 * a0 + ps0; /* per-lane partial row sums; the 4 lanes of a row are added at the end */
            l1 = l1 * a1 + ps1;
            if (moved) {
#pragma unroll
                for (int dt = 0; dt < DT; dt++) {
                    o[dt][0] *= a0;
                    o[dt][1] *= a0;
                    o[dt][2] *= a1;
                    o[dt][3] *= a1;
                }
            }
            /* O += P V, P as the A operand straight from the S accumulators. */
#pragma unroll
            for (int kb = 0; kb < MM_BK / 16; kb++) {
                uint32_t ah[4], al[4];
                if (SPLIT) {
                    split_pair(sc[2 * kb][0], sc[2 * kb][1], &ah[0], &al[0]);
                    split_pair(sc[2 * kb][2], sc[2 * kb][3], &ah[1], &al[1]);
                    split_pair(sc[2 * kb + 1][0], sc[2 * kb + 1][1], &ah[2], &al[2]);
                    split_pair(sc[2 * kb + 1][2], sc[2 * kb + 1][3], &ah[3], &al[3]);
                } else {
                    ah[0] = pack_bf16(sc[2 * kb][0], sc[2 * kb][1]);
                    ah[1] = pack_bf16(sc[2 * kb][2], sc[2 * kb][3]);
                    ah[2] = pack_bf16(sc[2 * kb + 1][0], sc[2 * kb + 1][1]);
                    ah[3] = pack_bf16(sc[2 * kb + 1][2], sc[2 * kb + 1][3]);
                }
#pragma unroll
                for (int dt = 0; dt < DT; dt += 2) {
                    /* ldmatrix.x4.trans: lanes 0-15 address keys kb*16+0..15 at dims dt*8 (b0, b1), lanes 16-31 the
                     * same keys at dims (dt+1)*8 (b2, b3). */
                    uint32_t b0, b1, b2, b3;
                    unsigned addr = (unsigned)__cvta_generic_to_shared(&Vs[(kb * 16 + (lane & 15)) * KS + (dt + (lane >> 4)) * 8]);
                    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                                 : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                                 : "r"(addr));
                    mma16816(o[dt], ah, b0, b1);
                    mma16816(o[dt + 1], ah, b2, b3);
                    if (SPLIT) {
                        mma16816(o[dt], al, b0, b1);
                        mma16816(o[dt + 1], al, b2, b3);
                    }
                }
            }
        }
        __syncthreads(); /* every warp is done with this buffer before the next iteration refills it */
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    /* The gate's pairs (dims d, d + 1 of rows r0 and r1) loaded GC column tiles at a time before their stores:
     * ld_act's laundered pointer may alias y for all the compiler knows, so a load after a store to y waits for
     * it, and loading each gate value beside its store made DT * 4 L2 round trips one after another per thread
     * (the PTX had them interleaved). GC = DT / 2 holds two round trips; all DT at once spilled 48 bytes in the
     * group kernel at head_dim 128 (ptxas -v). */
    constexpr int GC = DT >= 4 ? DT / 2 : DT;
#pragma unroll
    for (int d0 = 0; d0 < DT; d0 += GC) {
        uint32_t gw[GC][2];
#pragma unroll
        for (int dt = 0; dt < GC; dt++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int tt = hr ? r1 : r0;
                gw[dt][hr] = tt < T ? ld_act32(gqkv + (size_t)tt * 4 * D + h * HD + (d0 + dt) * 8 + 2 * tq) : 0u;
            }
#pragma unroll
        for (int dt = 0; dt < GC; dt++)
#pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int tt = hr ? r1 : r0;
                if (tt >= T) continue;
                const float l = hr ? l1 : l0;
                uint32_t out = 0;
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    float ov = rbf(o[d0 + dt][2 * hr + c] / l);
                    float gv = c ? bf_hi(gw[dt][hr]) : bf_lo(gw[dt][hr]);
                    float sg = rbf(1.0f / (1.0f + expf(-gv)));
                    out |= (uint32_t)f2bf(sg * ov) << (16 * c);
                }
                *(uint32_t *)(y + (size_t)tt * D + h * HD + (d0 + dt) * 8 + 2 * tq) = out;
            }
    }
}

extern "C" int fk_ctx_set_prefill_impl(fk_ctx *kc, int impl) {
    if (impl < 0 || impl >= FK_PREFILL_NIMPL) {
        frigg_set_error("attention: unknown prefill implementation %d", impl);
        return -1;
    }
    kc->prefill_impl = impl;
    return 0;
}
extern "C" int fk_ctx_prefill_impl(const fk_ctx *kc) { return kc->prefill_impl; }

static const char *const impl_names[FK_PREFILL_NIMPL] = {"mma-bf16p", "mma"};
extern "C" const char *fk_prefill_impl_name(int impl) {
    return impl >= 0 && impl < FK_PREFILL_NIMPL ? impl_names[impl] : "?";
}

template <int HD>
static size_t mma_smem(void) {
    return 4 * (size_t)MM_BK * (HD + 8) * 2; /* two K and two V tiles */
}

/* grp.n == 0: one prompt (T, P, the pointers as given); else grp's prompts, T its longest. */
template <int HD, bool SPLIT>
static int launch_prefill_mma(const fk_ctx *kc, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                              const uint16_t *gqkv, int T, int H, int max_ctx, int P, uint16_t *y,
                              const fk_prefill_group *grp, cudaStream_t s) {
    dim3 grid((T + 16 * MM_NW - 1) / (16 * MM_NW), H, grp->n ? grp->n : 1);
    float sl2 = (float)(1.4426950408889634 / sqrt((double)HD)); /* scale * log2(e) */
    if (grp->n)
        fk_launch(kc, attn_prefill_mma<HD, SPLIT, true>, grid, MM_NW * 32, mma_smem<HD>(), s, q, k, v, gqkv, T, H, max_ctx,
                  P, sl2, y, *grp);
    else
        fk_launch(kc, attn_prefill_mma<HD, SPLIT, false>, grid, MM_NW * 32, mma_smem<HD>(), s, q, k, v, gqkv, T, H,
                  max_ctx, P, sl2, y, *grp);
    return fk_check_launch("attn_prefill_mma");
}

template <int HD>
static int launch_hd(const fk_ctx *kc, const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *gqkv,
                     int T, int H, int max_ctx, int P, uint16_t *y, const fk_prefill_group *grp, cudaStream_t s) {
    /* bf16 P by default: HF's own forward rounds P to bf16, and it halves the P·V tensor work (420 against 534 µs
     * at T = 4096: the kernels/dev/prefill timing in benchmarks/h200-2026-11-30/) */
    if (kc->prefill_impl == FK_PREFILL_MMA) return launch_prefill_mma<HD, true>(kc, q, k, v, gqkv, T, H, max_ctx, P, y, grp, s);
    return launch_prefill_mma<HD, false>(kc, q, k, v, gqkv, T, H, max_ctx, P, y, grp, s);
}

/* Function attributes are per device: set for each context, on its device. */
template <int HD>
static int raise_smem(void) {
    const void *mma[] = {(const void *)attn_prefill_mma<HD, true, false>, (const void *)attn_prefill_mma<HD, false, false>,
                         (const void *)attn_prefill_mma<HD, true, true>, (const void *)attn_prefill_mma<HD, false, true>};
    cudaError_t e = cudaSuccess;
    /* All of the unified L1/shared array as shared memory: three 69.6 KB blocks per SM need 209 KB of it; the
     * K/V tiles bypass L1 (cp.async.cg), so the small L1 left costs little. */
    for (int i = 0; i < 4 && e == cudaSuccess; i++) {
        e = cudaFuncSetAttribute(mma[i], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mma_smem<HD>());
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(mma[i], cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared);
    }
    if (e != cudaSuccess) {
        frigg_set_error("attention: cannot raise the shared-memory limit (head_dim %d): %s", HD, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int fk_attention_ctx_init(fk_ctx *kc) {
    kc->prefill_impl = FK_PREFILL_MMA_BF16P;
    return raise_smem<16>() || raise_smem<32>() || raise_smem<64>() || raise_smem<128>() ? -1 : 0;
}

static int launch_any(const fk_ctx *kc, const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *gqkv,
                      int T, int H, int hd, int max_ctx, int P, uint16_t *y, const fk_prefill_group *grp, cudaStream_t s) {
    switch (hd) {
    case 16: return launch_hd<16>(kc, q, k, v, gqkv, T, H, max_ctx, P, y, grp, s);
    case 32: return launch_hd<32>(kc, q, k, v, gqkv, T, H, max_ctx, P, y, grp, s);
    case 64: return launch_hd<64>(kc, q, k, v, gqkv, T, H, max_ctx, P, y, grp, s);
    case 128: return launch_hd<128>(kc, q, k, v, gqkv, T, H, max_ctx, P, y, grp, s);
    }
    frigg_set_error("attention: head_dim %d is not supported by the CUDA backend (16, 32, 64 or 128)", hd);
    return -1;
}

extern "C" int fk_attn_prefill(const fk_ctx *kc, const uint16_t *q, const uint16_t *k_seq, const uint16_t *v_seq,
                               const uint16_t *gqkv, int T, int H, int hd, int max_ctx, int prefix_len, uint16_t *y,
                               cudaStream_t s) {
    fk_prefill_group none;
    memset(&none, 0, sizeof none);
    return launch_any(kc, q, k_seq, v_seq, gqkv, T, H, hd, max_ctx, prefix_len, y, &none, s);
}

extern "C" int fk_attn_prefill_group(const fk_ctx *kc, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                     const uint16_t *gqkv, const fk_prefill_group *grp, int H, int hd, int max_ctx,
                                     uint16_t *y, cudaStream_t s) {
    if (grp->n < 1 || grp->n > FK_PREFILL_GROUP_MAX) {
        frigg_set_error("attention: a group of %d prompts (1..%d)", grp->n, FK_PREFILL_GROUP_MAX);
        return -1;
    }
    int tmax = 0;
    for (int i = 0; i < grp->n; i++) {
        if (grp->T[i] < 1 || grp->row0[i] < 0 || grp->P[i] < 0 || grp->kv_off[i] < 0 || grp->T[i] > max_ctx) {
            frigg_set_error("attention: group prompt %d: %d rows from row %d, prefix %d, cache offset %lld (context %d)", i,
                            grp->T[i], grp->row0[i], grp->P[i], grp->kv_off[i], max_ctx);
            return -1;
        }
        tmax = grp->T[i] > tmax ? grp->T[i] : tmax;
    }
    return launch_any(kc, q, k, v, gqkv, tmax, H, hd, max_ctx, 0, y, grp, s);
}
