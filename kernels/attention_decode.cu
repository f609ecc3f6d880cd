/* attention_decode.cu — decode attention: one new query row per batch row against the slot's cached keys,
 * split-K over the keys (flash-decoding), the partials merged by the last split block of each (row, head),
 * with the output gate y = bf16(bf16(sigmoid(g)) * bf16(o)) fused into that merge. Scores and softmax are
 * fp32 like the CPU engine.
 *
 * Why it is shaped this way (batch 1 at ctx 512 moves only 3 MB, so latency, not bandwidth, decides):
 * - A key is read by HD/8 lanes with one 16-byte load each (16 lanes for head_dim 128), so a score costs
 *   log2(HD/8) shuffles and a warp load covers whole keys.
 * - Each block issues the K and V loads of a round (every key it will touch at short context) before it
 *   uses any of them, and the next round's loads before it computes the current one.
 * - Keys before the row's newest position were written by earlier decode steps or prefill, not by the
 *   kernel in front of this one, so the first round is loaded BEFORE the programmatic-launch wait and its
 *   DRAM latency overlaps the previous kernel's tail; only the newest key (written by fk_gemv_qkv just before)
 *   and q are read after the wait.
 * - The number of splits of a row is a function of its length alone (at most `nsplit`, chosen at launch
 *   from H and max_ctx, at least DEC_MIN_KEYS keys each), so long rows do not need max_ctx/64 mostly empty
 *   blocks, short ones still spread over the SMs, and a row's arithmetic does not depend on the batch it
 *   is in (batched decode stays bit-identical to single-row decode).
 * - A row whose keys fit one split writes y directly; otherwise partials go through `work` and the last
 *   block of the (row, head) merges them in split order (deterministic whatever order blocks finish). */
#include "common.cuh"
#include "kernels.h"

#define DEC_THREADS 128    /* threads per block */
#define DEC_KPT 4          /* keys each key group holds per round */
#define DEC_MIN_KEYS 32    /* fewest keys per split: below this a split's fixed costs dominate */
#define DEC_MAX_SPLITS 32  /* most splits per (row, head); bounds the merge's shared memory */
#define DEC_SPLIT_BLOCKS 256 /* splits * heads aimed at: about two blocks per SM of a 132-SM H200 at batch 1 */

/* Splits per (row, head) at most: depends on H and max_ctx only (never on B), so every batch size lays a
 * row's keys out the same way. */
static int dec_nsplit(int H, int max_ctx) {
    int s = (DEC_SPLIT_BLOCKS + H - 1) / H;
    int cap = (max_ctx + DEC_MIN_KEYS - 1) / DEC_MIN_KEYS;
    if (s > DEC_MAX_SPLITS) s = DEC_MAX_SPLITS;
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

/* y = bf16(bf16(sigmoid(g)) * bf16(a / L)) for dim d of (row b, head h): the CPU engine's rounding points. */
__device__ __forceinline__ void dec_gate_store(float a, float L, const uint16_t *gqkv, int D, int b, int h, int HD,
                                               int d, uint16_t *y) {
    float o = rbf(a / L);
    float g = bf2f(gqkv[(size_t)b * 4 * D + h * HD + d]);
    float sg = rbf(1.0f / (1.0f + expf(-g)));
    y[(size_t)b * D + h * HD + d] = f2bf(sg * o);
}

/* grid (nsplit, H, B), DEC_THREADS threads. Work partial of (b, h, sp): [m, l, -, -, acc[HD]] (HD + 4 floats,
 * so each partial starts 16-byte aligned). */
template <int HD>
__global__ void __launch_bounds__(DEC_THREADS)
    attn_decode_kernel(const uint16_t *__restrict__ q, const uint16_t *__restrict__ k_slot,
                       const uint16_t *__restrict__ v_slot, long long seq_stride, const int32_t *row_seq,
                       const int32_t *row_pos, int H, int max_ctx, int nsplit, float scale, float *work,
                       int *counters, const uint16_t *__restrict__ gqkv, uint16_t *__restrict__ y) {
    constexpr int LPK = HD / 8;                /* lanes per key */
    constexpr int GROUPS = DEC_THREADS / LPK;  /* keys per block load */
    constexpr int KR = GROUPS * DEC_KPT;       /* keys per round */
    constexpr int PW = HD + 4;                 /* floats per work partial */
    __shared__ float s_m[GROUPS], s_l[GROUPS];
    /* the key groups' accumulators, later every split's partial (last block only) */
    constexpr int SACC = GROUPS * HD > DEC_MAX_SPLITS * PW ? GROUPS * HD : DEC_MAX_SPLITS * PW;
    __shared__ __align__(16) float s_acc[SACC];
    __shared__ int s_last;
    const int sp = blockIdx.x, h = blockIdx.y, b = blockIdx.z, D = H * HD;
    /* row_seq/row_pos are set before the step starts (host copy), never by the kernel in front of this one. */
    const int len = row_pos[b] + 1;
    int chunk, ns;
    dec_split(len, nsplit, chunk, ns);
    if (sp >= ns) return; /* no keys: nothing to wait for, nothing to write */
    const int j0 = sp * chunk, j1 = min(len, j0 + chunk);
    const int g = threadIdx.x / LPK, li = threadIdx.x % LPK;
    const size_t base = (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * HD + li * 8;
    const uint16_t *K = k_slot + base, *V = v_slot + base;

    uint4 kc[DEC_KPT], vc[DEC_KPT];
    dec_load<HD, GROUPS>(K, V, j0, g, j1, len - 1, kc, vc); /* before the wait: all but the newest key */
    pdl_wait();
    pdl_launch();
#pragma unroll
    for (int u = 0; u < DEC_KPT; u++)
        if (j0 + u * GROUPS + g == len - 1 && len - 1 < j1) { /* a round may reach past a short split */
            kc[u] = __ldcg((const uint4 *)(K + (size_t)(len - 1) * HD));
            vc[u] = __ldcg((const uint4 *)(V + (size_t)(len - 1) * HD));
        }
    float qf[8];
    unpack8(*(const uint4 *)(q + (size_t)b * D + h * HD + li * 8), qf);

    float m = -INFINITY, l = 0.0f, acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = 0.0f;
    for (int r0 = j0; r0 < j1; r0 += KR) {
        uint4 kn[DEC_KPT], vn[DEC_KPT];
        dec_load<HD, GROUPS>(K, V, r0 + KR, g, j1, -1, kn, vn); /* next round in flight while this one computes */
        float s[DEC_KPT], smax = -INFINITY;
#pragma unroll
        for (int u = 0; u < DEC_KPT; u++) {
            float kf[8], part = 0.0f;
            unpack8(kc[u], kf);
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
            for (int u = 0; u < DEC_KPT; u++) {
                float p = expf(s[u] - m_new), vf[8];
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
        if (t < HD) dec_gate_store(a, L, gqkv, D, b, h, HD, t, y);
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
    constexpr int MAXV = DEC_MAX_SPLITS * PW / 4, PER = (MAXV + DEC_THREADS - 1) / DEC_THREADS;
    const int nv = ns * PW / 4;
    float4 tmp[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        int v = i * DEC_THREADS + t;
        if (v < nv) tmp[i] = __ldcg((const float4 *)wrow + v);
    }
    /* (s_acc's group sums were all read before the counter's __syncthreads) */
#pragma unroll
    for (int i = 0; i < PER; i++) {
        int v = i * DEC_THREADS + t;
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
    dec_gate_store(a, L, gqkv, D, b, h, HD, t, y);
}

extern "C" size_t fk_attn_decode_work_floats(int B, int H, int hd, int max_ctx) {
    return (size_t)B * H * dec_nsplit(H, max_ctx) * (hd + 4);
}

extern "C" int fk_attn_decode(const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot, long long seq_stride,
                              const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H,
                              int hd, int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s) {
    if (B < 1 || H < 1 || max_ctx < 1) {
        frigg_set_error("attn_decode: bad shape B=%d H=%d max_ctx=%d", B, H, max_ctx);
        return -1;
    }
    int nsplit = dec_nsplit(H, max_ctx);
    dim3 grid(nsplit, H, B);
    float scale = (float)(1.0 / sqrt((double)hd));
    switch (hd) {
    case 16: fk_launch(attn_decode_kernel<16>, grid, DEC_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 32: fk_launch(attn_decode_kernel<32>, grid, DEC_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 64: fk_launch(attn_decode_kernel<64>, grid, DEC_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    case 128: fk_launch(attn_decode_kernel<128>, grid, DEC_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, scale, work, counters, gqkv, y); break;
    default:
        frigg_set_error("attention: head_dim %d is not supported by the CUDA backend (16, 32, 64 or 128)", hd);
        return -1;
    }
    return fk_check_launch("attn_decode");
}
