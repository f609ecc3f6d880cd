/* sampler.h — choose the next id from a row of logits: greedy, temperature, top-k, exact top-p,
 * repetition penalty (CTRL rule), with a seeded, reproducible generator. */
#ifndef FRIGG_SAMPLER_H
#define FRIGG_SAMPLER_H

#include <stdint.h>

typedef struct {
    float temperature;         /* 0 = greedy */
    int top_k;                 /* 0 = off */
    float top_p;               /* 0 or 1 = off; otherwise keep the smallest prefix of the sorted
                                  distribution whose mass reaches top_p */
    float repetition_penalty;  /* 0 or 1 = off (so a zero-initialised struct means plain greedy) */
    uint64_t seed;
} frigg_sampler_params;

typedef struct {
    frigg_sampler_params p;
    uint64_t s[4];             /* xoshiro256** state */
    int vocab;
    float *work;               /* vocab floats: logits / temperature */
    int32_t *order;            /* vocab ids: the head of the ranking (value descending, ties by lower id) */
    double *e;                 /* vocab doubles: exp(work - max) when top-k is off */
    double *bucket;            /* top-p's mass per value range (allocated on first use) */
} frigg_sampler;

void frigg_sampler_init(frigg_sampler *s, const frigg_sampler_params *p, int vocab);
void frigg_sampler_free(frigg_sampler *s);
uint64_t frigg_rng_next(uint64_t st[4]);
double frigg_rng_uniform(uint64_t st[4]);   /* [0, 1) with 53 random bits */
void frigg_rng_seed(uint64_t st[4], uint64_t seed);

/* CTRL repetition penalty over `prev` (the response so far), in place: a positive logit is divided
 * by the penalty, a negative one multiplied; each id once however often it occurred. */
void frigg_apply_repetition_penalty(float *logits, int vocab, const int32_t *prev, int nprev, float penalty);

/* The distribution the sampler draws from after temperature, top-k and top-p, written as probabilities
 * into probs[vocab] (zeros outside the kept set). Exposed so tests can compare it with a brute force. */
void frigg_sampler_distribution(frigg_sampler *s, const float *logits, double *probs);

/* Sample one id. logits are modified (repetition penalty applied in place). */
int32_t frigg_sample(frigg_sampler *s, float *logits, const int32_t *prev, int nprev);

/* A draw that needs only the row's top k logits: the sampler samples (temperature > 0), keeps top_k = k ids
 * (1 <= k < vocab, k <= FRIGG_TOPK_MAX) and has no repetition penalty. Returns k, else 0. A backend can then
 * send just those k (value, id) pairs (backend.h, FRIGG_WANT_TOPK). */
#define FRIGG_TOPK_MAX 1024
/* The ids of row's k largest values (1 <= k <= V; value descending, ties to the lower id), in that order; rows
 * without NaN. The reference for the engines' FRIGG_WANT_TOPK rows. */
void frigg_topk(const float *row, int V, int k, int32_t *ids);
int frigg_sampler_topk_only(const frigg_sampler_params *p, int vocab);
/* 1 when the draw is the argmax of the row (temperature 0, no repetition penalty): a backend can then send
 * only the greedy id. */
int frigg_sampler_greedy_only(const frigg_sampler_params *p);
/* The draw frigg_sample would make on the whole row, from its top k = top_k (value, id) pairs, in any order
 * (value descending, ties to the lower id, decide which k; what lies outside them does not matter). */
int32_t frigg_sample_topk(frigg_sampler *s, const float *vals, const int32_t *ids, int n);

/* log-softmax of logits (fp64 inside); the top k ids by log-probability (ties: lower id first). */
void frigg_top_logprobs(const float *logits, int vocab, int k, int32_t *ids, float *lps);
float frigg_logprob_of(const float *logits, int vocab, int32_t id);
/* log Σ exp(row), in double inside: what turns a logit into a log-probability (the engines' TOPK rows). */
float frigg_row_lse(const float *row, int vocab);

#endif
