/* cuda_blas_lazy.c — the cuBLAS and cuBLASLt functions frigg calls, loaded on their first call. Linking libcublas makes every
 * start of a CUDA build load libcublasLt, whose initializers take ~0.2-0.4 s and ~200 MB of resident memory
 * (perf: three quarters of `frigg-run --version`'s time in them; benchmarks/cpu-checks-2026-12-02/cuda-start.txt),
 * also for --version, --help, --tokenize and the CPU backend, which never use it. So the executables do not link
 * it: these definitions of the cuBLAS entry points dlopen libcublas.so.<major> (found through the executables'
 * run path, $(CUDA_HOME)/lib64) when the CUDA engine first creates a handle, and forward to it.
 *
 * The cuBLASLt functions (cuda_gemm.c's few-rows GEMM) are loaded the same way from libcublasLt.so.<major>.
 *
 * A cuBLAS function frigg starts to call must be added here (the link fails with an undefined reference
 * otherwise). Without the library the calls return CUBLAS_STATUS_NOT_INITIALIZED and frigg_error() says why. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "util.h"

#define LAZY_STR2(x) #x
#define LAZY_STR(x) LAZY_STR2(x)
#define LIBCUBLAS "libcublas.so." LAZY_STR(CUBLAS_VER_MAJOR)
#define LIBCUBLASLT "libcublasLt.so." LAZY_STR(CUBLAS_VER_MAJOR)

typedef struct {
    void **fn;
    const char *name;
} lazy_sym;

/* dlopen lib and resolve syms; 1, or 0 with the reason in why. */
static int load_syms(const char *lib, const lazy_sym *syms, size_t n, char *why, size_t why_len) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, why_len, "cannot load %s: %s", lib, dlerror());
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        *syms[i].fn = dlsym(h, syms[i].name);
        if (!*syms[i].fn) {
            snprintf(why, why_len, "%s has no %s", lib, syms[i].name);
            return 0;
        }
    }
    return 1;
}

static struct {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*get_stream)(cublasHandle_t, cudaStream_t *);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    int ok;
    char why[512];
} g;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void load(void) {
    const lazy_sym syms[] = {{(void **)&g.create, "cublasCreate_v2"},         {(void **)&g.destroy, "cublasDestroy_v2"},
                             {(void **)&g.set_stream, "cublasSetStream_v2"},  {(void **)&g.get_stream, "cublasGetStream_v2"},
                             {(void **)&g.set_math_mode, "cublasSetMathMode"}, {(void **)&g.set_workspace, "cublasSetWorkspace_v2"},
                             {(void **)&g.gemm_ex, "cublasGemmEx"}};
    g.ok = load_syms(LIBCUBLAS, syms, sizeof syms / sizeof *syms, g.why, sizeof g.why);
}

static int loaded(void) {
    pthread_once(&g_once, load);
    if (!g.ok) frigg_set_error("cuBLAS: %s", g.why);
    return g.ok;
}

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *handle) {
    return loaded() ? g.create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
    return loaded() ? g.destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
    return loaded() ? g.set_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *stream) {
    return loaded() ? g.get_stream(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    return loaded() ? g.set_math_mode(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace, size_t bytes) {
    return loaded() ? g.set_workspace(handle, workspace, bytes) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                         int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
                                         void *C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo) {
    return loaded() ? g.gemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,
                                ldc, computeType, algo)
                    : CUBLAS_STATUS_NOT_INITIALIZED;
}

/* ------------------------------------------------------------------ cuBLASLt */
static struct {
    cublasStatus_t (*create)(cublasLtHandle_t *);
    cublasStatus_t (*destroy)(cublasLtHandle_t);
    cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
    cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *, size_t);
    cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*algo_init)(cublasLtHandle_t, cublasComputeType_t, cudaDataType_t, cudaDataType_t, cudaDataType_t,
                                cudaDataType_t, cudaDataType_t, int, cublasLtMatmulAlgo_t *);
    cublasStatus_t (*algo_set)(cublasLtMatmulAlgo_t *, cublasLtMatmulAlgoConfigAttributes_t, const void *, size_t);
    cublasStatus_t (*algo_check)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                 cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *,
                                 cublasLtMatmulHeuristicResult_t *);
    cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t,
                             const void *, cublasLtMatrixLayout_t, const void *, const void *, cublasLtMatrixLayout_t,
                             void *, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
    int ok;
    char why[512];
} lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;

static void lt_load(void) {
    const lazy_sym syms[] = {{(void **)&lt.create, "cublasLtCreate"},
                             {(void **)&lt.destroy, "cublasLtDestroy"},
                             {(void **)&lt.desc_create, "cublasLtMatmulDescCreate"},
                             {(void **)&lt.desc_destroy, "cublasLtMatmulDescDestroy"},
                             {(void **)&lt.desc_set, "cublasLtMatmulDescSetAttribute"},
                             {(void **)&lt.layout_create, "cublasLtMatrixLayoutCreate"},
                             {(void **)&lt.layout_destroy, "cublasLtMatrixLayoutDestroy"},
                             {(void **)&lt.algo_init, "cublasLtMatmulAlgoInit"},
                             {(void **)&lt.algo_set, "cublasLtMatmulAlgoConfigSetAttribute"},
                             {(void **)&lt.algo_check, "cublasLtMatmulAlgoCheck"},
                             {(void **)&lt.matmul, "cublasLtMatmul"}};
    lt.ok = load_syms(LIBCUBLASLT, syms, sizeof syms / sizeof *syms, lt.why, sizeof lt.why);
}

static int lt_loaded(void) {
    pthread_once(&lt_once, lt_load);
    if (!lt.ok) frigg_set_error("cuBLASLt: %s", lt.why);
    return lt.ok;
}

#define LT_CALL(f, ...) (lt_loaded() ? lt.f(__VA_ARGS__) : CUBLAS_STATUS_NOT_INITIALIZED)

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *h) { return LT_CALL(create, h); }
cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t h) { return LT_CALL(destroy, h); }
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t ct, cudaDataType_t st) {
    return LT_CALL(desc_create, d, ct, st);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { return LT_CALL(desc_destroy, d); }
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a,
                                                           const void *buf, size_t n) {
    return LT_CALL(desc_set, d, a, buf, n);
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
    return LT_CALL(layout_create, l, t, rows, cols, ld);
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { return LT_CALL(layout_destroy, l); }
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoInit(cublasLtHandle_t h, cublasComputeType_t ct, cudaDataType_t st,
                                                   cudaDataType_t at, cudaDataType_t bt, cudaDataType_t ctp,
                                                   cudaDataType_t dt, int id, cublasLtMatmulAlgo_t *algo) {
    return LT_CALL(algo_init, h, ct, st, at, bt, ctp, dt, id, algo);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t *algo,
                                                                 cublasLtMatmulAlgoConfigAttributes_t a, const void *buf,
                                                                 size_t n) {
    return LT_CALL(algo_set, algo, a, buf, n);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                                    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                                    cublasLtMatrixLayout_t dd, const cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulHeuristicResult_t *r) {
    return LT_CALL(algo_check, h, d, a, b, c, dd, algo, r);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                                           cublasLtMatrixLayout_t la, const void *B, cublasLtMatrixLayout_t lb,
                                           const void *beta, const void *C, cublasLtMatrixLayout_t lc, void *D,
                                           cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t *algo, void *ws,
                                           size_t ws_bytes, cudaStream_t s) {
    return LT_CALL(matmul, h, d, alpha, A, la, B, lb, beta, C, lc, D, ld, algo, ws, ws_bytes, s);
}
