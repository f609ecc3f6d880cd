#!/bin/bash
# device call 8 (2 x H200): (a) where the decode step's time goes: frigg-bench --skip ablations at batch 1
# and 8, context 512, on GPU 0; (b) meanwhile on GPU 1, the Mimir-size HF references with the LeCun init
# (as runs 2-6) and with the residual-scaled init, each with HF float32 beside bf16 (--fp32-ref), then
# frigg-parity on both (and --force-causal on the scaled one). Binaries built on the dev host (commit in
# run8.commit), carried in .devrun/r8.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
R=$OUT; BIN=.devrun/r8
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
$BIN/frigg-bench --help > /dev/null || { echo "carried frigg-bench does not start"; ldd $BIN/frigg-bench; exit 1; }
( export CUDA_VISIBLE_DEVICES=1
  for init in scaled lecun; do
    taskset -c 16-31 timeout 200 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --init $init --fp32-ref \
      --out /tmp/mimir-$init --device cuda > $R/fixture-$init.log 2>&1; echo "fixture $init rc $?" >> $R/fixture-$init.log
    taskset -c 16-31 timeout 90 $BIN/frigg-parity /tmp/mimir-$init > $R/parity-$init.jsonl 2> $R/parity-$init.txt; echo "parity $init rc $?" >> $R/parity-$init.txt
  done
  taskset -c 16-31 timeout 90 $BIN/frigg-parity --force-causal /tmp/mimir-scaled > $R/parity-scaled-causal.jsonl 2> $R/parity-scaled-causal.txt; echo "parity scaled --force-causal rc $? (must be 1)" >> $R/parity-scaled-causal.txt
  cp /tmp/mimir-scaled/reference.json $R/reference-scaled.json 2>/dev/null
) &
FIX=$!
export CUDA_VISIBLE_DEVICES=0
for sk in none attn qkv o gu down lmhead qkv,attn,o,gu,down; do
  a=""; [ $sk != none ] && a="--skip $sk"
  taskset -c 0-15 timeout 60 $BIN/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 $a decode >> $R/ablate.jsonl 2>> $R/ablate.txt
  echo "skip $sk rc $?"
done
python3 -c "
import json,sys
for l in open('$R/ablate.jsonl'):
    r=json.loads(l)
    if r.get('bench')=='decode': print(f\"b{r['batch']} skip {r['skip'] or 'none':22} {r['ms_per_step']:.3f} ms/step {r['tok_s']:.1f} tok/s\")
"
el ablate
wait $FIX
for f in fixture-scaled fixture-lecun; do tail -12 $R/$f.log; done
for f in parity-scaled parity-lecun parity-scaled-causal; do tail -4 $R/$f.txt; done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
el done
