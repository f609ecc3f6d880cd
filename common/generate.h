/* generate.h — the generation loop over any backend: prefill, then sample/decode until a stop id,
 * a stop request from the caller (stop strings), or max_tokens. Shared by every executable. */
#ifndef FRIGG_GENERATE_H
#define FRIGG_GENERATE_H

#include <stdint.h>

#include "backend.h"
#include "sampler.h"

typedef struct {
    int max_tokens;
    frigg_sampler_params sampling;
    const int32_t *stop_ids;
    int n_stop_ids;
    int prefix_tokens;          /* -1: the whole prompt */
    int logprobs;               /* top-k log-probabilities per generated token (0 = none) */
    /* Called after each generated token (a stop id is not passed); return 1 to stop ("stop" finish). */
    int (*on_token)(void *ctx, int32_t id);
    void *ctx;
} frigg_gen_params;

typedef struct {
    int32_t *ids;               /* generated ids, without the stop id */
    int n;
    const char *finish_reason;  /* "stop" | "length" */
    float *token_logprob;       /* [n] log-probability of each generated id (when logprobs > 0) */
    int32_t *top_ids;           /* [n][logprobs] */
    float *top_lps;             /* [n][logprobs] */
    double prefill_ms, decode_ms;
    int decode_steps;
} frigg_gen_result;

/* Default stop ids of a model (TOKENIZER.md §5): <turn|> 106, <eos> 1, the config's eos ids, and
 * <|tool_response> 50 when tools are declared — each only when inside the vocabulary. */
int frigg_default_stop_ids(const frigg_config *c, int with_tools, int32_t *out, int max);

/* Checks prompt + max_tokens against the backend's context (error names both counts). */
int frigg_generate(frigg_backend *b, int seq, const int32_t *prompt, int n, const frigg_gen_params *p,
                   frigg_gen_result *r);
void frigg_gen_result_free(frigg_gen_result *r);

/* One decode step of nseq sequences whose next ids are top-k draws (k = frigg_sampler_topk_only of their
 * samplers' parameters, the same for all): the backend's decode_topk sends each row's k largest logits, and
 * smp[i] draws out[i] from them (frigg_sample_topk). 0, or -1 with frigg_error. */
int frigg_decode_topk_draw(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int k, frigg_sampler *smp,
                           int32_t *out);

#endif
