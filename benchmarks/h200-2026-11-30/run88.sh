#!/bin/bash
# device call 88 (1 x H200): run88.commit (2cd8554: the dev tools' shared header and persist's one producer):
# dev/persist (checks and timings) and dev/chain, to re-check the refactor.
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
R=/tmp/r88; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r88-logs.tgz -C /tmp r88; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/dev/persist b/dev/chain > $R/build.log 2>&1; echo "rc $?" >> $R/build.log )
tail -n1 $R/build.log
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 120 /tmp/new/b/dev/persist --slots 12 --repeats 20 > $R/persist.txt 2>&1; echo "persist rc $?"
grep -c PASS $R/persist.txt; grep FAIL $R/persist.txt; grep -A13 "^arm" $R/persist.txt
timeout 120 /tmp/new/b/dev/chain --repeats 5 > $R/chain.txt 2>&1; echo "chain rc $?"; grep -E "^(grid|persist) +132" $R/chain.txt
snap
