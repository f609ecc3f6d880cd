/* attention_decode.cu — decode attention: one new query row per batch row against the slot's cached keys,
 * split-K over the keys (flash-decoding), the split partials merged in split order with the output gate
 * y = bf16(bf16(sigmoid(g)) * bf16(o)) fused into the merge. Scores and softmax are fp32 like the CPU engine.
 *
 * Why it is shaped this way (batch 1 at ctx 512 moves only 3 MB, so latency, not bandwidth, decides):
 * - A key is read by HD/8 lanes with one 16-byte load each (16 lanes for head_dim 128), so a score costs
 *   log2(HD/8) shuffles and a warp load covers whole keys.
 * - A block issues the K and V loads of a round before it uses any of them, and the next round's loads
 *   before it computes the current one.
 * - Keys before the row's newest position were written by earlier decode steps or prefill, not by the
 *   kernel in front of this one, so the first round is loaded BEFORE the programmatic-launch wait and its
 *   DRAM latency overlaps the previous kernel's tail; the newest key, q and the gate (all written by
 *   fk_gemv_qkv just before) are read right after the wait, the gate early so the merge does not wait on it.
 * - The split boundaries of a row are a function of its length, H and max_ctx alone (at most `nsplit`
 *   splits of at least DEC_MIN_KEYS keys), and every split's partial (m, l, acc) is computed by the same code
 *   and merged with the others in split order, so a row's arithmetic does not depend on the batch it is in
 *   (batched decode stays bit-identical to single-row decode).
 * - Which BLOCK computes a split may depend on the batch: a block takes `spb` consecutive splits of its row
 *   (one after the other, loads of the next split in flight while it computes the current). At batch 1 one
 *   split per block spreads 3 MB over the SMs; at batch 8 (1536 splits at ctx 512, but only ~5 blocks of 96
 *   registers fit an SM) several splits per block make one wave of blocks instead of three, each with loads
 *   in flight all the time, and fewer partials to exchange.
 * - Two ways to merge the partials of a (row, head) (fk_set_attn_decode_impl, FRIGG_ATTN_DECODE):
 *   "split": partials of other blocks go through `work`, the last block to finish (atomic counter) merges;
 *     a block that holds all splits of its row merges from shared memory with no global round trip.
 *   "cluster": the blocks of a (row, head) form one thread-block cluster; each writes its partials straight
 *     into the shared memory of the cluster's first block (distributed shared memory), one cluster barrier,
 *     and that block merges: no global partials, fence, atomic or L2 reload on the critical path. A cluster
 *     holds at most DEC_MAX_CLUSTER blocks, so this mode caps the splits per row at DEC_MAX_CLUSTER. */
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "kernels.h"

#define DEC_THREADS 128      /* threads per block */
#define DEC_KPT 4            /* keys each key group holds per round */
#define DEC_MIN_KEYS 32      /* fewest keys per split: below this a split's fixed costs dominate */
#define DEC_MAX_SPLITS 32    /* most splits per (row, head); bounds the merge's shared memory */
#define DEC_SPLIT_BLOCKS 256 /* splits * heads aimed at: about two blocks per SM of a 132-SM H200 at batch 1 */
#define DEC_MAX_CLUSTER 16   /* most blocks per cluster (16 needs the non-portable cluster size attribute) */
#define DEC_WAVE_BLOCKS 4    /* auto spb: blocks per SM aimed at (5 fit at 96 registers: launch bounds) */

/* dec_env: 0 = FRIGG_ATTN_DECODE not read yet, 1 = read (or overridden), -1 = it is invalid (every call fails) */
static int dec_impl = FK_ATTND_SPLIT, dec_spb = 0, dec_env = 0;

/* Splits per (row, head) at most: depends on H, max_ctx and the merge mode only (never on B), so every batch
 * size lays a row's keys out the same way. */
static int dec_nsplit(int H, int max_ctx, int impl) {
    int s = (DEC_SPLIT_BLOCKS + H - 1) / H;
    int cap = (max_ctx + DEC_MIN_KEYS - 1) / DEC_MIN_KEYS;
    int most = impl == FK_ATTND_CLUSTER ? DEC_MAX_CLUSTER : DEC_MAX_SPLITS;
    if (s > most) s = most;
    if (s > cap) s = cap;
    return s < 1 ? 1 : s;
}

/* A row of `len` keys: `ns` splits of `chunk` keys (the last one shorter), at most nsplit of them. */
__device__ __forceinline__ void dec_split(int len, int nsplit, int &chunk, int &ns) {
    int want = (len + DEC_MIN_KEYS - 1) / DEC_MIN_KEYS;
    if (want > nsplit) want = nsplit;
    chunk = (len + want - 1) / want;
    ns = (len + chunk - 1) / chunk;
}

/* K and V of keys r0 + u*GROUPS + g (u < DEC_KPT) for this lane's 8 dims; zeros past j1 (no load). Keys of
 * a warp are adjacent in memory, so each warp load is whole contiguous rows. Streaming loads: each key is
 * read once per step, and 128 layers' caches do not fit L2 anyway. */
template <int HD, int GROUPS>
__device__ __forceinline__ void dec_load(const uint16_t *K, const uint16_t *V, int r0, int g, int j1, int skip,
                                         uint4 (&kb)[DEC_KPT], uint4 (&vb)[DEC_KPT]) {
#pragma unroll
    for (int u = 0; u < DEC_KPT; u++) {
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

__device__ __forceinline__ void unpack8(uint4 w, float (&f)[8]) {
    f[0] = bf_lo(w.x); f[1] = bf_hi(w.x); f[2] = bf_lo(w.y); f[3] = bf_hi(w.y);
    f[4] = bf_lo(w.z); f[5] = bf_hi(w.z); f[6] = bf_lo(w.w); f[7] = bf_hi(w.w);
}

/* The gpu-scope acquire-release fence: what the partials/counter handshake needs, lighter than the
 * sequentially consistent fence of __threadfence(). */
__device__ __forceinline__ void fence_acq_rel_gpu(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
    __threadfence();
#endif
}

/* Cluster barrier halves (sm_90): arrive early, wait late, so the barrier's latency hides behind other work. */
__device__ __forceinline__ void cluster_arrive_relaxed(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_arrive_release(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait_acquire(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#endif
}
/* The address of `p` (this block's shared memory) in block `rank` of the cluster, as a generic pointer. */
__device__ __forceinline__ float *cluster_map(float *p, unsigned rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint64_t r;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"((uint64_t)p), "r"(rank));
    return (float *)r;
#else
    (void)rank;
    return p;
#endif
}

/* grid (nblk, H, B), DEC_THREADS threads; block x of (row b, head h) computes splits [x*spb, x*spb + spb) of
 * the row (those that exist). A partial of split s: [m, l, 0, 0, acc[HD]] (HD + 4 floats, so each starts
 * 16-byte aligned), in shared memory s_part[s] of the merging block and, in "split" mode when the row's splits
 * span blocks, in work[(b, h)][s]. CLUSTER: launched with cluster dims (nblk, 1, 1), so the block's rank in its
 * cluster is blockIdx.x. */
template <int HD, bool CLUSTER>
__global__ void __launch_bounds__(DEC_THREADS, 5)
    attn_decode_kernel(const uint16_t *__restrict__ q, const uint16_t *__restrict__ k_slot,
                       const uint16_t *__restrict__ v_slot, long long seq_stride, const int32_t *row_seq,
                       const int32_t *row_pos, int H, int max_ctx, int nsplit, int spb, float scale, float *work,
                       int *counters, const uint16_t *__restrict__ gqkv, uint16_t *__restrict__ y) {
    constexpr int LPK = HD / 8;                /* lanes per key */
    constexpr int GROUPS = DEC_THREADS / LPK;  /* keys per block load */
    constexpr int KR = GROUPS * DEC_KPT;       /* keys per round */
    constexpr int PW = HD + 4;                 /* floats per partial */
    constexpr int MAXS = CLUSTER ? DEC_MAX_CLUSTER : DEC_MAX_SPLITS;
    __shared__ float s_m[GROUPS], s_l[GROUPS];
    __shared__ __align__(16) float s_grp[GROUPS * HD]; /* the key groups' accumulators of the current split */
    __shared__ __align__(16) float s_part[MAXS * PW];  /* split partials (the merging block's are read) */
    __shared__ int s_last;
    const int bx = blockIdx.x, h = blockIdx.y, b = blockIdx.z, D = H * HD, t = threadIdx.x;
    if (CLUSTER) cluster_arrive_relaxed(); /* phase 0: "this block has started" (remote writes need it) */
    /* row_seq/row_pos are set before the step starts (host copy), never by the kernel in front of this one. */
    const int len = row_pos[b] + 1;
    int chunk, ns;
    dec_split(len, nsplit, chunk, ns);
    const int s0 = bx * spb, s1 = min(ns, s0 + spb);
    if (s0 >= ns) { /* no keys: nothing to wait for, nothing to write */
        if (CLUSTER) { /* still take part in both cluster barriers, so no barrier depends on exited blocks */
            pdl_launch();
            cluster_wait_acquire();
            cluster_arrive_release();
            cluster_wait_acquire();
        }
        return;
    }
    const int g = t / LPK, li = t % LPK;
    const size_t base = (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * HD + li * 8;
    const uint16_t *K = k_slot + base, *V = v_slot + base;

    int s = s0, j0 = s0 * chunk, j1 = min(len, j0 + chunk), r0 = j0;
    uint4 kc[DEC_KPT], vc[DEC_KPT];
    dec_load<HD, GROUPS>(K, V, r0, g, j1, len - 1, kc, vc); /* before the wait: all but the newest key */
    pdl_wait();
    pdl_launch();
#pragma unroll
    for (int u = 0; u < DEC_KPT; u++)
        if (r0 + u * GROUPS + g == len - 1 && len - 1 < j1) { /* a round may reach past a short split */
            kc[u] = __ldcg((const uint4 *)(K + (size_t)(len - 1) * HD));
            vc[u] = __ldcg((const uint4 *)(V + (size_t)(len - 1) * HD));
        }
    float qf[8];
    unpack8(*(const uint4 *)(q + (size_t)b * D + h * HD + li * 8), qf);
    /* The gate of dim t is loaded now (used only by the merge): its latency hides behind the keys' arithmetic
     * instead of following the merge. */
    const bool may_merge = CLUSTER ? bx == 0 : true;
    uint16_t graw = 0;
    if (may_merge && t < HD) graw = gqkv[(size_t)b * 4 * D + h * HD + t];
    float *part = s_part; /* where this block's partials go */
    if (CLUSTER) {
        cluster_wait_acquire(); /* every block of the cluster has started: its shared memory exists */
        part = cluster_map(s_part, 0);
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
        uint4 kn[DEC_KPT], vn[DEC_KPT];
        dec_load<HD, GROUPS>(K, V, rn, g, jn1, -1, kn, vn); /* in flight while this round computes */
        float sc[DEC_KPT], smax = -INFINITY;
#pragma unroll
        for (int u = 0; u < DEC_KPT; u++) {
            float kf[8], p = 0.0f;
            unpack8(kc[u], kf);
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
            for (int u = 0; u < DEC_KPT; u++) {
                float p = expf(sc[u] - m_new), vf[8];
                unpack8(vc[u], vf);
                l += p;
#pragma unroll
                for (int i = 0; i < 8; i++) acc[i] += p * vf[i];
            }
            m = m_new;
        }
#pragma unroll
        for (int u = 0; u < DEC_KPT; u++) {
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
        cluster_arrive_release(); /* phase 1: this block's partials are in block 0's shared memory */
        cluster_wait_acquire();   /* every block waits, so none exits while the barrier still counts it */
        if (bx != 0) return;
    } else if (s0 != 0 || s1 != ns) {
        /* The row's splits span blocks: partials through `work`; the last block of this (row, head) to finish
         * merges them all. It resets the counter, so it is zero again for the next layer and step. */
        float *wrow = work + ((size_t)b * H + h) * nsplit * PW;
        const int v0 = s0 * PW / 4, v1 = s1 * PW / 4;
        for (int v = v0 + t; v < v1; v += DEC_THREADS) ((float4 *)wrow)[v] = ((const float4 *)s_part)[v];
        fence_acq_rel_gpu(); /* release: these partials before the counter (fence-fence with the merger's) */
        __syncthreads();
        const int nblk = (ns + spb - 1) / spb;
        if (t == 0) {
            int prev = atomicAdd(&counters[b * H + h], 1);
            s_last = prev == nblk - 1;
            if (s_last) counters[b * H + h] = 0;
        }
        __syncthreads();
        if (!s_last) return;
        fence_acq_rel_gpu(); /* acquire: the other blocks' partials after their counter increments */
        /* the other blocks' partials into shared memory, bypassing L1 (other blocks wrote them) */
        const int nv = ns * PW / 4;
        for (int v = t; v < nv; v += DEC_THREADS)
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

extern "C" size_t fk_attn_decode_work_floats(int B, int H, int hd, int max_ctx) {
    return (size_t)B * H * dec_nsplit(H, max_ctx, FK_ATTND_SPLIT) * (hd + 4); /* the most splits of any mode */
}

extern "C" void fk_set_attn_decode_impl(int impl, int spb) {
    dec_impl = impl;
    dec_spb = spb;
    dec_env = 1; /* an explicit choice overrides FRIGG_ATTN_DECODE */
}
extern "C" int fk_get_attn_decode_impl(void) { return dec_impl; }

/* FRIGG_ATTN_DECODE = split | cluster, optionally ":N" (N splits per block, 1..32; absent = by batch size). */
static void dec_read_env(void) {
    dec_env = 1;
    const char *env = getenv("FRIGG_ATTN_DECODE");
    if (!env || !*env) return;
    const char *colon = strchr(env, ':');
    size_t n = colon ? (size_t)(colon - env) : strlen(env);
    int spb = 0;
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end || v < 1 || v > DEC_MAX_SPLITS) spb = -1;
        else spb = (int)v;
    }
    if (spb >= 0 && n == 5 && !strncmp(env, "split", 5)) dec_impl = FK_ATTND_SPLIT;
    else if (spb >= 0 && n == 7 && !strncmp(env, "cluster", 7)) dec_impl = FK_ATTND_CLUSTER;
    else {
        dec_env = -1;
        return;
    }
    dec_spb = spb;
}

/* Splits per block when not fixed: the fewest that keep B*H*blocks within about DEC_WAVE_BLOCKS blocks per
 * SM (one wave), so batch 1 keeps one split per block and batch 8 streams several per block. */
static int dec_auto_spb(int B, int H, int nsplit) {
    static int sms = 0;
    if (!sms) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1)
            sms = 132;
    }
    long long target = (long long)sms * DEC_WAVE_BLOCKS;
    for (int spb = 1; spb < nsplit; spb++)
        if ((long long)B * H * ((nsplit + spb - 1) / spb) <= target) return spb;
    return nsplit;
}

template <int HD>
static int dec_launch(int impl, int spb, dim3 grid, cudaStream_t s, const uint16_t *q, const uint16_t *k_slot,
                      const uint16_t *v_slot, long long seq_stride, const int32_t *row_seq, const int32_t *row_pos, int H,
                      int max_ctx, int nsplit, float scale, float *work, int *counters, const uint16_t *gqkv,
                      uint16_t *y) {
    if (impl == FK_ATTND_SPLIT) {
        fk_launch(attn_decode_kernel<HD, false>, grid, DEC_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos,
                  H, max_ctx, nsplit, spb, scale, work, counters, gqkv, y);
        return 0;
    }
    void (*kern)(const uint16_t *, const uint16_t *, const uint16_t *, long long, const int32_t *, const int32_t *, int,
                 int, int, int, float, float *, int *, const uint16_t *, uint16_t *) = attn_decode_kernel<HD, true>;
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
    cfg.blockDim = DEC_THREADS;
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

extern "C" int fk_attn_decode(const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot, long long seq_stride,
                              const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H,
                              int hd, int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s) {
    if (dec_env == 0) dec_read_env();
    if (dec_env < 0) {
        frigg_set_error("FRIGG_ATTN_DECODE must be split or cluster, optionally :N with N splits per block (1..%d), "
                        "not '%s'", DEC_MAX_SPLITS, getenv("FRIGG_ATTN_DECODE"));
        return -1;
    }
    if (B < 1 || H < 1 || max_ctx < 1) {
        frigg_set_error("attn_decode: bad shape B=%d H=%d max_ctx=%d", B, H, max_ctx);
        return -1;
    }
    if (dec_impl != FK_ATTND_SPLIT && dec_impl != FK_ATTND_CLUSTER) {
        frigg_set_error("attn_decode: unknown implementation %d", dec_impl);
        return -1;
    }
    if (dec_impl == FK_ATTND_CLUSTER && !fk_pdl) { /* no sm_90: no clusters either */
        frigg_set_error("attn_decode: the cluster merge needs an sm_90 device");
        return -1;
    }
    if (dec_spb < 0 || dec_spb > DEC_MAX_SPLITS) {
        frigg_set_error("attn_decode: %d splits per block (0 = by batch size, else 1..%d)", dec_spb, DEC_MAX_SPLITS);
        return -1;
    }
    int nsplit = dec_nsplit(H, max_ctx, dec_impl);
    int spb = dec_spb ? dec_spb : dec_auto_spb(B, H, nsplit);
    if (spb > nsplit) spb = nsplit;
    dim3 grid((nsplit + spb - 1) / spb, H, B);
    float scale = (float)(1.0 / sqrt((double)hd));
    int rc;
    switch (hd) {
    case 16: rc = dec_launch<16>(dec_impl, spb, grid, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 32: rc = dec_launch<32>(dec_impl, spb, grid, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 64: rc = dec_launch<64>(dec_impl, spb, grid, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 128: rc = dec_launch<128>(dec_impl, spb, grid, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    default:
        frigg_set_error("attention: head_dim %d is not supported by the CUDA backend (16, 32, 64 or 128)", hd);
        return -1;
    }
    if (rc) return rc;
    return fk_check_launch("attn_decode");
}
