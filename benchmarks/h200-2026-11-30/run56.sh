#!/bin/bash
# device call 56 (1 x H200): run56.commit built four ways: base (the default), nb (-DFRIGG_TC_NB=1: the
# tensor-core GEMV's tile partials handed to the reducing warp through named barriers, bar.arrive, instead of a
# block-wide __syncthreads), nbr (nb + -DFRIGG_TC_ROTATE=1: the reducing duty rotates over the warps), rot
# (-DFRIGG_TC_ROTATE=1 alone). Tests on nb, nbr, rot; frigg-bench batch 1 and 8 at ctx 512, alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r56; mkdir -p $R; snap() { tar czf $OUT/r56-logs.tgz -C /tmp r56; }
declare -A DEFS=([base]="" [nb]="-DFRIGG_TC_NB=1" [nbr]="-DFRIGG_TC_NB=1 -DFRIGG_TC_ROTATE=1" [rot]="-DFRIGG_TC_ROTATE=1")
for v in base nb nbr rot; do mkdir -p /tmp/$v && tar xJf .devrun/new-src.tar.xz -C /tmp/$v && ln -s $PWD/.deps /tmp/$v/.deps; done
for v in base nb nbr rot; do
  T=b/bin/frigg-bench; [ $v != base ] && T="$T b/tests/test_cuda_gemv b/tests/test_cuda_engine"
  ( cd /tmp/$v && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin FRIGG_NVCC_DEFS="${DEFS[$v]}" $T > $R/build-$v.log 2>&1; echo "$v rc $?" >> $R/build-$v.log ) &
done
wait; tail -qn1 $R/build-*.log; el built
for v in nb nbr rot; do
  for t in test_cuda_gemv test_cuda_engine; do timeout 90 /tmp/$v/b/tests/$t > $R/$t-$v.log 2>&1; echo "rc $?" >> $R/$t-$v.log; echo "$v $(tail -n2 $R/$t-$v.log | head -1)"; done
done
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  for v in base nb nbr rot; do timeout 60 /tmp/$v/b/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt; done
  el "rep $rep"
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "nb", "nbr", "rot"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
snap; el done
