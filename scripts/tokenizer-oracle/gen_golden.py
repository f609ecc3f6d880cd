#!/usr/bin/env python3
"""gen_golden.py — golden token-id vectors from HF tokenizers (PyPI tokenizers==0.23.2) for
tests/test_tokenizer.c. Writes gzip'd JSON lines:
  line 1: {"tokenizer": REF, "sha256": ..., "mode": "default"|"hf_regex", "oracle": "tokenizers@0.23.2",
           "vocab_size": N, "seed": S}
  then per case: {"src": "da"|"en", "line": L, "ids": [...], "dec": null|"..."}   (corpus lines; the
           text is read back from the corpus file, so it is not stored twice). To keep the files
           small, only every 50th corpus line stores its ids; the others store "n" (the id count)
           and "h": the first 16 hex digits of sha256 over the ids as uint32 little-endian.
  or           {"src": "gen", "text": "...", "ids": [...], "dec": null|"..."}
  or           {"src": "ids", "ids": [...], "dec": "..."}   (decode only: random id sequences rich in
                byte-fallback tokens, valid and invalid UTF-8 runs, and ids out of the vocab)
"dec" is HF's decode(ids, skip_special_tokens=False), null when it equals the input text.
REF names the tokenizer for the test: "shared:<path under FRIGG_SHARED>" or "root:<path in repo>".

usage: gen_golden.py --tokenizer FILE --ref REF [--hf-regex] [--corpus DIR] [--count N]
                     [--decode-count N] [--long-runs] [--seed S] --out OUT.jsonl.gz
"""
import argparse
import gzip
import hashlib
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lib  # noqa: E402


def ids_hash(ids):
    return hashlib.sha256(struct.pack("<%dI" % len(ids), *ids)).hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser(description="golden token-id vectors from HF tokenizers")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--hf-regex", action="store_true")
    ap.add_argument("--corpus")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--decode-count", type=int, default=2000)
    ap.add_argument("--long-runs", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    tok, sha256 = lib.load(a.tokenizer, a.hf_regex)
    vsize = tok.get_vocab_size(with_added_tokens=True)
    out = [lib.dumps({"tokenizer": a.ref, "sha256": sha256, "mode": "hf_regex" if a.hf_regex else "default",
                      "oracle": lib.ORACLE, "vocab_size": vsize, "seed": a.seed})]

    def case(text):
        ids = lib.encode(tok, text)
        dec = lib.decode(tok, ids)
        return ids, (None if dec == text else dec)

    n = 0
    if a.corpus:
        for lang in ("da", "en"):
            for i, line in enumerate(lib.read_lines(os.path.join(a.corpus, f"{lang}.txt"))):
                ids, d = case(line)
                if i % 50 == 0:
                    out.append(lib.dumps({"src": lang, "line": i + 1, "ids": ids, "dec": d}))
                else:
                    out.append(lib.dumps({"src": lang, "line": i + 1, "n": len(ids), "h": ids_hash(ids), "dec": d}))
                n += 1
    r = lib.rng(a.seed)
    for _ in range(a.count):
        text = lib.gen_string(r)
        ids, d = case(text)
        out.append(lib.dumps({"src": "gen", "text": text, "ids": ids, "dec": d}))
        n += 1
    # --long-runs: runs long enough to exhaust a regex engine's backtracking stack
    if a.long_runs:
        for unit in [' ', '!', 'a', 'A', 'aA', '\t', '\n', ' \n', '1', '😊', 'æ', '.,', '<bos>', '▁']:
            for reps in (3000, 40000):
                text = unit * reps
                ids, d = case(text)
                out.append(lib.dumps({"src": "gen", "text": text, "ids": ids, "dec": d}))
                n += 1
    # decode-only cases: byte tokens (UTF-8 lead and continuation bytes, ASCII, invalid bytes),
    # ordinary ids, added tokens, ids past the vocab
    byte_ids = []
    for b in range(256):
        i = tok.token_to_id("<0x%02X>" % b)
        if i is not None:
            byte_ids.append((b, i))

    def pick_byte(lo, hi):
        c = [i for b, i in byte_ids if lo <= b <= hi]
        return c[lib.floor_mul(r, len(c))] if c else lib.floor_mul(r, vsize)

    for _ in range(a.decode_count):
        length = 1 + lib.floor_mul(r, 16)
        ids = []
        for _ in range(length):
            x = r()
            if x < 0.2:
                ids.append(pick_byte(0xC2, 0xF4))
            elif x < 0.45:
                ids.append(pick_byte(0x80, 0xBF))
            elif x < 0.55:
                ids.append(pick_byte(0x00, 0x7F))
            elif x < 0.6:
                ids.append(pick_byte(0xF5, 0xFF))
            elif x < 0.65:
                ids.append(vsize + lib.floor_mul(r, 5))
            else:
                ids.append(lib.floor_mul(r, vsize))
        out.append(lib.dumps({"src": "ids", "ids": ids, "dec": lib.decode(tok, ids)}))
        n += 1
    with open(a.out, "wb") as f:
        f.write(gzip.compress(("\n".join(out) + "\n").encode("utf-8"), compresslevel=9, mtime=0))
    print(f"gen_golden: {n} cases -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
