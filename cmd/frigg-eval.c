/* frigg-eval — evaluations, JSON lines out. Three modes, each on either engine (--backend cpu|cuda):
 *   nll    teacher-forced negative log-likelihood of continuations (JSON lines of token ids in);
 *   kl     a model against a reference, teacher-forced on a text (or on nll's JSON lines): KL(ref || model) per
 *          token, top-1 agreement and both NLLs (common/eval/kl.h, the code frigg-quantize --check runs);
 *   gsm8k  the GSM8K test split, greedy, few-shot or zero-shot or through the chat template, exact match on the
 *          final number (common/eval/gsm8k.h).
 * Every mode runs its sequences through the scheduler (score requests for nll and kl, generation for gsm8k),
 * up to --parallel at once, and prints its lines in input order. See man/frigg-eval.1. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/backend.h"
#include "chat/chat.h"
#include "run/cli.h"
#include "model/config.h"
#include "run/generate.h"
#include "run/linein.h"
#include "run/memcheck.h"
#include "run/progress.h"
#include "eval/gsm8k.h"
#include "eval/kl.h"
#include "model/model.h"
#include "eval/nll.h"
#include "run/scheduler.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"

#define PROG "frigg-eval"
/* Sequences scored at once by default: each holds its n * vocab logits for its step (1 MiB per token at
 * Mimir's vocabulary of 262,144), so fewer than frigg-run's 8. */
#define EVAL_DEFAULT_PARALLEL 4
#define GSM8K_DEFAULT_PARALLEL 8 /* gsm8k generates: only the prompt's last row's logits are kept */
#define GSM8K_DEFAULT_MAX_TOKENS 256
#define GSM8K_STOP "\n\nQuestion:"
#define GSM8K_MAX_SHOTS 5
#define KL_DEFAULT_CTX 512
/* nll's stdin, read on a thread of its own (run/linein.h) so that a line is scored and answered before the next
 * arrives: at most this many lines and bytes (one line always let in) are read ahead. */
#define NLL_LINE_MAX (1L << 30)
#define NLL_READ_AHEAD_LINES 64
#define NLL_READ_AHEAD_BYTES (64L << 20)

static void usage(FILE *f) {
    fprintf(f,
            "usage: frigg-eval nll   [COMMON] [--ctx N] < seqs.jsonl\n"
            "       frigg-eval kl    --ref DIR [COMMON] [--ref-backend B] [--ref-kv-dtype T] [--ref-precision P]\n"
            "                        [--text FILE | --jsonl FILE | < text] [--ctx N] [--limit N]\n"
            "       frigg-eval gsm8k [COMMON] [--data FILE] [--limit N] [--shots 0..5 | --chat] [--max-tokens N]\n"
            "COMMON: [-m|--model DIR] [-b|--backend cpu|cuda] [-t|--threads N] [-d|--device N] [-P|--parallel N]\n"
            "        [--kv-dtype bf16|int8] [--precision bf16|fp32] [--dequant-rows N|off] [--progress]\n"
            "        [-h|--help] [--version]\n"
            "  --progress: nll and kl keep a progress line on stderr current, as on a terminal (else one every 30 s;\n"
            "       gsm8k's are always printed)\n"
            "  nll: each line {\"input_ids\":[...],\"prefix_tokens\":P[,\"id\":...]}; the tokens after the first P are\n"
            "       scored given everything before them (the first P attend bidirectionally). Out: one\n"
            "       {\"nll_sum\",\"target_tokens\"} per line, in input order, then {\"summary\":{nll_mean,perplexity,...}}.\n"
            "       --ctx N: tokens a sequence may hold (default: the model's context; each of the --parallel\n"
            "       engine slots reserves its KV cache for N tokens, so a smaller N fits a smaller machine).\n"
            "  kl:  the model (--model) against the reference (--ref; same tokenizer), teacher-forced: each non-blank\n"
            "       line of the text encoded, cut into pieces of at most --ctx - 1 tokens (default %d, at most the\n"
            "       models' context), each scored after <bos>; or nll's JSON lines (--jsonl). Out: one line per\n"
            "       sequence, then {\"summary\":{kl_mean,kl_p99,top1_agreement,nll_ref,nll_model,...}}.\n"
            "  gsm8k: greedy, \"Question: ...\\nAnswer:\" after --shots exemplars (test items 0-4: the data has no\n"
            "       train split; not scored when used), or --chat (the chat template, zero-shot); stop at\n"
            "       \"\\n\\nQuestion:\", an end-of-turn id or --max-tokens (default %d). Out: one line per item, then\n"
            "       {\"summary\":{accuracy,ci95 (Wilson),invalid,tok_s,wall_s,...}}; progress on stderr.\n"
            "  -P, --parallel N: sequences at once (default %d for nll and kl, %d for gsm8k)\n",
            KL_DEFAULT_CTX, GSM8K_DEFAULT_MAX_TOKENS, EVAL_DEFAULT_PARALLEL, GSM8K_DEFAULT_PARALLEL);
}

/* ---- options ---- */

typedef struct {
    const char *mode;
    const char *model, *backend, *ref, *ref_backend, *text, *jsonl, *data;
    int threads, device, parallel, ctx, limit, shots, chat, max_tokens;
    int progress; /* --progress: nll's and kl's progress line kept current whatever stderr is */
    /* --precision / --ref-precision fp32: that engine is the CPU engine's fp32 reference
     * (frigg_backend_opts.fp32_reference); ref_fp32 -1: as the model's */
    int fp32, ref_fp32;
    int dequant_rows; /* --dequant-rows: frigg_backend_opts.dequant_rows of every engine (0: the default) */
    frigg_dtype kv, ref_kv;
} eval_opts;

static const char *precision_name(int fp32) { return fp32 ? "fp32" : "bf16"; }

static const char *kv_name(frigg_dtype t) { return frigg_dtype_name(t); }

/* An engine for a loaded model m (freed with the engine's failure: *mp is then NULL). */
static frigg_backend *make_backend(frigg_model **mp, const char *backend, const eval_opts *o, frigg_dtype kv, int fp32,
                                   int max_ctx) {
    frigg_backend_opts bo = {.threads = o->threads, .device = o->device, .max_seqs = o->parallel, .max_ctx = max_ctx,
                             .kv_dtype = kv, .fp32_reference = fp32,
                             .dequant_rows = o->dequant_rows};
    frigg_backend *b = frigg_backend_create(backend, *mp, &bo);
    if (!b) {
        frigg_model_free(*mp);
        *mp = NULL;
    }
    return b;
}

/* The memory plan of an engine of --parallel sequences of ctx tokens (0: the model's context) for m, and the score
 * logits the caller keeps beside it: `logit_sets` sets of --parallel sequences x ctx x vocab floats (nll: the
 * scheduler's; kl: both schedulers' and the reference's kept ones). */
static frigg_mem_plan mem_plan(const char *what, const frigg_model *m, const char *backend, const eval_opts *o,
                               frigg_dtype kv, int ctx, int logit_sets) {
    const frigg_config *c = &m->cfg;
    const int n = ctx > 0 ? ctx : c->max_position_embeddings;
    return (frigg_mem_plan){.what = what, .cfg = c, .engine = backend, .device = o->device, .seqs = o->parallel,
                            .ctx = n, .kv_dtype = kv, .weights = frigg_mem_weights(backend, m, o->dequant_rows),
                            .extra = (double)logit_sets * o->parallel * n * c->vocab_size * sizeof(float),
                            .extra_what = "score logits"};
}

/* Load the model and check its engine's memory (mem_plan's; refused with what to lower), then create it. */
static frigg_backend *open_backend(const char *dir, const char *backend, const eval_opts *o, frigg_dtype kv, int fp32,
                                   int max_ctx, int logit_sets, const char *lower, frigg_model **mp) {
    *mp = frigg_model_load(dir);
    if (!*mp) return NULL;
    frigg_mem_plan p = mem_plan(NULL, *mp, backend, o, kv, max_ctx, logit_sets);
    if (max_ctx <= (*mp)->cfg.max_position_embeddings && frigg_mem_check(&p, 1, lower)) {
        frigg_model_free(*mp);
        *mp = NULL;
        return NULL;
    }
    return make_backend(mp, backend, o, kv, fp32, max_ctx);
}

/* The tokenizer of a model directory: 1 loaded, 0 the directory has none, -1 error. */
static int load_tokenizer(const char *dir, frigg_tokenizer **tok) {
    char *p = frigg_model_side_path(dir, "tokenizer.json"); /* a GGUF's: beside the file */
    *tok = NULL;
    int rc = 0;
    if (frigg_file_exists(p)) rc = (*tok = frigg_tokenizer_load(p, 0)) ? 1 : -1;
    free(p);
    return rc;
}

static int load_config(const char *dir, frigg_config *c) { return frigg_model_config_load(dir, c); }

/* o NULL: a json_pack that failed (jansson refuses a NaN or an infinity as a real), which the checks before
 * it are to rule out; an error line rather than a crash if one slips through. */
static void print_json(json_t *o) {
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    puts(s ? s : "{\"error\":{\"message\":\"frigg-eval: a line could not be written as JSON (a value is not finite)\"}}");
    fflush(stdout);
    free(s);
    json_decref(o);
}

/* One nll-format line parsed: 0 with the ids (malloc'd), or -1 with *err. */
static int parse_seq_line(const char *line, int vocab, int32_t **ids_out, int *n_out, int *prefix_out, json_t **id_out,
                          const char **err) {
    json_error_t je;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &je);
    json_t *ids = o ? json_object_get(o, "input_ids") : NULL, *P = o ? json_object_get(o, "prefix_tokens") : NULL;
    json_t *id = o ? json_object_get(o, "id") : NULL;
    *err = !o ? "invalid JSON" : !json_is_array(ids) ? "\"input_ids\" must be an array"
                              : !json_is_integer(P) ? "\"prefix_tokens\" must be an integer" : NULL;
    if (!*err) { /* an unknown field is an error, never ignored */
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) if (strcmp(key, "input_ids") && strcmp(key, "prefix_tokens") && strcmp(key, "id")) {
            *err = "unknown field (nll lines take input_ids, prefix_tokens, id)";
            break;
        }
    }
    int n = (int)json_array_size(ids);
    int32_t *buf = frigg_xmalloc(sizeof(int32_t) * (n ? n : 1));
    for (int i = 0; !*err && i < n; i++) {
        json_t *e = json_array_get(ids, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= vocab)
            *err = "\"input_ids\" must hold token ids inside the vocabulary";
        else buf[i] = (int32_t)json_integer_value(e);
    }
    json_int_t pv = P ? json_integer_value(P) : 0;
    int prefix = pv < INT_MIN ? INT_MIN : pv > INT_MAX ? INT_MAX : (int)pv; /* beyond int: refused all the same */
    if (!*err && frigg_nll_check(n, prefix)) *err = frigg_error();
    *id_out = id ? json_incref(id) : NULL;
    json_decref(o);
    if (*err) {
        free(buf);
        return -1;
    }
    *ids_out = buf, *n_out = n, *prefix_out = prefix;
    return 0;
}

/* ==== nll ==== */

/* The answers of the lines read so far: ans[k % cap] is the k-th scored line's once it is known. Lines
 * are read while the scheduler has room and fewer than cap answers wait to be printed; they are printed
 * (and summed, so the summary does not depend on --parallel) in input order. */
typedef struct {
    json_t *out; /* the line's output object; NULL until answered */
    double nll;
    int targets, ok;
} answer;

typedef struct {
    answer *ans;
    long cap, head, next; /* head: the next answer to print; next: the next line's index */
    double total;
    int total_targets, seqs, bad;
    frigg_progress *pr; /* one unit per answer printed */
} runner;

typedef struct {
    runner *r;
    long k, lineno;
    int32_t *ids;
    int n, prefix;
    json_t *id; /* the line's "id" (a reference), or NULL */
    double nll;
    int scored;
    char *err; /* the logits were not finite: the line's error */
} line_ctx;

static void put(runner *r, long k, json_t *out, json_t *id, double nll, int targets, int ok) {
    /* a NULL out would never be printed and the reading loop would wait for it for ever */
    if (!out) out = json_pack("{s:{s:s}}", "error", "message", "the answer could not be written as JSON"), ok = 0;
    if (id) json_object_set(out, "id", id);
    r->ans[k % r->cap] = (answer){.out = out, .nll = nll, .targets = targets, .ok = ok};
}

static void put_error(runner *r, long k, long lineno, const char *msg, json_t *id) {
    put(r, k, json_pack("{s:{s:s,s:I}}", "error", "message", msg, "line", (json_int_t)lineno), id, 0, 0, 0);
}

static void on_logits(void *vctx, const float *all, int n, int vocab) {
    line_ctx *lc = vctx;
    if (frigg_logits_check_finite(all, vocab, n, lc->prefix)) {
        lc->err = frigg_xstrdup(frigg_error());
        return;
    }
    lc->nll = frigg_nll_sum(all, vocab, lc->ids, n, lc->prefix);
    lc->scored = 1;
}

static void on_done(void *vctx, const frigg_sched_result *res) {
    line_ctx *lc = vctx;
    if (res->error) put_error(lc->r, lc->k, lc->lineno, res->error, lc->id);
    else if (lc->err) put_error(lc->r, lc->k, lc->lineno, lc->err, lc->id);
    else if (!lc->scored) put_error(lc->r, lc->k, lc->lineno, "not scored (cancelled)", lc->id);
    else
        put(lc->r, lc->k, json_pack("{s:f,s:i}", "nll_sum", lc->nll, "target_tokens", lc->n - lc->prefix), lc->id,
            lc->nll, lc->n - lc->prefix, 1);
    json_decref(lc->id);
    free(lc->ids);
    free(lc->err);
    free(lc);
}

static void emit_ready(runner *r) {
    while (r->head < r->next && r->ans[r->head % r->cap].out) {
        answer *a = &r->ans[r->head % r->cap];
        char *s = json_dumps(a->out, JSON_COMPACT);
        puts(s);
        fflush(stdout);
        free(s);
        json_decref(a->out);
        if (a->ok) {
            r->total += a->nll;
            r->total_targets += a->targets;
            r->seqs++;
        } else {
            r->bad = 1;
        }
        *a = (answer){.out = NULL};
        r->head++;
        frigg_progress_add(r->pr, 1);
    }
}

/* One input line: its answer now (a bad line) or a score request submitted for it. */
static void read_line(runner *r, frigg_sched *sc, const frigg_model *m, const char *line, long lineno) {
    long k = r->next++;
    int32_t *buf = NULL;
    int n = 0, prefix = 0;
    json_t *id = NULL;
    const char *err = NULL;
    if (parse_seq_line(line, m->cfg.vocab_size, &buf, &n, &prefix, &id, &err)) {
        put_error(r, k, lineno, err, id);
        json_decref(id);
        return;
    }
    line_ctx *lc = frigg_xcalloc(1, sizeof *lc);
    *lc = (line_ctx){.r = r, .k = k, .lineno = lineno, .ids = buf, .n = n, .prefix = prefix, .id = id};
    frigg_sched_req q = {.ids = buf, .n = n, .prefix_len = prefix, .n_choices = 1, .score = 1,
                         .on_logits = on_logits, .on_done = on_done, .ctx = lc};
    if (!frigg_sched_submit(sc, &q)) { /* on_done is not called */
        put_error(r, k, lineno, frigg_error(), id);
        json_decref(lc->id);
        free(lc->ids);
        free(lc);
    }
}

static int run_nll(const eval_opts *o, const char *mdir) {
    frigg_model *m = NULL;
    frigg_backend *b = open_backend(mdir, o->backend, o, o->kv, o->fp32, o->ctx, 1,
                                    o->ctx ? "--parallel or --ctx" : "--parallel, or --ctx (default: the model's context)", &m);
    frigg_sched *sc = b ? frigg_sched_new(b, NULL, o->parallel) : NULL;
    if (!sc) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        frigg_backend_destroy(b);
        frigg_model_free(m);
        return 2;
    }
    frigg_linein *in = frigg_linein_start(stdin, NLL_LINE_MAX, NLL_READ_AHEAD_LINES, NLL_READ_AHEAD_BYTES);
    if (!in) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        frigg_sched_free(sc);
        frigg_backend_destroy(b);
        frigg_model_free(m);
        return 2;
    }
    frigg_progress pr;
    frigg_progress_start(&pr, PROG, "nll", "sequences scored", -1, o->progress); /* stdin: the total is unknown */
    runner rn = {.cap = 4L * o->parallel + 64, .pr = &pr};
    rn.ans = frigg_xcalloc((size_t)rn.cap, sizeof *rn.ans);
    char *line = NULL;
    long len, lineno = 0;
    int eof = 0;
    while (!eof || rn.head < rn.next) {
        /* read while the scheduler has room and the print window is not full; wait for a line only when
         * nothing is left to step (every answer so far is printed) */
        while (!eof && frigg_sched_pending(sc) < o->parallel && rn.next - rn.head < rn.cap) {
            free(line);
            line = NULL;
            int got = frigg_linein_next(in, frigg_sched_pending(sc) == 0, &line, &len);
            if (got == 0) break;
            if (got < 0) {
                eof = 1;
                break;
            }
            lineno++;
            if (line[strspn(line, " \t\r\n")] == 0) continue; /* blank lines, as frigg-run */
            read_line(&rn, sc, m, line, lineno);
            emit_ready(&rn);
        }
        if (frigg_sched_pending(sc) > 0) frigg_sched_step(sc); /* a failed step answered its requests */
        emit_ready(&rn);
    }
    free(line);
    free(rn.ans);
    frigg_progress_end(&pr);
    int rc = rn.bad;
    if (frigg_linein_error(in)) {
        fprintf(stderr, PROG ": reading stdin: %s\n", frigg_linein_error(in));
        rc = 2;
    }
    frigg_linein_free(in);
    if (!rn.next) { /* no line at all: a summary of nothing would read as a perplexity of 1 */
        fprintf(stderr, PROG ": nll: no input: stdin held no sequence line ({\"input_ids\":[...],\"prefix_tokens\":P})\n");
        rc = 2;
    } else {
        /* every line failed (bad lines, logits not finite): no mean to give, so null, never 0 and perplexity 1 */
        json_t *sum = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:f}", "model", mdir, "backend", b->name, "kv_dtype",
                                kv_name(b->kv_dtype), "precision", precision_name(o->fp32), "sequences", rn.seqs,
                                "target_tokens", rn.total_targets, "nll_sum", rn.total);
        double mean = rn.total_targets ? rn.total / rn.total_targets : 0;
        json_object_set_new(sum, "nll_mean", rn.total_targets ? json_real(mean) : json_null());
        json_object_set_new(sum, "perplexity", rn.total_targets ? json_real(exp(mean)) : json_null());
        if (rn.bad) json_object_set_new(sum, "failed", json_integer(rn.next - rn.seqs));
        json_t *top = json_pack("{s:o}", "summary", sum);
        char *str = json_dumps(top, JSON_COMPACT);
        puts(str);
        free(str);
        json_decref(top);
        if (!rn.seqs) fprintf(stderr, PROG ": nll: none of the %ld lines was scored (each line says why)\n", rn.next);
    }
    frigg_sched_free(sc);
    frigg_backend_destroy(b);
    frigg_model_free(m);
    return rc;
}

/* ==== kl ==== */

typedef struct {
    json_t **ids; /* per sequence: the line's "id", or NULL */
    frigg_progress *pr;
} kl_print;

static void kl_on_seq(void *ctx, int k, const frigg_kl_seq *r) {
    kl_print *kp = ctx;
    json_t *o;
    if (r->error) o = json_pack("{s:i,s:{s:s}}", "seq", k, "error", "message", r->error);
    else
        o = json_pack("{s:i,s:i,s:f,s:f,s:f,s:f,s:f}", "seq", k, "target_tokens", r->targets, "kl_mean",
                      r->kl_sum / r->targets, "kl_max", r->kl_max, "top1_agreement", (double)r->top1_agree / r->targets,
                      "nll_ref", r->nll_ref / r->targets, "nll_model", r->nll_model / r->targets);
    if (kp->ids && kp->ids[k]) json_object_set(o, "id", kp->ids[k]);
    print_json(o);
    frigg_progress_add(kp->pr, 1);
}

/* The tokenizers of both directories: the same, or an error. *tok is the model's (NULL when neither has one). */
static int same_tokenizer(const char *mdir, const char *rdir, frigg_tokenizer **tok) {
    frigg_tokenizer *a = NULL, *b = NULL;
    int ha = load_tokenizer(mdir, &a), hb = ha < 0 ? -1 : load_tokenizer(rdir, &b);
    int rc = 0;
    if (ha < 0 || hb < 0) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        rc = -1;
    } else if (ha != hb) {
        fprintf(stderr, PROG ": %s has a tokenizer.json and %s has none: the same tokenizer is required\n",
                ha ? mdir : rdir, ha ? rdir : mdir);
        rc = -1;
    } else if (ha && frigg_tokenizers_match(a, b)) {
        fprintf(stderr, PROG ": %s and %s: %s: kl needs the same tokenizer\n", mdir, rdir, frigg_error());
        rc = -1;
    }
    frigg_tokenizer_free(b);
    if (rc) frigg_tokenizer_free(a);
    else *tok = a;
    return rc;
}

static int run_kl(const eval_opts *o, const char *mdir) {
    frigg_tokenizer *tok = NULL;
    if (same_tokenizer(mdir, o->ref, &tok)) return 2;
    /* The configs, for the vocabulary and the context, before any weights. */
    frigg_model *m = NULL, *rm = NULL;
    frigg_backend *b = NULL, *rb = NULL;
    frigg_eval_seq *seqs = NULL;
    json_t **ids = NULL;
    int nseqs = 0, rc = 2;
    char *text = NULL;
    size_t tlen = 0;
    frigg_config mc, rc_cfg;
    if (load_config(mdir, &mc) || load_config(o->ref, &rc_cfg)) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto out;
    }
    if (mc.vocab_size != rc_cfg.vocab_size) {
        fprintf(stderr, PROG ": the model has a vocabulary of %d and the reference of %d: they cannot be compared\n",
                mc.vocab_size, rc_cfg.vocab_size);
        goto out;
    }
    int mctx = mc.max_position_embeddings < rc_cfg.max_position_embeddings ? mc.max_position_embeddings
                                                                            : rc_cfg.max_position_embeddings;
    int ctx = o->ctx ? o->ctx : (KL_DEFAULT_CTX < mctx ? KL_DEFAULT_CTX : mctx);
    if (ctx > mctx) {
        fprintf(stderr, PROG ": --ctx %d is beyond the models' context of %d tokens\n", ctx, mctx);
        goto out;
    }
    const char *input = o->jsonl ? o->jsonl : o->text ? o->text : "-";
    if (o->jsonl) {
        FILE *f = fopen(o->jsonl, "r");
        if (!f) {
            fprintf(stderr, PROG ": %s: %s\n", o->jsonl, strerror(errno));
            goto out;
        }
        char *line = NULL;
        size_t cap = 0;
        long lineno = 0;
        int scap = 0;
        while (getline(&line, &cap, f) >= 0 && (o->limit <= 0 || nseqs < o->limit)) {
            lineno++;
            if (line[strspn(line, " \t\r\n")] == 0) continue;
            const char *err = NULL;
            frigg_eval_seq s;
            json_t *id = NULL;
            if (parse_seq_line(line, mc.vocab_size, &s.ids, &s.n, &s.prefix, &id, &err)) {
                fprintf(stderr, PROG ": %s line %ld: %s\n", o->jsonl, lineno, err);
                json_decref(id);
                free(line);
                fclose(f);
                goto out;
            }
            if (nseqs == scap) {
                scap = scap ? 2 * scap : 64;
                seqs = frigg_xrealloc(seqs, sizeof *seqs * (size_t)scap);
                ids = frigg_xrealloc(ids, sizeof *ids * (size_t)scap);
            }
            seqs[nseqs] = s;
            ids[nseqs++] = id;
        }
        free(line);
        fclose(f);
        if (!nseqs) {
            fprintf(stderr, PROG ": %s: no sequence to score\n", o->jsonl);
            goto out;
        }
        ctx = 0;
        for (int i = 0; i < nseqs; i++) ctx = seqs[i].n > ctx ? seqs[i].n : ctx;
    } else {
        if (!tok) {
            fprintf(stderr, PROG ": %s has no tokenizer.json: kl on a text needs one (or give --jsonl token ids)\n", mdir);
            goto out;
        }
        if (o->text) text = frigg_read_file(o->text, &tlen);
        else { /* stdin */
            size_t cap = 1 << 16;
            text = frigg_xmalloc(cap);
            size_t r;
            while ((r = fread(text + tlen, 1, cap - tlen - 1, stdin)) > 0)
                if ((tlen += r) + 1 >= cap) text = frigg_xrealloc(text, cap *= 2);
            text[tlen] = 0;
        }
        if (!text || frigg_eval_text_seqs(tok, text, tlen, mc.bos_token_id, ctx, o->limit, &seqs, &nseqs)) {
            fprintf(stderr, PROG ": %s: %s\n", input, frigg_error());
            goto out;
        }
        int longest = 0;
        for (int i = 0; i < nseqs; i++) longest = seqs[i].n > longest ? seqs[i].n : longest;
        ctx = longest;
    }
    if (ctx > mctx) {
        fprintf(stderr, PROG ": a sequence of %d tokens is beyond the models' context of %d\n", ctx, mctx);
        goto out;
    }
    double t0 = frigg_now_ms();
    /* both models, then both engines' memory at once (one machine or device may hold both), then the engines */
    const char *rbe = o->ref_backend ? o->ref_backend : o->backend;
    rm = frigg_model_load(o->ref);
    if (!rm) {
        fprintf(stderr, PROG ": the reference %s: %s\n", o->ref, frigg_error());
        goto out;
    }
    m = frigg_model_load(mdir);
    if (!m) {
        fprintf(stderr, PROG ": the model %s: %s\n", mdir, frigg_error());
        goto out;
    }
    /* the logits: each scheduler's n x vocab for its step, and the reference's kept until the model's step */
    frigg_mem_plan mp[2] = {mem_plan("the reference", rm, rbe, o, o->ref_kv, ctx, 2),
                            mem_plan("the model", m, o->backend, o, o->kv, ctx, 1)};
    if (frigg_mem_check(mp, 2, o->text || !o->jsonl ? "--parallel or --ctx" : "--parallel, or the --jsonl sequences")) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto out;
    }
    rb = make_backend(&rm, rbe, o, o->ref_kv, o->ref_fp32, ctx);
    if (!rb) {
        fprintf(stderr, PROG ": the reference %s: %s\n", o->ref, frigg_error());
        goto out;
    }
    b = make_backend(&m, o->backend, o, o->kv, o->fp32, ctx);
    if (!b) {
        fprintf(stderr, PROG ": the model %s: %s\n", mdir, frigg_error());
        goto out;
    }
    frigg_progress pr;
    frigg_progress_start(&pr, PROG, "kl", "sequences scored", nseqs, o->progress);
    kl_print kp = {.ids = ids, .pr = &pr};
    frigg_kl_summary s;
    int failed = frigg_kl_run(rb, b, seqs, nseqs, o->parallel, kl_on_seq, &kp, &s);
    frigg_progress_end(&pr);
    if (failed < 0) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto out;
    }
    json_t *sum = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:I,s:f,s:f,s:f,s:f,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
                            "mode", "kl", "model", mdir, "ref", o->ref, "backend", b->name, "ref_backend", rb->name,
                            "kv_dtype", kv_name(b->kv_dtype), "ref_kv_dtype", kv_name(rb->kv_dtype),
                            "precision", precision_name(o->fp32), "ref_precision", precision_name(o->ref_fp32), "input", input,
                            "sequences", s.sequences, "failed", s.failed, "target_tokens", (json_int_t)s.tokens,
                            "kl_mean", s.kl_mean, "kl_p99", s.kl_p99, "kl_max", s.kl_max, "top1_agreement", s.top1,
                            "top1_agree", (json_int_t)s.top1_agree, "top1_ties", (json_int_t)s.top1_ties,
                            "top1_agreement_with_ties", s.top1_with_ties, "top1_gap_max", s.gap_max, "top1_gap_mean",
                            s.gap_mean, "nll_ref", s.nll_ref, "nll_model", s.nll_model,
                            "ppl_ref", exp(s.nll_ref), "ppl_model", exp(s.nll_model), "wall_s",
                            (frigg_now_ms() - t0) / 1000);
    if (!s.tokens) { /* every sequence failed: no figure to give, so null, never a mean of nothing (0) */
        static const char *const figs[] = {"kl_mean", "kl_p99", "kl_max", "top1_agreement", "top1_agreement_with_ties",
                                           "top1_gap_max", "top1_gap_mean", "nll_ref", "nll_model", "ppl_ref",
                                           "ppl_model"};
        for (size_t i = 0; i < sizeof figs / sizeof *figs; i++) json_object_set_new(sum, figs[i], json_null());
        fprintf(stderr, PROG ": kl: none of the %d sequences was scored (each line says why)\n", nseqs);
    }
    print_json(json_pack("{s:o}", "summary", sum));
    rc = failed ? 1 : 0;
out:
    if (ids)
        for (int i = 0; i < nseqs; i++) json_decref(ids[i]);
    free(ids);
    frigg_eval_seqs_free(seqs, nseqs);
    free(text);
    frigg_backend_destroy(b);
    frigg_backend_destroy(rb);
    frigg_model_free(m);
    frigg_model_free(rm);
    frigg_tokenizer_free(tok);
    return rc;
}

/* ==== gsm8k ==== */

typedef struct {
    char *question, *answer;
    char gold[FRIGG_GSM8K_NUM_MAX];
} gsm_item;

typedef struct gsm_run gsm_run;

typedef struct {
    gsm_run *G;
    int k;          /* index among the evaluated items */
    int id;         /* line index in the data file */
    int32_t *ids;
    int n, max_tokens;
    json_t *out;    /* the item's line once done */
    int correct, strict, invalid, error, completion;
} gsm_slot;

struct gsm_run {
    gsm_slot *slots;
    int n, done, correct;
    long completion;
    double t0;
    int tty;
};

static void gsm_progress(gsm_run *G, int final) {
    double s = (frigg_now_ms() - G->t0) / 1000;
    int every = G->n / 20 > 0 ? G->n / 20 : 1;
    if (!final && !G->tty && G->done % every) return;
    fprintf(stderr, "%sgsm8k: %d/%d done, %d correct (%.1f %%), %.0f tok/s, %.0f s%s", G->tty ? "\r" : "", G->done,
            G->n, G->correct, G->done ? 100.0 * G->correct / G->done : 0.0, s > 0 ? G->completion / s : 0.0, s,
            G->tty && !final ? "" : "\n");
    fflush(stderr);
}

static void gsm_on_done(void *ctx, const frigg_sched_result *res) {
    gsm_slot *sl = ctx;
    gsm_run *G = sl->G;
    json_t *o = json_pack("{s:i,s:i}", "id", sl->id, "prompt_tokens", sl->n);
    if (res->error) {
        json_object_set_new(o, "error", json_pack("{s:s}", "message", res->error));
        sl->error = 1;
    } else {
        const frigg_seqgen_result *g = res->choices[0];
        sl->completion = g->n;
        json_object_set_new(o, "completion_tokens", json_integer(g->n));
        json_object_set_new(o, "finish_reason", json_string(g->finish_reason));
        json_object_set_new(o, "output", json_stringn(g->text, g->text_len));
        sl->out = o; /* extraction in gsm_score, which knows the mode and the gold */
        G->completion += g->n;
        return;
    }
    sl->out = o;
}

static int run_gsm8k(const eval_opts *o, const char *mdir) {
    int rc = 2;
    frigg_tokenizer *tok = NULL;
    frigg_model *m = NULL;
    frigg_backend *b = NULL;
    frigg_sched *sc = NULL;
    gsm_item *items = NULL;
    int nitems = 0;
    gsm_run G = {0};
    char *data_path = NULL;
    unsigned char *raw = NULL;
    /* the data: --data, else $FRIGG_SHARED/data/gsm8k/test.jsonl, else ../shared/data/gsm8k/test.jsonl from the
     * repository (the executable's ../../ or ../../../), else from the working directory */
    if (o->data) data_path = frigg_xstrdup(o->data);
    else {
        const char *sh = getenv("FRIGG_SHARED");
        if (sh && *sh) data_path = frigg_path_join(sh, "data/gsm8k/test.jsonl");
        char exe[PATH_MAX];
        ssize_t nn = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (!data_path && nn > 0) {
            exe[nn] = 0;
            char *sl = strrchr(exe, '/');
            if (sl) *sl = 0;
            static const char *const rel[] = {"/../../shared/data/gsm8k/test.jsonl",
                                              "/../../../shared/data/gsm8k/test.jsonl"};
            for (int i = 0; i < 2 && !data_path; i++) {
                char buf[PATH_MAX + 64];
                snprintf(buf, sizeof buf, "%s%s", exe, rel[i]);
                if (frigg_file_exists(buf)) data_path = realpath(buf, NULL);
            }
        }
        if (!data_path) data_path = frigg_xstrdup("../shared/data/gsm8k/test.jsonl");
    }
    size_t rlen = 0;
    raw = (unsigned char *)frigg_read_file(data_path, &rlen);
    if (!raw) {
        fprintf(stderr, PROG ": %s (give --data FILE or set FRIGG_SHARED)\n", frigg_error());
        goto out;
    }
    unsigned char dg[crypto_hash_sha256_BYTES];
    char hex[2 * sizeof dg + 1];
    crypto_hash_sha256(dg, raw, rlen);
    for (size_t i = 0; i < sizeof dg; i++) sprintf(hex + 2 * i, "%02x", dg[i]);
    /* parse every line */
    {
        int cap = 0;
        char *p = (char *)raw, *end = p + rlen;
        int lineno = 0;
        while (p < end) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
            lineno++;
            const char *line = p;
            p += ll + 1;
            size_t blank = 0;
            while (blank < ll && (line[blank] == ' ' || line[blank] == '\t' || line[blank] == '\r')) blank++;
            if (blank == ll) continue;
            json_error_t je;
            json_t *j = json_loadb(line, ll, 0, &je);
            const char *q = json_string_value(json_object_get(j, "question")),
                       *a = json_string_value(json_object_get(j, "answer"));
            if (!q || !a) {
                fprintf(stderr, PROG ": %s line %d: not a {\"question\",\"answer\"} object\n", data_path, lineno);
                json_decref(j);
                goto out;
            }
            if (nitems == cap) items = frigg_xrealloc(items, sizeof *items * (size_t)(cap = cap ? 2 * cap : 256));
            gsm_item *it = &items[nitems++];
            it->question = frigg_xstrdup(q);
            it->answer = frigg_xstrdup(a);
            if (frigg_gsm8k_gold(a, it->gold)) {
                fprintf(stderr, PROG ": %s line %d: the answer has no \"#### N\" final line\n", data_path, lineno);
                json_decref(j);
                goto out;
            }
            json_decref(j);
        }
    }
    int first = o->chat ? 0 : o->shots; /* the exemplars are items 0..shots-1 and are not scored */
    if (nitems <= first) {
        fprintf(stderr, PROG ": %s has %d items: none left after %d exemplars\n", data_path, nitems, first);
        goto out;
    }
    int n = nitems - first;
    if (o->limit > 0 && o->limit < n) n = o->limit;

    int ht = load_tokenizer(mdir, &tok);
    if (ht <= 0) {
        fprintf(stderr, PROG ": %s\n", ht < 0 ? frigg_error() : "the model directory has no tokenizer.json: gsm8k needs one");
        goto out;
    }
    frigg_config cfg;
    if (load_config(mdir, &cfg)) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto out;
    }
    /* the prompts */
    const char *sq[GSM8K_MAX_SHOTS], *sa[GSM8K_MAX_SHOTS];
    for (int i = 0; i < first; i++) sq[i] = items[i].question, sa[i] = items[i].answer;
    G.slots = frigg_xcalloc((size_t)n, sizeof *G.slots);
    G.n = n;
    int longest = 0;
    long prompt_total = 0;
    for (int k = 0; k < n; k++) {
        gsm_slot *sl = &G.slots[k];
        sl->G = &G, sl->k = k, sl->id = first + k;
        char *text;
        if (o->chat) {
            json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", items[sl->id].question);
            text = frigg_chat_render(msgs, NULL, 1);
            json_decref(msgs);
            if (!text) {
                fprintf(stderr, PROG ": item %d: %s\n", sl->id, frigg_error());
                goto out;
            }
        } else {
            text = frigg_gsm8k_prompt(sq, sa, first, items[sl->id].question);
        }
        int32_t *ids = NULL;
        size_t ni = 0;
        if (frigg_tokenizer_encode(tok, text, strlen(text), &ids, &ni)) {
            fprintf(stderr, PROG ": item %d: %s\n", sl->id, frigg_error());
            free(text);
            goto out;
        }
        free(text);
        if (o->chat) { /* the rendered template begins with <bos> itself */
            sl->ids = ids, sl->n = (int)ni;
        } else { /* a completion prompt: <bos> first, as the model's training sequences */
            sl->ids = frigg_xmalloc(sizeof(int32_t) * (ni + 1));
            sl->ids[0] = cfg.bos_token_id;
            memcpy(sl->ids + 1, ids, sizeof(int32_t) * ni);
            sl->n = (int)ni + 1;
            free(ids);
        }
        prompt_total += sl->n;
        sl->max_tokens = o->max_tokens;
        if (sl->n + sl->max_tokens > cfg.max_position_embeddings) sl->max_tokens = cfg.max_position_embeddings - sl->n;
        if (sl->n + sl->max_tokens > longest) longest = sl->n + sl->max_tokens;
    }
    if (longest > cfg.max_position_embeddings) longest = cfg.max_position_embeddings;
    b = open_backend(mdir, o->backend, o, o->kv, o->fp32, longest, 0, "--parallel or --max-tokens", &m);
    sc = b ? frigg_sched_new(b, tok, o->parallel) : NULL;
    if (!sc) {
        fprintf(stderr, PROG ": %s\n", frigg_error());
        goto out;
    }
    G.t0 = frigg_now_ms();
    G.tty = isatty(2);
    int next = 0, head = 0, strict = 0, invalid = 0, errors = 0;
    frigg_gsm8k_mode mode = o->chat ? FRIGG_GSM8K_LAST : FRIGG_GSM8K_HASH_OR_LAST;
    while (head < n) {
        while (next < n && frigg_sched_pending(sc) < o->parallel) {
            gsm_slot *sl = &G.slots[next++];
            if (sl->max_tokens < 1) {
                char msg[200];
                snprintf(msg, sizeof msg, "the prompt of %d tokens leaves no room in the context of %d", sl->n,
                         cfg.max_position_embeddings);
                sl->out = json_pack("{s:i,s:i,s:{s:s}}", "id", sl->id, "prompt_tokens", sl->n, "error", "message", msg);
                sl->error = 1;
                continue;
            }
            frigg_sched_req q = {.ids = sl->ids, .n = sl->n, .prefix_len = sl->n, .n_choices = 1,
                                 .on_done = gsm_on_done, .ctx = sl};
            q.gen.max_tokens = sl->max_tokens;
            q.gen.n_stop_ids = frigg_default_stop_ids(&cfg, 0, q.gen.stop_ids, FRIGG_SEQGEN_MAX_STOP_IDS);
            if (!o->chat) q.gen.stop[q.gen.n_stop++] = GSM8K_STOP;
            if (!frigg_sched_submit(sc, &q)) {
                sl->out = json_pack("{s:i,s:i,s:{s:s}}", "id", sl->id, "prompt_tokens", sl->n, "error", "message",
                                    frigg_error());
                sl->error = 1;
            }
        }
        if (frigg_sched_pending(sc) > 0) frigg_sched_step(sc); /* a failed step answered its requests */
        for (; head < n && G.slots[head].out; head++) {
            gsm_slot *sl = &G.slots[head];
            const char *gold = items[sl->id].gold;
            json_t *out = sl->out;
            if (!sl->error) {
                json_t *t = json_object_get(out, "output");
                char got[FRIGG_GSM8K_NUM_MAX];
                int how = frigg_gsm8k_extract(json_string_value(t), json_string_length(t), mode, got);
                sl->correct = how && !strcmp(got, gold);
                sl->strict = how == 1 && sl->correct;
                sl->invalid = !how;
                json_object_set_new(out, "extracted", how ? json_string(got) : json_null());
                json_object_set_new(out, "extracted_by", how == 1 ? json_string("####") : how == 2 ? json_string("last")
                                                                                                   : json_null());
                if (sl->max_tokens != o->max_tokens) json_object_set_new(out, "max_tokens", json_integer(sl->max_tokens));
            }
            json_object_set_new(out, "gold", json_string(gold));
            json_object_set_new(out, "correct", json_boolean(sl->correct));
            print_json(out);
            sl->out = NULL;
            G.done++;
            G.correct += sl->correct;
            strict += sl->strict;
            invalid += sl->invalid || sl->error;
            errors += sl->error;
            free(sl->ids);
            sl->ids = NULL;
            gsm_progress(&G, head == n - 1);
        }
    }
    double wall = (frigg_now_ms() - G.t0) / 1000, lo, hi;
    frigg_wilson(G.correct, n, 1.959963984540054, &lo, &hi);
    char shots_from[160] = "none";
    if (first == 1) snprintf(shots_from, sizeof shots_from, "test item 0 (the data has no train split), not scored");
    else if (first) snprintf(shots_from, sizeof shots_from, "test items 0-%d (the data has no train split), not scored", first - 1);
    json_t *sum = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:s,s:b,s:i,s:s,s:i,s:i,s:f,s:[f,f],s:s,s:i,s:f,s:i,s:i,s:I,s:I,s:f,s:f}",
        "task", "gsm8k", "model", mdir, "backend", b->name, "kv_dtype", kv_name(b->kv_dtype), "data", data_path,
        "data_sha256", hex, "shots", first, "shots_from", shots_from, "chat", o->chat, "max_tokens", o->max_tokens,
        "extraction", o->chat ? "last number" : "#### N, else the last number", "items", n, "correct", G.correct,
        "accuracy", (double)G.correct / n, "ci95", lo, hi, "ci_method", "wilson", "strict_correct", strict,
        "strict_accuracy", (double)strict / n, "invalid", invalid, "errors", errors, "prompt_tokens",
        (json_int_t)prompt_total, "completion_tokens", (json_int_t)G.completion, "tok_s",
        wall > 0 ? G.completion / wall : 0.0, "wall_s", wall);
    json_object_set_new(sum, "precision", json_string(precision_name(o->fp32)));
    if (!o->chat) json_object_set_new(sum, "stop", json_string(GSM8K_STOP));
    print_json(json_pack("{s:o}", "summary", sum));
    rc = errors ? 1 : 0;
out:
    frigg_sched_free(sc);
    frigg_backend_destroy(b);
    frigg_model_free(m);
    frigg_tokenizer_free(tok);
    for (int i = 0; i < nitems; i++) free(items[i].question), free(items[i].answer);
    free(items);
    for (int k = 0; k < G.n; k++) {
        free(G.slots[k].ids);
        json_decref(G.slots[k].out);
    }
    free(G.slots);
    free(raw);
    free(data_path);
    return rc;
}

/* ==== main ==== */

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        frigg_print_version(PROG);
        return 0;
    }
    eval_opts o = {.mode = argv[1]};
    int is_nll = !strcmp(o.mode, "nll"), is_kl = !strcmp(o.mode, "kl"), is_gsm = !strcmp(o.mode, "gsm8k");
    if (!is_nll && !is_kl && !is_gsm) {
        fprintf(stderr, PROG ": unknown evaluation \"%s\" (nll, kl or gsm8k)\n", o.mode);
        return 2;
    }
    o.parallel = is_gsm ? GSM8K_DEFAULT_PARALLEL : EVAL_DEFAULT_PARALLEL;
    o.ref_fp32 = -1;
    o.max_tokens = GSM8K_DEFAULT_MAX_TOKENS;
    enum { O_KV = 256, O_REF, O_REF_KV, O_REF_BACKEND, O_TEXT, O_JSONL, O_CTX, O_LIMIT, O_DATA, O_SHOTS, O_CHAT, O_MAXTOK,
           O_PREC, O_REF_PREC, O_DQ, O_PROGRESS };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},       {"backend", required_argument, 0, 'b'},
        {"threads", required_argument, 0, 't'},     {"device", required_argument, 0, 'd'},
        {"parallel", required_argument, 0, 'P'},    {"kv-dtype", required_argument, 0, O_KV},
        {"ref", required_argument, 0, O_REF},       {"ref-kv-dtype", required_argument, 0, O_REF_KV},
        {"ref-backend", required_argument, 0, O_REF_BACKEND}, {"text", required_argument, 0, O_TEXT},
        {"jsonl", required_argument, 0, O_JSONL},   {"ctx", required_argument, 0, O_CTX},
        {"limit", required_argument, 0, O_LIMIT},   {"data", required_argument, 0, O_DATA},
        {"shots", required_argument, 0, O_SHOTS},   {"chat", no_argument, 0, O_CHAT},
        {"max-tokens", required_argument, 0, O_MAXTOK}, {"precision", required_argument, 0, O_PREC},
        {"ref-precision", required_argument, 0, O_REF_PREC}, {"dequant-rows", required_argument, 0, O_DQ},
        {"progress", no_argument, 0, O_PROGRESS},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *only = NULL; /* an option given to a mode it does not apply to */
    int c, shots_set = 0;
    double v;
    optind = 2;
    while ((c = getopt_long(argc, argv, "m:b:t:d:P:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'b': o.backend = optarg; break;
        case 't':
            if (frigg_cli_threads(PROG, optarg, &o.threads)) return 2;
            break;
        case 'd':
            if (frigg_cli_number(PROG, "--device", optarg, 0, 4096, 1, &v)) return 2;
            o.device = (int)v;
            break;
        case 'P':
            if (frigg_cli_number(PROG, "--parallel", optarg, 1, 256, 1, &v)) return 2;
            o.parallel = (int)v;
            break;
        case O_KV:
            if (frigg_cli_kv_dtype(PROG, optarg, &o.kv)) return 2;
            break;
        case O_REF: o.ref = optarg, only = is_kl ? only : "--ref"; break;
        case O_REF_KV:
            if (frigg_cli_kv_dtype(PROG ": --ref-kv-dtype", optarg, &o.ref_kv)) return 2;
            only = is_kl ? only : "--ref-kv-dtype";
            break;
        case O_REF_BACKEND: o.ref_backend = optarg, only = is_kl ? only : "--ref-backend"; break;
        case O_TEXT: o.text = optarg, only = is_kl ? only : "--text"; break;
        case O_JSONL: o.jsonl = optarg, only = is_kl ? only : "--jsonl"; break;
        case O_CTX:
            if (frigg_cli_number(PROG, "--ctx", optarg, 2, 1 << 24, 1, &v)) return 2;
            o.ctx = (int)v, only = is_kl || is_nll ? only : "--ctx";
            break;
        case O_LIMIT:
            if (frigg_cli_number(PROG, "--limit", optarg, 1, 1e9, 1, &v)) return 2;
            o.limit = (int)v, only = is_kl || is_gsm ? only : "--limit";
            break;
        case O_DATA: o.data = optarg, only = is_gsm ? only : "--data"; break;
        case O_SHOTS:
            if (frigg_cli_number(PROG, "--shots", optarg, 0, GSM8K_MAX_SHOTS, 1, &v)) return 2;
            o.shots = (int)v, shots_set = 1, only = is_gsm ? only : "--shots";
            break;
        case O_CHAT: o.chat = 1, only = is_gsm ? only : "--chat"; break;
        case O_MAXTOK:
            if (frigg_cli_number(PROG, "--max-tokens", optarg, 1, 1 << 24, 1, &v)) return 2;
            o.max_tokens = (int)v, only = is_gsm ? only : "--max-tokens";
            break;
        case O_DQ:
            if (frigg_cli_dequant_rows(PROG, optarg, &o.dequant_rows)) return 2;
            break;
        case O_PROGRESS: o.progress = 1; break; /* gsm8k prints its progress lines always */
        case O_PREC:
        case O_REF_PREC:
            if (strcmp(optarg, "bf16") && strcmp(optarg, "fp32")) {
                fprintf(stderr, PROG ": %s takes bf16 or fp32, not \"%s\"\n", c == O_PREC ? "--precision" : "--ref-precision",
                        optarg);
                return 2;
            }
            if (c == O_PREC) o.fp32 = !strcmp(optarg, "fp32");
            else o.ref_fp32 = !strcmp(optarg, "fp32"), only = is_kl ? only : "--ref-precision";
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (only) {
        fprintf(stderr, PROG ": %s does not apply to %s\n", only, o.mode);
        return 2;
    }
    if (is_kl && !o.ref) {
        fprintf(stderr, PROG ": kl needs --ref DIR (the reference model)\n");
        return 2;
    }
    if (is_kl && o.text && o.jsonl) {
        fprintf(stderr, PROG ": --text and --jsonl are two inputs: give one\n");
        return 2;
    }
    if (o.ref_fp32 < 0) o.ref_fp32 = o.fp32;
    /* The fp32 reference is the CPU engine's alone: an fp32 engine is the CPU engine, never picked by auto. */
    if (o.fp32) {
        if (o.backend && strcmp(o.backend, "cpu") && strcmp(o.backend, "auto")) {
            fprintf(stderr, PROG ": --precision fp32 runs on the CPU engine only, not --backend \"%s\"\n", o.backend);
            return 2;
        }
        o.backend = "cpu";
    }
    if (is_kl && o.ref_fp32) {
        const char *rb = o.ref_backend ? o.ref_backend : o.backend;
        if (rb && strcmp(rb, "cpu") && strcmp(rb, "auto")) {
            fprintf(stderr, PROG ": --ref-precision fp32 runs on the CPU engine only, not %s \"%s\"%s\n",
                    o.ref_backend ? "--ref-backend" : "--backend", rb,
                    o.ref_backend ? "" : " (the reference's engine unless --ref-backend cpu)");
            return 2;
        }
        o.ref_backend = "cpu";
    }
    if (is_gsm && o.chat && shots_set && o.shots) {
        fprintf(stderr, PROG ": --chat is zero-shot: it does not take --shots %d\n", o.shots);
        return 2;
    }
    if (sodium_init() < 0) {
        fprintf(stderr, PROG ": libsodium failed to initialise\n");
        return 2;
    }
    char *mdir = o.model ? frigg_xstrdup(o.model) : frigg_default_model_dir();
    /* a model path that does not exist is said to be one, before a missing tokenizer.json or config.json in it
     * would be reported instead */
    const char *const paths[2] = {mdir, is_kl ? o.ref : NULL};
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (paths[i] && stat(paths[i], &st)) {
            fprintf(stderr, PROG ": %s %s: %s\n", i ? "--ref" : o.model ? "--model" : "the model (--model, $FRIGG_MODEL)",
                    paths[i], strerror(errno));
            free(mdir);
            return 2;
        }
    }
    int rc = is_nll ? run_nll(&o, mdir) : is_kl ? run_kl(&o, mdir) : run_gsm8k(&o, mdir);
    free(mdir);
    return rc;
}
