#!/bin/bash
# device call 13 (1 x H200): the CUDA tests after their helpers moved to tests/cuda_test_util.h (no kernel
# change since run 12), and where the shipped decode step's time goes (frigg-bench --skip, as run 8).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r13; mkdir -p $R; snap() { tar czf $OUT/r13-logs.tgz -C /tmp r13; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-r13 BIN=build-r13/bin build-r13/bin/frigg-bench \
  build-r13/tests/test_cuda_ops build-r13/tests/test_cuda_gemv build-r13/tests/test_cuda_prefill > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for t in test_cuda_ops test_cuda_gemv test_cuda_prefill; do timeout 90 build-r13/tests/$t > $R/$t.log 2>&1; echo "$t rc $?: $(grep -E 'passed|FAIL' $R/$t.log | tail -2 | tr '\n' ' ')"; done
snap; el tests
for sk in none attn qkv o gu down lmhead qkv,attn,o,gu,down; do
  a=""; [ $sk != none ] && a="--skip $sk"
  timeout 60 build-r13/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 $a decode >> $R/ablate.jsonl 2>> $R/ablate.txt
done
python3 -c "
import json
for l in open('$R/ablate.jsonl'):
    r=json.loads(l)
    if r.get('bench')=='decode': print(f\"b{r['batch']} skip {r['skip'] or 'none':22} {r['ms_per_step']:.3f} ms/step {r['tok_s']:.1f} tok/s\")
"
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
