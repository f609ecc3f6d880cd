#!/bin/bash
# device call 22 (1 x H200): run22.commit built twice from its git archive: as shipped (new, 6 chunks per lane
# for batch-1 row pairs) and with FRIGG_NVCC_DEFS=-DGEMV_SHORT_UNROLL=4 (u4: two rounds of 4 chunks, 64
# registers, 8 blocks per SM). frigg-bench A/B at ctx 512, batch 1 and 8, alternated three times; test_cuda_gemv
# of u4 (batch invariance across unrolls).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r22; mkdir -p $R /tmp/new /tmp/u4; snap() { tar czf $OUT/r22-logs.tgz -C /tmp r22; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && tar xJf .devrun/new-src.tar.xz -C /tmp/u4 && ln -s $PWD/.deps /tmp/new/.deps && ln -s $PWD/.deps /tmp/u4/.deps
( cd /tmp/new && make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log ) &
( cd /tmp/u4 && make -j8 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin FRIGG_NVCC_DEFS=-DGEMV_SHORT_UNROLL=4 b/bin/frigg-bench b/tests/test_cuda_gemv > $R/build-u4.log 2>&1; echo "u4 rc $?" >> $R/build-u4.log ) &
wait; tail -n1 $R/build-new.log; tail -n1 $R/build-u4.log
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1; cat $R/smi.txt
timeout 120 /tmp/u4/b/tests/test_cuda_gemv > $R/test_cuda_gemv-u4.log 2>&1; echo "test_cuda_gemv u4 rc $?: $(tail -1 $R/test_cuda_gemv-u4.log)"
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2 3; do
  for arm in new u4; do timeout 60 /tmp/$arm/b/bin/frigg-bench $A 2>> $R/ab.txt | sed "s/^{/{\"arm\":\"$arm\",/" >> $R/ab-$arm.jsonl; done
done
python3 - <<PY | tee $R/ab-summary.txt
import json, collections
d = collections.defaultdict(list)
for f in ("ab-new", "ab-u4"):
    for l in open("$R/" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": d[(r["arm"], r["batch"])].append(r["tok_s"])
for k in sorted(d, key=lambda k: (k[1], k[0])): print(f"{k[0]:6} b{k[1]}  " + "  ".join(f"{v:8.1f}" for v in d[k]) + " tok/s")
PY
snap; el done
