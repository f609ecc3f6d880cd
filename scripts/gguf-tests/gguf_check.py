#!/usr/bin/env python3
"""gguf_check.py — tests/gguf.sh's side that uses llama.cpp's gguf-py (PyPI gguf, scripts/py/requirements-check.txt).

  gguf_check.py dequant FILE.gguf DUMPDIR     every tensor of FILE: gguf.quants.dequantize's f32 values against
                                              frigg's (test_gguf --dump FILE DUMPDIR), bit for bit
  gguf_check.py random OUT.gguf               a GGUF of random blocks of every ggml type frigg decodes (fp16 scale
                                              fields finite), written with gguf.GGUFWriter
  gguf_check.py reference FILE.gguf CONFIG OUTDIR
                                              a safetensors checkpoint (split layout, bf16) of FILE's weights as
                                              gguf-py dequantizes them, rounded to bf16 (nearest even), with CONFIG
                                              as its config.json: frigg on it must score exactly as on FILE
  gguf_check.py malformed SRC.gguf OUTDIR     files that lie (written with gguf.GGUFWriter, or SRC's bytes changed
                                              where gguf.GGUFReader says a field is), one a line on stdout:
                                              "<file>\\t<a phrase frigg's error must contain>"

dequant ends with "dequant: N passed, N failed".
"""
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

DECODED = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
# byte offsets of each block's fp16 scale fields (gguf-py's block layouts)
F16_FIELDS = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.Q2_K: [80, 82],
              T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}


def dequant(path, dump):
    r = gguf.GGUFReader(path)
    ok = bad = 0
    for t in r.tensors:
        ref = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False).ravel()
        p = os.path.join(dump, t.name + ".f32")
        got = np.fromfile(p, dtype=np.float32) if os.path.exists(p) else None
        if got is not None and got.size == ref.size and np.array_equal(got.view(np.uint32), ref.view(np.uint32)):
            ok += 1
        else:
            bad += 1
            n = -1 if got is None else int(np.count_nonzero(got.view(np.uint32) != ref.view(np.uint32))) if got.size == ref.size else -2
            print(f"FAIL: {os.path.basename(path)}: {t.name} ({t.tensor_type.name}): {n} values differ from "
                  f"gguf.quants.dequantize (-1 no dump, -2 another size)")
    print(f"dequant: {ok} passed, {bad} failed")
    return bad == 0


def random_file(out):
    rng = np.random.default_rng(20261207)
    w = gguf.GGUFWriter(out, "test")
    for qt in DECODED:
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        nblocks = 64 if bs > 1 else 4096
        if qt == T.F32:
            raw = rng.standard_normal(nblocks).astype(np.float32).view(np.uint8)
        elif qt == T.F16:
            raw = (rng.standard_normal(nblocks) * 10).astype(np.float16).view(np.uint8)
        elif qt == T.BF16:
            raw = rng.integers(0, 1 << 16, nblocks, dtype=np.uint16).view(np.uint8)
        else:
            raw = rng.integers(0, 256, (nblocks, ts), dtype=np.uint8)
            for off in F16_FIELDS[qt]:  # finite scales, some negative, some subnormal
                d = (rng.standard_normal(nblocks) * np.where(rng.random(nblocks) < 0.1, 1e-6, 0.05)).astype(np.float16)
                raw[:, off:off + 2] = d.view(np.uint8).reshape(nblocks, 2)
            raw = raw.reshape(-1)
        raw = np.ascontiguousarray(raw.reshape(1, -1))
        w.add_tensor(f"r.{qt.name}", raw, raw_shape=raw.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def bf16_bits(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


def hf_name(name, lps):
    kinds = {"attn_gate": "self_attn.gate_proj", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj",
             "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output.weight":
        return "lm_head.weight"
    if name == "hrm.z_l_init":
        return "model.z_L_init"
    _, b, kind, _ = name.split(".")
    b = int(b)
    stack, i = ("H", b - lps) if b >= lps else ("L", b)
    return f"model.{stack}_module.layers.{i}.{kinds[kind]}.weight"


def reference(path, config, out):
    r = gguf.GGUFReader(path)
    lps = int(r.fields["hrm_text.hrm.layers_per_stack"].parts[-1][0])
    os.makedirs(out, exist_ok=True)
    header, blobs, off = {}, [], 0
    for t in sorted(r.tensors, key=lambda t: hf_name(t.name, lps)):
        v = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).ravel()
        shape = [int(d) for d in reversed(t.shape.tolist())]  # GGUF lists ne[0] (the columns) first
        b = bf16_bits(v).tobytes()
        name = hf_name(t.name, lps)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    with open(config) as f, open(os.path.join(out, "config.json"), "w") as g:
        g.write(f.read())


def malformed(src, out):
    os.makedirs(out, exist_ok=True)
    data = open(src, "rb").read()
    r = gguf.GGUFReader(src)
    cases = []

    def emit(name, b, phrase):
        p = os.path.join(out, name)
        open(p, "wb").write(b)
        cases.append((p, phrase))

    # truncations: in the metadata, in the tensor infos, in the last tensor's data
    last = max(r.tensors, key=lambda t: t.data_offset)
    emit("cut-meta.gguf", data[:5000], 'key "tokenizer.ggml.')  # inside the vocabulary arrays
    emit("cut-data.gguf", data[:last.data_offset + 10], f'tensor "{last.name}"')
    emit("cut-one.gguf", data[:-1], f'tensor "{last.name}"')
    # lying counts in the header
    b = bytearray(data)
    b[8:16] = struct.pack("<Q", 1 << 40)
    emit("lying-tensor-count.gguf", bytes(b), "tensor_count")
    b = bytearray(data)
    b[16:24] = struct.pack("<Q", (1 << 62) + 3)
    emit("lying-kv-count.gguf", bytes(b), "kv_count")
    # a tensor's offset moved off the alignment, and past the end, where GGUFReader says the field is
    t = r.tensors[3]
    info = t.field  # name length, name, n_dims, ne, type, offset
    off_pos = int(info.offset + sum(p.nbytes for p in info.parts[:-1]))
    b = bytearray(data)
    rel = struct.unpack("<Q", b[off_pos:off_pos + 8])[0]
    b[off_pos:off_pos + 8] = struct.pack("<Q", rel + 4)
    emit("misaligned.gguf", bytes(b), f'tensor "{t.name}"')
    b[off_pos:off_pos + 8] = struct.pack("<Q", len(data) * 2 // 32 * 32)
    emit("offset-past-end.gguf", bytes(b), f'tensor "{t.name}"')
    # a string whose length lies (general.architecture's)
    a = r.fields["general.architecture"]
    b = bytearray(data)
    pos = int(a.offset + a.parts[0].nbytes + a.parts[1].nbytes + a.parts[2].nbytes)
    b[pos:pos + 8] = struct.pack("<Q", 1 << 50)
    emit("lying-string.gguf", bytes(b), '"general.architecture"')
    # files written by gguf.GGUFWriter that are well formed but lie about the model
    def writer(name, arch="hrm_text", drop=(), extra=None, phrase=""):
        p = os.path.join(out, name)
        w = gguf.GGUFWriter(p, arch)
        for f in r.fields.values():
            if f.name.startswith("GGUF.") or f.name == "general.architecture" or f.name in drop:
                continue
            vt = f.types[0]
            if vt == gguf.GGUFValueType.ARRAY:
                continue  # the tokenizer arrays: not needed for these cases
            if vt == gguf.GGUFValueType.STRING:
                w.add_key_value(f.name, bytes(f.parts[-1]).decode(), vt)
            else:
                w.add_key_value(f.name, f.parts[-1][0].item(), vt)
        if extra:
            w.add_key_value(extra[0], extra[1], extra[2])
        for t in r.tensors:
            w.add_tensor(t.name, np.ascontiguousarray(t.data), raw_shape=t.data.shape, raw_dtype=t.tensor_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        cases.append((p, phrase))

    writer("arch-llama.gguf", arch="llama", phrase='expected "hrm_text"')
    writer("no-cycles.gguf", drop=("hrm_text.hrm.h_cycles",), phrase='"hrm_text.hrm.h_cycles" is missing')
    writer("gqa.gguf", drop=("hrm_text.attention.head_count_kv",),
           extra=("hrm_text.attention.head_count_kv", 1, gguf.GGUFValueType.UINT32), phrase="head_count_kv")
    writer("rope-scaling.gguf", extra=("hrm_text.rope.scaling.type", "linear", gguf.GGUFValueType.STRING),
           phrase='"hrm_text.rope.scaling.type"')
    writer("slots.gguf", drop=("hrm_text.block_count",),
           extra=("hrm_text.block_count", 5, gguf.GGUFValueType.UINT32), phrase='"hrm_text.block_count" = 5')
    for p, phrase in cases:
        print(f"{p}\t{phrase}")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "dequant" and len(sys.argv) == 4:
        sys.exit(0 if dequant(sys.argv[2], sys.argv[3]) else 1)
    elif cmd == "random" and len(sys.argv) == 3:
        random_file(sys.argv[2])
    elif cmd == "reference" and len(sys.argv) == 5:
        reference(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "malformed" and len(sys.argv) == 4:
        malformed(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
