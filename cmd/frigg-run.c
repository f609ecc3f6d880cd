/* frigg-run — JSON lines in, JSON lines out: one request object per input line, one response object
 * per output line, in input order (or, with --unordered, as they finish). Up to --parallel requests
 * run at once through the session's scheduler. A bad line gets {"error":{...}} in its place and
 * processing continues; the exit status is then 1. See man/frigg-run.1. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "run/cli.h"
#include "run/generate.h"
#include "run/linein.h"
#include "model/model.h"
#include "run/request.h"
#include "run/session.h"
#include "base/util.h"

/* --max-line-bytes: a longer line is refused (not truncated) and read past without being held in memory. 16 MiB
 * holds any prompt that fits DFM-Mimir's context many times over. */
#define DEFAULT_MAX_LINE (16L << 20)
#define MAX_MAX_LINE (1L << 30)

/* Lines read ahead of the scheduler (run/linein.h): enough that the next request is there when a slot frees,
 * few enough (and at most this many bytes, one line always let in) that a fast producer is not held in memory. */
#define READ_AHEAD_LINES 64
#define READ_AHEAD_BYTES (64L << 20)

static void usage(FILE *f) {
    fprintf(f,
            "usage: frigg-run [options] < requests.jsonl > responses.jsonl\n"
            "       frigg-run [options] -p TEXT\n"
            "\n"
            "  -p, --prompt TEXT     one user turn, rendered with the model's chat template (needs\n"
            "                        tokenizer.json in the model directory); with --raw: raw text\n"
            "      --raw             -p sends TEXT as a raw \"prompt\" (no template, no <bos>)\n"
            "  -m, --model DIR       model directory (config.json, *.safetensors[, tokenizer.json]), or an\n"
            "                        hrm_text .gguf file (tokenizer.json beside it);\n"
            "                        default: $FRIGG_MODEL, else the bundled golden/default\n"
            "  -b, --backend NAME    cpu | cuda (default: cuda when a GPU is present, else cpu)\n"
            "  -t, --threads N       CPU threads (default: all cores)\n"
            "  -d, --device N        CUDA device ordinal (default 0)\n"
            "  -n, --max-tokens N    default max_tokens for requests that do not set it (default %d)\n"
            "      --tokenize        print {\"ids\",\"text\"} for each request's prompt/messages; no weights\n"
            "      --detokenize      map {\"ids\":[...]} lines to {\"text\":...}; no weights\n"
            "      --hf-regex        tokenize like transformers' fix_mistral_regex (default: like training)\n"
            "  -P, --parallel N      run up to N requests at once (default %d: the engine's sequence slots)\n"
            "      --ctx N           tokens per sequence: prompt + output (default: the model's\n"
            "                        max_position_embeddings); every slot's KV cache is allocated for N\n"
            "                        tokens at start, so fewer fit more --parallel slots\n"
            "      --unordered       print each response as it finishes, with its input \"line\" number\n"
            "                        (default: in input order)\n"
            "      --stats           at the end, one line on stderr: responses, errors, prompt and generated\n"
            "                        tokens, the seconds from the model being ready to the last response, and\n"
            "                        generated tok/s over them\n"
            "      --max-line-bytes N  refuse an input line longer than N bytes (default %ld: 16 MiB)\n"
            "      --batch-invariant each response's bits independent of what runs beside it on the CUDA engine too\n"
            "                        (one decode kernel at every batch size; the CPU engine always is)\n"
            "      --kv-dtype T      KV-cache elements: bf16 (default) or int8 (symmetric, one scale per position\n"
            "                        and head; about half a bf16 cache's bytes)\n"
            "      --dequant-rows N|off  a quantized build on the CUDA engine: steps of N rows or more (decode rows,\n"
            "                        prompt tokens) run on a bf16 copy of its weights made at load (default %d\n"
            "                        for int8 builds: every step, the stored weights freed; %d for int4; off: no\n"
            "                        copy, the stored weights at every size)\n"
            "  -h, --help            this help\n"
            "      --version         version and build\n"
            "\n"
            "Request fields: input_ids | prompt | messages (+tools), max_tokens, temperature, top_k, top_p,\n"
            "seed, repetition_penalty, stop_ids, stop, prefix_tokens, logprobs, id. See frigg-run(1).\n",
            FRIGG_DEFAULT_MAX_TOKENS, FRIGG_SESSION_DEFAULT_SLOTS, DEFAULT_MAX_LINE, FRIGG_DEQUANT_ROWS_INT8,
            FRIGG_DEQUANT_ROWS_INT4);
}

static void print_json_line(json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT);
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(s);
}

/* --stats: what the responses say (their "usage"), counted as they are answered */
typedef struct {
    long responses, errors, prompt_tokens, completion_tokens;
} run_stats;

/* A response into the counts. */
static void count_response(run_stats *st, json_t *resp) {
    st->responses++;
    if (json_object_get(resp, "error")) st->errors++;
    json_t *u = json_object_get(resp, "usage");
    st->prompt_tokens += (long)json_integer_value(json_object_get(u, "prompt_tokens"));
    st->completion_tokens += (long)json_integer_value(json_object_get(u, "completion_tokens"));
}

/* --stats' line: the wall time runs from the model being ready (load excluded, "ready in" beside it) to the last
 * response, so tok/s is the aggregate a batch of requests got, prefills included. */
static void print_stats(const run_stats *st, double load_ms, double run_ms) {
    const double run_s = run_ms / 1e3;
    fprintf(stderr,
            "frigg-run: stats: %ld responses (%ld of them errors), %ld prompt and %ld generated tokens in %.2f s after "
            "the model was ready in %.2f s: %.1f generated tok/s\n",
            st->responses, st->errors, st->prompt_tokens, st->completion_tokens, run_s, load_ms / 1e3,
            run_s > 0 ? (double)st->completion_tokens / run_s : 0.0);
}

/* The responses of the lines read so far: out[k % cap] is the k-th request's once answered. Lines are
 * read while fewer than `window` responses wait to be printed, so an early long request holds back at
 * most that many finished ones. */
typedef struct {
    json_t **out;
    long *lineno;
    unsigned char *printed; /* --unordered: printed ahead of head */
    long cap, head, next; /* head: the next response to print; next: the next request's index */
    int unordered, bad;
    run_stats *stats; /* every response counted here */
} runner;

typedef struct {
    runner *r;
    long k;
} line_ctx;

static void emit_ready(runner *r) {
    while (r->head < r->next && r->out[r->head % r->cap]) {
        json_t *o = r->out[r->head % r->cap];
        r->out[r->head % r->cap] = NULL;
        print_json_line(o);
        json_decref(o);
        r->head++;
    }
}

/* --unordered: print every answered response now, whatever its place. */
static void emit_unordered(runner *r) {
    for (long k = r->head; k < r->next; k++) {
        json_t *o = r->out[k % r->cap];
        if (!o) continue;
        r->out[k % r->cap] = NULL;
        print_json_line(o);
        json_decref(o);
        r->printed[k % r->cap] = 1;
    }
    while (r->head < r->next && r->printed[r->head % r->cap]) r->printed[r->head++ % r->cap] = 0;
}

static void on_response(void *vctx, json_t *resp) {
    line_ctx *lc = vctx;
    runner *r = lc->r;
    long line = r->lineno[lc->k % r->cap];
    json_t *err = json_object_get(resp, "error");
    if (err) {
        json_object_set_new(err, "line", json_integer(line));
        r->bad = 1;
    } else if (r->unordered) {
        json_object_set_new(resp, "line", json_integer(line));
    }
    count_response(r->stats, resp);
    r->out[lc->k % r->cap] = resp;
    free(lc);
}

static void error_line(runner *r, long k, const char *msg) {
    line_ctx *lc = frigg_xcalloc(1, sizeof *lc);
    lc->r = r;
    lc->k = k;
    on_response(lc, json_pack("{s:{s:s}}", "error", "message", msg));
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"prompt", required_argument, 0, 'p'},  {"model", required_argument, 0, 'm'},
        {"backend", required_argument, 0, 'b'}, {"threads", required_argument, 0, 't'},
        {"device", required_argument, 0, 'd'},  {"max-tokens", required_argument, 0, 'n'},
        {"tokenize", no_argument, 0, 'T'},      {"detokenize", no_argument, 0, 'D'},
        {"hf-regex", no_argument, 0, 'R'},      {"raw", no_argument, 0, 'W'},
        {"parallel", required_argument, 0, 'P'}, {"unordered", no_argument, 0, 'U'},
        {"batch-invariant", no_argument, 0, 'I'}, {"kv-dtype", required_argument, 0, 'K'},
        {"max-line-bytes", required_argument, 0, 'L'}, {"ctx", required_argument, 0, 'C'},
        {"stats", no_argument, 0, 'S'},         {"help", no_argument, 0, 'h'},
        {"dequant-rows", required_argument, 0, 'Q'},
        {"version", no_argument, 0, 'V'},       {0, 0, 0, 0}};
    frigg_session_opts so = {0};
    so.default_max_tokens = FRIGG_DEFAULT_MAX_TOKENS;
    const char *prompt = NULL;
    int mode = 0; /* 0 generate, 'T' tokenize, 'D' detokenize */
    int raw = 0, unordered = 0, stats = 0, parallel = FRIGG_SESSION_DEFAULT_SLOTS, parallel_given = 0;
    long max_line = DEFAULT_MAX_LINE;
    int c;
    while ((c = getopt_long(argc, argv, "p:m:b:t:d:n:P:h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': prompt = optarg; break;
        case 'm': so.model_dir = optarg; break;
        case 'b': so.backend = optarg; break;
        case 't':
            if (frigg_cli_threads("frigg-run", optarg, &so.threads)) return 2;
            break;
        case 'd':
        case 'n': {
            double v;
            const char *name = c == 'd' ? "--device" : "--max-tokens";
            if (frigg_cli_number("frigg-run", name, optarg, 0, 1 << 24, 1, &v)) return 2;
            if (c == 'd') so.device = (int)v;
            else so.default_max_tokens = (int)v;
            break;
        }
        case 'T':
        case 'D':
            if (mode && mode != c) { /* the later one used to win silently */
                fprintf(stderr, "frigg-run: --tokenize and --detokenize are two modes: give one\n");
                return 2;
            }
            mode = c;
            break;
        case 'P': {
            double v;
            if (frigg_cli_number("frigg-run", "--parallel", optarg, 1, 256, 1, &v)) return 2;
            parallel = (int)v, parallel_given = 1;
            break;
        }
        case 'C': {
            double v;
            if (frigg_cli_number("frigg-run", "--ctx", optarg, 1, 1 << 24, 1, &v)) return 2;
            so.ctx = (int)v;
            break;
        }
        case 'L': {
            double v;
            if (frigg_cli_number("frigg-run", "--max-line-bytes", optarg, 1, (double)MAX_MAX_LINE, 1, &v)) return 2;
            max_line = (long)v;
            break;
        }
        case 'U': unordered = 1; break;
        case 'S': stats = 1; break;
        case 'I': so.batch_invariant = 1; break;
        case 'Q':
            if (frigg_cli_dequant_rows("frigg-run", optarg, &so.dequant_rows)) return 2;
            break;
        case 'K':
            if (frigg_cli_kv_dtype("frigg-run", optarg, &so.kv_dtype)) return 2;
            break;
        case 'R': so.hf_regex = 1; break;
        case 'W': raw = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': frigg_print_version("frigg-run"); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "frigg-run: unexpected argument \"%s\" (requests come on stdin; see --help)\n", argv[optind]);
        return 2;
    }
    if (raw && !prompt) {
        fprintf(stderr, "frigg-run: --raw only applies to -p\n");
        return 2;
    }
    if (mode && prompt) {
        fprintf(stderr, "frigg-run: -p cannot be combined with --tokenize/--detokenize (give lines on stdin)\n");
        return 2;
    }
    if (mode && stats) {
        fprintf(stderr, "frigg-run: --stats counts generated tokens: it does not apply to --tokenize/--detokenize\n");
        return 2;
    }
    so.tokenizer_only = mode != 0;
    /* -p is one request: one slot, unless --parallel says otherwise (each slot's KV cache is reserved for --ctx) */
    so.slots = prompt && !parallel_given ? 1 : parallel;
    so.mem_lower = so.kv_dtype == FRIGG_DT_INT8 ? "--parallel or --ctx" : "--parallel or --ctx, or --kv-dtype int8";
    const double t_open = frigg_now_ms();
    frigg_session *s = frigg_session_open(&so);
    if (!s) {
        fprintf(stderr, "frigg-run: %s\n", frigg_error());
        return 2;
    }
    const double t_ready = frigg_now_ms();
    int bad = 0;
    run_stats counts = {0};
    if (prompt) {
        json_t *req = raw ? json_pack("{s:s}", "prompt", prompt)
                          : json_pack("{s:[{s:s,s:s}]}", "messages", "role", "user", "content", prompt);
        json_t *resp = frigg_session_handle(s, req, mode);
        print_json_line(resp);
        count_response(&counts, resp);
        bad = json_object_get(resp, "error") != NULL;
        json_decref(resp);
        json_decref(req);
    } else {
        char *line = NULL;
        long len;
        long lineno = 0;
        /* stdin on a thread of its own: a request is stepped and answered while the next line has not come */
        frigg_linein *in = frigg_linein_start(stdin, max_line, READ_AHEAD_LINES, READ_AHEAD_BYTES);
        if (!in) {
            fprintf(stderr, "frigg-run: %s\n", frigg_error());
            frigg_session_close(s);
            return 2;
        }
        runner rn = {.unordered = unordered, .cap = 4L * parallel + 64, .stats = &counts};
        rn.out = frigg_xcalloc((size_t)rn.cap, sizeof *rn.out);
        rn.lineno = frigg_xcalloc((size_t)rn.cap, sizeof *rn.lineno);
        rn.printed = frigg_xcalloc((size_t)rn.cap, 1);
        int eof = 0;
        while (!eof || rn.head < rn.next) {
            /* read while the scheduler has room and the print window is not full */
            while (!eof && frigg_session_pending(s) < parallel && rn.next - rn.head < rn.cap) {
                /* wait for a line only when nothing is left to step, and every answer so far is printed (a bad
                 * line's error among them) */
                int idle = frigg_session_pending(s) == 0;
                if (idle && unordered) emit_unordered(&rn);
                else if (idle) emit_ready(&rn);
                free(line);
                line = NULL;
                int got = frigg_linein_next(in, idle, &line, &len);
                if (got == 0) break;
                if (got < 0) {
                    eof = 1;
                    break;
                }
                lineno++;
                if (len > max_line) {
                    long k = rn.next++;
                    rn.lineno[k % rn.cap] = lineno;
                    char msg[160];
                    snprintf(msg, sizeof msg, "the line is %ld bytes long, more than --max-line-bytes %ld", len,
                             max_line);
                    error_line(&rn, k, msg);
                    continue;
                }
                while (len > 0 && line[len - 1] == '\r') line[--len] = 0;
                /* blank lines (spaces too) separate nothing: skipped */
                if (strspn(line, " \t") == (size_t)len) continue;
                long k = rn.next++;
                rn.lineno[k % rn.cap] = lineno;
                json_error_t jerr;
                /* JSON_ALLOW_NUL: "\u0000" is valid JSON; the strings are read with their lengths */
                json_t *req = json_loadb(line, (size_t)len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
                if (!req) {
                    char msg[256];
                    snprintf(msg, sizeof msg, "invalid JSON at column %d: %s", jerr.column, jerr.text);
                    error_line(&rn, k, msg);
                    continue;
                }
                line_ctx *lc = frigg_xcalloc(1, sizeof *lc);
                lc->r = &rn;
                lc->k = k;
                frigg_session_submit(s, req, mode, on_response, lc);
                json_decref(req);
                if (unordered) emit_unordered(&rn);
                else emit_ready(&rn);
            }
            if (frigg_session_pending(s) > 0) frigg_session_step(s); /* a failed step answered its requests */
            if (unordered) emit_unordered(&rn);
            else emit_ready(&rn);
        }
        bad = rn.bad;
        if (frigg_linein_error(in)) {
            fprintf(stderr, "frigg-run: reading stdin: %s\n", frigg_linein_error(in));
            bad = 1;
        }
        frigg_linein_free(in);
        free(rn.out);
        free(rn.lineno);
        free(rn.printed);
        free(line);
    }
    if (stats) print_stats(&counts, t_ready - t_open, frigg_now_ms() - t_ready);
    frigg_session_close(s);
    return bad ? 1 : 0;
}
