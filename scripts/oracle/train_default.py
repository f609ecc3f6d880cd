#!/usr/bin/env python3
"""train_default.py — the bundled default model: a small Gemma-pipeline tokenizer and a tiny
HRM-Text trained briefly on the corpus, with Hugging Face's reference outputs.

Runs on the GPU host (torch, transformers >= 5.9 with hrm_text, tokenizers, safetensors):

  train_default.py --corpus DIR --out golden/default [--train-seconds 150] [--seed 1]

DIR holds da.txt and en.txt (shared/data/corpus). Only their public-domain / CC0 parts are used
(da.txt from line 1130, en.txt from line 4079; the earlier lines are CC BY-SA Universal
Dependencies text), so the committed weights carry no share-alike terms.

Writes OUT/{tokenizer.json, config.json, model.safetensors, reference.json}:
- tokenizer.json: the Gemma/DFM-Mimir pipeline (normalizer Replace ' '→'▁', pre-tokenizer
  Split(' ', MergedWithPrevious), BPE with byte_fallback and fuse_unk, decoder
  Replace/ByteFallback/Fuse), ids 0..237 laid out exactly as in DFM-Mimir's vocabulary (specials
  at their Mimir ids, `<unusedN>` placeholders, newline/space runs, HTML tags), byte tokens
  <0x00>..<0xFF> at 238+b, learned tokens after that; 8192 ids.
- config.json + model.safetensors: converter-style config, packed layout, bf16.
- reference.json: HF greedy outputs for chat prompts and the held-out next-token NLL, both
  computed on the CPU from the saved files (bf16, and fp32 for the NLL).

Why these choices: the engine must run the tokenizer and model exactly as for DFM-Mimir, so the
special ids, byte-token offset and tokenizer components match Mimir's; the model is trained
prefix-LM style (token_type_ids 1 over the rendered prompt) like Mimir, with the 2/3 schedule.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (shared helpers: config, packing, HF loading, greedy loop)
from text_units import units_of  # make_heldout_text.py cuts the same units

GENERATOR = "scripts/oracle/train_default.py"
VOCAB = 8192
BOS, EOS_TOKEN, PAD, TURN_OPEN, TURN_CLOSE = 2, 1, 0, 105, 106
HTML_TAGS = ["table", "caption", "thead", "tbody", "tfoot", "tr", "th", "td"]
MIMIR_SPECIALS = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>", 5: "[multimodal]",
                  46: "<|tool>", 47: "<tool|>", 48: "<|tool_call>", 49: "<tool_call|>",
                  50: "<|tool_response>", 51: "<tool_response|>", 52: '<|"|>', 98: "<|think|>",
                  100: "<|channel>", 101: "<channel|>", 105: "<|turn>", 106: "<turn|>"}
# Added (special, not normalized) tokens of DFM-Mimir's tokenizer.json that lie below our vocab size.
ADDED_IDS = [0, 1, 2, 3, 4, 46, 47, 48, 49, 50, 51, 52, 98, 100, 101, 105, 106]


def mimir_low_tokens():
    """DFM-Mimir's ids 0..237, in order (checked against the Mimir-equivalent tokenizer.json)."""
    toks = []
    for i in range(107):
        toks.append(MIMIR_SPECIALS.get(i, f"<unused{i - 6}>"))
    toks += ["\n" * k for k in range(1, 32)]            # 107..137
    toks += ["\u2581" * k for k in range(2, 32)]        # 138..167
    opening = HTML_TAGS
    toks += [f"<{t}>" for t in opening] + [f"</{t}>" for t in opening]                 # 168..183
    heads = ["h1", "h2", "h3", "h4", "h5", "h6"]
    toks += [f"<{t}>" for t in heads] + ["<blockquote>"]                                  # 184..190
    toks += [f"</{t}>" for t in heads] + ["</blockquote>"]                                # 191..197
    inline = ["strong", "em", "b", "i", "u", "s", "sub", "sup", "code"]
    toks += [f"<{t}>" for t in inline] + [f"</{t}>" for t in inline]                     # 198..215
    misc = ["a", "html", "body", "img", "span", "bbox", "ul", "li", "div", "iframe", "footer"]
    toks += [f"<{t}>" for t in misc] + [f"</{t}>" for t in misc]                         # 216..237
    assert len(toks) == 238, len(toks)
    return toks


# --------------------------------------------------------------------------------------------
# Corpus → text units → chat pairs



def read_corpus(corpus_dir, max_chars):
    parts = {}
    for name, first_line in (("da.txt", 1130), ("en.txt", 4079)):
        with open(os.path.join(corpus_dir, name), encoding="utf-8") as f:
            lines = f.read().split("\n")[first_line - 1:]
        parts[name] = units_of([ln for ln in lines if ln.strip()], max_chars)
    return parts


def render_prompt(user_text):
    """One user turn of the Gemma-4 chat template with the generation prompt (MODEL.md §5)."""
    return f"<bos><|turn>user\n{user_text}<turn|>\n<|turn>model\n"


# --------------------------------------------------------------------------------------------
# Tokenizer

def train_tokenizer(units, seed):
    """Learn BPE merges on the corpus units, then lay the vocabulary out like DFM-Mimir's.
    Training splits words before each '▁' (so merges stay inside words, as SentencePiece's do);
    the saved tokenizer uses Gemma's own pre-tokenizer, under which the same merges apply."""
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    trainer_tok.normalizer = normalizers.Replace(" ", "\u2581")
    trainer_tok.pre_tokenizer = pre_tokenizers.Split("\u2581", behavior="merged_with_next")
    low = mimir_low_tokens()
    byte_toks = [f"<0x{b:02X}>" for b in range(256)]
    n_fixed = len(low) + len(byte_toks)
    slack = 200  # room for learned tokens that collide with fixed ones; trimmed below
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - n_fixed + slack, min_frequency=2, special_tokens=[],
                                  limit_alphabet=200, show_progress=False)
    trainer_tok.train_from_iterator(units, trainer=trainer)
    learned = json.loads(trainer_tok.to_str())["model"]
    learned_tokens = [t for t, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1])]

    vocab = {}
    for t in low + byte_toks:
        vocab[t] = len(vocab)
    for t in learned_tokens:
        if len(vocab) == VOCAB:
            break
        if t not in vocab:
            vocab[t] = len(vocab)
    if len(vocab) != VOCAB:
        raise RuntimeError(f"only {len(vocab)} tokens; need {VOCAB}")
    merges = []
    for m in learned["merges"]:
        a, b = (m if isinstance(m, list) else m.split(" ", 1))
        if a in vocab and b in vocab and (a + b) in vocab:
            merges.append([a, b])

    added = [{"id": i, "content": low[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in ADDED_IDS]
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    return Tokenizer.from_str(json.dumps(spec)), len(merges)


def check_tokenizer(tok, units):
    """Round trip and special-token sanity; printed, and the failures counted in reference.json."""
    sample = units[:: max(1, len(units) // 2000)]
    bad = sum(1 for u in sample if tok.decode(tok.encode(u, add_special_tokens=False).ids,
                                              skip_special_tokens=False) != u)
    probe = render_prompt("Hej verden")
    ids = tok.encode(probe, add_special_tokens=False).ids
    assert ids[:2] == [BOS, TURN_OPEN] and TURN_CLOSE in ids, ids
    assert tok.token_to_id("<0x00>") == 238 and tok.token_to_id("<0xFF>") == 493
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    byte_ids = tok.encode("\u0378x", add_special_tokens=False).ids  # unassigned code point → bytes
    print(f"tokenizer: {VOCAB} ids; round trip failures {bad}/{len(sample)}; probe {ids}; "
          f"U+0378 → {byte_ids}", flush=True)
    return {"roundtrip_sample": len(sample), "roundtrip_failures": bad}


# --------------------------------------------------------------------------------------------
# Examples and training

def encode_pairs(tok, pairs, max_len):
    P = tok.encode_batch([render_prompt(u) for u, _ in pairs], add_special_tokens=False)
    R = tok.encode_batch([r for _, r in pairs], add_special_tokens=False)
    out = []
    for (u, r), p, q in zip(pairs, P, R):
        pi, ri = p.ids, q.ids + [TURN_CLOSE]
        if len(pi) + len(ri) <= max_len:
            out.append((pi, ri, u, r))
    return out


def batches(examples, bsz, rng):
    """Shuffle, then group examples of similar length (less padding), then shuffle the batches."""
    ex = examples[:]
    rng.shuffle(ex)
    out = []
    for g in range(0, len(ex), bsz * 64):
        grp = sorted(ex[g:g + bsz * 64], key=lambda e: len(e[0]) + len(e[1]))
        out += [grp[i:i + bsz] for i in range(0, len(grp), bsz)]
    rng.shuffle(out)
    return out


def tensors(batch, device):
    T = max(len(p) + len(r) for p, r, *_ in batch)
    T = (T + 7) // 8 * 8
    ids = torch.full((len(batch), T), PAD, dtype=torch.long)
    tt = torch.zeros((len(batch), T), dtype=torch.long)
    lab = torch.full((len(batch), T), -100, dtype=torch.long)
    for b, (p, r, *_) in enumerate(batch):
        seq = p + r
        ids[b, :len(seq)] = torch.tensor(seq)
        tt[b, :len(p)] = 1          # the whole rendered prompt is the bidirectional prefix
        lab[b, len(p):len(seq)] = torch.tensor(r)
    return ids.to(device), tt.to(device), lab.to(device)


def train(model, examples, args, device):
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    nodecay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    rng = random.Random(args.seed)
    model.train()
    t0, step, seen_tokens, epoch = time.time(), 0, 0, 0
    log = []
    done = False
    while not done:
        epoch += 1
        for batch in batches(examples, args.batch, rng):
            elapsed = time.time() - t0
            if elapsed >= args.train_seconds:
                done = True
                break
            frac = elapsed / args.train_seconds
            lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
            for g in opt.param_groups:
                g["lr"] = lr
            ids, tt, lab = tensors(batch, device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                logits = model(input_ids=ids, token_type_ids=tt, use_cache=False).logits
            loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), lab[:, 1:].reshape(-1),
                                   ignore_index=-100)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            seen_tokens += int((lab != -100).sum())
            if step % 100 == 0 or step == 1:
                lv = float(loss)
                log.append({"step": step, "epoch": epoch, "seconds": round(time.time() - t0, 1), "loss": lv})
                print(f"step {step:5d} epoch {epoch} {time.time() - t0:6.1f} s lr {lr:.2e} loss {lv:.4f}", flush=True)
    model.eval()
    return {"steps": step, "epochs_started": epoch, "target_tokens_seen": seen_tokens,
            "seconds": round(time.time() - t0, 1), "log": log}


# --------------------------------------------------------------------------------------------
# References (HF on the CPU, from the saved files)

@torch.no_grad()
def heldout_nll(model, examples):
    total, n = 0.0, 0
    for p, r, *_ in examples:
        seq = p + r
        logits = mf.forward(model, seq, [1] * len(p) + [0] * len(r), "cpu", use_cache=False).logits[0]
        lp = torch.log_softmax(logits[len(p) - 1:len(seq) - 1].float(), dim=-1)
        tgt = torch.tensor(r)
        total += float(-lp.gather(1, tgt[:, None]).sum())
        n += len(r)
    return {"nll_sum": total, "target_tokens": n, "nll_mean": total / n, "perplexity": math.exp(total / n)}


CHAT_PROMPTS = ["Hvad er hovedstaden i Danmark?", "Fortæl mig en historie om en gammel konge.",
                "Hvordan har du det i dag?", "What is the capital of Denmark?",
                "Tell me about Sherlock Holmes.", "Det var en mørk og stormfuld nat."]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="folder with da.txt and en.txt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-seconds", type=float, default=150.0)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--unit-chars", type=int, default=300)
    ap.add_argument("--heldout", type=int, default=128, help="held-out pairs recorded and scored")
    ap.add_argument("--greedy-tokens", type=int, default=64)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("train_default.py trains on a CUDA GPU; none is visible")
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()

    parts = read_corpus(args.corpus, args.unit_chars)
    # Held out: the last 2% of each part's units (a contiguous block, never trained on).
    train_pairs, held_pairs = [], []
    for name, units in parts.items():
        cut = int(len(units) * 0.98)
        train_pairs += [(units[i], units[i + 1]) for i in range(cut - 1)]
        held_pairs += [(units[i], units[i + 1]) for i in range(cut, len(units) - 1)]
    all_units = [u for units in parts.values() for u in units]
    print(f"units: {', '.join(f'{k} {len(v)}' for k, v in parts.items())}; train pairs {len(train_pairs)}, "
          f"held-out pairs {len(held_pairs)}", flush=True)

    t0 = time.time()
    tok, n_merges = train_tokenizer([u for units in parts.values() for u in units[:int(len(units) * 0.98)]],
                                    args.seed)
    tok_check = check_tokenizer(tok, all_units)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    print(f"tokenizer trained in {time.time() - t0:.1f} s, {n_merges} merges", flush=True)

    train_ex = encode_pairs(tok, train_pairs, args.max_len)
    held_ex = encode_pairs(tok, held_pairs, args.max_len)
    hrng = random.Random(args.seed + 7)
    held_ex = sorted(hrng.sample(held_ex, min(args.heldout, len(held_ex))), key=lambda e: held_ex.index(e))
    n_tok = sum(len(p) + len(r) for p, r, *_ in train_ex)
    print(f"train examples {len(train_ex)} ({n_tok} tokens), held-out scored {len(held_ex)}", flush=True)

    shape = mf.make_shape(VOCAB, 256, 4, 64, 768, 2, 2, 3, 512, eos=TURN_CLOSE, bos=BOS, pad=PAD)
    cfg_dict = mf.converter_config(shape, "bfloat16")
    mf.write_json(os.path.join(args.out, "config.json"), cfg_dict)
    from transformers.models.hrm_text.configuration_hrm_text import HrmTextConfig
    from transformers.models.hrm_text.modeling_hrm_text import HrmTextForCausalLM
    config = HrmTextConfig.from_pretrained(args.out)
    # Training only: backpropagate through every L run of both H cycles (an inference no-op).
    config.L_bp_cycles = [config.L_cycles] * config.L_cycles
    device = "cuda"
    model = HrmTextForCausalLM(config).float().to(device)  # fp32 master weights; bf16 via autocast
    with torch.no_grad():
        # A fixed random z_L_init, as DFM-Mimir's (a frozen buffer); HF's init would zero it.
        g = torch.Generator().manual_seed(args.seed + 3)
        model.model.z_L_init.copy_(torch.randn(shape["hidden"], generator=g).to(device))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters", flush=True)
    stats = train(model, train_ex, args, device)

    split = {k: v.detach().to("cpu", torch.bfloat16).contiguous() for k, v in model.state_dict().items()
             if k in {n for n, _ in model.named_parameters()}}
    save_file(mf.cpu_contig(mf.pack(split)), os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    del model
    torch.cuda.empty_cache()

    m16 = mf.hf_load(args.out, torch.bfloat16, "cpu")
    m32 = mf.hf_load(args.out, torch.float32, "cpu")
    load_check = mf.check_weights(m16, split, "default bf16")
    nll16 = heldout_nll(m16, held_ex)
    nll32 = heldout_nll(m32, held_ex)
    print(f"held-out NLL bf16 {nll16['nll_mean']:.4f} (ppl {nll16['perplexity']:.1f}), fp32 {nll32['nll_mean']:.4f} "
          f"over {nll16['target_tokens']} tokens", flush=True)
    chats = []
    for text in CHAT_PROMPTS:
        ids = tok.encode(render_prompt(text), add_special_tokens=False).ids
        toks, margins, _ = mf.greedy(m16, ids, len(ids), args.greedy_tokens, "cpu")
        finish = "length"
        if TURN_CLOSE in toks:
            cut = toks.index(TURN_CLOSE) + 1
            toks, margins, finish = toks[:cut], margins[:cut], "stop"
        out_text = tok.decode([t for t in toks if t != TURN_CLOSE], skip_special_tokens=False)
        chats.append({"prompt": text, "input_ids": ids, "prefix_tokens": len(ids),
                      "greedy": {"output_ids": toks, "margins": margins, "finish_reason": finish, "text": out_text}})
        print(f"  {text!r} → {out_text!r} ({finish})", flush=True)

    ref = dict(generator=GENERATOR, **mf.versions(), dtype="bfloat16", device="cpu", attn_implementation="sdpa",
               seed=args.seed, args=vars(args), param_count=n_params, shape=shape,
               corpus="shared/data/corpus da.txt lines 1130- and en.txt lines 4079- (public domain / CC0 parts), "
                      f"cut into units of <= {args.unit_chars} characters; pair = (unit i, unit i+1)",
               chat_format="<bos><|turn>user\\n{unit i}<turn|>\\n<|turn>model\\n + {unit i+1}<turn|>; "
                           "token_type_ids 1 over the prompt",
               tokenizer=dict(tok_check, vocab=VOCAB, merges=n_merges),
               training=stats, hf_load_check=load_check,
               greedy_meaning="prefill with token_type_ids 1 over the whole prompt, then cached steps; argmax of "
                              "bf16 logits; stops after <turn|> (106) or greedy_tokens",
               chat=chats,
               heldout={"meaning": "mean next-token NLL (nats) of the response tokens (unit i+1 and the closing "
                                   "<turn|>) given the prompt as bidirectional prefix; last 2% of each corpus "
                                   "part, never trained on",
                        "nll_bf16": nll16, "nll_fp32": nll32,
                        "examples": [{"input_ids": p + r, "prefix_tokens": len(p), "prompt_text": u,
                                      "response_text": rt} for p, r, u, rt in held_ex]},
               total_seconds=round(time.time() - t_start, 1))
    mf.write_json(os.path.join(args.out, "reference.json"), ref)
    print(f"done in {time.time() - t_start:.1f} s; files in {args.out}: {sorted(os.listdir(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
