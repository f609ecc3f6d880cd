/* kernels.h — the C launcher API of frigg's CUDA kernels (the .cu files in kernels/). Every pointer is device memory;
 * bf16 tensors are passed as uint16_t (their bit pattern). Each launcher enqueues on `s` and returns 0, or
 * -1 with frigg_error() set when a launch fails or a shape is unsupported. The rounding points are those of
 * the CPU reference ops (cpu_ops.h): fp32 inside, one bf16 rounding wherever HF rounds. */
#ifndef FRIGG_KERNELS_H
#define FRIGG_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Must be called once per device before any launcher (raises shared-memory limits). */
int fk_init(void);

/* ---- norm.cu ---- */
/* zH[t] = bf16(embed[ids[t]] * scale); zL[t] = z_L_init; x[t] = bf16(zL[t] + zH[t]) (first injection). */
int fk_embed(const uint16_t *embed, const uint16_t *z_L_init, const int32_t *ids, int T, int D, float scale,
             uint16_t *zH, uint16_t *zL, uint16_t *x, cudaStream_t s);
/* out = rmsnorm(in) row by row (weightless, fp32 inside, eps inside the rsqrt). in may equal out. */
int fk_rmsnorm(const uint16_t *in, uint16_t *out, int T, int D, float eps, cudaStream_t s);
/* h = bf16(h + y); a = rmsnorm(h): the residual add of a sub-block fused with the next pre-norm. */
int fk_add_rmsnorm(uint16_t *h, const uint16_t *y, uint16_t *a, int T, int D, float eps, cudaStream_t s);
/* End of a module run: state = rmsnorm(x) (the stack's final_norm, which replaces the state); then, when
 * other != NULL, x = bf16(state + other), the injection add that feeds the next run. */
int fk_run_end(uint16_t *x, uint16_t *state, const uint16_t *other, int T, int D, float eps, cudaStream_t s);
/* out[t][i] = bf16(bf16(silu(gu[t][i])) * gu[t][I + i]) for the packed gate_up output [T][2I]. */
int fk_swiglu(const uint16_t *gu, int T, int I, uint16_t *out, cudaStream_t s);
/* on != 0: rmsnorm, add_rmsnorm, run_end, swiglu and rope_kv take their general paths (one block per row or
 * element-wise accesses, the kernels before round 2) even where the 16-byte paths apply: for the A/B in
 * kernels/dev/prefill.cu and for tests/test_cuda_prefill.c, which checks both. Off by default. */
void fk_set_eltwise_general(int on);

/* ---- rope.cu ---- */
/* From the gqkv projection rows [T][4D] (gate, q, k, v): q_out[t] = rope(q), and the slot's cache gets
 * K = rope(k), V = v at position row_pos[t] of sequence row_seq[t]. The cache of one slot of sequence q
 * starts at k_slot + q * seq_stride (elements) and is laid out [head][max_ctx][head_dim].
 * cos/sin: bf16 tables [max_ctx][head_dim]. */
int fk_rope_kv(const uint16_t *gqkv, int T, int H, int hd, const int32_t *row_seq, const int32_t *row_pos,
               const uint16_t *cos_t, const uint16_t *sin_t, uint16_t *q_out, uint16_t *k_slot, uint16_t *v_slot,
               long long seq_stride, int max_ctx, cudaStream_t s);

/* ---- attention.cu ---- */
/* Prefill attention over keys [0, T) of one sequence (cache slot pointers already offset to it), with the
 * PrefixLM mask: key j is visible from query i when j <= i, or when both are < prefix_len. fp32 scores,
 * online fp32 softmax, P·V with P rounded to bf16 (the default, as HF; or kept to ~fp32 precision as a hi+lo bf16
 * split, see below), output rounded to bf16, then
 * the gate epilogue y = bf16(bf16(sigmoid(g)) * o) with g read from gqkv rows (stride 4D). */
int fk_attn_prefill(const uint16_t *q, const uint16_t *k_seq, const uint16_t *v_seq, const uint16_t *gqkv, int T,
                    int H, int hd, int max_ctx, int prefix_len, uint16_t *y, cudaStream_t s);
/* Which prefill kernel. All are tested against the same reference (tests/test_cuda_prefill.c) and timed by
 * kernels/dev/prefill.cu; fk_init also takes the choice from FRIGG_PREFILL_ATTN=<name> (names as
 * fk_prefill_impl_name; anything else is an error). The bf16p kernels (mma-bf16p is the default) round P to
 * bf16 before P·V, as HF does (eager casts the softmax to bf16 before P·V; SDPA/flash keep P in bf16): o moves
 * by at most 2^-9 · sum_j p_j |v_j| / sum_j p_j against fp32 P (bound in tests/test_cuda_prefill.c). The mma
 * kernels split P into bf16 hi + lo and track the fp32-P CPU engine to ~1e-5. */
enum {
    FK_PREFILL_MMA = 0,        /* "mma": register-tile mma.sync, 4 warps, P as bf16 hi + lo */
    FK_PREFILL_WMMA = 1,       /* "wmma": WMMA with shared-memory tiles (the first kernel) */
    FK_PREFILL_MMA8 = 2,       /* "mma8": as mma with 8 warps (128 query rows) per block */
    FK_PREFILL_MMA_BF16P = 3,  /* "mma-bf16p": 4 warps, P rounded to bf16 (default) */
    FK_PREFILL_MMA8_BF16P = 4, /* "mma8-bf16p": 8 warps, P rounded to bf16 */
    FK_PREFILL_MMA_2B = 5,       /* "mma-2b": as mma, 2 blocks per SM instead of 3 (no register cap, no spill) */
    FK_PREFILL_MMA_BF16P_2B = 6, /* "mma-bf16p-2b": as mma-bf16p, 2 blocks per SM */
    FK_PREFILL_NIMPL = 7
};
void fk_set_prefill_impl(int impl);
int fk_get_prefill_impl(void);
const char *fk_prefill_impl_name(int impl);
/* Decode attention: row b (its query in q[b]) attends causally to positions [0, row_pos[b]] of sequence
 * row_seq[b]; split-K over key chunks (partials in `work`, see fk_attn_decode_work_floats); the last block of
 * each (row, head) combines them with the gate epilogue into y[b]. `counters`: B*H ints, zero before the
 * first call, left zero after each. Reads lengths on the device, so it is CUDA-graph safe. One kernel.
 * A row's split depends only on its length, H and max_ctx, so batched rows equal single-row calls bit for bit.
 * Launched with PDL, it reads row_seq, row_pos and the cached keys/values at positions < row_pos[b] BEFORE
 * waiting for the previous kernel (only q, the gate and position row_pos[b] itself after): the kernel right
 * before it may write those three (fk_gemv_qkv does), not the older cache entries or row_seq/row_pos (kernels
 * further back are complete: every frigg kernel lets its dependents start only after its own wait). */
int fk_attn_decode(const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot, long long seq_stride,
                   const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H, int hd,
                   int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s);
size_t fk_attn_decode_work_floats(int B, int H, int hd, int max_ctx);
/* How fk_attn_decode merges a row's split partials (attention_decode.cu says why): FK_ATTND_SPLIT through
 * `work` + an atomic counter, FK_ATTND_CLUSTER through a thread-block cluster's distributed shared memory
 * (sm_90; at most 16 splits per row), FK_ATTND_AUTO (the default): cluster wherever the device runs the
 * kernel's 16-block clusters, else split, fixed per device. spb: splits per block, 0 = chosen from the batch
 * size, else 1..32 (A/B timing). Also set by FRIGG_ATTN_DECODE=auto|split|cluster[:N], read at the first
 * fk_attn_decode; an explicit call overrides it. fk_get_attn_decode_impl returns the mode that runs (auto
 * resolved). Each mode keeps batched rows bit-identical to single rows; split and cluster differ from each
 * other within tolerance (different split counts). */
enum { FK_ATTND_SPLIT = 0, FK_ATTND_CLUSTER = 1, FK_ATTND_AUTO = 2 };
void fk_set_attn_decode_impl(int impl, int spb);
int fk_get_attn_decode_impl(void);
/* A/B knobs for the microbenchmark and tests (no result depends on them): L2 prefetch of rounds ahead (0 =
 * none) and the launch bounds' blocks per SM (0 = by mode and grid, the default). */
void fk_set_attn_decode_tuning(int prefetch_rounds, int blocks_per_sm);

/* ---- gemv.cu (decode: 1..8 rows per pass over the weights) ---- */
enum {
    FK_GEMV_STORE = 0,   /* out[b][o] = bf16(acc) */
    FK_GEMV_RESID = 1,   /* out[b][o] = bf16(out[b][o] + bf16(acc)): residual add in the epilogue */
    FK_GEMV_SWIGLU = 2,  /* W is gate_up [2I][K]: out[b][i] = bf16(bf16(silu(bf16(acc_i))) * bf16(acc_{I+i})) */
    FK_GEMV_QKV = 3,     /* only through fk_gemv_qkv */
};
/* y = W·x for B rows (1..8). W [O][K] bf16 row-major, K % 8 == 0. x [B][K]. norm_in: x is first replaced by
 * rmsnorm(x) (each block normalises the B rows itself, so no separate norm kernel is needed).
 * Implementations, chosen by fk_set_gemv_impl or, at fk_init, by the environment variable
 * FRIGG_GEMV_IMPL=auto|simt|tc (anything else is an error): one warp per row on CUDA cores (gemv.cu), tensor
 * cores (gemv_tc.cu), or auto (the default): per batch size and shape class, whichever the H200 measured
 * faster (table in gemv.cu). simt and tc each keep batched decode bit-identical to single-row decode; under
 * auto a row's result depends on how many rows share the pass (another kernel, another summation order), so
 * batched equals single only within rounding. All are tested against the same reference. */
enum { FK_GEMV_IMPL_SIMT = 0, FK_GEMV_IMPL_TC = 1, FK_GEMV_IMPL_AUTO = 2 };
void fk_set_gemv_impl(int impl);
int fk_get_gemv_impl(void);
const char *fk_gemv_impl_name(int impl); /* "simt", "tc", "auto" */
/* What auto runs for this call (FK_GEMV_IMPL_SIMT or FK_GEMV_IMPL_TC): a test hook. */
int fk_gemv_auto_impl(int B, int O, int K, int epi);
int fk_gemv(const uint16_t *W, int O, int K, const uint16_t *x, int B, int norm_in, float eps, int epi,
            uint16_t *out, cudaStream_t s);
/* The tensor-core kernel runs a persistent grid (each block walks tiles); this caps its number of blocks
 * (0: as many as fit on the GPU at once). A tuning and test hook: results do not depend on it. */
void fk_gemv_tc_set_max_blocks(int blocks);
/* A/B hooks for the microbenchmark and tests (no result depends on them): the tensor-core kernel with `depth`
 * (1, 2) weight tiles in flight per warp, and the per-tile reduction and epilogue rotating over the warps
 * (rotate); the CUDA-core kernel with every chunk of a K-4096 row in flight at once (long_unroll). */
void fk_gemv_tc_set_variant(int depth, int rotate);
void fk_gemv_simt_set_long_unroll(int on);

/* Where the fused gqkv projection puts its rows (decode): RoPE'd q into q_out [B][D], RoPE'd k and v into the
 * slot's cache at (row_seq[b], row_pos[b]) (layout as fk_rope_kv), the gate rows into gqkv [B][4D]. */
typedef struct {
    const uint16_t *cos_t, *sin_t;
    const int32_t *row_seq, *row_pos;
    uint16_t *q_out, *k_slot, *v_slot;
    long long seq_stride;
    int max_ctx, hd;
} fk_qkv_epi;
/* rmsnorm(x) · gqkv^T with the RoPE + KV-write epilogue: the decode step's first two kernels in one.
 * Each warp computes rows i and i + hd/2 of a head, the pair RoPE mixes. */
int fk_gemv_qkv(const uint16_t *W, int D, const uint16_t *x, int B, float eps, uint16_t *gqkv, const fk_qkv_epi *qa,
                cudaStream_t s);

/* ---- lmhead.cu ---- */
/* ids[b] = argmax over V of the bf16 logits row b (lowest index on ties, as HF's argmax; NaN never wins; a row
 * of nothing but -inf/NaN gives 0, as frigg_argmax). Two kernels: slices of each row over many blocks, then
 * the best slice. work: fk_argmax_work_bytes(B) bytes of device memory, 16-byte aligned. advance: NULL, or B
 * positions, each incremented by one after row b's id is written. The decode step uses it to leave its own
 * input for the next step in place (ids and positions in one device array), so a replay of its graph decodes
 * the next greedy token with nothing from the host: the pipelined greedy decode. */
size_t fk_argmax_work_bytes(int B);
/* The k largest of each bf16 logits row b < B (value descending, ties to the lower index, -0 as +0, NaN below
 * everything decide which; 1 <= k <= V): vals[b*k + j] (as float) and ids[b*k + j], j < k, those above the k-th
 * largest value in index order, then the ones equal to it in index order (deterministic, not sorted). Four
 * kernels of counting (topk.cu). work: fk_topk_work_bytes(B) bytes of device memory. */
size_t fk_topk_work_bytes(int B);
int fk_topk_bf16(const uint16_t *logits, int B, int V, int k, float *vals, int32_t *ids, void *work, cudaStream_t s);
int fk_argmax_bf16(const uint16_t *logits, int B, int V, int32_t *ids, int32_t *advance, void *work, cudaStream_t s);
/* out[i] = float(in[i]) for a bf16 array (logits for the host). */
int fk_bf16_to_f32(const uint16_t *in, size_t n, float *out, cudaStream_t s);

/* ---- bench.cu (used by frigg-bench) ---- */
/* Sum of every 16-byte word of buf (bytes % 16 == 0) into *sink: a pure-read bandwidth probe. */
int fk_read_probe(const void *buf, size_t bytes, unsigned *sink, cudaStream_t s);
/* An empty kernel: launch-overhead probe. */
int fk_empty(cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
