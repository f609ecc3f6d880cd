#!/bin/sh
# The quality measurements of this folder (COMMANDS.md says what each file is). Run from the repository root
# (or a clean export of a commit, with COMMIT naming it) with BIN set to a CPU build's bin/, on the bundled default model.
set -eu
BIN=${BIN:-bin}
R=benchmarks/cpu-quality-2026-12-02
B=${BUILDS:-/tmp/quality-builds}
D=golden/default
mkdir -p "$B"
echo "commit ${COMMIT:-$(git rev-parse --short HEAD)}, $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)" > "$R/host.txt"
# the builds, each with --check on golden/default/heldout.txt (all 77 lines)
for b in "int8:--method int8" "int4:--method int4" "int4-rtn:--method int4 --int4-rtn"; do
    name=${b%%:*}; opts=${b#*:}
    rm -rf "$B/$name"
    # shellcheck disable=SC2086
    "$BIN/frigg-quantize" "$D" "$B/$name" $opts --check --check-backend cpu --threads 2 2> "$R/quantize-$name.log"
    cp "$B/$name/quality.json" "$R/check-$name.json"
done
# KL(bf16 || build) teacher-forced on the 128 held-out chat pairs (heldout.jsonl: the prompt as bidirectional
# prefix, the response scored), and on heldout.txt; the int8 KV cache against the bf16 one
for name in int8 int4 int4-rtn; do
    "$BIN/frigg-eval" kl --ref "$D" --model "$B/$name" --jsonl "$D/heldout.jsonl" --backend cpu --threads 2 > "$R/kl-pairs-$name.jsonl"
    "$BIN/frigg-eval" kl --ref "$D" --model "$B/$name" --text "$D/heldout.txt" --backend cpu --threads 2 > "$R/kl-text-$name.jsonl"
done
"$BIN/frigg-eval" kl --ref "$D" --model "$D" --kv-dtype int8 --jsonl "$D/heldout.jsonl" --backend cpu --threads 2 > "$R/kl-pairs-kv-int8.jsonl"
# NLL of each on the held-out pairs
"$BIN/frigg-eval" nll --model "$D" --backend cpu --threads 2 < "$D/heldout.jsonl" > "$R/nll-bf16.jsonl"
for name in int8 int4 int4-rtn; do
    "$BIN/frigg-eval" nll --model "$B/$name" --backend cpu --threads 2 < "$D/heldout.jsonl" > "$R/nll-$name.jsonl"
done
# GSM8K, zero-shot, the first 100 test items, bf16 / int8 / int4; five shots do not fit the 512-token context
"$BIN/frigg-eval" gsm8k --model "$D" --limit 100 --backend cpu --threads 2 > "$R/gsm8k-bf16.jsonl" 2> "$R/gsm8k-bf16.progress"
"$BIN/frigg-eval" gsm8k --model "$B/int8" --limit 100 --backend cpu --threads 2 > "$R/gsm8k-int8.jsonl" 2> "$R/gsm8k-int8.progress"
"$BIN/frigg-eval" gsm8k --model "$B/int4" --limit 100 --backend cpu --threads 2 > "$R/gsm8k-int4.jsonl" 2> "$R/gsm8k-int4.progress"
"$BIN/frigg-eval" gsm8k --model "$D" --limit 3 --shots 5 --backend cpu --threads 2 > "$R/gsm8k-5shot-bf16.jsonl" 2>&1 || true
echo "done $(date -u +%Y-%m-%dT%H:%MZ)" >> "$R/host.txt"
