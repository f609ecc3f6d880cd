/* test_cuda_kv_int8.c — the int8 KV cache kernels (kernels/attention_decode_i8.cu) against the CPU ops that define
 * them (cpu_ops.h):
 *   - fk_kv_write_i8 writes exactly frigg_kv_quantize's int8 values and fp32 scales, bit for bit, for every
 *     (sequence, head, position) written: random heads, an all-zero head (scale 0, every value 0), a head of
 *     bf16 subnormals (a scale that underflows to 0 or is subnormal itself), a head with one large value
 *     among small ones; positions written in batches of 1..8 rows of different sequences;
 *   - fk_attn_decode_i8, the decode step's write and attention in one kernel, from gqkv rows: it leaves the cache
 *     exactly as fk_rope_rows + fk_kv_write_i8 of the same rows leave it (every byte of values and scales), and
 *     its output is frigg_cpu_attention's on that cache (its k8/v8 arguments) with fk_rope_rows's q and the
 *     output gate, within attn_decode_ref.h's bf16 tolerance: head_dim 32, 64 and 128, rows of 1 to 700 keys
 *     (rows at a sequence's last position and inside it), batch sizes 1..8 over eight sequences; a batched call
 *     equals single-row calls bit for bit; in each merge mode every splits-per-block setting gives the same bits
 *     and leaves the split counters at zero;
 *   - fk_kv_dequant_i8 (the CUDA engine's prefill read of the cache) writes bf16(frigg_kv_dequant(q, scale)) for
 *     every (head, position) below T of a sequence, bit for bit, in the bf16 cache's layout, and nothing else;
 *   - fk_rope_rows (the bf16 staging the engine quantizes from) gives, row for row, the bits fk_rope_kv writes
 *     into the cache at the row's position, and the same q, on both of its paths (16-byte and general);
 *   - unsupported shapes are refused: head_dim 48, and 96 for the attention (32, 64 or 128), 256 for the write;
 *     and misaligned gqkv rows for the attention.
 * Without CUDA in the build, or without a GPU, everything is skipped (0 failed). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "base/util.h"

#ifdef FRIGG_CUDA
#include <cuda_runtime_api.h>

#define CUDA_TEST_SEED 0x9E3779B97F4A7C15ull
#include "attn_decode_ref.h"
#include "engine/backend.h"
#include "cuda_test_util.h"
#include "engine/cpu_ops.h"
#include "../kernels/kernels.h"

#define S 8 /* sequences: a batch of up to 8 rows, each of its own sequence */

static fk_ctx *kc;
#define frand ct_frand
static void *dev_alloc(size_t bytes) {
    void *d = NULL;
    cudaMalloc(&d, bytes);
    return d;
}
static void *dev_copy(const void *h, size_t bytes) {
    void *d = dev_alloc(bytes);
    cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}

/* One geometry: H heads of hd, max_ctx positions per sequence, the first len[s] positions of sequence s
 * written. */
static void test_geometry(int H, int hd, int max_ctx) {
    const int D = H * hd, len[S] = {max_ctx, max_ctx / 2 + 1, 33, 1, max_ctx - 1, 2, max_ctx / 3, 17};
    const long long stride = (long long)H * max_ctx * hd; /* elements per sequence */
    const size_t cache = (size_t)S * stride, scales = (size_t)S * H * max_ctx;
    /* the bf16 K and V each position would hold, [seq][pos][D] */
    uint16_t *kh = malloc(sizeof(uint16_t) * (size_t)S * max_ctx * D), *vh = malloc(sizeof(uint16_t) * (size_t)S * max_ctx * D);
    for (size_t i = 0; i < (size_t)S * max_ctx * D; i++) {
        kh[i] = frigg_f32_to_bf16(frand() * 3.0f);
        vh[i] = frigg_f32_to_bf16(frand() * 2.0f);
    }
    /* special heads at sequence 0: position 0 head 0 all zero; position 1 head 0 bf16 subnormals; position 2
     * head 0 one value of 300 among small ones; the same in V */
    for (int d = 0; d < hd; d++) {
        kh[(size_t)0 * D + d] = vh[(size_t)0 * D + d] = 0;
        kh[(size_t)1 * D + d] = vh[(size_t)1 * D + d] = (uint16_t)((d * 37 + 1) & 0x7f) | (d & 1 ? 0x8000 : 0);
        kh[(size_t)2 * D + d] = vh[(size_t)2 * D + d] = frigg_f32_to_bf16(d == 5 ? 300.0f : frand() * 0.01f);
    }
    int8_t *k8 = dev_alloc(cache), *v8 = dev_alloc(cache);
    float *ks = dev_alloc(sizeof(float) * scales), *vs = dev_alloc(sizeof(float) * scales);
    cudaMemset(k8, 0x55, cache);
    cudaMemset(v8, 0x55, cache);
    cudaMemset(ks, 0xff, sizeof(float) * scales);
    cudaMemset(vs, 0xff, sizeof(float) * scales);
    /* write every position, rows taken round-robin over the sequences, batches of 1..8 rows */
    uint16_t *rk = malloc(sizeof(uint16_t) * 8 * D), *rv = malloc(sizeof(uint16_t) * 8 * D);
    uint16_t *drk = dev_alloc(sizeof(uint16_t) * 8 * D), *drv = dev_alloc(sizeof(uint16_t) * 8 * D);
    int32_t *dseq = dev_alloc(sizeof(int32_t) * 8), *dpos = dev_alloc(sizeof(int32_t) * 8);
    int next[S] = {0}, batch = 1, ok_calls = 1;
    for (;;) {
        int32_t seq[8], pos[8];
        int B = 0;
        for (int s = 0; s < S && B < batch; s++)
            while (next[s] < len[s] && B < batch) {
                seq[B] = s;
                pos[B] = next[s]++;
                memcpy(rk + (size_t)B * D, kh + ((size_t)s * max_ctx + pos[B]) * D, sizeof(uint16_t) * D);
                memcpy(rv + (size_t)B * D, vh + ((size_t)s * max_ctx + pos[B]) * D, sizeof(uint16_t) * D);
                B++;
                if (s < S - 1) break; /* interleave the sequences */
            }
        if (!B) break;
        cudaMemcpy(drk, rk, sizeof(uint16_t) * B * D, cudaMemcpyHostToDevice);
        cudaMemcpy(drv, rv, sizeof(uint16_t) * B * D, cudaMemcpyHostToDevice);
        cudaMemcpy(dseq, seq, sizeof(int32_t) * B, cudaMemcpyHostToDevice);
        cudaMemcpy(dpos, pos, sizeof(int32_t) * B, cudaMemcpyHostToDevice);
        ok_calls &= fk_kv_write_i8(kc, drk, drv, D, dseq, dpos, B, H, hd, max_ctx, stride, k8, v8, ks, vs, 0) == 0;
        batch = batch % 8 + 1;
    }
    CHECK(ok_calls && cudaDeviceSynchronize() == cudaSuccess, "kv_write_i8 H=%d hd=%d: %s", H, hd, frigg_error());
    int8_t *gk = malloc(cache), *gv = malloc(cache), *ck = malloc(cache), *cv = malloc(cache);
    float *gks = malloc(sizeof(float) * scales), *gvs = malloc(sizeof(float) * scales);
    float *cks = malloc(sizeof(float) * scales), *cvs = malloc(sizeof(float) * scales);
    cudaMemcpy(gk, k8, cache, cudaMemcpyDeviceToHost);
    cudaMemcpy(gv, v8, cache, cudaMemcpyDeviceToHost);
    cudaMemcpy(gks, ks, sizeof(float) * scales, cudaMemcpyDeviceToHost);
    cudaMemcpy(gvs, vs, sizeof(float) * scales, cudaMemcpyDeviceToHost);
    /* the CPU's quantization of every written (seq, head, position); untouched positions keep the device's fill */
    memcpy(ck, gk, cache);
    memcpy(cv, gv, cache);
    memcpy(cks, gks, sizeof(float) * scales);
    memcpy(cvs, gvs, sizeof(float) * scales);
    float *row = malloc(sizeof(float) * hd);
    int zero_scale = 0, sub_scale = 0;
    for (int s = 0; s < S; s++)
        for (int j = 0; j < len[s]; j++)
            for (int h = 0; h < H; h++)
                for (int which = 0; which < 2; which++) {
                    const uint16_t *src = (which ? vh : kh) + ((size_t)s * max_ctx + j) * D + (size_t)h * hd;
                    for (int d = 0; d < hd; d++) row[d] = frigg_bf16_to_f32(src[d]);
                    size_t at = (size_t)s * stride + ((size_t)h * max_ctx + j) * hd, sat = ((size_t)s * H + h) * max_ctx + j;
                    frigg_kv_quantize(row, hd, (which ? cv : ck) + at, (which ? cvs : cks) + sat);
                    float sc = (which ? cvs : cks)[sat];
                    zero_scale += sc == 0;
                    sub_scale += sc != 0 && fabsf(sc) < 1.17549435e-38f;
                }
    CHECK(!memcmp(gk, ck, cache) && !memcmp(gv, cv, cache), "kv_write_i8 H=%d hd=%d: int8 values differ from frigg_kv_quantize's",
          H, hd);
    CHECK(!memcmp(gks, cks, sizeof(float) * scales) && !memcmp(gvs, cvs, sizeof(float) * scales),
          "kv_write_i8 H=%d hd=%d: scales differ from frigg_kv_quantize's", H, hd);
    CHECK(zero_scale >= 2, "the all-zero head did not give scale 0 (%d zero scales)", zero_scale);
    CHECK(sub_scale >= 2, "the head of bf16 subnormals did not give a subnormal scale (%d)", sub_scale);

    /* the prefill's read: positions [0, len[s]) of sequences 0 and 2 back as bf16, the rest of the copy untouched */
    {
        size_t slab = (size_t)H * max_ctx * hd;
        uint16_t *dko = dev_alloc(2 * slab), *dvo = dev_alloc(2 * slab);
        uint16_t *hko = malloc(2 * slab), *hvo = malloc(2 * slab);
        for (int s = 0; s < S; s += 2) {
            cudaMemset(dko, 0xff, 2 * slab);
            cudaMemset(dvo, 0xff, 2 * slab);
            CHECK(fk_kv_dequant_i8(kc, k8 + (size_t)s * stride, v8 + (size_t)s * stride, ks + (size_t)s * H * max_ctx,
                                   vs + (size_t)s * H * max_ctx, len[s], H, hd, max_ctx, dko, dvo, 0) == 0 &&
                      cudaDeviceSynchronize() == cudaSuccess,
                  "kv_dequant_i8: %s", frigg_error());
            cudaMemcpy(hko, dko, 2 * slab, cudaMemcpyDeviceToHost);
            cudaMemcpy(hvo, dvo, 2 * slab, cudaMemcpyDeviceToHost);
            size_t bad = 0;
            for (int h = 0; h < H; h++)
                for (int j = 0; j < max_ctx; j++)
                    for (int d = 0; d < hd; d++) {
                        size_t at = ((size_t)h * max_ctx + j) * hd + d, sat = ((size_t)s * H + h) * max_ctx + j;
                        size_t q = (size_t)s * stride + at;
                        uint16_t wk = j < len[s] ? frigg_f32_to_bf16(frigg_kv_dequant(ck[q], cks[sat])) : 0xffff;
                        uint16_t wv = j < len[s] ? frigg_f32_to_bf16(frigg_kv_dequant(cv[q], cvs[sat])) : 0xffff;
                        bad += hko[at] != wk || hvo[at] != wv;
                    }
            CHECK(!bad, "kv_dequant_i8 H=%d hd=%d seq %d (%d positions): %zu values are not bf16(q * scale) or were "
                  "written past the positions", H, hd, s, len[s], bad);
        }
        CHECK(fk_kv_dequant_i8(kc, k8, v8, ks, vs, max_ctx + 1, H, hd, max_ctx, dko, dvo, 0) != 0,
              "kv_dequant_i8: more positions than the cache holds accepted");
        cudaFree(dko);
        cudaFree(dvo);
        free(hko);
        free(hvo);
    }

    /* the step's write and attention: rows over the sequences (each of its own), each at its sequence's last
     * written position or inside it (that position is written anew), from random gqkv rows and RoPE tables */
    uint16_t *gh = malloc(sizeof(uint16_t) * 8 * 4 * D), *csh = malloc(sizeof(uint16_t) * (size_t)max_ctx * hd),
             *snh = malloc(sizeof(uint16_t) * (size_t)max_ctx * hd);
    for (int i = 0; i < 8 * 4 * D; i++) gh[i] = frigg_f32_to_bf16(frand() * 2.0f);
    for (int i = 0; i < max_ctx * hd; i++) {
        csh[i] = frigg_f32_to_bf16(frand());
        snh[i] = frigg_f32_to_bf16(frand());
    }
    uint16_t *dg = dev_copy(gh, sizeof(uint16_t) * 8 * 4 * D), *dcs = dev_copy(csh, sizeof(uint16_t) * (size_t)max_ctx * hd),
             *dsn = dev_copy(snh, sizeof(uint16_t) * (size_t)max_ctx * hd);
    /* the reference: fk_rope_rows's q and rows, fk_kv_write_i8 into a copy of the cache */
    uint16_t *dq = dev_alloc(sizeof(uint16_t) * 8 * D), *drows = dev_alloc(sizeof(uint16_t) * 8 * 2 * D);
    uint16_t *qh = malloc(sizeof(uint16_t) * 8 * D);
    int8_t *rk8 = dev_alloc(cache), *rv8 = dev_alloc(cache);
    float *rks = dev_alloc(sizeof(float) * scales), *rvs = dev_alloc(sizeof(float) * scales);
    float *dw = dev_alloc(sizeof(float) * fk_attn_decode_work_floats(8, H, hd, max_ctx));
    int *dcnt = dev_alloc(sizeof(int) * 8 * H), *hcnt = malloc(sizeof(int) * 8 * H);
    cudaMemset(dcnt, 0, sizeof(int) * 8 * H);
    uint16_t *dy = dev_alloc(sizeof(uint16_t) * 8 * D), *yb = malloc(sizeof(uint16_t) * 8 * D), *y1 = malloc(sizeof(uint16_t) * 8 * D);
    float *ref = malloc(sizeof(float) * D), *got = malloc(sizeof(float) * D), *qf = malloc(sizeof(float) * D),
          *gf = malloc(sizeof(float) * D);
#define ATTN_I8(g, sq, ps, nb, out) \
    fk_attn_decode_i8(kc, g, dcs, dsn, k8, v8, ks, vs, stride, sq, ps, nb, H, hd, max_ctx, dw, dcnt, out, 0)
    for (int B = 1; B <= 8; B++) {
        int32_t seq[8], pos[8];
        for (int b = 0; b < B; b++) {
            seq[b] = (b + B) % S;
            pos[b] = len[seq[b]] - 1 - (b % 3 == 2 ? len[seq[b]] / 3 : 0);
        }
        cudaMemcpy(dseq, seq, sizeof(int32_t) * B, cudaMemcpyHostToDevice);
        cudaMemcpy(dpos, pos, sizeof(int32_t) * B, cudaMemcpyHostToDevice);
        cudaMemcpy(rk8, k8, cache, cudaMemcpyDeviceToDevice);
        cudaMemcpy(rv8, v8, cache, cudaMemcpyDeviceToDevice);
        cudaMemcpy(rks, ks, sizeof(float) * scales, cudaMemcpyDeviceToDevice);
        cudaMemcpy(rvs, vs, sizeof(float) * scales, cudaMemcpyDeviceToDevice);
        CHECK(fk_rope_rows(kc, dg, B, H, hd, dpos, dcs, dsn, dq, drows, drows + D, 2 * D, 0) == 0 &&
                  fk_kv_write_i8(kc, drows, drows + D, 2 * D, dseq, dpos, B, H, hd, max_ctx, stride, rk8, rv8, rks, rvs, 0) == 0,
              "the reference write: %s", frigg_error());
        cudaMemset(dy, 0xff, sizeof(uint16_t) * 8 * D);
        CHECK(ATTN_I8(dg, dseq, dpos, B, dy) == 0 && cudaDeviceSynchronize() == cudaSuccess, "%s", frigg_error());
        cudaMemcpy(yb, dy, sizeof(uint16_t) * B * D, cudaMemcpyDeviceToHost);
        /* the cache the fused write left against the reference's, every byte */
        cudaMemcpy(gk, k8, cache, cudaMemcpyDeviceToHost);
        cudaMemcpy(gv, v8, cache, cudaMemcpyDeviceToHost);
        cudaMemcpy(gks, ks, sizeof(float) * scales, cudaMemcpyDeviceToHost);
        cudaMemcpy(gvs, vs, sizeof(float) * scales, cudaMemcpyDeviceToHost);
        cudaMemcpy(ck, rk8, cache, cudaMemcpyDeviceToHost);
        cudaMemcpy(cv, rv8, cache, cudaMemcpyDeviceToHost);
        cudaMemcpy(cks, rks, sizeof(float) * scales, cudaMemcpyDeviceToHost);
        cudaMemcpy(cvs, rvs, sizeof(float) * scales, cudaMemcpyDeviceToHost);
        CHECK(!memcmp(gk, ck, cache) && !memcmp(gv, cv, cache) && !memcmp(gks, cks, sizeof(float) * scales) &&
                  !memcmp(gvs, cvs, sizeof(float) * scales),
              "attn_decode_i8 H=%d hd=%d B=%d: the cache differs from fk_rope_rows + fk_kv_write_i8's", H, hd, B);
        /* each row alone */
        for (int b = 0; b < B; b++)
            CHECK(ATTN_I8(dg + (size_t)b * 4 * D, dseq + b, dpos + b, 1, dy + (size_t)b * D) == 0, "%s", frigg_error());
        cudaMemcpy(y1, dy, sizeof(uint16_t) * B * D, cudaMemcpyDeviceToHost);
        CHECK(!memcmp(yb, y1, sizeof(uint16_t) * B * D),
              "attn_decode_i8 H=%d hd=%d B=%d: a batched call differs from single-row calls", H, hd, B);
        /* within a merge mode, every splits-per-block setting moves whole splits between blocks: the bits of one
         * split per block, and the split mode's counters left at zero; each mode within the bf16 tolerance of the
         * default (checked against the CPU op below; the modes split a row differently: the cluster caps it at
         * 16 splits). Each call writes the same values again. */
        static const int impls[2] = {FK_ATTND_SPLIT, FK_ATTND_CLUSTER}, spbs[3] = {1, 3, 0};
        uint16_t *ym = malloc(sizeof(uint16_t) * 8 * D);
        for (int m = 0; m < 2; m++)
            for (int k = 0; k < 3; k++) {
                if (fk_ctx_set_attn_decode_impl(kc, impls[m], spbs[k]) != 0) continue; /* no clusters on this device */
                cudaMemset(dy, 0xff, sizeof(uint16_t) * 8 * D);
                CHECK(ATTN_I8(dg, dseq, dpos, B, dy) == 0, "%s", frigg_error());
                cudaMemcpy(k == 0 ? ym : y1, dy, sizeof(uint16_t) * B * D, cudaMemcpyDeviceToHost);
                if (k == 0) {
                    int far = 0, first = -1;
                    for (int i = 0; i < B * D; i++) {
                        float gm = frigg_bf16_to_f32(ym[i]), gd = frigg_bf16_to_f32(yb[i]);
                        if (!(fabsf(gm - gd) <= 0.02f + 0.02f * fabsf(gd)) && !far++) first = i;
                    }
                    CHECK(!far, "attn_decode_i8 H=%d hd=%d B=%d: merge mode %d: %d values beyond 0.02 + 2%% of the default's "
                          "(the first at %d)", H, hd, B, impls[m], far, first);
                } else {
                    CHECK(!memcmp(ym, y1, sizeof(uint16_t) * B * D),
                          "attn_decode_i8 H=%d hd=%d B=%d: merge mode %d with %d splits per block differs from 1 per block", H,
                          hd, B, impls[m], spbs[k]);
                }
                cudaMemcpy(hcnt, dcnt, sizeof(int) * B * H, cudaMemcpyDeviceToHost);
                int zero = 1;
                for (int i = 0; i < B * H; i++) zero &= hcnt[i] == 0;
                CHECK(zero, "attn_decode_i8 H=%d hd=%d B=%d mode %d spb %d: split counters not left at zero", H, hd, B,
                      impls[m], spbs[k]);
            }
        free(ym);
        fk_ctx_set_attn_decode_impl(kc, FK_ATTND_AUTO, 0);
        cudaMemcpy(gk, k8, cache, cudaMemcpyDeviceToHost);
        CHECK(!memcmp(gk, ck, cache), "attn_decode_i8 H=%d hd=%d B=%d: the merge modes' calls wrote other K values", H, hd, B);
        cudaMemcpy(qh, dq, sizeof(uint16_t) * B * D, cudaMemcpyDeviceToHost);
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < D; i++) {
                qf[i] = frigg_bf16_to_f32(qh[(size_t)b * D + i]);
                gf[i] = frigg_bf16_to_f32(gh[(size_t)b * 4 * D + i]);
                got[i] = frigg_bf16_to_f32(yb[(size_t)b * D + i]);
            }
            frigg_attn_args a;
            memset(&a, 0, sizeof a);
            a.q = qf;
            a.q_stride = (size_t)D;
            a.k8 = ck + (size_t)seq[b] * stride;
            a.v8 = cv + (size_t)seq[b] * stride;
            a.pos_stride = (size_t)hd;
            a.head_stride = (size_t)max_ctx * hd;
            a.k_scale = cks + (size_t)seq[b] * H * max_ctx;
            a.v_scale = cvs + (size_t)seq[b] * H * max_ctx;
            a.scale_pos_stride = 1;
            a.scale_head_stride = (size_t)max_ctx;
            a.gate = gf;
            a.gate_stride = (size_t)D;
            a.T = 1;
            a.p0 = pos[b];
            a.prefix_len = 0;
            a.heads = H;
            a.head_dim = hd;
            a.out = ref;
            a.out_stride = (size_t)D;
            frigg_cpu_attention(FRIGG_PREC_BF16, NULL, &a);
            size_t off, bad;
            double worst;
            int ok = attn_decode_close(got, ref, (size_t)D, 0.02, &off, &bad, &worst);
            CHECK(ok, "attn_decode_i8 H=%d hd=%d B=%d row %d (seq %d, %d keys): %zu of %d beyond tolerance, %zu differ (worst %.3g)",
                  H, hd, B, b, seq[b], pos[b] + 1, bad, D, off, worst);
        }
    }
    /* refused shapes */
    CHECK(fk_attn_decode_i8(kc, dg, dcs, dsn, k8, v8, ks, vs, stride, dseq, dpos, 1, H, 48, max_ctx, dw, dcnt, dy, 0) != 0,
          "head_dim 48 accepted");
    CHECK(fk_attn_decode_i8(kc, dg, dcs, dsn, k8, v8, ks, vs, stride, dseq, dpos, 1, H, 96, max_ctx, dw, dcnt, dy, 0) != 0,
          "head_dim 96 accepted (the kernel's lanes hold 8 values: 32, 64 or 128)");
    CHECK(ATTN_I8(dg + 4, dseq, dpos, 1, dy) != 0, "attn_decode_i8: gqkv rows off the 16-byte alignment accepted");
#undef ATTN_I8
    CHECK(fk_kv_write_i8(kc, drk, drv, D, dseq, dpos, 1, 1, 256, max_ctx, stride, k8, v8, ks, vs, 0) != 0,
          "head_dim 256 accepted");
    cudaFree(dw);
    cudaFree(dcnt);
    free(hcnt);
    cudaFree(k8);
    cudaFree(v8);
    cudaFree(ks);
    cudaFree(vs);
    cudaFree(drk);
    cudaFree(drv);
    cudaFree(dseq);
    cudaFree(dpos);
    cudaFree(dq);
    cudaFree(dg);
    cudaFree(dcs);
    cudaFree(dsn);
    cudaFree(drows);
    cudaFree(rk8);
    cudaFree(rv8);
    cudaFree(rks);
    cudaFree(rvs);
    cudaFree(dy);
    free(csh);
    free(snh);
    free(kh);
    free(vh);
    free(rk);
    free(rv);
    free(gk);
    free(gv);
    free(ck);
    free(cv);
    free(gks);
    free(gvs);
    free(cks);
    free(cvs);
    free(row);
    free(qh);
    free(gh);
    free(yb);
    free(y1);
    free(ref);
    free(got);
    free(qf);
    free(gf);
}

/* fk_rope_rows against fk_rope_kv on the same gqkv rows: q identical, and row t's K and V rows identical to what
 * fk_rope_kv put in the cache at (row_seq[t], row_pos[t]); the 16-byte path and the general one. */
static void test_rope_rows(int H, int hd, int max_ctx) {
    enum { T = 9 };
    const int D = H * hd;
    const long long stride = (long long)H * max_ctx * hd;
    int32_t seq[T], pos[T];
    for (int t = 0; t < T; t++) {
        seq[t] = t % 2;
        pos[t] = (t * 37 + 3) % max_ctx;
    }
    pos[T - 1] = max_ctx - 1;
    uint16_t *g = malloc(sizeof(uint16_t) * T * 4 * D), *cs = malloc(sizeof(uint16_t) * (size_t)max_ctx * hd),
             *sn = malloc(sizeof(uint16_t) * (size_t)max_ctx * hd);
    for (int i = 0; i < T * 4 * D; i++) g[i] = frigg_f32_to_bf16(frand() * 2.0f);
    for (int i = 0; i < max_ctx * hd; i++) {
        cs[i] = frigg_f32_to_bf16(frand());
        sn[i] = frigg_f32_to_bf16(frand());
    }
    uint16_t *dg = dev_copy(g, sizeof(uint16_t) * T * 4 * D), *dcs = dev_copy(cs, sizeof(uint16_t) * (size_t)max_ctx * hd),
             *dsn = dev_copy(sn, sizeof(uint16_t) * (size_t)max_ctx * hd);
    int32_t *dseq = dev_copy(seq, sizeof seq), *dpos = dev_copy(pos, sizeof pos);
    uint16_t *dq1 = dev_alloc(sizeof(uint16_t) * T * D), *dq2 = dev_alloc(sizeof(uint16_t) * T * D);
    uint16_t *dkc = dev_alloc(sizeof(uint16_t) * 2 * stride), *dvc = dev_alloc(sizeof(uint16_t) * 2 * stride);
    uint16_t *drows = dev_alloc(sizeof(uint16_t) * T * 2 * D);
    uint16_t *q1 = malloc(sizeof(uint16_t) * T * D), *q2 = malloc(sizeof(uint16_t) * T * D);
    uint16_t *kc_h = malloc(sizeof(uint16_t) * 2 * stride), *vc_h = malloc(sizeof(uint16_t) * 2 * stride);
    uint16_t *rows = malloc(sizeof(uint16_t) * T * 2 * D);
    for (int general = 0; general < 2; general++) {
        fk_ctx_set_eltwise_general(kc, general);
        cudaMemset(dq1, 0xff, sizeof(uint16_t) * T * D);
        cudaMemset(dq2, 0x7f, sizeof(uint16_t) * T * D);
        cudaMemset(drows, 0xff, sizeof(uint16_t) * T * 2 * D);
        CHECK(fk_rope_kv(kc, dg, T, H, hd, dseq, dpos, dcs, dsn, dq1, dkc, dvc, stride, max_ctx, 0) == 0 &&
                  fk_rope_rows(kc, dg, T, H, hd, dpos, dcs, dsn, dq2, drows, drows + D, 2 * D, 0) == 0 &&
                  cudaDeviceSynchronize() == cudaSuccess,
              "rope_rows: %s", frigg_error());
        cudaMemcpy(q1, dq1, sizeof(uint16_t) * T * D, cudaMemcpyDeviceToHost);
        cudaMemcpy(q2, dq2, sizeof(uint16_t) * T * D, cudaMemcpyDeviceToHost);
        cudaMemcpy(kc_h, dkc, sizeof(uint16_t) * 2 * stride, cudaMemcpyDeviceToHost);
        cudaMemcpy(vc_h, dvc, sizeof(uint16_t) * 2 * stride, cudaMemcpyDeviceToHost);
        cudaMemcpy(rows, drows, sizeof(uint16_t) * T * 2 * D, cudaMemcpyDeviceToHost);
        size_t bad = 0;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int d = 0; d < hd; d++) {
                    size_t at = (size_t)seq[t] * stride + ((size_t)h * max_ctx + pos[t]) * hd + d;
                    size_t r = (size_t)t * 2 * D + (size_t)h * hd + d;
                    bad += rows[r] != kc_h[at] || rows[r + D] != vc_h[at];
                }
        CHECK(!memcmp(q1, q2, sizeof(uint16_t) * T * D), "rope_rows H=%d hd=%d (%s path): q differs from fk_rope_kv's", H,
              hd, general ? "general" : "16-byte");
        CHECK(!bad, "rope_rows H=%d hd=%d (%s path): %zu K/V row values differ from fk_rope_kv's cache entries", H, hd,
              general ? "general" : "16-byte", bad);
    }
    fk_ctx_set_eltwise_general(kc, 0);
    CHECK(fk_rope_rows(kc, dg, T, H, hd, dpos, dcs, dsn, dq2, drows, drows + D, D - 1, 0) != 0,
          "rope_rows: a row stride below heads x head_dim accepted");
    cudaFree(dg);
    cudaFree(dcs);
    cudaFree(dsn);
    cudaFree(dseq);
    cudaFree(dpos);
    cudaFree(dq1);
    cudaFree(dq2);
    cudaFree(dkc);
    cudaFree(dvc);
    cudaFree(drows);
    free(g);
    free(cs);
    free(sn);
    free(q1);
    free(q2);
    free(kc_h);
    free(vc_h);
    free(rows);
}
#endif

int main(void) {
    TEST_MAIN_BEGIN("test_cuda_kv_int8");
#ifndef FRIGG_CUDA
    SKIP("built without CUDA (FRIGG_CUDA=0)");
#else
    if (frigg_cuda_device_count() < 1) {
        SKIP("no CUDA device present");
    } else {
        kc = fk_ctx_create();
        CHECK(kc != NULL, "fk_ctx_create: %s", frigg_error());
        if (kc) {
            test_geometry(12, 128, 700); /* DFM-Mimir's heads */
            /* splits of more than two 64-key rounds (cluster: 16 of 188 keys; split: 22 of 137), so the four rounds
             * in flight of a small grid (batch 1 alone: 2 blocks per SM) and the two of a batch of 8 both run */
            test_geometry(12, 128, 3000);
            test_geometry(3, 64, 200);
            test_geometry(2, 32, 97);
            test_rope_rows(12, 128, 64);
            test_rope_rows(3, 64, 40);
            fk_ctx_free(kc);
        }
    }
#endif
    TEST_MAIN_END();
}
