/* tok_load_pipeline.c — the normalizer, pre-tokenizer and decoder sections of tokenizer.json, and
 * transformers' fix_mistral_regex rewrite. What is not implemented is refused by name. */
#include <stdlib.h>
#include <string.h>

#include "tok_load.h"
#include "base/util.h"

/* fix_mistral_regex source text (TOKENIZER.md §3), exactly as transformers writes it. */
const char tok_mistral_regex[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* ---- normalizer ---- */
int tok_load_normalizer(const tok_ctx *c, frigg_tokenizer *tk, json_t *o) {
    if (json_is_null(o)) return 0;
    const char *t = tok_jtype(o);
    if (!t) return tok_fail(c, "normalizer without a \"type\"");
    if (!strcmp(t, "Sequence")) {
        json_t *list = json_object_get(o, "normalizers");
        if (!json_is_array(list)) return tok_fail(c, "normalizer Sequence without \"normalizers\" list");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) if (tok_load_normalizer(c, tk, e) < 0) return -1;
        return 0;
    }
    tok_norm nm = {0};
    const char *s;
    size_t n;
    if (!strcmp(t, "Replace")) {
        int is_regex;
        if (tok_jpattern(c, o, "normalizer Replace", &s, &n, &is_regex) < 0) return -1;
        if (is_regex) return tok_fail(c, "unsupported normalizer: Replace with a Regex pattern");
        if (n == 0) return tok_fail(c, "unsupported normalizer: Replace with an empty pattern");
        nm.kind = TOK_NORM_REPLACE;
        nm.pat = tok_dup(s, n);
        nm.pat_len = n;
        if (tok_jstr(o, "content", &s, &n) < 0) {
            free(nm.pat);
            return tok_fail(c, "normalizer Replace without a string \"content\"");
        }
    } else if (!strcmp(t, "Prepend")) {
        nm.kind = TOK_NORM_PREPEND;
        if (tok_jstr(o, "prepend", &s, &n) < 0) return tok_fail(c, "normalizer Prepend without a string \"prepend\"");
    } else {
        return tok_fail(c, "unsupported normalizer: %s", t);
    }
    nm.content = tok_dup(s, n);
    nm.content_len = n;
    tk->norm = frigg_xrealloc(tk->norm, (tk->n_norm + 1) * sizeof *tk->norm);
    tk->norm[tk->n_norm++] = nm;
    return 0;
}

/* ---- pre-tokenizer ---- */

static int split_behavior(const char *b) {
    if (!b) return -1;
    if (!strcmp(b, "Removed")) return TOK_SPLIT_REMOVED;
    if (!strcmp(b, "Isolated")) return TOK_SPLIT_ISOLATED;
    if (!strcmp(b, "MergedWithPrevious")) return TOK_SPLIT_MERGED_PREV;
    if (!strcmp(b, "MergedWithNext")) return TOK_SPLIT_MERGED_NEXT;
    if (!strcmp(b, "Contiguous")) return TOK_SPLIT_CONTIGUOUS;
    return -1;
}

static void push_pre(frigg_tokenizer *tk, tok_pretok p) {
    tk->pre = frigg_xrealloc(tk->pre, (tk->n_pre + 1) * sizeof *tk->pre);
    tk->pre[tk->n_pre++] = p;
}

int tok_load_pretok(const tok_ctx *c, frigg_tokenizer *tk, json_t *o) {
    const char *t = tok_jtype(o);
    if (!t) return tok_fail(c, "pre_tokenizer without a \"type\"");
    if (!strcmp(t, "Sequence")) {
        json_t *list = json_object_get(o, "pretokenizers");
        if (!json_is_array(list)) return tok_fail(c, "pre_tokenizer Sequence without \"pretokenizers\" list");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) if (tok_load_pretok(c, tk, e) < 0) return -1;
        return 0;
    }
    tok_pretok p = {0};
    const char *s;
    size_t n;
    if (!strcmp(t, "Split")) {
        int is_regex;
        if (tok_jpattern(c, o, "pre_tokenizer Split", &s, &n, &is_regex) < 0) return -1;
        json_t *bh = json_object_get(o, "behavior"), *inv = json_object_get(o, "invert");
        p.kind = TOK_PRE_SPLIT;
        p.behavior = split_behavior(json_is_string(bh) ? json_string_value(bh) : NULL);
        if (p.behavior < 0) return tok_fail(c, "pre_tokenizer Split: unsupported behavior");
        if (!json_is_boolean(inv)) return tok_fail(c, "pre_tokenizer Split without a boolean \"invert\"");
        p.invert = json_is_true(inv);
        if (is_regex) {
            if (tok_compile_regex(c, s, n, &p.re) < 0) return -1;
        } else if (n == 0) {
            return tok_fail(c, "unsupported pre_tokenizer: Split with an empty pattern");
        }
        p.pat = tok_dup(s, n);
        p.pat_len = n;
    } else if (!strcmp(t, "Metaspace")) {
        p.kind = TOK_PRE_METASPACE;
        if (tok_jstr(o, "replacement", &s, &n) < 0) return tok_fail(c, "pre_tokenizer Metaspace without \"replacement\"");
        if (tok_single_char(c, s, n, "pre_tokenizer Metaspace replacement", &p.repl_cp) < 0) return -1;
        memcpy(p.repl, s, n);
        p.repl_len = n;
        p.prepend_scheme = TOK_PREPEND_ALWAYS;
        json_t *ps = json_object_get(o, "prepend_scheme");
        if (ps && !json_is_null(ps)) {
            const char *v = json_is_string(ps) ? json_string_value(ps) : "";
            if (!strcmp(v, "always")) p.prepend_scheme = TOK_PREPEND_ALWAYS;
            else if (!strcmp(v, "first")) p.prepend_scheme = TOK_PREPEND_FIRST;
            else if (!strcmp(v, "never")) p.prepend_scheme = TOK_PREPEND_NEVER;
            else return tok_fail(c, "pre_tokenizer Metaspace: unsupported prepend_scheme");
        }
        json_t *aps = json_object_get(o, "add_prefix_space");
        if (json_is_false(aps)) {
            if (p.prepend_scheme != TOK_PREPEND_NEVER)
                return tok_fail(c, "pre_tokenizer Metaspace: add_prefix_space does not match declared prepend_scheme");
            p.prepend_scheme = TOK_PREPEND_NEVER;
        }
        json_t *sp = json_object_get(o, "split");
        p.split = sp && !json_is_null(sp) ? json_is_true(sp) : 1;
    } else {
        return tok_fail(c, "unsupported pre_tokenizer: %s", t);
    }
    push_pre(tk, p);
    return 0;
}

/* The regex as PCRE2 must run it to match HF: HF's Oniguruma has newer Unicode tables than PCRE2,
 * so the \p classes get the code points tok_regex_delta.c lists (probed from both engines), and \s
 * is spelled out as HF's set. */
static void hf_regex_pattern(tok_buf *out) {
    static const struct {
        const char *from, *pre, *post;
        int negated_space; /* the class starts with [^\s: write HF's spaces instead */
    } classes[] = {
        {"[^\\r\\n\\p{L}\\p{N}]", "[^\\r\\n\\p{L}\\p{N}", "]", 0},
        {"[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]", "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}", "]", 0},
        {"[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]", "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}", "]", 0},
        {"[^\\s\\p{L}\\p{N}]", "[^\\p{L}\\p{N}", "]", 1},
    };
    const char *adds[4][2] = { /* per class above */
                              {tok_delta_add_L, tok_delta_add_N},
                              {tok_delta_add_U, NULL},
                              {tok_delta_add_W, NULL},
                              {tok_delta_add_L, tok_delta_add_N}};
    const char *s = tok_mistral_regex;
    while (*s) {
        size_t k, nc = sizeof classes / sizeof *classes;
        for (k = 0; k < nc; k++)
            if (!strncmp(s, classes[k].from, strlen(classes[k].from))) break;
        if (k < nc) {
            tok_buf_put(out, classes[k].pre, strlen(classes[k].pre));
            if (classes[k].negated_space) tok_buf_put(out, tok_delta_space, strlen(tok_delta_space));
            for (int a = 0; a < 2; a++)
                if (adds[k][a]) tok_buf_put(out, adds[k][a], strlen(adds[k][a]));
            tok_buf_put(out, classes[k].post, strlen(classes[k].post));
            s += strlen(classes[k].from);
        } else if (!strncmp(s, "\\p{N}", 5)) {
            tok_buf_put(out, "[\\p{N}", 6);
            tok_buf_put(out, tok_delta_add_N, strlen(tok_delta_add_N));
            tok_buf_put(out, "]", 1);
            s += 5;
        } else if (!strncmp(s, "\\s", 2) || !strncmp(s, "\\S", 2)) {
            tok_buf_put(out, s[1] == 's' ? "[" : "[^", s[1] == 's' ? 1 : 2);
            tok_buf_put(out, tok_delta_space, strlen(tok_delta_space));
            tok_buf_put(out, "]", 1);
            s += 2;
        } else if (*s == '\\' && s[1]) {
            tok_buf_put(out, s, 2);
            s += 2;
        } else {
            tok_buf_put(out, s, 1);
            s++;
        }
    }
}

/* transformers' _patch_mistral_regex: Split(regex, Isolated) replaces element 0 of a Sequence,
 * otherwise it becomes Sequence([Split, current]). */
int tok_apply_hf_regex(const tok_ctx *c, frigg_tokenizer *tk, json_t *pre) {
    if (json_is_null(pre) || !pre)
        return tok_fail(c, "hf_regex: the file has no pre_tokenizer, so transformers would not rewrite it");
    const char *t = tok_jtype(pre);
    if (t && !strcmp(t, "Metaspace"))
        return tok_fail(c, "hf_regex: transformers would replace this Metaspace pre_tokenizer with ByteLevel, "
                       "which is not supported");
    tok_pretok p = {0};
    p.kind = TOK_PRE_SPLIT;
    p.behavior = TOK_SPLIT_ISOLATED;
    tok_buf pat = {0};
    hf_regex_pattern(&pat);
    if (tok_compile_regex(c, pat.p, pat.n, &p.re) < 0) {
        free(pat.p);
        return -1;
    }
    p.pat = pat.p;
    p.pat_len = pat.n;
    if (t && !strcmp(t, "Sequence")) {
        json_t *list = json_object_get(pre, "pretokenizers");
        if (json_array_size(list) == 0) {
            pcre2_code_free(p.re);
            free(p.pat);
            return tok_fail(c, "hf_regex: an empty pre_tokenizer Sequence has no element 0 to replace");
        }
        /* element 0 may itself be a nested Sequence loaded as several steps: count them */
        frigg_tokenizer probe = {0};
        if (tok_load_pretok(c, &probe, json_array_get(list, 0)) < 0) {
            pcre2_code_free(p.re);
            free(p.pat);
            return -1;
        }
        size_t drop = probe.n_pre;
        for (size_t i = 0; i < probe.n_pre; i++) {
            if (probe.pre[i].re) pcre2_code_free(probe.pre[i].re);
            free(probe.pre[i].pat);
        }
        free(probe.pre);
        for (size_t i = 0; i < drop; i++) {
            if (tk->pre[i].re) pcre2_code_free(tk->pre[i].re);
            free(tk->pre[i].pat);
        }
        memmove(tk->pre, tk->pre + drop, (tk->n_pre - drop) * sizeof *tk->pre);
        tk->n_pre -= drop;
    }
    tk->pre = frigg_xrealloc(tk->pre, (tk->n_pre + 1) * sizeof *tk->pre);
    memmove(tk->pre + 1, tk->pre, tk->n_pre * sizeof *tk->pre);
    tk->pre[0] = p;
    tk->n_pre++;
    return 0;
}

/* ---- decoder ---- */
int tok_load_decoder(const tok_ctx *c, frigg_tokenizer *tk, json_t *o) {
    const char *t = tok_jtype(o);
    if (!t) return tok_fail(c, "decoder without a \"type\"");
    if (!strcmp(t, "Sequence")) {
        json_t *list = json_object_get(o, "decoders");
        if (!json_is_array(list)) return tok_fail(c, "decoder Sequence without \"decoders\" list");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) if (tok_load_decoder(c, tk, e) < 0) return -1;
        return 0;
    }
    tok_dec d = {0};
    const char *s;
    size_t n;
    if (!strcmp(t, "Replace")) {
        int is_regex;
        if (tok_jpattern(c, o, "decoder Replace", &s, &n, &is_regex) < 0) return -1;
        if (is_regex) return tok_fail(c, "unsupported decoder: Replace with a Regex pattern");
        if (n == 0) return tok_fail(c, "unsupported decoder: Replace with an empty pattern");
        d.kind = TOK_DEC_REPLACE;
        d.pat = tok_dup(s, n);
        d.pat_len = n;
        if (tok_jstr(o, "content", &s, &n) < 0) {
            free(d.pat);
            return tok_fail(c, "decoder Replace without a string \"content\"");
        }
        d.content = tok_dup(s, n);
        d.content_len = n;
    } else if (!strcmp(t, "ByteFallback")) {
        d.kind = TOK_DEC_BYTE_FALLBACK;
    } else if (!strcmp(t, "Fuse")) {
        d.kind = TOK_DEC_FUSE;
    } else if (!strcmp(t, "Strip")) {
        d.kind = TOK_DEC_STRIP;
        json_t *st = json_object_get(o, "start"), *sp = json_object_get(o, "stop");
        if (tok_jstr(o, "content", &s, &n) < 0 || tok_single_char(c, s, n, "decoder Strip content", &d.cp) < 0)
            return tok_fail(c, "decoder Strip needs a single-character \"content\"");
        if (!json_is_integer(st) || !json_is_integer(sp) || json_integer_value(st) < 0 ||
            json_integer_value(sp) < 0)
            return tok_fail(c, "decoder Strip needs non-negative integer \"start\" and \"stop\"");
        d.start = (size_t)json_integer_value(st);
        d.stop = (size_t)json_integer_value(sp);
    } else if (!strcmp(t, "Metaspace")) {
        d.kind = TOK_DEC_METASPACE;
        if (tok_jstr(o, "replacement", &s, &n) < 0 ||
            tok_single_char(c, s, n, "decoder Metaspace replacement", &d.cp) < 0)
            return tok_fail(c, "decoder Metaspace needs a single-character \"replacement\"");
        d.prepend_scheme = TOK_PREPEND_ALWAYS;
        json_t *ps = json_object_get(o, "prepend_scheme");
        if (ps && !json_is_null(ps)) {
            const char *v = json_is_string(ps) ? json_string_value(ps) : "";
            if (!strcmp(v, "always")) d.prepend_scheme = TOK_PREPEND_ALWAYS;
            else if (!strcmp(v, "first")) d.prepend_scheme = TOK_PREPEND_FIRST;
            else if (!strcmp(v, "never")) d.prepend_scheme = TOK_PREPEND_NEVER;
            else return tok_fail(c, "decoder Metaspace: unsupported prepend_scheme");
        }
        if (json_is_false(json_object_get(o, "add_prefix_space"))) {
            if (d.prepend_scheme != TOK_PREPEND_NEVER)
                return tok_fail(c, "decoder Metaspace: add_prefix_space does not match declared prepend_scheme");
        }
    } else {
        return tok_fail(c, "unsupported decoder: %s", t);
    }
    tk->dec = frigg_xrealloc(tk->dec, (tk->n_dec + 1) * sizeof *tk->dec);
    tk->dec[tk->n_dec++] = d;
    return 0;
}
