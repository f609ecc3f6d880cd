#!/bin/bash
# device call 86 (2 x H200): run86.commit (dc8e858: b63bbc9's engine + dev/persist, dev/chain's persist variant).
# test_cuda_engine with both GPUs visible (its two-device check), then dev/persist and dev/chain on GPU 0.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r86; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r86-logs.tgz -C /tmp r86; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j32 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/tests/test_cuda_engine b/dev/persist b/dev/chain > $R/build.log 2>&1; echo "rc $?" >> $R/build.log )
tail -n1 $R/build.log
N=/tmp/new/b
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
el built
CUDA_VISIBLE_DEVICES=0,1 timeout 200 $N/tests/test_cuda_engine > $R/test_cuda_engine-2gpu.log 2>&1; echo "engine rc $? $(grep -E 'passed|FAIL|SKIP' $R/test_cuda_engine-2gpu.log | tail -4 | tr '\n' ' ')"
snap; el engine
export CUDA_VISIBLE_DEVICES=0
timeout 120 $N/dev/persist --slots 12 --repeats 20 > $R/persist.txt 2>&1; echo "persist rc $?"
grep -v "^check" $R/persist.txt
timeout 120 $N/dev/chain --repeats 5 > $R/chain.txt 2>&1; echo "chain rc $?"; cat $R/chain.txt
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
snap; el done
