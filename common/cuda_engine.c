/* cuda_engine.c — the CUDA engine behind backend.h (MODEL.md §3, same rounding points as cpu_engine.c).
 * Weights are uploaded once as bf16 (the split layout is packed on upload, so the device always holds
 * gqkv [4D][D] and gate_up [2I][D]); every buffer, including a static KV slab per sequence
 * [slot][head][max_ctx][head_dim], is allocated at creation. Prefill: cuBLAS GEMMs + the tiled PrefixLM
 * attention. Decode: fused GEMVs for up to 8 sequences per pass, replayed from one CUDA graph per batch
 * size; only ids (or the logits when asked) come back. Each engine binds its own device and stream. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_ops.h"
#include "cuda_backend.h"
#include "cuda_gemm.h"
#include "sampler.h"
#include "../kernels/kernels.h"
#include "util.h"

#define MAX_BATCH 8
#define LOGIT_CHUNK 64 /* rows of the lm_head GEMM when all prompt logits are asked for */

typedef struct {
    uint16_t *gqkv, *o, *gu, *down;
} dev_layer;

typedef struct {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    uint16_t *embed, *lm_head, *zli;
    dev_layer *layers[2];
    uint16_t *cos_t, *sin_t;
    uint16_t *kc, *vc;
    long long seq_stride, slot_stride;
    int rows; /* capacity of the activation buffers */
    uint16_t *zH, *zL, *x, *a, *gqkv, *q, *y, *t1, *gu, *m;
    int32_t *d_ids, *d_zero, *d_iota;
    /* [3][MAX_BATCH]: ids, seq, pos of a decode step. The step's last kernel overwrites the ids with its greedy
     * ids and adds one to the positions: the input of the next greedy step (cuda_decode_greedy). */
    int32_t *d_step;
    void *argmax_work; /* fk_argmax_work_bytes(MAX_BATCH) */
    void *topk_work;   /* fk_topk_work_bytes(MAX_BATCH) */
    float *topk_vals;  /* [MAX_BATCH][FRIGG_TOPK_MAX] */
    int32_t *topk_ids; /* [MAX_BATCH][FRIGG_TOPK_MAX] */
    int32_t *h_step, *h_out; /* pinned staging; h_out: [2][MAX_BATCH], one per step in flight */
    cudaEvent_t out_ready[2]; /* h_out[k] holds its step's ids */
    uint16_t *logits;  /* [LOGIT_CHUNK][V] bf16 */
    float *logits_f;   /* [LOGIT_CHUNK][V] */
    float *attn_work;
    int *attn_counters; /* [MAX_BATCH][heads], zero between calls */
    cudaGraphExec_t graph[MAX_BATCH + 1];
    int graph_nodes[MAX_BATCH + 1];
    int use_graphs;
    int skip; /* FRIGG_SKIP_* (profiling) */
    size_t bytes;
    void *allocs[64];
    int nallocs;
} cuda_impl;

#define CU(call)                                                                               \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            frigg_set_error("CUDA: %s failed: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__, __LINE__); \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)
#define OK(call)                    \
    do {                            \
        if ((call)) return -1;      \
    } while (0)

static int dalloc(cuda_impl *im, void **p, size_t bytes, const char *what) {
    if (im->nallocs == (int)(sizeof im->allocs / sizeof im->allocs[0])) {
        frigg_set_error("CUDA: too many device allocations");
        return -1;
    }
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        frigg_set_error("CUDA: cannot allocate %.1f MiB for %s on device %d: %s", bytes / 1048576.0, what, im->device,
                        cudaGetErrorString(e));
        *p = NULL;
        return -1;
    }
    im->allocs[im->nallocs++] = *p;
    im->bytes += bytes;
    return 0;
}

static int upload(uint16_t *dst, const uint16_t *src, size_t elems) {
    CU(cudaMemcpy(dst, src, elems * 2, cudaMemcpyHostToDevice));
    return 0;
}

/* C[T][O] = A[T][K] · W[O][K]^T (cuda_gemm.h: one call shared with the prefill microbenchmark). */
static int gemm(cuda_impl *im, const uint16_t *W, int O, int K, const uint16_t *A, int T, uint16_t *C) {
    return frigg_cuda_gemm(im->blas, W, O, K, A, T, C);
}

static uint16_t *k_slot(cuda_impl *im, int slot) { return im->kc + (size_t)slot * im->slot_stride; }
static uint16_t *v_slot(cuda_impl *im, int slot) { return im->vc + (size_t)slot * im->slot_stride; }

/* End of run r: the final norm replaces z_L (L run) or z_H (H run); then the next run's injection. */
static int run_end(cuda_impl *im, const frigg_config *c, int r, int T) {
    int last = r == frigg_num_runs(c) - 1, D = c->hidden_size;
    float eps = (float)c->rms_norm_eps;
    if (frigg_run_stack(c, r) == FRIGG_STACK_L) return fk_run_end(im->x, im->zL, im->zH, T, D, eps, im->stream);
    return fk_run_end(im->x, im->zH, last ? NULL : im->zL, T, D, eps, im->stream);
}

static int cuda_prefill(frigg_backend *b, int seq, const int32_t *ids, int T, int prefix_len, float *logits_last,
                        float *logits_all) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    int D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, H = c->num_heads, hd = c->head_dim;
    float eps = (float)c->rms_norm_eps;
    if (seq < 0 || seq >= b->max_seqs || T < 1 || prefix_len < 0 || prefix_len > T) {
        frigg_set_error("prefill: bad arguments (seq %d, %d tokens, prefix %d)", seq, T, prefix_len);
        return -1;
    }
    if (T > b->max_ctx) {
        frigg_set_error("context full: 0 cached + %d new tokens > %d", T, b->max_ctx);
        return -1;
    }
    for (int t = 0; t < T; t++)
        if (ids[t] < 0 || ids[t] >= V) {
            frigg_set_error("token id %d is outside the vocabulary [0, %d)", ids[t], V);
            return -1;
        }
    CU(cudaSetDevice(im->device));
    b->seq_len[seq] = 0;
    cudaStream_t s = im->stream;
    CU(cudaMemcpyAsync(im->d_ids, ids, (size_t)T * 4, cudaMemcpyHostToDevice, s));
    OK(fk_embed(im->embed, im->zli, im->d_ids, T, D, (float)c->embedding_scale, im->zH, im->zL, im->x, s));
    size_t seq_off = (size_t)seq * im->seq_stride;
    for (int r = 0; r < frigg_num_runs(c); r++) {
        const dev_layer *Ls = im->layers[frigg_run_stack(c, r)];
        for (int i = 0; i < c->layers_per_stack; i++) {
            int slot = frigg_slot(c, r, i);
            uint16_t *ks = k_slot(im, slot) + seq_off, *vs = v_slot(im, slot) + seq_off;
            if (i == 0) OK(fk_rmsnorm(im->x, im->a, T, D, eps, s));
            OK(gemm(im, Ls[i].gqkv, 4 * D, D, im->a, T, im->gqkv));
            OK(fk_rope_kv(im->gqkv, T, H, hd, im->d_zero, im->d_iota, im->cos_t, im->sin_t, im->q, ks, vs, 0,
                          b->max_ctx, s));
            OK(fk_attn_prefill(im->q, ks, vs, im->gqkv, T, H, hd, b->max_ctx, prefix_len, im->y, s));
            OK(gemm(im, Ls[i].o, D, D, im->y, T, im->t1));
            OK(fk_add_rmsnorm(im->x, im->t1, im->a, T, D, eps, s));
            OK(gemm(im, Ls[i].gu, 2 * I, D, im->a, T, im->gu));
            OK(fk_swiglu(im->gu, T, I, im->m, s));
            OK(gemm(im, Ls[i].down, D, I, im->m, T, im->t1));
            /* The next layer's input norm comes for free; after the last layer it is simply unused. */
            OK(fk_add_rmsnorm(im->x, im->t1, im->a, T, D, eps, s));
        }
        OK(run_end(im, c, r, T));
    }
    if (logits_all) {
        for (int t0 = 0; t0 < T; t0 += LOGIT_CHUNK) {
            int n = T - t0 < LOGIT_CHUNK ? T - t0 : LOGIT_CHUNK;
            OK(gemm(im, im->lm_head, V, D, im->zH + (size_t)t0 * D, n, im->logits));
            OK(fk_bf16_to_f32(im->logits, (size_t)n * V, im->logits_f, s));
            CU(cudaMemcpyAsync(logits_all + (size_t)t0 * V, im->logits_f, (size_t)n * V * 4, cudaMemcpyDeviceToHost, s));
        }
        CU(cudaStreamSynchronize(s));
        if (logits_last) memcpy(logits_last, logits_all + (size_t)(T - 1) * V, (size_t)V * 4);
    } else if (logits_last) {
        OK(fk_gemv(im->lm_head, V, D, im->zH + (size_t)(T - 1) * D, 1, 0, 0, FK_GEMV_STORE, im->logits, s));
        OK(fk_bf16_to_f32(im->logits, V, im->logits_f, s));
        CU(cudaMemcpyAsync(logits_last, im->logits_f, (size_t)V * 4, cudaMemcpyDeviceToHost, s));
    }
    CU(cudaStreamSynchronize(s));
    b->seq_len[seq] = T;
    return 0;
}

/* Every kernel of one decode step for B rows whose ids/seq/pos are already in d_step. No host sync, no
 * allocation: this is what the graph captures. */
static int enqueue_decode(frigg_backend *b, int B) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    int D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, H = c->num_heads, hd = c->head_dim;
    float eps = (float)c->rms_norm_eps;
    cudaStream_t s = im->stream;
    const int32_t *ids = im->d_step, *rseq = im->d_step + MAX_BATCH, *rpos = im->d_step + 2 * MAX_BATCH;
    OK(fk_embed(im->embed, im->zli, ids, B, D, (float)c->embedding_scale, im->zH, im->zL, im->x, s));
    for (int r = 0; r < frigg_num_runs(c); r++) {
        const dev_layer *Ls = im->layers[frigg_run_stack(c, r)];
        for (int i = 0; i < c->layers_per_stack; i++) {
            int slot = frigg_slot(c, r, i);
            fk_qkv_epi qa = {im->cos_t, im->sin_t, rseq, rpos, im->q, k_slot(im, slot), v_slot(im, slot),
                             im->seq_stride, b->max_ctx, hd};
            int sk = im->skip;
            if (!(sk & FRIGG_SKIP_QKV)) /* norm + gqkv + RoPE + KV write */
                OK(fk_gemv_qkv(Ls[i].gqkv, D, im->x, B, eps, im->gqkv, &qa, s));
            if (!(sk & FRIGG_SKIP_ATTN))
                OK(fk_attn_decode(im->q, k_slot(im, slot), v_slot(im, slot), im->seq_stride, rseq, rpos, im->gqkv, B, H,
                                  hd, b->max_ctx, im->attn_work, im->attn_counters, im->y, s));
            if (!(sk & FRIGG_SKIP_O)) OK(fk_gemv(Ls[i].o, D, D, im->y, B, 0, eps, FK_GEMV_RESID, im->x, s));
            if (!(sk & FRIGG_SKIP_GU)) OK(fk_gemv(Ls[i].gu, 2 * I, D, im->x, B, 1, eps, FK_GEMV_SWIGLU, im->m, s));
            if (!(sk & FRIGG_SKIP_DOWN)) OK(fk_gemv(Ls[i].down, D, I, im->m, B, 0, eps, FK_GEMV_RESID, im->x, s));
        }
        OK(run_end(im, c, r, B));
    }
    if (!(im->skip & FRIGG_SKIP_LMHEAD)) OK(fk_gemv(im->lm_head, V, D, im->zH, B, 0, eps, FK_GEMV_STORE, im->logits, s));
    return fk_argmax_bf16(im->logits, B, V, im->d_step, im->d_step + 2 * MAX_BATCH, im->argmax_work, s);
}

static int capture(frigg_backend *b, int B) {
    cuda_impl *im = b->impl;
    if (im->graph[B]) return 0;
    cudaGraph_t g;
    CU(cudaStreamBeginCapture(im->stream, cudaStreamCaptureModeThreadLocal));
    int rc = enqueue_decode(b, B);
    cudaError_t e = cudaStreamEndCapture(im->stream, &g);
    if (rc) return -1;
    if (e != cudaSuccess) {
        frigg_set_error("CUDA graph capture of the decode step failed: %s", cudaGetErrorString(e));
        return -1;
    }
    size_t n = 0;
    CU(cudaGraphGetNodes(g, NULL, &n));
    im->graph_nodes[B] = (int)n;
    e = cudaGraphInstantiate(&im->graph[B], g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        im->graph[B] = NULL;
        frigg_set_error("CUDA graph instantiation failed: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* The checks every decode call makes before it touches the device: `steps` more tokens for each sequence. */
static int check_step(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int steps) {
    int V = b->model->cfg.vocab_size;
    if (nseq < 1 || nseq > MAX_BATCH) {
        frigg_set_error("decode: %d sequences in one step (the CUDA engine takes 1..%d)", nseq, MAX_BATCH);
        return -1;
    }
    for (int i = 0; i < nseq; i++) {
        if (seqs[i] < 0 || seqs[i] >= b->max_seqs || b->seq_len[seqs[i]] == 0) {
            frigg_set_error("decode: sequence %d has no prefilled prompt", seqs[i]);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (seqs[j] == seqs[i]) {
                frigg_set_error("decode: sequence %d appears twice in one step", seqs[i]);
                return -1;
            }
        if ((long)b->seq_len[seqs[i]] + steps > b->max_ctx) {
            frigg_set_error("context full: %d cached + %d new tokens > %d", b->seq_len[seqs[i]], steps, b->max_ctx);
            return -1;
        }
        if (ids[i] < 0 || ids[i] >= V) {
            frigg_set_error("token id %d is outside the vocabulary [0, %d)", ids[i], V);
            return -1;
        }
    }
    return 0;
}

/* Queue one step of B rows whose input is already in d_step (graph or eager). */
static int launch_step(frigg_backend *b, int B) {
    cuda_impl *im = b->impl;
    if (!im->use_graphs) return enqueue_decode(b, B);
    OK(capture(b, B));
    CU(cudaGraphLaunch(im->graph[B], im->stream));
    return 0;
}

/* Stage ids/seq/pos from the host and queue one step. Leaves logits and greedy ids on the device. */
static int stage_step(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids) {
    cuda_impl *im = b->impl;
    CU(cudaSetDevice(im->device));
    for (int i = 0; i < nseq; i++) {
        im->h_step[i] = ids[i];
        im->h_step[MAX_BATCH + i] = seqs[i];
        im->h_step[2 * MAX_BATCH + i] = b->seq_len[seqs[i]];
    }
    CU(cudaMemcpyAsync(im->d_step, im->h_step, 3 * MAX_BATCH * 4, cudaMemcpyHostToDevice, im->stream));
    return launch_step(b, nseq);
}

static int decode_common(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids) {
    OK(check_step(b, nseq, seqs, ids, 1));
    OK(stage_step(b, nseq, seqs, ids));
    for (int i = 0; i < nseq; i++) b->seq_len[seqs[i]]++;
    return 0;
}

static int cuda_decode(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, float *logits) {
    cuda_impl *im = b->impl;
    size_t V = (size_t)b->model->cfg.vocab_size;
    OK(decode_common(b, nseq, seqs, ids));
    OK(fk_bf16_to_f32(im->logits, nseq * V, im->logits_f, im->stream));
    CU(cudaMemcpyAsync(logits, im->logits_f, nseq * V * 4, cudaMemcpyDeviceToHost, im->stream));
    CU(cudaStreamSynchronize(im->stream));
    return 0;
}

/* One step whose rows' k largest logits (and only those) come back: for a top-k draw on the host. */
static int cuda_decode_topk(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int k, float *vals,
                            int32_t *out_ids) {
    cuda_impl *im = b->impl;
    int V = b->model->cfg.vocab_size;
    if (k < 1 || k > FRIGG_TOPK_MAX || k >= V) {
        frigg_set_error("decode_topk: k %d (1..%d, below the vocabulary of %d)", k, FRIGG_TOPK_MAX, V);
        return -1;
    }
    OK(decode_common(b, nseq, seqs, ids));
    OK(fk_topk_bf16(im->logits, nseq, V, k, im->topk_vals, im->topk_ids, im->topk_work, im->stream));
    CU(cudaMemcpyAsync(vals, im->topk_vals, (size_t)nseq * k * 4, cudaMemcpyDeviceToHost, im->stream));
    CU(cudaMemcpyAsync(out_ids, im->topk_ids, (size_t)nseq * k * 4, cudaMemcpyDeviceToHost, im->stream));
    CU(cudaStreamSynchronize(im->stream));
    return 0;
}

/* Queue greedy step k: its input from the host (k = 0) or from step k - 1 on the device; its ids then go to
 * h_out[k % 2], and out_ready[k % 2] marks them. */
static int queue_greedy_step(frigg_backend *b, int k, int nseq, const int *seqs, const int32_t *ids) {
    cuda_impl *im = b->impl;
    OK(k == 0 ? stage_step(b, nseq, seqs, ids) : launch_step(b, nseq));
    CU(cudaMemcpyAsync(im->h_out + (k & 1) * MAX_BATCH, im->d_step, (size_t)nseq * 4, cudaMemcpyDeviceToHost, im->stream));
    CU(cudaEventRecord(im->out_ready[k & 1], im->stream));
    return 0;
}

/* Greedy decode, pipelined two steps deep. A step leaves its greedy ids and the next positions in d_step
 * (fk_argmax_bf16's advance), so step k+1 is queued, with nothing from the host, before step k's ids have
 * reached it: the host's round trip (copy back, wake-up, next launch) overlaps step k+1 instead of idling
 * the GPU between steps. Step k's ids are copied to h_out[k % 2] behind it, and out_ready[k % 2] marks them.
 * When on_ids asks to stop, the step queued behind is discarded: it wrote keys and values one position
 * past the sequence's new end, where nothing reads them, and seq_len does not count it. */
static int cuda_decode_greedy(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int steps,
                              int (*on_ids)(void *ctx, const int32_t *ids), void *ctx) {
    cuda_impl *im = b->impl;
    if (steps < 0) {
        frigg_set_error("decode: %d steps", steps);
        return -1;
    }
    if (steps == 0) return 0;
    OK(check_step(b, nseq, seqs, ids, steps));
    int done = 0, queued = 0, rc = 0;
    int32_t got[MAX_BATCH];
    for (; queued < 2 && queued < steps; queued++) OK(queue_greedy_step(b, queued, nseq, seqs, ids));
    while (done < steps) {
        int k = done;
        CU(cudaEventSynchronize(im->out_ready[k & 1]));
        memcpy(got, im->h_out + (k & 1) * MAX_BATCH, (size_t)nseq * 4);
        for (int i = 0; i < nseq; i++) b->seq_len[seqs[i]]++;
        done++;
        if (on_ids(ctx, got)) {
            rc = 1;
            break;
        }
        if (queued < steps) OK(queue_greedy_step(b, queued++, nseq, seqs, ids)); /* h_out[k % 2] is read: reuse it */
    }
    /* a stop leaves one step in flight: let it finish before anything else uses d_step or h_out */
    if (rc) CU(cudaStreamSynchronize(im->stream));
    return done;
}

/* One greedy step, its ids back before it returns: decode_greedy of one step. */
typedef struct {
    int32_t *out;
    int n;
} ids_sink;
static int keep_out_ids(void *ctx, const int32_t *ids) {
    ids_sink *k = ctx;
    memcpy(k->out, ids, sizeof(int32_t) * (size_t)k->n);
    return 0;
}
static int cuda_decode_argmax(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int32_t *out_ids) {
    ids_sink k = {out_ids, nseq};
    return cuda_decode_greedy(b, nseq, seqs, ids, 1, keep_out_ids, &k) == 1 ? 0 : -1;
}

static void cuda_destroy(frigg_backend *b) {
    if (!b) return;
    cuda_impl *im = b->impl;
    if (im) {
        cudaSetDevice(im->device);
        if (im->stream) cudaStreamSynchronize(im->stream);
        for (int i = 0; i <= MAX_BATCH; i++)
            if (im->graph[i]) cudaGraphExecDestroy(im->graph[i]);
        for (int i = 0; i < im->nallocs; i++) cudaFree(im->allocs[i]);
        if (im->h_step) cudaFreeHost(im->h_step);
        if (im->h_out) cudaFreeHost(im->h_out);
        for (int i = 0; i < 2; i++)
            if (im->out_ready[i]) cudaEventDestroy(im->out_ready[i]);
        if (im->blas) cublasDestroy(im->blas);
        if (im->stream) cudaStreamDestroy(im->stream);
        free(im->layers[0]);
        free(im->layers[1]);
        free(im);
    }
    free(b->seq_len);
    free(b);
}

static int upload_model(cuda_impl *im, const frigg_model *m) {
    const frigg_config *c = &m->cfg;
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    OK(dalloc(im, (void **)&im->embed, V * D * 2, "embed_tokens"));
    OK(dalloc(im, (void **)&im->lm_head, V * D * 2, "lm_head"));
    OK(dalloc(im, (void **)&im->zli, D * 2, "z_L_init"));
    OK(upload(im->embed, m->embed.w, V * D));
    OK(upload(im->lm_head, m->lm_head.w, V * D));
    OK(upload(im->zli, m->z_L_init, D));
    int n = c->layers_per_stack;
    /* One allocation per stack keeps the allocation count small. */
    size_t per_layer = 4 * D * D + D * D + 2 * I * D + D * I;
    for (int s = 0; s < 2; s++) {
        uint16_t *base;
        OK(dalloc(im, (void **)&base, per_layer * n * 2, s ? "H stack" : "L stack"));
        im->layers[s] = frigg_xcalloc(n, sizeof(dev_layer));
        for (int i = 0; i < n; i++) {
            const frigg_layer *L = &m->stack[s][i];
            dev_layer *d = &im->layers[s][i];
            d->gqkv = base + per_layer * i;
            d->o = d->gqkv + 4 * D * D;
            d->gu = d->o + D * D;
            d->down = d->gu + 2 * I * D;
            /* Row blocks gate, q, k, v and gate, up, whatever the file layout (MODEL.md §2). */
            OK(upload(d->gqkv, L->gate.w, D * D));
            OK(upload(d->gqkv + D * D, L->q.w, D * D));
            OK(upload(d->gqkv + 2 * D * D, L->k.w, D * D));
            OK(upload(d->gqkv + 3 * D * D, L->v.w, D * D));
            OK(upload(d->o, L->o.w, D * D));
            OK(upload(d->gu, L->mlp_gate.w, I * D));
            OK(upload(d->gu + I * D, L->up.w, I * D));
            OK(upload(d->down, L->down.w, D * I));
        }
    }
    return 0;
}

static int setup(frigg_backend *b, cuda_impl *im, const frigg_model *m) {
    const frigg_config *c = &m->cfg;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        frigg_set_error("backend \"cuda\": no CUDA device is present");
        return -1;
    }
    if (im->device < 0 || im->device >= ndev) {
        frigg_set_error("backend \"cuda\": device %d does not exist (%d present)", im->device, ndev);
        return -1;
    }
    int hd = c->head_dim;
    if ((hd != 16 && hd != 32 && hd != 64 && hd != 128) || c->hidden_size % 8 || c->intermediate_size % 8 ||
        c->hidden_size * MAX_BATCH * 2 > 64 * 1024) {
        frigg_set_error("backend \"cuda\": unsupported shape (head_dim %d, hidden %d, intermediate %d); head_dim must "
                        "be 16/32/64/128 and the widths multiples of 8, hidden <= 4096", hd, c->hidden_size,
                        c->intermediate_size);
        return -1;
    }
    CU(cudaSetDevice(im->device));
    if (fk_init()) return -1;
    CU(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking));
    if (frigg_cuda_gemm_handle(&im->blas, im->stream)) return -1;
    OK(upload_model(im, m));
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, ctx = b->max_ctx;
    /* RoPE tables from the CPU reference function: identical bf16 values on both engines. */
    float *cs = frigg_xmalloc(ctx * hd * 4), *sn = frigg_xmalloc(ctx * hd * 4);
    uint16_t *h16 = frigg_xmalloc(ctx * hd * 2);
    frigg_cpu_rope_tables(c, 0, (int)ctx, cs, sn);
    int rc = dalloc(im, (void **)&im->cos_t, ctx * hd * 2, "RoPE tables") ||
             dalloc(im, (void **)&im->sin_t, ctx * hd * 2, "RoPE tables");
    if (!rc) {
        for (size_t i = 0; i < ctx * hd; i++) h16[i] = frigg_f32_to_bf16(cs[i]);
        rc = upload(im->cos_t, h16, ctx * hd);
        for (size_t i = 0; i < ctx * hd && !rc; i++) h16[i] = frigg_f32_to_bf16(sn[i]);
        if (!rc) rc = upload(im->sin_t, h16, ctx * hd);
    }
    free(cs);
    free(sn);
    free(h16);
    if (rc) return -1;
    im->slot_stride = (long long)D * ctx;
    im->seq_stride = im->slot_stride * c->num_slots;
    size_t kv = (size_t)im->seq_stride * b->max_seqs * 2;
    OK(dalloc(im, (void **)&im->kc, kv, "the K cache"));
    OK(dalloc(im, (void **)&im->vc, kv, "the V cache"));
    size_t R = ctx > MAX_BATCH ? ctx : MAX_BATCH;
    im->rows = (int)R;
    uint16_t **bufs[] = {&im->zH, &im->zL, &im->x, &im->a, &im->q, &im->y, &im->t1};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) OK(dalloc(im, (void **)bufs[i], R * D * 2, "activations"));
    OK(dalloc(im, (void **)&im->gqkv, R * 4 * D * 2, "activations"));
    OK(dalloc(im, (void **)&im->gu, R * 2 * I * 2, "activations"));
    OK(dalloc(im, (void **)&im->m, R * I * 2, "activations"));
    OK(dalloc(im, (void **)&im->d_ids, R * 4, "ids"));
    OK(dalloc(im, (void **)&im->d_zero, R * 4, "ids"));
    OK(dalloc(im, (void **)&im->d_iota, R * 4, "ids"));
    OK(dalloc(im, (void **)&im->d_step, 3 * MAX_BATCH * 4, "ids"));
    OK(dalloc(im, &im->argmax_work, fk_argmax_work_bytes(MAX_BATCH), "argmax partials"));
    OK(dalloc(im, &im->topk_work, fk_topk_work_bytes(MAX_BATCH), "top-k counts"));
    OK(dalloc(im, (void **)&im->topk_vals, (size_t)MAX_BATCH * FRIGG_TOPK_MAX * 4, "top-k values"));
    OK(dalloc(im, (void **)&im->topk_ids, (size_t)MAX_BATCH * FRIGG_TOPK_MAX * 4, "top-k ids"));
    OK(dalloc(im, (void **)&im->logits, (size_t)LOGIT_CHUNK * V * 2, "logits"));
    OK(dalloc(im, (void **)&im->logits_f, (size_t)LOGIT_CHUNK * V * 4, "logits"));
    OK(dalloc(im, (void **)&im->attn_work, fk_attn_decode_work_floats(MAX_BATCH, c->num_heads, hd, (int)ctx) * 4,
              "attention partials"));
    OK(dalloc(im, (void **)&im->attn_counters, (size_t)MAX_BATCH * c->num_heads * 4, "attention counters"));
    CU(cudaMemset(im->attn_counters, 0, (size_t)MAX_BATCH * c->num_heads * 4));
    int32_t *iota = frigg_xmalloc(R * 4);
    for (size_t i = 0; i < R; i++) iota[i] = (int32_t)i;
    cudaError_t e = cudaMemcpy(im->d_iota, iota, R * 4, cudaMemcpyHostToDevice);
    free(iota);
    CU(e);
    CU(cudaMemset(im->d_zero, 0, R * 4));
    CU(cudaMemset(im->d_step, 0, 3 * MAX_BATCH * 4));
    CU(cudaMallocHost((void **)&im->h_step, 3 * MAX_BATCH * 4));
    CU(cudaMallocHost((void **)&im->h_out, 2 * MAX_BATCH * 4));
    for (int i = 0; i < 2; i++) CU(cudaEventCreateWithFlags(&im->out_ready[i], cudaEventDisableTiming));
    CU(cudaDeviceSynchronize());
    return 0;
}

frigg_backend *frigg_backend_cuda_create(const frigg_model *m, const frigg_backend_opts *opts) {
    frigg_backend_opts o;
    frigg_backend *b = frigg_backend_alloc("cuda", m, opts, &o);
    cuda_impl *im = frigg_xcalloc(1, sizeof *im);
    b->prefill = cuda_prefill;
    b->decode = cuda_decode;
    b->decode_argmax = cuda_decode_argmax;
    b->decode_greedy = cuda_decode_greedy;
    b->decode_topk = cuda_decode_topk;
    b->destroy = cuda_destroy;
    b->impl = im;
    im->device = o.device;
    im->use_graphs = 1;
    if (setup(b, im, m)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", frigg_error());
        cuda_destroy(b);
        frigg_set_error("%s", msg);
        return NULL;
    }
    return b;
}

int frigg_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}

void frigg_cuda_set_graphs(frigg_backend *b, int on) { ((cuda_impl *)b->impl)->use_graphs = on; }
void frigg_cuda_set_skip(frigg_backend *b, int mask) { ((cuda_impl *)b->impl)->skip = mask; }

int frigg_cuda_kernels_per_step(frigg_backend *b, int nseq) {
    cuda_impl *im = b->impl;
    if (nseq < 1 || nseq > MAX_BATCH || cudaSetDevice(im->device) != cudaSuccess || capture(b, nseq)) return -1;
    return im->graph_nodes[nseq];
}

size_t frigg_cuda_bytes(const frigg_backend *b) { return ((const cuda_impl *)b->impl)->bytes; }
