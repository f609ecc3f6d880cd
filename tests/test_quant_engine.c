/* test_quant_engine.c — compressed-tensors pack-quantized checkpoints (int8 per channel, int4 group-wise) on
 * the CPU engine, with fixtures from tests/model_writer.c (compressed-tensors' own minmax q and scales,
 * pack_to_int32's bytes; checked once against the Python package, see the commit that added this file):
 *  (a) the loader: every matrix's dtype, group, integer values and scale rows are what the writer
 *      quantized, split and packed layouts (gqkv / gate_up as their per-part row blocks with their scale
 *      rows), rows that end inside an int32 word (copied) and rows that do not (used in place), a BF16
 *      embed/lm_head beside quantized layers; frigg_mat_row (the embedding lookup) is bf16(q * scale);
 *  (b) frigg_cpu_linear on INT8/INT4 matrices equals, bit for bit, frigg_cpu_linear on the BF16 matrix of
 *      the values bf16(q * scale) and a double-precision sum within fp32 accumulation bounds, at 1 and 3
 *      threads, T = 1 and T = 5; the quantized engine's logits equal bit for bit those of the engine on the
 *      BF16 checkpoint of the same dequantized weights (bf16 and fp32_reference precision, prefill with a
 *      prefix and decode steps) — the rounding point is the same, so the tolerance is 0 — and differ from
 *      a model with one scale changed, and from the unquantized model;
 *  (c) every refused scheme (another quant_method or format, asymmetric, activation or KV-cache
 *      quantization, float types, num_bits not 4/8, tensor/block/token strategies, actorder with g_idx,
 *      dynamic, sparsity, transforms, presets, unknown keys) gives an error naming it, and so does every
 *      disagreement between config and tensors (zero points, g_idx, F32 scales, shapes, group_size that
 *      does not divide, a module the config quantizes held as .weight and the reverse);
 *  (d) greedy continuation on the quantized tiny model is deterministic, and batch-invariant: four
 *      sequences decoded together, one of them joining late, give what each gives alone. */
#include <math.h>
#include <sys/stat.h>

#include "engine/backend.h"
#include "engine/cpu_ops.h"
#include "run/generate.h"
#include "harness.h"
#include "model/model.h"
#include "model_writer.h"
#include "engine/sampler.h"
#include "base/threadpool.h"
#include "base/util.h"

static char *g_tmp;

static char *write_model(const char *name, const tm_spec *s) {
    char *d = frigg_path_join(g_tmp, name);
    CHECK(tm_write_model(d, s, NULL) == 0, "%s: write failed", name);
    return d;
}

static tm_spec qspec(int bits, int group, int io_bits, int io_group, int split) {
    tm_spec s = tm_default();
    s.quant_bits = bits;
    s.quant_group = group;
    s.quant_io_bits = io_bits;
    s.quant_io_group = io_group;
    s.split = split;
    return s;
}

/* A spec whose rows end inside an int32 word: D = 34 (one head of 34), I = 51; groups of 17 divide both. */
static tm_spec odd_spec(int bits, int group) {
    tm_spec s = qspec(bits, group, bits, group, 1);
    s.hidden = 34;
    s.heads = 1;
    s.head_dim = 34;
    s.inter = 51;
    return s;
}

/* ---- (a) the loader ---- */

/* The frigg_mat parts a checkpoint tensor of the bf16 layout became: up to 4 row blocks. */
static int parts_of(const frigg_model *m, const char *name, const frigg_mat **part, int *row0) {
    if (!strcmp(name, "model.embed_tokens.weight")) return part[0] = &m->embed, row0[0] = 0, 1;
    if (!strcmp(name, "lm_head.weight")) return part[0] = &m->lm_head, row0[0] = 0, 1;
    int stack = strstr(name, "H_module") ? FRIGG_STACK_H : FRIGG_STACK_L;
    const char *p = strstr(name, ".layers.");
    if (!p) return 0;
    const frigg_layer *L = &m->stack[stack][atoi(p + 8)];
    int D = m->cfg.hidden_size, I = m->cfg.intermediate_size;
    if (strstr(name, "attn.gqkv_proj")) {
        const frigg_mat *g[4] = {&L->gate, &L->q, &L->k, &L->v};
        for (int j = 0; j < 4; j++) part[j] = g[j], row0[j] = j * D;
        return 4;
    }
    if (strstr(name, "gate_up_proj")) return part[0] = &L->mlp_gate, row0[0] = 0, part[1] = &L->up, row0[1] = I, 2;
    static const char *const sfx[] = {"self_attn.gate_proj", "self_attn.q_proj", "self_attn.k_proj",
                                      "self_attn.v_proj",    "o_proj",           "mlp.gate_proj",
                                      "mlp.up_proj",         "mlp.down_proj"};
    const frigg_mat *all[] = {&L->gate, &L->q, &L->k, &L->v, &L->o, &L->mlp_gate, &L->up, &L->down};
    for (int j = 0; j < 8; j++)
        if (strstr(name, sfx[j])) return part[0] = all[j], row0[0] = 0, 1;
    return 0;
}

static void check_loader(const char *what, const tm_spec *s) {
    char *d = write_model(what, s);
    frigg_model *m = frigg_model_load(d);
    CHECK(m != NULL, "%s: load: %s", what, frigg_error());
    if (!m) {
        free(d);
        return;
    }
    CHECK(frigg_model_check_dtypes(m) == 0, "%s: check_dtypes: %s", what, frigg_error());
    CHECK(m->layout == (s->split ? FRIGG_LAYOUT_SPLIT : FRIGG_LAYOUT_PACKED), "%s: layout", what);
    tm_tensor *t;
    int n = tm_make_tensors(s, &t), mats = 0;
    float *row = malloc(sizeof(float) * 4096);
    for (int i = 0; i < n; i++) {
        if (t[i].ndim != 2) continue;
        const frigg_mat *part[4];
        int row0[4], np = parts_of(m, t[i].name, part, row0);
        CHECK(np > 0, "%s: no matrix for %s", what, t[i].name);
        int io = !strncmp(t[i].name, "lm_head", 7) || !strncmp(t[i].name, "model.embed", 11);
        int bits = io ? s->quant_io_bits : s->quant_bits, group = io ? s->quant_io_group : s->quant_group;
        int rows = (int)t[i].shape[0], cols = (int)t[i].shape[1], ng = group ? cols / group : 1;
        int8_t *q = malloc((size_t)rows * cols);
        uint16_t *sc = malloc((size_t)rows * ng * 2);
        if (bits) tm_quantize(t[i].data, rows, cols, bits, group, q, sc);
        for (int p = 0; p < np; p++) {
            const frigg_mat *M = part[p];
            mats++;
            frigg_dtype want = bits == 8 ? FRIGG_DT_INT8 : bits == 4 ? FRIGG_DT_INT4 : FRIGG_DT_BF16;
            CHECK(M->dtype == want && M->cols == cols && M->group == (bits ? group : 0) && (bits ? !!M->scales : !M->scales),
                  "%s: %s part %d: dtype %s group %d cols %d", what, t[i].name, p, frigg_dtype_name(M->dtype), M->group,
                  M->cols);
            if (M->dtype != want) continue;
            long bad_q = 0, bad_s = 0, bad_row = 0;
            for (int r = 0; r < M->rows; r++) {
                size_t R = (size_t)(row0[p] + r);
                for (int c = 0; c < cols; c++) {
                    if (!bits) {
                        bad_q += frigg_mat_bf16(M)[(size_t)r * cols + c] != t[i].data[R * cols + c];
                        continue;
                    }
                    bad_q += frigg_mat_q(M, r, c) != q[R * cols + c];
                }
                if (bits)
                    for (int g = 0; g < ng; g++) bad_s += M->scales[(size_t)r * ng + g] != sc[R * ng + g];
                /* The embedding lookup's row: bf16(q * scale), exactly (bf16: the value itself). */
                frigg_mat_row(M, r, row);
                for (int c = 0; c < cols; c++) {
                    float w = bits ? frigg_round_bf16((float)q[R * cols + c] * frigg_bf16_to_f32(sc[R * ng + c / (group ? group : cols)]))
                                   : frigg_bf16_to_f32(t[i].data[R * cols + c]);
                    bad_row += row[c] != w;
                }
            }
            CHECK(bad_q == 0 && bad_s == 0 && bad_row == 0, "%s: %s part %d: %ld values, %ld scales, %ld row values differ",
                  what, t[i].name, p, bad_q, bad_s, bad_row);
        }
        free(q);
        free(sc);
    }
    CHECK(mats == 2 + 2 * s->layers * 8, "%s: %d matrices compared", what, mats);
    free(row);
    tm_free_tensors(t, n);
    frigg_model_free(m);
    free(d);
}

/* ---- (b) the linear op and the engine ---- */

static uint64_t g_rng[4];
static float urand(void) { return (float)frigg_rng_uniform(g_rng); }

/* An INT8/INT4 matrix with random q (the whole range) and positive bf16 scales, bytes in model.h's layout,
 * built here and not by the writer; *wbf gets the bf16(q * scale) matrix, dequantized here too. */
static frigg_mat make_qmat(int bits, int rows, int cols, int group, unsigned char **bytes, uint16_t **scales,
                           uint16_t **wbf) {
    frigg_mat M = {.rows = rows, .cols = cols, .dtype = bits == 8 ? FRIGG_DT_INT8 : FRIGG_DT_INT4, .group = group};
    size_t rb = frigg_mat_row_bytes(&M);
    int ng = group ? cols / group : 1;
    *bytes = calloc(rb * rows, 1);
    *scales = malloc((size_t)rows * ng * 2);
    *wbf = malloc((size_t)rows * cols * 2);
    for (size_t i = 0; i < (size_t)rows * ng; i++) (*scales)[i] = frigg_f32_to_bf16(0.002f + 0.05f * urand());
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            int lo = bits == 8 ? -128 : -8, span = bits == 8 ? 256 : 16;
            int q = lo + (int)(urand() * span) % span;
            unsigned u = (unsigned)(q - lo);
            if (bits == 8) (*bytes)[r * rb + c] = (unsigned char)u;
            else (*bytes)[r * rb + c / 2] |= (unsigned char)(u << (4 * (c & 1)));
            float s = frigg_bf16_to_f32((*scales)[(size_t)r * ng + (group ? c / group : 0)]);
            (*wbf)[(size_t)r * cols + c] = frigg_f32_to_bf16((float)q * s);
        }
    M.w = *bytes;
    M.scales = *scales;
    return M;
}

static void check_linear(int bits, int rows, int cols, int group) {
    unsigned char *bytes;
    uint16_t *scales, *wbf;
    frigg_mat Q = make_qmat(bits, rows, cols, group, &bytes, &scales, &wbf);
    frigg_mat B = {.w = wbf, .rows = rows, .cols = cols, .dtype = FRIGG_DT_BF16};
    enum { T = 5 };
    float *x = malloc(sizeof(float) * T * cols), *yq = malloc(sizeof(float) * T * rows),
          *yb = malloc(sizeof(float) * T * rows), *y3 = malloc(sizeof(float) * T * rows);
    for (int i = 0; i < T * cols; i++) x[i] = frigg_round_bf16(2.0f * urand() - 1.0f);
    frigg_pool *p1 = frigg_pool_create(1), *p3 = frigg_pool_create(3);
    long inexact = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            int ng = group ? cols / group : 1;
            float exact = (float)frigg_mat_q(&Q, r, c) * frigg_bf16_to_f32(scales[(size_t)r * ng + (group ? c / group : 0)]);
            inexact += exact != frigg_bf16_to_f32(wbf[(size_t)r * cols + c]);
        }
    if (bits == 8) CHECK(inexact > 0, "int8: no q * scale needed the bf16 rounding (the rounding point is untested)");
    for (int prec = 0; prec < 2; prec++)
        for (int tt = 1; tt <= T; tt += T - 1) {
            frigg_prec P = prec ? FRIGG_PREC_FP32 : FRIGG_PREC_BF16;
            frigg_cpu_linear(P, p1, &Q, x, tt, yq);
            frigg_cpu_linear(P, p1, &B, x, tt, yb);
            frigg_cpu_linear(P, p3, &Q, x, tt, y3);
            CHECK(!memcmp(yq, yb, sizeof(float) * tt * rows), "int%d g%d prec %d T %d: quantized != bf16 of bf16(q*s)", bits,
                  group, prec, tt);
            CHECK(!memcmp(yq, y3, sizeof(float) * tt * rows), "int%d g%d prec %d T %d: 3 threads differ from 1", bits,
                  group, prec, tt);
            /* Against a double sum: fp32 accumulation of cols products errs by at most ~cols * 2^-24 * Σ|w x|
             * (with margin: (cols + 2) * 2^-23); the bf16 output adds half a bf16 ulp, 2^-9 |y|. */
            double worst = 0;
            for (int t = 0; t < tt; t++)
                for (int r = 0; r < rows; r++) {
                    double ref = 0, mag = 0;
                    for (int c = 0; c < cols; c++) {
                        double w = frigg_bf16_to_f32(wbf[(size_t)r * cols + c]);
                        ref += w * x[(size_t)t * cols + c];
                        mag += fabs(w * x[(size_t)t * cols + c]);
                    }
                    double tol = (cols + 2) * ldexp(mag, -23) + (prec ? 0 : ldexp(fabs(ref), -8));
                    double e = fabs(yq[(size_t)t * rows + r] - ref) / (tol > 0 ? tol : 1);
                    if (e > worst) worst = e;
                }
            CHECK(worst <= 1.0, "int%d g%d prec %d T %d: error %.3g of the bound against a double sum", bits, group, prec,
                  tt, worst);
        }
    frigg_pool_destroy(p1);
    frigg_pool_destroy(p3);
    free(x);
    free(yq);
    free(yb);
    free(y3);
    free(bytes);
    free(scales);
    free(wbf);
}

static frigg_backend *mk(const frigg_model *m, int fp32, int threads, int seqs) {
    frigg_backend_opts o = {.threads = threads, .max_seqs = seqs, .fp32_reference = fp32};
    frigg_backend *b = frigg_backend_create("cpu", m, &o);
    CHECK(b != NULL, "cpu engine: %s", frigg_error());
    return b;
}

enum { NP = 7, PREFIX = 3, NDEC = 3 };
static const int32_t k_ids[NP + NDEC] = {5, 17, 3, 88, 41, 9, 60, 23, 71, 30};

/* Logits of a prefill of NP ids (every row, prefix PREFIX) then NDEC decode steps: (NP + NDEC) * V floats. */
static float *run_logits(const frigg_model *m, int fp32) {
    int V = m->cfg.vocab_size;
    float *out = calloc((size_t)(NP + NDEC) * V, sizeof(float));
    frigg_backend *b = mk(m, fp32, 2, 1);
    if (!b) return out;
    CHECK(frigg_prefill(b, 0, k_ids, NP, PREFIX, NULL, out) == 0, "prefill: %s", frigg_error());
    for (int t = 0; t < NDEC; t++) {
        int seq = 0;
        CHECK(frigg_decode(b, 1, &seq, &k_ids[NP + t], out + (size_t)(NP + t) * V) == 0, "decode: %s", frigg_error());
    }
    frigg_backend_destroy(b);
    return out;
}

static double maxdiff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static double maxabs(const float *a, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i]));
    return d;
}

/* The quantized checkpoint of spec s with the first scale of `module` doubled. */
static char *write_changed_scale(const char *name, const tm_spec *s, const char *module) {
    char *d = frigg_path_join(g_tmp, name);
    mkdir(d, 0755);
    tm_write_config(d, s, NULL);
    tm_tensor *t;
    int n = tm_make_tensors(s, &t);
    n = tm_quantize_tensors(s, &t, n);
    char want[200];
    snprintf(want, sizeof want, "%s.weight_scale", module);
    int found = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, want)) {
            t[i].data[0] = frigg_f32_to_bf16(2.0f * frigg_bf16_to_f32(t[i].data[0]));
            found = 1;
        }
    CHECK(found, "%s: no tensor %s", name, want);
    char *p = frigg_path_join(d, "model.safetensors");
    tm_write_safetensors(p, t, n, 0);
    free(p);
    tm_free_tensors(t, n);
    return d;
}

static void check_engine(const char *what, tm_spec s) {
    char nq[96], nr[96], nb[96], nc[96];
    snprintf(nq, sizeof nq, "%s-q", what);
    snprintf(nr, sizeof nr, "%s-dq", what);
    snprintf(nb, sizeof nb, "%s-bf16", what);
    snprintf(nc, sizeof nc, "%s-scale", what);
    char *dq = write_model(nq, &s);
    tm_spec r = s;
    r.quant_dequant = 1;
    char *dr = write_model(nr, &r);
    tm_spec u = s;
    u.quant_bits = u.quant_io_bits = 0;
    char *du = write_model(nb, &u);
    char *dc = write_changed_scale(nc, &s, s.split ? "model.H_module.layers.1.mlp.down_proj"
                                                    : "model.H_module.layers.1.attn.gqkv_proj");
    frigg_model *mq = frigg_model_load(dq), *mr = frigg_model_load(dr), *mu = frigg_model_load(du),
                *mc = frigg_model_load(dc);
    CHECK(mq && mr && mu && mc, "%s: load: %s", what, frigg_error());
    if (mq && mr && mu && mc) {
        CHECK(mr->embed.dtype == FRIGG_DT_BF16 && mr->stack[1][0].down.dtype == FRIGG_DT_BF16, "%s: reference is BF16",
              what);
        size_t n = (size_t)(NP + NDEC) * mq->cfg.vocab_size;
        for (int fp32 = 0; fp32 < 2; fp32++) {
            const char *pn = fp32 ? "fp32_reference" : "bf16";
            float *lq = run_logits(mq, fp32), *lr = run_logits(mr, fp32), *lu = run_logits(mu, fp32),
                  *lc = run_logits(mc, fp32);
            CHECK(!memcmp(lq, lr, n * sizeof(float)), "%s %s: quantized logits differ from the dequantized BF16 "
                  "checkpoint's by %g (tolerance 0: the same weights, the same sums)", what, pn, maxdiff(lq, lr, n));
            double dun = maxdiff(lq, lu, n), dcn = maxdiff(lq, lc, n);
            CHECK(dun > 0, "%s %s: quantized logits equal the unquantized model's (quantization not applied?)", what, pn);
            CHECK(dcn > 0, "%s %s: doubling one scale changed no logit", what, pn);
            if (!fp32)
                printf("  %s: |quantized - unquantized| logits <= %.3g (|logits| <= %.3g); one scale doubled: %.3g\n",
                       what, dun, maxabs(lu, n), dcn);
            free(lq);
            free(lr);
            free(lu);
            free(lc);
        }
    }
    frigg_model_free(mq);
    frigg_model_free(mr);
    frigg_model_free(mu);
    frigg_model_free(mc);
    free(dq);
    free(dr);
    free(du);
    free(dc);
}

/* ---- (c) refusals ---- */

#define W_OK "{\"num_bits\":4,\"type\":\"int\",\"symmetric\":true,\"strategy\":\"group\",\"group_size\":16,\"dynamic\":false}"
#define TOP_OK "\"format\":\"pack-quantized\",\"quant_method\":\"compressed-tensors\""

/* A quantization_config: one group (targets `targets`, weights `w`, `gextra` spliced into the group) and
 * the top-level keys `top` (+ `textra`). */
static char *qc_json(const char *targets, const char *w, const char *gextra, const char *top, const char *textra) {
    char *b = malloc(4096);
    snprintf(b, 4096, "{\"config_groups\":{\"group_0\":{\"targets\":%s,\"weights\":%s%s}},%s%s}", targets, w, gextra, top,
             textra);
    return b;
}

/* config.json with this quantization_config must be refused, the error naming `needle`. */
static void expect_config_refused(const char *qc, const char *needle) {
    static int k;
    char name[32];
    snprintf(name, sizeof name, "c-cfg-%d", k++);
    char *d = frigg_path_join(g_tmp, name);
    mkdir(d, 0755);
    tm_spec s = tm_default();
    s.quant_json = qc;
    tm_write_config(d, &s, NULL);
    char *p = frigg_path_join(d, "config.json");
    frigg_config c;
    int rc = frigg_config_load(&c, p);
    CHECK(rc == -1, "accepted: %s", qc);
    if (rc == -1) CHECK(strstr(frigg_error(), needle) != NULL, "error \"%s\" does not name \"%s\"", frigg_error(), needle);
    free(p);
    free(d);
}

static void expect_config_ok(const char *qc) {
    char *d = frigg_path_join(g_tmp, "c-cfg-ok");
    mkdir(d, 0755);
    tm_spec s = tm_default();
    s.quant_json = qc;
    tm_write_config(d, &s, NULL);
    char *p = frigg_path_join(d, "config.json");
    frigg_config c;
    CHECK(frigg_config_load(&c, p) == 0 && c.quantized, "refused: %s: %s", qc, frigg_error());
    free(p);
    free(d);
}

static void check_config_refusals(void) {
    char *q;
#define REFUSE(expr, needle) (q = (expr), expect_config_refused(q, needle), free(q))
#define ACCEPT(expr) (q = (expr), expect_config_ok(q), free(q))
    ACCEPT(qc_json("[\"Linear\"]", W_OK, "", TOP_OK, ""));
    ACCEPT(qc_json("[\"Linear\"]", W_OK, ",\"input_activations\":null,\"output_activations\":null,\"format\":\"pack-quantized\"",
                   TOP_OK, ",\"ignore\":[\"lm_head\"],\"kv_cache_scheme\":null,\"quantization_status\":\"compressed\","
                   "\"sparsity_config\":{},\"transform_config\":{},\"version\":\"0.20.1\",\"global_compression_ratio\":null"));
    ACCEPT(qc_json("[\"Linear\"]", "{\"num_bits\":8,\"group_size\":-1}", "", TOP_OK, ""));    /* inferred channel */
    ACCEPT(qc_json("[\"Linear\"]", "{\"num_bits\":4,\"group_size\":32}", "", TOP_OK, ""));    /* inferred group */
    ACCEPT(qc_json("[\"Linear\"]", "{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":32,\"actorder\":\"weight\","
                   "\"observer\":\"minmax\",\"observer_kwargs\":{}}", "", TOP_OK, ""));
    /* quant_method, format */
    static const char *const methods[] = {"gptq", "awq", "bitsandbytes", "fp8", "compressed_tensors"};
    for (int i = 0; i < 5; i++) {
        char top[160], needle[64];
        snprintf(top, sizeof top, "\"format\":\"pack-quantized\",\"quant_method\":\"%s\"", methods[i]);
        snprintf(needle, sizeof needle, "quant_method \"%s\"", methods[i]);
        REFUSE(qc_json("[\"Linear\"]", W_OK, "", top, ""), needle);
    }
    REFUSE(qc_json("[\"Linear\"]", W_OK, "", "\"format\":\"pack-quantized\"", ""), "quant_method (absent)");
    static const char *const formats[] = {"int-quantized", "float-quantized", "naive-quantized", "marlin-24",
                                          "nvfp4-pack-quantized", "mxfp4-pack-quantized", "dense", "mixed-precision",
                                          "sparse-24-bitmask"};
    for (int i = 0; i < 9; i++) {
        char top[160], needle[64];
        snprintf(top, sizeof top, "\"format\":\"%s\",\"quant_method\":\"compressed-tensors\"", formats[i]);
        snprintf(needle, sizeof needle, "format \"%s\"", formats[i]);
        REFUSE(qc_json("[\"Linear\"]", W_OK, "", top, ""), needle);
    }
    REFUSE(qc_json("[\"Linear\"]", W_OK, ",\"format\":\"int-quantized\"", TOP_OK, ""), "group_0.format int-quantized");
    /* the weights' scheme */
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":4,\"symmetric\":false,\"strategy\":\"group\",\"group_size\":16}", "",
                   TOP_OK, ""), "asymmetric");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"channel\"}", "", TOP_OK, ""),
           "type \"float\"");
    static const int bad_bits[] = {1, 2, 3, 5, 6, 7, 16};
    for (int i = 0; i < 7; i++) {
        char w[160], needle[64];
        snprintf(w, sizeof w, "{\"num_bits\":%d,\"strategy\":\"channel\"}", bad_bits[i]);
        snprintf(needle, sizeof needle, "num_bits %d is not supported", bad_bits[i]);
        REFUSE(qc_json("[\"Linear\"]", w, "", TOP_OK, ""), needle);
    }
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":8}", "", TOP_OK, ""), "strategy \"tensor\""); /* no group_size */
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":8,\"strategy\":\"tensor\"}", "", TOP_OK, ""), "strategy \"tensor\"");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":8,\"strategy\":\"token\",\"dynamic\":false}", "", TOP_OK, ""),
           "strategy \"token\"");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":8,\"strategy\":\"tensor_group\",\"group_size\":16}", "", TOP_OK, ""),
           "strategy \"tensor_group\"");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":8,\"strategy\":\"block\",\"block_structure\":[128,128]}", "", TOP_OK, ""),
           "block_structure");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":4,\"strategy\":\"group\"}", "", TOP_OK, ""), "positive group_size");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":4,\"strategy\":\"channel\",\"group_size\":128}", "", TOP_OK, ""),
           "group_size 128 with strategy \"channel\"");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":16,\"actorder\":\"group\"}", "",
                   TOP_OK, ""), "actorder group");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":16,\"actorder\":\"dynamic\"}", "",
                   TOP_OK, ""), "actorder dynamic");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":16,\"actorder\":true}", "",
                   TOP_OK, ""), "actorder true");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":8,\"strategy\":\"channel\",\"dynamic\":true}", "", TOP_OK, ""),
           "dynamic");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":8,\"strategy\":\"channel\",\"scale_dtype\":\"torch.float32\"}", "",
                   TOP_OK, ""), "scale_dtype torch.float32");
    REFUSE(qc_json("[\"Linear\"]", "{\"num_bits\":8,\"strategy\":\"channel\",\"zero_point\":0}", "", TOP_OK, ""),
           "unknown key \"zero_point\"");
    /* activations, KV cache, sparsity, transforms, presets, the rest of the schema */
    REFUSE(qc_json("[\"Linear\"]", W_OK, ",\"input_activations\":{\"num_bits\":8,\"strategy\":\"token\",\"dynamic\":true}",
                   TOP_OK, ""), "input_activations");
    REFUSE(qc_json("[\"Linear\"]", W_OK, ",\"output_activations\":{\"num_bits\":8,\"strategy\":\"tensor\"}", TOP_OK, ""),
           "output_activations");
    REFUSE(qc_json("[\"Linear\"]", W_OK, "", TOP_OK, ",\"kv_cache_scheme\":{\"num_bits\":8,\"type\":\"float\"}"),
           "kv_cache_scheme");
    REFUSE(qc_json("[\"Linear\"]", W_OK, "", TOP_OK, ",\"sparsity_config\":{\"format\":\"sparse-24-bitmask\"}"),
           "sparsity_config");
    REFUSE(qc_json("[\"Linear\"]", W_OK, "", TOP_OK, ",\"transform_config\":{\"config_groups\":{}}"), "transform_config");
    REFUSE(qc_json("[\"Linear\"]", W_OK, "", TOP_OK, ",\"quantization_status\":\"frozen\""), "quantization_status frozen");
    REFUSE(qc_json("[\"Linear\"]", W_OK, "", TOP_OK, ",\"awq_version\":1"), "unknown key \"awq_version\"");
    REFUSE(qc_json("[\"Linear\"]", W_OK, ",\"observer\":\"minmax\"", TOP_OK, ""), "unknown key \"observer\"");
    REFUSE(qc_json("[]", W_OK, "", TOP_OK, ""), "targets");
    REFUSE(qc_json("[\"Linear\"]", "null", "", TOP_OK, ""), "no weights scheme");
    REFUSE(strdup("{\"config_groups\":{\"W4A16\":[\"Linear\"]}," TOP_OK "}"), "preset");
    REFUSE(strdup("{\"config_groups\":{}," TOP_OK "}"), "config_groups");
    REFUSE(strdup("[1]"), "must be an object");
#undef REFUSE
#undef ACCEPT
}

/* Edits of a quantized checkpoint's tensor list (split layout), each to be refused by the loader. */
enum { E_ZERO_POINT, E_G_IDX, E_SCALE_F32, E_PACKED_F32, E_SHAPE_VALUES, E_BOTH, E_SCALE_NAN, E_ZL_I32, E_NO_SHAPE };
static const char *const k_mod = "model.L_module.layers.0.self_attn.k_proj";

static tm_tensor *find_t(tm_tensor *t, int n, const char *mod, const char *sfx) {
    char want[200];
    snprintf(want, sizeof want, "%s%s%s", mod, *sfx ? "." : "", sfx);
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, want)) return &t[i];
    return NULL;
}

static tm_tensor *append_t(tm_tensor **t, int *n, const char *name, const char *dtype, int ndim, int64_t d0, int64_t d1,
                           size_t bytes) {
    *t = realloc(*t, (*n + 1) * sizeof **t);
    tm_tensor *x = &(*t)[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->ndim = ndim;
    x->shape[0] = d0;
    x->shape[1] = d1;
    x->dtype = dtype;
    x->raw = calloc(bytes, 1);
    x->raw_bytes = bytes;
    return x;
}

static void expect_model_refused(const char *name, const tm_spec *s, int edit, const char *needle) {
    char *d = frigg_path_join(g_tmp, name);
    mkdir(d, 0755);
    tm_write_config(d, s, NULL);
    tm_tensor *t;
    int n = tm_make_tensors(s, &t);
    n = tm_quantize_tensors(s, &t, n);
    char nm[200];
    int D = s->hidden;
    tm_tensor *x;
    switch (edit) {
    case E_ZERO_POINT:
        snprintf(nm, sizeof nm, "%s.weight_zero_point", k_mod);
        append_t(&t, &n, nm, "I32", 2, D / 8, D / 16, (size_t)D / 8 * (D / 16) * 4);
        break;
    case E_G_IDX:
        snprintf(nm, sizeof nm, "%s.weight_g_idx", k_mod);
        append_t(&t, &n, nm, "I32", 1, D, 0, (size_t)D * 4);
        break;
    case E_SCALE_F32:
        x = find_t(t, n, k_mod, "weight_scale");
        x->raw_bytes = (size_t)x->shape[0] * x->shape[1] * 4;
        x->raw = malloc(x->raw_bytes);
        for (size_t i = 0; i < x->raw_bytes / 4; i++) ((float *)x->raw)[i] = frigg_bf16_to_f32(x->data[i]);
        x->dtype = "F32";
        free(x->data);
        x->data = NULL;
        break;
    case E_PACKED_F32: find_t(t, n, k_mod, "weight_packed")->dtype = "F32"; break;
    case E_SHAPE_VALUES: ((int64_t *)find_t(t, n, k_mod, "weight_shape")->raw)[1] = D + 8; break;
    case E_BOTH:
        snprintf(nm, sizeof nm, "%s.weight", k_mod);
        append_t(&t, &n, nm, "BF16", 2, D, D, (size_t)D * D * 2);
        break;
    case E_SCALE_NAN: find_t(t, n, k_mod, "weight_scale")->data[3] = 0x7fc0; break;
    case E_ZL_I32: {
        x = find_t(t, n, "model.z_L_init", "");
        x->dtype = "I32";
        x->raw_bytes = (size_t)D * 4;
        x->raw = calloc(D, 4);
        break;
    }
    case E_NO_SHAPE: {
        x = find_t(t, n, k_mod, "weight_shape");
        snprintf(x->name, sizeof x->name, "%s.weight_shape_", k_mod);
        break;
    }
    }
    char *p = frigg_path_join(d, "model.safetensors");
    tm_write_safetensors(p, t, n, 0);
    free(p);
    tm_free_tensors(t, n);
    frigg_model *m = frigg_model_load(d);
    CHECK(m == NULL, "%s: loaded", name);
    if (!m) CHECK(strstr(frigg_error(), needle) != NULL, "%s: error \"%s\" does not name \"%s\"", name, frigg_error(), needle);
    frigg_model_free(m);
    free(d);
}

/* A quantized checkpoint of spec `w` (tensors) with config.json's quantization_config `qc` (NULL: none). */
static void expect_mismatch(const char *name, tm_spec w, const char *qc, const char *needle) {
    char *d = write_model(name, &w);
    tm_spec c = w;
    if (qc) c.quant_json = qc;
    else c.quant_bits = c.quant_io_bits = 0;
    tm_write_config(d, &c, NULL);
    frigg_model *m = frigg_model_load(d);
    CHECK(m == NULL, "%s: loaded", name);
    if (!m) CHECK(strstr(frigg_error(), needle) != NULL, "%s: error \"%s\" does not name \"%s\"", name, frigg_error(), needle);
    frigg_model_free(m);
    free(d);
}

static void expect_loads(const char *name, tm_spec w, const char *qc) {
    char *d = write_model(name, &w);
    tm_spec c = w;
    c.quant_json = qc;
    tm_write_config(d, &c, NULL);
    frigg_model *m = frigg_model_load(d);
    CHECK(m != NULL, "%s: %s", name, frigg_error());
    if (m) CHECK(m->stack[1][1].down.dtype == (w.quant_bits == 8 ? FRIGG_DT_INT8 : FRIGG_DT_INT4) &&
                 m->lm_head.dtype == (w.quant_io_bits ? FRIGG_DT_INT8 : FRIGG_DT_BF16), "%s: dtypes", name);
    frigg_model_free(m);
    free(d);
}

#define G0(targets, w) "{\"config_groups\":{\"group_0\":{\"targets\":" targets ",\"weights\":" w "}"
#define W4G16 "{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":16}"
#define W8CH "{\"num_bits\":8,\"strategy\":\"channel\"}"
#define END ",\"format\":\"pack-quantized\",\"quant_method\":\"compressed-tensors\"}"

static void check_model_refusals(void) {
    tm_spec s = qspec(4, 16, 8, 0, 1);
    expect_model_refused("c-zp", &s, E_ZERO_POINT, "weight_zero_point: zero points");
    expect_model_refused("c-gidx", &s, E_G_IDX, "g_idx");
    expect_model_refused("c-scalef32", &s, E_SCALE_F32, "only BF16 scales");
    expect_model_refused("c-packedf32", &s, E_PACKED_F32, "expected I32");
    expect_model_refused("c-shapeval", &s, E_SHAPE_VALUES, "weight_shape\" says");
    expect_model_refused("c-both", &s, E_BOTH, "both");
    expect_model_refused("c-nan", &s, E_SCALE_NAN, "not finite");
    expect_model_refused("c-zl-i32", &s, E_ZL_I32, "expected a float tensor");
    expect_model_refused("c-noshape", &s, E_NO_SHAPE, "missing tensor \"model.L_module.layers.0.self_attn.k_proj.weight_shape\"");

    /* Config and tensors disagree. */
    tm_spec w = qspec(4, 16, 0, 0, 1);
    expect_mismatch("c-nocfg", w, NULL, "no quantization_config");
    expect_mismatch("c-bits", w, G0("[\"Linear\"]", W8CH) "},\"ignore\":[\"lm_head\"]" END, "weight_packed\" has shape");
    expect_mismatch("c-group", w, G0("[\"Linear\"]", "{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":8}")
                    "},\"ignore\":[\"lm_head\"]" END, "weight_scale\" has shape");
    expect_mismatch("c-channel", w, G0("[\"Linear\"]", "{\"num_bits\":4,\"strategy\":\"channel\"}")
                    "},\"ignore\":[\"lm_head\"]" END, "weight_scale\" has shape");
    expect_mismatch("c-lm-head", w, G0("[\"Linear\"]", W4G16) "}" END,
                    "quantizes lm_head (config group \"group_0\") but the checkpoint holds lm_head.weight");
    expect_mismatch("c-untargeted", w, G0("[\"re:.*self_attn.*\"]", W4G16) "}" END,
                    "model.L_module.layers.0.mlp.gate_proj.weight_packed\" but quantization_config does not quantize");
    expect_mismatch("c-ignored", w, G0("[\"Linear\"]", W4G16) "},\"ignore\":[\"lm_head\",\"re:.*down_proj\"]" END,
                    "does not quantize model.L_module.layers.0.mlp.down_proj");
    expect_mismatch("c-two-groups", w, G0("[\"Linear\"]", W4G16) ",\"group_1\":{\"targets\":[\"re:model\\\\.L_module\"],"
                    "\"weights\":" W4G16 "}},\"ignore\":[\"lm_head\"]" END, "target of config groups");
    expect_mismatch("c-regex", w, G0("[\"re:(\"]", W4G16) "}" END, "does not compile");
    tm_spec e = qspec(4, 16, 8, 0, 1);
    expect_mismatch("c-embed", e, G0("[\"Linear\"]", W4G16) ",\"group_1\":{\"targets\":[\"lm_head\"],\"weights\":" W8CH
                    "}},\"ignore\":[\"lm_head\"]" END, "does not quantize model.embed_tokens");
    tm_spec g = qspec(4, 16, 0, 0, 1);
    g.hidden = 48;
    g.heads = 3;
    g.inter = 96;
    expect_mismatch("c-divide", g, G0("[\"Linear\"]", "{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":32}")
                    "},\"ignore\":[\"lm_head\"]" END, "group_size 32 (config group \"group_0\") does not divide its input "
                    "dimension 48");
    tm_spec pk = qspec(4, 16, 0, 0, 0);
    expect_mismatch("c-packed-names", pk, G0("[\"re:.*self_attn.*\",\"re:.*mlp.*\"]", W4G16) ",\"group_1\":{\"targets\":"
                    "[\"model.L_module.layers.0.attn.gqkv_proj\"],\"weights\":" W4G16 "}}" END, "under one name");
    /* ... and what the matching rules accept: class names, regexes, HF names for the packed layout's modules,
     * exact names, ignore entries. */
    expect_loads("c-ok-linear", w, G0("[\"Linear\"]", W4G16) "},\"ignore\":[\"lm_head\"]" END);
    expect_loads("c-ok-regex", w, G0("[\"re:model\\\\.[LH]_module\\\\.\"]", W4G16) "}" END);
    expect_loads("c-ok-packed-hf", pk, G0("[\"re:.*self_attn\\\\.\",\"re:.*mlp\\\\.\"]", W4G16) "}" END);
    expect_loads("c-ok-packed-ckpt", pk, G0("[\"re:.*_proj$\"]", W4G16) "},\"ignore\":[\"lm_head\"]" END);
    tm_spec io = qspec(8, 0, 8, 0, 0);
    expect_loads("c-ok-module", io, G0("[\"Linear\",\"Embedding\"]", W8CH) "}" END);
}

/* ---- (d) greedy decoding: deterministic and batch-invariant ---- */

static void check_greedy(const char *what, const tm_spec *s) {
    char *d = write_model(what, s);
    frigg_model *m = frigg_model_load(d);
    CHECK(m != NULL, "%s: %s", what, frigg_error());
    if (!m) {
        free(d);
        return;
    }
    enum { NS = 4, MAXT = 12, JOIN = 3 };
    static const int32_t prompts[NS][6] = {{5, 17, 3, 88, 41, 9}, {60, 23}, {71, 30, 2, 14, 50}, {2, 8, 8}};
    static const int plen[NS] = {6, 2, 5, 3}, prefix[NS] = {3, 0, 5, 1};
    int32_t alone[2][NS][MAXT];
    for (int rep = 0; rep < 2; rep++)
        for (int i = 0; i < NS; i++) {
            frigg_backend *b = mk(m, 0, 1 + rep * 2, 1);
            if (!b) continue;
            frigg_gen_params gp = {.max_tokens = MAXT, .prefix_tokens = prefix[i]};
            frigg_gen_result r = {0};
            CHECK(frigg_generate(b, 0, prompts[i], plen[i], &gp, &r) == 0 && r.n == MAXT, "%s: generate %d: %s", what, i,
                  frigg_error());
            for (int t = 0; t < MAXT; t++) alone[rep][i][t] = t < r.n ? r.ids[t] : -1;
            frigg_gen_result_free(&r);
            frigg_backend_destroy(b);
        }
    CHECK(!memcmp(alone[0], alone[1], sizeof alone[0]), "%s: greedy ids differ between two runs (1 and 3 threads)", what);
    /* Together: four sequences in one engine, sequence 2 joining JOIN steps late (its prefill beside the
     * others' decode rows); all decode rows of a step in one submit. */
    frigg_backend *b = mk(m, 0, 3, NS);
    int32_t got[NS][MAXT], out[NS];
    int ngot[NS] = {0};
    for (int step = 0; b && step < MAXT + JOIN; step++) {
        frigg_row rows[NS];
        int nr = 0, who[NS];
        for (int i = 0; i < NS; i++) {
            int start = i == 2 ? JOIN : 0;
            if (step < start || ngot[i] == MAXT) continue;
            frigg_row r = {.seq = i, .want = FRIGG_WANT_GREEDY, .out_id = &out[nr]};
            if (step == start) {
                r.prefill = 1;
                r.ids = prompts[i];
                r.n = plen[i];
                r.prefix_len = prefix[i];
            } else {
                r.n = 1;
                r.token = got[i][ngot[i] - 1];
            }
            who[nr] = i;
            rows[nr++] = r;
        }
        if (!nr) break;
        CHECK(frigg_step(b, rows, nr) == 0, "%s: step %d: %s", what, step, frigg_error());
        for (int j = 0; j < nr; j++) got[who[j]][ngot[who[j]]++] = out[j];
    }
    for (int i = 0; i < NS; i++)
        CHECK(ngot[i] == MAXT && !memcmp(got[i], alone[0][i], sizeof got[i]), "%s: sequence %d decoded together differs "
              "from alone", what, i);
    frigg_backend_destroy(b);
    frigg_model_free(m);
    free(d);
}

static void check_cuda_refuses(void) {
#ifdef FRIGG_CUDA
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device: the CUDA engine's refusal of INT4 weights is not exercised");
        return;
    }
    tm_spec s = qspec(4, 16, 8, 0, 1);
    char *d = write_model("cuda-q4", &s);
    frigg_model *m = frigg_model_load(d);
    CHECK(m != NULL, "load: %s", frigg_error());
    if (m) {
        frigg_backend_opts o = {.max_seqs = 1, .max_ctx = 16};
        frigg_backend *b = frigg_backend_create("cuda", m, &o);
        CHECK(b == NULL && strstr(frigg_error(), "int8"), "cuda engine on a quantized model: %s", b ? "created" : frigg_error());
        frigg_backend_destroy(b);
    }
    frigg_model_free(m);
    free(d);
#endif
}

int main(void) {
    TEST_MAIN_BEGIN("test_quant_engine");
    g_tmp = tm_tempdir();
    CHECK(g_tmp != NULL, "temp dir");
    if (!g_tmp) TEST_MAIN_END();
    frigg_rng_seed(g_rng, 1234);

    /* (a) */
    tm_spec s;
    s = qspec(8, 0, 8, 0, 1), check_loader("a-q8ch-split", &s);
    s = qspec(8, 0, 8, 0, 0), check_loader("a-q8ch-packed", &s);
    s = qspec(4, 16, 8, 0, 1), check_loader("a-q4g16-split", &s);
    s = qspec(4, 16, 8, 0, 0), check_loader("a-q4g16-packed", &s);
    s = qspec(4, 0, 0, 0, 0), check_loader("a-q4ch-packed-bf16io", &s);
    s = qspec(8, 8, 4, 8, 1), check_loader("a-q8g8-q4g8io-split", &s);
    s = odd_spec(4, 17), check_loader("a-odd-q4g17", &s);
    s = odd_spec(8, 0), check_loader("a-odd-q8ch", &s);
    s = odd_spec(4, 0), check_loader("a-odd-q4ch", &s);

    /* (b) */
    check_linear(8, 37, 96, 0);
    check_linear(8, 37, 96, 32);
    check_linear(4, 37, 96, 0);
    check_linear(4, 37, 96, 32);
    check_linear(4, 19, 51, 17); /* rows of 25.5 bytes */
    check_linear(8, 19, 51, 0);
    check_engine("b-q8ch-split", qspec(8, 0, 8, 0, 1));
    check_engine("b-q4g16-packed", qspec(4, 16, 8, 0, 0));
    check_engine("b-q4g8-split-bf16io", qspec(4, 8, 0, 0, 1));
    check_engine("b-odd-q4g17", odd_spec(4, 17));

    /* (c) */
    check_config_refusals();
    check_model_refusals();
    check_cuda_refuses();

    /* (d) */
    s = qspec(4, 16, 8, 0, 1), check_greedy("d-q4g16", &s);
    s = qspec(8, 0, 8, 0, 0), check_greedy("d-q8ch-packed", &s);

    tm_rmrf(g_tmp);
    free(g_tmp);

    TEST_MAIN_END();
}
