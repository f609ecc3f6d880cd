/* kv_write_i8.cu — the int8 KV cache's write of a decode step, as shipped (two kernels: fk_rope_rows rotates q and
 * K into a bf16 staging row, then fk_kv_write_i8 quantizes K and V into the cache) against one fused kernel that
 * rotates and quantizes in registers (rope_kv_write_i8 below), which would remove one of the two launches the
 * int8 cache adds per layer (a batch-1 decode step is 908 kernels with the int8 cache against 652 with bf16's,
 * whose write is fused into the QKV GEMV's epilogue: `kernels_per_step` in
 * benchmarks/h200-2026-12-02/kvprmt/ab.jsonl).
 *
 * The fused kernel: one block of three warps per (row, head): warp 0 K, warp 1 V, warp 2 q; lane l holds elements
 * l + 32e (e < hd / 32). RoPE's partner of element i (i +- hd/2) is in the same lane for head_dim 64 and 128 and
 * one shuffle away for 32. Its arithmetic is fk_rope_rows's (rbf(rbf(x * cos) + rbf(+-partner * sin))) and
 * fk_kv_write_i8's (amax, __fdiv_rn scale, round to nearest, clamp to +-127) on the same values, so it must give
 * the same bits: the staging row only held the rotated value rounded to bf16, which the fused kernel keeps in a
 * float that holds exactly that bf16.
 *
 * 1. correctness: for head_dim 32, 64, 128 and batch 1, 8, 64, random gqkv rows (one head of row 0 all zeros:
 *    scale 0), rows at different sequences and positions; both versions write into caches and q buffers poisoned
 *    alike, and every byte of q, the int8 K and V and their scales must agree: a PASS/FAIL line per shape.
 * 2. timing: one CUDA graph of 128 layers' writes (PDL on, through fk_launch, as the engine launches) for
 *    DFM-Mimir's 12 heads of 128 at batch 1, 8, 64: median µs per layer over the timed replays, both versions.
 * Exit 1 on any FAIL. Usage: kv_write_i8 [--quick]   (--quick: 5 timed replays, not 11) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.cuh"
#include "dev.cuh"
#include "kernels.h"

template <int E> /* head_dim = 32 * E, E in {1, 2, 4} */
__global__ void __launch_bounds__(96)
    rope_kv_write_i8(const uint16_t *gqkv, int H, const int32_t *row_seq, const int32_t *row_pos, const uint16_t *cos_t,
                     const uint16_t *sin_t, int max_ctx, long long seq_stride, uint16_t *q_out, int8_t *k8, int8_t *v8,
                     float *ks, float *vs) {
    constexpr int HD = 32 * E, HALF = HD / 2;
    pdl_wait();
    const int h = blockIdx.x, b = blockIdx.y, w = threadIdx.x >> 5, lane = threadIdx.x & 31, D = H * HD;
    const int pos = row_pos[b];
    /* gqkv row: [gate | q | k | v], D each */
    const uint16_t *src = gqkv + (size_t)b * 4 * D + (size_t)(w == 0 ? 2 : w == 1 ? 3 : 1) * D + (size_t)h * HD;
    float x[E];
#pragma unroll
    for (int e = 0; e < E; e++) x[e] = bf2f(ld_act16(src + lane + 32 * e));
    if (w != 1) { /* q and K rotate (warp-uniform branch) */
        const uint16_t *C = cos_t + (size_t)pos * HD, *S = sin_t + (size_t)pos * HD;
        float o[E];
#pragma unroll
        for (int e = 0; e < E; e++) {
            const int i = lane + 32 * e;
            const float partner = E == 1 ? __shfl_xor_sync(0xffffffffu, x[0], 16) : x[e < E / 2 ? e + E / 2 : e - E / 2];
            const float r = i < HALF ? -partner : partner;
            o[e] = rbf(rbf(x[e] * bf2f(C[i])) + rbf(r * bf2f(S[i])));
        }
#pragma unroll
        for (int e = 0; e < E; e++) x[e] = o[e];
    }
    if (w == 2) {
#pragma unroll
        for (int e = 0; e < E; e++) q_out[(size_t)b * D + (size_t)h * HD + lane + 32 * e] = f2bf(x[e]);
        return;
    }
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < E; e++) amax = fmaxf(amax, fabsf(x[e]));
    amax = warp_max(amax);
    const float scale = __fdiv_rn(amax, 127.0f);
    const long long seq = row_seq[b];
    int8_t *dst = (w ? v8 : k8) + seq * seq_stride + ((long long)h * max_ctx + pos) * HD;
#pragma unroll
    for (int e = 0; e < E; e++) {
        int q = 0;
        if (scale != 0.0f) {
            q = __float2int_rn(__fdiv_rn(x[e], scale));
            q = q > 127 ? 127 : q < -127 ? -127 : q;
        }
        dst[lane + 32 * e] = (int8_t)q;
    }
    if (lane == 0) (w ? vs : ks)[seq * (seq_stride / HD) + (long long)h * max_ctx + pos] = scale;
}

static fk_ctx *kc;
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

/* One shape's buffers: the step's inputs and, for each version, q and the cache it writes. */
struct shape {
    int H, hd, B, max_ctx;
    long long seq_stride;
    uint16_t *gqkv, *cos_t, *sin_t, *stage; /* stage: fk_rope_rows's K and V rows, [B][2D] */
    int32_t *seq, *pos;
    uint16_t *q[2];
    int8_t *k8[2], *v8[2];
    float *ks[2], *vs[2];
    size_t cache, scales;
};

static void *dmalloc(size_t n) {
    void *p = NULL;
    CK(cudaMalloc(&p, n));
    return p;
}

static void shape_init(shape *s, int H, int hd, int B) {
    s->H = H, s->hd = hd, s->B = B, s->max_ctx = 64;
    const int D = H * hd;
    s->seq_stride = (long long)H * s->max_ctx * hd;
    s->cache = (size_t)B * s->seq_stride;
    s->scales = (size_t)B * H * s->max_ctx;
    uint16_t *g = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)B * 4 * D);
    for (size_t i = 0; i < (size_t)B * 4 * D; i++) g[i] = frigg_f32_to_bf16(frand() * 4.0f);
    for (int i = 0; i < hd; i++) g[2 * D + i] = g[3 * D + i] = 0; /* row 0, head 0: K and V all zeros (scale 0) */
    uint16_t *cs = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)s->max_ctx * hd * 2);
    for (int i = 0; i < s->max_ctx * hd * 2; i++) cs[i] = frigg_f32_to_bf16(frand());
    int32_t seq[64], pos[64];
    for (int b = 0; b < B; b++) {
        seq[b] = (b * 5 + 3) % B; /* a permutation of the rows' sequences (5 is coprime with 1, 8, 64) */
        pos[b] = (b * 7 + 1) % s->max_ctx;
    }
    s->gqkv = (uint16_t *)dmalloc(sizeof(uint16_t) * (size_t)B * 4 * D);
    s->cos_t = (uint16_t *)dmalloc(sizeof(uint16_t) * (size_t)s->max_ctx * hd);
    s->sin_t = (uint16_t *)dmalloc(sizeof(uint16_t) * (size_t)s->max_ctx * hd);
    s->stage = (uint16_t *)dmalloc(sizeof(uint16_t) * (size_t)B * 2 * D);
    s->seq = (int32_t *)dmalloc(sizeof(int32_t) * B);
    s->pos = (int32_t *)dmalloc(sizeof(int32_t) * B);
    CK(cudaMemcpy(s->gqkv, g, sizeof(uint16_t) * (size_t)B * 4 * D, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s->cos_t, cs, sizeof(uint16_t) * (size_t)s->max_ctx * hd, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s->sin_t, cs + (size_t)s->max_ctx * hd, sizeof(uint16_t) * (size_t)s->max_ctx * hd, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s->seq, seq, sizeof(int32_t) * B, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s->pos, pos, sizeof(int32_t) * B, cudaMemcpyHostToDevice));
    for (int v = 0; v < 2; v++) {
        s->q[v] = (uint16_t *)dmalloc(sizeof(uint16_t) * (size_t)B * D);
        s->k8[v] = (int8_t *)dmalloc(s->cache);
        s->v8[v] = (int8_t *)dmalloc(s->cache);
        s->ks[v] = (float *)dmalloc(sizeof(float) * s->scales);
        s->vs[v] = (float *)dmalloc(sizeof(float) * s->scales);
        CK(cudaMemset(s->q[v], 0x7f, sizeof(uint16_t) * (size_t)B * D));
        CK(cudaMemset(s->k8[v], 0x55, s->cache));
        CK(cudaMemset(s->v8[v], 0x55, s->cache));
        CK(cudaMemset(s->ks[v], 0x7f, sizeof(float) * s->scales));
        CK(cudaMemset(s->vs[v], 0x7f, sizeof(float) * s->scales));
    }
    free(g);
    free(cs);
}

static void shape_free(shape *s) {
    cudaFree(s->gqkv); cudaFree(s->cos_t); cudaFree(s->sin_t); cudaFree(s->stage); cudaFree(s->seq); cudaFree(s->pos);
    for (int v = 0; v < 2; v++) {
        cudaFree(s->q[v]); cudaFree(s->k8[v]); cudaFree(s->v8[v]); cudaFree(s->ks[v]); cudaFree(s->vs[v]);
    }
}

/* Version 0: the shipped two kernels; 1: the fused one. */
static int run(const shape *s, int v, cudaStream_t st) {
    const int H = s->H, hd = s->hd, B = s->B, D = H * hd;
    if (v == 0) {
        if (fk_rope_rows(kc, s->gqkv, B, H, hd, s->pos, s->cos_t, s->sin_t, s->q[0], s->stage, s->stage + D, 2 * D, st))
            return -1;
        return fk_kv_write_i8(kc, s->stage, s->stage + D, 2 * D, s->seq, s->pos, B, H, hd, s->max_ctx, s->seq_stride, s->k8[0],
                              s->v8[0], s->ks[0], s->vs[0], st);
    }
#define ARGS kc, k, dim3(H, B), 96, 0, st, (const uint16_t *)s->gqkv, H, (const int32_t *)s->seq, (const int32_t *)s->pos, \
             (const uint16_t *)s->cos_t, (const uint16_t *)s->sin_t, s->max_ctx, s->seq_stride, s->q[1], s->k8[1], s->v8[1], \
             s->ks[1], s->vs[1]
    if (hd == 32) {
        auto k = rope_kv_write_i8<1>;
        fk_launch(ARGS);
    } else if (hd == 64) {
        auto k = rope_kv_write_i8<2>;
        fk_launch(ARGS);
    } else {
        auto k = rope_kv_write_i8<4>;
        fk_launch(ARGS);
    }
#undef ARGS
    return fk_check_launch("rope_kv_write_i8");
}

static int same(const void *a, const void *b, size_t n) {
    char *ha = (char *)malloc(n), *hb = (char *)malloc(n);
    CK(cudaMemcpy(ha, a, n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb, b, n, cudaMemcpyDeviceToHost));
    int eq = !memcmp(ha, hb, n);
    free(ha);
    free(hb);
    return eq;
}

static int check(int H, int hd, int B) {
    shape s;
    shape_init(&s, H, hd, B);
    int ok = run(&s, 0, 0) == 0 && run(&s, 1, 0) == 0 && cudaDeviceSynchronize() == cudaSuccess;
    if (!ok) fprintf(stderr, "launch: %s\n", frigg_error());
    const int qs = same(s.q[0], s.q[1], sizeof(uint16_t) * (size_t)B * H * hd), k = same(s.k8[0], s.k8[1], s.cache),
              v = same(s.v8[0], s.v8[1], s.cache), sc = same(s.ks[0], s.ks[1], sizeof(float) * s.scales) &&
                                                        same(s.vs[0], s.vs[1], sizeof(float) * s.scales);
    ok = ok && qs && k && v && sc;
    printf("%s H=%d hd=%d B=%d: q %s, int8 K %s, int8 V %s, scales %s\n", ok ? "PASS" : "FAIL", H, hd, B,
           qs ? "same" : "DIFFER", k ? "same" : "DIFFER", v ? "same" : "DIFFER", sc ? "same" : "DIFFER");
    shape_free(&s);
    return ok;
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median µs per layer of a graph of 128 layers' writes. */
static float time_version(const shape *s, int v, int reps) {
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < 128; l++)
        if (run(s, v, st)) {
            fprintf(stderr, "capture: %s\n", frigg_error());
            exit(2);
        }
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(ge, st));
    float t[16];
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t[i], e0, e1));
    }
    qsort(t, reps, sizeof(float), cmp_f);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaStreamDestroy(st));
    return t[reps / 2] * 1000.0f / 128.0f;
}

int main(int argc, char **argv) {
    int reps = 11;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) reps = 5;
        else {
            fprintf(stderr, "usage: kv_write_i8 [--quick]\n");
            return 2;
        }
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("SKIP kv_write_i8: no CUDA device\n");
        return 0;
    }
    kc = dev_ctx(0);
    int fails = 0;
    static const int shapes[][2] = {{2, 32}, {4, 64}, {12, 128}}, batches[] = {1, 8, 64};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) fails += !check(shapes[i][0], shapes[i][1], batches[j]);
    printf("\nµs per layer (a graph of 128 layers' writes, PDL %s), H=12 hd=128:\n", kc->pdl ? "on" : "off");
    printf("| batch | shipped (rope_rows + kv_write_i8) | fused | fused / shipped |\n| --- | --- | --- | --- |\n");
    for (int j = 0; j < 3; j++) {
        shape s;
        shape_init(&s, 12, 128, batches[j]);
        float a = time_version(&s, 0, reps), b = time_version(&s, 1, reps);
        printf("| %d | %.2f | %.2f | %.3f |\n", batches[j], a, b, b / a);
        shape_free(&s);
    }
    fk_ctx_free(kc);
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
