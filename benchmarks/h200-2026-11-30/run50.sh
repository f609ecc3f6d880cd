#!/bin/bash
# device call 50 (1 x H200): ld_act as ld.global.ca (run50.commit) against prev = ddd4122 (.nc through const
# __restrict__), and the run-47/48 repro (scratch: o_proj rows at tensor-core depth 3) with its x fragment
# through .ca: does the L1-cached coherent load also read fresh x after the PDL wait?
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r50; mkdir -p $R; snap() { tar czf $OUT/r50-logs.tgz -C /tmp r50; }
for v in new prev d3ca; do mkdir -p /tmp/$v && tar xJf .devrun/$v-src.tar.xz -C /tmp/$v && ln -s $PWD/.deps /tmp/$v/.deps; done
( cd /tmp/prev && make -j5 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > $R/build-prev.log 2>&1; echo "prev rc $?" >> $R/build-prev.log ) &
( cd /tmp/d3ca && make -j5 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/tests/test_cuda_engine > $R/build-d3ca.log 2>&1; echo "d3ca rc $?" >> $R/build-d3ca.log ) &
( cd /tmp/new && make -j6 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench b/tests/test_cuda_gemv b/tests/test_cuda_engine > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
wait; tail -qn1 $R/build-*.log; el built
cd /tmp/d3ca; FRIGG_GEMV_AUTO=o_proj=33333333 timeout 60 b/tests/test_cuda_engine > $R/test_cuda_engine-d3ca.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-d3ca.log
echo "d3ca repro: $(grep -c FAIL $R/test_cuda_engine-d3ca.log) FAIL; $(grep passed $R/test_cuda_engine-d3ca.log | tail -1)"
cd /tmp/new; N=/tmp/new/b; P=/tmp/prev/b
timeout 60 $N/tests/test_cuda_gemv > $R/test_cuda_gemv.log 2>&1; echo "rc $?" >> $R/test_cuda_gemv.log; tail -n2 $R/test_cuda_gemv.log | head -1
timeout 60 $N/tests/test_cuda_engine > $R/test_cuda_engine.log 2>&1; echo "rc $?" >> $R/test_cuda_engine.log; tail -n2 $R/test_cuda_engine.log | head -1
el tested; snap
A="--random-mimir --seed 1 --repeats 3 --steps 32 --batch 1,8 --ctx 512 decode"
for rep in 1 2; do
  timeout 60 $P/bin/frigg-bench $A >> $R/ab-base.jsonl 2>> $R/ab.txt
  timeout 60 $N/bin/frigg-bench $A >> $R/ab-new.jsonl 2>> $R/ab.txt
done
python3 - <<PY | tee $R/ab-summary.txt
import json
for f in ["base", "new"]:
    for l in open("$R/ab-" + f + ".jsonl"):
        r = json.loads(l)
        if r.get("bench") == "decode": print(f"{f:5} b{r['batch']} {r['tok_s']:8.1f} tok/s  roofline {r.get('roofline_frac')}  read {r.get('read_gb_s')}")
PY
snap; el done
