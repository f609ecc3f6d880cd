#!/bin/sh
# scripts/quantize-then-eval on golden/default, small: --check on 6 held-out sequences, GSM8K on 2 items of
# at most 16 tokens. One JSON line per build (int8, int4) with numbers where numbers belong, int8 closer to
# the source than int4, the markdown table (the source's row and one per build), the same lines in
# OUTDIR/results.jsonl, each build's quality.json; the refusals (a build that exists already, exit 1 and
# its log named; a bad --gsm8k or too few arguments, exit 2). Without the GSM8K data
# ($FRIGG_SHARED/data/gsm8k/test.jsonl, as tests/run-tests sets it) the GSM8K part is skipped with a SKIP line.
BIN=${FRIGG_BIN:-bin}
ROOT=${FRIGG_ROOT:-.}
S=$ROOT/scripts/quantize-then-eval
T=$(mktemp -d "${TMPDIR:-/tmp}/qte.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
good() { pass=$((pass + 1)); }

G=2
if [ ! -f "${FRIGG_SHARED:-$ROOT/../shared}/data/gsm8k/test.jsonl" ]; then
    echo "SKIP quantize-then-eval: no ${FRIGG_SHARED:-$ROOT/../shared}/data/gsm8k/test.jsonl: the GSM8K part"
    G=0
fi
export FRIGG_SHARED=${FRIGG_SHARED:-$ROOT/../shared}
t0=$(date +%s)
FRIGG_BIN=$BIN "$S" "$ROOT/golden/default" "$T/out" --gsm8k $G --gsm8k-max-tokens 16 --check-limit 6 --threads 2 \
    >"$T/stdout" 2>"$T/stderr"
rc=$?
echo "quantize-then-eval on golden/default: exit $rc in $(( $(date +%s) - t0 )) s"
if [ "$rc" -eq 0 ]; then good; else bad "exit $rc"; cat "$T/stderr"; fi
grep '^{' "$T/stdout" > "$T/lines"
[ "$(wc -l < "$T/lines")" -eq 2 ] && good || bad "want 2 JSON lines, got $(wc -l < "$T/lines")"
cmp -s "$T/lines" "$T/out/results.jsonl" && good || bad "stdout's lines differ from results.jsonl"
num='-?[0-9][-0-9.eE+]*'
for m in int8 int4; do
    l=$(grep "\"build\":\"$m\"" "$T/lines")
    for k in bytes source_bytes heldout_tokens kl_mean kl_p99 top1_agreement nll_source nll_build; do
        echo "$l" | grep -Eq "\"$k\":$num[,}]" && good || bad "$m: \"$k\" is not a number: $l"
    done
    [ -f "$T/out/$m/quality.json" ] && good || bad "$m: no quality.json"
    echo "$l" | grep -q "\"gsm8k_items\":$G," && good || bad "$m: gsm8k_items"
    [ "$G" -gt 0 ] || continue
    for k in gsm8k_accuracy gsm8k_source_accuracy; do
        echo "$l" | grep -Eq "\"$k\":$num[,}]" && good || bad "$m: \"$k\" is not a number: $l"
    done
    echo "$l" | grep -Eq "\"gsm8k_ci95\":\[$num,$num\]" && good || bad "$m: gsm8k_ci95"
    [ "$(wc -l < "$T/out/$m.gsm8k.jsonl")" -eq 3 ] && good || bad "$m: want 2 items + a summary in $m.gsm8k.jsonl"
done
kl8=$(sed -nE 's/.*"build":"int8".*"kl_mean":([^,]*),.*/\1/p' "$T/lines")
kl4=$(sed -nE 's/.*"build":"int4".*"kl_mean":([^,]*),.*/\1/p' "$T/lines")
awk -v a="$kl8" -v b="$kl4" 'BEGIN { exit !(a > 0 && a < b) }' && good || bad "want 0 < KL int8 ($kl8) < KL int4 ($kl4)"
grep -q "^| build | size | mean KL (nats) | p99 KL | top-1 | NLL | gsm8k ($G items) |\$" "$T/stdout" && good ||
    bad "no table header"
for r in 'source (bf16)' int8 int4; do
    grep -q "^| $r | " "$T/stdout" && good || bad "no table row for $r"
done
grep '^|' "$T/stdout" | cmp -s - "$T/out/results.md" && good || bad "results.md differs from the printed table"

# refusals
FRIGG_BIN=$BIN "$S" "$ROOT/golden/default" "$T/out" --check-limit 1 >"$T/log" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "int8.quantize.log" "$T/log" && good || bad "an existing build: exit $rc, want 1 naming its log"
FRIGG_BIN=$BIN "$S" "$ROOT/golden/default" "$T/o2" --gsm8k two >"$T/log" 2>&1
[ $? -eq 2 ] && good || bad "--gsm8k two: want exit 2"
FRIGG_BIN=$BIN "$S" "$ROOT/golden/default" >"$T/log" 2>&1
[ $? -eq 2 ] && good || bad "one argument: want exit 2"
echo "quantize-then-eval: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
