#!/bin/bash
# device call 99 (2 x H200): run99.commit (18e828a's code, run96.sh's archive). test_cuda_engine with both GPUs
# visible (its two-device check: two models, one per device, each with its own streams).
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r99; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r99-logs.tgz -C /tmp r99; }
tar xJf .devrun/new96-src.tar.xz -C /tmp/new && ln -sf $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/tests/test_cuda_engine > $R/build.log 2>&1; echo "rc $?" >> $R/build.log )
tail -n1 $R/build.log
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
el built
CUDA_VISIBLE_DEVICES=0,1 timeout 150 /tmp/new/b/tests/test_cuda_engine > $R/test_cuda_engine-2gpu.log 2>&1; echo "engine rc $? $(grep -E 'passed|FAIL|SKIP|two-device|device 1' $R/test_cuda_engine-2gpu.log | tail -4 | tr '\n' ' ')"
snap; el done
