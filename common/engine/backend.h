/* backend.h — the one interface every engine (CPU reference, CUDA) implements. The generation state,
 * the scheduler, the tests and every executable talk to a model only through this.
 *
 * An engine holds max_seqs sequence slots, each with its own KV cache of max_ctx tokens. One engine
 * step runs a set of rows: a row names its sequence and either prefills a whole prompt into it (the
 * cache is reset first; PrefixLM forbids splitting a prompt by tokens, MODEL.md §4) or appends one
 * token to it (a decode step). Each row says what it wants back. Rows of both kinds, for sequences that
 * joined at different times, mix freely between steps; a sequence appears at most once in a step.
 *
 * submit/collect: `submit` queues a step and returns; `collect` waits for the oldest queued step; its
 * rows' outputs are valid once it returns (an engine may write them earlier: the CPU engine runs the step
 * inside submit). An engine may hold up to `max_inflight` steps queued (both engines: 2, so on a GPU step
 * k+1 runs while step k's ids travel to the host). A row's input token may be FRIGG_TOKEN_LAST_GREEDY: the id the same sequence's row
 * produced in the step queued just before (which must have wanted FRIGG_WANT_GREEDY or FRIGG_WANT_SAMPLE) — that is
 * what lets greedy and sampled decoding queue the next step before the last one's id is known on the host. frigg_step()
 * is submit + collect.
 *
 * Threads: one engine is driven by one thread at a time (the scheduler's); nothing here locks. */
#ifndef FRIGG_BACKEND_H
#define FRIGG_BACKEND_H

#include <stdint.h>

#include "model/model.h"
#include "sampler.h" /* FRIGG_TOPK_MAX */

typedef struct frigg_backend frigg_backend;

#define FRIGG_MAX_THREADS 1024 /* CPU worker threads an engine takes at most (more is an error, not a hang) */

typedef struct {
    int threads;          /* CPU worker threads (0 = all cores, else 1..FRIGG_MAX_THREADS) */
    int device;           /* CUDA device ordinal */
    int max_seqs;         /* sequence slots, each with its own static KV cache (>= 1) */
    int max_ctx;          /* tokens per sequence (0 = max_position_embeddings) */
    frigg_dtype kv_dtype; /* KV-cache element type: FRIGG_DT_BF16 (the default, 0), or FRIGG_DT_INT8 (symmetric
                             int8, one fp32 scale per position and head for K and for V: frigg_kv_quantize in
                             cpu_ops.h; the CUDA engine's needs head_dim 32, 64 or 128); both
                             engines refuse INT4 */
    int fp32_reference;   /* CPU engine: round nowhere (HF's model in float32 on the same bf16-valued weights,
                             MODEL.md T17) instead of at every bf16 rounding point; the CUDA engine refuses it */
    int batch_invariant;  /* a sequence's output bits do not depend on which others share its steps. The CPU
                             engine always is; the CUDA engine then runs one decode GEMV kernel (tensor cores)
                             at every batch size instead of the fastest per batch size, which sums a row in
                             another order at batch 1 than at batch 8 */
    int dequant_rows;     /* CUDA engine, a quantized checkpoint: a pass over the weights for at least this many
                             rows (a decode step's rows, a prompt's tokens) runs on a bf16 copy of the quantized
                             matrices that the engine makes at load, with the values the stored weights hold
                             (bf16(q * scale), frigg_mat_row), instead of on the stored weights: where the
                             quantized kernels lose to bf16's (cuda_engine.c). 0: the default for the build
                             (frigg_dequant_rows); FRIGG_DEQUANT_NEVER: no copy, every pass on the stored weights
                             (their memory alone). At 1 the stored matrices are never read, and the engine frees
                             them once copied. The CPU engine computes from the stored weights and refuses any
                             other value than 0 */
} frigg_backend_opts;

/* dequant_rows 0, measured on the H200 (benchmarks/h200-2026-12-04/dqsmall/): an int8 build's stored weights lose
 * to its bf16 copy at every batch size, so it runs from the copy alone; an int4 build's win at 1 and 2 rows (the
 * CUDA-core kernel reading 4 bits a weight) and lose from 4, where the tensor-core kernel takes them. */
#define FRIGG_DEQUANT_ROWS_INT8 1
#define FRIGG_DEQUANT_ROWS_INT4 3
#define FRIGG_DEQUANT_NEVER (-1)

/* What a row wants back from its step. */
typedef enum {
    FRIGG_WANT_NONE = 0,  /* nothing (the cache is filled all the same) */
    FRIGG_WANT_GREEDY,    /* out_id: argmax of the bf16 logits, lowest id on ties */
    FRIGG_WANT_TOPK,      /* out_vals[k], out_ids[k]: the k largest bf16 logits and their ids (value
                             descending, ties to the lower id, decide which k), in that order; 1 <= k <=
                             FRIGG_TOPK_MAX, k < vocab; plus out_lse, log Σ exp over the whole row, so that
                             val - lse is a log-probability (top-n logprobs need no full row) */
    FRIGG_WANT_LOGITS,    /* out_logits[vocab]: the last row's logits (bf16 values stored as float) */
    FRIGG_WANT_ALL_LOGITS, /* prefill only: out_logits[n * vocab], every prompt row's logits */
    FRIGG_WANT_SAMPLE     /* decode only: out_id = a draw from softmax(logits / temperature) over the ids the mask
                             allows (every id without one), made with the row's uniform u where the logits are:
                             frigg_draw_row (sampler.h) is the rule, so only the id crosses PCIe, not the row.
                             -1 when a value of the row is not finite or nothing is allowed */
} frigg_want;

#define FRIGG_TOKEN_LAST_GREEDY (-2)

typedef struct {
    int seq;               /* the sequence slot, [0, max_seqs) */
    int prefill;           /* 1: reset the sequence and run ids[0..n) as its prompt; 0: append ids[0] */
    const int32_t *ids;    /* prefill: n ids; decode: one id, or NULL with token = FRIGG_TOKEN_LAST_GREEDY */
    int n;                 /* prefill: prompt length; decode: 1 */
    int32_t token;         /* decode rows: the token when ids is NULL (an id, or FRIGG_TOKEN_LAST_GREEDY) */
    int prefix_len;        /* prefill: tokens [0, prefix_len) form the bidirectional prefix; decode: unused */
    /* prefill: how many layer steps (of frigg_num_runs x layers_per_stack) of the prompt to run in this step;
     * 0 runs the whole prompt. The PrefixLM prompt cannot be split by tokens, so a long prompt beside running
     * decodes is split by layers instead: the same row (seq, ids, n, prefix_len), submitted again in later
     * steps, continues where the last step stopped. An engine may run more layers than asked (the CPU engine
     * always runs the whole prompt); at most one prompt per engine is part-way at a time. */
    int prefill_layers;
    frigg_want want;
    int k;                 /* FRIGG_WANT_TOPK: how many */
    /* GREEDY and SAMPLE decode rows (NULL: none): structured output's allowed ids, bit id % 32 of word id / 32 of
     * (vocab + 31) / 32 words, read during submit. A GREEDY out_id is then the best allowed id (lowest on ties), found
     * where the logits are (on the device for the CUDA engine: only the mask crosses PCIe, not the row); an id the
     * mask does not allow, or one outside the vocabulary, where no allowed logit is finite. */
    const uint32_t *mask;
    float temperature;     /* SAMPLE: finite, > 0 */
    double u;              /* SAMPLE: the draw's uniform, [0, 1) */
    /* Outputs, owned by the caller, written by collect: */
    int32_t *out_id;       /* GREEDY, SAMPLE */
    float *out_vals;       /* TOPK: k values */
    int32_t *out_ids;      /* TOPK: k ids */
    float *out_lse;        /* TOPK (optional, may be NULL) */
    float *out_logits;     /* LOGITS / ALL_LOGITS */
    int pending;           /* set by submit for a prefill row: 1 when layers remain after this step (its
                              outputs are then not written), 0 when the prompt is done */
} frigg_row;

struct frigg_backend {
    const char *name;      /* "cpu" or "cuda" */
    const frigg_model *model;
    int max_seqs, max_ctx;
    int max_rows;          /* the most rows one step takes */
    int max_inflight;      /* steps that may be queued before the first is collected (>= 1) */
    frigg_dtype kv_dtype;
    double kv_bytes;       /* bytes of KV cache the engine reserved for all its sequences (elements and scales;
                              the CPU engine commits pages only as positions are written) */

    /* Queue one step of nrows rows (each checked first: a bad row is an error with a message, and then
     * nothing of the step ran). Returns 0, or -1 with frigg_error(). */
    int (*submit)(frigg_backend *b, frigg_row *rows, int nrows);
    /* Wait for the oldest queued step; its outputs are then in the rows given to its submit (which must stay
     * valid until then). 0, or -1 with frigg_error(); -1 also when nothing is queued. */
    int (*collect)(frigg_backend *b);
    /* Sequence calls (no step in flight may involve the sequences named). reset: empty the sequence.
     * fork: copy src's cache up to position n (n <= length of src) into dst, which then has length n; the
     * n choices of one request share one prefill this way. PrefixLM: a position's keys and values depend on
     * the whole prefix, so a fork at n continues exactly as a fresh prefill only when n >= the prefix. */
    int (*seq_reset)(frigg_backend *b, int seq);
    int (*seq_fork)(frigg_backend *b, int src, int dst, int n);
    /* Tokens in the sequence's cache (after every collected step), or -1 with frigg_error() for a bad slot. */
    int (*seq_len)(const frigg_backend *b, int seq);
    void (*destroy)(frigg_backend *b);
    void *impl;
};

/* name: "cpu", "cuda", or NULL/"auto" (cuda when a GPU is present, else cpu).
 * NULL with frigg_error() when the backend is missing from this build or fails to start. */
frigg_backend *frigg_backend_create(const char *name, const frigg_model *m, const frigg_backend_opts *opts);
/* The rows from which the CUDA engine reads the bf16 copy of m's quantized weights under dequant_rows opt (see
 * frigg_backend_opts): 0 when it makes none (opt FRIGG_DEQUANT_NEVER, or nothing of m's layers and lm_head is
 * quantized); opt itself when positive; else FRIGG_DEQUANT_ROWS_INT4 when a layer matrix is int4, otherwise
 * FRIGG_DEQUANT_ROWS_INT8. */
int frigg_dequant_rows(const frigg_model *m, int opt);
void frigg_backend_destroy(frigg_backend *b);

/* Bytes of KV cache one sequence of ctx tokens takes in engine `name` ("cpu" or "cuda") with elements of
 * type kv: K and V of every virtual layer (num_slots x ctx x hidden_size each). BF16: 2 bytes an element on
 * the CUDA engine, 4 on the CPU engine (which holds the bf16 values as floats); INT8, on either engine: 1 byte an
 * element plus one 4-byte scale per (slot, position, head). What frigg-serve budgets with. */
double frigg_kv_seq_bytes(const frigg_config *c, const char *name, frigg_dtype kv, int ctx);

/* submit + collect: one step, its outputs written before it returns. */
int frigg_step(frigg_backend *b, frigg_row *rows, int nrows);
/* One-row conveniences over frigg_step, for tests and tools that want logits. prefill: logits_last (vocab
 * floats) and/or logits_all (n * vocab), either may be NULL. decode: nseq rows, logits[nseq * vocab]. */
int frigg_prefill(frigg_backend *b, int seq, const int32_t *ids, int n, int prefix_len, float *logits_last,
                  float *logits_all);
int frigg_decode(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, float *logits);

/* 0 when engine `name` ("cpu", "cuda") keeps a KV cache of dtype kv, else -1 with frigg_error() saying which
 * engine keeps which (frigg_backend_alloc applies it; frigg-bench asks before it builds anything). */
int frigg_backend_check_kv(const char *name, frigg_dtype kv);
/* For backend implementations. alloc: the common part with the options normalised (max_seqs >= 1, max_ctx 0
 * = max_position_embeddings) and checked (max_ctx beyond max_position_embeddings, kv_dtype); *o receives them. NULL with
 * frigg_error() on a bad option. check_rows: the checks every engine makes of a step before it runs
 * anything (slots, lengths against max_ctx given the lengths `len` now, token ids, wants and k, a
 * sequence at most once); `last_greedy[seq]` says whether the step before left a greedy or sampled id for seq. */
frigg_backend *frigg_backend_alloc(const char *name, const frigg_model *m, const frigg_backend_opts *opts,
                                   frigg_backend_opts *o);
int frigg_backend_check_rows(const frigg_backend *b, const frigg_row *rows, int nrows, const int *len,
                             const unsigned char *last_greedy);
/* The sequence calls' checks: 1 with frigg_error() when seq is no slot of b (what: the call's name), or when
 * a fork at n does not lie within src's len tokens; else 0. */
int frigg_backend_bad_seq(const frigg_backend *b, int seq, const char *what);
int frigg_backend_bad_fork(const frigg_backend *b, int src, int n, int len);

frigg_backend *frigg_backend_cpu_create(const frigg_model *m, const frigg_backend_opts *opts);
#ifdef FRIGG_CUDA
frigg_backend *frigg_backend_cuda_create(const frigg_model *m, const frigg_backend_opts *opts);
int frigg_cuda_device_count(void);
#endif

#endif
