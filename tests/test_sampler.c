/* test_sampler.c — sampling statistics against softmax(logits/T), exact top-p against a brute force,
 * the CTRL repetition-penalty sign rule, top-k, and seed reproducibility. */
#include <math.h>
#include <stdlib.h>

#include "cpu_ops.h"
#include "harness.h"
#include "sampler.h"

/* Brute-force top-p: keep the most probable tokens, in order, until their mass reaches p. */
static void brute_top_p(const float *logits, int V, float T, float p, double *out) {
    double *pr = malloc(sizeof(double) * V), mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, logits[i] / T);
    for (int i = 0; i < V; i++) sum += pr[i] = exp(logits[i] / T - mx);
    char *kept = calloc(V, 1);
    double cum = 0, ksum = 0;
    while (cum < p) {
        int best = -1;
        for (int i = 0; i < V; i++)
            if (!kept[i] && (best < 0 || pr[i] > pr[best])) best = i;
        if (best < 0) break;
        kept[best] = 1;
        cum += pr[best] / sum;
    }
    for (int i = 0; i < V; i++) ksum += kept[i] ? pr[i] : 0;
    for (int i = 0; i < V; i++) out[i] = kept[i] ? pr[i] / ksum : 0;
    free(pr);
    free(kept);
}

static void freq_check(const float *logits, int V, frigg_sampler_params p, const char *what) {
    frigg_sampler s;
    frigg_sampler_init(&s, &p, V);
    double *want = calloc(V, sizeof(double));
    frigg_sampler_distribution(&s, logits, want);
    int draws = 40000, *cnt = calloc(V, sizeof(int));
    float *work = malloc(sizeof(float) * V);
    for (int d = 0; d < draws; d++) {
        memcpy(work, logits, sizeof(float) * V);
        int id = frigg_sample(&s, work, NULL, 0);
        cnt[id]++;
    }
    int ok = 1;
    for (int i = 0; i < V; i++) {
        double f = (double)cnt[i] / draws, sd = sqrt(want[i] * (1 - want[i]) / draws);
        if (want[i] == 0 && cnt[i] != 0) ok = 0;                  /* filtered ids are never drawn */
        if (fabs(f - want[i]) > 5 * sd + 1e-9) ok = 0;
    }
    CHECK(ok, "%s: empirical frequencies do not match the distribution", what);
    free(want);
    free(cnt);
    free(work);
    frigg_sampler_free(&s);
}

int main(void) {
    TEST_MAIN_BEGIN("test_sampler");
    float lg[6] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};

    /* The distribution itself is softmax(logits / T). */
    frigg_sampler_params p = {.temperature = 0.7f, .top_p = 1.0f, .repetition_penalty = 1.0f, .seed = 42};
    frigg_sampler s;
    frigg_sampler_init(&s, &p, 6);
    double d[6], sum = 0;
    frigg_sampler_distribution(&s, lg, d);
    for (int i = 0; i < 6; i++) sum += exp(lg[i] / 0.7);
    int ok = 1;
    for (int i = 0; i < 6; i++) ok &= fabs(d[i] - exp(lg[i] / 0.7) / sum) < 1e-6;
    CHECK(ok, "distribution is softmax(logits/T)");
    frigg_sampler_free(&s);

    freq_check(lg, 6, p, "T=0.7");
    p.temperature = 1.5f;
    freq_check(lg, 6, p, "T=1.5");
    p.top_k = 3;
    freq_check(lg, 6, p, "T=1.5 top_k=3");
    p.top_k = 0;
    p.top_p = 0.8f;
    freq_check(lg, 6, p, "T=1.5 top_p=0.8");

    /* Exact top-p against the brute force, on a 1000-id row, many p. */
    int V = 1000;
    float *big = malloc(sizeof(float) * V);
    uint64_t st[4];
    frigg_rng_seed(st, 9);
    for (int i = 0; i < V; i++) big[i] = (float)(6 * frigg_rng_uniform(st) - 3);
    double *a = malloc(sizeof(double) * V), *b = malloc(sizeof(double) * V);
    int tp_ok = 1;
    for (int k = 1; k <= 19; k++) {
        frigg_sampler_params q = {.temperature = 0.9f, .top_p = k / 20.0f, .repetition_penalty = 1.0f};
        frigg_sampler_init(&s, &q, V);
        frigg_sampler_distribution(&s, big, a);
        brute_top_p(big, V, 0.9f, k / 20.0f, b);
        for (int i = 0; i < V; i++) tp_ok &= fabs(a[i] - b[i]) < 1e-9;
        frigg_sampler_free(&s);
    }
    CHECK(tp_ok, "top-p differs from the brute-force reference");

    /* CTRL rule: positive logits divided, negative multiplied, each id once. A rule that divides all
     * would give -1 for id 1 (a *boost*); CTRL gives -4. */
    float rp[4] = {2.0f, -2.0f, 0.5f, 1.0f};
    int32_t prev[3] = {0, 1, 0};
    frigg_apply_repetition_penalty(rp, 4, prev, 3, 2.0f);
    CHECK(rp[0] == 1.0f && rp[1] == -4.0f && rp[2] == 0.5f && rp[3] == 1.0f, "penalty: %g %g %g %g", rp[0], rp[1], rp[2],
          rp[3]);

    /* Seeds: the same seed replays the same draws; another seed does not. */
    frigg_sampler_params q = {.temperature = 1.0f, .top_p = 1.0f, .repetition_penalty = 1.0f, .seed = 123};
    int32_t r1[64], r2[64], r3[64];
    for (int run = 0; run < 3; run++) {
        q.seed = run == 2 ? 124 : 123;
        frigg_sampler_init(&s, &q, V);
        float *w = malloc(sizeof(float) * V);
        for (int t = 0; t < 64; t++) {
            memcpy(w, big, sizeof(float) * V);
            (run == 0 ? r1 : run == 1 ? r2 : r3)[t] = frigg_sample(&s, w, NULL, 0);
        }
        free(w);
        frigg_sampler_free(&s);
    }
    CHECK(!memcmp(r1, r2, sizeof r1), "same seed, different draws");
    CHECK(memcmp(r1, r3, sizeof r1) != 0, "different seeds, same draws");

    /* Greedy and top_k = 1 both take the argmax (lowest id on ties). */
    float tie[4] = {1.0f, 3.0f, 3.0f, 0.0f};
    frigg_sampler_params g = {.temperature = 0, .top_p = 1, .repetition_penalty = 1};
    frigg_sampler_init(&s, &g, 4);
    CHECK(frigg_sample(&s, tie, NULL, 0) == 1, "greedy tie-break");
    frigg_sampler_free(&s);
    g.temperature = 1;
    g.top_k = 1;
    frigg_sampler_init(&s, &g, 4);
    CHECK(frigg_sample(&s, tie, NULL, 0) == 1, "top_k=1 is greedy");
    frigg_sampler_free(&s);

    /* Top log-probabilities: sorted, normalised. */
    int32_t ti[3];
    float tl[3];
    frigg_top_logprobs(lg, 6, 3, ti, tl);
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp(lg[i]);
    CHECK(ti[0] == 0 && ti[1] == 1 && ti[2] == 2 && fabs(tl[0] - (2.0 - log(z))) < 1e-6, "top logprobs");
    free(big);
    free(a);
    free(b);
    TEST_MAIN_END();
}
