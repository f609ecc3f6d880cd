/* tok_decode.c — ids → text, as HF Tokenizer::decode(skip_special_tokens=false): each id maps to
 * its token (added tokens first, unknown ids dropped), then the decoder chain runs over the token
 * list: Replace (literal), ByteFallback (a run of <0xHH> tokens becomes its UTF-8, or one U+FFFD
 * per byte when the run is invalid), Fuse, Strip, Metaspace. No decoder: tokens joined by " ".
 * Also the streaming decoder, which reproduces the same text piece by piece. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "base/util.h"

const char *tok_id_to_token(const frigg_tokenizer *tk, int32_t id, size_t *len) {
    if (id < 0) return NULL;
    for (size_t a = 0; a < tk->n_added; a++)
        if (tk->added[a].id == id) {
            if (tk->added[a].norm) {
                *len = tk->added[a].norm_len;
                return tk->added[a].norm;
            }
            *len = tk->added[a].content_len;
            return tk->added[a].content;
        }
    if ((size_t)id >= tk->id_cap || tk->id_entry[id] < 0) return NULL;
    return tok_strmap_key(&tk->vocab, (size_t)tk->id_entry[id], len);
}

/* A list of owned strings: the decoder chain's working value. */
typedef struct {
    tok_buf *v;
    size_t n, cap;
} strlist;

static void sl_push(strlist *l, const char *s, size_t n) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = frigg_xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n] = (tok_buf){0};
    tok_buf_put(&l->v[l->n++], s, n);
}

static void sl_free(strlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].p);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* HF byte_fallback.rs: exactly 6 bytes "<0x" HH ">" where u8::from_str_radix(HH, 16) succeeds
 * (which also accepts "+H"). Returns the byte or -1. */
int tok_byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    if (s[3] == '+' && lo >= 0) return lo;
    if (hi < 0 || lo < 0) return -1;
    return hi * 16 + lo;
}

static void replace_lit(const char *s, size_t n, const char *pat, size_t pn, const char *c, size_t cn, tok_buf *out) {
    size_t i = 0;
    while (pn && i < n) {
        const char *m = memmem(s + i, n - i, pat, pn);
        if (!m) break;
        tok_buf_put(out, s + i, (size_t)(m - (s + i)));
        tok_buf_put(out, c, cn);
        i = (size_t)(m - s) + pn;
    }
    tok_buf_put(out, s + i, n - i);
}

/* One per-token step (Replace, Strip, Metaspace) on token s; index = its place in the list. */
static void token_step(const tok_dec *d, const char *s, size_t n, size_t index, tok_buf *out) {
    out->n = 0;
    if (d->kind == TOK_DEC_REPLACE) {
        replace_lit(s, n, d->pat, d->pat_len, d->content, d->content_len, out);
    } else if (d->kind == TOK_DEC_STRIP) {
        /* decode to code points, cut `start` leading and `stop` trailing copies of cp */
        size_t nch = 0, i = 0, adv;
        while (i < n) {
            tok_utf8_next(s + i, n - i, &adv);
            i += adv;
            nch++;
        }
        size_t start_cut = 0, stop_cut = nch, ci = 0;
        i = 0;
        while (i < n && ci < d->start) {
            if (tok_utf8_next(s + i, n - i, &adv) != d->cp) break;
            start_cut = ++ci;
            i += adv;
        }
        /* trailing: walk backwards over at most `stop` chars */
        size_t end = n;
        for (size_t k = 0; k < d->stop && end > 0; k++) {
            size_t j = end - 1;
            while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
            if (tok_utf8_next(s + j, end - j, &adv) != d->cp) break;
            end = j;
            stop_cut--;
        }
        /* HF panics when the cuts cross (a token made only of stripped chars); we give "" */
        if (start_cut < stop_cut) {
            size_t b = 0;
            for (size_t k = 0; k < start_cut; k++) b += tok_utf8_len((unsigned char)s[b]);
            tok_buf_put(out, s + b, end - b);
        } else {
            tok_buf_put(out, "", 0);
        }
    } else { /* Metaspace: the replacement char becomes ' ', dropped in token 0 unless "never" */
        size_t i = 0, adv;
        while (i < n) {
            uint32_t cp = tok_utf8_next(s + i, n - i, &adv);
            if (cp == d->cp) {
                if (!(index == 0 && d->prepend_scheme != TOK_PREPEND_NEVER)) tok_buf_putc(out, ' ');
            } else {
                tok_buf_put(out, s + i, adv);
            }
            i += adv;
        }
    }
}

/* A finished byte run: its UTF-8, or one U+FFFD per byte when it is not valid UTF-8. */
static void flush_run(const tok_buf *run, strlist *out) {
    if (tok_utf8_valid(run->p, run->n) == run->n) {
        sl_push(out, run->p, run->n);
    } else {
        for (size_t k = 0; k < run->n; k++) sl_push(out, "\xEF\xBF\xBD", 3);
    }
}

static void run_decoder(const frigg_tokenizer *tk, strlist *l) {
    tok_buf tmp = {0};
    for (size_t k = 0; k < tk->n_dec; k++) {
        const tok_dec *d = &tk->dec[k];
        if (d->kind == TOK_DEC_FUSE) {
            tok_buf all = {0};
            for (size_t i = 0; i < l->n; i++) tok_buf_put(&all, l->v[i].p, l->v[i].n);
            sl_free(l);
            sl_push(l, all.p ? all.p : "", all.n);
            free(all.p);
        } else if (d->kind == TOK_DEC_BYTE_FALLBACK) {
            strlist out = {0};
            tok_buf run = {0};
            for (size_t i = 0; i < l->n; i++) {
                int b = tok_byte_token(l->v[i].p, l->v[i].n);
                if (b >= 0) {
                    char c = (char)b;
                    tok_buf_put(&run, &c, 1);
                    continue;
                }
                if (run.n) flush_run(&run, &out);
                run.n = 0;
                sl_push(&out, l->v[i].p, l->v[i].n);
            }
            if (run.n) flush_run(&run, &out);
            free(run.p);
            sl_free(l);
            *l = out;
        } else {
            for (size_t i = 0; i < l->n; i++) {
                token_step(d, l->v[i].p, l->v[i].n, i, &tmp);
                l->v[i].n = 0;
                tok_buf_put(&l->v[i], tmp.p, tmp.n);
            }
        }
    }
    free(tmp.p);
}

char *frigg_tokenizer_decode(const frigg_tokenizer *tk, const int32_t *ids, size_t n, size_t *len_out) {
    strlist l = {0};
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *t = tok_id_to_token(tk, ids[i], &len);
        if (t) sl_push(&l, t, len);
    }
    tok_buf out = {0};
    if (!tk->has_decoder) {
        for (size_t i = 0; i < l.n; i++) {
            if (i) tok_buf_putc(&out, ' ');
            tok_buf_put(&out, l.v[i].p, l.v[i].n);
        }
    } else {
        run_decoder(tk, &l);
        for (size_t i = 0; i < l.n; i++) tok_buf_put(&out, l.v[i].p, l.v[i].n);
    }
    sl_free(&l);
    return tok_buf_take(&out, len_out);
}

/* ---- streaming ----
 * The chain is split at its ByteFallback (at most one) and its first Fuse: per-token steps before
 * the ByteFallback see each token as it arrives; the ByteFallback holds a run of byte tokens until
 * a non-byte token (or the end) decides it; per-element steps after it see each finished element;
 * after the Fuse only Strip steps may follow, and they act on the start and end of the whole text:
 * leading copies are dropped as they arrive, trailing copies are held until more text or the end. */
typedef struct {
    size_t start_seen;
    int start_done;
    size_t held; /* trailing copies of cp not yet emitted (at most `stop`) */
} strip_state;

struct frigg_detok_stream {
    const frigg_tokenizer *tk;
    size_t bf;     /* index of the ByteFallback step, or n_dec */
    size_t fuse;   /* index of the first Fuse, or n_dec */
    size_t n_tokens, n_elems;
    tok_buf run;
    strip_state *strips; /* one per step after the Fuse */
};

frigg_detok_stream *frigg_detok_stream_new(const frigg_tokenizer *tk) {
    size_t bf = tk->n_dec, fuse = tk->n_dec;
    for (size_t k = 0; k < tk->n_dec; k++) {
        int kind = tk->dec[k].kind;
        if (kind == TOK_DEC_FUSE && fuse == tk->n_dec) {
            fuse = k;
        } else if (fuse < tk->n_dec && kind != TOK_DEC_STRIP && kind != TOK_DEC_FUSE) {
            frigg_set_error("tokenizer: cannot stream a decoder with a %s step after Fuse",
                            kind == TOK_DEC_REPLACE ? "Replace" : kind == TOK_DEC_METASPACE ? "Metaspace" : "ByteFallback");
            return NULL;
        } else if (kind == TOK_DEC_BYTE_FALLBACK) {
            if (bf != tk->n_dec) {
                frigg_set_error("tokenizer: cannot stream a decoder with two ByteFallback steps");
                return NULL;
            }
            bf = k;
        }
    }
    frigg_detok_stream *st = frigg_xcalloc(1, sizeof *st);
    st->tk = tk;
    st->bf = bf;
    st->fuse = fuse;
    st->strips = frigg_xcalloc(tk->n_dec + 1, sizeof *st->strips);
    return st;
}

void frigg_detok_stream_free(frigg_detok_stream *st) {
    if (!st) return;
    free(st->run.p);
    free(st->strips);
    free(st);
}

/* Feed text through the Strip steps after the Fuse, from step k on; append what is final. */
static void post_fuse(frigg_detok_stream *st, size_t k, const char *s, size_t n, tok_buf *out) {
    const frigg_tokenizer *tk = st->tk;
    while (k < tk->n_dec && tk->dec[k].kind == TOK_DEC_FUSE) k++;
    if (k >= tk->n_dec) {
        tok_buf_put(out, s, n);
        return;
    }
    const tok_dec *d = &tk->dec[k];
    strip_state *ss = &st->strips[k];
    tok_buf pass = {0};
    tok_buf cpbuf = {0};
    tok_buf_put_cp(&cpbuf, d->cp);
    size_t i = 0, adv;
    while (i < n) {
        uint32_t cp = tok_utf8_next(s + i, n - i, &adv);
        if (!ss->start_done) {
            if (ss->start_seen < d->start && cp == d->cp) {
                ss->start_seen++;
                i += adv;
                continue;
            }
            ss->start_done = 1;
        }
        if (d->stop && cp == d->cp) {
            ss->held++;
            if (ss->held > d->stop) {
                tok_buf_put(&pass, cpbuf.p, cpbuf.n);
                ss->held--;
            }
        } else {
            for (; ss->held; ss->held--) tok_buf_put(&pass, cpbuf.p, cpbuf.n);
            tok_buf_put(&pass, s + i, adv);
        }
        i += adv;
    }
    if (pass.n) post_fuse(st, k + 1, pass.p, pass.n, out);
    free(pass.p);
    free(cpbuf.p);
}

/* An element that has passed the ByteFallback: run the per-element steps up to the Fuse. */
static void element(frigg_detok_stream *st, const char *s, size_t n, tok_buf *out) {
    const frigg_tokenizer *tk = st->tk;
    tok_buf a = {0}, b = {0};
    tok_buf_put(&a, s, n);
    for (size_t k = st->bf + 1; k < st->fuse && k < tk->n_dec; k++) {
        token_step(&tk->dec[k], a.p, a.n, st->n_elems, &b);
        tok_buf t = a;
        a = b;
        b = t;
    }
    st->n_elems++;
    post_fuse(st, st->fuse, a.p, a.n, out);
    free(a.p);
    free(b.p);
}

static void flush_stream_run(frigg_detok_stream *st, tok_buf *out) {
    if (!st->run.n) return;
    if (tok_utf8_valid(st->run.p, st->run.n) == st->run.n) {
        element(st, st->run.p, st->run.n, out);
    } else {
        for (size_t k = 0; k < st->run.n; k++) element(st, "\xEF\xBF\xBD", 3, out);
    }
    st->run.n = 0;
}

int frigg_detok_stream_push(frigg_detok_stream *st, int32_t id, char **out, size_t *out_len) {
    const frigg_tokenizer *tk = st->tk;
    tok_buf o = {0};
    size_t len;
    const char *t = tok_id_to_token(tk, id, &len);
    if (t) {
        if (!tk->has_decoder) {
            if (st->n_tokens) tok_buf_putc(&o, ' ');
            tok_buf_put(&o, t, len);
        } else {
            tok_buf a = {0}, b = {0};
            tok_buf_put(&a, t, len);
            size_t upto = st->bf < st->fuse ? st->bf : st->fuse;
            for (size_t k = 0; k < upto; k++) {
                token_step(&tk->dec[k], a.p, a.n, st->n_tokens, &b);
                tok_buf c = a;
                a = b;
                b = c;
            }
            int byte = st->bf < st->fuse ? tok_byte_token(a.p, a.n) : -1;
            if (byte >= 0) {
                char c = (char)byte;
                tok_buf_put(&st->run, &c, 1);
            } else if (st->bf < st->fuse) {
                flush_stream_run(st, &o);
                element(st, a.p, a.n, &o);
            } else {
                st->n_elems = st->n_tokens;
                post_fuse(st, st->fuse, a.p, a.n, &o);
            }
            free(a.p);
            free(b.p);
        }
        st->n_tokens++;
    }
    *out = tok_buf_take(&o, out_len);
    return 0;
}

int frigg_detok_stream_finish(frigg_detok_stream *st, char **out, size_t *out_len) {
    tok_buf o = {0};
    if (st->tk->has_decoder) flush_stream_run(st, &o);
    /* held trailing copies are exactly what each Strip's `stop` removes: drop them */
    *out = tok_buf_take(&o, out_len);
    return 0;
}
