#!/bin/bash
# One H200: a quantized build's bf16 copy with its defaults by build (frigg_dequant_rows: int8 from 1 row, the
# stored weights freed; int4 from 3) — test_cuda_engine (the quantized checkpoints with the stored weights, the copy
# and the default, the copy against the stored weights bit for bit, the freed bytes); the full-size random model
# (make_fixtures.py --mimir-size) quantized to int8 and int4 g128, frigg-bench matrix --builds over the three at
# batch 1, 2, 4, 8, 16, 32, 64, ctx 512, with the defaults (builds.jsonl), then with --dequant-rows off at batch 1,
# 4, 64 (builds-stored.jsonl: the stored weights at every batch).
# Run on the GPU host from the project root with .deps carried. LIMIT (default 590): the seconds the call may run.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir /tmp/m8 /tmp/m4; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-590} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu
git log -1 --format='tree of %H (the device tool copies the working tree; git status below)' >> $R/log.txt 2>&1
git status --short >> $R/log.txt 2>&1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 240 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/bin/frigg-quantize \
    build-gpu/tests/test_cuda_engine > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
( FRIGG_ROOT=$ROOT timeout 300 $N/tests/test_cuda_engine > $R/test_cuda_engine.txt 2>&1; echo "test_cuda_engine rc $?" >> $R/test_cuda_engine.txt ) &
tpid=$!
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt
el fixture
nice timeout 150 $N/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 8 > /tmp/q.txt 2>&1; echo "int8 rc $?" >> /tmp/q.txt
nice timeout 200 $N/bin/frigg-quantize /tmp/mimir /tmp/m4 --method int4 --threads 8 >> /tmp/q.txt 2>&1; echo "int4 rc $?" >> /tmp/q.txt
grep rc /tmp/q.txt | tee -a $R/log.txt
el quantized
wait $tpid; tail -2 $R/test_cuda_engine.txt | tee -a $R/log.txt; grep -E "^FAIL" $R/test_cuda_engine.txt | head -20 | tee -a $R/log.txt
el tested
B="--builds /tmp/mimir,/tmp/m8,/tmp/m4 --ctx 512 --repeats 3 --steps 32"
timeout $(( $(left) - 20 )) $N/bin/frigg-bench $B --batch 1,2,4,8,16,32,64 --cooldown-c 65 matrix > $R/builds.jsonl 2> $R/builds.txt
el "builds rc $?"
[ "$(left)" -gt 90 ] && timeout $(( $(left) - 15 )) $N/bin/frigg-bench $B --batch 1,4,64 --dequant-rows off matrix \
    > $R/builds-stored.jsonl 2> $R/builds-stored.txt
el "builds-stored rc $?"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
