/* frigg-bench — speed measurements as JSON lines on stdout (a summary on stderr), every row with the GPU's
 * name, clocks and temperature and the command line that produced it. Modes: vram (copy, pure read, the
 * lm_head GEMV), launch (per kernel launch, per graph node), decode (batch x context: tok/s, GB/s,
 * roofline fraction against the read bandwidth measured in the same run), prefill (tok/s, TFLOP/s),
 * matrix (all of them; with --builds DIR,DIR,...: the decode cells of several builds, alternated cell by cell, each
 * run after the GPU has cooled to --cooldown-c). Each figure is the median of --repeats runs, with min and max. And
 * load: a load
 * generator against an OpenAI-compatible HTTP server (frigg-serve, vLLM, llama.cpp), N streams of streamed
 * requests back to back through libcurl's multi interface, TTFT / time per output token / end-to-end
 * latency percentiles and errors by kind in one row. */
#include <curl/curl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/backend.h"
#include "run/cli.h"
#include "engine/cpu_ops.h"
#include "run/generate.h"
#include "run/memcheck.h"
#include "run/progress.h"
#include "base/gpu_state.h"
#include "model/model.h"
#include "model/model_random.h"
#include "engine/sampler.h"
#include "base/util.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "../kernels/kernels.h"
#include "engine/cuda_backend.h"
#endif

#define BENCH_MAX_BATCH 64 /* the CUDA engine's rows per step */
#define MAXV 16
#define MAX_BUILDS 8
#define COOLDOWN_MAX_S 1800 /* --cooldown-c: a GPU still above C after this long is an error, not an endless wait */

typedef struct {
    const char *model_dir;
    int random_mimir;
    unsigned long long seed;
    const char *backend;
    int device, repeats, steps;
    int batches[MAXV], nb, ctxs[MAXV], nc, plens[MAXV], np;
    int ctx_given, prefill_given; /* --ctx, --prefill given: else the defaults, clipped to the model (clip_defaults) */
    char command[1024];
    double read_gbs; /* from vram, for the roofline */
    int one_step;     /* --one-step: each step collected before the next is submitted */
    int batch_invariant; /* --batch-invariant: frigg_backend_opts.batch_invariant */
    int dequant_rows;    /* --dequant-rows: frigg_backend_opts.dequant_rows (0: the default) */
    int progress;        /* --progress: each measurement's progress line kept current whatever stderr is */
    frigg_sampler_params sampling; /* --temperature > 0: decode rows sample on the host from the step's logits */
    frigg_dtype kvs[4];  /* --kv-dtypes: the decode cells' KV-cache element types (default bf16) */
    int nkv;
    const char *builds[MAX_BUILDS]; /* matrix --builds: model directories measured alternately */
    char builds_list[4096];         /* --builds' argument, cut at its commas: builds[] point into it */
    int nbuilds;
    double cooldown_c;   /* matrix --builds --cooldown-c C: wait for the GPU at or below C before each run (< 0: none) */
    /* load */
    int load;                     /* the load mode: rows measure a server, not an engine of this process */
    const char *url, *api_key, *served_model, *endpoint;
    int streams, prompt_tokens, max_tokens;
    long long requests;           /* --requests R (0: --duration-s) */
    double duration_s, timeout_s;
} opts_t;

static void usage(FILE *f) {
    fprintf(f,
            "usage: frigg-bench [options] MODE...\n"
            "modes: vram launch decode prefill matrix (= all four; with --builds: decode of each build); load (alone: an HTTP\n"
            "       server, see below); grammar SCHEMA_FILE... (alone: see below)\n"
            "  -m, --model DIR        checkpoint directory\n"
            "      --random-mimir     a random model with DFM-Mimir's exact shapes, made in memory (no file)\n"
            "      --seed S           seed of --random-mimir (default 1)\n"
            "  -b, --backend NAME     cuda (default when a GPU is present) or cpu\n"
            "  -d, --device N         CUDA device (default 0)\n"
            "  -r, --repeats N        repeats per cell, median reported (default 3, at least 3)\n"
            "      --steps N          decode steps per repeat (default 32)\n"
            "      --progress         each decode and prefill measurement's progress line on stderr kept current, as\n"
            "                         on a terminal (else one every 30 s)\n"
            "      --batch LIST       decode batch sizes, 1..64 (default 1,4,8)\n"
            "      --ctx LIST         decode context lengths (default 512,2048,4096)\n"
            "      --prefill LIST     prefill lengths (default 1024,4096)\n"
            "      --batch-invariant  the engine as frigg-run --batch-invariant runs it (rows say which GEMV ran)\n"
            "      --dequant-rows N|off  a quantized build's bf16 copy as frigg-run --dequant-rows takes it (rows say\n"
            "                         whether a step read it: decode_weights)\n"
            "      --one-step         decode one step per call, each step's ids back on the host before the next is\n"
            "                         queued, instead of two greedy steps queued (where the engine can: step k+1\n"
            "                         takes step k's ids on the device, queued before they are back on the host)\n"
            "      --temperature T    decode rows sample (T > 0) as frigg-run does: each step's logits back on the host\n"
            "                         (with top-k, only the k largest where the backend can), one sampler per sequence\n"
            "                         (default 0: greedy on the device)\n"
            "      --top-k K, --top-p P  the samplers' top-k (0 = off) and top-p (1 = off); need --temperature > 0\n"
            "      --kv-dtype LIST, --kv-dtypes LIST  decode KV-cache types, bf16 and/or int8 (default bf16)\n"
            "      --builds DIR,DIR,...  with matrix: the decode cells (batch x ctx x kv dtype) of each build, the builds\n"
            "                         alternated cell by cell; rows carry build, kv_dtype, temperatures, bytes_per_step\n"
            "      --cooldown-c C     with matrix --builds: before each build's run of a cell wait until the GPU is at or\n"
            "                         below C degrees C (an error where its temperature cannot be read)\n"
            "  -h, --help, --version\n"
            "load: frigg-bench load --url URL --streams N (--duration-s S | --requests R) --prompt-tokens P\n"
            "                       --max-tokens M [--api-key KEY] [--model NAME] [--endpoint completions|chat]\n"
            "                       [--seed S] [--temperature T] [--timeout-s T]\n"
            "      --url URL          an OpenAI-compatible server (http://host:port; a trailing /v1 is dropped)\n"
            "      --streams N        concurrent streams, each sending its requests back to back\n"
            "      --duration-s S     start no request after S seconds (running ones finish and count)\n"
            "      --requests R       exactly R requests in all\n"
            "      --prompt-tokens P  prompt length: P random token ids (completions) or about P words (chat)\n"
            "      --max-tokens M     max_tokens of every request\n"
            "      --api-key KEY      Authorization: Bearer KEY (default: $FRIGG_API_KEY)\n"
            "  -m, --model NAME       the served model's name (default: the first id of GET URL/v1/models)\n"
            "      --endpoint E       completions (default: /v1/completions) or chat (/v1/chat/completions)\n"
            "      --timeout-s T      per-request time limit (default 300)\n"
            "      exit status 1 when any request failed\n"
            "grammar: frigg-bench [--model DIR] [--steps N] [--seed S] grammar SCHEMA_FILE...\n"
            "      structured output's cost per schema: compile ms, and the token mask's time per token (p50/p99 us, cold\n"
            "      cache, warm, after precompute) on 16 random documents of up to N tokens, at DFM-Mimir's 262,144-token\n"
            "      vocabulary ($FRIGG_SHARED/data/tokenizers/mimir-equivalent.tokenizer.json) or --model's tokenizer\n"
            "Output: one JSON object per line on stdout; a summary on stderr.\n");
}

/* grammar SCHEMA_FILE...: structured output's costs at a vocabulary (frigg_grammar_bench): each schema's compile
 * time, and the mask's time per token (cold cache, warm cache, after precompute) over random documents of it: 16
 * walks of up to --steps tokens, seeded by --seed. The vocabulary is DFM-Mimir's 262,144 tokens (the tokenizer in
 * $FRIGG_SHARED, default ../shared, data/tokenizers/mimir-equivalent.tokenizer.json), or --model's tokenizer.json. */
static int bench_grammar(const opts_t *o, char **files, int n) {
    char *tj = NULL;
    if (o->model_dir) {
        tj = frigg_model_side_path(o->model_dir, "tokenizer.json");
    } else {
        const char *sh = getenv("FRIGG_SHARED");
        tj = frigg_path_join(sh && *sh ? sh : "../shared", "data/tokenizers/mimir-equivalent.tokenizer.json");
    }
    double t0 = frigg_now_ms();
    frigg_tokenizer *tok = frigg_tokenizer_load(tj, 0);
    if (!tok) {
        fprintf(stderr, "frigg-bench: grammar: %s: %s\n", tj, frigg_error());
        free(tj);
        return 1;
    }
    int V = frigg_tokenizer_vocab_size(tok);
    int32_t ends[2] = {1, 106}; /* <eos>, <turn|>: the end ids frigg-run allows where a document may end */
    frigg_gvocab *v = frigg_gvocab_new(tok, V, ends, V > 106 ? 2 : 1);
    double vocab_ms = frigg_now_ms() - t0;
    if (!v) {
        fprintf(stderr, "frigg-bench: grammar: the vocabulary: %s\n", frigg_error());
        frigg_tokenizer_free(tok);
        free(tj);
        return 1;
    }
    fprintf(stderr, "frigg-bench: grammar: %s: %d tokens, trie of %d nodes, loaded in %.0f ms\n", tj, V,
            frigg_gvocab_trie_nodes(v), vocab_ms);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        char *text = frigg_read_file(files[i], &len);
        if (!text) {
            fprintf(stderr, "frigg-bench: grammar: %s: %s\n", files[i], frigg_error());
            rc = 1;
            continue;
        }
        double c0 = frigg_now_ms();
        frigg_grammar *g = frigg_grammar_from_schema(text, len);
        double compile_ms = frigg_now_ms() - c0;
        free(text);
        if (!g) {
            fprintf(stderr, "frigg-bench: grammar: %s: %s\n", files[i], frigg_error());
            rc = 1;
            continue;
        }
        frigg_gbench b;
        if (frigg_grammar_bench(g, v, 16, o->steps, o->seed, &b)) {
            fprintf(stderr, "frigg-bench: grammar: %s: %s\n", files[i], frigg_error());
            rc = 1;
        } else {
            json_t *row = json_pack("{s:s,s:s,s:i,s:f,s:i,s:i,s:i,s:i,s:f,s:I,s:i,s:f}", "mode", "grammar", "schema",
                                    files[i], "vocab", V, "compile_ms", compile_ms, "states", frigg_grammar_n_states(g),
                                    "rules", frigg_grammar_n_rules(g), "walks", b.walks, "docs_ended", b.docs_ended,
                                    "precompute_ms", b.precompute_ms, "cache_bytes", (json_int_t)b.cache_bytes,
                                    "classes", b.classes, "classes_ms", b.classes_ms);
            const frigg_gbench_times *t[3] = {&b.cold, &b.warm, &b.precomputed};
            const char *names[3] = {"mask_cold_us", "mask_warm_us", "mask_precomputed_us"};
            for (int k = 0; k < 3; k++)
                json_object_set_new(row, names[k], json_pack("{s:i,s:f,s:f,s:f,s:f}", "n", t[k]->n, "p50", t[k]->p50_us,
                                                             "p99", t[k]->p99_us, "mean", t[k]->mean_us, "max", t[k]->max_us));
            char *line = json_dumps(row, JSON_COMPACT);
            printf("%s\n", line);
            fflush(stdout);
            fprintf(stderr, "frigg-bench: grammar: %s: compile %.2f ms, %d states; mask per token cold p50 %.1f / p99 %.1f us, "
                            "warm p50 %.1f / p99 %.1f us, after precompute (%.0f ms) p50 %.1f / p99 %.1f us\n",
                    files[i], compile_ms, frigg_grammar_n_states(g), b.cold.p50_us, b.cold.p99_us, b.warm.p50_us,
                    b.warm.p99_us, b.precompute_ms, b.precomputed.p50_us, b.precomputed.p99_us);
            free(line);
            json_decref(row);
        }
        frigg_grammar_free(g);
    }
    frigg_gvocab_free(v);
    frigg_tokenizer_free(tok);
    free(tj);
    return rc;
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

/* GPU name, SM/memory clock (MHz) and temperature (C), read now (gpu_state.h); a CPU-backend run names "cpu". */
static void gpu_state(const opts_t *o, char *out, size_t n) {
    frigg_gpu_state st;
    if (frigg_gpu_state_read(o->device, &st) && !strcmp(o->backend, "cpu") && !o->load)
        snprintf(st.name, sizeof st.name, "cpu");
    frigg_gpu_state_json(&st, out, n);
}

/* The GPU's temperature (C) now, read as gpu_state reads it; -1 where it cannot be read. */
static int gpu_temp(const opts_t *o) { return frigg_gpu_temp(o->device); }

/* --cooldown-c: wait until the GPU is at or below it (polled every second); *waited_s: how long that took.
 * -1 when the temperature can no longer be read or the GPU stays hotter than C for COOLDOWN_MAX_S. */
static int cool_down(const opts_t *o, double *waited_s) {
    const double t0 = frigg_now_ms();
    int t = gpu_temp(o), said = 0;
    *waited_s = 0;
    while (t < 0 || t > o->cooldown_c) {
        if (t < 0) {
            fprintf(stderr, "frigg-bench: --cooldown-c: the GPU's temperature can no longer be read (nvidia-smi)\n");
            return -1;
        }
        if ((frigg_now_ms() - t0) / 1e3 > COOLDOWN_MAX_S) {
            fprintf(stderr, "frigg-bench: --cooldown-c %g: the GPU is still at %d C after %d s\n", o->cooldown_c, t,
                    COOLDOWN_MAX_S);
            return -1;
        }
        if (!said++) fprintf(stderr, "cooldown: GPU at %d C, waiting for %g C\n", t, o->cooldown_c);
        nanosleep(&(struct timespec){.tv_sec = 1}, NULL);
        t = gpu_temp(o);
    }
    *waited_s = (frigg_now_ms() - t0) / 1e3;
    return 0;
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

#ifdef FRIGG_CUDA
static int is_quant(frigg_dtype t) { return t == FRIGG_DT_INT8 || t == FRIGG_DT_INT4; }
/* The GEMV each projection ran at batch B (",\"gemv\":{\"gqkv\":\"simt\",...}"): the context's forced
 * implementation, or what its auto table names for the class, the batch size and the weights' dtype (the q. rows
 * for int8 / int4), so that a row says which kernel it measured. */
/* copy_layers, copy_lm: the step reads the engine's bf16 copy (frigg_cuda_decode_copy), so the bf16 rows apply */
static void gemv_choice(frigg_backend *b, const frigg_model *m, int B, int copy_layers, int copy_lm, char *out,
                        size_t n) {
    const struct fk_ctx *kc = frigg_cuda_kernels(b);
    const frigg_config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, impl = fk_ctx_gemv_impl(kc);
    const int ql = !copy_layers && is_quant(m->stack[0][0].q.dtype), qh = !copy_lm && is_quant(m->lm_head.dtype);
    const struct {
        const char *name;
        int O, K, epi, quant;
    } cls[] = {{"gqkv", 4 * D, D, FK_GEMV_QKV, ql},
               {"gate_up", 2 * I, D, FK_GEMV_SWIGLU, ql},
               {"o_proj", D, D, FK_GEMV_RESID, ql},
               {"down", D, I, FK_GEMV_RESID, ql},
               {"lm_head", V, D, FK_GEMV_STORE, qh}};
    size_t at = (size_t)snprintf(out, n, ",\"gemv\":{");
    for (size_t i = 0; i < sizeof cls / sizeof cls[0] && at < n; i++) {
        int run = impl != FK_GEMV_IMPL_AUTO ? impl
                  : cls[i].quant ? fk_ctx_gemv_q_auto_impl(kc, B, cls[i].O, cls[i].K, cls[i].epi)
                                 : fk_ctx_gemv_auto_impl(kc, B, cls[i].O, cls[i].K, cls[i].epi);
        at += (size_t)snprintf(out + at, n - at, "%s\"%s\":\"%s\"", i ? "," : "", cls[i].name, fk_gemv_impl_name(run));
    }
    if (at < n) snprintf(out + at, n - at, "}");
}
#endif

static void emit(const opts_t *o, const char *body) {
    char g[256];
    gpu_state(o, g, sizeof g);
    if (o->load) /* the GPU of the machine running frigg-bench, which is the server's only when it runs here */
        printf("{%s,%s,\"gpu_of\":\"client\",\"command\":\"%s\"}\n", body, g, o->command);
    else
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

static frigg_backend *make_backend(const opts_t *o, const frigg_model *m, int seqs, int ctx, frigg_dtype kv) {
    frigg_backend_opts bo = {.device = o->device, .max_seqs = seqs, .max_ctx = ctx, .kv_dtype = kv,
                             .batch_invariant = o->batch_invariant, .dequant_rows = o->dequant_rows};
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

/* Weight bytes one decode step streams: every layer of each run, plus lm_head (embedding rows ignored), as
 * the model stores them (a quantized build counts its packed values and scales), or, where the step reads the
 * engine's bf16 copy (copy_layers, copy_lm: frigg_cuda_decode_copy), 2 bytes per weight. */
static double weight_bytes(const frigg_model *m, int copy_layers, int copy_lm) {
    const frigg_config *c = &m->cfg;
    double stack[2] = {0, 0};
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < c->layers_per_stack; i++) {
            const frigg_layer *L = &m->stack[s][i];
            const frigg_mat *all[FRIGG_LAYER_MATS];
            frigg_layer_mats(L, all);
            for (int j = 0; j < FRIGG_LAYER_MATS; j++) stack[s] += copy_layers ? 2.0 * all[j]->rows * all[j]->cols : frigg_mat_bytes(all[j]);
        }
    double b = copy_lm ? 2.0 * m->lm_head.rows * m->lm_head.cols : frigg_mat_bytes(&m->lm_head);
    for (int r = 0; r < frigg_num_runs(c); r++) b += stack[frigg_run_stack(c, r)];
    return b;
}

/* The default decode contexts and prefill lengths (not --ctx, --prefill: those are the user's, and refused when they
 * do not fit) cut to what the model takes: those beyond max_position_embeddings dropped, and the model's limit itself
 * where none is left (the bundled model takes 512 tokens; the defaults are DFM-Mimir's), said on stderr. */
static void clip_defaults(opts_t *o, const frigg_config *c, int decode, int prefill) {
    const int lim = c->max_position_embeddings;
    for (int pass = 0; pass < 2; pass++) {
        int *v = pass ? o->plens : o->ctxs, *n = pass ? &o->np : &o->nc, k = 0;
        if ((pass ? o->prefill_given : o->ctx_given) || !(pass ? prefill : decode)) continue;
        char dropped[128] = "";
        for (int i = 0; i < *n; i++) {
            if (v[i] <= lim) v[k++] = v[i];
            else snprintf(dropped + strlen(dropped), sizeof dropped - strlen(dropped), "%s%d", *dropped ? ", " : "", v[i]);
        }
        if (!*dropped) continue;
        if (!k) v[k++] = lim;
        *n = k;
        char kept[128] = "";
        for (int i = 0; i < k; i++) snprintf(kept + strlen(kept), sizeof kept - strlen(kept), "%s%d", i ? "," : "", v[i]);
        fprintf(stderr, "frigg-bench: the default %s %s %s beyond the model's max_position_embeddings %d: %s %s (%s "
                        "chooses)\n", pass ? "prefill lengths" : "decode contexts", dropped,
                strchr(dropped, ',') ? "are" : "is", lim, pass ? "prefill" : "decode at", kept,
                pass ? "--prefill" : "--ctx");
    }
}

/* Every cell asked for, checked against the model's config and the memory of the largest engine its cells make
 * before anything is built or measured: a bad cell is an error up front, not after the others ran, and an engine
 * that does not fit is refused rather than left to the OOM killer (the CPU engine's KV cache is committed only as
 * it is written). m: the loaded model, or NULL for --random-mimir before it is made (its bf16 weights are then
 * counted in the host's memory, where it will be made). who: the build's directory, in the messages of matrix
 * --builds (NULL: one model). */
static int check_shapes(const opts_t *o, const frigg_config *c, const frigg_model *m, int decode, int prefill,
                        const char *who) {
    char pre[600] = "";
    if (who) snprintf(pre, sizeof pre, "build %s: ", who);
    int maxb = 1;
    for (int i = 0; decode && i < o->nb; i++) {
        if (o->batches[i] < 1 || o->batches[i] > BENCH_MAX_BATCH) {
            fprintf(stderr, "frigg-bench: batch %d: batch sizes are 1..%d\n", o->batches[i], BENCH_MAX_BATCH);
            return -1;
        }
        maxb = o->batches[i] > maxb ? o->batches[i] : maxb;
    }
    int maxctx = 0;
    for (int i = 0; decode && i < o->nc; i++) {
        int ctx = o->ctxs[i];
        if (ctx - o->steps < 1 || ctx > c->max_position_embeddings) {
            fprintf(stderr, "frigg-bench: %sdecode ctx %d does not fit %d steps within the model's max_position_embeddings "
                            "%d\n", pre, ctx, o->steps, c->max_position_embeddings);
            return -1;
        }
        maxctx = ctx > maxctx ? ctx : maxctx;
    }
    int maxT = 0;
    for (int i = 0; prefill && i < o->np; i++) {
        if (o->plens[i] < 1 || o->plens[i] > c->max_position_embeddings) {
            fprintf(stderr, "frigg-bench: %sprefill length %d is outside [1, max_position_embeddings %d]\n", pre,
                    o->plens[i], c->max_position_embeddings);
            return -1;
        }
        maxT = o->plens[i] > maxT ? o->plens[i] : maxT;
    }
    /* The engines are made one after another (one per decode context and KV dtype, one for prefill): each of the
     * largest must fit, beside the weights. */
    const int cuda = !strcmp(frigg_mem_engine(o->backend), "cuda");
    const double w = m ? frigg_mem_weights(o->backend, m, o->dequant_rows) : cuda ? frigg_mem_bf16_weights(c) : 0;
    frigg_mem_plan host = {.what = "the random model", .engine = "cpu", .extra = m ? 0 : frigg_mem_bf16_weights(c),
                           .extra_what = "weights made in memory"};
    for (int k = 0; k < (decode ? o->nkv : 0) + (prefill ? 1 : 0); k++) {
        const int is_decode = k < (decode ? o->nkv : 0);
        char what[160];
        if (is_decode)
            snprintf(what, sizeof what, "%sdecode batch %d at ctx %d", pre, maxb, maxctx);
        else
            snprintf(what, sizeof what, "%sprefill of %d tokens", pre, maxT);
        frigg_mem_plan plans[2] = {{.what = what, .cfg = c, .engine = o->backend, .device = o->device,
                                    .seqs = is_decode ? maxb : 1, .ctx = is_decode ? maxctx : maxT,
                                    .kv_dtype = is_decode ? o->kvs[k] : FRIGG_DT_BF16, .weights = w},
                                   host};
        if (frigg_mem_check(plans, m ? 1 : 2, is_decode ? "--batch or --ctx (or --kv-dtype int8)" : "--prefill")) {
            fprintf(stderr, "frigg-bench: %s\n", frigg_error());
            return -1;
        }
    }
    return 0;
}

/* What needs the model itself, checked before anything is measured: its weights' dtypes, and each KV dtype against
 * the engine as frigg_backend_create checks it, so that the engine's own error (a KV dtype the backend does not
 * keep) comes before any row; then check_shapes. */
static int check_cells(const opts_t *o, const frigg_model *m, int decode, int prefill, const char *who) {
    char pre[600] = "";
    if (who) snprintf(pre, sizeof pre, "build %s: ", who);
    if (frigg_model_check_dtypes(m)) {
        fprintf(stderr, "frigg-bench: %s%s\n", pre, frigg_error());
        return -1;
    }
    for (int k = 0; decode && k < o->nkv; k++) {
        frigg_backend_opts bo = {.max_seqs = 1, .max_ctx = 1, .kv_dtype = o->kvs[k]}, norm;
        frigg_backend *t = frigg_backend_alloc(o->backend, m, &bo, &norm);
        if (!t) {
            fprintf(stderr, "frigg-bench: %skv dtype %s: %s\n", pre, frigg_dtype_name(o->kvs[k]), frigg_error());
            return -1;
        }
        free(t); /* only the common part was made: no engine behind it */
    }
    return check_shapes(o, &m->cfg, m, decode, prefill, who);
}

/* One decode cell on engine b, whose sequences 0..B-1 hold n0 = ctx - steps tokens: --repeats timed runs of
 * --steps steps (after a warm-up), one row. extra: more of the row (matrix --builds: the build, its temperature at
 * the start); temps: also read the temperature at the end of the timed runs; who: the build (matrix --builds), named
 * in the summary line on stderr, or NULL. *tok_s: the median. */
static int decode_cell(opts_t *o, frigg_backend *b, const frigg_model *m, int B, int ctx, const char *extra, int temps,
                       const char *who, double *tok_s) {
    const frigg_config *c = &m->cfg;
    const int n0 = ctx - o->steps;
    int32_t tok[BENCH_MAX_BATCH], out_id[2][BENCH_MAX_BATCH];
    const int sampled = o->sampling.temperature > 0;
    /* greedy: only ids come back; a top-k draw: only the k largest logits (as in frigg-run); else rows */
    const int topk = sampled ? frigg_sampler_topk_only(&o->sampling, c->vocab_size) : 0;
    float *logits = sampled && !topk ? frigg_xmalloc(sizeof(float) * B * c->vocab_size) : NULL;
    float *vals = topk ? frigg_xmalloc(sizeof(float) * B * topk) : NULL;
    int32_t *cand = topk ? frigg_xmalloc(sizeof(int32_t) * B * topk) : NULL;
    /* greedy steps queued two deep where the engine can: step k+1 takes step k's ids on the device */
    int pipelined = !sampled && !o->one_step && b->max_inflight >= 2;
    frigg_sampler smp[BENCH_MAX_BATCH];
    for (int i = 0; i < B && sampled; i++) {
        frigg_sampler_params sp = o->sampling;
        sp.seed = o->seed + (unsigned long long)i;
        frigg_sampler_init(&smp[i], &sp, c->vocab_size);
    }
    for (int i = 0; i < B; i++) tok[i] = 5 + i;
    frigg_row rows[2][BENCH_MAX_BATCH];
    double v[32];
    /* the warm-up and each repeat, counted between runs (never inside the timed steps) */
    char what[160];
    snprintf(what, sizeof what, "%s%s%sdecode batch %d ctx %d", who ? "build " : "", who ? who : "", who ? ": " : "", B, ctx);
    frigg_progress pr;
    frigg_progress_start(&pr, "frigg-bench", what, "runs (a warm-up, then --repeats)", o->repeats + 1, o->progress);
    for (int r = -1; r < o->repeats; r++) { /* r = -1: warm-up (graph capture) */
        for (int i = 0; i < B; i++) /* rewind: the same positions every repeat */
            if (b->seq_fork(b, i, i, n0)) {
                fprintf(stderr, "frigg-bench: rewind: %s\n", frigg_error());
                return -1;
            }
#ifdef FRIGG_CUDA
        if (r == 0 && !strcmp(b->name, "cuda")) frigg_cuda_profile_range(1); /* the timed steps only */
#endif
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
        frigg_progress_add(&pr, 1);
        if (r == -1 && b->seq_len(b, 0) != n0 + o->steps) {
            fprintf(stderr, "frigg-bench: decode: sequence 0 holds %d tokens after the warm-up, expected %d\n",
                    b->seq_len(b, 0), n0 + o->steps);
            return -1;
        }
    }
    frigg_progress_end(&pr);
#ifdef FRIGG_CUDA
    if (!strcmp(b->name, "cuda")) frigg_cuda_profile_range(0);
#endif
    const int temp_end = temps ? gpu_temp(o) : -1;
    free(vals);
    free(cand);
    free(logits);
    for (int i = 0; i < B && sampled; i++) frigg_sampler_free(&smp[i]);
    stat3 ms = stats(v, o->repeats);
    /* KV bytes read at the mean position, as the engine stores them (frigg_kv_seq_bytes is linear in ctx) */
    double avg_ctx = n0 + o->steps / 2.0;
    double kv_bytes = B * frigg_kv_seq_bytes(c, b->name, b->kv_dtype, ctx) * avg_ctx / ctx;
    int copy_layers = 0, copy_lm = 0;
#ifdef FRIGG_CUDA
    if (!strcmp(b->name, "cuda")) frigg_cuda_decode_copy(b, B, &copy_layers, &copy_lm);
#endif
    double w_bytes = weight_bytes(m, copy_layers, copy_lm), bytes = w_bytes + kv_bytes;
    double gbs = bytes / (ms.med * 1e-3) / 1e9;
    char body[2048], roof[96] = "", smp_text[96] = "\"greedy\"", ktext[160], tend[32] = "";
    kernels_text(b, ktext, sizeof ktext);
    if (temps) snprintf(tend, sizeof tend, ",\"temp_c_end\":%d", temp_end);
    if (sampled)
        snprintf(smp_text, sizeof smp_text, "{\"temperature\":%g,\"top_k\":%d,\"top_p\":%g,\"topk_on_device\":%s}",
                 o->sampling.temperature, o->sampling.top_k, o->sampling.top_p, topk ? "true" : "false");
    if (o->read_gbs > 0)
        snprintf(roof, sizeof roof, ",\"read_gb_s\":%.1f,\"roofline_frac\":%.3f,\"roofline_tok_s\":%.1f", o->read_gbs,
                 gbs / o->read_gbs, B * o->read_gbs * 1e9 / bytes);
    int kps = -1;
    char proj[256];
    snprintf(proj, sizeof proj, ",\"weights\":\"%s\",\"lm_head\":\"%s\"", frigg_dtype_name(m->stack[0][0].q.dtype),
             frigg_dtype_name(m->lm_head.dtype));
#ifdef FRIGG_CUDA
    if (!strcmp(b->name, "cuda")) {
        kps = frigg_cuda_kernels_per_step(b, B);
        size_t at = strlen(proj);
        const char *dp = frigg_cuda_decode_proj(b, B);
        snprintf(proj + at, sizeof proj - at, ",\"decode_proj\":\"%s\",\"decode_weights\":\"%s\"", dp,
                 copy_layers || copy_lm ? "bf16-copy" : "stored");
        if (!strcmp(dp, "gemv"))
            gemv_choice(b, m, B, copy_layers, copy_lm, proj + strlen(proj), sizeof proj - strlen(proj));
    }
#endif
    snprintf(body, sizeof body,
             "\"bench\":\"decode\",\"backend\":\"%s\",\"batch\":%d,\"ctx\":%d,\"steps\":%d,\"kv_dtype\":\"%s\",%s"
             "\"tok_s\":%.1f,\"tok_s_min\":%.1f,\"tok_s_max\":%.1f,\"ms_per_step\":%.3f,\"bytes_per_step\":%.0f,"
             "\"weight_bytes\":%.0f,\"kv_bytes\":%.0f,\"gb_s\":%.1f%s,\"kernels_per_step\":%d,\"pipelined\":%s,"
             "\"sampling\":%s%s%s%s",
             b->name, B, ctx, o->steps, frigg_dtype_name(b->kv_dtype), extra ? extra : "", B * 1e3 / ms.med,
             B * 1e3 / ms.max, B * 1e3 / ms.min, ms.med, bytes, w_bytes, kv_bytes, gbs, roof, kps,
             pipelined ? "true" : "false", smp_text, ktext, proj, tend);
    emit(o, body);
    fprintf(stderr, "%s%s%sdecode batch %d ctx %d kv %s: %.1f tok/s (%.3f ms/step, %.0f GB/s%s)\n", who ? "build " : "",
            who ? who : "", who ? ": " : "", B, ctx, frigg_dtype_name(b->kv_dtype), B * 1e3 / ms.med, ms.med, gbs,
            o->read_gbs > 0 ? ", see roofline_frac" : "");
    if (tok_s) *tok_s = B * 1e3 / ms.med;
    return 0;
}

static int bench_decode(opts_t *o, const frigg_model *m) {
    const frigg_config *c = &m->cfg;
    int maxb = 1;
    for (int i = 0; i < o->nb; i++) maxb = o->batches[i] > maxb ? o->batches[i] : maxb;
    unsigned long long rs = o->seed * 7919 + 1;
    for (int ki = 0; ki < o->nkv; ki++)
        for (int ci = 0; ci < o->nc; ci++) {
            int ctx = o->ctxs[ci], n0 = ctx - o->steps;
            if (n0 < 1 || ctx > c->max_position_embeddings) {
                fprintf(stderr, "frigg-bench: context %d does not fit %d steps within max_position_embeddings %d\n", ctx,
                        o->steps, c->max_position_embeddings);
                return -1;
            }
            frigg_backend *b = make_backend(o, m, maxb, ctx, o->kvs[ki]);
            if (!b) return -1;
            if (b->max_rows < maxb) {
                fprintf(stderr, "frigg-bench: backend %s takes at most %d rows per step, not batch %d\n", b->name,
                        b->max_rows, maxb);
                frigg_backend_destroy(b);
                return -1;
            }
            int32_t *ids = frigg_xmalloc(sizeof(int32_t) * n0);
            for (int s = 0; s < maxb; s++) {
                random_ids(ids, n0, c->vocab_size, &rs);
                if (frigg_prefill(b, s, ids, n0, n0, NULL, NULL)) {
                    fprintf(stderr, "frigg-bench: prefill: %s\n", frigg_error());
                    return -1;
                }
            }
            for (int bi = 0; bi < o->nb; bi++)
                if (decode_cell(o, b, m, o->batches[bi], ctx, NULL, 0, NULL, NULL)) return -1;
            free(ids);
            frigg_backend_destroy(b);
        }
    return 0;
}

/* matrix --builds: every (kv dtype, ctx, batch) cell, and in each cell every build, so that the builds alternate
 * cell by cell and a drift of clocks or heat over the run reaches all of them alike: in the order given in even
 * cells and reversed in odd ones (A B C, C B A, A B C, ...), so that no build always runs first or last in its cell
 * (with the order fixed, the H200 ran the quantized builds' bf16 copies 1-3 % faster than the bf16 build, which
 * ran first, on the same kernels: benchmarks/h200-2026-12-04/dqfinal/). Each build's run of a cell gets its own
 * engine (batch sequences of ctx tokens; the prompt, the same for every build of the cell, prefilled once and
 * forked to the others), after waiting for --cooldown-c; its row carries the build's directory, its index, its
 * place in the cell's order, the cell's index and the temperature at its start and end. */
static int bench_builds(opts_t *o, frigg_model **ms) {
    int cell = 0;
    double *t_of = frigg_xmalloc(sizeof(double) * (size_t)o->nbuilds);
    for (int ki = 0; ki < o->nkv; ki++)
        for (int ci = 0; ci < o->nc; ci++)
            for (int bi = 0; bi < o->nb; bi++, cell++) {
                const int B = o->batches[bi], ctx = o->ctxs[ci], n0 = ctx - o->steps;
                for (int at = 0; at < o->nbuilds; at++) {
                    const int j = cell % 2 ? o->nbuilds - 1 - at : at;
                    const frigg_model *m = ms[j];
                    double waited = 0, t = 0;
                    if (o->cooldown_c >= 0 && cool_down(o, &waited)) goto fail;
                    const int temp_start = gpu_temp(o);
                    frigg_backend *b = make_backend(o, m, B, ctx, o->kvs[ki]);
                    if (!b) goto fail;
                    if (b->max_rows < B) {
                        fprintf(stderr, "frigg-bench: backend %s takes at most %d rows per step, not batch %d\n", b->name,
                                b->max_rows, B);
                        frigg_backend_destroy(b);
                        goto fail;
                    }
                    unsigned long long rs = o->seed * 7919 + 1 + (unsigned long long)cell;
                    int32_t *ids = frigg_xmalloc(sizeof(int32_t) * n0);
                    random_ids(ids, n0, m->cfg.vocab_size, &rs);
                    int rc = frigg_prefill(b, 0, ids, n0, n0, NULL, NULL);
                    for (int s = 1; s < B && !rc; s++) rc = b->seq_fork(b, 0, s, n0);
                    free(ids);
                    if (rc) {
                        fprintf(stderr, "frigg-bench: build %s: prefill: %s\n", o->builds[j], frigg_error());
                        frigg_backend_destroy(b);
                        goto fail;
                    }
                    json_t *js = json_string(o->builds[j]);
                    char *lit = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
                    json_decref(js);
                    char extra[1400], cool[48] = "";
                    if (o->cooldown_c >= 0) snprintf(cool, sizeof cool, ",\"cooldown_c\":%g,\"cooled_s\":%.1f", o->cooldown_c, waited);
                    snprintf(extra, sizeof extra,
                             "\"build\":%s,\"build_index\":%d,\"order\":%d,\"cell\":%d,\"temp_c_start\":%d%s,",
                             lit ? lit : "null", j, at, cell, temp_start, cool);
                    free(lit);
                    rc = decode_cell(o, b, m, B, ctx, extra, 1, o->builds[j], &t);
                    frigg_backend_destroy(b);
                    if (rc) goto fail;
                    t_of[j] = t;
                }
                for (int j = 1; j < o->nbuilds; j++)
                    fprintf(stderr, "  %s: %.3fx %s\n", o->builds[j], t_of[0] > 0 ? t_of[j] / t_of[0] : 0.0, o->builds[0]);
            }
    free(t_of);
    return 0;
fail:
    free(t_of);
    return -1;
}

static int bench_prefill(opts_t *o, const frigg_model *m) {
    const frigg_config *c = &m->cfg;
    int maxT = 1;
    for (int i = 0; i < o->np; i++) maxT = o->plens[i] > maxT ? o->plens[i] : maxT;
    if (maxT > c->max_position_embeddings) {
        fprintf(stderr, "frigg-bench: prefill length %d > max_position_embeddings %d\n", maxT, c->max_position_embeddings);
        return -1;
    }
    frigg_backend *b = make_backend(o, m, 1, maxT, FRIGG_DT_BF16);
    if (!b) return -1;
    unsigned long long rs = o->seed * 104729 + 3;
    int32_t *ids = frigg_xmalloc(sizeof(int32_t) * maxT);
    float *logits = frigg_xmalloc(sizeof(float) * c->vocab_size);
    for (int pi = 0; pi < o->np; pi++) {
        int T = o->plens[pi];
        random_ids(ids, T, c->vocab_size, &rs);
        double v[32];
        char what[64];
        snprintf(what, sizeof what, "prefill %d tokens", T);
        frigg_progress pr;
        frigg_progress_start(&pr, "frigg-bench", what, "runs (a warm-up, then --repeats)", o->repeats + 1, o->progress);
        for (int r = -1; r < o->repeats; r++) {
            double t0 = frigg_now_ms();
            if (frigg_prefill(b, 0, ids, T, T, logits, NULL)) {
                fprintf(stderr, "frigg-bench: prefill: %s\n", frigg_error());
                return -1;
            }
            if (r >= 0) v[r] = frigg_now_ms() - t0;
            frigg_progress_add(&pr, 1);
        }
        frigg_progress_end(&pr);
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

/* ---- load: an OpenAI-compatible server under N concurrent streams ---------------------------------------- */

/* One stream: one transfer at a time, its request's measurements, and the SSE parser's state. */
typedef struct {
    CURL *h;
    const opts_t *o;
    char *body;              /* the request's JSON, owned (curl does not copy POSTFIELDS) */
    long long req;           /* request number, 0-based */
    double t0, t_first, t_last; /* ms: start, first and last chunk carrying text */
    int chunks;              /* chunks carrying text */
    long long usage_out, usage_in; /* usage.completion_tokens / prompt_tokens, -1 while none came */
    int done;                /* data: [DONE] seen */
    long http;               /* response status, 0 until the first body bytes */
    char kind[24];           /* the request's error kind, "" while none */
    char detail[240];        /* what went wrong, or the start of an error response's body */
    size_t detail_len;
    char *line, *data;       /* SSE: the line being read, the event's data being gathered */
    size_t line_len, line_cap, data_len, data_cap;
    int has_data, prev_cr;
    char cerr[CURL_ERROR_SIZE];
} lstream;

static void buf_add(char **b, size_t *len, size_t *cap, const char *p, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (*len + n + 1 > c) c *= 2;
        char *nb = frigg_xmalloc(c);
        if (*len) memcpy(nb, *b, *len);
        free(*b);
        *b = nb;
        *cap = c;
    }
    memcpy(*b + *len, p, n);
    *len += n;
    (*b)[*len] = 0;
}

/* The first error of a request is its error. */
static void set_kind(lstream *s, const char *kind, const char *fmt, const char *arg) {
    if (s->kind[0]) return;
    snprintf(s->kind, sizeof s->kind, "%s", kind);
    snprintf(s->detail, sizeof s->detail, fmt, arg ? arg : "");
    for (size_t l = strlen(s->detail); l && (unsigned char)s->detail[l - 1] <= ' '; l--) s->detail[l - 1] = 0;
    for (char *c = s->detail; *c; c++) /* one line on stderr */
        if ((unsigned char)*c < ' ') *c = ' ';
}

/* One event's data, a JSON chunk of the OpenAI streaming format. */
static void sse_chunk(lstream *s, const char *data) {
    if (s->done) return; /* nothing after [DONE] counts */
    if (!strcmp(data, "[DONE]")) {
        s->done = 1;
        return;
    }
    json_error_t je;
    /* JSON_ALLOW_NUL: a model's text may hold a NUL byte, which the server sends as \u0000 (valid JSON) */
    json_t *j = json_loads(data, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!j || !json_is_object(j)) {
        char what[320];
        snprintf(what, sizeof what, "%.80s: %.120s", j ? "not an object" : je.text, data);
        set_kind(s, "malformed", "a data payload that is not a JSON object (%s)", what);
        json_decref(j);
        return;
    }
    json_t *err = json_object_get(j, "error"), *obj = json_object_get(j, "object");
    if ((err && !json_is_null(err)) || (json_is_string(obj) && !strcmp(json_string_value(obj), "error"))) {
        set_kind(s, "sse_error", "an error event: %.160s", data);
        json_decref(j);
        return;
    }
    const int chat = !strcmp(s->o->endpoint, "chat");
    json_t *choices = json_object_get(j, "choices"), *c;
    size_t i;
    int text = 0;
    json_array_foreach(choices, i, c) {
        const char *t = NULL;
        if (chat) {
            json_t *d = json_object_get(c, "delta");
            t = json_string_value(json_object_get(d, "content"));
            if (!t || !*t) t = json_string_value(json_object_get(d, "reasoning_content"));
        } else {
            t = json_string_value(json_object_get(c, "text"));
        }
        if (t && *t) text = 1;
    }
    if (text) {
        double now = frigg_now_ms();
        if (!s->chunks) s->t_first = now;
        s->t_last = now;
        s->chunks++;
    }
    json_t *u = json_object_get(j, "usage");
    if (json_is_integer(json_object_get(u, "completion_tokens")))
        s->usage_out = json_integer_value(json_object_get(u, "completion_tokens"));
    if (json_is_integer(json_object_get(u, "prompt_tokens"))) s->usage_in = json_integer_value(json_object_get(u, "prompt_tokens"));
    json_decref(j);
}

/* One SSE line (its terminator stripped): "data: x" gathers x, a blank line ends the event, ":..." is a comment,
 * other fields are ignored but "error" (llama.cpp's "error: {...}" in a stream). */
static void sse_line(lstream *s, const char *l, size_t n) {
    if (!n) {
        if (s->has_data) sse_chunk(s, s->data ? s->data : "");
        s->has_data = 0;
        s->data_len = 0;
        return;
    }
    if (l[0] == ':') return;
    const char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    if (v < l + n && *v == ' ') v++;
    size_t vl = (size_t)(l + n - v);
    if (fl == 4 && !memcmp(l, "data", 4)) {
        if (s->has_data) buf_add(&s->data, &s->data_len, &s->data_cap, "\n", 1);
        buf_add(&s->data, &s->data_len, &s->data_cap, v, vl);
        s->has_data = 1;
    } else if (fl == 5 && !memcmp(l, "error", 5) && !s->done) {
        char e[161];
        snprintf(e, sizeof e, "%.*s", (int)(vl < 160 ? vl : 160), v);
        set_kind(s, "sse_error", "an error field: %s", e);
    }
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ud) {
    lstream *s = ud;
    size_t n = sz * nm;
    if (!s->http) curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->http);
    if (s->http != 200) { /* keep the start of an error response for the message */
        size_t k = n < sizeof s->detail - 1 - s->detail_len ? n : sizeof s->detail - 1 - s->detail_len;
        memcpy(s->detail + s->detail_len, p, k);
        s->detail_len += k;
        s->detail[s->detail_len] = 0;
        return n;
    }
    for (size_t i = 0; i < n; i++) { /* lines end in \n, \r\n or \r */
        char ch = p[i];
        if (ch == '\n' && s->prev_cr) {
            s->prev_cr = 0;
            continue;
        }
        s->prev_cr = ch == '\r';
        if (ch == '\n' || ch == '\r') {
            sse_line(s, s->line ? s->line : "", s->line_len);
            s->line_len = 0;
        } else {
            buf_add(&s->line, &s->line_len, &s->line_cap, &ch, 1);
        }
    }
    return n;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Token ids of a completions prompt: in [1000, 8000), ids every vocabulary frigg ships has (the default model's
 * has 8192) and past the special and byte tokens of the usual tokenizers. */
#define LOAD_ID_LO 1000
#define LOAD_ID_HI 8000

static const char *const load_words[] = {
    "the",   "of",    "and",   "to",    "in",    "is",     "that",  "it",    "for",   "was",   "on",    "are",   "with",
    "as",    "they",  "be",    "at",    "one",   "have",   "this",  "from",  "or",    "had",   "by",    "but",   "some",
    "what",  "there", "we",    "can",   "out",   "other",  "were",  "all",   "when",  "up",    "use",   "how",   "said",
    "each",  "she",   "which", "do",    "their", "time",   "if",    "will",  "way",   "about", "many",  "then",  "them",
    "would", "like",  "so",    "these", "her",   "long",   "make",  "thing", "see",   "him",   "two",   "has",   "look",
    "more",  "day",   "could", "go",    "come",  "did",    "my",    "no",    "most",  "who",   "over",  "know",  "water",
    "than",  "call",  "first", "people", "may",  "down",   "side",  "been",  "now",   "find",  "og",    "det",   "er",
    "en",    "af",    "til",   "som",   "med",   "han",    "ikke",  "der",   "var",   "de",    "den",   "sig",   "har"};

static char *load_body(const opts_t *o, long long req) {
    uint64_t x = o->seed * 0x2545F4914F6CDD1Dull ^ (uint64_t)(req + 1) * 0x9E3779B97F4A7C15ull;
    json_t *b = json_object();
    if (o->served_model) json_object_set_new(b, "model", json_string(o->served_model));
    if (!strcmp(o->endpoint, "chat")) {
        size_t nw = sizeof load_words / sizeof *load_words, len = 0, cap = 0;
        char *text = NULL;
        for (int i = 0; i < o->prompt_tokens; i++) {
            const char *w = load_words[splitmix64(&x) % nw];
            if (i) buf_add(&text, &len, &cap, " ", 1);
            buf_add(&text, &len, &cap, w, strlen(w));
        }
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("user"));
        json_object_set_new(msg, "content", json_string(text));
        json_t *msgs = json_array();
        json_array_append_new(msgs, msg);
        json_object_set_new(b, "messages", msgs);
        free(text);
    } else {
        json_t *ids = json_array();
        for (int i = 0; i < o->prompt_tokens; i++)
            json_array_append_new(ids, json_integer(LOAD_ID_LO + (json_int_t)(splitmix64(&x) % (LOAD_ID_HI - LOAD_ID_LO))));
        json_object_set_new(b, "prompt", ids);
    }
    json_object_set_new(b, "max_tokens", json_integer(o->max_tokens));
    json_object_set_new(b, "temperature", json_real(o->sampling.temperature));
    if (o->sampling.temperature > 0) {
        json_object_set_new(b, "seed", json_integer((json_int_t)((o->seed + (unsigned long long)req) & 0x7fffffffffffll)));
        if (o->sampling.top_k > 0) json_object_set_new(b, "top_k", json_integer(o->sampling.top_k));
        if (o->sampling.top_p < 1) json_object_set_new(b, "top_p", json_real(o->sampling.top_p));
    }
    json_object_set_new(b, "stream", json_true());
    json_t *so = json_object();
    json_object_set_new(so, "include_usage", json_true());
    json_object_set_new(b, "stream_options", so);
    char *out = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    if (!out) {
        fprintf(stderr, "frigg-bench: load: cannot encode a request\n");
        exit(1);
    }
    return out;
}

static size_t on_models(char *p, size_t sz, size_t nm, void *ud) {
    struct {
        char *b;
        size_t len, cap;
    } *m = ud;
    if (m->len < (16u << 20)) buf_add(&m->b, &m->len, &m->cap, p, sz * nm);
    return sz * nm;
}

/* The first id of GET URL/v1/models, or NULL with a message on stderr. */
static char *load_model_name(const opts_t *o, const char *base, struct curl_slist *hdr) {
    struct {
        char *b;
        size_t len, cap;
    } m = {0};
    char url[2048], cerr[CURL_ERROR_SIZE] = "";
    snprintf(url, sizeof url, "%s/v1/models", base);
    CURL *h = curl_easy_init();
    long code = 0;
    char *name = NULL;
    if (!h) return NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_models);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &m);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(o->timeout_s < 30 ? o->timeout_s * 1e3 : 30e3));
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        fprintf(stderr, "frigg-bench: load: GET %s: %s\n", url, cerr[0] ? cerr : curl_easy_strerror(rc));
    } else if (code != 200) {
        fprintf(stderr, "frigg-bench: load: GET %s: HTTP status %ld\n", url, code);
    } else {
        json_t *j = json_loads(m.b ? m.b : "", 0, NULL);
        const char *id = json_string_value(json_object_get(json_array_get(json_object_get(j, "data"), 0), "id"));
        if (id) name = frigg_xstrdup(id);
        else fprintf(stderr, "frigg-bench: load: GET %s: no data[0].id in the answer\n", url);
        json_decref(j);
    }
    free(m.b);
    return name;
}

/* A string as a JSON string literal, quotes included ("null" for NULL). */
static void json_lit(const char *v, char *out, size_t n) {
    json_t *s = v ? json_string(v) : NULL;
    char *d = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    snprintf(out, n, "%s", d ? d : v ? "\"?\"" : "null");
    free(d);
    json_decref(s);
}

typedef struct {
    double *v;
    int n, cap;
} dvec;
static void dvec_push(dvec *d, double x) {
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 256;
        double *nv = frigg_xmalloc(sizeof(double) * d->cap);
        if (d->n) memcpy(nv, d->v, sizeof(double) * d->n);
        free(d->v);
        d->v = nv;
    }
    d->v[d->n++] = x;
}
/* Nearest rank: the smallest value with at least p % of the values at or below it, the ceil(p/100 * n)-th of
 * the sorted values; "null" when there are none. */
static void pct_text(const dvec *d, double p, char *out, size_t n) {
    if (!d->n) {
        snprintf(out, n, "null");
        return;
    }
    int r = (int)ceil(p / 100.0 * d->n - 1e-9);
    r = r < 1 ? 1 : r > d->n ? d->n : r;
    snprintf(out, n, "%.2f", d->v[r - 1]);
}

#define LOAD_MAX_KINDS 64
typedef struct {
    char kind[24];
    long long n;
} kind_count;

static int bench_load(opts_t *o) {
    signal(SIGPIPE, SIG_IGN); /* a server that closes while a TLS write is under way */
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
        fprintf(stderr, "frigg-bench: load: libcurl does not initialise\n");
        return -1;
    }
    char base[1536];
    snprintf(base, sizeof base, "%s", o->url);
    for (size_t l = strlen(base); l && base[l - 1] == '/'; l = strlen(base)) base[l - 1] = 0;
    size_t bl = strlen(base);
    if (bl >= 3 && !strcmp(base + bl - 3, "/v1")) base[bl - 3] = 0;
    char url[2048], auth[1100];
    snprintf(url, sizeof url, "%s/v1/%s", base, !strcmp(o->endpoint, "chat") ? "chat/completions" : "completions");
    struct curl_slist *hdr = NULL;
    hdr = curl_slist_append(hdr, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Accept: text/event-stream");
    hdr = curl_slist_append(hdr, "Expect:"); /* no 100-continue round trip inside the TTFT */
    if (o->api_key && *o->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->api_key);
        hdr = curl_slist_append(hdr, auth);
    }
    char *found = NULL;
    if (!o->served_model) {
        found = load_model_name(o, base, hdr);
        o->served_model = found;
        if (!found) fprintf(stderr, "frigg-bench: load: requests go without a \"model\" (give --model NAME)\n");
    }
    const int N = o->streams;
    lstream *st = frigg_xcalloc((size_t)N, sizeof *st);
    CURLM *m = curl_multi_init();
    if (!m) {
        fprintf(stderr, "frigg-bench: load: curl_multi_init failed\n");
        return -1;
    }
    dvec ttft = {0}, tpot = {0}, e2e = {0};
    kind_count kinds[LOAD_MAX_KINDS];
    int nk = 0;
    long long next = 0, ok = 0, failed = 0, tokens = 0, tok_min = -1, tok_max = -1, no_usage = 0, in_sum = 0, in_n = 0;
    const double t_begin = frigg_now_ms(), deadline = t_begin + o->duration_s * 1e3;
    int active = 0;
    for (int i = 0; i < N; i++) {
        lstream *s = &st[i];
        s->o = o;
        s->h = curl_easy_init();
        if (!s->h) {
            fprintf(stderr, "frigg-bench: load: curl_easy_init failed\n");
            return -1;
        }
        curl_easy_setopt(s->h, CURLOPT_URL, url);
        curl_easy_setopt(s->h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(s->h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(s->h, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(s->h, CURLOPT_PRIVATE, s);
        curl_easy_setopt(s->h, CURLOPT_ERRORBUFFER, s->cerr);
        curl_easy_setopt(s->h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(s->h, CURLOPT_TIMEOUT_MS, (long)(o->timeout_s * 1e3));
    }
    for (int first = 0;;) { /* every stream's first request, then each finished one's next */
        lstream *s = NULL;
        if (first < N) {
            s = &st[first++];
        } else {
            if (!active) break;
            int running = 0;
            if (curl_multi_perform(m, &running) != CURLM_OK) {
                fprintf(stderr, "frigg-bench: load: curl_multi_perform failed\n");
                return -1;
            }
            CURLMsg *msg;
            int q;
            while (!s && (msg = curl_multi_info_read(m, &q))) {
                if (msg->msg != CURLMSG_DONE) continue;
                CURLcode rc = msg->data.result;
                char *priv = NULL;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
                s = (lstream *)priv;
                curl_multi_remove_handle(m, s->h);
                active--;
                double t_end = frigg_now_ms();
                if (!s->http) curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &s->http);
                if (s->http == 200 && s->line_len) sse_line(s, s->line, s->line_len); /* an unterminated last line */
                if (s->http == 200) sse_line(s, "", 0);                               /* and event */
                if (s->http && s->http != 200) {
                    char k[24];
                    char d[sizeof s->detail];
                    snprintf(k, sizeof k, "http_%ld", s->http);
                    snprintf(d, sizeof d, "%s", s->detail);
                    s->kind[0] = 0; /* the status says it all, whatever the body held */
                    set_kind(s, k, "%s", d);
                } else if (!s->kind[0] && rc != CURLE_OK) {
                    const char *k = rc == CURLE_OPERATION_TIMEDOUT                                    ? "timeout"
                                    : rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
                                              rc == CURLE_COULDNT_RESOLVE_PROXY                       ? "connect"
                                                                                                      : "transport";
                    set_kind(s, k, "%.200s", s->cerr[0] ? s->cerr : curl_easy_strerror(rc));
                } else if (!s->kind[0] && !s->done) {
                    set_kind(s, "malformed", "%s", "the stream ended without data: [DONE]");
                }
                if (s->kind[0]) {
                    failed++;
                    int k = 0;
                    while (k < nk && strcmp(kinds[k].kind, s->kind)) k++;
                    if (k == nk && nk < LOAD_MAX_KINDS) {
                        snprintf(kinds[nk].kind, sizeof kinds[nk].kind, "%s", s->kind);
                        kinds[nk++].n = 0;
                        fprintf(stderr, "frigg-bench: load: request %lld: first %s: %s\n", s->req, s->kind, s->detail);
                    }
                    if (k < nk) kinds[k].n++;
                } else {
                    long long t = s->usage_out >= 0 ? s->usage_out : s->chunks;
                    if (s->usage_out < 0) no_usage++;
                    if (s->usage_in >= 0) {
                        in_sum += s->usage_in;
                        in_n++;
                    }
                    ok++;
                    tokens += t;
                    tok_min = tok_min < 0 || t < tok_min ? t : tok_min;
                    tok_max = t > tok_max ? t : tok_max;
                    if (s->chunks) dvec_push(&ttft, s->t_first - s->t0);
                    if (s->chunks >= 2 && t >= 2) dvec_push(&tpot, (s->t_last - s->t_first) / (double)(t - 1));
                    dvec_push(&e2e, t_end - s->t0);
                }
            }
            if (!s) {
                curl_multi_poll(m, NULL, 0, 100, NULL);
                continue;
            }
        }
        if (o->requests ? next >= o->requests : frigg_now_ms() >= deadline) continue; /* this stream is done */
        free(s->body);
        s->req = next++;
        s->body = load_body(o, s->req);
        s->chunks = s->done = s->has_data = s->prev_cr = 0;
        s->http = 0;
        s->usage_out = s->usage_in = -1;
        s->kind[0] = s->detail[0] = s->cerr[0] = 0;
        s->detail_len = s->line_len = s->data_len = 0;
        curl_easy_setopt(s->h, CURLOPT_POSTFIELDS, s->body);
        curl_easy_setopt(s->h, CURLOPT_POSTFIELDSIZE, (long)strlen(s->body));
        s->t0 = frigg_now_ms();
        if (curl_multi_add_handle(m, s->h) != CURLM_OK) {
            fprintf(stderr, "frigg-bench: load: curl_multi_add_handle failed\n");
            return -1;
        }
        active++;
    }
    const double wall_s = (frigg_now_ms() - t_begin) / 1e3;
    dvec *all[3] = {&ttft, &tpot, &e2e};
    for (int i = 0; i < 3; i++)
        if (all[i]->n > 1) qsort(all[i]->v, all[i]->n, sizeof(double), cmp_double);
    char p[8][32];
    pct_text(&ttft, 50, p[0], 32);
    pct_text(&ttft, 95, p[1], 32);
    pct_text(&ttft, 99, p[2], 32);
    pct_text(&tpot, 50, p[3], 32);
    pct_text(&tpot, 99, p[4], 32);
    pct_text(&e2e, 50, p[5], 32);
    pct_text(&e2e, 95, p[6], 32);
    pct_text(&e2e, 99, p[7], 32);
    char errs[LOAD_MAX_KINDS * 48] = "{", human_err[LOAD_MAX_KINDS * 48] = "";
    for (int k = 0; k < nk; k++) {
        size_t l = strlen(errs), h = strlen(human_err);
        snprintf(errs + l, sizeof errs - l, "%s\"%s\":%lld", k ? "," : "", kinds[k].kind, kinds[k].n);
        snprintf(human_err + h, sizeof human_err - h, "%s%s %lld", k ? ", " : "; errors: ", kinds[k].kind, kinds[k].n);
    }
    strcat(errs, "}");
    char url_lit[2200], model_lit[600], limit[64], in_mean[32] = "null";
    json_lit(url, url_lit, sizeof url_lit);
    json_lit(o->served_model, model_lit, sizeof model_lit);
    if (o->requests) snprintf(limit, sizeof limit, "\"requests_limit\":%lld", o->requests);
    else snprintf(limit, sizeof limit, "\"duration_limit_s\":%g", o->duration_s);
    if (in_n) snprintf(in_mean, sizeof in_mean, "%.1f", (double)in_sum / in_n);
    char body[4096 + sizeof errs];
    snprintf(body, sizeof body,
             "\"bench\":\"load\",\"url\":%s,\"endpoint\":\"%s\",\"model\":%s,\"prompt\":\"%s\",\"streams\":%d,%s,"
             "\"requests\":%lld,\"failed\":%lld,\"duration_s\":%.3f,\"prompt_tokens\":%d,\"usage_prompt_tokens_mean\":%s,"
             "\"max_tokens\":%d,\"temperature\":%g,\"tokens\":%lld,\"tokens_min\":%lld,\"tokens_max\":%lld,"
             "\"requests_without_usage\":%lld,\"tok_s\":%.1f,\"req_s\":%.2f,\"ttft_ms_p50\":%s,\"ttft_ms_p95\":%s,"
             "\"ttft_ms_p99\":%s,\"tpot_ms_p50\":%s,\"tpot_ms_p99\":%s,\"e2e_ms_p50\":%s,\"e2e_ms_p95\":%s,"
             "\"e2e_ms_p99\":%s,\"errors\":%s",
             url_lit, o->endpoint, model_lit, !strcmp(o->endpoint, "chat") ? "words" : "token_ids", N, limit, ok, failed,
             wall_s, o->prompt_tokens, in_mean, o->max_tokens, o->sampling.temperature, tokens, tok_min < 0 ? 0 : tok_min,
             tok_max < 0 ? 0 : tok_max, no_usage, wall_s > 0 ? tokens / wall_s : 0.0, wall_s > 0 ? ok / wall_s : 0.0,
             p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], errs);
    emit(o, body);
    fprintf(stderr,
            "load: %d streams, %lld requests (%lld failed) in %.1f s: %.1f generated tok/s, %lld tokens; "
            "TTFT p50 %s ms p99 %s ms, TPOT p50 %s ms, e2e p50 %s ms%s\n",
            N, ok, failed, wall_s, wall_s > 0 ? tokens / wall_s : 0.0, tokens, p[0], p[2], p[3], p[5], human_err);
    for (int i = 0; i < N; i++) {
        curl_easy_cleanup(st[i].h);
        free(st[i].body);
        free(st[i].line);
        free(st[i].data);
    }
    curl_multi_cleanup(m);
    curl_slist_free_all(hdr);
    curl_global_cleanup();
    free(st);
    free(ttft.v);
    free(tpot.v);
    free(e2e.v);
    if (found) {
        o->served_model = NULL;
        free(found);
    }
    return failed ? 1 : 0;
}

/* matrix --builds: every build loaded and every cell checked against each before anything is measured (a bad
 * directory or cell is an error before the first row); --cooldown-c checked to be readable; then, on CUDA, the
 * vram probe for the rows' roofline; then the cells. */
static int bench_matrix_builds(opts_t *o) {
    if (o->cooldown_c >= 0 && gpu_temp(o) < 0) {
        fprintf(stderr, "frigg-bench: --cooldown-c %g: the GPU's temperature cannot be read on this machine (nvidia-smi "
                        "--query-gpu=temperature.gpu -i %d gave none): no GPU to cool down\n", o->cooldown_c, o->device);
        return -1;
    }
    frigg_model *ms[MAX_BUILDS] = {0};
    int rc = 0;
    for (int j = 0; j < o->nbuilds && !rc; j++) {
        double t0 = frigg_now_ms();
        ms[j] = frigg_model_load(o->builds[j]);
        if (!ms[j]) {
            fprintf(stderr, "frigg-bench: build %s: %s\n", o->builds[j], frigg_error());
            rc = -1;
            break;
        }
        fprintf(stderr, "build %d: %s, %llu parameters, weights %s, ready in %.1f s\n", j, o->builds[j],
                (unsigned long long)ms[j]->n_params, frigg_dtype_name(ms[j]->stack[0][0].q.dtype),
                (frigg_now_ms() - t0) / 1e3);
    }
    /* the default contexts cut to the build of the smallest context, so that every build measures every cell */
    int least = 0;
    for (int j = 1; j < o->nbuilds && !rc; j++)
        if (ms[j]->cfg.max_position_embeddings < ms[least]->cfg.max_position_embeddings) least = j;
    if (!rc) clip_defaults(o, &ms[least]->cfg, 1, 0);
    for (int j = 0; j < o->nbuilds && !rc; j++) rc = check_cells(o, ms[j], 1, 0, o->builds[j]);
#ifdef FRIGG_CUDA
    if (!rc && !strcmp(o->backend, "cuda")) rc = bench_vram(o); /* the rows' roofline */
#endif
    if (!rc) rc = bench_builds(o, ms);
    for (int j = 0; j < o->nbuilds; j++) frigg_model_free(ms[j]);
    return rc;
}

/* 1: ARG is --api-key or an abbreviation getopt takes for it (--a...), 2: the same with "=KEY", 0: neither. */
static int key_option(const char *arg) {
    size_t n = strcspn(arg, "=");
    if (n < 3 || n > 9 || strncmp(arg, "--api-key", n)) return 0;
    return arg[n] == '=' ? 2 : 1;
}

int main(int argc, char **argv) {
    opts_t o = {.seed = 1, .backend = "auto", .repeats = 3, .steps = 32, .sampling = {.top_p = 1, .repetition_penalty = 1},
                .nkv = 1, .kvs = {FRIGG_DT_BF16}, .cooldown_c = -1};
    o.nb = parse_list("1,4,8", o.batches, "batch");
    o.nc = parse_list("512,2048,4096", o.ctxs, "ctx");
    o.np = parse_list("1024,4096", o.plens, "prefill");
    /* The command line, JSON-escaped, goes into every row; an --api-key's value as "***". */
    size_t at = 0;
    for (int i = 0; i < argc && at < sizeof o.command - 8; i++) {
        const char *arg = i ? argv[i] : "frigg-bench";
        if (i > 1 && key_option(argv[i - 1]) == 1) arg = "***";
        else if (i && key_option(arg) == 2) arg = "--api-key=***";
        for (const char *p = arg, *q = p; *q && at < sizeof o.command - 8; q++) {
            if (q == p && i) o.command[at++] = ' ';
            if (*q == '"' || *q == '\\') o.command[at++] = '\\';
            o.command[at++] = (char)((unsigned char)*q < 32 ? ' ' : *q);
        }
    }
    enum { O_URL = 256, O_STREAMS, O_DURATION, O_REQUESTS, O_PROMPT, O_MAXTOK, O_KEY, O_ENDPOINT, O_TIMEOUT, O_KV, O_BUILDS,
           O_COOL, O_DQ, O_PROGRESS };
    static const struct option lo[] = {{"model", 1, 0, 'm'},   {"random-mimir", 0, 0, 'R'}, {"seed", 1, 0, 'S'},
                                       {"backend", 1, 0, 'b'}, {"device", 1, 0, 'd'},       {"repeats", 1, 0, 'r'},
                                       {"steps", 1, 0, 's'},   {"batch", 1, 0, 'B'},        {"ctx", 1, 0, 'C'},
                                       {"prefill", 1, 0, 'P'}, {"help", 0, 0, 'h'},         {"version", 0, 0, 'V'},
                                       {"one-step", 0, 0, 'O'},     {"temperature", 1, 0, 'T'},
                                       {"batch-invariant", 0, 0, 'I'},
                                       {"top-k", 1, 0, 'k'},   {"top-p", 1, 0, 'p'},
                                       {"url", 1, 0, O_URL},   {"streams", 1, 0, O_STREAMS},
                                       {"duration-s", 1, 0, O_DURATION}, {"requests", 1, 0, O_REQUESTS},
                                       {"prompt-tokens", 1, 0, O_PROMPT}, {"max-tokens", 1, 0, O_MAXTOK},
                                       {"api-key", 1, 0, O_KEY}, {"endpoint", 1, 0, O_ENDPOINT},
                                       {"timeout-s", 1, 0, O_TIMEOUT}, {"kv-dtype", 1, 0, O_KV},
                                       {"kv-dtypes", 1, 0, O_KV}, {"builds", 1, 0, O_BUILDS},
                                       {"cooldown-c", 1, 0, O_COOL}, {"dequant-rows", 1, 0, O_DQ},
                                       {"progress", 0, 0, O_PROGRESS},
                                       {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "m:b:d:r:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o.model_dir = optarg; break;
        case 'R': o.random_mimir = 1; break;
        case O_PROGRESS: o.progress = 1; break;
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
        case 'C': o.nc = parse_list(optarg, o.ctxs, "ctx"), o.ctx_given = 1; break;
        case 'P': o.np = parse_list(optarg, o.plens, "prefill"), o.prefill_given = 1; break;
        case 'O': o.one_step = 1; break;
        case 'I': o.batch_invariant = 1; break;
        case O_DQ:
            if (frigg_cli_dequant_rows("frigg-bench", optarg, &o.dequant_rows)) return 2;
            break;
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
        case O_KV: {
            o.nkv = 0;
            char list[64], *save = NULL;
            if (strlen(optarg) >= sizeof list) {
                fprintf(stderr, "frigg-bench: --kv-dtypes takes bf16 and/or int8, not \"%.40s...\"\n", optarg);
                return 2;
            }
            strcpy(list, optarg);
            for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                frigg_dtype d;
                if (frigg_cli_kv_dtype("frigg-bench", t, &d)) return 2;
                for (int k = 0; k < o.nkv; k++)
                    if (o.kvs[k] == d) {
                        fprintf(stderr, "frigg-bench: --kv-dtypes names %s twice\n", t);
                        return 2;
                    }
                o.kvs[o.nkv++] = d; /* two distinct types at most: bf16, int8 */
            }
            if (!o.nkv) {
                fprintf(stderr, "frigg-bench: --kv-dtypes needs bf16 and/or int8\n");
                return 2;
            }
            break;
        }
        case O_BUILDS: {
            o.nbuilds = 0;
            char *save = NULL;
            if (strlen(optarg) >= sizeof o.builds_list) {
                fprintf(stderr, "frigg-bench: --builds: the list is longer than %zu bytes\n", sizeof o.builds_list - 1);
                return 2;
            }
            strcpy(o.builds_list, optarg);
            for (char *t = strtok_r(o.builds_list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o.nbuilds == MAX_BUILDS) {
                    fprintf(stderr, "frigg-bench: --builds takes at most %d directories\n", MAX_BUILDS);
                    return 2;
                }
                o.builds[o.nbuilds++] = t;
            }
            if (!o.nbuilds) {
                fprintf(stderr, "frigg-bench: --builds needs DIR,DIR,...\n");
                return 2;
            }
            break;
        }
        case O_COOL: {
            double v;
            if (frigg_cli_number("frigg-bench", "--cooldown-c", optarg, 1, 150, 0, &v)) return 2;
            o.cooldown_c = v;
            break;
        }
        case O_URL: o.url = optarg; break;
        case O_KEY: o.api_key = optarg; break;
        case O_ENDPOINT:
            if (strcmp(optarg, "completions") && strcmp(optarg, "chat")) {
                fprintf(stderr, "frigg-bench: --endpoint is completions or chat, not \"%s\"\n", optarg);
                return 2;
            }
            o.endpoint = optarg;
            break;
        case O_STREAMS:
        case O_DURATION:
        case O_REQUESTS:
        case O_PROMPT:
        case O_MAXTOK:
        case O_TIMEOUT: {
            double v;
            const char *name = ch == O_STREAMS    ? "--streams"
                               : ch == O_DURATION ? "--duration-s"
                               : ch == O_REQUESTS ? "--requests"
                               : ch == O_PROMPT   ? "--prompt-tokens"
                               : ch == O_MAXTOK   ? "--max-tokens"
                                                  : "--timeout-s";
            const int real = ch == O_DURATION || ch == O_TIMEOUT;
            if (frigg_cli_number("frigg-bench", name, optarg, real ? 1e-3 : 1,
                                 ch == O_STREAMS ? 4096 : ch == O_REQUESTS ? 1e12 : real ? 1e7 : 1 << 24, !real, &v))
                return 2;
            if (ch == O_STREAMS) o.streams = (int)v;
            else if (ch == O_DURATION) o.duration_s = v;
            else if (ch == O_REQUESTS) o.requests = (long long)v;
            else if (ch == O_PROMPT) o.prompt_tokens = (int)v;
            else if (ch == O_MAXTOK) o.max_tokens = (int)v;
            else o.timeout_s = v;
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
    if (!strcmp(argv[optind], "grammar")) {
        if (optind + 1 >= argc) {
            fprintf(stderr, "frigg-bench: grammar needs one or more JSON Schema files\n");
            return 2;
        }
        return bench_grammar(&o, argv + optind + 1, argc - optind - 1);
    }
    int want[4] = {0}; /* vram launch decode prefill */
    for (int i = optind; i < argc; i++) {
        if (!strcmp(argv[i], "load")) o.load = 1;
        else if (!strcmp(argv[i], "vram")) want[0] = 1;
        else if (!strcmp(argv[i], "launch")) want[1] = 1;
        else if (!strcmp(argv[i], "decode")) want[2] = 1;
        else if (!strcmp(argv[i], "prefill")) want[3] = 1;
        else if (!strcmp(argv[i], "matrix")) want[0] = want[1] = want[2] = want[3] = 1;
        else {
            fprintf(stderr, "frigg-bench: unknown mode \"%s\" (vram, launch, decode, prefill, matrix, load)\n", argv[i]);
            return 2;
        }
    }
    const int engine_opts = o.random_mimir || strcmp(o.backend, "auto") || o.one_step || o.batch_invariant || o.nbuilds ||
                            o.dequant_rows ||
                            o.cooldown_c >= 0 || o.nkv != 1 || o.kvs[0] != FRIGG_DT_BF16;
    if (o.load && (want[0] || want[1] || want[2] || want[3] || engine_opts)) {
        fprintf(stderr, "frigg-bench: load runs alone: it measures a server, not an engine (no other mode, no "
                        "--random-mimir, --backend, --one-step, --batch-invariant, --dequant-rows, --kv-dtypes, --builds, "
                        "--cooldown-c)\n");
        return 2;
    }
    if (!o.load && (o.url || o.streams || o.duration_s > 0 || o.requests || o.prompt_tokens || o.max_tokens || o.api_key ||
                    o.endpoint || o.timeout_s > 0)) {
        fprintf(stderr, "frigg-bench: --url, --streams, --duration-s, --requests, --prompt-tokens, --max-tokens, "
                        "--api-key, --endpoint and --timeout-s are options of the load mode\n");
        return 2;
    }
    if (o.load) {
        if (!o.url || (strncmp(o.url, "http://", 7) && strncmp(o.url, "https://", 8))) {
            fprintf(stderr, "frigg-bench: load needs --url http://HOST:PORT (or https://)\n");
            return 2;
        }
        if (!o.streams || !o.prompt_tokens || !o.max_tokens || (o.duration_s > 0) == (o.requests > 0)) {
            fprintf(stderr, "frigg-bench: load needs --streams N, --prompt-tokens P, --max-tokens M and exactly one of "
                            "--duration-s S and --requests R\n");
            return 2;
        }
        o.served_model = o.model_dir; /* --model: the served model's name here */
        o.model_dir = NULL;
        if (!o.api_key) o.api_key = getenv("FRIGG_API_KEY");
        if (!o.endpoint) o.endpoint = "completions";
        if (o.timeout_s <= 0) o.timeout_s = 300;
        return bench_load(&o) ? 1 : 0;
    }
#ifdef FRIGG_CUDA
    if (!strcmp(o.backend, "auto")) o.backend = frigg_cuda_device_count() > 0 ? "cuda" : "cpu";
#else
    if (!strcmp(o.backend, "auto")) o.backend = "cpu";
#endif
    /* What cannot run anywhere is said first (a KV dtype the backend does not keep, common/engine/backend.c's rule), then a
     * GPU that is not there, before the vram probe or any model is built. */
    for (int k = 0; k < o.nkv; k++)
        if (frigg_backend_check_kv(o.backend, o.kvs[k])) {
            fprintf(stderr, "frigg-bench: %s\n", frigg_error());
            return 1;
        }
#ifdef FRIGG_CUDA
    if (!strcmp(o.backend, "cuda") && frigg_cuda_device_count() < 1) {
        fprintf(stderr, "frigg-bench: backend \"cuda\": no CUDA device is present\n");
        return 1;
    }
#else
    if (!strcmp(o.backend, "cuda")) {
        fprintf(stderr, "frigg-bench: backend \"cuda\": this build has no CUDA (built with FRIGG_CUDA=0)\n");
        return 1;
    }
#endif
    if (o.nbuilds) {
        int matrix = 0;
        for (int i = optind; i < argc; i++) matrix |= !strcmp(argv[i], "matrix");
        if (!matrix || argc - optind != 1 || o.model_dir || o.random_mimir) {
            fprintf(stderr, "frigg-bench: --builds is the form of the matrix mode over several builds: "
                            "frigg-bench --builds DIR,DIR,... matrix (no other mode, no --model or --random-mimir)\n");
            return 2;
        }
        return bench_matrix_builds(&o) ? 1 : 0;
    }
    if (o.cooldown_c >= 0) {
        fprintf(stderr, "frigg-bench: --cooldown-c is an option of matrix --builds\n");
        return 2;
    }
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
            /* its cells and memory first: making it takes seconds and its 3.6 GB of weights */
            clip_defaults(&o, &c, want[2], want[3]);
            if (check_shapes(&o, &c, NULL, want[2], want[3], NULL)) return 1;
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
        clip_defaults(&o, &m->cfg, want[2], want[3]);
        if (check_cells(&o, m, want[2], want[3], NULL)) {
            frigg_model_free(m);
            return 1;
        }
        if (want[2]) rc |= bench_decode(&o, m);
        if (want[3]) rc |= bench_prefill(&o, m);
        frigg_model_free(m);
    }
    return rc ? 1 : 0;
}
