/* libFuzzer target: the tokenizer.json loader and the encoder/decoder.
 * The first input byte picks the mode:
 *   even: the rest is a tokenizer.json (bit 1: hf_regex); if it loads, fixed texts are encoded and
 *         the ids decoded and stream-decoded;
 *   odd:  the rest is text for one of two built-in tokenizers (bit 1: a Gemma-like one, in both
 *         modes; else a Llama-like one with Prepend, Strip and rstrip/lstrip/single_word tokens).
 * Invariants checked (abort on violation): every id encode returns names a token; the streamed
 * decode concatenates to the whole decode and each piece is valid UTF-8; invalid UTF-8 input is
 * refused rather than tokenized, and the built-in tokenizers encode all valid UTF-8. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

static int valid_utf8(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c < 0xE0) ? 2 : (c >= 0xE0 && c < 0xF0) ? 3 : (c >= 0xF0 && c < 0xF5) ? 4 : 0;
        if (!k || i + k > n) return 0;
        uint32_t cp = k == 1 ? c : k == 2 ? (c & 0x1F) : k == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t j = 1; j < k; j++) {
            if ((u[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (u[i + j] & 0x3F);
        }
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k;
    }
    return 1;
}

static void check_decode(const frigg_tokenizer *tk, const int32_t *ids, size_t n) {
    size_t dl;
    char *d = frigg_tokenizer_decode(tk, ids, n, &dl);
    if (!d) abort();
    frigg_detok_stream *st = frigg_detok_stream_new(tk);
    if (st) {
        char *all = malloc(1);
        size_t an = 0;
        for (size_t i = 0; i <= n; i++) {
            char *p;
            size_t pl;
            if ((i < n ? frigg_detok_stream_push(st, ids[i], &p, &pl) : frigg_detok_stream_finish(st, &p, &pl)) != 0)
                abort();
            if (!valid_utf8(p, pl)) abort();
            all = realloc(all, an + pl + 1);
            memcpy(all + an, p, pl);
            an += pl;
            free(p);
        }
        if (an != dl || memcmp(all, d, dl)) abort();
        free(all);
        frigg_detok_stream_free(st);
    }
    free(d);
}

/* strict: a built-in tokenizer, which can encode any valid UTF-8 (a fuzzed file may lack its
 * unk token, which is an encode-time error in HF too) */
static void run_text(const frigg_tokenizer *tk, const char *text, size_t len, int strict) {
    int32_t *ids;
    size_t n;
    int rc = frigg_tokenizer_encode(tk, text, len, &ids, &n);
    if (rc != 0) {
        if (strict && valid_utf8(text, len)) abort(); /* only invalid UTF-8 may be refused */
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (!frigg_tokenizer_id_to_token(tk, ids[i])) abort();
    check_decode(tk, ids, n);
    free(ids);
}

/* Built-in tokenizers: a small vocab with all 256 byte tokens, merges in both forms. */
static char *make_json(int gemma) {
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
#define P(...) n += (size_t)snprintf(s + n, cap - n, __VA_ARGS__)
    P("{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[");
    if (gemma)
        P("{\"id\":0,\"content\":\"<bos>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},"
          "{\"id\":1,\"content\":\"<|turn>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},"
          "{\"id\":2,\"content\":\"<|\\\"|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}");
    else
        P("{\"id\":0,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":true,\"normalized\":false,\"special\":true},"
          "{\"id\":1,\"content\":\"</s>\",\"single_word\":false,\"lstrip\":true,\"rstrip\":true,\"normalized\":false,\"special\":false},"
          "{\"id\":2,\"content\":\"ab\",\"single_word\":true,\"lstrip\":false,\"rstrip\":false,\"normalized\":true,\"special\":false},"
          "{\"id\":400,\"content\":\"<new>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}");
    P("],\"normalizer\":");
    if (gemma) P("{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}");
    else P("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
           "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}]}");
    P(",\"pre_tokenizer\":");
    if (gemma) P("{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"MergedWithPrevious\",\"invert\":false}");
    else P("null");
    P(",\"post_processor\":null,\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":"
      "{\"String\":\"\\u2581\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}%s]},",
      gemma ? "" : ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}");
    P("\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\",\"continuing_subword_prefix\":null,"
      "\"end_of_word_suffix\":null,\"fuse_unk\":true,\"byte_fallback\":true,\"ignore_merges\":false,\"vocab\":{");
    P("\"%s\":0,\"%s\":1,\"%s\":2,\"<unk>\":3,", gemma ? "<bos>" : "<s>", gemma ? "<|turn>" : "</s>", gemma ? "<|\\\"|>" : "ab");
    int id = 4;
    for (int b = 0; b < 256; b++) P("\"<0x%02X>\":%d,", b, id++);
    const char *toks[] = {"a", "b", "c", "d", "e", "\\u2581", "\\u2581\\u2581", "\\u2581a", "\\u2581ab", "bc", "\\u00e6",
                          "\\u00f8", "\\u00e5", "\\n", "\\u2581\\u00e6", "cd", "\\u2581\\u2581\\u2581", "abc"};
    for (size_t k = 0; k < sizeof toks / sizeof *toks; k++) P("\"%s\":%d%s", toks[k], id++, k + 1 < sizeof toks / sizeof *toks ? "," : "");
    if (gemma)
        P("},\"merges\":[[\"\\u2581\",\"\\u2581\"],[\"\\u2581\",\"a\"],[\"b\",\"c\"],[\"\\u2581a\",\"b\"],[\"\\u2581\",\"\\u00e6\"],"
          "[\"c\",\"d\"],[\"\\u2581\\u2581\",\"\\u2581\"]]}}");
    else
        P("},\"merges\":[\"\\u2581 \\u2581\",\"\\u2581 a\",\"b c\",\"\\u2581a b\",\"\\u2581 \\u00e6\",\"c d\",\"ab c\"]}}");
#undef P
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static frigg_tokenizer *gemma, *gemma_hf, *llama;
    if (!gemma) {
        char *g = make_json(1), *l = make_json(0);
        gemma = frigg_tokenizer_load_json(g, strlen(g), "gemma-like", 0);
        gemma_hf = frigg_tokenizer_load_json(g, strlen(g), "gemma-like", 1);
        llama = frigg_tokenizer_load_json(l, strlen(l), "llama-like", 0);
        if (!gemma || !gemma_hf || !llama) {
            fprintf(stderr, "fuzz_tokenizer: built-in tokenizer does not load\n");
            abort();
        }
        free(g);
        free(l);
    }
    if (size < 1) return 0;
    unsigned sel = data[0];
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    if (sel & 1) {
        if (sel & 2) {
            run_text(gemma, rest, n, 1);
            run_text(gemma_hf, rest, n, 1);
        } else {
            run_text(llama, rest, n, 1);
        }
        /* arbitrary ids (also unknown and negative ones) must decode without harm */
        size_t k = n / 4;
        int32_t *ids = malloc((k + 1) * sizeof *ids);
        for (size_t i = 0; i < k; i++) memcpy(&ids[i], rest + 4 * i, 4);
        for (size_t i = 0; i < k; i++) ids[i] = (int32_t)((uint32_t)ids[i] % 300u) - (ids[i] < 0 ? 2 : 0);
        check_decode((sel & 2) ? gemma : llama, ids, k);
        free(ids);
        return 0;
    }
    frigg_tokenizer *tk = frigg_tokenizer_load_json(rest, n, "fuzz", (sel >> 1) & 1);
    if (!tk) return 0;
    static const char *texts[] = {"", "Hello, world! 12345", "  spaced  text\n", "<bos><|turn>user\nHej<turn|>\n",
                                  "\xC3\xA6\xC3\xB8\xC3\xA5 \xF0\x9F\x98\x8A <0xFF>\t\r\n"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) run_text(tk, texts[i], strlen(texts[i]), 0);
    int32_t ids[64];
    for (int i = 0; i < 64; i++) ids[i] = i * 7 - 3;
    check_decode(tk, ids, 64);
    frigg_tokenizer_free(tk);
    return 0;
}
