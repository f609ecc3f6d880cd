#!/bin/bash
# device call 74 (1 x H200): dev/persist (persistent GEMV chain with a bulk-copy ring vs the engine's kernel chain)
# and dev/chain with its persist variant. Working tree.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
R=/tmp/r74; mkdir -p $R; snap() { tar czf $OUT/r74-logs.tgz -C /tmp r74; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=/tmp/b BIN=/tmp/b/bin /tmp/b/dev/persist /tmp/b/dev/chain > $R/build.log 2>&1; echo "rc $?" >> $R/build.log
tail -n1 $R/build.log
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
for sl in 12 6 12 3; do timeout 60 /tmp/b/dev/persist --slots $sl --repeats 20 2>&1 | tee -a $R/persist.txt; done
timeout 120 /tmp/b/dev/chain --repeats 5 2>&1 | tee $R/chain.txt
snap
