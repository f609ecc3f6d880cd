/* tokenizer_load.c — tokenizer.json → frigg_tokenizer, with HF tokenizers 0.23's rules: vocab
 * duplicates keep the last id (serde map), merges as "a b" strings or [a, b] pairs (later
 * duplicates win), added tokens resolved through the vocab like AddedVocabulary::add_tokens, and
 * the fix_mistral_regex rewrite of transformers when asked. Any component or option this engine
 * does not implement is refused with its name, never ignored. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "util.h"

const char tok_mistral_regex[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Loader context: the file name for messages. */
typedef struct {
    const char *name;
} ctx;

static int fail(const ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const ctx *c, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    frigg_set_error("%s: %s", c->name, msg);
    return -1;
}

static char *dup_bytes(const char *s, size_t n) {
    char *p = frigg_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* A JSON string member (by key) as bytes; -1 when absent or not a string. */
static int get_str(json_t *o, const char *key, const char **s, size_t *n) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) return -1;
    *s = json_string_value(v);
    *n = json_string_length(v);
    return 0;
}

static const char *type_of(json_t *o) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}

/* pattern: {"String": s} or {"Regex": r}; *is_regex tells which. */
static int get_pattern(const ctx *c, json_t *o, const char *what, const char **s, size_t *n, int *is_regex) {
    json_t *p = json_object_get(o, "pattern");
    const char *v;
    if (json_is_object(p) && json_object_size(p) == 1) {
        if (!get_str(p, "String", &v, n)) {
            *is_regex = 0;
            *s = v;
            return 0;
        }
        if (!get_str(p, "Regex", &v, n)) {
            *is_regex = 1;
            *s = v;
            return 0;
        }
    }
    return fail(c, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", what);
}

static int single_char(const ctx *c, const char *s, size_t n, const char *what, uint32_t *cp) {
    size_t adv;
    if (n == 0 || tok_utf8_valid(s, n) != n || (tok_utf8_next(s, n, &adv), adv != n))
        return fail(c, "%s must be a single character", what);
    *cp = tok_utf8_next(s, n, &adv);
    return 0;
}

/* ---- normalizer ---- */
static int load_normalizer(const ctx *c, frigg_tokenizer *tk, json_t *o) {
    if (json_is_null(o)) return 0;
    const char *t = type_of(o);
    if (!t) return fail(c, "normalizer without a \"type\"");
    if (!strcmp(t, "Sequence")) {
        json_t *list = json_object_get(o, "normalizers");
        if (!json_is_array(list)) return fail(c, "normalizer Sequence without \"normalizers\" list");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) if (load_normalizer(c, tk, e) < 0) return -1;
        return 0;
    }
    tok_norm nm = {0};
    const char *s;
    size_t n;
    if (!strcmp(t, "Replace")) {
        int is_regex;
        if (get_pattern(c, o, "normalizer Replace", &s, &n, &is_regex) < 0) return -1;
        if (is_regex) return fail(c, "unsupported normalizer: Replace with a Regex pattern");
        if (n == 0) return fail(c, "unsupported normalizer: Replace with an empty pattern");
        nm.kind = TOK_NORM_REPLACE;
        nm.pat = dup_bytes(s, n);
        nm.pat_len = n;
        if (get_str(o, "content", &s, &n) < 0) {
            free(nm.pat);
            return fail(c, "normalizer Replace without a string \"content\"");
        }
    } else if (!strcmp(t, "Prepend")) {
        nm.kind = TOK_NORM_PREPEND;
        if (get_str(o, "prepend", &s, &n) < 0) return fail(c, "normalizer Prepend without a string \"prepend\"");
    } else {
        return fail(c, "unsupported normalizer: %s", t);
    }
    nm.content = dup_bytes(s, n);
    nm.content_len = n;
    tk->norm = tok_xrealloc(tk->norm, (tk->n_norm + 1) * sizeof *tk->norm);
    tk->norm[tk->n_norm++] = nm;
    return 0;
}

/* ---- pre-tokenizer ---- */
static int compile_regex(const ctx *c, const char *src, size_t n, pcre2_code **out) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, n, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return fail(c, "regex does not compile at offset %zu: %s", (size_t)off, (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* a speed-up only: the interpreter is the fallback */
    *out = re;
    return 0;
}

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
    tk->pre = tok_xrealloc(tk->pre, (tk->n_pre + 1) * sizeof *tk->pre);
    tk->pre[tk->n_pre++] = p;
}

static int load_pretok(const ctx *c, frigg_tokenizer *tk, json_t *o) {
    const char *t = type_of(o);
    if (!t) return fail(c, "pre_tokenizer without a \"type\"");
    if (!strcmp(t, "Sequence")) {
        json_t *list = json_object_get(o, "pretokenizers");
        if (!json_is_array(list)) return fail(c, "pre_tokenizer Sequence without \"pretokenizers\" list");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) if (load_pretok(c, tk, e) < 0) return -1;
        return 0;
    }
    tok_pretok p = {0};
    const char *s;
    size_t n;
    if (!strcmp(t, "Split")) {
        int is_regex;
        if (get_pattern(c, o, "pre_tokenizer Split", &s, &n, &is_regex) < 0) return -1;
        json_t *bh = json_object_get(o, "behavior"), *inv = json_object_get(o, "invert");
        p.kind = TOK_PRE_SPLIT;
        p.behavior = split_behavior(json_is_string(bh) ? json_string_value(bh) : NULL);
        if (p.behavior < 0) return fail(c, "pre_tokenizer Split: unsupported behavior");
        if (!json_is_boolean(inv)) return fail(c, "pre_tokenizer Split without a boolean \"invert\"");
        p.invert = json_is_true(inv);
        if (is_regex) {
            if (compile_regex(c, s, n, &p.re) < 0) return -1;
        } else if (n == 0) {
            return fail(c, "unsupported pre_tokenizer: Split with an empty pattern");
        }
        p.pat = dup_bytes(s, n);
        p.pat_len = n;
    } else if (!strcmp(t, "Metaspace")) {
        p.kind = TOK_PRE_METASPACE;
        if (get_str(o, "replacement", &s, &n) < 0) return fail(c, "pre_tokenizer Metaspace without \"replacement\"");
        if (single_char(c, s, n, "pre_tokenizer Metaspace replacement", &p.repl_cp) < 0) return -1;
        memcpy(p.repl, s, n);
        p.repl_len = n;
        p.prepend_scheme = TOK_PREPEND_ALWAYS;
        json_t *ps = json_object_get(o, "prepend_scheme");
        if (ps && !json_is_null(ps)) {
            const char *v = json_is_string(ps) ? json_string_value(ps) : "";
            if (!strcmp(v, "always")) p.prepend_scheme = TOK_PREPEND_ALWAYS;
            else if (!strcmp(v, "first")) p.prepend_scheme = TOK_PREPEND_FIRST;
            else if (!strcmp(v, "never")) p.prepend_scheme = TOK_PREPEND_NEVER;
            else return fail(c, "pre_tokenizer Metaspace: unsupported prepend_scheme");
        }
        json_t *aps = json_object_get(o, "add_prefix_space");
        if (json_is_false(aps)) {
            if (p.prepend_scheme != TOK_PREPEND_NEVER)
                return fail(c, "pre_tokenizer Metaspace: add_prefix_space does not match declared prepend_scheme");
            p.prepend_scheme = TOK_PREPEND_NEVER;
        }
        json_t *sp = json_object_get(o, "split");
        p.split = sp && !json_is_null(sp) ? json_is_true(sp) : 1;
    } else {
        return fail(c, "unsupported pre_tokenizer: %s", t);
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
static int apply_hf_regex(const ctx *c, frigg_tokenizer *tk, json_t *pre) {
    if (json_is_null(pre) || !pre)
        return fail(c, "hf_regex: the file has no pre_tokenizer, so transformers would not rewrite it");
    const char *t = type_of(pre);
    if (t && !strcmp(t, "Metaspace"))
        return fail(c, "hf_regex: transformers would replace this Metaspace pre_tokenizer with ByteLevel, "
                       "which is not supported");
    tok_pretok p = {0};
    p.kind = TOK_PRE_SPLIT;
    p.behavior = TOK_SPLIT_ISOLATED;
    tok_buf pat = {0};
    hf_regex_pattern(&pat);
    if (compile_regex(c, pat.p, pat.n, &p.re) < 0) {
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
            return fail(c, "hf_regex: an empty pre_tokenizer Sequence has no element 0 to replace");
        }
        /* element 0 may itself be a nested Sequence loaded as several steps: count them */
        frigg_tokenizer probe = {0};
        if (load_pretok(c, &probe, json_array_get(list, 0)) < 0) {
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
    tk->pre = tok_xrealloc(tk->pre, (tk->n_pre + 1) * sizeof *tk->pre);
    memmove(tk->pre + 1, tk->pre, tk->n_pre * sizeof *tk->pre);
    tk->pre[0] = p;
    tk->n_pre++;
    return 0;
}

/* ---- decoder ---- */
static int load_decoder(const ctx *c, frigg_tokenizer *tk, json_t *o) {
    const char *t = type_of(o);
    if (!t) return fail(c, "decoder without a \"type\"");
    if (!strcmp(t, "Sequence")) {
        json_t *list = json_object_get(o, "decoders");
        if (!json_is_array(list)) return fail(c, "decoder Sequence without \"decoders\" list");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) if (load_decoder(c, tk, e) < 0) return -1;
        return 0;
    }
    tok_dec d = {0};
    const char *s;
    size_t n;
    if (!strcmp(t, "Replace")) {
        int is_regex;
        if (get_pattern(c, o, "decoder Replace", &s, &n, &is_regex) < 0) return -1;
        if (is_regex) return fail(c, "unsupported decoder: Replace with a Regex pattern");
        if (n == 0) return fail(c, "unsupported decoder: Replace with an empty pattern");
        d.kind = TOK_DEC_REPLACE;
        d.pat = dup_bytes(s, n);
        d.pat_len = n;
        if (get_str(o, "content", &s, &n) < 0) {
            free(d.pat);
            return fail(c, "decoder Replace without a string \"content\"");
        }
        d.content = dup_bytes(s, n);
        d.content_len = n;
    } else if (!strcmp(t, "ByteFallback")) {
        d.kind = TOK_DEC_BYTE_FALLBACK;
    } else if (!strcmp(t, "Fuse")) {
        d.kind = TOK_DEC_FUSE;
    } else if (!strcmp(t, "Strip")) {
        d.kind = TOK_DEC_STRIP;
        json_t *st = json_object_get(o, "start"), *sp = json_object_get(o, "stop");
        if (get_str(o, "content", &s, &n) < 0 || single_char(c, s, n, "decoder Strip content", &d.cp) < 0)
            return fail(c, "decoder Strip needs a single-character \"content\"");
        if (!json_is_integer(st) || !json_is_integer(sp) || json_integer_value(st) < 0 ||
            json_integer_value(sp) < 0)
            return fail(c, "decoder Strip needs non-negative integer \"start\" and \"stop\"");
        d.start = (size_t)json_integer_value(st);
        d.stop = (size_t)json_integer_value(sp);
    } else if (!strcmp(t, "Metaspace")) {
        d.kind = TOK_DEC_METASPACE;
        if (get_str(o, "replacement", &s, &n) < 0 ||
            single_char(c, s, n, "decoder Metaspace replacement", &d.cp) < 0)
            return fail(c, "decoder Metaspace needs a single-character \"replacement\"");
        d.prepend_scheme = TOK_PREPEND_ALWAYS;
        json_t *ps = json_object_get(o, "prepend_scheme");
        if (ps && !json_is_null(ps)) {
            const char *v = json_is_string(ps) ? json_string_value(ps) : "";
            if (!strcmp(v, "always")) d.prepend_scheme = TOK_PREPEND_ALWAYS;
            else if (!strcmp(v, "first")) d.prepend_scheme = TOK_PREPEND_FIRST;
            else if (!strcmp(v, "never")) d.prepend_scheme = TOK_PREPEND_NEVER;
            else return fail(c, "decoder Metaspace: unsupported prepend_scheme");
        }
        if (json_is_false(json_object_get(o, "add_prefix_space"))) {
            if (d.prepend_scheme != TOK_PREPEND_NEVER)
                return fail(c, "decoder Metaspace: add_prefix_space does not match declared prepend_scheme");
        }
    } else {
        return fail(c, "unsupported decoder: %s", t);
    }
    tk->dec = tok_xrealloc(tk->dec, (tk->n_dec + 1) * sizeof *tk->dec);
    tk->dec[tk->n_dec++] = d;
    return 0;
}

/* ---- BPE model ---- */
static int is_null_or_absent(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return !v || json_is_null(v);
}

static int opt_bool(const ctx *c, json_t *o, const char *key, int *out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return fail(c, "model.%s must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

typedef struct {
    const ctx *c;
    frigg_tokenizer *tk;
    tok_buf cat;
    int reported; /* the error message already names the file */
} merge_ctx;

/* One merge: (a, b) → rank, merged id; the merged token must exist, as HF requires. */
static int merge_one(void *vctx, size_t index, const char *a, size_t an, const char *b, size_t bn) {
    merge_ctx *mc = vctx;
    if (!b) { /* legacy "a b": exactly one space (HF skips "#version" lines) */
        if (an >= 8 && !memcmp(a, "#version", 8)) return 0;
        const char *sp = memchr(a, ' ', an);
        if (!sp || memchr(sp + 1, ' ', an - (size_t)(sp + 1 - a))) {
            mc->reported = 1;
            return fail(mc->c, "merges: entry %zu is not two tokens separated by one space", index + 1);
        }
        b = sp + 1;
        bn = an - (size_t)(sp + 1 - a);
        an = (size_t)(sp - a);
    }
    frigg_tokenizer *tk = mc->tk;
    int32_t ia = tok_strmap_get(&tk->vocab, a, an), ib = tok_strmap_get(&tk->vocab, b, bn);
    tok_buf *cat = &mc->cat;
    cat->n = 0;
    tok_buf_put(cat, a, an);
    tok_buf_put(cat, b, bn);
    int32_t in = tok_strmap_get(&tk->vocab, cat->p, cat->n);
    if (ia < 0 || ib < 0 || in < 0) {
        mc->reported = 1;
        const char *which = ia < 0 ? a : ib < 0 ? b : cat->p;
        int wn = (int)(ia < 0 ? an : ib < 0 ? bn : cat->n);
        return fail(mc->c, "merge %zu: token '%.*s' is not in the vocab", index, wn > 80 ? 80 : wn, which);
    }
    /* HF numbers ranks after dropping "#version" lines; a rank only orders merges, so counting
     * the dropped lines too changes nothing */
    tok_pairmap_put(&tk->merges, (uint32_t)ia, (uint32_t)ib, (uint32_t)index, in);
    return 0;
}

static int load_model(const ctx *c, frigg_tokenizer *tk, json_t *m, const tok_json_parts *parts, const char *base) {
    if (!json_is_object(m)) return fail(c, "no \"model\" object");
    const char *t = type_of(m);
    if (!t || strcmp(t, "BPE")) return fail(c, "unsupported model: %s", t ? t : "(no type)");
    json_t *dropout = json_object_get(m, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return fail(c, "unsupported model option: BPE dropout (non-deterministic)");
    if (!is_null_or_absent(m, "continuing_subword_prefix"))
        return fail(c, "unsupported model option: BPE continuing_subword_prefix");
    if (!is_null_or_absent(m, "end_of_word_suffix"))
        return fail(c, "unsupported model option: BPE end_of_word_suffix");
    if (opt_bool(c, m, "fuse_unk", &tk->fuse_unk) < 0 || opt_bool(c, m, "byte_fallback", &tk->byte_fallback) < 0 ||
        opt_bool(c, m, "ignore_merges", &tk->ignore_merges) < 0)
        return -1;
    json_t *unk = json_object_get(m, "unk_token");
    if (unk && !json_is_null(unk)) {
        if (!json_is_string(unk)) return fail(c, "model.unk_token must be a string or null");
        tk->unk_token = dup_bytes(json_string_value(unk), json_string_length(unk));
    }

    if (!parts->vocab || !parts->merges) return fail(c, "model needs a \"vocab\" object and a \"merges\" list");
    /* sizes guessed from the text (~20 bytes per entry) so the maps rarely grow */
    tok_strmap_init(&tk->vocab, (size_t)(parts->vocab_end - parts->vocab) / 16 + 16);
    int64_t max_id = -1;
    if (tok_json_vocab(parts, base, &tk->vocab, &max_id) < 0) return fail(c, "%s", frigg_error());
    size_t nv = tk->vocab.n;
    /* A dense id table; refuse absurdly sparse ids rather than allocate gigabytes for them. */
    if (max_id >= 0 && (uint64_t)max_id > 16 * (uint64_t)nv + (1u << 20))
        return fail(c, "vocab ids are too sparse (max id %lld for %zu entries)", (long long)max_id, nv);
    tk->id_cap = (size_t)(max_id + 1);
    tk->id_entry = frigg_xmalloc((tk->id_cap ? tk->id_cap : 1) * sizeof *tk->id_entry);
    for (size_t i = 0; i < tk->id_cap; i++) tk->id_entry[i] = -1;
    for (size_t e = 0; e < tk->vocab.n; e++) tk->id_entry[tk->vocab.e[e].val] = (int64_t)e;

    tk->unk_id = tk->unk_token ? tok_strmap_get(&tk->vocab, tk->unk_token, strlen(tk->unk_token)) : -1;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        tk->byte_id[b] = tok_strmap_get(&tk->vocab, name, 6);
    }
    tk->bmp_id = frigg_xmalloc(0x10000 * sizeof *tk->bmp_id);
    for (uint32_t cp = 0; cp < 0x10000; cp++) {
        tok_buf u = {0};
        char tmp[4];
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            tk->bmp_id[cp] = -1;
            continue;
        }
        (void)u;
        size_t n;
        if (cp < 0x80) {
            tmp[0] = (char)cp;
            n = 1;
        } else if (cp < 0x800) {
            tmp[0] = (char)(0xC0 | (cp >> 6));
            tmp[1] = (char)(0x80 | (cp & 0x3F));
            n = 2;
        } else {
            tmp[0] = (char)(0xE0 | (cp >> 12));
            tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
            tmp[2] = (char)(0x80 | (cp & 0x3F));
            n = 3;
        }
        tk->bmp_id[cp] = tok_strmap_get(&tk->vocab, tmp, n);
    }

    merge_ctx mc = {c, tk, {0}, 0};
    tok_pairmap_init(&tk->merges, (size_t)(parts->merges_end - parts->merges) / 16 + 16);
    int rc = tok_json_merges(parts, base, merge_one, &mc);
    free(mc.cat.p);
    if (rc < 0 && !mc.reported) return fail(c, "%s", frigg_error());
    return rc;
}

/* ---- added tokens (AddedVocabulary::add_tokens) ---- */
static int get_flag(const ctx *c, json_t *o, const char *key, size_t i, int *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_boolean(v)) return fail(c, "added_tokens[%zu]: \"%s\" must be a boolean", i, key);
    *out = json_is_true(v);
    return 0;
}

static int load_added(const ctx *c, frigg_tokenizer *tk, json_t *list) {
    tok_strmap_init(&tk->added_map, 16);
    if (!list || json_is_null(list)) return 0;
    if (!json_is_array(list)) return fail(c, "\"added_tokens\" must be a list");
    int64_t next_id = (int64_t)tk->vocab.n; /* model.get_vocab_size(): distinct vocab keys */
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o) {
        tok_added a = {0};
        const char *s;
        size_t n;
        if (!json_is_object(o) || get_str(o, "content", &s, &n) < 0)
            return fail(c, "added_tokens[%zu] without a string \"content\"", i);
        if (!json_is_integer(json_object_get(o, "id")))
            return fail(c, "added_tokens[%zu] without an integer \"id\"", i);
        if (get_flag(c, o, "single_word", i, &a.single_word) < 0 || get_flag(c, o, "lstrip", i, &a.lstrip) < 0 ||
            get_flag(c, o, "rstrip", i, &a.rstrip) < 0 || get_flag(c, o, "normalized", i, &a.normalized) < 0 ||
            get_flag(c, o, "special", i, &a.special) < 0)
            return -1;
        if (n == 0) continue; /* HF ignores empty tokens */
        int32_t have = tok_strmap_get(&tk->added_map, s, n);
        if (have >= 0) {
            int same = 0;
            for (size_t k = 0; k < tk->n_added; k++) {
                const tok_added *b = &tk->added[k];
                if (b->id == have)
                    same = b->content_len == n && !memcmp(b->content, s, n) && b->single_word == a.single_word &&
                           b->lstrip == a.lstrip && b->rstrip == a.rstrip && b->normalized == a.normalized &&
                           b->special == a.special;
            }
            if (same) continue;
        }
        int32_t id = have >= 0 ? have : tok_strmap_get(&tk->vocab, s, n);
        if (id < 0) {
            if (next_id > INT32_MAX - 1) return fail(c, "added_tokens: ids overflow");
            id = (int32_t)next_id++;
        }
        a.content = dup_bytes(s, n);
        a.content_len = n;
        a.id = id;
        if (a.normalized && tk->n_norm) {
            tok_buf nb = {0};
            tok_normalize(tk, s, n, &nb);
            if (nb.n != n || memcmp(nb.p, s, n)) {
                a.norm = nb.p;
                a.norm_len = nb.n;
            } else {
                free(nb.p);
            }
        }
        tok_strmap_put(&tk->added_map, s, n, id);
        size_t k;
        for (k = 0; k < tk->n_added && tk->added[k].id != id; k++) {}
        if (k < tk->n_added) { /* one entry per id: the later token replaces it */
            free(tk->added[k].content);
            free(tk->added[k].norm);
            tk->added[k] = a;
        } else {
            tk->added = tok_xrealloc(tk->added, (tk->n_added + 1) * sizeof *tk->added);
            tk->added[tk->n_added++] = a;
        }
    }
    int need_word = 0;
    for (size_t k = 0; k < tk->n_added; k++) need_word |= tk->added[k].single_word;
    if (need_word) {
        static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";
        if (compile_regex(c, word, strlen(word), &tk->word_re) < 0) return -1;
    }
    tok_trie_build(&tk->trie_raw, tk, 0);
    tok_trie_build(&tk->trie_norm, tk, 1);
    return 0;
}

void tok_free_components(frigg_tokenizer *tk) {
    for (size_t i = 0; i < tk->n_norm; i++) {
        free(tk->norm[i].pat);
        free(tk->norm[i].content);
    }
    free(tk->norm);
    for (size_t i = 0; i < tk->n_pre; i++) {
        if (tk->pre[i].re) pcre2_code_free(tk->pre[i].re);
        free(tk->pre[i].pat);
    }
    free(tk->pre);
    for (size_t i = 0; i < tk->n_dec; i++) {
        free(tk->dec[i].pat);
        free(tk->dec[i].content);
    }
    free(tk->dec);
    for (size_t i = 0; i < tk->n_added; i++) {
        free(tk->added[i].content);
        free(tk->added[i].norm);
    }
    free(tk->added);
    tok_strmap_free(&tk->added_map);
    tok_trie_free(&tk->trie_raw);
    tok_trie_free(&tk->trie_norm);
    if (tk->word_re) pcre2_code_free(tk->word_re);
    tok_strmap_free(&tk->vocab);
    free(tk->id_entry);
    tok_pairmap_free(&tk->merges);
    free(tk->unk_token);
    free(tk->bmp_id);
}

void frigg_tokenizer_free(frigg_tokenizer *tk) {
    if (!tk) return;
    tok_free_components(tk);
    free(tk);
}

static int check_null_or(const ctx *c, json_t *root, const char *key, const char *allowed_type) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    const char *t = type_of(v);
    if (allowed_type && t && !strcmp(t, allowed_type)) return 0;
    if (allowed_type) return fail(c, "unsupported %s: %s", key, t ? t : "(no type)");
    return fail(c, "unsupported option: %s must be null", key);
}

frigg_tokenizer *frigg_tokenizer_load_json(const char *json, size_t len, const char *name, int hf_regex) {
    ctx c = {name ? name : "tokenizer.json"};
    tok_json_parts parts;
    if (tok_json_split(json, len, &parts) < 0) {
        fail(&c, "%s", frigg_error());
        return NULL;
    }
    /* jansson gets the document with model.vocab and model.merges blanked: they are read from
     * their spans by tok_json.c */
    tok_buf small = {0};
    const char *cut[2][2] = {{parts.vocab, parts.vocab_end}, {parts.merges, parts.merges_end}};
    const char *blank[2] = {"{}", "[]"};
    int order[2] = {0, 1};
    if (cut[0][0] && cut[1][0] && cut[1][0] < cut[0][0]) {
        order[0] = 1;
        order[1] = 0;
    }
    const char *at = json;
    for (int k = 0; k < 2; k++) {
        int i = order[k];
        if (!cut[i][0]) continue;
        tok_buf_put(&small, at, (size_t)(cut[i][0] - at));
        tok_buf_put(&small, blank[i], 2);
        at = cut[i][1];
    }
    tok_buf_put(&small, at, (size_t)(json + len - at));
    json_error_t jerr;
    json_t *root = json_loadb(small.p, small.n, JSON_ALLOW_NUL, &jerr);
    free(small.p);
    if (!root) {
        fail(&c, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    frigg_tokenizer *tk = frigg_xcalloc(1, sizeof *tk);
    tk->hf_regex = hf_regex ? 1 : 0;
    int rc = 0;
    json_t *ver = json_object_get(root, "version");
    if (!json_is_object(root)) rc = fail(&c, "top level is not an object");
    else if (ver && (!json_is_string(ver) || strcmp(json_string_value(ver), "1.0")))
        rc = fail(&c, "unknown tokenizer version");
    if (!rc) rc = check_null_or(&c, root, "truncation", NULL);
    if (!rc) rc = check_null_or(&c, root, "padding", NULL);
    /* The post-processor only adds special tokens, which this API never asks for. */
    if (!rc) rc = check_null_or(&c, root, "post_processor", "TemplateProcessing");
    if (!rc) rc = load_model(&c, tk, json_object_get(root, "model"), &parts, json);
    json_t *norm = json_object_get(root, "normalizer");
    if (!rc && norm) rc = load_normalizer(&c, tk, norm);
    json_t *pre = json_object_get(root, "pre_tokenizer");
    if (!rc && pre && !json_is_null(pre)) rc = load_pretok(&c, tk, pre);
    if (!rc && tk->hf_regex) rc = apply_hf_regex(&c, tk, pre);
    json_t *dec = json_object_get(root, "decoder");
    if (!rc && dec && !json_is_null(dec)) {
        tk->has_decoder = 1;
        rc = load_decoder(&c, tk, dec);
    }
    if (!rc) rc = load_added(&c, tk, json_object_get(root, "added_tokens"));
    json_decref(root);
    if (rc) {
        frigg_tokenizer_free(tk);
        return NULL;
    }
    return tk;
}

frigg_tokenizer *frigg_tokenizer_load(const char *path, int hf_regex) {
    size_t len;
    char *text = frigg_read_file(path, &len);
    if (!text) return NULL;
    frigg_tokenizer *tk = frigg_tokenizer_load_json(text, len, path, hf_regex);
    free(text);
    return tk;
}
