#!/bin/bash
# device call 58 (1 x H200): run58.commit built four ways: base (the default), minb4 (-DFRIGG_DEC_MINB=4: decode
# attention compiled for 4 blocks per SM, <= 128 registers, at every batch size; the default picks 3 at batch 1),
# pre2 (-DFRIGG_TC_PRE2=1: the tensor-core GEMV loads its second tile's residual right after the wait, as it does
# the first's), fgrid (-DFRIGG_TC_FULLGRID=1: the tensor-core GEMV's grid is every resident slot, not the fewest
# blocks with the same rounds). Tests on the three; frigg-bench batch 1 and 8 at ctx 512, alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r58; mkdir -p $R; snap() { tar czf $OUT/r58-logs.tgz -C /tmp r58; }
declare -A DEFS=([base]="" [minb4]="-DFRIGG_DEC_MINB=4" [pre2]="-DFRIGG_TC_PRE2=1" [fgrid]="-DFRIGG_TC_FULLGRID=1")
for v in base minb4 pre2 fgrid; do mkdir -p /tmp/$v && tar xJf .devrun/new-src.tar.xz -C /tmp/$v && ln -s $PWD/.deps /tmp/$v/.deps; done
for v in base minb4 pre2 fgrid; do
  T=b/bin/frigg-bench; [ $v != base ] && T="$T b/tests/test_cuda_gemv b/tests/test_cuda_engine b/tests/test_cuda_attn_decode"
  ( cd /tmp/$v && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin FRIGG_NVCC_DEFS="${DEFS[$v]}" $T > $R/build-$v.log 2>&1; echo "$v rc $?" >> $R/build-$v.log ) &
done
wait; tail -qn1 $R/build-*.log; el built
for v in minb4 pre2 fgrid; do
  for t in test_cuda_gemv test_cuda_engine test_cuda_attn_decode; do FRIGG_QUICK=1 timeout 90 /tmp/$v/b/tests/$t > $R/$t-$v.log 2>&1; echo "rc $?" >> $R/$t-$v.log; echo "$v $(tail -n2 $R/$t-$v.log | head -1)"; done
done
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  for v in base minb4 pre2 fgrid; do timeout 60 /tmp/$v/b/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt; done
  el "rep $rep"
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "minb4", "pre2", "fgrid"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
snap; el done
