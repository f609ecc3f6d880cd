#!/bin/bash
# device call 98 (1 x H200): run98.commit (18e828a's kernels): compute-sanitizer racecheck on test_cuda_gemv (the
# tensor-core GEMV's new x staging) and on test_cuda_attn_decode with FRIGG_QUICK=1 (the barrier left out), and
# synccheck on test_cuda_engine, the three at once on the one GPU, each under a time limit.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r98; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r98-logs.tgz -C /tmp r98; }
tar xJf .devrun/new96-src.tar.xz -C /tmp/new && ln -sf $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/tests/test_cuda_gemv b/tests/test_cuda_attn_decode b/tests/test_cuda_engine > $R/build.log 2>&1; echo "rc $?" >> $R/build.log )
tail -n1 $R/build.log; el built
compute-sanitizer --version | tail -1 > $R/version.txt
cs() { local name=$1 lim=$2; shift 2; timeout $lim compute-sanitizer --error-exitcode 9 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc (0 clean, 9 errors, 124 time limit): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed' $R/$name.log | tail -3 | tr '\n' ' ')"; }
N=/tmp/new/b/tests
cs racecheck-gemv 240 --tool racecheck $N/test_cuda_gemv &
FRIGG_QUICK=1 cs racecheck-attn-quick 240 --tool racecheck $N/test_cuda_attn_decode &
cs synccheck-engine 240 --tool synccheck $N/test_cuda_engine &
wait
snap; el done
