/* nll.h — teacher-forced negative log-likelihood of a token sequence's continuation. */
#ifndef FRIGG_NLL_H
#define FRIGG_NLL_H

#include <stdint.h>

#include "backend.h"

/* One forward over ids[0..n) with tokens [0, prefix) as the bidirectional prefix and the rest causal
 * (how DFM-Mimir was trained); sums -log p(ids[t] | ids[<t]) for t in [prefix, n) from the bf16
 * logits, in fp64. prefix >= 1. Uses sequence `seq` of the backend. */
int frigg_nll(frigg_backend *b, int seq, const int32_t *ids, int n, int prefix, double *nll_sum, int *targets);

#endif
