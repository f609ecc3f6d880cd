#!/bin/bash
# device call 26 (2 x H200): run26.commit (tensor-core GEMV cluster split, auto letters 'p'/'q'; the 8-load
# read probe and the roofline's max(read, lm_head GEMV)) against prev = run24.commit. GPU 1: test_cuda_gemv,
# test_cuda_engine (default table, and with the cluster letters for down and o_proj: graph capture of cluster
# launches), dev/gemv --quick for tc-d2/tc-c2/tc-c4/auto. GPU 0: frigg-bench A/B (batch 1 and 8, ctx 512),
# prev, new, and new under FRIGG_GEMV_AUTO variants, alternated twice.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r26; mkdir -p $R /tmp/new /tmp/prev; snap() { tar czf $OUT/r26-logs.tgz -C /tmp r26; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && tar xJf .devrun/prev-src.tar.xz -C /tmp/prev && ln -s $PWD/.deps /tmp/new/.deps && ln -s $PWD/.deps /tmp/prev/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_gemv b/tests/test_cuda_engine b/dev/gemv > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/prev && make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log ) &
wait; tail -n1 $R/build-new.log; tail -n1 $R/build-prev.log
N=/tmp/new/b; P=/tmp/prev/b
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 $R/build-new.log $R/build-prev.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
CL="down=qqqqqqqq,o_proj=pppppppp"
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  t() { local name=$1; shift; $C timeout 150 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
  t test_cuda_gemv $N/tests/test_cuda_gemv
  t test_cuda_engine $N/tests/test_cuda_engine
  FRIGG_GEMV_AUTO=$CL t test_cuda_engine-cluster $N/tests/test_cuda_engine
  $C timeout 200 $N/dev/gemv --quick --only tc-d2,tc-c2,tc-c4,auto > $R/dev-gemv.txt 2>&1; echo "dev gemv rc $?"
) > $R/gpu1.txt 2>&1 &
G1=$!
export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  $C timeout 60 $P/bin/frigg-bench $A >> $R/ab-prev.jsonl 2>> $R/ab.txt
  $C timeout 60 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
  for v in down=qttttttt down=pttttttt down=qqqqqqqq o_proj=pttttttt $CL; do
    FRIGG_GEMV_AUTO=$v $C timeout 60 $N/bin/frigg-bench $A >> $R/variant-env-$(echo $v | tr '=,' '-_').jsonl 2>> $R/ab.txt
  done
  snap
done
el ab
python3 - <<PY | tee $R/ab-summary.txt
import json, glob, os
for f in ["ab-prev", "ab-new"] + sorted(os.path.basename(g)[:-6] for g in glob.glob("$R/variant-env-*.jsonl")):
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:50} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')} read {r.get('read_gb_s')}")
PY
grep roofline_read $R/ab-new.jsonl | head -2
wait $G1; cat $R/gpu1.txt; grep -E "FAIL|down|o_proj" $R/dev-gemv.txt | grep -v "check.*PASS" | tail -30
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
