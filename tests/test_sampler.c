/* test_sampler.c — sampling statistics against softmax(logits/T), exact top-p against a brute force, the
 * distribution and the draws against a plain full-sort reference on long rows, the CTRL repetition-penalty
 * sign rule, top-k, and seed reproducibility; frequency/presence penalties and logit_bias (with the CTRL
 * penalty, in sampler.h's order) against their definitions, greedy on the adjusted row, a bias of -100, the
 * cases that still allow the engine's argmax or top k; and a seqgen driven by hand-made rows: the penalties
 * count its generated ids, the row and the logprobs stay the model's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu_ops.h"
#include "harness.h"
#include "engine/sampler.h"
#include "run/seqgen.h"

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


/* The sampler's semantics written the plain way (a sort of the whole ranking: value descending, ties by lower
 * id; keep the first top_k; then the shortest prefix whose mass reaches top_p; probabilities over what is
 * kept), and its draw: walk the kept list in ranking order, or every id in id order when nothing is cut. */
static const float *ref_w;
static int ref_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (ref_w[x] != ref_w[y]) return ref_w[x] > ref_w[y] ? -1 : 1;
    return x < y ? -1 : 1;
}
static int ref_kept(const float *logits, int V, float T, int top_k, float top_p, double *probs, int32_t *order) {
    float *w = malloc(sizeof(float) * V);
    for (int i = 0; i < V; i++) w[i] = logits[i] / T, order[i] = i, probs[i] = 0;
    ref_w = w;
    qsort(order, V, sizeof *order, ref_cmp);
    int keep = top_k > 0 && top_k < V ? top_k : V;
    double mx = w[order[0]], sum = 0;
    for (int i = 0; i < keep; i++) sum += exp((double)w[order[i]] - mx);
    if (top_p < 1) {
        double cum = 0;
        int n = 0;
        while (n < keep) {
            cum += exp((double)w[order[n++]] - mx) / sum;
            if (cum >= top_p) break;
        }
        keep = n;
        sum = 0;
        for (int i = 0; i < keep; i++) sum += exp((double)w[order[i]] - mx);
    }
    for (int i = 0; i < keep; i++) probs[order[i]] = exp((double)w[order[i]] - mx) / sum;
    free(w);
    return keep;
}
static int32_t ref_draw(const double *probs, const int32_t *order, int keep, int V, double u) {
    double cum = 0;
    int32_t pick = -1;
    for (int i = 0; i < (keep < V ? keep : V); i++) {
        int32_t id = keep < V ? order[i] : i;
        pick = id;
        cum += probs[id];
        if (u < cum) break;
    }
    return pick;
}

/* The sampler against the plain reference: the distribution to 1e-12 and the same 32 draws, on rows long
 * enough for its shortcuts (top-k's heap, top-p's value buckets) and with ties across the cut. */
static void check_against_ref(const float *logits, int V, float T, int top_k, float top_p, const char *what) {
    double *want = malloc(sizeof(double) * V), *got = malloc(sizeof(double) * V);
    int32_t *order = malloc(sizeof(int32_t) * V);
    int keep = ref_kept(logits, V, T, top_k, top_p, want, order);
    frigg_sampler_params p = {.temperature = T, .top_k = top_k, .top_p = top_p, .repetition_penalty = 1, .seed = 7};
    frigg_sampler s;
    frigg_sampler_init(&s, &p, V);
    frigg_sampler_distribution(&s, logits, got);
    double worst = 0;
    for (int i = 0; i < V; i++) worst = fmax(worst, fabs(got[i] - want[i]));
    CHECK(worst < 1e-12, "%s: distribution off the reference by %g", what, worst);
    uint64_t st[4];
    frigg_rng_seed(st, 7);
    float *row = malloc(sizeof(float) * V);
    int same = 1;
    for (int d = 0; d < 32; d++) {
        memcpy(row, logits, sizeof(float) * V);
        int32_t id = frigg_sample(&s, row, NULL, 0);
        same &= id == ref_draw(want, order, keep, V, frigg_rng_uniform(st));
    }
    CHECK(same, "%s: draws differ from the reference's", what);
    frigg_sampler_free(&s);
    free(want);
    free(got);
    free(order);
    free(row);
}

/* frigg_sample_topk on the row's top k (value, id) pairs, given in reverse ranking order, draws what
 * frigg_sample draws on the whole row with top_k = k (32 draws, the same seed). */
static void check_topk_only(const float *logits, int V, float T, int k, float top_p, const char *what) {
    double *probs = malloc(sizeof(double) * V);
    int32_t *order = malloc(sizeof(int32_t) * V), ids[FRIGG_TOPK_MAX];
    float vals[FRIGG_TOPK_MAX], *row = malloc(sizeof(float) * V);
    ref_kept(logits, V, T, 0, 1, probs, order); /* the whole ranking */
    for (int i = 0; i < k; i++) {
        ids[i] = order[k - 1 - i];
        vals[i] = logits[ids[i]];
    }
    frigg_sampler_params p = {.temperature = T, .top_k = k, .top_p = top_p, .repetition_penalty = 1, .seed = 5};
    frigg_sampler a, b;
    frigg_sampler_init(&a, &p, V);
    frigg_sampler_init(&b, &p, V);
    int same = frigg_sampler_topk_only(&p, V) == k;
    for (int d = 0; d < 32; d++) {
        memcpy(row, logits, sizeof(float) * V);
        same &= frigg_sample(&a, row, NULL, 0) == frigg_sample_topk(&b, vals, ids, k);
    }
    CHECK(same, "%s: the draws from the top-k pairs differ from the whole row's", what);
    frigg_sampler_free(&a);
    frigg_sampler_free(&b);
    free(probs);
    free(order);
    free(row);
}

/* The penalties and the bias from their definitions (sampler.h), the plain way: for each id j, its count c
 * by a scan of prev; CTRL when c > 0; then c * frequency + presence subtracted when c > 0; then every
 * logit_bias entry added. */
static void ref_adjust(float *w, int V, const int32_t *prev, int nprev, const frigg_sampler_params *p) {
    float rp = p->repetition_penalty;
    for (int j = 0; j < V; j++) {
        int c = 0;
        for (int i = 0; i < nprev; i++) c += prev[i] == j;
        if (!c) continue;
        if (rp > 0 && rp != 1) w[j] = w[j] > 0 ? w[j] / rp : w[j] * rp;
        w[j] -= (float)c * p->frequency_penalty + p->presence_penalty;
    }
    for (int i = 0; i < p->n_logit_bias; i++) w[p->logit_bias[i].id] += p->logit_bias[i].bias;
}

/* The sampler with penalties and a bias against ref_adjust + the plain reference: the distribution of the
 * adjusted row to 1e-12, the same 32 draws from the raw row (frigg_sample adjusts it), and the row frigg_sample
 * leaves behind equal to the reference's adjusted row, bit for bit. */
static void check_adjusted(const float *logits, int V, const int32_t *prev, int nprev, frigg_sampler_params p,
                           const char *what) {
    float *w = malloc(sizeof(float) * V), *row = malloc(sizeof(float) * V);
    double *want = malloc(sizeof(double) * V), *got = malloc(sizeof(double) * V);
    int32_t *order = malloc(sizeof(int32_t) * V);
    memcpy(w, logits, sizeof(float) * V);
    ref_adjust(w, V, prev, nprev, &p);
    int keep = ref_kept(w, V, p.temperature, p.top_k, p.top_p, want, order);
    frigg_sampler s;
    frigg_sampler_init(&s, &p, V);
    memcpy(row, logits, sizeof(float) * V);
    frigg_sampler_adjust(&s, row, prev, nprev);
    CHECK(!memcmp(row, w, sizeof(float) * V), "%s: the adjusted row differs from the definition", what);
    frigg_sampler_distribution(&s, row, got);
    double worst = 0;
    for (int i = 0; i < V; i++) worst = fmax(worst, fabs(got[i] - want[i]));
    CHECK(worst < 1e-12, "%s: distribution off the brute force by %g", what, worst);
    uint64_t st[4];
    frigg_rng_seed(st, p.seed);
    int same = 1, again = 1;
    for (int d = 0; d < 32; d++) {
        memcpy(row, logits, sizeof(float) * V);
        int32_t id = frigg_sample(&s, row, prev, nprev);
        same &= id == ref_draw(want, order, keep, V, frigg_rng_uniform(st));
        again &= !memcmp(row, w, sizeof(float) * V); /* the counts start from zero every call */
    }
    CHECK(same, "%s: draws differ from the brute force's", what);
    CHECK(again, "%s: a later call adjusted the row differently", what);
    CHECK(!frigg_sampler_topk_only(&p, V) && frigg_sampler_adjusts(&p), "%s: topk_only/adjusts", what);
    frigg_sampler_free(&s);
    free(w);
    free(row);
    free(want);
    free(got);
    free(order);
}

static void test_penalties_and_bias(void) {
    /* A long row, a response of 60 ids drawn from 40 of the highest-ranked ones (so most repeat, some up to
     * many times, and the penalties reorder the head of the ranking and move ids across the cuts). */
    int V = 3000;
    float *row = malloc(sizeof(float) * V);
    uint64_t r[4];
    frigg_rng_seed(r, 21);
    for (int i = 0; i < V; i++) row[i] = (float)(10 * pow(frigg_rng_uniform(r), 6) - 2);
    int32_t *order = malloc(sizeof(int32_t) * V), prev[60];
    double *probs = malloc(sizeof(double) * V);
    ref_kept(row, V, 1, 0, 1, probs, order);
    for (int i = 0; i < 60; i++) prev[i] = order[(int)(40 * pow(frigg_rng_uniform(r), 2))];
    prev[7] = order[0]; /* the argmax is in the response, and also carries a bias below */
    frigg_sampler_params p = {.temperature = 0.8f, .top_p = 1, .seed = 31, .frequency_penalty = 0.5f,
                              .presence_penalty = 0.3f};
    check_adjusted(row, V, prev, 60, p, "frequency 0.5 presence 0.3");
    p.top_k = 50;
    p.frequency_penalty = 1.5f;
    p.presence_penalty = -0.5f;
    p.n_logit_bias = 3;
    p.logit_bias[0] = (frigg_logit_bias){.id = order[60], .bias = 4};
    p.logit_bias[1] = (frigg_logit_bias){.id = order[0], .bias = -1.25f};
    p.logit_bias[2] = (frigg_logit_bias){.id = order[2999 - 5], .bias = 100};
    check_adjusted(row, V, prev, 60, p, "top_k 50, frequency 1.5, presence -0.5, three biases");
    /* with CTRL: the order matters (a bias on an id of prev with a positive logit: (x / 1.3) + b, not (x + b) / 1.3) */
    p.top_k = 0;
    p.top_p = 0.9f;
    p.temperature = 0.7f;
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = -0.4f;
    p.presence_penalty = 2;
    p.logit_bias[1].bias = 3.5f;
    check_adjusted(row, V, prev, 60, p, "top_p 0.9, CTRL 1.3, frequency -0.4, presence 2, three biases");
    p.top_k = 100;
    p.top_p = 0.8f;
    p.temperature = 1.2f;
    p.repetition_penalty = 1;
    p.frequency_penalty = 0;
    p.presence_penalty = 0;
    check_adjusted(row, V, prev, 60, p, "top_k 100, top_p 0.8, biases only");
    /* a bias alone changes the draw even with no response yet */
    p.frequency_penalty = 2;
    check_adjusted(row, V, prev, 0, p, "nothing generated yet");

    /* Greedy takes the argmax of the adjusted row: a bias that lifts id 3 over id 0 flips it, one that leaves
     * it below does not; a presence penalty on the response flips it the same way. */
    float lg[6] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f}, w[6];
    frigg_sampler_params g = {.top_p = 1, .n_logit_bias = 1, .logit_bias = {{.id = 3, .bias = 2.5f}}};
    frigg_sampler s;
    frigg_sampler_init(&s, &g, 6);
    memcpy(w, lg, sizeof w);
    CHECK(frigg_sample(&s, w, NULL, 0) == 3 && w[3] == 2.5f, "greedy with a bias of 2.5 on id 3: the argmax");
    frigg_sampler_free(&s);
    g.logit_bias[0].bias = 1.5f;
    frigg_sampler_init(&s, &g, 6);
    memcpy(w, lg, sizeof w);
    CHECK(frigg_sample(&s, w, NULL, 0) == 0, "greedy with a bias of 1.5 on id 3 keeps id 0");
    frigg_sampler_free(&s);
    frigg_sampler_params pp = {.top_p = 1, .presence_penalty = 1.5f};
    int32_t resp[3] = {0, 0, 2};
    frigg_sampler_init(&s, &pp, 6);
    memcpy(w, lg, sizeof w);
    CHECK(frigg_sample(&s, w, resp, 3) == 1 && w[0] == 0.5f && w[2] == -1.0f && w[1] == 1.0f,
          "greedy with presence 1.5 after 0 0 2: %g %g %g", w[0], w[1], w[2]);
    frigg_sampler_free(&s);
    pp = (frigg_sampler_params){.top_p = 1, .frequency_penalty = 0.75f};
    frigg_sampler_init(&s, &pp, 6);
    memcpy(w, lg, sizeof w);
    CHECK(frigg_sample(&s, w, resp, 3) == 1 && w[0] == 0.5f && w[2] == -0.25f,
          "greedy with frequency 0.75 after 0 0 2: %g %g", w[0], w[2]);
    frigg_sampler_free(&s);

    /* A bias of -100 on the argmax: practically no mass left (e^-100), greedy takes the second, 20,000 draws
     * and a top-k draw never take it. */
    int32_t top = order[0], second = order[1];
    frigg_sampler_params ban = {.temperature = 1, .top_p = 1, .seed = 4, .n_logit_bias = 1,
                                .logit_bias = {{.id = top, .bias = -100}}};
    frigg_sampler_init(&s, &ban, V);
    float *x = malloc(sizeof(float) * V);
    memcpy(x, row, sizeof(float) * V);
    frigg_sampler_adjust(&s, x, NULL, 0);
    frigg_sampler_distribution(&s, x, probs);
    CHECK(probs[top] < 1e-40 && probs[top] >= 0, "a bias of -100 leaves p = %g", probs[top]);
    int drawn = 0;
    for (int d = 0; d < 20000; d++) {
        memcpy(x, row, sizeof(float) * V);
        drawn += frigg_sample(&s, x, NULL, 0) == top;
    }
    CHECK(drawn == 0, "the banned id was drawn %d times in 20,000", drawn);
    frigg_sampler_free(&s);
    ban.top_k = 5;
    frigg_sampler_init(&s, &ban, V);
    memcpy(x, row, sizeof(float) * V);
    frigg_sampler_adjust(&s, x, NULL, 0);
    frigg_sampler_distribution(&s, x, probs);
    CHECK(probs[top] == 0 && probs[order[5]] > 0, "top_k 5 with the argmax banned keeps ranks 2..6");
    frigg_sampler_free(&s);
    ban.temperature = 0;
    ban.top_k = 0;
    frigg_sampler_init(&s, &ban, V);
    memcpy(x, row, sizeof(float) * V);
    CHECK(frigg_sample(&s, x, NULL, 0) == second, "greedy with the argmax banned takes the second");
    frigg_sampler_free(&s);
    free(x);

    /* greedy_only / topk_only say no exactly when a logit can change before the draw */
    {
        frigg_sampler_params q = {.top_p = 1};
        int ok = frigg_sampler_greedy_only(&q) && !frigg_sampler_adjusts(&q);
        q.n_logit_bias = 2; /* entries of bias 0 change nothing */
        ok &= frigg_sampler_greedy_only(&q);
        q.logit_bias[1].bias = -0.5f;
        ok &= !frigg_sampler_greedy_only(&q) && frigg_sampler_adjusts(&q);
        q.n_logit_bias = 0;
        q.frequency_penalty = 0.1f;
        ok &= !frigg_sampler_greedy_only(&q);
        q.frequency_penalty = 0;
        q.presence_penalty = -0.1f;
        ok &= !frigg_sampler_greedy_only(&q);
        q.presence_penalty = 0;
        q.repetition_penalty = 1.2f;
        ok &= !frigg_sampler_greedy_only(&q);
        q = (frigg_sampler_params){.temperature = 1, .top_k = 40, .top_p = 1};
        ok &= frigg_sampler_topk_only(&q, 1000) == 40;
        q.presence_penalty = 0.5f;
        ok &= frigg_sampler_topk_only(&q, 1000) == 0;
        q.presence_penalty = 0;
        q.frequency_penalty = -2;
        ok &= frigg_sampler_topk_only(&q, 1000) == 0;
        q.frequency_penalty = 0;
        q.n_logit_bias = 1;
        q.logit_bias[0] = (frigg_logit_bias){.id = 999, .bias = 100};
        ok &= frigg_sampler_topk_only(&q, 1000) == 0;
        CHECK(ok, "greedy_only/topk_only with penalties and biases");
    }
    free(row);
    free(order);
    free(probs);
}

/* A seqgen fed hand-made rows (no engine): the want, the ids against a brute force that counts only what
 * was generated, the row untouched, logprobs of the raw row; bad parameters refused. */
static void test_seqgen_rows(void) {
    enum { V = 9, N = 14 };
    const float base[V] = {0, 5, 4.6f, 4.2f, 0.5f, 0, 0, -1, 1};
    frigg_seqgen_params gp = {.max_tokens = N, .logprobs = 2, .n_stop_ids = 1, .stop_ids = {7},
                              .sampling = {.frequency_penalty = 1, .presence_penalty = 0.25f, .n_logit_bias = 1,
                                           .logit_bias = {{.id = 8, .bias = 2.75f}}}};
    /* the prompt (never seen by the seqgen, only counted) is irrelevant: the counts start empty */
    frigg_seqgen *g = frigg_seqgen_new(&gp, 5, V, NULL);
    CHECK(g != NULL, "seqgen: %s", frigg_error());
    if (!g) return;
    int32_t want[N];
    int ok_want = 1, ok_row = 1, ok_lp = 1, done = 0, n = 0;
    double lse = 0;
    for (int i = 0; i < V; i++) lse += exp(base[i]);
    lse = log(lse);
    for (int t = 0; t < N && !done; t++) {
        frigg_row row = {.prefill = t == 0};
        frigg_seqgen_row(g, &row);
        ok_want &= row.want == FRIGG_WANT_LOGITS && row.out_logits;
        if (!row.out_logits) break;
        memcpy(row.out_logits, base, sizeof base);
        /* the brute force: counts over want[0..t), greedy over the adjusted row */
        float w[V];
        memcpy(w, base, sizeof base);
        for (int j = 0; j < V; j++) {
            int c = 0;
            for (int i = 0; i < t; i++) c += want[i] == j;
            if (c) w[j] -= (float)c * 1.0f + 0.25f;
        }
        w[8] += 2.75f;
        int best = 0;
        for (int j = 1; j < V; j++)
            if (w[j] > w[best]) best = j;
        want[t] = best;
        const char *piece;
        size_t pl;
        done = frigg_seqgen_accept(g, &row, &piece, &pl);
        ok_row &= !memcmp(row.out_logits, base, sizeof base);
        n++;
    }
    frigg_seqgen_finish(g, 0, NULL, NULL);
    const frigg_seqgen_result *res = frigg_seqgen_result_of(g);
    int same = res->n == N && !memcmp(res->ids, want, sizeof want);
    CHECK(same, "seqgen with penalties and a bias: %d ids, differ from the brute force", res->n);
    int distinct = 0;
    for (int i = 0; i < res->n; i++) {
        ok_lp &= fabs(res->token_logprob[i] - (base[res->ids[i]] - lse)) < 1e-6;
        ok_lp &= res->top_ids[2 * i] == 1 && res->top_ids[2 * i + 1] == 2;
        distinct |= 1 << res->ids[i];
    }
    int ndistinct = 0;
    for (int j = 0; j < V; j++) ndistinct += (distinct >> j) & 1;
    CHECK(ndistinct >= 4 && (distinct & (1 << 8)), "the penalties did not spread the choice (%d ids)", ndistinct);
    CHECK(ok_want, "seqgen asked for less than the whole row");
    CHECK(ok_row, "accept changed the step's row (the other choices of a prefill share it)");
    CHECK(ok_lp, "logprobs are not those of the raw row");
    frigg_seqgen_free(g);

    /* the want: greedy / top-k without adjustments, the row with them */
    frigg_seqgen_params q = {.max_tokens = 4};
    frigg_row row = {0};
    int ok = 1;
    g = frigg_seqgen_new(&q, 3, V, NULL);
    frigg_seqgen_row(g, &row);
    ok &= row.want == FRIGG_WANT_GREEDY;
    frigg_seqgen_free(g);
    q.sampling.n_logit_bias = 1;
    q.sampling.logit_bias[0] = (frigg_logit_bias){.id = 2, .bias = -100};
    g = frigg_seqgen_new(&q, 3, V, NULL);
    frigg_seqgen_row(g, &row);
    ok &= row.want == FRIGG_WANT_LOGITS;
    frigg_seqgen_free(g);
    q.sampling = (frigg_sampler_params){.temperature = 1, .top_k = 3};
    g = frigg_seqgen_new(&q, 3, V, NULL);
    frigg_seqgen_row(g, &row);
    ok &= row.want == FRIGG_WANT_TOPK && row.k == 3;
    frigg_seqgen_free(g);
    q.sampling.frequency_penalty = 0.5f;
    g = frigg_seqgen_new(&q, 3, V, NULL);
    frigg_seqgen_row(g, &row);
    ok &= row.want == FRIGG_WANT_LOGITS;
    frigg_seqgen_free(g);
    CHECK(ok, "seqgen's want with and without penalties and biases");

    /* refused: an id outside the vocabulary, too many entries, a non-finite value */
    q.sampling = (frigg_sampler_params){.n_logit_bias = 1, .logit_bias = {{.id = V, .bias = 1}}};
    CHECK(!frigg_seqgen_new(&q, 3, V, NULL) && strstr(frigg_error(), "logit_bias"), "id %d accepted: %s", V,
          frigg_error());
    q.sampling.n_logit_bias = FRIGG_MAX_LOGIT_BIAS + 1;
    CHECK(!frigg_seqgen_new(&q, 3, V, NULL) && strstr(frigg_error(), "logit_bias"), "%d entries accepted",
          FRIGG_MAX_LOGIT_BIAS + 1);
    q.sampling = (frigg_sampler_params){.presence_penalty = NAN};
    CHECK(!frigg_seqgen_new(&q, 3, V, NULL) && strstr(frigg_error(), "presence_penalty"), "NaN accepted");
}

/* frigg_draw_row, the rule of the engines' FRIGG_WANT_SAMPLE rows: without a mask the same id as frigg_sample's draw
 * (top-k and top-p off) with the same uniform; with one the same as frigg_sample on the row with the refused ids at
 * -inf, and never a refused id; the frequencies those of the softmax over the allowed ids; -1 for a non-finite value
 * anywhere in the row and for a mask of nothing; rounding past the last sum gives the last allowed id. */
static void test_draw_row(void) {
    enum { V = 3000 };
    float *lg = malloc(sizeof(float) * V), *w = malloc(sizeof(float) * V);
    uint32_t mask[(V + 31) / 32] = {0};
    uint64_t st[4];
    frigg_rng_seed(st, 7);
    for (int i = 0; i < V; i++) lg[i] = (float)(frigg_rng_uniform(st) * 12 - 6);
    lg[17] = lg[2900]; /* a tie */
    for (int i = 0; i < V; i++)
        if (frigg_rng_uniform(st) < 0.3) mask[i >> 5] |= 1u << (i & 31);
    int same = 1, same_m = 1, inside = 1;
    for (int t = 0; t < 2; t++) {
        float T = t ? 1.3f : 0.6f;
        frigg_sampler_params p = {.temperature = T, .seed = 99};
        frigg_sampler s;
        frigg_sampler_init(&s, &p, V);
        for (int k = 0; k < 400; k++) {
            uint64_t copy[4];
            memcpy(copy, s.s, sizeof copy);
            double u = frigg_rng_uniform(copy); /* the uniform frigg_sample takes next */
            memcpy(w, lg, sizeof(float) * V);
            same &= frigg_draw_row(lg, V, NULL, T, u) == frigg_sample(&s, w, NULL, 0);
            memcpy(copy, s.s, sizeof copy);
            u = frigg_rng_uniform(copy);
            for (int i = 0; i < V; i++) w[i] = mask[i >> 5] >> (i & 31) & 1u ? lg[i] : -INFINITY;
            int32_t a = frigg_draw_row(lg, V, mask, T, u), b = frigg_sample(&s, w, NULL, 0);
            same_m &= a == b;
            inside &= a >= 0 && (mask[a >> 5] >> (a & 31) & 1u);
        }
        frigg_sampler_free(&s);
    }
    CHECK(same, "frigg_draw_row differs from frigg_sample's draw on the whole row");
    CHECK(same_m, "frigg_draw_row with a mask differs from frigg_sample on the row with the refused ids at -inf");
    CHECK(inside, "frigg_draw_row drew an id the mask refuses");
    /* frequencies: 6 logits, ids 1 and 4 refused */
    float six[6] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};
    uint32_t m6 = 0x3Fu & ~(1u << 1) & ~(1u << 4);
    double pr[6] = {0}, z = 0;
    for (int i = 0; i < 6; i++)
        if (m6 >> i & 1u) z += pr[i] = exp(six[i] / 0.8);
    int count[6] = {0}, n = 40000;
    for (int k = 0; k < n; k++) count[frigg_draw_row(six, 6, &m6, 0.8f, frigg_rng_uniform(st))]++;
    int freq = 1;
    for (int i = 0; i < 6; i++) freq &= fabs(count[i] / (double)n - pr[i] / z) < 0.01;
    CHECK(freq && !count[1] && !count[4], "frigg_draw_row's frequencies are not the masked softmax's");
    /* the last allowed id where u is past every sum; -1 for a non-finite value, allowed or not, and for no id */
    CHECK(frigg_draw_row(six, 6, &m6, 0.8f, nextafter(1.0, 0.0)) == 5, "u just below 1: %d",
          frigg_draw_row(six, 6, &m6, 0.8f, nextafter(1.0, 0.0)));
    CHECK(frigg_draw_row(six, 6, &m6, 0.8f, 0.0) == 0, "u = 0: the first allowed id");
    six[4] = NAN;
    CHECK(frigg_draw_row(six, 6, &m6, 0.8f, 0.5) == -1, "a NaN at a refused id was not reported");
    six[4] = INFINITY;
    CHECK(frigg_draw_row(six, 6, NULL, 0.8f, 0.5) == -1, "an infinity was not reported");
    six[4] = -1.0f;
    uint32_t none = 0;
    CHECK(frigg_draw_row(six, 6, &none, 0.8f, 0.5) == -1, "a mask of nothing drew an id");
    free(lg);
    free(w);
}

int main(void) {
    TEST_MAIN_BEGIN("test_sampler");
    test_draw_row();
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


    /* Long rows: values on a coarse grid (many ties, also across the top-k and top-p cuts), a flat one and
     * a peaked one (a long tail below a few high logits, as a language model's). */
    {
        int n = 20000;
        float *flat = malloc(sizeof(float) * n), *peak = malloc(sizeof(float) * n);
        uint64_t r[4];
        frigg_rng_seed(r, 11);
        for (int i = 0; i < n; i++) {
            double u = frigg_rng_uniform(r);
            flat[i] = (float)(floor(u * 64) / 16 - 2); /* 64 distinct values */
            peak[i] = (float)(12 * pow(u, 8) - 3);
        }
        const struct { int k; float p; } cut[] = {{0, 1}, {50, 1}, {1, 1}, {777, 1}, {0, 0.5f}, {0, 0.95f}, {100, 0.9f}, {0, 0.01f}};
        for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++) {
            char what[96];
            snprintf(what, sizeof what, "flat, top_k %d top_p %g", cut[c].k, cut[c].p);
            check_against_ref(flat, n, 0.8f, cut[c].k, cut[c].p, what);
            snprintf(what, sizeof what, "peaked, top_k %d top_p %g", cut[c].k, cut[c].p);
            check_against_ref(peak, n, 1.0f, cut[c].k, cut[c].p, what);
        }
        const struct { int k; float p; } tk[] = {{1, 1}, {50, 1}, {777, 1}, {40, 0.9f}, {1024, 0.5f}};
        for (size_t c = 0; c < sizeof tk / sizeof tk[0]; c++) {
            char what[96];
            snprintf(what, sizeof what, "top-k pairs, flat, k %d top_p %g", tk[c].k, tk[c].p);
            check_topk_only(flat, n, 0.8f, tk[c].k, tk[c].p, what);
            snprintf(what, sizeof what, "top-k pairs, peaked, k %d top_p %g", tk[c].k, tk[c].p);
            check_topk_only(peak, n, 1.0f, tk[c].k, tk[c].p, what);
        }
        free(flat);
        free(peak);
    }
    /* When the top-k pairs are enough: sampling, 1 <= top_k < vocab, top_k <= FRIGG_TOPK_MAX, no penalty. */
    {
        frigg_sampler_params q = {.temperature = 1, .top_k = 40, .top_p = 0.9f, .repetition_penalty = 1};
        int ok = frigg_sampler_topk_only(&q, 1000) == 40;
        q.repetition_penalty = 0; /* 0 = off */
        ok &= frigg_sampler_topk_only(&q, 1000) == 40;
        q.repetition_penalty = 1.1f;
        ok &= frigg_sampler_topk_only(&q, 1000) == 0;
        q.repetition_penalty = 1;
        q.temperature = 0;
        ok &= frigg_sampler_topk_only(&q, 1000) == 0;
        q.temperature = 1;
        q.top_k = 0;
        ok &= frigg_sampler_topk_only(&q, 1000) == 0;
        q.top_k = 1000;
        ok &= frigg_sampler_topk_only(&q, 1000) == 0;
        q.top_k = FRIGG_TOPK_MAX + 1;
        ok &= frigg_sampler_topk_only(&q, 1 << 20) == 0;
        q.top_k = FRIGG_TOPK_MAX;
        ok &= frigg_sampler_topk_only(&q, 1 << 20) == FRIGG_TOPK_MAX;
        CHECK(ok, "frigg_sampler_topk_only: the cases it takes and refuses");
    }

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
    test_penalties_and_bias();
    test_seqgen_rows();
    TEST_MAIN_END();
}
