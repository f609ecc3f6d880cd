/* test_default_model.c — the bundled default model (golden/default, trained by
 * scripts/oracle/train_default.py) through the whole user path: chat template → tokenizer → CPU engine
 * → greedy → detokenizer, against HF's outputs in golden/default/reference.json; and its held-out NLL
 * against HF's (stated tolerance NLL_TOL nats/token). FRIGG_QUICK=1 scores 16 held-out sequences only
 * (for valgrind) and skips the NLL comparison. */
#include <jansson.h>
#include <math.h>

#include "engine/backend.h"
#include "chat/chat.h"
#include "engine/cpu_ops.h"
#include "run/generate.h"
#include "harness.h"
#include "model/model.h"
#include "eval/nll.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"

#define MARGIN_TOL 0.5
#define NLL_TOL 0.01

int main(void) {
    TEST_MAIN_BEGIN("test_default_model");
    char *dir = th_path(th_root(), "golden/default"), *rp = th_path(dir, "reference.json"),
         *tp = th_path(dir, "tokenizer.json");
    json_t *ref = json_load_file(rp, 0, NULL);
    frigg_model *m = frigg_model_load(dir);
    frigg_tokenizer *tok = frigg_tokenizer_load(tp, 0);
    CHECK(ref && m && tok, "load: %s", frigg_error());
    if (!ref || !m || !tok) TEST_MAIN_END();
    frigg_backend_opts bo = {.threads = 2, .max_seqs = 1};
    frigg_backend *b = frigg_backend_create("cpu", m, &bo);
    int V = m->cfg.vocab_size;
    float *logits = malloc(sizeof(float) * V);

    json_t *chat = json_object_get(ref, "chat");
    size_t i;
    json_t *c;
    int tf_checked = 0;
    json_array_foreach(chat, i, c) {
        const char *prompt = json_string_value(json_object_get(c, "prompt"));
        /* messages → template → ids must equal what HF fed its model */
        json_t *msgs = json_pack("[{s:s,s:s}]", "role", "user", "content", prompt);
        char *text = frigg_chat_render(msgs, NULL, 1);
        json_decref(msgs);
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK(text && frigg_tokenizer_encode(tok, text, strlen(text), &ids, &n) == 0, "%s", frigg_error());
        json_t *hin = json_object_get(c, "input_ids");
        int same = n == json_array_size(hin);
        for (size_t k = 0; same && k < n; k++) same = ids[k] == json_integer_value(json_array_get(hin, k));
        CHECK(same, "chat %zu: rendered+tokenized prompt differs from HF's input_ids", i);
        /* greedy up to the first near-tie, then teacher-forced on HF's tokens */
        json_t *g = json_object_get(c, "greedy"), *out = json_object_get(g, "output_ids"),
               *mar = json_object_get(g, "margins");
        int steps = (int)json_array_size(out);
        int32_t stop = 106;
        frigg_gen_params gp = {.max_tokens = steps, .prefix_tokens = -1, .stop_ids = &stop, .n_stop_ids = 1};
        frigg_gen_result r;
        CHECK(frigg_generate(b, 0, ids, (int)n, &gp, &r) == 0, "%s", frigg_error());
        for (int t = 0; t < steps; t++) {
            if (json_number_value(json_array_get(mar, t)) < MARGIN_TOL) break;
            int32_t want = (int32_t)json_integer_value(json_array_get(out, t));
            int32_t got = t < r.n ? r.ids[t] : stop;
            CHECK(got == want, "chat %zu step %d: frigg %d, HF %d", i, t, got, want);
            if (got != want) break;
        }
        CHECK(frigg_prefill(b, 0, ids, (int)n, (int)n, logits, NULL) == 0, "%s", frigg_error());
        for (int t = 0; t < steps; t++) {
            int32_t want = (int32_t)json_integer_value(json_array_get(out, t));
            if (json_number_value(json_array_get(mar, t)) >= MARGIN_TOL) {
                CHECK(frigg_argmax(logits, V) == want, "chat %zu teacher-forced step %d", i, t);
                tf_checked++;
            }
            int seq = 0;
            if (t + 1 < steps) CHECK(frigg_decode(b, 1, &seq, &want, logits) == 0, "%s", frigg_error());
        }
        /* the text HF decoded from its own ids */
        size_t tl;
        char *dec = frigg_tokenizer_decode(tok, r.ids, (size_t)r.n, &tl);
        if (r.n == steps - 1 && !strcmp(json_string_value(json_object_get(g, "finish_reason")), "stop"))
            CHECK(dec && !strcmp(dec, json_string_value(json_object_get(g, "text"))), "chat %zu text \"%s\"", i,
                  dec ? dec : "(null)");
        free(dec);
        frigg_gen_result_free(&r);
        free(ids);
        free(text);
    }
    printf("  chat prompts %zu, teacher-forced margin-safe steps %d\n", json_array_size(chat), tf_checked);
    CHECK(tf_checked >= 10, "too few margin-safe steps checked (%d)", tf_checked);

    /* Held-out NLL, teacher-forced with the prompt as bidirectional prefix. */
    json_t *ho = json_object_get(ref, "heldout"), *ex = json_object_get(ho, "examples");
    int quick = th_quick(), count = 0;
    double sum = 0;
    json_array_foreach(ex, i, c) {
        if (quick && i >= 16) break;
        json_t *jids = json_object_get(c, "input_ids");
        int n = (int)json_array_size(jids);
        int32_t *ids = malloc(sizeof(int32_t) * n);
        for (int k = 0; k < n; k++) ids[k] = (int32_t)json_integer_value(json_array_get(jids, k));
        double s;
        int tg;
        CHECK(frigg_nll(b, 0, ids, n, (int)json_integer_value(json_object_get(c, "prefix_tokens")), &s, &tg) == 0,
              "%s", frigg_error());
        sum += s;
        count += tg;
        free(ids);
    }
    double hf = json_number_value(json_object_get(json_object_get(ho, "nll_bf16"), "nll_mean"));
    if (!quick) {
        CHECK(count == json_integer_value(json_object_get(json_object_get(ho, "nll_bf16"), "target_tokens")),
              "target token count %d", count);
        CHECK(fabs(sum / count - hf) < NLL_TOL, "held-out NLL frigg %.5f vs HF %.5f", sum / count, hf);
        printf("  held-out NLL: frigg %.5f, HF (bf16) %.5f nats/token over %d tokens\n", sum / count, hf, count);
    }
    free(logits);
    frigg_backend_destroy(b);
    frigg_model_free(m);
    frigg_tokenizer_free(tok);
    json_decref(ref);
    free(dir);
    free(rp);
    free(tp);
    TEST_MAIN_END();
}
