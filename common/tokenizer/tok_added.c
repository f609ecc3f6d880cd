/* tok_added.c — splitting text on added tokens, as HF AddedVocabulary::find_matches: a
 * leftmost-longest scan over all added tokens of one kind (raw text for normalized:false tokens,
 * normalized segments for normalized:true ones), then per match the single_word / lstrip / rstrip
 * rules. A match rejected by single_word is skipped without rescanning inside it, as in HF. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "base/util.h"

static int32_t trie_node(tok_trie *t) {
    if (t->n_nodes == t->cap_nodes) {
        t->cap_nodes = t->cap_nodes ? t->cap_nodes * 2 : 64;
        t->term = frigg_xrealloc(t->term, t->cap_nodes * sizeof *t->term);
    }
    t->term[t->n_nodes] = -1;
    return (int32_t)t->n_nodes++;
}

void tok_trie_build(tok_trie *t, const frigg_tokenizer *tk, int normalized) {
    memset(t, 0, sizeof *t);
    tok_pairmap_init(&t->edges, 64);
    trie_node(t);
    t->empty = 1;
    for (size_t a = 0; a < tk->n_added; a++) {
        const tok_added *at = &tk->added[a];
        if (!at->normalized != !normalized) continue;
        const char *p = at->content;
        size_t n = at->content_len;
        if (normalized && at->norm) {
            p = at->norm;
            n = at->norm_len;
        }
        if (n == 0) continue;
        t->empty = 0;
        t->first[(unsigned char)p[0]] = 1;
        int32_t node = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t child;
            if (!tok_pairmap_get(&t->edges, (uint32_t)node, (unsigned char)p[i], NULL, &child)) {
                child = trie_node(t);
                tok_pairmap_put(&t->edges, (uint32_t)node, (unsigned char)p[i], 0, child);
            }
            node = child;
        }
        /* Two tokens with the same pattern: daachorse refuses duplicate patterns in a build; HF
         * cannot reach this (one entry per content), and here the later one wins. */
        t->term[node] = (int32_t)a;
    }
}

void tok_trie_free(tok_trie *t) {
    tok_pairmap_free(&t->edges);
    free(t->term);
    memset(t, 0, sizeof *t);
}

/* The longest pattern starting at s[i]; returns its end, or 0 if none; *which = added index. */
static size_t longest_at(const tok_trie *t, const char *s, size_t n, size_t i, int32_t *which) {
    int32_t node = 0;
    size_t best = 0;
    for (size_t k = i; k < n; k++) {
        int32_t child;
        if (!tok_pairmap_get(&t->edges, (uint32_t)node, (unsigned char)s[k], NULL, &child)) break;
        node = child;
        if (t->term[node] >= 0) {
            best = k + 1;
            *which = t->term[node];
        }
    }
    return best;
}

static int is_word_char(const frigg_tokenizer *tk, uint32_t cp) {
    /* Rust regex \w: Alphabetic, M, Nd, Pc, Join_Control — through PCRE2's Unicode tables. */
    tok_buf b = {0};
    tok_buf_put_cp(&b, cp);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = pcre2_match(tk->word_re, (PCRE2_SPTR)b.p, b.n, 0, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, md, NULL);
    pcre2_match_data_free(md);
    free(b.p);
    return rc >= 0;
}

static uint32_t last_cp(const char *s, size_t end) {
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    size_t adv;
    return tok_utf8_next(s + i, end - i, &adv);
}

static void push_span(tok_span **out, size_t *n, size_t *cap, size_t a, size_t b, int32_t id) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *out = frigg_xrealloc(*out, *cap * sizeof **out);
    }
    (*out)[(*n)++] = (tok_span){a, b, id};
}

void tok_added_find(const frigg_tokenizer *tk, const tok_trie *t, const char *s, size_t n,
                    tok_span **out, size_t *n_out, size_t *cap_out) {
    size_t start_offset = 0;
    if (!t->empty) {
        size_t i = 0;
        while (i < n) {
            if (!t->first[(unsigned char)s[i]]) {
                i++;
                continue;
            }
            int32_t which = -1;
            size_t stop = longest_at(t, s, n, i, &which);
            if (!stop) {
                i++;
                continue;
            }
            size_t start = i;
            i = stop; /* the scan resumes after this match whatever the flags decide */
            const tok_added *at = &tk->added[which];
            if (at->single_word) {
                int start_space = start == 0 || !is_word_char(tk, last_cp(s, start));
                size_t adv;
                int stop_space = stop == n || !is_word_char(tk, tok_utf8_next(s + stop, n - stop, &adv));
                if (!start_space || !stop_space) continue;
            }
            if (at->lstrip) {
                size_t ns = start;
                while (ns > 0) {
                    size_t j = ns - 1;
                    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
                    size_t adv;
                    if (!tok_is_white_space(tok_utf8_next(s + j, ns - j, &adv))) break;
                    ns = j;
                }
                start = ns > start_offset ? ns : start_offset;
            }
            if (at->rstrip) {
                while (stop < n) {
                    size_t adv;
                    if (!tok_is_white_space(tok_utf8_next(s + stop, n - stop, &adv))) break;
                    stop += adv;
                }
            }
            if (start_offset < start) push_span(out, n_out, cap_out, start_offset, start, -1);
            push_span(out, n_out, cap_out, start, stop, at->id);
            start_offset = stop;
        }
    }
    if (start_offset < n) push_span(out, n_out, cap_out, start_offset, n, -1);
}
