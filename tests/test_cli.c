/* test_cli.c — frigg-run as a user drives it: JSON lines in and out, errors per line with the line
 * number, processing continues, exit status 1 at the end; the other executables' stubs. Uses the
 * binaries in $FRIGG_BIN (set by tests/run-tests). */
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "engine/backend.h"
#include "harness.h"
#include "model_writer.h"
#include "engine/sampler.h"
#include "base/util.h"

static const char *g_bin;

/* Run `cmd` with `input` on stdin; returns exit status, stdout in *out (malloc'd). */
static int run(const char *cmd, const char *input, char **out) {
    char *tmp = tm_tempdir();
    char in[4200], outp[4200], full[9000];
    snprintf(in, sizeof in, "%s/in", tmp);
    snprintf(outp, sizeof outp, "%s/out", tmp);
    FILE *f = fopen(in, "w");
    fputs(input, f);
    fclose(f);
    snprintf(full, sizeof full, "%s < '%s' > '%s' 2>/dev/null", cmd, in, outp);
    int st = system(full);
    *out = frigg_read_file(outp, NULL);
    tm_rmrf(tmp);
    free(tmp);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_t *line_json(const char *text, int k) { /* k-th line (0-based) as JSON */
    const char *p = text;
    for (int i = 0; i < k && p; i++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p || !*p) return NULL;
    const char *e = strchr(p, '\n');
    return json_loadb(p, e ? (size_t)(e - p) : strlen(p), 0, NULL);
}

static const char *err_msg(json_t *o) {
    json_t *e = json_object_get(o, "error");
    return e ? json_string_value(json_object_get(e, "message")) : NULL;
}

int main(void) {
    TEST_MAIN_BEGIN("test_cli");
    g_bin = getenv("FRIGG_BIN");
    if (!g_bin) g_bin = "bin";
    char *tmp = tm_tempdir();
    char *dir = frigg_path_join(tmp, "m");
    tm_spec s = tm_default();
    tm_write_model(dir, &s, NULL);
    char cmd[8192], *out = NULL;

    snprintf(cmd, sizeof cmd, "%s/frigg-run --model '%s' --backend cpu --threads 2", g_bin, dir);
    const char *input =
        "{\"id\":\"a\",\"input_ids\":[5,6,7],\"max_tokens\":4,\"stop_ids\":[]}\n"
        "this is not json\n"
        "{\"input_ids\":[5,6,7],\"max_tokens\":2,\"bogus\":1}\n"
        "{\"input_ids\":[5,6,7],\"temperature\":-1}\n"
        "\n"
        "{\"input_ids\":[5,6,7],\"max_tokens\":100}\n"
        "{\"prompt\":\"hej\"}\n"
        "{\"input_ids\":[5,6,7],\"max_tokens\":3,\"temperature\":0.8,\"seed\":11,\"top_k\":20,\"logprobs\":2,"
        "\"stop_ids\":[]}\n"
        "{\"input_ids\":[5,6,999]}\n"
        "{\"input_ids\":[5,6,7],\"max_tokens\":3,\"temperature\":0.8,\"seed\":11,\"top_k\":20,\"logprobs\":2,"
        "\"stop_ids\":[]}\n"
        "{\"input_ids\":[5,6,7],\"max_tokens\":2,\"seed\":3}\n";
    int rc = run(cmd, input, &out);
    CHECK(rc == 1, "exit status %d, want 1 after bad lines", rc);
    CHECK(out != NULL, "no output");
    if (out) {
        json_t *o;
        o = line_json(out, 0);
        CHECK(o && json_array_size(json_object_get(o, "output_ids")) == 4, "line 1: 4 tokens");
        CHECK(o && !strcmp(json_string_value(json_object_get(o, "id")), "a"), "id echoed");
        CHECK(o && !strcmp(json_string_value(json_object_get(o, "finish_reason")), "length"), "finish_reason");
        CHECK(o && json_integer_value(json_object_get(json_object_get(o, "usage"), "prompt_tokens")) == 3 &&
                  json_integer_value(json_object_get(json_object_get(o, "usage"), "completion_tokens")) == 4,
              "usage");
        CHECK(o && json_object_get(json_object_get(o, "timing"), "decode_tok_s"), "timing");
        json_decref(o);
        static const struct { int k, line; const char *needle; } errs[] = {
            {1, 2, "invalid JSON"}, {2, 3, "bogus"}, {3, 4, "temperature"},
            {4, 6, "exceeds the context"}, {5, 7, "tokenizer"}, {7, 9, "input_ids"}, {9, 11, "seed"}};
        for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
            o = line_json(out, errs[i].k);
            const char *m = o ? err_msg(o) : NULL;
            CHECK(m && strstr(m, errs[i].needle), "output line %d: want error with \"%s\", got %s", errs[i].k + 1,
                  errs[i].needle, m ? m : "(none)");
            CHECK(o && json_integer_value(json_object_get(json_object_get(o, "error"), "line")) == errs[i].line,
                  "output line %d: error line number, want %d", errs[i].k + 1, errs[i].line);
            json_decref(o);
        }
        o = line_json(out, 4);
        CHECK(o && strstr(err_msg(o) ? err_msg(o) : "", "3 tokens") && strstr(err_msg(o), "100"),
              "context error names both counts");
        json_decref(o);
        json_t *a = line_json(out, 6), *b = line_json(out, 8);
        CHECK(a && b && json_equal(json_object_get(a, "output_ids"), json_object_get(b, "output_ids")),
              "same seed, same sample");
        json_t *lp = a ? json_object_get(a, "logprobs") : NULL;
        CHECK(json_array_size(lp) == 3 && json_array_size(json_object_get(json_array_get(lp, 0), "top")) == 2,
              "logprobs shape");
        json_decref(a);
        json_decref(b);
        CHECK(line_json(out, 11) == NULL, "one output line per non-blank input line");
    }
    free(out);

    /* frequency_penalty, presence_penalty, logit_bias: accepted in range (a bias of +100 forces its id, greedy
     * or sampled), refused out of range with the field named and the line number; the logit_bias cap. */
    {
        char big[4096];
        size_t at = (size_t)snprintf(big, sizeof big, "{\"input_ids\":[5,6,7],\"logit_bias\":{");
        for (int i = 0; i <= FRIGG_MAX_LOGIT_BIAS; i++)
            at += (size_t)snprintf(big + at, sizeof big - at, "%s\"%d\":1", i ? "," : "", i);
        snprintf(big + at, sizeof big - at, "}}\n");
        char in2[8192];
        snprintf(in2, sizeof in2, "%s%s",
                 "{\"input_ids\":[5,6,7],\"max_tokens\":3,\"stop_ids\":[],\"logit_bias\":{\"42\":100}}\n"
                 "{\"input_ids\":[5,6,7],\"max_tokens\":3,\"stop_ids\":[],\"temperature\":1.5,\"seed\":2,"
                 "\"logit_bias\":{\"42\":-100,\"43\":100},\"frequency_penalty\":-2,\"presence_penalty\":2}\n"
                 "{\"input_ids\":[5,6,7],\"max_tokens\":4,\"stop_ids\":[],\"frequency_penalty\":2,"
                 "\"presence_penalty\":-1.5,\"logit_bias\":{}}\n"
                 "{\"input_ids\":[5,6,7],\"frequency_penalty\":2.5}\n"
                 "{\"input_ids\":[5,6,7],\"presence_penalty\":\"high\"}\n"
                 "{\"input_ids\":[5,6,7],\"logit_bias\":{\"96\":1}}\n"
                 "{\"input_ids\":[5,6,7],\"logit_bias\":{\"+4\":1}}\n"
                 "{\"input_ids\":[5,6,7],\"logit_bias\":{\"4\":-100.5}}\n"
                 "{\"input_ids\":[5,6,7],\"logit_bias\":[[4,1]]}\n",
                 big);
        rc = run(cmd, in2, &out);
        CHECK(rc == 1, "penalty/bias lines: exit %d, want 1", rc);
        json_t *o = out ? line_json(out, 0) : NULL, *w42 = json_pack("[iii]", 42, 42, 42),
               *w43 = json_pack("[iii]", 43, 43, 43);
        CHECK(o && json_equal(json_object_get(o, "output_ids"), w42), "logit_bias +100 on 42 (greedy) did not force it");
        json_decref(o);
        o = out ? line_json(out, 1) : NULL;
        CHECK(o && json_equal(json_object_get(o, "output_ids"), w43), "logit_bias +100 on 43 (sampled) did not force it");
        json_decref(o);
        json_decref(w42);
        json_decref(w43);
        o = out ? line_json(out, 2) : NULL;
        CHECK(o && json_array_size(json_object_get(o, "output_ids")) == 4, "penalties in range refused: %s",
              o && err_msg(o) ? err_msg(o) : "");
        json_decref(o);
        static const struct { int k; const char *needle; } bad[] = {
            {3, "frequency_penalty"}, {4, "presence_penalty"}, {5, "\"96\""}, {6, "\"+4\""},
            {7, "logit_bias"}, {8, "logit_bias"}, {9, "at most 300"}};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            o = out ? line_json(out, bad[i].k) : NULL;
            const char *m = o ? err_msg(o) : NULL;
            CHECK(m && strstr(m, bad[i].needle) &&
                      json_integer_value(json_object_get(json_object_get(o, "error"), "line")) == bad[i].k + 1,
                  "penalty/bias line %d: want an error with \"%s\", got %s", bad[i].k + 1, bad[i].needle, m ? m : "(none)");
            json_decref(o);
        }
        free(out);
    }

    /* A clean run exits 0; a missing backend is an error, not a fallback. */
    rc = run(cmd, "{\"input_ids\":[1],\"max_tokens\":1}\n", &out);
    CHECK(rc == 0, "clean run exit %d", rc);
    free(out);
    snprintf(cmd, sizeof cmd, "%s/frigg-run --model '%s' --backend tpu", g_bin, dir);
    CHECK(run(cmd, "", &out) == 2, "unknown backend accepted");
    free(out);
    /* A malformed number is a usage error in every program, never a silent 0 (common/run/cli.c). */
    static const char *bad_numbers[] = {"frigg-run -n 1.5", "frigg-run --threads two", "frigg-eval nll --threads x",
                                        "frigg-parity --min-tf abc golden/fixtures/tiny-packed",
                                        "frigg-parity --max-rel 0.02x golden/fixtures/tiny-packed",
                                        "frigg-bench --device abc decode"};
    for (size_t i = 0; i < sizeof bad_numbers / sizeof bad_numbers[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s/%s", g_bin, bad_numbers[i]);
        rc = run(cmd, "", &out);
        CHECK(rc == 2, "%s: exit %d, want 2", bad_numbers[i], rc);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s/frigg-run --model '%s' --tokenize", g_bin, dir);
    CHECK(run(cmd, "{\"prompt\":\"x\"}\n", &out) == 2, "--tokenize without tokenizer.json must fail");
    free(out);
    snprintf(cmd, sizeof cmd, "%s/frigg-run --help", g_bin);
    CHECK(run(cmd, "", &out) == 0 && out && strstr(out, "usage"), "--help");
    free(out);

    /* a line of spaces is a blank line (skipped, no answer); --threads beyond FRIGG_MAX_THREADS is an error at
     * once, not a machine out of process ids and a hang (timeout: exit 124) */
    snprintf(cmd, sizeof cmd, "%s/frigg-run --model '%s' --backend cpu", g_bin, dir);
    rc = run(cmd, "   \n\t\n", &out);
    CHECK(rc == 0 && out && !*out, "frigg-run: blank lines of spaces: exit %d, output '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "timeout 20 %s/frigg-run --model '%s' --backend cpu --threads 100000", g_bin, dir);
    rc = run(cmd, "{\"input_ids\":[5,6],\"max_tokens\":1}\n", &out);
    CHECK(rc == 2, "frigg-run --threads 100000: exit %d, want 2", rc);
    free(out);
    /* --threads has one limit in every program (common/run/cli.c: 0..FRIGG_MAX_THREADS), refused in the same
     * words before anything is loaded: frigg-quantize stopped at 1024, frigg-eval and frigg-parity at 4096 and
     * frigg-run and frigg-serve at 2^24 (the engine refusing later) */
    static const char *const thr_progs[] = {"frigg-run", "frigg-eval nll", "frigg-parity", "frigg-quantize", "frigg-serve"};
    char want_thr[160];
    snprintf(want_thr, sizeof want_thr, "bad number for --threads: \"%d\" (an integer in 0..%d)", FRIGG_MAX_THREADS + 1,
             FRIGG_MAX_THREADS);
    for (size_t i = 0; i < sizeof thr_progs / sizeof thr_progs[0]; i++) {
        snprintf(cmd, sizeof cmd, "timeout 20 %s/%s --threads %d golden/default /tmp/frigg-test-cli-no-such-out --method int8 "
                 "</dev/null 2>&1 >/dev/null", g_bin, thr_progs[i], FRIGG_MAX_THREADS + 1);
        if (strcmp(thr_progs[i], "frigg-quantize")) /* only frigg-quantize takes SRC OUT --method */
            snprintf(cmd, sizeof cmd, "timeout 20 %s/%s --threads %d%s </dev/null 2>&1 >/dev/null", g_bin, thr_progs[i],
                     FRIGG_MAX_THREADS + 1, strcmp(thr_progs[i], "frigg-serve") ? "" : " --port 0");
        FILE *p = popen(cmd, "r");
        char buf[512] = "";
        size_t n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
        buf[n] = 0;
        int st = p ? pclose(p) : -1;
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2 && strstr(buf, want_thr), "%s --threads %d: exit %d, '%s' (want 2, '%s')",
              thr_progs[i], FRIGG_MAX_THREADS + 1, WIFEXITED(st) ? WEXITSTATUS(st) : -1, buf, want_thr);
    }
    /* frigg-bench --backend cuda without a GPU (or without CUDA in the build) says so on its first line, before a
     * vram probe error or a model is built */
#ifdef FRIGG_CUDA
    int have_gpu = frigg_cuda_device_count() > 0;
#else
    int have_gpu = 0;
#endif
    if (!have_gpu) {
        char *gd = th_path(th_root(), "golden/default");
        snprintf(cmd, sizeof cmd, "%s/frigg-bench --backend cuda --model '%s' --ctx 256 --batch 1 decode 2>&1 >/dev/null", g_bin,
                 gd);
        free(gd);
        FILE *p = popen(cmd, "r");
        char first[512] = "";
        if (p && !fgets(first, sizeof first, p)) first[0] = 0;
        int st = p ? pclose(p) : -1;
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(first, "backend \"cuda\"") &&
                  (strstr(first, "no CUDA device") || strstr(first, "no CUDA (")),
              "frigg-bench --backend cuda without a GPU: exit %d, first line '%s'", WIFEXITED(st) ? WEXITSTATUS(st) : -1, first);
        /* the CUDA engine keeps an int8 KV cache: with --kv-dtype int8 the missing GPU is still the first complaint */
        gd = th_path(th_root(), "golden/default");
        snprintf(cmd, sizeof cmd, "%s/frigg-bench --backend cuda --model '%s' --ctx 256 --batch 1 --kv-dtype int8 decode "
                 "2>&1 >/dev/null", g_bin, gd);
        free(gd);
        p = popen(cmd, "r");
        first[0] = 0;
        if (p && !fgets(first, sizeof first, p)) first[0] = 0;
        st = p ? pclose(p) : -1;
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(first, "backend \"cuda\"") && !strstr(first, "int8") &&
                  (strstr(first, "no CUDA device") || strstr(first, "no CUDA (")),
              "frigg-bench --backend cuda --kv-dtype int8 without a GPU: exit %d, first line '%s'",
              WIFEXITED(st) ? WEXITSTATUS(st) : -1, first);
    }
    /* a backend without an int8 KV cache refuses it by name, before any model is built */
    {
        char *gd = th_path(th_root(), "golden/default");
        snprintf(cmd, sizeof cmd, "%s/frigg-bench --backend metal --model '%s' --ctx 64 --steps 4 --batch 1 --kv-dtype int8 "
                 "decode 2>&1 >/dev/null", g_bin, gd);
        free(gd);
        FILE *p = popen(cmd, "r");
        char first[512] = "";
        if (p && !fgets(first, sizeof first, p)) first[0] = 0;
        int st = p ? pclose(p) : -1;
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(first, "backend \"metal\"") && strstr(first, "int8 KV cache"),
              "frigg-bench --backend metal --kv-dtype int8: exit %d, first line '%s'", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
              first);
    }
    /* --ctx: the sequences' length; a request beyond it is that line's error (exit 1: a request failed); beyond the model's
     * max_position_embeddings it is a usage error at start, not a silent clamp */
    snprintf(cmd, sizeof cmd, "%s/frigg-run --model '%s' --backend cpu --ctx 32", g_bin, dir);
    rc = run(cmd, "{\"input_ids\":[5,6],\"max_tokens\":2}\n{\"input_ids\":[5,6],\"max_tokens\":40}\n", &out);
    CHECK(rc == 1 && out && strstr(out, "\"output_ids\"") && strstr(out, "exceeds the context limit of 32 tokens"),
          "frigg-run --ctx 32: exit %d, output '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s/frigg-run --model '%s' --backend cpu --ctx 1000000", g_bin, dir);
    rc = run(cmd, "{\"input_ids\":[5,6],\"max_tokens\":1}\n", &out);
    CHECK(rc == 2, "frigg-run --ctx beyond max_position_embeddings: exit %d, want 2", rc);
    free(out);
    snprintf(cmd, sizeof cmd, "%s/frigg-quantize --version", g_bin); /* implemented: tests/quantize.sh tests it */
    rc = run(cmd, "", &out);
    CHECK(rc == 0 && out && strstr(out, "frigg-quantize"), "frigg-quantize --version: exit %d", rc);
    free(out);
    snprintf(cmd, sizeof cmd, "%s/frigg-serve --version", g_bin);
    rc = run(cmd, "", &out);
    CHECK(rc == 0 && out && strstr(out, "frigg-serve"), "frigg-serve --version: exit %d", rc);
    free(out);
    /* a non-loopback address without a key is refused before anything listens (timeout: a server that did not
     * refuse would serve forever, exit 124) */
    snprintf(cmd, sizeof cmd, "timeout 20 %s/frigg-serve --model '%s' --host 0.0.0.0 --port 0", g_bin, dir);
    rc = run(cmd, "", &out);
    CHECK(rc == 2, "frigg-serve on 0.0.0.0 without a key: exit %d, want 2", rc);
    free(out);
    /* --slots: auto by default, sized to the free memory and capped at 8 on the CPU (this tiny model fits 8; the
     * server is stopped by SIGTERM once it has started: timeout's 124), a number, or an error that names both */
    snprintf(cmd, sizeof cmd, "(timeout -s TERM 4 %s/frigg-serve --model '%s' --backend cpu --threads 1 --port 0 2>&1)", g_bin,
             dir);
    rc = run(cmd, "", &out);
    CHECK(out && strstr(out, "--slots auto: 8 slots of") && strstr(out, "GiB free") && strstr(out, "x 8 slots"),
          "frigg-serve's default --slots auto: exit %d, output '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "(timeout -s TERM 4 %s/frigg-serve --model '%s' --backend cpu --threads 1 --port 0 --slots 3 2>&1)",
             g_bin, dir);
    rc = run(cmd, "", &out);
    CHECK(out && !strstr(out, "--slots auto") && strstr(out, "x 3 slots"), "frigg-serve --slots 3: exit %d, output '%s'", rc,
          out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "(%s/frigg-serve --model '%s' --slots many 2>&1)", g_bin, dir);
    rc = run(cmd, "", &out);
    CHECK(rc == 2 && out && strstr(out, "or auto"), "frigg-serve --slots many: exit %d, output '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s/frigg-eval nll --model '%s' --backend cpu", g_bin, dir);
    rc = run(cmd, "{\"input_ids\":[5,6,7,8],\"prefix_tokens\":2,\"x\":1}\n{\"input_ids\":[5,6,7,8],\"prefix_tokens\":2}\n",
             &out);
    {
        json_t *e0 = out ? line_json(out, 0) : NULL, *e1 = out ? line_json(out, 1) : NULL;
        CHECK(rc == 1 && e0 && err_msg(e0) && strstr(err_msg(e0), "unknown field"), "frigg-eval: unknown field accepted");
        CHECK(e1 && json_integer_value(json_object_get(e1, "target_tokens")) == 2 &&
                  json_real_value(json_object_get(e1, "nll_sum")) > 0,
              "frigg-eval nll line");
        json_decref(e0);
        json_decref(e1);
    }
    free(out);
    /* usage errors of frigg-eval's modes: exit 2 before any model is loaded */
    static const char *eval_usage[] = {"frigg-eval bleu", "frigg-eval kl", "frigg-eval gsm8k --chat --shots 5",
                                       "frigg-eval gsm8k --shots 6", "frigg-eval nll --ref x", "frigg-eval nll --limit 3",
                                       "frigg-eval kl --ref x --text a --jsonl b", "frigg-eval gsm8k --kv-dtype int4",
                                       "frigg-eval gsm8k extra"};
    for (size_t i = 0; i < sizeof eval_usage / sizeof eval_usage[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s/%s", g_bin, eval_usage[i]);
        CHECK(run(cmd, "", &out) == 2, "%s: want exit 2", eval_usage[i]);
        free(out);
    }

    /* The bundled default model: prompt/messages/stop strings/tokenize/detokenize end to end. */
    char *def = th_path(th_root(), "golden/default");
    snprintf(cmd, sizeof cmd, "%s/frigg-run --model '%s' --backend cpu --threads 2", g_bin, def);
    rc = run(cmd,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hvad er hovedstaden i Danmark?\"}],\"max_tokens\":30}\n"
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hvad er hovedstaden i Danmark?\"}],\"stop\":\" er\"}\n"
             "{\"prompt\":\"<bos>Hej\",\"max_tokens\":5,\"stop_ids\":[]}\n"
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hej\"}],\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}\n",
             &out);
    CHECK(rc == 1, "default model run: exit %d (one bad line expected)", rc);
    if (out) {
        json_t *o = line_json(out, 0);
        /* HF's greedy answer to this prompt (golden/default/reference.json) */
        CHECK(o && json_string_value(json_object_get(o, "text")) &&
                  !strcmp(json_string_value(json_object_get(o, "text")), "Hvor er dog") &&
                  !strcmp(json_string_value(json_object_get(o, "finish_reason")), "stop"),
              "chat answer differs from HF's \"Hvor er dog\"");
        json_decref(o);
        o = line_json(out, 1);
        CHECK(o && json_string_value(json_object_get(o, "text")) &&
                  !strcmp(json_string_value(json_object_get(o, "text")), "Hvor") &&
                  !strcmp(json_string_value(json_object_get(o, "finish_reason")), "stop"),
              "stop string \" er\" must cut before it");
        json_decref(o);
        o = line_json(out, 2);
        CHECK(o && json_array_size(json_object_get(o, "output_ids")) == 5 && json_object_get(o, "text"),
              "raw prompt request");
        json_decref(o);
        o = line_json(out, 3);
        CHECK(o && err_msg(o) && strstr(err_msg(o), "stop"), "5 stop strings must be refused");
        json_decref(o);
    }
    free(out);
    snprintf(cmd, sizeof cmd, "%s/frigg-run --model '%s' --tokenize", g_bin, def);
    rc = run(cmd, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hej\"}]}\n", &out);
    json_t *o = out ? line_json(out, 0) : NULL;
    CHECK(rc == 0 && o && json_array_size(json_object_get(o, "ids")) > 5 &&
              !strcmp(json_string_value(json_object_get(o, "text")), "<bos><|turn>user\nHej<turn|>\n<|turn>model\n") &&
              json_integer_value(json_array_get(json_object_get(o, "ids"), 0)) == 2,
          "--tokenize messages");
    json_decref(o);
    free(out);
    rc = run(cmd,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Vejret?\"}],\"tools\":[{\"type\":\"function\","
             "\"function\":{\"name\":\"vejr\",\"description\":\"Vejret\",\"parameters\":{\"type\":\"object\","
             "\"properties\":{\"by\":{\"type\":\"string\"}},\"required\":[\"by\"]}}}]}\n",
             &out);
    o = out ? line_json(out, 0) : NULL;
    CHECK(rc == 0 && o && strstr(json_string_value(json_object_get(o, "text")),
                                 "<|tool>declaration:vejr{description:<|\"|>Vejret<|\"|>"),
          "--tokenize renders tool declarations into the system turn");
    json_decref(o);
    free(out);
    snprintf(cmd, sizeof cmd, "%s/frigg-run --model '%s' --detokenize", g_bin, def);
    rc = run(cmd, "{\"ids\":[2431,698,1106]}\n{\"ids\":[999999]}\n", &out);
    o = out ? line_json(out, 0) : NULL;
    CHECK(rc == 1 && o && !strcmp(json_string_value(json_object_get(o, "text")), "Hvor er dog"), "--detokenize");
    json_decref(o);
    free(out);
    free(def);
    tm_rmrf(tmp);
    free(tmp);
    free(dir);
    TEST_MAIN_END();
}
