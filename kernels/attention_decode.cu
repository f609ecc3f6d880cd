/* attention_decode.cu — decode attention: one new query row per batch row against the slot's cached keys,
 * split-K over the keys (flash-decoding), the split partials merged in split order with the output gate
 * y = bf16(bf16(sigmoid(g)) * bf16(o)) fused into the merge. Scores and softmax are fp32 like the CPU engine.
 * One kernel for both caches: bf16 (fk_attn_decode) and int8 with per-position scales (fk_attn_decode_i8,
 * attention_decode_i8.cu's layout), the element type a template parameter (dec_kv).
 * The int8 instantiation also does the step's write, which for bf16 is fk_gemv_qkv's epilogue: a head's scale
 * needs the whole head's amax, which no GEMV block has, so the int8 cache once took two more kernels per layer
 * (RoPE into a staging row, then the quantizing write: 908 kernels per batch-1 step against bf16's 652). Here
 * every block rotates its own q from the gqkv row, and the block whose split holds the row's newest position
 * rotates k, quantizes K and V (one warp), stores them into the cache for later steps and hands them to its own
 * rounds through shared memory, so the write costs no launch and no round trip through memory.
 *
 * Why it is shaped this way (batch 1 at ctx 512 moves only 3 MB, so latency, not bandwidth, decides):
 * - A key is read by HD/8 lanes (bf16; HD/16 for int8) with one 16-byte load each (16 or 8 lanes for head_dim
 *   128), so a score costs log2 of that many shuffles and a warp load covers whole keys.
 * - A block issues the K and V loads of a round before it uses any of them, and keeps the next round's
 *   (two next rounds' at depth 3) in flight while it computes the current one.
 * - Keys before the row's newest position were written by earlier decode steps or prefill, not by the
 *   kernel in front of this one, so the first rounds are loaded BEFORE the programmatic-launch wait and their
 *   DRAM latency overlaps the previous kernel's tail; the newest key, q and the gate (all written by
 *   fk_gemv_qkv just before) are read right after the wait, the gate early so the merge does not wait on it.
 * - The split boundaries of a row are a function of its length, H and max_ctx alone (at most `nsplit`
 *   splits of at least DEC_MIN_KEYS keys, DEC_MIN_KEYS_I8 for int8), and every split's partial (m, l, acc) is
 *   computed by the same code and merged with the others in split order, so a row's arithmetic does not depend
 *   on the batch it is in (batched decode stays bit-identical to single-row decode).
 * - Which BLOCK computes a split may depend on the batch: a block takes `spb` consecutive splits of its row
 *   (one after the other, loads of the next split in flight while it computes the current). At batch 1 one
 *   split per block spreads 3 MB over the SMs; at batch 8 (1536 splits at ctx 512, but only 4 blocks of 128
 *   registers fit an SM) several splits per block make one wave of blocks instead of three, each with loads
 *   in flight all the time, and fewer partials to exchange.
 * - A block's stream of rounds has no barrier in it until DEC_PARK splits are done (see the kernel).
 * - Two ways to merge the partials of a (row, head) (fk_ctx_set_attn_decode_impl):
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
/* int8: one whole round of its layout at head_dim 128 (16 key groups x DEC_KPT). With 32, a 512-key row's splits
 * filled half of each round and a batch-64 block parked twice as often: int8 decode at ctx 512 ran 0.80-0.93x the
 * 8-values-per-lane kernel's (benchmarks/h200-2026-12-03/kv16/ab-summary.txt). */
#define DEC_MIN_KEYS_I8 64
#define DEC_MAX_SPLITS 32    /* most splits per (row, head); bounds the merge's shared memory */
#define DEC_SPLIT_BLOCKS 256 /* splits * heads aimed at: about two blocks per SM of a 132-SM H200 at batch 1 */
#define DEC_MAX_CLUSTER 16   /* most blocks per cluster (16 needs the non-portable cluster size attribute) */
#define DEC_WAVE_BLOCKS 4    /* auto spb: blocks per SM aimed at (the launch bounds give 4 of <= 128 registers) */
#define DEC_PARK 4           /* splits whose key-group partials a block parks before one barrier merges them */

/* "auto" merge mode (the default): cluster where the device runs clusters of DEC_MAX_CLUSTER blocks, else
 * split. Fixed per device, so the choice never depends on B or on a row (batch invariance). Measured on the
 * H200 (dev/attn_decode, us per launch, as 6b66138 recorded in benchmarks/h200-2026-11-30/): cluster beats split at every batch for ctx <= 2048 (ctx 512:
 * B=1 3.91 against 4.98, B=8 9.62 against 11.01) and loses only at B >= 4 with ctx 4096 (B=8: 55.8 against
 * 52.2-53.9). */
#define DEC_IMPL_AUTO FK_ATTND_AUTO
/* Blocks per SM the kernel is compiled for (launch bounds), chosen per launch by dec_pick_minb: 4 gives it the
 * registers for two rounds in flight with no spill (ptxas: 128 at head_dim 128), 3 keeps three rounds in
 * flight (167 registers). 5 blocks (96 registers, ~100 bytes of spill per thread) and an L2 prefetch of the
 * rounds ahead were A/B knobs that no default ever used; they are gone from the shipped kernel (git keeps
 * them). */

/* Splits per (row, head) at most: depends on H, max_ctx, the merge mode and the splits x heads aimed at
 * (DEC_SPLIT_BLOCKS unless a tuning run sets fk_ctx_set_attn_decode_split_blocks) only, never on B, so every
 * batch size lays a row's keys out the same way. */
static int dec_nsplit(int H, int max_ctx, int impl, int min_keys, int split_blocks) {
    int s = (split_blocks + H - 1) / H;
    int cap = (max_ctx + min_keys - 1) / min_keys;
    int most = impl == FK_ATTND_CLUSTER ? DEC_MAX_CLUSTER : DEC_MAX_SPLITS;
    if (s > most) s = most;
    if (s > cap) s = cap;
    return s < 1 ? 1 : s;
}

/* A row of `len` keys: `ns` splits of `chunk` keys (the last one shorter), at most nsplit of them. */
template <int MIN_KEYS>
__device__ __forceinline__ void dec_split(int len, int nsplit, int &chunk, int &ns) {
    int want = (len + MIN_KEYS - 1) / MIN_KEYS;
    if (want > nsplit) want = nsplit;
    chunk = (len + want - 1) / want;
    ns = (len + chunk - 1) / chunk;
}

/* The cache's element: bf16 (a lane's 8 dims are one 16-byte load) or int8 (a lane's 16 dims one 16-byte load, and
 * one fp32 scale per (position, head) for K and one for V: attention_decode_i8.cu's layout). The int8
 * instantiation is the same kernel with a key's score multiplied by its K scale and a value row's weight by its V
 * scale. Both move 16 bytes per lane and load, so a round of int8 keys holds twice the keys of a bf16 round in the
 * same bytes and registers: a split takes half the rounds, each a DRAM latency that batch 1 cannot hide (8-byte
 * int8 loads, 8 dims a lane as for bf16, left the int8 cache at 0.92x the bf16 cache's speed at batch 1 and ctx
 * 4096 with half its bytes: benchmarks/h200-2026-12-02/kvfuse/ab-summary.txt). */
template <bool I8> struct dec_kv;
template <> struct dec_kv<false> {
    typedef uint16_t elem;
    typedef uint4 word;
    static constexpr int epl = 8; /* elements (dims) per lane of a key */
};
template <> struct dec_kv<true> {
    typedef int8_t elem;
    typedef uint4 word;
    static constexpr int epl = 16;
};

/* K and V of keys r0 + u*GROUPS + g (u < DEC_KPT) for this lane's dims (8 bf16, 16 int8) and, int8, their
 * scales; zeros past j1 (no load). Keys of a warp are adjacent in memory, so each warp load is whole contiguous rows. Streaming
 * loads: each key is read once per step, and 128 layers' caches do not fit L2 anyway. */
template <int HD, int GROUPS, bool I8>
__device__ __forceinline__ void dec_load(const typename dec_kv<I8>::elem *K, const typename dec_kv<I8>::elem *V,
                                         const float *KS, const float *VS, int r0, int g, int j1, int skip,
                                         typename dec_kv<I8>::word (&kb)[DEC_KPT], typename dec_kv<I8>::word (&vb)[DEC_KPT],
                                         float (&ksb)[DEC_KPT], float (&vsb)[DEC_KPT]) {
    typedef typename dec_kv<I8>::word word;
#pragma unroll
    for (int u = 0; u < DEC_KPT; u++) {
        int j = r0 + u * GROUPS + g;
        if (j < j1 && j != skip) {
            kb[u] = __ldcs((const word *)(K + (size_t)j * HD));
            vb[u] = __ldcs((const word *)(V + (size_t)j * HD));
            if (I8) {
                ksb[u] = __ldcs(KS + j);
                vsb[u] = __ldcs(VS + j);
            }
        } else {
            kb[u] = word{};
            vb[u] = word{};
            ksb[u] = 0.0f;
            vsb[u] = 0.0f;
        }
    }
}

__device__ __forceinline__ void unpack8(uint4 w, float (&f)[8]) {
    f[0] = bf_lo(w.x); f[1] = bf_hi(w.x); f[2] = bf_lo(w.y); f[3] = bf_hi(w.y);
    f[4] = bf_lo(w.z); f[5] = bf_hi(w.z); f[6] = bf_lo(w.w); f[7] = bf_hi(w.w);
}
/* Eight int8 values (memory order) to floats, exactly, without the int-to-float conversion instruction (a
 * quarter-rate unit on sm_90): the byte, offset to unsigned (x ^ 0x80), becomes the low mantissa byte of 2^23
 * (0x4B000000 | u), and one subtraction of 2^23 + 128 leaves x: one byte permute and one add per value. Against
 * the conversion, decode with the int8 cache ran 1.15-1.21x faster at ctx 4096 and batch 16-64, 1.00-1.06x at
 * batch 1, arms alternated in one device call (benchmarks/h200-2026-12-02/kvprmt/ab-summary.txt). */
__device__ __forceinline__ float i8_to_f(uint32_t w_offset, int i) {
    return __uint_as_float(__byte_perm(w_offset, 0x4B000000u, 0x7540u | (unsigned)i)) - 8388736.0f;
}
__device__ __forceinline__ void unpack16_i8(uint4 w, float (&f)[16]) {
    const uint32_t x[4] = {w.x ^ 0x80808080u, w.y ^ 0x80808080u, w.z ^ 0x80808080u, w.w ^ 0x80808080u};
#pragma unroll
    for (int e = 0; e < 16; e++) f[e] = i8_to_f(x[e / 4], e % 4);
}
/* A key's lane values as floats, for either cache (the word holds dec_kv<I8>::epl of them). */
template <bool I8> __device__ __forceinline__ void unpack_kv(uint4 w, float (&f)[dec_kv<I8>::epl]);
template <> __device__ __forceinline__ void unpack_kv<false>(uint4 w, float (&f)[8]) { unpack8(w, f); }
template <> __device__ __forceinline__ void unpack_kv<true>(uint4 w, float (&f)[16]) { unpack16_i8(w, f); }

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

/* After the programmatic-launch wait: the newest key (written by the kernel in front) into the lanes whose
 * round (first key r0, split end j1) holds it; the loads before the wait skipped it. */
template <int HD, int GROUPS, bool I8>
__device__ __forceinline__ void dec_load_newest(const typename dec_kv<I8>::elem *K, const typename dec_kv<I8>::elem *V,
                                                const float *KS, const float *VS, int r0, int g, int j1, int newest,
                                                typename dec_kv<I8>::word (&kb)[DEC_KPT],
                                                typename dec_kv<I8>::word (&vb)[DEC_KPT], float (&ksb)[DEC_KPT],
                                                float (&vsb)[DEC_KPT]) {
    typedef typename dec_kv<I8>::word word;
#pragma unroll
    for (int u = 0; u < DEC_KPT; u++)
        if (r0 + u * GROUPS + g == newest && newest < j1) { /* a round may reach past a short split */
            kb[u] = __ldcg((const word *)(K + (size_t)newest * HD));
            vb[u] = __ldcg((const word *)(V + (size_t)newest * HD));
            if (I8) {
                ksb[u] = __ldcg(KS + newest);
                vsb[u] = __ldcg(VS + newest);
            }
        }
}

/* The int8 cache's write, fused into its attention (fk_attn_decode_i8): the RoPE tables and where a row's newest
 * K and V go (the same cache the kernel reads). All NULL for the bf16 cache, whose write is fk_gemv_qkv's. */
struct dec_write {
    const uint16_t *cos_t, *sin_t;
    int8_t *k8, *v8;
    float *ks, *vs;
    uint16_t *k16, *v16; /* the bf16 cache's, where its write is fused in (fk_attn_decode_write) */
};

/* RoPE of one lane's 8 dims (xw, at dims li*8..) with their cos and sin: x' = rbf(rbf(x c) + rbf(r s)), r the
 * partner dim's value (i +- hd/2, negated in the first half), held by lane li ^ (LPK/2) of the same key group:
 * fk_rope_rows's arithmetic, so the same bits. Every lane of the warp must call it (shuffles). */
template <int LPK>
__device__ __forceinline__ void dec_rope8(uint4 xw, const float (&c)[8], const float (&sn)[8], int li, float (&o)[8]) {
    uint4 pw;
    pw.x = __shfl_xor_sync(0xffffffffu, xw.x, LPK / 2);
    pw.y = __shfl_xor_sync(0xffffffffu, xw.y, LPK / 2);
    pw.z = __shfl_xor_sync(0xffffffffu, xw.z, LPK / 2);
    pw.w = __shfl_xor_sync(0xffffffffu, xw.w, LPK / 2);
    float x[8], p[8];
    unpack8(xw, x);
    unpack8(pw, p);
    const bool first = li < LPK / 2;
#pragma unroll
    for (int k = 0; k < 8; k++) o[k] = rbf(rbf(x[k] * c[k]) + rbf((first ? -p[k] : p[k]) * sn[k]));
}

/* RoPE of one lane's EPL dims (xw: EPL / 8 16-byte pieces of bf16 at dims li*EPL..), with their cos and sin
 * pieces: dec_rope8 on each piece, whose partner piece (+- hd/2) is the same piece of lane li ^ (LPK/2). */
template <int LPK, int EPL>
__device__ __forceinline__ void dec_rope(const uint4 (&xw)[EPL / 8], const uint4 (&cw)[EPL / 8], const uint4 (&sw)[EPL / 8],
                                         int li, float (&o)[EPL]) {
#pragma unroll
    for (int c = 0; c < EPL / 8; c++) {
        float cf[8], sf[8], oc[8];
        unpack8(cw[c], cf);
        unpack8(sw[c], sf);
        dec_rope8<LPK>(xw[c], cf, sf, li, oc);
#pragma unroll
        for (int k = 0; k < 8; k++) o[c * 8 + k] = oc[k];
    }
}

/* The newest key (this block's own write, kept in shared memory) into the lanes whose round (first key r0, split
 * end j1) holds it: the int8 cache's counterpart of dec_load_newest; every load of the int8 kernel skips it. */
template <int GROUPS>
__device__ __forceinline__ void dec_take_newest(const uint4 (&s_new)[2][16], const float (&s_nsc)[2], int li, int r0,
                                                int g, int j1, int newest, uint4 (&kb)[DEC_KPT], uint4 (&vb)[DEC_KPT],
                                                float (&ksb)[DEC_KPT], float (&vsb)[DEC_KPT]) {
#pragma unroll
    for (int u = 0; u < DEC_KPT; u++)
        if (r0 + u * GROUPS + g == newest && newest < j1) {
            kb[u] = s_new[0][li];
            vb[u] = s_new[1][li];
            ksb[u] = s_nsc[0];
            vsb[u] = s_nsc[1];
        }
}

/* grid (nblk, H, B), DEC_THREADS threads; block x of (row b, head h) computes splits [x*spb, x*spb + spb) of
 * the row (those that exist). A partial of split s: [m, l, 0, 0, acc[HD]] (HD + 4 floats, so each starts
 * 16-byte aligned), in shared memory s_part[s] of the merging block and, in "split" mode when the row's splits
 * span blocks, in work[(b, h)][s]. CLUSTER: launched with cluster dims (nblk, 1, 1), so the block's rank in its
 * cluster is blockIdx.x.
 *
 * The stream of rounds never waits on the rest of the block:
 * - DEPTH register buffers (2; 3 when compiled for 3 blocks per SM, bf16) take turns with no copy between them: the
 *   loop computes buffer 0, refills it with the round DEPTH ahead, computes buffer 1, ... (A "current = next"
 *   copy would stall on the next round's loads at the end of every round, leaving one round in flight.) The
 *   first DEPTH rounds are loaded before the wait.
 * - When a split ends, each key group parks its (m, l, acc) in shared memory and streams on; only when
 *   DEC_PARK splits are parked, or the block's last split is done, one barrier and the parked splits' group
 *   merges (in parallel over splits x dims, each in the fixed group order), so a block of <= DEC_PARK splits
 *   has no barrier in its stream at all. The arithmetic per split is unchanged: the same partials bit for bit. */
template <int HD, bool CLUSTER, int MINB, bool I8, bool FW>
__global__ void __launch_bounds__(DEC_THREADS, MINB)
    attn_decode_kernel(const uint16_t *__restrict__ q, const typename dec_kv<I8>::elem *__restrict__ k_slot,
                       const typename dec_kv<I8>::elem *__restrict__ v_slot, const float *__restrict__ k_scale,
                       const float *__restrict__ v_scale, long long seq_stride, const int32_t *row_seq,
                       const int32_t *row_pos, int H, int max_ctx, int nsplit, int spb, float scale,
                       float *work, int *counters, const uint16_t *__restrict__ gqkv, uint16_t *__restrict__ y,
                       dec_write wr) {
    typedef typename dec_kv<I8>::elem elem;
    typedef typename dec_kv<I8>::word word;
    /* the step's write in this kernel: always for int8, for bf16 where FW (fk_attn_decode_write) */
    constexpr bool FUSED = I8 || FW;
    constexpr int EPL = dec_kv<I8>::epl;      /* dims per lane */
    constexpr int LPK = HD / EPL;              /* lanes per key */
    constexpr int GROUPS = DEC_THREADS / LPK;  /* keys per block load */
    constexpr int KR = GROUPS * DEC_KPT;       /* keys per round */
    constexpr int PW = HD + 4;                 /* floats per partial */
    constexpr int MAXS = CLUSTER ? DEC_MAX_CLUSTER : DEC_MAX_SPLITS;
    /* rounds in flight: 3 only where 170 registers allow (not int8). int8 at 2 blocks per SM with 4 rounds (255
     * registers) ran 22.7 us per batch-1 launch at ctx 4096 against 17.7 at 3 blocks with 2 (Nsight Compute,
     * benchmarks/h200-2026-12-03/kvdiag/), and decode 0.985x (kvdepth/ab-summary.txt) */
    constexpr int DEPTH = MINB == 3 && !I8 ? 3 : 2;
    /* Splits parked before a merge: int8's twice as many key groups would take the park past the 48 KB of static
     * shared memory at DEC_PARK */
    constexpr int PARK = I8 ? DEC_PARK / 2 : DEC_PARK;
    __shared__ float s_pm[PARK][GROUPS], s_pl[PARK][GROUPS];     /* parked splits: each group's m, l */
    __shared__ float s_pw[PARK][GROUPS], s_pM[PARK], s_sw[MAXS]; /* the merges' weights, maxima */
    __shared__ __align__(16) float s_pacc[PARK][GROUPS * HD];   /* and its acc */
    __shared__ __align__(16) float s_part[MAXS * PW];  /* split partials (the merging block's are read) */
    __shared__ int s_last;
    __shared__ uint4 s_new[2][16]; /* int8: the newest K and V, a lane's 16 values each (LPK <= 16) */
    __shared__ float s_nsc[2];      /* and their scales */
    const int bx = blockIdx.x, h = blockIdx.y, b = blockIdx.z, D = H * HD, t = threadIdx.x;
    if (CLUSTER) cluster_arrive_relaxed(); /* phase 0: "this block has started" (remote writes need it) */
    /* row_seq/row_pos are set before the step starts (host copy), never by the kernel in front of this one. */
    const int len = row_pos[b] + 1;
    int chunk, ns;
    dec_split<I8 ? DEC_MIN_KEYS_I8 : DEC_MIN_KEYS>(len, nsplit, chunk, ns);
    const int s0 = bx * spb, s1 = min(ns, s0 + spb);
    if (s0 >= ns) { /* no keys: nothing to wait for, nothing to write */
        if (CLUSTER) { /* still take part in both cluster barriers, so no barrier depends on exited blocks */
            cluster_wait_acquire();
            cluster_arrive_release();
            cluster_wait_acquire();
        }
        return;
    }
    const int g = t / LPK, li = t % LPK;
    const size_t base = (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * HD + li * EPL;
    const elem *K = k_slot + base, *V = v_slot + base;
    /* int8: the scales of (row's sequence, head h), one per position (unused, NULL, for bf16) */
    const size_t sbase = (size_t)row_seq[b] * (seq_stride / HD) + (size_t)h * max_ctx;
    const float *KS = I8 ? k_scale + sbase : NULL, *VS = I8 ? v_scale + sbase : NULL;

    /* compute cursor (split cs, round's first key cr, split end cj1): the round computed next; load cursor
     * (ls, lr, lj1): the round loaded last. The first DEPTH rounds before the wait: all but the newest key. */
    int cs = s0, cr = s0 * chunk, cj1 = min(len, cr + chunk);
    int ls = cs, lr = cr, lj1 = cj1;
    /* the next round to load */
    auto advance_load = [&]() { dec_next_round<KR>(ls, lr, lj1, chunk, len, s1); };
    word kbuf[DEPTH][DEC_KPT], vbuf[DEPTH][DEC_KPT]; /* indexed by constants only: registers */
    float ksbuf[DEPTH][DEC_KPT], vsbuf[DEPTH][DEC_KPT]; /* int8's scales (bf16: never read, optimised away) */
    int pr[DEPTH], pj1[DEPTH]; /* the first DEPTH rounds (first key, split end), for the newest key below */
#pragma unroll
    for (int d = 0; d < DEPTH; d++) {
        if (d) dec_next_round<KR>(ls, lr, lj1, chunk, len, s1);
        pr[d] = lr;
        pj1[d] = lj1;
        dec_load<HD, GROUPS, I8>(K, V, KS, VS, lr, g, lj1, len - 1, kbuf[d], vbuf[d], ksbuf[d], vsbuf[d]);
    }
    /* the fused write's RoPE tables at the row's position (written once at load, so read before the wait too) */
    uint4 cosw[EPL / 8] = {}, sinw[EPL / 8] = {};
    if (FUSED) {
#pragma unroll
        for (int c = 0; c < EPL / 8; c++) {
            cosw[c] = ld_stream((const uint4 *)(wr.cos_t + (size_t)(len - 1) * HD + li * EPL + c * 8));
            sinw[c] = ld_stream((const uint4 *)(wr.sin_t + (size_t)(len - 1) * HD + li * EPL + c * 8));
        }
    }
    pdl_wait();
    float qf[EPL];
    if constexpr (FUSED) {
        /* q = rope(q), and the block whose splits hold the newest position writes it: warp 0's first LPK lanes
         * K = rope(k), the next LPK V, each (row, head) quantized as fk_kv_write_i8 does (amax over the head's
         * rounded values, scale = amax / 127, q = clamp(round(x / scale)), 0 where the scale is 0), into the cache
         * and into shared memory, from where this block's own rounds take it (they never load it). */
        const uint16_t *row = gqkv + (size_t)b * 4 * D + h * HD + li * EPL;
        const bool writer = s1 == ns;             /* block-uniform: the newest key is in the row's last split */
        const int which = (t % (2 * LPK)) / LPK; /* writer's warp 0: 0 K, 1 V (lanes past 2 * LPK repeat them, write nothing) */
        uint4 xw[EPL / 8], kvw[EPL / 8];
        /* q's and the writer's k or v loads issued together: the writer, last of its cluster to finish, waits on
         * one latency, not two in a row */
#pragma unroll
        for (int c = 0; c < EPL / 8; c++) xw[c] = ld_act(row + D + c * 8);
        if (writer && t < 32) {
#pragma unroll
            for (int c = 0; c < EPL / 8; c++) kvw[c] = ld_act(row + (size_t)(2 + which) * D + c * 8);
        }
        dec_rope<LPK, EPL>(xw, cosw, sinw, li, qf);
        if (writer) {
            if (t < 32) {
                float x[EPL];
                dec_rope<LPK, EPL>(kvw, cosw, sinw, li, x); /* every lane: shuffles */
                if (which) { /* V is not rotated */
#pragma unroll
                    for (int c = 0; c < EPL / 8; c++) {
                        float xc[8];
                        unpack8(kvw[c], xc);
#pragma unroll
                        for (int k = 0; k < 8; k++) x[c * 8 + k] = xc[k];
                    }
                }
                if constexpr (!I8) { /* bf16: the rounded values as they are (dec_rope rounds k to bf16) */
                    uint32_t wb[EPL / 2];
#pragma unroll
                    for (int k = 0; k < EPL / 2; k++) wb[k] = (uint32_t)f2bf(x[2 * k]) | (uint32_t)f2bf(x[2 * k + 1]) << 16;
                    if (t < 2 * LPK) {
                        const uint4 w16 = make_uint4(wb[0], wb[1], wb[2], wb[3]);
                        const size_t at = (size_t)row_seq[b] * seq_stride + ((size_t)h * max_ctx + len - 1) * HD + li * EPL;
                        *(uint4 *)((which ? wr.v16 : wr.k16) + at) = w16;
                        s_new[which][li] = w16;
                    }
                } else {
                float amax = 0.0f;
#pragma unroll
                for (int k = 0; k < EPL; k++) amax = fmaxf(amax, fabsf(x[k]));
#pragma unroll
                for (int o = LPK / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
                const float sc = __fdiv_rn(amax, 127.0f);
                uint32_t wq[EPL / 4] = {};
#pragma unroll
                for (int k = 0; k < EPL; k++) {
                    int qv = 0;
                    if (sc != 0.0f) {
                        qv = __float2int_rn(__fdiv_rn(x[k], sc));
                        qv = qv > 127 ? 127 : qv < -127 ? -127 : qv;
                    }
                    wq[k / 4] |= (uint32_t)(uint8_t)(int8_t)qv << (8 * (k % 4));
                }
                if (t < 2 * LPK) {
                    const uint4 w8 = make_uint4(wq[0], wq[1], wq[2], wq[3]);
                    const size_t at = (size_t)row_seq[b] * seq_stride + ((size_t)h * max_ctx + len - 1) * HD + li * EPL;
                    *(uint4 *)((which ? wr.v8 : wr.k8) + at) = w8;
                    s_new[which][li] = w8;
                    if (li == 0) {
                        (which ? wr.vs : wr.ks)[sbase + len - 1] = sc;
                        s_nsc[which] = sc;
                    }
                }
                }
            }
            __syncthreads();
#pragma unroll
            for (int d = 0; d < DEPTH; d++)
                dec_take_newest<GROUPS>(s_new, s_nsc, li, pr[d], g, pj1[d], len - 1, kbuf[d], vbuf[d], ksbuf[d], vsbuf[d]);
        }
    } else {
#pragma unroll
        for (int d = 0; d < DEPTH; d++)
            dec_load_newest<HD, GROUPS, I8>(K, V, KS, VS, pr[d], g, pj1[d], len - 1, kbuf[d], vbuf[d], ksbuf[d], vsbuf[d]);
        unpack_kv<I8>(ld_act(q + (size_t)b * D + h * HD + li * EPL), qf);
    }
    /* The gate of dim t is loaded now (used only by the merge): its latency hides behind the keys' arithmetic
     * instead of following the merge. */
    const bool may_merge = CLUSTER ? bx == 0 : true;
    uint16_t graw = 0;
    if (may_merge && t < HD) graw = ld_act16(gqkv + (size_t)b * 4 * D + h * HD + t);
    float *part = s_part; /* where this block's partials go */
    if (CLUSTER) {
        cluster_wait_acquire(); /* every block of the cluster has started: its shared memory exists */
        part = cluster_map(s_part, 0);
    }

    float m = -INFINITY, l = 0.0f, acc[EPL];
#pragma unroll
    for (int i = 0; i < EPL; i++) acc[i] = 0.0f;
    int np = 0; /* splits parked */
    /* One round from buffer (kc, vc), then the buffer's refill; true after the block's last round. */
    auto step = [&](word(&kc)[DEC_KPT], word(&vc)[DEC_KPT], float(&ksc)[DEC_KPT], float(&vsc)[DEC_KPT]) -> bool {
        float sc[DEC_KPT], smax = -INFINITY;
#pragma unroll
        for (int u = 0; u < DEC_KPT; u++) {
            float kf[EPL], p = 0.0f;
            unpack_kv<I8>(kc[u], kf);
#pragma unroll
            for (int i = 0; i < EPL; i++) p += qf[i] * kf[i];
#pragma unroll
            for (int o = LPK / 2; o > 0; o >>= 1) p += __shfl_xor_sync(0xffffffffu, p, o);
            if (I8) p *= ksc[u]; /* the key's scale: sum(q * k8) * scale_k, then 1/sqrt(hd) */
            sc[u] = cr + u * GROUPS + g < cj1 ? p * scale : -INFINITY;
            smax = fmaxf(smax, sc[u]);
        }
        float m_new = fmaxf(m, smax);
        if (m_new != -INFINITY) { /* this group had a key in this round */
            float alpha = expf(m - m_new);
            l *= alpha;
#pragma unroll
            for (int i = 0; i < EPL; i++) acc[i] *= alpha;
#pragma unroll
            for (int u = 0; u < DEC_KPT; u++) {
                float p = expf(sc[u] - m_new), vf[EPL];
                unpack_kv<I8>(vc[u], vf);
                l += p;
                const float pv = I8 ? p * vsc[u] : p; /* int8: the value row's scale folded into its weight */
#pragma unroll
                for (int i = 0; i < EPL; i++) acc[i] += pv * vf[i];
            }
            m = m_new;
        }
        /* the buffer is free: the round DEPTH ahead goes into it, in flight during the other buffers' rounds */
        advance_load();
        if constexpr (FUSED) { /* the newest key from shared memory (only the block that wrote it has it in a round) */
            dec_load<HD, GROUPS, I8>(K, V, KS, VS, lr, g, lj1, len - 1, kc, vc, ksc, vsc);
            dec_take_newest<GROUPS>(s_new, s_nsc, li, lr, g, lj1, len - 1, kc, vc, ksc, vsc);
        } else {
            dec_load<HD, GROUPS, I8>(K, V, KS, VS, lr, g, lj1, -1, kc, vc, ksc, vsc);
        }
        if (cr + KR < cj1) { /* split cs goes on */
            cr += KR;
            return false;
        }
        /* split cs is done: park this group's part of it */
        if (li == 0) {
            s_pm[np][g] = m;
            s_pl[np][g] = l;
        }
        /* EPL / 4 16-byte stores */
        float4 *pk = (float4 *)&s_pacc[np][g * HD + li * EPL];
#pragma unroll
        for (int c = 0; c < EPL / 4; c++) pk[c] = make_float4(acc[4 * c], acc[4 * c + 1], acc[4 * c + 2], acc[4 * c + 3]);
        np++;
        const bool last = cs + 1 >= s1;
        if (np == PARK || last) {
            /* merge the parked splits' key groups (fixed group order) into partials cs+1-np .. cs: first each
             * (split, group) weight once, then each (split, dim) sum from them */
            __syncthreads();
            const int sb = cs + 1 - np;
            for (int it = t; it < np * GROUPS; it += DEC_THREADS) {
                const int p = it / GROUPS, k = it % GROUPS;
                float M = -INFINITY;
                for (int k2 = 0; k2 < GROUPS; k2++) M = fmaxf(M, s_pm[p][k2]);
                s_pw[p][k] = expf(s_pm[p][k] - M); /* (not read for a group with no key) */
                if (k == 0) s_pM[p] = M;
            }
            __syncthreads();
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
            /* The park is rewritten by the next splits, and s_part is read below; after the block's last split
             * in cluster mode the cluster barrier that follows orders both, so this one is left out there. */
            if (!(CLUSTER && last)) __syncthreads();
            np = 0;
        }
        if (last) return true;
        m = -INFINITY;
        l = 0.0f;
#pragma unroll
        for (int i = 0; i < EPL; i++) acc[i] = 0.0f;
        cs++;
        cr = cs * chunk;
        cj1 = min(len, cr + chunk);
        return false;
    };
    if constexpr (DEPTH == 3)
        while (!step(kbuf[0], vbuf[0], ksbuf[0], vsbuf[0]) && !step(kbuf[1], vbuf[1], ksbuf[1], vsbuf[1]) &&
               !step(kbuf[2], vbuf[2], ksbuf[2], vsbuf[2])) {
        }
    else
        while (!step(kbuf[0], vbuf[0], ksbuf[0], vsbuf[0]) && !step(kbuf[1], vbuf[1], ksbuf[1], vsbuf[1])) {
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
    if (t < ns) { /* each split's weight once (not once per dim) */
        float M = -INFINITY;
        for (int k = 0; k < ns; k++) M = fmaxf(M, s_part[k * PW]);
        s_sw[t] = expf(s_part[t * PW] - M);
    }
    __syncthreads();
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

extern "C" size_t fk_attn_decode_work_floats(int B, int H, int hd, int max_ctx) {
    /* the most splits any setting gives */
    return (size_t)B * H * dec_nsplit(H, max_ctx, FK_ATTND_SPLIT, DEC_MIN_KEYS, DEC_MAX_SPLITS * H) * (hd + 4);
}

/* Whether the context's device runs the cluster merge: sm_90 (kc->pdl) and a cluster of DEC_MAX_CLUSTER blocks
 * of the heaviest instantiation (head_dim 128, 3 blocks per SM) fits (a MIG slice may say no). Clusters above 8
 * blocks are "non-portable": allowed per kernel, so every cluster instantiation gets the attribute here. */
template <bool I8>
using dec_kernel_fn = void (*)(const uint16_t *, const typename dec_kv<I8>::elem *, const typename dec_kv<I8>::elem *,
                               const float *, const float *, long long, const int32_t *, const int32_t *, int, int, int,
                               int, float, float *, int *, const uint16_t *, uint16_t *, dec_write);
int fk_attn_decode_ctx_init(fk_ctx *kc) {
    kc->dec_impl = FK_ATTND_AUTO;
    kc->dec_spb = 0;
    kc->dec_split_blocks = 0;
    kc->clusters_ok = 0;
    memset(kc->dec_i8_fit, 0, sizeof kc->dec_i8_fit);
    if (!kc->pdl) return 0;
    const dec_kernel_fn<false> cl[] = {
        attn_decode_kernel<16, true, 3, false, false>, attn_decode_kernel<16, true, 4, false, false>,
        attn_decode_kernel<32, true, 3, false, false>, attn_decode_kernel<32, true, 4, false, false>,
        attn_decode_kernel<64, true, 3, false, false>, attn_decode_kernel<64, true, 4, false, false>,
        attn_decode_kernel<128, true, 3, false, false>, attn_decode_kernel<128, true, 4, false, false>,
        /* the bf16 cache with its write fused in (fk_attn_decode_write) */
        attn_decode_kernel<32, true, 3, false, true>, attn_decode_kernel<32, true, 4, false, true>,
        attn_decode_kernel<64, true, 3, false, true>, attn_decode_kernel<64, true, 4, false, true>,
        attn_decode_kernel<128, true, 3, false, true>, attn_decode_kernel<128, true, 4, false, true>};
    const dec_kernel_fn<true> cl8[] = {attn_decode_kernel<32, true, 3, true, false>, attn_decode_kernel<64, true, 3, true, false>,
                                       attn_decode_kernel<128, true, 3, true, false>}; /* int8: 3 blocks per SM only */
    int refused = 0;
    for (size_t i = 0; i < sizeof cl / sizeof cl[0]; i++)
        refused |= cudaFuncSetAttribute(cl[i], cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess;
    for (size_t i = 0; i < sizeof cl8 / sizeof cl8[0]; i++)
        refused |= cudaFuncSetAttribute(cl8[i], cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess;
    if (refused) {
        (void)cudaGetLastError(); /* a refusal here only means "split" */
        return 0;
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = DEC_MAX_CLUSTER;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(DEC_MAX_CLUSTER, 1, 1);
    cfg.blockDim = DEC_THREADS;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int n = 0;
    kc->clusters_ok = cudaOccupancyMaxActiveClusters(&n, (const void *)attn_decode_kernel<128, true, 3, false, false>, &cfg) == cudaSuccess && n >= 1;
    (void)cudaGetLastError();
    for (int i = 0; i < 3 && kc->clusters_ok; i++)
        for (int size = 1; size <= DEC_MAX_CLUSTER; size++) {
            attr[0].val.clusterDim.x = size;
            cfg.gridDim = dim3(size, 1, 1);
            n = 0;
            if (cudaOccupancyMaxActiveClusters(&n, (const void *)cl8[i], &cfg) != cudaSuccess) n = 0;
            kc->dec_i8_fit[i][size] = n;
        }
    (void)cudaGetLastError();
    return 0;
}

extern "C" int fk_ctx_set_attn_decode_impl(fk_ctx *kc, int impl, int spb) {
    if (impl != FK_ATTND_SPLIT && impl != FK_ATTND_CLUSTER && impl != FK_ATTND_AUTO) {
        frigg_set_error("attn_decode: unknown merge mode %d", impl);
        return -1;
    }
    if (impl == FK_ATTND_CLUSTER && !kc->clusters_ok) {
        frigg_set_error("attn_decode: the cluster merge needs an sm_90 device that runs %d-block clusters", DEC_MAX_CLUSTER);
        return -1;
    }
    if (spb < 0 || spb > DEC_MAX_SPLITS) {
        frigg_set_error("attn_decode: %d splits per block (0 = by batch size, else 1..%d)", spb, DEC_MAX_SPLITS);
        return -1;
    }
    kc->dec_impl = impl;
    kc->dec_spb = spb;
    return 0;
}

extern "C" int fk_ctx_set_attn_decode_split_blocks(fk_ctx *kc, int n) {
    if (n < 0 || n > 4096) {
        frigg_set_error("attn_decode: %d split blocks (0 = the shipped count, else 1..4096)", n);
        return -1;
    }
    kc->dec_split_blocks = n;
    return 0;
}

/* The merge mode a call uses: the one set, or auto's choice for this device (what frigg-bench reports). */
extern "C" int fk_ctx_attn_decode_impl(const fk_ctx *kc) {
    if (kc->dec_impl != FK_ATTND_AUTO) return kc->dec_impl;
    return kc->clusters_ok ? FK_ATTND_CLUSTER : FK_ATTND_SPLIT;
}

/* Launch bounds (results never depend on them). Cluster: 3 blocks per SM (three rounds in flight) while the
 * grid has at most 2 blocks per SM, else 4: cluster/3 against cluster/4 at ctx 512, 2048, 4096 measured B=1
 * (192-264 blocks) 3.66/6.24/10.91 against 3.91/7.51/11.75 µs, but B=2..8 (384+ blocks: clusters then no
 * longer all fit at 3 per SM) 7.05/12.81 against 4.82/9.62 at ctx 512 (the kernels/dev/attn_decode timings in
 * benchmarks/h200-2026-11-30/). Split: 4 (split/3 was faster only at B=8, by 3-6%, and up to 17% slower at B=2). */
static int dec_pick_minb(const fk_ctx *kc, int impl, long long blocks) {
    return impl == FK_ATTND_CLUSTER && blocks <= 2LL * kc->sms ? 3 : 4;
}

/* Splits per block when not fixed: the fewest that keep B*H*blocks within about `wave` blocks per SM (one wave:
 * DEC_WAVE_BLOCKS, or the 3 the int8 kernel is compiled for), so batch 1 keeps one split per block and batch 8
 * streams several per block. fit (the int8 kernel in cluster mode; NULL elsewhere): fit[n] clusters of n blocks
 * run at once (a cluster's blocks must share a GPC); where that wave's B*H clusters are more, the fewest splits per
 * block from there on whose clusters all fit, if any does. Batch 2 at ctx 4096 made 24 clusters of 16 blocks
 * where 21 fit (Max Active Clusters, benchmarks/h200-2026-12-03/kvdiag/attn-int8-base.txt): two waves, 21.29 us
 * per launch (kernels/dev/attn_decode_i8, kvsplits/). */
static int dec_auto_spb(const fk_ctx *kc, int B, int H, int nsplit, int wave, const int *fit) {
    long long target = (long long)kc->sms * wave;
    int spb = 1;
    while (spb < nsplit && (long long)B * H * ((nsplit + spb - 1) / spb) > target) spb++;
    if (!fit && (long long)B * H > target && nsplit > 1) {
        /* Even one block per (row, head) is more than a wave: the last wave runs part-empty. Two blocks per (row,
         * head) where they fill the waves better: batch 64 at ctx 512 makes 768 blocks of 16 splits for 528 slots
         * (1.45 waves, the second 45 % full) or 1,536 of 8 (2.91 waves); 58.73 against 53.43 us per launch, batch
         * 48 51.98 against 44.48 (kernels/dev/attn_decode, benchmarks/h200-2026-12-03/attnwave/). Four or more
         * blocks filled the waves better still and ran slower (59.98 and 46.86 us): a block's fixed costs. */
        const int half = (nsplit + 1) / 2;
        const long long one = (long long)B * H, two = 2 * one;
        /* the fraction of the waves' slots that hold a block, compared as one * waves(two) < two * waves(one) */
        if (one * ((two + target - 1) / target) < two * ((one + target - 1) / target)) spb = half;
    }
    for (int s = spb; fit && s <= nsplit; s++) {
        const int size = (nsplit + s - 1) / s;
        if (size <= DEC_MAX_CLUSTER && (long long)B * H <= fit[size]) return s;
    }
    return spb;
}

template <int HD, int MINB, bool I8, bool FW = false>
static int dec_launch(const fk_ctx *kc, int impl, int spb, dim3 grid, cudaStream_t s, const uint16_t *q,
                      const typename dec_kv<I8>::elem *k_slot, const typename dec_kv<I8>::elem *v_slot, const float *k_scale,
                      const float *v_scale, long long seq_stride, const int32_t *row_seq, const int32_t *row_pos, int H,
                      int max_ctx, int nsplit, float scale, float *work, int *counters, const uint16_t *gqkv, uint16_t *y,
                      dec_write wr) {
    if (impl == FK_ATTND_SPLIT) {
        fk_launch(kc, attn_decode_kernel<HD, false, MINB, I8, FW>, grid, DEC_THREADS, 0, s, q, k_slot, v_slot, k_scale, v_scale,
                  seq_stride, row_seq, row_pos, H, max_ctx, nsplit, spb, scale, work, counters, gqkv, y, wr);
        return 0;
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
    cfg.numAttrs = kc->pdl ? 2 : 1;
    cudaError_t e = cudaLaunchKernelEx(&cfg, attn_decode_kernel<HD, true, MINB, I8, FW>, q, k_slot, v_slot, k_scale, v_scale,
                                       seq_stride, row_seq, row_pos, H, max_ctx, nsplit, spb, scale, work, counters, gqkv, y,
                                       wr);
    if (e != cudaSuccess) {
        frigg_set_error("attn_decode: cluster launch of %u blocks: %s", grid.x, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* One launch's layout, the same for both caches: the merge mode, splits per (row, head) and per block, the
 * grid, and the launch bounds. */
struct dec_plan {
    int impl, nsplit, spb, minb;
    dim3 grid;
    float scale;
};
static dec_plan dec_plan_for(const fk_ctx *kc, int B, int H, int hd, int max_ctx, bool i8) {
    dec_plan p;
    p.impl = fk_ctx_attn_decode_impl(kc);
    p.nsplit = dec_nsplit(H, max_ctx, p.impl, i8 ? DEC_MIN_KEYS_I8 : DEC_MIN_KEYS,
                          kc->dec_split_blocks ? kc->dec_split_blocks : DEC_SPLIT_BLOCKS);
    const int *fit = i8 && p.impl == FK_ATTND_CLUSTER ? kc->dec_i8_fit[hd == 32 ? 0 : hd == 64 ? 1 : 2] : NULL;
    p.spb = kc->dec_spb ? kc->dec_spb : dec_auto_spb(kc, B, H, p.nsplit, i8 ? 3 : DEC_WAVE_BLOCKS, fit);
    if (p.spb > p.nsplit) p.spb = p.nsplit;
    p.grid = dim3((p.nsplit + p.spb - 1) / p.spb, H, B);
    p.minb = i8 ? 3 : dec_pick_minb(kc, p.impl, (long long)p.grid.x * H * B);
    p.scale = (float)(1.0 / sqrt((double)hd));
    return p;
}

extern "C" int fk_attn_decode(const fk_ctx *kc, const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot,
                              long long seq_stride, const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv,
                              int B, int H, int hd, int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s) {
    if (B < 1 || H < 1 || max_ctx < 1) {
        frigg_set_error("attn_decode: bad shape B=%d H=%d max_ctx=%d", B, H, max_ctx);
        return -1;
    }
    const dec_plan p = dec_plan_for(kc, B, H, hd, max_ctx, false);
    int rc;
#define DEC_ARGS kc, p.impl, p.spb, p.grid, s, q, k_slot, v_slot, (const float *)NULL, (const float *)NULL, seq_stride, \
                 row_seq, row_pos, H, max_ctx, p.nsplit, p.scale, work, counters, gqkv, y, dec_write{}
    switch (hd) {
    case 16: rc = p.minb == 4 ? dec_launch<16, 4, false>(DEC_ARGS) : dec_launch<16, 3, false>(DEC_ARGS); break;
    case 32: rc = p.minb == 4 ? dec_launch<32, 4, false>(DEC_ARGS) : dec_launch<32, 3, false>(DEC_ARGS); break;
    case 64: rc = p.minb == 4 ? dec_launch<64, 4, false>(DEC_ARGS) : dec_launch<64, 3, false>(DEC_ARGS); break;
    case 128: rc = p.minb == 4 ? dec_launch<128, 4, false>(DEC_ARGS) : dec_launch<128, 3, false>(DEC_ARGS); break;
    default:
        frigg_set_error("attention: head_dim %d is not supported by the CUDA backend (16, 32, 64 or 128)", hd);
        return -1;
    }
#undef DEC_ARGS
    if (rc) return rc;
    return fk_check_launch("attn_decode");
}

/* The shapes the kernel with the step's write fused in takes (fk_attn_decode_write, fk_attn_decode_i8): grid
 * dimensions within 65535, head_dim 32, 64 or 128 (dec_rope's 8-dim pieces per lane), a sequence stride of whole
 * heads covering H heads of max_ctx positions. 0, or -1 with the error named by `who`. */
static int dec_fused_shape(const char *who, int B, int H, int hd, int max_ctx, long long seq_stride) {
    if (B < 1 || H < 1 || max_ctx < 1 || B > 65535 || H > 65535) {
        frigg_set_error("%s: bad shape B=%d H=%d max_ctx=%d", who, B, H, max_ctx);
        return -1;
    }
    if (hd != 32 && hd != 64 && hd != 128) {
        frigg_set_error("%s: head_dim %d is not supported (32, 64 or 128)", who, hd);
        return -1;
    }
    if (seq_stride < (long long)H * max_ctx * hd || seq_stride % hd) {
        frigg_set_error("%s: sequence stride %lld is not a multiple of head_dim %d covering %d heads of %d positions", who,
                        seq_stride, hd, H, max_ctx);
        return -1;
    }
    return 0;
}

/* The bf16 cache with the step's write fused in, as the int8 cache's (below): from the gqkv rows as projected, every
 * block rotates its q, and the block holding the row's newest position rotates k and stores K and V into the
 * cache. For the decode steps past 8 rows: the GEMM step's projections are cuBLAS's and cannot carry the write in
 * an epilogue (there it replaces fk_rope_kv and its launch), and the GEMV step there runs a plain gqkv pass then
 * this in place of its QKV epilogue (cuda_engine.c). The same RoPE (dec_rope: fk_rope_kv's arithmetic), so the
 * same cache bits and the same output as fk_rope_kv then fk_attn_decode. */
extern "C" int fk_attn_decode_write(const fk_ctx *kc, const uint16_t *gqkv, const uint16_t *cos_t, const uint16_t *sin_t,
                                    uint16_t *k_slot, uint16_t *v_slot, long long seq_stride, const int32_t *row_seq,
                                    const int32_t *row_pos, int B, int H, int hd, int max_ctx, float *work, int *counters,
                                    uint16_t *y, cudaStream_t s) {
    if (dec_fused_shape("attn_decode_write", B, H, hd, max_ctx, seq_stride)) return -1;
    /* a lane's 8 bf16 of K, V, q, k, v, cos and sin: one 16-byte load or store each */
    if (!fk_aligned16(k_slot) || !fk_aligned16(v_slot) || !fk_aligned16(gqkv) || !fk_aligned16(cos_t) ||
        !fk_aligned16(sin_t)) {
        frigg_set_error("attn_decode_write: misaligned buffers (the cache, gqkv and the RoPE tables 16-byte aligned)");
        return -1;
    }
    const dec_plan p = dec_plan_for(kc, B, H, hd, max_ctx, false);
    const dec_write wr = {cos_t, sin_t, NULL, NULL, NULL, NULL, k_slot, v_slot};
    int rc;
#define DEC_ARGS kc, p.impl, p.spb, p.grid, s, (const uint16_t *)NULL, k_slot, v_slot, (const float *)NULL, \
                 (const float *)NULL, seq_stride, row_seq, row_pos, H, max_ctx, p.nsplit, p.scale, work, counters, gqkv, y, wr
    switch (hd) {
    case 32: rc = p.minb == 4 ? dec_launch<32, 4, false, true>(DEC_ARGS) : dec_launch<32, 3, false, true>(DEC_ARGS); break;
    case 64: rc = p.minb == 4 ? dec_launch<64, 4, false, true>(DEC_ARGS) : dec_launch<64, 3, false, true>(DEC_ARGS); break;
    default: rc = p.minb == 4 ? dec_launch<128, 4, false, true>(DEC_ARGS) : dec_launch<128, 3, false, true>(DEC_ARGS); break;
    }
#undef DEC_ARGS
    if (rc) return rc;
    return fk_check_launch("attn_decode_write");
}

/* The int8 cache: the same kernel, layouts, splits and merges (so the same batch invariance), over int8 keys and
 * values with their per-(position, head) scales, with the step's write fused in: RoPE on q and k from the gqkv
 * rows, and the newest K and V quantized into the cache by the block that attends to them. */
extern "C" int fk_attn_decode_i8(const fk_ctx *kc, const uint16_t *gqkv, const uint16_t *cos_t, const uint16_t *sin_t,
                                 int8_t *k8, int8_t *v8, float *k_scale, float *v_scale, long long seq_stride,
                                 const int32_t *row_seq, const int32_t *row_pos, int B, int H, int hd, int max_ctx,
                                 float *work, int *counters, uint16_t *y, cudaStream_t s) {
    if (dec_fused_shape("attn_decode_i8", B, H, hd, max_ctx, seq_stride)) return -1;
    /* a lane's 16 int8 values are one 16-byte load or store, a scale 4 bytes; each 8 of its bf16 of q, k, v, cos and
     * sin one 16-byte load */
    if (!fk_aligned16(k8) || !fk_aligned16(v8) || ((uintptr_t)k_scale | (uintptr_t)v_scale) & 3 || !fk_aligned16(gqkv) ||
        !fk_aligned16(cos_t) || !fk_aligned16(sin_t)) {
        frigg_set_error("attn_decode_i8: misaligned buffers (int8 values 16-byte, scales 4-byte, gqkv and the RoPE tables "
                        "16-byte aligned)");
        return -1;
    }
    const dec_plan p = dec_plan_for(kc, B, H, hd, max_ctx, true);
    const dec_write wr = {cos_t, sin_t, k8, v8, k_scale, v_scale, NULL, NULL};
    int rc;
#define DEC_ARGS kc, p.impl, p.spb, p.grid, s, (const uint16_t *)NULL, k8, v8, k_scale, v_scale, seq_stride, row_seq, \
                 row_pos, H, max_ctx, p.nsplit, p.scale, work, counters, gqkv, y, wr
    /* Always 3 blocks per SM with two rounds in flight (the kernel's DEPTH for int8): a lane's 16 values, q and acc
     * take 168 registers without spill, and at 4 blocks per SM (128 registers) ptxas spills about 380 bytes per
     * thread. */
    switch (hd) {
    case 32: rc = dec_launch<32, 3, true>(DEC_ARGS); break;
    case 64: rc = dec_launch<64, 3, true>(DEC_ARGS); break;
    default: rc = dec_launch<128, 3, true>(DEC_ARGS); break;
    }
#undef DEC_ARGS
    if (rc) return rc;
    return fk_check_launch("attn_decode_i8");
}
