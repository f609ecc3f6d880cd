#!/bin/bash
# device call 72 (1 x H200): run72.commit = run 71's code with two mends (fk_aligned16 for host and device;
# decode_argmax as decode_greedy of one step; no change in what either does). test_cuda_ops, test_cuda_engine (plain and under memcheck), the user path,
# and frigg-bench batch 1 and 8 at ctx 512, --one-step and the default alternated three times.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r72; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r72-logs.tgz -C /tmp r72; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/bin/frigg-run b/tests/test_cuda_ops b/tests/test_cuda_engine > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log
N=/tmp/new/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
t() { local name=$1; shift; timeout 200 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL|ERROR SUMMARY' $R/$name.log | tail -3 | tr '\n' ' ')"; }
t test_cuda_ops $N/tests/test_cuda_ops
t test_cuda_engine $N/tests/test_cuda_engine
t sanitizer-engine compute-sanitizer --tool memcheck $N/tests/test_cuda_engine
{ echo '$ bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?"'; timeout 20 $N/bin/frigg-run --backend cuda -p "Hvad er hovedstaden i Danmark?" 2>&1; echo "rc $?"; } > $R/smoke.txt; tail -3 $R/smoke.txt
snap; el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2 3; do
  timeout 60 $N/bin/frigg-bench --one-step $A >> $R/ab-onestep.jsonl 2>> $R/ab.txt
  timeout 60 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "onestep new".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:8} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.4f} ms  roofline {r.get('roofline_frac')} pipelined {r.get('pipelined')}")
PY
snap; el done
