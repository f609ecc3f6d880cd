#!/bin/bash
# device call 47 (1 x H200): scratch branch scratch-d3 (773e692 + a test): is the depth-3 tensor-core kernel
# itself wrong for the plain epilogues (test_cuda_gemv at every depth and grid cap, three times each), or does
# test_cuda_engine's graph-vs-eager failure under o_proj rows at depth 3 come from the pipeline (repeated)?
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r47; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r47-logs.tgz -C /tmp r47; }
tar xJf .devrun/d3-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
cd /tmp/new
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/tests/test_cuda_gemv b/tests/test_cuda_engine > $R/build.log 2>&1; echo "rc $?" | tee -a $R/build.log
el built
timeout 150 b/tests/test_cuda_gemv > $R/test_cuda_gemv-d3.log 2>&1; echo "rc $?" >> $R/test_cuda_gemv-d3.log
tail -n2 $R/test_cuda_gemv-d3.log; grep SCRATCH $R/test_cuda_gemv-d3.log | head -8
el gemv; snap
for i in 1 2; do
  FRIGG_GEMV_AUTO=o_proj=t3333333 timeout 100 b/tests/test_cuda_engine > $R/test_cuda_engine-o3-$i.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-o3-$i.log
  echo "o3 $i: $(grep -c FAIL $R/test_cuda_engine-o3-$i.log) FAIL"
done
FRIGG_GEMV_AUTO=o_proj=33333333 timeout 100 b/tests/test_cuda_engine > $R/test_cuda_engine-o3-all.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-o3-all.log
echo "o3 all batch sizes: $(grep -c FAIL $R/test_cuda_engine-o3-all.log) FAIL"
snap; el done
