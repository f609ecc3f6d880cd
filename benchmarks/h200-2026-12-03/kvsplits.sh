#!/bin/bash
# One H200: kernels/dev/attn_decode_i8 — the int8-KV decode attention by merge mode and split count (see the
# program's header), batch 1..64 at ctx 512..4096. Run on the GPU host from the project root with .deps carried.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/dev/attn_decode_i8 > /tmp/build.log 2>&1 \
  || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 300 build-gpu/dev/attn_decode_i8 > $R/attn_decode_i8.txt 2>&1; echo "attn_decode_i8 rc $?" | tee -a $R/log.txt
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
