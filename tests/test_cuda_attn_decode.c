/* test_cuda_attn_decode.c — fk_attn_decode (kernels/attention_decode.cu) against the CPU reference
 * (tests/attn_decode_ref.h), in both merge modes (global partials + counter, thread-block cluster) and with
 * splits-per-block chosen by batch size or fixed, on the cases its split scheme makes special: rows whose length sits on either
 * side of a split or round boundary (1, 2, 31..33, 63..65, 127..129, ...), every batch size 1..8 with rows
 * of different lengths in other sequences, long rows (4096 keys: the most splits, 32 for one head), every
 * supported head_dim. Also: a batched call equals single-row calls bit for bit (a row's arithmetic must not
 * depend on its batch); a CUDA-graph replay equals the eager call bit for bit; the split counters are left
 * at zero; the splits-per-block setting never changes a bit of the output (it only moves splits between
 * blocks); a preceding kernel's write of the newest key (fk_rope_kv, launched with PDL right before, as
 * fk_gemv_qkv is in the engine) is seen; unsupported shapes are errors. The kernel parks up to 4 splits'
 * group partials before one barrier merges them: blocks of more splits than that (5, 9, 16, 32 per block)
 * flush the park several times, the last time partly full. The launch bounds (3 blocks per SM, three rounds in
 * flight, or 4) follow the grid, so both run below. The merge mode is a setting of the kernel context; a bad
 * setting fails the set call. A batch of more (row, head) pairs than one wave of blocks holds (4 per SM) runs
 * the batch-size policy's other branch (two blocks per pair). fk_attn_decode_write, the same attention with the
 * RoPE and K/V write of fk_rope_kv inside it, gives the output and the cache of fk_rope_kv then fk_attn_decode,
 * bit for bit.
 * FRIGG_QUICK=1: the default merge modes only (auto, split), at Mimir's 12 heads of 128 (for a run under
 * compute-sanitizer's racecheck, which did not finish the whole test in 420 s).
 * Without CUDA in the build, or without a GPU, everything is skipped (0 failed). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#include "attn_decode_ref.h"
#include "engine/backend.h"
#include "../kernels/kernels.h"

#define ATTND_AUTO FK_ATTND_AUTO /* the context's default merge mode */

static fk_ctx *kc; /* the context every launch below uses */

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { /* uniform [-1, 1) */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
static void fill(uint16_t *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frigg_f32_to_bf16(frand() * scale);
}
static void *dev_copy(const void *h, size_t bytes) {
    void *d = NULL;
    cudaMalloc(&d, bytes);
    cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}

/* One problem on the device: MAXB sequences' caches, queries, gates, outputs and the split scratch. */
enum { MAXB = 8 };
typedef struct {
    int H, hd, max_ctx, D;
    long long seq_stride;
    uint16_t *hk, *hv, *hq, *hg;           /* host copies */
    uint16_t *dk, *dv, *dq, *dg, *dy;
    int32_t *dseq, *dpos;
    float *work;
    int *cnt;
} problem;

static void problem_init(problem *p, int H, int hd, int max_ctx) {
    p->H = H;
    p->hd = hd;
    p->max_ctx = max_ctx;
    p->D = H * hd;
    p->seq_stride = (long long)H * max_ctx * hd;
    size_t kv = (size_t)MAXB * p->seq_stride;
    p->hk = malloc(kv * 2);
    p->hv = malloc(kv * 2);
    p->hq = malloc((size_t)MAXB * p->D * 2);
    p->hg = malloc((size_t)MAXB * 4 * p->D * 2);
    fill(p->hk, kv, 2.0f);
    fill(p->hv, kv, 1.0f);
    fill(p->hq, (size_t)MAXB * p->D, 2.0f);
    fill(p->hg, (size_t)MAXB * 4 * p->D, 3.0f);
    p->dk = dev_copy(p->hk, kv * 2);
    p->dv = dev_copy(p->hv, kv * 2);
    p->dq = dev_copy(p->hq, (size_t)MAXB * p->D * 2);
    p->dg = dev_copy(p->hg, (size_t)MAXB * 4 * p->D * 2);
    cudaMalloc((void **)&p->dy, (size_t)MAXB * p->D * 2);
    cudaMalloc((void **)&p->dseq, MAXB * 4);
    cudaMalloc((void **)&p->dpos, MAXB * 4);
    cudaMalloc((void **)&p->work, fk_attn_decode_work_floats(MAXB, H, hd, max_ctx) * 4);
    cudaMalloc((void **)&p->cnt, (size_t)MAXB * H * 4);
    cudaMemset(p->cnt, 0, (size_t)MAXB * H * 4);
}

static void problem_free(problem *p) {
    free(p->hk); free(p->hv); free(p->hq); free(p->hg);
    cudaFree(p->dk); cudaFree(p->dv); cudaFree(p->dq); cudaFree(p->dg); cudaFree(p->dy);
    cudaFree(p->dseq); cudaFree(p->dpos); cudaFree(p->work); cudaFree(p->cnt);
}

static int counters_zero(const problem *p) {
    int n = MAXB * p->H, ok = 1, *h = malloc((size_t)n * 4);
    cudaDeviceSynchronize();
    cudaMemcpy(h, p->cnt, (size_t)n * 4, cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++) ok &= h[i] == 0;
    free(h);
    return ok;
}

/* Rows b < B (queries q[qrow0 + b]) at sequences seq[b], positions pos[b]: y (host, bf16 bits) from the
 * kernel; the output is poisoned with NaN first, so a row not written fails. */
static int run(problem *p, int qrow0, int B, const int32_t *seq, const int32_t *pos, uint16_t *y) {
    cudaMemcpy(p->dseq, seq, (size_t)B * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(p->dpos, pos, (size_t)B * 4, cudaMemcpyHostToDevice);
    cudaMemset(p->dy, 0xff, (size_t)MAXB * p->D * 2);
    int rc = fk_attn_decode(kc, p->dq + (size_t)qrow0 * p->D, p->dk, p->dv, p->seq_stride, p->dseq, p->dpos,
                            p->dg + (size_t)qrow0 * 4 * p->D, B, p->H, p->hd, p->max_ctx, p->work, p->cnt, p->dy, 0);
    cudaDeviceSynchronize();
    cudaMemcpy(y, p->dy, (size_t)B * p->D * 2, cudaMemcpyDeviceToHost);
    return rc;
}

/* Compare y (rows b < B of a run with queries from qrow0) with the reference, row by row. */
static void check_rows(const char *what, problem *p, int qrow0, int B, const int32_t *seq, const int32_t *pos,
                       const uint16_t *y) {
    float *ref = malloc(sizeof(float) * p->D), *got = malloc(sizeof(float) * p->D);
    for (int b = 0; b < B; b++) {
        attn_decode_ref(p->hq + (size_t)(qrow0 + b) * p->D, p->hk, p->hv, p->seq_stride, seq + b, pos + b,
                        p->hg + (size_t)(qrow0 + b) * 4 * p->D, 1, p->H, p->hd, p->max_ctx, ref);
        for (int i = 0; i < p->D; i++) got[i] = frigg_bf16_to_f32(y[(size_t)b * p->D + i]);
        size_t off, bad;
        double worst;
        int ok = attn_decode_close(got, ref, (size_t)p->D, 0.02, &off, &bad, &worst);
        CHECK(ok, "%s H=%d hd=%d max_ctx=%d row %d (seq %d, %d keys): %zu of %d beyond tolerance, %zu differ (worst %.3g)",
              what, p->H, p->hd, p->max_ctx, b, seq[b], pos[b] + 1, bad, p->D, off, worst);
    }
    free(ref);
    free(got);
}

/* Every batch size 1..8 over rows of assorted lengths (the lengths rotate so each size sees different
 * boundaries); every batched row must also equal the same row run alone, bit for bit. */
static void test_lengths(int H, int hd, int max_ctx, const int *lens, int nlen) {
    problem p;
    problem_init(&p, H, hd, max_ctx);
    uint16_t *y = malloc((size_t)MAXB * p.D * 2), *y1 = malloc((size_t)p.D * 2);
    for (int B = 1; B <= MAXB; B++) {
        for (int rot = 0; rot < nlen; rot += B) {
            int32_t seq[MAXB], pos[MAXB];
            for (int b = 0; b < B; b++) {
                seq[b] = (b * 5 + rot) % MAXB; /* rows in other sequences than their index */
                int len = lens[(rot + b) % nlen];
                pos[b] = (len > max_ctx ? max_ctx : len) - 1;
            }
            CHECK(run(&p, 0, B, seq, pos, y) == 0, "%s", frigg_error());
            char what[64];
            snprintf(what, sizeof what, "B=%d", B);
            check_rows(what, &p, 0, B, seq, pos, y);
            CHECK(counters_zero(&p), "H=%d hd=%d B=%d: split counters not left at zero", H, hd, B);
            if (B == 1) continue;
            int same = 1;
            for (int b = 0; b < B; b++) {
                CHECK(run(&p, b, 1, seq + b, pos + b, y1) == 0, "%s", frigg_error());
                same &= !memcmp(y1, y + (size_t)b * p.D, (size_t)p.D * 2);
            }
            CHECK(same, "H=%d hd=%d B=%d: a batched row differs from the same row alone", H, hd, B);
        }
    }
    free(y);
    free(y1);
    problem_free(&p);
}

/* A graph of two launches replays to exactly the eager result, and leaves the counters at zero. */
static void test_graph(void) {
    problem p;
    problem_init(&p, 12, 128, 1024);
    int32_t seq[4] = {3, 0, 6, 1}, pos[4] = {1023, 511, 40, 0};
    uint16_t *ye = malloc((size_t)4 * p.D * 2), *yg = malloc((size_t)4 * p.D * 2);
    CHECK(run(&p, 0, 4, seq, pos, ye) == 0, "%s", frigg_error());
    check_rows("eager", &p, 0, 4, seq, pos, ye);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaGraph_t g;
    cudaGraphExec_t ex;
    cudaMemset(p.dy, 0xff, (size_t)MAXB * p.D * 2);
    cudaDeviceSynchronize();
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    int rc = 0;
    for (int i = 0; i < 2; i++)
        rc |= fk_attn_decode(kc, p.dq, p.dk, p.dv, p.seq_stride, p.dseq, p.dpos, p.dg, 4, p.H, p.hd, p.max_ctx, p.work,
                             p.cnt, p.dy, s);
    CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess && rc == 0, "capture: %s", frigg_error());
    CHECK(cudaGraphInstantiate(&ex, g, 0) == cudaSuccess, "instantiate");
    for (int r = 0; r < 3; r++) CHECK(cudaGraphLaunch(ex, s) == cudaSuccess, "graph launch");
    cudaStreamSynchronize(s);
    cudaMemcpy(yg, p.dy, (size_t)4 * p.D * 2, cudaMemcpyDeviceToHost);
    CHECK(!memcmp(ye, yg, (size_t)4 * p.D * 2), "graph replay differs from the eager call");
    CHECK(counters_zero(&p), "graph: split counters not left at zero");
    cudaGraphExecDestroy(ex);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    free(ye);
    free(yg);
    problem_free(&p);
}

/* fk_rope_kv writes q and the newest key/value right before the attention (PDL, as fk_gemv_qkv does in the
 * engine): the attention must see them, not what the cache held at that position before. The stale
 * cache entry is made large so that reading it would change the output far beyond tolerance. */
static void test_newest_key(void) {
    problem p;
    problem_init(&p, 4, 128, 256);
    /* the newest key in the first round of a block, or (several splits per block: 3, 5, 9) in its second or
     * third round, which the kernel also loads before the wait (position 64: three one-round splits) */
    int B = 6, D = p.D;
    int32_t seq[6] = {0, 1, 2, 3, 4, 5}, pos[6] = {0, 1, 31, 32, 200, 64};
    for (int b = 0; b < B; b++)
        for (int h = 0; h < p.H; h++)
            for (int d = 0; d < p.hd; d++) {
                size_t at = (size_t)seq[b] * p.seq_stride + ((size_t)h * p.max_ctx + pos[b]) * p.hd + d;
                p.hk[at] = frigg_f32_to_bf16(d % 2 ? 40.0f : -40.0f);
                p.hv[at] = frigg_f32_to_bf16(50.0f);
            }
    size_t kv = (size_t)MAXB * p.seq_stride;
    cudaMemcpy(p.dk, p.hk, kv * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(p.dv, p.hv, kv * 2, cudaMemcpyHostToDevice);
    uint16_t *hcs = malloc((size_t)p.max_ctx * p.hd * 2), *hsn = malloc((size_t)p.max_ctx * p.hd * 2);
    fill(hcs, (size_t)p.max_ctx * p.hd, 1.0f);
    fill(hsn, (size_t)p.max_ctx * p.hd, 1.0f);
    uint16_t *dcs = dev_copy(hcs, (size_t)p.max_ctx * p.hd * 2), *dsn = dev_copy(hsn, (size_t)p.max_ctx * p.hd * 2);
    /* gqkv rows [gate | q | k | v] = p.hg's first rows, so check_rows finds the gate where it looks */
    uint16_t *dgqkv = dev_copy(p.hg, (size_t)B * 4 * D * 2);
    cudaMemcpy(p.dseq, seq, sizeof seq, cudaMemcpyHostToDevice);
    cudaMemcpy(p.dpos, pos, sizeof pos, cudaMemcpyHostToDevice);
    cudaMemset(p.dy, 0xff, (size_t)MAXB * D * 2);
    cudaDeviceSynchronize();
    int rc = fk_rope_kv(kc, dgqkv, B, p.H, p.hd, p.dseq, p.dpos, dcs, dsn, p.dq, p.dk, p.dv, p.seq_stride, p.max_ctx, 0);
    rc |= fk_attn_decode(kc, p.dq, p.dk, p.dv, p.seq_stride, p.dseq, p.dpos, dgqkv, B, p.H, p.hd, p.max_ctx, p.work, p.cnt,
                         p.dy, 0);
    CHECK(rc == 0, "%s", frigg_error());
    cudaDeviceSynchronize();
    /* the reference on what the device holds now */
    cudaMemcpy(p.hk, p.dk, kv * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(p.hv, p.dv, kv * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(p.hq, p.dq, (size_t)B * D * 2, cudaMemcpyDeviceToHost);
    int changed = 1;
    for (int b = 0; b < B; b++)
        changed &= frigg_bf16_to_f32(p.hv[(size_t)seq[b] * p.seq_stride + (size_t)pos[b] * p.hd]) != 50.0f;
    CHECK(changed, "newest key: fk_rope_kv did not overwrite the stale cache entry (test setup)");
    uint16_t *y = malloc((size_t)B * D * 2);
    cudaMemcpy(y, p.dy, (size_t)B * D * 2, cudaMemcpyDeviceToHost);
    check_rows("after fk_rope_kv", &p, 0, B, seq, pos, y);
    free(y); free(hcs); free(hsn);
    cudaFree(dcs); cudaFree(dsn); cudaFree(dgqkv);
    problem_free(&p);
}

/* fk_attn_decode_write (RoPE and the K/V write inside the attention) against fk_rope_kv then fk_attn_decode on a
 * copy of the same cache: the same output and the same cache, bit for bit, for every batch 1..8 of rows at
 * assorted lengths in other sequences (the newest key in a block's first, second or a later round, at a split's
 * start or end). */
static void test_write(int H, int hd, int max_ctx) {
    problem p;
    problem_init(&p, H, hd, max_ctx);
    const int D = p.D;
    const size_t kv = (size_t)MAXB * p.seq_stride;
    uint16_t *hcs = malloc((size_t)max_ctx * hd * 2), *hsn = malloc((size_t)max_ctx * hd * 2);
    fill(hcs, (size_t)max_ctx * hd, 1.0f);
    fill(hsn, (size_t)max_ctx * hd, 1.0f);
    uint16_t *dcs = dev_copy(hcs, (size_t)max_ctx * hd * 2), *dsn = dev_copy(hsn, (size_t)max_ctx * hd * 2);
    uint16_t *dgqkv = dev_copy(p.hg, (size_t)MAXB * 4 * D * 2); /* [gate | q | k | v] rows */
    uint16_t *dk2 = dev_copy(p.hk, kv * 2), *dv2 = dev_copy(p.hv, kv * 2), *dy2 = NULL;
    cudaMalloc((void **)&dy2, (size_t)MAXB * D * 2);
    uint16_t *ya = malloc((size_t)MAXB * D * 2), *yb = malloc((size_t)MAXB * D * 2);
    uint16_t *ka = malloc(kv * 2), *kb = malloc(kv * 2), *va = malloc(kv * 2), *vb = malloc(kv * 2);
    static const int lens[] = {1, 2, 33, 32, 64, 65, 200, 511, 129, 700, 97, 31};
    for (int B = 1; B <= MAXB; B++) {
        int32_t seq[MAXB], pos[MAXB];
        for (int b = 0; b < B; b++) {
            seq[b] = (b * 3 + B) % MAXB;
            int len = lens[(b + B) % (int)(sizeof lens / sizeof lens[0])];
            pos[b] = (len > max_ctx ? max_ctx : len) - 1;
        }
        cudaMemcpy(p.dseq, seq, (size_t)B * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(p.dpos, pos, (size_t)B * 4, cudaMemcpyHostToDevice);
        cudaMemset(p.dy, 0xff, (size_t)MAXB * D * 2);
        cudaMemset(dy2, 0xff, (size_t)MAXB * D * 2);
        cudaDeviceSynchronize();
        int rc = fk_rope_kv(kc, dgqkv, B, H, hd, p.dseq, p.dpos, dcs, dsn, p.dq, p.dk, p.dv, p.seq_stride, max_ctx, 0);
        rc |= fk_attn_decode(kc, p.dq, p.dk, p.dv, p.seq_stride, p.dseq, p.dpos, dgqkv, B, H, hd, max_ctx, p.work, p.cnt,
                             p.dy, 0);
        CHECK(rc == 0, "rope_kv + attn_decode: %s", frigg_error());
        rc = fk_attn_decode_write(kc, dgqkv, dcs, dsn, dk2, dv2, p.seq_stride, p.dseq, p.dpos, B, H, hd, max_ctx, p.work,
                                  p.cnt, dy2, 0);
        CHECK(rc == 0, "attn_decode_write: %s", frigg_error());
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "device error");
        cudaMemcpy(ya, p.dy, (size_t)B * D * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(yb, dy2, (size_t)B * D * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(ka, p.dk, kv * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(kb, dk2, kv * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(va, p.dv, kv * 2, cudaMemcpyDeviceToHost);
        cudaMemcpy(vb, dv2, kv * 2, cudaMemcpyDeviceToHost);
        CHECK(!memcmp(ya, yb, (size_t)B * D * 2), "H=%d hd=%d B=%d: attn_decode_write's output differs from rope_kv + "
              "attn_decode's", H, hd, B);
        CHECK(!memcmp(ka, kb, kv * 2) && !memcmp(va, vb, kv * 2), "H=%d hd=%d B=%d: attn_decode_write's cache differs "
              "from rope_kv's", H, hd, B);
        CHECK(counters_zero(&p), "H=%d hd=%d B=%d: attn_decode_write left split counters", H, hd, B);
        /* and within tolerance of the reference, on the cache as written */
        memcpy(p.hk, ka, kv * 2);
        memcpy(p.hv, va, kv * 2);
        cudaMemcpy(p.hq, p.dq, (size_t)B * D * 2, cudaMemcpyDeviceToHost); /* q as fk_rope_kv rotated it */
        check_rows("attn_decode_write", &p, 0, B, seq, pos, yb);
    }
    CHECK(fk_attn_decode_write(kc, dgqkv, dcs, dsn, dk2, dv2, p.seq_stride, p.dseq, p.dpos, 1, H, 48, max_ctx, p.work,
                               p.cnt, dy2, 0) != 0, "head_dim 48 accepted");
    CHECK(fk_attn_decode_write(kc, dgqkv + 1, dcs, dsn, dk2, dv2, p.seq_stride, p.dseq, p.dpos, 1, H, hd, max_ctx,
                               p.work, p.cnt, dy2, 0) != 0, "misaligned gqkv accepted");
    free(ya); free(yb); free(ka); free(kb); free(va); free(vb); free(hcs); free(hsn);
    cudaFree(dcs); cudaFree(dsn); cudaFree(dgqkv); cudaFree(dk2); cudaFree(dv2); cudaFree(dy2);
    problem_free(&p);
}

/* Splits per block only moves whole splits between blocks: every setting gives the same bits as one split
 * per block, in each mode, for a batch of rows whose lengths cover one to all splits (the grids of these
 * settings fall on both sides of the launch bounds' switch from 3 to 4 blocks per SM). */
static void test_spb_invariance(int impl, int H, int hd, int max_ctx) {
    problem p;
    problem_init(&p, H, hd, max_ctx);
    int32_t seq[MAXB] = {2, 7, 0, 5, 1, 6, 3, 4}, pos[MAXB];
    static const int lens[MAXB] = {1, 33, 97, 200, 511, 64, 700, 129};
    for (int b = 0; b < MAXB; b++) pos[b] = (lens[b] > max_ctx ? max_ctx : lens[b]) - 1;
    uint16_t *y1 = malloc((size_t)MAXB * p.D * 2), *yk = malloc((size_t)MAXB * p.D * 2);
    CHECK(fk_ctx_set_attn_decode_impl(kc, impl, 1) == 0, "%s", frigg_error());
    CHECK(run(&p, 0, MAXB, seq, pos, y1) == 0, "%s", frigg_error());
    check_rows(impl == FK_ATTND_CLUSTER ? "cluster spb=1" : impl == FK_ATTND_SPLIT ? "split spb=1" : "auto spb=1", &p, 0,
               MAXB, seq, pos, y1);
    static const int set[] = {2, 3, 4, 5, 8, 9, 16, 32, 0};
    for (int i = 0; i < (int)(sizeof set / sizeof set[0]); i++) {
        CHECK(fk_ctx_set_attn_decode_impl(kc, impl, set[i]) == 0, "%s", frigg_error());
        CHECK(run(&p, 0, MAXB, seq, pos, yk) == 0, "%s", frigg_error());
        CHECK(!memcmp(y1, yk, (size_t)MAXB * p.D * 2), "impl %d H=%d hd=%d: %d splits per block differs from 1 split per block",
              impl, H, hd, set[i]);
        CHECK(counters_zero(&p), "impl %d spb %d: split counters not left at zero", impl, set[i]);
    }
    fk_ctx_set_attn_decode_impl(kc, ATTND_AUTO, 0);
    free(y1);
    free(yk);
    problem_free(&p);
}

static void test_errors(void) {
    problem p;
    problem_init(&p, 2, 128, 64);
    CHECK(fk_attn_decode(kc, p.dq, p.dk, p.dv, p.seq_stride, p.dseq, p.dpos, p.dg, 1, 2, 48, 64, p.work, p.cnt, p.dy, 0) != 0,
          "head_dim 48 accepted");
    CHECK(fk_attn_decode(kc, p.dq, p.dk, p.dv, p.seq_stride, p.dseq, p.dpos, p.dg, 0, 2, 128, 64, p.work, p.cnt, p.dy, 0) != 0,
          "batch 0 accepted");
    CHECK(fk_ctx_set_attn_decode_impl(kc, 7, 0) == -1, "unknown merge mode accepted");
    CHECK(fk_ctx_set_attn_decode_impl(kc, FK_ATTND_SPLIT, 33) == -1, "33 splits per block accepted");
    CHECK(fk_ctx_set_attn_decode_impl(kc, FK_ATTND_SPLIT, -1) == -1, "-1 splits per block accepted");
    CHECK(fk_ctx_attn_decode_impl(kc) == FK_ATTND_SPLIT || fk_ctx_attn_decode_impl(kc) == FK_ATTND_CLUSTER,
          "a refused setting changed the mode");
    CHECK(fk_attn_decode(kc, p.dq, p.dk, p.dv, p.seq_stride, p.dseq, p.dpos, p.dg, 1, 2, 128, 64, p.work, p.cnt, p.dy, 0) == 0,
          "the setting before a refused one: %s", frigg_error());
    /* auto names the mode it runs: cluster where clusters run (sm_90), else split */
    CHECK(fk_ctx_set_attn_decode_impl(kc, ATTND_AUTO, 0) == 0, "%s", frigg_error());
    int got = fk_ctx_attn_decode_impl(kc);
    CHECK(got == FK_ATTND_SPLIT || got == FK_ATTND_CLUSTER, "auto reports mode %d", got);
    CHECK(fk_attn_decode(kc, p.dq, p.dk, p.dv, p.seq_stride, p.dseq, p.dpos, p.dg, 1, 2, 128, 64, p.work, p.cnt, p.dy, 0) == 0,
          "auto: %s", frigg_error());
    problem_free(&p);
}
#endif

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_attn_decode");
#ifndef FRIGG_CUDA
    SKIP("built without CUDA (FRIGG_CUDA=0)");
#else
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device present");
    } else {
        kc = fk_ctx_create();
        CHECK(kc != NULL, "fk_ctx_create: %s", frigg_error());
        /* split and round boundaries (32-key minimum split, 32-key rounds at head_dim 128), odd lengths */
        static const int lens[] = {1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200, 511, 700, 3, 97};
        const int nlen = (int)(sizeof lens / sizeof lens[0]);
        /* long rows: one head gets 32 splits of 128 keys at 4096 (16 of 256 in cluster mode) */
        static const int long_lens[] = {4096, 4095, 3001, 1025, 4000, 2048, 17, 4096};
        /* each merge mode with splits per block by batch size (batch 1: one per block, batch 8 at 12 heads:
         * several, so "batched = alone" also compares different block mappings) and fixed at 3; more splits
         * per block than the kernel parks (9: flushes after 4, 8 and 9); the defaults (auto mode). {mode,
         * splits per block} */
        static const int modes[][2] = {{FK_ATTND_SPLIT, 3}, {FK_ATTND_CLUSTER, 0}, {FK_ATTND_CLUSTER, 3},
                                       {FK_ATTND_SPLIT, 9}, {FK_ATTND_CLUSTER, 5}, {ATTND_AUTO, 0},
                                       {FK_ATTND_SPLIT, 0}};
        const int nmodes = (int)(sizeof modes / sizeof modes[0]), quick = th_quick();
        int sms = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
        const int wide_heads = 4 * sms / 6 + 4; /* 6 rows of them exceed 4 blocks per SM */
        for (int mi = quick ? nmodes - 2 : 0; mi < nmodes; mi++) {
            if (fk_ctx_set_attn_decode_impl(kc, modes[mi][0], modes[mi][1])) {
                CHECK(modes[mi][0] == FK_ATTND_CLUSTER, "mode %d:%d refused: %s", modes[mi][0], modes[mi][1], frigg_error());
                printf("SKIP: the cluster merge (%s)\n", frigg_error());
                continue;
            }
            test_lengths(12, 128, 700, lens, nlen); /* Mimir's heads: up to 22 splits (16 in cluster mode) */
            if (quick) {
                test_lengths(12, 128, 4096, long_lens, 8);
                test_newest_key();
                continue;
            }
            test_lengths(3, 64, 700, lens, nlen);
            test_lengths(2, 32, 700, lens, nlen);
            test_lengths(1, 16, 700, lens, nlen);
            test_lengths(1, 128, 4096, long_lens, 8);
            test_lengths(12, 128, 4096, long_lens, 8);
            /* batch 6..8 with more (row, head) pairs than a wave of 4 blocks per SM holds: the batch-size policy
             * then takes two blocks per (row, head) where they fill the waves better (batch 48-64 at Mimir's 12
             * heads) */
            test_lengths(wide_heads, 32, 700, lens, nlen);
            test_write(12, 128, 700);
            test_write(3, 64, 700);
            test_write(2, 32, 4096);
            test_write(wide_heads, 32, 700);
            test_graph();
            test_newest_key();
        }
        if (!quick) {
            test_spb_invariance(FK_ATTND_SPLIT, 12, 128, 700);
            test_spb_invariance(FK_ATTND_SPLIT, 2, 64, 4096);
            if (fk_ctx_set_attn_decode_impl(kc, FK_ATTND_CLUSTER, 0) == 0) {
                test_spb_invariance(FK_ATTND_CLUSTER, 12, 128, 700);
                test_spb_invariance(FK_ATTND_CLUSTER, 2, 64, 4096);
            }
            test_spb_invariance(ATTND_AUTO, 12, 128, 700);
            test_errors();
        }
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "device error: %s", cudaGetErrorString(e));
        fk_ctx_free(kc);
    }
#endif
    TEST_MAIN_END();
}
