#!/usr/bin/env python3
"""make-gguf-fixture.py LLAMA_CPP_DIR LLAMA_QUANTIZE OUT [--seed N] — golden/fixtures/tiny-gguf: a tiny random HRM-Text
checkpoint (packed layout, bf16) and the GGUF files llama.cpp's own tools make of it: convert_hf_to_gguf.py (through
scripts/llamacpp/convert.py) to BF16, then llama-quantize to Q8_0, Q4_K_M (Q4_K + Q6_K) and Q5_K_M (Q5_K + Q6_K).

The shapes are the smallest the K-quants take whole: every row length (hidden 256, intermediate 256) is one 256-value
super-block, so llama-quantize keeps the type it was asked for on every matrix (a row that is not a multiple of 256
would fall back to another type). vocab 512, 4 heads x 64, 1 layer per stack, H_cycles 2, L_cycles 1 (4 KV slots).
The tokenizer is golden/default's tokenizer.json cut to its first 512 ids (the special and byte tokens and a few
merges: the merges whose parts or result fall outside are dropped), because the converter requires the tokenizer to
fit the vocabulary. Weights from numpy's PCG64 with --seed: embeddings std 1/16 (embedding_scale 16), projections
std 1/sqrt(fan_in), lm_head std 8/sqrt(hidden), z_L_init std 1; rounded to bf16 (nearest even).

Run with the oracle environment (torch and transformers, which the converter imports): deterministic from --seed.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("llama_cpp_dir")
ap.add_argument("llama_quantize")
ap.add_argument("out")
ap.add_argument("--seed", type=int, default=1234)
a = ap.parse_args()
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

V, D, HEADS, HD, I, N, HC, LC = 512, 256, 4, 64, 256, 1, 2, 1
os.makedirs(a.out, exist_ok=True)
cfg = {
    "architectures": ["HrmTextForCausalLM"], "model_type": "hrm_text", "vocab_size": V, "hidden_size": D,
    "intermediate_size": I, "num_hidden_layers": N, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
    "head_dim": HD, "hidden_act": "silu", "max_position_embeddings": 256, "initializer_range": 0.0625,
    "embedding_scale": 16.0, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "attention_bias": False, "mlp_bias": False,
    "attention_dropout": 0.0, "tie_word_embeddings": False, "use_cache": True, "H_cycles": HC, "L_cycles": LC,
    "prefix_lm": True, "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1, "torch_dtype": "bfloat16",
}
with open(os.path.join(a.out, "config.json"), "w") as f:
    json.dump(cfg, f, indent=1)
    f.write("\n")

# the tokenizer: ids < V
tok = json.load(open(os.path.join(root, "golden/default/tokenizer.json")))
vocab = {s: i for s, i in tok["model"]["vocab"].items() if i < V}
tok["model"]["vocab"] = vocab
tok["model"]["merges"] = [m for m in tok["model"]["merges"] if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
tok["added_tokens"] = [t for t in tok["added_tokens"] if t["id"] < V]
with open(os.path.join(a.out, "tokenizer.json"), "w") as f:
    json.dump(tok, f, ensure_ascii=False)

rng = np.random.Generator(np.random.PCG64(a.seed))


def bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


tensors = {"model.embed_tokens.weight": rng.normal(0, 1 / 16, (V, D)),
           "lm_head.weight": rng.normal(0, 8 / np.sqrt(D), (V, D)),
           "model.z_L_init": rng.normal(0, 1, (D,))}
for s in ("L_module", "H_module"):
    for n in range(N):
        p = f"model.{s}.layers.{n}."
        tensors[p + "attn.gqkv_proj.weight"] = rng.normal(0, 1 / np.sqrt(D), (4 * D, D))
        tensors[p + "attn.o_proj.weight"] = rng.normal(0, 1 / np.sqrt(D), (D, D))
        tensors[p + "mlp.gate_up_proj.weight"] = rng.normal(0, 1 / np.sqrt(D), (2 * I, D))
        tensors[p + "mlp.down_proj.weight"] = rng.normal(0, 1 / np.sqrt(I), (D, I))
header, blobs, off = {}, [], 0
for name in sorted(tensors):
    b = bf16(tensors[name]).tobytes()
    header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

py = sys.executable
bf = os.path.join(a.out, "model-bf16.gguf")
subprocess.run([py, os.path.join(root, "scripts/llamacpp/convert.py"), a.llama_cpp_dir, a.out, "--outtype", "bf16",
                "--outfile", bf], check=True)
for t in ("Q8_0", "Q4_K_M", "Q5_K_M"):
    subprocess.run([a.llama_quantize, bf, os.path.join(a.out, f"model-{t.lower()}.gguf"), t, "1"], check=True,
                   stdout=subprocess.DEVNULL)
print("make-gguf-fixture: wrote", a.out)
