/* sampler.h — choose the next id from a row of logits: greedy, temperature, top-k, exact top-p,
 * repetition penalty (CTRL rule), frequency and presence penalties and a logit bias (OpenAI's rules), with a
 * seeded, reproducible generator.
 *
 * The order of one draw, on the row as the engine returned it:
 *   1. repetition_penalty (CTRL) over the distinct ids of `prev`;
 *   2. frequency/presence: for each id j occurring c[j] > 0 times in `prev`,
 *      logit[j] -= c[j] * frequency_penalty + presence_penalty (in float: one subtraction per id);
 *   3. logit_bias: logit[id] += bias, entry by entry (an id listed twice gets both);
 *   4. greedy (temperature 0): the argmax of that row, lowest id on ties; else divide by the temperature,
 *      top-k, top-p, draw.
 * `prev` is what the caller passes: seqgen passes the ids generated so far in this choice, never the prompt
 * (so all three penalties count the response only). Steps 1-3 are frigg_sampler_adjust. */
#ifndef FRIGG_SAMPLER_H
#define FRIGG_SAMPLER_H

#include <stdint.h>

/* OpenAI's ranges, enforced by the request parsers (request.c, the server's): |frequency_penalty|,
 * |presence_penalty| <= 2; |bias| <= 100; at most FRIGG_MAX_LOGIT_BIAS logit_bias entries (OpenAI documents
 * no cap; 300 is far more than a ban list or a forced choice needs, and keeps the params struct, which is
 * copied by value, at a few KiB). A bias is added, not a ban: -100 makes a token practically impossible
 * next to logits within tens of each other (e^-100), +100 practically certain. */
#define FRIGG_PENALTY_LIMIT 2.0
#define FRIGG_LOGIT_BIAS_LIMIT 100.0
#define FRIGG_MAX_LOGIT_BIAS 300

typedef struct {
    int32_t id;
    float bias;
} frigg_logit_bias;

typedef struct {
    float temperature;         /* 0 = greedy */
    int top_k;                 /* 0 = off */
    float top_p;               /* 0 or 1 = off; otherwise keep the smallest prefix of the sorted
                                  distribution whose mass reaches top_p */
    float repetition_penalty;  /* 0 or 1 = off (so a zero-initialised struct means plain greedy) */
    uint64_t seed;
    float frequency_penalty;   /* 0 = off; subtracted once per occurrence in prev */
    float presence_penalty;    /* 0 = off; subtracted once from every id present in prev */
    int n_logit_bias;          /* entries used in logit_bias[] (0..FRIGG_MAX_LOGIT_BIAS) */
    frigg_logit_bias logit_bias[FRIGG_MAX_LOGIT_BIAS]; /* by value: the struct is copied around whole */
} frigg_sampler_params;

typedef struct {
    frigg_sampler_params p;
    uint64_t s[4];             /* xoshiro256** state */
    int vocab;
    float *work;               /* vocab floats: logits / temperature */
    int32_t *order;            /* vocab ids: the head of the ranking (value descending, ties by lower id) */
    double *e;                 /* vocab doubles: exp(work - max) when top-k is off */
    double *bucket;            /* top-p's mass per value range (allocated on first use) */
    int32_t *count;            /* vocab counts for frequency/presence (allocated when either is on; all zero
                                  between calls) */
} frigg_sampler;

void frigg_sampler_init(frigg_sampler *s, const frigg_sampler_params *p, int vocab);
void frigg_sampler_free(frigg_sampler *s);
uint64_t frigg_rng_next(uint64_t st[4]);
double frigg_rng_uniform(uint64_t st[4]);   /* [0, 1) with 53 random bits */
void frigg_rng_seed(uint64_t st[4], uint64_t seed);

/* CTRL repetition penalty over `prev` (the response so far), in place: a positive logit is divided
 * by the penalty, a negative one multiplied; each id once however often it occurred. */
void frigg_apply_repetition_penalty(float *logits, int vocab, const int32_t *prev, int nprev, float penalty);

/* Steps 1-3 above, in place: the row the draw (or greedy's argmax) is made from. Ids of prev or of
 * logit_bias outside [0, vocab) are skipped. */
void frigg_sampler_adjust(frigg_sampler *s, float *logits, const int32_t *prev, int nprev);
/* 1 when frigg_sampler_adjust can change a logit under these parameters (a repetition, frequency or presence
 * penalty, a nonzero logit_bias entry), else 0. */
int frigg_sampler_adjusts(const frigg_sampler_params *p);

/* The distribution the sampler draws from after temperature, top-k and top-p (of an already adjusted row:
 * this does not apply the penalties or the bias), written as probabilities into probs[vocab] (zeros outside
 * the kept set). Exposed so tests can compare it with a brute force. */
void frigg_sampler_distribution(frigg_sampler *s, const float *logits, double *probs);

/* Sample one id: frigg_sampler_adjust(logits, prev), then greedy or a draw. logits are modified in place. */
int32_t frigg_sample(frigg_sampler *s, float *logits, const int32_t *prev, int nprev);

/* A draw that needs only the row's top k logits: the sampler samples (temperature > 0), keeps top_k = k ids
 * (1 <= k < vocab, k <= FRIGG_TOPK_MAX) and changes no logit before it (no repetition, frequency or presence
 * penalty, no nonzero logit_bias entry: any of them can change which ids are the k largest). Returns k, else 0.
 * A backend can then send just those k (value, id) pairs (backend.h, FRIGG_WANT_TOPK). */
#define FRIGG_TOPK_MAX 1024
/* The ids of row's k largest values (1 <= k <= V; value descending, ties to the lower id), in that order; rows
 * without NaN. The reference for the engines' FRIGG_WANT_TOPK rows. */
void frigg_topk(const float *row, int V, int k, int32_t *ids);
int frigg_sampler_topk_only(const frigg_sampler_params *p, int vocab);
/* 1 when the draw is the argmax of the row as the engine returned it (temperature 0, and no penalty or nonzero
 * logit_bias entry changes a logit first): a backend can then send only the greedy id. */
int frigg_sampler_greedy_only(const frigg_sampler_params *p);
/* The draw frigg_sample would make on the whole row, from its top k = top_k (value, id) pairs, in any order
 * (value descending, ties to the lower id, decide which k; what lies outside them does not matter). Only for
 * a sampler whose parameters frigg_sampler_topk_only takes (it applies no penalty or bias). */
int32_t frigg_sample_topk(frigg_sampler *s, const float *vals, const int32_t *ids, int n);

/* One draw from softmax(logits / temperature) over the ids that mask allows (bit id % 32 of word id / 32; NULL:
 * every id), with the uniform u in [0, 1): w = logits[i] / temperature in float, M the largest allowed w,
 * e_i = exp((double)w_i - M), S their sum in id order; the first allowed id, in id order, whose running sum of
 * e_i / S passes u. Rounding can leave u past the last sum: then the last allowed id whose e_i is positive. -1 when
 * a value of the row (allowed or not) is not finite, or when no id is allowed. frigg_sample's draw when top-k and
 * top-p are off is this rule, and it is the specification of the engines' FRIGG_WANT_SAMPLE rows (backend.h). */
int32_t frigg_draw_row(const float *logits, int vocab, const uint32_t *mask, float temperature, double u);

/* log-softmax of logits (fp64 inside); the top k ids by log-probability (ties: lower id first). */
void frigg_top_logprobs(const float *logits, int vocab, int k, int32_t *ids, float *lps);
float frigg_logprob_of(const float *logits, int vocab, int32_t id);
/* log Σ exp(row), in double inside: what turns a logit into a log-probability (the engines' TOPK rows). */
float frigg_row_lse(const float *row, int vocab);

#endif
