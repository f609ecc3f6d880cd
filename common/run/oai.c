/* oai.c — see oai.h. */
#include "oai.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "chat/chat.h"
#include "generate.h"
#include "request.h"
#include "base/strbuf.h"
#include "chat/toolcall.h"
#include "base/util.h"

#define TOOL_MARK "<|tool_call>"

void frigg_oai_error_set(frigg_oai_error *e, int status, const char *type, const char *param, const char *code,
                         const char *fmt, ...) {
    e->status = status;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

json_t *frigg_oai_error_json(const frigg_oai_error *e) {
    json_t *in = json_object();
    json_object_set_new(in, "message", json_string(e->message));
    json_object_set_new(in, "type", json_string(e->type ? e->type : "invalid_request_error"));
    json_object_set_new(in, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(in, "code", e->code[0] ? json_string(e->code) : json_null());
    return json_pack("{s:o}", "error", in);
}

static int bad(frigg_oai_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(frigg_oai_error *e, const char *param, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    frigg_oai_error_set(e, 400, "invalid_request_error", param, NULL, "%s", msg);
    return -1;
}

/* A string that names something (the model, a role, a part's type, a tool, an id, tool_choice) or is matched as a C
 * string (a stop string): a NUL byte (\u0000) makes no sense there, and read as a C string the value would be cut at
 * it. Refused with a 400 naming the field. Anything else, strings without NUL bytes included: 0. */
static int no_nul(const json_t *v, const char *param, frigg_oai_error *e) {
    if (!json_is_string(v) || !memchr(json_string_value(v), 0, json_string_length(v))) return 0;
    return bad(e, param, "'%s' must not hold a NUL byte (\\u0000)", param);
}

char *frigg_oai_utf8_clean(const char *s, size_t n, size_t *out_len) {
    char *o = frigg_xmalloc(n * 3 + 1);
    size_t k = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t j = 1; ok && j < len; j++) ok = (u[i + j] & 0xc0) == 0x80;
        if (ok && len > 1) { /* no overlong forms, no surrogates, nothing past U+10FFFF */
            unsigned cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
            for (size_t j = 1; j < len; j++) cp = cp << 6 | (u[i + j] & 0x3f);
            ok = (len == 2 && cp >= 0x80) || (len == 3 && cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff)) ||
                 (len == 4 && cp >= 0x10000 && cp <= 0x10ffff);
        }
        if (ok) {
            memcpy(o + k, s + i, len);
            k += len;
            i += len;
        } else {
            memcpy(o + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
    }
    o[k] = 0;
    if (out_len) *out_len = k;
    return o;
}

/* ---------------------------------------------------------------- parsing */

static const char *const chat_fields[] = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "n", "stop",
    "repetition_penalty", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "stream",
    "stream_options", "tools", "tool_choice", "parallel_tool_calls", "prefix_tokens", "user", "metadata", "store",
    "service_tier", "prompt_cache_key", "prompt_cache_retention", "safety_identifier", "verbosity", "response_format",
    NULL};
static const char *const completion_fields[] = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "n", "stop", "repetition_penalty",
    "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "stream", "stream_options", "prefix_tokens",
    "user", "echo", "best_of", "suffix", "metadata", "store", "service_tier", "response_format", NULL};
/* Fields OpenAI documents that would change the output and that frigg does not implement: refused by name (null is
 * absent, as for every optional field). */
static const char *const unsupported[] = {"functions", "function_call", "audio", "modalities",
                                          "prediction", "reasoning_effort", "web_search_options", "min_p",
                                          "guided_json", "guided_regex", "guided_choice", "min_tokens",
                                          "ignore_eos", NULL};

static int in_list(const char *const *l, const char *k) {
    for (; *l; l++)
        if (!strcmp(*l, k)) return 1;
    return 0;
}

/* A number field: absent or null leaves *out; otherwise it must lie in [lo, hi]. */
static int get_num(const json_t *o, const char *k, double lo, double hi, double *out, frigg_oai_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return bad(e, k, "'%s' must be a number", k);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) return bad(e, k, "'%s' = %g is out of range: it must be in [%g, %g]", k, x, lo, hi);
    *out = x;
    return 0;
}
/* A number in (lo, hi]: one rule with one message for a field whose low end is excluded (top_p 0 keeps nothing). */
static int get_num_above(const json_t *o, const char *k, double lo, double hi, double *out, frigg_oai_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return bad(e, k, "'%s' must be a number", k);
    double x = json_number_value(v);
    if (!(x > lo && x <= hi)) return bad(e, k, "'%s' = %g is out of range: it must be in (%g, %g]", k, x, lo, hi);
    *out = x;
    return 0;
}
static int get_int(const json_t *o, const char *k, long long lo, long long hi, long long *out, int *given,
                   frigg_oai_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return bad(e, k, "'%s' must be an integer", k);
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return bad(e, k, "'%s' = %lld is out of range: it must be in [%lld, %lld]", k, x, lo, hi);
    *out = x;
    if (given) *given = 1;
    return 0;
}
static int get_bool(const json_t *o, const char *k, int *out, frigg_oai_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return bad(e, k, "'%s' must be a boolean", k);
    *out = json_is_true(v);
    return 0;
}

/* A message's content: a string, or an array of text parts joined (OpenAI's content parts); null where
 * allowed. Returns a new string reference or json_null(). */
static json_t *message_content(const json_t *c, int i, int null_ok, frigg_oai_error *e) {
    char p[48];
    snprintf(p, sizeof p, "messages[%d].content", i);
    if (!c || json_is_null(c)) {
        if (null_ok) return json_null();
        bad(e, p, "'%s' is required for this role", p);
        return NULL;
    }
    if (json_is_string(c)) return json_incref((json_t *)c);
    if (!json_is_array(c)) {
        bad(e, p, "'%s' must be a string or an array of text parts", p);
        return NULL;
    }
    frigg_strbuf sb = FRIGG_STRBUF_INIT;
    size_t j;
    json_t *part;
    json_array_foreach(c, j, part) {
        char pp[96];
        snprintf(pp, sizeof pp, "%s[%zu]", p, j);
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!json_is_object(part) || !type) {
            frigg_sb_free(&sb);
            bad(e, pp, "'%s' must be an object with a 'type'", pp);
            return NULL;
        }
        char tp[112];
        snprintf(tp, sizeof tp, "%s.type", pp);
        if (no_nul(json_object_get(part, "type"), tp, e)) {
            frigg_sb_free(&sb);
            return NULL;
        }
        if (strcmp(type, "text")) {
            frigg_sb_free(&sb);
            bad(e, pp, "'%s.type' is '%s': only 'text' content parts are supported (this model reads text)", pp, type);
            return NULL;
        }
        const json_t *t = json_object_get(part, "text");
        if (!json_is_string(t)) {
            frigg_sb_free(&sb);
            bad(e, pp, "'%s.text' must be a string", pp);
            return NULL;
        }
        frigg_sb_put(&sb, json_string_value(t), json_string_length(t));
    }
    size_t len = sb.len;
    char *joined = frigg_sb_take(&sb);
    json_t *s = json_stringn(joined, len);
    free(joined);
    return s;
}

/* The strings of message p (msg) that name something: its role, name and tool_call_id, and its tool calls' id, type
 * and function name. (Their text — content, arguments — may hold NUL bytes.) */
static int names_without_nul(const json_t *msg, const char *p, frigg_oai_error *e) {
    static const char *const keys[] = {"role", "name", "tool_call_id"};
    char q[112];
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        snprintf(q, sizeof q, "%s.%s", p, keys[k]);
        if (no_nul(json_object_get(msg, keys[k]), q, e)) return -1;
    }
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, c) {
        snprintf(q, sizeof q, "%s.tool_calls[%zu].id", p, i);
        if (no_nul(json_object_get(c, "id"), q, e)) return -1;
        snprintf(q, sizeof q, "%s.tool_calls[%zu].type", p, i);
        if (no_nul(json_object_get(c, "type"), q, e)) return -1;
        snprintf(q, sizeof q, "%s.tool_calls[%zu].function.name", p, i);
        if (no_nul(json_object_get(json_object_get(c, "function"), "name"), q, e)) return -1;
    }
    return 0;
}

/* The messages as the chat template takes them: roles checked, developer as system, content parts joined. */
static json_t *check_messages(const json_t *m, frigg_oai_error *e) {
    if (!json_is_array(m) || json_array_size(m) == 0) {
        bad(e, "messages", "'messages' must be a non-empty array");
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        char p[48];
        snprintf(p, sizeof p, "messages[%zu]", i);
        const char *role = json_string_value(json_object_get(msg, "role"));
        if (!json_is_object(msg) || !role) {
            json_decref(out);
            bad(e, p, "'%s' must be an object with a 'role'", p);
            return NULL;
        }
        if (names_without_nul(msg, p, e)) {
            json_decref(out);
            return NULL;
        }
        int is_asst = !strcmp(role, "assistant"), is_tool = !strcmp(role, "tool");
        if (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") && !is_asst && !is_tool) {
            json_decref(out);
            bad(e, p, "'%s.role' is '%s': it must be system, developer, user, assistant or tool", p, role);
            return NULL;
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)msg, k, v) {
            int ok = !strcmp(k, "role") || !strcmp(k, "content") || !strcmp(k, "name") ||
                     (is_asst && (!strcmp(k, "tool_calls") || !strcmp(k, "refusal"))) || (is_tool && !strcmp(k, "tool_call_id"));
            if (!ok) {
                json_decref(out);
                bad(e, p, "'%s' has a field '%s' that a %s message does not take", p, k, role);
                return NULL;
            }
        }
        json_t *tc = json_object_get(msg, "tool_calls");
        json_t *content = message_content(json_object_get(msg, "content"), (int)i, is_asst && tc, e);
        if (!content) {
            json_decref(out);
            return NULL;
        }
        json_t *o = json_object();
        json_object_set_new(o, "role", json_string(!strcmp(role, "developer") ? "system" : role));
        json_object_set_new(o, "content", content);
        if (tc && !json_is_null(tc)) {
            if (!json_is_array(tc)) {
                json_decref(o);
                json_decref(out);
                bad(e, p, "'%s.tool_calls' must be an array", p);
                return NULL;
            }
            json_object_set(o, "tool_calls", tc);
        }
        json_t *name = json_object_get(msg, "name"), *tcid = json_object_get(msg, "tool_call_id");
        if (name && json_is_string(name)) json_object_set(o, "name", name);
        if (tcid && json_is_string(tcid)) json_object_set(o, "tool_call_id", tcid);
        json_array_append_new(out, o);
    }
    return out;
}

static int check_tools(const json_t *tools, frigg_oai_error *e) {
    if (!json_is_array(tools)) return bad(e, "tools", "'tools' must be an array");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        char p[40];
        snprintf(p, sizeof p, "tools[%zu]", i);
        const char *type = json_string_value(json_object_get(t, "type"));
        json_t *f = json_object_get(t, "function");
        char q[72];
        snprintf(q, sizeof q, "%s.type", p);
        if (no_nul(json_object_get(t, "type"), q, e)) return -1;
        snprintf(q, sizeof q, "%s.function.name", p);
        if (no_nul(json_object_get(f, "name"), q, e)) return -1;
        if (!json_is_object(t) || !type || strcmp(type, "function"))
            return bad(e, p, "'%s' must be {\"type\": \"function\", \"function\": {...}}", p);
        if (!json_is_object(f) || !json_is_string(json_object_get(f, "name")) || !json_string_length(json_object_get(f, "name")))
            return bad(e, p, "'%s.function.name' must be a non-empty string", p);
        json_t *params = json_object_get(f, "parameters");
        if (params && !json_is_null(params) && !json_is_object(params))
            return bad(e, p, "'%s.function.parameters' must be a JSON Schema object", p);
        /* A function takes what OpenAI's FunctionDefinition has; anything else is refused, as OpenAI refuses it,
         * rather than dropped without the client knowing. */
        const char *fk;
        json_t *fv;
        json_object_foreach(f, fk, fv) {
            if (!strcmp(fk, "name") || !strcmp(fk, "description") || !strcmp(fk, "parameters") || !strcmp(fk, "strict"))
                continue;
            char kq[128];
            snprintf(kq, sizeof kq, "%s.function.%.24s", p, fk);
            return bad(e, kq, "'%s.function' has an unknown field '%s' (a function takes name, description, parameters "
                             "and strict)", p, fk);
        }
        json_t *strict = json_object_get(f, "strict");
        snprintf(q, sizeof q, "%s.function.strict", p);
        if (strict && !json_is_null(strict) && !json_is_boolean(strict)) return bad(e, q, "'%s' must be a boolean", q);
        /* a tool is {"type", "function"}; anything beside them is refused as inside a function */
        json_object_foreach(t, fk, fv) {
            if (!strcmp(fk, "type") || !strcmp(fk, "function")) continue;
            char kq[128];
            snprintf(kq, sizeof kq, "%s.%.24s", p, fk);
            return bad(e, kq, "'%s' has an unknown field '%s' (a tool takes type and function)", p, fk);
        }
    }
    return 0;
}

/* The index of the first tool whose function says strict: true, or -1. */
static int first_strict(const json_t *tools) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) if (json_is_true(json_object_get(json_object_get(t, "function"), "strict"))) return (int)i;
    return -1;
}

/* strict: true promises arguments that follow the tool's schema exactly. frigg keeps that promise where the call
 * is decoded under the schema's grammar, on a server with a grammar cache (tool_grammar): a call that tool_choice
 * forces ('required' or a named function), or under 'auto' a call the model chooses to make, whose grammar starts
 * at the <|tool_call> it generates. Without a grammar cache strict: true is refused rather than promised and
 * broken. */
static int strict_tools(const frigg_oai_req *r, const json_t *tools, frigg_oai_error *e) {
    int i = first_strict(tools);
    if (i < 0 || r->gen.grammar) return 0; /* none, or forced, or auto under the lazy grammar (tool_grammar) */
    char q[72];
    snprintf(q, sizeof q, "tools[%d].function.strict", i);
    return bad(e, q, "'%s': strict tool arguments are kept by decoding the call under the tool's schema, which needs "
                     "the model's tokenizer (a grammar cache) on this server (send strict: false)", q);
}

static int tool_named(const json_t *tools, const char *name) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (n && !strcmp(n, name)) return 1;
    }
    return 0;
}

static int encode(const frigg_oai_env *env, const char *text, size_t len, frigg_oai_prompt *p, const char *param,
                  frigg_oai_error *e) {
    size_t n = 0;
    if (frigg_tokenizer_encode(env->tok, text, len, &p->ids, &n)) return bad(e, param, "'%s': %s", param, frigg_error());
    if (n == 0) return bad(e, param, "'%s' encodes to zero tokens", param);
    p->n = (int)n;
    return 0;
}

static int id_prompt(const frigg_oai_env *env, const json_t *a, frigg_oai_prompt *p, const char *param,
                     frigg_oai_error *e) {
    size_t n = json_array_size(a), i;
    if (n == 0) return bad(e, param, "'%s' is an empty list of token ids", param);
    p->ids = frigg_xmalloc(n * sizeof(int32_t));
    p->n = (int)n;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= env->cfg->vocab_size)
            return bad(e, param, "'%s'[%zu] must be a token id in [0, %d)", param, i, env->cfg->vocab_size);
        p->ids[i] = (int32_t)json_integer_value(v);
    }
    return 0;
}

static int completion_prompts(frigg_oai_req *r, const frigg_oai_env *env, const json_t *pr, frigg_oai_error *e) {
    if (!pr) return bad(e, "prompt", "'prompt' is required");
    int need_tok = json_is_string(pr) || (json_is_array(pr) && json_is_string(json_array_get(pr, 0)));
    if (need_tok && !env->tok) return bad(e, "prompt", "this model has no tokenizer: send 'prompt' as token ids");
    if (json_is_string(pr)) {
        r->prompts = frigg_xcalloc(1, sizeof *r->prompts);
        r->n_prompts = 1;
        return encode(env, json_string_value(pr), json_string_length(pr), &r->prompts[0], "prompt", e);
    }
    if (!json_is_array(pr) || json_array_size(pr) == 0)
        return bad(e, "prompt", "'prompt' must be a string, an array of strings, an array of token ids or an array of "
                                "arrays of token ids");
    json_t *first = json_array_get(pr, 0);
    if (json_is_integer(first)) {
        r->prompts = frigg_xcalloc(1, sizeof *r->prompts);
        r->n_prompts = 1;
        return id_prompt(env, pr, &r->prompts[0], "prompt", e);
    }
    size_t n = json_array_size(pr), i;
    if (n > FRIGG_OAI_MAX_PROMPTS) return bad(e, "prompt", "'prompt' holds %zu prompts (at most %d)", n, FRIGG_OAI_MAX_PROMPTS);
    r->prompts = frigg_xcalloc(n, sizeof *r->prompts);
    r->n_prompts = (int)n;
    json_t *v;
    json_array_foreach(pr, i, v) {
        char p[32];
        snprintf(p, sizeof p, "prompt[%zu]", i);
        if (json_is_string(v) && json_is_string(first)) {
            if (encode(env, json_string_value(v), json_string_length(v), &r->prompts[i], p, e)) return -1;
        } else if (json_is_array(v) && json_is_array(first)) {
            if (id_prompt(env, v, &r->prompts[i], p, e)) return -1;
        } else {
            return bad(e, p, "'%s' must be of the same kind as prompt[0] (a string, or an array of token ids)", p);
        }
    }
    return 0;
}

static int parse_stop(frigg_oai_req *r, const json_t *v, frigg_oai_error *e) {
    if (!v || json_is_null(v)) return 0;
    if (json_is_string(v)) {
        if (!json_string_length(v)) return bad(e, "stop", "'stop' must not be an empty string");
        if (no_nul(v, "stop", e)) return -1; /* stop strings are matched as C strings */
        r->gen.stop[0] = frigg_xstrdup(json_string_value(v));
        r->gen.n_stop = 1;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) > FRIGG_SEQGEN_MAX_STOPS)
        return bad(e, "stop", "'stop' must be a string or an array of at most %d strings", FRIGG_SEQGEN_MAX_STOPS);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s) {
        if (!json_is_string(s) || !json_string_length(s))
            return bad(e, "stop", "'stop'[%zu] must be a non-empty string", i);
        char q[32];
        snprintf(q, sizeof q, "stop[%zu]", i);
        if (no_nul(s, q, e)) return -1;
        r->gen.stop[r->gen.n_stop++] = frigg_xstrdup(json_string_value(s));
    }
    return 0;
}

/* frequency_penalty, presence_penalty (OpenAI's definitions, sampler.h: counted over the response) and
 * logit_bias ({"token id": bias}, at most FRIGG_MAX_LOGIT_BIAS entries) into the sampler. */
static int set_penalties(frigg_oai_req *r, double fp, double pp, const json_t *lb, int vocab, frigg_oai_error *e) {
    frigg_sampler_params *sp = &r->gen.sampling;
    sp->frequency_penalty = (float)fp;
    sp->presence_penalty = (float)pp;
    /* frigg-run's parser: one set of rules (decimal ids without sign or leading zero, so no two keys name one
     * id; the range and the cap of sampler.h) */
    if (frigg_parse_logit_bias(lb, vocab, sp)) return bad(e, "logit_bias", "%s", frigg_error());
    return 0;
}

/* Sampling fields that both endpoints share. */
static int parse_sampling(frigg_oai_req *r, const json_t *o, const frigg_oai_env *env, frigg_oai_error *e) {
    frigg_sampler_params *sp = &r->gen.sampling;
    double temp = 1.0, top_p = 1.0, rep = 1.0, fp = 0, pp = 0; /* OpenAI's defaults */
    long long top_k = 0, seed = 0;
    if (get_num(o, "temperature", 0, 2, &temp, e) || get_num_above(o, "top_p", 0, 1, &top_p, e) ||
        get_int(o, "top_k", -1, 1 << 20, &top_k, NULL, e) || get_num_above(o, "repetition_penalty", 0, 10, &rep, e) ||
        get_num(o, "frequency_penalty", -2, 2, &fp, e) || get_num(o, "presence_penalty", -2, 2, &pp, e) ||
        get_int(o, "seed", INT64_MIN, INT64_MAX, &seed, &r->seed_given, e))
        return -1;
    sp->temperature = (float)temp;
    sp->top_p = (float)top_p;
    sp->top_k = top_k < 0 ? 0 : (int)top_k;
    sp->repetition_penalty = (float)rep;
    if (r->seed_given) {
        sp->seed = (uint64_t)seed;
    } else { /* OpenAI: without a seed every request samples anew */
        uint64_t s = 0;
        if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) s = (uint64_t)(frigg_now_ms() * 1e3);
        sp->seed = s;
    }
    if (set_penalties(r, fp, pp, json_object_get(o, "logit_bias"), env->cfg->vocab_size, e)) return -1;
    return 0;
}

/* tool_choice: "auto" (default), "none", "required", or {"type":"function","function":{"name":N}}. Sets
 * r->tools and r->forced; *render_tools whether the tools go into the prompt. */
static int parse_tool_choice(frigg_oai_req *r, const json_t *o, const json_t *tools, int *render_tools,
                             frigg_oai_error *e) {
    json_t *tc = json_object_get(o, "tool_choice");
    int have = json_array_size(tools) > 0;
    *render_tools = have;
    r->tools = have;
    if (!tc || json_is_null(tc)) return 0;
    if (no_nul(tc, "tool_choice", e) || no_nul(json_object_get(tc, "type"), "tool_choice.type", e) ||
        no_nul(json_object_get(json_object_get(tc, "function"), "name"), "tool_choice.function.name", e))
        return -1;
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (!strcmp(v, "auto")) return 0;
        if (!strcmp(v, "none")) { /* the model is not told of the tools, and nothing is parsed as a call */
            *render_tools = 0;
            r->tools = 0;
            return 0;
        }
        if (!strcmp(v, "required")) {
            if (!have) return bad(e, "tool_choice", "'tool_choice' is 'required' but no 'tools' were given");
            r->forced = frigg_xstrdup(TOOL_MARK "call:");
            return 0;
        }
        return bad(e, "tool_choice", "'tool_choice' is '%s': it must be 'none', 'auto', 'required' or a function", v);
    }
    const char *type = json_string_value(json_object_get(tc, "type"));
    const char *name = json_string_value(json_object_get(json_object_get(tc, "function"), "name"));
    if (!json_is_object(tc) || !type || strcmp(type, "function") || !name)
        return bad(e, "tool_choice", "'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    if (!have || !tool_named(tools, name))
        return bad(e, "tool_choice", "'tool_choice' names the function '%s', which is not in 'tools'", name);
    size_t n = strlen(TOOL_MARK "call:") + strlen(name) + 2;
    r->forced = frigg_xmalloc(n);
    snprintf(r->forced, n, TOOL_MARK "call:%s{", name);
    return 0;
}

frigg_gcache *frigg_oai_gcache_new(const frigg_tokenizer *tok, const frigg_config *cfg) {
    if (!tok) return NULL;
    int32_t ends[FRIGG_SEQGEN_MAX_STOP_IDS];
    int n = frigg_default_stop_ids(cfg, 0, ends, FRIGG_SEQGEN_MAX_STOP_IDS);
    return frigg_gcache_new(tok, cfg->vocab_size, ends, n);
}

/* response_format (respfmt.h): text, json_object, json_schema, compiled through the server's cache into
 * r->gen.grammar. A forced tool call has its own grammar: the two together are refused. */
static int response_format(frigg_oai_req *r, const json_t *o, const frigg_oai_env *env, frigg_oai_error *e) {
    frigg_respfmt f;
    char param[64];
    if (frigg_respfmt_parse(json_object_get(o, "response_format"), &f, param)) return bad(e, param, "%s", frigg_error());
    if (f.kind && r->forced) { /* before gen.grammar is touched: it may hold the tool call's */
        frigg_respfmt_free(&f);
        return bad(e, "response_format", "'response_format' %s cannot be combined with a forced tool call "
                   "('tool_choice' required or a function): the call's arguments follow the tool's parameters",
                   f.kind == FRIGG_GK_JSON_OBJECT ? "json_object" : "json_schema");
    }
    if (f.kind && r->gen.lazy_grammar) {
        frigg_respfmt_free(&f);
        return bad(e, "response_format", "'response_format' %s cannot be combined with strict tools under 'tool_choice' "
                   "auto: the answer is text or tool calls (a call the model makes is decoded under its tool's schema), not one "
                   "JSON document",
                   f.kind == FRIGG_GK_JSON_OBJECT ? "json_object" : "json_schema");
    }
    int failed = 0;
    if (!f.kind) return 0;
    r->gen.grammar = frigg_respfmt_grammar(&f, env->gcache, &failed);
    frigg_respfmt_free(&f);
    return failed ? bad(e, "response_format", "%s", frigg_error()) : 0;
}

/* A forced tool call (r->forced) under a grammar where the server has a grammar cache: the call's arguments decoded
 * under the tool's parameters schema in the chat template's syntax (frigg_grammar_mimir_calls), then <tool_call|>,
 * so the answer is whole calls. tool_choice "required": any of the tools, its name first, and with
 * parallel_tool_calls (the default) more calls may follow, back to back as the chat template writes them; a named
 * function: the forced start ends with the name, the grammar begins at its '{', and the answer is that one call (as
 * OpenAI and vLLM answer a named tool_choice). A parameters schema the compiler refuses is a 400 naming the tool. */
static int tool_grammar(frigg_oai_req *r, const json_t *o, const json_t *tools, const frigg_oai_env *env,
                        frigg_oai_error *e) {
    /* tool_choice auto with a strict tool: a lazy grammar, set off by a generated <|tool_call> */
    int32_t open = -1;
    int lazy = !r->forced && r->tools && env->gcache && env->tok && first_strict(tools) >= 0 &&
               (open = frigg_tokenizer_token_to_id(env->tok, TOOL_MARK)) >= 0;
    if ((!r->forced && !lazy) || !env->gcache) return 0;
    const json_t *tc = json_object_get(o, "tool_choice");
    const char *only = json_is_object(tc) ? json_string_value(json_object_get(json_object_get(tc, "function"), "name"))
                                          : NULL;
    json_t *pairs = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!name || (only && strcmp(name, only))) continue;
        json_t *params = json_object_get(fn, "parameters");
        char *schema = params && !json_is_null(params) ? json_dumps(params, JSON_COMPACT | JSON_ENCODE_ANY)
                                                        : frigg_xstrdup("{\"type\":\"object\"}");
        json_array_append_new(pairs, json_pack("[s,s]", only ? "" : name, schema ? schema : "{}"));
        free(schema);
    }
    char *text = json_dumps(pairs, JSON_COMPACT);
    json_decref(pairs);
    frigg_gkind kind = lazy ? (r->parallel_tool_calls ? FRIGG_GK_TOOLCALLS_LAZY : FRIGG_GK_TOOLCALL_LAZY)
                            : !only && r->parallel_tool_calls ? FRIGG_GK_TOOLCALLS : FRIGG_GK_TOOLCALL;
    r->gen.grammar = frigg_gcache_get(env->gcache, kind, text, strlen(text));
    if (lazy && r->gen.grammar) {
        r->gen.lazy_grammar = 1;
        r->gen.grammar_trigger = open;
    }
    free(text);
    if (!r->gen.grammar) return bad(e, "tools", "a tool's 'parameters' cannot constrain its call: %s", frigg_error());
    if (only) { /* the grammar writes the '{' */
        size_t n = strlen(r->forced);
        if (n && r->forced[n - 1] == '{') r->forced[n - 1] = 0;
    }
    return 0;
}

/* Chat fields that change nothing here, checked as OpenAI types them (a wrong type is still a 400): prompt_cache_key,
 * prompt_cache_retention (frigg keeps no cache between requests: a PrefixLM re-prefills every turn),
 * safety_identifier (an end user's id, as user), verbosity (a hint frigg does not give the model). */
static int noop_fields(const json_t *o, frigg_oai_error *e) {
    static const struct { const char *key, *values[4]; } f[] = {
        {"prompt_cache_key", {NULL}}, {"safety_identifier", {NULL}},
        {"prompt_cache_retention", {"in_memory", "24h", NULL}}, {"verbosity", {"low", "medium", "high", NULL}}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const json_t *v = json_object_get(o, f[i].key);
        if (!v || json_is_null(v)) continue;
        if (!json_is_string(v)) return bad(e, f[i].key, "'%s' must be a string", f[i].key);
        if (!f[i].values[0]) continue;
        if (no_nul(v, f[i].key, e)) return -1; /* compared as a C string below */
        int ok = 0;
        for (int j = 0; f[i].values[j]; j++) ok |= !strcmp(json_string_value(v), f[i].values[j]);
        if (!ok)
            return bad(e, f[i].key, "'%s' must be one of %s, %s%s%s", f[i].key, f[i].values[0], f[i].values[1],
                       f[i].values[2] ? ", " : "", f[i].values[2] ? f[i].values[2] : "");
    }
    return 0;
}

char *frigg_oai_chat_prompt(const json_t *messages, const json_t *tools, int add_generation_prompt, size_t *len,
                            frigg_oai_error *e) {
    *len = 0;
    if (tools && json_is_null(tools)) tools = NULL;
    if (tools && check_tools(tools, e)) return NULL;
    json_t *msgs = check_messages(messages, e);
    if (!msgs) return NULL;
    json_t *norm = frigg_chat_normalize_messages(msgs);
    json_decref(msgs);
    char *text = frigg_chat_render_n(norm, tools, add_generation_prompt, len);
    json_decref(norm);
    if (!text) bad(e, "messages", "the messages cannot be rendered with the chat template: %s", frigg_error());
    return text;
}

int frigg_oai_parse(frigg_oai_req *r, frigg_oai_kind kind, const char *body, size_t len, const frigg_oai_env *env,
                    frigg_oai_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->n = 1;
    r->parallel_tool_calls = 1;
    json_error_t je;
    /* JSON_ALLOW_NUL: "\u0000" is valid JSON; text is read with its length, names refuse it (no_nul) */
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!o && json_error_code(&je) == json_error_null_byte_in_key)
        return bad(e, NULL, "an object key in the body holds a NUL byte (\\u0000): no field name or logit_bias token "
                            "id has one, and frigg-serve cannot read such a key (at byte %d)", je.position);
    if (!o) return bad(e, NULL, "the body is not valid JSON: %s (at byte %d)", je.text, je.position);
    int rc = -1;
    char *rendered = NULL;
    if (!json_is_object(o)) {
        bad(e, NULL, "the body must be a JSON object");
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (in_list(unsupported, k)) {
            if (json_is_null(v)) continue; /* null is absent, as OpenAI takes it */
            bad(e, k, "'%s' is not supported by frigg-serve (it would change the output, and frigg does not implement "
                      "it)", k);
            goto out;
        }
        if (!in_list(kind == FRIGG_OAI_CHAT ? chat_fields : completion_fields, k)) {
            bad(e, k, "Unrecognized request argument supplied: %s", k);
            goto out;
        }
    }
    const json_t *model = json_object_get(o, "model");
    if (!json_is_string(model)) {
        bad(e, "model", "'model' is required and must be a string");
        goto out;
    }
    if (no_nul(model, "model", e)) goto out;
    if (strcmp(json_string_value(model), env->model_name)) {
        frigg_oai_error_set(e, 404, "invalid_request_error", "model", "model_not_found",
                            "The model '%s' does not exist (this server serves '%s')", json_string_value(model),
                            env->model_name);
        goto out;
    }
    long long n = 1, max_tokens = -1, mct = -1, prefix = -1, top_lp = 0;
    int have_prefix = 0, mt_given = 0, mct_given = 0;
    if (get_int(o, "n", 1, FRIGG_OAI_MAX_N, &n, NULL, e) || get_int(o, "max_tokens", 1, 1 << 30, &max_tokens, &mt_given, e) ||
        get_int(o, "prefix_tokens", 0, 1 << 30, &prefix, &have_prefix, e) || get_bool(o, "stream", &r->stream, e) ||
        parse_sampling(r, o, env, e) || parse_stop(r, json_object_get(o, "stop"), e))
        goto out;
    r->n = (int)n;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!r->stream) {
            bad(e, "stream_options", "'stream_options' is only allowed when 'stream' is true");
            goto out;
        }
        if (!json_is_object(so)) {
            bad(e, "stream_options", "'stream_options' must be an object");
            goto out;
        }
        json_object_foreach(so, k, v) if (strcmp(k, "include_usage") && strcmp(k, "include_obfuscation")) {
            bad(e, "stream_options", "'stream_options' has an unknown field '%s' (it takes include_usage and "
                                     "include_obfuscation)", k);
            goto out;
        }
        /* include_obfuscation: OpenAI pads chunks against a side channel of their sizes; accepted, nothing padded */
        int obf = 0;
        if (get_bool(so, "include_usage", &r->include_usage, e) || get_bool(so, "include_obfuscation", &obf, e)) goto out;
    }
    const json_t *tools = NULL;
    if (kind == FRIGG_OAI_CHAT) {
        if (get_int(o, "max_completion_tokens", 1, 1 << 30, &mct, &mct_given, e) || get_bool(o, "logprobs", &r->logprobs, e) ||
            get_int(o, "top_logprobs", 0, FRIGG_OAI_MAX_TOP_LOGPROBS, &top_lp, NULL, e) ||
            get_bool(o, "parallel_tool_calls", &r->parallel_tool_calls, e) || noop_fields(o, e))
            goto out;
        if (mt_given && mct_given && mct != max_tokens) {
            bad(e, "max_completion_tokens", "'max_tokens' (%lld) and 'max_completion_tokens' (%lld) disagree", max_tokens, mct);
            goto out;
        }
        if (mct_given) {
            max_tokens = mct;
            mt_given = 1;
        }
        if (top_lp && !r->logprobs) {
            bad(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
            goto out;
        }
        r->top_logprobs = (int)top_lp;
        tools = json_object_get(o, "tools");
        if (tools && json_is_null(tools)) tools = NULL;
        if (tools && check_tools(tools, e)) goto out;
        int render_tools = 0;
        if (parse_tool_choice(r, o, tools, &render_tools, e) || tool_grammar(r, o, tools, env, e) ||
            (tools && strict_tools(r, tools, e)))
            goto out;
        if (!env->tok) {
            bad(e, "messages", "this model has no tokenizer: use /v1/completions with token ids");
            goto out;
        }
        size_t rlen = 0; /* the rendered text's length: message text may hold NUL bytes */
        rendered = frigg_oai_chat_prompt(json_object_get(o, "messages"), render_tools ? tools : NULL, 1, &rlen, e);
        if (!rendered) goto out;
        r->prompts = frigg_xcalloc(1, sizeof *r->prompts);
        r->n_prompts = 1;
        if (encode(env, rendered, rlen, &r->prompts[0], "messages", e)) goto out;
        if (r->forced) {
            /* The answer starts with the forced text: its tokens go after the prompt's, prefilled with it, and are
             * the answer's first tokens (usage counts them as completion tokens, max_tokens bounds them). Encoded
             * apart from the prompt: it starts with the added token <|tool_call>, so that is where the text's
             * tokens split anyway. Constrained decoding would generate them instead, and forced_tokens be 0. */
            frigg_oai_prompt fp = {0};
            if (encode(env, r->forced, strlen(r->forced), &fp, "tool_choice", e)) goto out;
            frigg_oai_prompt *p0 = &r->prompts[0];
            p0->ids = frigg_xrealloc(p0->ids, sizeof(int32_t) * (size_t)(p0->n + fp.n));
            memcpy(p0->ids + p0->n, fp.ids, sizeof(int32_t) * (size_t)fp.n);
            p0->n += fp.n;
            r->forced_tokens = fp.n;
            free(fp.ids);
        }
    } else {
        long long lp = -1, best_of = -1;
        int echo = 0;
        if (get_int(o, "logprobs", 0, FRIGG_OAI_MAX_TOP_LOGPROBS, &lp, &r->logprobs, e) || get_bool(o, "echo", &echo, e) ||
            get_int(o, "best_of", 1, FRIGG_OAI_MAX_N, &best_of, NULL, e))
            goto out;
        if (echo) {
            bad(e, "echo", "'echo': true is not supported by frigg-serve");
            goto out;
        }
        if (best_of >= 0 && best_of != r->n) {
            bad(e, "best_of", "'best_of' other than 'n' is not supported by frigg-serve");
            goto out;
        }
        json_t *suffix = json_object_get(o, "suffix");
        if (suffix && !json_is_null(suffix)) {
            bad(e, "suffix", "'suffix' is not supported by frigg-serve");
            goto out;
        }
        r->top_logprobs = lp > 0 ? (int)lp : 0;
        if (completion_prompts(r, env, json_object_get(o, "prompt"), e)) goto out;
    }
    if (r->stream && r->n_prompts * r->n > FRIGG_OAI_MAX_N * FRIGG_OAI_MAX_PROMPTS) {
        bad(e, "n", "too many choices");
        goto out;
    }
    /* Lengths: OpenAI's default max_tokens is 16 for completions and the rest of the context for chat. The
     * prompt the client sees (pn) leaves out the forced tokens, which are the answer's first (max_tokens counts
     * them); the engine's prompt holds them. */
    for (int i = 0; i < r->n_prompts; i++) {
        frigg_oai_prompt *p = &r->prompts[i];
        const int pn = p->n - r->forced_tokens;
        long long mt = mt_given ? max_tokens : kind == FRIGG_OAI_COMPLETION ? 16 : env->max_ctx - pn;
        if (have_prefix && prefix > pn) {
            bad(e, "prefix_tokens", "'prefix_tokens' (%lld) is longer than the prompt (%d tokens)", prefix, pn);
            goto out;
        }
        /* PrefixLM: the whole prompt is the prefix by default; forced tokens are the answer's, so causal */
        p->prefix_len = have_prefix ? (int)prefix : pn;
        const int ft = r->forced_tokens;
        if (mt_given && mt >= 1 && mt <= ft) { /* a max_tokens the forced start alone uses up */
            const char *f = mct_given ? "max_completion_tokens" : "max_tokens";
            bad(e, f, "'%s' (%lld) leaves no room for the tool call that 'tool_choice' forces: its start alone is %d "
                      "tokens", f, mt, ft);
            goto out;
        }
        if (mt <= ft || pn + mt > env->max_ctx) { /* mt <= ft here: no room is left in the context (or mt < 1) */
            const long long want = mt <= ft ? ft + 1 : mt;
            frigg_oai_error_set(e, 400, "invalid_request_error", kind == FRIGG_OAI_CHAT ? "messages" : "prompt",
                                "context_length_exceeded",
                                "This model's maximum context length is %d tokens. However, you requested %lld tokens "
                                "(%d in the %s, %lld in the completion). Please reduce the length of the %s or the "
                                "completion.",
                                env->max_ctx, pn + want, pn, kind == FRIGG_OAI_CHAT ? "messages" : "prompt", want,
                                kind == FRIGG_OAI_CHAT ? "messages" : "prompt");
            goto out;
        }
        mt -= r->forced_tokens; /* what the engine generates after them */
        if (i == 0 || mt > r->gen.max_tokens) r->gen.max_tokens = (int)mt;
    }
    if (response_format(r, o, env, e)) goto out;
    /* a per-prompt max_tokens for chat defaults; completions with several prompts share the given one */
    r->gen.logprobs = r->logprobs ? (r->top_logprobs > 0 ? r->top_logprobs : 1) : 0;
    r->gen.parse_tools = 0; /* tool calls are parsed here, from the forced prefix + text (frigg_oai_finish_tools) */
    r->gen.n_stop_ids = frigg_default_stop_ids(env->cfg, r->tools, r->gen.stop_ids, FRIGG_SEQGEN_MAX_STOP_IDS);
    rc = 0;
out:
    free(rendered);
    json_decref(o);
    if (rc) {
        frigg_oai_req_free(r);
        r->kind = kind;
    }
    return rc;
}

void frigg_oai_req_free(frigg_oai_req *r) {
    for (int i = 0; i < r->n_prompts; i++) free(r->prompts[i].ids);
    free(r->prompts);
    for (int i = 0; i < r->gen.n_stop; i++) free((char *)r->gen.stop[i]);
    free(r->forced);
    frigg_gref_release(r->gen.grammar);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- results */

void frigg_oai_choice_take(frigg_oai_choice *c, const frigg_seqgen_result *g, int k) {
    memset(c, 0, sizeof *c);
    c->n = g->n;
    c->ids = frigg_xmalloc(sizeof(int32_t) * (size_t)(g->n ? g->n : 1));
    memcpy(c->ids, g->ids, sizeof(int32_t) * (size_t)g->n);
    c->text = frigg_xmalloc(g->text_len + 1);
    if (g->text_len) memcpy(c->text, g->text, g->text_len);
    c->text[g->text_len] = 0;
    c->text_len = g->text_len;
    snprintf(c->finish_reason, sizeof c->finish_reason, "%s", g->finish_reason ? g->finish_reason : "stop");
    c->k = k;
    if (k && g->token_logprob) {
        size_t n = (size_t)(g->n ? g->n : 1);
        c->token_logprob = frigg_xmalloc(sizeof(float) * n);
        c->top_ids = frigg_xmalloc(sizeof(int32_t) * n * k);
        c->top_lps = frigg_xmalloc(sizeof(float) * n * k);
        memcpy(c->token_logprob, g->token_logprob, sizeof(float) * (size_t)g->n);
        memcpy(c->top_ids, g->top_ids, sizeof(int32_t) * (size_t)g->n * k);
        memcpy(c->top_lps, g->top_lps, sizeof(float) * (size_t)g->n * k);
    }
    c->prompt_tokens = g->prompt_tokens;
    c->first_token_ms = g->first_token_ms;
    c->decode_ms = g->decode_ms;
    c->queue_ms = g->queue_ms;
    c->prefill_ms = g->prefill_ms;
}

void frigg_oai_choice_free(frigg_oai_choice *c) {
    free(c->ids);
    free(c->text);
    free(c->token_logprob);
    free(c->top_ids);
    free(c->top_lps);
    json_decref(c->tool_calls);
    memset(c, 0, sizeof *c);
}

/* The calls of a forced answer (the forced start and the text, n bytes): all of it as whole calls, or, where the
 * model reached max_tokens inside a further parallel call, the whole calls before it (the cut-off one dropped, the
 * choice's finish_reason "length" saying so). NULL + frigg_error() when not even the first call is whole. */
static json_t *forced_calls(const char *full, size_t n, char **rest, size_t *rest_len) {
    json_t *a = frigg_parse_tool_calls_n(full, n, rest, rest_len);
    if (a) return a;
    char why[512];
    snprintf(why, sizeof why, "%s", frigg_error());
    static const char close[] = "<tool_call|>";
    const size_t cl = sizeof close - 1;
    size_t end = 0;
    for (size_t i = 0; i + cl <= n; i++)
        if (!memcmp(full + i, close, cl)) end = i + cl;
    if (end && end < n && (a = frigg_parse_tool_calls_n(full, end, rest, rest_len)) && json_array_size(a)) return a;
    json_decref(a);
    frigg_set_error("%s", why);
    return NULL;
}

void frigg_oai_finish_tools(const frigg_oai_req *r, const frigg_oai_choice *c, char **content, size_t *content_len,
                            json_t **calls, const char *call_id_prefix) {
    *calls = NULL;
    if (!r->tools) { /* with its length: generated text may hold NUL bytes */
        *content = frigg_xmalloc(c->text_len + 1);
        memcpy(*content, c->text, c->text_len);
        (*content)[c->text_len] = 0;
        *content_len = c->text_len;
        return;
    }
    size_t fl = r->forced ? strlen(r->forced) : 0;
    char *full = frigg_xmalloc(fl + c->text_len + 1);
    if (fl) memcpy(full, r->forced, fl);
    memcpy(full + fl, c->text, c->text_len);
    full[fl + c->text_len] = 0;
    char *rest = NULL;
    size_t rest_len = 0;
    json_t *a = fl ? forced_calls(full, fl + c->text_len, &rest, &rest_len)
                   : frigg_parse_tool_calls_n(full, fl + c->text_len, &rest, &rest_len);
    if (!a && fl) { /* a forced call that is not whole: never content (frigg_oai_choice_error makes it an error) */
        free(full);
        *content = frigg_xstrdup("");
        *content_len = 0;
        return;
    }
    if (!a) { /* not a well-formed call: the text as the model wrote it */
        *content = full;
        *content_len = fl + c->text_len;
        return;
    }
    free(full);
    *content = rest;
    *content_len = rest_len;
    if (json_array_size(a) == 0) {
        json_decref(a);
        return;
    }
    if (!r->parallel_tool_calls)
        while (json_array_size(a) > 1) json_array_remove(a, json_array_size(a) - 1);
    size_t i;
    json_t *t;
    json_array_foreach(a, i, t) {
        char id[96];
        snprintf(id, sizeof id, "call_%s_%zu", call_id_prefix, i);
        json_object_set_new(t, "id", json_string(id));
    }
    *calls = a;
}

int frigg_oai_choice_error(const frigg_oai_req *r, const frigg_oai_choice *c, frigg_oai_error *e) {
    if (!r->forced || !strcmp(c->finish_reason, "cancelled")) return 0; /* a cancelled choice has no one to tell */
    /* The forced start and the text must parse into whole calls (constrained decoding would make them so; until
     * then the model may stop, or reach max_tokens, inside the call). */
    size_t fl = strlen(r->forced);
    char *full = frigg_xmalloc(fl + c->text_len + 1);
    memcpy(full, r->forced, fl);
    memcpy(full + fl, c->text, c->text_len);
    full[fl + c->text_len] = 0;
    json_t *a = forced_calls(full, fl + c->text_len, NULL, NULL);
    free(full);
    if (a) {
        json_decref(a);
        return 0;
    }
    char why[256];
    snprintf(why, sizeof why, "%s", frigg_error());
    const int n = c->n + r->forced_tokens;
    /* 400, as vLLM answers a forced call its parser rejects: the same request can fail the same way again (greedy
     * always will), so it is not a server error for a client to retry. */
    frigg_oai_error_set(e, 400, "invalid_request_error", "tool_choice", "invalid_tool_call",
                        "'tool_choice' forced a tool call, but the model's answer (%d tokens) is not a whole call: %s%s",
                        n, why,
                        !strcmp(c->finish_reason, "length") ? " (the answer reached max_tokens inside the call)"
                                                            : " (the model ended its answer inside the call)");
    return -1;
}

void frigg_oai_usage_counts(const frigg_oai_req *r, const frigg_oai_choice *choices, int *prompt_tokens,
                            int *completion_tokens) {
    int pt = 0, ct = 0;
    for (int p = 0; p < r->n_prompts; p++) pt += r->prompts[p].n - r->forced_tokens;
    for (int i = 0; i < r->n_prompts * r->n; i++) ct += choices[i].n + r->forced_tokens;
    *prompt_tokens = pt;
    *completion_tokens = ct;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The byte a byte-fallback token stands for, or -1: its decoding alone (d, n bytes) is U+FFFD, which the decoder's
 * ByteFallback gives for a lone byte that is not UTF-8 by itself, and its name is "<0xHH>". (A byte that is UTF-8
 * by itself decodes to itself.) */
static int fallback_byte(const frigg_tokenizer *tok, int32_t id, const char *d, size_t n) {
    if (n != 3 || memcmp(d, "\xef\xbf\xbd", 3)) return -1;
    const char *t = frigg_tokenizer_id_to_token(tok, id);
    if (!t || strlen(t) != 6 || memcmp(t, "<0x", 3) || t[5] != '>') return -1;
    int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* One logprob entry of token id: chat {token, logprob, bytes, top_logprobs?}. The token is its text as decoded alone
 * (valid UTF-8: a byte-fallback token that is part of a character shows as U+FFFD); bytes are the token's own, the
 * raw byte of such a token included, so that a client joining every entry's bytes gets the answer's UTF-8 back, as
 * OpenAI's bytes promise. */
static json_t *token_entry(const frigg_oai_env *env, int32_t id, double lp) {
    size_t n = 0, cl = 0;
    char *t = env->tok ? frigg_tokenizer_decode(env->tok, &id, 1, &n) : NULL;
    char *clean = frigg_oai_utf8_clean(t ? t : "", t ? n : 0, &cl);
    json_t *bytes = json_array();
    const int fb = t ? fallback_byte(env->tok, id, t, n) : -1;
    if (fb >= 0) json_array_append_new(bytes, json_integer(fb));
    else
        for (size_t i = 0; t && i < n; i++) json_array_append_new(bytes, json_integer((unsigned char)t[i]));
    json_t *o = json_pack("{s:s%,s:f,s:o}", "token", clean, cl, "logprob", isfinite(lp) ? lp : -9999.0, "bytes", bytes);
    free(t);
    free(clean);
    return o;
}

/* Chat logprobs.content entries for tokens [from, to) of a result. */
static json_t *chat_logprobs(const frigg_oai_req *r, const frigg_oai_env *env, const int32_t *ids,
                             const float *token_lp, const int32_t *top_ids, const float *top_lps, int k, int from, int to) {
    json_t *content = json_array();
    for (int i = from; i < to; i++) {
        json_t *e = token_entry(env, ids[i], token_lp[i]);
        json_t *top = json_array();
        for (int j = 0; j < r->top_logprobs && j < k; j++)
            json_array_append_new(top, token_entry(env, top_ids[(size_t)i * k + j], top_lps[(size_t)i * k + j]));
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(content, e);
    }
    return json_pack("{s:o}", "content", content);
}

/* Characters (code points) in n bytes of UTF-8: the bytes that do not continue a sequence. text_offset counts
 * characters, as OpenAI and vLLM do (a client indexes its decoded string with it); a token holding part of a
 * character counts only its lead byte. */
static size_t utf8_chars(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

/* Completions logprobs {tokens, token_logprobs, top_logprobs, text_offset} for tokens [from, to); *offset:
 * the character offset of token `from` in the text, advanced. */
static json_t *completion_logprobs(const frigg_oai_req *r, const frigg_oai_env *env, const int32_t *ids,
                                   const float *token_lp, const int32_t *top_ids, const float *top_lps, int k, int from,
                                   int to, size_t *offset) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = from; i < to; i++) {
        json_t *e = token_entry(env, ids[i], token_lp[i]);
        json_array_append(tokens, json_object_get(e, "token"));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_array_append_new(offs, json_integer((json_int_t)*offset));
        size_t nb = 0, j;
        json_t *b;
        json_array_foreach(json_object_get(e, "bytes"), j, b) nb += ((unsigned)json_integer_value(b) & 0xc0) != 0x80;
        *offset += nb;
        json_t *top = json_object();
        int sampled_in = 0;
        for (int j = 0; j < r->top_logprobs && j < k; j++) {
            json_t *t = token_entry(env, top_ids[(size_t)i * k + j], top_lps[(size_t)i * k + j]);
            json_t *tk = json_object_get(t, "token"); /* the key with its length: a token may be a NUL byte */
            json_object_setn(top, json_string_value(tk), json_string_length(tk), json_object_get(t, "logprob"));
            json_decref(t);
            sampled_in |= top_ids[(size_t)i * k + j] == ids[i];
        }
        /* OpenAI's legacy format always holds the sampled token too: up to k + 1 entries (with logprobs 0, the
         * sampled token alone). A key another of the k tokens decodes to (two byte tokens both U+FFFD) keeps that
         * token's entry. */
        json_t *stk = json_object_get(e, "token");
        if (!sampled_in && !json_object_getn(top, json_string_value(stk), json_string_length(stk)))
            json_object_setn(top, json_string_value(stk), json_string_length(stk), json_object_get(e, "logprob"));
        json_decref(e);
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops, "text_offset", offs);
}

static const char *finish_reason_of(const frigg_oai_choice *c, const json_t *calls) {
    /* calls cut off by max_tokens (a further parallel call not whole, or text after them) say so */
    if (calls) return strcmp(c->finish_reason, "length") ? "tool_calls" : "length";
    return c->finish_reason;
}

static json_t *usage_obj(int prompt, int completion) {
    return json_pack("{s:i,s:i,s:i}", "prompt_tokens", prompt, "completion_tokens", completion, "total_tokens",
                     prompt + completion);
}

/* The id of choice idx's tool calls: unique per response and choice. */
static void call_prefix(char *out, size_t n, const char *id, int idx) { snprintf(out, n, "%s_%d", id, idx); }

json_t *frigg_oai_response(const frigg_oai_req *r, const frigg_oai_env *env, const char *id, long long created,
                           const char *model, const frigg_oai_choice *choices) {
    json_t *arr = json_array();
    int prompt_tokens = 0, completion_tokens = 0;
    frigg_oai_usage_counts(r, choices, &prompt_tokens, &completion_tokens);
    for (int i = 0; i < r->n_prompts * r->n; i++) {
        const frigg_oai_choice *c = &choices[i];
        char *content = NULL, pre[160];
        size_t content_len = 0;
        json_t *calls = NULL;
        call_prefix(pre, sizeof pre, id, i);
        frigg_oai_finish_tools(r, c, &content, &content_len, &calls, pre);
        size_t cl = 0;
        char *clean = frigg_oai_utf8_clean(content, content_len, &cl);
        free(content);
        json_t *ch = json_object();
        json_object_set_new(ch, "index", json_integer(i));
        if (r->kind == FRIGG_OAI_CHAT) {
            json_t *msg = json_pack("{s:s}", "role", "assistant");
            json_object_set_new(msg, "content", calls && cl == 0 ? json_null() : json_stringn(clean, cl));
            if (calls) json_object_set(msg, "tool_calls", calls);
            json_object_set_new(ch, "message", msg);
            json_object_set_new(ch, "logprobs", r->logprobs && c->token_logprob
                                                    ? chat_logprobs(r, env, c->ids, c->token_logprob, c->top_ids,
                                                                    c->top_lps, c->k, 0, c->n)
                                                    : json_null());
        } else {
            size_t off = 0;
            json_object_set_new(ch, "text", json_stringn(clean, cl));
            json_object_set_new(ch, "logprobs", r->logprobs && c->token_logprob
                                                    ? completion_logprobs(r, env, c->ids, c->token_logprob, c->top_ids,
                                                                          c->top_lps, c->k, 0, c->n, &off)
                                                    : json_null());
        }
        json_object_set_new(ch, "finish_reason", json_string(finish_reason_of(c, calls)));
        json_array_append_new(arr, ch);
        json_decref(calls);
        free(clean);
    }
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", id, "object",
                          r->kind == FRIGG_OAI_CHAT ? "chat.completion" : "text_completion", "created",
                          (json_int_t)created, "model", model, "choices", arr, "usage",
                          usage_obj(prompt_tokens, completion_tokens));
    json_object_set_new(o, "system_fingerprint", json_string("frigg-" FRIGG_VERSION));
    return o;
}

/* ---------------------------------------------------------------- streaming */

void frigg_oai_stream_init(frigg_oai_stream *s, int index) {
    memset(s, 0, sizeof *s);
    s->index = index;
}
void frigg_oai_stream_free(frigg_oai_stream *s) {
    free(s->text);
    memset(s, 0, sizeof *s);
}

static json_t *chunk(const frigg_oai_req *r, const char *id, long long created, const char *model, json_t *choice) {
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", id, "object",
                          r->kind == FRIGG_OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)created, "model", model, "choices", choice);
    json_object_set_new(o, "system_fingerprint", json_string("frigg-" FRIGG_VERSION));
    if (r->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

/* A content chunk of choice s->index: text (may be empty when only logprobs go out) and the logprobs of
 * tokens [s->tokens_sent, upto). */
static json_t *content_chunk(frigg_oai_stream *s, const frigg_oai_req *r, const frigg_oai_env *env, const char *id,
                             long long created, const char *model, const char *text, size_t n, const int32_t *ids,
                             const float *tlp, const int32_t *tids, const float *tlps, int k, int upto) {
    size_t cl = 0;
    char *clean = frigg_oai_utf8_clean(text, n, &cl);
    json_t *ch = json_pack("{s:i}", "index", s->index);
    json_t *lp = json_null();
    if (r->logprobs && tlp && upto > s->tokens_sent) {
        size_t off = utf8_chars(s->text, s->sent); /* where this chunk's text starts, in characters */
        lp = r->kind == FRIGG_OAI_CHAT ? chat_logprobs(r, env, ids, tlp, tids, tlps, k, s->tokens_sent, upto)
                                       : completion_logprobs(r, env, ids, tlp, tids, tlps, k, s->tokens_sent, upto, &off);
        s->tokens_sent = upto;
    }
    if (r->kind == FRIGG_OAI_CHAT) json_object_set_new(ch, "delta", json_pack("{s:s%}", "content", clean, cl));
    else json_object_set_new(ch, "text", json_stringn(clean, cl));
    json_object_set_new(ch, "logprobs", lp);
    json_object_set_new(ch, "finish_reason", json_null());
    free(clean);
    return chunk(r, id, created, model, ch);
}

static void role_chunk(frigg_oai_stream *s, const frigg_oai_req *r, const char *id, long long created,
                       const char *model, json_t *out) {
    if (s->started) return;
    s->started = 1;
    if (r->kind != FRIGG_OAI_CHAT) return;
    json_t *ch = json_pack("{s:i,s:{s:s,s:s},s:n,s:n}", "index", s->index, "delta", "role", "assistant", "content", "",
                           "logprobs", "finish_reason");
    json_array_append_new(out, chunk(r, id, created, model, ch));
}

/* How much of the received text may go out now: all of it, or with tools everything before a tool call's
 * marker (and before a tail that could still become one). With a forced call nothing is content. */
static size_t safe_len(const frigg_oai_stream *s, const frigg_oai_req *r) {
    if (!r->tools) return s->len;
    if (r->forced) return 0;
    const char *m = s->text ? memmem(s->text, s->len, TOOL_MARK, strlen(TOOL_MARK)) : NULL; /* past NUL bytes */
    if (m) return (size_t)(m - s->text);
    size_t ml = strlen(TOOL_MARK), keep = 0;
    for (size_t l = ml - 1; l > 0; l--)
        if (s->len >= l && !memcmp(s->text + s->len - l, TOOL_MARK, l)) {
            keep = l;
            break;
        }
    return s->len - keep;
}

json_t *frigg_oai_stream_text(frigg_oai_stream *s, const frigg_oai_req *r, const frigg_oai_env *env, const char *id,
                              long long created, const char *model, const char *piece, size_t n,
                              const frigg_seqgen_result *now) {
    json_t *out = json_array();
    role_chunk(s, r, id, created, model, out);
    if (n) {
        if (s->len + n + 1 > s->cap) {
            s->cap = (s->len + n + 1) * 2;
            s->text = frigg_xrealloc(s->text, s->cap);
        }
        memcpy(s->text + s->len, piece, n);
        s->len += n;
        s->text[s->len] = 0;
    }
    size_t safe = safe_len(s, r);
    if (safe > s->sent) {
        int upto = now && now->token_logprob ? now->n : s->tokens_sent;
        json_array_append_new(out, content_chunk(s, r, env, id, created, model, s->text + s->sent, safe - s->sent,
                                                 now ? now->ids : NULL, now ? now->token_logprob : NULL,
                                                 now ? now->top_ids : NULL, now ? now->top_lps : NULL, r->gen.logprobs,
                                                 upto));
        s->sent = safe;
    }
    return out;
}

json_t *frigg_oai_stream_finish(frigg_oai_stream *s, const frigg_oai_req *r, const frigg_oai_env *env, const char *id,
                                long long created, const char *model, const frigg_oai_choice *c,
                                const char *call_id_prefix) {
    json_t *out = json_array();
    role_chunk(s, r, id, created, model, out);
    char *content = NULL;
    size_t cl = 0;
    json_t *calls = NULL;
    frigg_oai_finish_tools(r, c, &content, &cl, &calls, call_id_prefix);
    /* What was sent is the start of the content (text before the first call); the rest goes now, so that the
     * streamed content equals the non-streamed one. */
    size_t from = s->sent <= cl && (s->sent == 0 || !memcmp(content, s->text, s->sent)) ? s->sent : cl;
    if (cl > from || (r->logprobs && c->token_logprob && c->n > s->tokens_sent))
        json_array_append_new(out, content_chunk(s, r, env, id, created, model, content + from, cl - from, c->ids,
                                                 c->token_logprob, c->top_ids, c->top_lps, c->k, c->n));
    s->sent = cl;
    free(content);
    size_t i;
    json_t *t;
    json_array_foreach(calls, i, t) { /* OpenAI's shape: the call's id, type and name, then its arguments */
        json_t *f = json_object_get(t, "function");
        json_t *head = json_pack("{s:i,s:{s:[{s:I,s:O,s:s,s:{s:O,s:s}}]},s:n,s:n}", "index", s->index, "delta",
                                 "tool_calls", "index", (json_int_t)i, "id", json_object_get(t, "id"), "type",
                                 "function", "function", "name", json_object_get(f, "name"), "arguments", "",
                                 "logprobs", "finish_reason");
        json_array_append_new(out, chunk(r, id, created, model, head));
        json_t *args = json_pack("{s:i,s:{s:[{s:I,s:{s:O}}]},s:n,s:n}", "index", s->index, "delta", "tool_calls", "index",
                                 (json_int_t)i, "function", "arguments", json_object_get(f, "arguments"), "logprobs",
                                 "finish_reason");
        json_array_append_new(out, chunk(r, id, created, model, args));
    }
    json_t *fin = json_pack("{s:i,s:n}", "index", s->index, "logprobs");
    if (r->kind == FRIGG_OAI_CHAT) json_object_set_new(fin, "delta", json_object());
    else json_object_set_new(fin, "text", json_string(""));
    json_object_set_new(fin, "finish_reason", json_string(finish_reason_of(c, calls)));
    json_array_append_new(out, chunk(r, id, created, model, fin));
    json_decref(calls);
    return out;
}

json_t *frigg_oai_usage_chunk(const frigg_oai_req *r, const char *id, long long created, const char *model,
                              int prompt_tokens, int completion_tokens) {
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:[]}", "id", id, "object",
                          r->kind == FRIGG_OAI_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)created, "model", model, "choices");
    json_object_set_new(o, "system_fingerprint", json_string("frigg-" FRIGG_VERSION));
    json_object_set_new(o, "usage", usage_obj(prompt_tokens, completion_tokens));
    return o;
}
