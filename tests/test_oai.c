/* test_oai.c — frigg-serve's wire format (common/oai.c) on what the bundled tiny model never writes by itself: a
 * well-formed tool call. The text of a made-up result carries calls in DFM-Mimir's syntax; the non-streamed
 * response must give OpenAI tool_calls (name, JSON arguments, ids, finish_reason "tool_calls") with the text
 * around them as content; the streamed chunks, fed the same text in small pieces, must give the same content
 * (nothing of the call leaks out as content, even when the marker arrives split across pieces), then the
 * tool-call deltas in OpenAI's shape (id, type, name and empty arguments, then the arguments) and the finish
 * chunk. Also parallel_tool_calls false, a forced named function, a malformed call kept as content, chat and
 * completion logprobs shapes, the error body, and UTF-8 cleaning. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"
#include "oai.h"
#include "strbuf.h"
#include "tokenizer.h"
#include "util.h"

static frigg_tokenizer *tok;
static frigg_config cfg;

static const char *TOOLS = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
                           "\"properties\":{\"city\":{\"type\":\"string\"}}}}},"
                           "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}]";

static int parse(frigg_oai_req *r, const char *extra) {
    char body[2048];
    snprintf(body, sizeof body,
             "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"Vejret i Oslo?\"}],\"tools\":%s%s}", TOOLS,
             extra);
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    frigg_oai_error e;
    int rc = frigg_oai_parse(r, FRIGG_OAI_CHAT, body, strlen(body), &env, &e);
    if (rc) fprintf(stderr, "parse: %s\n", e.message);
    return rc;
}

static void make_choice(frigg_oai_choice *c, const char *text) {
    memset(c, 0, sizeof *c);
    c->text = frigg_xstrdup(text);
    c->text_len = strlen(text);
    c->ids = calloc(1, sizeof(int32_t));
    strcpy(c->finish_reason, "stop");
}

/* Feed text in pieces of `step` bytes through the stream, then finish; returns every chunk. */
static json_t *stream_all(const frigg_oai_req *r, const frigg_oai_choice *c, size_t step) {
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    frigg_oai_stream s;
    frigg_oai_stream_init(&s, 0);
    json_t *all = json_array();
    for (size_t at = 0; at < c->text_len; at += step) {
        size_t n = c->text_len - at < step ? c->text_len - at : step;
        json_t *a = frigg_oai_stream_text(&s, r, &env, "id", 1, "default", c->text + at, n, NULL);
        json_array_extend(all, a);
        json_decref(a);
    }
    json_t *a = frigg_oai_stream_finish(&s, r, &env, "id", 1, "default", c, "p");
    json_array_extend(all, a);
    json_decref(a);
    frigg_oai_stream_free(&s);
    return all;
}

static void test_tool_calls(void) {
    frigg_oai_req r;
    CHECK(parse(&r, "") == 0, "a chat request with tools");
    CHECK(r.tools == 1 && r.forced == NULL, "tools parsed, nothing forced by default");
    frigg_oai_choice c;
    make_choice(&c, "Lad mig se. <|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>");
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    json_t *resp = frigg_oai_response(&r, &env, "chatcmpl-x", 1, "default", &c);
    json_t *ch = json_array_get(json_object_get(resp, "choices"), 0), *msg = json_object_get(ch, "message");
    json_t *calls = json_object_get(msg, "tool_calls");
    const char *content = json_string_value(json_object_get(msg, "content"));
    CHECK(json_array_size(calls) == 1, "one tool call, got %zu", json_array_size(calls));
    json_t *f = json_object_get(json_array_get(calls, 0), "function");
    CHECK(!strcmp(json_string_value(json_object_get(f, "name")) ?: "", "get_weather"), "the call's name");
    json_t *args = json_loads(json_string_value(json_object_get(f, "arguments")) ?: "", 0, NULL);
    CHECK(args && !strcmp(json_string_value(json_object_get(args, "city")) ?: "", "Oslo"), "arguments: JSON {\"city\": \"Oslo\"}");
    json_decref(args);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(calls, 0), "type")) ?: "", "function"), "type function");
    CHECK(json_string_value(json_object_get(json_array_get(calls, 0), "id")) != NULL, "the call has an id");
    CHECK(!strcmp(json_string_value(json_object_get(ch, "finish_reason")) ?: "", "tool_calls"), "finish_reason tool_calls");
    CHECK(content && !strncmp(content, "Lad mig se.", 11) && !strstr(content, "tool_call"), "content around the call: '%s'",
          content ? content : "(null)");
    /* streamed, in pieces of 1, 3 and 7 bytes: the same content, then the call's deltas */
    static const size_t steps[] = {1, 3, 7};
    for (size_t k = 0; k < 3; k++) {
        json_t *chunks = stream_all(&r, &c, steps[k]);
        frigg_strbuf sc = FRIGG_STRBUF_INIT;
        int heads = 0, argfrags = 0, finish_ok = 0, roles = 0;
        size_t i;
        json_t *chunk;
        json_array_foreach(chunks, i, chunk) {
            json_t *c0 = json_array_get(json_object_get(chunk, "choices"), 0), *d = json_object_get(c0, "delta");
            if (json_object_get(d, "role")) roles++;
            const char *t = json_string_value(json_object_get(d, "content"));
            if (t) frigg_sb_puts(&sc, t);
            json_t *tc = json_array_get(json_object_get(d, "tool_calls"), 0);
            if (tc && json_object_get(tc, "id")) {
                heads++;
                CHECK(!strcmp(json_string_value(json_object_get(json_object_get(tc, "function"), "name")) ?: "", "get_weather") &&
                          !strcmp(json_string_value(json_object_get(json_object_get(tc, "function"), "arguments")) ?: "x", "") &&
                          json_integer_value(json_object_get(tc, "index")) == 0,
                      "the call's first delta: index, id, type, name, empty arguments");
            } else if (tc) {
                argfrags++;
                CHECK(!strcmp(json_string_value(json_object_get(json_object_get(tc, "function"), "arguments")) ?: "",
                              json_string_value(json_object_get(f, "arguments"))),
                      "the arguments delta equals the non-streamed arguments");
            }
            const char *fr = json_string_value(json_object_get(c0, "finish_reason"));
            if (fr) finish_ok = !strcmp(fr, "tool_calls") && i + 1 == json_array_size(chunks);
        }
        char *streamed = frigg_sb_take(&sc);
        CHECK(!strcmp(streamed, content ? content : ""), "pieces of %zu: streamed content '%s' differs from '%s'", steps[k],
              streamed, content ? content : "");
        CHECK(roles == 1 && heads == 1 && argfrags == 1 && finish_ok, "pieces of %zu: role %d, heads %d, args %d, finish %d",
              steps[k], roles, heads, argfrags, finish_ok);
        free(streamed);
        json_decref(chunks);
    }
    json_decref(resp);
    frigg_oai_choice_free(&c);
    /* two calls: both, or with parallel_tool_calls false the first only */
    make_choice(&c, "<|tool_call>call:get_time{}<tool_call|><|tool_call>call:get_weather{city:<|\"|>Bergen<|\"|>}<tool_call|>");
    char *cont = NULL;
    json_t *cs = NULL;
    frigg_oai_finish_tools(&r, &c, &cont, &cs, "a");
    CHECK(json_array_size(cs) == 2, "two calls, got %zu", json_array_size(cs));
    free(cont);
    json_decref(cs);
    frigg_oai_req_free(&r);
    CHECK(parse(&r, ",\"parallel_tool_calls\":false") == 0, "parallel_tool_calls false");
    frigg_oai_finish_tools(&r, &c, &cont, &cs, "b");
    CHECK(json_array_size(cs) == 1, "parallel_tool_calls false keeps one call, got %zu", json_array_size(cs));
    free(cont);
    json_decref(cs);
    frigg_oai_choice_free(&c);
    /* a malformed call stays content, finish_reason as generated */
    make_choice(&c, "<|tool_call>call:get_weather{city:");
    frigg_oai_finish_tools(&r, &c, &cont, &cs, "c");
    CHECK(cs == NULL && cont && !strcmp(cont, c.text), "a malformed call is returned as content");
    free(cont);
    frigg_oai_choice_free(&c);
    frigg_oai_req_free(&r);
}

static void test_forced(void) {
    frigg_oai_req r;
    CHECK(parse(&r, ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}") == 0, "named tool_choice");
    CHECK(r.forced && !strcmp(r.forced, "<|tool_call>call:get_weather{"), "the forced prefix: '%s'", r.forced ? r.forced : "");
    frigg_oai_choice c;
    make_choice(&c, "city:<|\"|>Aarhus<|\"|>}<tool_call|>"); /* what the model adds after the forced prefix */
    char *cont = NULL;
    json_t *cs = NULL;
    frigg_oai_finish_tools(&r, &c, &cont, &cs, "f");
    CHECK(json_array_size(cs) == 1 && !strcmp(json_string_value(json_object_get(json_object_get(json_array_get(cs, 0), "function"),
                                                                                  "name")) ?: "", "get_weather"),
          "a forced call parses with the forced prefix");
    free(cont);
    json_decref(cs);
    /* with a forced call nothing streams as content */
    json_t *chunks = stream_all(&r, &c, 4);
    size_t i;
    json_t *chunk;
    int content = 0;
    json_array_foreach(chunks, i, chunk) {
        const char *t = json_string_value(json_object_get(json_object_get(json_array_get(json_object_get(chunk, "choices"), 0), "delta"), "content"));
        content |= t && *t;
    }
    CHECK(!content, "a forced call streamed content");
    json_decref(chunks);
    frigg_oai_choice_free(&c);
    frigg_oai_req_free(&r);
    frigg_oai_error e;
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    const char *bad = "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}";
    CHECK(frigg_oai_parse(&r, FRIGG_OAI_CHAT, bad, strlen(bad), &env, &e) == -1 && !strcmp(e.param, "tool_choice") && e.status == 400,
          "required without tools: 400 naming tool_choice");
    frigg_oai_req_free(&r);
    json_t *ej = frigg_oai_error_json(&e);
    json_t *in = json_object_get(ej, "error");
    CHECK(json_is_string(json_object_get(in, "message")) && json_is_string(json_object_get(in, "type")) &&
              json_is_string(json_object_get(in, "param")) && json_is_null(json_object_get(in, "code")),
          "the error body: message, type, param, code");
    json_decref(ej);
}

static void test_logprobs_and_utf8(void) {
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    frigg_oai_error e;
    frigg_oai_req r;
    const char *b = "{\"model\":\"default\",\"prompt\":[5,6,7],\"max_tokens\":2,\"logprobs\":2}";
    CHECK(frigg_oai_parse(&r, FRIGG_OAI_COMPLETION, b, strlen(b), &env, &e) == 0, "%s", e.message);
    frigg_oai_choice c;
    make_choice(&c, "");
    free(c.ids);
    c.n = 2;
    c.k = 2;
    c.ids = malloc(2 * sizeof(int32_t));
    c.ids[0] = 300;
    c.ids[1] = 301;
    size_t tl = 0;
    char *t0 = frigg_tokenizer_decode(tok, c.ids, 2, &tl);
    free(c.text);
    c.text = t0;
    c.text_len = tl;
    c.token_logprob = malloc(2 * sizeof(float));
    c.token_logprob[0] = -0.5f;
    c.token_logprob[1] = -1.5f;
    c.top_ids = malloc(4 * sizeof(int32_t));
    c.top_lps = malloc(4 * sizeof(float));
    for (int i = 0; i < 4; i++) c.top_ids[i] = 300 + i, c.top_lps[i] = -0.5f * (float)(i + 1);
    json_t *resp = frigg_oai_response(&r, &env, "cmpl-x", 1, "default", &c);
    json_t *lp = json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "logprobs");
    CHECK(json_array_size(json_object_get(lp, "tokens")) == 2 && json_array_size(json_object_get(lp, "token_logprobs")) == 2 &&
              json_array_size(json_object_get(lp, "top_logprobs")) == 2 && json_array_size(json_object_get(lp, "text_offset")) == 2,
          "completion logprobs: tokens, token_logprobs, top_logprobs, text_offset");
    CHECK(json_integer_value(json_array_get(json_object_get(lp, "text_offset"), 0)) == 0, "the first text_offset is 0");
    json_decref(resp);
    frigg_oai_choice_free(&c);
    frigg_oai_req_free(&r);
    size_t n;
    char *s = frigg_oai_utf8_clean("a\xff" "b\xc3\xa6\xe2\x82", 7, &n);
    CHECK(!strcmp(s, "a\xef\xbf\xbd" "b\xc3\xa6\xef\xbf\xbd\xef\xbf\xbd"), "invalid bytes become U+FFFD, valid ones stay");
    free(s);
}

int main(void) {
    TEST_MAIN_BEGIN("test_oai");
    char *tj = th_path(th_root(), "golden/default/tokenizer.json"), *cj = th_path(th_root(), "golden/default/config.json");
    tok = frigg_tokenizer_load(tj, 0);
    CHECK(tok && frigg_config_load(&cfg, cj) == 0, "the default model's tokenizer and config: %s", frigg_error());
    if (tok) {
        test_tool_calls();
        test_forced();
        test_logprobs_and_utf8();
        frigg_tokenizer_free(tok);
    }
    free(tj);
    free(cj);
    TEST_MAIN_END();
}
