/* request.c — see request.h. */
#include "request.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *const k_fields[] = {"id", "input_ids", "prompt", "messages", "tools", "max_tokens",
                                       "temperature", "top_k", "top_p", "seed", "repetition_penalty",
                                       "stop_ids", "stop", "prefix_tokens", "logprobs", NULL};

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
        r->prompt = frigg_xstrdup(json_string_value(prompt));
    }
    if (msgs) {
        if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
            frigg_set_error("\"messages\" must be a non-empty array");
            goto fail;
        }
        r->messages = json_incref(msgs);
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
    if (num_field(o, "top_p", 0, 1, 1, &d)) goto fail;
    if (d == 0) {
        frigg_set_error("\"top_p\" must be > 0");
        goto fail;
    }
    r->sampling.top_p = (float)d;
    if (num_field(o, "repetition_penalty", 1e-3, 1e3, 1, &d)) goto fail;
    r->sampling.repetition_penalty = (float)d;
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
    }
    if (int_field(o, "prefix_tokens", 0, 1 << 24, -1, &x)) goto fail;
    r->prefix_tokens = (int)x;
    if (r->input_ids && r->prefix_tokens > r->n_input) {
        frigg_set_error("\"prefix_tokens\" = %d is longer than the prompt (%d tokens)", r->prefix_tokens, r->n_input);
        goto fail;
    }
    if (int_field(o, "logprobs", 0, FRIGG_MAX_LOGPROBS, 0, &x)) goto fail;
    r->logprobs = (int)x;
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
    memset(r, 0, sizeof *r);
}
