/* dev/persist.cu — would a persistent decode kernel stream the weights faster than the kernel-per-op chain?
 *
 * A batch-1 step is 128 layer steps of 5 dependent kernels; between two kernels the weight stream stops: the
 * next kernel's blocks can only load what fits in their registers before the wait, and only once the previous
 * kernel's blocks have left their SM. This program times a chain of batch-1 GEMVs with DFM-Mimir's per-layer
 * shapes (gqkv 6144x1536, o 1536x1536, gate_up 8192x1536, down 1536x4096; no attention), each op reading the
 * first K values of the previous op's output, over 16 layers (982 MB of weights, far past L2). Arms, alternated
 * replay by replay (µs per chain, per layer, the weights' GB/s):
 *   chain-auto   the engine's GEMV kernels (fk_gemv, plain store, the context's implementation "auto": all four
 *                on tensor cores for a plain store), 64 kernels with PDL in one graph: the shipped structure
 *   chain-simt   the same, all on CUDA cores
 *   chain-mixed  gqkv and gate_up on CUDA cores, o and down on tensor cores (the engine's batch-1 kernels)
 *   eng-simt     chain-mixed with the RMSNorm fused into gqkv and gate_up and gate_up's SwiGLU epilogue (its
 *                4096 outputs are down's input), as the engine runs them; eng-tc: the same all on tensor cores
 *   tc-norm      all on tensor cores with only the RMSNorm fused; tc-swiglu: with only the SwiGLU
 *   persist      one kernel of one block per SM. A producer lane streams the block's rows of every op, op after
 *                op, into a ring of shared-memory slots (one cp.async.bulk per slot of whole rows, completing on
 *                an mbarrier); it waits only for a free slot, never for a dependency, so the stream runs on
 *                across op boundaries. 8 consumer warps wait for the previous op's outputs (a counter every
 *                block raises after its rows, release/acquire at gpu scope), stage the input vector, and
 *                multiply the rows from the ring on CUDA cores, a warp per row.
 *   persist-tc   the same with 16 consumer warps multiplying on tensor cores (see persist_tc_kernel), from
 *                weights laid out piece by piece (tile_weights); persist-nowait: without the dependency wait
 *                (wrong results: the pipeline alone); persist-stream: nor any multiply (the ring alone)
 *   persist-ws   each piece to one consumer warp instead of all 16 (see persist_ws_kernel)
 *   tma-only     one lane per block streaming the weights with bulk copies alone, by copy size and ring depth
 * Check: each persistent arm's output of every op of the last layer equals chain-auto's within bf16 rounding of
 * fp32 sums in another order (a stale or early read is far off); exit status 1 on a FAIL.
 *
 * The chain arms set the GEMV implementation on the program's kernel context (fk_ctx_set_gemv_impl) before
 * each launch they capture. Measured on the H200 (the persistent-kernel timings in benchmarks/h200-2026-11-30/): every
 * persistent arm is slower than the chains (persist-tc 26.6 µs per layer, persist-ws 30.5, against chain-auto
 * 20.9 and chain-mixed 22.3); bulk copies under 4 KB stream at half the bandwidth (tma-only); the fused RMSNorm
 * costs the tensor-core kernel about 0.9 µs per GEMV (tc-norm 22.7 against chain-auto 20.9 per layer), the
 * CUDA-core kernel nothing measurable (eng-simt 21.9 against chain-mixed 22.3).
 *
 *   persist [--repeats N] [--slots N (2..13)] [--only ARM (one replay of that arm, nothing else: for ncu)]
 */
#include <algorithm>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include <cuda_runtime.h>

#include "common.cuh"
#include "dev.cuh"
#include "kernels.h"

#define NCW 8              /* consumer warps */
#define SLOT_BYTES 16384   /* one ring slot: whole rows, at most this many bytes */
#define MAX_SLOTS 13
#define MAX_K 4096

struct op_t {
    const uint16_t *W, *in;
    uint16_t *out;
    int O, K;
};

/* The bulk copies, mbarrier transaction counts and their fence are sm_90 instructions: on older GPUs these
 * compile to nothing and main() runs no persistent arm (it stops before any launch). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PERSIST_SM90 1
#endif
__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t *b, unsigned count) {
#ifdef PERSIST_SM90
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(b)), "r"(count) : "memory");
#else
    (void)b, (void)count;
#endif
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, unsigned bytes) {
#ifdef PERSIST_SM90
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
#else
    (void)b, (void)bytes;
#endif
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
#ifdef PERSIST_SM90
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(b)) : "memory");
#else
    (void)b;
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, unsigned parity) {
#ifdef PERSIST_SM90
    asm volatile(
        "{\n\t.reg .pred p;\n"
        "WAIT_%=:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
        "@!p bra WAIT_%=;\n}" ::"r"(smem_addr(b)),
        "r"(parity)
        : "memory");
#else
    (void)b, (void)parity;
#endif
}
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, unsigned bytes, uint64_t *bar) {
#ifdef PERSIST_SM90
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
#else
    (void)dst, (void)src, (void)bytes, (void)bar;
#endif
}
/* The mbarrier inits visible to the async proxy (the bulk copies that complete on them). */
__device__ __forceinline__ void fence_mbar_init(void) {
#ifdef PERSIST_SM90
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
__device__ __forceinline__ void consumers_sync(void) { asm volatile("bar.sync 1, %0;" ::"r"(NCW * 32) : "memory"); }

/* The rows of op (O) that block b of G takes, and how many rows a slot holds at width K. */
__device__ __forceinline__ void block_rows(int O, int b, int G, int &r0, int &r1) {
    r0 = (int)((long long)O * b / G);
    r1 = (int)((long long)O * (b + 1) / G);
}

__global__ void __launch_bounds__((NCW + 1) * 32, 1) persist_kernel(const op_t *ops, int nops, int *ctr, int nslot) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *ring = smem;                                                  /* nslot x SLOT_BYTES */
    uint4 *xs = (uint4 *)(smem + (size_t)nslot * SLOT_BYTES);              /* MAX_K bf16 */
    uint64_t *full = (uint64_t *)(smem + (size_t)nslot * SLOT_BYTES + MAX_K * 2), *empty = full + MAX_SLOTS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, G = gridDim.x, b = blockIdx.x;
    if (threadIdx.x == 0) {
        for (int i = 0; i < nslot; i++) {
            mbar_init(&full[i], 1);
            mbar_init(&empty[i], NCW);
        }
        fence_mbar_init();
    }
    __syncthreads();
    if (warp == NCW) { /* producer */
        if (lane == 0) {
            int seq = 0;
            for (int j = 0; j < nops; j++) {
                const op_t op = ops[j];
                int r0, r1;
                block_rows(op.O, b, G, r0, r1);
                const int rpp = SLOT_BYTES / (op.K * 2);
                for (int r = r0; r < r1; r += rpp, seq++) {
                    const int n = min(rpp, r1 - r), slot = seq % nslot, use = seq / nslot;
                    if (use > 0) mbar_wait(&empty[slot], (use - 1) & 1);
                    const unsigned bytes = (unsigned)n * op.K * 2;
                    mbar_expect_tx(&full[slot], bytes);
                    bulk_copy(ring + (size_t)slot * SLOT_BYTES, op.W + (size_t)r * op.K, bytes, &full[slot]);
                }
            }
        }
        return;
    }
    int seq = 0;
    for (int j = 0; j < nops; j++) {
        const op_t op = ops[j];
        if (j > 0) {
            if (threadIdx.x == 0)
                while (ld_acquire(ctr + j - 1) < G) {
                }
            consumers_sync();
        }
        const int nch = op.K / 8;
        for (int c = threadIdx.x; c < nch; c += NCW * 32) xs[c] = __ldcg((const uint4 *)op.in + c);
        consumers_sync();
        int r0, r1;
        block_rows(op.O, b, G, r0, r1);
        const int rpp = SLOT_BYTES / (op.K * 2);
        for (int r = r0; r < r1; r += rpp, seq++) {
            const int n = min(rpp, r1 - r), slot = seq % nslot, use = seq / nslot;
            mbar_wait(&full[slot], use & 1);
            const uint4 *w = (const uint4 *)(ring + (size_t)slot * SLOT_BYTES);
            for (int rr = warp; rr < n; rr += NCW) {
                float acc = 0.f;
                for (int c = lane; c < nch; c += 32) {
                    uint4 a = w[(size_t)rr * nch + c], x = xs[c];
                    acc += bf_lo(a.x) * bf_lo(x.x) + bf_hi(a.x) * bf_hi(x.x) + bf_lo(a.y) * bf_lo(x.y) +
                           bf_hi(a.y) * bf_hi(x.y) + bf_lo(a.z) * bf_lo(x.z) + bf_hi(a.z) * bf_hi(x.z) +
                           bf_lo(a.w) * bf_lo(x.w) + bf_hi(a.w) * bf_hi(x.w);
                }
#pragma unroll
                for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
                if (lane == 0) op.out[r + rr] = f2bf(acc);
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[slot]);
        }
        consumers_sync(); /* every row of this block written (and the input vector no longer read) */
        if (threadIdx.x == 0) red_release(ctr + j, 1);
    }
}


/* persist-tc: the same pipeline, but the consumers multiply on tensor cores as gemv_tc.cu does (the weights as
 * mma B operand, 8 rows per tile; a thread's 16-byte chunk of a row feeds two m16n8k16 mma's as it sits and
 * the x fragment is read with the same permutation), 16 consumer warps. A ring slot holds one piece: a tile's
 * 8 rows x a K segment of up to TC_SEG elements, one bulk copy, from weights laid out piece by piece
 * (tile_weights; bulk copies of 2 KB rows stream at half the bandwidth of 4 KB and larger ones, tma-only), and
 * chunk c of row r stored at c ^ 4(r & 1), so the two rows a quarter warp reads fall in different banks. The K segments of a tile are spread over the warps in steps of
 * 4 chunks; each warp keeps its tile sum in its accumulators over the segments; then the warps' sums are added
 * in warp order through shared memory. */
#define TCW 16      /* consumer warps */
#define TC_SEG 1024 /* K elements per piece */
#define TC_SLOT (8 * TC_SEG * 2)

__device__ __forceinline__ void mma16816(float c[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void tc_sync(void) { asm volatile("bar.sync 1, %0;" ::"r"(TCW * 32) : "memory"); }

/* The ring's barriers: a slot is full when its producer's bytes have landed (one arrival plus the bytes), empty
 * when its `consumers` arrivals have come (warps of a piece). One thread, then a block barrier. */
__device__ void ring_init(uint64_t *full, uint64_t *empty, int nslot, unsigned consumers) {
    for (int i = 0; i < nslot; i++) {
        mbar_init(&full[i], 1);
        mbar_init(&empty[i], consumers);
    }
    fence_mbar_init();
}

/* The producer lane of persist-tc and persist-ws: every op's pieces of this block (tiles, then K segments), one
 * bulk copy each into the next ring slot, waiting only for the slot's previous piece to be consumed. */
__device__ void tc_produce(const op_t *ops, int nops, int nslot, uint8_t *ring, uint64_t *full, uint64_t *empty) {
    const int G = gridDim.x, b = blockIdx.x;
    int seq = 0;
    for (int j = 0; j < nops; j++) {
        const op_t op = ops[j];
        int t0, t1;
        block_rows(op.O / 8, b, G, t0, t1);
        for (int tile = t0; tile < t1; tile++)
            for (int k0 = 0; k0 < op.K; k0 += TC_SEG, seq++) {
                const int len = min(TC_SEG, op.K - k0), slot = seq % nslot, use = seq / nslot;
                if (use > 0) mbar_wait(&empty[slot], (use - 1) & 1);
                mbar_expect_tx(&full[slot], 8u * len * 2);
                bulk_copy(ring + (size_t)slot * TC_SLOT, op.W + (size_t)tile * 8 * op.K + (size_t)k0 * 8, 8u * len * 2,
                          &full[slot]);
            }
    }
}

__global__ void __launch_bounds__((TCW + 1) * 32, 1) persist_tc_kernel(const op_t *ops, int nops, int *ctr, int nslot, int nowait) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *ring = smem;                                           /* nslot x TC_SLOT */
    uint4 *xs = (uint4 *)(smem + (size_t)nslot * TC_SLOT);          /* MAX_K bf16 */
    float *red = (float *)(smem + (size_t)nslot * TC_SLOT + MAX_K * 2); /* [2][TCW][8] */
    uint64_t *full = (uint64_t *)(red + 2 * TCW * 8), *empty = full + MAX_SLOTS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, G = gridDim.x, b = blockIdx.x;
    const int g = lane >> 2, t = lane & 3;
    if (threadIdx.x == 0) ring_init(full, empty, nslot, TCW);
    __syncthreads();
    if (warp == TCW) { /* producer */
        if (lane == 0) tc_produce(ops, nops, nslot, ring, full, empty);
        return;
    }
    int seq = 0, par = 0;
    for (int j = 0; j < nops; j++) {
        const op_t op = ops[j];
        if (j > 0 && !nowait) {
            if (threadIdx.x == 0)
                while (ld_acquire(ctr + j - 1) < G) {
                }
            tc_sync();
        }
        for (int c = threadIdx.x; c < op.K / 8; c += TCW * 32) xs[c] = __ldcg((const uint4 *)op.in + c);
        tc_sync();
        int t0, t1;
        block_rows(op.O / 8, b, G, t0, t1);
        for (int tile = t0; tile < t1; tile++, par ^= 1) {
            float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4] = {0.f, 0.f, 0.f, 0.f};
            for (int k0 = 0; k0 < op.K; k0 += TC_SEG, seq++) {
                const int len = min(TC_SEG, op.K - k0), slot = seq % nslot, use = seq / nslot;
                const int steps = len / 32; /* 4 chunks of 8 per step */
                mbar_wait(&full[slot], use & 1);
                const uint8_t *row = ring + (size_t)slot * TC_SLOT + (size_t)g * len * 2;
                for (int st = warp; st < steps && nowait < 2; st += TCW) {
                    const int ch = 4 * st + t;
                    const uint4 w = *(const uint4 *)(row + (ch ^ ((g & 1) << 2)) * 16);
                    uint4 x = make_uint4(0, 0, 0, 0);
                    if (g == 0) x = xs[k0 / 8 + ch];
                    mma16816(c, x.x, x.y, w.x, w.y);
                    mma16816(d, x.z, x.w, w.z, w.w);
                }
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[slot]);
            }
            if (g == 0) {
                red[(par * TCW + warp) * 8 + 2 * t] = c[0] + d[0];
                red[(par * TCW + warp) * 8 + 2 * t + 1] = c[1] + d[1];
            }
            tc_sync();
            if (warp == 0) { /* lane: output lane & 7, warps 4(lane >> 3)..+3; then across the four groups */
                const float *p = red + (par * TCW + 4 * (lane >> 3)) * 8 + (lane & 7);
                float sum = (p[0] + p[8]) + (p[16] + p[24]);
                sum += __shfl_xor_sync(0xffffffffu, sum, 8);
                sum += __shfl_xor_sync(0xffffffffu, sum, 16);
                if (lane < 8) op.out[tile * 8 + lane] = f2bf(sum);
            }
        }
        tc_sync(); /* every row of this block written (and the input vector no longer read) */
        if (threadIdx.x == 0) red_release(ctr + j, 1);
    }
}

/* persist-ws: persist-tc's ring and piece layout, but each piece goes to ONE consumer warp (piece s to warp
 * s % TCW), so 16 pieces are multiplied at once instead of one piece by 16 warps at a time (whose per-piece
 * latency added up, persist-tc). A piece's partial tile sums go to shared memory; the warp that finishes a
 * tile's last piece adds the pieces in K order and writes the 8 outputs; the warp that finishes a block's last
 * tile of an op raises the op's counter. The input vector of op j is staged in shared memory (two buffers, by
 * op parity) by the warp that owns the block's first piece of op j, after the counter of op j - 1 is full. */
#define WS_TILES 16 /* tile entries in flight per block (a tile is >= 2 pieces; the ring holds <= 13) */
#define WS_SEGS 4   /* K segments per tile at most (K <= 4096) */

__global__ void __launch_bounds__((TCW + 1) * 32, 1) persist_ws_kernel(const op_t *ops, int nops, int *ctr, int nslot) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *ring = smem;
    uint4 *xs = (uint4 *)(smem + (size_t)nslot * TC_SLOT);                     /* [2][MAX_K bf16] */
    float *part = (float *)(smem + (size_t)nslot * TC_SLOT + 2 * MAX_K * 2);    /* [WS_TILES][WS_SEGS][8] */
    int *tile_cnt = (int *)(part + WS_TILES * WS_SEGS * 8), *op_cnt = tile_cnt + WS_TILES; /* op_cnt[2] */
    volatile int *xready = op_cnt + 2;
    uint64_t *full = (uint64_t *)(xready + 2), *empty = full + MAX_SLOTS; /* 8-aligned: see smem_ws */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, G = gridDim.x, b = blockIdx.x;
    const int g = lane >> 2, t = lane & 3;
    if (threadIdx.x == 0) {
        ring_init(full, empty, nslot, 1);
        for (int i = 0; i < WS_TILES; i++) tile_cnt[i] = 0;
        op_cnt[0] = op_cnt[1] = 0;
        *xready = -1;
        fence_mbar_init();
    }
    __syncthreads();
    if (warp == TCW) { /* producer */
        if (lane == 0) tc_produce(ops, nops, nslot, ring, full, empty);
        return;
    }
    int seq = 0, tseq = 0;
    for (int j = 0; j < nops; j++) {
        const op_t op = ops[j];
        int t0, t1;
        block_rows(op.O / 8, b, G, t0, t1);
        const int nseg = (op.K + TC_SEG - 1) / TC_SEG, first = seq;
        const uint4 *x = xs + (size_t)(j & 1) * (MAX_K / 8);
        bool staged = false;
        for (int tile = t0; tile < t1; tile++, tseq++)
            for (int sg = 0; sg < nseg; sg++, seq++) {
                if (seq % TCW != warp) continue;
                if (!staged) { /* op j's input in shared memory before this warp's first piece of op j */
                    if (first % TCW == warp) {
                        if (j > 0 && lane == 0)
                            while (ld_acquire(ctr + j - 1) < G) {
                            }
                        __syncwarp();
                        for (int c = lane; c < op.K / 8; c += 32) ((uint4 *)x)[c] = __ldcg((const uint4 *)op.in + c);
                        __threadfence_block();
                        __syncwarp();
                        if (lane == 0) *xready = j;
                    } else {
                        while (*xready < j) {
                        }
                    }
                    __threadfence_block();
                    staged = true;
                }
                const int k0 = sg * TC_SEG, len = min(TC_SEG, op.K - k0), steps = len / 32;
                const int slot = seq % nslot, use = seq / nslot;
                mbar_wait(&full[slot], use & 1);
                const uint8_t *row = ring + (size_t)slot * TC_SLOT + (size_t)g * len * 2;
                float c0[4] = {0.f, 0.f, 0.f, 0.f}, d0[4] = {0.f, 0.f, 0.f, 0.f};
                float c1[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
                for (int st = 0; st < steps; st += 2) {
                    const int ch = 4 * st + t, ch2 = ch + 4;
                    const uint4 w = *(const uint4 *)(row + (ch ^ ((g & 1) << 2)) * 16);
                    const uint4 w2 = *(const uint4 *)(row + (ch2 ^ ((g & 1) << 2)) * 16);
                    uint4 xa = make_uint4(0, 0, 0, 0), xb = xa;
                    if (g == 0) {
                        xa = x[k0 / 8 + ch];
                        xb = x[k0 / 8 + ch2];
                    }
                    mma16816(c0, xa.x, xa.y, w.x, w.y);
                    mma16816(d0, xa.z, xa.w, w.z, w.w);
                    mma16816(c1, xb.x, xb.y, w2.x, w2.y);
                    mma16816(d1, xb.z, xb.w, w2.z, w2.w);
                }
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[slot]);
                const int e = tseq % WS_TILES;
                if (g == 0) {
                    part[(e * WS_SEGS + sg) * 8 + 2 * t] = (c0[0] + d0[0]) + (c1[0] + d1[0]);
                    part[(e * WS_SEGS + sg) * 8 + 2 * t + 1] = (c0[1] + d0[1]) + (c1[1] + d1[1]);
                }
                __threadfence_block();
                __syncwarp();
                int last = 0;
                if (lane == 0) last = atomicAdd(&tile_cnt[e], 1) == nseg - 1;
                last = __shfl_sync(0xffffffffu, last, 0);
                if (!last) continue;
                __threadfence_block();
                if (lane < 8) {
                    float sum = 0.f;
                    for (int q = 0; q < nseg; q++) sum += ((volatile float *)part)[(e * WS_SEGS + q) * 8 + lane];
                    op.out[tile * 8 + lane] = f2bf(sum);
                    __threadfence();
                }
                __syncwarp();
                if (lane == 0) {
                    tile_cnt[e] = 0;
                    if (atomicAdd(&op_cnt[j & 1], 1) == t1 - t0 - 1) {
                        op_cnt[j & 1] = 0;
                        __threadfence();
                        red_release(ctr + j, 1);
                    }
                }
            }
    }
}

/* The weights of an O x K matrix piece by piece for persist-tc: tile (8 rows), then K segment of TC_SEG, then
 * row, then the segment's chunks of 8 elements, chunk c of row r at c ^ 4(r & 1). One thread per chunk. */
__global__ void tile_weights(const uint16_t *W, uint16_t *Wp, int O, int K) {
    const size_t nch = (size_t)O * K / 8;
    for (size_t id = blockIdx.x * (size_t)blockDim.x + threadIdx.x; id < nch; id += (size_t)gridDim.x * blockDim.x) {
        const int row = (int)(id / (K / 8)), c = (int)(id % (K / 8));
        const int tile = row / 8, r = row % 8, seg = c * 8 / TC_SEG, cs = c - seg * (TC_SEG / 8);
        const int len = min(TC_SEG, K - seg * TC_SEG);
        const size_t dst = (size_t)tile * 8 * K + (size_t)seg * TC_SEG * 8 + (size_t)r * len + (size_t)(cs ^ ((r & 1) << 2)) * 8;
        *(uint4 *)(Wp + dst) = *(const uint4 *)(W + id * 8);
    }
}

/* tma-only: how fast does one thread per block stream with bulk copies alone? Block b copies its contiguous
 * share of `bytes` into a ring of nslot slots, `copy` bytes per copy, waiting for a slot's previous copy to land
 * before reusing it. No consumers. */
__global__ void __launch_bounds__(32, 1) tma_stream_kernel(const uint8_t *src, size_t bytes, int copy, int nslot) {
    extern __shared__ __align__(128) uint8_t smem[];
    uint64_t *full = (uint64_t *)(smem + (size_t)nslot * SLOT_BYTES);
    if (threadIdx.x != 0) return;
    for (int i = 0; i < nslot; i++) mbar_init(&full[i], 1);
    fence_mbar_init();
    const size_t share = bytes / gridDim.x / 16 * 16, base = share * blockIdx.x;
    const int n = (int)(share / copy);
    for (int i = 0; i < n; i++) {
        const int slot = i % nslot, use = i / nslot;
        if (use > 0) mbar_wait(&full[slot], (use - 1) & 1);
        mbar_expect_tx(&full[slot], copy);
        bulk_copy(smem + (size_t)slot * SLOT_BYTES, src + base + (size_t)i * copy, copy, &full[slot]);
    }
    for (int i = n > nslot ? n - nslot : 0; i < n; i++) mbar_wait(&full[i % nslot], (i / nslot) & 1);
}

__global__ void fill_bf16(uint16_t *p, size_t n, uint32_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t h = dev_hash(i, seed);
        float u = (h & 0xffffff) / 16777216.0f * 2.f - 1.f;
        p[i] = f2bf(u * scale);
    }
}

static float bf2host(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int main(int argc, char **argv) {
    int repeats = 20, nslot = 12;
    const char *only = NULL; /* --only ARM: that arm, one replay, nothing else (for a profiler) */
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
        int ok = i + 1 < argc && end && !*end;
        if (!strcmp(argv[i], "--repeats") && ok && v >= 1 && v <= 10000) repeats = (int)v;
        else if (!strcmp(argv[i], "--slots") && ok && v >= 2 && v <= MAX_SLOTS) nslot = (int)v;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[i + 1];
        else {
            fprintf(stderr, "usage: persist [--repeats N (1..10000)] [--slots N (2..%d)] [--only ARM]\n", MAX_SLOTS);
            return 2;
        }
        i++;
    }
    fk_ctx *kc = dev_ctx(0);
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major < 9) {
        printf("# %s: the persistent arms use sm_90 bulk copies; nothing to measure here\n", prop.name);
        return 0;
    }
    const int D = 1536, I = 4096, L = 16;
    const int shapes[4][2] = {{4 * D, D}, {D, D}, {2 * I, D}, {D, I}}; /* {O, K} */
    size_t per_layer = 0;
    for (auto &s : shapes) per_layer += (size_t)s[0] * s[1];
    const size_t wbytes = per_layer * L * 2;
    printf("# %s, %d SMs, %d layers x 4 GEMVs (batch 1), %.1f MB of weights, %d slots of %d bytes, %d repeats\n",
           prop.name, sms, L, wbytes / 1e6, nslot, SLOT_BYTES, repeats);
    uint16_t *W, *Wp, *act;
    CK(cudaMalloc(&W, wbytes));
    CK(cudaMalloc(&Wp, wbytes)); /* persist-tc's copy, piece by piece */
    const int nops = 4 * L, act_len = 2 * I; /* every op's output slot holds up to 8192 values */
    CK(cudaMalloc(&act, (size_t)(nops + 1) * act_len * 2 * 4)); /* four sets: chain, persist, persist-tc, persist-ws */
    fill_bf16<<<1024, 256>>>(W, per_layer * L, 1234u, 0.05f);
    CK(cudaGetLastError());
    uint16_t *acts[4];
    for (int a = 0; a < 4; a++) acts[a] = act + (size_t)a * (nops + 1) * act_len;
    for (int a = 0; a < 4; a++) {
        CK(cudaMemset(acts[a], 0, (size_t)(nops + 1) * act_len * 2));
        fill_bf16<<<8, 256>>>(acts[a], D, 99u, 1.0f);
    }
    CK(cudaGetLastError());
    std::vector<op_t> hops[4];
    for (int a = 0; a < 4; a++) {
        const uint16_t *w = a >= 2 ? Wp : W;
        for (int l = 0; l < L; l++)
            for (int k = 0; k < 4; k++) {
                int j = 4 * l + k;
                op_t o = {w, acts[a] + (size_t)j * act_len, acts[a] + (size_t)(j + 1) * act_len, shapes[k][0], shapes[k][1]};
                hops[a].push_back(o);
                if (a == 2 || a == 3) tile_weights<<<1024, 256>>>(hops[0][j].W, (uint16_t *)w, shapes[k][0], shapes[k][1]);
                w += (size_t)shapes[k][0] * shapes[k][1];
            }
    }
    op_t *dops;
    int *ctr;
    CK(cudaMalloc(&dops, sizeof(op_t) * nops * 4));
    for (int a = 0; a < 4; a++) CK(cudaMemcpy(dops + a * nops, hops[a].data(), sizeof(op_t) * nops, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&ctr, sizeof(int) * nops));
    const size_t smem = (size_t)nslot * SLOT_BYTES + MAX_K * 2 + 2 * MAX_SLOTS * 8;
    CK(cudaFuncSetAttribute(persist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const size_t smem_tc = (size_t)nslot * TC_SLOT + MAX_K * 2 + 2 * TCW * 8 * 4 + 2 * MAX_SLOTS * 8;
    CK(cudaFuncSetAttribute(persist_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_tc));
    const size_t smem_ws = (size_t)nslot * TC_SLOT + 2 * MAX_K * 2 + WS_TILES * WS_SEGS * 8 * 4 + (WS_TILES + 4) * 4 +
                           2 * MAX_SLOTS * 8;
    CK(cudaFuncSetAttribute(persist_ws_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_ws));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));

    /* chain-mixed: gqkv and gate_up on CUDA cores, o and down on tensor cores, as the engine's batch-1 step */
    /* persist-nowait: persist-tc with no dependency wait (wrong results, not checked): the pipeline's stream alone;
     * persist-stream: nor any multiply (the consumers only take the slots and hand them back) */
    /* eng-simt / eng-tc: gqkv and gate_up as the engine runs them (RMSNorm fused; gate_up with the SwiGLU
     * epilogue, its 4096 outputs the input of down), on CUDA cores / tensor cores; o and down on tensor cores */
    /* tc-norm: all on tensor cores, the RMSNorm fused into gqkv and gate_up, no SwiGLU; tc-swiglu: the SwiGLU and
     * no RMSNorm */
    enum { A_AUTO, A_SIMT, A_MIXED, A_PERSIST, A_PERSIST_TC, A_NOWAIT, A_STREAM, A_WS, A_ENG_SIMT, A_ENG_TC, A_TC_NORM,
           A_TC_SWIGLU, NA };
    const char *aname[NA] = {"chain-auto", "chain-simt", "chain-mixed", "persist", "persist-tc", "persist-nowait", "persist-stream",
                             "persist-ws", "eng-simt", "eng-tc", "tc-norm", "tc-swiglu"};
    cudaGraphExec_t exec[NA];
    for (int a = 0; a < NA; a++) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        if (a == A_WS) {
            CK(cudaMemsetAsync(ctr, 0, sizeof(int) * nops, s));
            persist_ws_kernel<<<sms, (TCW + 1) * 32, smem_ws, s>>>(dops + 3 * nops, nops, ctr, nslot);
            CK(cudaGetLastError());
        } else if (a == A_PERSIST || a == A_PERSIST_TC || a == A_NOWAIT || a == A_STREAM) {
            CK(cudaMemsetAsync(ctr, 0, sizeof(int) * nops, s));
            if (a == A_PERSIST) persist_kernel<<<sms, (NCW + 1) * 32, smem, s>>>(dops + nops, nops, ctr, nslot);
            else persist_tc_kernel<<<sms, (TCW + 1) * 32, smem_tc, s>>>(dops + 2 * nops, nops, ctr, nslot, a == A_NOWAIT ? 1 : a == A_STREAM ? 2 : 0);
            CK(cudaGetLastError());
        } else {
            for (int j = 0; j < nops; j++) {
                const op_t &o = hops[0][j];
                const bool eng = a == A_ENG_SIMT || a == A_ENG_TC, big = j % 2 == 0;
                const bool tc = a == A_AUTO || a == A_ENG_TC || a == A_TC_NORM || a == A_TC_SWIGLU;
                const int impl = a == A_AUTO ? FK_GEMV_IMPL_AUTO : a == A_SIMT ? FK_GEMV_IMPL_SIMT : tc ? FK_GEMV_IMPL_TC
                                 : big ? FK_GEMV_IMPL_SIMT : FK_GEMV_IMPL_TC;
                const int epi = (eng || a == A_TC_SWIGLU) && j % 4 == 2 ? FK_GEMV_SWIGLU : FK_GEMV_STORE;
                const int norm = (eng || a == A_TC_NORM) && big;
                const frigg_mat M = {.w = o.W, .rows = o.O, .cols = o.K, .dtype = FRIGG_DT_BF16, .scales = NULL, .group = 0};
                if (fk_ctx_set_gemv_impl(kc, impl) || fk_gemv(kc, &M, o.in, 1, norm, 1e-6f, epi, o.out, s)) {
                    fprintf(stderr, "persist: fk_gemv: %s\n", frigg_error());
                    return 1;
                }
            }
        }
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&exec[a], g, 0));
        CK(cudaGraphDestroy(g));
    }
    if (only) {
        for (int a = 0; a < NA; a++)
            if (!strcmp(only, aname[a])) {
                CK(cudaGraphLaunch(exec[a], s));
                CK(cudaStreamSynchronize(s));
                printf("ran %s once\n", only);
                return 0;
            }
        fprintf(stderr, "persist: --only: no arm '%s'\n", only);
        return 2;
    }
    /* check: persist against chain-auto, every op of the last layer */
    int bad = 0;
    for (int a : {A_AUTO, A_PERSIST, A_PERSIST_TC, A_WS}) CK(cudaGraphLaunch(exec[a], s));
    CK(cudaStreamSynchronize(s));
    for (int v = 1; v <= 3; v++)
    for (int k = 0; k < 4; k++) {
        int j = 4 * (L - 1) + k, O = shapes[k][0];
        std::vector<uint16_t> h0(O), h1(O);
        CK(cudaMemcpy(h0.data(), hops[0][j].out, O * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h1.data(), hops[v][j].out, O * 2, cudaMemcpyDeviceToHost));
        double worst = 0, scale = 0;
        for (int i = 0; i < O; i++) {
            double x0 = bf2host(h0[i]), x1 = bf2host(h1[i]);
            worst = std::max(worst, fabs(x0 - x1));
            scale = std::max(scale, fabs(x0));
        }
        int ok = worst <= 0.02 * scale + 1e-6 && scale > 0;
        printf("check %s op %d (%dx%d): max |chain - it| %.3g of max |out| %.3g: %s\n", aname[v == 1 ? A_PERSIST : v == 2 ? A_PERSIST_TC : A_WS],
               k, O, shapes[k][1], worst, scale, ok ? "PASS" : "FAIL");
        bad |= !ok;
    }
    /* time, arms alternated */
    std::vector<float> us[NA];
    for (int r = 0; r < repeats + 2; r++)
        for (int a = 0; a < NA; a++) {
            CK(cudaEventRecord(e0, s));
            CK(cudaGraphLaunch(exec[a], s));
            CK(cudaEventRecord(e1, s));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (r >= 2) us[a].push_back(ms * 1000.f);
        }
    printf("%-12s %10s %10s %10s %12s %8s\n", "arm", "us/chain", "min", "max", "us/layer", "GB/s");
    for (int a = 0; a < NA; a++) {
        std::sort(us[a].begin(), us[a].end());
        float med = us[a][us[a].size() / 2];
        printf("%-12s %10.1f %10.1f %10.1f %12.2f %8.0f\n", aname[a], med, us[a].front(), us[a].back(), med / L,
               wbytes / (med * 1e-6) / 1e9);
    }
    /* tma-only streams over the same weights */
    CK(cudaFuncSetAttribute(tma_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, MAX_SLOTS * SLOT_BYTES + 256));
    printf("%-22s %10s %8s\n", "tma-only copy x slots", "us", "GB/s");
    for (int copy : {2048, 4096, 8192, 16384})
        for (int ns : {4, 12}) {
            std::vector<float> t;
            for (int r = 0; r < 5; r++) {
                CK(cudaEventRecord(e0, s));
                tma_stream_kernel<<<sms, 32, MAX_SLOTS * SLOT_BYTES + 256, s>>>((const uint8_t *)W, wbytes, copy, ns);
                CK(cudaEventRecord(e1, s));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                t.push_back(ms * 1000.f);
            }
            std::sort(t.begin(), t.end());
            printf("%6d x %-13d %10.1f %8.0f\n", copy, ns, t[2], wbytes / (t[2] * 1e-6) / 1e9);
        }
    fk_ctx_free(kc);
    return bad;
}
