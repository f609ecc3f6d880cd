/* cpu_ops.c — see cpu_ops.h. Plain loops; the only concession to speed is the thread pool and
 * several partial sums so the compiler can vectorise the dot products. */
#include "cpu_ops.h"

#include <math.h>
#include <stdlib.h>

#include "base/util.h"

typedef struct {
    frigg_prec p;
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
    const uint16_t *W16 = frigg_mat_bf16(c->W); /* NULL for INT8/INT4: rows come from frigg_mat_row */
    float *wf = frigg_xmalloc((size_t)ROWS_PER_BLOCK * K * sizeof(float));
    for (int o0 = begin; o0 < end; o0 += ROWS_PER_BLOCK) {
        int nr = end - o0 < ROWS_PER_BLOCK ? end - o0 : ROWS_PER_BLOCK;
        for (int r = 0; r < nr; r++) {
            if (!W16) { /* bf16(q * scale), the dtype checked at engine creation (frigg_model_check_dtypes) */
                frigg_mat_row(c->W, o0 + r, wf + (size_t)r * K);
                continue;
            }
            const uint16_t *w = W16 + (size_t)(o0 + r) * K;
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
                c->y[(size_t)t * O + o0 + r] = frigg_act(c->p, s);
            }
        }
    }
    free(wf);
}

void frigg_cpu_linear(frigg_prec p, frigg_pool *pool, const frigg_mat *W, const float *x, int T, float *y) {
    linear_ctx c = {p, W, x, T, y};
    frigg_pool_run(pool, W->rows, linear_range, &c);
}

void frigg_cpu_rmsnorm(frigg_prec p, const float *x, int T, int D, double eps, float *y) {
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * D;
        float ss = 0;
        for (int i = 0; i < D; i++) ss += xr[i] * xr[i];
        float r = 1.0f / sqrtf(ss / (float)D + (float)eps);
        for (int i = 0; i < D; i++) y[(size_t)t * D + i] = frigg_act(p, xr[i] * r);
    }
}

void frigg_cpu_rope_tables(frigg_prec pr, const frigg_config *c, int p0, int T, float *cos_t, float *sin_t) {
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
            float cs = frigg_act(pr, (float)cos((double)ang)), sn = frigg_act(pr, (float)sin((double)ang));
            cos_t[(size_t)t * hd + j] = cos_t[(size_t)t * hd + j + half] = cs;
            sin_t[(size_t)t * hd + j] = sin_t[(size_t)t * hd + j + half] = sn;
        }
    }
    free(inv);
}

void frigg_cpu_rope_apply(frigg_prec p, float *x, int T, int heads, int hd, const float *cos_t, const float *sin_t) {
    int half = hd / 2;
    float *tmp = frigg_xmalloc(hd * sizeof(float));
    for (int t = 0; t < T; t++)
        for (int h = 0; h < heads; h++) {
            float *v = x + ((size_t)t * heads + h) * hd;
            const float *C = cos_t + (size_t)t * hd, *S = sin_t + (size_t)t * hd;
            for (int i = 0; i < hd; i++) {
                float rot = i < half ? -v[i + half] : v[i - half];
                tmp[i] = frigg_act(p, frigg_act(p, v[i] * C[i]) + frigg_act(p, rot * S[i]));
            }
            for (int i = 0; i < hd; i++) v[i] = tmp[i];
        }
    free(tmp);
}

void frigg_cpu_swiglu(frigg_prec p, const float *g, const float *u, int n, float *out) {
    for (int i = 0; i < n; i++) {
        float s = frigg_act(p, g[i] / (1.0f + expf(-g[i])));
        out[i] = frigg_act(p, s * u[i]);
    }
}

void frigg_kv_quantize(const float *x, int n, int8_t *q, float *scale) {
    float amax = 0;
    for (int d = 0; d < n; d++) amax = fmaxf(amax, fabsf(x[d]));
    float s = amax / 127.0f;
    *scale = s;
    for (int d = 0; d < n; d++) {
        if (s == 0) {
            q[d] = 0;
            continue;
        }
        float r = nearbyintf(x[d] / s); /* halves to even in the default rounding mode */
        q[d] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
    }
}

typedef struct {
    frigg_prec p;
    const frigg_attn_args *a;
} attn_ctx;

/* Position j of head h's K (which = 0) or V (1) as fp32 values: the fp32 cache's row itself, or an int8 row
 * dequantized into buf. */
static const float *attn_row(const frigg_attn_args *a, int which, int h, int j, float *buf) {
    size_t off = (size_t)j * a->pos_stride + (size_t)h * a->head_stride;
    const float *f = which ? a->v : a->k;
    if (f) return f + off;
    const int8_t *q = (which ? a->v8 : a->k8) + off;
    float s = (which ? a->v_scale : a->k_scale)[(size_t)j * a->scale_pos_stride + (size_t)h * a->scale_head_stride];
    for (int d = 0; d < a->head_dim; d++) buf[d] = frigg_kv_dequant(q[d], s);
    return buf;
}

/* One (row, head) pair per index. */
static void attn_range(void *vctx, int begin, int end, int thread) {
    (void)thread;
    const attn_ctx *ac = vctx;
    const frigg_attn_args *a = ac->a;
    int H = a->heads, hd = a->head_dim, nk = a->p0 + a->T;
    float scale = (float)(1.0 / sqrt((double)hd));
    float *p = frigg_xmalloc((size_t)nk * sizeof(float));
    float *acc = frigg_xmalloc((size_t)hd * sizeof(float)), *aacc = frigg_xmalloc((size_t)hd * sizeof(float));
    float *rbuf = frigg_xmalloc((size_t)hd * sizeof(float));
    for (int idx = begin; idx < end; idx++) {
        int t = idx / H, h = idx % H, qpos = a->p0 + t;
        const float *q = a->q + (size_t)t * a->q_stride + (size_t)h * hd;
        float mx = -INFINITY;
        for (int j = 0; j < nk; j++) {
            /* PrefixLM: causal, OR both query and key inside the bidirectional prefix (§4.1). */
            int allowed = j <= qpos || (qpos < a->prefix_len && j < a->prefix_len);
            if (!allowed) {
                p[j] = -INFINITY;
                continue;
            }
            const float *kr = attn_row(a, 0, h, j, rbuf);
            float s = 0;
            for (int d = 0; d < hd; d++) s += q[d] * kr[d];
            p[j] = s * scale;
            if (p[j] > mx) mx = p[j];
        }
        float sum = 0;
        for (int j = 0; j < nk; j++) {
            p[j] = p[j] == -INFINITY ? 0.0f : expf(p[j] - mx);
            sum += p[j];
        }
        for (int d = 0; d < hd; d++) acc[d] = aacc[d] = 0;
        for (int j = 0; j < nk; j++) {
            if (p[j] == 0) continue;
            float w = p[j] / sum;
            const float *vr = attn_row(a, 1, h, j, rbuf);
            for (int d = 0; d < hd; d++) acc[d] += w * vr[d];
            if (a->abs_out)
                for (int d = 0; d < hd; d++) aacc[d] += w * fabsf(vr[d]);
        }
        if (a->abs_out)
            for (int d = 0; d < hd; d++) a->abs_out[(size_t)t * a->out_stride + (size_t)h * hd + d] = aacc[d];
        float *o = a->out + (size_t)t * a->out_stride + (size_t)h * hd;
        const float *g = a->gate ? a->gate + (size_t)t * a->gate_stride + (size_t)h * hd : NULL;
        for (int d = 0; d < hd; d++) {
            float od = frigg_act(ac->p, acc[d]);
            if (g) od = frigg_act(ac->p, frigg_act(ac->p, 1.0f / (1.0f + expf(-g[d]))) * od);
            o[d] = od;
        }
    }
    free(p);
    free(acc);
    free(aacc);
    free(rbuf);
}

void frigg_cpu_attention(frigg_prec p, frigg_pool *pool, const frigg_attn_args *a) {
    attn_ctx ac = {p, a};
    if (pool) frigg_pool_run(pool, a->T * a->heads, attn_range, &ac);
    else attn_range(&ac, 0, a->T * a->heads, 0);
}

int frigg_argmax_masked(const float *x, int n, const uint32_t *bits) {
    int best = -1;
    float bv = 0;
    const int W = (n + 31) / 32;
    for (int w = 0; w < W; w++) {
        if (bits[w] == 0xFFFFFFFFu && (w + 1) * 32 <= n) {
            const float *v = x + w * 32;
            for (int j = 0; j < 32; j++)
                if (best < 0 || v[j] > bv) {
                    best = w * 32 + j;
                    bv = v[j];
                }
            continue;
        }
        for (uint32_t m = bits[w]; m; m &= m - 1) {
            int i = w * 32 + __builtin_ctz(m);
            if (i >= n) break;
            if (best < 0 || x[i] > bv) {
                best = i;
                bv = x[i];
            }
        }
    }
    return best;
}

int frigg_argmax(const float *x, int n) {
    /* The best value kept in a register: comparing against x[best] reloaded it every element, 5x slower on a
     * 262,144-value row (the same comparisons; benchmarks/cpu-checks-2026-12-04/argmax.txt). */
    if (n < 1) return 0;
    int best = 0;
    float bv = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > bv) {
            bv = x[i];
            best = i;
        }
    return best;
}
