/* test_cuda_gemv_q.c — the CUDA kernels for quantized weights (kernels/gemv_q.cu, common/engine/cuda_gemm.c) against
 * the CPU ops that define them (cpu_ops.h: frigg_cpu_linear; model.h: frigg_mat_row), on INT8 and INT4
 * matrices in model.h's packed layout with q over the whole code range and random bf16 scales:
 *   - fk_dequant_bf16 equals frigg_mat_row's bf16(q * scale) bit for bit (whole matrices and row ranges;
 *     one scale per row and groups of 8, 32, 64, 128; negative, tiny and subnormal scales too);
 *   - fk_gemv on an INT8/INT4 descriptor, every batch size 1..16, epilogues STORE, RESID and SWIGLU, with and
 *     without the fused input RMSNorm, under both implementations (simt: gemv_q.cu's CUDA-core kernel; tc:
 *     gemv_tc.cu's tensor-core kernel reading the packed weights): within the bf16 tolerance of
 *     frigg_cpu_linear on the same quantized host matrix, AND bit for bit the bf16 GEMV of the same
 *     implementation on the bf16 matrix of the CPU's dequantized values; batch rows equal single-row passes
 *     bit for bit under simt and tc, and auto runs the kernel its table's q. rows name at each batch size;
 *   - fk_gemv_qkv on a quantized gqkv, under both implementations: q, the cache's k and v and the gate rows
 *     bit for bit the bf16 fused kernel's of the same implementation on the dequantized matrix, and within
 *     tolerance of the CPU's rmsnorm + linear + RoPE;
 *   - frigg_cuda_gemm_dq (the prefill GEMM): with the whole matrix in the scratch, bit for bit
 *     frigg_cuda_gemm on the dequantized bf16 matrix; in tiles, within tolerance of frigg_cpu_linear; too
 *     little scratch refused; a bf16 matrix passed through;
 *   - descriptors the kernels cannot read are refused by name (no scales, a group that is not a multiple
 *     of 8, a misaligned pointer).
 * Shapes: DFM-Mimir's (hidden 1536, intermediate 4096, vocabulary 262144, 12 heads of 128: o_proj, gqkv,
 * gate_up, down, lm_head) and small ones with partial blocks, K/8 = 257 and K > 4096.
 * Without a GPU (or without CUDA in the build) the GPU part is skipped with a SKIP line; the host-side checks
 * (the test's own packing against frigg_mat_q, the scratch-size helper) run anyway. FRIGG_QUICK=1 leaves
 * out the lm_head shapes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/model.h"
#include "base/util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "engine/backend.h"
#include "engine/cpu_ops.h"
#include "engine/cuda_gemm.h"
#include "../kernels/kernels.h"
#define CUDA_TEST_SEED 0x9e3779b97f4a7c15ull
#include "cuda_test_util.h"
#endif

/* The host side's own generator (the CPU checks run in CPU-only builds too). */
static uint64_t q_rng = 0x2545f4914f6cdd1dull;
static uint32_t q_next(void) {
    q_rng ^= q_rng << 13;
    q_rng ^= q_rng >> 7;
    q_rng ^= q_rng << 17;
    return (uint32_t)(q_rng >> 32);
}
static float q_unif(void) { return (float)(q_next() >> 8) * (1.0f / 16777216.0f); } /* [0, 1) */

/* A quantized host matrix in model.h's layout, and the q values it was packed from. */
typedef struct {
    frigg_mat m;
    unsigned char *w;
    uint16_t *sc;
    int8_t *q; /* [rows][cols] */
} qmat;

enum { SCALES_NORMAL = 0, SCALES_SPECIAL = 1 };

/* q uniform over the whole code range ([-128, 127] / [-8, 7]); scales bf16 with random mantissas around
 * mag / qmax (so weights are about mag in size). SCALES_SPECIAL also uses negative scales (the -0 of q = 0),
 * the all-zero group's 2^-7, tiny and subnormal ones (no flush to zero) and large ones. */
static qmat qmat_make(frigg_dtype dt, int O, int K, int group, float mag, int special) {
    qmat a;
    memset(&a, 0, sizeof a);
    int ng = group ? K / group : 1, qmax = dt == FRIGG_DT_INT8 ? 128 : 8;
    size_t rb = dt == FRIGG_DT_INT8 ? (size_t)K : ((size_t)K + 1) / 2;
    a.w = calloc((size_t)O * rb, 1);
    a.sc = malloc((size_t)O * ng * 2);
    a.q = malloc((size_t)O * K);
    for (int r = 0; r < O; r++)
        for (int i = 0; i < K; i++) {
            int q = (int)(q_next() % (2u * qmax)) - qmax;
            a.q[(size_t)r * K + i] = (int8_t)q;
            unsigned char *row = a.w + (size_t)r * rb;
            if (dt == FRIGG_DT_INT8) row[i] = (unsigned char)(q + 128);
            else row[i >> 1] |= (unsigned char)((q + 8) << ((i & 1) * 4));
        }
    static const uint16_t special_scales[] = {0x3c00 /* 2^-7 */, 0x0001, 0x0055, 0x007f /* subnormal */,
                                              0x0080 /* 2^-126 */, 0x00c3, 0x7000, 0x7e7f, 0x8123, 0xbc01};
    for (size_t j = 0; j < (size_t)O * ng; j++) {
        float s = mag / (float)qmax * (0.5f + q_unif());
        uint16_t b = frigg_f32_to_bf16(s);
        if (special && q_next() % 4 == 0) b = special_scales[q_next() % (sizeof special_scales / sizeof special_scales[0])];
        if (special && q_next() % 5 == 0) b ^= 0x8000;
        a.sc[j] = b;
    }
    a.m = (frigg_mat){.w = a.w, .rows = O, .cols = K, .dtype = dt, .scales = a.sc, .group = group};
    return a;
}
static void qmat_free(qmat *a) {
    free(a->w);
    free(a->sc);
    free(a->q);
}
/* The CPU's dequantized matrix (frigg_mat_row) as bf16 bits [rows][cols]. */
static uint16_t *qmat_bf16(const qmat *a) {
    int O = a->m.rows, K = a->m.cols;
    uint16_t *out = malloc((size_t)O * K * 2);
    float *row = malloc((size_t)K * sizeof(float));
    for (int r = 0; r < O; r++) {
        frigg_mat_row(&a->m, r, row);
        for (int i = 0; i < K; i++) out[(size_t)r * K + i] = frigg_f32_to_bf16(row[i]);
    }
    free(row);
    return out;
}

/* Host side: the packing above is model.h's layout (frigg_mat_q reads back every q), and frigg_mat_row is
 * bf16(q * scale) of those q. */
static void test_packing(void) {
    static const struct {
        frigg_dtype dt;
        int O, K, group;
    } cases[] = {{FRIGG_DT_INT8, 7, 24, 0}, {FRIGG_DT_INT8, 5, 64, 32}, {FRIGG_DT_INT4, 7, 24, 8},
                 {FRIGG_DT_INT4, 3, 256, 128}, {FRIGG_DT_INT4, 4, 40, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        qmat a = qmat_make(cases[c].dt, cases[c].O, cases[c].K, cases[c].group, 0.1f, SCALES_SPECIAL);
        int bad_q = 0, bad_w = 0, K = a.m.cols, ng = frigg_mat_ngroups(&a.m), G = a.m.group ? a.m.group : K;
        uint16_t *dq = qmat_bf16(&a);
        for (int r = 0; r < a.m.rows; r++)
            for (int i = 0; i < K; i++) {
                int q = a.q[(size_t)r * K + i];
                bad_q += frigg_mat_q(&a.m, r, i) != q;
                float want = frigg_round_bf16((float)q * frigg_bf16_to_f32(a.sc[(size_t)r * ng + i / G]));
                bad_w += dq[(size_t)r * K + i] != frigg_f32_to_bf16(want);
            }
        CHECK(bad_q == 0, "packing %s %dx%d g%d: %d values read back wrong", frigg_dtype_name(a.m.dtype), a.m.rows, K,
              a.m.group, bad_q);
        CHECK(bad_w == 0, "frigg_mat_row %s %dx%d g%d: %d weights not bf16(q * scale)", frigg_dtype_name(a.m.dtype),
              a.m.rows, K, a.m.group, bad_w);
        free(dq);
        qmat_free(&a);
    }
}

#ifdef FRIGG_CUDA
static fk_ctx *kc;
#define TB FK_GEMV_MAX_ROWS /* batch rows tested: every B up to one call's limit */
static int quick;

static void *dev_copy(const void *h, size_t bytes) {
    void *d = NULL;
    cudaMalloc(&d, bytes + 16);
    cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}
/* The device descriptor of a host quantized matrix (values and scales uploaded as they are). */
static frigg_mat qmat_dev(const qmat *a) {
    frigg_mat d = a->m;
    d.w = dev_copy(a->w, (size_t)a->m.rows * frigg_mat_row_bytes(&a->m));
    d.scales = dev_copy(a->sc, (size_t)a->m.rows * frigg_mat_ngroups(&a->m) * 2);
    return d;
}
static void qmat_dev_free(frigg_mat *d) {
    cudaFree((void *)d->w);
    cudaFree((void *)d->scales);
}
static frigg_mat bf16_dev(const uint16_t *h, int O, int K) {
    return (frigg_mat){.w = dev_copy(h, (size_t)O * K * 2), .rows = O, .cols = K, .dtype = FRIGG_DT_BF16};
}
static void upload_bf16(uint16_t *d, const float *x, size_t n) {
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = frigg_f32_to_bf16(x[i]);
    cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice);
    free(h);
}
static void bits_from_dev(const uint16_t *d, size_t n, uint16_t *h) {
    cudaDeviceSynchronize();
    cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost);
}
/* The first index where two bf16 arrays differ, or -1. */
static long first_diff(const uint16_t *a, const uint16_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (long)i;
    return -1;
}

/* fk_dequant_bf16 == frigg_mat_row, bit for bit: the whole matrix and rows [1, O-1). */
static void test_dequant(frigg_dtype dt, int O, int K, int group, int special) {
    qmat a = qmat_make(dt, O, K, group, 0.05f, special);
    uint16_t *ref = qmat_bf16(&a), *got = malloc((size_t)O * K * 2), *dout;
    frigg_mat d = qmat_dev(&a);
    cudaMalloc((void **)&dout, (size_t)O * K * 2);
    for (int part = 0; part < 2; part++) {
        int r0 = part ? 1 : 0, n = part ? O - 2 : O;
        if (n < 1) continue;
        ct_poison(dout, (size_t)O * K);
        CHECK(fk_dequant_bf16(kc, &d, r0, n, dout, 0) == 0, "%s", frigg_error());
        bits_from_dev(dout, (size_t)n * K, got);
        long at = first_diff(got, ref + (size_t)r0 * K, (size_t)n * K);
        CHECK(at < 0, "dequant %s %dx%d g%d%s rows [%d, %d): element %ld (row %ld col %ld) is %04x, frigg_mat_row %04x",
              frigg_dtype_name(dt), O, K, group, special ? " special scales" : "", r0, r0 + n, at, r0 + at / K, at % K,
              at < 0 ? 0 : got[at], at < 0 ? 0 : ref[(size_t)r0 * K + at]);
    }
    CHECK(fk_dequant_bf16(kc, &d, 0, O + 1, dout, 0) == -1, "dequant: rows past the end accepted");
    CHECK(fk_dequant_bf16(kc, &d, 0, 1, dout + 1, 0) == -1, "dequant: a misaligned output accepted");
    cudaFree(dout);
    qmat_dev_free(&d);
    free(ref);
    free(got);
    qmat_free(&a);
}

/* Which epilogues and norms one GEMV shape runs. */
enum { E_STORE = 1 << FK_GEMV_STORE, E_RESID = 1 << FK_GEMV_RESID, E_SWIGLU = 1 << FK_GEMV_SWIGLU, E_ALL = 7 };
enum { N_OFF = 1, N_ON = 2, N_BOTH = 3 };

/* The CUDA-core kernel's shapes at batch 1 (fk_ctx_set_gemv_q_simt): units per warp, warps per block. */
static const int gq_shapes[][2] = {{1, 4}, {2, 4}, {4, 4}, {1, 2}, {2, 2}, {4, 2}, {1, 1}, {2, 1}, {4, 1}};
/* Whether gemv_q.cu builds P units per warp for this matrix: one unit always; more where a chunk's scale is not
 * loaded per chunk (int8 one scale per row; int4 with at most 32 groups of a power-of-two number of chunks and
 * K/8 % 32 == 0); 4 only where K is whole rounds of 6 chunks per lane (K % 1536 == 0). */
static int gq_built(frigg_dtype dt, int K, int group, int P) {
    const int ng = group ? K / group : 1, cpg = (group ? group : K) / 8;
    const int per_chunk = !(dt == FRIGG_DT_INT8 && ng == 1) &&
                          !(dt == FRIGG_DT_INT4 && ng <= 32 && (cpg & (cpg - 1)) == 0 && (K / 8) % 32 == 0);
    return P == 1 || (!per_chunk && (P == 2 || K % 1536 == 0));
}

static void test_gemv(frigg_pool *pool, frigg_dtype dt, int O, int K, int group, int epis, int norms) {
    char what[160];
    qmat a = qmat_make(dt, O, K, group, 1.0f / sqrtf((float)K), SCALES_NORMAL);
    uint16_t *dqh = qmat_bf16(&a);
    frigg_mat dQ = qmat_dev(&a), dB = bf16_dev(dqh, O, K);
    float *x = malloc(sizeof(float) * TB * K), *h = malloc(sizeof(float) * TB * O), *xn = malloc(sizeof(float) * TB * K);
    float *lin[2], *ref = malloc(sizeof(float) * TB * O), *got = malloc(sizeof(float) * TB * O);
    float *simt = malloc(sizeof(float) * TB * O), *one = malloc(sizeof(float) * TB * O);
    static const int impls[] = {FK_GEMV_IMPL_SIMT, FK_GEMV_IMPL_TC, FK_GEMV_IMPL_AUTO};
    ct_fill(x, (size_t)TB * K, 2.0f);
    ct_fill(h, (size_t)TB * O, 1.0f);
    lin[0] = malloc(sizeof(float) * TB * O);
    lin[1] = malloc(sizeof(float) * TB * O);
    /* the CPU op on the quantized matrix itself; rows are independent, so B rows are the first B */
    if (norms & N_OFF) frigg_cpu_linear(FRIGG_PREC_BF16, pool, &a.m, x, TB, lin[0]);
    frigg_cpu_rmsnorm(FRIGG_PREC_BF16, x, TB, K, 1e-6, xn);
    if (norms & N_ON) frigg_cpu_linear(FRIGG_PREC_BF16, pool, &a.m, xn, TB, lin[1]);
    uint16_t *dx = ct_to_dev(x, (size_t)TB * K), *dout, *dh;
    cudaMalloc((void **)&dout, (size_t)TB * O * 2);
    cudaMalloc((void **)&dh, (size_t)TB * O * 2);
    const char *dn = frigg_dtype_name(dt);
    int I = O / 2;
    for (int epi = FK_GEMV_STORE; epi <= FK_GEMV_SWIGLU; epi++) {
        if (!(epis & (1 << epi))) continue;
        int cols = epi == FK_GEMV_SWIGLU ? I : O;
        const char *en = epi == FK_GEMV_STORE ? "store" : epi == FK_GEMV_RESID ? "resid" : "swiglu";
        for (int norm = 0; norm <= 1; norm++)
        for (int im = 0; im < 2; im++) { /* simt, tc */
            if (!(norms & (1 << norm))) continue;
            const char *in = fk_gemv_impl_name(impls[im]);
            double frac = (norm ? 0.3 : 0.03) + (epi == FK_GEMV_SWIGLU ? 0.05 : 0.0);
            int same_as_simt = 1, same_as_one = 1;
            for (int B = 1; B <= TB; B++) {
                /* beyond the CUDA-core kernel's staged-x limit (8 rows per launch): refused */
                if (norm && (size_t)(B < 8 ? B : 8) * K * 2 > 64 * 1024) {
                    CHECK(fk_gemv(kc, &dQ, dx, B, 1, 1e-6f, epi, dout, 0) != 0, "gemv %s %dx%d B=%d norm: accepted", dn, O,
                          K, B);
                    continue;
                }
                /* the quantized kernel, then the bf16 kernel of the same implementation on the dequantized
                 * matrix, same inputs */
                for (int k = 0; k < 2; k++) {
                    uint16_t *o = epi == FK_GEMV_RESID ? dh : dout;
                    ct_poison(dout, (size_t)TB * O);
                    if (epi == FK_GEMV_RESID) upload_bf16(dh, h, (size_t)TB * O); /* RESID adds into it: fresh each run */
                    fk_ctx_set_gemv_impl(kc, impls[im]);
                    CHECK(fk_gemv(kc, k ? &dB : &dQ, dx, B, norm, 1e-6f, epi, o, 0) == 0, "%s", frigg_error());
                    ct_from_dev(o, (size_t)B * cols, k ? simt : got);
                }
                /* batch 1 on CUDA cores: every number of units per warp and warps per block gives the same bits
                 * where it is built (gq_built), and is refused where it is not */
                if (im == 0 && B == 1)
                    for (size_t v = 0; v < sizeof gq_shapes / sizeof gq_shapes[0]; v++) {
                        const int P = gq_shapes[v][0], nw = gq_shapes[v][1];
                        uint16_t *o = epi == FK_GEMV_RESID ? dh : dout;
                        ct_poison(dout, (size_t)TB * O);
                        if (epi == FK_GEMV_RESID) upload_bf16(dh, h, (size_t)TB * O);
                        CHECK(fk_ctx_set_gemv_q_simt(kc, P, nw) == 0, "%s", frigg_error());
                        int rc = fk_gemv(kc, &dQ, dx, 1, norm, 1e-6f, epi, o, 0);
                        CHECK(fk_ctx_set_gemv_q_simt(kc, 0, 0) == 0, "%s", frigg_error());
                        if (!gq_built(dt, K, group, P)) {
                            CHECK(rc == -1 && strstr(frigg_error(), "units per warp"),
                                  "gemv %s g%d %dx%d: %d units per warp accepted (%s)", dn, group, O, K, P, frigg_error());
                            continue;
                        }
                        CHECK(rc == 0, "%s", frigg_error());
                        ct_from_dev(o, (size_t)cols, one);
                        CHECK(!memcmp(one, got, sizeof(float) * cols),
                              "gemv %s g%d %dx%d norm=%d %s: simt with %d units per warp, %d warps per block differs from "
                              "the default's bits", dn, group, O, K, norm, en, P, nw);
                    }
                fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_AUTO);
                if (epi == FK_GEMV_STORE) memcpy(ref, lin[norm], sizeof(float) * B * O);
                else if (epi == FK_GEMV_RESID)
                    for (int i = 0; i < B * O; i++) ref[i] = frigg_round_bf16(h[i] + lin[norm][i]);
                else
                    for (int b = 0; b < B; b++)
                        frigg_cpu_swiglu(FRIGG_PREC_BF16, lin[norm] + (size_t)b * O, lin[norm] + (size_t)b * O + I, I,
                                         ref + (size_t)b * I);
                snprintf(what, sizeof what, "gemv %s %s g%d %dx%d B=%d norm=%d %s vs frigg_cpu_linear", dn, in, group, O,
                         K, B, norm, en);
                ct_expect_close(what, got, ref, (size_t)B * cols, frac);
                if (memcmp(got, simt, sizeof(float) * B * cols)) {
                    same_as_simt = 0;
                    for (int i = 0; i < B * cols; i++)
                        if (memcmp(&got[i], &simt[i], sizeof(float))) {
                            fprintf(stderr, "  gemv %s %s %dx%d B=%d norm=%d %s: first difference from bf16 at %d: %g vs %g\n",
                                    dn, in, O, K, B, norm, en, i, got[i], simt[i]);
                            break;
                        }
                }
                if (B == 1) memcpy(one, got, sizeof(float) * cols); /* row 0 alone */
                else same_as_one &= !memcmp(got, one, sizeof(float) * cols);
            }
            CHECK(same_as_simt, "gemv %s %s g%d %dx%d norm=%d %s: not bit for bit the %s bf16 GEMV on the dequantized matrix",
                  dn, in, group, O, K, norm, en, in);
            CHECK(same_as_one, "gemv %s %s g%d %dx%d norm=%d %s: batch row 0 differs from its single-row pass", dn, in, group,
                  O, K, norm, en);
        }
    }
    /* Every batch row equals its own single-row pass of the same implementation; auto runs, at each batch size,
     * the implementation its table names (fk_ctx_gemv_q_auto_impl), bit for bit. */
    {
        int epi = (epis & E_SWIGLU) ? FK_GEMV_SWIGLU : FK_GEMV_STORE, cols = epi == FK_GEMV_SWIGLU ? I : O;
        int norm = (norms & N_ON) && (size_t)TB * K * 2 <= 64 * 1024;
        float *single[2] = {malloc(sizeof(float) * TB * cols), malloc(sizeof(float) * TB * cols)}; /* simt, tc */
        for (int k = 0; k < 3; k++) {
            fk_ctx_set_gemv_impl(kc, impls[k]);
            for (int b = 0; b < TB; b++)
                CHECK(fk_gemv(kc, &dQ, dx + (size_t)b * K, 1, norm, 1e-6f, epi, dout + (size_t)b * cols, 0) == 0, "%s",
                      frigg_error());
            ct_from_dev(dout, (size_t)TB * cols, one);
            ct_poison(dout, (size_t)TB * O);
            CHECK(fk_gemv(kc, &dQ, dx, TB, norm, 1e-6f, epi, dout, 0) == 0, "%s", frigg_error());
            ct_from_dev(dout, (size_t)TB * cols, got);
            if (k < 2) {
                memcpy(single[k], one, sizeof(float) * TB * cols);
                CHECK(!memcmp(got, one, sizeof(float) * TB * cols),
                      "gemv %s g%d %dx%d (impl %s): the batch-16 pass differs from the single-row passes", dn, group, O, K,
                      fk_gemv_impl_name(impls[k]));
                continue;
            }
            int at1 = fk_ctx_gemv_q_auto_impl(kc, 1, O, K, epi), at8 = fk_ctx_gemv_q_auto_impl(kc, TB, O, K, epi);
            CHECK(!memcmp(one, single[at1 == FK_GEMV_IMPL_TC], sizeof(float) * TB * cols),
                  "gemv %s g%d %dx%d: auto at batch 1 is not the %s kernel its table names", dn, group, O, K,
                  fk_gemv_impl_name(at1));
            CHECK(!memcmp(got, single[at8 == FK_GEMV_IMPL_TC], sizeof(float) * TB * cols),
                  "gemv %s g%d %dx%d: auto at batch 16 is not the %s kernel its table names", dn, group, O, K,
                  fk_gemv_impl_name(at8));
        }
        fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_AUTO);
        free(single[0]);
        free(single[1]);
    }
    cudaFree(dout);
    cudaFree(dh);
    cudaFree(dx);
    qmat_dev_free(&dQ);
    cudaFree((void *)dB.w);
    free(dqh);
    free(x);
    free(h);
    free(xn);
    free(lin[0]);
    free(lin[1]);
    free(ref);
    free(got);
    free(simt);
    free(one);
    qmat_free(&a);
}

/* fk_gemv_qkv on a quantized [4D][D] gqkv (heads of hd): against the fused bf16 kernel on the dequantized
 * matrix (bit for bit) and the CPU ops (tolerance). */
static void test_qkv(frigg_pool *pool, frigg_dtype dt, int D, int hd, int group) {
    const int O = 4 * D, max_ctx = 64, H = D / hd;
    const char *dn = frigg_dtype_name(dt);
    qmat a = qmat_make(dt, O, D, group, 1.0f / sqrtf((float)D), SCALES_NORMAL);
    uint16_t *dqh = qmat_bf16(&a);
    frigg_mat dQ = qmat_dev(&a), dB = bf16_dev(dqh, O, D);
    float *x = malloc(sizeof(float) * TB * D), *xn = malloc(sizeof(float) * TB * D), *lin = malloc(sizeof(float) * TB * O);
    float *cs = malloc(sizeof(float) * max_ctx * hd), *sn = malloc(sizeof(float) * max_ctx * hd);
    ct_fill(x, (size_t)TB * D, 2.0f);
    ct_fill(cs, (size_t)max_ctx * hd, 1.0f);
    ct_fill(sn, (size_t)max_ctx * hd, 1.0f);
    frigg_cpu_rmsnorm(FRIGG_PREC_BF16, x, TB, D, 1e-6, xn);
    frigg_cpu_linear(FRIGG_PREC_BF16, pool, &a.m, xn, TB, lin);
    const int32_t seq[TB] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
                  pos[TB] = {0, 5, 17, 63, 1, 30, 42, 9, 2, 61, 33, 7, 50, 11, 26, 40};
    long long seq_stride = (long long)H * max_ctx * hd;
    size_t cache = (size_t)TB * seq_stride;
    uint16_t *dx = ct_to_dev(x, (size_t)TB * D), *dcs = ct_to_dev(cs, (size_t)max_ctx * hd), *dsn = ct_to_dev(sn, (size_t)max_ctx * hd);
    int32_t *dseq = dev_copy(seq, sizeof seq), *dpos = dev_copy(pos, sizeof pos);
    uint16_t *g[2], *q[2], *kcache[2], *vcache[2];
    uint16_t *hg[2], *hq[2], *hk[2], *hv[2];
    for (int k = 0; k < 2; k++) {
        cudaMalloc((void **)&g[k], (size_t)TB * O * 2);
        cudaMalloc((void **)&q[k], (size_t)TB * D * 2);
        cudaMalloc((void **)&kcache[k], cache * 2);
        cudaMalloc((void **)&vcache[k], cache * 2);
        hg[k] = malloc((size_t)TB * O * 2);
        hq[k] = malloc((size_t)TB * D * 2);
        hk[k] = malloc(cache * 2);
        hv[k] = malloc(cache * 2);
    }
    float *ref = malloc(sizeof(float) * TB * D), *gotf = malloc(sizeof(float) * TB * D);
    for (int im = 0; im < 2; im++)
    for (int B = 1; B <= TB; B++) {
        const int impl = im ? FK_GEMV_IMPL_TC : FK_GEMV_IMPL_SIMT;
        const char *in = fk_gemv_impl_name(impl);
        for (int k = 0; k < 2; k++) { /* k 0: quantized; 1: the fused bf16 kernel of that implementation, dequantized */
            ct_poison(g[k], (size_t)TB * O);
            ct_poison(q[k], (size_t)TB * D);
            ct_poison(kcache[k], cache);
            ct_poison(vcache[k], cache);
            fk_qkv_epi qa = {dcs, dsn, dseq, dpos, q[k], kcache[k], vcache[k], seq_stride, max_ctx, hd};
            fk_ctx_set_gemv_impl(kc, impl);
            CHECK(fk_gemv_qkv(kc, k ? &dB : &dQ, dx, B, 1e-6f, g[k], &qa, 0) == 0, "%s", frigg_error());
            fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_AUTO);
            bits_from_dev(g[k], (size_t)TB * O, hg[k]);
            bits_from_dev(q[k], (size_t)TB * D, hq[k]);
            bits_from_dev(kcache[k], cache, hk[k]);
            bits_from_dev(vcache[k], cache, hv[k]);
        }
        /* batch 1 on CUDA cores: each number of units per warp and warps per block, the default's bits (k 1's
         * buffers take its results now that the comparison above is made below from hg/hq/hk/hv[0] and [1]) */
        if (im == 0 && B == 1)
            for (size_t v = 0; v < sizeof gq_shapes / sizeof gq_shapes[0]; v++) {
                const int P = gq_shapes[v][0], nw = gq_shapes[v][1];
                uint16_t *vg = malloc((size_t)TB * O * 2), *vq = malloc((size_t)TB * D * 2), *vk = malloc(cache * 2),
                         *vv = malloc(cache * 2);
                ct_poison(g[1], (size_t)TB * O);
                ct_poison(q[1], (size_t)TB * D);
                ct_poison(kcache[1], cache);
                ct_poison(vcache[1], cache);
                fk_qkv_epi qa = {dcs, dsn, dseq, dpos, q[1], kcache[1], vcache[1], seq_stride, max_ctx, hd};
                fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_SIMT);
                CHECK(fk_ctx_set_gemv_q_simt(kc, P, nw) == 0, "%s", frigg_error());
                int rc = fk_gemv_qkv(kc, &dQ, dx, 1, 1e-6f, g[1], &qa, 0);
                CHECK(fk_ctx_set_gemv_q_simt(kc, 0, 0) == 0, "%s", frigg_error());
                fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_AUTO);
                if (!gq_built(dt, D, group, P)) {
                    CHECK(rc == -1 && strstr(frigg_error(), "units per warp"),
                          "gemv_qkv %s g%d %d/%d: %d units per warp accepted (%s)", dn, group, D, hd, P, frigg_error());
                } else {
                    CHECK(rc == 0, "%s", frigg_error());
                    bits_from_dev(g[1], (size_t)TB * O, vg);
                    bits_from_dev(q[1], (size_t)TB * D, vq);
                    bits_from_dev(kcache[1], cache, vk);
                    bits_from_dev(vcache[1], cache, vv);
                    CHECK(first_diff(vg, hg[0], D) < 0 && first_diff(vq, hq[0], D) < 0 && first_diff(vk, hk[0], cache) < 0 &&
                              first_diff(vv, hv[0], cache) < 0,
                          "gemv_qkv %s %d/%d: simt with %d units per warp, %d warps per block differs from the default's bits",
                          dn, D, hd, P, nw);
                }
                free(vg);
                free(vq);
                free(vk);
                free(vv);
            }
        /* k 1's buffers again: the fused bf16 kernel, for the comparisons below */
        if (im == 0 && B == 1) {
            ct_poison(g[1], (size_t)TB * O);
            ct_poison(q[1], (size_t)TB * D);
            ct_poison(kcache[1], cache);
            ct_poison(vcache[1], cache);
            fk_qkv_epi qa = {dcs, dsn, dseq, dpos, q[1], kcache[1], vcache[1], seq_stride, max_ctx, hd};
            fk_ctx_set_gemv_impl(kc, impl);
            CHECK(fk_gemv_qkv(kc, &dB, dx, B, 1e-6f, g[1], &qa, 0) == 0, "%s", frigg_error());
            fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_AUTO);
            bits_from_dev(g[1], (size_t)TB * O, hg[1]);
            bits_from_dev(q[1], (size_t)TB * D, hq[1]);
            bits_from_dev(kcache[1], cache, hk[1]);
            bits_from_dev(vcache[1], cache, hv[1]);
        }
        int gate_same = 1;
        for (int b = 0; b < B; b++) gate_same &= first_diff(hg[0] + (size_t)b * O, hg[1] + (size_t)b * O, D) < 0;
        CHECK(gate_same, "gemv_qkv %s %s %d/%d B=%d: gate rows differ from the fused bf16 kernel's", dn, in, D, hd, B);
        CHECK(first_diff(hq[0], hq[1], (size_t)TB * D) < 0,
              "gemv_qkv %s %s %d/%d B=%d: q differs from the fused bf16 kernel's", dn, in, D, hd, B);
        CHECK(first_diff(hk[0], hk[1], cache) < 0 && first_diff(hv[0], hv[1], cache) < 0,
              "gemv_qkv %s %s %d/%d B=%d: the K/V cache differs from the fused bf16 kernel's", dn, in, D, hd, B);
        /* against the CPU: gate, q (RoPE'd), k (RoPE'd, in the cache), v (in the cache) */
        for (int sec = 0; sec < 4; sec++) {
            for (int b = 0; b < B; b++) {
                float *dst = ref + (size_t)b * D;
                memcpy(dst, lin + (size_t)b * O + (size_t)sec * D, sizeof(float) * D);
                if (sec == 1 || sec == 2)
                    frigg_cpu_rope_apply(FRIGG_PREC_BF16, dst, 1, H, hd, cs + (size_t)pos[b] * hd, sn + (size_t)pos[b] * hd);
                for (int j = 0; j < D; j++) {
                    size_t at = (size_t)b * seq_stride + ((size_t)(j / hd) * max_ctx + pos[b]) * hd + j % hd;
                    uint16_t v = sec == 0 ? hg[0][(size_t)b * O + j] : sec == 1 ? hq[0][(size_t)b * D + j]
                                 : sec == 2 ? hk[0][at] : hv[0][at];
                    gotf[(size_t)b * D + j] = frigg_bf16_to_f32(v);
                }
            }
            char what[128];
            snprintf(what, sizeof what, "gemv_qkv %s %s g%d %d/%d B=%d section %d vs the CPU", dn, in, group, D, hd, B, sec);
            ct_expect_close(what, gotf, ref, (size_t)B * D, sec == 1 || sec == 2 ? 0.51 : 0.3);
        }
    }
    for (int k = 0; k < 2; k++) {
        cudaFree(g[k]);
        cudaFree(q[k]);
        cudaFree(kcache[k]);
        cudaFree(vcache[k]);
        free(hg[k]);
        free(hq[k]);
        free(hk[k]);
        free(hv[k]);
    }
    cudaFree(dx);
    cudaFree(dcs);
    cudaFree(dsn);
    cudaFree(dseq);
    cudaFree(dpos);
    qmat_dev_free(&dQ);
    cudaFree((void *)dB.w);
    free(dqh);
    free(x);
    free(xn);
    free(lin);
    free(cs);
    free(sn);
    free(ref);
    free(gotf);
    qmat_free(&a);
}

/* The prefill GEMM on a quantized matrix: whole (== frigg_cuda_gemm on the dequantized matrix), tiled
 * (`tile` rows per dequantization; tolerance against the CPU), too little scratch. On a non-blocking stream of
 * its own, so a kernel put on another stream than the handle's would race (and show); the setup's copies and
 * poisoning (legacy stream) are finished by a device synchronisation before each call. */
static void test_prefill(frigg_pool *pool, frigg_dtype dt, int O, int K, int group, int T, int tile) {
    const char *dn = frigg_dtype_name(dt);
    qmat a = qmat_make(dt, O, K, group, 1.0f / sqrtf((float)K), SCALES_NORMAL);
    uint16_t *dqh = qmat_bf16(&a);
    frigg_mat dQ = qmat_dev(&a), dB = bf16_dev(dqh, O, K);
    float *A = malloc(sizeof(float) * T * K), *ref = malloc(sizeof(float) * T * O), *got = malloc(sizeof(float) * T * O);
    float *whole = malloc(sizeof(float) * T * O);
    ct_fill(A, (size_t)T * K, 1.0f);
    frigg_cpu_linear(FRIGG_PREC_BF16, pool, &a.m, A, T, ref);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cublasHandle_t hb;
    CHECK(frigg_cuda_gemm_handle(&hb, s) == 0, "%s", frigg_error());
    uint16_t *dA = ct_to_dev(A, (size_t)T * K), *dC, *scratch;
    cudaMalloc((void **)&dC, (size_t)T * O * 2);
    size_t need = frigg_cuda_gemm_scratch_bytes(&dQ);
    CHECK(need == (size_t)O * K * 2, "scratch bytes %zu for a %dx%d matrix", need, O, K);
    cudaMalloc((void **)&scratch, need);
    char what[128];
    /* bf16 on the dequantized matrix, then the quantized matrix in one tile: the same bits */
    ct_poison(dC, (size_t)T * O);
    cudaDeviceSynchronize();
    CHECK(frigg_cuda_gemm_dq(kc, hb, &dB, dA, T, dC, NULL, 0) == 0, "%s", frigg_error());
    cudaStreamSynchronize(s);
    ct_from_dev(dC, (size_t)T * O, whole);
    ct_poison(dC, (size_t)T * O);
    cudaDeviceSynchronize();
    CHECK(frigg_cuda_gemm_dq(kc, hb, &dQ, dA, T, dC, scratch, need) == 0, "%s", frigg_error());
    cudaStreamSynchronize(s);
    ct_from_dev(dC, (size_t)T * O, got);
    CHECK(!memcmp(got, whole, sizeof(float) * T * O),
          "prefill %s g%d %dx%d T=%d: one tile is not bit for bit frigg_cuda_gemm on the dequantized matrix", dn, group, O,
          K, T);
    snprintf(what, sizeof what, "prefill %s g%d %dx%d T=%d whole vs frigg_cpu_linear", dn, group, O, K, T);
    ct_expect_close(what, got, ref, (size_t)T * O, 0.03);
    /* tiles of `tile` rows, rounded down to a multiple of 8 (the last one partial when that does not divide O) */
    ct_poison(dC, (size_t)T * O);
    cudaDeviceSynchronize();
    CHECK(frigg_cuda_gemm_dq(kc, hb, &dQ, dA, T, dC, scratch, (size_t)tile * K * 2 + 2 * K - 1) == 0, "%s", frigg_error());
    cudaStreamSynchronize(s);
    ct_from_dev(dC, (size_t)T * O, got);
    snprintf(what, sizeof what, "prefill %s g%d %dx%d T=%d tiles of %d vs frigg_cpu_linear", dn, group, O, K, T, tile);
    ct_expect_close(what, got, ref, (size_t)T * O, 0.03);
    CHECK(frigg_cuda_gemm_dq(kc, hb, &dQ, dA, T, dC, scratch, (size_t)K * 2 - 1) == -1 && strstr(frigg_error(), dn),
          "prefill: less scratch than one row accepted (%s)", frigg_error());
    CHECK(frigg_cuda_gemm(hb, &dQ, dA, T, dC) == -1 && strstr(frigg_error(), dn),
          "frigg_cuda_gemm: a %s matrix was not refused by name", dn);
    cublasDestroy(hb);
    cudaStreamDestroy(s);
    cudaFree(dA);
    cudaFree(dC);
    cudaFree(scratch);
    qmat_dev_free(&dQ);
    cudaFree((void *)dB.w);
    free(dqh);
    free(A);
    free(ref);
    free(got);
    free(whole);
    qmat_free(&a);
}

/* Descriptors the kernels cannot read are refused, by name. */
static void test_refusals(void) {
    qmat a = qmat_make(FRIGG_DT_INT4, 16, 256, 128, 0.1f, SCALES_NORMAL);
    frigg_mat d = qmat_dev(&a), bad;
    uint16_t *dx, *dout;
    cudaMalloc((void **)&dx, 8 * 256 * 2 + 16);
    cudaMalloc((void **)&dout, 16 * 256 * 2 + 16);
    bad = d;
    bad.scales = NULL;
    CHECK(fk_gemv(kc, &bad, dx, 1, 0, 1e-6f, FK_GEMV_STORE, dout, 0) == -1 && strstr(frigg_error(), "int4") &&
              strstr(frigg_error(), "scales"), "int4 without scales: %s", frigg_error());
    bad = d;
    bad.group = 12;
    CHECK(fk_gemv(kc, &bad, dx, 1, 0, 1e-6f, FK_GEMV_STORE, dout, 0) == -1 && strstr(frigg_error(), "group"),
          "group 12: %s", frigg_error());
    bad = d;
    bad.group = 96; /* a multiple of 8 that does not divide 256 */
    CHECK(fk_dequant_bf16(kc, &bad, 0, 1, dout, 0) == -1 && strstr(frigg_error(), "group"), "group 96: %s", frigg_error());
    bad = d;
    bad.w = (const unsigned char *)d.w + 2;
    CHECK(fk_gemv(kc, &bad, dx, 1, 0, 1e-6f, FK_GEMV_STORE, dout, 0) == -1 && strstr(frigg_error(), "aligned"),
          "misaligned values: %s", frigg_error());
    CHECK(fk_gemv(kc, &d, dx + 1, 1, 0, 1e-6f, FK_GEMV_STORE, dout, 0) == -1, "misaligned x accepted");
    CHECK(fk_gemv(kc, &d, dx, FK_GEMV_MAX_ROWS + 1, 0, 1e-6f, FK_GEMV_STORE, dout, 0) == -1, "%d rows accepted",
          FK_GEMV_MAX_ROWS + 1);
    CHECK(fk_gemv(kc, &d, dx, 1, 0, 1e-6f, FK_GEMV_QKV, dout, 0) == -1, "the QKV epilogue through fk_gemv accepted");
    CHECK(fk_ctx_set_gemv_q_simt(kc, 3, 0) == -1 && fk_ctx_set_gemv_q_simt(kc, 0, 8) == -1 &&
              fk_ctx_set_gemv_q_simt(kc, -1, 0) == -1 && strstr(frigg_error(), "warps per block"),
          "fk_ctx_set_gemv_q_simt: a shape outside 0, 1, 2, 4 accepted (%s)", frigg_error());
    cudaFree(dx);
    cudaFree(dout);
    qmat_dev_free(&d);
    qmat_free(&a);
}
#endif

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_gemv_q");
    test_packing();
#ifndef FRIGG_CUDA
    SKIP("built without CUDA (FRIGG_CUDA=0): the kernels are not tested");
#else
    {
        frigg_mat b = {.w = NULL, .rows = 10, .cols = 16, .dtype = FRIGG_DT_BF16};
        frigg_mat q = {.w = NULL, .rows = 10, .cols = 16, .dtype = FRIGG_DT_INT4, .group = 8};
        CHECK(frigg_cuda_gemm_scratch_bytes(&b) == 0 && frigg_cuda_gemm_scratch_bytes(&q) == 320,
              "frigg_cuda_gemm_scratch_bytes: %zu, %zu", frigg_cuda_gemm_scratch_bytes(&b), frigg_cuda_gemm_scratch_bytes(&q));
    }
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device present: the quantized GEMV, dequantization and prefill kernels are not run");
    } else {
        quick = th_quick();
        kc = fk_ctx_create();
        CHECK(kc != NULL, "fk_ctx_create: %s", frigg_error());
        frigg_pool *pool = frigg_pool_create(0);
        const frigg_dtype I8 = FRIGG_DT_INT8, I4 = FRIGG_DT_INT4;
        /* dequantization, bit for bit */
        static const int dq_groups[] = {0, 8, 32, 64, 128};
        for (int d = 0; d < 2; d++)
            for (size_t gi = 0; gi < sizeof dq_groups / sizeof dq_groups[0]; gi++)
                for (int special = 0; special <= 1; special++) {
                    test_dequant(d ? I4 : I8, 37, 512, dq_groups[gi], special);
                    /* K/8 = 257 chunks where the group allows it (0, 8), else K 4352 */
                    test_dequant(d ? I4 : I8, 5, dq_groups[gi] <= 8 ? 2056 : 4352, dq_groups[gi], special);
                }
        test_dequant(I4, 1536, 4096, 128, 0); /* down_proj */
        test_dequant(I8, 8192, 1536, 0, 0);   /* gate_up */
        /* GEMV: DFM-Mimir's shapes as the decode step runs them (o_proj and down: residual; gate_up: normed
         * SwiGLU; lm_head: store), every epilogue on the smaller ones */
        static const int groups4[] = {32, 64, 128};
        test_gemv(pool, I8, 1536, 1536, 0, E_ALL, N_BOTH);
        test_gemv(pool, I4, 1536, 1536, 128, E_ALL, N_BOTH);
        test_gemv(pool, I8, 8192, 1536, 0, E_SWIGLU, N_BOTH);
        test_gemv(pool, I4, 8192, 1536, 128, E_SWIGLU, N_ON);
        test_gemv(pool, I8, 1536, 4096, 0, E_RESID | E_STORE, N_BOTH);
        test_gemv(pool, I4, 1536, 4096, 128, E_RESID, N_BOTH);
        for (size_t gi = 0; gi < 3; gi++) {
            test_gemv(pool, I4, 100, 512, groups4[gi], E_ALL, N_BOTH);    /* partial last block, 50 SwiGLU units */
            test_gemv(pool, I4, 40, 4352, groups4[gi], E_ALL, N_BOTH);    /* K > 4096: K/8 = 544 */
            test_gemv(pool, I4, 24, 128, groups4[gi], E_ALL, N_BOTH);     /* K/8 = 16: half a warp */
        }
        test_gemv(pool, I8, 100, 512, 0, E_ALL, N_BOTH);
        test_gemv(pool, I8, 100, 512, 128, E_ALL, N_BOTH); /* int8 group-wise: the layout allows it */
        test_gemv(pool, I8, 72, 2056, 0, E_ALL, N_BOTH);   /* K/8 = 257 */
        test_gemv(pool, I4, 72, 2056, 0, E_ALL, N_BOTH);   /* int4 one scale per row */
        test_gemv(pool, I4, 72, 2056, 8, E_ALL, N_BOTH);   /* groups of 8: one scale per chunk */
        test_gemv(pool, I8, 24, 64, 0, E_ALL, N_BOTH);
        test_gemv(pool, I8, 24, 8, 0, E_ALL, N_BOTH);      /* the smallest K */
        if (!quick) test_gemv(pool, I8, 262144, 1536, 0, E_STORE, N_OFF); /* lm_head */
        /* the fused gqkv projection: DFM-Mimir's 12 heads of 128, and 4 heads of 64 */
        test_qkv(pool, I8, 1536, 128, 0);
        test_qkv(pool, I4, 1536, 128, 128);
        test_qkv(pool, I4, 256, 64, 32);
        test_qkv(pool, I8, 256, 64, 64);
        /* prefill: DFM-Mimir's layer shapes and a small one, whole and in tiles (the last one partial) */
        test_prefill(pool, I4, 6144, 1536, 128, 100, 1000);
        test_prefill(pool, I8, 1536, 1536, 0, 33, 512);
        test_prefill(pool, I4, 8192, 1536, 64, 17, 3000);
        test_prefill(pool, I4, 1536, 4096, 32, 37, 700);
        test_prefill(pool, I8, 100, 264, 8, 5, 7);
        if (!quick) test_prefill(pool, I8, 262144, 1536, 0, 16, 8192); /* lm_head over all prompt rows */
        test_refusals();
        frigg_pool_destroy(pool);
        fk_ctx_free(kc);
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "device error: %s", cudaGetErrorString(e));
    }
#endif
    TEST_MAIN_END();
}
