/* test_chat.c — the chat-template renderer against jinja2: every conversation of
 * golden/chat/conversations.jsonl (made by scripts/oracle/render_chat_golden.py) byte for byte,
 * the 19 `rendered` strings of the training-tokenizer audit file read directly from ../shared,
 * frigg's extra refusals, and the Python str()/strip/lower helpers the template relies on. */
#include <inttypes.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "harness.h"
#include "chat/pyfmt.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"

static void report_diff(const char *name, const char *want, const char *got) {
    size_t i = 0;
    while (want[i] && want[i] == got[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "  %s: first difference at byte %zu\n    want: %.80s\n    got:  %.80s\n", name, i,
            want + from, got + from);
}

/* The golden renders are only proof for the template they were made from: the one in ../shared. */
static void check_template_hash(const char *want_hex) {
    char *path = th_path(th_shared(), "data/mimir/gemma4_native_chat.jinja");
    size_t len;
    char *t = frigg_read_file(path, &len);
    free(path);
    if (!t) {
        SKIP("gemma4_native_chat.jinja not readable: golden template hash not checked");
        return;
    }
    CHECK(sodium_init() >= 0, "sodium_init failed");
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (const unsigned char *)t, len);
    char hex[2 * crypto_hash_sha256_BYTES + 1];
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    CHECK(want_hex && !strcmp(hex, want_hex), "golden made from template %s, ../shared has %s", want_hex, hex);
    free(t);
}

static void test_golden_file(void) {
    char *path = th_path(th_root(), "golden/chat/conversations.jsonl");
    size_t len;
    char *data = frigg_read_file(path, &len);
    CHECK(data != NULL, "%s: %s", path, frigg_error());
    free(path);
    if (!data) return;
    int renders = 0, errors = 0, have_meta = 0, normalized = 0;
    for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
        json_error_t jerr;
        json_t *rec = json_loads(line, 0, &jerr);
        CHECK(rec != NULL, "golden line does not parse: %s", jerr.text);
        if (!rec) continue;
        if (json_object_get(rec, "meta")) {
            have_meta = 1;
            check_template_hash(json_string_value(json_object_get(json_object_get(rec, "meta"), "template_sha256")));
            json_decref(rec);
            continue;
        }
        const char *name = json_string_value(json_object_get(rec, "name"));
        const json_t *tools = json_object_get(rec, "tools");
        int agp = json_is_true(json_object_get(rec, "add_generation_prompt"));
        json_t *msgs = json_incref(json_object_get(rec, "messages"));
        if (json_is_true(json_object_get(rec, "normalize"))) {
            json_t *norm = frigg_chat_normalize_messages(msgs);
            json_decref(msgs);
            msgs = norm;
            normalized++;
        }
        char *got = frigg_chat_render(msgs, json_is_null(tools) ? NULL : tools, agp);
        json_decref(msgs);
        const char *want = json_string_value(json_object_get(rec, "expected"));
        if (want) {
            renders++;
            CHECK(got && !strcmp(got, want), "%s: %s", name, got ? "rendering differs" : frigg_error());
            if (got && strcmp(got, want)) report_diff(name, want, got);
        } else {
            errors++;
            CHECK(got == NULL, "%s: jinja2 fails (%s) but frigg rendered %.200s", name,
                  json_string_value(json_object_get(rec, "error")), got);
        }
        free(got);
        json_decref(rec);
    }
    free(data);
    CHECK(have_meta, "golden file has no meta line");
    CHECK(renders >= 40, "only %d golden renders", renders);
    CHECK(errors >= 5, "only %d golden error cases", errors);
    CHECK(normalized >= 3, "only %d golden normalisation cases", normalized);
}

static void test_audit_file(void) {
    char *path = th_path(th_shared(), "data/mimir/training-tokenizer-audit.json");
    json_error_t jerr;
    json_t *audit = json_load_file(path, 0, &jerr);
    free(path);
    if (!audit) {
        SKIP("training-tokenizer-audit.json not readable (%s); golden/chat covers the same 19", jerr.text);
        return;
    }
    const char *sections[] = {"bundled", "noctrex"};
    int seen = 0;
    for (int s = 0; s < 2; s++) {
        json_t *results = json_object_get(json_object_get(json_object_get(audit, "models"), sections[s]), "results");
        size_t i;
        json_t *r;
        json_array_foreach(results, i, r) {
            char *got = frigg_chat_render(json_object_get(json_object_get(r, "request"), "messages"), NULL, 1);
            const char *want = json_string_value(json_object_get(r, "rendered"));
            CHECK(got && want && !strcmp(got, want), "audit %s[%zu]: %s", sections[s], i, got ? "differs" : frigg_error());
            free(got);
            seen++;
        }
    }
    CHECK(seen == 38, "expected 2 x 19 audit cases, saw %d", seen);
    json_decref(audit);
}

/* The whole prompt path for the audit requests: messages -> frigg_chat_render -> the tokenizer in
 * its default (training-faithful) mode must give exactly the ids DFM-Mimir's training pipeline
 * produced. */
static void test_audit_end_to_end(void) {
    char *apath = th_path(th_shared(), "data/mimir/training-tokenizer-audit.json");
    char *tpath = th_path(th_shared(), "data/tokenizers/mimir-equivalent.tokenizer.json");
    json_t *audit = json_load_file(apath, 0, NULL);
    frigg_tokenizer *tok = audit ? frigg_tokenizer_load(tpath, 0) : NULL;
    free(apath);
    free(tpath);
    if (!audit || !tok) {
        SKIP("audit file or mimir-equivalent tokenizer not available: messages->ids check skipped");
        json_decref(audit);
        return;
    }
    json_t *results = json_object_get(json_object_get(json_object_get(audit, "models"), "noctrex"), "results");
    size_t i;
    json_t *r;
    int same = 0;
    json_array_foreach(results, i, r) {
        char *text = frigg_chat_render(json_object_get(json_object_get(r, "request"), "messages"), NULL, 1);
        int32_t *ids = NULL;
        size_t n = 0;
        int ok = text && frigg_tokenizer_encode(tok, text, strlen(text), &ids, &n) == 0;
        json_t *want = json_object_get(r, "training_tokens");
        ok = ok && n == json_array_size(want);
        for (size_t k = 0; ok && k < n; k++) ok = ids[k] == json_integer_value(json_array_get(want, k));
        CHECK(ok, "audit %zu: messages -> render -> encode differs from training_tokens", i);
        same += ok;
        free(ids);
        free(text);
    }
    CHECK(same == 19, "messages -> ids: %d/19 equal to training_tokens", same);
    frigg_tokenizer_free(tok);
    json_decref(audit);
}

/* Inputs jinja2 would render (or render into something meaningless) that frigg refuses with an
 * error naming the field. */
static void expect_refusal(const char *messages_json, const char *tools_json, const char *want_in_error) {
    json_t *m = json_loads(messages_json, 0, NULL), *t = tools_json ? json_loads(tools_json, 0, NULL) : NULL;
    CHECK(m != NULL, "bad test JSON %s", messages_json);
    char *got = frigg_chat_render(m, t, 1);
    CHECK(got == NULL, "%s was rendered: %.200s", messages_json, got);
    CHECK(got || strstr(frigg_error(), want_in_error), "error \"%s\" should mention \"%s\"", frigg_error(), want_in_error);
    free(got);
    json_decref(m);
    json_decref(t);
}

static void test_refusals(void) {
    expect_refusal("{\"role\":\"user\"}", NULL, "messages");
    expect_refusal("[{\"content\":\"x\"}]", NULL, "messages[0]");
    expect_refusal("[{\"role\":\"user\",\"content\":\"x\"}]", "{\"a\":1}", "tools");
    expect_refusal("[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]", NULL,
                   "messages[0].content[0].type");
    expect_refusal("[{\"role\":\"user\",\"content\":{\"text\":\"x\"}}]", NULL, "messages[0].content");
    expect_refusal("[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
                   "{\"name\":\"f\",\"arguments\":{\"\xce\xa3x\":1}}}]}]",
                   NULL, "U+03A3");
    expect_refusal("[{\"role\":\"user\",\"content\":\"q\"}]",
                   "[{\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"\xc3\xa6\"}}}]",
                   "tools[0].function.parameters.type");
    expect_refusal("[{\"role\":\"user\",\"content\":\"q\"}]",
                   "[{\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":"
                   "{\"type\":\"string\",\"description\":[\"it's \\\"x\\\"\"]}}}}}]",
                   "tools[0].function.parameters.properties.a.description");
    expect_refusal("[{\"role\":\"user\",\"content\":\"q\"}]", "[{\"function\":{\"description\":\"no name\"}}]",
                   "tools[0].function.name");
    /* deep nesting is refused, not a stack overflow */
    char deep[4096] = "[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
                      "{\"name\":\"f\",\"arguments\":{\"a\":";
    for (int i = 0; i < 100; i++) strcat(deep, "[");
    for (int i = 0; i < 100; i++) strcat(deep, "]");
    strcat(deep, "}}}]}]");
    expect_refusal(deep, NULL, "nested deeper");
}

/* A str(list) the template really produces: `"type": ["string", "null"]` upper-cased. */
static void test_list_type_repr(void) {
    json_t *m = json_loads("[{\"role\":\"user\",\"content\":\"q\"}]", 0, NULL);
    json_t *t = json_loads("[{\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":"
                           "{\"a\":{\"type\":[\"string\",\"null\"]}}}}}]", 0, NULL);
    char *got = frigg_chat_render(m, t, 0);
    CHECK(got && strstr(got, "a:{type:<|\"|>['STRING', 'NULL']<|\"|>}"), "list type: %s", got ? got : frigg_error());
    free(got);
    json_decref(m);
    json_decref(t);
}

static void test_float_repr(void) {
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0.0, "0.0"}, {-0.0, "-0.0"}, {1.0, "1.0"}, {0.5, "0.5"}, {0.1, "0.1"}, {1e-05, "1e-05"},
        {1e+20, "1e+20"}, {1e+16, "1e+16"}, {1000000000000000.0, "1000000000000000.0"},
        {9999999999999998.0, "9999999999999998.0"}, {0.0001, "0.0001"}, {0.00012345, "0.00012345"},
        {1.5e-07, "1.5e-07"}, {5e-324, "5e-324"}, {1.7976931348623157e+308, "1.7976931348623157e+308"},
        {2.2250738585072014e-308, "2.2250738585072014e-308"}, {123456789.123, "123456789.123"},
        {3.14159, "3.14159"}, {100.0, "100.0"}, {1e+22, "1e+22"}, {1e+23, "1e+23"},
        {-2.5e-10, "-2.5e-10"}, {0.30000000000000004, "0.30000000000000004"},
        {1234567890123456.8, "1234567890123456.8"}, {1.2345678901234568e+16, "1.2345678901234568e+16"},
        {1.5e-323, "1.5e-323"}, {1.152921504606847e+18, "1.152921504606847e+18"},
        {9.5367431640625e-07, "9.5367431640625e-07"}, {0.3333333333333333, "0.3333333333333333"},
        {-1e+100, "-1e+100"}, {4.35, "4.35"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[32];
        frigg_py_float_repr(cases[i].v, out);
        CHECK(!strcmp(out, cases[i].want), "repr(%.17g): want %s got %s", cases[i].v, cases[i].want, out);
    }
    char *path = th_path(th_root(), "golden/chat/float_repr.txt");
    FILE *f = fopen(path, "r");
    free(path);
    CHECK(f != NULL, "golden/chat/float_repr.txt missing");
    if (!f) return;
    char line[128];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        uint64_t bits;
        char want[64], got[32];
        if (line[0] == '#' || sscanf(line, "%" SCNx64 " %63s", &bits, want) != 2) continue;
        double v;
        memcpy(&v, &bits, 8);
        frigg_py_float_repr(v, got);
        if (strcmp(got, want) && bad++ < 5) fprintf(stderr, "  repr %016" PRIx64 ": want %s got %s\n", bits, want, got);
        n++;
    }
    fclose(f);
    CHECK(n >= 3000 && bad == 0, "float_repr.txt: %d of %d differ", bad, n);
}

static void test_strip_lower(void) {
    const char *s = "\xc2\xa0\xe3\x80\x80 a b\t\xe2\x80\x8b\n\x1c";
    size_t a, e;
    frigg_py_strip(s, strlen(s), &a, &e);
    CHECK(e - a == 7 && !memcmp(s + a, "a b\t\xe2\x80\x8b", 7), "strip kept [%zu,%zu)", a, e);
    frigg_py_strip("   ", 3, &a, &e);
    CHECK(a == e, "all-space strip");
    char *low;
    size_t ll;
    CHECK(frigg_py_lower("\xc3\x86" "ble \xc4\xb0" "D Z", 10, &low, &ll) == 0, "lower failed");
    CHECK(ll == 11 && !memcmp(low, "\xc3\xa6" "ble i\xcc\x87" "d z", 11), "lower gave %.*s", (int)ll, low);
    free(low);
    CHECK(frigg_py_lower("\xce\xa3", 2, &low, &ll) == -1, "final sigma must be refused");
}

int main(void) {
    TEST_MAIN_BEGIN("test_chat");
    test_golden_file();
    test_audit_file();
    test_audit_end_to_end();
    test_refusals();
    test_list_type_repr();
    test_float_repr();
    test_strip_lower();
    TEST_MAIN_END();
}
