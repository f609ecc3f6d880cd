/* model_random.h — models with random weights made in memory, for tests and frigg-bench: no file needed,
 * deterministic from a seed, any thread count. */
#ifndef FRIGG_MODEL_RANDOM_H
#define FRIGG_MODEL_RANDOM_H

#include <stdint.h>

#include "model.h"

/* DFM-Mimir v1's config (MODEL.md §1): 1,786,775,040 parameters. */
void frigg_config_mimir(frigg_config *c);

/* A packed-layout model with c's shapes. Linear weights ~ U with std 1/sqrt(in); embeddings and z_L_init
 * std 1 (the scale a trained model's scaled embeddings have); lm_head std lm_gain/sqrt(hidden), > 1 makes
 * greedy decoding stable. c must already be valid (num_slots etc. filled in). */
frigg_model *frigg_model_random(const frigg_config *c, uint64_t seed, float lm_gain);

#endif
