/* backend.c — choose and create an engine by name; what every engine checks of a step; the one-step
 * conveniences over submit/collect. */
#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

frigg_backend *frigg_backend_create(const char *name, const frigg_model *m, const frigg_backend_opts *opts) {
    if (!name || !strcmp(name, "auto")) {
#ifdef FRIGG_CUDA
        name = frigg_cuda_device_count() > 0 ? "cuda" : "cpu";
#else
        name = "cpu";
#endif
    }
    if (frigg_model_check_dtypes(m)) return NULL;
    if (!strcmp(name, "cpu")) return frigg_backend_cpu_create(m, opts);
    if (!strcmp(name, "cuda")) {
#ifdef FRIGG_CUDA
        return frigg_backend_cuda_create(m, opts);
#else
        frigg_set_error("backend \"cuda\" is not in this build (built with FRIGG_CUDA=0 or without nvcc)");
        return NULL;
#endif
    }
    frigg_set_error("unknown backend \"%s\" (expected cpu or cuda)", name);
    return NULL;
}

void frigg_backend_destroy(frigg_backend *b) {
    if (b) b->destroy(b);
}

int frigg_backend_check_kv(const char *name, frigg_dtype kv) {
    if (kv == FRIGG_DT_INT8 && strcmp(name, "cpu") && strcmp(name, "cuda")) {
        frigg_set_error("backend \"%s\": an int8 KV cache is implemented in the CPU and CUDA engines only (--backend "
                        "cpu or cuda, or --kv-dtype bf16)", name);
        return -1;
    }
    if (kv != FRIGG_DT_BF16 && kv != FRIGG_DT_INT8) {
        frigg_set_error("backend \"%s\": a %s KV cache is not implemented (bf16 or int8)", name, frigg_dtype_name(kv));
        return -1;
    }
    return 0;
}

frigg_backend *frigg_backend_alloc(const char *name, const frigg_model *m, const frigg_backend_opts *opts,
                                   frigg_backend_opts *o) {
    *o = opts ? *opts : (frigg_backend_opts){0};
    if (o->max_seqs < 1) o->max_seqs = 1;
    if (o->max_ctx > m->cfg.max_position_embeddings) {
        frigg_set_error("backend \"%s\": %d tokens per sequence > the model's max_position_embeddings %d", name,
                        o->max_ctx, m->cfg.max_position_embeddings);
        return NULL;
    }
    if (o->max_ctx <= 0) o->max_ctx = m->cfg.max_position_embeddings;
    if (o->threads < 0 || o->threads > FRIGG_MAX_THREADS) {
        frigg_set_error("backend \"%s\": %d threads (0: all cores, else 1..%d)", name, o->threads, FRIGG_MAX_THREADS);
        return NULL;
    }
    if (frigg_backend_check_kv(name, o->kv_dtype)) return NULL;
    if (o->dequant_rows < FRIGG_DEQUANT_NEVER) {
        frigg_set_error("backend \"%s\": dequant_rows %d (0: the default, -1: never, else at least 1 row)", name,
                        o->dequant_rows);
        return NULL;
    }
    if (o->dequant_rows && !strcmp(name, "cpu")) {
        frigg_set_error("backend \"cpu\": the bf16 copy of quantized weights (--dequant-rows) is the CUDA engine's; "
                        "the CPU engine computes from the stored weights");
        return NULL;
    }
    frigg_backend *b = frigg_xcalloc(1, sizeof *b);
    b->name = name;
    b->model = m;
    b->max_seqs = o->max_seqs;
    b->max_ctx = o->max_ctx;
    b->max_rows = o->max_seqs;
    b->max_inflight = 1;
    b->kv_dtype = o->kv_dtype;
    b->kv_bytes = (double)o->max_seqs * frigg_kv_seq_bytes(&m->cfg, name, o->kv_dtype, o->max_ctx);
    return b;
}

int frigg_dequant_rows(const frigg_model *m, int opt) {
    if (opt == FRIGG_DEQUANT_NEVER) return 0;
    int q8 = m->lm_head.dtype == FRIGG_DT_INT8, q4 = m->lm_head.dtype == FRIGG_DT_INT4;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < m->cfg.layers_per_stack; i++) {
            const frigg_layer *L = &m->stack[s][i];
            const frigg_mat *all[FRIGG_LAYER_MATS];
            frigg_layer_mats(L, all);
            for (int j = 0; j < FRIGG_LAYER_MATS; j++) q8 |= all[j]->dtype == FRIGG_DT_INT8, q4 |= all[j]->dtype == FRIGG_DT_INT4;
        }
    if (!q8 && !q4) return 0;
    return opt > 0 ? opt : q4 ? FRIGG_DEQUANT_ROWS_INT4 : FRIGG_DEQUANT_ROWS_INT8;
}

double frigg_kv_seq_bytes(const frigg_config *c, const char *name, frigg_dtype kv, int ctx) {
    double elems = (double)c->num_slots * ctx * c->hidden_size; /* of K, and again of V */
    if (kv == FRIGG_DT_INT8) return 2 * (elems + 4.0 * c->num_slots * ctx * c->num_heads);
    return 2 * elems * (strcmp(name, "cpu") ? 2 : 4);
}

int frigg_backend_check_rows(const frigg_backend *b, const frigg_row *rows, int nrows, const int *len,
                             const unsigned char *last_greedy) {
    int V = b->model->cfg.vocab_size;
    if (nrows < 1 || nrows > b->max_rows) {
        frigg_set_error("step: %d rows (this %s engine takes 1..%d per step)", nrows, b->name, b->max_rows);
        return -1;
    }
    for (int i = 0; i < nrows; i++) {
        const frigg_row *r = &rows[i];
        int s = r->seq;
        if (s < 0 || s >= b->max_seqs) {
            frigg_set_error("step: row %d names sequence %d (slots 0..%d)", i, s, b->max_seqs - 1);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (rows[j].seq == s) {
                frigg_set_error("step: sequence %d appears twice in one step", s);
                return -1;
            }
        if (r->mask && ((r->want != FRIGG_WANT_GREEDY && r->want != FRIGG_WANT_SAMPLE) || r->prefill)) {
            frigg_set_error("step: row %d: a mask is for greedy and sampled decode rows only", i);
            return -1;
        }
        if (r->want == FRIGG_WANT_SAMPLE &&
            (r->prefill || !(r->temperature > 0) || !isfinite(r->temperature) || !(r->u >= 0 && r->u < 1) || !r->out_id)) {
            frigg_set_error("step: row %d: a sampled row is a decode row with a finite temperature > 0 (%g), a uniform in "
                            "[0, 1) (%g) and an out_id", i, (double)r->temperature, r->u);
            return -1;
        }
        if (r->prefill) {
            if (r->n < 1 || !r->ids) {
                frigg_set_error("step: row %d prefills an empty prompt", i);
                return -1;
            }
            if (r->n > b->max_ctx) {
                frigg_set_error("context full: a %d-token prompt > the %d tokens of a sequence", r->n, b->max_ctx);
                return -1;
            }
            if (r->prefix_len < 0 || r->prefix_len > r->n) {
                frigg_set_error("step: row %d: prefix length %d outside [0, %d]", i, r->prefix_len, r->n);
                return -1;
            }
            if (r->prefill_layers < 0) {
                frigg_set_error("step: row %d: %d prefill layers (0: the whole prompt)", i, r->prefill_layers);
                return -1;
            }
            for (int t = 0; t < r->n; t++)
                if (r->ids[t] < 0 || r->ids[t] >= V) {
                    frigg_set_error("token id %d is outside the vocabulary [0, %d)", r->ids[t], V);
                    return -1;
                }
        } else {
            if (len[s] == 0) {
                frigg_set_error("decode: sequence %d has no prefilled prompt", s);
                return -1;
            }
            if (len[s] + 1 > b->max_ctx) {
                frigg_set_error("context full: %d cached + 1 new token > %d", len[s], b->max_ctx);
                return -1;
            }
            int32_t tok = r->ids ? r->ids[0] : r->token;
            if (r->ids && r->n != 1) {
                frigg_set_error("step: decode row %d carries %d tokens (one per step)", i, r->n);
                return -1;
            }
            if (tok == FRIGG_TOKEN_LAST_GREEDY) {
                if (!last_greedy || !last_greedy[s]) {
                    frigg_set_error("step: row %d takes the last greedy or sampled id of sequence %d, and the step "
                                    "before left none", i, s);
                    return -1;
                }
            } else if (tok < 0 || tok >= V) {
                frigg_set_error("token id %d is outside the vocabulary [0, %d)", tok, V);
                return -1;
            }
        }
        switch (r->want) {
        case FRIGG_WANT_NONE: break;
        case FRIGG_WANT_GREEDY:
        case FRIGG_WANT_SAMPLE: /* its other conditions are checked above */
            if (!r->out_id) goto no_out;
            break;
        case FRIGG_WANT_TOPK:
            if (r->k < 1 || r->k > FRIGG_TOPK_MAX || r->k >= V) {
                frigg_set_error("step: row %d wants the top %d logits (1..%d, below the vocabulary of %d)", i, r->k,
                                FRIGG_TOPK_MAX, V);
                return -1;
            }
            if (!r->out_vals || !r->out_ids) goto no_out;
            break;
        case FRIGG_WANT_LOGITS:
            if (!r->out_logits) goto no_out;
            break;
        case FRIGG_WANT_ALL_LOGITS:
            if (!r->prefill) {
                frigg_set_error("step: row %d wants every prompt row's logits but is a decode row", i);
                return -1;
            }
            if (!r->out_logits) goto no_out;
            break;
        default: frigg_set_error("step: row %d wants %d, which is no frigg_want", i, (int)r->want); return -1;
        }
        continue;
    no_out:
        frigg_set_error("step: row %d wants an output it gives no buffer for", i);
        return -1;
    }
    return 0;
}

int frigg_backend_bad_seq(const frigg_backend *b, int seq, const char *what) {
    if (seq >= 0 && seq < b->max_seqs) return 0;
    frigg_set_error("%s: sequence %d (slots 0..%d)", what, seq, b->max_seqs - 1);
    return 1;
}

int frigg_backend_bad_fork(const frigg_backend *b, int src, int n, int len) {
    (void)b;
    if (n >= 0 && n <= len) return 0;
    frigg_set_error("seq_fork: position %d outside sequence %d's %d tokens", n, src, len);
    return 1;
}

int frigg_step(frigg_backend *b, frigg_row *rows, int nrows) {
    if (b->submit(b, rows, nrows)) return -1;
    return b->collect(b);
}

int frigg_prefill(frigg_backend *b, int seq, const int32_t *ids, int n, int prefix_len, float *logits_last,
                  float *logits_all) {
    frigg_row r = {.seq = seq, .prefill = 1, .ids = ids, .n = n, .prefix_len = prefix_len,
                   .want = logits_all ? FRIGG_WANT_ALL_LOGITS : logits_last ? FRIGG_WANT_LOGITS : FRIGG_WANT_NONE,
                   .out_logits = logits_all ? logits_all : logits_last};
    if (frigg_step(b, &r, 1)) return -1;
    if (logits_all && logits_last && n > 0)
        memcpy(logits_last, logits_all + (size_t)(n - 1) * b->model->cfg.vocab_size,
               sizeof(float) * (size_t)b->model->cfg.vocab_size);
    return 0;
}

int frigg_decode(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, float *logits) {
    if (nseq < 1) {
        frigg_set_error("decode: %d sequences", nseq);
        return -1;
    }
    frigg_row *rows = frigg_xcalloc((size_t)nseq, sizeof *rows);
    size_t V = (size_t)b->model->cfg.vocab_size;
    for (int i = 0; i < nseq; i++)
        rows[i] = (frigg_row){.seq = seqs[i], .ids = &ids[i], .n = 1, .want = FRIGG_WANT_LOGITS,
                              .out_logits = logits + i * V};
    int rc = frigg_step(b, rows, nseq);
    free(rows);
    return rc;
}
