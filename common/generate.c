/* generate.c — see generate.h. */
#include "generate.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static int add_stop(int32_t *out, int n, int max, int id, const frigg_config *c) {
    if (id < 0 || id >= c->vocab_size || n >= max) return n;
    for (int j = 0; j < n; j++)
        if (out[j] == id) return n;
    out[n] = id;
    return n + 1;
}

int frigg_default_stop_ids(const frigg_config *c, int with_tools, int32_t *out, int max) {
    int n = add_stop(out, 0, max, 106, c); /* <turn|>, DFM-Mimir's end of turn */
    n = add_stop(out, n, max, 1, c);       /* <eos> */
    for (int i = 0; i < c->n_eos; i++) n = add_stop(out, n, max, c->eos_token_ids[i], c);
    if (with_tools) n = add_stop(out, n, max, 50, c); /* <|tool_response>: stop and run the tool */
    return n;
}

static int is_stop(const frigg_gen_params *p, int32_t id) {
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] == id) return 1;
    return 0;
}

/* One generated id: stop on a stop id or the caller's say-so, else keep it. 1 = stop. */
typedef struct {
    const frigg_gen_params *p;
    frigg_gen_result *r;
} gen_state;
static int accept_id(gen_state *g, int32_t next) {
    if (is_stop(g->p, next)) {
        g->r->finish_reason = "stop";
        return 1;
    }
    g->r->ids[g->r->n++] = next;
    if (g->p->on_token && g->p->on_token(g->p->ctx, next)) {
        g->r->finish_reason = "stop";
        return 1;
    }
    return 0;
}
/* decode_greedy's callback: one decode step's id. */
static int on_greedy_ids(void *ctx, const int32_t *ids) {
    gen_state *g = ctx;
    g->r->decode_steps++;
    return accept_id(g, ids[0]);
}

int frigg_generate(frigg_backend *b, int seq, const int32_t *prompt, int n, const frigg_gen_params *p,
                   frigg_gen_result *r) {
    memset(r, 0, sizeof *r);
    const frigg_config *c = &b->model->cfg;
    int V = c->vocab_size;
    if (n < 1) {
        frigg_set_error("empty prompt");
        return -1;
    }
    if ((long)n + p->max_tokens > b->max_ctx) {
        frigg_set_error("prompt (%d tokens) + max_tokens (%d) = %ld exceeds the context limit of %d tokens", n,
                        p->max_tokens, (long)n + p->max_tokens, b->max_ctx);
        return -1;
    }
    int prefix = p->prefix_tokens < 0 ? n : p->prefix_tokens;
    if (prefix > n) {
        frigg_set_error("prefix_tokens (%d) is longer than the prompt (%d tokens)", prefix, n);
        return -1;
    }
    int k = p->logprobs;
    r->ids = frigg_xmalloc((size_t)(p->max_tokens + 1) * sizeof(int32_t));
    if (k) {
        r->token_logprob = frigg_xmalloc((size_t)(p->max_tokens + 1) * sizeof(float));
        r->top_ids = frigg_xmalloc((size_t)(p->max_tokens + 1) * k * sizeof(int32_t));
        r->top_lps = frigg_xmalloc((size_t)(p->max_tokens + 1) * k * sizeof(float));
    }
    r->finish_reason = "length";
    float *logits = frigg_xmalloc((size_t)V * sizeof(float));
    float *raw = k ? frigg_xmalloc((size_t)V * sizeof(float)) : NULL;
    frigg_sampler smp;
    frigg_sampler_init(&smp, &p->sampling, V);
    /* On-device argmax only when nothing needs the logits on the host. */
    int device_greedy = b->decode_argmax && p->sampling.temperature <= 0 && (p->sampling.repetition_penalty == 1.0f || p->sampling.repetition_penalty <= 0) &&
                        !k;
    /* A top-k draw needs only the k largest logits: the backend sends those (decode_topk) instead of the row. */
    int topk = b->decode_topk && !k ? frigg_sampler_topk_only(&p->sampling, V) : 0;
    int rc = -1;
    double t0 = frigg_now_ms();
    if (b->prefill(b, seq, prompt, n, prefix, p->max_tokens > 0 ? logits : NULL, NULL)) goto out;
    r->prefill_ms = frigg_now_ms() - t0;
    t0 = frigg_now_ms();
    int32_t next = -1;
    gen_state g = {p, r};
    for (int step = 0; step < p->max_tokens; step++) {
        if (step > 0 && device_greedy && b->decode_greedy) {
            /* every remaining step on the device, the next one queued before this one's id is back */
            if (b->decode_greedy(b, 1, &seq, &r->ids[r->n - 1], p->max_tokens - step, on_greedy_ids, &g) < 0) goto out;
            break;
        }
        if (step > 0) {
            int32_t prev = r->ids[r->n - 1];
            if (device_greedy) {
                if (b->decode_argmax(b, 1, &seq, &prev, &next)) goto out;
            } else if (topk) {
                if (frigg_decode_topk_draw(b, 1, &seq, &prev, topk, &smp, &next)) goto out;
            } else if (b->decode(b, 1, &seq, &prev, logits)) {
                goto out;
            }
            r->decode_steps++;
        }
        if ((!device_greedy && !topk) || step == 0) {
            if (k) memcpy(raw, logits, (size_t)V * sizeof(float));
            next = frigg_sample(&smp, logits, r->ids, r->n);
            /* logprobs describe the model's own distribution (raw logits, temperature 1). */
            if (k) {
                r->token_logprob[r->n] = frigg_logprob_of(raw, V, next);
                frigg_top_logprobs(raw, V, k, r->top_ids + (size_t)r->n * k, r->top_lps + (size_t)r->n * k);
            }
        }
        if (accept_id(&g, next)) break;
    }
    r->decode_ms = frigg_now_ms() - t0;
    rc = 0;
out:
    frigg_sampler_free(&smp);
    free(logits);
    free(raw);
    if (rc) frigg_gen_result_free(r);
    return rc;
}

void frigg_gen_result_free(frigg_gen_result *r) {
    free(r->ids);
    free(r->token_logprob);
    free(r->top_ids);
    free(r->top_lps);
    memset(r, 0, sizeof *r);
}

int frigg_decode_topk_draw(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int k, frigg_sampler *smp,
                           int32_t *out) {
    float *vals = frigg_xmalloc(sizeof(float) * (size_t)nseq * k);
    int32_t *cand = frigg_xmalloc(sizeof(int32_t) * (size_t)nseq * k);
    int rc = b->decode_topk(b, nseq, seqs, ids, k, vals, cand);
    for (int i = 0; i < nseq && !rc; i++) out[i] = frigg_sample_topk(&smp[i], vals + (size_t)i * k, cand + (size_t)i * k, k);
    free(vals);
    free(cand);
    return rc;
}
