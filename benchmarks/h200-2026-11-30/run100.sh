#!/bin/bash
# device call 100 (1 x H200): run100.commit (e4c48e4: topk.cu's two bin walks as one helper). test_cuda_ops (the device
# top-k against frigg_topk) and test_cuda_engine (decode_topk against decode's logits).
export PATH=/usr/local/cuda/bin:$PATH FRIGG_ROOT=$PWD CUDA_VISIBLE_DEVICES=0
R=/tmp/r100; mkdir -p $R /tmp/new; snap() { tar czf $OUT/r100-logs.tgz -C /tmp r100; }
tar xJf .devrun/new100-src.tar.xz -C /tmp/new && ln -sf $PWD/.deps /tmp/new/.deps
( cd /tmp/new && make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/tests/test_cuda_ops b/tests/test_cuda_engine > $R/build.log 2>&1; echo "rc $?" >> $R/build.log )
tail -n1 $R/build.log
t() { local name=$1; shift; timeout 60 "$@" > $R/$name.log 2>&1; echo "$name rc $?: $(grep -E 'passed|FAIL' $R/$name.log | tail -3 | tr '\n' ' ')"; }
t test_cuda_ops /tmp/new/b/tests/test_cuda_ops
t test_cuda_engine /tmp/new/b/tests/test_cuda_engine
snap
