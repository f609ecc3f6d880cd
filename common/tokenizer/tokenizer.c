/* tokenizer.c — the tokenizer's public API: encode (HF Tokenizer::encode_single_sequence with
 * add_special_tokens=false: added tokens on the raw text, normalize each remaining segment, added
 * tokens marked normalized inside it, pre-tokenize, BPE) and the vocab lookups. The post-processor
 * is not run: it only adds special tokens, and this API never adds any (the chat template writes
 * <bos> as text). */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "base/util.h"

int frigg_tokenizer_vocab_size(const frigg_tokenizer *tk) {
    size_t overlap = 0;
    for (size_t e = 0; e < tk->added_map.n; e++) {
        size_t len;
        const char *k = tok_strmap_key(&tk->added_map, e, &len);
        if (tok_strmap_get(&tk->vocab, k, len) >= 0) overlap++;
    }
    return (int)(tk->vocab.n + tk->added_map.n - overlap);
}

int frigg_tokenizer_hf_regex(const frigg_tokenizer *tk) { return tk->hf_regex; }

int32_t frigg_tokenizer_token_to_id(const frigg_tokenizer *tk, const char *token) {
    size_t n = strlen(token);
    int32_t id = tok_strmap_get(&tk->added_map, token, n);
    return id >= 0 ? id : tok_strmap_get(&tk->vocab, token, n);
}

const char *frigg_tokenizer_id_to_token(const frigg_tokenizer *tk, int32_t id) {
    size_t len;
    return tok_id_to_token(tk, id, &len);
}

/* One normalized segment: split out normalized added tokens, then pre-tokenize + BPE the rest. */
static int encode_normalized(const frigg_tokenizer *tk, const char *s, size_t n, int at_origin,
                             pcre2_match_data **md, tok_ivec *ids) {
    tok_span *sp = NULL;
    size_t ns = 0, cap = 0;
    tok_added_find(tk, &tk->trie_norm, s, n, &sp, &ns, &cap);
    int rc = 0;
    for (size_t i = 0; i < ns && rc == 0; i++) {
        if (sp[i].id >= 0) {
            tok_ivec_push(ids, sp[i].id);
            if (ids->limit && ids->n > ids->limit) rc = TOK_OVER_LIMIT;
        } else if (sp[i].end > sp[i].start)
            rc = tok_pretok_and_bpe(tk, s + sp[i].start, sp[i].end - sp[i].start, at_origin && sp[i].start == 0,
                                    md, ids);
    }
    free(sp);
    return rc;
}

int frigg_tokenizer_encode(const frigg_tokenizer *tk, const char *text, size_t len, int32_t **ids_out, size_t *n_out) {
    return frigg_tokenizer_encode_max(tk, text, len, 0, ids_out, n_out) ? -1 : 0;
}

int frigg_tokenizer_encode_max(const frigg_tokenizer *tk, const char *text, size_t len, size_t max_ids,
                               int32_t **ids_out, size_t *n_out) {
    *ids_out = NULL;
    *n_out = 0;
    size_t bad = tok_utf8_valid(text, len);
    if (bad != len) {
        frigg_set_error("tokenizer: input is not valid UTF-8 (byte 0x%02X at offset %zu)", (unsigned char)text[bad], bad);
        return -1;
    }
    tok_span *sp = NULL;
    size_t ns = 0, cap = 0;
    tok_added_find(tk, &tk->trie_raw, text, len, &sp, &ns, &cap);
    tok_ivec ids = {.limit = max_ids};
    tok_buf norm = {0};
    pcre2_match_data *md = NULL;
    int rc = 0;
    for (size_t i = 0; i < ns && rc == 0; i++) {
        if (sp[i].id >= 0) {
            tok_ivec_push(&ids, sp[i].id);
            if (max_ids && ids.n > max_ids) rc = TOK_OVER_LIMIT;
            continue;
        }
        if (sp[i].end <= sp[i].start) continue;
        const char *seg = text + sp[i].start;
        size_t sn = sp[i].end - sp[i].start;
        if (tk->n_norm) {
            tok_normalize(tk, seg, sn, &norm);
            seg = norm.p;
            sn = norm.n;
        }
        rc = encode_normalized(tk, seg, sn, sp[i].start == 0, &md, &ids);
    }
    free(sp);
    free(norm.p);
    if (md) pcre2_match_data_free(md);
    if (rc) {
        free(ids.v);
        if (rc == TOK_OVER_LIMIT) {
            *n_out = max_ids + 1;
            return 1;
        }
        return -1;
    }
    if (!ids.v) ids.v = frigg_xmalloc(sizeof *ids.v);
    *ids_out = ids.v;
    *n_out = ids.n;
    return 0;
}
