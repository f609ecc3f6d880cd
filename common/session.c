/* session.c — request object → response object, over one model, one backend and (when the model
 * directory has one) its tokenizer. */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "generate.h"
#include "model.h"
#include "request.h"
#include "util.h"
#include "chat.h"
#include "stopstr.h"
#include "tokenizer.h"
#include "toolcall.h"

struct frigg_session {
    frigg_session_opts o;
    char *dir;
    frigg_model *model;
    frigg_backend *backend;
    frigg_tokenizer *tok;
};

frigg_session *frigg_session_open(const frigg_session_opts *o) {
    frigg_session *s = frigg_xcalloc(1, sizeof *s);
    s->o = *o;
    s->dir = o->model_dir ? frigg_xstrdup(o->model_dir) : frigg_default_model_dir();
    char *tj = frigg_path_join(s->dir, "tokenizer.json");
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
            frigg_set_error("%s: no tokenizer.json in the model directory (needed by %s)", s->dir,
                            o->tokenizer_only ? "--tokenize/--detokenize" : "--hf-regex");
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
    frigg_backend_opts bo = {.threads = o->threads, .device = o->device, .max_seqs = 1, .max_ctx = 0};
    s->backend = frigg_backend_create(o->backend, s->model, &bo);
    if (!s->backend) {
        frigg_session_close(s);
        return NULL;
    }
    return s;
}

void frigg_session_close(frigg_session *s) {
    if (!s) return;
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
 * *rendered gets the rendered chat text when messages were given. */
static int request_ids(frigg_session *s, const frigg_request *r, int32_t **ids, int *n, char **rendered) {
    *rendered = NULL;
    if (r->input_ids) {
        *ids = frigg_xmalloc((size_t)r->n_input * sizeof(int32_t));
        memcpy(*ids, r->input_ids, (size_t)r->n_input * sizeof(int32_t));
        *n = r->n_input;
        return 0;
    }
    if (!s->tok) {
        frigg_set_error("\"%s\" needs a tokenizer, and %s has no tokenizer.json (send \"input_ids\")",
                        r->prompt ? "prompt" : "messages", s->dir);
        return -1;
    }
    const char *text = r->prompt;
    if (r->messages) {
        /* Normalise as DFM-Mimir's training data was (JSON-string tool arguments → objects, …). */
        json_t *norm = frigg_chat_normalize_messages(r->messages);
        *rendered = frigg_chat_render(norm, r->tools, 1);
        json_decref(norm);
        if (!*rendered) return -1;
        text = *rendered;
    }
    size_t nn = 0;
    if (frigg_tokenizer_encode(s->tok, text, strlen(text), ids, &nn)) return -1;
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
    if (request_ids(s, r, &ids, &n, &rendered)) return error_obj(r->id, frigg_error());
    json_t *o = json_object();
    if (r->id) json_object_set(o, "id", r->id);
    json_object_set_new(o, "ids", id_array(ids, n));
    json_object_set_new(o, "text", json_string(rendered ? rendered : r->prompt ? r->prompt : ""));
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

/* Streams generated ids through the detokenizer and the stop-string matcher; stops generation when a
 * stop string completes. The text kept is exactly what a streaming client would have received. */
typedef struct {
    frigg_detok_stream *ds;
    frigg_stopstr *ss;
    char *text;
    size_t len, cap;
    int stopped;
} text_sink;

static void sink_append(text_sink *t, const char *p, size_t n) {
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->text = realloc(t->text, t->cap);
        if (!t->text) abort();
    }
    memcpy(t->text + t->len, p, n);
    t->len += n;
    t->text[t->len] = 0;
}

static int sink_feed(text_sink *t, const char *piece, size_t n) {
    if (!t->ss) {
        sink_append(t, piece, n);
        return 0;
    }
    char *out = NULL;
    size_t olen = 0;
    int hit = frigg_stopstr_push(t->ss, piece, n, &out, &olen);
    sink_append(t, out ? out : "", olen);
    free(out);
    return hit;
}

static int on_token(void *ctx, int32_t id) {
    text_sink *t = ctx;
    char *piece = NULL;
    size_t n = 0;
    if (frigg_detok_stream_push(t->ds, id, &piece, &n)) return 0;
    int hit = sink_feed(t, piece ? piece : "", n);
    free(piece);
    if (hit) t->stopped = 1;
    return hit;
}

static json_t *handle_generate(frigg_session *s, const frigg_request *r) {
    const frigg_config *c = &s->model->cfg;
    int32_t *ids = NULL;
    int n = 0;
    char *rendered = NULL;
    if (request_ids(s, r, &ids, &n, &rendered)) return error_obj(r->id, frigg_error());
    free(rendered);
    int32_t stop_ids[FRIGG_MAX_STOP_IDS + 2];
    int nstop;
    if (r->has_stop_ids) {
        memcpy(stop_ids, r->stop_ids, (size_t)r->n_stop_ids * sizeof(int32_t));
        nstop = r->n_stop_ids;
    } else {
        nstop = frigg_default_stop_ids(c, json_array_size(r->tools) > 0, stop_ids, FRIGG_MAX_STOP_IDS);
    }
    frigg_gen_params gp = {
        .max_tokens = r->max_tokens_given ? r->max_tokens : s->o.default_max_tokens,
        .sampling = r->sampling,
        .stop_ids = stop_ids,
        .n_stop_ids = nstop,
        .prefix_tokens = r->prefix_tokens,
        .logprobs = r->logprobs,
    };
    text_sink sink = {0};
    if (s->tok) {
        sink.ds = frigg_detok_stream_new(s->tok);
        if (r->n_stop) {
            sink.ss = frigg_stopstr_new((const char *const *)r->stop, r->n_stop);
            if (!sink.ss) {
                frigg_detok_stream_free(sink.ds);
                free(ids);
                return error_obj(r->id, frigg_error());
            }
        }
        gp.on_token = on_token;
        gp.ctx = &sink;
    }
    if (r->n_stop) {
        if (!s->tok) {
            free(ids);
            frigg_detok_stream_free(sink.ds);
            return error_obj(r->id, "\"stop\" strings need a tokenizer.json in the model directory");
        }
    }
    frigg_gen_result g;
    if (frigg_generate(s->backend, 0, ids, n, &gp, &g)) {
        free(ids);
        frigg_detok_stream_free(sink.ds);
        frigg_stopstr_free(sink.ss);
        free(sink.text);
        return error_obj(r->id, frigg_error());
    }
    json_t *o = json_object();
    if (r->id) json_object_set(o, "id", r->id);
    json_object_set_new(o, "output_ids", id_array(g.ids, g.n));
    if (s->tok) {
        char *tail = NULL;
        size_t tl = 0;
        if (!sink.stopped) { /* flush the detokenizer, then release what the stop matcher held back */
            frigg_detok_stream_finish(sink.ds, &tail, &tl);
            if (sink_feed(&sink, tail ? tail : "", tl)) sink.stopped = 1;
            free(tail);
            tail = NULL;
            tl = 0;
            if (sink.ss && !sink.stopped) {
                frigg_stopstr_flush(sink.ss, &tail, &tl);
                sink_append(&sink, tail ? tail : "", tl);
                free(tail);
                if (frigg_stopstr_matched(sink.ss)) sink.stopped = 1;
            }
        }
        if (sink.stopped) g.finish_reason = "stop";
        json_object_set_new(o, "text", json_stringn(sink.text ? sink.text : "", sink.len));
        json_object_set_new(o, "tokenizer_mode", json_string(frigg_tokenizer_hf_regex(s->tok) ? "hf-regex" : "training"));
        if (json_array_size(r->tools) > 0) {
            char *content = NULL;
            json_t *calls = frigg_parse_tool_calls(sink.text ? sink.text : "", &content);
            if (calls) {
                if (json_array_size(calls)) json_object_set_new(o, "tool_calls", calls);
                else json_decref(calls);
                json_object_set_new(o, "text", json_string(content ? content : ""));
                free(content);
            } else {
                json_object_set_new(o, "tool_call_error", json_string(frigg_error()));
            }
        }
        frigg_detok_stream_free(sink.ds);
        frigg_stopstr_free(sink.ss);
        free(sink.text);
    }
    json_object_set_new(o, "finish_reason", json_string(g.finish_reason));
    json_object_set_new(o, "usage", json_pack("{s:i,s:i}", "prompt_tokens", n, "completion_tokens", g.n));
    if (r->logprobs) {
        json_t *lp = json_array();
        for (int i = 0; i < g.n; i++) {
            json_t *top = json_array();
            for (int j = 0; j < r->logprobs; j++)
                json_array_append_new(top, json_pack("{s:i,s:f}", "id", g.top_ids[(size_t)i * r->logprobs + j],
                                                     "logprob", (double)g.top_lps[(size_t)i * r->logprobs + j]));
            json_array_append_new(lp, json_pack("{s:i,s:f,s:o}", "id", g.ids[i], "logprob",
                                                (double)g.token_logprob[i], "top", top));
        }
        json_object_set_new(o, "logprobs", lp);
    }
    double tok_s = g.decode_ms > 0 ? g.decode_steps / (g.decode_ms / 1e3) : 0;
    json_object_set_new(o, "timing", json_pack("{s:f,s:f,s:f}", "prefill_ms", g.prefill_ms, "decode_ms", g.decode_ms,
                                               "decode_tok_s", tok_s));
    frigg_gen_result_free(&g);
    free(ids);
    return o;
}

json_t *frigg_session_handle(frigg_session *s, const json_t *req, int mode) {
    if (mode == 'D') return handle_detokenize(s, req);
    frigg_request r;
    int vocab = s->model ? s->model->cfg.vocab_size :
                s->tok ? frigg_tokenizer_vocab_size(s->tok) :
                0;
    if (frigg_request_parse(&r, req, vocab)) return error_obj(json_object_get(req, "id"), frigg_error());
    json_t *resp;
    if (mode == 'T') resp = handle_tokenize(s, req, &r);
    else
        if (mode) resp = error_obj(r.id, "--tokenize/--detokenize need the tokenizer, which this build lacks");
        else resp = handle_generate(s, &r);
    frigg_request_free(&r);
    return resp;
}
