/* generate.c — see generate.h. */
#include "generate.h"

#include <stdlib.h>
#include <string.h>

#include "seqgen.h"
#include "base/util.h"

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

int frigg_generate(frigg_backend *b, int seq, const int32_t *prompt, int n, const frigg_gen_params *p,
                   frigg_gen_result *r) {
    memset(r, 0, sizeof *r);
    const frigg_config *c = &b->model->cfg;
    int prefix = p->prefix_tokens < 0 ? n : p->prefix_tokens;
    if (frigg_seqgen_check_prompt(b, prompt, n, p->max_tokens, prefix)) return -1;
    frigg_seqgen_params sp = {.max_tokens = p->max_tokens, .sampling = p->sampling, .logprobs = p->logprobs};
    if (p->n_stop_ids > FRIGG_SEQGEN_MAX_STOP_IDS) {
        frigg_set_error("%d stop ids (at most %d)", p->n_stop_ids, FRIGG_SEQGEN_MAX_STOP_IDS);
        return -1;
    }
    if (p->n_stop_ids) memcpy(sp.stop_ids, p->stop_ids, sizeof(int32_t) * (size_t)p->n_stop_ids);
    sp.n_stop_ids = p->n_stop_ids;
    frigg_seqgen *g = frigg_seqgen_new(&sp, n, c->vocab_size, NULL);
    if (!g) return -1;
    double t0 = frigg_now_ms();
    frigg_row row = {.seq = seq, .prefill = 1, .ids = prompt, .n = n, .prefix_len = prefix};
    frigg_seqgen_row(g, &row);
    int rc = -1;
    if (frigg_step(b, &row, 1)) goto out;
    frigg_seqgen_mark(g, t0, t0, frigg_now_ms());
    const char *piece;
    size_t plen;
    while (!frigg_seqgen_accept(g, &row, &piece, &plen)) {
        row = (frigg_row){.seq = seq, .n = 1, .token = frigg_seqgen_last(g)};
        frigg_seqgen_row(g, &row);
        if (frigg_step(b, &row, 1)) goto out;
    }
    if (frigg_seqgen_error(g)) { /* the model's row was not finite */
        frigg_set_error("%s", frigg_seqgen_error(g));
        goto out;
    }
    frigg_seqgen_finish(g, 0, NULL, NULL);
    const frigg_seqgen_result *res = frigg_seqgen_result_of(g);
    size_t cap = (size_t)p->max_tokens + 1;
    r->ids = frigg_xmalloc(cap * sizeof(int32_t));
    memcpy(r->ids, res->ids, sizeof(int32_t) * (size_t)res->n);
    r->n = res->n;
    r->finish_reason = !strcmp(res->finish_reason, "stop") ? "stop" : "length";
    if (p->logprobs) {
        int k = p->logprobs;
        r->token_logprob = frigg_xmalloc(cap * sizeof(float));
        r->top_ids = frigg_xmalloc(cap * k * sizeof(int32_t));
        r->top_lps = frigg_xmalloc(cap * k * sizeof(float));
        memcpy(r->token_logprob, res->token_logprob, sizeof(float) * (size_t)res->n);
        memcpy(r->top_ids, res->top_ids, sizeof(int32_t) * (size_t)res->n * k);
        memcpy(r->top_lps, res->top_lps, sizeof(float) * (size_t)res->n * k);
    }
    r->prefill_ms = res->prefill_ms;
    r->decode_ms = res->decode_ms;
    r->decode_steps = res->decode_steps;
    rc = 0;
out:
    frigg_seqgen_free(g);
    return rc;
}

void frigg_gen_result_free(frigg_gen_result *r) {
    free(r->ids);
    free(r->token_logprob);
    free(r->top_ids);
    free(r->top_lps);
    memset(r, 0, sizeof *r);
}
