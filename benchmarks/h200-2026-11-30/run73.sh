#!/bin/bash
# device call 73 (1 x H200): experiment, L2 persistence of L-stack weights (FRIGG_L2_PERSIST, working tree).
# Arms alternated twice: off, layer:max, spread:max, layer:half. Then prefill 4096 off / layer:max; test_cuda_engine with it on.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r73; mkdir -p $R; snap() { tar czf $OUT/r73-logs.tgz -C /tmp r73; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=/tmp/b BIN=/tmp/b/bin /tmp/b/bin/frigg-bench /tmp/b/tests/test_cuda_engine > $R/build.log 2>&1; echo "rc $?" >> $R/build.log
tail -n1 $R/build.log
N=/tmp/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
declare -A ENV=([off]="" [layer]="1000:layer" [spread]="1000:spread" [half]="16:layer")
for rep in 1 2; do
  for arm in off layer spread half; do
    echo "== $arm" >> $R/ab.txt
    FRIGG_L2_PERSIST=${ENV[$arm]} timeout 60 $N/bin/frigg-bench $A >> $R/ab-$arm.jsonl 2>> $R/ab.txt
  done
  el "rep $rep"; snap
done
P="--random-mimir --seed 1 --repeats 3 --prefill 4096 prefill"
for arm in off layer off layer; do
  echo "== $arm" >> $R/pf.txt
  FRIGG_L2_PERSIST=${ENV[$arm]} timeout 60 $N/bin/frigg-bench $P >> $R/pf-$arm.jsonl 2>> $R/pf.txt
done
el prefill; snap
FRIGG_L2_PERSIST=1000:layer timeout 200 $N/tests/test_cuda_engine > $R/test_cuda_engine-layer.log 2>&1; echo "engine rc $? $(grep -E 'passed|FAIL' $R/test_cuda_engine-layer.log | tail -2 | tr '\n' ' ')"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "off layer spread half".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:8} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.4f} ms  roofline {r.get('roofline_frac')}")
for f in "off layer".split():
    for l in open("$R/pf-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "prefill": print(f"{f:8} prefill {r['tokens']} {r['tok_s']:8.0f} tok/s")
PY
grep "l2" $R/ab.txt | sort | uniq -c | head
snap; el done
