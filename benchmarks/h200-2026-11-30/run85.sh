#!/bin/bash
# device call 85 (1 x H200): dev/persist tc-norm and tc-swiglu arms.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
R=/tmp/r85; mkdir -p $R; snap() { tar czf $OUT/r85-logs.tgz -C /tmp r85; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=/tmp/b BIN=/tmp/b/bin /tmp/b/dev/persist > $R/build.log 2>&1; echo "rc $?" >> $R/build.log
tail -n1 $R/build.log
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for sl in 12; do timeout 60 /tmp/b/dev/persist --slots $sl --repeats 20 2>&1 | tee -a $R/persist.txt; done
snap
