#!/bin/bash
# device call 3: build, CUDA tests, parity (tiny fixtures + full-size Mimir-shaped model vs HF), bench matrix, HF side by side
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
R=$OUT/r; mkdir -p $R
nvidia-smi > $R/smi.txt 2>&1
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build BIN=bin build/libfriggcore.a build/tests/test_cuda_ops build/tests/test_cuda_engine bin/frigg-bench bin/frigg-parity bin/frigg-run > $R/build.log 2>&1 || { tail -30 $R/build.log; tar czf $OUT/logs.tgz -C $OUT r; exit 1; }
el built
timeout 120 build/tests/test_cuda_ops > $R/test_cuda_ops.log 2>&1; echo "ops rc $?"; grep -E "FAIL|passed" $R/test_cuda_ops.log | head -12
timeout 200 build/tests/test_cuda_engine > $R/test_cuda_engine.log 2>&1; echo "engine rc $?"; grep -E "FAIL|passed|kernels" $R/test_cuda_engine.log | head -12
el tests
timeout 120 bin/frigg-parity --vs-cpu golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded > $OUT/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)"; tail -1 $R/parity-tiny.txt
timeout 60 bin/frigg-parity --force-causal golden/fixtures/tiny-packed > $R/parity-tiny-causal.jsonl 2> $R/parity-tiny-causal.txt; echo "parity tiny --force-causal rc $? (must be 1)"; tail -1 $R/parity-tiny-causal.txt
el parity-tiny
timeout 240 bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 matrix > $OUT/bench.jsonl 2> $R/bench.txt; echo "bench rc $?"; cat $R/bench.txt
el bench
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] && timeout 100 $NCU --clock-control none --graph-profiling node --kernel-name regex:"gemv|attn_decode|norm_kernel|embed|argmax" --launch-skip 60 --launch-count 12 --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv bin/frigg-bench --random-mimir --batch 1 --ctx 512 --steps 4 decode > $R/ncu.csv 2> $R/ncu.err; echo "ncu rc $?"; python3 -c "
import csv,sys
for r in csv.reader(open('$R/ncu.csv')):
    if len(r) > 14 and r[12] in ('gpu__time_duration.sum','dram__bytes_read.sum'): print(r[4][:60], r[8], r[12], r[13], r[14])
" | head -30
el ncu
timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --out /tmp/mimir --device cuda > $R/mimir-fixture.log 2>&1; echo "fixture rc $?"; tail -4 $R/mimir-fixture.log
el fixture
if [ -f /tmp/mimir/reference.json ]; then
  cp /tmp/mimir/reference.json $R/mimir-reference.json
  timeout 120 bin/frigg-parity --tie auto /tmp/mimir > $OUT/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (0 = pass)"; cat $R/parity-mimir.txt | tail -11
  timeout 90 bin/frigg-parity --tie auto --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt; echo "parity mimir --force-causal rc $? (must be 1)"; tail -1 $R/parity-mimir-causal.txt
  el parity-mimir
  timeout 150 python3 scripts/bench-vs-hf --model /tmp/mimir --frigg $OUT/bench.jsonl --batch 1,8 --ctx 512 --prefill 1024,4096 --steps 8 --repeats 3 > $OUT/vs-hf.jsonl 2> $R/vs-hf.txt; echo "vs-hf rc $?"; tail -12 $R/vs-hf.txt
  el vs-hf
fi
tar czf $OUT/logs.tgz -C $OUT r
