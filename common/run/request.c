/* request.c — see request.h. */
#include "request.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static const char *const k_fields[] = {"id", "input_ids", "prompt", "messages", "tools", "max_tokens",
                                       "temperature", "top_k", "top_p", "seed", "repetition_penalty",
                                       "stop_ids", "stop", "prefix_tokens", "logprobs", "frequency_penalty",
                                       "presence_penalty", "logit_bias", "response_format", NULL};

static int num_field(const json_t *o, const char *k, double lo, double hi, double dflt, double *out) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_number(v)) {
        frigg_set_error("\"%s\" must be a number", k);
        return -1;
    }
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) {
        frigg_set_error("\"%s\" = %g is out of range [%g, %g]", k, x, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int int_field(const json_t *o, const char *k, long long lo, long long hi, long long dflt, long long *out) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v)) {
        frigg_set_error("\"%s\" must be an integer", k);
        return -1;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        frigg_set_error("\"%s\" = %lld is out of range [%lld, %lld]", k, x, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int id_array(const json_t *v, const char *k, int vocab, int maxn, int32_t *dst, int *n) {
    if (!json_is_array(v)) {
        frigg_set_error("\"%s\" must be an array of token ids", k);
        return -1;
    }
    if ((int)json_array_size(v) > maxn) {
        frigg_set_error("\"%s\" has %zu entries (at most %d)", k, json_array_size(v), maxn);
        return -1;
    }
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= vocab) {
            frigg_set_error("\"%s\"[%zu] must be an integer token id in [0, %d)", k, i, vocab);
            return -1;
        }
        dst[i] = (int32_t)json_integer_value(e);
    }
    *n = (int)json_array_size(v);
    return 0;
}

int frigg_parse_logit_bias(const json_t *v, int vocab, frigg_sampler_params *sp) {
    sp->n_logit_bias = 0;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) {
        frigg_set_error("\"logit_bias\" must be an object {\"<token id>\": bias}");
        return -1;
    }
    if (json_object_size(v) > FRIGG_MAX_LOGIT_BIAS) {
        frigg_set_error("\"logit_bias\" has %zu entries (at most %d)", json_object_size(v), FRIGG_MAX_LOGIT_BIAS);
        return -1;
    }
    const char *key;
    json_t *b;
    int n = 0;
    json_object_foreach((json_t *)v, key, b) {
        /* a token id written the plain way: decimal digits, no sign, no leading zero, so that no two keys name
         * the same id */
        long long id = -1;
        size_t len = strlen(key);
        int digits = len > 0 && len <= 10 && (key[0] != '0' || len == 1);
        for (size_t i = 0; digits && i < len; i++) digits = key[i] >= '0' && key[i] <= '9';
        if (digits) id = strtoll(key, NULL, 10);
        if (!digits || id >= vocab) {
            frigg_set_error("\"logit_bias\" key \"%s\" must be a token id: a decimal integer in [0, %d)", key, vocab);
            sp->n_logit_bias = 0;
            return -1;
        }
        double x = json_is_number(b) ? json_number_value(b) : NAN;
        if (!(x >= -FRIGG_LOGIT_BIAS_LIMIT && x <= FRIGG_LOGIT_BIAS_LIMIT)) {
            frigg_set_error("\"logit_bias\"[\"%s\"] must be a number in [%g, %g]", key, -FRIGG_LOGIT_BIAS_LIMIT,
                            FRIGG_LOGIT_BIAS_LIMIT);
            sp->n_logit_bias = 0;
            return -1;
        }
        sp->logit_bias[n++] = (frigg_logit_bias){.id = (int32_t)id, .bias = (float)x};
    }
    sp->n_logit_bias = n;
    return 0;
}

/* A JSON string equal to `lit`, compared with its length so that "user\u0000x" is not "user". */
static int jstr_is(const json_t *v, const char *lit) {
    size_t n = strlen(lit);
    return json_string_length(v) == n && !memcmp(json_string_value(v), lit, n);
}

/* The roles the chat template is given: system, developer (rendered as a system turn), user, assistant, tool. Every
 * message needs "content", except an assistant message that makes tool calls. Returns the messages to render (a copy
 * with each developer role renamed system when there is one), or NULL with frigg_error() naming the message. */
static json_t *check_messages(const json_t *msgs) {
    if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
        frigg_set_error("\"messages\" must be a non-empty array");
        return NULL;
    }
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool", NULL};
    int developer = 0;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        json_t *role = json_object_get(m, "role");
        if (!json_is_object(m) || !json_is_string(role)) {
            frigg_set_error("\"messages\"[%zu] must be an object with a string \"role\"", i);
            return NULL;
        }
        int known = 0;
        for (int k = 0; roles[k] && !known; k++) known = jstr_is(role, roles[k]);
        if (!known) {
            char *q = json_dumps(role, JSON_ENCODE_ANY); /* quoted and escaped, \u0000 included */
            frigg_set_error("\"messages\"[%zu].role is %.60s: it must be system, developer, user, assistant or tool", i,
                            q ? q : "?");
            free(q);
            return NULL;
        }
        developer |= jstr_is(role, "developer");
        json_t *content = json_object_get(m, "content"), *calls = json_object_get(m, "tool_calls");
        int calls_given = calls && !json_is_null(calls) && !(json_is_array(calls) && json_array_size(calls) == 0);
        if ((!content || json_is_null(content)) && !(jstr_is(role, "assistant") && calls_given)) {
            frigg_set_error("\"messages\"[%zu] (%s) has no \"content\"%s", i, json_string_value(role),
                            jstr_is(role, "assistant") ? " and no \"tool_calls\"" : "");
            return NULL;
        }
    }
    if (!developer) return json_incref((json_t *)msgs);
    json_t *out = json_deep_copy(msgs);
    json_array_foreach(out, i, m)
        if (jstr_is(json_object_get(m, "role"), "developer")) json_object_set_new(m, "role", json_string("system"));
    return out;
}

int frigg_request_parse(frigg_request *r, const json_t *o, int vocab) {
    memset(r, 0, sizeof *r);
    r->prefix_tokens = -1;
    if (!json_is_object(o)) {
        frigg_set_error("a request must be a JSON object");
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        int ok = 0;
        for (int i = 0; k_fields[i]; i++)
            if (!strcmp(key, k_fields[i])) ok = 1;
        if (!ok) {
            frigg_set_error("unknown field \"%s\"", key);
            return -1;
        }
    }
    if ((v = json_object_get(o, "id"))) r->id = json_incref(v);

    json_t *ids = json_object_get(o, "input_ids"), *prompt = json_object_get(o, "prompt"),
           *msgs = json_object_get(o, "messages"), *tools = json_object_get(o, "tools");
    int given = !!ids + !!prompt + !!msgs;
    if (given != 1) {
        frigg_set_error(given ? "give only one of \"input_ids\", \"prompt\", \"messages\""
                              : "missing input: give \"input_ids\", \"prompt\" or \"messages\"");
        goto fail;
    }
    if (ids) {
        if (!json_is_array(ids) || json_array_size(ids) == 0) {
            frigg_set_error("\"input_ids\" must be a non-empty array of token ids");
            goto fail;
        }
        r->input_ids = frigg_xmalloc(json_array_size(ids) * sizeof(int32_t));
        if (id_array(ids, "input_ids", vocab, 1 << 24, r->input_ids, &r->n_input)) goto fail;
    }
    if (prompt) {
        if (!json_is_string(prompt)) {
            frigg_set_error("\"prompt\" must be a string");
            goto fail;
        }
        /* the string as JSON gave it, NUL bytes (\u0000) included */
        r->prompt_len = json_string_length(prompt);
        r->prompt = frigg_xmalloc(r->prompt_len + 1);
        memcpy(r->prompt, json_string_value(prompt), r->prompt_len);
        r->prompt[r->prompt_len] = 0;
    }
    if (msgs) {
        r->messages = check_messages(msgs);
        if (!r->messages) goto fail;
    }
    if (tools) {
        if (!msgs) {
            frigg_set_error("\"tools\" needs \"messages\"");
            goto fail;
        }
        if (!json_is_array(tools)) {
            frigg_set_error("\"tools\" must be an array");
            goto fail;
        }
        r->tools = json_incref(tools);
    }
    long long x;
    double d;
    if (int_field(o, "max_tokens", 0, 1 << 24, FRIGG_DEFAULT_MAX_TOKENS, &x)) goto fail;
    r->max_tokens = (int)x;
    r->max_tokens_given = json_object_get(o, "max_tokens") != NULL;
    if (num_field(o, "temperature", 0, 100, 0, &d)) goto fail;
    r->sampling.temperature = (float)d;
    if (int_field(o, "top_k", 0, vocab, 0, &x)) goto fail;
    r->sampling.top_k = (int)x;
    /* top_p keeps the smallest head of the ranking whose mass reaches it: 0 would keep nothing, so the range is
     * (0, 1], one rule with one message */
    if (num_field(o, "top_p", -INFINITY, INFINITY, 1, &d)) goto fail;
    if (!(d > 0 && d <= 1)) {
        frigg_set_error("\"top_p\" = %g is out of range (0, 1]", d);
        goto fail;
    }
    r->sampling.top_p = (float)d;
    if (num_field(o, "repetition_penalty", 1e-3, 1e3, 1, &d)) goto fail;
    r->sampling.repetition_penalty = (float)d;
    if (num_field(o, "frequency_penalty", -FRIGG_PENALTY_LIMIT, FRIGG_PENALTY_LIMIT, 0, &d)) goto fail;
    r->sampling.frequency_penalty = (float)d;
    if (num_field(o, "presence_penalty", -FRIGG_PENALTY_LIMIT, FRIGG_PENALTY_LIMIT, 0, &d)) goto fail;
    r->sampling.presence_penalty = (float)d;
    if (frigg_parse_logit_bias(json_object_get(o, "logit_bias"), vocab, &r->sampling)) goto fail;
    json_t *seed = json_object_get(o, "seed");
    if (seed && !json_is_null(seed)) {
        if (!json_is_integer(seed) || json_integer_value(seed) < 0) {
            frigg_set_error("\"seed\" must be a non-negative integer");
            goto fail;
        }
        r->sampling.seed = (uint64_t)json_integer_value(seed);
    }
    if (r->sampling.temperature == 0 &&
        (r->sampling.top_k || r->sampling.top_p < 1 || (seed && !json_is_null(seed)))) {
        /* Greedy ignores these; accepting them silently would hide a mistake. */
        frigg_set_error("\"top_k\", \"top_p\" and \"seed\" need \"temperature\" > 0 (temperature 0 is greedy)");
        goto fail;
    }
    json_t *sids = json_object_get(o, "stop_ids");
    if (sids) {
        r->has_stop_ids = true;
        if (id_array(sids, "stop_ids", vocab, FRIGG_MAX_STOP_IDS, r->stop_ids, &r->n_stop_ids)) goto fail;
    }
    json_t *stop = json_object_get(o, "stop");
    if (stop) {
        if (json_is_string(stop)) {
            r->stop[r->n_stop++] = frigg_xstrdup(json_string_value(stop));
        } else if (json_is_array(stop) && json_array_size(stop) <= FRIGG_MAX_STOP_STRINGS) {
            size_t i;
            json_t *e;
            json_array_foreach(stop, i, e) {
                if (!json_is_string(e) || !json_string_length(e)) {
                    frigg_set_error("\"stop\"[%zu] must be a non-empty string", i);
                    goto fail;
                }
                r->stop[r->n_stop++] = frigg_xstrdup(json_string_value(e));
            }
        } else {
            frigg_set_error("\"stop\" must be a string or an array of at most %d strings", FRIGG_MAX_STOP_STRINGS);
            goto fail;
        }
        for (int i = 0; i < r->n_stop; i++)
            if (!r->stop[i][0]) {
                frigg_set_error("\"stop\" strings must be non-empty");
                goto fail;
            }
        /* stop strings are matched as C strings: one holding a NUL byte is refused, not cut short */
        json_t *one = json_is_string(stop) ? stop : NULL;
        for (int i = 0; i < r->n_stop; i++) {
            json_t *e = one ? one : json_array_get(stop, (size_t)i);
            if (json_string_length(e) != strlen(r->stop[i])) {
                if (one) frigg_set_error("\"stop\" holds a NUL byte (\\u0000), which a stop string cannot");
                else frigg_set_error("\"stop\"[%d] holds a NUL byte (\\u0000), which a stop string cannot", i);
                goto fail;
            }
        }
    }
    if (int_field(o, "prefix_tokens", 0, 1 << 24, -1, &x)) goto fail;
    r->prefix_tokens = (int)x;
    if (r->input_ids && r->prefix_tokens > r->n_input) {
        frigg_set_error("\"prefix_tokens\" = %d is longer than the prompt (%d tokens)", r->prefix_tokens, r->n_input);
        goto fail;
    }
    if (int_field(o, "logprobs", 0, FRIGG_MAX_LOGPROBS, 0, &x)) goto fail;
    r->logprobs = (int)x;
    if (frigg_respfmt_parse(json_object_get(o, "response_format"), &r->response_format, NULL)) goto fail;
    return 0;
fail:
    frigg_request_free(r);
    return -1;
}

void frigg_request_free(frigg_request *r) {
    json_decref(r->id);
    json_decref(r->messages);
    json_decref(r->tools);
    free(r->input_ids);
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    frigg_respfmt_free(&r->response_format);
    memset(r, 0, sizeof *r);
}
