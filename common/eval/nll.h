/* nll.h — teacher-forced negative log-likelihood of a token sequence's continuation. */
#ifndef FRIGG_NLL_H
#define FRIGG_NLL_H

#include <stdint.h>

#include "engine/backend.h"

/* The sequence's shape: prefix in [1, n) (at least one token of context, at least one to score). 0, or -1
 * with frigg_error(). */
int frigg_nll_check(int n, int prefix);
/* log(sum_i exp(row[i])) over vocab floats, in fp64 (the maximum subtracted first). */
double frigg_logsumexp(const float *row, int vocab);
/* The sum of -log p(ids[t] | ids[<t]) for t in [prefix, n) from every prompt row's logits, logits_all[n *
 * vocab] as a FRIGG_WANT_ALL_LOGITS prefill gives them (row t-1 predicts token t), log-sum-exp in fp64.
 * frigg_nll_check(n, prefix) must hold. Targets: n - prefix. */
double frigg_nll_sum(const float *logits_all, int vocab, const int32_t *ids, int n, int prefix);
/* The rows of logits_all that score a target (rows prefix - 1 .. n - 2) checked value by value: 0 when every
 * one is finite, else -1 with frigg_error() naming the first NaN or infinity, its token id and position, in the
 * words generation uses ("the model's logits are not finite ..."). A score from such rows is NaN or an
 * infinity, which JSON cannot carry and which is no measurement: nll and kl refuse the sequence instead.
 * frigg_nll_check(n, prefix) must hold. */
int frigg_logits_check_finite(const float *logits_all, int vocab, int n, int prefix);
/* One forward over ids[0..n) with tokens [0, prefix) as the bidirectional prefix and the rest causal
 * (how DFM-Mimir was trained), on sequence `seq` of the backend, then frigg_nll_sum. Many sequences at
 * once go through the scheduler's score requests instead (scheduler.h; frigg-eval nll). */
int frigg_nll(frigg_backend *b, int seq, const int32_t *ids, int n, int prefix, double *nll_sum, int *targets);

#endif
