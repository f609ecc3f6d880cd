#!/bin/sh
# frigg-parity as a CI gate on this machine: the CPU engine against HF's reference files for the three
# golden fixtures must pass, and the same gate with the mask forced causal must fail (exit 1).
BIN=${FRIGG_BIN:-bin}
F=golden/fixtures
pass=0; fail=0
if "$BIN/frigg-parity" --backend cpu --threads 2 $F/tiny-packed $F/tiny-split $F/tiny-sharded >/dev/null 2>"${TMPDIR:-/tmp}/parity.$$"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1)); echo "FAIL: frigg-parity on the fixtures"; cat "${TMPDIR:-/tmp}/parity.$$"
fi
"$BIN/frigg-parity" --backend cpu --threads 2 --force-causal $F/tiny-packed >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --force-causal exited $rc, want 1"; fi

# The teacher-forced gates (pooled 99 %, 97 % per case) on CPU: HF's greedy run is a teacher-forced run on
# its own tokens (continuation = top1 = HF's greedy ids, margins = its margins), so a copy of tiny-packed's
# reference with that record must pass; with a few of HF's top-1 ids on clear steps (margin >= 0.5)
# replaced, the pooled gate alone (per-case floor off) and the per-case floor alone must each fail.
if command -v python3 >/dev/null 2>&1; then
    T=$(mktemp -d "${TMPDIR:-/tmp}/parity-tf.XXXXXX")
    for v in good bad; do
        mkdir -p "$T/$v"
        ln -s "$PWD/$F/tiny-packed/model.safetensors" "$T/$v/model.safetensors"
        cp "$F/tiny-packed/config.json" "$T/$v/"
        python3 - "$F/tiny-packed/reference.json" "$T/$v/reference.json" "$v" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))
V = json.load(open(sys.argv[1].replace("reference.json", "config.json")))["vocab_size"]
flipped = 0
for c in ref["cases"]:
    g = c["greedy"]
    top1 = list(g["output_ids"])
    if sys.argv[3] == "bad":  # one clear step of every case: 9 of ~100 clear steps, far below 99 %
        clear = [i for i, m in enumerate(g["margins"]) if m >= 0.5]
        if clear:
            top1[clear[-1]] = (top1[clear[-1]] + 1) % V
            flipped += 1
    c["teacher_forced"] = {"continuation": list(g["output_ids"]), "top1": top1, "margins": list(g["margins"])}
assert sys.argv[3] == "good" or flipped > 0
json.dump(ref, open(sys.argv[2], "w"))
PY
    done
    check() { want=$1; shift; "$BIN/frigg-parity" --backend cpu --threads 2 "$@" >/dev/null 2>&1; rc=$?
        if [ "$rc" -eq "$want" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: frigg-parity $* exited $rc, want $want"; fi; }
    check 0 "$T/good"
    check 1 --min-tf-case 0 "$T/bad"
    check 1 --min-tf 0 "$T/bad"
    check 0 --min-tf 0 --min-tf-case 0 "$T/bad"
    rm -rf "$T"
else
    echo "parity: python3 not found: the teacher-forced gate checks did not run"; fail=$((fail + 1))
fi
rm -f "${TMPDIR:-/tmp}/parity.$$"
echo "parity: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
