/* ctensors.h — the compressed-tensors "pack-quantized" checkpoint format as frigg-quantize writes it and a
 * quantized loader reads it. This comment is the one description of the format in this repository.
 *
 * Source read: PyPI compressed-tensors 0.20.1 (compressed_tensors-0.20.1-py3-none-any.whl), the library
 * llm-compressor writes with and HF transformers (quantizers/quantizer_compressed_tensors.py, 5.17.0) and
 * vLLM read with. Files (the 0.20 tree; older releases had them under compressors/quantized_compressors/):
 *   [PQ]  compressed_tensors/compressors/pack_quantized/base.py     PackedQuantizationCompressor
 *   [PH]  compressed_tensors/compressors/pack_quantized/helpers.py  pack_to_int32, unpack_from_int32
 *   [QA]  compressed_tensors/quantization/quant_args.py             QuantizationArgs (pydantic, extra="forbid")
 *   [QS]  compressed_tensors/quantization/quant_scheme.py           QuantizationScheme (extra="forbid")
 *   [QC]  compressed_tensors/quantization/quant_config.py           QuantizationConfig
 *   [IN]  compressed_tensors/quantization/lifecycle/initialize.py   scale shape and dtype
 *   [FW]  compressed_tensors/quantization/lifecycle/forward.py, forward_helpers.py  quantize / dequantize
 *   [HE]  compressed_tensors/quantization/utils/helpers.py          calculate_qparams, calculate_range
 *   [MC]  compressed_tensors/compressors/model_compressors/model_compressor.py  update_config (config.json)
 *   [DQ]  compressed_tensors/entrypoints/convert/converters/ct_dequantizer.py   model-free decompression
 *
 * TENSORS. A quantized module M (an nn.Linear, or an nn.Embedding: both are COMPRESSIBLE_MODULE_TYPES in
 * compressors/base.py) has no "M.weight"; it has three tensors instead ([PQ] compression_param_names, for a
 * symmetric weight-only scheme: no weight_zero_point, no input_global_scale):
 *   M.weight_packed  I32  [rows, ceil(cols * bits / 32)]   q + 2^(bits-1) (offset binary), densely packed
 *   M.weight_scale   BF16 [rows, 1]          strategy "channel" (one scale per output row)
 *                    BF16 [rows, cols / g]   strategy "group", group_size g along the input dimension
 *   M.weight_shape   I64  [2]  = {rows, cols} (torch.tensor(weight.shape))
 * rows/cols are the nn.Linear [out][in] (nn.Embedding [vocab][hidden]) shape. The scale's dtype is the
 * model's dtype ([IN] initialize_qparams: scale_dtype = the weight's dtype when it is f16/bf16/f32/f64), so
 * BF16 for DFM-Mimir; frigg-quantize always writes BF16 (an F32 source's values are bf16 in frigg anyway).
 * Dequantization ([FW] _dequantize): w = q.to(scale.dtype) * scale, the scale of element (r, c) being
 * weight_scale[r][0] (channel) or weight_scale[r][c / g] (group). In a bf16 model that product is rounded
 * to bf16 (q * scale has up to 15 significant bits for int8), so the weight HF runs is bf16(q * scale); an
 * engine that wants HF's numbers rounds the same way (q * scale in fp32 is exact and differs from it by at
 * most half a bf16 ulp).
 *
 * PACKING ([PH] pack_to_int32, packed_dim=1, the default and the only one weights use): each row
 * separately; u = q + 2^(bits-1) (int4: q in [-8, 7] -> u in [0, 15]; int8: q in [-128, 127] -> u in
 * [0, 255]); element i of the row goes to bits (i*bits) % 32 .. +bits-1 of word (i*bits) / 32 (least
 * significant bits first); a row whose cols*bits is not a multiple of 32 is padded with zero bits up to
 * whole words (padding is added after the offset, so padding bits are 0, not the offset). For bits 4 and 8
 * no element straddles a word. The words are int32 in little-endian order (safetensors), so as bytes:
 *   int8: byte c of the row's data is u[c] (uint8);
 *   int4: byte b holds u[2b] in its low nibble and u[2b+1] in its high nibble.
 * [PH] unpack_from_int32 reads exactly that (for 4 bits it splits bytes into (low, high) nibbles, then - 8).
 *
 * config.json: the source's keys plus "quantization_config" ([MC] update_config = QuantizationConfig's
 * model_dump + version/quant_method/sparsity_config/transform_config):
 *   {"config_groups": {"group_0": SCHEME, ...}, "format": "pack-quantized", "global_compression_ratio": null,
 *    "ignore": [], "kv_cache_scheme": null, "moe_sparsity_config": null, "quant_method": "compressed-tensors",
 *    "quantization_status": "compressed", "sparsity_config": {}, "transform_config": {}, "version": "0.20.1"}
 *   SCHEME = {"targets": [...], "weights": ARGS, "input_activations": null, "output_activations": null,
 *             "format": "pack-quantized"}
 *   ARGS   = {"num_bits": 4|8, "type": "int", "symmetric": true, "strategy": "channel"|"group",
 *             "group_size": null (channel) | g (group), "dynamic": false}
 * (QuantizationArgs and QuantizationScheme forbid unknown keys; its serializer drops actorder,
 * block_structure, scale_dtype, observer, observer_kwargs, zp_dtype when unset, so frigg writes none.)
 * Targets are matched against module names: "re:REGEX" is re.match, anything else an exact module name or
 * (model-based matching only) a class name such as "Linear". frigg writes exact names and one regex, never
 * class names, so the model-free matcher ([DQ]: "Linear" in targets there means "every tensor") and HF's
 * model-based one select the same modules, and the groups are disjoint. A loader should decide a module's
 * scheme by finding "M.weight_packed" and its group by the targets, or simply from the tensors: bits =
 * 32 * packed_cols / cols rounded (8 or 4 here), channel when weight_scale has one column, else group =
 * cols / scale_cols.
 *
 * ROUNDING AND RANGE. The format stores q and the scale; how they were chosen is the writer's business and
 * any q within [-2^(bits-1), 2^(bits-1)-1] decompresses. For reference, compressed-tensors' own minmax
 * quantization ([HE] calculate_qparams symmetric, [FW] forward_helpers.py _quantize) is scale = max|w| /
 * ((q_max - q_min) / 2) with q_min = -2^(bits-1), q_max = 2^(bits-1) - 1 ([HE] _calculate_range), i.e.
 * max|w| / 127.5 for int8 and / 7.5 for int4, q = torch.round(clamp(w / scale, q_min, q_max)) (round half
 * to even; w / scale evaluated in the weight's dtype), a zero scale replaced by the scale dtype's eps
 * (torch.finfo(bf16).eps = 2^-7). frigg's rules are in quant.h.
 *
 * HRM-TEXT NAMES (frigg's decision). DFM-Mimir's checkpoint packs gate/q/k/v into attn.gqkv_proj and
 * gate/up into mlp.gate_up_proj (MODEL.md §2.1); HF's hrm_text has no such modules: HrmTextAttention has
 * self_attn.{gate,q,k,v,o}_proj and HrmTextMLP mlp.{gate,up,down}_proj (transformers 5.17.0
 * models/hrm_text/modeling_hrm_text.py), and transformers splits a packed bf16 checkpoint at load through
 * conversion_mapping.py's "hrm_text" rules (Chunk(dim=0) on "attn.gqkv_proj.weight" and
 * "mlp.gate_up_proj.weight", a regex *search*, so it would also hit "...gate_up_proj.weight_packed" and chunk
 * its weight_shape [2] into nonsense). A quantized build therefore always uses HF's split module names, in
 * the tensors and in quantization_config, whatever the source layout:
 *   model.embed_tokens                                  (nn.Embedding [V][D])
 *   lm_head                                             (nn.Linear [V][D])
 *   model.{L,H}_module.layers.N.self_attn.{gate,q,k,v,o}_proj   ([D][D] each)
 *   model.{L,H}_module.layers.N.mlp.{gate,up}_proj      ([I][D]),  mlp.down_proj ([D][I])
 *   model.z_L_init                                      copied unchanged (source dtype), not quantized
 * Channel and group scales are per output row, so quantizing gqkv_proj's four row blocks separately gives
 * exactly the q and scales of quantizing the packed matrix row by row: a loader that wants the packed
 * [4D][D] matrix concatenates the four weight_packed (and weight_scale) tensors by rows, gate, q, k, v
 * (mlp: gate, up), as model.c does for the bf16 packed layout.
 *
 * WHAT LLM-COMPRESSOR WRITES FOR A PACKED SOURCE (llmcompressor 0.14.0.1, compressed-tensors 0.19.0,
 * transformers 5.17.0; golden/fixtures/tiny-llmc-*). oneshot quantizes HF's split in-memory modules, then
 * save_pretrained reverses the load-time conversion, so the file has the packed names after all, each tensor
 * the parts' tensors concatenated along dim 0: model.S.layers.N.attn.gqkv_proj.weight_packed [4D][words],
 * .weight_scale [4D][ngroups], and .weight_shape I64 [8] = {D, D, D, D, D, D, D, D} (the four parts' {rows, cols}
 * one after another; mlp.gate_up_proj: [4] = {I, D, I, D}); attn.o_proj and mlp.down_proj as usual. transformers
 * loads it back (Chunk(dim=0) splits weight_shape [8] into four [2]), and so does frigg's loader: for a packed
 * module it accepts weight_shape either [2] = {rows, cols} of the whole matrix or its parts' shapes, each
 * {rows / parts, cols}. Its quantization_config targets the class "Linear" and ignores "lm_head" (the recipes of
 * llm-compressor's examples), so the nn.Embedding and lm_head stay bf16; W8A16 is int8 with group_size 128
 * (strategy "group", not "channel"), W4A16 int4 group 128; the weights args carry "observer":
 * "memoryless_minmax", "observer_kwargs": {} and, from GPTQ, "actorder": "static" (no g_idx tensor), all
 * accepted; version "0.19.0".
 *
 * frigg-quantize's groups: --method int8: one group, int8 channel, targets {the decoder-layer regex,
 * "lm_head", "model.embed_tokens"}; --method int4: group_0 int4 group (g = --group, default 128) targeting
 * the decoder-layer linears (FRIGG_CT_CORE_REGEX), group_1 int8 channel targeting "lm_head" and
 * "model.embed_tokens". With --keep-embedding "model.embed_tokens" is left out of the targets and
 * model.embed_tokens.weight is copied unchanged (source dtype): transformers 5.17.0 cannot load a build
 * whose nn.Embedding is compressed, because PreTrainedModel._init_weights (modeling_utils.py) calls
 * init.normal_(module.weight) on every nn.Embedding without the getattr(module, "weight") guard it has for
 * nn.Linear, and a compressed module has no "weight" (AttributeError in _initialize_missing_keys); with
 * that one line guarded, it loads and runs. All tensors are in one model.safetensors, ordered by element size then name (as the
 * safetensors serializer orders them), its __metadata__ holding "format": "pt" and frigg's keys
 * (frigg_version, frigg_method, frigg_group_size, frigg_int4_scale, frigg_source_sha256). */
#ifndef FRIGG_CTENSORS_H
#define FRIGG_CTENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FRIGG_CT_VERSION "0.20.1" /* the compressed-tensors release this file describes */
#define FRIGG_CT_FORMAT "pack-quantized"
#define FRIGG_CT_METHOD "compressed-tensors"
/* The decoder-layer linears of HF's hrm_text, as a compressed-tensors target (Python re.match). */
#define FRIGG_CT_CORE_REGEX "re:^model\\.[LH]_module\\.layers\\.[0-9]+\\.(self_attn|mlp)\\.(gate|q|k|v|o|up|down)_proj$"

/* The eight linears of one decoder layer, in frigg_layer's order (gate, q, k, v, o, mlp_gate, up, down):
 * HF module name suffixes under "model.{L,H}_module.layers.N.". */
static const char *const frigg_ct_layer_modules[8] = {
    "self_attn.gate_proj", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
    "self_attn.o_proj",    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj",
};

/* int32 words, and bytes, of one packed row of `cols` values of `bits` bits (4 or 8). */
static inline int frigg_ct_packed_words(int cols, int bits) { return (int)(((int64_t)cols * bits + 31) / 32); }
static inline size_t frigg_ct_packed_row_bytes(int cols, int bits) { return 4u * (size_t)frigg_ct_packed_words(cols, bits); }

/* Pack one row of q (int4: [-8, 7], int8: [-128, 127]) into its words' bytes (little-endian int32 words):
 * exactly pack_to_int32 on a [1, cols] tensor. out has frigg_ct_packed_row_bytes(cols, bits) bytes. */
static inline void frigg_ct_pack_row(const int8_t *q, int cols, int bits, uint8_t *out) {
    size_t nb = frigg_ct_packed_row_bytes(cols, bits);
    memset(out, 0, nb);
    if (bits == 8) {
        for (int i = 0; i < cols; i++) out[i] = (uint8_t)(q[i] + 128);
    } else { /* bits == 4 */
        for (int i = 0; i < cols; i++) out[i >> 1] |= (uint8_t)((unsigned)(q[i] + 8) << (4 * (i & 1)));
    }
}

/* The inverse: unpack_from_int32 on one row. */
static inline void frigg_ct_unpack_row(const uint8_t *in, int cols, int bits, int8_t *q) {
    if (bits == 8) {
        for (int i = 0; i < cols; i++) q[i] = (int8_t)((int)in[i] - 128);
    } else {
        for (int i = 0; i < cols; i++) q[i] = (int8_t)((int)((in[i >> 1] >> (4 * (i & 1))) & 15) - 8);
    }
}

#endif
