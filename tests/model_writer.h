/* model_writer.h — test support: write small HRM-Text checkpoints (config.json + safetensors) from
 * C, so loader and engine tests need no Python. Weights come from a seeded generator. */
#ifndef FRIGG_TEST_MODEL_WRITER_H
#define FRIGG_TEST_MODEL_WRITER_H

#include <stdint.h>

typedef struct {
    int vocab, hidden, heads, head_dim, inter, layers, H_cycles, L_cycles, max_pos;
    int split;          /* 0 packed (131-style names), 1 split (259-style names) */
    int f32;            /* store F32 (bf16-representable values) instead of BF16 */
    int shards;         /* 0/1: one model.safetensors; 2: two shards + index.json */
    uint64_t seed;
    float lm_scale;     /* multiplies lm_head so greedy decoding is decisive */
} tm_spec;

tm_spec tm_default(void);
/* A safetensors tensor to write: name, shape, and bf16 payload. */
typedef struct {
    char name[160];
    int ndim;
    int64_t shape[2];
    uint16_t *data;     /* bf16 */
} tm_tensor;

/* Build the tensor list of a model (caller frees with tm_free_tensors). */
int tm_make_tensors(const tm_spec *s, tm_tensor **out);
void tm_free_tensors(tm_tensor *t, int n);
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
