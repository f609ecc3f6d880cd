/* kl.h — teacher-forced comparison of a model with a reference on the same token sequences: per target token
 * KL(ref || model) of the two next-token distributions, whether their top-1 ids agree, and the NLL of the
 * actual next token under each. frigg-eval kl and frigg-quantize --check both run frigg_kl_run; the text they
 * score is cut into sequences by frigg_eval_text_seqs.
 *
 * The figures of one target position t (row t - 1 of each model's logits predicts token t), all in fp64 from
 * the engines' bf16-valued logits r (reference) and m (model):
 *   lp_i = r_i - lse(r),  lq_i = m_i - lse(m)      (lse: log-sum-exp, frigg_logsumexp)
 *   KL_t = sum_i exp(lp_i) * (lp_i - lq_i)          (nats; exactly 0 when the rows are equal)
 *   top-1 agreement: argmax r == argmax m (the lowest id on ties, as the engines' greedy pick); where they
 *     disagree, the gap r[argmax r] - r[argmax m] (>= 0: how far the reference preferred its own top-1 over
 *     the model's, in logits, which is also the log-probability difference) says whether it was a near tie; a
 *     gap of 0 is a tie in the reference itself (two ids share its top logit, as bf16 logits often do on a
 *     flat distribution), which the lowest-id rule settles for the reference and any perturbation may
 *     settle otherwise for the model: counted as top1_ties, and the agreement with ties counts them as agreeing
 *   NLL_t(ref) = -lp_{ids[t]},  NLL_t(model) = -lq_{ids[t]}
 * A run's summary: the mean of KL_t over all target tokens of all sequences, its p99 (nearest rank: the
 * ceil(0.99 N)-th smallest of the N values) and maximum, the fraction of positions whose top-1 ids agree, and
 * the mean NLL of each model (perplexity exp of it), and the largest and the mean gap of the disagreements. Sums are taken in input order, so the summary does not
 * depend on how many sequences ran at once. */
#ifndef FRIGG_KL_H
#define FRIGG_KL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    int32_t *ids; /* owned (frigg_eval_seqs_free) */
    int n, prefix; /* tokens [0, prefix) are the bidirectional prefix; [prefix, n) are scored */
} frigg_eval_seq;

/* One sequence's figures. kl_tok (targets values) is valid during the on_seq callback only. */
typedef struct {
    int targets;
    double kl_sum, kl_max;
    int top1_agree;
    int top1_ties;             /* disagreements at gap 0: the model's top-1 has the reference's top logit too */
    double gap_max, gap_sum;   /* over the positions whose top-1 ids disagree */
    double nll_ref, nll_model; /* sums over the targets */
    const double *kl_tok;
    const char *error; /* non-NULL: the sequence failed (nothing else is set) */
} frigg_kl_seq;

typedef struct {
    int sequences, failed;
    long tokens, top1_agree, top1_ties;
    double kl_mean, kl_p99, kl_max, top1;
    double top1_with_ties;     /* (top1_agree + top1_ties) / tokens */
    double gap_max, gap_mean;  /* the disagreements' gaps: the largest, and the mean (0 when none) */
    double nll_ref, nll_model; /* means per target token */
} frigg_kl_summary;

/* The figures of one sequence from both models' n * vocab logits; kl_tok receives n - prefix values. */
void frigg_kl_score(const float *ref_all, const float *model_all, int vocab, const int32_t *ids, int n, int prefix,
                    double *kl_tok, frigg_kl_seq *out);

/* Score every sequence on both engines (each through its own scheduler as score requests, up to `parallel`
 * sequences in flight; both engines need max_seqs >= parallel and the same vocabulary). A sequence's reference
 * logits are kept (n * vocab floats) from its reference step until its model step. on_seq (may be NULL) is
 * called once per sequence, in input order. Returns the number of failed sequences (their error in on_seq;
 * the summary covers the rest), or -1 with frigg_error() when nothing could run. */
int frigg_kl_run(frigg_backend *ref, frigg_backend *model, const frigg_eval_seq *seqs, int nseqs, int parallel,
                 void (*on_seq)(void *ctx, int k, const frigg_kl_seq *r), void *ctx, frigg_kl_summary *out);

/* A text cut into sequences: each line with something other than spaces is encoded on its own (no special
 * tokens added), its ids cut into pieces of at most ctx - 1, and each piece becomes {bos, piece...} with
 * prefix 1 (bos alone is the prefix: every token of the piece is scored causally). At most `limit` sequences
 * (0: all). 0 with *out (malloc'd) and *n, or -1 with frigg_error() (text not UTF-8, ctx < 2, no sequence). */
int frigg_eval_text_seqs(const frigg_tokenizer *tok, const char *text, size_t len, int32_t bos, int ctx, int limit,
                         frigg_eval_seq **out, int *n);
void frigg_eval_seqs_free(frigg_eval_seq *s, int n);

/* 0 when both tokenizers have the same vocabulary (size, and the same token string at every id), else -1
 * with frigg_error() naming the first difference. */
int frigg_tokenizers_match(const frigg_tokenizer *a, const frigg_tokenizer *b);

/* The held-out text frigg-quantize --check scores by default: heldout.txt of the bundled default model
 * (golden/default, or share/frigg/default when installed), found next to the executable as
 * frigg_default_model_dir finds the model, but never through $FRIGG_MODEL. A new string; the path may not
 * exist. */
char *frigg_heldout_text_path(void);

#endif
