#!/bin/bash
# device call 9 (2 x H200): the three new kernels (decode attention, tensor-core GEMV, prefill attention)
# checked and timed: their tests, their microbenchmarks (kernels/dev/*), then frigg-bench with the session's
# starting build ("base", commit 7063017) and this build alternating, on GPU 0. Meanwhile on GPU 1:
# Mimir-size fixtures with residual-branch scales 0.25 and 0.5 (HF fp32 beside bf16) and frigg-parity on them
# with the base engine (run 8's binary), plain and --force-causal. Binaries built on the dev host
# (make -j2 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-r9, stripped), carried as .devrun/r9.tar.xz.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
R=/tmp/r9; mkdir -p $R
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
snap() { tar czf $OUT/r9-logs.tgz -C /tmp r9; }
tar xJf .devrun/r9.tar.xz -C /tmp && D=/tmp/r9bin && mv /tmp/r9 $D && mkdir -p $R
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
$D/bin/frigg-bench --help > /dev/null || { echo "carried frigg-bench does not start"; ldd $D/bin/frigg-bench; exit 1; }
( export CUDA_VISIBLE_DEVICES=1
  for bs in 0.25 0.5; do
    taskset -c 16-31 timeout 150 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --branch-scale $bs --fp32-ref \
      --out /tmp/mimir-$bs --device cuda > $R/fixture-bs$bs.log 2>&1; echo "fixture $bs rc $?" >> $R/fixture-bs$bs.log
    taskset -c 16-31 timeout 60 $D/base/frigg-parity /tmp/mimir-$bs > $R/parity-bs$bs.jsonl 2> $R/parity-bs$bs.txt; echo "parity $bs rc $?" >> $R/parity-bs$bs.txt
    taskset -c 16-31 timeout 60 $D/base/frigg-parity --force-causal /tmp/mimir-$bs > $R/parity-bs$bs-causal.jsonl 2> $R/parity-bs$bs-causal.txt; echo "parity $bs --force-causal rc $? (must be 1)" >> $R/parity-bs$bs-causal.txt
    rm -f /tmp/mimir-$bs/model.safetensors
  done ) &
FIX=$!
export CUDA_VISIBLE_DEVICES=0
t() { local name=$1; shift; timeout 75 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
t test_cuda_attn_decode $D/tests/test_cuda_attn_decode
t test_cuda_gemv $D/tests/test_cuda_gemv
t test_cuda_prefill $D/tests/test_cuda_prefill
t test_cuda_ops $D/tests/test_cuda_ops
t test_cuda_engine $D/tests/test_cuda_engine
FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc $D/tests/test_cuda_engine
FRIGG_PREFILL_ATTN=mma-bf16p t test_cuda_engine-bf16p $D/tests/test_cuda_engine
snap; el tests
taskset -c 0-15 timeout 100 $D/dev/attn_decode > $R/dev-attn_decode.txt 2>&1; echo "dev/attn_decode rc $?"; tail -16 $R/dev-attn_decode.txt
taskset -c 0-15 timeout 60 $D/dev/attn_decode --max-ctx 4096 --quick > $R/dev-attn_decode-max4096.txt 2>&1; echo "dev/attn_decode --max-ctx 4096 rc $?"
taskset -c 0-15 timeout 120 $D/dev/gemv > $R/dev-gemv.txt 2>&1; echo "dev/gemv rc $?"; tail -24 $R/dev-gemv.txt
taskset -c 0-15 timeout 120 $D/dev/prefill > $R/dev-prefill.txt 2>&1; echo "dev/prefill rc $?"; tail -24 $R/dev-prefill.txt
snap; el microbench
B="taskset -c 0-15 timeout 60"
for rep in 1 2; do
  $B $D/base/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 4096 decode prefill >> $R/ab-base.jsonl 2>> $R/ab.txt
  $B $D/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 4096 decode prefill >> $R/ab-new.jsonl 2>> $R/ab.txt
  FRIGG_GEMV_IMPL=tc FRIGG_PREFILL_ATTN=mma-bf16p $B $D/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 4096 decode prefill >> $R/ab-new-tc-bf16p.jsonl 2>> $R/ab.txt
done
python3 - <<PY
import json
for f in ("ab-base","ab-new","ab-new-tc-bf16p"):
    for l in open("$R/"+f+".jsonl"):
        r=json.loads(l)
        if r.get("bench")=="decode": print(f"{f:18} decode b{r['batch']} {r['tok_s']:8.1f} tok/s  gemv {r.get('gemv_impl')}")
        if r.get("bench")=="prefill": print(f"{f:18} prefill {r['tokens']} {r['tok_s']:8.0f} tok/s  attn {r.get('prefill_attn')}")
PY
snap; el bench
wait $FIX
for bs in 0.25 0.5; do tail -11 $R/fixture-bs$bs.log; tail -3 $R/parity-bs$bs.txt; tail -2 $R/parity-bs$bs-causal.txt; done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
