/* model.h — a loaded HRM-Text checkpoint: the config plus a typed view of every weight, bound by name
 * from the safetensors set (packed 131-tensor or split 259-tensor layout). Plain structs. */
#ifndef FRIGG_MODEL_H
#define FRIGG_MODEL_H

#include <stdint.h>

#include "config.h"
#include "safetensors.h"

/* Element types of weights and of the KV cache. Only BF16 is loaded and run today; a quantized type adds
 * its case to the loader, to frigg_cpu_linear / frigg_mat_row and to the CUDA launchers, nothing else. */
typedef enum { FRIGG_DT_BF16 = 0, FRIGG_DT_INT8, FRIGG_DT_INT4 } frigg_dtype;
const char *frigg_dtype_name(frigg_dtype t);

/* A row-major weight matrix [rows][cols] (the nn.Linear [out][in] layout) and what its bytes are.
 * BF16: w holds rows*cols bf16 values; scales NULL, group 0. A quantized dtype: w its packed values,
 * scales its bf16 scales ([rows] per output channel when group is 0, else [rows][cols/group]). The first
 * three fields stay first so that {w, rows, cols} initialises a bf16 matrix. */
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
/* Row r as floats (the values the matrix holds, dequantized for a quantized dtype); 0, or -1 with
 * frigg_error() for a dtype this build cannot read. The embedding lookup uses it. */
int frigg_mat_row(const frigg_mat *m, int r, float *out);


/* One decoder layer. In the packed layout gate/q/k/v are consecutive row blocks of gqkv_proj and
 * mlp_gate/up of gate_up_proj, so `gqkv_packed` / `gate_up_packed` are set too (else NULL). */
typedef struct {
    frigg_mat gate, q, k, v, o;
    frigg_mat mlp_gate, up, down;
    const uint16_t *gqkv_packed;     /* [4D][D] or NULL */
    const uint16_t *gate_up_packed;  /* [2I][D] or NULL */
} frigg_layer;

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
    void **owned;           /* buffers converted from F16/F32 or copied for alignment */
    int nowned;
    uint64_t n_params;
} frigg_model;

/* Load config.json and the safetensors in `dir`; every tensor is shape-checked, none may be missing,
 * extra or of another layout. NULL with frigg_error() on failure. */
frigg_model *frigg_model_load(const char *dir);
void frigg_model_free(frigg_model *m);
/* 0 when every matrix of the model has a dtype the engines run, else -1 with frigg_error() naming it. */
int frigg_model_check_dtypes(const frigg_model *m);

/* The stack that module run r uses (L runs, then one H run, per H cycle). */
static inline int frigg_run_stack(const frigg_config *c, int run) {
    return (run % (c->L_cycles + 1)) == c->L_cycles ? FRIGG_STACK_H : FRIGG_STACK_L;
}

/* Directory of the bundled default model: $FRIGG_MODEL, else golden/default next to the executable's
 * bin/, else the installed share/frigg/default. Returns a new string. */
char *frigg_default_model_dir(void);

#endif
