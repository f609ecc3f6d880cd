/* nll.c — see nll.h. */
#include "nll.h"

#include <math.h>
#include <stdlib.h>

#include "base/util.h"

int frigg_nll_check(int n, int prefix) {
    if (prefix < 1 || prefix >= n) {
        frigg_set_error("nll: prefix_tokens must be in [1, %d) for a %d-token sequence (got %d)", n, n, prefix);
        return -1;
    }
    return 0;
}

double frigg_logsumexp(const float *row, int vocab) {
    double mx = -INFINITY, z = 0;
    for (int i = 0; i < vocab; i++) mx = fmax(mx, row[i]);
    for (int i = 0; i < vocab; i++) z += exp((double)row[i] - mx);
    return mx + log(z);
}

double frigg_nll_sum(const float *logits_all, int vocab, const int32_t *ids, int n, int prefix) {
    double sum = 0;
    for (int t = prefix; t < n; t++) {
        const float *row = logits_all + (size_t)(t - 1) * vocab; /* row t-1 predicts token t */
        sum += frigg_logsumexp(row, vocab) - row[ids[t]];
    }
    return sum;
}

int frigg_logits_check_finite(const float *logits_all, int vocab, int n, int prefix) {
    for (int t = prefix; t < n; t++) {
        const float *row = logits_all + (size_t)(t - 1) * vocab;
        for (int i = 0; i < vocab; i++) {
            if (isfinite(row[i])) continue;
            frigg_set_error("the model's logits are not finite (%s at token id %d) in row %d of %d, which scores token "
                            "%d: the weights or the computation hold a NaN or an infinity",
                            isnan(row[i]) ? "NaN" : row[i] > 0 ? "+Inf" : "-Inf", i, t - 1, n, t);
            return -1;
        }
    }
    return 0;
}

int frigg_nll(frigg_backend *b, int seq, const int32_t *ids, int n, int prefix, double *nll_sum, int *targets) {
    int V = b->model->cfg.vocab_size;
    if (frigg_nll_check(n, prefix)) return -1;
    float *all = malloc((size_t)n * V * sizeof(float));
    if (!all) {
        frigg_set_error("nll: out of memory for %d x %d logits", n, V);
        return -1;
    }
    if (frigg_prefill(b, seq, ids, n, prefix, NULL, all) || frigg_logits_check_finite(all, V, n, prefix)) {
        free(all);
        return -1;
    }
    *nll_sum = frigg_nll_sum(all, V, ids, n, prefix);
    *targets = n - prefix;
    free(all);
    return 0;
}
