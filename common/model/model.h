/* model.h — a loaded HRM-Text checkpoint: the config plus a typed view of every weight, bound by name
 * from the safetensors set (packed 131-tensor or split 259-tensor layout). Plain structs. */
#ifndef FRIGG_MODEL_H
#define FRIGG_MODEL_H

#include <stdint.h>

#include "config.h"
#include "safetensors.h"

/* Element types of weights and of the KV cache. Weights: BF16, and the compressed-tensors pack-quantized
 * INT8 / INT4 (symmetric, per output channel or group-wise along the input dimension), which the loader,
 * frigg_cpu_linear and frigg_mat_row read; the CUDA engine refuses INT8/INT4 by name. The KV cache: BF16. */
typedef enum { FRIGG_DT_BF16 = 0, FRIGG_DT_INT8, FRIGG_DT_INT4 } frigg_dtype;
const char *frigg_dtype_name(frigg_dtype t);

/* A row-major weight matrix [rows][cols] (the nn.Linear [out][in] layout) and what its bytes are.
 * The first three fields stay first so that {w, rows, cols} initialises a bf16 matrix.
 *
 * BF16: w holds rows*cols bf16 values; scales NULL, group 0.
 *
 * INT8 / INT4 (compressed-tensors "pack-quantized", weight-only, symmetric): w holds bytes, row r starting
 * at byte r * frigg_mat_row_bytes(m), values stored unsigned with the offset 2^(bits-1), exactly the bytes
 * of compressed-tensors' int32 words on a little-endian host (pack_to_int32 puts value i of a row at bit
 * i*bits of the row's words, value + 2^(bits-1)):
 *   INT8: row_bytes = cols; q[r][i] = w[r*cols + i] - 128, in [-128, 127] (vLLM's "uint8b128");
 *   INT4: row_bytes = ceil(cols/2); value i of a row in byte i/2, the low nibble for even i, the high nibble
 *         for odd i; q = nibble - 8, in [-8, 7] ("uint4b8"). An odd row's last high nibble is padding.
 * The loader uses weight_packed in place (zero copy) when a packed row is a whole number of bytes of this
 * layout (cols*bits a multiple of 32); otherwise it copies rows into this dense layout (owned by the model).
 * scales: bf16, [rows][ngroups] row-major: group 0 ("channel") one scale per row (ngroups 1), else
 * group = group_size and ngroups = cols / group (group divides cols), scale of q[r][i] is
 * scales[r*ngroups + i/group]. The weight the engines compute with is w[r][i] = bf16(q[r][i] * scale)
 * (rounded once to bf16, as compressed-tensors' dequantize computes x_q.to(scale.dtype) * scale in the
 * scale's bf16): frigg_mat_weight below. */
typedef struct {
    const void *w;
    int rows, cols;
    frigg_dtype dtype;
    const uint16_t *scales;
    int group;
} frigg_mat;

/* The bf16 values of a BF16 matrix (NULL for any other dtype). */
static inline const uint16_t *frigg_mat_bf16(const frigg_mat *m) {
    return m->dtype == FRIGG_DT_BF16 ? (const uint16_t *)m->w : (const uint16_t *)0;
}
/* Bytes of one row of w: BF16 2*cols, INT8 cols, INT4 ceil(cols/2). */
static inline size_t frigg_mat_row_bytes(const frigg_mat *m) {
    return m->dtype == FRIGG_DT_INT4 ? ((size_t)m->cols + 1) / 2 : m->dtype == FRIGG_DT_INT8 ? (size_t)m->cols
                                                                                            : 2 * (size_t)m->cols;
}
/* Scales per row of a quantized matrix: 1 (channel) or cols / group. */
static inline int frigg_mat_ngroups(const frigg_mat *m) { return m->group ? m->cols / m->group : 1; }
/* Bytes of the whole matrix as stored: its values (bf16, or packed int8 / int4) and, quantized, its bf16 scales. */
static inline double frigg_mat_bytes(const frigg_mat *m) {
    double v = (double)frigg_mat_row_bytes(m) * m->rows;
    return m->dtype == FRIGG_DT_BF16 ? v : v + 2.0 * m->rows * frigg_mat_ngroups(m);
}
/* The integer value q[r][i] of an INT8/INT4 matrix (see the layout above). */
static inline int frigg_mat_q(const frigg_mat *m, int r, int i) {
    const unsigned char *row = (const unsigned char *)m->w + (size_t)r * frigg_mat_row_bytes(m);
    if (m->dtype == FRIGG_DT_INT8) return (int)row[i] - 128;
    return (int)((row[i >> 1] >> ((i & 1) * 4)) & 15) - 8;
}
/* Row r as floats (the values the matrix holds: bf16(q * scale) for a quantized dtype); 0, or -1 with
 * frigg_error() for a dtype this build cannot read. The embedding lookup uses it. */
int frigg_mat_row(const frigg_mat *m, int r, float *out);
/* Rows [r0, r0+n) of m as the matrix they are (a view: the same bytes and scales). */
frigg_mat frigg_mat_sub_rows(const frigg_mat *m, int r0, int n);


/* One decoder layer. In the packed layout gate/q/k/v are consecutive row blocks of gqkv_proj and
 * mlp_gate/up of gate_up_proj (for a quantized checkpoint too: each part is its row block of the packed
 * values with its scale rows), and for a BF16 packed checkpoint `gqkv_packed` / `gate_up_packed` are set
 * too (else NULL). */
typedef struct {
    frigg_mat gate, q, k, v, o;
    frigg_mat mlp_gate, up, down;
    const uint16_t *gqkv_packed;     /* [4D][D] or NULL */
    const uint16_t *gate_up_packed;  /* [2I][D] or NULL */
} frigg_layer;

/* A layer's eight matrices in checkpoint order: gate, q, k, v, o, mlp gate, up, down. */
#define FRIGG_LAYER_MATS 8
static inline void frigg_layer_mats(const frigg_layer *L, const frigg_mat *out[FRIGG_LAYER_MATS]) {
    out[0] = &L->gate, out[1] = &L->q, out[2] = &L->k, out[3] = &L->v;
    out[4] = &L->o, out[5] = &L->mlp_gate, out[6] = &L->up, out[7] = &L->down;
}

enum { FRIGG_STACK_L = 0, FRIGG_STACK_H = 1 };
typedef enum { FRIGG_LAYOUT_PACKED, FRIGG_LAYOUT_SPLIT } frigg_layout;

typedef struct {
    frigg_config cfg;
    char *dir;
    frigg_st_set st;
    frigg_layout layout;
    frigg_mat embed;        /* [V][D] */
    frigg_mat lm_head;      /* [V][D] */
    const uint16_t *z_L_init; /* [D] */
    frigg_layer *stack[2];  /* [FRIGG_STACK_L|H][layers_per_stack] */
    void **owned;           /* buffers converted from F16/F32, copied for alignment or unpacked */
    int nowned;
    frigg_quant_config quant; /* the config's quantization_config (ngroups 0 when it has none) */
    uint64_t n_params;
    char *config_json;        /* a GGUF's metadata as config.json (gguf.h); NULL for a model directory */
} frigg_model;

/* Load config.json and the safetensors in `dir`; every tensor is shape-checked, none may be missing,
 * extra or of another layout. With a quantization_config (config.h: compressed-tensors pack-quantized), a
 * module the config quantizes is read from <module>.weight_packed (I32 [rows][ceil(cols*bits/32)]),
 * <module>.weight_scale (BF16 [rows][1] or [rows][cols/group_size]) and <module>.weight_shape (I64 [2] =
 * rows, cols) into an INT8/INT4 frigg_mat; any other module from <module>.weight. Zero points, g_idx and
 * anything the config and the tensors disagree on are refused by name. NULL with frigg_error() on failure. */
frigg_model *frigg_model_load(const char *dir);
/* `dir` may instead name a GGUF file (detected by its "GGUF" magic, whatever its name): an hrm_text GGUF as
 * llama.cpp's convert_hf_to_gguf.py writes it (gguf.h), its metadata mapped onto the config by config.json's rules
 * and its tensors bound in the split layout (F32/F16/BF16 as for safetensors; Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the
 * K-quants Q2_K..Q6_K dequantized at load to f32, bit-identical to gguf-py's gguf.quants.dequantize, then rounded
 * to bf16). */
int frigg_model_path_is_gguf(const char *path);
/* NAME beside a model: <dir>/NAME for a model directory, NAME in the GGUF file's directory for a GGUF (where
 * tokenizer.json is looked for). A new string. */
char *frigg_model_side_path(const char *model_path, const char *name);
/* The model's config.json text: the directory's config.json, or a GGUF's metadata as config.json. A new string
 * (*len its length; len may be NULL), or NULL with frigg_error(). */
char *frigg_model_config_text(const frigg_model *m, size_t *len);
/* The config of a model directory (its config.json) or of a GGUF (its metadata), without loading the weights.
 * 0, or -1 with frigg_error(). */
int frigg_model_config_load(const char *model_path, frigg_config *c);
/* Why a model has no tokenizer, for an error message: "<dir> has no tokenizer.json", or for a GGUF where to put
 * its tokenizer.json. A new string. */
char *frigg_model_no_tokenizer(const char *model_path);
void frigg_model_free(frigg_model *m);
/* 0 when every matrix of the model has a dtype the CPU engine runs (BF16, INT8, INT4, well formed), else -1
 * with frigg_error() naming it. The CUDA engine refuses INT8/INT4 itself, by name. */
int frigg_model_check_dtypes(const frigg_model *m);
/* The stored bytes (frigg_mat_bytes) of m's quantized layer matrices and lm_head; 0 for a bf16 checkpoint. */
double frigg_model_quantized_bytes(const frigg_model *m);

/* The stack that module run r uses (L runs, then one H run, per H cycle). */
static inline int frigg_run_stack(const frigg_config *c, int run) {
    return (run % (c->L_cycles + 1)) == c->L_cycles ? FRIGG_STACK_H : FRIGG_STACK_L;
}

/* NAME in the bundled model's directory (golden/default beside or above the executable's bin/, or
 * share/frigg/default of an install), else golden/default/NAME relative to the current directory: a new string. */
char *frigg_bundled_path(const char *name);
/* Directory of the bundled default model: $FRIGG_MODEL, else the directory frigg_bundled_path finds its
 * config.json in. Returns a new string. */
char *frigg_default_model_dir(void);

#endif
