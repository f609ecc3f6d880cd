/* test_scheduler.c — many requests at once on the CPU engine, with the bundled default model (real
 * trained weights and tokenizer, so stop strings, tools and text are real):
 *  - batch invariance (the CPU engine; the CUDA engine too where a GPU is present): a mixed set (greedy, temperature + seed, top-k, top-p, repetition penalty, stop
 *    strings, logprobs, messages with tools, a prefix length, frequency/presence penalties, a logit_bias)
 *    submitted together to one session gives,
 *    request by request, exactly the response each gives alone in a session of one slot (also with a prefill
 *    share, where prompts joining running batches wait for a step or run by layer slices on the CUDA engine);
 *  - cancellation: a running and a queued request end as "cancelled" and their slots are free by the next
 *    step; a cancel of an unknown handle is an error;
 *  - greedy decoding two steps deep (the engine holds two) gives what one step at a time gives;
 *  - n > 1 choices share one prefill through fork: greedy choices equal a single greedy run, and the
 *    sampled choice i equals a single run with seed + i (a fork continues as a fresh prefill);
 *  - submit refuses what can never run (context, choices) with a message;
 *  - score requests (every prompt row's logits, nothing generated) beside generation requests: the
 *    generated ids are those of each request alone, the logits handed to on_logits bit for bit those of
 *    frigg_prefill alone, the nll from them frigg_nll's; a queued score can be cancelled; a score that
 *    breaks the rule (choices, generation parameters, on_logits) is refused;
 *  - logit_bias: +100 forces an id under greedy, -100 keeps the greedy id out, logprobs stay the model's; n = 3
 *    biased, penalised choices of one prefill each see the unbiased row and equal single runs seed for seed. */
#include <jansson.h>
#include <string.h>

#include "engine/backend.h"
#include "run/generate.h"
#include "harness.h"
#include "model/model.h"
#include "eval/nll.h"
#include "run/scheduler.h"
#include "run/session.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"

static const char *const MIXED[] = {
    "{\"id\":1,\"prompt\":\"<bos>Der var engang\",\"max_tokens\":24}",
    "{\"id\":2,\"prompt\":\"<bos>Der var engang\",\"max_tokens\":24,\"temperature\":0.9,\"seed\":7}",
    "{\"id\":3,\"messages\":[{\"role\":\"user\",\"content\":\"Hvad er hovedstaden i Danmark?\"}],\"max_tokens\":20,"
    "\"temperature\":1.2,\"top_k\":8,\"seed\":3}",
    "{\"id\":4,\"prompt\":\"<bos>The old king\",\"max_tokens\":20,\"temperature\":1.0,\"top_p\":0.8,\"seed\":11}",
    "{\"id\":5,\"prompt\":\"<bos>Det var en\",\"max_tokens\":20,\"repetition_penalty\":1.3}",
    "{\"id\":6,\"prompt\":\"<bos>Der var engang\",\"max_tokens\":30,\"stop\":[\" en\",\"og\"]}",
    "{\"id\":7,\"prompt\":\"<bos>Han sagde\",\"max_tokens\":8,\"logprobs\":3,\"temperature\":0.7,\"seed\":5}",
    "{\"id\":8,\"messages\":[{\"role\":\"user\",\"content\":\"Hvad er vejret?\"}],\"tools\":[{\"type\":\"function\","
    "\"function\":{\"name\":\"vejr\",\"description\":\"vejret\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"by\":{\"type\":\"string\"}}}}}],\"max_tokens\":24,\"temperature\":0.8,\"seed\":2}",
    "{\"id\":9,\"input_ids\":[2,105,2364,107,819,1175,106],\"prefix_tokens\":3,\"max_tokens\":12}",
    "{\"id\":10,\"prompt\":\"<bos>En\",\"max_tokens\":0}",
    "{\"id\":11,\"prompt\":\"<bos>Der var engang\",\"max_tokens\":24,\"frequency_penalty\":1.5,\"presence_penalty\":0.5}",
    "{\"id\":12,\"prompt\":\"<bos>The old king\",\"max_tokens\":16,\"temperature\":0.9,\"seed\":8,\"logprobs\":2,"
    "\"logit_bias\":{\"1234\":4,\"3103\":-100,\"652\":2.5},\"presence_penalty\":-0.5}",
};
enum { NMIXED = sizeof MIXED / sizeof MIXED[0] };

static void keep(void *ctx, json_t *resp) { *(json_t **)ctx = resp; }

/* The response without its timing (which differs run to run). */
static char *canon(json_t *r) {
    json_t *c = json_deep_copy(r);
    json_object_del(c, "timing");
    char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(c);
    return s;
}

static void test_batch_invariance(const char *dir, const char *backend, int batch_invariant, double prefill_share) {
    frigg_session_opts one = {.model_dir = dir, .backend = backend, .threads = 2, .default_max_tokens = 16, .slots = 1,
                              .batch_invariant = batch_invariant};
    frigg_session_opts many = one;
    many.slots = 6; /* fewer slots than requests: some wait in the queue and join running batches later */
    many.prefill_share = prefill_share; /* > 0: prompts that join running batches wait, or run by layer slices */
    fprintf(stderr, "batch invariance: %s engine, prefill share %g\n", backend, prefill_share);
    frigg_session *s1 = frigg_session_open(&one), *sn = frigg_session_open(&many);
    CHECK(s1 && sn, "session: %s", frigg_error());
    if (!s1 || !sn) return;
    json_t *alone[NMIXED], *together[NMIXED];
    for (int i = 0; i < NMIXED; i++) {
        json_t *req = json_loads(MIXED[i], 0, NULL);
        CHECK(req != NULL, "request %d does not parse", i);
        alone[i] = frigg_session_handle(s1, req, 0);
        together[i] = NULL;
        frigg_session_submit(sn, req, 0, keep, &together[i]);
        json_decref(req);
    }
    int steps = 0, maxpend = 0;
    for (int p; (p = frigg_session_pending(sn)) > 0; steps++) {
        if (p > maxpend) maxpend = p;
        CHECK(frigg_session_step(sn) >= 0, "step: %s", frigg_error());
    }
    CHECK(maxpend == NMIXED, "only %d requests were pending at once", maxpend);
    int distinct_sampled = 0;
    char *first = canon(alone[0]);
    for (int i = 0; i < NMIXED; i++) {
        CHECK(together[i] != NULL, "request %d got no response", i + 1);
        if (!together[i]) continue;
        CHECK(!json_object_get(alone[i], "error"), "request %d alone: %s", i + 1,
              json_string_value(json_object_get(json_object_get(alone[i], "error"), "message")));
        char *a = canon(alone[i]), *t = canon(together[i]);
        CHECK(!strcmp(a, t), "request %d differs beside the others:\n  alone    %s\n  together %s", i + 1, a, t);
        distinct_sampled += i > 0 && strcmp(a, first) != 0;
        free(a);
        free(t);
    }
    free(first);
    CHECK(distinct_sampled > 3, "the mixed requests are not mixed (%d differ from the first)", distinct_sampled);
    /* the stop-string request stopped on a stop string, the tools request parsed (or said why not) */
    CHECK(!strcmp(json_string_value(json_object_get(together[5], "finish_reason")), "stop"),
          "request 6 did not stop on its stop strings");
    CHECK(json_array_size(json_object_get(together[6], "logprobs")) ==
              json_array_size(json_object_get(together[6], "output_ids")),
          "request 7: logprobs for every id");
    CHECK(json_array_size(json_object_get(together[9], "output_ids")) == 0, "request 10: max_tokens 0");
    /* the penalties changed request 1's greedy answer; request 12's bias of -100 kept its id out */
    CHECK(!json_equal(json_object_get(together[10], "output_ids"), json_object_get(together[0], "output_ids")),
          "request 11: frequency/presence penalties changed nothing");
    json_t *o12 = json_object_get(together[11], "output_ids");
    int banned = 0;
    for (size_t i = 0; i < json_array_size(o12); i++) banned |= json_integer_value(json_array_get(o12, i)) == 3103;
    CHECK(json_array_size(o12) > 0 && !banned, "request 12: %zu ids, the id biased by -100 among them: %d",
          json_array_size(o12), banned);
    for (int i = 0; i < NMIXED; i++) {
        json_decref(alone[i]);
        json_decref(together[i]);
    }
    frigg_session_close(s1);
    frigg_session_close(sn);
}

typedef struct {
    int done;
    char finish[3][16];
    int n[3];
    int32_t ids[3][64];
    char *error;
} result_box;

static void on_done(void *ctx, const frigg_sched_result *r) {
    result_box *b = ctx;
    b->done++;
    if (r->error) {
        b->error = frigg_xstrdup(r->error);
        return;
    }
    for (int c = 0; c < r->n_choices && c < 3; c++) {
        snprintf(b->finish[c], sizeof b->finish[c], "%s", r->choices[c]->finish_reason);
        b->n[c] = r->choices[c]->n;
        memcpy(b->ids[c], r->choices[c]->ids, sizeof(int32_t) * (size_t)(r->choices[c]->n < 64 ? r->choices[c]->n : 64));
    }
}

static void test_cancel_and_fork(const char *dir) {
    frigg_model *m = frigg_model_load(dir);
    char *tp = th_path(dir, "tokenizer.json");
    frigg_tokenizer *tok = frigg_tokenizer_load(tp, 0);
    free(tp);
    CHECK(m && tok, "load: %s", frigg_error());
    if (!m || !tok) return;
    frigg_backend_opts bo = {.threads = 2, .max_seqs = 3, .max_ctx = 128};
    frigg_backend *b = frigg_backend_create("cpu", m, &bo);
    frigg_sched *s = frigg_sched_new(b, tok, 0);
    int32_t prompt[] = {2, 105, 2364, 107, 819, 1175, 106, 107, 105, 4368, 107};
    int np = sizeof prompt / sizeof prompt[0];
    frigg_sched_req q = {.ids = prompt, .n = np, .prefix_len = np, .n_choices = 2, .on_done = on_done};
    q.gen.max_tokens = 40;
    /* cancellation: two running (2 + 1 slots), one queued */
    result_box r1 = {0}, r2 = {0}, r3 = {0};
    q.ctx = &r1;
    uint64_t h1 = frigg_sched_submit(s, &q);
    q.n_choices = 1;
    q.ctx = &r2;
    uint64_t h2 = frigg_sched_submit(s, &q);
    q.ctx = &r3;
    uint64_t h3 = frigg_sched_submit(s, &q);
    CHECK(h1 && h2 && h3, "submit: %s", frigg_error());
    CHECK(frigg_sched_step(s) == 3 && frigg_sched_step(s) == 3, "steps: %s", frigg_error());
    CHECK(frigg_sched_slots_in_use(s) == 3, "slots in use %d, want 3", frigg_sched_slots_in_use(s));
    CHECK(frigg_sched_cancel(s, h1) == 0 && frigg_sched_cancel(s, h3) == 0, "cancel: %s", frigg_error());
    CHECK(frigg_sched_cancel(s, 999) == -1, "cancel of an unknown handle accepted");
    int left = frigg_sched_step(s);
    CHECK(left == 1 && r1.done == 1 && r3.done == 1 && !strcmp(r1.finish[0], "cancelled") &&
              !strcmp(r1.finish[1], "cancelled") && !strcmp(r3.finish[0], "cancelled") && r3.n[0] == 0 && r1.n[0] >= 2,
          "after cancel: %d pending, finish %s/%s/%s, %d ids", left, r1.finish[0], r1.finish[1], r3.finish[0], r1.n[0]);
    CHECK(frigg_sched_slots_in_use(s) == 1, "slots in use after cancel: %d, want 1", frigg_sched_slots_in_use(s));
    CHECK(frigg_sched_cancel(s, h1) == 0, "a second cancel of an ended request is not an error");
    while (frigg_sched_step(s) > 0) {
    }
    CHECK(r2.done == 1 && frigg_sched_slots_in_use(s) == 0, "the remaining request did not finish alone");

    /* fork: n = 3 choices share one prefill; greedy choices equal one greedy run */
    result_box g3 = {0}, g1 = {0};
    q.n_choices = 3;
    q.ctx = &g3;
    q.gen.max_tokens = 24;
    CHECK(frigg_sched_submit(s, &q), "%s", frigg_error());
    while (frigg_sched_step(s) > 0) {
    }
    q.n_choices = 1;
    q.ctx = &g1;
    CHECK(frigg_sched_submit(s, &q), "%s", frigg_error());
    while (frigg_sched_step(s) > 0) {
    }
    int same = g1.n[0] > 0;
    for (int c = 0; c < 3; c++) same &= g3.n[c] == g1.n[0] && !memcmp(g3.ids[c], g1.ids[0], sizeof(int32_t) * g1.n[0]);
    CHECK(same, "greedy choices from a forked prefill differ from a fresh run (%d/%d/%d vs %d ids)", g3.n[0], g3.n[1],
          g3.n[2], g1.n[0]);
    /* Greedy-only steps ran two deep (the step behind queued before the ids of the one in front were read),
     * and gave what one step at a time gives: frigg_generate on the idle engine. */
    CHECK(frigg_sched_steps_ahead(s) > 0, "no step was queued ahead of another");
    frigg_gen_params gp1 = {.max_tokens = 24, .prefix_tokens = np};
    frigg_gen_result one_by_one;
    CHECK(frigg_generate(b, 0, prompt, np, &gp1, &one_by_one) == 0, "%s", frigg_error());
    CHECK(one_by_one.n == g1.n[0] && !memcmp(one_by_one.ids, g1.ids[0], sizeof(int32_t) * g1.n[0]),
          "greedy steps queued two deep differ from one step at a time (%d vs %d ids)", g1.n[0], one_by_one.n);
    frigg_gen_result_free(&one_by_one);
    /* sampled: choice c with seed 40 + c == a single run with seed 40 + c */
    result_box s3 = {0};
    q.gen.sampling = (frigg_sampler_params){.temperature = 1.1f, .top_k = 20, .seed = 40};
    q.n_choices = 3;
    q.ctx = &s3;
    CHECK(frigg_sched_submit(s, &q), "%s", frigg_error());
    while (frigg_sched_step(s) > 0) {
    }
    int differ = 0;
    for (int c = 0; c < 3; c++) {
        result_box one = {0};
        frigg_sched_req q1 = q;
        q1.n_choices = 1;
        q1.gen.sampling.seed = 40 + (uint64_t)c;
        q1.ctx = &one;
        CHECK(frigg_sched_submit(s, &q1), "%s", frigg_error());
        while (frigg_sched_step(s) > 0) {
        }
        CHECK(one.n[0] == s3.n[c] && !memcmp(one.ids[0], s3.ids[c], sizeof(int32_t) * one.n[0]),
              "sampled choice %d from a fork differs from a fresh run with its seed", c);
        differ += c > 0 && (s3.n[c] != s3.n[0] || memcmp(s3.ids[c], s3.ids[0], sizeof(int32_t) * s3.n[0]));
    }
    CHECK(differ > 0, "the sampled choices are all the same (their seeds are not their own)");
    /* what can never run */
    q.n_choices = 4;
    CHECK(!frigg_sched_submit(s, &q) && strstr(frigg_error(), "choices"), "4 choices on 3 slots: %s", frigg_error());
    q.n_choices = 1;
    q.gen.max_tokens = 200;
    CHECK(!frigg_sched_submit(s, &q) && strstr(frigg_error(), "context limit"), "context: %s", frigg_error());
    frigg_sched_free(s);
    frigg_backend_destroy(b);
    frigg_tokenizer_free(tok);
    frigg_model_free(m);
}

/* frigg_sched_set_prefill_tokens: four prompts submitted together, a limit of one prompt's tokens. Each step
 * then prefills one of them, oldest first, so their first tokens, and their ends, come a step apart, where
 * without the limit all four are prefilled in one step and end in the same step; the ids are the same either
 * way (the CPU engine's rows do not depend on what runs beside them). With a prefill share beside the limit,
 * prompts within the limit are not held back by the share: the same steps as without it (the share alone
 * would keep the later prompts out of the step that first meets a decode batch of a new size). */
typedef struct {
    result_box r;
    const int *step;
    int done_step;
} step_box;

static void on_done_step(void *ctx, const frigg_sched_result *r) {
    step_box *b = ctx;
    b->done_step = *b->step;
    on_done(&b->r, r);
}

static void test_prefill_tokens(const char *dir) {
    frigg_model *m = frigg_model_load(dir);
    CHECK(m != NULL, "load: %s", frigg_error());
    if (!m) return;
    frigg_backend_opts bo = {.threads = 2, .max_seqs = 4, .max_ctx = 64};
    frigg_backend *b = frigg_backend_create("cpu", m, &bo);
    int32_t prompt[4][6] = {{2, 105, 2364, 107, 819, 1175}, {2, 105, 2364, 107, 4368, 107},
                            {2, 818, 5279, 529, 7001, 563}, {2, 1602, 3103, 106, 107, 105}};
    step_box box[3][4];
    memset(box, 0, sizeof box);
    for (int lim = 0; lim < 3; lim++) { /* 0: no limit; 1: 6 tokens, one prompt per step; 2: the same, share 0.5 */
        frigg_sched *s = frigg_sched_new(b, NULL, 0);
        CHECK(s != NULL, "%s", frigg_error());
        if (!s) break;
        frigg_sched_set_prefill_tokens(s, lim ? 6 : 0);
        frigg_sched_set_prefill_share(s, lim == 2 ? 0.5 : 0);
        int step = 0;
        for (int i = 0; i < 4; i++) {
            frigg_sched_req q = {.ids = prompt[i], .n = 6, .prefix_len = 6, .n_choices = 1, .on_done = on_done_step};
            q.gen.max_tokens = 5;
            box[lim][i].step = &step;
            q.ctx = &box[lim][i];
            CHECK(frigg_sched_submit(s, &q), "submit: %s", frigg_error());
        }
        int left;
        while (++step, (left = frigg_sched_step(s)) > 0) {
        }
        CHECK(left == 0, "step: %s", frigg_error());
        frigg_sched_free(s);
    }
    int same = 1, apart = 1, together = 1, share_same = 1;
    for (int i = 0; i < 4; i++) {
        share_same &= box[2][i].done_step == box[1][i].done_step && box[2][i].r.n[0] == 5 &&
                      !memcmp(box[2][i].r.ids[0], box[1][i].r.ids[0], sizeof(int32_t) * 5);
        same &= box[0][i].r.done == 1 && box[1][i].r.done == 1 && box[0][i].r.n[0] == 5 && box[1][i].r.n[0] == 5 &&
                !memcmp(box[0][i].r.ids[0], box[1][i].r.ids[0], sizeof(int32_t) * 5);
        together &= box[0][i].done_step == box[0][0].done_step;
        if (i) apart &= box[1][i].done_step == box[1][i - 1].done_step + 1;
    }
    CHECK(same, "the token limit changed what the requests generated");
    CHECK(together, "without a limit the four requests did not end in one step (%d %d %d %d)", box[0][0].done_step,
          box[0][1].done_step, box[0][2].done_step, box[0][3].done_step);
    CHECK(apart, "with a limit of one prompt per step the requests did not end a step apart (%d %d %d %d)",
          box[1][0].done_step, box[1][1].done_step, box[1][2].done_step, box[1][3].done_step);
    CHECK(share_same, "a prefill share held back prompts within the token limit (ends %d %d %d %d, without it %d %d %d %d)",
          box[2][0].done_step, box[2][1].done_step, box[2][2].done_step, box[2][3].done_step, box[1][0].done_step,
          box[1][1].done_step, box[1][2].done_step, box[1][3].done_step);
    frigg_backend_destroy(b);
    frigg_model_free(m);
}

/* A score request's outcome: its logits (a copy), the nll from them, the order of the callbacks. */
typedef struct {
    int vocab, n, prefix;
    const int32_t *ids;
    float *logits;
    double nll;
    int logits_calls, done_calls, logits_after_done, n_ids, n_choices;
    char finish[16];
    char *error;
} score_box;

static void score_logits(void *ctx, const float *all, int n, int vocab) {
    score_box *sb = ctx;
    sb->logits_calls++;
    sb->logits_after_done |= sb->done_calls > 0;
    sb->n = n;
    sb->vocab = vocab;
    free(sb->logits);
    sb->logits = frigg_xmalloc(sizeof(float) * (size_t)n * (size_t)vocab);
    memcpy(sb->logits, all, sizeof(float) * (size_t)n * (size_t)vocab);
    sb->nll = frigg_nll_sum(all, vocab, sb->ids, n, sb->prefix);
}

static void score_done(void *ctx, const frigg_sched_result *r) {
    score_box *sb = ctx;
    sb->done_calls++;
    if (r->error) {
        sb->error = frigg_xstrdup(r->error);
        return;
    }
    sb->n_choices = r->n_choices;
    if (r->n_choices == 1) {
        snprintf(sb->finish, sizeof sb->finish, "%s", r->choices[0]->finish_reason);
        sb->n_ids = r->choices[0]->n;
    }
}

static void drain(frigg_sched *s) {
    int left;
    while ((left = frigg_sched_step(s)) > 0) {
    }
    CHECK(left == 0, "step: %s", frigg_error());
}

static void test_score(const char *dir) {
    frigg_model *m = frigg_model_load(dir);
    CHECK(m != NULL, "load: %s", frigg_error());
    if (!m) return;
    int V = m->cfg.vocab_size;
    frigg_backend_opts bo = {.threads = 2, .max_seqs = 3, .max_ctx = 128};
    frigg_backend *b = frigg_backend_create("cpu", m, &bo);
    frigg_sched *s = frigg_sched_new(b, NULL, 0);
    CHECK(b && s, "backend/scheduler: %s", frigg_error());
    if (!b || !s) {
        frigg_backend_destroy(b);
        frigg_model_free(m);
        return;
    }
    static const int32_t pa[] = {2, 105, 2364, 107, 819, 1175, 106, 107, 105, 4368, 107};
    static const int32_t pb[] = {2, 105, 783, 616, 107, 503, 6522, 733};
    static const int32_t s1[] = {2, 105, 783, 616, 107, 6742, 1328, 7980, 716, 720, 2442, 1117, 866, 1413, 2908};
    static const int32_t s2[] = {2, 105, 2364, 107, 504, 1128, 733, 4514, 4053, 877, 6481, 802, 698, 519, 106, 107, 105,
                                 561, 563, 1152, 107, 6742, 2807, 3527, 838, 1323, 632, 768};
    /* generation: a greedy request and a sampled one (its own seed), each alone first */
    frigg_sched_req ga = {.ids = pa, .n = 11, .prefix_len = 11, .n_choices = 1, .on_done = on_done};
    ga.gen.max_tokens = 30;
    frigg_sched_req gb = {.ids = pb, .n = 8, .prefix_len = 3, .n_choices = 1, .on_done = on_done};
    gb.gen.max_tokens = 24;
    gb.gen.sampling = (frigg_sampler_params){.temperature = 1.0f, .top_k = 30, .seed = 9};
    result_box a1 = {0}, b1 = {0}, a2 = {0}, b2 = {0};
    ga.ctx = &a1;
    CHECK(frigg_sched_submit(s, &ga), "%s", frigg_error());
    drain(s);
    gb.ctx = &b1;
    CHECK(frigg_sched_submit(s, &gb), "%s", frigg_error());
    drain(s);
    /* scores alone: frigg_prefill's logits and frigg_nll's sum on the idle engine */
    int ns[2] = {15, 28}, pre[2] = {4, 20};
    const int32_t *sids[2] = {s1, s2};
    float *ref[2];
    double ref_nll[2];
    for (int i = 0; i < 2; i++) {
        ref[i] = frigg_xmalloc(sizeof(float) * (size_t)ns[i] * (size_t)V);
        CHECK(frigg_prefill(b, 0, sids[i], ns[i], pre[i], NULL, ref[i]) == 0, "%s", frigg_error());
        int tg = 0;
        CHECK(frigg_nll(b, 0, sids[i], ns[i], pre[i], &ref_nll[i], &tg) == 0 && tg == ns[i] - pre[i], "%s",
              frigg_error());
    }
    /* together: three slots; the scores prefill beside the generations' decode rows, the second one queued
     * until the first has ended */
    score_box sc[2] = {{0}};
    frigg_sched_req sq[2];
    for (int i = 0; i < 2; i++) {
        sc[i].ids = sids[i];
        sc[i].prefix = pre[i];
        sq[i] = (frigg_sched_req){.ids = sids[i], .n = ns[i], .prefix_len = pre[i], .n_choices = 1, .score = 1,
                                  .on_logits = score_logits, .on_done = score_done, .ctx = &sc[i]};
    }
    ga.ctx = &a2;
    gb.ctx = &b2;
    CHECK(frigg_sched_submit(s, &ga) && frigg_sched_submit(s, &gb), "%s", frigg_error());
    CHECK(frigg_sched_step(s) == 2, "the generations did not start: %s", frigg_error());
    CHECK(frigg_sched_submit(s, &sq[0]) && frigg_sched_submit(s, &sq[1]), "%s", frigg_error());
    int left = frigg_sched_step(s); /* score 0 prefills beside two decode rows; score 1 waits for its slot */
    CHECK(left == 3 && sc[0].done_calls == 1 && sc[1].done_calls == 0, "after the first score's step: %d pending, %d/%d",
          left, sc[0].done_calls, sc[1].done_calls);
    drain(s);
    CHECK(frigg_sched_slots_in_use(s) == 0, "slots in use after the scores: %d", frigg_sched_slots_in_use(s));
    CHECK(a2.done == 1 && a2.n[0] == a1.n[0] && a1.n[0] > 0 && !memcmp(a2.ids[0], a1.ids[0], sizeof(int32_t) * a1.n[0]),
          "the greedy generation beside score requests differs from alone (%d vs %d ids)", a2.n[0], a1.n[0]);
    CHECK(b2.done == 1 && b2.n[0] == b1.n[0] && b1.n[0] > 0 && !memcmp(b2.ids[0], b1.ids[0], sizeof(int32_t) * b1.n[0]),
          "the sampled generation beside score requests differs from alone (%d vs %d ids)", b2.n[0], b1.n[0]);
    for (int i = 0; i < 2; i++) {
        score_box *x = &sc[i];
        CHECK(!x->error && x->logits_calls == 1 && x->done_calls == 1 && !x->logits_after_done,
              "score %d: %d on_logits, %d on_done calls (%s)", i, x->logits_calls, x->done_calls,
              x->error ? x->error : "no error");
        CHECK(x->n_choices == 1 && !strcmp(x->finish, "score") && x->n_ids == 0,
              "score %d result: %d choices, finish \"%s\", %d ids", i, x->n_choices, x->finish, x->n_ids);
        CHECK(x->logits && x->n == ns[i] && x->vocab == V &&
                  !memcmp(x->logits, ref[i], sizeof(float) * (size_t)ns[i] * (size_t)V),
              "score %d: the logits beside generation differ from frigg_prefill's alone", i);
        CHECK(x->nll == ref_nll[i] && x->nll > 0, "score %d: nll %.17g beside generation, %.17g alone", i, x->nll,
              ref_nll[i]);
        free(x->logits);
        free(x->error);
    }
    CHECK(ref_nll[0] != ref_nll[1], "the two scored sequences give the same nll");
    /* a queued score cancelled: "cancelled", no logits */
    score_box cx = {.ids = s1, .prefix = 4};
    frigg_sched_req cq = sq[0];
    cq.ctx = &cx;
    result_box g3 = {0};
    ga.ctx = &g3;
    frigg_sched_req full = ga;
    full.n_choices = 3;
    CHECK(frigg_sched_submit(s, &full), "%s", frigg_error());
    CHECK(frigg_sched_step(s) == 1, "the 3-choice request did not start");
    uint64_t hc = frigg_sched_submit(s, &cq);
    CHECK(hc && frigg_sched_cancel(s, hc) == 0, "%s", frigg_error());
    drain(s);
    CHECK(cx.done_calls == 1 && cx.logits_calls == 0 && !strcmp(cx.finish, "cancelled"),
          "cancelled score: %d on_done, %d on_logits, finish \"%s\"", cx.done_calls, cx.logits_calls, cx.finish);
    free(cx.logits);
    /* the rule */
    frigg_sched_req bad = sq[0];
    bad.n_choices = 2;
    CHECK(!frigg_sched_submit(s, &bad) && strstr(frigg_error(), "score"), "a score with 2 choices: %s", frigg_error());
    bad = sq[0];
    bad.gen.max_tokens = 4;
    CHECK(!frigg_sched_submit(s, &bad) && strstr(frigg_error(), "score"), "a score with max_tokens: %s", frigg_error());
    bad = sq[0];
    bad.gen.sampling.temperature = 0.5f;
    CHECK(!frigg_sched_submit(s, &bad) && strstr(frigg_error(), "score"), "a score with a temperature: %s",
          frigg_error());
    bad = sq[0];
    bad.on_logits = NULL;
    CHECK(!frigg_sched_submit(s, &bad) && strstr(frigg_error(), "on_logits"), "a score without on_logits: %s",
          frigg_error());
    bad = ga;
    bad.on_logits = score_logits;
    CHECK(!frigg_sched_submit(s, &bad) && strstr(frigg_error(), "on_logits"), "on_logits on a generation: %s",
          frigg_error());
    int32_t longp[129];
    for (int i = 0; i < 129; i++) longp[i] = 2 + i;
    bad = sq[0];
    bad.ids = longp;
    bad.n = 129;
    CHECK(!frigg_sched_submit(s, &bad) && strstr(frigg_error(), "context limit"), "a score past the context: %s",
          frigg_error());
    CHECK(frigg_sched_pending(s) == 0, "refused requests left something pending");
    for (int i = 0; i < 2; i++) free(ref[i]);
    frigg_sched_free(s);
    frigg_backend_destroy(b);
    frigg_model_free(m);
}

/* logit_bias through the session: +100 forces an id (greedy), every step, and the logprobs stay the model's
 * (the first token's top list that of the unbiased request, the forced id's own log-probability what the
 * model gave it); -100 on the greedy first id keeps it out. */
static void test_logit_bias(const char *dir) {
    frigg_session_opts so = {.model_dir = dir, .backend = "cpu", .threads = 2, .default_max_tokens = 16, .slots = 3};
    frigg_session *s = frigg_session_open(&so);
    CHECK(s != NULL, "session: %s", frigg_error());
    if (!s) return;
    static const char *const reqs[] = {
        "{\"prompt\":\"<bos>Der var engang\",\"max_tokens\":6,\"stop_ids\":[],\"logprobs\":2}",
        "{\"prompt\":\"<bos>Der var engang\",\"max_tokens\":6,\"stop_ids\":[],\"logprobs\":2,\"logit_bias\":{\"1234\":100}}",
        "{\"prompt\":\"<bos>Der var engang\",\"max_tokens\":6,\"stop_ids\":[],\"logit_bias\":{\"667\":-100}}"};
    json_t *resp[3];
    for (int i = 0; i < 3; i++) {
        json_t *req = json_loads(reqs[i], 0, NULL);
        resp[i] = NULL;
        frigg_session_submit(s, req, 0, keep, &resp[i]);
        json_decref(req);
    }
    while (frigg_session_pending(s) > 0) CHECK(frigg_session_step(s) >= 0, "step: %s", frigg_error());
    json_t *plain = json_object_get(resp[0], "output_ids"), *forced = json_object_get(resp[1], "output_ids"),
           *banned = json_object_get(resp[2], "output_ids");
    int all = json_array_size(forced) == 6;
    for (size_t i = 0; i < json_array_size(forced); i++) all &= json_integer_value(json_array_get(forced, i)) == 1234;
    CHECK(all, "a bias of +100 on id 1234 did not force it (%zu ids)", json_array_size(forced));
    int32_t g0 = (int32_t)json_integer_value(json_array_get(plain, 0));
    CHECK(g0 == 667 && json_array_size(banned) == 6 && json_integer_value(json_array_get(banned, 0)) != 667,
          "a bias of -100 on the greedy first id %d: the first id is %lld", g0,
          (long long)json_integer_value(json_array_get(banned, 0)));
    json_t *lp0 = json_array_get(json_object_get(resp[0], "logprobs"), 0),
           *lp1 = json_array_get(json_object_get(resp[1], "logprobs"), 0);
    CHECK(lp0 && lp1 && json_equal(json_object_get(lp0, "top"), json_object_get(lp1, "top")),
          "the biased request's first top logprobs differ from the unbiased one's");
    double forced_lp = json_real_value(json_object_get(lp1, "logprob")),
           top_lp = json_real_value(json_object_get(json_array_get(json_object_get(lp1, "top"), 1), "logprob"));
    CHECK(forced_lp < top_lp && forced_lp < -1, "the forced id's logprob %g is not the model's (< %g)", forced_lp, top_lp);
    for (int i = 0; i < 3; i++) json_decref(resp[i]);
    frigg_session_close(s);
}

/* n = 3 sampled choices with a logit bias and logprobs share one prefill: each choice's first-token logprobs are
 * the unbiased row's (no choice sees the row another one biased), and choice c equals a single run with seed
 * 50 + c. */
typedef struct {
    int done, n[3];
    int32_t ids[3][16];
    int32_t top[3][2];
    float lp[3][2];
} lp_box;

static void on_done_lp(void *ctx, const frigg_sched_result *r) {
    lp_box *b = ctx;
    b->done++;
    for (int c = 0; !r->error && c < r->n_choices && c < 3; c++) {
        const frigg_seqgen_result *g = r->choices[c];
        b->n[c] = g->n;
        memcpy(b->ids[c], g->ids, sizeof(int32_t) * (size_t)(g->n < 16 ? g->n : 16));
        if (g->n && g->top_ids) {
            memcpy(b->top[c], g->top_ids, sizeof b->top[c]);
            memcpy(b->lp[c], g->top_lps, sizeof b->lp[c]);
        }
    }
}

static void test_choices_bias(const char *dir) {
    frigg_model *m = frigg_model_load(dir);
    CHECK(m != NULL, "load: %s", frigg_error());
    if (!m) return;
    frigg_backend_opts bo = {.threads = 2, .max_seqs = 3, .max_ctx = 64};
    frigg_backend *b = frigg_backend_create("cpu", m, &bo);
    frigg_sched *s = frigg_sched_new(b, NULL, 0);
    static const int32_t prompt[] = {2, 105, 2364, 107, 819, 1175, 106, 107, 105, 4368, 107};
    frigg_sched_req q = {.ids = prompt, .n = 11, .prefix_len = 11, .n_choices = 1, .on_done = on_done_lp};
    q.gen.max_tokens = 12;
    q.gen.logprobs = 2;
    lp_box plain = {0}, three = {0};
    q.ctx = &plain;
    CHECK(frigg_sched_submit(s, &q), "%s", frigg_error());
    drain(s);
    q.gen.sampling = (frigg_sampler_params){.temperature = 1.0f, .seed = 50, .frequency_penalty = 0.5f,
                                            .n_logit_bias = 2, .logit_bias = {{.id = plain.top[0][0], .bias = -3},
                                                                              {.id = plain.top[0][1], .bias = 2}}};
    q.n_choices = 3;
    q.ctx = &three;
    CHECK(frigg_sched_submit(s, &q), "%s", frigg_error());
    drain(s);
    int same_lp = three.done == 1;
    for (int c = 0; c < 3; c++)
        same_lp &= three.n[c] > 0 && !memcmp(three.top[c], plain.top[0], sizeof plain.top[0]) &&
                   !memcmp(three.lp[c], plain.lp[0], sizeof plain.lp[0]);
    CHECK(same_lp, "a choice's first logprobs differ from the unbiased row's (%d %d / %d %d / %d %d vs %d %d)",
          three.top[0][0], three.top[0][1], three.top[1][0], three.top[1][1], three.top[2][0], three.top[2][1],
          plain.top[0][0], plain.top[0][1]);
    int differ = 0;
    for (int c = 0; c < 3; c++) {
        lp_box one = {0};
        frigg_sched_req q1 = q;
        q1.n_choices = 1;
        q1.gen.sampling.seed = 50 + (uint64_t)c;
        q1.ctx = &one;
        CHECK(frigg_sched_submit(s, &q1), "%s", frigg_error());
        drain(s);
        CHECK(one.n[0] == three.n[c] && !memcmp(one.ids[0], three.ids[c], sizeof(int32_t) * (size_t)one.n[0]),
              "biased choice %d from a shared prefill differs from a single run with its seed", c);
        differ += c > 0 && memcmp(three.ids[c], three.ids[0], sizeof three.ids[0]) != 0;
    }
    CHECK(differ > 0, "the biased choices are all the same");
    /* a score request takes no sampling parameters, these included */
    frigg_sched_req bad = {.ids = prompt, .n = 11, .prefix_len = 11, .n_choices = 1, .score = 1,
                           .on_logits = score_logits, .on_done = score_done};
    bad.gen.sampling.n_logit_bias = 1;
    CHECK(!frigg_sched_submit(s, &bad) && strstr(frigg_error(), "score"), "a score with a logit_bias: %s", frigg_error());
    bad.gen.sampling.n_logit_bias = 0;
    bad.gen.sampling.presence_penalty = 1;
    CHECK(!frigg_sched_submit(s, &bad) && strstr(frigg_error(), "score"), "a score with a presence penalty: %s",
          frigg_error());
    frigg_sched_free(s);
    frigg_backend_destroy(b);
    frigg_model_free(m);
}

int main(void) {
    TEST_MAIN_BEGIN("test_scheduler");
    char *dir = th_path(th_root(), "golden/default");
    test_batch_invariance(dir, "cpu", 0, 0);
    test_batch_invariance(dir, "cpu", 0, 0.5);
    /* The same on the CUDA engine, created batch-invariant (one decode GEMV kernel at every batch size: under
     * the default choice per batch size, batched rows sum in other orders than single rows, and a request
     * can part from its lone run at a near-tie) */
#ifdef FRIGG_CUDA
    if (frigg_cuda_device_count() > 0) {
        test_batch_invariance(dir, "cuda", 1, 0);
        /* a tiny share: every prompt joining a running batch is prefilled by layer slices */
        test_batch_invariance(dir, "cuda", 1, 1e-6);
    } else SKIP("batch invariance on the CUDA engine: no CUDA device present");
#else
    SKIP("batch invariance on the CUDA engine: built without CUDA");
#endif
    test_cancel_and_fork(dir);
    test_prefill_tokens(dir);
    test_score(dir);
    test_logit_bias(dir);
    test_choices_bias(dir);
    free(dir);
    TEST_MAIN_END();
}
