/* attn_decode.cu — microbenchmark of the shipped decode attention (kernels/attention_decode.cu, fk_attn_decode)
 * in each of its settings, set on the program's kernel context (fk_ctx_set_attn_decode_impl): the merge mode
 * ("split": partials through global memory + an atomic counter; "cluster": through a thread-block cluster's
 * distributed shared memory; "auto", the default: cluster where the device runs the kernel's clusters, else
 * split) and the splits per block (":N" fixed, none = the kernel's batch-size policy).
 *
 * For each shape (batch B in {1,2,4,8} x context in {128,512,2048,4096}; B 16, 32, 48 and 64 at ctx 512, 32 at
 * 1024 and 16 at 2048; DFM-Mimir's 12 heads of head_dim 128):
 *  1. correctness: fresh random q, gate, K and V (never zeros), rows at different lengths (row b at
 *     ctx - 37*b), output poisoned with NaN first; every version is run twice (the split counters must be
 *     left at zero) and compared with the CPU reference (tests/attn_decode_ref.h: frigg_cpu_attention, the CPU
 *     engine's arithmetic) under test_cuda_ops's tolerance: a PASS/FAIL line per (version, shape). Then the
 *     kernel's invariances, bit for bit, a "PASS|FAIL bits" line per (version, shape): every splits-per-block
 *     setting of a merge mode gives the bits of the mode's batch-size policy (no suffix), auto those of the
 *     mode it resolves to, and the batch's last row computed alone (B = 1) those of the same row in the batch.
 *  2. timing: one CUDA graph of 128 launches (PDL on, through fk_attn_decode, as the engine launches), launch
 *     i reading its own K/V slot i like the 128 virtual layers of a decode step (so the caches, 128 x 201 MB
 *     at B=8 ctx 4096, are far larger than L2), every row at position ctx-1; median of the timed replays after
 *     warm-up. Prints µs per launch and GB/s (K+V bytes + q, gate and y), then a table of µs per version with
 *     the fastest per shape and how much slower the default (auto) is than it.
 * max_ctx (which sizes the split count) is the shape's ctx, as frigg-bench sets it, unless --max-ctx N.
 * --no-cluster leaves the cluster versions out (and auto where it resolves to cluster); on a device without
 * the kernel's clusters they are left out anyway. Exit 1 on any FAIL.
 * --min-batch N leaves out the shapes of fewer rows.
 * Usage: attn_decode [--quick] [--max-ctx N] [--no-cluster] [--min-batch N]   (--quick: 5 timed replays, not 11) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common.cuh"
#include "dev.cuh"
#include "kernels.h"
#include "../../tests/attn_decode_ref.h"

/* The versions: a merge mode (FK_ATTND_*) and splits per block (0 = the batch-size policy). The first
 * version of each of split and cluster has spb 0: the one the others of its mode must equal bit for bit. */
static const struct {
    const char *name;
    int impl, spb;
} versions[] = {{"split", FK_ATTND_SPLIT, 0},     {"split:1", FK_ATTND_SPLIT, 1},     {"split:2", FK_ATTND_SPLIT, 2},
                {"split:4", FK_ATTND_SPLIT, 4},   {"split:8", FK_ATTND_SPLIT, 8},     {"cluster", FK_ATTND_CLUSTER, 0},
                {"cluster:1", FK_ATTND_CLUSTER, 1}, {"cluster:2", FK_ATTND_CLUSTER, 2}, {"cluster:4", FK_ATTND_CLUSTER, 4},
                {"cluster:8", FK_ATTND_CLUSTER, 8}, {"auto", FK_ATTND_AUTO, 0}};
enum { NVER = sizeof versions / sizeof versions[0], AUTO_V = NVER - 1 };

/* SLOT_ROWS: batch rows x max_ctx a K/V slot holds (batch 8 at 4096, or 64 at 512) */
enum { H = 12, HD = 128, D = H * HD, LAYERS = 128, MAXB = 64, MAXCTX = 4096, SLOT_ROWS = 8 * 4096 };

static fk_ctx *kc;
static int auto_mode; /* the merge mode auto resolves to on this device */

/* The merge mode a version runs (auto resolved). */
static int mode_of(int v) { return versions[v].impl == FK_ATTND_AUTO ? auto_mode : versions[v].impl; }

static int run(int v, const uint16_t *q, const uint16_t *k, const uint16_t *vv, long long ss, const int32_t *rs,
               const int32_t *rp, const uint16_t *g, int B, int mc, float *w, int *c, uint16_t *y, cudaStream_t s) {
    if (fk_ctx_set_attn_decode_impl(kc, versions[v].impl, versions[v].spb)) return -1;
    return fk_attn_decode(kc, q, k, vv, ss, rs, rp, g, B, H, HD, mc, w, c, y, s);
}

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
        const uint32_t h = dev_hash(i, seed);
        float u = (float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f;
        x[i] = f2bf(u * scale);
    }
}


int main(int argc, char **argv) {
    int quick = 0, fixed_max_ctx = 0, no_cluster = 0, min_batch = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--no-cluster"))
            no_cluster = 1;
        else if (!strcmp(argv[i], "--max-ctx") && i + 1 < argc)
            fixed_max_ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-batch") && i + 1 < argc && atoi(argv[i + 1]) >= 1)
            min_batch = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--max-ctx N] [--no-cluster] [--min-batch N]\n", argv[0]);
            return 2;
        }
    }
    if (fixed_max_ctx && (fixed_max_ctx < 4096 || fixed_max_ctx > MAXCTX)) {
        fprintf(stderr, "--max-ctx: only %d (at least the largest shape's ctx, at most what the slots hold)\n", MAXCTX);
        return 2;
    }
    kc = dev_ctx(0);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs; H=%d head_dim=%d, %d launches per graph over %d K/V slots\n", prop.name,
           prop.multiProcessorCount, H, HD, LAYERS, LAYERS);
    if (fk_ctx_set_attn_decode_impl(kc, FK_ATTND_CLUSTER, 0)) {
        printf("no cluster merge on this device (%s): the cluster versions are left out\n", frigg_error());
        no_cluster = 1;
    }
    if (fk_ctx_set_attn_decode_impl(kc, FK_ATTND_AUTO, 0)) {
        fprintf(stderr, "fk_ctx_set_attn_decode_impl(auto): %s\n", frigg_error());
        return 2;
    }
    auto_mode = fk_ctx_attn_decode_impl(kc);
    printf("auto merge mode on this device: %s\n", auto_mode == FK_ATTND_CLUSTER ? "cluster" : "split");
    int skip[NVER];
    for (int v = 0; v < NVER; v++) skip[v] = no_cluster && mode_of(v) == FK_ATTND_CLUSTER;
    /* batch 1..8 at every context; 16..64 at ctx 512 (64: 768 one-block rows of 16 splits are 1.45 waves of the 528
     * blocks 4 per SM hold, benchmarks/h200-2026-12-03/b64prof/attn.txt), 32 at 1024 and 16 at 2048 */
    static const struct {
        int B, ctx;
    } shapes[] = {{1, 128}, {1, 512}, {1, 2048}, {1, 4096}, {2, 128}, {2, 512}, {2, 2048}, {2, 4096}, {4, 128}, {4, 512},
                  {4, 2048}, {4, 4096}, {8, 128}, {8, 512}, {8, 2048}, {8, 4096}, {16, 512}, {32, 512}, {48, 512}, {64, 512}, {32, 1024}, {16, 2048}};
    constexpr int NSHAPE = (int)(sizeof shapes / sizeof shapes[0]);
    const int replays = quick ? 5 : 11, warm = 2;

    /* Device buffers: 128 slots of [B seqs][H][max_ctx][HD] for K and V (the layout any B * max_ctx <= SLOT_ROWS
     * fits in), shared q / gate / y / work / counters like the engine's; y1 for the single-row check. */
    const size_t slot = (size_t)SLOT_ROWS * H * HD;
    uint16_t *kcache, *vcache, *dq, *dg, *dy, *dy1;
    CK(cudaMalloc((void **)&kcache, slot * LAYERS * 2));
    CK(cudaMalloc((void **)&vcache, slot * LAYERS * 2));
    fill_hash<<<4096, 256>>>(kcache, slot * LAYERS, 1u, 2.0f);
    fill_hash<<<4096, 256>>>(vcache, slot * LAYERS, 2u, 1.0f);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMalloc((void **)&dq, (size_t)MAXB * D * 2));
    CK(cudaMalloc((void **)&dg, (size_t)MAXB * 4 * D * 2));
    CK(cudaMalloc((void **)&dy, (size_t)MAXB * D * 2));
    CK(cudaMalloc((void **)&dy1, (size_t)D * 2));
    float *work;
    int *counters;
    int32_t *dseq, *dpos, seqh[MAXB], posh[MAXB];
    CK(cudaMalloc((void **)&work, fk_attn_decode_work_floats(MAXB, H, HD, MAXCTX) * 4));
    CK(cudaMalloc((void **)&counters, (size_t)MAXB * H * 4));
    CK(cudaMemset(counters, 0, (size_t)MAXB * H * 4));
    CK(cudaMalloc((void **)&dseq, sizeof seqh));
    CK(cudaMalloc((void **)&dpos, sizeof posh));
    for (int b = 0; b < MAXB; b++) seqh[b] = b;
    CK(cudaMemcpy(dseq, seqh, sizeof seqh, cudaMemcpyHostToDevice));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    uint16_t *hk = (uint16_t *)malloc(slot * 2), *hv = (uint16_t *)malloc(slot * 2), *hq = (uint16_t *)malloc((size_t)MAXB * D * 2);
    uint16_t *hg = (uint16_t *)malloc((size_t)MAXB * 4 * D * 2), *hy = (uint16_t *)malloc((size_t)MAXB * D * 2);
    uint16_t *hy1 = (uint16_t *)malloc((size_t)D * 2);
    float *ref = (float *)malloc(sizeof(float) * MAXB * D), *got = (float *)malloc(sizeof(float) * MAXB * D);
    static float us[NVER][NSHAPE], gbs[NVER][NSHAPE];
    static uint16_t mode_y[2][MAXB * D]; /* each merge mode's batch-size policy output, for the bits check */
    int fails = 0;
    for (int si = 0; si < NSHAPE; si++) {
        int B = shapes[si].B, ctx = shapes[si].ctx, max_ctx = fixed_max_ctx ? fixed_max_ctx : ctx;
        if (B < min_batch) continue;
        if ((long long)B * max_ctx > SLOT_ROWS) {
            printf("skip B=%d ctx=%d max_ctx=%d: more rows than a slot holds\n", B, ctx, max_ctx);
            continue;
        }
        long long seq_stride = (long long)H * max_ctx * HD;
        /* correctness, on slot 0 (rewritten with host data; the timing below does not depend on values) */
        fill_bf16(hk, (size_t)B * seq_stride, 2.0f);
        fill_bf16(hv, (size_t)B * seq_stride, 1.0f);
        fill_bf16(hq, (size_t)B * D, 2.0f);
        fill_bf16(hg, (size_t)B * 4 * D, 3.0f);
        for (int b = 0; b < B; b++) posh[b] = ctx - 1 - 37 * b > 0 ? ctx - 1 - 37 * b : b;
        CK(cudaMemcpy(kcache, hk, (size_t)B * seq_stride * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(vcache, hv, (size_t)B * seq_stride * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dq, hq, (size_t)B * D * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dg, hg, (size_t)B * 4 * D * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dpos, posh, sizeof posh, cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize());
        attn_decode_ref(hq, hk, hv, seq_stride, seqh, posh, hg, B, H, HD, max_ctx, ref);
        int mode_have[2] = {0, 0}, launch_failed[NVER] = {0};
        for (int v = 0; v < NVER; v++) {
            if (skip[v]) continue;
            CK(cudaMemset(dy, 0xff, (size_t)MAXB * D * 2)); /* NaN: an output not written fails */
            int rc = 0;
            for (int rep = 0; rep < 2 && rc == 0; rep++)
                rc = run(v, dq, kcache, vcache, seq_stride, dseq, dpos, dg, B, max_ctx, work, counters, dy, st);
            CK(cudaStreamSynchronize(st));
            CK(cudaMemcpy(hy, dy, (size_t)B * D * 2, cudaMemcpyDeviceToHost));
            for (int i = 0; i < B * D; i++) got[i] = frigg_bf16_to_f32(hy[i]);
            size_t off = 0, bad = 0;
            double worst = 0;
            int ok = rc == 0 && attn_decode_close(got, ref, (size_t)B * D, 0.02, &off, &bad, &worst);
            fails += !ok;
            launch_failed[v] = rc != 0;
            printf("%s %-11s B=%d ctx=%-4d max_ctx=%-4d: %zu of %d differ, %zu beyond tolerance, worst |d| %.3g%s%s\n",
                   ok ? "PASS" : "FAIL", versions[v].name, B, ctx, max_ctx, off, B * D, bad, worst,
                   rc ? ", launch error: " : "", rc ? frigg_error() : "");
            if (rc) continue;
            /* bits: the mode's batch-size policy output (kept by its first version), and the last row alone */
            const int m = mode_of(v), is_ref = versions[v].impl == m && versions[v].spb == 0;
            if (is_ref) {
                memcpy(mode_y[m], hy, (size_t)B * D * 2);
                mode_have[m] = 1;
            }
            if (is_ref && B == 1) continue; /* nothing to compare */
            const char *why = NULL;
            if (!is_ref && !mode_have[m])
                why = "its mode's batch-size policy did not run";
            else if (!is_ref && memcmp(mode_y[m], hy, (size_t)B * D * 2))
                why = "NOT bit-identical to its mode's batch-size policy";
            if (!why && B > 1) {
                const int b = B - 1;
                CK(cudaMemset(dy1, 0xff, (size_t)D * 2));
                if (run(v, dq + (size_t)b * D, kcache, vcache, seq_stride, dseq + b, dpos + b, dg + (size_t)b * 4 * D, 1,
                        max_ctx, work, counters, dy1, st))
                    why = "the single-row call failed";
                CK(cudaStreamSynchronize(st));
                CK(cudaMemcpy(hy1, dy1, (size_t)D * 2, cudaMemcpyDeviceToHost));
                if (!why && memcmp(hy1, hy + (size_t)b * D, (size_t)D * 2)) why = "last row alone NOT bit-identical to it in the batch";
            }
            fails += why != NULL;
            printf("%s bits %-11s B=%d ctx=%-4d: %s\n", why ? "FAIL" : "PASS", versions[v].name, B, ctx,
                   why ? why : is_ref ? "last row alone bit-identical" : B > 1 ? "bit-identical to its mode's batch-size policy; last row alone too"
                                                                        : "bit-identical to its mode's batch-size policy");
        }
        /* timing: every row at position ctx-1 */
        for (int b = 0; b < B; b++) posh[b] = ctx - 1;
        CK(cudaMemcpy(dpos, posh, sizeof posh, cudaMemcpyHostToDevice));
        double bytes = (double)B * H * ctx * HD * 2 * 2 + (double)B * D * 2 * 3;
        for (int v = 0; v < NVER; v++) {
            us[v][si] = gbs[v][si] = 0;
            if (skip[v] || launch_failed[v]) continue; /* (failed above) */
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            int rc = 0;
            for (int l = 0; l < LAYERS && rc == 0; l++)
                rc = run(v, dq, kcache + (size_t)l * slot, vcache + (size_t)l * slot, seq_stride, dseq, dpos, dg, B, max_ctx,
                         work, counters, dy, st);
            cudaError_t ce = cudaStreamEndCapture(st, &graph);
            if (rc || ce != cudaSuccess) { /* a launch refused inside the capture invalidates it */
                printf("FAIL %s B=%d ctx=%d: capture: %s\n", versions[v].name, B, ctx,
                       rc ? frigg_error() : cudaGetErrorString(ce));
                fails++;
                if (ce == cudaSuccess) CK(cudaGraphDestroy(graph));
                (void)cudaGetLastError();
                continue;
            }
            CK(cudaGraphInstantiate(&exec, graph, 0));
            const float med = dev_graph_median_ms(exec, st, warm, replays);
            float per = med * 1000.0f / LAYERS;
            us[v][si] = per;
            gbs[v][si] = (float)(bytes / (per * 1e-6) / 1e9);
            printf("time %-11s B=%d ctx=%-4d max_ctx=%-4d: %8.2f us/launch %8.1f GB/s (median of %d graphs of %d)\n",
                   versions[v].name, B, ctx, max_ctx, per, gbs[v][si], replays, LAYERS);
            CK(cudaGraphExecDestroy(exec));
            CK(cudaGraphDestroy(graph));
        }
    }
    /* µs per launch; the fastest version of each shape, and the default (auto) against it */
    printf("\n| B | ctx | max_ctx |");
    for (int v = 0; v < NVER; v++) printf(" %s |", versions[v].name);
    printf(" best | best GB/s | auto/best |\n|---|---|---|");
    for (int v = 0; v < NVER; v++) printf("---|");
    printf("---|---|---|\n");
    for (int si = 0; si < NSHAPE; si++) {
        printf("| %d | %d | %d |", shapes[si].B, shapes[si].ctx, fixed_max_ctx ? fixed_max_ctx : shapes[si].ctx);
        int best = -1;
        for (int v = 0; v < NVER; v++) {
            printf(" %.2f |", us[v][si]);
            if (us[v][si] > 0 && (best < 0 || us[v][si] < us[best][si])) best = v;
        }
        if (best < 0)
            printf(" - | - | - |\n");
        else
            printf(" %s | %.0f | %.2fx |\n", versions[best].name, gbs[best][si],
                   us[AUTO_V][si] > 0 ? us[AUTO_V][si] / us[best][si] : 0.0);
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("FAIL device error: %s\n", cudaGetErrorString(e));
        fails++;
    }
    printf("%s: %d failed\n", fails ? "FAIL" : "PASS", fails);
    free(hk); free(hv); free(hq); free(hg); free(hy); free(hy1); free(ref); free(got);
    fk_ctx_free(kc);
    return fails ? 1 : 0;
}
