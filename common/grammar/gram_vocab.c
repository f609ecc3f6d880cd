/* gram_vocab.c — the vocabulary as a grammar sees it: each token's bytes (tokenizer.h,
 * frigg_tokenizer_token_bytes) and a byte trie of all of them in preorder, so that a mask is one depth-first
 * walk that steps each shared prefix once and skips a whole subtree where its first byte is refused. Tokens
 * with the same bytes (a byte-fallback token and the one-byte text token) share a node. */
#include <stdlib.h>
#include <string.h>

#include "gram_internal.h"
#include "base/util.h"

typedef struct {
    const frigg_gvocab *v;
} sort_ctx;

static int cmp_tok(const void *a, const void *b, void *arg) {
    const frigg_gvocab *v = ((const sort_ctx *)arg)->v;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t nx = v->off[x + 1] - v->off[x], ny = v->off[y + 1] - v->off[y];
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], nx < ny ? nx : ny);
    if (c) return c;
    if (nx != ny) return nx < ny ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void build_trie(frigg_gvocab *v) {
    int32_t nt = 0;
    int32_t *order = frigg_xmalloc((size_t)(v->V ? v->V : 1) * sizeof *order);
    for (int32_t i = 0; i < v->V; i++)
        if (v->off[i + 1] > v->off[i]) order[nt++] = i;
    sort_ctx sc = {v};
    qsort_r(order, (size_t)nt, sizeof *order, cmp_tok, &sc);
    size_t cap = 1024;
    v->tb = frigg_xmalloc(cap);
    v->td = frigg_xmalloc(cap * sizeof *v->td);
    v->tend = frigg_xmalloc(cap * sizeof *v->tend);
    v->ids = order;
    /* the node each sorted token ends at: never decreasing, as a token ends at a node made for it or at the one
     * of the token before it (the same bytes) */
    int32_t *tnode = frigg_xmalloc((size_t)(nt ? nt : 1) * sizeof *tnode);
    int32_t path[FRIGG_GVOCAB_MAX_TOKEN_BYTES + 1];
    int depth = 0;
    v->nn = 1;
    v->tb[0] = 0;
    v->td[0] = 0;
    path[0] = 0;
    const char *prev = NULL;
    size_t prevn = 0;
    for (int32_t k = 0; k < nt; k++) {
        int32_t id = order[k];
        const char *s = v->bytes + v->off[id];
        size_t n = v->off[id + 1] - v->off[id], l = 0;
        while (prev && l < n && l < prevn && s[l] == prev[l]) l++;
        while (depth > (int)l) v->tend[path[depth--]] = v->nn; /* close the nodes below the shared prefix */
        for (size_t j = l; j < n; j++) {
            if ((size_t)v->nn + 1 >= cap) {
                cap *= 2;
                v->tb = frigg_xrealloc(v->tb, cap);
                v->td = frigg_xrealloc(v->td, cap * sizeof *v->td);
                v->tend = frigg_xrealloc(v->tend, cap * sizeof *v->tend);
            }
            int32_t nd = v->nn++;
            v->tb[nd] = (uint8_t)s[j];
            v->td[nd] = (uint16_t)(j + 1);
            path[++depth] = nd;
        }
        tnode[k] = path[depth];
        if ((int)n > v->max_depth) v->max_depth = (int)n;
        prev = s;
        prevn = n;
    }
    while (depth > 0) v->tend[path[depth--]] = v->nn;
    v->tend[0] = v->nn;
    v->ttok = frigg_xmalloc(((size_t)v->nn + 1) * sizeof *v->ttok);
    int32_t k = 0;
    for (int32_t i = 0; i <= v->nn; i++) {
        while (k < nt && tnode[k] < i) k++;
        v->ttok[i] = k;
    }
    free(tnode);
}

static frigg_gvocab *finish(frigg_gvocab *v, const int32_t *end_ids, int n_end) {
    v->is_end = frigg_xcalloc((size_t)(v->V ? v->V : 1), 1);
    v->end_ids = frigg_xmalloc((size_t)(n_end > 0 ? n_end : 1) * sizeof *v->end_ids);
    for (int i = 0; i < n_end; i++) {
        if (end_ids[i] < 0 || end_ids[i] >= v->V) {
            frigg_set_error("end id %d is outside the vocabulary [0, %d)", (int)end_ids[i], v->V);
            frigg_gvocab_free(v);
            return NULL;
        }
        if (!v->is_end[end_ids[i]]) v->end_ids[v->n_end++] = end_ids[i];
        v->is_end[end_ids[i]] = 1;
    }
    /* an end id is the end, never its bytes */
    for (int i = 0; i < v->n_end; i++) {
        int32_t id = v->end_ids[i];
        size_t n = v->off[id + 1] - v->off[id];
        if (n) {
            memmove(v->bytes + v->off[id], v->bytes + v->off[id + 1], v->off[v->V] - v->off[id + 1]);
            for (int32_t j = id + 1; j <= v->V; j++) v->off[j] -= n;
        }
    }
    build_trie(v);
    return v;
}

frigg_gvocab *frigg_gvocab_from_bytes(const char *const *bytes, const size_t *lens, int vocab, const int32_t *end_ids,
                                      int n_end) {
    if (vocab < 0) {
        frigg_set_error("a vocabulary of %d tokens", vocab);
        return NULL;
    }
    frigg_gvocab *v = frigg_xcalloc(1, sizeof *v);
    v->V = vocab;
    v->off = frigg_xmalloc(((size_t)vocab + 1) * sizeof *v->off);
    size_t total = 0;
    for (int i = 0; i < vocab; i++)
        if (lens[i] <= FRIGG_GVOCAB_MAX_TOKEN_BYTES) total += lens[i];
    v->bytes = frigg_xmalloc(total + 1);
    size_t o = 0;
    for (int i = 0; i < vocab; i++) {
        v->off[i] = o;
        if (lens[i] && lens[i] <= FRIGG_GVOCAB_MAX_TOKEN_BYTES) {
            memcpy(v->bytes + o, bytes[i], lens[i]);
            o += lens[i];
        }
    }
    v->off[vocab] = o;
    return finish(v, end_ids, n_end);
}

frigg_gvocab *frigg_gvocab_new(const frigg_tokenizer *tok, int vocab, const int32_t *end_ids, int n_end) {
    if (vocab < 0) {
        frigg_set_error("a vocabulary of %d tokens", vocab);
        return NULL;
    }
    char **b = frigg_xcalloc((size_t)(vocab ? vocab : 1), sizeof *b);
    size_t *l = frigg_xcalloc((size_t)(vocab ? vocab : 1), sizeof *l);
    frigg_gvocab *v = NULL;
    for (int i = 0; i < vocab; i++) {
        int kind = frigg_tokenizer_token_bytes(tok, i, &b[i], &l[i]);
        if (kind < 0) goto out;
        if (kind != FRIGG_TOKEN_TEXT && kind != FRIGG_TOKEN_BYTE) l[i] = 0;
    }
    v = frigg_gvocab_from_bytes((const char *const *)b, l, vocab, end_ids, n_end);
out:
    for (int i = 0; i < vocab; i++) free(b[i]);
    free(b);
    free(l);
    return v;
}

void frigg_gvocab_free(frigg_gvocab *v) {
    if (!v) return;
    free(v->bytes);
    free(v->off);
    free(v->is_end);
    free(v->end_ids);
    free(v->tb);
    free(v->td);
    free(v->tend);
    free(v->ttok);
    free(v->ids);
    free(v);
}

int frigg_gvocab_size(const frigg_gvocab *v) { return v->V; }
int frigg_gvocab_trie_nodes(const frigg_gvocab *v) { return v->nn; }

const char *frigg_gvocab_bytes(const frigg_gvocab *v, int32_t id, size_t *n) {
    if (id < 0 || id >= v->V || v->off[id + 1] == v->off[id]) {
        *n = 0;
        return NULL;
    }
    *n = v->off[id + 1] - v->off[id];
    return v->bytes + v->off[id];
}

int frigg_gvocab_is_end(const frigg_gvocab *v, int32_t id) { return id >= 0 && id < v->V && v->is_end[id]; }
