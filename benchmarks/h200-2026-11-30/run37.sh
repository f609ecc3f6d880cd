#!/bin/bash
# device call 37 (2 x H200): run37.commit (the shipped kernels, as run 27). GPU 0: compute-sanitizer racecheck
# on test_cuda_attn_decode with FRIGG_QUICK=1 (Mimir's 12 heads of 128, default merge modes: run 31's whole
# test did not finish in 420 s), then memcheck on the same. GPU 1: test_cuda_prefill under racecheck (limit
# reported, not counted clean), and dev/vram (random data, then --memset) beside frigg-bench vram, to find why
# frigg-bench's read probe reads less than the same kernel in dev/vram.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r37; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r37-logs.tgz -C /tmp r37; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/tests/test_cuda_attn_decode ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
compute-sanitizer --version | tail -1
cs() { local name=$1 lim=$2; shift 2; timeout $lim compute-sanitizer --error-exitcode 9 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc (0 clean, 9 errors, 124 time limit): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed' $R/$name.log | tail -3 | tr '\n' ' ')"; }
( export CUDA_VISIBLE_DEVICES=0 FRIGG_QUICK=1
  cs racecheck-attn-quick 330 --tool racecheck $N/tests/test_cuda_attn_decode
  cs memcheck-attn-quick 150 --tool memcheck $N/tests/test_cuda_attn_decode ) > $R/gpu0.txt 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  cs racecheck-prefill 300 --tool racecheck $N/tests/test_cuda_prefill
  for rep in 1 2; do
    timeout 60 $N/dev/vram --repeats 5 > $R/vram-random-$rep.txt 2>&1
    timeout 60 $N/dev/vram --repeats 5 --memset > $R/vram-memset-$rep.txt 2>&1
    timeout 60 $N/bin/frigg-bench --repeats 5 vram > $R/bench-vram-$rep.jsonl 2> $R/bench-vram-$rep.txt
  done ) > $R/gpu1.txt 2>&1 &
wait; cat $R/gpu0.txt $R/gpu1.txt
for f in $R/vram-*.txt; do echo "== $f"; grep -iE "shipped|strideU<8>|memcpy|best" $f | head -6; done
for f in $R/bench-vram-*.jsonl; do echo "== $f"; cut -c1-300 $f; done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
