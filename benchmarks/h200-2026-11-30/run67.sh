#!/bin/bash
# device call 67 (1 x H200): run67.commit built three ways: base (the default), long (-DGEMV_LONG_DEFAULT=1: the
# CUDA-core GEMV keeps all 16 chunks of a K-4096 row in flight, one round), q4 / q6 (-DGEMV_SHORT_UNROLL_QKV=4 / 6:
# the batch-1 gqkv with 4 / 6 chunks per lane and row in flight instead of 3; gate_up keeps 3). Arms: base; down_s
# (base with FRIGG_GEMV_AUTO=down=sttttttt: batch-1 down_proj on CUDA cores); down_sl (long with the same);
# q4; q6. frigg-bench batch 1 at ctx 512, alternated three times.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r67; mkdir -p $R; snap() { tar czf $OUT/r67-logs.tgz -C /tmp r67; }
declare -A DEFS=([base]="" [long]="-DGEMV_LONG_DEFAULT=1" [q4]="-DGEMV_SHORT_UNROLL_QKV=4" [q6]="-DGEMV_SHORT_UNROLL_QKV=6")
V="base long q4 q6"
for v in $V; do mkdir -p /tmp/$v && tar xJf .devrun/new-src.tar.xz -C /tmp/$v && ln -s $PWD/.deps /tmp/$v/.deps; done
for v in $V; do
  ( cd /tmp/$v && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin FRIGG_NVCC_DEFS="${DEFS[$v]}" b/bin/frigg-bench > $R/build-$v.log 2>&1; echo "$v rc $?" >> $R/build-$v.log ) &
done
wait; tail -qn1 $R/build-*.log; el built; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 decode"
for rep in 1 2 3; do
  timeout 60 /tmp/base/b/bin/frigg-bench $A >> $R/ab-default.jsonl 2>> $R/ab.txt
  FRIGG_GEMV_AUTO=down=sttttttt timeout 60 /tmp/base/b/bin/frigg-bench $A >> $R/ab-down_s.jsonl 2>> $R/ab.txt
  FRIGG_GEMV_AUTO=down=sttttttt timeout 60 /tmp/long/b/bin/frigg-bench $A >> $R/ab-down_sl.jsonl 2>> $R/ab.txt
  timeout 60 /tmp/q4/b/bin/frigg-bench $A >> $R/ab-q4.jsonl 2>> $R/ab.txt
  timeout 60 /tmp/q6/b/bin/frigg-bench $A >> $R/ab-q6.jsonl 2>> $R/ab.txt
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "default down_s down_sl q4 q6".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:8} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.3f} ms  roofline {r.get('roofline_frac')}")
PY
snap; el done
