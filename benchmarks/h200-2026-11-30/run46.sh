#!/bin/bash
# device call 46 (1 x H200): run46.commit built four ways: base (no defines: the shipped kernels), simt
# (-DFRIGG_SIMT_QKV_EARLY), tc (-DFRIGG_TC_EPI_EARLY), both. Tests on "both"; batch 1 and 8 at ctx 512, the four
# builds alternated three times.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r46; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r46-logs.tgz -C /tmp r46; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
cd /tmp/new
declare -A D=([base]="" [simt]="-DFRIGG_SIMT_QKV_EARLY" [tc]="-DFRIGG_TC_EPI_EARLY" [both]="-DFRIGG_SIMT_QKV_EARLY -DFRIGG_TC_EPI_EARLY")
for v in base simt tc both; do
  T=b$v; X=""; [ $v = both ] && X="$T/tests/test_cuda_gemv $T/tests/test_cuda_engine"
  make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=$T BIN=$T/bin FRIGG_NVCC_DEFS="${D[$v]}" $T/bin/frigg-bench $X > $R/build-$v.log 2>&1; echo "$v rc $?" | tee -a $R/build-$v.log
done
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 120 bboth/tests/test_cuda_gemv > $R/test_cuda_gemv-both.log 2>&1; echo "rc $?" >> $R/test_cuda_gemv-both.log; tail -n2 $R/test_cuda_gemv-both.log
timeout 120 bboth/tests/test_cuda_engine > $R/test_cuda_engine-both.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-both.log; tail -n2 $R/test_cuda_engine-both.log
FRIGG_GEMV_IMPL=tc timeout 120 bboth/tests/test_cuda_engine > $R/test_cuda_engine-both-tc.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-both-tc.log; tail -n2 $R/test_cuda_engine-both-tc.log
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2 3; do
  for v in base simt tc both; do timeout 60 b$v/bin/frigg-bench $A >> $R/variant-$v.jsonl 2>> $R/ab.txt; done
  el "rep $rep"; snap
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "simt", "tc", "both"]:
    for l in open("$R/variant-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
