#!/bin/bash
# One H200: every cuBLASLt configuration of the decode step's four layer GEMMs at 32 and 64 rows against
# cublasGemmEx (kernels/dev/prefill --decode-gemm-search), then the engine's own --decode-gemm timings.
# Run on the GPU host from the project root with .deps carried. Results in $OUT/r (out.tgz).
set -o pipefail
export PATH=/usr/local/cuda/bin:$PATH CUDA_VISIBLE_DEVICES=0
T0=$(date +%s); R=/tmp/r; rm -rf $R; mkdir -p $R; trap 'tar czf $OUT/out.tgz -C /tmp r' EXIT
el() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a $R/log.txt; }
git log -1 --format='tree of %H (the device tool copies the working tree; git status below)' >> $R/log.txt 2>&1
git status --short >> $R/log.txt 2>&1
make -j16 DEPS_ROOT=.deps/root CUDA_ARCHS=90 BUILD=build-gpu BIN=build-gpu/bin build-gpu/dev/prefill > /tmp/build.log 2>&1 \
    || { tail -30 /tmp/build.log | tee -a $R/log.txt; exit 1; }
el built
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
timeout ${SEARCH_S:-420} build-gpu/dev/prefill --decode-gemm-search ${TS:-64,32} > $R/search.txt 2>&1
el "search rc $?"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> $R/smi.txt 2>&1
grep -E "^search|#0 |#1 |#2 |^check|^PASS|^FAIL" $R/search.txt
