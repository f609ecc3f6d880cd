#!/bin/bash
# device call 12 (2 x H200): the shipped commit (run12.commit). GPU 0: CUDA tests, frigg-bench A/B against
# the session's base build (commit 7063017; alternated twice), the default matrix (bench-run12.jsonl) and
# opt-in rows (FRIGG_GEMV_IMPL=tc: batch-invariant decode; FRIGG_ATTN_DECODE=cluster). GPU 1: the
# Mimir-size fixture (branch scale 0.25, HF fp32 beside bf16), frigg-parity (plain, --force-causal), the
# tiny fixtures, the user path, then frigg-bench and scripts/bench-vs-hf on GPU 1 for the HF ratios.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r12; mkdir -p $R
# Built here (the carried binaries would not fit the 64 MiB transfer): sm_90, the deps packed by
# ../shared/gpu-host/pack-deps; the base build's frigg-bench comes prebuilt (.devrun/base.tar.xz).
make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-r12 BIN=build-r12/bin all > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
D=/tmp/r12bin; mkdir -p $D/base; ln -s $PWD/build-r12/bin $D/bin; ln -s $PWD/build-r12/tests $D/tests; ln -s $PWD/build-r12/dev $D/dev
tar xJf .devrun/base.tar.xz -C /tmp && cp /tmp/basebin/frigg-bench $D/base/
el built
snap() { tar czf $OUT/r12-logs.tgz -C /tmp r12; }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
$D/bin/frigg-bench --help > /dev/null || { echo "carried frigg-bench does not start"; ldd $D/bin/frigg-bench; exit 1; }
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  $C timeout 150 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --fp32-ref --out /tmp/mimir --device cuda > $R/fixture.log 2>&1; echo "fixture rc $?" >> $R/fixture.log
  $C timeout 60 $D/bin/frigg-parity /tmp/mimir > $R/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (0 = pass)" >> $R/parity-mimir.txt
  $C timeout 60 $D/bin/frigg-parity --tie auto /tmp/mimir > $R/parity-mimir-tie.jsonl 2> $R/parity-mimir-tie.txt; echo "parity mimir --tie auto rc $? (0 = pass)" >> $R/parity-mimir-tie.txt
  $C timeout 60 $D/bin/frigg-parity --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt; echo "parity mimir --force-causal rc $? (must be 1)" >> $R/parity-mimir-causal.txt
  $C timeout 40 $D/bin/frigg-parity --vs-cpu golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded > $R/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)" >> $R/parity-tiny.txt
  $C timeout 30 $D/bin/frigg-parity --force-causal golden/fixtures/tiny-packed > $R/parity-tiny-causal.jsonl 2> $R/parity-tiny-causal.txt; echo "parity tiny --force-causal rc $? (must be 1)" >> $R/parity-tiny-causal.txt
  { echo '$ bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?"'; $C timeout 20 $D/bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?" 2>&1; echo "rc $?"
    echo '$ bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl | tail -1'; $C timeout 30 $D/bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl 2>&1 | tail -1; } > $R/smoke.txt
  $C timeout 60 $D/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 1024,4096 decode prefill > $R/bench-gpu1.jsonl 2> $R/bench-gpu1.txt
  $C timeout 240 python3 scripts/bench-vs-hf --model /tmp/mimir --frigg $R/bench-gpu1.jsonl --batch 1,8 --ctx 512 --prefill 1024,4096 --steps 8 --repeats 3 > $R/vs-hf.jsonl 2> $R/vs-hf.txt; echo "vs-hf rc $?" >> $R/vs-hf.txt
) &
G1=$!
export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
t() { local name=$1; shift; $C timeout 90 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
t test_cuda_attn_decode $D/tests/test_cuda_attn_decode
t test_cuda_gemv $D/tests/test_cuda_gemv
t test_cuda_prefill $D/tests/test_cuda_prefill
t test_cuda_ops $D/tests/test_cuda_ops
t test_cuda_engine $D/tests/test_cuda_engine
FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc $D/tests/test_cuda_engine
snap; el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 4096 decode prefill"
for rep in 1 2; do
  $C timeout 60 $D/base/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  $C timeout 60 $D/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt

done
python3 - <<PY
import json
for f in ("ab-base","ab-new"):
    for l in open("$R/"+f+".jsonl"):
        r=json.loads(l)
        if r.get("bench")=="decode": print(f"{f:16} decode b{r['batch']} {r['tok_s']:8.1f} tok/s  gemv {r.get('gemv_impl')} attn {r.get('attn_decode')}")
        if r.get("bench")=="prefill": print(f"{f:16} prefill {r['tokens']} {r['tok_s']:8.0f} tok/s  attn {r.get('prefill_attn')}")
PY
snap; el ab
$C timeout 120 $D/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 matrix > $R/bench.jsonl 2> $R/bench.txt; echo "matrix rc $?"; cat $R/bench.txt
FRIGG_GEMV_IMPL=tc $C timeout 60 $D/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 decode > $R/opt-gemv-tc.jsonl 2> $R/opt.txt; echo "opt gemv-tc rc $?"
FRIGG_ATTN_DECODE=cluster $C timeout 60 $D/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 decode > $R/opt-attn-cluster.jsonl 2>> $R/opt.txt; echo "opt attn-cluster rc $?"; grep decode $R/opt.txt
snap; el matrix
wait $G1
tail -3 $R/fixture.log; for f in parity-mimir parity-mimir-causal parity-mimir-tie parity-tiny parity-tiny-causal; do tail -3 $R/$f.txt; done; cat $R/smoke.txt; grep -v Loading $R/vs-hf.txt | tail -12
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
