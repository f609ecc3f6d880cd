#!/bin/bash
# One H200, this tree: frigg-parity on the full-size random model against HF's own hrm_text (make_fixtures.py
# --mimir-size --seed 1 --fp32-ref, on the GPU) — it must pass, and fail with --force-causal — and frigg-parity
# --vs-cpu --allow-no-tf on the tiny fixtures (their teacher-forced steps are all near-ties, so the gate has nothing to check) (parity-*.txt); compute-sanitizer memcheck of test_cuda_engine, test_cuda_prefill
# and test_nonfinite (memcheck-*.txt: the sanitizer's summary and the test's last line). Run on the GPU host from
# the project root with .deps carried. LIMIT (default 480): seconds.
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R /tmp/mimir; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
left() { echo $(( ${LIMIT:-480} - ( $(date +%s) - T0 ) )); }
ROOT=$PWD; N=$ROOT/build-gpu
( timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --fp32-ref --out /tmp/mimir --device cuda > $R/fixture.log 2>&1
  echo "fixture rc $?" >> $R/fixture.log ) &
fpid=$!
TESTS="test_cuda_engine test_cuda_prefill test_nonfinite"
make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-parity \
    $(for t in $TESTS; do echo build-gpu/tests/$t; done) > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
compute-sanitizer --version | tail -1 >> $R/log.txt
san() { # test timeout
  FRIGG_ROOT=$ROOT FRIGG_BIN=$N/bin timeout $2 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/$1 > /tmp/m-$1.txt 2>&1
  local rc=$?; { echo "memcheck $1 rc $rc (3: errors found, 124: stopped by the time limit)"
    grep -E "ERROR SUMMARY|passed, [0-9]+ failed" /tmp/m-$1.txt | tail -3; grep -m5 -E "^=+ (Invalid|Error)" /tmp/m-$1.txt; } > $R/memcheck-$1.txt
  cat $R/memcheck-$1.txt | tee -a $R/log.txt
}
san test_cuda_engine $(( $(left) - 30 )) &
e=$!
san test_nonfinite 120
san test_cuda_prefill 200
el "memcheck small"
wait $fpid; tail -2 $R/fixture.log | tee -a $R/log.txt
if [ -f /tmp/mimir/config.json ]; then
  timeout 90 $N/bin/frigg-parity /tmp/mimir > $R/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (0 = pass)" >> $R/parity-mimir.txt
  timeout 90 $N/bin/frigg-parity --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt
  echo "parity mimir --force-causal rc $? (must be 1)" >> $R/parity-mimir-causal.txt
fi
timeout 60 $N/bin/frigg-parity --vs-cpu --allow-no-tf golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded \
    > $R/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)" >> $R/parity-tiny.txt
for f in parity-mimir parity-mimir-causal parity-tiny; do tail -3 $R/$f.txt | tee -a $R/log.txt; done
el parity
wait $e
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
