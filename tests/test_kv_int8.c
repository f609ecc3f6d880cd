/* test_kv_int8.c — the CPU engine's int8 KV cache (--kv-dtype int8; frigg_kv_quantize in cpu_ops.h).
 *
 *   the op:        frigg_kv_quantize / frigg_kv_dequant against hand-computed values (zero vectors, the
 *                  ±127 ends, halves rounded to even, a subnormal scale where the clamp acts) and against an
 *                  independent fp64 computation of the same rule on random vectors; frigg_cpu_attention over
 *                  an int8 cache gives bit for bit what it gives over fp32 rows of the dequantized values
 *   the engine:    int8 KV against bf16 KV on the golden fixtures and the bundled default model: last-row and
 *                  decode-step logits within |Δ| <= LOGIT_ABS + LOGIT_REL * max|logit| of the row, the same
 *                  greedy continuation up to the first step whose bf16-KV top-2 margin is below MARGIN_REL *
 *                  max|logit|,
 *                  then teacher-forced on the bf16-KV tokens: the same argmax at every step with a safe margin
 *   stepping:      a prompt prefilled then decoded token by token, the same tokens prefilled at once, and
 *                  decoded beside another sequence in one step give identical logits (bits)
 *   fork:          a fork into a slot holding another prompt's cache continues exactly as its source (the
 *                  scales are copied with the values)
 *   memory:        kv_bytes of the int8 engine: 1 byte an element plus 4 per (slot, position, head), about half
 *                  of a bf16 cache's bytes (CUDA layout) and a quarter of the CPU engine's fp32 cache
 *   quality:       KL(bf16-KV || int8-KV) per teacher-forced token on golden/default's held-out pairs (16 of
 *                  them; all 128 without FRIGG_QUICK): mean <= KL_MEAN_MAX
 *
 * With arguments it measures instead of testing: test_kv_int8 --kl MODEL_DIR [HELDOUT.jsonl] [--limit N]
 * prints one JSON line: the mean, p99 and max KL(bf16-KV || int8-KV) per teacher-forced token, top-1 agreement
 * and both NLLs over the held-out pairs (default MODEL_DIR/heldout.jsonl: {"input_ids","prefix_tokens"} lines,
 * tokens [0, prefix_tokens) the bidirectional prefix, the rest scored). */
#include <float.h>
#include <jansson.h>
#include <math.h>

#include "engine/backend.h"
#include "engine/cpu_ops.h"
#include "harness.h"
#include "model/model.h"
#include "base/util.h"

/* Measured: worst |Δ| 0.53 and |Δ| / max|logit| 0.021 (tiny-sharded, logits spread about ±25), 0.13 and 0.013 on
 * golden/default. The error scales with the logits, so a near-tie is relative too: a step whose bf16-KV top-2
 * margin is below MARGIN_REL * max|logit| (twice the worst relative error seen) is not compared. */
#define LOGIT_ABS 0.25
#define LOGIT_REL 0.03
#define MARGIN_REL 0.04
#define KL_MEAN_MAX 1e-3
#define STEPS 16

static frigg_backend *engine(const frigg_model *m, frigg_dtype kv, int seqs, int ctx) {
    frigg_backend_opts o = {.threads = 2, .max_seqs = seqs, .max_ctx = ctx, .kv_dtype = kv};
    frigg_backend *b = frigg_backend_create("cpu", m, &o);
    CHECK(b != NULL, "cpu engine, %s KV: %s", frigg_dtype_name(kv), frigg_error());
    return b;
}

static double maxabs(const float *a, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}
static double maxdiff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}
static int same_bits(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof(float)); }
static double margin(const float *x, int n) {
    int b = frigg_argmax(x, n);
    double s = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != b) s = fmax(s, x[i]);
    return x[b] - s;
}

/* ---- the op ---- */

/* The rule of cpu_ops.h computed independently: an fp32 quotient is the fp64 quotient rounded once to fp32
 * (fp64 carries more than twice fp32's precision, so the double rounding is exact), rint halves to even. */
static void ref_quantize(const float *x, int n, int8_t *q, float *scale) {
    double amax = 0;
    for (int i = 0; i < n; i++) amax = fmax(amax, fabs((double)x[i]));
    float s = (float)(amax / 127.0);
    *scale = s;
    for (int i = 0; i < n; i++) {
        double r = s == 0 ? 0 : rint((double)(float)((double)x[i] / (double)s));
        q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
}

static void test_op(void) {
    int8_t q[16];
    float s = -1;
    /* zero vector: scale 0, every value 0 */
    float z[8] = {0, -0.0f, 0, 0, 0, 0, 0, 0};
    memset(q, 99, sizeof q);
    frigg_kv_quantize(z, 8, q, &s);
    int all0 = 1;
    for (int i = 0; i < 8; i++) all0 &= q[i] == 0;
    CHECK(s == 0 && all0 && frigg_kv_dequant(q[0], s) == 0, "zero vector: scale %g", s);
    /* amax 127: scale exactly 1, q = rne(x): halves to even */
    float a[12] = {127, -127, 63.5f, -63.5f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 3.5f, 0.49f, 126.5f};
    int8_t wa[12] = {127, -127, 64, -64, 0, 0, 2, 2, -2, 4, 0, 126};
    frigg_kv_quantize(a, 12, q, &s);
    int ok = s == 1.0f;
    for (int i = 0; i < 12; i++) ok &= q[i] == wa[i];
    CHECK(ok, "amax 127: scale %g, q %d %d %d %d %d %d %d %d %d %d %d %d", s, q[0], q[1], q[2], q[3], q[4], q[5], q[6],
          q[7], q[8], q[9], q[10], q[11]);
    /* amax 254 (the largest is negative): scale 2; 3/2 = 1.5 -> 2, 5/2 = 2.5 -> 2, -1/2 -> 0, 7/2 -> 4, -254 -> -127 */
    float b[6] = {3, 5, -1, 7, -254, 253};
    int8_t wb[6] = {2, 2, 0, 4, -127, 126};
    frigg_kv_quantize(b, 6, q, &s);
    ok = s == 2.0f;
    for (int i = 0; i < 6; i++) ok &= q[i] == wb[i];
    CHECK(ok, "amax 254: scale %g, q %d %d %d %d %d %d", s, q[0], q[1], q[2], q[3], q[4], q[5]);
    CHECK(frigg_kv_dequant(-127, s) == -254.0f && frigg_kv_dequant(2, s) == 4.0f, "dequant = q * scale");
    /* amax 1: scale = fl(1/127) (not exact); the ends still give ±127, never -128 */
    float c[4] = {-1.0f, 1.0f, 0.5f, -0.25f};
    frigg_kv_quantize(c, 4, q, &s);
    CHECK(s == 1.0f / 127.0f && q[0] == -127 && q[1] == 127 && q[2] == 64 && q[3] == -32,
          "amax 1: scale %.9g q %d %d %d %d", s, q[0], q[1], q[2], q[3]);
    /* 0.5/fl(1/127) = 63.50000x: just above the half, so 64; the dequantized ends are within one rounding */
    CHECK(fabsf(frigg_kv_dequant(q[0], s) + 1.0f) <= FLT_EPSILON, "dequant of -127: %.9g", frigg_kv_dequant(q[0], s));
    /* subnormal amax whose /127 underflows to 0: q all 0 */
    float d[2] = {1e-45f, -1e-45f};
    frigg_kv_quantize(d, 2, q, &s);
    CHECK(s == 0 && q[0] == 0 && q[1] == 0, "underflowing scale: %g, q %d %d", s, q[0], q[1]);
    /* subnormal scale coarse enough for the clamp: amax = 190 * 2^-149, scale = fl(1.496 * 2^-149) = 2^-149 */
    float tiny = ldexpf(1.0f, -149);
    float e[3] = {190 * tiny, -190 * tiny, 64 * tiny};
    frigg_kv_quantize(e, 3, q, &s);
    CHECK(s == tiny && q[0] == 127 && q[1] == -127 && q[2] == 64, "subnormal scale %g: q %d %d %d", s, q[0], q[1], q[2]);
    /* random vectors (bf16 values, some wide, some with an outlier): the same bytes as the fp64 reference, the
     * largest magnitude at ±127, every value within half a step of its dequantized value (plus the two fp32
     * roundings, of x / scale and of q * scale) */
    uint64_t st = 12345;
    int mism = 0, bad_end = 0, bad_err = 0;
    for (int it = 0; it < 2000; it++) {
        int n = 1 + it % 160;
        float x[160], sr;
        int8_t qq[160], rq[160];
        double mag = ldexp(1.0, it % 40 - 20);
        for (int i = 0; i < n; i++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            double u = (double)(st >> 11) / 9007199254740992.0 * 2 - 1;
            x[i] = frigg_round_bf16((float)(u * mag * (i == it % n && it % 3 == 0 ? 30 : 1)));
        }
        frigg_kv_quantize(x, n, qq, &s);
        ref_quantize(x, n, rq, &sr);
        mism += s != sr || memcmp(qq, rq, (size_t)n) != 0;
        int hit = 0;
        for (int i = 0; i < n; i++) {
            hit |= qq[i] == 127 || qq[i] == -127;
            bad_err += fabs((double)frigg_kv_dequant(qq[i], s) - x[i]) > 0.5 * s + 2 * fabs(x[i]) * FLT_EPSILON;
            bad_end += qq[i] == -128;
        }
        bad_end += s > 0 && !hit;
    }
    CHECK(mism == 0 && bad_end == 0 && bad_err == 0, "random vectors: %d differ from the fp64 rule, %d bad ends, %d "
          "values beyond half a step", mism, bad_end, bad_err);
}

/* frigg_cpu_attention over an int8 cache = over fp32 rows of its dequantized values, bit for bit; and near the
 * unquantized attention. Layout [pos][H][hd] with scales [pos][H]. */
static void test_attention(void) {
    enum { H = 3, HD = 32, NK = 21, T = 5 };
    int D = H * HD, P0 = NK - T;
    float *kf = malloc(sizeof(float) * NK * D), *vf = malloc(sizeof(float) * NK * D);
    float *kd = malloc(sizeof(float) * NK * D), *vd = malloc(sizeof(float) * NK * D);
    float *q = malloc(sizeof(float) * T * D), *g = malloc(sizeof(float) * T * D);
    float *o8 = malloc(sizeof(float) * T * D), *od = malloc(sizeof(float) * T * D), *of = malloc(sizeof(float) * T * D);
    int8_t *k8 = malloc((size_t)NK * D), *v8 = malloc((size_t)NK * D);
    float ks[NK * H], vs[NK * H];
    uint64_t st = 99;
    for (int i = 0; i < NK * D; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        kf[i] = frigg_round_bf16((float)((double)(st >> 40) / (1 << 24) * 4 - 2));
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        vf[i] = frigg_round_bf16((float)((double)(st >> 40) / (1 << 24) * 2 - 1));
    }
    for (int i = 0; i < T * D; i++) {
        q[i] = frigg_round_bf16(0.7f * sinf(0.37f * i));
        g[i] = frigg_round_bf16(cosf(0.11f * i));
    }
    for (int j = 0; j < NK; j++)
        for (int h = 0; h < H; h++) {
            size_t off = (size_t)j * D + (size_t)h * HD;
            frigg_kv_quantize(kf + off, HD, k8 + off, &ks[j * H + h]);
            frigg_kv_quantize(vf + off, HD, v8 + off, &vs[j * H + h]);
            for (int d = 0; d < HD; d++) {
                kd[off + d] = frigg_kv_dequant(k8[off + d], ks[j * H + h]);
                vd[off + d] = frigg_kv_dequant(v8[off + d], vs[j * H + h]);
            }
        }
    for (int prefix = 0; prefix <= NK; prefix += NK - 3) {
        frigg_attn_args a = {.q = q, .q_stride = D, .pos_stride = D, .head_stride = HD, .gate = g, .gate_stride = D,
                             .T = T, .p0 = P0, .prefix_len = prefix, .heads = H, .head_dim = HD, .out_stride = D};
        frigg_attn_args a8 = a, ad = a, af = a;
        a8.k8 = k8;
        a8.v8 = v8;
        a8.k_scale = ks;
        a8.v_scale = vs;
        a8.scale_pos_stride = H;
        a8.scale_head_stride = 1;
        a8.out = o8;
        ad.k = kd;
        ad.v = vd;
        ad.out = od;
        af.k = kf;
        af.v = vf;
        af.out = of;
        frigg_cpu_attention(FRIGG_PREC_BF16, NULL, &a8);
        frigg_cpu_attention(FRIGG_PREC_BF16, NULL, &ad);
        frigg_cpu_attention(FRIGG_PREC_BF16, NULL, &af);
        CHECK(same_bits(o8, od, (size_t)T * D), "prefix %d: int8 attention != attention over the dequantized rows",
              prefix);
        CHECK(maxdiff(o8, of, T * D) < 0.05, "prefix %d: int8 attention %.4f from the unquantized one", prefix,
              maxdiff(o8, of, T * D));
    }
    free(kf); free(vf); free(kd); free(vd); free(q); free(g); free(o8); free(od); free(of); free(k8); free(v8);
}

/* ---- the engine ---- */

typedef struct {
    double worst_rel, worst_abs;
    int greedy_cmp, greedy_stop_tie, tf_cmp, tf_skip, cases;
} eng_stat;

/* One prompt through both engines: last-row logits, a free-running greedy comparison up to the first near-tie
 * of the bf16-KV engine, then STEPS decode steps teacher-forced on the bf16-KV engine's greedy tokens. */
static void compare_case(frigg_backend *b16, frigg_backend *b8, const char *what, const int32_t *ids, int n, int P,
                         eng_stat *es) {
    int V = b16->model->cfg.vocab_size, seq = 0;
    float *l16 = malloc(sizeof(float) * V), *l8 = malloc(sizeof(float) * V);
    int steps = STEPS;
    if (n + steps > b16->max_ctx) steps = b16->max_ctx - n;
    CHECK(frigg_prefill(b16, 0, ids, n, P, l16, NULL) == 0 && frigg_prefill(b8, 0, ids, n, P, l8, NULL) == 0, "%s: %s",
          what, frigg_error());
    /* free-running greedy, each engine on its own tokens */
    int diverged = 0;
    for (int t = 0; t <= steps && !diverged; t++) {
        double d = maxdiff(l16, l8, V), mx = maxabs(l16, V);
        es->worst_abs = fmax(es->worst_abs, d);
        es->worst_rel = fmax(es->worst_rel, d / mx);
        CHECK(d <= LOGIT_ABS + LOGIT_REL * mx, "%s greedy step %d: |Δ| %.4f > %.4f", what, t, d,
              LOGIT_ABS + LOGIT_REL * mx);
        if (margin(l16, V) < MARGIN_REL * mx) {
            es->greedy_stop_tie++;
            break;
        }
        int32_t a = frigg_argmax(l16, V), c = frigg_argmax(l8, V);
        CHECK(a == c, "%s greedy step %d: bf16 KV %d, int8 KV %d (margin %.3f)", what, t, a, c, margin(l16, V));
        es->greedy_cmp++;
        diverged = a != c;
        if (t < steps)
            CHECK(frigg_decode(b16, 1, &seq, &a, l16) == 0 && frigg_decode(b8, 1, &seq, &c, l8) == 0, "%s", frigg_error());
    }
    /* teacher-forced on the bf16-KV engine's tokens */
    CHECK(frigg_prefill(b16, 0, ids, n, P, l16, NULL) == 0 && frigg_prefill(b8, 0, ids, n, P, l8, NULL) == 0, "%s: %s",
          what, frigg_error());
    for (int t = 0; t <= steps; t++) {
        double d = maxdiff(l16, l8, V), mx = maxabs(l16, V);
        es->worst_abs = fmax(es->worst_abs, d);
        es->worst_rel = fmax(es->worst_rel, d / mx);
        CHECK(d <= LOGIT_ABS + LOGIT_REL * mx, "%s teacher-forced step %d: |Δ| %.4f > %.4f", what, t, d,
              LOGIT_ABS + LOGIT_REL * mx);
        int32_t a = frigg_argmax(l16, V);
        if (margin(l16, V) >= MARGIN_REL * mx) {
            CHECK(frigg_argmax(l8, V) == a, "%s teacher-forced step %d: bf16 KV %d, int8 KV %d (margin %.3f)", what, t,
                  a, frigg_argmax(l8, V), margin(l16, V));
            es->tf_cmp++;
        } else {
            es->tf_skip++;
        }
        if (t < steps)
            CHECK(frigg_decode(b16, 1, &seq, &a, l16) == 0 && frigg_decode(b8, 1, &seq, &a, l8) == 0, "%s", frigg_error());
    }
    es->cases++;
    free(l16);
    free(l8);
}

static int32_t *json_ids(json_t *a, int *n) {
    *n = (int)json_array_size(a);
    int32_t *v = malloc(sizeof(int32_t) * (*n ? *n : 1));
    for (int i = 0; i < *n; i++) v[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return v;
}

/* Every case of DIR/reference.json (fixtures: "cases"; golden/default: "chat"). */
static void test_dir(const char *rel) {
    char *dir = th_path(th_root(), rel), *rp = th_path(dir, "reference.json");
    json_t *ref = json_load_file(rp, 0, NULL);
    frigg_model *m = frigg_model_load(dir);
    CHECK(ref && m, "%s: %s", rel, frigg_error());
    if (ref && m) {
        frigg_backend *b16 = engine(m, FRIGG_DT_BF16, 1, 0), *b8 = engine(m, FRIGG_DT_INT8, 1, 0);
        json_t *cases = json_object_get(ref, "cases");
        if (!cases) cases = json_object_get(ref, "chat");
        eng_stat es = {0};
        size_t i;
        json_t *c;
        json_array_foreach(cases, i, c) {
            int n;
            int32_t *ids = json_ids(json_object_get(c, "input_ids"), &n);
            int P = (int)json_integer_value(json_object_get(c, "prefix_tokens"));
            char what[128];
            snprintf(what, sizeof what, "%s case %zu (n %d, prefix %d)", rel, i, n, P);
            if (b16 && b8) compare_case(b16, b8, what, ids, n, P, &es);
            free(ids);
        }
        CHECK(es.worst_abs > 0, "%s: the int8 cache gives the bf16 cache's logits exactly (is it quantizing?)", rel);
        /* golden/default's chat prompts mostly open on a near-tie (a small model's flat logits) */
        CHECK(es.cases > 0 && es.tf_cmp > 0 && (es.greedy_cmp > 0 || !json_object_get(ref, "cases")),
              "%s: nothing compared", rel);
        fprintf(stderr, "test_kv_int8: %-26s %d cases: worst |Δ| %.4f, worst |Δ|/max|logit| %.4f; greedy %d steps "
                        "equal (%d stopped at a near-tie); teacher-forced %d equal, %d near-ties skipped\n",
                rel, es.cases, es.worst_abs, es.worst_rel, es.greedy_cmp, es.greedy_stop_tie, es.tf_cmp, es.tf_skip);
        frigg_backend_destroy(b16);
        frigg_backend_destroy(b8);
    }
    frigg_model_free(m);
    json_decref(ref);
    free(dir);
    free(rp);
}

/* One sequence stepped three ways gives the same bits; two sequences in one step as alone; fork copies scales. */
static void test_stepping_and_fork(const frigg_model *m, frigg_dtype kv) {
    const char *kn = frigg_dtype_name(kv);
    int V = m->cfg.vocab_size, N = 13, P = 6, K = 7;
    int32_t ids[20];
    for (int i = 0; i < N + K; i++) ids[i] = (int32_t)(3 + (i * 37 + 11) % (V - 3));
    frigg_backend *b = engine(m, kv, 3, 64);
    if (!b) return;
    float *all = malloc(sizeof(float) * (size_t)(N + K) * V), *step = malloc(sizeof(float) * (size_t)(K + 1) * V);
    float *two = malloc(sizeof(float) * 2 * V), *lg = malloc(sizeof(float) * V);
    /* (a) prefill N (prefix P), then K decode steps */
    int s0 = 0, s1 = 1;
    CHECK(frigg_prefill(b, 0, ids, N, P, step, NULL) == 0, "%s", frigg_error());
    for (int t = 0; t < K; t++)
        CHECK(frigg_decode(b, 1, &s0, &ids[N + t], step + (size_t)(t + 1) * V) == 0, "%s", frigg_error());
    /* (b) all N+K tokens prefilled at once with the same prefix: rows N-1 .. N+K-1 */
    CHECK(frigg_prefill(b, 1, ids, N + K, P, NULL, all) == 0, "%s", frigg_error());
    int same = 1;
    for (int t = 0; t <= K; t++) same &= same_bits(step + (size_t)t * V, all + (size_t)(N - 1 + t) * V, V);
    CHECK(same, "%s KV: prefill + decode steps differ from one prefill of the same tokens", kn);
    /* (c) decoded beside another sequence: seq 2 runs the same tokens while seq 1 decodes in the same steps */
    CHECK(frigg_prefill(b, 2, ids, N, P, NULL, NULL) == 0 && frigg_prefill(b, 1, ids + 1, N + 2, 3, NULL, NULL) == 0,
          "%s", frigg_error());
    same = 1;
    for (int t = 0; t < K; t++) {
        int seqs[2] = {1, 2};
        int32_t tk[2] = {ids[(t * 5) % N], ids[N + t]};
        CHECK(frigg_decode(b, 2, seqs, tk, two) == 0, "%s", frigg_error());
        same &= same_bits(two + V, step + (size_t)(t + 1) * V, V);
    }
    CHECK(same, "%s KV: a sequence decoded beside another differs from it alone", kn);
    /* fork: slot 1 holds another prompt's cache (other values, other scales); fork 0 -> 1 at N + 2 (>= prefix)
     * and both continue with the same token */
    CHECK(frigg_prefill(b, 0, ids, N + 3, P, NULL, NULL) == 0 && frigg_prefill(b, 1, ids + 2, N + 4, N + 4, NULL, NULL) == 0,
          "%s", frigg_error());
    CHECK(b->seq_fork(b, 0, 1, N + 2) == 0 && b->seq_len(b, 1) == N + 2, "fork: %s", frigg_error());
    CHECK(b->seq_reset(b, 0) == 0 && frigg_prefill(b, 0, ids, N + 2, P, NULL, NULL) == 0, "%s", frigg_error());
    float *f0 = malloc(sizeof(float) * V);
    CHECK(frigg_decode(b, 1, &s0, &ids[N + 2], f0) == 0 && frigg_decode(b, 1, &s1, &ids[N + 2], lg) == 0, "%s",
          frigg_error());
    CHECK(same_bits(f0, lg, V), "%s KV: the forked sequence differs from a fresh prefill of its tokens", kn);
    CHECK(same_bits(f0, all + (size_t)(N + 2) * V, V), "%s KV: fork + decode differs from the one prefill", kn);
    free(f0);
    free(all); free(step); free(two); free(lg);
    frigg_backend_destroy(b);
}

static void test_memory(const frigg_model *m) {
    const frigg_config *c = &m->cfg;
    int ctx = 100, seqs = 3;
    frigg_backend *b16 = engine(m, FRIGG_DT_BF16, seqs, ctx), *b8 = engine(m, FRIGG_DT_INT8, seqs, ctx);
    if (!b16 || !b8) return;
    double elems = 2.0 * seqs * c->num_slots * ctx * c->hidden_size, scales = 2.0 * seqs * c->num_slots * ctx * c->num_heads;
    double bf16_bytes = 2 * elems; /* a bf16 cache: the CUDA engine's */
    CHECK(b8->kv_bytes == elems + 4 * scales, "int8 kv_bytes %.0f, want %.0f", b8->kv_bytes, elems + 4 * scales);
    CHECK(b16->kv_bytes == 4 * elems, "CPU bf16-KV (fp32 elements) kv_bytes %.0f, want %.0f", b16->kv_bytes, 4 * elems);
    CHECK(b8->kv_bytes == seqs * frigg_kv_seq_bytes(c, "cpu", FRIGG_DT_INT8, ctx) &&
              b16->kv_bytes == seqs * frigg_kv_seq_bytes(c, "cpu", FRIGG_DT_BF16, ctx) &&
              frigg_kv_seq_bytes(c, "cuda", FRIGG_DT_BF16, ctx) * seqs == bf16_bytes,
          "frigg_kv_seq_bytes disagrees with the engines");
    double r = b8->kv_bytes / bf16_bytes;
    CHECK(r > 0.5 && r <= 0.5 + 2.0 / c->head_dim + 1e-12, "int8 / bf16 cache bytes %.4f", r);
    fprintf(stderr, "test_kv_int8: cache of %d x %d tokens, %d slots: int8 %.0f bytes = %.4f of a bf16 cache (%.0f), "
                    "%.4f of the CPU engine's fp32 one\n", seqs, ctx, c->num_slots, b8->kv_bytes, r, bf16_bytes,
            b8->kv_bytes / b16->kv_bytes);
    frigg_backend_destroy(b16);
    frigg_backend_destroy(b8);
    /* the CUDA engine keeps an int8 cache too (the check frigg_backend_alloc makes for every engine), of the bytes
     * frigg_kv_seq_bytes gives; a backend without one refuses it by name; both refuse int4 */
    frigg_backend_opts o = {.max_seqs = 1, .kv_dtype = FRIGG_DT_INT8}, got;
    frigg_backend *x = frigg_backend_alloc("cuda", m, &o, &got);
    CHECK(x && x->kv_bytes == frigg_kv_seq_bytes(c, "cuda", FRIGG_DT_INT8, got.max_ctx) &&
              frigg_kv_seq_bytes(c, "cuda", FRIGG_DT_INT8, ctx) == frigg_kv_seq_bytes(c, "cpu", FRIGG_DT_INT8, ctx),
          "cuda + int8 KV: %s", x ? "the bytes disagree" : frigg_error());
    free(x);
    CHECK(frigg_backend_check_kv("metal", FRIGG_DT_INT8) != 0 && strstr(frigg_error(), "int8") &&
              strstr(frigg_error(), "\"metal\""),
          "int8 KV on a backend without one: %s", frigg_error());
    o.kv_dtype = FRIGG_DT_INT4;
    x = frigg_backend_alloc("cpu", m, &o, &got);
    CHECK(!x && strstr(frigg_error(), "int4"), "cpu + int4 KV: %s", x ? "accepted" : frigg_error());
    free(x);
    /* the fp32-reference engine takes an int8 cache too */
    frigg_backend_opts of = {.threads = 1, .max_seqs = 1, .max_ctx = 32, .kv_dtype = FRIGG_DT_INT8, .fp32_reference = 1};
    frigg_backend *f = frigg_backend_create("cpu", m, &of);
    int32_t ids[4] = {5, 6, 7, 8};
    float *lg = malloc(sizeof(float) * c->vocab_size);
    CHECK(f && frigg_prefill(f, 0, ids, 4, 2, lg, NULL) == 0 && isfinite(lg[0]), "fp32 reference + int8 KV: %s",
          frigg_error());
    free(lg);
    frigg_backend_destroy(f);
}

/* ---- KL(bf16-KV || int8-KV), teacher-forced ---- */

typedef struct {
    int seqs;
    long tokens, agree;
    double kl_sum, kl_max, nll16, nll8;
    double *kls;
    size_t cap;
} kl_stat;

static void log_softmax(const float *x, int V, double *out) {
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, x[i]);
    for (int i = 0; i < V; i++) s += exp((double)x[i] - mx);
    double lse = mx + log(s);
    for (int i = 0; i < V; i++) out[i] = (double)x[i] - lse;
}

static int kl_seq(frigg_backend *b16, frigg_backend *b8, const int32_t *ids, int n, int P, kl_stat *k) {
    int V = b16->model->cfg.vocab_size;
    float *a = malloc(sizeof(float) * (size_t)n * V), *c = malloc(sizeof(float) * (size_t)n * V);
    double *la = malloc(sizeof(double) * V), *lc = malloc(sizeof(double) * V);
    int rc = frigg_prefill(b16, 0, ids, n, P, NULL, a) || frigg_prefill(b8, 0, ids, n, P, NULL, c) ? -1 : 0;
    for (int t = P; t < n && !rc; t++) { /* row t-1 predicts token t */
        const float *ra = a + (size_t)(t - 1) * V, *rb = c + (size_t)(t - 1) * V;
        log_softmax(ra, V, la);
        log_softmax(rb, V, lc);
        double kl = 0;
        for (int i = 0; i < V; i++) kl += exp(la[i]) * (la[i] - lc[i]);
        kl = fmax(kl, 0);
        if ((size_t)k->tokens == k->cap) k->kls = realloc(k->kls, sizeof(double) * (k->cap = 2 * k->cap + 256));
        k->kls[k->tokens++] = kl;
        k->kl_sum += kl;
        k->kl_max = fmax(k->kl_max, kl);
        k->agree += frigg_argmax(ra, V) == frigg_argmax(rb, V);
        k->nll16 -= la[ids[t]];
        k->nll8 -= lc[ids[t]];
    }
    k->seqs++;
    free(a); free(c); free(la); free(lc);
    return rc;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* KL over the first `limit` lines (0: all) of a held-out file. 0, or -1 with a message. */
static int kl_run(const frigg_model *m, const char *heldout, int limit, kl_stat *k) {
    FILE *f = fopen(heldout, "r");
    if (!f) {
        fprintf(stderr, "test_kv_int8: cannot open %s\n", heldout);
        return -1;
    }
    frigg_backend_opts o16 = {.max_seqs = 1}, o8 = {.max_seqs = 1, .kv_dtype = FRIGG_DT_INT8};
    frigg_backend *b16 = frigg_backend_create("cpu", m, &o16), *b8 = frigg_backend_create("cpu", m, &o8);
    int rc = b16 && b8 ? 0 : -1;
    char *line = NULL;
    size_t cap = 0;
    while (!rc && (limit == 0 || k->seqs < limit) && getline(&line, &cap, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *ja = json_object_get(j, "input_ids");
        if (!json_is_array(ja)) {
            json_decref(j);
            continue;
        }
        int n;
        int32_t *ids = json_ids(ja, &n);
        int P = (int)json_integer_value(json_object_get(j, "prefix_tokens"));
        if (P < 1 || P >= n) rc = -1;
        else rc = kl_seq(b16, b8, ids, n, P, k);
        free(ids);
        json_decref(j);
    }
    if (rc) fprintf(stderr, "test_kv_int8: %s: %s\n", heldout, frigg_error());
    free(line);
    fclose(f);
    frigg_backend_destroy(b16);
    frigg_backend_destroy(b8);
    qsort(k->kls, (size_t)k->tokens, sizeof(double), cmp_double);
    return rc;
}

static double kl_p99(const kl_stat *k) {
    if (!k->tokens) return 0;
    long i = (long)ceil(0.99 * (double)k->tokens) - 1; /* nearest rank */
    return k->kls[i < 0 ? 0 : i];
}

static int kl_main(int argc, char **argv) {
    const char *dir = NULL, *heldout = NULL;
    int limit = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--limit") && i + 1 < argc) limit = atoi(argv[++i]);
        else if (!dir) dir = argv[i];
        else heldout = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "usage: test_kv_int8 --kl MODEL_DIR [HELDOUT.jsonl] [--limit N]\n");
        return 2;
    }
    char *hp = heldout ? frigg_xstrdup(heldout) : th_path(dir, "heldout.jsonl");
    frigg_model *m = frigg_model_load(dir);
    if (!m) {
        fprintf(stderr, "test_kv_int8: %s\n", frigg_error());
        return 2;
    }
    kl_stat k = {0};
    if (kl_run(m, hp, limit, &k)) return 1;
    frigg_backend_opts o16 = {.max_seqs = 1}, o8 = {.max_seqs = 1, .kv_dtype = FRIGG_DT_INT8};
    frigg_backend *b16 = frigg_backend_create("cpu", m, &o16), *b8 = frigg_backend_create("cpu", m, &o8);
    printf("{\"measure\":\"kl_bf16kv_vs_int8kv\",\"model\":\"%s\",\"text\":\"%s\",\"teacher_forced\":true,"
           "\"sequences\":%d,\"tokens\":%ld,\"kl_mean\":%.4e,\"kl_p99\":%.4e,\"kl_max\":%.4e,\"top1_agree\":%.5f,"
           "\"top1_agree_count\":%ld,\"nll_bf16kv\":%.5f,\"nll_int8kv\":%.5f,\"kv_bytes_per_token_bf16_cuda\":%.0f,"
           "\"kv_bytes_per_token_cpu_fp32\":%.0f,\"kv_bytes_per_token_int8\":%.0f,\"backend\":\"cpu\","
           "\"ctx\":%d}\n",
           dir, hp, k.seqs, k.tokens, k.kl_sum / (double)(k.tokens ? k.tokens : 1), kl_p99(&k), k.kl_max,
           (double)k.agree / (double)(k.tokens ? k.tokens : 1), k.agree, k.nll16 / (double)(k.tokens ? k.tokens : 1),
           k.nll8 / (double)(k.tokens ? k.tokens : 1), frigg_kv_seq_bytes(&m->cfg, "cuda", FRIGG_DT_BF16, 1),
           frigg_kv_seq_bytes(&m->cfg, "cpu", FRIGG_DT_BF16, 1), frigg_kv_seq_bytes(&m->cfg, "cpu", FRIGG_DT_INT8, 1),
           b16 ? b16->max_ctx : 0);
    frigg_backend_destroy(b16);
    frigg_backend_destroy(b8);
    free(k.kls);
    free(hp);
    frigg_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--kl")) return kl_main(argc, argv);
    TEST_MAIN_BEGIN("test_kv_int8");
    int quick = th_quick();
    test_op();
    test_attention();
    const char *dirs[] = {"golden/fixtures/tiny-packed", "golden/fixtures/tiny-split", "golden/fixtures/tiny-sharded",
                          "golden/default"};
    for (int i = 0; i < 4; i++)
        if (!quick || i == 0 || i == 3) test_dir(dirs[i]);
    char *dp = th_path(th_root(), "golden/default");
    frigg_model *m = frigg_model_load(dp);
    CHECK(m != NULL, "%s", frigg_error());
    if (m) {
        test_stepping_and_fork(m, FRIGG_DT_INT8);
        test_stepping_and_fork(m, FRIGG_DT_BF16);
        test_memory(m);
        char *hp = th_path(dp, "heldout.jsonl");
        kl_stat k = {0};
        CHECK(kl_run(m, hp, quick ? 4 : 16, &k) == 0 && k.tokens > 0, "held-out KL");
        double mean = k.kl_sum / (double)(k.tokens ? k.tokens : 1);
        CHECK(mean <= KL_MEAN_MAX, "held-out mean KL(bf16 KV || int8 KV) %.3g > %g", mean, KL_MEAN_MAX);
        fprintf(stderr, "test_kv_int8: held-out KL over %d pairs, %ld tokens: mean %.3g, p99 %.3g, top-1 %.4f\n", k.seqs,
                k.tokens, mean, kl_p99(&k), (double)k.agree / (double)(k.tokens ? k.tokens : 1));
        free(k.kls);
        free(hp);
    }
    frigg_model_free(m);
    free(dp);
    TEST_MAIN_END();
}
