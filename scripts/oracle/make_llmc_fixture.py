#!/usr/bin/env python3
"""make_llmc_fixture.py — tiny HRM-Text builds written by llm-compressor, plus Hugging Face's reference outputs.

frigg-quantize writes compressed-tensors "pack-quantized" builds, and scripts/quant-tests/ct_check.py proves that
the ecosystem reads them. This script proves the other direction: a build that llm-compressor itself writes
loads in frigg and agrees with HF on it. It needs the llm-compressor set (scripts/pyenv --llmc: llmcompressor,
compressed-tensors, transformers, torch) and runs on the CPU in a few minutes:

  "$(scripts/pyenv --llmc)" scripts/oracle/make_llmc_fixture.py --seed 1234 --out golden/fixtures

It writes two fixtures beside the others, each a directory as llm-compressor's oneshot saved it (config.json with
its quantization_config, generation_config.json, recipe.yaml, model.safetensors) plus reference.json in the form
of make_fixtures.py's tiny fixtures (frigg-parity reads it):

  tiny-llmc-w8a16   QuantizationModifier(targets="Linear", scheme="W8A16", ignore=["lm_head"])   round to nearest
  tiny-llmc-w4a16   GPTQModifier(targets="Linear", scheme="W4A16", ignore=["lm_head"])           GPTQ, calibrated

Both are quantized from one fresh random checkpoint (not written; it is regenerated from --seed): packed layout
(attn.gqkv_proj, mlp.gate_up_proj, as DFM-Mimir ships), bf16, vocab 512, hidden 128, 4 heads x 32, intermediate
256, 2 layers per stack, H 2, L 2. Why not golden/fixtures/tiny-packed: its hidden size 64 is smaller than the
presets' group of 128, which llm-compressor cannot quantize (compressed-tensors' group reshape fails: "unflatten:
Provided sizes [-1, 128] don't multiply up to the size of dim 1 (64)"); at hidden 128 the presets apply unchanged.

The recipes are llm-compressor's own presets as its examples use them; which modules they quantize is its
choice, recorded in reference.json ("llmcompressor_run"): the targets are the class "Linear", so every decoder
linear, with lm_head ignored and the nn.Embedding untouched. W8A16 is int8 in groups of 128 (not per channel)
in compressed-tensors 0.19. GPTQ runs with pipeline="basic" (every calibration batch through the whole model,
each linear's Hessian summed over all of its calls, then one quantization per linear): HRM-Text calls each
decoder layer several times per forward (the L stack runs H_cycles x L_cycles times, the H stack H_cycles
times), and the default sequential pipeline traces one subgraph per call and re-quantizes a layer at each of
them (4 times for each L-stack layer here, twice for each H-stack layer). Measured once on this model (W4A16, 8 random held-out sequences of 48 ids, KL from the bf16
source / top-1 agreement): basic GPTQ 0.37 / 71 %, sequential GPTQ 0.91 / 60 %, round to nearest 0.51 / 67 %.
The calibration set is --calib random sequences of --calib-len ids (no data set can be fetched here; the model
is random anyway); oneshot needs a processor once a data set is given, so a word-level stand-in
tokenizer is passed and the files it saves (tokenizer.json, tokenizer_config.json) are removed.

Then each saved directory is loaded exactly as a user would (HrmTextForCausalLM.from_pretrained(dir, dtype=...,
attn_implementation='sdpa'): transformers' compressed-tensors quantizer decompresses it), its decompressed
weights are compared with the file's values unpacked here (bf16(q * scale)), and the cases of make_fixtures.py
(its prompts and masks, last-row logits in bf16 and float32, 16 greedy tokens with margins) are written.
reference.json also records the build against the bf16 source ("vs_bf16_source": max |dlogit|, top-1, greedy
agreement), which says how much the quantization itself moved the model.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (shapes, random weights, HF loading, the reference cases)

GENERATOR = "scripts/oracle/make_llmc_fixture.py"
SHAPE = mf.make_shape(512, 128, 4, 32, 256, 2, 2, 2, 256)
SPECS = [
    # name, modifier class, scheme, calibrated
    ("tiny-llmc-w8a16", "QuantizationModifier", "W8A16", False),
    ("tiny-llmc-w4a16", "GPTQModifier", "W4A16", True),
]
SAVED_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def versions():
    import compressed_tensors
    import llmcompressor
    import transformers
    return {"transformers": transformers.__version__, "torch": torch.__version__,
            "compressed_tensors": compressed_tensors.__version__, "llmcompressor": llmcompressor.__version__}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def stand_in_tokenizer(vocab):
    """A word-level tokenizer over the ids ("t0".."t{V-1}"): oneshot refuses a data set without a processor;
    the calibration set is already token ids, so it only pads (with id 0)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    tk = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="t0", unk_token="t0")


def calibration_set(seed, n, length, vocab):
    from datasets import Dataset
    g = torch.Generator().manual_seed(seed)
    ids = [torch.randint(3, vocab, (length,), generator=g).tolist() for _ in range(n)]
    return Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * length for _ in range(n)]}), ids


def run_oneshot(src, out_dir, modifier, scheme, calibrated, args):
    from llmcompressor import oneshot
    from llmcompressor.modifiers.gptq import GPTQModifier
    from llmcompressor.modifiers.quantization import QuantizationModifier
    cls = {"QuantizationModifier": QuantizationModifier, "GPTQModifier": GPTQModifier}[modifier]
    recipe = cls(targets="Linear", scheme=scheme, ignore=["lm_head"])
    model = mf.hf_load(src, torch.bfloat16, "cpu")
    kw = {}
    calib = None
    if calibrated:
        ds, ids = calibration_set(args.seed + 7, args.calib, args.calib_len, SHAPE["vocab"])
        kw = dict(dataset=ds, processor=stand_in_tokenizer(SHAPE["vocab"]), num_calibration_samples=args.calib,
                  max_seq_length=args.calib_len, shuffle_calibration_samples=False, pipeline="basic")
        calib = {"sequences": args.calib, "tokens_each": args.calib_len, "seed": args.seed + 7,
                 "ids": "uniform random in [3, vocab), torch.Generator().manual_seed(seed), no token_type_ids",
                 "pipeline": "basic", "shuffle_calibration_samples": False, "first_ids": ids[0][:8]}
    oneshot(model=model, recipe=recipe, output_dir=out_dir, save_compressed=True, **kw)
    removed = [f for f in SAVED_TOKENIZER_FILES if os.path.exists(os.path.join(out_dir, f))]
    for f in removed:
        os.remove(os.path.join(out_dir, f))
    return {"modifier": modifier, "call": f"{modifier}(targets=\"Linear\", scheme=\"{scheme}\", ignore=[\"lm_head\"])",
            "scheme": scheme, "algorithm": "GPTQ" if modifier == "GPTQModifier" else "round to nearest (minmax)",
            "calibration": calib, "removed_files": removed}


def file_tensors(d):
    from safetensors import safe_open
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), framework="pt") as h:
                for k in h.keys():
                    out[k] = h.get_tensor(k)
    return out


def unpack(packed, rows, cols, bits):
    """compressed-tensors' unpack_from_int32 on [rows][words] int32: values q in [-2^(bits-1), 2^(bits-1)-1]."""
    per = 32 // bits
    u = packed.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(per, dtype=torch.int64) * bits
    vals = (u.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    return vals.reshape(rows, -1)[:, :cols] - (1 << (bits - 1))


def record_modules(tensors, qc):
    """Which modules the file holds quantized (weight_packed) and which unquantized (weight), with shapes."""
    quant, plain = {}, {}
    bits = {g: v["weights"]["num_bits"] for g, v in qc["config_groups"].items()}
    for k, t in sorted(tensors.items()):
        if k.endswith(".weight_packed"):
            m = k[: -len(".weight_packed")]
            quant[m] = {"weight_packed": list(t.shape), "weight_scale": list(tensors[m + ".weight_scale"].shape),
                        "weight_scale_dtype": str(tensors[m + ".weight_scale"].dtype).replace("torch.", ""),
                        "weight_shape": tensors[m + ".weight_shape"].tolist()}
        elif k.endswith(".weight") or k == "model.z_L_init":
            plain[k] = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
    other = sorted(k for k in tensors if not any(k.startswith(m + ".") for m in quant) and k not in plain)
    return {"bits_by_group": bits, "quantized": quant, "unquantized": plain, "other_tensors": other}


def hf_weights_check(model, tensors, qc):
    """HF's decompressed weight of every quantized module (after one forward) against the file's values unpacked
    here, w = bf16(q * scale): a packed module (attn.gqkv_proj, mlp.gate_up_proj) splits by rows into HF's
    parts (gate, q, k, v; gate, up), as transformers' conversion mapping does."""
    (group,) = qc["config_groups"].values()
    bits, gs = group["weights"]["num_bits"], group["weights"]["group_size"]
    sd = model.state_dict()
    parts = {"attn.gqkv_proj": ["self_attn.gate_proj", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
             "mlp.gate_up_proj": ["mlp.gate_proj", "mlp.up_proj"], "attn.o_proj": ["self_attn.o_proj"]}
    checked = 0
    for k in sorted(tensors):
        if not k.endswith(".weight_packed"):
            continue
        m = k[: -len(".weight_packed")]
        scale = tensors[m + ".weight_scale"]
        rows = tensors[k].shape[0]
        shp = tensors[m + ".weight_shape"].tolist()
        cols = shp[1]
        q = unpack(tensors[k], rows, cols, bits)
        s = scale.to(torch.float32).repeat_interleave(gs if gs else cols, dim=1)[:, :cols]
        w = (q.to(torch.float32) * s).to(torch.bfloat16)
        names = [m]
        for packed, split in parts.items():
            if m.endswith("." + packed):
                names = [m[: -len(packed)] + p for p in split]
        for i, name in enumerate(names):
            n = rows // len(names)
            hf = sd.get(name + ".weight")
            if hf is None:
                raise RuntimeError(f"HF has no decompressed {name}.weight (keys: {[x for x in sd if name in x]})")
            if not torch.equal(hf.to(torch.bfloat16), w[i * n:(i + 1) * n]):
                d = float((hf.float() - w[i * n:(i + 1) * n].float()).abs().max())
                raise RuntimeError(f"{name}: HF's decompressed weight differs from bf16(q * scale) by {d}")
            checked += 1
    return {"modules": checked, "identical_to_bf16_q_times_scale": True,
            "tensors": len(sd), "rotary_inv_freq_dtype": str(model.model.rotary_emb.inv_freq.dtype)}


def decompress(model):
    """transformers decompresses a compressed-tensors model on its first forward pass."""
    mf.forward(model, [3, 4, 5], None, "cpu", use_cache=False)
    return model


def float32_twin(m16, src, work):
    """HF cannot run the compressed build in float32 (its decompressed weights keep the scales' bf16, and the
    linears get float32 inputs), so last_logits_fp32 comes from the build's decompressed weights, bf16(q * scale),
    saved as a plain checkpoint (HF's split names, the source's config.json) and loaded with dtype float32."""
    from safetensors.torch import save_file
    d = os.path.join(work, "float32-twin")
    os.makedirs(d, exist_ok=True)
    sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in m16.state_dict().items()
          if k.endswith(".weight") or k == "model.z_L_init"}
    save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(src, "config.json"), d)
    m32 = mf.hf_load(d, torch.float32, "cpu")
    mf.check_weights(m32, sd, "float32 twin")
    return m32


@torch.no_grad()
def vs_source(src_model, cases):
    """The build against the bf16 source on the same cases: max |dlogit| at the last prompt row, top-1, and how
    many of the build's greedy tokens the source predicts (teacher-forced on the build's tokens)."""
    out = []
    for c in cases:
        tt = mf.type_ids(len(c["input_ids"]), c["prefix_tokens"])
        a = torch.tensor(c["last_logits"])
        b = mf.forward(src_model, c["input_ids"], tt, "cpu", use_cache=False).logits[0, -1].float()
        toks = c["greedy"]["output_ids"]
        seq = c["input_ids"] + toks[:-1]
        rows = mf.forward(src_model, seq, mf.type_ids(len(c["input_ids"]), c["prefix_tokens"], len(toks) - 1), "cpu",
                          use_cache=False).logits[0, len(c["input_ids"]) - 1:]
        agree = int((rows.float().argmax(-1) == torch.tensor(toks)).sum())
        out.append({"case": c["name"], "max_abs": float((a - b).abs().max()),
                    "top1_same": int(a.argmax()) == int(b.argmax()), "greedy_source_agree": agree,
                    "greedy_steps": len(toks)})
    return {"per_case": out, "max_abs": max(x["max_abs"] for x in out),
            "top1_same": sum(x["top1_same"] for x in out), "cases": len(out),
            "greedy_source_agree": sum(x["greedy_source_agree"] for x in out),
            "greedy_steps": sum(x["greedy_steps"] for x in out)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", required=True, help="the fixtures' parent directory (golden/fixtures)")
    ap.add_argument("--logit-std", type=float, default=8.0)
    ap.add_argument("--steps", type=int, default=16, help="greedy tokens per case")
    ap.add_argument("--calib", type=int, default=16, help="GPTQ calibration sequences")
    ap.add_argument("--calib-len", type=int, default=64, help="tokens per calibration sequence")
    ap.add_argument("--only", choices=[s[0] for s in SPECS], help="write one fixture only")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    ver = versions()
    print("versions:", ver, flush=True)

    pg = torch.Generator().manual_seed(args.seed)
    prompts = [torch.randint(3, 512, (n,), generator=pg).tolist() for n in (5, 13, 29)]
    work = tempfile.mkdtemp(prefix="llmc-fixture.")
    try:
        src = os.path.join(work, "source")
        split = mf.random_split_weights(SHAPE, torch.Generator().manual_seed(args.seed + 3), "cpu", args.logit_std)
        mf.write_packed_single(src, SHAPE, split)
        src_sha = sha256(os.path.join(src, "model.safetensors"))
        src16 = mf.hf_load(src, torch.bfloat16, "cpu")
        mf.check_weights(src16, split, "source")
        for name, modifier, scheme, calibrated in SPECS:
            if args.only and name != args.only:
                continue
            print(f"== {name}: llm-compressor {modifier} {scheme}", flush=True)
            built = os.path.join(work, name)
            rec = run_oneshot(src, built, modifier, scheme, calibrated, args)
            cfg = json.load(open(os.path.join(built, "config.json")))
            qc = cfg["quantization_config"]
            tensors = file_tensors(built)
            modules = record_modules(tensors, qc)
            m16 = decompress(mf.hf_load(built, torch.bfloat16, "cpu"))
            chk = hf_weights_check(m16, tensors, qc)
            m32 = float32_twin(m16, src, work)
            cases = mf.tiny_cases(m16, m32, prompts, args.steps)
            vs = vs_source(src16, cases)
            ref = dict(
                generator=GENERATOR, **ver, dtype="bfloat16", device="cpu", attn_implementation="sdpa",
                seed=args.seed, fixture=name, layout="packed (as saved by llm-compressor from a packed source)",
                load="HrmTextForCausalLM.from_pretrained(dir, dtype=bfloat16|float32, attn_implementation='sdpa'), "
                     "decompressed by transformers' compressed-tensors quantizer on the first forward",
                prefix_tokens_meaning="P>0: token_type_ids 1 for the first P prompt tokens, 0 after; "
                                      "0: no token_type_ids passed at all (mask 'causal')",
                greedy_meaning="own loop: prefill with cache, then one token per forward; argmax of bf16 "
                               "logits, lowest id on ties; no eos stopping; margins = top1 - top2 of the bf16 "
                               "logits at each step (step 0 = last prompt row)",
                last_logits_meaning="last prompt row of a no-cache forward; bf16 values as floats; "
                                    "last_logits_fp32: the build's decompressed weights, bf16(q * scale), as a "
                                    "plain checkpoint loaded with dtype float32 (HF cannot run the compressed "
                                    "build itself in float32: bf16 weights, float32 activations)",
                source={"what": "fresh random HRM-Text checkpoint (make_fixtures.random_split_weights, seed + 3), "
                                "packed layout, bf16, converter-style config.json; not committed (regenerated "
                                "from the seed)", "model_safetensors_sha256": src_sha},
                llmcompressor_run=dict(rec, quantization_config=qc, **modules),
                file_tensors=len(tensors), hf_load_check=chk, shape=SHAPE, logit_std=args.logit_std,
                vs_bf16_source=vs, cases=cases)
            mf.write_json(os.path.join(built, "reference.json"), ref)
            mf.summarize(name, cases)
            print(f"  quantized {len(modules['quantized'])} modules ({sorted(modules['bits_by_group'].items())} bits), "
                  f"unquantized {sorted(modules['unquantized'])}; HF weights check: {chk['modules']} parts identical")
            print(f"  vs bf16 source: max |dlogit| {vs['max_abs']:.3f}, top-1 {vs['top1_same']}/{vs['cases']}, "
                  f"greedy {vs['greedy_source_agree']}/{vs['greedy_steps']}", flush=True)
            dest = os.path.join(args.out, name)
            if os.path.exists(dest):
                shutil.rmtree(dest)
            shutil.copytree(built, dest)
            for f in os.listdir(dest):  # safetensors' writer leaves 0600
                os.chmod(os.path.join(dest, f), 0o644)
            print(f"  wrote {dest}: {sorted(os.listdir(dest))}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
