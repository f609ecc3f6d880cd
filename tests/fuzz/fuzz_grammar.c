/* libFuzzer target: a JSON Schema's text (response_format's json_schema.schema, from any client) compiled to a
 * grammar; when it compiles, a short walk through its token masks over a small vocabulary of JSON's pieces: every
 * allowed token must be one the recogniser takes, and the walk follows the lowest allowed id. The same text as a
 * regular expression, when it is short (see below). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static const char *const k_tokens[] = {"{", "}", "[", "]", ",", ":", "\"", " ", "\n", "0", "1", "-", ".", "e",
                                       "true", "false", "null", "a", "b", "\"a\"", "\":", "\\", "u", "00", "é",
                                       "\xc3", "\xa9", "x@y.z", "2024-01-31", "T12:00:00Z", "\"name\"", "12", NULL};

static void walk(const frigg_grammar *g) {
    enum { V = 33 };
    const char *b[V];
    size_t l[V];
    int n = 0;
    for (; k_tokens[n]; n++) {
        b[n] = k_tokens[n];
        l[n] = strlen(k_tokens[n]);
    }
    b[n] = "";
    l[n] = 0; /* the end id */
    int32_t end = n++;
    frigg_gvocab *v = frigg_gvocab_from_bytes(b, l, n, &end, 1);
    if (!v) return;
    frigg_gmasker *mk = frigg_gmasker_new(g, v);
    frigg_gmatcher *m = frigg_gmatcher_new(g);
    uint32_t bits[(V + 31) / 32];
    for (int step = 0; step < 24 && !frigg_gmatcher_ended(m); step++) {
        int allowed = frigg_gmasker_fill(mk, m, bits), pick = -1;
        for (int id = 0; id < n; id++) {
            if (!(bits[id >> 5] >> (id & 31) & 1u)) continue;
            allowed--;
            if (id != end && !frigg_gmatcher_accepts(m, b[id], l[id])) abort(); /* the mask allowed what cannot follow */
            if (pick < 0) pick = id;
        }
        if (allowed != 0) abort(); /* the count is the bits set */
        if (pick < 0) break;
        if (frigg_gmatcher_advance_token(m, v, pick)) abort();
    }
    frigg_gmatcher_free(m);
    frigg_gmasker_free(mk);
    frigg_gvocab_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    frigg_grammar *g = frigg_grammar_from_schema((const char *)data, size);
    if (g) {
        walk(g);
        frigg_grammar_free(g);
    }
    if (size < 16 && !memchr(data, 0, size)) { /* short: ".*" and many "." need 2^n DFA states (FRIGG_GRAMMAR_MAX_DFA_STATES bounds them, slowly) */
        char re[16];
        memcpy(re, data, size);
        re[size] = 0;
        g = frigg_grammar_from_regex(re);
        if (g) {
            walk(g);
            frigg_grammar_free(g);
        }
    }
    return 0;
}
