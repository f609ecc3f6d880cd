#!/bin/bash
# device call 20 (2 x H200): run20.commit = batch-1 simt row pairs with 6 chunks per lane; prev = run 19's commit.
# Built from git archives as run 14. GPU 0: CUDA tests (also FRIGG_GEMV_IMPL=simt: batch invariance across the
# two unrolls). GPU 1: frigg-bench A/B at ctx 512, batch 1 and 8: prev and new, alternated three times.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r20; mkdir -p $R /tmp/new /tmp/prev; snap() { tar czf $OUT/r20-logs.tgz -C /tmp r20; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && tar xJf .devrun/prev-src.tar.xz -C /tmp/prev && ln -s $PWD/.deps /tmp/new/.deps && ln -s $PWD/.deps /tmp/prev/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/prev && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log ) &
wait; tail -n1 $R/build-new.log; tail -n1 $R/build-prev.log
N=/tmp/new/b; P=/tmp/prev/b
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 $R/build-new.log $R/build-prev.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
  arm() { local name=$1; shift; echo "== $name" >> $R/ab.txt; env "$@" $C timeout 60 $N/bin/frigg-bench $A 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$name\",/" >> $R/ab-new.jsonl; }
  for rep in 1 2 3; do
    $C timeout 60 $P/bin/frigg-bench $A 2>> $R/ab.txt | sed 's/^{/{"arm":"prev",/' >> $R/ab-prev.jsonl
    arm new X=1
  done
  python3 - <<PY > $R/ab-summary.txt
import json, collections
d = collections.defaultdict(list)
for f in ("ab-prev", "ab-new"):
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": d[(r["arm"], r["batch"])].append(r["tok_s"])
for k in sorted(d, key=lambda k: (k[1], k[0])): print(f"{k[0]:14} b{k[1]}  " + "  ".join(f"{v:8.1f}" for v in d[k]) + " tok/s")
PY
  cat $R/ab-summary.txt
) &
G1=$!
export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
t() { local name=$1; shift; $C timeout 120 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
t test_cuda_gemv $N/tests/test_cuda_gemv
t test_cuda_engine $N/tests/test_cuda_engine
FRIGG_GEMV_IMPL=simt t test_cuda_gemv-simt $N/tests/test_cuda_gemv
FRIGG_GEMV_IMPL=simt t test_cuda_engine-simt $N/tests/test_cuda_engine
FRIGG_GEMV_IMPL=tc t test_cuda_engine-tc $N/tests/test_cuda_engine
snap; el tests
wait $G1
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
