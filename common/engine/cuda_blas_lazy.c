/* cuda_blas_lazy.c — the cuBLAS functions frigg calls, loaded on their first call. Linking libcublas makes every
 * start of a CUDA build load libcublasLt, whose initializers take ~0.2-0.4 s and ~200 MB of resident memory
 * (perf: three quarters of `frigg-run --version`'s time in them; benchmarks/cpu-checks-2026-12-02/cuda-start.txt),
 * also for --version, --help, --tokenize and the CPU backend, which never use it. So the executables do not link
 * it: these definitions of the cuBLAS entry points dlopen libcublas.so.<major> (found through the executables'
 * run path, $(CUDA_HOME)/lib64) when the CUDA engine first creates a handle, and forward to it.
 *
 * A cuBLAS function frigg starts to call must be added here (the link fails with an undefined reference
 * otherwise). Without the library the calls return CUBLAS_STATUS_NOT_INITIALIZED and frigg_error() says why. */
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "base/util.h"

#define LAZY_STR2(x) #x
#define LAZY_STR(x) LAZY_STR2(x)
#define LIBCUBLAS "libcublas.so." LAZY_STR(CUBLAS_VER_MAJOR)

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
    void *h = dlopen(LIBCUBLAS, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(g.why, sizeof g.why, "cannot load %s: %s", LIBCUBLAS, dlerror());
        return;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {{(void **)&g.create, "cublasCreate_v2"},         {(void **)&g.destroy, "cublasDestroy_v2"},
                {(void **)&g.set_stream, "cublasSetStream_v2"},  {(void **)&g.get_stream, "cublasGetStream_v2"},
                {(void **)&g.set_math_mode, "cublasSetMathMode"}, {(void **)&g.set_workspace, "cublasSetWorkspace_v2"},
                {(void **)&g.gemm_ex, "cublasGemmEx"}};
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
        *syms[i].fn = dlsym(h, syms[i].name);
        if (!*syms[i].fn) {
            snprintf(g.why, sizeof g.why, "%s has no %s", LIBCUBLAS, syms[i].name);
            return;
        }
    }
    g.ok = 1;
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
