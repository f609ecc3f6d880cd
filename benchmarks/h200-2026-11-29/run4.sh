#!/bin/bash
# device call 4 (final): build the committed code, CUDA tests, tiny parity, bench matrix, per-kernel decode times
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
R=$OUT/r; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
git log --oneline -1 > $R/commit.txt 2>&1
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build BIN=bin build/libfriggcore.a build/tests/test_cuda_ops build/tests/test_cuda_engine bin/frigg-bench bin/frigg-parity > $R/build.log 2>&1 || { tail -30 $R/build.log; tar czf $OUT/logs.tgz -C $OUT r; exit 1; }
el built
timeout 120 build/tests/test_cuda_ops > $R/test_cuda_ops.log 2>&1; echo "ops rc $?"; grep -E "FAIL|passed" $R/test_cuda_ops.log | head -12
timeout 200 build/tests/test_cuda_engine > $R/test_cuda_engine.log 2>&1; echo "engine rc $?"; grep -E "FAIL|passed|kernels" $R/test_cuda_engine.log | head -12
timeout 120 bin/frigg-parity --vs-cpu golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded > $OUT/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)"; tail -1 $R/parity-tiny.txt
timeout 60 bin/frigg-parity --force-causal golden/fixtures/tiny-packed > $R/parity-tiny-causal.jsonl 2> $R/parity-tiny-causal.txt; echo "parity tiny --force-causal rc $? (must be 1)"; tail -1 $R/parity-tiny-causal.txt
el tests
timeout 240 bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 matrix > $OUT/bench.jsonl 2> $R/bench.txt; echo "bench rc $?"; cat $R/bench.txt
el bench
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] && timeout 90 $NCU --clock-control none --graph-profiling node --kernel-name regex:"gemv_kernel|attn_decode_split" --launch-skip 41 --launch-count 10 --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv bin/frigg-bench --random-mimir --batch 1 --ctx 512 --steps 4 decode > $R/ncu.csv 2> $R/ncu.err; echo "ncu rc $?"; python3 -c "
import csv
for r in csv.reader(open('$R/ncu.csv')):
    if len(r) > 14 and r[12] in ('gpu__time_duration.sum','dram__bytes_read.sum'): print(r[4][:50], r[8], r[12], r[13], r[14])
" | head -24
el ncu
tar czf $OUT/logs.tgz -C $OUT r
