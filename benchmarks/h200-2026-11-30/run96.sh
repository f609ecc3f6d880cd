#!/bin/bash
# device calls 96 and 97 (1 x H200 each): the full check of run96.commit (18e828a: the tensor-core GEMV's batch-1
# staging, stage_norm with two barriers, decode attention's park barrier left out before the cluster barrier),
# built from a git archive of it (new) and of 122a4a0 (base: this session's start).
# PART=1 (call 96): the CUDA tests, the frigg-bench A/B (base, new; alternated twice), the default matrix, the
# ablation.
# PART=2 (call 97): compute-sanitizer memcheck on test_cuda_ops (the device top-k included) and test_cuda_engine,
# the Mimir-size fixture, frigg-parity (plain, --tie auto, --force-causal), the tiny fixtures, the user path.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r96-$PART; mkdir -p $R /tmp/new /tmp/base; snap() { tar czf $OUT/r96-$PART-logs.tgz -C /tmp r96-$PART; }
tar xJf .devrun/new96-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
if [ "$PART" = 1 ]; then
  tar xJf .devrun/base96-src.tar.xz -C /tmp/base && ln -s $PWD/.deps /tmp/base/.deps
  ( cd /tmp/base && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-base.log 2>&1; echo "base rc $?" >> $R/build-base.log ) &
fi
wait; tail -qn1 $R/build-*.log
N=/tmp/new/b; P=/tmp/base/b
[ -x $N/bin/frigg-bench ] && [ -x $N/tests/test_cuda_engine ] || { tail -30 $R/build-*.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
t() { local name=$1; shift; timeout 150 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
if [ "$PART" = 1 ]; then
  FRIGG_QUICK=1 t test_cuda_attn_decode-quick $N/tests/test_cuda_attn_decode
  t test_cuda_gemv $N/tests/test_cuda_gemv
  t test_cuda_prefill $N/tests/test_cuda_prefill
  t test_cuda_ops $N/tests/test_cuda_ops
  t test_cuda_engine $N/tests/test_cuda_engine
  FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc $N/tests/test_cuda_engine
  FRIGG_ATTN_DECODE=split t test_cuda_engine-split $N/tests/test_cuda_engine
  FRIGG_GEMV_IMPL=simt t test_cuda_engine-simt $N/tests/test_cuda_engine
  snap; el tests
  A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 4096 decode prefill"
  for rep in 1 2; do
    timeout 60 $P/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
    timeout 60 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
  done
  python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["ab-base", "ab-new"]:
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:12} decode b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.4f} ms  roofline {r.get('roofline_frac')}  pipelined {r.get('pipelined')}")
        if r.get("bench") == "prefill": print(f"{f:12} prefill {r['tokens']} {r['tok_s']:8.0f} tok/s")
PY
  snap; el ab
  timeout 150 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 matrix > $R/bench.jsonl 2> $R/bench.txt; echo "matrix rc $?"; cat $R/bench.txt
  snap; el matrix
  for sk in none attn qkv o gu down lmhead qkv,attn,o,gu,down qkv,attn,o,gu,down,lmhead; do
    a=""; [ $sk != none ] && a="--skip $sk"
    timeout 60 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 $a decode >> $R/ablate.jsonl 2>> $R/ablate.txt
  done
  python3 -c "
import json
for l in open('$R/ablate.jsonl'):
    r=json.loads(l)
    if r.get('bench')=='decode': print(f\"b{r['batch']} skip {r['skip'] or 'none':8} {r['ms_per_step']:.3f} ms/step {r['tok_s']:.1f} tok/s\")
" | tee $R/ablate-summary.txt
  snap; el ablate
fi
if [ "$PART" = 2 ]; then
  timeout 100 compute-sanitizer --tool memcheck $N/tests/test_cuda_ops > $R/sanitizer-ops.log 2>&1; echo "sanitizer rc $?" >> $R/sanitizer-ops.log
  timeout 200 compute-sanitizer --tool memcheck $N/tests/test_cuda_engine > $R/sanitizer-engine.log 2>&1; echo "sanitizer rc $?" >> $R/sanitizer-engine.log
  tail -2 $R/sanitizer-ops.log $R/sanitizer-engine.log; snap; el sanitizer
  C=""
  $C timeout 150 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --fp32-ref --out /tmp/mimir --device cuda > $R/fixture.log 2>&1; echo "fixture rc $?" >> $R/fixture.log
  $C timeout 60 $N/bin/frigg-parity /tmp/mimir > $R/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (0 = pass)" >> $R/parity-mimir.txt
  $C timeout 60 $N/bin/frigg-parity --tie auto /tmp/mimir > $R/parity-mimir-tie.jsonl 2> $R/parity-mimir-tie.txt; echo "parity mimir --tie auto rc $? (0 = pass)" >> $R/parity-mimir-tie.txt
  $C timeout 60 $N/bin/frigg-parity --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt; echo "parity mimir --force-causal rc $? (must be 1)" >> $R/parity-mimir-causal.txt
  $C timeout 40 $N/bin/frigg-parity --vs-cpu golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded > $R/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)" >> $R/parity-tiny.txt
  $C timeout 30 $N/bin/frigg-parity --force-causal golden/fixtures/tiny-packed > $R/parity-tiny-causal.jsonl 2> $R/parity-tiny-causal.txt; echo "parity tiny --force-causal rc $? (must be 1)" >> $R/parity-tiny-causal.txt
  { echo '$ bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?"'; $C timeout 20 $N/bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?" 2>&1; echo "rc $?"
    echo '$ bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl | tail -1'; $C timeout 30 $N/bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl 2>&1 | tail -1; } > $R/smoke.txt
  snap
  tail -3 $R/fixture.log; for f in parity-mimir parity-mimir-causal parity-mimir-tie parity-tiny parity-tiny-causal; do tail -3 $R/$f.txt; done; cat $R/smoke.txt
fi
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
