#!/bin/bash
# device call 39 (1 x H200): run39.commit (the shipped kernels, as run 27). Decode attention's merge mode and
# splits per block under FRIGG_ATTN_DECODE, against the default, batch 1 and 8 at ctx 512 (at batch 8 the
# attention takes 9.4 µs per layer step against the 2.8 its keys and values take to read: run 27's ablation),
# each alternated twice with the default.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r39; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r39-logs.tgz -C /tmp r39; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
V="split:1 split:2 split:4 split:8 cluster cluster:2"
for rep in 1 2; do
  timeout 60 $N/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  for v in $V; do FRIGG_ATTN_DECODE=$v timeout 60 $N/bin/frigg-bench $A >> $R/ab-attn-$(echo $v | tr ':' '-').jsonl 2>> $R/ab.txt; done
done
python3 - <<PY | tee $R/ab-summary.txt
import json, glob, os
for f in ["ab-base"] + sorted(os.path.basename(g)[:-6] for g in glob.glob("$R/ab-attn-*.jsonl")):
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:24} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  attn {r.get('attn_decode')}")
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
