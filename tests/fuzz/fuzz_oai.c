/* libFuzzer target: one /v1/chat/completions or /v1/completions body through frigg-serve's wire format
 * (common/run/oai.c): parsing and validation (messages, content parts, tools, tool_choice, stop, logprobs, prompts
 * as text or ids, \u0000 in strings), the chat template, the tokenizer, and — for a body that parses — the
 * response and stream builders on a made-up result whose text comes from the input too (tool-call parsing
 * included): the body's bytes with each \u0000 escape as a NUL byte, so that generated text holding NUL bytes
 * reaches them. Every response and chunk must dump to JSON that loads back, the content must be no longer
 * than the text it came from, and a forced tool call must come back as whole calls or as an error, never as
 * content. The first byte picks the endpoint. Uses the bundled default model's tokenizer
 * and config (run from the project root). */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "run/oai.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"

static frigg_tokenizer *tok;
static frigg_config cfg;

static void setup(void) {
    if (tok) return;
    tok = frigg_tokenizer_load("golden/default/tokenizer.json", 0);
    size_t n = 0;
    char *js = frigg_read_file("golden/default/config.json", &n);
    if (!tok || !js || frigg_config_parse(&cfg, js, n, "golden/default/config.json")) abort(); /* run from the root */
    free(js);
}

/* What the server sends: the dump must be JSON that loads back (NUL bytes of the text written as \u0000). */
static void round_trip(json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *back = s ? json_loads(s, JSON_ALLOW_NUL | JSON_DECODE_ANY, NULL) : NULL;
    if (!back) abort();
    json_decref(back);
    free(s);
    json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    if (size < 1) return 0;
    frigg_oai_kind kind = data[0] & 1 ? FRIGG_OAI_CHAT : FRIGG_OAI_COMPLETION;
    frigg_oai_env env = {.model_name = "default", .tok = tok, .cfg = &cfg, .max_ctx = 512};
    frigg_oai_req r;
    frigg_oai_error e;
    if (frigg_oai_parse(&r, kind, (const char *)data + 1, size - 1, &env, &e)) {
        json_decref(frigg_oai_error_json(&e));
        frigg_oai_req_free(&r);
        return 0;
    }
    /* a result: the body's own bytes as the text (any bytes, tool-call syntax included, \u0000 as a NUL byte),
     * a few ids */
    int nc = r.n_prompts * r.n;
    frigg_oai_choice *ch = calloc((size_t)nc, sizeof *ch);
    for (int i = 0; i < nc; i++) {
        size_t tl = size - 1 > 300 ? 300 : size - 1, k = 0;
        ch[i].text = malloc(tl + 1);
        for (size_t at = 0; at < tl; k++) {
            int nul = tl - at >= 6 && !memcmp(data + 1 + at, "\\u0000", 6);
            ch[i].text[k] = nul ? 0 : (char)data[1 + at];
            at += nul ? 6 : 1;
        }
        ch[i].text[k] = 0;
        ch[i].text_len = k;
        ch[i].n = 3;
        ch[i].ids = calloc(3, sizeof(int32_t));
        for (int t = 0; t < 3; t++) ch[i].ids[t] = (int32_t)(data[(t + 1) % size] % cfg.vocab_size);
        strcpy(ch[i].finish_reason, "stop");
        ch[i].k = r.gen.logprobs;
        if (ch[i].k) {
            ch[i].token_logprob = calloc(3, sizeof(float));
            ch[i].top_ids = calloc((size_t)3 * ch[i].k, sizeof(int32_t));
            ch[i].top_lps = calloc((size_t)3 * ch[i].k, sizeof(float));
        }
    }
    char *content = NULL;
    size_t content_len = 0;
    json_t *calls = NULL;
    frigg_oai_finish_tools(&r, &ch[0], &content, &content_len, &calls, "f");
    if (content_len > (r.forced ? strlen(r.forced) : 0) + ch[0].text_len) abort();
    /* a forced call is whole calls, or an error with neither calls nor content (never its markup as content) */
    frigg_oai_error fe;
    const int unanswerable = frigg_oai_choice_error(&r, &ch[0], &fe) != 0;
    if (unanswerable && (!r.forced || calls || content_len || fe.status != 400)) abort();
    if (r.forced && !unanswerable && !calls) abort();
    int pt = 0, ct = 0;
    frigg_oai_usage_counts(&r, ch, &pt, &ct);
    if (pt < 1 || ct < nc * r.forced_tokens) abort();
    free(content);
    json_decref(calls);
    round_trip(frigg_oai_response(&r, &env, "id", 0, "default", ch));
    if (r.stream) {
        frigg_oai_stream st;
        frigg_oai_stream_init(&st, 0);
        frigg_seqgen_result now = {.ids = ch[0].ids, .n = 1, .token_logprob = ch[0].token_logprob,
                                   .top_ids = ch[0].top_ids, .top_lps = ch[0].top_lps};
        round_trip(frigg_oai_stream_text(&st, &r, &env, "id", 0, "default", ch[0].text, ch[0].text_len / 2, &now));
        round_trip(frigg_oai_stream_text(&st, &r, &env, "id", 0, "default", ch[0].text + ch[0].text_len / 2,
                                         ch[0].text_len - ch[0].text_len / 2, &now));
        round_trip(frigg_oai_stream_finish(&st, &r, &env, "id", 0, "default", &ch[0], "p"));
        round_trip(frigg_oai_usage_chunk(&r, "id", 0, "default", 1, 1));
        frigg_oai_stream_free(&st);
    }
    for (int i = 0; i < nc; i++) frigg_oai_choice_free(&ch[i]);
    free(ch);
    frigg_oai_req_free(&r);
    return 0;
}
