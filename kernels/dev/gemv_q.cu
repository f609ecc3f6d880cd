/* dev/gemv_q.cu — microbenchmark of the quantized-weight kernels (gemv_q.cu) on DFM-Mimir's shapes, through the
 * shipped launchers with the program's kernel context: the decode GEMV (fk_gemv / fk_gemv_qkv on INT8 and
 * INT4-g128 descriptors: gqkv with the RoPE + KV epilogue, o_proj and down with the residual add, gate_up with
 * the fused norm and SwiGLU, lm_head (INT8 only: int4 builds keep the vocabulary matrices int8)), and the
 * prefill path (fk_dequant_bf16 alone, and frigg_cuda_gemm_dq: dequantization + cuBLAS) beside the bf16 ones.
 *
 * 1. Checks, outputs poisoned first (exit 1 on any FAIL): fk_dequant_bf16 of the first weight copy equals
 *    frigg_mat_row's bf16(q * scale) on the host bit for bit; each quantized GEMV (B 1, 2, 4, 8, 16), under each
 *    implementation (simt: gemv_q.cu's CUDA-core kernel; tc: gemv_tc.cu's tensor-core kernel),
 *    equals bit for bit the bf16 GEMV of the same implementation on that dequantized matrix, which is what
 *    gemv_q.cu promises (tests/test_cuda_gemv_q.c checks both against the CPU ops as well); at batch 1 also
 *    the CUDA-core kernel with each number of output units per warp and warps per block (fk_ctx_set_gemv_q_simt).
 * 2. Timing: a CUDA graph of launches over distinct weight copies (128 per layer shape, far beyond the 60 MB
 *    L2, as in a decode step; lm_head: 4 copies), PDL on as the engine launches; median of the replays after
 *    warm-up. GB/s counts the bytes the launch must read from the weights: the packed values plus the scales
 *    (x, the residual and the outputs are not counted: at most 0.4 % of the bytes here). The quantized GEMV
 *    under auto (the default: the q. rows of gemv.cu's table), simt and tc; beside them, the bf16 GEMV (auto)
 *    on bf16 copies of the same shape, and auto's speed-up over it; at batch 1 each CUDA-core shape beside the
 *    default's.
 * 3. Prefill: fk_dequant_bf16 of one matrix (GB/s over the bytes read plus the bf16 written) and
 *    frigg_cuda_gemm_dq with the whole matrix in the scratch at T = 512 and 4096, against frigg_cuda_gemm on
 *    the bf16 matrix: what the dequantization adds to a prefill GEMM.
 *
 *   gemv_q [--quick] [--only int8|int4] [--no-bf16] [--no-prefill]
 *   (--quick: B 1, 8 and 16, 5 replays, prefill T = 4096 only; --no-bf16: skip the bf16 comparison (and its
 *   copies' memory)) */
#include "gemv_common.cuh"
#include "dev.cuh"

#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

extern "C" {
#include "base/util.h"
}
#include "engine/cuda_gemm.h"

#define MAXB 16 /* batch rows: fk_gemv's limit (FK_GEMV_MAX_ROWS) */
static_assert(MAXB == FK_GEMV_MAX_ROWS, "the harness tests every batch size fk_gemv takes");

#define FK(call)                                                                              \
    do {                                                                                      \
        if ((call)) {                                                                         \
            fprintf(stderr, "gemv_q: %s: %s (line %d)\n", #call, frigg_error(), __LINE__);   \
            exit(2);                                                                          \
        }                                                                                     \
    } while (0)

#define HD 128
#define MAX_CTX 64
#define EPS 1e-6f

struct Shape {
    const char *name;
    int O, K, norm, epi, copies, launches, int4_ok;
};
/* Mimir: D 1536, I 4096, vocab 262144, 12 heads of 128 */
static const Shape shapes[] = {
    {"gqkv", 6144, 1536, 1, FK_GEMV_QKV, 128, 128, 1},      {"o_proj", 1536, 1536, 0, FK_GEMV_RESID, 128, 128, 1},
    {"gate_up", 8192, 1536, 1, FK_GEMV_SWIGLU, 128, 128, 1}, {"down", 1536, 4096, 0, FK_GEMV_RESID, 128, 128, 1},
    {"lm_head", 262144, 1536, 0, FK_GEMV_STORE, 4, 16, 0},
};
#define NSHAPE (int)(sizeof shapes / sizeof shapes[0])

/* The CUDA-core kernel's shapes at batch 1 (fk_ctx_set_gemv_q_simt): output units per warp, warps per block.
 * Four units per warp exist only for K 1536 (gemv_q.cu). */
struct Variant {
    int units, warps;
};
static const Variant variants[] = {{1, 4}, {2, 4}, {4, 4}, {1, 2}, {2, 2}, {4, 2}, {2, 1}, {4, 1}};
static bool variant_ok(const Variant &v, const Shape &sh) { return v.units < 4 || sh.K == 1536; }

struct Quant {
    const char *name;
    frigg_dtype dt;
    int group;
};
static const Quant quants[] = {{"int8", FRIGG_DT_INT8, 0}, {"int4-g128", FRIGG_DT_INT4, 128}};

static int reps = 9;
static fk_ctx *kc;

/* Random bytes (every code of the packed values), from a hash of (seed, index). */
__device__ __forceinline__ uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__global__ void fill_bytes(unsigned char *p, size_t n, uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned char)(mix(seed * 0x9E3779B97F4A7C15ull + i) >> 24);
}
/* bf16 scales in [0.5, 1.5) * mag, and bf16 values in [-mag, mag). */
__global__ void fill_bf16(uint16_t *p, size_t n, uint64_t seed, float mag, int positive) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (float)(mix(seed * 0x9E3779B97F4A7C15ull + i) >> 40) * (1.0f / 16777216.0f);
        p[i] = f2bf(positive ? (0.5f + u) * mag : (2.0f * u - 1.0f) * mag);
    }
}

/* Capture n enqueues (f(i, s)) into one graph; median µs per enqueue over the replays. */
template <class F>
static double time_graph(cudaStream_t s, int n, F f) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; i++) FK(f(i, s));
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int r = -2; r < reps; r++) { /* two warm-up replays */
        CK(cudaEventRecord(e0, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) t.push_back(ms * 1e3 / n);
    }
    std::sort(t.begin(), t.end());
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return t[t.size() / 2];
}

/* The activations of one shape: x, the output (gqkv rows for QKV), q and one cache slot per batch row. */
struct Io {
    uint16_t *x, *out, *q, *kc, *vc, *cs, *sn;
    int32_t *seq, *pos;
    long long seq_stride;
};
static int launch(const frigg_mat *W, const Shape &sh, const Io &io, int B, cudaStream_t s) {
    if (sh.epi == FK_GEMV_QKV) {
        fk_qkv_epi qa = {io.cs, io.sn, io.seq, io.pos, io.q, io.kc, io.vc, io.seq_stride, MAX_CTX, HD};
        return fk_gemv_qkv(kc, W, io.x, B, EPS, io.out, &qa, s);
    }
    return fk_gemv(kc, W, io.x, B, sh.norm, EPS, sh.epi, io.out, s);
}
/* What a launch leaves for the comparison: the outputs, q and both caches, as bits. */
static std::vector<uint16_t> results(const Shape &sh, const Io &io, int B) {
    int cols = sh.epi == FK_GEMV_SWIGLU ? sh.O / 2 : sh.epi == FK_GEMV_QKV ? sh.O / 4 : sh.O; /* QKV: the gate rows */
    std::vector<uint16_t> r;
    std::vector<uint16_t> o((size_t)B * (sh.epi == FK_GEMV_QKV ? sh.O : cols));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(o.data(), io.out, o.size() * 2, cudaMemcpyDeviceToHost));
    for (int b = 0; b < B; b++) {
        const uint16_t *row = o.data() + (size_t)b * (sh.epi == FK_GEMV_QKV ? sh.O : cols);
        r.insert(r.end(), row, row + cols);
    }
    if (sh.epi == FK_GEMV_QKV) {
        int D = sh.O / 4;
        std::vector<uint16_t> q((size_t)B * D), k((size_t)MAXB * io.seq_stride), v((size_t)MAXB * io.seq_stride);
        CK(cudaMemcpy(q.data(), io.q, q.size() * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(k.data(), io.kc, k.size() * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(v.data(), io.vc, v.size() * 2, cudaMemcpyDeviceToHost));
        r.insert(r.end(), q.begin(), q.end());
        r.insert(r.end(), k.begin(), k.end());
        r.insert(r.end(), v.begin(), v.end());
    }
    return r;
}
static void poison(const Shape &sh, const Io &io, const uint16_t *h) {
    CK(cudaMemset(io.out, 0xff, (size_t)MAXB * sh.O * 2));
    CK(cudaMemset(io.q, 0xff, (size_t)MAXB * 1536 * 2));
    CK(cudaMemset(io.kc, 0xff, (size_t)MAXB * io.seq_stride * 2));
    CK(cudaMemset(io.vc, 0xff, (size_t)MAXB * io.seq_stride * 2));
    if (sh.epi == FK_GEMV_RESID) CK(cudaMemcpy(io.out, h, (size_t)MAXB * sh.O * 2, cudaMemcpyDeviceToDevice));
    CK(cudaDeviceSynchronize()); /* the legacy stream's work done before the launch on the non-blocking stream */
}

int main(int argc, char **argv) {
    bool quick = false, bf16 = true, prefill = true;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--no-bf16")) bf16 = false;
        else if (!strcmp(argv[i], "--no-prefill")) prefill = false;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--quick] [--only int8|int4] [--no-bf16] [--no-prefill]\n", argv[0]);
            return 2;
        }
    }
    if (only && strcmp(only, "int8") && strcmp(only, "int4")) {
        fprintf(stderr, "--only: int8 or int4, not '%s'\n", only);
        return 2;
    }
    if (quick) reps = 5;
    kc = dev_ctx(0);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs; %s; quantized GEMV (gemv_q.cu) against the bf16 GEMV (auto)\n", prop.name,
           prop.multiProcessorCount, quick ? "quick" : "full");
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const int Bs_full[] = {1, 2, 4, 8, 16}, Bs_quick[] = {1, 8, 16};
    const int *Bs = quick ? Bs_quick : Bs_full, nB = quick ? 3 : 5;
    int fails = 0;
    const int D = 1536, maxO = 262144, maxK = 4096;
    Io io = {};
    io.seq_stride = (long long)(D / HD) * MAX_CTX * HD;
    CK(cudaMalloc((void **)&io.x, (size_t)MAXB * maxK * 2));
    CK(cudaMalloc((void **)&io.out, (size_t)MAXB * maxO * 2));
    CK(cudaMalloc((void **)&io.q, (size_t)MAXB * D * 2));
    CK(cudaMalloc((void **)&io.kc, (size_t)MAXB * io.seq_stride * 2));
    CK(cudaMalloc((void **)&io.vc, (size_t)MAXB * io.seq_stride * 2));
    CK(cudaMalloc((void **)&io.cs, (size_t)MAX_CTX * HD * 2));
    CK(cudaMalloc((void **)&io.sn, (size_t)MAX_CTX * HD * 2));
    CK(cudaMalloc((void **)&io.seq, MAXB * sizeof(int32_t)));
    CK(cudaMalloc((void **)&io.pos, MAXB * sizeof(int32_t)));
    const int seq[MAXB] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
              pos[MAXB] = {0, 5, 17, 63, 1, 30, 42, 9, 2, 61, 33, 7, 50, 11, 26, 40};
    CK(cudaMemcpy(io.seq, seq, sizeof seq, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(io.pos, pos, sizeof pos, cudaMemcpyHostToDevice));
    fill_bf16<<<64, 256>>>(io.cs, (size_t)MAX_CTX * HD, 11, 1.0f, 0);
    fill_bf16<<<64, 256>>>(io.sn, (size_t)MAX_CTX * HD, 12, 1.0f, 0);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    struct Row {
        const char *shape, *quant;
        int B;
        double us, gbs, us_bf16, us_simt, us_tc;
    };
    std::vector<Row> table;
    for (int qi = 0; qi < 2; qi++) {
        const Quant &qz = quants[qi];
        if (only && strncmp(qz.name, only, 4)) continue;
        for (int si = 0; si < NSHAPE; si++) {
            const Shape &sh = shapes[si];
            frigg_mat M = {.w = NULL, .rows = sh.O, .cols = sh.K, .dtype = sh.int4_ok ? qz.dt : FRIGG_DT_INT8,
                           .scales = NULL, .group = sh.int4_ok ? qz.group : 0};
            if (!sh.int4_ok && qz.dt == FRIGG_DT_INT4) continue; /* lm_head: int8 in every build */
            size_t wbytes = (size_t)sh.O * frigg_mat_row_bytes(&M), sn = (size_t)sh.O * frigg_mat_ngroups(&M);
            unsigned char *W;
            uint16_t *S, *Wb = NULL, *h;
            CK(cudaMalloc((void **)&W, wbytes * sh.copies));
            CK(cudaMalloc((void **)&S, sn * 2 * sh.copies));
            fill_bytes<<<1024, 256>>>(W, wbytes * sh.copies, 100 + si);
            int qmax = M.dtype == FRIGG_DT_INT8 ? 128 : 8;
            fill_bf16<<<1024, 256>>>(S, sn * sh.copies, 200 + si, 1.0f / sqrtf((float)sh.K) / qmax, 1);
            CK(cudaMalloc((void **)&h, (size_t)MAXB * sh.O * 2));
            fill_bf16<<<256, 256>>>(io.x, (size_t)MAXB * sh.K, 300 + si, sh.norm ? 2.0f : 1.0f, 0);
            fill_bf16<<<256, 256>>>(h, (size_t)MAXB * sh.O, 400 + si, 1.0f, 0);
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize()); /* the fills (legacy stream) before anything on s reads them */
            std::vector<frigg_mat> mats(sh.copies, M), bmats;
            for (int c = 0; c < sh.copies; c++) {
                mats[c].w = W + wbytes * c;
                mats[c].scales = S + sn * c;
            }
            /* 1. dequantization bit for bit on the host; the bf16 copies (for the comparison) the same way */
            int ncb = bf16 ? sh.copies : 1;
            CK(cudaMalloc((void **)&Wb, (size_t)sh.O * sh.K * 2 * ncb));
            for (int c = 0; c < ncb; c++) {
                FK(fk_dequant_bf16(kc, &mats[c], 0, sh.O, Wb + (size_t)sh.O * sh.K * c, s));
                bmats.push_back({.w = Wb + (size_t)sh.O * sh.K * c, .rows = sh.O, .cols = sh.K, .dtype = FRIGG_DT_BF16,
                                 .scales = NULL, .group = 0});
            }
            {
                std::vector<unsigned char> hw(wbytes);
                std::vector<uint16_t> hs(sn), got((size_t)sh.O * sh.K);
                CK(cudaStreamSynchronize(s));
                CK(cudaMemcpy(hw.data(), W, wbytes, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(hs.data(), S, sn * 2, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(got.data(), Wb, got.size() * 2, cudaMemcpyDeviceToHost));
                frigg_mat hm = M;
                hm.w = hw.data();
                hm.scales = hs.data();
                std::vector<float> row(sh.K);
                size_t bad = 0;
                for (int r = 0; r < sh.O; r++) {
                    frigg_mat_row(&hm, r, row.data());
                    for (int i = 0; i < sh.K; i++) bad += got[(size_t)r * sh.K + i] != frigg_f32_to_bf16(row[i]);
                }
                printf("check %-9s %-8s dequant      %s (%zu of %zu weights differ from frigg_mat_row)\n", qz.name,
                       sh.name, bad ? "FAIL" : "PASS", bad, got.size());
                fails += bad != 0;
            }
            /* ... and the GEMV, under each implementation, against the bf16 GEMV of that implementation on it */
            for (int impl : {FK_GEMV_IMPL_SIMT, FK_GEMV_IMPL_TC})
                for (int bi = 0; bi < 5; bi++) {
                    int B = Bs_full[bi];
                    FK(fk_ctx_set_gemv_impl(kc, impl));
                    poison(sh, io, h);
                    FK(launch(&mats[0], sh, io, B, s));
                    std::vector<uint16_t> gq = results(sh, io, B);
                    poison(sh, io, h);
                    FK(launch(&bmats[0], sh, io, B, s));
                    std::vector<uint16_t> gb = results(sh, io, B);
                    FK(fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_AUTO));
                    bool same = gq == gb;
                    printf("check %-9s %-8s B=%d gemv %-4s %s%s\n", qz.name, sh.name, B, fk_gemv_impl_name(impl),
                           same ? "PASS" : "FAIL", same ? "" : " (not bit for bit the bf16 GEMV on the dequantized matrix)");
                    fails += !same;
                }
            /* ... and at batch 1 the CUDA-core kernel's other shapes (units per warp, warps per block), which must
             * give the same bits */
            for (const Variant &vr : variants) {
                if (!variant_ok(vr, sh)) continue;
                FK(fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_SIMT));
                poison(sh, io, h);
                FK(fk_ctx_set_gemv_q_simt(kc, vr.units, vr.warps));
                FK(launch(&mats[0], sh, io, 1, s));
                FK(fk_ctx_set_gemv_q_simt(kc, 0, 0));
                std::vector<uint16_t> gq = results(sh, io, 1);
                poison(sh, io, h);
                FK(launch(&bmats[0], sh, io, 1, s));
                std::vector<uint16_t> gb = results(sh, io, 1);
                FK(fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_AUTO));
                bool same = gq == gb;
                printf("check %-9s %-8s B=1 gemv simt u%d w%d %s\n", qz.name, sh.name, vr.units, vr.warps,
                       same ? "PASS" : "FAIL (not bit for bit the bf16 GEMV on the dequantized matrix)");
                fails += !same;
            }
            /* 2. timing */
            double bytes = (double)wbytes + (double)sn * 2;
            for (int bi = 0; bi < nB; bi++) {
                int B = Bs[bi];
                auto timed = [&](int impl) {
                    FK(fk_ctx_set_gemv_impl(kc, impl));
                    double t = time_graph(s, sh.launches, [&](int i, cudaStream_t st) {
                        return launch(&mats[i % sh.copies], sh, io, B, st);
                    });
                    FK(fk_ctx_set_gemv_impl(kc, FK_GEMV_IMPL_AUTO));
                    return t;
                };
                double tq = timed(FK_GEMV_IMPL_AUTO), ts = timed(FK_GEMV_IMPL_SIMT), tt = timed(FK_GEMV_IMPL_TC);
                double tb = bf16 ? time_graph(s, sh.launches, [&](int i, cudaStream_t st) {
                    return launch(&bmats[i % sh.copies], sh, io, B, st);
                }) : 0.0;
                printf("time  %-9s %-8s B=%d %9.2f us/launch %8.1f GB/s (auto: %s; simt %9.2f us, tc %9.2f us)", qz.name,
                       sh.name, B, tq, bytes / (tq * 1e3),
                       fk_gemv_impl_name(fk_ctx_gemv_q_auto_impl(kc, B, sh.O, sh.K, sh.epi)), ts, tt);
                if (bf16) printf("   bf16 %9.2f us (x%.2f)", tb, tb / tq);
                printf("\n");
                table.push_back({sh.name, qz.name, B, tq, bytes / (tq * 1e3), tb, ts, tt});
                if (B != 1) continue;
                for (const Variant &vr : variants) {
                    if (!variant_ok(vr, sh)) continue;
                    FK(fk_ctx_set_gemv_q_simt(kc, vr.units, vr.warps));
                    double tv = timed(FK_GEMV_IMPL_SIMT);
                    FK(fk_ctx_set_gemv_q_simt(kc, 0, 0));
                    printf("time  %-9s %-8s B=1 simt u%d w%d %9.2f us/launch %8.1f GB/s (x%.3f the default simt)\n",
                           qz.name, sh.name, vr.units, vr.warps, tv, bytes / (tv * 1e3), ts / tv);
                }
            }
            /* 3. prefill: the dequantization alone, and the GEMM with it, beside the bf16 GEMM */
            if (prefill && sh.epi != FK_GEMV_STORE) {
                double tdq = time_graph(s, 8, [&](int i, cudaStream_t st) {
                    return fk_dequant_bf16(kc, &mats[i % sh.copies], 0, sh.O, Wb, st);
                });
                double moved = bytes + (double)sh.O * sh.K * 2;
                printf("time  %-9s %-8s dequant %9.2f us %8.1f GB/s (read + written)\n", qz.name, sh.name, tdq,
                       moved / (tdq * 1e3));
                cublasHandle_t hb;
                FK(frigg_cuda_gemm_handle(&hb, s));
                void *ws; /* cuBLAS may not allocate while a stream is captured: a workspace of its own, as the engine's */
                CK(cudaMalloc(&ws, 32u << 20));
                if (cublasSetWorkspace(hb, ws, 32u << 20) != CUBLAS_STATUS_SUCCESS) {
                    fprintf(stderr, "gemv_q: cublasSetWorkspace failed\n");
                    return 2;
                }
                uint16_t *A, *C, *scratch;
                const int Ts_full[] = {512, 4096}, Ts_quick[] = {4096};
                const int *Ts = quick ? Ts_quick : Ts_full, nT = quick ? 1 : 2;
                CK(cudaMalloc((void **)&A, (size_t)4096 * sh.K * 2));
                CK(cudaMalloc((void **)&C, (size_t)4096 * sh.O * 2));
                CK(cudaMalloc((void **)&scratch, frigg_cuda_gemm_scratch_bytes(&M)));
                fill_bf16<<<1024, 256>>>(A, (size_t)4096 * sh.K, 500 + si, 1.0f, 0);
                CK(cudaGetLastError());
                CK(cudaDeviceSynchronize());
                for (int ti = 0; ti < nT; ti++) {
                    int T = Ts[ti];
                    double tg = time_graph(s, 4, [&](int i, cudaStream_t) {
                        return frigg_cuda_gemm_dq(kc, hb, &mats[i % sh.copies], A, T, C, scratch,
                                                  frigg_cuda_gemm_scratch_bytes(&M));
                    });
                    double t0 = time_graph(s, 4, [&](int i, cudaStream_t) {
                        return frigg_cuda_gemm(hb, &bmats[i % bmats.size()], A, T, C);
                    });
                    printf("time  %-9s %-8s prefill T=%-4d %9.2f us (bf16 GEMM %9.2f us, +%.1f%%)\n", qz.name, sh.name, T,
                           tg, t0, 100.0 * (tg - t0) / t0);
                }
                cublasDestroy(hb);
                CK(cudaFree(ws));
                CK(cudaFree(A));
                CK(cudaFree(C));
                CK(cudaFree(scratch));
            }
            CK(cudaFree(W));
            CK(cudaFree(S));
            CK(cudaFree(Wb));
            CK(cudaFree(h));
        }
    }
    printf("\n%-9s %-8s %2s | %10s %8s | %10s %10s | %10s %7s\n", "quant", "shape", "B", "auto us", "GB/s", "simt us",
           "tc us", "bf16 us", "speedup");
    for (const Row &r : table)
        printf("%-9s %-8s %2d | %10.2f %8.1f | %10.2f %10.2f | %10.2f %7.2f\n", r.quant, r.shape, r.B, r.us, r.gbs,
               r.us_simt, r.us_tc, r.us_bf16, r.us_bf16 > 0 ? r.us_bf16 / r.us : 0.0);
    printf("%s: %d check(s) failed\n", fails ? "FAIL" : "PASS", fails);
    fk_ctx_free(kc);
    return fails ? 1 : 0;
}
