/* test_grammar.c — structured output (common/grammar), on the CPU:
 *  1. schemas compile, and JSON texts are accepted or refused as the schema says (whole-text checks through the
 *     recogniser: every byte advances and the end is allowed, or some byte or the end is refused);
 *  2. bad schemas are refused with a message naming the problem: not JSON, wrong keyword types, unsupported
 *     keywords (by name), $ref cycles without a base case or that recurse before a byte, size and depth limits;
 *  3. the regex subset: matches and refusals, and the constructs it refuses by name;
 *  4. masks against brute force: on states reached by random walks under each grammar, a token's bit is set
 *     exactly when the recogniser accepts the token's bytes (an end id: exactly when the grammar may end), for
 *     every id of a small hand-made vocabulary, of golden/default's tokenizer, and of the 262k DFM-Mimir-
 *     equivalent tokenizer in ../shared (SKIP when missing); the cached mask of a state seen before equals the
 *     one computed fresh;
 *  5. clone, is_done, advance_token, and the mask applied to logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"
#include "base/strbuf.h"
#include "base/util.h"

/* ---- helpers ---- */
static frigg_grammar *schema(const char *s) { return frigg_grammar_from_schema(s, strlen(s)); }

/* 1 when the whole text is a document of g */
static int accepts_doc(const frigg_grammar *g, const char *text) {
    frigg_gmatcher *m = frigg_gmatcher_new(g);
    int ok = frigg_gmatcher_advance(m, text, strlen(text)) == 0 && frigg_gmatcher_can_end(m);
    frigg_gmatcher_free(m);
    return ok;
}

typedef struct {
    const char *doc;
    int ok;
} doc_case;

static void check_docs(const char *sch, const doc_case *cases, int n) {
    frigg_grammar *g = schema(sch);
    CHECK(g != NULL, "compiles: %s: %s", sch, g ? "" : frigg_error());
    if (!g) return;
    for (int i = 0; i < n; i++)
        CHECK(accepts_doc(g, cases[i].doc) == cases[i].ok, "schema %s: %s should be %s", sch, cases[i].doc,
              cases[i].ok ? "accepted" : "refused");
    frigg_grammar_free(g);
}

#define DOCS(sch, ...)                                                        \
    do {                                                                      \
        const doc_case cs_[] = {__VA_ARGS__};                                 \
        check_docs(sch, cs_, (int)(sizeof cs_ / sizeof cs_[0]));              \
    } while (0)

static void check_error(const char *sch, const char *want) {
    frigg_grammar *g = schema(sch);
    CHECK(g == NULL, "refused: %s", sch);
    if (g) {
        frigg_grammar_free(g);
        return;
    }
    CHECK(strstr(frigg_error(), want) != NULL, "schema %s: the error '%s' should name '%s'", sch, frigg_error(), want);
}

/* ---- 1. documents ---- */
static void test_documents(void) {
    DOCS("{\"type\":\"integer\"}", {"0", 1}, {"-12", 1}, {"12", 1}, {"012", 0}, {"-0", 0}, {"1.5", 0}, {"", 0}, {"\"1\"", 0});
    DOCS("{\"type\":\"integer\",\"minimum\":-15,\"maximum\":230}", {"-15", 1}, {"-16", 0}, {"0", 1}, {"230", 1}, {"231", 0},
         {"99", 1}, {"100", 1}, {"229", 1}, {"1000", 0}, {"-9", 1}, {"-100", 0});
    DOCS("{\"type\":\"integer\",\"exclusiveMinimum\":5}", {"5", 0}, {"6", 1}, {"60000000000", 1}, {"-1", 0});
    DOCS("{\"type\":\"integer\",\"maximum\":-3}", {"-3", 1}, {"-2", 0}, {"0", 0}, {"-300000", 1});
    DOCS("{\"type\":\"integer\",\"minimum\":10,\"maximum\":10}", {"10", 1}, {"1", 0}, {"100", 0});
    DOCS("{\"type\":\"integer\",\"minimum\":1.5,\"maximum\":3.9}", {"1", 0}, {"2", 1}, {"3", 1}, {"4", 0});
    DOCS("{\"type\":\"number\"}", {"1.5e-3", 1}, {"-0.25", 1}, {"1.", 0}, {".5", 0}, {"1E+9", 1}, {"NaN", 0});
    DOCS("{\"type\":\"boolean\"}", {"true", 1}, {"false", 1}, {"True", 0});
    DOCS("{\"type\":\"null\"}", {"null", 1}, {"nul", 0});
    DOCS("{\"type\":[\"string\",\"null\"]}", {"null", 1}, {"\"a\"", 1}, {"1", 0});
    DOCS("{\"type\":\"string\",\"nullable\":true}", {"null", 1}, {"\"x\"", 1});
    DOCS("{\"type\":\"string\"}", {"\"\"", 1}, {"\"h\\u00e9j \\\" \\\\ \\n\"", 1}, {"\"bl\xc3\xa5\"", 1},
         {"\"\xc3\"", 0}, {"\"a\nb\"", 0}, {"\"\\x\"", 0}, {"\"\\ud800\"", 0}, {"\"\xf0\x9f\x98\x80\"", 1}, {"\"abc", 0},
         {"\"\xed\xa0\x80\"", 0}, {"\"\xc0\xaf\"", 0});
    DOCS("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", {"\"a\"", 0}, {"\"ab\"", 1}, {"\"a\xc3\xa5\\n\"", 1},
         {"\"abcd\"", 0});
    DOCS("{\"type\":\"string\",\"minLength\":2}", {"\"a\"", 0}, {"\"abcdefgh\"", 1});
    DOCS("{\"type\":\"string\",\"pattern\":\"^[a-z]+-[0-9]{2}$\"}", {"\"ab-12\"", 1}, {"\"ab-123\"", 0}, {"\"-12\"", 0});
    DOCS("{\"type\":\"string\",\"pattern\":\"ab\"}", {"\"xxabyy\"", 1}, {"\"ab\"", 1}, {"\"a b\"", 0});
    DOCS("{\"type\":\"string\",\"pattern\":\"^a\\\"b$\"}", {"\"a\\\"b\"", 1}, {"\"a\"b\"", 0});
    DOCS("{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-29\"", 1}, {"\"2024-13-01\"", 0}, {"\"2024-1-01\"", 0});
    DOCS("{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2024-02-29T12:30:00Z\"", 1},
         {"\"2024-02-29T12:30:00.123+01:00\"", 1}, {"\"2024-02-29 12:30:00Z\"", 0}, {"\"2024-02-29T24:00:00Z\"", 0});
    DOCS("{\"type\":\"string\",\"format\":\"time\"}", {"\"23:59:59Z\"", 1}, {"\"23:59\"", 0});
    /* only days that exist, and no leap second (strict validators, Python's jsonschema among them, refuse both) */
    DOCS("{\"type\":\"string\",\"format\":\"date\"}", {"\"2023-02-28\"", 1}, {"\"2023-02-29\"", 0}, {"\"2000-02-29\"", 1},
         {"\"1900-02-29\"", 0}, {"\"0004-02-29\"", 1}, {"\"2023-04-30\"", 1}, {"\"2023-04-31\"", 0}, {"\"2023-11-31\"", 0},
         {"\"2023-12-31\"", 1}, {"\"2023-02-30\"", 0}, {"\"0000-01-01\"", 0}, {"\"0001-01-01\"", 1}, {"\"9999-12-31\"", 1});
    DOCS("{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2023-06-31T10:00:00Z\"", 0}, {"\"2024-02-29T23:59:60Z\"", 0},
         {"\"2024-02-29T23:59:59.9-05:00\"", 1});
    DOCS("{\"type\":\"string\",\"format\":\"time\"}", {"\"23:59:60Z\"", 0}, {"\"00:00:00+14:00\"", 1});
    DOCS("{\"type\":\"string\",\"format\":\"email\"}", {"\"a.b+c@ex-ample.dk\"", 1}, {"\"a@b\"", 0}, {"\"@b.dk\"", 0});
    DOCS("{\"type\":\"string\",\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\"", 1},
         {"\"123e4567-e89b-12d3-a456-42661417400\"", 0});
    DOCS("{\"type\":\"string\",\"format\":\"ipv4\"}", {"\"192.168.0.255\"", 1}, {"\"256.1.1.1\"", 0});
    DOCS("{\"enum\":[\"red\",\"green\",1,null,{\"a\":[1,2]}]}", {"\"red\"", 1}, {"\"green\"", 1}, {"\"blue\"", 0}, {"1", 1},
         {"null", 1}, {"{\"a\":[1,2]}", 1}, {"{\"a\": [1,2]}", 0});
    DOCS("{\"const\":\"x\"}", {"\"x\"", 1}, {"\"y\"", 0});
    DOCS("{\"const\":0.1}", {"0.1", 1});
    DOCS("{\"type\":\"string\",\"enum\":[\"a\",1]}", {"\"a\"", 1}, {"1", 0});
    /* objects: order, required, optional, additionalProperties */
    const char *person = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
                         "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"name\"]}";
    DOCS(person, {"{\"name\":\"Ann\"}", 1}, {"{ \"name\" : \"Ann\" , \"age\" : 3 }", 1}, {"{\"name\":\"A\",\"tags\":[]}", 1},
         {"{\"name\":\"A\",\"age\":3,\"tags\":[\"x\", \"y\"]}", 1}, {"{\"age\":3}", 0}, {"{}", 0},
         {"{\"name\":\"A\",\"extra\":1}", 0}, {"{\"age\":3,\"name\":\"A\"}", 0}, {"{\"name\":\"A\",}", 0},
         {"{\"name\":\"A\"} ", 0}, {"{\n  \"name\": \"A\"\n}", 1});
    DOCS("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}",
         {"{}", 1}, {"{\"a\":1,\"b\":[{}]}", 1}, {"{\"b\":2}", 1}, {"{\"a\":\"x\"}", 0});
    /* a listed name spelled with escapes is that name, not an additional member: refused while the text can still
     * be a listed key; after it has left every key, escapes are free */
    DOCS("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}}",
         {"{\"name\":1}", 1}, {"{\"n\\u0061me\":\"x\"}", 0}, {"{\"\\u006eame\":\"x\"}", 0}, {"{\"x\\u0061\":\"x\"}", 1},
         {"{\"nam\":\"x\"}", 1}, {"{\"names\":\"x\"}", 1}, {"{\"n\\\"\":\"x\"}", 1}, {"{\"name\":1,\"\\/\":\"x\"}", 0},
         {"{\"name\":1,\"/\":\"x\"}", 1});
    DOCS("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"number\"}}", {"{}", 1}, {"{\"x\":1,\"y\":2.5}", 1},
         {"{\"x\":\"1\"}", 0});
    DOCS("{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}}}", {"{}", 1}, {"{\"b\":1}", 1}, {"{\"a\":1,\"b\":2}", 1},
         {"{\"a\":1,,\"b\":2}", 0});
    DOCS("{\"type\":\"object\",\"required\":[\"k\"]}", {"{\"k\":[1,{\"z\":null}]}", 1}, {"{}", 0});
    /* a required name properties does not list takes additionalProperties' value (a schema: that one) */
    DOCS("{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"],\"additionalProperties\":{\"type\":\"integer\"}}",
         {"{\"b\":5}", 1}, {"{\"b\":\"x\"}", 0}, {"{\"a\":1,\"b\":2,\"c\":3}", 1}, {"{\"a\":1}", 0});
    /* arrays */
    DOCS("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}", {"[]", 0}, {"[1]", 1},
         {"[1, 2,3]", 1}, {"[1,2,3,4]", 0}, {"[1,]", 0}, {"[\"a\"]", 0});
    DOCS("{\"type\":\"array\"}", {"[]", 1}, {"[1,\"a\",[],{}]", 1});
    DOCS("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}",
         {"[\"a\",1]", 1}, {"[\"a\"]", 1}, {"[]", 1}, {"[\"a\",1,2]", 0}, {"[1]", 0});
    DOCS("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"}],\"items\":{\"type\":\"integer\"},\"minItems\":2}",
         {"[\"a\",1,2]", 1}, {"[\"a\"]", 0}, {"[\"a\",\"b\"]", 0});
    DOCS("{\"type\":\"array\",\"items\":[{\"type\":\"null\"}],\"additionalItems\":false}", {"[null]", 1}, {"[null,null]", 0});
    /* anyOf / oneOf / allOf / $ref */
    DOCS("{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
         "{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}]}",
         {"{\"a\":1}", 1}, {"{\"b\":\"x\"}", 1}, {"{\"a\":\"x\"}", 0}, {"{}", 0});
    DOCS("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"boolean\"}]}", {"3", 1}, {"true", 1}, {"\"3\"", 0});
    DOCS("{\"allOf\":[{\"type\":\"integer\"}]}", {"3", 1}, {"true", 0});
    const char *tree = "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                       "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},"
                       "\"$ref\":\"#/$defs/node\"}";
    DOCS(tree, {"{\"v\":1}", 1}, {"{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]},{\"v\":4}]}", 1},
         {"{\"v\":1,\"kids\":[{}]}", 0}, {"{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":\"x\"}]}]}", 0});
    DOCS("{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#\"}}}", {"{}", 1}, {"{\"next\":{\"next\":{}}}", 1},
         {"{\"next\":1}", 0});
    DOCS("{\"definitions\":{\"a\":{\"type\":\"string\"}},\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/definitions/a\"}},"
         "\"required\":[\"x\"]}",
         {"{\"x\":\"q\"}", 1}, {"{\"x\":1}", 0});
    DOCS("{\"$defs\":{\"a/b\":{\"type\":\"null\"}},\"$ref\":\"#/$defs/a~1b\"}", {"null", 1});
    /* any value; annotations are read past */
    DOCS("{}", {"1", 1}, {"[{\"a\":[null,true,\"x\"]}]", 1}, {"[", 0}, {"{\"a\" 1}", 0});
    DOCS("true", {"\"s\"", 1});
    DOCS("{\"title\":\"T\",\"description\":\"D\",\"type\":\"integer\",\"examples\":[1],\"default\":2}", {"1", 1});
    frigg_grammar *jo = frigg_grammar_json_object();
    CHECK(jo && accepts_doc(jo, "{\"a\":[1,{\"b\":null}],\"c\":\"d\"}") && accepts_doc(jo, "{}") && !accepts_doc(jo, "[]") &&
              !accepts_doc(jo, "{\"a\":}") && !accepts_doc(jo, "1"),
          "json_object: any object, nothing else");
    frigg_grammar_free(jo);
}

/* ---- 2. errors ---- */
static void test_errors(void) {
    check_error("{\"type\":", "not JSON");
    check_error("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"contains\":{}}}}", "'contains'");
    check_error("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"contains\":{}}}}", "#/properties/a");
    check_error("{\"type\":\"object\",\"patternProperties\":{}}", "'patternProperties'");
    check_error("{\"type\":\"objekt\"}", "'objekt'");
    check_error("{\"type\":5}", "'type'");
    check_error("{\"type\":\"array\",\"minItems\":-1}", "'minItems'");
    check_error("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "'minItems'");
    check_error("{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems'");
    check_error("{\"type\":\"string\",\"format\":\"hostname\"}", "format 'hostname'");
    check_error("{\"type\":\"string\",\"pattern\":\"(a\"}", "unterminated group");
    check_error("{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "lookahead");
    check_error("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "backreferences");
    check_error("{\"type\":\"string\",\"pattern\":\"a\",\"maxLength\":3}", "'pattern' beside");
    check_error("{\"type\":\"number\",\"minimum\":0}", "'minimum' on type number");
    check_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer");
    check_error("{\"type\":\"integer\",\"minimum\":1e30}", "64-bit");
    check_error("{\"type\":\"string\",\"properties\":{}}", "'properties' does not apply");
    check_error("{\"$ref\":\"#/$defs/missing\"}", "points at nothing");
    check_error("{\"$ref\":\"http://x/y.json\"}", "only references inside");
    check_error("{\"$ref\":\"#/$defs/a\",\"type\":\"object\"}", "'$ref' beside 'type'");
    check_error("{\"allOf\":[{},{}]}", "'allOf' with 2");
    check_error("{\"anyOf\":[]}", "'anyOf'");
    check_error("{\"enum\":[]}", "'enum'");
    check_error("false", "false");
    check_error("[1]", "object or a boolean");
    check_error("{\"type\":\"object\",\"required\":\"a\"}", "'required'");
    /* required, not in properties, additionalProperties false: no document has it */
    check_error("{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"],\"additionalProperties\":false}",
                "'required' names 'b', which 'properties' does not list and 'additionalProperties' false forbids");
    /* recursion without a base case: the object always needs another one inside */
    check_error("{\"$defs\":{\"a\":{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/$defs/a\"}},\"required\":[\"x\"]}},"
                "\"$ref\":\"#/$defs/a\"}",
                "no base case");
    check_error("{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#\"}},\"required\":[\"x\"]}", "no base case");
    /* a cycle of refs that never reads a byte */
    check_error("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"anyOf\":[{\"$ref\":\"#/$defs/a\"},{\"type\":\"null\"}]}},"
                "\"$ref\":\"#/$defs/a\"}",
                "never reads a byte");
    /* nesting, size */
    char deep[4096] = "";
    for (int i = 0; i < 80; i++) strcat(deep, "{\"type\":\"array\",\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 80; i++) strcat(deep, "}");
    check_error(deep, "deeper than");
    /* repeated items and long counted strings are built once, as rules of their own (gram_schema.c): a
     * million strings of up to 1,000 characters compile, rather than being 10^9 copies */
    frigg_grammar *shared = schema("{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
                                   "\"maxLength\":1000},\"maxItems\":1000},\"maxItems\":1000}");
    CHECK(shared != NULL, "1000 x 1000 x 1000-character strings: %d states",
          shared ? frigg_grammar_n_states(shared) : -1);
    frigg_grammar_free(shared);
    check_error("{\"type\":\"string\",\"maxLength\":100000}", "too large");
    /* 20 levels of arrays of objects: each item schema probed once, not again in every copy of the level above
     * (that doubled the NFA at each level, past its state limit) */
    frigg_strbuf nest = FRIGG_STRBUF_INIT;
    for (int i = 0; i < 20; i++) frigg_sb_puts(&nest, "{\"type\":\"array\",\"maxItems\":3,\"items\":{\"type\":\"object\",\"properties\":{\"a\":");
    frigg_sb_puts(&nest, "{\"type\":\"string\",\"maxLength\":30}");
    for (int i = 0; i < 20; i++) frigg_sb_puts(&nest, ",\"b\":{\"type\":\"string\",\"maxLength\":20}}}}");
    frigg_grammar *nested = schema(nest.p);
    CHECK(nested != NULL, "20 nested arrays of objects: %s", nested ? "compiled" : frigg_error());
    frigg_grammar_free(nested);
    frigg_sb_free(&nest);
    /* what cannot be shared: 300 positions, each a string of its own length range */
    frigg_strbuf many = FRIGG_STRBUF_INIT;
    frigg_sb_puts(&many, "{\"type\":\"array\",\"prefixItems\":[");
    for (int i = 0; i < 300; i++) frigg_sb_printf(&many, "%s{\"type\":\"string\",\"maxLength\":%d}", i ? "," : "", 300 + i);
    frigg_sb_puts(&many, "]}");
    check_error(many.p, "too large");
    /* exponentially many DFA states: refused by the work budget, in a fraction of a second, before the state limit */
    check_error("{\"type\":\"string\",\"pattern\":\".*a.{60}\"}", "too complex");
    frigg_sb_free(&many);
    size_t big = FRIGG_GRAMMAR_MAX_SCHEMA_BYTES + 10;
    char *huge = frigg_xmalloc(big + 1);
    memset(huge, ' ', big);
    memcpy(huge, "{}", 2);
    huge[big] = 0;
    frigg_grammar *g = frigg_grammar_from_schema(huge, big);
    CHECK(!g && strstr(frigg_error(), "bytes"), "a schema over the size limit is refused: %s", frigg_error());
    free(huge);
}

/* ---- 3. regex ---- */
static void test_regex(void) {
    struct {
        const char *re, *text;
        int ok;
    } c[] = {
        {"a|bc", "a", 1},      {"a|bc", "bc", 1},       {"a|bc", "b", 0},      {"(ab)*c", "ababc", 1},
        {"(ab)*c", "abac", 0}, {"x{2,3}", "xx", 1},      {"x{2,3}", "xxxx", 0}, {"x{2,}", "xxxxxxx", 1},
        {"x{2}", "x", 0},      {"[^a-c]+", "xyz", 1},    {"[^a-c]+", "xaz", 0}, {"\\d\\D\\w\\W\\s\\S", "1a_ \tx", 1},
        {"\\d\\D\\w\\W", "1a_-", 1}, {".", "\n", 0},      {".", "\xc3\xa6", 1},  {"[\\u00e6-\\u00f8]", "\xc3\xb8", 1},
        {"\\u{1F600}", "\xf0\x9f\x98\x80", 1},          {"a{", "a{", 1},       {"[^]", "\n", 1},
        {"(?:a|b)+?", "abba", 1}, {"(?<n>x)y", "xy", 1}, {"\\.\\*", ".*", 1}, {"[\\d-]+", "1-2", 1},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        frigg_grammar *g = frigg_grammar_from_regex(c[i].re);
        CHECK(g != NULL, "regex %s compiles: %s", c[i].re, g ? "" : frigg_error());
        if (!g) continue;
        CHECK(accepts_doc(g, c[i].text) == c[i].ok, "regex %s on '%s' should be %s", c[i].re, c[i].text,
              c[i].ok ? "a match" : "no match");
        frigg_grammar_free(g);
    }
    const char *bad[][2] = {{"\\bx", "word boundaries"}, {"\\p{L}", "property"}, {"a^b", "anchor"}, {"*a", "nothing to repeat"},
                            {"a{2000}", "above 1000"},   {"(?<=a)b", "lookbehind"}, {"[b-a]", "out of order"}, {"a)", "unmatched"}, {"[]a]", "matches nothing"},
                            {"(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))", "nested"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        frigg_grammar *g = frigg_grammar_from_regex(bad[i][0]);
        CHECK(!g && strstr(frigg_error(), bad[i][1]), "regex %s refused naming '%s': %s", bad[i][0], bad[i][1],
              g ? "(compiled)" : frigg_error());
        frigg_grammar_free(g);
    }
}

/* ---- 4. masks against brute force ---- */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int bit(const uint32_t *b, int i) { return (b[i >> 5] >> (i & 31)) & 1; }

/* The mask of m against each id's bytes through a clone of m; 0 mismatches expected. */
static int brute_mismatches(frigg_gmatcher *m, const frigg_gvocab *v, const uint32_t *bits, int *first_bad) {
    int V = frigg_gvocab_size(v), bad = 0, can_end = frigg_gmatcher_can_end(m);
    *first_bad = -1;
    for (int id = 0; id < V; id++) {
        size_t n;
        const char *b = frigg_gvocab_bytes(v, id, &n);
        int want = frigg_gvocab_is_end(v, id) ? can_end : (b && frigg_gmatcher_accepts(m, b, n));
        if (want != bit(bits, id)) {
            if (*first_bad < 0) *first_bad = id;
            bad++;
        }
    }
    return bad;
}

/* Random walks under g: at each step the mask is checked against brute force (every `every` steps, all ids),
 * then a random allowed id is taken, preferring short tokens now and then so that documents end. */
static void walk_check_pre(const char *name, const frigg_grammar *g, const frigg_gvocab *v, int walks, int steps,
                           int every, uint64_t seed, int pre_threads);
static void walk_check(const char *name, const frigg_grammar *g, const frigg_gvocab *v, int walks, int steps, int every,
                       uint64_t seed) {
    walk_check_pre(name, g, v, walks, steps, every, seed, 0);
}

/* pre_threads > 0: the masker precomputed on that many threads first (frigg_gmasker_precompute_until), so the walks
 * read the nodes the threads made */
static void walk_check_pre(const char *name, const frigg_grammar *g, const frigg_gvocab *v, int walks, int steps,
                           int every, uint64_t seed, int pre_threads) {
    frigg_gmasker *mk = frigg_gmasker_new(g, v);
    if (pre_threads > 0) {
        int made = frigg_gmasker_precompute_until(mk, NULL, pre_threads);
        frigg_gmask_stats pst;
        frigg_gmasker_stats(mk, &pst);
        CHECK(made == pst.classes && made > 0, "%s: %d threads made a node for each of the %d classes (%d)", name,
              pre_threads, pst.classes, made);
    }
    int V = frigg_gvocab_size(v), W = (V + 31) / 32;
    uint32_t *bits = frigg_xmalloc((size_t)W * 4), *again = frigg_xmalloc((size_t)W * 4);
    int32_t *allowed = frigg_xmalloc((size_t)V * sizeof *allowed);
    int checked = 0, bad_states = 0, empty = 0, ended = 0;
    for (int w = 0; w < walks; w++) {
        frigg_gmatcher *m = frigg_gmatcher_new(g);
        char text[4096];
        size_t tl = 0;
        for (int st = 0; st < steps; st++) {
            int n = frigg_gmasker_fill(mk, m, bits);
            if (st % every == 0) {
                int fb;
                int bad = brute_mismatches(m, v, bits, &fb);
                checked++;
                if (bad) {
                    bad_states++;
                    if (bad_states <= 3) {
                        size_t bn;
                        const char *bb = frigg_gvocab_bytes(v, fb, &bn);
                        fprintf(stderr, "  %s: walk %d step %d: %d ids differ, first %d ('%.*s') mask %d\n", name, w, st, bad,
                                fb, (int)bn, bb ? bb : "", bit(bits, fb));
                    }
                }
                /* the same state from the cache again */
                frigg_gmasker_fill(mk, m, again);
                CHECK(!memcmp(bits, again, (size_t)W * 4), "%s: a cached mask equals the first", name);
            }
            if (n == 0) {
                if (!empty) fprintf(stderr, "  %s: walk %d: no token can follow '%.*s'\n", name, w, (int)tl, text);
                empty++;
                break;
            }
            int k = 0;
            for (int id = 0; id < V; id++)
                if (bit(bits, id)) allowed[k++] = id;
            int32_t pick = allowed[rng_next(&seed) % (uint64_t)k];
            /* prefer an end where allowed, and a short token half the time, so walks finish documents */
            if (frigg_gmatcher_can_end(m) && rng_next(&seed) % 4 == 0) {
                for (int i = 0; i < k; i++)
                    if (frigg_gvocab_is_end(v, allowed[i])) pick = allowed[i];
            } else if (rng_next(&seed) % 2) {
                for (int tries = 0; tries < 64; tries++) {
                    int32_t c = allowed[rng_next(&seed) % (uint64_t)k];
                    size_t bn;
                    frigg_gvocab_bytes(v, c, &bn);
                    if (bn == 1) {
                        pick = c;
                        break;
                    }
                }
            }
            CHECK(frigg_gmatcher_advance_token(m, v, pick) == 0, "%s: an allowed id %d advances", name, pick);
            size_t pn;
            const char *pb = frigg_gvocab_bytes(v, pick, &pn);
            if (pb && tl + pn < sizeof text) memcpy(text + tl, pb, pn), tl += pn;
            if (frigg_gmatcher_ended(m)) {
                ended++;
                break;
            }
        }
        frigg_gmatcher_free(m);
    }
    CHECK(bad_states == 0, "%s: masks equal brute force on %d states (%d differ)", name, checked, bad_states);
    CHECK(empty == 0, "%s: no state reached has an empty mask (%d did)", name, empty);
    fprintf(stderr, "  %s: %d states checked against all %d ids, %d of %d walks ended\n", name, checked, V, ended, walks);
    free(bits);
    free(again);
    free(allowed);
    frigg_gmasker_free(mk);
}

static const char *const mask_schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\",\"minimum\":0,"
    "\"maximum\":150},\"email\":{\"type\":\"string\",\"format\":\"email\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":"
    "[\"a\",\"b\",\"c\"]},\"maxItems\":4}},\"required\":[\"name\",\"age\"]}",
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"number\"},\"kids\":{\"type\":\"array\","
    "\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}",
    "{\"anyOf\":[{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]{1,8}( [A-Z][a-z]+)?$\"},{\"type\":\"null\"},"
    "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"boolean\"},{\"type\":\"string\",\"format\":\"date\"}]}]}",
    "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"maxLength\":5}}",
    /* counted strings longer than any token: positions far from both counts' ends share cache entries
     * (gram_mask.c's classes), those within a token's reach of an end do not */
    "{\"type\":\"object\",\"properties\":{\"t\":{\"type\":\"string\",\"minLength\":12,\"maxLength\":60},"
    "\"u\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":30},\"maxItems\":3}},"
    "\"required\":[\"t\",\"u\"]}",
};

static void test_masks_small(void) {
    /* a vocabulary with JSON's pieces, multi-byte tokens crossing every boundary, lone UTF-8 bytes */
    const char *toks[] = {"{", "}", "[", "]", ",", ":", "\"", " ", "\n", "{\"", "\":", "\",", "\"}", "\"]", "},", "}]", "]}",
                          "a", "b", "c", "ab", "name", "\"name\":", "age", "\"age\"", "1", "12", "0", "-", ".", "e", "5",
                          "true", "false", "null", "nul", "\\", "\\n", "\\u00", "e9", "\xc3", "\xa5", "\xc3\xa5", "@", "x@y.dk",
                          "kids", "v", "\"v\":1", "\"kids\":[", "Hello", " World", "H", "ello", "-0", "2024-", "01", "12-",
                          "\"a\",\"b\"", "\":{\"", "\"}}]}", "\xf0\x9f", "\x98\x80", "<eos>"};
    /* and every printable ASCII character, so that a walk never runs out of ways to go on */
    const char *all[256];
    size_t lens[256];
    char ascii[95][2];
    int V = 0;
    for (int c = 0x20; c < 0x7f; c++) {
        ascii[c - 0x20][0] = (char)c;
        ascii[c - 0x20][1] = 0;
        all[V++] = ascii[c - 0x20];
    }
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) all[V++] = toks[i];
    for (int i = 0; i < V; i++) lens[i] = strlen(all[i]);
    int32_t end = V - 1;
    frigg_gvocab *v = frigg_gvocab_from_bytes(all, lens, V, &end, 1);
    CHECK(v != NULL, "small vocabulary");
    for (size_t s = 0; s < sizeof mask_schemas / sizeof mask_schemas[0]; s++) {
        frigg_grammar *g = schema(mask_schemas[s]);
        CHECK(g != NULL, "mask schema %zu compiles: %s", s, g ? "" : frigg_error());
        if (!g) continue;
        char name[64];
        snprintf(name, sizeof name, "small vocab, schema %zu", s);
        walk_check(name, g, v, 40, 60, 1, 0x9E3779B97F4A7C15ull + s);
        frigg_grammar_free(g);
    }
    /* the counted strings' positions: one walk for all those that no token tells apart */
    frigg_grammar *cs = schema(mask_schemas[4]);
    if (cs) {
        frigg_gmasker *mk = frigg_gmasker_new(cs, v);
        int walks = frigg_gmasker_precompute(mk), n = frigg_grammar_n_states(cs);
        CHECK(walks * 2 < n, "counted strings: %d walks for %d states (positions alike share one)", walks, n);
        frigg_gmasker_free(mk);
        frigg_grammar_free(cs);
    }
    /* the same after a precompute on 3 threads: the nodes they made equal brute force */
    for (size_t k = 3; k < sizeof mask_schemas / sizeof mask_schemas[0]; k++) {
        frigg_grammar *g = schema(mask_schemas[k]);
        if (!g) continue;
        char name[64];
        snprintf(name, sizeof name, "small vocab, schema %zu, precomputed on 3 threads", k);
        walk_check_pre(name, g, v, 20, 60, 1, 99 + k, 3);
        frigg_grammar_free(g);
    }
    frigg_grammar *jo = frigg_grammar_json_object();
    walk_check("small vocab, json_object", jo, v, 40, 80, 1, 7);
    frigg_grammar_free(jo);
    frigg_gvocab_free(v);
}

static void test_masks_tokenizer(const char *label, const char *path, int walks, int steps, int every) {
    if (!frigg_file_exists(path)) {
        SKIP("%s is not here (set FRIGG_SHARED)", path);
        return;
    }
    frigg_tokenizer *tok = frigg_tokenizer_load(path, 0);
    CHECK(tok != NULL, "%s loads", path);
    if (!tok) return;
    int V = frigg_tokenizer_vocab_size(tok);
    int32_t ends[2] = {frigg_tokenizer_token_to_id(tok, "<eos>"), frigg_tokenizer_token_to_id(tok, "<turn|>")};
    int ne = ends[1] >= 0 ? 2 : 1;
    double t0 = frigg_now_ms();
    frigg_gvocab *v = frigg_gvocab_new(tok, V, ends, ends[0] >= 0 ? ne : 0);
    CHECK(v != NULL, "%s: vocabulary: %s", label, v ? "" : frigg_error());
    if (!v) {
        frigg_tokenizer_free(tok);
        return;
    }
    fprintf(stderr, "  %s: %d ids, %d trie nodes, built in %.0f ms\n", label, V, frigg_gvocab_trie_nodes(v), frigg_now_ms() - t0);
    /* byte-fallback tokens are their byte; ▁ is a space; special tokens have no bytes */
    int32_t b41 = frigg_tokenizer_token_to_id(tok, "<0x41>"), bos = frigg_tokenizer_token_to_id(tok, "<bos>");
    size_t n;
    const char *b = frigg_gvocab_bytes(v, b41, &n);
    CHECK(b41 < 0 || (b && n == 1 && b[0] == 'A'), "%s: <0x41> is the byte A", label);
    CHECK(bos < 0 || !frigg_gvocab_bytes(v, bos, &n), "%s: <bos> has no bytes", label);
    int32_t sp = frigg_tokenizer_token_to_id(tok, "\xe2\x96\x81the");
    b = frigg_gvocab_bytes(v, sp, &n);
    CHECK(sp < 0 || (b && n == 4 && !memcmp(b, " the", 4)), "%s: \xe2\x96\x81the is ' the'", label);
    for (size_t s = 0; s < sizeof mask_schemas / sizeof mask_schemas[0]; s++) {
        frigg_grammar *g = schema(mask_schemas[s]);
        if (!g) continue;
        char name[96];
        snprintf(name, sizeof name, "%s, schema %zu", label, s);
        walk_check(name, g, v, walks, steps, every, 1234 + s);
        frigg_grammar_free(g);
    }
    frigg_grammar *jo = frigg_grammar_json_object();
    char name[96];
    snprintf(name, sizeof name, "%s, json_object", label);
    walk_check(name, jo, v, walks, steps, every, 99);
    frigg_grammar_free(jo);
    frigg_gvocab_free(v);
    frigg_tokenizer_free(tok);
}

/* ---- 5. the rest of the API ---- */
static void test_api(void) {
    frigg_grammar *g = schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"required\":[\"a\"]}");
    frigg_gmatcher *m = frigg_gmatcher_new(g);
    CHECK(frigg_gmatcher_advance(m, "{\"a\":tr", 7) == 0, "prefix advances");
    frigg_gmatcher *c = frigg_gmatcher_clone(m);
    CHECK(frigg_gmatcher_advance(m, "x", 1) == -1, "a wrong byte is refused");
    CHECK(frigg_gmatcher_advance(m, "ue}", 3) == 0 && frigg_gmatcher_is_done(m) && frigg_gmatcher_can_end(m),
          "done after the closing brace");
    CHECK(!frigg_gmatcher_can_end(c) && !frigg_gmatcher_is_done(c) && frigg_gmatcher_accepts(c, "ue", 2) &&
              !frigg_gmatcher_accepts(c, "ux", 2),
          "the clone stayed where it was");
    CHECK(frigg_gmatcher_n_stacks(c) == 1, "one stack for an unambiguous schema");
    frigg_gmatcher_free(c);
    frigg_gmatcher_free(m);
    frigg_grammar_free(g);
    /* a number may go on: can end, not done */
    g = schema("{\"type\":\"integer\"}");
    m = frigg_gmatcher_new(g);
    CHECK(frigg_gmatcher_advance(m, "12", 2) == 0 && frigg_gmatcher_can_end(m) && !frigg_gmatcher_is_done(m),
          "an integer can end and go on");
    const char *toks[] = {"1", "2", "x", "END"};
    size_t lens[] = {1, 1, 1, 3};
    int32_t end = 3;
    frigg_gvocab *v = frigg_gvocab_from_bytes(toks, lens, 4, &end, 1);
    frigg_gmasker *mk = frigg_gmasker_new(g, v);
    uint32_t bits[1];
    CHECK(frigg_gmasker_fill(mk, m, bits) == 3 && bits[0] == 0xB, "digits and the end: mask %x", bits[0]);
    float lg[4] = {1, 2, 3, 4};
    frigg_grammar_apply_mask(lg, 4, bits);
    CHECK(lg[0] == 1 && lg[1] == 2 && isinf(lg[2]) && lg[2] < 0 && lg[3] == 4, "apply_mask sets refused ids to -inf");
    CHECK(frigg_gmatcher_advance_token(m, v, 3) == 0 && frigg_gmatcher_ended(m) && frigg_gmasker_fill(mk, m, bits) == 0,
          "after the end token nothing is allowed");
    CHECK(frigg_gmatcher_advance_token(m, v, 0) == -1, "no token after the end");
    frigg_gmask_stats st;
    frigg_gmasker_stats(mk, &st);
    CHECK(st.misses > 0 && st.walks > 0, "stats count the walks");
    int walks = frigg_gmasker_precompute(mk);
    frigg_gmasker_stats(mk, &st);
    CHECK(walks == st.classes && walks > 0 && walks <= frigg_grammar_n_states(g),
          "precompute walks once per class of states (%d walks, %d classes, %d states)", walks, st.classes,
          frigg_grammar_n_states(g));
    frigg_gmasker_free(mk);
    frigg_gvocab_free(v);
    frigg_gmatcher_free(m);
    frigg_grammar_free(g);
}

int main(void) {
    TEST_MAIN_BEGIN("test_grammar");
    test_documents();
    test_errors();
    test_regex();
    test_api();
    test_masks_small();
    char *p = th_path(th_root(), "golden/default/tokenizer.json");
    test_masks_tokenizer("golden/default", p, th_quick() ? 4 : 12, 40, 1);
    free(p);
    p = th_path(th_shared(), "data/tokenizers/mimir-equivalent.tokenizer.json");
    test_masks_tokenizer("mimir-262k", p, th_quick() ? 2 : 4, 40, th_quick() ? 20 : 5);
    free(p);
    TEST_MAIN_END();
}
