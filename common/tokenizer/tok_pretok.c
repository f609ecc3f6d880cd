/* tok_pretok.c — normalizers (Replace with a literal pattern, Prepend) and pre-tokenizers (Split
 * with a literal or PCRE2 pattern and HF's five delimiter behaviours, Metaspace), applied in
 * order, then the BPE model on every resulting piece. Mirrors HF NormalizedString::replace /
 * ::split and PreTokenizedString::split (empty pieces are dropped). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "base/util.h"

static const char *find_lit(const char *s, size_t n, const char *pat, size_t pn) {
    if (pn == 1) return memchr(s, pat[0], n);
    return memmem(s, n, pat, pn);
}

void tok_normalize(const frigg_tokenizer *tk, const char *s, size_t n, tok_buf *out) {
    tok_buf a = {0}, b = {0};
    tok_buf_put(&a, s, n);
    for (size_t k = 0; k < tk->n_norm; k++) {
        const tok_norm *nm = &tk->norm[k];
        b.n = 0;
        if (nm->kind == TOK_NORM_PREPEND) {
            if (a.n) tok_buf_put(&b, nm->content, nm->content_len);
            tok_buf_put(&b, a.p, a.n);
        } else {
            size_t i = 0;
            for (;;) {
                const char *m = find_lit(a.p + i, a.n - i, nm->pat, nm->pat_len);
                if (!m) break;
                size_t at = (size_t)(m - a.p);
                tok_buf_put(&b, a.p + i, at - i);
                tok_buf_put(&b, nm->content, nm->content_len);
                i = at + nm->pat_len;
            }
            tok_buf_put(&b, a.p + i, a.n - i);
        }
        tok_buf t = a;
        a = b;
        b = t;
    }
    free(b.p);
    out->n = 0;
    tok_buf_put(out, a.p, a.n);
    free(a.p);
}

/* A match list covering s: (start, end, is_match) in order, like HF Pattern::find_matches. */
typedef struct {
    size_t a, b;
    int m;
} span;
typedef struct {
    span *v;
    size_t n, cap;
} spans;

static void sp_push(spans *s, size_t a, size_t b, int m) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 32;
        s->v = frigg_xrealloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = (span){a, b, m};
}

static pcre2_match_context *g_mctx;
static pthread_once_t g_mctx_once = PTHREAD_ONCE_INIT;

static void make_match_context(void) {
    g_mctx = pcre2_match_context_create(NULL);
    if (g_mctx) {
        pcre2_set_match_limit(g_mctx, UINT32_MAX);
        pcre2_set_depth_limit(g_mctx, UINT32_MAX);
        pcre2_set_heap_limit(g_mctx, UINT32_MAX); /* KiB */
    }
}

/* One process-wide context: read-only while matching, so threads share it. */
static pcre2_match_context *tk_match_context(void) {
    pthread_once(&g_mctx_once, make_match_context);
    return g_mctx;
}

static int find_matches(const tok_pretok *p, const char *s, size_t n, pcre2_match_data **md, spans *out) {
    out->n = 0;
    if (n == 0) {
        sp_push(out, 0, 0, 0);
        return 0;
    }
    size_t prev = 0;
    if (!p->re) {
        size_t i = 0;
        for (;;) {
            const char *m = find_lit(s + i, n - i, p->pat, p->pat_len);
            if (!m) break;
            size_t at = (size_t)(m - s);
            if (prev != at) sp_push(out, prev, at, 0);
            sp_push(out, at, at + p->pat_len, 1);
            prev = i = at + p->pat_len;
        }
    } else {
        if (!*md) *md = pcre2_match_data_create(1, NULL);
        /* Iterate like the onig crate's find_iter: an empty match right after the previous match is
         * skipped by advancing one character. Subjects were validated as UTF-8 on entry. */
        size_t last_end = 0;
        int have_last = 0;
        size_t last_match_end = 0;
        while (last_end <= n) {
            int rc = pcre2_match(p->re, (PCRE2_SPTR)s, n, last_end, PCRE2_NO_UTF_CHECK, *md, NULL);
            /* JIT code keeps backtracking points on a small fixed stack, which a long run of
             * punctuation or spaces exhausts; the interpreter keeps them on the heap, and its match
             * limit is raised so that only memory bounds a match, as with HF's Oniguruma */
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                rc = pcre2_match(p->re, (PCRE2_SPTR)s, n, last_end, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, *md,
                                 tk_match_context());
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                frigg_set_error("tokenizer: regex match failed: %s", (const char *)msg);
                return -1;
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(*md);
            size_t ms = ov[0], me = ov[1];
            if (ms == me && have_last && last_match_end == me) {
                last_end += last_end < n ? tok_utf8_len((unsigned char)s[last_end]) : 1;
                continue;
            }
            if (ms == me) last_end = me + (me < n ? tok_utf8_len((unsigned char)s[me]) : 1);
            else last_end = me;
            have_last = 1;
            last_match_end = me;
            if (prev != ms) sp_push(out, prev, ms, 0);
            sp_push(out, ms, me, 1);
            prev = me;
        }
    }
    if (prev != n) sp_push(out, prev, n, 0);
    return 0;
}

/* HF NormalizedString::split: turn the covering match list into pieces per behaviour.
 * Returned spans have m = 1 when the piece is to be removed. */
static void apply_behavior(int behavior, const spans *in, spans *out) {
    out->n = 0;
    int prev_match = 0;
    switch (behavior) {
    case TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < in->n; i++) sp_push(out, in->v[i].a, in->v[i].b, 0);
        break;
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < in->n; i++) sp_push(out, in->v[i].a, in->v[i].b, in->v[i].m);
        break;
    case TOK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < in->n; i++) {
            if (in->v[i].m == prev_match && out->n) out->v[out->n - 1].b = in->v[i].b;
            else sp_push(out, in->v[i].a, in->v[i].b, 0);
            prev_match = in->v[i].m;
        }
        break;
    case TOK_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < in->n; i++) {
            if (in->v[i].m && !prev_match && out->n) out->v[out->n - 1].b = in->v[i].b;
            else sp_push(out, in->v[i].a, in->v[i].b, 0);
            prev_match = in->v[i].m;
        }
        break;
    case TOK_SPLIT_MERGED_NEXT:
        for (size_t k = in->n; k-- > 0;) {
            if (in->v[k].m && !prev_match && out->n) out->v[out->n - 1].a = in->v[k].a;
            else sp_push(out, in->v[k].a, in->v[k].b, 0);
            prev_match = in->v[k].m;
        }
        for (size_t i = 0, j = out->n ? out->n - 1 : 0; i < j; i++, j--) {
            span t = out->v[i];
            out->v[i] = out->v[j];
            out->v[j] = t;
        }
        break;
    }
}

/* ids == NULL: only count the pieces into *count (tests compare that with HF's pre-tokenizer). */
static int run_step(const frigg_tokenizer *tk, size_t k, const char *s, size_t n, int at_origin,
                    pcre2_match_data **md, tok_ivec *ids, size_t *count) {
    if (n == 0) return 0; /* PreTokenizedString::split drops empty pieces */
    if (k == tk->n_pre) {
        if (!ids) {
            (*count)++;
            return 0;
        }
        return tok_bpe_word(tk, s, n, ids);
    }
    const tok_pretok *p = &tk->pre[k];
    spans m = {0}, pieces = {0};
    int rc = 0;
    if (p->kind == TOK_PRE_SPLIT) {
        if (find_matches(p, s, n, md, &m) < 0) {
            free(m.v);
            return -1;
        }
        if (p->invert)
            for (size_t i = 0; i < m.n; i++) m.v[i].m = !m.v[i].m;
        apply_behavior(p->behavior, &m, &pieces);
        for (size_t i = 0; i < pieces.n && rc == 0; i++)
            if (!pieces.v[i].m)
                rc = run_step(tk, k + 1, s + pieces.v[i].a, pieces.v[i].b - pieces.v[i].a,
                              at_origin && pieces.v[i].a == 0, md, ids, count);
    } else { /* Metaspace: ' ' → replacement, maybe prepend it, maybe split before each one */
        tok_buf b = {0};
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ' ') tok_buf_put(&b, p->repl, p->repl_len);
            else tok_buf_putc(&b, s[i]);
        }
        int starts = b.n >= p->repl_len && memcmp(b.p, p->repl, p->repl_len) == 0;
        if (!starts && (p->prepend_scheme == TOK_PREPEND_ALWAYS ||
                        (p->prepend_scheme == TOK_PREPEND_FIRST && at_origin))) {
            tok_buf c = {0};
            tok_buf_put(&c, p->repl, p->repl_len);
            tok_buf_put(&c, b.p, b.n);
            free(b.p);
            b = c;
        }
        if (!p->split) {
            rc = run_step(tk, k + 1, b.p, b.n, at_origin, md, ids, count);
        } else {
            size_t st = 0;
            for (size_t i = 0; i <= b.n; i++) {
                if (i == b.n || (i > st && i + p->repl_len <= b.n && memcmp(b.p + i, p->repl, p->repl_len) == 0)) {
                    if (rc == 0) rc = run_step(tk, k + 1, b.p + st, i - st, at_origin && st == 0, md, ids, count);
                    st = i;
                }
            }
        }
        free(b.p);
    }
    free(m.v);
    free(pieces.v);
    return rc;
}

int tok_pretok_and_bpe(const frigg_tokenizer *tk, const char *s, size_t n, int at_origin,
                       pcre2_match_data **md, tok_ivec *ids) {
    if (ids->limit) {
        /* Splits that keep every byte (all behaviours but Removed) hand the whole segment to BPE in pieces, so
         * the bound of tok_bpe_exceeds holds for the segment: a segment far past the limit is refused before
         * its pre-tokenization. Metaspace rewrites characters, so it is left to the per-word bound. */
        int keeps_bytes = 1;
        for (size_t k = 0; k < tk->n_pre; k++)
            if (tk->pre[k].kind != TOK_PRE_SPLIT || tk->pre[k].behavior == TOK_SPLIT_REMOVED) keeps_bytes = 0;
        if (keeps_bytes && tok_bpe_exceeds(tk, s, n, ids->limit >= ids->n ? ids->limit - ids->n : 0))
            return TOK_OVER_LIMIT;
    }
    return run_step(tk, 0, s, n, at_origin, md, ids, NULL);
}

long tok_pretok_count(const frigg_tokenizer *tk, const char *s, size_t n) {
    pcre2_match_data *md = NULL;
    size_t count = 0;
    int rc = run_step(tk, 0, s, n, 1, &md, NULL, &count);
    if (md) pcre2_match_data_free(md);
    return rc < 0 ? -1 : (long)count;
}
