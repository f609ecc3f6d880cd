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
} frigg_config;

/* Parse config.json text; path is only used in messages. 0 on success, -1 with frigg_error(). */
int frigg_config_parse(frigg_config *c, const char *json_text, size_t len, const char *path);
int frigg_config_load(frigg_config *c, const char *path);

/* KV slot of decoder layer `layer` in module run r (r = h*(L_cycles+1)+l; the H run has l = L_cycles). */
static inline int frigg_slot(const frigg_config *c, int run, int layer) {
    return run * c->layers_per_stack + layer;
}
static inline int frigg_num_runs(const frigg_config *c) { return c->H_cycles * (c->L_cycles + 1); }

#endif
