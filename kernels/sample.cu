/* sample.cu — a sampled decode row's draw where its logits are (FRIGG_WANT_SAMPLE): the rule of frigg_draw_row
 * (sampler.h) on the bf16 row, so that only the id crosses PCIe. Without it a sampled row brought its 262,144
 * logits to the host every step and the host drew from them, several ms per row and serial over the rows.
 *
 * Three kernels, like the argmax: slices of each row over many blocks (the largest allowed w = logit / T and
 * whether a value is not finite; then each slice's sum of exp(w - M) in double with the row's M), then one block
 * per row that finds the slice where u·S falls and, inside it, the id (a scan of per-thread sums over contiguous
 * ids, so the order is id order as in the specification). The sums are taken in a fixed order: the same row and
 * u give the same id whatever else is in the batch. */
#include "common.cuh"
#include "kernels.h"

#define SAMPLE_THREADS 256
#define SAMPLE_SLICES 64

__device__ __forceinline__ int sample_allowed(const uint32_t *mask, int mw, int b, int i) {
    return !mask || ((ld_act32(mask + (size_t)b * mw + (i >> 5)) >> (i & 31)) & 1u);
}

/* slice x of row b: ids [x * per, min(V, (x + 1) * per)) */
__device__ __forceinline__ int sample_per(int V) { return (V + SAMPLE_SLICES - 1) / SAMPLE_SLICES; }

/* grid (SAMPLE_SLICES, B): part_m[b][x] = the largest allowed w of slice x (-inf when none), part_bad[b][x] = 1
 * when a value of the slice is not finite (allowed or not) or an allowed w is not. */
__global__ void __launch_bounds__(SAMPLE_THREADS) sample_max_kernel(const uint16_t *logits, int V, const uint32_t *mask,
                                                                     int mw, const fk_draw *params, float *part_m,
                                                                     int *part_bad) {
    __shared__ float sm[SAMPLE_THREADS / 32];
    __shared__ int sb[SAMPLE_THREADS / 32];
    pdl_wait();
    const int b = blockIdx.y, x = blockIdx.x, t = threadIdx.x;
    const fk_draw p = params[b];
    if (!p.on) return;
    const uint16_t *row = logits + (size_t)b * V;
    const int per = sample_per(V), i0 = x * per, i1 = min(V, i0 + per);
    float m = -INFINITY;
    int bad = 0;
    for (int i = i0 + t; i < i1; i += SAMPLE_THREADS) {
        const float v = bf2f(ld_act16(row + i));
        if (!isfinite(v)) bad = 1;
        if (!sample_allowed(mask, mw, b, i)) continue;
        const float w = __fdiv_rn(v, p.temperature);
        if (!isfinite(w)) bad = 1;
        m = fmaxf(m, w);
    }
    for (int o = 16; o > 0; o >>= 1) {
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        bad |= __shfl_xor_sync(0xffffffffu, bad, o);
    }
    if ((t & 31) == 0) {
        sm[t >> 5] = m;
        sb[t >> 5] = bad;
    }
    __syncthreads();
    if (t == 0) {
        for (int k = 1; k < SAMPLE_THREADS / 32; k++) {
            m = fmaxf(m, sm[k]);
            bad |= sb[k];
        }
        part_m[b * SAMPLE_SLICES + x] = m;
        part_bad[b * SAMPLE_SLICES + x] = bad;
    }
}

/* The row's M (the largest of its slices' maxima) and whether it is bad, for every thread of the block. */
__device__ __forceinline__ void sample_row_max(const float *part_m, const int *part_bad, int b, float *M, int *bad) {
    __shared__ float s_m;
    __shared__ int s_bad;
    if (threadIdx.x == 0) {
        float m = -INFINITY;
        int bd = 0;
        for (int x = 0; x < SAMPLE_SLICES; x++) {
            m = fmaxf(m, __uint_as_float(ld_act32(part_m + b * SAMPLE_SLICES + x)));
            bd |= (int)ld_act32(part_bad + b * SAMPLE_SLICES + x);
        }
        s_m = m;
        s_bad = bd;
    }
    __syncthreads();
    *M = s_m;
    *bad = s_bad;
}

/* e of id i: exp(w - M) in double, as frigg_draw_row; 0 for an id the mask refuses. */
__device__ __forceinline__ double sample_e(const uint16_t *row, const uint32_t *mask, int mw, int b, int i, float T,
                                           float M) {
    if (!sample_allowed(mask, mw, b, i)) return 0;
    return exp((double)__fdiv_rn(bf2f(ld_act16(row + i)), T) - (double)M);
}

/* A block's sum of v in a fixed order (a warp's shuffle tree, then the warps' sums in order), in thread 0. */
__device__ __forceinline__ double sample_block_sum(double v) {
    __shared__ double sw[SAMPLE_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sw[threadIdx.x >> 5] = v;
    __syncthreads();
    double s = 0;
    if (threadIdx.x == 0)
        for (int k = 0; k < SAMPLE_THREADS / 32; k++) s += sw[k];
    return s;
}

/* grid (SAMPLE_SLICES, B): part_s[b][x] = slice x's sum of e. */
__global__ void __launch_bounds__(SAMPLE_THREADS) sample_sum_kernel(const uint16_t *logits, int V, const uint32_t *mask,
                                                                     int mw, const fk_draw *params, const float *part_m,
                                                                     const int *part_bad, double *part_s) {
    pdl_wait();
    const int b = blockIdx.y, x = blockIdx.x, t = threadIdx.x;
    const fk_draw p = params[b];
    if (!p.on) return;
    float M;
    int bad;
    sample_row_max(part_m, part_bad, b, &M, &bad);
    if (bad || M == -INFINITY) return; /* the draw kernel answers -1 */
    const uint16_t *row = logits + (size_t)b * V;
    const int per = sample_per(V), i0 = x * per, i1 = min(V, i0 + per);
    double s = 0;
    for (int i = i0 + t; i < i1; i += SAMPLE_THREADS) s += sample_e(row, mask, mw, b, i, p.temperature, M);
    s = sample_block_sum(s);
    if (t == 0) part_s[b * SAMPLE_SLICES + x] = s;
}

/* One block per row: t = u * S; the slice where the running sum of the slices' sums passes t, then within it the
 * thread (SAMPLE_THREADS contiguous runs of ids) and the id. Where rounding leaves t at or past a total, the last id
 * with a positive term. ids[b]: the id, or 0 for an answer of -1 (a valid input for the next step); answers[b]: the
 * id or -1. Rows with p.on == 0 keep ids[b] and copy it to answers[b]. */
__global__ void __launch_bounds__(SAMPLE_THREADS) sample_draw_kernel(const uint16_t *logits, int V, const uint32_t *mask,
                                                                      int mw, const fk_draw *params, const float *part_m,
                                                                      const int *part_bad, const double *part_s,
                                                                      int32_t *ids, int32_t *answers) {
    __shared__ double s_incl[SAMPLE_THREADS];
    __shared__ double s_rem;
    __shared__ int s_slice, s_thread;
    pdl_wait();
    const int b = blockIdx.x, t = threadIdx.x;
    const fk_draw p = params[b];
    if (!p.on) {
        if (t == 0) answers[b] = ids[b];
        return;
    }
    float M;
    int bad;
    sample_row_max(part_m, part_bad, b, &M, &bad);
    if (bad || M == -INFINITY) {
        if (t == 0) {
            answers[b] = -1;
            ids[b] = 0;
        }
        return;
    }
    if (t == 0) {
        double S = 0;
        int last = 0;
        for (int x = 0; x < SAMPLE_SLICES; x++) {
            const double v = part_s[b * SAMPLE_SLICES + x];
            S += v;
            if (v > 0) last = x;
        }
        const double target = p.u * S;
        double cum = 0;
        s_slice = -1;
        for (int x = 0; x < SAMPLE_SLICES; x++) {
            const double v = part_s[b * SAMPLE_SLICES + x];
            if (v > 0 && target < cum + v) {
                s_slice = x;
                s_rem = target - cum;
                break;
            }
            cum += v;
        }
        if (s_slice < 0) { /* rounding: the last slice with a positive sum, its last positive term */
            s_slice = last;
            s_rem = INFINITY;
        }
    }
    __syncthreads();
    const uint16_t *row = logits + (size_t)b * V;
    const int per = sample_per(V), x = s_slice, i0 = x * per, i1 = min(V, i0 + per);
    const int cp = (per + SAMPLE_THREADS - 1) / SAMPLE_THREADS, j0 = i0 + t * cp, j1 = min(i1, j0 + cp);
    double cs = 0;
    for (int i = j0; i < j1; i++) cs += sample_e(row, mask, mw, b, i, p.temperature, M);
    s_incl[t] = cs;
    __syncthreads();
    if (t == 0) {
        double cum = 0;
        int last = -1;
        s_thread = -1;
        for (int k = 0; k < SAMPLE_THREADS; k++) {
            const double v = s_incl[k];
            if (v > 0) last = k;
            if (s_thread < 0 && v > 0 && s_rem < cum + v) {
                s_thread = k;
                s_rem -= cum;
            }
            cum += v;
        }
        if (s_thread < 0) { /* the slice's own sum came out below its part_s by rounding, or t was past S */
            s_thread = last;
            s_rem = INFINITY;
        }
    }
    __syncthreads();
    if (s_thread < 0) { /* no positive term in the slice: cannot happen where part_s found one; never silent */
        if (t == 0) {
            answers[b] = -1;
            ids[b] = 0;
        }
        return;
    }
    if (t != s_thread) return;
    double cum = 0;
    int32_t pick = -1;
    for (int i = j0; i < j1; i++) {
        const double e = sample_e(row, mask, mw, b, i, p.temperature, M);
        if (e > 0) pick = i;
        cum += e;
        if (e > 0 && s_rem < cum) break;
    }
    answers[b] = pick;
    ids[b] = pick < 0 ? 0 : pick;
}

extern "C" size_t fk_sample_work_bytes(int B) { return (size_t)(B > 0 ? B : 0) * SAMPLE_SLICES * 16; }

extern "C" int fk_sample_bf16(const fk_ctx *kc, const uint16_t *logits, int B, int V, const uint32_t *mask,
                              const fk_draw *params, int32_t *ids, int32_t *answers, void *work, cudaStream_t s) {
    if (B < 1 || V < 1 || !work || !fk_aligned16(work) || !params || !ids || !answers) {
        frigg_set_error("sample: %d rows of %d logits, workspace %p (fk_sample_work_bytes, 16-byte aligned)", B, V, work);
        return -1;
    }
    double *ps = (double *)work;
    float *pm = (float *)(ps + (size_t)B * SAMPLE_SLICES);
    int *pb = (int *)(pm + (size_t)B * SAMPLE_SLICES);
    const int mw = (V + 31) / 32;
    fk_launch(kc, sample_max_kernel, dim3(SAMPLE_SLICES, B), SAMPLE_THREADS, 0, s, logits, V, mask, mw, params, pm, pb);
    if (fk_check_launch("sample")) return -1;
    fk_launch(kc, sample_sum_kernel, dim3(SAMPLE_SLICES, B), SAMPLE_THREADS, 0, s, logits, V, mask, mw, params,
              (const float *)pm, (const int *)pb, ps);
    if (fk_check_launch("sample")) return -1;
    fk_launch(kc, sample_draw_kernel, B, SAMPLE_THREADS, 0, s, logits, V, mask, mw, params, (const float *)pm,
              (const int *)pb, (const double *)ps, ids, answers);
    return fk_check_launch("sample");
}
