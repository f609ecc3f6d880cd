/* sampler.c — see sampler.h. Top-p is exact: the ranking is sorted as far as the kept mass needs. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_ops.h"
#include "base/util.h"

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
    if (s->p.n_logit_bias < 0) s->p.n_logit_bias = 0;
    if (s->p.n_logit_bias > FRIGG_MAX_LOGIT_BIAS) s->p.n_logit_bias = FRIGG_MAX_LOGIT_BIAS;
    s->vocab = vocab;
    frigg_rng_seed(s->s, p->seed);
    s->work = frigg_xmalloc((size_t)vocab * sizeof(float));
    s->order = frigg_xmalloc((size_t)vocab * sizeof(int32_t));
    s->e = frigg_xmalloc((size_t)vocab * sizeof(double));
    s->bucket = NULL;
    s->count = s->p.frequency_penalty != 0 || s->p.presence_penalty != 0 ? frigg_xcalloc((size_t)vocab, sizeof(int32_t))
                                                                           : NULL;
}

void frigg_sampler_free(frigg_sampler *s) {
    free(s->work);
    free(s->order);
    free(s->e);
    free(s->bucket);
    free(s->count);
    s->bucket = NULL;
    s->count = NULL;
    s->work = NULL;
    s->order = NULL;
    s->e = NULL;
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

void frigg_sampler_adjust(frigg_sampler *s, float *logits, const int32_t *prev, int nprev) {
    int V = s->vocab;
    frigg_apply_repetition_penalty(logits, V, prev, nprev, s->p.repetition_penalty);
    if (s->count) { /* count, then penalise each id at its first occurrence and zero its count again */
        for (int i = 0; i < nprev; i++)
            if (prev[i] >= 0 && prev[i] < V) s->count[prev[i]]++;
        for (int i = 0; i < nprev; i++) {
            int32_t id = prev[i];
            if (id < 0 || id >= V || !s->count[id]) continue;
            logits[id] -= (float)s->count[id] * s->p.frequency_penalty + s->p.presence_penalty;
            s->count[id] = 0;
        }
    }
    for (int i = 0; i < s->p.n_logit_bias; i++) {
        int32_t id = s->p.logit_bias[i].id;
        if (id >= 0 && id < V) logits[id] += s->p.logit_bias[i].bias;
    }
}

/* The order the sampler ranks ids by: value descending, ties by lower id (a total order, so results are
 * reproducible). */
static int ranks_before(const float *w, int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }
static _Thread_local const float *g_sort_vals; /* qsort has no context argument */
static int cmp_rank(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return ranks_before(g_sort_vals, x, y) ? -1 : ranks_before(g_sort_vals, y, x) ? 1 : 0;
}

/* The first m ids of that order, in order, into ids[m] (1 <= m <= V). One pass keeps the best m in a heap
 * whose root is the worst of them (most ids are rejected by one comparison with it), then the m are sorted:
 * O(V + m log m) instead of a sort of the whole vocabulary (262,144 ids: tens of ms per token). */
static void first_m(const float *w, int V, int m, int32_t *ids) {
    int n = 0;
    for (int32_t i = 0; i < V; i++) {
        if (n == m && !ranks_before(w, i, ids[0])) continue;
        int at;
        if (n < m) { /* sift up from the end: the worst of the kept at the root */
            at = n++;
            while (at > 0 && ranks_before(w, ids[(at - 1) / 2], i)) {
                ids[at] = ids[(at - 1) / 2];
                at = (at - 1) / 2;
            }
        } else { /* replace the root, sift down */
            at = 0;
            for (;;) {
                int c = 2 * at + 1;
                if (c >= n) break;
                if (c + 1 < n && ranks_before(w, ids[c], ids[c + 1])) c++; /* the worse child */
                if (!ranks_before(w, i, ids[c])) break;
                ids[at] = ids[c];
                at = c;
            }
        }
        ids[at] = i;
    }
    g_sort_vals = w;
    qsort(ids, (size_t)n, sizeof *ids, cmp_rank);
}

/* A float's rank as an unsigned integer: larger floats, larger keys (the sign bit flips the rest). */
static uint32_t rank_key(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* Top-p without top-k: the head of the ranking that holds top_p of the mass, sorted into s->order; returns
 * its length. One pass sums exp(work - mx) (s->e) into 65,536 buckets by the top 16 bits of rank_key (a
 * bucket is a value range, 1/128 of an octave wide); the buckets from the top until their mass reaches
 * top_p, and `below` more non-empty ones, hold the boundary, so only their ids are sorted. */
static int ranking_head(frigg_sampler *s, double total, int below) {
    enum { NB = 65536 };
    if (!s->bucket) s->bucket = frigg_xmalloc(NB * sizeof(double));
    double *bm = s->bucket, acc = 0;
    memset(bm, 0, NB * sizeof(double));
    for (int i = 0; i < s->vocab; i++) bm[rank_key(s->work[i]) >> 16] += s->e[i];
    int lo = NB - 1;
    while (lo > 0 && acc / total < s->p.top_p) acc += bm[lo--];
    for (; below > 0 && lo > 0; lo--)
        if (bm[lo] > 0) below--;
    int n = 0;
    for (int i = 0; i < s->vocab; i++)
        if ((int)(rank_key(s->work[i]) >> 16) >= lo) s->order[n++] = i;
    g_sort_vals = s->work;
    qsort(s->order, (size_t)n, sizeof *s->order, cmp_rank);
    return n;
}

/* The kept set of one draw, from work = logits / T:
 *   all: every id is kept; sum = the sum of exp(work - mx) in id order, each term in s->e[id];
 *   else: the first `keep` ids of the ranking, in s->order[0..keep), sum over them in that order.
 * Top-k takes the first top_k; top-p then the shortest prefix (of the top-k, or of the whole ranking) whose
 * mass, relative to the sum over what top-k kept, reaches top_p. Only as much of the ranking is sorted as
 * top-k or top-p needs (a peaked distribution needs little; a flat one, with top-p alone, most of it). */
typedef struct {
    int all, keep;
    double mx, sum;
} kept_set;

/* Top-k's kept set from its list: s->order[0..n) in ranking order, work[] holding their values; mx the largest.
 * Then top-p, if on, takes the shortest prefix of it whose mass reaches top_p. */
static kept_set list_kept(frigg_sampler *s, int n, double mx) {
    const float *w = s->work;
    kept_set k = {0, n, mx, 0};
    for (int i = 0; i < n; i++) k.sum += exp((double)w[s->order[i]] - mx);
    if (s->p.top_p < 1.0f) {
        double total = k.sum, cum = 0;
        for (k.keep = 0; k.keep < n;) {
            cum += exp((double)w[s->order[k.keep]] - mx) / total;
            k.keep++;
            if (cum >= s->p.top_p) break;
        }
        k.sum = 0;
        for (int i = 0; i < k.keep; i++) k.sum += exp((double)w[s->order[i]] - mx);
    }
    return k;
}

static kept_set kept_of(frigg_sampler *s, const float *logits) {
    int V = s->vocab;
    float *w = s->work;
    kept_set k = {1, V, -INFINITY, 0};
    int32_t best = 0;
    for (int i = 0; i < V; i++) {
        w[i] = logits[i] / s->p.temperature;
        if (ranks_before(w, i, best)) best = i;
    }
    k.mx = w[best];
    int top_k = s->p.top_k > 0 && s->p.top_k < V ? s->p.top_k : 0;
    if (top_k) {
        first_m(w, V, top_k, s->order);
        return list_kept(s, top_k, k.mx);
    }
    for (int i = 0; i < V; i++) k.sum += s->e[i] = exp((double)w[i] - k.mx); /* the draw's normaliser, or top-p's */
    if (s->p.top_p < 1.0f) { /* sort the head of the ranking that can hold the mass, found by buckets */
        double total = k.sum, cum = 0;
        int n = 0;
        for (int below = 0;; below++) {
            int have = ranking_head(s, total, below);
            cum = 0;
            for (n = 0; n < have;) {
                cum += exp((double)w[s->order[n]] - k.mx) / total;
                n++;
                if (cum >= s->p.top_p) break;
            }
            if (cum >= s->p.top_p || have == V) break; /* else rounding put the boundary one bucket lower */
        }
        k.all = 0;
        k.keep = n;
        k.sum = 0;
        for (int i = 0; i < n; i++) k.sum += exp((double)w[s->order[i]] - k.mx);
    }
    return k;
}

/* The draw walks the kept set: in ranking order where it is a list, in id order where it is everything (no
 * sort needed); either way an id's chance is its probability. Rounding can leave u past the last sum: then
 * the last id walked. */
static int32_t draw(frigg_sampler *s, kept_set k) {
    double u = frigg_rng_uniform(s->s), cum = 0;
    int n = k.all ? s->vocab : k.keep;
    int32_t pick = k.all ? 0 : s->order[0];
    for (int i = 0; i < n; i++) {
        int32_t id = k.all ? i : s->order[i];
        pick = id;
        cum += (k.all ? s->e[id] : exp((double)s->work[id] - k.mx)) / k.sum;
        if (u < cum) break;
    }
    return pick;
}

static int allowed(const uint32_t *mask, int32_t i) { return !mask || (mask[i >> 5] >> (i & 31) & 1u); }

int32_t frigg_draw_row(const float *logits, int V, const uint32_t *mask, float T, double u) {
    float mx = -INFINITY;
    int any = 0;
    for (int32_t i = 0; i < V; i++) {
        if (!isfinite(logits[i])) return -1;
        float w = logits[i] / T;
        if (!allowed(mask, i)) continue;
        if (!isfinite(w)) return -1;
        if (!any || w > mx) mx = w;
        any = 1;
    }
    if (!any) return -1;
    double sum = 0, cum = 0;
    for (int32_t i = 0; i < V; i++)
        if (allowed(mask, i)) sum += exp((double)(logits[i] / T) - mx);
    int32_t pick = -1;
    for (int32_t i = 0; i < V; i++) {
        if (!allowed(mask, i)) continue;
        double e = exp((double)(logits[i] / T) - mx);
        if (e > 0) pick = i;
        cum += e / sum;
        if (u < cum) return i;
    }
    return pick;
}

void frigg_sampler_distribution(frigg_sampler *s, const float *logits, double *probs) {
    kept_set k = kept_of(s, logits);
    for (int i = 0; i < s->vocab; i++) probs[i] = k.all ? s->e[i] / k.sum : 0;
    for (int i = 0; !k.all && i < k.keep; i++) probs[s->order[i]] = exp((double)s->work[s->order[i]] - k.mx) / k.sum;
}

int32_t frigg_sample(frigg_sampler *s, float *logits, const int32_t *prev, int nprev) {
    frigg_sampler_adjust(s, logits, prev, nprev);
    if (s->p.temperature <= 0) return frigg_argmax(logits, s->vocab);
    return draw(s, kept_of(s, logits));
}

void frigg_topk(const float *row, int V, int k, int32_t *ids) { first_m(row, V, k, ids); }

int frigg_sampler_adjusts(const frigg_sampler_params *p) {
    if ((p->repetition_penalty != 1.0f && p->repetition_penalty > 0) || p->frequency_penalty != 0 ||
        p->presence_penalty != 0)
        return 1;
    int n = p->n_logit_bias < FRIGG_MAX_LOGIT_BIAS ? p->n_logit_bias : FRIGG_MAX_LOGIT_BIAS;
    for (int i = 0; i < n; i++)
        if (p->logit_bias[i].bias != 0) return 1;
    return 0;
}

int frigg_sampler_topk_only(const frigg_sampler_params *p, int vocab) {
    return p->temperature > 0 && p->top_k > 0 && p->top_k < vocab && p->top_k <= FRIGG_TOPK_MAX && !frigg_sampler_adjusts(p) ? p->top_k : 0;
}

int frigg_sampler_greedy_only(const frigg_sampler_params *p) { return p->temperature <= 0 && !frigg_sampler_adjusts(p); }

int32_t frigg_sample_topk(frigg_sampler *s, const float *vals, const int32_t *ids, int n) {
    /* the list kept_of makes from the whole row: the same values at the same ids, ranked the same way */
    for (int i = 0; i < n; i++) {
        s->work[ids[i]] = vals[i] / s->p.temperature;
        s->order[i] = ids[i];
    }
    g_sort_vals = s->work;
    qsort(s->order, (size_t)n, sizeof *s->order, cmp_rank);
    return draw(s, list_kept(s, n, s->work[s->order[0]]));
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

float frigg_row_lse(const float *row, int vocab) {
    double mx = row[0], sum = 0;
    for (int i = 1; i < vocab; i++)
        if (row[i] > mx) mx = row[i];
    for (int i = 0; i < vocab; i++) sum += exp((double)row[i] - mx);
    return (float)(mx + log(sum));
}
