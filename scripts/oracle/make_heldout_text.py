#!/usr/bin/env python3
"""Write golden/default/heldout.txt: text the bundled default model was never trained on, for frigg-eval kl
and frigg-quantize --check.

train_default.py cuts the public-domain / CC0 part of each corpus file (da.txt from line 1130, en.txt from
line 4079) into units of whole sentences (units_of, in text_units.py, shared by both) and holds out the last 2 % of each
file's units. This script takes the corpus lines all of whose units lie in that held-out block, in corpus
order, Danish first, up to --bytes bytes of each language (whole lines), and writes them one per line. It
checks the split against golden/default/reference.json: every held-out pair recorded there (prompt_text,
response_text) must be units of the held-out block.

  python3 scripts/oracle/make_heldout_text.py --corpus ../shared/data/corpus --out golden/default/heldout.txt

Standard library only; deterministic."""
import argparse
import json
import os
import sys
from text_units import units_of  # train_default.py's units



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True, help="the folder holding da.txt and en.txt (shared/data/corpus)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--reference", default=os.path.join(os.path.dirname(__file__), "../../golden/default/reference.json"))
    ap.add_argument("--unit-chars", type=int, default=300, help="train_default.py's --unit-chars")
    ap.add_argument("--bytes", type=int, default=12000, help="at most this many UTF-8 bytes of each language")
    args = ap.parse_args()

    held_units, out_lines = set(), []
    for name, first_line in (("da.txt", 1130), ("en.txt", 4079)):
        with open(os.path.join(args.corpus, name), encoding="utf-8") as f:
            lines = [ln for ln in f.read().split("\n")[first_line - 1:] if ln.strip()]
        # the units of each line, in order, as train_default.py makes them for the whole part
        per_line = [units_of([ln], args.unit_chars) for ln in lines]
        flat = [u for us in per_line for u in us]
        if flat != units_of(lines, args.unit_chars):
            sys.exit(f"{name}: units per line differ from the units of the whole part")
        cut = int(len(flat) * 0.98)
        held_units.update(flat[cut:])
        idx, taken = 0, 0
        for ln, us in zip(lines, per_line):
            first = idx
            idx += len(us)
            if first < cut or not us:
                continue  # a unit of this line was trained on
            b = len(ln.strip().encode("utf-8")) + 1
            if taken + b > args.bytes:
                break
            out_lines.append(ln.strip())
            taken += b
        print(f"{name}: {len(flat)} units, held out from unit {cut}; {taken} bytes taken", file=sys.stderr)

    with open(args.reference, encoding="utf-8") as f:
        ref = json.load(f)
    missing = [e for e in ref["heldout"]["examples"]
               if e["prompt_text"] not in held_units or e["response_text"] not in held_units]
    if missing:
        sys.exit(f"{len(missing)} held-out pairs of reference.json are not in the held-out block: the split differs")
    print(f"reference.json: all {len(ref['heldout']['examples'])} held-out pairs are held-out units", file=sys.stderr)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("".join(ln + "\n" for ln in out_lines))


if __name__ == "__main__":
    main()
