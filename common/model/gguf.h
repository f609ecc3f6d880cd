/* gguf.h — read-only GGUF (versions 2 and 3) over one mmap: the header, every metadata key/value (all thirteen
 * value types, arrays and arrays of arrays), the tensor infos, general.alignment and the data section. Nothing is
 * copied but the keys' and tensors' names; values and tensor data are used in place. Every length, count and
 * offset is checked against the file before it is used: a truncated, misaligned or lying file gets an error
 * naming the key or tensor and the file offset, never a read outside the mapping.
 *
 * Format (little-endian; ggml/docs/gguf.md): "GGUF", u32 version, u64 tensor_count, u64 kv_count; kv_count
 * times {string key, u32 type, value}; tensor_count times {string name, u32 n_dims, u64 ne[n_dims], u32 ggml
 * type, u64 offset}; padding to the alignment; the data section. A string is u64 length + bytes (no NUL); an
 * array is u32 element type, u64 count, the elements. Tensor offsets are relative to the data section and
 * multiples of the alignment (general.alignment, a u32 power of two; 32 when absent). ne[0] is the innermost
 * (fastest-varying) dimension: a PyTorch [rows][cols] matrix is ne = {cols, rows}.
 *
 * The element-wise decoding of the quantized ggml types lives beside it: frigg_gguf_dequant_f32. */
#ifndef FRIGG_GGUF_H
#define FRIGG_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef enum {
    FRIGG_GGUF_UINT8 = 0, FRIGG_GGUF_INT8 = 1, FRIGG_GGUF_UINT16 = 2, FRIGG_GGUF_INT16 = 3,
    FRIGG_GGUF_UINT32 = 4, FRIGG_GGUF_INT32 = 5, FRIGG_GGUF_FLOAT32 = 6, FRIGG_GGUF_BOOL = 7,
    FRIGG_GGUF_STRING = 8, FRIGG_GGUF_ARRAY = 9, FRIGG_GGUF_UINT64 = 10, FRIGG_GGUF_INT64 = 11,
    FRIGG_GGUF_FLOAT64 = 12
} frigg_gguf_vtype;
const char *frigg_gguf_vtype_name(int t);

/* ggml tensor types (ggml.h's enum ggml_type; the numbers are the file format's). */
enum {
    FRIGG_GGML_F32 = 0, FRIGG_GGML_F16 = 1, FRIGG_GGML_Q4_0 = 2, FRIGG_GGML_Q4_1 = 3, FRIGG_GGML_Q5_0 = 6,
    FRIGG_GGML_Q5_1 = 7, FRIGG_GGML_Q8_0 = 8, FRIGG_GGML_Q8_1 = 9, FRIGG_GGML_Q2_K = 10, FRIGG_GGML_Q3_K = 11,
    FRIGG_GGML_Q4_K = 12, FRIGG_GGML_Q5_K = 13, FRIGG_GGML_Q6_K = 14, FRIGG_GGML_Q8_K = 15, FRIGG_GGML_BF16 = 30
};
/* The type's name ("Q4_K"), or NULL for a number ggml does not define. */
const char *frigg_ggml_type_name(uint32_t type);
/* Elements per block and bytes per block of a ggml type; 0 when the type is unknown. */
int frigg_ggml_type_block(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);

#define FRIGG_GGUF_MAXDIM 4

typedef struct {
    char *key;               /* NUL-terminated copy */
    frigg_gguf_vtype type;
    size_t offset;           /* file offset of the value (of an array: of its element type field) */
    /* Scalars: the value, widened. */
    uint64_t u;              /* unsigned integers and bool */
    int64_t i;               /* signed integers */
    double f;                /* FLOAT32 / FLOAT64 */
    /* STRING: its bytes in the mapping (not NUL-terminated; may hold NULs). */
    const char *str;
    uint64_t len;
    /* ARRAY: element type, count, and where the first element starts in the mapping. Arrays of arrays are
     * parsed and checked but read only through frigg_gguf_arr_next. */
    frigg_gguf_vtype atype;
    uint64_t n;
    const unsigned char *adata;
} frigg_gguf_kv;

typedef struct {
    char *name;              /* NUL-terminated copy */
    int ndim;
    uint64_t ne[FRIGG_GGUF_MAXDIM]; /* ne[0] innermost; unused dims 1 */
    uint32_t type;           /* ggml type */
    uint64_t offset;         /* relative to the data section */
    size_t info_offset;      /* file offset of the tensor's info record (for messages) */
    uint64_t nelem;
    size_t nbytes;
    const void *data;        /* in the mapping */
} frigg_gguf_tensor;

typedef struct {
    char *path;
    const unsigned char *map;
    size_t size;
    int mapped;              /* 1: map is this object's mmap (frigg_gguf_close unmaps it) */
    uint32_t version;
    frigg_gguf_kv *kv;
    int64_t nkv;
    frigg_gguf_tensor *tensors;
    int64_t ntensors;
    uint64_t alignment;
    size_t data_offset;      /* file offset of the data section */
} frigg_gguf;

/* 1 when buf starts with the GGUF magic. */
int frigg_gguf_magic(const void *buf, size_t size);
/* 1 when the file at path is a regular file starting with "GGUF" (0 for a directory, a missing file, or another
 * file). */
int frigg_gguf_is_file(const char *path);

/* Parse a GGUF image already in memory (the fuzz target's entry; frigg_gguf_open maps a file and calls it).
 * Values and tensor data point into buf. 0, or -1 with frigg_error() naming the path, the key or tensor and the
 * file offset. Free with frigg_gguf_close in both cases. */
int frigg_gguf_parse(frigg_gguf *g, const void *buf, size_t size, const char *path);
int frigg_gguf_open(frigg_gguf *g, const char *path);
void frigg_gguf_close(frigg_gguf *g);
/* Hand the mapping over (the caller munmaps map/size); g keeps pointing into it until closed. */
void frigg_gguf_release_map(frigg_gguf *g);

const frigg_gguf_kv *frigg_gguf_find_kv(const frigg_gguf *g, const char *key);
const frigg_gguf_tensor *frigg_gguf_find_tensor(const frigg_gguf *g, const char *name);

/* Array elements, one after another: *p starts at kv->adata and is advanced past each element read. For a STRING
 * array, *str / *len receive the element; for a numeric one, *u / *i / *f (the widened value, as frigg_gguf_kv's
 * scalars); for an array of arrays the nested array is skipped. Only valid on an array the parser accepted (its
 * extent is checked then). Any out pointer may be NULL. */
void frigg_gguf_arr_next(const frigg_gguf_kv *kv, const unsigned char **p, const char **str, uint64_t *len,
                         uint64_t *u, int64_t *i, double *f);

/* The f32 values of n consecutive elements of a tensor of ggml type `type` starting at element 0 of `src`
 * (n a multiple of the type's block size): F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K,
 * Q6_K. The arithmetic is gguf-py's (gguf.quants.dequantize, numpy float32: every product and sum rounded to
 * fp32 in its order, no fused multiply-add), so the values are bit-identical to it. 0, or -1 with frigg_error()
 * for a type it cannot decode. */
int frigg_gguf_dequant_f32(uint32_t type, const void *src, size_t n, float *out);
/* 1 when frigg_gguf_dequant_f32 decodes ggml type `type`. */
int frigg_gguf_dequant_supported(uint32_t type);

/* ---- hrm_text (gguf_hrm.c: llama.cpp's converter's keys and tensor names) ---- */

/* The config.json (text, a new string) that an hrm_text GGUF's metadata stands for; NULL with frigg_error() naming
 * the key that cannot be mapped (a key outside general.*, tokenizer.*, quantize.* and the known hrm_text.* ones;
 * a missing or mistyped one; a head layout or slot count HRM-Text does not have). */
char *frigg_gguf_hrm_config_json(const frigg_gguf *g);
/* That config, parsed by frigg_config_parse (so config.json's defaults and range rules apply); *json (may be NULL)
 * receives its text on success. 0, or -1 with frigg_error(). */
int frigg_gguf_hrm_config(const frigg_gguf *g, frigg_config *c, char **json);
/* The HF name (split layout: self_attn.{gate,q,k,v,o}_proj, mlp.{gate,up,down}_proj) of a GGUF tensor, its shape
 * checked against the config; 0, or -1 with frigg_error() naming the tensor. */
int frigg_gguf_hrm_tensor(const frigg_gguf *g, const frigg_config *c, const frigg_gguf_tensor *t, char *hf, size_t n);
/* 0 when every tensor an hrm_text model needs is present (by its GGUF name), else -1 naming the first missing. */
int frigg_gguf_hrm_check_complete(const frigg_gguf *g, const frigg_config *c);

#endif
