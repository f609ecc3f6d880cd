/* attn_decode_body.cuh — decode attention's per-block work, shared by the attention kernel
 * (attention_decode.cu: q, gate and the newest key read from global memory, written by fk_gemv_qkv) and the
 * fused batch-1 gqkv + attention kernel (qkv_attn.cu: the same three from the cluster's shared memory, where
 * the blocks that computed them put them). Both run exactly this arithmetic in this order, so their outputs
 * are the same bits (tests/test_cuda_qkv_attn.c). attention_decode.cu says why the work is shaped this way. */
#ifndef FRIGG_KERNELS_ATTN_DECODE_BODY_CUH
#define FRIGG_KERNELS_ATTN_DECODE_BODY_CUH

#include "common.cuh"

#define DEC_THREADS 128      /* threads per block */
#define DEC_KPT 4            /* keys each key group holds per round */
#define DEC_MIN_KEYS 32      /* fewest keys per split: below this a split's fixed costs dominate */
#define DEC_MAX_SPLITS 32    /* most splits per (row, head); bounds the merge's shared memory */
#define DEC_SPLIT_BLOCKS 256 /* splits * heads aimed at: about two blocks per SM of a 132-SM H200 at batch 1 */
#define DEC_MAX_CLUSTER 16   /* most blocks per cluster (16 needs the non-portable cluster size attribute) */
#define DEC_WAVE_BLOCKS 4    /* auto spb: blocks per SM aimed at (the launch bounds give 4 of <= 128 registers) */
#define DEC_PARK 4           /* splits whose key-group partials a block parks before one barrier merges them */


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

/* The round after (s, r, j1) among the block's splits [.., s1): the next of split s, else the first of split s + 1
 * (past s1: an empty round, j1 = r, so loading it loads nothing). Returns whether it moved to another split. */
template <int KR>
__device__ __forceinline__ bool dec_next_round(int &s, int &r, int &j1, int chunk, int len, int s1) {
    r += KR;
    if (r < j1) return false;
    s++;
    r = s * chunk;
    j1 = s < s1 ? min(len, r + chunk) : r;
    return true;
}

/* Ask L2 for the keys and values of round (first key r, split end j1): one bulk request each, K and V at the
 * head's first dim. A hint: the loads that use them come later, and nothing depends on whether L2 kept them. */
template <int HD, int KR>
__device__ __forceinline__ void dec_prefetch_round(const uint16_t *K, const uint16_t *V, int r, int j1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const int n = min(j1 - r, KR);
    if (n <= 0) return;
    const unsigned bytes = (unsigned)n * HD * 2; /* a multiple of 16: HD >= 16 */
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(K + (size_t)r * HD), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(V + (size_t)r * HD), "r"(bytes) : "memory");
#else
    (void)K; (void)V; (void)r; (void)j1;
#endif
}

/* The rounds `from`..`to` (1-based) after round (s, r, j1) of the block's splits, asked of L2. */
template <int HD, int KR>
__device__ __forceinline__ void dec_prefetch_ahead(const uint16_t *K, const uint16_t *V, int s, int r, int j1, int from,
                                                   int to, int chunk, int len, int s1) {
    for (int k = 1; k <= to && s < s1; k++) {
        dec_next_round<KR>(s, r, j1, chunk, len, s1);
        if (k >= from) dec_prefetch_round<HD, KR>(K, V, r, j1);
    }
}

/* dec_body: grid (nblk, H, B), DEC_THREADS threads doing attention; block x of (row b, head h) computes
 * splits [x*spb, x*spb + spb) of the row (those that exist). A partial of split s: [m, l, 0, 0, acc[HD]] (HD + 4 floats, so each starts
 * 16-byte aligned), in shared memory s_part[s] of the merging block and, in "split" mode when the row's splits
 * span blocks, in work[(b, h)][s]. CLUSTER: launched with cluster dims (nblk, 1, 1), so the block's rank in its
 * cluster is blockIdx.x. pf > 0: thread 0 asks L2 for the round pf after the last one loaded (so pf rounds
 * beyond the DEPTH in registers are on their way to L2).
 *
 * The stream of rounds never waits on the rest of the block:
 * - DEPTH register buffers (2; 3 when compiled for 3 blocks per SM) take turns with no copy between them: the
 *   loop computes buffer 0, refills it with the round DEPTH ahead, computes buffer 1, ... (A "current = next"
 *   copy would stall on the next round's loads at the end of every round, leaving one round in flight.) The
 *   first DEPTH rounds are loaded before the wait.
 * - When a split ends, each key group parks its (m, l, acc) in shared memory and streams on; only when
 *   DEC_PARK splits are parked, or the block's last split is done, one barrier and the parked splits' group
 *   merges (in parallel over splits x dims, each in the fixed group order), so a block of <= DEC_PARK splits
 *   has no barrier in its stream at all. The arithmetic per split is unchanged: the same partials bit for bit. */
/* Where the two callers differ. The body calls, in order: before_q (after the first rounds' loads), the q,
 * newest-key and gate reads, after_q; sync for its block-level barriers among the DEC_THREADS threads; idle
 * for a block with no keys (it must still take part in the cluster barriers). */
template <bool CLUSTER>
struct dec_src_global { /* attention_decode.cu: a kernel of DEC_THREADS threads after fk_gemv_qkv */
    const uint16_t *q, *gqkv;
    __device__ __forceinline__ void before_q() const {
        pdl_wait();
        pdl_launch();
    }
    __device__ __forceinline__ void after_q() const {
        if (CLUSTER) cluster_wait_acquire(); /* every block of the cluster has started: its shared memory exists */
    }
    __device__ __forceinline__ void idle() const {
        if (CLUSTER) { /* still take part in both cluster barriers, so no barrier depends on exited blocks */
            pdl_launch();
            cluster_wait_acquire();
            cluster_arrive_release();
            cluster_wait_acquire();
        }
    }
    __device__ __forceinline__ void sync() const { __syncthreads(); }
    __device__ __forceinline__ uint4 q8(int b, int D, int h, int HD, int li) const {
        return ld_act(q + (size_t)b * D + h * HD + li * 8);
    }
    __device__ __forceinline__ uint16_t gate(int b, int D, int h, int HD, int t) const {
        return ld_act16(gqkv + (size_t)b * 4 * D + h * HD + t);
    }
    /* the newest key, written by the kernel in front (through L2: not this SM's L1) */
    __device__ __forceinline__ void newest(const uint16_t *K, const uint16_t *V, int newest, int HD, int /*li*/,
                                           uint4 &kb, uint4 &vb) const {
        kb = __ldcg((const uint4 *)(K + (size_t)newest * HD));
        vb = __ldcg((const uint4 *)(V + (size_t)newest * HD));
    }
};

/* The newest key into the lanes whose round (first key r0, split end j1) holds it; the loads before the wait
 * skipped it. */
template <int HD, int GROUPS, class Src>
__device__ __forceinline__ void dec_load_newest(const Src &src, const uint16_t *K, const uint16_t *V, int r0, int g,
                                                int li, int j1, int newest, uint4 (&kb)[DEC_KPT],
                                                uint4 (&vb)[DEC_KPT]) {
#pragma unroll
    for (int u = 0; u < DEC_KPT; u++)
        if (r0 + u * GROUPS + g == newest && newest < j1) /* a round may reach past a short split */
            src.newest(K, V, newest, HD, li, kb[u], vb[u]);
}

template <int HD, bool CLUSTER, int DEPTH, class Src>
__device__ __forceinline__ void dec_body(const Src &src, int bx, int h, int b, int t, const uint16_t *__restrict__ k_slot,
                                         const uint16_t *__restrict__ v_slot, long long seq_stride,
                                         const int32_t *row_seq, const int32_t *row_pos, int H, int max_ctx, int nsplit,
                                         int spb, int pf, float scale, float *work, int *counters,
                                         uint16_t *__restrict__ y) {
    constexpr int LPK = HD / 8;                /* lanes per key */
    constexpr int GROUPS = DEC_THREADS / LPK;  /* keys per block load */
    constexpr int KR = GROUPS * DEC_KPT;       /* keys per round */
    constexpr int PW = HD + 4;                 /* floats per partial */
    constexpr int MAXS = CLUSTER ? DEC_MAX_CLUSTER : DEC_MAX_SPLITS;
    __shared__ float s_pm[DEC_PARK][GROUPS], s_pl[DEC_PARK][GROUPS];     /* parked splits: each group's m, l */
    __shared__ float s_pw[DEC_PARK][GROUPS], s_pM[DEC_PARK], s_sw[MAXS]; /* the merges' weights, maxima */
    __shared__ __align__(16) float s_pacc[DEC_PARK][GROUPS * HD];       /* and its acc */
    __shared__ __align__(16) float s_part[MAXS * PW];  /* split partials (the merging block's are read) */
    __shared__ int s_last;
    const int D = H * HD;
    /* row_seq/row_pos are set before the step starts (host copy), never by the kernel in front of this one. */
    const int len = row_pos[b] + 1;
    int chunk, ns;
    dec_split(len, nsplit, chunk, ns);
    const int s0 = bx * spb, s1 = min(ns, s0 + spb);
    if (s0 >= ns) { /* no keys: nothing to wait for, nothing to write */
        src.idle();
        return;
    }
    const int g = t / LPK, li = t % LPK;
    const size_t base = (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * HD + li * 8;
    const uint16_t *K = k_slot + base, *V = v_slot + base;

    /* compute cursor (split cs, round's first key cr, split end cj1): the round computed next; load cursor
     * (ls, lr, lj1): the round loaded last. The first DEPTH rounds before the wait: all but the newest key. */
    int cs = s0, cr = s0 * chunk, cj1 = min(len, cr + chunk);
    int ls = cs, lr = cr, lj1 = cj1;
    /* the next round to load; with pf > 0, thread 0 asks L2 for the round pf after it */
    auto advance_load = [&]() {
        dec_next_round<KR>(ls, lr, lj1, chunk, len, s1);
        if (pf > 0 && t == 0) dec_prefetch_ahead<HD, KR>(K, V, ls, lr, lj1, pf, pf, chunk, len, s1);
    };
    uint4 kbuf[DEPTH][DEC_KPT], vbuf[DEPTH][DEC_KPT]; /* indexed by constants only: registers */
    dec_load<HD, GROUPS>(K, V, lr, g, lj1, len - 1, kbuf[0], vbuf[0]);
    dec_next_round<KR>(ls, lr, lj1, chunk, len, s1);
    const int r1 = lr, j1_1 = lj1; /* round 1, for the newest key below */
    dec_load<HD, GROUPS>(K, V, lr, g, lj1, len - 1, kbuf[1], vbuf[1]);
    if (DEPTH == 3) {
        dec_next_round<KR>(ls, lr, lj1, chunk, len, s1);
        dec_load<HD, GROUPS>(K, V, lr, g, lj1, len - 1, kbuf[DEPTH - 1], vbuf[DEPTH - 1]);
    }
    /* rounds DEPTH .. DEPTH+pf-1 now; each refill below asks for the one after those */
    if (pf > 0 && t == 0) dec_prefetch_ahead<HD, KR>(K, V, ls, lr, lj1, 1, pf, chunk, len, s1);
    src.before_q();
    dec_load_newest<HD, GROUPS>(src, K, V, cr, g, li, cj1, len - 1, kbuf[0], vbuf[0]);
    dec_load_newest<HD, GROUPS>(src, K, V, r1, g, li, j1_1, len - 1, kbuf[1], vbuf[1]);
    if (DEPTH == 3) dec_load_newest<HD, GROUPS>(src, K, V, lr, g, li, lj1, len - 1, kbuf[DEPTH - 1], vbuf[DEPTH - 1]);
    float qf[8];
    unpack8(src.q8(b, D, h, HD, li), qf);
    /* The gate of dim t is loaded now (used only by the merge): its latency hides behind the keys' arithmetic
     * instead of following the merge. */
    const bool may_merge = CLUSTER ? bx == 0 : true;
    uint16_t graw = 0;
    if (may_merge && t < HD) graw = src.gate(b, D, h, HD, t);
    src.after_q();
    float *part = CLUSTER ? cluster_map(s_part, 0) : s_part; /* where this block's partials go */

    float m = -INFINITY, l = 0.0f, acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.0f;
    int np = 0; /* splits parked */
    /* One round from buffer (kc, vc), then the buffer's refill; true after the block's last round. */
    auto step = [&](uint4(&kc)[DEC_KPT], uint4(&vc)[DEC_KPT]) -> bool {
        float sc[DEC_KPT], smax = -INFINITY;
#pragma unroll
        for (int u = 0; u < DEC_KPT; u++) {
            float kf[8], p = 0.0f;
            unpack8(kc[u], kf);
#pragma unroll
            for (int i = 0; i < 8; i++) p += qf[i] * kf[i];
#pragma unroll
            for (int o = LPK / 2; o > 0; o >>= 1) p += __shfl_xor_sync(0xffffffffu, p, o);
            sc[u] = cr + u * GROUPS + g < cj1 ? p * scale : -INFINITY;
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
        /* the buffer is free: the round DEPTH ahead goes into it, in flight during the other buffers' rounds */
        advance_load();
        dec_load<HD, GROUPS>(K, V, lr, g, lj1, -1, kc, vc);
        if (cr + KR < cj1) { /* split cs goes on */
            cr += KR;
            return false;
        }
        /* split cs is done: park this group's part of it */
        if (li == 0) {
            s_pm[np][g] = m;
            s_pl[np][g] = l;
        }
        /* two 16-byte stores: a warp's quarter covers 8 consecutive 16-byte words, no bank conflict */
        float4 *pk = (float4 *)&s_pacc[np][g * HD + li * 8];
        pk[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        pk[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
        np++;
        const bool last = cs + 1 >= s1;
        if (np == DEC_PARK || last) {
            /* merge the parked splits' key groups (fixed group order) into partials cs+1-np .. cs: first each
             * (split, group) weight once, then each (split, dim) sum from them */
            src.sync();
            const int sb = cs + 1 - np;
            for (int it = t; it < np * GROUPS; it += DEC_THREADS) {
                const int p = it / GROUPS, k = it % GROUPS;
                float M = -INFINITY;
                for (int k2 = 0; k2 < GROUPS; k2++) M = fmaxf(M, s_pm[p][k2]);
                s_pw[p][k] = expf(s_pm[p][k] - M); /* (not read for a group with no key) */
                if (k == 0) s_pM[p] = M;
            }
            src.sync();
            for (int it = t; it < np * HD; it += DEC_THREADS) {
                const int p = it / HD, d = it % HD;
                float M = s_pM[p], L = 0.0f, a = 0.0f;
                for (int k = 0; k < GROUPS; k++) {
                    if (s_pm[p][k] == -INFINITY) continue;
                    float w = s_pw[p][k];
                    L += s_pl[p][k] * w;
                    a += s_pacc[p][k * HD + d] * w;
                }
                float *dst = part + (size_t)(sb + p) * PW;
                dst[4 + d] = a;
                if (d == 0) {
                    dst[0] = M;
                    dst[1] = L;
                    dst[2] = 0.0f;
                    dst[3] = 0.0f;
                }
            }
            src.sync(); /* the park is rewritten by the next splits; s_part is read below */
            np = 0;
        }
        if (last) return true;
        m = -INFINITY;
        l = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] = 0.0f;
        cs++;
        cr = cs * chunk;
        cj1 = min(len, cr + chunk);
        return false;
    };
    if (DEPTH == 3)
        while (!step(kbuf[0], vbuf[0]) && !step(kbuf[1], vbuf[1]) && !step(kbuf[DEPTH - 1], vbuf[DEPTH - 1])) {
        }
    else
        while (!step(kbuf[0], vbuf[0]) && !step(kbuf[1], vbuf[1])) {
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
        src.sync();
        const int nblk = (ns + spb - 1) / spb;
        if (t == 0) {
            int prev = atomicAdd(&counters[b * H + h], 1);
            s_last = prev == nblk - 1;
            if (s_last) counters[b * H + h] = 0;
        }
        src.sync();
        if (!s_last) return;
        fence_acq_rel_gpu(); /* acquire: the other blocks' partials after their counter increments */
        /* the other blocks' partials into shared memory, bypassing L1 (other blocks wrote them) */
        const int nv = ns * PW / 4;
        for (int v = t; v < nv; v += DEC_THREADS)
            if (v < v0 || v >= v1) ((float4 *)s_part)[v] = __ldcg((const float4 *)wrow + v);
        src.sync();
    }
    if (t < ns) { /* each split's weight once (not once per dim) */
        float M = -INFINITY;
        for (int k = 0; k < ns; k++) M = fmaxf(M, s_part[k * PW]);
        s_sw[t] = expf(s_part[t * PW] - M);
    }
    src.sync();
    if (t >= HD) return;
    float L = 0.0f, a = 0.0f;
    for (int k = 0; k < ns; k++) { /* split order: the same sum whichever block computed which split */
        float w = s_sw[k];
        L += s_part[k * PW + 1] * w;
        a += s_part[k * PW + 4 + t] * w;
    }
    const float sg = rbf(1.0f / (1.0f + expf(-bf2f(graw))));
    y[(size_t)b * D + h * HD + t] = f2bf(sg * rbf(a / L));
}

#endif
