/* test_oai.c — frigg-serve's wire format (common/run/oai.c) on what the bundled tiny model never writes by itself: a
 * well-formed tool call. The text of a made-up result carries calls in DFM-Mimir's syntax; the non-streamed
 * response must give OpenAI tool_calls (name, JSON arguments, ids, finish_reason "tool_calls") with the text
 * around them as content; the streamed chunks, fed the same text in small pieces, must give the same content
 * (nothing of the call leaks out as content, even when the marker arrives split across pieces), then the
 * tool-call deltas in OpenAI's shape (id, type, name and empty arguments, then the arguments) and the finish
 * chunk. Also parallel_tool_calls false, a forced named function, a malformed call kept as content, chat and
 * completion logprobs shapes, the error body, and UTF-8 cleaning. And NUL bytes (\u0000, valid JSON): prompts,
 * message content, content parts, a tool call's arguments and result tokenized with them as HF tokenizers does
 * (recorded ids); every string that names something (model, role, name, ids, types, tool names, tool_choice)
 * and every stop string refused with a 400 naming the field; generated text holding them returned whole,
 * streamed or not, around tool calls, and as logprobs tokens.
 * OpenAI-compatibility rules: a forced tool call (tool_choice required or named) the model leaves unfinished is an
 * error (a 400 naming tool_choice), never markup returned as content, and its forced tokens count as completion
 * tokens and against max_tokens; null is absent for every optional field; the no-op fields (prompt_cache_key,
 * prompt_cache_retention, safety_identifier, verbosity, stream_options.include_obfuscation) are accepted and typed;
 * logprobs bytes are each token's own (a byte-fallback token's raw byte); completions' top_logprobs hold the sampled
 * token; a function's strict: true and unknown keys are refused by name; the chat prompt with tools is the one
 * /tokenize counts. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/config.h"
#include "harness.h"
#include "run/oai.h"
#include "base/strbuf.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"

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
    size_t cl = 0;
    json_t *cs = NULL;
    frigg_oai_finish_tools(&r, &c, &cont, &cl, &cs, "a");
    CHECK(json_array_size(cs) == 2, "two calls, got %zu", json_array_size(cs));
    free(cont);
    json_decref(cs);
    frigg_oai_req_free(&r);
    CHECK(parse(&r, ",\"parallel_tool_calls\":false") == 0, "parallel_tool_calls false");
    frigg_oai_finish_tools(&r, &c, &cont, &cl, &cs, "b");
    CHECK(json_array_size(cs) == 1, "parallel_tool_calls false keeps one call, got %zu", json_array_size(cs));
    free(cont);
    json_decref(cs);
    frigg_oai_choice_free(&c);
    /* a malformed call stays content, finish_reason as generated */
    make_choice(&c, "<|tool_call>call:get_weather{city:");
    frigg_oai_finish_tools(&r, &c, &cont, &cl, &cs, "c");
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
    size_t cl = 0;
    json_t *cs = NULL;
    frigg_oai_finish_tools(&r, &c, &cont, &cl, &cs, "f");
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

/* ---- NUL bytes (\u0000): valid JSON, tokenized whole; refused where a string names something ---- */

static int jstr_eq(const json_t *v, const char *s, size_t n) {
    return json_is_string(v) && json_string_length(v) == n && !memcmp(json_string_value(v), s, n);
}

static int parse_body(frigg_oai_req *r, frigg_oai_kind kind, const char *body, frigg_oai_error *e) {
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    memset(e, 0, sizeof *e);
    return frigg_oai_parse(r, kind, body, strlen(body), &env, e);
}

static int ids_are(const frigg_oai_prompt *p, const int32_t *want, int n) {
    return p->n == n && !memcmp(p->ids, want, sizeof(int32_t) * (size_t)n);
}

static void print_ids(const char *what, const frigg_oai_prompt *p) {
    fprintf(stderr, "  %s: %d ids:", what, p->n);
    for (int i = 0; i < p->n; i++) fprintf(stderr, " %d", p->ids[i]);
    fputc('\n', stderr);
}

/* The ids below are HF tokenizers 0.23.2's (Tokenizer.from_file("golden/default/tokenizer.json").encode(text,
 * add_special_tokens=False)), for chat of the text jinja2 3.1.6 renders with gemma4_native_chat.jinja from the
 * messages as scripts/oracle/render_chat_golden.py normalizes them; the prompts are tests/run-input.sh's. */
static void test_nul_prompts(void) {
    frigg_oai_req r;
    frigg_oai_error e;
    static const int32_t a0b[] = {549, 238, 550}, hi[] = {556, 557, 613, 238, 1072}, nul[] = {238}, bos[] = {2, 238, 2};
    int rc = parse_body(&r, FRIGG_OAI_COMPLETION, "{\"model\":\"default\",\"prompt\":\"a\\u0000b\"}", &e);
    CHECK(rc == 0, "prompt \"a\\u0000b\": %s", e.message);
    CHECK(rc == 0 && ids_are(&r.prompts[0], a0b, 3), "prompt \"a\\u0000b\": want ids 549 238 550");
    if (rc == 0 && !ids_are(&r.prompts[0], a0b, 3)) print_ids("got", &r.prompts[0]);
    frigg_oai_req_free(&r);
    rc = parse_body(&r, FRIGG_OAI_COMPLETION,
                    "{\"model\":\"default\",\"prompt\":[\"hi \\u0000 there\",\"\\u0000\",\"<bos>\\u0000<bos>\"]}", &e);
    CHECK(rc == 0 && r.n_prompts == 3, "three prompts holding NUL bytes: %s", e.message);
    if (rc == 0) {
        CHECK(ids_are(&r.prompts[0], hi, 5), "prompt[0] \"hi \\u0000 there\"");
        CHECK(ids_are(&r.prompts[1], nul, 1), "prompt[1] \"\\u0000\"");
        CHECK(ids_are(&r.prompts[2], bos, 3), "prompt[2] \"<bos>\\u0000<bos>\"");
    }
    frigg_oai_req_free(&r);

    /* chat: a content string, and the same text as content parts */
    static const int32_t x0y[] = {2, 105, 783, 616, 107, 572, 238, 573, 106, 107, 105, 561, 563, 1152, 107};
    const char *bodies[] = {
        "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"x\\u0000y\"}]}",
        "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"x\\u0000\"},"
        "{\"type\":\"text\",\"text\":\"y\"}]}]}",
    };
    for (int i = 0; i < 2; i++) {
        rc = parse_body(&r, FRIGG_OAI_CHAT, bodies[i], &e);
        CHECK(rc == 0, "chat %d with a NUL byte in its content: %s", i, e.message);
        CHECK(rc == 0 && ids_are(&r.prompts[0], x0y, 15), "chat %d: the content's NUL byte tokenized as HF does", i);
        if (rc == 0 && !ids_are(&r.prompts[0], x0y, 15)) print_ids("got", &r.prompts[0]);
        frigg_oai_req_free(&r);
    }

    /* a conversation: system, user, an assistant's tool call (arguments as the JSON string OpenAI clients send,
     * holding the escape \u0000, and as an object), its result, a user turn that is only a NUL byte */
    static const int32_t conv[] = {
        2,   105,  567, 7371, 107, 567,  1825, 238,  653, 561, 106,  107, 105, 783, 616, 107, 572,  238, 106, 107, 105,
        561, 563,  1152, 107, 48,  551,  943,  516,  1639, 333, 1780, 1204, 361, 551, 1324, 516, 52,  534, 238, 567,
        1056, 52,  363, 49,  50,   917,  5713, 713,  516, 1639, 333,  1780, 1204, 361, 1619, 1936, 516, 52, 507, 508,
        238, 522,  52,  363, 51,   4506, 238,  629,  106, 107, 105,  783, 616, 107, 238,  106, 107, 105, 561, 563,
        1152, 107};
    int nconv = (int)(sizeof conv / sizeof conv[0]);
    for (int form = 0; form < 2; form++) {
        json_t *args = form ? json_pack("{s:o}", "city", json_stringn("O\0slo", 5)) : json_string("{\"city\": \"O\\u0000slo\"}");
        json_t *call = json_pack("{s:s,s:s,s:{s:s,s:o}}", "id", "c1", "type", "function", "function", "name", "get_weather",
                                 "arguments", args);
        json_t *msgs = json_pack("[{s:s,s:o},{s:s,s:o},{s:s,s:o,s:[o]},{s:s,s:s,s:s,s:o},{s:s,s:o}]", "role", "system",
                                 "content", json_stringn("sys\0tem", 7), "role", "user", "content", json_stringn("x\0", 2),
                                 "role", "assistant", "content", json_stringn("sv\0ar", 5), "tool_calls", call, "role",
                                 "tool", "name", "get_weather", "tool_call_id", "c1", "content",
                                 json_stringn("12\0C", 4), "role", "user", "content", json_stringn("\0", 1));
        json_t *o = json_pack("{s:s,s:o}", "model", "default", "messages", msgs);
        char *body = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        rc = parse_body(&r, FRIGG_OAI_CHAT, body, &e);
        CHECK(rc == 0, "a conversation with NUL bytes (arguments as %s): %s", form ? "an object" : "a JSON string", e.message);
        CHECK(rc == 0 && ids_are(&r.prompts[0], conv, nconv), "the conversation (arguments as %s) tokenized as HF does",
              form ? "an object" : "a JSON string");
        if (rc == 0 && !ids_are(&r.prompts[0], conv, nconv)) print_ids("got", &r.prompts[0]);
        frigg_oai_req_free(&r);
        free(body);
    }
    /* tool_choice none leaves the tools out; a named function's forced call follows the whole rendered prompt, NUL
     * bytes and all */
    char body[1024];
    snprintf(body, sizeof body,
             "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"x\\u0000y\"}],\"tools\":%s,"
             "\"tool_choice\":\"none\"}", TOOLS);
    rc = parse_body(&r, FRIGG_OAI_CHAT, body, &e);
    CHECK(rc == 0 && ids_are(&r.prompts[0], x0y, 15), "tool_choice none: the tools stay out and the NUL byte in: %s", e.message);
    frigg_oai_req_free(&r);
    snprintf(body, sizeof body,
             "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"x\\u0000y\"}],\"tools\":%s,"
             "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}}", TOOLS);
    rc = parse_body(&r, FRIGG_OAI_CHAT, body, &e);
    CHECK(rc == 0, "a forced call after a NUL byte: %s", e.message);
    if (rc == 0) {
        size_t n = 0;
        char *text = frigg_tokenizer_decode(tok, r.prompts[0].ids, (size_t)r.prompts[0].n, &n);
        static const char tail[] = "x\0y<turn|>\n<|turn>model\n<|tool_call>call:get_time{";
        CHECK(text && n > sizeof tail && memmem(text, n, tail, sizeof tail - 1) &&
                  !memcmp(text + n - (sizeof tail - 1), tail, sizeof tail - 1),
              "the forced call is appended after the NUL byte, not cut: %zu bytes", n);
        free(text);
    }
    frigg_oai_req_free(&r);
}

/* Fields where a NUL byte makes no sense: a 400 naming the field, never a silent cut at the NUL. */
static void test_nul_refused(void) {
    static const struct { frigg_oai_kind kind; const char *body, *param; } cases[] = {
        {FRIGG_OAI_COMPLETION, "{\"model\":\"default\",\"prompt\":\"x\",\"stop\":\"a\\u0000\"}", "stop"},
        {FRIGG_OAI_COMPLETION, "{\"model\":\"default\",\"prompt\":\"x\",\"stop\":[\"b\",\"\\u0000a\"]}", "stop[1]"},
        {FRIGG_OAI_COMPLETION, "{\"model\":\"default\\u0000x\",\"prompt\":\"x\"}", "model"},
        {FRIGG_OAI_CHAT, "{\"model\":\"default\",\"messages\":[{\"role\":\"user\\u0000x\",\"content\":\"q\"}]}",
         "messages[0].role"},
        {FRIGG_OAI_CHAT, "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"name\":\"b\\u0000\",\"content\":\"q\"}]}",
         "messages[0].name"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\\u0000\",\"text\":\"q\"}]}]}",
         "messages[0].content[0].type"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null,"
         "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\\u0000g\",\"arguments\":\"{}\"}}]}]}",
         "messages[1].tool_calls[0].function.name"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null,"
         "\"tool_calls\":[{\"id\":\"c\\u0000\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
         "messages[1].tool_calls[0].id"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null,"
         "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\\u0000\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
         "messages[1].tool_calls[0].type"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"tool\","
         "\"tool_call_id\":\"c\\u0000\",\"content\":\"r\"}]}",
         "messages[1].tool_call_id"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":\"function\","
         "\"function\":{\"name\":\"get_weather\\u0000x\"}}]}",
         "tools[0].function.name"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":\"function\\u0000\","
         "\"function\":{\"name\":\"f\"}}]}",
         "tools[0].type"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":\"function\","
         "\"function\":{\"name\":\"f\"}}],\"tool_choice\":\"auto\\u0000\"}",
         "tool_choice"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":\"function\","
         "\"function\":{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\\u0000g\"}}}",
         "tool_choice.function.name"},
        {FRIGG_OAI_CHAT,
         "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"response_format\":{\"type\":"
         "\"text\\u0000\"}}",
         "response_format.type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        frigg_oai_req r;
        frigg_oai_error e;
        int rc = parse_body(&r, cases[i].kind, cases[i].body, &e);
        CHECK(rc == -1 && e.status == 400 && !strcmp(e.param, cases[i].param) && strstr(e.message, "NUL") &&
                  strstr(e.message, cases[i].param),
              "%s: want a 400 naming '%s' and the NUL byte; got rc %d, %d, param '%s': %s", cases[i].body, cases[i].param,
              rc, e.status, e.param, e.message);
        frigg_oai_req_free(&r);
    }
    /* an object key holding a NUL byte: jansson cannot hold it, and says so (not "invalid JSON") */
    frigg_oai_req r;
    frigg_oai_error e;
    int rc = parse_body(&r, FRIGG_OAI_COMPLETION, "{\"model\":\"default\",\"prompt\":\"x\",\"logit_bias\":{\"5\\u0000\":1}}", &e);
    CHECK(rc == -1 && e.status == 400 && strstr(e.message, "NUL") && strstr(e.message, "key") &&
              !strstr(e.message, "not valid JSON"),
          "a NUL byte in an object key: %d '%s'", e.status, e.message);
    frigg_oai_req_free(&r);
}

/* Generated text holding NUL bytes comes back whole, as \u0000 in the JSON: content, text, streamed deltas,
 * around tool calls, and in logprobs' tokens. */
static void make_choice_n(frigg_oai_choice *c, const char *text, size_t n) {
    memset(c, 0, sizeof *c);
    c->text = malloc(n + 1);
    memcpy(c->text, text, n);
    c->text[n] = 0;
    c->text_len = n;
    c->ids = calloc(1, sizeof(int32_t));
    strcpy(c->finish_reason, "stop");
}

/* The content of every streamed chunk, joined, *len bytes; *all (when not NULL) gets the chunks. */
static char *streamed_content(const frigg_oai_req *r, const frigg_oai_choice *c, size_t step, size_t *len, json_t **all) {
    json_t *chunks = stream_all(r, c, step);
    frigg_strbuf sb = FRIGG_STRBUF_INIT;
    size_t i;
    json_t *ch;
    json_array_foreach(chunks, i, ch) {
        json_t *c0 = json_array_get(json_object_get(ch, "choices"), 0);
        json_t *t = r->kind == FRIGG_OAI_CHAT ? json_object_get(json_object_get(c0, "delta"), "content")
                                              : json_object_get(c0, "text");
        if (json_is_string(t)) frigg_sb_put(&sb, json_string_value(t), json_string_length(t));
    }
    *len = sb.len;
    if (all) *all = chunks;
    else json_decref(chunks);
    char *s = frigg_sb_take(&sb);
    return s ? s : frigg_xstrdup("");
}

static void test_nul_responses(void) {
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    frigg_oai_req r;
    frigg_oai_error e;
    static const char txt[] = "a\0b\0";
    size_t tn = sizeof txt - 1;
    for (int kind = 0; kind < 2; kind++) {
        const char *body = kind ? "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}"
                                : "{\"model\":\"default\",\"prompt\":\"q\"}";
        CHECK(parse_body(&r, kind ? FRIGG_OAI_CHAT : FRIGG_OAI_COMPLETION, body, &e) == 0, "%s", e.message);
        frigg_oai_choice c;
        make_choice_n(&c, txt, tn);
        json_t *resp = frigg_oai_response(&r, &env, "x", 1, "default", &c);
        json_t *ch = json_array_get(json_object_get(resp, "choices"), 0);
        json_t *t = kind ? json_object_get(json_object_get(ch, "message"), "content") : json_object_get(ch, "text");
        CHECK(jstr_eq(t, txt, tn), "%s: the text \"a\\0b\\0\" came back as %zu bytes", kind ? "chat" : "completion",
              json_string_length(t));
        char *dump = json_dumps(resp, JSON_COMPACT);
        CHECK(dump && strstr(dump, "\"a\\u0000b\\u0000\""), "%s: the body writes \\u0000: %.300s", kind ? "chat" : "completion",
              dump ? dump : "");
        free(dump);
        json_decref(resp);
        for (size_t step = 1; step <= 3; step += 2) {
            size_t sl = 0;
            char *s = streamed_content(&r, &c, step, &sl, NULL);
            CHECK(sl == tn && !memcmp(s, txt, tn), "%s streamed in pieces of %zu: %zu bytes", kind ? "chat" : "completion",
                  step, sl);
            free(s);
        }
        frigg_oai_choice_free(&c);
        frigg_oai_req_free(&r);
    }
    /* with tools: the content around a call keeps its NUL bytes, the call's arguments too, and a call after a NUL
     * byte is still a call (never streamed as content) */
    CHECK(parse(&r, "") == 0, "a chat request with tools");
    static const char withcall[] = "x\0y <|tool_call>call:get_weather{city:<|\"|>O\0slo<|\"|>}<tool_call|>";
    frigg_oai_choice c;
    make_choice_n(&c, withcall, sizeof withcall - 1);
    json_t *resp = frigg_oai_response(&r, &env, "x", 1, "default", &c);
    json_t *msg = json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "message");
    json_t *calls = json_object_get(msg, "tool_calls");
    CHECK(jstr_eq(json_object_get(msg, "content"), "x\0y ", 4), "the content before the call: %zu bytes",
          json_string_length(json_object_get(msg, "content")));
    CHECK(json_array_size(calls) == 1, "the call after a NUL byte: %zu calls", json_array_size(calls));
    const char *aj = json_string_value(json_object_get(json_object_get(json_array_get(calls, 0), "function"), "arguments"));
    json_t *args = aj ? json_loads(aj, JSON_ALLOW_NUL, NULL) : NULL;
    CHECK(args && jstr_eq(json_object_get(args, "city"), "O\0slo", 5), "the call's argument keeps its NUL byte: %s",
          aj ? aj : "(none)");
    json_decref(args);
    json_decref(resp);
    for (size_t step = 1; step <= 7; step += 3) {
        size_t sl = 0;
        json_t *chunks = NULL;
        char *s = streamed_content(&r, &c, step, &sl, &chunks);
        CHECK(sl == 4 && !memcmp(s, "x\0y ", 4), "streamed in pieces of %zu: the content is %zu bytes", step, sl);
        int heads = 0;
        size_t i;
        json_t *ch;
        json_array_foreach(chunks, i, ch) {
            json_t *tc = json_object_get(json_object_get(json_array_get(json_object_get(ch, "choices"), 0), "delta"),
                                         "tool_calls");
            heads += tc && json_object_get(json_array_get(tc, 0), "id");
        }
        CHECK(heads == 1, "streamed in pieces of %zu: %d call heads", step, heads);
        free(s);
        json_decref(chunks);
    }
    frigg_oai_choice_free(&c);
    frigg_oai_req_free(&r);

    /* logprobs of the NUL byte's token (238): its token is "\u0000", its bytes [0], and it keys completions'
     * top_logprobs as itself */
    const char *b = "{\"model\":\"default\",\"prompt\":[5,6],\"max_tokens\":1,\"logprobs\":1}";
    CHECK(parse_body(&r, FRIGG_OAI_COMPLETION, b, &e) == 0, "%s", e.message);
    make_choice_n(&c, "\0", 1);
    c.ids[0] = 238;
    c.n = 1;
    c.k = 1;
    c.token_logprob = malloc(sizeof(float));
    c.token_logprob[0] = -0.25f;
    c.top_ids = malloc(sizeof(int32_t));
    c.top_ids[0] = 238;
    c.top_lps = malloc(sizeof(float));
    c.top_lps[0] = -0.25f;
    resp = frigg_oai_response(&r, &env, "x", 1, "default", &c);
    json_t *lp = json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "logprobs");
    CHECK(jstr_eq(json_array_get(json_object_get(lp, "tokens"), 0), "\0", 1), "the NUL token's logprobs token");
    json_t *top = json_array_get(json_object_get(lp, "top_logprobs"), 0);
    CHECK(json_object_size(top) == 1 && json_object_getn(top, "\0", 1), "top_logprobs keyed by the NUL token itself");
    json_decref(resp);
    frigg_oai_req_free(&r);
    b = "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"logprobs\":true,\"top_logprobs\":1}";
    CHECK(parse_body(&r, FRIGG_OAI_CHAT, b, &e) == 0, "%s", e.message);
    resp = frigg_oai_response(&r, &env, "x", 1, "default", &c);
    json_t *ent = json_array_get(json_object_get(json_object_get(json_array_get(json_object_get(resp, "choices"), 0),
                                                                  "logprobs"), "content"), 0);
    CHECK(jstr_eq(json_object_get(ent, "token"), "\0", 1) && json_array_size(json_object_get(ent, "bytes")) == 1 &&
              json_integer_value(json_array_get(json_object_get(ent, "bytes"), 0)) == 0,
          "chat logprobs of the NUL token: token \"\\u0000\", bytes [0]");
    json_decref(resp);
    frigg_oai_choice_free(&c);
    frigg_oai_req_free(&r);
}


/* ---- a forced tool call: whole, or an error; its tokens are the answer's ---- */

static int tokens_of(const char *text, size_t n) {
    int32_t *ids = NULL;
    size_t k = 0;
    if (frigg_tokenizer_encode(tok, text, n, &ids, &k)) return -1;
    free(ids);
    return (int)k;
}

static void test_forced_whole_or_error(void) {
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    frigg_oai_req r;
    frigg_oai_error e;
    CHECK(parse(&r, ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"max_tokens\":40") == 0,
          "named tool_choice with max_tokens 40");
    const int ft = tokens_of(r.forced, strlen(r.forced));
    CHECK(ft > 0 && r.forced_tokens == ft, "the forced start's tokens: %d, want %d", r.forced_tokens, ft);
    /* the prompt the client is told of (and /tokenize counts) is the rendered messages with tools, without them */
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"Vejret i Oslo?\"}]", 0, NULL), *tools = json_loads(TOOLS, 0, NULL);
    size_t pl = 0;
    char *pt = frigg_oai_chat_prompt(msgs, tools, 1, &pl, &e);
    const int pn = pt ? tokens_of(pt, pl) : -1;
    free(pt);
    CHECK(pn > 0 && r.prompts[0].n == pn + ft, "the engine's prompt is the prompt (%d) + the forced start (%d): %d", pn, ft,
          r.prompts[0].n);
    CHECK(r.prompts[0].prefix_len == pn, "the forced start is the answer's, not the bidirectional prefix: prefix %d of %d",
          r.prompts[0].prefix_len, r.prompts[0].n);
    CHECK(r.gen.max_tokens == 40 - ft, "max_tokens counts the forced start: the engine generates %d, want %d",
          r.gen.max_tokens, 40 - ft);
    /* the model stopped right after the forced start (only its stop token): an error, never markup as content */
    frigg_oai_choice c;
    make_choice(&c, "");
    c.n = 1;
    memset(&e, 0, sizeof e);
    CHECK(frigg_oai_choice_error(&r, &c, &e) == -1 && e.status == 400 && !strcmp(e.param, "tool_choice") &&
              !strcmp(e.code, "invalid_tool_call") && strstr(e.message, "ended"),
          "the model stopped inside the forced call: want a 400 naming tool_choice, got %d '%s' '%s': %s", e.status, e.param,
          e.code, e.message);
    char *cont = NULL;
    size_t cl = 0;
    json_t *cs = NULL;
    frigg_oai_finish_tools(&r, &c, &cont, &cl, &cs, "x");
    CHECK(cs == NULL && cont && !memmem(cont, cl, "<|tool_call>", 12), "an unfinished forced call's markup as content: '%s'",
          cont ? cont : "");
    free(cont);
    json_t *ej = frigg_oai_error_json(&e);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(ej, "error"), "code")) ?: "", "invalid_tool_call"),
          "the error body carries the code");
    json_decref(ej);
    frigg_oai_choice_free(&c);
    /* cut by max_tokens inside the arguments: an error that says so */
    make_choice(&c, "city:<|\"|>Aar");
    strcpy(c.finish_reason, "length");
    CHECK(frigg_oai_choice_error(&r, &c, &e) == -1 && strstr(e.message, "max_tokens"), "a forced call cut by max_tokens: %s",
          e.message);
    frigg_oai_choice_free(&c);
    /* a whole call after the forced start, then text: no error; usage counts the forced tokens as the answer's */
    make_choice(&c, "city:<|\"|>Aarhus<|\"|>}<tool_call|>");
    c.n = 6;
    free(c.ids);
    c.ids = calloc(6, sizeof(int32_t));
    CHECK(frigg_oai_choice_error(&r, &c, &e) == 0, "a whole forced call is not an error");
    int ptk = 0, ctk = 0;
    frigg_oai_usage_counts(&r, &c, &ptk, &ctk);
    CHECK(ptk == pn && ctk == 6 + ft, "usage of a forced call: prompt %d (want %d), completion %d (want %d)", ptk, pn, ctk,
          6 + ft);
    json_t *resp = frigg_oai_response(&r, &env, "x", 1, "default", &c);
    json_t *u = json_object_get(resp, "usage");
    CHECK(json_integer_value(json_object_get(u, "completion_tokens")) == 6 + ft &&
              json_integer_value(json_object_get(u, "prompt_tokens")) == pn,
          "the response's usage counts the forced tokens as completion tokens");
    json_decref(resp);
    frigg_oai_choice_free(&c);
    frigg_oai_req_free(&r);
    /* max_tokens that the forced start alone uses up: refused before anything runs */
    char extra[160];
    snprintf(extra, sizeof extra, ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"max_tokens\":%d", ft);
    char body[2048];
    snprintf(body, sizeof body,
             "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"Vejret i Oslo?\"}],\"tools\":%s%s}", TOOLS, extra);
    CHECK(parse_body(&r, FRIGG_OAI_CHAT, body, &e) == -1 && !strcmp(e.param, "max_tokens") && strstr(e.message, "forces"),
          "max_tokens %d = the forced start's tokens: want a 400 naming max_tokens, got '%s': %s", ft, e.param, e.message);
    frigg_oai_req_free(&r);
    /* required: the same, for any function */
    CHECK(parse(&r, ",\"tool_choice\":\"required\"") == 0, "tool_choice required");
    make_choice(&c, "");
    CHECK(frigg_oai_choice_error(&r, &c, &e) == -1 && !strcmp(e.param, "tool_choice"), "required, nothing after '%s'", r.forced);
    frigg_oai_choice_free(&c);
    make_choice(&c, "get_time{}<tool_call|>");
    CHECK(frigg_oai_choice_error(&r, &c, &e) == 0, "required, a whole call of get_time");
    frigg_oai_choice_free(&c);
    /* parallel calls cut off by max_tokens: the whole ones come back, finish_reason "length" */
    make_choice(&c, "get_time{}<tool_call|><|tool_call>call:get_weather{city:<|\"|>Os");
    strcpy(c.finish_reason, "length");
    CHECK(frigg_oai_choice_error(&r, &c, &e) == 0, "required, a whole call then one cut off: no error");
    {
        frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
        json_t *resp = frigg_oai_response(&r, &env, "chatcmpl-x", 1, "default", &c);
        json_t *ch = json_array_get(json_object_get(resp, "choices"), 0);
        json_t *calls = json_object_get(json_object_get(ch, "message"), "tool_calls");
        CHECK(json_array_size(calls) == 1 &&
                  !strcmp(json_string_value(json_object_get(json_object_get(json_array_get(calls, 0), "function"), "name")) ?: "",
                          "get_time") &&
                  !strcmp(json_string_value(json_object_get(ch, "finish_reason")) ?: "", "length"),
              "the whole call, finish_reason length");
        json_decref(resp);
    }
    frigg_oai_choice_free(&c);
    make_choice(&c, "get_time{}<tool_call|><|tool_call>call:get_time{}<tool_call|>");
    CHECK(frigg_oai_choice_error(&r, &c, &e) == 0, "required, two whole calls");
    frigg_oai_choice_free(&c);
    frigg_oai_req_free(&r);
    /* tool_choice auto: nothing is forced, nothing counted, a malformed call stays content (no error) */
    CHECK(parse(&r, "") == 0 && r.forced_tokens == 0, "auto: no forced tokens");
    make_choice(&c, "<|tool_call>call:get_weather{city:");
    CHECK(frigg_oai_choice_error(&r, &c, &e) == 0, "auto: a malformed call is content, not an error");
    frigg_oai_choice_free(&c);
    frigg_oai_req_free(&r);
    json_decref(msgs);
    json_decref(tools);
}

/* ---- null is absent; the no-op fields ---- */

static void test_null_and_noop_fields(void) {
    frigg_oai_req r;
    frigg_oai_error e;
    static const char *const chat_nulls[] = {
        "response_format", "functions", "function_call", "audio", "modalities", "prediction", "reasoning_effort",
        "web_search_options", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "n", "stop",
        "repetition_penalty", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "stream",
        "stream_options", "tools", "tool_choice", "parallel_tool_calls", "prefix_tokens", "user", "metadata", "store",
        "service_tier", "prompt_cache_key", "prompt_cache_retention", "safety_identifier", "verbosity"};
    for (size_t i = 0; i < sizeof chat_nulls / sizeof *chat_nulls; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"%s\":null}",
                 chat_nulls[i]);
        CHECK(parse_body(&r, FRIGG_OAI_CHAT, body, &e) == 0, "chat '%s': null is absent, got a %d: %s", chat_nulls[i],
              e.status, e.message);
        frigg_oai_req_free(&r);
    }
    static const char *const compl_nulls[] = {
        "max_tokens", "temperature", "top_p", "top_k", "seed", "n", "stop", "repetition_penalty", "frequency_penalty",
        "presence_penalty", "logit_bias", "logprobs", "stream", "stream_options", "prefix_tokens", "user", "echo",
        "best_of", "suffix", "metadata", "store", "service_tier", "min_p", "guided_json", "min_tokens", "ignore_eos"};
    for (size_t i = 0; i < sizeof compl_nulls / sizeof *compl_nulls; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"default\",\"prompt\":\"q\",\"%s\":null}", compl_nulls[i]);
        CHECK(parse_body(&r, FRIGG_OAI_COMPLETION, body, &e) == 0, "completions '%s': null is absent, got a %d: %s",
              compl_nulls[i], e.status, e.message);
        frigg_oai_req_free(&r);
    }
    /* null is absent, not a way past the refusal: a value is still refused by name */
    CHECK(parse_body(&r, FRIGG_OAI_CHAT,
                     "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"reasoning_effort\":\"low\"}",
                     &e) == -1 && !strcmp(e.param, "reasoning_effort"),
          "reasoning_effort \"low\" is still refused: '%s'", e.param);
    frigg_oai_req_free(&r);
    /* the no-op fields, with values */
    const char *ok =
        "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"prompt_cache_key\":\"k1\","
        "\"safety_identifier\":\"user-7\",\"verbosity\":\"low\",\"prompt_cache_retention\":\"24h\",\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true,\"include_obfuscation\":false}}";
    CHECK(parse_body(&r, FRIGG_OAI_CHAT, ok, &e) == 0 && r.include_usage, "the no-op fields: %s", e.message);
    frigg_oai_req_free(&r);
    CHECK(parse_body(&r, FRIGG_OAI_COMPLETION,
                     "{\"model\":\"default\",\"prompt\":\"q\",\"stream\":true,\"stream_options\":{\"include_obfuscation\":true}}",
                     &e) == 0,
          "completions' stream_options.include_obfuscation: %s", e.message);
    frigg_oai_req_free(&r);
    static const struct { const char *field, *param; } wrong[] = {
        {"\"verbosity\":\"loud\"", "verbosity"},
        {"\"verbosity\":\"low\\u0000\"", "verbosity"},
        {"\"prompt_cache_key\":5", "prompt_cache_key"},
        {"\"safety_identifier\":[]", "safety_identifier"},
        {"\"prompt_cache_retention\":\"forever\"", "prompt_cache_retention"},
        {"\"stream\":true,\"stream_options\":{\"include_obfuscation\":\"yes\"}", "include_obfuscation"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],%s}",
                 wrong[i].field);
        CHECK(parse_body(&r, FRIGG_OAI_CHAT, body, &e) == -1 && e.status == 400 && !strcmp(e.param, wrong[i].param),
              "%s: want a 400 naming '%s', got '%s': %s", wrong[i].field, wrong[i].param, e.param, e.message);
        frigg_oai_req_free(&r);
    }
}

/* ---- a function's keys ---- */

static void test_function_keys(void) {
    frigg_oai_req r;
    frigg_oai_error e;
    static const struct { const char *fn, *param, *says; } cases[] = {
        {"{\"name\":\"f\",\"strict\":true}", "tools[0].function.strict", "grammar cache"},
        {"{\"name\":\"f\",\"strict\":\"yes\"}", "tools[0].function.strict", "boolean"},
        {"{\"name\":\"f\",\"paramters\":{}}", "tools[0].function.paramters", "paramters"},
        {"{\"name\":\"f\",\"description\":\"d\",\"returns\":{\"type\":\"string\"}}", "tools[0].function.returns", "returns"},
        {"{\"name\":\"f\",\"strict\":false}", NULL, NULL},
        {"{\"name\":\"f\",\"strict\":null,\"description\":\"d\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}", NULL,
         NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":\"function\","
                 "\"function\":%s}]}", cases[i].fn);
        int rc = parse_body(&r, FRIGG_OAI_CHAT, body, &e);
        if (cases[i].param)
            CHECK(rc == -1 && e.status == 400 && !strcmp(e.param, cases[i].param) && strstr(e.message, cases[i].says),
                  "function %s: want a 400 naming '%s' saying '%s', got %d '%s': %s", cases[i].fn, cases[i].param,
                  cases[i].says, rc, e.param, e.message);
        else
            CHECK(rc == 0, "function %s: accepted, got %s", cases[i].fn, e.message);
        frigg_oai_req_free(&r);
        /* the same check where /tokenize renders tools */
        json_t *tools = json_pack("[{s:s,s:o}]", "type", "function", "function", json_loads(cases[i].fn, 0, NULL));
        json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"q\"}]", 0, NULL);
        size_t pl = 0;
        memset(&e, 0, sizeof e);
        char *pt = frigg_oai_chat_prompt(msgs, tools, 1, &pl, &e);
        /* strict: true is about decoding; rendering (and so /tokenize) takes it */
        int render_refuses = cases[i].param && strcmp(cases[i].says, "grammar cache");
        CHECK(render_refuses ? !pt && !strcmp(e.param, cases[i].param) : pt != NULL,
              "frigg_oai_chat_prompt with function %s: '%s' %s", cases[i].fn, e.param, e.message);
        free(pt);
        json_decref(tools);
        json_decref(msgs);
    }
}

/* strict: true where the call is decoded under its schema (tool_choice forcing it, a grammar cache), refused where
 * it is not; a tool's own unknown keys refused by name */
static void test_strict_tools(void) {
    frigg_gcache *gc = frigg_oai_gcache_new(tok, &cfg);
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512, .gcache = gc};
    static const struct { const char *extra; int ok; const char *param; } cases[] = {
        {"\"tool_choice\":\"required\"", 1, NULL},
        {"\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}", 1, NULL},
        {"\"tool_choice\":\"auto\"", 2, NULL},
        {"\"parallel_tool_calls\":false", 2, NULL},
        {"\"tool_choice\":\"none\"", 0, "tools[0].function.strict"},
        {"\"response_format\":{\"type\":\"json_object\"}", 0, "response_format"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":"
                 "\"function\",\"function\":{\"name\":\"f\",\"strict\":true,\"parameters\":{\"type\":\"object\","
                 "\"properties\":{\"x\":{\"type\":\"integer\"}},\"required\":[\"x\"]}}}],%s}", cases[i].extra);
        frigg_oai_req r;
        frigg_oai_error e;
        memset(&e, 0, sizeof e);
        int rc = frigg_oai_parse(&r, FRIGG_OAI_CHAT, body, strlen(body), &env, &e);
        if (cases[i].ok)
            CHECK(rc == 0 && r.gen.grammar && r.gen.lazy_grammar == (cases[i].ok == 2), "strict with %s: accepted under "
                  "the tool's grammar (lazy: %d), got %s", cases[i].extra, r.gen.lazy_grammar, e.message);
        if (rc == 0 && r.gen.lazy_grammar) {
            /* auto: the grammar starts after a generated <|tool_call>, at its call: */
            CHECK(r.gen.grammar_trigger == frigg_tokenizer_token_to_id(tok, "<|tool_call>"), "the trigger is <|tool_call>");
            frigg_gmatcher *m = frigg_gmatcher_new(frigg_gref_grammar(r.gen.grammar));
            const char *d = "call:f{<|\"|>x<|\"|>:12}<tool_call|>";
            CHECK(frigg_gmatcher_advance(m, d, strlen(d)) == 0 && frigg_gmatcher_can_end(m), "auto: %s is a whole call", d);
            CHECK(frigg_gmatcher_is_done(m) == (strstr(cases[i].extra, "parallel") != NULL),
                  "auto %s: more calls may follow unless parallel_tool_calls is false", cases[i].extra);
            frigg_gmatcher_free(m);
            m = frigg_gmatcher_new(frigg_gref_grammar(r.gen.grammar));
            CHECK(frigg_gmatcher_advance(m, "call:f{<|\"|>x<|\"|>:<|\"|>", 23) == -1, "auto: the arguments follow the schema");
            frigg_gmatcher_free(m);
        }
        if (!cases[i].ok)
            CHECK(rc == -1 && e.status == 400 && !strcmp(e.param, cases[i].param), "strict with %s: a 400 naming %s, "
                  "got %d '%s' %s", cases[i].extra, cases[i].param, rc, e.param, e.message);
        frigg_oai_req_free(&r);
    }
    /* without a grammar cache (no tokenizer to build masks from) a forced call is not constrained either */
    frigg_oai_req r;
    frigg_oai_error e;
    CHECK(parse_body(&r, FRIGG_OAI_CHAT,
                     "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":"
                     "\"function\",\"function\":{\"name\":\"f\",\"strict\":true}}],\"tool_choice\":\"required\"}",
                     &e) == -1 && !strcmp(e.param, "tools[0].function.strict"),
          "strict, forced, no grammar cache: a 400, got '%s' %s", e.param, e.message);
    frigg_oai_req_free(&r);
    CHECK(parse_body(&r, FRIGG_OAI_CHAT,
                     "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":"
                     "\"function\",\"function\":{\"name\":\"f\"},\"strict\":true}]}",
                     &e) == -1 && !strcmp(e.param, "tools[0].strict") && strstr(e.message, "unknown field"),
          "a tool's own unknown key: a 400 naming it, got '%s' %s", e.param, e.message);
    frigg_oai_req_free(&r);
    frigg_gcache_free(gc);
}

/* ---- logprobs of byte-fallback tokens; completions' top_logprobs hold the sampled token ---- */

static void test_logprob_bytes(void) {
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    frigg_oai_req r;
    frigg_oai_error e;
    const int32_t e2 = frigg_tokenizer_token_to_id(tok, "<0xE2>"), x82 = frigg_tokenizer_token_to_id(tok, "<0x82>"),
                  xac = frigg_tokenizer_token_to_id(tok, "<0xAC>");
    CHECK(e2 >= 0 && x82 >= 0 && xac >= 0, "the byte tokens of the euro sign");
    /* chat: the euro sign as three byte tokens */
    const char *cb = "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"logprobs\":true,\"top_logprobs\":1}";
    CHECK(parse_body(&r, FRIGG_OAI_CHAT, cb, &e) == 0, "%s", e.message);
    frigg_oai_choice c;
    make_choice(&c, "\xE2\x82\xAC");
    free(c.ids);
    c.n = 3;
    c.k = 1;
    c.ids = malloc(3 * sizeof(int32_t));
    c.ids[0] = e2, c.ids[1] = x82, c.ids[2] = xac;
    c.token_logprob = malloc(3 * sizeof(float));
    c.top_ids = malloc(3 * sizeof(int32_t));
    c.top_lps = malloc(3 * sizeof(float));
    for (int i = 0; i < 3; i++) c.token_logprob[i] = -9.0f, c.top_ids[i] = 300, c.top_lps[i] = -0.5f;
    json_t *resp = frigg_oai_response(&r, &env, "x", 1, "default", &c);
    json_t *content = json_object_get(json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "logprobs"), "content");
    static const int want[3] = {0xE2, 0x82, 0xAC};
    for (int i = 0; i < 3; i++) {
        json_t *bytes = json_object_get(json_array_get(content, (size_t)i), "bytes");
        CHECK(json_array_size(bytes) == 1 && json_integer_value(json_array_get(bytes, 0)) == want[i],
              "chat logprobs entry %d: bytes [%d] of its byte token, got %zu bytes, first %lld", i, want[i],
              json_array_size(bytes), (long long)json_integer_value(json_array_get(bytes, 0)));
    }
    json_decref(resp);
    frigg_oai_req_free(&r);
    /* completions: text_offset in characters of the text (the euro sign is one), the sampled token in top_logprobs */
    const char *pb = "{\"model\":\"default\",\"prompt\":[5,6],\"max_tokens\":3,\"logprobs\":1}";
    CHECK(parse_body(&r, FRIGG_OAI_COMPLETION, pb, &e) == 0, "%s", e.message);
    resp = frigg_oai_response(&r, &env, "x", 1, "default", &c);
    json_t *lp = json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "logprobs");
    json_t *offs = json_object_get(lp, "text_offset");
    CHECK(json_integer_value(json_array_get(offs, 0)) == 0 && json_integer_value(json_array_get(offs, 1)) == 1 &&
              json_integer_value(json_array_get(offs, 2)) == 1,
          "text_offset of the euro sign's three byte tokens: 0 1 1");
    size_t tn = 0;
    char *t300 = frigg_tokenizer_decode(tok, (const int32_t[]){300}, 1, &tn);
    json_t *top0 = json_array_get(json_object_get(lp, "top_logprobs"), 0);
    CHECK(json_object_size(top0) == 2 && json_object_getn(top0, t300, tn) && json_object_get(top0, "\xEF\xBF\xBD") &&
              json_real_value(json_object_get(top0, "\xEF\xBF\xBD")) == -9.0,
          "completions top_logprobs hold the k best and the sampled token: %zu entries", json_object_size(top0));
    json_decref(resp);
    /* a sampled token among the k best is not repeated */
    for (int i = 0; i < 3; i++) c.ids[i] = 300;
    resp = frigg_oai_response(&r, &env, "x", 1, "default", &c);
    top0 = json_array_get(json_object_get(json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "logprobs"),
                                          "top_logprobs"), 0);
    CHECK(json_object_size(top0) == 1, "the sampled token among the k best: %zu entries", json_object_size(top0));
    json_decref(resp);
    frigg_oai_req_free(&r);
    /* logprobs 0: the sampled token alone */
    pb = "{\"model\":\"default\",\"prompt\":[5,6],\"max_tokens\":3,\"logprobs\":0}";
    CHECK(parse_body(&r, FRIGG_OAI_COMPLETION, pb, &e) == 0, "%s", e.message);
    c.ids[0] = e2;
    resp = frigg_oai_response(&r, &env, "x", 1, "default", &c);
    top0 = json_array_get(json_object_get(json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "logprobs"),
                                          "top_logprobs"), 0);
    CHECK(json_object_size(top0) == 1 && json_object_get(top0, "\xEF\xBF\xBD"), "logprobs 0: the sampled token alone");
    json_decref(resp);
    free(t300);
    frigg_oai_choice_free(&c);
    frigg_oai_req_free(&r);
}

/* ---- response_format: compiled through the env's grammar cache ---- */

static int parse_rf(frigg_oai_req *r, frigg_oai_kind kind, const char *rf, frigg_gcache *gc, frigg_oai_error *e) {
    char body[2048];
    if (kind == FRIGG_OAI_CHAT)
        snprintf(body, sizeof body,
                 "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"response_format\":%s}", rf);
    else
        snprintf(body, sizeof body, "{\"model\":\"default\",\"prompt\":\"q\",\"response_format\":%s}", rf);
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512, .gcache = gc};
    memset(e, 0, sizeof *e);
    return frigg_oai_parse(r, kind, body, strlen(body), &env, e);
}

static void test_response_format(void) {
    /* FRIGG_GRAMMAR_PRECOMPUTE takes 0 or 1; anything else is an error, never a silent default */
    setenv("FRIGG_GRAMMAR_PRECOMPUTE", "yes", 1);
    frigg_gcache *bad_env = frigg_oai_gcache_new(tok, &cfg);
    CHECK(!bad_env && strstr(frigg_error(), "FRIGG_GRAMMAR_PRECOMPUTE is 'yes'"), "FRIGG_GRAMMAR_PRECOMPUTE=yes: %s",
          bad_env ? "accepted" : frigg_error());
    frigg_gcache_free(bad_env);
    unsetenv("FRIGG_GRAMMAR_PRECOMPUTE");
    frigg_gcache *gc = frigg_oai_gcache_new(tok, &cfg);
    frigg_oai_req r;
    frigg_oai_error e;
    const char *S = "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"strict\":true,\"schema\":{\"type\":\"object\","
                    "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}";
    for (int k = FRIGG_OAI_CHAT; k <= FRIGG_OAI_COMPLETION; k++) {
        CHECK(parse_rf(&r, (frigg_oai_kind)k, S, gc, &e) == 0 && r.gen.grammar, "%s json_schema: accepted with a grammar: %s",
              k == FRIGG_OAI_CHAT ? "chat" : "completions", e.message);
        frigg_oai_req_free(&r);
        CHECK(parse_rf(&r, (frigg_oai_kind)k, "{\"type\":\"json_object\"}", gc, &e) == 0 && r.gen.grammar,
              "json_object: accepted with a grammar: %s", e.message);
        frigg_oai_req_free(&r);
        CHECK(parse_rf(&r, (frigg_oai_kind)k, "{\"type\":\"text\"}", gc, &e) == 0 && !r.gen.grammar, "text: no grammar");
        frigg_oai_req_free(&r);
    }
    int entries = 0;
    long hits = 0, compiles = 0;
    frigg_gcache_stats(gc, &entries, &hits, &compiles);
    CHECK(entries == 2 && compiles == 2 && hits == 2, "a repeated schema is compiled once: %d entries, %ld compiles, %ld hits",
          entries, compiles, hits);
    /* the cache's worker computes a new grammar's masks of every stack top beside the requests (gcache.c) */
    CHECK(parse_rf(&r, FRIGG_OAI_CHAT, S, gc, &e) == 0 && r.gen.grammar, "json_schema again: %s", e.message);
    if (r.gen.grammar) {
        frigg_gmask_stats st = {0};
        double t0 = frigg_now_ms();
        do {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
            frigg_gmasker_stats(frigg_gref_masker(r.gen.grammar), &st);
        } while (!(st.classes > 0 && st.misses >= st.classes) && frigg_now_ms() - t0 < 30000);
        CHECK(st.classes > 0 && st.misses >= st.classes, "the worker precomputed every class's mask: %ld walks, %d classes",
              st.misses, st.classes);
    }
    frigg_oai_req_free(&r);
    /* refusals: 400, invalid_request_error, the param, the problem named */
    static const struct { const char *rf, *param, *needle; } bad[] = {
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":{\"type\":\"object\",\"frobnicate\":1}}}",
         "response_format", "unsupported keyword 'frobnicate'"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":{\"type\":\"string\",\"format\":\"uri\"}}}",
         "response_format", "format 'uri'"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":\"no\"}}", "response_format.json_schema.schema",
         "must be a JSON Schema"},
        {"{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}}", "response_format.json_schema.name", "name"},
        {"{\"type\":\"json_schema\"}", "response_format.json_schema", "must be an object"},
        {"{\"type\":\"yaml\"}", "response_format.type", "must be"},
        {"{\"type\":\"json_object\",\"extra\":1}", "response_format", "unknown member \"extra\""},
        {"[]", "response_format", "must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = parse_rf(&r, FRIGG_OAI_CHAT, bad[i].rf, gc, &e);
        CHECK(rc == -1 && e.status == 400 && !strcmp(e.type, "invalid_request_error") && !strcmp(e.param, bad[i].param) &&
                  strstr(e.message, bad[i].needle),
              "%s: want a 400 param '%s' naming '%s'; got rc %d, %d, param '%s': %s", bad[i].rf, bad[i].param,
              bad[i].needle, rc, e.status, e.param, e.message);
        frigg_oai_req_free(&r);
    }
    /* without a grammar cache (no tokenizer), and beside a forced tool call */
    CHECK(parse_rf(&r, FRIGG_OAI_COMPLETION, "{\"type\":\"json_object\"}", NULL, &e) == -1 && e.status == 400 &&
              !strcmp(e.param, "response_format"),
          "json_object without a grammar cache: a 400, got %d %s", e.status, e.message);
    frigg_oai_req_free(&r);
    char body[2048];
    snprintf(body, sizeof body,
             "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":%s,"
             "\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}}", TOOLS);
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512, .gcache = gc};
    CHECK(frigg_oai_parse(&r, FRIGG_OAI_CHAT, body, strlen(body), &env, &e) == -1 && e.status == 400 &&
              !strcmp(e.param, "response_format"),
          "json_object with a forced tool call: a 400, got %d %s", e.status, e.message);
    frigg_oai_req_free(&r);
    /* a forced tool call: a grammar of the call in the chat template's syntax; a named one's forced start ends at
     * the name */
    snprintf(body, sizeof body,
             "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":%s,"
             "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}}", TOOLS);
    CHECK(frigg_oai_parse(&r, FRIGG_OAI_CHAT, body, strlen(body), &env, &e) == 0 && r.gen.grammar && r.forced &&
              !strcmp(r.forced, "<|tool_call>call:get_weather"),
          "named tool_choice: a grammar, forced '%s': %s", r.forced ? r.forced : "(none)", e.message);
    if (r.gen.grammar) {
        static const struct { const char *doc; int ok; } docs[] = {
            {"{<|\"|>city<|\"|>:<|\"|>Aarhus<|\"|>}<tool_call|>", 1}, {"{}<tool_call|>", 1},
            {"{\"city\":\"Aarhus\"}<tool_call|>", 0}, {"{<|\"|>town<|\"|>:1}<tool_call|>", 0},
            {"{<|\"|>city<|\"|>:<|\"|>a<b<|\"|>}<tool_call|>", 0}};
        for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
            frigg_gmatcher *m = frigg_gmatcher_new(frigg_gref_grammar(r.gen.grammar));
            int ok = frigg_gmatcher_advance(m, docs[i].doc, strlen(docs[i].doc)) == 0 && frigg_gmatcher_can_end(m);
            CHECK(ok == docs[i].ok, "the get_weather call grammar %s %s", docs[i].ok ? "refuses" : "takes", docs[i].doc);
            frigg_gmatcher_free(m);
        }
    }
    frigg_oai_req_free(&r);
    snprintf(body, sizeof body,
             "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":%s,"
             "\"tool_choice\":\"required\"}", TOOLS);
    CHECK(frigg_oai_parse(&r, FRIGG_OAI_CHAT, body, strlen(body), &env, &e) == 0 && r.gen.grammar && r.forced &&
              !strcmp(r.forced, "<|tool_call>call:"),
          "tool_choice required: a grammar: %s", e.message);
    if (r.gen.grammar) {
        /* parallel_tool_calls (default true): more calls may follow the first, back to back */
        frigg_gmatcher *m = frigg_gmatcher_new(frigg_gref_grammar(r.gen.grammar));
        const char *d = "get_time{}<tool_call|>";
        CHECK(frigg_gmatcher_advance(m, d, strlen(d)) == 0 && frigg_gmatcher_can_end(m) && !frigg_gmatcher_is_done(m),
              "required: %s is a whole call, and another may follow", d);
        const char *d2 = "<|tool_call>call:get_weather{<|\"|>city<|\"|>:<|\"|>Oslo<|\"|>}<tool_call|>";
        CHECK(frigg_gmatcher_advance(m, d2, strlen(d2)) == 0 && frigg_gmatcher_can_end(m), "required: a second call");
        CHECK(frigg_gmatcher_advance(m, "<|tool_call>call:get_date{", 26) == -1, "required: a third call only of the tools");
        frigg_gmatcher_free(m);
        /* the same by tokens: <|tool_call> is its special token in the call vocabulary */
        int32_t open = frigg_tokenizer_token_to_id(tok, "<|tool_call>");
        if (open >= 0) {
            m = frigg_gmatcher_new(frigg_gref_grammar(r.gen.grammar));
            CHECK(frigg_gmatcher_advance(m, d, strlen(d)) == 0 &&
                      frigg_gmatcher_advance_token(m, frigg_gref_vocab(r.gen.grammar), open) == 0 &&
                      frigg_gmatcher_advance(m, "call:get_time{}<tool_call|>", 27) == 0 && frigg_gmatcher_can_end(m),
                  "required: <|tool_call> by its token id %d opens a second call", open);
            frigg_gmatcher_free(m);
        }
        m = frigg_gmatcher_new(frigg_gref_grammar(r.gen.grammar));
        CHECK(frigg_gmatcher_advance(m, "get_date{", 9) == -1, "required: only the tools' names");
        frigg_gmatcher_free(m);
    }
    frigg_oai_req_free(&r);
    /* parallel_tool_calls false, and a named function: one call, then only the end */
    const char *one_call[] = {"\"tool_choice\":\"required\",\"parallel_tool_calls\":false",
                              "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}"};
    for (int k = 0; k < 2; k++) {
        snprintf(body, sizeof body,
                 "{\"model\":\"default\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":%s,%s}", TOOLS,
                 one_call[k]);
        CHECK(frigg_oai_parse(&r, FRIGG_OAI_CHAT, body, strlen(body), &env, &e) == 0 && r.gen.grammar, "%s: a grammar: %s",
              one_call[k], e.message);
        if (r.gen.grammar) {
            frigg_gmatcher *m = frigg_gmatcher_new(frigg_gref_grammar(r.gen.grammar));
            const char *d = k ? "{}<tool_call|>" : "get_time{}<tool_call|>";
            CHECK(frigg_gmatcher_advance(m, d, strlen(d)) == 0 && frigg_gmatcher_is_done(m), "%s: one whole call, then the end",
                  one_call[k]);
            frigg_gmatcher_free(m);
        }
        frigg_oai_req_free(&r);
    }
    frigg_gcache_free(gc);
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
        test_nul_prompts();
        test_nul_refused();
        test_nul_responses();
        test_forced_whole_or_error();
        test_null_and_noop_fields();
        test_function_keys();
    test_strict_tools();
        test_logprob_bytes();
        test_response_format();
        frigg_tokenizer_free(tok);
    }
    free(tj);
    free(cj);
    TEST_MAIN_END();
}
