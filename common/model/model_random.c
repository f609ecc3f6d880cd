/* model_random.c — see model_random.h. Values come from splitmix64 streams seeded per (tensor, 1M-element
 * chunk), so the weights are the same whatever the number of threads. */
#include "model_random.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "base/util.h"

#define CHUNK (1u << 20)

void frigg_config_mimir(frigg_config *c) {
    memset(c, 0, sizeof *c);
    c->vocab_size = 262144;
    c->hidden_size = 1536;
    c->intermediate_size = 4096;
    c->layers_per_stack = 16;
    c->H_cycles = 2;
    c->L_cycles = 3;
    c->num_slots = 16 * 2 * 4;
    c->num_heads = 12;
    c->head_dim = 128;
    c->max_position_embeddings = 4096;
    c->rms_norm_eps = 1e-6;
    c->embedding_scale = 39.191835884530846;
    c->rope_theta = 10000.0;
    c->prefix_lm = true;
    c->bos_token_id = 2;
    c->pad_token_id = 0;
    c->eos_token_ids[0] = 106;
    c->n_eos = 1;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct {
    uint16_t *w;
    size_t n;
    float half_width; /* uniform on [-hw, hw]: std = hw / sqrt(3) */
    uint64_t seed;
} fill_job;

static void fill_range(void *vctx, int begin, int end, int thread) {
    (void)thread;
    fill_job *j = vctx;
    for (int ch = begin; ch < end; ch++) {
        uint64_t s = j->seed ^ (0x632be59bd9b4e019ull * (uint64_t)(ch + 1));
        size_t i0 = (size_t)ch * CHUNK, i1 = i0 + CHUNK < j->n ? i0 + CHUNK : j->n;
        for (size_t i = i0; i < i1; i++) {
            double u = (double)(splitmix(&s) >> 11) * (1.0 / 9007199254740992.0); /* [0,1) */
            j->w[i] = frigg_f32_to_bf16((float)((2.0 * u - 1.0) * j->half_width));
        }
    }
}

static uint16_t *random_tensor(frigg_model *m, frigg_pool *pool, size_t n, double std, uint64_t seed, int id) {
    uint16_t *w = frigg_xmalloc(n * 2);
    uint64_t s = seed + 0x1000193ull * (uint64_t)id;
    fill_job j = {w, n, (float)(std * sqrt(3.0)), splitmix(&s)};
    frigg_pool_run(pool, (int)((n + CHUNK - 1) / CHUNK), fill_range, &j);
    m->owned = realloc(m->owned, (m->nowned + 1) * sizeof *m->owned);
    if (!m->owned) abort();
    m->owned[m->nowned++] = w;
    return w;
}

frigg_model *frigg_model_random(const frigg_config *c, uint64_t seed, float lm_gain) {
    frigg_model *m = frigg_xcalloc(1, sizeof *m);
    m->cfg = *c;
    m->dir = frigg_xstrdup("(random)");
    m->layout = FRIGG_LAYOUT_PACKED;
    frigg_pool *pool = frigg_pool_create(0);
    if (!pool) pool = frigg_pool_create(1); /* no worker thread could start: this thread alone */
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int id = 0;
    m->embed = (frigg_mat){.w = random_tensor(m, pool, V * D, 1.0 / c->embedding_scale, seed, id++), .rows = (int)V, .cols = (int)D};
    m->lm_head = (frigg_mat){.w = random_tensor(m, pool, V * D, lm_gain / sqrt((double)D), seed, id++), .rows = (int)V, .cols = (int)D};
    m->z_L_init = random_tensor(m, pool, D, 1.0, seed, id++);
    for (int s = 0; s < 2; s++) {
        m->stack[s] = frigg_xcalloc(c->layers_per_stack, sizeof(frigg_layer));
        for (int i = 0; i < c->layers_per_stack; i++) {
            frigg_layer *L = &m->stack[s][i];
            const uint16_t *g = random_tensor(m, pool, 4 * D * D, 1.0 / sqrt((double)D), seed, id++);
            L->gqkv_packed = g;
            L->gate = (frigg_mat){.w = g, .rows = (int)D, .cols = (int)D};
            L->q = (frigg_mat){.w = g + D * D, .rows = (int)D, .cols = (int)D};
            L->k = (frigg_mat){.w = g + 2 * D * D, .rows = (int)D, .cols = (int)D};
            L->v = (frigg_mat){.w = g + 3 * D * D, .rows = (int)D, .cols = (int)D};
            L->o = (frigg_mat){.w = random_tensor(m, pool, D * D, 1.0 / sqrt((double)D), seed, id++), .rows = (int)D, .cols = (int)D};
            const uint16_t *gu = random_tensor(m, pool, 2 * I * D, 1.0 / sqrt((double)D), seed, id++);
            L->gate_up_packed = gu;
            L->mlp_gate = (frigg_mat){.w = gu, .rows = (int)I, .cols = (int)D};
            L->up = (frigg_mat){.w = gu + I * D, .rows = (int)I, .cols = (int)D};
            L->down = (frigg_mat){.w = random_tensor(m, pool, D * I, 1.0 / sqrt((double)I), seed, id++), .rows = (int)D, .cols = (int)I};
        }
    }
    frigg_pool_destroy(pool);
    uint64_t P = 5ull * D * D + 3ull * I * D;
    m->n_params = 2ull * V * D + 2ull * c->layers_per_stack * P + D;
    return m;
}
