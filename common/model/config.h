/* config.h — an HRM-Text config.json, with transformers' defaults and __post_init__ rules applied
 * (docs: shared MODEL.md §1). Every field the engine reads is here; nothing is hard-coded elsewhere. */
#ifndef FRIGG_CONFIG_H
#define FRIGG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define FRIGG_MAX_EOS 8

typedef struct {
    int vocab_size;
    int hidden_size;           /* D */
    int intermediate_size;     /* I */
    int layers_per_stack;      /* n: real blocks in each of the L and H stacks */
    int num_slots;             /* KV slots = n * H_cycles * (L_cycles + 1) */
    int num_heads;
    int head_dim;
    int H_cycles, L_cycles;
    int max_position_embeddings;
    double rms_norm_eps;
    double embedding_scale;
    double rope_theta;
    bool prefix_lm;
    int bos_token_id, pad_token_id;      /* -1 when absent */
    int eos_token_ids[FRIGG_MAX_EOS];
    int n_eos;
    bool quantized;      /* config.json has a quantization_config (accepted: see frigg_quant_config) */
} frigg_config;

/* A config.json "quantization_config" that the engines run: compressed-tensors (quant_method
 * "compressed-tensors"), format "pack-quantized", weight-only, symmetric int4 or int8, strategy "channel"
 * (one scale per output row) or "group" (one scale per group_size inputs of a row). Everything else —
 * another quant_method or format, asymmetric (zero points), float (fp8/fp4) types, num_bits other than 4/8,
 * tensor/block/token strategies, dynamic weights, activation or KV-cache quantization, actorder "group"
 * (g_idx), sparsity or transforms, preset scheme names — is refused by frigg_config_parse with an error
 * naming it. Which module a group covers follows compressed-tensors' matching (utils/match.py): a target or
 * ignore entry "re:<regex>" matches a module name by Python's re.match (anchored at the start), any other
 * entry matches the exact module name or a class name (Linear, Embedding, Module). */
typedef struct {
    char *name;          /* the config_groups key */
    int num_bits;        /* 4 or 8 */
    int group_size;      /* 0: strategy "channel"; > 0: strategy "group" */
    char **targets;
    int ntargets;
} frigg_quant_group;

typedef struct {
    frigg_quant_group *groups;
    int ngroups;         /* 0: no quantization_config */
    char **ignore;
    int nignore;
} frigg_quant_config;

/* The quantization_config of a config.json text (ngroups 0 when there is none). 0, or -1 with frigg_error();
 * free with frigg_quant_config_free (also after a failure). */
int frigg_quant_config_parse(frigg_quant_config *q, const char *json_text, size_t len, const char *path);
void frigg_quant_config_free(frigg_quant_config *q);

/* Parse config.json text; path is only used in messages. 0 on success, -1 with frigg_error(). */
int frigg_config_parse(frigg_config *c, const char *json_text, size_t len, const char *path);
int frigg_config_load(frigg_config *c, const char *path);

/* KV slot of decoder layer `layer` in module run r (r = h*(L_cycles+1)+l; the H run has l = L_cycles). */
static inline int frigg_slot(const frigg_config *c, int run, int layer) {
    return run * c->layers_per_stack + layer;
}
static inline int frigg_num_runs(const frigg_config *c) { return c->H_cycles * (c->L_cycles + 1); }

#endif
