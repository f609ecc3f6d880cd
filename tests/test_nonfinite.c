/* test_nonfinite.c — a model whose weights hold NaN or an infinity makes logits that are not finite; every id
 * drawn from them would be arbitrary (a NaN row's argmax is id 0, "<pad>"), so generation must end with an error
 * naming the step and the sequence instead of answering. Checked on the CPU engine for the rows whose values the
 * host sees: sampled top-k (TOPK rows), logprobs or penalties (LOGITS rows), through frigg_generate and through
 * a session (the scheduler, two requests at once, each error naming its own sequence slot); and a finite model
 * still answers. Greedy rows bring back only the engine's argmax id, which the CPU engine answers as -1 when
 * its value is not finite. Scoring refuses such logits too: frigg_nll and frigg_kl_run (frigg-eval nll and kl,
 * frigg-quantize --check) end the sequence with the same words, whichever of the two models is broken, rather
 * than a NaN score (which JSON cannot carry: frigg-eval waited for ever on the nll line it could not write, and
 * kl printed a NULL). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "eval/kl.h"
#include "eval/nll.h"
#include "run/generate.h"
#include "harness.h"
#include "model/model.h"
#include "model_writer.h"
#include "run/session.h"
#include "base/util.h"

/* A test model whose tensor `name` is filled with the bf16 value `bits` (0x7FC0 NaN, 0x7F80 +Inf): in rows
 * [r0, r1) of it, or all of it when r1 is 0. */
static char *write_model(const char *tmp, const char *sub, const char *name, uint16_t bits, int r0, int r1) {
    char *dir = frigg_path_join(tmp, sub);
    tm_spec s = tm_default();
    tm_write_model(dir, &s, NULL);
    tm_tensor *t;
    int n = tm_make_tensors(&s, &t);
    for (int i = 0; i < n; i++) {
        if (strcmp(t[i].name, name)) continue;
        size_t cols = t[i].ndim == 2 ? (size_t)t[i].shape[1] : 1, rows = (size_t)t[i].shape[0];
        size_t a = (size_t)r0 * cols, b = (r1 ? (size_t)r1 : rows) * cols;
        for (size_t j = a; j < b; j++) t[i].data[j] = bits;
    }
    char *p = frigg_path_join(dir, "model.safetensors");
    tm_write_safetensors(p, t, n, 0);
    free(p);
    tm_free_tensors(t, n);
    return dir;
}

static frigg_backend *open_cpu(frigg_model *m) {
    frigg_backend_opts o = {.threads = 2, .max_seqs = 2};
    return frigg_backend_create("cpu", m, &o);
}

/* frigg_generate with these parameters must fail, naming the prefill step (0) of sequence `seq`. */
static void expect_failure(frigg_backend *b, int seq, const frigg_gen_params *gp, const char *what) {
    int32_t ids[4] = {5, 17, 3, 88};
    frigg_gen_result r;
    int rc = frigg_generate(b, seq, ids, 4, gp, &r);
    char want[64];
    snprintf(want, sizeof want, "of sequence %d", seq);
    CHECK(rc == -1 && strstr(frigg_error(), "logits are not finite") && strstr(frigg_error(), "at step 0 (the prefill)") &&
              strstr(frigg_error(), want),
          "%s: %s", what, rc ? frigg_error() : "answered");
    if (rc == 0) frigg_gen_result_free(&r);
}

static void generate_cases(const char *dir, const char *what) {
    frigg_model *m = frigg_model_load(dir);
    CHECK(m != NULL, "%s: load: %s", what, frigg_error());
    if (!m) return;
    frigg_backend *b = open_cpu(m);
    CHECK(b != NULL, "%s: %s", what, frigg_error());
    if (b) {
        char w[160];
        frigg_gen_params topk = {.max_tokens = 3, .prefix_tokens = -1,
                                 .sampling = {.temperature = 0.8f, .top_k = 5, .top_p = 1, .seed = 3}};
        snprintf(w, sizeof w, "%s, sampled top-k", what);
        expect_failure(b, 1, &topk, w);
        frigg_gen_params lp = {.max_tokens = 3, .prefix_tokens = -1, .logprobs = 2, .sampling = {.top_p = 1}};
        snprintf(w, sizeof w, "%s, greedy with logprobs", what);
        expect_failure(b, 0, &lp, w);
        frigg_gen_params pen = {.max_tokens = 3, .prefix_tokens = -1,
                                .sampling = {.top_p = 1, .repetition_penalty = 1.3f}};
        snprintf(w, sizeof w, "%s, greedy with a repetition penalty", what);
        expect_failure(b, 0, &pen, w);
        frigg_gen_params sample = {.max_tokens = 3, .prefix_tokens = -1,
                                   .sampling = {.temperature = 1, .top_p = 0.9f, .seed = 1}};
        snprintf(w, sizeof w, "%s, sampled top-p", what);
        expect_failure(b, 1, &sample, w);
    }
    frigg_backend_destroy(b);
    frigg_model_free(m);
}

static void keep(void *ctx, json_t *resp) {
    json_t **slot = ctx;
    *slot = resp;
}

/* The same through a session: two requests in one engine step, each answered with an error naming its slot. */
static void session_pair(const char *dir) {
    frigg_session_opts so = {.model_dir = dir, .backend = "cpu", .threads = 2, .default_max_tokens = 3, .slots = 2};
    frigg_session *s = frigg_session_open(&so);
    CHECK(s != NULL, "session: %s", frigg_error());
    if (!s) return;
    json_t *resp[2] = {NULL, NULL};
    const char *reqs[2] = {"{\"input_ids\":[5,6,7],\"temperature\":0.7,\"seed\":1}",
                           "{\"input_ids\":[9,8],\"temperature\":0.7,\"top_k\":4,\"seed\":2,\"id\":\"b\"}"};
    for (int i = 0; i < 2; i++) {
        json_t *q = json_loads(reqs[i], 0, NULL);
        frigg_session_submit(s, q, 0, keep, &resp[i]);
        json_decref(q);
    }
    for (int guard = 0; guard < 100 && (!resp[0] || !resp[1]); guard++)
        if (frigg_session_step(s) < 0) break;
    int seen[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        const char *msg = json_string_value(json_object_get(json_object_get(resp[i], "error"), "message"));
        CHECK(msg && strstr(msg, "logits are not finite") && strstr(msg, "at step 0"), "request %d: %s", i,
              msg ? msg : "answered");
        if (msg && strstr(msg, "of sequence 0")) seen[0]++;
        if (msg && strstr(msg, "of sequence 1")) seen[1]++;
        json_decref(resp[i]);
    }
    CHECK(seen[0] == 1 && seen[1] == 1, "the two errors name sequences 0 and 1 (%d, %d)", seen[0], seen[1]);
    frigg_session_close(s);
}

/* The CUDA engine finds a greedy prompt row's id on the device (the argmax and its value): a prompt alone and
 * two prompts prefilled as one group must both answer an id outside the vocabulary when the logits are not
 * finite (every one NaN: the NaN lm_head; +Inf embeddings make NaN states), and ids inside it for the finite
 * model. */
static void cuda_greedy_prompts(const char *dir, const char *what, int finite) {
#ifdef FRIGG_CUDA
    if (frigg_cuda_device_count() < 1) return;
    frigg_model *m = frigg_model_load(dir);
    frigg_backend_opts o = {.max_seqs = 2};
    frigg_backend *b = m ? frigg_backend_create("cuda", m, &o) : NULL;
    CHECK(b != NULL, "%s (cuda): %s", what, frigg_error());
    if (b) {
        int V = m->cfg.vocab_size;
        int32_t p0[4] = {5, 17, 3, 88}, p1[3] = {9, 8, 7}, out[2] = {-7, -7};
        frigg_row one = {.seq = 0, .prefill = 1, .ids = p0, .n = 4, .prefix_len = 4, .want = FRIGG_WANT_GREEDY,
                         .out_id = &out[0]};
        CHECK(frigg_step(b, &one, 1) == 0, "%s (cuda), one prompt: %s", what, frigg_error());
        CHECK(finite ? out[0] >= 0 && out[0] < V : out[0] < 0 || out[0] >= V, "%s (cuda), one prompt: greedy id %d",
              what, out[0]);
        frigg_row two[2] = {{.seq = 0, .prefill = 1, .ids = p0, .n = 4, .prefix_len = 2, .want = FRIGG_WANT_GREEDY,
                             .out_id = &out[0]},
                            {.seq = 1, .prefill = 1, .ids = p1, .n = 3, .prefix_len = 3, .want = FRIGG_WANT_GREEDY,
                             .out_id = &out[1]}};
        out[0] = out[1] = -7;
        CHECK(b->seq_reset(b, 0) == 0 && frigg_step(b, two, 2) == 0, "%s (cuda), two prompts: %s", what, frigg_error());
        for (int i = 0; i < 2; i++)
            CHECK(finite ? out[i] >= 0 && out[i] < V : out[i] < 0 || out[i] >= V,
                  "%s (cuda), two prompts: prompt %d's greedy id %d", what, i, out[i]);
    }
    frigg_backend_destroy(b);
    frigg_model_free(m);
#else
    (void)dir, (void)what, (void)finite;
#endif
}

static void kl_seq(void *ctx, int k, const frigg_kl_seq *r) {
    int *errs = ctx;
    (void)k;
    if (r->error && strstr(r->error, "logits are not finite")) (*errs)++;
}

/* frigg_nll and frigg_kl_run on a model whose logits are NaN: errors, never a score. */
static void scoring_cases(const char *nan_dir, const char *fine_dir) {
    frigg_model *nm = frigg_model_load(nan_dir), *fm = frigg_model_load(fine_dir);
    frigg_backend *nb = nm ? open_cpu(nm) : NULL, *fb = fm ? open_cpu(fm) : NULL;
    CHECK(nb && fb, "scoring: %s", frigg_error());
    if (nb && fb) {
        int32_t ids[4] = {5, 17, 3, 88};
        double nll = 0;
        int tg = 0;
        int rc = frigg_nll(nb, 0, ids, 4, 2, &nll, &tg);
        CHECK(rc == -1 && strstr(frigg_error(), "logits are not finite (NaN at token id"),
              "frigg_nll on a NaN model: %s", rc ? frigg_error() : "scored");
        CHECK(frigg_nll(fb, 0, ids, 4, 2, &nll, &tg) == 0 && isfinite(nll), "frigg_nll, finite model: %s", frigg_error());
        frigg_eval_seq seqs[2] = {{.ids = ids, .n = 4, .prefix = 1}, {.ids = ids, .n = 3, .prefix = 2}};
        for (int ref_is_nan = 0; ref_is_nan < 2; ref_is_nan++) {
            frigg_kl_summary s;
            int errs = 0;
            int failed = frigg_kl_run(ref_is_nan ? nb : fb, ref_is_nan ? fb : nb, seqs, 2, 2, kl_seq, &errs, &s);
            CHECK(failed == 2 && errs == 2 && s.tokens == 0, "kl with the %s NaN: %d failed, %d errors, %ld tokens",
                  ref_is_nan ? "reference" : "model", failed, errs, s.tokens);
        }
        float row[3] = {0, INFINITY, 1};
        CHECK(frigg_logits_check_finite(row, 3, 2, 1) == -1 && strstr(frigg_error(), "+Inf at token id 1"), "+Inf: %s",
              frigg_error());
    }
    frigg_backend_destroy(nb);
    frigg_backend_destroy(fb);
    frigg_model_free(nm);
    frigg_model_free(fm);
}

int main(void) {
    TEST_MAIN_BEGIN("test_nonfinite");
    char *tmp = tm_tempdir();
    char *nan_head = write_model(tmp, "nan-head", "lm_head.weight", 0x7FC0, 0, 0);
    char *inf_embed = write_model(tmp, "inf-embed", "model.embed_tokens.weight", 0x7F80, 0, 0);
    char *nan_row = write_model(tmp, "nan-row", "lm_head.weight", 0x7FC0, 40, 41); /* one token's logit */
    generate_cases(nan_head, "NaN lm_head");
    generate_cases(inf_embed, "+Inf embedding");
    session_pair(nan_head);
    cuda_greedy_prompts(nan_head, "NaN lm_head", 0);
    cuda_greedy_prompts(inf_embed, "+Inf embedding", 0);

    /* one NaN logit among finite ones: a LOGITS row (every value checked) catches it */
    frigg_model *m = frigg_model_load(nan_row);
    frigg_backend *b = m ? open_cpu(m) : NULL;
    CHECK(b != NULL, "nan-row: %s", frigg_error());
    if (b) {
        frigg_gen_params lp = {.max_tokens = 3, .prefix_tokens = -1, .logprobs = 1, .sampling = {.top_p = 1}};
        expect_failure(b, 0, &lp, "one NaN logit, logprobs");
        /* greedy: only the argmax id comes back from the engine */
        frigg_gen_params g = {.max_tokens = 2, .prefix_tokens = -1, .sampling = {.top_p = 1}};
        frigg_backend_destroy(b);
        frigg_model_free(m);
        m = frigg_model_load(nan_head);
        b = m ? open_cpu(m) : NULL;
        int32_t ids[3] = {5, 6, 7};
        frigg_gen_result r;
        int rc = b ? frigg_generate(b, 0, ids, 3, &g, &r) : -1;
        CHECK(rc == -1 && strstr(frigg_error(), "not finite") && strstr(frigg_error(), "sequence 0"),
              "greedy rows on the CPU engine: a NaN model answered %s", rc == 0 ? "ids" : frigg_error());
        if (rc == 0) frigg_gen_result_free(&r);
    }
    frigg_backend_destroy(b);
    frigg_model_free(m);

    /* a finite model still answers every kind of row */
    char *fine = frigg_path_join(tmp, "fine");
    tm_spec s = tm_default();
    tm_write_model(fine, &s, NULL);
    m = frigg_model_load(fine);
    b = m ? open_cpu(m) : NULL;
    if (b) {
        int32_t ids[3] = {5, 6, 7};
        frigg_gen_params ps[3] = {{.max_tokens = 4, .prefix_tokens = -1, .stop_ids = NULL,
                                   .sampling = {.temperature = 0.8f, .top_k = 5, .top_p = 1, .seed = 3}},
                                  {.max_tokens = 4, .prefix_tokens = -1, .logprobs = 2, .sampling = {.top_p = 1}},
                                  {.max_tokens = 4, .prefix_tokens = -1, .sampling = {.top_p = 1}}};
        for (int i = 0; i < 3; i++) {
            frigg_gen_result r;
            int rc = frigg_generate(b, 0, ids, 3, &ps[i], &r);
            CHECK(rc == 0 && r.n == 4, "finite model, case %d: %s", i, rc ? frigg_error() : "short");
            if (rc == 0) frigg_gen_result_free(&r);
        }
    }
    frigg_backend_destroy(b);
    frigg_model_free(m);
    cuda_greedy_prompts(fine, "finite model", 1);
    scoring_cases(nan_head, fine);
    tm_rmrf(tmp);
    free(tmp);
    free(nan_head);
    free(inf_embed);
    free(nan_row);
    free(fine);
    TEST_MAIN_END();
}
