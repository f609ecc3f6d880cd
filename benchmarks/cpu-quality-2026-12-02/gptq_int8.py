"""gptq_int8.py SRC RTN_BUILD OUT — an experiment: does error-compensating rounding (GPTQ, Frantar et al. 2022) of the
int8 weights, with frigg-quantize's own per-row scales kept, bring golden/default's int8 build to frigg-eval kl's
top-1 target? SRC: the bf16 checkpoint (golden/default); RTN_BUILD: `frigg-quantize SRC RTN_BUILD --method int8`;
OUT: a copy of RTN_BUILD whose decoder linears and lm_head hold GPTQ's q (the embedding stays round-to-nearest,
as in RTN_BUILD), for `frigg-eval kl --ref SRC --model OUT`.

Calibration: corpus lines the model was trained on and that are not held out (da.txt lines 1200-1499, en.txt
lines 4100-4299, each `<bos>` + line, causal, the lines of golden/default/heldout.txt excluded); each linear's
Hessian H = sum of x x^T over every call (HRM-Text runs each layer several times per token), through HF's own
hrm_text model in float32 on the CPU. Per linear: H += 1% of its mean diagonal; columns in order of decreasing
diag(H) ("act order"); q = clamp(round(w / s), -127, 127) with s the build's bf16 row scale; each column's
rounding error spread over the remaining columns through the Cholesky factor of H^-1 (the paper's update). The
build's packing ("pack-quantized": q + 128 in bytes, four per int32, the first in the lowest byte) is read back
and checked against round-to-nearest before anything is written."""
import json
import os
import shutil
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

src, rtn, out = sys.argv[1:4]
corpus = os.environ.get("CORPUS", "../shared/data/corpus")
torch.manual_seed(0)

held = set(l.strip() for l in open(os.path.join(src, "heldout.txt"), encoding="utf-8"))
lines = open(os.path.join(corpus, "da.txt"), encoding="utf-8").read().split("\n")[1199:1499]
lines += open(os.path.join(corpus, "en.txt"), encoding="utf-8").read().split("\n")[4099:4299]
lines = [l for l in lines if l.strip() and l.strip() not in held]
tok = Tokenizer.from_file(os.path.join(src, "tokenizer.json"))
cfg = json.load(open(os.path.join(src, "config.json")))
seqs = [[cfg["bos_token_id"]] + tok.encode(l, add_special_tokens=False).ids[:255] for l in lines]

model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
model.eval()
linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
H = {n: torch.zeros(m.in_features, m.in_features, dtype=torch.float64) for n, m in linears.items()}
count = {n: 0 for n in linears}


def hook(name):
    def f(mod, inp):
        x = inp[0].detach().reshape(-1, inp[0].shape[-1]).double()
        H[name] += x.t() @ x
        count[name] += x.shape[0]
    return f


hs = [m.register_forward_pre_hook(hook(n)) for n, m in linears.items()]
with torch.no_grad():
    for s in seqs:
        ids = torch.tensor([s])
        model(input_ids=ids, token_type_ids=torch.zeros_like(ids))
for h in hs:
    h.remove()

f = safe_open(os.path.join(rtn, "model.safetensors"), "pt")
meta = f.metadata()
tensors = {k: f.get_tensor(k) for k in f.keys()}


def unpack(packed, rows, cols):
    b = packed.view(torch.int32).contiguous().view(torch.uint8).reshape(rows, -1)[:, :cols]
    return b.to(torch.int16) - 128


def pack(q):
    rows, cols = q.shape
    pad = (-cols) % 4
    b = torch.cat([(q + 128).to(torch.uint8), torch.full((rows, pad), 128, dtype=torch.uint8)], 1).contiguous()
    return b.view(torch.int32)


report = {"calibration_sequences": len(seqs), "calibration_tokens": sum(len(s) for s in seqs), "modules": {}}
sd = {k: v for k, v in model.state_dict().items()}

for name in linears:
    key = name + ".weight_packed"
    if key not in tensors:
        continue
    W = linears[name].weight.detach().double()  # HF's module (the packed source split into its modules)
    rows, cols = W.shape
    s = tensors[name + ".weight_scale"].double().reshape(rows, 1)
    q_rtn = unpack(tensors[key], rows, cols)
    rtn_check = torch.clamp(torch.round(W / s), -127, 127).to(torch.int16)
    assert torch.equal(q_rtn, rtn_check), f"{name}: the build's q is not round-to-nearest of the source with its scales"
    Hm = H[name] / count[name]
    dead = torch.diag(Hm) == 0
    Hm[dead, dead] = 1.0
    Hm += torch.eye(cols, dtype=torch.float64) * 0.01 * torch.mean(torch.diag(Hm))
    perm = torch.argsort(torch.diag(Hm), descending=True)
    Wp, Hp = W[:, perm].clone(), Hm[perm][:, perm]
    U = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(Hp)), upper=True)
    Q = torch.zeros_like(Wp)
    for j in range(cols):
        w = Wp[:, j]
        q = torch.clamp(torch.round(w / s[:, 0]), -127, 127)
        Q[:, j] = q
        err = (w - q * s[:, 0]) / U[j, j]
        Wp[:, j + 1:] -= err.unsqueeze(1) * U[j, j + 1:].unsqueeze(0)
    q_g = torch.empty_like(Q)
    q_g[:, perm] = Q
    q_g = q_g.to(torch.int16)

    def werr(q):  # the layer's output error on the calibration inputs: tr(D H D^T) / rows, D = W - q s
        D = W - q.double() * s
        return float(torch.einsum("ij,jk,ik->", D, Hm, D) / rows)

    report["modules"][name] = {"changed": float((q_g != q_rtn).double().mean()), "err_rtn": werr(q_rtn), "err_gptq": werr(q_g)}
    tensors[key] = pack(q_g)
    assert torch.equal(unpack(tensors[key], rows, cols), q_g)

shutil.copytree(rtn, out)
save_file(tensors, os.path.join(out, "model.safetensors"), metadata=meta)
json.dump(report, open(os.path.join(out, "gptq-report.json"), "w"), indent=1)
print(json.dumps(report))
