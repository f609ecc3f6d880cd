#!/bin/sh
# frigg-parity as a CI gate on this machine: the CPU engine against HF's reference files for the three
# golden fixtures must pass, and the same gate with the mask forced causal must fail (exit 1); likewise for the
# two builds llm-compressor wrote (golden/fixtures/tiny-llmc-*), which must pass, and fail against each other.
BIN=${FRIGG_BIN:-bin}
F=golden/fixtures
pass=0; fail=0
# The tiny fixtures' references hold no teacher-forced record: --allow-no-tf (without it the gate is not checked
# and the run fails, below).
if "$BIN/frigg-parity" --backend cpu --threads 2 --allow-no-tf $F/tiny-packed $F/tiny-split $F/tiny-sharded >/dev/null 2>"${TMPDIR:-/tmp}/parity.$$"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1)); echo "FAIL: frigg-parity on the fixtures"; cat "${TMPDIR:-/tmp}/parity.$$"
fi
"$BIN/frigg-parity" --backend cpu --threads 2 --allow-no-tf --force-causal $F/tiny-packed >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: --force-causal exited $rc, want 1"; fi
# A gate with nothing to check has not passed: without --allow-no-tf a run whose references hold no
# teacher-forced step fails, and says the gate was not checked.
"$BIN/frigg-parity" --backend cpu --threads 2 $F/tiny-packed >/dev/null 2>"${TMPDIR:-/tmp}/parity.$$"
rc=$?
if [ "$rc" -eq 1 ] && grep -q "teacher-forced gate NOT CHECKED" "${TMPDIR:-/tmp}/parity.$$"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL: no teacher-forced data without --allow-no-tf: exit $rc, want 1 saying NOT CHECKED"
    tail -2 "${TMPDIR:-/tmp}/parity.$$"
fi

# Builds written by llm-compressor itself (scripts/oracle/make_llmc_fixture.py; golden/fixtures/README.md): W8A16
# round to nearest and W4A16 GPTQ, saved from a packed source (packed names, weight_shape of gqkv_proj/gate_up_proj
# the parts' shapes concatenated), each against HF's reference on that build. The int4 build's weights against
# the int8 build's reference must fail: the gate sees which quantized weights frigg ran (they differ from each
# other by up to 6 in a logit, 25 times the tolerance).
L8=$F/tiny-llmc-w8a16; L4=$F/tiny-llmc-w4a16
if "$BIN/frigg-parity" --backend cpu --threads 2 --allow-no-tf $L8 $L4 >/dev/null 2>"${TMPDIR:-/tmp}/parity.$$"; then
    pass=$((pass + 1))
else
    fail=$((fail + 1)); echo "FAIL: frigg-parity on llm-compressor's builds"; cat "${TMPDIR:-/tmp}/parity.$$"
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/parity-llmc.XXXXXX")
mkdir "$T/swap" "$T/shape"
ln -s "$PWD/$L4/model.safetensors" "$T/swap/model.safetensors"
cp "$L4/config.json" "$T/swap/"
cp "$L8/reference.json" "$T/swap/"
"$BIN/frigg-parity" --backend cpu --threads 2 --allow-no-tf "$T/swap" >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 1 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: int4 weights against the int8 reference exited $rc, want 1"; fi
# One part's rows in a concatenated weight_shape wrong: refused, naming the tensor and the part.
if command -v python3 >/dev/null 2>&1; then
    cp "$L4/config.json" "$L4/reference.json" "$T/shape/"
    python3 - "$L4/model.safetensors" "$T/shape/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack_from("<Q", b, 0)[0]
e = json.loads(b[8:8 + n])["model.L_module.layers.0.attn.gqkv_proj.weight_shape"]
assert e["dtype"] == "I64" and e["shape"] == [8], e
at = 8 + n + e["data_offsets"][0] + 8 * 4  # part 2 (k_proj): its rows
struct.pack_into("<q", b, at, struct.unpack_from("<q", b, at)[0] - 1)
open(sys.argv[2], "wb").write(b)
PY
    "$BIN/frigg-parity" --backend cpu --threads 2 --allow-no-tf "$T/shape" >/dev/null 2>"$T/err"
    rc=$?
    want='gqkv_proj.weight_shape" says \[127,128\] for part 2 of 4, expected \[128,128\]'
    if [ "$rc" -eq 1 ] && grep -q "$want" "$T/err"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "FAIL: a wrong part in a concatenated weight_shape: exit $rc, want 1 naming it"
        cat "$T/err"
    fi
else
    echo "parity: python3 not found: the weight_shape refusal check did not run"; fail=$((fail + 1))
fi
rm -rf "$T"

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
    # a reference with no case checks nothing: an error saying so, not a "0 cases, 0 failed ... accepted" summary
    mkdir "$T/none" && cp "$F/tiny-packed/config.json" "$F/tiny-packed/model.safetensors" "$T/none/" &&
        python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r["cases"] = []; json.dump(r, open(sys.argv[2], "w"))' \
            "$F/tiny-packed/reference.json" "$T/none/reference.json"
    "$BIN/frigg-parity" --backend cpu --threads 2 --allow-no-tf "$T/none" >/dev/null 2>"$T/err"; rc=$?
    if [ "$rc" -eq 1 ] && grep -q "FAILS: nothing was checked" "$T/err" && ! grep -q "accepted" "$T/err"; then pass=$((pass + 1))
    else fail=$((fail + 1)); echo "FAIL: frigg-parity on a reference with no case: exit $rc, $(cat "$T/err")"; fi
    rm -rf "$T"
else
    echo "parity: python3 not found: the teacher-forced gate checks did not run"; fail=$((fail + 1))
fi
rm -f "${TMPDIR:-/tmp}/parity.$$"
echo "parity: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
