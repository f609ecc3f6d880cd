/* model.c — bind safetensors tensors to the model structs (MODEL.md §2). */
#include "model.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static const uint16_t *own_bf16(frigg_model *m, const frigg_tensor *t, size_t count) {
    uint16_t *buf = frigg_xmalloc(count * 2);
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
    m->owned = realloc(m->owned, (m->nowned + 1) * sizeof *m->owned);
    if (!m->owned) abort();
    m->owned[m->nowned++] = buf;
    return buf;
}

/* Find a tensor by name, check its shape, and return a bf16 view (in place when it is aligned BF16;
 * F16/F32 are rounded to bf16 once, at load — the engine computes in bf16 like HF's bf16 model). */
static const uint16_t *bind(frigg_model *m, const char *name, int ndim, int64_t d0, int64_t d1) {
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
    t->used = 1;
    size_t count = (size_t)d0 * (ndim == 1 ? 1 : (size_t)d1);
    if (t->dtype == FRIGG_ST_BF16 && ((uintptr_t)t->data & 1) == 0) return t->data;
    return own_bf16(m, t, count);
}

static int bind_mat(frigg_model *m, frigg_mat *mat, const char *name, int rows, int cols) {
    mat->w = bind(m, name, 2, rows, cols);
    mat->rows = rows;
    mat->cols = cols;
    return mat->w ? 0 : -1;
}

static frigg_mat sub_rows(const uint16_t *base, int row0, int rows, int cols) {
    frigg_mat r = {.w = base + (size_t)row0 * cols, .rows = rows, .cols = cols};
    return r;
}

static int bind_layer(frigg_model *m, int stack, int i) {
    const frigg_config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size;
    frigg_layer *L = &m->stack[stack][i];
    const char *sn = stack == FRIGG_STACK_L ? "L_module" : "H_module";
    char n[160];
    if (m->layout == FRIGG_LAYOUT_PACKED) {
        snprintf(n, sizeof n, "model.%s.layers.%d.attn.gqkv_proj.weight", sn, i);
        const uint16_t *g = bind(m, n, 2, 4 * (int64_t)D, D);
        if (!g) return -1;
        /* Row blocks gate, q, k, v (MODEL.md §2.1, trap T1). */
        L->gate = sub_rows(g, 0, D, D);
        L->q = sub_rows(g, D, D, D);
        L->k = sub_rows(g, 2 * D, D, D);
        L->v = sub_rows(g, 3 * D, D, D);
        L->gqkv_packed = g;
        snprintf(n, sizeof n, "model.%s.layers.%d.attn.o_proj.weight", sn, i);
        if (bind_mat(m, &L->o, n, D, D)) return -1;
        snprintf(n, sizeof n, "model.%s.layers.%d.mlp.gate_up_proj.weight", sn, i);
        const uint16_t *gu = bind(m, n, 2, 2 * (int64_t)I, D);
        if (!gu) return -1;
        L->mlp_gate = sub_rows(gu, 0, I, D); /* SiLU side first */
        L->up = sub_rows(gu, I, I, D);
        L->gate_up_packed = gu;
    } else {
        static const char *const an[] = {"gate_proj", "q_proj", "k_proj", "v_proj", "o_proj"};
        frigg_mat *am[] = {&L->gate, &L->q, &L->k, &L->v, &L->o};
        for (int j = 0; j < 5; j++) {
            snprintf(n, sizeof n, "model.%s.layers.%d.self_attn.%s.weight", sn, i, an[j]);
            if (bind_mat(m, am[j], n, D, D)) return -1;
        }
        snprintf(n, sizeof n, "model.%s.layers.%d.mlp.gate_proj.weight", sn, i);
        if (bind_mat(m, &L->mlp_gate, n, I, D)) return -1;
        snprintf(n, sizeof n, "model.%s.layers.%d.mlp.up_proj.weight", sn, i);
        if (bind_mat(m, &L->up, n, I, D)) return -1;
    }
    snprintf(n, sizeof n, "model.%s.layers.%d.mlp.down_proj.weight", sn, i);
    return bind_mat(m, &L->down, n, D, I);
}

frigg_model *frigg_model_load(const char *dir) {
    frigg_model *m = frigg_xcalloc(1, sizeof *m);
    m->dir = frigg_xstrdup(dir);
    char *cp = frigg_path_join(dir, "config.json");
    int rc = frigg_config_load(&m->cfg, cp);
    free(cp);
    if (rc || frigg_st_open_dir(&m->st, dir)) {
        frigg_model_free(m);
        return NULL;
    }
    const frigg_config *c = &m->cfg;
    int D = c->hidden_size, V = c->vocab_size;
    /* Layout: decided by layer 0 of the L stack, then enforced for every tensor. */
    if (frigg_st_find(&m->st, "model.L_module.layers.0.attn.gqkv_proj.weight"))
        m->layout = FRIGG_LAYOUT_PACKED;
    else if (frigg_st_find(&m->st, "model.L_module.layers.0.self_attn.q_proj.weight"))
        m->layout = FRIGG_LAYOUT_SPLIT;
    else {
        frigg_set_error("%s: neither the packed (attn.gqkv_proj) nor the split (self_attn.q_proj) layout: no "
                        "tensor model.L_module.layers.0.attn.gqkv_proj.weight or ...self_attn.q_proj.weight", dir);
        frigg_model_free(m);
        return NULL;
    }
    if (bind_mat(m, &m->embed, "model.embed_tokens.weight", V, D) ||
        bind_mat(m, &m->lm_head, "lm_head.weight", V, D) ||
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
    frigg_st_close(&m->st);
    free(m->dir);
    free(m);
}

char *frigg_default_model_dir(void) {
    const char *env = getenv("FRIGG_MODEL");
    if (env && *env) return frigg_xstrdup(env);
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
                snprintf(buf, sizeof buf, "%s%s/config.json", exe, rel[i]);
                if (frigg_file_exists(buf)) {
                    buf[strlen(buf) - strlen("/config.json")] = 0;
                    char *real = realpath(buf, NULL);
                    return real ? real : frigg_xstrdup(buf);
                }
            }
        }
    }
    return frigg_xstrdup("golden/default");
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
    frigg_set_error("%s: %s weights are not supported by this build's engines", what, frigg_dtype_name(m->dtype));
    return -1;
}

int frigg_model_check_dtypes(const frigg_model *m) {
    if (check_mat(&m->embed, "embed_tokens") || check_mat(&m->lm_head, "lm_head")) return -1;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < m->cfg.layers_per_stack; i++) {
            const frigg_layer *L = &m->stack[s][i];
            const frigg_mat *all[] = {&L->gate, &L->q, &L->k, &L->v, &L->o, &L->mlp_gate, &L->up, &L->down};
            for (size_t j = 0; j < sizeof all / sizeof all[0]; j++)
                if (check_mat(all[j], s ? "H stack" : "L stack")) return -1;
        }
    return 0;
}
