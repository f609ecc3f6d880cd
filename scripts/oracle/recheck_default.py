#!/usr/bin/env python3
"""recheck_default.py [DIR] — recompute the bundled default model's HF references on this machine's
CPU from the committed files (DIR, default golden/default: config.json, model.safetensors,
tokenizer.json, reference.json) and compare them with the committed reference.json, which
train_default.py computed on the GPU host's CPU right after training.

  - chat greedy continuations: identical ids, or identical up to a step where they part and either
    side's top1-top2 margin there is at most 0.25 (compare_reference.py says why: bf16 sums taken in another order by
    another CPU's kernels move a logit by an ulp or two);
  - held-out NLL, bf16 and fp32: within 1e-3 nats of the mean (a mean over ~9k tokens of log-softmax
    values whose logits moved by bf16 ulps).
Prints a line per check and "recheck_default: N passed, N failed"; exit 1 on a failure."""
import json
import os
import sys

import torch
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402
import train_default as td  # noqa: E402

NEAR_TIE = 0.25
NLL_TOL = 1e-3


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "golden/default"
    ref = json.load(open(os.path.join(d, "reference.json")))
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    m16 = mf.hf_load(d, torch.bfloat16, "cpu")
    m32 = mf.hf_load(d, torch.float32, "cpu")
    passed = failed = 0
    steps = ref["args"]["greedy_tokens"]
    for c in ref["chat"]:
        ids = tok.encode(td.render_prompt(c["prompt"]), add_special_tokens=False).ids
        ok = ids == c["input_ids"]
        toks, margins, _ = mf.greedy(m16, ids, len(ids), steps, "cpu")
        g = c["greedy"]
        n = min(len(g["output_ids"]), len(toks))
        agree, why = 0, "no divergence"
        for i in range(n):
            near = min(g["margins"][i], margins[i]) <= NEAR_TIE
            if toks[i] != g["output_ids"][i]:
                if not near:
                    ok = False
                why = f"parted at step {i} (margins {g['margins'][i]} / {margins[i]})"
                break
            agree += 1
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'ok  ' if ok else 'FAIL'} chat {c['prompt']!r}: prompt ids {'equal' if ids == c['input_ids'] else 'DIFFER'}, "
              f"{agree} greedy ids equal, {why}")
    ex = [(e["input_ids"][:e["prefix_tokens"]], e["input_ids"][e["prefix_tokens"]:]) for e in ref["heldout"]["examples"]]
    for name, m in (("nll_bf16", m16), ("nll_fp32", m32)):
        got = td.heldout_nll(m, ex)
        want = ref["heldout"][name]
        delta = abs(got["nll_mean"] - want["nll_mean"])
        ok = got["target_tokens"] == want["target_tokens"] and delta <= NLL_TOL
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'ok  ' if ok else 'FAIL'} held-out {name}: {got['nll_mean']:.6f} here, {want['nll_mean']:.6f} committed "
              f"(|Δ| {delta:.2e}) over {got['target_tokens']} tokens")
    print(f"recheck_default: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
