#!/bin/bash
# device call 32 (2 x H200): run32.commit, batch-1 decode's MLP as one kernel (kernels/mlp.cu, FRIGG_MLP).
# GPU 1: the Mimir-size fixture and frigg-parity under the default (fused) and FRIGG_MLP=split, --force-causal,
# the tiny fixtures. GPU 0: test_cuda_mlp, the other CUDA tests, test_cuda_engine under split; frigg-bench batch 1
# ctx 512 under FRIGG_MLP=split / fused / fused-early, alternated three times; the ablation under fused.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r32; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r32-logs.tgz -C /tmp r32; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
( export CUDA_VISIBLE_DEVICES=1; C="taskset -c 16-31"
  $C timeout 150 python3 scripts/oracle/make_fixtures.py --mimir-size --seed 1 --fp32-ref --out /tmp/mimir --device cuda > $R/fixture.log 2>&1; echo "fixture rc $?" >> $R/fixture.log
  $C timeout 60 $N/bin/frigg-parity /tmp/mimir > $R/parity-mimir.jsonl 2> $R/parity-mimir.txt; echo "parity mimir rc $? (0 = pass)" >> $R/parity-mimir.txt
  FRIGG_MLP=split $C timeout 60 $N/bin/frigg-parity /tmp/mimir > $R/parity-mimir-split.jsonl 2> $R/parity-mimir-split.txt; echo "parity mimir FRIGG_MLP=split rc $? (0 = pass)" >> $R/parity-mimir-split.txt
  $C timeout 60 $N/bin/frigg-parity --force-causal /tmp/mimir > $R/parity-mimir-causal.jsonl 2> $R/parity-mimir-causal.txt; echo "parity mimir --force-causal rc $? (must be 1)" >> $R/parity-mimir-causal.txt
  $C timeout 40 $N/bin/frigg-parity --vs-cpu golden/fixtures/tiny-packed golden/fixtures/tiny-split golden/fixtures/tiny-sharded > $R/parity-tiny.jsonl 2> $R/parity-tiny.txt; echo "parity tiny rc $? (0 = pass)" >> $R/parity-tiny.txt
  { echo '$ bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl | tail -1'; $C timeout 30 $N/bin/frigg-eval nll --backend cuda --model golden/default < golden/default/heldout.jsonl 2>&1 | tail -1; } > $R/smoke.txt
) &
G1=$!
export CUDA_VISIBLE_DEVICES=0; C="taskset -c 0-15"
t() { local name=$1; shift; $C timeout 150 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc: $(grep -E 'passed|FAIL' $R/$name.log | tail -2 | tr '\n' ' ')"; }
t test_cuda_mlp $N/tests/test_cuda_mlp
t test_cuda_engine $N/tests/test_cuda_engine
FRIGG_MLP=split t test_cuda_engine-split $N/tests/test_cuda_engine
t test_cuda_gemv $N/tests/test_cuda_gemv
t test_cuda_ops $N/tests/test_cuda_ops
snap; el tests
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 decode"
for rep in 1 2 3; do
  for v in split fused fused-early; do
    FRIGG_MLP=$v $C timeout 60 $N/bin/frigg-bench $A >> $R/ab-mlp-$v.jsonl 2>> $R/ab.txt
  done
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["split", "fused", "fused-early"]:
    for l in open("$R/ab-mlp-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"FRIGG_MLP={f:12} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}")
PY
snap; el ab
for sk in none attn qkv o gu,down lmhead; do
  a=""; [ $sk != none ] && a="--skip $sk"
  $C timeout 60 $N/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1 --ctx 512 $a decode >> $R/ablate.jsonl 2>> $R/ablate.txt
done
python3 -c "
import json
for l in open('$R/ablate.jsonl'):
    r=json.loads(l)
    if r.get('bench')=='decode': print(f\"b{r['batch']} skip {r['skip'] or 'none':8} {r['ms_per_step']:.3f} ms/step {r['tok_s']:.1f} tok/s\")
" | tee $R/ablate-summary.txt
snap; el ablate
wait $G1
tail -3 $R/fixture.log; for f in parity-mimir parity-mimir-split parity-mimir-causal parity-tiny; do tail -3 $R/$f.txt; done; cat $R/smoke.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
