/* grammar.c — the public constructors: a schema, any JSON object, a regular expression, each built into one
 * NFA (rule 0 the root) and made into the DFAs the recogniser runs (gram_dfa.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/util.h"

static frigg_grammar *finish(gnfa *a) {
    frigg_grammar *g = NULL;
    if (a->overflow) frigg_set_error("the grammar is too large: more than %d automaton states", FRIGG_GRAMMAR_MAX_NFA_STATES);
    else g = gdfa_build(a);
    gnfa_free(a);
    return g;
}

frigg_grammar *frigg_grammar_from_schema(const char *text, size_t len) {
    gnfa a = {0};
    if (gschema_compile(&a, text, len)) {
        gnfa_free(&a);
        return NULL;
    }
    return finish(&a);
}

frigg_grammar *frigg_grammar_json_object(void) {
    gnfa a = {0};
    int32_t r = gnfa_rule(&a, "#");
    gfrag f = gj_any_object(&a);
    gf_join(&a, a.rules[r].start, f.s);
    gf_join(&a, f.e, a.rules[r].end);
    return finish(&a);
}

frigg_grammar *frigg_grammar_from_regex(const char *re) {
    gnfa a = {0};
    int32_t r = gnfa_rule(&a, "#");
    gfrag f;
    char err[300];
    if (grx_compile(&a, re, strlen(re), GRX_FULL, &f, err, sizeof err)) {
        frigg_set_error("regex: %s", err);
        gnfa_free(&a);
        return NULL;
    }
    gf_join(&a, a.rules[r].start, f.s);
    gf_join(&a, f.e, a.rules[r].end);
    return finish(&a);
}

frigg_grammar *frigg_grammar_mimir_calls(const char *const *names, const char *const *schemas, const size_t *lens,
                                         int n, int mode) {
    gnfa a = {.mimir = 1};
    int many = mode & FRIGG_GCALLS_MANY;
    int32_t r = gnfa_rule(&a, mode ? "calls" : "call");
    gfrag *alts = frigg_xcalloc((size_t)(n > 0 ? n : 1), sizeof *alts);
    for (int i = 0; i < n; i++) {
        gfrag args;
        if (gschema_compile_call(&a, schemas[i], lens[i], &args)) {
            char why[1200];
            snprintf(why, sizeof why, "%s", frigg_error());
            frigg_set_error("tool '%s': %s", names[i], why);
            free(alts);
            gnfa_free(&a);
            return NULL;
        }
        alts[i] = gf_seq(&a, gf_lit(&a, names[i], strlen(names[i])), args);
    }
    const char *close = "<tool_call|>", *open = "<|tool_call>call:";
    gfrag f = gf_seq(&a, gf_alt(&a, alts, n), gf_lit(&a, close, strlen(close)));
    free(alts);
    if (mode) { /* the call a rule of its own, called first and then after each <|tool_call>call: (chat.c writes
                   parallel calls back to back) */
        int32_t one = gnfa_rule(&a, "call");
        gf_join(&a, a.rules[one].start, f.s);
        gf_join(&a, f.e, a.rules[one].end);
        f = gf_call(&a, one);
        if (mode & FRIGG_GCALLS_AFTER_OPEN) f = gf_seq(&a, gf_lit(&a, "call:", 5), f);
        if (many) f = gf_seq(&a, f, gf_star(&a, gf_seq(&a, gf_lit(&a, open, strlen(open)), gf_call(&a, one))));
    }
    gf_join(&a, a.rules[r].start, f.s);
    gf_join(&a, f.e, a.rules[r].end);
    return finish(&a);
}

int frigg_grammar_n_states(const frigg_grammar *g) { return g->n; }
int frigg_grammar_n_rules(const frigg_grammar *g) { return g->nrules; }
