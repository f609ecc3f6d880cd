#!/bin/bash
# Where a quantized decode step's time goes, and prefill speed by prompt length, on one H200: test_cuda_kv_int8
# (the int8-KV kernels against the CPU spec) and test_cuda_gemv_q; kernels/dev/gemv_q --quick (each quantized
# GEMV shape under the tensor-core and CUDA-core kernels beside bf16's); the full-size random model
# (make_fixtures.py --mimir-size) and its int8 build; Nsight Systems' kernel summary of 64 decode steps at batch
# 1, ctx 512, for bf16 and int8 (when nsys is installed), graphs traced node by node; frigg-bench prefill at
# 512, 1024, 2048 and 4096 tokens; test_cuda_engine (the grouped prefill among the rest) and test_scheduler last.
# Run on the GPU host from the project root with .deps (../shared/gpu-host/pack-deps libcurl4-openssl-dev) and
# .devrun carried; .devrun/mimir-tok.json.xz is ../shared/data/tokenizers/mimir-equivalent.tokenizer.json.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/log.txt; }
R=$OUT; B=b
xz -dc .devrun/mimir-tok.json.xz > /tmp/tokenizer.json || exit 1
echo '{"input_ids":[2,105,2364,107,9259,236764,1602,236888,106,107,105,4368,107]}' > /tmp/prompts.jsonl
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda --prompts /tmp/prompts.jsonl \
    --greedy-steps 1 --tf-len 16 > /tmp/fixture.log 2>&1; echo "fixture rc $?" >> /tmp/fixture.log ) &
fpid=$!
TESTS="test_cuda_kv_int8 test_cuda_gemv_q test_cuda_engine test_scheduler"
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-quantize b/dev/gemv_q \
    b/bin/frigg-run $(for t in $TESTS; do echo b/tests/$t; done) > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
{ command -v nsys ncu compute-sanitizer; ls -d /usr/local/cuda/nsight* /opt/nvidia/nsight* 2>/dev/null; } >> $R/log.txt
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
for t in test_cuda_kv_int8 test_cuda_gemv_q; do
  FRIGG_ROOT=$PWD FRIGG_BIN=$PWD/$B/bin timeout 120 $B/tests/$t > /tmp/t.log 2>&1
  echo "$t rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL|first difference|SKIP" /tmp/t.log | head -20 >> $R/tests.txt
done
el tests
timeout 200 $B/dev/gemv_q --quick > $R/gemv_q.txt 2>&1; echo "gemv_q rc $?" >> $R/log.txt
el gemv_q
wait $fpid; tail -1 /tmp/fixture.log | tee -a $R/log.txt; cp /tmp/tokenizer.json /tmp/mimir/tokenizer.json
timeout 150 $B/bin/frigg-quantize /tmp/mimir /tmp/m8 --method int8 --threads 16 > /tmp/q8.txt 2>&1; echo "int8 rc $?" >> $R/log.txt
el quantized
for mdl in mimir m8; do
  [ -f /tmp/$mdl/config.json ] || continue
  timeout 60 $B/bin/frigg-bench --model /tmp/$mdl --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode >> $R/decode.jsonl 2>> $R/decode.txt
  if [ -n "$NSYS" ]; then
    timeout 120 $NSYS profile --cuda-graph-trace=node -o /tmp/p-$mdl -f true \
        $B/bin/frigg-bench --model /tmp/$mdl --repeats 1 --steps 64 --batch 1 --ctx 512 decode > /tmp/nsys-$mdl.log 2>&1
    timeout 60 $NSYS stats -r cuda_gpu_kern_sum -f csv -o /tmp/k-$mdl /tmp/p-$mdl.nsys-rep >> /tmp/nsys-$mdl.log 2>&1
    cat /tmp/k-$mdl*.csv > $R/kern-$mdl.csv 2>/dev/null || tail -5 /tmp/nsys-$mdl.log >> $R/log.txt
  fi
  el "decode $mdl"
done
timeout 90 $B/bin/frigg-bench --model /tmp/mimir --repeats 3 --prefill 512,1024,2048,4096 prefill > $R/prefill.jsonl 2>> $R/decode.txt
el prefill
for t in test_cuda_engine test_scheduler; do
  FRIGG_ROOT=$PWD FRIGG_BIN=$PWD/$B/bin timeout 100 $B/tests/$t > /tmp/t.log 2>&1
  echo "$t rc $?: $(grep -E 'passed, [0-9]+ failed' /tmp/t.log | tail -1)" | tee -a $R/tests.txt
  grep -E "^FAIL|grouped prefill" /tmp/t.log | head -20 >> $R/tests.txt
done
el "tests after"
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
