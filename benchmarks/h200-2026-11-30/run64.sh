#!/bin/bash
# device call 64 (1 x H200): run64.commit (decode attention asks L2 for the next kernels' weights after its wait:
# FRIGG_L2_PREFETCH MB of o_proj then gate_up's first rows) against 2ad8e6f (base). Quick tests with the hint on;
# then frigg-bench batch 1 and 8 at ctx 512, alternated twice: base, and the new build at 0, 5, 8, 12, 16, 24 MB.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r64; mkdir -p $R; snap() { tar czf $OUT/r64-logs.tgz -C /tmp r64; }
mkdir -p /tmp/new /tmp/base && tar xJf .devrun/new-src.tar.xz -C /tmp/new && tar xJf .devrun/base-src.tar.xz -C /tmp/base
ln -s $PWD/.deps /tmp/new/.deps; ln -s $PWD/.deps /tmp/base/.deps
( cd /tmp/new && make -j10 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_attn_decode b/tests/test_cuda_engine > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/base && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-base.log 2>&1; echo "base rc $?" >> $R/build-base.log ) &
wait; tail -qn1 $R/build-*.log; el built; snap
N=/tmp/new/b
t() { local name=$1; shift; timeout $1 "${@:2}" > $R/$name.log 2>&1; echo "rc $?" >> $R/$name.log; echo "$name: $(grep -E 'passed|SKIP' $R/$name.log | tail -n1)"; grep -m5 FAIL $R/$name.log; }
t attn_decode_q 120 env FRIGG_QUICK=1 $N/tests/test_cuda_attn_decode
t engine_l2 150 env FRIGG_L2_PREFETCH=12 $N/tests/test_cuda_engine
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  timeout 60 /tmp/base/b/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  for mb in 0 5 8 12 16 24; do FRIGG_L2_PREFETCH=$mb timeout 60 $N/bin/frigg-bench $A >> $R/ab-l2_$mb.jsonl 2>> $R/ab.txt; done
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "base l2_0 l2_5 l2_8 l2_12 l2_16 l2_24".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.3f} ms  roofline {r.get('roofline_frac')}")
PY
snap; el done
