#!/bin/bash
# device call 36 (1 of 2 H200s): the shipped kernels (7336ac5) under FRIGG_GEMV_AUTO rows that put down_proj,
# o_proj, and at batch 8 gqkv/gate_up, on the tensor-core kernel at depth 1 ('1': half the registers, so
# blocks of the kernels before and after fit beside it) or at most 2 blocks per SM ('2'). Run 35's Nsight
# Compute showed down_proj at batch 1 running 96 blocks of 16 warps x 123 registers: the whole register file.
# frigg-bench batch 1 and 8, ctx 512, each row alternated twice with the shipped table.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r36; mkdir -p $R /tmp/prev; snap() { tar czf $OUT/r36-logs.tgz -C /tmp r36; }
tar xJf .devrun/prev-src.tar.xz -C /tmp/prev && ln -s $PWD/.deps /tmp/prev/.deps
( cd /tmp/prev && make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log )
tail -n1 $R/build-prev.log; P=/tmp/prev/b
[ -x $P/bin/frigg-bench ] || { tail -30 $R/build-prev.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
V="down=1tttttt1 down=2tttttt2 gqkv=stttttt1,gate_up=stttttt1 o_proj=2tttttt2 down=ttttttt1,gate_up=sttttttt"
for rep in 1 2; do
  timeout 60 $P/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  for v in $V; do FRIGG_GEMV_AUTO=$v timeout 60 $P/bin/frigg-bench $A >> $R/ab-env-$(echo $v | tr '=,' '-_').jsonl 2>> $R/ab.txt; done
done
python3 - <<PY | tee $R/ab-summary.txt
import json, glob, os
for f in ["ab-base"] + sorted(os.path.basename(g)[:-6] for g in glob.glob("$R/ab-env-*.jsonl")):
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:50} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}")
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
