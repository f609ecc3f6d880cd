/* test_engine.c — CPU engine properties that need no reference file: the KV cache reproduces a full
 * recomputation bit for bit (causal and prefix), packed == split, thread-count invariance, the mask and
 * the schedule matter, and the generation loop's stop/length/context rules. */
#include <math.h>
#include <sys/stat.h>

#include "backend.h"
#include "cpu_ops.h"
#include "generate.h"
#include "harness.h"
#include "model.h"
#include "model_writer.h"
#include "sampler.h"
#include "util.h"

static frigg_backend *mk(const frigg_model *m, int threads) {
    frigg_backend_opts o = {.threads = threads, .max_seqs = 2};
    return frigg_backend_create("cpu", m, &o);
}

/* A host-side decode_argmax / decode_greedy over the CPU engine's decode, so the generation loop's
 * device-greedy paths run here too (the CUDA engine's own pipelined decode_greedy is test_cuda_engine's). */
static int shim_argmax(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int32_t *out) {
    int V = b->model->cfg.vocab_size;
    float *lg = frigg_xmalloc(sizeof(float) * (size_t)nseq * V);
    int rc = b->decode(b, nseq, seqs, ids, lg);
    for (int i = 0; i < nseq && !rc; i++) out[i] = frigg_argmax(lg + (size_t)i * V, V);
    free(lg);
    return rc;
}
static int shim_calls;
static int shim_greedy(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int steps,
                       int (*on_ids)(void *, const int32_t *), void *ctx) {
    int32_t in[8], out[8];
    memcpy(in, ids, sizeof(int32_t) * nseq);
    shim_calls++;
    for (int k = 0; k < steps; k++) {
        if (shim_argmax(b, nseq, seqs, in, out)) return -1;
        if (on_ids(ctx, out)) return k + 1;
        memcpy(in, out, sizeof(int32_t) * nseq);
    }
    return steps;
}
/* A host-side decode_topk over the CPU engine's decode (frigg_topk of each row), handing the pairs back in
 * reverse ranking order (the order is unspecified), so the generation loop's top-k path runs here too. */
static int shim_topk_calls;
static int shim_topk(frigg_backend *b, int nseq, const int *seqs, const int32_t *ids, int k, float *vals, int32_t *out) {
    int V = b->model->cfg.vocab_size;
    float *lg = frigg_xmalloc(sizeof(float) * (size_t)nseq * V);
    int32_t *rank = frigg_xmalloc(sizeof(int32_t) * (size_t)k);
    int rc = b->decode(b, nseq, seqs, ids, lg);
    shim_topk_calls++;
    for (int i = 0; i < nseq && !rc; i++) {
        frigg_topk(lg + (size_t)i * V, V, k, rank);
        for (int j = 0; j < k; j++) {
            out[(size_t)i * k + j] = rank[k - 1 - j];
            vals[(size_t)i * k + j] = lg[(size_t)i * V + rank[k - 1 - j]];
        }
    }
    free(lg);
    free(rank);
    return rc;
}
static int stop_after_3(void *ctx, int32_t id) {
    (void)id;
    return ++*(int *)ctx >= 3;
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
    CHECK(b->prefill(b, 0, ids, N, 0, NULL, all) == 0, "%s", frigg_error());
    CHECK(b->prefill(b, 1, ids, P, 0, last, NULL) == 0, "%s", frigg_error());
    CHECK(maxdiff(last, all + (size_t)(P - 1) * V, V) == 0, "prefill last row != full row");
    for (int t = P; t < N; t++) {
        int seq = 1;
        CHECK(b->decode(b, 1, &seq, &ids[t], step) == 0, "%s", frigg_error());
        float d = maxdiff(step, all + (size_t)t * V, V);
        CHECK(d == 0, "causal decode at %d differs from recomputation by %g", t, d);
    }
    CHECK(b->seq_len[1] == N, "seq_len %d", b->seq_len[1]);

    /* Prefix: a decode after a P-prefix prefill == the last row of a full prefill with the same prefix. */
    CHECK(b->prefill(b, 0, ids, N + 1, P, last, NULL) == 0, "%s", frigg_error());
    CHECK(b->prefill(b, 1, ids, N, P, NULL, NULL) == 0, "%s", frigg_error());
    int seq = 1;
    CHECK(b->decode(b, 1, &seq, &ids[N], step) == 0, "%s", frigg_error());
    CHECK(maxdiff(step, last, V) == 0, "prefix decode differs from recomputation by %g", maxdiff(step, last, V));

    /* The mask matters: whole-prompt prefix vs causal give different last rows. */
    CHECK(b->prefill(b, 0, ids, N, N, last, NULL) == 0, "%s", frigg_error());
    CHECK(maxdiff(last, all + (size_t)(N - 1) * V, V) > 1e-3, "prefix mask had no effect");

    /* Packed and split layouts: identical outputs. Threads: identical outputs. */
    frigg_backend *bs = mk(msplit, 1), *bc = mk(msched, 2);
    CHECK(bs->prefill(bs, 0, ids, N, N, other, NULL) == 0, "%s", frigg_error());
    CHECK(maxdiff(last, other, V) == 0, "packed != split (or 1 thread != 2 threads)");
    CHECK(bc->prefill(bc, 0, ids, N, N, other, NULL) == 0, "%s", frigg_error());
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
    /* The device-greedy paths of the loop (decode_argmax step by step, decode_greedy for every step after the
     * first) give what the logits path gives: ids, finish reason and decode steps. */
    for (int mode = 0; mode < 2; mode++) {
        frigg_backend *g = mk(m, 1);
        g->decode_argmax = shim_argmax;
        g->decode_greedy = mode ? shim_greedy : NULL;
        shim_calls = 0;
        frigg_gen_params gq = {.max_tokens = 6, .prefix_tokens = -1};
        frigg_gen_result q;
        CHECK(frigg_generate(g, 0, ids, N, &gq, &q) == 0, "%s", frigg_error());
        CHECK(q.n == 6 && !memcmp(q.ids, r1.ids, 6 * sizeof(int32_t)) && !strcmp(q.finish_reason, "length") &&
                  q.decode_steps == r1.decode_steps && q.decode_steps == 5 && shim_calls == mode,
              "device greedy (mode %d): n %d steps %d calls %d", mode, q.n, q.decode_steps, shim_calls);
        frigg_gen_result_free(&q);
        gq.stop_ids = &stop;
        gq.n_stop_ids = 1;
        CHECK(frigg_generate(g, 0, ids, N, &gq, &q) == 0, "%s", frigg_error());
        CHECK(q.n == r3.n && !strcmp(q.finish_reason, "stop") && q.decode_steps == r3.decode_steps &&
                  g->seq_len[0] == N + r3.decode_steps,
              "device greedy stop id (mode %d): n %d steps %d", mode, q.n, q.decode_steps);
        frigg_gen_result_free(&q);
        int seen = 0;
        gq.n_stop_ids = 0;
        gq.on_token = stop_after_3;
        gq.ctx = &seen;
        CHECK(frigg_generate(g, 0, ids, N, &gq, &q) == 0, "%s", frigg_error());
        CHECK(q.n == 3 && !memcmp(q.ids, r1.ids, 3 * sizeof(int32_t)) && !strcmp(q.finish_reason, "stop") &&
                  q.decode_steps == 2,
              "device greedy on_token stop (mode %d): n %d steps %d", mode, q.n, q.decode_steps);
        frigg_gen_result_free(&q);
        frigg_backend_destroy(g);
    }
    /* The top-k path (decode_topk, then frigg_sample_topk) draws what the logits path draws, seed for seed (a
     * high temperature, so every kept id has a fair chance and a lost or wrong pair shows); a
     * repetition penalty or logprobs keep the logits path. */
    {
        frigg_backend *g = mk(m, 1);
        g->decode_topk = shim_topk;
        const struct { int k; float p, pen; int lp; } cs[] = {{5, 1, 1, 0}, {20, 0.8f, 1, 0}, {5, 1, 1.3f, 0}, {5, 1, 1, 2}};
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            frigg_gen_params gs = {.max_tokens = 10, .prefix_tokens = -1, .logprobs = cs[c].lp};
            gs.sampling = (frigg_sampler_params){.temperature = 4.0f, .top_k = cs[c].k, .top_p = cs[c].p,
                                                 .repetition_penalty = cs[c].pen, .seed = 3 + c};
            frigg_gen_result want, got;
            shim_topk_calls = 0;
            CHECK(frigg_generate(b, 0, ids, N, &gs, &want) == 0 && frigg_generate(g, 0, ids, N, &gs, &got) == 0, "%s",
                  frigg_error());
            int path = cs[c].pen == 1 && !cs[c].lp;
            CHECK(got.n == want.n && !memcmp(got.ids, want.ids, sizeof(int32_t) * (size_t)want.n) &&
                      got.decode_steps == want.decode_steps && shim_topk_calls == (path ? want.decode_steps : 0),
                  "top-k path, case %zu: n %d/%d, %d decode_topk calls", c, got.n, want.n, shim_topk_calls);
            frigg_gen_result_free(&want);
            frigg_gen_result_free(&got);
        }
        frigg_backend_destroy(g);
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
    CHECK(b->prefill(b, 0, &bad, 1, 1, last, NULL) == -1 && strstr(frigg_error(), "outside"), "bad id accepted");
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
