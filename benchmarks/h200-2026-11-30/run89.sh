#!/bin/bash
# device call 89 (1 x H200): sampled decoding, the new sampler (aa010d0) against the old one (aa010d0 with
# b63bbc9's common/sampler.{c,h}: a full sort of the vocabulary per draw), frigg-bench batch 1 ctx 512:
# greedy, --temperature 1, --temperature 0.8 --top-k 40, --temperature 1 --top-p 0.9; arms alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r89; mkdir -p $R; snap() { tar czf $OUT/r89-logs.tgz -C /tmp r89; }
for a in new oldsampler; do
  mkdir -p /tmp/$a && tar xJf .devrun/$( [ $a = new ] && echo new-src || echo oldsampler-src ).tar.xz -C /tmp/$a && ln -sf $PWD/.deps /tmp/$a/.deps
  ( cd /tmp/$a && make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-$a.log 2>&1; echo "rc $?" >> $R/build-$a.log ) &
done
wait
tail -qn1 $R/build-new.log $R/build-oldsampler.log
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" > $R/cpu.txt
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512"
for rep in 1 2; do
  for a in oldsampler new; do
    for S in "" "--temperature 1" "--temperature 0.8 --top-k 40" "--temperature 1 --top-p 0.9"; do
      timeout 120 /tmp/$a/b/bin/frigg-bench $A $S decode >> $R/sample-$a.jsonl 2>> $R/sample.txt
    done
    el "rep $rep $a"
  done
  snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
python3 - <<PY | tee $R/sample-summary.txt
import json
for f in "oldsampler new".split():
    for l in open("$R/sample-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:11} {json.dumps(r['sampling']):50} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.3f} ms/step")
PY
snap; el done
