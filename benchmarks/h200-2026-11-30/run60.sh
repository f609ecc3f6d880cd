#!/bin/bash
# device call 60 (1 x H200): run60.commit (the shipped kernels): batch-1 rows of FRIGG_GEMV_AUTO's table again,
# now that the GEMVs changed (session 7): down or o_proj on CUDA cores, gqkv or gate_up on tensor cores.
# frigg-bench batch 1 at ctx 512, the settings alternated twice.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r60; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r60-logs.tgz -C /tmp r60; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b; cd /tmp/new; el built
declare -A AUTO=([base]="" [down_s]="down=sttttttt" [o_s]="o_proj=sttttttt" [gqkv_t]="gqkv=tttttttt" [gu_t]="gate_up=tttttttt")
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 decode"
for rep in 1 2; do
  for v in base down_s o_s gqkv_t gu_t; do FRIGG_GEMV_AUTO="${AUTO[$v]}" timeout 40 $N/bin/frigg-bench $A >> $R/ab-$v.jsonl 2>> $R/ab.txt; done
  el "rep $rep"
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "down_s", "o_s", "gqkv_t", "gu_t"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:7} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
snap; el done
