/* gemv.cu — decode-time matrix·vector products for 1..16 rows in one pass over the weights, and the
 * launcher that picks the implementation: FK_GEMV_IMPL_SIMT (this file's kernel), FK_GEMV_IMPL_TC (gemv_tc.cu),
 * or FK_GEMV_IMPL_AUTO (the default): per batch size and shape class, the one the H200 measured faster (the
 * table below). A forced implementation serves every batch size with one summation order, so batched decode
 * is bit-identical to single-row decode; under auto a row's bits depend on how many rows share the pass
 * (at B = 1 the normed gqkv and gate_up run simt, everything else the tensor-core kernel), so batched equals
 * single only within rounding.
 * The CUDA-core kernel: warp per output row (two rows for the fused SwiGLU: gate row i and up row I+i), 16-byte
 * streaming loads, GEMV_UNROLL chunks per lane in flight before any arithmetic. The batch size is a template
 * parameter so the accumulators live in registers. Optional fused input RMSNorm (x staged, normalised, in
 * shared memory) and fused epilogues (residual add, SwiGLU) remove the separate elementwise kernels of a
 * decode step. Split-K over two warps per row for down_proj (K 4096, two rounds of loads per warp) was tried
 * and measured (the split-K A/B rows in benchmarks/h200-2026-11-29/: batch 1 210.0 against 207.0 tok/s, batch 8 616.6 against 625.8,
 * context 512): not kept. */
#include "gemv_common.cuh"

#include <stdlib.h>
#include <string.h>

#define GEMV_WARPS 4
#define GEMV_UNROLL 8       /* chunks of 16 bytes per lane (and row) in flight */
/* Row pairs (gqkv, gate_up) of K <= 1536 at batch 1 (DFM-Mimir's): 3 chunks per lane and row, two rounds,
 * instead of GEMV_UNROLL's 8 (of which a K-1536 row uses 6). Fewer registers, more blocks per SM (96
 * registers: 5 blocks of 4 warps; 64: 8), so gqkv (768 blocks) and gate_up (1024) each run in one wave on 132
 * SMs, with more warps resident to hide the later rounds. Batch-1 decode (ctx 512): 6 chunks (79 registers, 6
 * blocks) 260.6 -> 263.7 tok/s, 4 chunks 265.0 -> 275.8 against 6, 3 chunks 274.2 -> 279.9 against 4
 * (the frigg-bench A/B rows in benchmarks/h200-2026-11-30/). Chunks are summed in the same order whatever the
 * unroll: the same bits. */
#define GEMV_SHORT_K (32 * 6 * 8)
#define GEMV_SHORT_UNROLL 3
enum { GEMV_V_NORMAL = 0, GEMV_V_SHORT = 1, GEMV_NV = 2 };

template <int B, int R, bool NORM, int EPI, int U>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_kernel(const uint16_t *__restrict__ W, int O, int K, const uint16_t *__restrict__ x, float eps,
                uint16_t *__restrict__ out, fk_qkv_epi qa) {
    extern __shared__ uint4 xs[];
    __shared__ float scratch[B * 32]; /* stage_norm: 32 per batch row */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nch = K / 8;
    int unit = blockIdx.x * GEMV_WARPS + warp; /* output row (or SwiGLU output index, or RoPE pair) of this warp */
    bool valid = unit < O / R; /* R = 2: rows unit and O/2 + unit (SwiGLU: gate and up; plain: two halves) */
    int row1 = unit, row2 = unit;
    if (R > 1) pair_rows<EPI>(unit, O, qa.hd, &row1, &row2);
    const uint4 *wrow[R];
    wrow[0] = (const uint4 *)(W + (size_t)row1 * K);
    if (R > 1) wrow[R - 1] = (const uint4 *)(W + (size_t)row2 * K);
    /* The first batch of weights does not depend on earlier kernels: start streaming it before the wait. */
    uint4 w[U][R];
#pragma unroll
    for (int u = 0; u < U; u++) {
        int c = lane + 32 * u;
#pragma unroll
        for (int r = 0; r < R; r++) w[u][r] = valid && c < nch ? ld_stream(wrow[r] + c) : make_uint4(0, 0, 0, 0);
    }
    /* lane b stores batch row b, and loads its residual right after the wait (gemv_pre). The QKV operands are
     * not loaded early here: holding them took the batch-1 gqkv kernel from 96 to 107 registers, 5 to 4
     * blocks per SM, a batch-1 loss (7edf85e). */
    gemv_pre pre = {0, 0, 0, 0.0f, false, false};
    pdl_wait();
    if (EPI == FK_GEMV_RESID && valid && lane < B) gemv_preload_resid<EPI>(pre, row1, lane, O, out);
    const uint4 *xv = (const uint4 *)x;
    if (NORM) xv = stage_norm<B>(xv, nch, K, eps, xs, scratch);
    if (!valid) return;
    float acc[R][B];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < B; b++) acc[r][b] = 0.0f;
    for (int c0 = lane; c0 < nch; c0 += 32 * U) { /* chunks in increasing order whatever U: same sums */
        if (c0 != lane) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                int c = c0 + 32 * u;
#pragma unroll
                for (int r = 0; r < R; r++) w[u][r] = c < nch ? ld_stream(wrow[r] + c) : make_uint4(0, 0, 0, 0);
            }
        }
        auto round = [&](bool full) {
#pragma unroll
            for (int u = 0; u < U; u++) {
                int c = c0 + 32 * u;
                if (!full && c >= nch) break;
#pragma unroll
                for (int b = 0; b < B; b++) {
                    uint4 v = NORM ? xv[(size_t)b * nch + c] : ld_act(xv + (size_t)b * nch + c); /* shared, or x */
                    float xf[8] = {bf_lo(v.x), bf_hi(v.x), bf_lo(v.y), bf_hi(v.y),
                                   bf_lo(v.z), bf_hi(v.z), bf_lo(v.w), bf_hi(v.w)};
#pragma unroll
                    for (int r = 0; r < R; r++) acc[r][b] += dot8(w[u][r], xf);
                }
            }
        };
        /* every round full (K a multiple of 32 x U x 8, DFM-Mimir's shapes): no per-chunk exit, so the x loads
         * can go ahead of the arithmetic (aa4e062: batch 1 285.5-285.8 against 283.6-285.5 tok/s, the same sums) */
        if (nch % (32 * U) == 0) round(true);
        else round(false);
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int b = 0; b < B; b++) acc[r][b] = warp_sum(acc[r][b]);
#pragma unroll
    for (int b = 0; b < B; b++)
        if (lane == b) gemv_store<EPI>(unit, row1, b, acc[0][b], acc[R - 1][b], O, out, qa, pre);
}

typedef void (*gemv_fn)(const uint16_t *, int, int, const uint16_t *, float, uint16_t *, fk_qkv_epi);

template <int B>
static gemv_fn pick(int norm, int epi, int variant) {
    if (B == 1 && variant == GEMV_V_SHORT) {
        if (epi == FK_GEMV_QKV)
            return norm ? gemv_kernel<1, 2, true, FK_GEMV_QKV, GEMV_SHORT_UNROLL> : gemv_kernel<1, 2, false, FK_GEMV_QKV, GEMV_SHORT_UNROLL>;
        if (epi == FK_GEMV_SWIGLU)
            return norm ? gemv_kernel<1, 2, true, FK_GEMV_SWIGLU, GEMV_SHORT_UNROLL> : gemv_kernel<1, 2, false, FK_GEMV_SWIGLU, GEMV_SHORT_UNROLL>;
    }
    if (epi == FK_GEMV_QKV) return norm ? gemv_kernel<B, 2, true, FK_GEMV_QKV, GEMV_UNROLL> : gemv_kernel<B, 2, false, FK_GEMV_QKV, GEMV_UNROLL>;
    if (epi == FK_GEMV_SWIGLU)
        return norm ? gemv_kernel<B, 2, true, FK_GEMV_SWIGLU, GEMV_UNROLL> : gemv_kernel<B, 2, false, FK_GEMV_SWIGLU, GEMV_UNROLL>;
    if (epi == FK_GEMV_RESID) return norm ? gemv_kernel<B, 1, true, FK_GEMV_RESID, GEMV_UNROLL> : gemv_kernel<B, 1, false, FK_GEMV_RESID, GEMV_UNROLL>;
    return norm ? gemv_kernel<B, 1, true, FK_GEMV_STORE, GEMV_UNROLL> : gemv_kernel<B, 1, false, FK_GEMV_STORE, GEMV_UNROLL>;
}

static gemv_fn pick_b(int B, int norm, int epi, int variant) {
    switch (B) {
    case 1: return pick<1>(norm, epi, variant);
    case 2: return pick<2>(norm, epi, variant);
    case 3: return pick<3>(norm, epi, variant);
    case 4: return pick<4>(norm, epi, variant);
    case 5: return pick<5>(norm, epi, variant);
    case 6: return pick<6>(norm, epi, variant);
    case 7: return pick<7>(norm, epi, variant);
    case 8: return pick<8>(norm, epi, variant);
    }
    return NULL;
}

/* auto (FK_GEMV_IMPL_AUTO). Per shape class and batch size: 's' simt, 't' tc. fk_ctx_set_gemv_auto replaces
 * rows of a context's table for tuning runs (kernels/dev/gemv.cu). The table follows the measurement in
 * the kernels/dev/gemv timings in benchmarks/h200-2026-11-30/, µs per launch as simt / tc:
 *   gqkv    B1 8.54/9.36    B2 11.50/10.60  B4 18.22/11.71  B8 31.09/14.38
 *   gate_up B1 9.24/9.85    B2 12.06/10.72  B4 17.83/11.85  B8 29.65/14.46
 *   o_proj  B1 3.18/3.10    B2 3.59/3.27    B4 4.39/3.29    B8 6.45/3.80
 *   down    B1 6.77/5.83    B2 7.69/6.18    B4 8.66/6.22    B8 12.49/6.74
 *   lm_head B1 178.0/206.9  B2 179.5/208.3  B4 247.8/210.4  B8 423.7/217.2
 * B 3, 5, 6, 7 were not measured: each takes the side of the crossover its neighbours put it on (o_proj B3:
 * simt, interpolating 3.98 against 4.21; lm_head B3: simt, 208 against 216). */
enum { AUTO_GQKV, AUTO_GATE_UP, AUTO_O_PROJ, AUTO_DOWN, AUTO_LM_HEAD, AUTO_Q = 5 /* + the class: quantized */ };
static const char auto_default[GEMV_AUTO_ROWS][9] = {
    /* B = 12345678 */
    "sttttttt", /* gqkv: QKV epilogue, or plain with 2K <= O <= 65536 and K <= 2048 */
    "sttttttt", /* gate_up: SwiGLU epilogue */
    "tttttttt", /* o_proj: plain, K <= 2048, O < 2K */
    "tttttttt", /* down: plain, K > 2048 */
    "sssttttt", /* lm_head: plain, O > 65536 */
    /* INT8 / INT4 weights: gemv_q.cu's CUDA-core kernel against gemv_tc.cu's quantized load, from the
     * kernels/dev/gemv_q timings in benchmarks/h200-2026-12-02/gemvq/ (µs, int8 simt / tc):
     *   gqkv    B1 6.01/9.24    B2 9.48/10.04   B4 14.91/10.12
     *   gate_up B1 7.84/9.59    B2 9.61/10.19   B4 14.36/10.29
     *   o_proj  B1 3.32/3.03    B2 3.72/3.18
     *   down    B1 5.25/5.85    B2 5.38/6.18    (one round of 16 chunks; builds/gemv_q.txt)
     *   lm_head B1 165.2/238.2  B2 206.5/234.6  B4 293.3/233.1
     * int4 g128 takes the same sides (o_proj B1 2.87/3.07). o_proj is simt at batch 1 although its launch alone
     * measured slower: in the int8 decode step at batch 1, simt o_proj and down made 0.901x bf16's tok/s
     * (gemvq/builds.jsonl), tc for both 0.875x (builds/builds.jsonl), although tc's launches alone were the
     * faster; its one big block per SM cannot start beside the kernel in front. */
    "sstttttt", /* q.gqkv */
    "sstttttt", /* q.gate_up */
    "sttttttt", /* q.o_proj */
    "sstttttt", /* q.down */
    "sstttttt", /* q.lm_head */
};
static const char *const auto_rows[GEMV_AUTO_ROWS] = {"gqkv",     "gate_up",   "o_proj",   "down",   "lm_head",
                                                      "q.gqkv",   "q.gate_up", "q.o_proj", "q.down", "q.lm_head"};

extern "C" int fk_ctx_set_gemv_auto(fk_ctx *kc, const char *rows) {
    char table[GEMV_AUTO_ROWS][9];
    memcpy(table, kc->gemv_auto, sizeof table);
    for (const char *at = rows;;) {
        const char *eq = strchr(at, '='), *end = strchr(at, ',');
        if (!end) end = at + strlen(at);
        int row = -1;
        for (int r = 0; r < GEMV_AUTO_ROWS && eq && eq < end; r++)
            if ((size_t)(eq - at) == strlen(auto_rows[r]) && !strncmp(at, auto_rows[r], (size_t)(eq - at))) row = r;
        int ok = row >= 0 && end - eq - 1 == 8;
        for (int i = 0; ok && i < 8; i++) ok = eq[1 + i] == 's' || eq[1 + i] == 't';
        if (!ok) {
            frigg_set_error("gemv auto table: '%.*s' is not NAME=8 letters of s, t (NAME: gqkv, gate_up, o_proj, down, "
                            "lm_head, or one of those after q. for quantized weights)", (int)(end - at), at);
            return -1;
        }
        memcpy(table[row], eq + 1, 8);
        if (!*end) break;
        at = end + 1;
    }
    memcpy(kc->gemv_auto, table, sizeof table);
    return 0;
}
/* auto's letter for this call; quant: INT8 / INT4 weights (the q. rows) */
char gemv_auto_choice(const fk_ctx *kc, int quant, int B, int O, int K, int epi) {
    /* A plain GEMV at least twice as tall as it is wide (and K <= 2048) is the gqkv of the int8 KV cache, whose
     * RoPE and cache write are the attention kernel's: the gqkv row, not o_proj's. As o_proj's it ran on tensor
     * cores at batch 1 with its fused RMSNorm, 11.28 us per launch against the CUDA-core QKV-epilogue GEMV's 10.12
     * in the same step shape (Nsight Compute, benchmarks/h200-2026-12-03/kvdiag/kern-*.txt); on this row, decode
     * with the int8 cache ran 1.045x at batch 1 and ctx 4096, 1.025x at ctx 512 (kvgemv/ab-summary.txt, with the
     * attention writer's earlier loads). */
    if (B > GEMV_SIMT_MAX_ROWS) return 't'; /* the table's batch sizes end at 8; beyond, one tensor-core pass */
    int cls = epi == FK_GEMV_QKV ? AUTO_GQKV : epi == FK_GEMV_SWIGLU ? AUTO_GATE_UP : O > 65536 ? AUTO_LM_HEAD
              : K > 2048 ? AUTO_DOWN : O >= 2 * K ? AUTO_GQKV : AUTO_O_PROJ;
    return kc->gemv_auto[(quant ? AUTO_Q : 0) + cls][B - 1];
}
static char auto_choice(const fk_ctx *kc, int B, int O, int K, int epi) { return gemv_auto_choice(kc, 0, B, O, K, epi); }
static int auto_impl(const fk_ctx *kc, int quant, int B, int O, int K, int epi) {
    return B >= 1 && B <= FK_GEMV_MAX_ROWS && K <= GEMV_TC_MAX_K && gemv_auto_choice(kc, quant, B, O, K, epi) != 's'
               ? FK_GEMV_IMPL_TC
               : FK_GEMV_IMPL_SIMT;
}
extern "C" int fk_ctx_gemv_auto_impl(const fk_ctx *kc, int B, int O, int K, int epi) { return auto_impl(kc, 0, B, O, K, epi); }
extern "C" int fk_ctx_gemv_q_auto_impl(const fk_ctx *kc, int B, int O, int K, int epi) { return auto_impl(kc, 1, B, O, K, epi); }

extern "C" int fk_ctx_set_gemv_impl(fk_ctx *kc, int impl) {
    if (impl != FK_GEMV_IMPL_SIMT && impl != FK_GEMV_IMPL_TC && impl != FK_GEMV_IMPL_AUTO) {
        frigg_set_error("gemv: unknown implementation %d", impl);
        return -1;
    }
    kc->gemv_impl = impl;
    return 0;
}
extern "C" int fk_ctx_gemv_impl(const fk_ctx *kc) { return kc->gemv_impl; }
extern "C" const char *fk_gemv_impl_name(int impl) {
    return impl == FK_GEMV_IMPL_TC ? "tc" : impl == FK_GEMV_IMPL_SIMT ? "simt" : impl == FK_GEMV_IMPL_AUTO ? "auto" : "?";
}

/* The context's defaults, and the shared-memory limit of every instantiation on its device. */
int fk_gemv_ctx_init(fk_ctx *kc) {
    kc->gemv_impl = FK_GEMV_IMPL_AUTO;
    memcpy(kc->gemv_auto, auto_default, sizeof auto_default);
    for (int B = 1; B <= 8; B++)
        for (int epi = 0; epi < 4 * GEMV_NV; epi++) {
            cudaError_t e = cudaFuncSetAttribute((const void *)pick_b(B, 1, epi & 3, epi >> 2),
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, GEMV_MAX_SMEM);
            if (e != cudaSuccess) {
                frigg_set_error("gemv: cannot raise the shared-memory limit: %s", cudaGetErrorString(e));
                return -1;
            }
        }
    return 0;
}

static int gemv_launch(const fk_ctx *kc, const uint16_t *W, int O, int K, const uint16_t *x, int B, int norm_in,
                       float eps, int epi, uint16_t *out, const fk_qkv_epi *qa, cudaStream_t s) {
    size_t smem = norm_in ? (size_t)gemv_simt_rows(B) * K * 2 : 0; /* a CUDA-core launch's staged x */
    if (B < 1 || B > FK_GEMV_MAX_ROWS || K % 8 || (epi != FK_GEMV_STORE && epi != FK_GEMV_RESID && O % 2) || smem > GEMV_MAX_SMEM ||
        epi < 0 || epi > 3 || (epi == FK_GEMV_QKV && (O % 4 || qa->hd % 2 || (O / 4) % qa->hd))) {
        frigg_set_error("gemv: unsupported shape (rows %d, out %d, in %d, epilogue %d)", B, O, K, epi);
        return -1;
    }
    char use = kc->gemv_impl == FK_GEMV_IMPL_TC     ? 't'
               : kc->gemv_impl == FK_GEMV_IMPL_SIMT ? 's'
                                                    : auto_choice(kc, B, O, K, epi);
    if (K > GEMV_TC_MAX_K) use = 's'; /* the tensor-core kernel keeps one round of K per warp (DFM-Mimir: K <= 4096) */
    if (use != 's') return gemv_tc_launch(kc, W, O, K, x, B, norm_in, eps, epi, out, qa, s);
    /* Past 8 rows (simt forced, or K past the tensor-core kernel; under auto the table ends at 8 and beyond one
     * tensor-core pass reads the weights once for all rows): launches of 8, whose rows have the bits they would
     * alone. */
    if (B > GEMV_SIMT_MAX_ROWS) {
        for (int b0 = 0, n; b0 < B; b0 += n) {
            n = gemv_simt_rows(B - b0);
            const uint16_t *xb = x;
            uint16_t *ob = out;
            fk_qkv_epi qb = *qa;
            gemv_rows_from(b0, O, K, epi, &xb, &ob, &qb);
            if (gemv_launch(kc, W, O, K, xb, n, norm_in, eps, epi, ob, &qb, s)) return -1;
        }
        return 0;
    }
    /* Two rows per warp only where the epilogue needs the pair. Pairing plain rows to halve the x reads at
     * batch >= 3 was measured slower on the H200 (batch 8: 581 against 643 tok/s), so it is not done. */
    int pair = epi == FK_GEMV_SWIGLU || epi == FK_GEMV_QKV;
    int units = pair ? O / 2 : O;
    int variant = B == 1 && pair && K <= GEMV_SHORT_K ? GEMV_V_SHORT : GEMV_V_NORMAL;
    fk_launch(kc, pick_b(B, norm_in, epi, variant), (units + GEMV_WARPS - 1) / GEMV_WARPS, GEMV_WARPS * 32, smem, s, W, O, K, x, eps,
              out, *qa);
    return fk_check_launch("gemv");
}

extern "C" int fk_gemv(const fk_ctx *kc, const frigg_mat *W, const uint16_t *x, int B, int norm_in, float eps, int epi,
                       uint16_t *out, cudaStream_t s) {
    fk_qkv_epi none = {};
    none.hd = 2;
    if (epi == FK_GEMV_QKV) {
        frigg_set_error("gemv: the QKV epilogue goes through fk_gemv_qkv");
        return -1;
    }
    if (W->dtype == FRIGG_DT_INT8 || W->dtype == FRIGG_DT_INT4) return gemv_q_launch(kc, W, x, B, norm_in, eps, epi, out, s);
    const uint16_t *w = fk_mat_bf16(W, "gemv");
    return w ? gemv_launch(kc, w, W->rows, W->cols, x, B, norm_in, eps, epi, out, &none, s) : -1;
}

extern "C" int fk_gemv_qkv(const fk_ctx *kc, const frigg_mat *W, const uint16_t *x, int B, float eps, uint16_t *gqkv,
                           const fk_qkv_epi *qa, cudaStream_t s) {
    if (W->rows != 4 * W->cols) {
        frigg_set_error("gemv_qkv: gqkv is [%d][%d], not [4D][D]", W->rows, W->cols);
        return -1;
    }
    if (W->dtype == FRIGG_DT_INT8 || W->dtype == FRIGG_DT_INT4) return gemv_q_qkv(kc, W, x, B, eps, gqkv, qa, s);
    const uint16_t *w = fk_mat_bf16(W, "gemv_qkv");
    if (!w) return -1;
    return gemv_launch(kc, w, W->rows, W->cols, x, B, 1, eps, FK_GEMV_QKV, gqkv, qa, s);
}
