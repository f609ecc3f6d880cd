#!/bin/sh
# frigg-eval --precision and --ref-precision on the bundled model (CPU engine): fp32 is the CPU engine's fp32
# reference, so nll at fp32 is near bf16's and not bit for bit it (an option accepted and ignored would give the
# same bits); kl of the bf16 engine against the fp32 one on the same weights is a small non-zero KL, of the fp32
# engine against itself exactly 0; each summary names its precision; fp32 on the CUDA engine, an unknown
# precision and --ref-precision outside kl are refused (exit 2, saying why). gsm8k's summary too when the GSM8K
# data is there (else a SKIP line names it).
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
SHARED=${FRIGG_SHARED:-$ROOT/../shared}
M=$ROOT/golden/default
T=$(mktemp -d "${TMPDIR:-/tmp}/eval-precision.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL: $1"; }
E="$BIN/frigg-eval"
head -n 4 "$M/heldout.jsonl" > "$T/four.jsonl"
field() { # summary line, key -> value
    python3 -c 'import json, sys; print(json.loads(sys.argv[1])["summary"][sys.argv[2]])' "$1" "$2"
}

"$E" nll --model "$M" --backend cpu --threads 1 < "$T/four.jsonl" > "$T/bf16" 2> "$T/err" || no "nll at bf16: $(cat "$T/err")"
"$E" nll --model "$M" --precision fp32 --threads 1 < "$T/four.jsonl" > "$T/fp32" 2> "$T/err" || no "nll at fp32: $(cat "$T/err")"
b=$(tail -n 1 "$T/bf16"); f=$(tail -n 1 "$T/fp32")
[ "$(field "$f" precision)" = fp32 ] && [ "$(field "$b" precision)" = bf16 ] && [ "$(field "$f" backend)" = cpu ] && ok \
    || no "nll summaries: $b / $f"
python3 - "$T/bf16" "$T/fp32" <<'PY' && ok || no "nll: fp32 is not near bf16, or is bf16 bit for bit"
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
ra, rb = [x["nll_sum"] for x in a if "nll_sum" in x and "summary" not in x], [x["nll_sum"] for x in b if "nll_sum" in x and "summary" not in x]
ok = len(ra) == len(rb) == 4 and ra != rb
ok = ok and all(abs(x - y) <= 0.02 * max(1.0, abs(x)) for x, y in zip(ra, rb))
print("nll per sequence, bf16 / fp32:", ra, rb)
sys.exit(0 if ok else 1)
PY

"$E" kl --ref "$M" --model "$M" --ref-precision fp32 --jsonl "$T/four.jsonl" --backend cpu --threads 1 > "$T/kl1" 2> "$T/err" \
    || no "kl bf16 against fp32: $(cat "$T/err")"
s=$(tail -n 1 "$T/kl1")
[ "$(field "$s" precision)" = bf16 ] && [ "$(field "$s" ref_precision)" = fp32 ] && ok || no "kl summary: $s"
python3 -c 'import json, sys; s = json.loads(sys.argv[1])["summary"]; sys.exit(0 if 0 < s["kl_mean"] < 0.01 and s["nll_ref"] != s["nll_model"] else 1)' "$s" \
    && ok || no "kl of the bf16 engine against the fp32 one on the same weights is not small and non-zero: $s"
"$E" kl --ref "$M" --model "$M" --precision fp32 --jsonl "$T/four.jsonl" --threads 1 > "$T/kl2" 2> "$T/err" \
    || no "kl fp32 against fp32: $(cat "$T/err")"
s=$(tail -n 1 "$T/kl2")
python3 -c 'import json, sys; s = json.loads(sys.argv[1])["summary"]; sys.exit(0 if s["kl_mean"] == 0 and s["top1_agreement"] == 1 and s["ref_precision"] == "fp32" and s["ref_backend"] == "cpu" else 1)' "$s" \
    && ok || no "kl of the fp32 engine against itself: $s"

refuse() { # want-in-stderr, args...
    want=$1; shift
    "$E" "$@" < /dev/null > /dev/null 2> "$T/err"; rc=$?
    [ "$rc" = 2 ] && grep -q -- "$want" "$T/err" && ok || no "frigg-eval $*: exit $rc, $(cat "$T/err") (want 2 and '$want')"
}
refuse 'runs on the CPU engine only' nll --model "$M" --precision fp32 --backend cuda
refuse 'runs on the CPU engine only' kl --ref "$M" --model "$M" --ref-precision fp32 --ref-backend cuda
refuse 'unless --ref-backend cpu' kl --ref "$M" --model "$M" --ref-precision fp32 --backend cuda
refuse 'takes bf16 or fp32' nll --model "$M" --precision fp16
refuse 'does not apply to nll' nll --model "$M" --ref-precision fp32
# a model path that does not exist is named as such (gsm8k said "has no tokenizer.json", kl "has none")
refuse '^frigg-eval: --model /nonexistent: No such file or directory$' gsm8k --model /nonexistent
refuse '^frigg-eval: --model /nonexistent: No such file or directory$' nll --model /nonexistent
refuse '^frigg-eval: --model /nonexistent: No such file or directory$' kl --model /nonexistent --ref "$M"
refuse '^frigg-eval: --ref /nonexistent: No such file or directory$' kl --model "$M" --ref /nonexistent
FRIGG_MODEL=/nonexistent refuse '^frigg-eval: the model (--model, $FRIGG_MODEL) /nonexistent: No such file' nll

# progress on stderr (run/progress): --progress keeps a line current, and ends with the last one; without it a
# pipe gets one line every FRIGG_PROGRESS_PERIOD_S seconds (0 here: one per sequence), a short run none at 30 s
"$E" nll --model "$M" --threads 1 --progress < "$T/four.jsonl" > /dev/null 2> "$T/err"
tail -n 1 "$T/err" | grep -Eq '^frigg-eval: nll: 4 sequences scored, [0-9.]+ s$' && ok || no "nll --progress: $(cat "$T/err")"
"$E" nll --model "$M" --threads 1 < "$T/four.jsonl" > /dev/null 2> "$T/err"
[ ! -s "$T/err" ] && ok || no "nll without --progress, a run of seconds: $(cat "$T/err")"
FRIGG_PROGRESS_PERIOD_S=0 "$E" nll --model "$M" --threads 1 < "$T/four.jsonl" > /dev/null 2> "$T/err"
[ "$(grep -c '^frigg-eval: nll: [1-4] sequences scored' "$T/err")" -ge 3 ] && ok || no "nll, a line per period: $(cat "$T/err")"
"$E" kl --ref "$M" --model "$M" --threads 1 --jsonl "$T/four.jsonl" --progress > /dev/null 2> "$T/err"
grep -Eq '^frigg-eval: kl: 4 of 4 sequences scored, 100 %, [0-9.]+ s$' "$T/err" && ok || no "kl --progress: $(cat "$T/err")"

if [ -f "$SHARED/data/gsm8k/test.jsonl" ]; then
    "$E" gsm8k --model "$M" --precision fp32 --threads 1 --limit 1 --max-tokens 4 --data "$SHARED/data/gsm8k/test.jsonl" \
        > "$T/g" 2> "$T/err" || no "gsm8k at fp32: $(cat "$T/err")"
    [ "$(field "$(tail -n 1 "$T/g")" precision)" = fp32 ] && ok || no "gsm8k summary: $(tail -n 1 "$T/g")"
else
    echo "SKIP eval-precision: no $SHARED/data/gsm8k/test.jsonl: the gsm8k summary"
fi
echo "eval-precision: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
