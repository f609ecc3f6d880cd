#!/bin/bash
# device call 11 (2 x H200): the tensor-core GEMV at depth 2 with run 10's auto table, and the
# FRIGG_PDL_EARLY experiment (a second build, build-r11e: kernels let their successor launch before their own
# wait). GPU 0: CUDA tests of both builds, dev/gemv, frigg-bench A/B (base = commit 7063017, new = this
# build, new-early = build-r11e; alternated twice), then the matrix of both builds.
# GPU 1: the Mimir-size fixture (branch scale 0.25, HF fp32 beside bf16), frigg-parity of this build on it
# (plain, --force-causal), tiny-fixture parity against the CPU engine, the user path (frigg-run, frigg-eval),
# then frigg-bench and scripts/bench-vs-hf on GPU 1 for the HF ratios.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r11; mkdir -p $R
# Built here (the carried binaries would not fit the 64 MiB transfer): sm_90, the deps packed by
# ../shared/gpu-host/pack-deps; the base build's frigg-bench comes prebuilt (.devrun/base.tar.xz).
make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-r11 BIN=build-r11/bin all > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-r11e BIN=build-r11e/bin FRIGG_NVCC_DEFS=-DFRIGG_PDL_EARLY \
  build-r11e/bin/frigg-bench build-r11e/bin/frigg-parity build-r11e/tests/test_cuda_engine build-r11e/tests/test_cuda_attn_decode > $R/build-e.log 2>&1 || { tail -30 $R/build-e.log; exit 1; }
E=$PWD/build-r11e
D=/tmp/r11bin; mkdir -p $D/base; ln -s $PWD/build-r11/bin $D/bin; ln -s $PWD/build-r11/tests $D/tests; ln -s $PWD/build-r11/dev $D/dev
tar xJf .devrun/base.tar.xz -C /tmp && cp /tmp/basebin/frigg-bench $D/base/
el built
snap() { tar czf $OUT/r11-logs.tgz -C /tmp r11; }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
$D/bin/frigg-bench --help > /dev/null || { echo "carried frigg-bench does not start"; ldd $D/bin/frigg-bench; exit 1; }
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  $C timeout 150 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --fp32-ref --out /tmp/mimir --device cuda > $R/fixture.log 2>&1; echo "fixture rc $?" >> $R/fixture.log
  $C timeout 60 $D/bin/frigg-parity /tmp/mimir > $R/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (0 = pass)" >> $R/parity-mimir.txt
  $C timeout 60 $E/bin/frigg-parity /tmp/mimir > $R/parity-mimir-early.jsonl 2> $R/parity-mimir-early.txt; echo "parity mimir (early) rc $? (0 = pass)" >> $R/parity-mimir-early.txt
  $C timeout 60 $E/bin/frigg-parity --force-causal /tmp/mimir > $R/parity-mimir-causal-early.jsonl 2> $R/parity-mimir-causal-early.txt; echo "parity mimir --force-causal (early) rc $? (must be 1)" >> $R/parity-mimir-causal-early.txt
  $C timeout 60 $D/bin/frigg-parity --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt; echo "parity mimir --force-causal rc $? (must be 1)" >> $R/parity-mimir-causal.txt
  $C timeout 40 $D/bin/frigg-parity --vs-cpu golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded > $R/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)" >> $R/parity-tiny.txt
  $C timeout 30 $D/bin/frigg-parity --force-causal golden/fixtures/tiny-packed > $R/parity-tiny-causal.jsonl 2> $R/parity-tiny-causal.txt; echo "parity tiny --force-causal rc $? (must be 1)" >> $R/parity-tiny-causal.txt
  { echo '$ bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?"'; $C timeout 20 $D/bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?" 2>&1; echo "rc $?"
    echo '$ bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl | tail -1'; $C timeout 30 $D/bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl 2>&1 | tail -1; } > $R/smoke.txt
  $C timeout 60 $D/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 1024,4096 decode prefill > $R/bench-gpu1.jsonl 2> $R/bench-gpu1.txt
  $C timeout 60 $E/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 1024,4096 decode prefill > $R/bench-gpu1-early.jsonl 2>> $R/bench-gpu1.txt
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
t test_cuda_engine-early $E/tests/test_cuda_engine
t test_cuda_attn_decode-early $E/tests/test_cuda_attn_decode
snap; el tests
$C timeout 90 $D/dev/gemv --only simt,tc,tc-d2,auto > $R/dev-gemv.txt 2>&1; echo "dev/gemv rc $?"; tail -24 $R/dev-gemv.txt
snap; el microbench
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 4096 decode prefill"
for rep in 1 2; do
  $C timeout 60 $D/base/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  $C timeout 60 $D/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
  $C timeout 60 $E/bin/frigg-bench $A >> $R/ab-new-early.jsonl 2>> $R/ab.txt
done
python3 - <<PY
import json
for f in ("ab-base","ab-new","ab-new-early"):
    for l in open("$R/"+f+".jsonl"):
        r=json.loads(l)
        if r.get("bench")=="decode": print(f"{f:16} decode b{r['batch']} {r['tok_s']:8.1f} tok/s  gemv {r.get('gemv_impl')} attn {r.get('attn_decode')}")
        if r.get("bench")=="prefill": print(f"{f:16} prefill {r['tokens']} {r['tok_s']:8.0f} tok/s  attn {r.get('prefill_attn')}")
PY
snap; el ab
$C timeout 120 $D/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 matrix > $R/bench.jsonl 2> $R/bench.txt; echo "matrix rc $?"; cat $R/bench.txt
$C timeout 120 $E/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 matrix > $R/bench-early.jsonl 2> $R/bench-early.txt; echo "matrix (early) rc $?"; cat $R/bench-early.txt
snap; el matrix
wait $G1
tail -3 $R/fixture.log; for f in parity-mimir parity-mimir-causal parity-mimir-early parity-mimir-causal-early parity-tiny parity-tiny-causal; do tail -3 $R/$f.txt; done; cat $R/smoke.txt; grep -v Loading $R/vs-hf.txt | tail -12
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
