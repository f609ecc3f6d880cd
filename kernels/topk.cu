/* topk.cu — each row's k largest logits on the device, so a sampled step with top-k sends k (value, id) pairs
 * to the host instead of the whole row (backend.h, decode_topk; sampler.h, frigg_sample_topk).
 *
 * Exact by counting, no sort: a bf16 logit is 16 bits, and so is its rank key (order-preserving; -0 counts as
 * +0, NaN as the lowest of all), so the k-th largest key T is found by two 256-bin histograms, its high byte
 * then its low byte. Then every key above T is taken, and the keys equal to T in index order until there are
 * k: the same k the sampler's ranking (value descending, ties to the lower id) keeps. Four kernels, each over
 * (TOPK_SLICES blocks, B rows), a block on one slice of its row, each thread on a contiguous run of it:
 *   1. histogram of the keys' high bytes (per block in shared memory, then added to the row's);
 *   2. the high byte H of T (every block finds the same from the row's histogram), then the histogram of the
 *      low bytes of the keys whose high byte is H;
 *   3. T, and how many keys above T and equal to T each slice holds;
 *   4. each slice's place among the row's (the counts of the slices before it) and each thread's within its
 *      block (an exclusive scan in thread order), and the writes: keys above T at [0, above), keys equal to T
 *      at [above, k) while they last. Each part is in index order: the output is deterministic, not sorted. */
#include "common.cuh"
#include "kernels.h"

#define TOPK_SLICES 64
#define TOPK_THREADS 256
/* per row in `work`: the two histograms, then (above, equal) per slice */
#define TOPK_ROW_INTS (256 + 256 + 2 * TOPK_SLICES)

__device__ __forceinline__ unsigned topk_key(unsigned u) {
    if (u == 0x8000u) u = 0;                                /* -0 ranks as +0 */
    if ((u & 0x7f80u) == 0x7f80u && (u & 0x7fu)) return 0; /* NaN: below everything */
    return u & 0x8000u ? ~u & 0xffffu : u | 0x8000u;
}

/* This thread's run [i0, i1) of slice blockIdx.x of a row of V. */
__device__ __forceinline__ void topk_run(int V, int &i0, int &i1) {
    const int per = (V + TOPK_SLICES - 1) / TOPK_SLICES, s0 = blockIdx.x * per, s1 = min(V, s0 + per);
    const int each = (per + TOPK_THREADS - 1) / TOPK_THREADS;
    i0 = min(s1, s0 + (int)threadIdx.x * each);
    i1 = min(s1, i0 + each);
}

/* One byte of the k-th largest key from a 256-bin histogram: walking the bins down from 255 with `acc` keys
 * already above them, the first bin that brings the count to k (0 if none does), with `acc` left at the keys
 * above that bin. */
__device__ __forceinline__ int topk_bin(const int *hist, int k, int &acc) {
    for (int b = 255; b >= 0; b--) {
        const int c = ld_act32(hist + b);
        if (acc + c >= k) return b;
        acc += c;
    }
    return 0;
}

/* From the row's high-byte histogram: the high byte of the k-th largest key, and how many keys lie above
 * that byte's bin. The same answer in every block. */
__device__ void topk_high(const int *hist_hi, int k, int &H, int &above) {
    above = 0;
    H = topk_bin(hist_hi, k, above);
}

/* T, the k-th largest key, and how many keys lie above it. */
__device__ void topk_threshold(const int *hist_hi, const int *hist_lo, int k, unsigned &T, int &above) {
    int H;
    topk_high(hist_hi, k, H, above);
    const int L = topk_bin(hist_lo, k, above);
    T = (unsigned)H << 8 | (unsigned)L;
}

__global__ void __launch_bounds__(TOPK_THREADS) topk_hist_hi_kernel(const uint16_t *logits, int V, int *work) {
    __shared__ int h[256];
    pdl_wait();
    const uint16_t *row = logits + (size_t)blockIdx.y * V;
    int *hist = work + (size_t)blockIdx.y * TOPK_ROW_INTS;
    h[threadIdx.x] = 0; /* TOPK_THREADS == 256 */
    __syncthreads();
    int i0, i1;
    topk_run(V, i0, i1);
    for (int i = i0; i < i1; i++) atomicAdd(&h[topk_key(ld_act16(row + i)) >> 8], 1);
    __syncthreads();
    if (h[threadIdx.x]) atomicAdd(&hist[threadIdx.x], h[threadIdx.x]);
}

__global__ void __launch_bounds__(TOPK_THREADS) topk_hist_lo_kernel(const uint16_t *logits, int V, int k, int *work) {
    __shared__ int h[256];
    __shared__ int sH;
    pdl_wait();
    const uint16_t *row = logits + (size_t)blockIdx.y * V;
    int *hist = work + (size_t)blockIdx.y * TOPK_ROW_INTS;
    h[threadIdx.x] = 0;
    if (threadIdx.x == 0) {
        int H, above;
        topk_high(hist, k, H, above);
        sH = H;
    }
    __syncthreads();
    const unsigned H = (unsigned)sH;
    int i0, i1;
    topk_run(V, i0, i1);
    for (int i = i0; i < i1; i++) {
        const unsigned key = topk_key(ld_act16(row + i));
        if (key >> 8 == H) atomicAdd(&h[key & 0xffu], 1);
    }
    __syncthreads();
    if (h[threadIdx.x]) atomicAdd(&hist[256 + threadIdx.x], h[threadIdx.x]);
}

/* This thread's counts of keys above T and equal to T in its run. */
__device__ __forceinline__ void topk_count(const uint16_t *row, int i0, int i1, unsigned T, int &gt, int &eq) {
    gt = eq = 0;
    for (int i = i0; i < i1; i++) {
        const unsigned key = topk_key(ld_act16(row + i));
        gt += key > T;
        eq += key == T;
    }
}

/* The block's sum of v, and each thread's exclusive prefix of it in thread order. */
__device__ __forceinline__ int topk_scan(int v, int &before) {
    __shared__ int warp_sum[TOPK_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_sum[warp] = x;
    __syncthreads();
    int base = 0, total = 0;
    for (int w = 0; w < TOPK_THREADS / 32; w++) {
        base += w < warp ? warp_sum[w] : 0;
        total += warp_sum[w];
    }
    __syncthreads(); /* warp_sum is reused by the next call */
    before = base + x - v;
    return total;
}

__global__ void __launch_bounds__(TOPK_THREADS) topk_count_kernel(const uint16_t *logits, int V, int k, int *work) {
    __shared__ unsigned sT;
    pdl_wait();
    const uint16_t *row = logits + (size_t)blockIdx.y * V;
    int *w = work + (size_t)blockIdx.y * TOPK_ROW_INTS;
    if (threadIdx.x == 0) {
        int above;
        topk_threshold(w, w + 256, k, sT, above);
    }
    __syncthreads();
    int i0, i1, gt, eq, before;
    topk_run(V, i0, i1);
    topk_count(row, i0, i1, sT, gt, eq);
    const int gts = topk_scan(gt, before), eqs = topk_scan(eq, before);
    if (threadIdx.x == 0) {
        w[512 + 2 * blockIdx.x] = gts;
        w[512 + 2 * blockIdx.x + 1] = eqs;
    }
}

__global__ void __launch_bounds__(TOPK_THREADS) topk_write_kernel(const uint16_t *logits, int V, int k, const int *work,
                                                                  float *vals, int32_t *ids) {
    __shared__ unsigned sT;
    __shared__ int s_above, s_gt0, s_eq0;
    pdl_wait();
    const uint16_t *row = logits + (size_t)blockIdx.y * V;
    const int *w = work + (size_t)blockIdx.y * TOPK_ROW_INTS;
    float *ov = vals + (size_t)blockIdx.y * k;
    int32_t *oi = ids + (size_t)blockIdx.y * k;
    if (threadIdx.x == 0) {
        int above, gt0 = 0, eq0 = 0;
        topk_threshold(w, w + 256, k, sT, above);
        for (int s = 0; s < (int)blockIdx.x; s++) { /* the slices before this one, in order */
            gt0 += ld_act32(w + 512 + 2 * s);
            eq0 += ld_act32(w + 512 + 2 * s + 1);
        }
        s_above = above;
        s_gt0 = gt0;
        s_eq0 = eq0;
    }
    __syncthreads();
    const unsigned T = sT;
    const int need_eq = k - s_above;
    int i0, i1, gt, eq, gt_before, eq_before;
    topk_run(V, i0, i1);
    topk_count(row, i0, i1, T, gt, eq);
    topk_scan(gt, gt_before);
    topk_scan(eq, eq_before);
    int pg = s_gt0 + gt_before, pe = s_eq0 + eq_before;
    for (int i = i0; i < i1; i++) {
        const uint16_t u = ld_act16(row + i);
        const unsigned key = topk_key(u);
        if (key > T) {
            ov[pg] = bf2f(u);
            oi[pg++] = i;
        } else if (key == T) {
            if (pe < need_eq) {
                ov[s_above + pe] = bf2f(u);
                oi[s_above + pe] = i;
            }
            pe++;
        }
    }
}

extern "C" size_t fk_topk_work_bytes(int B) { return (size_t)(B > 0 ? B : 0) * TOPK_ROW_INTS * sizeof(int); }

extern "C" int fk_topk_bf16(const fk_ctx *kc, const uint16_t *logits, int B, int V, int k, float *vals, int32_t *ids, void *work,
                            cudaStream_t s) {
    if (B < 1 || V < 1 || k < 1 || k > V || !work) {
        frigg_set_error("topk: the %d largest of %d rows of %d logits (1 <= k <= the row), workspace %p", k, B, V, work);
        return -1;
    }
    int *w = (int *)work;
    if (cudaMemsetAsync(w, 0, fk_topk_work_bytes(B), s) != cudaSuccess) return fk_check_launch("topk");
    const dim3 grid(TOPK_SLICES, B);
    fk_launch(kc, topk_hist_hi_kernel, grid, TOPK_THREADS, 0, s, logits, V, w);
    if (fk_check_launch("topk")) return -1;
    fk_launch(kc, topk_hist_lo_kernel, grid, TOPK_THREADS, 0, s, logits, V, k, w);
    if (fk_check_launch("topk")) return -1;
    fk_launch(kc, topk_count_kernel, grid, TOPK_THREADS, 0, s, logits, V, k, w);
    if (fk_check_launch("topk")) return -1;
    fk_launch(kc, topk_write_kernel, grid, TOPK_THREADS, 0, s, logits, V, k, (const int *)w, vals, ids);
    return fk_check_launch("topk");
}
