#!/usr/bin/env python3
"""bench_hf.py — HF's side of scripts/bench-tokenizer (PyPI tokenizers==0.23.2, timed inside Python
so the interpreter's start-up is not counted). JSON lines on stdout:
  tokenizer_load            Tokenizer.from_file (or from_str of the hf_regex-patched JSON)
  hf-py-sequential          every corpus line through encode(), one call at a time, as frigg's bench
                            does: Python's per-call overhead (argument conversion, the Encoding object)
                            is in this figure, it is not the library's alone
  hf-py-batch               the same lines through encode_batch (HF's multi-threaded batch path, one
                            Python call for the whole corpus)
  hf-py-whole               the whole corpus as one string through a single encode() call: the
                            library's own speed with the per-call overhead paid once (its token count
                            differs from the per-line ones: lines are joined by '\\n')
usage: bench_hf.py TOKENIZER_JSON HF_REGEX(0|1) REPEATS [CORPUS_FILE...]   (no corpus: the load only)"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


def stats(t):
    s = sorted(t)
    return {"ms_median": round(s[len(s) // 2], 1), "ms_min": round(s[0], 1), "ms_max": round(s[-1], 1)}


def now_ms():
    return time.perf_counter_ns() / 1e6


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: bench_hf.py TOKENIZER_JSON HF_REGEX(0|1) REPEATS CORPUS_FILE...")
    path, hf, reps, corpus = sys.argv[1], sys.argv[2] == "1", max(1, int(sys.argv[3])), sys.argv[4:]
    tokenizers = lib.hf()
    raw = lib.patched_json(path) if hf else None
    tl = []
    tok = None
    for _ in range(reps):
        t0 = now_ms()
        tok = tokenizers.Tokenizer.from_str(raw) if hf else tokenizers.Tokenizer.from_file(path)
        tl.append(now_ms() - t0)
    print(json.dumps({"bench": "tokenizer_load", "impl": "hf-py", "file": path, "hf_regex": int(hf),
                      "note": "from_str of the patched JSON (json.loads/dumps not timed)" if hf else "from_file",
                      **stats(tl), "repeats": reps}), flush=True)
    if not corpus:
        return
    lines = []
    for f in corpus:
        lines += lib.read_lines(f)
    nbytes = sum(len(s.encode("utf-8")) for s in lines)
    whole = "\n".join(lines)
    for mode in ("sequential", "batch", "whole"):
        te = []
        tokens = 0
        for _ in range(reps):
            t0 = now_ms()
            if mode == "sequential":
                tokens = sum(len(tok.encode(s, add_special_tokens=False).ids) for s in lines)
            elif mode == "batch":
                tokens = sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))
            else:
                tokens = len(tok.encode(whole, add_special_tokens=False).ids)
            te.append(now_ms() - t0)
        s = stats(te)
        print(json.dumps({"bench": "tokenizer_encode_corpus", "impl": f"hf-py-{mode}", "file": path,
                          "hf_regex": int(hf), "lines": len(lines) if mode != "whole" else 1,
                          "bytes": nbytes if mode != "whole" else len(whole.encode("utf-8")), "tokens": tokens,
                          "threads": os.cpu_count() if mode == "batch" else 1, **s,
                          "MB_per_s": round((nbytes if mode != "whole" else len(whole.encode("utf-8")))
                                            / 1e3 / s["ms_median"], 2), "repeats": reps}), flush=True)


if __name__ == "__main__":
    main()
