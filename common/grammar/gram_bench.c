/* gram_bench.c — the mask's cost on documents a grammar generates (frigg-bench grammar): random walks that
 * take a random allowed token at each step (an end where one is allowed, a one-byte token half the time, so
 * that walks finish documents), timing every fill; first with a fresh cache (what the first request of a
 * schema meets), then the same walks again on the warm cache (every later request), then on a fresh cache
 * after frigg_gmasker_precompute (compile-time work instead of first-token latency). */
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/util.h"

static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summarize(double *us, int n, frigg_gbench_times *t) {
    memset(t, 0, sizeof *t);
    t->n = n;
    if (!n) return;
    qsort(us, (size_t)n, sizeof *us, cmp_d);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += us[i];
    t->mean_us = sum / n;
    t->p50_us = us[n / 2];
    t->p99_us = us[(int)((n - 1) * 0.99)];
    t->max_us = us[n - 1];
}

/* One pass over the walks: record (tokens NULL) or replay them; fill times into us. Returns the fills made. */
static int pass(const frigg_grammar *g, const frigg_gvocab *v, frigg_gmasker *mk, int walks, int steps, uint64_t seed,
                int32_t *tokens, int *lens, double *us, int *docs_done) {
    int V = v->V, W = (V + 31) / 32, k = 0;
    uint32_t *bits = frigg_xmalloc((size_t)(W ? W : 1) * sizeof *bits);
    int32_t *allowed = frigg_xmalloc((size_t)(V ? V : 1) * sizeof *allowed);
    int record = lens[0] < 0;
    *docs_done = 0;
    for (int w = 0; w < walks; w++) {
        frigg_gmatcher *m = frigg_gmatcher_new(g);
        int n = record ? steps : lens[w];
        for (int st = 0; st < n; st++) {
            double t0 = frigg_now_ms();
            int na = frigg_gmasker_fill(mk, m, bits);
            us[k++] = (frigg_now_ms() - t0) * 1000.0;
            int32_t pick;
            if (record) {
                if (!na) {
                    n = st;
                    break;
                }
                int c = 0;
                for (int id = 0; id < V; id++)
                    if ((bits[id >> 5] >> (id & 31)) & 1) allowed[c++] = id;
                pick = allowed[rng(&seed) % (uint64_t)c];
                if (frigg_gmatcher_can_end(m) && rng(&seed) % 4 == 0) {
                    for (int i = 0; i < c; i++)
                        if (v->is_end[allowed[i]]) pick = allowed[i];
                } else if (rng(&seed) % 2) {
                    for (int tries = 0; tries < 64; tries++) {
                        int32_t x = allowed[rng(&seed) % (uint64_t)c];
                        if (v->off[x + 1] - v->off[x] == 1) {
                            pick = x;
                            break;
                        }
                    }
                }
                tokens[(size_t)w * steps + st] = pick;
            } else {
                pick = tokens[(size_t)w * steps + st];
            }
            frigg_gmatcher_advance_token(m, v, pick);
            if (frigg_gmatcher_ended(m)) {
                (*docs_done)++;
                n = st + 1;
                break;
            }
        }
        if (record) lens[w] = n;
        frigg_gmatcher_free(m);
    }
    free(bits);
    free(allowed);
    return k;
}

int frigg_grammar_bench(const frigg_grammar *g, const frigg_gvocab *v, int walks, int steps, uint64_t seed,
                        frigg_gbench *out) {
    memset(out, 0, sizeof *out);
    if (walks < 1 || steps < 1) {
        frigg_set_error("grammar bench: walks and steps must be at least 1");
        return -1;
    }
    int32_t *tokens = frigg_xmalloc((size_t)walks * steps * sizeof *tokens);
    int *lens = frigg_xmalloc((size_t)walks * sizeof *lens);
    double *us = frigg_xmalloc((size_t)walks * steps * sizeof *us);
    lens[0] = -1;
    if (!seed) seed = 1;
    frigg_gmasker *mk = frigg_gmasker_new(g, v);
    int n = pass(g, v, mk, walks, steps, seed, tokens, lens, us, &out->docs_ended);
    summarize(us, n, &out->cold);
    n = pass(g, v, mk, walks, steps, seed, tokens, lens, us, &out->docs_ended);
    summarize(us, n, &out->warm);
    frigg_gmask_stats st;
    frigg_gmasker_stats(mk, &st);
    out->cache_bytes = st.bytes;
    out->classes = st.classes;
    out->classes_ms = st.classes_ms;
    frigg_gmasker_free(mk);
    mk = frigg_gmasker_new(g, v);
    double t0 = frigg_now_ms();
    frigg_gmasker_precompute(mk);
    out->precompute_ms = frigg_now_ms() - t0;
    n = pass(g, v, mk, walks, steps, seed, tokens, lens, us, &out->docs_ended);
    summarize(us, n, &out->precomputed);
    frigg_gmasker_free(mk);
    out->walks = walks;
    free(tokens);
    free(lens);
    free(us);
    return 0;
}
