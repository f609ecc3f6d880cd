#!/bin/bash
# device call 28 (1 x H200): run28.commit, the batch-1 row-pair GEMV with its weights copied to shared memory
# before the wait (auto letter 'a'). test_cuda_gemv, test_cuda_engine with the 'a' rows; frigg-bench batch 1
# (and 8, unaffected) at ctx 512 under the shipped table and under FRIGG_GEMV_AUTO 'a' rows, alternated twice.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r28; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r28-logs.tgz -C /tmp r28; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
t() { local name=$1; shift; timeout 150 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
t test_cuda_gemv $N/tests/test_cuda_gemv
FRIGG_GEMV_AUTO=gqkv=attttttt,gate_up=attttttt t test_cuda_engine-a $N/tests/test_cuda_engine
snap; el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  timeout 60 $N/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  for v in gqkv=attttttt gate_up=attttttt gqkv=attttttt,gate_up=attttttt; do
    FRIGG_GEMV_AUTO=$v timeout 60 $N/bin/frigg-bench $A >> $R/ab-env-$(echo $v | tr '=,' '-_').jsonl 2>> $R/ab.txt
  done
done
el ab
python3 - <<PY | tee $R/ab-summary.txt
import json, glob, os
for f in ["ab-base"] + sorted(os.path.basename(g)[:-6] for g in glob.glob("$R/ab-env-*.jsonl")):
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:50} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}")
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
