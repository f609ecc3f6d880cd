/* gguf_hrm.c — an hrm_text GGUF (llama.cpp's convert_hf_to_gguf.py, conversion/hrm_text.py) as frigg's config
 * and HF tensor names (gguf.h: frigg_gguf_hrm_*).
 *
 * The converter writes the config as {arch}.* keys (arch = general.architecture = "hrm_text"):
 *   block_count               the KV slots, layers_per_stack * H_cycles * (L_cycles + 1) (llama.cpp asserts it)
 *   context_length            max_position_embeddings
 *   embedding_length          hidden_size            feed_forward_length   intermediate_size
 *   attention.head_count      num_attention_heads    attention.head_count_kv   num_key_value_heads (MHA: equal)
 *   attention.key_length, attention.value_length, rope.dimension_count     head_dim (all three equal)
 *   rope.freq_base            rope_theta             attention.layer_norm_rms_epsilon   rms_norm_eps
 *   embedding_scale           embedding_scale        hrm.layers_per_stack, hrm.h_cycles, hrm.l_cycles, hrm.prefix_lm
 * and tokenizer.ggml.{bos,eos,padding}_token_id for bos/eos/pad_token_id. They are turned into the config.json
 * HF would read (frigg_gguf_hrm_config_json) and parsed by frigg_config_parse, so the same defaults and range
 * rules apply as to a config.json; what cannot be mapped is refused naming the GGUF key.
 *
 * Tensors: the converter chunks attn.gqkv_proj into blk.N.attn_{gate,q,k,v} and mlp.gate_up_proj into
 * blk.N.ffn_{gate,up}, renames attn.o_proj / mlp.down_proj to attn_output / ffn_down, and puts the L stack in
 * blocks [0, n) and the H stack in [n, 2n) (n = layers_per_stack): only 2n physical blocks exist, the later
 * passes' block_count slots alias them (llama.cpp's hrm-text.cpp). No q/k permutation: llama.cpp runs hrm_text
 * with NEOX (rotate-half) RoPE, HF's own. token_embd / output / hrm.z_l_init are the embedding, lm_head and
 * z_L_init. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "gguf.h"

#define ARCH "hrm_text"

/* The {arch}.* keys frigg maps (after the "hrm_text." prefix). */
static const char *const k_arch_keys[] = {
    "block_count", "context_length", "embedding_length", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "rope.freq_base", "attention.layer_norm_rms_epsilon", "attention.key_length",
    "attention.value_length", "rope.dimension_count", "embedding_scale", "hrm.layers_per_stack", "hrm.h_cycles",
    "hrm.l_cycles", "hrm.prefix_lm", "vocab_size", NULL};

static int is_int_type(int t) {
    return t == FRIGG_GGUF_UINT8 || t == FRIGG_GGUF_INT8 || t == FRIGG_GGUF_UINT16 || t == FRIGG_GGUF_INT16 ||
           t == FRIGG_GGUF_UINT32 || t == FRIGG_GGUF_INT32 || t == FRIGG_GGUF_UINT64 || t == FRIGG_GGUF_INT64;
}

/* An integer key: absent -> 0 (and *present 0); present must be an integer type with a value in [0, 2^31). */
static int get_int(const frigg_gguf *g, const char *key, int required, int64_t *out, int *present) {
    const frigg_gguf_kv *kv = frigg_gguf_find_kv(g, key);
    *present = kv != NULL;
    *out = 0;
    if (!kv) {
        if (required) frigg_set_error("%s: GGUF key \"%s\" is missing (needed for the hrm_text config)", g->path, key);
        return required ? -1 : 0;
    }
    if (!is_int_type(kv->type)) {
        frigg_set_error("%s: GGUF key \"%s\" is %s, expected an integer", g->path, key, frigg_gguf_vtype_name(kv->type));
        return -1;
    }
    int neg = (kv->type == FRIGG_GGUF_INT8 || kv->type == FRIGG_GGUF_INT16 || kv->type == FRIGG_GGUF_INT32 ||
               kv->type == FRIGG_GGUF_INT64) && kv->i < 0;
    if (neg || kv->u > INT32_MAX) {
        frigg_set_error("%s: GGUF key \"%s\" = %lld is out of range", g->path, key, neg ? (long long)kv->i
                                                                                     : (long long)kv->u);
        return -1;
    }
    *out = (int64_t)kv->u;
    return 0;
}

/* A FLOAT32 is read as the shortest decimal that rounds to it: the value the converter had before narrowing it
 * when that value was a short decimal (1e-06, not 9.999999974752427e-07). The engines use these values as fp32
 * operands, where both are the same number; the shortest form keeps a config.json written from the GGUF
 * (frigg-quantize) readable. FLOAT64 values are taken as they are. */
static double float_value(const frigg_gguf_kv *kv) {
    if (kv->type != FRIGG_GGUF_FLOAT32) return kv->f;
    float x = (float)kv->f;
    char buf[40];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)x);
        if (strtof(buf, NULL) == x) return strtod(buf, NULL);
    }
    return kv->f;
}

static int get_float(const frigg_gguf *g, const char *key, double *out, int *present) {
    const frigg_gguf_kv *kv = frigg_gguf_find_kv(g, key);
    *present = kv != NULL;
    if (!kv) return 0;
    if (kv->type != FRIGG_GGUF_FLOAT32 && kv->type != FRIGG_GGUF_FLOAT64) {
        frigg_set_error("%s: GGUF key \"%s\" is %s, expected FLOAT32 or FLOAT64", g->path, key,
                        frigg_gguf_vtype_name(kv->type));
        return -1;
    }
    *out = float_value(kv);
    if (!isfinite(*out)) {
        frigg_set_error("%s: GGUF key \"%s\" is not finite", g->path, key);
        return -1;
    }
    return 0;
}

static int starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* Every key is one frigg maps, provenance (general.*, quantize.*), or tokenizer data (tokenizer.*); anything
 * else could change the model in a way frigg does not implement, and is refused by name. */
static int check_keys(const frigg_gguf *g) {
    for (int64_t i = 0; i < g->nkv; i++) {
        const char *k = g->kv[i].key;
        if (starts(k, "general.") || starts(k, "tokenizer.") || starts(k, "quantize.")) continue;
        if (starts(k, ARCH ".")) {
            int known = 0;
            for (int j = 0; k_arch_keys[j]; j++) known |= !strcmp(k + strlen(ARCH "."), k_arch_keys[j]);
            if (known) continue;
            frigg_set_error("%s: GGUF key \"%s\" is not one frigg maps onto HRM-Text's config (refusing to guess what "
                            "it changes)", g->path, k);
            return -1;
        }
        if (!strcmp(k, "split.count") && is_int_type(g->kv[i].type) && g->kv[i].u <= 1) continue;
        if (starts(k, "split.")) {
            if (!strcmp(k, "split.no") || !strcmp(k, "split.tensors.count")) continue;
            frigg_set_error("%s: GGUF key \"%s\": a GGUF split into several files is not supported (merge it with "
                            "llama-gguf-split --merge)", g->path, k);
            return -1;
        }
        frigg_set_error("%s: GGUF key \"%s\" is not one frigg maps onto HRM-Text (not general.*, tokenizer.*, "
                        "quantize.* or " ARCH ".*)", g->path, k);
        return -1;
    }
    return 0;
}

char *frigg_gguf_hrm_config_json(const frigg_gguf *g) {
    const frigg_gguf_kv *a = frigg_gguf_find_kv(g, "general.architecture");
    if (!a) {
        frigg_set_error("%s: GGUF key \"general.architecture\" is missing", g->path);
        return NULL;
    }
    if (a->type != FRIGG_GGUF_STRING || a->len != strlen(ARCH) || memcmp(a->str, ARCH, a->len)) {
        if (a->type == FRIGG_GGUF_STRING)
            frigg_set_error("%s: GGUF key \"general.architecture\" is \"%.*s\", expected \"" ARCH "\" (frigg runs "
                            "HRM-Text only)", g->path, (int)(a->len > 64 ? 64 : a->len), a->str);
        else
            frigg_set_error("%s: GGUF key \"general.architecture\" is %s, expected the string \"" ARCH "\"", g->path,
                            frigg_gguf_vtype_name(a->type));
        return NULL;
    }
    if (check_keys(g)) return NULL;
    int64_t slots, ctx, D, I, heads, kvh, kl, vl, rd, n, H, L, vs, bos, eos, pad;
    int p_slots, p_ctx, p_D, p_I, p_heads, p_kvh, p_kl, p_vl, p_rd, p_n, p_H, p_L, p_vs, p_bos, p_eos, p_pad;
    if (get_int(g, ARCH ".block_count", 1, &slots, &p_slots) || get_int(g, ARCH ".context_length", 0, &ctx, &p_ctx) ||
        get_int(g, ARCH ".embedding_length", 1, &D, &p_D) || get_int(g, ARCH ".feed_forward_length", 1, &I, &p_I) ||
        get_int(g, ARCH ".attention.head_count", 1, &heads, &p_heads) ||
        get_int(g, ARCH ".attention.head_count_kv", 0, &kvh, &p_kvh) ||
        get_int(g, ARCH ".attention.key_length", 0, &kl, &p_kl) ||
        get_int(g, ARCH ".attention.value_length", 0, &vl, &p_vl) ||
        get_int(g, ARCH ".rope.dimension_count", 0, &rd, &p_rd) ||
        get_int(g, ARCH ".hrm.layers_per_stack", 1, &n, &p_n) || get_int(g, ARCH ".hrm.h_cycles", 1, &H, &p_H) ||
        get_int(g, ARCH ".hrm.l_cycles", 1, &L, &p_L) || get_int(g, ARCH ".vocab_size", 0, &vs, &p_vs) ||
        get_int(g, "tokenizer.ggml.bos_token_id", 0, &bos, &p_bos) ||
        get_int(g, "tokenizer.ggml.eos_token_id", 0, &eos, &p_eos) ||
        get_int(g, "tokenizer.ggml.padding_token_id", 0, &pad, &p_pad))
        return NULL;
    double theta = 10000.0, eps = 0, scale = 0;
    int p_theta, p_eps, p_scale;
    if (get_float(g, ARCH ".rope.freq_base", &theta, &p_theta) ||
        get_float(g, ARCH ".attention.layer_norm_rms_epsilon", &eps, &p_eps) ||
        get_float(g, ARCH ".embedding_scale", &scale, &p_scale))
        return NULL;
    if (!p_theta) theta = 10000.0;
    if (!p_eps) { /* llama.cpp requires it; HF's default (1e-6) would be a guess at what the converter saw */
        frigg_set_error("%s: GGUF key \"" ARCH ".attention.layer_norm_rms_epsilon\" is missing", g->path);
        return NULL;
    }
    if (!p_scale) { /* HF derives it from initializer_range, which a GGUF does not carry; llama.cpp would not scale */
        frigg_set_error("%s: GGUF key \"" ARCH ".embedding_scale\" is missing (HF's default comes from "
                        "initializer_range, which a GGUF does not carry)", g->path);
        return NULL;
    }
    const frigg_gguf_kv *plm = frigg_gguf_find_kv(g, ARCH ".hrm.prefix_lm");
    if (plm && plm->type != FRIGG_GGUF_BOOL) {
        frigg_set_error("%s: GGUF key \"" ARCH ".hrm.prefix_lm\" is %s, expected BOOL", g->path,
                        frigg_gguf_vtype_name(plm->type));
        return NULL;
    }
    /* head_dim: key_length, else embedding_length / head_count (llama.cpp's default); value_length and
     * rope.dimension_count must agree (frigg has no separate value width or partial rotary). */
    int64_t hd = p_kl ? kl : heads ? D / heads : 0;
    if (p_vl && vl != hd) {
        frigg_set_error("%s: GGUF key \"" ARCH ".attention.value_length\" = %lld differs from the key length %lld "
                        "(HRM-Text has one head_dim)", g->path, (long long)vl, (long long)hd);
        return NULL;
    }
    if (p_rd && rd != hd) {
        frigg_set_error("%s: GGUF key \"" ARCH ".rope.dimension_count\" = %lld is not head_dim %lld (partial rotary "
                        "embeddings are not supported)", g->path, (long long)rd, (long long)hd);
        return NULL;
    }
    if (p_kvh && kvh != heads) {
        frigg_set_error("%s: GGUF key \"" ARCH ".attention.head_count_kv\" = %lld must equal attention.head_count = "
                        "%lld: HRM-Text is MHA", g->path, (long long)kvh, (long long)heads);
        return NULL;
    }
    if (n * H * (L + 1) != slots) {
        frigg_set_error("%s: GGUF key \"" ARCH ".block_count\" = %lld but hrm.layers_per_stack x hrm.h_cycles x "
                        "(hrm.l_cycles + 1) = %lld x %lld x %lld = %lld", g->path, (long long)slots, (long long)n,
                        (long long)H, (long long)(L + 1), (long long)(n * H * (L + 1)));
        return NULL;
    }
    /* The vocabulary: the embedding's rows (llama.cpp takes n_vocab from the tokenizer arrays or this tensor). */
    const frigg_gguf_tensor *emb = frigg_gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->ndim != 2) {
        frigg_set_error("%s: %s", g->path, emb ? "tensor \"token_embd.weight\" is not 2-D" : "no tensor \"token_embd.weight\"");
        return NULL;
    }
    if (emb->ne[1] > (1u << 24)) {
        frigg_set_error("%s: tensor \"token_embd.weight\": %llu rows is too large a vocabulary", g->path,
                        (unsigned long long)emb->ne[1]);
        return NULL;
    }
    int64_t V = (int64_t)emb->ne[1];
    if (p_vs && vs != V) {
        frigg_set_error("%s: GGUF key \"" ARCH ".vocab_size\" = %lld but token_embd.weight has %lld rows", g->path,
                        (long long)vs, (long long)V);
        return NULL;
    }
    json_t *o = json_object();
    json_object_set_new(o, "architectures", json_pack("[s]", "HrmTextForCausalLM"));
    json_object_set_new(o, "model_type", json_string(ARCH));
    json_object_set_new(o, "vocab_size", json_integer(V));
    json_object_set_new(o, "hidden_size", json_integer(D));
    json_object_set_new(o, "intermediate_size", json_integer(I));
    json_object_set_new(o, "num_hidden_layers", json_integer(slots));
    json_object_set_new(o, "num_layers_per_stack", json_integer(n));
    json_object_set_new(o, "num_attention_heads", json_integer(heads));
    json_object_set_new(o, "num_key_value_heads", json_integer(p_kvh ? kvh : heads));
    json_object_set_new(o, "head_dim", json_integer(hd));
    json_object_set_new(o, "hidden_act", json_string("silu"));
    if (p_ctx) json_object_set_new(o, "max_position_embeddings", json_integer(ctx));
    json_object_set_new(o, "embedding_scale", json_real(scale));
    json_object_set_new(o, "rms_norm_eps", json_real(eps));
    json_object_set_new(o, "rope_theta", json_real(theta));
    json_object_set_new(o, "rope_parameters", json_pack("{s:s,s:f}", "rope_type", "default", "rope_theta", theta));
    json_object_set_new(o, "attention_bias", json_false());
    json_object_set_new(o, "mlp_bias", json_false());
    json_object_set_new(o, "tie_word_embeddings", json_false());
    json_object_set_new(o, "H_cycles", json_integer(H));
    json_object_set_new(o, "L_cycles", json_integer(L));
    /* Absent: HF's class default (true), as for a config.json. */
    json_object_set_new(o, "prefix_lm", json_boolean(plm ? plm->u != 0 : 1));
    if (p_pad) json_object_set_new(o, "pad_token_id", json_integer(pad));
    if (p_bos) json_object_set_new(o, "bos_token_id", json_integer(bos));
    if (p_eos) json_object_set_new(o, "eos_token_id", json_integer(eos));
    json_object_set_new(o, "torch_dtype", json_string("bfloat16"));
    char *s = json_dumps(o, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(o);
    size_t l = strlen(s);
    char *r = frigg_xmalloc(l + 2);
    memcpy(r, s, l);
    r[l] = '\n', r[l + 1] = 0;
    free(s);
    return r;
}

int frigg_gguf_hrm_config(const frigg_gguf *g, frigg_config *c, char **json_out) {
    if (json_out) *json_out = NULL;
    char *j = frigg_gguf_hrm_config_json(g);
    if (!j) return -1;
    char path[512];
    snprintf(path, sizeof path, "%s (its " ARCH " metadata as config.json)", g->path);
    int rc = frigg_config_parse(c, j, strlen(j), path);
    if (!rc && json_out) *json_out = j;
    else free(j);
    return rc;
}

/* The GGUF tensor kinds of one block: GGUF suffix, HF module (split layout), ne = {cols, rows} as
 * 'D'/'I' dimension letters. */
static const struct {
    const char *gguf, *hf;
    char cols, rows;
} k_blk[] = {
    {"attn_gate", "self_attn.gate_proj", 'D', 'D'}, {"attn_q", "self_attn.q_proj", 'D', 'D'},
    {"attn_k", "self_attn.k_proj", 'D', 'D'},       {"attn_v", "self_attn.v_proj", 'D', 'D'},
    {"attn_output", "self_attn.o_proj", 'D', 'D'},  {"ffn_gate", "mlp.gate_proj", 'D', 'I'},
    {"ffn_up", "mlp.up_proj", 'D', 'I'},            {"ffn_down", "mlp.down_proj", 'I', 'D'},
};

static uint64_t dim_of(const frigg_config *c, char d) {
    return d == 'D' ? (uint64_t)c->hidden_size : d == 'I' ? (uint64_t)c->intermediate_size : (uint64_t)c->vocab_size;
}

/* The HF name and expected GGUF shape of a GGUF tensor name; 0, or -1 with frigg_error(). */
static int map_name(const frigg_gguf *g, const frigg_config *c, const char *name, char *out, size_t n, uint64_t ne[2],
                    int *ndim) {
    *ndim = 2;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight")) {
        snprintf(out, n, "%s", name[0] == 't' ? "model.embed_tokens.weight" : "lm_head.weight");
        ne[0] = (uint64_t)c->hidden_size, ne[1] = (uint64_t)c->vocab_size;
        return 0;
    }
    if (!strcmp(name, "hrm.z_l_init") || !strcmp(name, "hrm.z_l_init.weight")) {
        snprintf(out, n, "model.z_L_init");
        *ndim = 1, ne[0] = (uint64_t)c->hidden_size, ne[1] = 1;
        return 0;
    }
    unsigned b;
    int used = 0;
    char kind[40];
    if (sscanf(name, "blk.%u.%39[a-z_].weight%n", &b, kind, &used) == 2 && used == (int)strlen(name)) {
        int lps = c->layers_per_stack;
        for (size_t k = 0; k < sizeof k_blk / sizeof k_blk[0]; k++) {
            if (strcmp(kind, k_blk[k].gguf)) continue;
            if (b >= 2u * (unsigned)lps) {
                frigg_set_error("%s: tensor \"%s\": block %u is past the 2 x %d physical blocks (L stack 0..%d, H "
                                "stack %d..%d; the later passes alias them)", g->path, name, b, lps, lps - 1, lps,
                                2 * lps - 1);
                return -1;
            }
            int h = (int)b >= lps;
            snprintf(out, n, "model.%s_module.layers.%d.%s.weight", h ? "H" : "L", (int)b - (h ? lps : 0), k_blk[k].hf);
            ne[0] = dim_of(c, k_blk[k].cols), ne[1] = dim_of(c, k_blk[k].rows);
            return 0;
        }
    }
    frigg_set_error("%s: tensor \"%s\" is not part of an hrm_text GGUF (token_embd, output, hrm.z_l_init, "
                    "blk.N.{attn_gate,attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down})", g->path, name);
    return -1;
}

int frigg_gguf_hrm_tensor(const frigg_gguf *g, const frigg_config *c, const frigg_gguf_tensor *t, char *hf,
                          size_t n) {
    uint64_t ne[2];
    int nd;
    if (map_name(g, c, t->name, hf, n, ne, &nd)) return -1;
    int ok = t->ndim == nd && t->ne[0] == ne[0] && (nd == 1 || t->ne[1] == ne[1]);
    if (!ok) {
        char got[120] = "", *p = got;
        for (int d = 0; d < t->ndim; d++)
            p += snprintf(p, (size_t)(got + sizeof got - p), "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
        if (nd == 1)
            frigg_set_error("%s: tensor \"%s\" (info at offset %zu) has ne [%s], expected [%llu]", g->path, t->name,
                            t->info_offset, got, (unsigned long long)ne[0]);
        else
            frigg_set_error("%s: tensor \"%s\" (info at offset %zu) has ne [%s], expected [%llu, %llu] (ne[0] = "
                            "columns)", g->path, t->name, t->info_offset, got, (unsigned long long)ne[0],
                            (unsigned long long)ne[1]);
        return -1;
    }
    return 0;
}

int frigg_gguf_hrm_check_complete(const frigg_gguf *g, const frigg_config *c) {
    char name[64];
    static const char *const top[] = {"token_embd.weight", "output.weight", "hrm.z_l_init"};
    for (int i = 0; i < 3; i++)
        if (!frigg_gguf_find_tensor(g, top[i]) && (i != 2 || !frigg_gguf_find_tensor(g, "hrm.z_l_init.weight"))) {
            frigg_set_error("%s: missing tensor \"%s\"%s", g->path, top[i],
                            i == 1 ? " (tied embeddings: HRM-Text's lm_head is its own tensor)" : "");
            return -1;
        }
    for (int b = 0; b < 2 * c->layers_per_stack; b++)
        for (size_t k = 0; k < sizeof k_blk / sizeof k_blk[0]; k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", b, k_blk[k].gguf);
            if (!frigg_gguf_find_tensor(g, name)) {
                frigg_set_error("%s: missing tensor \"%s\" (%s stack layer %d; %d physical blocks expected)", g->path,
                                name, b < c->layers_per_stack ? "L" : "H", b % c->layers_per_stack,
                                2 * c->layers_per_stack);
                return -1;
            }
        }
    return 0;
}
