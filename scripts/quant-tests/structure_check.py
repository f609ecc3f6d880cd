#!/usr/bin/env python3
"""structure_check.py — the layout of a frigg-quantize build, with the Python standard library only (no numpy,
no torch: tests/quantize.sh runs it in every `make check`).

  structure_check.py --src SRC --out OUT --method int8|int4 [--group G] [--keep-embedding]

Checks: the safetensors header (8-byte length, JSON, data 8-aligned, offsets contiguous and covering the file,
sorted by element size then name), exactly the expected tensors (HF split names: M.weight_packed I32
[rows, ceil(cols*bits/32)], M.weight_scale BF16 [rows, 1 | cols/G], M.weight_shape I64 [2] holding rows and
cols; model.z_L_init (and with --keep-embedding model.embed_tokens.weight) with the source's dtype, shape and
bytes), every packed int8 byte != 0 (q = -128 is never written), the metadata (format pt, method, group, the
source's sha256 recomputed here), config.json (the source's keys, each unchanged, plus quantization_config with
the expected groups and targets), the source's LICENSE file copied byte for byte and none where it has none,
NOTICE (the modification and the source's sha256; no model or license the source's own files do not name),
README.md and the tokenizer files copied byte for byte. Prints PASS/FAIL lines and "structure: N passed, N failed"."""
import argparse
import hashlib
import json
import math
import os
import re
import struct
import sys

R = {"pass": 0, "fail": 0}
LICENSE_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING")
ESIZE = {"I64": 8, "I32": 4, "F32": 4, "BF16": 2, "F16": 2}
CORE = r"re:^model\.[LH]_module\.layers\.[0-9]+\.(self_attn|mlp)\.(gate|q|k|v|o|up|down)_proj$"


def check(ok, what):
    R["pass" if ok else "fail"] += 1
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    return ok


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return n, json.loads(f.read(n)), os.path.getsize(path)


def source_tensors(src):
    idx = os.path.join(src, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    out = {}
    for fn in files:
        n, h, _ = header(os.path.join(src, fn))
        for k, v in h.items():
            if k != "__metadata__":
                out[k] = (fn, 8 + n, v)
    return out, files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--method", required=True)
    ap.add_argument("--group", type=int, default=128)
    ap.add_argument("--keep-embedding", action="store_true")
    a = ap.parse_args()
    tag = f"{os.path.basename(a.src.rstrip('/'))} {a.method}" + (f" g{a.group}" if a.method == "int4" else "") + \
        (" keep-emb" if a.keep_embedding else "")
    int4 = a.method == "int4"
    src_cfg = json.load(open(os.path.join(a.src, "config.json")))
    D, I = src_cfg["hidden_size"], src_cfg["intermediate_size"]
    V = src_cfg["vocab_size"]
    n = src_cfg.get("num_layers_per_stack") or src_cfg["num_hidden_layers"]

    # expected modules: name -> (rows, cols, bits, group)
    mods = {"lm_head": (V, D, 8, 0)}
    if not a.keep_embedding:
        mods["model.embed_tokens"] = (V, D, 8, 0)
    for s in ("L_module", "H_module"):
        for i in range(n):
            for m, (r, c) in {"self_attn.gate_proj": (D, D), "self_attn.q_proj": (D, D), "self_attn.k_proj": (D, D),
                              "self_attn.v_proj": (D, D), "self_attn.o_proj": (D, D), "mlp.gate_proj": (I, D),
                              "mlp.up_proj": (I, D), "mlp.down_proj": (D, I)}.items():
                mods[f"model.{s}.layers.{i}.{m}"] = (r, c, 4, a.group) if int4 else (r, c, 8, 0)
    want = {}
    for m, (r, c, bits, g) in mods.items():
        want[m + ".weight_packed"] = ("I32", [r, math.ceil(c * bits / 32)])
        want[m + ".weight_scale"] = ("BF16", [r, c // g if g else 1])
        want[m + ".weight_shape"] = ("I64", [2])
    src_t, src_files = source_tensors(a.src)
    copies = ["model.z_L_init"] + (["model.embed_tokens.weight"] if a.keep_embedding else [])
    for k in copies:
        want[k] = (src_t[k][2]["dtype"], src_t[k][2]["shape"])

    path = os.path.join(a.out, "model.safetensors")
    hlen, h, size = header(path)
    meta = h.pop("__metadata__", {})
    check((8 + hlen) % 8 == 0, f"{tag}: data section 8-aligned (header {hlen} bytes)")
    got = {k: (v["dtype"], v["shape"]) for k, v in h.items()}
    check(got == want, f"{tag}: exactly the {len(want)} expected tensors, dtypes and shapes"
          + ("" if got == want else f": extra {sorted(set(got) - set(want))[:4]}, missing {sorted(set(want) - set(got))[:4]}, "
             f"differ {[k for k in want if k in got and got[k] != want[k]][:4]}"))
    order = sorted(h, key=lambda k: h[k]["data_offsets"][0])
    off, contiguous, sized = 0, True, True
    for k in order:
        b, e = h[k]["data_offsets"]
        contiguous &= b == off
        sized &= e - b == ESIZE[h[k]["dtype"]] * math.prod(h[k]["shape"])
        off = e
    check(contiguous and sized and 8 + hlen + off == size, f"{tag}: offsets contiguous, sized by shape, covering the file")
    check(order == sorted(h, key=lambda k: (-ESIZE[h[k]["dtype"]], k)), f"{tag}: tensors ordered by element size, then name")

    with open(path, "rb") as f:
        def data(k):
            b, e = h[k]["data_offsets"]
            f.seek(8 + hlen + b)
            return f.read(e - b)
        shapes_ok = all(struct.unpack("<2q", data(m + ".weight_shape")) == (r, c) for m, (r, c, _, _) in mods.items())
        check(shapes_ok, f"{tag}: every weight_shape holds [rows, cols]")
        no128 = all(0 not in data(m + ".weight_packed")[:c] for m, (r, c, bits, _) in mods.items() if bits == 8)
        check(no128, f"{tag}: int8 rows never use q = -128 (no zero byte in the first packed row)")
        copied = True
        for k in copies:
            fn, base, v = src_t[k]
            with open(os.path.join(a.src, fn), "rb") as sf:
                sf.seek(base + v["data_offsets"][0])
                copied &= sf.read(v["data_offsets"][1] - v["data_offsets"][0]) == data(k)
        check(copied, f"{tag}: {', '.join(copies)} copied byte for byte")

    hashes = " ".join(f"{fn}={hashlib.sha256(open(os.path.join(a.src, fn), 'rb').read()).hexdigest()}" for fn in src_files)
    sorted_meta = meta.get("frigg_source_sha256", "").split(" ")
    check(meta.get("format") == "pt" and meta.get("frigg_method") == a.method and
          meta.get("frigg_group_size") == (str(a.group) if int4 else "channel") and
          sorted(sorted_meta) == sorted(hashes.split(" ")) and meta.get("frigg_version"),
          f"{tag}: metadata (format pt, method, group, frigg_version, source sha256 {hashes[:40]}...)")

    cfg = json.load(open(os.path.join(a.out, "config.json")))
    qc = cfg.pop("quantization_config", None)
    check(cfg == src_cfg, f"{tag}: config.json keeps every source key unchanged")
    vocab = ["lm_head"] + ([] if a.keep_embedding else ["model.embed_tokens"])
    if int4:
        groups = {"group_0": ([CORE], 4, a.group), "group_1": (vocab, 8, 0)}
    else:
        groups = {"group_0": ([CORE] + vocab, 8, 0)}
    ok = qc is not None and qc.get("format") == "pack-quantized" and qc.get("quant_method") == "compressed-tensors" \
        and qc.get("quantization_status") == "compressed" and qc.get("ignore") == [] and \
        set(qc.get("config_groups", {})) == set(groups)
    for gname, (targets, bits, g) in groups.items():
        s = (qc or {}).get("config_groups", {}).get(gname, {})
        w = s.get("weights", {})
        ok = ok and s.get("targets") == targets and s.get("format") == "pack-quantized" and \
            s.get("input_activations") is None and w == {"num_bits": bits, "type": "int", "symmetric": True,
                                                         "group_size": g or None, "strategy": "group" if g else "channel",
                                                         "dynamic": False}
    check(ok, f"{tag}: quantization_config groups and targets {json.dumps(qc)[:160]}...")
    cores = [m for m in mods if re.match(CORE[3:], m)]
    check(len(cores) == 16 * n and all(not re.match(CORE[3:], m) for m in mods if m not in cores),
          f"{tag}: the core regex selects exactly the {16 * n} decoder-layer linears")

    # the build states the source's license as the source's folder does, and no other
    src_lic = next((f for f in LICENSE_FILES if os.path.isfile(os.path.join(a.src, f))), None)
    out_lic = [f for f in LICENSE_FILES if os.path.exists(os.path.join(a.out, f))]
    check(out_lic == ([src_lic] if src_lic else []) and
          (not src_lic or open(os.path.join(a.src, src_lic), "rb").read() == open(os.path.join(a.out, src_lic), "rb").read()),
          f"{tag}: the source's license file ({src_lic}) and only it, copied byte for byte")
    notice = open(os.path.join(a.out, "NOTICE")).read()
    src_words = "".join(open(os.path.join(a.src, f), errors="replace").read() for f in ("README.md", "NOTICE")
                        if os.path.isfile(os.path.join(a.src, f)))
    check("modified" in notice and hashes.split(" ")[0].split("=")[1] in notice and
          all(w in src_words for w in ("DFM-Mimir", "Danish Foundation Models", "Apache") if w in notice),
          f"{tag}: NOTICE names the modification and the source's sha256, and no model or license the source does not")
    readme = open(os.path.join(a.out, "README.md")).read()
    check(f"--method {a.method}" in readme and "pack-quantized" in readme, f"{tag}: README.md describes the build")
    same = True
    for fn in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
               "generation_config.json"):
        sp, op = os.path.join(a.src, fn), os.path.join(a.out, fn)
        if os.path.exists(sp) != os.path.exists(op) or (os.path.exists(sp) and open(sp, "rb").read() != open(op, "rb").read()):
            same = False
    check(same, f"{tag}: tokenizer / chat-template / generation files copied byte for byte (where SRC has them)")


if __name__ == "__main__":
    main()
    print(f"structure: {R['pass']} passed, {R['fail']} failed")
    sys.exit(1 if R["fail"] else 0)
