#!/bin/bash
# device call 63 (1 x H200): run63.commit built four ways: fused (the default, 256 threads per block), t128
# (-DQA_THREADS=128: 4 warps per block, 4 blocks per SM, 4 row pairs per warp), t128u2 (t128 with -DQA_U=2: two
# chunks per lane and row in flight, three rounds), t128u2pre (t128u2 + -DFRIGG_QA_PRE). off = the fused build
# with FRIGG_QKV_ATTN=off (the unfused pair). frigg-bench batch 1 at ctx 512, alternated three times.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r63; mkdir -p $R; snap() { tar czf $OUT/r63-logs.tgz -C /tmp r63; }
declare -A DEFS=([fused]="" [t128]="-DQA_THREADS=128" [t128u2]="-DQA_THREADS=128 -DQA_U=2" [t128u2pre]="-DQA_THREADS=128 -DQA_U=2 -DFRIGG_QA_PRE")
V="fused t128 t128u2 t128u2pre"
for v in $V; do mkdir -p /tmp/$v && tar xJf .devrun/new-src.tar.xz -C /tmp/$v && ln -s $PWD/.deps /tmp/$v/.deps; done
for v in $V; do
  ( cd /tmp/$v && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin FRIGG_NVCC_DEFS="${DEFS[$v]}" b/bin/frigg-bench > $R/build-$v.log 2>&1; echo "$v rc $?" >> $R/build-$v.log ) &
done
wait; tail -qn1 $R/build-*.log; el built; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 decode"
for rep in 1 2 3; do
  FRIGG_QKV_ATTN=off timeout 60 /tmp/fused/b/bin/frigg-bench $A >> $R/ab-off.jsonl 2>> $R/ab.txt
  for v in $V; do timeout 60 /tmp/$v/b/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt; done
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "off $V".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:7} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.3f} ms  roofline {r.get('roofline_frac')}  kps {r.get('kernels_per_step')}")
PY
snap; el done
