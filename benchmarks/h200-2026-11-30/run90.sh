#!/bin/bash
# device call 90 (1 x H200): run90.commit (the device top-k). test_cuda_ops and test_cuda_engine; then
# frigg-bench batch 1 ctx 512, greedy and --temperature 0.8 --top-k 40, prev (aa010d0: the logits to the host)
# against topk (this commit: the 40 largest on the device), alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r90; mkdir -p $R; snap() { tar czf $OUT/r90-logs.tgz -C /tmp r90; }
for a in topk prev; do
  mkdir -p /tmp/$a && tar xJf .devrun/$( [ $a = topk ] && echo topk-src || echo new-src ).tar.xz -C /tmp/$a && ln -sf $PWD/.deps /tmp/$a/.deps
  T=""; [ $a = topk ] && T="b/tests/test_cuda_ops b/tests/test_cuda_engine"
  ( cd /tmp/$a && make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench $T > $R/build-$a.log 2>&1; echo "rc $?" >> $R/build-$a.log ) &
done
wait
tail -qn1 $R/build-topk.log $R/build-prev.log
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
t() { local name=$1; shift; timeout 150 "$@" > $R/$name.log 2>&1; echo "$name rc $?: $(grep -E 'passed|FAIL' $R/$name.log | tail -4 | tr '\n' ' ')"; }
t test_cuda_ops /tmp/topk/b/tests/test_cuda_ops
t test_cuda_engine /tmp/topk/b/tests/test_cuda_engine
snap; el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512"
for rep in 1 2; do
  for a in prev topk; do
    for S in "" "--temperature 0.8 --top-k 40"; do
      timeout 60 /tmp/$a/b/bin/frigg-bench $A $S decode >> $R/sample-$a.jsonl 2>> $R/sample.txt
    done
  done
  el "rep $rep"; snap
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
python3 - <<PY | tee $R/sample-summary.txt
import json
for f in "prev topk".split():
    for l in open("$R/sample-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:5} {json.dumps(r['sampling']):75} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.3f} ms/step")
PY
snap; el done
