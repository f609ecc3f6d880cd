#!/bin/bash
# device call 83 (1 x H200): dev/gemv --quick (simt, tc, auto) per shape with the engine's epilogues.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
R=/tmp/r83; mkdir -p $R; snap() { tar czf $OUT/r83-logs.tgz -C /tmp r83; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=/tmp/b BIN=/tmp/b/bin /tmp/b/dev/gemv > $R/build.log 2>&1; echo "rc $?" >> $R/build.log
tail -n1 $R/build.log
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 300 /tmp/b/dev/gemv --quick --only simt,tc,auto > $R/dev-gemv.txt 2>&1; echo "gemv rc $?"
grep -A14 "^shape" $R/dev-gemv.txt
snap
