/* gemv_q.cu — decode GEMV for 1..16 rows on quantized weights read as they are packed (INT8: one byte per
 * weight, INT4: two per byte; model.h's frigg_mat layout, the compressed-tensors pack-quantized bytes), and
 * the dequantization into bf16 that the prefill GEMM (cuda_gemm.h: frigg_cuda_gemm_dq) runs cuBLAS on.
 *
 * The rounding is frigg_cpu_linear's (cpu_ops.h): each weight is w = bf16(q * scale) — q * scale is exact in
 * fp32 (|q| <= 128 times a bf16 scale), then rounded once to bf16, as frigg_mat_row — and the products w * x
 * are summed in fp32, with one bf16 rounding of the result in the epilogue. One device function
 * (dequant.cuh: dq_chunk) makes those weights for every kernel, so fk_dequant_bf16's output, checked bit for
 * bit against frigg_mat_row by tests/test_cuda_gemv_q.c, is exactly what the GEMVs multiply by.
 *
 * Two GEMV implementations, as for bf16 weights, chosen by the context's gemv implementation:
 * - tc: gemv_tc.cu's tensor-core kernel with the quantized weight load (K <= 4096, every DFM-Mimir shape).
 *   The products are on the tensor cores, so a weight costs its load and dq_chunk whatever the batch size.
 *   Bit for bit the tc bf16 GEMV on the dequantized matrix.
 * - simt: this file's kernel, gemv.cu's CUDA-core kernel with the weight load replaced: one warp per output
 *   unit (a row, or the pair the SwiGLU or QKV epilogue needs; at batch 1 two or four units, gq_shape), lane l
 *   taking the 8-weight chunks l, l+32, l+64, ... in increasing order, each chunk dequantized and multiplied by
 *   the same dot8 (in the same order), then warp_sum and gemv_common.cuh's epilogues. Bit for bit the simt bf16
 *   GEMV on the dequantized matrix, whatever the units per warp.
 *   Its products are fp32 FMAs on the CUDA cores, one per weight and batch row, so it pays as the batch grows
 *   (benchmarks/h200-2026-12-03/bringup/: 0.38x the bf16 engine at batch 8): it runs one or two rows per
 *   launch, a larger batch in several launches (GQ_SIMT_ROWS). It also serves K > 4096.
 * - auto (the default): per batch size and shape class, the q. rows of gemv.cu's table.
 * simt and tc each keep batched decode bit-identical to single-row decode; under auto a row's bits depend on
 * how many rows share the pass, as for bf16 weights.
 *
 * A chunk is 8 weights because x comes in 16-byte chunks of 8 bf16: an int8 chunk is an 8-byte load per
 * lane, an int4 chunk a 4-byte load. Row starts are then aligned for any K % 8 == 0 (int8 rows start at r*K
 * bytes, int4 at r*K/2). The group (of G % 8 == 0 weights) holds the whole chunk, so a chunk has one scale. */
#include "dequant.cuh"
#include "gemv_common.cuh"

#define GQ_WARPS 4     /* warps per block, at most (the launch bounds) and by default */
#define GQ_MAX_UNITS 4 /* output units per warp, at most (batch 1: 1, 2 or 4) */
/* Chunks per lane and row in flight (U): 6 where a row is a whole number of 6-chunk rounds (nch % 192 == 0:
 * DFM-Mimir's K 1536, one round for every lane), else 16 (K 4096: one round). A round that is not full for
 * every lane needs a per-chunk exit, which holds the x loads behind the arithmetic, and a second round waits
 * for the first's arithmetic before its loads go out. U does not change the sums: chunks are added in
 * increasing order whatever U. With 8 at K 4096 (two rounds), down_proj at batch 1 took 7.65 us against the
 * tensor-core kernel's 5.86 (int8; benchmarks/h200-2026-12-02/gemvq/gemv_q.txt). */
#define GQ_U_SHORT 6
#define GQ_U_LONG 16
/* Where a chunk's scale comes from (the kernel's SC, a template parameter so that no chunk carries the
 * others' code):
 * - GQ_SC_ROW (INT8, one scale per row: every int8 build frigg-quantize writes): loaded once per row, before the
 *   loop. Looking it up per chunk cost a 2-byte load and, for 192 chunks per group (not a power of two), an
 *   integer division per 8 weights.
 * - GQ_SC_SHFL (INT4, at most 32 groups per row, a power-of-two number of chunks per group, every lane taking
 *   the same number of rounds (nch % 32 == 0, so all 32 lanes reach each shuffle): int4 g128 at K <= 4096):
 *   lane j loads group j's scale once; a chunk's comes from its group's lane by shuffle.
 * - GQ_SC_LOAD (any other layout: grouped int8, per-row int4, more groups): loaded per chunk. Instantiated at
 *   batch 1 only; a batch of B runs B single-row launches (the same bits: a row's sum does not depend on the
 *   other rows), which keeps this file's instantiations, and its compile time, to the fast layouts. */
enum { GQ_SC_ROW = 0, GQ_SC_SHFL = 1, GQ_SC_LOAD = 2 };
template <int DT> struct gq_fast {
    static constexpr int sc = DT == FRIGG_DT_INT8 ? GQ_SC_ROW : GQ_SC_SHFL;
};
static int gq_scale_mode(int dt, const qgeom &g, int nch) {
    if (dt == FRIGG_DT_INT8 && g.ng == 1) return GQ_SC_ROW;
    if (dt == FRIGG_DT_INT4 && g.ng <= 32 && g.shift >= 0 && nch % 32 == 0) return GQ_SC_SHFL;
    return GQ_SC_LOAD;
}

/* A warp computes P output units (P > 1: consecutive units, batch 1 only): the x chunk it stages in registers
 * once serves P x R weight rows, and the warp's fixed work (its share of the fused norm, row addresses, the
 * reduction's setup) is paid once for P units. Each row's sum is the same as at P = 1 (its lane's chunks in
 * increasing order, dot8, warp_sum), so the bits do not depend on P. Blocks hold blockDim.x / 32 warps. */
template <int B, int R, bool NORM, int EPI, int DT, int U, int SC, int P>
__global__ void __launch_bounds__(GQ_WARPS * 32)
    gemv_q_kernel(const unsigned char *__restrict__ W, const uint16_t *__restrict__ S, int O, int K, qgeom geo,
                  const uint16_t *__restrict__ x, float eps, uint16_t *__restrict__ out, fk_qkv_epi qa) {
    typedef typename qword<DT>::T word;
    constexpr int CB = qword<DT>::bytes;
    extern __shared__ uint4 xs[];
    __shared__ float scratch[B * 32]; /* stage_norm: 32 per batch row */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nch = K / 8;
    const int unit0 = (blockIdx.x * (blockDim.x >> 5) + warp) * P; /* this warp's first output unit */
    bool valid[P];
    int rows[P][2]; /* R = 2: SwiGLU's gate and up rows, or the QKV epilogue's RoPE pair (gemv.cu) */
    const word *wrow[P][R];
    const uint16_t *srow[P][R];
    uint32_t rs[P][R]; /* GQ_SC_ROW: the row's scale pair; GQ_SC_SHFL: group `lane`'s scale (16 bits) */
#pragma unroll
    for (int p = 0; p < P; p++) {
        const int unit = unit0 + p;
        valid[p] = unit < O / R;
        rows[p][0] = rows[p][1] = valid[p] ? unit : 0;
        if (R > 1 && valid[p]) pair_rows<EPI>(unit, O, qa.hd, &rows[p][0], &rows[p][1]);
#pragma unroll
        for (int r = 0; r < R; r++) {
            wrow[p][r] = (const word *)(W + (size_t)rows[p][r] * nch * CB);
            srow[p][r] = S + (size_t)rows[p][r] * geo.ng;
            rs[p][r] = SC == GQ_SC_ROW ? ld_scale2(srow[p][r])
                       : SC == GQ_SC_SHFL && lane < geo.ng ? ld_scale16(srow[p][r] + lane)
                                                           : 0u;
        }
    }
    word w[U][P][R];
    uint32_t sc[U][P][R];
    auto load = [&](int c0) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = c0 + 32 * u;
#pragma unroll
            for (int p = 0; p < P; p++) {
                bool ok = valid[p] && c < nch;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    w[u][p][r] = ok ? ld_stream_q(wrow[p][r] + c) : qzero(word());
                    if (SC == GQ_SC_SHFL) sc[u][p][r] = __shfl_sync(0xffffffffu, rs[p][r], (c >> geo.shift) & 31) * 0x10001u;
                    else if (SC == GQ_SC_LOAD) sc[u][p][r] = ok ? ld_scale2(srow[p][r] + q_group(c, geo)) : 0u;
                    else sc[u][p][r] = rs[p][r];
                }
            }
        }
    };
    /* Weights and scales do not depend on earlier kernels: the first batch streams before the wait. */
    load(lane);
    gemv_pre pre = {0, 0, 0, 0.0f, false, false};
    pdl_wait();
    /* Lane p * B + b stores (unit p, batch row b): its unit and first row, picked once (unrolled selects, no
     * indexing of the register arrays by a variable), so that every storing lane runs one epilogue at once.
     * Right after the wait it loads its epilogue's operands, RESID's residual and, at batch 1, QKV's cache slot
     * and RoPE factors, whose latency then hides behind the dot products instead of following the reduction
     * (int4 gqkv 5.43 against 5.74 us on an H100, benchmarks/h100-2026-12-06/gqab2/). At batch 2 the QKV ones
     * are not: holding them took the int4 kernel from 75 to 90 registers (ptxas -v,
     * benchmarks/cpu-checks-2026-12-06/ptxas-gemv_q.txt), 6 to 5 blocks of 128 threads per SM, so its 768 blocks
     * no longer fit in one wave (decode 0.984x the kernel without them, gqab2/). */
    int st_p = -1, st_row = 0; /* the unit this lane stores (-1: none), its first row */
#pragma unroll
    for (int p = 0; p < P; p++)
        if (lane / B == p && lane < P * B && valid[p]) {
            st_p = p;
            st_row = rows[p][0];
        }
    const int st_b = lane % B;
    if (st_p >= 0) {
        if (EPI == FK_GEMV_RESID) gemv_preload_resid<EPI>(pre, st_row, st_b, O, out);
        else if (EPI == FK_GEMV_QKV && B == 1) pre = gemv_preload<EPI>(st_row, st_b, O, qa);
    }
    const uint4 *xv = (const uint4 *)x;
    if (NORM) xv = stage_norm<B>(xv, nch, K, eps, xs, scratch);
    if (!valid[0]) return; /* units are consecutive: no later one is valid either */
    float acc[P][R][B];
#pragma unroll
    for (int p = 0; p < P; p++)
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int b = 0; b < B; b++) acc[p][r][b] = 0.0f;
    for (int c0 = lane; c0 < nch; c0 += 32 * U) { /* chunks in increasing order, as gemv.cu */
        if (c0 != lane) load(c0);
        auto round = [&](bool full) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                int c = c0 + 32 * u;
                if (!full && c >= nch) break;
                uint4 wb[P][R];
#pragma unroll
                for (int p = 0; p < P; p++)
#pragma unroll
                    for (int r = 0; r < R; r++) wb[p][r] = dq_chunk(w[u][p][r], sc[u][p][r]);
#pragma unroll
                for (int b = 0; b < B; b++) {
                    uint4 v = NORM ? xv[(size_t)b * nch + c] : ld_act(xv + (size_t)b * nch + c); /* shared, or x */
                    float xf[8] = {bf_lo(v.x), bf_hi(v.x), bf_lo(v.y), bf_hi(v.y),
                                   bf_lo(v.z), bf_hi(v.z), bf_lo(v.w), bf_hi(v.w)};
#pragma unroll
                    for (int p = 0; p < P; p++)
#pragma unroll
                        for (int r = 0; r < R; r++) acc[p][r][b] += dot8(wb[p][r], xf);
                }
            }
        };
        /* every round full (K a multiple of 32 x U x 8): no per-chunk exit, as gemv.cu (the same sums) */
        if (nch % (32 * U) == 0) round(true);
        else round(false);
    }
#pragma unroll
    for (int p = 0; p < P; p++)
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int b = 0; b < B; b++) acc[p][r][b] = warp_sum(acc[p][r][b]);
    float a1 = 0.0f, a2 = 0.0f;
#pragma unroll
    for (int p = 0; p < P; p++)
#pragma unroll
        for (int b = 0; b < B; b++)
            if (lane == p * B + b) {
                a1 = acc[p][0][b];
                a2 = acc[p][R - 1][b];
            }
    if (st_p >= 0) gemv_store<EPI>(unit0 + st_p, st_row, st_b, a1, a2, O, out, qa, pre);
}

/* Rows [0, n) of W (already offset to the first row) as bf16 into out [n][K]: one 8-weight chunk per thread
 * and step, grid-stride. Waits first (PDL): out is scratch that the kernel in front may still read. */
template <int DT>
__global__ void dequant_kernel(const unsigned char *__restrict__ W, const uint16_t *__restrict__ S, int n, int K,
                               qgeom geo, uint16_t *__restrict__ out) {
    typedef typename qword<DT>::T word;
    constexpr int CB = qword<DT>::bytes;
    pdl_wait();
    const int nch = K / 8;
    const size_t total = (size_t)n * nch;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / nch), c = (int)(i % nch);
        word w = ld_stream_q((const word *)(W + (size_t)r * nch * CB) + c);
        uint32_t s = ld_scale2(S + (size_t)r * geo.ng + q_group(c, geo));
        *(uint4 *)(out + (size_t)r * K + (size_t)c * 8) = dq_chunk(w, s);
    }
}

typedef void (*gemv_q_fn)(const unsigned char *, const uint16_t *, int, int, qgeom, const uint16_t *, float, uint16_t *,
                          fk_qkv_epi);

/* epi QKV exists normed only (fk_gemv_qkv always normalises) */
template <int DT, int B, int U, int SC, int P>
static gemv_q_fn pick_q(int norm, int epi) {
    if (epi == FK_GEMV_QKV) return gemv_q_kernel<B, 2, true, FK_GEMV_QKV, DT, U, SC, P>;
    if (epi == FK_GEMV_SWIGLU)
        return norm ? gemv_q_kernel<B, 2, true, FK_GEMV_SWIGLU, DT, U, SC, P> : gemv_q_kernel<B, 2, false, FK_GEMV_SWIGLU, DT, U, SC, P>;
    if (epi == FK_GEMV_RESID)
        return norm ? gemv_q_kernel<B, 1, true, FK_GEMV_RESID, DT, U, SC, P> : gemv_q_kernel<B, 1, false, FK_GEMV_RESID, DT, U, SC, P>;
    return norm ? gemv_q_kernel<B, 1, true, FK_GEMV_STORE, DT, U, SC, P> : gemv_q_kernel<B, 1, false, FK_GEMV_STORE, DT, U, SC, P>;
}
/* Instantiated for 1 and 2 rows only (GQ_SIMT_ROWS): auto runs this kernel at batch 1 and 2; a larger batch
 * under simt (forced, or K past the tensor-core kernel) runs in launches of two rows (and one), the same bits,
 * since a row's sum does not depend on the other rows. Each further batch size would add a set of
 * instantiations to this file's compile time, for a path auto never takes. Units per warp past 1: batch 1
 * only, and 4 only with the short rounds (at 16 chunks per lane, 4 units of two rows spill). */
#define GQ_SIMT_ROWS 2
template <int DT, int U>
static gemv_q_fn pick_q_b(int B, int P, int norm, int epi) {
    constexpr int SC = gq_fast<DT>::sc;
    if (B == 2) return P == 1 ? pick_q<DT, 2, U, SC, 1>(norm, epi) : NULL;
    if (B != 1) return NULL;
    if (P == 4 && U == GQ_U_SHORT) return pick_q<DT, 1, GQ_U_SHORT, SC, 4>(norm, epi); /* K 1536: 96-207 registers */
    return P == 1 ? pick_q<DT, 1, U, SC, 1>(norm, epi) : P == 2 ? pick_q<DT, 1, U, SC, 2>(norm, epi) : NULL;
}
/* shrt: the GQ_U_SHORT instantiation (gq_short); load: the GQ_SC_LOAD one (one row, one unit per warp, GQ_U_LONG) */
static gemv_q_fn pick_q_any(int dt, int B, int P, int norm, int epi, int shrt, int load) {
    if (load)
        return P != 1 ? NULL : dt == FRIGG_DT_INT4 ? pick_q<FRIGG_DT_INT4, 1, GQ_U_LONG, GQ_SC_LOAD, 1>(norm, epi)
                                                   : pick_q<FRIGG_DT_INT8, 1, GQ_U_LONG, GQ_SC_LOAD, 1>(norm, epi);
    if (dt == FRIGG_DT_INT4)
        return shrt ? pick_q_b<FRIGG_DT_INT4, GQ_U_SHORT>(B, P, norm, epi) : pick_q_b<FRIGG_DT_INT4, GQ_U_LONG>(B, P, norm, epi);
    return shrt ? pick_q_b<FRIGG_DT_INT8, GQ_U_SHORT>(B, P, norm, epi) : pick_q_b<FRIGG_DT_INT8, GQ_U_LONG>(B, P, norm, epi);
}
/* The short rounds where they are whole (nch % 192 == 0), the long ones otherwise. */
static int gq_short(int K) { return (K / 8) % (32 * GQ_U_SHORT) == 0; }

/* The shared-memory limit of every normed instantiation (the staged x: up to GEMV_MAX_SMEM). */
int fk_gemv_q_ctx_init(fk_ctx *kc) {
    (void)kc;
    static const int dts[2] = {FRIGG_DT_INT8, FRIGG_DT_INT4};
    for (int d = 0; d < 2; d++)
        for (int B = 1; B <= GQ_SIMT_ROWS; B++)
            for (int epi = FK_GEMV_STORE; epi <= FK_GEMV_QKV; epi++)
                for (int v = 0; v <= 1 + (B == 1); v++) /* long, short, load (one row) */
                    for (int P = 1; P <= GQ_MAX_UNITS; P *= 2) {
                        gemv_q_fn f = pick_q_any(dts[d], B, P, 1, epi, v == 1, v == 2);
                        if (!f) continue; /* units past 1: batch 1, not the load layout */
                        cudaError_t e = cudaFuncSetAttribute((const void *)f, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                             GEMV_MAX_SMEM);
                        if (e != cudaSuccess) {
                            frigg_set_error("gemv_q: cannot raise the shared-memory limit: %s", cudaGetErrorString(e));
                            return -1;
                        }
                    }
    return 0;
}

/* A quantized descriptor the kernels can read, and its scale geometry; -1 with frigg_error() naming what is
 * wrong (`what`: the launcher). */
static int q_check(const frigg_mat *W, const char *what, qgeom *g) {
    if (W->dtype != FRIGG_DT_INT8 && W->dtype != FRIGG_DT_INT4) {
        frigg_set_error("%s: %s weights are not a quantized dtype", what, frigg_dtype_name(W->dtype));
        return -1;
    }
    const char *dn = frigg_dtype_name(W->dtype);
    if (!W->w || !W->scales) {
        frigg_set_error("%s: %s weights without %s", what, dn, W->w ? "scales" : "values");
        return -1;
    }
    if (W->rows < 1 || W->cols < 8 || W->cols % 8) {
        frigg_set_error("%s: %s matrix [%d][%d]: the inner dimension must be a positive multiple of 8", what, dn, W->rows,
                        W->cols);
        return -1;
    }
    if (W->group < 0 || (W->group && (W->group % 8 || W->cols % W->group))) {
        frigg_set_error("%s: %s group size %d: must be 0 (one scale per row) or a multiple of 8 dividing %d", what, dn,
                        W->group, W->cols);
        return -1;
    }
    uintptr_t wa = (uintptr_t)W->w, sa = (uintptr_t)W->scales;
    if (wa % (W->dtype == FRIGG_DT_INT8 ? 8 : 4) || sa % 2) {
        frigg_set_error("%s: %s values or scales misaligned (values must be %d-byte aligned)", what, dn,
                        W->dtype == FRIGG_DT_INT8 ? 8 : 4);
        return -1;
    }
    g->ng = frigg_mat_ngroups(W);
    g->cpg = (W->group ? W->group : W->cols) / 8;
    g->shift = -1;
    for (int k = 0; k < 31; k++)
        if (g->cpg == 1 << k) g->shift = k;
    return 0;
}

/* The implementation a quantized GEMV of this call takes: the context's forced one, or auto's q. rows (gemv.cu);
 * K past the tensor-core kernel's one round always takes this file's kernel. */
static int q_use_tc(const fk_ctx *kc, int B, int O, int K, int epi) {
    if (K > GEMV_TC_MAX_K || kc->gemv_impl == FK_GEMV_IMPL_SIMT) return 0;
    return kc->gemv_impl == FK_GEMV_IMPL_TC || gemv_auto_choice(kc, 1, B, O, K, epi) != 's';
}

/* Units per warp and warps per block of a launch of n rows over `units` output units: the context's forced pair
 * (a tuning hook, fk_ctx_set_gemv_q_simt; the bits do not depend on it), else by what kernels/dev/gemv_q measured
 * at batch 1 on an H100 (benchmarks/h100-2026-12-06/gqab/gemv_q.txt, us per launch, int8 / int4 g128):
 * rows that are not whole rounds of 6 chunks per lane (down_proj's K 4096 takes one round of 16) two units per
 * warp in blocks of two warps (5.70 against 6.53 / 4.86 against 5.08 at one unit); a matrix of at least GQ_WIDE_UNITS units per SM (the lm_head) four per warp (133.5 against
 * 141.6, int8); every other shape one unit per warp in blocks of GQ_WARPS, where more units per warp lost (gqkv
 * 7.21 at four units against 6.40, o_proj 3.85 at two against 3.29: fewer warps on each SM to hide the loads
 * behind) or gained little (gate_up). */
#define GQ_WIDE_UNITS 1024
static void gq_shape(const fk_ctx *kc, int n, int load, int shrt, int units, int *P, int *warps) {
    *P = 1;
    *warps = GQ_WARPS;
    if (n == 1 && kc->gq_units) /* where it is not built (a scale per chunk, 4 units at long rounds): refused */
        *P = kc->gq_units;
    else if (n == 1 && !load && !shrt) {
        *P = 2;
        *warps = 2;
    } else if (n == 1 && !load && units >= GQ_WIDE_UNITS * kc->sms)
        *P = 4;
    if (kc->gq_warps) *warps = kc->gq_warps;
}

static int q_launch_simt(const fk_ctx *kc, const frigg_mat *W, const qgeom &g, const uint16_t *x, int B, int norm_in,
                         float eps, int epi, uint16_t *out, const fk_qkv_epi &qa, cudaStream_t s) {
    const int O = W->rows, K = W->cols;
    const int units = epi == FK_GEMV_SWIGLU || epi == FK_GEMV_QKV ? O / 2 : O;
    const int load = gq_scale_mode(W->dtype, g, K / 8) == GQ_SC_LOAD;
    for (int b = 0, n; b < B; b += n) { /* launches of GQ_SIMT_ROWS rows, the last maybe fewer; GQ_SC_LOAD: one */
        n = load ? 1 : B - b < GQ_SIMT_ROWS ? B - b : GQ_SIMT_ROWS;
        const uint16_t *xb = x;
        uint16_t *ob = out;
        fk_qkv_epi qb = qa;
        gemv_rows_from(b, O, K, epi, &xb, &ob, &qb);
        int P, warps;
        gq_shape(kc, n, load, gq_short(K), units, &P, &warps);
        const int per_block = P * warps;
        gemv_q_fn f = pick_q_any(W->dtype, n, P, norm_in, epi, gq_short(K), load);
        if (!f) {
            frigg_set_error("gemv_q: %d units per warp are not built for this matrix (K %d, %s)", P, K,
                            load ? "a scale per chunk" : "not whole rounds of 6 chunks per lane");
            return -1;
        }
        fk_launch(kc, f, (units + per_block - 1) / per_block,
                  warps * 32, norm_in ? (size_t)n * K * 2 : 0, s, (const unsigned char *)W->w, W->scales, O, K, g,
                  xb, eps, ob, qb);
        if (fk_check_launch("gemv_q")) return -1;
    }
    return 0;
}

extern "C" int fk_ctx_set_gemv_q_simt(fk_ctx *kc, int units, int warps) {
    if ((units && units != 1 && units != 2 && units != 4) || (warps && warps != 1 && warps != 2 && warps != 4)) {
        frigg_set_error("gemv_q: %d units per warp, %d warps per block: each must be 0 (the default), 1, 2 or 4",
                        units, warps);
        return -1;
    }
    kc->gq_units = units;
    kc->gq_warps = warps;
    return 0;
}

/* fk_gemv for an INT8/INT4 W (gemv.cu's fk_gemv hands these here; epi STORE, RESID or SWIGLU). */
int gemv_q_launch(const fk_ctx *kc, const frigg_mat *W, const uint16_t *x, int B, int norm_in, float eps, int epi,
                  uint16_t *out, cudaStream_t s) {
    qgeom g;
    if (q_check(W, "gemv", &g)) return -1;
    const int O = W->rows, K = W->cols;
    /* the CUDA-core kernel's staged x of up to 8 rows: past 8 the tensor-core kernel takes the call, or launches
     * of at most 8 (q_launch_simt: of 2) */
    size_t smem = norm_in ? (size_t)gemv_simt_rows(B) * K * 2 : 0;
    if (B < 1 || B > FK_GEMV_MAX_ROWS || (epi != FK_GEMV_STORE && epi != FK_GEMV_RESID && epi != FK_GEMV_SWIGLU) ||
        (epi == FK_GEMV_SWIGLU && O % 2) || smem > GEMV_MAX_SMEM || !fk_aligned16(x)) {
        frigg_set_error("gemv: unsupported shape for %s weights (rows %d, out %d, in %d, epilogue %d%s)",
                        frigg_dtype_name(W->dtype), B, O, K, epi, fk_aligned16(x) ? "" : ", x not 16-byte aligned");
        return -1;
    }
    fk_qkv_epi none = {};
    none.hd = 2;
    if (q_use_tc(kc, B, O, K, epi))
        return gemv_tc_launch_dt(kc, W->dtype, W->w, W->scales, g, O, K, x, B, norm_in, eps, epi, out, &none, s);
    return q_launch_simt(kc, W, g, x, B, norm_in, eps, epi, out, none, s);
}

/* fk_gemv_qkv for an INT8/INT4 gqkv: RMSNorm, the four sections, RoPE of q and k, k and v into the cache, one
 * kernel, under either implementation (the fused epilogue of the bf16 kernels, gemv_common.cuh's gemv_store). */
int gemv_q_qkv(const fk_ctx *kc, const frigg_mat *W, const uint16_t *x, int B, float eps, uint16_t *gqkv,
               const fk_qkv_epi *qa, cudaStream_t s) {
    const int D = W->cols, O = W->rows;
    qgeom g;
    if (q_check(W, "gemv_qkv", &g)) return -1;
    if (qa->hd < 2 || qa->hd % 2 || D % qa->hd) {
        frigg_set_error("gemv_qkv: head_dim %d does not divide the hidden size %d into heads", qa->hd, D);
        return -1;
    }
    if (B < 1 || B > FK_GEMV_MAX_ROWS || (size_t)gemv_simt_rows(B) * D * 2 > GEMV_MAX_SMEM ||
        !fk_aligned16(x)) {
        frigg_set_error("gemv_qkv: unsupported shape for %s weights (rows %d, in %d)", frigg_dtype_name(W->dtype), B, D);
        return -1;
    }
    if (q_use_tc(kc, B, O, D, FK_GEMV_QKV))
        return gemv_tc_launch_dt(kc, W->dtype, W->w, W->scales, g, O, D, x, B, 1, eps, FK_GEMV_QKV, gqkv, qa, s);
    return q_launch_simt(kc, W, g, x, B, 1, eps, FK_GEMV_QKV, gqkv, *qa, s);
}

extern "C" int fk_dequant_bf16(const fk_ctx *kc, const frigg_mat *W, int r0, int n, uint16_t *out, cudaStream_t s) {
    qgeom g;
    if (q_check(W, "dequant_bf16", &g)) return -1;
    if (r0 < 0 || n < 0 || r0 > W->rows - n || !fk_aligned16(out)) {
        frigg_set_error("dequant_bf16: rows [%d, %d) of a %d-row matrix%s", r0, r0 + n, W->rows,
                        fk_aligned16(out) ? "" : ", output not 16-byte aligned");
        return -1;
    }
    if (n == 0) return 0;
    const int K = W->cols;
    const unsigned char *w = (const unsigned char *)W->w + (size_t)r0 * frigg_mat_row_bytes(W);
    const uint16_t *sc = W->scales + (size_t)r0 * g.ng;
    size_t chunks = (size_t)n * (K / 8), blocks = (chunks + 255) / 256;
    if (blocks > (size_t)kc->sms * 16) blocks = (size_t)kc->sms * 16; /* grid-stride past the resident blocks */
    if (W->dtype == FRIGG_DT_INT8)
        fk_launch(kc, dequant_kernel<FRIGG_DT_INT8>, (unsigned)blocks, 256, 0, s, w, sc, n, K, g, out);
    else
        fk_launch(kc, dequant_kernel<FRIGG_DT_INT4>, (unsigned)blocks, 256, 0, s, w, sc, n, K, g, out);
    return fk_check_launch("dequant_bf16");
}
