/* test_kl — common/eval/kl.h: the per-token figures against hand-computed values (KL of two known distributions,
 * equal rows give exactly 0, ties pick the lowest id, the NLLs equal frigg_nll_sum's), a text cut into
 * sequences (blank lines skipped, long lines cut into pieces of ctx - 1 after <bos>, the limit, bad input),
 * the tokenizer comparison, and frigg_kl_run on two CPU engines: a small model against its int8 build (KL
 * above 0, small; the NLLs equal frigg_nll's), against itself (0, top-1 1), a summary the same for 1 and 3
 * sequences at once, and a bad sequence reported without stopping the others. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "harness.h"
#include "eval/kl.h"
#include "model/model.h"
#include "model_writer.h"
#include "eval/nll.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"

static void test_score(void) {
    /* two targets over a 3-token vocabulary; row t-1 predicts token t */
    const int32_t ids[3] = {0, 1, 2};
    const float ref[9] = {0, (float)log(3.0), -1e30f, /* p = (1/4, 3/4, 0) */ 1, 1, 0, /* tie: argmax 0 */ 0, 0, 0};
    const float mod[9] = {0, 0, -1e30f, /* q = (1/2, 1/2, 0) */ 1, 1, 1, /* tie: argmax 0 */ 0, 0, 0};
    double kt[2];
    frigg_kl_seq r;
    frigg_kl_score(ref, mod, 3, ids, 3, 1, kt, &r);
    double p0 = 1 / 4.0, p1 = 3 / 4.0;
    double want0 = p0 * log(p0 / 0.5) + p1 * log(p1 / 0.5);
    CHECK(r.targets == 2 && fabs(kt[0] - want0) < 1e-7, "KL of (1/4, 3/4) against (1/2, 1/2): %.9g, want %.9g", kt[0],
          want0);
    double p = exp(1.0) / (2 * exp(1.0) + 1), pz = 1 / (2 * exp(1.0) + 1), want1 = 2 * p * log(p * 3) + pz * log(pz * 3);
    CHECK(fabs(kt[1] - want1) < 1e-7, "KL of row 2: %.9g, want %.9g", kt[1], want1);
    CHECK(r.top1_agree == 1, "top-1: %d agree, want 1 (row 1: 1 against 0, the tie's lowest id; row 2: 0 and 0)",
          r.top1_agree);
    CHECK(fabs(r.gap_max - log(3.0)) < 1e-6 && r.gap_sum == r.gap_max, "the disagreement's gap %.9g, want log 3",
          r.gap_max);
    CHECK(fabs(r.kl_sum - (kt[0] + kt[1])) < 1e-15 && r.kl_max == fmax(kt[0], kt[1]), "kl_sum / kl_max");
    CHECK(fabs(r.nll_ref - frigg_nll_sum(ref, 3, ids, 3, 1)) < 1e-12, "nll_ref %.9g vs frigg_nll_sum %.9g", r.nll_ref,
          frigg_nll_sum(ref, 3, ids, 3, 1));
    CHECK(fabs(r.nll_model - frigg_nll_sum(mod, 3, ids, 3, 1)) < 1e-12, "nll_model");
    /* equal rows: exactly 0 */
    frigg_kl_score(ref, ref, 3, ids, 3, 1, kt, &r);
    CHECK(kt[0] == 0 && kt[1] == 0 && r.top1_agree == 2 && r.nll_ref == r.nll_model, "equal rows: KL %g %g", kt[0], kt[1]);
    /* disagreeing top-1 */
    const float a[6] = {0, 1, 0, 0, 0, 0}, b[6] = {1, 0, 0, 0, 0, 0};
    frigg_kl_score(a, b, 3, ids, 2, 1, kt, &r);
    CHECK(r.top1_agree == 0 && kt[0] > 0 && r.top1_ties == 0, "top-1 1 vs 0: %d (ties %d)", r.top1_agree, r.top1_ties);
    /* a tie in the reference (ids 0 and 1 share its top logit) that the model settles the other way: a
     * disagreement at gap 0, counted as a tie; a near tie is not */
    const float t[9] = {1, 1, 0, 2, 1.9375f, 0, 0, 0, 0}, u[9] = {0, 1, 0, 0, 2, 0, 0, 0, 0};
    const int32_t ids3[3] = {0, 1, 2};
    frigg_kl_score(t, u, 3, ids3, 3, 1, kt, &r);
    CHECK(r.top1_agree == 0 && r.top1_ties == 1 && r.gap_max == 0.0625, "tie then near tie: agree %d, ties %d, gap max %g",
          r.top1_agree, r.top1_ties, r.gap_max);
}

static void test_text(const frigg_tokenizer *tok) {
    const char *text = "Hvad er hovedstaden i Danmark?\n\n   \t\nDet var en mørk og stormfuld nat.\r\nlast line";
    frigg_eval_seq *s = NULL;
    int n = 0;
    CHECK(frigg_eval_text_seqs(tok, text, strlen(text), 2, 512, 0, &s, &n) == 0 && n == 3, "3 lines: %d (%s)", n,
          frigg_error());
    for (int i = 0; i < n; i++) CHECK(s[i].ids[0] == 2 && s[i].prefix == 1 && s[i].n >= 2, "sequence %d: bos, prefix 1", i);
    int32_t *ids = NULL;
    size_t ni = 0;
    frigg_tokenizer_encode(tok, "Det var en mørk og stormfuld nat.", strlen("Det var en mørk og stormfuld nat."), &ids, &ni);
    CHECK(n == 3 && (size_t)s[1].n == ni + 1 && !memcmp(s[1].ids + 1, ids, ni * sizeof *ids),
          "line 2 (with \\r\\n) is its encoding after bos");
    /* cut into pieces of ctx - 1 = 3 tokens */
    frigg_eval_seq *c = NULL;
    int nc = 0;
    const char *one = "Det var en mørk og stormfuld nat.";
    CHECK(frigg_eval_text_seqs(tok, one, strlen(one), 2, 4, 0, &c, &nc) == 0 && nc == (int)((ni + 2) / 3),
          "%zu tokens in pieces of 3: %d sequences", ni, nc);
    size_t got = 0;
    for (int i = 0; i < nc; i++) {
        CHECK(c[i].n <= 4 && c[i].ids[0] == 2 && !memcmp(c[i].ids + 1, ids + got, sizeof *ids * (size_t)(c[i].n - 1)),
              "piece %d", i);
        got += (size_t)(c[i].n - 1);
    }
    CHECK(got == ni, "the pieces hold every token (%zu of %zu)", got, ni);
    frigg_eval_seqs_free(c, nc);
    CHECK(frigg_eval_text_seqs(tok, one, strlen(one), 2, 4, 2, &c, &nc) == 0 && nc == 2, "--limit 2: %d", nc);
    frigg_eval_seqs_free(c, nc);
    CHECK(frigg_eval_text_seqs(tok, "\n \n\t\n", 5, 2, 512, 0, &c, &nc) == -1 && strstr(frigg_error(), "no line"),
          "blank text: %s", frigg_error());
    CHECK(frigg_eval_text_seqs(tok, "ab\xff", 3, 2, 512, 0, &c, &nc) == -1 && strstr(frigg_error(), "line 1"),
          "not UTF-8: %s", frigg_error());
    CHECK(frigg_eval_text_seqs(tok, one, strlen(one), 2, 1, 0, &c, &nc) == -1, "ctx 1 refused");
    free(ids);
    frigg_eval_seqs_free(s, n);
}

static void test_tokenizers(const frigg_tokenizer *tok, const char *root) {
    char *p = th_path(root, "golden/default/tokenizer.json");
    frigg_tokenizer *t2 = frigg_tokenizer_load(p, 0);
    CHECK(t2 && frigg_tokenizers_match(tok, t2) == 0, "the same file twice: %s", frigg_error());
    frigg_tokenizer_free(t2);
    /* one token renamed */
    size_t len = 0;
    char *js = frigg_read_file(p, &len);
    char *at = js ? strstr(js, "\"<mask>\"") : NULL;
    CHECK(at != NULL, "tokenizer.json has <mask>");
    if (at) {
        memcpy(at, "\"<MASK>\"", 8);
        /* every occurrence, so the added-token list and the vocabulary agree */
        for (char *q = strstr(at + 8, "\"<mask>\""); q; q = strstr(q + 8, "\"<mask>\"")) memcpy(q, "\"<MASK>\"", 8);
        frigg_tokenizer *t3 = frigg_tokenizer_load_json(js, len, "renamed", 0);
        CHECK(t3 && frigg_tokenizers_match(tok, t3) == -1 && strstr(frigg_error(), "id 4"), "a renamed token: %s",
              t3 ? frigg_error() : "did not load");
        frigg_tokenizer_free(t3);
    }
    free(js);
    free(p);
}

typedef struct {
    int n, failed;
    double nll_model[8];
    char err[200];
} seen;

static void on_seq(void *ctx, int k, const frigg_kl_seq *r) {
    seen *s = ctx;
    s->n++;
    if (r->error) {
        s->failed++;
        snprintf(s->err, sizeof s->err, "%d: %s", k, r->error);
    } else if (k < 8) {
        s->nll_model[k] = r->nll_model;
    }
}

static void test_run(void) {
    char *dir = tm_tempdir();
    char *a = th_path(dir, "bf16"), *q = th_path(dir, "int8");
    tm_spec s = tm_default();
    CHECK(tm_write_model(a, &s, NULL) == 0, "write the bf16 model");
    s.quant_bits = 8, s.quant_io_bits = 8;
    CHECK(tm_write_model(q, &s, NULL) == 0, "write its int8 build");
    frigg_model *ma = frigg_model_load(a), *mq = frigg_model_load(q);
    CHECK(ma && mq, "load: %s", frigg_error());
    if (!ma || !mq) goto out;
    frigg_backend_opts o = {.threads = 1, .max_seqs = 3};
    frigg_backend *ba = frigg_backend_create("cpu", ma, &o), *bq = frigg_backend_create("cpu", mq, &o),
                  *ba2 = frigg_backend_create("cpu", ma, &o);
    CHECK(ba && bq && ba2, "engines: %s", frigg_error());
    if (!ba || !bq || !ba2) goto engines;
    /* six sequences of ids from a fixed generator */
    frigg_eval_seq seqs[6];
    uint64_t x = 12345;
    for (int i = 0; i < 6; i++) {
        seqs[i].n = 10 + 7 * i;
        seqs[i].prefix = 1 + i % 3;
        seqs[i].ids = malloc(sizeof(int32_t) * (size_t)seqs[i].n);
        for (int t = 0; t < seqs[i].n; t++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            seqs[i].ids[t] = (int32_t)((x >> 33) % (uint64_t)s.vocab);
        }
    }
    frigg_kl_summary s1, s3, self;
    seen v1 = {0}, v3 = {0}, vs = {0};
    CHECK(frigg_kl_run(ba, bq, seqs, 6, 1, on_seq, &v1, &s1) == 0 && v1.n == 6, "run, 1 at once: %s", frigg_error());
    CHECK(frigg_kl_run(ba, bq, seqs, 6, 3, on_seq, &v3, &s3) == 0 && v3.n == 6, "run, 3 at once: %s", frigg_error());
    CHECK(s1.top1 == 1 || (s1.gap_max > 0 && s1.gap_mean > 0 && s1.gap_mean <= s1.gap_max), "gaps: max %g mean %g",
          s1.gap_max, s1.gap_mean);
    CHECK(s1.kl_mean > 0 && s1.kl_mean < 0.05 && s1.top1 > 0.8 && s1.kl_p99 >= s1.kl_mean && s1.kl_max >= s1.kl_p99,
          "int8 against bf16: KL %.3g p99 %.3g max %.3g top-1 %.3f", s1.kl_mean, s1.kl_p99, s1.kl_max, s1.top1);
    long targets = 0;
    for (int i = 0; i < 6; i++) targets += seqs[i].n - seqs[i].prefix;
    CHECK(s1.tokens == targets && s1.sequences == 6 && s1.failed == 0, "%ld tokens of %ld", s1.tokens, targets);
    CHECK(!memcmp(&s1, &s3, sizeof s1), "the summary differs between 1 and 3 at once (KL %.17g vs %.17g)", s1.kl_mean,
          s3.kl_mean);
    for (int i = 0; i < 6; i++) {
        double nll = 0;
        int tg = 0;
        CHECK(frigg_nll(bq, 0, seqs[i].ids, seqs[i].n, seqs[i].prefix, &nll, &tg) == 0 && nll == v1.nll_model[i],
              "sequence %d: the model's NLL %.17g, frigg_nll %.17g", i, v1.nll_model[i], nll);
    }
    CHECK(frigg_kl_run(ba, ba2, seqs, 6, 2, on_seq, &vs, &self) == 0 && self.kl_mean == 0 && self.kl_max == 0 &&
              self.top1 == 1 && self.nll_ref == self.nll_model && self.gap_max == 0 && self.gap_mean == 0,
          "the model against itself: KL %g top-1 %g", self.kl_mean, self.top1);
    /* a bad sequence (prefix 0) fails alone */
    int keep = seqs[2].prefix;
    seqs[2].prefix = 0;
    seen vb = {0};
    frigg_kl_summary sb;
    int f = frigg_kl_run(ba, bq, seqs, 6, 3, on_seq, &vb, &sb);
    CHECK(f == 1 && vb.failed == 1 && vb.n == 6 && sb.sequences == 5 && strstr(vb.err, "2: "), "a bad sequence: %d (%s)",
          f, vb.err);
    seqs[2].prefix = keep;
    /* different vocabularies are refused */
    tm_spec s2 = tm_default();
    s2.vocab = 80;
    char *c = th_path(dir, "v80");
    tm_write_model(c, &s2, NULL);
    frigg_model *mc = frigg_model_load(c);
    frigg_backend *bc = mc ? frigg_backend_create("cpu", mc, &o) : NULL;
    frigg_kl_summary sc;
    CHECK(bc && frigg_kl_run(ba, bc, seqs, 6, 1, NULL, NULL, &sc) == -1 && strstr(frigg_error(), "vocabulary"),
          "another vocabulary: %s", frigg_error());
    frigg_backend_destroy(bc);
    frigg_model_free(mc);
    free(c);
    for (int i = 0; i < 6; i++) free(seqs[i].ids);
engines:
    frigg_backend_destroy(ba);
    frigg_backend_destroy(bq);
    frigg_backend_destroy(ba2);
out:
    frigg_model_free(ma);
    frigg_model_free(mq);
    tm_rmrf(dir);
    free(a);
    free(q);
    free(dir);
}

int main(void) {
    TEST_MAIN_BEGIN("test_kl");
    test_score();
    char *p = th_path(th_root(), "golden/default/tokenizer.json");
    frigg_tokenizer *tok = frigg_tokenizer_load(p, 0);
    CHECK(tok != NULL, "load %s: %s", p, frigg_error());
    if (tok) {
        test_text(tok);
        test_tokenizers(tok, th_root());
    }
    frigg_tokenizer_free(tok);
    free(p);
    test_run();
    TEST_MAIN_END();
}
