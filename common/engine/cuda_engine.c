/* cuda_engine.c — the CUDA engine behind backend.h (MODEL.md §3, same rounding points as cpu_engine.c).
 * Weights are uploaded once as they are stored, bf16 or int8/int4 with their scales (the split layout is
 * packed on upload, so the device always holds gqkv [4D][D] and gate_up [2I][D]; a quantized embedding as
 * the bf16 values it holds); every buffer, including a static KV slab per sequence
 * [slot][head][max_ctx][head_dim] (bf16, or with kv_dtype INT8 int8 values and one fp32 scale per (slot, head,
 * position), quantized when written as the CPU engine quantizes them: frigg_kv_quantize), is allocated at
 * creation. Prefill: cuBLAS GEMMs + the tiled PrefixLM attention, a whole prompt at once or a slice of its layers per step (frigg_row.prefill_layers). Decode: up to 16 rows, fused GEMVs (one pass over the weights); 17 to 64 rows, the prefill's
 * cuBLAS GEMMs with the per-row RoPE/KV write and the decode attention (a GEMM reads the weights once for all
 * rows, where chained 16-row GEMVs would read them B/16 times); with batch_invariant, 16-row GEMV passes at every
 * size, so a row's result never depends on its neighbours. Each batch size's step is replayed from its own
 * CUDA graph, captured on first use; only ids (or the logits when asked) come back. Each engine binds its own
 * device and stream. */
#include <cublas_v2.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_ops.h"
#include "cuda_backend.h"
#include "cuda_gemm.h"
#include "sampler.h"
#include "../../kernels/kernels.h"
#include "base/util.h"

#define MAX_BATCH 64 /* decode rows per step (the scheduler's cap, b->max_rows) */
#define GEMV_ROWS FK_GEMV_MAX_ROWS /* rows one GEMV pass takes (kernels.h); larger decode steps take the GEMM path */
#define LOGIT_CHUNK 64 /* rows of the lm_head GEMM when all prompt logits are asked for */
/* Whole prompts of one step prefilled together (run_prefill_group): at most PF_GROUP of them (the rows of one
 * lm_head GEMV pass), at most PF_TOKENS tokens in all (the activation buffers hold that many rows). */
#define PF_GROUP 8
_Static_assert(PF_GROUP <= FK_PREFILL_GROUP_MAX, "a group's attention is one fk_attn_prefill_group launch");
#define PF_TOKENS 4096
_Static_assert(LOGIT_CHUNK >= MAX_BATCH, "the logits buffers hold a decode step's rows");

/* A layer's weights on the device, as descriptors (w: device memory): gqkv [4D][D], o [D][D], gate_up [2I][D],
 * down [D][I]. The launchers dispatch on their dtype. */
typedef struct {
    frigg_mat gqkv, o, gu, down;
} dev_layer;

typedef struct {
    int device;
    fk_ctx *kern; /* the kernels' context on this device: its properties and this engine's kernel choices */
    cudaStream_t stream;
    cublasHandle_t blas;
    void *blas_ws; /* cuBLAS's workspace, ours so that GEMMs can be captured into the decode graphs */
    uint16_t *dq_scratch; /* a quantized matrix dequantized for a GEMM (the largest layer matrix; lm_head in tiles) */
    size_t dq_bytes;
    frigg_mat embed, lm_head; /* [V][D] */
    uint16_t *zli;
    dev_layer *layers[2];
    /* A quantized checkpoint's bf16 copy (frigg_backend_opts.dequant_rows; see layers_for): its layer matrices
     * (bf_layers, NULL when there is none) and a quantized lm_head (bf_lm_head when bf_lm), dequantized at load.
     * A pass over the weights for at least dq_rows rows reads them instead of the stored ones. */
    dev_layer *bf_layers[2];
    frigg_mat bf_lm_head;
    int bf_lm, dq_rows;
    /* whether the layers / lm_head have a copy (at dq_rows 1 it replaced the stored matrices, which were freed:
     * layers and lm_head are then the copy's descriptors, bf_layers and bf_lm unset) */
    int copied_layers, copied_lm;
    uint16_t *cos_t, *sin_t;
    /* The KV cache, [seq][slot][head][max_ctx][head_dim] elements (seq_stride per sequence, slot_stride per slot):
     * bf16 (kc, vc); or, with kv_dtype INT8 (int8 set), int8 values (k8, v8) and their fp32 scales (ks, vs:
     * [seq][slot][head][max_ctx], sc_seq_stride and sc_slot_stride), and no bf16 cache at all. A decode step
     * writes its rows' K and V inside its attention kernel (fk_attn_decode_i8); a prefill stages its rows' RoPE'd
     * K and V as bf16 rows (kv_rows, [rows][2D]: K in columns [0, D), V in [D, 2D)), which fk_kv_write_i8
     * quantizes into the cache, and a prefill layer reads its slot's int8 K and V back as bf16
     * (kd, vd: [head][max_ctx][head_dim] each, one slot of one sequence) for the prefill attention. */
    uint16_t *kc, *vc;
    long long seq_stride, slot_stride;
    int int8;
    int8_t *k8, *v8;
    float *ks, *vs;
    long long sc_seq_stride, sc_slot_stride;
    uint16_t *kv_rows, *kd, *vd;
    int rows; /* capacity of the activation buffers */
    uint16_t *zH, *zL, *x, *a, *gqkv, *q, *y, *t1, *gu, *m;
    /* A prompt prefilled a slice of layers per step (frigg_row.prefill_layers; at most one at a time) keeps its
     * states and residual in buffers of its own ([ctx][D] each), so decode steps and whole prefills can run
     * between its slices; the scratch above is only used within a slice. */
    uint16_t *pzH, *pzL, *px, *pa;
    struct {
        int active, seq, T, P, done; /* done: layer steps run so far */
    } pf;
    int32_t *d_ids, *d_zero, *d_iota;
    int32_t *d_pseq, *d_ppos; /* [rows]: each token's sequence and position in a grouped prefill */
    int32_t *h_pf;            /* [3][rows] pinned: a grouped prefill's ids, sequences and positions */
    /* [3][MAX_BATCH]: ids, seq, pos of a decode step. The step's last kernel overwrites the ids with its greedy
     * ids and adds one to the positions: the input of a next step whose rows take FRIGG_TOKEN_LAST_GREEDY. */
    int32_t *d_step;
    void *argmax_work; /* fk_argmax_work_bytes(MAX_BATCH) */
    void *topk_work;   /* fk_topk_work_bytes(MAX_BATCH) */
    float *topk_vals;  /* [MAX_BATCH][FRIGG_TOPK_MAX] */
    int32_t *topk_ids; /* [MAX_BATCH][FRIGG_TOPK_MAX] */
    int32_t *h_step, *h_out; /* pinned staging; h_out: [3][MAX_BATCH]: two queued greedy steps, one mixed */
    /* structured output's masks of a greedy step's rows (frigg_row.mask), [MAX_BATCH][(V + 31) / 32] words: staged in
     * pinned memory, copied in, read by the masked argmax (run_decode) */
    uint32_t *h_mask, *d_mask;
    /* sampled rows' draws (FRIGG_WANT_SAMPLE): their parameters staged in two pinned slots (a step queued behind
     * another may stage its own while the first's copy is still ahead of it in the stream), the device's copy, the
     * kernels' partials, and the answers (the id or -1) that the copy to h_out then takes instead of d_step */
    fk_draw *h_draw, *d_draw;
    int draw_slot;
    void *sample_work;
    int32_t *d_answers;
    cudaEvent_t out_ready[2]; /* h_out[k] holds its step's ids */
    uint16_t *logits;  /* [LOGIT_CHUNK][V] bf16 */
    float *logits_f;   /* [LOGIT_CHUNK][V] */
    float *attn_work;
    int *attn_counters; /* [MAX_BATCH][heads], zero between calls */
    /* sequence state (the engine's own: positions are staged at submit) */
    int *len;                  /* tokens in each sequence's cache, steps queued included */
    int32_t *greedy;           /* each sequence's greedy id of its last collected step (when known) */
    unsigned char *last_greedy;
    /* steps queued (submit) and not yet collected, oldest first */
    struct {
        frigg_row *rows;
        int nrows;
        int async;             /* its greedy ids are copied back behind it (h_out[slot]) */
        int fetched;           /* ...and have been read into im->greedy */
        int slot;
        int nseq, seqs[MAX_BATCH];
    } pend[2];
    int nq, next_slot;
    int last_B, last_seqs[MAX_BATCH]; /* the decode rows of the last launch: what d_step holds for the next */
    float *host_row;           /* [PF_GROUP][V] staging for host-side reductions */
    cudaGraphExec_t graph[MAX_BATCH + 1];
    int graph_nodes[MAX_BATCH + 1];
    int use_graphs;
    int batch_invariant; /* frigg_backend_opts.batch_invariant */
    size_t bytes;
    void *allocs[64];
    size_t alloc_bytes[64];
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
    im->alloc_bytes[im->nallocs] = bytes;
    im->allocs[im->nallocs++] = *p;
    im->bytes += bytes;
    return 0;
}

/* Free one allocation of dalloc's (the stored weights that the bf16 copy replaces). */
static void dfree(cuda_impl *im, const void *p) {
    for (int i = 0; i < im->nallocs; i++)
        if (im->allocs[i] == p) {
            cudaFree(im->allocs[i]);
            im->bytes -= im->alloc_bytes[i];
            im->nallocs--;
            im->allocs[i] = im->allocs[im->nallocs];
            im->alloc_bytes[i] = im->alloc_bytes[im->nallocs];
            return;
        }
}

static int upload(uint16_t *dst, const uint16_t *src, size_t elems) {
    CU(cudaMemcpy(dst, src, elems * 2, cudaMemcpyHostToDevice));
    return 0;
}

/* C[T][O] = A[T][K] · W[O][K]^T (cuda_gemm.h: one call shared with the prefill microbenchmark); a quantized W
 * is dequantized into the engine's scratch first, in tiles where it does not fit (the lm_head). */
static int gemm(cuda_impl *im, const frigg_mat *W, const uint16_t *A, int T, uint16_t *C) {
    if (W->dtype == FRIGG_DT_BF16) return frigg_cuda_gemm(im->blas, W, A, T, C);
    return frigg_cuda_gemm_dq(im->kern, im->blas, W, A, T, C, im->dq_scratch, im->dq_bytes);
}

/* The weights a pass over rows rows reads: from dq_rows rows on, a quantized checkpoint's bf16 copy, where the
 * quantized kernels lose to the bf16 ones. Measured on the H200 at ctx 512 with the stored weights at every size
 * (frigg-bench matrix --builds --dequant-rows off, benchmarks/h200-2026-12-04/dqsmall/ and dqcopy/): int8 0.94x
 * bf16's tok/s at batch 1, 0.97x at 2, 0.82x at 4, 0.85x at 8, 0.77x at 32 (the dequantizing GEMM), 0.81x at 64;
 * int4 g128 1.08x, 1.05x, 0.81x, 0.83x, 0.81x, 0.84x (frigg_dequant_rows' defaults). The copy holds the values the
 * stored weights define (fk_dequant_bf16: bf16(q * scale)), so a pass on it multiplies by the same numbers; what
 * differs is the kernel (the bf16 rows of gemv.cu's table instead of the q. rows), and with it the summation order
 * as between batch sizes. */
static const dev_layer *layers_for(const cuda_impl *im, const frigg_config *c, int run, int rows) {
    int st = frigg_run_stack(c, run);
    return im->bf_layers[st] && rows >= im->dq_rows ? im->bf_layers[st] : im->layers[st];
}
static const frigg_mat *lm_head_for(const cuda_impl *im, int rows) {
    return im->bf_lm && rows >= im->dq_rows ? &im->bf_lm_head : &im->lm_head;
}

/* Whether a decode step runs its projections as GEMV passes (kernels.h: up to 16 rows in one pass over the
 * weights, on tensor cores past 8) rather than cuBLAS: up to 16 rows, and at every size when batch-invariant.
 * Past 16 quantized weights too take the GEMM (dequantized into the scratch): 64 rows by passes of an int4
 * build (8 rows each, the CUDA-core kernel then) ran at 645.6 tok/s where the int8 build's dequantizing GEMM ran
 * at 3,890.3 (benchmarks/h200-2026-12-02/quant/). */
static int decode_by_passes(const cuda_impl *im, int B) { return B <= GEMV_ROWS || im->batch_invariant; }

static uint16_t *k_slot(cuda_impl *im, int slot) { return im->kc + (size_t)slot * im->slot_stride; }
static uint16_t *v_slot(cuda_impl *im, int slot) { return im->vc + (size_t)slot * im->slot_stride; }
/* The int8 cache of one slot (sequence 0; sequence q at q * seq_stride values, q * sc_seq_stride scales). */
static int8_t *k8_slot(cuda_impl *im, int slot) { return im->k8 + (size_t)slot * im->slot_stride; }
static int8_t *v8_slot(cuda_impl *im, int slot) { return im->v8 + (size_t)slot * im->slot_stride; }
static float *ks_slot(cuda_impl *im, int slot) { return im->ks + (size_t)slot * im->sc_slot_stride; }
static float *vs_slot(cuda_impl *im, int slot) { return im->vs + (size_t)slot * im->sc_slot_stride; }

/* A decode step's K/V write and attention on the int8 cache, from the step's gqkv rows [B][4D] as projected
 * (not yet rotated), in one kernel (fk_attn_decode_i8): q and K rotated at each row's own position, K and V
 * quantized into position row_pos of sequence row_seq of the slot, then the attention over the cache with the
 * output gate into y. The CPU engine's order: a position is quantized when written, and attention reads what the
 * cache holds, the new position included. No host sync, no allocation (the decode graphs capture it). */
static int decode_attn_i8(frigg_backend *b, int slot, int B) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    const int32_t *rseq = im->d_step + MAX_BATCH, *rpos = im->d_step + 2 * MAX_BATCH;
    return fk_attn_decode_i8(im->kern, im->gqkv, im->cos_t, im->sin_t, k8_slot(im, slot), v8_slot(im, slot),
                             ks_slot(im, slot), vs_slot(im, slot), im->seq_stride, rseq, rpos, B, c->num_heads, c->head_dim,
                             b->max_ctx, im->attn_work, im->attn_counters, im->y, im->stream);
}

/* The head_dims of the attention kernel with the step's K/V write inside it (fk_attn_decode_write, _i8). */
static int fused_write_hd(int hd) { return hd == 32 || hd == 64 || hd == 128; }

/* The same for the bf16 cache (fk_attn_decode_write): RoPE, K and V into the slot and the attention, from the
 * step's gqkv rows as projected; the bits of fk_rope_kv then fk_attn_decode (kernels.h). */
static int decode_attn_write(frigg_backend *b, int slot, int B) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    const int32_t *rseq = im->d_step + MAX_BATCH, *rpos = im->d_step + 2 * MAX_BATCH;
    return fk_attn_decode_write(im->kern, im->gqkv, im->cos_t, im->sin_t, k_slot(im, slot), v_slot(im, slot),
                                im->seq_stride, rseq, rpos, B, c->num_heads, c->head_dim, b->max_ctx, im->attn_work,
                                im->attn_counters, im->y, im->stream);
}

/* A prompt's K/V write and attention on the int8 cache (one layer of sequence seq, slot `slot`, from gqkv rows
 * [T][4D]): q and the RoPE'd K, V rows at positions 0..T-1 (fk_rope_rows), quantized into positions [0, T) as
 * the CPU engine writes them (fk_kv_write_i8), then read back as bf16 (fk_kv_dequant_i8, into kd/vd) for the
 * PrefixLM attention (fk_attn_prefill, whose max_ctx is kd/vd's row stride), so the prompt's rows attend to the
 * values the cache holds, as every later decode step does (cpu_engine.c: a row attends to the same values
 * whether its keys were written by this prefill or by earlier steps). kd/vd hold bf16(q * scale), where the CPU
 * engine attends over the fp32 q * scale: one bf16 rounding more (at most 2^-9 relative per value), the rounding
 * a bf16 cache gives every key and value, within the engines' tolerance of each other. */
static int prefill_attn_i8(frigg_backend *b, int seq, int slot, int T, int prefix_len) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    int D = c->hidden_size, H = c->num_heads, hd = c->head_dim;
    cudaStream_t s = im->stream;
    const fk_ctx *kc = im->kern;
    size_t so = (size_t)seq * im->seq_stride, sso = (size_t)seq * im->sc_seq_stride;
    int8_t *k8 = k8_slot(im, slot) + so, *v8 = v8_slot(im, slot) + so;
    float *ks = ks_slot(im, slot) + sso, *vs = vs_slot(im, slot) + sso;
    uint16_t *kr = im->kv_rows, *vr = im->kv_rows + D;
    OK(fk_rope_rows(kc, im->gqkv, T, H, hd, im->d_iota, im->cos_t, im->sin_t, im->q, kr, vr, 2 * D, s));
    /* rows of sequence 0 of caches that start at sequence seq (d_zero), at positions 0..T-1 (d_iota) */
    OK(fk_kv_write_i8(kc, kr, vr, 2 * D, im->d_zero, im->d_iota, T, H, hd, b->max_ctx, im->seq_stride, k8, v8, ks, vs, s));
    OK(fk_kv_dequant_i8(kc, k8, v8, ks, vs, T, H, hd, b->max_ctx, im->kd, im->vd, s));
    return fk_attn_prefill(kc, im->q, im->kd, im->vd, im->gqkv, T, H, hd, b->max_ctx, prefix_len, im->y, s);
}

/* A layer after its attention, on T rows (prefill, a grouped prefill, the GEMM decode step alike): o_proj onto
 * the residual x, post_attention_layernorm into a, the gated MLP onto x, and the next layer's input norm into a
 * (after the last layer simply unused). */
static int layer_mlp(cuda_impl *im, const frigg_config *c, const dev_layer *L, uint16_t *x, uint16_t *a, int T) {
    int D = c->hidden_size, I = c->intermediate_size;
    float eps = (float)c->rms_norm_eps;
    cudaStream_t s = im->stream;
    const fk_ctx *kc = im->kern;
    OK(gemm(im, &L->o, im->y, T, im->t1));
    OK(fk_add_rmsnorm(kc, x, im->t1, a, T, D, eps, s));
    OK(gemm(im, &L->gu, a, T, im->gu));
    OK(fk_swiglu(kc, im->gu, T, I, im->m, s));
    OK(gemm(im, &L->down, im->m, T, im->t1));
    return fk_add_rmsnorm(kc, x, im->t1, a, T, D, eps, s);
}

/* The activations a prefill keeps from one layer to the next: the two states, the residual stream and its
 * normed copy. */
typedef struct {
    uint16_t *zH, *zL, *x, *a;
} act_bufs;
static act_bufs main_bufs(cuda_impl *im) { return (act_bufs){im->zH, im->zL, im->x, im->a}; }

/* End of run r: the final norm replaces z_L (L run) or z_H (H run); then the next run's injection. */
static int run_end(cuda_impl *im, const act_bufs *A, const frigg_config *c, int r, int T) {
    int last = r == frigg_num_runs(c) - 1, D = c->hidden_size;
    float eps = (float)c->rms_norm_eps;
    if (frigg_run_stack(c, r) == FRIGG_STACK_L) return fk_run_end(im->kern, A->x, A->zL, A->zH, T, D, eps, im->stream);
    return fk_run_end(im->kern, A->x, A->zH, last ? NULL : A->zL, T, D, eps, im->stream);
}

/* A prompt's prefill in three parts, so that it can run whole or a slice of layers per step: the embedding,
 * layer steps [from, from + count) of the frigg_num_runs x layers_per_stack (each writing its slot's cache of
 * sequence seq), and the lm_head of the last row and/or of every row to the host (either may be NULL; this
 * part waits for the stream). */
static int prefill_begin(frigg_backend *b, const act_bufs *A, const int32_t *ids, int T) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    CU(cudaMemcpyAsync(im->d_ids, ids, (size_t)T * 4, cudaMemcpyHostToDevice, im->stream));
    return fk_embed(im->kern, &im->embed, im->zli, im->d_ids, T, c->hidden_size, (float)c->embedding_scale, A->zH, A->zL,
                    A->x, im->stream);
}

static int prefill_layers(frigg_backend *b, const act_bufs *A, int seq, int T, int prefix_len, int from, int count) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    int D = c->hidden_size, H = c->num_heads, hd = c->head_dim, Ls = c->layers_per_stack;
    float eps = (float)c->rms_norm_eps;
    cudaStream_t s = im->stream;
    const fk_ctx *kc = im->kern;
    size_t seq_off = (size_t)seq * im->seq_stride;
    for (int l = from; l < from + count; l++) {
        int r = l / Ls, i = l % Ls, slot = frigg_slot(c, r, i);
        const dev_layer *L = &layers_for(im, c, r, T)[i];
        if (i == 0) OK(fk_rmsnorm(kc, A->x, A->a, T, D, eps, s));
        OK(gemm(im, &L->gqkv, A->a, T, im->gqkv));
        if (im->int8) {
            OK(prefill_attn_i8(b, seq, slot, T, prefix_len));
        } else {
            uint16_t *ks = k_slot(im, slot) + seq_off, *vs = v_slot(im, slot) + seq_off;
            OK(fk_rope_kv(kc, im->gqkv, T, H, hd, im->d_zero, im->d_iota, im->cos_t, im->sin_t, im->q, ks, vs, 0,
                          b->max_ctx, s));
            OK(fk_attn_prefill(kc, im->q, ks, vs, im->gqkv, T, H, hd, b->max_ctx, prefix_len, im->y, s));
        }
        OK(layer_mlp(im, c, L, A->x, A->a, T));
        if (i == Ls - 1) OK(run_end(im, A, c, r, T));
    }
    return 0;
}

/* Greedy ids of logits rows [0, n) (im->logits, the lm_head's bf16 output) found on the device: the argmax
 * into topk_ids / topk_vals (free while a prefill runs: a step's top-k results are read back before its submit
 * returns), its n ids and values behind them into h_pf (its prompt ids, sequences and positions were copied out
 * earlier on the same stream). Where the host found them instead (4 MB of logits per four prompts back through
 * pageable memory, then a scan of 262,144 values per prompt), that was several percent of a grouped prefill.
 * prefill_greedy_read, after the stream is synchronized: out[p] (may be NULL) = row p's id, or -1 where its
 * largest value is not finite (outputs_from_row's rule, which seqgen reads as non-finite logits). */
static int prefill_greedy_enqueue(cuda_impl *im, int V, int n) {
    OK(fk_argmax_bf16(im->kern, im->logits, n, V, im->topk_ids, NULL, im->topk_vals, im->argmax_work, im->stream));
    CU(cudaMemcpyAsync(im->h_pf, im->topk_ids, (size_t)n * 4, cudaMemcpyDeviceToHost, im->stream));
    CU(cudaMemcpyAsync(im->h_pf + PF_GROUP, im->topk_vals, (size_t)n * 4, cudaMemcpyDeviceToHost, im->stream));
    return 0;
}
static void prefill_greedy_read(const cuda_impl *im, int n, int32_t *const *out) {
    for (int p = 0; p < n; p++) {
        float v;
        memcpy(&v, im->h_pf + PF_GROUP + p, 4);
        if (out[p]) *out[p] = isfinite(v) ? im->h_pf[p] : -1;
    }
}

/* logits_last: the last row's fp32 logits to the host; greedy: its greedy id found on the device instead
 * (prefill_greedy_enqueue; only without logits_all). */
static int prefill_finish(frigg_backend *b, const act_bufs *A, int T, float *logits_last, float *logits_all,
                          int32_t *greedy) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    int D = c->hidden_size, V = c->vocab_size;
    cudaStream_t s = im->stream;
    const fk_ctx *kc = im->kern;
    if (logits_all) {
        for (int t0 = 0; t0 < T; t0 += LOGIT_CHUNK) {
            int n = T - t0 < LOGIT_CHUNK ? T - t0 : LOGIT_CHUNK;
            OK(gemm(im, lm_head_for(im, n), A->zH + (size_t)t0 * D, n, im->logits));
            OK(fk_bf16_to_f32(kc, im->logits, (size_t)n * V, im->logits_f, s));
            CU(cudaMemcpyAsync(logits_all + (size_t)t0 * V, im->logits_f, (size_t)n * V * 4, cudaMemcpyDeviceToHost, s));
        }
        CU(cudaStreamSynchronize(s));
        if (logits_last) memcpy(logits_last, logits_all + (size_t)(T - 1) * V, (size_t)V * 4);
    } else if (logits_last || greedy) {
        OK(fk_gemv(kc, lm_head_for(im, 1), A->zH + (size_t)(T - 1) * D, 1, 0, 0, FK_GEMV_STORE, im->logits, s));
        if (logits_last) {
            OK(fk_bf16_to_f32(kc, im->logits, V, im->logits_f, s));
            CU(cudaMemcpyAsync(logits_last, im->logits_f, (size_t)V * 4, cudaMemcpyDeviceToHost, s));
        }
        if (greedy) OK(prefill_greedy_enqueue(im, V, 1));
    }
    CU(cudaStreamSynchronize(s));
    if (greedy && !logits_all) prefill_greedy_read(im, 1, &greedy);
    return 0;
}

/* A whole prompt into sequence `seq` (the step's checks were made), in the engine's main buffers.
 * Synchronous. */
static int run_prefill(frigg_backend *b, int seq, const int32_t *ids, int T, int prefix_len, float *logits_last,
                       float *logits_all, int32_t *greedy) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    act_bufs A = main_bufs(im);
    CU(cudaSetDevice(im->device));
    im->len[seq] = 0;
    OK(prefill_begin(b, &A, ids, T));
    OK(prefill_layers(b, &A, seq, T, prefix_len, 0, frigg_num_runs(c) * c->layers_per_stack));
    OK(prefill_finish(b, &A, T, logits_last, logits_all, greedy));
    im->len[seq] = T;
    return 0;
}

/* Whole prompts g[0..n) (2 <= n <= PF_GROUP, at most im->rows tokens in all) prefilled as one: their tokens
 * concatenated through the embedding, every projection GEMM and every row-wise kernel (norms, SwiGLU, the runs'
 * ends), which is most of a prefill's time and runs at a far higher FLOP rate on more rows (a 512-token
 * prompt's GEMMs have 512 rows); the RoPE/KV write with each token's own sequence and position, and the
 * attention of every prompt over its own cache with its own PrefixLM mask, in one launch (fk_attn_prefill_group:
 * each prompt's bits are its own launch's; groups of eight 512-token prompts 51.8k against 37.2k prompt tok/s
 * with a launch per prompt, benchmarks/h200-2026-12-04/pfgroup/). Row by row the math is
 * run_prefill's; the GEMMs' sums may run in another order at another row count (cuBLAS picks its algorithm
 * by shape), so a prompt's logits agree with its lone prefill within rounding, not bit for bit (which is why a
 * batch-invariant engine prefills one prompt at a time). last[i]: the last row's logits of prompt i on the
 * host, or NULL when not wanted; greedy[i]: its greedy id found on the device (prefill_greedy_enqueue), or
 * NULL. Synchronous. */
static int run_prefill_group(frigg_backend *b, frigg_row *const *g, int n, float *const *last, int32_t *const *greedy) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    int D = c->hidden_size, H = c->num_heads, hd = c->head_dim, Ls = c->layers_per_stack, V = c->vocab_size;
    float eps = (float)c->rms_norm_eps;
    cudaStream_t s = im->stream;
    const fk_ctx *kc = im->kern;
    act_bufs A = main_bufs(im);
    int T = 0, t0[PF_GROUP];
    int32_t *hid = im->h_pf, *hseq = im->h_pf + im->rows, *hpos = im->h_pf + 2 * im->rows;
    for (int i = 0; i < n; i++) {
        t0[i] = T;
        for (int t = 0; t < g[i]->n; t++) {
            hid[T + t] = g[i]->ids[t];
            hseq[T + t] = g[i]->seq;
            hpos[T + t] = t;
        }
        T += g[i]->n;
        im->len[g[i]->seq] = 0;
    }
    /* the attention of all n prompts in one launch (each prompt's bits are its own launch's) */
    fk_prefill_group grp;
    memset(&grp, 0, sizeof grp);
    grp.n = n;
    for (int p = 0; p < n; p++) {
        grp.row0[p] = t0[p];
        grp.T[p] = g[p]->n;
        grp.P[p] = g[p]->prefix_len;
        grp.kv_off[p] = (long long)g[p]->seq * im->seq_stride;
    }
    CU(cudaSetDevice(im->device));
    CU(cudaMemcpyAsync(im->d_ids, hid, (size_t)T * 4, cudaMemcpyHostToDevice, s));
    CU(cudaMemcpyAsync(im->d_pseq, hseq, (size_t)T * 4, cudaMemcpyHostToDevice, s));
    CU(cudaMemcpyAsync(im->d_ppos, hpos, (size_t)T * 4, cudaMemcpyHostToDevice, s));
    OK(fk_embed(kc, &im->embed, im->zli, im->d_ids, T, D, (float)c->embedding_scale, A.zH, A.zL, A.x, s));
    for (int l = 0; l < frigg_num_runs(c) * Ls; l++) {
        int r = l / Ls, i = l % Ls, slot = frigg_slot(c, r, i);
        const dev_layer *L = &layers_for(im, c, r, T)[i];
        uint16_t *ks = k_slot(im, slot), *vs = v_slot(im, slot);
        if (i == 0) OK(fk_rmsnorm(kc, A.x, A.a, T, D, eps, s));
        OK(gemm(im, &L->gqkv, A.a, T, im->gqkv));
        OK(fk_rope_kv(kc, im->gqkv, T, H, hd, im->d_pseq, im->d_ppos, im->cos_t, im->sin_t, im->q, ks, vs,
                      im->seq_stride, b->max_ctx, s));
        OK(fk_attn_prefill_group(kc, im->q, ks, vs, im->gqkv, &grp, H, hd, b->max_ctx, im->y, s));
        OK(layer_mlp(im, c, L, A.x, A.a, T));
        if (i == Ls - 1) OK(run_end(im, &A, c, r, T));
    }
    /* the prompts' last rows side by side (y is free now), then one lm_head pass for all of them */
    for (int p = 0; p < n; p++)
        CU(cudaMemcpyAsync(im->y + (size_t)p * D, A.zH + (size_t)(t0[p] + g[p]->n - 1) * D, (size_t)D * 2,
                           cudaMemcpyDeviceToDevice, s));
    OK(fk_gemv(kc, lm_head_for(im, n), im->y, n, 0, 0, FK_GEMV_STORE, im->logits, s));
    int host = 0, dev = 0;
    for (int p = 0; p < n; p++) {
        host |= last[p] != NULL;
        dev |= greedy[p] != NULL;
    }
    if (host) OK(fk_bf16_to_f32(kc, im->logits, (size_t)n * V, im->logits_f, s));
    for (int p = 0; p < n; p++)
        if (last[p])
            CU(cudaMemcpyAsync(last[p], im->logits_f + (size_t)p * V, (size_t)V * 4, cudaMemcpyDeviceToHost, s));
    if (dev) OK(prefill_greedy_enqueue(im, V, n));
    CU(cudaStreamSynchronize(s));
    if (dev) prefill_greedy_read(im, n, greedy);
    for (int p = 0; p < n; p++) im->len[g[p]->seq] = g[p]->n;
    return 0;
}

/* Every kernel of one decode step for B rows whose ids/seq/pos are already in d_step. No host sync, no
 * allocation: this is what the graph captures. */
static int enqueue_decode_gemv(frigg_backend *b, int B);
static int enqueue_decode_gemm(frigg_backend *b, int B);
static int enqueue_decode(frigg_backend *b, int B) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    const int32_t *ids = im->d_step, *rpos = im->d_step + 2 * MAX_BATCH;
    OK(fk_embed(im->kern, &im->embed, im->zli, ids, B, c->hidden_size, (float)c->embedding_scale, im->zH, im->zL, im->x,
                im->stream));
    OK(decode_by_passes(im, B) ? enqueue_decode_gemv(b, B) : enqueue_decode_gemm(b, B));
    return fk_argmax_bf16(im->kern, im->logits, B, c->vocab_size, im->d_step, (int32_t *)rpos, NULL, im->argmax_work,
                          im->stream);
}

/* The GEMV step: each projection in passes of at most GEMV_ROWS rows. Up to 16 rows that is one pass over the
 * weights; beyond (batch_invariant only) each pass computes its rows exactly as a step of those rows alone
 * would (kernels.h: a GEMV row's result does not depend on the other rows of its pass under one impl). */
static int enqueue_decode_gemv(frigg_backend *b, int B) {
    cuda_impl *im = b->impl;
    act_bufs A = main_bufs(im);
    const frigg_config *c = &b->model->cfg;
    int D = c->hidden_size, I = c->intermediate_size, H = c->num_heads, hd = c->head_dim;
    float eps = (float)c->rms_norm_eps;
    cudaStream_t s = im->stream;
    const fk_ctx *kc = im->kern;
    const int32_t *rseq = im->d_step + MAX_BATCH, *rpos = im->d_step + 2 * MAX_BATCH;
    for (int r = 0; r < frigg_num_runs(c); r++) {
        const dev_layer *Ls = layers_for(im, c, r, B);
        for (int i = 0; i < c->layers_per_stack; i++) {
            int slot = frigg_slot(c, r, i);
            if (im->int8 || (B > FK_GEMV_SIMT_ROWS && fused_write_hd(hd))) {
                /* norm + gqkv into the gqkv rows (all four sections) as projected, then RoPE, the K/V write and
                 * attention in one kernel: always for the int8 cache (the QKV epilogue below writes only a bf16
                 * one), and for the bf16 cache past 8 rows, where with the QKV epilogue batch 16 decoded 0.963x the
                 * GEMM step at ctx 4096 (benchmarks/h200-2026-12-04/kvab/ab-summary.txt; the same bits) */
                for (int r0 = 0; r0 < B; r0 += GEMV_ROWS) {
                    int n = B - r0 < GEMV_ROWS ? B - r0 : GEMV_ROWS;
                    OK(fk_gemv(kc, &Ls[i].gqkv, im->x + (size_t)r0 * D, n, 1, eps, FK_GEMV_STORE,
                               im->gqkv + (size_t)r0 * 4 * D, s));
                }
                OK(im->int8 ? decode_attn_i8(b, slot, B) : decode_attn_write(b, slot, B));
            } else {
                for (int r0 = 0; r0 < B; r0 += GEMV_ROWS) {
                    int n = B - r0 < GEMV_ROWS ? B - r0 : GEMV_ROWS;
                    fk_qkv_epi qa = {im->cos_t, im->sin_t, rseq + r0, rpos + r0, im->q + (size_t)r0 * D, k_slot(im, slot),
                                     v_slot(im, slot), im->seq_stride, b->max_ctx, hd};
                    /* norm + gqkv + RoPE + KV write */
                    OK(fk_gemv_qkv(kc, &Ls[i].gqkv, im->x + (size_t)r0 * D, n, eps, im->gqkv + (size_t)r0 * 4 * D, &qa, s));
                }
                OK(fk_attn_decode(kc, im->q, k_slot(im, slot), v_slot(im, slot), im->seq_stride, rseq, rpos, im->gqkv, B,
                                  H, hd, b->max_ctx, im->attn_work, im->attn_counters, im->y, s));
            }
            for (int r0 = 0; r0 < B; r0 += GEMV_ROWS) {
                int n = B - r0 < GEMV_ROWS ? B - r0 : GEMV_ROWS;
                OK(fk_gemv(kc, &Ls[i].o, im->y + (size_t)r0 * D, n, 0, eps, FK_GEMV_RESID, im->x + (size_t)r0 * D, s));
            }
            for (int r0 = 0; r0 < B; r0 += GEMV_ROWS) {
                int n = B - r0 < GEMV_ROWS ? B - r0 : GEMV_ROWS;
                OK(fk_gemv(kc, &Ls[i].gu, im->x + (size_t)r0 * D, n, 1, eps, FK_GEMV_SWIGLU, im->m + (size_t)r0 * I, s));
                OK(fk_gemv(kc, &Ls[i].down, im->m + (size_t)r0 * I, n, 0, eps, FK_GEMV_RESID, im->x + (size_t)r0 * D, s));
            }
        }
        OK(run_end(im, &A, c, r, B));
    }
    /* Past 8 rows a bf16 lm_head is cuBLAS's (the GEMM step's): at 16 rows 191.5 us against the tensor-core
     * GEMV's 217.2 at 8 (benchmarks/h200-2026-12-03/attnab/gemm.txt; gemv.cu's table). Batch-invariant steps
     * keep the GEMV, whose rows do not depend on their neighbours. */
    const frigg_mat *lm = lm_head_for(im, B);
    if (B > FK_GEMV_SIMT_ROWS && !im->batch_invariant && lm->dtype == FRIGG_DT_BF16)
        return gemm(im, lm, im->zH, B, im->logits);
    for (int r0 = 0; r0 < B; r0 += GEMV_ROWS) {
        int n = B - r0 < GEMV_ROWS ? B - r0 : GEMV_ROWS;
        OK(fk_gemv(kc, lm, im->zH + (size_t)r0 * D, n, 0, eps, FK_GEMV_STORE,
                   im->logits + (size_t)r0 * c->vocab_size, s));
    }
    return 0;
}

/* The GEMM step (17..64 rows): the prefill's layer (cuBLAS projections, separate norms, SwiGLU) with the decode
 * step's per-row RoPE/KV write and attention. Same rounding points as the GEMV step (kernels.h); the sums run
 * in cuBLAS's order, so a row agrees with the GEMV step within rounding, not bit for bit. */
static int enqueue_decode_gemm(frigg_backend *b, int B) {
    cuda_impl *im = b->impl;
    act_bufs A = main_bufs(im);
    const frigg_config *c = &b->model->cfg;
    int H = c->num_heads, hd = c->head_dim, D = c->hidden_size;
    float eps = (float)c->rms_norm_eps;
    cudaStream_t s = im->stream;
    const fk_ctx *kc = im->kern;
    const int32_t *rseq = im->d_step + MAX_BATCH, *rpos = im->d_step + 2 * MAX_BATCH;
    for (int r = 0; r < frigg_num_runs(c); r++) {
        const dev_layer *Ls = layers_for(im, c, r, B);
        for (int i = 0; i < c->layers_per_stack; i++) {
            int slot = frigg_slot(c, r, i);
            if (i == 0) OK(fk_rmsnorm(kc, im->x, im->a, B, D, eps, s));
            OK(gemm(im, &Ls[i].gqkv, im->a, B, im->gqkv));
            if (im->int8) {
                OK(decode_attn_i8(b, slot, B));
            } else if (B <= 32 && fused_write_hd(hd)) {
                /* RoPE and the K/V write inside the attention: one launch less per layer than fk_rope_kv then
                 * fk_attn_decode, the same bits (kernels.h). Decode at ctx 512 ran 1.027x at batch 16 and 1.031x at
                 * 32, but 0.992x at 48 and 1.006x at 64 (0.983x and 0.994x at ctx 2048), where a row's splits span
                 * two blocks and the writing block's extra latency is on every row's path
                 * (benchmarks/h200-2026-12-03/writefix/ab-summary.txt): there the two kernels stay. */
                OK(decode_attn_write(b, slot, B));
            } else {
                OK(fk_rope_kv(kc, im->gqkv, B, H, hd, rseq, rpos, im->cos_t, im->sin_t, im->q, k_slot(im, slot),
                              v_slot(im, slot), im->seq_stride, b->max_ctx, s));
                OK(fk_attn_decode(kc, im->q, k_slot(im, slot), v_slot(im, slot), im->seq_stride, rseq, rpos, im->gqkv, B,
                                  H, hd, b->max_ctx, im->attn_work, im->attn_counters, im->y, s));
            }
            OK(layer_mlp(im, c, &Ls[i], im->x, im->a, B));
        }
        OK(run_end(im, &A, c, r, B));
    }
    return gemm(im, lm_head_for(im, B), im->zH, B, im->logits);
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

/* Queue one step of B rows whose input is already in d_step (graph or eager). */
static int launch_step(frigg_backend *b, int B) {
    cuda_impl *im = b->impl;
    if (!im->use_graphs) return enqueue_decode(b, B);
    OK(capture(b, B));
    CU(cudaGraphLaunch(im->graph[B], im->stream));
    return 0;
}

/* The queued step's greedy ids, once they are on the host (its event): into im->greedy. */
static int wait_step(cuda_impl *im, int qi) {
    if (!im->pend[qi].async || im->pend[qi].fetched) return 0;
    im->pend[qi].fetched = 1;
    CU(cudaEventSynchronize(im->out_ready[im->pend[qi].slot]));
    const int32_t *h = im->h_out + im->pend[qi].slot * MAX_BATCH;
    for (int i = 0; i < im->pend[qi].nseq; i++) im->greedy[im->pend[qi].seqs[i]] = h[i]; /* -1: a non-finite sampled row */
    return 0;
}

/* A row's outputs from its logits on the host (prefill rows, and rows wanting out_lse). */
static void outputs_from_row(frigg_row *r, const float *row, int V) {
    if (r->want == FRIGG_WANT_GREEDY) { /* seqgen: an id outside [0, V) is a non-finite row */
        int32_t id = frigg_argmax(row, V);
        *r->out_id = isfinite(row[id]) ? id : -1;
    }
    if (r->want == FRIGG_WANT_TOPK) {
        frigg_topk(row, V, r->k, r->out_ids);
        for (int j = 0; j < r->k; j++) r->out_vals[j] = row[r->out_ids[j]];
        if (r->out_lse) *r->out_lse = frigg_row_lse(row, V);
    }
}

/* Order the device's top-kmax pairs of one row (value descending, ties to the lower id) and keep k. */
typedef struct {
    float v;
    int32_t id;
} vid;
static int vid_cmp(const void *a, const void *b) {
    const vid *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The decode rows of a step, B <= MAX_BATCH of them, launched as one batch. Steps of greedy and sampled rows copy
 * their ids back behind the step (async: collect waits for them); any other want is served before submit returns. */
static int run_decode(frigg_backend *b, frigg_row **dr, int B, int qi) {
    cuda_impl *im = b->impl;
    int V = b->model->cfg.vocab_size;
    CU(cudaSetDevice(im->device));
    int all_last = 1, same = B == im->last_B, async = 1;
    for (int i = 0; i < B; i++) {
        int32_t tok = dr[i]->ids ? dr[i]->ids[0] : dr[i]->token;
        all_last &= tok == FRIGG_TOKEN_LAST_GREEDY;
        same &= im->last_seqs[i] == dr[i]->seq;
        async &= dr[i]->want == FRIGG_WANT_GREEDY || dr[i]->want == FRIGG_WANT_SAMPLE;
    }
    if (all_last && same) {
        /* d_step already holds each row's greedy id and next position (fk_argmax_bf16's advance): the step
         * is queued with nothing from the host, before the last one's ids have reached it */
        OK(launch_step(b, B));
    } else {
        /* h_step is read by a queued step's copy until that step runs, and a LAST_GREEDY id must reach the
         * host first: let the queued steps finish */
        if (im->nq) CU(cudaStreamSynchronize(im->stream));
        for (int k = 0; k < im->nq; k++) OK(wait_step(im, k));
        for (int i = 0; i < B; i++) {
            int32_t tok = dr[i]->ids ? dr[i]->ids[0] : dr[i]->token;
            if (tok == FRIGG_TOKEN_LAST_GREEDY) tok = im->greedy[dr[i]->seq];
            if (tok < 0) tok = 0; /* the answer of a non-finite sampled row: a valid input (the sequence has ended) */
            im->h_step[i] = tok;
            im->h_step[MAX_BATCH + i] = dr[i]->seq;
            im->h_step[2 * MAX_BATCH + i] = im->len[dr[i]->seq];
        }
        CU(cudaMemcpyAsync(im->d_step, im->h_step, 3 * MAX_BATCH * 4, cudaMemcpyHostToDevice, im->stream));
        OK(launch_step(b, B));
    }
    /* Rows with a mask (structured output; greedy and sampled rows, never run ahead): the step's argmax again, over the
     * allowed ids, into the same ids (its positions were advanced by the step's own): the row stays on the device,
     * only its 32 KB mask crosses. A row without one in the same step gets every id. */
    int masked = 0, masked_greedy = 0;
    for (int i = 0; i < B; i++) {
        masked |= dr[i]->mask != NULL;
        masked_greedy |= dr[i]->mask != NULL && dr[i]->want == FRIGG_WANT_GREEDY;
    }
    if (masked) {
        const size_t W = (size_t)(V + 31) / 32;
        for (int i = 0; i < B; i++) {
            if (dr[i]->mask) memcpy(im->h_mask + (size_t)i * W, dr[i]->mask, W * 4);
            else memset(im->h_mask + (size_t)i * W, 0xFF, W * 4);
        }
        CU(cudaMemcpyAsync(im->d_mask, im->h_mask, (size_t)B * W * 4, cudaMemcpyHostToDevice, im->stream));
        /* only a greedy row's masked argmax is kept: a sampled row's id is the draw's, written below */
        if (masked_greedy)
            OK(fk_argmax_bf16_masked(im->kern, im->logits, B, V, im->d_mask, im->d_step, NULL, NULL, im->argmax_work,
                                     im->stream));
    }
    /* Sampled rows (FRIGG_WANT_SAMPLE): their draws over the same logits (and masks), into the same ids, after the
     * argmax that every row had: the next step's input stays on the device, and only the answers cross. */
    int sampled = 0;
    for (int i = 0; i < B; i++) sampled |= dr[i]->want == FRIGG_WANT_SAMPLE;
    if (sampled) {
        fk_draw *hd = im->h_draw + (size_t)im->draw_slot * MAX_BATCH;
        im->draw_slot ^= 1;
        for (int i = 0; i < B; i++)
            hd[i] = dr[i]->want == FRIGG_WANT_SAMPLE ? (fk_draw){dr[i]->u, dr[i]->temperature, 1} : (fk_draw){0, 1, 0};
        CU(cudaMemcpyAsync(im->d_draw, hd, (size_t)B * sizeof *hd, cudaMemcpyHostToDevice, im->stream));
        OK(fk_sample_bf16(im->kern, im->logits, B, V, masked ? im->d_mask : NULL, im->d_draw, im->d_step, im->d_answers,
                          im->sample_work, im->stream));
    }
    const int32_t *answers = sampled ? im->d_answers : im->d_step;
    im->last_B = B;
    for (int i = 0; i < B; i++) {
        im->last_seqs[i] = dr[i]->seq;
        im->len[dr[i]->seq]++;
        im->pend[qi].seqs[i] = dr[i]->seq;
    }
    im->pend[qi].nseq = B;
    if (async) {
        int slot = im->next_slot;
        im->next_slot ^= 1;
        im->pend[qi].async = 1;
        im->pend[qi].fetched = 0;
        im->pend[qi].slot = slot;
        CU(cudaMemcpyAsync(im->h_out + slot * MAX_BATCH, answers, (size_t)B * 4, cudaMemcpyDeviceToHost, im->stream));
        CU(cudaEventRecord(im->out_ready[slot], im->stream));
        return 0;
    }
    /* Mixed wants: everything back now. */
    int kmax = 0, need_rows = 0;
    for (int i = 0; i < B; i++) {
        if (dr[i]->want == FRIGG_WANT_TOPK && dr[i]->k > kmax) kmax = dr[i]->k;
        need_rows |= dr[i]->want == FRIGG_WANT_LOGITS || (dr[i]->want == FRIGG_WANT_TOPK && dr[i]->out_lse);
    }
    if (kmax) OK(fk_topk_bf16(im->kern, im->logits, B, V, kmax, im->topk_vals, im->topk_ids, im->topk_work, im->stream));
    if (need_rows) OK(fk_bf16_to_f32(im->kern, im->logits, (size_t)B * V, im->logits_f, im->stream));
    /* h_out[2]: the slots 0 and 1 may hold a queued greedy step's ids */
    int32_t *ho = im->h_out + 2 * MAX_BATCH;
    CU(cudaMemcpyAsync(ho, answers, (size_t)B * 4, cudaMemcpyDeviceToHost, im->stream));
    CU(cudaStreamSynchronize(im->stream));
    vid *pairs = kmax ? frigg_xmalloc(sizeof(vid) * (size_t)kmax) : NULL;
    float *hv = kmax ? frigg_xmalloc(sizeof(float) * (size_t)B * kmax) : NULL;
    int32_t *hi = kmax ? frigg_xmalloc(sizeof(int32_t) * (size_t)B * kmax) : NULL;
    int rc = 0;
    if (kmax && (cudaMemcpy(hv, im->topk_vals, sizeof(float) * (size_t)B * kmax, cudaMemcpyDeviceToHost) != cudaSuccess ||
                 cudaMemcpy(hi, im->topk_ids, sizeof(int32_t) * (size_t)B * kmax, cudaMemcpyDeviceToHost) != cudaSuccess)) {
        frigg_set_error("CUDA: copying the top-k pairs back failed");
        rc = -1;
    }
    for (int i = 0; i < B && !rc; i++) {
        frigg_row *r = dr[i];
        im->greedy[r->seq] = ho[i];
        if (r->want == FRIGG_WANT_GREEDY || r->want == FRIGG_WANT_SAMPLE) *r->out_id = ho[i];
        if (r->want == FRIGG_WANT_LOGITS || (r->want == FRIGG_WANT_TOPK && r->out_lse)) {
            if (cudaMemcpy(r->want == FRIGG_WANT_LOGITS ? r->out_logits : im->host_row, im->logits_f + (size_t)i * V,
                           sizeof(float) * (size_t)V, cudaMemcpyDeviceToHost) != cudaSuccess) {
                frigg_set_error("CUDA: copying logits back failed");
                rc = -1;
                break;
            }
        }
        if (r->want == FRIGG_WANT_TOPK) {
            for (int j = 0; j < kmax; j++) pairs[j] = (vid){hv[(size_t)i * kmax + j], hi[(size_t)i * kmax + j]};
            qsort(pairs, (size_t)kmax, sizeof *pairs, vid_cmp);
            for (int j = 0; j < r->k; j++) {
                r->out_vals[j] = pairs[j].v;
                r->out_ids[j] = pairs[j].id;
            }
            if (r->out_lse) *r->out_lse = frigg_row_lse(im->host_row, V);
        }
    }
    free(pairs);
    free(hv);
    free(hi);
    return rc;
}

/* A prefill row: the whole prompt in the main buffers, or (prefill_layers short of the rest) the next slice of
 * the part-way prompt in its own buffers. A row that is not the part-way prompt's (another seq, length or
 * prefix) starts a prompt of its own; if that one is part-way too, it takes the buffers, and the abandoned
 * sequence stays empty until its row starts it over. *done: the prompt's logits were written. */
static int prefill_row(frigg_backend *b, const frigg_row *r, float *last, float *all, int32_t *greedy, int *done) {
    cuda_impl *im = b->impl;
    const frigg_config *c = &b->model->cfg;
    int total = frigg_num_runs(c) * c->layers_per_stack;
    int cont = im->pf.active && im->pf.seq == r->seq && im->pf.T == r->n && im->pf.P == r->prefix_len;
    if (im->pf.active && im->pf.seq == r->seq && !cont) im->pf.active = 0; /* the sequence takes another prompt */
    int left = total - (cont ? im->pf.done : 0), n = r->prefill_layers && r->prefill_layers < left ? r->prefill_layers : left;
    *done = 0;
    if (!cont && n == total) {
        OK(run_prefill(b, r->seq, r->ids, r->n, r->prefix_len, last, all, greedy));
        *done = 1;
        return 0;
    }
    act_bufs A = {im->pzH, im->pzL, im->px, im->pa};
    CU(cudaSetDevice(im->device));
    if (!cont) {
        im->len[r->seq] = 0;
        OK(prefill_begin(b, &A, r->ids, r->n));
        im->pf.active = 1;
        im->pf.seq = r->seq;
        im->pf.T = r->n;
        im->pf.P = r->prefix_len;
        im->pf.done = 0;
    }
    OK(prefill_layers(b, &A, r->seq, r->n, r->prefix_len, im->pf.done, n));
    im->pf.done += n;
    if (im->pf.done < total) return 0;
    im->pf.active = 0;
    OK(prefill_finish(b, &A, r->n, last, all, greedy));
    im->len[r->seq] = r->n;
    *done = 1;
    return 0;
}

/* Whether prefill row r can join a grouped prefill: a whole prompt (not a slice of its layers, not the next
 * slice of the part-way prompt) wanting at most its last row's logits, on an engine that is not
 * batch-invariant (run_prefill_group: a group's GEMMs may sum in another order than a lone prompt's) and keeps
 * a bf16 KV cache (run_prefill_group writes and attends over the bf16 cache; with an int8 one every prompt takes
 * run_prefill, whose layers quantize its K/V and attend over the values the cache holds). */
static int groupable(const cuda_impl *im, const frigg_row *r, int total) {
    int cont = im->pf.active && im->pf.seq == r->seq && im->pf.T == r->n && im->pf.P == r->prefix_len;
    return !im->batch_invariant && !im->int8 && r->want != FRIGG_WANT_ALL_LOGITS && !cont &&
           (!r->prefill_layers || r->prefill_layers >= total);
}

static int cuda_submit(frigg_backend *b, frigg_row *rows, int nrows) {
    cuda_impl *im = b->impl;
    if (im->nq == 2) {
        frigg_set_error("step: two steps are queued already (collect one first)");
        return -1;
    }
    /* a LAST_GREEDY row is valid when the step submitted just before gave its sequence a greedy id */
    if (frigg_backend_check_rows(b, rows, nrows, im->len, im->last_greedy)) return -1;
    int qi = im->nq;
    im->pend[qi].rows = rows;
    im->pend[qi].nrows = nrows;
    im->pend[qi].async = 0;
    im->pend[qi].fetched = 0;
    im->pend[qi].nseq = 0;
    int V = b->model->cfg.vocab_size;
    frigg_row *dr[MAX_BATCH];
    unsigned char grouped[MAX_BATCH] = {0}; /* rows prefilled by a group already (nrows <= max_rows <= MAX_BATCH) */
    int B = 0, total = frigg_num_runs(&b->model->cfg) * b->model->cfg.layers_per_stack;
    for (int i = 0; i < nrows; i++) {
        frigg_row *r = &rows[i];
        if (!r->prefill) {
            dr[B++] = r;
            continue;
        }
        if (grouped[i]) continue;
        /* prefill rows first: whole prompts in groups (run_prefill_group), the rest one at a time (a whole
         * prompt, or a slice of its layers: PrefixLM) */
        for (int k = 0; k < im->nq; k++) OK(wait_step(im, k));
        frigg_row *grp[PF_GROUP];
        float *glast[PF_GROUP];
        int32_t *ggreedy[PF_GROUP];
        int gi[PF_GROUP], ng = 0, tok = 0;
        for (int j = i; j < nrows && ng < PF_GROUP && groupable(im, r, total); j++) {
            frigg_row *q = &rows[j];
            if (!q->prefill || grouped[j] || !groupable(im, q, total) || tok + q->n > im->rows) continue;
            tok += q->n;
            /* greedy rows' ids are found on the device; the others' logits come to the host */
            glast[ng] = q->want == FRIGG_WANT_NONE || q->want == FRIGG_WANT_GREEDY ? NULL
                        : q->want == FRIGG_WANT_LOGITS                             ? q->out_logits
                                                                                   : im->host_row + (size_t)ng * V;
            ggreedy[ng] = q->want == FRIGG_WANT_GREEDY ? q->out_id : NULL;
            gi[ng] = j;
            grp[ng++] = q;
        }
        if (ng > 1) {
            for (int p = 0; p < ng; p++) {
                if (im->pf.active && im->pf.seq == grp[p]->seq) im->pf.active = 0; /* it takes another prompt */
                grouped[gi[p]] = 1;
            }
            if (run_prefill_group(b, grp, ng, glast, ggreedy)) return -1;
            for (int p = 0; p < ng; p++) {
                frigg_row *q = grp[p];
                q->pending = 0;
                if (glast[p]) outputs_from_row(q, glast[p], V);
                if (q->want == FRIGG_WANT_GREEDY) im->greedy[q->seq] = *q->out_id >= 0 ? *q->out_id : 0; /* a valid input id */
            }
            im->last_B = 0; /* the prefill used d_step's neighbours: the next decode stages from the host */
            continue;
        }
        float *all = r->want == FRIGG_WANT_ALL_LOGITS ? r->out_logits : NULL;
        int32_t *greedy = r->want == FRIGG_WANT_GREEDY ? r->out_id : NULL; /* found on the device */
        float *last = r->want == FRIGG_WANT_NONE || greedy ? NULL : r->want == FRIGG_WANT_LOGITS ? r->out_logits : im->host_row;
        int done;
        if (prefill_row(b, r, last, all, greedy, &done)) return -1;
        r->pending = !done;
        if (!done) continue;
        if (last) outputs_from_row(r, last, V);
        if (r->want == FRIGG_WANT_GREEDY) im->greedy[r->seq] = *r->out_id >= 0 ? *r->out_id : 0; /* a valid input id */
        im->last_B = 0; /* the prefill used d_step's neighbours: the next decode stages from the host */
    }
    if (B && run_decode(b, dr, B, qi)) return -1;
    memset(im->last_greedy, 0, (size_t)b->max_seqs);
    for (int i = 0; i < nrows; i++)
        im->last_greedy[rows[i].seq] = (rows[i].want == FRIGG_WANT_GREEDY && !(rows[i].prefill && rows[i].pending)) ||
                                       rows[i].want == FRIGG_WANT_SAMPLE;
    im->nq++;
    return 0;
}

static int cuda_collect(frigg_backend *b) {
    cuda_impl *im = b->impl;
    if (!im->nq) {
        frigg_set_error("collect: no step was submitted");
        return -1;
    }
    OK(wait_step(im, 0));
    if (im->pend[0].async)
        for (int i = 0; i < im->pend[0].nrows; i++)
            if (!im->pend[0].rows[i].prefill) *im->pend[0].rows[i].out_id = im->greedy[im->pend[0].rows[i].seq];
    im->pend[0] = im->pend[1];
    im->nq--;
    return 0;
}

static int cuda_seq_len(const frigg_backend *b, int seq) {
    if (frigg_backend_bad_seq(b, seq, "seq_len")) return -1;
    return ((const cuda_impl *)b->impl)->len[seq];
}

static int cuda_seq_reset(frigg_backend *b, int seq) {
    if (frigg_backend_bad_seq(b, seq, "seq_reset")) return -1;
    cuda_impl *im = b->impl;
    im->len[seq] = 0;
    im->last_greedy[seq] = 0;
    im->last_B = 0;
    if (im->pf.active && im->pf.seq == seq) im->pf.active = 0;
    return 0;
}

/* The cache of a sequence is [slot][head][max_ctx][head_dim]: positions [0, n) of every (slot, head) row are
 * one 2-D copy, for K and for V (an int8 cache: its values, then its scales [slot][head][max_ctx] likewise). */
static int cuda_seq_fork(frigg_backend *b, int src, int dst, int n) {
    if (frigg_backend_bad_seq(b, src, "seq_fork") || frigg_backend_bad_seq(b, dst, "seq_fork")) return -1;
    cuda_impl *im = b->impl;
    if (frigg_backend_bad_fork(b, src, n, im->len[src])) return -1;
    const frigg_config *c = &b->model->cfg;
    if (src != dst && n > 0) {
        CU(cudaSetDevice(im->device));
        size_t hd = (size_t)c->head_dim, ctx = (size_t)b->max_ctx, rows = (size_t)c->num_slots * c->num_heads;
        for (int kv = 0; kv < 2 && !im->int8; kv++) {
            uint16_t *base = kv ? im->vc : im->kc;
            CU(cudaMemcpy2DAsync(base + (size_t)dst * im->seq_stride, ctx * hd * 2, base + (size_t)src * im->seq_stride,
                                 ctx * hd * 2, (size_t)n * hd * 2, rows, cudaMemcpyDeviceToDevice, im->stream));
        }
        for (int kv = 0; kv < 2 && im->int8; kv++) {
            int8_t *base = kv ? im->v8 : im->k8;
            float *sc = kv ? im->vs : im->ks;
            CU(cudaMemcpy2DAsync(base + (size_t)dst * im->seq_stride, ctx * hd, base + (size_t)src * im->seq_stride,
                                 ctx * hd, (size_t)n * hd, rows, cudaMemcpyDeviceToDevice, im->stream));
            CU(cudaMemcpy2DAsync(sc + (size_t)dst * im->sc_seq_stride, ctx * 4, sc + (size_t)src * im->sc_seq_stride,
                                 ctx * 4, (size_t)n * 4, rows, cudaMemcpyDeviceToDevice, im->stream));
        }
        CU(cudaStreamSynchronize(im->stream));
    }
    im->len[dst] = n;
    im->last_greedy[dst] = 0;
    im->last_B = 0;
    if (im->pf.active && im->pf.seq == dst) im->pf.active = 0;
    return 0;
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
        if (im->h_mask) cudaFreeHost(im->h_mask);
        if (im->h_draw) cudaFreeHost(im->h_draw);
        if (im->h_pf) cudaFreeHost(im->h_pf);
        for (int i = 0; i < 2; i++)
            if (im->out_ready[i]) cudaEventDestroy(im->out_ready[i]);
        if (im->blas) cublasDestroy(im->blas);
        if (im->stream) cudaStreamDestroy(im->stream);
        fk_ctx_free(im->kern);
        free(im->layers[0]);
        free(im->layers[1]);
        free(im->bf_layers[0]);
        free(im->bf_layers[1]);
        free(im->len);
        free(im->greedy);
        free(im->last_greedy);
        free(im->host_row);
        free(im);
    }
    free(b);
}

static frigg_mat dev_mat(uint16_t *w, int rows, int cols) {
    return (frigg_mat){.w = w, .rows = rows, .cols = cols, .dtype = FRIGG_DT_BF16, .scales = NULL, .group = 0};
}

/* Device bytes of a matrix as the engine holds it: its values, then (quantized) its bf16 scales, each part
 * rounded up to 16 bytes so the next matrix starts aligned for the kernels' 16-byte loads. */
static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }
static size_t mat_dev_bytes(const frigg_mat *m) {
    size_t v = align16(frigg_mat_row_bytes(m) * (size_t)m->rows);
    return m->dtype == FRIGG_DT_BF16 ? v : v + align16((size_t)m->rows * frigg_mat_ngroups(m) * 2);
}

/* Row blocks parts[0..n) of one host matrix class (gate/q/k/v, or mlp gate/up) as one device matrix at dst:
 * values concatenated, then scales concatenated (the layout frigg_mat describes). The parts must agree in
 * dtype, columns and group; a difference is an error naming it. *out: the device descriptor. */
static int upload_stacked(uint8_t *dst, const frigg_mat *const *parts, int n, const char *what, frigg_mat *out) {
    const frigg_mat *p0 = parts[0];
    int rows = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i]->dtype != p0->dtype || parts[i]->cols != p0->cols || parts[i]->group != p0->group) {
            frigg_set_error("backend \"cuda\": %s: its parts differ in dtype, width or group (%s/%d/%d against "
                            "%s/%d/%d), which the CUDA engine's packed matrix cannot hold", what,
                            frigg_dtype_name(parts[i]->dtype), parts[i]->cols, parts[i]->group,
                            frigg_dtype_name(p0->dtype), p0->cols, p0->group);
            return -1;
        }
        rows += parts[i]->rows;
    }
    *out = (frigg_mat){.w = dst, .rows = rows, .cols = p0->cols, .dtype = p0->dtype, .scales = NULL, .group = p0->group};
    size_t rb = frigg_mat_row_bytes(p0), at = 0;
    for (int i = 0; i < n; i++) {
        CU(cudaMemcpy(dst + at, parts[i]->w, rb * parts[i]->rows, cudaMemcpyHostToDevice));
        at += rb * parts[i]->rows;
    }
    if (p0->dtype == FRIGG_DT_BF16) return 0;
    uint8_t *sc = dst + align16(rb * (size_t)rows);
    out->scales = (const uint16_t *)sc;
    size_t ng = (size_t)frigg_mat_ngroups(p0);
    at = 0;
    for (int i = 0; i < n; i++) {
        CU(cudaMemcpy(sc + at, parts[i]->scales, ng * parts[i]->rows * 2, cudaMemcpyHostToDevice));
        at += ng * parts[i]->rows * 2;
    }
    return 0;
}

static int upload_model(cuda_impl *im, const frigg_model *m) {
    const frigg_config *c = &m->cfg;
    size_t D = c->hidden_size, V = c->vocab_size;
    uint16_t *embed;
    OK(dalloc(im, (void **)&embed, V * D * 2, "embed_tokens"));
    OK(dalloc(im, (void **)&im->zli, D * 2, "z_L_init"));
    im->embed = dev_mat(embed, (int)V, (int)D);
    /* The embedding is read a row per token: a quantized one is uploaded as the bf16 values it holds
     * (bf16(q * scale), frigg_mat_row), so the lookup kernel stays one. */
    if (m->embed.dtype == FRIGG_DT_BF16) {
        OK(upload(embed, frigg_mat_bf16(&m->embed), V * D));
    } else {
        uint16_t *h = frigg_xmalloc(V * D * 2);
        float *row = frigg_xmalloc(D * 4);
        int rc = 0;
        for (size_t r = 0; r < V && !rc; r++) {
            rc = frigg_mat_row(&m->embed, (int)r, row);
            for (size_t i = 0; i < D && !rc; i++) h[r * D + i] = frigg_f32_to_bf16(row[i]);
        }
        if (!rc) rc = upload(embed, h, V * D);
        free(h);
        free(row);
        if (rc) return -1;
    }
    uint8_t *lm;
    OK(dalloc(im, (void **)&lm, mat_dev_bytes(&m->lm_head), "lm_head"));
    const frigg_mat *lmp[] = {&m->lm_head};
    OK(upload_stacked(lm, lmp, 1, "lm_head", &im->lm_head));
    OK(upload(im->zli, m->z_L_init, D));
    int n = c->layers_per_stack;
    for (int s = 0; s < 2; s++) {
        /* One allocation per stack keeps the allocation count small; matrices in the order gqkv, o, gate_up,
         * down, each layer after the last. */
        size_t bytes = 0;
        for (int i = 0; i < n; i++) {
            const frigg_layer *L = &m->stack[s][i];
            const frigg_mat *all[FRIGG_LAYER_MATS];
            frigg_layer_mats(L, all);
            for (int j = 0; j < FRIGG_LAYER_MATS; j++) bytes += mat_dev_bytes(all[j]) + 16 * 3; /* + room for the merges' alignment */
        }
        uint8_t *base;
        OK(dalloc(im, (void **)&base, bytes, s ? "H stack" : "L stack"));
        im->layers[s] = frigg_xcalloc(n, sizeof(dev_layer));
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            const frigg_layer *L = &m->stack[s][i];
            dev_layer *d = &im->layers[s][i];
            /* Row blocks gate, q, k, v and gate, up, whatever the file layout (MODEL.md §2). */
            const frigg_mat *qkv[] = {&L->gate, &L->q, &L->k, &L->v}, *o[] = {&L->o}, *gu[] = {&L->mlp_gate, &L->up},
                            *dn[] = {&L->down};
            OK(upload_stacked(base + at, qkv, 4, "a layer's gate/q/k/v projections", &d->gqkv));
            at += align16(mat_dev_bytes(&d->gqkv) + 16);
            OK(upload_stacked(base + at, o, 1, "a layer's o_proj", &d->o));
            at += align16(mat_dev_bytes(&d->o) + 16);
            OK(upload_stacked(base + at, gu, 2, "a layer's mlp gate/up projections", &d->gu));
            at += align16(mat_dev_bytes(&d->gu) + 16);
            OK(upload_stacked(base + at, dn, 1, "a layer's down_proj", &d->down));
            at += align16(mat_dev_bytes(&d->down) + 16);
        }
        if (at > bytes) {
            frigg_set_error("backend \"cuda\": the %s stack's matrices overran their allocation", s ? "H" : "L");
            return -1;
        }
    }
    return 0;
}

/* The bf16 copy of a quantized checkpoint's layer matrices and lm_head (frigg_backend_opts.dequant_rows),
 * dequantized on the device from the uploaded stored weights by fk_dequant_bf16 (the values every quantized
 * kernel multiplies by): one allocation per stack, the matrices in upload_model's order. A stack whose matrices
 * are all bf16 gets none. */
static int make_bf16_copy(cuda_impl *im, const frigg_config *c) {
    const int n = c->layers_per_stack;
    for (int s = 0; s < 2; s++) {
        size_t bytes = 0;
        int quant = 0;
        for (int i = 0; i < n; i++) {
            const dev_layer *L = &im->layers[s][i];
            const frigg_mat *all[] = {&L->gqkv, &L->o, &L->gu, &L->down};
            for (int j = 0; j < 4; j++) {
                bytes += align16((size_t)all[j]->rows * all[j]->cols * 2);
                quant |= all[j]->dtype != FRIGG_DT_BF16;
            }
        }
        if (!quant) continue;
        uint8_t *base;
        OK(dalloc(im, (void **)&base, bytes, s ? "the H stack's bf16 copy" : "the L stack's bf16 copy"));
        im->bf_layers[s] = frigg_xcalloc((size_t)n, sizeof(dev_layer));
        im->copied_layers = 1;
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            const dev_layer *L = &im->layers[s][i];
            dev_layer *d = &im->bf_layers[s][i];
            const frigg_mat *src[] = {&L->gqkv, &L->o, &L->gu, &L->down};
            frigg_mat *dst[] = {&d->gqkv, &d->o, &d->gu, &d->down};
            for (int j = 0; j < 4; j++) {
                uint16_t *w = (uint16_t *)(base + at);
                at += align16((size_t)src[j]->rows * src[j]->cols * 2);
                *dst[j] = dev_mat(w, src[j]->rows, src[j]->cols);
                if (src[j]->dtype == FRIGG_DT_BF16) {
                    CU(cudaMemcpyAsync(w, src[j]->w, (size_t)src[j]->rows * src[j]->cols * 2, cudaMemcpyDeviceToDevice,
                                       im->stream));
                } else {
                    OK(fk_dequant_bf16(im->kern, src[j], 0, src[j]->rows, w, im->stream));
                }
            }
        }
    }
    if (im->lm_head.dtype != FRIGG_DT_BF16) {
        uint16_t *w;
        OK(dalloc(im, (void **)&w, (size_t)im->lm_head.rows * im->lm_head.cols * 2, "lm_head's bf16 copy"));
        im->bf_lm_head = dev_mat(w, im->lm_head.rows, im->lm_head.cols);
        OK(fk_dequant_bf16(im->kern, &im->lm_head, 0, im->lm_head.rows, w, im->stream));
        im->bf_lm = im->copied_lm = 1;
    }
    CU(cudaStreamSynchronize(im->stream));
    if (im->dq_rows > 1) return 0;
    /* From one row on nothing reads the stored matrices: free them, and the copy takes their place. */
    for (int s = 0; s < 2; s++) {
        if (!im->bf_layers[s]) continue;
        dfree(im, im->layers[s][0].gqkv.w); /* the stack's one allocation starts with its first gqkv */
        free(im->layers[s]);
        im->layers[s] = im->bf_layers[s];
        im->bf_layers[s] = NULL;
    }
    if (im->bf_lm) {
        dfree(im, im->lm_head.w);
        im->lm_head = im->bf_lm_head;
        im->bf_lm = 0;
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
        c->hidden_size * FK_GEMV_SIMT_ROWS * 2 > 64 * 1024) { /* the CUDA-core GEMV's staged x (kernels/gemv.cu) */
        frigg_set_error("backend \"cuda\": unsupported shape (head_dim %d, hidden %d, intermediate %d); head_dim must "
                        "be 16/32/64/128 and the widths multiples of 8, hidden <= 4096", hd, c->hidden_size,
                        c->intermediate_size);
        return -1;
    }
    if (im->int8 && !fused_write_hd(hd)) {
        frigg_set_error("backend \"cuda\": an int8 KV cache needs head_dim 32, 64 or 128 (the model's is "
                        "%d; --kv-dtype bf16 runs it)", hd);
        return -1;
    }
    CU(cudaSetDevice(im->device));
    if (!(im->kern = fk_ctx_create())) return -1;
    /* one GEMV kernel for every batch size: its summation order is fixed by K alone (kernels.h) */
    if (im->batch_invariant && fk_ctx_set_gemv_impl(im->kern, FK_GEMV_IMPL_TC)) return -1;
    CU(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking));
    if (frigg_cuda_gemm_handle(&im->blas, im->stream)) return -1;
    /* cuBLAS may not allocate while a stream is captured: it gets a workspace of its own (32 MiB, what NVIDIA's
     * cuBLAS documentation recommends for Hopper) */
    const size_t ws = 32u << 20;
    OK(dalloc(im, &im->blas_ws, ws, "the cuBLAS workspace"));
    if (cublasSetWorkspace(im->blas, im->blas_ws, ws) != CUBLAS_STATUS_SUCCESS) {
        frigg_set_error("cuBLAS: setting the workspace failed");
        return -1;
    }
    OK(upload_model(im, m));
    if (im->dq_rows != INT_MAX) OK(make_bf16_copy(im, c));
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, ctx = b->max_ctx;
    /* RoPE tables from the CPU reference function: identical bf16 values on both engines. */
    float *cs = frigg_xmalloc(ctx * hd * 4), *sn = frigg_xmalloc(ctx * hd * 4);
    uint16_t *h16 = frigg_xmalloc(ctx * hd * 2);
    frigg_cpu_rope_tables(FRIGG_PREC_BF16, c, 0, (int)ctx, cs, sn);
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
    size_t elems = (size_t)im->seq_stride * b->max_seqs; /* of K, and again of V */
    if (im->int8) {
        /* frigg_kv_seq_bytes's INT8 figure: a byte per element, a 4-byte scale per (slot, head, position) */
        im->sc_slot_stride = im->slot_stride / hd;
        im->sc_seq_stride = im->seq_stride / hd;
        OK(dalloc(im, (void **)&im->k8, elems, "the int8 K cache"));
        OK(dalloc(im, (void **)&im->v8, elems, "the int8 V cache"));
        OK(dalloc(im, (void **)&im->ks, elems / hd * 4, "the K cache's scales"));
        OK(dalloc(im, (void **)&im->vs, elems / hd * 4, "the V cache's scales"));
    } else {
        OK(dalloc(im, (void **)&im->kc, elems * 2, "the K cache"));
        OK(dalloc(im, (void **)&im->vc, elems * 2, "the V cache"));
    }
    size_t dq = frigg_cuda_gemm_scratch_bytes(&im->layers[0][0].gqkv);
    for (int st = 0; st < 2; st++) {
        const dev_layer *L = &im->layers[st][0];
        const frigg_mat *all[] = {&L->gqkv, &L->o, &L->gu, &L->down};
        for (int j = 0; j < 4; j++) dq = frigg_cuda_gemm_scratch_bytes(all[j]) > dq ? frigg_cuda_gemm_scratch_bytes(all[j]) : dq;
    }
    if (im->lm_head.dtype != FRIGG_DT_BF16 && dq < 2 * D) dq = 2 * D; /* at least one lm_head row */
    if (dq) {
        OK(dalloc(im, (void **)&im->dq_scratch, dq, "the dequantization scratch"));
        im->dq_bytes = dq;
    }
    /* R: the rows of one prompt (or a decode step); the main buffers hold RG, a grouped prefill's tokens too,
     * while a part-way prompt's own buffers need one prompt's */
    size_t R = ctx > MAX_BATCH ? ctx : MAX_BATCH, RG = R > PF_TOKENS ? R : PF_TOKENS;
    im->rows = (int)RG;
    uint16_t **bufs[] = {&im->zH, &im->zL, &im->x, &im->a, &im->q, &im->y, &im->t1};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) OK(dalloc(im, (void **)bufs[i], RG * D * 2, "activations"));
    uint16_t **pbufs[] = {&im->pzH, &im->pzL, &im->px, &im->pa};
    for (size_t i = 0; i < sizeof pbufs / sizeof pbufs[0]; i++) OK(dalloc(im, (void **)pbufs[i], R * D * 2, "activations"));
    OK(dalloc(im, (void **)&im->gqkv, RG * 4 * D * 2, "activations"));
    if (im->int8) { /* a prompt's rows (never a group: groupable), and one slot's K and V */
        OK(dalloc(im, (void **)&im->kv_rows, R * 2 * D * 2, "the int8 cache's K/V staging"));
        OK(dalloc(im, (void **)&im->kd, ctx * D * 2, "the int8 cache's prefill K"));
        OK(dalloc(im, (void **)&im->vd, ctx * D * 2, "the int8 cache's prefill V"));
    }
    OK(dalloc(im, (void **)&im->gu, RG * 2 * I * 2, "activations"));
    OK(dalloc(im, (void **)&im->m, RG * I * 2, "activations"));
    OK(dalloc(im, (void **)&im->d_ids, RG * 4, "ids"));
    OK(dalloc(im, (void **)&im->d_zero, R * 4, "ids"));
    OK(dalloc(im, (void **)&im->d_iota, R * 4, "ids"));
    OK(dalloc(im, (void **)&im->d_pseq, RG * 4, "ids"));
    OK(dalloc(im, (void **)&im->d_ppos, RG * 4, "ids"));
    CU(cudaMallocHost((void **)&im->h_pf, 3 * RG * 4));
    OK(dalloc(im, (void **)&im->d_step, 3 * MAX_BATCH * 4, "ids"));
    OK(dalloc(im, &im->argmax_work, fk_argmax_work_bytes(MAX_BATCH), "argmax partials"));
    const size_t mask_bytes = (size_t)MAX_BATCH * ((V + 31) / 32) * 4;
    OK(dalloc(im, (void **)&im->d_mask, mask_bytes, "structured-output masks"));
    CU(cudaMallocHost((void **)&im->h_mask, mask_bytes));
    OK(dalloc(im, &im->sample_work, fk_sample_work_bytes(MAX_BATCH), "sampling partials"));
    OK(dalloc(im, (void **)&im->d_draw, MAX_BATCH * sizeof(fk_draw), "sampling parameters"));
    OK(dalloc(im, (void **)&im->d_answers, MAX_BATCH * 4, "ids"));
    CU(cudaMallocHost((void **)&im->h_draw, 2 * MAX_BATCH * sizeof(fk_draw)));
    OK(dalloc(im, &im->topk_work, fk_topk_work_bytes(MAX_BATCH), "top-k counts"));
    OK(dalloc(im, (void **)&im->topk_vals, (size_t)MAX_BATCH * FRIGG_TOPK_MAX * 4, "top-k values"));
    OK(dalloc(im, (void **)&im->topk_ids, (size_t)MAX_BATCH * FRIGG_TOPK_MAX * 4, "top-k ids"));
    OK(dalloc(im, (void **)&im->logits, (size_t)LOGIT_CHUNK * V * 2, "logits"));
    OK(dalloc(im, (void **)&im->logits_f, (size_t)LOGIT_CHUNK * V * 4, "logits"));
    /* the decode attention's split partials (one kernel for the bf16 and the int8 cache) */
    const size_t attn_floats = fk_attn_decode_work_floats(MAX_BATCH, c->num_heads, hd, (int)ctx);
    OK(dalloc(im, (void **)&im->attn_work, attn_floats * 4, "attention partials"));
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
    CU(cudaMallocHost((void **)&im->h_out, 3 * MAX_BATCH * 4)); /* two queued greedy steps + one mixed step */
    for (int i = 0; i < 2; i++) CU(cudaEventCreateWithFlags(&im->out_ready[i], cudaEventDisableTiming));
    CU(cudaDeviceSynchronize());
    return 0;
}

/* What setup() allocates beside the weights and the KV cache, in bytes, for a server's budget before any engine
 * exists: the same buffers at the same sizes (keep the two in step). A quantized checkpoint's dequantization
 * scratch (at most its largest layer matrix in bf16) is left to the weights' share, which a budget counts at bf16. */
size_t frigg_cuda_work_bytes(const frigg_config *c, int max_ctx, frigg_dtype kv_dtype) {
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, hd = c->head_dim, H = c->num_heads;
    size_t ctx = max_ctx > 0 ? (size_t)max_ctx : 1, R = ctx > MAX_BATCH ? ctx : MAX_BATCH, RG = R > PF_TOKENS ? R : PF_TOKENS;
    const size_t attn = fk_attn_decode_work_floats(MAX_BATCH, (int)H, (int)hd, (int)ctx);
    size_t b = (size_t)32 << 20;                          /* the cuBLAS workspace */
    b += 2 * ctx * hd * 2 + D * 2;                        /* RoPE tables, z_L_init */
    b += RG * (11 * D + 3 * I) * 2 + R * 4 * D * 2;       /* activations; the part-way prompt's own */
    if (kv_dtype == FRIGG_DT_INT8) b += R * 2 * D * 2 + 2 * ctx * D * 2; /* the int8 cache's staging and prefill copy */
    b += RG * 4 * 3 + R * 4 * 2 + 3 * MAX_BATCH * 4;      /* ids */
    b += fk_argmax_work_bytes(MAX_BATCH) + fk_topk_work_bytes(MAX_BATCH) + (size_t)MAX_BATCH * FRIGG_TOPK_MAX * 8;
    b += (size_t)MAX_BATCH * ((V + 31) / 32) * 4;         /* structured-output masks */
    b += fk_sample_work_bytes(MAX_BATCH) + MAX_BATCH * (sizeof(fk_draw) + 4); /* sampling partials, parameters, ids */
    b += (size_t)LOGIT_CHUNK * V * 6;                     /* logits, bf16 and fp32 */
    b += attn * 4 + (size_t)MAX_BATCH * H * 4;            /* attention partials and counters */
    return b;
}

frigg_backend *frigg_backend_cuda_create(const frigg_model *m, const frigg_backend_opts *opts) {
    frigg_backend_opts o;
    frigg_backend *b = frigg_backend_alloc("cuda", m, opts, &o);
    if (!b) return NULL;
    if (o.fp32_reference) {
        free(b);
        frigg_set_error("backend \"cuda\": fp32_reference is a CPU-engine setting (the CUDA engine rounds as bf16 HF does)");
        return NULL;
    }
    cuda_impl *im = frigg_xcalloc(1, sizeof *im);
    b->submit = cuda_submit;
    b->collect = cuda_collect;
    b->seq_reset = cuda_seq_reset;
    b->seq_fork = cuda_seq_fork;
    b->seq_len = cuda_seq_len;
    b->destroy = cuda_destroy;
    b->impl = im;
    /* up to MAX_BATCH decode rows in one step; two steps queued (the pipelined greedy decode) */
    b->max_rows = o.max_seqs < MAX_BATCH ? o.max_seqs : MAX_BATCH;
    b->max_inflight = 2;
    im->len = frigg_xcalloc((size_t)o.max_seqs, sizeof *im->len);
    im->greedy = frigg_xcalloc((size_t)o.max_seqs, sizeof *im->greedy);
    im->last_greedy = frigg_xcalloc((size_t)o.max_seqs, 1);
    im->host_row = frigg_xmalloc(sizeof(float) * PF_GROUP * (size_t)m->cfg.vocab_size);
    im->device = o.device;
    im->use_graphs = 1;
    im->batch_invariant = o.batch_invariant;
    im->dq_rows = frigg_dequant_rows(m, o.dequant_rows); /* 0: no copy */
    if (!im->dq_rows) im->dq_rows = INT_MAX;
    im->int8 = o.kv_dtype == FRIGG_DT_INT8; /* frigg_backend_alloc let only BF16 and INT8 through */
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
struct fk_ctx *frigg_cuda_kernels(frigg_backend *b) { return ((cuda_impl *)b->impl)->kern; }

int frigg_cuda_kernels_per_step(frigg_backend *b, int nseq) {
    cuda_impl *im = b->impl;
    if (nseq < 1 || nseq > MAX_BATCH || cudaSetDevice(im->device) != cudaSuccess || capture(b, nseq)) return -1;
    return im->graph_nodes[nseq];
}

const char *frigg_cuda_decode_proj(const frigg_backend *b, int nseq) {
    return decode_by_passes(b->impl, nseq) ? "gemv" : "gemm";
}

int frigg_cuda_decode_copy(const frigg_backend *b, int nseq, int *layers, int *lm_head) {
    const cuda_impl *im = b->impl;
    *layers = im->copied_layers && nseq >= im->dq_rows;
    *lm_head = im->copied_lm && nseq >= im->dq_rows;
    return im->copied_layers || im->copied_lm;
}

int frigg_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes) {
    CU(cudaSetDevice(device));
    CU(cudaMemGetInfo(free_bytes, total_bytes));
    return 0;
}

void frigg_cuda_profile_range(int on) { (void)(on ? cudaProfilerStart() : cudaProfilerStop()); }

size_t frigg_cuda_bytes(const frigg_backend *b) { return ((const cuda_impl *)b->impl)->bytes; }
