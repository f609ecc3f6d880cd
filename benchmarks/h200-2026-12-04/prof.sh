#!/bin/bash
# One H200: where the time goes in (a) a grouped prefill of eight 512-token prompts and (b) one decode step at
# batch 8 of the bf16, int8 and int4 builds. (a) Nsight Compute kernel durations (--clock-control none,
# gpu__time_duration) of about two groups of kernels/dev/overlap --prefill-only --group 8 (ncu-group8.csv.gz),
# the same program's prompt tok/s unprofiled (prefill.jsonl), and kernels/dev/prefill --quick (prefill.txt: the
# grouped attention against a launch per prompt, the T = 4096 GEMMs and row-wise kernels). (b) the full-size random
# model (make_fixtures.py --mimir-size) quantized to int8 and int4 g128; frigg-bench decode of each at batch 8,
# ctx 512 (decode.jsonl) and the kernel durations of one timed step of each (ncu-b8-BUILD.csv.gz). Run on the GPU
# host from the project root with .deps and .devrun carried (.devrun/mimir-tok.json.xz:
# ../shared/data/tokenizers/mimir-equivalent.tokenizer.json). LIMIT (default 590).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/m8 /tmp/m4; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-quantize \
    build-gpu/dev/overlap build-gpu/dev/prefill > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
OV="--prefill-only --batch 8 --group 8 --prompt 512 --steps 64"
timeout 120 ncu --clock-control none --launch-skip 4200 --launch-count 2100 --csv --metrics gpu__time_duration.sum \
    $N/dev/overlap $OV --seconds 40 2> $R/ncu-group8.txt | gzip > $R/ncu-group8.csv.gz
el "ncu group8 rc $?"
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
el fixture
( nice timeout 200 $N/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 6 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> /tmp/q.txt
  nice timeout 200 $N/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 6 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> /tmp/q.txt ) &
qpid=$!
for g in 8 4; do
  timeout 40 $N/dev/overlap --prefill-only --batch 8 --group $g --prompt 512 --steps 64 --seconds 6 >> $R/prefill.jsonl 2>> $R/log.txt
done
el overlap
timeout 150 $N/dev/prefill --quick > $R/prefill.txt 2>&1; el "dev prefill rc $?"
wait $qpid; grep rc /tmp/q.txt | tee -a $R/log.txt
el quantized
for m in mimir m8 m4; do
  timeout 60 $N/bin/frigg-bench --model /tmp/$m --repeats 3 --steps 32 --batch 8 --ctx 512 --kv-dtypes bf16 decode 2>> $R/log.txt \
    | sed "s/^{/{\"build\":\"$m\",/" >> $R/decode.jsonl
  timeout 60 ncu --clock-control none --profile-from-start off --csv --metrics gpu__time_duration.sum $N/bin/frigg-bench --model /tmp/$m \
      --repeats 1 --steps 1 --batch 8 --ctx 512 --kv-dtypes bf16 decode 2> $R/ncu-b8-$m.txt | gzip > $R/ncu-b8-$m.csv.gz
  el "$m rc $?"
  [ $(left) -lt 40 ] && { el "no time left"; break; }
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
