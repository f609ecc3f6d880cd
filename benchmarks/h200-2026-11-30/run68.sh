#!/bin/bash
# device call 68 (1 x H200): the pipelined greedy decode (run68.commit, new) against 4ba46a9 (base: session 8's
# end). test_cuda_ops and test_cuda_engine of new; frigg-bench batch 1 and 8 at ctx 512 alternated three times:
# base, new --one-step (the step-by-step path), new (pipelined, the default); the user path (frigg-run).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r68; mkdir -p $R /tmp/new /tmp/base; snap() { tar czf $OUT/r68-logs.tgz -C /tmp r68; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -s $PWD/.deps /tmp/new/.deps && ln -s $PWD/.deps /tmp/base/.deps
( cd /tmp/new && make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-run b/tests/test_cuda_ops b/tests/test_cuda_engine > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/base && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-base.log 2>&1; echo "base rc $?" >> $R/build-base.log ) &
wait; tail -n1 $R/build-new.log; tail -n1 $R/build-base.log
N=/tmp/new/b; B=/tmp/base/b
[ -x $N/bin/frigg-bench ] && [ -x $B/bin/frigg-bench ] || { tail -30 $R/build-new.log $R/build-base.log; snap; exit 1; }
el built
t() { local name=$1; shift; timeout 150 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -3 | tr '\n' ' ')"; }
t test_cuda_ops $N/tests/test_cuda_ops
t test_cuda_engine $N/tests/test_cuda_engine
{ echo '$ bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?"'; timeout 20 $N/bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?" 2>&1; echo "rc $?"; } > $R/smoke.txt; cat $R/smoke.txt | tail -5
snap; el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2 3; do
  timeout 60 $B/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  timeout 60 $N/bin/frigg-bench --one-step $A >> $R/ab-onestep.jsonl 2>> $R/ab.txt
  timeout 60 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "base onestep new".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:8} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.4f} ms  roofline {r.get('roofline_frac')} pipelined {r.get('pipelined')}")
PY
snap; el done
