#!/bin/bash
# One H200: where batch-1 decode with the int8 KV cache spends its step against the bf16 cache, ctx 4096 — Nsight
# Compute's duration of every kernel of two decode steps (kern-<kv>.txt, per kernel name) and the sections of one
# decode-attention launch (attn-<kv>-<arm>.txt), for the working tree ("new") and 99673cf ("base", int8 only).
# Run on the GPU host from the project root with .deps and .devrun carried (.devrun/base-src.tar.xz as kvdepth.sh's).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
ROOT=$PWD; N=$ROOT/build-gpu; P=/tmp/base/b
rm -rf /tmp/base; mkdir -p /tmp/base && tar xJf .devrun/base-src.tar.xz -C /tmp/base && ln -sfn $ROOT/.deps /tmp/base/.deps || exit 1
( make -j12 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench \
    > /tmp/build-new.log 2>&1; echo "new rc $?" >> /tmp/build-new.log ) &
npid=$!
( cd /tmp/base && make -j4 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=b BIN=b/bin b/bin/frigg-bench > /tmp/build-base.log 2>&1
  echo "base rc $?" >> /tmp/build-base.log ) &
bpid=$!
wait $npid $bpid
tail -qn1 /tmp/build-new.log /tmp/build-base.log | tee -a $R/log.txt
[ -x $N/bin/frigg-bench ] && [ -x $P/bin/frigg-bench ] || { tail -30 /tmp/build-*.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
BENCH="--random-mimir --seed 1 --repeats 3 --steps 4 --batch 1 --ctx 4096 decode"
for kv in bf16 int8; do
  timeout 150 ncu --metrics gpu__time_duration.sum --launch-skip 6000 --launch-count 1304 --print-summary per-kernel \
      $N/bin/frigg-bench $BENCH --kv-dtypes $kv > $R/kern-$kv.txt 2>&1; echo "ncu kern $kv rc $?" | tee -a $R/log.txt
  el "kern $kv"
done
for x in new:bf16 new:int8 base:int8; do arm=${x%:*}; kv=${x#*:}; B=$N; [ $arm = base ] && B=$P
  timeout 60 ncu --kernel-name regex:attn_decode_kernel --launch-skip 300 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section SchedulerStats $B/bin/frigg-bench $BENCH --kv-dtypes $kv > $R/attn-$kv-$arm.txt 2>&1
  echo "ncu attn $kv $arm rc $?" | tee -a $R/log.txt
done
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
