#!/bin/bash
# One H200: frigg-bench decode at batch 64, ctx 512 on --random-mimir (the README decode table's configuration),
# twice, at the tree of the commit that adds this script (b64.jsonl). Run on the GPU host with .deps carried.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
mkdir -p $OUT
make -j14 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
for k in 1 2; do
  timeout 60 build-gpu/bin/frigg-bench --random-mimir --seed 1 --repeats 3 --steps 32 --batch 64 --ctx 512 decode >> $OUT/b64.jsonl 2>> $OUT/b64.txt
done
tail -4 $OUT/b64.txt
