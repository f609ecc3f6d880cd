/* cpu_engine.c — the CPU reference engine: MODEL.md §3 written out, one op per line.
 * It is the executable spec the GPU path is checked against; keep it plain. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_ops.h"
#include "util.h"

typedef struct {
    frigg_pool *pool;
    /* Static KV cache, one block per sequence: [slot][max_ctx][D] floats, post-RoPE keys (bf16 values
     * unless fp32 reference). Allocated once at creation; calloc'd so the OS commits pages only as
     * positions are written (DFM-Mimir at 4096 tokens reserves 6 GiB but touches what is used). */
    float **kv_k, **kv_v;
} cpu_impl;

/* Everything one forward call of T rows needs. */
typedef struct {
    const frigg_model *m;
    const frigg_backend *b;
    cpu_impl *impl;
    int seq, T, p0, prefix_len;
    float *cos_t, *sin_t;
    float *a, *q, *k, *v, *g, *o, *y, *t1, *mg, *mu;
} fwd;

static float *kv_slot(float **kv, const frigg_backend *b, int seq, int slot) {
    return kv[seq] + (size_t)slot * b->max_ctx * b->model->cfg.hidden_size;
}

typedef struct {
    fwd *f;
    int slot;
} attn_ctx;

/* One (row, head) pair per index: fp32 scores, mask, fp32 softmax, fp32 P·V, one bf16 rounding. */
static void attn_range(void *vctx, int begin, int end, int thread) {
    (void)thread;
    attn_ctx *ac = vctx;
    fwd *f = ac->f;
    const frigg_config *c = &f->m->cfg;
    int H = c->num_heads, hd = c->head_dim, D = c->hidden_size, nk = f->p0 + f->T;
    const float *K = kv_slot(f->impl->kv_k, f->b, f->seq, ac->slot), *V = kv_slot(f->impl->kv_v, f->b, f->seq, ac->slot);
    float scale = (float)(1.0 / sqrt((double)hd));
    float *p = frigg_xmalloc((size_t)nk * sizeof(float));
    float *acc = frigg_xmalloc((size_t)hd * sizeof(float));
    for (int idx = begin; idx < end; idx++) {
        int t = idx / H, h = idx % H, qpos = f->p0 + t;
        const float *q = f->q + (size_t)t * D + h * hd;
        float mx = -INFINITY;
        for (int j = 0; j < nk; j++) {
            /* PrefixLM: causal, OR both query and key inside the bidirectional prefix (§4.1). */
            int allowed = j <= qpos || (qpos < f->prefix_len && j < f->prefix_len);
            if (!allowed) {
                p[j] = -INFINITY;
                continue;
            }
            const float *kr = K + (size_t)j * D + h * hd;
            float s = 0;
            for (int d = 0; d < hd; d++) s += q[d] * kr[d];
            p[j] = s * scale;
            if (p[j] > mx) mx = p[j];
        }
        float sum = 0;
        for (int j = 0; j < nk; j++) {
            p[j] = p[j] == -INFINITY ? 0.0f : expf(p[j] - mx);
            sum += p[j];
        }
        for (int d = 0; d < hd; d++) acc[d] = 0;
        for (int j = 0; j < nk; j++) {
            if (p[j] == 0) continue;
            float w = p[j] / sum;
            const float *vr = V + (size_t)j * D + h * hd;
            for (int d = 0; d < hd; d++) acc[d] += w * vr[d];
        }
        for (int d = 0; d < hd; d++) f->o[(size_t)t * D + h * hd + d] = frigg_act(acc[d]);
    }
    free(p);
    free(acc);
}

/* DECODER_LAYER (MODEL.md §3.5, §3.7): h is updated in place. */
static void decoder_layer(fwd *f, const frigg_layer *L, float *h, int slot) {
    const frigg_config *c = &f->m->cfg;
    frigg_pool *pool = f->impl->pool;
    int T = f->T, D = c->hidden_size, I = c->intermediate_size, H = c->num_heads, hd = c->head_dim;
    size_t TD = (size_t)T * D;

    frigg_cpu_rmsnorm(h, T, D, c->rms_norm_eps, f->a);          /* input_layernorm */
    frigg_cpu_linear(pool, &L->q, f->a, T, f->q);
    frigg_cpu_linear(pool, &L->k, f->a, T, f->k);
    frigg_cpu_linear(pool, &L->v, f->a, T, f->v);
    frigg_cpu_linear(pool, &L->gate, f->a, T, f->g);            /* output gate, from the same normed input */
    frigg_cpu_rope_apply(f->q, T, H, hd, f->cos_t, f->sin_t);
    frigg_cpu_rope_apply(f->k, T, H, hd, f->cos_t, f->sin_t);
    float *K = kv_slot(f->impl->kv_k, f->b, f->seq, slot), *V = kv_slot(f->impl->kv_v, f->b, f->seq, slot);
    for (size_t i = 0; i < TD; i++) {                           /* append to this slot's cache */
        K[(size_t)f->p0 * D + i] = f->k[i]; /* already bf16-rounded by RoPE */
        V[(size_t)f->p0 * D + i] = f->v[i];
    }
    attn_ctx ac = {f, slot};
    frigg_pool_run(pool, T * H, attn_range, &ac);
    for (size_t i = 0; i < TD; i++) {                           /* elementwise sigmoid gate, before o_proj */
        float sg = frigg_act(1.0f / (1.0f + expf(-f->g[i])));
        f->y[i] = frigg_act(sg * f->o[i]);
    }
    frigg_cpu_linear(pool, &L->o, f->y, T, f->t1);
    for (size_t i = 0; i < TD; i++) h[i] = frigg_act(h[i] + f->t1[i]);

    frigg_cpu_rmsnorm(h, T, D, c->rms_norm_eps, f->a);          /* post_attention_layernorm */
    frigg_cpu_linear(pool, &L->mlp_gate, f->a, T, f->mg);
    frigg_cpu_linear(pool, &L->up, f->a, T, f->mu);
    frigg_cpu_swiglu(f->mg, f->mu, T * I, f->mg);
    frigg_cpu_linear(pool, &L->down, f->mg, T, f->t1);
    for (size_t i = 0; i < TD; i++) h[i] = frigg_act(h[i] + f->t1[i]);
}

/* STACK(M, x, r): 16 layers then the weightless final_norm; the output replaces the state. */
static void run_stack(fwd *f, int stack, float *x, int run) {
    const frigg_config *c = &f->m->cfg;
    for (int i = 0; i < c->layers_per_stack; i++)
        decoder_layer(f, &f->m->stack[stack][i], x, frigg_slot(c, run, i));
    frigg_cpu_rmsnorm(x, f->T, c->hidden_size, c->rms_norm_eps, x);
}

static int forward(frigg_backend *b, int seq, const int32_t *ids, int T, int prefix_len, float *logits_last,
                   float *logits_all) {
    const frigg_model *m = b->model;
    const frigg_config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, p0 = b->seq_len[seq];
    if (p0 + T > b->max_ctx) {
        frigg_set_error("context full: %d cached + %d new tokens > %d", p0, T, b->max_ctx);
        return -1;
    }
    for (int t = 0; t < T; t++)
        if (ids[t] < 0 || ids[t] >= V) {
            frigg_set_error("token id %d is outside the vocabulary [0, %d)", ids[t], V);
            return -1;
        }
    size_t TD = (size_t)T * D, TI = (size_t)T * I;
    fwd f = {.m = m, .b = b, .impl = b->impl, .seq = seq, .T = T, .p0 = p0, .prefix_len = prefix_len};
    float *zH = frigg_xmalloc(TD * 4), *zL = frigg_xmalloc(TD * 4), *x = frigg_xmalloc(TD * 4);
    f.cos_t = frigg_xmalloc((size_t)T * c->head_dim * 4);
    f.sin_t = frigg_xmalloc((size_t)T * c->head_dim * 4);
    f.a = frigg_xmalloc(TD * 4); f.q = frigg_xmalloc(TD * 4); f.k = frigg_xmalloc(TD * 4);
    f.v = frigg_xmalloc(TD * 4); f.g = frigg_xmalloc(TD * 4); f.o = frigg_xmalloc(TD * 4);
    f.y = frigg_xmalloc(TD * 4); f.t1 = frigg_xmalloc(TD * 4);
    f.mg = frigg_xmalloc(TI * 4); f.mu = frigg_xmalloc(TI * 4);

    frigg_cpu_rope_tables(c, p0, T, f.cos_t, f.sin_t);   /* one table for all 8 runs (trap T14) */
    float scale = (float)c->embedding_scale;              /* fp32 operand, one rounding (§3.1) */
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) {
            zH[(size_t)t * D + i] = frigg_act(frigg_bf16_to_f32(m->embed.w[(size_t)ids[t] * D + i]) * scale);
            zL[(size_t)t * D + i] = frigg_bf16_to_f32(m->z_L_init[i]);
        }
    /* The HRM recurrence (§3.3): injection add at each module input only; outputs replace states. */
    for (int h = 0; h < c->H_cycles; h++) {
        for (int l = 0; l < c->L_cycles; l++) {
            for (size_t i = 0; i < TD; i++) x[i] = frigg_act(zL[i] + zH[i]);
            run_stack(&f, FRIGG_STACK_L, x, h * (c->L_cycles + 1) + l);
            memcpy(zL, x, TD * 4);
        }
        for (size_t i = 0; i < TD; i++) x[i] = frigg_act(zH[i] + zL[i]);
        run_stack(&f, FRIGG_STACK_H, x, h * (c->L_cycles + 1) + c->L_cycles);
        memcpy(zH, x, TD * 4);
    }
    /* lm_head on z_H; no extra norm (trap T7). */
    if (logits_all) {
        frigg_cpu_linear(f.impl->pool, &m->lm_head, zH, T, logits_all);
        if (logits_last) memcpy(logits_last, logits_all + (size_t)(T - 1) * V, (size_t)V * 4);
    } else if (logits_last) {
        frigg_cpu_linear(f.impl->pool, &m->lm_head, zH + (size_t)(T - 1) * D, 1, logits_last);
    }
    b->seq_len[seq] = p0 + T;
    free(zH); free(zL); free(x); free(f.cos_t); free(f.sin_t);
    free(f.a); free(f.q); free(f.k); free(f.v); free(f.g); free(f.o); free(f.y); free(f.t1);
    free(f.mg); free(f.mu);
    return 0;
}

static int cpu_prefill(frigg_backend *b, int seq, const int32_t *ids, int n, int prefix_len, float *logits_last,
                       float *logits_all) {
    if (seq < 0 || seq >= b->max_seqs || n < 1 || prefix_len < 0 || prefix_len > n) {
        frigg_set_error("prefill: bad arguments (seq %d, %d tokens, prefix %d)", seq, n, prefix_len);
        return -1;
    }
    b->seq_len[seq] = 0;
    return forward(b, seq, ids, n, prefix_len, logits_last, logits_all);
}

static int cpu_decode(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, float *logits) {
    size_t V = (size_t)b->model->cfg.vocab_size;
    for (int i = 0; i < nseq; i++) {
        if (seqs[i] < 0 || seqs[i] >= b->max_seqs || b->seq_len[seqs[i]] == 0) {
            frigg_set_error("decode: sequence %d has no prefilled prompt", seqs[i]);
            return -1;
        }
        /* A decode step is causal: the new token is never part of the prefix. */
        if (forward(b, seqs[i], &ids[i], 1, 0, logits + i * V, NULL)) return -1;
    }
    return 0;
}

static void cpu_destroy(frigg_backend *b) {
    cpu_impl *im = b->impl;
    for (int s = 0; s < b->max_seqs; s++) {
        free(im->kv_k[s]);
        free(im->kv_v[s]);
    }
    free(im->kv_k);
    free(im->kv_v);
    frigg_pool_destroy(im->pool);
    free(im);
    free(b->seq_len);
    free(b);
}

frigg_backend *frigg_backend_cpu_create(const frigg_model *m, const frigg_backend_opts *opts) {
    frigg_backend_opts o;
    frigg_backend *b = frigg_backend_alloc("cpu", m, opts, &o);
    cpu_impl *im = frigg_xcalloc(1, sizeof *im);
    b->prefill = cpu_prefill;
    b->decode = cpu_decode;
    b->decode_argmax = NULL;
    b->decode_greedy = NULL;
    b->destroy = cpu_destroy;
    b->impl = im;
    im->pool = frigg_pool_create(o.threads);
    im->kv_k = frigg_xcalloc(o.max_seqs, sizeof *im->kv_k);
    im->kv_v = frigg_xcalloc(o.max_seqs, sizeof *im->kv_v);
    size_t per_seq = (size_t)m->cfg.num_slots * o.max_ctx * m->cfg.hidden_size;
    for (int s = 0; s < o.max_seqs; s++) {
        im->kv_k[s] = calloc(per_seq, sizeof(float));
        im->kv_v[s] = calloc(per_seq, sizeof(float));
        if (!im->kv_k[s] || !im->kv_v[s]) {
            frigg_set_error("cpu: cannot reserve the KV cache (%d sequences x %d slots x %d tokens x %d x 2 floats)",
                            o.max_seqs, m->cfg.num_slots, o.max_ctx, m->cfg.hidden_size);
            cpu_destroy(b);
            return NULL;
        }
    }
    return b;
}
