#!/bin/bash
# device call 82 (1 x H200): the batch-1 auto table again (working tree = b63bbc9's code + dev/persist):
# FRIGG_GEMV_AUTO with gqkv and/or gate_up on tensor cores at batch 1, alternated twice with the default.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
R=/tmp/r82; mkdir -p $R; snap() { tar czf $OUT/r82-logs.tgz -C /tmp r82; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=/tmp/b BIN=/tmp/b/bin /tmp/b/bin/frigg-bench > $R/build.log 2>&1; echo "rc $?" >> $R/build.log
tail -n1 $R/build.log
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 decode"
declare -A ENV=([base]="" [qkv]="gqkv=tttttttt" [gu]="gate_up=tttttttt" [both]="gqkv=tttttttt,gate_up=tttttttt")
for rep in 1 2; do
  for arm in base qkv gu both; do
    echo "== $arm" >> $R/ab.txt
    FRIGG_GEMV_AUTO=${ENV[$arm]} timeout 60 /tmp/b/bin/frigg-bench $A >> $R/ab-$arm.jsonl 2>> $R/ab.txt
  done
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in "base qkv gu both".split():
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:8} b{r['batch']} {r['tok_s']:8.1f} tok/s  {r['ms_per_step']:.4f} ms  roofline {r.get('roofline_frac')}")
PY
snap
