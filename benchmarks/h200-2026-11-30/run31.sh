#!/bin/bash
# device call 31 (1 x H200): compute-sanitizer on the CUDA tests of run31.commit (the shipped kernels, as
# run 27): memcheck on test_cuda_engine and test_cuda_gemv, racecheck on test_cuda_attn_decode and
# test_cuda_gemv (shared-memory hazards), synccheck on test_cuda_engine; in parallel on the one GPU, each
# under a time limit (a limit reached is reported, not counted as clean).
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r31; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r31-logs.tgz -C /tmp r31; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin all > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
el built
compute-sanitizer --version | tail -1
cs() { local name=$1 lim=$2; shift 2; timeout $lim compute-sanitizer --error-exitcode 9 "$@" > $R/$name.log 2>&1; local rc=$?; echo "$name rc $rc (0 clean, 9 errors, 124 time limit): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed' $R/$name.log | tail -3 | tr '\n' ' ')"; }
cs memcheck-engine 420 --tool memcheck $N/tests/test_cuda_engine &
cs memcheck-gemv 300 --tool memcheck $N/tests/test_cuda_gemv &
cs racecheck-attn 420 --tool racecheck $N/tests/test_cuda_attn_decode &
cs racecheck-gemv 300 --tool racecheck $N/tests/test_cuda_gemv &
cs synccheck-engine 420 --tool synccheck $N/tests/test_cuda_engine &
wait
snap; el done
