#!/bin/sh
# frigg-eval on the bundled model with its lm_head set to NaN (CPU engine), as frigg-run, frigg-serve and gsm8k
# already answer it: nll and kl (the broken model as --model, and as --ref) end every sequence with an error line
# naming the non-finite logits, a summary whose figures are null (not a mean of nothing), and exit 1; never a
# hang (nll waited for ever on a line whose NaN score it could not write) or a crash (kl printed a NULL). And nll
# on empty input is an error "no input" (exit 2), not a perplexity of 1.
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
M=$ROOT/golden/default
T=$(mktemp -d "${TMPDIR:-/tmp}/eval-nonfinite.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
E="$BIN/frigg-eval"
mkdir -p "$T/nan"
cp "$M/config.json" "$M/tokenizer.json" "$T/nan/"
python3 - "$M/model.safetensors" "$T/nan/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
s, e = h["lm_head.weight"]["data_offsets"]
b[8 + n + s:8 + n + e] = b"\xc0\x7f" * ((e - s) // 2)
open(sys.argv[2], "wb").write(b)
PY
head -n 3 "$M/heldout.jsonl" > "$T/three.jsonl"
NF='logits are not finite (NaN at token id [0-9]*)'

timeout 60 "$E" nll --model "$T/nan" -b cpu -t 2 < "$T/three.jsonl" > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 1 ] && ok || no "nll on NaN logits: exit $rc, want 1 (124: it hung)"
[ "$(grep -c "\"error\":{\"message\":\"the model's $NF" "$T/out")" = 3 ] && ok || no "nll: three error lines: $(head -c 600 "$T/out")"
tail -n 1 "$T/out" | grep -q '"sequences":0,.*"nll_mean":null,"perplexity":null,"failed":3' && ok ||
    no "nll: the summary: $(tail -n 1 "$T/out")"
grep -q 'none of the 3 lines was scored' "$T/err" && ok || no "nll: stderr: $(cat "$T/err")"

for which in model ref; do
    if [ $which = model ]; then a="--model $T/nan --ref $M"; else a="--model $M --ref $T/nan"; fi
    timeout 60 "$E" kl $a -b cpu -t 2 --text "$M/heldout.txt" --limit 2 > "$T/out" 2> "$T/err"; rc=$?
    [ "$rc" = 1 ] && ok || no "kl, NaN $which: exit $rc, want 1 (139: a crash): $(cat "$T/err")"
    want="the model"; [ $which = ref ] && want="the reference"
    [ "$(grep -c "\"error\":{\"message\":\"$want: the model's $NF" "$T/out")" = 2 ] && ok ||
        no "kl, NaN $which: two error lines: $(head -c 600 "$T/out")"
    tail -n 1 "$T/out" | grep -q '"sequences":0,"failed":2,.*"kl_mean":null,.*"ppl_model":null' && ok ||
        no "kl, NaN $which: the summary: $(tail -n 1 "$T/out")"
done

# the finite model still scores
timeout 60 "$E" nll --model "$M" -b cpu -t 2 < "$T/three.jsonl" > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 0 ] && tail -n 1 "$T/out" | grep -q '"sequences":3,.*"perplexity":[0-9]' && ok ||
    no "nll, finite model: exit $rc: $(tail -n 1 "$T/out") $(cat "$T/err")"

# no input at all
"$E" nll --model "$M" -b cpu -t 2 < /dev/null > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 2 ] && grep -q 'nll: no input' "$T/err" && ! grep -q perplexity "$T/out" && ok ||
    no "nll on empty input: exit $rc: $(cat "$T/out" "$T/err")"
printf '\n  \n' | "$E" nll --model "$M" -b cpu -t 2 > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" = 2 ] && grep -q 'nll: no input' "$T/err" && ok || no "nll on blank lines: exit $rc: $(cat "$T/out" "$T/err")"

echo "eval-nonfinite: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
