#!/bin/bash
# device call 41 (1 x H200): run41.commit. dev/chain: µs per kernel boundary for chains of 640 nearly empty
# kernels in one graph: plain stream order, PDL + griddepcontrol.wait (the shipped pattern), PDL + counter spin.
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
R=/tmp/r41; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r41-logs.tgz -C /tmp r41; }
tar xJf .devrun/new-src.tar.xz -C /tmp/new && ln -s $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/dev/chain > $R/build-new.log 2>&1; echo "new rc $?" >> $R/build-new.log )
tail -n1 $R/build-new.log; N=/tmp/new/b
[ -x $N/dev/chain ] || { tail -30 $R/build-new.log; snap; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 120 $N/dev/chain --repeats 7 > $R/dev-chain.txt 2>&1; echo "rc $?" >> $R/dev-chain.txt
timeout 120 $N/dev/chain --repeats 7 --kernels 128 > $R/dev-chain-128.txt 2>&1; echo "rc $?" >> $R/dev-chain-128.txt
cat $R/dev-chain.txt $R/dev-chain-128.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv >> $R/smi.txt 2>&1
snap; el done
