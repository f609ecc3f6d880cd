#!/usr/bin/env python3
"""ct_check.py — check a frigg-quantize build with the real compressed-tensors package (PyPI, the pins of
scripts/py/requirements-quant.txt), run by tests/quantize.sh under CI=true.

  ct_check.py --src SRC --out OUT --method int8|int4 [--group G] [--int4-rtn] [--keep-embedding] [--hf N]
  ct_check.py --each FILE      one such argument list a line (FILE or - for stdin), every build checked in
                               this one process: torch, transformers and compressed-tensors are imported once

1. config.json's quantization_config validates as compressed_tensors.QuantizationConfig (pydantic; unknown
   keys in a scheme or its weights are refused), format pack-quantized, status compressed.
2. The safetensors file loads with the safetensors library; its metadata holds format "pt" and frigg's keys.
3. frigg's intended values are recomputed here from SRC with numpy (the rules of common/model/quant.h, written
   again independently): q and the bf16 scales of every module. compressed-tensors' own model-free
   decompressor (CompressedTensorsDequantizer.validate: PackedQuantizationCompressor.decompress per module,
   and no quantization parameter left over) must give exactly q * scale (scales upcast to fp32) and exactly
   bf16(q * scale) (as stored, bf16); unpack_from_int32 must give q, weight_scale the scales, weight_shape
   the shape; every other tensor must equal the source's.
4. --hf N: AutoModelForCausalLM.from_pretrained(OUT) (transformers + compressed-tensors). A build with a
   quantized embedding must fail exactly as transformers 5.17.0 fails (AttributeError: 'Embedding' object
   has no attribute 'weight', from PreTrainedModel._init_weights) — it is then loaded once more with that
   one function guarded, to check the rest. The loaded, decompressed weights must equal bf16(q * scale); the
   logits and the teacher-forced NLL of the first N held-out sequences (SRC/heldout.jsonl, prefix
   bidirectional) are compared with the bf16 source model and printed.
Prints PASS/FAIL lines and "ct_check: N passed, N failed"; exit 1 on any failure."""
import argparse
import json
import math
import os
import re
import sys

import numpy as np
import torch

RESULTS = {"pass": 0, "fail": 0}


def check(ok, what):
    RESULTS["pass" if ok else "fail"] += 1
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    return ok


# ---- frigg's rules (common/model/quant.h), independently in numpy ----
ZERO_SCALE = 0x3C00  # bf16 2**-7


def bf16_bits(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_val(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def nonzero(sb):
    sb = sb.copy()
    sb[(sb & 0x7FFF) == 0] = ZERO_SCALE
    return sb


def q8_rows(w):
    a = np.abs(w).max(axis=1)
    sb = nonzero(bf16_bits(a / np.float32(127)))
    s = bf16_val(sb)[:, None]
    q = np.rint(np.clip(w / s, np.float32(-127), np.float32(127))).astype(np.int8)
    return q, sb[:, None]


def q4_rows(w, g, search):
    rows, cols = w.shape
    qs, ss = [], []
    ks = np.arange(51 if search else 1, dtype=np.int64)
    for r0 in range(0, rows, 32):
        wg = w[r0:r0 + 32].reshape(-1, cols // g, g)
        a = np.abs(wg).max(axis=-1)
        sb = nonzero(bf16_bits((a[..., None] * (100 - ks).astype(np.float32)) / np.float32(700)))  # [r, G, K]
        s = bf16_val(sb)
        q = np.rint(np.clip(wg[:, :, None, :] / s[..., None], np.float32(-8), np.float32(7)))
        d = wg[:, :, None, :] - q * s[..., None]
        e = np.cumsum(d.astype(np.float64) ** 2, axis=-1)[..., -1]  # left to right, as the C loop
        k = np.argmin(e, axis=-1)  # the first minimum: the smallest k on ties
        pick = np.take_along_axis
        qs.append(pick(q, k[..., None, None], axis=2)[:, :, 0, :].reshape(-1, cols).astype(np.int8))
        ss.append(pick(sb, k[..., None], axis=2)[..., 0])
    return np.concatenate(qs), np.concatenate(ss)


# ---- the source, by HF module name ----
def load_source(src):
    from safetensors.torch import load_file
    idx = os.path.join(src, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    raw = {}
    for f in files:
        raw.update(load_file(os.path.join(src, f)))
    mods, other = {}, {}
    for name, t in raw.items():
        m = re.match(r"^(model\.[LH]_module\.layers\.\d+)\.(attn\.gqkv_proj|mlp\.gate_up_proj)\.weight$", name)
        if m:
            parts = ["gate", "q", "k", "v"] if "gqkv" in name else ["gate", "up"]
            prefix = m.group(1) + (".self_attn." if "gqkv" in name else ".mlp.")
            for p, chunk in zip(parts, torch.chunk(t, len(parts), dim=0)):
                mods[prefix + p + "_proj"] = chunk
        elif name.endswith(".weight") and t.ndim == 2:
            mods[name[:-len(".weight")].replace(".attn.o_proj", ".self_attn.o_proj")] = t
        else:
            other[name] = t
    return mods, other, files


def as_f32(t):  # the loader's rule: every weight is its bf16 value
    return t.to(torch.bfloat16).to(torch.float32).numpy()


def expected(args, mods):
    want = {}
    for name, t in mods.items():
        core = re.match(r"^model\.[LH]_module\.layers\.\d+\.(self_attn|mlp)\.(gate|q|k|v|o|up|down)_proj$", name)
        if name == "model.embed_tokens" and args.keep_embedding:
            continue
        w = as_f32(t)
        if core and args.method == "int4":
            q, sb = q4_rows(w, args.group, not args.int4_rtn)
        else:
            q, sb = q8_rows(w)
        want[name] = (q, sb, 4 if core and args.method == "int4" else 8)
    return want


def dequant_ref(q, sb):
    cols, ng = q.shape[1], sb.shape[1]
    s = np.repeat(bf16_val(sb), cols // ng, axis=1)
    return q.astype(np.float32) * s  # exact in fp32


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--method", required=True, choices=["int8", "int4"])
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--int4-rtn", action="store_true")
    ap.add_argument("--keep-embedding", action="store_true")
    ap.add_argument("--hf", type=int, default=0, help="HF load + logits/NLL on N held-out sequences")
    ap.add_argument("--bounds", action="store_true", help="hold the HF comparison to the trained model's bounds")
    args = ap.parse_args(argv)
    tag = f"{os.path.basename(args.src.rstrip('/'))} {args.method}" + (f" g{args.group}" if args.method == "int4" else "") + \
        (" rtn" if args.int4_rtn else "") + (" keep-emb" if args.keep_embedding else "")

    import compressed_tensors
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from compressed_tensors.entrypoints.convert.converters.ct_dequantizer import CompressedTensorsDequantizer
    from compressed_tensors.quantization import QuantizationConfig
    from safetensors import safe_open
    from safetensors.torch import load_file

    cfg = json.load(open(os.path.join(args.out, "config.json")))
    src_cfg = json.load(open(os.path.join(args.src, "config.json")))
    qc = cfg.get("quantization_config")
    check(qc is not None and {k: v for k, v in cfg.items() if k != "quantization_config"} == src_cfg,
          f"{tag}: config.json = the source's keys + quantization_config")
    try:
        parsed = QuantizationConfig.model_validate(qc)
        ok = parsed.format == "pack-quantized" and parsed.quantization_status == "compressed" and \
            parsed.quant_method == "compressed-tensors" and all(
                s.weights.type == "int" and s.weights.symmetric and not s.weights.dynamic and s.input_activations is None
                for s in parsed.config_groups.values())
        check(ok, f"{tag}: quantization_config validates (compressed-tensors {compressed_tensors.__version__})")
    except Exception as e:  # noqa: BLE001
        check(False, f"{tag}: quantization_config does not validate: {e}")
        return

    st = os.path.join(args.out, "model.safetensors")
    with safe_open(st, "pt") as f:
        meta = f.metadata()
    check(meta.get("format") == "pt" and meta.get("frigg_method") == args.method and
          meta.get("frigg_source_sha256", "").count("=") >= 1, f"{tag}: safetensors metadata {meta}")
    tensors = load_file(st)
    mods, other, _ = load_source(args.src)
    want = expected(args, mods)

    # raw tensors: unpack_from_int32, the scales, the shapes
    bad = []
    for name, (q, sb, bits) in want.items():
        packed, scale, shape = (tensors.get(f"{name}.weight_{k}") for k in ("packed", "scale", "shape"))
        if packed is None or scale is None or shape is None:
            bad.append(f"{name}: missing tensors")
            continue
        if packed.dtype != torch.int32 or scale.dtype != torch.bfloat16 or shape.dtype != torch.int64:
            bad.append(f"{name}: dtypes {packed.dtype} {scale.dtype} {shape.dtype}")
            continue
        if shape.tolist() != list(q.shape):
            bad.append(f"{name}: weight_shape {shape.tolist()} != {list(q.shape)}")
            continue
        if not np.array_equal(scale.view(torch.int16).numpy().view(np.uint16), sb):
            bad.append(f"{name}: weight_scale differs from frigg's rule in "
                       f"{int((scale.view(torch.int16).numpy().view(np.uint16) != sb).sum())} of {sb.size}")
        uq = unpack_from_int32(packed, bits, torch.Size(q.shape)).numpy()
        if not np.array_equal(uq, q):
            bad.append(f"{name}: q differs in {int((uq != q).sum())} of {q.size}")
    check(not bad, f"{tag}: {len(want)} modules: weight_packed (unpack_from_int32), weight_scale, weight_shape = "
          f"frigg's rules recomputed with numpy" + ("" if not bad else ": " + "; ".join(bad[:5])))

    # compressed-tensors' own decompression, model-free, fp32 (exact q * s) and as stored (bf16)
    for dtype in (torch.float32, torch.bfloat16):
        tt = dict(tensors)
        if dtype == torch.float32:
            tt = {k: (v.float() if k.endswith(".weight_scale") else v) for k, v in tt.items()}
        try:
            deq = CompressedTensorsDequantizer(args.out, dtype=dtype).validate(tt)
        except Exception as e:  # noqa: BLE001
            check(False, f"{tag}: CompressedTensorsDequantizer ({dtype}) failed: {e}")
            continue
        bad = []
        for name, (q, sb, _) in want.items():
            ref = dequant_ref(q, sb)
            got = deq.get(name + ".weight")
            if got is None:
                bad.append(f"{name}: not decompressed")
                continue
            if dtype == torch.bfloat16:
                ok = np.array_equal(got.view(torch.int16).numpy().view(np.uint16), bf16_bits(ref))
            else:
                ok = np.array_equal(got.numpy(), ref)
            if not ok:
                bad.append(name)
        names_ok = set(deq) == {m + ".weight" for m in mods} | set(other)
        check(not bad and names_ok, f"{tag}: compressed-tensors decompress ({str(dtype)[6:]}) == "
              f"{'q * scale exactly' if dtype == torch.float32 else 'bf16(q * scale) exactly'}, {len(want)} modules; "
              f"tensor names = HF's split names" + ("" if not bad else f": differ {bad[:4]}") +
              ("" if names_ok else f": names {sorted(set(deq) ^ ({m + '.weight' for m in mods} | set(other)))[:6]}"))
        unchanged = [k for k in other if not torch.equal(deq.get(k, torch.empty(0)), other[k])]
        if args.keep_embedding:
            unchanged += [] if torch.equal(deq.get("model.embed_tokens.weight", torch.empty(0)),
                                           mods["model.embed_tokens"]) else ["model.embed_tokens.weight"]
        if dtype == torch.float32:
            check(not unchanged, f"{tag}: unquantized tensors ({', '.join(sorted(other))}"
                  f"{', the embedding' if args.keep_embedding else ''}) identical to the source"
                  + ("" if not unchanged else f": differ {unchanged}"))

    if args.hf:
        hf_check(args, tag, want)


def hf_check(args, tag, want):
    import transformers
    import transformers.modeling_utils as mu
    from transformers import AutoModelForCausalLM
    transformers.logging.set_verbosity_error()
    patched = False
    try:
        model = AutoModelForCausalLM.from_pretrained(args.out)
        check(args.keep_embedding, f"{tag}: transformers {transformers.__version__} loads the build"
              + ("" if args.keep_embedding else " (it was expected to fail on the quantized embedding: the "
                 "limitation is gone, update ctensors.h and the man page)"))
    except AttributeError as e:
        ok = not args.keep_embedding and "'Embedding' object has no attribute 'weight'" in str(e)
        check(ok, f"{tag}: transformers {transformers.__version__} refuses the quantized embedding as documented "
              f"({e})")
        if not ok:
            return
        orig = mu.PreTrainedModel._init_weights

        def guarded(self, module):  # the one-line guard nn.Linear already has
            if isinstance(module, torch.nn.Embedding) and not hasattr(module, "weight"):
                return None
            return orig(self, module)
        mu.PreTrainedModel._init_weights = guarded
        model = AutoModelForCausalLM.from_pretrained(args.out)
        mu.PreTrainedModel._init_weights = orig
        patched = True
    ref = AutoModelForCausalLM.from_pretrained(args.src)
    model.eval()
    ref.eval()
    lines = [json.loads(x) for x in open(os.path.join(args.src, "heldout.jsonl"))][:args.hf] \
        if os.path.exists(os.path.join(args.src, "heldout.jsonl")) else []
    if not lines:
        g = torch.Generator().manual_seed(1)
        V = ref.config.vocab_size
        lines = [{"input_ids": torch.randint(3, V, (n,), generator=g).tolist(), "prefix_tokens": n // 2}
                 for n in (9, 17, 30)][:max(1, args.hf)]
    tot = {"src": 0.0, "q": 0.0}
    ntok, kl_sum, kl_n, agree, maxd = 0, 0.0, 0, 0, 0.0
    with torch.no_grad():
        for i, ex in enumerate(lines):
            ids = torch.tensor([ex["input_ids"]])
            P = ex["prefix_tokens"]
            tt = torch.tensor([[1] * P + [0] * (ids.shape[1] - P)])
            lq = model(input_ids=ids, token_type_ids=tt, use_cache=False).logits[0].float()
            ls = ref(input_ids=ids, token_type_ids=tt, use_cache=False).logits[0].float()
            if i == 0:  # after the first forward the weights are decompressed: q * scale in the model's dtype
                sd, bf = model.state_dict(), model.dtype == torch.bfloat16

                def same(t, q, sb):
                    if bf:
                        return np.array_equal(t.view(torch.int16).numpy().view(np.uint16), bf16_bits(dequant_ref(q, sb)))
                    return t.dtype == torch.float32 and np.array_equal(t.numpy(), dequant_ref(q, sb))
                bad = [n for n, (q, sb, _) in want.items() if not same(sd[n + ".weight"], q, sb)]
                check(not bad, f"{tag}: HF's decompressed weights ({str(model.dtype)[6:]}) == "
                      f"{'bf16(q * scale)' if bf else 'q * scale'}, {len(want)} modules"
                      + ("" if not bad else f": differ {bad[:4]}"))
            maxd = max(maxd, float((lq - ls).abs().max()))
            agree += int((lq.argmax(-1) == ls.argmax(-1)).sum())
            ps, pq = torch.log_softmax(ls, -1), torch.log_softmax(lq, -1)
            kl_sum += float((ps.exp() * (ps - pq)).sum())
            kl_n += ls.shape[0]
            tgt = ids[0, P:]
            if len(tgt):
                tot["src"] -= float(ps[P - 1:-1].gather(1, tgt[:, None]).sum())
                tot["q"] -= float(pq[P - 1:-1].gather(1, tgt[:, None]).sum())
                ntok += len(tgt)
    top1 = agree / kl_n
    kl = kl_sum / kl_n
    nll_s, nll_q = tot["src"] / max(ntok, 1), tot["q"] / max(ntok, 1)
    print(f"HF {tag}{' (Embedding init guarded)' if patched else ''}: {len(lines)} sequences, {kl_n} positions: "
          f"max |logit - source| {maxd:.4f}, mean KL(source || build) {kl:.5f} nats, top-1 agreement {top1:.4f}; "
          f"NLL over {ntok} continuation tokens: source {nll_s:.5f}, build {nll_q:.5f} (+{nll_q - nll_s:.5f})",
          flush=True)
    # --bounds (the trained default model; random fixtures only print their numbers): loose limits, a few times
    # what was measured (golden/default, 32 sequences: int8 KL 0.0005, top-1 0.970, NLL +0.001; int4 g128 search
    # KL 0.037, top-1 0.80, NLL +0.025; int4 RTN KL 0.048, top-1 0.77, NLL +0.029)
    if args.bounds:
        lim = {"int8": (0.005, 0.95, 0.01), "int4": (0.1, 0.7, 0.08)}[args.method]
        check(kl < lim[0] and top1 > lim[1] and nll_q - nll_s < lim[2],
              f"{tag}: HF logits within the loose bounds (KL < {lim[0]}, top-1 > {lim[1]}, NLL + < {lim[2]})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--each"]:
        if len(sys.argv) != 3:
            sys.exit("usage: ct_check.py --each FILE (one argument list a line; - for stdin)")
        import shlex
        with (sys.stdin if sys.argv[2] == "-" else open(sys.argv[2])) as f:
            for line in f:
                if line.strip() and not line.lstrip().startswith("#"):
                    main(shlex.split(line))
    else:
        main(sys.argv[1:])
    print(f"ct_check: {RESULTS['pass']} passed, {RESULTS['fail']} failed")
    sys.exit(1 if RESULTS["fail"] else 0)
