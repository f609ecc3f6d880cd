/* cuda_gemm.c — the prefill GEMM and the few-rows GEMM of decode steps (see cuda_gemm.h). */
#include "cuda_gemm.h"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int frigg_cuda_gemm_handle(cublasHandle_t *h, cudaStream_t s) {
    *h = NULL;
    if (cublasCreate(h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(*h, s) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(*h, CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) !=
            CUBLAS_STATUS_SUCCESS) {
        if (*h) cublasDestroy(*h);
        *h = NULL;
        frigg_set_error("cuBLAS initialisation failed");
        return -1;
    }
    return 0;
}

/* C[T][ldc] columns [0, n) = A[T][K] · W[n][K]^T for a bf16 W of n rows (C offset to the first column). */
static int gemm_bf16(cublasHandle_t h, const uint16_t *W, int n, int K, const uint16_t *A, int T, uint16_t *C, int ldc) {
    const float one = 1.0f, zero = 0.0f;
    /* Column-major view: C^T[O][T] = W^T' · A^T, i.e. op(W) = T on the row-major [O][K] weight. */
    cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, T, K, &one, W, CUDA_R_16BF, K, A, CUDA_R_16BF, K,
                                     &zero, C, CUDA_R_16BF, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        frigg_set_error("cuBLAS GEMM %dx%dx%d failed (status %d)", T, n, K, (int)st);
        return -1;
    }
    return 0;
}

int frigg_cuda_gemm(cublasHandle_t h, const frigg_mat *Wm, const uint16_t *A, int T, uint16_t *C) {
    const uint16_t *W = frigg_mat_bf16(Wm);
    if (!W) {
        frigg_set_error("prefill GEMM: no CUDA GEMM for %s weights without a dequantization scratch "
                        "(frigg_cuda_gemm_dq)", frigg_dtype_name(Wm->dtype));
        return -1;
    }
    return gemm_bf16(h, W, Wm->rows, Wm->cols, A, T, C, Wm->rows);
}

size_t frigg_cuda_gemm_scratch_bytes(const frigg_mat *W) {
    return W->dtype == FRIGG_DT_BF16 ? 0 : 2 * (size_t)W->rows * (size_t)W->cols;
}

int frigg_cuda_gemm_dq(const fk_ctx *kc, cublasHandle_t h, const frigg_mat *W, const uint16_t *A, int T, uint16_t *C,
                       uint16_t *scratch, size_t scratch_bytes) {
    if (W->dtype == FRIGG_DT_BF16) return frigg_cuda_gemm(h, W, A, T, C);
    const int O = W->rows, K = W->cols;
    size_t row_bytes = 2 * (size_t)(K > 0 ? K : 1), fit = scratch ? scratch_bytes / row_bytes : 0;
    if (fit < 1) {
        frigg_set_error("prefill GEMM: %s weights [%d][%d] need a dequantization scratch of at least %zu bytes "
                        "(one row), %zu given", frigg_dtype_name(W->dtype), O, K, row_bytes, scratch ? scratch_bytes : 0);
        return -1;
    }
    int tile = fit < (size_t)O ? (int)fit : O;
    if (tile < O && tile >= 8) tile -= tile % 8; /* every tile's columns of C start 16-byte aligned */
    cudaStream_t s = NULL;
    if (cublasGetStream(h, &s) != CUBLAS_STATUS_SUCCESS) {
        frigg_set_error("prefill GEMM: cannot read the cuBLAS handle's stream");
        return -1;
    }
    for (int o0 = 0; o0 < O; o0 += tile) {
        int n = O - o0 < tile ? O - o0 : tile;
        if (fk_dequant_bf16(kc, W, o0, n, scratch, s) || gemm_bf16(h, scratch, n, K, A, T, C + o0, O)) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ few rows: cuBLASLt configurations */
/* A cuBLASLt configuration for [O][K] weights at tmin..tmax rows on devices of compute capability cc (major * 10 +
 * minor). Found by kernels/dev/prefill --decode-gemm-search (every algorithm id with every tile, stage count and
 * split-K it supports, partials reduced in fp32) on the GPU and cuBLAS named in each entry's comment. */
typedef struct {
    int cc, O, K, tmin, tmax;
    int32_t id;
    uint32_t tile, stages;
    int32_t splitk;
    uint32_t red, swz, custom;
    uint16_t inner, cluster;
} lt_config;

static const lt_config lt_table[] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* the end */
};

typedef struct {
    int O, K, T;
    int lt; /* 1: the configuration below passed cublasLtMatmulAlgoCheck; 0: cublasGemmEx */
    const lt_config *cfg;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lw, la, lc;
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct frigg_lt_gemms {
    cublasLtHandle_t lt;
    int cc;
    void *ws;
    size_t ws_bytes;
    lt_plan *plans;
    int nplans, cap;
};

frigg_lt_gemms *frigg_few_rows_gemm_create(int device, void *ws, size_t ws_bytes) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
        frigg_set_error("few-rows GEMM: cannot read device %d's compute capability", device);
        return NULL;
    }
    frigg_lt_gemms *g = calloc(1, sizeof *g);
    if (!g) {
        frigg_set_error("few-rows GEMM: out of memory");
        return NULL;
    }
    if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS) {
        free(g);
        frigg_set_error("cuBLASLt initialisation failed");
        return NULL;
    }
    g->cc = major * 10 + minor;
    g->ws = ws;
    g->ws_bytes = ws_bytes;
    return g;
}

static void plan_release(lt_plan *p) {
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->lw) cublasLtMatrixLayoutDestroy(p->lw);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
}

void frigg_few_rows_gemm_free(frigg_lt_gemms *g) {
    if (!g) return;
    for (int i = 0; i < g->nplans; i++) plan_release(&g->plans[i]);
    free(g->plans);
    cublasLtDestroy(g->lt);
    free(g);
}

static const lt_config *lt_find(int cc, int O, int K, int T) {
    for (const lt_config *c = lt_table; c->cc; c++)
        if (c->cc == cc && c->O == O && c->K == K && T >= c->tmin && T <= c->tmax) return c;
    return NULL;
}

/* The column-major view of C[T][O] = A[T][K] · W[O][K]^T that frigg_cuda_gemm runs: C^T[O][T] = op(W)[O][K] ·
 * A^T[K][T], op = T on the row-major weight; the configuration applied and checked. 0 when it is usable. */
static int plan_make(frigg_lt_gemms *g, lt_plan *p) {
    const cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
    const cudaDataType_t bf = CUDA_R_16BF;
    cublasOperation_t opT = CUBLAS_OP_T;
    const lt_config *c = p->cfg;
    if (cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->lw, bf, p->K, p->O, p->K) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->la, bf, p->K, p->T, p->K) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->lc, bf, p->O, p->T, p->O) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoInit(g->lt, ct, CUDA_R_32F, bf, bf, bf, bf, c->id, &p->algo) != CUBLAS_STATUS_SUCCESS)
        return -1;
    cublasLtMatmulAlgo_t *a = &p->algo;
    if (cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &c->tile, sizeof c->tile) ||
        cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c->stages, sizeof c->stages) ||
        cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c->splitk, sizeof c->splitk) ||
        cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c->red, sizeof c->red) ||
        cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &c->swz, sizeof c->swz) ||
        cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &c->custom, sizeof c->custom) ||
        cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &c->inner, sizeof c->inner) ||
        cublasLtMatmulAlgoConfigSetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &c->cluster, sizeof c->cluster))
        return -1;
    /* only fp32 partials: a reduction in bf16 would add rounding points the CPU engine does not have */
    if (c->splitk > 1 && c->red != CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) return -1;
    cublasLtMatmulHeuristicResult_t r;
    memset(&r, 0, sizeof r);
    if (cublasLtMatmulAlgoCheck(g->lt, p->desc, p->lw, p->la, p->lc, p->lc, a, &r) != CUBLAS_STATUS_SUCCESS ||
        r.workspaceSize > g->ws_bytes)
        return -1;
    return 0;
}

static lt_plan *plan_for(frigg_lt_gemms *g, int O, int K, int T) {
    for (int i = 0; i < g->nplans; i++)
        if (g->plans[i].O == O && g->plans[i].K == K && g->plans[i].T == T) return &g->plans[i];
    if (g->nplans == g->cap) {
        int cap = g->cap ? 2 * g->cap : 16;
        lt_plan *np = realloc(g->plans, cap * sizeof *np);
        if (!np) {
            frigg_set_error("few-rows GEMM: out of memory");
            return NULL;
        }
        g->plans = np;
        g->cap = cap;
    }
    lt_plan *p = &g->plans[g->nplans++];
    memset(p, 0, sizeof *p);
    p->O = O;
    p->K = K;
    p->T = T;
    p->cfg = lt_find(g->cc, O, K, T);
    if (p->cfg && plan_make(g, p) == 0) {
        p->lt = 1;
    } else {
        plan_release(p);
        lt_plan keep = {O, K, T, 0, p->cfg, NULL, NULL, NULL, NULL, {{0}}};
        *p = keep;
    }
    return p;
}

int frigg_few_rows_gemm_plan(frigg_lt_gemms *g, int O, int K, int T, char *desc, size_t desc_len) {
    lt_plan *p = g ? plan_for(g, O, K, T) : NULL;
    if (!p || !p->lt) {
        if (desc && desc_len)
            snprintf(desc, desc_len, p && p->cfg ? "cublasGemmEx (cuBLASLt refused the table's id %d tile %u)" : "cublasGemmEx",
                     p && p->cfg ? p->cfg->id : 0, p && p->cfg ? p->cfg->tile : 0);
        return p && p->cfg ? -1 : 0;
    }
    if (desc && desc_len)
        snprintf(desc, desc_len, "cublasLt id %d tile %u stages %u splitk %d", p->cfg->id, p->cfg->tile, p->cfg->stages,
                 p->cfg->splitk);
    return 1;
}

int frigg_few_rows_gemm(frigg_lt_gemms *g, cublasHandle_t h, const frigg_mat *Wm, const uint16_t *A, int T,
                        uint16_t *C) {
    const uint16_t *W = frigg_mat_bf16(Wm);
    if (!g || !W) return frigg_cuda_gemm(h, Wm, A, T, C);
    lt_plan *p = plan_for(g, Wm->rows, Wm->cols, T);
    if (!p) return -1;
    if (!p->lt) return frigg_cuda_gemm(h, Wm, A, T, C);
    cudaStream_t s = NULL;
    if (cublasGetStream(h, &s) != CUBLAS_STATUS_SUCCESS) {
        frigg_set_error("few-rows GEMM: cannot read the cuBLAS handle's stream");
        return -1;
    }
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasLtMatmul(g->lt, p->desc, &one, W, p->lw, A, p->la, &zero, C, p->lc, C, p->lc, &p->algo,
                                       g->ws, g->ws_bytes, s);
    if (st != CUBLAS_STATUS_SUCCESS) {
        frigg_set_error("cuBLASLt GEMM %dx%dx%d failed (status %d)", T, Wm->rows, Wm->cols, (int)st);
        return -1;
    }
    return 0;
}
