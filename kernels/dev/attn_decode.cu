/* attn_decode.cu — microbenchmark of decode attention (kernels/attention_decode.cu): two earlier kernels copied
 * below with only their names changed — "v1" (commit c8fb248) and "v2" (the kernel shipped before round 3,
 * commit eff9e53: split-K with several splits per block, a barrier merge at every split's end, a "next = current"
 * register copy per round) — against the current one, in each merge mode ("split": partials through global
 * memory + atomic counter; "cluster": through a thread-block cluster's distributed shared memory), with
 * splits per block (":N" fixed, none = the batch-size policy), L2 prefetch ("+pfN": N rounds beyond those in registers) and
 * launch bounds ("/5": compiled for 5 blocks per SM instead of 4; "/3": for 3, with three rounds of loads in
 * flight instead of two) settings.
 *
 * For each shape (batch B in {1,2,4,8} x context in {128,512,2048,4096}; DFM-Mimir's 12 heads of head_dim 128):
 *  1. correctness: fresh random q, gate, K and V (never zeros), rows at different lengths (row b at
 *     ctx - 37*b), output poisoned with NaN first; every version is run twice (the split counters must be
 *     left at zero) and compared with the CPU reference (tests/attn_decode_ref.h, the CPU engine's
 *     arithmetic) under test_cuda_ops's tolerance; every current version must also equal v2 of its merge
 *     mode BIT FOR BIT (the round-3 changes move no arithmetic). Prints PASS/FAIL per (version, shape),
 *     and a "PASS|FAIL bits" line per (current version, shape) for the bit-for-bit comparison.
 *  2. timing: one CUDA graph of 128 launches (PDL on, through each version's launcher, as the engine
 *     launches), launch i reading its own K/V slot i like the 128 virtual layers of a decode step (so the
 *     caches, 128 x 201 MB at B=8 ctx 4096, are far larger than L2), every row at position ctx-1; median of
 *     the timed replays after warm-up. Prints µs per launch and GB/s (K+V bytes + q, gate and y), then a
 *     table of µs per version with the fastest per shape.
 * max_ctx (which sizes the split count) is the shape's ctx, as frigg-bench sets it, unless --max-ctx N.
 * --no-cluster leaves the cluster versions out. Exit 1 on any FAIL.
 * Usage: attn_decode [--quick] [--max-ctx N] [--no-cluster]   (--quick: 5 timed replays, not 11) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

extern "C" {
#include "util.h"
}
#include "common.cuh"
#include "dev.cuh"
#include "kernels.h"
#include "../../tests/attn_decode_ref.h"

/* ---------------- v1: the decode attention kernel of commit c8fb248 (names prefixed v1_) ---------------- */
#define V1_THREADS 128    /* threads per block */
#define V1_KPT 4          /* keys each key group holds per round */
#define V1_MIN_KEYS 32    /* fewest keys per split: below this a split's fixed costs dominate */
#define V1_MAX_SPLITS 32  /* most splits per (row, head); bounds the merge's shared memory */
#define V1_SPLIT_BLOCKS 256 /* splits * heads aimed at: about two blocks per SM of a 132-SM H200 at batch 1 */

/* Splits per (row, head) at most: depends on H and max_ctx only (never on B), so every batch size lays a
 * row's keys out the same way. */
static int v1_nsplit(int H, int max_ctx) {
    int s = (V1_SPLIT_BLOCKS + H - 1) / H;
    int cap = (max_ctx + V1_MIN_KEYS - 1) / V1_MIN_KEYS;
    if (s > V1_MAX_SPLITS) s = V1_MAX_SPLITS;
    if (s > cap) s = cap;
    return s < 1 ? 1 : s;
}

/* A row of `len` keys: `ns` splits of `chunk` keys (the last one shorter), at most nsplit of them. */
__device__ __forceinline__ void v1_split(int len, int nsplit, int &chunk, int &ns) {
    int want = (len + V1_MIN_KEYS - 1) / V1_MIN_KEYS;
    if (want > nsplit) want = nsplit;
    chunk = (len + want - 1) / want;
    ns = (len + chunk - 1) / chunk;
}

/* K and V of keys r0 + u*GROUPS + g (u < V1_KPT) for this lane's 8 dims; zeros past j1 (no load). Keys of
 * a warp are adjacent in memory, so each warp load is whole contiguous rows. Streaming loads: each key is
 * read once per step, and 128 layers' caches do not fit L2 anyway. */
template <int HD, int GROUPS>
__device__ __forceinline__ void v1_load(const uint16_t *K, const uint16_t *V, int r0, int g, int j1, int skip,
                                         uint4 (&kb)[V1_KPT], uint4 (&vb)[V1_KPT]) {
#pragma unroll
    for (int u = 0; u < V1_KPT; u++) {
        int j = r0 + u * GROUPS + g;
        if (j < j1 && j != skip) {
            kb[u] = __ldcs((const uint4 *)(K + (size_t)j * HD));
            vb[u] = __ldcs((const uint4 *)(V + (size_t)j * HD));
        } else {
            kb[u] = make_uint4(0, 0, 0, 0);
            vb[u] = make_uint4(0, 0, 0, 0);
        }
    }
}

__device__ __forceinline__ void v1_unpack8(uint4 w, float (&f)[8]) {
    f[0] = bf_lo(w.x); f[1] = bf_hi(w.x); f[2] = bf_lo(w.y); f[3] = bf_hi(w.y);
    f[4] = bf_lo(w.z); f[5] = bf_hi(w.z); f[6] = bf_lo(w.w); f[7] = bf_hi(w.w);
}

/* y = bf16(bf16(sigmoid(g)) * bf16(a / L)) for dim d of (row b, head h): the CPU engine's rounding points. */
__device__ __forceinline__ void v1_gate_store(float a, float L, const uint16_t *gqkv, int D, int b, int h, int HD,
                                               int d, uint16_t *y) {
    float o = rbf(a / L);
    float g = bf2f(gqkv[(size_t)b * 4 * D + h * HD + d]);
    float sg = rbf(1.0f / (1.0f + expf(-g)));
    y[(size_t)b * D + h * HD + d] = f2bf(sg * o);
}

/* grid (nsplit, H, B), V1_THREADS threads. Work partial of (b, h, sp): [m, l, -, -, acc[HD]] (HD + 4 floats,
 * so each partial starts 16-byte aligned). */
template <int HD>
__global__ void __launch_bounds__(V1_THREADS)
    v1_attn_decode_kernel(const uint16_t *__restrict__ q, const uint16_t *__restrict__ k_slot,
                       const uint16_t *__restrict__ v_slot, long long seq_stride, const int32_t *row_seq,
                       const int32_t *row_pos, int H, int max_ctx, int nsplit, float scale, float *work,
                       int *counters, const uint16_t *__restrict__ gqkv, uint16_t *__restrict__ y) {
    constexpr int LPK = HD / 8;                /* lanes per key */
    constexpr int GROUPS = V1_THREADS / LPK;  /* keys per block load */
    constexpr int KR = GROUPS * V1_KPT;       /* keys per round */
    constexpr int PW = HD + 4;                 /* floats per work partial */
    __shared__ float s_m[GROUPS], s_l[GROUPS];
    /* the key groups' accumulators, later every split's partial (last block only) */
    constexpr int SACC = GROUPS * HD > V1_MAX_SPLITS * PW ? GROUPS * HD : V1_MAX_SPLITS * PW;
    __shared__ __align__(16) float s_acc[SACC];
    __shared__ int s_last;
    const int sp = blockIdx.x, h = blockIdx.y, b = blockIdx.z, D = H * HD;
    /* row_seq/row_pos are set before the step starts (host copy), never by the kernel in front of this one. */
    const int len = row_pos[b] + 1;
    int chunk, ns;
    v1_split(len, nsplit, chunk, ns);
    if (sp >= ns) return; /* no keys: nothing to wait for, nothing to write */
    const int j0 = sp * chunk, j1 = min(len, j0 + chunk);
    const int g = threadIdx.x / LPK, li = threadIdx.x % LPK;
    const size_t base = (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * HD + li * 8;
    const uint16_t *K = k_slot + base, *V = v_slot + base;

    uint4 kc[V1_KPT], vc[V1_KPT];
    v1_load<HD, GROUPS>(K, V, j0, g, j1, len - 1, kc, vc); /* before the wait: all but the newest key */
    pdl_wait();
    pdl_launch();
#pragma unroll
    for (int u = 0; u < V1_KPT; u++)
        if (j0 + u * GROUPS + g == len - 1 && len - 1 < j1) { /* a round may reach past a short split */
            kc[u] = __ldcg((const uint4 *)(K + (size_t)(len - 1) * HD));
            vc[u] = __ldcg((const uint4 *)(V + (size_t)(len - 1) * HD));
        }
    float qf[8];
    v1_unpack8(*(const uint4 *)(q + (size_t)b * D + h * HD + li * 8), qf);

    float m = -INFINITY, l = 0.0f, acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.0f;
    for (int r0 = j0; r0 < j1; r0 += KR) {
        uint4 kn[V1_KPT], vn[V1_KPT];
        v1_load<HD, GROUPS>(K, V, r0 + KR, g, j1, -1, kn, vn); /* next round in flight while this one computes */
        float s[V1_KPT], smax = -INFINITY;
#pragma unroll
        for (int u = 0; u < V1_KPT; u++) {
            float kf[8], part = 0.0f;
            v1_unpack8(kc[u], kf);
#pragma unroll
            for (int i = 0; i < 8; i++) part += qf[i] * kf[i];
#pragma unroll
            for (int o = LPK / 2; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
            s[u] = r0 + u * GROUPS + g < j1 ? part * scale : -INFINITY;
            smax = fmaxf(smax, s[u]);
        }
        float m_new = fmaxf(m, smax);
        if (m_new != -INFINITY) { /* this group had a key in this round */
            float alpha = expf(m - m_new);
            l *= alpha;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[i] *= alpha;
#pragma unroll
            for (int u = 0; u < V1_KPT; u++) {
                float p = expf(s[u] - m_new), vf[8];
                v1_unpack8(vc[u], vf);
                l += p;
#pragma unroll
                for (int i = 0; i < 8; i++) acc[i] += p * vf[i];
            }
            m = m_new;
        }
#pragma unroll
        for (int u = 0; u < V1_KPT; u++) {
            kc[u] = kn[u];
            vc[u] = vn[u];
        }
    }

    /* Merge the key groups of this block (fixed group order). */
    if (li == 0) {
        s_m[g] = m;
        s_l[g] = l;
    }
#pragma unroll
    for (int i = 0; i < 8; i++) s_acc[g * HD + li * 8 + i] = acc[i];
    __syncthreads();
    const int t = threadIdx.x;
    float M = -INFINITY, L = 0.0f, a = 0.0f;
    for (int k = 0; k < GROUPS; k++) M = fmaxf(M, s_m[k]);
    if (t < HD)
        for (int k = 0; k < GROUPS; k++) {
            if (s_m[k] == -INFINITY) continue;
            float w = expf(s_m[k] - M);
            L += s_l[k] * w;
            a += s_acc[k * HD + t] * w;
        }
    if (ns == 1) { /* the whole row in this block */
        if (t < HD) v1_gate_store(a, L, gqkv, D, b, h, HD, t, y);
        return;
    }
    float *wrow = work + ((size_t)b * H + h) * nsplit * PW;
    if (t < HD) wrow[(size_t)sp * PW + 4 + t] = a;
    if (t == 0) { /* the two pad floats too: the merge reads whole 16-byte words */
        wrow[(size_t)sp * PW] = M;
        wrow[(size_t)sp * PW + 1] = L;
        wrow[(size_t)sp * PW + 2] = 0.0f;
        wrow[(size_t)sp * PW + 3] = 0.0f;
    }
    /* The last split block of this (row, head) to finish merges all partials: no separate kernel. It resets
     * the counter, so it is zero again for the next layer and step. */
    __threadfence();
    __syncthreads();
    if (t == 0) {
        int prev = atomicAdd(&counters[b * H + h], 1);
        s_last = prev == ns - 1;
        if (s_last) counters[b * H + h] = 0;
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    /* All partials into shared memory with independent 16-byte loads (one L2 round trip), bypassing L1:
     * other blocks wrote them. */
    constexpr int MAXV = V1_MAX_SPLITS * PW / 4, PER = (MAXV + V1_THREADS - 1) / V1_THREADS;
    const int nv = ns * PW / 4;
    float4 tmp[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        int v = i * V1_THREADS + t;
        if (v < nv) tmp[i] = __ldcg((const float4 *)wrow + v);
    }
    /* (s_acc's group sums were all read before the counter's __syncthreads) */
#pragma unroll
    for (int i = 0; i < PER; i++) {
        int v = i * V1_THREADS + t;
        if (v < nv) ((float4 *)s_acc)[v] = tmp[i];
    }
    __syncthreads();
    if (t >= HD) return;
    M = -INFINITY;
    for (int k = 0; k < ns; k++) M = fmaxf(M, s_acc[k * PW]);
    L = 0.0f;
    a = 0.0f;
    for (int k = 0; k < ns; k++) { /* split order: the same sum whichever block came last */
        float w = expf(s_acc[k * PW] - M);
        L += s_acc[k * PW + 1] * w;
        a += s_acc[k * PW + 4 + t] * w;
    }
    v1_gate_store(a, L, gqkv, D, b, h, HD, t, y);
}

static size_t v1_work_floats(int B, int H, int hd, int max_ctx) {
    return (size_t)B * H * v1_nsplit(H, max_ctx) * (hd + 4);
}

static int v1_attn_decode(const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot, long long seq_stride,
                              const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H,
                              int hd, int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s) {
    if (B < 1 || H < 1 || max_ctx < 1) {
        frigg_set_error("attn_decode: bad shape B=%d H=%d max_ctx=%d", B, H, max_ctx);
        return -1;
    }
    int nsplit = v1_nsplit(H, max_ctx);
    dim3 grid(nsplit, H, B);
    float scale = (float)(1.0 / sqrt((double)hd));
    switch (hd) {
    case 16: fk_launch(v1_attn_decode_kernel<16>, grid, V1_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 32: fk_launch(v1_attn_decode_kernel<32>, grid, V1_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 64: fk_launch(v1_attn_decode_kernel<64>, grid, V1_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 128: fk_launch(v1_attn_decode_kernel<128>, grid, V1_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    default:
        frigg_set_error("attention: head_dim %d is not supported by the CUDA backend (16, 32, 64 or 128)", hd);
        return -1;
    }
    return fk_check_launch("attn_decode");
}

/* ---------------- v2: the decode attention kernel of commit eff9e53 (names prefixed v2_ / V2_) ---------------- */
#define V2_THREADS 128      /* threads per block */
#define V2_KPT 4            /* keys each key group holds per round */
#define V2_MIN_KEYS 32      /* fewest keys per split: below this a split's fixed costs dominate */
#define V2_MAX_SPLITS 32    /* most splits per (row, head); bounds the merge's shared memory */
#define V2_SPLIT_BLOCKS 256 /* splits * heads aimed at: about two blocks per SM of a 132-SM H200 at batch 1 */
#define V2_MAX_CLUSTER 16   /* most blocks per cluster (16 needs the non-portable cluster size attribute) */
#define V2_WAVE_BLOCKS 4    /* auto spb: blocks per SM aimed at (5 fit at 96 registers: launch bounds) */

/* v2_env: 0 = FRIGG_ATTN_DECODE not read yet, 1 = read (or overridden), -1 = it is invalid (every call fails) */
static int v2_impl = FK_ATTND_SPLIT, v2_spb = 0, v2_env = 0;

/* Splits per (row, head) at most: depends on H, max_ctx and the merge mode only (never on B), so every batch
 * size lays a row's keys out the same way. */
static int v2_nsplit(int H, int max_ctx, int impl) {
    int s = (V2_SPLIT_BLOCKS + H - 1) / H;
    int cap = (max_ctx + V2_MIN_KEYS - 1) / V2_MIN_KEYS;
    int most = impl == FK_ATTND_CLUSTER ? V2_MAX_CLUSTER : V2_MAX_SPLITS;
    if (s > most) s = most;
    if (s > cap) s = cap;
    return s < 1 ? 1 : s;
}

/* A row of `len` keys: `ns` splits of `chunk` keys (the last one shorter), at most nsplit of them. */
__device__ __forceinline__ void v2_split(int len, int nsplit, int &chunk, int &ns) {
    int want = (len + V2_MIN_KEYS - 1) / V2_MIN_KEYS;
    if (want > nsplit) want = nsplit;
    chunk = (len + want - 1) / want;
    ns = (len + chunk - 1) / chunk;
}

/* K and V of keys r0 + u*GROUPS + g (u < V2_KPT) for this lane's 8 dims; zeros past j1 (no load). Keys of
 * a warp are adjacent in memory, so each warp load is whole contiguous rows. Streaming loads: each key is
 * read once per step, and 128 layers' caches do not fit L2 anyway. */
template <int HD, int GROUPS>
__device__ __forceinline__ void v2_load(const uint16_t *K, const uint16_t *V, int r0, int g, int j1, int skip,
                                         uint4 (&kb)[V2_KPT], uint4 (&vb)[V2_KPT]) {
#pragma unroll
    for (int u = 0; u < V2_KPT; u++) {
        int j = r0 + u * GROUPS + g;
        if (j < j1 && j != skip) {
            kb[u] = __ldcs((const uint4 *)(K + (size_t)j * HD));
            vb[u] = __ldcs((const uint4 *)(V + (size_t)j * HD));
        } else {
            kb[u] = make_uint4(0, 0, 0, 0);
            vb[u] = make_uint4(0, 0, 0, 0);
        }
    }
}

__device__ __forceinline__ void v2_unpack8(uint4 w, float (&f)[8]) {
    f[0] = bf_lo(w.x); f[1] = bf_hi(w.x); f[2] = bf_lo(w.y); f[3] = bf_hi(w.y);
    f[4] = bf_lo(w.z); f[5] = bf_hi(w.z); f[6] = bf_lo(w.w); f[7] = bf_hi(w.w);
}

/* The gpu-scope acquire-release fence: what the partials/counter handshake needs, lighter than the
 * sequentially consistent fence of __threadfence(). */
__device__ __forceinline__ void v2_fence_acq_rel_gpu(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
    __threadfence();
#endif
}

/* Cluster barrier halves (sm_90): arrive early, wait late, so the barrier's latency hides behind other work. */
__device__ __forceinline__ void v2_cluster_arrive_relaxed(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
#endif
}
__device__ __forceinline__ void v2_cluster_arrive_release(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
#endif
}
__device__ __forceinline__ void v2_cluster_wait_acquire(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#endif
}
/* The address of `p` (this block's shared memory) in block `rank` of the cluster, as a generic pointer. */
__device__ __forceinline__ float *v2_cluster_map(float *p, unsigned rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint64_t r;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"((uint64_t)p), "r"(rank));
    return (float *)r;
#else
    (void)rank;
    return p;
#endif
}

/* grid (nblk, H, B), V2_THREADS threads; block x of (row b, head h) computes splits [x*spb, x*spb + spb) of
 * the row (those that exist). A partial of split s: [m, l, 0, 0, acc[HD]] (HD + 4 floats, so each starts
 * 16-byte aligned), in shared memory s_part[s] of the merging block and, in "split" mode when the row's splits
 * span blocks, in work[(b, h)][s]. CLUSTER: launched with cluster dims (nblk, 1, 1), so the block's rank in its
 * cluster is blockIdx.x. */
template <int HD, bool CLUSTER>
__global__ void __launch_bounds__(V2_THREADS, 5)
    v2_attn_decode_kernel(const uint16_t *__restrict__ q, const uint16_t *__restrict__ k_slot,
                       const uint16_t *__restrict__ v_slot, long long seq_stride, const int32_t *row_seq,
                       const int32_t *row_pos, int H, int max_ctx, int nsplit, int spb, float scale, float *work,
                       int *counters, const uint16_t *__restrict__ gqkv, uint16_t *__restrict__ y) {
    constexpr int LPK = HD / 8;                /* lanes per key */
    constexpr int GROUPS = V2_THREADS / LPK;  /* keys per block load */
    constexpr int KR = GROUPS * V2_KPT;       /* keys per round */
    constexpr int PW = HD + 4;                 /* floats per partial */
    constexpr int MAXS = CLUSTER ? V2_MAX_CLUSTER : V2_MAX_SPLITS;
    __shared__ float s_m[GROUPS], s_l[GROUPS];
    __shared__ __align__(16) float s_grp[GROUPS * HD]; /* the key groups' accumulators of the current split */
    __shared__ __align__(16) float s_part[MAXS * PW];  /* split partials (the merging block's are read) */
    __shared__ int s_last;
    const int bx = blockIdx.x, h = blockIdx.y, b = blockIdx.z, D = H * HD, t = threadIdx.x;
    if (CLUSTER) v2_cluster_arrive_relaxed(); /* phase 0: "this block has started" (remote writes need it) */
    /* row_seq/row_pos are set before the step starts (host copy), never by the kernel in front of this one. */
    const int len = row_pos[b] + 1;
    int chunk, ns;
    v2_split(len, nsplit, chunk, ns);
    const int s0 = bx * spb, s1 = min(ns, s0 + spb);
    if (s0 >= ns) { /* no keys: nothing to wait for, nothing to write */
        if (CLUSTER) { /* still take part in both cluster barriers, so no barrier depends on exited blocks */
            pdl_launch();
            v2_cluster_wait_acquire();
            v2_cluster_arrive_release();
            v2_cluster_wait_acquire();
        }
        return;
    }
    const int g = t / LPK, li = t % LPK;
    const size_t base = (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * HD + li * 8;
    const uint16_t *K = k_slot + base, *V = v_slot + base;

    int s = s0, j0 = s0 * chunk, j1 = min(len, j0 + chunk), r0 = j0;
    uint4 kc[V2_KPT], vc[V2_KPT];
    v2_load<HD, GROUPS>(K, V, r0, g, j1, len - 1, kc, vc); /* before the wait: all but the newest key */
    pdl_wait();
    pdl_launch();
#pragma unroll
    for (int u = 0; u < V2_KPT; u++)
        if (r0 + u * GROUPS + g == len - 1 && len - 1 < j1) { /* a round may reach past a short split */
            kc[u] = __ldcg((const uint4 *)(K + (size_t)(len - 1) * HD));
            vc[u] = __ldcg((const uint4 *)(V + (size_t)(len - 1) * HD));
        }
    float qf[8];
    v2_unpack8(*(const uint4 *)(q + (size_t)b * D + h * HD + li * 8), qf);
    /* The gate of dim t is loaded now (used only by the merge): its latency hides behind the keys' arithmetic
     * instead of following the merge. */
    const bool may_merge = CLUSTER ? bx == 0 : true;
    uint16_t graw = 0;
    if (may_merge && t < HD) graw = gqkv[(size_t)b * 4 * D + h * HD + t];
    float *part = s_part; /* where this block's partials go */
    if (CLUSTER) {
        v2_cluster_wait_acquire(); /* every block of the cluster has started: its shared memory exists */
        part = v2_cluster_map(s_part, 0);
    }

    float m = -INFINITY, l = 0.0f, acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.0f;
    for (;;) {
        /* the round after this one: the next of this split, else the first of the next split */
        int rn = r0 + KR, sn = s, jn0 = j0, jn1 = j1;
        if (rn >= j1) {
            sn = s + 1;
            jn0 = sn * chunk;
            jn1 = sn < s1 ? min(len, jn0 + chunk) : jn0; /* past the block's splits: load nothing */
            rn = jn0;
        }
        uint4 kn[V2_KPT], vn[V2_KPT];
        v2_load<HD, GROUPS>(K, V, rn, g, jn1, -1, kn, vn); /* in flight while this round computes */
        float sc[V2_KPT], smax = -INFINITY;
#pragma unroll
        for (int u = 0; u < V2_KPT; u++) {
            float kf[8], p = 0.0f;
            v2_unpack8(kc[u], kf);
#pragma unroll
            for (int i = 0; i < 8; i++) p += qf[i] * kf[i];
#pragma unroll
            for (int o = LPK / 2; o > 0; o >>= 1) p += __shfl_xor_sync(0xffffffffu, p, o);
            sc[u] = r0 + u * GROUPS + g < j1 ? p * scale : -INFINITY;
            smax = fmaxf(smax, sc[u]);
        }
        float m_new = fmaxf(m, smax);
        if (m_new != -INFINITY) { /* this group had a key in this round */
            float alpha = expf(m - m_new);
            l *= alpha;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[i] *= alpha;
#pragma unroll
            for (int u = 0; u < V2_KPT; u++) {
                float p = expf(sc[u] - m_new), vf[8];
                v2_unpack8(vc[u], vf);
                l += p;
#pragma unroll
                for (int i = 0; i < 8; i++) acc[i] += p * vf[i];
            }
            m = m_new;
        }
#pragma unroll
        for (int u = 0; u < V2_KPT; u++) {
            kc[u] = kn[u];
            vc[u] = vn[u];
        }
        if (sn != s) {
            /* Split s is done: merge its key groups (fixed group order) into partial s. */
            if (li == 0) {
                s_m[g] = m;
                s_l[g] = l;
            }
#pragma unroll
            for (int i = 0; i < 8; i++) s_grp[g * HD + li * 8 + i] = acc[i];
            __syncthreads();
            float M = -INFINITY, L = 0.0f, a = 0.0f;
            for (int k = 0; k < GROUPS; k++) M = fmaxf(M, s_m[k]);
            if (t < HD)
                for (int k = 0; k < GROUPS; k++) {
                    if (s_m[k] == -INFINITY) continue;
                    float w = expf(s_m[k] - M);
                    L += s_l[k] * w;
                    a += s_grp[k * HD + t] * w;
                }
            if (t < HD) part[(size_t)s * PW + 4 + t] = a;
            if (t == 0) {
                part[(size_t)s * PW] = M;
                part[(size_t)s * PW + 1] = L;
                part[(size_t)s * PW + 2] = 0.0f;
                part[(size_t)s * PW + 3] = 0.0f;
            }
            __syncthreads(); /* s_m / s_grp are rewritten by the next split */
            if (sn >= s1) break;
            m = -INFINITY;
            l = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; i++) acc[i] = 0.0f;
            s = sn;
            j0 = jn0;
            j1 = jn1;
        }
        r0 = rn;
    }

    if (CLUSTER) { /* every block of the cluster takes part, idle ones included (above) */
        v2_cluster_arrive_release(); /* phase 1: this block's partials are in block 0's shared memory */
        v2_cluster_wait_acquire();   /* every block waits, so none exits while the barrier still counts it */
        if (bx != 0) return;
    } else if (s0 != 0 || s1 != ns) {
        /* The row's splits span blocks: partials through `work`; the last block of this (row, head) to finish
         * merges them all. It resets the counter, so it is zero again for the next layer and step. */
        float *wrow = work + ((size_t)b * H + h) * nsplit * PW;
        const int v0 = s0 * PW / 4, v1 = s1 * PW / 4;
        for (int v = v0 + t; v < v1; v += V2_THREADS) ((float4 *)wrow)[v] = ((const float4 *)s_part)[v];
        v2_fence_acq_rel_gpu(); /* release: these partials before the counter (fence-fence with the merger's) */
        __syncthreads();
        const int nblk = (ns + spb - 1) / spb;
        if (t == 0) {
            int prev = atomicAdd(&counters[b * H + h], 1);
            s_last = prev == nblk - 1;
            if (s_last) counters[b * H + h] = 0;
        }
        __syncthreads();
        if (!s_last) return;
        v2_fence_acq_rel_gpu(); /* acquire: the other blocks' partials after their counter increments */
        /* the other blocks' partials into shared memory, bypassing L1 (other blocks wrote them) */
        const int nv = ns * PW / 4;
        for (int v = t; v < nv; v += V2_THREADS)
            if (v < v0 || v >= v1) ((float4 *)s_part)[v] = __ldcg((const float4 *)wrow + v);
        __syncthreads();
    }
    if (t >= HD) return;
    float M = -INFINITY, L = 0.0f, a = 0.0f;
    for (int k = 0; k < ns; k++) M = fmaxf(M, s_part[k * PW]);
    for (int k = 0; k < ns; k++) { /* split order: the same sum whichever block computed which split */
        float w = expf(s_part[k * PW] - M);
        L += s_part[k * PW + 1] * w;
        a += s_part[k * PW + 4 + t] * w;
    }
    const float sg = rbf(1.0f / (1.0f + expf(-bf2f(graw))));
    y[(size_t)b * D + h * HD + t] = f2bf(sg * rbf(a / L));
}

static size_t v2_work_floats(int B, int H, int hd, int max_ctx) {
    return (size_t)B * H * v2_nsplit(H, max_ctx, FK_ATTND_SPLIT) * (hd + 4); /* the most splits of any mode */
}

static void v2_set_impl(int impl, int spb) {
    v2_impl = impl;
    v2_spb = spb;
    v2_env = 1; /* an explicit choice overrides FRIGG_ATTN_DECODE */
}

/* FRIGG_ATTN_DECODE = split | cluster, optionally ":N" (N splits per block, 1..32; absent = by batch size). */
static void v2_read_env(void) {
    v2_env = 1;
    const char *env = getenv("FRIGG_ATTN_DECODE");
    if (!env || !*env) return;
    const char *colon = strchr(env, ':');
    size_t n = colon ? (size_t)(colon - env) : strlen(env);
    int spb = 0;
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end || v < 1 || v > V2_MAX_SPLITS) spb = -1;
        else spb = (int)v;
    }
    if (spb >= 0 && n == 5 && !strncmp(env, "split", 5)) v2_impl = FK_ATTND_SPLIT;
    else if (spb >= 0 && n == 7 && !strncmp(env, "cluster", 7)) v2_impl = FK_ATTND_CLUSTER;
    else {
        v2_env = -1;
        return;
    }
    v2_spb = spb;
}

/* Splits per block when not fixed: the fewest that keep B*H*blocks within about V2_WAVE_BLOCKS blocks per
 * SM (one wave), so batch 1 keeps one split per block and batch 8 streams several per block. */
static int v2_auto_spb(int B, int H, int nsplit) {
    static int sms = 0;
    if (!sms) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1)
            sms = 132;
    }
    long long target = (long long)sms * V2_WAVE_BLOCKS;
    for (int spb = 1; spb < nsplit; spb++)
        if ((long long)B * H * ((nsplit + spb - 1) / spb) <= target) return spb;
    return nsplit;
}

template <int HD>
static int v2_launch(int impl, int spb, dim3 grid, cudaStream_t s, const uint16_t *q, const uint16_t *k_slot,
                      const uint16_t *v_slot, long long seq_stride, const int32_t *row_seq, const int32_t *row_pos, int H,
                      int max_ctx, int nsplit, float scale, float *work, int *counters, const uint16_t *gqkv,
                      uint16_t *y) {
    if (impl == FK_ATTND_SPLIT) {
        fk_launch(v2_attn_decode_kernel<HD, false>, grid, V2_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos,
                  H, max_ctx, nsplit, spb, scale, work, counters, gqkv, y);
        return 0;
    }
    void (*kern)(const uint16_t *, const uint16_t *, const uint16_t *, long long, const int32_t *, const int32_t *, int,
                 int, int, int, float, float *, int *, const uint16_t *, uint16_t *) = v2_attn_decode_kernel<HD, true>;
    static int nonportable_set = 0; /* per instantiation; set at the first cluster launch above 8 blocks */
    if (grid.x > 8 && !nonportable_set) { /* clusters above 8 blocks are "non-portable": allowed per kernel */
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        nonportable_set = e == cudaSuccess;
        if (e != cudaSuccess) {
            frigg_set_error("attn_decode: cluster of %u blocks: %s", grid.x, cudaGetErrorString(e));
            return -1;
        }
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = grid.x;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = V2_THREADS;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = fk_pdl ? 2 : 1;
    cudaError_t e = cudaLaunchKernelEx(&cfg, kern, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit,
                                       spb, scale, work, counters, gqkv, y);
    if (e != cudaSuccess) {
        frigg_set_error("attn_decode: cluster launch of %u blocks: %s", grid.x, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

static int v2_attn_decode(const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot, long long seq_stride,
                              const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H,
                              int hd, int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s) {
    if (v2_env == 0) v2_read_env();
    if (v2_env < 0) {
        frigg_set_error("FRIGG_ATTN_DECODE must be split or cluster, optionally :N with N splits per block (1..%d), "
                        "not '%s'", V2_MAX_SPLITS, getenv("FRIGG_ATTN_DECODE"));
        return -1;
    }
    if (B < 1 || H < 1 || max_ctx < 1) {
        frigg_set_error("attn_decode: bad shape B=%d H=%d max_ctx=%d", B, H, max_ctx);
        return -1;
    }
    if (v2_impl != FK_ATTND_SPLIT && v2_impl != FK_ATTND_CLUSTER) {
        frigg_set_error("attn_decode: unknown implementation %d", v2_impl);
        return -1;
    }
    if (v2_impl == FK_ATTND_CLUSTER && !fk_pdl) { /* no sm_90: no clusters either */
        frigg_set_error("attn_decode: the cluster merge needs an sm_90 device");
        return -1;
    }
    if (v2_spb < 0 || v2_spb > V2_MAX_SPLITS) {
        frigg_set_error("attn_decode: %d splits per block (0 = by batch size, else 1..%d)", v2_spb, V2_MAX_SPLITS);
        return -1;
    }
    int nsplit = v2_nsplit(H, max_ctx, v2_impl);
    int spb = v2_spb ? v2_spb : v2_auto_spb(B, H, nsplit);
    if (spb > nsplit) spb = nsplit;
    dim3 grid((nsplit + spb - 1) / spb, H, B);
    float scale = (float)(1.0 / sqrt((double)hd));
    int rc;
    switch (hd) {
    case 16: rc = v2_launch<16>(v2_impl, spb, grid, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 32: rc = v2_launch<32>(v2_impl, spb, grid, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 64: rc = v2_launch<64>(v2_impl, spb, grid, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 128: rc = v2_launch<128>(v2_impl, spb, grid, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    default:
        frigg_set_error("attention: head_dim %d is not supported by the CUDA backend (16, 32, 64 or 128)", hd);
        return -1;
    }
    if (rc) return rc;
    return fk_check_launch("v2 attn_decode");
}

/* ---------------- the benchmark ---------------- */
typedef int (*decode_fn)(const uint16_t *, const uint16_t *, const uint16_t *, long long, const int32_t *,
                         const int32_t *, const uint16_t *, int, int, int, int, float *, int *, uint16_t *,
                         cudaStream_t);
#define ATTND_AUTO FK_ATTND_AUTO /* the default merge mode */
/* The current kernel in each merge mode and splits-per-block setting (0 = its batch-size policy), L2 prefetch
 * (rounds ahead, 0 = none) and launch bounds (blocks per SM). */
#define CUR_VERSION(fname, impl, spb, pf, minb)                                                                      \
    static int fname(const uint16_t *q, const uint16_t *k, const uint16_t *v, long long ss, const int32_t *rs,       \
                     const int32_t *rp, const uint16_t *g, int B, int H, int hd, int mc, float *w, int *c, uint16_t *y, \
                     cudaStream_t s) {                                                                                 \
        fk_set_attn_decode_impl(impl, spb);                                                                            \
        fk_set_attn_decode_tuning(pf, minb);                                                                           \
        return fk_attn_decode(q, k, v, ss, rs, rp, g, B, H, hd, mc, w, c, y, s);                                       \
    }
CUR_VERSION(split_auto, FK_ATTND_SPLIT, 0, 0, 4)
CUR_VERSION(split_1, FK_ATTND_SPLIT, 1, 0, 4)
CUR_VERSION(split_2, FK_ATTND_SPLIT, 2, 0, 4)
CUR_VERSION(split_4, FK_ATTND_SPLIT, 4, 0, 4)
CUR_VERSION(split_8, FK_ATTND_SPLIT, 8, 0, 4)
CUR_VERSION(split_auto_pf1, FK_ATTND_SPLIT, 0, 1, 4)
CUR_VERSION(split_auto_pf2, FK_ATTND_SPLIT, 0, 2, 4)
CUR_VERSION(split_auto_pf4, FK_ATTND_SPLIT, 0, 4, 4)
CUR_VERSION(split_auto_5, FK_ATTND_SPLIT, 0, 0, 5)
CUR_VERSION(split_auto_3, FK_ATTND_SPLIT, 0, 0, 3)
CUR_VERSION(split_auto_3_pf2, FK_ATTND_SPLIT, 0, 2, 3)
CUR_VERSION(cluster_auto, FK_ATTND_CLUSTER, 0, 0, 4)
CUR_VERSION(cluster_1, FK_ATTND_CLUSTER, 1, 0, 4)
CUR_VERSION(cluster_4, FK_ATTND_CLUSTER, 4, 0, 4)
CUR_VERSION(cluster_auto_pf1, FK_ATTND_CLUSTER, 0, 1, 4)
CUR_VERSION(cluster_auto_3, FK_ATTND_CLUSTER, 0, 0, 3)
CUR_VERSION(defaults, ATTND_AUTO, 0, 0, 0)
/* v2 in each merge mode with its own batch-size policy */
#define V2_VERSION(fname, impl)                                                                                        \
    static int fname(const uint16_t *q, const uint16_t *k, const uint16_t *v, long long ss, const int32_t *rs,       \
                     const int32_t *rp, const uint16_t *g, int B, int H, int hd, int mc, float *w, int *c, uint16_t *y, \
                     cudaStream_t s) {                                                                                 \
        v2_set_impl(impl, 0);                                                                                          \
        return v2_attn_decode(q, k, v, ss, rs, rp, g, B, H, hd, mc, w, c, y, s);                                       \
    }
V2_VERSION(v2_split, FK_ATTND_SPLIT)
V2_VERSION(v2_cluster, FK_ATTND_CLUSTER)

/* family: the merge mode (0 split, 1 cluster, 2 the one "auto" picks on this device; -1: v1, compared with the
 * reference only); ref: the version of its family every other one must equal bit for bit (listed before them).
 * "split" and "cluster" with no suffix are compiled for 4 blocks per SM (the pre-auto default); "auto" is
 * every default: merge mode and launch bounds as fk_attn_decode picks them. */
static const struct {
    const char *name;
    size_t (*work_floats)(int, int, int, int);
    decode_fn run;
    int family, ref;
} versions[] = {{"v1", v1_work_floats, v1_attn_decode, -1, 0},
                {"v2:split", v2_work_floats, v2_split, 0, 1},
                {"v2:clust", v2_work_floats, v2_cluster, 1, 1},
                {"split", fk_attn_decode_work_floats, split_auto, 0, 0},
                {"split:1", fk_attn_decode_work_floats, split_1, 0, 0},
                {"split:2", fk_attn_decode_work_floats, split_2, 0, 0},
                {"split:4", fk_attn_decode_work_floats, split_4, 0, 0},
                {"split:8", fk_attn_decode_work_floats, split_8, 0, 0},
                {"split+pf1", fk_attn_decode_work_floats, split_auto_pf1, 0, 0},
                {"split+pf2", fk_attn_decode_work_floats, split_auto_pf2, 0, 0},
                {"split+pf4", fk_attn_decode_work_floats, split_auto_pf4, 0, 0},
                {"split/5", fk_attn_decode_work_floats, split_auto_5, 0, 0},
                {"split/3", fk_attn_decode_work_floats, split_auto_3, 0, 0},
                {"split/3+pf2", fk_attn_decode_work_floats, split_auto_3_pf2, 0, 0},
                {"cluster", fk_attn_decode_work_floats, cluster_auto, 1, 0},
                {"cluster:1", fk_attn_decode_work_floats, cluster_1, 1, 0},
                {"cluster:4", fk_attn_decode_work_floats, cluster_4, 1, 0},
                {"clust+pf1", fk_attn_decode_work_floats, cluster_auto_pf1, 1, 0},
                {"cluster/3", fk_attn_decode_work_floats, cluster_auto_3, 1, 0},
                {"auto", fk_attn_decode_work_floats, defaults, 2, 0}};
enum { NVER = 20 };
static_assert(sizeof versions / sizeof versions[0] == NVER, "NVER counts versions[]");

enum { H = 12, HD = 128, D = H * HD, LAYERS = 128, MAXB = 8, MAXCTX = 4096 };


static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
static void fill_bf16(uint16_t *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frigg_f32_to_bf16(frand() * scale);
}

/* Random bf16 in [-scale, scale) from a hash of the index: fills the 128 timing slots (tens of GB) on the
 * device. The values only have to be ordinary numbers; their exact values do not affect the time. */
__global__ void fill_hash(uint16_t *x, size_t n, uint32_t seed, float scale) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(i >> 32) ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        float u = (float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f;
        x[i] = f2bf(u * scale);
    }
}

static int skip_version(int v, int no_cluster) { return no_cluster && versions[v].family >= 1; } /* auto may be cluster */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int quick = 0, fixed_max_ctx = 0, no_cluster = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--no-cluster"))
            no_cluster = 1;
        else if (!strcmp(argv[i], "--max-ctx") && i + 1 < argc)
            fixed_max_ctx = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--max-ctx N] [--no-cluster]\n", argv[0]);
            return 2;
        }
    }
    if (fixed_max_ctx && (fixed_max_ctx < 4096 || fixed_max_ctx > MAXCTX)) {
        fprintf(stderr, "--max-ctx: only %d (at least the largest shape's ctx, at most what the slots hold)\n", MAXCTX);
        return 2;
    }
    if (fk_init() != 0) {
        fprintf(stderr, "fk_init: %s\n", frigg_error());
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs; H=%d head_dim=%d, %d launches per graph over %d K/V slots\n", prop.name,
           prop.multiProcessorCount, H, HD, LAYERS, LAYERS);
    fk_set_attn_decode_impl(ATTND_AUTO, 0);
    printf("auto merge mode on this device: %s\n", fk_get_attn_decode_impl() == FK_ATTND_CLUSTER ? "cluster" : "split");
    static const int Bs[] = {1, 2, 4, 8}, ctxs[] = {128, 512, 2048, 4096};
    const int nB = 4, nC = 4, replays = quick ? 5 : 11, warm = 2;

    /* Device buffers: 128 slots of [MAXB seqs][H][max_ctx][HD] for K and V (the layout any max_ctx <= MAXCTX
     * fits in), shared q / gate / y / work / counters like the engine's. */
    const size_t slot = (size_t)MAXB * H * MAXCTX * HD;
    uint16_t *kc, *vc, *dq, *dg, *dy;
    CK(cudaMalloc((void **)&kc, slot * LAYERS * 2));
    CK(cudaMalloc((void **)&vc, slot * LAYERS * 2));
    fill_hash<<<4096, 256>>>(kc, slot * LAYERS, 1u, 2.0f);
    fill_hash<<<4096, 256>>>(vc, slot * LAYERS, 2u, 1.0f);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMalloc((void **)&dq, (size_t)MAXB * D * 2));
    CK(cudaMalloc((void **)&dg, (size_t)MAXB * 4 * D * 2));
    CK(cudaMalloc((void **)&dy, (size_t)MAXB * D * 2));
    size_t wf = 0;
    for (int v = 0; v < NVER; v++) {
        size_t f = versions[v].work_floats(MAXB, H, HD, MAXCTX);
        if (f > wf) wf = f;
    }
    float *work;
    int *counters;
    int32_t *dseq, *dpos, seqh[MAXB], posh[MAXB];
    CK(cudaMalloc((void **)&work, wf * 4));
    CK(cudaMalloc((void **)&counters, (size_t)MAXB * H * 4));
    CK(cudaMemset(counters, 0, (size_t)MAXB * H * 4));
    CK(cudaMalloc((void **)&dseq, sizeof seqh));
    CK(cudaMalloc((void **)&dpos, sizeof posh));
    for (int b = 0; b < MAXB; b++) seqh[b] = b;
    CK(cudaMemcpy(dseq, seqh, sizeof seqh, cudaMemcpyHostToDevice));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));

    uint16_t *hk = (uint16_t *)malloc(slot * 2), *hv = (uint16_t *)malloc(slot * 2), *hq = (uint16_t *)malloc((size_t)MAXB * D * 2);
    uint16_t *hg = (uint16_t *)malloc((size_t)MAXB * 4 * D * 2), *hy = (uint16_t *)malloc((size_t)MAXB * D * 2);
    float *ref = (float *)malloc(sizeof(float) * MAXB * D), *got = (float *)malloc(sizeof(float) * MAXB * D);
    float us[NVER][4][4], gbs[NVER][4][4];
    static uint16_t fam_y[2][MAXB * D];
    int fails = 0;
    for (int bi = 0; bi < nB; bi++)
        for (int ci = 0; ci < nC; ci++) {
            int B = Bs[bi], ctx = ctxs[ci], max_ctx = fixed_max_ctx ? fixed_max_ctx : ctx;
            long long seq_stride = (long long)H * max_ctx * HD;
            /* correctness, on slot 0 (rewritten with host data; the timing below does not depend on values) */
            fill_bf16(hk, (size_t)B * seq_stride, 2.0f);
            fill_bf16(hv, (size_t)B * seq_stride, 1.0f);
            fill_bf16(hq, (size_t)B * D, 2.0f);
            fill_bf16(hg, (size_t)B * 4 * D, 3.0f);
            for (int b = 0; b < B; b++) posh[b] = ctx - 1 - 37 * b > 0 ? ctx - 1 - 37 * b : b;
            CK(cudaMemcpy(kc, hk, (size_t)B * seq_stride * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(vc, hv, (size_t)B * seq_stride * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dq, hq, (size_t)B * D * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dg, hg, (size_t)B * 4 * D * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dpos, posh, sizeof posh, cudaMemcpyHostToDevice));
            CK(cudaDeviceSynchronize());
            attn_decode_ref(hq, hk, hv, seq_stride, seqh, posh, hg, B, H, HD, max_ctx, ref);
            int fam_have[2] = {0, 0}, launch_failed[NVER] = {0};
            for (int v = 0; v < NVER; v++) {
                if (skip_version(v, no_cluster)) continue;
                CK(cudaMemset(dy, 0xff, (size_t)MAXB * D * 2)); /* NaN: an output not written fails */
                int rc = 0;
                for (int rep = 0; rep < 2 && rc == 0; rep++)
                    rc = versions[v].run(dq, kc, vc, seq_stride, dseq, dpos, dg, B, H, HD, max_ctx, work, counters, dy, st);
                CK(cudaStreamSynchronize(st));
                CK(cudaMemcpy(hy, dy, (size_t)B * D * 2, cudaMemcpyDeviceToHost));
                for (int i = 0; i < B * D; i++) got[i] = frigg_bf16_to_f32(hy[i]);
                size_t off = 0, bad = 0;
                double worst = 0;
                int ok = rc == 0 && attn_decode_close(got, ref, (size_t)B * D, 0.02, &off, &bad, &worst);
                /* the current kernel must equal v2 of its merge mode bit for bit */
                int fam = versions[v].family, same = 1;
                if (fam == 2) fam = fk_get_attn_decode_impl() == FK_ATTND_CLUSTER; /* (run just above) */
                if (fam >= 0 && rc == 0) {
                    if (versions[v].ref) {
                        memcpy(fam_y[fam], hy, (size_t)B * D * 2);
                        fam_have[fam] = 1;
                    } else
                        same = fam_have[fam] && !memcmp(fam_y[fam], hy, (size_t)B * D * 2);
                }
                fails += !ok;
                launch_failed[v] = rc != 0;
                printf("%s %-11s B=%d ctx=%-4d max_ctx=%-4d: %zu of %d differ, %zu beyond tolerance, worst |d| %.3g%s%s\n",
                       ok ? "PASS" : "FAIL", versions[v].name, B, ctx, max_ctx, off, B * D, bad, worst,
                       rc ? ", launch error: " : "", rc ? frigg_error() : "");
                if (fam >= 0 && !versions[v].ref) { /* its own line: the round-3 kernel moves no arithmetic */
                    same &= rc == 0;
                    fails += !same;
                    printf("%s bits %-11s B=%d ctx=%-4d: %s\n", same ? "PASS" : "FAIL", versions[v].name, B, ctx,
                           rc ? "launch failed" : same ? "bit-identical to v2 of its mode"
                              : fam_have[fam] ? "NOT bit-identical to v2 of its mode" : "v2 of its mode failed to run");
                }
            }
            /* timing: every row at position ctx-1 */
            for (int b = 0; b < B; b++) posh[b] = ctx - 1;
            CK(cudaMemcpy(dpos, posh, sizeof posh, cudaMemcpyHostToDevice));
            double bytes = (double)B * H * ctx * HD * 2 * 2 + (double)B * D * 2 * 3;
            for (int v = 0; v < NVER; v++) {
                us[v][bi][ci] = gbs[v][bi][ci] = 0;
                if (skip_version(v, no_cluster) || launch_failed[v]) continue; /* (failed above) */
                cudaGraph_t graph;
                cudaGraphExec_t exec;
                CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
                int rc = 0;
                for (int l = 0; l < LAYERS && rc == 0; l++)
                    rc = versions[v].run(dq, kc + (size_t)l * slot, vc + (size_t)l * slot, seq_stride, dseq, dpos, dg, B, H,
                                         HD, max_ctx, work, counters, dy, st);
                cudaError_t ce = cudaStreamEndCapture(st, &graph);
                if (rc || ce != cudaSuccess) { /* a launch refused inside the capture invalidates it */
                    printf("FAIL %s B=%d ctx=%d: capture: %s\n", versions[v].name, B, ctx,
                           rc ? frigg_error() : cudaGetErrorString(ce));
                    fails++;
                    if (ce == cudaSuccess) CK(cudaGraphDestroy(graph));
                    (void)cudaGetLastError();
                    continue;
                }
                CK(cudaGraphInstantiate(&exec, graph, 0));
                float t[16];
                for (int r = 0; r < warm + replays; r++) {
                    CK(cudaEventRecord(e0, st));
                    CK(cudaGraphLaunch(exec, st));
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    if (r >= warm) CK(cudaEventElapsedTime(&t[r - warm], e0, e1));
                }
                qsort(t, replays, sizeof t[0], cmp_float);
                float per = t[replays / 2] * 1000.0f / LAYERS;
                us[v][bi][ci] = per;
                gbs[v][bi][ci] = (float)(bytes / (per * 1e-6) / 1e9);
                printf("time %-11s B=%d ctx=%-4d max_ctx=%-4d: %8.2f us/launch %8.1f GB/s (median of %d graphs of %d)\n",
                       versions[v].name, B, ctx, max_ctx, per, gbs[v][bi][ci], replays, LAYERS);
                CK(cudaGraphExecDestroy(exec));
                CK(cudaGraphDestroy(graph));
            }
        }
    /* µs per launch; the fastest version of each shape and its speed-up over v1 */
    printf("\n| B | ctx | max_ctx |");
    for (int v = 0; v < NVER; v++) printf(" %s |", versions[v].name);
    printf(" best | best GB/s | v2:split/best | v2:split/auto |\n|---|---|---|");
    for (int v = 0; v < NVER; v++) printf("---|");
    printf("---|---|---|---|\n");
    for (int bi = 0; bi < nB; bi++)
        for (int ci = 0; ci < nC; ci++) {
            printf("| %d | %d | %d |", Bs[bi], ctxs[ci], fixed_max_ctx ? fixed_max_ctx : ctxs[ci]);
            int best = -1;
            for (int v = 0; v < NVER; v++) {
                printf(" %.2f |", us[v][bi][ci]);
                if (us[v][bi][ci] > 0 && (best < 0 || us[v][bi][ci] < us[best][bi][ci])) best = v;
            }
            if (best < 0)
                printf(" - | - | - | - |\n");
            else
                printf(" %s | %.0f | %.2fx | %.2fx |\n", versions[best].name, gbs[best][bi][ci],
                       us[1][bi][ci] > 0 ? us[1][bi][ci] / us[best][bi][ci] : 0.0,
                       us[1][bi][ci] > 0 && us[NVER - 1][bi][ci] > 0 ? us[1][bi][ci] / us[NVER - 1][bi][ci] : 0.0);
        }
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("FAIL device error: %s\n", cudaGetErrorString(e));
        fails++;
    }
    printf("%s: %d failed\n", fails ? "FAIL" : "PASS", fails);
    free(hk); free(hv); free(hq); free(hg); free(hy); free(ref); free(got);
    return fails ? 1 : 0;
}
