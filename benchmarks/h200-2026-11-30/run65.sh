#!/bin/bash
# device call 65 (1 x H200): 2ad8e6f (the shipped kernels): where batch 1's step goes outside the layer kernels.
# frigg-bench batch 1 and 8 at ctx 512: the whole step, every layer kernel left out (--skip qkv,attn,o,gu,down:
# embedding, the 8 run ends, lm_head, argmax and the host's round trip remain), and lm_head left out too.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r65; mkdir -p $R; snap() { tar czf $OUT/r65-logs.tgz -C /tmp r65; }
mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -s $PWD/.deps /tmp/base/.deps
( cd /tmp/base && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-base.log 2>&1; echo "base rc $?" >> $R/build-base.log )
tail -qn1 $R/build-*.log; el built
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
B=/tmp/base/b/bin/frigg-bench
for rep in 1 2; do
  timeout 60 $B $A >> $R/floor.jsonl 2>> $R/floor.txt
  timeout 60 $B $A --skip qkv,attn,o,gu,down >> $R/floor.jsonl 2>> $R/floor.txt
  timeout 60 $B $A --skip qkv,attn,o,gu,down,lmhead >> $R/floor.jsonl 2>> $R/floor.txt
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
python3 - <<PY | tee $R/floor-summary.txt
import json
for l in open("$R/floor.jsonl"):
    r = json.loads(l)
    if r.get("bench") == "decode": print(f"b{r['batch']} skip={r['skip']:28} {r['ms_per_step']:.3f} ms/step  kps {r.get('kernels_per_step')}")
PY
snap; el done
