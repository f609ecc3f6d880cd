#!/bin/sh
# golden/default's int8 and int4 builds scored against it with the activations rounded nowhere (frigg-eval
# --precision fp32 on both engines), and the bf16 engine against the fp32 one on the same weights
# (--ref-precision fp32): the 128 held-out chat pairs, as benchmarks/cpu-quality-2026-12-02/'s kl-pairs-*.jsonl.
# Run from a folder holding the commit's tree, built with `make FRIGG_CUDA=0 BUILD=build BIN=bin bin/frigg-eval
# bin/frigg-quantize`; OUT (default the folder of this script) gets the files, B (default /tmp/cq4) the builds.
set -eu
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
B=${B:-/tmp/cq4}
rm -rf "$B"; mkdir -p "$B"
bin/frigg-quantize golden/default "$B/int8" --method int8 --threads 2 2> "$OUT/quantize-int8.log"
bin/frigg-quantize golden/default "$B/int4" --method int4 --threads 2 2> "$OUT/quantize-int4.log"
P="--jsonl golden/default/heldout.jsonl --threads 2"
bin/frigg-eval kl --ref golden/default --model "$B/int8" --precision fp32 $P > "$OUT/kl-pairs-int8-fp32.jsonl"
bin/frigg-eval kl --ref golden/default --model "$B/int4" --precision fp32 $P > "$OUT/kl-pairs-int4-fp32.jsonl"
bin/frigg-eval kl --ref golden/default --model golden/default --ref-precision fp32 --backend cpu $P > "$OUT/kl-pairs-bf16-vs-fp32.jsonl"
bin/frigg-eval kl --ref golden/default --model "$B/int8" --ref-precision fp32 --backend cpu $P > "$OUT/kl-pairs-int8-vs-fp32.jsonl"
bin/frigg-eval kl --ref golden/default --model "$B/int8" --backend cpu $P > "$OUT/kl-pairs-int8-bf16.jsonl"
