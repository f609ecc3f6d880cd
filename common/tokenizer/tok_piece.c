/* tok_piece.c — one token's bytes as it appears inside decoded text (tokenizer.h,
 * frigg_tokenizer_token_bytes): the decoder chain run on a single token that is not the first, which is
 * what a grammar matches a candidate token against. Only chains whose per-token output does not depend on
 * the neighbouring tokens qualify: Replace steps, one ByteFallback, Fuse (DFM-Mimir's and Gemma's chain). */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "base/util.h"

static const char *dec_name(int kind) {
    switch (kind) {
    case TOK_DEC_STRIP: return "Strip";
    case TOK_DEC_METASPACE: return "Metaspace";
    default: return "?";
    }
}

int frigg_tokenizer_token_bytes(const frigg_tokenizer *tk, int32_t id, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (!tk->has_decoder) {
        frigg_set_error("tokenizer: no decoder (tokens are joined by spaces), so a token's text depends on its place");
        return -1;
    }
    int seen_bf = 0;
    for (size_t k = 0; k < tk->n_dec; k++) {
        int kd = tk->dec[k].kind;
        if (kd == TOK_DEC_STRIP || kd == TOK_DEC_METASPACE) {
            frigg_set_error("tokenizer: its decoder's %s step makes a token's text depend on its place", dec_name(kd));
            return -1;
        }
        /* a Replace after the ByteFallback would act on a decoded byte run, which spans tokens */
        if (kd == TOK_DEC_REPLACE && seen_bf) {
            frigg_set_error("tokenizer: a Replace step after ByteFallback makes a byte token's text depend on its run");
            return -1;
        }
        seen_bf |= kd == TOK_DEC_BYTE_FALLBACK;
    }
    for (size_t a = 0; a < tk->n_added; a++)
        if (tk->added[a].id == id && tk->added[a].special) return FRIGG_TOKEN_SPECIAL;
    size_t n;
    const char *t = tok_id_to_token(tk, id, &n);
    if (!t) return FRIGG_TOKEN_NONE;
    tok_buf cur = {0}, tmp = {0};
    tok_buf_put(&cur, t, n);
    int kind = FRIGG_TOKEN_TEXT;
    for (size_t k = 0; k < tk->n_dec; k++) {
        const tok_dec *d = &tk->dec[k];
        if (d->kind == TOK_DEC_BYTE_FALLBACK && kind == FRIGG_TOKEN_TEXT) {
            int b = tok_byte_token(cur.p, cur.n);
            if (b >= 0) {
                kind = FRIGG_TOKEN_BYTE;
                cur.n = 0;
                tok_buf_putc(&cur, (char)b);
            }
        } else if (d->kind == TOK_DEC_REPLACE && kind == FRIGG_TOKEN_TEXT && d->pat_len) {
            /* the literal Replace of tok_decode.c's token_step, on this one token */
            tmp.n = 0;
            size_t i = 0;
            while (i < cur.n) {
                const char *m = memmem(cur.p + i, cur.n - i, d->pat, d->pat_len);
                if (!m) break;
                tok_buf_put(&tmp, cur.p + i, (size_t)(m - (cur.p + i)));
                tok_buf_put(&tmp, d->content, d->content_len);
                i = (size_t)(m - cur.p) + d->pat_len;
            }
            tok_buf_put(&tmp, cur.p + i, cur.n - i);
            cur.n = 0;
            tok_buf_put(&cur, tmp.p, tmp.n);
        }
        /* Fuse joins tokens: nothing to do for one */
    }
    free(tmp.p);
    *out = tok_buf_take(&cur, len);
    return kind;
}
