/* tokenizer_load.c — tokenizer.json → frigg_tokenizer, with HF tokenizers 0.23's rules: vocab
 * duplicates keep the last id (serde map), merges as "a b" strings or [a, b] pairs (later
 * duplicates win), added tokens resolved through the vocab like AddedVocabulary::add_tokens.
 * The normalizer/pre-tokenizer/decoder sections are in tok_load_pipeline.c. Any component or
 * option this engine does not implement is refused with its name, never ignored. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_load.h"
#include "base/util.h"

/* ---- BPE model ---- */
static int is_null_or_absent(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return !v || json_is_null(v);
}

static int opt_bool(const tok_ctx *c, json_t *o, const char *key, int *out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return tok_fail(c, "model.%s must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

typedef struct {
    const tok_ctx *c;
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
            return tok_fail(mc->c, "merges: entry %zu is not two tokens separated by one space", index + 1);
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
        return tok_fail(mc->c, "merge %zu: token '%.*s' is not in the vocab", index, wn > 80 ? 80 : wn, which);
    }
    /* HF numbers ranks after dropping "#version" lines; a rank only orders merges, so counting
     * the dropped lines too changes nothing */
    tok_pairmap_put(&tk->merges, (uint32_t)ia, (uint32_t)ib, (uint32_t)index, in);
    return 0;
}

static int load_model(const tok_ctx *c, frigg_tokenizer *tk, json_t *m, const tok_json_parts *parts, const char *base) {
    if (!json_is_object(m)) return tok_fail(c, "no \"model\" object");
    const char *t = tok_jtype(m);
    if (!t || strcmp(t, "BPE")) return tok_fail(c, "unsupported model: %s", t ? t : "(no type)");
    json_t *dropout = json_object_get(m, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return tok_fail(c, "unsupported model option: BPE dropout (non-deterministic)");
    if (!is_null_or_absent(m, "continuing_subword_prefix"))
        return tok_fail(c, "unsupported model option: BPE continuing_subword_prefix");
    if (!is_null_or_absent(m, "end_of_word_suffix"))
        return tok_fail(c, "unsupported model option: BPE end_of_word_suffix");
    if (opt_bool(c, m, "fuse_unk", &tk->fuse_unk) < 0 || opt_bool(c, m, "byte_fallback", &tk->byte_fallback) < 0 ||
        opt_bool(c, m, "ignore_merges", &tk->ignore_merges) < 0)
        return -1;
    json_t *unk = json_object_get(m, "unk_token");
    if (unk && !json_is_null(unk)) {
        if (!json_is_string(unk)) return tok_fail(c, "model.unk_token must be a string or null");
        tk->unk_token = tok_dup(json_string_value(unk), json_string_length(unk));
    }

    if (!parts->vocab || !parts->merges) return tok_fail(c, "model needs a \"vocab\" object and a \"merges\" list");
    /* sizes guessed from the text (~20 bytes per entry) so the maps rarely grow */
    tok_strmap_init(&tk->vocab, (size_t)(parts->vocab_end - parts->vocab) / 16 + 16);
    int64_t max_id = -1;
    if (tok_json_vocab(parts, base, &tk->vocab, &max_id) < 0) return tok_fail(c, "%s", frigg_error());
    size_t nv = tk->vocab.n;
    /* A dense id table; refuse absurdly sparse ids rather than allocate gigabytes for them. */
    if (max_id >= 0 && (uint64_t)max_id > 16 * (uint64_t)nv + (1u << 20))
        return tok_fail(c, "vocab ids are too sparse (max id %lld for %zu entries)", (long long)max_id, nv);
    tk->id_cap = (size_t)(max_id + 1);
    tk->id_entry = frigg_xmalloc((tk->id_cap ? tk->id_cap : 1) * sizeof *tk->id_entry);
    for (size_t i = 0; i < tk->id_cap; i++) tk->id_entry[i] = -1;
    for (size_t e = 0; e < tk->vocab.n; e++) tk->id_entry[tk->vocab.e[e].val] = (int64_t)e;
    tk->max_token_bytes = 0;
    int one_string_per_id = 1;
    for (size_t e = 0; e < tk->vocab.n; e++) {
        if (tk->vocab.e[e].len > tk->max_token_bytes) tk->max_token_bytes = tk->vocab.e[e].len;
        if (tk->id_entry[tk->vocab.e[e].val] != (int64_t)e) one_string_per_id = 0;
    }
    if (!one_string_per_id) tk->max_token_bytes = 0; /* a token's bytes are then not its one string: no bound */

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
    if (rc < 0 && !mc.reported) return tok_fail(c, "%s", frigg_error());
    return rc;
}

/* ---- added tokens (AddedVocabulary::add_tokens) ---- */
static int get_flag(const tok_ctx *c, json_t *o, const char *key, size_t i, int *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_boolean(v)) return tok_fail(c, "added_tokens[%zu]: \"%s\" must be a boolean", i, key);
    *out = json_is_true(v);
    return 0;
}

static int load_added(const tok_ctx *c, frigg_tokenizer *tk, json_t *list) {
    tok_strmap_init(&tk->added_map, 16);
    if (!list || json_is_null(list)) return 0;
    if (!json_is_array(list)) return tok_fail(c, "\"added_tokens\" must be a list");
    int64_t next_id = (int64_t)tk->vocab.n; /* model.get_vocab_size(): distinct vocab keys */
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o) {
        tok_added a = {0};
        const char *s;
        size_t n;
        if (!json_is_object(o) || tok_jstr(o, "content", &s, &n) < 0)
            return tok_fail(c, "added_tokens[%zu] without a string \"content\"", i);
        if (!json_is_integer(json_object_get(o, "id")))
            return tok_fail(c, "added_tokens[%zu] without an integer \"id\"", i);
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
            if (next_id > INT32_MAX - 1) return tok_fail(c, "added_tokens: ids overflow");
            id = (int32_t)next_id++;
        }
        a.content = tok_dup(s, n);
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
            tk->added = frigg_xrealloc(tk->added, (tk->n_added + 1) * sizeof *tk->added);
            tk->added[tk->n_added++] = a;
        }
    }
    int need_word = 0;
    for (size_t k = 0; k < tk->n_added; k++) need_word |= tk->added[k].single_word;
    if (need_word) {
        static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";
        if (tok_compile_regex(c, word, strlen(word), &tk->word_re) < 0) return -1;
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

static int check_null_or(const tok_ctx *c, json_t *root, const char *key, const char *allowed_type) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    const char *t = tok_jtype(v);
    if (allowed_type && t && !strcmp(t, allowed_type)) return 0;
    if (allowed_type) return tok_fail(c, "unsupported %s: %s", key, t ? t : "(no type)");
    return tok_fail(c, "unsupported option: %s must be null", key);
}

frigg_tokenizer *frigg_tokenizer_load_json(const char *json, size_t len, const char *name, int hf_regex) {
    tok_ctx c = {name ? name : "tokenizer.json"};
    tok_json_parts parts;
    if (tok_json_split(json, len, &parts) < 0) {
        tok_fail(&c, "%s", frigg_error());
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
        tok_fail(&c, "invalid JSON at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    frigg_tokenizer *tk = frigg_xcalloc(1, sizeof *tk);
    tk->hf_regex = hf_regex ? 1 : 0;
    int rc = 0;
    json_t *ver = json_object_get(root, "version");
    if (!json_is_object(root)) rc = tok_fail(&c, "top level is not an object");
    else if (ver && (!json_is_string(ver) || strcmp(json_string_value(ver), "1.0")))
        rc = tok_fail(&c, "unknown tokenizer version");
    if (!rc) rc = check_null_or(&c, root, "truncation", NULL);
    if (!rc) rc = check_null_or(&c, root, "padding", NULL);
    /* The post-processor only adds special tokens, which this API never asks for. */
    if (!rc) rc = check_null_or(&c, root, "post_processor", "TemplateProcessing");
    if (!rc) rc = load_model(&c, tk, json_object_get(root, "model"), &parts, json);
    json_t *norm = json_object_get(root, "normalizer");
    if (!rc && norm) rc = tok_load_normalizer(&c, tk, norm);
    json_t *pre = json_object_get(root, "pre_tokenizer");
    if (!rc && pre && !json_is_null(pre)) rc = tok_load_pretok(&c, tk, pre);
    if (!rc && tk->hf_regex) rc = tok_apply_hf_regex(&c, tk, pre);
    json_t *dec = json_object_get(root, "decoder");
    if (!rc && dec && !json_is_null(dec)) {
        tk->has_decoder = 1;
        rc = tok_load_decoder(&c, tk, dec);
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
