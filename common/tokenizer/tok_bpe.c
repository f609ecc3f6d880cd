/* tok_bpe.c — the BPE model on one pre-tokenized word, as HF tokenizers' BPE::merge_word and
 * Word::merge_all: code points → vocab ids (byte fallback, then unk), then repeated merges of the
 * lowest-ranked adjacent pair, leftmost first on equal rank, through a min-heap with lazy
 * invalidation — O(n log n) per word. A Gemma word is a whole line between special tokens (its
 * pre-tokenizer is a no-op), so a quadratic rescan would be visible on long paragraphs. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "base/util.h"

typedef struct {
    uint32_t rank, pos;
    int32_t new_id;
    int32_t left, right; /* the pair when pushed: if still there, the entry is current */
} merge_cand;

typedef struct {
    int32_t c;
    int32_t prev, next;
    uint32_t len; /* bytes; 0 marks a symbol merged into its left neighbour */
} symbol;

static inline int cand_less(const merge_cand *a, const merge_cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(merge_cand *h, size_t *n, merge_cand x) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static merge_cand heap_pop(merge_cand *h, size_t *n) {
    merge_cand top = h[0], x = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const merge_cand *best = &x;
        if (l < *n && cand_less(&h[l], best)) {
            m = l;
            best = &h[l];
        }
        if (r < *n && cand_less(&h[r], best)) m = r;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n) h[i] = x;
    return top;
}

typedef struct {
    symbol *sym;
    size_t n, cap;
    int32_t unk_id;
    uint32_t unk_len; /* a pending (possibly fused) unk, flushed before the next known char */
} word;

static void word_add(word *w, int32_t c, uint32_t len) {
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 64;
        w->sym = frigg_xrealloc(w->sym, w->cap * sizeof *w->sym);
    }
    int32_t i = (int32_t)w->n;
    if (i > 0) w->sym[i - 1].next = i;
    w->sym[w->n++] = (symbol){c, i - 1, -1, len};
}

static int32_t char_id(const frigg_tokenizer *tk, const char *s, size_t n, uint32_t cp) {
    if (cp < 0x10000) return tk->bmp_id[cp];
    return tok_strmap_get(&tk->vocab, s, n);
}

/* Every final symbol of a word is a vocab token (a char, a byte-fallback byte, or a merge whose string is the
 * concatenation of its parts), so it covers at most max_token_bytes of the word: the word makes at least
 * ceil(bytes / max_token_bytes) tokens, bytes counting every character that makes a token. An unknown character
 * that becomes unk is not bounded so (a fused unk covers any length): no bound then. */
int tok_bpe_exceeds(const frigg_tokenizer *tk, const char *s, size_t n, size_t room) {
    if (!tk->max_token_bytes || n / tk->max_token_bytes <= room) return 0; /* cannot pass: not worth the scan */
    size_t bytes = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = tok_utf8_next(s + i, n - i, &adv);
        if (char_id(tk, s + i, adv, cp) >= 0) {
            bytes += adv;
        } else {
            int fb = tk->byte_fallback;
            for (size_t k = 0; fb && k < adv; k++) fb = tk->byte_id[(unsigned char)s[i + k]] >= 0;
            if (fb) bytes += adv;
            else if (tk->unk_token) return 0; /* without an unk token the character is dropped: no token */
        }
        i += adv;
    }
    return (bytes + tk->max_token_bytes - 1) / tk->max_token_bytes > room;
}

int tok_bpe_word(const frigg_tokenizer *tk, const char *s, size_t n, tok_ivec *ids) {
    if (n == 0) return 0;
    if (tk->ignore_merges) {
        int32_t id = tok_strmap_get(&tk->vocab, s, n);
        if (id >= 0) {
            tok_ivec_push(ids, id);
            return ids->limit && ids->n > ids->limit ? TOK_OVER_LIMIT : 0;
        }
    }
    if (ids->limit && tok_bpe_exceeds(tk, s, n, ids->limit >= ids->n ? ids->limit - ids->n : 0))
        return TOK_OVER_LIMIT; /* the merges of a long word are most of its cost */
    word w = {NULL, 0, 0, -1, 0};
    int have_unk = 0;
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = tok_utf8_next(s + i, n - i, &adv);
        int32_t id = char_id(tk, s + i, adv, cp);
        if (id >= 0) {
            if (have_unk) {
                word_add(&w, w.unk_id, w.unk_len);
                have_unk = 0;
            }
            word_add(&w, id, (uint32_t)adv);
        } else {
            int fell_back = 0;
            if (tk->byte_fallback) {
                fell_back = 1;
                for (size_t k = 0; k < adv; k++)
                    if (tk->byte_id[(unsigned char)s[i + k]] < 0) fell_back = 0;
                /* HF adds the byte tokens without flushing a pending unk first; kept as is. */
                if (fell_back)
                    for (size_t k = 0; k < adv; k++) word_add(&w, tk->byte_id[(unsigned char)s[i + k]], 1);
            }
            if (!fell_back && tk->unk_token) {
                if (tk->unk_id < 0) {
                    frigg_set_error("tokenizer: unk_token '%s' is not in the vocab (needed for an unknown "
                                    "character)", tk->unk_token);
                    free(w.sym);
                    return -1;
                }
                if (have_unk && tk->fuse_unk) {
                    w.unk_len += (uint32_t)adv;
                } else {
                    if (have_unk) word_add(&w, w.unk_id, w.unk_len);
                    w.unk_id = tk->unk_id;
                    w.unk_len = (uint32_t)adv;
                    have_unk = 1;
                }
            }
            /* no unk_token and no byte fallback: HF drops the character silently; so do we */
        }
        i += adv;
    }
    if (have_unk) word_add(&w, w.unk_id, w.unk_len);

    symbol *sym = w.sym;
    size_t ns = w.n;
    if (ns > 1) {
        merge_cand *heap = frigg_xmalloc(ns * 2 * sizeof *heap);
        size_t hn = 0, hcap = ns * 2;
        for (size_t i = 0; i + 1 < ns; i++) tok_pairmap_prefetch(&tk->merges, (uint32_t)sym[i].c, (uint32_t)sym[i + 1].c);
        for (size_t i = 0; i + 1 < ns; i++) {
            uint32_t rank;
            int32_t nid;
            if (tok_pairmap_get(&tk->merges, (uint32_t)sym[i].c, (uint32_t)sym[i + 1].c, &rank, &nid))
                heap_push(heap, &hn, (merge_cand){rank, (uint32_t)i, nid, sym[i].c, sym[i + 1].c});
        }
        while (hn) {
            merge_cand top = heap_pop(heap, &hn);
            symbol *cur = &sym[top.pos];
            if (cur->len == 0 || cur->next < 0) continue;
            symbol right = sym[cur->next];
            int32_t nid;
            /* A stale entry: the pair here changed since it was pushed. HF's test is whether the
             * current pair still merges to the same id; an unchanged pair trivially does. */
            if ((cur->c != top.left || right.c != top.right) &&
                (!tok_pairmap_get(&tk->merges, (uint32_t)cur->c, (uint32_t)right.c, NULL, &nid) ||
                 nid != top.new_id))
                continue;
            sym[cur->next].len = 0;
            cur->c = top.new_id;
            cur->len += right.len;
            cur->next = right.next;
            if (right.next >= 0) sym[right.next].prev = (int32_t)top.pos;
            if (hn + 2 > hcap) {
                hcap *= 2;
                heap = frigg_xrealloc(heap, hcap * sizeof *heap);
            }
            uint32_t rank;
            if (cur->prev >= 0 &&
                tok_pairmap_get(&tk->merges, (uint32_t)sym[cur->prev].c, (uint32_t)cur->c, &rank, &nid))
                heap_push(heap, &hn, (merge_cand){rank, (uint32_t)cur->prev, nid, sym[cur->prev].c, cur->c});
            if (cur->next >= 0 &&
                tok_pairmap_get(&tk->merges, (uint32_t)cur->c, (uint32_t)sym[cur->next].c, &rank, &nid))
                heap_push(heap, &hn, (merge_cand){rank, top.pos, nid, cur->c, sym[cur->next].c});
        }
        free(heap);
    }
    for (size_t i = 0; i < ns; i++)
        if (sym[i].len) tok_ivec_push(ids, sym[i].c);
    free(sym);
    return ids->limit && ids->n > ids->limit ? TOK_OVER_LIMIT : 0;
}
