#!/bin/bash
# device call 61 (1 x H200): f231cec (qkv_attn: batch-1 gqkv + attention fused, one cluster per head) against
# 2ad8e6f (session 8's start). Tests of the new build (the fused kernel against the pair, bit for bit; the
# attention refactor; the engine under auto and simt); then frigg-bench batch 1 and 8 at ctx 512 alternated
# twice: base, new (FRIGG_QKV_ATTN=auto, the default), off (the same binary with FRIGG_QKV_ATTN=off).
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r61; mkdir -p $R; snap() { tar czf $OUT/r61-logs.tgz -C /tmp r61; }
mkdir -p /tmp/new /tmp/base && tar xJf .devrun/new-src.tar.xz -C /tmp/new && tar xJf .devrun/base-src.tar.xz -C /tmp/base
ln -s $PWD/.deps /tmp/new/.deps; ln -s $PWD/.deps /tmp/base/.deps
( cd /tmp/new && make -j10 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_qkv_attn b/tests/test_cuda_attn_decode b/tests/test_cuda_engine b/tests/test_cuda_gemv > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/base && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-base.log 2>&1; echo "base rc $?" >> $R/build-base.log ) &
wait; tail -qn1 $R/build-*.log; el built; snap
N=/tmp/new/b
t() { local name=$1; shift; timeout $1 "${@:2}" > $R/$name.log 2>&1; echo "rc $?" >> $R/$name.log; echo "$name: $(grep -E 'passed|SKIP' $R/$name.log | tail -n1)"; grep -m5 FAIL $R/$name.log; }
t qkv_attn 120 $N/tests/test_cuda_qkv_attn
t attn_decode_q 120 env FRIGG_QUICK=1 $N/tests/test_cuda_attn_decode
t engine_auto 150 $N/tests/test_cuda_engine
t engine_simt 150 env FRIGG_GEMV_IMPL=simt $N/tests/test_cuda_engine
t gemv_q 90 env FRIGG_QUICK=1 $N/tests/test_cuda_gemv
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  timeout 60 /tmp/base/b/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  timeout 60 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
  FRIGG_QKV_ATTN=off timeout 60 $N/bin/frigg-bench $A >> $R/ab-off.jsonl 2>> $R/ab.txt
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "new", "off"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:6} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  kps {r.get('kernels_per_step')} qkv_attn {r.get('qkv_attn')}")
PY
snap; el done
