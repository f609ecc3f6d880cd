#!/bin/bash
# device call 40 (1 x H200): run40.commit. FRIGG_GEMV_PREFETCH (the weights a GEMV block loads after its first
# round asked of L2 in bulk, before or right after the PDL wait) against off, batch 1 and 8 at ctx 512, each
# arm alternated twice; with after-wait/early also at depth 1 for batch>=2 gqkv/gate_up (half the registers).
# First: test_cuda_gemv (every mode the same bits) and test_cuda_engine under each mode.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r40; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r40-logs.tgz -C /tmp r40; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_gemv b/tests/test_cuda_engine > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
( cd /tmp/new && timeout 120 $N/tests/test_cuda_gemv > $R/test_cuda_gemv.log 2>&1; echo "rc $?" >> $R/test_cuda_gemv.log )
tail -n2 $R/test_cuda_gemv.log
for m in off after-wait early; do
  ( cd /tmp/new && FRIGG_GEMV_PREFETCH=$m timeout 120 $N/tests/test_cuda_engine > $R/test_cuda_engine-$m.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-$m.log )
  tail -n2 $R/test_cuda_engine-$m.log
done
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
D1="gqkv=s1111111,gate_up=s1111111"
for rep in 1 2; do
  timeout 60 $N/bin/frigg-bench $A >> $R/variant-off.jsonl 2>> $R/ab.txt
  FRIGG_GEMV_PREFETCH=after-wait timeout 60 $N/bin/frigg-bench $A >> $R/variant-after-wait.jsonl 2>> $R/ab.txt
  FRIGG_GEMV_PREFETCH=early timeout 60 $N/bin/frigg-bench $A >> $R/variant-early.jsonl 2>> $R/ab.txt
  FRIGG_GEMV_PREFETCH=after-wait FRIGG_GEMV_AUTO=$D1 timeout 60 $N/bin/frigg-bench $A >> $R/variant-after-wait-d1.jsonl 2>> $R/ab.txt
  FRIGG_GEMV_PREFETCH=early FRIGG_GEMV_AUTO=$D1 timeout 60 $N/bin/frigg-bench $A >> $R/variant-early-d1.jsonl 2>> $R/ab.txt
  el "rep $rep"; snap
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["off", "after-wait", "early", "after-wait-d1", "early-d1"]:
    for l in open("$R/variant-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:16} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}  pf {r.get('gemv_prefetch')}")
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
