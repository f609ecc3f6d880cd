/* model.c — bind safetensors tensors to the model structs (MODEL.md §2). */
#include "model.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <limits.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/threadpool.h"
#include "base/util.h"
#include "gguf.h"

static void *own(frigg_model *m, size_t bytes) {
    void *buf = frigg_xmalloc(bytes ? bytes : 1);
    m->owned = realloc(m->owned, (m->nowned + 1) * sizeof *m->owned);
    if (!m->owned) abort();
    m->owned[m->nowned++] = buf;
    return buf;
}

static const uint16_t *own_bf16(frigg_model *m, const frigg_tensor *t, size_t count) {
    uint16_t *buf = own(m, count * 2);
    const unsigned char *src = t->data;
    for (size_t i = 0; i < count; i++) {
        if (t->dtype == FRIGG_ST_BF16) {
            memcpy(&buf[i], src + 2 * i, 2);
        } else if (t->dtype == FRIGG_ST_F16) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            buf[i] = frigg_f32_to_bf16(frigg_f16_to_f32(h));
        } else {
            float f;
            memcpy(&f, src + 4 * i, 4);
            buf[i] = frigg_f32_to_bf16(f);
        }
    }
    return buf;
}

/* Find a tensor by name and check its shape; NULL with frigg_error() when it is missing, bound already or
 * of another shape. */
static frigg_tensor *find_shaped(frigg_model *m, const char *name, int ndim, int64_t d0, int64_t d1) {
    frigg_tensor *t = frigg_st_find(&m->st, name);
    if (!t) {
        frigg_set_error("%s: missing tensor \"%s\"", m->dir, name);
        return NULL;
    }
    if (t->used) {
        frigg_set_error("%s: tensor \"%s\" bound twice", m->dir, name);
        return NULL;
    }
    int ok = t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1);
    if (!ok) {
        char got[96] = "", *p = got;
        for (int i = 0; i < t->ndim; i++) p += snprintf(p, got + sizeof got - p, "%s%lld", i ? "," : "", (long long)t->shape[i]);
        if (ndim == 1)
            frigg_set_error("%s: tensor \"%s\" has shape [%s], expected [%lld]", m->dir, name, got, (long long)d0);
        else
            frigg_set_error("%s: tensor \"%s\" has shape [%s], expected [%lld,%lld]", m->dir, name, got,
                            (long long)d0, (long long)d1);
        return NULL;
    }
    return t;
}

/* Find a tensor by name, check its shape, and return a bf16 view (in place when it is aligned BF16;
 * F16/F32 are rounded to bf16 once, at load — the engine computes in bf16 like HF's bf16 model). */
static const uint16_t *bind(frigg_model *m, const char *name, int ndim, int64_t d0, int64_t d1) {
    frigg_tensor *t = find_shaped(m, name, ndim, d0, d1);
    if (!t) return NULL;
    if (t->dtype != FRIGG_ST_BF16 && t->dtype != FRIGG_ST_F16 && t->dtype != FRIGG_ST_F32) {
        frigg_set_error("%s: tensor \"%s\" is %s, expected a float tensor (BF16, F16 or F32)", m->dir, name,
                        frigg_st_dtype_name(t->dtype));
        return NULL;
    }
    t->used = 1;
    size_t count = (size_t)d0 * (ndim == 1 ? 1 : (size_t)d1);
    if (t->dtype == FRIGG_ST_BF16 && ((uintptr_t)t->data & 1) == 0) return t->data;
    return own_bf16(m, t, count);
}

/* ---- compressed-tensors pack-quantized modules (config.h, model.h) ---- */

/* compressed-tensors' match_name: "re:<regex>" is Python's re.match (anchored at the start only), anything
 * else the exact name. 1 match, 0 none, -1 a regex that does not compile (frigg_error()). */
static int name_matches(const char *entry, const char *name) {
    if (strncmp(entry, "re:", 3)) return !strcmp(entry, name);
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(entry + 3), PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        frigg_set_error("quantization_config: target/ignore \"%s\" does not compile at offset %zu: %s", entry,
                        (size_t)off, (const char *)msg);
        return -1;
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)name, PCRE2_ZERO_TERMINATED, 0, PCRE2_ANCHORED, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

/* A name match, or compressed-tensors' _match_class on the module's class and its bases (torch.nn.Linear
 * or torch.nn.Embedding, then torch.nn.Module). */
static int entry_matches(const char *entry, const char *name, int embedding) {
    if (!strcmp(entry, embedding ? "Embedding" : "Linear") || !strcmp(entry, "Module")) return 1;
    return name_matches(entry, name);
}

/* The config group quantizing module `name` (compressed-tensors' is_match: targeted by a group and not
 * ignored): its index, -1 for none, -2 with frigg_error() on an error (two groups, a bad regex). */
static int quant_group_of(const frigg_model *m, const char *name, int embedding) {
    const frigg_quant_config *q = &m->quant;
    for (int i = 0; i < q->nignore; i++) {
        int r = entry_matches(q->ignore[i], name, embedding);
        if (r < 0) return -2;
        if (r) return -1;
    }
    int found = -1;
    for (int g = 0; g < q->ngroups; g++)
        for (int j = 0; j < q->groups[g].ntargets; j++) {
            int r = entry_matches(q->groups[g].targets[j], name, embedding);
            if (r < 0) return -2;
            if (!r) continue;
            if (found >= 0 && found != g) {
                frigg_set_error("%s: quantization_config: module %s is a target of config groups \"%s\" and \"%s\"",
                                m->dir, name, q->groups[found].name, q->groups[g].name);
                return -2;
            }
            found = g;
        }
    return found;
}

static int has_tensor(frigg_model *m, const char *module, const char *suffix) {
    char n[200];
    snprintf(n, sizeof n, "%s.%s", module, suffix);
    return frigg_st_find(&m->st, n) != NULL;
}

/* Read <module>.weight_packed / weight_scale / weight_shape of a [rows][cols] module of config group g; nparts > 1
 * for a packed module (gqkv_proj 4, gate_up_proj 2), whose weight_shape may list its parts (ctensors.h). */
static int bind_quant(frigg_model *m, frigg_mat *mat, const char *module, int rows, int cols, int nparts,
                      const frigg_quant_group *g) {
    char n[200];
    int bits = g->num_bits;
    if (g->group_size && cols % g->group_size) {
        frigg_set_error("%s: %s: group_size %d (config group \"%s\") does not divide its input dimension %d", m->dir,
                        module, g->group_size, g->name, cols);
        return -1;
    }
    int64_t words = ((int64_t)cols * bits + 31) / 32; /* pack_to_int32: ceil(cols * bits / 32) int32 per row */
    snprintf(n, sizeof n, "%s.weight_packed", module);
    frigg_tensor *tp = find_shaped(m, n, 2, rows, words);
    if (!tp) return -1;
    if (tp->dtype != FRIGG_ST_I32) {
        frigg_set_error("%s: tensor \"%s\" is %s, expected I32 (compressed-tensors packs into int32)", m->dir, n,
                        frigg_st_dtype_name(tp->dtype));
        return -1;
    }
    int ng = g->group_size ? cols / g->group_size : 1;
    snprintf(n, sizeof n, "%s.weight_scale", module);
    frigg_tensor *ts = find_shaped(m, n, 2, rows, ng);
    if (!ts) return -1;
    if (ts->dtype != FRIGG_ST_BF16) {
        frigg_set_error("%s: tensor \"%s\" is %s: only BF16 scales (a bf16 model's) are supported", m->dir, n,
                        frigg_st_dtype_name(ts->dtype));
        return -1;
    }
    /* {rows, cols}, or for a packed module its nparts shapes {rows / nparts, cols} one after another (what
     * transformers' save_pretrained writes for a compressed model loaded from the packed layout: ctensors.h). */
    snprintf(n, sizeof n, "%s.weight_shape", module);
    frigg_tensor *tsh = frigg_st_find(&m->st, n);
    int parts = nparts > 1 && nparts <= 4 && rows % nparts == 0 && tsh && tsh->ndim == 1 && tsh->shape[0] == 2 * nparts
                    ? nparts : 1;
    if (!(tsh = find_shaped(m, n, 1, 2 * parts, 0))) return -1;
    int64_t shp[8];
    for (int i = 0; i < 2 * parts; i++) {
        if (tsh->dtype == FRIGG_ST_I64) {
            memcpy(&shp[i], (const char *)tsh->data + 8 * i, 8);
        } else if (tsh->dtype == FRIGG_ST_I32) {
            int32_t v;
            memcpy(&v, (const char *)tsh->data + 4 * i, 4);
            shp[i] = v;
        } else {
            frigg_set_error("%s: tensor \"%s\" is %s, expected I64", m->dir, n, frigg_st_dtype_name(tsh->dtype));
            return -1;
        }
    }
    for (int i = 0; i < parts; i++)
        if (shp[2 * i] != rows / parts || shp[2 * i + 1] != cols) {
            if (parts == 1)
                frigg_set_error("%s: tensor \"%s\" says [%lld,%lld], expected [%d,%d]", m->dir, n, (long long)shp[0],
                                (long long)shp[1], rows, cols);
            else
                frigg_set_error("%s: tensor \"%s\" says [%lld,%lld] for part %d of %d, expected [%d,%d]", m->dir, n,
                                (long long)shp[2 * i], (long long)shp[2 * i + 1], i, parts, rows / parts, cols);
            return -1;
        }
    *mat = (frigg_mat){.rows = rows, .cols = cols, .dtype = bits == 8 ? FRIGG_DT_INT8 : FRIGG_DT_INT4,
                       .group = g->group_size};
    /* The packed words' bytes are model.h's layout (little-endian host, as safetensors is); a row is used in
     * place when it ends on a word boundary, else the rows are copied to the dense layout. */
    size_t rb = frigg_mat_row_bytes(mat), stride = (size_t)words * 4;
    if (rb == stride) {
        mat->w = tp->data;
    } else {
        unsigned char *dst = own(m, rb * rows);
        for (int r = 0; r < rows; r++) memcpy(dst + r * rb, (const unsigned char *)tp->data + r * stride, rb);
        mat->w = dst;
    }
    const uint16_t *sc = ts->data;
    if ((uintptr_t)ts->data & 1) {
        uint16_t *c = own(m, (size_t)rows * ng * 2);
        memcpy(c, ts->data, (size_t)rows * ng * 2);
        sc = c;
    }
    for (size_t i = 0; i < (size_t)rows * ng; i++)
        if ((sc[i] & 0x7f80) == 0x7f80) {
            frigg_set_error("%s: %s.weight_scale[%zu][%zu] is not finite", m->dir, module, i / ng, i % ng);
            return -1;
        }
    mat->scales = sc;
    tp->used = ts->used = tsh->used = 1;
    return 0;
}

/* Bind module `module` ([rows][cols]; an nn.Embedding when `embedding`) as the config and the tensors say:
 * BF16 from <module>.weight, or INT8/INT4 from its pack-quantized tensors. `alt` names the module's HF
 * in-memory parts when the checkpoint name differs (the packed layout's attn.gqkv_proj, attn.o_proj,
 * mlp.gate_up_proj): the config may be written against either naming; every name the config quantizes must
 * agree with the tensors, and a disagreement that the tensors cannot settle is refused. */
static int bind_bf16(frigg_model *m, frigg_mat *mat, const char *module, int rows, int cols) {
    char n[200];
    snprintf(n, sizeof n, "%s.weight", module);
    *mat = (frigg_mat){.w = bind(m, n, 2, rows, cols), .rows = rows, .cols = cols, .dtype = FRIGG_DT_BF16};
    return mat->w ? 0 : -1;
}

static int bind_module(frigg_model *m, frigg_mat *mat, const char *module, int rows, int cols, int embedding,
                       const char *const *alt, int nalt) {
    int packed = has_tensor(m, module, "weight_packed");
    if (has_tensor(m, module, "weight_zero_point")) {
        frigg_set_error("%s: %s.weight_zero_point: zero points (asymmetric quantization) are not supported", m->dir,
                        module);
        return -1;
    }
    if (has_tensor(m, module, "weight_g_idx")) {
        frigg_set_error("%s: %s.weight_g_idx: activation reordering (g_idx) is not supported", m->dir, module);
        return -1;
    }
    if (packed && has_tensor(m, module, "weight")) {
        frigg_set_error("%s: both %s.weight and %s.weight_packed are present", m->dir, module, module);
        return -1;
    }
    if (!m->quant.ngroups) {
        if (packed) {
            frigg_set_error("%s: tensor \"%s.weight_packed\" but config.json has no quantization_config", m->dir,
                            module);
            return -1;
        }
        return bind_bf16(m, mat, module, rows, cols);
    }
    /* The decision of each name: a group index or -1 (not quantized). */
    int dec[8], nd = 0, want_q = -1, any_none = 0;
    for (int i = -1; i < nalt && nd < 8; i++) {
        int d = quant_group_of(m, i < 0 ? module : alt[i], embedding);
        if (d == -2) return -1;
        dec[nd++] = d;
    }
    for (int i = 0; i < nd; i++) {
        if (dec[i] < 0) {
            any_none = 1;
        } else if (want_q >= 0 && dec[i] != want_q) {
            frigg_set_error("%s: quantization_config puts %s in config group \"%s\" under one name and \"%s\" under "
                            "another (%s)", m->dir, module, m->quant.groups[want_q].name, m->quant.groups[dec[i]].name,
                            i ? alt[i - 1] : module);
            return -1;
        } else {
            want_q = dec[i];
        }
    }
    if (packed) {
        if (want_q < 0) {
            frigg_set_error("%s: tensor \"%s.weight_packed\" but quantization_config does not quantize %s (not a "
                            "target of any config group, or ignored)", m->dir, module, module);
            return -1;
        }
        return bind_quant(m, mat, module, rows, cols, nalt > 1 ? nalt : 1, &m->quant.groups[want_q]);
    }
    if (want_q >= 0 && !any_none) {
        if (has_tensor(m, module, "weight"))
            frigg_set_error("%s: quantization_config quantizes %s (config group \"%s\") but the checkpoint holds %s.weight "
                            "unquantized", m->dir, module, m->quant.groups[want_q].name, module);
        else
            frigg_set_error("%s: missing tensor \"%s.weight_packed\" (quantization_config quantizes %s, config group "
                            "\"%s\")", m->dir, module, module, m->quant.groups[want_q].name);
        return -1;
    }
    return bind_bf16(m, mat, module, rows, cols);
}

frigg_mat frigg_mat_sub_rows(const frigg_mat *m, int r0, int n) {
    frigg_mat r = *m;
    r.rows = n;
    r.w = (const unsigned char *)m->w + (size_t)r0 * frigg_mat_row_bytes(m);
    if (m->scales) r.scales = m->scales + (size_t)r0 * frigg_mat_ngroups(m);
    return r;
}

static int bind_layer(frigg_model *m, int stack, int i) {
    const frigg_config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size;
    frigg_layer *L = &m->stack[stack][i];
    const char *sn = stack == FRIGG_STACK_L ? "L_module" : "H_module";
    char n[160], a[5][160];
    const char *alt[5] = {a[0], a[1], a[2], a[3], a[4]};
    if (m->layout == FRIGG_LAYOUT_PACKED) {
        /* HF's in-memory parts of each packed module (MODEL.md §2.1, transformers' conversion mapping). */
        static const char *const ap[] = {"gate_proj", "q_proj", "k_proj", "v_proj"};
        for (int j = 0; j < 4; j++) snprintf(a[j], sizeof a[j], "model.%s.layers.%d.self_attn.%s", sn, i, ap[j]);
        snprintf(n, sizeof n, "model.%s.layers.%d.attn.gqkv_proj", sn, i);
        frigg_mat g;
        if (bind_module(m, &g, n, 4 * D, D, 0, alt, 4)) return -1;
        /* Row blocks gate, q, k, v (MODEL.md §2.1, trap T1), each with its scale rows. */
        L->gate = frigg_mat_sub_rows(&g, 0, D);
        L->q = frigg_mat_sub_rows(&g, D, D);
        L->k = frigg_mat_sub_rows(&g, 2 * D, D);
        L->v = frigg_mat_sub_rows(&g, 3 * D, D);
        L->gqkv_packed = frigg_mat_bf16(&g);
        snprintf(a[0], sizeof a[0], "model.%s.layers.%d.self_attn.o_proj", sn, i);
        snprintf(n, sizeof n, "model.%s.layers.%d.attn.o_proj", sn, i);
        if (bind_module(m, &L->o, n, D, D, 0, alt, 1)) return -1;
        snprintf(a[0], sizeof a[0], "model.%s.layers.%d.mlp.gate_proj", sn, i);
        snprintf(a[1], sizeof a[1], "model.%s.layers.%d.mlp.up_proj", sn, i);
        snprintf(n, sizeof n, "model.%s.layers.%d.mlp.gate_up_proj", sn, i);
        frigg_mat gu;
        if (bind_module(m, &gu, n, 2 * I, D, 0, alt, 2)) return -1;
        L->mlp_gate = frigg_mat_sub_rows(&gu, 0, I); /* SiLU side first */
        L->up = frigg_mat_sub_rows(&gu, I, I);
        L->gate_up_packed = frigg_mat_bf16(&gu);
    } else {
        static const char *const an[] = {"gate_proj", "q_proj", "k_proj", "v_proj", "o_proj"};
        frigg_mat *am[] = {&L->gate, &L->q, &L->k, &L->v, &L->o};
        for (int j = 0; j < 5; j++) {
            snprintf(n, sizeof n, "model.%s.layers.%d.self_attn.%s", sn, i, an[j]);
            if (bind_module(m, am[j], n, D, D, 0, NULL, 0)) return -1;
        }
        snprintf(n, sizeof n, "model.%s.layers.%d.mlp.gate_proj", sn, i);
        if (bind_module(m, &L->mlp_gate, n, I, D, 0, NULL, 0)) return -1;
        snprintf(n, sizeof n, "model.%s.layers.%d.mlp.up_proj", sn, i);
        if (bind_module(m, &L->up, n, I, D, 0, NULL, 0)) return -1;
    }
    snprintf(n, sizeof n, "model.%s.layers.%d.mlp.down_proj", sn, i);
    return bind_module(m, &L->down, n, D, I, 0, NULL, 0);
}

/* ---- GGUF (gguf.h): the file's metadata as the config, its tensors under their HF split names ----
 * The mapping becomes the set's one file (frigg_st_close unmaps it). BF16, F16 and F32 tensors are used as they are
 * (the binder rounds F16/F32 to bf16 as for safetensors); a quantized ggml type is dequantized once, here, to f32
 * exactly as gguf-py's gguf.quants.dequantize computes it, then rounded to bf16 (round to nearest even), the
 * weight type the engines run. Q8_0 is not mapped onto frigg's grouped INT8 because its fp16 scales are not bf16
 * values: rounding them would change the weights. */
typedef struct {
    const frigg_gguf_tensor *t;
    uint16_t *dst;
    float *scratch; /* one row of f32 per thread */
    size_t cols, row_bytes;
    uint32_t block_bytes;
} dq_job;

/* Rows [r0, r1) of a quantized tensor to bf16 (the type was checked, so the decoding cannot fail). */
static void dq_rows(void *ctx, int r0, int r1, int thread) {
    dq_job *j = ctx;
    float *row = j->scratch + (size_t)thread * (j->cols ? j->cols : 1);
    for (size_t r = (size_t)r0; r < (size_t)r1; r++) {
        frigg_gguf_dequant_f32(j->t->type, (const unsigned char *)j->t->data + r * j->row_bytes, j->cols, row);
        for (size_t k = 0; k < j->cols; k++) j->dst[r * j->cols + k] = frigg_f32_to_bf16(row[k]);
    }
}

static int open_gguf(frigg_model *m, const char *path) {
    frigg_gguf g;
    if (frigg_gguf_open(&g, path)) {
        frigg_gguf_close(&g);
        return -1;
    }
    int rc = -1;
    float *scratch = NULL;
    frigg_pool *pool = NULL; /* made at the first quantized tensor: their rows are dequantized in parallel */
    if (frigg_gguf_hrm_config(&g, &m->cfg, &m->config_json) || frigg_gguf_hrm_check_complete(&g, &m->cfg)) goto out;
    frigg_st_set *st = &m->st;
    memset(st, 0, sizeof *st);
    st->files = frigg_xcalloc(1, sizeof *st->files);
    st->files[0] = (frigg_st_file){.path = frigg_xstrdup(path), .map = (void *)g.map, .size = g.size};
    st->nfiles = 1;
    if (!g.mapped) st->files[0].map = NULL; /* an empty file: nothing to unmap */
    frigg_gguf_release_map(&g);
    st->tensors = frigg_xcalloc(g.ntensors ? (size_t)g.ntensors : 1, sizeof *st->tensors);
    for (int64_t i = 0; i < g.ntensors; i++) {
        const frigg_gguf_tensor *t = &g.tensors[i];
        char hf[200];
        if (frigg_gguf_hrm_tensor(&g, &m->cfg, t, hf, sizeof hf)) goto out;
        frigg_tensor ft = {.ndim = t->ndim, .file = 0};
        for (int d = 0; d < t->ndim; d++) ft.shape[d] = (int64_t)t->ne[t->ndim - 1 - d]; /* ne[0] is the last dim */
        if (t->type == FRIGG_GGML_BF16 || t->type == FRIGG_GGML_F16 || t->type == FRIGG_GGML_F32) {
            ft.dtype = t->type == FRIGG_GGML_BF16 ? FRIGG_ST_BF16 : t->type == FRIGG_GGML_F16 ? FRIGG_ST_F16 : FRIGG_ST_F32;
            ft.data = t->data;
            ft.nbytes = t->nbytes;
        } else {
            if (!frigg_gguf_dequant_supported(t->type)) {
                const char *tn = frigg_ggml_type_name(t->type);
                frigg_set_error("%s: tensor \"%s\" (info at offset %zu) is %s, a ggml type frigg does not dequantize "
                                "(F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)", path,
                                t->name, t->info_offset, tn ? tn : "?");
                goto out;
            }
            if (!pool && !(pool = frigg_pool_create(0))) goto out;
            uint16_t *dst = own(m, (size_t)t->nelem * 2);
            dq_job j = {.t = t, .dst = dst, .cols = (size_t)t->ne[0]};
            uint32_t be;
            frigg_ggml_type_block(t->type, &be, &j.block_bytes);
            j.row_bytes = j.cols / be * j.block_bytes;
            size_t rows = (size_t)(t->nelem / (t->ne[0] ? t->ne[0] : 1));
            if (rows > INT32_MAX) {
                frigg_set_error("%s: tensor \"%s\": %zu rows", path, t->name, rows);
                goto out;
            }
            j.scratch = scratch = frigg_xrealloc(scratch, (size_t)frigg_pool_size(pool) * (j.cols ? j.cols : 1) * 4);
            frigg_pool_run(pool, (int)rows, dq_rows, &j);
            ft.dtype = FRIGG_ST_BF16;
            ft.data = dst;
            ft.nbytes = (size_t)t->nelem * 2;
        }
        ft.name = frigg_xstrdup(hf);
        st->tensors[st->ntensors++] = ft;
    }
    rc = frigg_st_finish(st);
out:
    free(scratch);
    if (pool) frigg_pool_destroy(pool);
    frigg_gguf_close(&g);
    return rc;
}

int frigg_model_path_is_gguf(const char *path) { return frigg_gguf_is_file(path); }

char *frigg_model_side_path(const char *model_path, const char *name) {
    if (!frigg_gguf_is_file(model_path)) return frigg_path_join(model_path, name);
    const char *slash = strrchr(model_path, '/');
    if (!slash) return frigg_xstrdup(name);
    char *dir = frigg_xstrdup(model_path);
    dir[slash - model_path + (slash == model_path)] = 0; /* "/x.gguf" -> "/" */
    char *p = frigg_path_join(dir, name);
    free(dir);
    return p;
}

char *frigg_model_no_tokenizer(const char *model_path) {
    char *side = frigg_model_side_path(model_path, "tokenizer.json"), msg[2048];
    if (frigg_gguf_is_file(model_path))
        snprintf(msg, sizeof msg, "%s has no tokenizer.json beside it: frigg reads the tokenizer from tokenizer.json, "
                 "not from the GGUF's tokenizer.ggml.* arrays; put the model's tokenizer.json at %s", model_path, side);
    else
        snprintf(msg, sizeof msg, "%s has no tokenizer.json", model_path);
    free(side);
    return frigg_xstrdup(msg);
}

int frigg_model_config_load(const char *model_path, frigg_config *c) {
    if (!frigg_gguf_is_file(model_path)) {
        char *p = frigg_path_join(model_path, "config.json");
        int rc = frigg_config_load(c, p);
        free(p);
        return rc;
    }
    frigg_gguf g;
    int rc = frigg_gguf_open(&g, model_path) || frigg_gguf_hrm_config(&g, c, NULL) ? -1 : 0;
    frigg_gguf_close(&g);
    return rc;
}

char *frigg_model_config_text(const frigg_model *m, size_t *len) {
    if (m->config_json) {
        if (len) *len = strlen(m->config_json);
        return frigg_xstrdup(m->config_json);
    }
    char *cp = frigg_path_join(m->dir, "config.json");
    size_t l = 0;
    char *t = frigg_read_file(cp, &l);
    free(cp);
    if (len) *len = l;
    return t;
}

frigg_model *frigg_model_load(const char *dir) {
    frigg_model *m = frigg_xcalloc(1, sizeof *m);
    m->dir = frigg_xstrdup(dir);
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISREG(sb.st_mode) && !frigg_gguf_is_file(dir)) {
        frigg_set_error("%s is a file but not a GGUF (no \"GGUF\" magic): --model takes a model directory or a .gguf "
                        "file", dir);
        frigg_model_free(m);
        return NULL;
    }
    if (frigg_gguf_is_file(dir)) {
        if (open_gguf(m, dir)) {
            frigg_model_free(m);
            return NULL;
        }
        goto bind_all;
    }
    char *cp = frigg_path_join(dir, "config.json");
    int rc = frigg_config_load(&m->cfg, cp);
    free(cp);
    if (!rc && m->cfg.quantized) { /* checked by frigg_config_load; parsed again here to bind by it */
        cp = frigg_path_join(dir, "config.json");
        size_t len;
        char *text = frigg_read_file(cp, &len);
        rc = text ? frigg_quant_config_parse(&m->quant, text, len, cp) : -1;
        free(text);
        free(cp);
    }
    if (rc || frigg_st_open_dir(&m->st, dir)) {
        frigg_model_free(m);
        return NULL;
    }
bind_all:;
    const frigg_config *c = &m->cfg;
    int D = c->hidden_size, V = c->vocab_size;
    /* Layout: decided by layer 0 of the L stack, then enforced for every tensor. */
    if (frigg_st_find(&m->st, "model.L_module.layers.0.attn.gqkv_proj.weight") ||
        frigg_st_find(&m->st, "model.L_module.layers.0.attn.gqkv_proj.weight_packed"))
        m->layout = FRIGG_LAYOUT_PACKED;
    else if (frigg_st_find(&m->st, "model.L_module.layers.0.self_attn.q_proj.weight") ||
             frigg_st_find(&m->st, "model.L_module.layers.0.self_attn.q_proj.weight_packed"))
        m->layout = FRIGG_LAYOUT_SPLIT;
    else {
        frigg_set_error("%s: neither the packed (attn.gqkv_proj) nor the split (self_attn.q_proj) layout: no "
                        "tensor model.L_module.layers.0.attn.gqkv_proj.weight or ...self_attn.q_proj.weight", dir);
        frigg_model_free(m);
        return NULL;
    }
    if (bind_module(m, &m->embed, "model.embed_tokens", V, D, 1, NULL, 0) ||
        bind_module(m, &m->lm_head, "lm_head", V, D, 0, NULL, 0) ||
        !(m->z_L_init = bind(m, "model.z_L_init", 1, D, 0)))
        goto fail;
    for (int s = 0; s < 2; s++) {
        m->stack[s] = frigg_xcalloc(c->layers_per_stack, sizeof(frigg_layer));
        for (int i = 0; i < c->layers_per_stack; i++)
            if (bind_layer(m, s, i)) goto fail;
    }
    for (int i = 0; i < m->st.ntensors; i++)
        if (!m->st.tensors[i].used) {
            frigg_set_error("%s: unexpected tensor \"%s\" (not part of a %s HRM-Text checkpoint with %d layers per "
                            "stack)", dir, m->st.tensors[i].name,
                            m->layout == FRIGG_LAYOUT_PACKED ? "packed" : "split", c->layers_per_stack);
            goto fail;
        }
    uint64_t P = 5ull * D * D + 3ull * c->intermediate_size * D;
    m->n_params = 2ull * V * D + 2ull * c->layers_per_stack * P + D;
    return m;
fail:
    frigg_model_free(m);
    return NULL;
}

void frigg_model_free(frigg_model *m) {
    if (!m) return;
    for (int s = 0; s < 2; s++) free(m->stack[s]);
    for (int i = 0; i < m->nowned; i++) free(m->owned[i]);
    free(m->owned);
    frigg_quant_config_free(&m->quant);
    frigg_st_close(&m->st);
    free(m->config_json);
    free(m->dir);
    free(m);
}

char *frigg_bundled_path(const char *name) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0; /* exe = .../bin */
            static const char *const rel[] = {"/../golden/default", "/../share/frigg/default", "/../../golden/default"};
            for (int i = 0; i < 3; i++) {
                char buf[PATH_MAX + 64];
                snprintf(buf, sizeof buf, "%s%s/%s", exe, rel[i], name);
                if (frigg_file_exists(buf)) {
                    char *real = realpath(buf, NULL);
                    return real ? real : frigg_xstrdup(buf);
                }
            }
        }
    }
    return frigg_path_join("golden/default", name);
}

char *frigg_default_model_dir(void) {
    const char *env = getenv("FRIGG_MODEL");
    if (env && *env) return frigg_xstrdup(env);
    char *cfg = frigg_bundled_path("config.json");
    cfg[strlen(cfg) - strlen("/config.json")] = 0;
    return cfg;
}

const char *frigg_dtype_name(frigg_dtype t) {
    switch (t) {
    case FRIGG_DT_BF16: return "bf16";
    case FRIGG_DT_INT8: return "int8";
    case FRIGG_DT_INT4: return "int4";
    }
    return "unknown";
}

int frigg_mat_row(const frigg_mat *m, int r, float *out) {
    if (m->dtype == FRIGG_DT_INT8 || m->dtype == FRIGG_DT_INT4) {
        /* w = bf16(q * scale): q * scale is exact in fp32 (|q| <= 128 times a bf16 scale: at most 16
         * significant bits), then rounded once to bf16 — compressed-tensors' dequantize,
         * x_q.to(scale.dtype) * scale, in the scale's bf16. The one dequantization in frigg (the CPU linear
         * and the embedding lookup read rows through here). */
        const unsigned char *row = (const unsigned char *)m->w + (size_t)r * frigg_mat_row_bytes(m);
        const uint16_t *sc = m->scales + (size_t)r * frigg_mat_ngroups(m);
        int G = m->group ? m->group : m->cols;
        for (int g0 = 0; g0 < m->cols; g0 += G) {
            float s = frigg_bf16_to_f32(sc[g0 / G]);
            if (m->dtype == FRIGG_DT_INT8) {
                for (int i = g0; i < g0 + G; i++) out[i] = frigg_round_bf16((float)((int)row[i] - 128) * s);
            } else {
                float lut[16]; /* the 16 values a nibble of this group can stand for */
                for (int u = 0; u < 16; u++) lut[u] = frigg_round_bf16((float)(u - 8) * s);
                for (int i = g0; i < g0 + G; i++) out[i] = lut[(row[i >> 1] >> ((i & 1) * 4)) & 15];
            }
        }
        return 0;
    }
    const uint16_t *w = frigg_mat_bf16(m);
    if (!w) {
        frigg_set_error("a %s weight matrix cannot be read by this build", frigg_dtype_name(m->dtype));
        return -1;
    }
    for (int i = 0; i < m->cols; i++) out[i] = frigg_bf16_to_f32(w[(size_t)r * m->cols + i]);
    return 0;
}

static int check_mat(const frigg_mat *m, const char *what) {
    if (m->dtype == FRIGG_DT_BF16) return 0;
    if ((m->dtype == FRIGG_DT_INT8 || m->dtype == FRIGG_DT_INT4) && m->w && m->scales && m->group >= 0 &&
        (!m->group || m->cols % m->group == 0))
        return 0;
    if (m->dtype == FRIGG_DT_INT8 || m->dtype == FRIGG_DT_INT4)
        frigg_set_error("%s: a %s weight matrix without valid scales (group %d, %d columns)", what,
                        frigg_dtype_name(m->dtype), m->group, m->cols);
    else
        frigg_set_error("%s: %s weights are not supported by this build's engines", what, frigg_dtype_name(m->dtype));
    return -1;
}

double frigg_model_quantized_bytes(const frigg_model *m) {
    double q = m->lm_head.dtype != FRIGG_DT_BF16 ? frigg_mat_bytes(&m->lm_head) : 0;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < m->cfg.layers_per_stack; i++) {
            const frigg_mat *all[FRIGG_LAYER_MATS];
            frigg_layer_mats(&m->stack[s][i], all);
            for (int j = 0; j < FRIGG_LAYER_MATS; j++)
                if (all[j]->dtype != FRIGG_DT_BF16) q += frigg_mat_bytes(all[j]);
        }
    return q;
}

int frigg_model_check_dtypes(const frigg_model *m) {
    if (check_mat(&m->embed, "embed_tokens") || check_mat(&m->lm_head, "lm_head")) return -1;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < m->cfg.layers_per_stack; i++) {
            const frigg_layer *L = &m->stack[s][i];
            const frigg_mat *all[FRIGG_LAYER_MATS];
            frigg_layer_mats(L, all);
            for (int j = 0; j < FRIGG_LAYER_MATS; j++)
                if (check_mat(all[j], s ? "H stack" : "L stack")) return -1;
        }
    return 0;
}
