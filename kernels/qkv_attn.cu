/* qkv_attn.cu — batch-1 decode's first two kernels in one: the normed gqkv projection with its RoPE + KV-write
 * epilogue (fk_gemv_qkv) and decode attention with the gate (fk_attn_decode), one thread-block cluster per
 * head.
 *
 * Why: at batch 1 a layer step is five dependent kernels, and each boundary costs about 0.85 us (run 41) plus
 * the round trip of the boundary's data through L2; attention moves 0.7 us of keys in 3.2 us (ablate-run57).
 * Here the 16 blocks of head h compute the head's 4 x 128 gqkv rows (gate, q, k, v), put the results in
 * every block's shared memory (distributed shared memory: no global round trip), and after one cluster
 * barrier run attention's split of the head's keys exactly as the attention kernel does (attn_decode_body.cuh).
 * The q, k and v of the new position never wait for a kernel boundary.
 *
 * The same bits as the two kernels it replaces (tests/test_cuda_qkv_attn.c): a warp computes a pair of rows as
 * the CUDA-core GEMV does at batch 1 (gemv.cu: lane chunks in increasing order, the same dot8 and warp_sum);
 * the input RMSNorm sums its squares over the first 128 threads, the block size of that GEMV; the epilogue's
 * roundings are qkv_pair_bits; the attention is dec_body with the cluster mode's split layout. So the
 * engine uses it wherever the unfused pair would run the CUDA-core gqkv and the cluster attention at batch 1
 * with default settings (fk_qkv_attn_applies), and FRIGG_QKV_ATTN=off turns it off for an A/B.
 *
 * Block layout (head_dim 128): 256 threads, 8 warps; the cluster's 16 blocks split the head's 256 row pairs
 * (4 sections x 64 pairs), 16 per block, 2 per warp; each lane keeps 3 chunks of each of its 4 rows in flight
 * (two rounds for K 1536), the first round requested before the programmatic-launch wait. Then warps 0-3 run
 * the attention (DEC_THREADS threads, their own named barrier) while warps 4-7 only take part in the cluster
 * barriers. The fused kernel does not write q or the gate to global memory (nothing else reads them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_decode_body.cuh"
#include "gemv_common.cuh"

#ifndef QA_THREADS /* an A/B hook: make FRIGG_NVCC_DEFS=-DQA_THREADS=128 */
#define QA_THREADS 256     /* threads per block */
#endif
#define QA_MINB (512 / QA_THREADS) /* blocks per SM the launch bounds aim at: 128 registers */
#define QA_CLUSTER 16      /* blocks per head (one cluster); also the most splits per row it can lay out */
#ifndef QA_U /* an A/B hook: make FRIGG_NVCC_DEFS=-DQA_U=6 */
#define QA_U 3             /* chunks per lane and row in flight: gemv.cu's batch-1 pair kernel (GEMV_SHORT_UNROLL) */
#endif
#define QA_NORM_THREADS 128 /* the CUDA-core GEMV's block size (gemv.cu GEMV_WARPS x 32): its norm partition */
#define QA_BAR 1           /* the named barrier of the attention warps (0 is __syncthreads) */
#define QA_MAX_D 4096      /* hidden sizes up to this: the normalised x in at most 8 KB of dynamic shared memory */

int dec_fused_nsplit(int H, int max_ctx); /* attention_decode.cu */

/* dec_body's q, gate and newest key from this block's shared memory (the head's rows, bf16). */
struct qa_src {
    const uint16_t *g, *q, *k, *v;
    /* barrier 2: every block's rows are in this block's shared memory */
    __device__ __forceinline__ void before_q() const { cluster_wait_acquire(); }
    __device__ __forceinline__ void after_q() const {}
    __device__ __forceinline__ void idle() const {
        cluster_wait_acquire();   /* barrier 2 */
        cluster_arrive_release(); /* barrier 3: the attention partials */
        cluster_wait_acquire();
    }
    __device__ __forceinline__ void sync() const { asm volatile("bar.sync %0, %1;" ::"n"(QA_BAR), "n"(DEC_THREADS) : "memory"); }
    __device__ __forceinline__ uint4 q8(int, int, int, int, int li) const { return *(const uint4 *)(q + li * 8); }
    __device__ __forceinline__ uint16_t gate(int, int, int, int, int t) const { return g[t]; }
    __device__ __forceinline__ void newest(const uint16_t *, const uint16_t *, int, int, int li, uint4 &kb,
                                           uint4 &vb) const {
        kb = *(const uint4 *)(k + li * 8);
        vb = *(const uint4 *)(v + li * 8);
    }
};

/* The address of `p` (this block's shared memory) in block `rank` of the cluster. */
__device__ __forceinline__ uint16_t *cluster_map16(uint16_t *p, unsigned rank) {
    return (uint16_t *)cluster_map((float *)p, rank);
}

/* grid (QA_CLUSTER, H), cluster (QA_CLUSTER, 1, 1), QA_THREADS threads, D * 2 bytes of dynamic shared memory
 * (the normalised x). W: gqkv [4D][D]; x [D]; qa: the QKV epilogue's tables and cache (fk_qkv_epi, batch row
 * 0); y [D]: the gated attention output. */
template <int HD>
__global__ void __launch_bounds__(QA_THREADS, QA_MINB)
    qkv_attn_kernel(const uint16_t *__restrict__ W, int D, const uint16_t *__restrict__ x, float eps, fk_qkv_epi qa,
                    int H, int nsplit, float scale, uint16_t *__restrict__ y) {
    constexpr int HALF = HD / 2;
    constexpr int UNITS = 4 * HALF / QA_CLUSTER;      /* row pairs per block */
    constexpr int UPW = UNITS / (QA_THREADS / 32);     /* per warp */
    static_assert(UPW >= 1 && UNITS % (QA_THREADS / 32) == 0, "the head's row pairs must spread evenly over the warps");
    extern __shared__ uint4 xs[];
    __shared__ float scratch[32], rs[1];
    __shared__ __align__(16) uint16_t s_head[4][HD]; /* this head's gate, q, k, v (q, k RoPE'd), bf16 */
    const int rank = blockIdx.x, h = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nch = D / 8;
    cluster_arrive_relaxed(); /* barrier 1: this block has started (the others write into its shared memory) */
    int sec[UPW], dim[UPW];
    const uint4 *wr[UPW][2];
#pragma unroll
    for (int j = 0; j < UPW; j++) {
        const int p = rank * UNITS + warp * UPW + j; /* pair of the head: section p / HALF, dims i and i + HALF */
        sec[j] = p / HALF;
        dim[j] = p % HALF;
        const size_t row1 = (size_t)sec[j] * D + (size_t)h * HD + dim[j];
        wr[j][0] = (const uint4 *)(W + row1 * D);
        wr[j][1] = (const uint4 *)(W + (row1 + HALF) * D);
    }
    /* the first round of weights before the wait: they do not depend on earlier kernels */
    uint4 w[QA_U][UPW][2];
#pragma unroll
    for (int u = 0; u < QA_U; u++) {
        const int c = lane + 32 * u;
#pragma unroll
        for (int j = 0; j < UPW; j++)
#pragma unroll
            for (int r = 0; r < 2; r++) w[u][j][r] = c < nch ? ld_stream(wr[j][r] + c) : make_uint4(0, 0, 0, 0);
    }
#ifdef FRIGG_QA_PRE /* A/B: the epilogue operands before the wait (host-copied position, constant tables) */
    gemv_pre pres[UPW];
#pragma unroll
    for (int j = 0; j < UPW; j++) {
        pres[j] = gemv_pre{0, 0, 0, 0.0f, false, false};
        if (sec[j] != 0) pres[j] = gemv_preload<FK_GEMV_QKV>(sec[j] * D + h * HD + dim[j], 0, 4 * D, qa);
    }
#endif
#ifdef FRIGG_QA_PF /* A/B: this block's first two attention rounds of keys and values asked of L2 before the wait */
    if (threadIdx.x == 0) {
        const int len = qa.row_pos[0] + 1;
        int chunk, ns;
        dec_split(len, nsplit, chunk, ns);
        if (rank < ns) {
            const int r0 = rank * chunk, n = min(min(len, r0 + chunk) - r0, 2 * (DEC_THREADS / (HD / 8)) * DEC_KPT);
            const size_t base = (size_t)qa.row_seq[0] * qa.seq_stride + ((size_t)h * qa.max_ctx + r0) * HD;
            dec_prefetch_round<HD, 1 << 20>(qa.k_slot + base, qa.v_slot + base, 0, n);
        }
    }
#endif
    pdl_wait();
    pdl_launch();
    const uint4 *xv = stage_norm((const uint4 *)x, 1, nch, D, eps, xs, scratch, rs, QA_NORM_THREADS);
    float acc[UPW][2];
#pragma unroll
    for (int j = 0; j < UPW; j++) acc[j][0] = acc[j][1] = 0.0f;
    for (int c0 = lane; c0 < nch; c0 += 32 * QA_U) { /* chunks in increasing order: gemv.cu's sums */
        if (c0 != lane) {
#pragma unroll
            for (int u = 0; u < QA_U; u++) {
                const int c = c0 + 32 * u;
#pragma unroll
                for (int j = 0; j < UPW; j++)
#pragma unroll
                    for (int r = 0; r < 2; r++) w[u][j][r] = c < nch ? ld_stream(wr[j][r] + c) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < QA_U; u++) {
            const int c = c0 + 32 * u;
            if (c >= nch) break;
            float xf[8];
            bf16x8_unpack(xv[c], xf);
#pragma unroll
            for (int j = 0; j < UPW; j++)
#pragma unroll
                for (int r = 0; r < 2; r++) acc[j][r] += dot8(w[u][j][r], xf);
        }
    }
#pragma unroll
    for (int j = 0; j < UPW; j++) {
        acc[j][0] = warp_sum(acc[j][0]); /* every lane gets the same bits (xor butterfly) */
        acc[j][1] = warp_sum(acc[j][1]);
    }
    cluster_wait_acquire(); /* barrier 1: every block has started */
#pragma unroll
    for (int j = 0; j < UPW; j++) {
#ifdef FRIGG_QA_PRE
        const gemv_pre pre = pres[j];
#else
        gemv_pre pre = {0, 0, 0, 0.0f, false, false};
        if (sec[j] != 0) pre = gemv_preload<FK_GEMV_QKV>(sec[j] * D + h * HD + dim[j], 0, 4 * D, qa);
#endif
        uint16_t o1, o2;
        qkv_pair_bits(sec[j], acc[j][0], acc[j][1], pre, o1, o2);
        if (lane < QA_CLUSTER) { /* lane L: into block L's shared memory */
            uint16_t *dst = cluster_map16(&s_head[sec[j]][dim[j]], (unsigned)lane);
            dst[0] = o1;
            dst[HALF] = o2;
        } else if (lane == QA_CLUSTER && sec[j] >= 2) { /* k, v: into the cache for the steps to come */
            uint16_t *slot = sec[j] == 2 ? qa.k_slot : qa.v_slot;
            slot[pre.at] = o1;
            slot[pre.at + HALF] = o2;
        }
    }
    cluster_arrive_release(); /* barrier 2: this block's rows are in every block */
#ifdef FRIGG_QA_NOATTN /* timing probe only: no attention (y is left as it was: wrong output) */
    cluster_wait_acquire();
    return;
#endif
    if (threadIdx.x < DEC_THREADS) {
        const qa_src src = {s_head[0], s_head[1], s_head[2], s_head[3]};
        dec_body<HD, true, 2>(src, rank, h, 0, threadIdx.x, qa.k_slot, qa.v_slot, qa.seq_stride, qa.row_seq, qa.row_pos,
                              H, qa.max_ctx, nsplit, 1, 0, scale, nullptr, nullptr, y);
    } else {
        cluster_wait_acquire();   /* barrier 2 */
        cluster_arrive_release(); /* barrier 3: the attention partials */
        cluster_wait_acquire();
    }
}

/* FRIGG_QKV_ATTN = auto (the default: the fused kernel wherever it applies) | off, read by fk_init. */
static int qa_on = 1;
extern "C" void fk_set_qkv_attn(int on) { qa_on = on != 0; }
extern "C" int fk_get_qkv_attn(void) { return qa_on; }
int qkv_attn_init(void) {
    const char *e = getenv("FRIGG_QKV_ATTN");
    if (!e || !*e || !strcmp(e, "auto")) qa_on = 1;
    else if (!strcmp(e, "off")) qa_on = 0;
    else {
        frigg_set_error("FRIGG_QKV_ATTN must be auto or off, not '%s'", e);
        return -1;
    }
    return 0;
}

/* Whether this device runs the kernel's clusters (sm_90, 16 blocks of this size fit; a MIG slice may say no).
 * Asked once per process. */
static int qa_clusters_ok(void) {
    static int ok = -1;
    if (ok >= 0) return ok;
    if (!fk_pdl) return 0;
    ok = 0;
    void (*kern)(const uint16_t *, int, const uint16_t *, float, fk_qkv_epi, int, int, float, uint16_t *) =
        qkv_attn_kernel<128>;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess) {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = QA_CLUSTER;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3(QA_CLUSTER, 1, 1);
        cfg.blockDim = QA_THREADS;
        cfg.dynamicSmemBytes = QA_MAX_D * 2;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int n = 0;
        ok = cudaOccupancyMaxActiveClusters(&n, (const void *)kern, &cfg) == cudaSuccess && n >= 1;
    }
    (void)cudaGetLastError(); /* a refusal here only means "not fused" */
    return ok;
}

extern "C" int fk_qkv_attn_applies(int B, int D, int H, int hd, int max_ctx) {
    if (!qa_on || B != 1 || hd != 128 || H < 1 || D != H * hd || D > QA_MAX_D) return 0;
    /* the unfused pair must be the CUDA-core gqkv (whose bits this kernel has) and the cluster attention */
    if (fk_get_gemv_impl() == FK_GEMV_IMPL_TC) return 0;
    if (fk_get_gemv_impl() == FK_GEMV_IMPL_AUTO && fk_gemv_auto_impl(1, 4 * D, D, FK_GEMV_QKV) != FK_GEMV_IMPL_SIMT)
        return 0;
    int ns = dec_fused_nsplit(H, max_ctx);
    return ns >= 1 && ns <= QA_CLUSTER && qa_clusters_ok();
}

extern "C" int fk_qkv_attn(const uint16_t *W, int D, const uint16_t *x, float eps, const fk_qkv_epi *qa, int H,
                           uint16_t *y, cudaStream_t s) {
    if (!fk_qkv_attn_applies(1, D, H, qa->hd, qa->max_ctx)) {
        frigg_set_error("qkv_attn: not available for D=%d, %d heads of %d, max_ctx %d with these settings "
                        "(fk_qkv_attn_applies)", D, H, qa->hd, qa->max_ctx);
        return -1;
    }
    const int nsplit = dec_fused_nsplit(H, qa->max_ctx);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = QA_CLUSTER;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3(QA_CLUSTER, H, 1);
    cfg.blockDim = QA_THREADS;
    cfg.dynamicSmemBytes = (size_t)D * 2;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 2;
    const float scale = (float)(1.0 / sqrt((double)qa->hd));
    cudaError_t e = cudaLaunchKernelEx(&cfg, qkv_attn_kernel<128>, W, D, x, eps, *qa, H, nsplit, scale, y);
    if (e != cudaSuccess) {
        frigg_set_error("qkv_attn: cluster launch: %s", cudaGetErrorString(e));
        return -1;
    }
    return fk_check_launch("qkv_attn");
}
