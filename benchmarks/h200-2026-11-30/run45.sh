#!/bin/bash
# device call 45 (1 x H200): run45.commit. Batch-1 down_proj with its weights in shared memory (auto letter 'm',
# gemv_smem.cu), so its blocks can be resident beside gate_up's and stream while gate_up finishes; that needs
# one shared-memory carve-out for every kernel (FRIGG_SMEM_CARVEOUT) and gate_up's blocks leaving registers
# (FRIGG_GEMV_SIMT_WARPS=8). Arms alternated twice, batch 1 and 8 at ctx 512. First the tests.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r45; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r45-logs.tgz -C /tmp r45; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_gemv b/tests/test_cuda_engine > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/bin/frigg-bench ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
cd /tmp/new
timeout 120 $N/tests/test_cuda_gemv > $R/test_cuda_gemv.log 2>&1; echo "rc $?" >> $R/test_cuda_gemv.log; tail -n2 $R/test_cuda_gemv.log
FRIGG_GEMV_AUTO=down=mttttttt,o_proj=mttttttt FRIGG_SMEM_CARVEOUT=50 FRIGG_GEMV_SIMT_WARPS=8 timeout 120 $N/tests/test_cuda_engine > $R/test_cuda_engine-m.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-m.log; tail -n2 $R/test_cuda_engine-m.log
grep FAIL $R/test_cuda_gemv.log $R/test_cuda_engine-m.log | head -5
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
arm() { local name=$1; shift; env "$@" timeout 60 $N/bin/frigg-bench $A >> $R/variant-$name.jsonl 2>> $R/ab.txt; }
for rep in 1 2; do
  arm base X=1
  arm co50 FRIGG_SMEM_CARVEOUT=50
  arm m FRIGG_GEMV_AUTO=down=mttttttt
  arm co50-m FRIGG_SMEM_CARVEOUT=50 FRIGG_GEMV_AUTO=down=mttttttt
  arm co50-m-w8 FRIGG_SMEM_CARVEOUT=50 FRIGG_GEMV_AUTO=down=mttttttt FRIGG_GEMV_SIMT_WARPS=8
  arm co75-m-w8 FRIGG_SMEM_CARVEOUT=75 FRIGG_GEMV_AUTO=down=mttttttt FRIGG_GEMV_SIMT_WARPS=8
  el "rep $rep"; snap
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "co50", "m", "co50-m", "co50-m-w8", "co75-m-w8"]:
    for l in open("$R/variant-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:10} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
