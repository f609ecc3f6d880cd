#!/bin/bash
# One H200: where a batch-64 decode step at ctx 512 (bf16 cache) spends its time — Nsight Compute (its default base
# clock, kernels serialized) on frigg-bench decode: the duration of every kernel in a window of 2,602 launches after
# the 64 prefills (kern.txt, per kernel name), and of 128 decode-attention launches alone (attn.txt). Run on the
# GPU host from the project root with .deps carried.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench > /tmp/build.log 2>&1 \
  || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
BENCH="--random-mimir --seed 1 --repeats 3 --steps 4 --batch 64 --ctx 512 --kv-dtypes bf16 decode"
timeout 60 ncu --kernel-name regex:attn_decode_kernel --launch-skip 300 --launch-count 128 --metrics gpu__time_duration.sum \
    --print-summary per-kernel build-gpu/bin/frigg-bench $BENCH > $R/attn.txt 2>&1; echo "ncu attn rc $?" | tee -a $R/log.txt
el attn
timeout 200 ncu --launch-skip 100000 --launch-count 2602 --metrics gpu__time_duration.sum --print-summary per-kernel \
    build-gpu/bin/frigg-bench $BENCH > $R/kern.txt 2>&1; echo "ncu kern rc $?" | tee -a $R/log.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
