"""ab_builds.py AB.jsonl: the decode rows of an A/B whose rows carry "arm" (base or new), frigg-bench decode rows
and matrix --builds rows alike: per cell (build, weights read, kv dtype, batch, ctx) the mean tok/s of each arm
over its rows and new/base; then, per arm, each build's tok/s against the bf16 build's in the same cell (the
build named "mimir"), and the SM clock and temperature range of the rows."""
import collections
import json
import os
import sys

cells = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("bench") != "decode":
        continue
    build = os.path.basename(r.get("build", "random-mimir"))
    cells[(build, r.get("decode_weights", "stored"), r["kv_dtype"], r["batch"], r["ctx"], r["arm"])].append(r)


def mean(rows):
    return sum(x["tok_s"] for x in rows) / len(rows) if rows else float("nan")


keys = sorted({k[:5] for k in cells}, key=lambda k: (k[3], k[4], k[2], k[0], k[1]))
for k in keys:
    nb, bb = mean(cells[k + ("new",)]), mean(cells[k + ("base",)])
    print(f"{k[0]:12} {k[1]:10} kv {k[2]:4} batch {k[3]:2} ctx {k[4]:4}: new {nb:8.1f} base {bb:8.1f} tok/s  "
          f"new/base {nb / bb:.3f}")
for arm in ("base", "new"):
    for k in keys:
        if k[0] == "mimir" or k[0] == "random-mimir":
            continue
        ref = [c for c in keys if c[0] == "mimir" and c[2:] == k[2:]]
        if ref:
            print(f"{arm:4} {k[0]:4} {k[1]:10} kv {k[2]:4} batch {k[3]:2} ctx {k[4]:4}: "
                  f"{mean(cells[k + (arm,)]) / mean(cells[ref[0] + (arm,)]):.3f}x bf16")
rows = [r for v in cells.values() for r in v]
if rows:
    print(f"{len(rows)} rows, {min(r['sm_clock_mhz'] for r in rows)}-{max(r['sm_clock_mhz'] for r in rows)} MHz, "
          f"{min(r['temp_c'] for r in rows)}-{max(r['temp_c'] for r in rows)} C")
