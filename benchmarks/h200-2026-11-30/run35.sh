#!/bin/bash
# device call 35 (2 x H200): run35.commit (fused MLP reading a transposed down_proj) against 7336ac5 (prev),
# and the same commit built with -DFRIGG_NO_FOLD (nofold: the fold's code compiled out of the GEMVs), to find
# run 33-34's 2.5% loss of the split path. GPU 1: test_cuda_mlp, test_cuda_engine, then Nsight Compute on 16
# decode GEMV/MLP kernels of prev, split and fused (each kernel alone). GPU 0: frigg-bench batch 1 ctx 512:
# prev, nofold (split), split, fused, fused-early, alternated twice; the ablation (none, gu+down) under fused.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r35; mkdir -p $R /tmp/new /tmp/prev /tmp/nofold; snap() { tar czf $OUT/r35-logs.tgz -C /tmp r35; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps && tar xJf .devrun/new-src.tar.xz -C /tmp/nofold && ln -s $PWD/.deps /tmp/nofold/.deps && tar xJf .devrun/prev-src.tar.xz -C /tmp/prev && ln -s $PWD/.deps /tmp/prev/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/nofold && make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin FRIGG_NVCC_DEFS=-DFRIGG_NO_FOLD b/bin/frigg-bench > $R/build-nofold.log 2>&1; echo "nofold rc $?" >> $R/build-nofold.log ) &
( cd /tmp/prev && make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log ) &
wait; tail -qn1 $R/build-new.log $R/build-nofold.log $R/build-prev.log
N=/tmp/new/b; P=/tmp/prev/b; F=/tmp/nofold/b
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] && [ -x $F/bin/frigg-bench ] || { tail -30 $R/build-*.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  t() { local name=$1; shift; $C timeout 150 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
  t test_cuda_mlp $N/tests/test_cuda_mlp
  t test_cuda_engine $N/tests/test_cuda_engine
  B="--random-mimir --seed 1 --repeats 3 --steps 4 --batch 1 --ctx 512 decode"
  M="gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size"
  for arm in prev split fused; do
    bin=$N; [ $arm = prev ] && bin=$P; e=fused; [ $arm = split ] && e=split
    FRIGG_MLP=$e $C timeout 100 ncu --kernel-name regex:"gemv|mlp_b1" --launch-skip 400 --launch-count 16 --metrics $M --csv $bin/bin/frigg-bench $B > $R/ncu-$arm.csv 2> $R/ncu-$arm.err; echo "ncu $arm rc $?"
  done
) > $R/gpu1.txt 2>&1 &
G1=$!
export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 decode"
for rep in 1 2; do
  $C timeout 60 $P/bin/frigg-bench $A >> $R/ab-prev.jsonl 2>> $R/ab.txt
  FRIGG_MLP=split $C timeout 60 $F/bin/frigg-bench $A >> $R/ab-nofold.jsonl 2>> $R/ab.txt
  for v in split fused fused-early; do FRIGG_MLP=$v $C timeout 60 $N/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt; done
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["prev", "nofold", "split", "fused", "fused-early"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:12} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.3f} ms/step")
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
wait $G1; cat $R/gpu1.txt
python3 - <<PY 2>&1 | tee $R/ncu-summary.txt
import csv, io, os
for arm in ["prev", "split", "fused"]:
    f = "$R/ncu-" + arm + ".csv"
    if not os.path.exists(f): continue
    txt = open(f).read(); i = txt.find('"ID"')
    if i < 0: print(arm, "no csv"); continue
    by = {}
    for r in csv.DictReader(io.StringIO(txt[i:])):
        by.setdefault((int(r["ID"]), r["Kernel Name"][:50]), {})[r["Metric Name"]] = r["Metric Value"]
    for (id_, name), m in sorted(by.items()):
        print(arm, id_, name, " ".join(f"{k.split('__')[1][:14]}={v}" for k, v in m.items()))
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
