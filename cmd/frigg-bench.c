/* frigg-bench — speed measurements as JSON lines on stdout (a summary on stderr), every row with the GPU's
 * name, clocks and temperature and the command line that produced it. Modes: vram (copy, pure read, the
 * lm_head GEMV), launch (per kernel launch, per graph node), decode (batch x context: tok/s, GB/s,
 * roofline fraction against the read bandwidth measured in the same run), prefill (tok/s, TFLOP/s),
 * matrix (all of them). Each figure is the median of --repeats runs, with min and max. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "cpu_ops.h"
#include "generate.h"
#include "model.h"
#include "model_random.h"
#include "sampler.h"
#include "util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "../kernels/kernels.h"
#include "cuda_backend.h"
#endif

#define MAXV 16

typedef struct {
    const char *model_dir;
    int random_mimir;
    unsigned long long seed;
    const char *backend;
    int device, repeats, steps;
    int batches[MAXV], nb, ctxs[MAXV], nc, plens[MAXV], np;
    char command[1024];
    double read_gbs; /* from vram, for the roofline */
    int one_step;     /* --one-step: each step collected before the next is submitted */
    int batch_invariant; /* --batch-invariant: frigg_backend_opts.batch_invariant */
    frigg_sampler_params sampling; /* --temperature > 0: decode rows sample on the host from the step's logits */
} opts_t;

static void usage(FILE *f) {
    fprintf(f,
            "usage: frigg-bench [options] MODE...\n"
            "modes: vram launch decode prefill matrix (= all four)\n"
            "  -m, --model DIR        checkpoint directory\n"
            "      --random-mimir     a random model with DFM-Mimir's exact shapes, made in memory (no file)\n"
            "      --seed S           seed of --random-mimir (default 1)\n"
            "  -b, --backend NAME     cuda (default when a GPU is present) or cpu\n"
            "  -d, --device N         CUDA device (default 0)\n"
            "  -r, --repeats N        repeats per cell, median reported (default 3, at least 3)\n"
            "      --steps N          decode steps per repeat (default 32)\n"
            "      --batch LIST       decode batch sizes (default 1,4,8)\n"
            "      --ctx LIST         decode context lengths (default 512,2048,4096)\n"
            "      --prefill LIST     prefill lengths (default 1024,4096)\n"
            "      --batch-invariant  the engine as frigg-run --batch-invariant runs it (rows say which GEMV ran)\n"
            "      --one-step         decode one step per call, each step's ids back on the host before the next is\n"
            "                         queued, instead of two greedy steps queued (where the engine can: step k+1\n"
            "                         takes step k's ids on the device, queued before they are back on the host)\n"
            "      --temperature T    decode rows sample (T > 0) as frigg-run does: each step's logits back on the host\n"
            "                         (with top-k, only the k largest where the backend can), one sampler per sequence\n"
            "                         (default 0: greedy on the device)\n"
            "      --top-k K, --top-p P  the samplers' top-k (0 = off) and top-p (1 = off); need --temperature > 0\n"
            "  -h, --help, --version\n"
            "Output: one JSON object per line on stdout; a summary on stderr.\n");
}

static int parse_list(const char *s, int *out, const char *what) {
    int n = 0;
    char *dup = frigg_xstrdup(s), *save = NULL;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || v < 1 || v > 1 << 20 || n == MAXV) {
            fprintf(stderr, "frigg-bench: bad %s list \"%s\"\n", what, s);
            free(dup);
            exit(2);
        }
        out[n++] = (int)v;
    }
    free(dup);
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
typedef struct {
    double med, min, max;
} stat3;
static stat3 stats(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    stat3 s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}

/* GPU name, SM/memory clock (MHz) and temperature (C), read now, through nvidia-smi (part of the driver). */
static void gpu_state(const opts_t *o, char *out, size_t n) {
    char cmd[160], line[256] = "";
    snprintf(cmd, sizeof cmd,
             "nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader,nounits -i %d "
             "2>/dev/null", o->device);
    FILE *p = popen(cmd, "r");
    if (p) {
        if (!fgets(line, sizeof line, p)) line[0] = 0;
        pclose(p);
    }
    char name[128] = "unknown";
    int sm = -1, mem = -1, temp = -1;
    char *f[4] = {0};
    int k = 0;
    for (char *save = NULL, *t = strtok_r(line, ",\n", &save); t && k < 4; t = strtok_r(NULL, ",\n", &save)) f[k++] = t;
    if (k == 4) {
        while (*f[0] == ' ') f[0]++;
        snprintf(name, sizeof name, "%s", f[0]);
        sm = atoi(f[1]);
        mem = atoi(f[2]);
        temp = atoi(f[3]);
    } else if (!strcmp(o->backend, "cpu")) {
        snprintf(name, sizeof name, "cpu");
    }
    snprintf(out, n, "\"gpu\":\"%s\",\"sm_clock_mhz\":%d,\"mem_clock_mhz\":%d,\"temp_c\":%d", name, sm, mem, temp);
}

/* Which decode GEMV, decode attention merge and prefill attention the engine's kernels ran (its own kernel
 * context), so that every row says what it measured; empty for the CPU engine. */
static void kernels_text(frigg_backend *b, char *out, size_t n) {
    out[0] = 0;
#ifdef FRIGG_CUDA
    if (!strcmp(b->name, "cuda")) {
        const struct fk_ctx *kc = frigg_cuda_kernels(b);
        snprintf(out, n, ",\"gemv_impl\":\"%s\",\"attn_decode\":\"%s\",\"prefill_attn\":\"%s\"",
                 fk_gemv_impl_name(fk_ctx_gemv_impl(kc)),
                 fk_ctx_attn_decode_impl(kc) == FK_ATTND_CLUSTER ? "cluster" : "split",
                 fk_prefill_impl_name(fk_ctx_prefill_impl(kc)));
    }
#else
    (void)b;
    (void)n;
#endif
}

static void emit(const opts_t *o, const char *body) {
    char g[256];
    gpu_state(o, g, sizeof g);
    printf("{%s,%s,\"repeats\":%d,\"command\":\"%s\"}\n", body, g, o->repeats, o->command);
    fflush(stdout);
}

#ifdef FRIGG_CUDA
static float time_events(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    return ms;
}

static int bench_vram(opts_t *o) {
    size_t bytes = (size_t)2 << 30;
    void *src = NULL, *dst = NULL;
    unsigned *sink = NULL;
    cudaSetDevice(o->device);
    fk_ctx *kc = fk_ctx_create();
    if (!kc) {
        fprintf(stderr, "frigg-bench: vram: %s\n", frigg_error());
        return -1;
    }
    if (cudaMalloc(&src, bytes) || cudaMalloc(&dst, bytes) || cudaMalloc((void **)&sink, 4)) {
        fprintf(stderr, "frigg-bench: vram: cannot allocate 2 x 2 GiB on device %d\n", o->device);
        return -1;
    }
    cudaMemset(src, 1, bytes);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double copy[32], rd[32], gv[32];
    int V = 262144, K = 1536;
    uint16_t *x = dst, *y = (uint16_t *)((char *)dst + 4096);
    const frigg_mat W = {.w = src, .rows = V, .cols = K, .dtype = FRIGG_DT_BF16, .scales = NULL, .group = 0};
    fk_gemv(kc, &W, x, 1, 0, 0, FK_GEMV_STORE, y, 0); /* warm-up */
    fk_read_probe(kc, src, bytes, sink, 0);
    for (int r = 0; r < o->repeats; r++) {
        cudaEventRecord(e0, 0);
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(e1, 0);
        copy[r] = 2.0 * bytes / (time_events(e0, e1) * 1e-3) / 1e9; /* read + write */
        /* An untimed probe first: the copy's writes still draining from L2 slowed the timed one by 1-5 %
         * (4,260-4,303 GB/s here against 4,432-4,488 for the same kernel in dev/vram, which runs it back to
         * back: benchmarks/h200-2026-11-30/dev-vram-*.txt and the frigg-bench vram rows beside them) */
        fk_read_probe(kc, src, bytes, sink, 0);
        cudaEventRecord(e0, 0);
        fk_read_probe(kc, src, bytes, sink, 0);
        cudaEventRecord(e1, 0);
        rd[r] = bytes / (time_events(e0, e1) * 1e-3) / 1e9;
        cudaEventRecord(e0, 0);
        for (int i = 0; i < 10; i++) fk_gemv(kc, &W, x, 1, 0, 0, FK_GEMV_STORE, y, 0);
        cudaEventRecord(e1, 0);
        gv[r] = 10.0 * V * K * 2 / (time_events(e0, e1) * 1e-3) / 1e9;
    }
    stat3 c = stats(copy, o->repeats), rs = stats(rd, o->repeats), g = stats(gv, o->repeats);
    /* The roofline's bandwidth: the faster of the probe and the lm_head GEMV, so that no kernel of ours is ever
     * measured reading faster than the roofline it is judged against. */
    o->read_gbs = rs.med > g.med ? rs.med : g.med;
    char body[512];
    snprintf(body, sizeof body, "\"bench\":\"vram\",\"test\":\"d2d_copy\",\"bytes\":%zu,\"gb_s\":%.1f,\"gb_s_min\":%.1f,\"gb_s_max\":%.1f,\"note\":\"read+write counted\"", bytes, c.med, c.min, c.max);
    emit(o, body);
    snprintf(body, sizeof body, "\"bench\":\"vram\",\"test\":\"read\",\"bytes\":%zu,\"gb_s\":%.1f,\"gb_s_min\":%.1f,\"gb_s_max\":%.1f", bytes, rs.med, rs.min, rs.max);
    emit(o, body);
    snprintf(body, sizeof body, "\"bench\":\"vram\",\"test\":\"gemv_lm_head\",\"shape\":[262144,1536],\"gb_s\":%.1f,\"gb_s_min\":%.1f,\"gb_s_max\":%.1f", g.med, g.min, g.max);
    emit(o, body);
    snprintf(body, sizeof body, "\"bench\":\"vram\",\"test\":\"roofline_read\",\"gb_s\":%.1f,\"from\":\"%s\"", o->read_gbs,
             rs.med > g.med ? "read" : "gemv_lm_head");
    emit(o, body);
    fprintf(stderr, "vram: copy %.0f GB/s, read %.0f GB/s, lm_head GEMV %.0f GB/s; roofline read %.0f GB/s\n", c.med,
            rs.med, g.med, o->read_gbs);
    cudaFree(src);
    cudaFree(dst);
    cudaFree(sink);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    fk_ctx_free(kc);
    return 0;
}

static int bench_launch(opts_t *o) {
    cudaSetDevice(o->device);
    fk_ctx *kc = fk_ctx_create();
    if (!kc) {
        fprintf(stderr, "frigg-bench: launch: %s\n", frigg_error());
        return -1;
    }
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int N = 2000;
    double lv[32], gv[32];
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    for (int i = 0; i < N; i++) fk_empty(kc, s);
    cudaStreamEndCapture(s, &g);
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
        fprintf(stderr, "frigg-bench: launch: graph instantiation failed\n");
        return -1;
    }
    cudaGraphLaunch(ge, s);
    cudaStreamSynchronize(s);
    for (int r = 0; r < o->repeats; r++) {
        double t0 = frigg_now_ms();
        for (int i = 0; i < N; i++) fk_empty(kc, s);
        cudaStreamSynchronize(s);
        lv[r] = (frigg_now_ms() - t0) * 1e3 / N;
        t0 = frigg_now_ms();
        cudaGraphLaunch(ge, s);
        cudaStreamSynchronize(s);
        gv[r] = (frigg_now_ms() - t0) * 1e3 / N;
    }
    stat3 l = stats(lv, o->repeats), gg = stats(gv, o->repeats);
    char body[512];
    snprintf(body, sizeof body, "\"bench\":\"launch\",\"test\":\"stream_launch\",\"kernels\":%d,\"us_per_kernel\":%.3f,\"us_min\":%.3f,\"us_max\":%.3f", N, l.med, l.min, l.max);
    emit(o, body);
    snprintf(body, sizeof body, "\"bench\":\"launch\",\"test\":\"graph_node\",\"kernels\":%d,\"us_per_kernel\":%.3f,\"us_min\":%.3f,\"us_max\":%.3f", N, gg.med, gg.min, gg.max);
    emit(o, body);
    fprintf(stderr, "launch: %.2f us per stream launch, %.2f us per graph node\n", l.med, gg.med);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    fk_ctx_free(kc);
    return 0;
}
#endif

static frigg_backend *make_backend(const opts_t *o, const frigg_model *m, int seqs, int ctx) {
    frigg_backend_opts bo = {.device = o->device, .max_seqs = seqs, .max_ctx = ctx, .batch_invariant = o->batch_invariant};
    frigg_backend *b = frigg_backend_create(o->backend, m, &bo);
    if (!b) fprintf(stderr, "frigg-bench: backend %s: %s\n", o->backend, frigg_error());
    return b;
}

static void random_ids(int32_t *ids, int n, int V, unsigned long long *s) {
    for (int i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = 3 + (int)((*s >> 33) % (unsigned long long)(V - 3));
    }
}

/* Weight bytes one decode step streams: every layer of each run, plus lm_head (embedding rows ignored). */
static double weight_bytes(const frigg_config *c) {
    double D = c->hidden_size, I = c->intermediate_size;
    return (double)frigg_num_runs(c) * c->layers_per_stack * (5 * D * D + 3 * I * D) * 2 + (double)c->vocab_size * D * 2;
}

static int bench_decode(opts_t *o, const frigg_model *m) {
    const frigg_config *c = &m->cfg;
    int maxb = 1;
    for (int i = 0; i < o->nb; i++) maxb = o->batches[i] > maxb ? o->batches[i] : maxb;
    if (maxb > 8) {
        fprintf(stderr, "frigg-bench: batch sizes are 1..8\n");
        return -1;
    }
    unsigned long long rs = o->seed * 7919 + 1;
    for (int ci = 0; ci < o->nc; ci++) {
        int ctx = o->ctxs[ci], n0 = ctx - o->steps;
        if (n0 < 1 || ctx > c->max_position_embeddings) {
            fprintf(stderr, "frigg-bench: context %d does not fit %d steps within max_position_embeddings %d\n", ctx,
                    o->steps, c->max_position_embeddings);
            return -1;
        }
        frigg_backend *b = make_backend(o, m, maxb, ctx);
        if (!b) return -1;
        int32_t *ids = frigg_xmalloc(sizeof(int32_t) * n0);
        for (int s = 0; s < maxb; s++) {
            random_ids(ids, n0, c->vocab_size, &rs);
            if (frigg_prefill(b, s, ids, n0, n0, NULL, NULL)) {
                fprintf(stderr, "frigg-bench: prefill: %s\n", frigg_error());
                return -1;
            }
        }
        for (int bi = 0; bi < o->nb; bi++) {
            int B = o->batches[bi];
            int32_t tok[8], out_id[2][8];
            const int sampled = o->sampling.temperature > 0;
            /* greedy: only ids come back; a top-k draw: only the k largest logits (as in frigg-run); else rows */
            const int topk = sampled ? frigg_sampler_topk_only(&o->sampling, c->vocab_size) : 0;
            float *logits = sampled && !topk ? frigg_xmalloc(sizeof(float) * B * c->vocab_size) : NULL;
            float *vals = topk ? frigg_xmalloc(sizeof(float) * B * topk) : NULL;
            int32_t *cand = topk ? frigg_xmalloc(sizeof(int32_t) * B * topk) : NULL;
            /* greedy steps queued two deep where the engine can: step k+1 takes step k's ids on the device */
            int pipelined = !sampled && !o->one_step && b->max_inflight >= 2;
            frigg_sampler smp[8];
            for (int i = 0; i < B && sampled; i++) {
                frigg_sampler_params sp = o->sampling;
                sp.seed = o->seed + (unsigned long long)i;
                frigg_sampler_init(&smp[i], &sp, c->vocab_size);
            }
            for (int i = 0; i < B; i++) tok[i] = 5 + i;
            frigg_row rows[2][8];
            double v[32];
            for (int r = -1; r < o->repeats; r++) { /* r = -1: warm-up (graph capture) */
                for (int i = 0; i < B; i++) /* rewind: the same positions every repeat */
                    if (b->seq_fork(b, i, i, n0)) {
                        fprintf(stderr, "frigg-bench: rewind: %s\n", frigg_error());
                        return -1;
                    }
                double t0 = frigg_now_ms();
                for (int st = 0; st < o->steps; st++) {
                    frigg_row *row = rows[st & 1];
                    for (int i = 0; i < B; i++) {
                        row[i] = (frigg_row){.seq = i, .n = 1, .token = pipelined && st > 0 ? FRIGG_TOKEN_LAST_GREEDY : tok[i],
                                             .want = !sampled ? FRIGG_WANT_GREEDY : topk ? FRIGG_WANT_TOPK : FRIGG_WANT_LOGITS,
                                             .k = topk, .out_id = &out_id[st & 1][i],
                                             .out_vals = vals ? vals + (size_t)i * topk : NULL,
                                             .out_ids = cand ? cand + (size_t)i * topk : NULL,
                                             .out_logits = logits ? logits + (size_t)i * c->vocab_size : NULL};
                    }
                    int rc = b->submit(b, row, B);
                    if (!rc && (!pipelined || st > 0)) rc = b->collect(b); /* pipelined: collects step st - 1 */
                    if (!rc && pipelined && st == o->steps - 1) rc = b->collect(b);
                    if (rc) {
                        fprintf(stderr, "frigg-bench: decode: %s\n", frigg_error());
                        return -1;
                    }
                    for (int i = 0; i < B && !pipelined; i++) {
                        if (!sampled) tok[i] = out_id[st & 1][i];
                        else if (topk) tok[i] = frigg_sample_topk(&smp[i], vals + (size_t)i * topk, cand + (size_t)i * topk, topk);
                        else tok[i] = frigg_sample(&smp[i], logits + (size_t)i * c->vocab_size, NULL, 0);
                    }
                }
                if (r >= 0) v[r] = (frigg_now_ms() - t0) / o->steps; /* ms per step */
                if (r == -1 && b->seq_len(b, 0) != n0 + o->steps) {
                    fprintf(stderr, "frigg-bench: decode: sequence 0 holds %d tokens after the warm-up, expected %d\n",
                            b->seq_len(b, 0), n0 + o->steps);
                    return -1;
                }
            }
            free(vals);
            free(cand);
            free(logits);
            for (int i = 0; i < B && sampled; i++) frigg_sampler_free(&smp[i]);
            stat3 ms = stats(v, o->repeats);
            double avg_ctx = n0 + o->steps / 2.0;
            double kv_bytes = (double)B * c->num_slots * avg_ctx * c->hidden_size * 2 * 2;
            double bytes = weight_bytes(c) + kv_bytes;
            double gbs = bytes / (ms.med * 1e-3) / 1e9;
            char body[1024], roof[96] = "", smp_text[96] = "\"greedy\"", ktext[160];
            kernels_text(b, ktext, sizeof ktext);
            if (sampled)
                snprintf(smp_text, sizeof smp_text, "{\"temperature\":%g,\"top_k\":%d,\"top_p\":%g,\"topk_on_device\":%s}",
                         o->sampling.temperature, o->sampling.top_k, o->sampling.top_p, topk ? "true" : "false");
            if (o->read_gbs > 0)
                snprintf(roof, sizeof roof, ",\"read_gb_s\":%.1f,\"roofline_frac\":%.3f,\"roofline_tok_s\":%.1f", o->read_gbs,
                         gbs / o->read_gbs, B * o->read_gbs * 1e9 / bytes);
            int kps = -1;
#ifdef FRIGG_CUDA
            if (!strcmp(b->name, "cuda")) kps = frigg_cuda_kernels_per_step(b, B);
#endif
            snprintf(body, sizeof body,
                     "\"bench\":\"decode\",\"backend\":\"%s\",\"batch\":%d,\"ctx\":%d,\"steps\":%d,\"tok_s\":%.1f,"
                     "\"tok_s_min\":%.1f,\"tok_s_max\":%.1f,\"ms_per_step\":%.3f,\"bytes_per_step\":%.0f,\"gb_s\":%.1f%s,"
                     "\"kernels_per_step\":%d,\"pipelined\":%s,\"sampling\":%s%s",
                     b->name, B, ctx, o->steps, B * 1e3 / ms.med, B * 1e3 / ms.max, B * 1e3 / ms.min, ms.med, bytes, gbs,
                     roof, kps, pipelined ? "true" : "false", smp_text, ktext);
            emit(o, body);
            fprintf(stderr, "decode batch %d ctx %d: %.1f tok/s (%.3f ms/step, %.0f GB/s%s)\n", B, ctx, B * 1e3 / ms.med,
                    ms.med, gbs, o->read_gbs > 0 ? ", see roofline_frac" : "");
        }
        free(ids);
        frigg_backend_destroy(b);
    }
    return 0;
}

static int bench_prefill(opts_t *o, const frigg_model *m) {
    const frigg_config *c = &m->cfg;
    int maxT = 1;
    for (int i = 0; i < o->np; i++) maxT = o->plens[i] > maxT ? o->plens[i] : maxT;
    if (maxT > c->max_position_embeddings) {
        fprintf(stderr, "frigg-bench: prefill length %d > max_position_embeddings %d\n", maxT, c->max_position_embeddings);
        return -1;
    }
    frigg_backend *b = make_backend(o, m, 1, maxT);
    if (!b) return -1;
    unsigned long long rs = o->seed * 104729 + 3;
    int32_t *ids = frigg_xmalloc(sizeof(int32_t) * maxT);
    float *logits = frigg_xmalloc(sizeof(float) * c->vocab_size);
    for (int pi = 0; pi < o->np; pi++) {
        int T = o->plens[pi];
        random_ids(ids, T, c->vocab_size, &rs);
        double v[32];
        for (int r = -1; r < o->repeats; r++) {
            double t0 = frigg_now_ms();
            if (frigg_prefill(b, 0, ids, T, T, logits, NULL)) {
                fprintf(stderr, "frigg-bench: prefill: %s\n", frigg_error());
                return -1;
            }
            if (r >= 0) v[r] = frigg_now_ms() - t0;
        }
        stat3 ms = stats(v, o->repeats);
        double D = c->hidden_size, layers = (double)frigg_num_runs(c) * c->layers_per_stack;
        /* Useful FLOPs: the projections of every token, attention over the whole (bidirectional) prompt,
         * lm_head of the last row. */
        double flops = 2.0 * T * layers * (5 * D * D + 3 * c->intermediate_size * D) + layers * 4.0 * T * (double)T * D +
                       2.0 * c->vocab_size * D;
        char body[640], ktext[160];
        kernels_text(b, ktext, sizeof ktext);
        snprintf(body, sizeof body,
                 "\"bench\":\"prefill\",\"backend\":\"%s\",\"tokens\":%d,\"tok_s\":%.0f,\"tok_s_min\":%.0f,\"tok_s_max\":%.0f,"
                 "\"ms\":%.2f,\"tflop_s\":%.1f%s",
                 b->name, T, T * 1e3 / ms.med, T * 1e3 / ms.max, T * 1e3 / ms.min, ms.med, flops / (ms.med * 1e-3) / 1e12,
                 ktext);
        emit(o, body);
        fprintf(stderr, "prefill %d tokens: %.0f tok/s (%.1f ms, %.1f TFLOP/s)\n", T, T * 1e3 / ms.med, ms.med,
                flops / (ms.med * 1e-3) / 1e12);
    }
    free(ids);
    free(logits);
    frigg_backend_destroy(b);
    return 0;
}

int main(int argc, char **argv) {
    opts_t o = {.seed = 1, .backend = "auto", .repeats = 3, .steps = 32, .sampling = {.top_p = 1, .repetition_penalty = 1}};
    o.nb = parse_list("1,4,8", o.batches, "batch");
    o.nc = parse_list("512,2048,4096", o.ctxs, "ctx");
    o.np = parse_list("1024,4096", o.plens, "prefill");
    /* The command line, JSON-escaped, goes into every row. */
    size_t at = 0;
    for (int i = 0; i < argc && at < sizeof o.command - 8; i++)
        for (const char *p = i ? argv[i] : "frigg-bench", *q = p; *q && at < sizeof o.command - 8; q++) {
            if (q == p && i) o.command[at++] = ' ';
            if (*q == '"' || *q == '\\') o.command[at++] = '\\';
            o.command[at++] = (char)((unsigned char)*q < 32 ? ' ' : *q);
        }
    static const struct option lo[] = {{"model", 1, 0, 'm'},   {"random-mimir", 0, 0, 'R'}, {"seed", 1, 0, 'S'},
                                       {"backend", 1, 0, 'b'}, {"device", 1, 0, 'd'},       {"repeats", 1, 0, 'r'},
                                       {"steps", 1, 0, 's'},   {"batch", 1, 0, 'B'},        {"ctx", 1, 0, 'C'},
                                       {"prefill", 1, 0, 'P'}, {"help", 0, 0, 'h'},         {"version", 0, 0, 'V'},
                                       {"one-step", 0, 0, 'O'},     {"temperature", 1, 0, 'T'},
                                       {"batch-invariant", 0, 0, 'I'},
                                       {"top-k", 1, 0, 'k'},   {"top-p", 1, 0, 'p'},        {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "m:b:d:r:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o.model_dir = optarg; break;
        case 'R': o.random_mimir = 1; break;
        case 'S': o.seed = strtoull(optarg, NULL, 10); break;
        case 'b': o.backend = optarg; break;
        case 'd':
        case 'r':
        case 's': {
            double v;
            const char *name = ch == 'd' ? "--device" : ch == 'r' ? "--repeats" : "--steps";
            if (frigg_cli_number("frigg-bench", name, optarg, 0, 1 << 20, 1, &v)) return 2;
            if (ch == 'd') o.device = (int)v;
            else if (ch == 'r') o.repeats = (int)v;
            else o.steps = (int)v;
            break;
        }
        case 'B': o.nb = parse_list(optarg, o.batches, "batch"); break;
        case 'C': o.nc = parse_list(optarg, o.ctxs, "ctx"); break;
        case 'P': o.np = parse_list(optarg, o.plens, "prefill"); break;
        case 'O': o.one_step = 1; break;
        case 'I': o.batch_invariant = 1; break;
        case 'T':
        case 'k':
        case 'p': {
            double v;
            const char *name = ch == 'T' ? "--temperature" : ch == 'k' ? "--top-k" : "--top-p";
            if (frigg_cli_number("frigg-bench", name, optarg, ch == 'p' ? 1e-9 : 0, ch == 'T' ? 100 : ch == 'k' ? 1 << 20 : 1,
                                 ch == 'k', &v))
                return 2;
            if (ch == 'T') o.sampling.temperature = (float)v;
            else if (ch == 'k') o.sampling.top_k = (int)v;
            else o.sampling.top_p = (float)v;
            break;
        }
        case 'h': usage(stdout); return 0;
        case 'V': frigg_print_version("frigg-bench"); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (o.sampling.temperature <= 0 && (o.sampling.top_k > 0 || o.sampling.top_p < 1)) {
        fprintf(stderr, "frigg-bench: --top-k and --top-p need --temperature > 0\n");
        return 2;
    }
    if (o.repeats < 3 || o.repeats > 32 || o.steps < 1 || o.steps > 4096) {
        fprintf(stderr, "frigg-bench: --repeats must be 3..32 and --steps 1..4096\n");
        return 2;
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    int want[4] = {0}; /* vram launch decode prefill */
    for (int i = optind; i < argc; i++) {
        if (!strcmp(argv[i], "vram")) want[0] = 1;
        else if (!strcmp(argv[i], "launch")) want[1] = 1;
        else if (!strcmp(argv[i], "decode")) want[2] = 1;
        else if (!strcmp(argv[i], "prefill")) want[3] = 1;
        else if (!strcmp(argv[i], "matrix")) want[0] = want[1] = want[2] = want[3] = 1;
        else {
            fprintf(stderr, "frigg-bench: unknown mode \"%s\" (vram, launch, decode, prefill, matrix)\n", argv[i]);
            return 2;
        }
    }
#ifdef FRIGG_CUDA
    if (!strcmp(o.backend, "auto")) o.backend = frigg_cuda_device_count() > 0 ? "cuda" : "cpu";
#else
    if (!strcmp(o.backend, "auto")) o.backend = "cpu";
#endif
    if ((want[0] || want[1]) && strcmp(o.backend, "cuda")) {
        fprintf(stderr, "frigg-bench: vram and launch measure a GPU: they need --backend cuda and a CUDA build\n");
        return 2;
    }
    int rc = 0;
#ifdef FRIGG_CUDA
    if (want[0] || (want[2] && !strcmp(o.backend, "cuda"))) rc |= bench_vram(&o); /* decode's roofline needs it */
    if (want[1]) rc |= bench_launch(&o);
#endif
    if (want[2] || want[3]) {
        if (!!o.model_dir == !!o.random_mimir) {
            fprintf(stderr, "frigg-bench: decode and prefill need exactly one of --model DIR and --random-mimir\n");
            return 2;
        }
        frigg_model *m;
        double t0 = frigg_now_ms();
        if (o.random_mimir) {
            frigg_config c;
            frigg_config_mimir(&c);
            m = frigg_model_random(&c, o.seed, 8.0f);
        } else {
            m = frigg_model_load(o.model_dir);
        }
        if (!m) {
            fprintf(stderr, "frigg-bench: %s\n", frigg_error());
            return 1;
        }
        fprintf(stderr, "model: %llu parameters (%s), ready in %.1f s\n", (unsigned long long)m->n_params,
                o.random_mimir ? "random, DFM-Mimir shapes" : o.model_dir, (frigg_now_ms() - t0) / 1e3);
        if (want[2]) rc |= bench_decode(&o, m);
        if (want[3]) rc |= bench_prefill(&o, m);
        frigg_model_free(m);
    }
    return rc ? 1 : 0;
}
