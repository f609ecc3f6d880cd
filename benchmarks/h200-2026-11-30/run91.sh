#!/bin/bash
# device call 91 (1 x H200): the tensor-core GEMV's x staging by the whole warp (B chunks per lane, not 8) and
# every tile's epilogue operands loaded ahead (working tree on 122a4a0 = new; new built with
# -DTC_PRELOAD_FIRST_ONLY = first; 122a4a0 = base). Tests of new (gemv, ops, engine, engine under tc); then
# frigg-bench b1,b8 ctx 512 base / first / new / new with gqkv and/or gate_up on tensor cores at batch 1,
# alternated twice; dev/persist (GEMV chains, norm costs) base and new, alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r91; mkdir -p $R; snap() { tar czf $OUT/r91-logs.tgz -C /tmp r91; }
for a in base new first; do
  src=$a; [ $a = first ] && src=new
  mkdir -p /tmp/$a && tar xJf .devrun/${src}91-src.tar.xz -C /tmp/$a && ln -sf $PWD/.deps /tmp/$a/.deps
  D=""; [ $a = first ] && D="FRIGG_NVCC_DEFS=-DTC_PRELOAD_FIRST_ONLY"
  T="b/bin/frigg-bench"; [ $a != first ] && T="$T b/dev/persist"
  [ $a = new ] && T="$T b/tests/test_cuda_gemv b/tests/test_cuda_ops b/tests/test_cuda_engine"
  ( cd /tmp/$a && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin $D $T > $R/build-$a.log 2>&1; echo "rc $?" >> $R/build-$a.log ) &
done
wait
tail -qn1 $R/build-*.log
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
t() { local name=$1; shift; timeout 150 "$@" > $R/$name.log 2>&1; echo "$name rc $?: $(grep -E 'passed|FAIL' $R/$name.log | tail -3 | tr '\n' ' ')"; }
t test_cuda_gemv /tmp/new/b/tests/test_cuda_gemv
t test_cuda_ops /tmp/new/b/tests/test_cuda_ops
t test_cuda_engine /tmp/new/b/tests/test_cuda_engine
FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc /tmp/new/b/tests/test_cuda_engine
snap; el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
declare -A ENV=([base]="" [first]="" [new]="" [qkv]="gqkv=tttttttt" [gu]="gate_up=tttttttt" [both]="gqkv=tttttttt,gate_up=tttttttt")
for rep in 1 2; do
  for arm in base first new qkv gu both; do
    b=$arm; case $arm in qkv|gu|both) b=new;; esac
    echo "== $arm" >> $R/ab.txt
    FRIGG_GEMV_AUTO=${ENV[$arm]} timeout 60 /tmp/$b/b/bin/frigg-bench $A >> $R/ab-$arm.jsonl 2>> $R/ab.txt
  done
  el "rep $rep"; snap
done
for rep in 1 2; do
  for a in base new; do timeout 60 /tmp/$a/b/dev/persist --repeats 20 > $R/persist-$a-$rep.txt 2>&1; done
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "base first new qkv gu both".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.4f} ms  roofline {r.get('roofline_frac')}")
PY
grep -hE "^(chain|eng|tc-)" $R/persist-*.txt | head -0
for f in $R/persist-*.txt; do echo "== $f"; grep -E "^(chain-|eng-|tc-)" $f; done
snap; el done
