#!/bin/bash
# One H200: the bf16 decode attention at batch 16-64 — kernels/dev/attn_decode --quick --min-batch 8 (every merge
# mode and splits per block against the batch-size policy, batch 8-64; attn_decode.txt), and Nsight Compute (its base
# clock) on one batch-64 ctx-512 attention launch of frigg-bench decode: speed of light, memory, occupancy, launch
# and warp-state sections (sol.txt) and the warp-stall samples per SASS line (stalls.txt, scripts/ncu-stalls).
# Run on the GPU host from the project root with .deps carried.
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/bin/frigg-bench build-gpu/dev/attn_decode \
    > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout 240 build-gpu/dev/attn_decode --quick --min-batch 8 > $R/attn_decode.txt 2>&1; echo "attn_decode rc $?" | tee -a $R/log.txt
el attn_decode
BENCH="--random-mimir --seed 1 --repeats 3 --steps 4 --batch 64 --ctx 512 --kv-dtypes bf16 decode"
timeout 90 ncu --kernel-name regex:attn_decode_kernel --launch-skip 300 --launch-count 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SourceCounters \
    -f -o /tmp/st build-gpu/bin/frigg-bench $BENCH > /tmp/ncu.log 2>&1; echo "ncu rc $?" | tee -a $R/log.txt
ncu --import /tmp/st.ncu-rep --print-details all > $R/sol.txt 2>> $R/log.txt
ncu --import /tmp/st.ncu-rep --page source --csv --print-source sass > /tmp/st.csv 2>> $R/log.txt
python3 scripts/ncu-stalls /tmp/st.csv 40 > $R/stalls.txt 2>&1
nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >> $R/smi.txt 2>&1
el done
