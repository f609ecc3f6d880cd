#!/bin/bash
# device call 95 (1 x H200): base = 51b6c97 (the tensor-core GEMV's batch-1 staging); working tree on it = new:
# the CUDA-core GEMV's stage_norm with two barriers (every warp works out the scales) and decode attention without
# the park's last barrier before the cluster barrier; norm = new with -DATTN_DEC_ALL_BARRIERS (the stage_norm change
# alone); attn = new with -DGEMV_NORM_3BAR (the attention change alone). Tests of new (gemv, ops, attn_decode quick,
# engine under auto, simt, tc, split); base's tests too (its code has not run on a GPU); then frigg-bench b1,b8
# ctx 512, base / norm / attn / new alternated three times.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r95; mkdir -p $R; snap() { tar czf $OUT/r95-logs.tgz -C /tmp r95; }
for a in base new norm attn; do
  src=new; [ $a = base ] && src=base
  mkdir -p /tmp/$a && tar xJf .devrun/${src}95-src.tar.xz -C /tmp/$a && ln -sf $PWD/.deps /tmp/$a/.deps
  D=""; [ $a = norm ] && D="FRIGG_NVCC_DEFS=-DATTN_DEC_ALL_BARRIERS"; [ $a = attn ] && D="FRIGG_NVCC_DEFS=-DGEMV_NORM_3BAR"
  T="b/bin/frigg-bench"
  [ $a = new ] || [ $a = base ] && T="$T b/tests/test_cuda_gemv b/tests/test_cuda_ops b/tests/test_cuda_engine b/tests/test_cuda_attn_decode"
  ( cd /tmp/$a && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin $D $T > $R/build-$a.log 2>&1; echo "rc $?" >> $R/build-$a.log ) &
done
wait
tail -qn1 $R/build-*.log
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
t() { local name=$1; shift; timeout 150 "$@" > $R/$name.log 2>&1; echo "$name rc $?: $(grep -E 'passed|FAIL' $R/$name.log | tail -3 | tr '\n' ' ')"; }
for a in new base; do
  t test_cuda_gemv-$a /tmp/$a/b/tests/test_cuda_gemv
  t test_cuda_ops-$a /tmp/$a/b/tests/test_cuda_ops
  FRIGG_QUICK=1 t test_cuda_attn_decode-$a /tmp/$a/b/tests/test_cuda_attn_decode
  t test_cuda_engine-$a /tmp/$a/b/tests/test_cuda_engine
done
FRIGG_GEMV_IMPL=simt t test_cuda_engine-simt-new /tmp/new/b/tests/test_cuda_engine
FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc-new /tmp/new/b/tests/test_cuda_engine
FRIGG_ATTN_DECODE=split t test_cuda_engine-split-new /tmp/new/b/tests/test_cuda_engine
snap; el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2 3; do
  for arm in base norm attn new; do
    timeout 90 /tmp/$arm/b/bin/frigg-bench $A >> $R/ab-$arm.jsonl 2>> $R/ab.txt
  done
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "base norm attn new".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:5} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.4f} ms  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
snap; el done
