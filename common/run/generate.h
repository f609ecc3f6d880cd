/* generate.h — one request on one sequence slot, start to finish: a thin loop of engine steps over a
 * frigg_seqgen (seqgen.h), for tests and tools that run one sequence at a time. Many requests at once go
 * through the scheduler (scheduler.h), which drives the same seqgen. */
#ifndef FRIGG_GENERATE_H
#define FRIGG_GENERATE_H

#include <stdint.h>

#include "engine/backend.h"
#include "engine/sampler.h"

typedef struct {
    int max_tokens;
    frigg_sampler_params sampling;
    const int32_t *stop_ids;
    int n_stop_ids;
    int prefix_tokens;          /* -1: the whole prompt */
    int logprobs;               /* top-k log-probabilities per generated token (0 = none) */
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

#endif
