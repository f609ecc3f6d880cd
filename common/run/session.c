/* session.c — request object → response object, over one model, one backend and (when the model
 * directory has one) its tokenizer. */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "generate.h"
#include "memcheck.h"
#include "scheduler.h"
#include "model/model.h"
#include "request.h"
#include "base/util.h"
#include "chat/chat.h"
#include "stopstr.h"
#include "tokenizer/tokenizer.h"
#include "chat/toolcall.h"

struct frigg_session {
    frigg_session_opts o;
    char *dir;
    frigg_model *model;
    frigg_backend *backend;
    frigg_tokenizer *tok;
    frigg_sched *sched;
    frigg_gcache *gcache;       /* structured output's grammars (with a tokenizer) */
};

frigg_session *frigg_session_open(const frigg_session_opts *o) {
    frigg_session *s = frigg_xcalloc(1, sizeof *s);
    s->o = *o;
    s->dir = o->model_dir ? frigg_xstrdup(o->model_dir) : frigg_default_model_dir();
    char *tj = frigg_model_side_path(s->dir, "tokenizer.json"); /* a GGUF's: the file beside it */
    int has_tok = frigg_file_exists(tj);
    if (has_tok) {
        s->tok = frigg_tokenizer_load(tj, o->hf_regex);
        if (!s->tok) {
            free(tj);
            frigg_session_close(s);
            return NULL;
        }
    }
    free(tj);
    if (o->tokenizer_only || o->hf_regex) {
        if (!has_tok) {
            char *why = frigg_model_no_tokenizer(s->dir);
            frigg_set_error("%s (needed by %s)", why, o->tokenizer_only ? "--tokenize/--detokenize" : "--hf-regex");
            free(why);
            frigg_session_close(s);
            return NULL;
        }
        if (o->tokenizer_only) return s;
    }
    s->model = frigg_model_load(s->dir);
    if (!s->model) {
        frigg_session_close(s);
        return NULL;
    }
    frigg_backend_opts bo = {.threads = o->threads, .device = o->device,
                             .max_seqs = o->slots > 0 ? o->slots : FRIGG_SESSION_DEFAULT_SLOTS, .max_ctx = o->ctx,
                             .batch_invariant = o->batch_invariant, .kv_dtype = o->kv_dtype,
                             .dequant_rows = o->dequant_rows};
    /* the engine's memory before it is reserved: the CPU engine's KV cache would be committed only as it fills, and
     * an engine larger than the machine would die under the OOM killer later, not fail here */
    frigg_mem_plan mp = {.cfg = &s->model->cfg, .engine = o->backend, .device = o->device, .seqs = bo.max_seqs,
                         .ctx = o->ctx, .kv_dtype = o->kv_dtype,
                         .weights = frigg_mem_weights(o->backend, s->model, o->dequant_rows)};
    if (o->ctx <= s->model->cfg.max_position_embeddings &&
        frigg_mem_check(&mp, 1, o->mem_lower ? o->mem_lower : "the slots or the context")) {
        frigg_session_close(s);
        return NULL;
    }
    s->backend = frigg_backend_create(o->backend, s->model, &bo);
    if (!s->backend) {
        frigg_session_close(s);
        return NULL;
    }
    s->sched = frigg_sched_new(s->backend, s->tok, bo.max_seqs);
    if (!s->sched) {
        frigg_session_close(s);
        return NULL;
    }
    if (s->tok) {
        int32_t ends[FRIGG_SEQGEN_MAX_STOP_IDS];
        int ne = frigg_default_stop_ids(&s->model->cfg, 0, ends, FRIGG_SEQGEN_MAX_STOP_IDS);
        s->gcache = frigg_gcache_new(s->tok, s->model->cfg.vocab_size, ends, ne);
        if (!s->gcache) {
            frigg_session_close(s);
            return NULL;
        }
    }
    frigg_sched_set_prefill_share(s->sched, o->prefill_share);
    frigg_sched_set_prefill_tokens(s->sched, o->prefill_tokens);
    return s;
}

void frigg_session_close(frigg_session *s) {
    if (!s) return;
    frigg_sched_free(s->sched);
    frigg_gcache_free(s->gcache); /* after the scheduler: its sequences held references */
    frigg_backend_destroy(s->backend);
    frigg_model_free(s->model);
    frigg_tokenizer_free(s->tok);
    free(s->dir);
    free(s);
}

static json_t *error_obj(const json_t *id, const char *msg) {
    json_t *o = json_pack("{s:{s:s}}", "error", "message", msg);
    if (id) json_object_set(o, "id", (json_t *)id);
    return o;
}

static json_t *id_array(const int32_t *ids, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

/* The prompt's token ids: given directly, or tokenized from `prompt`, or rendered from `messages`.
 * *rendered gets the rendered chat text (*rendered_len its length) when messages were given. max_ids > 0: a prompt
 * of more tokens is refused as soon as that is known (the context), without tokenizing the rest; empty_ok: a
 * prompt of zero tokens is no error (--tokenize). */
static int request_ids(frigg_session *s, const frigg_request *r, int32_t **ids, int *n, char **rendered,
                       size_t *rendered_len, size_t max_ids, int empty_ok) {
    *rendered = NULL;
    *rendered_len = 0;
    if (r->input_ids) {
        *ids = frigg_xmalloc((size_t)r->n_input * sizeof(int32_t));
        memcpy(*ids, r->input_ids, (size_t)r->n_input * sizeof(int32_t));
        *n = r->n_input;
        return 0;
    }
    if (!s->tok) {
        char *why = frigg_model_no_tokenizer(s->dir);
        frigg_set_error("\"%s\" needs a tokenizer, and %s (send \"input_ids\")", r->prompt ? "prompt" : "messages", why);
        free(why);
        return -1;
    }
    const char *text = r->prompt;
    size_t text_len = r->prompt_len;
    if (r->messages) {
        /* Normalise as DFM-Mimir's training data was (JSON-string tool arguments → objects, …). */
        json_t *norm = frigg_chat_normalize_messages(r->messages);
        *rendered = frigg_chat_render_n(norm, r->tools, 1, rendered_len);
        json_decref(norm);
        if (!*rendered) return -1;
        text = *rendered;
        text_len = *rendered_len;
    }
    size_t nn = 0;
    int rc = frigg_tokenizer_encode_max(s->tok, text, text_len, max_ids, ids, &nn);
    if (rc > 0) {
        frigg_set_error("the prompt has more than %zu tokens: it exceeds the context limit of %zu tokens", max_ids,
                        max_ids);
        return -1;
    }
    if (rc) return -1;
    if (nn == 0 && empty_ok) {
        *n = 0;
        return 0;
    }
    if (nn == 0) {
        free(*ids);
        *ids = NULL;
        frigg_set_error("the prompt encodes to zero tokens");
        return -1;
    }
    *n = (int)nn;
    return 0;
}

static json_t *handle_tokenize(frigg_session *s, const json_t *req, const frigg_request *r) {
    (void)req;
    int32_t *ids = NULL;
    int n = 0;
    char *rendered = NULL;
    size_t rendered_len = 0;
    if (request_ids(s, r, &ids, &n, &rendered, &rendered_len, 0, 1)) return error_obj(r->id, frigg_error());
    json_t *o = json_object();
    if (r->id) json_object_set(o, "id", r->id);
    json_object_set_new(o, "ids", id_array(ids, n));
    json_object_set_new(o, "text", rendered ? json_stringn(rendered, rendered_len)
                                   : r->prompt ? json_stringn(r->prompt, r->prompt_len) : json_string(""));
    json_object_set_new(o, "tokenizer_mode", json_string(frigg_tokenizer_hf_regex(s->tok) ? "hf-regex" : "training"));
    free(ids);
    free(rendered);
    return o;
}

static json_t *handle_detokenize(frigg_session *s, const json_t *req) {
    json_t *id = json_object_get(req, "id");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)req, k, v) {
        if (strcmp(k, "ids") && strcmp(k, "id")) {
            char msg[200];
            snprintf(msg, sizeof msg, "unknown field \"%s\" (--detokenize takes {\"ids\":[...]})", k);
            return error_obj(id, msg);
        }
    }
    json_t *ids = json_object_get(req, "ids");
    if (!json_is_array(ids)) return error_obj(id, "\"ids\" must be an array of token ids");
    size_t n = json_array_size(ids), i;
    int32_t *buf = frigg_xmalloc((n ? n : 1) * sizeof(int32_t));
    json_t *e;
    int V = frigg_tokenizer_vocab_size(s->tok);
    json_array_foreach(ids, i, e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= V) {
            free(buf);
            char msg[160];
            snprintf(msg, sizeof msg, "\"ids\"[%zu] must be an integer token id in [0, %d)", i, V);
            return error_obj(id, msg);
        }
        buf[i] = (int32_t)json_integer_value(e);
    }
    size_t len;
    char *text = frigg_tokenizer_decode(s->tok, buf, n, &len);
    free(buf);
    if (!text) return error_obj(id, frigg_error());
    json_t *o = json_object();
    if (id) json_object_set(o, "id", id);
    json_object_set_new(o, "text", json_stringn(text, len));
    free(text);
    return o;
}

/* A generation request between submit and its end. */
typedef struct {
    frigg_session *s;
    json_t *id;
    int logprobs;
    frigg_session_cb cb;
    void *ctx;
} gen_ctx;

static void on_gen_done(void *vctx, const frigg_sched_result *res) {
    gen_ctx *x = vctx;
    frigg_session *s = x->s;
    json_t *o;
    if (res->error) {
        o = error_obj(x->id, res->error);
    } else {
        const frigg_seqgen_result *g = res->choices[0];
        o = json_object();
        if (x->id) json_object_set(o, "id", x->id);
        json_object_set_new(o, "output_ids", id_array(g->ids, g->n));
        if (s->tok) {
            json_object_set_new(o, "text", json_stringn(g->text, g->text_len));
            json_object_set_new(o, "tokenizer_mode",
                                json_string(frigg_tokenizer_hf_regex(s->tok) ? "hf-regex" : "training"));
            if (g->tool_calls) json_object_set(o, "tool_calls", g->tool_calls);
            if (g->tool_call_error) json_object_set_new(o, "tool_call_error", json_string(g->tool_call_error));
        }
        json_object_set_new(o, "finish_reason", json_string(g->finish_reason));
        json_object_set_new(o, "usage", json_pack("{s:i,s:i}", "prompt_tokens", g->prompt_tokens, "completion_tokens",
                                                  g->n));
        if (x->logprobs) {
            json_t *lp = json_array();
            for (int i = 0; i < g->n; i++) {
                json_t *top = json_array();
                for (int j = 0; j < x->logprobs; j++)
                    json_array_append_new(top, json_pack("{s:i,s:f}", "id", g->top_ids[(size_t)i * x->logprobs + j],
                                                         "logprob", (double)g->top_lps[(size_t)i * x->logprobs + j]));
                json_array_append_new(lp, json_pack("{s:i,s:f,s:o}", "id", g->ids[i], "logprob",
                                                    (double)g->token_logprob[i], "top", top));
            }
            json_object_set_new(o, "logprobs", lp);
        }
        double tok_s = g->decode_ms > 0 ? g->decode_steps / (g->decode_ms / 1e3) : 0;
        json_object_set_new(o, "timing", json_pack("{s:f,s:f,s:f,s:f}", "queue_ms", g->queue_ms, "prefill_ms",
                                                   g->prefill_ms, "decode_ms", g->decode_ms, "decode_tok_s", tok_s));
    }
    x->cb(x->ctx, o);
    json_decref(x->id);
    free(x);
}

static void submit_generate(frigg_session *s, const frigg_request *r, frigg_session_cb cb, void *cbctx) {
    const frigg_config *c = &s->model->cfg;
    int32_t *ids = NULL;
    int n = 0;
    char *rendered = NULL;
    size_t rendered_len = 0;
    /* the schema before the prompt: a bad one is refused as such, and a repeated one comes from the cache */
    int gfail = 0;
    frigg_gref *grammar = frigg_respfmt_grammar(&r->response_format, s->gcache, &gfail);
    if (gfail) {
        cb(cbctx, error_obj(r->id, frigg_error()));
        return;
    }
    /* tokenized only as far as the context: a longer prompt is refused whatever max_tokens is */
    if (request_ids(s, r, &ids, &n, &rendered, &rendered_len, (size_t)s->backend->max_ctx, 0)) {
        cb(cbctx, error_obj(r->id, frigg_error()));
        frigg_gref_release(grammar);
        return;
    }
    free(rendered);
    frigg_sched_req q = {.ids = ids, .n = n, .prefix_len = r->prefix_tokens < 0 ? n : r->prefix_tokens,
                         .n_choices = 1, .on_done = on_gen_done};
    frigg_seqgen_params *gp = &q.gen;
    gp->max_tokens = r->max_tokens_given ? r->max_tokens : s->o.default_max_tokens;
    gp->sampling = r->sampling;
    gp->logprobs = r->logprobs;
    gp->parse_tools = json_array_size(r->tools) > 0;
    if (r->has_stop_ids) {
        memcpy(gp->stop_ids, r->stop_ids, (size_t)r->n_stop_ids * sizeof(int32_t));
        gp->n_stop_ids = r->n_stop_ids;
    } else {
        gp->n_stop_ids = frigg_default_stop_ids(c, gp->parse_tools, gp->stop_ids, FRIGG_SEQGEN_MAX_STOP_IDS);
    }
    for (int i = 0; i < r->n_stop; i++) gp->stop[i] = r->stop[i];
    gp->n_stop = r->n_stop;
    gp->grammar = grammar; /* the seqgen takes its own reference */
    gen_ctx *x = frigg_xcalloc(1, sizeof *x);
    x->s = s;
    x->id = r->id ? json_incref(r->id) : NULL;
    x->logprobs = r->logprobs;
    x->cb = cb;
    x->ctx = cbctx;
    q.ctx = x;
    if (!frigg_sched_submit(s->sched, &q)) {
        cb(cbctx, error_obj(r->id, frigg_error()));
        json_decref(x->id);
        free(x);
    }
    frigg_gref_release(grammar);
    free(ids);
}

void frigg_session_submit(frigg_session *s, const json_t *req, int mode, frigg_session_cb cb, void *ctx) {
    if (mode == 'D') {
        cb(ctx, handle_detokenize(s, req));
        return;
    }
    frigg_request r;
    int vocab = s->model ? s->model->cfg.vocab_size :
                s->tok ? frigg_tokenizer_vocab_size(s->tok) :
                0;
    if (frigg_request_parse(&r, req, vocab)) {
        cb(ctx, error_obj(json_object_get(req, "id"), frigg_error()));
        return;
    }
    if (mode == 'T') cb(ctx, handle_tokenize(s, req, &r));
    else if (mode) cb(ctx, error_obj(r.id, "--tokenize/--detokenize need the tokenizer, which this build lacks"));
    else if (!s->sched) cb(ctx, error_obj(r.id, "this session was opened for the tokenizer only"));
    else submit_generate(s, &r, cb, ctx);
    frigg_request_free(&r);
}

int frigg_session_step(frigg_session *s) {
    if (!s->sched) return 0;
    return frigg_sched_step(s->sched);
}

int frigg_session_pending(frigg_session *s) { return s->sched ? frigg_sched_pending(s->sched) : 0; }

static void keep_resp(void *ctx, json_t *resp) { *(json_t **)ctx = resp; }

json_t *frigg_session_handle(frigg_session *s, const json_t *req, int mode) {
    json_t *resp = NULL;
    frigg_session_submit(s, req, mode, keep_resp, &resp);
    while (!resp && frigg_session_step(s) >= 0) {
    }
    return resp ? resp : error_obj(json_object_get(req, "id"), frigg_error());
}
