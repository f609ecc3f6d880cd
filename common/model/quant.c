/* quant.c — see quant.h for the rules; this file is their only implementation. */
#include "quant.h"

#include <math.h>

#include "base/util.h"

static int check_finite(const float *w, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(w[i])) {
            frigg_set_error("weight %d of the row is %g: a non-finite weight cannot be quantized", i, (double)w[i]);
            return -1;
        }
    return 0;
}

static float absmax(const float *w, int n) {
    float a = 0.0f;
    for (int i = 0; i < n; i++) {
        float v = fabsf(w[i]);
        if (v > a) a = v;
    }
    return a;
}

static inline int8_t quant_one(float w, float s, float lo, float hi) {
    float x = w / s;
    if (x < lo) x = lo;
    if (x > hi) x = hi;
    return (int8_t)frigg_q_rne(x);
}

static uint16_t nonzero_scale(uint16_t s) { return (s & 0x7fff) == 0 ? FRIGG_Q_ZERO_SCALE : s; }

int frigg_q8_row(const float *w, int n, int8_t *q, uint16_t *scale) {
    if (check_finite(w, n)) return -1;
    uint16_t sb = nonzero_scale(frigg_f32_to_bf16(absmax(w, n) / 127.0f));
    float s = frigg_bf16_to_f32(sb);
    for (int i = 0; i < n; i++) q[i] = quant_one(w[i], s, -127.0f, 127.0f);
    *scale = sb;
    return 0;
}

uint16_t frigg_q4_candidate_scale(float a, int k) {
    return nonzero_scale(frigg_f32_to_bf16((a * (float)(100 - k)) / 700.0f));
}

double frigg_q_group_error(const float *w, const int8_t *q, int n, float s) {
    double e = 0.0;
    for (int i = 0; i < n; i++) {
        float d = w[i] - (float)q[i] * s;
        e += (double)d * (double)d;
    }
    return e;
}

/* e_k of one group without storing q: the same operations as quant_one + frigg_q_group_error. */
static double candidate_error(const float *w, int g, float s) {
    double e = 0.0;
    for (int i = 0; i < g; i++) {
        float d = w[i] - (float)quant_one(w[i], s, -8.0f, 7.0f) * s;
        e += (double)d * (double)d;
    }
    return e;
}

int frigg_q4_row(const float *w, int n, int g, int search, int8_t *q, uint16_t *scales, uint8_t *chosen_k) {
    if (g < 1 || n % g != 0) {
        frigg_set_error("int4 group size %d does not divide the row length %d", g, n);
        return -1;
    }
    if (check_finite(w, n)) return -1;
    for (int j = 0; j < n / g; j++) {
        const float *wg = w + (size_t)j * g;
        float a = absmax(wg, g);
        int best = 0;
        uint16_t sb = frigg_q4_candidate_scale(a, 0);
        if (search && a > 0.0f) {
            double best_e = candidate_error(wg, g, frigg_bf16_to_f32(sb));
            for (int k = 1; k < FRIGG_Q4_GRID; k++) {
                uint16_t ck = frigg_q4_candidate_scale(a, k);
                double e = candidate_error(wg, g, frigg_bf16_to_f32(ck));
                if (e < best_e) {
                    best_e = e;
                    best = k;
                    sb = ck;
                }
            }
        }
        float s = frigg_bf16_to_f32(sb);
        for (int i = 0; i < g; i++) q[(size_t)j * g + i] = quant_one(wg[i], s, -8.0f, 7.0f);
        scales[j] = sb;
        if (chosen_k) chosen_k[j] = (uint8_t)best;
    }
    return 0;
}
