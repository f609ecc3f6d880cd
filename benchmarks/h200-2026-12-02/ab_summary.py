"""ab_summary.py AB.jsonl: one line per decode cell (kv dtype, batch, ctx) of an A/B whose rows carry "arm"
(base or new): the mean tok/s of each arm over its repeats, new/base, and the new arm's roofline fraction, SM
clock and temperature (its last row)."""
import collections
import json
import sys

cells = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("bench") == "decode":
        cells[(r["kv_dtype"], r["batch"], r["ctx"], r["arm"])].append(r)
for kv, b, c, _ in sorted(k for k in cells if k[3] == "new"):
    new = [r["tok_s"] for r in cells[(kv, b, c, "new")]]
    base = [r["tok_s"] for r in cells[(kv, b, c, "base")]]
    nb = sum(new) / len(new)
    bb = sum(base) / len(base) if base else float("nan")
    last = cells[(kv, b, c, "new")][-1]
    print(f"kv {kv:4} batch {b:2} ctx {c:4}: new {nb:8.1f} base {bb:8.1f} tok/s  new/base {nb / bb:.3f}  "
          f"roofline {last.get('roofline_frac')}  {last.get('sm_clock_mhz')} MHz {last.get('temp_c')} C")
