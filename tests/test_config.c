/* test_config.c — config.json rules of MODEL.md §1: defaults, the per-stack/slot-count rule, RoPE
 * keys, and refusals that name the key. */
#include <math.h>

#include "model/config.h"
#include "harness.h"
#include "base/util.h"

static int parse(frigg_config *c, const char *js) { return frigg_config_parse(c, js, strlen(js), "config.json"); }

static void expect_reject(const char *js, const char *needle) {
    frigg_config c;
    int rc = parse(&c, js);
    CHECK(rc == -1, "accepted: %s", js);
    if (rc == -1) CHECK(strstr(frigg_error(), needle) != NULL, "error \"%s\" does not mention \"%s\"", frigg_error(), needle);
}

int main(void) {
    TEST_MAIN_BEGIN("test_config");
    frigg_config c;

    /* The Mimir export: per-stack count in num_hidden_layers, no num_layers_per_stack. */
    const char *mimir = "{\"model_type\":\"hrm_text\",\"vocab_size\":262144,\"hidden_size\":1536,"
                        "\"intermediate_size\":4096,\"num_hidden_layers\":16,\"num_attention_heads\":12,"
                        "\"num_key_value_heads\":12,\"head_dim\":128,\"max_position_embeddings\":4096,"
                        "\"initializer_range\":0.025515518153991442,\"embedding_scale\":39.191835884530846,"
                        "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000.0},\"rope_theta\":10000.0,"
                        "\"H_cycles\":2,\"L_cycles\":3,\"L_bp_cycles\":[0,3],\"prefix_lm\":true,"
                        "\"bos_token_id\":2,\"eos_token_id\":106,\"pad_token_id\":0}";
    CHECK(parse(&c, mimir) == 0, "%s", frigg_error());
    CHECK(c.layers_per_stack == 16 && c.num_slots == 128, "layers %d slots %d", c.layers_per_stack, c.num_slots);
    CHECK(c.embedding_scale == 39.191835884530846, "scale %.17g", c.embedding_scale);
    CHECK(c.n_eos == 1 && c.eos_token_ids[0] == 106, "eos");
    CHECK(frigg_slot(&c, 3, 5) == 53 && frigg_num_runs(&c) == 8, "slot mapping");

    /* save_pretrained form: num_hidden_layers is the slot count when num_layers_per_stack is present. */
    CHECK(parse(&c, "{\"num_hidden_layers\":128,\"num_layers_per_stack\":16}") == 0, "%s", frigg_error());
    CHECK(c.layers_per_stack == 16 && c.num_slots == 128, "saved form: layers %d slots %d", c.layers_per_stack,
          c.num_slots);
    expect_reject("{\"num_hidden_layers\":100,\"num_layers_per_stack\":16}", "num_hidden_layers");

    /* The schedule comes from the file, never 2/3. */
    CHECK(parse(&c, "{\"num_hidden_layers\":3,\"H_cycles\":3,\"L_cycles\":1}") == 0, "%s", frigg_error());
    CHECK(c.num_slots == 3 * 3 * 2 && c.H_cycles == 3 && c.L_cycles == 1, "custom schedule slots %d", c.num_slots);

    /* Class defaults, not Mimir's (trap T5): vocab 151808, max_pos 2048, scale 1/0.02 = 50. */
    CHECK(parse(&c, "{}") == 0, "%s", frigg_error());
    CHECK(c.vocab_size == 151808 && c.max_position_embeddings == 2048 && fabs(c.embedding_scale - 50.0) < 1e-12 &&
              c.layers_per_stack == 16 && c.num_slots == 128 && c.rope_theta == 10000.0 && c.prefix_lm,
          "defaults: vocab %d maxpos %d scale %g", c.vocab_size, c.max_position_embeddings, c.embedding_scale);
    CHECK(parse(&c, "{\"initializer_range\":0.025}") == 0 && fabs(c.embedding_scale - 40.0) < 1e-12,
          "embedding_scale derived from initializer_range: %g", c.embedding_scale);
    CHECK(parse(&c, "{\"rope_theta\":500000}") == 0 && c.rope_theta == 500000, "legacy rope_theta");
    CHECK(parse(&c, "{\"rope_theta\":5,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":20000}}") == 0 &&
              c.rope_theta == 20000,
          "rope_parameters wins over legacy rope_theta");
    CHECK(parse(&c, "{\"eos_token_id\":[1,106]}") == 0 && c.n_eos == 2, "eos list");

    expect_reject("{\"rope_parameters\":{\"rope_type\":\"yarn\",\"factor\":4}}", "rope_type");
    expect_reject("{\"rope_scaling\":{\"type\":\"linear\"}}", "rope_scaling");
    expect_reject("{\"hidden_size\":1536,\"num_attention_heads\":12,\"head_dim\":64}", "hidden_size");
    expect_reject("{\"attention_bias\":true}", "attention_bias");
    expect_reject("{\"mlp_bias\":true}", "mlp_bias");
    expect_reject("{\"hidden_act\":\"gelu\"}", "hidden_act");
    expect_reject("{\"tie_word_embeddings\":true}", "tie_word_embeddings");
    expect_reject("{\"model_type\":\"llama\"}", "model_type");
    expect_reject("{\"num_key_value_heads\":4}", "num_key_value_heads");
    expect_reject("{\"sliding_window\":4096}", "sliding_window");
    expect_reject("{\"vocab_size\":\"big\"}", "vocab_size");
    expect_reject("{\"vocab_size\":10,\"eos_token_id\":106}", "eos_token_id");
    expect_reject("[1,2]", "object");
    expect_reject("{\"hidden_size\":", "invalid JSON");
    expect_reject("{\"a\":1,\"a\":2}", "invalid JSON");
    TEST_MAIN_END();
}
