/* request.h — one frigg-run / frigg-serve request (a JSON object), validated field by field.
 * Unknown fields and out-of-range values are errors with a message naming the field. */
#ifndef FRIGG_REQUEST_H
#define FRIGG_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/sampler.h"
#include "respfmt.h"

#define FRIGG_MAX_STOP_IDS 64
#define FRIGG_MAX_STOP_STRINGS 4
#define FRIGG_MAX_LOGPROBS 20
#define FRIGG_DEFAULT_MAX_TOKENS 256

typedef struct {
    json_t *id;                 /* echoed back verbatim when given */
    int32_t *input_ids;         /* exactly one of input_ids / prompt / messages */
    int n_input;
    char *prompt;               /* NUL-terminated; may hold NUL bytes (\u0000): prompt_len is its length */
    size_t prompt_len;
    json_t *messages, *tools;
    int max_tokens;
    bool max_tokens_given;
    frigg_sampler_params sampling;
    bool has_stop_ids;          /* absent: the model's defaults (see frigg_default_stop_ids) */
    int32_t stop_ids[FRIGG_MAX_STOP_IDS];
    int n_stop_ids;
    char *stop[FRIGG_MAX_STOP_STRINGS];
    int n_stop;
    int prefix_tokens;          /* -1: the whole prompt is the bidirectional prefix */
    int logprobs;               /* 0: none; k: top-k log-probabilities per generated token */
    frigg_respfmt response_format; /* structured output (respfmt.h); kind 0: text */
} frigg_request;

/* Parse one request object. vocab bounds token ids. messages: roles system, developer (handed on as system), user,
 * assistant, tool; each with "content" except an assistant message with "tool_calls". 0 ok; -1 with frigg_error() naming the field.
 * frequency_penalty, presence_penalty: numbers in [-2, 2] (FRIGG_PENALTY_LIMIT), 0 = off. logit_bias: an object
 * {"<token id>": bias} as OpenAI's, keys decimal ids in [0, vocab) (no sign, no leading zero), values numbers in
 * [-100, 100] (FRIGG_LOGIT_BIAS_LIMIT), at most FRIGG_MAX_LOGIT_BIAS entries; null = none. */
int frigg_request_parse(frigg_request *r, const json_t *obj, int vocab);
void frigg_request_free(frigg_request *r);
/* The logit_bias object alone (absent or null: none), into sp->logit_bias / sp->n_logit_bias, with the rules
 * above; for other request formats (the server's) too. 0, or -1 with frigg_error() naming "logit_bias" (then
 * sp->n_logit_bias is 0). */
int frigg_parse_logit_bias(const json_t *v, int vocab, frigg_sampler_params *sp);

#endif
