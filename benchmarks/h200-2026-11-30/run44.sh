#!/bin/bash
# device call 44 (1 x H200): run43.commit again. Which depth-3 row fails test_cuda_engine (run 43: 8 failed with
# gqkv, gate_up and o_proj at depth 3 for batch >= 2): each row alone, the shipped table as control, and
# compute-sanitizer memcheck and racecheck of the failing configuration.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r44; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r44-logs.tgz -C /tmp r44; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/tests/test_cuda_engine > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
el built
cd /tmp/new
for v in shipped gqkv=s3333333 gate_up=s3333333 o_proj=t3333333 lm_head=sss33333; do
  a=$v; [ $v = shipped ] && a=""
  FRIGG_GEMV_AUTO=$a timeout 120 $N/tests/test_cuda_engine > $R/test_cuda_engine-$v.log 2>&1; echo "rc $?" >> $R/test_cuda_engine-$v.log
  echo "$v: $(grep -c FAIL $R/test_cuda_engine-$v.log) FAIL lines; $(tail -n2 $R/test_cuda_engine-$v.log | head -1)"
done
el rows; snap
F=$(for v in gqkv=s3333333 gate_up=s3333333 o_proj=t3333333; do grep -q FAIL $R/test_cuda_engine-$v.log && echo $v; done | head -1)
echo "sanitizing under $F"
FRIGG_GEMV_AUTO=$F timeout 240 compute-sanitizer --tool memcheck $N/tests/test_cuda_engine > $R/memcheck-engine-d3.log 2>&1; echo "rc $?" >> $R/memcheck-engine-d3.log
tail -n4 $R/memcheck-engine-d3.log
el memcheck; snap
FRIGG_GEMV_AUTO=$F timeout 200 compute-sanitizer --tool racecheck $N/tests/test_cuda_engine > $R/racecheck-engine-d3.log 2>&1; echo "rc $?" >> $R/racecheck-engine-d3.log
tail -n4 $R/racecheck-engine-d3.log
snap; el done
