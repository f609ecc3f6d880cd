/* cpu_engine.c — the CPU reference engine: MODEL.md §3 written out, one op per line.
 * It is the executable spec the GPU path is checked against; keep it plain. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu_ops.h"
#include "sampler.h"
#include "base/util.h"

typedef struct {
    frigg_pool *pool;
    frigg_prec prec;
    /* Static KV cache, one block per sequence: [slot][max_ctx][D] elements, post-RoPE keys. kv_dtype BF16:
     * fp32 elements (bf16 values unless fp32 reference); INT8: int8 elements plus, in sc_k / sc_v, one fp32
     * scale per (slot, position, head), [slot][max_ctx][H] (frigg_kv_quantize). Allocated once at creation;
     * calloc'd so the OS commits pages only as positions are written (DFM-Mimir at 4096 tokens reserves
     * 6 GiB in fp32 but touches what is used). */
    int int8;
    size_t elt;                  /* bytes per element: 4 or 1 */
    void **kv_k, **kv_v;
    float **sc_k, **sc_v;        /* INT8 only */
    int *len;                    /* tokens in each sequence's cache */
    int32_t *greedy;             /* each sequence's greedy id from the last step, when last_greedy says so */
    unsigned char *last_greedy;
    int pending;                 /* submitted steps not yet collected (their outputs are already written) */
} cpu_impl;

/* Everything one forward call of T rows needs. */
typedef struct {
    const frigg_model *m;
    const frigg_backend *b;
    cpu_impl *impl;
    frigg_prec prec;
    int seq, T, p0, prefix_len;
    float *cos_t, *sin_t;
    float *a, *q, *k, *v, *g, *o, *y, *t1, *mg, *mu;
} fwd;

/* Slot `slot` of sequence seq's K or V block: [max_ctx][D] elements of im->elt bytes. */
static void *kv_slot(void **kv, const frigg_backend *b, int seq, int slot) {
    const cpu_impl *im = b->impl;
    return (char *)kv[seq] + (size_t)slot * b->max_ctx * b->model->cfg.hidden_size * im->elt;
}
/* Its scales (INT8): [max_ctx][H] floats. */
static float *kv_scales(float **sc, const frigg_backend *b, int seq, int slot) {
    return sc[seq] + (size_t)slot * b->max_ctx * b->model->cfg.num_heads;
}

/* DECODER_LAYER (MODEL.md §3.5, §3.7): h is updated in place. */
static void decoder_layer(fwd *f, const frigg_layer *L, float *h, int slot) {
    const frigg_config *c = &f->m->cfg;
    frigg_pool *pool = f->impl->pool;
    int T = f->T, D = c->hidden_size, I = c->intermediate_size, H = c->num_heads, hd = c->head_dim;
    size_t TD = (size_t)T * D;

    frigg_prec P = f->prec;
    frigg_cpu_rmsnorm(P, h, T, D, c->rms_norm_eps, f->a);       /* input_layernorm */
    frigg_cpu_linear(P, pool, &L->q, f->a, T, f->q);
    frigg_cpu_linear(P, pool, &L->k, f->a, T, f->k);
    frigg_cpu_linear(P, pool, &L->v, f->a, T, f->v);
    frigg_cpu_linear(P, pool, &L->gate, f->a, T, f->g);         /* output gate, from the same normed input */
    frigg_cpu_rope_apply(P, f->q, T, H, hd, f->cos_t, f->sin_t);
    frigg_cpu_rope_apply(P, f->k, T, H, hd, f->cos_t, f->sin_t);
    cpu_impl *im = f->impl;
    void *K = kv_slot(im->kv_k, f->b, f->seq, slot), *V = kv_slot(im->kv_v, f->b, f->seq, slot);
    /* PrefixLM attention over the cache, then the elementwise sigmoid gate, before o_proj */
    frigg_attn_args aa = {.q = f->q, .q_stride = D, .pos_stride = D, .head_stride = hd, .gate = f->g,
                          .gate_stride = D, .T = T, .p0 = f->p0, .prefix_len = f->prefix_len, .heads = H,
                          .head_dim = hd, .out = f->y, .out_stride = D};
    if (im->int8) {
        /* Quantize the T new positions into the cache; attention, the prompt's own rows included, reads the
         * cache it just wrote, so a row attends to the same values whether its keys were written by this
         * prefill or by earlier steps (a sequence's result does not depend on how it was stepped). */
        int8_t *K8 = K, *V8 = V;
        float *KS = kv_scales(im->sc_k, f->b, f->seq, slot), *VS = kv_scales(im->sc_v, f->b, f->seq, slot);
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < H; hh++) {
                size_t src = (size_t)t * D + (size_t)hh * hd, dst = (size_t)(f->p0 + t) * D + (size_t)hh * hd;
                size_t si = (size_t)(f->p0 + t) * H + hh;
                frigg_kv_quantize(f->k + src, hd, K8 + dst, &KS[si]); /* post-RoPE */
                frigg_kv_quantize(f->v + src, hd, V8 + dst, &VS[si]);
            }
        aa.k8 = K8;
        aa.v8 = V8;
        aa.k_scale = KS;
        aa.v_scale = VS;
        aa.scale_pos_stride = H;
        aa.scale_head_stride = 1;
    } else {
        float *KF = K, *VF = V;
        for (size_t i = 0; i < TD; i++) {                       /* append to this slot's cache */
            KF[(size_t)f->p0 * D + i] = f->k[i]; /* already bf16-rounded by RoPE */
            VF[(size_t)f->p0 * D + i] = f->v[i];
        }
        aa.k = KF;
        aa.v = VF;
    }
    frigg_cpu_attention(P, pool, &aa);
    frigg_cpu_linear(P, pool, &L->o, f->y, T, f->t1);
    for (size_t i = 0; i < TD; i++) h[i] = frigg_act(P, h[i] + f->t1[i]);

    frigg_cpu_rmsnorm(P, h, T, D, c->rms_norm_eps, f->a);       /* post_attention_layernorm */
    frigg_cpu_linear(P, pool, &L->mlp_gate, f->a, T, f->mg);
    frigg_cpu_linear(P, pool, &L->up, f->a, T, f->mu);
    frigg_cpu_swiglu(P, f->mg, f->mu, T * I, f->mg);
    frigg_cpu_linear(P, pool, &L->down, f->mg, T, f->t1);
    for (size_t i = 0; i < TD; i++) h[i] = frigg_act(P, h[i] + f->t1[i]);
}

/* STACK(M, x, r): 16 layers then the weightless final_norm; the output replaces the state. */
static void run_stack(fwd *f, int stack, float *x, int run) {
    const frigg_config *c = &f->m->cfg;
    for (int i = 0; i < c->layers_per_stack; i++)
        decoder_layer(f, &f->m->stack[stack][i], x, frigg_slot(c, run, i));
    frigg_cpu_rmsnorm(f->prec, x, f->T, c->hidden_size, c->rms_norm_eps, x);
}

/* The model over T new rows of sequence `seq`, which holds p0 tokens (0 for a prompt). Logits: of the last
 * row (logits_last) and/or of every row (logits_all), either may be NULL. The step checks were made. */
static void forward(frigg_backend *b, int seq, const int32_t *ids, int T, int prefix_len, float *logits_last,
                    float *logits_all) {
    const frigg_model *m = b->model;
    const frigg_config *c = &m->cfg;
    cpu_impl *im = b->impl;
    frigg_prec P = im->prec;
    int D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, p0 = im->len[seq];
    size_t TD = (size_t)T * D, TI = (size_t)T * I;
    fwd f = {.m = m, .b = b, .impl = im, .prec = P, .seq = seq, .T = T, .p0 = p0, .prefix_len = prefix_len};
    float *zH = frigg_xmalloc(TD * 4), *zL = frigg_xmalloc(TD * 4), *x = frigg_xmalloc(TD * 4);
    f.cos_t = frigg_xmalloc((size_t)T * c->head_dim * 4);
    f.sin_t = frigg_xmalloc((size_t)T * c->head_dim * 4);
    f.a = frigg_xmalloc(TD * 4); f.q = frigg_xmalloc(TD * 4); f.k = frigg_xmalloc(TD * 4);
    f.v = frigg_xmalloc(TD * 4); f.g = frigg_xmalloc(TD * 4); f.o = frigg_xmalloc(TD * 4);
    f.y = frigg_xmalloc(TD * 4); f.t1 = frigg_xmalloc(TD * 4);
    f.mg = frigg_xmalloc(TI * 4); f.mu = frigg_xmalloc(TI * 4);

    frigg_cpu_rope_tables(P, c, p0, T, f.cos_t, f.sin_t);    /* one table for all 8 runs (trap T14) */
    float scale = (float)c->embedding_scale;                  /* fp32 operand, one rounding (§3.1) */
    float *zl0 = frigg_xmalloc((size_t)D * 4);
    for (int i = 0; i < D; i++) zl0[i] = frigg_bf16_to_f32(m->z_L_init[i]);
    for (int t = 0; t < T; t++) {
        float *row = zH + (size_t)t * D;
        frigg_mat_row(&m->embed, ids[t], row);                /* dtypes were checked at creation */
        for (int i = 0; i < D; i++) {
            row[i] = frigg_act(P, row[i] * scale);
            zL[(size_t)t * D + i] = zl0[i];
        }
    }
    free(zl0);
    /* The HRM recurrence (§3.3): injection add at each module input only; outputs replace states. */
    for (int h = 0; h < c->H_cycles; h++) {
        for (int l = 0; l < c->L_cycles; l++) {
            for (size_t i = 0; i < TD; i++) x[i] = frigg_act(P, zL[i] + zH[i]);
            run_stack(&f, FRIGG_STACK_L, x, h * (c->L_cycles + 1) + l);
            memcpy(zL, x, TD * 4);
        }
        for (size_t i = 0; i < TD; i++) x[i] = frigg_act(P, zH[i] + zL[i]);
        run_stack(&f, FRIGG_STACK_H, x, h * (c->L_cycles + 1) + c->L_cycles);
        memcpy(zH, x, TD * 4);
    }
    /* lm_head on z_H; no extra norm (trap T7). */
    if (logits_all) {
        frigg_cpu_linear(P, im->pool, &m->lm_head, zH, T, logits_all);
        if (logits_last) memcpy(logits_last, logits_all + (size_t)(T - 1) * V, (size_t)V * 4);
    } else if (logits_last) {
        frigg_cpu_linear(P, im->pool, &m->lm_head, zH + (size_t)(T - 1) * D, 1, logits_last);
    }
    im->len[seq] = p0 + T;
    free(zH); free(zL); free(x); free(f.cos_t); free(f.sin_t);
    free(f.a); free(f.q); free(f.k); free(f.v); free(f.g); free(f.o); free(f.y); free(f.t1);
    free(f.mg); free(f.mu);
}

/* The CPU engine runs a step inside submit, row after row (a row's result never depends on the other
 * rows of its step: batch invariance holds by construction), and writes the outputs there; collect
 * only retires the step. It takes two steps queued, as the CUDA engine does, so the scheduler's
 * two-deep greedy decoding (FRIGG_TOKEN_LAST_GREEDY) runs, and is tested, here too. */
static int cpu_submit(frigg_backend *b, frigg_row *rows, int nrows) {
    cpu_impl *im = b->impl;
    if (im->pending == b->max_inflight) {
        frigg_set_error("step: %d steps are queued already (collect one first)", im->pending);
        return -1;
    }
    if (frigg_backend_check_rows(b, rows, nrows, im->len, im->last_greedy)) return -1;
    int V = b->model->cfg.vocab_size;
    float *last = frigg_xmalloc(sizeof(float) * (size_t)V);
    int32_t *tok = frigg_xmalloc(sizeof(int32_t) * (size_t)nrows);
    for (int i = 0; i < nrows; i++) /* inputs first: a row's LAST_GREEDY is the step before's id */
        tok[i] = rows[i].prefill ? 0 : rows[i].ids ? rows[i].ids[0] :
                 rows[i].token == FRIGG_TOKEN_LAST_GREEDY ? im->greedy[rows[i].seq] : rows[i].token;
    memset(im->last_greedy, 0, (size_t)b->max_seqs);
    for (int i = 0; i < nrows; i++) {
        frigg_row *r = &rows[i];
        float *all = r->want == FRIGG_WANT_ALL_LOGITS ? r->out_logits : NULL;
        float *lg = r->want == FRIGG_WANT_NONE ? NULL : r->want == FRIGG_WANT_LOGITS ? r->out_logits : last;
        if (r->prefill) {
            r->pending = 0; /* the whole prompt, whatever prefill_layers asks (backend.h allows more) */
            im->len[r->seq] = 0;
            forward(b, r->seq, r->ids, r->n, r->prefix_len, lg, all);
        } else {
            /* A decode step is causal: the new token is never part of the prefix. */
            forward(b, r->seq, &tok[i], 1, 0, lg, NULL);
        }
        if (r->want == FRIGG_WANT_GREEDY) {
            int32_t id = r->mask ? frigg_argmax_masked(last, V, r->mask) : frigg_argmax(last, V);
            if (id < 0) id = 0; /* a mask of nothing: no allowed finite logit */
            im->greedy[r->seq] = id; /* a step queued next still gets a valid input id */
            *r->out_id = isfinite(last[id]) ? id : -1; /* seqgen: an id outside [0, V) is a non-finite row */
            im->last_greedy[r->seq] = 1;
        } else if (r->want == FRIGG_WANT_SAMPLE) {
            int32_t id = frigg_draw_row(last, V, r->mask, r->temperature, r->u);
            im->greedy[r->seq] = id < 0 ? 0 : id; /* a valid input id for a step queued next */
            *r->out_id = id;
            im->last_greedy[r->seq] = 1;
        } else if (r->want == FRIGG_WANT_TOPK) {
            frigg_topk(last, V, r->k, r->out_ids);
            for (int j = 0; j < r->k; j++) r->out_vals[j] = last[r->out_ids[j]];
            if (r->out_lse) *r->out_lse = frigg_row_lse(last, V);
        }
    }
    free(last);
    free(tok);
    im->pending++;
    return 0;
}

static int cpu_collect(frigg_backend *b) {
    cpu_impl *im = b->impl;
    if (!im->pending) {
        frigg_set_error("collect: no step was submitted");
        return -1;
    }
    im->pending--;
    return 0;
}

static int cpu_seq_len(const frigg_backend *b, int seq) {
    if (frigg_backend_bad_seq(b, seq, "seq_len")) return -1;
    return ((const cpu_impl *)b->impl)->len[seq];
}

static int cpu_seq_reset(frigg_backend *b, int seq) {
    if (frigg_backend_bad_seq(b, seq, "seq_reset")) return -1;
    cpu_impl *im = b->impl;
    im->len[seq] = 0;
    im->last_greedy[seq] = 0;
    return 0;
}

static int cpu_seq_fork(frigg_backend *b, int src, int dst, int n) {
    if (frigg_backend_bad_seq(b, src, "seq_fork") || frigg_backend_bad_seq(b, dst, "seq_fork")) return -1;
    cpu_impl *im = b->impl;
    if (frigg_backend_bad_fork(b, src, n, im->len[src])) return -1;
    if (src != dst) {
        size_t D = (size_t)b->model->cfg.hidden_size, H = (size_t)b->model->cfg.num_heads;
        for (int slot = 0; slot < b->model->cfg.num_slots; slot++) {
            memcpy(kv_slot(im->kv_k, b, dst, slot), kv_slot(im->kv_k, b, src, slot), im->elt * n * D);
            memcpy(kv_slot(im->kv_v, b, dst, slot), kv_slot(im->kv_v, b, src, slot), im->elt * n * D);
            if (im->int8) { /* the scales of those positions with them */
                memcpy(kv_scales(im->sc_k, b, dst, slot), kv_scales(im->sc_k, b, src, slot), sizeof(float) * n * H);
                memcpy(kv_scales(im->sc_v, b, dst, slot), kv_scales(im->sc_v, b, src, slot), sizeof(float) * n * H);
            }
        }
        im->greedy[dst] = im->greedy[src];
    }
    im->len[dst] = n;
    im->last_greedy[dst] = 0;
    return 0;
}

static void cpu_destroy(frigg_backend *b) {
    cpu_impl *im = b->impl;
    if (im) {
        for (int s = 0; s < b->max_seqs && im->kv_k; s++) {
            free(im->kv_k[s]);
            free(im->kv_v[s]);
            if (im->sc_k) free(im->sc_k[s]);
            if (im->sc_v) free(im->sc_v[s]);
        }
        free(im->kv_k);
        free(im->kv_v);
        free(im->sc_k);
        free(im->sc_v);
        free(im->len);
        free(im->greedy);
        free(im->last_greedy);
        frigg_pool_destroy(im->pool);
        free(im);
    }
    free(b);
}

frigg_backend *frigg_backend_cpu_create(const frigg_model *m, const frigg_backend_opts *opts) {
    frigg_backend_opts o;
    frigg_backend *b = frigg_backend_alloc("cpu", m, opts, &o);
    if (!b) return NULL;
    cpu_impl *im = frigg_xcalloc(1, sizeof *im);
    b->submit = cpu_submit;
    b->collect = cpu_collect;
    b->seq_reset = cpu_seq_reset;
    b->seq_fork = cpu_seq_fork;
    b->seq_len = cpu_seq_len;
    b->destroy = cpu_destroy;
    b->impl = im;
    b->max_inflight = 2;
    im->prec = o.fp32_reference ? FRIGG_PREC_FP32 : FRIGG_PREC_BF16;
    im->pool = frigg_pool_create(o.threads);
    if (!im->pool) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", frigg_error());
        free(im);
        free(b);
        frigg_set_error("backend \"cpu\": %s", msg);
        return NULL;
    }
    im->len = frigg_xcalloc(o.max_seqs, sizeof *im->len);
    im->greedy = frigg_xcalloc(o.max_seqs, sizeof *im->greedy);
    im->last_greedy = frigg_xcalloc(o.max_seqs, 1);
    im->int8 = o.kv_dtype == FRIGG_DT_INT8;
    im->elt = im->int8 ? 1 : sizeof(float);
    im->kv_k = frigg_xcalloc(o.max_seqs, sizeof *im->kv_k);
    im->kv_v = frigg_xcalloc(o.max_seqs, sizeof *im->kv_v);
    if (im->int8) {
        im->sc_k = frigg_xcalloc(o.max_seqs, sizeof *im->sc_k);
        im->sc_v = frigg_xcalloc(o.max_seqs, sizeof *im->sc_v);
    }
    size_t per_seq = (size_t)m->cfg.num_slots * o.max_ctx * m->cfg.hidden_size;
    size_t per_seq_sc = (size_t)m->cfg.num_slots * o.max_ctx * m->cfg.num_heads;
    size_t bytes = 0;
    for (int s = 0; s < o.max_seqs; s++) {
        im->kv_k[s] = calloc(per_seq, im->elt);
        im->kv_v[s] = calloc(per_seq, im->elt);
        int fail = !im->kv_k[s] || !im->kv_v[s];
        if (im->int8) {
            im->sc_k[s] = calloc(per_seq_sc, sizeof(float));
            im->sc_v[s] = calloc(per_seq_sc, sizeof(float));
            fail |= !im->sc_k[s] || !im->sc_v[s];
        }
        if (fail) {
            frigg_set_error("cpu: cannot reserve the KV cache (%d sequences x %.3f GiB)", o.max_seqs,
                            frigg_kv_seq_bytes(&m->cfg, "cpu", o.kv_dtype, o.max_ctx) / 1073741824.0);
            cpu_destroy(b);
            return NULL;
        }
        bytes += 2 * (per_seq * im->elt + (im->int8 ? per_seq_sc * sizeof(float) : 0));
    }
    b->kv_bytes = bytes; /* what was reserved; frigg_backend_alloc's figure from frigg_kv_seq_bytes is replaced */
    return b;
}
