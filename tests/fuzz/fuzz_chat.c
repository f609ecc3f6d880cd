/* libFuzzer target: the chat layer on untrusted bytes. The input is used three ways:
 *   - as generated text for the tool-call parser (every arguments string it returns must be valid
 *     JSON);
 *   - as JSON for the renderer ({"messages":…,"tools":…,"add_generation_prompt":…} or a bare
 *     messages array; output must start with "<bos>");
 *   - as text for the stop-string matcher, with stops cut from the input itself; streamed and
 *     whole output must agree. A broken invariant aborts, which libFuzzer reports as a crash. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "run/stopstr.h"
#include "base/strbuf.h"
#include "chat/toolcall.h"

static void fuzz_parser(const char *text) {
    char *content = NULL;
    json_t *calls = frigg_parse_tool_calls(text, &content);
    if (!calls) return;
    if (!content || strlen(content) > strlen(text)) abort();
    size_t i;
    json_t *c;
    json_array_foreach(calls, i, c) {
        const char *args = json_string_value(json_object_get(json_object_get(c, "function"), "arguments"));
        json_t *parsed = args ? json_loads(args, 0, NULL) : NULL;
        if (!json_is_object(parsed)) abort();
        json_decref(parsed);
    }
    json_decref(calls);
    free(content);
}

static void fuzz_renderer(const uint8_t *data, size_t size) {
    json_t *in = json_loadb((const char *)data, size, 0, NULL);
    if (!in) return;
    const json_t *messages = json_is_object(in) ? json_object_get(in, "messages") : in;
    const json_t *tools = json_is_object(in) ? json_object_get(in, "tools") : NULL;
    int agp = !json_is_object(in) || json_is_true(json_object_get(in, "add_generation_prompt"));
    char *out = frigg_chat_render(messages, tools, agp);
    if (out) {
        if (strncmp(out, "<bos>", 5)) abort();
        fuzz_parser(out);
        free(out);
    }
    json_t *norm = frigg_chat_normalize_messages(messages);
    json_decref(norm);
    json_decref(in);
}

static void fuzz_stops(const char *text, size_t n) {
    if (n < 4) return;
    char s1[4] = {0}, s2[3] = {0};
    memcpy(s1, text + 1, 3); /* stops taken from the input so that they occur in it */
    memcpy(s2, text + n - 2, 2);
    if (!s1[0] || !s2[0]) return;
    const char *stops[2] = {s1, s2};
    size_t step = (size_t)(unsigned char)text[0] % 7 + 1;
    char *whole_out, *o;
    size_t whole_n, ol;
    frigg_stopstr *w = frigg_stopstr_new(stops, 2);
    int wm = frigg_stopstr_push(w, text, n, &whole_out, &whole_n);
    if (!wm) {
        frigg_stopstr_flush(w, &o, &ol);
        free(whole_out);
        whole_out = o, whole_n = ol;
    }
    frigg_stopstr *s = frigg_stopstr_new(stops, 2);
    frigg_strbuf acc = FRIGG_STRBUF_INIT;
    int m = 0;
    for (size_t p = 0; p < n && !m; p += step) {
        m = frigg_stopstr_push(s, text + p, p + step <= n ? step : n - p, &o, &ol);
        frigg_sb_put(&acc, o, ol);
        free(o);
    }
    if (!m) {
        frigg_stopstr_flush(s, &o, &ol);
        frigg_sb_put(&acc, o, ol);
        free(o);
    }
    if (acc.len != whole_n || (whole_n && memcmp(acc.p, whole_out, whole_n))) abort();
    if (memmem(whole_out, whole_n, s1, strlen(s1)) || memmem(whole_out, whole_n, s2, strlen(s2))) abort();
    frigg_sb_free(&acc);
    free(whole_out);
    frigg_stopstr_free(w);
    frigg_stopstr_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    fuzz_parser(text);
    fuzz_renderer(data, size);
    fuzz_stops(text, strlen(text));
    free(text);
    return 0;
}
