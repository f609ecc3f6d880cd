/* frigg-eval — evaluations over JSON lines. Implemented: `nll` (teacher-forced negative
 * log-likelihood of continuations), its sequences scored through the scheduler (score requests,
 * scheduler.h), up to --parallel at once, the results printed in input order. Other evaluations
 * (GSM8K, ...) are not implemented yet and say so. See man/frigg-eval.1. */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "model.h"
#include "nll.h"
#include "scheduler.h"
#include "util.h"

/* Sequences scored at once by default: each holds its n * vocab logits for its step (1 MiB per token at
 * Mimir's vocabulary of 262,144), so fewer than frigg-run's 8. */
#define EVAL_DEFAULT_PARALLEL 4

static void usage(FILE *f) {
    fprintf(f,
            "usage: frigg-eval nll [--model DIR] [--backend cpu|cuda] [--threads N] [--device N] [--parallel N]\n"
            "                      < seqs.jsonl\n"
            "  each line: {\"input_ids\":[...],\"prefix_tokens\":P[,\"id\":...]}; the tokens after the first P are\n"
            "  scored given everything before them (the first P attend bidirectionally).\n"
            "  -P, --parallel N: score up to N sequences at once (default %d; each holds its n x vocab float logits)\n"
            "  out: one {\"nll_sum\",\"target_tokens\"} per line, in input order, then\n"
            "  {\"summary\":{nll_mean,perplexity,...}}.\n"
            "Other evaluations (gsm8k, ...) are not implemented yet.\n",
            EVAL_DEFAULT_PARALLEL);
}

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
} runner;

typedef struct {
    runner *r;
    long k, lineno;
    int32_t *ids;
    int n, prefix;
    json_t *id; /* the line's "id" (a reference), or NULL */
    double nll;
    int scored;
} line_ctx;

static void put(runner *r, long k, json_t *out, json_t *id, double nll, int targets, int ok) {
    if (id) json_object_set(out, "id", id);
    r->ans[k % r->cap] = (answer){.out = out, .nll = nll, .targets = targets, .ok = ok};
}

static void put_error(runner *r, long k, long lineno, const char *msg, json_t *id) {
    put(r, k, json_pack("{s:{s:s,s:I}}", "error", "message", msg, "line", (json_int_t)lineno), id, 0, 0, 0);
}

static void on_logits(void *vctx, const float *all, int n, int vocab) {
    line_ctx *lc = vctx;
    lc->nll = frigg_nll_sum(all, vocab, lc->ids, n, lc->prefix);
    lc->scored = 1;
}

static void on_done(void *vctx, const frigg_sched_result *res) {
    line_ctx *lc = vctx;
    if (res->error) put_error(lc->r, lc->k, lc->lineno, res->error, lc->id);
    else if (!lc->scored) put_error(lc->r, lc->k, lc->lineno, "not scored (cancelled)", lc->id);
    else
        put(lc->r, lc->k, json_pack("{s:f,s:i}", "nll_sum", lc->nll, "target_tokens", lc->n - lc->prefix), lc->id,
            lc->nll, lc->n - lc->prefix, 1);
    json_decref(lc->id);
    free(lc->ids);
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
    }
}

/* One input line: its answer now (a bad line) or a score request submitted for it. */
static void read_line(runner *r, frigg_sched *sc, const frigg_model *m, const char *line, long lineno) {
    long k = r->next++;
    json_error_t je;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &je);
    json_t *ids = o ? json_object_get(o, "input_ids") : NULL, *P = o ? json_object_get(o, "prefix_tokens") : NULL;
    json_t *id = o ? json_object_get(o, "id") : NULL;
    const char *err = !o ? "invalid JSON" : !json_is_array(ids) ? "\"input_ids\" must be an array"
                                         : !json_is_integer(P) ? "\"prefix_tokens\" must be an integer" : NULL;
    if (!err) { /* an unknown field is an error, never ignored */
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) if (strcmp(key, "input_ids") && strcmp(key, "prefix_tokens") && strcmp(key, "id")) {
            err = "unknown field (nll lines take input_ids, prefix_tokens, id)";
            break;
        }
    }
    int n = (int)json_array_size(ids);
    int32_t *buf = malloc(sizeof(int32_t) * (n ? n : 1));
    for (int i = 0; !err && i < n; i++) {
        json_t *e = json_array_get(ids, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= m->cfg.vocab_size)
            err = "\"input_ids\" must hold token ids inside the vocabulary";
        else buf[i] = (int32_t)json_integer_value(e);
    }
    json_int_t pv = P ? json_integer_value(P) : 0;
    int prefix = pv < INT_MIN ? INT_MIN : pv > INT_MAX ? INT_MAX : (int)pv; /* beyond int: refused all the same */
    if (!err && frigg_nll_check(n, prefix)) err = frigg_error();
    if (err) {
        put_error(r, k, lineno, err, id);
        free(buf);
        json_decref(o);
        return;
    }
    line_ctx *lc = frigg_xcalloc(1, sizeof *lc);
    *lc = (line_ctx){.r = r, .k = k, .lineno = lineno, .ids = buf, .n = n, .prefix = prefix, .id = json_incref(id)};
    frigg_sched_req q = {.ids = buf, .n = n, .prefix_len = prefix, .n_choices = 1, .score = 1,
                         .on_logits = on_logits, .on_done = on_done, .ctx = lc};
    if (!frigg_sched_submit(sc, &q)) { /* on_done is not called */
        put_error(r, k, lineno, frigg_error(), id);
        json_decref(lc->id);
        free(lc->ids);
        free(lc);
    }
    json_decref(o);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        frigg_print_version("frigg-eval");
        return 0;
    }
    if (strcmp(argv[1], "nll")) {
        fprintf(stderr, "frigg-eval: evaluation \"%s\" is not implemented yet (only \"nll\")\n", argv[1]);
        return 2;
    }
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},   {"backend", required_argument, 0, 'b'},
                                         {"threads", required_argument, 0, 't'},  {"device", required_argument, 0, 'd'},
                                         {"parallel", required_argument, 0, 'P'}, {0, 0, 0, 0}};
    const char *dir = NULL, *backend = NULL;
    int parallel = EVAL_DEFAULT_PARALLEL;
    frigg_backend_opts bo = {.max_seqs = 1};
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "m:b:t:d:P:", opts, NULL)) != -1) {
        if (c == 'm') dir = optarg;
        else if (c == 'b') backend = optarg;
        else if (c == 't' || c == 'd') {
            double v;
            if (frigg_cli_number("frigg-eval", c == 't' ? "--threads" : "--device", optarg, 0, 4096, 1, &v)) return 2;
            if (c == 't') bo.threads = (int)v;
            else bo.device = (int)v;
        } else if (c == 'P') {
            double v;
            if (frigg_cli_number("frigg-eval", "--parallel", optarg, 1, 256, 1, &v)) return 2;
            parallel = (int)v;
        } else {
            usage(stderr);
            return 2;
        }
    }
    bo.max_seqs = parallel; /* one sequence slot per sequence scored at once */
    char *mdir = dir ? frigg_xstrdup(dir) : frigg_default_model_dir();
    frigg_model *m = frigg_model_load(mdir);
    frigg_backend *b = m ? frigg_backend_create(backend, m, &bo) : NULL;
    frigg_sched *sc = b ? frigg_sched_new(b, NULL, parallel) : NULL;
    if (!sc) {
        fprintf(stderr, "frigg-eval: %s\n", frigg_error());
        frigg_backend_destroy(b);
        frigg_model_free(m);
        free(mdir);
        return 2;
    }
    runner rn = {.cap = 4L * parallel + 64};
    rn.ans = frigg_xcalloc((size_t)rn.cap, sizeof *rn.ans);
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int eof = 0;
    while (!eof || rn.head < rn.next) {
        /* read while the scheduler has room and the print window is not full */
        while (!eof && frigg_sched_pending(sc) < parallel && rn.next - rn.head < rn.cap) {
            if (getline(&line, &cap, stdin) < 0) {
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
    double mean = rn.total_targets ? rn.total / rn.total_targets : 0;
    json_t *sum = json_pack("{s:{s:s,s:s,s:i,s:i,s:f,s:f,s:f}}", "summary", "model", mdir, "backend", b->name,
                            "sequences", rn.seqs, "target_tokens", rn.total_targets, "nll_sum", rn.total,
                            "nll_mean", mean, "perplexity", exp(mean));
    char *s = json_dumps(sum, JSON_COMPACT);
    puts(s);
    free(s);
    json_decref(sum);
    frigg_sched_free(sc);
    frigg_backend_destroy(b);
    frigg_model_free(m);
    free(mdir);
    return rn.bad;
}
