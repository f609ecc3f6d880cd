/* model_writer.c — see model_writer.h. */
#include "model_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/sampler.h"
#include "base/util.h"

tm_spec tm_default(void) {
    tm_spec s = {.vocab = 96, .hidden = 32, .heads = 2, .head_dim = 16, .inter = 48, .layers = 2,
                 .H_cycles = 2, .L_cycles = 2, .max_pos = 64, .seed = 7, .lm_scale = 4.0f};
    return s;
}

static float gauss(uint64_t st[4]) {
    double u1 = frigg_rng_uniform(st), u2 = frigg_rng_uniform(st);
    if (u1 < 1e-12) u1 = 1e-12;
    return (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
}

static void add(tm_tensor **t, int *n, const char *name, int ndim, int64_t r, int64_t c, float std, uint64_t st[4]) {
    *t = realloc(*t, (*n + 1) * sizeof **t);
    tm_tensor *x = &(*t)[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->ndim = ndim;
    x->shape[0] = r;
    x->shape[1] = c;
    size_t cnt = (size_t)r * (ndim == 2 ? (size_t)c : 1);
    x->data = frigg_xmalloc(cnt * 2);
    for (size_t i = 0; i < cnt; i++) x->data[i] = frigg_f32_to_bf16(gauss(st) * std);
}

int tm_make_tensors(const tm_spec *s, tm_tensor **out) {
    uint64_t st[4];
    frigg_rng_seed(st, s->seed);
    tm_tensor *t = NULL;
    int n = 0, D = s->hidden, I = s->inter;
    float wstd = 1.0f / sqrtf((float)D);
    add(&t, &n, "model.embed_tokens.weight", 2, s->vocab, D, 1.0f / sqrtf((float)D), st);
    add(&t, &n, "lm_head.weight", 2, s->vocab, D, wstd * s->lm_scale, st);
    add(&t, &n, "model.z_L_init", 1, D, 0, 1.0f, st); /* non-zero on purpose (trap T8) */
    const char *stacks[2] = {"L_module", "H_module"};
    char nm[160];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s->layers; i++) {
            const char *S = stacks[k];
            if (!s->split) {
                snprintf(nm, sizeof nm, "model.%s.layers.%d.attn.gqkv_proj.weight", S, i);
                add(&t, &n, nm, 2, 4 * D, D, wstd, st);
                snprintf(nm, sizeof nm, "model.%s.layers.%d.attn.o_proj.weight", S, i);
                add(&t, &n, nm, 2, D, D, wstd, st);
                snprintf(nm, sizeof nm, "model.%s.layers.%d.mlp.gate_up_proj.weight", S, i);
                add(&t, &n, nm, 2, 2 * I, D, wstd, st);
            } else {
                static const char *const a[] = {"gate_proj", "q_proj", "k_proj", "v_proj", "o_proj"};
                /* Same random stream order as the packed layout: gate,q,k,v rows, then o, then gate,up. */
                for (int j = 0; j < 5; j++) {
                    snprintf(nm, sizeof nm, "model.%s.layers.%d.self_attn.%s.weight", S, i, a[j]);
                    add(&t, &n, nm, 2, D, D, wstd, st);
                }
                snprintf(nm, sizeof nm, "model.%s.layers.%d.mlp.gate_proj.weight", S, i);
                add(&t, &n, nm, 2, I, D, wstd, st);
                snprintf(nm, sizeof nm, "model.%s.layers.%d.mlp.up_proj.weight", S, i);
                add(&t, &n, nm, 2, I, D, wstd, st);
            }
            snprintf(nm, sizeof nm, "model.%s.layers.%d.mlp.down_proj.weight", S, i);
            add(&t, &n, nm, 2, D, I, 1.0f / sqrtf((float)I), st);
        }
    *out = t;
    return n;
}

void tm_free_tensors(tm_tensor *t, int n) {
    for (int i = 0; i < n; i++) {
        free(t[i].data);
        free(t[i].raw);
    }
    free(t);
}

void tm_quantize(const uint16_t *w, int rows, int cols, int bits, int group, int8_t *q, uint16_t *scales) {
    int G = group ? group : cols, ng = cols / G;
    float qmin = bits == 8 ? -128.0f : -8.0f, qmax = bits == 8 ? 127.0f : 7.0f;
    float half_range = (qmax - qmin) / 2.0f; /* 127.5 / 7.5: exact in bf16 as in fp32 */
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < ng; g++) {
            const uint16_t *wg = w + (size_t)r * cols + (size_t)g * G;
            float a = 0.0f;
            for (int i = 0; i < G; i++) a = fmaxf(a, fabsf(frigg_bf16_to_f32(wg[i])));
            uint16_t sb = frigg_f32_to_bf16(a / half_range);
            if ((sb & 0x7fff) == 0) sb = 0x3c00; /* torch.finfo(bfloat16).eps = 2^-7 */
            scales[(size_t)r * ng + g] = sb;
            float sf = frigg_bf16_to_f32(sb);
            for (int i = 0; i < G; i++) {
                float x = frigg_round_bf16(frigg_bf16_to_f32(wg[i]) / sf);
                x = x < qmin ? qmin : x > qmax ? qmax : x;
                q[(size_t)r * cols + (size_t)g * G + i] = (int8_t)nearbyintf(x);
            }
        }
}

void tm_pack(const int8_t *q, int rows, int cols, int bits, int32_t *out) {
    int words = (cols * bits + 31) / 32, off = 1 << (bits - 1);
    memset(out, 0, (size_t)rows * words * 4);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < cols; i++) { /* value i at bit i*bits of the row's words, + 2^(bits-1) */
            uint32_t u = (uint32_t)(q[(size_t)r * cols + i] + off), bit = (uint32_t)i * bits;
            uint32_t *wd = (uint32_t *)&out[(size_t)r * words + bit / 32];
            *wd |= u << (bit % 32);
        }
}

static int is_io(const char *name) { return !strncmp(name, "lm_head.", 8) || !strncmp(name, "model.embed_tokens.", 19); }

int tm_quantize_tensors(const tm_spec *s, tm_tensor **tp, int n) {
    tm_tensor *t = *tp;
    int cap = n * 3 + 1, k = 0;
    tm_tensor *out = frigg_xcalloc(cap, sizeof *out);
    for (int i = 0; i < n; i++) {
        int io = is_io(t[i].name), bits = io ? s->quant_io_bits : s->quant_bits;
        int group = io ? s->quant_io_group : s->quant_group;
        size_t nl = strlen(t[i].name);
        if (t[i].ndim != 2 || !bits || nl < 7 || strcmp(t[i].name + nl - 7, ".weight")) {
            out[k++] = t[i];
            continue;
        }
        int rows = (int)t[i].shape[0], cols = (int)t[i].shape[1], ng = group ? cols / group : 1;
        int8_t *q = frigg_xmalloc((size_t)rows * cols);
        uint16_t *sc = frigg_xmalloc((size_t)rows * ng * 2);
        tm_quantize(t[i].data, rows, cols, bits, group, q, sc);
        if (s->quant_dequant) {
            for (size_t j = 0; j < (size_t)rows * cols; j++)
                t[i].data[j] = frigg_f32_to_bf16((float)q[j] * frigg_bf16_to_f32(sc[(j % cols) / (group ? group : cols) +
                                                                                      (j / cols) * ng]));
            out[k++] = t[i];
            free(q);
            free(sc);
            continue;
        }
        char mod[128];
        snprintf(mod, sizeof mod, "%.*s", (int)(nl - 7), t[i].name);
        int words = (cols * bits + 31) / 32;
        tm_tensor *pk = &out[k++], *ts = &out[k++], *sh = &out[k++];
        snprintf(pk->name, sizeof pk->name, "%s.weight_packed", mod);
        pk->ndim = 2;
        pk->shape[0] = rows;
        pk->shape[1] = words;
        pk->dtype = "I32";
        pk->raw_bytes = (size_t)rows * words * 4;
        pk->raw = frigg_xmalloc(pk->raw_bytes);
        tm_pack(q, rows, cols, bits, pk->raw);
        snprintf(ts->name, sizeof ts->name, "%s.weight_scale", mod);
        ts->ndim = 2;
        ts->shape[0] = rows;
        ts->shape[1] = ng;
        ts->data = sc;
        snprintf(sh->name, sizeof sh->name, "%s.weight_shape", mod);
        sh->ndim = 1;
        sh->shape[0] = 2;
        sh->dtype = "I64";
        sh->raw_bytes = 16;
        int64_t *shp = frigg_xmalloc(16);
        shp[0] = rows;
        shp[1] = cols;
        sh->raw = shp;
        free(q);
        free(t[i].data);
    }
    free(t);
    *tp = out;
    return k;
}

static void qargs(char *b, size_t cap, int bits, int group) {
    if (group)
        snprintf(b, cap, "{\"num_bits\":%d,\"type\":\"int\",\"symmetric\":true,\"strategy\":\"group\",\"group_size\":%d,"
                 "\"dynamic\":false}", bits, group);
    else
        snprintf(b, cap, "{\"num_bits\":%d,\"type\":\"int\",\"symmetric\":true,\"strategy\":\"channel\",\"group_size\":null,"
                 "\"dynamic\":false}", bits);
}

char *tm_quant_config_json(const tm_spec *s) {
    if (s->quant_json) return frigg_xstrdup(s->quant_json);
    if ((!s->quant_bits && !s->quant_io_bits) || s->quant_dequant) return NULL;
    char a[256], b[256], g0[768] = "", g1[768] = "";
    /* HF's hrm_text module names of the decoder-layer linears, as compressed-tensors' regex target. */
    if (s->quant_bits) {
        qargs(a, sizeof a, s->quant_bits, s->quant_group);
        snprintf(g0, sizeof g0, "\"group_0\":{\"targets\":[\"re:^model\\\\.[LH]_module\\\\.layers\\\\.[0-9]+\\\\."
                 "(self_attn|mlp)\\\\.(gate|q|k|v|o|up|down)_proj$\"],\"weights\":%s,\"input_activations\":null,"
                 "\"output_activations\":null,\"format\":\"pack-quantized\"}", a);
    }
    if (s->quant_io_bits) {
        qargs(b, sizeof b, s->quant_io_bits, s->quant_io_group);
        snprintf(g1, sizeof g1, "%s\"group_1\":{\"targets\":[\"lm_head\",\"model.embed_tokens\"],\"weights\":%s,"
                 "\"input_activations\":null,\"output_activations\":null,\"format\":\"pack-quantized\"}",
                 s->quant_bits ? "," : "", b);
    }
    char *out = frigg_xmalloc(4096);
    snprintf(out, 4096,
             "{\"config_groups\":{%s%s},\"format\":\"pack-quantized\",\"global_compression_ratio\":null,"
             "\"ignore\":[%s],\"kv_cache_scheme\":null,\"moe_sparsity_config\":null,"
             "\"quant_method\":\"compressed-tensors\",\"quantization_status\":\"compressed\",\"sparsity_config\":{},"
             "\"transform_config\":{},\"version\":\"0.20.1\"}",
             g0, g1, s->quant_io_bits ? "" : "\"lm_head\"");
    return out;
}

int tm_write_safetensors(const char *path, const tm_tensor *t, int n, int f32) {
    size_t esz = f32 ? 4 : 2, off = 0;
    size_t hcap = 256 + (size_t)n * 256;
    char *h = frigg_xmalloc(hcap);
    size_t hl = 0;
    hl += snprintf(h + hl, hcap - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)t[i].shape[0] * (t[i].ndim == 2 ? (size_t)t[i].shape[1] : 1);
        size_t nb = t[i].dtype ? t[i].raw_bytes : cnt * esz;
        const char *dt = t[i].dtype ? t[i].dtype : f32 ? "F32" : "BF16";
        if (t[i].ndim == 2)
            hl += snprintf(h + hl, hcap - hl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                           t[i].name, dt, (long long)t[i].shape[0], (long long)t[i].shape[1], off, off + nb);
        else
            hl += snprintf(h + hl, hcap - hl, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
                           t[i].name, dt, (long long)t[i].shape[0], off, off + nb);
        off += nb;
    }
    hl += snprintf(h + hl, hcap - hl, "}");
    while (hl % 8) h[hl++] = ' '; /* keep the data 8-byte aligned, as the reference writer does */
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(h);
        return -1;
    }
    uint64_t L = hl;
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(L >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(h, 1, hl, f);
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)t[i].shape[0] * (t[i].ndim == 2 ? (size_t)t[i].shape[1] : 1);
        if (t[i].dtype) {
            fwrite(t[i].raw, 1, t[i].raw_bytes, f);
        } else if (f32) {
            for (size_t j = 0; j < cnt; j++) {
                float v = frigg_bf16_to_f32(t[i].data[j]);
                fwrite(&v, 4, 1, f);
            }
        } else {
            fwrite(t[i].data, 2, cnt, f);
        }
    }
    free(h);
    return fclose(f);
}

int tm_write_config(const char *dir, const tm_spec *s, const char *extra_json) {
    char *p = frigg_path_join(dir, "config.json");
    FILE *f = fopen(p, "w");
    free(p);
    if (!f) return -1;
    char *qc = tm_quant_config_json(s), *extra = NULL;
    if (qc) {
        size_t len = strlen(qc) + (extra_json ? strlen(extra_json) : 0) + 64;
        extra = frigg_xmalloc(len);
        snprintf(extra, len, "\"quantization_config\":%s,%s", qc, extra_json ? extra_json : "");
        free(qc);
    } else if (extra_json) {
        extra = frigg_xstrdup(extra_json);
    }
    fprintf(f,
            "{%s\"model_type\":\"hrm_text\",\"architectures\":[\"HrmTextForCausalLM\"],\"vocab_size\":%d,"
            "\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
            "\"num_key_value_heads\":%d,\"head_dim\":%d,\"hidden_act\":\"silu\",\"max_position_embeddings\":%d,"
            "\"initializer_range\":%.17g,\"embedding_scale\":%.17g,\"rms_norm_eps\":1e-06,"
            "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000.0},\"rope_theta\":10000.0,"
            "\"attention_bias\":false,\"mlp_bias\":false,\"tie_word_embeddings\":false,\"H_cycles\":%d,"
            "\"L_cycles\":%d,\"prefix_lm\":true,\"bos_token_id\":2,\"eos_token_id\":1,\"pad_token_id\":0}\n",
            extra ? extra : "", s->vocab, s->hidden, s->inter, s->layers, s->heads, s->heads, s->head_dim,
            s->max_pos, 1.0 / sqrt((double)s->hidden), sqrt((double)s->hidden), s->H_cycles, s->L_cycles);
    free(extra);
    return fclose(f);
}

int tm_write_model(const char *dir, const tm_spec *s, const char *extra_json) {
    mkdir(dir, 0755);
    if (tm_write_config(dir, s, extra_json)) return -1;
    tm_tensor *t;
    int n = tm_make_tensors(s, &t), rc;
    if (s->quant_bits || s->quant_io_bits) n = tm_quantize_tensors(s, &t, n);
    if (s->shards == 2) {
        int half = n / 2;
        char *p1 = frigg_path_join(dir, "model-00001-of-00002.safetensors");
        char *p2 = frigg_path_join(dir, "model-00002-of-00002.safetensors");
        rc = tm_write_safetensors(p1, t, half, s->f32) | tm_write_safetensors(p2, t + half, n - half, s->f32);
        char *ip = frigg_path_join(dir, "model.safetensors.index.json");
        FILE *f = fopen(ip, "w");
        fprintf(f, "{\"metadata\":{},\"weight_map\":{");
        for (int i = 0; i < n; i++)
            fprintf(f, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"", i ? "," : "", t[i].name, i < half ? 1 : 2);
        fprintf(f, "}}\n");
        fclose(f);
        free(p1);
        free(p2);
        free(ip);
    } else {
        char *p = frigg_path_join(dir, "model.safetensors");
        rc = tm_write_safetensors(p, t, n, s->f32);
        free(p);
    }
    tm_free_tensors(t, n);
    return rc;
}

char *tm_tempdir(void) {
    const char *base = getenv("TMPDIR");
    char *tmpl = frigg_path_join(base && *base ? base : "/tmp", "frigg-test-XXXXXX");
    if (!mkdtemp(tmpl)) {
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

void tm_rmrf(const char *dir) {
    char cmd[4200];
    if (strlen(dir) > 4000 || !strstr(dir, "frigg-test-")) return; /* only ever our own temp dirs */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "warning: could not remove %s\n", dir);
}
