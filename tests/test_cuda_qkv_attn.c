/* test_cuda_qkv_attn.c — fk_qkv_attn (kernels/qkv_attn.cu), batch-1 decode's gqkv projection and attention in
 * one kernel, against the two kernels it replaces: fk_gemv_qkv on CUDA cores then fk_attn_decode in cluster mode.
 * Bit for bit: the gated attention output y, and the whole KV cache (the new position's k and v, nothing else
 * written), for positions on either side of the split and round boundaries (1 key, 31..33, 511, 512, and up
 * to 4096 keys: 16 splits of 256), Mimir's 12 heads of 128 and fewer heads, a cache with several sequence
 * slots (row_seq 1), x produced by a kernel launched right before (as the engine's down_proj writes it),
 * and a CUDA-graph replay. Also: where it applies (fk_qkv_attn_applies) and that the settings which rule it
 * out (tensor-core gqkv, split attention, fixed splits per block, batch > 1, head_dim 64, FRIGG_QKV_ATTN off)
 * make fk_qkv_attn an error, not a silent fallback. The engine-level checks (graph = eager, batched =
 * single-row under simt, CUDA against the CPU engine) run the fused kernel at batch 1 in test_cuda_engine.
 * Without CUDA in the build, or without an sm_90 GPU (the kernel needs clusters), everything is skipped. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "backend.h"
#include "../kernels/kernels.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
static void fill(uint16_t *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frigg_f32_to_bf16(frand() * scale);
}
static void *dev_alloc(size_t bytes) {
    void *d = NULL;
    cudaMalloc(&d, bytes);
    return d;
}
static void *dev_copy(const void *h, size_t bytes) {
    void *d = dev_alloc(bytes);
    cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}

enum { NSEQ = 2 }; /* cache slots: the row decodes sequence 1, so slot 0 must stay untouched */

/* One shape on the device: weights, input, RoPE tables, two copies of the cache (fused, unfused). */
typedef struct {
    int H, hd, D, max_ctx;
    long long seq_stride;
    size_t kv;                          /* elements of one cache (K or V) */
    uint16_t *dW, *draw, *dx, *dcos, *dsin;
    uint16_t *hk, *hv;                  /* the initial cache, host */
    uint16_t *dk[2], *dv[2], *dy[2];    /* [0] unfused, [1] fused */
    uint16_t *dq, *dg;                  /* the unfused pair's q and gqkv */
    int32_t *dseq, *dpos;
    float *work;
    int *cnt;
} shape;

static void shape_init(shape *p, int H, int hd, int max_ctx) {
    p->H = H;
    p->hd = hd;
    p->D = H * hd;
    p->max_ctx = max_ctx;
    p->seq_stride = (long long)H * max_ctx * hd;
    p->kv = (size_t)NSEQ * p->seq_stride;
    size_t nw = (size_t)4 * p->D * p->D, nt = (size_t)max_ctx * hd;
    uint16_t *hw = malloc(nw * 2), *hx = malloc((size_t)p->D * 2), *hc = malloc(nt * 2), *hs = malloc(nt * 2);
    fill(hw, nw, 1.0f / sqrtf((float)p->D) * 1.7f);
    fill(hx, (size_t)p->D, 3.0f);
    for (int pos = 0; pos < max_ctx; pos++) /* RoPE-like tables: any bf16 values exercise the epilogue */
        for (int i = 0; i < hd; i++) {
            double a = pos / pow(10000.0, (double)(2 * (i % (hd / 2))) / hd);
            hc[(size_t)pos * hd + i] = frigg_f32_to_bf16((float)cos(a));
            hs[(size_t)pos * hd + i] = frigg_f32_to_bf16((float)sin(a));
        }
    p->dW = dev_copy(hw, nw * 2);
    p->draw = dev_copy(hx, (size_t)p->D * 2);
    p->dx = dev_alloc((size_t)p->D * 2);
    p->dcos = dev_copy(hc, nt * 2);
    p->dsin = dev_copy(hs, nt * 2);
    p->hk = malloc(p->kv * 2);
    p->hv = malloc(p->kv * 2);
    fill(p->hk, p->kv, 2.0f);
    fill(p->hv, p->kv, 1.0f);
    for (int a = 0; a < 2; a++) {
        p->dk[a] = dev_alloc(p->kv * 2);
        p->dv[a] = dev_alloc(p->kv * 2);
        p->dy[a] = dev_alloc((size_t)p->D * 2);
    }
    p->dq = dev_alloc((size_t)p->D * 2);
    p->dg = dev_alloc((size_t)4 * p->D * 2);
    p->dseq = dev_alloc(4);
    p->dpos = dev_alloc(4);
    p->work = dev_alloc(fk_attn_decode_work_floats(1, H, hd, max_ctx) * 4);
    p->cnt = dev_alloc((size_t)H * 4);
    cudaMemset(p->cnt, 0, (size_t)H * 4);
    free(hw);
    free(hx);
    free(hc);
    free(hs);
}
static void shape_free(shape *p) {
    void *d[] = {p->dW, p->draw, p->dx, p->dcos, p->dsin, p->dk[0], p->dk[1], p->dv[0], p->dv[1], p->dy[0], p->dy[1],
                 p->dq, p->dg, p->dseq, p->dpos, p->work, p->cnt};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) cudaFree(d[i]);
    free(p->hk);
    free(p->hv);
}

static fk_qkv_epi epi(const shape *p, int a) {
    fk_qkv_epi q = {p->dcos, p->dsin, p->dseq, p->dpos, p->dq, p->dk[a], p->dv[a], p->seq_stride, p->max_ctx, p->hd};
    return q;
}

/* Arm a (0 unfused, 1 fused) at position pos: fresh cache and poisoned y, x = rmsnorm-free copy made by a
 * kernel right before (fk_rmsnorm of a row is not what the arms read: x itself is), then the arm. */
static int run_arm(shape *p, int a, int pos, float eps, cudaStream_t s) {
    int32_t seq = 1;
    cudaMemcpyAsync(p->dseq, &seq, 4, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(p->dpos, &pos, 4, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(p->dk[a], p->hk, p->kv * 2, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(p->dv[a], p->hv, p->kv * 2, cudaMemcpyHostToDevice, s);
    cudaMemsetAsync(p->dy[a], 0xff, (size_t)p->D * 2, s);
    cudaMemsetAsync(p->dx, 0, (size_t)p->D * 2, s);
    /* x = bf16(0 + bf16(raw)): written by a kernel the arm's first kernel follows under PDL */
    if (fk_add_rmsnorm(p->dx, p->draw, p->dq, 1, p->D, eps, s)) return -1;
    fk_qkv_epi q = epi(p, a);
    if (a == 1) return fk_qkv_attn(p->dW, p->D, p->dx, eps, &q, p->H, p->dy[1], s);
    if (fk_gemv_qkv(p->dW, p->D, p->dx, 1, eps, p->dg, &q, s)) return -1;
    return fk_attn_decode(p->dq, p->dk[0], p->dv[0], p->seq_stride, p->dseq, p->dpos, p->dg, 1, p->H, p->hd, p->max_ctx,
                          p->work, p->cnt, p->dy[0], s);
}

static int same_dev(const uint16_t *a, const uint16_t *b, size_t n, size_t *first) {
    uint16_t *ha = malloc(n * 2), *hb = malloc(n * 2);
    cudaMemcpy(ha, a, n * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(hb, b, n * 2, cudaMemcpyDeviceToHost);
    size_t i = 0;
    while (i < n && ha[i] == hb[i]) i++;
    *first = i;
    free(ha);
    free(hb);
    return i == n;
}

/* y and both caches of the two arms equal; y finite (no poison left). */
static void compare(shape *p, const char *what, int pos) {
    size_t at;
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s pos %d: %s", what, pos, cudaGetErrorString(cudaGetLastError()));
    CHECK(same_dev(p->dy[0], p->dy[1], (size_t)p->D, &at), "%s H=%d pos %d: y differs first at %zu", what, p->H, pos, at);
    CHECK(same_dev(p->dk[0], p->dk[1], p->kv, &at), "%s H=%d pos %d: k cache differs first at %zu", what, p->H, pos, at);
    CHECK(same_dev(p->dv[0], p->dv[1], p->kv, &at), "%s H=%d pos %d: v cache differs first at %zu", what, p->H, pos, at);
    uint16_t *hy = malloc((size_t)p->D * 2);
    cudaMemcpy(hy, p->dy[1], (size_t)p->D * 2, cudaMemcpyDeviceToHost);
    int finite = 1;
    for (int i = 0; i < p->D; i++) finite &= isfinite(frigg_bf16_to_f32(hy[i])) != 0;
    CHECK(finite, "%s H=%d pos %d: y has NaN/inf (an element not written)", what, p->H, pos);
    free(hy);
}

static void test_positions(int H, int max_ctx, const int *pos, int npos) {
    shape p;
    shape_init(&p, H, 128, max_ctx);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    const float eps = 1e-6f;
    CHECK(fk_qkv_attn_applies(1, p.D, H, 128, max_ctx), "H=%d max_ctx %d: the fused kernel does not apply", H, max_ctx);
    for (int i = 0; i < npos; i++) {
        if (pos[i] >= max_ctx) continue;
        int r0 = run_arm(&p, 0, pos[i], eps, s), r1 = run_arm(&p, 1, pos[i], eps, s);
        CHECK(r0 == 0 && r1 == 0, "H=%d pos %d: launch failed: %s", H, pos[i], frigg_error());
        compare(&p, "eager", pos[i]);
    }
    /* a CUDA-graph replay of the fused arm equals the unfused eager one */
    int gp = pos[npos - 1] < max_ctx ? pos[npos - 1] : max_ctx - 1;
    CHECK(run_arm(&p, 0, gp, eps, s) == 0, "unfused: %s", frigg_error());
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    int rc = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess ? 0 : -1;
    if (!rc) {
        fk_qkv_epi q = epi(&p, 1);
        rc = fk_qkv_attn(p.dW, p.D, p.dx, eps, &q, H, p.dy[1], s);
        rc |= cudaStreamEndCapture(s, &g) != cudaSuccess;
    }
    rc |= !g || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess;
    CHECK(rc == 0, "graph capture of the fused kernel failed: %s", frigg_error());
    if (!rc) {
        cudaMemcpy(p.dk[1], p.hk, p.kv * 2, cudaMemcpyHostToDevice);
        cudaMemcpy(p.dv[1], p.hv, p.kv * 2, cudaMemcpyHostToDevice);
        cudaMemset(p.dy[1], 0xff, (size_t)p.D * 2);
        cudaGraphLaunch(ge, s);
        cudaStreamSynchronize(s);
        compare(&p, "graph", gp);
    }
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    shape_free(&p);
}

/* Settings that rule the kernel out: applies says 0 and a call is an error (the engine then runs the pair). */
static void test_not_applicable(void) {
    const int D = 1536, H = 12;
    CHECK(fk_qkv_attn_applies(1, D, H, 128, 700), "default settings at Mimir's shape: does not apply");
    CHECK(!fk_qkv_attn_applies(2, D, H, 128, 700), "batch 2: applies");
    CHECK(!fk_qkv_attn_applies(1, 768, 12, 64, 700), "head_dim 64: applies");
    CHECK(!fk_qkv_attn_applies(1, 1000, 8, 128, 700), "D != H x head_dim: applies");
    fk_set_gemv_impl(FK_GEMV_IMPL_TC);
    CHECK(!fk_qkv_attn_applies(1, D, H, 128, 700), "tensor-core gqkv forced: applies");
    fk_set_gemv_impl(FK_GEMV_IMPL_SIMT);
    CHECK(fk_qkv_attn_applies(1, D, H, 128, 700), "CUDA-core gqkv forced: does not apply");
    fk_set_gemv_impl(FK_GEMV_IMPL_AUTO);
    fk_set_attn_decode_impl(FK_ATTND_SPLIT, 0);
    CHECK(!fk_qkv_attn_applies(1, D, H, 128, 700), "split attention forced: applies");
    fk_set_attn_decode_impl(FK_ATTND_CLUSTER, 2);
    CHECK(!fk_qkv_attn_applies(1, D, H, 128, 700), "2 splits per block forced: applies");
    fk_set_attn_decode_impl(FK_ATTND_CLUSTER, 0);
    fk_set_attn_decode_tuning(0, 4);
    CHECK(!fk_qkv_attn_applies(1, D, H, 128, 700), "attention launch bounds forced: applies");
    fk_set_attn_decode_tuning(0, 0);
    CHECK(fk_qkv_attn_applies(1, D, H, 128, 700), "cluster attention forced: does not apply");
    fk_set_qkv_attn(0);
    CHECK(!fk_qkv_attn_applies(1, D, H, 128, 700), "FRIGG_QKV_ATTN off: applies");
    shape p;
    shape_init(&p, H, 128, 64);
    fk_qkv_epi q = epi(&p, 1);
    CHECK(fk_qkv_attn(p.dW, p.D, p.dx, 1e-6f, &q, H, p.dy[1], 0) == -1 && strstr(frigg_error(), "qkv_attn"),
          "a call with the fusion off is not an error: %s", frigg_error());
    fk_set_qkv_attn(1);
    fk_set_attn_decode_impl(FK_ATTND_AUTO, 0);
    CHECK(fk_qkv_attn_applies(1, D, H, 128, 700), "defaults restored: does not apply");
    cudaDeviceSynchronize();
    shape_free(&p);
}
#endif

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_qkv_attn");
#ifndef FRIGG_CUDA
    SKIP("built without CUDA (FRIGG_CUDA=0)");
#else
    int major = 0;
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device present");
    } else if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess || major < 9) {
        SKIP("the fused kernel needs thread-block clusters (sm_90); this GPU is sm_%d", major * 10);
    } else {
        CHECK(fk_init() == 0, "fk_init: %s", frigg_error());
        fk_set_gemv_impl(FK_GEMV_IMPL_SIMT); /* the pair the fused kernel must equal: CUDA-core gqkv */
        fk_set_attn_decode_impl(FK_ATTND_CLUSTER, 0);
        /* positions (the new key's; the row has pos + 1 keys): one key, split/round edges at 32 keys, ctx 512 */
        static const int pos[] = {0, 1, 2, 30, 31, 32, 33, 63, 64, 100, 255, 480, 510, 511};
        test_positions(12, 512, pos, (int)(sizeof pos / sizeof pos[0]));
        static const int longpos[] = {0, 511, 512, 700, 1023, 2047, 3000, 4094, 4095};
        if (!th_quick()) {
            test_positions(12, 4096, longpos, (int)(sizeof longpos / sizeof longpos[0]));
            test_positions(2, 700, pos, (int)(sizeof pos / sizeof pos[0]));
            test_positions(1, 96, pos, (int)(sizeof pos / sizeof pos[0]));
        }
        fk_set_gemv_impl(FK_GEMV_IMPL_AUTO);
        fk_set_attn_decode_impl(FK_ATTND_AUTO, 0);
        test_not_applicable();
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "device error: %s", cudaGetErrorString(e));
    }
#endif
    TEST_MAIN_END();
}
