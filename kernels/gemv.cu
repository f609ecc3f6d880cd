/* gemv.cu — decode-time matrix·vector products for 1..8 rows in one pass over the weights.
 * Warp per output row (two rows for the fused SwiGLU: gate row i and up row I+i), 16-byte streaming
 * loads, 8 chunks per lane in flight before any arithmetic. The batch size is a template parameter so the
 * accumulators live in registers. Optional fused input RMSNorm (x staged, normalised, in shared memory)
 * and fused epilogues (residual add, SwiGLU) remove the separate elementwise kernels of a decode step. */
#include "common.cuh"
#include "kernels.h"

#define GEMV_WARPS 4
#define GEMV_UNROLL 8
#define GEMV_MAX_SMEM (64 * 1024)

__device__ __forceinline__ uint4 ld_stream(const uint4 *p) {
    uint4 r;
    /* Weights are read once per pass: keep them out of L1. */
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ float dot8(uint4 w, const float *x) {
    float s = bf_lo(w.x) * x[0];
    s = fmaf(bf_hi(w.x), x[1], s);
    s = fmaf(bf_lo(w.y), x[2], s);
    s = fmaf(bf_hi(w.y), x[3], s);
    s = fmaf(bf_lo(w.z), x[4], s);
    s = fmaf(bf_hi(w.z), x[5], s);
    s = fmaf(bf_lo(w.w), x[6], s);
    s = fmaf(bf_hi(w.w), x[7], s);
    return s;
}

template <int B, int R, bool NORM, int EPI>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_kernel(const uint16_t *__restrict__ W, int O, int K, const uint16_t *__restrict__ x, float eps,
                uint16_t *__restrict__ out, fk_qkv_epi qa) {
    extern __shared__ uint4 xs[];
    __shared__ float scratch[32];
    __shared__ float rs[B];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nch = K / 8;
    int unit = blockIdx.x * GEMV_WARPS + warp; /* output row (or SwiGLU output index, or RoPE pair) of this warp */
    bool valid = unit < O / R; /* R = 2: rows unit and O/2 + unit (SwiGLU: gate and up; plain: two halves) */
    int row1 = unit, row2 = O / 2 + unit, half = qa.hd / 2;
    if (EPI == FK_GEMV_QKV) { /* unit -> section (gate,q,k,v), head, dim i < hd/2: rows i and i + hd/2 */
        int Dm = O / 4, sec = unit / (Dm / 2), p = unit % (Dm / 2);
        row1 = sec * Dm + (p / half) * qa.hd + p % half;
        row2 = row1 + half;
    }
    const uint4 *wrow[R];
    wrow[0] = (const uint4 *)(W + (size_t)row1 * K);
    if (R > 1) wrow[R - 1] = (const uint4 *)(W + (size_t)row2 * K);
    /* The first batch of weights does not depend on earlier kernels: start streaming it before the wait. */
    uint4 w[GEMV_UNROLL][R];
#pragma unroll
    for (int u = 0; u < GEMV_UNROLL; u++) {
        int c = lane + 32 * u;
#pragma unroll
        for (int r = 0; r < R; r++) w[u][r] = valid && c < nch ? ld_stream(wrow[r] + c) : make_uint4(0, 0, 0, 0);
    }
    pdl_wait();
    pdl_launch();
    const uint4 *xv = (const uint4 *)x;
    if (NORM) {
        for (int b = 0; b < B; b++) {
            float ss = 0.0f;
            for (int c = threadIdx.x; c < nch; c += blockDim.x) {
                uint4 v = xv[(size_t)b * nch + c];
                float a0 = bf_lo(v.x), a1 = bf_hi(v.x), a2 = bf_lo(v.y), a3 = bf_hi(v.y);
                float a4 = bf_lo(v.z), a5 = bf_hi(v.z), a6 = bf_lo(v.w), a7 = bf_hi(v.w);
                ss += a0 * a0 + a1 * a1 + a2 * a2 + a3 * a3 + a4 * a4 + a5 * a5 + a6 * a6 + a7 * a7;
            }
            float tot = block_sum(ss, scratch);
            if (threadIdx.x == 0) rs[b] = 1.0f / sqrtf(tot / (float)K + eps);
        }
        __syncthreads();
        for (int i = threadIdx.x; i < B * nch; i += blockDim.x) {
            uint4 v = xv[i];
            float r = rs[i / nch];
            uint32_t *p = (uint32_t *)&v;
            for (int j = 0; j < 4; j++) {
                uint32_t lo = f2bf(bf_lo(p[j]) * r), hi = f2bf(bf_hi(p[j]) * r);
                p[j] = lo | (hi << 16);
            }
            xs[i] = v;
        }
        __syncthreads();
        xv = xs;
    }
    if (!valid) return;
    float acc[R][B];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < B; b++) acc[r][b] = 0.0f;
    for (int c0 = lane; c0 < nch; c0 += 32 * GEMV_UNROLL) {
        if (c0 != lane) {
#pragma unroll
            for (int u = 0; u < GEMV_UNROLL; u++) {
                int c = c0 + 32 * u;
#pragma unroll
                for (int r = 0; r < R; r++) w[u][r] = c < nch ? ld_stream(wrow[r] + c) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int c = c0 + 32 * u;
            if (c >= nch) break;
#pragma unroll
            for (int b = 0; b < B; b++) {
                uint4 v = xv[(size_t)b * nch + c];
                float xf[8] = {bf_lo(v.x), bf_hi(v.x), bf_lo(v.y), bf_hi(v.y),
                               bf_lo(v.z), bf_hi(v.z), bf_lo(v.w), bf_hi(v.w)};
#pragma unroll
                for (int r = 0; r < R; r++) acc[r][b] += dot8(w[u][r], xf);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < B; b++) acc[r][b] = warp_sum(acc[r][b]);
#pragma unroll
    for (int b = 0; b < B; b++) {
        if (lane != b) continue;
        if (EPI == FK_GEMV_STORE || EPI == FK_GEMV_RESID) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                size_t at = (size_t)b * O + (r ? row2 : row1);
                out[at] = EPI == FK_GEMV_STORE ? f2bf(acc[r][b]) : f2bf(bf2f(out[at]) + rbf(acc[r][b]));
            }
        } else if (EPI == FK_GEMV_QKV) {
            int Dm = O / 4, sec = row1 / Dm, j1 = row1 % Dm, j2 = j1 + half, i = j1 % qa.hd, h = j1 / qa.hd;
            float x1 = rbf(acc[0][b]), x2 = rbf(acc[R - 1][b]);
            if (sec == 0) { /* the output gate: kept for the attention epilogue */
                out[(size_t)b * O + j1] = f2bf(x1);
                out[(size_t)b * O + j2] = f2bf(x2);
                continue;
            }
            int pos = qa.row_pos[b];
            size_t at = (size_t)qa.row_seq[b] * qa.seq_stride + ((size_t)h * qa.max_ctx + pos) * qa.hd + i;
            if (sec == 3) {
                qa.v_slot[at] = f2bf(x1);
                qa.v_slot[at + half] = f2bf(x2);
                continue;
            }
            /* rotate-half RoPE with HF's rounding after each op (as frigg_cpu_rope_apply) */
            const uint16_t *C = qa.cos_t + (size_t)pos * qa.hd, *S = qa.sin_t + (size_t)pos * qa.hd;
            float o1 = rbf(rbf(x1 * bf2f(C[i])) + rbf(-x2 * bf2f(S[i])));
            float o2 = rbf(rbf(x2 * bf2f(C[i + half])) + rbf(x1 * bf2f(S[i + half])));
            if (sec == 1) {
                qa.q_out[(size_t)b * Dm + j1] = f2bf(o1);
                qa.q_out[(size_t)b * Dm + j2] = f2bf(o2);
            } else {
                qa.k_slot[at] = f2bf(o1);
                qa.k_slot[at + half] = f2bf(o2);
            }
        } else {
            float g = rbf(acc[0][b]), u = rbf(acc[R - 1][b]);
            float sg = rbf(g / (1.0f + expf(-g)));
            out[(size_t)b * (O / 2) + unit] = f2bf(sg * u);
        }
    }
}

typedef void (*gemv_fn)(const uint16_t *, int, int, const uint16_t *, float, uint16_t *, fk_qkv_epi);

template <int B>
static gemv_fn pick(int norm, int epi, int pair) {
    if (epi == FK_GEMV_QKV) return norm ? gemv_kernel<B, 2, true, FK_GEMV_QKV> : gemv_kernel<B, 2, false, FK_GEMV_QKV>;
    if (epi == FK_GEMV_SWIGLU) return norm ? gemv_kernel<B, 2, true, FK_GEMV_SWIGLU> : gemv_kernel<B, 2, false, FK_GEMV_SWIGLU>;
    (void)pair;
    if (epi == FK_GEMV_RESID) return norm ? gemv_kernel<B, 1, true, FK_GEMV_RESID> : gemv_kernel<B, 1, false, FK_GEMV_RESID>;
    return norm ? gemv_kernel<B, 1, true, FK_GEMV_STORE> : gemv_kernel<B, 1, false, FK_GEMV_STORE>;
}

static gemv_fn pick_b(int B, int norm, int epi, int pair) {
    switch (B) {
    case 1: return pick<1>(norm, epi, pair);
    case 2: return pick<2>(norm, epi, pair);
    case 3: return pick<3>(norm, epi, pair);
    case 4: return pick<4>(norm, epi, pair);
    case 5: return pick<5>(norm, epi, pair);
    case 6: return pick<6>(norm, epi, pair);
    case 7: return pick<7>(norm, epi, pair);
    case 8: return pick<8>(norm, epi, pair);
    }
    return NULL;
}

int fk_pdl;

extern "C" int fk_init(void) {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess)
        fk_pdl = major >= 9;
    if (fk_attention_init()) return -1;
    for (int B = 1; B <= 8; B++)
        for (int epi = 0; epi < 4; epi++) {
            cudaError_t e = cudaFuncSetAttribute((const void *)pick_b(B, 1, epi, epi >= 2),
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, GEMV_MAX_SMEM);
            if (e != cudaSuccess) {
                frigg_set_error("gemv: cannot raise the shared-memory limit: %s", cudaGetErrorString(e));
                return -1;
            }
        }
    return 0;
}

static int gemv_launch(const uint16_t *W, int O, int K, const uint16_t *x, int B, int norm_in, float eps, int epi,
                       uint16_t *out, const fk_qkv_epi *qa, cudaStream_t s) {
    size_t smem = norm_in ? (size_t)B * K * 2 : 0;
    if (B < 1 || B > 8 || K % 8 || (epi != FK_GEMV_STORE && epi != FK_GEMV_RESID && O % 2) || smem > GEMV_MAX_SMEM ||
        epi < 0 || epi > 3 || (epi == FK_GEMV_QKV && (O % 4 || qa->hd % 2 || (O / 4) % qa->hd))) {
        frigg_set_error("gemv: unsupported shape (rows %d, out %d, in %d, epilogue %d)", B, O, K, epi);
        return -1;
    }
    /* Two rows per warp only where the epilogue needs the pair. Pairing plain rows to halve the x reads at
     * batch >= 3 was measured slower on the H200 (batch 8: 581 against 643 tok/s), so it is not done. */
    int pair = epi == FK_GEMV_SWIGLU || epi == FK_GEMV_QKV;
    int units = pair ? O / 2 : O;
    fk_launch(pick_b(B, norm_in, epi, pair), (units + GEMV_WARPS - 1) / GEMV_WARPS, GEMV_WARPS * 32, smem, s, W, O, K, x, eps,
              out, *qa);
    return fk_check_launch("gemv");
}

extern "C" int fk_gemv(const uint16_t *W, int O, int K, const uint16_t *x, int B, int norm_in, float eps, int epi,
                       uint16_t *out, cudaStream_t s) {
    fk_qkv_epi none = {};
    none.hd = 2;
    if (epi == FK_GEMV_QKV) {
        frigg_set_error("gemv: the QKV epilogue goes through fk_gemv_qkv");
        return -1;
    }
    return gemv_launch(W, O, K, x, B, norm_in, eps, epi, out, &none, s);
}

extern "C" int fk_gemv_qkv(const uint16_t *W, int D, const uint16_t *x, int B, float eps, uint16_t *gqkv,
                           const fk_qkv_epi *qa, cudaStream_t s) {
    return gemv_launch(W, 4 * D, D, x, B, 1, eps, FK_GEMV_QKV, gqkv, qa, s);
}
