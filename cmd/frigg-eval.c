/* frigg-eval — evaluations over JSON lines. Implemented: `nll` (teacher-forced negative
 * log-likelihood of continuations). Other evaluations (GSM8K, ...) are not implemented yet and
 * say so. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "model.h"
#include "nll.h"
#include "util.h"

static void usage(FILE *f) {
    fprintf(f, "usage: frigg-eval nll [--model DIR] [--backend cpu|cuda] [--threads N] [--device N] < seqs.jsonl\n"
               "  each line: {\"input_ids\":[...],\"prefix_tokens\":P[,\"id\":...]}; the tokens after the first P are\n"
               "  scored given everything before them (the first P attend bidirectionally).\n"
               "  out: one {\"nll_sum\",\"target_tokens\"} per line, then {\"summary\":{nll_mean,perplexity,...}}.\n"
               "Other evaluations (gsm8k, ...) are not implemented yet.\n");
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
    static const struct option opts[] = {{"model", required_argument, 0, 'm'}, {"backend", required_argument, 0, 'b'},
                                         {"threads", required_argument, 0, 't'}, {"device", required_argument, 0, 'd'},
                                         {0, 0, 0, 0}};
    const char *dir = NULL, *backend = NULL;
    frigg_backend_opts bo = {.max_seqs = 1};
    int c;
    optind = 2;
    while ((c = getopt_long(argc, argv, "m:b:t:d:", opts, NULL)) != -1) {
        if (c == 'm') dir = optarg;
        else if (c == 'b') backend = optarg;
        else if (c == 't' || c == 'd') {
            double v;
            if (frigg_cli_number("frigg-eval", c == 't' ? "--threads" : "--device", optarg, 0, 4096, 1, &v)) return 2;
            if (c == 't') bo.threads = (int)v;
            else bo.device = (int)v;
        }
        else {
            usage(stderr);
            return 2;
        }
    }
    char *mdir = dir ? frigg_xstrdup(dir) : frigg_default_model_dir();
    frigg_model *m = frigg_model_load(mdir);
    frigg_backend *b = m ? frigg_backend_create(backend, m, &bo) : NULL;
    if (!b) {
        fprintf(stderr, "frigg-eval: %s\n", frigg_error());
        return 2;
    }
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int bad = 0, total_targets = 0, seqs = 0;
    double total = 0;
    while (getline(&line, &cap, stdin) >= 0) {
        lineno++;
        if (line[strspn(line, " \t\r\n")] == 0) continue; /* blank lines, as frigg-run */
        json_error_t je;
        json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &je);
        json_t *ids = o ? json_object_get(o, "input_ids") : NULL, *P = o ? json_object_get(o, "prefix_tokens") : NULL;
        const char *err = !o ? "invalid JSON" : !json_is_array(ids) ? "\"input_ids\" must be an array"
                                             : !json_is_integer(P) ? "\"prefix_tokens\" must be an integer" : NULL;
        if (!err) { /* an unknown field is an error, never ignored */
            const char *k;
            json_t *v;
            json_object_foreach(o, k, v) if (strcmp(k, "input_ids") && strcmp(k, "prefix_tokens") && strcmp(k, "id")) {
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
        double nll = 0;
        int tg = 0;
        if (!err && frigg_nll(b, 0, buf, n, (int)json_integer_value(P), &nll, &tg)) err = frigg_error();
        json_t *out;
        if (err) {
            out = json_pack("{s:{s:s,s:I}}", "error", "message", err, "line", (json_int_t)lineno);
            bad = 1;
        } else {
            out = json_pack("{s:f,s:i}", "nll_sum", nll, "target_tokens", tg);
            total += nll;
            total_targets += tg;
            seqs++;
        }
        if (o && json_object_get(o, "id")) json_object_set(out, "id", json_object_get(o, "id"));
        char *s = json_dumps(out, JSON_COMPACT);
        puts(s);
        free(s);
        json_decref(out);
        json_decref(o);
        free(buf);
    }
    free(line);
    double mean = total_targets ? total / total_targets : 0;
    json_t *sum = json_pack("{s:{s:s,s:s,s:i,s:i,s:f,s:f,s:f}}", "summary", "model", mdir, "backend", b->name,
                            "sequences", seqs, "target_tokens", total_targets, "nll_sum", total, "nll_mean", mean,
                            "perplexity", exp(mean));
    char *s = json_dumps(sum, JSON_COMPACT);
    puts(s);
    free(s);
    json_decref(sum);
    frigg_backend_destroy(b);
    frigg_model_free(m);
    free(mdir);
    return bad;
}
