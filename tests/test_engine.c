/* test_engine.c — CPU engine properties that need no reference file: the KV cache reproduces a full
 * recomputation bit for bit (causal and prefix), packed == split, thread-count invariance, the mask and
 * the schedule matter; the step interface (every want against the logits, mixed rows, the last greedy id
 * as input, fork and reset, bad calls); two engines with different settings side by side; and the
 * generation loop's stop/length/context rules, its cheapest wants, and its frequency/presence penalties and
 * logit_bias against a loop that applies them itself. */
#include <math.h>
#include <sys/stat.h>

#include "engine/backend.h"
#include "engine/cpu_ops.h"
#include "run/generate.h"
#include "harness.h"
#include "model/model.h"
#include "model_writer.h"
#include "engine/sampler.h"
#include "base/util.h"

static frigg_backend *mk(const frigg_model *m, int threads) {
    frigg_backend_opts o = {.threads = threads, .max_seqs = 2};
    return frigg_backend_create("cpu", m, &o);
}

static float maxdiff(const float *a, const float *b, size_t n) {
    float d = 0;
    for (size_t i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

int main(void) {
    TEST_MAIN_BEGIN("test_engine");
    char *tmp = tm_tempdir();
    tm_spec s = tm_default();
    char *dp = frigg_path_join(tmp, "p"), *ds = frigg_path_join(tmp, "s"), *dc = frigg_path_join(tmp, "c");
    tm_write_model(dp, &s, NULL);
    s.split = 1;
    tm_write_model(ds, &s, NULL);
    s.split = 0;
    s.L_cycles = 1; /* same tensors, other schedule */
    tm_write_model(dc, &s, NULL);
    frigg_model *m = frigg_model_load(dp), *msplit = frigg_model_load(ds), *msched = frigg_model_load(dc);
    CHECK(m && msplit && msched, "load: %s", frigg_error());
    if (!m || !msplit || !msched) TEST_MAIN_END();
    int V = m->cfg.vocab_size;
    enum { N = 9, P = 5 };
    int32_t ids[N + 1] = {5, 17, 3, 88, 41, 9, 60, 23, 71, 30};
    float *all = malloc(sizeof(float) * (N + 1) * V), *last = malloc(sizeof(float) * V),
          *step = malloc(sizeof(float) * V), *other = malloc(sizeof(float) * V);
    frigg_backend *b = mk(m, 2);

    /* Causal: prefill 5 then decode 4 == rows 4..8 of a 9-token causal prefill, exactly. */
    CHECK(frigg_prefill(b, 0, ids, N, 0, NULL, all) == 0, "%s", frigg_error());
    CHECK(frigg_prefill(b, 1, ids, P, 0, last, NULL) == 0, "%s", frigg_error());
    CHECK(maxdiff(last, all + (size_t)(P - 1) * V, V) == 0, "prefill last row != full row");
    for (int t = P; t < N; t++) {
        int seq = 1;
        CHECK(frigg_decode(b, 1, &seq, &ids[t], step) == 0, "%s", frigg_error());
        float d = maxdiff(step, all + (size_t)t * V, V);
        CHECK(d == 0, "causal decode at %d differs from recomputation by %g", t, d);
    }
    CHECK(b->seq_len(b, 1) == N, "seq_len %d", b->seq_len(b, 1));

    /* Prefix: a decode after a P-prefix prefill == the last row of a full prefill with the same prefix. */
    CHECK(frigg_prefill(b, 0, ids, N + 1, P, last, NULL) == 0, "%s", frigg_error());
    CHECK(frigg_prefill(b, 1, ids, N, P, NULL, NULL) == 0, "%s", frigg_error());
    int seq = 1;
    CHECK(frigg_decode(b, 1, &seq, &ids[N], step) == 0, "%s", frigg_error());
    CHECK(maxdiff(step, last, V) == 0, "prefix decode differs from recomputation by %g", maxdiff(step, last, V));

    /* The mask matters: whole-prompt prefix vs causal give different last rows. */
    CHECK(frigg_prefill(b, 0, ids, N, N, last, NULL) == 0, "%s", frigg_error());
    CHECK(maxdiff(last, all + (size_t)(N - 1) * V, V) > 1e-3, "prefix mask had no effect");

    /* Packed and split layouts: identical outputs. Threads: identical outputs. */
    frigg_backend *bs = mk(msplit, 1), *bc = mk(msched, 2);
    CHECK(frigg_prefill(bs, 0, ids, N, N, other, NULL) == 0, "%s", frigg_error());
    CHECK(maxdiff(last, other, V) == 0, "packed != split (or 1 thread != 2 threads)");
    CHECK(frigg_prefill(bc, 0, ids, N, N, other, NULL) == 0, "%s", frigg_error());
    CHECK(maxdiff(last, other, V) > 1e-3, "L_cycles from the config had no effect");

    /* Generation loop: greedy is deterministic; a stop id ends with "stop"; context limit is enforced. */
    frigg_gen_params gp = {.max_tokens = 6, .prefix_tokens = -1};
    frigg_gen_result r1, r2;
    CHECK(frigg_generate(b, 0, ids, N, &gp, &r1) == 0 && frigg_generate(b, 1, ids, N, &gp, &r2) == 0, "%s",
          frigg_error());
    CHECK(r1.n == 6 && r2.n == 6 && !memcmp(r1.ids, r2.ids, 6 * sizeof(int32_t)) && !strcmp(r1.finish_reason, "length"),
          "greedy determinism / length");
    CHECK(r1.ids[0] == frigg_argmax(last, V), "first greedy token is the argmax of the prefix logits");
    int32_t stop = r1.ids[2];
    int first_stop = 0;
    while (r1.ids[first_stop] != stop) first_stop++;
    gp.stop_ids = &stop;
    gp.n_stop_ids = 1;
    frigg_gen_result r3;
    CHECK(frigg_generate(b, 0, ids, N, &gp, &r3) == 0, "%s", frigg_error());
    CHECK(r3.n == first_stop && !strcmp(r3.finish_reason, "stop"), "stop id: n %d want %d", r3.n, first_stop);
    /* The step interface: one step of mixed rows (a prefill beside decode rows) gives each row what a step
     * of its own gives; GREEDY and TOPK agree with the LOGITS row; LAST_GREEDY feeds the step before's id. */
    {
        frigg_backend *g = mk(m, 1);
        float *lg = malloc(sizeof(float) * V * 2), *lone = malloc(sizeof(float) * V);
        CHECK(frigg_prefill(g, 0, ids, N, P, NULL, NULL) == 0 && frigg_prefill(b, 0, ids, N, P, NULL, NULL) == 0, "%s",
              frigg_error());
        int32_t gid = -1, kid[7];
        float kval[7], lse = 0;
        frigg_row rows[2] = {
            {.seq = 0, .n = 1, .token = 30, .want = FRIGG_WANT_LOGITS, .out_logits = lg},
            {.seq = 1, .prefill = 1, .ids = ids, .n = P, .prefix_len = P, .want = FRIGG_WANT_LOGITS, .out_logits = lg + V}};
        CHECK(frigg_step(g, rows, 2) == 0, "%s", frigg_error());
        int sq = 0;
        int32_t t30 = 30;
        CHECK(frigg_decode(b, 1, &sq, &t30, lone) == 0 && maxdiff(lg, lone, V) == 0, "decode row beside a prefill differs");
        CHECK(frigg_prefill(b, 1, ids, P, P, lone, NULL) == 0 && maxdiff(lg + V, lone, V) == 0,
              "prefill row beside a decode differs");
        /* rewind both to the same state, then want GREEDY / TOPK of the same step */
        CHECK(g->seq_fork(g, 0, 0, N) == 0 && g->seq_fork(g, 0, 1, N) == 0 && g->seq_len(g, 1) == N, "fork: %s",
              frigg_error());
        frigg_row w[2] = {{.seq = 0, .n = 1, .token = 30, .want = FRIGG_WANT_GREEDY, .out_id = &gid},
                          {.seq = 1, .n = 1, .token = 30, .want = FRIGG_WANT_TOPK, .k = 7, .out_vals = kval,
                           .out_ids = kid, .out_lse = &lse}};
        CHECK(frigg_step(g, w, 2) == 0, "%s", frigg_error());
        int32_t rank[7];
        frigg_topk(lone = memcpy(lone, lg, sizeof(float) * V), V, 7, rank);
        int topk_ok = 1;
        for (int j = 0; j < 7; j++) topk_ok &= kid[j] == rank[j] && kval[j] == lg[rank[j]];
        double ref_lse = 0, mx = lg[frigg_argmax(lg, V)];
        for (int i = 0; i < V; i++) ref_lse += exp((double)lg[i] - mx);
        ref_lse = mx + log(ref_lse);
        CHECK(gid == frigg_argmax(lg, V), "GREEDY %d, argmax of the logits %d", gid, frigg_argmax(lg, V));
        CHECK(topk_ok && fabs(lse - ref_lse) < 1e-4, "TOPK differs from the logits row (lse %g vs %g)", lse, ref_lse);
        /* the fork continued as the original: the step after it with LAST_GREEDY == an explicit token */
        frigg_row lgr = {.seq = 0, .n = 1, .token = FRIGG_TOKEN_LAST_GREEDY, .want = FRIGG_WANT_LOGITS, .out_logits = lg};
        CHECK(frigg_step(g, &lgr, 1) == 0, "%s", frigg_error());
        CHECK(frigg_prefill(b, 0, ids, N, P, NULL, NULL) == 0, "%s", frigg_error());
        int32_t two[2] = {30, gid};
        CHECK(frigg_decode(b, 1, &sq, &two[0], lone) == 0 && frigg_decode(b, 1, &sq, &two[1], lone) == 0 &&
                  maxdiff(lg, lone, V) == 0,
              "LAST_GREEDY did not feed the step before's greedy id");
        /* a GREEDY row with a mask (structured output): the best allowed id of the row the LOGITS row of the same
         * state gets, where the mask leaves out the row's own argmax; a mask on another want is refused */
        {
            CHECK(g->seq_fork(g, 0, 0, N) == 0 && g->seq_fork(g, 0, 1, N) == 0, "fork: %s", frigg_error());
            int W = (V + 31) / 32;
            uint32_t *mask = calloc((size_t)W, 4);
            int32_t mid = -1;
            frigg_row mw[2] = {{.seq = 0, .n = 1, .token = 30, .want = FRIGG_WANT_LOGITS, .out_logits = lg},
                               {.seq = 1, .n = 1, .token = 30, .want = FRIGG_WANT_GREEDY, .out_id = &mid, .mask = mask}};
            for (int i = 0; i < V; i += 3) mask[i >> 5] |= 1u << (i & 31);
            mask[gid >> 5] &= ~(1u << (gid & 31)); /* the unmasked argmax, left out (the same state as w's) */
            CHECK(frigg_step(g, mw, 2) == 0, "%s", frigg_error());
            int want = frigg_argmax_masked(lg, V, mask);
            CHECK(mid == want && mid != gid && mid % 3 == 0, "masked GREEDY %d, the best allowed id %d (argmax %d)", mid,
                  want, gid);
            frigg_row badm = {.seq = 0, .n = 1, .token = 3, .want = FRIGG_WANT_LOGITS, .out_logits = lg, .mask = mask};
            CHECK(frigg_step(g, &badm, 1) == -1 && strstr(frigg_error(), "mask"), "a mask on a LOGITS row: %s",
                  frigg_error());
            free(mask);
        }
        /* SAMPLE rows: the draw frigg_draw_row makes from the LOGITS row of the same state with the same uniform,
         * with and without a mask; LAST_GREEDY after one takes the drawn id; bad sampled rows are refused */
        {
            int W = (V + 31) / 32, ok = 1, inside = 1;
            uint32_t *mask = calloc((size_t)W, 4);
            for (int i = 1; i < V; i += 2) mask[i >> 5] |= 1u << (i & 31);
            for (int k = 0; k < 12; k++) {
                CHECK(g->seq_fork(g, 0, 0, N) == 0 && g->seq_fork(g, 0, 1, N) == 0, "fork: %s", frigg_error());
                int32_t sid = -1;
                double u = (k / 2 + 0.37) / 6;
                float T = k % 4 < 2 ? 1.0f : 0.7f;
                const uint32_t *mk_mask = k % 2 ? mask : NULL;
                frigg_row sw[2] = {
                    {.seq = 0, .n = 1, .token = 30, .want = FRIGG_WANT_LOGITS, .out_logits = lg},
                    {.seq = 1, .n = 1, .token = 30, .want = FRIGG_WANT_SAMPLE, .temperature = T, .u = u, .out_id = &sid,
                     .mask = mk_mask}};
                CHECK(frigg_step(g, sw, 2) == 0, "%s", frigg_error());
                ok &= sid == frigg_draw_row(lg, V, mk_mask, T, u);
                if (mk_mask) inside &= sid >= 0 && sid % 2 == 1;
            }
            CHECK(ok, "a SAMPLE row's id is not frigg_draw_row's on the same state's logits");
            CHECK(inside, "a masked SAMPLE row drew a refused id");
            int32_t sid = -1;
            frigg_row s1 = {.seq = 1, .n = 1, .token = 30, .want = FRIGG_WANT_SAMPLE, .temperature = 1, .u = 0.5,
                            .out_id = &sid};
            CHECK(g->seq_fork(g, 0, 1, N) == 0 && frigg_step(g, &s1, 1) == 0, "%s", frigg_error());
            frigg_row s2 = {.seq = 1, .n = 1, .token = FRIGG_TOKEN_LAST_GREEDY, .want = FRIGG_WANT_LOGITS, .out_logits = lg};
            CHECK(frigg_step(g, &s2, 1) == 0, "LAST_GREEDY after a SAMPLE row: %s", frigg_error());
            CHECK(g->seq_fork(g, 0, 0, N) == 0, "fork: %s", frigg_error());
            int32_t t2[2] = {30, sid};
            int s2q = 0;
            CHECK(frigg_decode(g, 1, &s2q, &t2[0], lone) == 0 && frigg_decode(g, 1, &s2q, &t2[1], lone) == 0 &&
                      maxdiff(lg, lone, V) == 0,
                  "LAST_GREEDY did not feed the SAMPLE row's id");
            frigg_row bads[4] = {
                {.seq = 1, .n = 1, .token = 3, .want = FRIGG_WANT_SAMPLE, .temperature = 0, .u = 0.5, .out_id = &sid},
                {.seq = 1, .n = 1, .token = 3, .want = FRIGG_WANT_SAMPLE, .temperature = 1, .u = 1, .out_id = &sid},
                {.seq = 1, .n = 1, .token = 3, .want = FRIGG_WANT_SAMPLE, .temperature = NAN, .u = 0.5, .out_id = &sid},
                {.seq = 1, .prefill = 1, .ids = ids, .n = P, .prefix_len = P, .want = FRIGG_WANT_SAMPLE, .temperature = 1,
                 .u = 0.5, .out_id = &sid}};
            for (int i = 0; i < 4; i++)
                CHECK(frigg_step(g, &bads[i], 1) == -1 && strstr(frigg_error(), "sampled row"), "bad SAMPLE row %d: %s", i,
                      frigg_error());
            free(mask);
        }
        /* bad calls: errors with messages, nothing run */
        frigg_row bad1 = {.seq = 0, .n = 1, .token = FRIGG_TOKEN_LAST_GREEDY, .want = FRIGG_WANT_NONE};
        CHECK(frigg_step(g, &bad1, 1) == -1 && strstr(frigg_error(), "greedy"), "LAST_GREEDY without one: %s",
              frigg_error());
        frigg_row bad2 = {.seq = 5, .n = 1, .token = 3};
        CHECK(frigg_step(g, &bad2, 1) == -1 && strstr(frigg_error(), "sequence 5"), "unknown slot: %s", frigg_error());
        frigg_row bad3[2] = {{.seq = 0, .n = 1, .token = 3}, {.seq = 0, .n = 1, .token = 4}};
        CHECK(frigg_step(g, bad3, 2) == -1 && strstr(frigg_error(), "twice"), "a sequence twice: %s", frigg_error());
        frigg_row bad4 = {.seq = 0, .n = 1, .token = 3, .want = FRIGG_WANT_TOPK, .k = V, .out_vals = kval, .out_ids = kid};
        CHECK(frigg_step(g, &bad4, 1) == -1 && strstr(frigg_error(), "top"), "k out of range: %s", frigg_error());
        CHECK(g->seq_reset(g, 1) == 0 && g->seq_len(g, 1) == 0, "reset");
        frigg_row bad5 = {.seq = 1, .n = 1, .token = 3};
        CHECK(frigg_step(g, &bad5, 1) == -1 && strstr(frigg_error(), "no prefilled"), "decode of an empty sequence: %s",
              frigg_error());
        CHECK(g->seq_fork(g, 0, 1, N + 50) == -1 && g->seq_len(g, 9) == -1 && g->seq_reset(g, -1) == -1, "bad sequence calls");
        CHECK(g->collect(g) == -1, "collect with nothing submitted");
        frigg_backend_opts ok = {.max_seqs = 1, .kv_dtype = FRIGG_DT_INT4};
        CHECK(frigg_backend_create("cpu", m, &ok) == NULL && strstr(frigg_error(), "int4"), "an int4 KV cache: %s",
              frigg_error()); /* int8 is accepted: tests/test_kv_int8.c */
        /* the bf16 copy of quantized weights is the CUDA engine's: the CPU engine refuses any setting of it */
        const int dq[] = {8, 1, FRIGG_DEQUANT_NEVER, -2};
        for (int i = 0; i < 4; i++) {
            frigg_backend_opts od = {.max_seqs = 1, .dequant_rows = dq[i]};
            CHECK(frigg_backend_create("cpu", m, &od) == NULL &&
                      strstr(frigg_error(), i < 3 ? "the CUDA engine's" : "dequant_rows -2"),
                  "dequant_rows %d on the CPU engine: %s", dq[i], frigg_error());
        }
        free(lg);
        free(lone);
        frigg_backend_destroy(g);
    }
    /* Two engines with different settings in one process, used in turn: the fp32-reference engine and the bf16
     * one each give what they give alone (no setting is process-wide), and they differ. */
    {
        frigg_backend_opts of = {.threads = 1, .max_seqs = 1, .fp32_reference = 1};
        frigg_backend *f32 = frigg_backend_create("cpu", m, &of);
        frigg_backend *alone = frigg_backend_create("cpu", m, &of);
        float *a32 = malloc(sizeof(float) * V), *a16 = malloc(sizeof(float) * V), *ref32 = malloc(sizeof(float) * V);
        CHECK(f32 && alone, "%s", frigg_error());
        CHECK(frigg_prefill(alone, 0, ids, N, P, ref32, NULL) == 0, "%s", frigg_error());
        frigg_backend_destroy(alone);
        CHECK(frigg_prefill(b, 0, ids, N, P, a16, NULL) == 0 && frigg_prefill(f32, 0, ids, N, P, a32, NULL) == 0 &&
                  frigg_prefill(b, 1, ids, N, P, step, NULL) == 0,
              "%s", frigg_error());
        CHECK(maxdiff(a32, ref32, V) == 0, "the fp32 engine beside a bf16 one differs from itself alone");
        CHECK(maxdiff(a16, step, V) == 0, "the bf16 engine beside an fp32 one changed");
        CHECK(maxdiff(a16, a32, V) > 0, "fp32_reference had no effect");
        int nonbf16 = 0;
        for (int i = 0; i < V; i++) nonbf16 |= frigg_round_bf16(a32[i]) != a32[i];
        CHECK(nonbf16, "the fp32 engine's logits are all bf16 values");
        frigg_backend_destroy(f32);
        free(a32); free(a16); free(ref32);
    }
    /* The generation loop asks for the cheapest output: greedy ids only (GREEDY), a pure top-k draw the k
     * largest (TOPK); both give what a loop over the whole logits row gives, seed for seed (a high
     * temperature, so every kept id has a fair chance and a lost or wrong pair shows). */
    {
        const struct { float t; int k; float p, pen; int lp; } cs[] = {
            {0, 0, 1, 1, 0}, {4, 5, 1, 1, 0}, {4, 20, 0.8f, 1, 0}, {4, 5, 1, 1.3f, 0}, {4, 5, 1, 1, 2}, {4, 0, 0.9f, 1, 0}};
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            frigg_gen_params gs = {.max_tokens = 10, .prefix_tokens = -1, .logprobs = cs[c].lp};
            gs.sampling = (frigg_sampler_params){.temperature = cs[c].t, .top_k = cs[c].k, .top_p = cs[c].p,
                                                 .repetition_penalty = cs[c].pen, .seed = 3 + c};
            frigg_gen_result got;
            CHECK(frigg_generate(b, 0, ids, N, &gs, &got) == 0, "%s", frigg_error());
            /* the reference: the whole row every step, frigg_sample */
            frigg_sampler smp;
            frigg_sampler_init(&smp, &gs.sampling, V);
            int32_t want[10];
            int nw = 0, sq1 = 1;
            CHECK(frigg_prefill(b, 1, ids, N, N, last, NULL) == 0, "%s", frigg_error());
            for (; nw < 10; nw++) {
                if (nw) CHECK(frigg_decode(b, 1, &sq1, &want[nw - 1], last) == 0, "%s", frigg_error());
                want[nw] = frigg_sample(&smp, last, want, nw);
            }
            frigg_sampler_free(&smp);
            CHECK(got.n == 10 && !memcmp(got.ids, want, sizeof want) && got.decode_steps == 9,
                  "generation case %zu: %d ids, %d steps, differs from the logits loop", c, got.n, got.decode_steps);
            frigg_gen_result_free(&got);
        }
    }
    /* Frequency/presence penalties and logit_bias through the generation loop (which then asks for the whole
     * row every step) against a loop that applies them itself from their definitions: CTRL, then c * frequency
     * + presence for each id generated c > 0 times so far (the prompt's ids not counted), then the bias, then
     * a sampler with none of them (the same seed, so the same random stream); the logprobs those of the raw
     * rows. bid -2: the bias goes on the unbiased first greedy id; a bias of NAN: the one that puts id 5 (a
     * prompt id) 12 above the first row's largest logit, so that a frequency penalty of 1.5 hands the argmax
     * on after a few of them (a penalty not counted per occurrence would not). */
    {
        const struct { float t; int k; float p, pen, fp, pp; int32_t bid; float bias; int lp; } cs[] = {
            {0, 0, 1, 1, 0.8f, 0.5f, -1, 0, 0},  {0, 0, 1, 1.3f, 0, 0, 17, 6.0f, 2},
            {0, 0, 1, 1, 1.5f, 0, 5, NAN, 0},   {0, 0, 1, 1, 0, 0, -2, -100, 1},
            {4, 5, 1, 1, 1.0f, -0.5f, 88, 2.0f, 0}, {2, 0, 0.9f, 1.2f, -1.0f, 2.0f, -2, -100, 2}};
        float *raw = malloc(sizeof(float) * V), *row0 = malloc(sizeof(float) * V);
        int sq1 = 1;
        CHECK(frigg_prefill(b, 1, ids, N, N, row0, NULL) == 0, "%s", frigg_error());
        int32_t first = frigg_argmax(row0, V);
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            int32_t bid = cs[c].bid == -2 ? first : cs[c].bid;
            float bias = isnan(cs[c].bias) ? row0[first] - row0[bid] + 12 : cs[c].bias;
            frigg_gen_params gs = {.max_tokens = 10, .prefix_tokens = -1, .logprobs = cs[c].lp};
            gs.sampling = (frigg_sampler_params){.temperature = cs[c].t, .top_k = cs[c].k, .top_p = cs[c].p,
                                                 .repetition_penalty = cs[c].pen, .seed = 30 + c,
                                                 .frequency_penalty = cs[c].fp, .presence_penalty = cs[c].pp,
                                                 .n_logit_bias = bid >= 0, .logit_bias = {{.id = bid, .bias = bias}}};
            frigg_gen_result got;
            CHECK(frigg_generate(b, 0, ids, N, &gs, &got) == 0, "%s", frigg_error());
            frigg_sampler_params plain = {.temperature = cs[c].t, .top_k = cs[c].k, .top_p = cs[c].p, .seed = 30 + c};
            frigg_sampler smp;
            frigg_sampler_init(&smp, &plain, V);
            int32_t want[10];
            double wlp[10];
            CHECK(frigg_prefill(b, 1, ids, N, N, last, NULL) == 0, "%s", frigg_error());
            for (int nw = 0; nw < 10; nw++) {
                if (nw) CHECK(frigg_decode(b, 1, &sq1, &want[nw - 1], last) == 0, "%s", frigg_error());
                memcpy(raw, last, sizeof(float) * V);
                for (int j = 0; j < V; j++) {
                    int cnt = 0;
                    for (int i = 0; i < nw; i++) cnt += want[i] == j;
                    if (!cnt) continue;
                    if (cs[c].pen != 1) last[j] = last[j] > 0 ? last[j] / cs[c].pen : last[j] * cs[c].pen;
                    last[j] -= (float)cnt * cs[c].fp + cs[c].pp;
                }
                if (bid >= 0) last[bid] += bias;
                want[nw] = frigg_sample(&smp, last, NULL, 0);
                double z = 0;
                for (int j = 0; j < V; j++) z += exp((double)raw[j]);
                wlp[nw] = raw[want[nw]] - log(z);
            }
            frigg_sampler_free(&smp);
            CHECK(got.n == 10 && !memcmp(got.ids, want, sizeof want),
                  "penalty/bias case %zu: %d ids, differ from the loop that applies them itself", c, got.n);
            int lp_ok = 1, has_bid = 0;
            for (int i = 0; i < got.n && cs[c].lp; i++) lp_ok &= fabs(got.token_logprob[i] - wlp[i]) < 1e-5;
            for (int i = 0; i < got.n; i++) has_bid |= got.ids[i] == bid;
            CHECK(lp_ok, "penalty/bias case %zu: logprobs are not the raw rows'", c);
            CHECK(bias == 0 || (bias > 0) == has_bid, "penalty/bias case %zu: the bias on %d did not act", c, bid);
            if (isnan(cs[c].bias)) {
                int run = 0;
                while (run < got.n && got.ids[run] == bid) run++;
                CHECK(run >= 2 && run < got.n, "penalty/bias case %zu: %d of id %d first, want some, then others", c, run,
                      bid);
            }
            frigg_gen_result_free(&got);
        }
        free(raw);
        free(row0);
    }
    frigg_gen_result r4;
    gp.max_tokens = m->cfg.max_position_embeddings;
    CHECK(frigg_generate(b, 0, ids, N, &gp, &r4) == -1 && strstr(frigg_error(), "9 tokens") &&
              strstr(frigg_error(), "64"),
          "context limit: %s", frigg_error());
    gp.max_tokens = 4;
    gp.prefix_tokens = N + 1;
    CHECK(frigg_generate(b, 0, ids, N, &gp, &r4) == -1, "prefix longer than prompt accepted");
    int bad = V;
    CHECK(frigg_prefill(b, 0, &bad, 1, 1, last, NULL) == -1 && strstr(frigg_error(), "outside"), "bad id accepted");
    /* Default stop ids: only ids inside the vocabulary (96 here, so not 106), no duplicates, 50 with tools. */
    int32_t sd[8];
    int nsd = frigg_default_stop_ids(&m->cfg, 0, sd, 8);
    CHECK(nsd == 1 && sd[0] == 1, "default stop ids without tools: %d", nsd);
    nsd = frigg_default_stop_ids(&m->cfg, 1, sd, 8);
    CHECK(nsd == 2 && sd[0] == 1 && sd[1] == 50, "default stop ids with tools: %d", nsd);
    frigg_config big = m->cfg;
    big.vocab_size = 262144;
    nsd = frigg_default_stop_ids(&big, 0, sd, 8);
    CHECK(nsd == 2 && sd[0] == 106 && sd[1] == 1, "Mimir-sized default stop ids: %d", nsd);
    frigg_gen_result_free(&r1);
    frigg_gen_result_free(&r2);
    frigg_gen_result_free(&r3);

    frigg_backend_destroy(b);
    frigg_backend_destroy(bs);
    frigg_backend_destroy(bc);
    frigg_model_free(m);
    frigg_model_free(msplit);
    frigg_model_free(msched);
    free(all); free(last); free(step); free(other);
    tm_rmrf(tmp);
    free(tmp); free(dp); free(ds); free(dc);
    TEST_MAIN_END();
}
