#!/usr/bin/env python3
"""make_fixtures.py — random HRM-Text checkpoints plus Hugging Face's reference outputs for them.

frigg's tests compare the C engines against transformers' `HrmTextForCausalLM` (the reference
implementation, see shared docs/MODEL.md). This script needs torch and transformers >= 5.9 (which
has `hrm_text`), so it runs on the GPU host, not in CI; its outputs are committed under golden/.

Two modes:

  make_fixtures.py --seed 1234 --out golden/fixtures
      Writes three tiny checkpoints (tiny-packed, tiny-split, tiny-sharded), each with a
      reference.json computed by HF on the CPU in bfloat16 (and float32 for last_logits_fp32).

  make_fixtures.py --mimir-size --seed S --out DIR [--prompts FILE] [--device auto|cuda|cpu]
      Writes a full-size DFM-Mimir-shaped random checkpoint (packed layout, bf16,
      1,786,775,040 parameters) generated on the GPU, and DIR/reference.json with HF's outputs on
      that device, for frigg-parity. `--tiny-test` runs the same code path on small shapes.

Why random weights with a non-zero z_L_init and a scaled lm_head: HF's own init zeroes z_L_init
(MODEL.md trap T8), which would hide a missing z_L_init in an engine, and a wide logit spread keeps
greedy decoding away from near-ties, so token-exact comparisons mean something. The Mimir-size model
scales its residual-branch output projections by --branch-scale (0.25; MIMIR_BRANCH_SCALE says why), and
--fp32-ref adds HF's float32 outputs on the same weights beside the bf16 ones.
"""
import argparse
import json
import math
import os
import shutil
import sys
import time
import traceback

import torch
from safetensors import safe_open
from safetensors.torch import save_file

GENERATOR = "scripts/oracle/make_fixtures.py"


# --------------------------------------------------------------------------------------------
# Shapes and config.json

def make_shape(vocab, hidden, heads, head_dim, inter, per_stack, h_cycles, l_cycles, max_pos,
               eos=1, bos=2, pad=0):
    return dict(vocab=vocab, hidden=hidden, heads=heads, head_dim=head_dim, inter=inter,
                per_stack=per_stack, h_cycles=h_cycles, l_cycles=l_cycles, max_pos=max_pos,
                eos=eos, bos=bos, pad=pad)


def converter_config(s, torch_dtype):
    """config.json as HRM-Text's convert_to_hf.py writes it: num_hidden_layers is the per-stack
    depth, no num_layers_per_stack, explicit embedding_scale, rope_parameters plus legacy
    rope_theta, and a num_key_value_heads that HF ignores (MODEL.md §1)."""
    init_range = 1.0 / math.sqrt(s["hidden"])
    return {
        "architectures": ["HrmTextForCausalLM"],
        "model_type": "hrm_text",
        "vocab_size": s["vocab"],
        "hidden_size": s["hidden"],
        "intermediate_size": s["inter"],
        "num_hidden_layers": s["per_stack"],
        "num_attention_heads": s["heads"],
        "num_key_value_heads": s["heads"],
        "head_dim": s["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": s["max_pos"],
        "initializer_range": init_range,
        "embedding_scale": 1.0 / init_range,
        "rms_norm_eps": 1e-06,
        "rope_theta": 10000.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "use_cache": True,
        "H_cycles": s["h_cycles"],
        "L_cycles": s["l_cycles"],
        "L_bp_cycles": [0, s["l_cycles"]],
        "prefix_lm": True,
        "pad_token_id": s["pad"],
        "bos_token_id": s["bos"],
        "eos_token_id": s["eos"],
        "torch_dtype": torch_dtype,
    }


# --------------------------------------------------------------------------------------------
# Random weights (split, HF in-memory names), bf16-representable values

def stacks(s):
    for stack in ("L_module", "H_module"):
        for n in range(s["per_stack"]):
            yield stack, n


MIMIR_BRANCH_SCALE = 0.25
"""Default --branch-scale of --mimir-size: the factor on the std of the residual-branch output projections
(o_proj, down_proj), measured on the H200 (the parity results e3fdda3 and 5edcd3e added to benchmarks/h200-2026-11-30/; HF bf16 sdpa, seed 1):

  scale   HF's own cached-vs-uncached max |dlogit|   causal build caught?   correct engine passes?
  1.0     1.9-2.8 (LeCun, every branch O(1))         yes                    no: no bf16 engine can
  0.5     0.78-0.94                                   yes                    no (98.7% of non-tie steps)
  0.25    0.53-0.63 (0.47-0.63 in eff9e53)              yes (6 of 6 cases)     yes (99.7%)
  0.0625  0.25                                        NO: the mask no longer moves the logits

With O(1) branches over 128 layer steps the random network is chaotic: bf16 rounding alone moves HF's own
logits by ~2-3, so no bf16 implementation (HF included) agrees with another on most top-1s, and the parity
gate could only measure noise. Too small a scale makes the attention, and so the PrefixLM mask, irrelevant.
0.25 keeps both: a trained network's residual updates are likewise small next to the residual stream."""


def random_split_weights(s, gen, device, logit_std, branch_scale=1.0):
    """Every tensor is drawn in float32 from `gen` in a fixed order, then rounded to bf16, so the
    bf16 and fp32 models share exactly the same values.

    Scales (why): embeddings std 1/embedding_scale so the scaled embedding z_H has unit RMS;
    projections std 1/sqrt(fan_in) (LeCun, as the training config's lecun_normal) so every
    residual branch is O(1) (times branch_scale on o_proj and down_proj, see MIMIR_BRANCH_SCALE); lm_head std logit_std/sqrt(hidden) so the logits of the final-normed
    z_H have a spread of about logit_std (peaked, for stable greedy); z_L_init std 1."""
    D, I, A = s["hidden"], s["inter"], s["heads"] * s["head_dim"]

    def draw(shape, std):
        t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * std
        return t.to(torch.bfloat16)

    w = {}
    w["model.embed_tokens.weight"] = draw((s["vocab"], D), 1.0 / math.sqrt(D))
    w["model.z_L_init"] = draw((D,), 1.0)
    for stack, n in stacks(s):
        p = f"model.{stack}.layers.{n}."
        for proj in ("gate_proj", "q_proj", "k_proj", "v_proj"):
            w[p + f"self_attn.{proj}.weight"] = draw((A, D), 1.0 / math.sqrt(D))
        w[p + "self_attn.o_proj.weight"] = draw((D, A), branch_scale / math.sqrt(A))
        w[p + "mlp.gate_proj.weight"] = draw((I, D), 1.0 / math.sqrt(D))
        w[p + "mlp.up_proj.weight"] = draw((I, D), 1.0 / math.sqrt(D))
        w[p + "mlp.down_proj.weight"] = draw((D, I), branch_scale / math.sqrt(I))
    w["lm_head.weight"] = draw((s["vocab"], D), logit_std / math.sqrt(D))
    return w


def pack(split):
    """Split (259-style) names → packed (131-style, convert_to_hf.py's vllm_packed) names:
    gqkv_proj rows = gate, q, k, v; gate_up_proj rows = gate, up; `.attn.` instead of `.self_attn.`."""
    out = {}
    for name, t in split.items():
        if ".self_attn." not in name and ".mlp." not in name:
            out[name] = t
    prefixes = sorted({n.split("self_attn.")[0] for n in split if ".self_attn." in n})
    for p in prefixes:
        out[p + "attn.gqkv_proj.weight"] = torch.cat(
            [split[p + f"self_attn.{x}.weight"] for x in ("gate_proj", "q_proj", "k_proj", "v_proj")], 0)
        out[p + "attn.o_proj.weight"] = split[p + "self_attn.o_proj.weight"]
        out[p + "mlp.gate_up_proj.weight"] = torch.cat(
            [split[p + "mlp.gate_proj.weight"], split[p + "mlp.up_proj.weight"]], 0)
        out[p + "mlp.down_proj.weight"] = split[p + "mlp.down_proj.weight"]
    return out


def cpu_contig(tensors, dtype=None):
    return {k: (v if dtype is None else v.to(dtype)).detach().to("cpu").contiguous() for k, v in tensors.items()}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, allow_nan=False)
        f.write("\n")


def write_packed_single(out_dir, s, split, torch_dtype="bfloat16"):
    os.makedirs(out_dir, exist_ok=True)
    packed = cpu_contig(pack(split))
    save_file(packed, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    write_json(os.path.join(out_dir, "config.json"), converter_config(s, torch_dtype))
    return len(packed)


def write_packed_sharded_f32(out_dir, s, split):
    """Packed layout as F32 tensors (values exactly bf16-representable), in two shards with an
    index: the L stack and the embedding in the first file, the H stack and lm_head in the second."""
    os.makedirs(out_dir, exist_ok=True)
    packed = cpu_contig(pack(split), torch.float32)
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    shard = [{}, {}]
    for k, v in packed.items():
        second = ".H_module." in k or k == "lm_head.weight"
        shard[1 if second else 0][k] = v
    weight_map = {}
    for i in range(2):
        save_file(shard[i], os.path.join(out_dir, names[i]), metadata={"format": "pt"})
        for k in shard[i]:
            weight_map[k] = names[i]
    total = sum(v.numel() * v.element_size() for v in packed.values())
    write_json(os.path.join(out_dir, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    write_json(os.path.join(out_dir, "config.json"), converter_config(s, "float32"))
    return len(packed)


def safetensors_keys(d):
    keys = []
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), framework="pt") as h:
                keys += list(h.keys())
    return keys


# --------------------------------------------------------------------------------------------
# HF model loading and reference runs

def hf_load(model_dir, dtype, device):
    """Load exactly as a user would (from_pretrained), not model.to(dtype): .to() would also cast
    the rotary inv_freq buffer to bf16, which from_pretrained keeps in fp32 (MODEL.md §3.2)."""
    from transformers.models.hrm_text.modeling_hrm_text import HrmTextForCausalLM
    try:
        m = HrmTextForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa")
    except Exception:
        # Only a fallback so one device run still yields fixtures: drop the converter's extra keys
        # that HF ignores, and say so loudly (the run log is read before committing).
        traceback.print_exc()
        cfg_path = os.path.join(model_dir, "config.json")
        cfg = json.load(open(cfg_path))
        dropped = [k for k in ("num_key_value_heads", "L_bp_cycles") if cfg.pop(k, None) is not None]
        print(f"WARNING: {model_dir}: from_pretrained failed; retrying without {dropped}", flush=True)
        write_json(cfg_path, cfg)
        m = HrmTextForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa")
    return m.to(device).eval()


def check_weights(model, split, label):
    """The loaded HF model must hold exactly our tensors (proves HF reads the file as we wrote it,
    e.g. the gate,q,k,v row order of gqkv_proj)."""
    sd = model.state_dict()
    missing = [k for k in split if k not in sd]
    extra = [k for k in sd if k not in split]
    bad = [k for k in split if k in sd and not torch.equal(sd[k], split[k].to(sd[k].device, sd[k].dtype))]
    if missing or extra or bad:
        raise RuntimeError(f"{label}: HF-loaded weights differ: missing {missing[:5]}, extra {extra[:5]}, "
                           f"different {bad[:5]}")
    inv = model.model.rotary_emb.inv_freq
    return {"tensors": len(sd), "identical_to_generated": True, "rotary_inv_freq_dtype": str(inv.dtype)}


def type_ids(n_prompt, prefix_tokens, n_extra=0):
    """None means no token_type_ids at all (HF is then purely causal, MODEL.md T12/T22)."""
    if prefix_tokens == 0:
        return None
    return [1] * prefix_tokens + [0] * (n_prompt - prefix_tokens + n_extra)


@torch.no_grad()
def forward(model, ids, tt, device, **kw):
    args = {"input_ids": torch.tensor([ids], device=device)}
    if tt is not None:
        args["token_type_ids"] = torch.tensor([tt], device=device)
    return model(**args, **kw)


def top2_margin(row):
    v = torch.topk(row.float(), 2).values
    return float(v[0] - v[1])


@torch.no_grad()
def greedy(model, ids, prefix_tokens, steps, device):
    """Our own loop: one prefill with token_type_ids and a cache, then one token per forward with
    past_key_values (HF ignores token_type_ids once the cache is warm). No eos stopping. Greedy is
    argmax of the bf16 logits, ties to the lowest id (as torch.argmax and generate())."""
    out = forward(model, ids, type_ids(len(ids), prefix_tokens), device, use_cache=True)
    past, row = out.past_key_values, out.logits[0, -1]
    toks, margins = [], []
    for step in range(steps):
        tok = int(torch.argmax(row.float()))
        toks.append(tok)
        margins.append(top2_margin(row))
        if step == steps - 1:
            break
        out = model(input_ids=torch.tensor([[tok]], device=device), past_key_values=past, use_cache=True)
        past, row = out.past_key_values, out.logits[0, -1]
    return toks, margins, row


@torch.no_grad()
def nocache_check(model, ids, prefix_tokens, toks, last_row, device):
    """Max |Δ| between the cached last decode step's logits and one full no-cache forward of the
    same sequence (token_type_ids extended by 0s): a sanity check of the greedy loop itself."""
    seq = ids + toks[:-1]
    out = forward(model, seq, type_ids(len(ids), prefix_tokens, len(toks) - 1), device, use_cache=False)
    return float((out.logits[0, -1].float() - last_row.float()).abs().max())


def floats(t):
    return [float(x) for x in t.float().cpu().tolist()]


def mask_variants(n):
    return [("prefix", n), ("partial", n // 2), ("causal", 0)]


def tiny_cases(model_bf16, model_f32, prompts, steps):
    cases = []
    for ids in prompts:
        for mask, P in mask_variants(len(ids)):
            tt = type_ids(len(ids), P)
            last = forward(model_bf16, ids, tt, "cpu", use_cache=False).logits[0, -1]
            last32 = forward(model_f32, ids, tt, "cpu", use_cache=False).logits[0, -1]
            toks, margins, row = greedy(model_bf16, ids, P, steps, "cpu")
            cases.append({
                "name": f"p{len(ids)}-{mask}",
                "input_ids": ids,
                "prefix_tokens": P,
                "mask": mask,
                "last_logits": floats(last),
                "last_logits_fp32": floats(last32),
                "greedy": {"output_ids": toks, "margins": margins},
                "greedy_nocache_check": nocache_check(model_bf16, ids, P, toks, row, "cpu"),
            })
    return cases


def versions():
    import transformers
    return {"transformers": transformers.__version__, "torch": torch.__version__}


def summarize(label, cases):
    print(f"== {label}")
    for c in cases:
        l16 = torch.tensor(c["last_logits"])
        l32 = torch.tensor(c["last_logits_fp32"]) if "last_logits_fp32" in c else None
        d = float((l16 - l32).abs().max()) if l32 is not None else float("nan")
        g = c["greedy"]
        print(f"  {c['name']:>12}  P={c['prefix_tokens']:<3} greedy {g['output_ids'][:8]}... "
              f"min margin {min(g['margins']):.4f}  |bf16-fp32| {d:.4f}  nocache Δ {c['greedy_nocache_check']:.4f}")


# --------------------------------------------------------------------------------------------
# Mode 1: the tiny fixtures

def tiny_fixtures(args):
    torch.manual_seed(args.seed)
    out = args.out
    os.makedirs(out, exist_ok=True)
    pg = torch.Generator().manual_seed(args.seed)
    prompts = [torch.randint(3, 512, (n,), generator=pg).tolist() for n in (5, 13, 29)]
    common = dict(generator=GENERATOR, **versions(), dtype="bfloat16", device="cpu",
                  attn_implementation="sdpa", seed=args.seed,
                  load="HrmTextForCausalLM.from_pretrained(dir, dtype=bfloat16|float32, attn_implementation='sdpa')",
                  prefix_tokens_meaning="P>0: token_type_ids 1 for the first P prompt tokens, 0 after; "
                                        "0: no token_type_ids passed at all (mask 'causal')",
                  greedy_meaning="own loop: prefill with cache, then one token per forward; argmax of bf16 "
                                 "logits, lowest id on ties; no eos stopping; margins = top1 - top2 of the bf16 "
                                 "logits at each step (step 0 = last prompt row)",
                  last_logits_meaning="last prompt row of a no-cache forward; bf16 values as floats; "
                                      "last_logits_fp32: same weights loaded in float32")
    failures = []

    # tiny-packed / tiny-split: the same weights in both layouts.
    s1 = make_shape(512, 64, 4, 16, 128, 2, 2, 2, 256)
    try:
        w1 = random_split_weights(s1, torch.Generator().manual_seed(args.seed + 1), "cpu", args.logit_std)
        d_packed = os.path.join(out, "tiny-packed")
        n_packed = write_packed_single(d_packed, s1, w1)
        m16 = hf_load(d_packed, torch.bfloat16, "cpu")
        m32 = hf_load(d_packed, torch.float32, "cpu")
        chk16 = check_weights(m16, w1, "tiny-packed bf16")
        check_weights(m32, w1, "tiny-packed fp32")
        cases = tiny_cases(m16, m32, prompts, args.steps)
        ref = dict(common, fixture="tiny-packed", layout="packed", file_tensors=n_packed, hf_load_check=chk16,
                   shape=s1, logit_std=args.logit_std, cases=cases)
        write_json(os.path.join(d_packed, "reference.json"), ref)
        summarize("tiny-packed", cases)

        # Split layout as HF's save_pretrained writes it (its config.json: num_hidden_layers = slot
        # count AND num_layers_per_stack). If this transformers saves packed names back, write the
        # split tensors ourselves and say so.
        d_split = os.path.join(out, "tiny-split")
        if os.path.exists(d_split):
            shutil.rmtree(d_split)
        m16.save_pretrained(d_split)
        keys = safetensors_keys(d_split)
        split_by = "save_pretrained"
        if not any(".self_attn.q_proj." in k for k in keys):
            split_by = "save_pretrained config; tensors written by this script (save_pretrained wrote packed names)"
            for f in os.listdir(d_split):
                if f.endswith(".safetensors") or f.endswith(".index.json"):
                    os.remove(os.path.join(d_split, f))
            save_file(cpu_contig(w1), os.path.join(d_split, "model.safetensors"), metadata={"format": "pt"})
            keys = safetensors_keys(d_split)
        print(f"tiny-split: {len(keys)} tensors ({split_by}); config.json:")
        print(open(os.path.join(d_split, "config.json")).read())
        s16 = hf_load(d_split, torch.bfloat16, "cpu")
        s32 = hf_load(d_split, torch.float32, "cpu")
        chk_split = check_weights(s16, w1, "tiny-split bf16")
        cases_s = tiny_cases(s16, s32, prompts, args.steps)
        same = json.dumps(cases_s) == json.dumps(cases)
        print(f"tiny-split reference identical to tiny-packed: {same}")
        if not same:
            failures.append("tiny-split reference differs from tiny-packed")
        ref_s = dict(common, fixture="tiny-split", layout="split", written_by=split_by, file_tensors=len(keys),
                     hf_load_check=chk_split, identical_to_tiny_packed=same, shape=s1,
                     logit_std=args.logit_std, cases=cases_s)
        write_json(os.path.join(d_split, "reference.json"), ref_s)
    except Exception:
        traceback.print_exc()
        failures.append("tiny-packed/tiny-split")

    # tiny-sharded: other weights and shapes, F32 tensors in two shards.
    s3 = make_shape(512, 96, 3, 32, 160, 3, 3, 1, 256)
    try:
        w3 = random_split_weights(s3, torch.Generator().manual_seed(args.seed + 2), "cpu", args.logit_std)
        d3 = os.path.join(out, "tiny-sharded")
        n3 = write_packed_sharded_f32(d3, s3, w3)
        m16 = hf_load(d3, torch.bfloat16, "cpu")
        m32 = hf_load(d3, torch.float32, "cpu")
        chk = check_weights(m16, w3, "tiny-sharded bf16")
        check_weights(m32, w3, "tiny-sharded fp32")
        cases = tiny_cases(m16, m32, prompts, args.steps)
        ref = dict(common, fixture="tiny-sharded", layout="packed, F32, 2 shards", file_tensors=n3,
                   hf_load_check=chk, shape=s3, logit_std=args.logit_std, cases=cases)
        write_json(os.path.join(d3, "reference.json"), ref)
        summarize("tiny-sharded", cases)
    except Exception:
        traceback.print_exc()
        failures.append("tiny-sharded")

    if failures:
        print("FAILED:", failures)
        return 1
    print("all fixtures written to", out)
    return 0


# --------------------------------------------------------------------------------------------
# Mode 2: full-size DFM-Mimir-shaped random checkpoint and HF references on the GPU

def read_prompts(path, vocab, gen, device, tf_len):
    """Each line: a JSON array of ids, or {"input_ids": [...], "continuation": [...]}. A missing
    continuation is drawn at random from the seed (ids in [3, vocab))."""
    out = []
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            obj = json.loads(line)
            if isinstance(obj, list):
                obj = {"input_ids": obj}
            if not isinstance(obj, dict) or "input_ids" not in obj:
                raise SystemExit(f"{path}:{ln}: expected a JSON array of ids or an object with input_ids")
            ids = [int(x) for x in obj["input_ids"]]
            if not ids or min(ids) < 0 or max(ids) >= vocab:
                raise SystemExit(f"{path}:{ln}: input_ids empty or outside [0, {vocab})")
            cont = obj.get("continuation")
            if cont is None:
                cont = torch.randint(3, vocab, (tf_len,), generator=gen, device=device).tolist()
            out.append((ids, [int(x) for x in cont]))
    return out


@torch.no_grad()
def teacher_forced(model, ids, P, cont, device, mode):
    """top-1 (and margin) predicting cont[i] from prompt + cont[:i], for every i."""
    if mode == "forward":
        seq = ids + cont[:-1]
        logits = forward(model, seq, type_ids(len(ids), P, len(cont) - 1), device, use_cache=False).logits[0]
        rows = logits[len(ids) - 1:]
        top = torch.topk(rows.float(), 2, dim=-1)
        return top.indices[:, 0].tolist(), (top.values[:, 0] - top.values[:, 1]).tolist()
    out = forward(model, ids, type_ids(len(ids), P), device, use_cache=True)
    past, row = out.past_key_values, out.logits[0, -1]
    top1, margins = [], []
    for i, tok in enumerate(cont):
        top1.append(int(torch.argmax(row.float())))
        margins.append(top2_margin(row))
        if i == len(cont) - 1:
            break
        out = model(input_ids=torch.tensor([[tok]], device=device), past_key_values=past, use_cache=True)
        past, row = out.past_key_values, out.logits[0, -1]
    return top1, margins


def mimir_size(args):
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device visible (use --device cpu for a CPU run)")
    if args.tiny_test:
        s = make_shape(512, 128, 2, 64, 256, 2, 2, 3, 512, eos=106)
    else:
        s = make_shape(262144, 1536, 12, 128, 4096, 16, 2, 3, 4096, eos=106)
    t0 = time.time()
    gen = torch.Generator(device=device).manual_seed(args.seed)
    bscale = args.branch_scale if args.branch_scale is not None else MIMIR_BRANCH_SCALE
    split = random_split_weights(s, gen, device, args.logit_std, bscale)
    n_params = sum(v.numel() for v in split.values())
    if not args.tiny_test and n_params != 1786775040:
        raise SystemExit(f"parameter count {n_params} != 1,786,775,040")
    os.makedirs(args.out, exist_ok=True)
    write_packed_single(args.out, s, split)
    print(f"wrote {n_params:,} parameters to {args.out} in {time.time() - t0:.1f} s", flush=True)

    model = hf_load(args.out, torch.bfloat16, device)
    chk = check_weights(model, split, "mimir-size")
    del split
    # The same weights in float32: HF's own bf16-vs-fp32 top-1 agreement says how much of any
    # disagreement is bf16 rounding that no bf16 engine can avoid.
    model32 = hf_load(args.out, torch.float32, device) if args.fp32_ref else None

    pg = torch.Generator(device=device).manual_seed(args.seed + 1)
    if args.prompts:
        prompts = read_prompts(args.prompts, s["vocab"], pg, device, args.tf_len)
    else:
        lens = (8, 37, 130) if args.tiny_test else (16, 100, 512)
        prompts = [(torch.randint(3, s["vocab"], (n,), generator=pg, device=device).tolist(),
                    torch.randint(3, s["vocab"], (args.tf_len,), generator=pg, device=device).tolist())
                   for n in lens]
    cases = []
    for qi, (ids, cont) in enumerate(prompts):
        if len(ids) + max(len(cont), args.greedy_steps) > s["max_pos"]:
            raise SystemExit(f"prompt {qi}: {len(ids)} + continuation exceeds max_position_embeddings {s['max_pos']}")
        for mask, P in mask_variants(len(ids)):
            t1 = time.time()
            last = forward(model, ids, type_ids(len(ids), P), device, use_cache=False).logits[0, -1].float()
            top = torch.topk(last, args.topk)
            toks, margins, row = greedy(model, ids, P, args.greedy_steps, device)
            tf_top1, tf_margins = teacher_forced(model, ids, P, cont, device, args.tf_mode)
            extra = {}
            if model32 is not None:
                t32, m32 = teacher_forced(model32, ids, P, cont, device, args.tf_mode)
                agree = sum(a == b for a, b in zip(tf_top1, t32))
                extra["teacher_forced_fp32"] = {"top1": t32, "margins": m32, "bf16_agree": agree}
                last32 = forward(model32, ids, type_ids(len(ids), P), device, use_cache=False).logits[0, -1].float()
                extra["last_logits_fp32_at_topk"] = floats(last32[top.indices])
            cases.append({
                "name": f"q{qi}-{mask}", "input_ids": ids, "prefix_tokens": P, "mask": mask,
                "last_logits_topk": {"ids": top.indices.tolist(), "values": floats(top.values)},
                "greedy": {"output_ids": toks, "margins": margins},
                "greedy_nocache_check": nocache_check(model, ids, P, toks, row, device),
                "teacher_forced": {"continuation": cont, "top1": tf_top1, "margins": tf_margins},
                **extra,
            })
            c = cases[-1]
            print(f"  {c['name']:>10} len {len(ids):<4} P={P:<4} greedy {toks[:6]}... min margin "
                  f"{min(margins):.3f} nocache Δ {c['greedy_nocache_check']:.4f}"
                  + (f" tf bf16=fp32 {extra['teacher_forced_fp32']['bf16_agree']}/{len(cont)}" if extra else "")
                  + f" ({time.time() - t1:.1f} s)", flush=True)
    ref = dict(generator=GENERATOR, mode="mimir-size" + (" --tiny-test" if args.tiny_test else ""), **versions(),
               dtype="bfloat16", device=device,
               gpu=torch.cuda.get_device_name(0) if device == "cuda" else None,
               attn_implementation="sdpa", seed=args.seed, shape=s, param_count=n_params,
               logit_std=args.logit_std, branch_scale=bscale, hf_load_check=chk, teacher_forced_mode=args.tf_mode,
               prefix_tokens_meaning="P>0: token_type_ids 1 for the first P prompt tokens, 0 after; "
                                     "0: no token_type_ids passed at all (mask 'causal')",
               teacher_forced_meaning="top1[i] = argmax of the bf16 logits predicting continuation[i] from "
                                      "prompt + continuation[:i] (forward: one no-cache forward with "
                                      "token_type_ids extended by 0s; decode: prefill then cached steps)",
               cases=cases)
    write_json(os.path.join(args.out, "reference.json"), ref)
    print(f"reference.json: {len(cases)} cases; total {time.time() - t0:.1f} s")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--logit-std", type=float, default=8.0, help="spread of the random logits (peakedness)")
    ap.add_argument("--steps", type=int, default=16, help="greedy tokens per tiny case")
    ap.add_argument("--mimir-size", action="store_true", help="full-size DFM-Mimir-shaped random model")
    ap.add_argument("--tiny-test", action="store_true", help="with --mimir-size: small shapes, same code path")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"],
                    help="--mimir-size device (auto: cuda when torch sees a GPU, else cpu)")
    ap.add_argument("--prompts", help="--mimir-size: JSON lines of input_ids (see read_prompts)")
    ap.add_argument("--topk", type=int, default=20)
    ap.add_argument("--greedy-steps", type=int, default=32)
    ap.add_argument("--tf-len", type=int, default=160, help="random continuation length (>= 128)")
    ap.add_argument("--tf-mode", default="forward", choices=["forward", "decode"])
    ap.add_argument("--branch-scale", type=float,
                    help=f"--mimir-size: std factor of o_proj/down_proj (default {MIMIR_BRANCH_SCALE}; 1 = LeCun, "
                         "as the first fixtures; see MIMIR_BRANCH_SCALE)")
    ap.add_argument("--fp32-ref", action="store_true",
                    help="--mimir-size: also run HF in float32 (teacher_forced_fp32: HF's own bf16-vs-fp32 agreement)")
    args = ap.parse_args()
    if args.tiny_test and not args.mimir_size:
        ap.error("--tiny-test needs --mimir-size")
    if args.mimir_size:
        return mimir_size(args)
    for opt in ("prompts", "fp32_ref"):
        if getattr(args, opt):
            ap.error(f"--{opt.replace('_', '-')} only applies to --mimir-size")
    if args.branch_scale is not None:
        ap.error("--branch-scale only applies to --mimir-size (the committed tiny fixtures use LeCun scales)")
    return tiny_fixtures(args)


if __name__ == "__main__":
    sys.exit(main())
