/* kl.c — see kl.h. */
#include "kl.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nll.h"
#include "run/scheduler.h"
#include "base/util.h"

static int argmax(const float *row, int vocab) {
    int best = 0;
    for (int i = 1; i < vocab; i++)
        if (row[i] > row[best]) best = i; /* strict: the lowest id on ties */
    return best;
}

void frigg_kl_score(const float *ref_all, const float *model_all, int vocab, const int32_t *ids, int n, int prefix,
                    double *kl_tok, frigg_kl_seq *out) {
    *out = (frigg_kl_seq){.targets = n - prefix, .kl_tok = kl_tok};
    for (int t = prefix; t < n; t++) {
        const float *r = ref_all + (size_t)(t - 1) * vocab, *m = model_all + (size_t)(t - 1) * vocab;
        double lr = frigg_logsumexp(r, vocab), lm = frigg_logsumexp(m, vocab), kl = 0;
        for (int i = 0; i < vocab; i++) {
            double lp = (double)r[i] - lr, lq = (double)m[i] - lm, p = exp(lp);
            if (p > 0) kl += p * (lp - lq);
        }
        kl_tok[t - prefix] = kl;
        out->kl_sum += kl;
        if (kl > out->kl_max) out->kl_max = kl;
        int ar = argmax(r, vocab), am = argmax(m, vocab);
        if (ar == am) out->top1_agree++;
        else {
            double gap = (double)r[ar] - (double)r[am];
            if (gap == 0) out->top1_ties++;
            out->gap_sum += gap;
            if (gap > out->gap_max) out->gap_max = gap;
        }
        out->nll_ref += lr - r[ids[t]];
        out->nll_model += lm - m[ids[t]];
    }
}

/* ---- the run: each sequence through the reference's scheduler, then the model's ---- */

typedef struct run run;

typedef struct {
    run *R;
    int k;
    float *ref;    /* the reference's logits, from its step to the model's */
    double *kl_tok;
    frigg_kl_seq res;
    char *err;
    int done;
} item;

struct run {
    const frigg_eval_seq *seqs;
    item *items;
    frigg_sched *rs, *ms;
    int vocab, in_flight;
};

static void fail(item *it, const char *msg) {
    if (!it->err) it->err = frigg_xstrdup(msg);
}

static void finish(item *it) {
    free(it->ref);
    it->ref = NULL;
    it->done = 1;
    it->R->in_flight--;
}

static void on_model_logits(void *ctx, const float *all, int n, int vocab) {
    item *it = ctx;
    const frigg_eval_seq *s = &it->R->seqs[it->k];
    (void)n;
    if (frigg_logits_check_finite(all, vocab, s->n, s->prefix)) {
        char msg[400];
        snprintf(msg, sizeof msg, "the model: %s", frigg_error());
        fail(it, msg);
        return;
    }
    it->kl_tok = frigg_xmalloc(sizeof(double) * (size_t)(s->n - s->prefix));
    frigg_kl_score(it->ref, all, vocab, s->ids, s->n, s->prefix, it->kl_tok, &it->res);
}

static void on_model_done(void *ctx, const frigg_sched_result *res) {
    item *it = ctx;
    if (res->error) fail(it, res->error);
    else if (!it->kl_tok && !it->err) fail(it, "the model did not score the sequence (cancelled)");
    finish(it);
}

static void on_ref_logits(void *ctx, const float *all, int n, int vocab) {
    item *it = ctx;
    const frigg_eval_seq *s = &it->R->seqs[it->k];
    if (frigg_logits_check_finite(all, vocab, s->n, s->prefix)) {
        char msg[400];
        snprintf(msg, sizeof msg, "the reference: %s", frigg_error());
        fail(it, msg);
        return;
    }
    size_t nb = sizeof(float) * (size_t)n * (size_t)vocab;
    it->ref = malloc(nb);
    if (!it->ref) {
        char msg[160];
        snprintf(msg, sizeof msg, "out of memory keeping the reference's %d x %d logits", n, vocab);
        fail(it, msg);
        return;
    }
    memcpy(it->ref, all, nb);
}

static void on_ref_done(void *ctx, const frigg_sched_result *res) {
    item *it = ctx;
    if (res->error) fail(it, res->error);
    else if (!it->ref && !it->err) fail(it, "the reference did not score the sequence (cancelled)");
    if (it->err) {
        finish(it);
        return;
    }
    const frigg_eval_seq *s = &it->R->seqs[it->k];
    frigg_sched_req q = {.ids = s->ids, .n = s->n, .prefix_len = s->prefix, .n_choices = 1, .score = 1,
                         .on_logits = on_model_logits, .on_done = on_model_done, .ctx = it};
    if (!frigg_sched_submit(it->R->ms, &q)) { /* on_done is not called */
        fail(it, frigg_error());
        finish(it);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int frigg_kl_run(frigg_backend *ref, frigg_backend *model, const frigg_eval_seq *seqs, int nseqs, int parallel,
                 void (*on_seq)(void *ctx, int k, const frigg_kl_seq *r), void *ctx, frigg_kl_summary *out) {
    *out = (frigg_kl_summary){0};
    int V = ref->model->cfg.vocab_size;
    if (model->model->cfg.vocab_size != V) {
        frigg_set_error("kl: the reference has a vocabulary of %d and the model of %d: they cannot be compared", V,
                        model->model->cfg.vocab_size);
        return -1;
    }
    if (parallel < 1) parallel = 1;
    run R = {.seqs = seqs, .vocab = V};
    R.rs = frigg_sched_new(ref, NULL, parallel);
    R.ms = R.rs ? frigg_sched_new(model, NULL, parallel) : NULL;
    if (!R.ms) {
        frigg_sched_free(R.rs);
        return -1;
    }
    R.items = frigg_xcalloc(nseqs > 0 ? (size_t)nseqs : 1, sizeof *R.items);
    long total = 0;
    for (int k = 0; k < nseqs; k++) total += seqs[k].n - seqs[k].prefix > 0 ? seqs[k].n - seqs[k].prefix : 0;
    double *all = frigg_xmalloc(sizeof(double) * (size_t)(total > 0 ? total : 1));
    long nall = 0;
    double kl = 0, nr = 0, nm = 0, gaps = 0;
    int next = 0, head = 0;
    while (head < nseqs) {
        while (next < nseqs && R.in_flight < parallel) {
            item *it = &R.items[next];
            *it = (item){.R = &R, .k = next};
            R.in_flight++;
            const frigg_eval_seq *s = &seqs[next++];
            if (frigg_nll_check(s->n, s->prefix)) {
                fail(it, frigg_error());
                finish(it);
                continue;
            }
            frigg_sched_req q = {.ids = s->ids, .n = s->n, .prefix_len = s->prefix, .n_choices = 1, .score = 1,
                                 .on_logits = on_ref_logits, .on_done = on_ref_done, .ctx = it};
            if (!frigg_sched_submit(R.rs, &q)) {
                fail(it, frigg_error());
                finish(it);
            }
        }
        int pr = frigg_sched_pending(R.rs), pm = frigg_sched_pending(R.ms);
        if (pr > 0) frigg_sched_step(R.rs); /* a failed step ended its requests with the error */
        if (pm > 0 || frigg_sched_pending(R.ms) > 0) frigg_sched_step(R.ms);
        for (; head < nseqs && R.items[head].done; head++) {
            item *it = &R.items[head];
            if (it->err) {
                frigg_kl_seq e = {.error = it->err};
                if (on_seq) on_seq(ctx, head, &e);
                out->failed++;
            } else {
                if (on_seq) on_seq(ctx, head, &it->res);
                memcpy(all + nall, it->kl_tok, sizeof(double) * (size_t)it->res.targets);
                nall += it->res.targets;
                kl += it->res.kl_sum;
                nr += it->res.nll_ref;
                nm += it->res.nll_model;
                out->top1_agree += it->res.top1_agree;
                out->top1_ties += it->res.top1_ties;
                if (it->res.kl_max > out->kl_max) out->kl_max = it->res.kl_max;
                if (it->res.gap_max > out->gap_max) out->gap_max = it->res.gap_max;
                gaps += it->res.gap_sum;
                out->sequences++;
            }
            free(it->kl_tok);
            free(it->err);
            it->kl_tok = NULL, it->err = NULL;
        }
        /* cannot happen (every submitted request ends through its on_done), but never loop forever */
        if (R.in_flight > 0 && frigg_sched_pending(R.rs) == 0 && frigg_sched_pending(R.ms) == 0) {
            frigg_set_error("kl: sequence %d never finished", head);
            break;
        }
    }
    frigg_sched_free(R.rs); /* ends anything still queued (only after the break above) */
    frigg_sched_free(R.ms);
    for (int k = head; k < nseqs; k++) {
        free(R.items[k].ref);
        free(R.items[k].kl_tok);
        free(R.items[k].err);
    }
    int broke = head < nseqs;
    free(R.items);
    out->tokens = nall;
    if (nall) {
        out->kl_mean = kl / (double)nall;
        out->top1 = (double)out->top1_agree / (double)nall;
        out->top1_with_ties = (double)(out->top1_agree + out->top1_ties) / (double)nall;
        out->nll_ref = nr / (double)nall;
        out->nll_model = nm / (double)nall;
        out->gap_mean = out->top1_agree < nall ? gaps / (double)(nall - out->top1_agree) : 0;
        qsort(all, (size_t)nall, sizeof *all, cmp_double);
        long r = (long)ceil(0.99 * (double)nall);
        out->kl_p99 = all[(r < 1 ? 1 : r) - 1];
    }
    free(all);
    if (broke) return -1;
    return out->failed;
}

/* ---- a text as sequences ---- */

int frigg_eval_text_seqs(const frigg_tokenizer *tok, const char *text, size_t len, int32_t bos, int ctx, int limit,
                         frigg_eval_seq **out, int *n) {
    *out = NULL, *n = 0;
    if (ctx < 2) {
        frigg_set_error("a sequence of %d tokens has no room for bos and one scored token", ctx);
        return -1;
    }
    int cap = 0, cnt = 0;
    frigg_eval_seq *s = NULL;
    size_t pos = 0;
    long lineno = 0;
    while (pos < len && (limit <= 0 || cnt < limit)) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        const char *line = text + pos;
        size_t ll = end - pos;
        pos = end + 1;
        lineno++;
        if (ll && line[ll - 1] == '\r') ll--;
        size_t blank = 0;
        while (blank < ll && (line[blank] == ' ' || line[blank] == '\t')) blank++;
        if (blank == ll) continue;
        int32_t *ids = NULL;
        size_t ni = 0;
        if (frigg_tokenizer_encode(tok, line, ll, &ids, &ni)) {
            char msg[400];
            snprintf(msg, sizeof msg, "line %ld: %s", lineno, frigg_error());
            frigg_set_error("%s", msg);
            frigg_eval_seqs_free(s, cnt);
            return -1;
        }
        for (size_t o = 0; o < ni && (limit <= 0 || cnt < limit); o += (size_t)(ctx - 1)) {
            size_t piece = ni - o < (size_t)(ctx - 1) ? ni - o : (size_t)(ctx - 1);
            if (cnt == cap) s = frigg_xrealloc(s, sizeof *s * (size_t)(cap = cap ? 2 * cap : 64));
            frigg_eval_seq *q = &s[cnt++];
            q->n = (int)piece + 1;
            q->prefix = 1;
            q->ids = frigg_xmalloc(sizeof(int32_t) * (size_t)q->n);
            q->ids[0] = bos;
            memcpy(q->ids + 1, ids + o, sizeof(int32_t) * piece);
        }
        free(ids);
    }
    if (!cnt) {
        frigg_set_error("the text has no line to score");
        free(s);
        return -1;
    }
    *out = s, *n = cnt;
    return 0;
}

void frigg_eval_seqs_free(frigg_eval_seq *s, int n) {
    for (int i = 0; s && i < n; i++) free(s[i].ids);
    free(s);
}

int frigg_tokenizers_match(const frigg_tokenizer *a, const frigg_tokenizer *b) {
    int na = frigg_tokenizer_vocab_size(a), nb = frigg_tokenizer_vocab_size(b);
    if (na != nb) {
        frigg_set_error("the tokenizers differ: %d and %d tokens", na, nb);
        return -1;
    }
    for (int i = 0; i < na; i++) {
        const char *x = frigg_tokenizer_id_to_token(a, i), *y = frigg_tokenizer_id_to_token(b, i);
        if (!x != !y || (x && strcmp(x, y))) {
            frigg_set_error("the tokenizers differ at id %d (\"%s\" and \"%s\")", i, x ? x : "(none)", y ? y : "(none)");
            return -1;
        }
    }
    return 0;
}

char *frigg_heldout_text_path(void) { return frigg_bundled_path("heldout.txt"); }
