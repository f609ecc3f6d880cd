/* seqgen.c — see seqgen.h. */
#include "seqgen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stopstr.h"
#include "engine/cpu_ops.h"
#include "chat/toolcall.h"
#include "base/util.h"

struct frigg_seqgen {
    frigg_seqgen_params p;
    char *stops[FRIGG_SEQGEN_MAX_STOPS];
    int vocab;
    frigg_sampler smp;
    frigg_want want;         /* what a step of this sequence asks for */
    frigg_want row_want;     /* what the last row asked for (frigg_seqgen_row): want, or LOGITS for the prefill row
                                of a masked greedy sequence */
    int mask_greedy;         /* greedy under a grammar: decode rows GREEDY with the mask (frigg_row.mask), so the
                                engine finds the best allowed id where the logits are */
    int k;                   /* TOPK: how many */
    /* step outputs */
    int32_t out_id;
    float *vals;             /* [k] */
    int32_t *cand;
    float *logits, *work;    /* [vocab]; work: the row the sampler adjusts (penalties, bias), so that logits
                                stays the model's row (logprobs, the other choices of a shared prefill) */
    /* text */
    frigg_detok_stream *ds;
    frigg_stopstr *ss;
    char *text;
    size_t len, cap;
    char *piece;             /* the text released by the last accept */
    int stopped, done, finished;
    int32_t last;
    frigg_seqgen_result r;
    int32_t *ids;
    float *token_logprob, *top_lps;
    int32_t *top_ids;
    char *tool_call_error;
    char *error;             /* the model's row was not finite: the sequence ended with this error */
    json_t *tool_calls;
    double t_admit, t_prefill;
    /* structured output (p.grammar): the recogniser of this sequence and the mask of its next token */
    frigg_gmatcher *gm;
    uint32_t *gbits;
};

/* A draw the engines make (FRIGG_WANT_SAMPLE): temperature > 0, top-k off or the whole vocabulary, top-p off (the
 * sampler's normalised parameters), nothing that changes a logit first. */
static int device_draw(const frigg_sampler_params *p, int vocab) {
    return p->temperature > 0 && isfinite(p->temperature) && (p->top_k <= 0 || p->top_k >= vocab) && p->top_p >= 1 &&
           !frigg_sampler_adjusts(p);
}

frigg_seqgen *frigg_seqgen_new(const frigg_seqgen_params *p, int prompt_tokens, int vocab, const frigg_tokenizer *tok) {
    if (p->n_stop && !tok) {
        frigg_set_error("\"stop\" strings need a tokenizer.json in the model directory");
        return NULL;
    }
    if (p->max_tokens < 0 || p->n_stop < 0 || p->n_stop > FRIGG_SEQGEN_MAX_STOPS || p->logprobs < 0 ||
        p->n_stop_ids < 0 || p->n_stop_ids > FRIGG_SEQGEN_MAX_STOP_IDS) {
        frigg_set_error("generation parameters out of range (max_tokens %d, %d stop strings, %d stop ids, logprobs %d)",
                        p->max_tokens, p->n_stop, p->n_stop_ids, p->logprobs);
        return NULL;
    }
    const frigg_sampler_params *sp = &p->sampling;
    if (!isfinite(sp->frequency_penalty) || !isfinite(sp->presence_penalty) || sp->n_logit_bias < 0 ||
        sp->n_logit_bias > FRIGG_MAX_LOGIT_BIAS) {
        frigg_set_error("sampling parameters out of range (frequency_penalty %g, presence_penalty %g, %d logit_bias "
                        "entries, at most %d)",
                        (double)sp->frequency_penalty, (double)sp->presence_penalty, sp->n_logit_bias,
                        FRIGG_MAX_LOGIT_BIAS);
        return NULL;
    }
    for (int i = 0; i < sp->n_logit_bias; i++)
        if (sp->logit_bias[i].id < 0 || sp->logit_bias[i].id >= vocab || !isfinite(sp->logit_bias[i].bias)) {
            frigg_set_error("logit_bias entry %d: token id %d (vocabulary [0, %d)), bias %g", i,
                            (int)sp->logit_bias[i].id, vocab, (double)sp->logit_bias[i].bias);
            return NULL;
        }
    if (p->grammar && frigg_gvocab_size(frigg_gref_vocab(p->grammar)) != vocab) {
        frigg_set_error("the grammar's vocabulary has %d tokens, the model's %d",
                        frigg_gvocab_size(frigg_gref_vocab(p->grammar)), vocab);
        return NULL;
    }
    frigg_seqgen *g = frigg_xcalloc(1, sizeof *g);
    g->p = *p;
    if (p->grammar) {
        frigg_gref_retain(p->grammar);
        if (!p->lazy_grammar) g->gm = frigg_gmatcher_new(frigg_gref_grammar(p->grammar));
        g->gbits = frigg_xcalloc((size_t)(vocab + 31) / 32, sizeof(uint32_t));
    }
    const int masked = p->grammar && !p->lazy_grammar; /* from the first step */
    for (int i = 0; i < p->n_stop; i++) {
        g->stops[i] = frigg_xstrdup(p->stop[i]);
        g->p.stop[i] = g->stops[i];
    }
    g->vocab = vocab;
    if (tok) {
        g->ds = frigg_detok_stream_new(tok);
        if (p->n_stop) {
            g->ss = frigg_stopstr_new((const char *const *)g->stops, p->n_stop);
            if (!g->ss) {
                frigg_seqgen_free(g);
                return NULL;
            }
        }
    }
    frigg_sampler_init(&g->smp, &p->sampling, vocab);
    /* The cheapest output that gives this sequence what it needs from a step: with a penalty or a logit bias
     * neither the engine's argmax nor its top k are those of the row drawn from (greedy_only and topk_only
     * say no), so the whole row. */
    int topk = p->logprobs || masked ? 0 : frigg_sampler_topk_only(&p->sampling, vocab);
    g->mask_greedy = p->grammar && frigg_sampler_greedy_only(&p->sampling) && !p->logprobs;
    if (frigg_sampler_greedy_only(&p->sampling) && !p->logprobs) {
        g->want = FRIGG_WANT_GREEDY;
        /* the prefill row of a masked sequence brings its row to the host (the engines mask decode rows only) */
        if (masked) g->logits = frigg_xmalloc(sizeof(float) * (size_t)vocab);
    } else if (device_draw(&g->smp.p, vocab) && !p->logprobs) {
        /* a draw from the whole row at temperature T and nothing else: the engine draws it where the logits are
         * (decode rows); a prefill row, and a grammar state whose mask allows nothing, bring the row here */
        g->want = FRIGG_WANT_SAMPLE;
        g->logits = frigg_xmalloc(sizeof(float) * (size_t)vocab);
    } else if (topk) {
        g->want = FRIGG_WANT_TOPK;
        g->k = topk;
        g->vals = frigg_xmalloc(sizeof(float) * (size_t)topk);
        g->cand = frigg_xmalloc(sizeof(int32_t) * (size_t)topk);
    } else {
        g->want = FRIGG_WANT_LOGITS;
        g->logits = frigg_xmalloc(sizeof(float) * (size_t)vocab);
        /* the sampler changes logits only when greedy_only or topk_only would have said no for that reason */
        if (frigg_sampler_adjusts(&p->sampling) || masked) g->work = frigg_xmalloc(sizeof(float) * (size_t)vocab);
    }
    size_t cap = (size_t)p->max_tokens + 1;
    g->ids = frigg_xmalloc(cap * sizeof(int32_t));
    if (p->logprobs) {
        g->token_logprob = frigg_xmalloc(cap * sizeof(float));
        g->top_ids = frigg_xmalloc(cap * (size_t)p->logprobs * sizeof(int32_t));
        g->top_lps = frigg_xmalloc(cap * (size_t)p->logprobs * sizeof(float));
    }
    g->r.ids = g->ids;
    g->r.finish_reason = "length";
    g->r.prompt_tokens = prompt_tokens;
    g->r.token_logprob = g->token_logprob;
    g->r.top_ids = g->top_ids;
    g->r.top_lps = g->top_lps;
    g->done = p->max_tokens == 0;
    return g;
}

void frigg_seqgen_free(frigg_seqgen *g) {
    if (!g) return;
    for (int i = 0; i < FRIGG_SEQGEN_MAX_STOPS; i++) free(g->stops[i]);
    frigg_sampler_free(&g->smp);
    free(g->vals);
    free(g->cand);
    free(g->logits);
    free(g->work);
    frigg_detok_stream_free(g->ds);
    frigg_stopstr_free(g->ss);
    free(g->text);
    free(g->piece);
    free(g->ids);
    free(g->token_logprob);
    free(g->top_ids);
    free(g->top_lps);
    free(g->tool_call_error);
    free(g->error);
    json_decref(g->tool_calls);
    frigg_gmatcher_free(g->gm);
    free(g->gbits);
    frigg_gref_release(g->p.grammar);
    free(g);
}

int frigg_seqgen_lazy_waiting(const frigg_seqgen *g) { return g->p.grammar && g->p.lazy_grammar && !g->gm; }

void frigg_seqgen_row(frigg_seqgen *g, frigg_row *row) {
    frigg_want w = g->done ? FRIGG_WANT_NONE : g->want;
    row->mask = NULL;
    if (w == FRIGG_WANT_GREEDY && g->gm && g->mask_greedy) {
        /* the mask of the next token, now: a decode row carries it to the engine; the prefill row (and a state
         * that allows no token, which accept's host path reports) comes back whole and is masked here */
        if (!row->prefill && frigg_gmasker_fill(frigg_gref_masker(g->p.grammar), g->gm, g->gbits) > 0)
            row->mask = g->gbits;
        else
            w = FRIGG_WANT_LOGITS;
    }
    if (w == FRIGG_WANT_SAMPLE) {
        if (row->prefill)
            w = FRIGG_WANT_LOGITS; /* the engines draw on decode rows only */
        else if (g->gm) {
            if (frigg_gmasker_fill(frigg_gref_masker(g->p.grammar), g->gm, g->gbits) > 0)
                row->mask = g->gbits;
            else
                w = FRIGG_WANT_LOGITS; /* accept's host path reports a state that allows nothing */
        }
    }
    g->row_want = w;
    row->want = w;
    if (w == FRIGG_WANT_SAMPLE) frigg_seqgen_row_ahead(g, row);
    row->k = g->k;
    row->out_id = &g->out_id;
    row->out_vals = g->vals;
    row->out_ids = g->cand;
    row->out_lse = NULL;
    row->out_logits = g->logits;
}

void frigg_seqgen_row_ahead(frigg_seqgen *g, frigg_row *row) {
    if (row->want != FRIGG_WANT_SAMPLE) return;
    row->temperature = g->smp.p.temperature;
    row->u = frigg_rng_uniform(g->smp.s); /* the one uniform of this token's draw, as frigg_sample takes it */
}

int32_t frigg_seqgen_last(const frigg_seqgen *g) { return g->last; }

static void text_append(frigg_seqgen *g, const char *p, size_t n) {
    if (g->len + n + 1 > g->cap) {
        g->cap = (g->len + n + 1) * 2;
        g->text = realloc(g->text, g->cap);
        if (!g->text) abort();
    }
    memcpy(g->text + g->len, p, n);
    g->len += n;
    g->text[g->len] = 0;
}

/* Text through the stop-string matcher into the kept text; the released part is appended to g->piece.
 * 1 when a stop string completed. */
static int text_feed(frigg_seqgen *g, const char *piece, size_t n, size_t *plen) {
    char *out = NULL;
    size_t olen = n;
    int hit = 0;
    if (g->ss) hit = frigg_stopstr_push(g->ss, piece, n, &out, &olen);
    const char *rel = g->ss ? (out ? out : "") : piece;
    size_t start = g->len;
    text_append(g, rel, olen);
    free(out);
    g->piece = realloc(g->piece, *plen + olen + 1);
    if (!g->piece) abort();
    memcpy(g->piece + *plen, g->text + start, olen);
    *plen += olen;
    g->piece[*plen] = 0;
    return hit;
}

static int is_stop_id(const frigg_seqgen *g, int32_t id) {
    for (int i = 0; i < g->p.n_stop_ids; i++)
        if (g->p.stop_ids[i] == id) return 1;
    return 0;
}

/* The first index whose value is a NaN or an infinity (all exponent bits set), or -1: blocks of 1,024 values reduced
 * without a branch (the compiler vectorizes it; a loop that stops at the first such value does not), the block
 * that holds one searched again. A whole row of 262,144 values is read on every step of a LOGITS row. */
static int first_nonfinite(const float *v, int n) {
    for (int b = 0; b < n; b += 1024) {
        int e = n - b < 1024 ? n : b + 1024;
        uint32_t any = 0;
        for (int i = b; i < e; i++) {
            uint32_t u;
            memcpy(&u, &v[i], 4);
            any |= (u & 0x7f800000u) == 0x7f800000u;
        }
        if (any)
            for (int i = b; i < e; i++)
                if (!isfinite(v[i])) return i;
    }
    return -1;
}

/* The values the engine handed back for this step, checked where the host sees them: every one of a TOPK row's k
 * values, and the whole row of a LOGITS row (one pass over what the sampler reads several times). A NaN or an
 * infinity there means the model itself broke (non-finite weights, an overflow), and every id drawn from it would
 * be arbitrary, so the sequence ends with an error instead. A GREEDY row brings only the engine's argmax id: an
 * engine that checks its argmax value answers an id outside [0, vocab) when it is not finite, which ends the
 * sequence the same way. 0 when finite, else -1 with g->error set. */
static int check_finite(frigg_seqgen *g, const frigg_row *row) {
    const float *v = NULL;
    int n = 0;
    if (g->row_want == FRIGG_WANT_TOPK) {
        v = row->out_vals;
        n = g->k;
    } else if (g->row_want == FRIGG_WANT_LOGITS) {
        v = row->out_logits;
        n = g->vocab;
    }
    char msg[256];
    if (g->row_want == FRIGG_WANT_GREEDY || g->row_want == FRIGG_WANT_SAMPLE) {
        /* an engine that finds its argmax value (or a value of a sampled row) not finite answers an id outside the
         * vocabulary */
        int32_t id = *row->out_id;
        if (id >= 0 && id < g->vocab) return 0;
        snprintf(msg, sizeof msg,
                 "the model's logits are not finite (the engine's %s id is %d) at step %d (%s) of sequence %d: "
                 "the weights or the computation hold a NaN or an infinity",
                 g->row_want == FRIGG_WANT_SAMPLE ? "sampled" : "greedy", (int)id, g->r.n,
                 row->prefill ? "the prefill" : "a decode step", row->seq);
        g->error = frigg_xstrdup(msg);
        return -1;
    }
    int bad = first_nonfinite(v, n);
    if (bad < 0) return 0;
    int32_t id = g->row_want == FRIGG_WANT_TOPK ? row->out_ids[bad] : bad;
    snprintf(msg, sizeof msg,
             "the model's logits are not finite (%s at token id %d) at step %d (%s) of sequence %d: the weights or "
             "the computation hold a NaN or an infinity",
             isnan(v[bad]) ? "NaN" : v[bad] > 0 ? "+Inf" : "-Inf", (int)id, g->r.n,
             row->prefill ? "the prefill" : "a decode step", row->seq);
    g->error = frigg_xstrdup(msg);
    return -1;
}

const char *frigg_seqgen_error(const frigg_seqgen *g) { return g->error; }

/* Structured output: the allowed next tokens into g->gbits. 0, or -1 with g->error when the grammar allows no token
 * at all (a vocabulary without the bytes it needs). */
static int grammar_mask_bits(frigg_seqgen *g) {
    int n = frigg_gmasker_fill(frigg_gref_masker(g->p.grammar), g->gm, g->gbits);
    if (n > 0) return 0;
    char msg[200];
    snprintf(msg, sizeof msg, "structured output: no token of the vocabulary can continue the text at step %d", g->r.n);
    g->error = frigg_xstrdup(msg);
    return -1;
}

/* The tokens the grammar does not allow next set to -inf in w, before anything else shapes the row (penalties, bias,
 * temperature, top-k, top-p work on what is left). */
static int grammar_mask(frigg_seqgen *g, float *w) {
    if (grammar_mask_bits(g)) return -1;
    frigg_grammar_apply_mask(w, g->vocab, g->gbits);
    return 0;
}

/* The draw landed outside the mask (the sampler's walk can end on the last id of its list when rounding leaves the
 * uniform past the sum, and a top-k list can hold masked ids): the best allowed id of the adjusted row instead. */
static int32_t masked_argmax(const frigg_seqgen *g, const float *w) {
    int32_t i = frigg_argmax_masked(w, g->vocab, g->gbits); /* cpu_ops.c: the engines' own rule */
    return i < 0 ? 0 : i;
}

int frigg_seqgen_accept(frigg_seqgen *g, const frigg_row *row, const char **piece, size_t *piece_len) {
    size_t plen = 0;
    if (!g->piece) g->piece = frigg_xmalloc(1);
    g->piece[0] = 0;
    *piece = g->piece;
    *piece_len = 0;
    if (g->done) return 1;
    if (!row->prefill) g->r.decode_steps++;
    if (check_finite(g, row)) {
        g->done = 1;
        return 1;
    }
    int32_t next;
    int V = g->vocab, k = g->p.logprobs;
    if (g->row_want == FRIGG_WANT_GREEDY || g->row_want == FRIGG_WANT_SAMPLE) {
        next = *row->out_id;
        if (row->mask && !(g->gbits[next >> 5] >> (next & 31) & 1u)) {
            char msg[200]; /* the engine's best (or drawn) allowed id is not allowed: no allowed logit was finite */
            snprintf(msg, sizeof msg, "the model's logits are not finite for any token the grammar allows at step %d "
                     "of sequence %d: the weights or the computation hold a NaN or an infinity", g->r.n, row->seq);
            g->error = frigg_xstrdup(msg);
            g->done = 1;
            return 1;
        }
    } else if (g->row_want == FRIGG_WANT_TOPK) {
        next = frigg_sample_topk(&g->smp, row->out_vals, row->out_ids, g->k);
    } else if (g->gm && frigg_sampler_greedy_only(&g->p.sampling) && !k) {
        /* greedy under a grammar: the best allowed id of the model's row itself, read through the mask's words
         * (the first of equal values, as the argmax of the row with the refused ids at -inf would take), with no
         * copy of the row and no pass that writes -inf into it */
        if (grammar_mask_bits(g)) {
            g->done = 1;
            return 1;
        }
        next = masked_argmax(g, row->out_logits);
    } else if (g->want == FRIGG_WANT_SAMPLE) {
        /* the row of a sampled sequence's prefill (or of a grammar state whose mask allowed nothing): the engines'
         * rule (frigg_draw_row) here, with this token's uniform; the row was checked finite */
        if (g->gm && grammar_mask_bits(g)) {
            g->done = 1;
            return 1;
        }
        next = frigg_draw_row(row->out_logits, V, g->gm ? g->gbits : NULL, g->smp.p.temperature,
                              frigg_rng_uniform(g->smp.s));
        if (next < 0) { /* cannot happen for a finite row and a mask that allows a token; never silent */
            g->error = frigg_xstrdup("the sampled draw found no token");
            g->done = 1;
            return 1;
        }
    } else {
        /* The penalties count the ids generated so far in this choice (g->ids: never the prompt, never a stop
         * id, which ends the sequence). They and the bias change the work copy; the row stays the model's. */
        float *w = row->out_logits;
        if (g->work) {
            memcpy(g->work, row->out_logits, (size_t)V * sizeof(float));
            w = g->work;
        }
        if (g->gm && grammar_mask(g, w)) {
            g->done = 1;
            return 1;
        }
        next = frigg_sample(&g->smp, w, g->ids, g->r.n);
        if (g->gm && !(g->gbits[next >> 5] >> (next & 31) & 1u)) next = masked_argmax(g, w);
        /* logprobs describe the model's own distribution (raw logits, temperature 1, no penalty or bias). */
        if (k) {
            g->token_logprob[g->r.n] = frigg_logprob_of(row->out_logits, V, next);
            frigg_top_logprobs(row->out_logits, V, k, g->top_ids + (size_t)g->r.n * k,
                               g->top_lps + (size_t)g->r.n * k);
        }
    }
    if (g->r.n == 0) g->r.first_token_ms = frigg_now_ms() - g->t_admit;
    g->last = next;
    if (is_stop_id(g, next) || (g->gm && frigg_gvocab_is_end(frigg_gref_vocab(g->p.grammar), next))) {
        g->r.finish_reason = "stop";
        g->done = 1;
        return 1;
    }
    if (!g->gm && g->p.grammar && g->p.lazy_grammar && next == g->p.grammar_trigger) {
        /* the grammar starts after this token: every later step is masked (greedy rows carry the mask, a sampled
         * draw takes the whole row); the row buffer also serves a greedy step whose state allows no token, which
         * frigg_seqgen_row sends for the whole row so that accept reports it */
        g->gm = frigg_gmatcher_new(frigg_gref_grammar(g->p.grammar));
        if (!g->logits) g->logits = frigg_xmalloc(sizeof(float) * (size_t)V);
        if (!g->mask_greedy && g->want != FRIGG_WANT_SAMPLE) { /* this draw needs the whole row; greedy and engine-drawn
                                                                 rows carry the mask instead */
            g->want = FRIGG_WANT_LOGITS;
            g->k = 0;
            if (!g->work) g->work = frigg_xmalloc(sizeof(float) * (size_t)V);
        }
    } else if (g->gm && frigg_gmatcher_advance_token(g->gm, frigg_gref_vocab(g->p.grammar), next)) {
        char msg[160]; /* the mask allowed it: the recogniser and the masker disagree */
        snprintf(msg, sizeof msg, "structured output: token %d was allowed by the grammar's mask but its recogniser "
                 "refuses it (step %d)", (int)next, g->r.n);
        g->error = frigg_xstrdup(msg);
        g->done = 1;
        return 1;
    }
    g->ids[g->r.n++] = next;
    if (g->ds) {
        char *p = NULL;
        size_t n = 0;
        if (frigg_detok_stream_push(g->ds, next, &p, &n) == 0) {
            if (text_feed(g, p ? p : "", n, &plen)) {
                g->stopped = 1;
                g->r.finish_reason = "stop";
                g->done = 1;
            }
        }
        free(p);
    }
    *piece = g->piece;
    *piece_len = plen;
    if (!g->done && g->gm && frigg_gmatcher_is_done(g->gm)) { /* only the end is left: the document is whole */
        g->r.finish_reason = "stop";
        g->done = 1;
    }
    if (!g->done && g->r.n >= g->p.max_tokens) g->done = 1;
    return g->done;
}

int frigg_seqgen_done(const frigg_seqgen *g) { return g->done; }

int frigg_seqgen_check_prompt(const frigg_backend *b, const int32_t *ids, int n, int max_tokens, int prefix_len) {
    int V = b->model->cfg.vocab_size;
    if (n < 1) {
        frigg_set_error("empty prompt");
        return -1;
    }
    if ((long)n + max_tokens > b->max_ctx) {
        frigg_set_error("prompt (%d tokens) + max_tokens (%d) = %ld exceeds the context limit of %d tokens", n,
                        max_tokens, (long)n + max_tokens, b->max_ctx);
        return -1;
    }
    if (prefix_len < 0 || prefix_len > n) {
        frigg_set_error("prefix_tokens (%d) is longer than the prompt (%d tokens)", prefix_len, n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) {
            frigg_set_error("token id %d is outside the vocabulary [0, %d)", ids[i], V);
            return -1;
        }
    return 0;
}

void frigg_seqgen_take_output(frigg_seqgen *dst, const frigg_seqgen *src) {
    dst->out_id = src->out_id;
    if (dst->vals && src->vals && dst->k == src->k) {
        memcpy(dst->vals, src->vals, sizeof(float) * (size_t)src->k);
        memcpy(dst->cand, src->cand, sizeof(int32_t) * (size_t)src->k);
    }
    if (dst->logits && src->logits) memcpy(dst->logits, src->logits, sizeof(float) * (size_t)src->vocab);
}

void frigg_seqgen_finish(frigg_seqgen *g, int cancelled, const char **piece, size_t *piece_len) {
    size_t plen = 0;
    if (!g->piece) g->piece = frigg_xmalloc(1);
    g->piece[0] = 0;
    if (!g->finished && g->ds && !g->stopped) {
        /* flush the detokenizer, then release what the stop matcher held back */
        char *tail = NULL;
        size_t tl = 0;
        frigg_detok_stream_finish(g->ds, &tail, &tl);
        if (text_feed(g, tail ? tail : "", tl, &plen)) g->stopped = 1;
        free(tail);
        if (g->ss && !g->stopped) {
            tail = NULL;
            tl = 0;
            frigg_stopstr_flush(g->ss, &tail, &tl);
            size_t start = g->len;
            text_append(g, tail ? tail : "", tl);
            free(tail);
            g->piece = realloc(g->piece, plen + tl + 1);
            if (!g->piece) abort();
            memcpy(g->piece + plen, g->text + start, tl);
            plen += tl;
            g->piece[plen] = 0;
            if (frigg_stopstr_matched(g->ss)) g->stopped = 1;
        }
        if (g->stopped) g->r.finish_reason = "stop";
    }
    if (!g->finished && g->p.parse_tools && g->ds) {
        char *content = NULL;
        size_t content_len = 0;
        /* length-aware: generated text may hold NUL bytes (a call after one must still be found) */
        json_t *calls = frigg_parse_tool_calls_n(g->text ? g->text : "", g->text ? g->len : 0, &content, &content_len);
        if (calls) {
            if (json_array_size(calls)) g->tool_calls = calls;
            else json_decref(calls);
            /* the text becomes the content outside the calls */
            free(g->text);
            g->text = content ? content : frigg_xstrdup("");
            g->len = content ? content_len : 0;
            g->cap = g->len + 1;
        } else {
            g->tool_call_error = frigg_xstrdup(frigg_error());
        }
    }
    if (cancelled) g->r.finish_reason = "cancelled";
    g->finished = 1;
    g->done = 1;
    g->r.decode_ms = g->t_prefill > 0 ? frigg_now_ms() - g->t_prefill : 0;
    if (piece) *piece = g->piece;
    if (piece_len) *piece_len = plen;
}

const frigg_seqgen_result *frigg_seqgen_result_of(const frigg_seqgen *g) {
    frigg_seqgen_result *r = (frigg_seqgen_result *)&g->r;
    r->text = g->text ? g->text : "";
    r->text_len = g->len;
    r->tool_calls = g->tool_calls;
    r->tool_call_error = g->tool_call_error;
    return r;
}

void frigg_seqgen_mark(frigg_seqgen *g, double queued, double admitted, double prefilled) {
    g->t_admit = admitted;
    g->r.queue_ms = admitted - queued;
    g->r.prefill_ms = prefilled - admitted;
    g->t_prefill = prefilled;
}
