/* attn_decode.cu — microbenchmark of decode attention (kernels/attention_decode.cu) against the kernel it
 * replaced ("v0", copied below from commit 2ba0469 with only its names changed).
 *
 * For each shape (batch B in {1,4,8} x context in {128,512,2048,4096}; DFM-Mimir's 12 heads of head_dim 128):
 *  1. correctness: fresh random q, gate, K and V (never zeros), rows at different lengths (row b at
 *     ctx - 37*b), output poisoned with NaN first; every version is run twice (the split counters must be
 *     left at zero) and compared with the CPU reference (tests/attn_decode_ref.h, the CPU engine's
 *     arithmetic) under test_cuda_ops's tolerance. Prints PASS/FAIL per (version, shape).
 *  2. timing: one CUDA graph of 128 launches (PDL on, through each version's launcher, as the engine
 *     launches), launch i reading its own K/V slot i like the 128 virtual layers of a decode step (so the
 *     caches, 128 x 201 MB at B=8 ctx 4096, are far larger than L2), every row at position ctx-1; median of
 *     the timed replays after warm-up. Prints µs per launch and GB/s (K+V bytes + q, gate and y).
 * max_ctx (which sizes v0's grid) is the shape's ctx, as frigg-bench sets it, unless --max-ctx N.
 * Exit 1 on any FAIL. Usage: attn_decode [--quick] [--max-ctx N]   (--quick: 5 timed replays, not 11) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

extern "C" {
#include "util.h"
}
#include "common.cuh"
#include "kernels.h"
#include "../../tests/attn_decode_ref.h"

/* ---------------- v0: the decode attention kernel before this rewrite ---------------- */
#define V0_CHUNK 64  /* keys per split block */
#define V0_WARPS 8

/* Merge the split partials of one (row, head) and apply the output gate. Loads bypass L1 (__ldcg): the
 * partials were written by other blocks. */
static __device__ void v0_combine_row(int len, const uint16_t *gqkv, int H, int hd, int nsplit, const float *w, int b, int h,
                            uint16_t *y) {
    const int D = H * hd, ns = (len + V0_CHUNK - 1) / V0_CHUNK;
    (void)nsplit;
    float M = -INFINITY;
    for (int sp = 0; sp < ns; sp++) M = fmaxf(M, __ldcg(w + sp * (hd + 2)));
    float L = 0.0f;
    for (int sp = 0; sp < ns; sp++) L += __ldcg(w + sp * (hd + 2) + 1) * expf(__ldcg(w + sp * (hd + 2)) - M);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int sp = 0; sp < ns; sp++) a += __ldcg(w + sp * (hd + 2) + 2 + d) * expf(__ldcg(w + sp * (hd + 2)) - M);
        float o = rbf(a / L);
        float g = bf2f(gqkv[(size_t)b * 4 * D + h * hd + d]);
        float sg = rbf(1.0f / (1.0f + expf(-g)));
        y[(size_t)b * D + h * hd + d] = f2bf(sg * o);
    }
}

/* DPL dims per lane; lanes with lane*DPL >= hd idle in the dot product. */
template <int DPL>
__global__ void __launch_bounds__(V0_WARPS * 32)
    v0_attn_decode_split(const uint16_t *__restrict__ q, const uint16_t *__restrict__ k_slot,
                      const uint16_t *__restrict__ v_slot, long long seq_stride, const int32_t *row_seq,
                      const int32_t *row_pos, int H, int hd, int max_ctx, int nsplit, float scale, float *work,
                      int *counters, const uint16_t *__restrict__ gqkv, uint16_t *__restrict__ y) {
    __shared__ float wm[V0_WARPS], wl[V0_WARPS];
    __shared__ float wacc[V0_WARPS][256];
    pdl_wait();
    pdl_launch();
    const int sp = blockIdx.x, h = blockIdx.y, b = blockIdx.z, D = H * hd;
    const int len = row_pos[b] + 1, j0 = sp * V0_CHUNK;
    if (j0 >= len) return;
    const int j1 = min(len, j0 + V0_CHUNK);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, d0 = lane * DPL;
    const bool active = d0 < hd;
    size_t base = (size_t)row_seq[b] * seq_stride + (size_t)h * max_ctx * hd;
    const uint16_t *K = k_slot + base, *V = v_slot + base;
    float qf[DPL], acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        qf[i] = active ? bf2f(q[(size_t)b * D + h * hd + d0 + i]) : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    /* Each warp takes a contiguous quarter of the chunk, 4 keys at a time: the 8 loads of a group are all in
     * flight before the first dot product needs them. */
    const int per_warp = V0_CHUNK / V0_WARPS, kw0 = j0 + warp * per_warp, kw1 = min(j1, kw0 + per_warp);
    for (int jb = kw0; jb < kw1; jb += 4) {
        float kf[4][DPL], vf[4][DPL];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int j = jb + u;
            bool live = active && j < kw1;
#pragma unroll
            for (int i = 0; i < DPL; i++) kf[u][i] = vf[u][i] = 0.0f;
            if (live) {
                if (DPL == 4) {
                    uint2 kk = *(const uint2 *)(K + (size_t)j * hd + d0), vv = *(const uint2 *)(V + (size_t)j * hd + d0);
                    kf[u][0] = bf_lo(kk.x); kf[u][1 % DPL] = bf_hi(kk.x); kf[u][2 % DPL] = bf_lo(kk.y); kf[u][3 % DPL] = bf_hi(kk.y);
                    vf[u][0] = bf_lo(vv.x); vf[u][1 % DPL] = bf_hi(vv.x); vf[u][2 % DPL] = bf_lo(vv.y); vf[u][3 % DPL] = bf_hi(vv.y);
                } else {
#pragma unroll
                    for (int i = 0; i < DPL; i++) {
                        kf[u][i] = bf2f(K[(size_t)j * hd + d0 + i]);
                        vf[u][i] = bf2f(V[(size_t)j * hd + d0 + i]);
                    }
                }
            }
        }
        float sc[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            float part = 0.0f;
#pragma unroll
            for (int i = 0; i < DPL; i++) part += qf[i] * kf[u][i];
            sc[u] = warp_sum(part) * scale;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            if (jb + u >= kw1) break;
            float m_new = fmaxf(m, sc[u]);
            float alpha = m == -INFINITY ? 0.0f : expf(m - m_new), p = expf(sc[u] - m_new);
            l = l * alpha + p;
#pragma unroll
            for (int i = 0; i < DPL; i++) acc[i] = acc[i] * alpha + p * vf[u][i];
            m = m_new;
        }
    }
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
    if (active)
#pragma unroll
        for (int i = 0; i < DPL; i++) wacc[warp][d0 + i] = acc[i];
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < V0_WARPS; w++) M = fmaxf(M, wm[w]);
    float *out = work + (((size_t)b * H + h) * nsplit + sp) * (hd + 2);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < V0_WARPS; w++)
            if (wm[w] != -INFINITY) a += wacc[w][d] * expf(wm[w] - M);
        out[2 + d] = a;
    }
    if (threadIdx.x == 0) {
        float L = 0.0f;
        for (int w = 0; w < V0_WARPS; w++)
            if (wm[w] != -INFINITY) L += wl[w] * expf(wm[w] - M);
        out[0] = M;
        out[1] = L;
    }
    /* The last split block of this (row, head) to finish combines all partials: no separate kernel, no
     * launch gap. The counter is reset by that block, so it is zero again for the next layer and step. */
    __shared__ int is_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        int ns = (len + V0_CHUNK - 1) / V0_CHUNK;
        int prev = atomicAdd(&counters[b * H + h], 1);
        is_last = prev == ns - 1;
        if (is_last) counters[b * H + h] = 0;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    v0_combine_row(len, gqkv, H, hd, nsplit, work + ((size_t)b * H + h) * nsplit * (hd + 2), b, h, y);
}


static size_t v0_work_floats(int B, int H, int hd, int max_ctx) {
    int nsplit = (max_ctx + V0_CHUNK - 1) / V0_CHUNK;
    return (size_t)B * H * nsplit * (hd + 2);
}

static int v0_attn_decode(const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot, long long seq_stride,
                          const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H, int hd,
                          int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s) {
    int nsplit = (max_ctx + V0_CHUNK - 1) / V0_CHUNK;
    dim3 grid(nsplit, H, B);
    float scale = (float)(1.0 / sqrt((double)hd));
    if (hd != 128) {
        frigg_set_error("v0: the benchmark runs head_dim 128 only");
        return -1;
    }
    fk_launch(v0_attn_decode_split<4>, grid, V0_WARPS * 32, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, hd,
              max_ctx, nsplit, scale, work, counters, gqkv, y);
    return fk_check_launch("v0_attn_decode");
}

/* ---------------- the benchmark ---------------- */
typedef int (*decode_fn)(const uint16_t *, const uint16_t *, const uint16_t *, long long, const int32_t *,
                         const int32_t *, const uint16_t *, int, int, int, int, float *, int *, uint16_t *,
                         cudaStream_t);
static const struct {
    const char *name;
    size_t (*work_floats)(int, int, int, int);
    decode_fn run;
} versions[] = {{"v0", v0_work_floats, v0_attn_decode}, {"v1", fk_attn_decode_work_floats, fk_attn_decode}};
enum { NVER = 2 };
static_assert(sizeof versions / sizeof versions[0] == NVER, "NVER counts versions[]");

enum { H = 12, HD = 128, D = H * HD, LAYERS = 128, MAXB = 8, MAXCTX = 4096 };

#define CU(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
static void fill_bf16(uint16_t *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frigg_f32_to_bf16(frand() * scale);
}

/* Random bf16 in [-scale, scale) from a hash of the index: fills the 128 timing slots (tens of GB) on the
 * device. The values only have to be ordinary numbers; their exact values do not affect the time. */
__global__ void fill_hash(uint16_t *x, size_t n, uint32_t seed, float scale) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(i >> 32) ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        float u = (float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f;
        x[i] = f2bf(u * scale);
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int quick = 0, fixed_max_ctx = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--max-ctx") && i + 1 < argc)
            fixed_max_ctx = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--max-ctx N]\n", argv[0]);
            return 2;
        }
    }
    if (fixed_max_ctx && (fixed_max_ctx < 4096 || fixed_max_ctx > MAXCTX)) {
        fprintf(stderr, "--max-ctx: only %d (at least the largest shape's ctx, at most what the slots hold)\n", MAXCTX);
        return 2;
    }
    if (fk_init() != 0) {
        fprintf(stderr, "fk_init: %s\n", frigg_error());
        return 2;
    }
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs; H=%d head_dim=%d, %d launches per graph over %d K/V slots\n", prop.name,
           prop.multiProcessorCount, H, HD, LAYERS, LAYERS);
    static const int Bs[] = {1, 4, 8}, ctxs[] = {128, 512, 2048, 4096};
    const int nB = 3, nC = 4, replays = quick ? 5 : 11, warm = 2;

    /* Device buffers: 128 slots of [MAXB seqs][H][max_ctx][HD] for K and V (the layout any max_ctx <= MAXCTX
     * fits in), shared q / gate / y / work / counters like the engine's. */
    const size_t slot = (size_t)MAXB * H * MAXCTX * HD;
    uint16_t *kc, *vc, *dq, *dg, *dy;
    CU(cudaMalloc((void **)&kc, slot * LAYERS * 2));
    CU(cudaMalloc((void **)&vc, slot * LAYERS * 2));
    fill_hash<<<4096, 256>>>(kc, slot * LAYERS, 1u, 2.0f);
    fill_hash<<<4096, 256>>>(vc, slot * LAYERS, 2u, 1.0f);
    CU(cudaGetLastError());
    CU(cudaDeviceSynchronize());
    CU(cudaMalloc((void **)&dq, (size_t)MAXB * D * 2));
    CU(cudaMalloc((void **)&dg, (size_t)MAXB * 4 * D * 2));
    CU(cudaMalloc((void **)&dy, (size_t)MAXB * D * 2));
    size_t wf = 0;
    for (int v = 0; v < NVER; v++) {
        size_t f = versions[v].work_floats(MAXB, H, HD, MAXCTX);
        if (f > wf) wf = f;
    }
    float *work;
    int *counters;
    int32_t *dseq, *dpos, seqh[MAXB], posh[MAXB];
    CU(cudaMalloc((void **)&work, wf * 4));
    CU(cudaMalloc((void **)&counters, (size_t)MAXB * H * 4));
    CU(cudaMemset(counters, 0, (size_t)MAXB * H * 4));
    CU(cudaMalloc((void **)&dseq, sizeof seqh));
    CU(cudaMalloc((void **)&dpos, sizeof posh));
    for (int b = 0; b < MAXB; b++) seqh[b] = b;
    CU(cudaMemcpy(dseq, seqh, sizeof seqh, cudaMemcpyHostToDevice));
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));

    uint16_t *hk = (uint16_t *)malloc(slot * 2), *hv = (uint16_t *)malloc(slot * 2), *hq = (uint16_t *)malloc((size_t)MAXB * D * 2);
    uint16_t *hg = (uint16_t *)malloc((size_t)MAXB * 4 * D * 2), *hy = (uint16_t *)malloc((size_t)MAXB * D * 2);
    float *ref = (float *)malloc(sizeof(float) * MAXB * D), *got = (float *)malloc(sizeof(float) * MAXB * D);
    float us[NVER][3][4], gbs[NVER][3][4];
    int fails = 0;
    for (int bi = 0; bi < nB; bi++)
        for (int ci = 0; ci < nC; ci++) {
            int B = Bs[bi], ctx = ctxs[ci], max_ctx = fixed_max_ctx ? fixed_max_ctx : ctx;
            long long seq_stride = (long long)H * max_ctx * HD;
            /* correctness, on slot 0 (rewritten with host data; the timing below does not depend on values) */
            fill_bf16(hk, (size_t)B * seq_stride, 2.0f);
            fill_bf16(hv, (size_t)B * seq_stride, 1.0f);
            fill_bf16(hq, (size_t)B * D, 2.0f);
            fill_bf16(hg, (size_t)B * 4 * D, 3.0f);
            for (int b = 0; b < B; b++) posh[b] = ctx - 1 - 37 * b > 0 ? ctx - 1 - 37 * b : b;
            CU(cudaMemcpy(kc, hk, (size_t)B * seq_stride * 2, cudaMemcpyHostToDevice));
            CU(cudaMemcpy(vc, hv, (size_t)B * seq_stride * 2, cudaMemcpyHostToDevice));
            CU(cudaMemcpy(dq, hq, (size_t)B * D * 2, cudaMemcpyHostToDevice));
            CU(cudaMemcpy(dg, hg, (size_t)B * 4 * D * 2, cudaMemcpyHostToDevice));
            CU(cudaMemcpy(dpos, posh, sizeof posh, cudaMemcpyHostToDevice));
            CU(cudaDeviceSynchronize());
            attn_decode_ref(hq, hk, hv, seq_stride, seqh, posh, hg, B, H, HD, max_ctx, ref);
            for (int v = 0; v < NVER; v++) {
                CU(cudaMemset(dy, 0xff, (size_t)MAXB * D * 2)); /* NaN: an output not written fails */
                int rc = 0;
                for (int rep = 0; rep < 2 && rc == 0; rep++)
                    rc = versions[v].run(dq, kc, vc, seq_stride, dseq, dpos, dg, B, H, HD, max_ctx, work, counters, dy, st);
                CU(cudaStreamSynchronize(st));
                CU(cudaMemcpy(hy, dy, (size_t)B * D * 2, cudaMemcpyDeviceToHost));
                for (int i = 0; i < B * D; i++) got[i] = frigg_bf16_to_f32(hy[i]);
                size_t off = 0, bad = 0;
                double worst = 0;
                int ok = rc == 0 && attn_decode_close(got, ref, (size_t)B * D, 0.02, &off, &bad, &worst);
                fails += !ok;
                printf("%s %-3s B=%d ctx=%-4d max_ctx=%-4d: %zu of %d differ, %zu beyond tolerance, worst |d| %.3g%s%s\n",
                       ok ? "PASS" : "FAIL", versions[v].name, B, ctx, max_ctx, off, B * D, bad, worst,
                       rc ? ", launch error: " : "", rc ? frigg_error() : "");
            }
            /* timing: every row at position ctx-1 */
            for (int b = 0; b < B; b++) posh[b] = ctx - 1;
            CU(cudaMemcpy(dpos, posh, sizeof posh, cudaMemcpyHostToDevice));
            double bytes = (double)B * H * ctx * HD * 2 * 2 + (double)B * D * 2 * 3;
            for (int v = 0; v < NVER; v++) {
                cudaGraph_t graph;
                cudaGraphExec_t exec;
                CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
                int rc = 0;
                for (int l = 0; l < LAYERS && rc == 0; l++)
                    rc = versions[v].run(dq, kc + (size_t)l * slot, vc + (size_t)l * slot, seq_stride, dseq, dpos, dg, B, H,
                                         HD, max_ctx, work, counters, dy, st);
                CU(cudaStreamEndCapture(st, &graph));
                if (rc) {
                    printf("FAIL %s B=%d ctx=%d: capture: %s\n", versions[v].name, B, ctx, frigg_error());
                    fails++;
                    us[v][bi][ci] = gbs[v][bi][ci] = 0;
                    continue;
                }
                CU(cudaGraphInstantiate(&exec, graph, 0));
                float t[16];
                for (int r = 0; r < warm + replays; r++) {
                    CU(cudaEventRecord(e0, st));
                    CU(cudaGraphLaunch(exec, st));
                    CU(cudaEventRecord(e1, st));
                    CU(cudaEventSynchronize(e1));
                    if (r >= warm) CU(cudaEventElapsedTime(&t[r - warm], e0, e1));
                }
                qsort(t, replays, sizeof t[0], cmp_float);
                float per = t[replays / 2] * 1000.0f / LAYERS;
                us[v][bi][ci] = per;
                gbs[v][bi][ci] = (float)(bytes / (per * 1e-6) / 1e9);
                printf("time %-3s B=%d ctx=%-4d max_ctx=%-4d: %8.2f us/launch %8.1f GB/s (median of %d graphs of %d)\n",
                       versions[v].name, B, ctx, max_ctx, per, gbs[v][bi][ci], replays, LAYERS);
                CU(cudaGraphExecDestroy(exec));
                CU(cudaGraphDestroy(graph));
            }
        }
    printf("\n| B | ctx | max_ctx |");
    for (int v = 0; v < NVER; v++) printf(" %s us | %s GB/s |", versions[v].name, versions[v].name);
    printf(" v0/v1 |\n|---|---|---|");
    for (int v = 0; v < NVER; v++) printf("---|---|");
    printf("---|\n");
    for (int bi = 0; bi < nB; bi++)
        for (int ci = 0; ci < nC; ci++) {
            printf("| %d | %d | %d |", Bs[bi], ctxs[ci], fixed_max_ctx ? fixed_max_ctx : ctxs[ci]);
            for (int v = 0; v < NVER; v++) printf(" %.2f | %.0f |", us[v][bi][ci], gbs[v][bi][ci]);
            printf(" %.2fx |\n", us[NVER - 1][bi][ci] > 0 ? us[0][bi][ci] / us[NVER - 1][bi][ci] : 0.0);
        }
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("FAIL device error: %s\n", cudaGetErrorString(e));
        fails++;
    }
    printf("%s: %d failed\n", fails ? "FAIL" : "PASS", fails);
    free(hk); free(hv); free(hq); free(hg); free(hy); free(ref); free(got);
    return fails ? 1 : 0;
}
