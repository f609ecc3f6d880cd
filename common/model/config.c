#include <stdlib.h>
/* config.c — config.json → frigg_config, with HF's defaults; refuses what the engine cannot run. */
#include "config.h"

#include <jansson.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

/* Keys we understand (read or deliberately ignorable). Anything else is reported as unknown, so a
 * config for a variant the engine does not implement is never run silently. */
static const char *const k_known[] = {
    "model_type", "architectures", "vocab_size", "hidden_size", "intermediate_size",
    "num_hidden_layers", "num_layers_per_stack", "num_attention_heads", "num_key_value_heads",
    "head_dim", "hidden_act", "max_position_embeddings", "initializer_range", "embedding_scale",
    "rms_norm_eps", "rope_parameters", "rope_theta", "rope_scaling", "attention_bias", "mlp_bias",
    "attention_dropout", "tie_word_embeddings", "use_cache", "H_cycles", "L_cycles", "L_bp_cycles",
    "prefix_lm", "pad_token_id", "bos_token_id", "eos_token_id", "transformers_version", "dtype",
    "torch_dtype", "auto_map", "output_hidden_states", "output_attentions", "return_dict",
    "chunk_size_feed_forward", "is_encoder_decoder", "id2label", "label2id", "problem_type",
    "_name_or_path", "quantization_config", NULL};

static int is_known(const char *k) {
    for (int i = 0; k_known[i]; i++)
        if (!strcmp(k, k_known[i])) return 1;
    return 0;
}

/* Integer key: absent → dflt; present must be an integer within [lo, hi]. */
static int get_int(json_t *root, const char *key, int dflt, int lo, int hi, int *out, const char *path) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v)) {
        frigg_set_error("%s: \"%s\" must be an integer", path, key);
        return -1;
    }
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        frigg_set_error("%s: \"%s\" = %lld is out of range [%d, %d]", path, key, (long long)x, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int get_num(json_t *root, const char *key, double dflt, double *out, int *present, const char *path) {
    json_t *v = json_object_get(root, key);
    if (present) *present = v && !json_is_null(v);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_number(v)) {
        frigg_set_error("%s: \"%s\" must be a number", path, key);
        return -1;
    }
    *out = json_number_value(v);
    if (!isfinite(*out)) {
        frigg_set_error("%s: \"%s\" is not finite", path, key);
        return -1;
    }
    return 0;
}

static int get_bool(json_t *root, const char *key, bool dflt, bool *out, const char *path) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v)) {
        frigg_set_error("%s: \"%s\" must be true or false", path, key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* A key the engine has no code for must hold its only supported value. */
static int require_false(json_t *root, const char *key, const char *path) {
    bool b;
    if (get_bool(root, key, false, &b, path)) return -1;
    if (b) {
        frigg_set_error("%s: \"%s\": true is not supported (HRM-Text has no %s)", path, key,
                        strstr(key, "bias") ? "biases" : "tied embeddings");
        return -1;
    }
    return 0;
}


/* ---- quantization_config (compressed-tensors; see config.h) ---- */

static const char *jstr(json_t *v) { return json_is_string(v) ? json_string_value(v) : NULL; }
static int absent(json_t *v) { return !v || json_is_null(v); }
static int key_in(const char *k, const char *const *list) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(k, list[i])) return 1;
    return 0;
}
static char **str_list(json_t *a, int *n) {
    *n = (int)json_array_size(a);
    char **out = frigg_xcalloc(*n ? *n : 1, sizeof *out);
    for (int i = 0; i < *n; i++) out[i] = frigg_xstrdup(json_string_value(json_array_get(a, i)));
    return out;
}
static int is_str_array(json_t *a, int nonempty) {
    if (!json_is_array(a) || (nonempty && !json_array_size(a))) return 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_is_string(json_array_get(a, i))) return 0;
    return 1;
}

/* A config group's "weights" (compressed-tensors QuantizationArgs; its defaults: num_bits 8, type int,
 * symmetric true, strategy inferred from group_size). */
static int parse_qargs(json_t *w, frigg_quant_group *g, const char *path) {
    static const char *const known[] = {"num_bits", "type", "symmetric", "group_size", "strategy",
                                        "block_structure", "dynamic", "actorder", "scale_dtype", "zp_dtype",
                                        "observer", "observer_kwargs", NULL};
    const char *gn = g->name, *k;
    json_t *v;
    if (!json_is_object(w)) {
        frigg_set_error("%s: quantization_config.config_groups.%s.weights must be an object", path, gn);
        return -1;
    }
    json_object_foreach(w, k, v) {
        if (!key_in(k, known)) {
            frigg_set_error("%s: quantization_config.config_groups.%s.weights: unknown key \"%s\"", path, gn, k);
            return -1;
        }
    }
    v = json_object_get(w, "type");
    if (!absent(v) && (!jstr(v) || strcasecmp(jstr(v), "int"))) {
        frigg_set_error("%s: quantization_config.config_groups.%s.weights.type \"%s\" is not supported (only int "
                        "weights; float types are fp8/fp4)", path, gn, jstr(v) ? jstr(v) : "(not a string)");
        return -1;
    }
    v = json_object_get(w, "num_bits");
    g->num_bits = 8;
    if (!absent(v)) {
        if (!json_is_integer(v)) {
            frigg_set_error("%s: quantization_config.config_groups.%s.weights.num_bits must be an integer", path, gn);
            return -1;
        }
        g->num_bits = (int)json_integer_value(v);
    }
    if (g->num_bits != 4 && g->num_bits != 8) {
        frigg_set_error("%s: quantization_config.config_groups.%s.weights.num_bits %d is not supported (4 or 8)", path,
                        gn, g->num_bits);
        return -1;
    }
    v = json_object_get(w, "symmetric");
    if (!absent(v) && !json_is_true(v)) {
        frigg_set_error("%s: quantization_config.config_groups.%s.weights: asymmetric quantization (symmetric: %s, "
                        "zero points) is not supported", path, gn, json_is_false(v) ? "false" : "not true");
        return -1;
    }
    v = json_object_get(w, "dynamic");
    if (!absent(v) && !json_is_false(v)) {
        frigg_set_error("%s: quantization_config.config_groups.%s.weights: dynamic weight quantization is not "
                        "supported (\"dynamic\" must be false)", path, gn);
        return -1;
    }
    v = json_object_get(w, "block_structure");
    if (!absent(v)) {
        frigg_set_error("%s: quantization_config.config_groups.%s.weights: block_structure (block strategy) is not "
                        "supported", path, gn);
        return -1;
    }
    v = json_object_get(w, "actorder");
    if (!absent(v) && !json_is_false(v) &&
        !(jstr(v) && (!strcasecmp(jstr(v), "weight") || !strcasecmp(jstr(v), "static")))) {
        /* "weight"/"static" reorder columns during calibration only and leave the format unchanged;
         * "group"/"dynamic" (and true) mean a weight_g_idx permutation. */
        frigg_set_error("%s: quantization_config.config_groups.%s.weights.actorder %s is not supported (activation "
                        "reordering with g_idx)", path, gn, jstr(v) ? jstr(v) : json_is_true(v) ? "true" : "(bad)");
        return -1;
    }
    v = json_object_get(w, "scale_dtype");
    if (!absent(v) && !(jstr(v) && (!strcmp(jstr(v), "torch.bfloat16") || !strcmp(jstr(v), "bfloat16")))) {
        frigg_set_error("%s: quantization_config.config_groups.%s.weights.scale_dtype %s is not supported (bf16 "
                        "scales only)", path, gn, jstr(v) ? jstr(v) : "(not a string)");
        return -1;
    }
    json_t *gs = json_object_get(w, "group_size");
    int has_gs = !absent(gs);
    json_int_t gsz = 0;
    if (has_gs) {
        if (!json_is_integer(gs) || json_integer_value(gs) < -1 || json_integer_value(gs) == 0 ||
            json_integer_value(gs) > (1 << 20)) {
            frigg_set_error("%s: quantization_config.config_groups.%s.weights.group_size must be a positive integer "
                            "or -1", path, gn);
            return -1;
        }
        gsz = json_integer_value(gs);
    }
    v = json_object_get(w, "strategy");
    const char *strat;
    if (absent(v)) /* compressed-tensors' inference from group_size */
        strat = !has_gs ? "tensor" : gsz > 0 ? "group" : "channel";
    else if (!(strat = jstr(v))) {
        frigg_set_error("%s: quantization_config.config_groups.%s.weights.strategy must be a string", path, gn);
        return -1;
    }
    if (!strcasecmp(strat, "channel")) {
        if (has_gs && gsz != -1) {
            frigg_set_error("%s: quantization_config.config_groups.%s.weights: group_size %lld with strategy "
                            "\"channel\" (compressed-tensors requires strategy \"group\")", path, gn, (long long)gsz);
            return -1;
        }
        g->group_size = 0;
    } else if (!strcasecmp(strat, "group")) {
        if (!has_gs || gsz <= 0) {
            frigg_set_error("%s: quantization_config.config_groups.%s.weights: strategy \"group\" needs a positive "
                            "group_size", path, gn);
            return -1;
        }
        g->group_size = (int)gsz;
    } else {
        frigg_set_error("%s: quantization_config.config_groups.%s.weights.strategy \"%s\" is not supported (channel "
                        "or group)", path, gn, strat);
        return -1;
    }
    return 0;
}

static int parse_quant(json_t *qc, frigg_quant_config *q, const char *path) {
    static const char *const known[] = {"config_groups", "quant_method", "format", "quantization_status",
                                        "global_compression_ratio", "ignore", "kv_cache_scheme", "sparsity_config",
                                        "transform_config", "version", "moe_sparsity_config", NULL};
    static const char *const gknown[] = {"targets", "weights", "input_activations", "output_activations", "format",
                                         NULL};
    memset(q, 0, sizeof *q);
    if (!json_is_object(qc)) {
        frigg_set_error("%s: \"quantization_config\" must be an object", path);
        return -1;
    }
    const char *k, *s;
    json_t *v;
    json_object_foreach(qc, k, v) {
        if (!key_in(k, known)) {
            frigg_set_error("%s: quantization_config: unknown key \"%s\" (refusing to guess)", path, k);
            return -1;
        }
    }
    v = json_object_get(qc, "quant_method");
    if (!(s = jstr(v)) || strcmp(s, "compressed-tensors")) {
        frigg_set_error("%s: quantization_config.quant_method %s%s%s is not supported (only \"compressed-tensors\", "
                        "format \"pack-quantized\")", path, s ? "\"" : "", s ? s : absent(v) ? "(absent)" : "(not a string)",
                        s ? "\"" : "");
        return -1;
    }
    v = json_object_get(qc, "format");
    if (!(s = jstr(v)) || strcmp(s, "pack-quantized")) {
        frigg_set_error("%s: quantization_config.format %s%s%s is not supported (only \"pack-quantized\")", path,
                        s ? "\"" : "", s ? s : absent(v) ? "(absent)" : "(not a string)", s ? "\"" : "");
        return -1;
    }
    v = json_object_get(qc, "quantization_status");
    if (!absent(v) && (!(s = jstr(v)) || strcmp(s, "compressed"))) {
        frigg_set_error("%s: quantization_config.quantization_status %s is not supported (only \"compressed\")", path,
                        s ? s : "(not a string)");
        return -1;
    }
    if (!absent(json_object_get(qc, "kv_cache_scheme"))) {
        frigg_set_error("%s: quantization_config.kv_cache_scheme: KV-cache quantization is not supported", path);
        return -1;
    }
    static const char *const empty_ok[] = {"sparsity_config", "transform_config", "moe_sparsity_config", NULL};
    for (int i = 0; empty_ok[i]; i++) {
        v = json_object_get(qc, empty_ok[i]);
        if (!absent(v) && !(json_is_object(v) && !json_object_size(v))) {
            frigg_set_error("%s: quantization_config.%s is set: %s is not supported", path, empty_ok[i],
                            i == 1 ? "a transform (rotation)" : "sparsity");
            return -1;
        }
    }
    v = json_object_get(qc, "ignore");
    if (!absent(v)) {
        if (!is_str_array(v, 0)) {
            frigg_set_error("%s: quantization_config.ignore must be a list of strings", path);
            return -1;
        }
        q->ignore = str_list(v, &q->nignore);
    }
    json_t *cg = json_object_get(qc, "config_groups");
    if (!json_is_object(cg) || !json_object_size(cg)) {
        frigg_set_error("%s: quantization_config.config_groups must be a non-empty object", path);
        return -1;
    }
    q->groups = frigg_xcalloc(json_object_size(cg), sizeof *q->groups);
    json_object_foreach(cg, k, v) {
        frigg_quant_group *g = &q->groups[q->ngroups++];
        g->name = frigg_xstrdup(k);
        if (json_is_array(v)) {
            frigg_set_error("%s: quantization_config.config_groups.%s: a preset scheme name with a target list is not "
                            "supported (write the scheme out: targets, weights)", path, k);
            return -1;
        }
        if (!json_is_object(v)) {
            frigg_set_error("%s: quantization_config.config_groups.%s must be an object", path, k);
            return -1;
        }
        const char *gk;
        json_t *gv;
        json_object_foreach(v, gk, gv) {
            if (!key_in(gk, gknown)) {
                frigg_set_error("%s: quantization_config.config_groups.%s: unknown key \"%s\"", path, k, gk);
                return -1;
            }
        }
        if (!absent(json_object_get(v, "input_activations")) || !absent(json_object_get(v, "output_activations"))) {
            frigg_set_error("%s: quantization_config.config_groups.%s: activation quantization (%s) is not supported "
                            "(weight-only)", path, k,
                            absent(json_object_get(v, "input_activations")) ? "output_activations" : "input_activations");
            return -1;
        }
        gv = json_object_get(v, "format");
        if (!absent(gv) && (!(s = jstr(gv)) || strcmp(s, "pack-quantized"))) {
            frigg_set_error("%s: quantization_config.config_groups.%s.format %s is not supported (only "
                            "\"pack-quantized\")", path, k, s ? s : "(not a string)");
            return -1;
        }
        gv = json_object_get(v, "targets");
        if (!is_str_array(gv, 1)) {
            frigg_set_error("%s: quantization_config.config_groups.%s.targets must be a non-empty list of strings", path,
                            k);
            return -1;
        }
        g->targets = str_list(gv, &g->ntargets);
        gv = json_object_get(v, "weights");
        if (absent(gv)) {
            frigg_set_error("%s: quantization_config.config_groups.%s has no weights scheme (only weight quantization "
                            "is supported)", path, k);
            return -1;
        }
        if (parse_qargs(gv, g, path)) return -1;
    }
    return 0;
}

void frigg_quant_config_free(frigg_quant_config *q) {
    for (int i = 0; i < q->ngroups; i++) {
        for (int j = 0; j < q->groups[i].ntargets; j++) free(q->groups[i].targets[j]);
        free(q->groups[i].targets);
        free(q->groups[i].name);
    }
    free(q->groups);
    for (int i = 0; i < q->nignore; i++) free(q->ignore[i]);
    free(q->ignore);
    memset(q, 0, sizeof *q);
}

int frigg_quant_config_parse(frigg_quant_config *q, const char *text, size_t len, const char *path) {
    memset(q, 0, sizeof *q);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        frigg_set_error("%s: invalid JSON at line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
        return -1;
    }
    json_t *qc = json_is_object(root) ? json_object_get(root, "quantization_config") : NULL;
    int rc = absent(qc) ? 0 : parse_quant(qc, q, path);
    json_decref(root);
    return rc;
}

int frigg_config_parse(frigg_config *c, const char *text, size_t len, const char *path) {
    memset(c, 0, sizeof *c);
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        frigg_set_error("%s: invalid JSON at line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        frigg_set_error("%s: top level must be a JSON object", path);
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!is_known(key)) {
            frigg_set_error("%s: unknown key \"%s\" (not part of HRM-Text's config; refusing to guess)", path, key);
            goto out;
        }
    }
    json_t *mt = json_object_get(root, "model_type");
    if (mt && (!json_is_string(mt) || strcmp(json_string_value(mt), "hrm_text"))) {
        frigg_set_error("%s: \"model_type\" is %s%s%s, expected \"hrm_text\"", path, json_is_string(mt) ? "\"" : "",
                        json_is_string(mt) ? json_string_value(mt) : "not a string", json_is_string(mt) ? "\"" : "");
        goto out;
    }
    json_t *act = json_object_get(root, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu"))) {
        frigg_set_error("%s: \"hidden_act\" = %s is not supported (only \"silu\")", path,
                        json_is_string(act) ? json_string_value(act) : "(not a string)");
        goto out;
    }
    if (require_false(root, "attention_bias", path) || require_false(root, "mlp_bias", path) ||
        require_false(root, "tie_word_embeddings", path))
        goto out;
    double drop;
    if (get_num(root, "attention_dropout", 0.0, &drop, NULL, path)) goto out;

    /* Defaults are HrmTextConfig's class defaults (MODEL.md §1), not Mimir's values. */
    const int BIG = 1 << 24;
    if (get_int(root, "vocab_size", 151808, 1, BIG, &c->vocab_size, path) ||
        get_int(root, "hidden_size", 1536, 1, 65536, &c->hidden_size, path) ||
        get_int(root, "intermediate_size", 4096, 1, 1 << 20, &c->intermediate_size, path) ||
        get_int(root, "num_attention_heads", 12, 1, 1024, &c->num_heads, path) ||
        get_int(root, "head_dim", 128, 2, 1024, &c->head_dim, path) ||
        get_int(root, "H_cycles", 2, 1, 64, &c->H_cycles, path) ||
        get_int(root, "L_cycles", 3, 1, 64, &c->L_cycles, path) ||
        get_int(root, "max_position_embeddings", 2048, 1, BIG, &c->max_position_embeddings, path) ||
        get_int(root, "bos_token_id", -1, 0, BIG, &c->bos_token_id, path) ||
        get_int(root, "pad_token_id", -1, 0, BIG, &c->pad_token_id, path))
        goto out;
    if (c->head_dim % 2) {
        frigg_set_error("%s: \"head_dim\" = %d must be even for rotate-half RoPE", path, c->head_dim);
        goto out;
    }
    if (c->num_heads * c->head_dim != c->hidden_size) {
        frigg_set_error("%s: \"hidden_size\" = %d is not num_attention_heads x head_dim = %d x %d (the engine runs "
                        "HF's MHA layout)", path, c->hidden_size, c->num_heads, c->head_dim);
        goto out;
    }

    /* The per-stack vs slot-count rule (MODEL.md §1, rewrite 3). */
    int nhl, nlps;
    if (get_int(root, "num_hidden_layers", 16, 1, 1 << 16, &nhl, path) ||
        get_int(root, "num_layers_per_stack", -1, 1, 1 << 16, &nlps, path))
        goto out;
    int runs = c->H_cycles * (c->L_cycles + 1);
    if (nlps > 0) {
        c->layers_per_stack = nlps;
        if (nhl != nlps * runs) {
            frigg_set_error("%s: \"num_hidden_layers\" = %d but num_layers_per_stack x H_cycles x (L_cycles+1) = "
                            "%d x %d x %d = %d", path, nhl, nlps, c->H_cycles, c->L_cycles + 1, nlps * runs);
            goto out;
        }
    } else {
        c->layers_per_stack = nhl;
    }
    c->num_slots = c->layers_per_stack * runs;

    if (get_num(root, "rms_norm_eps", 1e-6, &c->rms_norm_eps, NULL, path)) goto out;
    if (c->rms_norm_eps <= 0) {
        frigg_set_error("%s: \"rms_norm_eps\" must be > 0", path);
        goto out;
    }
    double init_range;
    int has_init, has_scale;
    if (get_num(root, "initializer_range", 0.02, &init_range, &has_init, path) ||
        get_num(root, "embedding_scale", 0.0, &c->embedding_scale, &has_scale, path))
        goto out;
    if (!has_scale) {
        if (init_range <= 0) {
            frigg_set_error("%s: \"initializer_range\" must be > 0 to derive embedding_scale", path);
            goto out;
        }
        c->embedding_scale = 1.0 / init_range;
    }

    /* RoPE: rope_parameters, else legacy rope_theta, else 10000. Only the default type exists here. */
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rs && !json_is_null(rs)) {
        frigg_set_error("%s: \"rope_scaling\" is set; only unscaled (\"default\") RoPE is implemented", path);
        goto out;
    }
    json_t *rp = json_object_get(root, "rope_parameters");
    double legacy_theta;
    if (get_num(root, "rope_theta", 10000.0, &legacy_theta, NULL, path)) goto out;
    c->rope_theta = legacy_theta;
    if (rp && !json_is_null(rp)) {
        if (!json_is_object(rp)) {
            frigg_set_error("%s: \"rope_parameters\" must be an object", path);
            goto out;
        }
        const char *rk;
        json_t *rv;
        json_object_foreach(rp, rk, rv) {
            if (!strcmp(rk, "rope_type")) {
                if (!json_is_string(rv) || strcmp(json_string_value(rv), "default")) {
                    frigg_set_error("%s: \"rope_parameters.rope_type\" = %s is not supported (only \"default\")", path,
                                    json_is_string(rv) ? json_string_value(rv) : "(not a string)");
                    goto out;
                }
            } else if (!strcmp(rk, "rope_theta")) {
                if (!json_is_number(rv) || json_number_value(rv) <= 0) {
                    frigg_set_error("%s: \"rope_parameters.rope_theta\" must be a positive number", path);
                    goto out;
                }
                c->rope_theta = json_number_value(rv);
            } else if (!strcmp(rk, "partial_rotary_factor")) {
                if (!json_is_number(rv) || json_number_value(rv) != 1.0) {
                    frigg_set_error("%s: \"rope_parameters.partial_rotary_factor\" other than 1.0 is not supported", path);
                    goto out;
                }
            } else {
                frigg_set_error("%s: \"rope_parameters.%s\" is not supported by the default RoPE", path, rk);
                goto out;
            }
        }
    }
    if (c->rope_theta <= 0) {
        frigg_set_error("%s: \"rope_theta\" must be > 0", path);
        goto out;
    }
    if (get_bool(root, "prefix_lm", true, &c->prefix_lm, path)) goto out;

    json_t *eos = json_object_get(root, "eos_token_id");
    if (eos && json_is_integer(eos)) {
        c->eos_token_ids[c->n_eos++] = (int)json_integer_value(eos);
    } else if (eos && json_is_array(eos)) {
        size_t i;
        json_t *e;
        json_array_foreach(eos, i, e) {
            if (!json_is_integer(e) || c->n_eos >= FRIGG_MAX_EOS) {
                frigg_set_error("%s: \"eos_token_id\" must be an integer or a list of at most %d integers", path,
                                FRIGG_MAX_EOS);
                goto out;
            }
            c->eos_token_ids[c->n_eos++] = (int)json_integer_value(e);
        }
    } else if (eos && !json_is_null(eos)) {
        frigg_set_error("%s: \"eos_token_id\" must be an integer or a list", path);
        goto out;
    }
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] < 0 || c->eos_token_ids[i] >= c->vocab_size) {
            frigg_set_error("%s: \"eos_token_id\" %d is outside the vocabulary (%d)", path, c->eos_token_ids[i],
                            c->vocab_size);
            goto out;
        }
    if (c->bos_token_id >= c->vocab_size || c->pad_token_id >= c->vocab_size) {
        frigg_set_error("%s: bos/pad token id outside the vocabulary (%d)", path, c->vocab_size);
        goto out;
    }
    json_t *kvh = json_object_get(root, "num_key_value_heads");
    if (kvh && !json_is_null(kvh) && (!json_is_integer(kvh) || json_integer_value(kvh) != c->num_heads)) {
        /* HF ignores this key and runs MHA; a GQA checkpoint would not even load there. */
        frigg_set_error("%s: \"num_key_value_heads\" must equal num_attention_heads (%d): HRM-Text is MHA", path,
                        c->num_heads);
        goto out;
    }
    json_t *qc = json_object_get(root, "quantization_config");
    if (!absent(qc)) { /* checked whole here; the loader parses it again to bind the weights */
        frigg_quant_config q;
        int qrc = parse_quant(qc, &q, path);
        frigg_quant_config_free(&q);
        if (qrc) goto out;
        c->quantized = true;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int frigg_config_load(frigg_config *c, const char *path) {
    size_t len;
    char *text = frigg_read_file(path, &len);
    if (!text) return -1;
    int rc = frigg_config_parse(c, text, len, path);
    free(text);
    return rc;
}
