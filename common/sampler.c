/* sampler.c — see sampler.h. Full sorts (no shortlists) so top-p is exact. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"
#include "util.h"

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void frigg_rng_seed(uint64_t st[4], uint64_t seed) {
    /* splitmix64 expands the seed so that nearby seeds give unrelated streams. */
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        st[i] = z ^ (z >> 31);
    }
}

uint64_t frigg_rng_next(uint64_t s[4]) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double frigg_rng_uniform(uint64_t s[4]) { return (double)(frigg_rng_next(s) >> 11) * 0x1.0p-53; }

void frigg_sampler_init(frigg_sampler *s, const frigg_sampler_params *p, int vocab) {
    s->p = *p;
    if (s->p.top_p <= 0 || s->p.top_p > 1) s->p.top_p = 1;
    if (s->p.repetition_penalty <= 0) s->p.repetition_penalty = 1;
    s->vocab = vocab;
    frigg_rng_seed(s->s, p->seed);
    s->work = frigg_xmalloc((size_t)vocab * sizeof(float));
    s->order = frigg_xmalloc((size_t)vocab * sizeof(int32_t));
}

void frigg_sampler_free(frigg_sampler *s) {
    free(s->work);
    free(s->order);
    s->work = NULL;
    s->order = NULL;
}

void frigg_apply_repetition_penalty(float *logits, int vocab, const int32_t *prev, int nprev, float penalty) {
    if (penalty == 1.0f || penalty <= 0) return;
    unsigned char *seen = calloc((size_t)vocab, 1);
    if (!seen) abort();
    for (int i = 0; i < nprev; i++) {
        int32_t id = prev[i];
        if (id < 0 || id >= vocab || seen[id]) continue;
        seen[id] = 1;
        logits[id] = logits[id] > 0 ? logits[id] / penalty : logits[id] * penalty;
    }
    free(seen);
}

/* Sort ids by value descending, ties by lower id (a total order, so results are reproducible). */
static _Thread_local const float *g_sort_vals; /* qsort has no context argument */
static int cmp_desc(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float vx = g_sort_vals[x], vy = g_sort_vals[y];
    if (vx != vy) return vx > vy ? -1 : 1;
    return x < y ? -1 : 1;
}
static void sort_desc(int32_t *ids, int n, const float *vals) {
    g_sort_vals = vals;
    qsort(ids, n, sizeof *ids, cmp_desc);
}

void frigg_sampler_distribution(frigg_sampler *s, const float *logits, double *probs) {
    int V = s->vocab;
    for (int i = 0; i < V; i++) {
        s->work[i] = logits[i] / s->p.temperature;
        s->order[i] = i;
        probs[i] = 0;
    }
    sort_desc(s->order, V, s->work);
    int keep = V;
    if (s->p.top_k > 0 && s->p.top_k < keep) keep = s->p.top_k;
    double mx = s->work[s->order[0]], sum = 0;
    for (int i = 0; i < keep; i++) sum += exp((double)s->work[s->order[i]] - mx);
    if (s->p.top_p < 1.0f) {
        double cum = 0;
        int k = 0;
        while (k < keep) {
            cum += exp((double)s->work[s->order[k]] - mx) / sum;
            k++;
            if (cum >= s->p.top_p) break;
        }
        keep = k;
        sum = 0;
        for (int i = 0; i < keep; i++) sum += exp((double)s->work[s->order[i]] - mx);
    }
    for (int i = 0; i < keep; i++) probs[s->order[i]] = exp((double)s->work[s->order[i]] - mx) / sum;
}

int32_t frigg_sample(frigg_sampler *s, float *logits, const int32_t *prev, int nprev) {
    frigg_apply_repetition_penalty(logits, s->vocab, prev, nprev, s->p.repetition_penalty);
    if (s->p.temperature <= 0) return frigg_argmax(logits, s->vocab);
    int V = s->vocab;
    double *probs = frigg_xmalloc((size_t)V * sizeof(double));
    frigg_sampler_distribution(s, logits, probs);
    double u = frigg_rng_uniform(s->s), cum = 0;
    int32_t pick = -1;
    /* Walk in sorted order so the draw only depends on the kept set. */
    for (int i = 0; i < V; i++) {
        int32_t id = s->order[i];
        if (probs[id] == 0) break;
        pick = id;
        cum += probs[id];
        if (u < cum) break;
    }
    free(probs);
    return pick < 0 ? s->order[0] : pick;
}

static double log_sum_exp(const float *x, int n) {
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

float frigg_logprob_of(const float *logits, int vocab, int32_t id) {
    return (float)((double)logits[id] - log_sum_exp(logits, vocab));
}

void frigg_top_logprobs(const float *logits, int vocab, int k, int32_t *ids, float *lps) {
    double lse = log_sum_exp(logits, vocab);
    /* One pass keeping a sorted top-k (k is small): insertion keeps ties in id order. */
    int have = 0;
    for (int i = 0; i < vocab; i++) {
        if (have == k && !(logits[i] > logits[ids[k - 1]])) continue;
        int pos = have < k ? have++ : k - 1;
        while (pos > 0 && logits[i] > logits[ids[pos - 1]]) {
            ids[pos] = ids[pos - 1];
            pos--;
        }
        ids[pos] = i;
    }
    for (int j = 0; j < have; j++) lps[j] = (float)((double)logits[ids[j]] - lse);
}
