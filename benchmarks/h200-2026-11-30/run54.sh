#!/bin/bash
# device call 54 (1 x H200): run54.commit built four ways: c2 (-DTC_FULL=1 -DTC_CHAINS=2, run 53's best), c4
# (-DTC_FULL=1 -DTC_CHAINS=4: four mma accumulator chains per tile), c4r (c4 + -DTC_RED_UNROLL=1: the tile's
# cross-warp sum unrolled by 4), c4g (c4 + -DGEMV_FULL=1: the CUDA-core GEMV's full rounds without the
# per-chunk exit). Tests on c4, c4r, c4g; frigg-bench batch 1 and 8 at ctx 512, the arms alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r54; mkdir -p $R; snap() { tar czf $OUT/r54-logs.tgz -C /tmp r54; }
declare -A DEFS=([c2]="-DTC_FULL=1 -DTC_CHAINS=2" [c4]="-DTC_FULL=1 -DTC_CHAINS=4" [c4r]="-DTC_FULL=1 -DTC_CHAINS=4 -DTC_RED_UNROLL=1" [c4g]="-DTC_FULL=1 -DTC_CHAINS=4 -DGEMV_FULL=1")
for v in c2 c4 c4r c4g; do mkdir -p /tmp/$v && tar xJf .devrun/new-src.tar.xz -C /tmp/$v && ln -s $PWD/.deps /tmp/$v/.deps; done
for v in c2 c4 c4r c4g; do
  T=b/bin/frigg-bench; [ $v != c2 ] && T="$T b/tests/test_cuda_gemv b/tests/test_cuda_engine"
  ( cd /tmp/$v && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin FRIGG_NVCC_DEFS="${DEFS[$v]}" $T > $R/build-$v.log 2>&1; echo "$v rc $?" >> $R/build-$v.log ) &
done
wait; tail -qn1 $R/build-*.log; el built
for v in c4 c4r c4g; do
  for t in test_cuda_gemv test_cuda_engine; do timeout 90 /tmp/$v/b/tests/$t > $R/$t-$v.log 2>&1; echo "rc $?" >> $R/$t-$v.log; echo "$v $(tail -n2 $R/$t-$v.log | head -1)"; done
done
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  for v in c2 c4 c4r c4g; do timeout 60 /tmp/$v/b/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt; done
  el "rep $rep"
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["c2", "c4", "c4r", "c4g"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
snap; el done
