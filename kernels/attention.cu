/* attention.cu — prefill attention (tiled, flash-style, PrefixLM mask computed per element, never
 * materialised) with the output gate y = bf16(bf16(sigmoid(g)) * bf16(o)) fused into the epilogue. Scores and
 * softmax are fp32 like the CPU engine; the P·V product runs on tensor cores with P split into bf16 hi + lo
 * parts so that P keeps ~16 bits of mantissa instead of bf16's 8 (HF's reference keeps P in fp32 or rounds to
 * bf16 depending on backend; the CPU engine keeps fp32, which this tracks to ~1e-5). Decode attention is in
 * attention_decode.cu. */
#include <mma.h>

#include "common.cuh"
#include "kernels.h"

using namespace nvcuda;

/* ------------------------------------------------------------------ prefill */
#define PF_BQ 64   /* query rows per block: 4 warps x 16 */
#define PF_BK 32   /* keys per tile */

template <int HD>
static size_t prefill_smem(void) {
    return (size_t)PF_BQ * HD * 2 + 2 * (size_t)PF_BK * HD * 2 + 2 * (size_t)PF_BQ * PF_BK * 2 +
           (size_t)PF_BQ * PF_BK * 4 + (size_t)PF_BQ * HD * 4 + 2 * PF_BQ * 4;
}

template <int HD>
__global__ void __launch_bounds__(128)
    attn_prefill_kernel(const uint16_t *__restrict__ q, const uint16_t *__restrict__ kc,
                        const uint16_t *__restrict__ vc, const uint16_t *__restrict__ gqkv, int T, int H, int max_ctx,
                        int P, float scale, uint16_t *__restrict__ y) {
    extern __shared__ __align__(128) unsigned char sm[];
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)sm;
    __nv_bfloat16 *Ks = Qs + PF_BQ * HD;
    __nv_bfloat16 *Vs = Ks + PF_BK * HD;
    __nv_bfloat16 *Ph = Vs + PF_BK * HD;
    __nv_bfloat16 *Pl = Ph + PF_BQ * PF_BK;
    float *Ss = (float *)(Pl + PF_BQ * PF_BK);
    float *Os = Ss + PF_BQ * PF_BK;
    float *Mrow = Os + PF_BQ * HD, *Lrow = Mrow + PF_BQ;
    const int h = blockIdx.y, t0 = blockIdx.x * PF_BQ, D = H * HD, CH = HD / 8;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    pdl_wait();
    pdl_launch();

    for (int i = tid; i < PF_BQ * CH; i += blockDim.x) {
        int r = i / CH, c = i % CH, t = t0 + r;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (t < T) v = ((const uint4 *)(q + (size_t)t * D + h * HD))[c];
        ((uint4 *)Qs)[i] = v;
    }
    for (int i = tid; i < PF_BQ * HD; i += blockDim.x) Os[i] = 0.0f;
    for (int i = tid; i < PF_BQ; i += blockDim.x) {
        Mrow[i] = -INFINITY;
        Lrow[i] = 0.0f;
    }
    /* Keys any row of this tile may see: causal up to its last row, plus the whole prefix for prefix rows. */
    int kend = t0 + PF_BQ;
    if (t0 < P && P > kend) kend = P;
    if (kend > T) kend = T;
    const uint16_t *Kh = kc + (size_t)h * max_ctx * HD, *Vh = vc + (size_t)h * max_ctx * HD;
    const int r = warp * 16 + (lane >> 1), half = lane & 1, t = t0 + r;
    __syncthreads();

    for (int j0 = 0; j0 < kend; j0 += PF_BK) {
        for (int i = tid; i < PF_BK * CH; i += blockDim.x) {
            int rr = i / CH, c = i % CH, j = j0 + rr;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (j < T) {
                kv = ((const uint4 *)(Kh + (size_t)j * HD))[c];
                vv = ((const uint4 *)(Vh + (size_t)j * HD))[c];
            }
            ((uint4 *)Ks)[i] = kv;
            ((uint4 *)Vs)[i] = vv;
        }
        __syncthreads();
        /* S = Q K^T for this warp's 16 rows. */
#pragma unroll
        for (int n = 0; n < PF_BK / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
            wmma::fill_fragment(c, 0.0f);
#pragma unroll
            for (int k = 0; k < HD / 16; k++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bk;
                wmma::load_matrix_sync(a, Qs + warp * 16 * HD + k * 16, HD);
                wmma::load_matrix_sync(bk, Ks + n * 16 * HD + k * 16, HD);
                wmma::mma_sync(c, a, bk, c);
            }
            wmma::store_matrix_sync(Ss + warp * 16 * PF_BK + n * 16, c, PF_BK, wmma::mem_row_major);
        }
        __syncwarp();
        /* Online softmax: two lanes per row, 16 columns each. */
        float s[16], mx = -INFINITY;
#pragma unroll
        for (int cc = 0; cc < 16; cc++) {
            int col = half * 16 + cc, j = j0 + col;
            bool ok = j < T && (j <= t || (t < P && j < P));
            s[cc] = ok ? Ss[r * PF_BK + col] * scale : -INFINITY;
            mx = fmaxf(mx, s[cc]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float m_old = Mrow[r], m_new = fmaxf(m_old, mx), alpha = 1.0f, psum = 0.0f;
        if (m_new != -INFINITY) alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
#pragma unroll
        for (int cc = 0; cc < 16; cc++) {
            float p = s[cc] == -INFINITY ? 0.0f : expf(s[cc] - m_new);
            psum += p;
            __nv_bfloat16 hi = __float2bfloat16_rn(p);
            Ph[r * PF_BK + half * 16 + cc] = hi;
            Pl[r * PF_BK + half * 16 + cc] = __float2bfloat16_rn(p - __bfloat162float(hi));
        }
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);
        for (int d = half * (HD / 2); d < (half + 1) * (HD / 2); d++) Os[r * HD + d] *= alpha;
        float l_old = Lrow[r];
        __syncwarp();
        if (!half) {
            Mrow[r] = m_new;
            Lrow[r] = l_old * alpha + psum;
        }
        __syncwarp();
        /* O += (P_hi + P_lo) V */
#pragma unroll
        for (int n = 0; n < HD / 16; n++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, Os + warp * 16 * HD + n * 16, HD, wmma::mem_row_major);
#pragma unroll
            for (int k = 0; k < PF_BK / 16; k++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> bv;
                wmma::load_matrix_sync(bv, Vs + k * 16 * HD + n * 16, HD);
                wmma::load_matrix_sync(a, Ph + warp * 16 * PF_BK + k * 16, PF_BK);
                wmma::mma_sync(acc, a, bv, acc);
                wmma::load_matrix_sync(a, Pl + warp * 16 * PF_BK + k * 16, PF_BK);
                wmma::mma_sync(acc, a, bv, acc);
            }
            wmma::store_matrix_sync(Os + warp * 16 * HD + n * 16, acc, HD, wmma::mem_row_major);
        }
        __syncthreads();
    }
    __syncthreads();
    for (int i = tid; i < PF_BQ * HD; i += blockDim.x) {
        int rr = i / HD, d = i % HD, tt = t0 + rr;
        if (tt >= T) continue;
        float o = rbf(Os[i] / Lrow[rr]);
        float g = bf2f(gqkv[(size_t)tt * 4 * D + h * HD + d]);
        float sg = rbf(1.0f / (1.0f + expf(-g)));
        y[(size_t)tt * D + h * HD + d] = f2bf(sg * o);
    }
}

/* The same attention with register-resident tiles (FlashAttention-2 layout): mma.sync m16n8k16 on bf16,
 * each warp owns 16 query rows; S, P and O never leave registers, because the accumulator layout of the
 * m16n8 tile (row g = lane/4, columns 2*(lane%4)+{0,1}, rows g and g+8) is known, so the per-row softmax
 * rescale and the reuse of S as the A operand of P·V need no shared memory. K and V tiles are kept [key][dim]
 * in shared memory, rows padded by 8 elements so fragment loads hit 32 distinct banks; V's B fragments come
 * from ldmatrix.trans (a transposing store into shared memory was 16-way bank-conflicted). */
#define MM_BQ 64
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

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    return (uint32_t)f2bf(lo) | ((uint32_t)f2bf(hi) << 16);
}
/* p = hi + lo with both parts bf16: ~16 significant bits of p reach the tensor cores. */
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t *hi, uint32_t *lo) {
    *hi = pack_bf16(x0, x1);
    *lo = pack_bf16(x0 - bf_lo(*hi), x1 - bf_hi(*hi));
}

template <int HD>
__global__ void __launch_bounds__(128)
    attn_prefill_mma(const uint16_t *__restrict__ q, const uint16_t *__restrict__ kc, const uint16_t *__restrict__ vc,
                     const uint16_t *__restrict__ gqkv, int T, int H, int max_ctx, int P, float scale,
                     uint16_t *__restrict__ y) {
    constexpr int KS = HD + 8, NT = MM_BK / 8, DT = HD / 8, KK = HD / 16, TILE = MM_BK * KS;
    constexpr float LOG2E = 1.4426950408889634f;
    /* Two K and two V tiles: the next tile streams in (cp.async) while this one is computed. */
    extern __shared__ __align__(16) uint16_t kv_smem[];
    uint16_t *Kbuf = kv_smem, *Vbuf = kv_smem + 2 * TILE;
    const int h = blockIdx.y, t0 = blockIdx.x * MM_BQ, D = H * HD;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
    const int r0 = t0 + warp * 16 + g, r1 = r0 + 8; /* this thread's two query rows */
    pdl_wait();
    pdl_launch();
    uint32_t qa[KK][4];
#pragma unroll
    for (int kk = 0; kk < KK; kk++) {
        const uint16_t *q0 = q + (size_t)r0 * D + h * HD + kk * 16 + 2 * tq, *q1 = q + (size_t)r1 * D + h * HD + kk * 16 + 2 * tq;
        qa[kk][0] = r0 < T ? *(const uint32_t *)q0 : 0u;
        qa[kk][1] = r1 < T ? *(const uint32_t *)q1 : 0u;
        qa[kk][2] = r0 < T ? *(const uint32_t *)(q0 + 8) : 0u;
        qa[kk][3] = r1 < T ? *(const uint32_t *)(q1 + 8) : 0u;
    }
    float o[DT][4];
#pragma unroll
    for (int i = 0; i < DT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    int kend = t0 + MM_BQ;
    if (t0 < P && P > kend) kend = P;
    if (kend > T) kend = T;
    const uint16_t *Kh = kc + (size_t)h * max_ctx * HD, *Vh = vc + (size_t)h * max_ctx * HD;
    const int ntile = (kend + MM_BK - 1) / MM_BK;
    auto load_tile = [&](int buf, int jt) {
        for (int i = tid; i < MM_BK * (HD / 8); i += blockDim.x) {
            int r = i / (HD / 8), c = i % (HD / 8), j = jt + r;
            bool ok = j < T;
            cp_async16(&Kbuf[buf * TILE + r * KS + c * 8], ok ? Kh + (size_t)j * HD + c * 8 : Kh, ok);
            cp_async16(&Vbuf[buf * TILE + r * KS + c * 8], ok ? Vh + (size_t)j * HD + c * 8 : Vh, ok);
        }
        cp_commit();
    };
    if (ntile > 0) load_tile(0, 0);
    for (int it = 0; it < ntile; it++) {
        const int j0 = it * MM_BK;
        const uint16_t *Ks = Kbuf + (it & 1) * TILE, *Vs = Vbuf + (it & 1) * TILE;
        if (it + 1 < ntile) {
            load_tile((it + 1) & 1, j0 + MM_BK);
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        float sc[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
            if (KK % 2 == 0) {
                /* ldmatrix.x4: the B fragments of two k-steps (4 8x8 tiles: keys nt*8.., dims 16kk + 0/8/16/24) */
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
        /* mask, scale, running max per row */
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int j = j0 + nt * 8 + 2 * tq + (e & 1), qr = e < 2 ? r0 : r1;
                bool ok = j < T && (j <= qr || (qr < P && j < P));
                float v = ok ? sc[nt][e] * scale : -INFINITY;
                sc[nt][e] = v;
                if (e < 2) mx0 = fmaxf(mx0, v);
                else mx1 = fmaxf(mx1, v);
            }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
        float a0 = n0 == -INFINITY || m0 == -INFINITY ? (n0 == -INFINITY ? 1.0f : 0.0f) : exp2f((m0 - n0) * LOG2E);
        float a1 = n1 == -INFINITY || m1 == -INFINITY ? (n1 == -INFINITY ? 1.0f : 0.0f) : exp2f((m1 - n1) * LOG2E);
        m0 = n0;
        m1 = n1;
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float mm = e < 2 ? m0 : m1;
                float p = sc[nt][e] == -INFINITY ? 0.0f : exp2f((sc[nt][e] - mm) * LOG2E);
                sc[nt][e] = p;
                if (e < 2) ps0 += p;
                else ps1 += p;
            }
        l0 = l0 * a0 + ps0; /* per-lane partial row sums; the 4 lanes of a row are added at the end */
        l1 = l1 * a1 + ps1;
#pragma unroll
        for (int dt = 0; dt < DT; dt++) {
            o[dt][0] *= a0;
            o[dt][1] *= a0;
            o[dt][2] *= a1;
            o[dt][3] *= a1;
        }
        /* O += P V, P as the A operand straight from the S accumulators (hi and lo parts). */
#pragma unroll
        for (int kb = 0; kb < MM_BK / 16; kb++) {
            uint32_t ah[4], al[4];
            split_pair(sc[2 * kb][0], sc[2 * kb][1], &ah[0], &al[0]);
            split_pair(sc[2 * kb][2], sc[2 * kb][3], &ah[1], &al[1]);
            split_pair(sc[2 * kb + 1][0], sc[2 * kb + 1][1], &ah[2], &al[2]);
            split_pair(sc[2 * kb + 1][2], sc[2 * kb + 1][3], &ah[3], &al[3]);
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                uint32_t b0, b1;
                unsigned addr = (unsigned)__cvta_generic_to_shared(&Vs[(kb * 16 + (lane & 15)) * KS + dt * 8]);
                asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                             : "=r"(b0), "=r"(b1)
                             : "r"(addr));
                mma16816(o[dt], ah, b0, b1);
                mma16816(o[dt], al, b0, b1);
            }
        }
        __syncthreads(); /* every warp is done with this buffer before the next iteration refills it */
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int tt = e < 2 ? r0 : r1, d = dt * 8 + 2 * tq + (e & 1);
            if (tt >= T) continue;
            float ov = rbf(o[dt][e] / (e < 2 ? l0 : l1));
            float gv = bf2f(gqkv[(size_t)tt * 4 * D + h * HD + d]);
            float sg = rbf(1.0f / (1.0f + expf(-gv)));
            y[(size_t)tt * D + h * HD + d] = f2bf(sg * ov);
        }
}

static int prefill_impl; /* 0: mma.sync register tiles (default), 1: WMMA with shared-memory tiles */
extern "C" void fk_set_prefill_impl(int impl) { prefill_impl = impl; }

template <int HD>
static int launch_prefill_mma(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *gqkv, int T, int H,
                              int max_ctx, int P, uint16_t *y, cudaStream_t s) {
    dim3 grid((T + MM_BQ - 1) / MM_BQ, H);
    float scale = (float)(1.0 / sqrt((double)HD));
    size_t smem = 4 * (size_t)MM_BK * (HD + 8) * 2; /* shared-memory limit raised in fk_attention_init */
    fk_launch(attn_prefill_mma<HD>, grid, 128, smem, s, q, k, v, gqkv, T, H, max_ctx, P, scale, y);
    return fk_check_launch("attn_prefill_mma");
}

template <int HD>
static int launch_prefill(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *gqkv, int T, int H,
                          int max_ctx, int P, uint16_t *y, cudaStream_t s) {
    size_t smem = prefill_smem<HD>(); /* limit raised in fk_attention_init */
    dim3 grid((T + PF_BQ - 1) / PF_BQ, H);
    float scale = (float)(1.0 / sqrt((double)HD));
    fk_launch(attn_prefill_kernel<HD>, grid, 128, smem, s, q, k, v, gqkv, T, H, max_ctx, P, scale, y);
    return fk_check_launch("attn_prefill");
}

/* Function attributes are per device: called by fk_init for each device a model binds. */
template <int HD>
static int raise_smem(void) {
    cudaError_t e = cudaFuncSetAttribute((const void *)attn_prefill_mma<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)(4 * (size_t)MM_BK * (HD + 8) * 2));
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute((const void *)attn_prefill_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)prefill_smem<HD>());
    if (e != cudaSuccess) {
        frigg_set_error("attention: cannot raise the shared-memory limit (head_dim %d): %s", HD, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int fk_attention_init(void) { return raise_smem<16>() || raise_smem<32>() || raise_smem<64>() || raise_smem<128>() ? -1 : 0; }

extern "C" int fk_attn_prefill(const uint16_t *q, const uint16_t *k_seq, const uint16_t *v_seq, const uint16_t *gqkv,
                               int T, int H, int hd, int max_ctx, int prefix_len, uint16_t *y, cudaStream_t s) {
    if (prefill_impl == 0) switch (hd) {
        case 16: return launch_prefill_mma<16>(q, k_seq, v_seq, gqkv, T, H, max_ctx, prefix_len, y, s);
        case 32: return launch_prefill_mma<32>(q, k_seq, v_seq, gqkv, T, H, max_ctx, prefix_len, y, s);
        case 64: return launch_prefill_mma<64>(q, k_seq, v_seq, gqkv, T, H, max_ctx, prefix_len, y, s);
        case 128: return launch_prefill_mma<128>(q, k_seq, v_seq, gqkv, T, H, max_ctx, prefix_len, y, s);
        }
    switch (hd) {
    case 16: return launch_prefill<16>(q, k_seq, v_seq, gqkv, T, H, max_ctx, prefix_len, y, s);
    case 32: return launch_prefill<32>(q, k_seq, v_seq, gqkv, T, H, max_ctx, prefix_len, y, s);
    case 64: return launch_prefill<64>(q, k_seq, v_seq, gqkv, T, H, max_ctx, prefix_len, y, s);
    case 128: return launch_prefill<128>(q, k_seq, v_seq, gqkv, T, H, max_ctx, prefix_len, y, s);
    }
    frigg_set_error("attention: head_dim %d is not supported by the CUDA backend (16, 32, 64 or 128)", hd);
    return -1;
}
