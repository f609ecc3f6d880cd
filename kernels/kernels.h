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

#include "model/model.h" /* frigg_mat: the weight descriptors the launchers take (device pointers in w); C linkage */

/* The kernels' context: the device's properties (SM count, PDL and cluster support, how many blocks of each
 * kernel fit an SM) and the kernel choices below, owned by one engine. fk_ctx_create works on the current
 * device (the caller has made it current) and sets the function attributes the kernels need there; every
 * launcher then runs on that device with that context. Nothing is process-wide, so engines on different
 * devices, or with different choices, work side by side. NULL with frigg_error() on failure. */
typedef struct fk_ctx fk_ctx;
fk_ctx *fk_ctx_create(void);
void fk_ctx_free(fk_ctx *k);

/* ---- norm.cu ---- */
/* zH[t] = bf16(embed[ids[t]] * scale); zL[t] = z_L_init; x[t] = bf16(zL[t] + zH[t]) (first injection). */
int fk_embed(const fk_ctx *kc, const frigg_mat *embed, const uint16_t *z_L_init, const int32_t *ids, int T, int D, float scale,
             uint16_t *zH, uint16_t *zL, uint16_t *x, cudaStream_t s);
/* out = rmsnorm(in) row by row (weightless, fp32 inside, eps inside the rsqrt). in may equal out. */
int fk_rmsnorm(const fk_ctx *kc, const uint16_t *in, uint16_t *out, int T, int D, float eps, cudaStream_t s);
/* h = bf16(h + y); a = rmsnorm(h): the residual add of a sub-block fused with the next pre-norm. */
int fk_add_rmsnorm(const fk_ctx *kc, uint16_t *h, const uint16_t *y, uint16_t *a, int T, int D, float eps, cudaStream_t s);
/* End of a module run: state = rmsnorm(x) (the stack's final_norm, which replaces the state); then, when
 * other != NULL, x = bf16(state + other), the injection add that feeds the next run. */
int fk_run_end(const fk_ctx *kc, uint16_t *x, uint16_t *state, const uint16_t *other, int T, int D, float eps, cudaStream_t s);
/* out[t][i] = bf16(bf16(silu(gu[t][i])) * gu[t][I + i]) for the packed gate_up output [T][2I]. */
int fk_swiglu(const fk_ctx *kc, const uint16_t *gu, int T, int I, uint16_t *out, cudaStream_t s);
/* on != 0: rmsnorm, add_rmsnorm, run_end, swiglu and rope_kv take their general paths (one block per row or
 * element-wise accesses, which serve shapes and alignments the 16-byte paths do not) even where the 16-byte
 * paths apply, so tests/test_cuda_prefill.c checks both on one shape. Off by default. */
void fk_ctx_set_eltwise_general(fk_ctx *kc, int on);

/* ---- rope.cu ---- */
/* From the gqkv projection rows [T][4D] (gate, q, k, v): q_out[t] = rope(q), and the slot's cache gets
 * K = rope(k), V = v at position row_pos[t] of sequence row_seq[t]. The cache of one slot of sequence q
 * starts at k_slot + q * seq_stride (elements) and is laid out [head][max_ctx][head_dim].
 * cos/sin: bf16 tables [max_ctx][head_dim]. */
int fk_rope_kv(const fk_ctx *kc, const uint16_t *gqkv, int T, int H, int hd, const int32_t *row_seq, const int32_t *row_pos,
               const uint16_t *cos_t, const uint16_t *sin_t, uint16_t *q_out, uint16_t *k_slot, uint16_t *v_slot,
               long long seq_stride, int max_ctx, cudaStream_t s);
/* The same rotation (q and k at position row_pos[t], the same bits) with K and V written as rows instead of into
 * the cache: row t's rope(k) at k_out + t * kv_stride and its v at v_out + t * kv_stride, heads side by side
 * ([H][hd]). The bf16 staging that fk_kv_write_i8 quantizes into the int8 cache. q_out as fk_rope_kv. */
int fk_rope_rows(const fk_ctx *kc, const uint16_t *gqkv, int T, int H, int hd, const int32_t *row_pos,
                 const uint16_t *cos_t, const uint16_t *sin_t, uint16_t *q_out, uint16_t *k_out, uint16_t *v_out,
                 int kv_stride, cudaStream_t s);

/* ---- attention.cu ---- */
/* Prefill attention over keys [0, T) of one sequence (cache slot pointers already offset to it), with the
 * PrefixLM mask: key j is visible from query i when j <= i, or when both are < prefix_len. fp32 scores,
 * online fp32 softmax, P·V with P rounded to bf16 (the default, as HF; or kept to ~fp32 precision as a hi+lo bf16
 * split, see below), output rounded to bf16, then
 * the gate epilogue y = bf16(bf16(sigmoid(g)) * o) with g read from gqkv rows (stride 4D). */
int fk_attn_prefill(const fk_ctx *kc, const uint16_t *q, const uint16_t *k_seq, const uint16_t *v_seq, const uint16_t *gqkv, int T,
                    int H, int hd, int max_ctx, int prefix_len, uint16_t *y, cudaStream_t s);
/* The prefill attention of up to FK_PREFILL_GROUP_MAX prompts in one launch: prompt i is rows [row0[i], row0[i] +
 * T[i]) of q, gqkv and y (the buffers as fk_attn_prefill takes them, not offset), its cache at k + kv_off[i] and
 * v + kv_off[i] (elements: its sequence's offset), its prefix P[i]. Each prompt's result is fk_attn_prefill's for
 * it alone, bit for bit (tests/test_cuda_prefill.c); one launch instead of n, so that a group of short prompts
 * fills the GPU (a 512-token prompt alone is 8 x 12 blocks for 132 SMs). */
#define FK_PREFILL_GROUP_MAX 8
typedef struct {
    int n;
    int row0[FK_PREFILL_GROUP_MAX], T[FK_PREFILL_GROUP_MAX], P[FK_PREFILL_GROUP_MAX];
    long long kv_off[FK_PREFILL_GROUP_MAX];
} fk_prefill_group;
int fk_attn_prefill_group(const fk_ctx *kc, const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *gqkv,
                          const fk_prefill_group *grp, int H, int hd, int max_ctx, uint16_t *y, cudaStream_t s);
/* How P·V is computed: both kernels are register-tile mma.sync, 4 warps, tested against the same reference
 * (tests/test_cuda_prefill.c) and timed by kernels/dev/prefill.cu. mma-bf16p (the default) rounds P to bf16
 * before P·V, as HF does (eager casts the softmax to bf16 before P·V; SDPA/flash keep P in bf16): o moves by at
 * most 2^-9 · sum_j p_j |v_j| / sum_j p_j against fp32 P (the bound in tests/test_cuda_prefill.c). mma splits
 * P into bf16 hi + lo and tracks the fp32-P CPU engine to ~1e-5. An unknown value fails the set call. */
enum {
    FK_PREFILL_MMA_BF16P = 0, /* "mma-bf16p": P rounded to bf16 (the default) */
    FK_PREFILL_MMA = 1,       /* "mma": P as bf16 hi + lo */
    FK_PREFILL_NIMPL = 2
};
int fk_ctx_set_prefill_impl(fk_ctx *kc, int impl);
int fk_ctx_prefill_impl(const fk_ctx *kc);
const char *fk_prefill_impl_name(int impl); /* "mma-bf16p", "mma", "?" */
/* Decode attention: row b (its query in q[b]) attends causally to positions [0, row_pos[b]] of sequence
 * row_seq[b]; split-K over key chunks (partials in `work`, see fk_attn_decode_work_floats); the last block of
 * each (row, head) combines them with the gate epilogue into y[b]. `counters`: B*H ints, zero before the
 * first call, left zero after each. Reads lengths on the device, so it is CUDA-graph safe. One kernel.
 * A row's split depends only on its length, H and max_ctx, so batched rows equal single-row calls bit for bit.
 * Launched with PDL, it reads row_seq, row_pos and the cached keys/values at positions < row_pos[b] BEFORE
 * waiting for the previous kernel (only q, the gate and position row_pos[b] itself after): the kernel right
 * before it may write those three (fk_gemv_qkv does), not the older cache entries or row_seq/row_pos (kernels
 * further back are complete: every frigg kernel lets its dependents start only after its own wait). */
int fk_attn_decode(const fk_ctx *kc, const uint16_t *q, const uint16_t *k_slot, const uint16_t *v_slot, long long seq_stride,
                   const int32_t *row_seq, const int32_t *row_pos, const uint16_t *gqkv, int B, int H, int hd,
                   int max_ctx, float *work, int *counters, uint16_t *y, cudaStream_t s);
size_t fk_attn_decode_work_floats(int B, int H, int hd, int max_ctx);
/* fk_attn_decode_write: fk_rope_kv then fk_attn_decode in one kernel, with the bits of the two — from the step's gqkv
 * rows [B][4D] as projected (gate, q, k, v; not rotated): row b's q and k rotated at row_pos[b] (cos_t/sin_t
 * [pos][hd]), its K and V stored into position row_pos[b] of sequence row_seq[b] of the bf16 cache, then the
 * attention with the output gate into y. head_dim 32, 64 or 128; the rows' sequences must differ (a row writes what
 * only it reads); 16-byte aligned cache, gqkv and tables; the same work, counters, merge modes and PDL rule as
 * fk_attn_decode_i8. */
int fk_attn_decode_write(const fk_ctx *kc, const uint16_t *gqkv, const uint16_t *cos_t, const uint16_t *sin_t,
                         uint16_t *k_slot, uint16_t *v_slot, long long seq_stride, const int32_t *row_seq,
                         const int32_t *row_pos, int B, int H, int hd, int max_ctx, float *work, int *counters, uint16_t *y,
                         cudaStream_t s);
/* ---- attention_decode_i8.cu: the int8 KV cache ---- */
/* The cache: int8 [seq][head][max_ctx][hd] (seq_stride elements per sequence) and one fp32 scale per (seq,
 * head, position), [seq][head][max_ctx] (seq_stride / hd per sequence), for K and for V. head_dim a multiple
 * of 32 up to 128.
 * fk_kv_write_i8: row b's K and V (bf16, k + b * kv_stride and v + b * kv_stride, head h at h * hd; K after
 * RoPE) into position row_pos[b] of sequence row_seq[b], each (row, head) quantized exactly as
 * frigg_kv_quantize (cpu_ops.h) does, bit for bit.
 * fk_attn_decode_i8: a decode step's write and attention on that cache, from the step's gqkv rows [B][4D] as
 * projected (gate, q, k, v; not rotated): row b's q and k rotated at row_pos[b] (cos_t/sin_t [pos][hd]; the bits
 * fk_rope_rows gives), its K and V quantized into position row_pos[b] of sequence row_seq[b] (the bits
 * fk_kv_write_i8 writes from those rows), then row b attends to positions [0, row_pos[b]] with the output gate
 * into y [B][H*hd]: the CPU op's arithmetic within tolerance. head_dim 32, 64 or 128; the rows' sequences must
 * differ (a row writes what only it reads). The same kernel as fk_attn_decode (attention_decode.cu), so the
 * same merge modes, `work` (fk_attn_decode_work_floats) and `counters` ([B][H] ints, zero between calls and left
 * at zero), and the same PDL rule: only the gqkv rows may be written by the kernel in front. */
int fk_kv_write_i8(const fk_ctx *kc, const uint16_t *k, const uint16_t *v, int kv_stride, const int32_t *row_seq,
                   const int32_t *row_pos, int B, int H, int hd, int max_ctx, long long seq_stride, int8_t *k8, int8_t *v8,
                   float *k_scale, float *v_scale, cudaStream_t s);
int fk_attn_decode_i8(const fk_ctx *kc, const uint16_t *gqkv, const uint16_t *cos_t, const uint16_t *sin_t, int8_t *k8,
                      int8_t *v8, float *k_scale, float *v_scale, long long seq_stride, const int32_t *row_seq,
                      const int32_t *row_pos, int B, int H, int hd, int max_ctx, float *work, int *counters, uint16_t *y,
                      cudaStream_t s);
/* fk_kv_dequant_i8: positions [0, T) of one sequence's int8 K and V (k8, v8 [H][max_ctx][hd] and their scales
 * [H][max_ctx], pointers already offset to the sequence and slot) as bf16 into k_out and v_out, laid out as the
 * bf16 cache ([H][max_ctx][hd]), each value bf16(q * scale): the fp32 product frigg_kv_dequant defines, rounded
 * once to bf16, for fk_attn_prefill to read what the int8 cache holds (the prompt's own rows included). */
int fk_kv_dequant_i8(const fk_ctx *kc, const int8_t *k8, const int8_t *v8, const float *k_scale, const float *v_scale,
                     int T, int H, int hd, int max_ctx, uint16_t *k_out, uint16_t *v_out, cudaStream_t s);
/* How fk_attn_decode merges a row's split partials (attention_decode.cu says why): FK_ATTND_SPLIT through
 * `work` + an atomic counter, FK_ATTND_CLUSTER through a thread-block cluster's distributed shared memory
 * (sm_90; at most 16 splits per row), FK_ATTND_AUTO (the default): cluster wherever the device runs the
 * kernel's 16-block clusters, else split, fixed per device. spb: splits per block, 0 = chosen from the batch
 * size, else 1..32 (for timing and tests). A bad value fails the set call (cluster where the device has no
 * clusters too). fk_ctx_attn_decode_impl returns the mode that runs (auto resolved). Each mode keeps batched
 * rows bit-identical to single rows; split and cluster differ from each other within tolerance (different
 * split counts). */
enum { FK_ATTND_SPLIT = 0, FK_ATTND_CLUSTER = 1, FK_ATTND_AUTO = 2 };
int fk_ctx_set_attn_decode_impl(fk_ctx *kc, int impl, int spb);
/* The splits x heads a row's split count aims at (its splits: that over H, at most 16 in cluster mode and 32 in
 * split mode, each of at least 32 keys, 64 for int8), for tuning runs (kernels/dev/attn_decode_i8.cu); 0 = the
 * shipped count, else 1..4096. It changes a row's split layout, so the bits (within tolerance), never whether a
 * batched row equals itself alone. */
int fk_ctx_set_attn_decode_split_blocks(fk_ctx *kc, int n);
int fk_ctx_attn_decode_impl(const fk_ctx *kc);

/* ---- gemv.cu (decode: 1..16 rows per pass over the weights) ---- */
#define FK_GEMV_MAX_ROWS 16 /* rows of one fk_gemv / fk_gemv_qkv call */
#define FK_GEMV_SIMT_ROWS 8 /* rows of one CUDA-core GEMV launch; the tensor-core kernel's lower mma half */
enum {
    FK_GEMV_STORE = 0,   /* out[b][o] = bf16(acc) */
    FK_GEMV_RESID = 1,   /* out[b][o] = bf16(out[b][o] + bf16(acc)): residual add in the epilogue */
    FK_GEMV_SWIGLU = 2,  /* W is gate_up [2I][K]: out[b][i] = bf16(bf16(silu(bf16(acc_i))) * bf16(acc_{I+i})) */
    FK_GEMV_QKV = 3,     /* only through fk_gemv_qkv */
};
/* y = W·x for B rows (1..FK_GEMV_MAX_ROWS). Past 8 rows the tensor-core kernel takes all B in one pass (under
 * tc and auto, K <= 4096); the CUDA-core kernel (simt, or K > 4096) runs them 8 at a time, the same bits.
 * W: an [O][K] matrix descriptor (frigg_mat, w in device memory), K % 8 == 0: BF16,
 * or INT8 / INT4 (gemv_q.cu, below); a dtype without a kernel is an error that names it. x [B][K], 16-byte
 * aligned. norm_in: x is first replaced by rmsnorm(x)
 * (each block normalises the B rows itself, so no separate norm kernel is needed).
 * Implementations (fk_ctx_set_gemv_impl): one warp per row on CUDA cores (gemv.cu), tensor cores (gemv_tc.cu),
 * or auto (the default): per batch size and shape class, whichever the H200 measured faster (the table in
 * gemv.cu). simt and tc each keep batched decode bit-identical to single-row decode; under auto a row's
 * result depends on how many rows share the pass (another kernel, another summation order), so batched
 * equals single only within rounding. All are tested against the same reference. */
enum { FK_GEMV_IMPL_SIMT = 0, FK_GEMV_IMPL_TC = 1, FK_GEMV_IMPL_AUTO = 2 };
int fk_ctx_set_gemv_impl(fk_ctx *kc, int impl); /* -1 with frigg_error() for an unknown impl */
int fk_ctx_gemv_impl(const fk_ctx *kc);
const char *fk_gemv_impl_name(int impl); /* "simt", "tc", "auto", "?" */
/* Rows of auto's table for tuning runs (kernels/dev/gemv.cu): "down=sttttttt,o_proj=tttttttt", NAME one of
 * gqkv, gate_up, o_proj, down, lm_head, then a letter per batch size 1..8, s (simt) or t (tc). 0, or -1 with
 * frigg_error() for a malformed value (the table is then unchanged). */
int fk_ctx_set_gemv_auto(fk_ctx *kc, const char *rows);
/* What auto runs for this call (FK_GEMV_IMPL_SIMT or FK_GEMV_IMPL_TC): a test hook. */
int fk_ctx_gemv_auto_impl(const fk_ctx *kc, int B, int O, int K, int epi);
/* The same for INT8 / INT4 weights (the table's q. rows; gemv_q.cu). */
int fk_ctx_gemv_q_auto_impl(const fk_ctx *kc, int B, int O, int K, int epi);
int fk_gemv(const fk_ctx *kc, const frigg_mat *W, const uint16_t *x, int B, int norm_in, float eps, int epi,
            uint16_t *out, cudaStream_t s);
/* The tensor-core kernel runs a persistent grid (each block walks tiles); this caps its number of blocks
 * (0: as many as fit on the GPU at once). A tuning and test hook: results do not depend on it. */
void fk_ctx_set_gemv_tc_max_blocks(fk_ctx *kc, int blocks);
/* The quantized CUDA-core GEMV's shape (gemv_q.cu): output units per warp at batch 1 and warps per block, each
 * 1, 2 or 4, or 0 for the kernel's default. A tuning and test hook: results do not depend on it. 0, or -1
 * with frigg_error() for another value. */
int fk_ctx_set_gemv_q_simt(fk_ctx *kc, int units, int warps);

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
int fk_gemv_qkv(const fk_ctx *kc, const frigg_mat *W, const uint16_t *x, int B, float eps, uint16_t *gqkv,
                const fk_qkv_epi *qa, cudaStream_t s); /* W: [4D][D] */

/* ---- gemv_q.cu (quantized weights: what fk_gemv and fk_gemv_qkv run for INT8 / INT4 descriptors) ----
 * W as model.h lays it out and the loader binds it, uploaded byte for byte: w the packed values (INT8 a byte
 * per weight, row r at r*K bytes; INT4 two per byte, row r at r*K/2 bytes, value i in the low nibble of byte
 * i/2 for even i, the high for odd), offset-binary (q = byte - 128, nibble - 8); scales the bf16
 * [rows][ngroups] (group 0: one per row; else group % 8 == 0, dividing K). w 8-byte (INT8) / 4-byte (INT4)
 * aligned. Anything else (no scales, a group that is not a multiple of 8, K % 8) is an error naming it.
 * Rounding, the CPU op's (frigg_cpu_linear): w = bf16(q * scale) (the exact fp32 product rounded once),
 * products and sums in fp32, one bf16 rounding of the result, then the epilogue as for bf16 weights. Each
 * output row is summed in the order of the bf16 GEMV of the same implementation (simt: gemv.cu's CUDA-core
 * kernel; tc: gemv_tc.cu's), so a quantized GEMV equals bit for bit that GEMV on the dequantized bf16 matrix
 * (fk_dequant_bf16's output), for every B; auto takes the q. rows of gemv.cu's table. fk_gemv: epilogues
 * STORE, RESID, SWIGLU (gate_up [2I][K] as the bf16 path), with or without norm_in. fk_gemv_qkv: the fused
 * epilogue of the bf16 path (RMSNorm, RoPE, k and v into the cache), one kernel.
 *
 * fk_dequant_bf16: rows [r0, r0 + n) of a quantized W into out [n][K] bf16 (device, 16-byte aligned):
 * out = bf16(q * scale), bit for bit frigg_mat_row's values. Waits for the previous kernel (PDL) before its
 * first write, so out may be scratch that the kernel in front still reads. The prefill GEMM on quantized
 * weights (cuda_gemm.h: frigg_cuda_gemm_dq) is this, then cuBLAS on the bf16 rows. */
int fk_dequant_bf16(const fk_ctx *kc, const frigg_mat *W, int r0, int n, uint16_t *out, cudaStream_t s);

/* ---- lmhead.cu ---- */
/* ids[b] = argmax over V of the bf16 logits row b (lowest index on ties, as HF's argmax; NaN never wins; a row
 * of nothing but -inf/NaN gives 0, as frigg_argmax). Two kernels: slices of each row over many blocks, then
 * the best slice. work: fk_argmax_work_bytes(B) bytes of device memory, 16-byte aligned. vals: NULL, or B
 * floats, row b's largest value (-inf for a row of -inf/NaN: a caller checks it finite, as frigg_argmax's callers
 * check the row's value at its index). advance: NULL, or B positions, each incremented by one after row b's id
 * is written. The decode step uses it to leave its own
 * input for the next step in place (ids and positions in one device array), so a replay of its graph decodes
 * the next greedy token with nothing from the host: the pipelined greedy decode. */
size_t fk_argmax_work_bytes(int B);
/* The k largest of each bf16 logits row b < B (value descending, ties to the lower index, -0 as +0, NaN below
 * everything decide which; 1 <= k <= V): vals[b*k + j] (as float) and ids[b*k + j], j < k, those above the k-th
 * largest value in index order, then the ones equal to it in index order (deterministic, not sorted). Four
 * kernels of counting (topk.cu). work: fk_topk_work_bytes(B) bytes of device memory. */
size_t fk_topk_work_bytes(int B);
int fk_topk_bf16(const fk_ctx *kc, const uint16_t *logits, int B, int V, int k, float *vals, int32_t *ids, void *work, cudaStream_t s);
int fk_argmax_bf16(const fk_ctx *kc, const uint16_t *logits, int B, int V, int32_t *ids, int32_t *advance, float *vals, void *work,
                   cudaStream_t s);
/* The same over the ids a mask allows (structured output): mask[b * ((V + 31) / 32) + i / 32] bit i % 32 set where
 * id i of row b may win (device memory, written before the launch); the others are not compared, so ids[b] is the
 * best allowed id, lowest on ties, and 0 where no allowed value beats -inf (vals[b] then -inf). mask NULL: every id,
 * fk_argmax_bf16. */
int fk_argmax_bf16_masked(const fk_ctx *kc, const uint16_t *logits, int B, int V, const uint32_t *mask, int32_t *ids,
                          int32_t *advance, float *vals, void *work, cudaStream_t s);
/* ---- sample.cu ---- */
/* A sampled decode row's parameters (FRIGG_WANT_SAMPLE): on 0 leaves the row's id as it is. */
typedef struct {
    double u;          /* [0, 1) */
    float temperature; /* finite, > 0 */
    int32_t on;
} fk_draw;
/* For each row b with params[b].on: the draw frigg_draw_row (sampler.h) makes from bf16 logits row b with its
 * temperature and u over the ids mask allows (the layout of fk_argmax_bf16_masked; NULL: every id), into
 * answers[b] (-1 where a value of the row is not finite or nothing is allowed) and ids[b] (the id, 0 for -1: the
 * next step's input). Rows with on 0: answers[b] = ids[b]. params: device memory, B entries. The sums run in a
 * fixed order, so a row's id does not depend on the other rows; it equals frigg_draw_row's but where u lies within
 * rounding (about 1e-15) of a boundary between two ids. work: fk_sample_work_bytes(B) bytes, 16-byte aligned. */
size_t fk_sample_work_bytes(int B);
int fk_sample_bf16(const fk_ctx *kc, const uint16_t *logits, int B, int V, const uint32_t *mask, const fk_draw *params,
                   int32_t *ids, int32_t *answers, void *work, cudaStream_t s);

/* out[i] = float(in[i]) for a bf16 array (logits for the host). */
int fk_bf16_to_f32(const fk_ctx *kc, const uint16_t *in, size_t n, float *out, cudaStream_t s);

/* ---- bench.cu (used by frigg-bench) ---- */
/* A pure-read bandwidth probe: every 16-byte word of buf (bytes % 16 == 0) is loaded and folded (xor) into a
 * value per thread, which is added to *sink only in the rare case it equals a fixed constant, so the loads
 * cannot be optimised away while nothing is written. */
int fk_read_probe(const fk_ctx *kc, const void *buf, size_t bytes, unsigned *sink, cudaStream_t s);
/* An empty kernel: launch-overhead probe. */
int fk_empty(const fk_ctx *kc, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
