/* test_toolcall.c — the tool-call parser: render -> parse round trips over every tool call in the
 * chat golden set (the model's side of each rendered call must parse back to the same name and
 * arguments), exact results on hand-written outputs, and a clear error for each kind of
 * malformed call. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "harness.h"
#include "run/gcache.h"
#include "run/seqgen.h"
#include "tokenizer/tokenizer.h"
#include "chat/toolcall.h"
#include "engine/cpu_ops.h"
#include "base/util.h"

/* Strings containing the <|"|> delimiter cannot round-trip: the template does not escape it. */
static int holds_delimiter(const json_t *v) {
    if (json_is_string(v)) return strstr(json_string_value(v), "<|\"|>") != NULL;
    size_t i;
    const char *k;
    json_t *e;
    if (json_is_array(v)) json_array_foreach(v, i, e) if (holds_delimiter(e)) return 1;
    if (json_is_object(v))
        json_object_foreach((json_t *)v, k, e) if (holds_delimiter(e) || strchr(k, ':')) return 1;
    return 0;
}

/* Render [user, assistant{tool_calls}] and cut out what the model generated: the text after the
 * last "<|turn>model\n", without the "<|tool_response>" the template appends (stop id 50). */
static int round_trip(const json_t *calls, const char *where) {
    json_t *msgs = json_pack("[{s:s,s:s},{s:s,s:s,s:O}]", "role", "user", "content", "q", "role", "assistant",
                             "content", "", "tool_calls", calls);
    char *r = frigg_chat_render(msgs, NULL, 0);
    json_decref(msgs);
    CHECK(r != NULL, "%s: render failed: %s", where, frigg_error());
    if (!r) return 0;
    char *gen = strstr(r, "<|turn>model\n") + strlen("<|turn>model\n");
    size_t gl = strlen(gen);
    CHECK(gl >= 16 && !strcmp(gen + gl - 16, "<|tool_response>"), "%s: no pending <|tool_response>", where);
    gen[gl - 16] = 0;
    char *content = NULL;
    json_t *parsed = frigg_parse_tool_calls(gen, &content);
    CHECK(parsed != NULL, "%s: parse failed: %s\n    text: %.300s", where, frigg_error(), gen);
    int ok = 0;
    if (parsed) {
        CHECK(json_array_size(parsed) == json_array_size(calls), "%s: %zu calls parsed, %zu rendered", where,
              json_array_size(parsed), json_array_size(calls));
        CHECK(content && !content[0], "%s: content should be empty, got \"%s\"", where, content);
        size_t i;
        json_t *pc;
        ok = 1;
        json_array_foreach(parsed, i, pc) {
            json_t *want = json_array_get(calls, i);
            json_t *fn = json_object_get(pc, "function");
            const char *wname = json_string_value(json_object_get(json_object_get(want, "function"), "name"));
            const char *args = json_string_value(json_object_get(fn, "arguments"));
            json_t *got_args = args ? json_loads(args, 0, NULL) : NULL;
            json_t *want_args = json_object_get(json_object_get(want, "function"), "arguments");
            char id[32];
            snprintf(id, sizeof id, "call_%zu", i);
            int same = wname && !strcmp(json_string_value(json_object_get(fn, "name")), wname) && got_args &&
                       json_equal(got_args, want_args) &&
                       !strcmp(json_string_value(json_object_get(pc, "id")), id) &&
                       !strcmp(json_string_value(json_object_get(pc, "type")), "function");
            CHECK(same, "%s: call %zu differs: arguments %s", where, i, args ? args : "(none)");
            ok &= same;
            json_decref(got_args);
        }
        json_decref(parsed);
    }
    free(content);
    free(r);
    return ok;
}

static void test_golden_round_trips(void) {
    char *path = th_path(th_root(), "golden/chat/conversations.jsonl");
    size_t len;
    char *data = frigg_read_file(path, &len);
    free(path);
    CHECK(data != NULL, "golden/chat/conversations.jsonl: %s", frigg_error());
    if (!data) return;
    int tested = 0, skipped = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *rec = json_loads(line, 0, NULL);
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(rec, "messages"), i, m) {
            json_t *calls = json_object_get(m, "tool_calls");
            if (!json_is_array(calls) || !json_array_size(calls)) continue;
            size_t j;
            json_t *c;
            int usable = 1;
            json_array_foreach(calls, j, c) {
                json_t *args = json_object_get(json_object_get(c, "function"), "arguments");
                if (!json_is_object(args) || holds_delimiter(args)) usable = 0;
            }
            if (!usable) {
                skipped++;
                continue;
            }
            char where[200];
            snprintf(where, sizeof where, "%s messages[%zu]", json_string_value(json_object_get(rec, "name")), i);
            round_trip(calls, where);
            tested++;
        }
        json_decref(rec);
    }
    free(data);
    CHECK(tested >= 15, "only %d golden tool-call messages round-tripped (%d skipped)", tested, skipped);
}

/* Parse text; expect the given calls JSON (names + arguments as JSON text) and content. */
static void expect_calls(const char *text, const char *want_json, const char *want_content) {
    char *content = NULL;
    json_t *got = frigg_parse_tool_calls(text, &content);
    CHECK(got != NULL, "\"%s\": %s", text, frigg_error());
    if (!got) return;
    json_t *want = json_loads(want_json, 0, NULL);
    CHECK(want != NULL, "bad test JSON %s", want_json);
    CHECK(json_array_size(got) == json_array_size(want), "\"%s\": %zu calls", text, json_array_size(got));
    size_t i;
    json_t *w;
    json_array_foreach(want, i, w) {
        json_t *fn = json_object_get(json_array_get(got, i), "function");
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        json_t *ga = args ? json_loads(args, 0, NULL) : NULL;
        CHECK(fn && !strcmp(json_string_value(json_object_get(fn, "name")), json_string_value(json_array_get(w, 0))) &&
                  ga && json_equal(ga, json_array_get(w, 1)),
              "\"%s\": call %zu is %s(%s)", text, i, json_string_value(json_object_get(fn, "name")), args);
        json_decref(ga);
    }
    CHECK(content && !strcmp(content, want_content), "\"%s\": content \"%s\", want \"%s\"", text, content, want_content);
    json_decref(want);
    json_decref(got);
    free(content);
}

static void expect_error(const char *text, const char *want_in_error) {
    char *content = (char *)"untouched";
    json_t *got = frigg_parse_tool_calls(text, &content);
    CHECK(got == NULL, "\"%s\" should be malformed", text);
    CHECK(content == NULL, "\"%s\": content must be NULL on error", text);
    CHECK(got || strstr(frigg_error(), want_in_error), "\"%s\": error \"%s\" should mention \"%s\"", text,
          frigg_error(), want_in_error);
    json_decref(got);
}

static void test_parse_cases(void) {
    expect_calls("Hej med dig.", "[]", "Hej med dig.");
    expect_calls("", "[]", "");
    expect_calls("<|tool_call>call:f{}<tool_call|>", "[[\"f\",{}]]", "");
    expect_calls("Lad mig se. <|tool_call>call:get_weather{city:<|\"|>Aarhus<|\"|>,days:3}<tool_call|> og "
                 "<|tool_call>call:g{x:None,y:true,z:false,w:[1,-2.5e-07,<|\"|>a<|\"|>],v:{A:{}}}<tool_call|>!",
                 "[[\"get_weather\",{\"city\":\"Aarhus\",\"days\":3}],"
                 "[\"g\",{\"x\":null,\"y\":true,\"z\":false,\"w\":[1,-2.5e-07,\"a\"],\"v\":{\"A\":{}}}]]",
                 "Lad mig se.  og !");
    /* escaped-key form, Python literals, whitespace around values, raw quotes/backslashes/newlines */
    expect_calls("<|tool_call>call:f{<|\"|>k<|\"|>:True, b : [ 1 , None ] ,c:<|\"|>say \"hi\" \\ \n\t<|\"|>}<tool_call|>",
                 "[[\"f\",{\"k\":true,\"b\":[1,null],\"c\":\"say \\\"hi\\\" \\\\ \\n\\t\"}]]", "");
    expect_calls("<|tool_call>call:f{a:<|\"|><|\"|>,\xc3\xa6" "ble:<|\"|>\xf0\x9f\x98\x8a<|\"|>,n:0,m:-0.0,e:1e+20}<tool_call|>",
                 "[[\"f\",{\"a\":\"\",\"\xc3\xa6" "ble\":\"\xf0\x9f\x98\x8a\",\"n\":0,\"m\":-0.0,\"e\":1e20}]]", "");
    /* numbers keep their digits in the arguments JSON */
    json_t *r = frigg_parse_tool_calls("<|tool_call>call:f{x:0.1,y:1e-05}<tool_call|>", NULL);
    const char *args = json_string_value(json_object_get(json_object_get(json_array_get(r, 0), "function"), "arguments"));
    CHECK(args && !strcmp(args, "{\"x\":0.1,\"y\":1e-05}"), "arguments text %s", args);
    CHECK(!strcmp(json_string_value(json_object_get(json_array_get(r, 0), "id")), "call_0"), "id");
    json_decref(r);

    expect_error("<|tool_call>call:f{a:1}", "expected <tool_call|>");
    expect_error("<|tool_call>call:f{a:<|\"|>open", "unterminated <|\"|> string");
    expect_error("<|tool_call>f{a:1}<tool_call|>", "call:");
    expect_error("<|tool_call>call:{a:1}<tool_call|>", "empty function name");
    expect_error("<|tool_call>call:f g{a:1}<tool_call|>", "function name");
    expect_error("<|tool_call>call:f", "expected '{'");
    expect_error("<|tool_call>call:f{a:Aarhus}<tool_call|>", "expected a value");
    expect_error("<|tool_call>call:f{a:truex}<tool_call|>", "unquoted text");
    expect_error("<|tool_call>call:f{a:1,}<tool_call|>", "expected key:value");
    expect_error("<|tool_call>call:f{a:1 b:2}<tool_call|>", "expected ',' or '}'");
    expect_error("<|tool_call>call:f{a}<tool_call|>", "expected key:value");
    expect_error("<|tool_call>call:f{a:[1,2}<tool_call|>", "expected ',' or ']'");
    expect_error("<|tool_call>call:f{a:{b:1}<tool_call|>", "expected ',' or '}'");
    expect_error("<|tool_call>call:f{a:01}<tool_call|>", "malformed number");
    expect_error("<|tool_call>call:f{a:1.}<tool_call|>", "malformed number");
    expect_error("<|tool_call>call:f{a:1e}<tool_call|>", "malformed number");
    expect_error("<|tool_call>call:f{a:99999999999999999999999}<tool_call|>", "tool call 0");
    expect_error("<|tool_call>call:f{a:<|\"|>\xff<|\"|>}<tool_call|>", "invalid UTF-8");
    expect_error("text <tool_call|> more", "without an opening");
    expect_error("<|tool_call>call:f{}<tool_call|><|tool_call>call:g{x:}<tool_call|>", "tool call 1");
    char deep[400] = "<|tool_call>call:f{a:";
    for (int i = 0; i < 100; i++) strcat(deep, "[");
    expect_error(deep, "nested too deeply");
}

/* Generated text is parsed for tool calls by its length, not as a C string: ids that decode to "hi", a NUL
 * byte, then a call (golden/default's tokenizer: <0x00> and <|tool_call> are single tokens) give one call and
 * the content "hi\0" (3 bytes) — read as a C string, the text ended at the NUL and the call was lost. */
/* golden/default's tokenizer (<0x00>, <|tool_call> and the call syntax's tokens are single tokens), or NULL after a
 * failed check */
static frigg_tokenizer *default_tokenizer(void) {
    char *tp = th_path(th_root(), "golden/default/tokenizer.json");
    frigg_tokenizer *tok = frigg_tokenizer_load(tp, 0);
    free(tp);
    CHECK(tok != NULL, "tokenizer: %s", frigg_error());
    return tok;
}

static void test_seqgen_nul_then_call(void) {
    frigg_tokenizer *tok = default_tokenizer();
    if (!tok) return;
    static const char text[] = "hi\0<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>";
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(frigg_tokenizer_encode(tok, text, sizeof text - 1, &ids, &n) == 0 && n > 0, "encode: %s", frigg_error());
    frigg_seqgen_params p = {.max_tokens = (int)n, .parse_tools = 1};
    frigg_seqgen *g = frigg_seqgen_new(&p, 3, frigg_tokenizer_vocab_size(tok), tok);
    CHECK(g != NULL, "seqgen: %s", frigg_error());
    if (g) {
        int done = 0;
        for (size_t t = 0; t < n && !done; t++) {
            int32_t id = ids[t];
            frigg_row row = {.prefill = t == 0};
            frigg_seqgen_row(g, &row);
            row.out_id = &id;
            const char *piece;
            size_t pl;
            done = frigg_seqgen_accept(g, &row, &piece, &pl);
        }
        const char *piece;
        size_t pl;
        frigg_seqgen_finish(g, 0, &piece, &pl);
        const frigg_seqgen_result *r = frigg_seqgen_result_of(g);
        CHECK(done && r->tool_calls && json_array_size(r->tool_calls) == 1 && !r->tool_call_error,
              "a call after a NUL byte: %zu calls (%s)", r->tool_calls ? json_array_size(r->tool_calls) : 0,
              r->tool_call_error ? r->tool_call_error : "no error");
        CHECK(r->text_len == 3 && !memcmp(r->text, "hi\0", 3), "content after a NUL-holding call: %zu bytes", r->text_len);
        frigg_seqgen_free(g);
    }
    free(ids);
    frigg_tokenizer_free(tok);
}

/* A lazy grammar (tool_choice auto with a strict tool): the sequence decodes freely (greedy rows, not run ahead)
 * until it draws <|tool_call>; from the next step every row carries the call grammar's mask. Fed logits that favour
 * one token a step: the tokens of a whole call come through and end it ("stop", one parsed call); a token the call
 * cannot take right after <|tool_call> (the model's favourite) is replaced by one it can. */
static void test_seqgen_lazy_grammar(void) {
    frigg_tokenizer *tok = default_tokenizer();
    if (!tok) return;
    int V = frigg_tokenizer_vocab_size(tok);
    int32_t end = frigg_tokenizer_token_to_id(tok, "<turn|>"), open = frigg_tokenizer_token_to_id(tok, "<|tool_call>");
    frigg_gcache *gc = frigg_gcache_new(tok, V, &end, 1);
    static const char tools[] =
        "[[\"get_time\",\"{\\\"type\\\":\\\"object\\\",\\\"properties\\\":{\\\"tz\\\":{\\\"enum\\\":[\\\"UTC\\\"]}},"
        "\\\"required\\\":[\\\"tz\\\"]}\"]]";
    frigg_gref *gr = frigg_gcache_get(gc, FRIGG_GK_TOOLCALL_LAZY, tools, strlen(tools));
    CHECK(gr != NULL && open >= 0, "the lazy call grammar: %s", gr ? "" : frigg_error());
    static const char call[] = "Ja.<|tool_call>call:get_time{<|\"|>tz<|\"|>:<|\"|>UTC<|\"|>}<tool_call|>";
    int32_t *ids = NULL, x = frigg_tokenizer_token_to_id(tok, "x");
    size_t n = 0;
    CHECK(frigg_tokenizer_encode(tok, call, strlen(call), &ids, &n) == 0 && n > 3, "encode: %s", frigg_error());
    for (int arm = 0; arm < 2 && gr && ids; arm++) {
        frigg_seqgen_params p = {.max_tokens = 64, .parse_tools = 1, .grammar = gr, .lazy_grammar = 1,
                                 .grammar_trigger = open};
        frigg_seqgen *g = frigg_seqgen_new(&p, 3, V, tok);
        CHECK(g != NULL, "seqgen: %s", frigg_error());
        if (!g) break;
        float *lg = frigg_xmalloc((size_t)V * sizeof *lg);
        int done = 0, greedy_before = 1, t = 0, opened = 0;
        for (; t < (int)n && !done; t++) {
            frigg_row row = {.prefill = t == 0};
            frigg_seqgen_row(g, &row);
            int32_t id = ids[t];
            if (!opened) {
                greedy_before &= row.want == FRIGG_WANT_GREEDY && frigg_seqgen_lazy_waiting(g);
                row.out_id = &id;
            } else {
                /* greedy under the grammar: a decode row carries the mask, and the engine (here this loop, by the
                 * CPU engine's rule) takes the best allowed id */
                CHECK(row.want == FRIGG_WANT_GREEDY && row.mask && !frigg_seqgen_lazy_waiting(g),
                      "after <|tool_call>: greedy rows with the grammar's mask");
                if (!row.mask) break;
                for (int i = 0; i < V; i++) lg[i] = 0;
                lg[arm == 1 && ids[t - 1] == open ? x : id] = 10; /* arm 1: the favourite is 'x' */
                id = frigg_argmax_masked(lg, V, row.mask);
                row.out_id = &id;
            }
            opened |= id == open;
            const char *piece;
            size_t pl;
            done = frigg_seqgen_accept(g, &row, &piece, &pl);
            if (arm == 1 && t > 0 && ids[t - 1] == open) {
                int32_t got = frigg_seqgen_last(g);
                size_t dl = 0;
                char *d = frigg_tokenizer_decode(tok, &got, 1, &dl);
                CHECK(got != x && d && dl > 0 && !strncmp(d, "call:", dl < 5 ? dl : 5),
                      "a token the call cannot take is not drawn: drew %d ('%.*s')", (int)got, (int)dl, d ? d : "");
                free(d);
                break;
            }
        }
        CHECK(greedy_before, "before <|tool_call>: greedy rows, the step not run ahead");
        if (arm == 0) {
            const char *piece;
            size_t pl;
            frigg_seqgen_finish(g, 0, &piece, &pl);
            const frigg_seqgen_result *r = frigg_seqgen_result_of(g);
            CHECK(done && t == (int)n && !strcmp(r->finish_reason, "stop") && r->tool_calls &&
                      json_array_size(r->tool_calls) == 1,
                  "the call's tokens end the answer: done %d after %d of %zu, %s, %zu calls", done, t, n, r->finish_reason,
                  r->tool_calls ? json_array_size(r->tool_calls) : 0);
        }
        free(lg);
        frigg_seqgen_free(g);
    }
    free(ids);
    frigg_gref_release(gr);
    frigg_gcache_free(gc);
    frigg_tokenizer_free(tok);
}

int main(void) {
    TEST_MAIN_BEGIN("test_toolcall");
    test_golden_round_trips();
    test_parse_cases();
    test_seqgen_nul_then_call();
    test_seqgen_lazy_grammar();
    TEST_MAIN_END();
}
