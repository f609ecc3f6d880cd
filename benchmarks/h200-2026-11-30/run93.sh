#!/bin/bash
# device call 93 (1 x H200): the tensor-core GEMV's x staging: by chunk at batch 1, by lane fragment (old layout,
# warp_sum's order) for B > 1 (working tree on 122a4a0 = new); the same built with -DTC_STAGE_BY_CHUNK (the chunk
# layout at every B, run 92's with the scale per lane = chunk); 122a4a0 = base. Tests of new (gemv, ops, prefill,
# engine, engine under tc); then frigg-bench b1,b8 ctx 512 + prefill 4096, base / chunk / new alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r93; mkdir -p $R; snap() { tar czf $OUT/r93-logs.tgz -C /tmp r93; }
for a in base new chunk; do
  src=$a; [ $a = chunk ] && src=new
  mkdir -p /tmp/$a && tar xJf .devrun/${src}93-src.tar.xz -C /tmp/$a && ln -sf $PWD/.deps /tmp/$a/.deps
  D=""; [ $a = chunk ] && D="FRIGG_NVCC_DEFS=-DTC_STAGE_BY_CHUNK"
  T="b/bin/frigg-bench"
  [ $a = new ] && T="$T b/tests/test_cuda_gemv b/tests/test_cuda_ops b/tests/test_cuda_engine b/tests/test_cuda_prefill"
  ( cd /tmp/$a && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin $D $T > $R/build-$a.log 2>&1; echo "rc $?" >> $R/build-$a.log ) &
done
wait
tail -qn1 $R/build-*.log
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
t() { local name=$1; shift; timeout 150 "$@" > $R/$name.log 2>&1; echo "$name rc $?: $(grep -E 'passed|FAIL' $R/$name.log | tail -3 | tr '\n' ' ')"; }
t test_cuda_gemv /tmp/new/b/tests/test_cuda_gemv
t test_cuda_ops /tmp/new/b/tests/test_cuda_ops
t test_cuda_prefill /tmp/new/b/tests/test_cuda_prefill
t test_cuda_engine /tmp/new/b/tests/test_cuda_engine
FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc /tmp/new/b/tests/test_cuda_engine
snap; el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 --prefill 4096 decode prefill"
for rep in 1 2; do
  for arm in base chunk new; do
    timeout 90 /tmp/$arm/b/bin/frigg-bench $A >> $R/ab-$arm.jsonl 2>> $R/ab.txt
  done
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "base chunk new".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:5} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.4f} ms  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
        if r.get("bench") == "prefill": print(f"{f:5} prefill {r.get('tokens', r.get('prompt'))} {r['tok_s']:8.1f} tok/s")
PY
snap; el done
