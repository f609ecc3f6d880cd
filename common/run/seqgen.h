/* seqgen.h — one sequence's generation state: everything the decoding of one choice of one request
 * needs between engine steps. Its sampler with all its parameters and its own random stream (so a
 * request's output does not depend on what else shares its steps), stop ids, stop strings with the text
 * they hold back, the streaming detokenizer, log-probabilities, tool-call parsing at the end, the finish
 * reason, usage and timing. The scheduler (scheduler.h) and frigg_generate (generate.h) drive it:
 *
 *   g = frigg_seqgen_new(&params, n_prompt, vocab, tok);
 *   loop: frigg_seqgen_row(g, &row) says what the next step should ask for (the caller fills seq, the
 *         input token and the output buffers it gets from frigg_seqgen_buffers); after the step,
 *         frigg_seqgen_accept(g, &row, ...) draws the next id, streams its text, and says whether the
 *         sequence is done;
 *   frigg_seqgen_finish(g) flushes the text and parses tool calls; the result is g's to read.
 *
 * Not thread-safe: one seqgen is driven by one thread. */
#ifndef FRIGG_SEQGEN_H
#define FRIGG_SEQGEN_H

#include <jansson.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/sampler.h"
#include "gcache.h"
#include "tokenizer/tokenizer.h"

#define FRIGG_SEQGEN_MAX_STOP_IDS 66
#define FRIGG_SEQGEN_MAX_STOPS 4

typedef struct {
    int max_tokens;
    frigg_sampler_params sampling;
    int32_t stop_ids[FRIGG_SEQGEN_MAX_STOP_IDS];
    int n_stop_ids;
    const char *stop[FRIGG_SEQGEN_MAX_STOPS]; /* stop strings (need a tokenizer); copied */
    int n_stop;
    int logprobs;     /* top-k log-probabilities per generated token (0 = none): always of the model's own
                         distribution, log-softmax of the row the engine returned (temperature 1, before any
                         repetition/frequency/presence penalty or logit_bias, which shape only the draw), so a
                         token forced by a bias shows the probability the model gave it */
    int parse_tools;  /* parse <|tool_call> blocks out of the text at the end */
    /* Structured output (gcache.h; NULL: none; borrowed, the seqgen takes a reference of its own): every draw is
     * made from the row with the tokens the grammar does not allow next left out: greedy decode rows carry the
     * mask to the engine (frigg_row.mask: the best allowed id found where the logits are); a sampled draw, and the
     * prefill row, take the whole row with the refused ids at -inf (before the penalties, the bias, temperature,
     * top-k and top-p), on the host; the grammar's recogniser takes each id drawn. The sequence ends with "stop" once the grammar
     * allows only its end (or an end id is drawn where it may end), with "length" at max_tokens wherever it is. */
    frigg_gref *grammar;
    /* lazy_grammar: the grammar starts after the first grammar_trigger drawn (a token of its own, not part of the
     * grammar's text): until then the sequence decodes as without one (a tool call the model chooses to make under
     * tool_choice auto, the grammar beginning after its <|tool_call>). A lazy sequence's steps are not run ahead
     * (frigg_seqgen_lazy_waiting): the step after the trigger must be masked. */
    int lazy_grammar;
    int32_t grammar_trigger;
} frigg_seqgen_params;

typedef struct frigg_seqgen frigg_seqgen;

/* The result, valid until frigg_seqgen_free. */
typedef struct {
    const int32_t *ids;          /* generated ids, without the stop id */
    int n;
    const char *finish_reason;   /* "stop" | "length" | "cancelled" */
    const char *text;            /* with a tokenizer: exactly what a streaming client received */
    size_t text_len;
    json_t *tool_calls;          /* parse_tools and calls found: borrowed array; else NULL */
    const char *tool_call_error; /* parse_tools and the text did not parse: why; else NULL */
    const float *token_logprob;  /* [n] when logprobs > 0 */
    const int32_t *top_ids;      /* [n][logprobs] */
    const float *top_lps;        /* [n][logprobs] */
    int prompt_tokens;
    double queue_ms, prefill_ms, decode_ms, first_token_ms; /* first_token_ms: from admission to the first id */
    int decode_steps;
} frigg_seqgen_result;

/* NULL with frigg_error() (a stop string without a tokenizer, say). */
frigg_seqgen *frigg_seqgen_new(const frigg_seqgen_params *p, int prompt_tokens, int vocab, const frigg_tokenizer *tok);
void frigg_seqgen_free(frigg_seqgen *g);
/* 1 while a lazy grammar has not started: the sequence's next step must not be queued before this one's id is on the
 * host (the id may start the grammar, which then masks the step after it). */
int frigg_seqgen_lazy_waiting(const frigg_seqgen *g);

/* What the next step's row for this sequence asks for: want and k, the mask, and the output buffers (owned by g).
 * The caller sets row->prefill first (and seq, ids/n/prefix_len or the input token, before or after). The want is
 * the cheapest that gives g what it needs: the greedy id (greedy, no penalty, no logit bias, no logprobs; under a
 * grammar a decode row carries the mask of the allowed next tokens, row->mask, which points into g until the next
 * call, and its prefill row asks for the whole row), the top k (a pure top-k draw: no penalty, no logit bias, no
 * logprobs, no grammar), a draw where the logits are (FRIGG_WANT_SAMPLE: a sampled sequence with neither top-k nor
 * top-p, no penalty, no logit bias, no logprobs; the row carries the temperature, the draw's uniform from g's stream,
 * and under a grammar the mask; a prefill row asks for the whole row and the host draws by the same rule,
 * frigg_draw_row), or the whole row. */
void frigg_seqgen_row(frigg_seqgen *g, frigg_row *row);
/* A decode row queued behind the one frigg_seqgen_row made last (the scheduler's two-deep decoding), whose want
 * the caller copied from it: a SAMPLE row gets its temperature and the next uniform of g's stream, so the ids are
 * those of the same rows made one at a time. */
void frigg_seqgen_row_ahead(frigg_seqgen *g, frigg_row *row);
/* The input token of the next decode step: the last id drawn. */
int32_t frigg_seqgen_last(const frigg_seqgen *g);
/* After the step: take the row's output (through the row's output pointers, which frigg_seqgen_row set to
 * g's buffers; a caller may point a GREEDY row's out_id elsewhere; a LOGITS row's logits are left as the engine
 * wrote them: the penalties and the bias are applied to a copy), draw the next id, stream its text. The
 * repetition, frequency and presence penalties count the ids this choice generated before (never the prompt,
 * whatever it holds; sampler.h gives the rules and their order). *piece / *piece_len receive the
 * text released by this id (owned by g, valid until the next call; empty when nothing is released yet).
 * Returns 1 when the sequence is finished (a stop id, a stop string, max_tokens), else 0. */
int frigg_seqgen_accept(frigg_seqgen *g, const frigg_row *row, const char **piece, size_t *piece_len);
/* After accept returned 1: NULL when the sequence finished normally, else why it failed (the engine's values for
 * the row were not finite: NaN or an infinity in a TOPK row's values or a LOGITS row; the message names the step
 * and the row's sequence slot). The caller ends the request with it. Owned by g. */
const char *frigg_seqgen_error(const frigg_seqgen *g);
/* The n choices of one request share one prefill: dst receives the step output src's row received (both
 * were made with the same parameters but the seed, so they want the same). */
void frigg_seqgen_take_output(frigg_seqgen *dst, const frigg_seqgen *src);
/* The checks of a prompt before anything runs: not empty, prompt + max_tokens within the engine's context
 * (the error names both counts), 0 <= prefix_len <= n, ids inside the vocabulary. 0, or -1 with
 * frigg_error(). */
int frigg_seqgen_check_prompt(const frigg_backend *b, const int32_t *ids, int n, int max_tokens, int prefix_len);
/* max_tokens of 0: finished before any step. */
int frigg_seqgen_done(const frigg_seqgen *g);
/* End: release held-back text (returned like accept's piece), parse tool calls; finish_reason "cancelled"
 * when cancelled is set. Call once. */
void frigg_seqgen_finish(frigg_seqgen *g, int cancelled, const char **piece, size_t *piece_len);
const frigg_seqgen_result *frigg_seqgen_result_of(const frigg_seqgen *g);
/* Timing marks, in ms of frigg_now_ms(): when the request was queued, admitted, its prefill done. */
void frigg_seqgen_mark(frigg_seqgen *g, double queued, double admitted, double prefilled);

#endif
