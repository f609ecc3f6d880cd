#!/bin/bash
# device call 43 (1 x H200): run43.commit. The tensor-core GEMV at depth 3 (three weight tiles in flight per
# warp: at batch 8 gqkv's blocks then hold all their tiles before the wait, gate_up's three of four) through
# FRIGG_GEMV_AUTO rows, batch 8 ctx 512 (batch 1 as a control), alternated three times with the shipped table.
# First: test_cuda_gemv, test_cuda_engine under the depth-3 rows.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r43; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r43-logs.tgz -C /tmp r43; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_gemv b/tests/test_cuda_engine > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
( cd /tmp/new && timeout 120 $N/tests/test_cuda_gemv > $R/test_cuda_gemv.log 2>&1; echo "rc $?" >> $R/test_cuda_gemv.log )
tail -n2 $R/test_cuda_gemv.log
( cd /tmp/new && FRIGG_GEMV_AUTO=gqkv=s3333333,gate_up=s3333333,o_proj=t3333333 timeout 120 $N/tests/test_cuda_engine > $R/test_cuda_engine-d3.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-d3.log )
tail -n2 $R/test_cuda_engine-d3.log
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
declare -A V=([base]="" [gqkv3]="gqkv=s3333333" [gu3]="gate_up=s3333333" [both3]="gqkv=s3333333,gate_up=s3333333")
for rep in 1 2 3; do
  for v in base gqkv3 gu3 both3; do FRIGG_GEMV_AUTO=${V[$v]} timeout 60 $N/bin/frigg-bench $A >> $R/variant-$v.jsonl 2>> $R/ab.txt; done
  el "rep $rep"; snap
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "gqkv3", "gu3", "both3"]:
    for l in open("$R/variant-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
