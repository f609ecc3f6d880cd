/* test_quant — the quantization rules of common/model/quant.h and the packing of common/model/ctensors.h: rounding,
 * int8 and int4 round trips within half a step, the clipping search never worse than round-to-nearest on
 * any group and strictly better on heavy-tailed ones, all-zero rows, a row with one huge value, a group
 * that does not divide the row, non-finite weights, and the packed bytes of known vectors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/ctensors.h"
#include "harness.h"
#include "model/quant.h"
#include "base/util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* (0, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }
static double laplace(void) { return (urand() < 0.5 ? -1.0 : 1.0) * -log(urand()); }
static double student3(void) { /* Student t with 3 degrees of freedom: heavy tails */
    double z = gauss(), c = 0;
    for (int i = 0; i < 3; i++) {
        double g = gauss();
        c += g * g;
    }
    return z / sqrt(c / 3.0);
}
static float bf(double x) { return frigg_round_bf16((float)x); } /* weights are bf16 values */

static double max_abs_err(const float *w, const int8_t *q, int n, float s) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)w[i] - (double)q[i] * s));
    return m;
}

static void test_rne(void) {
    static const float in[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, 126.5f, 127.5f, -7.5f, 3.2f, -3.7f};
    static const float want[] = {0, 2, 2, 0, -2, -2, 0, 126, 128, -8, 3, -4};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        CHECK(frigg_q_rne(in[i]) == want[i], "rne(%g) = %g, want %g", (double)in[i], (double)frigg_q_rne(in[i]),
              (double)want[i]);
}

static void test_int8(void) {
    enum { N = 1536 };
    static float w[N];
    static int8_t q[N];
    int bad_bound = 0, bad_range = 0, bad_scale = 0, bad_ext = 0;
    for (int t = 0; t < 200; t++) {
        double sd = 0.001 * (1 + t);
        for (int i = 0; i < N; i++) w[i] = bf(gauss() * sd);
        uint16_t sb;
        CHECK(frigg_q8_row(w, N, q, &sb) == 0, "q8 row: %s", frigg_error());
        float a = 0;
        int ia = 0;
        for (int i = 0; i < N; i++)
            if (fabsf(w[i]) > a) a = fabsf(w[i]), ia = i;
        if (sb != frigg_f32_to_bf16(a / 127.0f)) bad_scale++;
        float s = frigg_bf16_to_f32(sb);
        if (max_abs_err(w, q, N, s) > 0.5 * s * (1 + 1e-6)) bad_bound++;
        for (int i = 0; i < N; i++)
            if (q[i] == -128) bad_range++;
        if (abs(q[ia]) != 127) bad_ext++;
    }
    CHECK(bad_scale == 0, "%d rows: scale != bf16(max|w| / 127)", bad_scale);
    CHECK(bad_bound == 0, "%d rows: |w - q s| > s / 2", bad_bound);
    CHECK(bad_range == 0, "%d values outside [-127, 127]", bad_range);
    CHECK(bad_ext == 0, "%d rows: the largest |w| is not +-127", bad_ext);

    /* all-zero row: the zero-scale rule, q = 0, dequantizes to 0 */
    memset(w, 0, sizeof w);
    uint16_t sb = 0;
    memset(q, 5, sizeof q);
    CHECK(frigg_q8_row(w, N, q, &sb) == 0 && sb == FRIGG_Q_ZERO_SCALE, "zero row scale 0x%04x", sb);
    int nz = 0;
    for (int i = 0; i < N; i++) nz += q[i] != 0;
    CHECK(nz == 0, "zero row: %d non-zero q", nz);
    CHECK(frigg_bf16_to_f32(FRIGG_Q_ZERO_SCALE) == 0.0078125f, "zero scale is 2^-7");

    /* one huge value: it maps to 127 exactly (within bf16 of the scale), the rest within half a step */
    for (int i = 0; i < N; i++) w[i] = bf(gauss() * 0.01);
    w[77] = -30000.0f;
    CHECK(frigg_q8_row(w, N, q, &sb) == 0, "huge row");
    float s = frigg_bf16_to_f32(sb);
    CHECK(q[77] == -127, "huge value -> %d", q[77]);
    CHECK(fabs(q[77] * s - w[77]) <= 0.5 * s, "huge value error %g (s %g)", fabs(q[77] * s - w[77]), (double)s);
    CHECK(max_abs_err(w, q, N, s) <= 0.5 * s, "huge row bound");
    nz = 0;
    for (int i = 0; i < N; i++) nz += i != 77 && q[i] != 0;
    CHECK(nz == 0, "huge row: %d small values not 0 (they are < s/2)", nz);

    /* a tiny (subnormal-range) row still gets a positive scale and a bounded error */
    for (int i = 0; i < N; i++) w[i] = bf(gauss() * 1e-39);
    CHECK(frigg_q8_row(w, N, q, &sb) == 0 && (sb & 0x7fff) != 0, "tiny row scale 0x%04x", sb);
    CHECK(max_abs_err(w, q, N, frigg_bf16_to_f32(sb)) <= 0.5 * frigg_bf16_to_f32(sb) + 1e-45, "tiny row bound");

    /* non-finite weights are refused */
    w[3] = NAN;
    CHECK(frigg_q8_row(w, N, q, &sb) == -1 && strstr(frigg_error(), "non-finite"), "NaN accepted");
    w[3] = INFINITY;
    CHECK(frigg_q8_row(w, N, q, &sb) == -1, "inf accepted");
}

/* Generate one group of g bf16 weights from a distribution. */
static void fill(float *w, int g, int dist, double sd) {
    for (int i = 0; i < g; i++)
        w[i] = bf(sd * (dist == 0 ? gauss() : dist == 1 ? laplace() : dist == 2 ? student3() : 2 * urand() - 1));
}

static void test_int4(void) {
    enum { G = 128, NG = 8, N = G * NG };
    static float w[N];
    static int8_t q[N], qr[N];
    uint16_t sc[NG], scr[NG];
    uint8_t k[NG], kr[NG];
    int worse = 0, better[4] = {0}, total[4] = {0}, bad_rtn_bound = 0, bad_range = 0, bad_k0 = 0, bad_dq = 0;
    int used_m8 = 0;
    for (int t = 0; t < 400; t++) {
        int dist = t % 4;
        fill(w, N, dist, 0.02 * (1 + t % 7));
        CHECK(frigg_q4_row(w, N, G, 1, q, sc, k) == 0, "q4 search: %s", frigg_error());
        CHECK(frigg_q4_row(w, N, G, 0, qr, scr, kr) == 0, "q4 rtn: %s", frigg_error());
        for (int j = 0; j < NG; j++) {
            const float *wg = w + j * G;
            float a = 0;
            for (int i = 0; i < G; i++) a = fmaxf(a, fabsf(wg[i]));
            if (scr[j] != frigg_f32_to_bf16(a / 7.0f) || kr[j] != 0) bad_k0++;
            float s = frigg_bf16_to_f32(sc[j]), sr = frigg_bf16_to_f32(scr[j]);
            if (max_abs_err(wg, qr + j * G, G, sr) > 0.5 * sr * (1 + 1e-6)) bad_rtn_bound++;
            double e = frigg_q_group_error(wg, q + j * G, G, s), er = frigg_q_group_error(wg, qr + j * G, G, sr);
            if (e > er) worse++;
            total[dist]++;
            if (e < er) better[dist]++;
            /* the chosen candidate is the one whose scale was stored, and its q is what requantizing gives */
            if (sc[j] != frigg_q4_candidate_scale(a, k[j])) bad_dq++;
            for (int i = 0; i < G; i++) {
                if (q[j * G + i] < -8 || q[j * G + i] > 7) bad_range++;
                used_m8 += q[j * G + i] == -8;
            }
        }
    }
    CHECK(worse == 0, "the search was worse than RTN on %d groups", worse);
    CHECK(bad_k0 == 0, "%d groups: RTN scale != bf16(max|w| / 7) (candidate 0)", bad_k0);
    CHECK(bad_rtn_bound == 0, "%d groups: RTN |w - q s| > s / 2", bad_rtn_bound);
    CHECK(bad_range == 0, "%d values outside [-8, 7]", bad_range);
    CHECK(bad_dq == 0, "%d groups: stored scale is not the chosen candidate's", bad_dq);
    CHECK(used_m8 > 0, "the search never used -8");
    /* heavy tails (Laplace, Student t3) and the Gaussian: the search clips and wins on most groups */
    CHECK(better[1] > total[1] / 2, "Laplace: better on %d of %d groups", better[1], total[1]);
    CHECK(better[2] > total[2] / 2, "Student t3: better on %d of %d groups", better[2], total[2]);
    printf("int4 search strictly better than RTN: gauss %d/%d, laplace %d/%d, t3 %d/%d, uniform %d/%d\n", better[0],
           total[0], better[1], total[1], better[2], total[2], better[3], total[3]);

    /* one fixed heavy-tailed group, strictly better, and the error ratio printed */
    rng = 12345;
    fill(w, G, 2, 0.02);
    CHECK(frigg_q4_row(w, G, G, 1, q, sc, k) == 0 && frigg_q4_row(w, G, G, 0, qr, scr, kr) == 0, "fixed group");
    double e = frigg_q_group_error(w, q, G, frigg_bf16_to_f32(sc[0])),
           er = frigg_q_group_error(w, qr, G, frigg_bf16_to_f32(scr[0]));
    CHECK(e < er && k[0] > 0, "fixed t3 group: search %g (k %d) vs RTN %g", e, k[0], er);
    printf("fixed t3 group: squared error %.6g (k = %d, f = %.2f) vs RTN %.6g: %.1f %%\n", e, k[0], (100 - k[0]) / 100.0, er,
           100.0 * e / er);

    /* all-zero groups inside a row: zero-scale rule, q = 0 there; the other groups unaffected */
    fill(w, N, 0, 0.02);
    memset(w + 2 * G, 0, G * sizeof(float));
    CHECK(frigg_q4_row(w, N, G, 1, q, sc, k) == 0, "zero group row");
    int nz = 0;
    for (int i = 0; i < G; i++) nz += q[2 * G + i] != 0;
    CHECK(sc[2] == FRIGG_Q_ZERO_SCALE && nz == 0 && k[2] == 0, "zero group: scale 0x%04x, %d non-zero", sc[2], nz);
    CHECK(sc[1] != FRIGG_Q_ZERO_SCALE, "a normal group took the zero scale");
    memset(w, 0, sizeof w);
    CHECK(frigg_q4_row(w, N, G, 0, q, sc, k) == 0 && sc[0] == FRIGG_Q_ZERO_SCALE, "all-zero row (rtn)");

    /* one huge value: RTN keeps it (7 s), the search never does worse, the others of its group are 0 */
    fill(w, G, 0, 0.01);
    w[5] = 500.0f;
    CHECK(frigg_q4_row(w, G, G, 0, qr, scr, kr) == 0 && qr[5] == 7, "huge int4 RTN q %d", qr[5]);
    CHECK(frigg_q4_row(w, G, G, 1, q, sc, k) == 0, "huge int4 search");
    CHECK(frigg_q_group_error(w, q, G, frigg_bf16_to_f32(sc[0])) <= frigg_q_group_error(w, qr, G, frigg_bf16_to_f32(scr[0])),
          "huge: search worse than RTN");
    CHECK(k[0] == 0, "huge: clipping the outlier cannot pay, k %d", k[0]);

    /* a group that does not divide the row, and nonsense groups, are errors */
    CHECK(frigg_q4_row(w, 100, 64, 1, q, sc, k) == -1 && strstr(frigg_error(), "does not divide"), "64 / 100 accepted");
    CHECK(frigg_q4_row(w, 96, 0, 1, q, sc, k) == -1, "group 0 accepted");
    CHECK(frigg_q4_row(w, 96, -32, 1, q, sc, k) == -1, "group -32 accepted");
    CHECK(frigg_q4_row(w, 96, 32, 1, q, sc, k) == 0, "32 / 96 refused");
    w[50] = -INFINITY;
    CHECK(frigg_q4_row(w, G, G, 1, q, sc, k) == -1, "-inf accepted");

    /* candidate scales: k = 0 is bf16(a / 7) exactly; the grid is decreasing and ends at bf16(a / 14) */
    int bad = 0;
    for (int t = 0; t < 10000; t++) {
        float a = bf(urand() * pow(10.0, -6 + 9 * urand()));
        if (frigg_q4_candidate_scale(a, 0) != frigg_f32_to_bf16(a / 7.0f)) bad++;
        if (frigg_q4_candidate_scale(a, 50) != frigg_f32_to_bf16(a / 14.0f)) bad++;
        for (int kk = 1; kk < FRIGG_Q4_GRID; kk++)
            if (frigg_bf16_to_f32(frigg_q4_candidate_scale(a, kk)) > frigg_bf16_to_f32(frigg_q4_candidate_scale(a, kk - 1)))
                bad++;
    }
    CHECK(bad == 0, "%d candidate-scale mismatches", bad);
    CHECK(frigg_q4_candidate_scale(0.0f, 0) == FRIGG_Q_ZERO_SCALE, "zero candidate");
}

static void test_pack(void) {
    /* known bytes: int4 u = q + 8 in nibbles, low first; int8 u = q + 128 */
    const int8_t q4[4] = {-8, 7, 0, 1};
    uint8_t out[16];
    memset(out, 0xaa, sizeof out);
    frigg_ct_pack_row(q4, 4, 4, out);
    CHECK(frigg_ct_packed_row_bytes(4, 4) == 4 && out[0] == 0xf0 && out[1] == 0x98 && out[2] == 0 && out[3] == 0,
          "int4 bytes %02x %02x %02x %02x", out[0], out[1], out[2], out[3]);
    uint32_t word;
    memcpy(&word, out, 4);
    CHECK(word == 0x98f0u, "int4 word %08x (little-endian host)", word);
    const int8_t q8[5] = {-128, 127, 0, -1, 5};
    memset(out, 0xaa, sizeof out);
    frigg_ct_pack_row(q8, 5, 8, out);
    CHECK(frigg_ct_packed_row_bytes(5, 8) == 8 && out[0] == 0x00 && out[1] == 0xff && out[2] == 0x80 && out[3] == 0x7f &&
              out[4] == 0x85 && out[5] == 0 && out[6] == 0 && out[7] == 0,
          "int8 bytes / zero padding");
    CHECK(frigg_ct_packed_words(1536, 4) == 192 && frigg_ct_packed_words(1536, 8) == 384 &&
              frigg_ct_packed_words(13, 4) == 2 && frigg_ct_packed_words(13, 8) == 4,
          "packed widths");
    /* round trips over every value and odd lengths */
    int bad = 0;
    for (int bits = 4; bits <= 8; bits += 4) {
        int lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
        for (int n = 1; n <= 67; n++) {
            int8_t q[67], back[67];
            uint8_t buf[68];
            for (int i = 0; i < n; i++) q[i] = (int8_t)(lo + (i * 7 + n) % (hi - lo + 1));
            frigg_ct_pack_row(q, n, bits, buf);
            frigg_ct_unpack_row(buf, n, bits, back);
            bad += memcmp(q, back, n) != 0;
            for (size_t b = (size_t)(n * bits + 7) / 8; b < frigg_ct_packed_row_bytes(n, bits); b++) bad += buf[b] != 0;
        }
    }
    CHECK(bad == 0, "%d pack/unpack round-trip or padding failures", bad);
}

int main(void) {
    TEST_MAIN_BEGIN("test_quant");
    test_rne();
    test_int8();
    test_int4();
    test_pack();
    TEST_MAIN_END();
}
