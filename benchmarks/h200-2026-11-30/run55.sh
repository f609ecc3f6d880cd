#!/bin/bash
# device call 55 (1 x H200): run55.commit built four ways: base (the default: runs 53-54's two mma chains,
# unrolled tile sum, full simt rounds), sn (-DFRIGG_SN2=1: batch-1 norm staging with a thread's two chunks of x
# in flight at once), e2q (sn + -DFRIGG_E2=1: batch-1 gqkv requests its second round of weights right after
# the wait, before the norm), e2a (sn + -DFRIGG_E2=2: gqkv and gate_up). Tests on sn, e2q, e2a; frigg-bench
# batch 1 and 8 at ctx 512, the arms alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r55; mkdir -p $R; snap() { tar czf $OUT/r55-logs.tgz -C /tmp r55; }
declare -A DEFS=([base]="" [sn]="-DFRIGG_SN2=1" [e2q]="-DFRIGG_SN2=1 -DFRIGG_E2=1" [e2a]="-DFRIGG_SN2=1 -DFRIGG_E2=2")
for v in base sn e2q e2a; do mkdir -p /tmp/$v && tar xJf .devrun/new-src.tar.xz -C /tmp/$v && ln -s $PWD/.deps /tmp/$v/.deps; done
for v in base sn e2q e2a; do
  T=b/bin/frigg-bench; [ $v != base ] && T="$T b/tests/test_cuda_gemv b/tests/test_cuda_engine"
  ( cd /tmp/$v && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin FRIGG_NVCC_DEFS="${DEFS[$v]}" $T > $R/build-$v.log 2>&1; echo "$v rc $?" >> $R/build-$v.log ) &
done
wait; tail -qn1 $R/build-*.log; el built
for v in sn e2q e2a; do
  for t in test_cuda_gemv test_cuda_engine; do timeout 90 /tmp/$v/b/tests/$t > $R/$t-$v.log 2>&1; echo "rc $?" >> $R/$t-$v.log; echo "$v $(tail -n2 $R/$t-$v.log | head -1)"; done
done
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  for v in base sn e2q e2a; do timeout 60 /tmp/$v/b/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt; done
  el "rep $rep"
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "sn", "e2q", "e2a"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
snap; el done
