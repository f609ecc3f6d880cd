/* backend.h — the one interface every engine (CPU reference, CUDA) implements. The generation loop,
 * the tests and every executable talk to a model only through this. */
#ifndef FRIGG_BACKEND_H
#define FRIGG_BACKEND_H

#include <stdint.h>

#include "model.h"

typedef struct frigg_backend frigg_backend;

typedef struct {
    int threads;     /* CPU worker threads (0 = all cores) */
    int device;      /* CUDA device ordinal */
    int max_seqs;    /* sequence slots, each with its own static KV cache (>= 1) */
    int max_ctx;     /* tokens per sequence (0 = max_position_embeddings) */
} frigg_backend_opts;

struct frigg_backend {
    const char *name;          /* "cpu" or "cuda" */
    const frigg_model *model;
    int max_seqs, max_ctx;
    int *seq_len;              /* tokens currently in each sequence's KV cache */

    /* Run a prompt through all module runs into sequence `seq` (its cache is reset first).
     * Tokens [0, prefix_len) form the bidirectional prefix; the rest are causal (MODEL.md §4).
     * logits_last: vocab floats for the last row, or NULL. logits_all: n*vocab floats, or NULL.
     * Logits are bf16-rounded values stored as float (HF returns bf16 logits, trap T15). */
    int (*prefill)(frigg_backend *b, int seq, const int32_t *ids, int n, int prefix_len, float *logits_last,
                   float *logits_all);
    /* One causal decode step for nseq sequences: token ids[i] is appended to sequence seqs[i] at
     * position seq_len[seqs[i]]. logits: nseq*vocab floats. */
    int (*decode)(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, float *logits);
    /* Optional (may be NULL): like decode, but only the greedy ids (argmax of the bf16 logits,
     * lowest index on ties) come back — lets a GPU keep the logits on the device. */
    int (*decode_argmax)(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int32_t *out_ids);
    /* Optional (may be NULL): up to `steps` greedy steps in one call, each step's input being the greedy ids
     * of the step before (ids: the first step's). After every step on_ids(ctx, ids) receives its nseq greedy
     * ids, the same as decode_argmax's; a nonzero return stops there. Each step whose ids were delivered
     * appended its input token to the caches, as decode_argmax does; nothing else is appended. Lets a GPU queue
     * step k+1 before step k's ids reach the host. Returns the number of steps delivered, or -1 (frigg_error);
     * seq_len + steps must fit max_ctx. */
    int (*decode_greedy)(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int steps,
                         int (*on_ids)(void *ctx, const int32_t *ids), void *ctx);
    /* Optional (may be NULL): like decode, but only each row's k largest logits come back (1 <= k <= FRIGG_TOPK_MAX
     * of sampler.h, k < vocab): vals[i*k + j], out_ids[i*k + j], j < k, are row i's k largest bf16 logits (value
     * descending, ties to the lower id, decide which) and their ids, in an unspecified order. What a top-k draw
     * needs (frigg_sample_topk), without the vocabulary crossing from a GPU. */
    int (*decode_topk)(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int k, float *vals,
                       int32_t *out_ids);
    void (*destroy)(frigg_backend *b);
    void *impl;
};

/* name: "cpu", "cuda", or NULL/"auto" (cuda when a GPU is present, else cpu).
 * NULL with frigg_error() when the backend is missing from this build or fails to start. */
frigg_backend *frigg_backend_create(const char *name, const frigg_model *m, const frigg_backend_opts *opts);
void frigg_backend_destroy(frigg_backend *b);

/* For backend implementations: allocate the common part with the options normalised (max_seqs >= 1,
 * max_ctx in [1, max_position_embeddings]); *o receives the normalised options. */
frigg_backend *frigg_backend_alloc(const char *name, const frigg_model *m, const frigg_backend_opts *opts,
                                   frigg_backend_opts *o);

frigg_backend *frigg_backend_cpu_create(const frigg_model *m, const frigg_backend_opts *opts);
#ifdef FRIGG_CUDA
frigg_backend *frigg_backend_cuda_create(const frigg_model *m, const frigg_backend_opts *opts);
int frigg_cuda_device_count(void);
#endif

#endif
