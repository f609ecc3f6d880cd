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

#include "backend.h"
#include "cpu_ops.h"
#include "generate.h"
#include "harness.h"
#include "model.h"
#include "model_writer.h"
#include "sampler.h"
#include "threadpool.h"
#include "util.h"

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

    TEST_MAIN_END();
}
