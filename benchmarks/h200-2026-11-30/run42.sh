#!/bin/bash
# device call 42 (1 x H200): run42.commit. FRIGG_GEMV_SIMT_WARPS=4 (the default), 8, 16: the batch-1 gqkv and
# gate_up kernels in blocks of 4, 8 or 16 warps (grids of 768/1024, 384/512, 192/256 blocks), batch 1 ctx 512,
# alternated three times. First: test_cuda_gemv, and test_cuda_engine under each count.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r42; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r42-logs.tgz -C /tmp r42; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_gemv b/tests/test_cuda_engine > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
( cd /tmp/new && timeout 120 $N/tests/test_cuda_gemv > $R/test_cuda_gemv.log 2>&1; echo "rc $?" >> $R/test_cuda_gemv.log )
tail -n2 $R/test_cuda_gemv.log
for w in 8 16; do
  ( cd /tmp/new && FRIGG_GEMV_SIMT_WARPS=$w timeout 120 $N/tests/test_cuda_engine > $R/test_cuda_engine-w$w.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-w$w.log )
  tail -n2 $R/test_cuda_engine-w$w.log
done
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 decode"
for rep in 1 2 3; do
  for w in 4 8 16; do FRIGG_GEMV_SIMT_WARPS=$w timeout 60 $N/bin/frigg-bench $A >> $R/variant-w$w.jsonl 2>> $R/ab.txt; done
  el "rep $rep"; snap
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["w4", "w8", "w16"]:
    for l in open("$R/variant-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}  warps {r.get('simt_warps')}")
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
