#!/bin/bash
# device call 53 (1 x H200): run53.commit built three ways: base (default), full (-DTC_FULL=1: the tensor-core
# GEMV's full K slices without the per-step exit), chains (-DTC_FULL=1 -DTC_CHAINS=2: plus two mma accumulator
# chains). Tests on full and chains; frigg-bench batch 1 and 8 at ctx 512, the three arms alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r53; mkdir -p $R; snap() { tar czf $OUT/r53-logs.tgz -C /tmp r53; }
declare -A DEFS=([base]="" [full]="-DTC_FULL=1" [chains]="-DTC_FULL=1 -DTC_CHAINS=2")
for v in base full chains; do mkdir -p /tmp/$v && tar xJf .devrun/new-src.tar.xz -C /tmp/$v && ln -s $PWD/.deps /tmp/$v/.deps; done
for v in base full chains; do
  T=b/bin/frigg-bench; [ $v != base ] && T="$T b/tests/test_cuda_gemv b/tests/test_cuda_engine"
  ( cd /tmp/$v && make -j5 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin FRIGG_NVCC_DEFS="${DEFS[$v]}" $T > $R/build-$v.log 2>&1; echo "$v rc $?" >> $R/build-$v.log ) &
done
wait; tail -qn1 $R/build-*.log; el built
for v in full chains; do
  for t in test_cuda_gemv test_cuda_engine; do timeout 90 /tmp/$v/b/tests/$t > $R/$t-$v.log 2>&1; echo "rc $?" >> $R/$t-$v.log; echo "$v $(tail -n2 $R/$t-$v.log | head -1)"; done
done
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  for v in base full chains; do timeout 60 /tmp/$v/b/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt; done
  el "rep $rep"
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "full", "chains"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
snap; el done
