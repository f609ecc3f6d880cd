#!/bin/bash
# The CUDA engine after its kernel state moved into a per-engine context (kernels/ctx.cuh) and the losing kernel
# variants left kernels/: the CUDA tests, an A/B against the commit before (f35afa8, "base") with frigg-bench
# alternated twice, compute-sanitizer memcheck, frigg-parity on the full-size random model. Run on the GPU host
# from the project root (the new commit's tree) with .devrun/base-src.tar.xz (git archive f35afa8, without
# benchmarks/ and golden/) and .deps carried.
# PART=1: tests + A/B.  PART=2: memcheck, Mimir-size fixture, frigg-parity, the user path.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/p$PART; mkdir -p $R /tmp/base; trap 'tar czf $OUT/p$PART.tgz -C /tmp p$PART' EXIT
ln -sfn $PWD /tmp/new
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
if [ "$PART" = 1 ]; then
  tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -s $PWD/.deps /tmp/base/.deps
  ( cd /tmp/base && make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-base.log 2>&1; echo "base rc $?" >> $R/build-base.log ) &
fi
wait; tail -qn1 $R/build-*.log
N=/tmp/new/b; P=/tmp/base/b
[ -x $N/bin/frigg-bench ] && [ -x $N/tests/test_cuda_engine ] || { tail -30 $R/build-*.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
t() { local name=$1; shift; ( cd /tmp/new && FRIGG_ROOT=/tmp/new timeout 240 "$@" ) > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed, [0-9]+ failed|^FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
if [ "$PART" = 1 ]; then
  t test_cuda_gemv $N/tests/test_cuda_gemv
  t test_cuda_ops $N/tests/test_cuda_ops
  t test_cuda_prefill $N/tests/test_cuda_prefill
  t test_cuda_attn_decode $N/tests/test_cuda_attn_decode
  t test_cuda_engine $N/tests/test_cuda_engine
  t test_scheduler $N/tests/test_scheduler
  el tests
  A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 4096 decode prefill"
  for rep in 1 2; do
    timeout 90 $P/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
    timeout 90 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
    timeout 90 $N/bin/frigg-bench --batch-invariant $A >> $R/ab-new-invariant.jsonl 2>> $R/ab.txt
  done
  python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["ab-base", "ab-new", "ab-new-invariant"]:
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:17} decode b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.4f} ms  roofline {r.get('roofline_frac')}  gemv {r.get('gemv_impl')}  {r['gpu']} {r['sm_clock_mhz']} MHz {r['temp_c']} C")
        if r.get("bench") == "prefill": print(f"{f:17} prefill {r['tokens']} {r['tok_s']:8.0f} tok/s  {r['sm_clock_mhz']} MHz {r['temp_c']} C")
PY
  el ab
fi
if [ "$PART" = 2 ]; then
  ( cd /tmp/new && FRIGG_ROOT=/tmp/new timeout 200 compute-sanitizer --tool memcheck $N/tests/test_cuda_engine ) > $R/sanitizer-engine.log 2>&1; echo "sanitizer rc $?" >> $R/sanitizer-engine.log
  tail -3 $R/sanitizer-engine.log; el sanitizer
  timeout 150 python3 /tmp/new/scripts/oracle/make_fixtures.py --mimir-size --seed 1 --fp32-ref --out /tmp/mimir --device cuda > $R/fixture.log 2>&1; echo "fixture rc $?" >> $R/fixture.log
  timeout 60 $N/bin/frigg-parity /tmp/mimir > $R/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (0 = pass)" >> $R/parity-mimir.txt
  timeout 60 $N/bin/frigg-parity --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt; echo "parity mimir --force-causal rc $? (must be 1)" >> $R/parity-mimir-causal.txt
  ( cd /tmp/new && timeout 40 $N/bin/frigg-parity --vs-cpu golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded ) > $R/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)" >> $R/parity-tiny.txt
  { echo '$ bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?"'; ( cd /tmp/new && timeout 20 $N/bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?" 2>&1 ); echo "rc $?"
    echo '$ bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl | tail -1'; ( cd /tmp/new && timeout 30 $N/bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl 2>&1 | tail -1 ); } > $R/smoke.txt
  tail -2 $R/fixture.log; for f in parity-mimir parity-mimir-causal parity-tiny; do tail -3 $R/$f.txt; done; cat $R/smoke.txt
fi
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
