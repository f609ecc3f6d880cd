/* attention_decode.cu — decode attention: one new query row per batch row against the slot's cached keys,
 * split-K over the keys (flash-decoding), the split partials merged in split order with the output gate
 * y = bf16(bf16(sigmoid(g)) * bf16(o)) fused into the merge. Scores and softmax are fp32 like the CPU engine.
 *
 * Why it is shaped this way (batch 1 at ctx 512 moves only 3 MB, so latency, not bandwidth, decides):
 * - A key is read by HD/8 lanes with one 16-byte load each (16 lanes for head_dim 128), so a score costs
 *   log2(HD/8) shuffles and a warp load covers whole keys.
 * - A block issues the K and V loads of a round before it uses any of them, and keeps the next round's
 *   (two next rounds' at depth 3) in flight while it computes the current one.
 * - Keys before the row's newest position were written by earlier decode steps or prefill, not by the
 *   kernel in front of this one, so the first rounds are loaded BEFORE the programmatic-launch wait and their
 *   DRAM latency overlaps the previous kernel's tail; the newest key, q and the gate (all written by
 *   fk_gemv_qkv just before) are read right after the wait, the gate early so the merge does not wait on it.
 * - The split boundaries of a row are a function of its length, H and max_ctx alone (at most `nsplit`
 *   splits of at least DEC_MIN_KEYS keys), and every split's partial (m, l, acc) is computed by the same code
 *   and merged with the others in split order, so a row's arithmetic does not depend on the batch it is in
 *   (batched decode stays bit-identical to single-row decode).
 * - Which BLOCK computes a split may depend on the batch: a block takes `spb` consecutive splits of its row
 *   (one after the other, loads of the next split in flight while it computes the current). At batch 1 one
 *   split per block spreads 3 MB over the SMs; at batch 8 (1536 splits at ctx 512, but only 4 blocks of 128
 *   registers fit an SM) several splits per block make one wave of blocks instead of three, each with loads
 *   in flight all the time, and fewer partials to exchange.
 * - A block's stream of rounds has no barrier in it until DEC_PARK splits are done (see the kernel).
 * - Two ways to merge the partials of a (row, head) (fk_set_attn_decode_impl, FRIGG_ATTN_DECODE):
 *   "split": partials of other blocks go through `work`, the last block to finish (atomic counter) merges;
 *     a block that holds all splits of its row merges from shared memory with no global round trip.
 *   "cluster": the blocks of a (row, head) form one thread-block cluster; each writes its partials straight
 *     into the shared memory of the cluster's first block (distributed shared memory), one cluster barrier,
 *     and that block merges: no global partials, fence, atomic or L2 reload on the critical path. A cluster
 *     holds at most DEC_MAX_CLUSTER blocks, so this mode caps the splits per row at DEC_MAX_CLUSTER. */
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "kernels.h"

#include "attn_decode_body.cuh"

/* "auto" merge mode (the default): cluster where the device runs clusters of DEC_MAX_CLUSTER blocks, else
 * split. Fixed per device, so the choice never depends on B or on a row (batch invariance). Measured on the
 * H200 (run 15, dev/attn_decode, us per launch): cluster beats split at every batch for ctx <= 2048 (ctx 512:
 * B=1 3.91 against 4.98, B=8 9.62 against 11.01) and loses only at B >= 4 with ctx 4096 (B=8: 55.8 against
 * 52.2-53.9). */
#define DEC_IMPL_AUTO FK_ATTND_AUTO
/* dec_env: 0 = FRIGG_ATTN_DECODE not read yet, 1 = read (or overridden), -1 = it is invalid (every call fails) */
static int dec_impl = DEC_IMPL_AUTO, dec_spb = 0, dec_env = 0;
/* A/B knobs (fk_set_attn_decode_tuning): rounds ahead asked of L2 (0 = none); blocks per SM the kernel is
 * compiled for (launch bounds): 4 gives it the registers for two rounds in flight with no spill (ptxas: 128
 * at head_dim 128), 5 caps it at 96 and ptxas spills ~100 bytes per thread, 3 keeps three rounds in flight
 * (167 registers); 0 (the default) = by mode and grid, see dec_pick_minb. */
static int dec_pf = 0, dec_minb = 0;

/* Splits per (row, head) at most: depends on H, max_ctx and the merge mode only (never on B), so every batch
 * size lays a row's keys out the same way. */
static int dec_nsplit(int H, int max_ctx, int impl) {
    int s = (DEC_SPLIT_BLOCKS + H - 1) / H;
    int cap = (max_ctx + DEC_MIN_KEYS - 1) / DEC_MIN_KEYS;
    int most = impl == FK_ATTND_CLUSTER ? DEC_MAX_CLUSTER : DEC_MAX_SPLITS;
    if (s > most) s = most;
    if (s > cap) s = cap;
    return s < 1 ? 1 : s;
}
/* grid (nblk, H, B), DEC_THREADS threads: dec_body with q, gate and the newest key from global memory. */
template <int HD, bool CLUSTER, int MINB>
__global__ void __launch_bounds__(DEC_THREADS, MINB)
    attn_decode_kernel(const uint16_t *__restrict__ q, const uint16_t *__restrict__ k_slot,
                       const uint16_t *__restrict__ v_slot, long long seq_stride, const int32_t *row_seq,
                       const int32_t *row_pos, int H, int max_ctx, int nsplit, int spb, int pf, float scale,
                       float *work, int *counters, const uint16_t *__restrict__ gqkv, uint16_t *__restrict__ y) {
    constexpr int DEPTH = MINB == 3 ? 3 : 2; /* rounds of loads in flight: 3 only where 170 registers allow */
    if (CLUSTER) cluster_arrive_relaxed(); /* phase 0: "this block has started" (remote writes need it) */
    dec_src_global<CLUSTER> src = {q, gqkv};
    dec_body<HD, CLUSTER, DEPTH>(src, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, k_slot, v_slot, seq_stride,
                                 row_seq, row_pos, H, max_ctx, nsplit, spb, pf, scale, work, counters, y);
}

extern "C" size_t fk_attn_decode_work_floats(int B, int H, int hd, int max_ctx) {
    return (size_t)B * H * dec_nsplit(H, max_ctx, FK_ATTND_SPLIT) * (hd + 4); /* the most splits of any mode */
}

extern "C" void fk_set_attn_decode_impl(int impl, int spb) {
    dec_impl = impl;
    dec_spb = spb;
    dec_env = 1; /* an explicit choice overrides FRIGG_ATTN_DECODE */
}

static int dec_sms(void) {
    static int sms = 0;
    if (!sms) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1)
            sms = 132;
    }
    return sms;
}

/* Whether this device runs the cluster merge: sm_90 (fk_pdl, set by fk_init) and a cluster of DEC_MAX_CLUSTER
 * blocks of the heaviest instantiation (head_dim 128, 3 blocks per SM) fits (a MIG slice may say no). Asked
 * once; not remembered while fk_pdl is still unset. */
static int dec_clusters_ok(void) {
    static int ok = -1;
    if (ok >= 0) return ok;
    if (!fk_pdl) return 0;
    ok = 0;
    void (*kern)(const uint16_t *, const uint16_t *, const uint16_t *, long long, const int32_t *, const int32_t *, int,
                 int, int, int, int, float, float *, int *, const uint16_t *, uint16_t *) = attn_decode_kernel<128, true, 3>;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess) {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = DEC_MAX_CLUSTER;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3(DEC_MAX_CLUSTER, 1, 1);
        cfg.blockDim = DEC_THREADS;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int n = 0;
        ok = cudaOccupancyMaxActiveClusters(&n, (const void *)kern, &cfg) == cudaSuccess && n >= 1;
    }
    (void)cudaGetLastError(); /* a refusal here only means "split" */
    return ok;
}

/* The merge mode a call uses: the one set, or auto's choice for this device. */
static int dec_resolved_impl(void) {
    if (dec_impl != DEC_IMPL_AUTO) return dec_impl;
    return dec_clusters_ok() ? FK_ATTND_CLUSTER : FK_ATTND_SPLIT;
}

/* Launch bounds when not fixed (results never depend on them). Cluster: 3 blocks per SM (three rounds in
 * flight) while the grid has at most 2 blocks per SM, else 4: run 15 measured cluster/3 against cluster at ctx
 * 512, 2048, 4096: B=1 (192-264 blocks) 3.66/6.24/10.91 against 3.91/7.51/11.75 us, but B=2..8 (384+ blocks:
 * clusters then no longer all fit at 3 per SM) 7.05/12.81 against 4.82/9.62 at ctx 512. Split: 4 (split/3
 * was faster only at B=8, by 3-6%, and up to 17% slower at B=2). */
static int dec_pick_minb(int impl, long long blocks) {
    if (dec_minb) return dec_minb;
    return impl == FK_ATTND_CLUSTER && blocks <= 2LL * dec_sms() ? 3 : 4;
}
/* A/B only (kernels/dev/attn_decode.cu, tests): prefetch_rounds > 0: each block asks L2 for its round that
 * many after the last one it loaded into registers (0 = off, the default; at most 32); blocks_per_sm: the
 * launch bounds' minimum blocks per SM of the kernel used, 0 = by mode and grid (the default), 4, 5, or 3
 * (with three rounds of loads in flight instead of two). Invalid values fail the calls. */
extern "C" void fk_set_attn_decode_tuning(int prefetch_rounds, int blocks_per_sm) {
    dec_pf = prefetch_rounds;
    dec_minb = blocks_per_sm;
}

/* FRIGG_ATTN_DECODE = auto | split | cluster, optionally ":N" (N splits per block, 1..32; absent = by batch
 * size). */
static void dec_read_env(void) {
    dec_env = 1;
    const char *env = getenv("FRIGG_ATTN_DECODE");
    if (!env || !*env) return;
    const char *colon = strchr(env, ':');
    size_t n = colon ? (size_t)(colon - env) : strlen(env);
    int spb = 0;
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end || v < 1 || v > DEC_MAX_SPLITS) spb = -1;
        else spb = (int)v;
    }
    if (spb >= 0 && n == 4 && !strncmp(env, "auto", 4)) dec_impl = DEC_IMPL_AUTO;
    else if (spb >= 0 && n == 5 && !strncmp(env, "split", 5)) dec_impl = FK_ATTND_SPLIT;
    else if (spb >= 0 && n == 7 && !strncmp(env, "cluster", 7)) dec_impl = FK_ATTND_CLUSTER;
    else {
        dec_env = -1;
        return;
    }
    dec_spb = spb;
}

/* The merge mode decode calls use (auto resolved: what frigg-bench reports). */
extern "C" int fk_get_attn_decode_impl(void) {
    if (dec_env == 0) dec_read_env();
    return dec_resolved_impl();
}

/* For qkv_attn.cu: the splits per row the fused kernel must lay out (the cluster mode's, so its bits are
 * this kernel's), or 0 where the attention settings rule it out: a merge mode other than cluster, splits per
 * block or a tuning knob set (those select this kernel for an A/B), an invalid FRIGG_ATTN_DECODE (the
 * unfused call then reports it). */
int dec_fused_nsplit(int H, int max_ctx) {
    if (dec_env == 0) dec_read_env();
    if (dec_env < 0 || dec_spb || dec_pf || dec_minb || H < 1 || max_ctx < 1) return 0;
    if (dec_impl != DEC_IMPL_AUTO && dec_impl != FK_ATTND_CLUSTER) return 0;
    if (dec_resolved_impl() != FK_ATTND_CLUSTER) return 0;
    return dec_nsplit(H, max_ctx, FK_ATTND_CLUSTER);
}

/* Splits per block when not fixed: the fewest that keep B*H*blocks within about DEC_WAVE_BLOCKS blocks per
 * SM (one wave; fewer where the launch bounds fit fewer), so batch 1 keeps one split per block and batch 8
 * streams several per block. */
static int dec_auto_spb(int B, int H, int nsplit, int per_sm) {
    long long target = (long long)dec_sms() * per_sm;
    for (int spb = 1; spb < nsplit; spb++)
        if ((long long)B * H * ((nsplit + spb - 1) / spb) <= target) return spb;
    return nsplit;
}

template <int HD, int MINB>
static int dec_launch(int impl, int spb, dim3 grid, cudaStream_t s, const uint16_t *q, const uint16_t *k_slot,
                      const uint16_t *v_slot, long long seq_stride, const int32_t *row_seq, const int32_t *row_pos, int H,
                      int max_ctx, int nsplit, int pf, float scale, float *work, int *counters, const uint16_t *gqkv,
                      uint16_t *y) {
    if (impl == FK_ATTND_SPLIT) {
        fk_launch(attn_decode_kernel<HD, false, MINB>, grid, DEC_THREADS, 0, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos,
                  H, max_ctx, nsplit, spb, pf, scale, work, counters, gqkv, y);
        return 0;
    }
    void (*kern)(const uint16_t *, const uint16_t *, const uint16_t *, long long, const int32_t *, const int32_t *, int,
                 int, int, int, int, float, float *, int *, const uint16_t *, uint16_t *) = attn_decode_kernel<HD, true, MINB>;
    static int nonportable_set = 0; /* per instantiation; set at the first cluster launch above 8 blocks */
    if (grid.x > 8 && !nonportable_set) { /* clusters above 8 blocks are "non-portable": allowed per kernel */
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        nonportable_set = e == cudaSuccess;
        if (e != cudaSuccess) {
            frigg_set_error("attn_decode: cluster of %u blocks: %s", grid.x, cudaGetErrorString(e));
            return -1;
        }
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = grid.x;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = DEC_THREADS;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = fk_pdl ? 2 : 1;
    cudaError_t e = cudaLaunchKernelEx(&cfg, kern, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit,
                                       spb, pf, scale, work, counters, gqkv, y);
    if (e != cudaSuccess) {
        frigg_set_error("attn_decode: cluster launch of %u blocks: %s", grid.x, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

extern "C" int fk_attn_decode(const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot, long long seq_stride,
                              const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H,
                              int hd, int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s) {
    if (dec_env == 0) dec_read_env();
    if (dec_env < 0) {
        frigg_set_error("FRIGG_ATTN_DECODE must be auto, split or cluster, optionally :N with N splits per block (1..%d), "
                        "not '%s'", DEC_MAX_SPLITS, getenv("FRIGG_ATTN_DECODE"));
        return -1;
    }
    if (B < 1 || H < 1 || max_ctx < 1) {
        frigg_set_error("attn_decode: bad shape B=%d H=%d max_ctx=%d", B, H, max_ctx);
        return -1;
    }
    if (dec_impl != FK_ATTND_SPLIT && dec_impl != FK_ATTND_CLUSTER && dec_impl != DEC_IMPL_AUTO) {
        frigg_set_error("attn_decode: unknown implementation %d", dec_impl);
        return -1;
    }
    const int impl = dec_resolved_impl();
    if (impl == FK_ATTND_CLUSTER && !fk_pdl) { /* no sm_90: no clusters either */
        frigg_set_error("attn_decode: the cluster merge needs an sm_90 device");
        return -1;
    }
    if (dec_spb < 0 || dec_spb > DEC_MAX_SPLITS) {
        frigg_set_error("attn_decode: %d splits per block (0 = by batch size, else 1..%d)", dec_spb, DEC_MAX_SPLITS);
        return -1;
    }
    if (dec_pf < 0 || dec_pf > DEC_MAX_SPLITS || (dec_minb && (dec_minb < 3 || dec_minb > 5))) {
        frigg_set_error("attn_decode: tuning: prefetch %d rounds ahead (0..%d), %d blocks per SM (0 = auto, 3, 4 or 5)",
                        dec_pf, DEC_MAX_SPLITS, dec_minb);
        return -1;
    }
    int nsplit = dec_nsplit(H, max_ctx, impl);
    int spb = dec_spb ? dec_spb : dec_auto_spb(B, H, nsplit, dec_minb == 3 ? 3 : DEC_WAVE_BLOCKS);
    if (spb > nsplit) spb = nsplit;
    dim3 grid((nsplit + spb - 1) / spb, H, B);
    const int minb = dec_pick_minb(impl, (long long)grid.x * H * B);
    float scale = (float)(1.0 / sqrt((double)hd));
    int rc;
#define DEC_ARGS impl, spb, grid, s, q, k_slot, v_slot, seq_stride, row_seq, row_pos, H, max_ctx, nsplit, dec_pf, scale, work, counters, gqkv, y
    switch (hd) {
    case 16: rc = minb == 4 ? dec_launch<16, 4>(DEC_ARGS) : minb == 5 ? dec_launch<16, 5>(DEC_ARGS) : dec_launch<16, 3>(DEC_ARGS); break;
    case 32: rc = minb == 4 ? dec_launch<32, 4>(DEC_ARGS) : minb == 5 ? dec_launch<32, 5>(DEC_ARGS) : dec_launch<32, 3>(DEC_ARGS); break;
    case 64: rc = minb == 4 ? dec_launch<64, 4>(DEC_ARGS) : minb == 5 ? dec_launch<64, 5>(DEC_ARGS) : dec_launch<64, 3>(DEC_ARGS); break;
    case 128: rc = minb == 4 ? dec_launch<128, 4>(DEC_ARGS) : minb == 5 ? dec_launch<128, 5>(DEC_ARGS) : dec_launch<128, 3>(DEC_ARGS); break;
    default:
        frigg_set_error("attention: head_dim %d is not supported by the CUDA backend (16, 32, 64 or 128)", hd);
        return -1;
    }
#undef DEC_ARGS
    if (rc) return rc;
    return fk_check_launch("attn_decode");
}
