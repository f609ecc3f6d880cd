#!/bin/bash
# One H200: below 8 rows, a quantized build's stored weights against its bf16 copy — the full-size random model
# (make_fixtures.py --mimir-size) quantized to int8 and int4 g128, frigg-bench matrix --builds over the three at
# batch 1, 2, 4, 8, ctx 512, with --dequant-rows off (small-stored.jsonl) and --dequant-rows 1 (small-copy.jsonl),
# the two runs one after the other, twice (…-1, …-2). Run on the GPU host from the project root with .deps
# carried. LIMIT (default 590): the seconds the call may run.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/m8 /tmp/m4; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-quantize \
    > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt
nice timeout 150 $N/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 14 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> /tmp/q.txt
nice timeout 200 $N/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 14 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> /tmp/q.txt
grep rc /tmp/q.txt | tee -a $R/log.txt
el quantized
B="--builds /tmp/mimir,/tmp/m8,/tmp/m4 --ctx 512 --repeats 3 --steps 32 --batch 1,2,4,8"
for k in 1 2; do
  [ "$(left)" -gt 60 ] && timeout $(( $(left) - 10 )) $N/bin/frigg-bench $B --dequant-rows off matrix > $R/small-stored-$k.jsonl 2> $R/small-stored-$k.txt
  el "stored $k rc $?"
  [ "$(left)" -gt 60 ] && timeout $(( $(left) - 10 )) $N/bin/frigg-bench $B --dequant-rows 1 matrix > $R/small-copy-$k.jsonl 2> $R/small-copy-$k.txt
  el "copy $k rc $?"
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
