#!/bin/bash
# device call 33 (2 x H200): run33.commit (the fused MLP streaming gate/up in rounds of 3 chunks at 72
# registers) and 7336ac5 (prev: this session's start). GPU 1: test_cuda_mlp, test_cuda_engine (default, and
# FRIGG_GEMV_IMPL=tc). GPU 0: frigg-bench batch 1 ctx 512: prev, new under FRIGG_MLP=split / fused /
# fused-early, alternated three times; then the ablation under the default.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r33; mkdir -p $R /tmp/new /tmp/prev; snap() { tar czf $OUT/r33-logs.tgz -C /tmp r33; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps && tar xJf .devrun/prev-src.tar.xz -C /tmp/prev && ln -s $PWD/.deps /tmp/prev/.deps
( cd /tmp/new && make -j20 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/prev && make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log ) &
wait; tail -n1 $R/build-new.log; tail -n1 $R/build-prev.log
N=/tmp/new/b; P=/tmp/prev/b
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 $R/build-new.log $R/build-prev.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  t() { local name=$1; shift; $C timeout 150 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
  t test_cuda_mlp $N/tests/test_cuda_mlp
  t test_cuda_engine $N/tests/test_cuda_engine
  FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc $N/tests/test_cuda_engine
) > $R/tests.txt 2>&1 &
G1=$!
export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 decode"
for rep in 1 2 3; do
  $C timeout 60 $P/bin/frigg-bench $A >> $R/ab-prev.jsonl 2>> $R/ab.txt
  for v in split fused fused-early; do
    FRIGG_MLP=$v $C timeout 60 $N/bin/frigg-bench $A >> $R/ab-mlp-$v.jsonl 2>> $R/ab.txt
  done
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["ab-prev", "ab-mlp-split", "ab-mlp-fused", "ab-mlp-fused-early"]:
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:20} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}")
PY
snap; el ab
for sk in none gu,down; do
  a=""; [ $sk != none ] && a="--skip $sk"
  $C timeout 60 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 $a decode >> $R/ablate.jsonl 2>> $R/ablate.txt
done
python3 -c "
import json
for l in open('$R/ablate.jsonl'):
    r=json.loads(l)
    if r.get('bench')=='decode': print(f\"b{r['batch']} skip {r['skip'] or 'none':8} {r['ms_per_step']:.3f} ms/step {r['tok_s']:.1f} tok/s\")
" | tee $R/ablate-summary.txt
wait $G1; cat $R/tests.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
