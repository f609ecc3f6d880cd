/* model_writer.h — test support: write small HRM-Text checkpoints (config.json + safetensors) from
 * C, so loader and engine tests need no Python. Weights come from a seeded generator. */
#ifndef FRIGG_TEST_MODEL_WRITER_H
#define FRIGG_TEST_MODEL_WRITER_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int vocab, hidden, heads, head_dim, inter, layers, H_cycles, L_cycles, max_pos;
    int split;          /* 0 packed (131-style names), 1 split (259-style names) */
    int f32;            /* store F32 (bf16-representable values) instead of BF16 */
    int shards;         /* 0/1: one model.safetensors; 2: two shards + index.json */
    uint64_t seed;
    float lm_scale;     /* multiplies lm_head so greedy decoding is decisive */
    /* compressed-tensors pack-quantized (common/model/ctensors.h): the decoder-layer linears with quant_bits (0:
     * BF16, 4 or 8) and quant_group (0: strategy "channel", else "group" of that many inputs); embed_tokens
     * and lm_head with quant_io_bits / quant_io_group (0 bits: BF16, and lm_head is in "ignore"). q and the
     * scales follow compressed-tensors' own minmax rule (tm_quantize). quant_dequant: write instead the
     * BF16 checkpoint of the dequantized weights bf16(q * scale), no quantization_config (the reference).
     * quant_json: written as the quantization_config instead of the generated one (refusal tests). */
    int quant_bits, quant_group, quant_io_bits, quant_io_group, quant_dequant;
    const char *quant_json;
} tm_spec;

tm_spec tm_default(void);
/* A safetensors tensor to write: name, shape, and bf16 payload. */
typedef struct {
    char name[160];
    int ndim;
    int64_t shape[2];
    uint16_t *data;     /* bf16 (when dtype is NULL) */
    const char *dtype;  /* NULL: BF16 from data (F32 with tm_write_safetensors' f32); else the safetensors dtype
                           ("I32", "I64", "BF16", ...) of the raw bytes, written as they are */
    void *raw;
    size_t raw_bytes;
} tm_tensor;

/* Build the tensor list of a model (caller frees with tm_free_tensors). */
int tm_make_tensors(const tm_spec *s, tm_tensor **out);
void tm_free_tensors(tm_tensor *t, int n);
/* compressed-tensors' minmax quantization of a [rows][cols] bf16 matrix, symmetric, bits 4 or 8, group 0
 * (channel) or dividing cols: per row and group, a = max |w|, s = bf16(a / (2^bits - 1) * 2) (a / 7.5 or
 * a / 127.5, calculate_qparams), a zero s replaced by bf16's eps 2^-7; q = rne(clamp(bf16(w / s), -2^(bits-1),
 * 2^(bits-1) - 1)) (_quantize: the quotient in the weight's bf16, torch.round half to even). q[rows*cols],
 * scales[rows*ngroups] (bf16 bits). */
void tm_quantize(const uint16_t *w, int rows, int cols, int bits, int group, int8_t *q, uint16_t *scales);
/* pack_to_int32 (packed_dim 1): rows of q into rows * ceil(cols*bits/32) little-endian int32 words. */
void tm_pack(const int8_t *q, int rows, int cols, int bits, int32_t *out);
/* The spec's quantized form of a tensor list from tm_make_tensors (in place; returns the new count):
 * each quantized M.weight becomes M.weight_packed (I32), M.weight_scale (BF16), M.weight_shape (I64), or
 * with quant_dequant its bf16(q * scale) values. */
int tm_quantize_tensors(const tm_spec *s, tm_tensor **t, int n);
/* The quantization_config JSON object the spec's checkpoint carries (a new string; NULL when none). */
char *tm_quant_config_json(const tm_spec *s);
/* Write tensors as one safetensors file; f32 widens bf16 to F32. Returns 0 on success. */
int tm_write_safetensors(const char *path, const tm_tensor *t, int n, int f32);
/* Write config.json (+ weights) for spec into dir (created). extra_json is spliced into the config
 * object (e.g. "\"foo\": 1," ) or NULL. */
int tm_write_model(const char *dir, const tm_spec *s, const char *extra_json);
int tm_write_config(const char *dir, const tm_spec *s, const char *extra_json);
/* mkdtemp under $TMPDIR; returns a new string. */
char *tm_tempdir(void);
void tm_rmrf(const char *dir);

#endif
