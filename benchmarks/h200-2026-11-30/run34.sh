#!/bin/bash
# device call 34 (2 x H200): run34.commit against 7336ac5 (prev). Where the fused MLP's time goes, and why the
# split path measured 3% slower than prev in run 33. GPU 0: frigg-bench batch 1 ctx 512: prev, new split, new
# fused, FRIGG_MLP_DIAG=2 (no accumulator adds) and 4 (no down_proj), alternated twice. GPU 1: Nsight Compute
# (if present) on 12 decode GEMV/MLP kernels of prev, new split and new fused (each kernel alone: no PDL overlap).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r34; mkdir -p $R /tmp/new /tmp/prev; snap() { tar czf $OUT/r34-logs.tgz -C /tmp r34; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps && tar xJf .devrun/prev-src.tar.xz -C /tmp/prev && ln -s $PWD/.deps /tmp/prev/.deps
( cd /tmp/new && make -j20 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/prev && make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log ) &
wait; tail -n1 $R/build-new.log; tail -n1 $R/build-prev.log
N=/tmp/new/b; P=/tmp/prev/b
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 $R/build-new.log $R/build-prev.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"
  if [ -n "$NCU" ]; then
    B="--random-mimir --seed 1 --repeats 1 --steps 4 --batch 1 --ctx 512 decode"
    M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size"
    for arm in prev split fused; do
      bin=$N; [ $arm = prev ] && bin=$P; e=fused; [ $arm = split ] && e=split
      FRIGG_MLP=$e $C timeout 120 $NCU --kernel-name regex:"gemv|mlp_b1" --launch-skip 400 --launch-count 16 --metrics $M --csv $bin/bin/frigg-bench $B > $R/ncu-$arm.csv 2> $R/ncu-$arm.err; echo "ncu $arm rc $?"
    done
  fi
) > $R/ncu.txt 2>&1 &
G1=$!
export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 decode"
for rep in 1 2; do
  $C timeout 60 $P/bin/frigg-bench $A >> $R/ab-prev.jsonl 2>> $R/ab.txt
  for v in split fused diag2 diag4; do
    case $v in diag*) FRIGG_MLP_DIAG=${v#diag} $C timeout 60 $N/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt;;
      *) FRIGG_MLP=$v $C timeout 60 $N/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt;; esac
  done
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["prev", "split", "fused", "diag2", "diag4"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:10} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.3f} ms/step")
PY
snap; el ab
wait $G1; cat $R/ncu.txt
python3 - <<PY 2>&1 | tee $R/ncu-summary.txt
import csv, io, os
for arm in ["prev", "split", "fused"]:
    f = "$R/ncu-" + arm + ".csv"
    if not os.path.exists(f): continue
    txt = open(f).read(); i = txt.find('"ID"')
    if i < 0: print(arm, "no csv"); continue
    rows = list(csv.DictReader(io.StringIO(txt[i:])))
    by = {}
    for r in rows:
        k = (r["ID"], r["Kernel Name"][:60]); by.setdefault(k, {})[r["Metric Name"]] = r["Metric Value"]
    for (id_, name), m in by.items():
        print(arm, id_, name, " ".join(f"{k.split('__')[1][:22]}={v}" for k, v in m.items()))
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
