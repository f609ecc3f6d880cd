#!/bin/bash
# device call 6 (2 x H200): the shipped defaults (CUDA-core GEMV, 64-key decode attention splits) after run 5;
# CUDA tests (the tensor-core GEMV through the engine too), tiny parity, user-path smoke test, bench matrix
# of the defaults and of FRIGG_GEMV_IMPL=tc, split-K A/B, Mimir-size parity and HF side by side, one call.
# Binaries come built from the dev host (make BUILD=build-cuda2dev DEPS_ROOT=.deps/root CUDA_ARCHS=90, stripped,
# carried); rebuilt here only if they do not start. GPU 0 runs every frigg measurement and HF's timing; GPU 1
# (other CPU cores) makes the HF fixture meanwhile, runs the Mimir-size parity, and is the second device of
# the two-device test.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
R=/tmp/r6; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( ${BUDGET:-200} - ($(date +%s) - T0) )); }
snap() { tar czf $OUT/logs.tgz -C /tmp r6; }
cp benchmarks/h200-2026-11-29/run6.commit $R/ 2>/dev/null
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
B=build-cuda2dev; BIN=$B/bin
if ! $BIN/frigg-bench --help > /dev/null 2>&1 || ! ldd $B/tests/test_cuda_engine > /dev/null 2>&1 || ldd $B/tests/test_cuda_engine | grep -q "not found"; then
  echo "carried binaries do not start: building here"
  make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build BIN=bin build/libfriggcore.a build/tests/test_cuda_ops build/tests/test_cuda_engine bin/frigg-bench bin/frigg-parity bin/frigg-run bin/frigg-eval > $R/build.log 2>&1 || { tail -30 $R/build.log; snap; exit 1; }
  B=build; BIN=bin
fi
el ready
( CUDA_VISIBLE_DEVICES=1 OMP_NUM_THREADS=8 taskset -c 16-31 timeout 150 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda > $R/mimir-fixture.log 2>&1; echo "fixture rc $?" >> $R/mimir-fixture.log ) &
FIX=$!
timeout 60 $B/tests/test_cuda_ops > $R/test_cuda_ops.log 2>&1; echo "ops rc $?"; grep -E "FAIL|passed" $R/test_cuda_ops.log | head -12
timeout 60 $B/tests/test_cuda_engine > $R/test_cuda_engine.log 2>&1; echo "engine rc $?"; grep -E "FAIL|passed|kernels|SKIP" $R/test_cuda_engine.log | head -12
FRIGG_GEMV_IMPL=tc timeout 60 $B/tests/test_cuda_engine > $R/test_cuda_engine-tc.log 2>&1; echo "engine (FRIGG_GEMV_IMPL=tc) rc $?"; grep -E "FAIL|passed|SKIP" $R/test_cuda_engine-tc.log | head -6
timeout 40 $BIN/frigg-parity --vs-cpu golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded > $OUT/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)"; tail -1 $R/parity-tiny.txt
timeout 30 $BIN/frigg-parity --force-causal golden/fixtures/tiny-packed > $R/parity-tiny-causal.jsonl 2> $R/parity-tiny-causal.txt; echo "parity tiny --force-causal rc $? (must be 1)"; tail -1 $R/parity-tiny-causal.txt
timeout 20 $BIN/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?" > $R/frigg-run.txt 2>&1; echo "frigg-run rc $?: $(head -c 300 $R/frigg-run.txt)"
timeout 30 $BIN/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl > $R/frigg-eval.txt 2>&1; echo "frigg-eval rc $?: $(tail -1 $R/frigg-eval.txt)"
snap; el tests
CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 60 $BIN/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 matrix > $OUT/bench.jsonl 2> $R/bench.txt; echo "bench rc $?"; cat $R/bench.txt
FRIGG_GEMV_IMPL=tc CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 60 $BIN/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,4,8 --ctx 512,2048,4096 decode > $OUT/gemv-tc.jsonl 2> $R/gemv-tc.txt; echo "bench FRIGG_GEMV_IMPL=tc rc $?"; cat $R/gemv-tc.txt
FRIGG_GEMV_KSPLIT=auto CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 30 $BIN/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode > $OUT/gemv-ksplit.jsonl 2> $R/gemv-ksplit.txt; echo "bench FRIGG_GEMV_KSPLIT=auto rc $?"; cat $R/gemv-ksplit.txt
snap; el bench
wait $FIX; tail -2 $R/mimir-fixture.log; el fixture
if [ -f /tmp/mimir/reference.json ] && [ $(left) -gt 30 ]; then
  ( export CUDA_VISIBLE_DEVICES=1
    taskset -c 16-31 timeout 60 $BIN/frigg-parity /tmp/mimir > $R/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (1 expected: the 99 % gate on HF's own noise)" >> $R/parity-mimir.txt
    taskset -c 16-31 timeout 60 $BIN/frigg-parity --tie auto /tmp/mimir > $OUT/parity-mimir-tie.jsonl 2> $R/parity-mimir-tie.txt; echo "parity mimir --tie auto rc $? (0 = pass)" >> $R/parity-mimir-tie.txt
    taskset -c 16-31 timeout 60 $BIN/frigg-parity --tie auto --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt; echo "parity mimir --tie auto --force-causal rc $? (must be 1)" >> $R/parity-mimir-causal.txt ) &
  PAR=$!
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout $(( $(left) - 3 )) python3 scripts/bench-vs-hf --model /tmp/mimir --frigg $OUT/bench.jsonl --batch 1,8 --ctx 512 --prefill 1024,4096 --steps 8 --repeats 3 > $OUT/vs-hf.jsonl 2> $R/vs-hf.txt; echo "vs-hf rc $?"; grep -v Loading $R/vs-hf.txt | tail -10
  wait $PAR; for f in parity-mimir parity-mimir-tie parity-mimir-causal; do tail -2 $R/$f.txt; done
  el mimir
fi
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
