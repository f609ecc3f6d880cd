/* cpu_ops.c — see cpu_ops.h. Plain loops; the only concession to speed is the thread pool and
 * several partial sums so the compiler can vectorise the dot products. */
#include "cpu_ops.h"

#include <math.h>
#include <stdlib.h>

#include "util.h"

int frigg_cpu_fp32_reference;

typedef struct {
    const frigg_mat *W;
    const float *x;
    int T;
    float *y;
} linear_ctx;

#define ROWS_PER_BLOCK 8

static void linear_range(void *vctx, int begin, int end, int thread) {
    (void)thread;
    linear_ctx *c = vctx;
    int K = c->W->cols, O = c->W->rows;
    float *wf = frigg_xmalloc((size_t)ROWS_PER_BLOCK * K * sizeof(float));
    for (int o0 = begin; o0 < end; o0 += ROWS_PER_BLOCK) {
        int nr = end - o0 < ROWS_PER_BLOCK ? end - o0 : ROWS_PER_BLOCK;
        for (int r = 0; r < nr; r++) {
            const uint16_t *w = c->W->w + (size_t)(o0 + r) * K;
            for (int i = 0; i < K; i++) wf[(size_t)r * K + i] = frigg_bf16_to_f32(w[i]);
        }
        for (int t = 0; t < c->T; t++) {
            const float *x = c->x + (size_t)t * K;
            for (int r = 0; r < nr; r++) {
                const float *w = wf + (size_t)r * K;
                float acc[8] = {0};
                int i = 0;
                for (; i + 8 <= K; i += 8)
                    for (int j = 0; j < 8; j++) acc[j] += w[i + j] * x[i + j];
                float s = 0;
                for (; i < K; i++) s += w[i] * x[i];
                s += ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
                c->y[(size_t)t * O + o0 + r] = frigg_act(s);
            }
        }
    }
    free(wf);
}

void frigg_cpu_linear(frigg_pool *pool, const frigg_mat *W, const float *x, int T, float *y) {
    linear_ctx c = {W, x, T, y};
    frigg_pool_run(pool, W->rows, linear_range, &c);
}

void frigg_cpu_rmsnorm(const float *x, int T, int D, double eps, float *y) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * D;
        float ss = 0;
        for (int i = 0; i < D; i++) ss += xr[i] * xr[i];
        float r = 1.0f / sqrtf(ss / (float)D + (float)eps);
        for (int i = 0; i < D; i++) y[(size_t)t * D + i] = frigg_act(xr[i] * r);
    }
}

void frigg_cpu_rope_tables(const frigg_config *c, int p0, int T, float *cos_t, float *sin_t) {
    int hd = c->head_dim, half = hd / 2;
    float *inv = frigg_xmalloc(half * sizeof(float));
    /* HF: 1.0 / (theta ** (arange(0, hd, 2) / hd)), all in fp32. */
    for (int j = 0; j < half; j++) {
        float e = (float)(2 * j) / (float)hd;
        inv[j] = 1.0f / powf((float)c->rope_theta, e);
    }
    for (int t = 0; t < T; t++) {
        float p = (float)(p0 + t);
        for (int j = 0; j < half; j++) {
            float ang = p * inv[j]; /* one fp32 product */
            float cs = frigg_act((float)cos((double)ang)), sn = frigg_act((float)sin((double)ang));
            cos_t[(size_t)t * hd + j] = cos_t[(size_t)t * hd + j + half] = cs;
            sin_t[(size_t)t * hd + j] = sin_t[(size_t)t * hd + j + half] = sn;
        }
    }
    free(inv);
}

void frigg_cpu_rope_apply(float *x, int T, int heads, int hd, const float *cos_t, const float *sin_t) {
    int half = hd / 2;
    float *tmp = frigg_xmalloc(hd * sizeof(float));
    for (int t = 0; t < T; t++)
        for (int h = 0; h < heads; h++) {
            float *v = x + ((size_t)t * heads + h) * hd;
            const float *C = cos_t + (size_t)t * hd, *S = sin_t + (size_t)t * hd;
            for (int i = 0; i < hd; i++) {
                float rot = i < half ? -v[i + half] : v[i - half];
                tmp[i] = frigg_act(frigg_act(v[i] * C[i]) + frigg_act(rot * S[i]));
            }
            for (int i = 0; i < hd; i++) v[i] = tmp[i];
        }
    free(tmp);
}

void frigg_cpu_swiglu(const float *g, const float *u, int n, float *out) {
    for (int i = 0; i < n; i++) {
        float s = frigg_act(g[i] / (1.0f + expf(-g[i])));
        out[i] = frigg_act(s * u[i]);
    }
}

int frigg_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}
