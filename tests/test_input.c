/* test_input.c — what a request may hold, checked before anything runs:
 *  1. messages: roles system, developer (handed on as system), user, assistant, tool; any other role is an
 *     error naming it; a message without content is an error unless it is an assistant's tool calls.
 *  2. top_p: one rule, (0, 1], and one message for everything outside it.
 *  3. A prompt holding NUL bytes (\u0000) is kept whole (prompt_len), and the chat template renders a content
 *     holding one whole (frigg_chat_render_n's length).
 *  4. frigg_tokenizer_encode_max: below or at its limit it gives exactly frigg_tokenizer_encode's ids; past it,
 *     it says so (1, n = limit + 1), on every bundled tokenizer pipeline and both modes, on texts with added
 *     tokens, unknown characters, byte fallback, digits, dashes and long runs; and a text of megabytes is
 *     refused in far less time than its encoding takes. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat.h"
#include "model/config.h"
#include "run/oai.h"
#include "harness.h"
#include "run/request.h"
#include "base/strbuf.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"

static int parse(const char *json, frigg_request *r) {
    json_error_t je;
    json_t *o = json_loads(json, JSON_ALLOW_NUL, &je);
    if (!o) {
        fprintf(stderr, "bad test JSON %s: %s\n", json, je.text);
        exit(2);
    }
    int rc = frigg_request_parse(r, o, 1000);
    json_decref(o);
    return rc;
}

static void expect_ok(const char *json) {
    frigg_request r;
    int rc = parse(json, &r);
    CHECK(rc == 0, "%s refused: %s", json, frigg_error());
    if (!rc) frigg_request_free(&r);
}

static void expect_error(const char *json, const char *want1, const char *want2) {
    frigg_request r;
    int rc = parse(json, &r);
    CHECK(rc == -1, "%s accepted", json);
    if (rc == 0) {
        frigg_request_free(&r);
        return;
    }
    CHECK(strstr(frigg_error(), want1) && (!want2 || strstr(frigg_error(), want2)), "%s: error \"%s\", want \"%s\"%s%s",
          json, frigg_error(), want1, want2 ? " and " : "", want2 ? want2 : "");
}

static void test_messages(void) {
    expect_ok("{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":\"q\"},"
              "{\"role\":\"assistant\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"q2\"}]}");
    expect_ok("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":"
              "[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
              "{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"42\"}]}");
    expect_ok("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"q\"}]}]}");
    expect_error("{\"messages\":[{\"role\":\"wizard\",\"content\":\"hi\"}]}", "\"messages\"[0].role is \"wizard\"",
                 "system, developer, user, assistant or tool");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"model\",\"content\":\"a\"}]}",
                 "\"messages\"[1].role is \"model\"", NULL);
    expect_error("{\"messages\":[{\"role\":\"User\",\"content\":\"q\"}]}", "role is \"User\"", NULL);
    expect_error("{\"messages\":[{\"role\":\"user\\u0000x\",\"content\":\"q\"}]}", "role is \"user\\u0000x\"", NULL);
    expect_error("{\"messages\":[{\"role\":7,\"content\":\"q\"}]}", "\"messages\"[0] must be an object with a string",
                 NULL);
    expect_error("{\"messages\":[{\"role\":\"user\"}]}", "\"messages\"[0] (user) has no \"content\"", NULL);
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":null}]}", "(user) has no \"content\"", NULL);
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\"}]}",
                 "\"messages\"[1] (assistant) has no \"content\" and no \"tool_calls\"", NULL);
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[]}]}",
                 "(assistant) has no \"content\"", NULL);
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[{"
                 "\"function\":{\"name\":\"f\",\"arguments\":{}}}]},{\"role\":\"tool\",\"tool_call_id\":\"x\"}]}",
                 "\"messages\"[2] (tool) has no \"content\"", NULL);
    expect_error("{\"messages\":[]}", "non-empty array", NULL);

    /* developer: a system turn wherever it stands (the first message is the template's system block; a later
     * one would otherwise render as a "<|turn>developer" turn, a role the model never saw) */
    frigg_request r;
    CHECK(parse("{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"developer\",\"content\":\"d\"}]}",
                &r) == 0,
          "%s", frigg_error());
    const char *role = json_string_value(json_object_get(json_array_get(r.messages, 1), "role"));
    CHECK(role && !strcmp(role, "system"), "developer handed on as %s", role ? role : "(none)");
    char *text = frigg_chat_render(r.messages, NULL, 1);
    CHECK(text && strstr(text, "<|turn>system\nd<turn|>") && !strstr(text, "developer"), "rendered %s",
          text ? text : frigg_error());
    free(text);
    frigg_request_free(&r);
    CHECK(parse("{\"messages\":[{\"role\":\"developer\",\"content\":\" d \"},{\"role\":\"user\",\"content\":\"q\"}]}",
                &r) == 0,
          "%s", frigg_error());
    text = frigg_chat_render(r.messages, NULL, 1);
    CHECK(text && !strcmp(text, "<bos><|turn>system\nd<turn|>\n<|turn>user\nq<turn|>\n<|turn>model\n"), "rendered %s",
          text ? text : frigg_error());
    free(text);
    frigg_request_free(&r);
}

static void test_top_p(void) {
    const char *outside[] = {"0", "-0.5", "1.5", "-1e-9"};
    for (int i = 0; i < 4; i++) {
        char j[160];
        snprintf(j, sizeof j, "{\"prompt\":\"x\",\"temperature\":1,\"top_p\":%s}", outside[i]);
        expect_error(j, "\"top_p\" = ", "is out of range (0, 1]");
    }
    expect_ok("{\"prompt\":\"x\",\"temperature\":1,\"top_p\":1e-9}");
    expect_ok("{\"prompt\":\"x\",\"temperature\":1,\"top_p\":1}");
}

/* frigg-serve's parser: the same rule for top_p and repetition_penalty, whose low ends are excluded */
static void test_oai_ranges(void) {
    frigg_config cfg;
    char *cp = th_path(th_root(), "golden/default/config.json");
    int ok = frigg_config_load(&cfg, cp) == 0;
    free(cp);
    CHECK(ok, "golden/default/config.json: %s", frigg_error());
    if (!ok) return;
    frigg_oai_env env = {.model_name = "default", .tok = NULL, .cfg = &cfg, .max_ctx = 512};
    const char *cases[][3] = {{"top_p", "0", "(0, 1]"}, {"top_p", "1.5", "(0, 1]"}, {"top_p", "-1", "(0, 1]"},
                              {"repetition_penalty", "0", "(0, 10]"}, {"repetition_penalty", "11", "(0, 10]"}};
    for (int i = 0; i < 5; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"default\",\"prompt\":[5,6],\"%s\":%s}", cases[i][0], cases[i][1]);
        frigg_oai_req r;
        frigg_oai_error e;
        int rc = frigg_oai_parse(&r, FRIGG_OAI_COMPLETION, body, strlen(body), &env, &e);
        CHECK(rc == -1 && !strcmp(e.param, cases[i][0]) && strstr(e.message, "is out of range: it must be in") &&
                  strstr(e.message, cases[i][2]),
              "%s: %s", body, rc ? e.message : "accepted");
        frigg_oai_req_free(&r);
    }
    const char *good = "{\"model\":\"default\",\"prompt\":[5,6],\"top_p\":1e-9,\"repetition_penalty\":10}";
    frigg_oai_req r;
    frigg_oai_error e;
    CHECK(frigg_oai_parse(&r, FRIGG_OAI_COMPLETION, good, strlen(good), &env, &e) == 0, "%s", e.message);
    frigg_oai_req_free(&r);
}

static void test_nul(void) {
    frigg_request r;
    CHECK(parse("{\"prompt\":\"a\\u0000b\"}", &r) == 0, "%s", frigg_error());
    CHECK(r.prompt_len == 3 && !memcmp(r.prompt, "a\0b", 3), "prompt kept %zu bytes", r.prompt_len);
    frigg_request_free(&r);
    expect_error("{\"prompt\":\"x\",\"stop\":\"a\\u0000\"}", "\"stop\" holds a NUL byte", NULL);
    expect_error("{\"prompt\":\"x\",\"stop\":[\"b\",\"a\\u0000\"]}", "\"stop\"[1] holds a NUL byte", NULL);

    json_t *m = json_loads("[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]", JSON_ALLOW_NUL, NULL);
    size_t len = 0;
    char *text = frigg_chat_render_n(m, NULL, 1, &len);
    static const char want[] = "<bos><|turn>user\na\0b<turn|>\n<|turn>model\n";
    CHECK(text && len == sizeof want - 1 && !memcmp(text, want, len), "rendered %zu bytes", len);
    free(text);
    json_decref(m);
    /* a tool's name with a NUL byte is rendered whole too, not cut at it */
    m = json_loads("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{"
                   "\"function\":{\"name\":\"f\\u0000g\",\"arguments\":{}}}]}]",
                   JSON_ALLOW_NUL, NULL);
    text = frigg_chat_render_n(m, NULL, 1, &len);
    CHECK(text && memmem(text, len, "call:f\0g{}", 10), "tool call name cut at its NUL byte");
    free(text);
    json_decref(m);
}

/* ---- encode_max ---- */

static size_t g_cases;

static void check_limits(const frigg_tokenizer *tk, const char *what, const char *s, size_t n) {
    int32_t *full = NULL;
    size_t nf = 0;
    if (frigg_tokenizer_encode(tk, s, n, &full, &nf)) {
        CHECK(0, "%s: encode failed: %s", what, frigg_error());
        return;
    }
    size_t limits[] = {nf + 1, nf, nf > 0 ? nf - 1 : 1, nf / 2 + 1, nf / 3 + 1, 1, 2, 7};
    for (size_t j = 0; j < sizeof limits / sizeof *limits; j++) {
        size_t L = limits[j];
        int32_t *ids = NULL;
        size_t ni = 0;
        int rc = frigg_tokenizer_encode_max(tk, s, n, L, &ids, &ni);
        g_cases++;
        if (nf <= L) {
            CHECK(rc == 0 && ni == nf && !memcmp(ids, full, nf * sizeof *ids), "%s (%zu bytes): limit %zu of %zu ids: rc %d, %zu ids",
                  what, n, L, nf, rc, ni);
        } else {
            CHECK(rc == 1 && ni == L + 1 && ids == NULL, "%s (%zu bytes): limit %zu of %zu ids: rc %d, n %zu", what, n,
                  L, nf, rc, ni);
        }
        free(ids);
    }
    free(full);
}

static char *texts[64];
static size_t text_len[64];
static int ntexts;

static void add_text(const char *s, size_t n) {
    if (ntexts == 64) return;
    texts[ntexts] = frigg_xmalloc(n + 1);
    memcpy(texts[ntexts], s, n);
    texts[ntexts][n] = 0;
    text_len[ntexts++] = n;
}

static void make_texts(const frigg_tokenizer *deflt) {
    static const char *fixed[] = {
        "Hvad er hovedstaden i Danmark?",
        "  leading and trailing spaces  ",
        "<bos><|turn>user\nHej med dig<turn|>\n<|turn>model\n",
        "tal 12345 og 2026-12-02 - med bindestreger--og---flere",
        "ünïcødé ✓ 漢字 😀 emoji and \xE2\x80\x8B zero width",
        "a\0b\0\0c NUL bytes",
        "\n\n\t\ttabs and newlines\r\n",
        "<bos><bos><bos><eos>",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        add_text(fixed[i], i == 5 ? 17 : strlen(fixed[i]));
    /* real text: the held-out conversations of the default model, decoded */
    char *p = th_path(th_root(), "golden/default/heldout.jsonl");
    char *all = frigg_read_file(p, NULL);
    free(p);
    CHECK(all != NULL, "golden/default/heldout.jsonl missing");
    int k = 0;
    for (char *line = all; all && line && *line && k < 24; k++) {
        char *nl = strchr(line, '\n');
        json_t *o = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        json_t *ids = json_object_get(o, "input_ids");
        size_t n = json_array_size(ids);
        int32_t *v = frigg_xmalloc((n + 1) * sizeof *v);
        for (size_t i = 0; i < n; i++) v[i] = (int32_t)json_integer_value(json_array_get(ids, i));
        size_t len;
        char *t = frigg_tokenizer_decode(deflt, v, n, &len);
        if (t) add_text(t, len);
        free(t);
        free(v);
        json_decref(o);
        line = nl ? nl + 1 : NULL;
    }
    free(all);
    /* long texts: many conversations in one, and a long run with no space in it (one BPE word) */
    frigg_strbuf b = FRIGG_STRBUF_INIT;
    for (int r = 0; r < 6; r++)
        for (int i = 10; i < ntexts; i++) frigg_sb_put(&b, texts[i], text_len[i]);
    add_text(b.p, b.len);
    b.len = 0;
    for (int i = 0; i < 3000; i++) frigg_sb_puts(&b, i % 7 ? "xyzzy" : "Ø");
    add_text(b.p, b.len);
    frigg_sb_free(&b);
}

static void test_encode_max(void) {
    char *dp = th_path(th_root(), "golden/default/tokenizer.json");
    frigg_tokenizer *deflt = frigg_tokenizer_load(dp, 0);
    CHECK(deflt != NULL, "golden/default/tokenizer.json: %s", frigg_error());
    if (!deflt) {
        free(dp);
        return;
    }
    make_texts(deflt);
    const char *files[] = {"golden/default/tokenizer.json", "golden/tokenizer/synthetic/flags.json",
                           "golden/tokenizer/synthetic/metaspace.json", "golden/tokenizer/synthetic/metaspace-nosplit.json",
                           "golden/tokenizer/synthetic/nodecoder.json", "golden/tokenizer/synthetic/splits.json"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++)
        for (int hf = 0; hf <= (f == 0); hf++) {
            char *path = th_path(th_root(), files[f]);
            frigg_tokenizer *tk = frigg_tokenizer_load(path, hf);
            CHECK(tk != NULL, "%s: %s", files[f], frigg_error());
            free(path);
            if (!tk) continue;
            char what[160];
            for (int i = 0; i < ntexts; i++) {
                snprintf(what, sizeof what, "%s%s text %d", files[f], hf ? " (hf-regex)" : "", i);
                check_limits(tk, what, texts[i], text_len[i]);
            }
            frigg_tokenizer_free(tk);
        }

    /* a text of megabytes past a small limit: refused long before its whole encoding would finish */
    for (int hf = 0; hf <= 1; hf++) {
        frigg_tokenizer *tk = frigg_tokenizer_load(dp, hf);
        size_t big = 4u << 20;
        char *s = frigg_xmalloc(big);
        for (size_t i = 0; i < big; i++) s[i] = "hej med dig "[i % 12];
        struct timespec t0, t1, t2;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int32_t *ids = NULL;
        size_t n = 0;
        int rc = frigg_tokenizer_encode_max(tk, s, big, 512, &ids, &n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK(rc == 1 && n == 513, "4 MiB past 512 tokens%s: rc %d n %zu", hf ? " (hf-regex)" : "", rc, n);
        free(ids);
        ids = NULL;
        CHECK(frigg_tokenizer_encode(tk, s, big, &ids, &n) == 0 && n > 512, "whole encode");
        clock_gettime(CLOCK_MONOTONIC, &t2);
        double stop_s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
        double full_s = (t2.tv_sec - t1.tv_sec) + (t2.tv_nsec - t1.tv_nsec) / 1e9;
        CHECK(stop_s * 4 < full_s, "refusal took %.3f s, the whole encoding %.3f s%s", stop_s, full_s,
              hf ? " (hf-regex)" : "");
        printf("  4 MiB text, limit 512%s: refused in %.3f s; whole encoding (%zu ids) %.3f s\n",
               hf ? " (hf-regex)" : "", stop_s, n, full_s);
        free(ids);
        free(s);
        frigg_tokenizer_free(tk);
    }
    printf("  encode_max: %zu (text, limit) cases on 7 pipelines\n", g_cases);
    for (int i = 0; i < ntexts; i++) free(texts[i]);
    frigg_tokenizer_free(deflt);
    free(dp);
}

int main(void) {
    TEST_MAIN_BEGIN("test_input");
    test_messages();
    test_top_p();
    test_oai_ranges();
    test_nul();
    test_encode_max();
    TEST_MAIN_END();
}
