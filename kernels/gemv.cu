/* gemv.cu — decode-time matrix·vector products for 1..8 rows in one pass over the weights, and the
 * launcher that picks between the two implementations (FK_GEMV_IMPL_SIMT, the default: this file's kernel;
 * FK_GEMV_IMPL_TC: gemv_tc.cu). On the H200 (run 5) the tensor-core kernel was faster at batch 8 (779 against
 * 584 tok/s, context 512) and slower at batch 1 (177 against 205): the default serves batch 1; batch-heavy
 * serving can choose the other. One implementation for all batch sizes keeps batched decode bit-identical
 * to single-row decode.
 * The CUDA-core kernel: warp per output row (two rows for the fused SwiGLU: gate row i and up row I+i), 16-byte
 * streaming loads, 8 chunks per lane in flight before any arithmetic. The batch size is a template parameter so
 * the accumulators live in registers. Optional fused input RMSNorm (x staged, normalised, in shared memory)
 * and fused epilogues (residual add, SwiGLU) remove the separate elementwise kernels of a decode step.
 * Optional split-K (KS = 2) for the plain epilogues when a row is longer than one pass of loads (K > 2048):
 * the two warps of a row each stream half of it, so every warp issues all its loads at once instead of
 * waiting for a second round trip (down_proj, 1536 x 4096); the halves are added in a fixed order. Off by
 * default until a run shows it faster on its own (run 5 measured it only together with another change). */
#include "gemv_common.cuh"

#include <stdlib.h>
#include <string.h>

#define GEMV_WARPS 4
#define GEMV_UNROLL 8

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

template <int B, int R, bool NORM, int EPI, int KS>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_kernel(const uint16_t *__restrict__ W, int O, int K, const uint16_t *__restrict__ x, float eps,
                uint16_t *__restrict__ out, fk_qkv_epi qa) {
    extern __shared__ uint4 xs[];
    __shared__ float scratch[32];
    __shared__ float rs[B];
    __shared__ float part[KS > 1 ? GEMV_WARPS : 1][R][B]; /* split-K: the other warps' sums of a row */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nch = K / 8;
    /* output row (or SwiGLU output index, or RoPE pair) of this warp, and which of the KS slices of K it reads */
    int unit = blockIdx.x * (GEMV_WARPS / KS) + warp / KS, ks = warp % KS;
    int c_lo = (int)((long long)nch * ks / KS), c_hi = (int)((long long)nch * (ks + 1) / KS);
    bool valid = unit < O / R; /* R = 2: rows unit and O/2 + unit (SwiGLU: gate and up; plain: two halves) */
    int row1 = unit, row2 = unit;
    if (R > 1) pair_rows<EPI>(unit, O, qa.hd, &row1, &row2);
    const uint4 *wrow[R];
    wrow[0] = (const uint4 *)(W + (size_t)row1 * K) + c_lo;
    if (R > 1) wrow[R - 1] = (const uint4 *)(W + (size_t)row2 * K) + c_lo;
    const int nseg = valid ? c_hi - c_lo : 0; /* chunks of this warp's slice; 0: nothing to compute */
    /* The first batch of weights does not depend on earlier kernels: start streaming it before the wait. */
    uint4 w[GEMV_UNROLL][R];
#pragma unroll
    for (int u = 0; u < GEMV_UNROLL; u++) {
        int c = lane + 32 * u;
#pragma unroll
        for (int r = 0; r < R; r++) w[u][r] = c < nseg ? ld_stream(wrow[r] + c) : make_uint4(0, 0, 0, 0);
    }
    pdl_wait();
    pdl_launch();
    const uint4 *xv = (const uint4 *)x;
    if (NORM) xv = stage_norm(xv, B, nch, K, eps, xs, scratch, rs);
    xv += c_lo;
    float acc[R][B];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < B; b++) acc[r][b] = 0.0f;
    for (int c0 = lane; c0 < nseg; c0 += 32 * GEMV_UNROLL) {
        if (c0 != lane) {
#pragma unroll
            for (int u = 0; u < GEMV_UNROLL; u++) {
                int c = c0 + 32 * u;
#pragma unroll
                for (int r = 0; r < R; r++) w[u][r] = c < nseg ? ld_stream(wrow[r] + c) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int c = c0 + 32 * u;
            if (c >= nseg) break;
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
    if (KS > 1) { /* slice 0's warp adds the others' sums, slice by slice (a fixed order) */
        if (ks != 0 && lane == 0)
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int b = 0; b < B; b++) part[warp][r][b] = acc[r][b];
        __syncthreads();
        if (ks != 0) return;
        for (int k = 1; k < KS; k++)
#pragma unroll
            for (int r = 0; r < R; r++)
#pragma unroll
                for (int b = 0; b < B; b++) acc[r][b] += part[warp + k][r][b];
    }
    if (!valid) return;
#pragma unroll
    for (int b = 0; b < B; b++)
        if (lane == b) gemv_store<EPI>(unit, row1, b, acc[0][b], acc[R - 1][b], O, out, qa);
}

typedef void (*gemv_fn)(const uint16_t *, int, int, const uint16_t *, float, uint16_t *, fk_qkv_epi);

/* Split-K is instantiated for the plain epilogues only (the paired ones, gqkv and gate_up, have K = hidden,
 * one pass); ks is 1 or 2. */
template <int B, bool NORM>
static gemv_fn pick_epi(int epi, int ks) {
    switch (epi) {
    case FK_GEMV_QKV: return gemv_kernel<B, 2, NORM, FK_GEMV_QKV, 1>;
    case FK_GEMV_SWIGLU: return gemv_kernel<B, 2, NORM, FK_GEMV_SWIGLU, 1>;
    case FK_GEMV_RESID: return ks == 2 ? gemv_kernel<B, 1, NORM, FK_GEMV_RESID, 2> : gemv_kernel<B, 1, NORM, FK_GEMV_RESID, 1>;
    }
    return ks == 2 ? gemv_kernel<B, 1, NORM, FK_GEMV_STORE, 2> : gemv_kernel<B, 1, NORM, FK_GEMV_STORE, 1>;
}

template <int B>
static gemv_fn pick(int norm, int epi, int ks) {
    return norm ? pick_epi<B, true>(epi, ks) : pick_epi<B, false>(epi, ks);
}

static gemv_fn pick_b(int B, int norm, int epi, int ks) {
    switch (B) {
    case 1: return pick<1>(norm, epi, ks);
    case 2: return pick<2>(norm, epi, ks);
    case 3: return pick<3>(norm, epi, ks);
    case 4: return pick<4>(norm, epi, ks);
    case 5: return pick<5>(norm, epi, ks);
    case 6: return pick<6>(norm, epi, ks);
    case 7: return pick<7>(norm, epi, ks);
    case 8: return pick<8>(norm, epi, ks);
    }
    return NULL;
}

/* 1 (the default) or 2: that split for the plain epilogues; 0: split K when a row needs more than one pass of
 * loads. Set by fk_set_gemv_ksplit or from FRIGG_GEMV_KSPLIT by fk_init. */
static int gemv_ksplit = 1;
static int gemv_impl = FK_GEMV_IMPL_SIMT;
extern "C" void fk_set_gemv_impl(int impl) { gemv_impl = impl; }
extern "C" void fk_set_gemv_ksplit(int ks) { gemv_ksplit = ks; }

int fk_pdl;

extern "C" int fk_init(void) {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess)
        fk_pdl = major >= 9;
    const char *ks_env = getenv("FRIGG_GEMV_KSPLIT");
    if (ks_env && *ks_env) {
        if (strcmp(ks_env, "1") && strcmp(ks_env, "2") && strcmp(ks_env, "auto")) {
            frigg_set_error("FRIGG_GEMV_KSPLIT must be 1, 2 or auto, not '%s'", ks_env);
            return -1;
        }
        gemv_ksplit = strcmp(ks_env, "auto") ? atoi(ks_env) : 0;
    }
    const char *impl_env = getenv("FRIGG_GEMV_IMPL");
    if (impl_env && *impl_env) {
        if (strcmp(impl_env, "tc") && strcmp(impl_env, "simt")) {
            frigg_set_error("FRIGG_GEMV_IMPL must be tc or simt, not '%s'", impl_env);
            return -1;
        }
        gemv_impl = strcmp(impl_env, "tc") ? FK_GEMV_IMPL_SIMT : FK_GEMV_IMPL_TC;
    }
    if (fk_attention_init() || gemv_tc_init()) return -1;
    for (int B = 1; B <= 8; B++)
        for (int epi = 0; epi < 4; epi++)
            for (int ks = 1; ks <= 2; ks++) {
                cudaError_t e = cudaFuncSetAttribute((const void *)pick_b(B, 1, epi, ks),
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
    if (gemv_impl == FK_GEMV_IMPL_TC) {
        gemv_tc_launch(W, O, K, x, B, norm_in, eps, epi, out, qa, s);
        return fk_check_launch("gemv_tc");
    }
    int pair = epi == FK_GEMV_SWIGLU || epi == FK_GEMV_QKV;
    int units = pair ? O / 2 : O;
    int ks = pair ? 1 : gemv_ksplit ? gemv_ksplit : K / 8 > 32 * GEMV_UNROLL ? 2 : 1;
    int per_block = GEMV_WARPS / ks;
    fk_launch(pick_b(B, norm_in, epi, ks), (units + per_block - 1) / per_block, GEMV_WARPS * 32, smem, s, W, O, K, x,
              eps, out, *qa);
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
